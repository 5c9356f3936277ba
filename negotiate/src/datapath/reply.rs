//! The Responder's side: fetch a call's Read chunks, send its reply.

use std::cell::RefCell;

use cm_private_data::{reply_invalidate_rkey, Negotiated};
use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_reply::{marshal_reply, MarshaledReply, ProvidedChunks, ReplyForm, ReplyRequest};
use rpcrdma_v1::reassemble::{check_call_ddp_eligibility, fetch_len, read_list_fetches, reassemble_call};
use rpcrdma_v1::ulb::{DdpItem, UpperLayerBinding};
use rpcrdma_v1::Version;
use verbs::{Access, Backend, ProtectionDomain, QueuePair, RemoteBuf, Sge};

use super::{take_bytes, Connection, DataPathError};

/// What the negotiation decided for the replies of a connection.
///
/// ```
/// use negotiate::datapath::ReplyParams;
/// let p = ReplyParams { version: rpcrdma_v1::Version::ONE, credits: 32, reply_inline_threshold: 1024, remote_invalidation: true };
/// assert!(p.remote_invalidation);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyParams {
    /// `rdma_vers` of the reply's header: the call's.
    pub version: Version,
    /// `rdma_credit`: the credits granted (RFC 8166 section 3.3.1).
    pub credits: u32,
    /// The reply inline threshold: the largest Send the Requester receives (RFC 8166 section
    /// 3.3.2).
    pub reply_inline_threshold: usize,
    /// Whether both peers set the R flag in their private data (RFC 8797 section 4.1; see
    /// `cm_private_data::negotiate`), so the reply may be a Send with Invalidate.
    pub remote_invalidation: bool,
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
}

/// Rebuilds the whole RPC Call message of an accepted call header into `out`: pulls every Read
/// chunk segment with an RDMA Read into one registered landing buffer (RFC 8166 sections 3.4.5
/// and 3.4.5.1; `read_list_fetches` places them), waits for them, reassembles
/// (`reassemble_call`, inline payload or Position-Zero chunk, padding restored) and checks the
/// Read chunks against the DDP-eligible items `ulb` finds (RFC 8166 section 6.1.1: on
/// [`DataPathError::DdpViolation`] do not process the call; answer `GARBAGE_ARGS`).
///
/// The chunk sizes were bounded by the header's limits when it was accepted (RFC 8166 section
/// 3.4.4). See the [module documentation](super) for an example.
pub fn fetch_call<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Connection<B>,
    call: &Header<'_>,
    ulb: &U,
    out: &mut Vec<u8>,
) -> Result<(), DataPathError> {
    let msg = call.to_msg();
    let reads = call.read_list();
    let landing = match fetch_len(reads) {
        0 => Vec::new(),
        len => {
            let region = conn.register_writable(len as usize)?;
            let mut ids = Vec::with_capacity(reads.len());
            for f in read_list_fetches(reads).filter(|f| f.length > 0) {
                let id = conn.wr_id();
                let local = Sge::new(&region, f.landing, f.length as usize);
                let remote = RemoteBuf { addr: f.offset, rkey: f.handle };
                // Reads are always waited for, and so signaled (`post_sq` records their order).
                conn.post_sq(id, None, |qp, _| qp.post_read(id, &[local], remote))?;
                ids.push(id);
            }
            conn.wait_all(&ids)?;
            take_bytes(region)
        }
    };
    let reassembled = reassemble_call(&msg, call.payload(), &landing, out);
    conn.recycle_chunk(landing);
    reassembled?;
    check_call_ddp_eligibility(&msg, out, ulb, &mut Vec::new())?;
    Ok(())
}

/// Sends `reply` (a whole RPC Reply message) for the accepted call header `call`:
/// `marshal_reply` places the DDP-eligible results `ulb` finds into the Requester's Write chunks
/// and, when the reply does not fit inline, the reduced reply into its Reply chunk (RFC 8166
/// sections 3.4.6 and 3.5.3); those bytes go by RDMA Write, then the header and inline payload
/// by one Send, which the Writes precede (RDMA ordering, RFC 8166 section 3.4.6.1). Returns once
/// all completed.
///
/// The Send invalidates a Requester rkey when `params.remote_invalidation` allows it and, as
/// the Linux server does (DESIGN.md), every segment of every chunk of the call uses that one
/// rkey (`cm_private_data::reply_invalidate_rkey`), so it is an STag "associated only with"
/// this XID (RFC 8797 section 4.1).
///
/// A [`DataPathError::Reply`] whose `errcode()` is `ERR_CHUNK` means the Requester's chunks
/// cannot carry this reply: answer with [`send_error`]. See the [module documentation](super)
/// for an example.
pub fn send_reply<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Connection<B>,
    call: &Header<'_>,
    reply: &[u8],
    ulb: &U,
    params: &ReplyParams,
) -> Result<ReplySent, DataPathError> {
    SCRATCH.with_borrow_mut(|(results, out)| {
        results.clear();
        ulb.reply_ddp_items(reply, 0, results);
        let provided = ProvidedChunks { writes: call.write_list(), reply: call.reply_chunk() };
        let req = ReplyRequest {
            credits: params.credits,
            reply_inline_threshold: params.reply_inline_threshold,
            ddp_results: results,
        };
        out.set_version(params.version);
        let rules =
            Negotiated { client_to_server: 0, server_to_client: 0, remote_invalidation: params.remote_invalidation };
        let invalidated = reply_invalidate_rkey(&rules, call_rkeys(call));
        let id = conn.wr_id();
        // Marshaled straight into the Send's registered buffer (marshal_reply never writes more
        // than the reply inline threshold), and the Writes posted before the Send is.
        conn.post_send_filled(id, invalidated, params.reply_inline_threshold, |buf| {
            marshal_reply(reply, provided, &req, buf, out)?;
            post_writes(conn, reply, out)?;
            let mut at = out.header_len();
            for range in out.inline() {
                buf[at..at + range.len()].copy_from_slice(&reply[range.clone()]);
                at += range.len();
            }
            Ok(at)
        })?;
        conn.wait(id)?;
        Ok(ReplySent { form: out.form(), reduced_results: out.reduced_results(), invalidated })
    })
}

/// Posts the RDMA Writes of a reply's DDP-eligible results and Reply chunk, from a
/// registered copy of the reply. They are not waited for one by one: the Send posted after
/// them on the same send queue completes after them (RFC 8166 section 3.4.6.1 relies on that
/// order), and a Write that fails puts the queue pair in the Error state, which fails the Send
/// too.
fn post_writes<B: Backend>(conn: &Connection<B>, reply: &[u8], out: &MarshaledReply) -> Result<(), DataPathError> {
    if out.writes().is_empty() {
        return Ok(());
    }
    let mut copy = conn.chunk_buffer(reply.len());
    copy.copy_from_slice(reply);
    let source = conn.pd().register(copy, Access::empty())?;
    for w in out.writes() {
        let local = Sge::new(&source, w.src.start, w.src.len());
        let (id, remote) = (conn.unwaited_wr_id(), RemoteBuf { addr: w.offset, rkey: w.handle });
        conn.post_sq(id, None, |qp, flags| qp.post_write_with(id, &[local], remote, flags))?;
    }
    Ok(())
}

thread_local! {
    /// Each thread's marshaling state, kept between replies so that a small reply allocates
    /// nothing: the DDP-eligible results and the marshaled reply's lists.
    static SCRATCH: RefCell<(Vec<DdpItem>, MarshaledReply)> = RefCell::new(Default::default());
}

/// Sends an RDMA_ERROR (`bytes`, e.g. `rpcrdma_v1::verdict::ErrorReply::as_bytes`) as the reply
/// to a call (RFC 8166 section 4.5). Always a plain Send: error replies never invalidate
/// (DESIGN.md, as the Linux server).
///
/// ```no_run
/// # fn demo(conn: &negotiate::datapath::Connection<verbs::InProcess>) {
/// use rpcrdma_v1::verdict::ErrorReply;
/// let err = ErrorReply::err_chunk(0x1234, rpcrdma_v1::Version::ONE, 32);
/// negotiate::datapath::send_error(conn, err.as_bytes()).unwrap();
/// # }
/// ```
pub fn send_error<B: Backend>(conn: &Connection<B>, bytes: &[u8]) -> Result<(), DataPathError> {
    let id = conn.post_send_bytes(bytes, None)?;
    conn.wait(id).map(drop)
}

/// The handles of every segment of every chunk a call provided: Read list, Write list, Reply
/// chunk.
fn call_rkeys<'a>(call: &Header<'a>) -> impl Iterator<Item = u32> + 'a {
    let reads = call.read_list().iter().map(|r| r.target.handle);
    let writes = call.write_list().iter().flat_map(|c| c.target.iter().map(|s| s.handle));
    let reply = call.reply_chunk().into_iter().flat_map(|c| c.target.iter().map(|s| s.handle));
    reads.chain(writes).chain(reply)
}
