//! One test per rule of draft-cel-nfsv4-rpcrdma-version-two-00 sections 2
//! to 5 that this crate enforces, each named after its section; the rows
//! of docs/conformance.md cite them.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use rpcrdma_v1::direction::{classify, Direction, Role};
use rpcrdma_v1::header::HeaderError;
use rpcrdma_v1::marshal_call::{marshal_call, CallDescription, CallForm, ChunkPurpose, InlineThresholds, Registrar};
use rpcrdma_v1::reassemble::{read_list_fetches, reassemble_call};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::xdr::XdrRdmaSegment;
use rpcrdma_v1::Version;
use rpcrdma_v2::options::{encode_optional, OptionOutcome, OptionalAnswer, OptionalMessage, Registry};
use rpcrdma_v2::verdict::{
    default_policy, receive, receive_awaiting, DiscardReason, PeerError, Reason, ReceivePolicy, Verdict,
};
use rpcrdma_v2::{MessageKind, DEFAULT_INLINE_THRESHOLD, DEFAULT_THRESHOLDS, RPCRDMA2_VERSION};

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4).map(|w| u32::from_be_bytes(w.try_into().unwrap())).collect()
}

fn judge(b: &[u8]) -> Verdict<'_> {
    receive(b, &default_policy(), &mut Registry::new())
}

/// The RDMA_ERROR words of a `Reply` verdict, and its reason.
fn reply_words(v: Verdict<'_>) -> (Vec<u32>, Reason) {
    match v {
        Verdict::Reply { reply, reason } => (words(reply.as_bytes()), reason),
        other => panic!("expected an RDMA_ERROR reply, got {other:?}"),
    }
}

const MSG: u32 = 0;
const NOMSG: u32 = 1;
const ERROR: u32 = 4;
const OPTIONAL: u32 = 5;
const BAD_HEADER: u32 = 2;
const INVAL_OPTION: u32 = 3;

#[test]
fn draft_2_3_default_inline_threshold_is_4096() {
    assert_eq!(DEFAULT_INLINE_THRESHOLD, 4096);
    assert_eq!(DEFAULT_THRESHOLDS, InlineThresholds { call: 4096, reply: 4096 });
}

/// Everything in one region; Read chunks point into the call.
struct OneRegion;
impl Registrar for OneRegion {
    type Error = Infallible;
    fn register(&mut self, p: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), Infallible> {
        let offset = p.call_range().map_or(0x8000, |r| r.start) as u64;
        out.push(XdrRdmaSegment { handle: 7, length: p.len() as u32, offset });
        Ok(())
    }
}

#[test]
fn draft_2_3_senders_assume_4096() {
    // A 3000-byte call with no DDP-eligible data: Long at Version One's
    // 1024 bytes, Short at Version Two's 4096.
    let mut call = vec![0u8; 3000];
    call[..4].copy_from_slice(&5u32.to_be_bytes());
    let desc = CallDescription { args: vec![], result_maxima: vec![], max_reply: 128 };
    let mut header = [0u8; 1024];
    let mut out = rpcrdma_v2::marshaled_call();
    marshal_call(&call, &desc.request(8, DEFAULT_THRESHOLDS), &mut OneRegion, &mut header, &mut out).unwrap();
    assert_eq!(out.form(), CallForm::Short);
    marshal_call(&call, &desc.request(8, InlineThresholds::default()), &mut OneRegion, &mut header, &mut out).unwrap();
    assert_eq!(out.form(), CallForm::Long);
}

#[test]
fn draft_3_1_unrecognised_opttype_gets_err_inval_option_same_xid() {
    let msg = bytes(&[0xdead_beef, 2, 1, OPTIONAL, 77, 0]);
    let (w, reason) = reply_words(judge(&msg));
    assert_eq!(w, [0xdead_beef, 2, 32, ERROR, INVAL_OPTION]);
    assert_eq!(reason, Reason::UnsupportedOption(77));
}

#[test]
fn draft_3_1_unsupported_by_its_handler_gets_err_inval_option() {
    let mut registry = Registry::new();
    registry.register(77, |_: &OptionalMessage<'_>| OptionOutcome::Unsupported).unwrap();
    let msg = bytes(&[4, 2, 1, OPTIONAL, 77, 0]);
    let (w, _) = reply_words(receive(&msg, &default_policy(), &mut registry));
    assert_eq!(w, [4, 2, 32, ERROR, INVAL_OPTION]);
}

#[test]
fn draft_3_2_a_handler_may_answer_with_an_rdma_optional_of_its_own() {
    let mut registry = Registry::new();
    registry
        .register(5, |m: &OptionalMessage<'_>| {
            OptionOutcome::Answer(OptionalAnswer { opttype: 6, optinfo: m.optinfo.to_vec() })
        })
        .unwrap();
    let mut buf = [0u8; 64];
    let n = encode_optional(11, 1, 5, b"ping", &mut buf).unwrap();
    let answer = OptionalAnswer { opttype: 6, optinfo: b"ping".to_vec() };
    assert_eq!(
        receive(&buf[..n], &default_policy(), &mut registry),
        Verdict::Handled { xid: 11, opttype: 5, answer: Some(answer.clone()) }
    );
    // The answer is an RDMA_OPTIONAL with the XID echoed.
    let sent = answer.to_message(11, 32);
    assert_eq!(words(&sent)[..5], [11, 2, 32, OPTIONAL, 6]);
}

#[test]
fn draft_3_1_an_answer_to_our_own_rdma_optional_is_neither_dispatched_nor_answered() {
    let calls = Arc::new(Mutex::new(0));
    let mut registry = Registry::new();
    let c = Arc::clone(&calls);
    registry
        .register(5, move |_: &OptionalMessage<'_>| {
            *c.lock().unwrap() += 1;
            OptionOutcome::Done
        })
        .unwrap();
    // Opttype 5 (registered) and 9 (not): awaited, both are answers; not awaited, a request.
    for opttype in [5, 9] {
        let msg = bytes(&[12, 2, 1, OPTIONAL, opttype, 0]);
        let v = receive_awaiting(&msg, &default_policy(), &mut registry, &|x| x == 12);
        assert!(matches!(v, Verdict::Answer(m) if m.xid == 12 && m.opttype == opttype), "{v:?}");
        let v = receive_awaiting(&msg, &default_policy(), &mut registry, &|x| x == 13);
        assert!(!matches!(v, Verdict::Answer(_)), "{v:?}");
    }
    assert_eq!(*calls.lock().unwrap(), 1);
}

#[test]
fn draft_3_1_registered_opttype_reaches_its_handler_zero_copy() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut registry = Registry::new();
    let log = Arc::clone(&seen);
    registry
        .register(u32::MAX, move |m: &OptionalMessage<'_>| {
            log.lock().unwrap().push((m.xid, m.credit, m.optinfo.as_ptr() as usize, m.optinfo.len()));
            OptionOutcome::Done
        })
        .unwrap();
    let mut buf = [0u8; 64];
    let n = encode_optional(9, 3, u32::MAX, b"hello", &mut buf).unwrap();
    let v = receive(&buf[..n], &default_policy(), &mut registry);
    assert_eq!(v, Verdict::Handled { xid: 9, opttype: u32::MAX, answer: None });
    // optinfo is the received bytes themselves, at offset 24.
    assert_eq!(*seen.lock().unwrap(), [(9, 3, buf.as_ptr() as usize + 24, 5)]);
}

#[test]
fn draft_3_1_opttype_is_32_bit_unsigned() {
    // Values above i32::MAX are ordinary opttypes, not errors.
    let mut registry = Registry::new();
    registry.register(0x8000_0000, |_: &OptionalMessage<'_>| OptionOutcome::Done).unwrap();
    let msg = bytes(&[1, 2, 1, OPTIONAL, 0x8000_0000, 0]);
    assert!(matches!(receive(&msg, &default_policy(), &mut registry), Verdict::Handled { .. }));
}

#[test]
fn draft_4_2_optional_payload_may_follow() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let mut registry = Registry::new();
    registry
        .register(1, move |m: &OptionalMessage<'_>| {
            log.lock().unwrap().push(m.payload.to_vec());
            OptionOutcome::Done
        })
        .unwrap();
    let without = bytes(&[6, 2, 1, OPTIONAL, 1, 0]);
    let mut with = without.clone();
    with.extend(bytes(&[6, 0, 2, 100_003]));
    for m in [&without, &with] {
        assert!(matches!(receive(m, &default_policy(), &mut registry), Verdict::Handled { xid: 6, .. }));
    }
    assert_eq!(*seen.lock().unwrap(), [vec![], bytes(&[6, 0, 2, 100_003])]);
}

#[test]
fn draft_4_2_rdma_msg_payload_must_follow() {
    let msg = bytes(&[3, 2, 1, MSG, 0, 0, 0]);
    let (w, reason) = reply_words(judge(&msg));
    assert_eq!(w, [3, 2, 32, ERROR, BAD_HEADER]);
    assert_eq!(reason, Reason::Header(HeaderError::MissingPayload));
}

#[test]
fn draft_4_2_nomsg_payload_must_not_follow() {
    // A Long call: Position-zero Read chunk, and nothing after the header.
    let ok = bytes(&[3, 2, 1, NOMSG, 1, 0, 9, 64, 0, 0x1000, 0, 0, 0]);
    assert!(matches!(judge(&ok), Verdict::Accept(h) if h.kind() == MessageKind::NoMsg && h.version() == Version::TWO));
    let mut trailing = ok.clone();
    trailing.extend(bytes(&[3, 0]));
    let (w, reason) = reply_words(judge(&trailing));
    assert_eq!(w, [3, 2, 32, ERROR, BAD_HEADER]);
    assert_eq!(reason, Reason::PayloadAfterNoMsg(8));
}

#[test]
fn draft_4_2_error_replies_carry_no_payload() {
    let (bad, _) = reply_words(judge(&bytes(&[1, 2, 1, 99])));
    let (vers, _) = reply_words(judge(&bytes(&[1, 3, 1, MSG])));
    assert_eq!(bad.len(), 5); // fixed words and the error code: nothing after
    assert_eq!(vers.len(), 7); // ... and the version range
}

#[test]
fn draft_4_2_msgp_and_done_are_answered_bad_header() {
    for p in [2, 3] {
        let (w, reason) = reply_words(judge(&bytes(&[8, 2, 1, p, 0, 0, 0])));
        assert_eq!(w, [8, 2, 32, ERROR, BAD_HEADER]);
        assert_eq!(reason, Reason::Header(HeaderError::Obsolete(p)));
    }
}

#[test]
fn draft_4_2_unknown_procedure_is_answered_bad_header() {
    for p in [6, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
        let (w, reason) = reply_words(judge(&bytes(&[8, 2, 1, p])));
        assert_eq!(w, [8, 2, 32, ERROR, BAD_HEADER]);
        assert_eq!(reason, Reason::Header(HeaderError::UnknownProc(p)));
    }
}

#[test]
fn draft_4_2_chunk_rules_are_version_ones() {
    // A Read chunk at a misaligned Position, an XID mismatch: Version One's
    // rules, answered with RDMA_ERR_BAD_HEADER.
    let misaligned = bytes(&[5, 2, 1, MSG, 1, 6, 9, 64, 0, 0x1000, 0, 0, 0, 5, 0, 0]);
    let (w, reason) = reply_words(judge(&misaligned));
    assert_eq!(w, [5, 2, 32, ERROR, BAD_HEADER]);
    assert_eq!(reason, Reason::Header(HeaderError::MisalignedPosition(6)));
    let mismatch = bytes(&[5, 2, 1, MSG, 0, 0, 0, 6, 0]);
    assert_eq!(reply_words(judge(&mismatch)).1, Reason::Header(HeaderError::XidMismatch { header: 5, rpc: 6 }));
}

#[test]
fn draft_4_2_received_errors_complete_the_xid_or_are_discarded() {
    // A Version One responder's answer to our probe says rdma_vers 1 (libevpl).
    assert_eq!(
        judge(&bytes(&[9, 1, 1, ERROR, 1, 1, 1])),
        Verdict::PeerError {
            xid: 9,
            error: PeerError::Common(rpcrdma_v1::verdict::PeerError::Vers { vers: 1, low: 1, high: 1 })
        }
    );
    assert_eq!(judge(&bytes(&[9, 2, 1, ERROR, 2])), Verdict::PeerError { xid: 9, error: PeerError::BAD_HEADER });
    assert_eq!(judge(&bytes(&[9, 2, 1, ERROR, 3])), Verdict::PeerError { xid: 9, error: PeerError::InvalOption });
    for undecodable in [bytes(&[9, 2, 1, ERROR]), bytes(&[9, 2, 1, ERROR, 4]), bytes(&[9, 2, 1, ERROR, 1, 2, 1])] {
        assert_eq!(judge(&undecodable), Verdict::Discard(DiscardReason::UndecodableError));
    }
}

#[test]
fn draft_4_2_backward_direction_calls_are_classified_on_the_client() {
    // An RDMA_MSG carrying an RPC CALL (msg_type 0), received by a client:
    // a backward-direction call, in either version.
    for vers in [1, 2] {
        let msg = bytes(&[11, vers, 1, MSG, 0, 0, 0, 11, 0]);
        let policy = ReceivePolicy { versions: (Version::ONE, Version::TWO), ..default_policy() };
        let h = match receive(&msg, &policy, &mut Registry::new()) {
            Verdict::Accept(h) => h,
            Verdict::Version1(rpcrdma_v1::verdict::Verdict::Accept(h)) => h,
            other => panic!("{other:?}"),
        };
        assert_eq!(classify(&h, Role::Client), Some(Direction::BackwardCall));
        assert_eq!(classify(&h, Role::Server), Some(Direction::ForwardCall));
    }
}

#[test]
fn draft_5_2_other_versions_get_err_vers_with_our_range_and_same_xid() {
    for vers in [0, 1, 3, u32::MAX] {
        let (w, reason) = reply_words(judge(&bytes(&[12, vers, 1, MSG])));
        assert_eq!(w, [12, vers, 32, ERROR, 1, 2, 2]);
        assert_eq!(reason, Reason::Header(HeaderError::Version { vers }));
    }
    // A receiver of both versions judges a Version One message by Version One's rules.
    let policy = ReceivePolicy { versions: (Version::ONE, Version::TWO), ..default_policy() };
    let v1 = bytes(&[12, 1, 1, MSG, 0, 0, 0, 12, 0]);
    assert!(matches!(
        receive(&v1, &policy, &mut Registry::new()),
        Verdict::Version1(rpcrdma_v1::verdict::Verdict::Accept(h)) if h.version() == Version::ONE
    ));
}

#[test]
fn draft_5_3_replies_carry_the_calls_version() {
    let (w, _) = reply_words(judge(&bytes(&[1, 2, 1, 99])));
    assert_eq!(w[1], RPCRDMA2_VERSION.wire());
    assert_eq!(rpcrdma_v2::marshaled_reply().version(), RPCRDMA2_VERSION);
}

#[test]
fn chunk_lists_shared_with_version_one_marshal_receive_reassemble() {
    // Version One's marshaling at version 2, judged by Version Two's
    // receive, reassembled by Version One's reassembly: one implementation.
    let mut call = vec![0u8; 8044];
    call[..4].copy_from_slice(&21u32.to_be_bytes());
    call[40..44].copy_from_slice(&8000u32.to_be_bytes());
    for (i, b) in call[44..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let ulb = OpaqueAtUlb { call_opaque: Some(40), reply_opaque: None, max_result: 0, max_reply: 128 };
    let mut desc = CallDescription::default();
    desc.describe(&ulb, &call);
    let mut header = [0u8; 1024];
    let mut out = rpcrdma_v2::marshaled_call();
    marshal_call(&call, &desc.request(8, DEFAULT_THRESHOLDS), &mut OneRegion, &mut header, &mut out).unwrap();
    assert_eq!(out.form(), CallForm::Chunked);
    let mut send = Vec::new();
    out.gather_into(&header[..out.header_len()], &call, &mut send);
    let Verdict::Accept(h) = judge(&send) else { panic!("{:?}", judge(&send)) };
    assert_eq!((h.version(), h.xid(), h.read_chunks().count()), (Version::TWO, 21, 1));
    let mut landing = Vec::new();
    for f in read_list_fetches(h.read_list()) {
        landing.extend_from_slice(&call[f.offset as usize..f.offset as usize + f.length as usize]);
    }
    let mut stream = Vec::new();
    reassemble_call(&h.to_msg(), h.payload(), &landing, &mut stream).unwrap();
    assert_eq!(stream, call);
}
