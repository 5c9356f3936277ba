//! The rdma-core backend (cargo feature `rdma`): the crate's traits on libibverbs and
//! librdmacm through rdma-sys, for real RDMA devices and Soft-RoCE (rdma_rxe).
//!
//! Building it needs libibverbs-dev, librdmacm-dev and libclang (rdma-sys runs bindgen);
//! running it needs an RDMA device with an IPv4 address: addresses are `"a.b.c.d:port"`, and
//! [`Rdma::new`] names the local address that [`Backend::any_address`] binds.
//!
//! How it maps the verbs, and where it differs from the crate's documented semantics:
//!
//! * One rdma_cm event channel per listener and per connection (an accepted id is migrated to
//!   its own channel), so [`QueuePair::cm_event`](crate::QueuePair::cm_event) sees only its connection's events. Each
//!   queue pair has a thread reading its channel: on `RDMA_CM_EVENT_DISCONNECTED` it calls
//!   `rdma_disconnect` (the DREP the peer waits for; it also moves the QP to Error, which
//!   flushes it) and stashes [`CmEvent::Disconnected`](crate::CmEvent::Disconnected). Dropping the queue pair stops it.
//! * Every connection uses `rnr_retry_count` 0 (a Send with no Receive posted fails at once
//!   with [`Status::RnrRetryExceeded`](crate::Status::RnrRetryExceeded)) and a small transport `retry_count`.
//! * One CQ per queue pair, polled; [`QueuePair::wait_cq`](crate::QueuePair::wait_cq) polls every 50 µs rather than
//!   arming a completion channel (`ibv_req_notify_cq` is not used).
//! * Queue capacities are enforced by the backend (providers round them up, rxe to 2^n-1).
//! * Any error completion other than a flush makes this side call `rdma_disconnect`, so the
//!   peer too sees [`CmEvent::Disconnected`](crate::CmEvent::Disconnected) and goes to [`QpState::Error`](crate::QpState::Error), as the crate
//!   promises. Work requests posted once this side knows it is in the Error state are not
//!   handed to the device; they complete with [`Status::WorkRequestFlushed`](crate::Status::WorkRequestFlushed) from the backend.
//! * Regions are plain `ibv_reg_mr` registrations (with `IBV_ACCESS_MW_BIND` added, so any
//!   region can carry windows). A plain MR cannot be invalidated with `IBV_WR_LOCAL_INV` (rxe
//!   fails the work request and the queue pair), so
//!   [`QueuePair::post_local_invalidate`](crate::QueuePair::post_local_invalidate) of a region's rkey is implemented as
//!   deregistration (`ibv_dereg_mr`) of the region with that rkey in the queue pair's protection
//!   domain, keeping the buffer for the CPU; its completion is produced by the backend when the
//!   deregistration is done.
//! * [Memory windows](crate::QueuePair::post_bind_window) are real type-2 windows: `ibv_alloc_mw`,
//!   then `IBV_WR_BIND_MW` with the key `ibv_inc_rkey` gives. Local Invalidate of a window is
//!   the real `IBV_WR_LOCAL_INV`, and Send with Invalidate the real `IBV_WR_SEND_WITH_INV`; a
//!   window is freed (`ibv_dealloc_mw`) when its invalidation is seen (the Local Invalidate's
//!   completion, or a Receive reporting its rkey) or when the queue pair is dropped.
//! * Work completion statuses map one to one where the crate has the status; otherwise
//!   `IBV_WC_LOC_QP_OP_ERR`, `IBV_WC_LOC_ACCESS_ERR` and `IBV_WC_MW_BIND_ERR` become
//!   [`Status::LocalProtectionError`](crate::Status::LocalProtectionError), `IBV_WC_REM_INV_RD_REQ_ERR` becomes
//!   [`Status::RemoteInvalidRequest`](crate::Status::RemoteInvalidRequest), `IBV_WC_RETRY_EXC_ERR` [`Status::RetryExceeded`](crate::Status::RetryExceeded), and everything else (`IBV_WC_REM_OP_ERR`, fatal errors, ...) [`Status::RemoteOperationError`](crate::Status::RemoteOperationError).
//! * Known differences on Soft-RoCE (rdma_rxe, Linux 6.1), seen running tests/semantics.rs in
//!   the guest: a Send larger than the Receive fails that Receive with `IBV_WC_LOC_QP_OP_ERR`
//!   (so [`Status::LocalProtectionError`](crate::Status::LocalProtectionError), not [`Status::LocalLengthError`](crate::Status::LocalLengthError)) and the Send with
//!   `IBV_WC_REM_OP_ERR` ([`Status::RemoteOperationError`](crate::Status::RemoteOperationError), not
//!   [`Status::RemoteInvalidRequest`](crate::Status::RemoteInvalidRequest)); a Send with Invalidate naming a region's rkey fails the
//!   receiver's Receive with `IBV_WC_REM_INV_REQ_ERR` (after writing the payload into it) while
//!   the Send succeeds; an access through a window is checked against the range of the MR
//!   under it, not the window's own (so on rxe a window protects at region granularity). For a
//!   Receive consumed by a Send with Invalidate, rxe sets `invalidated_rkey` but not
//!   `IBV_WC_WITH_INV`; the rkey is reported when either says so (no Send with Immediate is
//!   ever posted here).
//! * Setting `RDMA_VERBS_DEBUG` prints error completions (with the raw `ibv_wc_status`), CM
//!   events and disconnects on stderr.
//! * Received private data is delivered exactly as librdmacm hands it over (padded by the CM
//!   to 56 bytes on connect and 196 on accept).
//! * Setup failures that the crate's [`Error`] has no variant for (no device, `ibv_alloc_pd`
//!   or `ibv_create_cq` failing, ...) are reported as [`Error::BadAddress`] naming the call
//!   and errno.

mod cm;
mod ffi;
mod qp;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use rdma_sys::*;

pub use cm::{RdmaListener, RdmaRequest};
use ffi::{errno, os_error, Ptr};
pub use qp::RdmaQp;

use crate::{lock, Access, Backend, Error, ListenOptions, MemoryRegion, ProtectionDomain, QpCaps, Result};

/// The rdma-core backend: a local IPv4 address on an RDMA device (`rdma_bind_addr` binds it
/// for [`listen`](Backend::listen) on [`any_address`](Backend::any_address)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rdma {
    host: Ipv4Addr,
}

impl Rdma {
    /// A backend whose wildcard address is `host:0` (`host` being an address of an RDMA
    /// device, e.g. rxe's netdev address).
    pub fn new(host: Ipv4Addr) -> Self {
        Rdma { host }
    }

    /// The device address this backend was made with (for [`Rdma::from_test_env`], the
    /// address in `RDMA_TEST_ADDR`, without its port).
    ///
    /// ```
    /// # use std::net::Ipv4Addr;
    /// # use verbs::Rdma;
    /// let host = Ipv4Addr::new(10, 0, 2, 15);
    /// assert_eq!(Rdma::new(host).host(), host);
    /// ```
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    /// The backend for tests: the address in the environment variable `RDMA_TEST_ADDR`
    /// (`"a.b.c.d"` or `"a.b.c.d:port"`, the port ignored). When it is unset, prints a SKIP line
    /// and returns `None`; when it is malformed, panics.
    pub fn from_test_env() -> Option<Self> {
        let Ok(v) = std::env::var("RDMA_TEST_ADDR") else {
            eprintln!("SKIP: RDMA_TEST_ADDR not set (run inside the Soft-RoCE guest: guest/run-in-guest)");
            return None;
        };
        let host = v
            .parse::<SocketAddrV4>()
            .map(|a| *a.ip())
            .or_else(|_| v.parse::<Ipv4Addr>())
            .unwrap_or_else(|_| panic!("RDMA_TEST_ADDR={v:?} is not an IPv4 address"));
        Some(Rdma::new(host))
    }
}

/// The device context librdmacm opened for the first RDMA device (`rdma_get_devices`). The
/// cm_ids librdmacm resolves on that device report the same context, so PDs allocated on it
/// serve their queue pairs. Only the first device is used.
fn device() -> Result<Ptr<ibv_context>> {
    static DEVICE: OnceLock<std::result::Result<Ptr<ibv_context>, i32>> = OnceLock::new();
    let r = DEVICE.get_or_init(|| {
        let mut n = 0;
        // SAFETY: rdma_get_devices returns a NULL-terminated array of contexts that librdmacm
        // keeps open for the life of the process; we copy the first pointer and free the array
        // only (rdma_free_devices does not close the contexts).
        unsafe {
            let list = rdma_get_devices(&mut n);
            if list.is_null() {
                return Err(errno());
            }
            let first = if n > 0 { *list } else { std::ptr::null_mut() };
            rdma_free_devices(list);
            if first.is_null() {
                Err(libc::ENODEV)
            } else {
                Ok(Ptr(first))
            }
        }
    });
    r.map_err(|e| os_error("rdma_get_devices", e))
}

impl Backend for Rdma {
    type Pd = RdmaPd;
    type Region = RdmaRegion;
    type Qp = RdmaQp;
    type Listener = RdmaListener;
    type Request = RdmaRequest;

    fn any_address(&self) -> String {
        format!("{}:0", self.host)
    }

    fn alloc_pd(&self) -> Result<RdmaPd> {
        let ctx = device()?;
        // SAFETY: `ctx` is a live device context (see `device`).
        let pd = unsafe { ibv_alloc_pd(ctx.0) };
        if pd.is_null() {
            return Err(os_error("ibv_alloc_pd", errno()));
        }
        Ok(RdmaPd(Arc::new(PdInner { pd: Ptr(pd), regions: Mutex::new(HashMap::new()) })))
    }

    fn listen_with(&self, addr: &str, opts: &ListenOptions) -> Result<RdmaListener> {
        cm::listen(addr, opts)
    }

    fn connect(
        &self,
        pd: &RdmaPd,
        addr: &str,
        private_data: &[u8],
        caps: QpCaps,
        timeout: Duration,
    ) -> Result<(RdmaQp, Vec<u8>)> {
        cm::connect(pd, addr, private_data, caps, timeout)
    }
}

/// A protection domain (`ibv_alloc_pd`), deallocated when the last handle, region and queue
/// pair using it are gone.
#[derive(Clone)]
pub struct RdmaPd(Arc<PdInner>);

pub(crate) struct PdInner {
    pd: Ptr<ibv_pd>,
    /// Live registrations by rkey, for Local Invalidate.
    regions: Mutex<HashMap<u32, Weak<RegionInner>>>,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: every region and queue pair holds an Arc to this, so none is left.
        unsafe { ibv_dealloc_pd(self.pd.0) };
    }
}

impl PdInner {
    /// Invalidates the region registered here with `rkey` by deregistering it; false if no
    /// live region has that rkey.
    fn invalidate(&self, rkey: u32) -> bool {
        let region = lock(&self.regions).remove(&rkey).and_then(|w| w.upgrade());
        region.is_some_and(|r| r.dereg())
    }
}

impl ProtectionDomain for RdmaPd {
    type Region = RdmaRegion;

    fn register(&self, mut buf: Vec<u8>, access: Access) -> Result<RdmaRegion> {
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(Error::InvalidAccess(access));
        }
        // SAFETY: the buffer's heap allocation is owned by the region from here on and never
        // resized or moved until ibv_dereg_mr has run (in `dereg` or `Drop`), so the pinned
        // range stays valid for as long as the MR exists.
        // MW_BIND on every registration: any region may carry memory windows (type 2), the
        // only keys a peer's Send with Invalidate can kill.
        let flags = access.bits() | ibv_access_flags::IBV_ACCESS_MW_BIND.0;
        let mr = unsafe { ibv_reg_mr(self.0.pd.0, buf.as_mut_ptr().cast(), buf.len(), flags as i32) };
        if mr.is_null() {
            let e = errno();
            return Err(if e == libc::EINVAL { Error::InvalidAccess(access) } else { os_error("ibv_reg_mr", e) });
        }
        // SAFETY: `mr` was just returned by ibv_reg_mr.
        let (addr, lkey, rkey) = unsafe { ((*mr).addr as u64, (*mr).lkey, (*mr).rkey) };
        let inner = Arc::new(RegionInner {
            pd: self.0.clone(),
            access,
            addr,
            len: buf.len(),
            lkey,
            rkey,
            state: Mutex::new(RegionState { buf, mr: Ptr(mr), deregistered: false }),
        });
        lock(&self.0.regions).insert(rkey, Arc::downgrade(&inner));
        Ok(RdmaRegion(inner))
    }
}

/// A registered region (`ibv_reg_mr`) owning its buffer. Clones are handles to one region.
#[derive(Clone)]
pub struct RdmaRegion(Arc<RegionInner>);

pub(crate) struct RegionInner {
    pd: Arc<PdInner>,
    access: Access,
    addr: u64,
    len: usize,
    lkey: u32,
    rkey: u32,
    state: Mutex<RegionState>,
}

struct RegionState {
    /// The registered memory; the device reads and writes it through `mr` while it lives.
    buf: Vec<u8>,
    /// Null once invalidated or deregistered.
    mr: Ptr<ibv_mr>,
    /// The buffer was handed back by `deregister`.
    deregistered: bool,
}

impl RegionInner {
    /// The live `ibv_mr`, for binding a window over it; `None` once deregistered.
    fn mr(&self) -> Option<Ptr<ibv_mr>> {
        let mr = lock(&self.state).mr;
        (!mr.is_null()).then_some(mr)
    }

    /// `ibv_dereg_mr`, keeping the buffer; false if already done.
    fn dereg(&self) -> bool {
        let mut st = lock(&self.state);
        if st.mr.is_null() {
            return false;
        }
        // SAFETY: `mr` is live (non-null) and deregistered exactly once, here, under the lock.
        unsafe { ibv_dereg_mr(st.mr.0) };
        st.mr = Ptr::null();
        true
    }
}

impl Drop for RegionInner {
    fn drop(&mut self) {
        let mr = self.state.get_mut().unwrap().mr;
        if !mr.is_null() {
            // SAFETY: the last handle is gone, no posted work request holds one (queue pairs
            // keep clones until completion), so the MR is deregistered before its buffer drops.
            unsafe { ibv_dereg_mr(mr.0) };
        }
        let mut regions = lock(&self.pd.regions);
        if regions.get(&self.rkey).is_some_and(|w| w.strong_count() == 0) {
            regions.remove(&self.rkey);
        }
    }
}

impl MemoryRegion for RdmaRegion {
    fn addr(&self) -> u64 {
        self.0.addr
    }
    fn len(&self) -> usize {
        self.0.len
    }
    fn rkey(&self) -> u32 {
        self.0.rkey
    }
    fn lkey(&self) -> u32 {
        self.0.lkey
    }
    fn access(&self) -> Access {
        self.0.access
    }
    fn with<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T {
        f(&lock(&self.0.state).buf)
    }
    fn with_mut<T>(&self, f: impl FnOnce(&mut [u8]) -> T) -> T {
        f(&mut lock(&self.0.state).buf)
    }
    fn deregister(self) -> Result<Vec<u8>> {
        self.0.dereg();
        lock(&self.0.pd.regions).remove(&self.0.rkey);
        let mut st = lock(&self.0.state);
        if st.deregistered {
            return Err(Error::NotRegistered);
        }
        st.deregistered = true;
        Ok(std::mem::take(&mut st.buf))
    }
}
