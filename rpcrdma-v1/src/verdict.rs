//! The error rules of RFC 8166 section 4.5 (draft section 5.5) behind one
//! function, so that every caller treats received bytes the same way:
//! [`receive`] answers [`Verdict::Accept`] with a validated [`Header`],
//! [`Verdict::Reply`] with the RDMA_ERROR to send back, [`Verdict::PeerError`]
//! when the peer's RDMA_ERROR completes one of our XIDs, or
//! [`Verdict::Discard`].
//!
//! | received | verdict |
//! |---|---|
//! | fewer than 8 bytes | discard: no version to answer |
//! | a version other than 1 | ERR_VERS with our range, same XID, the request's version (4.5.1) |
//! | version 1, XDR error (truncated, bad proc, bad list, NOMSG without chunk, XID mismatch) | ERR_CHUNK (4.5.2) |
//! | RDMA_MSGP, RDMA_DONE | ERR_CHUNK (draft 5.6: receivers SHOULD) |
//! | RDMA_ERROR we can decode | the XID's transaction completes with that error (4.5) |
//! | RDMA_ERROR we cannot decode | discard silently (4.5: MUST) |
//!
//! ```
//! use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
//! // A version 2 probe: answered with ERR_VERS, same XID, low = high = 1.
//! let probe: Vec<u8> = [9u32, 2, 1, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
//! let Verdict::Reply { reply, .. } = receive(&probe, &ReceivePolicy::default()) else { panic!() };
//! let words: Vec<u32> = reply.as_bytes().chunks(4).map(|w| u32::from_be_bytes(w.try_into().unwrap())).collect();
//! assert_eq!(words, [9, 2, 32, 4, 1, 1, 1]);
//! ```

use xdr_spec_rt::Xdr;

use crate::header::{Fixed, Header, HeaderError, HeaderLimits, RPCRDMA_VERSION};
use crate::xdr::{RdmaBody, RdmaMsg, RpcRdmaError, RpcRdmaErrvers};
use crate::Version;

/// How a receiver judges what arrives.
///
/// ```
/// use rpcrdma_v1::header::HeaderLimits;
/// use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
/// use rpcrdma_v1::Version;
/// let policy = ReceivePolicy {
///     limits: HeaderLimits::default().max_segments(4),
///     versions: (Version::ONE, Version::ONE),
///     credit: 8,
/// };
/// // A version 3 message is answered with ERR_VERS carrying our credit and range.
/// let v3: Vec<u8> = [5u32, 3, 1, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// let Verdict::Reply { reply, .. } = receive(&v3, &policy) else { panic!("expected ERR_VERS") };
/// assert_eq!(&reply.as_bytes()[8..12], &8u32.to_be_bytes());
/// assert_eq!(ReceivePolicy::default().credit, 32);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceivePolicy {
    /// Limits on segments and chunk sizes.
    pub limits: HeaderLimits,
    /// The versions this receiver supports, reported in ERR_VERS.
    pub versions: (Version, Version),
    /// The credit value to put in the RDMA_ERROR replies this receiver sends.
    pub credit: u32,
}

impl Default for ReceivePolicy {
    fn default() -> Self {
        ReceivePolicy { limits: HeaderLimits::default(), versions: (RPCRDMA_VERSION, RPCRDMA_VERSION), credit: 32 }
    }
}

/// An RDMA_ERROR reply, encoded without allocating: 20 bytes for ERR_CHUNK,
/// 28 for ERR_VERS.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ErrorReply {
    buf: [u8; ErrorReply::MAX_LEN],
    len: u8,
}

impl core::fmt::Debug for ErrorReply {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("ErrorReply").field(&self.as_bytes()).finish()
    }
}

impl ErrorReply {
    /// The longest RDMA_ERROR: four fixed words, the error code and a
    /// version range (ERR_VERS).
    pub const MAX_LEN: usize = 28;

    /// An RDMA_ERROR some other encoder produced (Version Two's, whose
    /// error codes extend these), or `None` if longer than
    /// [`ErrorReply::MAX_LEN`].
    ///
    /// ```
    /// use rpcrdma_v1::verdict::ErrorReply;
    /// let bytes = [0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 3];
    /// assert_eq!(ErrorReply::from_bytes(&bytes).unwrap().as_bytes(), bytes);
    /// assert!(ErrorReply::from_bytes(&[0; 29]).is_none());
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let mut buf = [0u8; Self::MAX_LEN];
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(ErrorReply { buf, len: bytes.len() as u8 })
    }

    /// RDMA_ERROR / ERR_VERS (RFC 8166 section 4.5.1): the failing message's
    /// XID and version, and the range this receiver supports.
    pub fn err_vers(xid: u32, vers: Version, credit: u32, low: Version, high: Version) -> Self {
        let err = RpcRdmaError::ErrVers(RpcRdmaErrvers { rdma_vers_low: low.wire(), rdma_vers_high: high.wire() });
        Self::encode(xid, vers, credit, err)
    }

    /// RDMA_ERROR / ERR_CHUNK (RFC 8166 section 4.5.2).
    pub fn err_chunk(xid: u32, vers: Version, credit: u32) -> Self {
        Self::encode(xid, vers, credit, RpcRdmaError::ErrChunk)
    }

    fn encode(xid: u32, vers: Version, credit: u32, err: RpcRdmaError) -> Self {
        let body = RdmaBody::RdmaError(err);
        let msg = RdmaMsg { rdma_xid: xid, rdma_vers: vers.wire(), rdma_credit: credit, rdma_body: body };
        let mut buf = [0u8; Self::MAX_LEN];
        // At most 28 bytes, always fits.
        let len = msg.encode(&mut buf).unwrap_or(0) as u8;
        ErrorReply { buf, len }
    }

    /// The same reply with one of its fixed words (at `offset`, one of
    /// [`crate::header::offsets`]: `VERS`, `CREDIT`) set to `value`: an answer
    /// another encoder wrote, given the version of the message it answers or the
    /// credit total in effect once it is counted.
    ///
    /// ```
    /// use rpcrdma_v1::header::offsets;
    /// use rpcrdma_v1::verdict::ErrorReply;
    /// use rpcrdma_v1::Version;
    /// let e = ErrorReply::err_chunk(9, Version::ONE, 32).with_word(offsets::CREDIT, 33);
    /// assert_eq!(&e.as_bytes()[8..12], &[0, 0, 0, 33]);
    /// ```
    ///
    /// # Panics
    ///
    /// If the word does not lie within the reply's four fixed words.
    pub fn with_word(mut self, offset: usize, value: u32) -> Self {
        assert!(offset + 4 <= crate::header::offsets::BODY, "a fixed word");
        self.buf[offset..offset + 4].copy_from_slice(&value.to_be_bytes());
        self
    }

    /// The bytes to send.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    /// The XID of the message it answers (`rdma_xid`), 0 if it is too short to have one.
    ///
    /// ```
    /// use rpcrdma_v1::{verdict::ErrorReply, Version};
    /// let e = ErrorReply::err_vers(0x1234, Version::TWO, 1, Version::ONE, Version::ONE);
    /// assert_eq!((e.xid(), e.code()), (0x1234, 1)); // ERR_VERS
    /// assert_eq!(ErrorReply::err_chunk(7, Version::ONE, 1).code(), 2); // ERR_CHUNK
    /// ```
    pub fn xid(&self) -> u32 {
        self.word(0)
    }

    /// Its error code (`rdma_err`, RFC 8166 section 4.2.4: 1 is ERR_VERS, 2 ERR_CHUNK;
    /// Version Two adds its own), 0 if it is too short to have one.
    pub fn code(&self) -> u32 {
        self.word(16)
    }

    fn word(&self, at: usize) -> u32 {
        self.as_bytes().get(at..at + 4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    }
}

/// The error a peer's RDMA_ERROR reported; it completes the XID's
/// transaction (RFC 8166 section 4.5).
///
/// ```
/// use rpcrdma_v1::verdict::{receive, ErrorReply, PeerError, ReceivePolicy, Verdict};
/// use rpcrdma_v1::Version;
/// // The peer refused our version 2 call 0x99: it speaks only version 1.
/// let from_peer = ErrorReply::err_vers(0x99, Version::TWO, 1, Version::ONE, Version::ONE);
/// match receive(from_peer.as_bytes(), &ReceivePolicy::default()) {
///     Verdict::PeerError { xid, error: PeerError::Vers { vers, low, high } } => {
///         assert_eq!((xid, vers, low, high), (0x99, 2, 1, 1));
///     }
///     other => panic!("{other:?}"),
/// }
/// let chunk = ErrorReply::err_chunk(0x9a, Version::ONE, 1);
/// let verdict = receive(chunk.as_bytes(), &ReceivePolicy::default());
/// assert_eq!(verdict, Verdict::PeerError { xid: 0x9a, error: PeerError::Chunk });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerError {
    /// ERR_VERS: the peer supports versions `low..=high`. `vers` is the
    /// header's version word: Linux echoes the request's version there,
    /// libevpl sends 1 (docs/design.md).
    Vers {
        /// The RDMA_ERROR's `rdma_vers` word.
        vers: u32,
        /// Lowest version supported.
        low: u32,
        /// Highest version supported.
        high: u32,
    },
    /// ERR_CHUNK: the peer could not parse our header, or has no RPC-level
    /// reply for this XID.
    Chunk,
}

impl core::fmt::Display for PeerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PeerError::Vers { low, high, .. } => write!(f, "ERR_VERS: it speaks versions {low} to {high}"),
            PeerError::Chunk => {
                f.write_str("ERR_CHUNK: it could not take the header, or no RPC-level reply is possible for the call")
            }
        }
    }
}

/// Why received bytes were dropped without an answer.
///
/// ```
/// use rpcrdma_v1::verdict::{receive, DiscardReason, ReceivePolicy, Verdict};
/// let policy = ReceivePolicy::default();
/// assert_eq!(receive(&[0, 0, 0, 1], &policy), Verdict::Discard(DiscardReason::TooShort(4)));
/// // An RDMA_ERROR (proc 4) with an error code no version defines: never answered.
/// let bad: Vec<u8> = [9u32, 1, 1, 4, 99].iter().flat_map(|w| w.to_be_bytes()).collect();
/// assert_eq!(receive(&bad, &policy), Verdict::Discard(DiscardReason::UndecodableError));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscardReason {
    /// Too short to read the XID and version.
    TooShort(usize),
    /// An RDMA_ERROR that cannot be decoded (RFC 8166 section 4.5: MUST
    /// discard silently).
    UndecodableError,
}

/// What to do with a received message.
///
/// ```
/// use rpcrdma_v1::header::HeaderError;
/// use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
/// let to_bytes = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
/// let policy = ReceivePolicy::default();
///
/// // A valid RDMA_MSG: go on with the header.
/// let msg = to_bytes(&[7, 1, 32, 0, 0, 0, 0, 7, 0]);
/// let Verdict::Accept(h) = receive(&msg, &policy) else { panic!() };
/// assert_eq!(h.payload(), &msg[28..]);
///
/// // An unknown procedure: send back the ERR_CHUNK, 20 bytes, same XID.
/// let unknown = to_bytes(&[7, 1, 32, 9]);
/// match receive(&unknown, &policy) {
///     Verdict::Reply { reply, reason } => {
///         assert_eq!(reason, HeaderError::UnknownProc(9));
///         assert_eq!((reply.xid(), reply.code(), reply.as_bytes().len()), (7, 2, 20));
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// A valid RDMA_MSG or RDMA_NOMSG: go on with it.
    Accept(Header<'a>),
    /// Send `reply` back; `reason` says which rule the message broke.
    Reply {
        /// The RDMA_ERROR to send.
        reply: ErrorReply,
        /// The rule broken.
        reason: HeaderError,
    },
    /// The peer's RDMA_ERROR: complete transaction `xid` with `error`.
    PeerError {
        /// The XID whose transaction ends.
        xid: u32,
        /// What the peer reported.
        error: PeerError,
    },
    /// Drop the message silently.
    Discard(DiscardReason),
}

/// Judge a received message by the rules of RFC 8166 section 4.5.
pub fn receive<'a>(bytes: &'a [u8], policy: &ReceivePolicy) -> Verdict<'a> {
    let Some(fixed) = Fixed::read(bytes) else {
        return Verdict::Discard(DiscardReason::TooShort(bytes.len()));
    };
    let (xid, vers) = (fixed.xid, fixed.vers);
    // An RDMA_ERROR is never answered with another: decode it or drop it.
    if fixed.is_error() {
        return decode_error(xid, vers, bytes);
    }
    // Answers echo the version word as received (RFC 8166 section 4.5.1).
    let vers = Version::from_wire(vers);
    match Header::parse(bytes, &policy.limits) {
        Ok(h) => Verdict::Accept(h),
        Err(HeaderError::TooShortForVersion { len }) => Verdict::Discard(DiscardReason::TooShort(len)),
        Err(reason @ HeaderError::Version { .. }) => {
            let (low, high) = policy.versions;
            Verdict::Reply { reply: ErrorReply::err_vers(xid, vers, policy.credit, low, high), reason }
        }
        Err(reason) => Verdict::Reply { reply: ErrorReply::err_chunk(xid, vers, policy.credit), reason },
    }
}

/// A received RDMA_ERROR. ERR_VERS's layout is fixed for all versions (the
/// XDR says so), so it is read whatever the header's version; ERR_CHUNK is
/// version 1's.
fn decode_error(xid: u32, vers: u32, bytes: &[u8]) -> Verdict<'_> {
    let error = match RdmaMsg::decode(bytes).map(|(m, _)| m.rdma_body) {
        Ok(RdmaBody::RdmaError(RpcRdmaError::ErrVers(r))) if r.rdma_vers_low <= r.rdma_vers_high => {
            PeerError::Vers { vers, low: r.rdma_vers_low, high: r.rdma_vers_high }
        }
        Ok(RdmaBody::RdmaError(RpcRdmaError::ErrChunk)) if vers == RPCRDMA_VERSION.wire() => PeerError::Chunk,
        _ => return Verdict::Discard(DiscardReason::UndecodableError),
    };
    Verdict::PeerError { xid, error }
}
