//! Packet capture as a decorator: [`Captured`] wraps any [`Backend`] and hands a sink the
//! bytes of every Send posted on its queue pairs, for pcap export and tests.
//!
//! Everything an RPC-over-RDMA stack sends as a message (calls, replies, RDMA_ERRORs, probes,
//! backward-direction calls and replies) leaves in a Send (RFC 8166 section 3.3: the transport
//! header travels in a Send, never in RDMA Read or Write), so the Sends are the capture. The
//! sink sees each one at post time, read from the registered regions its scatter/gather list
//! names, before the backend gets it and so before the peer can have answered. Nothing is
//! global: only queue pairs made through the wrapping backend are captured, and code that does
//! not wrap its backend pays nothing.
//!
//! A [`CapturedMessage`] names its sender by *endpoint*: one queue pair, numbered from 1 in the
//! order the queue pairs of one [`Captured`] (and its clones) first send. Each endpoint sends in
//! one direction only, so the endpoint stands for the pair (connection, direction).
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use rpcrdma_verbs::capture::{Captured, CapturedMessage};
//! use rpcrdma_verbs::*;
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let s = seen.clone();
//! let b = Captured::new(InProcess, Arc::new(move |m: &CapturedMessage<'_>| {
//!     s.lock().unwrap().push((m.endpoint, m.bytes.to_vec()));
//! }));
//! let t = Duration::from_secs(5);
//! let listener = b.listen(&b.any_address()).unwrap();
//! let addr = listener.local_addr();
//! let b2 = b.clone();
//! let client = std::thread::spawn(move || {
//!     let pd = b2.alloc_pd().unwrap();
//!     let (qp, _) = b2.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
//!     let msg = pd.register(b"ping".to_vec(), Access::empty()).unwrap();
//!     qp.post_send(1, &[Sge::whole(&msg)], None).unwrap();
//!     assert!(qp.wait_cq(t).unwrap().is_ok());
//!     qp
//! });
//! let pd = b.alloc_pd().unwrap();
//! let buf = pd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
//! let req = listener.get_request(t).unwrap();
//! let qp = req.accept_with(&pd, &[], QpCaps::default(), |qp| qp.post_recv(7, Sge::whole(&buf))).unwrap();
//! assert!(qp.wait_cq(t).unwrap().is_ok());
//! # let _client = client.join().unwrap();
//! assert_eq!(*seen.lock().unwrap(), [(1, b"ping".to_vec())]);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::{
    Access, Backend, ChainError, CmEvent, Completion, ConnectRequest, ListenOptions, Listener, MemoryRegion, QpCaps,
    QpState, QueuePair, RemoteBuf, Result, SendFlags, Sge, WorkRequest,
};

/// One Send, as posted.
///
/// ```
/// use rpcrdma_verbs::capture::CapturedMessage;
/// let m = CapturedMessage { endpoint: 1, bytes: b"hello", invalidate: None, chained_writes: 0 };
/// assert_eq!(m.bytes.len(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturedMessage<'a> {
    /// The sending queue pair (see the module documentation).
    pub endpoint: u64,
    /// The Send's bytes: its scatter/gather entries, concatenated.
    pub bytes: &'a [u8],
    /// The rkey a Send with Invalidate asks the peer to invalidate, or `None` for a plain Send.
    pub invalidate: Option<u32>,
    /// How many RDMA Writes went just before it in one chain with it
    /// ([`QueuePair::post_chain`]); 0 for a Send posted alone.
    pub chained_writes: usize,
}

/// What receives the captured Sends. It runs on the posting thread, before the Send is posted:
/// it must be quick, and must not post Sends on the same queue pair itself.
///
/// ```
/// use std::sync::Arc;
/// use rpcrdma_verbs::capture::{CapturedMessage, Sink};
/// let sink: Sink = Arc::new(|m: &CapturedMessage<'_>| eprintln!("{} sent {} bytes", m.endpoint, m.bytes.len()));
/// sink(&CapturedMessage { endpoint: 1, bytes: &[0; 28], invalidate: None, chained_writes: 0 });
/// ```
pub type Sink = Arc<dyn Fn(&CapturedMessage<'_>) + Send + Sync>;

/// The sink and the endpoint numbering, shared by a [`Captured`], its clones and every handle
/// made through them.
struct Tap {
    sink: Sink,
    next_endpoint: AtomicU64,
    /// Protection domains allocated through the backend and its clones.
    pds: AtomicU64,
}

impl Tap {
    /// Hands the sink the bytes of a Send on `endpoint` (drawing its number on its first Send)
    /// and the rkey it asks the peer to invalidate, if any.
    /// A scatter/gather entry outside its region names no bytes, and the Send will fail
    /// locally without reaching the wire: nothing is captured then.
    fn sent<R: MemoryRegion>(
        &self,
        endpoint: &OnceLock<u64>,
        sges: &[Sge<'_, R>],
        invalidate: Option<u32>,
        chained_writes: usize,
    ) {
        let mut bytes = Vec::with_capacity(sges.iter().map(|s| s.len).sum());
        for s in sges {
            let range = s.offset..s.offset.saturating_add(s.len);
            let copied = s.region.with(|b| b.get(range).map(|part| bytes.extend_from_slice(part)));
            if copied.is_none() {
                return;
            }
        }
        let endpoint = *endpoint.get_or_init(|| self.next_endpoint.fetch_add(1, Ordering::Relaxed));
        (self.sink)(&CapturedMessage { endpoint, bytes: &bytes, invalidate, chained_writes });
    }
}

/// A backend whose queue pairs show every Send they post to a [`Sink`]. Clones share the sink
/// and the endpoint numbering. Protection domains and regions are the wrapped backend's own.
///
/// ```
/// use std::sync::Arc;
/// use rpcrdma_verbs::capture::Captured;
/// use rpcrdma_verbs::{Backend, InProcess};
/// let b = Captured::new(InProcess, Arc::new(|_| {}));
/// assert_eq!(b.any_address(), InProcess.any_address());
/// ```
pub struct Captured<B> {
    inner: B,
    tap: Arc<Tap>,
}

impl<B> Captured<B> {
    /// Wraps `inner`: Sends posted on queue pairs it connects or accepts go to `sink`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rpcrdma_verbs::capture::Captured;
    /// use rpcrdma_verbs::Tcp;
    /// let b = Captured::new(Tcp, Arc::new(|m| println!("{:?}", m.bytes)));
    /// # let _ = b;
    /// ```
    pub fn new(inner: B, sink: Sink) -> Self {
        Captured { inner, tap: Arc::new(Tap { sink, next_endpoint: AtomicU64::new(1), pds: AtomicU64::new(0) }) }
    }

    /// How many protection domains were allocated through this backend and its clones: a
    /// user that keeps one across its connections allocates one.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rpcrdma_verbs::capture::Captured;
    /// use rpcrdma_verbs::{Backend, InProcess};
    /// let b = Captured::new(InProcess, Arc::new(|_| {}));
    /// let _pd = b.clone().alloc_pd().unwrap();
    /// assert_eq!(b.protection_domains(), 1);
    /// ```
    pub fn protection_domains(&self) -> u64 {
        self.tap.pds.load(Ordering::Relaxed)
    }

    /// The wrapped backend.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rpcrdma_verbs::capture::Captured;
    /// use rpcrdma_verbs::InProcess;
    /// let b = Captured::new(InProcess, Arc::new(|_| {}));
    /// let _inner: &InProcess = b.inner();
    /// ```
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: Clone> Clone for Captured<B> {
    fn clone(&self) -> Self {
        Captured { inner: self.inner.clone(), tap: self.tap.clone() }
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for Captured<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Captured").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<B: Backend> Backend for Captured<B> {
    type Pd = B::Pd;
    type Region = B::Region;
    type Qp = CapturedQp<B::Qp>;
    type Listener = CapturedListener<B::Listener>;
    type Request = CapturedRequest<B::Request>;

    fn any_address(&self) -> String {
        self.inner.any_address()
    }

    fn alloc_pd(&self) -> Result<B::Pd> {
        let pd = self.inner.alloc_pd()?;
        self.tap.pds.fetch_add(1, Ordering::Relaxed);
        Ok(pd)
    }

    fn wakes_wakers(&self) -> bool {
        self.inner.wakes_wakers()
    }

    fn rdma_at_post(&self) -> bool {
        self.inner.rdma_at_post()
    }

    fn readiness(&self) -> Option<crate::Readiness> {
        self.inner.readiness()
    }

    fn listen_with(&self, addr: &str, opts: &ListenOptions) -> Result<Self::Listener> {
        Ok(CapturedListener { inner: self.inner.listen_with(addr, opts)?, tap: self.tap.clone() })
    }

    fn connect(
        &self,
        pd: &B::Pd,
        addr: &str,
        private_data: &[u8],
        caps: QpCaps,
        timeout: Duration,
    ) -> Result<(Self::Qp, Vec<u8>)> {
        let (qp, accepted) = self.inner.connect(pd, addr, private_data, caps, timeout)?;
        Ok((CapturedQp::new(qp, self.tap.clone()), accepted))
    }
}

/// A listener of a [`Captured`] backend: the queue pairs its requests accept are captured.
///
/// ```
/// use std::sync::Arc;
/// use rpcrdma_verbs::capture::Captured;
/// use rpcrdma_verbs::{Backend, InProcess, Listener};
/// let b = Captured::new(InProcess, Arc::new(|_| {}));
/// let listener = b.listen(&b.any_address()).unwrap();
/// assert!(listener.local_addr().starts_with("inproc:"));
/// ```
pub struct CapturedListener<L> {
    inner: L,
    tap: Arc<Tap>,
}

impl<L: Listener> Listener for CapturedListener<L> {
    type Request = CapturedRequest<L::Request>;

    fn local_addr(&self) -> String {
        self.inner.local_addr()
    }

    fn get_request(&self, timeout: Duration) -> Result<Self::Request> {
        Ok(CapturedRequest { inner: self.inner.get_request(timeout)?, tap: self.tap.clone() })
    }

    fn turned_away(&self) -> u64 {
        self.inner.turned_away()
    }

    fn close(&self) {
        self.inner.close()
    }
}

/// A connect request taken from a [`CapturedListener`]; the queue pair accepting it creates is
/// captured. Dropping it rejects it, as the wrapped request does.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rpcrdma_verbs::capture::Captured;
/// use rpcrdma_verbs::{Backend, ConnectRequest, InProcess, Listener, QpCaps, Error};
/// let b = Captured::new(InProcess, Arc::new(|_| {}));
/// let listener = b.listen(&b.any_address()).unwrap();
/// let (addr, b2) = (listener.local_addr(), b.clone());
/// let t = Duration::from_secs(5);
/// let client = std::thread::spawn(move || b2.connect(&b2.alloc_pd().unwrap(), &addr, b"hi", QpCaps::default(), t));
/// let req = listener.get_request(t).unwrap();
/// assert_eq!(&req.private_data()[..2], b"hi");
/// req.reject();
/// assert_eq!(client.join().unwrap().err(), Some(Error::Rejected));
/// ```
pub struct CapturedRequest<R> {
    inner: R,
    tap: Arc<Tap>,
}

impl<R: ConnectRequest> ConnectRequest for CapturedRequest<R> {
    type Pd = R::Pd;
    type Qp = CapturedQp<R::Qp>;

    fn private_data(&self) -> &[u8] {
        self.inner.private_data()
    }

    fn peer(&self) -> Option<crate::PeerAddress> {
        self.inner.peer()
    }

    fn accept_owning(
        self,
        pd: &R::Pd,
        private_data: &[u8],
        caps: QpCaps,
        before: impl FnOnce(Self::Qp) -> (Self::Qp, Result<()>),
    ) -> Result<Self::Qp> {
        let tap = self.tap;
        // `before` gets the wrapper (it is typed for it); the wrapped request gets its own
        // queue pair back, and so does the wrapper in the end, with any endpoint it drew.
        let mut endpoint = OnceLock::new();
        let qp = self.inner.accept_owning(pd, private_data, caps, |qp| {
            let (wrapped, r) = before(CapturedQp::new(qp, tap.clone()));
            endpoint = wrapped.endpoint;
            (wrapped.inner, r)
        })?;
        Ok(CapturedQp { inner: qp, tap, endpoint })
    }

    fn reject(self) {
        self.inner.reject();
    }
}

/// A queue pair of a [`Captured`] backend: every Send it posts goes to the sink first, under
/// this queue pair's endpoint number; everything else is the wrapped queue pair's.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rpcrdma_verbs::capture::Captured;
/// use rpcrdma_verbs::{Backend, ConnectRequest, InProcess, Listener, QpCaps, QpState, QueuePair};
/// let b = Captured::new(InProcess, Arc::new(|_| {}));
/// let listener = b.listen(&b.any_address()).unwrap();
/// let (addr, b2) = (listener.local_addr(), b.clone());
/// let t = Duration::from_secs(5);
/// let client = std::thread::spawn(move || b2.connect(&b2.alloc_pd().unwrap(), &addr, &[], QpCaps::default(), t));
/// let qp = listener.get_request(t).unwrap().accept(&b.alloc_pd().unwrap(), &[], QpCaps::default()).unwrap();
/// assert_eq!(qp.inner().state(), QpState::Ready);
/// assert_eq!(qp.endpoint(), None); // it has sent nothing yet
/// # let _client = client.join().unwrap();
/// ```
pub struct CapturedQp<Q> {
    inner: Q,
    tap: Arc<Tap>,
    endpoint: OnceLock<u64>,
}

impl<Q> CapturedQp<Q> {
    fn new(inner: Q, tap: Arc<Tap>) -> Self {
        CapturedQp { inner, tap, endpoint: OnceLock::new() }
    }

    /// The wrapped queue pair (what it posts is not captured).
    ///
    /// See [`CapturedQp`] for an example.
    pub fn inner(&self) -> &Q {
        &self.inner
    }

    /// This queue pair's endpoint number, once it has sent.
    ///
    /// See [`CapturedQp`] for an example.
    pub fn endpoint(&self) -> Option<u64> {
        self.endpoint.get().copied()
    }
}

impl<Q: QueuePair> QueuePair for CapturedQp<Q> {
    type Region = Q::Region;

    fn post_recv(&self, wr_id: u64, sge: Sge<'_, Q::Region>) -> Result<()> {
        self.inner.post_recv(wr_id, sge)
    }

    fn post_send(&self, wr_id: u64, sges: &[Sge<'_, Q::Region>], invalidate: Option<u32>) -> Result<()> {
        self.tap.sent(&self.endpoint, sges, invalidate, 0);
        self.inner.post_send(wr_id, sges, invalidate)
    }

    fn post_send_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, Q::Region>],
        invalidate: Option<u32>,
        flags: SendFlags,
    ) -> Result<()> {
        self.tap.sent(&self.endpoint, sges, invalidate, 0);
        self.inner.post_send_with(wr_id, sges, invalidate, flags)
    }

    fn post_write(&self, wr_id: u64, sges: &[Sge<'_, Q::Region>], remote: RemoteBuf) -> Result<()> {
        self.inner.post_write(wr_id, sges, remote)
    }

    fn post_write_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, Q::Region>],
        remote: RemoteBuf,
        flags: SendFlags,
    ) -> Result<()> {
        self.inner.post_write_with(wr_id, sges, remote, flags)
    }

    fn post_read(&self, wr_id: u64, sges: &[Sge<'_, Q::Region>], remote: RemoteBuf) -> Result<()> {
        self.inner.post_read(wr_id, sges, remote)
    }

    fn offer_read(&self, remote: RemoteBuf, len: u32) -> bool {
        self.inner.offer_read(remote, len)
    }

    fn take_offered(&self, into: Sge<'_, Q::Region>, remote: RemoteBuf) -> bool {
        self.inner.take_offered(into, remote)
    }

    fn holds_offered(&self, remote: RemoteBuf, len: u32) -> bool {
        self.inner.holds_offered(remote, len)
    }

    fn offers_held(&self) -> usize {
        self.inner.offers_held()
    }

    fn flush_posts(&self) {
        self.inner.flush_posts()
    }

    fn post_local_invalidate(&self, wr_id: u64, rkey: u32) -> Result<()> {
        self.inner.post_local_invalidate(wr_id, rkey)
    }

    fn post_local_invalidate_with(&self, wr_id: u64, rkey: u32, flags: SendFlags) -> Result<()> {
        self.inner.post_local_invalidate_with(wr_id, rkey, flags)
    }

    fn post_bind_window(
        &self,
        wr_id: u64,
        region: &Q::Region,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<RemoteBuf> {
        self.inner.post_bind_window(wr_id, region, offset, len, access)
    }

    fn post_bind_window_with(
        &self,
        wr_id: u64,
        region: &Q::Region,
        offset: usize,
        len: usize,
        access: Access,
        flags: SendFlags,
    ) -> Result<RemoteBuf> {
        self.inner.post_bind_window_with(wr_id, region, offset, len, access, flags)
    }

    fn post_chain(&self, wrs: &[WorkRequest<'_, Q::Region>]) -> std::result::Result<(), ChainError> {
        let mut writes = 0;
        for wr in wrs {
            match wr {
                WorkRequest::Write { .. } => writes += 1,
                WorkRequest::Send { sges, invalidate, .. } => {
                    self.tap.sent(&self.endpoint, sges, *invalidate, writes);
                    writes = 0;
                }
            }
        }
        self.inner.post_chain(wrs)
    }

    fn memory_read_at_post(&self) -> bool {
        self.inner.memory_read_at_post()
    }

    fn caps(&self) -> QpCaps {
        self.inner.caps()
    }

    fn poll_cq(&self, out: &mut [Completion]) -> usize {
        self.inner.poll_cq(out)
    }

    fn wait_cq(&self, timeout: Duration) -> Option<Completion> {
        self.inner.wait_cq(timeout)
    }

    #[cfg(unix)]
    fn completion_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.completion_fd()
    }

    fn req_notify_cq(&self) -> bool {
        self.inner.req_notify_cq()
    }

    fn arm_waker(&self, waker: &std::task::Waker) -> crate::Arm {
        self.inner.arm_waker(waker)
    }

    fn cm_event(&self, timeout: Duration) -> Option<CmEvent> {
        self.inner.cm_event(timeout)
    }

    fn state(&self) -> QpState {
        self.inner.state()
    }

    fn disconnect(&self) {
        self.inner.disconnect()
    }
}

impl<Q: std::fmt::Debug> std::fmt::Debug for CapturedQp<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedQp").field("inner", &self.inner).field("endpoint", &self.endpoint()).finish()
    }
}
