//! The responder's side of a connection as a sans-I/O state machine: it supports a configured
//! range of versions, judges each received message by the rules of the version it carries
//! (`rpcrdma-v1`'s and `rpcrdma-v2`'s `verdict::receive`), answers a version outside the range
//! with RDMA_ERR_VERS and the range (RFC 8166 section 4.5.1), and answers every call in the
//! version that call used (v2 draft section 5.3). Credits are granted per reply and checked
//! per call (RFC 8166 section 3.3.1).

use std::collections::HashMap;

use cm_private_data::PrivateData;
use rpcrdma_v1::credits::ResponderCredits;
use rpcrdma_v1::direction::{classify, Direction, Role};
use rpcrdma_v1::header::{Detached, Header, HeaderLimits};
use rpcrdma_v1::verdict::{self as v1, ErrorReply, ReceivePolicy};
use rpcrdma_v1::Version;
use rpcrdma_v2::options::{OptionalAnswer, Registry};
use rpcrdma_v2::verdict as v2;
use std::borrow::Cow;

use crate::extension07::ExtensionOutcome;
use rpcrdma_v1::header::{offsets, Fixed, MessageKind};
use rpcrdma_v2::dialect::{first_message_dialect, Dialect};
use rpcrdma_v2::draft07::continuation::{Reassembly, Step};
use rpcrdma_v2::draft07::credits::{self as credits07, CreditWindow};
use rpcrdma_v2::draft07::extension::ExtensionMessage;
use rpcrdma_v2::draft07::header::{HeaderError as HeaderError07, HeaderType};
use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};
use rpcrdma_v2::draft07::verdict as verdict07;
use rpcrdma_v2::draft07::xdr::{
    Rpcrdma2ErrVers, Rpcrdma2HdrError, RDMA2_ERR_BAD_XDR, RDMA2_ERR_INVAL_HTYPE, RDMA2_ERR_VERS_MISMATCH,
};

use crate::reply::PeerError;
use crate::thresholds::{Advertised, Stated};
use rpcrdma_v2::options::{OptionOutcome, OptionalMessage};
use rpcrdma_v2::properties::{Exchange, TransportProperties, RPCRDMA2_OPT_PROPERTIES};
use std::sync::{Arc, Mutex, PoisonError};

/// How a responder behaves.
///
/// ```
/// use negotiate::responder::ResponderConfig;
/// use rpcrdma_v1::Version;
/// let v1_only = ResponderConfig::default().versions((Version::ONE, Version::ONE)).credits(8);
/// assert_eq!(v1_only.credits, 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponderConfig {
    /// The versions it accepts, inclusive: `(1, 2)` or `(1, 1)`.
    pub versions: (Version, Version),
    /// The most credits it grants (it posts a Receive for each).
    pub credits: u32,
    /// Limits applied to received headers.
    pub limits: HeaderLimits,
    /// Whether it also speaks draft-ietf-nfsv4-rpcrdma-version-two-07 (Version Two's later
    /// dialect) beside -00: a connection whose first Version Two message is written in -07
    /// is then judged and answered in -07 (section 4.3.3 keeps the dialect per connection;
    /// `rpcrdma_v2::dialect::first_message_dialect`). Off by default: on a connection -07
    /// serves RDMA2_CALL_INLINE calls so far (docs/design.md, "Version Two's two dialects").
    pub draft07: bool,
    /// Whether it speaks draft-cel-nfsv4-rpcrdma-version-two-00 (Version Two's first dialect);
    /// on by default. Cleared with `draft07` set, the responder speaks -07 only: a -00 first
    /// message is judged by -07's rules and refused with RDMA2_ERR_INVAL_HTYPE (section
    /// 7.1.3), which a requester that also speaks -07 reads as "go on in -07"
    /// (docs/design.md's table of dialects). Without `draft07` it has no effect.
    pub draft00: bool,
    /// The most a -07 connection holds of one continued call (section 4.1): its parts are
    /// assembled up to this many bytes, and a longer sequence is refused with RDMA2_ERR_SYSTEM
    /// as soon as it says so (section 7.4.1). A server counts this much per connection
    /// against its memory budget when its responder speaks -07.
    pub max_continued: usize,
    /// The most Sends one -07 reply may take when it continues (section 6.6.4): the
    /// requester's Receive size decides how many a reply needs, so a reply needing more is
    /// answered RDMA2_ERR_REPLY_RESOURCE instead (7.3.5). 1 continues nothing.
    pub max_reply_parts: usize,
    /// For tests only: where a -07 connection's credit counters start on this side
    /// (`CreditWindow::starting_at`), 0 as section 4.2.1 has it. Both sides must start at the
    /// same count; the simulator starts them near 2^32, so that the running totals wrap past
    /// zero within a short run.
    #[doc(hidden)]
    pub draft07_counters_from: u32,
}

impl Default for ResponderConfig {
    /// Versions 1 to 2 (Version Two in -00), 32 credits, Linux's header limits.
    fn default() -> Self {
        ResponderConfig {
            versions: (Version::ONE, Version::TWO),
            credits: 32,
            limits: HeaderLimits::default(),
            draft07: false,
            draft00: true,
            max_continued: 64 << 10,
            max_reply_parts: 256,
            draft07_counters_from: 0,
        }
    }
}

rpcrdma_verbs::setters!(ResponderConfig {
    versions: (Version, Version),
    credits: u32,
    limits: HeaderLimits,
    draft07: bool,
    draft00: bool,
    max_continued: usize,
    max_reply_parts: usize
});

/// What a received message asks of the responder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked<'a> {
    /// A call to serve: fetch its chunks, run it, then reply with [`Responder::reply_params`].
    Call(Header<'a>),
    /// Send these bytes back (an RDMA_ERROR); nothing else happens.
    SendError(ErrorReply),
    /// An RDMA_OPTIONAL its registered handler took (draft section 3.1).
    Handled {
        /// `rdma_xid`.
        xid: u32,
        /// `rdma_opttype`.
        opttype: u32,
        /// The handler's answer, to send back with `xid`, if it gave one.
        answer: Option<OptionalAnswer>,
    },
    /// The requester's answer to this side's RDMA_OPTIONAL `xid` (one
    /// [`Responder::handle_receive_awaiting`] was told it awaits).
    OptionAnswer {
        /// The XID of this side's RDMA_OPTIONAL.
        xid: u32,
    },
    /// The requester's RDMA_ERROR (about a backward-direction call this side sent).
    PeerError {
        /// The XID it names.
        xid: u32,
        /// What it reported.
        error: PeerError,
    },
    /// A reply to a backward-direction call this side sent.
    BackwardReply(Header<'a>),
    /// Send these bytes back: this side's RDMA2_CONNPROP_FINAL, answering the requester's
    /// (draft-ietf-nfsv4-rpcrdma-version-two-07 section 6.3.4), or an RDMA2_GRANT opening the
    /// requester's window while it sends a continued call (4.2.1.1).
    SendBack(Vec<u8>),
    /// Taken with nothing to answer: a -07 RDMA2_GRANT (its credits counted), or a part of a
    /// continued message kept until its sequence ends.
    Taken,
    /// A -07 call whose message is not in the Receive it came in (a continued call, or a
    /// CALL_EXTERNAL): its header and message are written into a buffer of their own, in
    /// Version One's shape; take it with [`Responder::take_rewritten`] and judge it with
    /// [`Responder::handle_rewritten`].
    Rewritten,
    /// Dropped silently (too short, or an RDMA_ERROR that cannot be decoded).
    Dropped,
}

/// How to reply to one call: the one parameter set of a reply, which the data path's
/// [`send_reply`](crate::datapath::send_reply) takes as it is.
pub use crate::datapath::ReplyParams;

/// What is in flight for the requester besides a call being judged: what counts against the
/// credits granted with it (RFC 8166 section 3.3.1: "A Requester MUST NOT send unacknowledged
/// requests in excess of the Responder's granted credit limit").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Behind {
    /// Messages received after it and not yet judged (Receives completed and not yet read).
    /// A reply to this side's backward call may be among them, in the Receive posted for the
    /// backward direction ([`crate::backchannel::SLOTS`]), which is left out of the count so
    /// that such a reply is never taken for an overrun.
    pub unjudged: usize,
    /// Calls judged before it whose reply parameters were taken ([`Responder::reply_params`],
    /// which a [`Connection`](crate::connection::Connection) takes as it judges a call) and
    /// that are not yet answered: being served. (A call judged and still waiting for
    /// `reply_params` is counted by the responder itself.)
    pub serving: usize,
}

impl Behind {
    /// The requester's calls these are, at most: the unjudged messages but those the backward
    /// direction's Receives may hold, and every call being served.
    ///
    /// ```
    /// use negotiate::responder::Behind;
    /// assert_eq!(Behind { unjudged: 0, serving: 3 }.in_flight(), 3);
    /// assert_eq!(Behind { unjudged: 2, serving: 3 }.in_flight(), 4);
    /// ```
    pub fn in_flight(self) -> u32 {
        let unjudged = self.unjudged.saturating_sub(crate::backchannel::SLOTS);
        u32::try_from(unjudged.saturating_add(self.serving)).unwrap_or(u32::MAX)
    }
}

/// The responder side of one connection.
///
/// ```
/// use negotiate::responder::{ResponderConfig, Asked, Responder};
/// use rpcrdma_v1::Version;
/// let mut r = Responder::new(ResponderConfig::default().versions((Version::ONE, Version::ONE)));
/// r.handle_connected(&[], None);
/// // A Version Two probe to a Version One responder: RDMA_ERR_VERS, range 1..=1.
/// let probe: Vec<u8> = [5u32, 2, 1, 1, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
/// let Asked::SendError(e) = r.handle_receive(&probe) else { panic!() };
/// assert_eq!(&e.as_bytes()[16..], &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
/// ```
pub struct Responder {
    cfg: ResponderConfig,
    advertised: Advertised,
    credits: ResponderCredits,
    registry: Registry,
    /// The handlers for -07 extensions' header types ([`Responder::set_draft07_registry`]).
    registry07: crate::extension07::Registry07,
    /// The transport properties this side states, when it has the extension
    /// ([`Responder::set_properties`]), and where its handler leaves the requester's.
    properties: Option<(TransportProperties, Arc<Mutex<Option<TransportProperties>>>)>,
    /// What both sides stated on this connection.
    stated: Stated,
    /// Calls received and not yet replied to: XID -> (version, credits requested).
    in_flight: HashMap<u32, (Version, u32)>,
    overruns: u64,
    over_limits: u64,
    /// The connection's Version Two dialect, once its first Version Two message said.
    dialect: Option<Dialect>,
    /// A -07 connection's state.
    d07: Draft07,
}

/// What a connection that speaks -07 keeps: its credit totals (section 4.2), its
/// continuation reassembly (section 4.1) and the transport properties of both sides
/// (section 5).
struct Draft07 {
    credits: CreditWindow,
    reassembly: Reassembly,
    /// The last [`Asked::Rewritten`] call, until taken.
    rewritten: Option<Vec<u8>>,
    /// Its header's view, laid over it when it is judged ([`Responder::handle_rewritten`]).
    rewritten_view: Option<Detached>,
    /// The properties this side states ([`Responder::set_draft07_properties`]).
    ours: Properties,
    /// The requester's properties as its CONNPROP messages so far state them, applied when
    /// its RDMA2_CONNPROP_FINAL comes (a sequence broken off is not applied).
    pending: Properties,
    /// The requester's properties once its RDMA2_CONNPROP_FINAL came.
    theirs: Option<Properties>,
    /// Calls in flight whose `rdma_inv_handle` solicits remote invalidation (section 6.5):
    /// XID -> the handle, one of the call's own.
    inv_handles: HashMap<u32, u32>,
    /// Whether this side's Sends (but GRANTs) are counted when they are posted, by whoever
    /// posts them ([`Responder::count_draft07_sends_when_posted`]), instead of when the
    /// message that prompts them is judged.
    counted_when_posted: bool,
    /// Whether this side's RDMA2_CONNPROP_FINAL has been handed out
    /// ([`Responder::poll_transmit`]).
    ours_sent: bool,
}

/// -07's default inline threshold (section 4.2.2), the most an RDMA2_CONNPROP_FINAL may take
/// (6.3.4).
const DEFAULT_INLINE_07: usize = rpcrdma_v2::draft07::DEFAULT_INLINE_THRESHOLD;

impl Draft07 {
    /// A Send this side is to post (anything but a GRANT), prompted by the message being
    /// judged: counted now, and its running total returned; or, when Sends are counted as they
    /// are posted, the total to write for now (the Send carries the one taken when it is
    /// posted, [`Responder::draft07_part_credit`]).
    fn count_send(&mut self) -> u32 {
        if self.counted_when_posted {
            self.credits.credit_field()
        } else {
            self.credits.send()
        }
    }

    fn new(cfg: &ResponderConfig) -> Draft07 {
        // A limit of 2^31 - 1 or more is clamped: section 4.2.1 allows no more.
        let advertised = cfg.credits.min(credits07::MAX_CREDITS);
        let credits = CreditWindow::starting_at(advertised, cfg.draft07_counters_from).expect("clamped to the limit");
        Draft07 {
            credits,
            reassembly: Reassembly::new(cfg.max_continued),
            rewritten: None,
            rewritten_view: None,
            ours: Properties::default(),
            pending: Properties::default(),
            theirs: None,
            inv_handles: HashMap::new(),
            counted_when_posted: false,
            ours_sent: false,
        }
    }
}

impl Responder {
    /// A responder with no RDMA_OPTIONAL handlers.
    pub fn new(cfg: ResponderConfig) -> Self {
        Self::with_registry(cfg, Registry::new())
    }

    /// A responder whose RDMA_OPTIONAL messages go to `registry`'s handlers (Version Two).
    pub fn with_registry(cfg: ResponderConfig, registry: Registry) -> Self {
        Responder {
            cfg,
            advertised: Advertised::default(),
            credits: ResponderCredits::new(cfg.credits),
            registry,
            registry07: crate::extension07::Registry07::default(),
            properties: None,
            stated: Stated::default(),
            in_flight: HashMap::new(),
            overruns: 0,
            over_limits: 0,
            dialect: None,
            d07: Draft07::new(&cfg),
        }
    }

    /// The handlers for messages of -07 extensions' header types from now on (Appendix B.2,
    /// [`crate::extension07`]): a message of a type none owns is answered
    /// RDMA2_ERR_INVAL_HTYPE (section 7.1.3). Their properties are not added here: state them
    /// with [`Responder::set_draft07_properties`] (`Properties::others`).
    pub fn set_draft07_registry(&mut self, registry: crate::extension07::Registry07) {
        self.registry07 = registry;
    }

    /// The handlers for RDMA_OPTIONAL messages from now on ([`crate::extension::registry`]).
    pub fn set_registry(&mut self, registry: Registry) {
        self.registry = registry;
        if let Some((ours, _)) = self.properties.take() {
            self.set_properties(ours);
        }
    }

    /// Gives this responder the transport-properties extension
    /// (`specs/rpcrdma2-transport-properties.txt`), stating `ours`: a properties request is
    /// answered with them (section 2.2), the requester's stated properties take effect for
    /// the replies after it (section 4), and a request that does not decode as one is answered
    /// with RDMA_ERR_INVAL_OPTION (section 2.5). Without it, every properties request is
    /// answered RDMA_ERR_INVAL_OPTION, as any unknown opttype (draft section 3.1).
    ///
    /// ```
    /// use negotiate::responder::{ResponderConfig, Asked, Responder};
    /// use rpcrdma_v2::options::encode_optional;
    /// use rpcrdma_v2::properties::{Exchange, TransportProperties, RPCRDMA2_OPT_PROPERTIES};
    ///
    /// let mut r = Responder::new(ResponderConfig::default());
    /// let big = TransportProperties { max_send_size: Some(16384), max_recv_size: Some(16384), ..Default::default() };
    /// r.set_properties(big);
    /// r.handle_connected(&[], None);
    /// let (mut optinfo, mut msg) = ([0u8; 64], [0u8; 128]);
    /// let n = big.encode(Exchange::Request, &mut optinfo).unwrap();
    /// let len = encode_optional(9, 4, RPCRDMA2_OPT_PROPERTIES, &optinfo[..n], &mut msg).unwrap();
    /// let Asked::Handled { answer: Some(answer), .. } = r.handle_receive(&msg[..len]) else { panic!() };
    /// assert_eq!(TransportProperties::decode(&answer.optinfo).unwrap(), (Exchange::Reply, big));
    /// assert_eq!(r.stated().requester, Some(big));
    /// ```
    pub fn set_properties(&mut self, ours: TransportProperties) {
        let theirs = Arc::new(Mutex::new(None));
        let cell = theirs.clone();
        let answer = move |m: &OptionalMessage<'_>| match TransportProperties::decode(m.optinfo) {
            Ok((Exchange::Request, stated)) if m.payload.is_empty() => {
                let mut optinfo = vec![0; 4 * (4 * 4 + 2)];
                let Ok(len) = ours.encode(Exchange::Reply, &mut optinfo) else { return OptionOutcome::Unsupported };
                optinfo.truncate(len);
                *cell.lock().unwrap_or_else(PoisonError::into_inner) = Some(stated);
                OptionOutcome::Answer(OptionalAnswer { opttype: RPCRDMA2_OPT_PROPERTIES, optinfo })
            }
            // Malformed, a reply where a request belongs, or a Payload Stream after it (section
            // 2.2: MUST NOT): reported as unsupported (section 2.5).
            _ => OptionOutcome::Unsupported,
        };
        // Replaces a handler an extension registered for the same opttype: this one is built in.
        self.registry.unregister(RPCRDMA2_OPT_PROPERTIES);
        let _ = self.registry.register(RPCRDMA2_OPT_PROPERTIES, answer);
        self.properties = Some((ours, theirs));
    }

    /// What both sides stated in the transport-properties exchange on this connection.
    pub fn stated(&self) -> Stated {
        self.stated
    }

    /// A connection is up: `received` is the requester's connect private data (searched at
    /// any offset), `ours` what this side sent in its accept.
    pub fn handle_connected(&mut self, received: &[u8], ours: Option<PrivateData>) {
        self.advertised = Advertised { requester: PrivateData::find(received), responder: ours };
        self.stated = Stated::default();
        if let Some((_, theirs)) = &self.properties {
            *theirs.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
        self.credits.on_reconnect();
        self.in_flight.clear();
        self.dialect = None;
        // What this side states, and how its Sends are counted, outlast the connection.
        let (ours, counted_when_posted) = (std::mem::take(&mut self.d07.ours), self.d07.counted_when_posted);
        self.d07 = Draft07::new(&self.cfg);
        (self.d07.ours, self.d07.counted_when_posted) = (ours, counted_when_posted);
    }

    /// The transport properties this side states on a -07 connection (section 5.2), sent in
    /// an RDMA2_CONNPROP_FINAL once the connection speaks -07 ([`Responder::poll_transmit`]).
    /// Table 1's defaults until set: a server states the size of the Receives it posts.
    pub fn set_draft07_properties(&mut self, ours: Properties) {
        self.d07.ours = ours;
    }

    /// The requester's transport properties on a -07 connection, once its
    /// RDMA2_CONNPROP_FINAL came (section 5).
    pub fn draft07_peer_properties(&self) -> Option<&Properties> {
        self.d07.theirs.as_ref()
    }

    /// The connection's Version Two dialect: `None` until its first Version Two message
    /// (and always `-00` for a responder that speaks only -00).
    pub fn dialect(&self) -> Option<Dialect> {
        self.dialect
    }

    /// What each side advertised at connect.
    pub fn advertised(&self) -> Advertised {
        self.advertised
    }

    /// Calls that arrived beyond the credits granted (RFC 8166 section 3.3.1 forbids them), and
    /// on a -07 connection also this side's replies sent beyond the requester's credit total
    /// (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.2.1: not yet held for its GRANT).
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// Messages answered with ERR_CHUNK because they broke a header limit of
    /// [`ResponderConfig::limits`] (see `HeaderError::is_over_limit`).
    pub fn over_limits(&self) -> u64 {
        self.over_limits
    }

    /// The most credits it grants ([`ResponderConfig::credits`]): the `rdma_credit` of what it sends
    /// that answers no call (RDMA_ERROR, an extension's RDMA_OPTIONAL).
    pub fn credit_limit(&self) -> u32 {
        self.cfg.credits
    }

    /// Calls received and not yet replied to.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Judges a received message.
    pub fn handle_receive<'a>(&mut self, bytes: &'a [u8]) -> Asked<'a> {
        self.handle_receive_behind(bytes, Behind::default())
    }

    /// [`Responder::handle_receive`] for a message with `behind` it what else is in flight for
    /// the requester: messages received and not yet judged, and calls taken and not yet
    /// answered ([`Behind`]). Those count against the credits granted too, so a requester that
    /// sent beyond them is counted ([`Responder::overruns`]) whether this side serves one
    /// call at a time or several.
    ///
    /// ```
    /// use negotiate::responder::{Behind, Asked, Responder, ResponderConfig};
    /// let mut r = Responder::new(ResponderConfig::default().credits(4));
    /// r.handle_connected(&[], None);
    /// // An RDMA_MSG call (no chunks) around an RPC call: XID 1, then 2.
    /// let call = |xid: u32| -> Vec<u8> { [xid, 1, 4, 0, 0, 0, 0, xid, 0].iter().flat_map(|w| w.to_be_bytes()).collect() };
    /// let first = call(1);
    /// assert!(matches!(r.handle_receive(&first), Asked::Call(_)));
    /// r.reply_params(1); // its reply grants the 4 credits
    /// // Three calls being served and this one: within the 4 granted.
    /// let serving = Behind { unjudged: 0, serving: 3 };
    /// assert!(matches!(r.handle_receive_behind(&call(2), serving), Asked::Call(_)));
    /// assert_eq!(r.overruns(), 0);
    /// r.reply_params(2);
    /// // Four being served and this one: beyond them.
    /// r.handle_receive_behind(&call(3), Behind { unjudged: 0, serving: 4 });
    /// assert_eq!(r.overruns(), 1);
    /// ```
    pub fn handle_receive_behind<'a>(&mut self, bytes: &'a [u8], behind: Behind) -> Asked<'a> {
        self.handle_receive_awaiting(bytes, behind, &|_| false)
    }

    /// [`Responder::handle_receive_behind`] on a side that sent an RDMA_OPTIONAL of its own:
    /// `awaiting(xid)` says whether one with that XID waits for its answer
    /// ([`rpcrdma_v2::verdict::receive_awaiting`]); a Version Two RDMA_OPTIONAL with such an
    /// XID is [`Asked::OptionAnswer`].
    ///
    /// ```
    /// use negotiate::responder::{Behind, ResponderConfig, Asked, Responder};
    /// let mut r = Responder::new(ResponderConfig::default());
    /// r.handle_connected(&[], None);
    /// // RDMA_OPTIONAL, XID 5, opttype 7, empty optinfo.
    /// let m: Vec<u8> = [5u32, 2, 1, 5, 7, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
    /// assert_eq!(r.handle_receive_awaiting(&m, Behind::default(), &|x| x == 5), Asked::OptionAnswer { xid: 5 });
    /// assert!(matches!(r.handle_receive_awaiting(&m, Behind::default(), &|_| false), Asked::SendError(_)));
    /// ```
    pub fn handle_receive_awaiting<'a>(
        &mut self,
        bytes: &'a [u8],
        behind: Behind,
        awaiting: &dyn Fn(u32) -> bool,
    ) -> Asked<'a> {
        if self.dialect == Some(Dialect::Ietf07) || self.speaks_draft07(bytes) {
            return match self.judge_draft07(bytes, awaiting) {
                Ok(h) => {
                    // The requester may have as many calls in flight as the credits this
                    // side advertises in every header (section 4.2.1).
                    self.credits.grant(self.cfg.credits);
                    self.take_call(h, behind)
                }
                Err(r) => r,
            };
        }
        let policy = ReceivePolicy { limits: self.cfg.limits, versions: self.cfg.versions, credit: self.cfg.credits };
        let header = match self.judge(bytes, &policy, awaiting) {
            Ok(h) => h,
            Err(r) => return r,
        };
        if classify(&header, Role::Server) == Some(Direction::BackwardReply) {
            return Asked::BackwardReply(header);
        }
        self.take_call(header, behind)
    }

    /// A call judged acceptable: counted against the credits granted, and in flight until
    /// its reply's parameters are taken.
    fn take_call<'a>(&mut self, header: Header<'a>, behind: Behind) -> Asked<'a> {
        let in_flight = (self.in_flight.len() as u32 + 1).saturating_add(behind.in_flight());
        // A -07 connection's credits are running totals, checked as each message arrives
        // (`judge_draft07`); this ceiling is the other versions' grants.
        let draft07 = self.dialect == Some(Dialect::Ietf07);
        if !draft07 && self.credits.on_call(in_flight).is_err() {
            log::warn!(
                "call {:#010x} arrived with {in_flight} in flight, beyond the credits granted (RFC 8166 section 3.3.1)",
                header.xid()
            );
            self.overruns += 1;
        }
        self.in_flight.insert(header.xid(), (header.version(), header.credit()));
        Asked::Call(header)
    }

    fn judge<'a>(
        &mut self,
        bytes: &'a [u8],
        policy: &ReceivePolicy,
        awaiting: &dyn Fn(u32) -> bool,
    ) -> Result<Header<'a>, Asked<'a>> {
        let over_limits = &mut self.over_limits;
        let mut from_v1 = |v| match v {
            v1::Verdict::Accept(h) => Ok(h),
            v1::Verdict::Reply { reply, reason } => {
                *over_limits += u64::from(reason.is_over_limit());
                log_refusal(&reply, &reason);
                Err(Asked::SendError(reply))
            }
            v1::Verdict::PeerError { xid, error } => Err(Asked::PeerError { xid, error: PeerError::Common(error) }),
            v1::Verdict::Discard(_) => Err(Asked::Dropped),
        };
        // One dispatch for every configuration: `v2::receive` applies the policy's versions.
        // An RDMA_OPTIONAL is not a call: it is judged (and its Receive reposted) at once and
        // never enters `in_flight`, so it needs no credit of the calls (RFC 8166 section
        // 3.3.1 counts Receives the requester's messages occupy; this one occupies its Receive
        // only until judged).
        match v2::receive_awaiting(bytes, policy, &mut self.registry, awaiting) {
            v2::Verdict::Accept(h) => Ok(h),
            v2::Verdict::Handled { xid, opttype, answer } => {
                if let Some((ours, theirs)) = &self.properties {
                    if let Some(stated) = theirs.lock().unwrap_or_else(PoisonError::into_inner).take() {
                        self.stated = Stated { requester: Some(stated), responder: Some(*ours) };
                    }
                }
                Err(Asked::Handled { xid, opttype, answer })
            }
            v2::Verdict::Answer(m) => Err(Asked::OptionAnswer { xid: m.xid }),
            v2::Verdict::Reply { reply, reason } => {
                self.over_limits += u64::from(matches!(reason, v2::Reason::Header(e) if e.is_over_limit()));
                log_refusal(&reply, &reason);
                Err(Asked::SendError(reply))
            }
            v2::Verdict::PeerError { xid, error } => Err(Asked::PeerError { xid, error }),
            v2::Verdict::Version1(v) => from_v1(v),
            v2::Verdict::Discard(_) => Err(Asked::Dropped),
        }
    }

    /// How to reply to call `xid` (its version, the credit grant, the thresholds), and the
    /// call leaves the in-flight set. `None` for an XID with no call in flight. On a -07
    /// connection `credits` is the running total the reply carries (section 4.2.1): taken when
    /// the reply is posted where Sends are counted then
    /// ([`Responder::count_draft07_sends_when_posted`], [`ReplyParams::credit_owed`]), else
    /// counted now.
    pub fn reply_params(&mut self, xid: u32) -> Option<ReplyParams> {
        let (version, requested) = self.in_flight.remove(&xid)?;
        let draft07 = version == Version::TWO && self.dialect == Some(Dialect::Ietf07);
        let invalidate = self.d07.inv_handles.remove(&xid).filter(|_| draft07);
        let credit_owed = draft07 && self.d07.counted_when_posted;
        let credits = if !draft07 {
            self.credits.grant(requested)
        } else if credit_owed {
            self.d07.credits.credit_field()
        } else {
            if !self.d07.credits.may_send() {
                // Counted now, with nobody to hold it for the requester's GRANT: said. (Not an
                // overrun of the requester's: `overruns` counts those.)
                log::warn!(
                    "the reply to {xid:#010x} goes beyond the credits the requester granted (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.2.1): Sends are counted when judged here, and nothing holds it"
                );
            }
            self.d07.credits.send()
        };
        Some(ReplyParams {
            version,
            credits,
            credit_owed,
            reply_inline_threshold: match (&self.d07.theirs, draft07) {
                // Section 5.2.2: the requester's Receive size as it stated it, bounded (a
                // continued reply's parts are cut to it, and a Send buffer of this size is
                // allocated for a reply that needs it: the number is the peer's).
                (Some(p), true) => crate::thresholds::draft07_receive_threshold(p.receive_buffer_size) as usize,
                _ => self.stated.thresholds(&self.advertised, version).reply,
            },
            // Section 6.5: on -07 the call solicits it, naming the handle; elsewhere RFC 8797's
            // R flags allow it.
            remote_invalidation: if draft07 {
                invalidate.is_some()
            } else {
                self.stated.remote_invalidation(&self.advertised)
            },
            draft07,
            invalidate,
        })
    }

    /// From now on this -07 connection's Sends (all but its GRANTs) are counted when they are
    /// posted, each by a call to [`Responder::draft07_part_credit`] made by whoever posts it,
    /// in posting order: a Send counted and not yet posted would use a place in the
    /// requester's window that the requester, which grants more only as it receives, never
    /// sees used (section 4.2.1.1). A server's event loop does this for every connection.
    ///
    /// ```
    /// use negotiate::responder::{Responder, ResponderConfig};
    /// let mut r = Responder::new(ResponderConfig::default().draft07(true));
    /// r.count_draft07_sends_when_posted();
    /// ```
    pub fn count_draft07_sends_when_posted(&mut self) {
        self.d07.counted_when_posted = true;
    }

    /// One more Send on a -07 connection, about to be posted (a reply, a continued reply's
    /// next part, an RDMA2_ERROR or CONNPROP, where Sends are counted when posted): the
    /// running total it carries, counted as sent, while the requester's window has room
    /// (section 4.2.1: "MUST NOT post this message if the connection's Sent message counter is
    /// greater than ... Received credits"). `None` while the window is shut (the requester's
    /// RDMA2_GRANT opens it, section 4.2.1.1) or on another version.
    ///
    /// ```
    /// use negotiate::responder::{Responder, ResponderConfig};
    /// let mut r = Responder::new(ResponderConfig::default());
    /// assert_eq!(r.draft07_part_credit(), None); // not a -07 connection
    /// ```
    pub fn draft07_part_credit(&mut self) -> Option<u32> {
        let draft07 = self.dialect == Some(Dialect::Ietf07);
        (draft07 && self.d07.credits.may_send()).then(|| self.d07.credits.send())
    }

    /// The buffer of the last [`Asked::Rewritten`] call: its header in Version One's shape
    /// (the chunk lists as the -07 header carried them, a CALL_EXTERNAL's Call chunk first at
    /// position zero), then the RPC call when it came inline. The driver keeps it while the
    /// call is served, as it keeps a Receive's bytes.
    pub fn take_rewritten(&mut self) -> Option<Vec<u8>> {
        self.d07.rewritten.take()
    }

    /// Judges a call [`Responder::take_rewritten`] gave, `behind` as for
    /// [`Responder::handle_receive_behind`]: its message rules (an RPC XID unlike the header's is
    /// RDMA2_ERR_BAD_XDR, section 7.2), then it is a call in flight like any other. Its header
    /// is not parsed again: the chunk rules were checked when its -07 header was received,
    /// and its view was kept as the rewrite was encoded (`Detached::encode`). Bytes other than
    /// the rewrite taken (of another length) are dropped.
    pub fn handle_rewritten<'a>(&mut self, bytes: &'a [u8], behind: Behind) -> Asked<'a> {
        let Some(h) = self.d07.rewritten_view.take().and_then(|view| view.attach(bytes)) else {
            log::warn!("a rewritten -07 call judged with bytes not its own ({} bytes): dropped", bytes.len());
            return Asked::Dropped;
        };
        if let Err(e) = h.check_message_rules() {
            log::warn!("-07 call {:#010x} refused: {e}", h.xid());
            self.d07.inv_handles.remove(&h.xid());
            return Asked::SendError(self.error07(h.xid(), None, RDMA2_ERR_BAD_XDR));
        }
        self.credits.grant(self.cfg.credits);
        self.take_call(h, behind)
    }

    /// Section 6.5: a call's non-zero `rdma_inv_handle` that names one of the handles of its
    /// own header solicits remote invalidation of that handle; kept for its reply. (One that
    /// names none of them is the requester's mistake: its reply is a plain Send rather than
    /// one that would fail on a handle the requester did not offer.)
    /// (Kept only once the call is taken, so that a refused call leaves nothing behind.)
    fn note_inv_handle(&mut self, header: &rpcrdma_v2::draft07::header::Header<'_>) {
        let Some(handle) = header.inv_handle().filter(|&h| h != 0) else { return };
        let lists = header.chunk_lists();
        let reads = header.call_chunk().iter().chain(lists.reads.iter()).any(|r| r.target.handle == handle);
        let writes = lists.writes.iter().any(|c| c.target.iter().any(|s| s.handle == handle));
        let reply = lists.reply.is_some_and(|c| c.target.iter().any(|s| s.handle == handle));
        if reads || writes || reply {
            self.d07.inv_handles.insert(header.xid(), handle);
        }
    }

    /// A CONNPROP in its place in the sequence (continuation checked 6.3.3 and 6.3.4): its
    /// properties are added to those pending, or none of them when one does not decode
    /// (RDMA2_ERR_BAD_PROPVAL, section 5.1); the FINAL's make the requester's properties.
    /// (This side's own RDMA2_CONNPROP_FINAL is not an answer: it goes unasked, once,
    /// [`Responder::poll_transmit`].)
    fn take_properties<'a>(&mut self, header: &rpcrdma_v2::draft07::header::Header<'_>) -> Asked<'a> {
        let set = header.properties().expect("a CONNPROP header carries a property set");
        match self.d07.pending.apply(&set) {
            Ok(p) => self.d07.pending = p,
            Err(bad) => {
                log::warn!("-07 CONNPROP {:#010x}: {bad}", header.xid());
                let total = self.d07.count_send();
                return Asked::SendError(verdict07::error_reply(header.xid(), total, &bad.answer()));
            }
        }
        if header.header_type() != HeaderType::ConnPropFinal {
            return Asked::Taken;
        }
        let theirs = std::mem::take(&mut self.d07.pending);
        log::info!("-07 connection: the requester states {theirs:?}");
        self.d07.theirs = Some(theirs);
        Asked::Taken
    }

    /// The next message of this side's own to send on the connection, marshaled and counted:
    /// on a -07 connection, this side's RDMA2_CONNPROP_FINAL, once, as soon as the
    /// connection's first -07 message is judged (section 6.3.4: "Each peer sends an
    /// RDMA2_CONNPROP_FINAL ... after the client has established a connection", asked or
    /// not; before the requester's first message the responder cannot know the connection
    /// will speak -07). Call it after each [`Responder::handle_receive`]; send what it gives
    /// before anything else that message prompts (the draft asks no order: section 6.3.4 only
    /// says each peer sends one).
    ///
    /// ```
    /// use negotiate::responder::{ResponderConfig, Asked, Responder};
    /// use rpcrdma_v2::draft07::header::{Header, HeaderType};
    /// let mut r = Responder::new(ResponderConfig::default().draft07(true));
    /// r.handle_connected(&[], None);
    /// assert_eq!(r.poll_transmit(), None); // nothing said yet: Version One, -00 or -07?
    /// // An RDMA2_GRANT (-07's header type 5) settles the dialect.
    /// let grant = rpcrdma_v2::draft07::marshal::grant_message(1);
    /// assert_eq!(r.handle_receive(&grant), Asked::Taken);
    /// let ours = r.poll_transmit().expect("this side's properties");
    /// let h = Header::parse(&ours, &Default::default()).unwrap();
    /// assert_eq!(h.header_type(), HeaderType::ConnPropFinal);
    /// assert_eq!(r.poll_transmit(), None); // once per connection
    /// ```
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        if self.dialect != Some(Dialect::Ietf07) || self.d07.ours_sent {
            return None;
        }
        self.d07.ours_sent = true;
        // Within the default inline threshold (6.3.4): a server's own properties fit one.
        match self.d07.ours.connprop_messages(0, 0, DEFAULT_INLINE_07) {
            Some(mut messages) if messages.len() == 1 => {
                // Counted as the Send it is, its total written once counted.
                let mut m = messages.remove(0);
                rpcrdma_v1::header::set_credit(&mut m, self.d07.count_send());
                Some(m)
            }
            _ => {
                log::warn!("-07: this side's properties take more than one CONNPROP message; none sent");
                None
            }
        }
    }

    /// A -07 call, whose reply parameters were `params`, was served with no reply: a
    /// call-only procedure's (section 4.7). The RDMA2_GRANT to send instead, if any (4.2.1.1:
    /// no reply will carry a new total): when Sends are counted as judged, the Send the reply
    /// parameters counted goes as a GRANT carrying their total, so that what this side
    /// counted is what it posts; with [`Responder::count_draft07_sends_when_posted`], one
    /// counted now when the requester's window needs it. `None` off -07, or with no GRANT due.
    pub fn draft07_served_without_reply(&mut self, params: &ReplyParams) -> Option<Vec<u8>> {
        if self.dialect != Some(Dialect::Ietf07) || !params.draft07 {
            return None;
        }
        if !self.d07.counted_when_posted {
            return Some(rpcrdma_v2::draft07::marshal::grant_message(params.credits).to_vec());
        }
        self.grant_if_due()
    }

    /// An RDMA2_GRANT for the requester, counted as sent, when one is due and may go (section
    /// 4.2.1.1: the requester has used more than half the window this side last gave it).
    fn grant_if_due(&mut self) -> Option<Vec<u8>> {
        self.d07.credits.take_grant().map(|total| rpcrdma_v2::draft07::marshal::grant_message(total).to_vec())
    }

    /// An RDMA2_ERROR with `code` (and no body) answering message `xid` of a -07 connection,
    /// written in `vers` (the message's, section 7; Version Two when `None`), counted as a Send
    /// and carrying the running total after it.
    fn error07(&mut self, xid: u32, vers: Option<u32>, code: u32) -> ErrorReply {
        let body = Rpcrdma2HdrError::Default { discriminant: code };
        let reply = verdict07::error_reply(xid, self.d07.count_send(), &body);
        match vers {
            Some(vers) => reply.with_word(offsets::VERS, vers),
            None => reply,
        }
    }

    /// Whether `bytes` is to be judged by -07's rules: a Version Two message on a connection
    /// whose dialect is -07, or whose first Version Two message this is and is written in -07
    /// (settling the dialect either way).
    fn speaks_draft07(&mut self, bytes: &[u8]) -> bool {
        if Fixed::read(bytes).is_none_or(|f| f.vers != rpcrdma_v2::RPCRDMA2_VERSION.wire()) {
            return false;
        }
        if self.dialect.is_none() {
            let two = self.cfg.versions.1 >= Version::TWO;
            let only_07 = self.cfg.draft07 && !self.cfg.draft00;
            self.dialect = match first_message_dialect(bytes) {
                Some(Dialect::Ietf07) if self.cfg.draft07 && two => Some(Dialect::Ietf07),
                // A -07-only responder judges a -00 first message by -07's rules, which refuse
                // it (RDMA2_ERR_INVAL_HTYPE, section 7.1.3), and leaves the connection's version
                // to be established by a message it takes (section 4.3): the requester may go
                // on in Version One, or in -07, on the same connection.
                Some(_) if only_07 && two => return true,
                Some(_) => Some(Dialect::Cel00),
                // An error as a first message, or one too short to say: it settles nothing.
                None => None,
            };
        }
        self.dialect == Some(Dialect::Ietf07)
    }

    /// Counts a -07 message refused, or an RDMA2_ERROR, as received, taking the running total
    /// its prefix carries (section 4.2.1: "Received credits" is the `rdma_credit` of the most
    /// recent message received; the prefix is whole, or it would have been dropped). Counted
    /// without its total, a refused first message left the requester's window at the one
    /// message it allows before this side's first header, which this side's own
    /// CONNPROP_FINAL then took: the refusal waited behind it for a GRANT the requester, its
    /// only message unanswered, never sends.
    fn take_prefix_credit(&mut self, bytes: &[u8]) {
        match Fixed::read(bytes).and_then(|f| f.credit) {
            Some(total) => {
                if let Err(e) = self.d07.credits.received(total) {
                    log::warn!("{e}: the requester's credit total is kept as it was");
                }
            }
            None => self.d07.credits.note_received(),
        }
    }

    /// What goes back for extension message `m`, as its handler's `outcome` says
    /// ([`crate::extension07::response`]), sent at once with this side's running total.
    fn extension_answer(&mut self, m: &ExtensionMessage<'_>, outcome: ExtensionOutcome) -> Asked<'static> {
        use crate::extension07::{response, Response};
        let room = self.d07.theirs.as_ref().map_or(Properties::default().receive_buffer_size, |p| {
            crate::thresholds::draft07_receive_threshold(p.receive_buffer_size)
        });
        match response(m, outcome, room, "requester") {
            Response::Answer(mut answer) => {
                rpcrdma_v1::header::set_credit(&mut answer, self.d07.count_send());
                Asked::SendBack(answer)
            }
            Response::Refuse(code) => Asked::SendError(self.error07(m.xid, None, code)),
            Response::Nothing => Asked::Taken,
        }
    }

    /// The requester's RDMA2_REPLY_INLINE to this side's reverse-direction call: its Version
    /// One view (RDMA_MSG, the same lists) for the call's caller, or, carrying chunks this
    /// side's Simple-format call never provides, RDMA2_ERR_BAD_XDR (section 4.6.4: chunks in
    /// the reverse direction only as RVRSDIR allows; the call then waits out its timeout).
    fn reverse_reply<'a>(&mut self, header: rpcrdma_v2::draft07::header::Header<'a>) -> Asked<'a> {
        let (xid, lists) = (header.xid(), header.chunk_lists());
        let vers = rpcrdma_v2::RPCRDMA2_VERSION.wire();
        let len = header.header_len();
        let payload = header.payload();
        let view = Header::from_lists(xid, vers, header.credit(), MessageKind::Msg, lists, len, payload);
        match view {
            Ok(view) if lists.writes.is_empty() => Asked::BackwardReply(view),
            Ok(_) => {
                log::warn!("-07 reply {xid:#010x} to a reverse-direction call carries Write chunks it was not given");
                Asked::SendError(self.error07(xid, None, RDMA2_ERR_BAD_XDR))
            }
            Err(e) => {
                log::warn!("-07 reply {xid:#010x} to a reverse-direction call: {e}");
                Asked::SendError(self.error07(xid, None, RDMA2_ERR_BAD_XDR))
            }
        }
    }

    /// Judges a -07 message (draft-ietf-nfsv4-rpcrdma-version-two-07 sections 4 to 7): the
    /// header's rules (`draft07::verdict`), the credit total it carries (4.2.1), continuation
    /// (4.1), then what its type asks. A whole RDMA2_CALL_INLINE becomes the call to serve,
    /// as a Version One header view over its chunk lists (the same lists, section 6.3.7).
    /// `awaiting` says which XID is this side's reverse-direction call awaiting its reply
    /// (section 4.6): an RDMA2_REPLY_INLINE with it is that reply.
    fn judge_draft07<'a>(&mut self, bytes: &'a [u8], awaiting: &dyn Fn(u32) -> bool) -> Result<Header<'a>, Asked<'a>> {
        // (A message shorter than the four words is left to the verdict, which drops it:
        // its XID cannot be trusted, section 7.)
        let whole_prefix = |f: &Fixed| f.proc.is_some();
        if let Some(f) = Fixed::read(bytes).filter(|f| whole_prefix(f) && f.vers != rpcrdma_v2::RPCRDMA2_VERSION.wire())
        {
            // Section 7.1.2: another version than the connection's: RDMA2_ERR_VERS_MISMATCH
            // (an error is never answered), the message discarded. The answer's `rdma_vers`
            // is the message's (section 7).
            self.d07.credits.note_received();
            if f.is_error() {
                return Err(Asked::Dropped);
            }
            log::warn!("message {:#010x} in version {} on a -07 connection (section 7.1.2)", f.xid, f.vers);
            return Err(Asked::SendError(self.error07(f.xid, Some(f.vers), RDMA2_ERR_VERS_MISMATCH)));
        }
        // Appendix B.2: a header type the base does not define, which an extension of ours
        // owns (not between the parts of a continued call, which nothing may come between,
        // 6.3.6: that goes on to the base's rules).
        if let Some(m) = ExtensionMessage::parse(bytes).filter(|_| self.d07.reassembly.held() == 0) {
            // The answer to our own extension message (`Backchannel::send_extension`).
            if awaiting(m.xid) {
                self.take_prefix_credit(bytes);
                return Err(Asked::OptionAnswer { xid: m.xid });
            }
            if let Some(outcome) = self.registry07.handle(&m) {
                self.take_prefix_credit(bytes);
                if !self.d07.credits.within_granted() {
                    log::warn!("-07 message {:#010x} arrived beyond the credits granted (section 4.2.1)", m.xid);
                    self.overruns += 1;
                }
                return Err(self.extension_answer(&m, outcome));
            }
        }
        let (low, high) = (self.cfg.versions.0.wire(), self.cfg.versions.1.wire());
        let policy = verdict07::Policy {
            limits: self.cfg.limits,
            supported: Rpcrdma2ErrVers { rdma_vers_low: low, rdma_vers_high: high },
            credit: self.d07.credits.credit_field(),
        };
        let header = match verdict07::receive(bytes, &policy) {
            verdict07::Verdict::Accept(h) => h,
            verdict07::Verdict::PeerError { xid, error } => {
                self.take_prefix_credit(bytes);
                return Err(Asked::PeerError { xid, error: PeerError::Draft07(error) });
            }
            verdict07::Verdict::Reply { reply, reason } => {
                self.take_prefix_credit(bytes);
                log_refusal(&reply, &reason);
                self.over_limits +=
                    u64::from(matches!(reason, HeaderError07::Chunks { source, .. } if source.is_over_limit()));
                // Section 7.3.2: a responder that takes no Write chunk at all, and cannot
                // continue a reply either, answers RDMA2_ERR_REPLY_RESOURCE instead (the length
                // needed unknown, 0: the call is discarded unprocessed).
                let no_write_chunks = matches!(
                    reason,
                    HeaderError07::Chunks {
                        source: rpcrdma_v1::header::HeaderError::TooManyWriteChunks { limit: 0, .. },
                        ..
                    }
                );
                if no_write_chunks && self.cfg.max_reply_parts <= 1 {
                    let body = Rpcrdma2HdrError::Rdma2ErrReplyResource(0);
                    return Err(Asked::SendError(verdict07::error_reply(reply.xid(), self.d07.count_send(), &body)));
                }
                // Its `rdma_credit` is the total after this Receive, and the answer is a Send.
                return Err(Asked::SendError(reply.with_word(offsets::CREDIT, self.d07.count_send())));
            }
            // Appendix B.4: an error code the base does not define, naming our extension
            // message: an extension's own, which ends that exchange.
            verdict07::Verdict::Discard(verdict07::Discard::UnknownErrorCode(code))
                if Fixed::read(bytes).is_some_and(|f| awaiting(f.xid)) =>
            {
                self.take_prefix_credit(bytes);
                let xid = Fixed::read(bytes).map_or(0, |f| f.xid);
                let error = PeerError::Draft07(Rpcrdma2HdrError::Default { discriminant: code });
                return Err(Asked::PeerError { xid, error });
            }
            verdict07::Verdict::Discard(_) => {
                self.d07.credits.note_received();
                return Err(Asked::Dropped);
            }
        };
        if let Err(e) = self.d07.credits.received(header.credit()) {
            log::warn!("{e}: the requester's credit total is kept as it was");
        }
        // Section 4.2.1: the requester sends within the last total this side sent; a GRANT may
        // go one beyond (4.2.1.1). (The per-call ceiling of `take_call` is Version One's.)
        if !self.d07.credits.within_granted() && header.header_type() != HeaderType::Grant {
            log::warn!("-07 message {:#010x} arrived beyond the credits granted (section 4.2.1)", header.xid());
            self.overruns += 1;
        }
        // A reply: the reply to this side's reverse-direction call when it names that call and
        // comes in the Simple format the call was sent in (section 4.6.2), whole and with no
        // chunk; any other is dropped once the requester offered the reverse direction (below),
        // else it is a header type this side does not take (section 6.3:
        // RDMA2_ERR_INVAL_HTYPE). Judged before continuation sees it, which would otherwise
        // keep a REPLY_MIDDLE's sequence open against the calls after it.
        let htype = header.header_type();
        if htype == HeaderType::ReplyInline && awaiting(header.xid()) {
            return Err(self.reverse_reply(header));
        }
        // A reply to none of ours on a connection whose requester offered the reverse
        // direction: one to a reverse-direction call given up (timed out) before its reply
        // came, dropped as a reply to no call is; answering it INVAL_HTYPE would tell the
        // requester replies are not taken here, and fail its own call of the same XID.
        let offered = self.d07.theirs.as_ref().is_some_and(|p| p.reverse_direction != ReverseDirection::None);
        if htype.is_reply() && offered {
            log::info!("-07 {htype:?} {:#010x} answers no reverse-direction call of ours: dropped", header.xid());
            return Err(Asked::Dropped);
        }
        if htype.is_reply() {
            log::warn!("-07 {htype:?} {:#010x} not taken on a responder's connection", header.xid());
            return Err(Asked::SendError(self.error07(header.xid(), None, RDMA2_ERR_INVAL_HTYPE)));
        }
        match self.d07.reassembly.receive(header) {
            Step::Whole { header, message: Cow::Borrowed(message) }
                if header.header_type() == HeaderType::CallInline =>
            {
                let (xid, vers) = (header.xid(), rpcrdma_v2::RPCRDMA2_VERSION.wire());
                let kind = MessageKind::Msg;
                let view = Header::from_lists(
                    xid,
                    vers,
                    header.credit(),
                    kind,
                    header.chunk_lists(),
                    header.header_len(),
                    message,
                );
                match view {
                    Ok(view) => {
                        self.note_inv_handle(&header);
                        Ok(view)
                    }
                    Err(e) => {
                        log::warn!("-07 call {xid:#010x} refused: {e}");
                        Err(Asked::SendError(self.error07(xid, None, RDMA2_ERR_BAD_XDR)))
                    }
                }
            }
            Step::Whole { header, message } if header.header_type() == HeaderType::CallInline => {
                // The parts assembled: the call and its header go into a buffer of their own.
                let (rewritten, view) = header.version_one_shaped(MessageKind::Msg, &message);
                (self.d07.rewritten, self.d07.rewritten_view) = (Some(rewritten), Some(view));
                self.note_inv_handle(&header);
                Err(Asked::Rewritten)
            }
            Step::Whole { header, .. } | Step::Other(header) => match header.header_type() {
                HeaderType::Grant => Err(Asked::Taken),
                HeaderType::ConnPropMiddle | HeaderType::ConnPropFinal => Err(self.take_properties(&header)),
                HeaderType::CallExternal => {
                    // The whole call is in the Call chunk (section 6.3.5): Version One's
                    // RDMA_NOMSG with that chunk at position zero, as the serving path reads it.
                    let (rewritten, view) = header.version_one_shaped(MessageKind::NoMsg, &[]);
                    (self.d07.rewritten, self.d07.rewritten_view) = (Some(rewritten), Some(view));
                    self.note_inv_handle(&header);
                    Err(Asked::Rewritten)
                }
                // (CONNPROP and replies were answered above; an ERROR is a PeerError.)
                t => {
                    log::warn!("-07 {t:?} {:#010x} not taken on a responder's connection", header.xid());
                    Err(Asked::SendError(self.error07(header.xid(), None, RDMA2_ERR_INVAL_HTYPE)))
                }
            },
            // A part kept: the requester may have no credit left for the next one (before this
            // side's first header it has one message in all, section 4.2.1), and nothing else
            // goes back until the sequence ends, so a GRANT opens its window when one is due
            // (4.2.1.1).
            Step::Held => Err(self.grant_if_due().map_or(Asked::Taken, Asked::SendBack)),
            Step::Refused { xid, answer: body, reason, .. } => {
                log::warn!("-07 message {xid:#010x} refused: {reason}");
                Err(Asked::SendError(verdict07::error_reply(xid, self.d07.count_send(), &body)))
            }
            Step::Dropped { .. } => Err(Asked::Dropped),
        }
    }
}

/// Says why a message is refused, with the rule it broke and, for a limit, the limit and the
/// size (`HeaderError::ChunkTooLong`: "a chunk of 4194304 bytes exceeds the limit 2097152"):
/// at info for RDMA_ERR_VERS, which answers a probe as negotiation asks (draft section 5.2),
/// as a warning for the rest.
fn log_refusal(reply: &ErrorReply, reason: &dyn std::fmt::Display) {
    let level = if reply.code() == 1 { log::Level::Info } else { log::Level::Warn };
    log::log!(level, "refusing message {:#010x} with RDMA_ERROR code {}: {reason}", reply.xid(), reply.code());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extension07::{Draft07Extension, Registry07};

    /// Appendix B.4 with section 4.2.1, the core alone, counting its Sends as it judges
    /// (no [`Responder::count_draft07_sends_when_posted`]): an answer too large for the
    /// requester's Receive is not sent, so only the RDMA2_ERR_SYSTEM sent instead takes a
    /// place in the requester's window. (Before the fourteenth session both were counted.)
    #[test]
    fn an_answer_too_large_to_send_takes_no_place_in_the_window() {
        let big = Draft07Extension::new([0xF000_0001], |_: &ExtensionMessage<'_>| ExtensionOutcome::Answer {
            htype: 0xF000_0002,
            body: vec![0; 8192],
        });
        let mut r = Responder::new(ResponderConfig::default().draft07(true));
        r.set_draft07_registry(Registry07::of(&[big]));
        r.handle_connected(&[], None);
        // A call settles -07 (the requester's total 40), and its reply is one Send.
        let rpc: Vec<u8> = [1u32, 0, 2, 100003, 3, 0, 0, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
        let mut call = [0u8; 128];
        let n = rpcrdma_v2::draft07::marshal::call_inline(
            &mut call,
            1,
            40,
            0,
            &rpcrdma_v2::draft07::marshal::NO_CHUNKS,
            &rpc,
        )
        .unwrap();
        assert!(matches!(r.handle_receive(&call[..n]), Asked::Call(_)));
        r.reply_params(1).unwrap();
        assert_eq!(r.d07.credits.window(), 39);
        // The extension message (total 41): refused with RDMA2_ERR_SYSTEM, one more Send.
        let m = ExtensionMessage::to_message(7, 41, 0xF000_0001, &[]);
        let Asked::SendError(e) = r.handle_receive(&m) else { panic!("not refused") };
        let e = rpcrdma_v2::draft07::header::Header::parse(e.as_bytes(), &Default::default()).unwrap().error();
        assert_eq!(e.map(|e| e.code()), Some(rpcrdma_v2::draft07::xdr::RDMA2_ERR_SYSTEM));
        assert_eq!(r.d07.credits.window(), 39, "41 granted, two Sends counted");
    }
}
