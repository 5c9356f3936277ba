//! The registration cache: chunk memory a connection keeps registered between calls, and
//! what a call hands back of it ([`Landed`]), read where the Responder wrote it.
//!
//! Registering memory is what costs on real verbs (`ibv_reg_mr` pins and maps every page;
//! deregistering unpins them), so a buffer registered for one call's chunk serves the next
//! calls' too. What protects it from the peer between calls is not its registration but its
//! windows: a region here has Local Write only, the peer reaches it through a memory window
//! bound for one call and closed before the call completes (RFC 8166 section 4.5.4 and 8.1.3;
//! [`ChunkMemory::release`](super::ChunkMemory::release)), and each window has a fresh rkey.

use std::sync::{Mutex, PoisonError};

use smallvec::SmallVec;

use rpcrdma_verbs::{Access, Backend, MemoryRegion, ProtectionDomain};

/// The most bytes of registered chunk memory a connection keeps for reuse: one 1 MiB chunk's
/// worth and some smaller ones. A bound of its own, so that what a peer's chunk lengths make
/// the server register is not kept beyond it.
const CHUNK_BYTES_KEPT: usize = 2 << 20;

/// The most chunk regions a connection keeps.
const CHUNK_REGIONS_KEPT: usize = 8;

/// Registered chunk regions of a connection's earlier calls, within [`CHUNK_BYTES_KEPT`] and
/// [`CHUNK_REGIONS_KEPT`].
pub(super) struct ChunkPool<R> {
    kept: Mutex<Vec<R>>,
}

impl<R: MemoryRegion> ChunkPool<R> {
    pub(super) fn new() -> Self {
        ChunkPool { kept: Mutex::new(Vec::new()) }
    }

    /// A region of at least `len` bytes with Local Write (so that a window may grant the peer
    /// either Remote Read or Remote Write): the smallest kept one that holds `len`, or a fresh
    /// registration. A kept region's bytes are whatever its last call left there; only what
    /// this side copies in, or the peer or a local RDMA Read writes, is ever read of it.
    pub(super) fn take<P: ProtectionDomain<Region = R>>(&self, pd: &P, len: usize) -> rpcrdma_verbs::Result<R> {
        if len == 0 {
            // (Not worth a kept region, which any length fits.)
            return pd.register(Vec::new(), Access::LOCAL_WRITE);
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let best = kept.iter().enumerate().filter(|(_, r)| r.len() >= len).min_by_key(|(_, r)| r.len());
        if let Some(i) = best.map(|(i, _)| i) {
            // (`remove`, not `swap_remove`: `keep` lets go of the oldest first, by position.)
            return Ok(kept.remove(i));
        }
        drop(kept);
        // Zeroed by the allocator: fresh pages, touched only as they are written.
        pd.register(vec![0; len], Access::LOCAL_WRITE)
    }

    /// Keeps `region` for [`take`](ChunkPool::take), letting go of the regions kept longest
    /// ago as far as the bounds need (dropping the last handle deregisters a region); one
    /// larger than [`CHUNK_BYTES_KEPT`] alone is let go itself. Its windows must be closed.
    pub(super) fn keep(&self, region: R) {
        if region.is_empty() || region.len() > CHUNK_BYTES_KEPT {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        // Oldest first: `take` removes from anywhere, `keep` appends.
        let evicted = make_room(&mut kept, region.len(), R::len, (CHUNK_REGIONS_KEPT, CHUNK_BYTES_KEPT));
        kept.push(region);
        drop(kept);
        // Deregistered here, outside the lock.
        drop(evicted);
    }
}

/// Makes room in `kept`, oldest first (at the front), for one more entry of `len` bytes within
/// `most` entries and `bytes` in all (`len_of` gives an entry's bytes); returns the entries let
/// go, for the caller to drop (deregister) once it has released its lock. The one rule of the
/// connection's kept registrations: chunk regions here, lent results' copies in
/// [`super::lent_sources`].
pub(super) fn make_room<T>(
    kept: &mut Vec<T>,
    len: usize,
    len_of: impl Fn(&T) -> usize,
    (most, bytes): (usize, usize),
) -> Vec<T> {
    let mut held: usize = kept.iter().map(&len_of).sum::<usize>() + len;
    let mut out = 0;
    while kept.len() - out >= most || held > bytes {
        held -= len_of(&kept[out]);
        out += 1;
    }
    kept.drain(..out).collect()
}

/// One chunk's registered buffer and the chunk's length: the region may be longer, kept from a
/// larger call, and only its first `len` bytes are read and exposed through the call's window.
/// (rdma_rxe checks a window's accesses against the whole region under it, verbs' `rdma`
/// module says: there the peer could reach the rest of a kept region too, whose bytes are
/// ones this connection's earlier messages carried to or from that same peer, the cache being
/// the connection's own.)
#[derive(Debug)]
pub(super) struct ChunkRegion<R> {
    pub(super) region: R,
    pub(super) len: usize,
}

impl<R: MemoryRegion> ChunkRegion<R> {
    /// The region's bytes held for reading, with the chunk's length.
    fn bytes(&self) -> (R::Bytes<'_>, usize) {
        (self.region.bytes(), self.len)
    }
}

/// How many Write chunks a call's memory holds without allocating: an NFS READ has one.
pub(super) const WRITE_CHUNKS_INLINE: usize = 2;

/// Write chunk *i*'s buffer at index *i*; `None` for a chunk of zero bytes. Held inline up to
/// [`WRITE_CHUNKS_INLINE`] of them: a chunked call allocates nothing for them.
pub(super) type WriteChunks<R> = SmallVec<[Option<ChunkRegion<R>>; WRITE_CHUNKS_INLINE]>;

/// What the Responder wrote into a call's chunks, handed back after release: Write chunk *i*'s
/// buffer at index *i* (none for a chunk with no buffer), and the Reply chunk's. The buffers
/// are still registered (a [`Client`](crate::client::Client) gives them back to the connection
/// for its next calls; dropping them deregisters them). Read them with [`view`](Landed::view).
pub struct Landed<B: Backend> {
    pub(super) writes: WriteChunks<B::Region>,
    pub(super) reply: Option<ChunkRegion<B::Region>>,
}

impl<B: Backend> Default for Landed<B> {
    fn default() -> Self {
        Landed { writes: SmallVec::new(), reply: None }
    }
}

impl<B: Backend> std::fmt::Debug for Landed<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lens = |c: &Option<ChunkRegion<B::Region>>| c.as_ref().map_or(0, |c| c.len);
        f.debug_struct("Landed")
            .field("writes", &self.writes.iter().map(lens).collect::<Vec<_>>())
            .field("reply", &lens(&self.reply))
            .finish()
    }
}

impl<B: Backend> Landed<B> {
    /// The buffers' bytes, held for reading while the view lives (each region stays locked:
    /// [`MemoryRegion::bytes`], so the view borrows the buffers mutably: no second view can
    /// lock them again meanwhile). Each chunk reads as its advertised length.
    ///
    /// See [`ChunkMemory::rkeys`](super::ChunkMemory::rkeys) for an example.
    pub fn view(&mut self) -> LandedView<'_, B> {
        self.view_shared()
    }

    /// [`view`](Landed::view) for whoever knows no other view is held.
    pub(crate) fn view_shared(&self) -> LandedView<'_, B> {
        LandedView {
            writes: self.writes.iter().map(|c| c.as_ref().map(ChunkRegion::bytes)).collect(),
            reply: self.reply.as_ref().map(ChunkRegion::bytes),
        }
    }

    /// The regions, for the pool.
    pub(super) fn into_regions(self) -> impl Iterator<Item = B::Region> {
        self.writes.into_iter().chain([self.reply]).flatten().map(|c| c.region)
    }
}

/// A [`Landed`]'s buffers held for reading ([`Landed::view`]).
pub struct LandedView<'a, B: Backend + 'a> {
    writes: SmallVec<[Option<Held<'a, B>>; WRITE_CHUNKS_INLINE]>,
    reply: Option<Held<'a, B>>,
}

/// A chunk buffer's bytes held for reading, and the chunk's length.
type Held<'a, B> = (<<B as Backend>::Region as MemoryRegion>::Bytes<'a>, usize);

impl<B: Backend> LandedView<'_, B> {
    /// Write chunk `chunk`'s buffer, its advertised length long (empty for a chunk with no
    /// buffer, or none).
    pub fn write(&self, chunk: usize) -> &[u8] {
        self.writes.get(chunk).and_then(Option::as_ref).map_or(&[][..], |(b, len)| &b[..(*len).min(b.len())])
    }

    /// The Write chunks' buffers, in Write list order, as [`write`](LandedView::write) gives
    /// each.
    pub fn writes(&self) -> Vec<&[u8]> {
        self.write_slices().into_vec()
    }

    /// [`writes`](LandedView::writes), held inline for the usual few chunks.
    pub(super) fn write_slices(&self) -> SmallVec<[&[u8]; WRITE_CHUNKS_INLINE]> {
        (0..self.writes.len()).map(|i| self.write(i)).collect()
    }

    /// The Reply chunk's buffer, its advertised length long (empty when none was provided).
    pub fn reply(&self) -> &[u8] {
        self.reply.as_ref().map_or(&[][..], |(b, len)| &b[..(*len).min(b.len())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpcrdma_verbs::inproc::InProcRegion;
    use rpcrdma_verbs::InProcess;

    fn kept(pool: &ChunkPool<InProcRegion>) -> Vec<usize> {
        let mut lens: Vec<usize> = pool.kept.lock().unwrap().iter().map(InProcRegion::len).collect();
        lens.sort_unstable();
        lens
    }

    /// What a peer's chunk lengths make a server register is kept only within the bounds: a
    /// region past the byte bound is let go, and one that would go past the count or the bytes
    /// lets go of those kept longest ago.
    #[test]
    fn the_cache_keeps_at_most_eight_regions_and_two_mib_the_oldest_let_go_first() {
        let pd = InProcess.alloc_pd().unwrap();
        let pool = ChunkPool::new();
        // Ten taken while the others are out (ten registrations), then kept one by one.
        let held: Vec<InProcRegion> = (0..10).map(|_| pool.take(&pd, 1024).unwrap()).collect();
        held.into_iter().for_each(|r| pool.keep(r));
        assert_eq!(kept(&pool), [1024; CHUNK_REGIONS_KEPT]);
        // A larger one back lets go of the oldest small one.
        pool.keep(pd.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap());
        assert_eq!(kept(&pool)[CHUNK_REGIONS_KEPT - 1], 4096);
        assert_eq!(kept(&pool).len(), CHUNK_REGIONS_KEPT);

        let pool = ChunkPool::new();
        pool.keep(pd.register(vec![0; CHUNK_BYTES_KEPT + 1], Access::LOCAL_WRITE).unwrap());
        assert_eq!(kept(&pool), [] as [usize; 0]);
        pool.keep(pd.register(vec![0; CHUNK_BYTES_KEPT - 4096], Access::LOCAL_WRITE).unwrap());
        pool.keep(pd.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap());
        assert_eq!(kept(&pool), [4096, CHUNK_BYTES_KEPT - 4096]);
        // 8 KiB more would pass 2 MiB: the oldest (the large one) goes.
        pool.keep(pd.register(vec![0; 8192], Access::LOCAL_WRITE).unwrap());
        assert_eq!(kept(&pool), [4096, 8192]);
    }

    /// A chunk takes the smallest kept region that holds it, and registers afresh when none
    /// does; an empty region is not kept.
    #[test]
    fn a_chunk_takes_the_smallest_kept_region_that_holds_it() {
        let pd = InProcess.alloc_pd().unwrap();
        let pool = ChunkPool::new();
        for len in [65_536, 4096, 16_384] {
            pool.keep(pd.register(vec![0; len], Access::LOCAL_WRITE).unwrap());
        }
        pool.keep(pd.register(Vec::new(), Access::LOCAL_WRITE).unwrap());
        assert_eq!(kept(&pool), [4096, 16_384, 65_536]);
        let r = pool.take(&pd, 5000).unwrap();
        assert_eq!(r.len(), 16_384);
        assert_eq!(kept(&pool), [4096, 65_536]);
        let fresh = pool.take(&pd, 100_000).unwrap();
        assert_eq!((fresh.len(), fresh.access()), (100_000, Access::LOCAL_WRITE));
        assert_eq!(kept(&pool), [4096, 65_536]);
    }
}
