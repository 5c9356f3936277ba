//! Every branch of connection set-up and version negotiation, end to end through [`Client`] and
//! [`Server`] on the in-process verbs backend. Where a branch needs a peer that misbehaves (or
//! one that speaks only part of the protocol) a small raw peer stands in, built from the public
//! pieces: `rpcrdma_verbs::InProcess`, `negotiate::datapath` and `negotiate::responder::Responder`.
//!
//! Each test is named after the rule it checks and cites it: the Version Two draft
//! (draft-cel-nfsv4-rpcrdma-version-two-00), RFC 8166 (Version One) or RFC 8797 (private data).
//! Each asserts what the rule decides: the version, both thresholds, the credit window, the
//! reply bytes, what the handler saw, and the server's counters.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use cm_private_data::{Flags, PrivateData, FORMAT_IDENTIFIER};
use negotiate::client::{Client, ClientConfig, ClientError, ClientStats};
use negotiate::datapath::{
    fetch_call, send_error, send_reply, DataPathError, Ended, ReceivePool, ReplyParams, Transport,
};
use negotiate::memory::NoV2Reason;
use negotiate::requester;
use negotiate::responder::{self, Asked, Responder};
use negotiate::server::{Server, ServerConfig, ServerStats};
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::{roundup, OpaqueAtUlb};
use rpcrdma_v1::verdict::ErrorReply;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{
    Backend, ConnectRequest, InProcess, Listener, QpCaps, QpState, QueuePair, CONNECT_PRIVATE_DATA_MAX,
};

/// Generous: a wait this long has already failed.
const T: Duration = Duration::from_secs(10);
/// A requester timeout no reply misses even on a loaded machine: every test but the lost
/// probe's expects each call to be served exactly once, with no retransmission.
const PATIENT: Duration = Duration::from_secs(30);
/// How long a whole test may take before [`deadline`] ends the run.
const LIMIT: Duration = Duration::from_secs(60);
/// How often a raw peer looks at its stop flag.
const TICK: Duration = Duration::from_millis(5);

/// Where the length word of a message's `opaque<>` sits, in calls and replies alike.
const OPAQUE_AT: usize = 16;
/// An `opaque<>` length no message can hold: the ULB finds no DDP-eligible item there.
const NO_OPAQUE: u32 = u32::MAX;

/// Nothing DDP-eligible; replies up to 8 KiB (a Reply chunk is offered when that exceeds the
/// reply threshold).
const PLAIN: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 8192 };
/// The server's binding when calls and replies may carry a DDP-eligible `opaque<>` (RFC 8166
/// section 6), like NFS WRITE and READ; a message without one has [`NO_OPAQUE`] there.
const DDP: OpaqueAtUlb = binding(Shape::Opaque(0), Shape::Opaque(0));

/// The client's binding for one call, which (like a ULB's per procedure) declares a
/// DDP-eligible argument or result only where the call has one.
const fn binding(arg: Shape, result: Shape) -> OpaqueAtUlb {
    OpaqueAtUlb { call_opaque: arg.opaque_at(), reply_opaque: result.opaque_at(), max_result: 16384, max_reply: 32768 }
}

// ---- messages ----

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

fn word(bytes: &[u8], i: usize) -> u32 {
    bytes.get(i * 4..i * 4 + 4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// The body of an RPC message after its four leading words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Nothing more: 20 bytes in all.
    Small,
    /// A DDP-eligible `opaque<>` of this many bytes, then two trailer words.
    Opaque(usize),
    /// Filler up to this many bytes in all, nothing DDP-eligible.
    Long(usize),
}

impl Shape {
    /// Where a binding finds this shape's DDP-eligible item, if it has one.
    const fn opaque_at(self) -> Option<usize> {
        match self {
            Shape::Opaque(_) => Some(OPAQUE_AT),
            _ => None,
        }
    }

    fn code(self) -> [u32; 2] {
        match self {
            Shape::Small => [0, 0],
            Shape::Opaque(n) => [1, n as u32],
            Shape::Long(n) => [2, n as u32],
        }
    }

    fn from_code(kind: u32, n: u32) -> Shape {
        match kind {
            1 => Shape::Opaque(n as usize),
            2 => Shape::Long(n as usize),
            _ => Shape::Small,
        }
    }
}

/// An RPC message: XID, `msg_type` (0 call, 1 reply), two words `a`, then `shape` at
/// [`OPAQUE_AT`]. Its content depends on the XID, so every call and reply is told apart.
fn message(xid: u32, msg_type: u32, a: [u32; 2], shape: Shape) -> Vec<u8> {
    let mut m = words(&[xid, msg_type, a[0], a[1]]);
    let filler = |m: &mut Vec<u8>, to: usize| {
        while m.len() < to {
            let i = m.len() as u32;
            m.extend_from_slice(&(i.wrapping_mul(0x9e37_79b9) ^ xid).to_be_bytes());
        }
    };
    match shape {
        Shape::Small => m.extend_from_slice(&NO_OPAQUE.to_be_bytes()),
        Shape::Long(n) => {
            m.extend_from_slice(&NO_OPAQUE.to_be_bytes());
            filler(&mut m, n);
        }
        Shape::Opaque(n) => {
            m.extend_from_slice(&(n as u32).to_be_bytes());
            m.extend((0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(xid as u8)));
            m.resize(roundup(m.len()), 0);
            let end = m.len() + 8;
            filler(&mut m, end);
        }
    }
    m
}

/// A call with argument `arg` asking for a reply of shape `result`.
fn rpc_call(xid: u32, arg: Shape, result: Shape) -> Vec<u8> {
    message(xid, 0, result.code(), arg)
}

/// FNV-1a, so a reply proves which call bytes the service saw.
fn digest(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// The service every responder here runs: a reply of the shape the call asks for, carrying the
/// call's length and digest.
fn reply_for(call: &[u8]) -> Vec<u8> {
    let result = Shape::from_code(word(call, 2), word(call, 3));
    message(word(call, 0), 1, [call.len() as u32, digest(call)], result)
}

/// One handler invocation: the call it got and the reply it returned.
type Exchange = (Vec<u8>, Vec<u8>);

/// The handler of a [`Server`], recording every exchange by XID.
#[derive(Clone, Default)]
struct Service {
    log: Arc<Mutex<HashMap<u32, Vec<Exchange>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Service {
    fn handler(&self) -> impl Fn(&[u8]) -> Vec<u8> + Send + Sync + 'static {
        let log = self.log.clone();
        move |call: &[u8]| {
            let reply = reply_for(call);
            lock(&log).entry(word(call, 0)).or_default().push((call.to_vec(), reply.clone()));
            reply
        }
    }

    /// Every time the handler ran for `xid`.
    fn served(&self, xid: u32) -> Vec<Exchange> {
        lock(&self.log).get(&xid).cloned().unwrap_or_default()
    }
}

// ---- set-up ----

/// Bounds a test: unless the guard is dropped within [`LIMIT`], the process exits naming the test
/// (where the guard was made), since a call that never ends would otherwise hang the run.
struct Deadline {
    _armed: Sender<()>,
}

#[track_caller]
fn deadline() -> Deadline {
    let at = std::panic::Location::caller();
    let (armed, rx) = channel::<()>();
    std::thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(LIMIT) {
            // Straight to stderr: the harness captures `eprintln!` and exit would discard it.
            let _ = writeln!(std::io::stderr(), "{at}: the test did not finish within {LIMIT:?}: a call never ended");
            std::process::exit(101);
        }
    });
    Deadline { _armed: armed }
}

fn pdata(send: u32, receive: u32) -> Option<PrivateData> {
    Some(PrivateData::new(Flags::empty(), send, receive))
}

/// A client speaking `versions` and sending `private_data`, with the [`PATIENT`] timeout.
fn client_cfg(versions: (Version, Version), private_data: Option<PrivateData>) -> ClientConfig {
    let requester = requester::RequesterConfig::default().versions(versions).timeout(PATIENT);
    ClientConfig::default().requester(requester).private_data(private_data)
}

/// [`ClientConfig::default`] (private data 4096/4096) speaking `versions`, [`PATIENT`].
fn default_client(versions: (Version, Version)) -> ClientConfig {
    client_cfg(versions, ClientConfig::default().private_data)
}

fn server_cfg(versions: (Version, Version), private_data: Option<PrivateData>) -> ServerConfig {
    ServerConfig::default()
        .responder(responder::ResponderConfig::default().versions(versions))
        .private_data(private_data)
}

/// A server at `addr` running the [`Service`] with `ulb`.
fn start_server(addr: &str, cfg: ServerConfig, ulb: OpaqueAtUlb) -> (Server, Service) {
    let service = Service::default();
    let server = Server::start(InProcess, addr, cfg, Arc::new(ulb), service.handler()).unwrap();
    (server, service)
}

/// Calls with `arg` asking for `result` and checks the reply is [`reply_for`] the call.
fn call_ok(client: &Client<InProcess>, xid: u32, arg: Shape, result: Shape, ulb: &OpaqueAtUlb) -> Vec<u8> {
    let call = rpc_call(xid, arg, result);
    let reply = client.call(&call, ulb).unwrap_or_else(|e| panic!("call {xid:#x}: {e}"));
    assert_eq!(reply, reply_for(&call), "the reply to call {xid:#x}");
    call
}

/// A client and server with these configurations, after one small call between them.
fn one_call(client: ClientConfig, server: ServerConfig) -> (Client<InProcess>, Server, Service) {
    let (server, service) = start_server("inproc:*", server, PLAIN);
    let client = Client::new(InProcess, server.local_addr(), client);
    let call = call_ok(&client, 0x10, Shape::Small, Shape::Small, &PLAIN);
    assert_eq!(service.served(0x10), [(call.clone(), reply_for(&call))], "the handler saw the call once");
    (client, server, service)
}

fn thresholds(call: usize, reply: usize) -> Option<InlineThresholds> {
    Some(InlineThresholds { call, reply })
}

/// Asserts the client's connection settled on `version` with these thresholds.
#[track_caller]
fn assert_settled(client: &Client<InProcess>, version: Version, call: usize, reply: usize) {
    assert_eq!((client.version(), client.thresholds()), (Some(version), thresholds(call, reply)));
}

/// (connections, calls by version, RDMA_ERRORs sent, credit overruns).
type Counts = (u64, [u64; 3], u64, u64);

fn counts(s: &ServerStats) -> Counts {
    (s.connections, [0, s.calls.v1, s.calls.v2], s.errors_sent, s.credit_overruns)
}

/// Waits (boundedly) until the server's counters read `connections`, `calls` and `errors_sent`
/// with no credit overrun, and asserts they do: a connection thread counts a call after its
/// reply's Send completed, which may be after the client has the reply.
fn assert_counts(server: &Server, connections: u64, calls: [u64; 3], errors_sent: u64) -> ServerStats {
    let want = (connections, calls, errors_sent, 0);
    let deadline = std::time::Instant::now() + T;
    let mut s = server.stats();
    while counts(&s) != want && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
        s = server.stats();
    }
    assert_eq!(counts(&s), want, "server counters (connections, calls, errors_sent, credit_overruns)");
    s
}

// ---- a raw responder ----

/// What a raw responder does with one received message.
enum Act {
    /// Serve it as a call, granting what the responder state machine says.
    Serve,
    /// Serve it as a call, granting this many credits whatever was asked.
    Grant(u32),
    /// Drop it silently.
    Ignore,
    /// Send these bytes back, then disconnect.
    AnswerThenDisconnect(Vec<u8>),
}

/// A message a raw responder received: on which of its connections, with which XID and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    conn: usize,
    xid: u32,
    vers: u32,
}

type Policy = dyn Fn(usize, &[u8]) -> Act + Send + Sync;

/// A responder built from the public pieces, accepting any number of connections one after
/// another with `accept` as its private data, and doing with each message what its policy says.
struct RawPeer {
    addr: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    connect_data: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RawPeer {
    fn start(accept: Vec<u8>, policy: impl Fn(usize, &[u8]) -> Act + Send + Sync + 'static) -> RawPeer {
        let listener = InProcess.listen("inproc:*").unwrap();
        let addr = listener.local_addr();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let connect_data: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, d, st) = (Arc::clone(&seen), Arc::clone(&connect_data), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut n = 0;
            while !st.load(Ordering::Relaxed) {
                let Ok(req) = listener.get_request(TICK) else { continue };
                lock(&d).push(req.private_data().to_vec());
                raw_serve(req, n, &accept, &policy, &s, &st);
                n += 1;
            }
        });
        RawPeer { addr, seen, connect_data, stop, thread: Some(thread) }
    }

    fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }

    /// Stops the peer, passing on any panic of its thread (a failed check there).
    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if let Err(panic) = t.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

impl Drop for RawPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One connection of a [`RawPeer`], until it goes down, the policy disconnects or the peer
/// stops.
fn raw_serve(
    req: <InProcess as Backend>::Request,
    n: usize,
    accept: &[u8],
    policy: &Policy,
    seen: &Mutex<Vec<Seen>>,
    stop: &AtomicBool,
) {
    let mut responder = Responder::new(responder::ResponderConfig::default());
    responder.handle_connected(req.private_data(), PrivateData::find(accept));
    let pd = InProcess.alloc_pd().unwrap();
    let mut pool = None;
    let accepted = req.accept_with(&pd, accept, QpCaps::default(), |qp| {
        pool = Some(ReceivePool::post(&pd, qp, 32, 16384)?);
        Ok(())
    });
    let (Ok(qp), Some(pool)) = (accepted, pool) else { return };
    let conn = Transport::<InProcess>::new(pd, qp, T);
    while !stop.load(Ordering::Relaxed) && conn.qp().state() == QpState::Ready {
        let m = match pool.receive_within(&conn, TICK) {
            Ok(m) => m,
            Err(DataPathError::Timeout { .. }) => continue,
            Err(_) => break,
        };
        lock(seen).push(Seen { conn: n, xid: word(&m.bytes, 0), vers: word(&m.bytes, 1) });
        let grant = match policy(n, &m.bytes) {
            Act::Ignore => continue,
            Act::AnswerThenDisconnect(bytes) => {
                send_error(&conn, &bytes).unwrap();
                conn.qp().disconnect();
                break;
            }
            Act::Serve => None,
            Act::Grant(g) => Some(g),
        };
        let Asked::Call(header) = responder.handle_receive(&m.bytes) else { panic!("raw peer: not a call") };
        let mut call = Vec::new();
        fetch_call(&conn, &header, &PLAIN, &mut call).unwrap();
        let p = responder.reply_params(header.xid()).unwrap();
        let params = ReplyParams { credits: grant.unwrap_or(p.credits), ..p };
        send_reply(&conn, &header, &call, &reply_for(&call), &PLAIN, &params).unwrap();
    }
}

/// A client of `peer` with `cfg`.
fn raw_client(peer: &RawPeer, cfg: ClientConfig) -> Client<InProcess> {
    Client::new(InProcess, &peer.addr, cfg)
}

/// `garbage` (which holds no RFC 8797 message) with `pd`'s eight bytes written at `at`.
fn with_private_data_at(mut garbage: Vec<u8>, pd: PrivateData, at: usize) -> Vec<u8> {
    garbage[at..at + 8].copy_from_slice(&pd.encode());
    garbage
}

// ---- 1. both sides speak Version Two ----

/// Draft 5.1: the probe gets a non-error reply, so Version Two is settled; with both sides'
/// default private data (4096/4096) the thresholds are 4096 both ways (RFC 8797 4.2), and the
/// server's grant of 32 opens the window (RFC 8166 3.3.1). No error, no second connection.
#[test]
fn draft_5_1_v2_requester_and_responder_settle_v2_with_private_data() {
    let _deadline = deadline();
    let (client, server, _) = one_call(default_client((Version::ONE, Version::TWO)), ServerConfig::default());
    assert_settled(&client, Version::TWO, 4096, 4096);
    assert_eq!(client.credits(), 32);
    assert_counts(&server, 1, [0, 0, 1], 0);
    assert_eq!(client.memory().no_v2(&server.local_addr()), None);
}

// ---- 2. and 3. one side speaks only Version One ----

/// Draft 5.2: a Version One responder answers the probe with RDMA_ERR_VERS (1..1); the requester
/// settles Version One on the same connection (no disconnect: one connection) and sends the
/// call again, and without private data its thresholds change from Version Two's 4096 (see
/// the no-private-data test below) to Version One's 1024 ("MUST allow inline threshold values
/// to change without triggering a connection loss"): a 2000-byte call is then a Long Call.
#[test]
fn draft_5_2_v1_responder_err_vers_falls_back_on_the_same_connection() {
    let _deadline = deadline();
    let (client, server, service) =
        one_call(client_cfg((Version::ONE, Version::TWO), None), server_cfg((Version::ONE, Version::ONE), None));
    assert_settled(&client, Version::ONE, 1024, 1024);
    assert_eq!(client.memory().no_v2(&server.local_addr()), Some(NoV2Reason::ErrVers { high: 1 }));
    // One ERR_VERS, one Version One call, one connection.
    assert_counts(&server, 1, [0, 1, 0], 1);
    assert_eq!(client.credits(), 32);
    // Later calls go out in Version One at once: no second probe, no second error.
    let call = call_ok(&client, 0x11, Shape::Long(2000), Shape::Small, &PLAIN);
    assert_counts(&server, 1, [0, 2, 0], 1);
    assert_eq!(service.served(0x11)[0].0, call);
    // The probe and its Version One retransmission were Short; the 2000-byte call Long.
    assert_eq!(
        client.stats(),
        ClientStats { short: 2, chunked: 0, long: 1, continued: 0, call_only: 0, backward_dropped: 0 }
    );
}

/// Draft 5.3 and RFC 8166: a Version One requester sends Version One from its first call, and a
/// responder that speaks both answers in Version One; no probe, no RDMA_ERROR. The default
/// private data (4096/4096) sets the thresholds for Version One too (RFC 8797 4.2).
#[test]
fn draft_5_3_v1_requester_to_v2_responder_uses_v1_without_probe() {
    let _deadline = deadline();
    let (client, server, _) = one_call(default_client((Version::ONE, Version::ONE)), ServerConfig::default());
    assert_settled(&client, Version::ONE, 4096, 4096);
    assert_counts(&server, 1, [0, 1, 0], 0);
}

// ---- 4. and 5. the probe's answer never comes ----

/// Draft 5.2: "A requester can assume the same situation (no responder support for
/// RPC-over-RDMA Version Two) if the initial negotiation message is lost or dropped." A
/// responder that drops Version Two messages: after its timeout the requester closes the
/// connection (RFC 8166 3.3.3 / 4.5.4: never a second call on the connection where the
/// responder may still be running the first), remembers the responder as ProbeLost, and
/// sends the call again in Version One on the next connection.
#[test]
fn draft_5_2_lost_probe_falls_back_to_v1_after_timeout() {
    let _deadline = deadline();
    let peer = RawPeer::start(Vec::new(), |_, m| if word(m, 1) == 2 { Act::Ignore } else { Act::Serve });
    let mut cfg = client_cfg((Version::ONE, Version::TWO), None);
    cfg.requester.timeout = Duration::from_millis(300);
    let client = raw_client(&peer, cfg);
    call_ok(&client, 0x40, Shape::Small, Shape::Small, &PLAIN);
    assert_settled(&client, Version::ONE, 1024, 1024);
    assert_eq!(client.memory().no_v2(&peer.addr), Some(NoV2Reason::ProbeLost));
    let seen = |conn, vers| Seen { conn, xid: 0x40, vers };
    assert_eq!(peer.seen(), [seen(0, 2), seen(1, 1)], "the probe, then Version One on a new connection");
    drop(client);
    peer.finish();
}

/// Draft 5.2: "If the connection is lost immediately after the RDMA_ERROR reply is received, a
/// requester can avoid a possible version negotiation loop when re-establishing another
/// connection by assuming that particular responder does not support RPC-over-RDMA Version
/// Two." The raw responder answers the probe with RDMA_ERR_VERS whose `rdma_vers` word is
/// `err_vers_word` (Linux echoes 2, libevpl sends 1), then disconnects; the next connection's
/// first message is Version One.
fn lost_after_err_vers(err_vers_word: u32) {
    let peer = RawPeer::start(Vec::new(), move |conn, m| {
        if conn == 0 && word(m, 1) == 2 {
            Act::AnswerThenDisconnect(
                ErrorReply::err_vers(word(m, 0), Version::from_wire(err_vers_word), 1, Version::ONE, Version::ONE)
                    .as_bytes()
                    .to_vec(),
            )
        } else {
            Act::Serve
        }
    });
    let client = raw_client(&peer, client_cfg((Version::ONE, Version::TWO), None));
    call_ok(&client, 0x50, Shape::Small, Shape::Small, &PLAIN);
    assert_eq!(client.version(), Some(Version::ONE));
    assert_eq!(client.memory().no_v2(&peer.addr), Some(NoV2Reason::LostAfterErrVers));
    let seen = peer.seen();
    assert_eq!(seen[0], Seen { conn: 0, xid: 0x50, vers: 2 }, "connection 1 starts with the probe");
    let second = seen.iter().find(|s| s.conn == 1).expect("a second connection");
    assert_eq!(*second, Seen { conn: 1, xid: 0x50, vers: 1 }, "connection 2 starts in Version One: no probe");
    assert!(seen.iter().all(|s| s.conn <= 1), "no third connection: {seen:?}");
    drop(client);
    peer.finish();
}

#[test]
fn draft_5_2_lost_after_err_vers_v2_word_reconnects_in_v1() {
    let _deadline = deadline();
    lost_after_err_vers(2);
}

#[test]
fn draft_5_2_lost_after_err_vers_v1_word_reconnects_in_v1() {
    let _deadline = deadline();
    lost_after_err_vers(1);
}

// ---- 6. private data ----

/// RFC 8797 4.2: the call threshold is min(client Send, server Receive), the reply threshold
/// min(server Send, client Receive); a side that sent none counts as the version's default (RFC
/// 8797 5.1 for Version One, draft 2.3 for Two). Returns the thresholds a Version Two
/// connection settled on, after a 3000-byte call asking for a 3000-byte reply, each of which
/// must travel inline under a 4096-byte threshold and by chunk under a 2048-byte one.
fn v2_thresholds_with(client: Option<PrivateData>, server: Option<PrivateData>) -> InlineThresholds {
    let (client, server, service) =
        one_call(client_cfg((Version::ONE, Version::TWO), client), server_cfg((Version::ONE, Version::TWO), server));
    assert_eq!(client.version(), Some(Version::TWO));
    let call = call_ok(&client, 0x61, Shape::Long(3000), Shape::Long(3000), &PLAIN);
    assert_eq!(service.served(0x61)[0].0, call);
    let t = client.thresholds().expect("settled");
    let long_call = u64::from(t.call < 4096);
    assert_eq!(
        client.stats(),
        ClientStats {
            short: 2 - long_call,
            chunked: 0,
            long: long_call,
            continued: 0,
            call_only: 0,
            backward_dropped: 0
        },
        "{t:?}"
    );
    let s = assert_counts(&server, 1, [0, 0, 2], 0);
    let reply_chunk = u64::from(t.reply < 4096);
    assert_eq!((s.inline_replies, s.reply_chunk_replies), (2 - reply_chunk, reply_chunk), "{t:?}");
    t
}

#[test]
fn rfc8797_4_2_private_data_on_both_sides_takes_the_minimum_each_way() {
    let _deadline = deadline();
    // call = min(8192, 4096), reply = min(2048, 8192)
    assert_eq!(v2_thresholds_with(pdata(8192, 8192), pdata(2048, 4096)), InlineThresholds { call: 4096, reply: 2048 });
}

/// Also draft 2.3: "In the absence of such a mechanism, senders MUST assume a receiver's inline
/// threshold is 4096 bytes", not Version One's 1024.
#[test]
fn rfc8797_5_1_draft_2_3_no_private_data_on_either_side_uses_v2_default_4096() {
    let _deadline = deadline();
    assert_eq!(v2_thresholds_with(None, None), InlineThresholds { call: 4096, reply: 4096 });
}

#[test]
fn rfc8797_5_1_requester_private_data_only_server_counts_as_default() {
    let _deadline = deadline();
    // call = min(2048, 4096), reply = min(4096, 2048)
    assert_eq!(v2_thresholds_with(pdata(2048, 2048), None), InlineThresholds { call: 2048, reply: 2048 });
}

#[test]
fn rfc8797_5_1_responder_private_data_only_client_counts_as_default() {
    let _deadline = deadline();
    // call = min(4096, 8192), reply = min(2048, 4096)
    assert_eq!(v2_thresholds_with(None, pdata(2048, 8192)), InlineThresholds { call: 4096, reply: 2048 });
}

/// RFC 8797 5.2: accept private data with no valid message is as if none was sent: the
/// version's default. The garbage holds two decoys a sloppy parser would take for 2048/2048: the
/// Format Identifier with format version 2, and the identifier in the last four bytes of the
/// 196-byte field, where the message would overrun the buffer.
#[test]
fn rfc8797_5_2_garbage_accept_private_data_means_defaults() {
    let _deadline = deadline();
    let decoy = PrivateData::new(Flags::empty(), 2048, 2048).encode();
    let mut garbage = vec![0xa5; 196];
    garbage[20..28].copy_from_slice(&decoy);
    garbage[24] = 2; // format version 2: not RFC 8797's
    garbage[192..].copy_from_slice(&FORMAT_IDENTIFIER.to_be_bytes());
    for (versions, default) in [((Version::ONE, Version::TWO), 4096), ((Version::ONE, Version::ONE), 1024)] {
        let peer = RawPeer::start(garbage.clone(), |_, _| Act::Serve);
        let client = raw_client(&peer, client_cfg(versions, pdata(8192, 8192)));
        call_ok(&client, 0x62, Shape::Small, Shape::Small, &PLAIN);
        assert_settled(&client, versions.1, default, default);
        drop(client);
        peer.finish();
    }
}

/// RFC 8797 5.2: "The offset of the Format Identifier is not restricted to any alignment": the
/// raw acceptor puts its eight bytes at offset 13 of 40 bytes of garbage (the CM pads them to
/// 196), and the client finds them: call = min(8192, 8192), reply = min(2048, 8192). The
/// client's own 8 bytes reach the acceptor padded to the CM's 56, at offset 0.
#[test]
fn rfc8797_5_2_private_data_at_an_odd_offset_is_found() {
    let _deadline = deadline();
    let ours = PrivateData::new(Flags::empty(), 2048, 8192);
    let peer = RawPeer::start(with_private_data_at(vec![0x5a; 40], ours, 13), |_, _| Act::Serve);
    let client = raw_client(&peer, client_cfg((Version::ONE, Version::TWO), pdata(8192, 8192)));
    call_ok(&client, 0x63, Shape::Small, Shape::Small, &PLAIN);
    assert_settled(&client, Version::TWO, 8192, 2048);
    // A 6000-byte call fits the 8192-byte threshold found (under a default 4096 it would be a
    // Long Call); the 3000-byte reply exceeds 2048 and comes back through the Reply chunk.
    call_ok(&client, 0x64, Shape::Long(6000), Shape::Long(3000), &PLAIN);
    assert_eq!(
        client.stats(),
        ClientStats { short: 2, chunked: 0, long: 0, continued: 0, call_only: 0, backward_dropped: 0 }
    );
    let received = lock(&peer.connect_data)[0].clone();
    assert_eq!(received.len(), CONNECT_PRIVATE_DATA_MAX, "the CM pads connect private data to 56 bytes");
    assert_eq!(&received[..8], pdata(8192, 8192).unwrap().encode());
    assert!(received[8..].iter().all(|&b| b == 0));
    drop(client);
    peer.finish();
}

// ---- 7. a new server with other private data ----

/// RFC 8797 4.2 per connection, RFC 8166 3.3.3 and 4.5.4: thresholds belong to a connection.
/// Server A (8192/8192) goes away; server B (2048/2048) listens at the same address; the same
/// client's next calls reconnect and use B's thresholds. The call made across the drop ends
/// exactly once: a reply that B's handler produced once, or a lost-connection error B never saw.
#[test]
fn rfc8797_4_2_reconnect_takes_the_new_servers_private_data() {
    let _deadline = deadline();
    let addr = "inproc:branches-reconnect";
    let (a, a_service) = start_server(addr, server_cfg((Version::ONE, Version::TWO), pdata(8192, 8192)), PLAIN);
    let client = Client::new(InProcess, addr, client_cfg((Version::ONE, Version::TWO), pdata(8192, 8192)));
    call_ok(&client, 0x70, Shape::Small, Shape::Small, &PLAIN);
    assert_settled(&client, Version::TWO, 8192, 8192);
    assert_eq!(a_service.served(0x70).len(), 1);
    drop(a);

    let (b, b_service) = start_server(addr, server_cfg((Version::ONE, Version::TWO), pdata(2048, 2048)), PLAIN);
    let across = rpc_call(0x71, Shape::Small, Shape::Small);
    match client.call(&across, &PLAIN) {
        Ok(reply) => {
            assert_eq!(reply, reply_for(&across));
            assert_eq!(b_service.served(0x71).len(), 1, "served once");
        }
        Err(ClientError::ConnectionLost { .. }) => {
            assert!(b_service.served(0x71).is_empty(), "failed, yet served");
        }
        Err(e) => panic!("the call across the drop: {e}"),
    }
    let before = b_service.served(0x71).len();
    // The XID is free again (its call ended) and the client is on B.
    call_ok(&client, 0x71, Shape::Small, Shape::Small, &PLAIN);
    assert_eq!(b_service.served(0x71).len(), before + 1);
    assert_settled(&client, Version::TWO, 2048, 2048);
    assert_eq!(b.stats().connections, 1);
    // A closed it (stopping); to the client the connection was lost, and B's is open.
    assert!(matches!(client.ended()[..], [Ended::Lost { .. }]), "{:?}", client.ended());
    assert_eq!(b.peers()[0].ended, None);
}

// ---- 8. RDMA_OPTIONAL ----

/// Draft 3.1: "When an implementation does not recognize or support the value contained in the
/// rdma_opttype field, it MUST send an RPC-over-RDMA message with the rdma_xid field set to the
/// same value as the erroneous message, the rdma_proc field set to RDMA_ERROR, and the rdma_err
/// field set to RDMA_ERR_INVAL_OPTION." Sent raw to the server; the connection then serves a
/// normal Version Two call.
#[test]
fn draft_3_1_unknown_rdma_optional_gets_err_inval_option_and_the_connection_serves_on() {
    let _deadline = deadline();
    let (server, service) = start_server("inproc:*", ServerConfig::default(), PLAIN);
    let pd = InProcess.alloc_pd().unwrap();
    let (qp, _) = InProcess.connect(&pd, &server.local_addr(), &[], QpCaps::default(), T).unwrap();
    let conn = Transport::<InProcess>::new(pd, qp, T);
    let pool = ReceivePool::new(&conn, 4, 4096).unwrap();

    let mut optional = [0u8; 64];
    let n = rpcrdma_v2::options::encode_optional(0x80, 1, 0xdead, b"what is this", &mut optional).unwrap();
    send_error(&conn, &optional[..n]).unwrap();
    let err = pool.receive(&conn).unwrap().bytes;
    const RDMA_ERROR: u32 = 4;
    const RDMA_ERR_INVAL_OPTION: u32 = 3;
    assert_eq!(err.len(), 20, "{err:?}");
    assert_eq!(
        [word(&err, 0), word(&err, 1), word(&err, 3), word(&err, 4)],
        [0x80, 2, RDMA_ERROR, RDMA_ERR_INVAL_OPTION]
    );

    // RDMA_MSG, version 2, one credit asked, three empty chunk lists, then the call.
    let call = rpc_call(0x81, Shape::Small, Shape::Small);
    let mut msg = words(&[0x81, 2, 1, 0, 0, 0, 0]);
    msg.extend_from_slice(&call);
    send_error(&conn, &msg).unwrap();
    let reply = pool.receive(&conn).unwrap().bytes;
    assert_eq!([word(&reply, 0), word(&reply, 1), word(&reply, 3)], [0x81, 2, 0], "an RDMA_MSG in Version Two");
    assert_eq!(&reply[28..], reply_for(&call));
    assert_eq!(service.served(0x81).len(), 1);
    assert_counts(&server, 1, [0, 0, 1], 1);
}

// ---- 9. credits ----

/// RFC 8166 3.3.1: "The granted value MUST NOT be zero", and a requester reads a zero grant as
/// one. Returns the client's window after three calls to a responder granting `grant`.
fn window_after_grants(grant: u32) -> u32 {
    let peer = RawPeer::start(Vec::new(), move |_, _| Act::Grant(grant));
    let client = raw_client(&peer, default_client((Version::ONE, Version::TWO)));
    for xid in 0x90..0x93 {
        call_ok(&client, xid, Shape::Small, Shape::Small, &PLAIN);
    }
    assert_eq!(client.version(), Some(Version::TWO));
    let window = client.credits();
    drop(client);
    peer.finish();
    window
}

#[test]
fn rfc8166_3_3_1_zero_grant_is_read_as_one() {
    let _deadline = deadline();
    assert_eq!(window_after_grants(0), 1);
    // The window does follow a valid grant: the check above can fail.
    assert_eq!(window_after_grants(4), 4);
}

// ---- 10. every message form through Client and Server ----

/// RFC 8166 3.5 (and the draft, whose chunk rules are Version One's): a DDP-eligible argument in
/// a Read chunk, a DDP-eligible result in a Write chunk, a Long Call in a Position-Zero Read
/// chunk, a Long Reply in the Reply chunk; each in Version One and Version Two. All sizes exceed
/// every threshold in play (4096), so none can travel inline; the client's and server's counters
/// show the forms used. The handler sees exactly the call sent and the client gets exactly the
/// reply the handler returned.
#[test]
fn rfc8166_3_5_every_message_form_in_both_versions() {
    let _deadline = deadline();
    let cases = [
        (Shape::Opaque(10_000), Shape::Small),
        (Shape::Small, Shape::Opaque(10_000)),
        (Shape::Long(12_000), Shape::Small),
        (Shape::Small, Shape::Long(12_000)),
        (Shape::Opaque(6_000), Shape::Opaque(7_000)),
    ];
    for versions in [(Version::ONE, Version::ONE), (Version::ONE, Version::TWO)] {
        let (server, service) = start_server("inproc:*", ServerConfig::default(), DDP);
        let client = Client::new(InProcess, server.local_addr(), default_client(versions));
        for (i, &(arg, result)) in cases.iter().enumerate() {
            let xid = 0xa0 + i as u32;
            let call = call_ok(&client, xid, arg, result, &binding(arg, result));
            let served = service.served(xid);
            assert_eq!(served.len(), 1, "{versions:?} {arg:?} -> {result:?}");
            assert_eq!(served[0].0, call, "the handler saw the exact call: {versions:?} {arg:?}");
        }
        assert_eq!(client.version(), Some(versions.1));
        let mut calls = [0; 3];
        calls[versions.1.wire() as usize] = cases.len() as u64;
        let s = assert_counts(&server, 1, calls, 0);
        // Two Short calls, two Chunked (Read chunks), one Long (Position-Zero Read chunk).
        assert_eq!(
            client.stats(),
            ClientStats { short: 2, chunked: 2, long: 1, continued: 0, call_only: 0, backward_dropped: 0 },
            "{versions:?}"
        );
        // The server saw the same forms from its side.
        assert_eq!((s.read_chunk_calls, s.long_calls), (2, 1), "{versions:?}");
        // One reply in the Reply chunk, four inline, two results by RDMA Write.
        let forms = (s.inline_replies, s.reply_chunk_replies, s.write_chunk_results);
        assert_eq!(forms, (4, 1, 2), "{versions:?}");
    }
}

// ---- 11. many callers ----

/// RFC 8166 3.3.1 (credits) and 4.2.1 (the XID matches a reply to its call): 8 threads x 50
/// calls with unique XIDs on one client; every call gets its own reply, the handler ran once per
/// call, and the requester never had more calls in flight than granted.
#[test]
fn rfc8166_3_3_1_many_concurrent_callers_stay_within_credits() {
    let _deadline = deadline();
    let (server, service) = start_server("inproc:*", ServerConfig::default(), PLAIN);
    let client = Client::new(InProcess, server.local_addr(), default_client((Version::ONE, Version::TWO)));
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let client = &client;
            s.spawn(move || {
                for i in 0..50u32 {
                    call_ok(client, (t + 1) << 16 | i, Shape::Small, Shape::Long(100 + 4 * i as usize), &PLAIN);
                }
            });
        }
    });
    for t in 0..8u32 {
        for i in 0..50u32 {
            assert_eq!(service.served((t + 1) << 16 | i).len(), 1);
        }
    }
    assert_counts(&server, 1, [0, 0, 400], 0);
}

// ---- 12. which side dropped a connection, and why ----

/// RFC 8166 4.5.4: a call with no reply within the requester's timeout closes the connection
/// and goes again on a new one. The client records that it closed the connection itself, and
/// why (`Client::ended`), so a reconnect seen later says which side dropped.
#[test]
fn rfc8166_4_5_4_a_requester_timeout_closes_the_connection_and_the_client_says_why() {
    let _deadline = deadline();
    let peer = RawPeer::start(Vec::new(), |conn, _| if conn == 0 { Act::Ignore } else { Act::Serve });
    let mut cfg = client_cfg((Version::ONE, Version::ONE), None);
    cfg.requester.timeout = Duration::from_millis(300);
    let client = raw_client(&peer, cfg);
    assert!(client.ended().is_empty());
    call_ok(&client, 0x90, Shape::Small, Shape::Small, &PLAIN);
    let seen: Vec<usize> = peer.seen().iter().map(|s| s.conn).collect();
    assert_eq!(seen, [0, 1], "ignored on the first connection, served on the second");
    let [Ended::Closed(why)] = &client.ended()[..] else { panic!("{:?}", client.ended()) };
    assert!(why.contains("requester's timeout (300ms)"), "{why}");
    drop(client);
    peer.finish();
}

/// The server's record of each connection (`Server::peers`) says how it ended: one its
/// requester closed is lost to the server, not closed by it.
#[test]
fn a_connection_the_requester_closed_is_recorded_lost_by_the_server() {
    let _deadline = deadline();
    let (client, server, _service) = one_call(default_client((Version::ONE, Version::TWO)), ServerConfig::default());
    assert_eq!(server.peers()[0].ended, None, "open while served");
    drop(client);
    while server.peers()[0].ended.is_none() {
        std::thread::sleep(TICK);
    }
    let ended = server.peers()[0].ended.clone();
    assert!(matches!(ended, Some(Ended::Lost { .. })), "{ended:?}");
}

/// The server's timeout (`ServerConfig::timeout`) bounds each wait for a completion of its own
/// work requests, nothing else: a requester idle for longer, or a call whose handler takes
/// longer, keeps its connection.
#[test]
fn the_server_timeout_bounds_completions_only_not_idle_time_or_handlers() {
    let _deadline = deadline();
    let short = Duration::from_millis(50);
    let service = Service::default();
    let served = service.handler();
    let slow = move |call: &[u8]| {
        if word(call, 0) == 0xa1 {
            std::thread::sleep(4 * short);
        }
        served(call)
    };
    let cfg = ServerConfig::default().timeout(short);
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(PLAIN), slow).unwrap();
    let client = Client::new(InProcess, server.local_addr(), default_client((Version::ONE, Version::TWO)));
    call_ok(&client, 0xa0, Shape::Small, Shape::Small, &PLAIN);
    std::thread::sleep(4 * short);
    call_ok(&client, 0xa1, Shape::Small, Shape::Small, &PLAIN);
    call_ok(&client, 0xa2, Shape::Small, Shape::Small, &PLAIN);
    assert_eq!(server.stats().connections, 1);
    assert_eq!(server.peers()[0].ended, None);
    assert!(client.ended().is_empty(), "{:?}", client.ended());
}
