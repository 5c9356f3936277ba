//! draft-ietf-nfsv4-rpcrdma-version-two-07's message continuation (sections 4.1, 6.3.3,
//! 6.3.4, 6.3.6, 6.3.9, 7.1.4) and credits (4.2.1, 4.2.1.1), driven by bytes: each message
//! is parsed by `draft07::header::Header` and handed to `continuation::Reassembly`, each
//! credit step to `credits::CreditWindow`; every rule named by its section.

use std::borrow::Cow;

use proptest::prelude::*;
use rpcrdma_v2::draft07::continuation::{split, ContinuationError, Reassembly, Step};
use rpcrdma_v2::draft07::credits::{CreditError, CreditWindow, MAX_CREDITS};
use rpcrdma_v2::draft07::header::{Header, HeaderType};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::HeaderLimits;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn prefix(xid: u32, htype: u32) -> Vec<u8> {
    words(&[xid, 2, 32, htype])
}

fn middle(xid: u32, htype: u32, remaining: u32, part: &[u8]) -> Vec<u8> {
    let mut m = prefix(xid, htype);
    m.extend(remaining.to_be_bytes());
    m.extend(part);
    m
}

/// A CALL_INLINE (no chunks) or REPLY_INLINE (no Write list) carrying `part`.
fn inline(xid: u32, htype: u32, part: &[u8]) -> Vec<u8> {
    let mut m = prefix(xid, htype);
    m.extend(if htype == RDMA2_CALL_INLINE { words(&[0, 0, 0, 0]) } else { words(&[0]) });
    m.extend(part);
    m
}

/// A message with no body: GRANT, or CONNPROP_* with no properties.
fn control(xid: u32, htype: u32) -> Vec<u8> {
    let mut m = prefix(xid, htype);
    if htype == RDMA2_CONNPROP_MIDDLE || htype == RDMA2_CONNPROP_FINAL {
        m.extend(words(&[0]));
    }
    m
}

fn step<'a>(r: &mut Reassembly, bytes: &'a [u8]) -> Step<'a> {
    r.receive(Header::parse(bytes, &HeaderLimits::default()).expect("a valid header"))
}

/// The refusal `bytes` draw: (its XID, the answer, why, the sequence abandoned).
fn refusal(r: &mut Reassembly, bytes: &[u8]) -> (u32, Rpcrdma2HdrError, ContinuationError, Option<u32>) {
    match step(r, bytes) {
        Step::Refused { xid, answer, reason, abandoned } => (xid, answer, reason, abandoned),
        other => panic!("not refused: {other:?}"),
    }
}

/// Refused with RDMA2_ERR_INVAL_CONT, answered with the message's own XID `xid` (section 7):
/// why, and the sequence abandoned.
fn refused_inval_cont(r: &mut Reassembly, bytes: &[u8], xid: u32) -> (ContinuationError, Option<u32>) {
    let (x, answer, reason, abandoned) = refusal(r, bytes);
    assert_eq!(x, xid, "answered with the offending message's XID (section 7)");
    assert_eq!(answer, Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_INVAL_CONT }, "{reason}");
    (reason, abandoned)
}

/// The RPC message of `len` bytes used throughout: its bytes count up.
fn rpc(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

proptest! {
    /// Section 4.1: "The sender MAY divide an RPC message at any convenient boundary but MUST
    /// send RPC message fragments in XDR stream order": cut by `split`, sent as MIDDLE parts
    /// and a final INLINE, a message of any length comes out whole, calls and replies alike,
    /// and nothing stays held.
    #[test]
    fn section_4_1_a_message_cut_anywhere_is_reassembled_whole(
        len in 4usize..20_000, middle_room in 4usize..5000, inline_room in 4usize..5000, reply in any::<bool>(),
    ) {
        let (mid, last) = if reply { (RDMA2_REPLY_MIDDLE, RDMA2_REPLY_INLINE) } else { (RDMA2_CALL_MIDDLE, RDMA2_CALL_INLINE) };
        let message = rpc(len);
        let parts = split(len, middle_room, inline_room).unwrap();
        let mut r = Reassembly::new(1 << 20);
        for (i, p) in parts.iter().enumerate() {
            let bytes = match p.remaining {
                Some(rem) => middle(9, mid, rem, &message[p.bytes.clone()]),
                None => inline(9, last, &message[p.bytes.clone()]),
            };
            let s = step(&mut r, &bytes);
            if i + 1 < parts.len() {
                prop_assert_eq!(s, Step::Held);
                prop_assert_eq!(r.held(), p.bytes.end);
            } else {
                let Step::Whole { message: got, header } = s else { panic!("not whole: {s:?}") };
                prop_assert_eq!(&got[..], &message[..]);
                prop_assert_eq!(header.xid(), 9);
                // A message that fits one Send is handed over where it landed.
                prop_assert_eq!(matches!(got, Cow::Borrowed(_)), parts.len() == 1);
            }
        }
        prop_assert_eq!(r.held(), 0);
    }
}

/// Section 6.3.6: "If a peer sends follows an RDMA2_CALL_MIDDLE header type with anything
/// other than an RDMA2_CALL_MIDDLE message or an RDMA2_CALL_INLINE message, the receiver MUST
/// respond with an RDMA2_ERROR header type and set its rdma_err field to RDMA2_ERR_INVAL_CONT
/// and drop the incoming message"; and 4.1: Payload streams of two messages "MUST NOT"
/// interleave. The same XID is meant: a CALL_INLINE of another XID breaks the sequence.
#[test]
fn section_6_3_6_after_call_middle_only_its_own_middle_or_inline() {
    let first = middle(1, RDMA2_CALL_MIDDLE, 8, &rpc(8));
    let breakers = [
        inline(2, RDMA2_CALL_INLINE, &rpc(8)),
        inline(1, RDMA2_REPLY_INLINE, &rpc(8)),
        middle(1, RDMA2_REPLY_MIDDLE, 4, &rpc(4)),
        control(1, RDMA2_CONNPROP_FINAL),
    ];
    for b in &breakers {
        let mut r = Reassembly::new(1 << 20);
        assert_eq!(step(&mut r, &first), Step::Held);
        let xid = u32::from_be_bytes(b[..4].try_into().unwrap());
        let (reason, abandoned) = refused_inval_cont(&mut r, b, xid);
        assert!(matches!(reason, ContinuationError::Interleaved { held_xid: 1, .. }), "{reason}");
        assert_eq!(abandoned, (xid != 1).then_some(1), "the broken sequence is given up as well");
        assert_eq!(r.held(), 0, "nothing of the broken sequence is kept");
        // The broken sequence's last part is dropped, not taken for a message of its own.
        assert_eq!(step(&mut r, &inline(1, RDMA2_CALL_INLINE, &rpc(8))), Step::Dropped { xid: 1 });
    }
}

/// Section 6.3.9: the same rule after RDMA2_REPLY_MIDDLE.
#[test]
fn section_6_3_9_after_reply_middle_only_its_own_middle_or_inline() {
    let mut r = Reassembly::new(1 << 20);
    assert_eq!(step(&mut r, &middle(5, RDMA2_REPLY_MIDDLE, 8, &rpc(8))), Step::Held);
    let (reason, _) = refused_inval_cont(&mut r, &inline(5, RDMA2_CALL_INLINE, &rpc(8)), 5);
    assert!(matches!(reason, ContinuationError::Interleaved { got: HeaderType::CallInline, .. }));
}

/// Section 7.1.4: "The Responder MUST silently discard all ingress messages with an rdma_xid
/// field that matches the failing message without reassembling the payload", until its
/// sequence ends; other XIDs go on being served.
#[test]
fn section_7_1_4_a_refused_sequences_later_parts_are_dropped_until_it_ends() {
    let mut r = Reassembly::new(1 << 20);
    assert_eq!(step(&mut r, &middle(3, RDMA2_CALL_MIDDLE, 100, &rpc(8))), Step::Held);
    // Says 100 remain, brings 8 and says 80 remain: 88 != 100.
    let (reason, _) = refused_inval_cont(&mut r, &middle(3, RDMA2_CALL_MIDDLE, 80, &rpc(8)), 3);
    assert_eq!(reason, ContinuationError::Inconsistent { len: 8, remaining: 80, expected: 100 });
    assert_eq!(step(&mut r, &middle(3, RDMA2_CALL_MIDDLE, 40, &rpc(40))), Step::Dropped { xid: 3 });
    assert_eq!(step(&mut r, &inline(3, RDMA2_CALL_INLINE, &rpc(40))), Step::Dropped { xid: 3 });
    // Its sequence over, the XID is served again, and others all along.
    assert!(matches!(step(&mut r, &inline(3, RDMA2_CALL_INLINE, &rpc(8))), Step::Whole { .. }));
    assert!(matches!(step(&mut r, &inline(4, RDMA2_CALL_INLINE, &rpc(8))), Step::Whole { .. }));
}

/// The final part brings exactly what remained: fewer or more bytes break the sequence, and
/// only that sequence.
#[test]
fn a_final_part_of_the_wrong_length_is_refused() {
    for len in [4, 12] {
        let mut r = Reassembly::new(1 << 20);
        assert_eq!(step(&mut r, &middle(6, RDMA2_CALL_MIDDLE, 8, &rpc(8))), Step::Held);
        let (reason, _) = refused_inval_cont(&mut r, &inline(6, RDMA2_CALL_INLINE, &rpc(len)), 6);
        assert_eq!(reason, ContinuationError::Inconsistent { len, remaining: 0, expected: 8 });
        // The refused part ended its sequence: a retransmission of the call under the same XID
        // (as RPC retransmits) is a new message, served.
        assert!(matches!(step(&mut r, &inline(6, RDMA2_CALL_INLINE, &rpc(8))), Step::Whole { .. }));
    }
}

/// Section 6.3.3: after RDMA2_CONNPROP_MIDDLE, anything but another CONNPROP "MUST" be
/// answered RDMA2_ERR_INVAL_CONT; section 6.3.4: so must a CONNPROP after the
/// RDMA2_CONNPROP_FINAL.
#[test]
fn section_6_3_3_and_6_3_4_connprop_sequences() {
    let mut r = Reassembly::new(1 << 20);
    assert!(matches!(step(&mut r, &control(0, RDMA2_CONNPROP_MIDDLE)), Step::Other(_)));
    assert!(matches!(step(&mut r, &control(0, RDMA2_CONNPROP_MIDDLE)), Step::Other(_)));
    let (reason, _) = refused_inval_cont(&mut r, &inline(8, RDMA2_CALL_INLINE, &rpc(8)), 8);
    assert_eq!(reason, ContinuationError::AfterConnPropMiddle(HeaderType::CallInline));

    let mut r = Reassembly::new(1 << 20);
    assert!(matches!(step(&mut r, &control(0, RDMA2_CONNPROP_FINAL)), Step::Other(_)));
    assert!(matches!(step(&mut r, &inline(8, RDMA2_CALL_INLINE, &rpc(8))), Step::Whole { .. }));
    for late in [RDMA2_CONNPROP_MIDDLE, RDMA2_CONNPROP_FINAL] {
        let (reason, _) = refused_inval_cont(&mut r, &control(0, late), 0);
        assert!(matches!(reason, ContinuationError::AfterConnPropFinal(_)));
    }
}

/// Two readings (the module's documentation): an RDMA2_ERROR or an RDMA2_GRANT in the middle
/// of a sequence is taken as it is, and the sequence goes on. Neither carries a payload
/// stream (4.1); section 7 never answers an error with another; and section 4.2.1.1 has a
/// receiver "always" able to take an asynchronous credit update.
#[test]
fn an_error_or_a_grant_in_the_middle_of_a_sequence_is_taken_and_the_sequence_goes_on() {
    let mut error = prefix(77, RDMA2_ERROR);
    error.extend(words(&[RDMA2_ERR_SYSTEM]));
    for (between, kind) in [(error, HeaderType::Error), (control(0, RDMA2_GRANT), HeaderType::Grant)] {
        let mut r = Reassembly::new(1 << 20);
        assert_eq!(step(&mut r, &middle(1, RDMA2_CALL_MIDDLE, 8, &rpc(8))), Step::Held);
        assert!(matches!(step(&mut r, &between), Step::Other(h) if h.header_type() == kind));
        assert!(matches!(step(&mut r, &inline(1, RDMA2_CALL_INLINE, &rpc(8))), Step::Whole { .. }));
    }
}

/// A MIDDLE part saying fewer than 4 bytes remain can never be followed by a valid final part
/// (each carries at least a word): refused at once, its later parts dropped.
#[test]
fn a_middle_part_with_less_than_a_word_remaining_is_refused_at_once() {
    for remaining in 0..4 {
        let mut r = Reassembly::new(1 << 20);
        let (reason, _) = refused_inval_cont(&mut r, &middle(2, RDMA2_CALL_MIDDLE, remaining, &rpc(8)), 2);
        assert_eq!(reason, ContinuationError::ShortRemainder(remaining));
        assert_eq!(step(&mut r, &inline(2, RDMA2_CALL_INLINE, &rpc(4))), Step::Dropped { xid: 2 });
    }
}

/// Issue 27: "a configured limit on how much a peer can make us hold". A sequence whose
/// bytes and stated remainder exceed it is refused (RDMA2_ERR_SYSTEM, section 7.4.1) before
/// anything is held, and what is held never exceeds the bytes that arrived.
#[test]
fn a_peer_can_make_a_receiver_hold_no_more_than_its_limit() {
    let mut r = Reassembly::new(4096);
    let (_, answer, reason, _) = refusal(&mut r, &middle(2, RDMA2_CALL_MIDDLE, u32::MAX, &rpc(8)));
    assert_eq!(answer, Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_SYSTEM });
    assert!(matches!(reason, ContinuationError::TooLong { limit: 4096, .. }));
    assert_eq!(r.held(), 0);
    // Within the limit, held grows by what arrives, not by what is claimed.
    assert_eq!(step(&mut r, &middle(3, RDMA2_CALL_MIDDLE, 4000, &rpc(8))), Step::Held);
    assert_eq!(r.held(), 8);
    // A part that brings the total over the limit is refused too.
    let mut r = Reassembly::new(16);
    assert_eq!(step(&mut r, &middle(4, RDMA2_CALL_MIDDLE, 8, &rpc(8))), Step::Held);
    assert_eq!(step(&mut r, &middle(4, RDMA2_CALL_MIDDLE, 4, &rpc(4))), Step::Held);
    assert!(matches!(step(&mut r, &inline(4, RDMA2_CALL_INLINE, &rpc(4))), Step::Whole { .. }));
}

/// Section 4.2.1: "Received credits ... MUST set this value to one (1) when a connection is
/// first established": one message goes before the peer's first header.
#[test]
fn section_4_2_1_one_message_before_the_peers_first_header() {
    let mut w = CreditWindow::new(32).unwrap();
    assert_eq!(w.window(), 1);
    w.send();
    assert!(!w.may_send(), "a second message before the peer's first header");
    w.received(32).unwrap();
    assert_eq!(w.window(), 31);
}

/// Section 4.2.1: `rdma_credit` is a running total; "The sender MUST NOT post this message if
/// the connection's Sent message counter is greater than the connection's current Received
/// credits value".
#[test]
fn section_4_2_1_credits_are_running_totals() {
    let mut w = CreditWindow::new(4).unwrap();
    w.send();
    w.received(4).unwrap(); // the peer received none of ours yet when it wrote this
    let mut sent = 1;
    while w.may_send() {
        w.send();
        sent += 1;
    }
    assert_eq!(sent, 4, "exactly the total the peer gave");
    // Each header this side sends carries its Receives so far plus its advertised credits.
    assert_eq!(w.credit_field(), 1 + 4);
    w.received(2 + 4).unwrap(); // the peer has received two: two more may go
    assert_eq!(w.window(), 2);
    // A lowered limit with messages in flight leaves a total behind the Sends: no window,
    // no error (4.2.1: "A peer MAY adjust its Advertised credits").
    w.received(3).unwrap();
    assert_eq!(w.window(), 0);
}

/// Section 4.2.1: "credit limit values MUST be less than 2^31 - 1".
#[test]
fn section_4_2_1_credit_limits_are_below_2_31_minus_1() {
    assert_eq!(CreditWindow::new(MAX_CREDITS + 1), Err(CreditError::LimitTooLarge(MAX_CREDITS + 1)));
    let mut w = CreditWindow::new(MAX_CREDITS).unwrap();
    assert_eq!(w.advertise(u32::MAX), Err(CreditError::LimitTooLarge(u32::MAX)));
    // A received total granting 2^31 - 1 beyond the Sends is refused.
    assert!(matches!(w.received(1 << 31), Err(CreditError::WindowTooLarge { .. })));
}

/// Section 4.2.1.1: "receivers MUST always be in a position to receive one asynchronous
/// credit update message, in addition to payload-bearing messages": a receiver keeps one
/// Receive more than it advertises, and a sender whose window is spent may still send one
/// RDMA2_GRANT, not two.
#[test]
fn section_4_2_1_1_one_grant_beyond_the_window() {
    let mut w = CreditWindow::new(8).unwrap();
    assert_eq!(w.receives_to_post(), 9);
    w.send();
    assert!(!w.may_send());
    assert!(w.may_send_grant(), "the Receive kept for an asynchronous credit update");
    w.send();
    assert!(!w.may_send_grant(), "only one message beyond the window");
}

/// Section 4.2.1.1: "a good receiver implementation provides a credit refresh before half its
/// credit limit is exceeded"; and the totals this side sends are its Receives plus its
/// advertised credits, so that a peer that only sends (call-only operation, section 4.7)
/// goes on at full speed on GRANTs alone and never overruns the Receives posted.
#[test]
fn section_4_2_1_1_grants_keep_a_call_only_peer_going_within_the_receives_posted() {
    // A sends calls only; B answers none and sends a GRANT whenever one is due.
    let (mut a, mut b) = (CreditWindow::new(8).unwrap(), CreditWindow::new(8).unwrap());
    let (mut in_flight_to_b, mut delivered, mut grants) = (Vec::<u32>::new(), 0u32, 0u32);
    for _ in 0..10_000 {
        if a.may_send() {
            in_flight_to_b.push(a.send());
            // B never holds more of A's messages than the Receives it keeps posted.
            assert!(in_flight_to_b.len() as u32 <= b.receives_to_post());
        } else if let Some(total) = (!in_flight_to_b.is_empty()).then(|| in_flight_to_b.remove(0)) {
            b.received(total).unwrap();
            delivered += 1;
            if b.grant_due() {
                assert!(b.may_send_grant());
                a.received(b.send()).unwrap();
                grants += 1;
            }
        } else {
            panic!("deadlock after {delivered} calls: A may not send and nothing is in flight");
        }
    }
    assert!(delivered > 4000, "{delivered} calls delivered");
    assert!(grants < delivered, "{grants} GRANTs for {delivered} calls");
}
