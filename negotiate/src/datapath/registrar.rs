//! The Requester's chunk memory: registered once and kept (the connection's registration cache,
//! `chunk_pool`), exposed to the Responder per call through memory windows.

use rpcrdma_v1::marshal_call::{ChunkPurpose, Registrar};
use rpcrdma_v1::xdr::XdrRdmaSegment;
use rpcrdma_verbs::{Access, Backend, MemoryRegion, ProtectionDomain, QueuePair};
use smallvec::SmallVec;

use super::chunk_pool::{ChunkRegion, WriteChunks};
use super::{take_bytes, DataPathError, Landed, Transport};
use crate::thresholds::SegmentLimits;

/// The memory one call exposes to the Responder: a copy of the call message behind its Read
/// chunks (RFC 8166 section 3.4.5.1: it must stay unchanged until the reply arrives), receive
/// buffers behind its Write chunks and Reply chunk, and the live windows over them. Built by
/// [`WindowRegistrar`]; given back by [`ChunkMemory::release`].
///
/// Dropping it without [`release`](ChunkMemory::release) leaves its windows open to the peer
/// until the connection goes away.
#[must_use = "the windows stay open to the peer until released"]
pub struct ChunkMemory<B: Backend> {
    call_copy: Option<B::Region>,
    /// Whether `call_copy` is the caller's lent message rather than a copy; or the lent
    /// message itself while no Read chunk needed it registered.
    lent: Lent,
    /// The rkeys of the windows open to the peer (the advertised segments' handles); a call
    /// has few, held inline.
    windows: SmallVec<[u32; 4]>,
    /// Write chunk *i*'s buffer at index *i*; `None` for a chunk of zero bytes.
    writes: WriteChunks<B::Region>,
    reply: Option<ChunkRegion<B::Region>>,
}

impl<B: Backend> ChunkMemory<B> {
    /// Nothing registered yet.
    fn new() -> Self {
        ChunkMemory { call_copy: None, lent: Lent::No, windows: SmallVec::new(), writes: SmallVec::new(), reply: None }
    }

    /// The rkeys of the windows still open to the peer: the handles of every segment the call
    /// advertised.
    ///
    /// ```
    /// # use negotiate::datapath::*;
    /// # use rpcrdma_v1::marshal_call::{marshal_call, CallRequest, InlineThresholds, MarshaledCall};
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let peer = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// # let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// # let conn = Transport::<InProcess>::new(pd, qp, t);
    /// // A 2 KiB call with a 512-byte result: a Long call and one Write chunk.
    /// let call = vec![0u8; 2048];
    /// let req = CallRequest { credits: 8, thresholds: InlineThresholds::default(), ddp_args: &[],
    ///                         ddp_result_maxima: &[512], max_reply: 64 };
    /// let mut reg = WindowRegistrar::new(&conn, &call);
    /// let (mut header, mut out) = ([0u8; 1024], MarshaledCall::new());
    /// marshal_call(&call, &req, &mut reg, &mut header, &mut out).unwrap();
    /// let memory = reg.finish().unwrap();
    /// assert_eq!(memory.rkeys().count(), 2);
    /// assert_eq!(out.writes().chunk(0)[0].handle, memory.rkeys().next().unwrap());
    /// let mut landed = memory.release(&conn, None).unwrap();
    /// assert_eq!(landed.view().write(0).len(), 512);
    /// # drop(peer.join());
    /// ```
    pub fn rkeys(&self) -> impl Iterator<Item = u32> + '_ {
        self.windows.iter().copied()
    }

    /// Closes every window the peer did not already invalidate (`invalidated`, from the reply's
    /// Receive completion: RFC 8797 section 4.1 remote invalidation) with a Local Invalidate,
    /// waits for them, and hands back what the Responder wrote, still registered (the copy of
    /// the call goes back to the connection's registration cache; a lent message is
    /// deregistered, its buffer handed back).
    ///
    /// Invalidation comes before the bytes are handed back (RFC 8166 section 8.1.3, draft
    /// 9.1.3: "Invalidation ... should be complete before ... the RPC consumer is allowed to
    /// ... use or alter the contents of a memory region"). When a window cannot be invalidated
    /// (a Local Invalidate refused, flushed because the connection is already down, or not
    /// completed in time) the connection is closed instead, and that fences the memory (RFC 8166
    /// section 4.5.4, draft 5.5.4: the requester "MUST close the connection to fence that memory
    /// from the responder before the associated RPC transaction is complete"), so the bytes are
    /// handed back all the same: a reply that arrived whole is not lost because the connection
    /// went down between its arrival and its release.
    ///
    /// An `invalidated` rkey that is none of this call's is [`DataPathError::ForeignInvalidation`],
    /// reported after the release.
    pub fn release(self, conn: &Transport<B>, invalidated: Option<u32>) -> Result<Landed<B>, DataPathError> {
        let (landed, _, foreign) = self.release_parts(conn, invalidated);
        foreign.map(|()| landed)
    }

    /// [`release`](ChunkMemory::release), handing back besides the lent call message (see
    /// [`WindowRegistrar::lending`]) whatever else happens: the release's own error is the
    /// third part.
    pub(super) fn release_parts(
        self,
        conn: &Transport<B>,
        invalidated: Option<u32>,
    ) -> (Landed<B>, Option<Vec<u8>>, Result<(), DataPathError>) {
        let mut foreign = invalidated;
        let mut ids: SmallVec<[u64; 4]> = SmallVec::new();
        let mut posted = Ok(());
        for &rkey in &self.windows {
            if Some(rkey) == invalidated {
                foreign = None;
                continue;
            }
            let id = conn.wr_id();
            match conn.post_sq(id, None, |qp, flags| qp.post_local_invalidate_with(id, rkey, flags)) {
                Ok(()) => ids.push(id),
                Err(e) => {
                    posted = Err(e.into());
                    break;
                }
            }
        }
        if let Err(e) = posted.and(conn.wait_all(&ids)) {
            // Fenced: a queue pair in the Error state executes no RDMA from the peer.
            conn.close(format_args!("a call's memory could not be invalidated: {e}"));
        }
        let message = match (self.lent, self.call_copy) {
            (Lent::Unregistered(message), _) => Some(message),
            (Lent::Registered, Some(region)) => Some(take_bytes(region)),
            (_, copy) => {
                if let Some(copy) = copy {
                    conn.keep_region(copy);
                }
                None
            }
        };
        let landed = Landed { writes: self.writes, reply: self.reply };
        let foreign = match foreign {
            Some(rkey) => Err(DataPathError::ForeignInvalidation(rkey)),
            None => Ok(()),
        };
        (landed, message, foreign)
    }
}

/// Where a call message lent to its call is ([`WindowRegistrar::lending`]).
enum Lent {
    /// Not lent: the registrar copies the borrowed message when a Read chunk needs it.
    No,
    /// Lent, and registered as the call's Read chunk memory (`call_copy`).
    Registered,
    /// Lent, and no Read chunk needed it.
    Unregistered(Vec<u8>),
}

/// The [`Registrar`] of the Requester: takes each chunk's memory from the connection's
/// registration cache (or registers it) and exposes it for one call through a memory window
/// bound on the connection's queue pair (a type-2 window: fresh rkey, limited to the chunk's
/// bytes and to RDMA Read for Read chunks, RDMA Write for Write and Reply chunks). Windows,
/// unlike a region's own rkey, can be killed by the Responder's Send with Invalidate (RFC 8797
/// section 4.1), which saves the Requester a Local Invalidate.
///
/// Read and Position-Zero Read chunks share one registered copy of the call message (or the
/// lent message itself); each Write chunk and the Reply chunk gets a buffer at least its length
/// long, not zeroed (only what the Responder writes is read). A registration is one segment.
///
/// Binds (and the Local Invalidates of registrations marshaling gave up) are posted from
/// [`Registrar`]'s methods and not waited for: the call's Send, posted after them on the same
/// send queue, executes after them, so the peer learns of no window before it is bound; a
/// bind that fails puts the queue pair in the Error state, which flushes that Send, and the
/// call goes out again on the next connection. One wait, and one thread switch, fewer per
/// chunk. See [`ChunkMemory::rkeys`] for an example.
pub struct WindowRegistrar<'c, B: Backend> {
    conn: &'c Transport<B>,
    /// The call message when it is borrowed; `None` when it was lent ([`ChunkMemory`]'s `lent`).
    call: Option<&'c [u8]>,
    memory: ChunkMemory<B>,
    /// A failure inside [`Registrar::release`], which cannot return one.
    failed: Option<DataPathError>,
    /// How segments are cut and how many may be advertised in all
    /// ([`WindowRegistrar::limit_segments`]).
    limits: SegmentLimits,
    /// The segments advertised and not released.
    segments: usize,
    /// The segments a registration would have needed when they were more than `max_count`.
    refused: Option<usize>,
}

impl<'c, B: Backend> WindowRegistrar<'c, B> {
    /// A registrar for the call message `call` (the bytes given to `marshal_call`) on `conn`.
    pub fn new(conn: &'c Transport<B>, call: &'c [u8]) -> Self {
        Self::with_memory(conn, Some(call), ChunkMemory::new())
    }

    fn with_memory(conn: &'c Transport<B>, call: Option<&'c [u8]>, memory: ChunkMemory<B>) -> Self {
        WindowRegistrar { conn, call, memory, failed: None, limits: SegmentLimits::NONE, segments: 0, refused: None }
    }

    /// A registrar to which the call message itself is lent: a Read chunk exposes `message`'s
    /// own buffer (registered as it is, no copy) instead of a copy, and [`ChunkMemory`] hands
    /// it back on release (RFC 8166 section 3.4.5.1: it stays unchanged until the reply,
    /// since nobody else holds it). Marshal with `marshal_call_shaped`, since the bytes are
    /// the registrar's; [`WindowRegistrar::with_call`] reads them.
    pub(super) fn lending(conn: &'c Transport<B>, message: Vec<u8>) -> Self {
        let mut memory = ChunkMemory::new();
        memory.lent = Lent::Unregistered(message);
        Self::with_memory(conn, None, memory)
    }

    /// Advertises no segment longer than `limits.max_size` bytes (at least 1): a longer chunk
    /// is still one window, advertised as several segments of it back to back (one handle, so
    /// that remote invalidation still covers the chunk); and no more than `limits.max_count`
    /// segments in all: a registration that would need more is refused before anything is
    /// registered or listed ([`WindowRegistrar::refused`]), so that a peer's tiny segment size
    /// never sizes what this side allocates. For a -07 responder's Maximum Segment Size and
    /// Count (draft-ietf-nfsv4-rpcrdma-version-two-07 sections 5.2.3 and 5.2.4).
    pub fn limit_segments(&mut self, limits: SegmentLimits) {
        self.limits = SegmentLimits { max_size: limits.max_size.max(1), ..limits };
    }

    /// The segments a refused registration would have brought the call to, when
    /// [`WindowRegistrar::limit_segments`]'s count refused one.
    pub fn refused(&self) -> Option<usize> {
        self.refused
    }

    /// Runs `f` on the call message's bytes, wherever they are.
    pub(super) fn with_call<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T {
        match (self.call, &self.memory.lent, &self.memory.call_copy) {
            (Some(call), _, _) => f(call),
            (None, Lent::Unregistered(message), _) => f(message),
            (None, _, Some(region)) => region.with(f),
            (None, _, None) => f(&[]),
        }
    }

    /// Hands over the call's memory, whatever marshaling concluded. If a Local Invalidate of
    /// a registration given up could not be posted, the connection is closed: a window may be
    /// open that nothing will invalidate (RFC 8166 section 4.4.1).
    pub fn finish(self) -> Result<ChunkMemory<B>, DataPathError> {
        let (memory, finished) = self.finish_parts();
        finished.map(|()| memory)
    }

    /// [`finish`](WindowRegistrar::finish), handing over the memory (with a lent message) even
    /// when it fails.
    pub(super) fn finish_parts(mut self) -> (ChunkMemory<B>, Result<(), DataPathError>) {
        match self.failed.take() {
            None => (self.memory, Ok(())),
            Some(e) => {
                self.conn.close(format_args!("unbinding a call's memory windows failed: {e}"));
                (self.memory, Err(e))
            }
        }
    }

    /// The registered copy of the call message, made on first use.
    fn call_copy(&mut self) -> rpcrdma_verbs::Result<B::Region> {
        if let Some(r) = &self.memory.call_copy {
            return Ok(r.clone());
        }
        let region = match (self.call, &mut self.memory.lent) {
            // A kept region (Local Write, which a Read source does not need and does not hurt:
            // the windows grant the peer Remote Read only).
            (Some(call), _) => self.conn.chunk_copy(call)?,
            (None, lent) => match std::mem::replace(lent, Lent::Registered) {
                // No rights of its own: the windows grant the peer Remote Read (an RDMA Read
                // source needs no Local Write).
                Lent::Unregistered(message) => self.conn.pd().register(message, Access::empty())?,
                _ => unreachable!("a lent message is registered once, as call_copy"),
            },
        };
        self.memory.call_copy = Some(region.clone());
        Ok(region)
    }

    fn register_window(&mut self, purpose: ChunkPurpose) -> rpcrdma_verbs::Result<XdrRdmaSegment> {
        let len = purpose.len();
        let (region, offset, access) = match purpose.call_range() {
            Some(range) => (self.call_copy()?, range.start, Access::REMOTE_READ),
            None => {
                let region = self.conn.chunk_region(len)?;
                let slot = match purpose {
                    ChunkPurpose::Write { index, .. } => {
                        if self.memory.writes.len() <= index {
                            self.memory.writes.resize_with(index + 1, || None);
                        }
                        &mut self.memory.writes[index]
                    }
                    _ => &mut self.memory.reply,
                };
                *slot = Some(ChunkRegion { region: region.clone(), len });
                (region, 0, Access::REMOTE_WRITE)
            }
        };
        let id = self.conn.unwaited_wr_id();
        let remote = self
            .conn
            .post_sq(id, None, |qp, flags| qp.post_bind_window_with(id, &region, offset, len, access, flags))?;
        self.memory.windows.push(remote.rkey);
        Ok(XdrRdmaSegment { handle: remote.rkey, length: len as u32, offset: remote.addr })
    }
}

impl<B: Backend> Registrar for WindowRegistrar<'_, B> {
    type Error = rpcrdma_verbs::Error;

    fn register(&mut self, purpose: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), rpcrdma_verbs::Error> {
        let needed = self.segments.saturating_add(self.limits.segments_for(purpose.len()));
        if needed > self.limits.max_count as usize {
            // (The verbs error is never seen: the caller reports `refused` instead.)
            self.refused = Some(needed);
            return Err(rpcrdma_verbs::Error::TooLong);
        }
        let window = self.register_window(purpose)?;
        // Cut to the longest segment the responder takes, each piece the next stretch of
        // the one window.
        let (most, mut at, mut left) = (self.limits.max_size, 0u32, window.length);
        loop {
            let length = left.min(most);
            out.push(XdrRdmaSegment { handle: window.handle, length, offset: window.offset + u64::from(at) });
            self.segments += 1;
            (at, left) = (at + length, left - length);
            if left == 0 {
                return Ok(());
            }
        }
    }

    /// Closes the windows of a registration the call will not advertise (the Chunked form did
    /// not fit, or marshaling failed) and drops its buffer.
    fn release(&mut self, purpose: ChunkPurpose, segments: &[XdrRdmaSegment]) {
        self.segments = self.segments.saturating_sub(segments.len());
        for seg in segments {
            let Some(i) = self.memory.windows.iter().position(|&rkey| rkey == seg.handle) else { continue };
            let rkey = self.memory.windows.swap_remove(i);
            let id = self.conn.unwaited_wr_id();
            if let Err(e) = self.conn.post_sq(id, None, |qp, flags| qp.post_local_invalidate_with(id, rkey, flags)) {
                self.failed.get_or_insert(e.into());
            }
        }
        match purpose {
            ChunkPurpose::Write { index, .. } => {
                if let Some(slot) = self.memory.writes.get_mut(index) {
                    *slot = None;
                }
            }
            ChunkPurpose::Reply { .. } => self.memory.reply = None,
            ChunkPurpose::Read { .. } | ChunkPurpose::PositionZero { .. } => {}
        }
    }
}
