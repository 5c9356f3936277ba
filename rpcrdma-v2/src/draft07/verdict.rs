//! What a -07 receiver does with a message, behind one function
//! (draft-ietf-nfsv4-rpcrdma-version-two-07 section 7): [`receive`] validates the header once
//! ([`Header::parse`]) and either accepts it, hands a peer's RDMA2_ERROR to the transaction it
//! ends, answers with the RDMA2_ERROR section 7 prescribes, encoded without allocating, or
//! drops the message silently.
//!
//! | received | verdict |
//! |---|---|
//! | shorter than the 16-byte prefix | discard (section 7) |
//! | a valid header | [`Verdict::Accept`]: continuation and credits are the caller's next steps |
//! | an RDMA2_ERROR with a code of section 7 | [`Verdict::PeerError`]: its XID's transaction ends |
//! | an RDMA2_ERROR with a code this draft does not define, or that does not decode | discard (section 7: "MUST silently discard") |
//! | anything else [`Header::parse`] refuses | [`Verdict::Reply`] with [`HeaderError::answer`]'s body, the message's XID and version word (section 7: "MUST contain the same XID ... the same version") |
//!
//! ```
//! use rpcrdma_v2::draft07::verdict::{receive, Policy, Verdict};
//! // Version 2, htype 99: answered RDMA2_ERR_INVAL_HTYPE (4) with the same XID.
//! let bytes: Vec<u8> = [9u32, 2, 1, 99].iter().flat_map(|w| w.to_be_bytes()).collect();
//! let Verdict::Reply { reply, .. } = receive(&bytes, &Policy::default()) else { panic!() };
//! assert_eq!(reply.as_bytes(), [0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 32, 0, 0, 0, 4, 0, 0, 0, 4]);
//! ```

pub use rpcrdma_v1::verdict::ErrorReply;

use rpcrdma_v1::header::{offsets, Fixed};
use rpcrdma_v1::marshal_reply::ReplyError;

use super::header::{Answer, Header, HeaderError, HeaderType};
use super::marshal;
use super::xdr::*;
use crate::HeaderLimits;

/// What a receiver judges by: its header limits, the versions it supports (for
/// RDMA2_ERR_VERS), and the `rdma_credit` its answers carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Limits on the chunk lists ([`Header::parse`]).
    pub limits: HeaderLimits,
    /// The range RDMA2_ERR_VERS reports (section 7.1.1).
    pub supported: Rpcrdma2ErrVers,
    /// The `rdma_credit` of an RDMA2_ERROR this side sends (section 7: "the credit values in
    /// effect for this connection").
    pub credit: u32,
}

impl Default for Policy {
    /// A Version Two only receiver: default limits, versions 2 to 2, 32 credits.
    fn default() -> Self {
        Policy {
            limits: HeaderLimits::default(),
            supported: Rpcrdma2ErrVers { rdma_vers_low: 2, rdma_vers_high: 2 },
            credit: 32,
        }
    }
}

/// Why a message was dropped without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discard {
    /// Shorter than the prefix: its XID cannot be trusted (section 7).
    TooShort(usize),
    /// An RDMA_ERROR not taken: its body does not decode as -07's, or it is written in another
    /// version (an error is never answered with another).
    ErrorNotTaken,
    /// An RDMA2_ERROR whose `rdma_err` this draft does not define (section 7: "MUST silently
    /// discard the message").
    UnknownErrorCode(u32),
}

/// What to do with a received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// A valid header.
    Accept(Header<'a>),
    /// The peer's RDMA2_ERROR: the transaction of `xid` ends with `error`.
    PeerError {
        /// The XID whose transaction ends.
        xid: u32,
        /// What the peer reported.
        error: Rpcrdma2HdrError,
    },
    /// Drop the message and send `reply` back.
    Reply {
        /// The RDMA2_ERROR to send.
        reply: ErrorReply,
        /// The rule broken.
        reason: HeaderError,
    },
    /// Drop the message silently.
    Discard(Discard),
}

impl Rpcrdma2HdrError {
    /// Its `rdma_err`, the union's discriminant.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::xdr::Rpcrdma2HdrError;
    /// assert_eq!(Rpcrdma2HdrError::Rdma2ErrSegments(8).code(), 8);
    /// ```
    pub fn code(&self) -> u32 {
        match *self {
            Rpcrdma2HdrError::Rdma2ErrVers(_) => RDMA2_ERR_VERS,
            Rpcrdma2HdrError::RdmaMaxChunks { discriminant, .. } => discriminant,
            Rpcrdma2HdrError::Rdma2ErrSegments(_) => RDMA2_ERR_SEGMENTS,
            Rpcrdma2HdrError::Rdma2ErrWriteResource(_) => RDMA2_ERR_WRITE_RESOURCE,
            Rpcrdma2HdrError::Rdma2ErrReplyResource(_) => RDMA2_ERR_REPLY_RESOURCE,
            Rpcrdma2HdrError::Default { discriminant } => discriminant,
        }
    }
}

impl core::fmt::Display for Rpcrdma2HdrError {
    /// The code's name and what its arm says, as section 7 words it.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::xdr::{Rpcrdma2ErrWrite, Rpcrdma2HdrError};
    /// let e = Rpcrdma2HdrError::Rdma2ErrWriteResource(Rpcrdma2ErrWrite { rdma_chunk_index: 1, rdma_length_needed: 8192 });
    /// assert_eq!(
    ///     e.to_string(),
    ///     "RDMA2_ERR_WRITE_RESOURCE: Write chunk 1 (counting from one) is too small; its result needs 8192 bytes"
    /// );
    /// ```
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Rpcrdma2HdrError::Rdma2ErrVers(v) => write!(
                f,
                "RDMA2_ERR_VERS: the peer speaks versions {} to {} only",
                v.rdma_vers_low, v.rdma_vers_high
            ),
            Rpcrdma2HdrError::RdmaMaxChunks { discriminant, value } => {
                let which = if discriminant == RDMA2_ERR_READ_CHUNKS { "READ" } else { "WRITE" };
                let kind = if discriminant == RDMA2_ERR_READ_CHUNKS { "Read" } else { "Write" };
                write!(f, "RDMA2_ERR_{which}_CHUNKS: the peer takes at most {value} {kind} chunks")
            }
            Rpcrdma2HdrError::Rdma2ErrSegments(n) => {
                write!(f, "RDMA2_ERR_SEGMENTS: the peer takes at most {n} segments in a chunk")
            }
            // Section 7.3.4: the index counts from one; zero says the responder could not tell,
            // and both zero that the call cannot be sent again with more room.
            Rpcrdma2HdrError::Rdma2ErrWriteResource(Rpcrdma2ErrWrite { rdma_chunk_index: 0, rdma_length_needed: 0 }) => {
                f.write_str("RDMA2_ERR_WRITE_RESOURCE: a Write chunk is too small, and the peer gave neither which nor how much it needs")
            }
            Rpcrdma2HdrError::Rdma2ErrWriteResource(w) if w.rdma_chunk_index == 0 => write!(
                f,
                "RDMA2_ERR_WRITE_RESOURCE: a Write chunk is too small (the peer could not tell which); its result needs {} bytes",
                w.rdma_length_needed
            ),
            Rpcrdma2HdrError::Rdma2ErrWriteResource(w) => write!(
                f,
                "RDMA2_ERR_WRITE_RESOURCE: Write chunk {} (counting from one) is too small; its result needs {} bytes",
                w.rdma_chunk_index, w.rdma_length_needed
            ),
            Rpcrdma2HdrError::Rdma2ErrReplyResource(0) => {
                f.write_str("RDMA2_ERR_REPLY_RESOURCE: the reply does not fit the Reply chunk (no size given)")
            }
            Rpcrdma2HdrError::Rdma2ErrReplyResource(need) => write!(
                f,
                "RDMA2_ERR_REPLY_RESOURCE: the reply does not fit the Reply chunk; it needs a Reply chunk of {need} bytes"
            ),
            Rpcrdma2HdrError::Default { discriminant } => f.write_str(match discriminant {
                RDMA2_ERR_BAD_XDR => "RDMA2_ERR_BAD_XDR: the peer could not decode the transport header",
                RDMA2_ERR_BAD_PROPVAL => "RDMA2_ERR_BAD_PROPVAL: the peer could not parse a transport property's value",
                RDMA2_ERR_INVAL_HTYPE => "RDMA2_ERR_INVAL_HTYPE: the peer does not take that header type",
                RDMA2_ERR_INVAL_CONT => "RDMA2_ERR_INVAL_CONT: a message of a continued sequence was out of order or inconsistent",
                RDMA2_ERR_VERS_MISMATCH => "RDMA2_ERR_VERS_MISMATCH: the message's version is not the one used before on the connection",
                RDMA2_ERR_SYSTEM => "RDMA2_ERR_SYSTEM: the peer failed to process the message, for a reason of its own",
                _ => return write!(f, "RDMA2_ERROR code {discriminant}"),
            }),
        }
    }
}

/// The error codes section 7 defines.
fn is_known(code: u32) -> bool {
    matches!(code, RDMA2_ERR_VERS..=RDMA2_ERR_VERS_MISMATCH | RDMA2_ERR_SYSTEM)
}

/// Judges a received message (see the [module documentation](self)). Allocates nothing.
pub fn receive<'a>(bytes: &'a [u8], policy: &Policy) -> Verdict<'a> {
    let fixed = Fixed::read(bytes);
    let is_error = fixed.is_some_and(|f| f.is_error());
    match Header::parse(bytes, &policy.limits) {
        Ok(h) if h.header_type() == HeaderType::Error => {
            let Some(error) = h.error() else { return Verdict::Discard(Discard::ErrorNotTaken) };
            let code = error.code();
            if is_known(code) {
                Verdict::PeerError { xid: h.xid(), error }
            } else {
                Verdict::Discard(Discard::UnknownErrorCode(code))
            }
        }
        Ok(h) => Verdict::Accept(h),
        Err(HeaderError::TooShort { len }) => Verdict::Discard(Discard::TooShort(len)),
        Err(reason) => match reason.answer(policy.supported, is_error) {
            Answer::Drop => Verdict::Discard(Discard::ErrorNotTaken),
            Answer::Error(body) => {
                // Answered only past the prefix: both words are there.
                let (xid, vers) = fixed.map_or((0, 0), |f| (f.xid, f.vers));
                // Section 7: "The rdma_vers field MUST contain the same version that was in
                // the rdma_vers field in the ingress request."
                let reply = error_reply(xid, policy.credit, &body).with_word(offsets::VERS, vers);
                Verdict::Reply { reply, reason }
            }
        },
    }
}

/// Section 7.3's answer to a reply the requester's chunks cannot carry (what Version One
/// answers ERR_CHUNK, `rpcrdma_v1::marshal_reply::ReplyError::errcode`):
/// - a Write chunk too short for its result: RDMA2_ERR_WRITE_RESOURCE with the chunk's index,
///   counted from one, and the result's length (7.3.4);
/// - a reply that fits neither inline nor the Reply chunk (or there is none):
///   RDMA2_ERR_REPLY_RESOURCE with the bytes needed (7.3.5); for want of a Reply chunk that is
///   the whole reduced reply with its header, an upper bound of what the chunk must hold;
/// - a reply whose transport header alone exceeds the threshold: RDMA2_ERR_REPLY_RESOURCE
///   with length zero, "not possible to determine" (no Reply chunk carries a header).
///
/// `None` for the responder's own mistakes, which no requester resource fixes.
///
/// ```
/// use rpcrdma_v1::marshal_reply::ReplyError;
/// use rpcrdma_v2::draft07::verdict::reply_error_answer;
/// use rpcrdma_v2::draft07::xdr::{Rpcrdma2ErrWrite, Rpcrdma2HdrError};
/// let e = ReplyError::WriteChunkTooSmall { chunk: 0, need: 8192, have: 4096 };
/// let want = Rpcrdma2ErrWrite { rdma_chunk_index: 1, rdma_length_needed: 8192 };
/// assert_eq!(reply_error_answer(&e), Some(Rpcrdma2HdrError::Rdma2ErrWriteResource(want)));
/// assert_eq!(reply_error_answer(&ReplyError::NotXdr { len: 3 }), None);
/// ```
pub fn reply_error_answer(e: &ReplyError) -> Option<Rpcrdma2HdrError> {
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Some(match *e {
        ReplyError::WriteChunkTooSmall { chunk, need, .. } => {
            Rpcrdma2HdrError::Rdma2ErrWriteResource(Rpcrdma2ErrWrite {
                rdma_chunk_index: clamp(chunk as u64 + 1),
                rdma_length_needed: clamp(need),
            })
        }
        ReplyError::ReplyChunkTooSmall { need, .. } | ReplyError::NoReplyChunk { need, .. } => {
            Rpcrdma2HdrError::Rdma2ErrReplyResource(clamp(need as u64))
        }
        ReplyError::HeaderExceedsThreshold { .. } => Rpcrdma2HdrError::Rdma2ErrReplyResource(0),
        _ => return None,
    })
}

/// An RDMA2_ERROR answering the message `xid` with `body`, carrying `credit` (section 7), in
/// the buffer type every answer of this workspace travels in.
///
/// ```
/// use rpcrdma_v2::draft07::verdict::error_reply;
/// use rpcrdma_v2::draft07::xdr::{Rpcrdma2HdrError, RDMA2_ERR_SYSTEM};
/// let e = error_reply(9, 33, &Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_SYSTEM });
/// assert_eq!((e.xid(), e.code()), (9, 100));
/// assert_eq!(&e.as_bytes()[4..8], &[0, 0, 0, 2]);
/// ```
pub fn error_reply(xid: u32, credit: u32, body: &Rpcrdma2HdrError) -> ErrorReply {
    let mut buf = [0u8; ErrorReply::MAX_LEN];
    let n = marshal::error(&mut buf, xid, credit, body).expect("every error body fits 28 bytes");
    ErrorReply::from_bytes(&buf[..n]).expect("at most 28 bytes")
}
