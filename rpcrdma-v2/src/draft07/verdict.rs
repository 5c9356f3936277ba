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

use rpcrdma_v1::header::Fixed;

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
            let code = match error {
                Rpcrdma2HdrError::Rdma2ErrVers(_) => RDMA2_ERR_VERS,
                Rpcrdma2HdrError::RdmaMaxChunks { discriminant, .. } => discriminant,
                Rpcrdma2HdrError::Rdma2ErrSegments(_) => RDMA2_ERR_SEGMENTS,
                Rpcrdma2HdrError::Rdma2ErrWriteResource(_) => RDMA2_ERR_WRITE_RESOURCE,
                Rpcrdma2HdrError::Rdma2ErrReplyResource(_) => RDMA2_ERR_REPLY_RESOURCE,
                Rpcrdma2HdrError::Default { discriminant } => discriminant,
            };
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
                let mut buf = [0u8; ErrorReply::MAX_LEN];
                let n = marshal::error(&mut buf, xid, policy.credit, &body).expect("an error body fits 28 bytes");
                // Section 7: "The rdma_vers field MUST contain the same version that was in
                // the rdma_vers field in the ingress request."
                buf[4..8].copy_from_slice(&vers.to_be_bytes());
                let reply = ErrorReply::from_bytes(&buf[..n]).expect("at most 28 bytes");
                Verdict::Reply { reply, reason }
            }
        },
    }
}
