//! What a received message means to a requester: the version's own receive rules (RFC 8166
//! section 4.5, and the v2 draft section 4.2 through `rpcrdma-v2`), then the requester's:
//! a reply must answer a call in flight, in the version that call used (draft 5.3: a responder
//! "MUST send Replies with the same RPC-over-RDMA protocol version that the requester uses";
//! Linux drops one that does not, and so do we), while an RDMA_ERROR is read whatever its
//! version word says (RDMA_ERR_VERS keeps one layout for every version).

use rpcrdma_v1::direction::{classify as classify_direction, Direction, Role};
use rpcrdma_v1::header::{Detached, Fixed, Header, HeaderError, HeaderLimits};
use rpcrdma_v1::verdict::{self as v1, ErrorReply, ReceivePolicy};
use rpcrdma_v1::Version;
use rpcrdma_v2::options::{OptionalAnswer, Registry};
use rpcrdma_v2::verdict as v2;

pub(crate) mod draft07;
pub use draft07::MAX_CONTINUED_REPLY;

/// An RDMA_ERROR a responder sent: Version One's (RDMA_ERR_VERS, ERR_CHUNK, which Version Two
/// calls RDMA_ERR_BAD_HEADER) or Version Two's RDMA_ERR_INVAL_OPTION.
pub type PeerError = v2::PeerError;

/// What [`Requester::handle_receive`](crate::requester::Requester::handle_receive) made of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// The reply to call `xid`, in the call's version: reassemble it from `header`.
    Reply {
        /// The call's XID.
        xid: u32,
        /// The reply's validated header view.
        header: Header<'a>,
    },
    /// A backward-direction call from the responder (RFC 8167; required in Version Two by
    /// the draft's section 4.2): for the client's callback service.
    BackwardCall(Header<'a>),
    /// An RDMA_ERROR or a malformed reply: its effect came out as events.
    Consumed,
    /// The responder's answer to our RDMA_OPTIONAL `xid` (Version Two, draft section 3.1):
    /// that exchange is over, and the message is its answer.
    OptionAnswer {
        /// The XID of our RDMA_OPTIONAL.
        xid: u32,
    },
    /// An RDMA_OPTIONAL from the responder with an opttype no extension of ours supports:
    /// send this RDMA_ERR_INVAL_OPTION back (draft section 3.1, MUST). Only on a connection
    /// settled on Version Two.
    RefuseOption(ErrorReply),
    /// An RDMA_OPTIONAL from the responder that an extension of ours handled; send `answer`
    /// back with `xid`, if it gave one.
    OptionHandled {
        /// The message's XID.
        xid: u32,
        /// Its opttype.
        opttype: u32,
        /// The extension's answer.
        answer: Option<OptionalAnswer>,
    },
    /// The reply to call `xid` whose message is not in the bytes received: a -07 reply
    /// continued across Sends (section 4.1), assembled into `message`, a buffer of its own in
    /// Version One's shape. Reassemble the reply from it in place of the Receive's bytes.
    ReplyRewritten {
        /// The call's XID.
        xid: u32,
        /// The reply's header and RPC message.
        message: Vec<u8>,
        /// The header's view, as the rewrite was encoded.
        view: Detached,
    },
    /// A message whose effect is on the connection's state alone: a -07 RDMA2_GRANT, a
    /// CONNPROP, or a part of a continued reply kept for the rest.
    Taken,
    /// Send this RDMA2_GRANT back (-07 section 4.2.1.1): a continued reply's parts have used
    /// half the window this side last gave.
    Grant(Vec<u8>),
    /// Send this RDMA2_ERROR back (-07 section 7: a header type or version this side does
    /// not take); any call it concerns already came out as events.
    Refuse(ErrorReply),
    /// Nothing to do with it.
    Dropped(DropReason),
}

/// What a requester brings to RDMA_OPTIONAL messages on a connection settled on Version Two:
/// its extensions, and which XIDs are its own RDMA_OPTIONAL messages awaiting an answer.
pub(crate) struct Options<'r> {
    pub(crate) registry: &'r mut Registry,
    pub(crate) awaiting: &'r dyn Fn(u32) -> bool,
}

/// Why a requester dropped a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Too short, or an RDMA_ERROR that cannot be decoded (RFC 8166 section 4.5: discard).
    Undecodable,
    /// A version this requester does not speak, in a message that is not an RDMA_ERROR.
    UnknownVersion(u32),
    /// No call with this XID is in flight: a late or duplicate reply, or one to a call whose
    /// transmission has not been taken to be posted yet
    /// ([`Requester::handle_receive_for_sent`](crate::requester::Requester::handle_receive_for_sent)).
    UnknownXid(u32),
    /// A reply in another version than its call's (draft 5.3).
    WrongVersion {
        /// The reply's version.
        got: Version,
        /// The call's version.
        sent: Version,
    },
}

/// A message judged by its own version's rules.
enum Judged<'a> {
    Accept(Header<'a>),
    PeerError { xid: u32, error: PeerError },
    Malformed { xid: u32, reason: v2::Reason },
    OptionAnswer(u32),
    Option(Incoming<'a>),
    Discard(DropReason),
}

/// Judges `bytes` by their version's rules. `options` is `None` unless the connection settled
/// on Version Two: then an RDMA_OPTIONAL is dropped, as any message that answers no call (the
/// behaviour on a Version One connection, where none is expected: draft 5.3).
fn judge<'a>(bytes: &'a [u8], limits: &HeaderLimits, options: Option<Options<'_>>) -> Judged<'a> {
    let Some(fixed) = Fixed::read(bytes) else { return Judged::Discard(DropReason::Undecodable) };
    // The one dispatch on the version (`rpcrdma_v2::verdict::receive`), with every version
    // this crate speaks; what it would answer a requester never answers, it reads.
    let policy = ReceivePolicy { limits: *limits, versions: (Version::ONE, Version::TWO), ..ReceivePolicy::default() };
    let from_v1 = |verdict| match verdict {
        v1::Verdict::Accept(h) => Judged::Accept(h),
        v1::Verdict::Reply { reason, .. } => Judged::Malformed { xid: fixed.xid, reason: reason.into() },
        v1::Verdict::PeerError { xid, error } => Judged::PeerError { xid, error: PeerError::Common(error) },
        v1::Verdict::Discard(_) => Judged::Discard(DropReason::Undecodable),
    };
    // Without options: an empty registry (allocates nothing) and no XID awaited.
    let (mut none, never) = (Registry::new(), |_: u32| false);
    let (registry, awaiting, answering): (_, &dyn Fn(u32) -> bool, _) = match options {
        Some(o) => (o.registry, o.awaiting, true),
        None => (&mut none, &never, false),
    };
    match v2::receive_awaiting(bytes, &policy, registry, awaiting) {
        v2::Verdict::Accept(h) => Judged::Accept(h),
        // Draft 3.1, on a Version Two connection: the answer to ours, or a request to answer.
        v2::Verdict::Answer(m) => Judged::OptionAnswer(m.xid),
        v2::Verdict::Reply { reply, reason: v2::Reason::UnsupportedOption(_) } if answering => {
            Judged::Option(Incoming::RefuseOption(reply))
        }
        v2::Verdict::Handled { xid, opttype, answer } if answering => {
            Judged::Option(Incoming::OptionHandled { xid, opttype, answer })
        }
        v2::Verdict::PeerError { xid, error } => Judged::PeerError { xid, error },
        v2::Verdict::Reply { reason: v2::Reason::Header(HeaderError::Version { vers }), .. } => {
            Judged::Discard(DropReason::UnknownVersion(vers))
        }
        v2::Verdict::Reply { reason: v2::Reason::Header(reason), .. } => {
            Judged::Malformed { xid: fixed.xid, reason: reason.into() }
        }
        // A Version Two RDMA_NOMSG reply with bytes after it: a broken reply, which fails its
        // call with that cause (draft section 4.2) rather than vanishing.
        v2::Verdict::Reply { reason: reason @ v2::Reason::PayloadAfterNoMsg(_), .. } => {
            Judged::Malformed { xid: fixed.xid, reason }
        }
        // An RDMA_OPTIONAL: not a reply to anything we sent.
        v2::Verdict::Reply { .. } | v2::Verdict::Handled { .. } => Judged::Discard(DropReason::Undecodable),
        v2::Verdict::Version1(v) => from_v1(v),
        v2::Verdict::Discard(_) => Judged::Discard(DropReason::Undecodable),
    }
}

/// The header view of a received message that the requester (or a client's [`Connection`]) already
/// accepted as a reply or a backward call, parsed again from its bytes: for a tool or a test
/// that holds only the bytes (the crate's own drivers keep the view the core judged,
/// [`Connection::take_judged_reply`](crate::connection::Connection::take_judged_reply), and parse nothing twice). `None` for anything the requester would not accept. A
/// draft-ietf-07 reply (RDMA2_REPLY_INLINE or RDMA2_REPLY_EXTERNAL, whole) gives the same Version
/// One view its own lists make.
///
/// [`Connection`]: crate::connection::Connection
///
/// ```
/// use negotiate::reply::reply_header;
/// use rpcrdma_v1::header::HeaderLimits;
/// // A Version One RDMA_MSG reply, no chunks, then the RPC reply with the same XID.
/// let reply: Vec<u8> = [7u32, 1, 32, 0, 0, 0, 0, 7, 1].iter().flat_map(|w| w.to_be_bytes()).collect();
/// let header = reply_header(&reply, &HeaderLimits::default()).unwrap();
/// assert_eq!((header.xid(), header.payload().len()), (7, 8));
/// assert!(reply_header(&reply[..12], &HeaderLimits::default()).is_none());
/// ```
pub fn reply_header<'a>(bytes: &'a [u8], limits: &HeaderLimits) -> Option<Header<'a>> {
    // A -07 reply names its dialect in its fourth word (docs/design.md, "Version Two's two
    // dialects"): its view is made from its own header's lists.
    if rpcrdma_v2::dialect::first_message_dialect(bytes) == Some(rpcrdma_v2::dialect::Dialect::Ietf07) {
        return draft07::reply_view(bytes, limits);
    }
    match judge(bytes, limits, None) {
        Judged::Accept(h) => Some(h),
        _ => None,
    }
}

/// What the RDMA_ERROR `bytes` answering a first message sent in dialect `sent` reports, read
/// by the rules of the version and dialect it is written in: Version One's or -00's, or -07's
/// when it answers a -07 message in version 2. A code the reading does not define (-07's
/// RDMA2_ERR_INVAL_HTYPE in -00's reading, say) is kept as the -07 code it is.
pub(crate) fn refusal_error(bytes: &[u8], sent: rpcrdma_v2::dialect::Dialect) -> PeerError {
    use rpcrdma_v1::rt::Xdr;
    use rpcrdma_v2::draft07::xdr::Rpcrdma2HdrError;
    let code = bytes.get(16..20).map_or(0, |w| u32::from_be_bytes(w.try_into().expect("four bytes")));
    let as_sent = Rpcrdma2HdrError::Default { discriminant: code };
    let vers = Fixed::read(bytes).map_or(0, |f| f.vers);
    if vers == Version::TWO.wire() && sent == rpcrdma_v2::dialect::Dialect::Ietf07 {
        return match bytes.get(16..).map(Rpcrdma2HdrError::decode) {
            Some(Ok((e, _))) => PeerError::Draft07(e),
            _ => PeerError::Draft07(as_sent),
        };
    }
    match judge(bytes, &HeaderLimits::default(), None) {
        Judged::PeerError { error, .. } => error,
        _ => PeerError::Draft07(as_sent),
    }
}

/// The part of a message that concerns a call in flight.
pub(crate) struct Head<'a> {
    pub(crate) xid: u32,
    pub(crate) credit: u32,
    pub(crate) outcome: Outcome<'a>,
}

pub(crate) enum Outcome<'a> {
    Reply(Header<'a>),
    Vers {
        low: u32,
        high: u32,
    },
    Error(PeerError),
    Malformed(v2::Reason),
    /// A broken -07 reply the responder is to hear of: fail the call (and the one whose
    /// continued reply it abandoned, if another); the RDMA2_ERROR waits in the connection's
    /// -07 state for room in the responder's window, as every answer of this side's does.
    MalformedAnswered(v2::Reason, Option<u32>),
    /// A -07 continued reply, assembled in a buffer of its own, with its header's view.
    Rewritten(Vec<u8>, Detached),
    /// The answer to our RDMA_OPTIONAL.
    OptionAnswer,
}

pub(crate) enum Classified<'a> {
    /// Nothing for a call in flight.
    Done(Incoming<'a>),
    Head(Head<'a>),
}

/// Judges `bytes` and matches them to a call in flight, whose version `flight_version` gives
/// (an RDMA_OPTIONAL of ours in flight is such a call: its answer, or the RDMA_ERROR naming
/// its XID, completes it).
pub(crate) fn classify<'a>(
    bytes: &'a [u8],
    limits: &HeaderLimits,
    options: Option<Options<'_>>,
    flight_version: impl Fn(u32) -> Option<Version>,
) -> Classified<'a> {
    let fixed = Fixed::read(bytes);
    let credit = fixed.and_then(|f| f.credit).unwrap_or(0);
    let (xid, outcome) = match judge(bytes, limits, options) {
        Judged::Discard(why) => return Classified::Done(Incoming::Dropped(why)),
        Judged::Option(incoming) => return Classified::Done(incoming),
        Judged::OptionAnswer(xid) => (xid, Outcome::OptionAnswer),
        Judged::Accept(h) if classify_direction(&h, Role::Client) == Some(Direction::BackwardCall) => {
            return Classified::Done(Incoming::BackwardCall(h));
        }
        Judged::Accept(h) => {
            let Some(sent) = flight_version(h.xid()) else {
                return Classified::Done(Incoming::Dropped(DropReason::UnknownXid(h.xid())));
            };
            if h.version() != sent {
                return Classified::Done(Incoming::Dropped(DropReason::WrongVersion { got: h.version(), sent }));
            }
            (h.xid(), Outcome::Reply(h))
        }
        Judged::PeerError { xid, error: PeerError::Common(v1::PeerError::Vers { low, high, .. }) } => {
            (xid, Outcome::Vers { low, high })
        }
        Judged::PeerError { xid, error } => (xid, Outcome::Error(error)),
        Judged::Malformed { xid, reason } => (xid, Outcome::Malformed(reason)),
    };
    if flight_version(xid).is_none() {
        return Classified::Done(Incoming::Dropped(DropReason::UnknownXid(xid)));
    }
    Classified::Head(Head { xid, credit, outcome })
}
