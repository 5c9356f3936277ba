//! A validated, zero-copy view of a received RPC-over-RDMA Version One
//! transport header (RFC 8166 sections 3.4 and 4; draft sections 5.2-5.3).
//!
//! [`Header::parse`] decodes the header with the generated codec, then checks
//! the chunk rules a receiver depends on before it uses a single segment:
//! read positions are multiples of four and grouped into chunks in ascending,
//! non-overlapping order; the number of segments and the size of each chunk
//! are within the caller's [`HeaderLimits`]; RDMA_NOMSG carries the chunk
//! that holds its payload; an RDMA_MSG carries an RPC message whose XID is
//! the header's. Nothing is allocated: the view borrows the received bytes.
//!
//! ```
//! use rpcrdma_v1::header::{Header, HeaderLimits};
//! // RDMA_MSG, xid 7, no chunks, then an RPC call whose XID is also 7.
//! let words = [7u32, 1, 32, 0, 0, 0, 0, 7, 0];
//! let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
//! let h = Header::parse(&bytes, &HeaderLimits::default()).unwrap();
//! assert_eq!((h.xid(), h.credit(), h.header_len()), (7, 32, 28));
//! assert_eq!(h.payload(), &bytes[28..]);
//! assert_eq!(h.read_chunks().count(), 0);
//! ```

use xdr_spec_rt::{Limits, List, Reader, SeqIter, Xdr};

use crate::xdr::*;

use crate::Version;

mod detached;
pub use detached::Detached;
pub mod validations;

/// The only version this crate's own rules speak (RFC 8166 section 4.2.2).
pub const RPCRDMA_VERSION: Version = Version::ONE;

/// Offsets of the four fixed header words, which keep their positions in
/// every version (RFC 8166 section 4.2).
pub mod offsets {
    /// `rdma_xid`.
    pub const XID: usize = 0;
    /// `rdma_vers`.
    pub const VERS: usize = 4;
    /// `rdma_credit`.
    pub const CREDIT: usize = 8;
    /// `rdma_proc`, the body union's discriminant.
    pub const PROC: usize = 12;
    /// The first byte after the fixed words.
    pub const BODY: usize = 16;
}

/// What a receiver is willing to accept in one header, checked before any
/// segment is used: the peer alone never sizes what a receiver allocates
/// or moves for one message beyond these.
///
/// ```
/// let l = rpcrdma_v1::header::HeaderLimits::default();
/// assert_eq!((l.max_segments, l.max_chunk_len, l.max_message_len), (16, 2 << 20, 4 << 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeaderLimits {
    /// Most RDMA segments in one header, all lists together. Linux uses 16
    /// (`RPCRDMA_MAX_HDR_SEGS`), the default.
    pub max_segments: u32,
    /// The largest chunk, in bytes, the Upper Layer allows (its rsize or
    /// wsize; RFC 8166 section 3.4.4: "The Responder can use such limits to
    /// sanity check chunk sizes").
    pub max_chunk_len: u64,
    /// The most bytes all chunks of one header may describe together (Read
    /// chunks, Write chunks and the Reply chunk): with 16 segments of up to
    /// 4 GiB each, `max_chunk_len` alone would let one 100-byte header ask a
    /// responder to fetch 12 GiB.
    pub max_message_len: u64,
    /// The most Read chunks (a Read list's entries grouped by Position) one
    /// header may carry: the DDP-eligible arguments a responder is prepared
    /// to read (draft-ietf-nfsv4-rpcrdma-version-two-07 section 7.3.1; in
    /// Version One a Position-zero chunk counts too). No limit beyond
    /// `max_segments`'s by default.
    pub max_read_chunks: u32,
    /// The most Write chunks one header may carry: the DDP-eligible results a
    /// responder is prepared to write (-07 section 7.3.2). No limit beyond
    /// `max_segments`'s by default.
    pub max_write_chunks: u32,
}

impl Default for HeaderLimits {
    /// 16 segments (Linux's `RPCRDMA_MAX_HDR_SEGS`); chunks up to 2 MiB, twice
    /// the largest NFS payload Linux moves over RDMA (`RPCSVC_MAXPAYLOAD_RDMA`,
    /// 1 MiB), and 4 MiB for all chunks of one message together.
    fn default() -> Self {
        HeaderLimits {
            max_segments: 16,
            max_chunk_len: 2 << 20,
            max_message_len: 4 << 20,
            max_read_chunks: u32::MAX,
            max_write_chunks: u32::MAX,
        }
    }
}

/// Built from [`Default`] (or [`HeaderLimits::unlimited`]) with these (the type is
/// `#[non_exhaustive]`).
///
/// ```
/// let l = rpcrdma_v1::header::HeaderLimits::default().max_segments(8);
/// assert_eq!((l.max_segments, l.max_chunk_len), (8, 2 << 20));
/// ```
impl HeaderLimits {
    /// Sets `max_segments` (segments in one header), builder style.
    #[must_use]
    pub fn max_segments(mut self, value: u32) -> Self {
        self.max_segments = value;
        self
    }

    /// Sets `max_chunk_len` (the largest chunk), builder style.
    #[must_use]
    pub fn max_chunk_len(mut self, value: u64) -> Self {
        self.max_chunk_len = value;
        self
    }

    /// Sets `max_message_len` (all chunks of one header together), builder style.
    #[must_use]
    pub fn max_message_len(mut self, value: u64) -> Self {
        self.max_message_len = value;
        self
    }

    /// Sets `max_read_chunks` (Read chunks in one header), builder style.
    ///
    /// ```
    /// use rpcrdma_v1::header::{Header, HeaderError, HeaderLimits};
    /// // RDMA_MSG, xid 7: a Read list of two chunks (Positions 8 and 16), no Write list, no
    /// // Reply chunk, then the RPC message.
    /// let w = [7u32, 1, 32, 0, 1, 8, 9, 4, 0, 0x100, 1, 16, 9, 4, 0, 0x200, 0, 0, 0, 7, 0];
    /// let msg: Vec<u8> = w.iter().flat_map(|x| x.to_be_bytes()).collect();
    /// assert!(Header::parse(&msg, &HeaderLimits::default()).is_ok());
    /// let err = Header::parse(&msg, &HeaderLimits::default().max_read_chunks(1)).unwrap_err();
    /// assert_eq!(err, HeaderError::TooManyReadChunks { count: 2, limit: 1 });
    /// assert!(err.is_over_limit());
    /// ```
    #[must_use]
    pub fn max_read_chunks(mut self, value: u32) -> Self {
        self.max_read_chunks = value;
        self
    }

    /// Sets `max_write_chunks` (Write chunks in one header), builder style.
    #[must_use]
    pub fn max_write_chunks(mut self, value: u32) -> Self {
        self.max_write_chunks = value;
        self
    }

    /// No limits at all: for tools that decode whatever they are shown
    /// (a dissector, a fuzz target's reference), never for a receiver.
    ///
    /// ```
    /// let l = rpcrdma_v1::header::HeaderLimits::unlimited();
    /// assert_eq!(l.max_message_len, u64::MAX);
    /// ```
    pub const fn unlimited() -> Self {
        HeaderLimits {
            max_segments: u32::MAX,
            max_chunk_len: u64::MAX,
            max_message_len: u64::MAX,
            max_read_chunks: u32::MAX,
            max_write_chunks: u32::MAX,
        }
    }
}

/// The procedures a receiver accepts as carrying an RPC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// RDMA_MSG: the RPC message follows the header inline (it may be
    /// reduced: RFC 8166 section 3.5.2).
    Msg,
    /// RDMA_NOMSG: the RPC message is in a chunk (RFC 8166 section 3.5.3).
    NoMsg,
}

/// Why a received header is not acceptable. Each variant names the rule;
/// [`crate::verdict`] turns them into the reply the spec requires.
///
/// ```
/// use rpcrdma_v1::header::{Header, HeaderError, HeaderLimits};
/// let to_bytes = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
/// let limits = HeaderLimits::default();
///
/// let v2 = to_bytes(&[7, 2, 32, 0]);
/// assert_eq!(Header::parse(&v2, &limits), Err(HeaderError::Version { vers: 2 }));
/// // The RPC message after the header must carry the header's XID.
/// let other_xid = to_bytes(&[7, 1, 32, 0, 0, 0, 0, 8, 0]);
/// let err = Header::parse(&other_xid, &limits).unwrap_err();
/// assert_eq!(err, HeaderError::XidMismatch { header: 7, rpc: 8 });
/// assert_eq!(err.to_string(), "rdma_xid 0x7 differs from the RPC message's XID 0x8");
/// // Two read segments where the receiver accepts one: a limit, not a protocol rule.
/// let reads = to_bytes(&[7, 1, 32, 0, 1, 4, 1, 8, 0, 0, 1, 8, 2, 8, 0, 0, 0, 0, 0, 7, 0]);
/// let err = Header::parse(&reads, &limits.max_segments(1)).unwrap_err();
/// assert!(matches!(err, HeaderError::TooManySegments { limit: 1, .. }) && err.is_over_limit());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer than 8 bytes: not even the XID and version can be read.
    #[error("{len} bytes: too short to hold the XID and version")]
    TooShortForVersion {
        /// Bytes received.
        len: usize,
    },
    /// A version other than 1 (RFC 8166 section 4.5.1).
    #[error("version {vers} is not supported")]
    Version {
        /// The `rdma_vers` received.
        vers: u32,
    },
    /// The fixed header or the chunk lists are not valid XDR (RFC 8166
    /// section 4.5.2).
    #[error("malformed header: {0}")]
    Xdr(xdr_spec_rt::Error),
    /// A procedure number outside the enum (RFC 8166 section 4.5.2).
    #[error("unknown procedure {0}")]
    UnknownProc(u32),
    /// RDMA_MSGP or RDMA_DONE, which senders MUST NOT send (draft 5.6).
    #[error("procedure {0} (RDMA_MSGP or RDMA_DONE) is no longer supported")]
    Obsolete(u32),
    /// RDMA_ERROR is not a message to validate: see [`crate::verdict`].
    #[error("RDMA_ERROR carries no RPC message")]
    IsError,
    /// More segments than [`HeaderLimits::max_segments`].
    #[error("{count} segments in one header, more than the limit {limit}")]
    TooManySegments {
        /// Segments counted (up to where counting stopped).
        count: u32,
        /// The limit.
        limit: u32,
    },
    /// More Read chunks than [`HeaderLimits::max_read_chunks`].
    #[error("{count} read chunks in one header, more than the limit {limit}")]
    TooManyReadChunks {
        /// Read chunks counted.
        count: u32,
        /// The limit.
        limit: u32,
    },
    /// More Write chunks than [`HeaderLimits::max_write_chunks`].
    #[error("{count} write chunks in one header, more than the limit {limit}")]
    TooManyWriteChunks {
        /// Write chunks counted.
        count: u32,
        /// The limit.
        limit: u32,
    },
    /// A chunk longer than [`HeaderLimits::max_chunk_len`].
    #[error("a chunk of {len} bytes exceeds the limit {limit}")]
    ChunkTooLong {
        /// The chunk's length (sum of its segments).
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// The chunks of one header describe more bytes together than
    /// [`HeaderLimits::max_message_len`].
    #[error("the chunks of one header describe {len} bytes, more than the limit {limit}")]
    MessageTooLong {
        /// All chunks' lengths added up.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// A Read segment's Position is not a multiple of four (RFC 8166
    /// section 3.4.5).
    #[error("read position {0} is not a multiple of 4")]
    MisalignedPosition(u32),
    /// A Read chunk's position is not after the previous chunk's data: the
    /// chunks overlap, or a chunk's segments are not together in the list
    /// (RFC 8166 section 3.4.5: all segments of a chunk share one
    /// position).
    #[error("read chunk at position {position} overlaps or precedes the chunk at {previous} (length {previous_len})")]
    OverlappingReadChunks {
        /// The offending position.
        position: u32,
        /// The previous chunk's position.
        previous: u32,
        /// The previous chunk's length.
        previous_len: u64,
    },
    /// RDMA_NOMSG with neither a Position-zero Read chunk nor a Reply chunk
    /// to hold the RPC message (RFC 8166 section 4.5.2).
    #[error("RDMA_NOMSG without a chunk holding the RPC message")]
    NoMsgWithoutChunk,
    /// RDMA_MSG with no RPC message (or less than its XID) after the header.
    #[error("RDMA_MSG with no RPC message after the header")]
    MissingPayload,
    /// The RPC message's XID differs from `rdma_xid` (RFC 8166 section
    /// 4.5.2).
    #[error("rdma_xid {header:#x} differs from the RPC message's XID {rpc:#x}")]
    XidMismatch {
        /// The transport header's XID.
        header: u32,
        /// The RPC message's XID.
        rpc: u32,
    },
    /// RDMA_MSG with a Position-zero Read chunk: the whole message would be
    /// both inline and in the chunk (RFC 8166 section 3.5.3 puts Long calls
    /// in RDMA_NOMSG).
    #[error("RDMA_MSG carries a Position-zero Read chunk")]
    PositionZeroInRdmaMsg,
    /// An RPC reply with Read chunks: responders MUST leave the Read list
    /// empty in all replies (draft section 5.3.1).
    #[error("a reply carries a read list")]
    ReplyWithReadList,
}

impl HeaderError {
    /// Whether the header broke one of the receiver's [`HeaderLimits`] (too
    /// many segments, a chunk or the whole message too long) rather than a
    /// rule of the protocol: a refusal a receiver counts as a bound enforced.
    ///
    /// ```
    /// use rpcrdma_v1::header::HeaderError;
    /// assert!(HeaderError::MessageTooLong { len: 5, limit: 4 }.is_over_limit());
    /// assert!(!HeaderError::UnknownProc(9).is_over_limit());
    /// ```
    pub fn is_over_limit(&self) -> bool {
        matches!(
            self,
            HeaderError::TooManySegments { .. }
                | HeaderError::TooManyReadChunks { .. }
                | HeaderError::TooManyWriteChunks { .. }
                | HeaderError::ChunkTooLong { .. }
                | HeaderError::MessageTooLong { .. }
        )
    }
}

/// A received, validated RDMA_MSG or RDMA_NOMSG header and the bytes after
/// it. Borrowed from the receive buffer; `Copy`.
///
/// ```
/// use rpcrdma_v1::header::{chunk_len, Header, HeaderLimits, MessageKind};
/// // RDMA_MSG, xid 7, credit 32: no Read list; a Write list of one chunk, one
/// // segment (handle 0xab, 4096 bytes at 0x1000); no Reply chunk; then the RPC call.
/// let words = [7u32, 1, 32, 0, 0, 1, 1, 0xab, 4096, 0, 0x1000, 0, 0, 7, 0];
/// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
/// let h = Header::parse(&bytes, &HeaderLimits::default()).unwrap();
/// assert_eq!((h.xid(), h.credit(), h.kind()), (7, 32, MessageKind::Msg));
/// assert_eq!(h.header_len(), 52);
/// assert_eq!(h.payload(), &bytes[52..]); // the RPC message, XID 7
/// let write = h.write_list().iter().next().unwrap();
/// assert_eq!(chunk_len(&write), 4096);
/// assert_eq!(write.target.get(0).unwrap().handle, 0xab);
/// assert!(h.reply_chunk().is_none() && h.position_zero_chunk().is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    xid: u32,
    vers: u32,
    credit: u32,
    kind: MessageKind,
    reads: List<'a, XdrReadChunk>,
    writes: List<'a, XdrWriteChunk<'a>>,
    reply: Option<XdrWriteChunk<'a>>,
    header_len: usize,
    payload: &'a [u8],
}

/// RPC `msg_type` REPLY (RFC 5531 section 9), the second word of an RPC
/// message.
const RPC_REPLY: u32 = 1;

fn word(bytes: &[u8], at: usize) -> Option<u32> {
    bytes.get(at..at + 4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// The fixed words of a received message, which every version keeps at the
/// same offsets ([`offsets`]; RFC 8166 section 4.2, draft section 4.1), read
/// once: what a receiver looks at before it knows which version's rules
/// apply. The one place the offsets are read; the verdicts of both versions
/// and the negotiation start here.
///
/// ```
/// use rpcrdma_v1::header::Fixed;
/// let bytes: Vec<u8> = [9u32, 2, 32, 4].iter().flat_map(|w| w.to_be_bytes()).collect();
/// let f = Fixed::read(&bytes).unwrap();
/// assert_eq!((f.xid, f.vers, f.credit, f.proc), (9, 2, Some(32), Some(4)));
/// assert!(f.is_error());
/// assert_eq!(Fixed::read(&bytes[..7]), None);
/// assert_eq!(Fixed::read(&bytes[..8]).unwrap().credit, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed {
    /// `rdma_xid`.
    pub xid: u32,
    /// `rdma_vers`.
    pub vers: u32,
    /// `rdma_credit`, if the message is that long.
    pub credit: Option<u32>,
    /// `rdma_proc`, if the message is that long.
    pub proc: Option<u32>,
}

impl Fixed {
    /// The fixed words of `bytes`; `None` when not even the XID and the
    /// version can be read (such a message can only be dropped: RFC 8166
    /// section 4.5 answers need both).
    pub fn read(bytes: &[u8]) -> Option<Fixed> {
        Some(Fixed {
            xid: word(bytes, offsets::XID)?,
            vers: word(bytes, offsets::VERS)?,
            credit: word(bytes, offsets::CREDIT),
            proc: word(bytes, offsets::PROC),
        })
    }

    /// Whether the message is an RDMA_ERROR, whose layout of ERR_VERS every
    /// version shares: never answered with another (RFC 8166 section 4.5).
    pub fn is_error(&self) -> bool {
        self.proc == Some(RDMA_ERROR_U32)
    }
}

/// Writes `credit` into the `rdma_credit` word of a marshaled message (every version keeps it
/// at [`offsets::CREDIT`]): for a header built before the credit it carries was known, such
/// as a Version Two draft-ietf-07 running total taken as the message is posted.
///
/// ```
/// use rpcrdma_v1::header::{set_credit, Fixed};
/// let mut m = [0u8; 16];
/// set_credit(&mut m, 40);
/// assert_eq!(Fixed::read(&m).unwrap().credit, Some(40));
/// ```
///
/// # Panics
/// When `bytes` is shorter than the fixed words up to `rdma_credit` (12 bytes): the caller
/// marshaled it, so that is a bug, not peer input.
pub fn set_credit(bytes: &mut [u8], credit: u32) {
    bytes[offsets::CREDIT..offsets::CREDIT + 4].copy_from_slice(&credit.to_be_bytes());
}

/// The `rdma_proc` word of a received message, in every version at
/// [`offsets::PROC`]; when the input ends before it, the XDR error for the
/// incomplete word the input ends in.
///
/// ```
/// use rpcrdma_v1::header::{proc_word, HeaderError};
/// assert_eq!(proc_word(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 4]), Ok(4));
/// assert!(matches!(proc_word(&[0; 13]), Err(HeaderError::Xdr(_))));
/// ```
pub fn proc_word(bytes: &[u8]) -> Result<u32, HeaderError> {
    word(bytes, offsets::PROC).ok_or_else(|| truncated_at_word(bytes.len()))
}

/// A fixed word is missing: the incomplete item is the word the input ends
/// in.
fn truncated_at_word(len: usize) -> HeaderError {
    let at = len & !3;
    HeaderError::Xdr(xdr_spec_rt::Error::Truncated { at, need: at + 4 - len })
}

impl<'a> Header<'a> {
    /// Decode and validate the header at the start of `bytes` (a whole
    /// received message).
    pub fn parse(bytes: &'a [u8], limits: &HeaderLimits) -> Result<Header<'a>, HeaderError> {
        let (Some(_), Some(vers)) = (word(bytes, offsets::XID), word(bytes, offsets::VERS)) else {
            return Err(HeaderError::TooShortForVersion { len: bytes.len() });
        };
        if vers != RPCRDMA_VERSION.wire() {
            return Err(HeaderError::Version { vers });
        }
        let kind = match proc_word(bytes)? {
            RDMA_MSG_U32 => MessageKind::Msg,
            RDMA_NOMSG_U32 => MessageKind::NoMsg,
            p @ (RDMA_MSGP_U32 | RDMA_DONE_U32) => return Err(HeaderError::Obsolete(p)),
            RDMA_ERROR_U32 => return Err(HeaderError::IsError),
            p => return Err(HeaderError::UnknownProc(p)),
        };
        Header::parse_chunk_lists(bytes, kind, limits)
    }

    /// The version-independent part of [`Header::parse`], the seam Version
    /// Two uses: decode the three chunk lists that follow the four fixed
    /// words and check every chunk rule, for a message whose version and
    /// procedure the caller has already judged to be `kind`.
    ///
    /// Version Two's `rpcrdma2_chunk_lists` has Version One's wire shape
    /// word for word (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2:
    /// `rpcrdma2_segment`, `rpcrdma2_read_segment`, `rpcrdma2_write_chunk`
    /// and the three lists are RFC 8166 section 4.2's structures renamed),
    /// and its error handling "works the same way" (section 4.2), so one
    /// implementation of RFC 8166 sections 3.4 and 4.5.2 serves both.
    ///
    /// ```
    /// use rpcrdma_v1::header::{Header, HeaderLimits, MessageKind};
    /// // A version 2 RDMA_MSG: same fixed words, same empty chunk lists.
    /// let words = [7u32, 2, 32, 0, 0, 0, 0, 7, 0];
    /// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    /// let h = Header::parse_chunk_lists(&bytes, MessageKind::Msg, &HeaderLimits::default()).unwrap();
    /// assert_eq!((h.xid(), h.version().wire(), h.header_len()), (7, 2, 28));
    /// ```
    pub fn parse_chunk_lists(
        bytes: &'a [u8],
        kind: MessageKind,
        limits: &HeaderLimits,
    ) -> Result<Header<'a>, HeaderError> {
        let (Some(xid), Some(vers), Some(credit)) =
            (word(bytes, offsets::XID), word(bytes, offsets::VERS), word(bytes, offsets::CREDIT))
        else {
            return Err(truncated_at_word(bytes.len()));
        };
        validations::note();
        // One reader over the whole message, so error offsets count from its
        // first byte.
        let mut r = ChunkLists::reader(bytes, limits);
        let lists = r
            .take(offsets::BODY)
            .and_then(|_| RpcRdmaHeader::decode_from(&mut r))
            .map_err(|e| ChunkLists::decode_error(e, limits))?;
        let header_len = r.position();
        let header = Header {
            xid,
            vers,
            credit,
            kind,
            reads: lists.rdma_reads,
            writes: lists.rdma_writes,
            reply: lists.rdma_reply,
            header_len,
            payload: &bytes[header_len..],
        };
        header.chunk_lists().check(limits)?;
        header.check_message()?;
        Ok(header)
    }

    /// The seam for a version whose header has another shape but carries Version One's
    /// chunk lists (draft-ietf-nfsv4-rpcrdma-version-two-07's RDMA2_CALL_INLINE): a header
    /// view made of parts its own decoder found, `lists` already checked by
    /// [`ChunkLists::check`], `payload` the RPC message. Only the message rules are checked
    /// here (those of [`Header::parse`] that are not chunk rules: the RPC message's XID is the
    /// header's, an RDMA_MSG carries no Position-zero chunk, a reply no Read list).
    ///
    /// ```
    /// use rpcrdma_v1::header::{ChunkLists, Header, HeaderError, MessageKind};
    /// use rpcrdma_v1::rt::List;
    /// let none = ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&[]), reply: None };
    /// let rpc: Vec<u8> = [7u32, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
    /// let h = Header::from_lists(7, 2, 32, MessageKind::Msg, none, 20, &rpc).unwrap();
    /// assert_eq!((h.xid(), h.version().wire(), h.payload()), (7, 2, &rpc[..]));
    /// let wrong = Header::from_lists(8, 2, 32, MessageKind::Msg, none, 20, &rpc);
    /// assert_eq!(wrong, Err(HeaderError::XidMismatch { header: 8, rpc: 7 }));
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn from_lists(
        xid: u32,
        vers: u32,
        credit: u32,
        kind: MessageKind,
        lists: ChunkLists<'a>,
        header_len: usize,
        payload: &'a [u8],
    ) -> Result<Header<'a>, HeaderError> {
        let ChunkLists { reads, writes, reply } = lists;
        let header = Header { xid, vers, credit, kind, reads, writes, reply, header_len, payload };
        header.check_message()?;
        Ok(header)
    }

    /// The three chunk lists, as the chunk rules see them.
    pub fn chunk_lists(&self) -> ChunkLists<'a> {
        ChunkLists { reads: self.reads, writes: self.writes, reply: self.reply }
    }

    /// The message rules of [`Header::parse`] alone, for a view made without parsing its
    /// bytes ([`Detached::encode`]'s, over a receiver's rewrite of another version's
    /// message whose chunk rules it checked as it was received): RFC 8166 section 4.5.2's
    /// examples of XDR errors, an RDMA_NOMSG with no chunk for its message and an XID that
    /// differs from the RPC message's; and draft section 5.3.1, replies carry no Read list.
    ///
    /// ```
    /// use rpcrdma_v1::header::{Detached, HeaderError, MessageKind};
    /// use xdr_spec_rt::List;
    /// // An RDMA_MSG whose RPC message has XID 8 under a header of XID 7.
    /// let (bytes, view) = Detached::encode(7, 2, 32, MessageKind::Msg, &[], List::from_slice(&[]), None, &[0, 0, 0, 8, 0, 0, 0, 0]);
    /// let h = view.attach(&bytes).unwrap();
    /// assert_eq!(h.check_message_rules(), Err(HeaderError::XidMismatch { header: 7, rpc: 8 }));
    /// ```
    pub fn check_message_rules(&self) -> Result<(), HeaderError> {
        self.check_message()
    }

    /// RFC 8166 section 4.5.2's examples of XDR errors: an RDMA_NOMSG with
    /// no chunk for its message, an XID that differs from the RPC
    /// message's; and draft section 5.3.1: replies carry no Read list.
    fn check_message(&self) -> Result<(), HeaderError> {
        match self.kind {
            MessageKind::NoMsg => {
                if self.position_zero_chunk().is_none() && self.reply.is_none() {
                    return Err(HeaderError::NoMsgWithoutChunk);
                }
            }
            MessageKind::Msg => {
                // A Position-zero Read chunk holds the whole call: that is a
                // Long call, which RDMA_NOMSG carries (RFC 8166 section
                // 3.5.3); with an inline message as well it is ambiguous.
                if self.position_zero_chunk().is_some() {
                    return Err(HeaderError::PositionZeroInRdmaMsg);
                }
                let Some(rpc_xid) = word(self.payload, 0) else { return Err(HeaderError::MissingPayload) };
                if rpc_xid != self.xid {
                    return Err(HeaderError::XidMismatch { header: self.xid, rpc: rpc_xid });
                }
                if word(self.payload, 4) == Some(RPC_REPLY) && !self.reads.is_empty() {
                    return Err(HeaderError::ReplyWithReadList);
                }
            }
        }
        Ok(())
    }

    /// `rdma_xid`.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// `rdma_vers`: Version One from [`Header::parse`]; whatever the caller
    /// of [`Header::parse_chunk_lists`] accepted.
    ///
    /// ```
    /// use rpcrdma_v1::header::{Header, HeaderLimits};
    /// use rpcrdma_v1::Version;
    /// let bytes: Vec<u8> = [7u32, 1, 32, 0, 0, 0, 0, 7, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
    /// assert_eq!(Header::parse(&bytes, &HeaderLimits::default()).unwrap().version(), Version::ONE);
    /// ```
    pub fn version(&self) -> Version {
        Version::from_wire(self.vers)
    }

    /// `rdma_credit`: a request for credits in a call, a grant in a reply
    /// (RFC 8166 section 3.3.1).
    pub fn credit(&self) -> u32 {
        self.credit
    }

    /// RDMA_MSG or RDMA_NOMSG.
    pub fn kind(&self) -> MessageKind {
        self.kind
    }

    /// The length of the transport header: the RPC message (or nothing,
    /// for RDMA_NOMSG) starts here.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The bytes after the transport header: the (possibly reduced) RPC
    /// message of an RDMA_MSG.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The Read list, grouped into Read chunks by position.
    pub fn read_chunks(&self) -> ReadChunks<'a> {
        self.chunk_lists().read_chunks()
    }

    /// The Position-zero Read chunk (the whole RPC call of a Long call,
    /// RFC 8166 section 3.5.3), if present.
    pub fn position_zero_chunk(&self) -> Option<ReadChunk<'a>> {
        self.read_chunks().next().filter(|c| c.position() == 0)
    }

    /// The raw Read list, one entry per read segment.
    pub fn read_list(&self) -> List<'a, XdrReadChunk> {
        self.reads
    }

    /// The Write list: one entry per Write chunk.
    pub fn write_list(&self) -> List<'a, XdrWriteChunk<'a>> {
        self.writes
    }

    /// The Reply chunk, if provided.
    pub fn reply_chunk(&self) -> Option<XdrWriteChunk<'a>> {
        self.reply
    }

    /// The header in Version One's generated types, for the functions that
    /// take one ([`crate::reassemble::reassemble_call`],
    /// [`crate::marshal_reply::ProvidedChunks::from_call`]). `rdma_vers` is
    /// [`Header::version`]: a Version Two header's chunk lists have the same
    /// shape, so they reassemble the same way.
    ///
    /// ```
    /// use rpcrdma_v1::header::{Header, HeaderLimits};
    /// use rpcrdma_v1::xdr::RdmaBody;
    /// let words = [7u32, 1, 32, 0, 0, 0, 0, 7, 0];
    /// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    /// let msg = Header::parse(&bytes, &HeaderLimits::default()).unwrap().to_msg();
    /// assert_eq!((msg.rdma_xid, msg.rdma_credit), (7, 32));
    /// assert!(matches!(msg.rdma_body, RdmaBody::RdmaMsg(_)));
    /// ```
    pub fn to_msg(&self) -> RdmaMsg<'a> {
        rdma_msg(self.xid, self.vers, self.credit, self.kind, self.chunk_lists())
    }
}

/// The header `kind` with these words and lists, to encode: the one place its body's union
/// arm is chosen ([`Header::to_msg`], [`Detached::encode`]).
pub(crate) fn rdma_msg<'a>(xid: u32, vers: u32, credit: u32, kind: MessageKind, lists: ChunkLists<'a>) -> RdmaMsg<'a> {
    let ChunkLists { reads: rdma_reads, writes: rdma_writes, reply: rdma_reply } = lists;
    let rdma_body = match kind {
        MessageKind::Msg => RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads, rdma_writes, rdma_reply }),
        MessageKind::NoMsg => RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads, rdma_writes, rdma_reply }),
    };
    RdmaMsg { rdma_xid: xid, rdma_vers: vers, rdma_credit: credit, rdma_body }
}

/// The three chunk lists of a message (RFC 8166 section 4.2: the Read list, the Write list,
/// the Reply chunk), and the one place the chunk rules a receiver depends on are checked.
/// Version One's header, and both Version Two drafts' (-00's `rpcrdma2_chunk_lists`, -07's
/// `rpcrdma2_read_list`, `rpcrdma2_write_list` and `rpcrdma2_write_chunk`, the same
/// structures renamed, word for word), carry these lists in one wire shape.
///
/// ```
/// use rpcrdma_v1::header::{ChunkLists, HeaderError, HeaderLimits};
/// use rpcrdma_v1::rt::Xdr;
/// use rpcrdma_v1::xdr::RpcRdmaHeader;
/// // A Read list of two chunks out of order (positions 12, then 8), no Write list, no Reply
/// // chunk.
/// let words = [1u32, 12, 0x11, 4, 0, 0, 1, 8, 0x12, 4, 0, 0, 0, 0, 0];
/// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
/// let limits = HeaderLimits::default();
/// let mut r = ChunkLists::reader(&bytes, &limits);
/// let l = RpcRdmaHeader::decode_from(&mut r).unwrap();
/// let lists = ChunkLists { reads: l.rdma_reads, writes: l.rdma_writes, reply: l.rdma_reply };
/// assert!(matches!(lists.check(&limits), Err(HeaderError::OverlappingReadChunks { position: 8, .. })));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLists<'a> {
    /// The Read list: one entry per read segment.
    pub reads: List<'a, XdrReadChunk>,
    /// The Write list: one entry per Write chunk.
    pub writes: List<'a, XdrWriteChunk<'a>>,
    /// The Reply chunk, if any.
    pub reply: Option<XdrWriteChunk<'a>>,
}

impl<'a> ChunkLists<'a> {
    /// Whether there is no chunk at all: no Read chunk, no Write chunk, no Reply chunk.
    ///
    /// ```
    /// use rpcrdma_v1::header::ChunkLists;
    /// use rpcrdma_v1::rt::List;
    /// let none = ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&[]), reply: None };
    /// assert!(none.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty() && self.reply.is_none()
    }

    /// A reader over a whole received message whose decoder limits follow `limits`:
    /// segments are at least 16 bytes and list entries at least 20, so with these limits a
    /// hostile count stops the decoder early. Decode errors go through
    /// [`ChunkLists::decode_error`].
    pub fn reader(bytes: &'a [u8], limits: &HeaderLimits) -> Reader<'a> {
        let max = limits.max_segments;
        Reader::with_limits(bytes, Limits::default().max_list_entries(max.saturating_add(1)).max_array_len(max))
    }

    /// The header error for a decode error of a [`ChunkLists::reader`]: its decoder limit
    /// is the segment limit.
    pub fn decode_error(e: xdr_spec_rt::Error, limits: &HeaderLimits) -> HeaderError {
        let max = limits.max_segments;
        match e {
            xdr_spec_rt::Error::LimitExceeded { .. } => {
                HeaderError::TooManySegments { count: max.saturating_add(1), limit: max }
            }
            e => HeaderError::Xdr(e),
        }
    }

    /// Every chunk rule: the segment limit over all three lists, each chunk's and the
    /// message's length limits, and RFC 8166 section 3.4.5's Read list order.
    pub fn check(&self, limits: &HeaderLimits) -> Result<(), HeaderError> {
        self.check_segments(limits)?;
        self.check_read_list(limits)?;
        // Counted once the Read list is known to be in order: out of order, its entries do
        // not group into chunks, and the answer is the order's, not a count's.
        self.check_chunk_counts(limits)?;
        self.check_message_len(limits)
    }

    /// The Read list, grouped into Read chunks by position.
    pub fn read_chunks(&self) -> ReadChunks<'a> {
        ReadChunks { list: self.reads, iter: self.reads.iter(), pending: None, index: 0 }
    }

    /// The segments of all three lists together (what [`HeaderLimits::max_segments`] bounds).
    pub fn segment_count(&self) -> u64 {
        self.reads.len() as u64
            + self.writes.iter().map(|w| w.target.len() as u64).sum::<u64>()
            + self.reply.map_or(0, |r| r.target.len() as u64)
    }

    /// The bytes all the chunks name together (saturating: the limits are checked against it).
    pub fn total_len(&self) -> u64 {
        let reads = self.reads.iter().map(|r| u64::from(r.target.length));
        let writes = self.writes.iter().map(|w| chunk_len(&w));
        reads.chain(writes).chain(self.reply.as_ref().map(chunk_len)).fold(0u64, u64::saturating_add)
    }

    /// The Read and Write chunk limits (each list's length is bounded already by the
    /// decoder's segment limit, so counting is cheap).
    fn check_chunk_counts(&self, limits: &HeaderLimits) -> Result<(), HeaderError> {
        let sat = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        if limits.max_read_chunks != u32::MAX {
            let count = self.read_chunks().count();
            if count > limits.max_read_chunks as usize {
                return Err(HeaderError::TooManyReadChunks { count: sat(count), limit: limits.max_read_chunks });
            }
        }
        let count = self.writes.len();
        if count > limits.max_write_chunks as usize {
            return Err(HeaderError::TooManyWriteChunks { count: sat(count), limit: limits.max_write_chunks });
        }
        Ok(())
    }

    /// The segment limit, over all three lists together.
    fn check_segments(&self, limits: &HeaderLimits) -> Result<(), HeaderError> {
        if self.writes.is_empty() && self.reply.is_none() && self.reads.len() as u64 <= u64::from(limits.max_segments) {
            return Ok(());
        }
        let count = self.segment_count();
        if count > u64::from(limits.max_segments) {
            let count = u32::try_from(count).unwrap_or(u32::MAX);
            return Err(HeaderError::TooManySegments { count, limit: limits.max_segments });
        }
        for len in self.writes.iter().map(|w| chunk_len(&w)).chain(self.reply.as_ref().map(chunk_len)) {
            if len > limits.max_chunk_len {
                return Err(HeaderError::ChunkTooLong { len, limit: limits.max_chunk_len });
            }
        }
        Ok(())
    }

    /// All chunks together within [`HeaderLimits::max_message_len`] (each
    /// chunk, and the segment count, already checked: the sum cannot
    /// overflow).
    fn check_message_len(&self, limits: &HeaderLimits) -> Result<(), HeaderError> {
        let len = self.total_len();
        if len > limits.max_message_len {
            return Err(HeaderError::MessageTooLong { len, limit: limits.max_message_len });
        }
        Ok(())
    }

    /// RFC 8166 section 3.4.5: positions are multiples of four, the segments
    /// of one chunk share a position and sit together, and chunks are in
    /// ascending order without overlapping (the Position-zero chunk, which
    /// holds the whole reduced message, excepted).
    fn check_read_list(&self, limits: &HeaderLimits) -> Result<(), HeaderError> {
        if self.reads.is_empty() {
            return Ok(());
        }
        let mut previous: Option<(u32, u64)> = None;
        for chunk in self.read_chunks() {
            let position = chunk.position();
            if position % 4 != 0 {
                return Err(HeaderError::MisalignedPosition(position));
            }
            let len = chunk.len();
            if len > limits.max_chunk_len {
                return Err(HeaderError::ChunkTooLong { len, limit: limits.max_chunk_len });
            }
            if let Some((prev, prev_len)) = previous {
                let prev_end = if prev == 0 { 0 } else { u64::from(prev) + prev_len };
                if position <= prev || u64::from(position) < prev_end {
                    return Err(HeaderError::OverlappingReadChunks {
                        position,
                        previous: prev,
                        previous_len: prev_len,
                    });
                }
            }
            previous = Some((position, len));
        }
        Ok(())
    }
}

const RDMA_MSG_U32: u32 = RDMA_MSG as u32;
const RDMA_NOMSG_U32: u32 = RDMA_NOMSG as u32;
const RDMA_MSGP_U32: u32 = RDMA_MSGP as u32;
const RDMA_DONE_U32: u32 = RDMA_DONE as u32;
const RDMA_ERROR_U32: u32 = RDMA_ERROR as u32;

/// The length of a Write or Reply chunk: the sum of its segments (RFC 8166
/// section 3.4.4), without overflow.
pub fn chunk_len(chunk: &XdrWriteChunk<'_>) -> u64 {
    chunk.target.iter().map(|s| u64::from(s.length)).sum()
}

/// One Read chunk: the consecutive read segments that share a position.
///
/// ```
/// use rpcrdma_v1::header::{Header, HeaderLimits};
/// // RDMA_MSG, xid 7, whose Read list holds two segments at position 8 (one
/// // chunk of 100 + 50 bytes) and one at position 12; then the reduced call.
/// let words = [7u32, 1, 32, 0, 1, 8, 0x11, 100, 0, 0, 1, 8, 0x12, 50, 0, 0, 1, 160, 0x13, 4, 0, 0, 0, 0, 0, 7, 0];
/// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
/// let h = Header::parse(&bytes, &HeaderLimits::default()).unwrap();
/// let chunks: Vec<_> = h.read_chunks().collect();
/// assert_eq!(chunks.len(), 2);
/// let first = chunks[0];
/// assert_eq!((first.position(), first.len(), first.segment_count()), (8, 150, 2));
/// let handles: Vec<u32> = first.segments().map(|s| s.handle).collect();
/// assert_eq!(handles, [0x11, 0x12]);
/// assert_eq!((chunks[1].position(), chunks[1].len()), (160, 4));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadChunk<'a> {
    list: List<'a, XdrReadChunk>,
    first: usize,
    count: usize,
    position: u32,
    len: u64,
}

impl<'a> ReadChunk<'a> {
    /// Where the chunk's data goes in the unreduced RPC message.
    pub fn position(&self) -> u32 {
        self.position
    }

    /// The chunk's length: the sum of its segments' lengths.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the chunk has no data.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of segments.
    pub fn segment_count(&self) -> usize {
        self.count
    }

    /// The chunk's segments, in the order to concatenate them.
    pub fn segments(&self) -> impl Iterator<Item = XdrRdmaSegment> + 'a {
        self.list.iter().skip(self.first).take(self.count).map(|c| c.target)
    }
}

/// Iterator over a header's Read chunks. Allocates nothing.
pub struct ReadChunks<'a> {
    list: List<'a, XdrReadChunk>,
    iter: SeqIter<'a, XdrReadChunk>,
    pending: Option<XdrReadChunk>,
    index: usize,
}

impl<'a> Iterator for ReadChunks<'a> {
    type Item = ReadChunk<'a>;

    fn next(&mut self) -> Option<ReadChunk<'a>> {
        let first = self.pending.take().or_else(|| self.iter.next())?;
        let mut chunk = ReadChunk {
            list: self.list,
            first: self.index,
            count: 1,
            position: first.position,
            len: u64::from(first.target.length),
        };
        self.index += 1;
        for seg in self.iter.by_ref() {
            self.index += 1;
            if seg.position != chunk.position {
                self.pending = Some(seg);
                self.index -= 1;
                break;
            }
            chunk.count += 1;
            chunk.len += u64::from(seg.target.length);
        }
        Some(chunk)
    }
}
