//! One RPC-over-RDMA connection's decisions, without I/O or threads: the one core that
//! [`Client`](crate::client::Client), [`Server`](crate::server::Server) and the deterministic
//! simulator (negotiate/tests/sim) all drive.
//!
//! A connection carries forward calls one way and backward calls the other (RFC 8167), so
//! each side is a requester and a responder at once. A [`Connection`] made with
//! [`Connection::client`] is the requester of forward calls: the version probe and fallback
//! ([`Requester`]), credits, thresholds, the transport-properties
//! exchange, reconnecting with backoff, and each caller's next step; it serves the backward
//! calls the server sends. One made with [`Connection::server`] is the responder of forward
//! calls ([`Responder`]): versions, credits granted, the reply's
//! parameters, the idle rule; the replies to its backward calls come back through it.
//!
//! One vocabulary, in the manner of quinn-proto:
//!
//! ```text
//!             handle_receive ──► Received (judged once: a call to serve with its reply
//!  driver ─┬─                              parameters, a reply, the peer's RDMA_ERROR, an
//!          │                               answer queued, or nothing)
//!          ├─ handle_timeout / handle_connected / handle_link_down / start_call / ...
//!          ├─ handle_completion ◄ how the Send of a transmission ended
//!          │
//!          ├─ poll_transmit ► what the core sends of its own, marshaled: an RDMA_ERROR, an
//!          │                  extension's answer, a -07 GRANT, CONNPROP or reverse reply
//!          ├─ poll_ready ──► a caller whose step is ready (take_step: Transmit, Reply, Failed)
//!          ├─ poll_event ──► Event: connect, disconnect (why), ended (how), idle
//!          └─ poll_timeout ► the next instant handle_timeout is due
//! ```
//!
//! A received message is judged once, by the one version dispatch
//! (`rpcrdma_v2::verdict`), into [`Received`], which carries the validated header view:
//! a server serves a call with that view, and nothing reads its words again (a client's
//! reply is judged here on the receiving thread and its view detached,
//! [`Connection::take_judged_reply`]; the caller's thread, which the bytes move to, lays it
//! over them again without a parse; a -07 message rewritten in Version One's shape has its
//! view made as it is encoded, `Detached::encode`). `negotiate/tests/parse_once.rs` counts
//! the headers validated: one a message, every form, every version. `L` is the driver's handle of one transport
//! connection (an `Arc` of a queue pair for `Client`, a link number for the simulator).
//!
//! A forward call and its reply, bytes only: the client's call goes out as the Version Two
//! probe, the server answers in Version Two, and the version is settled.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use negotiate::client::ClientConfig;
//! use negotiate::connection::{Arrival, CallStep, Connection, Received};
//! use negotiate::responder::ResponderConfig;
//! use rpcrdma_v1::marshal_call::CallForm;
//! use rpcrdma_v1::Version;
//! // An RDMA_MSG with no chunks around a tiny RPC message (msg_type 0 call, 1 reply).
//! let msg = |xid: u32, vers: Version, credit: u32, msg_type: u32| -> Vec<u8> {
//!     [xid, vers.wire(), credit, 0, 0, 0, 0, xid, msg_type].iter().flat_map(|w| w.to_be_bytes()).collect()
//! };
//! let now = Instant::now();
//! let mut client: Connection<u32> = Connection::client(ClientConfig::default(), "inproc:server");
//! let mut server: Connection<()> =
//!     Connection::server(ResponderConfig::default(), Duration::from_secs(60), &[], None, now);
//!
//! client.start_call(7, now).unwrap();
//! client.poll_event(); // Connect: the driver makes transport connection 1
//! client.handle_connected(1, None, &[], now);
//! let Some(CallStep::Transmit { transmit: t, link: 1 }) = client.take_step(7) else { panic!() };
//! client.handle_sent(CallForm::Short, 1);
//!
//! let call = msg(t.xid, t.version, t.credits, 0);
//! let Received::Call { header, params } = server.handle_receive(&call, Arrival::default(), now) else { panic!() };
//! let reply = msg(header.xid(), params.version, params.credits, 1);
//!
//! assert_eq!(client.handle_receive(&reply, Arrival::default(), now), Received::Reply { xid: 7 });
//! client.deliver(7, reply, None);
//! let Some(CallStep::Reply { message, .. }) = client.take_step(7) else { panic!() };
//! assert_eq!(&message[28..32], &[0, 0, 0, 7]); // the RPC reply follows the 28-byte header
//! client.finish_call(7);
//! assert_eq!((client.version(), client.stats().short), (Some(Version::TWO), 1));
//! assert!(!client.has_calls());
//! ```

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpcrdma_v1::header::{Detached, Header};
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::Version;

use crate::client_config::{ClientConfig, ClientStats};
use crate::datapath::{DataPathError, Ended, ReplyParams};
use crate::own_keys::XidMap;
use crate::reply::{DropReason, PeerError};
use crate::requester::Requester;
use crate::responder::{Behind, Responder};

mod calls;
mod responder_half;
mod transmit;

pub use calls::{CallStep, PeerProperties, ENDED_KEPT, FIRST_BACKOFF, MAX_BACKOFF};
pub use transmit::{Transmission, TransmissionKind, ANSWERS_HELD_MOST};

/// What a received message is for ([`Connection::handle_receive`]), judged once; the same
/// vocabulary on both sides of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received<'a> {
    /// A call for this side to serve: a forward call on a server's connection, a
    /// backward-direction call (RFC 8167) on a client's. `params` say how to answer it (its
    /// version, the credits granted, the reply threshold, remote invalidation), taken now,
    /// before anything can fail, so that whatever answers the call carries them;
    /// [`serve_call`](crate::server::serve_call) serves a forward call with them.
    Call {
        /// The call's validated header.
        header: Header<'a>,
        /// How to answer it.
        params: ReplyParams,
    },
    /// The answer to this side's call or RDMA_OPTIONAL `xid`; the message is it. On a
    /// client's connection, hand the bytes to its caller with [`Connection::deliver`]; on a
    /// server's, to the backward call waiting on `xid`, if one still does.
    Reply {
        /// The XID of this side's call.
        xid: u32,
    },
    /// The peer's RDMA_ERROR naming this side's call `xid` (RFC 8166 section 4.5: it ends
    /// that call). On a client's connection its effect is already in that call's step.
    PeerError {
        /// The XID it names.
        xid: u32,
        /// What it reported.
        error: PeerError,
    },
    /// The core queued an answer to send back on the connection the message came on: an
    /// RDMA_ERROR (RFC 8166 section 4.5; RDMA_ERR_INVAL_OPTION for an RDMA_OPTIONAL no
    /// extension supports, draft section 3.1), an extension's answer, already checked to fit
    /// the peer's Receives, or a -07 RDMA2_GRANT (section 4.2.1.1) while a continued
    /// message's parts arrive. Take it with [`Connection::poll_transmit`]; nothing else
    /// happens.
    Answered,
    /// Nothing to do: a malformed reply whose call's step says so, an RDMA_OPTIONAL taken
    /// without an answer, or a message dropped by the rules (why, when this side can say).
    Nothing(Option<DropReason>),
    /// A call whose message is not in the bytes received (a -07 continued call, or a
    /// CALL_EXTERNAL, on a server's connection): it was written into a buffer of its own;
    /// take that with [`Connection::take_rewritten`], keep it while the call is served, and
    /// judge it with [`Connection::handle_rewritten`].
    Rewritten,
}

/// What a driver knows of a received message besides its bytes
/// ([`Connection::handle_receive`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Messages received behind it and not yet handled, and calls being served: all in
    /// flight for the requester, so they count against its credits (RFC 8166 section 3.3.1;
    /// [`Responder::handle_receive_behind`]). Read on a server's connection.
    pub behind: Behind,
    /// The XID of this side's own RDMA_OPTIONAL waiting for its answer, if one is (a server's
    /// [`Backchannel::send_option`](crate::backchannel::Backchannel::send_option)); a client's
    /// connection tracks its own.
    pub awaiting: Option<u32>,
}

/// What the driver must do for the connection as a whole ([`Connection::poll_event`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<L> {
    /// Make a transport connection after waiting `after` (backoff after failed attempts),
    /// then report [`Connection::handle_connected`] or [`Connection::handle_connect_failed`].
    Connect {
        /// How long to wait first.
        after: Duration,
    },
    /// Close this transport connection, for `cause`, then report
    /// [`Connection::handle_link_down`] once it is down.
    Disconnect {
        /// The transport connection to close.
        link: L,
        /// Why: the words for its close and its log.
        cause: CloseCause,
    },
    /// A transport connection of this side's ended, as [`Connection::handle_link_down`] was
    /// told: how, with its cause (closed here and why, or lost and the first error that was
    /// reaped). Calls in flight on it go out again on the next, or fail with this as their
    /// cause. Nothing to do: for the driver's log and counts.
    Ended(Ended),
    /// The connection has been silent for its idle timeout: the serving side closes it.
    Idle,
}

/// Why the core asks for its transport connection to be closed ([`Event::Disconnect`]).
///
/// ```
/// use std::time::Duration;
/// use negotiate::connection::CloseCause;
/// let cause = CloseCause::ReplyTimeout { timeout: Duration::from_secs(30) };
/// assert_eq!(cause.to_string(), "a call had no reply within the requester's timeout (30s)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCause {
    /// A call had no reply within the requester's timeout: the connection is closed, which
    /// fences the call's memory, and the call goes out again on the next (RFC 8166 section
    /// 4.5.4).
    ReplyTimeout {
        /// The requester's timeout.
        timeout: Duration,
    },
}

impl std::fmt::Display for CloseCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseCause::ReplyTimeout { timeout } => {
                write!(f, "a call had no reply within the requester's timeout ({timeout:?})")
            }
        }
    }
}

/// One connection's decisions, both directions: see the [module documentation](self).
///
/// A client's connection outlives the transport connections it makes to its responder: calls
/// in flight when one is lost go out again on the next (RFC 8166 section 4.5.4), and what
/// was learned of the responder stays (the version memory, the backoff).
pub struct Connection<L> {
    // ---- the requester of forward calls (a client's connection) ----
    cfg: ClientConfig,
    addr: String,
    req: Option<Requester>,
    link: Option<L>,
    slots: XidMap<calls::Slot<L>>,
    /// Callers whose step changed, in order.
    ready: VecDeque<u32>,
    events: VecDeque<Event<L>>,
    settled: Option<(Version, InlineThresholds)>,
    /// What the current transport connection's transport-properties exchange gave.
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
    /// The header of the reply [`Connection::handle_receive`] judged last, kept as offsets
    /// until [`Connection::take_judged_reply`] takes it (a client's [`Connection::deliver`]
    /// hands it on with the bytes; a server's driver gives it to its backward call): the
    /// thread that completes the call lays it over the bytes, with no second parse.
    judged_reply: Option<Detached>,
    /// A -07 continued reply assembled by [`Connection::handle_receive`], with its call's XID,
    /// until [`Connection::deliver`] hands it to that call in place of the Receive's bytes.
    rewritten_reply: Option<(u32, Vec<u8>)>,
    // ---- the responder of forward calls (a server's connection) ----
    serving: Option<responder_half::ResponderHalf>,
    // ---- both ----
    /// What the core sends of its own, and the one out ([`Connection::poll_transmit`]).
    outbox: transmit::Outbox,
}

impl<L: Clone> Connection<L> {
    /// The transport header of the reply to `xid` that [`Connection::handle_receive`] just
    /// judged ([`Received::Reply`]), kept as offsets to lay over the message's bytes wherever
    /// they go ([`Detached::attach`]) instead of parsing them again; `None` for the answer to
    /// an RDMA_OPTIONAL, which has no such header. A client's [`Connection::deliver`] takes
    /// it itself; a server's driver takes it for its backward call.
    pub fn take_judged_reply(&mut self, xid: u32) -> Option<Detached> {
        self.judged_reply.take().filter(|h| h.xid() == xid)
    }

    /// Judges a message received at `now` once, by its version's rules and this side's
    /// (see [`Received`]); `arrival` says what else the driver knows of it.
    pub fn handle_receive<'a>(&mut self, bytes: &'a [u8], arrival: Arrival, now: Instant) -> Received<'a> {
        if self.serving.is_some() {
            self.receive_as_responder(bytes, arrival, now)
        } else {
            self.receive_as_requester(bytes, now)
        }
    }

    /// The clock reads `now`: calls past their deadline time out (a client's connection,
    /// while a transport connection is up), or the connection is found idle (a server's:
    /// [`Event::Idle`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.serving.is_some() {
            self.idle_check(now)
        } else {
            self.call_timeouts(now)
        }
    }

    /// When [`Connection::handle_timeout`] is next due, if anything is timed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (&self.serving, &self.req) {
            (Some(s), _) => Some(s.idle_deadline()),
            (None, Some(r)) => r.poll_timeout(),
            (None, None) => None,
        }
    }

    /// The next thing the driver must do for the connection as a whole.
    pub fn poll_event(&mut self) -> Option<Event<L>> {
        self.events.pop_front()
    }

    /// Whether [`Connection::poll_event`] has something.
    pub fn has_event(&self) -> bool {
        !self.events.is_empty()
    }

    /// The thresholds this side's answers to calls are bounded by: a backward call's reply
    /// (a client's connection: the server's Receives, sized by the forward call threshold)
    /// or an extension's answer.
    fn requester_thresholds(&self) -> InlineThresholds {
        self.req.as_ref().and_then(Requester::thresholds).unwrap_or_default()
    }

    /// The requester half: present on a client's connection.
    fn requester(&mut self) -> &mut Requester {
        self.req.as_mut().expect("a requester's operation on a server's connection")
    }

    /// A connection with neither half set up yet.
    fn empty(cfg: ClientConfig, addr: &str) -> Self {
        Connection {
            cfg,
            addr: addr.to_string(),
            req: None,
            link: None,
            slots: XidMap::default(),
            ready: VecDeque::new(),
            events: VecDeque::new(),
            settled: None,
            properties: PeerProperties::NotExchanged,
            stats: ClientStats::default(),
            closing: false,
            ended: VecDeque::new(),
            connect_error: None,
            backoff: Duration::ZERO,
            failed_connects: 0,
            now: None,
            next_option_xid: calls::FIRST_OPTION_XID,
            judged_reply: None,
            rewritten_reply: None,
            serving: None,
            outbox: transmit::Outbox::default(),
        }
    }
}

impl<L> Connection<L> {
    /// The responder state machine of a server's connection (versions, credits, what each
    /// side advertised).
    ///
    /// # Panics
    ///
    /// On a client's connection, which serves forward calls to nobody.
    pub fn responder(&self) -> &Responder {
        &self.serving.as_ref().expect("a responder's operation on a client's connection").responder
    }
}
