//! Reassembly: rebuilding the unreduced XDR stream a receiver's ULP decodes
//! from a received transport header, its inline payload and the chunk data
//! moved by RDMA (RFC 8166 sections 3.4.5, 3.4.6.1 and 3.5).
//!
//! **Calls** (the Responder): [`read_list_fetches`] says what to pull with
//! RDMA Read — per segment its handle, offset and length, and where to land
//! it in one contiguous landing buffer (segments back to back, in Read list
//! order; [`fetch_len`] bytes in all). Given that buffer,
//! [`reassemble_call`] inserts each Read chunk's data into the reduced
//! Payload stream at its Position and restores the XDR roundup padding the
//! Requester left out (3.4.5.2). For a Long Call the Payload stream itself
//! is the Position-Zero Read chunk (3.5.3).
//!
//! **Replies** (the Requester): nothing is fetched; the Responder wrote into
//! the Requester's Write chunks and Reply chunk. [`reply_payload`] picks the
//! reduced Payload stream (inline, or the returned part of the Reply
//! chunk); [`decode_write_list`] gives each Write chunk's returned length;
//! the ULB locates the reduced results in the reduced stream
//! ([`UpperLayerBinding::reply_ddp_items`]); [`reassemble_reply`] inserts
//! each chunk's data there and restores padding (3.4.6.1, 3.4.6.2).
//! [`reassemble_reply_with_ulb`] does all four.
//!
//! Reassembly copies into a caller's `Vec<u8>` (cleared first, its memory
//! reused); nothing else is allocated.
//!
//! **DDP-eligibility** (RFC 8166 section 6.1.1; draft 7.1.1): reassembly
//! puts chunk data wherever the header says, so after [`reassemble_call`]
//! the Responder runs [`check_call_ddp_eligibility`]: every Read chunk but
//! the Position-Zero one must convey exactly one DDP-eligible item the ULB
//! finds in the reassembled call. On a [`DdpViolation`] the Responder "MUST
//! NOT process the Call message"; it answers with an RPC reply of
//! `GARBAGE_ARGS` ([`encode_garbage_args_reply`]) in an `RDMA_MSG` (draft
//! 5.5.2, RFC 4.5.2). On the reply side, [`reassemble_reply`] refuses a
//! reply whose Responder left a result unreduced although a Write chunk was
//! provided ([`ReassemblyError::UnreducedDdpResult`]; see
//! [`ReassemblyError::is_ddp_violation`]).
//!
//! ```
//! use rpcrdma_v1::reassemble::{fetch_len, read_list_fetches, reassemble_call, Fetch};
//! use rpcrdma_v1::rt::{List, Xdr};
//! use rpcrdma_v1::xdr::*;
//!
//! // A call whose 5-byte argument at Position 12 travelled in a Read chunk:
//! // 12 bytes inline before it, 4 after; the 3 padding bytes were left out.
//! let reads = [XdrReadChunk { position: 12, target: XdrRdmaSegment { handle: 9, length: 5, offset: 0x5000 } }];
//! let hdr = RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 8, rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
//!     rdma_reads: List::from_slice(&reads), rdma_writes: List::default(), rdma_reply: None }) };
//! let inline = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0xAA, 0xBB, 0xCC, 0xDD];
//!
//! assert_eq!(fetch_len(reads_of(&hdr)), 5);
//! let fetches: Vec<Fetch> = read_list_fetches(reads_of(&hdr)).collect();
//! assert_eq!(fetches[0], Fetch { chunk: 0, position: 12, handle: 9, length: 5, offset: 0x5000, landing: 0 });
//! let landing = *b"hello"; // what RDMA Read brought back
//!
//! let mut stream = Vec::new();
//! reassemble_call(&hdr, &inline, &landing, &mut stream).unwrap();
//! assert_eq!(&stream[12..20], b"hello\0\0\0"); // padding restored
//! assert_eq!(&stream[20..], [0xAA, 0xBB, 0xCC, 0xDD]);
//! # fn reads_of<'a>(m: &RdmaMsg<'a>) -> List<'a, XdrReadChunk> {
//! #     match m.rdma_body { RdmaBody::RdmaMsg(h) => h.rdma_reads, _ => unreachable!() } }
//! ```

use crate::rt::{Error as XdrError, List, SeqIter};
use crate::ulb::{roundup_pad, DdpItem, UpperLayerBinding, XDR_UNIT};
use crate::xdr::{RdmaBody, RdmaMsg, XdrReadChunk, XdrWriteChunk};

/// Zero bytes for XDR roundup padding.
const PADDING: [u8; 3] = [0; 3];

impl ReassemblyError {
    /// Whether the error lies in the transport header itself rather than in
    /// how its chunks fit the Payload stream: no RPC message at all (an
    /// `RDMA_NOMSG` with no chunk to carry it), or a misaligned Position. A
    /// responder answers these with `ERR_CHUNK` (RFC 8166 section 4.5.2:
    /// "an RDMA_NOMSG message that has no chunk lists" is its example) and
    /// the others, where chunk sizes or offsets do not match the Payload
    /// stream, with an RPC `GARBAGE_ARGS` reply (the section's second
    /// paragraph, SHOULD).
    ///
    /// ```
    /// use rpcrdma_v1::reassemble::ReassemblyError;
    /// assert!(ReassemblyError::NoPositionZeroChunk.is_header_error());
    /// assert!(!ReassemblyError::PositionBeyondPayload { position: 64, end: 40 }.is_header_error());
    /// ```
    pub fn is_header_error(&self) -> bool {
        matches!(
            self,
            ReassemblyError::NoRpcMessage
                | ReassemblyError::NoPositionZeroChunk
                | ReassemblyError::NoReplyChunk
                | ReassemblyError::PositionMisaligned { .. }
        )
    }
}

/// Why a received message cannot be reassembled. Most mean the peer's
/// chunks do not match its Payload stream: for a call, RFC 8166 section
/// 4.5.2 suggests `RPC_GARBAGEARGS`; `ERR_CHUNK` fits errors in the
/// transport header itself (a misaligned Position, an `RDMA_NOMSG` with no
/// chunk to carry the Payload stream).
///
/// ```
/// use rpcrdma_v1::reassemble::{encode_garbage_args_reply, reassemble_call, ReassemblyError};
/// use rpcrdma_v1::rt::List;
/// use rpcrdma_v1::xdr::*;
/// # fn hdr(nomsg: bool, reads: &[XdrReadChunk]) -> RdmaMsg<'_> {
/// #     let (rdma_reads, rdma_writes, rdma_reply) = (List::from_slice(reads), List::default(), None);
/// #     let rdma_body = if nomsg {
/// #         RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads, rdma_writes, rdma_reply })
/// #     } else {
/// #         RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads, rdma_writes, rdma_reply })
/// #     };
/// #     RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 8, rdma_body }
/// # }
/// let seg = XdrReadChunk { position: 4, target: XdrRdmaSegment { handle: 9, length: 8, offset: 0 } };
/// let mut out = Vec::new();
///
/// // RDMA_NOMSG whose only chunk is not at Position zero: a header error, ERR_CHUNK.
/// let err = reassemble_call(&hdr(true, &[seg]), &[], &[0; 8], &mut out).unwrap_err();
/// assert_eq!(err, ReassemblyError::NoPositionZeroChunk);
/// assert!(err.is_header_error());
///
/// // An RDMA_MSG with nothing inline has no Position 4: chunks that do not fit the
/// // Payload stream are answered with an RPC GARBAGE_ARGS reply.
/// let err = reassemble_call(&hdr(false, &[seg]), &[], &[0; 8], &mut out).unwrap_err();
/// assert_eq!(err, ReassemblyError::PositionBeyondPayload { position: 4, end: 0 });
/// assert!(!err.is_header_error());
/// let mut reply = [0u8; 24];
/// assert_eq!(encode_garbage_args_reply(1, &mut reply), Ok(24));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReassemblyError {
    /// The header is not an `RDMA_MSG` or `RDMA_NOMSG`: it carries no RPC
    /// message.
    #[error("the transport header carries no RPC message (not RDMA_MSG or RDMA_NOMSG)")]
    NoRpcMessage,
    /// An `RDMA_NOMSG` call without a Position-Zero Read chunk to carry its
    /// Payload stream (RFC 8166 section 3.5.3).
    #[error("RDMA_NOMSG call without a Position-Zero Read chunk")]
    NoPositionZeroChunk,
    /// An `RDMA_NOMSG` reply without a Reply chunk to carry its Payload
    /// stream (RFC 8166 section 3.5.3).
    #[error("RDMA_NOMSG reply without a Reply chunk")]
    NoReplyChunk,
    /// The landing buffer is shorter than the Read list's segments.
    #[error("the landing buffer holds {have} bytes, the Read list {need}")]
    LandingTooShort {
        /// Sum of the Read list's segment lengths.
        need: u64,
        /// The landing buffer's length.
        have: usize,
    },
    /// A Position that is not a multiple of four (RFC 8166 section 3.4.5:
    /// it "MUST be a multiple of four").
    #[error("Read chunk Position {position} is not a multiple of four")]
    PositionMisaligned {
        /// The Position.
        position: u32,
    },
    /// A chunk whose position falls inside data already placed: Read chunks
    /// must be listed in increasing Position order, the segments of one
    /// chunk adjacent (and reduced results in stream order).
    #[error("chunk at position {position} lies before the end ({placed}) of what is already placed")]
    OutOfOrder {
        /// The chunk's position.
        position: u64,
        /// Bytes of the stream already rebuilt.
        placed: usize,
    },
    /// A chunk's position lies past the end of the Payload stream.
    #[error("chunk at position {position} lies past the end of the Payload stream ({end})")]
    PositionBeyondPayload {
        /// The chunk's position.
        position: u64,
        /// Where the stream would end.
        end: usize,
    },
    /// The Reply chunk's returned length exceeds the buffer given for it.
    #[error("the Reply chunk returned {need} bytes, its buffer holds {have}")]
    ReplyChunkBufferTooShort {
        /// The returned length.
        need: u64,
        /// The buffer's length.
        have: usize,
    },
    /// A Write chunk's returned length differs from the length of the result
    /// it carries (RFC 8166 section 3.4.6.2: it "MUST be the same as the
    /// encoded length of the result data item").
    #[error("Write chunk {chunk} returned {returned} bytes for a result of {result} bytes")]
    WriteChunkLengthMismatch {
        /// Index of the chunk.
        chunk: usize,
        /// Its returned length.
        returned: u64,
        /// The result's length, from the Payload stream.
        result: usize,
    },
    /// A DDP-eligibility violation by the Responder (RFC 8166 section 6.1.1;
    /// draft 7.1.1: "a responder forms a Reply message without reducing a
    /// DDP-eligible data item when there is a Write list provided by the
    /// requester"): Write chunk `chunk` returned nothing, yet the ULB finds a
    /// non-empty DDP-eligible result for it in the reply. The result's data
    /// was left in the Payload stream, where the Requester, assuming it was
    /// reduced (7.1.1), cannot parse what follows it.
    #[error(
        "DDP-eligibility violation (RFC 8166 section 6.1.1): result {chunk} ({result} bytes) was not reduced, \
         though Write chunk {chunk} was provided for it (it returned 0 bytes)"
    )]
    UnreducedDdpResult {
        /// Index of the Write chunk (and of the result).
        chunk: usize,
        /// The result's length, as the length word left in the Payload
        /// stream declares it.
        result: usize,
    },
    /// A Write chunk returned data but the reply holds no reduced result for
    /// it: the chunk carries a data item that is not a DDP-eligible result
    /// (draft 5.5.2: "a non-DDP-eligible data item in a ... Write chunk").
    #[error("Write chunk {chunk} returned {returned} bytes for no result in the reply")]
    UnclaimedWriteChunk {
        /// Index of the chunk.
        chunk: usize,
        /// Its returned length.
        returned: u64,
    },
    /// No buffer was given for a Write chunk that carries a result, or it is
    /// shorter than the chunk's returned length.
    #[error("the buffer for Write chunk {chunk} holds {have} bytes, the chunk returned {need}")]
    WriteBufferTooShort {
        /// Index of the chunk.
        chunk: usize,
        /// The returned length.
        need: u64,
        /// The buffer's length (0 when none was given).
        have: usize,
    },
}

impl ReassemblyError {
    /// Whether this error, from reassembling a received *reply*, means the
    /// Responder broke DDP-eligibility (RFC 8166 section 6.1.1; draft 7.1.1
    /// and 5.5.2): a DDP-eligible result left unreduced although a Write
    /// chunk was provided for it ([`ReassemblyError::UnreducedDdpResult`]),
    /// a Write chunk whose data is not exactly its result
    /// ([`ReassemblyError::WriteChunkLengthMismatch`]), or a Write chunk that
    /// carries data for no DDP-eligible result
    /// ([`ReassemblyError::UnclaimedWriteChunk`]).
    ///
    /// A Requester has nothing to send back for a reply: it does not hand
    /// the reply to its ULP and completes the RPC with this error, as it
    /// would for a reply it cannot decode (7.1.1: "an XDR error would
    /// result").
    ///
    /// ```
    /// use rpcrdma_v1::reassemble::ReassemblyError;
    /// assert!(ReassemblyError::UnreducedDdpResult { chunk: 0, result: 4096 }.is_ddp_violation());
    /// assert!(!ReassemblyError::NoReplyChunk.is_ddp_violation());
    /// ```
    pub fn is_ddp_violation(&self) -> bool {
        matches!(
            self,
            ReassemblyError::UnreducedDdpResult { .. }
                | ReassemblyError::WriteChunkLengthMismatch { .. }
                | ReassemblyError::UnclaimedWriteChunk { .. }
        )
    }
}

/// One RDMA Read for a Responder to post (RFC 8166 section 3.4.5): pull
/// `length` bytes from the Requester's (`handle`, `offset`) into the landing
/// buffer at `landing`.
///
/// ```
/// use rpcrdma_v1::reassemble::{fetch_len, read_list_fetches, Fetch};
/// use rpcrdma_v1::rt::List;
/// use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrReadChunk};
/// let seg = |position, handle, length| XdrReadChunk { position, target: XdrRdmaSegment { handle, length, offset: 0x100 } };
/// // One chunk of two segments at Position 8, then one of one segment at 32.
/// let reads = [seg(8, 1, 10), seg(8, 2, 6), seg(32, 3, 4)];
/// let list = List::from_slice(&reads);
/// let fetches: Vec<Fetch> = read_list_fetches(list).collect();
/// let plan: Vec<_> = fetches.iter().map(|f| (f.chunk, f.handle, f.length, f.landing)).collect();
/// assert_eq!(plan, [(0, 1, 10, 0), (0, 2, 6, 10), (1, 3, 4, 16)]);
/// assert_eq!(fetch_len(list), 20); // the landing buffer's size
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fetch {
    /// Index of the Read chunk the segment belongs to (segments with the
    /// same Position, adjacent in the list, form one chunk).
    pub chunk: usize,
    /// The chunk's Position in the unreduced Payload stream.
    pub position: u32,
    /// The remote handle (steering tag).
    pub handle: u32,
    /// Bytes to read.
    pub length: u32,
    /// The remote offset.
    pub offset: u64,
    /// Where the bytes go in the landing buffer.
    pub landing: usize,
}

/// Iterator over the RDMA Reads a Read list asks for; see
/// [`read_list_fetches`].
pub struct Fetches<'a> {
    segments: SeqIter<'a, XdrReadChunk>,
    chunk: usize,
    last_position: Option<u32>,
    landing: usize,
}

impl Iterator for Fetches<'_> {
    type Item = Fetch;

    fn next(&mut self) -> Option<Fetch> {
        let XdrReadChunk { position, target } = self.segments.next()?;
        match self.last_position {
            Some(p) if p == position => {}
            Some(_) => self.chunk += 1,
            None => {}
        }
        self.last_position = Some(position);
        let fetch = Fetch {
            chunk: self.chunk,
            position,
            handle: target.handle,
            length: target.length,
            offset: target.offset,
            landing: self.landing,
        };
        self.landing += target.length as usize;
        Some(fetch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.segments.size_hint()
    }
}

impl ExactSizeIterator for Fetches<'_> {}

impl core::fmt::Debug for Fetches<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fetches").field("left", &self.segments.len()).field("landing", &self.landing).finish()
    }
}

/// What to fetch for a received call (RFC 8166 sections 3.4.5 and 3.4.5.1):
/// one [`Fetch`] per segment of the Read list, in list order, landing back
/// to back in one buffer of [`fetch_len`] bytes. Consecutive segments with
/// the same Position form one Read chunk. No allocation.
///
/// Check [`fetch_len`] against the ULP's limits (RFC 8166 section 3.4.4:
/// "The Responder can use such limits to sanity check chunk sizes before
/// using them in RDMA operations") before allocating the landing buffer.
pub fn read_list_fetches(reads: List<'_, XdrReadChunk>) -> Fetches<'_> {
    Fetches { segments: reads.iter(), chunk: 0, last_position: None, landing: 0 }
}

/// Total bytes a Read list asks for: the landing buffer's size.
pub fn fetch_len(reads: List<'_, XdrReadChunk>) -> u64 {
    reads.iter().map(|r| u64::from(r.target.length)).sum()
}

/// Rebuild a received call's unreduced Payload stream into `out` (RFC 8166
/// section 3.4.5: "The Responder reconstructs the transferred chunk data by
/// concatenating the contents of each RDMA segment, in list order, into the
/// received Payload stream at the Position value recorded in that RDMA
/// segment").
///
/// `inline` is what followed the transport header in the Send (the reduced
/// Payload stream of an `RDMA_MSG`; ignored for `RDMA_NOMSG`). `landing`
/// holds the Read list's segments back to back, as [`read_list_fetches`]
/// placed them. For `RDMA_NOMSG` the first Read chunk must have Position
/// zero: its data is the Payload stream (3.5.3), into which any further Read
/// chunks are inserted.
///
/// After each chunk's data, XDR roundup padding is restored (zeros up to a
/// multiple of four; none when the Requester included it, 3.4.5.2), so
/// what follows is where the ULP expects it. Read chunks must appear in
/// increasing Position order, each chunk's segments adjacent. The rules are
/// [`lay_out_call`]'s; this function copies the pieces it names.
pub fn reassemble_call(
    msg: &RdmaMsg<'_>,
    inline: &[u8],
    landing: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), ReassemblyError> {
    out.clear();
    let stream_len = lay_out_call(msg, inline, landing.len(), |_| {})?;
    out.reserve(stream_len);
    lay_out_call(msg, inline, landing.len(), |piece| match piece {
        CallPiece::Inline(bytes) => out.extend_from_slice(bytes),
        CallPiece::Landed(range) => out.extend_from_slice(&landing[range]),
        CallPiece::Padding(n) => out.extend_from_slice(&PADDING[..n]),
    })?;
    Ok(())
}

/// One piece of a received call's unreduced Payload stream, in stream order
/// (see [`lay_out_call`]).
///
/// ```
/// use rpcrdma_v1::reassemble::{lay_out_call, CallPiece};
/// use rpcrdma_v1::rt::List;
/// use rpcrdma_v1::xdr::*;
/// # fn hdr(nomsg: bool, reads: &[XdrReadChunk]) -> RdmaMsg<'_> {
/// #     let (rdma_reads, rdma_writes, rdma_reply) = (List::from_slice(reads), List::default(), None);
/// #     let rdma_body = if nomsg {
/// #         RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads, rdma_writes, rdma_reply })
/// #     } else {
/// #         RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads, rdma_writes, rdma_reply })
/// #     };
/// #     RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 8, rdma_body }
/// # }
/// // A Long call: the whole 40-byte message was pulled into the landing buffer.
/// let pz = [XdrReadChunk { position: 0, target: XdrRdmaSegment { handle: 9, length: 40, offset: 0 } }];
/// let mut pieces = Vec::new();
/// let len = lay_out_call(&hdr(true, &pz), &[], 40, |p| pieces.push(p)).unwrap();
/// assert_eq!((len, pieces), (40, vec![CallPiece::Landed(0..40)]));
/// for piece in [CallPiece::Inline(b"abcd"), CallPiece::Padding(3)] {
///     match piece {
///         CallPiece::Inline(bytes) => assert_eq!(bytes.len(), 4), // copy from the Send
///         CallPiece::Landed(range) => unreachable!("{range:?}"),  // copy from the landing buffer
///         CallPiece::Padding(n) => assert_eq!(n, 3),             // write n zero bytes
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallPiece<'a> {
    /// Bytes of the inline (reduced) Payload stream of an `RDMA_MSG`.
    Inline(&'a [u8]),
    /// Bytes of the landing buffer (as [`read_list_fetches`] places the Read
    /// list's segments): a Read chunk's data, or for an `RDMA_NOMSG` part of
    /// the Position-Zero Read chunk, which is the reduced stream (3.5.3).
    Landed(core::ops::Range<usize>),
    /// Zero bytes of XDR roundup padding the Requester left out after a
    /// chunk's data (RFC 8166 section 3.4.5.2).
    Padding(usize),
}

/// The one home of the call reassembly rules (RFC 8166 sections 3.4.5,
/// 3.4.5.2 and 3.5.3): checks that the Read list of `msg` fits its reduced
/// Payload stream and hands `each` the pieces of the unreduced stream in
/// order, without copying anything. Returns the unreduced stream's length.
///
/// [`reassemble_call`] copies the pieces into a buffer. A Responder that
/// lands each Read chunk straight at its place in the call message (one copy,
/// the RDMA Read itself) writes the `Inline` and `Padding` pieces and posts
/// the RDMA Reads of each `Landed` piece to where it falls; for an
/// `RDMA_MSG` every `Landed` piece is one whole Read chunk.
///
/// `landing_len` is the landing buffer's length (at least [`fetch_len`]).
///
/// ```
/// use rpcrdma_v1::reassemble::{lay_out_call, CallPiece};
/// use rpcrdma_v1::rt::List;
/// use rpcrdma_v1::xdr::*;
///
/// // 12 bytes inline, then a 5-byte Read chunk at Position 12, then 4 bytes.
/// let reads = [XdrReadChunk { position: 12, target: XdrRdmaSegment { handle: 9, length: 5, offset: 0 } }];
/// let hdr = RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 8, rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
///     rdma_reads: List::from_slice(&reads), rdma_writes: List::default(), rdma_reply: None }) };
/// let inline = [7u8; 16];
/// let mut pieces = Vec::new();
/// let len = lay_out_call(&hdr, &inline, 5, |p| pieces.push(p)).unwrap();
/// assert_eq!(len, 24);
/// assert_eq!(pieces, [
///     CallPiece::Inline(&inline[..12]),
///     CallPiece::Landed(0..5),
///     CallPiece::Padding(3),
///     CallPiece::Inline(&inline[12..]),
/// ]);
/// ```
pub fn lay_out_call<'i>(
    msg: &RdmaMsg<'_>,
    inline: &'i [u8],
    landing_len: usize,
    mut each: impl FnMut(CallPiece<'i>),
) -> Result<usize, ReassemblyError> {
    let (reads, nomsg) = match msg.rdma_body {
        RdmaBody::RdmaMsg(h) => (h.rdma_reads, false),
        RdmaBody::RdmaNomsg(h) => (h.rdma_reads, true),
        _ => return Err(ReassemblyError::NoRpcMessage),
    };
    let need = fetch_len(reads);
    if (landing_len as u64) < need {
        return Err(ReassemblyError::LandingTooShort { need, have: landing_len });
    }
    let mut chunks = ReadChunks { segments: reads.iter().peekable(), at: 0 };
    // The reduced stream: the inline bytes, or the Position-Zero chunk's landed bytes.
    let (reduced_len, reduced_landed) = if nomsg {
        match chunks.next() {
            Some((0, range)) => (range.len(), Some(range.start)),
            _ => return Err(ReassemblyError::NoPositionZeroChunk),
        }
    } else {
        (inline.len(), None)
    };
    let reduced = |from: usize, to: usize| match reduced_landed {
        Some(base) => CallPiece::Landed(base + from..base + to),
        None => CallPiece::Inline(&inline[from..to]),
    };
    let mut placed = 0;
    let mut taken = 0;
    for (position, data) in chunks {
        if !(position as usize).is_multiple_of(XDR_UNIT) {
            return Err(ReassemblyError::PositionMisaligned { position });
        }
        let position = position as usize;
        if position < placed {
            return Err(ReassemblyError::OutOfOrder { position: position as u64, placed });
        }
        let gap = position - placed;
        if gap > reduced_len - taken {
            let end = placed + reduced_len - taken;
            return Err(ReassemblyError::PositionBeyondPayload { position: position as u64, end });
        }
        if gap > 0 {
            each(reduced(taken, taken + gap));
        }
        taken += gap;
        let pad = roundup_pad(data.len());
        placed = position + data.len() + pad;
        each(CallPiece::Landed(data));
        if pad > 0 {
            each(CallPiece::Padding(pad));
        }
    }
    if taken < reduced_len {
        each(reduced(taken, reduced_len));
    }
    Ok(placed + reduced_len - taken)
}

/// Read chunks with where their data lies: segments grouped by equal
/// adjacent Positions, each chunk's bytes a range of the landing buffer.
struct ReadChunks<'a> {
    segments: core::iter::Peekable<SeqIter<'a, XdrReadChunk>>,
    at: usize,
}

impl Iterator for ReadChunks<'_> {
    type Item = (u32, core::ops::Range<usize>);

    fn next(&mut self) -> Option<(u32, core::ops::Range<usize>)> {
        let first = self.segments.next()?;
        let start = self.at;
        self.at += first.target.length as usize;
        while let Some(next) = self.segments.next_if(|s| s.position == first.position) {
            self.at += next.target.length as usize;
        }
        Some((first.position, start..self.at))
    }
}

/// A DDP-eligibility violation in a received call (RFC 8166 section 6.1.1;
/// draft 7.1.1: "a requester forms a Call message with a non-DDP-eligible
/// data item in a Read chunk"): a Read chunk, other than the Position-Zero
/// Read chunk, that does not convey exactly one DDP-eligible data item of
/// the call. Found by [`check_call_ddp_eligibility`].
///
/// The Responder "MUST NOT process the Call message" (7.1.1). The transport
/// header itself was valid, so this is not an `ERR_CHUNK`: the Responder
/// reports it as draft 5.5.2 (RFC 4.5.2) describes for a call whose chunks
/// do not match its Payload stream ("A responder MAY also report the
/// presence of a non-DDP-eligible data item in a Read or Write chunk using
/// RPC_GARBAGEARGS"): an RPC reply with `accept_stat` `GARBAGE_ARGS`
/// ([`encode_garbage_args_reply`]), sent in an `RDMA_MSG`
/// (`marshal_reply::marshal_reply` with no DDP-eligible results; the
/// Requester's Write list and Reply chunk are returned unused).
///
/// ```
/// use rpcrdma_v1::reassemble::{check_call_ddp_eligibility, reassemble_call, DdpViolation};
/// use rpcrdma_v1::rt::List;
/// use rpcrdma_v1::ulb::{DdpItem, OpaqueAtUlb};
/// use rpcrdma_v1::xdr::*;
/// # fn hdr(nomsg: bool, reads: &[XdrReadChunk]) -> RdmaMsg<'_> {
/// #     let (rdma_reads, rdma_writes, rdma_reply) = (List::from_slice(reads), List::default(), None);
/// #     let rdma_body = if nomsg {
/// #         RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads, rdma_writes, rdma_reply })
/// #     } else {
/// #         RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads, rdma_writes, rdma_reply })
/// #     };
/// #     RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 8, rdma_body }
/// # }
/// let ulb = OpaqueAtUlb { call_opaque: Some(8), reply_opaque: None, max_result: 0, max_reply: 64 };
/// // The opaque<> at 8 declares 5 bytes, but its Read chunk holds 6.
/// let reads = [XdrReadChunk { position: 12, target: XdrRdmaSegment { handle: 9, length: 6, offset: 0 } }];
/// let (mut call, mut items) = (Vec::new(), Vec::new());
/// reassemble_call(&hdr(false, &reads), &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5], b"hello!", &mut call).unwrap();
/// let v = check_call_ddp_eligibility(&hdr(false, &reads), &call, &ulb, &mut items).unwrap_err();
/// assert_eq!(v, DdpViolation::LengthMismatch { chunk: 0, position: 12, len: 6, item: DdpItem::new(12, 5) });
/// assert!(v.to_string().contains("holds 6 bytes"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DdpViolation {
    /// No DDP-eligible item of the call begins at the chunk's Position: the
    /// chunk conveys a data item that is not DDP-eligible (or part of one).
    #[error(
        "DDP-eligibility violation (RFC 8166 section 6.1.1): Read chunk {chunk} at Position {position} \
         ({len} bytes) conveys no DDP-eligible data item"
    )]
    NotEligible {
        /// Index of the Read chunk in the Read list (segments with the same
        /// Position, adjacent, form one chunk; the Position-Zero chunk of an
        /// `RDMA_NOMSG` counts as chunk 0).
        chunk: usize,
        /// The chunk's Position.
        position: u32,
        /// The chunk's length: the sum of its segments' lengths.
        len: u64,
    },
    /// A DDP-eligible item begins at the chunk's Position, but the chunk is
    /// neither the item's length nor that length with its roundup padding
    /// (RFC 8166 section 3.4.5.2): it conveys part of the item, or the item
    /// and more (a chunk holds exactly one XDR data item, 3.4.4.4).
    #[error(
        "DDP-eligibility violation (RFC 8166 section 6.1.1): Read chunk {chunk} at Position {position} \
         holds {len} bytes, the DDP-eligible item there {} ({} with padding)",
        item.len,
        item.padded_len()
    )]
    LengthMismatch {
        /// Index of the Read chunk, as for [`DdpViolation::NotEligible`].
        chunk: usize,
        /// The chunk's Position.
        position: u32,
        /// The chunk's length.
        len: u64,
        /// The DDP-eligible item the ULB finds at that Position.
        item: DdpItem,
    },
}

/// Check a received call's Read chunks against the DDP-eligible items of
/// the call (RFC 8166 section 6.1.1; draft 7.1.1), after
/// [`reassemble_call`] succeeded: `call` is the reassembled, unreduced call
/// and `msg` the transport header it was reassembled from.
///
/// Every Read chunk other than the Position-Zero Read chunk of an
/// `RDMA_NOMSG` (which is the Payload stream itself, 3.5.3, and may hold
/// anything) must convey exactly one DDP-eligible item the ULB finds in
/// `call` (`ulb.call_ddp_items`): its Position is the item's offset
/// (3.4.5), its length the item's length, or that length with the roundup
/// padding when the Requester included it (3.4.5.2). Each item takes at most
/// one chunk; items without a chunk (left inline) are fine. Anything else is
/// a [`DdpViolation`]: the Responder must not process the call and answers
/// `GARBAGE_ARGS` (see [`DdpViolation`]). A header that carries no RPC
/// message has no Read chunks and passes.
///
/// `items` is scratch, replaced with the ULB's items (they are not computed
/// when there is no Read chunk to check). Nothing is allocated beyond what
/// the ULB appends to `items`.
///
/// ```
/// use rpcrdma_v1::reassemble::{check_call_ddp_eligibility, reassemble_call, DdpViolation};
/// use rpcrdma_v1::rt::List;
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_v1::xdr::*;
///
/// // The ULB's only DDP-eligible item is the opaque<> whose length word is at 8.
/// let ulb = OpaqueAtUlb { call_opaque: Some(8), reply_opaque: None, max_result: 0, max_reply: 64 };
/// fn hdr(reads: &[XdrReadChunk]) -> RdmaMsg<'_> {
///     let h = RpcRdmaHeader { rdma_reads: List::from_slice(reads), rdma_writes: List::default(), rdma_reply: None };
///     RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 8, rdma_body: RdmaBody::RdmaMsg(h) }
/// }
/// let seg = |position, length| XdrReadChunk { position, target: XdrRdmaSegment { handle: 9, length, offset: 0 } };
/// let (mut items, mut call) = (Vec::new(), Vec::new());
///
/// // The 5-byte opaque at 12 in a Read chunk: DDP-eligible.
/// let ok = [seg(12, 5)];
/// reassemble_call(&hdr(&ok), &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5], b"hello", &mut call).unwrap();
/// assert_eq!(check_call_ddp_eligibility(&hdr(&ok), &call, &ulb, &mut items), Ok(()));
///
/// // The word at 4 in a Read chunk: not DDP-eligible, the call is not processed.
/// let bad = [seg(4, 4)];
/// reassemble_call(&hdr(&bad), &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0], b"\0\0\0\x07", &mut call).unwrap();
/// assert_eq!(
///     check_call_ddp_eligibility(&hdr(&bad), &call, &ulb, &mut items),
///     Err(DdpViolation::NotEligible { chunk: 0, position: 4, len: 4 })
/// );
/// ```
pub fn check_call_ddp_eligibility<U: UpperLayerBinding + ?Sized>(
    msg: &RdmaMsg<'_>,
    call: &[u8],
    ulb: &U,
    items: &mut Vec<DdpItem>,
) -> Result<(), DdpViolation> {
    items.clear();
    let (reads, nomsg) = match msg.rdma_body {
        RdmaBody::RdmaMsg(h) => (h.rdma_reads, false),
        RdmaBody::RdmaNomsg(h) => (h.rdma_reads, true),
        _ => return Ok(()),
    };
    let mut segments = reads.iter().peekable();
    let Some(&XdrReadChunk { position: first_position, .. }) = segments.peek() else { return Ok(()) };
    if !(nomsg && first_position == 0 && reads.iter().all(|r| r.position == 0)) {
        ulb.call_ddp_items(call, items);
    }
    // Chunks come in increasing Position order (reassembly refused any
    // other), items in stream order: walk both once.
    let mut candidates = items.iter().peekable();
    let mut chunk = 0;
    while let Some(first) = segments.next() {
        let position = first.position;
        let mut len = u64::from(first.target.length);
        while let Some(next) = segments.next_if(|s| s.position == position) {
            len += u64::from(next.target.length);
        }
        let index = chunk;
        chunk += 1;
        if nomsg && index == 0 && position == 0 {
            continue; // the Position-Zero Read chunk: the Payload stream (3.5.3)
        }
        while candidates.next_if(|i| (i.offset as u64) < u64::from(position)).is_some() {}
        match candidates.next_if(|i| i.offset as u64 == u64::from(position)) {
            Some(&item) if len == item.len as u64 || len == item.padded_len() as u64 => {}
            Some(&item) => return Err(DdpViolation::LengthMismatch { chunk: index, position, len, item }),
            None => return Err(DdpViolation::NotEligible { chunk: index, position, len }),
        }
    }
    Ok(())
}

/// The length of the RPC reply [`encode_garbage_args_reply`] forms: six XDR
/// words, also the length of any accepted reply's head
/// ([`encode_accepted_reply_head`]).
pub const GARBAGE_ARGS_REPLY_LEN: usize = 24;

/// RPC `msg_type` REPLY (RFC 5531 section 9).
const RPC_REPLY: u32 = 1;
/// RPC `reply_stat` MSG_ACCEPTED (RFC 5531 section 9).
const RPC_MSG_ACCEPTED: u32 = 0;
/// RPC `auth_flavor` AUTH_NONE (RFC 5531 section 8.2).
const RPC_AUTH_NONE: u32 = 0;
/// RPC `accept_stat` GARBAGE_ARGS (RFC 5531 section 9).
const RPC_GARBAGE_ARGS: u32 = 4;
/// RPC `accept_stat` SYSTEM_ERR (RFC 5531 section 9).
const RPC_SYSTEM_ERR: u32 = 5;

/// Write into `out` the RPC reply that accepts call `xid` with `accept_stat`
/// `GARBAGE_ARGS` (RFC 5531 section 9): `xid`, `REPLY` (1), `MSG_ACCEPTED`
/// (0), an `AUTH_NONE` verifier (flavor 0, body length 0) and
/// `GARBAGE_ARGS` (4), [`GARBAGE_ARGS_REPLY_LEN`] bytes; return that length.
/// Nothing is allocated.
///
/// This is how a Responder reports a call it will not process because its
/// chunks do not match its Payload stream: a [`DdpViolation`] (RFC 8166
/// section 6.1.1: "MUST be reported as described in Section 4.5.2"), or a
/// [`ReassemblyError`] for a call whose header was valid (4.5.2: "the
/// responder SHOULD return a RPC_GARBAGEARGS reply, using an RDMA_MSG
/// procedure"). Send it as the reply to the call, in an `RDMA_MSG`
/// (`marshal_reply::marshal_reply` with no DDP-eligible results). `xid` is
/// the call's XID, which is also its header's `rdma_xid` (4.2.1).
///
/// The verifier is `AUTH_NONE`, the verifier for calls with `AUTH_NONE` or
/// `AUTH_SYS` credentials; a server using RPCSEC_GSS forms its own reply
/// (that is the RPC layer's).
///
/// ```
/// use rpcrdma_v1::reassemble::{encode_garbage_args_reply, GARBAGE_ARGS_REPLY_LEN};
/// let mut buf = [0u8; GARBAGE_ARGS_REPLY_LEN];
/// assert_eq!(encode_garbage_args_reply(0x0102_0304, &mut buf), Ok(24));
/// assert_eq!(buf, [1, 2, 3, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4]);
/// assert!(encode_garbage_args_reply(1, &mut [0u8; 23]).is_err());
/// ```
pub fn encode_garbage_args_reply(xid: u32, out: &mut [u8]) -> Result<usize, XdrError> {
    encode_accepted_reply_head(xid, RPC_GARBAGE_ARGS, out)
}

/// Write into `out` the RPC reply that accepts call `xid` with `accept_stat`
/// `SYSTEM_ERR` (RFC 5531 section 9: "errors like memory allocation
/// failure"), laid out as [`encode_garbage_args_reply`]'s, also
/// [`GARBAGE_ARGS_REPLY_LEN`] bytes: how a responder answers a call whose
/// service failed without a reply of its own (a handler that panicked),
/// instead of losing the reply and, with it, the connection.
///
/// ```
/// use rpcrdma_v1::reassemble::{encode_system_err_reply, GARBAGE_ARGS_REPLY_LEN};
/// let mut buf = [0u8; GARBAGE_ARGS_REPLY_LEN];
/// assert_eq!(encode_system_err_reply(7, &mut buf), Ok(24));
/// assert_eq!(buf[20..], [0, 0, 0, 5]);
/// ```
pub fn encode_system_err_reply(xid: u32, out: &mut [u8]) -> Result<usize, XdrError> {
    encode_accepted_reply_head(xid, RPC_SYSTEM_ERR, out)
}

/// Write into `out` the head of an RPC reply that accepts call `xid` with
/// `accept_stat` `stat` (RFC 5531 section 9): `xid`, `REPLY` (1),
/// `MSG_ACCEPTED` (0), an `AUTH_NONE` verifier (flavor 0, body length 0) and
/// `stat`, [`GARBAGE_ARGS_REPLY_LEN`] bytes; return that length. What follows
/// the head depends on `stat` (the results for `SUCCESS`, `mismatch_info` for
/// `PROG_MISMATCH`, nothing for the others) and is the caller's. This is the
/// one place the accepted reply's layout is written: [`encode_garbage_args_reply`],
/// [`encode_system_err_reply`] and the ONC RPC reply builders of the
/// `negotiate` crate (`negotiate::onc`) all use it. Nothing is allocated.
///
/// ```
/// use rpcrdma_v1::reassemble::{encode_accepted_reply_head, GARBAGE_ARGS_REPLY_LEN};
/// let mut buf = [0u8; GARBAGE_ARGS_REPLY_LEN];
/// assert_eq!(encode_accepted_reply_head(9, 0, &mut buf), Ok(24)); // SUCCESS
/// assert_eq!(buf, [0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
/// assert!(encode_accepted_reply_head(9, 0, &mut [0u8; 20]).is_err());
/// ```
pub fn encode_accepted_reply_head(xid: u32, stat: u32, out: &mut [u8]) -> Result<usize, XdrError> {
    let have = out.len();
    let out =
        out.get_mut(..GARBAGE_ARGS_REPLY_LEN).ok_or(XdrError::BufferTooSmall { need: GARBAGE_ARGS_REPLY_LEN, have })?;
    let words = [xid, RPC_REPLY, RPC_MSG_ACCEPTED, RPC_AUTH_NONE, 0, stat];
    for (dst, word) in out.chunks_exact_mut(XDR_UNIT).zip(words) {
        dst.copy_from_slice(&word.to_be_bytes());
    }
    Ok(GARBAGE_ARGS_REPLY_LEN)
}

/// The reduced Payload stream of a received reply (RFC 8166 section 3.5):
/// for `RDMA_MSG`, `inline` (what followed the header in the Send); for
/// `RDMA_NOMSG`, the first *returned length* bytes of `reply_chunk_buf`, the
/// buffer the Requester registered as its Reply chunk (3.5.3, Long Reply).
pub fn reply_payload<'b>(
    msg: &RdmaMsg<'_>,
    inline: &'b [u8],
    reply_chunk_buf: &'b [u8],
) -> Result<&'b [u8], ReassemblyError> {
    match msg.rdma_body {
        RdmaBody::RdmaMsg(_) => Ok(inline),
        RdmaBody::RdmaNomsg(h) => {
            let chunk = h.rdma_reply.ok_or(ReassemblyError::NoReplyChunk)?;
            let need = chunk_len(&chunk);
            match reply_chunk_buf.get(..need as usize) {
                Some(payload) if need <= usize::MAX as u64 => Ok(payload),
                _ => Err(ReassemblyError::ReplyChunkBufferTooShort { need, have: reply_chunk_buf.len() }),
            }
        }
        _ => Err(ReassemblyError::NoRpcMessage),
    }
}

/// The length of a Write chunk: the sum of its segments' lengths (RFC 8166
/// section 3.4.4).
fn chunk_len(chunk: &XdrWriteChunk<'_>) -> u64 {
    chunk.target.iter().map(|s| u64::from(s.length)).sum()
}

/// The returned length of each Write chunk in a reply's Write list (RFC 8166
/// section 3.4.6; draft 5.3.2: "The length of a Write chunk is therefore the
/// sum of all returned lengths in all segments comprising the corresponding
/// list entry"), appended to `out` in list order. An unused chunk returns
/// zero.
pub fn decode_write_list(writes: List<'_, XdrWriteChunk<'_>>, out: &mut Vec<u64>) {
    out.extend(writes.iter().map(|c| chunk_len(&c)));
}

/// Rebuild a received reply's unreduced Payload stream into `out` (RFC 8166
/// section 3.4.6.1: "the Requester reconstructs the transferred data by
/// concatenating the contents of each segment, in array order, into the RPC
/// Reply message's XDR stream at the known XDR position of the associated
/// DDP-eligible result data item").
///
/// `reduced` is the reduced Payload stream ([`reply_payload`]); `writes` is
/// the reply's Write list (lengths as returned); `results` are the reduced
/// results located in `reduced` by the ULB
/// ([`UpperLayerBinding::reply_ddp_items`] with `reduced` = the number of
/// Write chunks), offsets into `reduced`; `write_bufs[i]` is the memory the
/// Requester registered as Write chunk *i*, its segments back to back, of
/// which the chunk's returned length is used (the Responder fills a chunk
/// contiguously, in segment order).
///
/// Result *i* takes Write chunk *i*; its returned length must equal the
/// result's length. Padding is restored after each result (3.4.6.2: the
/// Responder never writes it). A chunk with no result must be unused
/// (length zero). A chunk that returned nothing for a non-empty result
/// means the Responder did not reduce it, a DDP-eligibility violation
/// (6.1.1): [`ReassemblyError::UnreducedDdpResult`].
pub fn reassemble_reply(
    reduced: &[u8],
    writes: List<'_, XdrWriteChunk<'_>>,
    results: &[DdpItem],
    write_bufs: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result<(), ReassemblyError> {
    out.clear();
    // Every length is checked before anything is reserved: what is reserved is what the
    // Requester holds (the reduced stream and its own Write chunk buffers), never a length
    // the reply's words alone claim.
    let len = walk_reply(reduced.len(), writes, results, write_bufs, |_| {})?;
    out.reserve(len);
    walk_reply(reduced.len(), writes, results, write_bufs, |piece| match piece {
        ReplyPiece::Reduced { start, end } => out.extend_from_slice(&reduced[start..end]),
        ReplyPiece::Result { chunk, len } => {
            // Checked by the walk: the buffer holds `len` bytes (none for an empty result,
            // which may have no buffer at all).
            out.extend_from_slice(write_bufs.get(chunk).map_or(&[][..], |b| &b[..len]));
            out.extend_from_slice(&PADDING[..roundup_pad(len)]);
        }
    })?;
    Ok(())
}

/// One piece of a reassembled reply, in stream order ([`walk_reply`]).
///
/// ```
/// use rpcrdma_v1::reassemble::ReplyPiece;
/// let p = ReplyPiece::Result { chunk: 0, len: 5 };
/// assert_eq!(p.padded_len(), 8);
/// assert_eq!(ReplyPiece::Reduced { start: 4, end: 8 }.padded_len(), 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyPiece {
    /// These bytes of the reduced Payload stream.
    Reduced {
        /// The first byte's offset in the reduced stream.
        start: usize,
        /// One past the last byte's.
        end: usize,
    },
    /// The first `len` bytes of Write chunk `chunk`'s buffer, where the Responder wrote
    /// them, followed by the result's XDR roundup padding (RFC 8166 section 3.4.6.2: never
    /// written by the Responder; zeros).
    Result {
        /// The Write chunk's index in the Write list.
        chunk: usize,
        /// The result's length, padding excluded.
        len: usize,
    },
}

impl ReplyPiece {
    /// The bytes it contributes to the reassembled reply, padding included.
    pub fn padded_len(&self) -> usize {
        match *self {
            ReplyPiece::Reduced { start, end } => end - start,
            ReplyPiece::Result { len, .. } => len + roundup_pad(len),
        }
    }
}

/// Checks a received reply's Write chunks against the results the ULB located, as
/// [`reassemble_reply`] does (its rules and errors), and hands each piece of the unreduced
/// reply to `each` in stream order, without copying anything: a Requester that reads its
/// results where they landed ([`ReplyPiece::Result`]) walks the reply with this. Returns the
/// reassembled length. Empty stretches of the reduced stream are left out. Nothing reaches
/// `each` before a piece is checked, but a later piece may still fail: collect the pieces
/// and use them only on `Ok`.
///
/// ```
/// use rpcrdma_v1::reassemble::{walk_reply, ReplyPiece};
/// use rpcrdma_v1::rt::{List, Seq};
/// use rpcrdma_v1::ulb::DdpItem;
/// use rpcrdma_v1::xdr::*;
/// // One Write chunk returned 5 bytes; the ULB put the result at offset 8 of a 12-byte
/// // reduced stream.
/// let seg = [XdrRdmaSegment { handle: 1, length: 5, offset: 0x10000 }];
/// let writes = [XdrWriteChunk { target: Seq::from_slice(&seg) }];
/// let buf = *b"hello, and more";
/// let mut pieces = Vec::new();
/// let len = walk_reply(12, List::from_slice(&writes), &[DdpItem::new(8, 5)], &[&buf[..]], |p| pieces.push(p)).unwrap();
/// assert_eq!(len, 20);
/// assert_eq!(pieces, [
///     ReplyPiece::Reduced { start: 0, end: 8 },
///     ReplyPiece::Result { chunk: 0, len: 5 },
///     ReplyPiece::Reduced { start: 8, end: 12 },
/// ]);
/// ```
pub fn walk_reply(
    reduced_len: usize,
    writes: List<'_, XdrWriteChunk<'_>>,
    results: &[DdpItem],
    write_bufs: &[&[u8]],
    mut each: impl FnMut(ReplyPiece),
) -> Result<usize, ReassemblyError> {
    let mut total = 0;
    let mut taken = 0;
    for (chunk, write) in writes.iter().enumerate() {
        let returned = chunk_len(&write);
        let Some(item) = results.get(chunk) else {
            if returned != 0 {
                return Err(ReassemblyError::UnclaimedWriteChunk { chunk, returned });
            }
            continue;
        };
        if returned == 0 && item.len != 0 {
            return Err(ReassemblyError::UnreducedDdpResult { chunk, result: item.len });
        }
        if returned != item.len as u64 {
            return Err(ReassemblyError::WriteChunkLengthMismatch { chunk, returned, result: item.len });
        }
        let have = write_bufs.get(chunk).map_or(0, |b| b.len());
        if have < item.len {
            return Err(ReassemblyError::WriteBufferTooShort { chunk, need: returned, have });
        }
        if item.offset < taken {
            return Err(ReassemblyError::OutOfOrder { position: item.offset as u64, placed: taken });
        }
        if item.offset > reduced_len {
            return Err(ReassemblyError::PositionBeyondPayload { position: item.offset as u64, end: reduced_len });
        }
        if item.offset > taken {
            each(ReplyPiece::Reduced { start: taken, end: item.offset });
        }
        each(ReplyPiece::Result { chunk, len: item.len });
        total += item.offset - taken + item.len + roundup_pad(item.len);
        taken = item.offset;
    }
    if reduced_len > taken {
        each(ReplyPiece::Reduced { start: taken, end: reduced_len });
    }
    Ok(total + reduced_len - taken)
}

/// Reassemble a received reply to the RPC Call message `call` with the help
/// of its ULB: pick the reduced Payload stream ([`reply_payload`]), locate
/// the results the Responder moved into Write chunks
/// (`ulb.reply_ddp_items(call, reduced, write chunks, results)`: which
/// results are DDP-eligible depends on the call's procedure; `results` is
/// scratch, replaced) and rebuild the unreduced stream into `out`
/// ([`reassemble_reply`]).
///
/// ```
/// use rpcrdma_v1::reassemble::reassemble_reply_with_ulb;
/// use rpcrdma_v1::rt::{List, Seq};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_v1::xdr::*;
///
/// // The reply header returned one Write chunk with 5 bytes in it.
/// let seg = [XdrRdmaSegment { handle: 1, length: 5, offset: 0x10000 }];
/// let writes = [XdrWriteChunk { target: Seq::from_slice(&seg) }];
/// let hdr = RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 8, rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
///     rdma_reads: List::default(), rdma_writes: List::from_slice(&writes), rdma_reply: None }) };
/// // Inline: 4 bytes, then the result's length word (5).
/// let inline = [0, 0, 0, 1, 0, 0, 0, 5];
/// let write_buf = b"hello, and the rest of the 8 KiB buffer";
///
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(4), max_result: 8192, max_reply: 64 };
/// let (mut results, mut stream) = (Vec::new(), Vec::new());
/// let call = [0, 0, 0, 1, 0, 0, 0, 0]; // XID 1, CALL: the call this reply answers
/// reassemble_reply_with_ulb(&call, &hdr, &inline, &[], &[&write_buf[..]], &ulb, &mut results, &mut stream).unwrap();
/// assert_eq!(stream, [0, 0, 0, 1, 0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o', 0, 0, 0]);
/// ```
#[allow(clippy::too_many_arguments)] // each is one of the reply's parts, or scratch
pub fn reassemble_reply_with_ulb<U: UpperLayerBinding + ?Sized>(
    call: &[u8],
    msg: &RdmaMsg<'_>,
    inline: &[u8],
    reply_chunk_buf: &[u8],
    write_bufs: &[&[u8]],
    ulb: &U,
    results: &mut Vec<DdpItem>,
    out: &mut Vec<u8>,
) -> Result<(), ReassemblyError> {
    let reduced = reply_payload(msg, inline, reply_chunk_buf)?;
    let writes = match msg.rdma_body {
        RdmaBody::RdmaMsg(h) => h.rdma_writes,
        RdmaBody::RdmaNomsg(h) => h.rdma_writes,
        _ => return Err(ReassemblyError::NoRpcMessage),
    };
    results.clear();
    ulb.reply_ddp_items(call, reduced, writes.len(), results);
    reassemble_reply(reduced, writes, results, write_bufs, out)
}
