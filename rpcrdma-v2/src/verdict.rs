//! The error rules of Version Two behind one function. Section 4.2 of
//! draft-cel-nfsv4-rpcrdma-version-two-00: "Error handling works the same
//! way in RPC-over-RDMA Version Two as it does in RPC-over-RDMA Version
//! One, with one change described in Section 3.1" (RDMA_ERR_INVAL_OPTION).
//! So RDMA_MSG and RDMA_NOMSG go through Version One's chunk rules
//! ([`Header::parse_chunk_lists`]), Version One's ERR_CHUNK becomes
//! RDMA_ERR_BAD_HEADER (the same value, 2), and RDMA_OPTIONAL goes to the
//! [`Registry`].
//!
//! | received | verdict |
//! |---|---|
//! | fewer than 8 bytes | discard: no version to answer |
//! | version 1, when the policy's range includes it | [`Verdict::Version1`]: Version One's own rules |
//! | another version | RDMA_ERR_VERS with our range, same XID, the request's version |
//! | a chunk or XDR error, unknown procedure, RDMA_MSGP, RDMA_DONE | RDMA_ERR_BAD_HEADER |
//! | RDMA_NOMSG with bytes after the header (4.2: MUST NOT follow) | RDMA_ERR_BAD_HEADER |
//! | RDMA_OPTIONAL, opttype unregistered or unsupported | RDMA_ERR_INVAL_OPTION, same XID (3.1: MUST) |
//! | RDMA_OPTIONAL whose XID our own RDMA_OPTIONAL awaits ([`receive_awaiting`]) | [`Verdict::Answer`]: never dispatched nor answered |
//! | RDMA_OPTIONAL, opttype registered | its handler runs: [`Verdict::Handled`], with the handler's answer to send if it gave one |
//! | RDMA_ERROR we can decode | the XID's transaction completes with it |
//! | RDMA_ERROR we cannot decode | discard silently |
//!
//! ```
//! use rpcrdma_v2::options::Registry;
//! use rpcrdma_v2::verdict::{default_policy, receive, Verdict};
//! // RDMA_OPTIONAL, xid 9, opttype 7, empty optinfo: nobody registered 7.
//! let bytes: Vec<u8> = [9u32, 2, 1, 5, 7, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
//! let Verdict::Reply { reply, .. } = receive(&bytes, &default_policy(), &mut Registry::new()) else { panic!() };
//! assert_eq!(reply.as_bytes(), [0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 32, 0, 0, 0, 4, 0, 0, 0, 3]);
//! ```

use rpcrdma_v1::header::{proc_word, Fixed, Header, HeaderError, MessageKind};
use rpcrdma_v1::rt::Xdr;
use rpcrdma_v1::verdict::PeerError as V1PeerError;
pub use rpcrdma_v1::verdict::{DiscardReason, ErrorReply};

use crate::options::{OptionOutcome, OptionalAnswer, OptionalMessage, Registry};
use crate::xdr::{Rpcrdma2Body, Rpcrdma2ErrVers, Rpcrdma2Error, Rpcrdma2Proc, Rpcrdma2XprtHdr};
use crate::{Version, RPCRDMA2_VERSION};

/// Version One's policy type, shared: limits, the supported range
/// reported in RDMA_ERR_VERS, the credit of error replies. A range that
/// includes 1 hands Version One messages to Version One's rules
/// ([`Verdict::Version1`]). Its `Default` is Version One's; start from
/// [`default_policy`] here.
pub use rpcrdma_v1::verdict::ReceivePolicy;

/// The policy of a Version Two only receiver: Version One's limits, range
/// 2..=2, credit 32 in error replies.
///
/// ```
/// let p = rpcrdma_v2::verdict::default_policy();
/// assert_eq!(p.versions, (rpcrdma_v2::Version::TWO, rpcrdma_v2::Version::TWO));
/// ```
pub fn default_policy() -> ReceivePolicy {
    ReceivePolicy { versions: (RPCRDMA2_VERSION, RPCRDMA2_VERSION), ..ReceivePolicy::default() }
}

/// Which rule a message broke.
///
/// ```
/// use rpcrdma_v2::verdict::Reason;
/// assert_eq!(Reason::UnsupportedOption(7).to_string(), "rdma_opttype 7 is not recognized or supported");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// A rule Version Two shares with Version One: version, XDR, procedure,
    /// chunk lists, the RPC message's XID.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// An RDMA_OPTIONAL whose opttype has no handler, or whose handler did
    /// not support it (section 3.1).
    #[error("rdma_opttype {0} is not recognized or supported")]
    UnsupportedOption(u32),
    /// Bytes after an RDMA_NOMSG header (section 4.2: "When the rdma_proc
    /// field has any other value, an RPC Payload Stream MUST NOT follow").
    #[error("{0} bytes follow an RDMA_NOMSG transport header")]
    PayloadAfterNoMsg(usize),
    /// A draft-ietf-nfsv4-rpcrdma-version-two-07 message that breaks one of that draft's
    /// rules, which section 7 answers with this RDMA2_ERROR code (the receiver logs the
    /// rule itself).
    #[error("a draft-07 message that section 7 answers with RDMA2_ERROR code {0}")]
    Draft07(u32),
}

/// The error a peer's RDMA_ERROR reported: one of Version One's, whose
/// RDMA_ERR_VERS layout and value 2 (ERR_CHUNK there,
/// RDMA_ERR_BAD_HEADER here) Version Two keeps, or Version Two's own.
///
/// ```
/// use rpcrdma_v2::verdict::PeerError;
/// use rpcrdma_v1::verdict::PeerError as V1;
/// assert_ne!(PeerError::BAD_HEADER, PeerError::InvalOption);
/// assert_eq!(PeerError::BAD_HEADER, PeerError::Common(V1::Chunk));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerError {
    /// RDMA_ERR_VERS, or RDMA_ERR_BAD_HEADER as [`rpcrdma_v1::verdict::PeerError::Chunk`].
    Common(rpcrdma_v1::verdict::PeerError),
    /// RDMA_ERR_INVAL_OPTION: the peer does not support our RDMA_OPTIONAL
    /// (section 3.1).
    InvalOption,
    /// An RDMA2_ERROR of draft-ietf-nfsv4-rpcrdma-version-two-07 (section 7): its code and
    /// the arm's values.
    Draft07(crate::draft07::xdr::Rpcrdma2HdrError),
}

impl core::fmt::Display for PeerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            // (Version Two names Version One's ERR_CHUNK RDMA_ERR_BAD_HEADER.)
            PeerError::Common(rpcrdma_v1::verdict::PeerError::Chunk) => {
                f.write_str("RDMA_ERR_BAD_HEADER (Version One's ERR_CHUNK): it could not take the header")
            }
            PeerError::Common(e) => write!(f, "{e}"),
            PeerError::InvalOption => f.write_str("RDMA_ERR_INVAL_OPTION: it does not support the RDMA_OPTIONAL"),
            PeerError::Draft07(e) => write!(f, "{e} (draft-ietf-nfsv4-rpcrdma-version-two-07 section 7)"),
        }
    }
}

impl PeerError {
    /// RDMA_ERR_BAD_HEADER.
    pub const BAD_HEADER: PeerError = PeerError::Common(rpcrdma_v1::verdict::PeerError::Chunk);
}

/// What to do with a received message.
///
/// ```
/// use rpcrdma_v2::options::Registry;
/// use rpcrdma_v2::verdict::{default_policy, receive, DiscardReason, Verdict};
/// assert_eq!(receive(&[0; 7], &default_policy(), &mut Registry::new()), Verdict::Discard(DiscardReason::TooShort(7)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// A valid RDMA_MSG or RDMA_NOMSG: Version One's header view (with
    /// [`Header::version`] 2), chunks grouped and checked.
    Accept(Header<'a>),
    /// An RDMA_OPTIONAL its registered handler took.
    Handled {
        /// `rdma_xid`.
        xid: u32,
        /// `rdma_opttype`.
        opttype: u32,
        /// The handler's answer ([`OptionOutcome::Answer`]): send it back
        /// with `xid`. `None`: nothing to send.
        answer: Option<OptionalAnswer>,
    },
    /// An RDMA_OPTIONAL answering one this side sent (its XID is awaited:
    /// [`receive_awaiting`]): the peer's answer, for whoever waits on that
    /// XID. It is not a request: no handler runs and nothing is sent back.
    Answer(OptionalMessage<'a>),
    /// Send `reply` back; `reason` says which rule the message broke.
    Reply {
        /// The RDMA_ERROR to send.
        reply: ErrorReply,
        /// The rule broken.
        reason: Reason,
    },
    /// The peer's RDMA_ERROR: complete transaction `xid` with `error`.
    PeerError {
        /// The XID whose transaction ends.
        xid: u32,
        /// What the peer reported.
        error: PeerError,
    },
    /// A Version One message, judged by Version One's rules.
    Version1(rpcrdma_v1::verdict::Verdict<'a>),
    /// Drop the message silently.
    Discard(DiscardReason),
}

/// Judge a received message by Version Two's rules; an RDMA_OPTIONAL with a
/// registered opttype runs its handler. Allocates nothing.
///
/// ```
/// use rpcrdma_v2::options::Registry;
/// use rpcrdma_v2::verdict::{default_policy, receive, Verdict};
/// // RDMA_MSG, version 2, no chunks, then an RPC call with the same XID.
/// let bytes: Vec<u8> = [7u32, 2, 1, 0, 0, 0, 0, 7, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// let Verdict::Accept(h) = receive(&bytes, &default_policy(), &mut Registry::new()) else { panic!() };
/// assert_eq!((h.xid(), h.version().wire(), h.payload()), (7, 2, &bytes[28..]));
/// ```
pub fn receive<'a>(bytes: &'a [u8], policy: &ReceivePolicy, registry: &mut Registry) -> Verdict<'a> {
    receive_awaiting(bytes, policy, registry, &|_| false)
}

/// [`receive`] on a side that sent RDMA_OPTIONAL messages of its own:
/// `awaiting(xid)` says whether one with that XID still waits for its
/// answer, and a Version Two RDMA_OPTIONAL with such an XID is that answer
/// ([`Verdict::Answer`]) instead of a request for the registry. The draft
/// gives RDMA_OPTIONAL no direction bit, so the XID is all there is to tell
/// an answer from a request (section 3.1 matches RDMA_ERR_INVAL_OPTION to
/// its message the same way). Allocates nothing.
///
/// ```
/// use rpcrdma_v2::options::{encode_optional, Registry};
/// use rpcrdma_v2::verdict::{default_policy, receive_awaiting, Verdict};
/// let mut buf = [0u8; 32];
/// let n = encode_optional(9, 1, 7, b"pong", &mut buf).unwrap();
/// let v = receive_awaiting(&buf[..n], &default_policy(), &mut Registry::new(), &|xid| xid == 9);
/// assert!(matches!(v, Verdict::Answer(m) if m.optinfo == b"pong"));
/// ```
pub fn receive_awaiting<'a>(
    bytes: &'a [u8],
    policy: &ReceivePolicy,
    registry: &mut Registry,
    awaiting: &dyn Fn(u32) -> bool,
) -> Verdict<'a> {
    let Some(fixed) = Fixed::read(bytes) else {
        return Verdict::Discard(DiscardReason::TooShort(bytes.len()));
    };
    let (xid, word) = (fixed.xid, fixed.vers);
    // An RDMA_ERROR is never answered with another: decode it or drop it.
    if fixed.is_error() {
        return decode_error(bytes, xid, word);
    }
    // Answers echo the version word as received (RFC 8166 section 4.5.1).
    let vers = Version::from_wire(word);
    let bad_header =
        |reason: Reason| Verdict::Reply { reply: err_reply(xid, vers, policy.credit, ERR_BAD_HEADER), reason };
    // The one dispatch on the version: Version Two's rules, Version One's, or RDMA_ERR_VERS
    // with the range the policy accepts (a receiver limited to Version One answers a Version
    // Two message so too, RFC 8166 section 4.5.1).
    let (low, high) = policy.versions;
    if vers != RPCRDMA2_VERSION || !(low..=high).contains(&vers) {
        if vers == rpcrdma_v1::header::RPCRDMA_VERSION && (low..=high).contains(&vers) {
            return Verdict::Version1(rpcrdma_v1::verdict::receive(bytes, policy));
        }
        let range = Rpcrdma2ErrVers { rdma_vers_low: low.wire(), rdma_vers_high: high.wire() };
        return Verdict::Reply {
            reply: err_reply(xid, vers, policy.credit, Rpcrdma2Error::RdmaErrVers(range)),
            reason: HeaderError::Version { vers: word }.into(),
        };
    }
    let p = match proc_word(bytes) {
        Ok(p) => p,
        Err(e) => return bad_header(e.into()),
    };
    // Procedures above i32::MAX are not enum values either.
    let kind = match i32::try_from(p).ok().and_then(Rpcrdma2Proc::from_value) {
        Some(Rpcrdma2Proc::RdmaMsg) => MessageKind::Msg,
        Some(Rpcrdma2Proc::RdmaNomsg) => MessageKind::NoMsg,
        Some(Rpcrdma2Proc::RdmaOptional) => return optional(bytes, xid, policy, registry, awaiting),
        // Reserved as in Version One: never sent, answered as a bad header
        // (RFC 8166 section 4.3 via draft section 4.2's error handling).
        Some(Rpcrdma2Proc::RdmaMsgp | Rpcrdma2Proc::RdmaDone) => return bad_header(HeaderError::Obsolete(p).into()),
        Some(Rpcrdma2Proc::RdmaError) | None => return bad_header(HeaderError::UnknownProc(p).into()),
    };
    match Header::parse_chunk_lists(bytes, kind, &policy.limits) {
        Ok(h) if kind == MessageKind::NoMsg && !h.payload().is_empty() => {
            bad_header(Reason::PayloadAfterNoMsg(h.payload().len()))
        }
        Ok(h) => Verdict::Accept(h),
        Err(e) => bad_header(e.into()),
    }
}

/// RDMA_ERR_BAD_HEADER.
const ERR_BAD_HEADER: Rpcrdma2Error = Rpcrdma2Error::RdmaErrBadHeader;

/// Section 3.1: an opttype not recognized or not supported is answered
/// with RDMA_ERR_INVAL_OPTION and the same XID; an answer to our own
/// RDMA_OPTIONAL is never taken for a request (it would otherwise be
/// answered in turn, and two peers could answer each other for ever).
fn optional<'a>(
    bytes: &'a [u8],
    xid: u32,
    policy: &ReceivePolicy,
    registry: &mut Registry,
    awaiting: &dyn Fn(u32) -> bool,
) -> Verdict<'a> {
    let credit = Fixed::read(bytes).and_then(|f| f.credit).unwrap_or(0);
    let msg = match OptionalMessage::decode(bytes, xid, credit) {
        Ok(m) => m,
        Err(e) => {
            let reason = HeaderError::Xdr(e).into();
            return Verdict::Reply { reply: err_reply(xid, RPCRDMA2_VERSION, policy.credit, ERR_BAD_HEADER), reason };
        }
    };
    if awaiting(xid) {
        return Verdict::Answer(msg);
    }
    match registry.dispatch(&msg) {
        Some(OptionOutcome::Done) => Verdict::Handled { xid, opttype: msg.opttype, answer: None },
        Some(OptionOutcome::Answer(a)) => Verdict::Handled { xid, opttype: msg.opttype, answer: Some(a) },
        Some(OptionOutcome::Unsupported) | None => Verdict::Reply {
            reply: err_reply(xid, RPCRDMA2_VERSION, policy.credit, Rpcrdma2Error::RdmaErrInvalOption),
            reason: Reason::UnsupportedOption(msg.opttype),
        },
    }
}

/// An RDMA_ERROR in Version Two's XDR, with the request's XID and version
/// (draft section 5.3: replies carry the version of the call).
///
/// ```
/// use rpcrdma_v2::verdict::err_reply;
/// use rpcrdma_v2::xdr::Rpcrdma2Error;
/// let r = err_reply(9, rpcrdma_v2::Version::TWO, 1, Rpcrdma2Error::RdmaErrBadHeader);
/// assert_eq!(r.as_bytes(), [0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2]);
/// ```
pub fn err_reply(xid: u32, vers: Version, credit: u32, err: Rpcrdma2Error) -> ErrorReply {
    let hdr = Rpcrdma2XprtHdr {
        rdma_xid: xid,
        rdma_vers: vers.wire(),
        rdma_credit: credit,
        rdma_body: Rpcrdma2Body::RdmaError(err),
    };
    let mut buf = [0u8; ErrorReply::MAX_LEN];
    // At most 28 bytes: always fits.
    let n = hdr.encode(&mut buf).unwrap_or(0);
    ErrorReply::from_bytes(&buf[..n]).unwrap_or_else(|| ErrorReply::err_chunk(xid, vers, credit))
}

/// A received RDMA_ERROR. RDMA_ERR_VERS has one layout in every version, so
/// it is read whatever the version word says (a Version One peer may
/// answer our probe with `rdma_vers` 1); RDMA_ERR_BAD_HEADER is Version
/// One's ERR_CHUNK; RDMA_ERR_INVAL_OPTION exists only in Version Two.
fn decode_error(bytes: &[u8], xid: u32, vers: u32) -> Verdict<'_> {
    let error = match Rpcrdma2XprtHdr::decode(bytes).map(|(h, _)| h.rdma_body) {
        Ok(Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrVers(r))) if r.rdma_vers_low <= r.rdma_vers_high => {
            PeerError::Common(V1PeerError::Vers { vers, low: r.rdma_vers_low, high: r.rdma_vers_high })
        }
        Ok(Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrBadHeader))
            if vers == Version::ONE.wire() || vers == RPCRDMA2_VERSION.wire() =>
        {
            PeerError::BAD_HEADER
        }
        Ok(Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrInvalOption)) if vers == RPCRDMA2_VERSION.wire() => {
            PeerError::InvalOption
        }
        _ => return Verdict::Discard(DiscardReason::UndecodableError),
    };
    Verdict::PeerError { xid, error }
}
