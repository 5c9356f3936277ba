//! Version Two's two dialects (issue 27; docs/design.md, "Version Two's two dialects"):
//! draft-cel-nfsv4-rpcrdma-version-two-00 and draft-ietf-nfsv4-rpcrdma-version-two-07 both put
//! 2 in `rdma_vers` and are not wire-compatible. Their headers share the first four words
//! (xid, vers, credit, then -00's `rdma_proc` or -07's `rdma_htype`), so each side learns the
//! other's dialect from the fourth word of a first message and from the error code its first
//! message draws. This module holds the two decisions, sans-I/O:
//! - [`first_message_dialect`]: which dialect a responder that speaks both takes from the
//!   first Version Two message of a connection (it keeps it: -07 section 4.3.3);
//! - [`after_refusal`]: where a requester goes after the answer to its first message is an
//!   RDMA_ERROR: on in Version One, on the same connection in the other dialect (once), or
//!   nowhere.
//!
//! ```
//! use rpcrdma_v2::dialect::{after_refusal, Dialect, Next, Speaks};
//! // A -07 first message refused by a -00 responder (RDMA_ERR_BAD_HEADER, 2): a requester that
//! // also speaks -00 sends its call again in -00, on the same connection.
//! let answer: Vec<u8> = [7u32, 2, 32, 4, 2].iter().flat_map(|w| w.to_be_bytes()).collect();
//! let both = Speaks::both(Dialect::Ietf07);
//! assert_eq!(after_refusal(&both, Dialect::Ietf07, &[], 7, &answer), Next::Retry(Some(Dialect::Cel00)));
//! ```

use rpcrdma_v1::header::Fixed;
use rpcrdma_v1::rt::Xdr;

use crate::draft07::xdr::Rpcrdma2HdrError;

/// A Version Two dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// draft-cel-nfsv4-rpcrdma-version-two-00: RDMA_MSG, RDMA_NOMSG, RDMA_OPTIONAL
    /// (`rpcrdma_v2::verdict`).
    Cel00,
    /// draft-ietf-nfsv4-rpcrdma-version-two-07: header types 4 to 13
    /// (`rpcrdma_v2::draft07`).
    Ietf07,
}

impl Dialect {
    /// The other one.
    pub fn other(self) -> Dialect {
        match self {
            Dialect::Cel00 => Dialect::Ietf07,
            Dialect::Ietf07 => Dialect::Cel00,
        }
    }
}

/// Which Version Two dialects one side speaks, the preferred one first. `Copy`, so that a
/// configuration can hold it.
///
/// ```
/// use rpcrdma_v2::dialect::{Dialect, VersionTwo};
/// let both = VersionTwo::Both { preferred: Dialect::Ietf07 };
/// assert_eq!(both.dialects().collect::<Vec<_>>(), [Dialect::Ietf07, Dialect::Cel00]);
/// assert!(!VersionTwo::One(Dialect::Cel00).speaks(Dialect::Ietf07));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VersionTwo {
    /// No Version Two.
    None,
    /// One dialect.
    One(Dialect),
    /// Both dialects, `preferred` first.
    Both {
        /// The one a first message uses.
        preferred: Dialect,
    },
}

impl VersionTwo {
    /// The dialects, the preferred one first.
    pub fn dialects(self) -> impl Iterator<Item = Dialect> {
        let (first, second) = match self {
            VersionTwo::None => (None, None),
            VersionTwo::One(d) => (Some(d), None),
            VersionTwo::Both { preferred } => (Some(preferred), Some(preferred.other())),
        };
        first.into_iter().chain(second)
    }

    /// Whether dialect `d` is one of them.
    pub fn speaks(self, d: Dialect) -> bool {
        self.dialects().any(|x| x == d)
    }

    /// The preferred one (`None`: no Version Two).
    pub fn first(self) -> Option<Dialect> {
        self.dialects().next()
    }
}

/// What one side speaks: Version One, and which Version Two dialects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Speaks {
    /// Version One (RFC 8166).
    pub v1: bool,
    /// The Version Two dialects.
    pub v2: VersionTwo,
}

impl Speaks {
    /// Version One only.
    pub fn v1_only() -> Speaks {
        Speaks { v1: true, v2: VersionTwo::None }
    }

    /// Version One and one dialect of Version Two.
    pub fn one(d: Dialect) -> Speaks {
        Speaks { v1: true, v2: VersionTwo::One(d) }
    }

    /// Version One and both dialects, `preferred` first.
    pub fn both(preferred: Dialect) -> Speaks {
        Speaks { v1: true, v2: VersionTwo::Both { preferred } }
    }

    /// Whether it speaks dialect `d`.
    pub fn speaks(&self, d: Dialect) -> bool {
        self.v2.speaks(d)
    }

    /// The dialect a requester's first message uses: its preferred one (`None`: Version One).
    pub fn first(&self) -> Option<Dialect> {
        self.v2.first()
    }
}

/// The dialect of the first Version Two message a responder that speaks both receives on a
/// connection, from its fourth word (and length): `rdma_proc` 0 to 3 is -00 (RDMA_MSG,
/// RDMA_NOMSG, and the reserved RDMA_MSGP and RDMA_DONE, which -00 answers BAD_HEADER); 6 to
/// 13 is -07; 5 is -00's RDMA_OPTIONAL when a body follows the four words and -07's
/// RDMA2_GRANT when the message is the 16-byte prefix alone. `None` for 4 (an error as a first
/// message: discarded, it settles nothing), for any other value, and for a message shorter than
/// four words: the responder judges those by its preferred dialect.
///
/// ```
/// use rpcrdma_v2::dialect::{first_message_dialect, Dialect};
/// let w = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
/// assert_eq!(first_message_dialect(&w(&[7, 2, 1, 0, 0, 0, 0])), Some(Dialect::Cel00));
/// assert_eq!(first_message_dialect(&w(&[7, 2, 1, 10, 0, 0, 0, 0, 7])), Some(Dialect::Ietf07));
/// assert_eq!(first_message_dialect(&w(&[0, 2, 1, 5])), Some(Dialect::Ietf07)); // a GRANT
/// assert_eq!(first_message_dialect(&w(&[7, 2, 1, 5, 9, 0])), Some(Dialect::Cel00)); // RDMA_OPTIONAL
/// ```
pub fn first_message_dialect(bytes: &[u8]) -> Option<Dialect> {
    match Fixed::read(bytes)?.proc? {
        0..=3 => Some(Dialect::Cel00),
        5 if bytes.len() > 16 => Some(Dialect::Cel00),
        5 => Some(Dialect::Ietf07),
        6..=13 => Some(Dialect::Ietf07),
        _ => None,
    }
}

/// Where a requester goes after its first message drew an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send the call again on the same connection: in this dialect, or (`None`) in Version
    /// One. Remember the responder's answer for the next connections.
    Retry(Option<Dialect>),
    /// The error is about the call, not the version: the call fails with it, and the version
    /// stays as sent (the responder understood the message).
    CallFails,
    /// Nothing both sides speak: fail the connection, naming both sides' versions.
    NoCommonVersion,
    /// Not a refusal of the first message: not an RDMA_ERROR, or not for its XID (section
    /// 4.3.2: the answer carries "an XID that matches the client's first message").
    NotARefusal,
}

/// The error code -00 uses for a header it cannot parse (RDMA_ERR_BAD_HEADER), which a -00
/// responder answers a -07 first message with (an unknown procedure); -07's RDMA2_ERR_BAD_XDR
/// has the same value.
const BAD_HEADER: u32 = 2;
/// -07's RDMA2_ERR_INVAL_HTYPE, which a -07 responder answers a -00 first message with (an
/// `rdma_htype` 0 or 1 it does not define); -00 defines no code 4.
const INVAL_HTYPE: u32 = 4;

/// Reads `answer`, what the first message (XID `xid`, sent in dialect `sent`) drew, for a
/// requester that speaks `speaks` and has already been refused in the dialects `tried` on this
/// connection (see the [module documentation](self) and the table in docs/design.md):
/// - not an RDMA_ERROR for `xid`: [`Next::NotARefusal`];
/// - an answer in Version One (`rdma_vers` 1): go on in Version One;
/// - ERR_VERS: in Version One when its range holds 1, else no common version (section 7.1.1:
///   the requester "MUST NOT subsequently send a message that uses a version that the
///   Responder has indicated it does not support"); a range that holds 2, or no range, fails
///   the call;
/// - -00's BAD_HEADER to a -07 first message, or -07's INVAL_HTYPE to a -00 one: the responder
///   speaks the other dialect (neither answer comes from a responder of the requester's own
///   dialect to a valid first message): go on in it if the requester speaks it and has not
///   been refused in it already on this connection, else in Version One. So a responder that
///   refuses both dialects (a malformed first message to one that keeps the first message's
///   dialect, -07 section 4.3.3) ends the switching after two refusals;
/// - any other code: the call itself was refused.
///
/// With Version One not spoken either, a move to Version One is [`Next::NoCommonVersion`].
pub fn after_refusal(speaks: &Speaks, sent: Dialect, tried: &[Dialect], xid: u32, answer: &[u8]) -> Next {
    let Some(fixed) = Fixed::read(answer).filter(|f| f.xid == xid && f.is_error()) else {
        return Next::NotARefusal;
    };
    let to_v1 = if speaks.v1 { Next::Retry(None) } else { Next::NoCommonVersion };
    if fixed.vers == 1 {
        return to_v1;
    }
    // The error body in -07's union, whose ERR_VERS and codes 2 and 3 are -00's layout too.
    let Some(Ok((error, _))) = answer.get(16..).map(Rpcrdma2HdrError::decode) else { return Next::CallFails };
    let code = match error {
        Rpcrdma2HdrError::Rdma2ErrVers(range) => {
            let versions = range.rdma_vers_low..=range.rdma_vers_high;
            return if versions.contains(&2) {
                Next::CallFails
            } else if versions.contains(&1) {
                to_v1
            } else {
                Next::NoCommonVersion
            };
        }
        Rpcrdma2HdrError::Default { discriminant } => discriminant,
        _ => return Next::CallFails,
    };
    let other_dialect = match sent {
        Dialect::Ietf07 => code == BAD_HEADER,
        Dialect::Cel00 => code == INVAL_HTYPE,
    };
    if !other_dialect {
        return Next::CallFails;
    }
    let other = sent.other();
    if speaks.speaks(other) && !tried.contains(&other) {
        Next::Retry(Some(other))
    } else {
        to_v1
    }
}
