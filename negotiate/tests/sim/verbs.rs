//! The simulated verbs backend both sides' production data paths run over: the requester's
//! (`negotiate::datapath::send_call`, `PendingCall::complete` and `abandon`, with
//! `WindowRegistrar`'s memory windows) and the responder's (`negotiate::server::serve_call`),
//! each on a `negotiate::datapath::Transport<SimVerbs>`.
//!
//! Every work request executes when it is posted, as the in-process backend's do, and its
//! completion (when signaled, or failed) is queued at once, so the data path's waits never
//! block and the simulator stays single-threaded and deterministic. The peers reach each
//! other's memory only through the memory windows a queue pair bound ([`Net`]): an RDMA
//! Read or Write with a key that is not valid, not bound on this connection, lacks the right,
//! or falls outside its window is a remote access error, which, as on RC hardware, fails the
//! work request and moves the queue pair to Error. A connection that goes down takes the
//! windows bound on it (the fence RFC 8166 section 4.5.4 relies on). Sends are kept in an
//! outbox that the simulator puts on its simulated link with its delays.
//!
//! Receives are not simulated: the simulator hands each message to the receiving side's
//! core itself, as the production receive pool hands over its bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rpcrdma_verbs::{
    Access, Backend, CmEvent, Completion, ConnectRequest, Error, Listener, MemoryRegion, Opcode, ProtectionDomain,
    QpCaps, QpState, QueuePair, RemoteBuf, Result, SendFlags, Sge, Status,
};
use std::collections::HashMap;

/// A work request the simulated queue pair does not take (EOPNOTSUPP), saying why.
fn unsupported(why: &'static str) -> Error {
    Error::Os { call: why, errno: 95 }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The backend: its regions are local memory, its queue pairs reach the peer's through the
/// windows in a [`Net`].
pub struct SimVerbs;

/// Never made: the simulator connects its links itself.
pub enum NoListener {}

/// Never made: the simulator connects its links itself.
pub enum NoRequest {}

impl Backend for SimVerbs {
    type Pd = SimPd;
    type Region = SimRegion;
    type Qp = SimQp;
    type Listener = NoListener;
    type Request = NoRequest;

    fn any_address(&self) -> String {
        "sim:*".into()
    }

    fn alloc_pd(&self) -> Result<SimPd> {
        Ok(SimPd)
    }

    fn listen_with(&self, addr: &str, _: &rpcrdma_verbs::ListenOptions) -> Result<NoListener> {
        Err(Error::BadAddress(format!("{addr}: the simulator connects its links itself")))
    }

    fn connect(&self, _: &SimPd, addr: &str, _: &[u8], _: QpCaps, _: Duration) -> Result<(SimQp, Vec<u8>)> {
        Err(Error::BadAddress(format!("{addr}: the simulator connects its links itself")))
    }
}

impl Listener for NoListener {
    type Request = NoRequest;

    fn local_addr(&self) -> String {
        match *self {}
    }

    fn get_request(&self, _: Duration) -> Result<NoRequest> {
        match *self {}
    }

    fn turned_away(&self) -> u64 {
        match *self {}
    }

    fn close(&self) {
        match *self {}
    }
}

impl ConnectRequest for NoRequest {
    type Pd = SimPd;
    type Qp = SimQp;

    fn private_data(&self) -> &[u8] {
        match *self {}
    }

    fn peer(&self) -> Option<rpcrdma_verbs::PeerAddress> {
        match *self {}
    }

    fn accept_owning(
        self,
        _: &SimPd,
        _: &[u8],
        _: QpCaps,
        _: impl FnOnce(SimQp) -> (SimQp, Result<()>),
    ) -> Result<SimQp> {
        match self {}
    }

    fn reject(self) {
        match self {}
    }
}

/// A protection domain.
#[derive(Clone)]
pub struct SimPd;

static NEXT_KEY: AtomicU32 = AtomicU32::new(1);

impl ProtectionDomain for SimPd {
    type Region = SimRegion;

    fn register(&self, buf: Vec<u8>, access: Access) -> Result<SimRegion> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        Ok(SimRegion(Arc::new(RegionInner { key, access, len: buf.len(), buf: Mutex::new(buf) })))
    }
}

/// A region of one side's memory.
#[derive(Clone)]
pub struct SimRegion(Arc<RegionInner>);

struct RegionInner {
    key: u32,
    access: Access,
    len: usize,
    buf: Mutex<Vec<u8>>,
}

impl MemoryRegion for SimRegion {
    fn addr(&self) -> u64 {
        u64::from(self.0.key) << 32
    }

    fn len(&self) -> usize {
        self.0.len
    }

    fn rkey(&self) -> u32 {
        self.0.key
    }

    fn lkey(&self) -> u32 {
        self.0.key
    }

    fn access(&self) -> Access {
        self.0.access
    }

    fn with<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T {
        f(&lock(&self.0.buf))
    }

    fn with_mut<T>(&self, f: impl FnOnce(&mut [u8]) -> T) -> T {
        f(&mut lock(&self.0.buf))
    }

    type Bytes<'a> = SimBytes<'a>;
    fn bytes(&self) -> SimBytes<'_> {
        SimBytes(lock(&self.0.buf))
    }

    fn deregister(self) -> Result<Vec<u8>> {
        Ok(std::mem::take(&mut *lock(&self.0.buf)))
    }
}

/// A region's bytes held for reading.
pub struct SimBytes<'a>(std::sync::MutexGuard<'a, Vec<u8>>);

impl std::ops::Deref for SimBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// The memory windows open to the peers, by rkey: what an RDMA Read or Write of the peer of
/// a link can reach. A cheap handle, shared by every simulated queue pair of a run.
#[derive(Clone, Default)]
pub struct Net(Arc<Mutex<Windows>>);

#[derive(Default)]
struct Windows {
    open: HashMap<u32, Window>,
    next_rkey: u32,
}

struct Window {
    region: SimRegion,
    offset: usize,
    len: usize,
    access: Access,
    link: u32,
}

impl Window {
    /// The window's first virtual address, as its `RemoteBuf` says.
    fn base(rkey: u32) -> u64 {
        u64::from(rkey) << 32
    }

    /// Where in the region `len` bytes at `addr` lie, if the window holds them all.
    fn range(&self, rkey: u32, addr: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let at = usize::try_from(addr.checked_sub(Window::base(rkey))?).ok()?;
        (at.checked_add(len)? <= self.len).then(|| self.offset + at..self.offset + at + len)
    }
}

impl Net {
    fn windows(&self) -> MutexGuard<'_, Windows> {
        lock(&self.0)
    }

    /// Binds a window over `region[offset..offset + len]` on link `link`.
    fn bind(&self, link: u32, region: &SimRegion, offset: usize, len: usize, access: Access) -> RemoteBuf {
        let mut w = self.windows();
        w.next_rkey = w.next_rkey.wrapping_add(0x101);
        let rkey = w.next_rkey;
        w.open.insert(rkey, Window { region: region.clone(), offset, len, access, link });
        RemoteBuf { addr: Window::base(rkey), rkey }
    }

    /// Invalidates `rkey`.
    pub fn invalidate(&self, rkey: u32) {
        self.windows().open.remove(&rkey);
    }

    /// Link `link` went down: the windows bound on it die with it.
    pub fn drop_link(&self, link: u32) {
        self.windows().open.retain(|_, w| w.link != link);
    }

    /// The region and the range in it that `len` bytes at `addr` under `rkey` reach for the
    /// peer of `link` with `right`; `None` is a remote access error.
    fn reach(
        &self,
        link: u32,
        rkey: u32,
        addr: u64,
        len: usize,
        right: Access,
    ) -> Option<(SimRegion, std::ops::Range<usize>)> {
        let w = self.windows();
        let win = w.open.get(&rkey).filter(|w| w.link == link && w.access.contains(right))?;
        Some((win.region.clone(), win.range(rkey, addr, len)?))
    }

    /// An RDMA Read by the peer of `link` into `into`: false is a remote access error.
    fn read(&self, link: u32, rkey: u32, addr: u64, into: &mut [u8]) -> bool {
        let Some((region, range)) = self.reach(link, rkey, addr, into.len(), Access::REMOTE_READ) else { return false };
        region.with(|b| b.get(range).map(|src| into.copy_from_slice(src)).is_some())
    }

    /// An RDMA Write by the peer of `link`: false is a remote access error.
    fn write(&self, link: u32, rkey: u32, addr: u64, data: &[u8]) -> bool {
        let Some((region, range)) = self.reach(link, rkey, addr, data.len(), Access::REMOTE_WRITE) else {
            return false;
        };
        region.with_mut(|b| b.get_mut(range).map(|dst| dst.copy_from_slice(data)).is_some())
    }

    /// Windows open to a peer.
    pub fn live(&self) -> usize {
        self.windows().open.len()
    }
}

/// One side's end of simulated link `link`.
pub struct SimQp {
    link: u32,
    net: Net,
    st: Mutex<QpInner>,
}

#[derive(Default)]
struct QpInner {
    error: bool,
    completions: VecDeque<Completion>,
    sent: Vec<Vec<u8>>,
}

impl SimQp {
    pub fn new(link: u32, net: Net) -> SimQp {
        SimQp { link, net, st: Mutex::default() }
    }

    /// The Sends posted since the last call, in order: what goes on the link (if it is still
    /// up).
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.st).sent)
    }

    /// Whether work requests still execute.
    fn up(&self) -> bool {
        !lock(&self.st).error
    }

    /// Completes work request `wr_id` now: for `ok`, a success, queued only when `flags`
    /// signal it; otherwise a remote access error that moves the queue pair to Error (as RC
    /// does). Once it is in Error every work request completes flushed.
    fn complete(&self, wr_id: u64, opcode: Opcode, byte_len: usize, ok: bool, flags: SendFlags) {
        let mut st = lock(&self.st);
        let status = match (st.error, ok) {
            (true, _) => Status::WorkRequestFlushed,
            (false, true) => Status::Success,
            (false, false) => Status::RemoteAccessError,
        };
        if status == Status::Success && !flags.contains(SendFlags::SIGNALED) {
            return;
        }
        if status == Status::RemoteAccessError {
            st.error = true;
            drop(st);
            self.net.drop_link(self.link);
            st = lock(&self.st);
        }
        let byte_len = if status == Status::Success { byte_len as u32 } else { 0 };
        st.completions.push_back(Completion { wr_id, status, opcode, byte_len, invalidated_rkey: None });
    }
}

/// The bytes `sges` gather.
fn gather(sges: &[Sge<'_, SimRegion>]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in sges {
        s.region.with(|b| out.extend_from_slice(&b[s.offset..s.offset + s.len]));
    }
    out
}

impl QueuePair for SimQp {
    type Region = SimRegion;

    fn post_recv(&self, _: u64, _: Sge<'_, SimRegion>) -> Result<()> {
        Err(unsupported("the simulator hands received messages over itself"))
    }

    fn post_send(&self, wr_id: u64, sges: &[Sge<'_, SimRegion>], invalidate: Option<u32>) -> Result<()> {
        self.post_send_with(wr_id, sges, invalidate, SendFlags::SIGNALED)
    }

    fn post_send_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, SimRegion>],
        invalidate: Option<u32>,
        flags: SendFlags,
    ) -> Result<()> {
        // The simulated peers never both set the R flag (RFC 8797 section 4.1), so a Send
        // with Invalidate is a bug: refused, and the side that posted it closes the
        // connection over a call it could answer, which the simulator reports.
        if invalidate.is_some() {
            return Err(unsupported("Send with Invalidate without the R flag negotiated"));
        }
        // Kept even on a queue pair in Error: the simulator's link decides where it goes,
        // and a link that is down delivers it nowhere (recorded as such in the trace).
        let bytes = gather(sges);
        let len = bytes.len();
        lock(&self.st).sent.push(bytes);
        self.complete(wr_id, Opcode::Send, len, true, flags);
        Ok(())
    }

    fn post_write(&self, wr_id: u64, sges: &[Sge<'_, SimRegion>], remote: RemoteBuf) -> Result<()> {
        self.post_write_with(wr_id, sges, remote, SendFlags::SIGNALED)
    }

    fn post_write_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, SimRegion>],
        remote: RemoteBuf,
        flags: SendFlags,
    ) -> Result<()> {
        let bytes = gather(sges);
        let ok = !self.up() || self.net.write(self.link, remote.rkey, remote.addr, &bytes);
        self.complete(wr_id, Opcode::RdmaWrite, bytes.len(), ok, flags);
        Ok(())
    }

    fn post_read(&self, wr_id: u64, sges: &[Sge<'_, SimRegion>], remote: RemoteBuf) -> Result<()> {
        let len: usize = sges.iter().map(|s| s.len).sum();
        let mut bytes = vec![0; len];
        let ok = self.up() && self.net.read(self.link, remote.rkey, remote.addr, &mut bytes);
        if ok {
            let mut at = 0;
            for s in sges {
                s.region.with_mut(|b| b[s.offset..s.offset + s.len].copy_from_slice(&bytes[at..at + s.len]));
                at += s.len;
            }
        }
        // A Read on a queue pair already in Error completes flushed.
        self.complete(wr_id, Opcode::RdmaRead, len, ok || !self.up(), SendFlags::SIGNALED);
        Ok(())
    }

    fn post_local_invalidate(&self, wr_id: u64, rkey: u32) -> Result<()> {
        self.post_local_invalidate_with(wr_id, rkey, SendFlags::SIGNALED)
    }

    fn post_local_invalidate_with(&self, wr_id: u64, rkey: u32, flags: SendFlags) -> Result<()> {
        if self.up() {
            self.net.invalidate(rkey);
        }
        self.complete(wr_id, Opcode::LocalInvalidate, 0, true, flags);
        Ok(())
    }

    fn post_bind_window(
        &self,
        wr_id: u64,
        region: &SimRegion,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<RemoteBuf> {
        self.post_bind_window_with(wr_id, region, offset, len, access, SendFlags::SIGNALED)
    }

    fn post_bind_window_with(
        &self,
        wr_id: u64,
        region: &SimRegion,
        offset: usize,
        len: usize,
        access: Access,
        flags: SendFlags,
    ) -> Result<RemoteBuf> {
        // A window over memory outside its region is refused at once, as rdma-core does.
        if offset.checked_add(len).is_none_or(|end| end > region.len()) {
            return Err(Error::OutOfBounds { offset, len, region_len: region.len() });
        }
        let remote = self.net.bind(self.link, region, offset, len, access);
        if !self.up() {
            // Bound on a queue pair in Error: flushed, and the window dead with the link.
            self.net.invalidate(remote.rkey);
        }
        self.complete(wr_id, Opcode::BindWindow, 0, true, flags);
        Ok(remote)
    }

    fn caps(&self) -> QpCaps {
        QpCaps::default()
    }

    fn poll_cq(&self, out: &mut [Completion]) -> usize {
        let mut st = lock(&self.st);
        let n = out.len().min(st.completions.len());
        for (slot, c) in out.iter_mut().zip(st.completions.drain(..n)) {
            *slot = c;
        }
        n
    }

    /// Never waits: every work request completed when it was posted.
    fn wait_cq(&self, _: Duration) -> Option<Completion> {
        lock(&self.st).completions.pop_front()
    }

    fn cm_event(&self, _: Duration) -> Option<CmEvent> {
        None
    }

    fn state(&self) -> QpState {
        if self.up() {
            QpState::Ready
        } else {
            QpState::Error
        }
    }

    /// Both ends go down with the link; the windows bound on it die with it.
    fn disconnect(&self) {
        lock(&self.st).error = true;
        self.net.drop_link(self.link);
    }
}
