//! The requester's version-hiding API: [`Client::call`] takes an RPC call message and the
//! Upper-Layer Binding that says which of its items are DDP-eligible and how large the reply
//! may be, and returns the RPC reply message. Connection, private data, the Version Two probe
//! and fallback, thresholds, chunk choices, credits, timeouts and retransmission all happen
//! inside, driven by the sans-I/O [`Requester`](crate::requester::Requester) over any `verbs` backend.
//!
//! Threads: every caller marshals, sends and reassembles its own call (it owns the message and
//! the binding), and while it waits for its reply it receives on the connection itself if
//! nobody else does: one receiver at a time, who hands each other caller its reply, so that a
//! lone caller's reply reaches it without a hand-off between threads. One dispatcher thread
//! per client makes connections, reads the clock, and receives when no call has been in
//! progress for a while (backward calls, a connection lost while idle). What happens in
//! response is decided by one [`ClientCore`] under a mutex, the same value the deterministic
//! simulator drives; this file is only its I/O.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::Version;
use verbs::{Backend, QpCaps, QpState, QueuePair};

use crate::backchannel::{self, Handler};
pub use crate::client_core::ENDED_KEPT;
use crate::client_core::{Action, CallStep, ClientCore, Received};
use crate::datapath::{send_call, CallParams, Connection, DataPathError, Ended, PendingCall, ReceivePool};
use crate::reply::reply_header;
use crate::requester::{self, CallFailure, DuplicateXid};
use crate::thresholds;

/// How a [`Client`] connects and behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Versions, credits, timeouts, limits.
    pub requester: requester::Config,
    /// The RFC 8797 private data to send at connect, or `None` to send none.
    pub private_data: Option<PrivateData>,
    /// Eight bytes to send at connect *instead of* `private_data`: another layer's private data
    /// or garbage, to see a responder treat it as absent (RFC 8797 section 5.1).
    pub foreign_private_data: Option<[u8; 8]>,
    /// Queue pair capacities.
    pub caps: QpCaps,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
}

impl Default for ClientConfig {
    /// Versions 1 to 2 and private data advertising 4096-byte Sends and Receives with the R flag
    /// clear.
    fn default() -> Self {
        ClientConfig {
            requester: requester::Config::default(),
            private_data: Some(PrivateData::new(cm_private_data::Flags::empty(), 4096, 4096)),
            foreign_private_data: None,
            caps: QpCaps::default(),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Why a call failed, or (from [`Client::connect`]) why the first connection could not be
/// made. A call that ran out of attempts says what happened to its last attempt, with the
/// cause: the verbs error of the connection attempt, or how the connection ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Nothing listens at the address (`ECONNREFUSED`, `RDMA_CM_EVENT_UNREACHABLE`).
    #[error("connecting to {addr}: refused, nothing listens there (gave up after {attempts} attempts)")]
    Refused {
        /// The responder's address.
        addr: String,
        /// Attempts made.
        attempts: u32,
        /// The verbs error ([`verbs::Error::ConnectionRefused`]).
        #[source]
        source: verbs::Error,
    },
    /// The address is malformed for the backend or names no host: no attempt can succeed.
    #[error("connecting to {addr}: bad address")]
    BadAddress {
        /// The responder's address.
        addr: String,
        /// The verbs error ([`verbs::Error::BadAddress`]).
        #[source]
        source: verbs::Error,
    },
    /// The responder did not accept within [`ClientConfig::connect_timeout`] (a listener that
    /// never accepts, a hung or stopped server).
    #[error("connecting to {addr}: not accepted within {timeout:?} (gave up after {attempts} attempts)")]
    ConnectTimeout {
        /// The responder's address.
        addr: String,
        /// The connect timeout.
        timeout: Duration,
        /// Attempts made.
        attempts: u32,
        /// The verbs error ([`verbs::Error::Timeout`]).
        #[source]
        source: verbs::Error,
    },
    /// Connecting failed otherwise: rejected, aborted, or out of local resources.
    #[error("connecting to {addr} failed (gave up after {attempts} attempts)")]
    ConnectFailed {
        /// The responder's address.
        addr: String,
        /// Attempts made.
        attempts: u32,
        /// What failed (shared: one connection attempt can fail several calls).
        #[source]
        source: Arc<DataPathError>,
    },
    /// No reply within the requester's timeout on the last attempt; each attempt that timed
    /// out closed its connection (RFC 8166 section 4.5.4).
    #[error("no reply within {timeout:?} (gave up after {attempts} attempts)")]
    ReplyTimeout {
        /// The requester's timeout ([`requester::Config::timeout`]).
        timeout: Duration,
        /// Attempts made.
        attempts: u32,
    },
    /// The connection went down under the last attempt before its reply: the responder closed
    /// it (a server that stopped, or whose handler failed), or the transport failed.
    #[error("connection lost (gave up after {attempts} attempts): {ended}")]
    ConnectionLost {
        /// Attempts made.
        attempts: u32,
        /// How that connection ended ([`Ended::Lost`] with the first error completion reaped
        /// on it, if any).
        ended: Ended,
    },
    /// The protocol's verdict on the call: the responder's RDMA_ERROR
    /// ([`CallFailure::Peer`]), no common version, a malformed reply.
    #[error(transparent)]
    Call(CallFailure),
    /// Its XID is in use by another call in progress on this client.
    #[error(transparent)]
    DuplicateXid(#[from] DuplicateXid),
    /// The message is not an RPC message (shorter than its XID).
    #[error("an RPC message of {0} bytes has no XID")]
    NoXid(usize),
    /// Moving its bytes failed: marshaling, registration, reassembly.
    #[error(transparent)]
    DataPath(#[from] DataPathError),
    /// The client is shutting down.
    #[error("the client is closed")]
    Closed,
}

/// Calls sent, by the form marshaling chose (RFC 8166 section 3.5); retransmissions count
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientStats {
    /// Short: RDMA_MSG, all inline.
    pub short: u64,
    /// Chunked: RDMA_MSG with DDP-eligible arguments in Read chunks.
    pub chunked: u64,
    /// Long: RDMA_NOMSG, the whole call in a position-zero Read chunk.
    pub long: u64,
}

/// A transmission sent, with the memory its reply releases and the connection it went on.
type Sent<B> = (PendingCall<B>, Arc<Link<B>>);

/// A connection's verbs resources.
struct Link<B: Backend> {
    conn: Connection<B>,
    pool: ReceivePool<B>,
}

struct State<B: Backend> {
    core: ClientCore<Arc<Link<B>>>,
    /// Each caller waiting, by XID, to be woken alone (waking all 64 callers of a busy client
    /// for every reply is what a shared condition variable would cost).
    waiters: HashMap<u32, Waiter>,
    /// How many of them are async calls ([`Waiter::Task`]), which cannot receive: while any
    /// waits and no thread receives, the dispatcher does.
    tasks: usize,
    /// The memory of calls given up while their transmission was out
    /// ([`ClientCore::abandon`]): open to the responder, which may still write its reply
    /// into it, until the reply arrives or the connection is lost; released then
    /// ([`Shared::release_abandoned`]).
    abandoned: HashMap<u32, Sent<B>>,
    /// Who receives on the connection now: one at a time, a caller waiting for its reply
    /// while calls are in progress (so that the reply to a lone caller reaches it with no
    /// hand-off between threads), the dispatcher otherwise (backward calls, a connection lost
    /// while idle).
    receiver: Receiver,
    /// When a call last started or ended: the dispatcher receives only after [`LINGER`]
    /// without calls, so that back-to-back calls keep receiving their own replies.
    last_active: Instant,
}

/// How long the connection must be without calls before the dispatcher takes over receiving
/// (a caller that finds the dispatcher receiving waits for it to hand the reply over).
const LINGER: Duration = Duration::from_millis(20);

/// How a waiting caller is woken.
enum Waiter {
    /// A blocking [`Client::call`]'s thread, parked (nothing allocated per call).
    Thread(Thread),
    /// An async call's task ([`Client::call_async`]).
    Task(Waker),
}

impl Waiter {
    fn wake(&self) {
        match self {
            Waiter::Thread(t) => t.unpark(),
            Waiter::Task(w) => w.wake_by_ref(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Receiver {
    Nobody,
    Caller,
    Dispatcher,
}

impl<B: Backend> State<B> {
    /// Wakes the callers whose step the core has ready.
    fn wake(&mut self) {
        while let Some(xid) = self.core.poll_ready() {
            if let Some(caller) = self.waiters.get(&xid) {
                caller.wake();
            }
        }
    }

    /// Gives up the receiver's role (`leaving`: the caller that had it and is done): another
    /// blocking caller still waiting for its step takes it over (woken here); with none, the
    /// next call takes it when it starts, or the dispatcher after [`LINGER`], or at once when
    /// async calls wait (true then: the caller must wake the dispatcher).
    #[must_use]
    fn stop_receiving(&mut self, leaving: Option<u32>) -> bool {
        self.receiver = Receiver::Nobody;
        let next = self
            .waiters
            .iter()
            .find(|(&x, w)| Some(x) != leaving && matches!(w, Waiter::Thread(_)) && !self.core.has_ready(x));
        match next {
            Some((_, caller)) => {
                caller.wake();
                false
            }
            None => self.tasks > 0,
        }
    }

    /// Whether an async call waits with nobody receiving for it: the dispatcher's to do.
    fn tasks_unserved(&self) -> bool {
        self.tasks > 0 && self.receiver == Receiver::Nobody
    }
}

struct Shared<B: Backend> {
    backend: B,
    addr: String,
    cfg: ClientConfig,
    backchannel: Option<Handler>,
    st: Mutex<State<B>>,
    /// The dispatcher's: the core may have an action for it.
    cv: Condvar,
}

/// A requester bound to one responder address.
///
/// ```
/// use std::sync::Arc;
/// use negotiate::client::{Client, ClientConfig};
/// use negotiate::server::{Server, ServerConfig};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use verbs::InProcess;
///
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// // A service that answers every call with an RPC reply of the same XID.
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), |call: &[u8]| {
///     let mut reply = call[..4].to_vec();
///     reply.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
///     reply
/// })
/// .unwrap();
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// let reply = client.call(&[0, 0, 0, 42, 0, 0, 0, 0], &ulb).unwrap();
/// assert_eq!(reply, [0, 0, 0, 42, 0, 0, 0, 1, 0, 0, 0, 0]);
/// assert_eq!(client.version(), Some(rpcrdma_v1::Version::TWO)); // both sides speak Version Two
/// ```
pub struct Client<B: Backend> {
    shared: Arc<Shared<B>>,
    dispatcher: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How long the dispatcher waits for a message before it looks at the clock again.
const TICK: Duration = Duration::from_millis(5);

impl<B: Backend + Clone> Client<B> {
    /// A client for the responder at `addr`. It starts connecting in the background and
    /// returns at once; a connection that cannot be made shows in the calls that need it
    /// ([`ClientError::Refused`], ...). See [`Client::connect`] to fail early instead.
    pub fn new(backend: B, addr: &str, cfg: ClientConfig) -> Self {
        Self::start(backend, addr, cfg, None, false).expect("a lazy start makes no connection")
    }

    /// A client for the responder at `addr` whose first connection is made before this
    /// returns, or whose error this returns (after one attempt): refused, bad address, connect
    /// timeout, or another connect failure. Later connections are made as [`Client::new`]'s
    /// are.
    ///
    /// ```
    /// use negotiate::client::{Client, ClientConfig, ClientError};
    /// use verbs::InProcess;
    ///
    /// match Client::connect(InProcess, "inproc:nobody-listens-here", ClientConfig::default()) {
    ///     Err(ClientError::Refused { attempts: 1, .. }) => {}
    ///     other => panic!("{:?}", other.err()),
    /// }
    /// ```
    pub fn connect(backend: B, addr: &str, cfg: ClientConfig) -> Result<Self, ClientError> {
        Self::start(backend, addr, cfg, None, true)
    }

    /// A client whose connections also serve backward-direction calls from the server with
    /// `handler` (RFC 8167; see [`backchannel`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::with_backchannel(InProcess, &server.local_addr(), ClientConfig::default(), Arc::new(echo));
    /// client.call(&[0, 0, 0, 1, 0, 0, 0, 0], &ulb).unwrap(); // the forward direction first
    /// let back = &server.backchannels()[0];
    /// assert_eq!(back.call(&[0, 0, 0, 9, 0, 0, 0, 0, 7, 7, 7, 7]).unwrap(), [0, 0, 0, 9, 0, 0, 0, 1, 7, 7, 7, 7]);
    /// ```
    pub fn with_backchannel(backend: B, addr: &str, cfg: ClientConfig, handler: Handler) -> Self {
        Self::start(backend, addr, cfg, Some(handler), false).expect("a lazy start makes no connection")
    }

    /// Starts the dispatcher; with `eager`, only once the first connection is made here.
    fn start(
        backend: B,
        addr: &str,
        cfg: ClientConfig,
        backchannel: Option<Handler>,
        eager: bool,
    ) -> Result<Self, ClientError> {
        let shared = Arc::new(Shared {
            backend,
            addr: addr.to_string(),
            cfg,
            backchannel,
            st: Mutex::new(State {
                core: ClientCore::new(cfg, addr),
                waiters: HashMap::new(),
                tasks: 0,
                abandoned: HashMap::new(),
                receiver: Receiver::Nobody,
                last_active: Instant::now(),
            }),
            cv: Condvar::new(),
        });
        if eager {
            // The core's first action asks for the connection: made here, not by the
            // dispatcher.
            let first = lock(&shared.st).core.poll_action();
            debug_assert!(matches!(first, Some(Action::Connect { .. })));
            if let Err(e) = shared.connect() {
                return Err(lock(&shared.st).core.connect_failure(&e, 1));
            }
        }
        let s = shared.clone();
        let dispatcher =
            std::thread::Builder::new().name("negotiate-client".into()).spawn(move || s.dispatch()).expect("spawn");
        Ok(Client { shared, dispatcher: Some(dispatcher) })
    }
}

impl<B: Backend> Client<B> {
    /// Calls: sends the RPC call `message` (whose first four bytes are its XID) and returns
    /// the RPC reply message. `ulb` declares the DDP-eligible arguments and results and the
    /// largest reply (RFC 8166 section 6).
    pub fn call<U: UpperLayerBinding + ?Sized>(&self, message: &[u8], ulb: &U) -> Result<Vec<u8>, ClientError> {
        let mut reply = Vec::new();
        self.call_into(message, ulb, &mut reply).map(|()| reply)
    }

    /// [`Client::call`] into `reply` (cleared first), whose memory a caller keeps from one call
    /// to the next: a small call then allocates nothing at all
    /// (negotiate/tests/allocations.rs counts).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let mut reply = Vec::with_capacity(4096);
    /// for xid in 1..=3u8 {
    ///     client.call_into(&[0, 0, 0, xid, 0, 0, 0, 0, 0, 0, 0, 9], &ulb, &mut reply).unwrap();
    ///     assert_eq!(reply, [0, 0, 0, xid, 0, 0, 0, 1, 0, 0, 0, 9]);
    /// }
    /// ```
    pub fn call_into<U: UpperLayerBinding + ?Sized>(
        &self,
        message: &[u8],
        ulb: &U,
        reply: &mut Vec<u8>,
    ) -> Result<(), ClientError> {
        let sh = &self.shared;
        let xid = self.begin(message, Waiter::Thread(std::thread::current()))?;
        let mut pending = None;
        let result = loop {
            let step = {
                let mut st = lock(&sh.st);
                loop {
                    if let Some(step) = st.core.take_step(xid) {
                        break step;
                    }
                    // Receive ourselves if nobody does: most often what arrives is our reply.
                    match (st.receiver, st.core.link().cloned()) {
                        (Receiver::Nobody, Some(link)) => {
                            st.receiver = Receiver::Caller;
                            st = sh.receive_once(st, &link);
                            if st.core.has_ready(xid) {
                                if st.stop_receiving(Some(xid)) {
                                    sh.cv.notify_one();
                                }
                            } else {
                                st.receiver = Receiver::Nobody;
                            }
                        }
                        // Woken by whoever makes our step ready, or hands us the receiver's
                        // role; a spurious wake-up only looks again.
                        _ => {
                            drop(st);
                            std::thread::park();
                            st = lock(&sh.st);
                        }
                    }
                }
            };
            if let Some(result) = self.take(xid, step, message, ulb, &mut pending, reply) {
                break result;
            }
        };
        self.end(xid, None);
        result
    }

    /// [`Client::call`] as a [`Future`], for any executor: it never blocks on the network
    /// (the client's dispatcher thread receives for async calls and wakes their tasks). Its
    /// steps that touch the queue pair (posting the call, and on the reply invalidating the
    /// call's memory windows and reassembling) run inside `poll`, as they would in
    /// [`Client::call`]; only the Local Invalidates of a reply's windows are waited for there,
    /// as RFC 8166 section 8.1.3 requires before the reply is handed over.
    ///
    /// Dropping the future before it is ready gives the call up: its memory is fenced at once
    /// (its windows invalidated), and a transmission already out keeps its credit until its
    /// reply arrives (then dropped) or its connection is lost, since the responder still
    /// counts it (RFC 8166 section 3.3.1).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::future::Future;
    /// use std::task::{Context, Poll, Wake, Waker};
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    ///
    /// // Any executor drives it; here the smallest one, which parks the thread between polls.
    /// struct Unpark(std::thread::Thread);
    /// impl Wake for Unpark {
    ///     fn wake(self: Arc<Self>) { self.0.unpark() }
    /// }
    /// let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    /// let mut call = std::pin::pin!(client.call_async(&[0, 0, 0, 5, 0, 0, 0, 0], &ulb));
    /// let reply = loop {
    ///     match call.as_mut().poll(&mut Context::from_waker(&waker)) {
    ///         Poll::Ready(reply) => break reply.unwrap(),
    ///         Poll::Pending => std::thread::park(),
    ///     }
    /// };
    /// assert_eq!(reply, [0, 0, 0, 5, 0, 0, 0, 1]);
    /// ```
    ///
    /// With tokio, `client.call_async(&msg, &ulb).await` (negotiate/examples/async_calls.rs).
    pub fn call_async<'a, U: UpperLayerBinding + ?Sized>(
        &'a self,
        message: &'a [u8],
        ulb: &'a U,
    ) -> AsyncCall<'a, B, U> {
        AsyncCall { client: self, message, ulb, xid: None, pending: None, done: false }
    }

    /// Starts the call `message`, whose caller `waiter` waits for its steps; returns its XID.
    fn begin(&self, message: &[u8], waiter: Waiter) -> Result<u32, ClientError> {
        let xid =
            message.first_chunk::<4>().map(|x| u32::from_be_bytes(*x)).ok_or(ClientError::NoXid(message.len()))?;
        let mut st = lock(&self.shared.st);
        let now = Instant::now();
        st.core.start_call(xid, now)?;
        st.last_active = now;
        st.tasks += usize::from(matches!(waiter, Waiter::Task(_)));
        st.waiters.insert(xid, waiter);
        st.wake();
        // A connection to make, or an async call to receive for, is the dispatcher's;
        // otherwise it need not wake.
        if st.core.has_action() || st.tasks_unserved() {
            self.shared.cv.notify_one();
        }
        Ok(xid)
    }

    /// Takes one step of call `xid`: sends a transmission (the previous one's memory given
    /// up), completes the reply, or fails. `Some` once the call is over.
    fn take<U: UpperLayerBinding + ?Sized>(
        &self,
        xid: u32,
        step: CallStep<Arc<Link<B>>>,
        message: &[u8],
        ulb: &U,
        pending: &mut Option<Sent<B>>,
        reply: &mut Vec<u8>,
    ) -> Option<Result<(), ClientError>> {
        let sh = &self.shared;
        match step {
            CallStep::Transmit { transmit: t, link } => {
                if let Some((old, old_link)) = pending.take() {
                    // A retransmission: the old attempt's windows must not stay open.
                    let _ = old.abandon(&old_link.conn, None);
                }
                let params = CallParams { version: t.version, credits: t.credits, thresholds: t.thresholds };
                match send_call(&link.conn, message, ulb, &params) {
                    Ok(p) => {
                        lock(&sh.st).core.handle_sent(p.form());
                        *pending = Some((p, link));
                        None
                    }
                    // A broken connection comes back as a retransmission; anything else ends
                    // the call here (RFC 8166 section 4.5.4).
                    Err(_) if link.conn.qp().state() == QpState::Error => None,
                    Err(e) => {
                        let mut st = lock(&sh.st);
                        st.core.cancel(xid, Instant::now());
                        st.wake();
                        Some(Err(e.into()))
                    }
                }
            }
            CallStep::Reply { message: bytes, invalidated } => {
                let (p, link) = pending.take().expect("a reply answers a transmitted call");
                let header = reply_header(&bytes, &sh.cfg.requester.limits).expect("judged by the core");
                reply.clear();
                let done = p.complete(&link.conn, &header, invalidated, ulb, reply).map_err(Into::into);
                // The message's buffer takes the next message received.
                link.pool.recycle(bytes);
                Some(done)
            }
            CallStep::Failed(e) => {
                if let Some((p, link)) = pending.take() {
                    let _ = p.abandon(&link.conn, None);
                }
                Some(Err(e))
            }
        }
    }

    /// Call `xid` is over; or given up by a dropped [`AsyncCall`] (`abandoned`, with the
    /// transmission it sent, if any: that keeps its credit and its memory until its reply or
    /// its connection's loss).
    fn end(&self, xid: u32, abandoned: Option<Option<Sent<B>>>) {
        let sh = &self.shared;
        let mut st = lock(&sh.st);
        if let Some(Waiter::Task(_)) = st.waiters.remove(&xid) {
            st.tasks -= 1;
        }
        let now = Instant::now();
        st.last_active = now;
        match abandoned {
            Some(sent) => {
                st.core.abandon(xid, sent.is_some(), now);
                if let Some(sent) = sent {
                    st.abandoned.insert(xid, sent);
                }
                // Released now unless the core keeps it waiting for its reply.
                st = sh.release_abandoned(st, None);
            }
            None => st.core.finish_call(xid),
        }
        st.wake();
        if st.receiver == Receiver::Nobody && st.stop_receiving(None) {
            sh.cv.notify_one();
        }
    }

    /// The version the current connection settled on, if it has.
    pub fn version(&self) -> Option<Version> {
        lock(&self.shared.st).core.version()
    }

    /// The current connection's inline thresholds, once its version is settled.
    pub fn thresholds(&self) -> Option<InlineThresholds> {
        lock(&self.shared.st).core.thresholds()
    }

    /// What this client has sent so far.
    pub fn stats(&self) -> ClientStats {
        lock(&self.shared.st).core.stats()
    }

    /// How this client's connections ended, oldest first (the latest [`ENDED_KEPT`]): each one
    /// it gave up ([`Ended::Closed`], e.g. a call with no reply within the requester's timeout)
    /// or lost ([`Ended::Lost`]: the responder or the transport closed it). Each is followed
    /// by a reconnect when calls are waiting, and calls in flight on it were retransmitted.
    /// Empty while the first connection lasts.
    pub fn ended(&self) -> Vec<Ended> {
        lock(&self.shared.st).core.ended().cloned().collect()
    }

    /// The credit window of the current connection.
    pub fn window(&self) -> u32 {
        lock(&self.shared.st).core.window()
    }

    /// What the client learned about responders (which lack Version Two).
    pub fn memory(&self) -> crate::memory::PeerMemory {
        lock(&self.shared.st).core.memory().clone()
    }
}

/// An async call in progress ([`Client::call_async`]): a [`Future`] of the RPC reply.
#[must_use = "a call is made only when its future is polled"]
pub struct AsyncCall<'a, B: Backend, U: ?Sized> {
    client: &'a Client<B>,
    message: &'a [u8],
    ulb: &'a U,
    /// Set once the call has started (on the first poll).
    xid: Option<u32>,
    /// The transmission sent last, whose memory the reply releases.
    pending: Option<Sent<B>>,
    done: bool,
}

// Nothing in it is pinned: it is moved freely between polls (no self-reference).
impl<B: Backend, U: ?Sized> Unpin for AsyncCall<'_, B, U> {}

impl<B: Backend, U: UpperLayerBinding + ?Sized> Future for AsyncCall<'_, B, U> {
    type Output = Result<Vec<u8>, ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.done, "AsyncCall polled after it was ready");
        let client = this.client;
        let xid = match this.xid {
            Some(xid) => xid,
            None => match client.begin(this.message, Waiter::Task(cx.waker().clone())) {
                Ok(xid) => *this.xid.insert(xid),
                Err(e) => {
                    this.done = true;
                    return Poll::Ready(Err(e));
                }
            },
        };
        loop {
            let step = {
                let mut st = lock(&client.shared.st);
                match st.core.take_step(xid) {
                    Some(step) => step,
                    None => {
                        // The waker to use now: an executor may move the task between polls.
                        if let Some(Waiter::Task(w)) = st.waiters.get_mut(&xid) {
                            if !w.will_wake(cx.waker()) {
                                *w = cx.waker().clone();
                            }
                        }
                        if st.tasks_unserved() {
                            client.shared.cv.notify_one();
                        }
                        return Poll::Pending;
                    }
                }
            };
            let mut reply = Vec::new();
            if let Some(result) = client.take(xid, step, this.message, this.ulb, &mut this.pending, &mut reply) {
                this.done = true;
                client.end(xid, None);
                return Poll::Ready(result.map(|()| reply));
            }
        }
    }
}

impl<B: Backend, U: ?Sized> Drop for AsyncCall<'_, B, U> {
    /// Gives up a call still in progress ([`ClientCore::abandon`]).
    fn drop(&mut self) {
        if let (Some(xid), false) = (self.xid, self.done) {
            self.client.end(xid, Some(self.pending.take()));
        }
    }
}

impl<B: Backend> Drop for Client<B> {
    fn drop(&mut self) {
        {
            let mut st = lock(&self.shared.st);
            st.core.close();
            st.wake();
        }
        self.shared.cv.notify_all();
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
    }
}

impl<B: Backend> Shared<B> {
    /// The dispatcher: carries out the core's actions, receives, reads the clock, until the
    /// client is dropped.
    fn dispatch(&self) {
        loop {
            let (actions, link) = {
                let mut st = lock(&self.st);
                if st.core.is_closing() {
                    return;
                }
                let actions: Vec<_> = std::iter::from_fn(|| st.core.poll_action()).collect();
                (actions, st.core.link().cloned())
            };
            for action in actions {
                match action {
                    Action::Connect { after } => {
                        std::thread::sleep(after);
                        let _ = self.connect();
                    }
                    Action::Disconnect(l) => {
                        let t = self.cfg.requester.timeout;
                        l.conn.close(format_args!("a call had no reply within the requester's timeout ({t:?})"));
                    }
                }
            }
            let Some(link) = link else {
                let st = lock(&self.st);
                if st.core.link().is_none()
                    && !st.core.is_closing()
                    && !st.core.has_action()
                    && st.core.poll_timeout().is_none()
                {
                    drop(self.cv.wait_timeout(st, TICK * 20));
                }
                continue;
            };
            let mut st = lock(&self.st);
            let idle = !st.core.has_calls() && st.last_active.elapsed() >= LINGER;
            if !st.tasks_unserved() && (!idle || st.receiver != Receiver::Nobody) {
                // Callers receive (or will, when the next call starts); the clock is still
                // ours to read.
                let (guard, waited) = self.cv.wait_timeout(st, TICK).unwrap_or_else(PoisonError::into_inner);
                st = guard;
                st.core.handle_timeout(Instant::now());
                st = self.release_abandoned(st, None);
                st.wake();
                // Calls in progress and none of their callers took the role for a whole tick:
                // receive for them rather than leave their replies waiting. Async calls
                // cannot receive: for them at once.
                let unserved = waited.timed_out() && st.receiver == Receiver::Nobody && st.core.has_calls();
                if !unserved && !st.tasks_unserved() {
                    continue;
                }
            }
            st.receiver = Receiver::Dispatcher;
            st = self.receive_once(st, &link);
            // With async calls waiting, the dispatcher goes on receiving itself.
            let _ = st.stop_receiving(None);
        }
    }

    /// Receives one message on `link` (or waits up to a tick for one) as the one receiver,
    /// with the state unlocked meanwhile, and hands it to the core: a reply wakes its caller, a
    /// backward call is answered here. Also tells the core when the connection is down (once
    /// every message that arrived before is handled) and reads the clock.
    fn receive_once<'a>(&'a self, st: MutexGuard<'a, State<B>>, link: &Arc<Link<B>>) -> MutexGuard<'a, State<B>> {
        drop(st);
        // Read before receiving: once the queue pair is down, the messages that arrived
        // before it went down are already complete and come out first, so the link is given
        // up only when none is left: a reply or an RDMA_ERR_VERS (draft 5.2: lost right after
        // it means no Version Two) received just before a disconnect counts.
        let was_down = link.conn.qp().state() == QpState::Error;
        let got = link.pool.receive_within(&link.conn, TICK);
        let drained = matches!(got, Err(DataPathError::Timeout { .. }));
        let now = Instant::now();
        let mut st = lock(&self.st);
        let mut reply = None;
        if let Ok(m) = got {
            let received = st.core.handle_receive(m.bytes, m.invalidated_rkey, now);
            if let Received::Reply(xid) = received {
                reply = Some((xid, m.invalidated_rkey));
            }
            if let Received::BackwardCall(call) = received {
                let forward = st.core.forward_thresholds();
                drop(st);
                let header = reply_header(&call, &self.cfg.requester.limits);
                if let (Some(handler), Some(header)) = (&self.backchannel, header) {
                    // A failure here is the connection's: seen below as its state. A panicking
                    // handler leaves that call unanswered (the server's backward call times
                    // out) but must not unwind through a caller that holds the receiver's role.
                    let answer = || backchannel::answer(&link.conn, &header, handler, forward);
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(answer));
                }
                st = lock(&self.st);
            }
        }
        // The core may have moved on to another connection meanwhile.
        let current = st.core.link().is_some_and(|l| Arc::ptr_eq(l, link));
        if was_down && drained && current {
            let ended = link.conn.ended().unwrap_or(Ended::Lost { first_error: None });
            st.core.handle_link_down(ended, now);
        } else if !was_down {
            st.core.handle_timeout(now);
        }
        st = self.release_abandoned(st, reply);
        st.wake();
        // Actions (a reconnect after the link went down) are the dispatcher's.
        if st.core.has_action() {
            self.cv.notify_one();
        }
        st
    }

    /// Releases the memory of abandoned calls the core has ended (their reply arrived, or it
    /// failed them: their windows are invalidated, with the state unlocked meanwhile) or whose
    /// connection is lost (nothing to invalidate). `reply` is the call whose reply was just
    /// received and the rkey that reply's Send with Invalidate killed (RFC 8797 section 4.1).
    fn release_abandoned<'a>(
        &'a self,
        mut st: MutexGuard<'a, State<B>>,
        reply: Option<(u32, Option<u32>)>,
    ) -> MutexGuard<'a, State<B>> {
        if st.abandoned.is_empty() {
            return st;
        }
        let ended: Vec<u32> = st.abandoned.keys().copied().filter(|&x| !st.core.is_abandoned(x)).collect();
        if ended.is_empty() {
            return st;
        }
        let released: Vec<_> = ended.into_iter().filter_map(|x| st.abandoned.remove(&x).map(|p| (x, p))).collect();
        drop(st);
        for (xid, (p, link)) in released {
            let invalidated = reply.filter(|&(x, _)| x == xid).and_then(|(_, rkey)| rkey);
            let _ = p.abandon(&link.conn, invalidated);
        }
        lock(&self.st)
    }

    /// One connection attempt, reported to the core; its error is also returned.
    fn connect(&self) -> Result<(), Arc<DataPathError>> {
        let cfg = &self.cfg;
        let (ours, pdata) = thresholds::what_to_send(cfg.private_data, cfg.foreign_private_data);
        let attempt = (|| -> Result<(Link<B>, Vec<u8>), DataPathError> {
            let pd = self.backend.alloc_pd()?;
            let (qp, accepted) = self.backend.connect(&pd, &self.addr, &pdata, cfg.caps, cfg.connect_timeout)?;
            let conn = Connection::new(pd, qp, cfg.requester.timeout);
            // Our Receives hold what a responder may send us.
            let size = thresholds::receive_size(ours, cfg.requester.versions.1);
            let pool = ReceivePool::new(&conn, cfg.requester.credits as usize + backchannel::SLOTS, size)?;
            Ok((Link { conn, pool }, accepted))
        })();
        let now = Instant::now();
        let mut st = lock(&self.st);
        let result = match attempt {
            Ok((link, accepted)) => {
                st.core.handle_connected(Arc::new(link), ours, &accepted, now);
                Ok(())
            }
            Err(e) => {
                let e = Arc::new(e);
                st.core.handle_connect_failed(e.clone(), now);
                Err(e)
            }
        };
        st.wake();
        result
    }
}
