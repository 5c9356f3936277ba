//! The Requester's side: send a call, complete it from its reply.

mod continued;

use std::cell::RefCell;

use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_call::{
    marshal_call_shaped, CallDescription, CallForm, CallShape, InlineThresholds, MarshaledCall,
};
use rpcrdma_v1::reassemble::{reassemble_reply_with_ulb, reply_payload, walk_reply, ReplyPiece};
use rpcrdma_v1::ulb::{DdpItem, UpperLayerBinding};
use rpcrdma_v1::xdr::RdmaBody;
use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::Dialect;
use rpcrdma_verbs::{Backend, QueuePair, RemoteBuf};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{ChunkMemory, DataPathError, Landed, Transport, WindowRegistrar};
use crate::requester::Transmit;
use crate::thresholds::SegmentLimits;

/// What the negotiation decided for the calls of a connection.
///
/// ```
/// use negotiate::datapath::CallParams;
/// use rpcrdma_v1::marshal_call::InlineThresholds;
/// let v2 = CallParams { version: rpcrdma_v1::Version::TWO, credits: 32, thresholds: InlineThresholds { call: 4096, reply: 4096 }, dialect: None, remote_invalidation: false, segments: negotiate::thresholds::SegmentLimits::NONE };
/// assert_eq!(v2.thresholds.call, 4096);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallParams {
    /// `rdma_vers` of the call's header (1, or 2 for Version Two, whose chunk lists are Version
    /// One's).
    pub version: Version,
    /// `rdma_credit`: the credits requested (RFC 8166 section 3.3.1).
    pub credits: u32,
    /// The call inline threshold (the peer's receive size) and the reply inline threshold (this
    /// side's receive size, which decides whether a Reply chunk is needed).
    pub thresholds: InlineThresholds,
    /// For `version` 2, the dialect its header is written in (`None` and -00 write Version
    /// One's shape with `rdma_vers` 2). -07 writes RDMA2_CALL_INLINE, or RDMA2_CALL_EXTERNAL
    /// for a call that travels in a Position-zero Read chunk.
    pub dialect: Option<Dialect>,
    /// On -07, whether the call names the one handle its chunks share in `rdma_inv_handle`,
    /// asking the responder to invalidate it (section 6.5); ignored on the other versions.
    pub remote_invalidation: bool,
    /// How the call's chunks may be cut into segments (on -07 the responder's segment size
    /// and count, sections 5.2.3 and 5.2.4): a chunk longer than `max_size` goes as several
    /// segments of its one window, and a call needing more than `max_count` segments fails
    /// with [`DataPathError::TooManySegments`].
    pub segments: SegmentLimits,
}

impl From<&Transmit> for CallParams {
    /// What a transmission the connection core decided ([`Transmit`]: its version, credits,
    /// thresholds, dialect, remote invalidation and segment limits) is marshaled with: the
    /// one translation, for `Client`'s callers and the simulator alike.
    ///
    /// ```
    /// use negotiate::datapath::CallParams;
    /// use negotiate::requester::Transmit;
    /// use negotiate::thresholds::SegmentLimits;
    /// use rpcrdma_v1::marshal_call::InlineThresholds;
    ///
    /// let thresholds = InlineThresholds { call: 1024, reply: 4096 };
    /// let t = Transmit {
    ///     xid: 7, version: rpcrdma_v1::Version::ONE, credits: 32, thresholds, probe: false, dialect: None,
    ///     remote_invalidation: false, segments: SegmentLimits::NONE, max_parts: 1, attempt: 1,
    /// };
    /// let params = CallParams::from(&t);
    /// assert_eq!((params.version, params.credits, params.thresholds), (t.version, 32, thresholds));
    /// ```
    fn from(t: &Transmit) -> CallParams {
        CallParams {
            version: t.version,
            credits: t.credits,
            thresholds: t.thresholds,
            dialect: t.dialect,
            remote_invalidation: t.remote_invalidation,
            segments: t.segments,
        }
    }
}

/// A call sent and not yet answered: its XID, its form, and the memory its chunks expose until
/// [`complete`](PendingCall::complete) or [`abandon`](PendingCall::abandon) releases it.
#[must_use = "the call's windows stay open to the peer until it is completed or abandoned"]
pub struct PendingCall<B: Backend> {
    xid: u32,
    form: CallForm,
    /// The Sends it took: 1, or on -07 the parts of a continued call.
    parts: usize,
    memory: ChunkMemory<B>,
    /// What its Read chunks offered, counted against the connection's offers outstanding
    /// until the call is done ([`offer_reads`]): held only to be dropped with the call.
    #[allow(dead_code)]
    offered: Option<OffersOut>,
}

/// A call's offered bytes, counted in its connection's `Transport::offered_out` until it is
/// dropped with the call.
#[derive(Debug)]
struct OffersOut {
    counter: Arc<AtomicUsize>,
    bytes: usize,
}

impl Drop for OffersOut {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Marshals `call` (an RPC Call message, XID first) with the DDP-eligible arguments, result
/// maxima and largest reply `ulb` gives for it (RFC 8166 sections 3.4 and 3.5; the form is
/// `marshal_call`'s choice), binds a window for every chunk, and sends header and inline payload
/// in one RDMA Send. Returns once the Send is posted: its completion is not waited for (the
/// reply says it arrived; a failed Send takes the connection down, and the call goes out again
/// on the next one), and the Send keeps its buffer until it completes.
///
/// The Send is one contiguous buffer: the header is encoded at its start and the inline ranges
/// copied after it (at most the call inline threshold, draft 5.2.4). See the [module
/// documentation](super) for a whole exchange.
pub fn send_call<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &[u8],
    ulb: &U,
    params: &CallParams,
) -> Result<PendingCall<B>, DataPathError> {
    prepare_call(conn, call, ulb, params)?.post(conn)
}

/// [`send_call`] for a -07 call that may continue across Sends (draft-ietf-nfsv4-rpcrdma-version-two-07
/// section 4.1): one too large for the responder's Receive even with its DDP-eligible
/// arguments in Read chunks goes, whole and inline, as RDMA2_CALL_MIDDLE parts and a final
/// RDMA2_CALL_INLINE carrying its Write list and Reply chunk (6.3.6, 6.3.7), when it takes no
/// more than `max_parts` Sends and `more_sends(n)` gives the running total the `n` parts
/// after the first carry, each counted as sent ([`Requester::take_call_parts`]). The parts are posted
/// back to back, nothing of another message between them. Otherwise, and on the other
/// versions, it goes as [`send_call`] sends it: a call that does not fit travels in a Call
/// chunk (RDMA2_CALL_EXTERNAL).
///
/// [`Requester::take_call_parts`]: crate::requester::Requester::take_call_parts
pub fn send_call_continuing<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &[u8],
    ulb: &U,
    params: &CallParams,
    max_parts: usize,
    more_sends: impl FnOnce(u32) -> Option<u32>,
) -> Result<PendingCall<B>, DataPathError> {
    if max_parts > 1 && is_draft07(params) {
        let sent = SCRATCH.with_borrow_mut(|(desc, out)| {
            desc.describe(ulb, call);
            continued::send_call(conn, call, desc, out, params, max_parts, more_sends)
        })?;
        if let Some(pending) = sent {
            return Ok(pending);
        }
    }
    send_call(conn, call, ulb, params)
}

/// Sends a call-only procedure's call (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.7:
/// there is no reply, so "Requesters MUST NOT use chunks when sending Call-only RPC
/// procedures"): in one RDMA2_CALL_INLINE with empty chunk lists, within the responder's
/// Receive; never in a chunk. A larger one is refused with
/// [`DataPathError::CallOnlyTooLarge`], nothing sent. (It does not continue across Sends:
/// its parts would need room in the responder's window all at once, and a call that waits
/// for nothing has nothing to wake it when that room comes.) `params` must be -07's. The
/// returned call holds no memory: release it with [`PendingCall::abandon`] once posted.
pub fn send_call_only<B: Backend>(
    conn: &Transport<B>,
    call: &[u8],
    params: &CallParams,
) -> Result<PendingCall<B>, DataPathError> {
    if !is_draft07(params) || !fits_one_draft07_send(call.len(), params.thresholds.call) {
        return Err(DataPathError::CallOnlyTooLarge { len: call.len(), threshold: params.thresholds.call });
    }
    // Nothing DDP-eligible and no reply to provision for: marshaling lists no chunk at all.
    send_call(conn, call, &InlineOnly { max_reply: 0 }, params)
}

/// The binding of the backward direction, of a -07 call-only call (`max_reply` 0) and of a
/// client's keep-alive NULL call: nothing is DDP-eligible and the reply must fit inline, so no
/// chunk is ever provisioned or used.
pub(crate) struct InlineOnly {
    pub(crate) max_reply: usize,
}

impl UpperLayerBinding for InlineOnly {
    fn call_ddp_items(&self, _call: &[u8], _out: &mut Vec<DdpItem>) {}
    fn reply_ddp_maxima(&self, _call: &[u8], _out: &mut Vec<usize>) {}
    fn max_reply_size(&self, _call: &[u8]) -> usize {
        self.max_reply
    }
    fn reply_ddp_items(&self, _call: &[u8], _reply: &[u8], _reduced: usize, _out: &mut Vec<DdpItem>) {}
}

/// Whether a -07 call whose inline part is `inline` bytes, with no chunk, goes in one Send to
/// a responder whose Receive is `threshold` bytes, as [`send_call`] chooses its form: Version
/// One's bare header (the fixed words and three empty lists) and [`DRAFT07_LONGER`] within
/// the threshold.
fn fits_one_draft07_send(inline: usize, threshold: usize) -> bool {
    inline + rpcrdma_v1::marshal_call::FIXED_HEADER_LEN + 12 + DRAFT07_LONGER <= threshold
}

/// [`send_call`] without copying the call: `message`'s buffer is lent to the call, and its
/// Read chunks expose the buffer itself (registered as it is) instead of a copy, so the
/// Responder's RDMA Read is the only copy of a DDP-eligible argument, as with raw verbs.
/// [`PendingCall::complete_lent`] or [`PendingCall::abandon_lent`] hands the buffer back,
/// unchanged (RFC 8166 section 3.4.5.1: the Requester must not change it until the reply;
/// nobody else holds it meanwhile). Until then `message` is empty; if this fails it is handed
/// back at once, unless its registration itself failed, which consumed it.
///
/// ```no_run
/// # use negotiate::datapath::*;
/// # fn demo(conn: &Transport<rpcrdma_verbs::InProcess>, ulb: &rpcrdma_v1::ulb::OpaqueAtUlb, params: &CallParams,
/// #         pool: &ReceivePool<rpcrdma_verbs::InProcess>) {
/// let mut message = vec![0u8; 64 << 10];
/// let pending = send_call_lent(conn, &mut message, ulb, params).unwrap();
/// assert!(message.is_empty()); // lent
/// let got = pool.receive(conn).unwrap();
/// # let reply_header: rpcrdma_v1::header::Header<'_> = todo!();
/// let mut reply = Vec::new();
/// pending.complete_lent(conn, &reply_header, got.invalidated_rkey, ulb, &mut reply, &mut message).unwrap();
/// assert_eq!(message.len(), 64 << 10); // back
/// # }
/// ```
pub fn send_call_lent<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    message: &mut Vec<u8>,
    ulb: &U,
    params: &CallParams,
) -> Result<PendingCall<B>, DataPathError> {
    SCRATCH.with_borrow_mut(|(desc, out)| {
        desc.describe(ulb, message);
        let reg = WindowRegistrar::lending(conn, std::mem::take(message));
        send_described(conn, reg, desc, out, params, Some(message))
    })
}

/// A call marshaled into its Send buffer, with the windows of its chunks bound, and not yet
/// posted ([`prepare_call`]): a call that must wait for a credit is prepared by its caller,
/// and whichever thread receives the reply that frees the credit posts it
/// ([`PreparedCall::post`]), so that the caller sleeps once, until its reply.
#[must_use = "a prepared call holds a Send buffer and open windows until posted or discarded"]
pub struct PreparedCall<B: Backend> {
    send: super::FilledSend<B>,
    pending: PendingCall<B>,
    params: CallParams,
    /// Its Read chunks' segments, offered to the responder as its Send is posted.
    offers: Offers,
}

/// A call's Read-chunk segments as [`QueuePair::offer_read`] takes them (a call has few).
type Offers = SmallVec<[(RemoteBuf, u32); 4]>;

/// Everything [`send_call`] does but the post: the call marshaled with `params` into a Send
/// buffer of `conn`, its chunks' windows bound. `call` is needed again only to complete it.
pub fn prepare_call<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &[u8],
    ulb: &U,
    params: &CallParams,
) -> Result<PreparedCall<B>, DataPathError> {
    SCRATCH.with_borrow_mut(|(desc, out)| {
        desc.describe(ulb, call);
        prepare_described(conn, WindowRegistrar::new(conn, call), desc, out, params, None)
    })
}

impl<B: Backend> PreparedCall<B> {
    /// What it was marshaled with: post it only under the same.
    pub fn params(&self) -> CallParams {
        self.params
    }

    /// Posts its Send on `conn` (the connection it was prepared on): from here it is a call
    /// sent, as [`send_call`] returns it. On failure its memory is released.
    pub fn post(self, conn: &Transport<B>) -> Result<PendingCall<B>, DataPathError> {
        match post_call(conn, self.send, &self.params, &self.offers) {
            Ok(offered) => Ok(PendingCall { offered, ..self.pending }),
            Err(e) => {
                // No reply will come for it on this connection: fence its chunks now.
                let _ = self.pending.finish(conn, None, None);
                Err(e)
            }
        }
    }

    /// Gives it up unsent: the Send buffer goes back and the windows close.
    pub fn discard(self, conn: &Transport<B>) {
        conn.discard_filled(self.send);
        let _ = self.pending.finish(conn, None, None);
    }
}

/// Marshals the call `reg` holds, as `desc` describes it, straight into a Send buffer, and
/// posts it. On failure the call's memory is released, and a lent message goes `home`.
fn send_described<B: Backend>(
    conn: &Transport<B>,
    reg: WindowRegistrar<'_, B>,
    desc: &CallDescription,
    out: &mut MarshaledCall,
    params: &CallParams,
    mut home: Option<&mut Vec<u8>>,
) -> Result<PendingCall<B>, DataPathError> {
    let prepared = prepare_described(conn, reg, desc, out, params, home.as_deref_mut())?;
    match post_call(conn, prepared.send, params, &prepared.offers) {
        Ok(offered) => Ok(PendingCall { offered, ..prepared.pending }),
        Err(e) => {
            // After a failed post no reply will come on this connection: fence the chunks now.
            let _ = prepared.pending.finish(conn, None, home);
            Err(e)
        }
    }
}

/// Posts a call's filled Send, unwaited (its reply says it arrived), its Read chunks' segments
/// `offers` offered just ahead of it ([`offer_reads`]). On -07 its running total
/// is stamped as it is posted (section 4.2.1): a call prepared ahead carries the total of when
/// it was marshaled, and a GRANT sent since may have carried a higher one; a lower total after
/// it would read as a lowered limit, and shut the responder's window while this side thinks
/// it open.
fn post_call<B: Backend>(
    conn: &Transport<B>,
    send: super::FilledSend<B>,
    params: &CallParams,
    offers: &Offers,
) -> Result<Option<OffersOut>, DataPathError> {
    let offered = offer_reads(conn, offers);
    let id = conn.unwaited_wr_id();
    if is_draft07(params) {
        conn.post_filled_draft07(id, None, send)?;
    } else {
        conn.post_filled(id, None, send)?;
    }
    Ok(offered)
}

/// Marshals the call `reg` holds, as `desc` describes it, straight into a Send buffer, not
/// posted. On failure the call's memory is released, and a lent message goes `home`.
fn prepare_described<B: Backend>(
    conn: &Transport<B>,
    mut reg: WindowRegistrar<'_, B>,
    desc: &CallDescription,
    out: &mut MarshaledCall,
    params: &CallParams,
    home: Option<&mut Vec<u8>>,
) -> Result<PreparedCall<B>, DataPathError> {
    // A -07 header is longer than Version One's by at most DRAFT07_LONGER: the form is chosen
    // with that much less room, so that the -07 Send fits the peer's Receive too.
    let room =
        if is_draft07(params) { params.thresholds.call.saturating_sub(DRAFT07_LONGER) } else { params.thresholds.call };
    // The header and the inline ranges are written straight into the Send's registered
    // buffer; marshal_call never writes more than the call inline threshold in all.
    let filled = conn.fill_send(params.thresholds.call, |buf, _| {
        let header_len = marshal_header(&mut reg, desc, out, params, room, buf)?;
        let at = reg.with_call(|call| {
            let mut at = header_len;
            for range in out.inline() {
                buf[at..at + range.len()].copy_from_slice(&call[range.clone()]);
                at += range.len();
            }
            at
        });
        Ok(at)
    });
    let (memory, finished) = reg.finish_parts();
    let pending = PendingCall { xid: out.xid(), form: out.form(), parts: 1, memory, offered: None };
    // marshal_call released what it registered on failure; the rest is fenced here.
    match (filled, finished) {
        (Ok(send), Ok(())) => {
            let offers = out
                .reads()
                .iter()
                .map(|r| (RemoteBuf { addr: r.target.offset, rkey: r.target.handle }, r.target.length));
            Ok(PreparedCall { send, pending, params: *params, offers: offers.collect() })
        }
        (Ok(send), Err(e)) => {
            conn.discard_filled(send);
            let _ = pending.finish(conn, None, home);
            Err(e)
        }
        (Err(e), _) => {
            let _ = pending.finish(conn, None, home);
            Err(e)
        }
    }
}

/// Offers the responder each segment of the call's Read chunks ahead of its Send, where the
/// backend carries them (`QueuePair::offer_read`): over TCP each Read is a network round trip
/// that the serving thread would wait for, and the client's side a wake-up to answer it; on a
/// device, or in process, nothing is offered. An offer is read as the memory was when made,
/// which the requester's own rule allows: a call's chunks are not altered until its reply
/// has come and they are invalidated (RFC 8166 section 8.1.3). The responder takes each
/// segment offered in `fetch_call`, and reads the rest. Offered as the Send is posted, not
/// when a call is prepared ahead of its credit, and only while the connection's calls
/// awaiting replies have offered at most half what the peer holds (`QueuePair::offers_held`):
/// an offer the peer passed over before taking it would send the chunk's bytes twice, once
/// offered and once read. (The responder takes a call's offers before it replies, so a
/// reply's arrival means they are taken: the count drops with the call.)
fn offer_reads<B: Backend>(conn: &Transport<B>, offers: &Offers) -> Option<OffersOut> {
    let bytes: usize = offers.iter().map(|&(_, len)| len as usize).sum();
    let room = conn.qp().offers_held() / 2;
    if bytes == 0 || bytes > room {
        return None;
    }
    let counter = &conn.offered_out;
    if counter.fetch_add(bytes, Ordering::Relaxed) + bytes > room {
        counter.fetch_sub(bytes, Ordering::Relaxed);
        return None;
    }
    for &(remote, len) in offers {
        conn.qp().offer_read(remote, len);
    }
    Some(OffersOut { counter: counter.clone(), bytes })
}

/// Whether `params` write -07 headers.
fn is_draft07(params: &CallParams) -> bool {
    params.version == Version::TWO && params.dialect == Some(Dialect::Ietf07)
}

/// Marshals the call `reg` holds, as `desc` describes it, choosing its form for a call
/// inline threshold of `room` bytes, and writes its header at the start of `buf` in the
/// dialect `params` name: returns the header's length, where the inline payload goes. On
/// failure marshal_call has released what it registered.
fn marshal_header<B: Backend>(
    reg: &mut WindowRegistrar<'_, B>,
    desc: &CallDescription,
    out: &mut MarshaledCall,
    params: &CallParams,
    room: usize,
    buf: &mut [u8],
) -> Result<usize, DataPathError> {
    let req = desc.request(params.credits, InlineThresholds { call: room, ..params.thresholds });
    out.set_version(params.version);
    // No more segments than the responder takes, nor than the call's Send could list (16
    // bytes each): a peer's absurd count sizes nothing here either.
    let most = params.segments.max_count.min(u32::try_from(params.thresholds.call / 16).unwrap_or(u32::MAX));
    reg.limit_segments(SegmentLimits { max_count: most, ..params.segments });
    let shape = reg.with_call(CallShape::of);
    // Section 5.2.4: no more segments in the header than the responder takes.
    if let Err(e) = marshal_call_shaped(shape, &req, reg, buf, out) {
        return Err(match reg.refused() {
            Some(segments) => {
                DataPathError::TooManySegments { segments, most: most as usize, max_size: params.segments.max_size }
            }
            None => e.into(),
        });
    }
    if is_draft07(params) {
        draft07_header(buf, out.header_len(), params.remote_invalidation)
    } else {
        Ok(out.header_len())
    }
}

/// How much longer a -07 call header is than the Version One header with the same chunks:
/// `rdma_inv_handle`, and for RDMA2_CALL_EXTERNAL the end of the Call chunk's list.
const DRAFT07_LONGER: usize = 8;

/// Rewrites the Version One call header `marshal_call` wrote at the start of `buf`
/// (`v1_len` bytes) in draft-ietf-nfsv4-rpcrdma-version-two-07's shape, returning its length,
/// where the inline payload goes: RDMA_MSG becomes RDMA2_CALL_INLINE (section 6.3.7) and
/// RDMA_NOMSG, whose message is in the Position-zero Read chunk, RDMA2_CALL_EXTERNAL with that
/// chunk as its Call chunk (6.3.5); the lists are Version One's word for word (8.4).
/// With `solicit`, `rdma_inv_handle` asks the responder to invalidate the one handle all the
/// call's chunks share, when they share one (section 6.5; the rule RFC 8797 section 4.1 has a
/// Version One responder apply, `cm_private_data::reply_invalidate_rkey`); else zero: none.
fn draft07_header(buf: &mut [u8], v1_len: usize, solicit: bool) -> Result<usize, DataPathError> {
    use rpcrdma_v1::header::ChunkLists;
    use rpcrdma_v1::rt::{List, Xdr};
    use rpcrdma_v1::xdr::RdmaMsg;
    use rpcrdma_v2::draft07::marshal as marshal07;
    HEADER07.with_borrow_mut(|scratch| {
        let (msg, _) = RdmaMsg::decode(&buf[..v1_len]).expect("marshal_call's header decodes");
        scratch.clear();
        scratch.resize(v1_len + DRAFT07_LONGER, 0);
        let (xid, credit) = (msg.rdma_xid, msg.rdma_credit);
        let inv_handle = |lists: &ChunkLists<'_>| {
            let reads = lists.reads.iter().map(|r| r.target.handle);
            let writes = lists.writes.iter().flat_map(|c| c.target.iter().map(|s| s.handle));
            let reply = lists.reply.iter().flat_map(|c| c.target.iter().map(|s| s.handle));
            let rules =
                cm_private_data::Negotiated { client_to_server: 0, server_to_client: 0, remote_invalidation: solicit };
            cm_private_data::reply_invalidate_rkey(&rules, reads.chain(writes).chain(reply)).unwrap_or(0)
        };
        let n = match msg.rdma_body {
            RdmaBody::RdmaMsg(h) => {
                let lists = ChunkLists { reads: h.rdma_reads, writes: h.rdma_writes, reply: h.rdma_reply };
                marshal07::call_inline_header(scratch, xid, credit, inv_handle(&lists), &lists)?
            }
            RdmaBody::RdmaNomsg(h) => {
                let all = ChunkLists { reads: h.rdma_reads, writes: h.rdma_writes, reply: h.rdma_reply };
                let inv = inv_handle(&all);
                let (call, reads): (Vec<_>, Vec<_>) = h.rdma_reads.iter().partition(|c| c.position == 0);
                let reads = List::from_slice(&reads);
                let lists = ChunkLists { reads, writes: h.rdma_writes, reply: h.rdma_reply };
                marshal07::call_external(scratch, xid, credit, inv, List::from_slice(&call), &lists)?
            }
            _ => unreachable!("marshal_call writes RDMA_MSG or RDMA_NOMSG"),
        };
        let have = buf.len();
        buf.get_mut(..n)
            .ok_or(marshal07::MarshalError::BufferTooSmall { need: n, have })?
            .copy_from_slice(&scratch[..n]);
        Ok(n)
    })
}

/// Where a reply's reduced Payload stream lies ([`ReplyInPlace`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReducedAt {
    /// In the received message, at these offsets (an RDMA_MSG: inline).
    Message {
        /// The first byte's offset in the message.
        start: usize,
        /// One past the last byte's.
        end: usize,
    },
    /// At the start of the Reply chunk's buffer, this long (an RDMA_NOMSG, Long Reply).
    ReplyChunk {
        /// Its length.
        len: usize,
    },
}

/// A reply completed without copying its results ([`PendingCall::complete_in_place`]): the
/// unreduced RPC reply as pieces in stream order, each either part of the reduced stream
/// (`reduced`) or a result where the Responder wrote it (`landed.writes[chunk]`), and the
/// chunk buffers that hold them.
pub struct ReplyInPlace<B: Backend> {
    /// Where the reduced stream is.
    pub reduced: Option<ReducedAt>,
    /// The pieces, in stream order; the offsets of [`ReplyPiece::Reduced`] are in the reduced
    /// stream.
    pub pieces: ReplyPieces,
    /// The unreduced reply's length, padding included.
    pub len: usize,
    /// The Write chunks' and the Reply chunk's buffers.
    pub landed: Landed<B>,
}

impl<B: Backend> Default for ReplyInPlace<B> {
    fn default() -> Self {
        ReplyInPlace { reduced: None, pieces: ReplyPieces::new(), len: 0, landed: Landed::default() }
    }
}

impl<B: Backend> std::fmt::Debug for ReplyInPlace<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyInPlace")
            .field("reduced", &self.reduced)
            .field("pieces", &self.pieces)
            .field("len", &self.len)
            .field("landed", &self.landed)
            .finish()
    }
}

/// A reply's pieces ([`ReplyInPlace::pieces`]): held inline for a reply of up to two
/// DDP-eligible results (a result and the reduced stream's parts around each), so that a call
/// read in place allocates nothing for them; more spill to the heap.
pub type ReplyPieces = smallvec::SmallVec<[ReplyPiece; 5]>;

/// The pieces of `message`'s reply to `call`, checked as [`reassemble_reply_with_ulb`] checks.
fn describe_in_place<B: Backend, U: UpperLayerBinding + ?Sized>(
    call: &[u8],
    message: &[u8],
    reply: &Header<'_>,
    landed: &Landed<B>,
    ulb: &U,
    want: u32,
) -> Result<(Option<ReducedAt>, ReplyPieces, usize), DataPathError> {
    if reply.xid() != want {
        return Err(DataPathError::XidMismatch { want, got: reply.xid() });
    }
    let msg = reply.to_msg();
    let view = landed.view_shared();
    let reduced = reply_payload(&msg, reply.payload(), view.reply())?;
    let (at, writes) = match msg.rdma_body {
        RdmaBody::RdmaMsg(h) => {
            // The inline payload is a part of the message: its offset there.
            let start = reply.payload().as_ptr() as usize - message.as_ptr() as usize;
            (ReducedAt::Message { start, end: start + reduced.len() }, h.rdma_writes)
        }
        RdmaBody::RdmaNomsg(h) => (ReducedAt::ReplyChunk { len: reduced.len() }, h.rdma_writes),
        _ => return Err(rpcrdma_v1::reassemble::ReassemblyError::NoRpcMessage.into()),
    };
    let write_bufs = view.write_slices();
    let mut pieces = ReplyPieces::new();
    let len = RESULTS.with_borrow_mut(|results| {
        results.clear();
        ulb.reply_ddp_items(call, reduced, writes.len(), results);
        walk_reply(reduced.len(), writes, results, &write_bufs, |p| pieces.push(p))
    })?;
    Ok((Some(at), pieces, len))
}

thread_local! {
    /// Each thread's marshaling state, kept between calls so that a small call allocates
    /// nothing: the binding's description of the call and the marshaled call's lists.
    static SCRATCH: RefCell<(CallDescription, MarshaledCall)> = RefCell::new(Default::default());
    /// Each thread's buffer for a -07 call header, written there before it replaces the
    /// Version One header it is made from.
    static HEADER07: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Each thread's list of a reply's DDP-eligible results, found to reassemble it.
    static RESULTS: RefCell<Vec<rpcrdma_v1::ulb::DdpItem>> = const { RefCell::new(Vec::new()) };
}

/// Where a completing call's RPC message is: still the caller's, or lent to the call and
/// handed back by [`PendingCall::finish`].
enum CallMessage<'m> {
    Kept(&'m [u8]),
    Lent(&'m mut Vec<u8>),
}

impl<B: Backend> PendingCall<B> {
    /// The call's XID, which its reply's `rdma_xid` carries (RFC 8166 section 4.2.1).
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// How the call travelled.
    pub fn form(&self) -> CallForm {
        self.form
    }

    /// The Sends it took: 1, or on -07 the parts of a call continued across Sends
    /// ([`send_call_continuing`]).
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// The rkeys of the windows its chunks expose (see [`ChunkMemory::rkeys`]).
    pub fn rkeys(&self) -> impl Iterator<Item = u32> + '_ {
        self.memory.rkeys()
    }

    /// Completes the call from its reply: `call` is the RPC call message this sent (the binding
    /// reads its procedure to locate the reply's DDP-eligible results), `reply` is the accepted
    /// header of the received message (Version One's or Two's verdict), `invalidated` the
    /// received completion's
    /// invalidated rkey. Releases the chunks first ([`ChunkMemory::release`]), then rebuilds
    /// the whole RPC Reply message into `out` from the inline bytes, the Write chunks' and the
    /// Reply chunk's landed bytes (RFC 8166 sections 3.4.6.1 and 3.5.3; the ULB locates the
    /// reduced results).
    ///
    /// See the [module documentation](super) for an example.
    pub fn complete<U: UpperLayerBinding + ?Sized>(
        self,
        conn: &Transport<B>,
        call: &[u8],
        reply: &Header<'_>,
        invalidated: Option<u32>,
        ulb: &U,
        out: &mut Vec<u8>,
    ) -> Result<(), DataPathError> {
        self.complete_into(conn, reply, invalidated, ulb, out, CallMessage::Kept(call))
    }

    /// [`complete`](PendingCall::complete) for a call sent with [`send_call_lent`]: hands the
    /// lent message back into `message` (after its windows are closed), whatever the outcome;
    /// the binding reads it there.
    pub fn complete_lent<U: UpperLayerBinding + ?Sized>(
        self,
        conn: &Transport<B>,
        reply: &Header<'_>,
        invalidated: Option<u32>,
        ulb: &U,
        out: &mut Vec<u8>,
        message: &mut Vec<u8>,
    ) -> Result<(), DataPathError> {
        self.complete_into(conn, reply, invalidated, ulb, out, CallMessage::Lent(message))
    }

    fn complete_into<U: UpperLayerBinding + ?Sized>(
        self,
        conn: &Transport<B>,
        reply: &Header<'_>,
        invalidated: Option<u32>,
        ulb: &U,
        out: &mut Vec<u8>,
        call: CallMessage<'_>,
    ) -> Result<(), DataPathError> {
        let want = self.xid;
        let (call, landed) = match call {
            CallMessage::Kept(call) => (call, self.finish(conn, invalidated, None)?),
            CallMessage::Lent(home) => {
                let landed = self.finish(conn, invalidated, Some(&mut *home))?;
                (&home[..], landed)
            }
        };
        if reply.xid() != want {
            return Err(DataPathError::XidMismatch { want, got: reply.xid() });
        }
        let view = landed.view_shared();
        let reassembled = RESULTS.with_borrow_mut(|results| {
            let msg = reply.to_msg();
            reassemble_reply_with_ulb(
                call,
                &msg,
                reply.payload(),
                view.reply(),
                &view.write_slices(),
                ulb,
                results,
                out,
            )
        });
        drop(view);
        conn.recycle_landed(landed);
        Ok(reassembled?)
    }

    /// Completes the call from its reply like [`complete`](PendingCall::complete), but
    /// without copying its results: they stay in the Write chunk buffers the Responder wrote
    /// them into, and the reply is described as pieces ([`ReplyInPlace`]) of the received
    /// `message` (whose accepted header `reply` is), of those buffers and of the Reply chunk's.
    /// Only a reply with chunks keeps its buffers, still registered (a
    /// [`Client`](crate::client::Client) gives them back to the connection when the reply is
    /// read; dropped, they are deregistered).
    pub fn complete_in_place<U: UpperLayerBinding + ?Sized>(
        self,
        conn: &Transport<B>,
        call: &[u8],
        message: &[u8],
        reply: &Header<'_>,
        invalidated: Option<u32>,
        ulb: &U,
    ) -> Result<ReplyInPlace<B>, DataPathError> {
        let want = self.xid;
        let landed = self.finish(conn, invalidated, None)?;
        let described = describe_in_place(call, message, reply, &landed, ulb, want);
        match described {
            Ok((reduced, pieces, len)) => Ok(ReplyInPlace { reduced, pieces, len, landed }),
            Err(e) => {
                conn.recycle_landed(landed);
                Err(e)
            }
        }
    }

    /// Ends the call without a reply to reassemble: the peer answered RDMA_ERROR (RFC 8166
    /// section 4.5; the caller has decoded it), or the call is given up. Releases its chunks
    /// like [`complete`](PendingCall::complete).
    pub fn abandon(self, conn: &Transport<B>, invalidated: Option<u32>) -> Result<(), DataPathError> {
        self.finish(conn, invalidated, None).map(|landed| conn.recycle_landed(landed))
    }

    /// [`abandon`](PendingCall::abandon) for a call sent with [`send_call_lent`]: hands the
    /// lent message back into `message`.
    pub fn abandon_lent(
        self,
        conn: &Transport<B>,
        invalidated: Option<u32>,
        message: &mut Vec<u8>,
    ) -> Result<(), DataPathError> {
        self.finish(conn, invalidated, Some(message)).map(|landed| conn.recycle_landed(landed))
    }

    /// Releases the call's memory, the lent message (if any) going `home`.
    fn finish(
        self,
        conn: &Transport<B>,
        invalidated: Option<u32>,
        home: Option<&mut Vec<u8>>,
    ) -> Result<Landed<B>, DataPathError> {
        let (landed, message, released) = self.memory.release_parts(conn, invalidated);
        if let (Some(home), Some(message)) = (home, message) {
            *home = message;
        }
        released.map(|()| landed)
    }
}
