//! The responder half: a server's connection, deciding what each received message asks of
//! the serving side, with the parameters its answer must carry, and when the connection has
//! been idle too long.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use negotiate::connection::{Arrival, Connection, Event, Received, TransmissionKind};
//! use negotiate::responder::ResponderConfig;
//! use rpcrdma_v1::Version;
//! let to_bytes = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
//! let now = Instant::now();
//! let cfg = ResponderConfig::default().versions((Version::ONE, Version::ONE));
//! let mut conn: Connection<()> = Connection::server(cfg, Duration::from_secs(60), &[], None, now);
//!
//! // XID 5 as the Version Two probe to a Version One responder: answered ERR_VERS (code 1),
//! // range 1..=1.
//! let probe = to_bytes(&[5, 2, 32, 0, 0, 0, 0, 5, 0]);
//! assert_eq!(conn.handle_receive(&probe, Arrival::default(), now), Received::Answered);
//! let err = conn.poll_transmit().expect("the answer");
//! assert_eq!(err.kind, TransmissionKind::Error { xid: 5, code: 1 });
//! conn.handle_completion(err.id, Ok(())); // its Send completed
//!
//! // Sent again in Version One: a call to serve, and how to reply to it.
//! let call = to_bytes(&[5, 1, 32, 0, 0, 0, 0, 5, 0]);
//! let Received::Call { header, params } = conn.handle_receive(&call, Arrival::default(), now) else { panic!() };
//! assert_eq!((header.xid(), params.version, params.reply_inline_threshold), (5, Version::ONE, 1024));
//!
//! // Silent for its idle timeout: the serving side closes it.
//! assert_eq!(conn.poll_timeout(), Some(now + Duration::from_secs(60)));
//! conn.handle_timeout(now + Duration::from_secs(59));
//! assert_eq!(conn.poll_event(), None);
//! conn.handle_timeout(now + Duration::from_secs(60));
//! assert_eq!(conn.poll_event(), Some(Event::Idle));
//! ```

use std::time::{Duration, Instant};

use cm_private_data::PrivateData;

use super::{Arrival, Connection, Event, Received};
use crate::client_config::ClientConfig;
use crate::responder::{self, Responder};

/// What only a server's connection keeps.
pub(super) struct ResponderHalf {
    pub(super) responder: Responder,
    idle_timeout: Duration,
    last_heard: Instant,
    over_limits_reported: u64,
}

impl ResponderHalf {
    /// When the connection becomes idle if nothing arrives before.
    pub(super) fn idle_deadline(&self) -> Instant {
        // (An idle timeout of `Duration::MAX`: never idle.)
        crate::limits::deadline(self.last_heard, self.idle_timeout)
    }
}

impl<L: Clone> Connection<L> {
    /// A server's connection accepted at `now`: `received` is the requester's private data as
    /// the CM delivered it, `ours` what this side advertised in its accept; `idle_timeout` is
    /// how long it may stay silent.
    pub fn server(
        cfg: responder::ResponderConfig,
        idle_timeout: Duration,
        received: &[u8],
        ours: Option<PrivateData>,
        now: Instant,
    ) -> Self {
        let mut responder = Responder::new(cfg);
        responder.handle_connected(received, ours);
        let mut conn = Connection::empty(ClientConfig::default(), "");
        conn.serving = Some(ResponderHalf { responder, idle_timeout, last_heard: now, over_limits_reported: 0 });
        conn
    }

    /// The handlers of this connection's RDMA_OPTIONAL messages ([`crate::extension`]).
    ///
    /// # Panics
    ///
    /// On a client's connection, whose extensions come with its [`ClientConfig`].
    pub fn set_registry(&mut self, registry: rpcrdma_v2::options::Registry) {
        self.serving_mut().responder.set_registry(registry);
    }

    /// A -07 call, whose reply parameters were `params`, was served with no reply, a
    /// call-only procedure's ([`Responder::draft07_served_without_reply`]): true when an
    /// RDMA2_GRANT is to be sent instead, queued for [`Connection::poll_transmit`]. False on
    /// a client's connection.
    pub fn draft07_served_without_reply(&mut self, params: &crate::datapath::ReplyParams) -> bool {
        let grant = self.serving.as_mut().and_then(|s| s.responder.draft07_served_without_reply(params));
        grant.map(|g| self.answer_with(g)).is_some()
    }

    /// The handlers of -07 extensions' header types ([`Responder::set_draft07_registry`]).
    ///
    /// # Panics
    ///
    /// On a client's connection, whose extensions come with its [`ClientConfig`].
    pub fn set_draft07_registry(&mut self, registry: crate::extension07::Registry07) {
        self.serving_mut().responder.set_draft07_registry(registry);
    }

    /// Gives this connection the transport-properties extension, stating `ours`
    /// ([`Responder::set_properties`]).
    ///
    /// # Panics
    ///
    /// On a client's connection, whose properties come with its [`ClientConfig`].
    pub fn set_properties(&mut self, ours: rpcrdma_v2::properties::TransportProperties) {
        self.serving_mut().responder.set_properties(ours);
    }

    /// The transport properties this side states if the connection speaks
    /// draft-ietf-nfsv4-rpcrdma-version-two-07 ([`Responder::set_draft07_properties`]).
    ///
    /// # Panics
    ///
    /// On a client's connection.
    pub fn set_draft07_properties(&mut self, ours: rpcrdma_v2::draft07::properties::Properties) {
        self.serving_mut().responder.set_draft07_properties(ours);
    }

    /// On a server's connection: its -07 Sends are counted as they are posted
    /// ([`Responder::count_draft07_sends_when_posted`]).
    pub fn count_draft07_sends_when_posted(&mut self) {
        if let Some(s) = self.serving.as_mut() {
            s.responder.count_draft07_sends_when_posted();
        }
    }

    /// One more Send on a server's -07 connection: its running total, once the requester's
    /// window has room ([`Responder::draft07_part_credit`]); `None` while it is shut, on
    /// another version, or on a client's connection.
    pub fn draft07_part_credit(&mut self) -> Option<u32> {
        self.serving.as_mut()?.responder.draft07_part_credit()
    }

    /// Whether the connection has been silent for the idle timeout at `now` (the serving side
    /// then closes it); never on a client's connection.
    pub fn is_idle(&self, now: Instant) -> bool {
        self.serving.as_ref().is_some_and(|s| now >= s.idle_deadline())
    }

    /// Header-limit refusals since the last time this was asked, for a sum over connections.
    pub fn new_over_limits(&mut self) -> u64 {
        let Some(s) = self.serving.as_mut() else { return 0 };
        let all = s.responder.over_limits();
        std::mem::replace(&mut s.over_limits_reported, all).abs_diff(all)
    }

    /// A server's [`Connection::handle_receive`]: the responder judges the message once.
    pub(super) fn receive_as_responder<'a>(&mut self, bytes: &'a [u8], arrival: Arrival, now: Instant) -> Received<'a> {
        let s = self.serving_mut();
        s.last_heard = now;
        let awaiting = |x| Some(x) == arrival.awaiting;
        match s.responder.handle_receive_awaiting(bytes, arrival.behind, &awaiting) {
            responder::Asked::Call(header) => {
                let params = s.responder.reply_params(header.xid()).expect("a call just received is in flight");
                Received::Call { header, params }
            }
            responder::Asked::SendError(e) => {
                self.answer_error(e);
                Received::Answered
            }
            responder::Asked::BackwardReply(h) => {
                self.judged_reply = Some(h.detach());
                Received::Reply { xid: h.xid() }
            }
            responder::Asked::OptionAnswer { xid } => {
                self.judged_reply = None;
                Received::Reply { xid }
            }
            responder::Asked::PeerError { xid, error } => Received::PeerError { xid, error },
            responder::Asked::Handled { xid, answer: Some(a), .. } => {
                // Server to client: the requester's Receives, sized by the reply threshold.
                let threshold = s.responder.advertised().for_version(rpcrdma_v2::RPCRDMA2_VERSION).reply;
                if crate::extension::fits(&a, threshold) {
                    let answer = a.to_message(xid, s.responder.credit_limit());
                    self.answer_with(answer);
                    Received::Answered
                } else {
                    Received::Nothing(None)
                }
            }
            responder::Asked::Rewritten => Received::Rewritten,
            responder::Asked::SendBack(bytes) => {
                self.answer_with(bytes);
                Received::Answered
            }
            responder::Asked::Handled { answer: None, .. } | responder::Asked::Taken | responder::Asked::Dropped => {
                Received::Nothing(None)
            }
        }
    }

    /// The buffer a [`Received::Rewritten`] call was written into (a -07 continued call, or
    /// a CALL_EXTERNAL), to keep while the call is served; judge it with
    /// [`Connection::handle_rewritten`]. `None` on a client's connection or when nothing was
    /// rewritten.
    pub fn take_rewritten(&mut self) -> Option<Vec<u8>> {
        self.serving.as_mut()?.responder.take_rewritten()
    }

    /// Judges the call [`Connection::take_rewritten`] gave, as [`Connection::handle_receive`]
    /// judges a message: a [`Received::Call`] to serve from `bytes`, or its answer.
    pub fn handle_rewritten<'a>(&mut self, bytes: &'a [u8], arrival: Arrival) -> Received<'a> {
        let s = self.serving_mut();
        match s.responder.handle_rewritten(bytes, arrival.behind) {
            responder::Asked::Call(header) => {
                let params = s.responder.reply_params(header.xid()).expect("a call just received is in flight");
                Received::Call { header, params }
            }
            responder::Asked::SendError(e) => {
                self.answer_error(e);
                Received::Answered
            }
            _ => Received::Nothing(None),
        }
    }

    /// A server's [`Connection::handle_timeout`]: [`Event::Idle`] once silent for the idle
    /// timeout (once).
    pub(super) fn idle_check(&mut self, now: Instant) {
        if self.is_idle(now) && !self.events.iter().any(|e| matches!(e, Event::Idle)) {
            self.events.push_back(Event::Idle);
        }
    }

    fn serving_mut(&mut self) -> &mut ResponderHalf {
        self.serving.as_mut().expect("a responder's operation on a client's connection")
    }
}
