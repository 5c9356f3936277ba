//! The requester's and responder's state machines against each other, bytes only (no verbs):
//! version probe and fallback (v2 draft section 5), thresholds from private data (RFC 8797
//! section 4.2), credits (RFC 8166 section 3.3), timeouts and reconnects. Each test names the
//! rule it checks.

use std::time::{Duration, Instant};

use cm_private_data::{Flags, PrivateData};
use negotiate::memory::{NoV2Reason, PeerMemory};
use negotiate::reply::{DropReason, Incoming};
use negotiate::requester::{self, Action, CallFailure, Requester, Transmit};
use negotiate::responder::{self, Asked, Behind, Responder};
use negotiate::thresholds::Advertised;
use rpcrdma_v1::Version;

const ADDR: &str = "inproc:server";

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// An RDMA_MSG with no chunks carrying a small RPC message of `msg_type` (0 call, 1 reply).
fn msg(xid: u32, vers: u32, credit: u32, msg_type: u32) -> Vec<u8> {
    words(&[xid, vers, credit, 0, 0, 0, 0, xid, msg_type, 0, 0])
}

/// The versions `(low, high)` as `rdma_vers` words.
fn range((low, high): (u32, u32)) -> (Version, Version) {
    (Version::from_wire(low), Version::from_wire(high))
}

fn requester(versions: (u32, u32)) -> Requester {
    let versions = range(versions);
    let cfg = requester::RequesterConfig::default().versions(versions).timeout(Duration::from_secs(1));
    Requester::new(cfg, ADDR)
}

fn responder(versions: (u32, u32)) -> Responder {
    let versions = range(versions);
    let mut r = Responder::new(responder::ResponderConfig::default().versions(versions));
    r.handle_connected(&[], None);
    r
}

/// All events the requester has queued.
fn drain(r: &mut Requester) -> Vec<Action> {
    std::iter::from_fn(|| r.poll_action()).collect()
}

fn transmits(events: &[Action]) -> Vec<Transmit> {
    events.iter().filter_map(|e| if let Action::Transmit(t) = e { Some(*t) } else { None }).collect()
}

/// Serves one transmitted call on `resp`: the bytes the responder sends back.
fn serve(resp: &mut Responder, t: &Transmit) -> Vec<u8> {
    let call = msg(t.xid, t.version.wire(), t.credits, 0);
    match resp.handle_receive(&call) {
        Asked::Call(h) => {
            let p = resp.reply_params(h.xid()).unwrap();
            msg(h.xid(), p.version.wire(), p.credits, 1)
        }
        Asked::SendError(e) => e.as_bytes().to_vec(),
        other => panic!("unexpected {other:?}"),
    }
}

/// Connects `req`, starts call `xid`, returns the first transmission.
fn start(req: &mut Requester, ours: Option<PrivateData>, accepted: &[u8], xid: u32, now: Instant) -> Transmit {
    assert_eq!(drain(req), vec![Action::Connect]);
    req.handle_connected(ours, accepted, now);
    req.call(xid, now).unwrap();
    let ev = drain(req);
    transmits(&ev)[0]
}

#[test]
fn draft_5_first_message_is_version_2_alone_and_within_1024_bytes() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    let big = PrivateData::new(Flags::empty(), 8192, 8192);
    let mut accepted = [0u8; 196];
    accepted[..8].copy_from_slice(&big.encode());
    let t = start(&mut req, Some(big), &accepted, 1, now);
    assert_eq!((t.version.wire(), t.probe, t.thresholds.call), (2, true, 1024));
    // One message at a time until a non-error reply (draft 5, RFC 8166 3.3.3).
    req.call(2, now).unwrap();
    req.call(3, now).unwrap();
    assert!(transmits(&drain(&mut req)).is_empty());
}

#[test]
fn draft_5_1_a_v2_reply_settles_version_2_with_its_4096_defaults() {
    let now = Instant::now();
    let (mut req, mut resp) = (requester((1, 2)), responder((1, 2)));
    let t = start(&mut req, None, &[], 1, now);
    req.call(2, now).unwrap();
    let reply = serve(&mut resp, &t);
    assert!(matches!(req.handle_receive(&reply, now), Incoming::Reply { xid: 1, .. }));
    let ev = drain(&mut req);
    assert!(ev.contains(&Action::Settled {
        version: Version::TWO,
        thresholds: rpcrdma_v1::marshal_call::InlineThresholds { call: 4096, reply: 4096 }
    }));
    let next = transmits(&ev);
    assert_eq!((next[0].xid, next[0].version.wire(), next[0].probe, next[0].thresholds.call), (2, 2, false, 4096));
    assert_eq!(req.version(), Some(Version::TWO));
    assert_eq!(req.window(), 32);
}

#[test]
fn draft_5_2_err_vers_falls_back_on_the_same_connection_and_resends_the_call() {
    let now = Instant::now();
    let (mut req, mut resp) = (requester((1, 2)), responder((1, 1)));
    let t = start(&mut req, None, &[], 7, now);
    let err = serve(&mut resp, &t);
    assert_eq!(req.handle_receive(&err, now), Incoming::Consumed);
    let ev = drain(&mut req);
    // No disconnect, no reconnect: the thresholds switch to Version One's and the call goes
    // out again, same XID, in Version One, still its first attempt (the refused probe was
    // not run).
    assert!(!ev.iter().any(|e| matches!(e, Action::Connect | Action::Disconnect)), "{ev:?}");
    let again = transmits(&ev);
    assert_eq!((again[0].xid, again[0].version.wire(), again[0].thresholds.call, again[0].attempt), (7, 1, 1024, 1));
    let reply = serve(&mut resp, &again[0]);
    assert!(matches!(req.handle_receive(&reply, now), Incoming::Reply { xid: 7, .. }));
    assert_eq!(req.version(), Some(Version::ONE));
    assert_eq!(req.memory().no_v2(ADDR), Some(NoV2Reason::ErrVers { high: 1 }));
}

#[test]
fn draft_5_2_err_vers_is_accepted_whatever_its_version_word_says() {
    // Linux echoes the request's version (2); libevpl sends 1 (docs/design.md).
    for vers_word in [2, 1] {
        let now = Instant::now();
        let mut req = requester((1, 2));
        let t = start(&mut req, None, &[], 9, now);
        let err = words(&[t.xid, vers_word, 1, 4, 1, 1, 1]);
        assert_eq!(req.handle_receive(&err, now), Incoming::Consumed);
        let again = transmits(&drain(&mut req));
        assert_eq!((again[0].xid, again[0].version.wire()), (9, 1), "vers word {vers_word}");
    }
}

#[test]
fn draft_5_2_thresholds_follow_private_data_after_fallback() {
    let now = Instant::now();
    let ours = PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096);
    let theirs = PrivateData::new(Flags::empty(), 4096, 4096);
    let mut accepted = vec![0u8; 196];
    accepted[20..28].copy_from_slice(&theirs.encode()); // at an odd offset, as another layer might put it
    let mut req = requester((1, 2));
    let t = start(&mut req, Some(ours), &accepted, 3, now);
    assert_eq!(t.thresholds.call, 1024); // the probe is capped whatever the private data says
    req.handle_receive(&words(&[3, 2, 1, 4, 1, 1, 1]), now);
    let again = transmits(&drain(&mut req));
    assert_eq!((again[0].thresholds.call, again[0].thresholds.reply), (4096, 4096));
}

/// Draft 5.2, with RFC 8166 3.3.3 / 4.5.4: the lost probe's call goes out again in Version One
/// on the next connection, never on the one where the responder may still be running it.
#[test]
fn draft_5_2_a_lost_probe_falls_back_and_the_responder_is_remembered() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    let t = start(&mut req, None, &[], 4, now);
    assert!(t.probe);
    let later = now + Duration::from_secs(2);
    assert!(req.poll_timeout().unwrap() <= later);
    req.handle_timeout(later);
    assert_eq!(drain(&mut req), vec![Action::Disconnect]);
    req.handle_disconnected(later);
    assert_eq!(drain(&mut req), vec![Action::Connect]);
    req.handle_connected(None, &[], later);
    let again = transmits(&drain(&mut req));
    assert_eq!((again[0].xid, again[0].version.wire(), again[0].probe), (4, 1, false));
    assert_eq!(req.memory().no_v2(ADDR), Some(NoV2Reason::ProbeLost));
}

#[test]
fn draft_5_2_connection_lost_after_err_vers_means_no_second_probe() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    let t = start(&mut req, None, &[], 5, now);
    req.handle_receive(&words(&[t.xid, 2, 1, 4, 1, 1, 1]), now);
    drain(&mut req);
    // Lost before the fallback call's reply: remembered, and the next connection starts in v1.
    req.handle_disconnected(now);
    assert_eq!(drain(&mut req), vec![Action::Connect]);
    assert_eq!(req.memory().no_v2(ADDR), Some(NoV2Reason::LostAfterErrVers));
    req.handle_connected(None, &[], now);
    let ev = drain(&mut req);
    let again = transmits(&ev);
    assert_eq!((again[0].xid, again[0].version.wire(), again[0].probe), (5, 1, false));
    // A requester made later from the same memory does not probe either.
    let mut next = Requester::with_memory(requester::RequesterConfig::default(), ADDR, req.memory().clone());
    let t = start(&mut next, None, &[], 6, now);
    assert_eq!((t.version.wire(), t.probe), (1, false));
}

#[test]
fn draft_5_3_a_v1_requester_talks_v1_to_a_v2_responder() {
    let now = Instant::now();
    let (mut req, mut resp) = (requester((1, 1)), responder((1, 2)));
    let t = start(&mut req, None, &[], 8, now);
    assert_eq!((t.version.wire(), t.probe, t.thresholds.call), (1, false, 1024));
    let reply = serve(&mut resp, &t);
    assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), 1, "the reply carries the call's version");
    assert!(matches!(req.handle_receive(&reply, now), Incoming::Reply { xid: 8, .. }));
}

#[test]
fn draft_5_3_a_reply_in_another_version_than_its_call_is_dropped() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    let t = start(&mut req, None, &[], 10, now);
    let wrong = msg(t.xid, 1, 8, 1);
    assert_eq!(
        req.handle_receive(&wrong, now),
        Incoming::Dropped(DropReason::WrongVersion { got: Version::ONE, sent: Version::TWO })
    );
    assert_eq!(req.pending(), 1);
}

#[test]
fn rfc8166_4_5_a_reply_to_no_call_in_flight_is_dropped() {
    let now = Instant::now();
    let mut req = requester((1, 1));
    start(&mut req, None, &[], 11, now);
    assert_eq!(req.handle_receive(&msg(99, 1, 8, 1), now), Incoming::Dropped(DropReason::UnknownXid(99)));
    assert_eq!(req.handle_receive(&[1, 2, 3], now), Incoming::Dropped(DropReason::Undecodable));
}

#[test]
fn rfc8166_4_5_an_rdma_error_completes_its_call() {
    let now = Instant::now();
    let mut req = requester((1, 1));
    let t = start(&mut req, None, &[], 12, now);
    assert_eq!(req.handle_receive(&words(&[t.xid, 1, 1, 4, 2]), now), Incoming::Consumed);
    let ev = drain(&mut req);
    assert!(matches!(ev[..], [Action::Failed { xid: 12, error: CallFailure::Peer(_) }]), "{ev:?}");
    assert_eq!(req.pending(), 0);
}

#[test]
fn rfc8166_3_3_1_a_grant_of_zero_is_taken_as_one_and_counted() {
    let now = Instant::now();
    let mut req = requester((1, 1));
    let t = start(&mut req, None, &[], 13, now);
    assert!(matches!(req.handle_receive(&msg(t.xid, 1, 0, 1), now), Incoming::Reply { .. }));
    assert_eq!((req.window(), req.peer_faults()), (1, 1));
}

#[test]
fn rfc8166_3_3_3_a_timeout_reconnects_retransmits_and_restarts_at_one_credit() {
    let now = Instant::now();
    let (mut req, mut resp) = (requester((1, 1)), responder((1, 1)));
    let t = start(&mut req, None, &[], 20, now);
    let r = serve(&mut resp, &t);
    req.handle_receive(&r, now);
    for xid in 21..24 {
        req.call(xid, now).unwrap();
    }
    assert_eq!(transmits(&drain(&mut req)).len(), 3);
    let later = now + Duration::from_secs(2);
    req.handle_timeout(later);
    assert_eq!(drain(&mut req), vec![Action::Disconnect]);
    req.handle_disconnected(later);
    assert_eq!(drain(&mut req), vec![Action::Connect]);
    req.handle_connected(None, &[], later);
    let again = transmits(&drain(&mut req));
    // One credit on the new connection: only the oldest call goes out, as its second attempt.
    assert_eq!(again.iter().map(|t| (t.xid, t.attempt)).collect::<Vec<_>>(), vec![(21, 2)]);
    assert_eq!(req.window(), 1);
}

#[test]
fn every_call_ends_once_after_its_last_attempt() {
    let now = Instant::now();
    let mut req = requester((1, 1));
    start(&mut req, None, &[], 30, now);
    let mut t = now;
    let mut failures = Vec::new();
    for _ in 0..5 {
        t += Duration::from_secs(2);
        req.handle_timeout(t);
        req.handle_disconnected(t);
        for e in drain(&mut req) {
            if let Action::Failed { xid, error } = e {
                failures.push((xid, error));
            }
        }
        req.handle_connected(None, &[], t);
        drain(&mut req);
    }
    // Each attempt timed out (and closed its connection): the failure says so.
    assert_eq!(failures, vec![(30, CallFailure::TimedOut { attempts: 3 })]);
    assert_eq!(req.pending(), 0);
}

#[test]
fn rfc8797_4_2_thresholds_for_each_private_data_case() {
    let linux = PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096);
    let small = PrivateData::new(Flags::REMOTE_INVALIDATE, 2048, 1024);
    let t = |rq, rs, v| {
        let a = Advertised { requester: rq, responder: rs };
        let t = a.for_version(Version::from_wire(v));
        (t.call, t.reply, a.remote_invalidation())
    };
    // Both sides: min(sender's Send, receiver's Receive) each way; R only when both set it.
    assert_eq!(t(Some(linux), Some(small), 1), (1024, 2048, true));
    // None: the version's defaults (RFC 8166 3.3.3; v2 draft 2.3).
    assert_eq!(t(None, None, 1), (1024, 1024, false));
    assert_eq!(t(None, None, 2), (4096, 4096, false));
    // One side only: the other side is the version's default (RFC 8797 5.1).
    assert_eq!(t(Some(linux), None, 1), (1024, 1024, false));
    assert_eq!(t(None, Some(linux), 2), (4096, 4096, false));
    // Garbage is no private data (found nowhere).
    assert_eq!(PrivateData::find(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8]), None);
}

#[test]
fn rfc8166_4_5_1_a_responder_answers_an_unsupported_version_with_its_range() {
    let mut resp = responder((1, 2));
    let Asked::SendError(e) = resp.handle_receive(&msg(40, 3, 1, 0)) else { panic!() };
    assert_eq!(e.as_bytes(), words(&[40, 3, 32, 4, 1, 1, 2]));
}

#[test]
fn draft_5_3_the_responder_replies_in_each_call_s_version() {
    let mut resp = responder((1, 2));
    for (xid, vers) in [(50, 1), (51, 2), (52, 1)] {
        let call = msg(xid, vers, 4, 0);
        let Asked::Call(h) = resp.handle_receive(&call) else { panic!() };
        assert_eq!(h.version().wire(), vers);
    }
    assert_eq!(resp.reply_params(51).unwrap().version, Version::TWO);
    assert_eq!(resp.reply_params(50).unwrap().reply_inline_threshold, 1024);
    assert_eq!(resp.reply_params(52).unwrap().version, Version::ONE);
    assert_eq!(resp.reply_params(52), None);
}

#[test]
fn rfc8166_3_3_1_the_responder_counts_calls_beyond_its_grant() {
    let mut resp = responder((1, 1));
    assert!(matches!(resp.handle_receive(&msg(60, 1, 4, 0)), Asked::Call(_)));
    // Nothing granted yet: a second call in flight is one too many (3.3.3).
    assert!(matches!(resp.handle_receive(&msg(61, 1, 4, 0)), Asked::Call(_)));
    assert_eq!(resp.overruns(), 1);
    let p = resp.reply_params(60).unwrap();
    assert_eq!(p.credits, 4);
}

#[test]
fn rfc8166_3_3_1_calls_being_served_count_against_the_grant() {
    // A Requester "MUST NOT send unacknowledged requests in excess of the Responder's granted
    // credit limit": the calls whose reply parameters were taken and that are still being
    // served are unacknowledged, whether or not messages wait behind. The Receive kept for
    // a reply to this side's backward call (`backchannel::SLOTS`) is taken off the messages
    // waiting only (before, it came off the calls being served too, and a fifth call in
    // flight on 4 credits went uncounted while nothing waited).
    let mut resp = responder((1, 1));
    assert!(matches!(resp.handle_receive(&msg(60, 1, 4, 0)), Asked::Call(_)));
    assert_eq!(resp.reply_params(60).unwrap().credits, 4); // 4 granted from here on
    let behind = |unjudged, serving| Behind { unjudged, serving };
    let mut xid = 61;
    let mut call = |resp: &mut Responder, b: Behind| {
        xid += 1;
        assert!(matches!(resp.handle_receive_behind(&msg(xid, 1, 4, 0), b), Asked::Call(_)));
        resp.reply_params(xid).unwrap();
        resp.overruns()
    };
    // 3 being served and this one: the window, full.
    assert_eq!(call(&mut resp, behind(0, 3)), 0);
    // 4 being served and this one: one beyond.
    assert_eq!(call(&mut resp, behind(0, 4)), 1);
    // 3 being served, this one, and one waiting (which may be the backward reply): within.
    assert_eq!(call(&mut resp, behind(1, 3)), 1);
    // ... and two waiting: one of them is a call beyond.
    assert_eq!(call(&mut resp, behind(2, 3)), 2);
    // Messages waiting alone, as a responder serving one call at a time sees them.
    assert_eq!(call(&mut resp, behind(4, 0)), 2);
    assert_eq!(call(&mut resp, behind(5, 0)), 3);
}

#[test]
fn draft_3_1_an_unknown_optional_type_gets_inval_option() {
    let mut resp = responder((1, 2));
    // RDMA_OPTIONAL (proc 5), opttype 77, empty optinfo.
    let Asked::SendError(e) = resp.handle_receive(&words(&[70, 2, 1, 5, 77, 0])) else { panic!() };
    assert_eq!(e.as_bytes(), words(&[70, 2, 32, 4, 3]));
}

#[test]
fn draft_3_1_a_registered_optional_type_reaches_its_handler() {
    use rpcrdma_v2::options::{OptionOutcome, Registry};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut reg = Registry::new();
    let s = seen.clone();
    reg.register(77, move |m: &rpcrdma_v2::options::OptionalMessage<'_>| {
        s.lock().unwrap().push(m.optinfo.to_vec());
        OptionOutcome::Done
    })
    .unwrap();
    let mut resp = Responder::with_registry(responder::ResponderConfig::default(), reg);
    resp.handle_connected(&[], None);
    let optional = words(&[71, 2, 1, 5, 77, 4, 0xabcdef01]);
    let r = resp.handle_receive(&optional);
    assert_eq!(r, Asked::Handled { xid: 71, opttype: 77, answer: None });
    assert_eq!(seen.lock().unwrap()[0], vec![0xab, 0xcd, 0xef, 0x01]);
}

#[test]
fn rfc8167_backward_direction_is_told_apart_in_both_versions() {
    let now = Instant::now();
    for vers in [1, 2] {
        let mut req = requester((1, vers));
        start(&mut req, None, &[], 80, now);
        // The responder's own call (msg_type CALL) on the client: a backward-direction call.
        assert!(matches!(req.handle_receive(&msg(0x8000_0001, vers, 1, 0), now), Incoming::BackwardCall(_)));
        // And on the server, the client's reply to it.
        let mut resp = responder((1, 2));
        assert!(matches!(resp.handle_receive(&msg(0x8000_0001, vers, 1, 1)), Asked::BackwardReply(_)));
    }
}

#[test]
fn remembered_memory_is_per_address() {
    let now = Instant::now();
    let mut m = PeerMemory::default();
    m.remember_no_v2("a:1", NoV2Reason::ProbeLost, now + std::time::Duration::from_secs(600));
    let mut req = Requester::with_memory(requester::RequesterConfig::default(), "b:1", m.clone());
    let t = start(&mut req, None, &[], 1, now);
    assert!(t.probe);
    let mut req = Requester::with_memory(requester::RequesterConfig::default(), "a:1", m);
    let t = start(&mut req, None, &[], 1, now);
    assert!(!t.probe, "the remembered address is not probed");
}
