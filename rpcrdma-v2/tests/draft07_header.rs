//! draft-ietf-nfsv4-rpcrdma-version-two-07's transport header, received: every header type
//! built with the types generated from the draft's own XDR and read back through
//! `draft07::header::Header`, and each rule of sections 4.5, 6 and 7 a receiver applies,
//! named by its section, with the answer section 7 prescribes.

use proptest::prelude::*;
use rpcrdma_v2::draft07::header::{Answer, Header, HeaderError, HeaderType, PREFIX_LEN};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::rt::{List, Seq, Xdr};
use rpcrdma_v2::HeaderLimits;

const SUPPORTED: Rpcrdma2ErrVers = Rpcrdma2ErrVers { rdma_vers_low: 1, rdma_vers_high: 2 };

fn prefix(xid: u32, htype: u32) -> Vec<u8> {
    RpcrdmaCommon { rdma_xid: xid, rdma_vers: 2, rdma_credit: 32, rdma_htype: htype }.to_vec().unwrap()
}

/// The prefix, then `body` encoded, then `payload`.
fn message<'a>(xid: u32, htype: u32, body: &impl Xdr<'a>, payload: &[u8]) -> Vec<u8> {
    let mut m = prefix(xid, htype);
    m.extend(body.to_vec().unwrap());
    m.extend(payload);
    m
}

fn parse(bytes: &[u8]) -> Result<Header<'_>, HeaderError> {
    Header::parse(bytes, &HeaderLimits::default())
}

fn seg(handle: u32, length: u32) -> Rpcrdma2Segment {
    Rpcrdma2Segment { rdma_handle: handle, rdma_length: length, rdma_offset: 0x1000 }
}

fn read(position: u32, handle: u32, length: u32) -> Rpcrdma2ReadSegment {
    Rpcrdma2ReadSegment { rdma_position: position, rdma_target: seg(handle, length) }
}

/// An RDMA2_CALL_INLINE with Read list `reads`, no Write list nor Reply chunk, and the RPC
/// call after it.
fn call_inline(reads: &[Rpcrdma2ReadSegment]) -> Vec<u8> {
    let body = Rpcrdma2HdrCallInline {
        rdma_inv_handle: 0,
        rdma_reads: List::from_slice(reads),
        rdma_provisional_writes: List::from_slice(&[]),
        rdma_provisional_reply: None,
        rdma_rpc_first_word: 7,
    };
    message(7, RDMA2_CALL_INLINE, &body, &RPC[4..])
}

/// An RDMA2_CALL_EXTERNAL with Call chunk `call` and Read list `reads`, nothing else.
fn call_external(call: &[Rpcrdma2ReadSegment], reads: &[Rpcrdma2ReadSegment]) -> Vec<u8> {
    let body = Rpcrdma2HdrCallExternal {
        rdma_inv_handle: 0,
        rdma_call: List::from_slice(call),
        rdma_reads: List::from_slice(reads),
        rdma_provisional_writes: List::from_slice(&[]),
        rdma_provisional_reply: None,
    };
    message(7, RDMA2_CALL_EXTERNAL, &body, &[])
}

fn bad_xdr() -> Answer {
    Answer::Error(Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_BAD_XDR })
}

/// The RPC message after a header: its XID, then CALL (0) and two words.
const RPC: [u8; 16] = [0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0x86, 0xa3];

#[test]
fn section_6_1_every_header_type_is_read_as_the_generated_types_wrote_it() {
    let targets = [seg(0x21, 512)];
    let write = Rpcrdma2WriteChunk { rdma_target: Seq::from_slice(&targets) };
    let writes = [write];

    // RDMA2_ERROR: ERR_SEGMENTS with its limit.
    let m = message(7, RDMA2_ERROR, &Rpcrdma2HdrError::Rdma2ErrSegments(16), &[]);
    let h = parse(&m).unwrap();
    assert_eq!((h.header_type(), h.error()), (HeaderType::Error, Some(Rpcrdma2HdrError::Rdma2ErrSegments(16))));

    // RDMA2_GRANT: the prefix alone.
    let m = prefix(0, RDMA2_GRANT);
    let h = parse(&m).unwrap();
    assert_eq!((h.header_type(), h.credit(), h.header_len()), (HeaderType::Grant, 32, PREFIX_LEN));

    // RDMA2_CONNPROP_MIDDLE and _FINAL: a property set.
    let props = [Rpcrdma2Propval { rdma_which: RDMA2_PROPID_RBSIZ, rdma_data: &[0, 0, 0x10, 0] }];
    for (htype, kind) in
        [(RDMA2_CONNPROP_MIDDLE, HeaderType::ConnPropMiddle), (RDMA2_CONNPROP_FINAL, HeaderType::ConnPropFinal)]
    {
        let m = message(7, htype, &Rpcrdma2HdrConnprop { rdma_props: Rpcrdma2Propset(Seq::from_slice(&props)) }, &[]);
        let h = parse(&m).unwrap();
        assert_eq!(h.header_type(), kind);
        let got: Vec<_> = h.properties().unwrap().0.iter().collect();
        assert_eq!(got, props);
    }

    // RDMA2_CALL_EXTERNAL: a Call chunk of two segments, a Read chunk at 8, a Write chunk.
    let call = [read(0, 0x11, 100), read(0, 0x12, 50)];
    let reads = [read(8, 0x13, 20)];
    let body = Rpcrdma2HdrCallExternal {
        rdma_inv_handle: 0x99,
        rdma_call: List::from_slice(&call),
        rdma_reads: List::from_slice(&reads),
        rdma_provisional_writes: List::from_slice(&writes),
        rdma_provisional_reply: None,
    };
    let m = message(7, RDMA2_CALL_EXTERNAL, &body, &[]);
    let h = parse(&m).unwrap();
    assert_eq!((h.header_type(), h.inv_handle(), h.header_len()), (HeaderType::CallExternal, Some(0x99), m.len()));
    let call_handles: Vec<u32> = h.call_chunk().iter().map(|c| c.target.handle).collect();
    assert_eq!(call_handles, [0x11, 0x12]);
    let chunks: Vec<(u32, u64)> = h.read_chunks().map(|c| (c.position(), c.len())).collect();
    assert_eq!(chunks, [(8, 20)]);
    assert_eq!(h.chunk_lists().writes.iter().next().unwrap().target.get(0).unwrap().handle, 0x21);
    assert!(h.payload().is_empty());

    // RDMA2_CALL_MIDDLE and RDMA2_REPLY_MIDDLE: rdma_remaining, then the message's part.
    for (htype, kind) in [(RDMA2_CALL_MIDDLE, HeaderType::CallMiddle), (RDMA2_REPLY_MIDDLE, HeaderType::ReplyMiddle)] {
        let mut m = prefix(7, htype);
        m.extend(4000u32.to_be_bytes());
        m.extend(RPC);
        let h = parse(&m).unwrap();
        assert_eq!((h.header_type(), h.remaining(), h.payload()), (kind, Some(4000), &RPC[..]));
        // The generated body reads the same first word.
        let (b, _) = Rpcrdma2HdrCallMiddle::decode(&m[PREFIX_LEN..]).unwrap();
        assert_eq!((b.rdma_remaining, b.rdma_rpc_first_word), (4000, 7));
    }

    // RDMA2_CALL_INLINE: the lists, then the RPC call.
    let body = Rpcrdma2HdrCallInline {
        rdma_inv_handle: 0,
        rdma_reads: List::from_slice(&reads),
        rdma_provisional_writes: List::from_slice(&[]),
        rdma_provisional_reply: Some(write),
        rdma_rpc_first_word: 7,
    };
    let mut m = message(7, RDMA2_CALL_INLINE, &body, &[]);
    m.extend(&RPC[4..]);
    let h = parse(&m).unwrap();
    assert_eq!((h.header_type(), h.payload()), (HeaderType::CallInline, &RPC[..]));
    assert_eq!(
        h.chunk_lists().reply,
        Some(rpcrdma_v1::xdr::XdrWriteChunk::decode(&write.to_vec().unwrap()).unwrap().0)
    );

    // RDMA2_REPLY_EXTERNAL: a Write list and the Reply chunk.
    let body = Rpcrdma2HdrReplyExternal { rdma_writes: List::from_slice(&writes), rdma_reply: Some(write) };
    let h_bytes = message(7, RDMA2_REPLY_EXTERNAL, &body, &[]);
    let h = parse(&h_bytes).unwrap();
    assert_eq!(h.header_type(), HeaderType::ReplyExternal);
    assert!(h.chunk_lists().reply.is_some() && h.chunk_lists().writes.len() == 1);

    // RDMA2_REPLY_INLINE: the Write list, then the RPC reply.
    let body = Rpcrdma2HdrReplyInline { rdma_writes: List::from_slice(&[]), rdma_rpc_first_word: 7 };
    let mut m = message(7, RDMA2_REPLY_INLINE, &body, &[]);
    m.extend(&RPC[4..]);
    let h = parse(&m).unwrap();
    assert_eq!((h.header_type(), h.payload(), h.read_chunks().count()), (HeaderType::ReplyInline, &RPC[..], 0));
}

/// Section 6.1: "implementations that receive an unrecognized header type MUST respond with
/// an RDMA2_ERROR message with an rdma_err field containing RDMA2_ERR_INVAL_HTYPE".
#[test]
fn section_6_1_an_unknown_header_type_is_answered_inval_htype() {
    for htype in [0, 1, 2, 3, 14, 0xffff_ffff] {
        let m = prefix(7, htype);
        let e = parse(&m).unwrap_err();
        assert_eq!(e, HeaderError::UnknownType(htype));
        assert_eq!(e.answer(SUPPORTED, false), Answer::Error(Rpcrdma2HdrError::Default { discriminant: 4 }));
    }
}

/// Section 7: a message "not as long as" the prefix: "the receiver MUST silently discard the
/// ingress message without processing it further, and without a response".
#[test]
fn section_7_a_message_shorter_than_the_prefix_is_dropped_without_an_answer() {
    let m = prefix(7, RDMA2_GRANT);
    for len in 0..PREFIX_LEN {
        let e = parse(&m[..len]).unwrap_err();
        assert_eq!(e, HeaderError::TooShort { len });
        assert_eq!(e.answer(SUPPORTED, false), Answer::Drop);
    }
}

/// Section 7.1.1: a version the Responder does not support "MUST respond with ...
/// RDMA2_ERR_VERS" filled with the versions it supports.
#[test]
fn section_7_1_1_another_version_is_answered_err_vers_with_the_range() {
    let mut m = prefix(7, RDMA2_CALL_INLINE);
    m[4..8].copy_from_slice(&3u32.to_be_bytes());
    let e = parse(&m).unwrap_err();
    assert_eq!(e, HeaderError::Version { vers: 3 });
    assert_eq!(e.answer(SUPPORTED, false), Answer::Error(Rpcrdma2HdrError::Rdma2ErrVers(SUPPORTED)));
}

/// Section 4.5.1.1: a Read list "whose segment position values do not appear in monotonically
/// increasing order ... MUST discard the message ... and respond with ... RDMA2_ERR_BAD_XDR".
#[test]
fn section_4_5_1_1_read_positions_out_of_order_are_answered_bad_xdr() {
    let e = parse(&call_inline(&[read(12, 1, 4), read(8, 2, 4)])).unwrap_err();
    assert!(matches!(e, HeaderError::Chunks { htype: HeaderType::CallInline, .. }), "{e}");
    assert_eq!(e.answer(SUPPORTED, false), bad_xdr());
    // In order, the same chunks pass.
    assert!(parse(&call_inline(&[read(8, 2, 4), read(12, 1, 4)])).is_ok());
}

/// Section 6.3.7: in RDMA2_CALL_INLINE's Read list "A Requester MUST NOT insert
/// Position-zero Read chunks".
#[test]
fn section_6_3_7_a_position_zero_chunk_in_call_inline_is_refused() {
    let e = parse(&call_inline(&[read(0, 1, 64)])).unwrap_err();
    assert_eq!(e, HeaderError::PositionZeroInCallInline);
    assert_eq!(e.answer(SUPPORTED, false), bad_xdr());
}

/// Section 6.3.5: the Call chunk is "a list of one or more Read segments"; section 4.5.1.2:
/// a body chunk's position is zero.
#[test]
fn section_6_3_5_call_external_carries_a_call_chunk_at_position_zero() {
    let mut body = Rpcrdma2HdrCallExternal {
        rdma_inv_handle: 0,
        rdma_call: List::from_slice(&[]),
        rdma_reads: List::from_slice(&[]),
        rdma_provisional_writes: List::from_slice(&[]),
        rdma_provisional_reply: None,
    };
    let e = parse(&message(7, RDMA2_CALL_EXTERNAL, &body, &[])).unwrap_err();
    assert_eq!(e, HeaderError::NoCallChunk);
    assert_eq!(e.answer(SUPPORTED, false), bad_xdr());
    let call = [read(4, 1, 64)];
    body.rdma_call = List::from_slice(&call);
    assert_eq!(parse(&message(7, RDMA2_CALL_EXTERNAL, &body, &[])).unwrap_err(), HeaderError::CallChunkPosition(4));
    let call = [read(0, 1, 64)];
    body.rdma_call = List::from_slice(&call);
    assert!(parse(&message(7, RDMA2_CALL_EXTERNAL, &body, &[])).is_ok());
}

/// Section 6.3.8: RDMA2_REPLY_EXTERNAL's "rdma_reply field is a list that MUST contain
/// exactly one Reply chunk".
#[test]
fn section_6_3_8_reply_external_without_its_reply_chunk_is_refused() {
    let body = Rpcrdma2HdrReplyExternal { rdma_writes: List::from_slice(&[]), rdma_reply: None };
    let e = parse(&message(7, RDMA2_REPLY_EXTERNAL, &body, &[])).unwrap_err();
    assert_eq!(e, HeaderError::NoReplyChunk);
    assert_eq!(e.answer(SUPPORTED, false), bad_xdr());
}

/// Section 7.3.3: a chunk "that contains more segments than the Responder supports ... MUST
/// set the rdma_err field to RDMA2_ERR_SEGMENTS and set the rdma_max_segments field".
#[test]
fn section_7_3_3_more_segments_than_supported_are_answered_err_segments_with_the_limit() {
    let limits = HeaderLimits::default().max_segments(4);
    let targets = [seg(1, 8), seg(2, 8), seg(3, 8), seg(4, 8), seg(5, 8)];
    let body = Rpcrdma2HdrReplyExternal {
        rdma_writes: List::from_slice(&[]),
        rdma_reply: Some(Rpcrdma2WriteChunk { rdma_target: Seq::from_slice(&targets) }),
    };
    let m = message(7, RDMA2_REPLY_EXTERNAL, &body, &[]);
    let e = Header::parse(&m, &limits).unwrap_err();
    assert_eq!(e.answer(SUPPORTED, false), Answer::Error(Rpcrdma2HdrError::Rdma2ErrSegments(4)), "{e}");
    // The Call chunk counts too: 3 Call segments and 2 Read segments are 5.
    let m = call_external(&[read(0, 1, 8), read(0, 2, 8), read(0, 3, 8)], &[read(8, 4, 8), read(16, 5, 8)]);
    let e = Header::parse(&m, &limits).unwrap_err();
    assert_eq!(e.answer(SUPPORTED, false), Answer::Error(Rpcrdma2HdrError::Rdma2ErrSegments(4)), "{e}");
}

/// Section 5.1: a receiver "returns this error [RDMA2_ERR_BAD_PROPVAL] if the length of
/// rdma_data is greater than the length of the transferred message".
#[test]
fn section_5_1_a_property_longer_than_the_message_is_answered_bad_propval() {
    // CONNPROP_FINAL, one property: rdma_which 2, rdma_data claiming 8192 bytes, none there.
    let mut m = prefix(0, RDMA2_CONNPROP_FINAL);
    m.extend([1u32, 2, 8192].iter().flat_map(|w| w.to_be_bytes()));
    let e = parse(&m).unwrap_err();
    assert!(matches!(e, HeaderError::Body { htype: HeaderType::ConnPropFinal, .. }), "{e}");
    assert_eq!(
        e.answer(SUPPORTED, false),
        Answer::Error(Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_BAD_PROPVAL })
    );
}

/// The Call chunk and the other chunks together are held to the message length limit, as
/// Version One's chunks are (each within it alone is not enough).
#[test]
fn the_call_chunk_and_the_other_chunks_together_are_within_the_message_limit() {
    let limits = HeaderLimits::default().max_message_len(1000);
    let e = Header::parse(&call_external(&[read(0, 1, 600)], &[read(8, 2, 600)]), &limits).unwrap_err();
    assert!(
        matches!(
            e,
            HeaderError::Chunks {
                source: rpcrdma_v1::header::HeaderError::MessageTooLong { len: 1200, limit: 1000 },
                ..
            }
        ),
        "{e}"
    );
}

/// Table 2: the header types with no RPC message ("Msg: No") carry nothing after their body;
/// the ones with one carry at least its first word.
#[test]
fn table_2_payload_only_where_the_header_type_carries_one() {
    let mut m = prefix(0, RDMA2_GRANT);
    m.extend([0, 0, 0, 1]);
    let e = parse(&m).unwrap_err();
    assert_eq!(e, HeaderError::TrailingBytes { htype: HeaderType::Grant, len: 4 });
    assert_eq!(e.answer(SUPPORTED, false), bad_xdr());
    let mut m = prefix(7, RDMA2_CALL_MIDDLE);
    m.extend(100u32.to_be_bytes());
    let e = parse(&m).unwrap_err();
    assert!(matches!(e, HeaderError::Body { htype: HeaderType::CallMiddle, .. }), "{e}");
}

/// Section 7 and RFC 8166 section 4.5's rule: an RDMA2_ERROR is never answered with another,
/// whatever is wrong with it.
#[test]
fn section_7_an_error_message_is_never_answered() {
    let mut m = prefix(7, RDMA2_ERROR);
    m.extend([0, 0]); // a truncated error code
    let e = parse(&m).unwrap_err();
    assert!(matches!(e, HeaderError::Body { htype: HeaderType::Error, .. }), "{e}");
    assert_eq!(e.answer(SUPPORTED, true), Answer::Drop);
}

proptest! {
    /// No input makes the parser panic, and what it accepts is consistent: the payload is
    /// the input after the header, and every chunk list it hands out decodes within it.
    #[test]
    fn any_bytes_parse_or_fail_cleanly(tail in proptest::collection::vec(any::<u8>(), 0..256), htype in 0u32..16) {
        let mut m = prefix(7, htype);
        m.extend(&tail);
        if let Ok(h) = parse(&m) {
            prop_assert_eq!(h.payload(), &m[h.header_len()..]);
            prop_assert!(h.read_chunks().count() <= h.chunk_lists().reads.len());
        }
    }
}
