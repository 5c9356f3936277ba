//! draft-ietf-nfsv4-rpcrdma-version-two-07 section 7 through `draft07::verdict::receive`: what
//! a receiver does with each message, every answer checked word by word.

use rpcrdma_v2::draft07::header::HeaderType;
use rpcrdma_v2::draft07::verdict::{receive, Discard, Policy, Verdict};
use rpcrdma_v2::draft07::xdr::*;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The words of the answer `message` draws under `policy`.
fn reply_words(message: &[u32], policy: &Policy) -> Vec<u32> {
    let bytes = words(message);
    let v = receive(&bytes, policy);
    let Verdict::Reply { reply, .. } = v else { panic!("not answered: {v:?}") };
    reply.as_bytes().chunks(4).map(|w| u32::from_be_bytes(w.try_into().unwrap())).collect()
}

/// Section 7: an RDMA2_ERROR's "rdma_xid field MUST contain the same XID that was in the
/// rdma_xid field in the ingress request", its "rdma_vers field MUST contain the same version",
/// its rdma_credit "the credit values in effect", and its rdma_htype "MUST contain the value
/// RDMA2_ERROR".
#[test]
fn section_7_an_answer_echoes_the_xid_and_version_and_carries_our_credit() {
    let policy = Policy { credit: 17, ..Policy::default() };
    // Version 3: RDMA2_ERR_VERS with the range, version word 3 echoed.
    assert_eq!(reply_words(&[0x51, 3, 1, 10], &policy), [0x51, 3, 17, RDMA2_ERROR, RDMA2_ERR_VERS, 2, 2]);
    // An unknown header type: RDMA2_ERR_INVAL_HTYPE.
    assert_eq!(reply_words(&[0x52, 2, 1, 42], &policy), [0x52, 2, 17, RDMA2_ERROR, RDMA2_ERR_INVAL_HTYPE]);
    // A body that does not decode: RDMA2_ERR_BAD_XDR.
    assert_eq!(
        reply_words(&[0x53, 2, 1, RDMA2_CALL_INLINE, 0, 1], &policy),
        [0x53, 2, 17, RDMA2_ERROR, RDMA2_ERR_BAD_XDR]
    );
}

/// Section 7: "When a peer receives an RDMA2_ERROR message type with an unrecognized or
/// unsupported value in its rdma_err field, it MUST silently discard the message"; one with a
/// code of section 7 ends its XID's transaction.
#[test]
fn section_7_an_unrecognized_error_code_is_discarded_and_a_known_one_ends_its_transaction() {
    for code in [0, 12, 99, 101, u32::MAX] {
        let m = words(&[7, 2, 1, RDMA2_ERROR, code]);
        assert_eq!(receive(&m, &Policy::default()), Verdict::Discard(Discard::UnknownErrorCode(code)));
    }
    for (body, error) in [
        (vec![RDMA2_ERR_INVAL_CONT], Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_INVAL_CONT }),
        (vec![RDMA2_ERR_SEGMENTS, 16], Rpcrdma2HdrError::Rdma2ErrSegments(16)),
        (vec![RDMA2_ERR_SYSTEM], Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_SYSTEM }),
    ] {
        let mut m = words(&[7, 2, 1, RDMA2_ERROR]);
        m.extend(words(&body));
        assert_eq!(receive(&m, &Policy::default()), Verdict::PeerError { xid: 7, error });
    }
}

/// Section 7 (and RFC 8166 section 4.5): an RDMA2_ERROR is never answered, even one that does
/// not decode; a message shorter than the prefix is dropped with no answer.
#[test]
fn section_7_errors_and_short_messages_are_never_answered() {
    let m = words(&[7, 2, 1, RDMA2_ERROR, RDMA2_ERR_SEGMENTS]);
    assert_eq!(receive(&m, &Policy::default()), Verdict::Discard(Discard::ErrorNotTaken));
    for len in 0..16 {
        assert_eq!(receive(&[0u8; 16][..len], &Policy::default()), Verdict::Discard(Discard::TooShort(len)));
    }
}

#[test]
fn a_valid_header_is_accepted() {
    let m = words(&[7, 2, 1, RDMA2_GRANT]);
    assert!(matches!(receive(&m, &Policy::default()), Verdict::Accept(h) if h.header_type() == HeaderType::Grant));
}
