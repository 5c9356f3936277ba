//! Maps keyed by numbers this side chose: a client's calls in progress by XID, looked up
//! several times per call (its waiter, its slot in the core, the requester's record of it),
//! and a server loop's connections by the id it gave each.
//!
//! They hash a key with one multiplication instead of the standard library's SipHash, which
//! was a sixth of the instructions of an async call on the client's thread, and about 4 % of
//! the server loop's (`valgrind --tool=callgrind`, docs/benchmarks.md). SipHash is keyed so that
//! nobody can choose keys that collide; here no peer chooses a key: the client draws the XIDs
//! it inserts and the server numbers its connections, a peer only names XIDs in lookups (a
//! reply's), which miss or hit one of ours, and every map is bounded by the calls in progress
//! or the connections accepted. Maps keyed by a peer's XIDs (the responder's) keep SipHash.
//!
//! "The client draws the XIDs" means the application using the client: `Client::call` takes
//! the XID in the message it is given. An application that forwards XIDs a peer chose (a
//! proxy passing its own callers' XIDs through) lets that peer pick keys that collide here:
//! lookups then walk as many entries as collide, at most the calls in progress (the map is
//! bounded by them), so it is slower, not unbounded. Such an application should draw fresh
//! XIDs for the calls it makes, as an RPC client does.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from XIDs this side chose ([`OwnKeyHasher`]).
pub(crate) type XidMap<V> = HashMap<u32, V, BuildHasherDefault<OwnKeyHasher>>;

/// A map from ids this side gave (a server loop's connections).
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<OwnKeyHasher>>;

/// An empty [`XidMap`] with room for `n` entries.
pub(crate) fn with_capacity<V>(n: usize) -> XidMap<V> {
    XidMap::with_capacity_and_hasher(n, BuildHasherDefault::default())
}

/// 2^64 divided by the golden ratio, odd: multiplying by it spreads consecutive keys over
/// the high bits (Fibonacci hashing, Knuth TAOCP vol. 3, 6.4).
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hashes an integer key with one multiplication; its `finish` folds the high bits into the
/// low ones, which pick the bucket (the low bits alone of a client's XIDs may share a
/// residue: a client of several connections picks one by the XID).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OwnKeyHasher(u64);

impl Hasher for OwnKeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(SPREAD);
        }
    }

    fn write_u32(&mut self, x: u32) {
        self.0 = (self.0 ^ u64::from(x)).wrapping_mul(SPREAD);
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(SPREAD);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// Calls at once a client's maps keyed by XID have room for from the start (a lane's waiting
/// callers, calls prepared ahead and posted, callers to wake; the core's slots; the
/// requester's calls): its steady state allocates nothing under a load of up to this many
/// callers, where growing the maps at the first peak (or again at a later, higher one) would.
/// More calls at once still work; the maps grow then.
pub(crate) const CALLS_AT_ONCE: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Consecutive XIDs and ids, and those that share a residue (every fourth), land in
    /// distinct buckets of a table their size, and differ in the top seven bits the table's
    /// tags use.
    #[test]
    fn consecutive_and_strided_keys_spread_over_buckets_and_tags() {
        let build = BuildHasherDefault::<OwnKeyHasher>::default();
        for stride in [1u32, 2, 4, 64] {
            let xids = (0..256u32).map(|i| build.hash_one(1000 + i * stride));
            let ids = (0..256u64).map(|i| build.hash_one(1 + u64::from(stride) * i));
            check(stride, xids.collect());
            check(stride, ids.collect());
        }
    }

    /// 256 keys' hashes: over half the 256 buckets, and over half the 128 tags.
    fn check(stride: u32, hashes: Vec<u64>) {
        let buckets: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 255).collect();
        let tags: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(buckets.len() > 128, "stride {stride}: {} buckets of 256", buckets.len());
        assert!(tags.len() > 64, "stride {stride}: {} tags of 128", tags.len());
    }
}
