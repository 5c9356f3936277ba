//! Round-trip helpers shared by the tests of every crate whose types
//! `xdr-spec` generates (included with `#[path]`, so there is one copy).

#![allow(dead_code, unused_macros)]

use proptest::prelude::*;
use xdr_spec_rt::Xdr;

/// Words biased towards the values XDR gives meaning to (booleans, small
/// counts, enum values), so that random input often decodes.
pub fn words() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![4 => 0u32..5, 1 => Just(7u32), 1 => Just(42u32), 1 => Just(0xFFFF_FFF9u32), 1 => any::<u32>()],
        0..48,
    )
    .prop_map(|ws| ws.iter().flat_map(|w| w.to_be_bytes()).collect())
}

/// Decode, and if that succeeds, re-encode: the bytes must be the ones
/// consumed, and `encoded_len` must say so first. Returns whether it decoded.
pub fn decode_reencode<'a, T: Xdr<'a> + PartialEq + core::fmt::Debug>(bytes: &'a [u8]) -> bool {
    let Ok((v, used)) = T::decode(bytes) else { return false };
    assert_eq!(v.encoded_len(), used, "{v:?}");
    let mut out = vec![0u8; used];
    assert_eq!(v.encode(&mut out), Ok(used));
    assert_eq!(&out[..], &bytes[..used], "{v:?}");
    true
}

/// One proptest per type: random word streams that decode re-encode exactly.
macro_rules! roundtrip_props {
    ($($name:ident: $ty:ty),* $(,)?) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]
            $(
                #[test]
                fn $name(bytes in support::words()) {
                    support::decode_reencode::<$ty>(&bytes);
                }
            )*
        }
    };
}

/// Encode into a buffer of exactly `encoded_len` bytes, decode, compare;
/// evaluates to the encoding.
macro_rules! roundtrip {
    ($t:ty, $v:expr) => {{
        let v: $t = $v;
        let mut buf = vec![0u8; v.encoded_len()];
        assert_eq!(v.encode(&mut buf), Ok(buf.len()));
        let (back, used) = <$t>::decode(&buf).expect("decode");
        assert_eq!(used, buf.len());
        assert_eq!(back, v);
        buf
    }};
}
