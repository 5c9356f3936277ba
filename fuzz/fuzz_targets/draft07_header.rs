//! A draft-ietf-nfsv4-rpcrdma-version-two-07 header on arbitrary bytes (issue 27): the
//! `rpcrdma_common` prefix, then the body its `rdma_htype` names (`rpcrdma_v2::draft07`).
//! The codec is canonical (booleans 0 or 1, exact counts, zero padding), so whenever a
//! body decodes, encoding it again gives back exactly the bytes consumed, and
//! `encoded_len` is that length; limits only ever turn a success into LimitExceeded; and no
//! length the input claims is allocated (`bounded_alloc`). The validated view
//! (`draft07::header::Header`) judges the same bytes: what it accepts lies within the input
//! and the limits, and what it refuses gets the answer section 7 gives.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;

use rpcrdma_v2::draft07::header::{Answer, Header, HeaderError, PREFIX_LEN};
use rpcrdma_v2::draft07::verdict::{self, Verdict};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::rt::{Error, Limits, Xdr};
use rpcrdma_v2::HeaderLimits;

/// The validated view under the default limits and tight ones: an accepted header's payload
/// is the input after it, its chunks within the limits; a refusal is answered as section 7
/// says (a short message never, an RDMA2_ERROR never).
fn view(data: &[u8]) {
    let supported = Rpcrdma2ErrVers { rdma_vers_low: 1, rdma_vers_high: 2 };
    for limits in [HeaderLimits::default(), HeaderLimits::default().max_segments(2).max_chunk_len(64)] {
        match Header::parse(data, &limits) {
            Ok(h) => {
                assert!(h.header_len() >= PREFIX_LEN && h.header_len() <= data.len());
                assert_eq!(h.payload(), &data[h.header_len()..]);
                let lists = h.chunk_lists();
                let segments = h.call_chunk().len()
                    + lists.reads.len()
                    + lists.writes.iter().map(|w| w.target.len()).sum::<usize>()
                    + lists.reply.map_or(0, |r| r.target.len());
                assert!(segments <= limits.max_segments as usize, "{segments} segments accepted");
                assert!(h.read_chunks().all(|c| c.len() <= limits.max_chunk_len));
            }
            Err(e) => {
                let is_error = data.get(12..16) == Some(&RDMA2_ERROR.to_be_bytes()[..]);
                let answer = e.answer(supported, is_error);
                if data.len() < PREFIX_LEN || is_error {
                    assert_eq!(answer, Answer::Drop, "{e}");
                } else {
                    assert!(matches!(answer, Answer::Error(_)), "{e}");
                    assert!(!matches!(e, HeaderError::TooShort { .. }));
                }
            }
        }
    }
}

/// Decodes `T` from `data`; when it decodes, checks the round trip and the limits.
fn canonical<'a, T: Xdr<'a> + PartialEq + std::fmt::Debug>(data: &'a [u8]) {
    let limits = Limits::default().max_list_entries(17).max_array_len(16);
    let Ok((value, consumed)) = T::decode(data) else {
        assert!(T::decode_with_limits(data, limits).is_err());
        return;
    };
    assert!(consumed <= data.len());
    assert_eq!(value.encoded_len(), consumed, "encoded_len differs from the bytes consumed");
    let out = value.to_vec().expect("what decoded encodes");
    assert_eq!(&out[..], &data[..consumed], "re-encoding is not the consumed prefix");
    match T::decode_with_limits(data, limits) {
        Ok(limited) => assert_eq!(limited, (value, consumed)),
        Err(e) => assert!(matches!(e, Error::LimitExceeded { .. }), "{e:?}"),
    }
}

/// The verdict on the same bytes: an answer echoes the message's XID and version word and is
/// an RDMA2_ERROR; an error message is never answered.
fn judged(data: &[u8]) {
    match verdict::receive(data, &verdict::Policy::default()) {
        Verdict::Reply { reply, .. } => {
            let r = reply.as_bytes();
            assert_eq!((&r[..8], &r[12..16]), (&data[..8], &RDMA2_ERROR.to_be_bytes()[..]));
            assert_ne!(data.get(12..16), Some(&RDMA2_ERROR.to_be_bytes()[..]), "an error answered");
        }
        Verdict::Accept(h) => assert_eq!(h.payload(), &data[h.header_len()..]),
        Verdict::PeerError { xid, .. } => assert_eq!(Some(&xid.to_be_bytes()[..]), data.get(..4)),
        Verdict::Discard(_) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    view(data);
    judged(data);
    let Ok((prefix, used)) = RpcrdmaCommon::decode(data) else {
        assert!(data.len() < 16, "any 16 bytes are a prefix");
        return;
    };
    assert_eq!(used, 16);
    let body = &data[used..];
    match prefix.rdma_htype {
        RDMA2_ERROR => canonical::<Rpcrdma2HdrError>(body),
        RDMA2_CONNPROP_MIDDLE | RDMA2_CONNPROP_FINAL => canonical::<Rpcrdma2HdrConnprop>(body),
        RDMA2_CALL_EXTERNAL => canonical::<Rpcrdma2HdrCallExternal>(body),
        RDMA2_CALL_MIDDLE => canonical::<Rpcrdma2HdrCallMiddle>(body),
        RDMA2_CALL_INLINE => canonical::<Rpcrdma2HdrCallInline>(body),
        RDMA2_REPLY_EXTERNAL => canonical::<Rpcrdma2HdrReplyExternal>(body),
        RDMA2_REPLY_MIDDLE => canonical::<Rpcrdma2HdrReplyMiddle>(body),
        RDMA2_REPLY_INLINE => canonical::<Rpcrdma2HdrReplyInline>(body),
        // RDMA2_GRANT has no body; an unknown type is the receiver's to refuse
        // (RDMA2_ERR_INVAL_HTYPE, section 7.1.3), not the codec's.
        _ => {}
    }
    // Every body type is also tried on the bytes after the prefix whatever the type says,
    // so that each decoder sees every input.
    canonical::<Rpcrdma2HdrError>(body);
    canonical::<Rpcrdma2HdrConnprop>(body);
    canonical::<Rpcrdma2HdrCallExternal>(body);
    canonical::<Rpcrdma2HdrCallInline>(body);
    canonical::<Rpcrdma2HdrReplyExternal>(body);
    canonical::<Rpcrdma2HdrReplyInline>(body);
});
