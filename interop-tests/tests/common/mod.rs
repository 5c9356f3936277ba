//! Helpers the Client/Server test suites share (faults.rs, client_faults.rs, hostile_peer.rs,
//! server_faults.rs): the echo service and its calls, bounded waits, a raw requester that sends
//! whatever bytes a test gives it, and a raw responder that does to each message what a test's
//! policy says.
#![allow(dead_code, unused_macros)] // each test binary uses its own share

/// Each scenario `NAME` (a function generic over the backend) as the tests `in_process::NAME`
/// and `over_tcp::NAME`. Declared before the items below, so that `#[macro_use] mod common;`
/// brings it to the test file.
macro_rules! on_both_backends {
    ($($test:ident),* $(,)?) => {
        mod in_process {
            $( #[test] fn $test() { super::$test(rpcrdma_verbs::InProcess); } )*
        }
        mod over_tcp {
            $( #[test] fn $test() { super::$test(rpcrdma_verbs::Tcp); } )*
        }
    };
}

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use negotiate::client::{Client, ClientError};
use negotiate::datapath::{fetch_call, send_call, send_error, send_reply, CallParams, ReceivePool, Transport};
use negotiate::responder::{self, Asked, Responder};
use negotiate::server::{Server, ServerStats};
use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::{roundup_pad, OpaqueAtUlb};
use rpcrdma_v1::Version;
use rpcrdma_v2::options::Registry;
use rpcrdma_v2::verdict::{self as v2, Verdict};
use rpcrdma_verbs::{Access, Backend, ConnectRequest, Listener, ProtectionDomain, QpCaps, QpState, QueuePair, Sge};

/// Where the call's `opaque<>` length word sits: after XID, message type and one spare word.
pub const OPAQUE_AT: usize = 12;
/// Calls may reduce their opaque into a Read chunk; replies (echoes, as large as their call)
/// come inline or, when large, through the Reply chunk.
pub const ULB: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: Some(OPAQUE_AT), reply_opaque: None, max_result: 0, max_reply: 32 * 1024 };
/// Nothing DDP-eligible: a call is Short or Long, which makes the call threshold visible.
pub const PLAIN: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 32 * 1024 };
/// A call that fits any threshold (even the 1024-byte probe's) and one that needs a Read
/// chunk and a Reply chunk at every threshold here.
pub const SMALL: usize = 32;
pub const BIG: usize = 8000;
/// How long any one call may take, all its retransmissions included, before the test fails
/// instead of hanging.
pub const CALL_LIMIT: Duration = Duration::from_secs(20);
/// How long the tests wait for a condition they can see coming (a connection counted, ...).
pub const WAIT_LIMIT: Duration = Duration::from_secs(10);
pub const TICK: Duration = Duration::from_millis(10);

/// An RPC call: XID, message type 0, a spare word, then an `opaque<>` of `len` bytes.
pub fn call(xid: u32, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = [xid, 0, 0, len as u32].iter().flat_map(|w| w.to_be_bytes()).collect();
    m.extend((0..len).map(|i| (i as u8) ^ (xid as u8).wrapping_mul(3)));
    m.resize(m.len() + roundup_pad(len), 0);
    m
}

/// The service: the call echoed back as a reply (message type 1).
pub fn echo(call: &[u8]) -> Vec<u8> {
    let mut r = call.to_vec();
    r[4..8].copy_from_slice(&1u32.to_be_bytes());
    r
}

pub fn word(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).map_or(u32::MAX, |w| u32::from_be_bytes(w.try_into().unwrap()))
}

pub fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// `client.call` on another thread, so that a call that never ends fails the test after
/// [`CALL_LIMIT`] instead of hanging it.
pub fn call_within<B: Backend>(
    client: &Arc<Client<B>>,
    message: Vec<u8>,
    ulb: OpaqueAtUlb,
) -> Result<Vec<u8>, ClientError> {
    let (tx, rx) = mpsc::channel();
    let c = client.clone();
    std::thread::spawn(move || {
        let _ = tx.send(c.call(&message, &ulb));
    });
    rx.recv_timeout(CALL_LIMIT).unwrap_or_else(|_| panic!("a call did not end within {CALL_LIMIT:?}"))
}

/// Calls `xid` with an opaque of `len` bytes and checks it came back with exactly its reply.
pub fn call_ok<B: Backend>(client: &Arc<Client<B>>, xid: u32, len: usize) {
    let message = call(xid, len);
    let reply = call_within(client, message.clone(), ULB).unwrap_or_else(|e| panic!("call {xid:#x}: {e}"));
    assert!(reply == echo(&message), "call {xid:#x}: a reply of {} bytes that is not its own", reply.len());
}

/// The server's counts once `done` holds: it counts a call once its reply is sent (after its
/// Send completed where the server waits for that), which may be after the reply reached us.
/// Fails the test after [`WAIT_LIMIT`].
pub fn stats_once(server: &Server, what: &str, done: impl Fn(&ServerStats) -> bool) -> ServerStats {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let s = server.stats();
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "waited {WAIT_LIMIT:?} for the server to count {what}: {s:?}");
        std::thread::yield_now();
    }
}

/// A raw requester's connection to a server.
pub struct RawRequester<B: Backend> {
    pub conn: Transport<B>,
    pub pool: ReceivePool<B>,
}

impl<B: Backend> RawRequester<B> {
    pub fn connect(backend: &B, addr: &str) -> Self {
        let t = Duration::from_secs(5);
        let pd = backend.alloc_pd().expect("pd");
        let (qp, _) = backend.connect(&pd, addr, &[], QpCaps::default(), t).expect("connect");
        let conn = Transport::<B>::new(pd, qp, t);
        let pool = ReceivePool::new(&conn, 4, 4096).expect("receives");
        RawRequester { conn, pool }
    }

    /// Sends `bytes` as one RDMA Send, whatever they are.
    pub fn send_raw(&self, bytes: &[u8]) {
        let region = self.conn.pd().register(bytes.to_vec(), Access::empty()).expect("register");
        let id = self.conn.wr_id();
        self.conn.qp().post_send(id, &[Sge::whole(&region)], None).expect("post");
        self.conn.wait(id).expect("sent");
    }

    /// The next message from the server.
    pub fn receive(&self) -> Vec<u8> {
        self.pool.receive(&self.conn).expect("a message from the server").bytes
    }

    /// A valid call in `vers`; the next message must be its reply, with its bytes.
    pub fn valid_call(&self, xid: u32, vers: Version) {
        let message = call(xid, SMALL);
        let params = CallParams {
            version: vers,
            credits: 32,
            thresholds: InlineThresholds { call: 1024, reply: 1024 },
            dialect: None,
            remote_invalidation: false,
            segments: negotiate::thresholds::SegmentLimits::NONE,
        };
        let pending = send_call(&self.conn, &message, &ULB, &params).expect("send call");
        let got = self.pool.receive(&self.conn).expect("the reply");
        let policy = v2::ReceivePolicy { versions: (Version::ONE, Version::TWO), ..v2::default_policy() };
        let header: Header<'_> = match v2::receive(&got.bytes, &policy, &mut Registry::new()) {
            Verdict::Accept(h) | Verdict::Version1(rpcrdma_v1::verdict::Verdict::Accept(h)) => h,
            other => panic!("call {xid:#x}: expected its reply, got {other:?} ({:?})", &got.bytes),
        };
        assert_eq!((header.xid(), header.version()), (xid, vers), "the reply answers the call just sent");
        let mut out = Vec::new();
        pending.complete(&self.conn, &message, &header, got.invalidated_rkey, &ULB, &mut out).expect("complete");
        assert!(out == echo(&message), "call {xid:#x}: not its own reply");
    }
}

/// A raw responder's side of a connect request: accepts it with `ours` as private data, a
/// Receive for every credit and the backward slot posted before the first Send can arrive
/// (RFC 8166 section 3.3.1), and a `Responder` for `versions` that has seen both sides'
/// private data. `None` when the requester went away before the accept completed.
pub fn accept_raw<B: Backend>(
    backend: &B,
    req: B::Request,
    versions: (Version, Version),
    ours: PrivateData,
) -> Option<(Responder, Transport<B>, ReceivePool<B>)> {
    let credits = responder::ResponderConfig::default().credits;
    let mut responder = Responder::new(responder::ResponderConfig::default().versions(versions));
    responder.handle_connected(req.private_data(), Some(ours));
    let pd = backend.alloc_pd().expect("pd");
    let mut pool = None;
    let accepted = req.accept_with(&pd, &ours.encode(), QpCaps::default(), |qp| {
        pool = Some(ReceivePool::<B>::post(&pd, qp, credits as usize + 1, 4096)?);
        Ok(())
    });
    let (Ok(qp), Some(pool)) = (accepted, pool) else { return None };
    Some((responder, Transport::<B>::new(pd, qp, Duration::from_secs(5)), pool))
}

/// One message as a raw responder received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Which connection (0 for the first accepted).
    pub conn: u32,
    /// Its place among the messages of that connection (0 first).
    pub nth: u32,
    pub xid: u32,
    pub vers: u32,
}

// ------------------------------------------------------------------------------------------
// A misbehaving responder, from public pieces (faults.rs, client_faults.rs).
// ------------------------------------------------------------------------------------------

/// What the raw responder does with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// Judge it by the rules and answer: serve a call, send an RDMA_ERROR.
    Serve,
    /// Never look at it: no answer, no execution.
    Ignore,
    /// Close the connection without answering.
    Close,
    /// Wait this long (receiving nothing meanwhile), then serve it as [`Act::Serve`] does if
    /// the connection is still up.
    Slow(Duration),
    /// Send these bytes back instead.
    Answer(Vec<u8>),
    /// Fetch the call's Read chunks, then close the connection without running it.
    DisconnectAfterFetch,
    /// Run the call and forget the reply.
    ExecuteWithoutReply,
    /// Answer by the rules, then close the connection at once.
    AnswerThenDisconnect,
}

/// What the raw responder saw and did, written before it acts on what it logs: whatever a
/// call returned to the client is already there.
#[derive(Debug, Default)]
pub struct RawLog {
    pub connections: u32,
    pub arrivals: Vec<Arrival>,
    /// (connection, XID) of every execution of the service.
    pub executed: Vec<(u32, u32)>,
    /// Per connection, the calls the responder state machine counted beyond its grant (RFC
    /// 8166 section 3.3.1).
    pub overruns: Vec<u64>,
    /// The connections whose serving thread is done.
    pub ended: Vec<u32>,
}

impl RawLog {
    /// The connections on which call `xid` was executed, once per execution.
    pub fn executions(&self, xid: u32) -> Vec<u32> {
        self.executed.iter().filter(|e| e.1 == xid).map(|e| e.0).collect()
    }
}

type Policy = dyn Fn(&Arrival) -> Act + Send + Sync;

/// A responder serving each connection on a thread of its own with [`Responder`]'s rules and
/// the echo service, accepting with 4096-byte private data, doing to each message what its
/// policy says.
pub struct RawResponder {
    pub addr: String,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<RawLog>>,
    thread: Option<JoinHandle<()>>,
}

impl RawResponder {
    /// Listens on `backend` and serves `versions` with `ulb` as the binding of its calls.
    pub fn start<B: Backend + Clone + Send + 'static>(
        backend: B,
        versions: (Version, Version),
        ulb: OpaqueAtUlb,
        policy: impl Fn(&Arrival) -> Act + Send + Sync + 'static,
    ) -> Self {
        let listener = backend.listen(&backend.any_address()).expect("listen");
        let addr = listener.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let log: Arc<Mutex<RawLog>> = Arc::default();
        let policy: Arc<Policy> = Arc::new(policy);
        let (s, l) = (stop.clone(), log.clone());
        let thread = std::thread::spawn(move || {
            let mut served = Vec::new();
            let mut n = 0;
            while !s.load(Ordering::Relaxed) {
                let Ok(req) = listener.get_request(TICK * 5) else { continue };
                let (b, p, l, s) = (backend.clone(), policy.clone(), l.clone(), s.clone());
                served.push(std::thread::spawn(move || {
                    serve_raw(&b, req, n, versions, &ulb, &*p, &l, &s);
                    lock(&l).ended.push(n);
                }));
                n += 1;
            }
            for t in served {
                let _ = t.join();
            }
        });
        RawResponder { addr, stop, log, thread: Some(thread) }
    }

    pub fn log(&self) -> MutexGuard<'_, RawLog> {
        lock(&self.log)
    }

    /// Waits up to `within` for `done` to hold of the log; whether it does.
    pub fn wait_for(&self, within: Duration, done: impl Fn(&RawLog) -> bool) -> bool {
        let until = Instant::now() + within;
        while !done(&self.log()) {
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(TICK);
        }
        true
    }
}

impl Drop for RawResponder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves one connection until it goes down, the policy closes it, or the test ends.
#[allow(clippy::too_many_arguments)]
fn serve_raw<B: Backend>(
    backend: &B,
    req: B::Request,
    conn_no: u32,
    versions: (Version, Version),
    ulb: &OpaqueAtUlb,
    policy: &Policy,
    log: &Mutex<RawLog>,
    stop: &AtomicBool,
) {
    let ours = PrivateData::new(cm_private_data::Flags::empty(), 4096, 4096);
    let Some((mut responder, conn, pool)) = accept_raw(backend, req, versions, ours) else { return };
    {
        let mut l = lock(log);
        l.connections += 1;
        let at = conn_no as usize;
        if l.overruns.len() <= at {
            l.overruns.resize(at + 1, 0);
        }
    }
    let mut nth = 0;
    let mut message = Vec::new();
    while !stop.load(Ordering::Relaxed) && conn.qp().state() == QpState::Ready {
        let Ok(m) = pool.receive_within(&conn, TICK) else { continue };
        let arrival = Arrival { conn: conn_no, nth, xid: word(&m.bytes, 0), vers: word(&m.bytes, 4) };
        nth += 1;
        lock(log).arrivals.push(arrival);
        let act = policy(&arrival);
        match &act {
            Act::Ignore => continue,
            Act::Close => break,
            Act::Answer(bytes) => {
                if send_error(&conn, bytes).is_err() {
                    break;
                }
                continue;
            }
            Act::Slow(d) => std::thread::sleep(*d),
            _ => {}
        }
        let received = responder.handle_receive(&m.bytes);
        lock(log).overruns[conn_no as usize] = responder.overruns();
        let answered = match received {
            Asked::Call(h) => {
                message.clear();
                if fetch_call(&conn, &h, ulb, &mut message).is_err() || act == Act::DisconnectAfterFetch {
                    break;
                }
                lock(log).executed.push((conn_no, h.xid()));
                let reply = echo(&message);
                let params = responder.reply_params(h.xid()).expect("in flight");
                if act == Act::ExecuteWithoutReply {
                    continue;
                }
                send_reply(&conn, &h, &message, &reply, ulb, &params).map(drop)
            }
            Asked::SendError(e) => send_error(&conn, e.as_bytes()),
            _ => Ok(()),
        };
        if answered.is_err() || act == Act::AnswerThenDisconnect {
            break;
        }
    }
    conn.qp().disconnect();
}

/// A gate handlers wait at: [`Gate::hold`] counts the caller in and blocks until
/// [`Gate::open`], so that a test can keep calls (and the memory they hold) in their handler
/// while it looks. Dropping the gate's last [`Gate::opener`] opens it too, so that a failed
/// assertion never leaves handlers waiting, which the server's drop would wait on.
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    inside: AtomicUsize,
}

impl Gate {
    pub fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    /// Counts the caller in, then waits until the gate opens.
    pub fn hold(&self) {
        self.inside.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        while !*open {
            open = self.opened.wait(open).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// How many callers [`Gate::hold`] has counted in.
    pub fn inside(&self) -> usize {
        self.inside.load(Ordering::SeqCst)
    }

    /// Lets every held caller go, and every later one through.
    pub fn open(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.opened.notify_all();
    }

    /// A guard that opens the gate when dropped, however the test ends.
    pub fn opener(self: &Arc<Self>) -> GateOpener {
        GateOpener(self.clone())
    }
}

/// Opens its [`Gate`] when dropped ([`Gate::opener`]).
pub struct GateOpener(Arc<Gate>);

impl Drop for GateOpener {
    fn drop(&mut self) {
        self.0.open();
    }
}
