//! Protection domains and registered memory regions (`ibv_alloc_pd`, `ibv_reg_mr`) on the
//! first RDMA device librdmacm finds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rdma_sys::*;

use super::ffi::{errno, os_error, Ptr};
use crate::{lock, Access, Error, MemoryRegion, ProtectionDomain, Result};

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

/// Allocates a protection domain on the device (`ibv_alloc_pd`).
pub(super) fn alloc_pd() -> Result<RdmaPd> {
    let ctx = device()?;
    // SAFETY: `ctx` is a live device context (see `device`).
    let pd = unsafe { ibv_alloc_pd(ctx.0) };
    if pd.is_null() {
        return Err(os_error("ibv_alloc_pd", errno()));
    }
    Ok(RdmaPd(Arc::new(PdInner { pd: Ptr(pd), regions: Mutex::new(HashMap::new()) })))
}

/// A protection domain (`ibv_alloc_pd`), deallocated when the last handle, region and queue
/// pair using it are gone.
#[derive(Clone)]
pub struct RdmaPd(pub(super) Arc<PdInner>);

pub(super) struct PdInner {
    pub(super) pd: Ptr<ibv_pd>,
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
    pub(super) fn invalidate(&self, rkey: u32) -> bool {
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
pub struct RdmaRegion(pub(super) Arc<RegionInner>);

pub(super) struct RegionInner {
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
    pub(super) fn mr(&self) -> Option<Ptr<ibv_mr>> {
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

/// An rdma-core region's bytes held for reading ([`MemoryRegion::bytes`]).
pub struct RdmaRegionBytes<'a>(std::sync::MutexGuard<'a, RegionState>);

impl std::ops::Deref for RdmaRegionBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0.buf
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
    type Bytes<'a> = RdmaRegionBytes<'a>;
    fn bytes(&self) -> RdmaRegionBytes<'_> {
        RdmaRegionBytes(lock(&self.0.state))
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
