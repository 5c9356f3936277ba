//! The simulated verbs backend the responder's production serving path runs over
//! (`negotiate::server::serve_call` on a `negotiate::datapath::Connection<SimVerbs>`).
//!
//! Every work request executes when it is posted, as the in-process backend's do, and its
//! completion is queued at once, so the data path's waits never block and the simulator stays
//! single-threaded and deterministic. RDMA Reads and Writes go to the requester's simulated
//! registered memory ([`Mem`]), with its rules: a key that is not valid, not bound on this
//! connection, or not writable for a Write is a remote access error, which, as on RC
//! hardware, fails the work request and moves the queue pair to Error. Sends are kept in an
//! outbox that the simulator puts on its simulated link with its delays. What the responder
//! registers of its own never leaves this side (the requester reads none of it), so it is a
//! plain buffer with made-up keys.
//!
//! Receives are not simulated: the simulator hands each message to the connection's `Serve`
//! itself, as the production receive pool hands over its bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rpcrdma_verbs::{
    Access, Backend, CmEvent, Completion, ConnectRequest, Error, Listener, MemoryRegion, Opcode, ProtectionDomain,
    QpCaps, QpState, QueuePair, RemoteBuf, Result, Sge, Status,
};

use super::Mem;

/// A work request the simulated queue pair does not take (EOPNOTSUPP), saying why.
fn unsupported(why: &'static str) -> Error {
    Error::Os { call: why, errno: 95 }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The backend: its protection domains and regions are local memory, its queue pairs reach
/// the requester's [`Mem`].
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
}

impl ConnectRequest for NoRequest {
    type Pd = SimPd;
    type Qp = SimQp;

    fn private_data(&self) -> &[u8] {
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

/// A protection domain of responder memory.
pub struct SimPd;

static NEXT_KEY: AtomicU32 = AtomicU32::new(1);

impl ProtectionDomain for SimPd {
    type Region = SimRegion;

    fn register(&self, buf: Vec<u8>, access: Access) -> Result<SimRegion> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        Ok(SimRegion(Arc::new(RegionInner { key, access, len: buf.len(), buf: Mutex::new(buf) })))
    }
}

/// A region of responder memory.
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

    fn deregister(self) -> Result<Vec<u8>> {
        Ok(std::mem::take(&mut *lock(&self.0.buf)))
    }
}

/// The responder's end of simulated link `link`.
pub struct SimQp {
    link: u32,
    mem: Mem,
    st: Mutex<QpInner>,
}

#[derive(Default)]
struct QpInner {
    error: bool,
    completions: VecDeque<Completion>,
    sent: Vec<Vec<u8>>,
}

impl SimQp {
    pub fn new(link: u32, mem: Mem) -> SimQp {
        SimQp { link, mem, st: Mutex::default() }
    }

    /// The Sends posted since the last call, in order: what goes on the link.
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.st).sent)
    }

    /// Completes work request `wr_id` now: a success, or, for `ok` false, a remote access
    /// error that moves the queue pair to Error (as RC does). Nothing completes once it is
    /// in Error but with a flush.
    fn complete(&self, wr_id: u64, opcode: Opcode, byte_len: usize, ok: bool) {
        let mut st = lock(&self.st);
        let status = match (st.error, ok) {
            (true, _) => Status::WorkRequestFlushed,
            (false, true) => Status::Success,
            (false, false) => Status::RemoteAccessError,
        };
        st.error |= !ok;
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
        // The simulated peers never both set the R flag (RFC 8797 section 4.1), so a Send
        // with Invalidate is a bug in the responder: refused, the server closes the
        // connection, and the simulator reports a connection closed over a call it could
        // answer.
        if invalidate.is_some() {
            return Err(unsupported("Send with Invalidate without the R flag negotiated"));
        }
        let bytes = gather(sges);
        let len = bytes.len();
        let up = !lock(&self.st).error;
        if up {
            lock(&self.st).sent.push(bytes);
        }
        self.complete(wr_id, Opcode::Send, len, true);
        Ok(())
    }

    fn post_write(&self, wr_id: u64, sges: &[Sge<'_, SimRegion>], remote: RemoteBuf) -> Result<()> {
        let bytes = gather(sges);
        let ok = self.mem.write(self.link, remote.rkey, remote.addr, &bytes);
        self.complete(wr_id, Opcode::RdmaWrite, bytes.len(), ok);
        Ok(())
    }

    fn post_read(&self, wr_id: u64, sges: &[Sge<'_, SimRegion>], remote: RemoteBuf) -> Result<()> {
        let len: usize = sges.iter().map(|s| s.len).sum();
        let mut bytes = vec![0; len];
        let ok = self.mem.read(self.link, remote.rkey, remote.addr, &mut bytes);
        if ok {
            let mut at = 0;
            for s in sges {
                s.region.with_mut(|b| b[s.offset..s.offset + s.len].copy_from_slice(&bytes[at..at + s.len]));
                at += s.len;
            }
        }
        self.complete(wr_id, Opcode::RdmaRead, len, ok);
        Ok(())
    }

    fn post_local_invalidate(&self, _: u64, _: u32) -> Result<()> {
        Err(unsupported("the responder invalidates nothing of its own"))
    }

    fn post_bind_window(&self, _: u64, _: &SimRegion, _: usize, _: usize, _: Access) -> Result<RemoteBuf> {
        Err(unsupported("the responder exposes none of its memory"))
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
        if lock(&self.st).error {
            QpState::Error
        } else {
            QpState::Ready
        }
    }

    fn disconnect(&self) {
        lock(&self.st).error = true;
    }
}
