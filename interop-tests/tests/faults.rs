//! Faults (issue 6, item 4): a `negotiate::client::Client` against responders that lose a
//! probe, lose a reply, drop the connection mid-call or right after RDMA_ERR_VERS, restart
//! with other private data; and a real `negotiate::server::Server` fed hostile headers between
//! valid calls.
//!
//! The accounting is the same in every test: each call ends exactly once, with its own reply
//! or a clear error, within a bounded time; and the service runs each call once, except where
//! a reply was lost after the service ran (a dropped reply, a connection lost after the call
//! was served): RPC-over-RDMA has no duplicate detection of its own, the requester recovers by
//! retransmitting (RFC 8166 section 4.5.4: a responder that cannot send a reply "MUST close
//! the connection to signal to the requester that a reply was lost"), and ONC RPC promises no
//! more than at-least-once execution then (RFC 5531, "Transports and Semantics": suppressing
//! the second execution is a server's duplicate request cache, above this layer). The tests
//! that allow a second execution say so and check it happened exactly where it may.
//!
//! Misbehaving responders are built here from public pieces (a verbs backend,
//! `negotiate::datapath` and `negotiate::responder::Responder`); no fault hook is added to
//! `Server`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use cm_private_data::{Flags, PrivateData};
use common::*;
use negotiate::client::{Client, ClientConfig, ClientError};
use negotiate::memory::NoV2Reason;
use negotiate::requester;
use negotiate::responder;
use negotiate::server::{CallsByVersion, Server, ServerConfig};
use negotiate::thresholds::Advertised;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Backend, QpState, QueuePair};

/// Short timeouts so faults resolve quickly: 200 ms per transmission, four transmissions.
fn client_config() -> ClientConfig {
    ClientConfig::default()
        .requester(requester::RequesterConfig::default().timeout(Duration::from_millis(200)).max_attempts(4))
}

// ------------------------------------------------------------------------------------------
// Requester faults.
// ------------------------------------------------------------------------------------------

/// Draft section 5.2: a Version Two probe that gets no answer makes the requester close the
/// connection after its timeout (RFC 8166 sections 3.3.3 and 4.5.4: never a second call on the
/// connection where the responder may still be running the first), remember the responder, and
/// resend the call in Version One on a new connection. The ignored probe was never executed,
/// so the call runs exactly once.
fn lost_probe<B: Backend + Clone>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |a| {
        if a.conn == 0 && a.nth == 0 && a.vers == 2 {
            Act::Ignore
        } else {
            Act::Serve
        }
    });
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    call_ok(&client, 0x100, BIG);
    call_ok(&client, 0x101, SMALL);
    assert_eq!(client.version(), Some(Version::ONE), "fell back to Version One");
    assert_eq!(client.memory().no_v2(&raw.addr), Some(NoV2Reason::ProbeLost));
    let log = raw.log();
    let seen: Vec<(u32, u32, u32)> = log.arrivals.iter().map(|a| (a.conn, a.xid, a.vers)).collect();
    // The probe, its retransmission in Version One on a new connection, then Version One.
    assert_eq!(seen, [(0, 0x100, 2), (1, 0x100, 1), (1, 0x101, 1)]);
    assert_eq!(log.executed, [(1, 0x100), (1, 0x101)], "each call ran once");
    assert_eq!(log.connections, 2);
}

/// RFC 8166 section 4.5.4 (and 3.3.3): a call whose reply never comes times out; the requester
/// closes the connection (fencing the call's memory), reconnects, and retransmits it; the
/// retransmission is answered. The responder ran the call on the first connection and forgot
/// the reply, so the service legitimately runs it a second time on the second connection: the
/// module documentation says why nothing below RPC suppresses that.
fn lost_reply<B: Backend + Clone>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |a| {
        if a.conn == 0 && a.xid == 0x201 {
            Act::ExecuteWithoutReply
        } else {
            Act::Serve
        }
    });
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    // The first call settles Version Two, so the lost reply is not mistaken for a lost probe.
    call_ok(&client, 0x200, SMALL);
    assert_eq!(client.version(), Some(Version::TWO));
    let started = Instant::now();
    call_ok(&client, 0x201, BIG);
    assert!(started.elapsed() >= Duration::from_millis(200), "answered only after the timeout");
    call_ok(&client, 0x202, SMALL);
    let log = raw.log();
    assert_eq!(log.connections, 2, "the timeout closed the first connection");
    assert_eq!(log.executions(0x200), [0]);
    assert_eq!(log.executions(0x201), [0, 1], "run once per connection: its first reply was lost");
    assert_eq!(log.executions(0x202), [1]);
    // The retransmission was the probe of the new connection: nothing says the responder
    // lacks Version Two.
    assert_eq!(client.memory().no_v2(&raw.addr), None);
    assert_eq!(client.version(), Some(Version::TWO));
}

/// RFC 8166 section 3.3.3 / 4.5.4: the responder fetches a call's Read chunks and closes the
/// connection before running it; the requester retransmits the call on a new connection, where
/// it runs, once.
fn disconnect_mid_call<B: Backend + Clone>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |a| {
        if a.conn == 0 && a.xid == 0x301 {
            Act::DisconnectAfterFetch
        } else {
            Act::Serve
        }
    });
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    call_ok(&client, 0x300, SMALL);
    call_ok(&client, 0x301, BIG);
    call_ok(&client, 0x302, BIG);
    let log = raw.log();
    assert_eq!(log.connections, 2);
    let arrivals: Vec<(u32, u32)> = log.arrivals.iter().filter(|a| a.xid == 0x301).map(|a| (a.conn, a.vers)).collect();
    // Sent on the first connection, then as the probe of the second.
    assert_eq!(arrivals, [(0, 2), (1, 2)]);
    assert_eq!(log.executions(0x301), [1], "never run on the connection that was lost");
    assert_eq!(log.executed.len(), 3, "three calls, three executions");
}

/// The same with eight callers in flight when the connection drops: every call still ends
/// with its own reply. A call the responder had already run and answered on the lost
/// connection may run again: its reply can be lost with the connection (still unreaped on the
/// requester when it saw the connection down), and the retransmission then re-executes it, as
/// the module documentation allows. Such a second execution is allowed only for calls run on
/// the lost connection; every other call runs exactly once.
#[test]
fn rfc8166_3_3_3_a_disconnect_with_calls_in_flight_retransmits_them_all() {
    let raw = RawResponder::start(rpcrdma_verbs::InProcess, (Version::ONE, Version::TWO), ULB, |a| {
        if a.conn == 0 && a.nth == 6 {
            Act::DisconnectAfterFetch
        } else {
            Act::Serve
        }
    });
    let client = Arc::new(Client::new(rpcrdma_verbs::InProcess, &raw.addr, client_config()));
    call_ok(&client, 0x3ff, SMALL); // settles Version Two and opens the credit window
    let callers: Vec<_> = (0..8u32)
        .map(|t| {
            let c = client.clone();
            std::thread::spawn(move || {
                for i in 0..3 {
                    let len = if (t + i) % 2 == 0 { BIG } else { SMALL };
                    call_ok(&c, 0x400 + t * 16 + i, len);
                }
            })
        })
        .collect();
    for c in callers {
        c.join().expect("every call ended with its own reply");
    }
    let log = raw.log();
    assert!(log.connections >= 2, "the connection was lost and made again");
    for t in 0..8u32 {
        for i in 0..3 {
            let xid = 0x400 + t * 16 + i;
            let runs = log.executions(xid);
            match runs.as_slice() {
                [_] => {}
                [0, later] if *later > 0 => {}
                other => panic!("call {xid:#x} ran on connections {other:?}"),
            }
        }
    }
}

/// RFC 8166 section 4.5.4: a connection lost on every attempt ends the call with a clear error
/// after the configured attempts, never silently and never twice; the call never ran. The
/// client then serves the next call.
fn connection_lost_every_time<B: Backend + Clone>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::TWO), ULB, |a| {
        if a.xid == 0x501 {
            Act::DisconnectAfterFetch
        } else {
            Act::Serve
        }
    });
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    call_ok(&client, 0x500, SMALL);
    match call_within(&client, call(0x501, BIG), ULB) {
        Err(ClientError::ConnectionLost { attempts: 4, .. }) => {}
        other => panic!("expected the connection lost after 4 attempts, got {other:?}"),
    }
    call_ok(&client, 0x502, SMALL);
    let log = raw.log();
    assert_eq!(log.arrivals.iter().filter(|a| a.xid == 0x501).count(), 4, "four transmissions");
    assert!(log.executions(0x501).is_empty(), "the failed call never ran");
    assert_eq!(log.executed.len(), 2);
    assert_eq!(log.connections, 5);
}

/// Draft section 5.2: a Version One responder answers the probe with RDMA_ERR_VERS and the
/// connection is lost right after; the requester takes the responder to lack Version Two, so
/// the next connection does not probe (its first message is Version One), "to avoid a
/// possible version negotiation loop".
fn lost_after_err_vers<B: Backend + Clone>(backend: B) {
    let raw = RawResponder::start(backend.clone(), (Version::ONE, Version::ONE), ULB, |a| {
        if a.conn == 0 && a.nth == 0 {
            Act::AnswerThenDisconnect
        } else {
            Act::Serve
        }
    });
    let client = Arc::new(Client::new(backend, &raw.addr, client_config()));
    call_ok(&client, 0x600, SMALL);
    call_ok(&client, 0x601, BIG);
    assert_eq!(client.version(), Some(Version::ONE));
    assert_eq!(client.memory().no_v2(&raw.addr), Some(NoV2Reason::LostAfterErrVers));
    let log = raw.log();
    assert_eq!(log.connections, 2);
    let first_on = |conn: u32| log.arrivals.iter().find(|a| a.conn == conn).map(|a| (a.xid, a.vers));
    assert_eq!(first_on(0), Some((0x600, 2)), "the probe");
    assert_eq!(first_on(1), Some((0x600, 1)), "no second probe: Version One at once");
    assert!(log.arrivals.iter().filter(|a| a.conn == 1).all(|a| a.vers == 1));
    assert_eq!(log.executed, [(1, 0x600), (1, 0x601)], "each call ran once");
}

/// RFC 8797 section 4.2 (and draft section 5.2: thresholds may change with a new connection):
/// the responder restarts on the same address with other private data, then again as a
/// Version One responder with none; after each reconnect the client uses the new thresholds,
/// seen both in `thresholds()` and in the form a 3000-byte call takes.
fn restart<B: Backend + Clone>(backend: B) {
    let executed = Arc::new(Mutex::new(Vec::new()));
    let start_server = |addr: &str, generation: u32, versions: (Version, Version), pdata: Option<PrivateData>| {
        let e = executed.clone();
        let cfg = ServerConfig::default()
            .responder(responder::ResponderConfig::default().versions(versions))
            .private_data(pdata);
        let service = move |c: &[u8]| {
            e.lock().unwrap().push((generation, word(c, 0)));
            echo(c)
        };
        Server::start(backend.clone(), addr, cfg, Arc::new(PLAIN), service).expect("server starts")
    };
    let ccfg = client_config();
    let ours = ccfg.private_data;
    let first = Some(PrivateData::new(Flags::empty(), 4096, 4096));
    let server = start_server(&backend.any_address(), 0, (Version::ONE, Version::TWO), first);
    let addr = server.local_addr();
    let client = Arc::new(Client::new(backend.clone(), &addr, ccfg));
    let medium = 3000 - 16;
    let plain_ok = |xid: u32, len: usize| {
        let m = call(xid, len);
        let reply = call_within(&client, m.clone(), PLAIN).unwrap_or_else(|e| panic!("call {xid:#x}: {e}"));
        assert!(reply == echo(&m), "call {xid:#x}: not its own reply");
    };
    // Generation 0: 4096 both ways; the 3000-byte call is Short.
    plain_ok(0x700, SMALL); // the probe (1024-byte limit)
    let before = client.stats();
    plain_ok(0x701, medium);
    assert_eq!(client.stats().short - before.short, 1, "3000 bytes fit 4096");
    let t0 = Advertised { requester: ours, responder: first }.for_version(Version::TWO);
    assert_eq!((client.version(), client.thresholds()), (Some(Version::TWO), Some(t0)));
    assert_eq!(server.stats().connections, 1);

    // Generation 1: the responder receives only 2048 bytes; the 3000-byte call goes Long.
    drop(server);
    let second = Some(PrivateData::new(Flags::REMOTE_INVALIDATE, 8192, 2048));
    let server = start_server(&addr, 1, (Version::ONE, Version::TWO), second);
    plain_ok(0x710, SMALL);
    let before = client.stats();
    plain_ok(0x711, medium);
    assert_eq!(client.stats().long - before.long, 1, "3000 bytes exceed 2048");
    let t1 = Advertised { requester: ours, responder: second }.for_version(Version::TWO);
    assert_ne!(t0, t1);
    assert_eq!((client.version(), client.thresholds()), (Some(Version::TWO), Some(t1)));
    assert_eq!(server.stats().connections, 1);

    // Generation 2: Version One only, no private data: RDMA_ERR_VERS, fallback, 1024 bytes.
    drop(server);
    let server = start_server(&addr, 2, (Version::ONE, Version::ONE), None);
    plain_ok(0x720, SMALL);
    plain_ok(0x721, medium);
    let t2 = Advertised { requester: ours, responder: None }.for_version(Version::ONE);
    assert_eq!((client.version(), client.thresholds()), (Some(Version::ONE), Some(t2)));
    let s = stats_once(&server, "two calls", |s| s.calls.v1 == 2);
    assert_eq!(
        (s.connections, s.calls, s.errors_sent),
        (1, CallsByVersion { v1: 2, v2: 0 }, 1),
        "one ERR_VERS, two calls in Version One"
    );
    drop(server);

    let mut runs = executed.lock().unwrap().clone();
    runs.sort();
    let want = [(0, 0x700), (0, 0x701), (1, 0x710), (1, 0x711), (2, 0x720), (2, 0x721)];
    assert_eq!(runs, want, "each call ran once, on the server that was up");
}

// ------------------------------------------------------------------------------------------
// Hostile headers against a real Server.
// ------------------------------------------------------------------------------------------

/// RFC 8166 section 4.5 and draft section 4.2 / 3.1, as `rpcrdma_v1::verdict` and
/// `rpcrdma_v2::verdict` tabulate them: hostile headers interleaved with valid calls on one
/// connection to a `Server` are each answered with the RDMA_ERROR the rules prescribe (same
/// XID, the request's version, the server's credit value 32) or dropped without an answer
/// (fewer than 8 bytes; an RDMA_ERROR, never answered with another); none reaches the service;
/// the connection keeps serving the valid calls in both versions; `errors_sent` counts exactly
/// the answers.
fn hostile_headers<B: Backend + Clone>(backend: B) {
    let executed = Arc::new(Mutex::new(Vec::new()));
    let e = executed.clone();
    let service = move |c: &[u8]| {
        e.lock().unwrap().push(word(c, 0));
        echo(c)
    };
    let server = Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(ULB), service)
        .expect("server starts");
    let raw = RawRequester::connect(&backend, &server.local_addr());
    // The procedures, as the specifications' XDR numbers them.
    use rpcrdma_v1::xdr::{RDMA_DONE, RDMA_ERROR, RDMA_MSG, RDMA_MSGP, RDMA_NOMSG};
    let [msg, nomsg, msgp, done, error] = [RDMA_MSG, RDMA_NOMSG, RDMA_MSGP, RDMA_DONE, RDMA_ERROR].map(|p| p as u32);
    let optional = rpcrdma_v2::xdr::RDMA_OPTIONAL as u32;
    // (what, bytes, the RDMA_ERROR expected back as words, or None: dropped)
    let x = |n: u32| 0x0bad_0000 + n;
    let err_vers = |xid: u32, vers: u32| Some(vec![xid, vers, 32, error, 1, 1, 2]);
    let err_chunk = |xid: u32, vers: u32| Some(vec![xid, vers, 32, error, 2]);
    #[allow(clippy::type_complexity)]
    let hostile: Vec<(&str, Vec<u8>, Option<Vec<u32>>)> = vec![
        ("3 bytes: no XID and version to answer", vec![1, 2, 3], None),
        ("7 zero bytes", vec![0; 7], None),
        (
            "garbage words",
            words(&[x(1), 0xdead_beef, 0x1234_5678, 0xffff_ffff, 0x0bad_f00d]),
            err_vers(x(1), 0xdead_beef),
        ),
        ("version 3 RDMA_MSG", words(&[x(2), 3, 32, msg, 0, 0, 0, x(2), 0]), err_vers(x(2), 3)),
        ("version 0 RDMA_MSG", words(&[x(3), 0, 32, msg, 0, 0, 0, x(3), 0]), err_vers(x(3), 0)),
        ("v1 header cut inside its Read list", words(&[x(4), 1, 32, msg, 1, 0]), err_chunk(x(4), 1)),
        ("v2 header cut inside its Read list", words(&[x(5), 2, 32, msg, 1, 0]), err_chunk(x(5), 2)),
        ("v1 header of 12 bytes, no procedure", words(&[x(6), 1, 32]), err_chunk(x(6), 1)),
        ("v1 RDMA_MSGP", words(&[x(7), 1, 32, msgp, 0, 0, 0, 0, 0]), err_chunk(x(7), 1)),
        ("v1 RDMA_DONE", words(&[x(8), 1, 32, done]), err_chunk(x(8), 1)),
        ("v2 RDMA_MSGP", words(&[x(9), 2, 32, msgp, 0, 0, 0, 0, 0]), err_chunk(x(9), 2)),
        ("v2 RDMA_DONE", words(&[x(10), 2, 32, done]), err_chunk(x(10), 2)),
        ("v1 unknown procedure 9", words(&[x(11), 1, 32, 9, 0, 0, 0]), err_chunk(x(11), 1)),
        ("v1 RDMA_NOMSG without chunks", words(&[x(12), 1, 32, nomsg, 0, 0, 0]), err_chunk(x(12), 1)),
        (
            "v1 RDMA_MSG whose RPC XID differs",
            words(&[x(13), 1, 32, msg, 0, 0, 0, x(99), 0, 0, 0]),
            err_chunk(x(13), 1),
        ),
        (
            "v2 RDMA_OPTIONAL of an unknown type",
            words(&[x(14), 2, 32, optional, 7, 0]),
            Some(vec![x(14), 2, 32, error, 3]),
        ),
        ("undecodable RDMA_ERROR", words(&[x(15), 1, 32, error, 99]), None),
        ("the requester's own ERR_CHUNK about no call", words(&[x(16), 1, 32, error, 2]), None),
        ("a reply to no backward call", words(&[x(17), 1, 32, msg, 0, 0, 0, x(17), 1, 0, 0]), None),
    ];
    let mut valid = Vec::new();
    let mut answered = 0;
    raw.valid_call(0x100, Version::ONE);
    valid.push(0x100);
    for (i, (what, bytes, expected)) in hostile.iter().enumerate() {
        raw.send_raw(bytes);
        if let Some(want) = expected {
            let got = raw.receive();
            assert_eq!(got, words(want), "{what}: the answer");
            answered += 1;
        }
        // The connection still serves, and a dropped message left no answer behind: the next
        // message is this call's reply.
        let xid = 0x101 + i as u32;
        raw.valid_call(xid, Version::from_wire(1 + (i as u32 % 2)));
        valid.push(xid);
    }
    assert_eq!(raw.conn.qp().state(), QpState::Ready, "the connection survived");
    let want_calls = valid.len() as u64;
    let s = stats_once(&server, "every call and error", |s| s.errors_sent >= answered && s.calls.total() >= want_calls);
    assert_eq!(s.errors_sent, answered, "one RDMA_ERROR per answered hostile header");
    assert_eq!(s.calls.total(), want_calls, "every valid call served");
    assert_eq!((s.connections, s.credit_overruns), (1, 0));
    assert_eq!(*executed.lock().unwrap(), valid, "only the valid calls reached the service, once each, in order");
}

/// Each scenario above as a test on the in-process backend (`in_process::NAME`) and on the TCP
/// backend (`over_tcp::NAME`), named for the rule it checks.
macro_rules! on_both_backends {
    ($($test:ident => $scenario:ident),* $(,)?) => {
        mod in_process {
            $(
                #[test]
                fn $test() {
                    super::$scenario(rpcrdma_verbs::InProcess);
                }
            )*
        }
        mod over_tcp {
            $(
                #[test]
                fn $test() {
                    super::$scenario(rpcrdma_verbs::Tcp);
                }
            )*
        }
    };
}

on_both_backends! {
    draft_5_2_a_lost_probe_falls_back_to_version_1_after_the_timeout => lost_probe,
    rfc8166_4_5_4_a_lost_reply_times_out_reconnects_and_retransmits => lost_reply,
    rfc8166_4_5_4_a_disconnect_mid_call_retransmits_on_a_new_connection => disconnect_mid_call,
    rfc8166_4_5_4_a_connection_lost_on_every_attempt_fails_the_call_once => connection_lost_every_time,
    draft_5_2_a_connection_lost_after_err_vers_means_no_probe_on_the_next => lost_after_err_vers,
    rfc8797_4_2_a_restarted_responder_s_new_private_data_sets_new_thresholds => restart,
    rfc8166_4_5_hostile_headers_are_answered_or_dropped_and_the_connection_keeps_serving => hostile_headers,
}
