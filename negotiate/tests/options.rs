//! Version Two's extension mechanism (draft-cel-nfsv4-rpcrdma-version-two-00 sections 3.1,
//! 3.2 and 4.2) in both directions and both roles, through Client and Server on the
//! in-process backend; each test is named for the rule it checks (docs/conformance.md cites
//! them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use negotiate::backchannel::{Backchannel, BackchannelError};
use negotiate::client::{Client, ClientConfig, ClientError};
use negotiate::extension::{Extension, OptionReply};
use negotiate::reply::{DropReason, Incoming};
use negotiate::requester::{self, Action, CallFailure, Requester};
use negotiate::responder;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_v2::options::{encode_optional, OptionOutcome, OptionalAnswer, OptionalMessage};
use rpcrdma_verbs::InProcess;

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// An RPC message: XID, msg_type, then `body`.
fn rpc(xid: u32, msg_type: u32, body: &[u8]) -> Vec<u8> {
    [&xid.to_be_bytes()[..], &msg_type.to_be_bytes(), body].concat()
}

/// Answers a call with a reply carrying the same body.
fn echo(call: &[u8]) -> Vec<u8> {
    rpc(u32::from_be_bytes(call[..4].try_into().unwrap()), 1, &call[8..])
}

/// An extension owning `opttype` that answers with opttype + 1 and the optinfo and payload
/// it received, concatenated.
fn reverser(opttype: u32) -> Extension {
    Extension::new([opttype], move |m: &OptionalMessage<'_>| {
        let optinfo = [m.optinfo, b"|", m.payload].concat();
        OptionOutcome::Answer(OptionalAnswer { opttype: m.opttype + 1, optinfo })
    })
}

fn start(cfg: ServerConfig) -> Server {
    Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), echo).unwrap()
}

fn client_with(server: &Server, cfg: ClientConfig) -> Client<InProcess> {
    let client = Client::with_backchannel(InProcess, server.local_addr(), cfg, Arc::new(echo));
    // A first call settles the version (and shows it to the server).
    assert_eq!(client.call(&rpc(1, 0, b"hi.."), &ULB).unwrap(), rpc(1, 1, b"hi.."));
    client
}

/// The server's handle for its one connection, once it is there.
fn backchannel(server: &Server) -> Backchannel {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(b) = server.backchannels().into_iter().next() {
            return b;
        }
        assert!(Instant::now() < deadline, "no connection");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn versions(low: Version, high: Version) -> (Version, Version) {
    (low, high)
}

/// Waits for the server's count of RDMA_ERROR messages sent to reach `n` (it counts after
/// the Send completed, so after the client may have seen it).
fn errors_sent_reach(server: &Server, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stats().errors_sent < n {
        assert!(Instant::now() < deadline, "errors sent: {} of {n}", server.stats().errors_sent);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(server.stats().errors_sent, n);
}

#[test]
fn draft_3_1_responder_answers_an_unknown_opttype_with_err_inval_option_and_keeps_serving() {
    let server = start(ServerConfig::default().extensions(vec![reverser(10)]));
    let client = client_with(&server, ClientConfig::default());
    assert_eq!(client.version(), Some(Version::TWO));
    assert_eq!(client.send_option(11, b"what", &[]).unwrap(), OptionReply::NotSupported);
    errors_sent_reach(&server, 1);
    // The connection keeps serving calls.
    for xid in 2..10 {
        assert_eq!(client.call(&rpc(xid, 0, b"more"), &ULB).unwrap(), rpc(xid, 1, b"more"));
    }
    assert!(client.ended().is_empty());
}

#[test]
fn draft_3_2_a_server_extension_answers_the_clients_rdma_optional_with_its_xid() {
    let server = start(ServerConfig::default().extensions(vec![reverser(10)]));
    let client = client_with(&server, ClientConfig::default());
    // Section 4.2: an RPC Payload Stream MAY follow an RDMA_OPTIONAL; the handler sees it.
    let answer = client.send_option(10, b"ping", b"payload").unwrap();
    assert_eq!(answer, OptionReply::Answered { opttype: 11, optinfo: b"ping|payload".to_vec() });
    assert_eq!(client.call(&rpc(2, 0, b"next"), &ULB).unwrap(), rpc(2, 1, b"next"));
    assert_eq!(server.stats().errors_sent, 0);
}

#[test]
fn draft_3_1_requester_answers_an_unknown_opttype_with_err_inval_option() {
    let server = start(ServerConfig::default());
    let client = client_with(&server, ClientConfig::default().extensions(vec![reverser(20)]));
    let back = backchannel(&server);
    assert_eq!(back.send_option(21, b"nope", &[]).unwrap(), OptionReply::NotSupported);
    // The client keeps serving: forward calls, and the backward direction.
    assert_eq!(client.call(&rpc(2, 0, b"more"), &ULB).unwrap(), rpc(2, 1, b"more"));
    assert_eq!(back.call(&rpc(0x9000_0000, 0, b"back")).unwrap(), rpc(0x9000_0000, 1, b"back"));
    assert_eq!(back.send_option(22, &[], &[]).unwrap(), OptionReply::NotSupported);
    assert!(client.ended().is_empty());
}

#[test]
fn draft_3_2_a_client_extension_answers_the_servers_rdma_optional() {
    let server = start(ServerConfig::default());
    let client = client_with(&server, ClientConfig::default().extensions(vec![reverser(20)]));
    let back = backchannel(&server);
    let answer = back.send_option(20, b"from server", b"!").unwrap();
    assert_eq!(answer, OptionReply::Answered { opttype: 21, optinfo: b"from server|!".to_vec() });
    assert_eq!(client.call(&rpc(2, 0, b"more"), &ULB).unwrap(), rpc(2, 1, b"more"));
}

#[test]
fn draft_3_1_a_version_one_connection_never_sends_rdma_optional() {
    // A Version One client, a Version Two capable server: nothing goes out.
    let server = start(ServerConfig::default().extensions(vec![reverser(10)]));
    let v1 = requester::RequesterConfig::default().versions(versions(Version::ONE, Version::ONE));
    let client = client_with(&server, ClientConfig::default().requester(v1));
    assert_eq!(client.version(), Some(Version::ONE));
    let got = client.send_option(10, b"ping", &[]);
    assert!(matches!(got, Err(ClientError::Call(CallFailure::NotVersionTwo))), "{got:?}");
    assert!(matches!(backchannel(&server).send_option(10, &[], &[]), Err(BackchannelError::NotVersionTwo(_))));
    assert_eq!(client.call(&rpc(2, 0, b"more"), &ULB).unwrap(), rpc(2, 1, b"more"));
    assert_eq!(server.stats().errors_sent, 0);
    drop((client, server));

    // A Version One server: the client settles Version One after RDMA_ERR_VERS, then sends
    // no RDMA_OPTIONAL either.
    let v1 = responder::ResponderConfig::default().versions(versions(Version::ONE, Version::ONE));
    let server = start(ServerConfig::default().responder(v1));
    let client = client_with(&server, ClientConfig::default().extensions(vec![reverser(20)]));
    assert_eq!(client.version(), Some(Version::ONE));
    let errors_after_probe = server.stats().errors_sent;
    let got = client.send_option(10, b"ping", &[]);
    assert!(matches!(got, Err(ClientError::Call(CallFailure::NotVersionTwo))), "{got:?}");
    let got = backchannel(&server).send_option(20, &[], &[]);
    assert!(matches!(got, Err(BackchannelError::NotVersionTwo(_))), "{got:?}");
    assert_eq!(server.stats().errors_sent, errors_after_probe);
}

/// The requester's own rule, sans I/O: an RDMA_OPTIONAL on a connection settled on Version
/// One is dropped (as before extensions existed: it answers no call, draft 5.3), never
/// answered; on a Version Two connection it is answered with RDMA_ERR_INVAL_OPTION.
#[test]
fn draft_3_1_only_a_requester_settled_on_version_two_answers_rdma_optional() {
    let mut optional = [0u8; 32];
    let n = encode_optional(0x77, 1, 99, b"?", &mut optional).unwrap();
    for (high, answers) in [(Version::ONE, false), (Version::TWO, true)] {
        let now = Instant::now();
        let cfg = requester::RequesterConfig::default().versions((Version::ONE, high));
        let mut r = Requester::new(cfg, "addr");
        assert_eq!(r.poll_action(), Some(Action::Connect));
        r.handle_connected(None, &[], now);
        r.call(1, now).unwrap();
        let t = std::iter::from_fn(|| r.poll_action())
            .find_map(|e| if let Action::Transmit(t) = e { Some(t) } else { None })
            .unwrap();
        // A reply in the call's version, no chunks: settles it.
        let reply: Vec<u8> =
            [1u32, t.version.wire(), 8, 0, 0, 0, 0, 1, 1].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert!(matches!(r.handle_receive(&reply, now), Incoming::Reply { xid: 1, .. }));
        assert_eq!(r.version(), Some(high));
        match r.handle_receive(&optional[..n], now) {
            Incoming::RefuseOption(e) if answers => {
                // RDMA_ERROR, same XID, RDMA_ERR_INVAL_OPTION.
                assert_eq!(e.as_bytes()[..4], 0x77u32.to_be_bytes());
                assert_eq!(e.as_bytes()[12..20], [0, 0, 0, 4, 0, 0, 0, 3]);
            }
            Incoming::Dropped(DropReason::Undecodable) if !answers => {}
            other => panic!("settled on {high:?}: {other:?}"),
        }
    }
}

/// Draft section 3.1 (MUST answer an unrecognized RDMA_OPTIONAL with RDMA_ERR_INVAL_OPTION)
/// holds whenever the connection is on Version Two, not only once settled: a responder that
/// read the Version Two probe may send its own RDMA_OPTIONAL before answering it. Before the
/// probe is out (nothing sent yet in Version Two) it is dropped.
#[test]
fn draft_3_1_a_requester_with_its_probe_out_answers_rdma_optional_with_inval_option() {
    let mut optional = [0u8; 32];
    let n = encode_optional(0x77, 1, 99, b"?", &mut optional).unwrap();
    let now = Instant::now();
    let mut r = Requester::new(requester::RequesterConfig::default(), "addr");
    assert_eq!(r.poll_action(), Some(Action::Connect));
    r.handle_connected(None, &[], now);
    assert!(matches!(r.handle_receive(&optional[..n], now), Incoming::Dropped(_)), "no probe out yet");
    r.call(1, now).unwrap();
    let t =
        std::iter::from_fn(|| r.poll_action()).find_map(|e| if let Action::Transmit(t) = e { Some(t) } else { None });
    assert!(t.unwrap().probe);
    assert_eq!(r.version(), None, "not settled");
    match r.handle_receive(&optional[..n], now) {
        Incoming::RefuseOption(e) => {
            assert_eq!(e.as_bytes()[..4], 0x77u32.to_be_bytes());
            assert_eq!(e.as_bytes()[12..20], [0, 0, 0, 4, 0, 0, 0, 3]);
        }
        other => panic!("with the probe out: {other:?}"),
    }
    assert!(r.is_active(1), "the probe's call is untouched");
}

#[test]
fn draft_3_1_an_option_without_answer_times_out_alone_and_the_connection_stays() {
    let silent = Extension::new([30], |_: &OptionalMessage<'_>| OptionOutcome::Done);
    let server = start(ServerConfig::default().extensions(vec![silent]));
    let quick = requester::RequesterConfig::default().timeout(Duration::from_millis(200));
    let client = client_with(&server, ClientConfig::default().requester(quick));
    let got = client.send_option(30, &[], &[]);
    assert!(matches!(got, Err(ClientError::ReplyTimeout { attempts: 1, .. })), "{got:?}");
    // Its credit came back and the connection was not closed.
    assert_eq!(client.call(&rpc(2, 0, b"more"), &ULB).unwrap(), rpc(2, 1, b"more"));
    assert!(client.ended().is_empty());
    assert_eq!(client.credits(), quick.credits);
}

/// A flood of RDMA_OPTIONAL messages with unknown opttypes beside calls: every one is refused,
/// every call is served, each option held a credit (the server never saw more messages than
/// it granted: no overrun, no connection lost for want of a Receive), and the client's window
/// is whole afterwards.
#[test]
fn draft_3_1_a_flood_of_unknown_options_leaves_calls_served_and_nothing_growing() {
    let credits = 4;
    let server = start(
        ServerConfig::default()
            .responder(responder::ResponderConfig::default().credits(credits))
            .extensions(vec![reverser(10)]),
    );
    let cfg = requester::RequesterConfig::default().credits(credits);
    let client = Arc::new(client_with(&server, ClientConfig::default().requester(cfg)));
    let refused = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(Mutex::new(0u32));
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let (client, refused, calls) = (client.clone(), refused.clone(), calls.clone());
            std::thread::spawn(move || {
                for i in 0..50u32 {
                    if t % 2 == 0 {
                        let got = client.send_option(1000 + i, &[t as u8; 16], &[]).unwrap();
                        assert_eq!(got, OptionReply::NotSupported);
                        refused.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let xid = 0x1000 * (t + 1) + i;
                        assert_eq!(client.call(&rpc(xid, 0, b"flood..."), &ULB).unwrap(), rpc(xid, 1, b"flood..."));
                        *calls.lock().unwrap() += 1;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(refused.load(Ordering::Relaxed), 200);
    assert_eq!(*calls.lock().unwrap(), 200);
    errors_sent_reach(&server, 200);
    assert_eq!(server.stats().credit_overruns, 0);
    assert!(client.ended().is_empty(), "{:?}", client.ended());
    assert_eq!(client.credits(), credits);
    assert_eq!(client.call(&rpc(3, 0, b"after..."), &ULB).unwrap(), rpc(3, 1, b"after..."));
}

/// An extension whose handler panics on every message of `opttype` (the handler is the
/// application's code, run on the peer's bytes), after counting it.
fn panicking(opttype: u32, runs: Arc<AtomicUsize>) -> Extension {
    Extension::new([opttype], move |_: &OptionalMessage<'_>| {
        runs.fetch_add(1, Ordering::SeqCst);
        panic!("the extension failed (this panic is the test's)")
    })
}

/// Draft section 3.1 ("unsupported": RDMA_ERR_INVAL_OPTION): an extension's handler that
/// panics on the client's RDMA_OPTIONAL has the server answer it as one its handler does not
/// support, and the connection and the server serve on, however many times it happens (more
/// than the server's threads). Before: the panic unwound the server's event loop thread that
/// judged the message, and the option waited out its timeout.
#[test]
fn draft_3_1_a_server_extension_that_panics_gets_inval_option_and_the_server_serves_on() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = start(ServerConfig::default().extensions(vec![panicking(10, runs.clone())]));
    let client = client_with(&server, ClientConfig::default());
    for i in 0..12u32 {
        assert_eq!(client.send_option(10, b"ping", &[]).unwrap(), OptionReply::NotSupported, "round {i}");
        assert_eq!(client.call(&rpc(100 + i, 0, b"next"), &ULB).unwrap(), rpc(100 + i, 1, b"next"));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 12);
    assert!(client.ended().is_empty(), "one connection throughout");
}

/// The same on the client: its extension's handler that panics on the server's RDMA_OPTIONAL
/// gets it answered RDMA_ERR_INVAL_OPTION, and the client serves on (forward calls and the
/// backward direction). Before: the panic unwound the client's dispatcher.
#[test]
fn draft_3_1_a_client_extension_that_panics_gets_inval_option_and_the_client_serves_on() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = start(ServerConfig::default());
    let client = client_with(&server, ClientConfig::default().extensions(vec![panicking(20, runs.clone())]));
    let back = backchannel(&server);
    for i in 0..4u32 {
        assert_eq!(back.send_option(20, b"from server", &[]).unwrap(), OptionReply::NotSupported, "round {i}");
        assert_eq!(client.call(&rpc(200 + i, 0, b"more"), &ULB).unwrap(), rpc(200 + i, 1, b"more"));
        let xid = 0x9000_0000 + i;
        assert_eq!(back.call(&rpc(xid, 0, b"back")).unwrap(), rpc(xid, 1, b"back"));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 4);
    assert!(client.ended().is_empty());
}
