//! The credit rules of RFC 8166 section 3.3 (draft-ietf-nfsv4-rfc5666bis
//! section 4.3), one test per rule, and a property test driving random event
//! sequences through the requester's state machine.

use proptest::prelude::*;
use rpcrdma_v1::credits::{CreditOverrun, NoCredit, Release, RequesterCredits, ResponderCredits};

/// Take as many credits as the window allows.
fn fill(c: &mut RequesterCredits) -> Vec<rpcrdma_v1::credits::Credit> {
    let mut taken = Vec::new();
    while let Ok(credit) = c.try_acquire() {
        taken.push(credit);
    }
    taken
}

/// Section 3.3.3: "a Requester MUST NOT assume more than one credit is
/// available and MUST receive a valid reply from the Responder carrying the
/// actual number of available credits, prior to sending its next request."
#[test]
fn requester_assumes_one_credit_until_first_reply_rfc8166_3_3_3() {
    let mut c = RequesterCredits::new(64);
    assert_eq!(c.window(), 1);
    assert!(!c.is_open());

    let first = c.try_acquire().expect("one credit on a new connection");
    assert_eq!(c.try_acquire(), Err(NoCredit { in_flight: 1, window: 1 }));

    // Even with the first call complete (say, timed out) and no reply, the
    // window stays 1: one call at a time.
    assert_eq!(c.on_complete(first), Release::Released);
    let second = c.try_acquire().unwrap();
    assert!(c.try_acquire().is_err());

    // The first valid reply carries the grant and opens the window.
    let outcome = c.on_reply(32);
    assert!(outcome.opened);
    assert_eq!(outcome.window, 32);
    assert!(c.is_open());
    assert_eq!(c.on_complete(second), Release::Released);
    assert_eq!(fill(&mut c).len(), 32);

    // Later replies do not "open" again.
    assert!(!c.on_reply(32).opened);
}

/// Section 3.3.1: "The number of allowed new requests the Requester may send
/// is then the lower of the current requested and granted credit values, minus
/// the number of requests in flight."
#[test]
fn in_flight_never_exceeds_min_of_requested_and_granted() {
    // Granted below requested.
    let mut c = RequesterCredits::new(16);
    c.on_reply(5);
    assert_eq!(c.window(), 5);
    let taken = fill(&mut c);
    assert_eq!(taken.len(), 5);
    assert_eq!(c.in_flight(), 5);
    assert_eq!(c.available(), 0);

    // Requested below granted.
    let mut d = RequesterCredits::new(3);
    d.on_reply(100);
    assert_eq!(d.window(), 3);
    assert_eq!(fill(&mut d).len(), 3);

    // A grant that shrinks the window below the calls in flight: nothing is
    // recalled, but no new call until they drain below the new window.
    let outcome = c.on_reply(2);
    assert_eq!(outcome.over_window, 3);
    assert!(c.try_acquire().is_err());
    let mut taken = taken.into_iter();
    for _ in 0..3 {
        c.on_complete(taken.next().unwrap());
        assert!(c.try_acquire().is_err(), "in flight {} window {}", c.in_flight(), c.window());
    }
    c.on_complete(taken.next().unwrap());
    assert_eq!(c.in_flight(), 1);
    let again = c.try_acquire().unwrap();
    assert!(c.try_acquire().is_err());
    c.on_complete(again);
    c.on_complete(taken.next().unwrap());
    assert_eq!(c.in_flight(), 0);

    // Lowering the requested value narrows the window the same way.
    let mut e = RequesterCredits::new(8);
    e.on_reply(8);
    let held = fill(&mut e);
    assert_eq!(e.set_requested(6), 2);
    assert!(e.try_acquire().is_err());
    for credit in held {
        e.on_complete(credit);
    }
    assert_eq!(fill(&mut e).len(), 6);
}

/// Section 3.3.1: "The granted value MUST NOT be zero, since such a value
/// would result in deadlock." A 0 is read as 1 (as Linux does) and counted.
#[test]
fn grant_of_zero_is_one_and_a_peer_fault() {
    let mut c = RequesterCredits::new(8);
    let credit = c.try_acquire().unwrap();
    let outcome = c.on_reply(0);
    assert!(outcome.zero_grant);
    assert!(outcome.opened, "a zero grant is still a valid reply's grant, read as 1");
    assert_eq!((outcome.granted, outcome.window), (1, 1));
    assert_eq!(c.peer_faults(), 1);
    c.on_complete(credit);

    // Not a deadlock: one call can still go.
    let credit = c.try_acquire().unwrap();
    assert!(c.try_acquire().is_err());
    c.on_complete(credit);

    // A normal grant is no fault; a second zero is a second fault.
    assert!(!c.on_reply(4).zero_grant);
    assert_eq!(c.peer_faults(), 1);
    c.on_reply(0);
    assert_eq!(c.peer_faults(), 2);
    assert_eq!(c.window(), 1);

    // A grant above the requested value is not a fault (the window is the
    // lower of the two; Linux clamps it to its maximum).
    c.on_reply(u32::MAX);
    assert_eq!((c.window(), c.peer_faults()), (8, 2));
}

/// Section 3.3.3 applies to every connection; Linux resets its window to 1 on
/// reconnect. Calls in flight are lost with the connection: their credits are
/// stale and the caller retransmits under new ones.
#[test]
fn window_returns_to_one_on_reconnect() {
    let mut c = RequesterCredits::new(8);
    c.on_reply(0); // a fault, kept across the reconnect
    c.on_reply(8);
    let lost = fill(&mut c);
    assert_eq!(lost.len(), 8);

    c.on_reconnect();
    assert_eq!((c.window(), c.in_flight(), c.granted(), c.is_open()), (1, 0, 1, false));
    assert_eq!(c.requested(), 8);
    assert_eq!(c.peer_faults(), 1);

    // Retransmission: one at a time until the new connection's first reply.
    let retransmit = c.try_acquire().unwrap();
    assert!(c.try_acquire().is_err());

    // The old connection's credits release nothing.
    for credit in lost {
        assert_eq!(c.on_complete(credit), Release::Stale);
    }
    assert_eq!(c.in_flight(), 1);

    c.on_reply(8);
    assert_eq!(c.on_complete(retransmit), Release::Released);
    assert_eq!(fill(&mut c).len(), 8);
}

/// Section 3.3.3 opens the window on "a valid reply from the Responder
/// carrying the actual number of available credits"; the rules for forming an
/// RDMA_ERROR (draft section 5.5) do not cover its rdma_credit field.
#[test]
fn error_reply_does_not_open_the_window() {
    let mut c = RequesterCredits::new(8);
    let credit = c.try_acquire().unwrap();
    let outcome = c.on_error_reply();
    assert!(!outcome.opened);
    assert_eq!((outcome.window, outcome.granted), (1, 1));
    assert!(!c.is_open());
    // The error completes the call.
    assert_eq!(c.on_complete(credit), Release::Released);
    let credit = c.try_acquire().unwrap();
    assert!(c.try_acquire().is_err(), "still one credit after an error reply");

    // Once open, an error reply leaves the grant alone.
    c.on_reply(6);
    c.on_complete(credit);
    let outcome = c.on_error_reply();
    assert_eq!((outcome.window, outcome.granted, outcome.opened), (6, 6, false));
    assert_eq!(c.peer_faults(), 0);
}

/// Section 3.3.1: the grant MUST NOT be zero; a responder grants within its
/// resources (and, like Linux, clamps to its maximum).
#[test]
fn responder_grant_is_clamped_and_never_zero() {
    let mut r = ResponderCredits::new(32);
    assert_eq!(r.grant(0), 1);
    assert_eq!(r.grant(1), 1);
    assert_eq!(r.grant(31), 31);
    assert_eq!(r.grant(32), 32);
    assert_eq!(r.grant(33), 32);
    assert_eq!(r.grant(u32::MAX), 32);
    assert_eq!(ResponderCredits::new(0).grant(0), 1);
    assert_eq!(ResponderCredits::new(0).grant(9), 1);
}

/// Section 3.3.1: "A Requester MUST NOT send unacknowledged requests in excess
/// of the Responder's granted credit limit"; a responder counts a requester
/// that does as a fault. Before any grant, one call at a time (3.3.3).
#[test]
fn responder_counts_calls_beyond_the_grant_as_peer_faults() {
    let mut r = ResponderCredits::new(8);
    assert!(r.admits(1));
    assert_eq!(r.on_call(2), Err(CreditOverrun { in_flight: 2, granted: 1 }));
    assert_eq!(r.peer_faults(), 1);

    r.grant(8);
    assert!(r.on_call(8).is_ok());
    // A reduced grant does not make earlier calls faults: the requester may not
    // have seen it yet.
    r.grant(2);
    assert!(r.on_call(8).is_ok());
    assert!(r.on_call(9).is_err());
    assert_eq!(r.peer_faults(), 2);

    r.on_reconnect();
    assert!(!r.admits(2));
    assert_eq!(r.peer_faults(), 2);
}

/// The two sides together: a requester obeying its window never trips the
/// responder's check.
#[test]
fn an_obedient_requester_never_trips_the_responder() {
    let mut r = ResponderCredits::new(4);
    let mut c = RequesterCredits::new(16);
    let mut pending = Vec::new();
    for round in 0..20 {
        while let Ok(credit) = c.try_acquire() {
            r.on_call(c.in_flight()).unwrap();
            pending.push(credit);
        }
        // Answer the oldest call.
        let credit = pending.remove(0);
        c.on_reply(r.grant(c.requested()));
        c.on_complete(credit);
        if round == 10 {
            c.on_reconnect();
            r.on_reconnect();
            pending.clear();
        }
    }
    assert_eq!(r.peer_faults(), 0);
    assert_eq!(c.peer_faults(), 0);
}

#[derive(Debug, Clone)]
enum Op {
    Send,
    Reply(u32),
    ErrorReply,
    /// Complete the outstanding credit at this index (modulo their number).
    Complete(usize),
    Reconnect,
    SetRequested(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Send),
        3 => prop_oneof![0u32..=12, Just(0), Just(u32::MAX)].prop_map(Op::Reply),
        1 => Just(Op::ErrorReply),
        3 => any::<usize>().prop_map(Op::Complete),
        1 => Just(Op::Reconnect),
        1 => (0u32..=12).prop_map(Op::SetRequested),
    ]
}

proptest! {
    /// Random sequences of send / reply(grant) / error reply / complete /
    /// reconnect / change of the requested value, checked against a model:
    /// a send succeeds exactly when fewer calls than the window are in flight,
    /// so in_flight <= window after every step except when a reply or a
    /// lowered request shrank the window under calls already sent (then no
    /// send succeeds until they drain); every credit taken is released exactly
    /// once (Released on its own connection, Stale after a reconnect).
    #[test]
    fn random_event_sequences_keep_in_flight_within_the_window(
        requested in 0u32..=12,
        ops in prop::collection::vec(op(), 0..200),
    ) {
        let mut c = RequesterCredits::new(requested);
        // Outstanding credits, each with the connection it was taken on.
        let mut outstanding: Vec<(rpcrdma_v1::credits::Credit, u32)> = Vec::new();
        let mut connection = 0u32;
        let mut opened = false;
        let mut granted = 1u32;
        let mut req = requested.max(1);
        let mut faults = 0u64;
        let mut acquired = 0u64;
        let mut released = 0u64;
        let mut stale = 0u64;
        // Whether the window shrank under the calls in flight since they last
        // fit in it.
        let mut over = false;

        for op in ops {
            let shrinks = matches!(op, Op::Reply(_) | Op::SetRequested(_));
            match op {
                Op::Send => {
                    let before = c.in_flight();
                    match c.try_acquire() {
                        Ok(credit) => {
                            prop_assert!(before < c.window());
                            prop_assert!(!over);
                            prop_assert!(c.in_flight() <= c.window());
                            outstanding.push((credit, connection));
                            acquired += 1;
                        }
                        Err(NoCredit { in_flight, window }) => {
                            prop_assert_eq!((in_flight, window), (before, c.window()));
                            prop_assert!(before >= window);
                        }
                    }
                }
                Op::Reply(g) => {
                    let out = c.on_reply(g);
                    prop_assert_eq!(out.zero_grant, g == 0);
                    prop_assert_eq!(out.opened, !opened);
                    faults += u64::from(g == 0);
                    granted = g.max(1);
                    opened = true;
                    prop_assert_eq!(out.granted, granted);
                    prop_assert_eq!(out.over_window, c.in_flight().saturating_sub(c.window()));
                }
                Op::ErrorReply => {
                    let out = c.on_error_reply();
                    prop_assert!(!out.opened);
                    prop_assert_eq!(out.granted, granted);
                }
                Op::Complete(i) => {
                    if !outstanding.is_empty() {
                        let (credit, conn) = outstanding.remove(i % outstanding.len());
                        let before = c.in_flight();
                        match c.on_complete(credit) {
                            Release::Released => {
                                prop_assert_eq!(conn, connection);
                                prop_assert_eq!(c.in_flight(), before - 1);
                                released += 1;
                            }
                            Release::Stale => {
                                prop_assert!(conn != connection);
                                prop_assert_eq!(c.in_flight(), before);
                                stale += 1;
                            }
                        }
                    }
                }
                Op::Reconnect => {
                    c.on_reconnect();
                    connection += 1;
                    opened = false;
                    granted = 1;
                }
                Op::SetRequested(r) => {
                    let excess = c.set_requested(r);
                    req = r.max(1);
                    prop_assert_eq!(excess, c.in_flight().saturating_sub(c.window()));
                }
            }

            // The model's window and count.
            let window = if opened { req.min(granted) } else { 1 };
            prop_assert_eq!(c.window(), window);
            prop_assert!(window >= 1);
            let live = outstanding.iter().filter(|(_, conn)| *conn == connection).count() as u32;
            prop_assert_eq!(c.in_flight(), live);
            prop_assert_eq!(c.peer_faults(), faults);

            // More calls in flight than the window allows only right after a
            // reply or a lowered request shrank the window, or while such an
            // excess drains; a send never goes over (checked above).
            if c.in_flight() > c.window() {
                prop_assert!(over || shrinks);
                over = true;
            } else {
                over = false;
            }
        }

        // Every credit taken is released exactly once: each outstanding one
        // now, and the counts add up.
        for (credit, conn) in outstanding.drain(..) {
            let expect = if conn == connection { Release::Released } else { Release::Stale };
            prop_assert_eq!(c.on_complete(credit), expect);
            if expect == Release::Released { released += 1 } else { stale += 1 }
        }
        prop_assert_eq!(c.in_flight(), 0);
        prop_assert_eq!(acquired, released + stale);
    }
}
