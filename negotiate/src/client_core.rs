//! The requester side of a [`Client`](crate::client::Client), decided without I/O or threads:
//! the calls in progress and what each caller must do next, when to connect (with backoff)
//! and disconnect, what each received message is for, and which cause a failed call reports.
//! It wraps the [`Requester`] state machine with everything the client adds around it.
//!
//! `Client` drives it with a queue pair, a dispatcher thread, a condition variable per caller
//! and the wall clock; the deterministic simulator (negotiate/tests/sim) drives the same value
//! with simulated links and a virtual clock, so both make exactly these decisions. In the
//! manner of quinn-proto: `handle_*` take inputs (API calls, connection outcomes, received
//! messages, the clock), `poll_*` give outputs (actions for the driver, callers to wake, the
//! next deadline). `L` is the driver's handle of one connection (an `Arc` of its queue pair
//! for `Client`, a link number for the simulator).
//!
//! ```
//! use std::time::Instant;
//! use negotiate::client::ClientConfig;
//! use negotiate::client_core::{Action, CallStep, ClientCore};
//!
//! let now = Instant::now();
//! let mut core: ClientCore<u32> = ClientCore::new(ClientConfig::default(), "10.0.2.15:20049");
//! core.start_call(7, now).unwrap();
//! // No connection yet: the driver is asked for one; the caller waits.
//! assert!(matches!(core.poll_action(), Some(Action::Connect { .. })));
//! assert!(core.take_step(7).is_none());
//! // Connected (link 1, no private data either way): call 7 goes out as the Version Two probe.
//! core.handle_connected(1, None, &[], now);
//! assert_eq!(core.poll_ready(), Some(7));
//! let Some(CallStep::Transmit { transmit, link: 1 }) = core.take_step(7) else { panic!() };
//! assert!(transmit.probe && transmit.version == rpcrdma_v1::Version::TWO);
//! ```

use rpcrdma_v2::properties::TransportProperties;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use rpcrdma_v1::marshal_call::{CallForm, InlineThresholds};
use rpcrdma_v1::Version;

use crate::client::config::{ClientConfig, ClientError, ClientStats};
use crate::datapath::{DataPathError, Ended};
use crate::memory::PeerMemory;
use crate::reply::{DropReason, Incoming};
use crate::requester::{CallFailure, Event, Requester, Transmit};

/// What a connection's transport-properties exchange (`specs/rpcrdma2-transport-properties.txt`)
/// gave.
///
/// ```
/// use negotiate::client_core::PeerProperties;
/// assert_ne!(PeerProperties::NotExchanged, PeerProperties::Refused);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerProperties {
    /// No exchange on this connection (not configured, Version One, or not yet).
    NotExchanged,
    /// The responder stated these; they are in effect.
    Stated(TransportProperties),
    /// The responder does not support the exchange (RDMA_ERR_INVAL_OPTION) or answered
    /// something else: private data and the defaults stay in effect (section 2.3).
    Refused,
}

/// How many ended connections [`ClientCore::ended`] remembers.
pub const ENDED_KEPT: usize = 64;

/// The wait before the first retry of a failed connection attempt; it doubles with each
/// further failure up to [`MAX_BACKOFF`], and a connection made resets it.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// The longest wait between connection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// What the driver must do for the client as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<L> {
    /// Make a connection after waiting `after` (backoff after failed attempts), then report
    /// [`ClientCore::handle_connected`] or [`ClientCore::handle_connect_failed`].
    Connect {
        /// How long to wait first.
        after: Duration,
    },
    /// Close this connection (a call had no reply within the requester's timeout: RFC 8166
    /// section 4.5.4), then report [`ClientCore::handle_link_down`] once it is down.
    Disconnect(L),
}

/// What the caller of one call must do next ([`ClientCore::take_step`]).
#[derive(Debug)]
pub enum CallStep<L> {
    /// Marshal and send the call on `link` as `transmit` says (a retransmission first gives up
    /// the previous attempt's chunks), then report [`ClientCore::handle_sent`].
    Transmit {
        /// Version, credits, thresholds of this transmission.
        transmit: Transmit,
        /// The connection to send it on.
        link: L,
    },
    /// Its reply arrived: reassemble it from these bytes (validated already).
    Reply {
        /// The received message.
        message: Vec<u8>,
        /// The R_key the responder invalidated with Send With Invalidate, if it did.
        invalidated: Option<u32>,
    },
    /// The call failed, with its cause; it is over.
    Failed(ClientError),
}

/// What a received message was for ([`ClientCore::handle_receive`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// The reply to this call, or the answer to this RDMA_OPTIONAL: its caller is ready.
    Reply(u32),
    /// Send these bytes back on the connection the message came on: RDMA_ERR_INVAL_OPTION for
    /// an RDMA_OPTIONAL no extension supports (draft section 3.1, MUST), or an extension's
    /// answering RDMA_OPTIONAL ([`crate::extension`]).
    SendBack(Vec<u8>),
    /// A backward-direction call for the client's callback service (RFC 8167): answer it.
    BackwardCall(Vec<u8>),
    /// An RDMA_ERROR or malformed reply; its effect is in the calls' steps.
    Consumed,
    /// Nothing to do with it.
    Dropped(DropReason),
}

enum Slot<L> {
    Waiting,
    Ready(CallStep<L>),
    /// Its caller went away while its transmission was out ([`ClientCore::abandon`]): it
    /// keeps its credit until its reply or its connection's loss, and then ends unseen.
    Abandoned,
}

/// The requester side of one client: see the [module documentation](self).
///
/// Driven here against a [`Serve`](crate::serve::Serve), bytes only: the call goes out as the
/// Version Two probe, the responder answers in Version Two, and the version is settled.
///
/// ```
/// use std::time::{Duration, Instant};
/// use negotiate::client::ClientConfig;
/// use negotiate::client_core::{CallStep, ClientCore, Received};
/// use negotiate::responder::ResponderConfig;
/// use negotiate::serve::{Serve, Step};
/// use rpcrdma_v1::marshal_call::CallForm;
/// use rpcrdma_v1::Version;
/// // An RDMA_MSG with no chunks around a tiny RPC message (msg_type 0 call, 1 reply).
/// let msg = |xid: u32, vers: Version, credit: u32, msg_type: u32| -> Vec<u8> {
///     [xid, vers.wire(), credit, 0, 0, 0, 0, xid, msg_type].iter().flat_map(|w| w.to_be_bytes()).collect()
/// };
/// let now = Instant::now();
/// let mut core: ClientCore<u32> = ClientCore::new(ClientConfig::default(), "inproc:server");
/// let mut server = Serve::new(ResponderConfig::default(), Duration::from_secs(60), &[], None, now);
///
/// core.start_call(7, now).unwrap();
/// core.poll_action(); // Connect: the driver makes connection 1
/// core.handle_connected(1, None, &[], now);
/// let Some(CallStep::Transmit { transmit: t, link: 1 }) = core.take_step(7) else { panic!() };
/// core.handle_sent(CallForm::Short);
///
/// let call = msg(t.xid, t.version, t.credits, 0);
/// let Step::Call { header, params } = server.on_message(&call, 0, now) else { panic!() };
/// let reply = msg(header.xid(), params.version, params.credits, 1);
///
/// assert_eq!(core.handle_receive(reply, None, now), Received::Reply(7));
/// let Some(CallStep::Reply { message, .. }) = core.take_step(7) else { panic!() };
/// assert_eq!(&message[28..32], &[0, 0, 0, 7]); // the RPC reply follows the 28-byte header
/// core.finish_call(7);
/// assert_eq!((core.version(), core.stats().short), (Some(Version::TWO), 1));
/// assert!(!core.has_calls());
/// ```
pub struct ClientCore<L> {
    cfg: ClientConfig,
    addr: String,
    req: Requester,
    link: Option<L>,
    slots: HashMap<u32, Slot<L>>,
    /// Callers whose step changed, in order.
    ready: VecDeque<u32>,
    actions: VecDeque<Action<L>>,
    settled: Option<(Version, InlineThresholds)>,
    /// What the current connection's transport-properties exchange gave.
    properties: PeerProperties,
    stats: ClientStats,
    closing: bool,
    ended: VecDeque<Ended>,
    /// Why the latest connection attempt failed, if it did: the cause a call that fails for
    /// want of a connection reports.
    connect_error: Option<Arc<DataPathError>>,
    backoff: Duration,
    /// Connection attempts that failed since the last one made (for the log).
    failed_connects: u32,
    /// The latest clock reading an input brought (none before the first), for what the core
    /// does on its own: giving up an abandoned call's retransmission.
    now: Option<Instant>,
    /// The XID the next RDMA_OPTIONAL of ours tries first.
    next_option_xid: u32,
}

/// Where the XIDs of a client's own RDMA_OPTIONAL messages start: far from the small XIDs
/// RPC clients usually begin with (the responder's answers are matched to them by XID).
const FIRST_OPTION_XID: u32 = 0x4f50_0000;

impl<L: Clone> ClientCore<L> {
    /// A client of the responder at `addr`, with no connection yet: its first action is to
    /// make one.
    pub fn new(cfg: ClientConfig, addr: &str) -> Self {
        let mut req = Requester::new(cfg.requester, addr);
        req.set_registry(crate::extension::registry(&cfg.extensions));
        let mut core = ClientCore {
            cfg,
            addr: addr.to_string(),
            req,
            link: None,
            slots: HashMap::new(),
            ready: VecDeque::new(),
            actions: VecDeque::new(),
            settled: None,
            properties: PeerProperties::NotExchanged,
            stats: ClientStats::default(),
            closing: false,
            ended: VecDeque::new(),
            connect_error: None,
            backoff: Duration::ZERO,
            failed_connects: 0,
            now: None,
            next_option_xid: FIRST_OPTION_XID,
        };
        core.route();
        core
    }

    /// An API call starts call `xid`: its caller then waits for [`ClientCore::take_step`].
    pub fn start_call(&mut self, xid: u32, now: Instant) -> Result<(), ClientError> {
        self.now = Some(now);
        if self.closing {
            return Err(ClientError::Closed);
        }
        self.req.call(xid, now)?;
        self.slots.insert(xid, Slot::Waiting);
        self.route();
        Ok(())
    }

    /// An API call starts an RDMA_OPTIONAL ([`Requester::start_option`]) with an XID this
    /// core picks (one no call or option of this client uses), returned: its caller then
    /// waits for [`ClientCore::take_step`] as a call's does. Its steps: a
    /// [`CallStep::Transmit`] (send the RDMA_OPTIONAL), then a [`CallStep::Reply`] with the
    /// peer's answering RDMA_OPTIONAL, or [`CallStep::Failed`] (RDMA_ERR_INVAL_OPTION is
    /// `Call(Peer(InvalOption))`).
    pub fn start_option(&mut self, now: Instant) -> Result<u32, ClientError> {
        self.now = Some(now);
        if self.closing {
            return Err(ClientError::Closed);
        }
        // Callers choose their calls' XIDs; options take the next free one of a counter.
        let mut xid = self.next_option_xid;
        while self.req.is_active(xid) {
            xid = xid.wrapping_add(1);
        }
        self.next_option_xid = xid.wrapping_add(1);
        self.req.start_option(xid, now)?;
        self.slots.insert(xid, Slot::Waiting);
        self.route();
        Ok(xid)
    }

    /// What the caller of `xid` must do next, or `None` while it must wait. Each step is
    /// handed out once.
    pub fn take_step(&mut self, xid: u32) -> Option<CallStep<L>> {
        match self.slots.get_mut(&xid) {
            Some(slot @ Slot::Ready(_)) => match std::mem::replace(slot, Slot::Waiting) {
                Slot::Ready(step) => Some(step),
                Slot::Waiting | Slot::Abandoned => None,
            },
            _ => None,
        }
    }

    /// The transmission ready for the caller of `xid`, if that is its step, left in place.
    pub fn ready_transmit(&self, xid: u32) -> Option<(&Transmit, &L)> {
        match self.slots.get(&xid) {
            Some(Slot::Ready(CallStep::Transmit { transmit, link })) => Some((transmit, link)),
            _ => None,
        }
    }

    /// Hands back a step [`ClientCore::take_step`] gave, untaken: its caller takes it.
    pub fn untake_step(&mut self, xid: u32, step: CallStep<L>) {
        self.put(xid, step);
    }

    /// How long a transmitted call may wait for its reply ([`RequesterConfig::timeout`]).
    ///
    /// [`RequesterConfig::timeout`]: crate::requester::RequesterConfig::timeout
    pub fn timeout(&self) -> Duration {
        self.cfg.requester.timeout
    }

    /// What the next transmission will carry ([`Requester::next_transmit`]).
    pub fn next_transmit(&self) -> Option<(Version, u32, InlineThresholds)> {
        self.req.next_transmit()
    }

    /// Whether the caller of `xid` has a step to take.
    pub fn has_ready(&self, xid: u32) -> bool {
        matches!(self.slots.get(&xid), Some(Slot::Ready(_)))
    }

    /// The caller of `xid` sent a transmission in `form` (counted in [`ClientCore::stats`]).
    pub fn handle_sent(&mut self, form: CallForm) {
        match form {
            CallForm::Short => self.stats.short += 1,
            CallForm::Chunked => self.stats.chunked += 1,
            CallForm::Long => self.stats.long += 1,
        }
    }

    /// The caller of `xid` gives it up (its transmission failed locally, e.g. marshaling):
    /// the requester forgets it.
    pub fn cancel(&mut self, xid: u32, now: Instant) {
        self.now = Some(now);
        self.req.cancel(xid, now);
        self.route();
    }

    /// The caller of `xid` goes away before its call ended (an async call's future dropped),
    /// having released the memory of what it `sent`. A transmission it sent and whose reply is
    /// still to come keeps its credit until the reply (dropped then, unseen) or the connection's
    /// loss (then it is not sent again): the responder still counts it (RFC 8166 section
    /// 3.3.1). One never sent (queued, or a transmission handed out and not yet sent) ends now
    /// and its credit returns.
    pub fn abandon(&mut self, xid: u32, sent: bool, now: Instant) {
        self.now = Some(now);
        let unsent = matches!(self.slots.get(&xid), Some(Slot::Ready(CallStep::Transmit { .. })));
        if sent && !unsent && self.req.in_flight(xid) {
            self.slots.insert(xid, Slot::Abandoned);
        } else {
            self.slots.remove(&xid);
            self.req.cancel(xid, now);
            self.route();
        }
    }

    /// Whether `xid` was abandoned and is still waiting for its reply or its connection's
    /// loss ([`ClientCore::abandon`]); its memory stays open to the responder until then.
    pub fn is_abandoned(&self, xid: u32) -> bool {
        matches!(self.slots.get(&xid), Some(Slot::Abandoned))
    }

    /// The caller of `xid` is done with it (after a reply, a failure or a cancel).
    pub fn finish_call(&mut self, xid: u32) {
        self.slots.remove(&xid);
        self.route();
    }

    /// The next caller to wake: its step is ready, or it failed.
    pub fn poll_ready(&mut self) -> Option<u32> {
        self.ready.pop_front()
    }

    /// The next thing the driver must do.
    pub fn poll_action(&mut self) -> Option<Action<L>> {
        self.actions.pop_front()
    }

    /// Whether [`ClientCore::poll_action`] has something.
    pub fn has_action(&self) -> bool {
        !self.actions.is_empty()
    }

    /// When [`ClientCore::handle_timeout`] is next due, if a call is in flight.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.req.poll_timeout()
    }

    /// A connection was made: `ours` is the private data this side sent, `accepted` what the
    /// responder's accept carried.
    pub fn handle_connected(&mut self, link: L, ours: Option<PrivateData>, accepted: &[u8], now: Instant) {
        self.now = Some(now);
        self.link = Some(link);
        self.properties = PeerProperties::NotExchanged;
        self.connect_error = None;
        self.backoff = Duration::ZERO;
        self.failed_connects = 0;
        self.req.on_connected(ours, accepted, now);
        self.route();
    }

    /// A connection attempt failed with `error`: the calls waiting for a connection count an
    /// attempt, and those out of attempts fail with this cause.
    pub fn handle_connect_failed(&mut self, error: Arc<DataPathError>, now: Instant) {
        self.now = Some(now);
        self.failed_connects += 1;
        log::info!("connecting to {} failed (attempt {}): {error}", self.addr, self.failed_connects);
        self.connect_error = Some(error);
        self.backoff = (self.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
        self.req.on_connect_failed(now);
        self.route();
    }

    /// A message arrived on the current connection, with the R_key the responder invalidated,
    /// if any.
    pub fn handle_receive(&mut self, message: Vec<u8>, invalidated: Option<u32>, now: Instant) -> Received {
        self.now = Some(now);
        // What it is, decided while the requester borrows the bytes; then the bytes move.
        // What goes back to the responder for its RDMA_OPTIONAL: ours to the server's Receives,
        // which the forward call threshold sizes (RFC 8797 section 4).
        let (threshold, credits) = (self.req.thresholds().unwrap_or_default().call, self.cfg.requester.credits);
        let reply_to = match self.req.on_receive(&message, now) {
            Incoming::Reply { xid, .. } | Incoming::OptionAnswer { xid } => Ok(xid),
            Incoming::BackwardCall(_) => Err(None),
            Incoming::Consumed | Incoming::OptionHandled { answer: None, .. } => Err(Some(Received::Consumed)),
            Incoming::RefuseOption(e) => Err(Some(Received::SendBack(e.as_bytes().to_vec()))),
            Incoming::OptionHandled { xid, answer: Some(a), .. } if crate::extension::fits(&a, threshold) => {
                Err(Some(Received::SendBack(a.to_message(xid, credits))))
            }
            // Larger than the responder's Receives: not sent (crate::extension's bounds).
            Incoming::OptionHandled { .. } => Err(Some(Received::Consumed)),
            Incoming::Dropped(why) => Err(Some(Received::Dropped(why))),
        };
        let received = match reply_to {
            Ok(xid) => {
                self.put(xid, CallStep::Reply { message, invalidated });
                Received::Reply(xid)
            }
            Err(None) => Received::BackwardCall(message),
            Err(Some(other)) => other,
        };
        self.route();
        received
    }

    /// The current connection is down, and every message received before it went down has
    /// been handled: calls in flight on it go out again on the next one, or fail.
    pub fn handle_link_down(&mut self, ended: Ended, now: Instant) {
        self.now = Some(now);
        log::info!("the connection to {} ended: {ended}", self.addr);
        if self.ended.len() == ENDED_KEPT {
            self.ended.pop_front();
        }
        self.ended.push_back(ended);
        self.link = None;
        self.settled = None;
        self.req.on_disconnected(now);
        self.route();
    }

    /// The clock reads `now` and the connection is up: calls past their deadline time out.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = Some(now);
        if self.link.is_some() && self.req.poll_timeout().is_some_and(|t| t <= now) {
            self.req.on_timeout(now);
            self.route();
        }
    }

    /// The client shuts down: every call in progress fails with [`ClientError::Closed`], and
    /// new calls are refused.
    pub fn close(&mut self) {
        self.closing = true;
        let xids: Vec<u32> = self.slots.keys().copied().collect();
        for xid in xids {
            self.put(xid, CallStep::Failed(ClientError::Closed));
        }
    }

    /// Whether [`ClientCore::close`] was called.
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// The current connection, if one is up.
    pub fn link(&self) -> Option<&L> {
        self.link.as_ref()
    }

    /// Whether calls are in progress.
    pub fn has_calls(&self) -> bool {
        !self.slots.is_empty()
    }

    /// The transport properties were exchanged on the current connection (`ours` stated,
    /// `theirs` the responder's reply): later transmissions use the thresholds they give
    /// ([`Requester::on_properties`](crate::requester::Requester::on_properties)).
    pub fn handle_properties(&mut self, ours: TransportProperties, theirs: TransportProperties) {
        self.properties = PeerProperties::Stated(theirs);
        self.req.on_properties(ours, theirs);
        self.route();
    }

    /// The responder answered the properties request with RDMA_ERR_INVAL_OPTION, or with
    /// something that is not a properties reply: this connection keeps what private data and
    /// the defaults give (`specs/rpcrdma2-transport-properties.txt` sections 2.3 and 2.5).
    pub fn handle_properties_refused(&mut self) {
        log::info!("{} stated no transport properties: private data and the defaults stay in effect", self.addr);
        self.properties = PeerProperties::Refused;
    }

    /// Which connection attempt the next one is: 1 after a connection was made, one more for
    /// each that failed since.
    pub fn connect_attempt(&self) -> u32 {
        self.failed_connects + 1
    }

    /// What the current connection's transport-properties exchange gave.
    pub fn peer_properties(&self) -> PeerProperties {
        self.properties
    }

    /// The version the current connection settled on, if it has.
    pub fn version(&self) -> Option<Version> {
        self.settled.map(|(v, _)| v)
    }

    /// The current connection's inline thresholds, once its version is settled.
    pub fn thresholds(&self) -> Option<InlineThresholds> {
        self.settled.map(|(_, t)| t)
    }

    /// The thresholds a backward-direction reply is bounded by: the forward ones, or the
    /// defaults before they are settled.
    pub fn forward_thresholds(&self) -> InlineThresholds {
        self.req.thresholds().unwrap_or_default()
    }

    /// What was sent so far.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// How the latest [`ENDED_KEPT`] connections ended, oldest first.
    pub fn ended(&self) -> impl Iterator<Item = &Ended> {
        self.ended.iter()
    }

    /// The credit window of the current connection.
    pub fn window(&self) -> u32 {
        self.req.window()
    }

    /// What was learned about responders.
    pub fn memory(&self) -> &PeerMemory {
        self.req.memory()
    }

    /// The error [`Client::connect`](crate::client::Client::connect) reports when its first
    /// attempt failed with `error`.
    pub fn connect_failure(&self, error: &Arc<DataPathError>, attempts: u32) -> ClientError {
        connect_failure(&self.addr, self.cfg.connect_timeout, error, attempts)
    }

    /// Hands `step` to the caller of `xid`, if it is still there, and queues it for waking.
    fn put(&mut self, xid: u32, step: CallStep<L>) {
        match self.slots.get_mut(&xid) {
            // Nobody takes an abandoned call's step: its reply or failure ends it, and a
            // retransmission (its connection was lost) is not sent.
            Some(Slot::Abandoned) => {
                self.slots.remove(&xid);
                if matches!(step, CallStep::Transmit { .. }) {
                    if let Some(now) = self.now {
                        self.req.cancel(xid, now);
                    }
                }
            }
            Some(slot) => {
                *slot = Slot::Ready(step);
                self.ready.push_back(xid);
            }
            None => {}
        }
    }

    /// Turns the requester's events into steps for callers and actions for the driver.
    fn route(&mut self) {
        while let Some(e) = self.req.poll_event() {
            match e {
                Event::Transmit(transmit) => {
                    // No link: the transmission was decided on a connection since found down
                    // (a message received in the same turn queued it); the requester already
                    // put the call back in its queue for the next connection, or failed it.
                    if let Some(link) = self.link.clone() {
                        self.put(transmit.xid, CallStep::Transmit { transmit, link });
                    }
                }
                Event::Failed { xid, error } => {
                    let error = self.failure(error);
                    self.put(xid, CallStep::Failed(error));
                }
                Event::Settled { version, thresholds } => self.settled = Some((version, thresholds)),
                Event::Connect => self.actions.push_back(Action::Connect { after: self.backoff }),
                Event::Disconnect => {
                    if let Some(link) = self.link.clone() {
                        self.actions.push_back(Action::Disconnect(link));
                    }
                }
            }
        }
    }

    /// What a call that failed with `failure` reports: for a failure of its last attempt, the
    /// cause: the latest connect error, how the latest connection ended.
    fn failure(&self, failure: CallFailure) -> ClientError {
        match failure {
            CallFailure::TimedOut { attempts } => {
                ClientError::ReplyTimeout { timeout: self.cfg.requester.timeout, attempts }
            }
            CallFailure::ConnectionLost { attempts } => ClientError::ConnectionLost {
                attempts,
                ended: self.ended.back().cloned().unwrap_or(Ended::Lost { first_error: None }),
            },
            CallFailure::ConnectFailed { attempts } => match &self.connect_error {
                Some(e) => self.connect_failure(e, attempts),
                // Not reached: every failed attempt is recorded before the requester hears.
                None => ClientError::Call(failure),
            },
            other => ClientError::Call(other),
        }
    }
}

/// The error for a call (or `Client::connect`) to `addr` whose last connection attempt failed
/// with `e`, after `attempts`.
fn connect_failure(addr: &str, timeout: Duration, e: &Arc<DataPathError>, attempts: u32) -> ClientError {
    let addr = addr.to_string();
    match &**e {
        DataPathError::Verbs(source @ rpcrdma_verbs::Error::ConnectionRefused(_)) => {
            ClientError::Refused { addr, attempts, source: source.clone() }
        }
        DataPathError::Verbs(source @ rpcrdma_verbs::Error::BadAddress(_)) => {
            ClientError::BadAddress { addr, source: source.clone() }
        }
        DataPathError::Verbs(source @ rpcrdma_verbs::Error::Timeout) => {
            ClientError::ConnectTimeout { addr, timeout, attempts, source: source.clone() }
        }
        _ => ClientError::ConnectFailed { addr, attempts, source: e.clone() },
    }
}
