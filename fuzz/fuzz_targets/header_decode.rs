//! `RdmaMsg::decode` on arbitrary bytes. The codec is canonical (booleans are
//! 0 or 1, counts are exact, there is no padding in a v1 header), so whenever
//! a header decodes, encoding it again must give back exactly the bytes the
//! decoder consumed, and `encoded_len` must equal that length.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;
use rpcrdma_v1::rt::{Limits, Xdr};
use rpcrdma_v1::xdr::RdmaMsg;

fuzz_target!(|data: &[u8]| {
    let Ok((msg, consumed)) = RdmaMsg::decode(data) else {
        // A header that does not decode without limits does not decode with
        // them either.
        assert!(RdmaMsg::decode_with_limits(data, Limits::default().max_list_entries(17).max_array_len(16)).is_err());
        return;
    };
    assert!(consumed <= data.len());
    assert_eq!(msg.encoded_len(), consumed, "encoded_len differs from the bytes consumed");
    let mut out = vec![0u8; consumed];
    assert_eq!(msg.encode(&mut out), Ok(consumed));
    assert_eq!(&out[..], &data[..consumed], "re-encoding is not the consumed prefix");
    // A buffer one byte short is refused, not overrun.
    if consumed > 0 {
        assert!(msg.encode(&mut out[..consumed - 1]).is_err());
    }
    // Decoding the re-encoding gives the same value and length.
    let (again, n) = RdmaMsg::decode(&out).expect("the re-encoding decodes");
    assert_eq!((again, n), (msg, consumed));
    // Limits only ever turn a success into LimitExceeded, never into another
    // result.
    match RdmaMsg::decode_with_limits(data, Limits::default().max_list_entries(17).max_array_len(16)) {
        Ok(limited) => assert_eq!(limited, (msg, consumed)),
        Err(e) => assert!(matches!(e, rpcrdma_v1::rt::Error::LimitExceeded { .. }), "{e:?}"),
    }
});
