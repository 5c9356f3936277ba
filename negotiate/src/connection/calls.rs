use rpcrdma_v2::properties::TransportProperties;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use rpcrdma_v1::header::Detached;
use rpcrdma_v1::marshal_call::{CallForm, InlineThresholds};
use rpcrdma_v1::Version;

use super::{CloseCause, Connection, Event, Received};
use crate::client_config::{ClientConfig, ClientError, ClientStats};
use crate::datapath::{DataPathError, Ended, ReplyParams};
use crate::memory::PeerMemory;
use crate::reply::Incoming;
use crate::requester::{Action, CallFailure, Requester, Transmit};

/// What a connection's transport-properties exchange (`specs/rpcrdma2-transport-properties.txt`)
/// gave.
///
/// ```
/// use negotiate::connection::PeerProperties;
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

/// How many ended connections [`Connection::ended`] remembers.
pub const ENDED_KEPT: usize = 64;

/// The wait before the first retry of a failed connection attempt; it doubles with each
/// further failure up to [`MAX_BACKOFF`], and a connection made resets it.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// The longest wait between connection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// What the caller of one call must do next ([`Connection::take_step`]).
#[derive(Debug)]
pub enum CallStep<L> {
    /// Marshal and send the call on `link` as `transmit` says (a retransmission first gives up
    /// the previous attempt's chunks), then report [`Connection::handle_sent`].
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
        /// Its transport header as the core judged it, to lay over `message`
        /// ([`Detached::attach`]) instead of parsing it again; `None` for the answer to an
        /// RDMA_OPTIONAL of ours, which has no such header.
        header: Option<Detached>,
        /// The R_key the responder invalidated with Send With Invalidate, if it did.
        invalidated: Option<u32>,
    },
    /// The call failed, with its cause; it is over.
    Failed(ClientError),
}

pub(super) enum Slot<L> {
    Waiting,
    Ready(CallStep<L>),
    /// Its caller went away while its transmission was out ([`Connection::abandon`]): it
    /// keeps its credit until its reply or its connection's loss, and then ends unseen.
    Abandoned,
}

/// Where the XIDs of a client's own RDMA_OPTIONAL messages start: far from the small XIDs
/// RPC clients usually begin with (the responder's answers are matched to them by XID).
pub(super) const FIRST_OPTION_XID: u32 = 0x4f50_0000;

/// How [`Connection::start_with`] starts something in the requester.
type StartFn = fn(&mut Requester, u32, Instant) -> Result<(), crate::requester::DuplicateXid>;

impl<L: Clone> Connection<L> {
    /// A client's connection to the responder at `addr`, with no transport connection yet:
    /// its first [`Event`] is to make one.
    pub fn client(cfg: ClientConfig, addr: &str) -> Self {
        let mut req = Requester::new(cfg.requester, addr);
        req.set_registry(crate::extension::registry(&cfg.extensions));
        req.set_host_auth(cfg.host_auth.clone());
        req.set_draft07_registry(crate::extension07::Registry07::of(&cfg.draft07_extensions));
        let mut core = Connection::empty(cfg, addr);
        // Room for a loaded client's calls at once: its steady state allocates nothing (a
        // server's connections, which hold no calls of their own, make none).
        core.slots.reserve(crate::own_keys::CALLS_AT_ONCE);
        core.ready.reserve(crate::own_keys::CALLS_AT_ONCE);
        core.req = Some(req);
        core.route();
        core
    }

    /// An API call starts call `xid`: its caller then waits for [`Connection::take_step`].
    /// `xid` is one this side drew ([`Requester::call`] says why it matters).
    pub fn start_call(&mut self, xid: u32, now: Instant) -> Result<(), ClientError> {
        self.start_with(xid, now, Requester::call)
    }

    /// Starts `xid` in the requester with `start` (a call, a call-only call, a message of
    /// ours), its caller's slot waiting for its first step; refused once the client closes.
    fn start_with(&mut self, xid: u32, now: Instant, start: StartFn) -> Result<(), ClientError> {
        self.now = Some(now);
        if self.closing {
            return Err(ClientError::Closed);
        }
        start(self.requester(), xid, now)?;
        self.slots.insert(xid, Slot::Waiting);
        self.route();
        Ok(())
    }

    /// An API call starts call `xid` of a call-only procedure ([`Requester::start_call_only`]):
    /// its one step is a [`CallStep::Transmit`] (send it with no chunk,
    /// `datapath::send_call_only`, then report [`Connection::handle_sent_call_only`]), or a
    /// failure.
    pub fn start_call_only(&mut self, xid: u32, now: Instant) -> Result<(), ClientError> {
        self.start_with(xid, now, Requester::start_call_only)
    }

    /// Call-only call `xid` was sent ([`Requester::sent_call_only`]) across `parts` Sends
    /// (counted in [`Connection::stats`]): it is over.
    pub fn handle_sent_call_only(&mut self, xid: u32, parts: usize, now: Instant) {
        self.now = Some(now);
        self.handle_sent(CallForm::Short, parts);
        self.stats.call_only += 1;
        self.requester().sent_call_only(xid, now);
        self.slots.remove(&xid);
        self.route();
    }

    /// An API call starts an RDMA_OPTIONAL ([`Requester::start_option`]) with an XID this
    /// core picks (one no call or option of this client uses), returned: its caller then
    /// waits for [`Connection::take_step`] as a call's does. Its steps: a
    /// [`CallStep::Transmit`] (send the RDMA_OPTIONAL), then a [`CallStep::Reply`] with the
    /// peer's answering RDMA_OPTIONAL, or [`CallStep::Failed`] (RDMA_ERR_INVAL_OPTION is
    /// `Call(Peer(InvalOption))`).
    pub fn start_option(&mut self, now: Instant) -> Result<u32, ClientError> {
        self.start_message(now, Requester::start_option)
    }

    /// An API call starts a message of a -07 extension's header type
    /// ([`Requester::start_extension`]) with an XID this connection chooses, which it returns:
    /// its steps come from [`Connection::take_step`] like a call's, its answer is the step
    /// [`CallStep::Reply`] carries.
    pub fn start_extension(&mut self, now: Instant) -> Result<u32, ClientError> {
        self.start_message(now, Requester::start_extension)
    }

    /// Starts a message of ours that is not a call with `start` (the option's dialect), under
    /// an XID this core picks.
    fn start_message(&mut self, now: Instant, start: StartFn) -> Result<u32, ClientError> {
        if self.closing {
            return Err(ClientError::Closed);
        }
        // Callers choose their calls' XIDs; options take the next free one of a counter.
        let mut xid = self.next_option_xid;
        while self.requester().is_active(xid) {
            xid = xid.wrapping_add(1);
        }
        self.next_option_xid = xid.wrapping_add(1);
        self.start_with(xid, now, start)?;
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

    /// Hands back a step [`Connection::take_step`] gave, untaken: its caller takes it.
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
        self.req.as_ref().and_then(Requester::next_transmit)
    }

    /// Counts `n` more Sends for the parts of a -07 call continued across Sends and gives the
    /// total they carry ([`Requester::take_call_parts`]), or `None` when the window lacks room
    /// now.
    pub fn take_call_parts(&mut self, n: u32) -> Option<u32> {
        self.req.as_mut().and_then(|r| r.take_call_parts(n))
    }

    /// Offers the server the reverse direction on -07 connections from the next one settled
    /// on ([`Requester::set_reverse_direction`]).
    pub fn offer_reverse_direction(&mut self, offered: rpcrdma_v2::draft07::properties::ReverseDirection) {
        if let Some(r) = self.req.as_mut() {
            r.set_reverse_direction(offered);
        }
    }

    /// Holds this side's reply to the server's reverse-direction call until the window has
    /// room for it ([`Requester::queue_reverse_reply`]); it then comes out of
    /// [`Connection::poll_transmit`].
    pub fn queue_reverse_reply(&mut self, reply: Vec<u8>) -> bool {
        self.req.as_mut().is_some_and(|r| r.queue_reverse_reply(reply))
    }

    /// Whether the caller of `xid` has a step to take.
    pub fn has_ready(&self, xid: u32) -> bool {
        matches!(self.slots.get(&xid), Some(Slot::Ready(_)))
    }

    /// The caller of `xid` sent a transmission in `form` across `parts` Sends (counted in
    /// [`Connection::stats`]).
    pub fn handle_sent(&mut self, form: CallForm, parts: usize) {
        if parts > 1 {
            self.stats.continued += 1;
        }
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
        self.requester().cancel(xid, now);
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
        if sent && !unsent && self.requester().in_flight(xid) {
            self.slots.insert(xid, Slot::Abandoned);
        } else {
            self.slots.remove(&xid);
            self.requester().cancel(xid, now);
            self.route();
        }
    }

    /// Whether `xid` was abandoned and is still waiting for its reply or its connection's
    /// loss ([`Connection::abandon`]); its memory stays open to the responder until then.
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

    /// A connection was made: `ours` is the private data this side sent, `accepted` what the
    /// responder's accept carried.
    pub fn handle_connected(&mut self, link: L, ours: Option<PrivateData>, accepted: &[u8], now: Instant) {
        self.now = Some(now);
        self.link = Some(link);
        self.forget_transmissions();
        self.properties = PeerProperties::NotExchanged;
        self.connect_error = None;
        self.backoff = Duration::ZERO;
        self.failed_connects = 0;
        self.requester().handle_connected(ours, accepted, now);
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
        self.requester().handle_connect_failed(now);
        self.route();
    }

    /// A client's [`Connection::handle_receive`]: the requester judges the message once.
    pub(super) fn receive_as_requester<'a>(&mut self, bytes: &'a [u8], now: Instant) -> Received<'a> {
        self.now = Some(now);
        // What goes back to the responder (an extension's answer, a backward call's reply):
        // ours to the server's Receives, which the forward call threshold sizes (RFC 8797
        // section 4).
        let (threshold, credits) = (self.requester_thresholds().call, self.cfg.requester.credits);
        // A transmission handed out and not yet taken by its caller has not been posted: a
        // reply to it answers nothing sent (a peer that guessed the XID), and is dropped.
        let slots = &self.slots;
        let sent = |xid: u32| !matches!(slots.get(&xid), Some(Slot::Ready(CallStep::Transmit { .. })));
        let requester = self.req.as_mut().expect("a requester's operation on a server's connection");
        let received = match requester.handle_receive_for_sent(bytes, now, &sent) {
            // Routed when its bytes are delivered: its caller's step comes first, then what
            // its credit let go.
            Incoming::Reply { xid, header } => {
                self.judged_reply = Some(header.detach());
                return Received::Reply { xid };
            }
            Incoming::OptionAnswer { xid } => {
                self.judged_reply = None;
                return Received::Reply { xid };
            }
            // A -07 continued reply, assembled: its own buffer goes to the caller in place of
            // the Receive's bytes ([`Connection::deliver`]).
            Incoming::ReplyRewritten { xid, message, view } => {
                self.judged_reply = Some(view);
                self.rewritten_reply = Some((xid, message));
                return Received::Reply { xid };
            }
            Incoming::Taken => Received::Nothing(None),
            Incoming::Grant(bytes) => {
                self.answer_with(bytes);
                Received::Answered
            }
            Incoming::Refuse(e) => {
                self.answer_error(e);
                Received::Answered
            }
            // A backward call is answered inline, in its version, within the server's
            // Receives; its reply grants nothing (the client has no backward credits to give).
            // On -07 (a reverse-direction call, section 4.6) the reply takes its running total
            // when the window has room ([`Connection::queue_reverse_reply`]).
            Incoming::BackwardCall(header) => {
                let draft07 =
                    self.dialect() == Some(rpcrdma_v2::dialect::Dialect::Ietf07) && header.version() == Version::TWO;
                let params = ReplyParams {
                    version: header.version(),
                    credits: crate::backchannel::CREDITS,
                    credit_owed: false,
                    reply_inline_threshold: threshold,
                    remote_invalidation: false,
                    draft07,
                    invalidate: None,
                };
                Received::Call { header, params }
            }
            Incoming::Consumed | Incoming::OptionHandled { answer: None, .. } => Received::Nothing(None),
            Incoming::RefuseOption(e) => {
                self.answer_error(e);
                Received::Answered
            }
            Incoming::OptionHandled { xid, answer: Some(a), .. } if crate::extension::fits(&a, threshold) => {
                self.answer_with(a.to_message(xid, credits));
                Received::Answered
            }
            // Larger than the responder's Receives: not sent (crate::extension's bounds).
            Incoming::OptionHandled { .. } => Received::Nothing(None),
            Incoming::Dropped(why) => Received::Nothing(Some(why)),
        };
        self.route();
        received
    }

    /// Hands the bytes of the reply [`Connection::handle_receive`] found for call `xid`
    /// ([`Received::Reply`]) to its caller, with the R_key the responder invalidated with
    /// Send With Invalidate, if it did: its step is then [`CallStep::Reply`].
    pub fn deliver(&mut self, xid: u32, message: Vec<u8>, invalidated: Option<u32>) {
        let header = self.take_judged_reply(xid);
        // A continued reply was assembled in a buffer of its own: the caller reads that.
        let message = match self.rewritten_reply.take() {
            Some((x, rewritten)) if x == xid => rewritten,
            _ => message,
        };
        self.put(xid, CallStep::Reply { message, header, invalidated });
        self.route();
    }

    /// The current connection is down, and every message received before it went down has
    /// been handled: calls in flight on it go out again on the next one, or fail.
    pub fn handle_link_down(&mut self, ended: Ended, now: Instant) {
        self.now = Some(now);
        log::info!("the connection to {} ended: {ended}", self.addr);
        if self.ended.len() == ENDED_KEPT {
            self.ended.pop_front();
        }
        self.events.push_back(Event::Ended(ended.clone()));
        self.ended.push_back(ended);
        self.link = None;
        self.forget_transmissions();
        self.settled = None;
        self.requester().handle_disconnected(now);
        self.route();
    }

    /// A client's [`Connection::handle_timeout`]: while a transport connection is up, calls
    /// past their deadline time out.
    pub(super) fn call_timeouts(&mut self, now: Instant) {
        self.now = Some(now);
        if self.link.is_some() && self.req.as_mut().is_some_and(|r| r.is_due(now)) {
            self.requester().handle_timeout(now);
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

    /// Whether [`Connection::close`] was called.
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
    /// ([`Requester::handle_properties`](crate::requester::Requester::handle_properties)).
    pub fn handle_properties(&mut self, ours: TransportProperties, theirs: TransportProperties) {
        self.properties = PeerProperties::Stated(theirs);
        self.requester().handle_properties(ours, theirs);
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

    /// The responder's -07 properties on the current connection, once its RDMA2_CONNPROP_FINAL
    /// came ([`Requester::draft07_peer_properties`]).
    pub fn draft07_peer_properties(&self) -> Option<&rpcrdma_v2::draft07::properties::Properties> {
        self.req.as_ref()?.draft07_peer_properties()
    }

    /// The current connection's Version Two dialect, once settled on Version Two (docs/design.md,
    /// "Version Two's two dialects").
    pub fn dialect(&self) -> Option<rpcrdma_v2::dialect::Dialect> {
        self.req.as_ref().and_then(Requester::dialect)
    }

    /// The current connection's inline thresholds, once its version is settled.
    pub fn thresholds(&self) -> Option<InlineThresholds> {
        self.settled.map(|(_, t)| t)
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
        self.req.as_ref().map_or(0, Requester::window)
    }

    /// What was learned about responders.
    ///
    /// # Panics
    ///
    /// On a server's connection, which learns nothing of responders.
    pub fn memory(&self) -> &PeerMemory {
        self.req.as_ref().expect("a server's connection has no requester").memory()
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
                        self.requester().cancel(xid, now);
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
        while let Some(e) = self.req.as_mut().and_then(Requester::poll_action) {
            match e {
                Action::Transmit(transmit) => {
                    // No link: the transmission was decided on a connection since found down
                    // (a message received in the same turn queued it); the requester already
                    // put the call back in its queue for the next connection, or failed it.
                    if let Some(link) = self.link.clone() {
                        self.put(transmit.xid, CallStep::Transmit { transmit, link });
                    }
                }
                Action::Failed { xid, error } => {
                    let error = self.failure(error);
                    self.put(xid, CallStep::Failed(error));
                }
                Action::Settled { version, thresholds } => self.settled = Some((version, thresholds)),
                Action::Connect => self.events.push_back(Event::Connect { after: self.backoff }),
                Action::Disconnect => {
                    if let Some(link) = self.link.clone() {
                        let cause = CloseCause::ReplyTimeout { timeout: self.cfg.requester.timeout };
                        self.events.push_back(Event::Disconnect { link, cause });
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
