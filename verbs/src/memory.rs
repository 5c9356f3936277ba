//! Memory registration vocabulary: access flags, local scatter/gather entries, remote buffers.

bitflags::bitflags! {
    /// Access rights granted when a region is registered (`enum ibv_access_flags`; same bit
    /// values). Local read is always allowed. As `ibv_reg_mr` does, registration refuses
    /// `REMOTE_WRITE` without `LOCAL_WRITE`.
    ///
    /// ```
    /// use rpcrdma_verbs::Access;
    /// let a = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    /// assert!(a.contains(Access::REMOTE_WRITE) && !a.contains(Access::REMOTE_READ));
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        /// The local queue pair may write into the region: needed to post a Receive into it or
        /// to land an RDMA Read in it (`IBV_ACCESS_LOCAL_WRITE`).
        const LOCAL_WRITE = 1;
        /// A peer may RDMA Write into the region with its rkey (`IBV_ACCESS_REMOTE_WRITE`).
        const REMOTE_WRITE = 2;
        /// A peer may RDMA Read from the region with its rkey (`IBV_ACCESS_REMOTE_READ`).
        const REMOTE_READ = 4;
    }
}

/// A local scatter/gather entry (`struct ibv_sge`): `len` bytes at `offset` inside a region
/// registered in the queue pair's protection domain. Where `ibv_sge` names memory by address
/// and lkey, this names it by the region handle, so a backend never trusts a raw pointer.
///
/// ```
/// use rpcrdma_verbs::{Access, Backend, InProcess, MemoryRegion, ProtectionDomain, Sge};
/// let pd = InProcess.alloc_pd().unwrap();
/// let mr = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
/// let sge = Sge::new(&mr, 16, 32);
/// assert_eq!((sge.offset, sge.len), (16, 32));
/// assert_eq!(Sge::whole(&mr).len, 64);
/// ```
#[derive(Debug)]
pub struct Sge<'a, R> {
    /// The registered region.
    pub region: &'a R,
    /// Byte offset inside the region.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

// Manual impls: derive would demand `R: Clone`, but an Sge only borrows its region.
impl<R> Clone for Sge<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for Sge<'_, R> {}

impl<'a, R: crate::MemoryRegion> Sge<'a, R> {
    /// `len` bytes at `offset` in `region`. Range errors surface as a
    /// [`Status::LocalProtectionError`](crate::Status::LocalProtectionError) completion, as
    /// with hardware, not here.
    pub fn new(region: &'a R, offset: usize, len: usize) -> Self {
        Sge { region, offset, len }
    }

    /// The whole region.
    pub fn whole(region: &'a R) -> Self {
        Sge { region, offset: 0, len: region.len() }
    }
}

/// The target of an RDMA Read or Write: a peer's virtual address and the rkey that grants
/// access (`wr.rdma.remote_addr` and `wr.rdma.rkey`). The length is the sum of the local
/// scatter/gather entries, as in `ibv_post_send`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteBuf {
    /// The peer's virtual address (its region's [`addr`](crate::MemoryRegion::addr) plus an offset).
    pub addr: u64,
    /// The peer's rkey for that region.
    pub rkey: u32,
}
