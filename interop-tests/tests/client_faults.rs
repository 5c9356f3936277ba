//! `negotiate::client::Client` against responders that answer the probe slowly or with an
//! error, on the in-process and TCP backends: a timed-out call goes out again only on a new
//! connection (RFC 8166 sections 3.3.3 and 4.5.4, draft section 5.2), and any answer to the
//! probe ends just that call (draft section 5). And against addresses and responders that
//! fail each in its own way: every failure says which, with its cause ([`ClientError`]).
//!
//! Each test is bounded: every call runs under [`call_within`], and a [`deadline`] ends the
//! process if a test (a client's or a responder's drop included) does not finish in time.
//! Misbehaving responders are built here from public pieces (a verbs backend,
//! `negotiate::datapath` and `negotiate::responder::Responder`), as in faults.rs.

mod common;

use std::io::Write as _;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use common::{echo, words, Act, RawResponder};
use negotiate::client::{Client, ClientConfig, ClientError};
use negotiate::memory::NoV2Reason;
use negotiate::reply::PeerError;
use negotiate::requester::{self, CallFailure};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Backend, Listener};

/// The requester's timeout in these tests: 200 ms per transmission, three transmissions.
const TIMEOUT: Duration = Duration::from_millis(200);
/// How long one call may take, all its attempts included, before the test fails.
const CALL_LIMIT: Duration = Duration::from_secs(10);
/// How long one test may take before the process is ended.
const TEST_LIMIT: Duration = Duration::from_secs(60);
/// Nothing DDP-eligible: every call and reply here is small and inline.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

fn client_config() -> ClientConfig {
    ClientConfig::default()
        .requester(requester::RequesterConfig::default().timeout(TIMEOUT).max_attempts(3))
        .connect_timeout(TIMEOUT)
}

/// The calls here: the shared call shape (common::call) with a 32-byte opaque.
fn call(xid: u32) -> Vec<u8> {
    common::call(xid, common::SMALL)
}

/// Ends the process if the test it guards has not finished within [`TEST_LIMIT`]: a hang
/// fails the run instead of stalling it.
struct Deadline {
    _armed: Sender<()>,
}

#[track_caller]
fn deadline() -> Deadline {
    let at = std::panic::Location::caller();
    let (armed, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(TEST_LIMIT) {
            let _ = writeln!(std::io::stderr(), "{at}: the test did not finish within {TEST_LIMIT:?}");
            std::process::exit(101);
        }
    });
    Deadline { _armed: armed }
}

/// `client.call` on another thread: a call that does not end within [`CALL_LIMIT`] fails the
/// test instead of hanging it.
fn call_within<B: Backend + 'static>(client: &Arc<Client<B>>, xid: u32) -> Result<Vec<u8>, ClientError> {
    let (tx, rx) = mpsc::channel();
    let c = client.clone();
    std::thread::spawn(move || {
        let _ = tx.send(c.call(&call(xid), &ULB));
    });
    rx.recv_timeout(CALL_LIMIT).unwrap_or_else(|_| panic!("call {xid:#x} did not end within {CALL_LIMIT:?}"))
}

/// Calls `xid` and checks it came back with exactly its own reply.
fn call_ok<B: Backend + 'static>(client: &Arc<Client<B>>, xid: u32) {
    let reply = call_within(client, xid).unwrap_or_else(|e| panic!("call {xid:#x}: {e}"));
    assert!(reply == echo(&call(xid)), "call {xid:#x}: a reply that is not its own");
}

// ------------------------------------------------------------------------------------------
// Finding 1: a slow first call.
// ------------------------------------------------------------------------------------------

/// RFC 8166 section 3.3.3 ("a Requester MUST NOT assume more than one credit is available and
/// MUST receive a valid reply ... prior to sending its next request") and 4.5.4, with draft
/// section 5.2: a Version Two responder answers the probe only after the requester's timeout.
/// The requester closes the connection first and sends the call again, in Version One, only
/// on a new connection: the responder never sees a second call on the connection where it is
/// still running the first (no credit overrun), and the call ends once, with its own reply.
/// The slow responder's reply came after the disconnect, so it ran the call on both
/// connections, the at-least-once execution a lost reply leaves (faults.rs explains why).
fn slow_probe<B: Backend + Clone + Send + 'static>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |a| {
        if a.conn == 0 && a.nth == 0 {
            Act::Slow(TIMEOUT * 3 / 2)
        } else {
            Act::Serve
        }
    });
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    call_ok(&client, 0x100);
    call_ok(&client, 0x101);
    // The slow reply on connection 0 went out after the client closed it (or failed): wait for
    // that connection's end, so that the log below is complete.
    let ended = raw.wait_for(CALL_LIMIT, |l| l.ended.contains(&0));
    let log = raw.log();
    let first: Vec<(u32, u32)> = log.arrivals.iter().filter(|a| a.xid == 0x100).map(|a| (a.conn, a.vers)).collect();
    assert_eq!(first, [(0, 2), (1, 1)], "the probe, then Version One on a new connection only");
    assert!(log.overruns.iter().all(|&o| o == 0), "a call beyond the responder's grant: {:?}", log.overruns);
    assert_eq!(log.connections, 2);
    assert!(ended, "the requester never closed the connection of its timed-out probe");
    assert_eq!(client.memory().no_v2(&raw.addr), Some(NoV2Reason::ProbeLost), "no answer before the disconnect");
    assert_eq!(client.version(), Some(Version::ONE));
}

// ------------------------------------------------------------------------------------------
// Finding 2: the probe answered by an RDMA_ERROR other than RDMA_ERR_VERS.
// ------------------------------------------------------------------------------------------

/// RFC 8166 section 5.5.2 (ERR_CHUNK answers a header whose version the responder recognized)
/// and draft section 5: a responder that answers the probe with RDMA_ERR_BAD_HEADER (ERR_CHUNK)
/// fails that call alone, with the responder's error; the calls after it are sent and served
/// in Version Two on the same connection, each within its deadline.
fn err_chunk_probe<B: Backend + Clone + Send + 'static>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |a| {
        if a.conn == 0 && a.nth == 0 {
            Act::Answer(words(&[a.xid, 2, 32, 4, 2]))
        } else {
            Act::Serve
        }
    });
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    match call_within(&client, 0x200) {
        Err(ClientError::Call(CallFailure::Peer(e))) => assert_eq!(e, PeerError::BAD_HEADER),
        other => panic!("expected the responder's RDMA_ERR_BAD_HEADER, got {other:?}"),
    }
    call_ok(&client, 0x201);
    call_ok(&client, 0x202);
    assert_eq!(client.version(), Some(Version::TWO));
    let log = raw.log();
    assert_eq!(log.connections, 1);
    assert_eq!(log.executed, [(0, 0x201), (0, 0x202)]);
    assert!(log.arrivals.iter().all(|a| a.vers == 2), "{:?}", log.arrivals);
}

// ------------------------------------------------------------------------------------------
// Finding 7: each failure says what it was.
// ------------------------------------------------------------------------------------------

/// An address of `backend` where nothing listens: one that listened a moment ago.
fn nobody_listens<B: Backend>(backend: &B) -> String {
    let listener = backend.listen(&backend.any_address()).expect("listen");
    listener.local_addr()
}

/// The text of `e` and of every error under it.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text += &format!(": {c}");
        cause = c.source();
    }
    text
}

/// RFC 8166 section 4.5.4 (the requester gives up after its attempts) with the verbs
/// connect errors: a port nothing listens on is refused, on each of the call's three attempts;
/// [`Client::connect`] says so after its one attempt; the cause stays attached.
fn refused<B: Backend + Clone + Send + 'static>(backend: B) {
    let addr = nobody_listens(&backend);
    match Client::connect(backend.clone(), &addr, client_config()) {
        Err(ClientError::Refused { addr: a, attempts: 1, source: rpcrdma_verbs::Error::ConnectionRefused(_) }) => {
            assert_eq!(a, addr);
        }
        other => panic!("expected refused, got {:?}", other.err()),
    }
    let client = Arc::new(Client::new(backend, &addr, client_config()));
    let e = call_within(&client, 0x700).expect_err("nothing listens");
    let text = chain(&e);
    assert!(matches!(e, ClientError::Refused { attempts: 3, .. }), "{text}");
    assert!(text.contains("refused") && text.contains(&addr), "{text}");
}

/// An address the backend cannot parse fails as a bad address, at once from
/// [`Client::connect`] and from a call, with the verbs error as its cause.
fn bad_address<B: Backend + Clone + Send + 'static>(backend: B) {
    let addr = "no-such-address";
    match Client::connect(backend.clone(), addr, client_config()) {
        Err(ClientError::BadAddress { source: rpcrdma_verbs::Error::BadAddress(_), .. }) => {}
        other => panic!("expected a bad address, got {:?}", other.err()),
    }
    let client = Arc::new(Client::new(backend, addr, client_config()));
    let e = call_within(&client, 0x710).expect_err("no such address");
    assert!(matches!(e, ClientError::BadAddress { .. }), "{}", chain(&e));
    assert!(std::error::Error::source(&e).is_some(), "the verbs error is kept");
}

/// A listener that never accepts: each connection attempt ends at the client's connect
/// timeout, reported as such (not as a lost connection), with the timeout it waited.
fn never_accepted<B: Backend + Clone + Send + 'static>(backend: B) {
    let listener = backend.listen(&backend.any_address()).expect("listen");
    let addr = listener.local_addr();
    let started = std::time::Instant::now();
    match Client::connect(backend.clone(), &addr, client_config()) {
        Err(ClientError::ConnectTimeout { timeout, attempts: 1, source: rpcrdma_verbs::Error::Timeout, .. }) => {
            assert_eq!(timeout, TIMEOUT);
        }
        other => panic!("expected a connect timeout, got {:?}", other.err()),
    }
    assert!(started.elapsed() >= TIMEOUT, "waited the connect timeout");
    let client = Arc::new(Client::new(backend, &addr, client_config()));
    let e = call_within(&client, 0x720).expect_err("never accepted");
    assert!(matches!(e, ClientError::ConnectTimeout { attempts: 3, .. }), "{}", chain(&e));
    assert!(e.to_string().contains("not accepted within 200ms"), "{e}");
    drop(listener);
}

/// RFC 8166 section 4.5.4: a responder that accepts and never replies: each attempt times
/// out and closes its connection; the call fails as a reply timeout after three attempts, on
/// three connections.
fn never_replies<B: Backend + Clone + Send + 'static>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |_| Act::Ignore);
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    let e = call_within(&client, 0x730).expect_err("never replied");
    match e {
        ClientError::ReplyTimeout { timeout, attempts: 3 } => assert_eq!(timeout, TIMEOUT),
        other => panic!("expected a reply timeout, got {}", chain(&other)),
    }
    assert!(raw.wait_for(CALL_LIMIT, |l| l.connections == 3), "one connection per attempt: {:?}", raw.log());
    assert_eq!(raw.log().arrivals.iter().filter(|a| a.xid == 0x730).count(), 3);
    let ended = client.ended();
    assert!(ended.len() == 3 && ended.iter().all(|e| e.closed_here()), "closed by the client each time: {ended:?}");
}

/// RFC 8166 section 4.5.4: a responder that closes the connection on each call: the call
/// fails as a lost connection after three attempts, carrying how the last connection ended
/// (lost under the client, not closed by it).
fn closed_by_the_server<B: Backend + Clone + Send + 'static>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |_| Act::Close);
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    let e = call_within(&client, 0x740).expect_err("closed every time");
    let text = chain(&e);
    let ClientError::ConnectionLost { attempts: 3, ended } = &e else {
        panic!("expected a lost connection, got {text}")
    };
    assert!(!ended.closed_here(), "{ended:?}");
    assert!(text.starts_with("connection lost") && text.ends_with(&ended.to_string()), "{text}");
    assert_eq!(raw.log().arrivals.iter().filter(|a| a.xid == 0x740).count(), 3);
}

/// RFC 8166 section 4.5 ("Receipt of this procedure completes the RPC transaction"): a
/// responder that answers every call with ERR_CHUNK: each call fails at once with the
/// responder's error, on its first attempt, and the connection stays.
fn peer_error<B: Backend + Clone + Send + 'static>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |a| {
        Act::Answer(words(&[a.xid, a.vers, 32, 4, 2]))
    });
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    for xid in [0x750, 0x751] {
        match call_within(&client, xid) {
            Err(ClientError::Call(CallFailure::Peer(e))) => assert_eq!(e, PeerError::BAD_HEADER),
            other => panic!("call {xid:#x}: expected the responder's ERR_CHUNK, got {other:?}"),
        }
    }
    let log = raw.log();
    assert_eq!(log.arrivals.len(), 2, "one transmission each");
    assert_eq!(log.connections, 1);
}

/// Each scenario above as a test on the in-process backend (`in_process::NAME`) and on the TCP
/// backend (`over_tcp::NAME`), named for the rule it checks.
macro_rules! on_both_backends {
    ($($test:ident => $scenario:ident),* $(,)?) => {
        mod in_process {
            $(
                #[test]
                fn $test() {
                    let _deadline = super::deadline();
                    super::$scenario(rpcrdma_verbs::InProcess);
                }
            )*
        }
        mod over_tcp {
            $(
                #[test]
                fn $test() {
                    let _deadline = super::deadline();
                    super::$scenario(rpcrdma_verbs::Tcp);
                }
            )*
        }
    };
}

on_both_backends! {
    rfc8166_3_3_3_a_slow_probe_is_retransmitted_only_on_a_new_connection => slow_probe,
    rfc8166_5_5_2_err_chunk_answering_the_probe_fails_only_that_call => err_chunk_probe,
    rfc8166_4_5_4_a_refused_connection_fails_as_refused => refused,
    rfc8166_4_5_4_an_unparsable_address_fails_as_a_bad_address => bad_address,
    rfc8166_4_5_4_a_listener_that_never_accepts_fails_as_a_connect_timeout => never_accepted,
    rfc8166_4_5_4_a_responder_that_never_replies_fails_as_a_reply_timeout => never_replies,
    rfc8166_4_5_4_a_connection_the_server_closes_fails_as_lost_with_its_reason => closed_by_the_server,
    rfc8166_4_5_an_rdma_error_fails_the_call_with_the_peer_s_error => peer_error,
}
