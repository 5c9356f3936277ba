//! Marshaling an RPC Call message: the Requester's side of RFC 8166
//! sections 3.4 and 3.5.
//!
//! [`marshal_call`] takes an RPC Call message (bytes), what the Upper-Layer
//! Binding says about it ([`CallRequest`], built by hand or with
//! [`CallDescription::describe`]) and the connection's
//! [`InlineThresholds`], and produces a [`MarshaledCall`]: the encoded
//! transport header, the inline payload as byte ranges of the message (to
//! gather after the header into one RDMA Send without copying the message),
//! and the chunks it registered.
//!
//! It takes one protocol step per function, as Linux's xprtrdma does:
//!
//! 1. [`encode_write_list`]: a Write chunk for every DDP-eligible result
//!    (3.4.6, 3.4.6.2);
//! 2. [`encode_reply_chunk`]: a Reply chunk when the reply may exceed the
//!    Requester's own inline threshold (3.5.3; draft 5.3.3);
//! 3. the form of the call (3.5), the first that fits the peer's inline
//!    threshold with the whole Send, transport header included (draft
//!    5.2.4, the gather rule):
//!    * [`CallForm::Short`]: `RDMA_MSG`, the whole message inline (3.5.1);
//!    * [`CallForm::Chunked`]: `RDMA_MSG`, DDP-eligible arguments reduced
//!      into Read chunks by [`encode_read_list`] (3.5.2, 3.4.5, 3.4.5.2);
//!    * [`CallForm::Long`]: `RDMA_NOMSG`, the whole message in a
//!      Position-Zero Read chunk by [`encode_position_zero_read_chunk`]
//!      (3.5.3);
//! 4. [`encode_call_header`]: the transport header (4.1.2 in the RFC,
//!    5.1.2 in the draft).
//!
//! # Memory registration
//!
//! Registering memory is not this crate's business (draft section 5.4.3:
//! "The choice of which memory registration strategies to employ is left to
//! requester and responder implementers"). The caller implements
//! [`Registrar`]: given a [`ChunkPurpose`] (a byte range of the call message
//! to expose for RDMA Read, or a receive buffer of some length for RDMA
//! Write), it registers the memory — with FRWR, a pre-registered region, or
//! anything else — and returns the segments (handle, length, offset) that
//! cover it, in order. A registration may yield several segments (for
//! example one per memory region when an item spans pages that one MR
//! cannot map); the header is sized from the segments actually returned.
//! When a registration turns out not to be needed (the reduced call did not
//! fit and the call went Long, or marshaling failed), [`Registrar::release`]
//! hands it back.
//!
//! ```
//! use std::convert::Infallible;
//! use rpcrdma_v1::marshal_call::*;
//! use rpcrdma_v1::ulb::{DdpItem, OpaqueAtUlb};
//! use rpcrdma_v1::xdr::XdrRdmaSegment;
//!
//! /// Everything lives in one pre-registered region, handle 7, at address 0x1000.
//! struct OneRegion;
//! impl Registrar for OneRegion {
//!     type Error = Infallible;
//!     fn register(&mut self, p: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), Infallible> {
//!         let offset = 0x1000 + p.call_range().map_or(0x8000, |r| r.start) as u64;
//!         out.push(XdrRdmaSegment { handle: 7, length: p.len() as u32, offset });
//!         Ok(())
//!     }
//! }
//!
//! // An NFS-WRITE-like call: its 40-byte ONC RPC header (XID 1, CALL, RPC version 2,
//! // program 100003 version 3 procedure 7, AUTH_NONE credential and verifier), a length
//! // word, 4000 bytes of data.
//! let words = [1u32, 0, 2, 100003, 3, 7, 0, 0, 0, 0, 4000];
//! let mut call: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
//! call.resize(44 + 4000, 0);
//! let ulb = OpaqueAtUlb { call_opaque: Some(40), reply_opaque: None, max_result: 0, max_reply: 128 };
//! let mut desc = CallDescription::default();
//! desc.describe(&ulb, &call);
//! assert_eq!(desc.args, [DdpItem::new(44, 4000)]);
//!
//! let req = desc.request(32, InlineThresholds::default()); // 1024-byte thresholds
//! let mut header = [0u8; 1024];
//! let mut out = MarshaledCall::default();
//! marshal_call(&call, &req, &mut OneRegion, &mut header, &mut out).unwrap();
//! assert_eq!(out.form(), CallForm::Chunked);
//! assert_eq!(out.inline(), [0..44]);                      // the length word stays
//! assert_eq!(out.reads()[0].position, 44);                // where the data was
//! assert_eq!(out.reads()[0].target.length, 4000);         // no padding (3.4.5.2)
//! assert_eq!(out.header_len(), 52);                      // 28 + one read segment
//! assert!(out.send_len() <= 1024);                        // the gather rule
//! ```

use core::fmt;
use core::ops::Range;

use crate::rt::{List, Seq, Xdr};
use crate::ulb::{check_items, reduce_payload, reduced_len, roundup, DdpItem, ItemError, UpperLayerBinding};
use crate::xdr::{RdmaBody, RdmaMsg, RpcRdmaHeader, RpcRdmaHeaderNomsg, XdrRdmaSegment, XdrReadChunk, XdrWriteChunk};
use crate::Version;

/// Transport header bytes before the chunk lists: `rdma_xid`, `rdma_vers`,
/// `rdma_credit` and the `rdma_proc` discriminant (RFC 8166 section 4.2).
pub const FIXED_HEADER_LEN: usize = 16;
/// Bytes one entry of the Read list takes: the optional-data word, the
/// Position and a plain segment (RFC 8166 section 4.1.2).
pub const READ_SEGMENT_LEN: usize = 24;
/// Bytes one plain segment takes (handle, length, offset).
pub const SEGMENT_LEN: usize = 16;

/// The two inline thresholds of a connection (RFC 8166 section 3.3.2): the
/// largest RDMA Send, transport header included, in each direction.
///
/// ```
/// use rpcrdma_v1::marshal_call::InlineThresholds;
/// // Without a mechanism to learn the peer's, both are 1024 (3.3.3).
/// assert_eq!(InlineThresholds::default(), InlineThresholds { call: 1024, reply: 1024 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineThresholds {
    /// The call inline threshold: the largest Send from Requester to
    /// Responder, i.e. what the Responder (the peer, for a Requester) can
    /// receive.
    pub call: usize,
    /// The reply inline threshold: the largest Send from Responder to
    /// Requester, i.e. what the Requester itself can receive.
    pub reply: usize,
}

impl InlineThresholds {
    /// The threshold every receiver supports and every sender must assume
    /// when it knows no better (RFC 8166 section 3.3.3): 1024 bytes, kept in
    /// one place, [`cm_private_data::MIN_INLINE`] (the smallest size RFC 8797's
    /// private data can advertise is this same default).
    pub const MINIMUM: usize = cm_private_data::MIN_INLINE as usize;
}

impl Default for InlineThresholds {
    fn default() -> Self {
        InlineThresholds { call: Self::MINIMUM, reply: Self::MINIMUM }
    }
}

/// How a call travels (RFC 8166 section 3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CallForm {
    /// `RDMA_MSG` with the whole Payload stream inline (3.5.1).
    #[default]
    Short,
    /// `RDMA_MSG` with DDP-eligible arguments reduced into Read chunks and
    /// the reduced Payload stream inline (3.5.2).
    Chunked,
    /// `RDMA_NOMSG` with the whole Payload stream in a Position-Zero Read
    /// chunk and nothing inline (3.5.3).
    Long,
}

/// What a [`Registrar`] is asked to register.
///
/// ```
/// use rpcrdma_v1::marshal_call::ChunkPurpose;
/// let p = ChunkPurpose::Read { offset: 44, len: 4000 };
/// assert_eq!((p.len(), p.call_range()), (4000, Some(44..4044)));
/// assert_eq!(ChunkPurpose::Reply { len: 2048 }.call_range(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChunkPurpose {
    /// Bytes `offset..offset + len` of the call message, a DDP-eligible
    /// argument's data without its roundup padding, exposed for the
    /// Responder to pull with RDMA Read: a Read chunk (3.4.5, 3.4.5.2).
    Read {
        /// Offset of the data in the call message.
        offset: usize,
        /// Its length.
        len: usize,
    },
    /// The whole call message (`0..len`), exposed for RDMA Read: the
    /// Position-Zero Read chunk of a Long Call (3.5.3).
    PositionZero {
        /// The message's length.
        len: usize,
    },
    /// A receive buffer of `len` bytes for the `index`th DDP-eligible result,
    /// which the Responder fills with RDMA Write: a Write chunk (3.4.6; no
    /// room for roundup padding, 3.4.6.2).
    Write {
        /// The result's (and the chunk's) index in the Write list.
        index: usize,
        /// The largest result.
        len: usize,
    },
    /// A receive buffer of `len` bytes for a Long Reply, which the Responder
    /// fills with RDMA Write: the Reply chunk (3.5.3).
    Reply {
        /// The largest reduced reply.
        len: usize,
    },
}

impl ChunkPurpose {
    /// Bytes to register.
    pub fn len(&self) -> usize {
        match *self {
            ChunkPurpose::Read { len, .. }
            | ChunkPurpose::PositionZero { len }
            | ChunkPurpose::Write { len, .. }
            | ChunkPurpose::Reply { len } => len,
        }
    }

    /// Whether there is nothing to register.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For the source of an RDMA Read, the bytes of the call message to
    /// expose; `None` for a receive buffer.
    pub fn call_range(&self) -> Option<Range<usize>> {
        match *self {
            ChunkPurpose::Read { offset, len } => Some(offset..offset + len),
            ChunkPurpose::PositionZero { len } => Some(0..len),
            ChunkPurpose::Write { .. } | ChunkPurpose::Reply { .. } => None,
        }
    }
}

impl fmt::Display for ChunkPurpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ChunkPurpose::Read { offset, len } => write!(f, "Read chunk for call bytes {offset}..{}", offset + len),
            ChunkPurpose::PositionZero { len } => write!(f, "Position-Zero Read chunk of {len} bytes"),
            ChunkPurpose::Write { index, len } => write!(f, "Write chunk {index} of {len} bytes"),
            ChunkPurpose::Reply { len } => write!(f, "Reply chunk of {len} bytes"),
        }
    }
}

/// Memory registration, implemented by the caller (see the module
/// documentation): the bridge between this sans-I/O crate and a verbs
/// engine.
pub trait Registrar {
    /// Why a registration failed.
    type Error: std::error::Error + 'static;

    /// Register the memory `purpose` describes and append to `out` the
    /// segments that cover it, in order: their lengths must add up to
    /// exactly `purpose.len()` (checked). Never called for zero bytes.
    ///
    /// For [`ChunkPurpose::Read`] and [`ChunkPurpose::PositionZero`] the
    /// memory is the caller's copy of the call message (the bytes given to
    /// [`marshal_call`]) and must stay unchanged until the reply arrives
    /// (3.4.5.1); for the others it is a receive buffer the caller keeps for
    /// reassembling the reply.
    fn register(&mut self, purpose: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), Self::Error>;

    /// Hand back segments [`Registrar::register`] returned for `purpose`
    /// that the call will not advertise after all. The default does nothing.
    fn release(&mut self, purpose: ChunkPurpose, segments: &[XdrRdmaSegment]) {
        let _ = (purpose, segments);
    }
}

/// Why a call could not be marshaled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError<E: std::error::Error + 'static> {
    /// The message is not an XDR stream with an XID: shorter than four bytes
    /// or not a multiple of four (RFC 4506 section 3).
    #[error("an RPC message of {len} bytes is not an XDR stream with an XID")]
    NotXdr {
        /// The message's length.
        len: usize,
    },
    /// The message is longer than a chunk can describe (32-bit lengths).
    #[error("an RPC message of {len} bytes does not fit a 32-bit chunk length")]
    TooLarge {
        /// The message's length.
        len: usize,
    },
    /// The ULB's DDP-eligible items do not describe the message.
    #[error("DDP-eligible arguments: {0}")]
    Items(#[from] ItemError),
    /// The caller's [`Registrar`] failed.
    #[error("registering the {purpose} failed")]
    Registration {
        /// What was being registered.
        purpose: ChunkPurpose,
        /// The registrar's error.
        #[source]
        source: E,
    },
    /// The [`Registrar`] returned segments that do not cover what it was
    /// asked to register.
    #[error("the registrar returned {got} bytes of segments for the {purpose}")]
    RegistrationLength {
        /// What was being registered.
        purpose: ChunkPurpose,
        /// The sum of the segment lengths returned.
        got: u64,
    },
    /// No form of the call fits the peer's inline threshold: even the
    /// transport header of a Long Call, which carries no payload, is larger
    /// (draft 5.2.4: the gathered Send "MUST NOT exceed the peer receiver's
    /// inline threshold").
    #[error("the {header}-byte transport header alone exceeds the call inline threshold of {threshold}")]
    HeaderExceedsThreshold {
        /// The Long call's header.
        header: usize,
        /// The call inline threshold.
        threshold: usize,
    },
    /// The reply's transport header, which copies the Write list and Reply
    /// chunk (draft 5.3.2, 5.3.3), could not fit the Requester's own inline
    /// threshold, so no reply could reach it.
    #[error("the reply's {header}-byte transport header would exceed the reply inline threshold of {threshold}")]
    ReplyHeaderExceedsThreshold {
        /// The reply header's length.
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

/// What the Upper-Layer Binding says about one call: its DDP-eligible
/// arguments and what its reply may need. Borrowed by [`CallRequest`]; fill
/// one with [`CallDescription::describe`] and reuse it from call to call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallDescription {
    /// DDP-eligible arguments ([`UpperLayerBinding::call_ddp_items`]).
    pub args: Vec<DdpItem>,
    /// Largest DDP-eligible results
    /// ([`UpperLayerBinding::reply_ddp_maxima`]).
    pub result_maxima: Vec<usize>,
    /// Largest reduced reply ([`UpperLayerBinding::max_reply_size`]).
    pub max_reply: usize,
}

impl CallDescription {
    /// Ask `ulb` about `call`, replacing what was here.
    pub fn describe<U: UpperLayerBinding + ?Sized>(&mut self, ulb: &U, call: &[u8]) {
        self.args.clear();
        self.result_maxima.clear();
        ulb.call_ddp_items(call, &mut self.args);
        ulb.reply_ddp_maxima(call, &mut self.result_maxima);
        self.max_reply = ulb.max_reply_size(call);
    }

    /// The request to marshal the call with `credits` requested, over a
    /// connection with `thresholds`.
    pub fn request(&self, credits: u32, thresholds: InlineThresholds) -> CallRequest<'_> {
        CallRequest {
            credits,
            thresholds,
            ddp_args: &self.args,
            ddp_result_maxima: &self.result_maxima,
            max_reply: self.max_reply,
        }
    }
}

/// Everything [`marshal_call`] needs besides the message and the registrar.
///
/// Built by [`CallDescription::request`] from what a ULB says, or by hand:
///
/// ```
/// use rpcrdma_v1::header::{Header, HeaderLimits};
/// use rpcrdma_v1::marshal_call::*;
/// # use std::convert::Infallible;
/// # use rpcrdma_v1::xdr::XdrRdmaSegment;
/// # struct OneRegion;
/// # impl Registrar for OneRegion {
/// #     type Error = Infallible;
/// #     fn register(&mut self, p: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), Infallible> {
/// #         out.push(XdrRdmaSegment { handle: 7, length: p.len() as u32, offset: 0x1000 });
/// #         Ok(())
/// #     }
/// # }
/// // A 100-byte call (XID 5: an ONC RPC header, AUTH_NONE, and 60 bytes of arguments)
/// // with no DDP-eligible argument, whose reply may carry one DDP-eligible result of up
/// // to 8192 bytes.
/// let mut call: Vec<u8> = [5u32, 0, 2, 100003, 3, 6, 0, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// call.resize(100, 0);
/// let req = CallRequest {
///     credits: 16,
///     thresholds: InlineThresholds::default(),
///     ddp_args: &[],
///     ddp_result_maxima: &[8192],
///     max_reply: 200,
/// };
/// let (mut header, mut out) = ([0u8; 1024], MarshaledCall::new());
/// marshal_call(&call, &req, &mut OneRegion, &mut header, &mut out).unwrap();
/// assert_eq!(out.form(), CallForm::Short);
/// assert_eq!((out.writes().len(), out.writes().chunk_len(0)), (1, 8192));
/// assert!(out.reply_chunk().is_none()); // a 200-byte reply fits inline
///
/// // What goes on the wire parses back as a Version One header.
/// let mut send = Vec::new();
/// out.gather_into(&header, &call, &mut send);
/// let h = Header::parse(&send, &HeaderLimits::default()).unwrap();
/// assert_eq!((h.xid(), h.credit(), h.write_list().len()), (5, 16, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallRequest<'p> {
    /// The credit value to request, written into `rdma_credit` (RFC 8166
    /// section 3.3.1).
    pub credits: u32,
    /// The connection's inline thresholds.
    pub thresholds: InlineThresholds,
    /// DDP-eligible arguments of the call, in stream order; reduced only
    /// when the call does not fit inline whole.
    pub ddp_args: &'p [DdpItem],
    /// Largest length of each DDP-eligible result (one Write chunk each).
    pub ddp_result_maxima: &'p [usize],
    /// Largest reply Payload stream with those results reduced (RFC 8166
    /// section 6.2).
    pub max_reply: usize,
}

/// A list of Write chunks (the Write list, or the Reply chunk alone): their
/// segments back to back, and where each chunk ends.
///
/// ```
/// use rpcrdma_v1::marshal_call::WriteChunks;
/// use rpcrdma_v1::xdr::XdrRdmaSegment;
/// let seg = |h| XdrRdmaSegment { handle: h, length: 8, offset: 0 };
/// let mut w = WriteChunks::default();
/// w.push_chunk(&[seg(1), seg(2)]);
/// w.push_chunk(&[]);               // an empty Write chunk (3.4.6)
/// assert_eq!(w.len(), 2);
/// assert_eq!(w.chunk(0), [seg(1), seg(2)]);
/// assert!(w.chunk(1).is_empty());
/// assert_eq!(w.encoded_list_len(), 4 + (8 + 32) + 8);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteChunks {
    segments: Vec<XdrRdmaSegment>,
    ends: Vec<usize>,
}

impl WriteChunks {
    /// Forget every chunk, keeping the memory.
    pub fn clear(&mut self) {
        self.segments.clear();
        self.ends.clear();
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is no chunk.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Append a chunk.
    pub fn push_chunk(&mut self, segments: &[XdrRdmaSegment]) {
        self.segments.extend_from_slice(segments);
        self.ends.push(self.segments.len());
    }

    /// Append one segment to the last chunk, or start the first.
    pub(crate) fn push_segment(&mut self, segment: XdrRdmaSegment) {
        self.segments.push(segment);
        match self.ends.last_mut() {
            Some(end) => *end = self.segments.len(),
            None => self.ends.push(self.segments.len()),
        }
    }

    /// Start a new, empty chunk.
    pub(crate) fn start_chunk(&mut self) {
        self.ends.push(self.segments.len());
    }

    /// The segments of chunk `index`. Panics when out of range.
    pub fn chunk(&self, index: usize) -> &[XdrRdmaSegment] {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.segments[start..self.ends[index]]
    }

    /// The chunks in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[XdrRdmaSegment]> + '_ {
        (0..self.len()).map(move |i| self.chunk(i))
    }

    /// All segments, chunk after chunk.
    pub fn segments(&self) -> &[XdrRdmaSegment] {
        &self.segments
    }

    /// The sum of the segment lengths of chunk `index`: the chunk's length
    /// (RFC 8166 section 3.4.4).
    pub fn chunk_len(&self, index: usize) -> u64 {
        self.chunk(index).iter().map(|s| u64::from(s.length)).sum()
    }

    /// Encoded length of these chunks as a Write list (RFC 8166 section
    /// 4.1.2): per chunk an optional-data word, a count and the segments;
    /// then the terminating word.
    pub fn encoded_list_len(&self) -> usize {
        4 + self.len() * 8 + self.segments.len() * SEGMENT_LEN
    }

    /// Run `f` with these chunks as generated [`XdrWriteChunk`]s, borrowing
    /// the segments (no allocation for up to eight chunks).
    pub fn with_xdr<T>(&self, f: impl FnOnce(&[XdrWriteChunk<'_>]) -> T) -> T {
        const ON_STACK: usize = 8;
        let chunk = |i| XdrWriteChunk { target: Seq::from_slice(self.chunk(i)) };
        if self.len() <= ON_STACK {
            let mut chunks = [XdrWriteChunk { target: Seq::default() }; ON_STACK];
            for (i, c) in chunks.iter_mut().enumerate().take(self.len()) {
                *c = chunk(i);
            }
            f(&chunks[..self.len()])
        } else {
            let chunks: Vec<_> = (0..self.len()).map(chunk).collect();
            f(&chunks)
        }
    }
}

/// Encoded length of an optional Reply chunk of `segments` segments (RFC
/// 8166 section 4.1.2).
pub(crate) fn reply_chunk_len(segments: Option<usize>) -> usize {
    4 + segments.map_or(0, |n| 4 + n * SEGMENT_LEN)
}

/// A marshaled call: the transport header's length (the header itself is in
/// the caller's buffer), the inline payload as ranges of the message, and
/// the chunks advertised. Keep one and pass it to [`marshal_call`] again to
/// reuse its memory.
///
/// ```
/// use rpcrdma_v1::marshal_call::*;
/// # use std::convert::Infallible;
/// # use rpcrdma_v1::xdr::XdrRdmaSegment;
/// # struct OneRegion;
/// # impl Registrar for OneRegion {
/// #     type Error = Infallible;
/// #     fn register(&mut self, p: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), Infallible> {
/// #         out.push(XdrRdmaSegment { handle: 7, length: p.len() as u32, offset: 0x1000 });
/// #         Ok(())
/// #     }
/// # }
/// // A 3000-byte call with nothing DDP-eligible cannot go inline within 1024
/// // bytes: it goes Long, the whole message in a Position-Zero Read chunk.
/// let mut call: Vec<u8> = [9u32, 0, 2, 100003, 3, 7, 0, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// call.resize(3000, 0); // an ONC RPC header (XID 9, AUTH_NONE) and 2960 bytes of arguments
/// let desc = CallDescription { max_reply: 4096, ..Default::default() };
/// let (mut header, mut out) = ([0u8; 1024], MarshaledCall::new());
/// marshal_call(&call, &desc.request(32, InlineThresholds::default()), &mut OneRegion, &mut header, &mut out)
///     .unwrap();
/// assert_eq!((out.form(), out.xid()), (CallForm::Long, 9));
/// assert!(out.inline().is_empty());
/// assert_eq!((out.reads()[0].position, out.reads()[0].target.length), (0, 3000));
/// // The reply may exceed 1024 bytes too: a Reply chunk is provisioned for it.
/// assert_eq!(out.reply_chunk().unwrap()[0].length, 4096);
/// assert_eq!(out.send_len(), out.header_len());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MarshaledCall {
    vers: Version,
    form: CallForm,
    xid: u32,
    header_len: usize,
    inline: Vec<Range<usize>>,
    inline_len: usize,
    reads: Vec<XdrReadChunk>,
    read_purposes: Vec<(ChunkPurpose, usize)>,
    writes: WriteChunks,
    reply: WriteChunks,
    scratch: Vec<XdrRdmaSegment>,
}

impl MarshaledCall {
    /// An empty one, for Version One.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty one whose headers carry `rdma_vers` = `vers`: Version Two
    /// marshals its calls this way, its chunk lists being Version One's
    /// (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). Kept by
    /// [`MarshaledCall::clear`].
    ///
    /// ```
    /// # use rpcrdma_v1::marshal_call::MarshaledCall;
    /// use rpcrdma_v1::Version;
    /// assert_eq!(MarshaledCall::with_version(Version::TWO).version(), Version::TWO);
    /// assert_eq!(MarshaledCall::new().version(), Version::ONE);
    /// ```
    pub fn with_version(vers: Version) -> Self {
        MarshaledCall { vers, ..Self::default() }
    }

    /// The `rdma_vers` its headers carry.
    ///
    /// ```
    /// assert_eq!(rpcrdma_v1::marshal_call::MarshaledCall::default().version(), rpcrdma_v1::Version::ONE);
    /// ```
    pub fn version(&self) -> Version {
        self.vers
    }

    /// Sets the `rdma_vers` its next headers carry, so that one kept for reuse
    /// serves connections of either version.
    ///
    /// ```
    /// # use rpcrdma_v1::marshal_call::MarshaledCall;
    /// use rpcrdma_v1::Version;
    /// let mut m = MarshaledCall::new();
    /// m.set_version(Version::TWO);
    /// assert_eq!(m.version(), Version::TWO);
    /// ```
    pub fn set_version(&mut self, vers: Version) {
        self.vers = vers;
    }

    /// Forget the last call, keeping the memory.
    pub fn clear(&mut self) {
        self.form = CallForm::Short;
        self.xid = 0;
        self.header_len = 0;
        self.inline.clear();
        self.inline_len = 0;
        self.reads.clear();
        self.read_purposes.clear();
        self.writes.clear();
        self.reply.clear();
        self.scratch.clear();
    }

    /// The form chosen.
    pub fn form(&self) -> CallForm {
        self.form
    }

    /// The call's XID, copied into `rdma_xid` (RFC 8166 section 4.2.1).
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// Length of the transport header written at the start of the caller's
    /// header buffer.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The inline payload (the reduced Payload stream, RFC 8166 section
    /// 3.4.1): ranges of the call message to gather after the header, in
    /// order. Empty for a Long call.
    pub fn inline(&self) -> &[Range<usize>] {
        &self.inline
    }

    /// Total length of [`MarshaledCall::inline`].
    pub fn inline_len(&self) -> usize {
        self.inline_len
    }

    /// Length of the RDMA Send: header plus inline payload; never more than
    /// the call inline threshold.
    pub fn send_len(&self) -> usize {
        self.header_len + self.inline_len
    }

    /// The Read list as advertised, in list order.
    pub fn reads(&self) -> &[XdrReadChunk] {
        &self.reads
    }

    /// The Write chunks provisioned, one per DDP-eligible result.
    pub fn writes(&self) -> &WriteChunks {
        &self.writes
    }

    /// The Reply chunk's segments, when one was provisioned.
    pub fn reply_chunk(&self) -> Option<&[XdrRdmaSegment]> {
        (!self.reply.is_empty()).then(|| self.reply.chunk(0))
    }

    /// Copy the Send (header, then inline payload) into `out`: for callers
    /// without a gather list, and for tests.
    pub fn gather_into(&self, header: &[u8], call: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.send_len());
        out.extend_from_slice(&header[..self.header_len]);
        for r in &self.inline {
            out.extend_from_slice(&call[r.clone()]);
        }
    }

    /// Encoded length of this call's transport header as it stands (RFC
    /// 8166 section 4.1.2): fixed fields, Read list, Write list, Reply
    /// chunk.
    fn header_len_now(&self) -> usize {
        FIXED_HEADER_LEN
            + 4
            + self.reads.len() * READ_SEGMENT_LEN
            + self.writes.encoded_list_len()
            + reply_chunk_len(self.reply_chunk().map(<[_]>::len))
    }

    /// Give every registration back (on failure).
    fn release_all<R: Registrar>(&mut self, reg: &mut R) {
        self.release_reads(reg);
        for (index, chunk) in self.writes.iter().enumerate() {
            if !chunk.is_empty() {
                let len = chunk.iter().map(|s| s.length as usize).sum();
                reg.release(ChunkPurpose::Write { index, len }, chunk);
            }
        }
        if let Some(chunk) = self.reply_chunk() {
            let len = chunk.iter().map(|s| s.length as usize).sum();
            reg.release(ChunkPurpose::Reply { len }, chunk);
        }
        self.writes.clear();
        self.reply.clear();
    }

    /// Give the Read chunks back and forget them.
    fn release_reads<R: Registrar>(&mut self, reg: &mut R) {
        let mut start = 0;
        for &(purpose, end) in &self.read_purposes {
            self.scratch.clear();
            self.scratch.extend(self.reads[start..end].iter().map(|r| r.target));
            reg.release(purpose, &self.scratch);
            start = end;
        }
        self.reads.clear();
        self.read_purposes.clear();
    }
}

/// Register `purpose` into `out` (appending), checking the segments cover it.
fn register_exact<R: Registrar>(
    reg: &mut R,
    purpose: ChunkPurpose,
    out: &mut Vec<XdrRdmaSegment>,
) -> Result<(), CallError<R::Error>> {
    let start = out.len();
    reg.register(purpose, out).map_err(|source| CallError::Registration { purpose, source })?;
    let got: u64 = out[start..].iter().map(|s| u64::from(s.length)).sum();
    if got != purpose.len() as u64 {
        reg.release(purpose, &out[start..]);
        out.truncate(start);
        return Err(CallError::RegistrationLength { purpose, got });
    }
    Ok(())
}

/// Provision the Write list (RFC 8166 section 3.4.6): one Write chunk per
/// DDP-eligible result, each registered for the result's largest length
/// and no more — no room for roundup padding (section 3.4.6.2: the
/// Requester "SHOULD NOT include additional space for XDR roundup
/// padding"). A result whose largest length is zero gets an empty Write
/// chunk (no segments) without a registration.
///
/// Appends to `out`'s Write chunks.
pub fn encode_write_list<R: Registrar>(
    out: &mut MarshaledCall,
    result_maxima: &[usize],
    reg: &mut R,
) -> Result<(), CallError<R::Error>> {
    for (index, &len) in result_maxima.iter().enumerate() {
        if len > u32::MAX as usize {
            return Err(CallError::TooLarge { len });
        }
        out.scratch.clear();
        if len > 0 {
            register_exact(reg, ChunkPurpose::Write { index, len }, &mut out.scratch)?;
        }
        out.writes.push_chunk(&out.scratch);
    }
    Ok(())
}

/// Provision the Reply chunk if the reply may not fit inline (RFC 8166
/// section 3.5.3; draft 5.3.3: "A requester MUST provide a Reply chunk
/// whenever the maximum possible size of the reply is larger than its own
/// inline threshold").
///
/// The reply inline threshold bounds the whole RDMA Send, so the largest
/// reply is the reply's transport header — which copies this call's Write
/// list and carries no Read list (draft 5.3.1, 5.3.2) — plus `max_reply`,
/// the largest reduced Payload stream, rounded up to an XDR unit. If that
/// exceeds `own_threshold`, a Reply chunk of `max_reply` bytes is
/// registered. Call after [`encode_write_list`]. Returns whether a Reply
/// chunk was provisioned.
///
/// Fails when the reply's transport header alone, Reply chunk included,
/// could not fit `own_threshold`: no reply could then arrive.
pub fn encode_reply_chunk<R: Registrar>(
    out: &mut MarshaledCall,
    max_reply: usize,
    own_threshold: usize,
    reg: &mut R,
) -> Result<bool, CallError<R::Error>> {
    let max_reply = roundup(max_reply);
    let reply_header =
        |reply_segments| FIXED_HEADER_LEN + 4 + out.writes.encoded_list_len() + reply_chunk_len(reply_segments);
    let without = reply_header(None);
    if without.saturating_add(max_reply) <= own_threshold {
        return Ok(false);
    }
    if max_reply > u32::MAX as usize {
        return Err(CallError::TooLarge { len: max_reply });
    }
    out.scratch.clear();
    register_exact(reg, ChunkPurpose::Reply { len: max_reply }, &mut out.scratch)?;
    out.reply.clear();
    out.reply.push_chunk(&out.scratch);
    let with = reply_header(Some(out.scratch.len()));
    if with > own_threshold {
        return Err(CallError::ReplyHeaderExceedsThreshold { header: with, threshold: own_threshold });
    }
    Ok(true)
}

/// Reduce DDP-eligible arguments into Read chunks (RFC 8166 sections 3.4.5
/// and 3.4.5.2): register each item's data — *without* its roundup padding,
/// so the chunk's length is the item's encoded length ("the Requester SHOULD
/// NOT include the data item's XDR roundup padding in the chunk") — and
/// advertise its segments with Position = the item's offset in the
/// *unreduced* Payload stream (3.4.5: "computed from the beginning of the
/// unreduced Payload stream"; a multiple of four), all segments of one chunk
/// sharing it. Items of length zero are not reduced.
///
/// Appends to `out`'s Read list. The inline payload that goes with these
/// chunks leaves out each item's data and padding
/// ([`crate::ulb::reduce_payload`]).
pub fn encode_read_list<R: Registrar>(
    out: &mut MarshaledCall,
    items: &[DdpItem],
    reg: &mut R,
) -> Result<(), CallError<R::Error>> {
    for item in items.iter().filter(|i| i.len > 0) {
        let purpose = ChunkPurpose::Read { offset: item.offset, len: item.len };
        out.scratch.clear();
        register_exact(reg, purpose, &mut out.scratch)?;
        let position = item.offset as u32;
        out.reads.extend(out.scratch.iter().map(|&target| XdrReadChunk { position, target }));
        out.read_purposes.push((purpose, out.reads.len()));
    }
    Ok(())
}

/// Put the whole call message in a Position-Zero Read chunk (RFC 8166
/// section 3.5.3, Long Call: "Every RDMA read segment in this chunk MUST
/// contain zero in its Position field"). The message keeps its XDR
/// alignment: being an XDR stream, its length is a multiple of four, so the
/// chunk includes whatever roundup padding the message holds ("such chunks
/// MUST include appropriate XDR roundup padding").
///
/// Appends to `out`'s Read list.
pub fn encode_position_zero_read_chunk<R: Registrar>(
    out: &mut MarshaledCall,
    call_len: usize,
    reg: &mut R,
) -> Result<(), CallError<R::Error>> {
    let purpose = ChunkPurpose::PositionZero { len: call_len };
    out.scratch.clear();
    register_exact(reg, purpose, &mut out.scratch)?;
    out.reads.extend(out.scratch.iter().map(|&target| XdrReadChunk { position: 0, target }));
    out.read_purposes.push((purpose, out.reads.len()));
    Ok(())
}

/// Encode the call's transport header into `buf` (RFC 8166 section 4.1.2):
/// `rdma_xid` = the call's XID, `rdma_vers` = its version (1 unless made `with_version`), `rdma_credit` =
/// `credits`, `RDMA_MSG` for Short and Chunked calls, `RDMA_NOMSG` for Long
/// ones, then the Read list, Write list and Reply chunk in `call`. Returns
/// the header's length.
pub fn encode_call_header(call: &MarshaledCall, credits: u32, buf: &mut [u8]) -> Result<usize, crate::rt::Error> {
    call.writes.with_xdr(|writes| {
        let rdma_reads = List::from_slice(&call.reads);
        let rdma_writes = List::from_slice(writes);
        let rdma_reply = call.reply_chunk().map(|s| XdrWriteChunk { target: Seq::from_slice(s) });
        let rdma_body = match call.form {
            CallForm::Short | CallForm::Chunked => {
                RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads, rdma_writes, rdma_reply })
            }
            CallForm::Long => RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads, rdma_writes, rdma_reply }),
        };
        let msg = RdmaMsg { rdma_xid: call.xid, rdma_vers: call.vers.wire(), rdma_credit: credits, rdma_body };
        debug_assert_eq!(msg.encoded_len(), call.header_len_now());
        // One pass: the caller's buffer is scratch until this succeeds.
        msg.encode_into(buf)
    })
}

/// Marshal an RPC Call message (RFC 8166 sections 3.4 and 3.5): provision
/// Write chunks and, when needed, a Reply chunk; choose the call's form —
/// Short if the whole message fits, else Chunked if reducing the
/// DDP-eligible arguments makes it fit, else Long — where "fits" means the
/// whole RDMA Send, transport header plus inline payload, is no larger than
/// the peer's (call) inline threshold (draft 5.2.4, the gather rule);
/// encode the transport header into `header`; and describe it all in `out`.
///
/// `call` must be an XDR stream (a multiple of four bytes) that starts with
/// its XID. On failure every registration made is released.
///
/// See the module documentation for an example.
pub fn marshal_call<R: Registrar>(
    call: &[u8],
    req: &CallRequest<'_>,
    reg: &mut R,
    header: &mut [u8],
    out: &mut MarshaledCall,
) -> Result<(), CallError<R::Error>> {
    marshal_call_shaped(CallShape::of(call), req, reg, header, out)
}

/// All that marshaling reads of a call message: its length and its XID.
/// Marshaling never looks at the other bytes (the ULB's description in the
/// [`CallRequest`] already says where the DDP-eligible arguments are), so a
/// Requester may hand the message's buffer itself to its [`Registrar`] (to
/// expose it through Read chunks without a copy) and marshal by its shape.
///
/// ```
/// use rpcrdma_v1::marshal_call::CallShape;
/// assert_eq!(CallShape::of(&[0, 0, 0, 9, 0, 0, 0, 0]), CallShape { len: 8, xid: Some(9) });
/// assert_eq!(CallShape::of(&[1, 2]).xid, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallShape {
    /// The message's length in bytes.
    pub len: usize,
    /// Its first four bytes (the XID), if it has them.
    pub xid: Option<u32>,
}

impl CallShape {
    /// The shape of `call`.
    pub fn of(call: &[u8]) -> Self {
        CallShape { len: call.len(), xid: call.first_chunk::<4>().map(|x| u32::from_be_bytes(*x)) }
    }
}

/// [`marshal_call`] for a call known by its [`CallShape`].
pub fn marshal_call_shaped<R: Registrar>(
    call: CallShape,
    req: &CallRequest<'_>,
    reg: &mut R,
    header: &mut [u8],
    out: &mut MarshaledCall,
) -> Result<(), CallError<R::Error>> {
    out.clear();
    let result = marshal_call_inner(call, req, reg, header, out);
    if result.is_err() {
        out.release_all(reg);
        out.clear();
    }
    result
}

fn marshal_call_inner<R: Registrar>(
    call: CallShape,
    req: &CallRequest<'_>,
    reg: &mut R,
    header: &mut [u8],
    out: &mut MarshaledCall,
) -> Result<(), CallError<R::Error>> {
    let len = call.len;
    let Some(xid) = call.xid else { return Err(CallError::NotXdr { len }) };
    if !len.is_multiple_of(4) {
        return Err(CallError::NotXdr { len });
    }
    if len > u32::MAX as usize {
        return Err(CallError::TooLarge { len });
    }
    check_items(len, req.ddp_args)?;
    out.xid = xid;
    let threshold = req.thresholds.call;

    // The reply's resources are the same whatever form the call takes.
    encode_write_list(out, req.ddp_result_maxima, reg)?;
    encode_reply_chunk(out, req.max_reply, req.thresholds.reply, reg)?;
    let bare_header = out.header_len_now();

    // Short (3.5.1): the whole message inline.
    if bare_header + len <= threshold {
        out.form = CallForm::Short;
        out.inline.push(0..len);
        out.inline_len = len;
        return finish(out, req.credits, header);
    }

    // Chunked (3.5.2): reduce the DDP-eligible arguments. The header needs at
    // least one Read segment per reduced item; register only if that could fit.
    let reducible = req.ddp_args.iter().filter(|i| i.len > 0).count();
    if reducible > 0 {
        let reduced = reduced_len(len, req.ddp_args);
        if bare_header + reducible * READ_SEGMENT_LEN + reduced <= threshold {
            encode_read_list(out, req.ddp_args, reg)?;
            if out.header_len_now() + reduced <= threshold {
                out.form = CallForm::Chunked;
                out.inline_len = reduce_payload(len, req.ddp_args, &mut out.inline)?;
                return finish(out, req.credits, header);
            }
            // More segments than one per item: it does not fit after all.
            out.release_reads(reg);
        }
    }

    // Long (3.5.3): the whole message in a Position-Zero Read chunk.
    encode_position_zero_read_chunk(out, len, reg)?;
    out.form = CallForm::Long;
    let need = out.header_len_now();
    if need > threshold {
        return Err(CallError::HeaderExceedsThreshold { header: need, threshold });
    }
    finish(out, req.credits, header)
}

fn finish<E: std::error::Error + 'static>(
    out: &mut MarshaledCall,
    credits: u32,
    header: &mut [u8],
) -> Result<(), CallError<E>> {
    let need = out.header_len_now();
    out.header_len = encode_call_header(out, credits, header)
        .map_err(|_| CallError::HeaderBufferTooSmall { need, have: header.len() })?;
    Ok(())
}
