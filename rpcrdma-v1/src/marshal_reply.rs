//! Marshaling an RPC Reply message: the Responder's side of RFC 8166
//! sections 3.4.6 and 3.5.
//!
//! [`marshal_reply`] takes the RPC Reply message (bytes, unreduced), its
//! DDP-eligible results (from
//! [`UpperLayerBinding::reply_ddp_items`](crate::ulb::UpperLayerBinding::reply_ddp_items) with
//! `reduced == 0`), the chunks the Requester provided in its call
//! ([`ProvidedChunks`]) and the Requester's inline threshold, and produces
//! a [`MarshaledReply`]: the RDMA Writes to post (each a byte range of the
//! reply and the remote handle and offset it goes to), the encoded transport
//! header, and the inline payload as ranges of the reply.
//!
//! One protocol step per function:
//!
//! 1. [`encode_write_list`]: fill the provided Write chunks, in order, with
//!    the DDP-eligible results — data only, never roundup padding — and copy
//!    the Write list into the reply with each segment length rewritten to
//!    what was written (3.4.6, 3.4.6.2; draft 5.3.2). A result too large for
//!    its chunk is [`ReplyError::WriteChunkTooSmall`], which the caller
//!    reports with `RDMA_ERROR`/`ERR_CHUNK` ([`ReplyError::errcode`]).
//! 2. The reduced Payload stream ([`crate::ulb::reduce_payload`]) goes
//!    inline (`RDMA_MSG`) when the whole Send fits the Requester's inline
//!    threshold, and otherwise into the Reply chunk by
//!    [`encode_reply_chunk`] (`RDMA_NOMSG`; 3.5.3). Either way the Reply
//!    chunk, when provided, is copied into the reply with its lengths
//!    rewritten (draft 5.3.3) — all zero when unused.
//! 3. [`encode_reply_header`]: the transport header, with an empty Read
//!    list (draft 5.3.1: "Responders MUST leave the Read list empty in all
//!    replies").
//!
//! ```
//! use rpcrdma_v1::marshal_reply::*;
//! use rpcrdma_v1::rt::{List, Seq};
//! use rpcrdma_v1::ulb::{DdpItem, OpaqueAtUlb, UpperLayerBinding};
//! use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrWriteChunk};
//!
//! fn words(w: &[u32]) -> Vec<u8> {
//!     w.iter().flat_map(|w| w.to_be_bytes()).collect()
//! }
//! // An NFS-READ-like call and its reply (RFC 5531 headers, AUTH_NONE): the reply's 24-byte
//! // header (XID, REPLY, MSG_ACCEPTED, verifier, SUCCESS), then an opaque<> result: a length
//! // word (5), 5 bytes of data, 3 of padding.
//! let call = words(&[9, 0, 2, 100003, 3, 6, 0, 0, 0, 0]);
//! let mut reply = words(&[9, 1, 0, 0, 0, 0, 5]);
//! reply.extend_from_slice(b"hello\0\0\0");
//! let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24), max_result: 8192, max_reply: 64 };
//! let mut results = Vec::new();
//! ulb.reply_ddp_items(&call, &reply, 0, &mut results);
//! assert_eq!(results, [DdpItem::new(28, 5)]);
//!
//! // The Requester provided one 8 KiB Write chunk in two segments.
//! let segs = [XdrRdmaSegment { handle: 1, length: 4096, offset: 0x10000 },
//!             XdrRdmaSegment { handle: 1, length: 4096, offset: 0x11000 }];
//! let writes = [XdrWriteChunk { target: Seq::from_slice(&segs) }];
//! let provided = ProvidedChunks { writes: List::from_slice(&writes), reply: None };
//!
//! let req = ReplyRequest { credits: 32, reply_inline_threshold: 1024, ddp_results: &results };
//! let mut header = [0u8; 1024];
//! let mut out = MarshaledReply::default();
//! marshal_reply(&reply, provided, &req, &mut header, &mut out).unwrap();
//! assert_eq!(out.form(), ReplyForm::Inline);
//! // Five bytes go by RDMA Write, no padding (3.4.6.2) ...
//! assert_eq!(out.writes(), [RdmaWrite { handle: 1, offset: 0x10000, src: 28..33 }]);
//! // ... the copied Write list says so, segment count unchanged ...
//! assert_eq!(out.write_list().chunk(0).iter().map(|s| s.length).collect::<Vec<_>>(), [5, 0]);
//! // ... and the reduced reply keeps the length word.
//! assert_eq!(out.inline(), [0..28]);
//! ```

use core::ops::Range;

use crate::marshal_call::{reply_chunk_len, WriteChunks, FIXED_HEADER_LEN};
use crate::rt::{List, Seq, Xdr};
use crate::ulb::{check_items, reduce_payload, DdpItem, ItemError};
use crate::xdr::{RdmaBody, RdmaMsg, RpcRdmaErrcode, RpcRdmaHeader, RpcRdmaHeaderNomsg, XdrRdmaSegment, XdrWriteChunk};
use crate::Version;

/// The chunks a Requester provided for the reply in its call's transport
/// header: its Write list and Reply chunk (RFC 8166 section 4.3; draft
/// 5.3.2, 5.3.3).
///
/// ```
/// use rpcrdma_v1::marshal_reply::ProvidedChunks;
/// use rpcrdma_v1::rt::Xdr;
/// use rpcrdma_v1::xdr::RdmaMsg;
///
/// // A bare RDMA_MSG call header: no chunks.
/// let bytes = [0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
/// let (msg, _) = RdmaMsg::decode(&bytes).unwrap();
/// let provided = ProvidedChunks::from_call(&msg).unwrap();
/// assert!(provided.writes.is_empty() && provided.reply.is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProvidedChunks<'a> {
    /// The Write list, in list order.
    pub writes: List<'a, XdrWriteChunk<'a>>,
    /// The Reply chunk, if any.
    pub reply: Option<XdrWriteChunk<'a>>,
}

impl<'a> ProvidedChunks<'a> {
    /// The chunks of a decoded call header; `None` unless it is an
    /// `RDMA_MSG` or `RDMA_NOMSG`.
    pub fn from_call(call: &RdmaMsg<'a>) -> Option<Self> {
        match call.rdma_body {
            RdmaBody::RdmaMsg(h) => Some(ProvidedChunks { writes: h.rdma_writes, reply: h.rdma_reply }),
            RdmaBody::RdmaNomsg(h) => Some(ProvidedChunks { writes: h.rdma_writes, reply: h.rdma_reply }),
            _ => None,
        }
    }
}

/// Everything [`marshal_reply`] needs besides the reply, the provided chunks
/// and the header buffer.
///
/// ```
/// use rpcrdma_v1::marshal_reply::*;
/// use rpcrdma_v1::rt::Seq;
/// use rpcrdma_v1::xdr::{RpcRdmaErrcode, XdrRdmaSegment, XdrWriteChunk};
/// // A 2000-byte reply with nothing DDP-eligible, for a Requester that receives 1024.
/// // Its ONC RPC header: XID 3, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS.
/// let mut reply: Vec<u8> = [3u32, 1, 0, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// reply.resize(2000, 0);
/// let req = ReplyRequest { credits: 32, reply_inline_threshold: 1024, ddp_results: &[] };
/// let (mut header, mut out) = ([0u8; 1024], MarshaledReply::new());
///
/// // With the Reply chunk the Requester provided, it goes there (Long Reply).
/// let seg = [XdrRdmaSegment { handle: 4, length: 4096, offset: 0x2000 }];
/// let provided = ProvidedChunks { reply: Some(XdrWriteChunk { target: Seq::from_slice(&seg) }), ..Default::default() };
/// marshal_reply(&reply, provided, &req, &mut header, &mut out).unwrap();
/// assert_eq!(out.form(), ReplyForm::ReplyChunk);
/// assert_eq!(out.writes(), [RdmaWrite { handle: 4, offset: 0x2000, src: 0..2000 }]);
/// assert_eq!(out.reply_chunk().unwrap()[0].length, 2000);
///
/// // Without one, no RPC-level reply is possible: answer ERR_CHUNK instead.
/// let err = marshal_reply(&reply, ProvidedChunks::default(), &req, &mut header, &mut out).unwrap_err();
/// assert!(matches!(err, ReplyError::NoReplyChunk { threshold: 1024, .. }));
/// assert_eq!(err.errcode(), Some(RpcRdmaErrcode::ErrChunk));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyRequest<'p> {
    /// The credit value to grant, written into `rdma_credit` (RFC 8166
    /// section 3.3.1).
    pub credits: u32,
    /// The reply inline threshold: the largest Send the Requester can
    /// receive, transport header included (RFC 8166 section 3.3.2).
    pub reply_inline_threshold: usize,
    /// The reply's DDP-eligible results in the unreduced stream, in order.
    pub ddp_results: &'p [DdpItem],
}

/// How a reply travels (RFC 8166 section 3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReplyForm {
    /// `RDMA_MSG` with the (reduced) Payload stream inline (3.5.1, 3.5.2).
    #[default]
    Inline,
    /// `RDMA_NOMSG` with the (reduced) Payload stream in the Reply chunk
    /// (3.5.3, Long Reply).
    ReplyChunk,
}

/// One RDMA Write for the Responder to post before its Send: bytes `src` of
/// the reply message to the Requester's memory at (`handle`, `offset`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RdmaWrite {
    /// The remote segment's handle (steering tag).
    pub handle: u32,
    /// Where in the remote segment the bytes go.
    pub offset: u64,
    /// The bytes of the reply message to write.
    pub src: Range<usize>,
}

/// Why a reply could not be marshaled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyError {
    /// The reply is not an XDR stream with an XID (shorter than four bytes
    /// or not a multiple of four).
    #[error("an RPC message of {len} bytes is not an XDR stream with an XID")]
    NotXdr {
        /// The reply's length.
        len: usize,
    },
    /// The DDP-eligible results do not describe the reply.
    #[error("DDP-eligible results: {0}")]
    Items(#[from] ItemError),
    /// A DDP-eligible result is larger than the Write chunk provided for it
    /// (RFC 8166 section 4.5.3; report with `ERR_CHUNK`).
    #[error("result {chunk} needs {need} bytes but its Write chunk holds {have}")]
    WriteChunkTooSmall {
        /// Index of the Write chunk (and the result).
        chunk: usize,
        /// The result's length.
        need: u64,
        /// The chunk's length.
        have: u64,
    },
    /// The reduced reply does not fit inline and is larger than the Reply
    /// chunk (RFC 8166 section 4.5.3; report with `ERR_CHUNK`).
    #[error("the {need}-byte reduced reply does not fit the {have}-byte Reply chunk")]
    ReplyChunkTooSmall {
        /// The reduced reply's length.
        need: usize,
        /// The Reply chunk's length.
        have: u64,
    },
    /// The reply does not fit the Requester's inline threshold and there is
    /// no Reply chunk (report with `ERR_CHUNK`).
    #[error(
        "the {need}-byte reply does not fit the reply inline threshold of {threshold} and no Reply chunk was provided"
    )]
    NoReplyChunk {
        /// Header plus reduced reply.
        need: usize,
        /// The reply inline threshold.
        threshold: usize,
    },
    /// The reply's transport header alone, with the copied Write list and
    /// Reply chunk, exceeds the Requester's inline threshold (report with
    /// `ERR_CHUNK`).
    #[error("the reply's {header}-byte transport header exceeds the reply inline threshold of {threshold}")]
    HeaderExceedsThreshold {
        /// The header's length.
        header: usize,
        /// The reply inline threshold.
        threshold: usize,
    },
    /// The header buffer is too small for the transport header.
    #[error("the header buffer holds {have} bytes, the transport header needs {need}")]
    HeaderBufferTooSmall {
        /// The header's length.
        need: usize,
        /// The buffer's.
        have: usize,
    },
}

impl ReplyError {
    /// The `RDMA_ERROR` code to send the Requester instead of this reply, for
    /// failures caused by the chunks it provided (RFC 8166 section 4.5.3:
    /// "the Responder should send an RDMA_ERROR reply with an rdma_err
    /// value of ERR_CHUNK to indicate that no RPC-level reply is possible
    /// for that XID"); `None` for the caller's own mistakes.
    ///
    /// ```
    /// use rpcrdma_v1::marshal_reply::ReplyError;
    /// use rpcrdma_v1::xdr::RpcRdmaErrcode;
    /// let e = ReplyError::WriteChunkTooSmall { chunk: 0, need: 8192, have: 4096 };
    /// assert_eq!(e.errcode(), Some(RpcRdmaErrcode::ErrChunk));
    /// assert_eq!(ReplyError::NotXdr { len: 3 }.errcode(), None);
    /// ```
    pub fn errcode(&self) -> Option<RpcRdmaErrcode> {
        match self {
            ReplyError::WriteChunkTooSmall { .. }
            | ReplyError::ReplyChunkTooSmall { .. }
            | ReplyError::NoReplyChunk { .. }
            | ReplyError::HeaderExceedsThreshold { .. } => Some(RpcRdmaErrcode::ErrChunk),
            ReplyError::NotXdr { .. } | ReplyError::Items(_) | ReplyError::HeaderBufferTooSmall { .. } => None,
        }
    }
}

/// A marshaled reply: the RDMA Writes to post, the transport header's
/// length (the header is in the caller's buffer), and the inline payload as
/// ranges of the reply. Keep one and pass it to [`marshal_reply`] again to
/// reuse its memory.
///
/// ```
/// use rpcrdma_v1::header::{Header, HeaderLimits};
/// use rpcrdma_v1::marshal_reply::*;
/// // A 24-byte RPC reply that fits inline: XID 3, REPLY, MSG_ACCEPTED, AUTH_NONE
/// // verifier, SUCCESS, and no results.
/// let reply: Vec<u8> = [3u32, 1, 0, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// let req = ReplyRequest { credits: 8, reply_inline_threshold: 1024, ddp_results: &[] };
/// let (mut header, mut out) = ([0u8; 1024], MarshaledReply::new());
/// marshal_reply(&reply, ProvidedChunks::default(), &req, &mut header, &mut out).unwrap();
/// assert_eq!((out.form(), out.xid(), out.header_len()), (ReplyForm::Inline, 3, 28));
/// assert_eq!((out.inline(), out.send_len()), (&[0..24][..], 52));
/// assert!(out.writes().is_empty() && out.reply_chunk().is_none());
///
/// let mut send = Vec::new();
/// out.gather_into(&header, &reply, &mut send);
/// let h = Header::parse(&send, &HeaderLimits::default()).unwrap();
/// assert_eq!((h.xid(), h.credit(), h.payload()), (3, 8, &reply[..]));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MarshaledReply {
    vers: Version,
    form: ReplyForm,
    xid: u32,
    header_len: usize,
    inline: Vec<Range<usize>>,
    inline_len: usize,
    reduced_results: usize,
    writes: Vec<RdmaWrite>,
    write_list: WriteChunks,
    reply: WriteChunks,
}

impl MarshaledReply {
    /// An empty one, for Version One.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty one whose headers carry `rdma_vers` = `vers`: Version Two
    /// marshals its replys this way, its chunk lists being Version One's
    /// (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). Kept by
    /// [`MarshaledReply::clear`].
    ///
    /// ```
    /// # use rpcrdma_v1::marshal_reply::MarshaledReply;
    /// use rpcrdma_v1::Version;
    /// assert_eq!(MarshaledReply::with_version(Version::TWO).version(), Version::TWO);
    /// assert_eq!(MarshaledReply::new().version(), Version::ONE);
    /// ```
    pub fn with_version(vers: Version) -> Self {
        MarshaledReply { vers, ..Self::default() }
    }

    /// The `rdma_vers` its headers carry.
    ///
    /// ```
    /// assert_eq!(rpcrdma_v1::marshal_reply::MarshaledReply::default().version(), rpcrdma_v1::Version::ONE);
    /// ```
    pub fn version(&self) -> Version {
        self.vers
    }

    /// Sets the `rdma_vers` its next headers carry, so that one kept for reuse
    /// serves connections of either version.
    ///
    /// ```
    /// # use rpcrdma_v1::marshal_reply::MarshaledReply;
    /// use rpcrdma_v1::Version;
    /// let mut m = MarshaledReply::new();
    /// m.set_version(Version::TWO);
    /// assert_eq!(m.version(), Version::TWO);
    /// ```
    pub fn set_version(&mut self, vers: Version) {
        self.vers = vers;
    }

    /// Forget the last reply, keeping the memory.
    pub fn clear(&mut self) {
        self.form = ReplyForm::Inline;
        self.xid = 0;
        self.header_len = 0;
        self.inline.clear();
        self.inline_len = 0;
        self.reduced_results = 0;
        self.writes.clear();
        self.write_list.clear();
        self.reply.clear();
    }

    /// The form chosen.
    pub fn form(&self) -> ReplyForm {
        self.form
    }

    /// The reply's XID, copied into `rdma_xid`.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// Length of the transport header at the start of the header buffer.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The inline payload: ranges of the reply to gather after the header.
    /// Empty for [`ReplyForm::ReplyChunk`].
    pub fn inline(&self) -> &[Range<usize>] {
        &self.inline
    }

    /// Total length of [`MarshaledReply::inline`].
    pub fn inline_len(&self) -> usize {
        self.inline_len
    }

    /// Length of the RDMA Send: never more than the reply inline threshold.
    pub fn send_len(&self) -> usize {
        self.header_len + self.inline_len
    }

    /// How many DDP-eligible results went into Write chunks: the first
    /// `min(results, Write chunks)` (draft 5.3.2).
    pub fn reduced_results(&self) -> usize {
        self.reduced_results
    }

    /// The RDMA Writes to post before the Send, Write chunks first, then the
    /// Reply chunk.
    pub fn writes(&self) -> &[RdmaWrite] {
        &self.writes
    }

    /// The Write list as copied into the reply, lengths rewritten.
    pub fn write_list(&self) -> &WriteChunks {
        &self.write_list
    }

    /// The Reply chunk as copied into the reply, lengths rewritten; `None`
    /// when none was provided.
    pub fn reply_chunk(&self) -> Option<&[XdrRdmaSegment]> {
        (!self.reply.is_empty()).then(|| self.reply.chunk(0))
    }

    /// Copy the Send (header, then inline payload) into `out`.
    pub fn gather_into(&self, header: &[u8], reply: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.send_len());
        out.extend_from_slice(&header[..self.header_len]);
        for r in &self.inline {
            out.extend_from_slice(&reply[r.clone()]);
        }
    }

    fn header_len_now(&self) -> usize {
        FIXED_HEADER_LEN + 4 + self.write_list.encoded_list_len() + reply_chunk_len(self.reply_chunk().map(<[_]>::len))
    }
}

/// Fill the Requester's Write chunks with DDP-eligible results and copy the
/// Write list into the reply (RFC 8166 sections 3.4.6 and 3.4.6.2; draft
/// 5.3.2).
///
/// Result *i* goes into Write chunk *i*, "until either there are no more
/// results or no more Write chunks" (draft 5.3.2); later results stay in the
/// Payload stream. Each chunk is filled "contiguously and in segment array
/// order" with the result's data only: the Responder "MUST NOT write XDR
/// roundup padding into a Write chunk, even if the Requester made space
/// available for it" (3.4.6.2), so the chunk's returned length is the
/// result's encoded length. Every chunk is copied with its segment count,
/// handles and offsets unchanged and each length rewritten to the bytes
/// written into that segment; a chunk with no result is returned unused,
/// all lengths zero (3.4.6).
///
/// Appends the RDMA Writes to `out` and returns how many results were
/// placed. Fails with [`ReplyError::WriteChunkTooSmall`] when a result is
/// longer than its chunk.
pub fn encode_write_list(
    out: &mut MarshaledReply,
    results: &[DdpItem],
    writes: List<'_, XdrWriteChunk<'_>>,
) -> Result<usize, ReplyError> {
    let mut placed = 0;
    for (index, chunk) in writes.iter().enumerate() {
        out.write_list.start_chunk();
        let mut left = match results.get(index) {
            Some(item) => {
                let have: u64 = chunk.target.iter().map(|s| u64::from(s.length)).sum();
                if item.len as u64 > have {
                    return Err(ReplyError::WriteChunkTooSmall { chunk: index, need: item.len as u64, have });
                }
                placed += 1;
                item.offset..item.end()
            }
            None => 0..0,
        };
        for seg in chunk.target.iter() {
            let n = left.len().min(seg.length as usize);
            if n > 0 {
                out.writes.push(RdmaWrite { handle: seg.handle, offset: seg.offset, src: left.start..left.start + n });
                left.start += n;
            }
            out.write_list.push_segment(XdrRdmaSegment { length: n as u32, ..seg });
        }
    }
    Ok(placed)
}

/// Copy the Reply chunk into the reply and, when `payload` is `Some`, fill it
/// with the reduced Payload stream — given as ranges of `reply_len`-byte
/// reply — for a Long Reply (RFC 8166 section 3.5.3; draft 5.3.3: the
/// Responder "MUST copy that chunk into the associated Reply", "modified to
/// reflect the actual amount of data that is being returned in the Reply
/// chunk"). Segment count, handles and offsets are unchanged; lengths are
/// rewritten to what was written — all zero when `payload` is `None`. The
/// stream is written contiguously in segment order and already carries its
/// roundup padding (3.5.3).
///
/// Appends the RDMA Writes to `out`. Fails with
/// [`ReplyError::ReplyChunkTooSmall`] when the stream is longer than the
/// chunk.
pub fn encode_reply_chunk(
    out: &mut MarshaledReply,
    chunk: XdrWriteChunk<'_>,
    payload: Option<&[Range<usize>]>,
) -> Result<(), ReplyError> {
    let need: usize = payload.map_or(0, |p| p.iter().map(Range::len).sum());
    let have: u64 = chunk.target.iter().map(|s| u64::from(s.length)).sum();
    if need as u64 > have {
        return Err(ReplyError::ReplyChunkTooSmall { need, have });
    }
    out.reply.clear();
    out.reply.start_chunk();
    let mut ranges = payload.unwrap_or(&[]).iter().filter(|r| r.start < r.end).cloned();
    let mut current = ranges.next();
    for seg in chunk.target.iter() {
        let mut room = seg.length as usize;
        let mut at = seg.offset;
        while room > 0 {
            let Some(r) = current.as_mut() else { break };
            let n = r.len().min(room);
            out.writes.push(RdmaWrite { handle: seg.handle, offset: at, src: r.start..r.start + n });
            r.start += n;
            room -= n;
            // The address is the requester's: one past 2^64 wraps as the hardware's would,
            // and its Write fails at the requester's end like any outside its registration.
            at = at.wrapping_add(n as u64);
            if r.start == r.end {
                current = ranges.next();
            }
        }
        let written = seg.length as usize - room;
        out.reply.push_segment(XdrRdmaSegment { length: written as u32, ..seg });
    }
    Ok(())
}

/// Encode the reply's transport header into `buf` (RFC 8166 section 4.1.2):
/// `rdma_xid` = the reply's XID, `rdma_vers` = its version (1 unless made `with_version`), `rdma_credit` =
/// `credits`, `RDMA_MSG` for an inline reply or `RDMA_NOMSG` for a Long
/// Reply, an empty Read list (draft 5.3.1), and the copied Write list and
/// Reply chunk. Returns the header's length.
pub fn encode_reply_header(reply: &MarshaledReply, credits: u32, buf: &mut [u8]) -> Result<usize, crate::rt::Error> {
    reply.write_list.with_xdr(|writes| {
        let rdma_reads = List::default();
        let rdma_writes = List::from_slice(writes);
        let rdma_reply = reply.reply_chunk().map(|s| XdrWriteChunk { target: Seq::from_slice(s) });
        let rdma_body = match reply.form {
            ReplyForm::Inline => RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads, rdma_writes, rdma_reply }),
            ReplyForm::ReplyChunk => RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads, rdma_writes, rdma_reply }),
        };
        let msg = RdmaMsg { rdma_xid: reply.xid, rdma_vers: reply.vers.wire(), rdma_credit: credits, rdma_body };
        debug_assert_eq!(msg.encoded_len(), reply.header_len_now());
        // One pass: the caller's buffer is scratch until this succeeds.
        msg.encode_into(buf)
    })
}

/// Marshal an RPC Reply message (RFC 8166 sections 3.4.6 and 3.5): place
/// DDP-eligible results in the provided Write chunks ([`encode_write_list`]),
/// reduce the Payload stream, and send it inline if the whole Send — header
/// plus reduced payload — fits the Requester's inline threshold (draft
/// 5.2.4, the gather rule), else in the Reply chunk ([`encode_reply_chunk`];
/// 3.5.3: "If a Reply chunk was provided and the reduced Payload stream is
/// larger than the reply inline threshold, the Responder MUST use the
/// Requester-provided Reply chunk"). Encodes the header into `header` and
/// describes it all in `out`.
///
/// `reply` must be an XDR stream starting with the XID (which is the call's).
/// Failures that [`ReplyError::errcode`] maps to `ERR_CHUNK` mean the
/// provided chunks cannot carry this reply.
pub fn marshal_reply(
    reply: &[u8],
    provided: ProvidedChunks<'_>,
    req: &ReplyRequest<'_>,
    header: &mut [u8],
    out: &mut MarshaledReply,
) -> Result<(), ReplyError> {
    let Some(xid) = reply.first_chunk::<4>() else { return Err(ReplyError::NotXdr { len: reply.len() }) };
    marshal_reply_of_len(u32::from_be_bytes(*xid), reply.len(), provided, req, header, out)
}

/// [`marshal_reply`] for a reply that is not in one slice (a Responder that writes some
/// results from memory of its own): marshaling reads nothing of the reply but its XID and
/// its length in bytes, and the ranges it gives ([`MarshaledReply::inline`],
/// [`RdmaWrite::src`]) index the reply as if its pieces were laid end to end.
///
/// ```
/// use rpcrdma_v1::marshal_reply::{marshal_reply, marshal_reply_of_len, MarshaledReply, ProvidedChunks, ReplyRequest};
/// let reply: Vec<u8> = [9u32, 1, 0, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// let req = ReplyRequest { credits: 8, reply_inline_threshold: 1024, ddp_results: &[] };
/// let provided = ProvidedChunks::default(); // no chunks
/// let (mut a, mut b) = (MarshaledReply::new(), MarshaledReply::new());
/// let (mut ha, mut hb) = ([0u8; 64], [0u8; 64]);
/// marshal_reply(&reply, provided, &req, &mut ha, &mut a).unwrap();
/// marshal_reply_of_len(9, reply.len(), provided, &req, &mut hb, &mut b).unwrap();
/// assert_eq!((a, ha), (b, hb));
/// ```
pub fn marshal_reply_of_len(
    xid: u32,
    len: usize,
    provided: ProvidedChunks<'_>,
    req: &ReplyRequest<'_>,
    header: &mut [u8],
    out: &mut MarshaledReply,
) -> Result<(), ReplyError> {
    out.clear();
    let result = marshal_reply_inner(xid, len, provided, req, header, out);
    if result.is_err() {
        out.clear();
    }
    result
}

fn marshal_reply_inner(
    xid: u32,
    len: usize,
    provided: ProvidedChunks<'_>,
    req: &ReplyRequest<'_>,
    header: &mut [u8],
    out: &mut MarshaledReply,
) -> Result<(), ReplyError> {
    if len < 4 || !len.is_multiple_of(4) {
        return Err(ReplyError::NotXdr { len });
    }
    check_items(len, req.ddp_results)?;
    out.xid = xid;
    let threshold = req.reply_inline_threshold;

    out.reduced_results = encode_write_list(out, req.ddp_results, provided.writes)?;
    out.inline_len = reduce_payload(len, &req.ddp_results[..out.reduced_results], &mut out.inline)?;

    // The header is the same size inline or not: lists copied, counts kept.
    if let Some(chunk) = provided.reply {
        encode_reply_chunk(out, chunk, None)?;
    }
    let header_len = out.header_len_now();
    if header_len > threshold {
        return Err(ReplyError::HeaderExceedsThreshold { header: header_len, threshold });
    }
    if header_len + out.inline_len > threshold {
        let Some(chunk) = provided.reply else {
            return Err(ReplyError::NoReplyChunk { need: header_len + out.inline_len, threshold });
        };
        let mut inline = core::mem::take(&mut out.inline);
        encode_reply_chunk(out, chunk, Some(&inline))?;
        inline.clear();
        out.inline = inline;
        out.inline_len = 0;
        out.form = ReplyForm::ReplyChunk;
    }
    let need = out.header_len_now();
    out.header_len = encode_reply_header(out, req.credits, header)
        .map_err(|_| ReplyError::HeaderBufferTooSmall { need, have: header.len() })?;
    Ok(())
}
