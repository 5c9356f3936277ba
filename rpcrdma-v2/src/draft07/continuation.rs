//! -07 message continuation (draft-ietf-nfsv4-rpcrdma-version-two-07 sections 4.1, 6.3.3,
//! 6.3.4, 6.3.6, 6.3.9 and 7.1.4): an RPC message longer than one Send goes as
//! RDMA2_CALL_MIDDLE (or _REPLY_MIDDLE) parts, each saying how many bytes remain after it,
//! and a final RDMA2_CALL_INLINE (or _REPLY_INLINE) that carries the chunk lists; the
//! transport properties may likewise go as CONNPROP_MIDDLE messages and a CONNPROP_FINAL.
//! Sans-I/O: [`Reassembly::receive`] takes each validated [`Header`] as it arrives, and
//! [`split`] says where a sender cuts.
//!
//! The rules a receiver applies, each answered RDMA2_ERR_INVAL_CONT with the offending
//! message's XID, the message dropped, and every later message of that XID dropped silently
//! until its sequence ends (7.1.4):
//! - after a CALL_MIDDLE only a CALL_MIDDLE or CALL_INLINE of the same XID may come, after a
//!   REPLY_MIDDLE only a REPLY_MIDDLE or REPLY_INLINE (6.3.6, 6.3.9; 4.1: payload streams of
//!   two messages MUST NOT interleave);
//! - each part's length plus the bytes it says remain equals what the part before it said
//!   remained, and the final part brings exactly what remained;
//! - after a CONNPROP_MIDDLE only a CONNPROP_MIDDLE or CONNPROP_FINAL (6.3.3); no CONNPROP
//!   after a CONNPROP_FINAL (6.3.4).
//!
//! Two readings: an RDMA2_ERROR or an RDMA2_GRANT in the middle of a sequence is taken as it
//! is, not refused as breaking it. Neither carries a payload stream (so 4.1's rule against
//! interleaving does not touch them); section 7 never answers an error with another; and
//! section 4.2.1.1 has every receiver "always" able to take an asynchronous credit update,
//! which a peer sending a long message may need to send meanwhile.
//!
//! What a peer can make this side hold is bounded by [`Reassembly::new`]'s `max_message_len`:
//! a sequence whose bytes so far and bytes said to remain exceed it is refused
//! (RDMA2_ERR_SYSTEM, section 7.4.1), and memory is taken only as parts arrive, never for a
//! length a header claims.
//!
//! ```
//! use rpcrdma_v2::draft07::continuation::{Reassembly, Step};
//! use rpcrdma_v2::draft07::header::Header;
//! use rpcrdma_v2::HeaderLimits;
//! let w = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
//! // A 12-byte RPC call in two Sends: CALL_MIDDLE with 4 bytes remaining after its 8, then
//! // CALL_INLINE with the last 4.
//! let middle = w(&[7, 2, 32, 9, 4, 7, 0]);
//! let last = w(&[7, 2, 32, 10, 0, 0, 0, 0, 2]);
//! let limits = HeaderLimits::default();
//! let mut r = Reassembly::new(1 << 20);
//! assert!(matches!(r.receive(Header::parse(&middle, &limits).unwrap()), Step::Held));
//! let Step::Whole { message, .. } = r.receive(Header::parse(&last, &limits).unwrap()) else { panic!() };
//! assert_eq!(&message[..], &w(&[7, 0, 2])[..]);
//! ```

use std::borrow::Cow;
use std::ops::Range;

use super::header::{Header, HeaderType};
use super::xdr::{Rpcrdma2HdrError, RDMA2_ERR_INVAL_CONT, RDMA2_ERR_SYSTEM};

/// What [`Reassembly::receive`] made of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<'a> {
    /// A whole RPC message: one INLINE's payload borrowed from its Receive, or the parts of a
    /// sequence assembled. `header` is the final INLINE's, with the chunk lists.
    Whole {
        /// The final (or only) header.
        header: Header<'a>,
        /// The RPC message.
        message: Cow<'a, [u8]>,
    },
    /// A part kept; the rest of its message is to come.
    Held,
    /// A message with no payload stream to assemble (RDMA2_ERROR, GRANT, CONNPROP_*,
    /// CALL_EXTERNAL, REPLY_EXTERNAL): the caller acts on its header.
    Other(Header<'a>),
    /// Refused: answer RDMA2_ERROR with `answer`, XID `xid` (section 7); the message is
    /// dropped, and so are later messages of that XID until its sequence ends. A sequence in
    /// progress that the message broke is abandoned too: `abandoned` is its XID.
    Refused {
        /// The offending message's XID.
        xid: u32,
        /// The error body to answer with.
        answer: Rpcrdma2HdrError,
        /// Why.
        reason: ContinuationError,
        /// The XID of a sequence in progress given up because of it.
        abandoned: Option<u32>,
    },
    /// Dropped silently: a message of a sequence already refused (section 7.1.4).
    Dropped {
        /// Its XID.
        xid: u32,
    },
}

/// Which continuation rule a message broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ContinuationError {
    /// A message other than the sequence's next part came while an RPC message was being
    /// continued (sections 4.1, 6.3.6, 6.3.9).
    #[error(
        "{got:?} (xid {xid}) while a {held:?} sequence of xid {held_xid} was being continued (sections 6.3.6, 6.3.9)"
    )]
    Interleaved {
        /// The message's type.
        got: HeaderType,
        /// Its XID.
        xid: u32,
        /// The type of the sequence's last part.
        held: HeaderType,
        /// The sequence's XID.
        held_xid: u32,
    },
    /// A part whose length and remaining count do not add up to what the part before it said
    /// remained.
    #[error("a part of {len} bytes with {remaining} remaining after it, where {expected} remained")]
    Inconsistent {
        /// The part's payload length.
        len: usize,
        /// What it says remains after it (0 for the final part).
        remaining: u32,
        /// What the previous part said remained.
        expected: u32,
    },
    /// A MIDDLE part saying fewer than 4 bytes remain: the final part carries at least the
    /// message's next word (`rdma_rpc_first_word`, sections 6.3.7, 6.3.10), so such a sequence
    /// can never end.
    #[error("a MIDDLE part with {0} bytes remaining: a final part carries at least 4")]
    ShortRemainder(u32),
    /// A sequence longer than this side holds.
    #[error("a continued message of at least {len} bytes: more than the {limit} held at most")]
    TooLong {
        /// Its bytes so far plus those said to remain.
        len: u64,
        /// The configured limit.
        limit: usize,
    },
    /// A message other than a CONNPROP after a CONNPROP_MIDDLE (section 6.3.3).
    #[error("{0:?} after RDMA2_CONNPROP_MIDDLE (section 6.3.3)")]
    AfterConnPropMiddle(HeaderType),
    /// A CONNPROP after the CONNPROP_FINAL (section 6.3.4).
    #[error("{0:?} after RDMA2_CONNPROP_FINAL (section 6.3.4)")]
    AfterConnPropFinal(HeaderType),
}

impl ContinuationError {
    /// The error body section 7 answers it with: RDMA2_ERR_INVAL_CONT (7.1.4), or
    /// RDMA2_ERR_SYSTEM for this side's own length limit (7.4.1).
    pub fn answer(&self) -> Rpcrdma2HdrError {
        let discriminant = match self {
            ContinuationError::TooLong { .. } => RDMA2_ERR_SYSTEM,
            _ => RDMA2_ERR_INVAL_CONT,
        };
        Rpcrdma2HdrError::Default { discriminant }
    }
}

/// How many refused sequences' XIDs a [`Reassembly`] remembers.
pub const DISCARDING: usize = 4;

/// A sequence of MIDDLE parts being assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Assembling {
    xid: u32,
    /// The last part's type: CALL_MIDDLE or REPLY_MIDDLE.
    kind: HeaderType,
    held: Vec<u8>,
    /// What the last part said remains.
    remaining: u32,
}

/// Where the peer's CONNPROP messages stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnProps {
    None,
    Middle,
    Final,
}

/// Whether `htype` is a MIDDLE part, whose sequence goes on after it.
fn is_middle(htype: HeaderType) -> bool {
    matches!(htype, HeaderType::CallMiddle | HeaderType::ReplyMiddle)
}

/// The receive side of one connection's continuation (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassembly {
    max_message_len: usize,
    assembling: Option<Assembling>,
    /// Refused sequences' XIDs, whose later parts are dropped until their final part; the
    /// most recent [`DISCARDING`] (a peer breaking more sequences at once than that is dropped
    /// part by part anyway: each stray part breaks a rule of its own).
    discarding: Vec<u32>,
    props: ConnProps,
}

impl Reassembly {
    /// A connection's reassembly, holding at most `max_message_len` bytes of a continued
    /// message.
    pub fn new(max_message_len: usize) -> Reassembly {
        Reassembly { max_message_len, assembling: None, discarding: Vec::new(), props: ConnProps::None }
    }

    /// The bytes held for a sequence in progress.
    pub fn held(&self) -> usize {
        self.assembling.as_ref().map_or(0, |a| a.held.len())
    }

    /// Takes the next received header (validated by [`Header::parse`]).
    ///
    /// ```
    /// use rpcrdma_v2::draft07::continuation::{ContinuationError, Reassembly, Step};
    /// use rpcrdma_v2::draft07::header::Header;
    /// use rpcrdma_v2::HeaderLimits;
    /// let w = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
    /// let mut r = Reassembly::new(1 << 20);
    /// let limits = HeaderLimits::default();
    /// // CALL_MIDDLE, xid 7, 4 bytes to come; then a CALL_INLINE of xid 8 breaks in.
    /// let (first, other) = (w(&[7, 2, 32, 9, 4, 7, 0]), w(&[8, 2, 32, 10, 0, 0, 0, 0, 8]));
    /// assert_eq!(r.receive(Header::parse(&first, &limits).unwrap()), Step::Held);
    /// let Step::Refused { xid, reason, abandoned, .. } = r.receive(Header::parse(&other, &limits).unwrap()) else { panic!() };
    /// assert_eq!((xid, abandoned), (8, Some(7)));
    /// assert!(matches!(reason, ContinuationError::Interleaved { .. }));
    /// ```
    pub fn receive<'a>(&mut self, header: Header<'a>) -> Step<'a> {
        let (xid, htype) = (header.xid(), header.header_type());
        if matches!(htype, HeaderType::Error | HeaderType::Grant) {
            return Step::Other(header);
        }
        if let Some(i) = self.discarding.iter().position(|&d| d == xid) {
            if htype.is_call() || htype.is_reply() {
                if !is_middle(htype) {
                    // Its final part: the sequence is over.
                    self.discarding.remove(i);
                }
                return Step::Dropped { xid };
            }
        }
        // While a message is being continued only its next part may come (anything else,
        // a CONNPROP included, breaks the sequence); otherwise the CONNPROP rules, then a
        // message of its own.
        if let Some(a) = self.assembling.take() {
            return self.next_part(a, header);
        }
        if let Some(step) = self.connprop_rule(&header) {
            return step;
        }
        self.first_part(header)
    }

    /// The CONNPROP rules (6.3.3, 6.3.4); `None` when the message is not theirs to judge.
    fn connprop_rule<'a>(&mut self, header: &Header<'a>) -> Option<Step<'a>> {
        let htype = header.header_type();
        let is_connprop = matches!(htype, HeaderType::ConnPropMiddle | HeaderType::ConnPropFinal);
        let broken = match self.props {
            ConnProps::Middle if !is_connprop => Some(ContinuationError::AfterConnPropMiddle(htype)),
            ConnProps::Final if is_connprop => Some(ContinuationError::AfterConnPropFinal(htype)),
            _ => None,
        };
        if let Some(reason) = broken {
            // A CONNPROP sequence broken off is over: its properties are not applied.
            if self.props == ConnProps::Middle {
                self.props = ConnProps::None;
            }
            return Some(self.refuse(header.xid(), false, reason));
        }
        match htype {
            HeaderType::ConnPropMiddle => self.props = ConnProps::Middle,
            HeaderType::ConnPropFinal => self.props = ConnProps::Final,
            _ => return None,
        }
        Some(Step::Other(*header))
    }

    fn first_part<'a>(&mut self, header: Header<'a>) -> Step<'a> {
        let payload = header.payload();
        match header.header_type() {
            kind @ (HeaderType::CallMiddle | HeaderType::ReplyMiddle) => {
                let remaining = header.remaining().unwrap_or(0);
                if remaining < 4 {
                    return self.refuse(header.xid(), true, ContinuationError::ShortRemainder(remaining));
                }
                if let Some(refused) = self.over_limit(header.xid(), true, payload.len(), remaining) {
                    return refused;
                }
                let held = payload.to_vec();
                self.assembling = Some(Assembling { xid: header.xid(), kind, held, remaining });
                Step::Held
            }
            HeaderType::CallInline | HeaderType::ReplyInline => Step::Whole { header, message: Cow::Borrowed(payload) },
            _ => Step::Other(header),
        }
    }

    fn next_part<'a>(&mut self, mut a: Assembling, header: Header<'a>) -> Step<'a> {
        let (xid, htype, payload) = (header.xid(), header.header_type(), header.payload());
        let (middle, last) = match a.kind {
            HeaderType::CallMiddle => (HeaderType::CallMiddle, HeaderType::CallInline),
            _ => (HeaderType::ReplyMiddle, HeaderType::ReplyInline),
        };
        if xid != a.xid || (htype != middle && htype != last) {
            let reason = ContinuationError::Interleaved { got: htype, xid, held: a.kind, held_xid: a.xid };
            // The sequence in progress cannot be completed: its later parts are dropped too
            // (whatever the offender's XID), so that none is taken for the start of a new
            // message. `abandoned` names it when it is another XID than the one answered.
            self.discard(a.xid);
            let abandoned = (a.xid != xid).then_some(a.xid);
            let mut step = self.refuse(xid, is_middle(htype), reason);
            if let Step::Refused { abandoned: slot, .. } = &mut step {
                *slot = abandoned;
            }
            return step;
        }
        let remaining = if htype == middle { header.remaining().unwrap_or(0) } else { 0 };
        if htype == middle && remaining < 4 {
            return self.refuse(xid, true, ContinuationError::ShortRemainder(remaining));
        }
        let brings = payload.len() as u64 + u64::from(remaining);
        if brings != u64::from(a.remaining) {
            let reason = ContinuationError::Inconsistent { len: payload.len(), remaining, expected: a.remaining };
            return self.refuse(xid, htype == middle, reason);
        }
        if let Some(refused) = self.over_limit(xid, htype == middle, a.held.len() + payload.len(), remaining) {
            return refused;
        }
        // Grown exactly: what is held is what came, within the limit, never twice that.
        a.held.reserve_exact(payload.len());
        a.held.extend_from_slice(payload);
        if htype == middle {
            a.remaining = remaining;
            self.assembling = Some(a);
            return Step::Held;
        }
        Step::Whole { header, message: Cow::Owned(a.held) }
    }

    /// Refuses a sequence that would hold more than the limit: its bytes so far, `len`, and
    /// those it says remain.
    fn over_limit<'a>(&mut self, xid: u32, continues: bool, len: usize, remaining: u32) -> Option<Step<'a>> {
        let total = len as u64 + u64::from(remaining);
        let limit = self.max_message_len;
        (total > limit as u64).then(|| self.refuse(xid, continues, ContinuationError::TooLong { len: total, limit }))
    }

    fn discard(&mut self, xid: u32) {
        if !self.discarding.contains(&xid) {
            if self.discarding.len() == DISCARDING {
                self.discarding.remove(0);
            }
            self.discarding.push(xid);
        }
    }

    /// Refuses a message; `continues` when it is a MIDDLE part, whose sequence's later parts
    /// are then dropped (a refused final or only part ends its sequence: a retransmission of
    /// its XID is a new message).
    fn refuse<'a>(&mut self, xid: u32, continues: bool, reason: ContinuationError) -> Step<'a> {
        if continues {
            self.discard(xid);
        }
        Step::Refused { xid, answer: reason.answer(), reason, abandoned: None }
    }
}

/// One Send of a message cut by [`split`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The bytes of the RPC message this Send carries.
    pub bytes: Range<usize>,
    /// For a MIDDLE part, the bytes that remain after it (its `rdma_remaining`); `None` for
    /// the final INLINE part.
    pub remaining: Option<u32>,
}

/// Where a sender cuts an RPC message of `len` bytes (section 4.1: "at any convenient
/// boundary", in XDR stream order): MIDDLE parts of `middle_room` bytes each (what a Send
/// holds after a MIDDLE header), then one INLINE part of at most `inline_room` bytes (what a
/// Send holds after the INLINE header with its chunk lists). One INLINE part when the message
/// fits it. `None` when no cut works: a message that does not fit one INLINE with no room in
/// a MIDDLE, or a length `rdma_remaining` cannot say.
///
/// ```
/// use rpcrdma_v2::draft07::continuation::split;
/// let parts = split(10_000, 4076, 4060).unwrap();
/// let cuts: Vec<_> = parts.iter().map(|p| (p.bytes.clone(), p.remaining)).collect();
/// assert_eq!(cuts, [(0..4076, Some(5924)), (4076..8152, Some(1848)), (8152..10_000, None)]);
/// assert_eq!(split(100, 0, 4060).unwrap().len(), 1); // fits one INLINE
/// assert_eq!(split(5000, 0, 4060), None);
/// ```
pub fn split(len: usize, middle_room: usize, inline_room: usize) -> Option<Vec<Part>> {
    if len <= inline_room {
        return Some(vec![Part { bytes: 0..len, remaining: None }]);
    }
    // Every part carries at least its `rdma_rpc_first_word` (the bodies of 6.3.6 to 6.3.10
    // end with it), the final one included.
    if u32::try_from(len).is_err() || middle_room < 4 {
        return None;
    }
    let min_last = len.min(4);
    // Grown as parts are cut: the count is the caller's lengths' to decide, not reserved.
    let mut parts = Vec::new();
    let mut at = 0;
    while len - at > inline_room {
        let take = middle_room.min(len - at - min_last);
        if take < 4 {
            return None;
        }
        at += take;
        parts.push(Part { bytes: at - take..at, remaining: Some((len - at) as u32) });
    }
    parts.push(Part { bytes: at..len, remaining: None });
    Some(parts)
}
