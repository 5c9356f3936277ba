//! The requester's state machine against responders that answer late, wrongly or not at all,
//! bytes and virtual clock readings only (no verbs, no threads, no sleeps): a timed-out call,
//! the Version Two probe included, goes out again only on a new connection (RFC 8166 sections
//! 3.3.3 and 4.5.4, draft section 5.2); a late reply that arrives before the disconnect still
//! completes its call; any answer to the probe ends just that call, and later calls proceed;
//! every call ends within its attempts' deadlines. Each test names the rule it checks.

use std::time::{Duration, Instant};

use negotiate::memory::NoV2Reason;
use negotiate::reply::{DropReason, Incoming, PeerError};
use negotiate::requester::{self, Action, CallFailure, Requester, Transmit};
use rpcrdma_v1::Version;

const ADDR: &str = "inproc:faults";
const TIMEOUT: Duration = Duration::from_secs(1);

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// A chunkless RDMA_MSG reply in `vers` granting `credit`, carrying a small RPC reply.
fn reply(xid: u32, vers: u32, credit: u32) -> Vec<u8> {
    words(&[xid, vers, credit, 0, 0, 0, 0, xid, 1, 0, 0])
}

fn requester(versions: (u32, u32)) -> Requester {
    let versions = (Version::from_wire(versions.0), Version::from_wire(versions.1));
    let cfg = requester::RequesterConfig::default().versions(versions).timeout(TIMEOUT);
    Requester::new(cfg, ADDR)
}

fn drain(r: &mut Requester) -> Vec<Action> {
    std::iter::from_fn(|| r.poll_action()).collect()
}

fn transmits(events: &[Action]) -> Vec<Transmit> {
    events.iter().filter_map(|e| if let Action::Transmit(t) = e { Some(*t) } else { None }).collect()
}

/// Connects `req` and starts call `xid`: its first transmission.
fn start(req: &mut Requester, xid: u32, now: Instant) -> Transmit {
    assert_eq!(drain(req), vec![Action::Connect]);
    req.handle_connected(None, &[], now);
    req.call(xid, now).unwrap();
    transmits(&drain(req))[0]
}

// ---- finding 1: a timed-out probe ----

/// RFC 8166 section 3.3.3 (one credit until the first reply) and 4.5.4 (a call without a
/// reply is retransmitted after the connection is closed, which fences its memory): a probe
/// that times out is not sent again on the same connection, where the responder may still be
/// running it (it would see a second call beyond its grant and run it twice). The requester
/// asks for a disconnect, sends nothing more on that connection, and retransmits on the next
/// one, in Version One: draft section 5.2 lets it take a lost probe to mean no Version Two.
#[test]
fn rfc8166_3_3_3_a_timed_out_probe_is_retransmitted_only_after_reconnect() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    let t = start(&mut req, 1, now);
    assert!(t.probe);
    req.call(2, now).unwrap();
    let later = now + 2 * TIMEOUT;
    req.handle_timeout(later);
    assert_eq!(drain(&mut req), vec![Action::Disconnect], "disconnect first, nothing sent on this connection");
    req.call(3, later).unwrap();
    req.handle_timeout(later + TIMEOUT);
    assert_eq!(drain(&mut req), vec![], "one disconnect, and still nothing sent on a connection being closed");
    req.handle_disconnected(later);
    assert_eq!(drain(&mut req), vec![Action::Connect]);
    assert_eq!(req.memory().no_v2(ADDR), Some(NoV2Reason::ProbeLost));
    req.handle_connected(None, &[], later);
    let again = transmits(&drain(&mut req));
    // One credit on the new connection: the probe's call alone, in Version One, attempt 2.
    let got: Vec<_> = again.iter().map(|t| (t.xid, t.version.wire(), t.probe, t.attempt)).collect();
    assert_eq!(got, vec![(1, 1, false, 2)]);
}

/// Draft section 5.2 and RFC 8166 section 4.5: a Version Two reply to the probe that arrives
/// after its timeout but before the connection is down is that call's reply: it completes the
/// call once (it is not dropped as a reply in the wrong version), settles Version Two, and the
/// responder is not remembered as lacking Version Two; the call is not retransmitted, and the
/// next connection probes again.
#[test]
fn draft_5_2_a_late_v2_reply_before_the_disconnect_completes_the_call_once_and_keeps_version_2() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    start(&mut req, 1, now);
    let later = now + 2 * TIMEOUT;
    req.handle_timeout(later);
    assert_eq!(drain(&mut req), vec![Action::Disconnect]);
    assert!(matches!(req.handle_receive(&reply(1, 2, 32), later), Incoming::Reply { xid: 1, .. }));
    assert_eq!(req.pending(), 0);
    assert_eq!(req.version(), Some(Version::TWO));
    let ev = drain(&mut req);
    assert!(transmits(&ev).is_empty(), "{ev:?}");
    req.handle_disconnected(later);
    assert_eq!(drain(&mut req), vec![], "no call waits: no reconnect");
    assert_eq!(req.memory().no_v2(ADDR), None, "answered in Version Two: not demoted");
    req.call(2, later).unwrap();
    assert_eq!(drain(&mut req), vec![Action::Connect]);
    req.handle_connected(None, &[], later);
    let t = transmits(&drain(&mut req))[0];
    assert_eq!((t.xid, t.version.wire(), t.probe, t.attempt), (2, 2, true, 1));
}

/// RFC 8166 section 4.5.4: once a call timed out and the connection is to be closed, no other
/// call goes out on it (each would only be retransmitted), the disconnect is asked for once,
/// and the calls go out on the next connection within its single credit (section 3.3.3).
#[test]
fn rfc8166_4_5_4_no_call_goes_out_on_a_connection_being_closed() {
    let now = Instant::now();
    let mut req = requester((1, 1));
    start(&mut req, 1, now);
    assert!(matches!(req.handle_receive(&reply(1, 1, 32), now), Incoming::Reply { xid: 1, .. }));
    req.call(2, now).unwrap();
    assert_eq!(transmits(&drain(&mut req)).len(), 1);
    let later = now + 2 * TIMEOUT;
    req.handle_timeout(later);
    assert_eq!(drain(&mut req), vec![Action::Disconnect]);
    assert_eq!(req.poll_timeout(), None, "nothing left to time out: the disconnect is what is awaited");
    req.call(3, later).unwrap();
    req.handle_timeout(later);
    assert_eq!(drain(&mut req), vec![], "no transmission, no second disconnect");
    req.handle_disconnected(later);
    assert_eq!(drain(&mut req), vec![Action::Connect]);
    req.handle_connected(None, &[], later);
    let again: Vec<_> = transmits(&drain(&mut req)).iter().map(|t| (t.xid, t.attempt)).collect();
    assert_eq!(again, vec![(2, 2)]);
}

// ---- finding 2: the probe answered by something other than a reply or RDMA_ERR_VERS ----

/// RFC 8166 section 5.5.2 (the v1 draft's text): "If the rdma_vers field contains a recognized
/// value, but an XDR parsing error occurs, the responder MUST reply with ... ERR_CHUNK". An
/// ERR_CHUNK (Version Two's RDMA_ERR_BAD_HEADER) or RDMA_ERR_INVAL_OPTION answering the probe
/// fails that call alone and shows that the responder recognized Version Two: the version
/// settles, and the next call goes out at once, still within one credit (an error carries no
/// grant, draft section 5).
#[test]
fn rfc8166_5_5_2_an_rdma_error_answering_the_probe_fails_only_that_call_and_settles_version_2() {
    use rpcrdma_v1::verdict::PeerError::Chunk;
    let cases = [
        ("ERR_CHUNK in Version Two (RDMA_ERR_BAD_HEADER)", words(&[1, 2, 1, 4, 2]), PeerError::Common(Chunk)),
        ("RDMA_ERR_INVAL_OPTION", words(&[1, 2, 1, 4, 3]), PeerError::InvalOption),
    ];
    for (what, answer, error) in cases {
        let now = Instant::now();
        let mut req = requester((1, 2));
        start(&mut req, 1, now);
        req.call(2, now).unwrap();
        req.call(3, now).unwrap();
        assert_eq!(req.handle_receive(&answer, now), Incoming::Consumed, "{what}");
        let ev = drain(&mut req);
        assert!(ev.contains(&Action::Failed { xid: 1, error: CallFailure::Peer(error) }), "{what}: {ev:?}");
        let next: Vec<_> = transmits(&ev).iter().map(|t| (t.xid, t.version.wire(), t.probe)).collect();
        assert_eq!(next, vec![(2, 2, false)], "{what}: the next call goes out, alone");
        assert_eq!(req.version(), Some(Version::TWO), "{what}");
        assert!(matches!(req.handle_receive(&reply(2, 2, 32), now), Incoming::Reply { xid: 2, .. }), "{what}");
        let next: Vec<_> = transmits(&drain(&mut req)).iter().map(|t| t.xid).collect();
        assert_eq!(next, vec![3], "{what}: and the one after its reply");
        assert_eq!(req.memory().no_v2(ADDR), None, "{what}");
    }
}

/// Draft section 5.2 with RFC 8166 section 4.5: an RDMA_ERROR answering the probe whose
/// `rdma_vers` is 1 was written by a responder that read the probe as Version One, so it
/// speaks Version One (a Version Two responder answers in Version Two): the requester falls
/// back on the same connection as after RDMA_ERR_VERS, sending the probe's call again in
/// Version One (the error says it was not run), and remembers the responder. A requester that
/// speaks only Version Two has nothing to fall back to: the call fails with the error.
#[test]
fn draft_5_2_an_rdma_error_in_version_one_answering_the_probe_means_fall_back() {
    use rpcrdma_v1::verdict::PeerError::Chunk;
    let now = Instant::now();
    let mut req = requester((1, 2));
    start(&mut req, 1, now);
    req.call(2, now).unwrap();
    assert_eq!(req.handle_receive(&words(&[1, 1, 1, 4, 2]), now), Incoming::Consumed);
    let ev = drain(&mut req);
    assert!(!ev.iter().any(|e| matches!(e, Action::Failed { .. })), "no call fails: {ev:?}");
    let next: Vec<_> = transmits(&ev).iter().map(|t| (t.xid, t.version.wire(), t.probe)).collect();
    assert_eq!(next, vec![(1, 1, false)], "the probe's call again, in Version One, alone");
    assert_eq!(req.version(), Some(Version::ONE));
    assert_eq!(req.memory().no_v2(ADDR), Some(NoV2Reason::ErrVers { high: 1 }));
    assert!(matches!(req.handle_receive(&reply(1, 1, 32), now), Incoming::Reply { xid: 1, .. }));
    let next: Vec<_> = transmits(&drain(&mut req)).iter().map(|t| (t.xid, t.version.wire())).collect();
    assert_eq!(next, vec![(2, 1)], "and the next call in Version One");

    let mut only_v2 = requester((2, 2));
    start(&mut only_v2, 1, now);
    assert_eq!(only_v2.handle_receive(&words(&[1, 1, 1, 4, 2]), now), Incoming::Consumed);
    let ev = drain(&mut only_v2);
    assert!(ev.contains(&Action::Failed { xid: 1, error: CallFailure::Peer(PeerError::Common(Chunk)) }), "{ev:?}");
}

/// Draft section 5.2: a probe refused with RDMA_ERR_VERS was not run, and going again in
/// Version One is the negotiation, not a retransmission: a requester allowed one attempt per
/// call sends the call again in Version One instead of failing it with the refusal ("none of
/// ours", though Version One is). Found by the simulator's `one_attempt` extra. A call that is
/// not the probe gets no attempt back: a responder answering every call ERR_VERS cannot loop
/// it.
#[test]
fn draft_5_2_a_probe_refused_for_its_version_does_not_spend_the_calls_attempt() {
    let now = Instant::now();
    let cfg = requester::RequesterConfig::default().versions((Version::ONE, Version::TWO)).timeout(TIMEOUT);
    let mut req = Requester::new(cfg.max_attempts(1), ADDR);
    let probe = start(&mut req, 1, now);
    assert!(probe.probe);
    let err_vers = |xid: u32, vers: u32| words(&[xid, vers, 1, 4, 1, 1, 1]);
    assert_eq!(req.handle_receive(&err_vers(1, 2), now), Incoming::Consumed);
    let ev = drain(&mut req);
    assert!(!ev.iter().any(|e| matches!(e, Action::Failed { .. })), "the call did not fail: {ev:?}");
    let next: Vec<_> = transmits(&ev).iter().map(|t| (t.xid, t.version.wire(), t.probe)).collect();
    assert_eq!(next, vec![(1, 1, false)], "the call again, in Version One");
    // That transmission was its one attempt: refused again, it fails.
    assert_eq!(req.handle_receive(&err_vers(1, 1), now), Incoming::Consumed);
    let ev = drain(&mut req);
    assert!(ev.iter().any(|e| matches!(e, Action::Failed { xid: 1, .. })), "{ev:?}");
    assert!(transmits(&ev).is_empty());
}

/// RFC 8166 section 4.5 (a reply that breaks the header rules) and draft section 5: a
/// malformed answer to the probe fails that call with the reason; it tells nothing about the
/// responder's versions, so the next call is the probe again, on the same connection.
#[test]
fn rfc8166_4_5_a_malformed_answer_to_the_probe_fails_only_that_call_and_the_next_call_probes() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    start(&mut req, 1, now);
    req.call(2, now).unwrap();
    // RDMA_MSG whose Read list is cut short.
    assert_eq!(req.handle_receive(&words(&[1, 2, 1, 0, 1, 0]), now), Incoming::Consumed);
    let ev = drain(&mut req);
    assert!(matches!(ev[0], Action::Failed { xid: 1, error: CallFailure::MalformedReply(_) }), "{ev:?}");
    let next: Vec<_> = transmits(&ev).iter().map(|t| (t.xid, t.version.wire(), t.probe)).collect();
    assert_eq!(next, vec![(2, 2, true)]);
    assert!(!ev.contains(&Action::Disconnect));
}

/// RFC 8166 section 4.5.4 ("the associated RPC transaction fails immediately"): a probe the
/// driver cancels (it could not be sent) leaves no probe outstanding, so the next call is
/// sent, as the probe.
#[test]
fn rfc8166_4_5_4_a_cancelled_probe_lets_the_next_call_probe() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    start(&mut req, 1, now);
    req.call(2, now).unwrap();
    assert!(req.cancel(1, now));
    let next: Vec<_> = transmits(&drain(&mut req)).iter().map(|t| (t.xid, t.version.wire(), t.probe)).collect();
    assert_eq!(next, vec![(2, 2, true)]);
}

/// What a test responder sends back for one transmission.
type Answer = fn(&Transmit) -> Option<Vec<u8>>;

/// Serves every call with a reply in its own version, granting 32.
fn serve(t: &Transmit) -> Option<Vec<u8>> {
    Some(reply(t.xid, t.version.wire(), 32))
}

/// Runs `req` against a responder that answers the first transmission (the probe) with
/// `first` and serves the rest, reconnecting whenever asked, with the clock jumping to each
/// deadline when nothing else happens: how each call ended, and when. Stops after `limit` of
/// virtual time: a call that has not ended by then never would.
fn drive(req: &mut Requester, xids: &[u32], first: Answer, limit: Duration) -> Vec<(u32, Result<(), CallFailure>)> {
    let t0 = Instant::now();
    let mut now = t0;
    let mut ended = Vec::new();
    let mut answered = 0;
    for &xid in xids {
        req.call(xid, now).unwrap();
    }
    while req.pending() > 0 && now <= t0 + limit {
        let Some(e) = req.poll_action() else {
            match req.poll_timeout() {
                Some(at) => {
                    now = now.max(at);
                    req.handle_timeout(now);
                    continue;
                }
                None => break, // nothing will ever happen again
            }
        };
        match e {
            Action::Connect => req.handle_connected(None, &[], now),
            Action::Disconnect => req.handle_disconnected(now),
            Action::Transmit(t) => {
                let answer = if answered == 0 { first(&t) } else { serve(&t) };
                answered += 1;
                if let Some(bytes) = answer {
                    if let Incoming::Reply { xid, .. } = req.handle_receive(&bytes, now) {
                        ended.push((xid, Ok(())));
                    }
                }
            }
            Action::Failed { xid, error } => ended.push((xid, Err(error))),
            Action::Settled { .. } => {}
        }
    }
    assert_eq!(req.pending(), 0, "calls never ended; ended: {ended:?}");
    ended
}

/// Draft section 5 and RFC 8166 section 4.5: whatever answers the probe (an RDMA_ERROR of any
/// kind, a malformed or undecodable message, a reply in the wrong version, or nothing), each
/// call ends exactly once within its attempts' deadlines (3 attempts of 1 s), and every call
/// after the probe is served.
#[test]
fn draft_5_every_call_ends_within_its_deadline_whatever_answers_the_probe() {
    let answers: [(&str, Answer); 7] = [
        ("ERR_CHUNK v2", |t| Some(words(&[t.xid, 2, 1, 4, 2]))),
        ("ERR_CHUNK v1 word", |t| Some(words(&[t.xid, 1, 1, 4, 2]))),
        ("INVAL_OPTION", |t| Some(words(&[t.xid, 2, 1, 4, 3]))),
        ("malformed", |t| Some(words(&[t.xid, 2, 1, 0, 1, 0]))),
        ("undecodable RDMA_ERROR", |t| Some(words(&[t.xid, 2, 1, 4, 99]))),
        ("a reply in Version One", |t| Some(reply(t.xid, 1, 32))),
        ("nothing", |_| None),
    ];
    for (what, first) in answers {
        let mut req = requester((1, 2));
        let ended = drive(&mut req, &[1, 2, 3], first, 3 * TIMEOUT);
        let mut xids: Vec<u32> = ended.iter().map(|e| e.0).collect();
        xids.sort();
        assert_eq!(xids, vec![1, 2, 3], "{what}: each call ends once: {ended:?}");
        for (xid, outcome) in &ended {
            assert!(*xid == 1 || outcome.is_ok(), "{what}: call {xid} after the probe failed: {outcome:?}");
        }
    }
}

/// A reply in another version than its call's is dropped (draft section 5.3) and leaves the
/// probe in flight, to end at its deadline like a lost one.
#[test]
fn draft_5_3_a_v1_reply_to_the_probe_is_dropped_and_the_probe_still_times_out() {
    let now = Instant::now();
    let mut req = requester((1, 2));
    start(&mut req, 1, now);
    assert_eq!(
        req.handle_receive(&reply(1, 1, 32), now),
        Incoming::Dropped(DropReason::WrongVersion { got: Version::ONE, sent: Version::TWO })
    );
    assert_eq!(req.poll_timeout(), Some(now + TIMEOUT));
    req.handle_timeout(now + TIMEOUT);
    assert_eq!(drain(&mut req), vec![Action::Disconnect]);
}

// ---- finding 7: a failure says what happened to the last attempt ----

/// What happens to one attempt of a call in [`cause_after`].
#[derive(Debug, Clone, Copy)]
enum Attempt {
    /// The connection for it cannot be made.
    ConnectFails,
    /// Sent; no reply by its deadline (the requester closes the connection).
    TimesOut,
    /// Sent; the connection goes down under it.
    Lost,
}

/// Runs call 1 of a Version One requester through `attempts` (three, its maximum): how it
/// failed.
fn cause_after(attempts: [Attempt; 3]) -> CallFailure {
    let mut now = Instant::now();
    let mut req = requester((1, 1));
    req.call(1, now).unwrap();
    for a in attempts {
        assert_eq!(drain(&mut req), vec![Action::Connect], "{attempts:?}: {a:?}");
        if let Attempt::ConnectFails = a {
            req.handle_connect_failed(now);
            continue;
        }
        req.handle_connected(None, &[], now);
        assert_eq!(transmits(&drain(&mut req)).len(), 1, "{attempts:?}: {a:?}");
        if let Attempt::TimesOut = a {
            now += 2 * TIMEOUT;
            req.handle_timeout(now);
            assert_eq!(drain(&mut req), vec![Action::Disconnect], "{attempts:?}: {a:?}");
        }
        req.handle_disconnected(now);
    }
    let ev = drain(&mut req);
    assert_eq!(req.pending(), 0, "{attempts:?}: {ev:?}");
    match ev[..] {
        [Action::Failed { xid: 1, error }] => error,
        _ => panic!("{attempts:?}: {ev:?}"),
    }
}

/// RFC 8166 section 4.5.4 (a call without a reply is retransmitted after a reconnect, until
/// the requester gives up): a call that ran out of attempts fails with what happened to its
/// last one (no connection, no reply in time, the connection lost under it), not one word for
/// all three.
#[test]
fn rfc8166_4_5_4_a_call_out_of_attempts_fails_with_its_last_attempt_s_cause() {
    use Attempt::*;
    let cases = [
        ([ConnectFails, ConnectFails, ConnectFails], CallFailure::ConnectFailed { attempts: 3 }),
        ([TimesOut, TimesOut, TimesOut], CallFailure::TimedOut { attempts: 3 }),
        ([Lost, Lost, Lost], CallFailure::ConnectionLost { attempts: 3 }),
        ([TimesOut, ConnectFails, ConnectFails], CallFailure::ConnectFailed { attempts: 3 }),
        ([ConnectFails, Lost, TimesOut], CallFailure::TimedOut { attempts: 3 }),
        ([TimesOut, TimesOut, Lost], CallFailure::ConnectionLost { attempts: 3 }),
    ];
    for (attempts, want) in cases {
        assert_eq!(cause_after(attempts), want, "{attempts:?}");
    }
}

/// Draft section 5.2 lets a requester assume, after a lost probe, that the responder lacks
/// Version Two "to avoid a possible version negotiation loop"; it does not make that forever
/// true (the probe may have been unlucky, the responder may be upgraded). Within
/// `reprobe_after` a new connection starts in Version One; after it, the next connection
/// probes for Version Two again.
#[test]
fn draft_5_2_a_responder_remembered_as_lacking_version_two_is_probed_again_after_reprobe_after() {
    let reprobe_after = Duration::from_secs(60);
    let cfg = requester::RequesterConfig::default().timeout(TIMEOUT).reprobe_after(reprobe_after);
    let mut req = Requester::new(cfg, ADDR);
    let now = Instant::now();
    assert!(start(&mut req, 1, now).probe);
    let lost = now + 2 * TIMEOUT;
    req.handle_timeout(lost);
    assert_eq!(drain(&mut req), vec![Action::Disconnect]);
    req.handle_disconnected(lost);
    assert_eq!(req.memory().no_v2(ADDR), Some(NoV2Reason::ProbeLost));
    assert_eq!(req.memory().remembered_until(ADDR), Some(lost + reprobe_after));

    // Before it expires: Version One at once, no probe.
    assert_eq!(drain(&mut req), vec![Action::Connect]);
    req.handle_connected(None, &[], lost);
    let ev = drain(&mut req);
    assert!(ev.iter().any(|e| matches!(e, Action::Settled { version: Version::ONE, .. })), "{ev:?}");
    let got: Vec<_> = transmits(&ev).iter().map(|t| (t.xid, t.version.wire(), t.probe)).collect();
    assert_eq!(got, vec![(1, 1, false)]);
    assert!(matches!(req.handle_receive(&reply(1, 1, 32), lost), Incoming::Reply { xid: 1, .. }));

    // The connection ends; the next one, after `reprobe_after`, probes again.
    req.handle_disconnected(lost);
    let later = lost + reprobe_after;
    req.call(2, later).unwrap();
    assert_eq!(drain(&mut req), vec![Action::Connect]);
    req.handle_connected(None, &[], later);
    let got: Vec<_> = transmits(&drain(&mut req)).iter().map(|t| (t.xid, t.version.wire(), t.probe)).collect();
    assert_eq!(got, vec![(2, 2, true)], "the memory expired: the first call is the Version Two probe");
}

/// Draft section 4.2: "When the rdma_proc field has any other value [than RDMA_MSG], an RPC
/// Payload Stream MUST NOT follow". A Version Two RDMA_NOMSG reply with bytes after its
/// chunk lists breaks that rule: its call fails with that cause, at once, instead of the
/// reply vanishing and the caller waiting out its timeout.
#[test]
fn draft_4_2_a_version_two_nomsg_reply_with_trailing_bytes_fails_its_call_with_the_cause() {
    use rpcrdma_v2::verdict::Reason;
    let now = Instant::now();
    let mut req = requester((1, 2));
    start(&mut req, 1, now);
    // RDMA_NOMSG, no Read or Write list, a one-segment Reply chunk (the reply went there), then
    // two words it must not carry.
    let nomsg = words(&[1, 2, 32, 1, 0, 0, 1, 1, 0x77, 64, 0, 0x1000, 0xdead, 0xbeef]);
    assert_eq!(req.handle_receive(&nomsg, now), Incoming::Consumed);
    let ev = drain(&mut req);
    let failed = Action::Failed { xid: 1, error: CallFailure::MalformedReply(Reason::PayloadAfterNoMsg(8)) };
    assert!(ev.contains(&failed), "{ev:?}");
}

/// `reprobe_after` of `Duration::MAX` means a responder found lacking Version Two is never
/// probed again: remembered practically forever, not a panic adding it to the clock.
#[test]
fn draft_5_2_a_reprobe_after_of_forever_remembers_forever() {
    let cfg = requester::RequesterConfig::default().timeout(TIMEOUT).reprobe_after(Duration::MAX);
    let mut req = Requester::new(cfg, ADDR);
    let now = Instant::now();
    assert!(start(&mut req, 1, now).probe);
    let lost = now + 2 * TIMEOUT;
    req.handle_timeout(lost);
    req.handle_disconnected(lost);
    assert_eq!(req.memory().no_v2(ADDR), Some(NoV2Reason::ProbeLost));
    let until = req.memory().remembered_until(ADDR).unwrap();
    assert!(until >= lost + Duration::from_secs(50 * 365 * 86_400), "{until:?}");
}
