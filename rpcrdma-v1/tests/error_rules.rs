//! The receive rules of RFC 8166 section 4.5 (draft 5.5) and the header
//! checks of section 3.4, one test per rule, named for it.

use rpcrdma_v1::header::{Header, HeaderError, HeaderLimits, MessageKind};
use rpcrdma_v1::verdict::{receive, DiscardReason, ErrorReply, PeerError, ReceivePolicy, Verdict};
use rpcrdma_v1::Version;

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4).map(|w| u32::from_be_bytes(w.try_into().unwrap())).collect()
}

/// An RPC call message: xid, CALL, and a few words.
fn rpc_call(xid: u32) -> Vec<u32> {
    vec![xid, 0, 2, 100003, 3, 0]
}

fn reply_words(v: &Verdict<'_>) -> Vec<u32> {
    match v {
        Verdict::Reply { reply, .. } => words(reply.as_bytes()),
        other => panic!("expected a reply, got {other:?}"),
    }
}

const ERR_CHUNK_7: [u32; 5] = [7, 1, 32, 4, 2];

#[test]
fn valid_rdma_msg_is_accepted() {
    let mut w = vec![7, 1, 32, 0, 0, 0, 0];
    w.extend(rpc_call(7));
    let b = bytes(&w);
    let Verdict::Accept(h) = receive(&b, &ReceivePolicy::default()) else { panic!() };
    assert_eq!((h.xid(), h.kind(), h.header_len()), (7, MessageKind::Msg, 28));
    assert_eq!(h.payload(), &b[28..]);
}

#[test]
fn unsupported_version_gets_err_vers_with_same_xid_and_range_rfc8166_4_5_1() {
    for vers in [0u32, 2, 3, u32::MAX] {
        let b = bytes(&[0xabcd, vers, 5, 0, 0, 0, 0]);
        let v = receive(&b, &ReceivePolicy::default());
        // rdma_vers echoes the failing message's (draft 5.5: "the same version
        // that was in the rdma_vers field in the failing request").
        assert_eq!(reply_words(&v), [0xabcd, vers, 32, 4, 1, 1, 1], "vers {vers}");
    }
    let policy = ReceivePolicy { versions: (Version::ONE, Version::TWO), ..Default::default() };
    assert_eq!(reply_words(&receive(&bytes(&[1, 3, 1, 0]), &policy)), [1, 3, 32, 4, 1, 1, 2]);
}

#[test]
fn unknown_procedure_gets_err_chunk_rfc8166_4_5_2() {
    for proc in [5u32, 6, 100, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
        let b = bytes(&[7, 1, 1, proc, 0, 0, 0]);
        let v = receive(&b, &ReceivePolicy::default());
        assert_eq!(reply_words(&v), ERR_CHUNK_7, "proc {proc}");
        assert!(matches!(v, Verdict::Reply { reason: HeaderError::UnknownProc(p), .. } if p == proc));
    }
}

#[test]
fn rdma_msgp_gets_err_chunk_draft_5_6_1() {
    let b = bytes(&[7, 1, 1, 2, 4, 1024, 0, 0, 0]);
    let v = receive(&b, &ReceivePolicy::default());
    assert_eq!(reply_words(&v), ERR_CHUNK_7);
}

#[test]
fn rdma_done_gets_err_chunk_draft_5_6_2() {
    let b = bytes(&[7, 1, 1, 3]);
    let v = receive(&b, &ReceivePolicy::default());
    assert_eq!(reply_words(&v), ERR_CHUNK_7);
}

#[test]
fn nomsg_without_chunks_gets_err_chunk_rfc8166_4_5_2() {
    let b = bytes(&[7, 1, 1, 1, 0, 0, 0]);
    let v = receive(&b, &ReceivePolicy::default());
    assert!(matches!(v, Verdict::Reply { reason: HeaderError::NoMsgWithoutChunk, .. }));
    assert_eq!(reply_words(&v), ERR_CHUNK_7);
    // A write chunk alone does not hold the message either.
    let b = bytes(&[7, 1, 1, 1, 0, 1, 1, 9, 100, 0, 0, 0, 0]);
    let v = receive(&b, &ReceivePolicy::default());
    assert!(matches!(v, Verdict::Reply { reason: HeaderError::NoMsgWithoutChunk, .. }));
}

#[test]
fn nomsg_with_position_zero_chunk_or_reply_chunk_is_accepted_rfc8166_3_5_3() {
    let long_call = bytes(&[7, 1, 1, 1, 1, 0, 9, 4096, 0, 0, 0, 0, 0]);
    let Verdict::Accept(h) = receive(&long_call, &ReceivePolicy::default()) else { panic!() };
    assert_eq!(h.position_zero_chunk().map(|c| c.len()), Some(4096));
    let long_reply = bytes(&[7, 1, 1, 1, 0, 0, 1, 1, 9, 4096, 0, 0]);
    assert!(matches!(receive(&long_reply, &ReceivePolicy::default()), Verdict::Accept(_)));
}

#[test]
fn xid_mismatch_with_rpc_message_gets_err_chunk_rfc8166_4_5_2() {
    let mut w = vec![7, 1, 1, 0, 0, 0, 0];
    w.extend(rpc_call(8));
    let b = bytes(&w);
    let v = receive(&b, &ReceivePolicy::default());
    assert!(matches!(v, Verdict::Reply { reason: HeaderError::XidMismatch { header: 7, rpc: 8 }, .. }));
    assert_eq!(reply_words(&v), ERR_CHUNK_7);
}

#[test]
fn rdma_msg_without_rpc_message_gets_err_chunk() {
    let b = bytes(&[7, 1, 1, 0, 0, 0, 0]);
    let v = receive(&b, &ReceivePolicy::default());
    assert!(matches!(v, Verdict::Reply { reason: HeaderError::MissingPayload, .. }));
}

#[test]
fn truncated_or_overlong_lists_get_err_chunk_rfc8166_4_5_2() {
    let b = bytes(&[7, 1, 1]);
    let v = receive(&b, &ReceivePolicy::default());
    assert_eq!(reply_words(&v), [7, 1, 32, 4, 2], "a 12-byte header: ERR_CHUNK, as Linux does");
    // A write chunk claiming 0xffffffff segments.
    let b = bytes(&[7, 1, 1, 0, 0, 1, u32::MAX]);
    let v = receive(&b, &ReceivePolicy::default());
    assert_eq!(reply_words(&v), ERR_CHUNK_7);
    // 17 segments, one over the default limit (Linux's 16).
    let mut w = vec![7, 1, 1, 0, 0, 1, 17];
    for i in 0..17 {
        w.extend([i, 1, 0, 0]);
    }
    w.extend([0, 0]);
    w.extend(rpc_call(7));
    let b = bytes(&w);
    let v = receive(&b, &ReceivePolicy::default());
    assert!(matches!(v, Verdict::Reply { reason: HeaderError::TooManySegments { limit: 16, .. }, .. }), "{v:?}");
}

#[test]
fn too_short_for_a_version_is_discarded() {
    for len in 0..8 {
        assert_eq!(
            receive(&[0u8; 7][..len], &ReceivePolicy::default()),
            Verdict::Discard(DiscardReason::TooShort(len))
        );
    }
}

#[test]
fn received_rdma_error_completes_its_xid_rfc8166_4_5() {
    let b = bytes(&[7, 1, 64, 4, 2]);
    let v = receive(&b, &ReceivePolicy::default());
    assert_eq!(v, Verdict::PeerError { xid: 7, error: PeerError::Chunk });
    // ERR_VERS from a Linux server echoes our version 2; from libevpl, 1.
    for vers in [1, 2] {
        let b = bytes(&[7, vers, 64, 4, 1, 1, 1]);
        let v = receive(&b, &ReceivePolicy::default());
        assert_eq!(v, Verdict::PeerError { xid: 7, error: PeerError::Vers { vers, low: 1, high: 1 } });
    }
}

#[test]
fn undecodable_rdma_error_is_discarded_silently_rfc8166_4_5() {
    for w in
        [vec![7, 1, 1, 4], vec![7, 1, 1, 4, 3], vec![7, 1, 1, 4, 1, 1], vec![7, 1, 1, 4, 1, 2, 1], vec![7, 2, 1, 4, 2]]
    {
        assert_eq!(
            receive(&bytes(&w), &ReceivePolicy::default()),
            Verdict::Discard(DiscardReason::UndecodableError),
            "{w:?}"
        );
    }
}

#[test]
fn read_positions_must_be_multiples_of_four_rfc8166_3_4_5() {
    let mut w = vec![7, 1, 1, 0, 1, 6, 9, 100, 0, 0, 0, 0, 0];
    w.extend(rpc_call(7));
    let b = bytes(&w);
    let v = receive(&b, &ReceivePolicy::default());
    assert!(matches!(v, Verdict::Reply { reason: HeaderError::MisalignedPosition(6), .. }));
}

#[test]
fn read_segments_group_into_chunks_by_position_rfc8166_3_4_5() {
    // Two segments at 8 (one chunk), one at 200.
    let mut w = vec![7, 1, 1, 0];
    w.extend([1, 8, 1, 100, 0, 0x1000, 1, 8, 2, 50, 0, 0x2000, 1, 200, 3, 10, 0, 0x3000, 0, 0, 0]);
    w.extend(rpc_call(7));
    let b = bytes(&w);
    let h = Header::parse(&b, &HeaderLimits::default()).unwrap();
    let chunks: Vec<_> = h.read_chunks().map(|c| (c.position(), c.segment_count(), c.len())).collect();
    assert_eq!(chunks, [(8, 2, 150), (200, 1, 10)]);
    let handles: Vec<u32> = h.read_chunks().next().unwrap().segments().map(|s| s.handle).collect();
    assert_eq!(handles, [1, 2]);
    assert!(h.position_zero_chunk().is_none());
}

#[test]
fn overlapping_or_scattered_read_chunks_get_err_chunk() {
    let policy = ReceivePolicy::default();
    // Chunk at 8 of 100 bytes, then one at 52: inside the first.
    let mut w = vec![7, 1, 1, 0, 1, 8, 1, 100, 0, 0, 1, 52, 2, 10, 0, 0, 0, 0, 0];
    w.extend(rpc_call(7));
    assert!(matches!(
        receive(&bytes(&w), &policy),
        Verdict::Reply { reason: HeaderError::OverlappingReadChunks { .. }, .. }
    ));
    // Segments of the chunk at 8 not together: 8, 200, 8.
    let mut w = vec![7, 1, 1, 0, 1, 8, 1, 4, 0, 0, 1, 200, 2, 4, 0, 0, 1, 8, 3, 4, 0, 0, 0, 0, 0];
    w.extend(rpc_call(7));
    assert!(matches!(
        receive(&bytes(&w), &policy),
        Verdict::Reply { reason: HeaderError::OverlappingReadChunks { .. }, .. }
    ));
}

#[test]
fn replies_must_have_an_empty_read_list_draft_5_3_1() {
    // RDMA_MSG carrying an RPC REPLY (msg_type 1) with a read chunk.
    let w = [7, 1, 1, 0, 1, 8, 1, 4, 0, 0, 0, 0, 0, 7, 1, 0, 0];
    let b = bytes(&w);
    let v = receive(&b, &ReceivePolicy::default());
    assert!(matches!(v, Verdict::Reply { reason: HeaderError::ReplyWithReadList, .. }));
}

#[test]
fn chunk_longer_than_the_ulp_allows_gets_err_chunk_rfc8166_3_4_4() {
    let policy = ReceivePolicy { limits: HeaderLimits::default().max_chunk_len(1 << 20), ..Default::default() };
    let mut w = vec![7, 1, 1, 0, 0, 1, 2, 1, 1 << 20, 0, 0, 2, 1, 0, 0, 0, 0];
    w.extend(rpc_call(7));
    assert!(matches!(receive(&bytes(&w), &policy), Verdict::Reply { reason: HeaderError::ChunkTooLong { .. }, .. }));
    // Segment lengths whose sum overflows 32 bits are summed in 64.
    let mut w = vec![7, 1, 1, 0, 0, 1, 2, 1, u32::MAX, 0, 0, 2, u32::MAX, 0, 0, 0, 0];
    w.extend(rpc_call(7));
    let strict =
        ReceivePolicy { limits: HeaderLimits::default().max_chunk_len(u64::from(u32::MAX)), ..Default::default() };
    assert!(matches!(
        receive(&bytes(&w), &strict),
        Verdict::Reply { reason: HeaderError::ChunkTooLong { len, .. }, .. } if len == 2 * u64::from(u32::MAX)
    ));
}

#[test]
fn error_replies_are_20_and_28_bytes() {
    assert_eq!(ErrorReply::err_chunk(1, Version::ONE, 1).as_bytes().len(), 20);
    assert_eq!(ErrorReply::err_vers(1, Version::ONE, 1, Version::ONE, Version::ONE).as_bytes().len(), 28);
    // ORACLES.md's rpcgen reference: ERR_VERS(1,1), xid 0x01020304, credit 32.
    assert_eq!(
        words(ErrorReply::err_vers(0x0102_0304, Version::ONE, 32, Version::ONE, Version::ONE).as_bytes()),
        [0x0102_0304, 1, 32, 4, 1, 1, 1]
    );
}

#[test]
fn rdma_msg_with_position_zero_read_chunk_gets_err_chunk_rfc8166_3_5_3() {
    let mut w = vec![7, 1, 1, 0, 1, 0, 9, 64, 0, 0, 0, 0, 0];
    w.extend(rpc_call(7));
    let b = bytes(&w);
    let v = receive(&b, &ReceivePolicy::default());
    assert!(matches!(v, Verdict::Reply { reason: HeaderError::PositionZeroInRdmaMsg, .. }), "{v:?}");
}
