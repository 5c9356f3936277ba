//! Registered copies of the results a server's handler lends
//! ([`LentResults`](crate::server::LentResults)): the source of the RDMA Writes that carry
//! them into the requester's Write chunks.
//!
//! A lent result is an `Arc<[u8]>` the handler keeps (a cached file block, a stored value).
//! Its bytes are copied into memory registered with the connection's protection domain the
//! first time the connection sends it; every later reply lending the same `Arc` writes from
//! that copy, so that a reply copies none of its bytes: the RDMA Write is the one transfer,
//! as with raw verbs. The cache holds a clone of each `Arc` it keeps a copy of, so that the
//! allocation cannot be freed and reused for other bytes while its copy is kept, and an
//! `Arc<[u8]>`'s bytes cannot change. A copy has no remote access: the peer only receives
//! Writes from it.
//!
//! What this costs: up to [`LENT_BYTES_KEPT`] of pinned memory per connection (as for the chunk
//! regions it keeps, outside a server's memory budget, counted against `RLIMIT_MEMLOCK`), a
//! copy per connection of a result lent on several, and the handler's `Arc`s kept alive by
//! the cache after the handler let them go, until sends of other results push them out.

use std::sync::{Arc, Mutex, PoisonError};

use rpcrdma_verbs::{Access, MemoryRegion, ProtectionDomain};

use super::chunk_pool::make_room;

/// The most bytes of lent results' copies a connection keeps registered: a 1 MiB result's and
/// some smaller ones, as for the chunk regions it keeps ([`super::chunk_pool`]).
pub(super) const LENT_BYTES_KEPT: usize = 2 << 20;

/// The most lent results' copies a connection keeps.
pub(super) const LENT_SOURCES_KEPT: usize = 8;

/// Registered copies of lent results, the most recently used last, within
/// [`LENT_BYTES_KEPT`] and [`LENT_SOURCES_KEPT`].
pub(super) struct LentSources<R> {
    kept: Mutex<Vec<(Arc<[u8]>, R)>>,
}

/// A lent result's registered source, and whether it was copied for this reply.
pub(super) struct LentSource<R> {
    pub(super) region: R,
    pub(super) copied: bool,
}

impl<R: MemoryRegion> LentSources<R> {
    pub(super) fn new() -> Self {
        LentSources { kept: Mutex::new(Vec::new()) }
    }

    /// The registered copy of `result`: the one kept when this connection sent the same `Arc`
    /// before, or a new one, kept within the bounds (the least recently used let go first; one
    /// larger than [`LENT_BYTES_KEPT`] alone serves this reply only).
    pub(super) fn source<P: ProtectionDomain<Region = R>>(
        &self,
        pd: &P,
        result: &Arc<[u8]>,
    ) -> rpcrdma_verbs::Result<LentSource<R>> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = kept.iter().position(|(r, _)| Arc::ptr_eq(r, result)) {
            let entry = kept.remove(i);
            let region = entry.1.clone();
            kept.push(entry);
            return Ok(LentSource { region, copied: false });
        }
        drop(kept);
        // (Registered outside the lock: on real verbs it pins pages, a system call.)
        let region = pd.register(result.to_vec(), Access::empty())?;
        if result.len() <= LENT_BYTES_KEPT {
            self.keep(result.clone(), region.clone());
        }
        Ok(LentSource { region, copied: true })
    }

    fn keep(&self, result: Arc<[u8]>, region: R) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.iter().any(|(r, _)| Arc::ptr_eq(r, &result)) {
            // Another reply copied the same result meanwhile: one copy is kept.
            return;
        }
        // Least recently used first: `source` moves what it finds to the end.
        let bytes = |(_, r): &(Arc<[u8]>, R)| r.len();
        let evicted = make_room(&mut kept, region.len(), bytes, (LENT_SOURCES_KEPT, LENT_BYTES_KEPT));
        kept.push((result, region));
        drop(kept);
        // Deregistered here, outside the lock (a Write still posted keeps its own handle).
        drop(evicted);
    }

    /// How many copies are kept, and their bytes.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        (kept.len(), kept.iter().map(|(_, r)| r.len()).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpcrdma_verbs::{Backend, InProcess};

    fn result(len: usize, byte: u8) -> Arc<[u8]> {
        vec![byte; len].into()
    }

    #[test]
    fn the_same_arc_is_copied_once_and_its_copy_holds_its_bytes() {
        let pd = InProcess.alloc_pd().unwrap();
        let sources = LentSources::new();
        let a = result(4096, 7);
        let first = sources.source(&pd, &a).unwrap();
        assert!(first.copied);
        assert_eq!(*first.region.bytes(), *a);
        let again = sources.source(&pd, &a.clone()).unwrap();
        assert!(!again.copied);
        assert_eq!(again.region.addr(), first.region.addr());
        // Equal bytes in another allocation are another result: copied on their own.
        assert!(sources.source(&pd, &result(4096, 7)).unwrap().copied);
    }

    #[test]
    fn the_least_recently_used_goes_first_and_the_bounds_hold() {
        let pd = InProcess.alloc_pd().unwrap();
        let sources = LentSources::new();
        let results: Vec<_> = (0..LENT_SOURCES_KEPT as u8).map(|i| result(64, i)).collect();
        for r in &results {
            sources.source(&pd, r).unwrap();
        }
        // The first used again: now the second is the least recently used.
        assert!(!sources.source(&pd, &results[0]).unwrap().copied);
        sources.source(&pd, &result(64, 99)).unwrap();
        assert_eq!(sources.held().0, LENT_SOURCES_KEPT);
        assert!(!sources.source(&pd, &results[0]).unwrap().copied);
        assert!(sources.source(&pd, &results[1]).unwrap().copied);

        // Bytes: two results of 1 MiB fill the bound, a third lets the oldest go.
        let big: Vec<_> = (0..3).map(|i| result(1 << 20, i)).collect();
        for b in &big {
            sources.source(&pd, b).unwrap();
        }
        assert!(sources.held().1 <= LENT_BYTES_KEPT);
        assert!(!sources.source(&pd, &big[2]).unwrap().copied);
        assert!(sources.source(&pd, &big[0]).unwrap().copied);
    }

    #[test]
    fn a_result_over_the_bound_is_not_kept() {
        let pd = InProcess.alloc_pd().unwrap();
        let sources = LentSources::new();
        let huge = result(LENT_BYTES_KEPT + 4, 1);
        assert!(sources.source(&pd, &huge).unwrap().copied);
        assert!(sources.source(&pd, &huge).unwrap().copied);
        assert_eq!(sources.held(), (0, 0));
    }
}
