//! One connection of a responder, decided without I/O: what each received message asks of the
//! serving side, with the parameters its answer must carry, what to answer a call that could
//! not be served, and when the connection has been idle too long. [`Server`](crate::server)
//! drives it with a queue pair, a thread and the wall clock; the deterministic simulator
//! (negotiate/tests/sim) drives the same value with simulated memory and a virtual clock, so
//! both make exactly these decisions.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use negotiate::responder;
//! use negotiate::serve::{Serve, Step};
//! let now = Instant::now();
//! let mut conn = Serve::new(responder::ResponderConfig::default(), Duration::from_secs(60), &[], None, now);
//! // A Version One call: RDMA_MSG, no chunks, then the RPC call with the same XID.
//! let call: Vec<u8> = [7u32, 1, 32, 0, 0, 0, 0, 7, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
//! let Step::Call { header, params } = conn.on_message(&call, 0, now) else { panic!() };
//! assert_eq!((header.xid(), params.version.wire(), params.reply_inline_threshold), (7, 1, 1024));
//! assert!(!conn.is_idle(now + Duration::from_secs(59)));
//! assert!(conn.is_idle(now + Duration::from_secs(60)));
//! ```

use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use rpcrdma_v1::header::Header;
use rpcrdma_v1::verdict::ErrorReply;

use crate::reply::PeerError;
use crate::responder::{self, Received, ReplyParams, Responder};

/// What a received message asks of the serving side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<'a> {
    /// Serve this call: fetch its chunks, run the service, and reply with `params` (taken now,
    /// before anything can fail, so that whatever answers the call carries its version and
    /// credit grant); [`serve_call`](crate::server::serve_call) does all of it.
    Call {
        /// The call's validated header.
        header: Header<'a>,
        /// How to reply.
        params: ReplyParams,
    },
    /// Send this RDMA_ERROR back (RFC 8166 section 4.5); nothing else happens.
    SendError(ErrorReply),
    /// A reply to this side's backward-direction call.
    BackwardReply(Header<'a>),
    /// The requester's RDMA_ERROR naming `xid`: it ends the backward call with that XID, if
    /// one is outstanding (RFC 8166 section 4.5).
    PeerError {
        /// The XID it names.
        xid: u32,
        /// What it reported.
        error: PeerError,
    },
    /// Send this RDMA_OPTIONAL back: an extension's answer to the requester's (draft section
    /// 3.1), with its XID, already checked to fit the requester's Receives.
    SendBack(Vec<u8>),
    /// The requester's answer to this side's RDMA_OPTIONAL `xid` (the message is it): for
    /// whoever waits on that XID.
    OptionAnswer {
        /// The XID of this side's RDMA_OPTIONAL.
        xid: u32,
    },
    /// Nothing to do (an RDMA_OPTIONAL its handler took with no answer, or one too large for
    /// the requester's Receives, or a message dropped by the rules).
    Nothing,
}

/// One accepted connection's serving decisions (see the [module documentation](self)).
///
/// Driven with bytes only: a responder of Version One alone refuses a Version Two probe with
/// ERR_VERS, then serves the call again in Version One.
///
/// ```
/// use std::time::{Duration, Instant};
/// use negotiate::responder::ResponderConfig;
/// use negotiate::serve::{Serve, Step};
/// use rpcrdma_v1::Version;
/// let to_bytes = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
/// let now = Instant::now();
/// let cfg = ResponderConfig::default().versions((Version::ONE, Version::ONE));
/// let mut conn = Serve::new(cfg, Duration::from_secs(60), &[], None, now);
///
/// // XID 5 as the Version Two probe: answered ERR_VERS (code 1), range 1..=1.
/// let probe = to_bytes(&[5, 2, 32, 0, 0, 0, 0, 5, 0]);
/// let Step::SendError(err) = conn.on_message(&probe, 0, now) else { panic!() };
/// assert_eq!((err.xid(), err.code()), (5, 1));
///
/// // Sent again in Version One: a call to serve, and how to reply to it.
/// let call = to_bytes(&[5, 1, 32, 0, 0, 0, 0, 5, 0]);
/// let Step::Call { header, params } = conn.on_message(&call, 0, now) else { panic!() };
/// assert_eq!((header.xid(), params.version), (5, Version::ONE));
/// assert_eq!(conn.idle_deadline(), now + Duration::from_secs(60));
/// ```
pub struct Serve {
    responder: Responder,
    idle_timeout: Duration,
    last_heard: Instant,
    over_limits_reported: u64,
}

impl Serve {
    /// A connection accepted at `now`: `received` is the requester's private data as the CM
    /// delivered it, `ours` what this side advertised in its accept; `idle_timeout` is how long
    /// it may stay silent.
    pub fn new(
        cfg: responder::ResponderConfig,
        idle_timeout: Duration,
        received: &[u8],
        ours: Option<PrivateData>,
        now: Instant,
    ) -> Self {
        let mut responder = Responder::new(cfg);
        responder.on_connected(received, ours);
        Serve { responder, idle_timeout, last_heard: now, over_limits_reported: 0 }
    }

    /// The handlers of this connection's RDMA_OPTIONAL messages ([`crate::extension`]).
    pub fn set_registry(&mut self, registry: rpcrdma_v2::options::Registry) {
        self.responder.set_registry(registry);
    }

    /// Gives this connection the transport-properties extension, stating `ours`
    /// ([`Responder::set_properties`]).
    pub fn set_properties(&mut self, ours: rpcrdma_v2::properties::TransportProperties) {
        self.responder.set_properties(ours);
    }

    /// The responder state machine (versions, credits, what each side advertised).
    pub fn responder(&self) -> &Responder {
        &self.responder
    }

    /// Judges a message received at `now`, with `waiting` more already received behind it
    /// (they count against the requester's credits: [`Responder::on_receive_behind`]).
    pub fn on_message<'a>(&mut self, bytes: &'a [u8], waiting: usize, now: Instant) -> Step<'a> {
        self.on_message_awaiting(bytes, waiting, now, &|_| false)
    }

    /// [`Serve::on_message`] while this side's own RDMA_OPTIONAL messages whose XIDs
    /// `awaiting` names wait for their answers ([`Responder::on_receive_awaiting`]).
    pub fn on_message_awaiting<'a>(
        &mut self,
        bytes: &'a [u8],
        waiting: usize,
        now: Instant,
        awaiting: &dyn Fn(u32) -> bool,
    ) -> Step<'a> {
        self.last_heard = now;
        match self.responder.on_receive_awaiting(bytes, waiting, awaiting) {
            Received::Call(header) => {
                let params = self.responder.reply_params(header.xid()).expect("a call just received is in flight");
                Step::Call { header, params }
            }
            Received::SendError(e) => Step::SendError(e),
            Received::BackwardReply(h) => Step::BackwardReply(h),
            Received::PeerError { xid, error } => Step::PeerError { xid, error },
            Received::Handled { xid, answer: Some(a), .. } => {
                // Server to client: the requester's Receives, sized by the reply threshold.
                let threshold = self.responder.advertised().for_version(rpcrdma_v2::RPCRDMA2_VERSION).reply;
                if crate::extension::fits(&a, threshold) {
                    Step::SendBack(a.to_message(xid, self.responder.credit_limit()))
                } else {
                    Step::Nothing
                }
            }
            Received::OptionAnswer { xid } => Step::OptionAnswer { xid },
            Received::Handled { answer: None, .. } | Received::Dropped => Step::Nothing,
        }
    }

    /// Whether the connection has been silent for the idle timeout at `now` (the serving side
    /// then closes it).
    pub fn is_idle(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_heard) >= self.idle_timeout
    }

    /// When the connection becomes idle if nothing arrives before.
    pub fn idle_deadline(&self) -> Instant {
        // (An idle timeout of `Duration::MAX`: never idle.)
        crate::limits::deadline(self.last_heard, self.idle_timeout)
    }

    /// Header-limit refusals since the last time this was asked, for a sum over connections.
    pub fn new_over_limits(&mut self) -> u64 {
        let all = self.responder.over_limits();
        std::mem::replace(&mut self.over_limits_reported, all).abs_diff(all)
    }
}
