//! The responder's version-hiding API: [`Server::start`] listens, accepts each connection with
//! its private data and Receives already posted, and serves every call with a handler that
//! sees only RPC messages (blocking, or a future on the caller's executor: [`OnExecutor`]),
//! several calls of one connection at once up to
//! [`ServerLimits::calls_in_progress`] (the credits granted, RFC 8166 section 3.3.1, and a
//! bound of the server's own); replies go out as their calls finish, in any order (RPC
//! matches them by XID). Each connection's decisions are a [`Serve`] value's (the
//! [`Responder`](crate::responder::Responder) state machine judges each message by its
//! version's rules and says how to reply); the data path fetches Read chunks and fills Write
//! and Reply chunks; [`crate::limits`] lists every bound the server keeps.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{JoinHandle, Scope};
use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_reply::ReplyForm;
use rpcrdma_v1::reassemble::{encode_garbage_args_reply, encode_system_err_reply, GARBAGE_ARGS_REPLY_LEN};
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::verdict::ErrorReply;
use rpcrdma_v1::Version;
use verbs::{Backend, ConnectRequest, Listener, QpCaps, QpState, QueuePair};

use crate::backchannel::{self, Backchannel, ServerSide};
use crate::datapath::{
    fetch_call, send_error, send_reply, send_reply_lent, Connection, DataPathError, Ended, ReceivePool, ReplyParams,
    ReplySent,
};
use crate::extension::Extension;
use crate::limits::{Refusals, ServerLimits};
use crate::responder;
use crate::serve::{Serve, Service, Step};
use crate::thresholds::{self, Advertised};
use rpcrdma_v2::properties::TransportProperties;

mod async_handler;
pub use async_handler::{AsyncHandler, CallTask, OnExecutor, STOP_CHECK};

/// How a [`Server`] accepts and serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Versions, credits, header limits.
    pub responder: responder::Config,
    /// The RFC 8797 private data to send in each accept, or `None`.
    pub private_data: Option<PrivateData>,
    /// Eight bytes to send in each accept *instead of* `private_data` (another layer's, or
    /// garbage), to see a requester treat it as absent (RFC 8797 section 5.1).
    pub foreign_private_data: Option<[u8; 8]>,
    /// Queue pair capacities.
    pub caps: QpCaps,
    /// How long the server waits for the completion of one of its own work requests (the RDMA
    /// Reads of a call's chunks, the Writes and the Send of its reply) before it gives the
    /// connection up and closes it ([`Peer::ended`] then says so, and why). It bounds nothing
    /// else: an idle connection, or a handler slower than this, keeps its connection.
    ///
    /// A completion that never comes is a peer that stays connected but no longer takes part.
    /// RC hardware fails such a work request itself once its retries are spent and moves the
    /// queue pair to Error (the Linux kernel's svcrdma relies on that alone, with no timer of
    /// its own); the TCP backend waits on the peer's reader and would wait for ever, holding
    /// the connection's thread, so the server keeps this bound. The default, 5 s, is far above
    /// what a live peer takes even on a starved machine: 640,000 calls of 64 callers over TCP
    /// on two cores beside four busy-looping processes (about 1,300 calls/s) saw at most 64 ms
    /// for one wait, and never the timeout. A longer one would only notice a dead TCP peer
    /// later; a shorter one risks closing a live connection, whose calls in flight the client
    /// then sends again (and, with no duplicate reply cache, may have executed twice).
    pub timeout: Duration,
    /// Connection counts, handshake, idle and memory bounds ([`crate::limits`] lists every
    /// bound and where it is set).
    pub limits: ServerLimits,
    /// Version Two extensions (draft section 3.1): RDMA_OPTIONAL messages from clients go to
    /// these handlers, each connection registering them anew ([`crate::extension`]); any
    /// other opttype is answered with RDMA_ERR_INVAL_OPTION. None by default.
    pub extensions: Vec<Extension>,
    /// The transport properties this server states (`specs/rpcrdma2-transport-properties.txt`,
    /// types in `rpcrdma_v2::properties`), or `None` to not have the extension (a client's
    /// properties request is then answered RDMA_ERR_INVAL_OPTION, and the client falls back).
    /// A requester's stated properties change the replies after its request: their inline
    /// threshold, and whether they may use Send with Invalidate. The Receives are made no
    /// smaller than the stated `max_recv_size`. `None` by default.
    pub properties: Option<TransportProperties>,
}

impl Default for ServerConfig {
    /// Versions 1 to 2, 32 credits, private data advertising 4096-byte Sends and Receives with
    /// the R flag clear, a 5 s completion timeout (see [`ServerConfig::timeout`] for why).
    fn default() -> Self {
        ServerConfig {
            responder: responder::Config::default(),
            private_data: Some(PrivateData::new(cm_private_data::Flags::empty(), 4096, 4096)),
            foreign_private_data: None,
            caps: QpCaps::default(),
            timeout: Duration::from_secs(5),
            limits: ServerLimits::default(),
            extensions: Vec::new(),
            properties: None,
        }
    }
}

/// What serves a [`Server`]'s calls: from the whole RPC call message to the whole RPC reply
/// message. Any `Fn(&[u8]) -> Vec<u8>` closure is one; [`WriteReply`] wraps one that writes
/// its reply into the buffer it is given instead, so that a steady small call allocates
/// nothing. A panic inside it is caught: the call is answered with an RPC SYSTEM_ERR reply and
/// the connection goes on. It runs on the connection's threads, several calls at once (up to
/// [`ServerLimits::calls_in_progress`]). An [`OnExecutor`] is one that serves each call with
/// an [`AsyncHandler`]'s future on the caller's executor.
///
/// ```
/// use negotiate::server::Handler;
/// let echo = |call: &[u8]| call.to_vec();
/// let mut reply = Vec::new();
/// echo.handle(&[1, 2, 3], &mut reply);
/// assert_eq!(reply, [1, 2, 3]);
/// ```
pub trait Handler: Send + Sync + 'static {
    /// Writes the reply to `call` into `reply`, which is empty (its memory kept from the
    /// thread's earlier calls).
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>);

    /// The server is stopping: it has closed every connection and waits for the calls in
    /// progress to return. A handler that waits on something other than its own work (an
    /// [`OnExecutor`] waits for its futures) stops waiting; its reply would not be sent
    /// anyway. Nothing by default.
    fn stopping(&self) {}
}

impl<F: Fn(&[u8]) -> Vec<u8> + Send + Sync + 'static> Handler for F {
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        *reply = self(call);
    }
}

/// A [`Handler`] from a closure that writes the reply into the buffer it is given.
///
/// ```
/// use std::sync::Arc;
/// use negotiate::server::{Handler, Server, ServerConfig, WriteReply};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use verbs::InProcess;
///
/// // XID, REPLY, then the call's arguments back: nothing allocated once warm.
/// let echo = WriteReply(|call: &[u8], reply: &mut Vec<u8>| {
///     reply.extend_from_slice(&call[..4]);
///     reply.extend_from_slice(&[0, 0, 0, 1]);
///     reply.extend_from_slice(&call[8..]);
/// });
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
/// # drop(server);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WriteReply<F>(pub F);

impl<F: Fn(&[u8], &mut Vec<u8>) + Send + Sync + 'static> Handler for WriteReply<F> {
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        (self.0)(call, reply)
    }
}

/// What a server counted, summed over its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// Connections accepted.
    pub connections: u64,
    /// Calls served, by version (index 1 and 2).
    pub calls: [u64; 3],
    /// Replies sent inline (RDMA_MSG).
    pub inline_replies: u64,
    /// Replies sent through the requester's Reply chunk (RDMA_NOMSG).
    pub reply_chunk_replies: u64,
    /// DDP-eligible results written into the requester's Write chunks.
    pub write_chunk_results: u64,
    /// RDMA_ERROR replies sent.
    pub errors_sent: u64,
    /// Calls that arrived beyond the credits granted.
    pub credit_overruns: u64,
    /// What the server refused to keep serving or to take on, by bound.
    pub refused: Refusals,
    /// Calls answered with an RPC GARBAGE_ARGS reply: their chunks did not fit their Payload
    /// stream, or broke DDP-eligibility (RFC 8166 sections 4.5.2 and 6.1.1).
    pub garbage_args_replies: u64,
    /// Calls whose handler panicked, answered with an RPC SYSTEM_ERR reply; the connection and
    /// the server go on. An [`OnExecutor`]'s calls whose future panicked or was dropped by its
    /// executor before it completed count here too.
    pub handler_panics: u64,
}

/// One accepted connection's requester, as it presented itself (see [`Server::peers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The private data its connect request carried, as received (the CM may have padded it).
    pub private_data: Vec<u8>,
    /// What each side advertised at connect (RFC 8797), as the responder decoded it.
    pub advertised: Advertised,
    /// The `rdma_credit` of its latest call (the credits it asks for); 0 before its first.
    pub credits_requested: u32,
    /// How the connection ended, once it has: [`Ended::Closed`] with the reason when this
    /// server closed it (a call it could neither serve nor answer, or the server stopping),
    /// [`Ended::Lost`] when the requester or the transport did. `None` while it is served.
    pub ended: Option<Ended>,
}

/// A running responder. Dropping it stops accepting, closes every connection and waits for
/// each connection's threads: it returns once the handlers running then have returned (every
/// other wait is cut by the close, and an [`OnExecutor`]'s wait for its futures by
/// [`Handler::stopping`]), with no thread of the server left.
///
/// ```
/// use std::sync::Arc;
/// use negotiate::client::{Client, ClientConfig};
/// use negotiate::server::{Server, ServerConfig};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use verbs::{Backend, InProcess};
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };
/// // Answers each call (XID, message type 0, ...) with a reply: the same XID, message type 1.
/// let echo = |call: &[u8]| [&call[..4], &1u32.to_be_bytes()[..], &call[8..]].concat();
/// let server = Server::start(InProcess, &InProcess.any_address(), ServerConfig::default(), Arc::new(ulb), echo)?;
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// let call: Vec<u8> = [7u32, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// assert_eq!(client.call(&call, &ulb).unwrap()[4..8], 1u32.to_be_bytes());
/// assert_eq!(server.stats().connections, 1);
/// # Ok::<(), verbs::Error>(())
/// ```
pub struct Server {
    addr: String,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    /// The listener's count of connections turned away ([`Refusals::handshakes`]).
    turned_away: Box<dyn Fn() -> u64 + Send + Sync>,
    acceptor: Option<JoinHandle<()>>,
}

/// What the acceptor, the connections and the [`Server`] handle share.
#[derive(Default)]
struct Shared {
    stats: Mutex<ServerStats>,
    /// Open connections' records and the most recent closed ones.
    peers: Mutex<Vec<Arc<Mutex<Peer>>>>,
    backchannels: Mutex<Vec<Backchannel>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Forgets closed connections: their backchannels, and their records beyond the `kept`
    /// most recent, so that a peer connecting and closing a thousand times leaves nothing.
    fn prune(&self, kept: usize) {
        lock(&self.backchannels).retain(Backchannel::is_open);
        let mut peers = lock(&self.peers);
        let closed = peers.iter().filter(|p| lock(p).ended.is_some()).count();
        let mut forget = closed.saturating_sub(kept);
        peers.retain(|p| {
            let drop = forget > 0 && lock(p).ended.is_some();
            forget -= usize::from(drop);
            !drop
        });
    }
}

/// One connection's thread and, once it is up, its connection (to close it when the server
/// stops).
struct Live<B: Backend> {
    thread: JoinHandle<()>,
    conn: Arc<OnceLock<Arc<Connection<B>>>>,
}

const TICK: Duration = Duration::from_millis(10);

impl Server {
    /// Listens on `addr` and serves each call with `handler` ([`Handler`]: a closure from
    /// the whole RPC call message to the whole RPC reply message, or a [`WriteReply`] that
    /// writes the reply into a buffer kept between calls); `ulb` says which items of both are
    /// DDP-eligible (RFC 8166 section 6).
    pub fn start<B, U, H>(backend: B, addr: &str, cfg: ServerConfig, ulb: Arc<U>, handler: H) -> verbs::Result<Server>
    where
        B: Backend + Clone,
        U: UpperLayerBinding + Send + Sync + ?Sized + 'static,
        H: Handler,
    {
        let listener = Arc::new(backend.listen_with(addr, &cfg.limits.listen_options())?);
        let local = listener.local_addr();
        let l = listener.clone();
        let turned_away = Box::new(move || l.turned_away());
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared::default());
        let handler = Arc::new(handler);
        // Shared by every connection's thread (its extensions are not `Copy`).
        let cfg = Arc::new(cfg);
        let (s, sh) = (stop.clone(), shared.clone());
        let acceptor = std::thread::Builder::new()
            .name("negotiate-server".into())
            .spawn(move || {
                let mut live: Vec<Live<B>> = Vec::new();
                while !s.load(Ordering::Relaxed) {
                    let req = listener.get_request(TICK * 5);
                    // A finished connection's thread is gone; dropping its handle releases it.
                    live.retain(|c| !c.thread.is_finished());
                    sh.prune(cfg.limits.closed_peers_kept);
                    let Ok(req) = req else { continue };
                    if live.len() >= cfg.limits.max_connections {
                        // Counted first: the connector may look at the stats once refused.
                        lock(&sh.stats).refused.connections += 1;
                        req.reject();
                        continue;
                    }
                    let (b, u, h, s2, sh2) = (backend.clone(), ulb.clone(), handler.clone(), s.clone(), sh.clone());
                    let cfg = cfg.clone();
                    let conn = Arc::new(OnceLock::new());
                    let slot = conn.clone();
                    let spawned = std::thread::Builder::new()
                        .name("negotiate-conn".into())
                        .spawn(move || serve_connection(&b, req, &cfg, &*u, &*h, &s2, &sh2, &slot));
                    // A thread that could not be spawned dropped its request: rejected.
                    live.extend(spawned.ok().map(|thread| Live { thread, conn }));
                }
                // Closing cuts every wait but a handler's; then no thread is left behind.
                for c in &live {
                    if let Some(conn) = c.conn.get() {
                        conn.close("the server stopped");
                    }
                }
                handler.stopping();
                for c in live {
                    let _ = c.thread.join();
                }
            })
            .map_err(|_| verbs::Error::ConnectionAborted)?;
        Ok(Server { addr: local, stop, shared, turned_away, acceptor: Some(acceptor) })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> String {
        self.addr.clone()
    }

    /// Handles for calling the clients of the open connections in the backward direction
    /// (RFC 8167), oldest connection first.
    pub fn backchannels(&self) -> Vec<Backchannel> {
        let mut all = lock(&self.shared.backchannels);
        all.retain(Backchannel::is_open);
        all.clone()
    }

    /// What the server has counted so far.
    pub fn stats(&self) -> ServerStats {
        let mut s = *lock(&self.shared.stats);
        s.refused.handshakes = (self.turned_away)();
        s
    }

    /// The connections accepted, oldest first: every open one and the most recent closed ones
    /// (up to [`ServerLimits::closed_peers_kept`]): the requester's private data as received
    /// and as decoded, the credits it last asked for, and how it ended. For diagnostics and
    /// interop tests against other requesters.
    pub fn peers(&self) -> Vec<Peer> {
        lock(&self.shared.peers).iter().map(|p| lock(p).clone()).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

/// What one call came to.
enum Served {
    /// A call served with its handler's reply, in this version.
    Call(Version, ReplySent),
    /// An RDMA_ERROR sent.
    Error,
    /// A call answered with an RPC GARBAGE_ARGS reply.
    GarbageArgs,
    /// A call whose handler panicked, answered with an RPC SYSTEM_ERR reply.
    Panicked,
}

/// Serves one connection until it goes down or the server stops: accepts it, then serves its
/// calls on up to [`ServerLimits::calls_in_progress`] threads of its own (this one the first),
/// which all have ended when this returns.
#[allow(clippy::too_many_arguments)]
fn serve_connection<B: Backend, U: UpperLayerBinding + Sync + ?Sized>(
    backend: &B,
    req: B::Request,
    cfg: &ServerConfig,
    ulb: &U,
    handler: &dyn Handler,
    stop: &AtomicBool,
    shared: &Shared,
    slot: &OnceLock<Arc<Connection<B>>>,
) {
    let (ours, pdata) = thresholds::what_to_send(cfg.private_data, cfg.foreign_private_data);
    let mut serve = Serve::new(cfg.responder, cfg.limits.idle_timeout, req.private_data(), ours, Instant::now());
    // This connection's own handlers for RDMA_OPTIONAL (each connection has its Responder).
    serve.set_registry(crate::extension::registry(&cfg.extensions));
    if let Some(ours) = cfg.properties {
        serve.set_properties(ours);
    }
    let received = req.private_data().to_vec();
    // Receives of the largest size a requester may send us, one per credit (RFC 8166 section
    // 3.3.1), posted before the connection is established.
    let size = thresholds::receive_size_stating(ours, cfg.responder.versions.1, cfg.properties.as_ref());
    let Ok(pd) = backend.alloc_pd() else { return };
    let mut pool = None;
    let accepted = req.accept_with(&pd, &pdata, cfg.caps, |qp| {
        let count = cfg.responder.credits as usize + backchannel::SLOTS;
        pool = Some(ReceivePool::<B>::post(&pd, qp, count, size)?);
        Ok(())
    });
    let (Ok(qp), Some(pool)) = (accepted, pool) else { return };
    lock(&shared.stats).connections += 1;
    let peer = Arc::new(Mutex::new(Peer {
        private_data: received,
        advertised: serve.responder().advertised(),
        credits_requested: 0,
        ended: None,
    }));
    lock(&shared.peers).push(peer.clone());
    let conn = Arc::new(Connection::<B>::new(pd, qp, cfg.timeout));
    // The server closes it when it stops; it cannot be set twice (one slot per connection).
    let _ = slot.set(conn.clone());
    let back = ServerSide::new(conn.clone(), cfg.responder.limits);
    lock(&shared.backchannels).push(back.handle());
    let now = Instant::now();
    let served = Serving {
        cfg,
        ulb,
        handler,
        stop,
        shared,
        conn: &conn,
        pool,
        peer: &peer,
        back: &back,
        most: cfg.limits.calls_in_progress(cfg.responder.credits),
        lead: Mutex::new(Lead { serve }),
        crew: Mutex::new(Crew {
            threads: 1,
            waiting: 1,
            untimed: 0,
            in_progress: 0,
            last_finished: now,
            free: true,
            alone: None,
            next_ticket: 0,
            ended: false,
        }),
        turn: Condvar::new(),
        unanswered: AtomicUsize::new(0),
    };
    // Every thread spawned for the connection's calls ends inside this scope.
    std::thread::scope(|scope| served.work(scope));
    lock(&peer).ended = conn.ended();
}

/// One connection's serving, shared by the threads that serve its calls.
///
/// They take turns at receiving, leader/follower style: the thread that holds the receiving
/// role receives and judges messages one at a time with the connection's [`Serve`] (its
/// credits, version and idle decisions need one order), and when a message is a call it
/// serves that call itself: fetches its chunks, runs the handler, sends the reply. If another
/// message is already waiting, the role goes to the next waiting thread at once; if not, the
/// thread keeps it while it serves, and a waiting thread takes it over only once the call
/// has run for [`SERVE_ALONE_FOR`]; and only when no other call is being served (under load
/// the next message comes while this one is served). Handing the role on for every call cost
/// a lone caller a thread switch per call on the server (64-byte round trip 0.5 of the raw
/// one, against 0.8 to 0.85 now, docs/benchmarks.md); keeping it for a call that runs long
/// would hold up the calls behind it.
///
/// Why not a receiver handing each call to a pool of workers: that wakes a worker for every
/// call, on the call's own path (the call waits for the wake-up), moves the message to
/// another thread's cache, and keeps a receiving thread beside the workers even when calls
/// come one at a time. Here the call goes on at once on the thread that received it; the
/// wake-up of the next leader happens beside it, and only when a thread waits for the lead
/// (when every thread is busy, the first to finish takes the lead uncontended and finds the
/// next message already there). Both were measured (docs/benchmarks.md, "Load"): on the
/// 64-caller in-process load the pool took 8.1 to 10.5 thread switches per call, this 8.1 to
/// 9.2 (one call at a time: 6.1 to 7.2); with a handler that sleeps 200 us, 32 callers, the
/// pool served 17-18k calls/s in-process, this 24-28k.
struct Serving<'a, B: Backend, U: ?Sized> {
    cfg: &'a ServerConfig,
    ulb: &'a U,
    handler: &'a dyn Handler,
    stop: &'a AtomicBool,
    shared: &'a Shared,
    conn: &'a Arc<Connection<B>>,
    pool: ReceivePool<B>,
    peer: &'a Mutex<Peer>,
    back: &'a ServerSide<B>,
    /// The most calls served at once, and so the most threads.
    most: usize,
    /// The receiving role and what it judges with.
    lead: Mutex<Lead>,
    crew: Mutex<Crew>,
    /// Signals the waiting threads (with `crew`): the role is free, a call is being served
    /// alone, or the connection ended.
    turn: Condvar,
    /// Calls taken whose answer has not been posted yet: each is still in flight for the
    /// requester, so it counts against the credits of the next call judged (RFC 8166 section
    /// 3.3.1). A call stops counting just before its answer is posted, so a requester that
    /// sends its next call once it has that answer is never taken for one beyond its credits.
    unanswered: AtomicUsize,
}

struct Lead {
    serve: Serve,
}

/// The connection's threads.
struct Crew {
    /// Spawned and not yet ended, this one included.
    threads: usize,
    /// Waiting for the receiving role (or spawned to): a call arriving finds one of them to
    /// receive the next message while it is served.
    waiting: usize,
    /// Of those, the ones waiting without a deadline (no call served alone when they began).
    untimed: usize,
    /// Calls taken and not yet answered.
    in_progress: usize,
    /// When the last call in progress was answered: a call that ran long is activity too.
    last_finished: Instant,
    /// The receiving role is free: the next waiting thread takes it.
    free: bool,
    /// The role's holder is serving a call itself, since when, under which ticket: it took no
    /// other message waiting, so it kept the role (a lone caller's calls then need no thread
    /// hand-off); a waiting thread takes the role over once this is [`SERVE_ALONE_FOR`] old.
    alone: Option<(Instant, u64)>,
    next_ticket: u64,
    /// The connection is done: every thread leaves.
    ended: bool,
}

/// How long the holder of the receiving role may serve a call itself before a waiting thread
/// takes the role over: a longer call then no longer holds up the next ones (they are
/// received and served beside it), while a short one keeps the role and the next call needs
/// no thread hand-off.
const SERVE_ALONE_FOR: Duration = Duration::from_millis(1);

/// A call the leader took: its message, moved to the thread that serves it.
struct Job {
    bytes: Vec<u8>,
    xid: u32,
    params: ReplyParams,
}

impl<'a, B: Backend, U: UpperLayerBinding + Sync + ?Sized> Serving<'a, B, U> {
    /// One thread's part: take the receiving role, receive until a call arrives, serve it,
    /// and again, until the connection ends.
    fn work<'s>(&'s self, scope: &'s Scope<'s, '_>) {
        // This thread's call and reply buffers, kept from one call to the next.
        let (mut call, mut reply) = (Vec::new(), Vec::new());
        let mut holding = false;
        loop {
            if !holding && !self.take_role() {
                break;
            }
            let job = {
                let mut lead = lock(&self.lead);
                match self.receive_call(&mut lead.serve) {
                    Ok(job) => job,
                    Err(why) => {
                        self.back.close();
                        self.conn.close(why);
                        lock(&self.crew).ended = true;
                        self.turn.notify_all();
                        break;
                    }
                }
            };
            // With another message waiting the role goes on at once; without, this thread
            // keeps it while it serves, unless the call runs long.
            let ticket = self.take_on(scope, self.conn.receives_waiting() == 0);
            match self.serve_call(&job, &mut call, &mut reply) {
                Ok(served) => self.count(served),
                // RFC 8166 section 4.5.4: a reply that could not be sent is signaled by closing
                // the connection; the receiving thread sees it down and ends the others.
                Err(why) => self.conn.close(why),
            }
            // The message's buffer takes the next message received.
            self.pool.recycle(job.bytes);
            let mut crew = lock(&self.crew);
            crew.in_progress -= 1;
            crew.last_finished = Instant::now();
            holding = ticket.is_some() && crew.alone.is_some_and(|(_, t)| Some(t) == ticket);
            if holding {
                crew.alone = None;
            } else {
                crew.waiting += 1;
            }
        }
        lock(&self.crew).threads -= 1;
    }

    /// Waits for the receiving role: free, or held by a thread serving a call alone for
    /// [`SERVE_ALONE_FOR`]; false once the connection has ended. While a call is served alone
    /// the wait has a deadline, so that it notices the call running long without being told;
    /// otherwise it waits to be told (the role freed, or a call begun alone).
    fn take_role(&self) -> bool {
        let mut crew = lock(&self.crew);
        loop {
            if crew.ended {
                crew.waiting -= 1;
                return false;
            }
            let now = Instant::now();
            let overdue = crew.alone.map(|(since, _)| since + SERVE_ALONE_FOR);
            if crew.free || overdue.is_some_and(|t| t <= now) {
                crew.free = false;
                crew.alone = None;
                crew.waiting -= 1;
                return true;
            }
            if let Some(until) = overdue {
                crew = self.turn.wait_timeout(crew, until - now).unwrap_or_else(PoisonError::into_inner).0;
            } else {
                crew.untimed += 1;
                crew = self.turn.wait(crew).unwrap_or_else(PoisonError::into_inner);
                crew.untimed -= 1;
            }
        }
    }

    /// A call was taken: counts it, and either frees the receiving role (`keep` false) or
    /// keeps it while this thread serves the call, returning the ticket that says whether it
    /// still holds it afterwards. When no other thread waits to receive and the bound allows,
    /// spawns one (so a connection whose requester makes one call at a time keeps two
    /// threads, never [`Serving::most`]).
    fn take_on<'s>(&'s self, scope: &'s Scope<'s, '_>, keep: bool) -> Option<u64> {
        let mut crew = lock(&self.crew);
        // Only a call with none beside it keeps the role: under load the next message comes
        // while this one is served, and must not wait for it.
        let keep = keep && crew.in_progress == 0;
        crew.in_progress += 1;
        let ticket = if keep {
            let t = crew.next_ticket;
            crew.next_ticket += 1;
            crew.alone = Some((Instant::now(), t));
            // Only a thread waiting without a deadline must be told; the others wake by
            // themselves when the call has run too long.
            if crew.untimed > 0 {
                self.turn.notify_one();
            }
            Some(t)
        } else {
            crew.free = true;
            self.turn.notify_one();
            None
        };
        if crew.waiting == 0 && crew.threads < self.most {
            let spawned =
                std::thread::Builder::new().name("negotiate-call".into()).spawn_scoped(scope, move || self.work(scope));
            // One that could not be spawned leaves the calls to the threads there are.
            if spawned.is_ok() {
                crew.threads += 1;
                crew.waiting += 1;
            }
        }
        ticket
    }

    /// The leader's part: receives and judges messages until one is a call to serve, and
    /// answers the others itself; `Err` with the reason to close the connection.
    fn receive_call(&self, serve: &mut Serve) -> Result<Job, String> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err("the server stopped".to_string());
            }
            if self.conn.qp().state() != QpState::Ready {
                return Err("the queue pair went down".to_string());
            }
            let m = match self.pool.receive_within(self.conn, TICK) {
                Ok(m) => m,
                Err(DataPathError::Timeout { .. }) => {
                    if self.is_idle(serve) {
                        lock(&self.shared.stats).refused.idle += 1;
                        return Err(format!("idle for {:?}", self.cfg.limits.idle_timeout));
                    }
                    continue;
                }
                Err(e) => return Err(format!("receiving: {e}")),
            };
            // Behind this message: the ones received and not judged, and the calls being
            // served, all in flight for the requester.
            let behind = self.conn.receives_waiting() + self.unanswered.load(Ordering::SeqCst);
            // The answer to our own RDMA_OPTIONAL (Backchannel::send_option), if one waits.
            let awaited = self.back.awaiting_option();
            let step = serve.on_message_awaiting(&m.bytes, behind, Instant::now(), &|x| Some(x) == awaited);
            // The stats are shared with the threads serving calls: locked only when there is
            // something to add (overruns are cumulative, kept as the most seen).
            let (overruns, over_limits) = (serve.responder().overruns(), serve.new_over_limits());
            if overruns > 0 || over_limits > 0 {
                let mut s = lock(&self.shared.stats);
                s.credit_overruns = s.credit_overruns.max(overruns);
                s.refused.over_limits += over_limits;
            }
            match step {
                Step::Call { header, params } => {
                    let xid = header.xid();
                    lock(self.peer).credits_requested = header.credit();
                    let version = header.version();
                    self.back.on_forward_call(version, serve.responder().advertised().for_version(version));
                    self.unanswered.fetch_add(1, Ordering::SeqCst);
                    return Ok(Job { bytes: m.bytes, xid, params });
                }
                Step::SendError(e) => {
                    send_error(self.conn, e.as_bytes()).map_err(|e| format!("sending an RDMA_ERROR: {e}"))?;
                    lock(&self.shared.stats).errors_sent += 1;
                }
                // An extension's answer (draft section 3.1), sent and waited for here, before
                // the next message is read: a client flooding RDMA_OPTIONAL messages has at
                // most one answer outstanding.
                Step::SendBack(bytes) => {
                    send_error(self.conn, &bytes).map_err(|e| format!("sending an RDMA_OPTIONAL: {e}"))?;
                }
                Step::OptionAnswer { xid } => {
                    self.back.on_reply(xid, m.bytes);
                }
                // A reply that answers no backward call of ours (another XID, or none
                // outstanding) is dropped.
                Step::BackwardReply(h) => {
                    let xid = h.xid();
                    self.back.on_reply(xid, m.bytes);
                }
                // The client's RDMA_ERROR ends the backward call it names at once (RFC 8166
                // section 4.5); one that names no call of ours is dropped.
                Step::PeerError { xid, error } => {
                    self.back.on_peer_error(xid, error);
                }
                Step::Nothing => {}
            }
        }
    }

    /// Idle: no message for the idle timeout, and no call in progress nor answered within it.
    fn is_idle(&self, serve: &Serve) -> bool {
        let now = Instant::now();
        let crew = lock(&self.crew);
        serve.is_idle(now)
            && crew.in_progress == 0
            && now.saturating_duration_since(crew.last_finished) >= self.cfg.limits.idle_timeout
    }

    /// Serves one call taken by the leader: fetches its Read chunks into `call`, runs the
    /// handler, and answers it: the reply, or what [`FailureAnswer::for_error`] says when it
    /// could not be served; `Err` with the reason to close the connection.
    fn serve_call(&self, job: &Job, call: &mut Vec<u8>, reply: &mut Vec<u8>) -> Result<Served, String> {
        let conn = &**self.conn;
        let params = &job.params;
        // The leader's Serve accepted these bytes as a call; the same rules, with the same
        // limits, give the same header view here, where the bytes now are.
        let header = crate::reply::reply_header(&job.bytes, &self.cfg.responder.limits)
            .expect("a message the responder accepted as a call has a valid header");
        let service = fetch_call(conn, &header, self.ulb, call).map(|()| {
            Service::of(|| {
                let mut r = std::mem::take(reply);
                r.clear();
                self.handler.handle(call, &mut r);
                r
            })
        });
        self.unanswered.fetch_sub(1, Ordering::SeqCst);
        service
            .and_then(|service| match service {
                Service::Replied(mut r) => {
                    let sent = send_reply_lent(conn, &header, &mut r, self.ulb, params)
                        .map(|s| Served::Call(params.version, s));
                    // Its memory takes the next reply of this thread.
                    *reply = r;
                    sent
                }
                Service::Panicked => {
                    send_rpc_error(conn, &header, self.ulb, params, encode_system_err_reply).map(|()| Served::Panicked)
                }
            })
            .or_else(|e| match FailureAnswer::for_error(&e) {
                Some(answer) => answer_failure(conn, &header, self.ulb, params, answer),
                None => Err(e),
            })
            .map_err(|e| format!("serving call {:#x}: {e}", job.xid))
    }

    fn count(&self, served: Served) {
        let mut s = lock(&self.shared.stats);
        match served {
            Served::Call(v, sent) => {
                s.calls[v.wire().min(2) as usize] += 1;
                match sent.form {
                    ReplyForm::Inline => s.inline_replies += 1,
                    ReplyForm::ReplyChunk => s.reply_chunk_replies += 1,
                }
                s.write_chunk_results += sent.reduced_results as u64;
            }
            Served::Error => s.errors_sent += 1,
            Served::GarbageArgs => s.garbage_args_replies += 1,
            Served::Panicked => s.handler_panics += 1,
        }
    }
}

/// How a responder answers a call it could not serve, and keeps the connection (RFC 8166
/// section 4.5); see [`FailureAnswer::for_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAnswer {
    /// RDMA_ERROR `ERR_CHUNK` for the call's XID.
    ErrChunk,
    /// An RPC reply accepting the call with `GARBAGE_ARGS`, in an RDMA_MSG.
    GarbageArgs,
}

impl FailureAnswer {
    /// The answer to a call whose serving failed with `e`, or `None` when nothing can be sent
    /// and the connection must close (4.5.4: "MUST close the connection to signal to the
    /// requester that a reply was lost"): `ERR_CHUNK` when the requester's chunks cannot hold
    /// the reply (4.5.3's "no RPC-level reply is possible for that XID") or the transport
    /// header carries no usable RPC message (4.5.2, MUST); `GARBAGE_ARGS` when the chunks do
    /// not fit the Payload stream or break DDP-eligibility (4.5.2, SHOULD; 6.1.1). The one
    /// place this rule lives: the [`Server`] and the simulator both ask it.
    ///
    /// ```
    /// use negotiate::datapath::DataPathError;
    /// use negotiate::server::FailureAnswer;
    /// use rpcrdma_v1::reassemble::ReassemblyError;
    /// let e = DataPathError::Reassembly(ReassemblyError::NoPositionZeroChunk);
    /// assert_eq!(FailureAnswer::for_error(&e), Some(FailureAnswer::ErrChunk));
    /// assert_eq!(FailureAnswer::for_error(&DataPathError::Verbs(verbs::Error::Timeout)), None);
    /// ```
    pub fn for_error(e: &DataPathError) -> Option<FailureAnswer> {
        match e {
            DataPathError::Reply(r) if r.errcode().is_some() => Some(FailureAnswer::ErrChunk),
            DataPathError::Reassembly(r) if r.is_header_error() => Some(FailureAnswer::ErrChunk),
            DataPathError::Reassembly(_) | DataPathError::DdpViolation(_) => Some(FailureAnswer::GarbageArgs),
            _ => None,
        }
    }
}

/// Sends `answer` ([`Serve::on_failure`]) for a call that could not be served; the
/// connection stays up.
fn answer_failure<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Connection<B>,
    call: &Header<'_>,
    ulb: &U,
    params: &ReplyParams,
    answer: FailureAnswer,
) -> Result<Served, DataPathError> {
    match answer {
        FailureAnswer::ErrChunk => {
            let err = ErrorReply::err_chunk(call.xid(), params.version, params.credits);
            send_error(conn, err.as_bytes()).map(|()| Served::Error)
        }
        FailureAnswer::GarbageArgs => {
            send_rpc_error(conn, call, ulb, params, encode_garbage_args_reply).map(|()| Served::GarbageArgs)
        }
    }
}

/// Sends the accepted RPC reply `encode` writes (GARBAGE_ARGS, SYSTEM_ERR) as the reply to
/// `call`, inline and without invalidation (error replies never invalidate, as the Linux
/// server).
fn send_rpc_error<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Connection<B>,
    call: &Header<'_>,
    ulb: &U,
    params: &ReplyParams,
    encode: fn(u32, &mut [u8]) -> Result<usize, rpcrdma_v1::rt::Error>,
) -> Result<(), DataPathError> {
    let mut reply = [0u8; GARBAGE_ARGS_REPLY_LEN];
    let n = encode(call.xid(), &mut reply).expect("the buffer holds the reply");
    let params = ReplyParams { remote_invalidation: false, ..*params };
    send_reply(conn, call, &reply[..n], ulb, &params).map(drop)
}
