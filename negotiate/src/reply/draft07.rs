//! What a received message means to a requester on a connection that speaks
//! draft-ietf-nfsv4-rpcrdma-version-two-07 (its probe was sent in -07, or the connection
//! settled on it): the draft's own verdict (`rpcrdma_v2::draft07::verdict`), the credit total
//! every header carries (section 4.2.1), continuation of replies (4.1), then what the header
//! type asks. A reply becomes the same Version One header view the rest of the requester
//! reads (section 8.4 takes the chunk lists from Version One word for word), so nothing after
//! this module knows which dialect carried it.

use std::borrow::Cow;
use std::collections::VecDeque;

use rpcrdma_v1::header::{Fixed, Header, HeaderError as HeaderError1, HeaderLimits, MessageKind};
use rpcrdma_v1::verdict::ErrorReply;
use rpcrdma_v1::Version;
use rpcrdma_v2::draft07::continuation::{Reassembly, Step};
use rpcrdma_v2::draft07::credits::CreditWindow;
use rpcrdma_v2::draft07::extension::ExtensionMessage;
use rpcrdma_v2::draft07::header::{Header as Header07, HeaderError, HeaderType};
use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};
use rpcrdma_v2::draft07::verdict::Discard;
use rpcrdma_v2::draft07::verdict::{self as verdict07, error_reply, Verdict};
use rpcrdma_v2::draft07::xdr::{Rpcrdma2ErrVers, Rpcrdma2HdrError, RDMA2_ERR_BAD_XDR, RDMA2_ERR_INVAL_HTYPE};

use crate::extension07::ExtensionOutcome;
use rpcrdma_v2::verdict::Reason;

use super::{Classified, DropReason, Head, Incoming, Outcome, PeerError};

/// The most a requester holds of one continued reply (section 4.1) before it refuses the
/// sequence: the same bound a responder puts on a continued call by default
/// ([`ResponderConfig::max_continued`](crate::responder::ResponderConfig::max_continued)).
pub const MAX_CONTINUED_REPLY: usize = 64 << 10;

/// A -07 connection's state on the requester's side: the credit totals both ways and the
/// reply being reassembled.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) credits: CreditWindow,
    reassembly: Reassembly,
    /// The responder's properties stated so far in CONNPROP messages (section 5.1).
    pending: Properties,
    /// The responder's properties, once its RDMA2_CONNPROP_FINAL arrived (section 6.3.4).
    theirs: Option<Properties>,
    /// This side's RDMA2_CONNPROP_FINAL, marshaled, waiting for room in the window
    /// ([`State::connprop_due`]).
    owed: Option<Vec<u8>>,
    /// The reverse direction this side offers the responder (section 4.6, stated as
    /// RDMA2_PROPID_BRS in its CONNPROP_FINAL, 5.2.5): `Simple` with a backchannel handler,
    /// else `None`.
    reverse: ReverseDirection,
    /// This side's answers to the responder's messages (replies to its reverse-direction
    /// calls, an extension's answers), marshaled, each waiting for room in the window
    /// ([`State::answer_due`]).
    answers: VecDeque<Vec<u8>>,
}

/// The most answers (replies to reverse-direction calls, an extension's answers) a requester
/// holds while the responder's window is shut: as many as the messages a responder may send
/// it at once, which its advertised credits bound (a responder sending more is beyond them,
/// section 4.2.1).
pub(crate) const ANSWERS_HELD: usize = 64;

impl State {
    /// A connection just established, on which this side advertises `credits` (it keeps one
    /// Receive more posted, section 4.2.1.1: the client posts its backchannel's too), its
    /// credit counters starting at `counters_from` (0 but in tests:
    /// `RequesterConfig::draft07_counters_from`).
    pub(crate) fn new(credits: u32, counters_from: u32) -> State {
        let advertised = credits.clamp(1, rpcrdma_v2::draft07::credits::MAX_CREDITS);
        State {
            credits: CreditWindow::starting_at(advertised, counters_from).expect("clamped to the limit"),
            reassembly: Reassembly::new(MAX_CONTINUED_REPLY),
            pending: Properties::default(),
            theirs: None,
            owed: None,
            reverse: ReverseDirection::None,
            answers: VecDeque::new(),
        }
    }

    /// The size of the responder's Receives once it stated it (RDMA2_PROPID_RBSIZ, section
    /// 5.2.2), bounded as [`crate::thresholds::draft07_receive_threshold`] says: the call
    /// inline threshold.
    pub(crate) fn peer_receive_size(&self) -> Option<u32> {
        self.theirs.as_ref().map(|p| crate::thresholds::draft07_receive_threshold(p.receive_buffer_size))
    }

    /// The responder's properties, once its RDMA2_CONNPROP_FINAL came.
    pub(crate) fn peer_properties(&self) -> Option<&Properties> {
        self.theirs.as_ref()
    }

    /// How this side's chunks may be cut for the responder (sections 5.2.3 and 5.2.4): as it
    /// stated, or Table 1's defaults until it has ("connection peers MUST assume both" the
    /// defaults until properties are exchanged, 4.2.2).
    pub(crate) fn peer_segments(&self) -> crate::thresholds::SegmentLimits {
        crate::thresholds::SegmentLimits::of(self.theirs.as_ref().unwrap_or(&Properties::default()))
    }

    /// Owes the responder this side's RDMA2_CONNPROP_FINAL, stating the size of its Receives
    /// (`receive_size`), its host authentication material, the reverse direction it offers
    /// and its extensions' properties (`others`), within the responder's Receives
    /// (`threshold`, at least 1024, which [`crate::host_auth::MAX_HOST_AUTH`] keeps the base's
    /// within; an extension's properties beside the longest host authentication may not fit,
    /// and then none is sent): sent as soon as the window has room ([`State::connprop_due`]).
    pub(crate) fn owe_connprop(
        &mut self,
        receive_size: u32,
        host_auth: Option<&crate::host_auth::HostAuth>,
        reverse: ReverseDirection,
        others: Vec<(u32, Vec<u8>)>,
        threshold: usize,
    ) {
        let host_auth = host_auth.map(|a| a.as_bytes().to_vec());
        self.reverse = reverse;
        let ours = Properties {
            receive_buffer_size: receive_size,
            host_auth,
            reverse_direction: reverse,
            others,
            ..Properties::default()
        };
        self.owed = ours.connprop_messages(0, 0, threshold).filter(|m| m.len() == 1).map(|mut m| m.remove(0));
        if self.owed.is_none() {
            log::warn!("-07: this side's properties do not fit one CONNPROP_FINAL of {threshold} bytes; none sent");
        }
    }

    /// The RDMA2_CONNPROP_FINAL owed, once the window has room for it (section 4.2.1),
    /// counted as the Send it is and carrying the running total.
    pub(crate) fn connprop_due(&mut self) -> Option<Vec<u8>> {
        if self.owed.is_none() || !self.credits.may_send() {
            return None;
        }
        let mut m = self.owed.take()?;
        rpcrdma_v1::header::set_credit(&mut m, self.credits.send());
        Some(m)
    }

    /// Holds `reply`, this side's answer to the responder's message (a reverse-direction
    /// call's RDMA2_REPLY_INLINE or RDMA2_ERROR, an extension's answer), until the window has
    /// room for it ([`State::answer_due`]); false, dropping it, when [`ANSWERS_HELD`] are
    /// held already.
    pub(crate) fn hold_answer(&mut self, reply: Vec<u8>) -> bool {
        if self.answers.len() >= ANSWERS_HELD {
            return false;
        }
        self.answers.push_back(reply);
        true
    }

    /// The oldest answer held, once the window has room for it
    /// (section 4.2.1: a reply is a Send like any other), counted as the Send it is and
    /// carrying the running total.
    pub(crate) fn answer_due(&mut self) -> Option<Vec<u8>> {
        if self.answers.is_empty() || !self.credits.may_send() {
            return None;
        }
        let mut m = self.answers.pop_front()?;
        rpcrdma_v1::header::set_credit(&mut m, self.credits.send());
        Some(m)
    }

    /// Moves into `out` what this side owes the responder of its own and the window has room
    /// for now, in order: its RDMA2_CONNPROP_FINAL ([`State::connprop_due`]), then its held
    /// answers ([`State::answer_due`]).
    pub(crate) fn owed_due(&mut self, out: &mut VecDeque<Vec<u8>>) {
        out.extend(self.connprop_due());
        while let Some(m) = self.answer_due() {
            out.push_back(m);
        }
    }

    /// An RDMA2_GRANT refreshing the responder's window, when one is due (more than half of
    /// the window this side last gave is used, and a larger one is there to give) and may go
    /// (section 4.2.1.1): counted as the Send it is. For a requester with replies still owed,
    /// whose calls, which would carry a higher total, may all be waiting for those replies.
    pub(crate) fn grant_if_due(&mut self) -> Option<Vec<u8>> {
        self.credits.take_grant().map(|total| rpcrdma_v2::draft07::marshal::grant_message(total).to_vec())
    }

    /// A CONNPROP from the responder: its properties added to those pending, or none of them
    /// when one does not decode (RDMA2_ERR_BAD_PROPVAL goes back, section 5.1); a FINAL's
    /// make the responder's properties.
    fn take_properties(&mut self, header: &Header07<'_>) -> Incoming<'static> {
        let set = header.properties().expect("a CONNPROP header carries a property set");
        match self.pending.apply(&set) {
            Ok(p) => self.pending = p,
            Err(bad) => {
                log::warn!("-07 CONNPROP {:#010x} from the responder: {bad}", header.xid());
                return self.refuse_later(header.xid(), bad.answer());
            }
        }
        if header.header_type() == HeaderType::ConnPropFinal {
            let theirs = std::mem::take(&mut self.pending);
            log::info!("-07 connection: the responder states {theirs:?}");
            self.theirs = Some(theirs);
        }
        Incoming::Taken
    }

    /// An RDMA2_ERROR with `body` for message `xid`, held with this side's other answers
    /// until the window has room for it ([`State::answer_due`], section 4.2.1: an error is a
    /// Send like any other), and counted then: every refusal this side sends goes this way.
    fn refuse_later(&mut self, xid: u32, body: Rpcrdma2HdrError) -> Incoming<'static> {
        self.hold_refusal(error_reply(xid, 0, &body))
    }

    /// [`State::refuse_later`] for an RDMA2_ERROR already made (its `rdma_credit` is set
    /// when it goes). Dropped, with a log, when too many answers wait.
    fn hold_refusal(&mut self, refusal: ErrorReply) -> Incoming<'static> {
        let xid = refusal.xid();
        if !self.hold_answer(refusal.as_bytes().to_vec()) {
            log::warn!("-07: too many answers wait for the window; the RDMA2_ERROR for {xid:#010x} is dropped");
        }
        Incoming::Taken
    }
}

/// Judges `bytes`, a -07 message, for a requester with state `st` that speaks versions
/// `supported`, and matches it to a call in flight, whose version `flight_version` gives.
pub(crate) fn classify<'a>(
    bytes: &'a [u8],
    limits: &HeaderLimits,
    supported: (Version, Version),
    st: &mut State,
    ext: Extensions<'_>,
    flight_version: impl Fn(u32) -> Option<Version>,
) -> Classified<'a> {
    let credit = Fixed::read(bytes).and_then(|f| f.credit).unwrap_or(0);
    let head = |xid: u32, outcome: Outcome<'a>| match flight_version(xid) {
        Some(_) => Classified::Head(Head { xid, credit, outcome }),
        None => Classified::Done(Incoming::Dropped(DropReason::UnknownXid(xid))),
    };
    // Appendix B.2: a header type the base does not define: the answer to our extension
    // message, or one an extension of ours takes (never between a continued reply's parts,
    // which the base's rules refuse).
    if let Some(m) = ExtensionMessage::parse(bytes).filter(|_| st.reassembly.held() == 0) {
        if (ext.awaiting)(m.xid) {
            take_total(st, m.credit);
            return head(m.xid, Outcome::OptionAnswer);
        }
        if let Some(outcome) = ext.registry.handle(&m) {
            take_total(st, m.credit);
            return Classified::Done(st.extension_answer(&m, outcome));
        }
    }
    let policy = verdict07::Policy {
        limits: *limits,
        supported: Rpcrdma2ErrVers { rdma_vers_low: supported.0.wire(), rdma_vers_high: supported.1.wire() },
        credit: st.credits.credit_field(),
    };
    let header = match verdict07::receive(bytes, &policy) {
        Verdict::Accept(h) => h,
        Verdict::PeerError { xid, error } => {
            take_total(st, credit);
            let outcome = match error {
                Rpcrdma2HdrError::Rdma2ErrVers(r) => Outcome::Vers { low: r.rdma_vers_low, high: r.rdma_vers_high },
                e => Outcome::Error(PeerError::Draft07(e)),
            };
            return head(xid, outcome);
        }
        Verdict::Reply { reply, reason } => {
            st.credits.note_received();
            log::warn!("a -07 message {:#010x} refused: {reason}", reply.xid());
            return refused(st, reply, &reason, head);
        }
        // Appendix B.4: an error code the base does not define, naming our extension message:
        // an extension's own, which ends that exchange.
        Verdict::Discard(Discard::UnknownErrorCode(code))
            if (ext.awaiting)(Fixed::read(bytes).map_or(0, |f| f.xid)) =>
        {
            take_total(st, credit);
            let xid = Fixed::read(bytes).map_or(0, |f| f.xid);
            let error = PeerError::Draft07(Rpcrdma2HdrError::Default { discriminant: code });
            return head(xid, Outcome::Error(error));
        }
        Verdict::Discard(why) => {
            st.credits.note_received();
            log::debug!("a -07 message dropped: {why:?}");
            return Classified::Done(Incoming::Dropped(DropReason::Undecodable));
        }
    };
    take_total(st, header.credit());
    let htype = header.header_type();
    if htype.is_call() {
        if let Some(refused) = reverse::refuse_form(st, &header) {
            return Classified::Done(refused);
        }
    }
    match st.reassembly.receive(header) {
        // A reverse-direction call in one Send (the only kind this side takes, Simple format).
        Step::Whole { header, message: Cow::Borrowed(_) } if header.header_type().is_call() => {
            Classified::Done(reverse::call(st, &header, bytes))
        }
        Step::Whole { header, message: Cow::Borrowed(_) } => head(header.xid(), reply_outcome(&header, bytes)),
        Step::Whole { header, message: Cow::Owned(message) } => {
            // Its parts assembled: a buffer of its own, in Version One's shape, held to the same
            // rules as a reply in one Send (an RPC XID unlike `rdma_xid` is refused, 7.2).
            // Its lists were checked as its parts arrived: the rewrite's view is kept as it
            // was encoded, and only the message rules are checked (a message is judged once).
            let (rewritten, view) = header.version_one_shaped(MessageKind::Msg, &message);
            match view.attach(&rewritten).map(|h| h.check_message_rules()) {
                Some(Ok(())) => head(header.xid(), Outcome::Rewritten(rewritten, view)),
                _ => head(header.xid(), Outcome::Malformed(Reason::Draft07(RDMA2_ERR_BAD_XDR))),
            }
        }
        Step::Other(header)
            if matches!(header.header_type(), HeaderType::ConnPropMiddle | HeaderType::ConnPropFinal) =>
        {
            Classified::Done(st.take_properties(&header))
        }
        Step::Other(header) => other(header, bytes, head),
        // A part kept: while a continued reply arrives nothing else may go back, and the
        // responder's window for its parts is ours to refresh (section 4.2.1.1).
        Step::Held => match st.grant_if_due() {
            Some(grant) => Classified::Done(Incoming::Grant(grant)),
            None => Classified::Done(Incoming::Taken),
        },
        Step::Refused { xid, answer, reason, abandoned } => {
            log::warn!("-07 reply {xid:#010x} refused: {reason}");
            let code = answer.code();
            // The responder hears of it (section 7.1.4) once its window has room.
            let held = st.refuse_later(xid, answer);
            // The call whose reply was refused, and the one whose continued reply it broke
            // off, fail with the cause (otherwise each would wait out its timeout and go out
            // again: run twice).
            let failing = [Some(xid), abandoned].into_iter().flatten().filter(|&x| flight_version(x).is_some());
            let mut failing = failing.collect::<Vec<_>>().into_iter();
            match failing.next() {
                Some(x) => Classified::Head(Head {
                    xid: x,
                    credit,
                    outcome: Outcome::MalformedAnswered(Reason::Draft07(code), failing.next()),
                }),
                None => Classified::Done(held),
            }
        }
        Step::Dropped { .. } => Classified::Done(Incoming::Dropped(DropReason::Undecodable)),
    }
}

/// An RDMA2_ERROR body of `code` with nothing after it: the default arm (a base code that
/// carries nothing, or an extension's own, Appendix B.4).
fn code_only(code: u32) -> Rpcrdma2HdrError {
    Rpcrdma2HdrError::Default { discriminant: code }
}

/// A requester's -07 extensions as [`classify`] reads them: their handlers, and whether an
/// XID is our own extension message awaiting its answer.
pub(crate) struct Extensions<'r> {
    pub(crate) registry: &'r crate::extension07::Registry07,
    pub(crate) awaiting: &'r dyn Fn(u32) -> bool,
}

impl State {
    /// What goes back for the responder's extension message `m`, as its handler's `outcome`
    /// says ([`crate::extension07::response`]): an answer is held until the window has room
    /// for it (and stamped with the running total then).
    fn extension_answer(&mut self, m: &ExtensionMessage<'_>, outcome: ExtensionOutcome) -> Incoming<'static> {
        use crate::extension07::{response, Response};
        let room = self.peer_receive_size().unwrap_or(Properties::default().receive_buffer_size);
        match response(m, outcome, room, "responder") {
            Response::Answer(answer) => {
                if !self.hold_answer(answer) {
                    log::warn!(
                        "-07: too many answers wait for the window; extension message {:#010x} unanswered",
                        m.xid
                    );
                }
                Incoming::Taken
            }
            Response::Refuse(code) => self.refuse_later(m.xid, code_only(code)),
            Response::Nothing => Incoming::Taken,
        }
    }
}

/// The reverse direction on a requester's -07 connection (section 4.6): the responder's
/// calls, taken as [`State::reverse`] offers.
mod reverse {
    use super::*;
    use rpcrdma_v2::draft07::xdr::{RDMA2_ERR_BAD_XDR, RDMA2_ERR_READ_CHUNKS, RDMA2_ERR_WRITE_CHUNKS};

    /// RDMA2_ERR_READ_CHUNKS or RDMA2_ERR_WRITE_CHUNKS (`code`) saying that this side takes
    /// no chunk of that kind (7.3.1, 7.3.2: `rdma_max_chunks` zero).
    fn max_chunks(code: u32) -> Rpcrdma2HdrError {
        Rpcrdma2HdrError::RdmaMaxChunks { discriminant: code, value: 0 }
    }

    /// Refuses a call from the responder in a form this side does not take, before
    /// continuation sees it: any call when no reverse direction is offered (section 4.6.3:
    /// a header type this side does not take, 7.1.3), a CALL_MIDDLE (the Simple format has
    /// no continuation, 5.2.5), or a CALL_EXTERNAL (its Call chunk is a chunk, refused as
    /// 4.6.4 asks: RDMA2_ERR_READ_CHUNKS, none taken). `None`: an RDMA2_CALL_INLINE, judged
    /// once whole ([`call`]).
    pub(super) fn refuse_form(st: &mut State, header: &Header07<'_>) -> Option<Incoming<'static>> {
        let (xid, htype) = (header.xid(), header.header_type());
        if st.reverse == ReverseDirection::None {
            log::warn!("-07 {htype:?} {xid:#010x} from the responder: no reverse direction is offered");
            return Some(st.refuse_later(xid, code_only(RDMA2_ERR_INVAL_HTYPE)));
        }
        match htype {
            HeaderType::CallInline => None,
            HeaderType::CallExternal => Some(st.refuse_later(xid, max_chunks(RDMA2_ERR_READ_CHUNKS))),
            _ => {
                log::warn!("-07 {htype:?} {xid:#010x} from the responder: the reverse direction offered is Simple");
                Some(st.refuse_later(xid, code_only(RDMA2_ERR_INVAL_HTYPE)))
            }
        }
    }

    /// A whole RDMA2_CALL_INLINE from the responder: the call for the client's backchannel
    /// handler, as a Version One header view (RDMA_MSG with the same lists), or refused.
    /// Section 4.6.4: "If a reverse-direction Requester provides a non-empty chunk list to a
    /// Responder that does not support chunks, the Responder MUST report its lack of support
    /// using one of the error values defined in Section 7.3": RDMA2_ERR_READ_CHUNKS or
    /// RDMA2_ERR_WRITE_CHUNKS with none taken, or for a Reply chunk RDMA2_ERR_REPLY_RESOURCE
    /// (the reply then goes inline or not at all). Section 4.6.1: the RPC call starts with
    /// the header's XID (else RDMA2_ERR_BAD_XDR, 7.2).
    pub(super) fn call<'a>(st: &mut State, header: &Header07<'a>, bytes: &'a [u8]) -> Incoming<'a> {
        let (xid, lists) = (header.xid(), header.chunk_lists());
        let refusal = if !lists.reads.is_empty() {
            Some(max_chunks(RDMA2_ERR_READ_CHUNKS))
        } else if !lists.writes.is_empty() {
            Some(max_chunks(RDMA2_ERR_WRITE_CHUNKS))
        } else if lists.reply.is_some() {
            Some(Rpcrdma2HdrError::Rdma2ErrReplyResource(0))
        } else {
            None
        };
        if let Some(body) = refusal {
            log::warn!("-07 reverse-direction call {xid:#010x} with chunks: this side takes none (section 4.6.4)");
            return st.refuse_later(xid, body);
        }
        let len = header.header_len();
        let payload = &bytes[len..];
        if payload.get(..4) != Some(&xid.to_be_bytes()[..]) {
            log::warn!("-07 reverse-direction call {xid:#010x}: its RPC message starts otherwise (section 4.6.1)");
            return st.refuse_later(xid, code_only(RDMA2_ERR_BAD_XDR));
        }
        match version_one_view(header, bytes) {
            Ok(view) => Incoming::BackwardCall(view),
            Err(e) => {
                log::warn!("-07 reverse-direction call {xid:#010x}: {e}");
                st.refuse_later(xid, code_only(RDMA2_ERR_BAD_XDR))
            }
        }
    }
}

/// The Version One header view of a whole -07 reply in one Send, `bytes` (section 8.4 takes
/// the chunk lists from Version One word for word): an RDMA2_REPLY_INLINE is RDMA_MSG with its
/// Write list and its RPC reply after the header; an RDMA2_REPLY_EXTERNAL is RDMA_NOMSG, the
/// reply in its Reply chunk (section 6.3.8), nothing after the header. Held to the same
/// message rules (an RPC XID unlike `rdma_xid` is refused, 7.2).
pub(crate) fn version_one_view<'a>(header: &Header07<'a>, bytes: &'a [u8]) -> Result<Header<'a>, HeaderError1> {
    let kind = match header.header_type() {
        HeaderType::ReplyExternal => MessageKind::NoMsg,
        _ => MessageKind::Msg,
    };
    let len = header.header_len();
    Header::from_lists(header.xid(), 2, header.credit(), kind, header.chunk_lists(), len, &bytes[len..])
}

/// What a whole -07 reply in one Send, `bytes`, is to its call: its Version One view, or the
/// rule it breaks.
fn reply_outcome<'a>(header: &Header07<'a>, bytes: &'a [u8]) -> Outcome<'a> {
    match version_one_view(header, bytes) {
        Ok(view) => Outcome::Reply(view),
        Err(e) => Outcome::Malformed(Reason::Header(e)),
    }
}

/// A whole -07 reply's Version One header view, as [`super::reply_header`] gives it: `None`
/// for anything else (a part of a continued reply, another header type, a broken one).
pub(crate) fn reply_view<'a>(bytes: &'a [u8], limits: &HeaderLimits) -> Option<Header<'a>> {
    let header = Header07::parse(bytes, limits).ok()?;
    let whole = matches!(header.header_type(), HeaderType::ReplyInline | HeaderType::ReplyExternal);
    whole.then(|| version_one_view(&header, bytes).ok()).flatten()
}

/// A header with no payload stream, besides CONNPROP: REPLY_EXTERNAL, GRANT.
fn other<'a>(
    header: Header07<'a>,
    bytes: &'a [u8],
    head: impl Fn(u32, Outcome<'a>) -> Classified<'a>,
) -> Classified<'a> {
    match header.header_type() {
        HeaderType::ReplyExternal => head(header.xid(), reply_outcome(&header, bytes)),
        // Its total is taken (section 4.2.1.1); nothing answers it.
        HeaderType::Grant => Classified::Done(Incoming::Taken),
        t => {
            log::warn!("-07 {t:?} {:#010x} not taken on a requester's connection", header.xid());
            Classified::Done(Incoming::Dropped(DropReason::Undecodable))
        }
    }
}

/// A message the verdict refused, with the answer section 7 gives. A receiver of either role
/// answers a version or header type it does not take (7.1.1, 7.1.3); the other answers (7.2.1
/// and on) are the Responder's to send, so a requester fails the call the message names with
/// the cause and sends nothing.
fn refused<'a>(
    st: &mut State,
    reply: ErrorReply,
    reason: &HeaderError,
    head: impl Fn(u32, Outcome<'a>) -> Classified<'a>,
) -> Classified<'a> {
    let xid = reply.xid();
    let any_receiver = matches!(reason, HeaderError::Version { .. } | HeaderError::UnknownType(_));
    if any_receiver {
        return Classified::Done(st.hold_refusal(reply));
    }
    match head(xid, Outcome::Malformed(Reason::Draft07(reply.code()))) {
        Classified::Head(h) => Classified::Head(h),
        Classified::Done(_) => Classified::Done(Incoming::Dropped(DropReason::Undecodable)),
    }
}

/// Counts a Receive whose header carried total `total` (section 4.2.1).
fn take_total(st: &mut State, total: u32) {
    if let Err(e) = st.credits.received(total) {
        log::warn!("{e}: the responder's credit total is kept as it was");
    }
}
