//! Maps keyed by the XIDs this side chose: a client's calls in progress, looked up several
//! times per call (its waiter, its slot in the core, the requester's record of it).
//!
//! They hash an XID with one multiplication instead of the standard library's SipHash, which
//! was a sixth of the instructions of an async call on the client's thread (`valgrind
//! --tool=callgrind`, docs/benchmarks.md). SipHash is keyed so that nobody can choose keys
//! that collide; here no peer chooses a key: the client draws the XIDs it inserts, a peer
//! only names XIDs in lookups (a reply's), which miss or hit one of ours, and every map is
//! bounded by the calls in progress. A server's maps, keyed by its peers' XIDs, keep SipHash.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from XIDs this side chose ([`XidHasher`]).
pub(crate) type XidMap<V> = HashMap<u32, V, BuildHasherDefault<XidHasher>>;

/// An empty [`XidMap`] with room for `n` entries.
pub(crate) fn with_capacity<V>(n: usize) -> XidMap<V> {
    XidMap::with_capacity_and_hasher(n, BuildHasherDefault::default())
}

/// 2^64 divided by the golden ratio, odd: multiplying by it spreads consecutive keys over
/// the high bits (Fibonacci hashing, Knuth TAOCP vol. 3, 6.4).
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hashes a `u32` key with one multiplication; its `finish` folds the high bits into the low
/// ones, which pick the bucket (the low bits alone of a client's XIDs may share a residue:
/// a client of several connections picks one by the XID).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct XidHasher(u64);

impl Hasher for XidHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(SPREAD);
        }
    }

    fn write_u32(&mut self, x: u32) {
        self.0 = (self.0 ^ u64::from(x)).wrapping_mul(SPREAD);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Consecutive XIDs, and XIDs that share a residue (every fourth), land in distinct
    /// buckets of a table their size, and differ in the top seven bits the table's tags use.
    #[test]
    fn consecutive_and_strided_xids_spread_over_buckets_and_tags() {
        let build = BuildHasherDefault::<XidHasher>::default();
        for stride in [1u32, 2, 4, 64] {
            let hashes: Vec<u64> = (0..256u32).map(|i| build.hash_one(1000 + i * stride)).collect();
            let buckets: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 255).collect();
            let tags: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
            assert!(buckets.len() > 128, "stride {stride}: {} buckets of 256", buckets.len());
            assert!(tags.len() > 64, "stride {stride}: {} tags of 128", tags.len());
        }
    }
}
