//! Fetching a call's Read chunks (RFC 8166 section 3.4.5): the RDMA Reads posted, then their
//! completions taken, either waited for at once ([`fetch_call`]) or looked at later without
//! waiting ([`Fetching::poll`]), so that a server's thread serves other messages while a
//! call's Reads cross the network and resumes the call when they are in (the eRPC way:
//! a continuation instead of a blocked thread).

use std::time::Duration;

use rpcrdma_v1::header::Header;
use rpcrdma_v1::reassemble::{
    check_call_ddp_eligibility, fetch_len, lay_out_call, read_list_fetches, reassemble_call, CallPiece, Fetch,
};
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::xdr::RdmaBody;
use rpcrdma_verbs::{Access, Backend, ProtectionDomain, QueuePair, RemoteBuf, Sge};
use smallvec::SmallVec;

use super::super::{take_bytes, DataPathError, Transport, Want, RESUMES_WR_BIT};

/// Rebuilds the whole RPC Call message of an accepted call header into `out`: pulls every Read
/// chunk segment with an RDMA Read (RFC 8166 sections 3.4.5 and 3.4.5.1), waits for them,
/// puts the pieces together (`lay_out_call`'s rules: inline payload or Position-Zero chunk,
/// padding restored) and checks the Read chunks against the DDP-eligible items `ulb` finds (RFC
/// 8166 section 6.1.1: on [`DataPathError::DdpViolation`] do not process the call; answer
/// `GARBAGE_ARGS`).
///
/// For an `RDMA_MSG` each Read chunk is read straight to its place in `out`, which is
/// registered for the Reads and handed back: the RDMA Read is the only copy of a chunk's bytes,
/// as with raw verbs. An `RDMA_NOMSG`'s Reads land in a buffer first (the reduced stream is
/// itself a chunk, so where the others go is known only once it is read) and are copied into
/// `out`. Whatever `out` held is replaced; its memory is reused.
///
/// The chunk sizes were bounded by the header's limits when it was accepted (RFC 8166 section
/// 3.4.4). See the [module documentation](crate::datapath) for an example.
pub fn fetch_call<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &Header<'_>,
    ulb: &U,
    out: &mut Vec<u8>,
) -> Result<(), DataPathError> {
    if let Some(mut fetching) = Fetching::start(conn, call, out, false)? {
        fetching.wait(conn);
        fetching.finish(call, ulb, out)
    } else {
        check(call, ulb, out)
    }
}

/// The Read chunks of one call posted and not all complete yet ([`Fetching::start`]): the
/// memory they land in, registered, and the work requests still out. Finished with
/// [`Fetching::finish`] once [`Fetching::poll`] says every Read is done (or after
/// [`Fetching::wait`]). Dropped before that (its connection gone), the landing memory is
/// deregistered: a Read still out then fails as a local protection error, as on hardware, on
/// a queue pair that is down anyway.
pub(crate) struct Fetching<B: Backend> {
    /// The call message laid out with room for each chunk (RDMA_MSG), or a landing buffer for
    /// the Reads of an RDMA_NOMSG, whose pieces are put together afterwards.
    region: B::Region,
    /// `Some(len)`: `region` is a landing buffer of `len` bytes, copied out by `finish`.
    landing: Option<usize>,
    /// The Reads whose completions are not taken yet.
    out: SmallVec<[u64; 4]>,
    /// The first failure: a post refused, or a Read that completed in error.
    failed: Option<DataPathError>,
}

impl<B: Backend> Fetching<B> {
    /// Posts the RDMA Reads of `call`'s Read chunks, straight into `out` (moved into the
    /// registered region until [`Fetching::finish`]) for an RDMA_MSG, into a landing buffer for
    /// an RDMA_NOMSG; `Ok(None)`: it has none, and `out` holds the whole call already.
    /// `resumes`: no thread will wait for the Reads; whoever reaps one wakes the waker armed
    /// on the connection ([`Transport::arm_receive`]) for its owner to [`Fetching::poll`].
    /// `Err`: nothing was posted.
    pub(crate) fn start(
        conn: &Transport<B>,
        call: &Header<'_>,
        out: &mut Vec<u8>,
        resumes: bool,
    ) -> Result<Option<Self>, DataPathError> {
        let msg = call.to_msg();
        let reads = call.read_list();
        let landing_len = fetch_len(reads) as usize;
        if landing_len == 0 {
            reassemble_call(&msg, call.payload(), &[], out)?;
            return Ok(None);
        }
        let (region, landing, placed): (_, _, SmallVec<[(usize, Fetch); 4]>) =
            if matches!(msg.rdma_body, RdmaBody::RdmaMsg(_)) {
                let places = lay_out_in_place(&msg, call.payload(), landing_len, out)?;
                let region = conn.pd().register(std::mem::take(out), Access::LOCAL_WRITE)?;
                let placed = read_list_fetches(reads).map(|f| {
                    // The chunk that holds the segment starts at or before its landing offset.
                    let (start, to) =
                        places.iter().rev().find(|(start, _)| *start <= f.landing).copied().unwrap_or_default();
                    (to + f.landing - start, f)
                });
                (region, None, placed.collect())
            } else {
                // (The landing buffer is deregistered and freed, not kept for the connection's
                // next call: its size is the peer's to choose, and a server's budget counts it
                // only while the call is fetched.)
                let region = conn.chunk_region(landing_len)?;
                (region, Some(landing_len), read_list_fetches(reads).map(|f| (f.landing, f)).collect())
            };
        let mut fetching = Fetching { region, landing, out: SmallVec::new(), failed: None };
        for (at, f) in placed.into_iter().filter(|(_, f)| f.length > 0) {
            let id = if resumes { conn.wr_id() | RESUMES_WR_BIT } else { conn.wr_id() };
            let local = Sge::new(&fetching.region, at, f.length as usize);
            let remote = RemoteBuf { addr: f.offset, rkey: f.handle };
            // Reads are always waited for or polled, and so signaled (`post_sq` records their
            // order). After a refusal nothing more is posted; what was still completes or
            // flushes into the region.
            match conn.post_sq(id, None, |qp, _| qp.post_read(id, &[local], remote)) {
                Ok(()) => fetching.out.push(id),
                Err(e) => {
                    fetching.failed = Some(e.into());
                    break;
                }
            }
        }
        Ok(Some(fetching))
    }

    /// Takes the completions of its Reads that are there, without waiting (nor reaping while
    /// another thread polls the completion queue: that one sets them aside, and wakes the
    /// armed waker): whether every Read is done.
    pub(crate) fn poll(&mut self, conn: &Transport<B>) -> bool {
        let failed = &mut self.failed;
        self.out.retain(|id| match conn.wait_within(Want::WorkRequest(*id), Duration::ZERO, Duration::ZERO) {
            Ok(_) => false,
            Err(DataPathError::Timeout { .. }) => true,
            Err(e) => {
                failed.get_or_insert(e);
                false
            }
        });
        self.out.is_empty()
    }

    /// Waits for every Read still out, each for up to the connection's timeout; at a timeout
    /// it stops waiting, and the call fails with it.
    pub(crate) fn wait(&mut self, conn: &Transport<B>) {
        for id in std::mem::take(&mut self.out) {
            match conn.wait(id) {
                Ok(_) => {}
                Err(e @ DataPathError::Timeout { .. }) => {
                    self.failed.get_or_insert(e);
                    return;
                }
                Err(e) => {
                    self.failed.get_or_insert(e);
                }
            }
        }
    }

    /// The call message put together in `out` once every Read is done, and checked against
    /// the DDP-eligible items `ulb` finds ([`fetch_call`]); the first failure otherwise.
    pub(crate) fn finish<U: UpperLayerBinding + ?Sized>(
        self,
        call: &Header<'_>,
        ulb: &U,
        out: &mut Vec<u8>,
    ) -> Result<(), DataPathError> {
        let mut fetched = take_bytes(self.region);
        if let Some(e) = self.failed {
            if self.landing.is_none() {
                // The call's own memory goes back to the thread, for its next call.
                *out = fetched;
            }
            return Err(e);
        }
        match self.landing {
            None => *out = fetched,
            Some(len) => {
                fetched.truncate(len);
                reassemble_call(&call.to_msg(), call.payload(), &fetched, out)?;
            }
        }
        check(call, ulb, out)
    }
}

/// RFC 8166 section 6.1.1 for a call put together in `out`.
fn check<U: UpperLayerBinding + ?Sized>(call: &Header<'_>, ulb: &U, out: &mut [u8]) -> Result<(), DataPathError> {
    check_call_ddp_eligibility(&call.to_msg(), out, ulb, &mut Vec::new())?;
    Ok(())
}

/// Lays out an `RDMA_MSG` call in `out` with room for each Read chunk at its place: the inline
/// pieces and padding written, the chunks' room left for the Reads. Returns where each Read
/// chunk's landing range (`read_list_fetches`' placement) starts in `out`, as (landing start,
/// offset in `out`).
fn lay_out_in_place(
    msg: &rpcrdma_v1::xdr::RdmaMsg<'_>,
    inline: &[u8],
    landing_len: usize,
    out: &mut Vec<u8>,
) -> Result<SmallVec<[(usize, usize); 4]>, DataPathError> {
    let len = lay_out_call(msg, inline, landing_len, |_| {})?;
    // Every byte is written below (or read into), so what `out` held need not be cleared: a
    // buffer kept from the last call of the same size costs no memset.
    if out.len() >= len {
        out.truncate(len);
    } else if out.capacity() < len {
        // Fresh, zeroed by the allocator: pages touched only as the Reads write them.
        *out = vec![0; len];
    } else {
        out.resize(len, 0);
    }
    // A Read list holds few chunks.
    let mut places = SmallVec::new();
    let mut at = 0;
    lay_out_call(msg, inline, landing_len, |piece| match piece {
        CallPiece::Inline(bytes) => {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        }
        CallPiece::Padding(n) => {
            out[at..at + n].fill(0);
            at += n;
        }
        CallPiece::Landed(range) => {
            places.push((range.start, at));
            at += range.len();
        }
    })?;
    Ok(places)
}
