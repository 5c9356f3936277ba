//! The Responder's side: fetch a call's Read chunks, send its reply.

use std::cell::RefCell;
use std::time::Instant;

use cm_private_data::{reply_invalidate_rkey, Negotiated};
use rpcrdma_v1::header::{Fixed, Header};
use rpcrdma_v1::marshal_reply::{
    marshal_reply_of_len, MarshaledReply, ProvidedChunks, RdmaWrite, ReplyError, ReplyForm, ReplyRequest,
};
use rpcrdma_v1::reassemble::{
    check_call_ddp_eligibility, fetch_len, lay_out_call, read_list_fetches, reassemble_call, CallPiece, Fetch,
};
use rpcrdma_v1::rt::{List, Seq};
use rpcrdma_v1::ulb::{DdpItem, UpperLayerBinding};
use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg, XdrWriteChunk};
use rpcrdma_v1::Version;
use rpcrdma_v2::draft07::marshal as marshal07;
use rpcrdma_verbs::{Access, Backend, MemoryRegion, ProtectionDomain, QueuePair, RemoteBuf, Sge};

use super::{take_bytes, ChainedWrite, ChainedWrites, DataPathError, Transport};

mod continued;
mod lent;

use lent::ReducedReply;
pub use lent::{send_reply_with_lent_results, LentMismatch};

/// What the negotiation decided for the replies of a connection.
///
/// ```
/// use negotiate::datapath::ReplyParams;
/// let p = ReplyParams { version: rpcrdma_v1::Version::ONE, credits: 32, credit_owed: false, reply_inline_threshold: 1024, remote_invalidation: true, draft07: false, invalidate: None };
/// assert!(p.remote_invalidation);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyParams {
    /// `rdma_vers` of the reply's header: the call's.
    pub version: Version,
    /// `rdma_credit`: the credits granted (RFC 8166 section 3.3.1); on a -07 connection the
    /// running total the reply's (first) Send carries.
    pub credits: u32,
    /// On a -07 connection whose Sends are counted as they are posted
    /// ([`Transport::continue_with`]): `credits` is a placeholder, and the reply takes its
    /// running total when it is posted, waiting while the requester's window is shut until
    /// its RDMA2_GRANT opens it (section 4.2.1). False elsewhere.
    pub credit_owed: bool,
    /// The reply inline threshold: the largest Send the Requester receives (RFC 8166 section
    /// 3.3.2).
    pub reply_inline_threshold: usize,
    /// Whether both peers set the R flag in their private data (RFC 8797 section 4.1; see
    /// `cm_private_data::negotiate`), so the reply may be a Send with Invalidate.
    pub remote_invalidation: bool,
    /// Whether the reply is written in draft-ietf-nfsv4-rpcrdma-version-two-07's header types
    /// (RDMA2_REPLY_INLINE, RDMA2_REPLY_EXTERNAL), as its call was; `version` is then 2.
    pub draft07: bool,
    /// On a -07 connection, the handle the call's `rdma_inv_handle` named for remote
    /// invalidation (section 6.5): the reply is a Send With Invalidate of it when
    /// `remote_invalidation` holds too. Elsewhere `None`: RFC 8797's rule picks the key.
    pub invalidate: Option<u32>,
}

/// What [`send_reply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplySent {
    /// Inline (`RDMA_MSG`) or in the Reply chunk (`RDMA_NOMSG`).
    pub form: ReplyForm,
    /// How many DDP-eligible results went into Write chunks.
    pub reduced_results: usize,
    /// The Requester rkey the Send invalidated, if it was a Send with Invalidate.
    pub invalidated: Option<u32>,
    /// The Sends the reply took: 1, or on a -07 connection the parts of a continued reply
    /// (draft-ietf-nfsv4-rpcrdma-version-two-07 section 6.6.4).
    pub parts: usize,
    /// Of the results a handler lent ([`send_reply_with_lent_results`]), those placed in Write
    /// chunks and RDMA-Written from the registered copies the connection keeps (a result of no
    /// bytes is placed in its chunk with no Write).
    pub lent_results: usize,
    /// Of the results a handler lent, those copied for this reply: into a registered copy the
    /// connection keeps (the first time it sends one), or into the reply when that could not
    /// go with each of them in a Write chunk.
    pub lent_copies: usize,
}

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
/// 3.4.4). See the [module documentation](super) for an example.
pub fn fetch_call<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &Header<'_>,
    ulb: &U,
    out: &mut Vec<u8>,
) -> Result<(), DataPathError> {
    let msg = call.to_msg();
    let reads = call.read_list();
    let landing_len = fetch_len(reads) as usize;
    if landing_len == 0 {
        reassemble_call(&msg, call.payload(), &[], out)?;
    } else if matches!(msg.rdma_body, RdmaBody::RdmaMsg(_)) {
        read_in_place(conn, &msg, call.payload(), landing_len, out)?;
    } else {
        let landing = conn.chunk_region(landing_len)?;
        let fetched = post_reads(conn, &landing, read_list_fetches(reads).map(|f| (f.landing, f)));
        // (The landing buffer is deregistered and freed, not kept for the connection's next
        // call: its size is the peer's to choose, and a server's budget counts it only while
        // the call is fetched.)
        let mut landing = take_bytes(landing);
        landing.truncate(landing_len);
        fetched.and_then(|()| Ok(reassemble_call(&msg, call.payload(), &landing, out)?))?;
    }
    check_call_ddp_eligibility(&msg, out, ulb, &mut Vec::new())?;
    Ok(())
}

/// Builds an `RDMA_MSG` call in `out` with each Read chunk read straight to its place: the
/// inline pieces and padding are written first, then `out` is registered for the Reads.
fn read_in_place<B: Backend>(
    conn: &Transport<B>,
    msg: &RdmaMsg<'_>,
    inline: &[u8],
    landing_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), DataPathError> {
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
    // Where each Read chunk's landing range (read_list_fetches' placement) starts in `out`,
    // as (landing start, offset in out); a Read list holds few chunks.
    let mut places = Vec::new();
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
    let reads = match msg.rdma_body {
        RdmaBody::RdmaMsg(h) => h.rdma_reads,
        _ => unreachable!("read_in_place is for RDMA_MSG"),
    };
    let region = conn.pd().register(std::mem::take(out), Access::LOCAL_WRITE)?;
    let placed = read_list_fetches(reads).map(|f| {
        // The chunk that holds the segment starts at or before its landing offset.
        let (start, to) = places.iter().rev().find(|(start, _)| *start <= f.landing).copied().unwrap_or_default();
        (to + f.landing - start, f)
    });
    let fetched = post_reads(conn, &region, placed);
    *out = take_bytes(region);
    fetched
}

/// Posts one RDMA Read per `(where in region, segment)` and waits for them all, even after a
/// post failed (what was posted still completes or flushes into `region`). A segment the
/// requester offered with its call (`QueuePair::offer_read`, over TCP) is copied from the
/// offer instead, with no Read and nothing to wait for: not even the work requests posted
/// before, behind which a Read's completion would queue (the reply Send of the call before,
/// whose acknowledgement the requester may not send for a while).
fn post_reads<B: Backend>(
    conn: &Transport<B>,
    region: &B::Region,
    fetches: impl Iterator<Item = (usize, Fetch)>,
) -> Result<(), DataPathError> {
    let mut ids = Vec::new();
    let mut posted = Ok(());
    for (at, f) in fetches.filter(|(_, f)| f.length > 0) {
        let local = Sge::new(region, at, f.length as usize);
        let remote = RemoteBuf { addr: f.offset, rkey: f.handle };
        if conn.qp().take_offered(local, remote) {
            continue;
        }
        let id = conn.wr_id();
        // Reads are always waited for, and so signaled (`post_sq` records their order).
        match conn.post_sq(id, None, |qp, _| qp.post_read(id, &[local], remote)) {
            Ok(()) => ids.push(id),
            Err(e) => {
                posted = Err(e.into());
                break;
            }
        }
    }
    let waited = conn.wait_all(&ids);
    posted.and(waited)
}

/// Sends `reply` (a whole RPC Reply message) for the accepted call header `call`, whose RPC
/// call message is `call_message` (the binding reads its procedure to tell which results are
/// DDP-eligible, RFC 8166 section 6.1): `marshal_reply` places the DDP-eligible results `ulb`
/// finds into the Requester's Write chunks
/// and, when the reply does not fit inline, the reduced reply into its Reply chunk (RFC 8166
/// sections 3.4.6 and 3.5.3); those bytes go by RDMA Write, then the header and inline payload
/// by one Send, which the Writes precede (RDMA ordering, RFC 8166 section 3.4.6.1). Returns once
/// all completed.
///
/// The Send invalidates a Requester rkey when `params.remote_invalidation` allows it and, as
/// the Linux server does (docs/design.md), every segment of every chunk of the call uses that one
/// rkey (`cm_private_data::reply_invalidate_rkey`), so it is an STag "associated only with"
/// this XID (RFC 8797 section 4.1).
///
/// A [`DataPathError::Reply`] whose `errcode()` is `ERR_CHUNK` means the Requester's chunks
/// cannot carry this reply: answer with [`send_error`]. See the [module documentation](super)
/// for an example.
pub fn send_reply<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &Header<'_>,
    call_message: &[u8],
    reply: &[u8],
    ulb: &U,
    params: &ReplyParams,
) -> Result<ReplySent, DataPathError> {
    send_reply_from(conn, call, call_message, ReplyBytes::Copied(reply), ulb, params)
}

/// [`send_reply`] without copying the reply: `reply`'s buffer is lent to the connection while
/// the reply goes out, registered as the source of the RDMA Writes of its DDP-eligible results
/// and Reply chunk (when it has any), and handed back unchanged. The Write is then the only
/// copy of a result's bytes, as with raw verbs.
///
/// ```no_run
/// # fn demo(conn: &negotiate::datapath::Transport<rpcrdma_verbs::InProcess>, call: &rpcrdma_v1::header::Header<'_>,
/// #         ulb: &rpcrdma_v1::ulb::OpaqueAtUlb, params: &negotiate::datapath::ReplyParams) {
/// let mut reply = vec![0, 0, 0, 7, 0, 0, 0, 1];
/// let call_message = [0, 0, 0, 7, 0, 0, 0, 0]; // the RPC call it answers
/// negotiate::datapath::send_reply_lent(conn, call, &call_message, &mut reply, ulb, params).unwrap();
/// assert_eq!(reply, [0, 0, 0, 7, 0, 0, 0, 1]); // handed back
/// # }
/// ```
pub fn send_reply_lent<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &Header<'_>,
    call_message: &[u8],
    reply: &mut Vec<u8>,
    ulb: &U,
    params: &ReplyParams,
) -> Result<ReplySent, DataPathError> {
    send_reply_from(conn, call, call_message, ReplyBytes::Lent(reply), ulb, params)
}

/// Where the RDMA Writes of a reply take their bytes from.
enum ReplyBytes<'r, R> {
    /// A registered copy of these bytes.
    Copied(&'r [u8]),
    /// This buffer itself, registered while the reply goes out.
    Lent(&'r mut Vec<u8>),
    /// A reduced reply and its lent results, each written from its registered copy
    /// ([`send_reply_with_lent_results`], which sends one this way only when every lent result
    /// goes in a Write chunk, nothing else does, and the rest goes inline).
    WithLentResults(ReducedReply<'r, R>),
}

impl<R> ReplyBytes<'_, R> {
    /// The reply in one slice, unless its results were lent.
    fn whole(&self) -> Option<&[u8]> {
        match self {
            ReplyBytes::Copied(b) => Some(b),
            ReplyBytes::Lent(v) => Some(v),
            ReplyBytes::WithLentResults(_) => None,
        }
    }

    /// Every DDP-eligible result of the reply into `out` ([`UpperLayerBinding::reply_ddp_items`]).
    fn items<U: UpperLayerBinding + ?Sized>(
        &self,
        call_message: &[u8],
        ulb: &U,
        out: &mut Vec<DdpItem>,
    ) -> Result<(), DataPathError> {
        match self {
            ReplyBytes::WithLentResults(g) => g.items(call_message, ulb, out)?,
            ReplyBytes::Copied(b) => ulb.reply_ddp_items(call_message, b, 0, out),
            ReplyBytes::Lent(v) => ulb.reply_ddp_items(call_message, v, 0, out),
        }
        Ok(())
    }

    /// The reply's XID and length (`NotXdr` when too short for an XID).
    fn xid_and_len(&self) -> Result<(u32, usize), ReplyError> {
        let (xid, len) = match self {
            ReplyBytes::WithLentResults(g) => (g.xid(), g.len()),
            _ => {
                let b = self.whole().unwrap_or_default();
                (b.first_chunk::<4>().map(|w| u32::from_be_bytes(*w)), b.len())
            }
        };
        xid.map(|x| (x, len)).ok_or(ReplyError::NotXdr { len })
    }

    /// Copies bytes `range` of the reply into `dst`; `items` are [`ReplyBytes::items`].
    fn copy(&self, range: std::ops::Range<usize>, items: &[DdpItem], dst: &mut [u8]) {
        match self {
            ReplyBytes::WithLentResults(g) => g.copy(range, items, dst),
            _ => dst.copy_from_slice(&self.whole().unwrap_or_default()[range]),
        }
    }
}

fn send_reply_from<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &Header<'_>,
    call_message: &[u8],
    reply: ReplyBytes<'_, B::Region>,
    ulb: &U,
    params: &ReplyParams,
) -> Result<ReplySent, DataPathError> {
    // On -07 the reply's Sends go out with no other message's between (sections 4.1 and
    // 6.3.9), and take their running totals in posting order (4.2.1).
    let mut stream = params.draft07.then(|| conn.payload_stream());
    // (No clock read off -07.)
    let deadline = params.draft07.then(|| conn.draft07_deadline());
    let deadline = || deadline.unwrap_or_else(|| conn.draft07_deadline());
    // An owed total is taken once the Send is filled (`post_send_filled_draft07`): a reply that
    // cannot be filled (its chunks cannot carry it) uses no place in the window.
    let take = params.credit_owed.then(deadline);
    let with_lent = matches!(reply, ReplyBytes::WithLentResults(_));
    let sent = SCRATCH.with_borrow_mut(|(results, out)| {
        results.clear();
        reply.items(call_message, ulb, results)?;
        let (provided, req) = marshal_inputs(call, params, results);
        out.set_version(params.version);
        let rules =
            Negotiated { client_to_server: 0, server_to_client: 0, remote_invalidation: params.remote_invalidation };
        let invalidated = if params.draft07 {
            params.invalidate.filter(|_| params.remote_invalidation)
        } else {
            reply_invalidate_rkey(&rules, call_rkeys(call))
        };
        // Nothing waits for the reply's Send where the connection says so
        // (`Transport::set_unwaited_replies`: over TCP). A failure still ends the connection:
        // the Send's error completion or the Error state reach whoever reaps next. (-07
        // replies keep their wait: their Sends take credits and a Payload stream in order.)
        let unwaited = !params.draft07 && conn.unwaited_replies;
        let id = if unwaited {
            // Waited for, each reply's own completion was reaped and freed its send-queue
            // slots; unwaited, what the queue holds is reaped before each reply instead, so
            // that replies posted faster than their completions are reaped do not fill it.
            conn.reap_queued();
            conn.unwaited_wr_id()
        } else {
            conn.wr_id()
        };
        let mut source = None;
        // Taken by the Writes once the reply is marshaled; still here when it could not be
        // (a -07 reply may then continue across Sends).
        let mut reply = Some(reply);
        // Marshaled straight into the Send's registered buffer (marshal_reply never writes more
        // than the reply inline threshold), the Writes to go in one chain with the Send.
        let fill = |buf: &mut [u8], chain: &mut ChainedWrites<B::Region>| {
            let bytes = reply.as_ref().expect("taken only below");
            let (xid, len) = bytes.xid_and_len()?;
            marshal_reply_of_len(xid, len, provided, &req, buf, out)?;
            let mut at = if params.draft07 { draft07_header(out, params.credits, buf)? } else { out.header_len() };
            for range in out.inline() {
                bytes.copy(range.clone(), results, &mut buf[at..at + range.len()]);
                at += range.len();
            }
            source = chain_writes(conn, reply.take().expect("taken once"), results, out, chain)?;
            Ok(at)
        };
        let threshold = params.reply_inline_threshold;
        let posted = if params.draft07 {
            conn.post_send_filled_draft07(id, invalidated, threshold, params.credits, take, fill)
        } else {
            conn.post_send_filled(id, invalidated, threshold, fill)
        };
        if let (Err(DataPathError::Reply(e)), Some(bytes)) = (&posted, reply.as_ref().and_then(ReplyBytes::whole)) {
            if params.draft07 && conn.max_parts() > 1 && continued::answers(e) {
                return continued::send_reply(conn, call, bytes, results, params, deadline(), out);
            }
        }
        let sent = posted.and_then(|()| if unwaited { Ok(()) } else { conn.wait(id).map(drop) });
        // The Send completed after the Writes before it, or (unwaited) their memory was read
        // as they were posted (or the connection is down): the source is free again.
        give_back_source(conn, source, sent.is_ok());
        sent?;
        let lent_results = if with_lent { out.reduced_results() } else { 0 };
        Ok(ReplySent {
            form: out.form(),
            reduced_results: out.reduced_results(),
            invalidated,
            parts: 1,
            lent_results,
            lent_copies: 0,
        })
    });
    // A reply whose Sends failed partway is a broken sequence: nothing follows it on the
    // stream, and the caller closes the connection (RFC 8166 section 4.5.4). One that failed
    // before any Send is answered by the caller, whose answer lets the queued ones go after it.
    if let (Err(_), Some(stream)) = (&sent, stream.as_mut()) {
        stream.break_off();
    }
    sent
}

/// What `marshal_reply` takes for the reply to `call`: the chunks it provided, and the reply's
/// credits, threshold and DDP-eligible `results`.
fn marshal_inputs<'a>(
    call: &Header<'a>,
    params: &ReplyParams,
    results: &'a [DdpItem],
) -> (ProvidedChunks<'a>, ReplyRequest<'a>) {
    let provided = ProvidedChunks { writes: call.write_list(), reply: call.reply_chunk() };
    let req = ReplyRequest {
        credits: params.credits,
        reply_inline_threshold: params.reply_inline_threshold,
        ddp_results: results,
    };
    (provided, req)
}

/// The Writes' source once the Send after them completed, or once they were posted where the
/// queue pair read their memory as they were (`Transport::set_unwaited_replies`): a lent
/// buffer goes home, a copy to the connection's registration cache if `completed` (otherwise
/// a Write may still be reading it: its handle is let go, and a Write still posted keeps the
/// region alive until it ends, never reading the next reply's bytes).
fn give_back_source<B: Backend>(
    conn: &Transport<B>,
    source: Option<(B::Region, Option<&mut Vec<u8>>)>,
    completed: bool,
) {
    match source {
        Some((region, Some(home))) => *home = take_bytes(region),
        Some((region, None)) if completed => conn.keep_region(region),
        Some((_, None)) | None => {}
    }
}

/// Rewrites the header `marshal_reply` wrote (Version One's shape) in
/// draft-ietf-nfsv4-rpcrdma-version-two-07's: RDMA2_REPLY_INLINE with the Write list, or
/// RDMA2_REPLY_EXTERNAL with the Write list and the Reply chunk the reply went in (sections
/// 6.3.8 and 6.3.10; the lists are Version One's, word for word). Returns its length, where the
/// inline reply starts. It is 8 bytes shorter than the Version One header `marshal_reply`
/// judged the inline threshold by, so a reply that fits that way fits this way too.
fn draft07_header(out: &MarshaledReply, credit: u32, buf: &mut [u8]) -> Result<usize, DataPathError> {
    let written = out.write_list().with_xdr(|writes| {
        let writes = List::from_slice(writes);
        match (out.form(), out.reply_chunk()) {
            (ReplyForm::ReplyChunk, Some(target)) => {
                let reply = XdrWriteChunk { target: Seq::from_slice(target) };
                marshal07::reply_external(buf, out.xid(), credit, writes, reply)
            }
            _ => marshal07::reply_inline_header(buf, out.xid(), credit, writes),
        }
    });
    Ok(written?)
}

/// Adds the RDMA Writes of a reply's DDP-eligible results and Reply chunk to `chain`, from a
/// registered source: a copy of the reply, or the lent buffer itself. They go out with the
/// reply's Send, before it, in one chain (`Transport::post_send_filled`), and are not waited for
/// one by one: the Send completes after them (RFC 8166 section 3.4.6.1 relies on the send
/// queue's order), and a Write that fails puts the queue pair in the Error state, which fails
/// the Send too. Returns the source, with the lent buffer's home, to take back once the Send
/// completed ([`give_back_source`]).
#[allow(clippy::type_complexity)]
fn chain_writes<'r, B: Backend>(
    conn: &Transport<B>,
    reply: ReplyBytes<'r, B::Region>,
    items: &[DdpItem],
    out: &MarshaledReply,
    chain: &mut ChainedWrites<B::Region>,
) -> Result<Option<(B::Region, Option<&'r mut Vec<u8>>)>, DataPathError> {
    if out.writes().is_empty() {
        return Ok(None);
    }
    let (source, home) = match reply {
        // Into a region the connection keeps registered (its registration cache).
        ReplyBytes::Copied(bytes) => (conn.chunk_copy(bytes)?, None),
        ReplyBytes::Lent(home) => (conn.pd().register(std::mem::take(home), Access::empty())?, Some(home)),
        ReplyBytes::WithLentResults(r) => return chain_lent_writes(r, items, out, chain).map(|()| None),
    };
    chain.extend(out.writes().iter().map(|w| chained(&source, w.src.start, w)));
    Ok(Some((source, home)))
}

/// [`chain_writes`] for lent results: each Write from the registered copy of the result it
/// carries (`send_reply_with_lent_results` sends a reply this way only when every Write is one
/// of those). Nothing is given back: the copies stay with the connection, and a Write still
/// posted holds its region itself (the verbs contract: a posted work request keeps its own
/// handle, as hardware keeps the pinned pages), so a copy let go meanwhile is not reused.
fn chain_lent_writes<R: MemoryRegion>(
    reply: ReducedReply<'_, R>,
    items: &[DdpItem],
    out: &MarshaledReply,
    chain: &mut ChainedWrites<R>,
) -> Result<(), DataPathError> {
    for w in out.writes() {
        let source = reply.lent_at(&w.src, items).and_then(|(k, at)| Some((reply.sources[k].as_ref()?, at)));
        let Some((region, at)) = source else {
            return Err(LentMismatch::Unplaced { write: w.src.clone() }.into());
        };
        chain.push(chained(region, at, w));
    }
    Ok(())
}

/// One RDMA Write `w` of a reply, from `region` at `at`.
fn chained<R: MemoryRegion>(region: &R, at: usize, w: &RdmaWrite) -> ChainedWrite<R> {
    let remote = RemoteBuf { addr: w.offset, rkey: w.handle };
    ChainedWrite { region: region.clone(), offset: at, len: w.src.len(), remote }
}

thread_local! {
    /// Each thread's marshaling state, kept between replies so that a small reply allocates
    /// nothing: the DDP-eligible results and the marshaled reply's lists.
    static SCRATCH: RefCell<(Vec<DdpItem>, MarshaledReply)> = RefCell::new(Default::default());
}

/// Sends an RDMA_ERROR (`bytes`, e.g. `rpcrdma_v1::verdict::ErrorReply::as_bytes`) as the reply
/// to a call (RFC 8166 section 4.5). Always a plain Send: error replies never invalidate
/// (docs/design.md, as the Linux server).
///
/// ```no_run
/// # fn demo(conn: &negotiate::datapath::Transport<rpcrdma_verbs::InProcess>) {
/// use rpcrdma_v1::verdict::ErrorReply;
/// let err = ErrorReply::err_chunk(0x1234, rpcrdma_v1::Version::ONE, 32);
/// negotiate::datapath::send_error(conn, err.as_bytes()).unwrap();
/// # }
/// ```
pub fn send_error<B: Backend>(conn: &Transport<B>, bytes: &[u8]) -> Result<(), DataPathError> {
    let id = conn.post_send_bytes(bytes, None)?;
    conn.wait(id).map(drop)
}

/// [`send_error`] for a message on a draft-ietf-07 connection (RDMA2_ERROR, RDMA2_GRANT,
/// CONNPROP) whose `rdma_credit` is a running total: the Send carries the highest total this
/// connection's Sends have carried, so that totals never go down on the wire (section 4.2.1:
/// the peer reads a lower one as a lowered limit), whichever thread posts first.
///
/// ```
/// # use negotiate::datapath::{send_draft07, ReceivePool, Transport};
/// # use rpcrdma_verbs::{Backend, ConnectRequest, InProcess, Listener, QpCaps};
/// # use std::time::Duration;
/// # let t = Duration::from_secs(5);
/// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
/// # let addr = listener.local_addr();
/// # let (ready, posted) = std::sync::mpsc::channel();
/// # let peer = std::thread::spawn(move || {
/// #     let pd = InProcess.alloc_pd().unwrap();
/// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
/// #     let conn: Transport<InProcess> = Transport::new(pd, qp, t);
/// #     let pool = ReceivePool::new(&conn, 4, 64).unwrap();
/// #     ready.send(()).unwrap(); // its Receives are posted
/// #     let got: Vec<Vec<u8>> = (0..3).map(|_| pool.receive(&conn).unwrap().bytes).collect();
/// #     got
/// # });
/// # let pd = InProcess.alloc_pd().unwrap();
/// # let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// # let conn: Transport<InProcess> = Transport::new(pd, qp, t);
/// # posted.recv().unwrap();
/// let grant = |total: u32| [[0u8; 8].as_slice(), &total.to_be_bytes(), &[0, 0, 0, 5]].concat();
/// for total in [40, 36, 44] {
///     send_draft07(&conn, &grant(total)).unwrap();
/// }
/// # let got = peer.join().unwrap();
/// # let totals: Vec<u32> = got.iter().map(|m| u32::from_be_bytes(m[8..12].try_into().unwrap())).collect();
/// // The peer received totals 40, 40, 44: never one below the last.
/// # assert_eq!(totals, [40, 40, 44]);
/// ```
pub fn send_draft07<B: Backend>(conn: &Transport<B>, bytes: &[u8]) -> Result<(), DataPathError> {
    let carried = Fixed::read(bytes).and_then(|f| f.credit).unwrap_or(0);
    let post = |take: Option<Instant>| {
        let id = conn.wr_id();
        conn.post_send_filled_draft07(id, None, bytes.len(), carried, take, |buf, _| {
            buf.copy_from_slice(bytes);
            Ok(bytes.len())
        })?;
        conn.wait(id).map(drop)
    };
    // A GRANT may go between a continued message's parts and beyond the window (section
    // 4.2.1.1): it carries the total it was given. Anything else waits for the payload stream
    // and takes its total in posting order (a CONNPROP or ERROR between a REPLY_MIDDLE and
    // its next part breaks the sequence, section 6.3.9).
    if is_grant(bytes) {
        return post(None);
    }
    let _stream = conn.payload_stream();
    post(Some(conn.draft07_deadline()))
}

/// Whether a -07 message is an RDMA2_GRANT.
pub(super) fn is_grant(bytes: &[u8]) -> bool {
    Fixed::read(bytes).and_then(|f| f.proc) == Some(rpcrdma_v2::draft07::xdr::RDMA2_GRANT)
}

/// Sends a message that is not a reply (an RDMA_ERROR, an extension's answer, a GRANT or a
/// CONNPROP) on a connection that speaks -07 (`draft07`: in order with the replies' running
/// totals, [`send_draft07`]) or another version ([`send_error`]).
pub(crate) fn send_answer<B: Backend>(conn: &Transport<B>, bytes: &[u8], draft07: bool) -> Result<(), DataPathError> {
    if draft07 {
        send_draft07(conn, bytes)
    } else {
        send_error(conn, bytes)
    }
}

/// The handles of every segment of every chunk a call provided: Read list, Write list, Reply
/// chunk.
fn call_rkeys<'a>(call: &Header<'a>) -> impl Iterator<Item = u32> + 'a {
    let reads = call.read_list().iter().map(|r| r.target.handle);
    let writes = call.write_list().iter().flat_map(|c| c.target.iter().map(|s| s.handle));
    let reply = call.reply_chunk().into_iter().flat_map(|c| c.target.iter().map(|s| s.handle));
    reads.chain(writes).chain(reply)
}
