//! Unpredictable keys and addresses without a `rand` dependency.
//!
//! Secrets come from std's `RandomState`, which the standard library seeds from the OS per
//! process. rkeys and lkeys are a keyed bijection of a counter, so within a process a key is
//! never issued twice (until 2^32 registrations), which is what "rkeys change on
//! re-registration" needs, while consecutive keys look random. This stops accidental reliance
//! on predictable keys; it is not a cryptographic boundary.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

struct Secrets {
    hasher: RandomState,
    key: [u32; 4],
}

fn secrets() -> &'static Secrets {
    static SECRETS: OnceLock<Secrets> = OnceLock::new();
    SECRETS.get_or_init(|| {
        let hasher = RandomState::new();
        let mut key = [0; 4];
        for (i, k) in key.iter_mut().enumerate() {
            let mut h = hasher.build_hasher();
            h.write_u64(u64::MAX - i as u64);
            *k = h.finish() as u32;
        }
        Secrets { hasher, key }
    })
}

/// A keyed permutation of u32: every step (xor, add, multiply by an odd constant,
/// `x ^= x >> s`) is invertible, so distinct inputs give distinct outputs.
fn permute(x: u32, k: &[u32; 4]) -> u32 {
    let mut x = x ^ k[0];
    x = x.wrapping_mul(0x9E37_79B1);
    x ^= x >> 16;
    x = x.wrapping_add(k[1]);
    x = x.wrapping_mul(0x85EB_CA6B);
    x ^= x >> 13;
    x = x.wrapping_add(k[2]);
    x = x.wrapping_mul(0xC2B2_AE35);
    x ^= x >> 16;
    x ^ k[3]
}

/// A fresh memory key (rkeys and lkeys share the space, as on most HCAs).
pub(crate) fn next_key() -> u32 {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    permute(COUNTER.fetch_add(1, Ordering::Relaxed), &secrets().key)
}

/// A random u64.
pub(crate) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = secrets().hasher.build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// A page-aligned base address in the lower user half of a 48-bit address space, like a
/// heap address: random, and far enough from the top that base + length never overflows.
pub(crate) fn random_base() -> u64 {
    0x1000_0000_0000 + ((random_u64() % 0x6000_0000_0000) & !0xfff)
}

/// A process-unique identifier (regions, protection domains).
pub(crate) fn next_id() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn permute_is_injective_on_a_sample() {
        let k = secrets().key;
        let set: HashSet<u32> = (0..200_000u32).map(|x| permute(x, &k)).collect();
        assert_eq!(set.len(), 200_000);
    }

    #[test]
    fn bases_are_page_aligned_and_bounded() {
        for _ in 0..1000 {
            let b = random_base();
            assert_eq!(b & 0xfff, 0);
            assert!((0x1000_0000_0000..0x7000_0000_0000).contains(&b));
        }
    }
}
