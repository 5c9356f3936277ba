//! The requester's connection lifecycle as a sans-I/O state machine: which version each call
//! goes out in, with which thresholds and credits, what a reply or an RDMA_ERROR means, and
//! what happens on a timeout or a lost connection. Bytes and clock readings go in; [`Action`]s
//! come out ([`Requester::poll_action`]); the driver does the I/O and the marshaling.
//!
//! Version negotiation (draft-cel-nfsv4-rpcrdma-version-two-00 section 5): on each new
//! connection the first call goes out with `rdma_vers` 2, no larger than 1024 bytes, alone (one
//! credit until a non-error reply, section 5 and RFC 8166 section 3.3.3).
//!
//! - A non-error reply settles Version Two (5.1) with its thresholds.
//! - RDMA_ERR_VERS (whose `rdma_vers` may be 2, as Linux echoes, or 1, as libevpl sends)
//!   settles the highest version both support (5.2), switches the thresholds without touching
//!   the connection, and sends the refused call again in that version.
//! - Any other RDMA_ERROR answering the probe (ERR_CHUNK, which Version Two calls
//!   RDMA_ERR_BAD_HEADER, or RDMA_ERR_INVAL_OPTION) fails that call alone and settles Version
//!   Two: a responder answers ERR_CHUNK only to an `rdma_vers` it recognizes (RFC 8166 section
//!   5.5.2). A malformed answer fails that call alone and tells nothing: the next call probes.
//! - A probe that gets no answer in time is treated like any call that times out: the
//!   connection is closed first and the call goes out again only on the next one (RFC 8166
//!   sections 3.3.3 and 4.5.4: on the same connection the responder may still be running it,
//!   and would see a second call beyond its single credit). If the connection goes down with
//!   the probe still unanswered, or right after RDMA_ERR_VERS, the requester remembers that
//!   this responder lacks Version Two ([`PeerMemory`]), so the next connection starts in
//!   Version One (5.2: "if the initial negotiation message is lost or dropped"). A Version Two
//!   reply that arrives late but before the connection is down completes the call and keeps
//!   the responder Version Two capable.
//!
//! Every call ends in exactly one [`Incoming::Reply`] (returned by [`Requester::handle_receive`]),
//! one [`Action::Failed`], or a [`Requester::cancel`] by the driver.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use rpcrdma_v1::credits::{Credit, RequesterCredits};
use rpcrdma_v1::header::HeaderLimits;
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::Version;

use rpcrdma_v2::options::Registry;

use rpcrdma_v1::header::Fixed;
use rpcrdma_v2::dialect::{after_refusal, Dialect, Next, Speaks, VersionTwo};
use rpcrdma_v2::draft07::properties::ReverseDirection;

use crate::memory::{NoV2Reason, PeerMemory};
use crate::own_keys::{self, XidMap};
use crate::reply::{self, draft07, Incoming, PeerError};
use crate::thresholds::{Advertised, SegmentLimits, Stated};
use rpcrdma_v2::properties::TransportProperties;

/// How a requester behaves.
///
/// ```
/// use std::time::Duration;
/// use negotiate::requester::RequesterConfig;
/// use rpcrdma_v1::Version;
/// let v1 = RequesterConfig::default().versions((Version::ONE, Version::ONE)).timeout(Duration::from_secs(1));
/// assert_eq!((v1.credits, v1.max_attempts), (32, 3)); // the rest stays at its default
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequesterConfig {
    /// The versions it speaks, inclusive: `(1, 2)` probes for Version Two and falls back,
    /// `(1, 1)` is a Version One requester.
    pub versions: (Version, Version),
    /// The `rdma_credit` it asks for.
    pub credits: u32,
    /// How long a transmitted call may wait for its reply.
    pub timeout: Duration,
    /// Attempts of one call before it fails: each transmission costs one, and so does each
    /// connection attempt that fails while the call waits for a connection.
    pub max_attempts: u32,
    /// Limits applied to received replies.
    pub limits: HeaderLimits,
    /// How long a responder found to lack Version Two ([`PeerMemory`]) is offered Version One
    /// only; after that a new connection probes again. What was learned of its dialect is
    /// kept as long.
    pub reprobe_after: Duration,
    /// Which Version Two it speaks when `versions` reaches 2: draft-cel-00, draft-ietf-07, or
    /// both with one preferred (docs/design.md, "Version Two's two dialects").
    /// [`VersionTwo::None`] makes it a Version One requester.
    pub version_two: VersionTwo,
    /// The most Sends one -07 call may continue across when it does not fit the responder's
    /// Receive: RDMA2_CALL_MIDDLE parts and a final RDMA2_CALL_INLINE (sections 4.1, 6.3.6),
    /// the whole message inline, each part on a credit of its own (4.2.1). A call needing more
    /// Sends, or more than the responder's window has room for when it goes, travels in a
    /// Call chunk instead (RDMA2_CALL_EXTERNAL, 6.3.5), as do calls longer than
    /// [`MAX_CONTINUED_CALL`], calls whose message is lent (`Client::call_lent`, whose point
    /// is the responder's RDMA Read from the caller's buffer), the probe, and every call on
    /// the other versions. 1 continues nothing; the default is [`MAX_CALL_PARTS`].
    pub max_call_parts: usize,
    /// For tests only: where a -07 connection's credit counters start on this side
    /// (`CreditWindow::starting_at`), 0 as section 4.2.1 has it. Both sides must start at the
    /// same count; the simulator starts them near 2^32, so that the running totals wrap past
    /// zero within a short run.
    #[doc(hidden)]
    pub draft07_counters_from: u32,
}

/// -07's default inline threshold (section 4.2.2), the most an RDMA2_CONNPROP_FINAL may take
/// (6.3.4).
const DEFAULT_INLINE_07: usize = rpcrdma_v2::draft07::DEFAULT_INLINE_THRESHOLD;

/// The default of [`RequesterConfig::max_call_parts`]: a call of up to about four Receives
/// goes by Send alone, which costs the responder no registration and no RDMA Read, and stays
/// within what a responder holds of one continued message by default (64 KiB for this crate's
/// `ResponderConfig::max_continued`, at -07's 4096-byte inline threshold).
pub const MAX_CALL_PARTS: usize = 4;

/// The longest -07 call that continues across Sends ([`RequesterConfig::max_call_parts`]):
/// what a responder of this crate holds of one continued message by default
/// (`ResponderConfig::max_continued`), whatever size of Receive the responder states; a
/// longer call goes in a Call chunk, which any responder reads.
pub const MAX_CONTINUED_CALL: usize = 64 << 10;

/// The default of [`RequesterConfig::reprobe_after`]: ten minutes.
pub const REPROBE_AFTER: Duration = Duration::from_secs(600);

impl Default for RequesterConfig {
    /// Versions 1 to 2, 32 credits, 5 s, 3 attempts, Linux's header limits, a responder
    /// lacking Version Two probed again after [`REPROBE_AFTER`].
    fn default() -> Self {
        RequesterConfig {
            versions: (Version::ONE, Version::TWO),
            credits: 32,
            timeout: Duration::from_secs(5),
            max_attempts: 3,
            limits: HeaderLimits::default(),
            reprobe_after: REPROBE_AFTER,
            version_two: VersionTwo::One(Dialect::Cel00),
            max_call_parts: MAX_CALL_PARTS,
            draft07_counters_from: 0,
        }
    }
}

rpcrdma_verbs::setters!(RequesterConfig {
    versions: (Version, Version),
    credits: u32,
    timeout: Duration,
    max_attempts: u32,
    limits: HeaderLimits,
    reprobe_after: Duration,
    version_two: VersionTwo,
    max_call_parts: usize,
});

/// Send call `xid` now: marshal it in `version`, asking for `credits`, within `thresholds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The call's XID.
    pub xid: u32,
    /// The `rdma_vers` to put in its header.
    pub version: Version,
    /// The `rdma_credit` to put in its header.
    pub credits: u32,
    /// The connection's inline thresholds for this call (a probe's call threshold is 1024).
    pub thresholds: InlineThresholds,
    /// Whether this is the Version Two probe.
    pub probe: bool,
    /// For `version` 2, the dialect to write its header in; `None` for Version One.
    pub dialect: Option<Dialect>,
    /// On -07, whether the call asks the responder to invalidate its chunks' handle (section
    /// 6.5): when this requester takes remote invalidation, which its RFC 8797 private data
    /// says with the R flag (the default, as Linux); false on the other versions, where the
    /// R flags decide on their own.
    pub remote_invalidation: bool,
    /// How its chunks may be cut into segments: on -07 the responder's stated (or default)
    /// segment size and count, sections 5.2.3 and 5.2.4; no bound on the other versions.
    pub segments: SegmentLimits,
    /// The most Sends the call may continue across when it does not fit the responder's
    /// Receive (-07 only, not the probe: [`RequesterConfig::max_call_parts`]); 1 elsewhere.
    /// The parts after the first take their running totals with
    /// [`Requester::take_call_parts`] as the call goes.
    pub max_parts: usize,
    /// 1 for the first transmission, then one more per retransmission. Going again after a
    /// probe refused for its version or dialect is not one: the probe was not run.
    pub attempt: u32,
}

/// Why a call failed. For the three that end a call after its attempts (`TimedOut`,
/// `ConnectFailed`, `ConnectionLost`), the variant is what happened to the last attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallFailure {
    /// The responder answered with RDMA_ERROR.
    #[error("the responder answered RDMA_ERROR {0}")]
    Peer(PeerError),
    /// The responder supports only versions we do not.
    #[error("the responder supports versions {low} to {high}, none of ours")]
    NoCommonVersion {
        /// Its lowest version.
        low: u32,
        /// Its highest version.
        high: u32,
    },
    /// The reply broke the protocol's rules.
    #[error("malformed reply: {0}")]
    MalformedReply(rpcrdma_v2::verdict::Reason),
    /// No reply within the timeout on the last attempt (each timed-out attempt closed its
    /// connection, RFC 8166 section 4.5.4).
    #[error("no reply within the timeout; gave up after {attempts} attempts")]
    TimedOut {
        /// Attempts made.
        attempts: u32,
    },
    /// The last attempt could not be made: the connection for it failed
    /// ([`Requester::handle_connect_failed`]).
    #[error("could not connect; gave up after {attempts} attempts")]
    ConnectFailed {
        /// Attempts made.
        attempts: u32,
    },
    /// The connection went down under the last attempt before its reply (the peer or the
    /// transport closed it: [`Requester::handle_disconnected`] with the call in flight and its
    /// deadline not passed).
    #[error("connection lost; gave up after {attempts} attempts")]
    ConnectionLost {
        /// Attempts made.
        attempts: u32,
    },
    /// An RDMA_OPTIONAL ([`Requester::start_option`]) needs a connection settled on Version
    /// Two (draft section 3.1: Version One has no RDMA_OPTIONAL); this one is not (it settled
    /// on Version One, or is still probing, or is down).
    #[error("RDMA_OPTIONAL needs a connection settled on Version Two")]
    NotVersionTwo,
}

/// What the driver must do or learn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Establish a connection to the responder, sending this requester's private data.
    Connect,
    /// Close the connection: a call timed out, so its memory must be fenced and the call
    /// retransmitted on a new connection (RFC 8166 section 4.5.4 / draft 5.5.4).
    Disconnect,
    /// Marshal and send a call.
    Transmit(Transmit),
    /// A call failed; release its resources.
    Failed {
        /// The call's XID.
        xid: u32,
        /// Why.
        error: CallFailure,
    },
    /// The connection's version is settled (informational).
    Settled {
        /// The version.
        version: Version,
        /// Its thresholds.
        thresholds: InlineThresholds,
    },
}

enum Negotiation {
    /// The next call is the probe; then `Some(xid)` until its answer.
    Probing(Option<u32>),
    Settled(Version),
}

struct Conn {
    advertised: Advertised,
    /// The transport properties both sides stated, once exchanged (Version Two only).
    stated: Stated,
    version: Negotiation,
    credits: RequesterCredits,
    /// RDMA_ERR_VERS arrived and no reply has since: losing the connection now means the
    /// responder lacks Version Two (draft 5.2).
    after_err_vers: bool,
    /// A call timed out and [`Action::Disconnect`] went out: nothing more is sent on this
    /// connection (RFC 8166 section 4.5.4: its calls are retransmitted on the next one).
    closing: bool,
    /// The Version Two dialect the probe goes out in, and the connection speaks once settled
    /// on Version Two.
    dialect: Dialect,
    /// The dialects whose first message the responder refused on this connection
    /// ([`after_refusal`]).
    refused: Vec<Dialect>,
    /// The -07 connection's credit totals and reply reassembly, while its dialect is -07 and
    /// it has not fallen back to Version One.
    d07: Option<draft07::State>,
    /// Since when the -07 window has been shut with calls waiting and none in flight.
    shut_since: Option<Instant>,
}

impl Conn {
    /// The thresholds calls go out with in `version` once settled: what private data and the
    /// -00 properties exchange give (`Stated::thresholds`), with, on -07, the call threshold
    /// the responder's stated receive buffer size gives (section 5.2.2) once it stated one.
    fn thresholds(&self, version: Version) -> InlineThresholds {
        let t = self.stated.thresholds(&self.advertised, version);
        // (RFC 8797's private data, whose Send size would cap this on Version One, is not
        // -07's way of stating sizes: its CONNPROP is.)
        match self.d07.as_ref().and_then(draft07::State::peer_receive_size) {
            Some(call) if version == Version::TWO => InlineThresholds { call: call as usize, ..t },
            _ => t,
        }
    }
}

struct Call {
    attempts: u32,
    flight: Option<Flight>,
    kind: CallKind,
}

/// What a transaction of the requester's sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallKind {
    /// An RPC call, answered by a reply.
    Rpc,
    /// A call-only procedure's call ([`Requester::start_call_only`]): over once sent; it goes
    /// only on a connection settled on -07.
    CallOnly,
    /// A message of ours that is not an RPC call, in its dialect's form: -00's RDMA_OPTIONAL
    /// ([`Requester::start_option`]) or a -07 extension's ([`Requester::start_extension`]). It
    /// goes only on a connection settled in that dialect.
    Option(Dialect),
}

impl CallKind {
    /// The Version Two dialect the connection must be settled in for it to go, if any.
    fn needs(self) -> Option<Dialect> {
        match self {
            CallKind::Rpc => None,
            CallKind::CallOnly => Some(Dialect::Ietf07),
            CallKind::Option(d) => Some(d),
        }
    }

    fn is_option(self) -> bool {
        matches!(self, CallKind::Option(_))
    }
}

impl Call {
    fn new(kind: CallKind) -> Call {
        Call { attempts: 0, flight: None, kind }
    }
}

struct Flight {
    credit: Credit,
    version: Version,
    deadline: Instant,
    probe: bool,
    /// Its deadline passed: it waits for the disconnect (or a late reply) and goes out again
    /// on the next connection.
    timed_out: bool,
}

/// The requester side of one responder address, across its connections.
///
/// ```
/// use std::time::Instant;
/// use negotiate::requester::{RequesterConfig, Action, Requester};
/// let now = Instant::now();
/// let mut r = Requester::new(RequesterConfig::default(), "10.0.2.15:20049");
/// assert_eq!(r.poll_action(), Some(Action::Connect));
/// r.handle_connected(None, &[], now);
/// r.call(7, now).unwrap();
/// let Some(Action::Transmit(t)) = r.poll_action() else { panic!() };
/// assert_eq!((t.xid, t.version.wire(), t.probe, t.thresholds.call), (7, 2, true, 1024));
/// ```
pub struct Requester {
    cfg: RequesterConfig,
    addr: String,
    /// What this side states in its -07 RDMA2_CONNPROP_FINAL beside its receive size.
    host_auth: Option<crate::host_auth::HostAuth>,
    /// The reverse direction this side offers on -07 ([`Requester::set_reverse_direction`]).
    reverse: ReverseDirection,
    /// The handlers of -07 extensions' header types ([`Requester::set_draft07_registry`]).
    registry07: crate::extension07::Registry07,
    memory: PeerMemory,
    conn: Option<Conn>,
    connecting: bool,
    /// Calls in progress by XID. A hash map: it keeps its memory as calls come and go (a
    /// B-tree's nodes were allocated and freed as calls did); where the order matters, the
    /// XIDs are sorted.
    calls: XidMap<Call>,
    queue: VecDeque<u32>,
    events: VecDeque<Action>,
    /// The extensions' handlers for RDMA_OPTIONAL messages from the responder (Version Two).
    registry: Registry,
    /// Messages of this side's own to send on the current connection, already marshaled and
    /// counted: a -07 RDMA2_CONNPROP_FINAL ([`Requester::poll_transmit`]).
    transmits: VecDeque<Vec<u8>>,
    /// No deadline [`Requester::poll_timeout`] counts is earlier than this; `None`: not known.
    /// Kept so that [`Requester::is_due`], asked after every received message, looks at the
    /// calls only when a deadline may have passed: a loaded client has many in flight, and
    /// scanning them for each reply was a tenth of its thread's time in the async load. Each
    /// deadline set lowers it; deadlines going away leave it a lower bound.
    due_from: Option<Instant>,
}

/// What an RDMA_ERROR answering the probe means ([`after_refusal`]).
enum Refusal {
    /// The call goes out again, on the same connection: in Version One or the other dialect.
    GoesOn,
    /// The error is about the call: it fails with it, and the version is settled (the
    /// responder read the probe).
    CallFails,
    /// The responder speaks nothing this requester does: the call fails with the error and
    /// the version stays unsettled (the next call probes again).
    Nowhere,
}

/// [`Requester::call`] with an XID that is already in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("XID {0:#010x} is already in use by a call in progress")]
pub struct DuplicateXid(pub u32);

impl Requester {
    /// A requester for the responder at `addr`; its first event is [`Action::Connect`].
    pub fn new(cfg: RequesterConfig, addr: &str) -> Self {
        Self::with_memory(cfg, addr, PeerMemory::default())
    }

    /// A requester that starts from what an earlier one learned about responders.
    pub fn with_memory(cfg: RequesterConfig, addr: &str, memory: PeerMemory) -> Self {
        Requester {
            cfg,
            addr: addr.to_string(),
            host_auth: None,
            reverse: ReverseDirection::None,
            registry07: crate::extension07::Registry07::default(),
            memory,
            conn: None,
            connecting: true,
            // Room for a loaded client's calls at once: its steady state allocates nothing.
            calls: own_keys::with_capacity(crate::own_keys::CALLS_AT_ONCE),
            queue: VecDeque::with_capacity(crate::own_keys::CALLS_AT_ONCE),
            events: VecDeque::from([Action::Connect]),
            registry: Registry::new(),
            transmits: VecDeque::new(),
            due_from: None,
        }
    }

    /// Whether [`Requester::handle_timeout`] has anything to do at `now`: a deadline of
    /// [`Requester::poll_timeout`]'s has passed. Usually answered without looking at the calls.
    pub fn is_due(&mut self, now: Instant) -> bool {
        if self.due_from.is_some_and(|t| now < t) {
            return false;
        }
        let next = self.poll_timeout();
        // Nothing timed: every deadline set from here on is at least `now` plus the timeout,
        // and lowers the bound in any case.
        self.due_from = Some(next.unwrap_or_else(|| crate::limits::deadline(now, self.cfg.timeout)));
        next.is_some_and(|t| t <= now)
    }

    /// A deadline was set: the bound of [`Requester::is_due`] comes down to it.
    fn deadline_set(&mut self, at: Instant) {
        self.due_from = self.due_from.map(|t| t.min(at));
    }

    /// The handlers for RDMA_OPTIONAL messages the responder sends on a connection settled on
    /// Version Two ([`crate::extension::registry`]); without, each is answered with
    /// RDMA_ERR_INVAL_OPTION (draft section 3.1).
    pub fn set_registry(&mut self, registry: Registry) {
        self.registry = registry;
    }

    /// What this requester has learned about responders.
    pub fn memory(&self) -> &PeerMemory {
        &self.memory
    }

    /// The connection's version, once settled.
    pub fn version(&self) -> Option<Version> {
        match self.conn.as_ref()?.version {
            Negotiation::Settled(v) => Some(v),
            Negotiation::Probing(_) => None,
        }
    }

    /// The host authentication material this side states in its -07 RDMA2_CONNPROP_FINAL
    /// (section 5.2.6), from the next connection's settling on.
    pub fn set_host_auth(&mut self, ours: Option<crate::host_auth::HostAuth>) {
        self.host_auth = ours;
    }

    /// The reverse direction this side offers in its -07 RDMA2_CONNPROP_FINAL (RDMA2_PROPID_BRS,
    /// section 5.2.5), from the next connection's settling on: `Simple` when a backchannel
    /// handler answers the responder's calls (the Simple format, no chunks: what
    /// [`Client::with_backchannel`](crate::client::Client::with_backchannel) takes), `None`
    /// (the default) when nothing does, and then a responder must send none (4.6.3).
    pub fn set_reverse_direction(&mut self, offered: ReverseDirection) {
        self.reverse = offered;
    }

    /// The -07 extensions of this side (Appendix B): the handlers of their header types, and
    /// the properties they state in this side's RDMA2_CONNPROP_FINAL from the next connection
    /// settled on -07 on.
    pub fn set_draft07_registry(&mut self, registry: crate::extension07::Registry07) {
        self.registry07 = registry;
    }

    /// Holds `reply`, this side's answer to the responder's reverse-direction call (an
    /// RDMA2_REPLY_INLINE, or an RDMA2_ERROR), until the responder's window has room for it:
    /// it then comes out of [`Requester::poll_transmit`] carrying the running total (section
    /// 4.2.1). Dropped, and false, on a connection not settled on -07, or with
    /// `reply::draft07::ANSWERS_HELD` answers held already.
    pub fn queue_reverse_reply(&mut self, reply: Vec<u8>) -> bool {
        let Some(conn) = self.conn.as_mut().filter(|c| !c.closing) else { return false };
        let Some(st) = conn.d07.as_mut().filter(|_| matches!(conn.version, Negotiation::Settled(Version::TWO))) else {
            return false;
        };
        if !st.hold_answer(reply) {
            log::warn!("-07: too many replies to reverse-direction calls wait for the window; one dropped");
            return false;
        }
        st.owed_due(&mut self.transmits);
        true
    }

    /// The responder's -07 properties on the current connection, once its
    /// RDMA2_CONNPROP_FINAL came (section 5): its receive size, segment size and count, and
    /// host authentication material (5.2.6), for the application's policy to judge.
    pub fn draft07_peer_properties(&self) -> Option<&rpcrdma_v2::draft07::properties::Properties> {
        self.conn.as_ref()?.d07.as_ref()?.peer_properties()
    }

    /// The Version Two dialect of the connection, once settled on Version Two.
    pub fn dialect(&self) -> Option<Dialect> {
        let c = self.conn.as_ref()?;
        matches!(c.version, Negotiation::Settled(Version::TWO)).then_some(c.dialect)
    }

    /// The connection's thresholds for the version calls go out in now.
    pub fn thresholds(&self) -> Option<InlineThresholds> {
        let c = self.conn.as_ref()?;
        Some(match c.version {
            Negotiation::Settled(v) => c.thresholds(v),
            Negotiation::Probing(_) => c.advertised.for_probe(),
        })
    }

    /// The credit window: calls that may be in flight at once now.
    pub fn window(&self) -> u32 {
        self.conn.as_ref().map_or(0, |c| c.credits.window())
    }

    /// Grants of zero the responder sent (a fault: RFC 8166 section 3.3.1).
    pub fn peer_faults(&self) -> u64 {
        self.conn.as_ref().map_or(0, |c| c.credits.peer_faults())
    }

    /// Calls accepted and not yet completed.
    pub fn pending(&self) -> usize {
        self.calls.len()
    }

    /// The next thing for the driver to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.events.pop_front()
    }

    /// The next message of this side's own the driver must send on the current connection,
    /// marshaled and counted against the responder's credits: on -07, its
    /// RDMA2_CONNPROP_FINAL, queued when the connection settles (section 6.3.4: "Each peer
    /// sends an RDMA2_CONNPROP_FINAL ... after the client has established a connection"), an
    /// RDMA2_GRANT when the responder's window needs one (4.2.1.1), and its answers to the
    /// responder's messages held for room in the window (replies to reverse-direction calls,
    /// an extension's answers and refusals).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transmits.pop_front()
    }

    /// When [`Requester::handle_timeout`] must be called next. `None` while the connection is being
    /// closed: what is awaited then is [`Requester::handle_disconnected`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        let conn = self.conn.as_ref();
        if conn.is_some_and(|c| c.closing) {
            return None;
        }
        let shut = conn.and_then(|c| c.shut_since).map(|t| t + self.cfg.timeout);
        let flights =
            self.calls.values().filter_map(|c| c.flight.as_ref().filter(|f| !f.timed_out).map(|f| f.deadline));
        flights.chain(shut).min()
    }

    /// A connection is up. `ours` is the private data this requester sent (if any), `accepted`
    /// what the responder's accept carried (searched for RFC 8797 data at any offset).
    pub fn handle_connected(&mut self, ours: Option<PrivateData>, accepted: &[u8], now: Instant) {
        self.connecting = false;
        let advertised = Advertised { requester: ours, responder: PrivateData::find(accepted) };
        log::info!(
            "connected to {}: private data sent {:?}, received {:?} ({} bytes)",
            self.addr,
            advertised.requester,
            advertised.responder,
            accepted.len()
        );
        let (low, high) = self.cfg.versions;
        let high = if self.cfg.version_two.first().is_none() { high.min(Version::ONE) } else { high };
        let highest = self.memory.highest_for(&self.addr, high, now);
        if highest < high {
            log::info!("{} is remembered to speak versions up to {}: no Version Two probe", self.addr, highest.wire());
        }
        let version = if highest >= Version::TWO { Negotiation::Probing(None) } else { Negotiation::Settled(highest) };
        let credits = RequesterCredits::new(self.cfg.credits);
        let stated = Stated::default();
        // The dialect the responder was last seen to settle in, if this side speaks it; else
        // its preferred one.
        let v2 = self.cfg.version_two;
        let dialect =
            self.memory.dialect_for(&self.addr, now).filter(|&d| v2.speaks(d)).or(v2.first()).unwrap_or(Dialect::Cel00);
        let d07 = (highest >= Version::TWO && dialect == Dialect::Ietf07)
            .then(|| draft07::State::new(self.cfg.credits, self.cfg.draft07_counters_from));
        self.conn = Some(Conn {
            advertised,
            stated,
            version,
            credits,
            after_err_vers: false,
            closing: false,
            dialect,
            refused: Vec::new(),
            d07,
            shut_since: None,
        });
        if highest < low {
            // What we learned earlier: the responder's versions end below ours.
            self.fail_all(CallFailure::NoCommonVersion { low: Version::ONE.wire(), high: highest.wire() });
            return;
        }
        if let Negotiation::Settled(v) = self.conn.as_ref().unwrap().version {
            self.events.push_back(Action::Settled { version: v, thresholds: advertised.for_version(v) });
        }
        self.pump(now);
    }

    /// The connection could not be made: every waiting call spends an attempt.
    pub fn handle_connect_failed(&mut self, _now: Instant) {
        self.connecting = false;
        let xids: Vec<u32> = self.queue.iter().copied().collect();
        for xid in xids {
            self.spend_attempt(xid);
        }
        self.want_connection();
    }

    /// Starts call `xid`; it goes out when the connection and a credit allow. `xid` is one this
    /// side drew: the calls are kept in a map whose hash assumes no peer chose its keys
    /// (`own_keys`: a peer that did could make lookups walk every call in progress).
    pub fn call(&mut self, xid: u32, now: Instant) -> Result<(), DuplicateXid> {
        if self.calls.contains_key(&xid) {
            return Err(DuplicateXid(xid));
        }
        self.calls.insert(xid, Call::new(CallKind::Rpc));
        self.queue.push_back(xid);
        self.want_connection();
        self.pump(now);
        Ok(())
    }

    /// Starts RDMA_OPTIONAL `xid` (draft section 3.1): it is a message like a call, so it
    /// waits for a credit and holds it until its outcome (RFC 8166 section 3.3.1: every
    /// message a requester sends takes one of the responder's Receives, and "A Requester MUST
    /// NOT send unacknowledged requests in excess of this granted Responder credit limit").
    /// Its outcome is the responder's answering RDMA_OPTIONAL ([`Incoming::OptionAnswer`]),
    /// its RDMA_ERROR ([`CallFailure::Peer`], RDMA_ERR_INVAL_OPTION when unsupported), or a
    /// failure event. Unlike a call it is never sent again: a timeout fails it alone
    /// ([`Requester::handle_timeout`]) and a lost connection fails it
    /// ([`CallFailure::ConnectionLost`]). On a connection not settled on Version Two it fails
    /// at once with [`CallFailure::NotVersionTwo`].
    ///
    /// ```
    /// use std::time::Instant;
    /// use negotiate::requester::{CallFailure, RequesterConfig, Action, Requester};
    /// let now = Instant::now();
    /// let mut r = Requester::new(RequesterConfig::default(), "a");
    /// r.poll_action(); // Connect
    /// r.handle_connected(None, &[], now); // probing: not settled
    /// r.start_option(9, now).unwrap();
    /// assert_eq!(r.poll_action(), Some(Action::Failed { xid: 9, error: CallFailure::NotVersionTwo }));
    /// ```
    pub fn start_option(&mut self, xid: u32, now: Instant) -> Result<(), DuplicateXid> {
        self.start_message(xid, Dialect::Cel00, now)
    }

    /// Starts a message of a -07 extension's header type, `xid` (Appendix B.2,
    /// [`crate::extension07`]), as [`Requester::start_option`] starts an RDMA_OPTIONAL: it
    /// needs a connection settled on -07 (else it fails with [`CallFailure::NotVersionTwo`]),
    /// takes a credit, and ends with the responder's message with its XID, or the RDMA2_ERROR
    /// naming it, whatever its code (B.4).
    pub fn start_extension(&mut self, xid: u32, now: Instant) -> Result<(), DuplicateXid> {
        self.start_message(xid, Dialect::Ietf07, now)
    }

    /// Starts call `xid` of a call-only procedure (draft-ietf-nfsv4-rpcrdma-version-two-07
    /// section 4.7: "There is no corresponding Reply"): it waits for its turn and a place in
    /// the responder's window as a call does, and ends once sent
    /// ([`Requester::sent_call_only`]), never sent again. It needs a connection settled on
    /// -07, whose credits are running totals that the responder's later messages raise
    /// whatever they answer: on another, or one not settled yet, it fails at once with
    /// [`CallFailure::NotVersionTwo`]; if its connection is lost before it is sent, it fails
    /// with [`CallFailure::ConnectionLost`] when the next one comes up.
    ///
    /// ```
    /// use std::time::Instant;
    /// use negotiate::requester::{CallFailure, RequesterConfig, Action, Requester};
    /// let now = Instant::now();
    /// let mut r = Requester::new(RequesterConfig::default(), "a");
    /// r.poll_action(); // Connect
    /// r.handle_connected(None, &[], now); // probing: not settled
    /// r.start_call_only(9, now).unwrap();
    /// assert_eq!(r.poll_action(), Some(Action::Failed { xid: 9, error: CallFailure::NotVersionTwo }));
    /// ```
    pub fn start_call_only(&mut self, xid: u32, now: Instant) -> Result<(), DuplicateXid> {
        if self.calls.contains_key(&xid) {
            return Err(DuplicateXid(xid));
        }
        if self.dialect() != Some(Dialect::Ietf07) {
            self.events.push_back(Action::Failed { xid, error: CallFailure::NotVersionTwo });
            return Ok(());
        }
        self.calls.insert(xid, Call::new(CallKind::CallOnly));
        self.queue.push_back(xid);
        self.pump(now);
        Ok(())
    }

    /// Call-only call `xid`'s transmission was sent: it is over, its place among the calls
    /// in flight free again (the Sends it took stay counted in the window, 4.2.1). False if
    /// no such call-only call was in flight.
    pub fn sent_call_only(&mut self, xid: u32, now: Instant) -> bool {
        if !self.calls.get(&xid).is_some_and(|c| c.kind == CallKind::CallOnly && c.flight.is_some()) {
            return false;
        }
        self.finish(xid);
        self.pump(now);
        true
    }

    /// Starts a message of ours that is not an RPC call, in `dialect`'s form.
    fn start_message(&mut self, xid: u32, dialect: Dialect, now: Instant) -> Result<(), DuplicateXid> {
        if self.calls.contains_key(&xid) {
            return Err(DuplicateXid(xid));
        }
        if self.dialect() != Some(dialect) {
            self.events.push_back(Action::Failed { xid, error: CallFailure::NotVersionTwo });
            return Ok(());
        }
        self.calls.insert(xid, Call::new(CallKind::Option(dialect)));
        self.queue.push_back(xid);
        self.pump(now);
        Ok(())
    }

    /// Whether `xid` is a call or an RDMA_OPTIONAL in progress.
    pub fn is_active(&self, xid: u32) -> bool {
        self.calls.contains_key(&xid)
    }

    /// Ends call `xid` without an event, for a failure the driver met itself (the call could
    /// not be marshaled or sent, RFC 8166 section 4.5.4: "the associated RPC transaction fails
    /// immediately"); its credit returns. False if no such call is in progress.
    pub fn cancel(&mut self, xid: u32, now: Instant) -> bool {
        if !self.calls.contains_key(&xid) {
            return false;
        }
        // Its -07 Send was counted when it was handed out, and never posted (-07 section
        // 4.2.1 counts Sends posted): the window gets it back.
        let unposted_v2 = self.flight(xid).is_some_and(|f| f.version == Version::TWO);
        if let Some(st) = self.conn.as_mut().and_then(|c| c.d07.as_mut()).filter(|_| unposted_v2) {
            st.credits.withdraw();
        }
        self.finish(xid);
        self.queue.retain(|&x| x != xid);
        self.pump(now);
        true
    }

    /// Whether call `xid` has a transmission out on the current connection (its reply, or its
    /// loss, is still to come): it holds one of the credits until then.
    pub fn in_flight(&self, xid: u32) -> bool {
        self.flight(xid).is_some()
    }

    /// A received message. [`Incoming::Reply`] completes its call: reassemble the reply from the
    /// header view it carries. Failures and retransmissions come out as events.
    ///
    /// On a connection settled on Version Two an RDMA_OPTIONAL is judged too (draft section
    /// 3.1): the answer to one of ours completes it ([`Incoming::OptionAnswer`]); another goes
    /// to the registry ([`Requester::set_registry`]) and comes back as
    /// [`Incoming::OptionHandled`] or [`Incoming::RefuseOption`], for the driver to send.
    pub fn handle_receive<'a>(&mut self, bytes: &'a [u8], now: Instant) -> Incoming<'a> {
        self.handle_receive_for_sent(bytes, now, &|_| true)
    }

    /// [`Requester::handle_receive`] where the driver's callers may not have taken every
    /// transmission [`Action::Transmit`] handed out: `sent(xid)` is false for a call whose
    /// transmission nobody has taken to post yet ([`Connection`](crate::connection::Connection)'s
    /// untaken steps). A reply to such a call answers nothing the responder can have received
    /// (a peer that guessed the next XID): it is dropped as answering no call in flight
    /// ([`DropReason::UnknownXid`](crate::reply::DropReason::UnknownXid)), and the call goes out
    /// as it would have.
    pub fn handle_receive_for_sent<'a>(
        &mut self,
        bytes: &'a [u8],
        now: Instant,
        sent: &dyn Fn(u32) -> bool,
    ) -> Incoming<'a> {
        // On Version Two: settled on it, or with the probe out (a responder that read the
        // probe may send its own RDMA_OPTIONAL before answering; draft section 3.1's MUST to
        // answer an unrecognized one with RDMA_ERR_INVAL_OPTION holds then too).
        let on_v2 = matches!(
            self.conn.as_ref().map(|c| &c.version),
            Some(Negotiation::Settled(Version::TWO) | Negotiation::Probing(Some(_)))
        );
        // The probe's refusal: by either dialect's rules, or none (a code the dialect sent does
        // not define is what tells the other dialect apart, docs/design.md).
        // An error answering the probe settles Version Two (the responder read it), unless
        // the requester has nothing the responder speaks.
        let mut error_settles = true;
        if let Some(Negotiation::Probing(Some(probe))) = self.conn.as_ref().map(|c| &c.version) {
            let probe = *probe;
            if Fixed::read(bytes).is_some_and(|f| f.xid == probe && f.is_error()) {
                match self.refusal(probe, bytes, now) {
                    Refusal::GoesOn => return Incoming::Consumed,
                    Refusal::Nowhere => error_settles = false,
                    Refusal::CallFails => {}
                }
            }
        }
        // (Compared after a -07 message: its CONNPROP may state the responder's Receives.)
        let thresholds_before = self.conn.as_ref().filter(|c| c.d07.is_some()).and_then(|_| self.thresholds());
        let calls = &self.calls;
        let awaiting =
            |xid: u32| calls.get(&xid).is_some_and(|c| c.kind.is_option() && c.flight.is_some()) && sent(xid);
        let flight_version = |xid: u32| calls.get(&xid)?.flight.as_ref().filter(|_| sent(xid)).map(|f| f.version);
        // A -07 connection's Version Two messages are read by -07's rules; an answer in
        // Version One (to the probe) by the common ones.
        let d07 = self.conn.as_mut().and_then(|c| c.d07.as_mut());
        let on_07 = d07.is_some();
        let classified = match d07 {
            Some(st) if Fixed::read(bytes).is_some_and(|f| f.vers == Version::TWO.wire()) => {
                let supported = (self.cfg.versions.0, self.cfg.versions.1);
                let ext = draft07::Extensions { registry: &self.registry07, awaiting: &awaiting };
                draft07::classify(bytes, &self.cfg.limits, supported, st, ext, flight_version)
            }
            Some(st) => {
                // Another version on a -07 connection (a Version One answer to the probe): it
                // took a Receive all the same (section 4.2.1).
                st.credits.note_received();
                reply::classify(bytes, &self.cfg.limits, None, flight_version)
            }
            _ => {
                let options = on_v2.then_some(reply::Options { registry: &mut self.registry, awaiting: &awaiting });
                reply::classify(bytes, &self.cfg.limits, options, flight_version)
            }
        };
        let head = match classified {
            reply::Classified::Done(incoming) => {
                // On -07 every header carries the responder's total: a GRANT, or any message,
                // may have opened the window; and the responder's CONNPROP_FINAL may have
                // stated the size of its Receives (section 5.2.2): calls from now on use it.
                if on_07 {
                    if let (Some(version), Some(thresholds)) = (self.version(), self.thresholds()) {
                        if thresholds != thresholds_before.unwrap_or(thresholds) {
                            log::info!("{} states its Receives: inline thresholds now {thresholds:?}", self.addr);
                            self.events.push_back(Action::Settled { version, thresholds });
                        }
                    }
                    self.pump(now);
                }
                return incoming;
            }
            reply::Classified::Head(h) => h,
        };
        let xid = head.xid;
        let probe = self.calls[&xid].flight.as_ref().is_some_and(|f| f.probe);
        match head.outcome {
            reply::Outcome::Reply(header) => {
                self.settle_on_reply(probe, head.credit, now);
                self.finish(xid);
                self.pump(now);
                Incoming::Reply { xid, header }
            }
            reply::Outcome::Rewritten(message, view) => {
                self.settle_on_reply(probe, head.credit, now);
                self.finish(xid);
                self.pump(now);
                Incoming::ReplyRewritten { xid, message, view }
            }
            reply::Outcome::MalformedAnswered(e, also) => {
                log::warn!("{} answered call {xid:#010x} with a broken reply: {e}", self.addr);
                self.complete_failed(xid, CallFailure::MalformedReply(e));
                if let Some(other) = also.filter(|&x| x != xid && self.calls.contains_key(&x)) {
                    self.complete_failed(other, CallFailure::MalformedReply(e));
                }
                // (The RDMA2_ERROR goes from `pump`, when the window has room.)
                self.pump(now);
                Incoming::Consumed
            }
            reply::Outcome::Vers { low, high } => {
                self.handle_err_vers(xid, low, high, now);
                Incoming::Consumed
            }
            reply::Outcome::Error(e) => {
                self.conn.as_mut().unwrap().credits.on_error_reply();
                log::warn!("{} answered call {xid:#010x} with RDMA_ERROR {e:?}", self.addr);
                self.complete_failed(xid, CallFailure::Peer(e));
                if probe && error_settles {
                    // RFC 8166 section 5.5.2: ERR_CHUNK answers a header whose `rdma_vers` the
                    // responder recognized; RDMA_ERR_INVAL_OPTION exists only in Version Two.
                    // The window stays at one: an error carries no grant (draft section 5).
                    self.settle(Version::TWO, now);
                }
                self.pump(now);
                Incoming::Consumed
            }
            reply::Outcome::OptionAnswer => {
                // Its Receive at the responder is free again (the responder judged it before
                // answering); an answer carries no grant of its own we rely on.
                self.finish(xid);
                self.pump(now);
                Incoming::OptionAnswer { xid }
            }
            reply::Outcome::Malformed(e) => {
                log::warn!("{} answered call {xid:#010x} with a malformed reply: {e}", self.addr);
                // Nothing learned about the responder's versions: `finish` freed the probe's
                // place, and the next call probes again.
                self.complete_failed(xid, CallFailure::MalformedReply(e));
                self.pump(now);
                Incoming::Consumed
            }
        }
    }

    /// The clock moved: a call past its deadline, the probe included, closes the connection
    /// ([`Action::Disconnect`], once) and goes out again only on the next connection (RFC 8166
    /// sections 3.3.3 and 4.5.4): on this one the responder may still be running it. Until the
    /// connection is down nothing more is sent on it, and a late reply still completes its call.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.conn.as_ref().is_none_or(|c| c.closing) {
            return;
        }
        // An RDMA_OPTIONAL past its deadline fails alone, its credit back, and the connection
        // stays: it fenced no memory (it is always inline), and the responder judges it on
        // receipt (its Receive is reposted then), so the credit is not counted twice; a late
        // answer is then dropped as answering nothing.
        let mut late_options: Vec<u32> = (self.calls.iter())
            .filter(|(_, c)| c.kind.is_option() && c.flight.as_ref().is_some_and(|f| f.deadline <= now))
            .map(|(&x, _)| x)
            .collect();
        late_options.sort_unstable();
        for xid in late_options {
            self.complete_failed(xid, CallFailure::TimedOut { attempts: 1 });
        }
        let Some(conn) = self.conn.as_mut() else { return };
        let (timeout, addr) = (self.cfg.timeout, &self.addr);
        if conn.shut_since.is_some_and(|t| t + timeout <= now) {
            log::warn!(
                "the -07 window to {addr} stayed shut for {timeout:?} with calls waiting and none in flight: closing the connection"
            );
        } else {
            let mut late = false;
            for f in self.calls.values_mut().filter_map(|c| c.flight.as_mut()) {
                if !f.timed_out && f.deadline <= now {
                    f.timed_out = true;
                    late = true;
                }
            }
            if !late {
                return;
            }
            log::warn!(
                "a call to {addr} had no reply within {timeout:?}: closing the connection (RFC 8166 section 4.5.4)"
            );
        }
        conn.closing = true;
        self.events.push_back(Action::Disconnect);
    }

    /// The connection is gone: calls in flight are retransmitted on the next one (each spends
    /// an attempt), and the credit window starts again at one (RFC 8166 section 3.3.3). A probe
    /// still unanswered when its deadline passed, or RDMA_ERR_VERS with no reply since, makes
    /// the responder remembered as lacking Version Two (draft section 5.2).
    pub fn handle_disconnected(&mut self, now: Instant) {
        let Some(conn) = self.conn.take() else { return };
        self.transmits.clear(); // the old connection's
        if conn.after_err_vers {
            self.memory.remember_no_v2(&self.addr, NoV2Reason::LostAfterErrVers, self.reprobe_at(now));
        }
        let probe_lost = match conn.version {
            Negotiation::Probing(Some(xid)) => self.flight(xid).is_some_and(|f| f.timed_out),
            _ => false,
        };
        // A Version Two only requester has nothing to fall back to: it probes again.
        if probe_lost && self.cfg.versions.0 <= Version::ONE {
            self.memory.remember_no_v2(&self.addr, NoV2Reason::ProbeLost, self.reprobe_at(now));
        }
        // RDMA_OPTIONAL messages are not sent again: the next connection must settle Version
        // Two anew, and the extension's exchange belonged to this one.
        let mut options: Vec<u32> = self.calls.iter().filter(|(_, c)| c.kind.is_option()).map(|(&x, _)| x).collect();
        options.sort_unstable();
        for xid in options {
            self.complete_failed(xid, CallFailure::ConnectionLost { attempts: 1 });
        }
        // Requeued at the front, highest XID first: they go out again in XID order.
        let mut in_flight: Vec<(u32, bool)> =
            self.calls.iter().filter_map(|(&x, c)| c.flight.as_ref().map(|f| (x, f.timed_out))).collect();
        in_flight.sort_unstable_by_key(|&(xid, _)| std::cmp::Reverse(xid));
        for (xid, timed_out) in in_flight {
            // The credit belonged to the old connection; dropping it is what `on_reconnect`
            // would make of it (stale).
            self.calls.get_mut(&xid).unwrap().flight = None;
            let why = if timed_out {
                CallFailure::TimedOut { attempts: 0 }
            } else {
                CallFailure::ConnectionLost { attempts: 0 }
            };
            self.requeue_front(xid, why);
        }
        self.want_connection();
    }

    fn flight(&self, xid: u32) -> Option<&Flight> {
        self.calls.get(&xid)?.flight.as_ref()
    }

    fn want_connection(&mut self) {
        if self.conn.is_none() && !self.connecting && !self.calls.is_empty() {
            self.connecting = true;
            self.events.push_back(Action::Connect);
        }
    }

    /// What the next transmission of a call will carry while nothing changes on the
    /// connection: its version, credits requested and thresholds; `None` until the version is
    /// settled, or while the connection closes. A driver may marshal a call ahead on this
    /// guess ([`crate::datapath::prepare_call`]) and must check it against the
    /// [`Transmit`] when that comes.
    pub fn next_transmit(&self) -> Option<(Version, u32, InlineThresholds)> {
        let conn = self.conn.as_ref().filter(|c| !c.closing)?;
        let Negotiation::Settled(version) = conn.version else { return None };
        if conn.d07.is_some() {
            return None; // each -07 Send's `rdma_credit` is the total when it is taken
        }
        Some((version, conn.credits.requested(), conn.thresholds(version)))
    }

    /// Counts `n` more Sends for the parts after the first of a -07 call going out now as
    /// RDMA2_CALL_MIDDLE parts ([`Transmit::max_parts`]), and gives the running total they
    /// carry (section 4.2.1). `None`, counting nothing, when the responder's window lacks room
    /// for all `n` now: the call then goes in a Call chunk instead, in the one Send its
    /// transmission was given, so that no part ever waits for credit with others queued
    /// behind it.
    ///
    /// ```
    /// use negotiate::requester::{Requester, RequesterConfig};
    /// let mut r = Requester::new(RequesterConfig::default(), "peer");
    /// assert_eq!(r.take_call_parts(1), None, "no -07 connection: nothing to take");
    /// ```
    pub fn take_call_parts(&mut self, n: u32) -> Option<u32> {
        let conn =
            self.conn.as_mut().filter(|c| !c.closing && matches!(c.version, Negotiation::Settled(Version::TWO)))?;
        let st = conn.d07.as_mut()?;
        if n == 0 || st.credits.window() < n {
            return None;
        }
        // (Nothing is received in between: every part carries the same total.)
        let total = st.credits.send();
        for _ in 1..n {
            st.credits.send();
        }
        Some(total)
    }

    /// Until when what is learned about the responder at `now` holds: `reprobe_after` on, or
    /// practically forever when that is too long to add (`Duration::MAX`: never probe again).
    fn reprobe_at(&self, now: Instant) -> Instant {
        crate::limits::deadline(now, self.cfg.reprobe_after)
    }

    /// Sends what the connection, the version state and the credits allow.
    fn pump(&mut self, now: Instant) {
        if let Some(conn) = self.conn.as_mut().filter(|_| self.queue.is_empty()) {
            conn.shut_since = None; // nothing waits for the window
        }
        // This side's CONNPROP_FINAL goes before the calls once the window has room for it,
        // and so do its replies to the responder's reverse-direction calls.
        if let Some(st) = self.conn.as_mut().and_then(|c| c.d07.as_mut()) {
            st.owed_due(&mut self.transmits);
        }
        // Section 4.2.1.1: with replies still owed on a -07 connection and the responder's
        // window more than half used, a GRANT refreshes it: the calls that would carry a
        // higher total may all be waiting for those very replies (a continued reply takes a
        // place in the window per part).
        // (Only a -07 connection's calls are looked at: the scan ran for every call pumped.)
        let draft07 = self
            .conn
            .as_ref()
            .is_some_and(|c| c.d07.is_some() && matches!(c.version, Negotiation::Settled(Version::TWO)));
        if draft07 && self.calls.values().any(|c| c.flight.is_some()) {
            if let Some(grant) = self.conn.as_mut().and_then(|c| c.d07.as_mut()).and_then(draft07::State::grant_if_due)
            {
                self.transmits.push_back(grant);
            }
        }
        while let (Some(conn), Some(&xid)) = (self.conn.as_mut(), self.queue.front()) {
            if conn.closing {
                return; // RFC 8166 section 4.5.4: its calls go out again on the next connection
            }
            // (An option goes only on a connection settled in its dialect, a call-only call
            // on one settled on -07. A call-only call requeued after its connection's loss
            // meets a new connection not settled yet, which its turn would block (it cannot
            // be the probe): it ends, the connection lost under it.)
            let call = &self.calls[&xid];
            if call.kind == CallKind::CallOnly && matches!(conn.version, Negotiation::Probing(_)) {
                let attempts = call.attempts;
                self.queue.pop_front();
                self.complete_failed(xid, CallFailure::ConnectionLost { attempts });
                continue;
            }
            let needs = call.kind.needs();
            if needs.is_some_and(|d| !matches!(conn.version, Negotiation::Settled(Version::TWO)) || conn.dialect != d) {
                self.queue.pop_front();
                self.complete_failed(xid, CallFailure::NotVersionTwo);
                continue;
            }
            let (version, probe) = match conn.version {
                Negotiation::Probing(Some(_)) => return, // one message until the probe's answer
                Negotiation::Probing(None) => (Version::TWO, true),
                Negotiation::Settled(v) => (v, false),
            };
            // On -07 each Send also needs room under the responder's running total (section
            // 4.2.1: one message until its first header).
            if conn.d07.as_ref().is_some_and(|st| !st.credits.may_send()) {
                // With nothing of ours in flight, only the responder's GRANT can raise the total
                // (4.2.1.1); if its last answer was one this side could not take, none may
                // come. `handle_timeout` closes the connection if the window stays shut that way
                // for the call timeout; its calls go out on the next connection, whose window
                // starts anew (RFC 8166 section 4.5.4's remedy for a stuck connection).
                if self.calls.values().all(|c| c.flight.is_none()) {
                    let since = *conn.shut_since.get_or_insert(now);
                    self.deadline_set(since + self.cfg.timeout);
                }
                return;
            }
            let Ok(credit) = conn.credits.try_acquire() else { return };
            conn.shut_since = None;
            self.queue.pop_front();
            if probe {
                log::info!("probing {} for Version Two with call {xid:#010x}", self.addr);
                conn.version = Negotiation::Probing(Some(xid));
            }
            let thresholds = if probe { conn.advertised.for_probe() } else { conn.thresholds(version) };
            // -07's `rdma_credit` is a running total, counted per Send; the others' the credits
            // requested.
            let credits = match conn.d07.as_mut() {
                Some(st) if version == Version::TWO => st.credits.send(),
                _ => conn.credits.requested(),
            };
            let dialect = (version == Version::TWO).then_some(conn.dialect);
            let r_flag = conn
                .advertised
                .requester
                .is_some_and(|p| p.flags().contains(cm_private_data::Flags::REMOTE_INVALIDATE));
            let remote_invalidation = dialect == Some(Dialect::Ietf07) && r_flag;
            let segments = match conn.d07.as_ref() {
                Some(st) if version == Version::TWO => st.peer_segments(),
                _ => SegmentLimits::NONE,
            };
            // (A probe is one message until its answer, section 4.3: it does not continue.)
            let continues = conn.d07.is_some() && version == Version::TWO && !probe;
            let max_parts = if continues { self.cfg.max_call_parts.max(1) } else { 1 };
            let call = self.calls.get_mut(&xid).unwrap();
            call.attempts += 1;
            let deadline = now + self.cfg.timeout;
            call.flight = Some(Flight { credit, version, deadline, probe, timed_out: false });
            let attempt = call.attempts;
            self.deadline_set(deadline);
            if attempt > 1 {
                log::info!("call {xid:#010x} to {} goes out again (attempt {attempt})", self.addr);
            }
            self.events.push_back(Action::Transmit(Transmit {
                xid,
                version,
                credits,
                thresholds,
                probe,
                attempt,
                dialect,
                remote_invalidation,
                segments,
                max_parts,
            }));
        }
    }

    fn settle(&mut self, version: Version, now: Instant) {
        let until = self.reprobe_at(now);
        let conn = self.conn.as_mut().unwrap();
        conn.version = Negotiation::Settled(version);
        if version == Version::TWO {
            // Its dialect: the next connection's first message uses it (docs/design.md).
            self.memory.remember_dialect(&self.addr, conn.dialect, until);
            // On -07, this side's properties: the size of its Receives, within the
            // responder's (section 6.3.4: at most the default inline threshold).
            let t = conn.stated.thresholds(&conn.advertised, version);
            let threshold = t.call.min(DEFAULT_INLINE_07);
            if let Some(st) = conn.d07.as_mut() {
                let others = self.registry07.properties().to_vec();
                st.owe_connprop(t.reply as u32, self.host_auth.as_ref(), self.reverse, others, threshold);
                // Sent now, or by `pump` once the window has room.
                st.owed_due(&mut self.transmits);
            }
        } else {
            conn.d07 = None;
        }
        let thresholds = conn.thresholds(version);
        log::info!(
            "settled on version {} with {}: inline thresholds {} (calls) and {} (replies)",
            version.wire(),
            self.addr,
            thresholds.call,
            thresholds.reply
        );
        self.events.push_back(Action::Settled { version, thresholds });
    }

    /// The transport properties were exchanged on this connection
    /// (`specs/rpcrdma2-transport-properties.txt` section 2.2): `ours` as stated, `theirs` as
    /// the responder's reply stated them. Calls transmitted from now on use the thresholds
    /// they give (section 4: they take effect for messages sent after the reply), and a
    /// [`Action::Settled`] says so. Ignored unless the connection settled on Version Two
    /// (section 2.1).
    pub fn handle_properties(&mut self, ours: TransportProperties, theirs: TransportProperties) {
        let Some(conn) = self.conn.as_mut() else { return };
        let Negotiation::Settled(version) = conn.version else { return };
        if version < Version::TWO {
            return;
        }
        conn.stated = Stated { requester: Some(ours), responder: Some(theirs) };
        let thresholds = conn.thresholds(version);
        log::info!(
            "transport properties exchanged with {}: it states {theirs:?}; inline thresholds now {} and {}",
            self.addr,
            thresholds.call,
            thresholds.reply
        );
        self.events.push_back(Action::Settled { version, thresholds });
    }

    fn settle_on_reply(&mut self, probe: bool, granted: u32, now: Instant) {
        let conn = self.conn.as_mut().unwrap();
        // On -07 the running totals gate each Send (`CreditWindow::may_send`, in `pump`);
        // the per-call window is opened to what this side asks for.
        let granted = if conn.d07.is_some() { self.cfg.credits } else { granted };
        conn.credits.on_reply(granted);
        conn.after_err_vers = false;
        if probe {
            self.settle(Version::TWO, now);
        }
    }

    /// What this requester speaks, as `rpcrdma_v2::dialect` reads it.
    fn speaks(&self) -> Speaks {
        let v2 = if self.cfg.versions.1 >= Version::TWO { self.cfg.version_two } else { VersionTwo::None };
        Speaks { v1: self.cfg.versions.0 <= Version::ONE, v2 }
    }

    /// The probe `xid` drew the RDMA_ERROR `bytes`: where to go, by [`after_refusal`]
    /// ([`Refusal`]). An RDMA_ERR_VERS is left to the common rules, which read its range
    /// ([`Requester::fall_back`]).
    fn refusal(&mut self, xid: u32, bytes: &[u8], now: Instant) -> Refusal {
        let code = bytes.get(16..20).map_or(0, |w| u32::from_be_bytes(w.try_into().unwrap()));
        if code == rpcrdma_v2::draft07::xdr::RDMA2_ERR_VERS {
            return Refusal::CallFails;
        }
        let speaks = self.speaks();
        // What the call fails with if it has no attempt left to go again.
        let e = reply::refusal_error(bytes, self.conn.as_ref().unwrap().dialect);
        let conn = self.conn.as_mut().unwrap();
        let sent = conn.dialect;
        match after_refusal(&speaks, sent, &conn.refused, xid, bytes) {
            Next::Retry(None) => {
                // Version One: the responder answered in it, or refused every dialect this
                // side speaks. The call was not run (RFC 8166 section 4.5).
                log::info!("{} refused the probe {xid:#010x} ({e:?}): falling back to Version One", self.addr);
                self.fall_back(xid, 1, 1, CallFailure::Peer(e), now);
                Refusal::GoesOn
            }
            Next::Retry(Some(d)) => {
                log::info!("{} refused the {sent:?} probe {xid:#010x} ({e:?}): it speaks {d:?}", self.addr);
                conn.refused.push(sent);
                conn.credits.on_error_reply();
                conn.dialect = d;
                conn.d07 = (d == Dialect::Ietf07).then(|| {
                    // The refused message and its answer were this connection's first Send
                    // and Receive: a -07 responder counted them (section 4.2.1).
                    let mut st = draft07::State::new(self.cfg.credits, self.cfg.draft07_counters_from);
                    st.credits.send();
                    let one = self.cfg.draft07_counters_from.wrapping_add(1);
                    let total = Fixed::read(bytes).and_then(|f| f.credit).unwrap_or(one);
                    let _ = st.credits.received(total);
                    st
                });
                conn.version = Negotiation::Probing(None);
                self.refund_refused_probe(xid);
                self.requeue_front(xid, CallFailure::Peer(e));
                self.pump(now);
                Refusal::GoesOn
            }
            Next::NoCommonVersion => {
                log::warn!("{} refused the probe {xid:#010x} ({e:?}) and this side speaks nothing else", self.addr);
                Refusal::Nowhere
            }
            Next::CallFails | Next::NotARefusal => Refusal::CallFails,
        }
    }

    /// RDMA_ERR_VERS: settle the highest common version and send the call again (draft 5.2).
    fn handle_err_vers(&mut self, xid: u32, low: u32, high: u32, now: Instant) {
        log::info!("{} answered call {xid:#010x} with RDMA_ERR_VERS: it speaks versions {low} to {high}", self.addr);
        self.fall_back(xid, low, high, CallFailure::NoCommonVersion { low, high }, now);
    }

    /// Call `xid` was answered by a responder that speaks versions `low` to `high` only: on
    /// the same connection, settle on the highest version both speak and send the call again
    /// in it, or fail it if there is none (draft section 5.2). A call with no attempt left to
    /// go again fails with `answered`, what the responder said.
    fn fall_back(&mut self, xid: u32, low: u32, high: u32, answered: CallFailure, now: Instant) {
        let (ours_low, ours_high) = self.cfg.versions;
        let common = Version::from_wire(high).min(ours_high);
        let conn = self.conn.as_mut().unwrap();
        conn.credits.on_error_reply();
        if common < Version::from_wire(low).max(ours_low) {
            log::warn!("no version in common with {}: call {xid:#010x} fails", self.addr);
            // That call ends; the next goes out (as the probe again, if this was it): an
            // answer ends only the call it answers, never the ones behind it.
            self.complete_failed(xid, CallFailure::NoCommonVersion { low, high });
            self.pump(now);
            return;
        }
        conn.after_err_vers = true;
        log::info!("falling back to version {} with {} on this connection", common.wire(), self.addr);
        self.memory.remember_no_v2(&self.addr, NoV2Reason::ErrVers { high }, self.reprobe_at(now));
        self.refund_refused_probe(xid);
        if let Some(f) = self.calls.get_mut(&xid).unwrap().flight.take() {
            self.conn.as_mut().unwrap().credits.on_complete(f.credit);
        }
        self.settle(common, now);
        self.requeue_front(xid, answered);
        self.pump(now);
    }

    /// Gives back the attempt call `xid`'s probe spent, when that probe was refused for its
    /// version or dialect: the call was not run (RFC 8166 section 4.5), and going again in the
    /// version or dialect the refusal leads to is the negotiation itself (draft section 5.2),
    /// not a retransmission. Without it a call allowed one attempt failed with the refusal,
    /// "none of ours", though the connection settled on a version both speak. Bounded: a
    /// connection has one probe at a time, and each refusal moves it on to another dialect or
    /// to Version One, whose calls are never probes.
    fn refund_refused_probe(&mut self, xid: u32) {
        if let Some(call) = self.calls.get_mut(&xid).filter(|c| c.flight.as_ref().is_some_and(|f| f.probe)) {
            call.attempts = call.attempts.saturating_sub(1);
        }
    }

    /// Puts `xid` back at the head of the queue, or fails it with `why` (its attempt count
    /// filled in) if it has no attempts left.
    fn requeue_front(&mut self, xid: u32, why: CallFailure) {
        let call = self.calls.get_mut(&xid).unwrap();
        if let Some(f) = call.flight.take() {
            if let Some(c) = self.conn.as_mut() {
                c.credits.on_complete(f.credit);
            }
        }
        if call.attempts >= self.cfg.max_attempts {
            let attempts = call.attempts;
            let error = match why {
                CallFailure::TimedOut { .. } => CallFailure::TimedOut { attempts },
                CallFailure::ConnectionLost { .. } => CallFailure::ConnectionLost { attempts },
                other => other,
            };
            self.complete_failed(xid, error);
        } else {
            self.queue.push_front(xid);
        }
    }

    /// A queued call whose connection attempt failed.
    fn spend_attempt(&mut self, xid: u32) {
        let call = self.calls.get_mut(&xid).unwrap();
        call.attempts += 1;
        if call.attempts >= self.cfg.max_attempts {
            let attempts = call.attempts;
            self.queue.retain(|&x| x != xid);
            self.complete_failed(xid, CallFailure::ConnectFailed { attempts });
        }
    }

    fn finish(&mut self, xid: u32) {
        if let Some(call) = self.calls.remove(&xid) {
            if let Some(c) = self.conn.as_mut() {
                if let Some(f) = call.flight {
                    c.credits.on_complete(f.credit);
                }
                // A probe that ended without settling the version (cancelled, failed) frees its
                // place: the next call is the probe (draft section 5: one message at a time
                // until an answer, not forever).
                if matches!(c.version, Negotiation::Probing(Some(x)) if x == xid) {
                    c.version = Negotiation::Probing(None);
                }
            }
        }
    }

    fn complete_failed(&mut self, xid: u32, error: CallFailure) {
        self.finish(xid);
        self.queue.retain(|&x| x != xid);
        self.events.push_back(Action::Failed { xid, error });
    }

    fn fail_all(&mut self, error: CallFailure) {
        let mut xids: Vec<u32> = self.calls.keys().copied().collect();
        xids.sort_unstable();
        for xid in xids {
            self.complete_failed(xid, error);
        }
    }
}
