//! A received -07 transport header, validated once (draft-ietf-nfsv4-rpcrdma-version-two-07
//! sections 6.1 to 6.4, 4.5 and 7): [`Header::parse`] decodes the prefix and the body its
//! header type names, checks every rule a receiver depends on before it uses a field, and
//! then every accessor is infallible. Each failure is one [`HeaderError`] variant, and
//! [`HeaderError::answer`] says what the text has a receiver do about it: drop the message,
//! or answer RDMA2_ERROR with a given code.
//!
//! The chunk lists are Version One's structures renamed word for word (`rpcrdma2_read_list`,
//! `rpcrdma2_write_list`, `rpcrdma2_write_chunk`; section 6.2), so they are decoded into
//! Version One's types and checked by Version One's one home for the chunk rules
//! ([`ChunkLists`]); reassembly and reply marshaling take them as they are.

use rpcrdma_v1::header::{
    ChunkLists, Detached, Fixed, HeaderError as ChunkError, HeaderLimits, MessageKind, ReadChunks,
};
use rpcrdma_v1::xdr::{RpcRdmaHeader, XdrReadChunk, XdrWriteChunk};
use xdr_spec_rt::{List, Reader, Xdr};

use super::xdr::*;

/// The length of the transport header prefix, `rpcrdma2_hdr_prefix` (section 6.4: the four
/// words of `rpcrdma_common`; section 7's "20 octets" is a prose slip, noted in the errata
/// file). A message shorter than this is silently discarded (section 7).
pub const PREFIX_LEN: usize = 16;

/// The `rdma_vers` of every -07 message.
pub const VERSION: u32 = 2;

/// The header types of section 6.1, Table 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderType {
    /// RDMA2_ERROR (4), section 6.3.1.
    Error,
    /// RDMA2_GRANT (5), section 6.3.2.
    Grant,
    /// RDMA2_CONNPROP_MIDDLE (6), section 6.3.3.
    ConnPropMiddle,
    /// RDMA2_CONNPROP_FINAL (7), section 6.3.4.
    ConnPropFinal,
    /// RDMA2_CALL_EXTERNAL (8), section 6.3.5.
    CallExternal,
    /// RDMA2_CALL_MIDDLE (9), section 6.3.6.
    CallMiddle,
    /// RDMA2_CALL_INLINE (10), section 6.3.7.
    CallInline,
    /// RDMA2_REPLY_EXTERNAL (11), section 6.3.8.
    ReplyExternal,
    /// RDMA2_REPLY_MIDDLE (12), section 6.3.9.
    ReplyMiddle,
    /// RDMA2_REPLY_INLINE (13), section 6.3.10.
    ReplyInline,
}

impl HeaderType {
    /// The type an `rdma_htype` names; `None` for one this draft does not define.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::header::HeaderType;
    /// assert_eq!(HeaderType::from_wire(10), Some(HeaderType::CallInline));
    /// assert_eq!(HeaderType::from_wire(3), None); // RDMA_OPTIONAL of -00 is not a -07 type
    /// assert_eq!(HeaderType::CallInline.wire(), 10);
    /// ```
    pub fn from_wire(htype: u32) -> Option<HeaderType> {
        Some(match htype {
            RDMA2_ERROR => HeaderType::Error,
            RDMA2_GRANT => HeaderType::Grant,
            RDMA2_CONNPROP_MIDDLE => HeaderType::ConnPropMiddle,
            RDMA2_CONNPROP_FINAL => HeaderType::ConnPropFinal,
            RDMA2_CALL_EXTERNAL => HeaderType::CallExternal,
            RDMA2_CALL_MIDDLE => HeaderType::CallMiddle,
            RDMA2_CALL_INLINE => HeaderType::CallInline,
            RDMA2_REPLY_EXTERNAL => HeaderType::ReplyExternal,
            RDMA2_REPLY_MIDDLE => HeaderType::ReplyMiddle,
            RDMA2_REPLY_INLINE => HeaderType::ReplyInline,
            _ => return None,
        })
    }

    /// Its `rdma_htype`.
    pub fn wire(self) -> u32 {
        match self {
            HeaderType::Error => RDMA2_ERROR,
            HeaderType::Grant => RDMA2_GRANT,
            HeaderType::ConnPropMiddle => RDMA2_CONNPROP_MIDDLE,
            HeaderType::ConnPropFinal => RDMA2_CONNPROP_FINAL,
            HeaderType::CallExternal => RDMA2_CALL_EXTERNAL,
            HeaderType::CallMiddle => RDMA2_CALL_MIDDLE,
            HeaderType::CallInline => RDMA2_CALL_INLINE,
            HeaderType::ReplyExternal => RDMA2_REPLY_EXTERNAL,
            HeaderType::ReplyMiddle => RDMA2_REPLY_MIDDLE,
            HeaderType::ReplyInline => RDMA2_REPLY_INLINE,
        }
    }

    /// Whether an RPC message (or part of one) follows the header in the Send: Table 2's
    /// "Msg" column.
    pub fn carries_payload(self) -> bool {
        matches!(
            self,
            HeaderType::CallMiddle | HeaderType::CallInline | HeaderType::ReplyMiddle | HeaderType::ReplyInline
        )
    }

    /// Whether it conveys an RPC Call (all or part of one).
    pub fn is_call(self) -> bool {
        matches!(self, HeaderType::CallExternal | HeaderType::CallMiddle | HeaderType::CallInline)
    }

    /// Whether it conveys an RPC Reply (all or part of one).
    pub fn is_reply(self) -> bool {
        matches!(self, HeaderType::ReplyExternal | HeaderType::ReplyMiddle | HeaderType::ReplyInline)
    }
}

/// Why a received message is not a valid -07 header, one variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Shorter than the prefix: the XID cannot be trusted, so nothing answers it (section 7).
    #[error("{len} bytes: shorter than the {PREFIX_LEN}-byte transport header prefix (section 7)")]
    TooShort {
        /// The message's length.
        len: usize,
    },
    /// `rdma_vers` is not 2 (section 7.1.1).
    #[error("rdma_vers {vers} is not version 2 (section 7.1.1)")]
    Version {
        /// The version received.
        vers: u32,
    },
    /// An `rdma_htype` this draft does not define (section 6.1).
    #[error("rdma_htype {0} is not a header type of this draft (section 6.1)")]
    UnknownType(u32),
    /// The header type's body does not decode (section 7.2).
    #[error("the {htype:?} body does not decode: {source}")]
    Body {
        /// The header type.
        htype: HeaderType,
        /// Why.
        source: xdr_spec_rt::Error,
    },
    /// A chunk rule is broken (section 4.5; the rules are Version One's, RFC 8166 section
    /// 3.4).
    #[error("the {htype:?} chunks: {source}")]
    Chunks {
        /// The header type.
        htype: HeaderType,
        /// The rule broken.
        source: ChunkError,
    },
    /// An RDMA2_CALL_INLINE's Read list holds a Position-zero chunk (section 6.3.7: "A
    /// Requester MUST NOT insert Position-zero Read chunks in this list").
    #[error("a Position-zero Read chunk in RDMA2_CALL_INLINE's Read list (section 6.3.7)")]
    PositionZeroInCallInline,
    /// An RDMA2_CALL_EXTERNAL's Read list (its data item chunks) holds a Position-zero chunk:
    /// position zero is its Call chunk's (section 6.3.5), and a data item there would be read
    /// into the call's own bytes.
    #[error("a Position-zero data item chunk beside RDMA2_CALL_EXTERNAL's Call chunk (section 6.3.5)")]
    PositionZeroInCallExternal,
    /// An RDMA2_CALL_EXTERNAL whose Call chunk is empty (section 6.3.5: "one or more Read
    /// segments").
    #[error("RDMA2_CALL_EXTERNAL without a Call chunk (section 6.3.5)")]
    NoCallChunk,
    /// A Call chunk segment whose position is not zero (section 4.5.1.2: the Call chunk is a
    /// body chunk, and a body chunk's position is zero).
    #[error("a Call chunk segment at position {0}, not zero (section 4.5.1.2)")]
    CallChunkPosition(u32),
    /// An RDMA2_REPLY_EXTERNAL without its Reply chunk (section 6.3.8: "MUST contain exactly
    /// one Reply chunk").
    #[error("RDMA2_REPLY_EXTERNAL without a Reply chunk (section 6.3.8)")]
    NoReplyChunk,
    /// Bytes after a header whose type carries no payload (Table 2).
    #[error("{len} bytes after a {htype:?} header, which carries no payload (section 6.1, Table 2)")]
    TrailingBytes {
        /// The header type.
        htype: HeaderType,
        /// How many bytes follow its header.
        len: usize,
    },
}

/// What section 7 has a receiver do with a message that failed [`Header::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Drop it silently: it is too short to trust its XID (section 7), or it is itself an
    /// RDMA2_ERROR (never answered with another).
    Drop,
    /// Drop it and answer RDMA2_ERROR with this body (`rdma_xid` and `rdma_vers` the
    /// message's own, section 7).
    Error(Rpcrdma2HdrError),
}

impl HeaderError {
    /// The answer section 7 prescribes. `supported` is the range of versions this side
    /// speaks, for ERR_VERS (section 7.1.1); `is_error` whether the message's `rdma_htype`
    /// is RDMA2_ERROR.
    ///
    /// | failure | answer |
    /// |---|---|
    /// | shorter than the prefix | drop (section 7) |
    /// | another version | RDMA2_ERR_VERS with the range (7.1.1) |
    /// | unknown header type | RDMA2_ERR_INVAL_HTYPE (6.1, 7.1.3) |
    /// | a CONNPROP whose property set does not parse | RDMA2_ERR_BAD_PROPVAL (5.1) |
    /// | a body or chunk list that does not parse, chunks out of order, a rule of 6.3.x | RDMA2_ERR_BAD_XDR (4.5.1.1, 7.2.1) |
    /// | more segments than this side takes | RDMA2_ERR_SEGMENTS with the limit (7.3.3) |
    /// | more Read or Write chunks than this side takes | RDMA2_ERR_READ_CHUNKS or RDMA2_ERR_WRITE_CHUNKS with the limit (7.3.1, 7.3.2) |
    /// | a chunk or message longer than this side takes | RDMA2_ERR_SYSTEM (7.4.1: no code of 7.3 fits a length limit) |
    ///
    /// ```
    /// use rpcrdma_v2::draft07::header::{Answer, Header, HeaderError};
    /// use rpcrdma_v2::draft07::xdr::{Rpcrdma2ErrVers, Rpcrdma2HdrError};
    /// use rpcrdma_v2::HeaderLimits;
    /// let words = [7u32, 2, 32, 99];
    /// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    /// let e = Header::parse(&bytes, &HeaderLimits::default()).unwrap_err();
    /// assert_eq!(e, HeaderError::UnknownType(99));
    /// let range = Rpcrdma2ErrVers { rdma_vers_low: 1, rdma_vers_high: 2 };
    /// assert_eq!(e.answer(range, false), Answer::Error(Rpcrdma2HdrError::Default { discriminant: 4 }));
    /// ```
    pub fn answer(&self, supported: Rpcrdma2ErrVers, is_error: bool) -> Answer {
        let code = |discriminant| Answer::Error(Rpcrdma2HdrError::Default { discriminant });
        if is_error {
            return Answer::Drop;
        }
        match self {
            HeaderError::TooShort { .. } => Answer::Drop,
            HeaderError::Version { .. } => Answer::Error(Rpcrdma2HdrError::Rdma2ErrVers(supported)),
            HeaderError::UnknownType(_) => code(RDMA2_ERR_INVAL_HTYPE),
            HeaderError::Chunks { source: ChunkError::TooManySegments { limit, .. }, .. } => {
                Answer::Error(Rpcrdma2HdrError::Rdma2ErrSegments(*limit))
            }
            // Sections 7.3.1 and 7.3.2: the most chunks this side reads or writes.
            HeaderError::Chunks { source: ChunkError::TooManyReadChunks { limit, .. }, .. } => {
                Answer::Error(Rpcrdma2HdrError::RdmaMaxChunks { discriminant: RDMA2_ERR_READ_CHUNKS, value: *limit })
            }
            HeaderError::Chunks { source: ChunkError::TooManyWriteChunks { limit, .. }, .. } => {
                Answer::Error(Rpcrdma2HdrError::RdmaMaxChunks { discriminant: RDMA2_ERR_WRITE_CHUNKS, value: *limit })
            }
            HeaderError::Chunks {
                source: ChunkError::ChunkTooLong { .. } | ChunkError::MessageTooLong { .. }, ..
            } => code(RDMA2_ERR_SYSTEM),
            // Section 5.1: a property set that does not decode (an rdma_data "greater than the
            // length of the transferred message", say) is answered BAD_PROPVAL.
            HeaderError::Body { htype: HeaderType::ConnPropMiddle | HeaderType::ConnPropFinal, .. } => {
                code(RDMA2_ERR_BAD_PROPVAL)
            }
            HeaderError::Body { .. }
            | HeaderError::Chunks { .. }
            | HeaderError::PositionZeroInCallInline
            | HeaderError::PositionZeroInCallExternal
            | HeaderError::NoCallChunk
            | HeaderError::CallChunkPosition(_)
            | HeaderError::NoReplyChunk
            | HeaderError::TrailingBytes { .. } => code(RDMA2_ERR_BAD_XDR),
        }
    }
}

/// A validated -07 transport header (see the [module documentation](self)).
///
/// ```
/// use rpcrdma_v2::draft07::header::{Header, HeaderType};
/// use rpcrdma_v2::HeaderLimits;
/// // RDMA2_CALL_INLINE, xid 7, 32 credits, rdma_inv_handle 0x55, no chunks; then the RPC
/// // call, whose first word is its XID.
/// let words = [7u32, 2, 32, 10, 0x55, 0, 0, 0, 7, 0, 2];
/// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
/// let h = Header::parse(&bytes, &HeaderLimits::default()).unwrap();
/// assert_eq!((h.xid(), h.credit(), h.header_type()), (7, 32, HeaderType::CallInline));
/// assert_eq!(h.inv_handle(), Some(0x55));
/// assert_eq!(h.header_len(), 32);
/// assert_eq!(h.payload(), &bytes[32..]); // the RPC message
/// assert_eq!(h.read_chunks().count(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    xid: u32,
    credit: u32,
    htype: HeaderType,
    inv_handle: Option<u32>,
    remaining: Option<u32>,
    call: List<'a, XdrReadChunk>,
    chunks: ChunkLists<'a>,
    error: Option<Rpcrdma2HdrError>,
    props: Option<Rpcrdma2Propset<'a>>,
    header_len: usize,
    payload: &'a [u8],
}

impl<'a> Header<'a> {
    /// Decodes and validates the header at the start of `bytes` (a whole received message);
    /// `limits` bound the chunk lists as they bound Version One's.
    pub fn parse(bytes: &'a [u8], limits: &HeaderLimits) -> Result<Header<'a>, HeaderError> {
        // The four words every version keeps at the same offsets (section 6.2.1), read where
        // Version One reads them.
        let Some(Fixed { xid, vers, credit: Some(credit), proc: Some(htype) }) = Fixed::read(bytes) else {
            return Err(HeaderError::TooShort { len: bytes.len() });
        };
        if vers != VERSION {
            return Err(HeaderError::Version { vers });
        }
        rpcrdma_v1::header::validations::note();
        let htype = HeaderType::from_wire(htype).ok_or(HeaderError::UnknownType(htype))?;
        let mut h = Header {
            xid,
            credit,
            htype,
            inv_handle: None,
            remaining: None,
            call: List::from_slice(&[]),
            chunks: ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&[]), reply: None },
            error: None,
            props: None,
            header_len: PREFIX_LEN,
            payload: &[],
        };
        // One reader over the whole message, so error offsets count from its first byte.
        let mut r = ChunkLists::reader(bytes, limits);
        let body = |source| HeaderError::Body { htype, source };
        let chunks = |source| HeaderError::Chunks { htype, source };
        r.take(PREFIX_LEN).map_err(body)?;
        match htype {
            HeaderType::Error => h.error = Some(Rpcrdma2HdrError::decode_from(&mut r).map_err(body)?),
            HeaderType::Grant => {}
            HeaderType::ConnPropMiddle | HeaderType::ConnPropFinal => {
                // Properties are not chunks: their counts are bounded by the bytes left, not
                // the segment limit.
                let mut p = Reader::new(bytes);
                p.take(PREFIX_LEN).map_err(body)?;
                h.props = Some(Rpcrdma2Propset::decode_from(&mut p).map_err(body)?);
                r = p;
            }
            HeaderType::CallExternal => {
                h.inv_handle = Some(r.u32().map_err(body)?);
                h.call = r.list("rdma_call").map_err(|e| chunks(ChunkLists::decode_error(e, limits)))?;
                h.chunks = decode_call_lists(&mut r, limits).map_err(chunks)?;
            }
            HeaderType::CallInline => {
                h.inv_handle = Some(r.u32().map_err(body)?);
                h.chunks = decode_call_lists(&mut r, limits).map_err(chunks)?;
            }
            HeaderType::CallMiddle | HeaderType::ReplyMiddle => h.remaining = Some(r.u32().map_err(body)?),
            HeaderType::ReplyExternal => {
                h.chunks.writes = r.list("rdma_writes").map_err(|e| chunks(ChunkLists::decode_error(e, limits)))?;
                h.chunks.reply = Option::<XdrWriteChunk>::decode_from(&mut r)
                    .map_err(|e| chunks(ChunkLists::decode_error(e, limits)))?;
            }
            HeaderType::ReplyInline => {
                h.chunks.writes = r.list("rdma_writes").map_err(|e| chunks(ChunkLists::decode_error(e, limits)))?;
            }
        }
        h.header_len = r.position();
        h.payload = &bytes[h.header_len..];
        h.check(limits)?;
        Ok(h)
    }

    /// The rules beyond decoding: the chunk rules (Version One's), then each header type's
    /// own.
    fn check(&self, limits: &HeaderLimits) -> Result<(), HeaderError> {
        let htype = self.htype;
        let chunks = |source| HeaderError::Chunks { htype, source };
        // The Call chunk counts against the same limits as the other lists: checked as a
        // Read list of its own, and with the rest for the segment and length totals.
        if !self.call.is_empty() {
            let call = ChunkLists { reads: self.call, writes: List::from_slice(&[]), reply: None };
            // (The Call chunk carries the message, not a DDP-eligible argument: it is not one
            // of the Read chunks `max_read_chunks` counts, section 7.3.1.)
            call.check(&limits.max_read_chunks(u32::MAX)).map_err(chunks)?;
            if let Some(c) = self.call.iter().find(|c| c.position != 0) {
                return Err(HeaderError::CallChunkPosition(c.position));
            }
            let total = call.segment_count() + self.chunks.segment_count();
            if total > u64::from(limits.max_segments) {
                let count = u32::try_from(total).unwrap_or(u32::MAX);
                return Err(chunks(ChunkError::TooManySegments { count, limit: limits.max_segments }));
            }
            let len = call.total_len().saturating_add(self.chunks.total_len());
            if len > limits.max_message_len {
                return Err(chunks(ChunkError::MessageTooLong { len, limit: limits.max_message_len }));
            }
        }
        self.chunks.check(limits).map_err(chunks)?;
        match htype {
            HeaderType::CallExternal if self.call.is_empty() => Err(HeaderError::NoCallChunk),
            HeaderType::CallInline if self.read_chunks().any(|c| c.position() == 0) => {
                Err(HeaderError::PositionZeroInCallInline)
            }
            HeaderType::CallExternal if self.read_chunks().any(|c| c.position() == 0) => {
                Err(HeaderError::PositionZeroInCallExternal)
            }
            HeaderType::ReplyExternal if self.chunks.reply.is_none() => Err(HeaderError::NoReplyChunk),
            // Table 2's "Msg" column; a message part must be at least its first word (the
            // `rdma_rpc_first_word` each such body ends with).
            t if t.carries_payload() && self.payload.len() < 4 => Err(HeaderError::Body {
                htype,
                source: xdr_spec_rt::Error::Truncated { at: self.header_len, need: 4 - self.payload.len() },
            }),
            t if !t.carries_payload() && !self.payload.is_empty() => {
                Err(HeaderError::TrailingBytes { htype, len: self.payload.len() })
            }
            _ => Ok(()),
        }
    }

    /// `rdma_xid` (ignored in an RDMA2_GRANT, section 6.3.2).
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// `rdma_credit`: a running total (section 4.2.1).
    pub fn credit(&self) -> u32 {
        self.credit
    }

    /// `rdma_htype`.
    pub fn header_type(&self) -> HeaderType {
        self.htype
    }

    /// `rdma_inv_handle` of a call's first or only header (CALL_EXTERNAL, CALL_INLINE;
    /// section 6.5).
    pub fn inv_handle(&self) -> Option<u32> {
        self.inv_handle
    }

    /// `rdma_remaining` of a CALL_MIDDLE or REPLY_MIDDLE: the message's bytes still to
    /// come after this one's (section 4.1).
    pub fn remaining(&self) -> Option<u32> {
        self.remaining
    }

    /// The body of an RDMA2_ERROR (its code, and the arm's values).
    pub fn error(&self) -> Option<Rpcrdma2HdrError> {
        self.error
    }

    /// The properties of a CONNPROP_MIDDLE or CONNPROP_FINAL (section 5).
    pub fn properties(&self) -> Option<Rpcrdma2Propset<'a>> {
        self.props
    }

    /// The Call chunk of a CALL_EXTERNAL: the read segments holding the whole RPC call
    /// (section 4.5.1.2).
    pub fn call_chunk(&self) -> List<'a, XdrReadChunk> {
        self.call
    }

    /// The data-item chunks: a call's Read list, provisional Write list and provisional
    /// Reply chunk, or a reply's Write list and Reply chunk, as Version One's types.
    pub fn chunk_lists(&self) -> ChunkLists<'a> {
        self.chunks
    }

    /// The Read list (data-item chunks), grouped into chunks by position.
    pub fn read_chunks(&self) -> ReadChunks<'a> {
        self.chunks.read_chunks()
    }

    /// The length of the transport header: the payload starts here.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The bytes after the header: the RPC message, or the part of it this Send carries,
    /// for the types that carry one (Table 2); empty for the others.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// This message written in Version One's shape, for code that reads every message as
    /// Version One's chunk lists (section 8.4 takes them from Version One word for word):
    /// `kind` RDMA_MSG followed by `message` (a whole call or reply, its continued parts
    /// assembled), or RDMA_NOMSG (an RDMA2_CALL_EXTERNAL, whose Call chunk leads the Read
    /// list at position zero; an RDMA2_REPLY_EXTERNAL, whose reply is in the Reply chunk),
    /// with `rdma_vers` 2 and this header's XID and credit, and its view (`Detached`: attach it
    /// to the buffer to read it as a Version One header, with no second parse). Allocates the
    /// buffer it returns.
    ///
    /// ```
    /// use rpcrdma_v1::header::MessageKind;
    /// use rpcrdma_v2::draft07::header::Header;
    /// use rpcrdma_v2::draft07::marshal::{call_inline, NO_CHUNKS};
    /// use rpcrdma_v2::HeaderLimits;
    /// let mut send = [0u8; 64];
    /// let n = call_inline(&mut send, 7, 32, 0, &NO_CHUNKS, &[0, 0, 0, 7, 0, 0, 0, 0]).unwrap();
    /// let h = Header::parse(&send[..n], &HeaderLimits::default()).unwrap();
    /// let (v1, view) = h.version_one_shaped(MessageKind::Msg, h.payload());
    /// assert_eq!(v1, [7u32, 2, 32, 0, 0, 0, 0, 7, 0].iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>());
    /// assert_eq!(view.attach(&v1).map(|v| (v.xid(), v.header_len())), Some((7, 28)));
    /// ```
    pub fn version_one_shaped(&self, kind: MessageKind, message: &[u8]) -> (Vec<u8>, Detached) {
        let lists = self.chunks;
        let reads: Vec<_> = self.call.iter().chain(lists.reads.iter()).collect();
        // The chunk lists were validated as this header was: the rewrite's view is laid over
        // it as encoded, not parsed again (issue 25: a message is judged once).
        Detached::encode(self.xid, 2, self.credit, kind, &reads, lists.writes, lists.reply, message)
    }
}

/// A call's three lists after its fixed words: Version One's `rpcrdma_header` shape
/// (`rdma_reads`, `rdma_provisional_writes`, `rdma_provisional_reply`).
fn decode_call_lists<'a>(r: &mut Reader<'a>, limits: &HeaderLimits) -> Result<ChunkLists<'a>, ChunkError> {
    let l = RpcRdmaHeader::decode_from(r).map_err(|e| ChunkLists::decode_error(e, limits))?;
    Ok(ChunkLists { reads: l.rdma_reads, writes: l.rdma_writes, reply: l.rdma_reply })
}
