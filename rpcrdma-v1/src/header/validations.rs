//! How many headers were validated, for tests that check a received message is judged once
//! (issue 25, "parse once"). Counted only with the `count-validations` feature, which only
//! tests turn on; without it [`note`] does nothing and [`total`] stays 0.
//!
//! ```
//! use rpcrdma_v1::header::{validations, Header, HeaderLimits};
//! let before = validations::total();
//! let bytes: Vec<u8> = [7u32, 1, 32, 0, 0, 0, 0, 7, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
//! Header::parse(&bytes, &HeaderLimits::default()).unwrap();
//! let counted = cfg!(feature = "count-validations") as u64;
//! assert!(validations::total() - before >= counted);
//! ```

#[cfg(feature = "count-validations")]
static TOTAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One header's chunk lists decoded and checked: Version One's and draft-cel-00's
/// ([`Header::parse_chunk_lists`](super::Header::parse_chunk_lists)), and -07's (its own
/// `Header::parse`, which calls this).
#[inline]
pub fn note() {
    #[cfg(feature = "count-validations")]
    TOTAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Headers validated in this process so far (0 without the feature).
pub fn total() -> u64 {
    #[cfg(feature = "count-validations")]
    return TOTAL.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "count-validations"))]
    0
}
