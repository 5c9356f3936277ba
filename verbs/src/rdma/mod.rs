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
//! * One CQ per queue pair, on a completion channel of its own.
//!   [`QueuePair::wait_cq`](crate::QueuePair::wait_cq) polls, and when the CQ is empty arms it
//!   (`ibv_req_notify_cq`), polls again (a completion that arrived before the arm raises no
//!   event) and sleeps in `poll(2)` until the channel's event (`ibv_get_cq_event`, acknowledged
//!   at once) or its timeout; any number of threads may wait at once. Completions the backend
//!   makes itself (below) wake sleepers through an eventfd. An epoll fd over both is
//!   [`QueuePair::completion_fd`](crate::QueuePair::completion_fd), for event loops.
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
//! * Its diagnostics go to the `log` facade (target `rpcrdma_verbs::rdma::...`): error completions
//!   (with the raw `ibv_wc_status`) and CM events at debug, disconnects at info, failures
//!   of the CM event channel or of re-arming a CQ at warn. The application's logger shows
//!   them (for instance `env_logger` with `RUST_LOG=verbs=debug`); with none installed they
//!   cost a load and a compare.
//! * Received private data is delivered exactly as librdmacm hands it over (padded by the CM
//!   to 56 bytes on connect and 196 on accept).
//! * Setup failures that the crate's [`Error`](crate::Error) has no variant for (no device, `ibv_alloc_pd`
//!   or `ibv_create_cq` failing, ...) are reported as [`Error::Os`](crate::Error::Os) naming the call
//!   and its errno; [`Error::BadAddress`](crate::Error::BadAddress) is for addresses only.

// Who uses whom, one way only: `cm` (listen, connect, accept) builds `RdmaQp`s (`qp`) on
// `Conn`s (`conn`: the cm_id, its event channel and the QP's resources); `qp` and `conn` use
// `pd`'s protection domains and regions; everything uses `ffi`.
mod cm;
mod conn;
mod cq;
mod ffi;
mod pd;
mod qp;

use std::net::Ipv4Addr;
use std::time::Duration;

pub use cm::{RdmaListener, RdmaRequest};
pub use pd::{RdmaPd, RdmaRegion, RdmaRegionBytes};
pub use qp::RdmaQp;

use crate::{Backend, ListenOptions, QpCaps, Result};

/// The rdma-core backend: a local IPv4 address on an RDMA device (`rdma_bind_addr` binds it
/// for [`listen`](Backend::listen) on [`any_address`](Backend::any_address)).
///
/// Needs an RDMA device (Soft-RoCE will do) whose netdev has the address; not run here.
///
/// ```no_run
/// use std::net::Ipv4Addr;
/// use std::time::Duration;
/// use rpcrdma_verbs::*;
/// let rdma = Rdma::new(Ipv4Addr::new(10, 0, 2, 15));
/// let pd = rdma.alloc_pd().unwrap();
/// // Connect to an RPC-over-RDMA server (NFS's port 20049), as any Backend does.
/// let (qp, accept_data) = rdma.connect(&pd, "10.0.2.16:20049", &[], QpCaps::default(), Duration::from_secs(5)).unwrap();
/// assert_eq!(accept_data.len(), ACCEPT_PRIVATE_DATA_MAX);
/// let buf = pd.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
/// qp.post_recv(1, Sge::whole(&buf)).unwrap();
/// assert_eq!(qp.state(), QpState::Ready);
/// ```
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
    /// # use rpcrdma_verbs::Rdma;
    /// let host = Ipv4Addr::new(10, 0, 2, 15);
    /// assert_eq!(Rdma::new(host).host(), host);
    /// ```
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    /// The backend for tests: the address in the environment variable `RDMA_TEST_ADDR`
    /// (`"a.b.c.d"` or `"a.b.c.d:port"`, the port ignored). When it is unset, prints a SKIP line
    /// and returns `None`, but panics under `CI=true` or `RDMA_TEST_REQUIRED=1` (which the guest
    /// scripts set); when it is malformed, panics: [`crate::test_env::rdma_test_host`].
    pub fn from_test_env() -> Option<Self> {
        crate::test_env::rdma_test_host().map(Rdma::new)
    }
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
        pd::alloc_pd()
    }

    /// Its queue pairs wake a waker: the process's readiness loop watches an armed
    /// completion queue's fd ([`QueuePair::arm_waker`](crate::QueuePair::arm_waker)).
    fn wakes_wakers(&self) -> bool {
        true
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
