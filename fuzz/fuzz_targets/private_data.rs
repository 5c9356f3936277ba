//! RFC 8797 private data from arbitrary received bytes: never a panic;
//! whatever is found re-encodes to the eight bytes it was read from (reserved
//! bits aside), and sizes are always within 1024..=262144.
#![no_main]

use cm_private_data::{negotiate, PrivateData, FORMAT_IDENTIFIER, MAX_INLINE, MIN_INLINE};
use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;

fuzz_target!(|data: &[u8]| {
    let pd = PrivateData::from_received(data);
    assert!((MIN_INLINE..=MAX_INLINE).contains(&pd.send_size()));
    assert!((MIN_INLINE..=MAX_INLINE).contains(&pd.receive_size()));
    if let Some(found) = PrivateData::find(data) {
        let at = data.windows(8).position(|w| PrivateData::decode(w) == Some(found)).expect("found somewhere");
        let mut expect = [0u8; 8];
        expect.copy_from_slice(&data[at..at + 8]);
        expect[5] &= 0x01;
        assert_eq!(found.encode(), expect);
        assert_eq!(&expect[..4], &FORMAT_IDENTIFIER.to_be_bytes());
    }
    let n = negotiate(&pd, &PrivateData::default());
    assert!(n.client_to_server <= pd.send_size() && n.server_to_client <= pd.receive_size());
});
