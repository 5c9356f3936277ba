//! What a connection's core puts on the wire of its own accord, already marshaled: answers
//! to what it received (an RDMA_ERROR, an extension's answer, a -07 RDMA2_GRANT) and the
//! messages of its own a -07 connection owes (its RDMA2_CONNPROP_FINAL, replies to
//! reverse-direction calls held for room in the window). The driver takes each with
//! [`Connection::poll_transmit`], posts it on the transport connection, and reports how its
//! Send ended with [`Connection::handle_completion`]; one is out at a time.
//!
//! Calls and the replies a handler writes are not here: their bytes belong to their callers
//! and handlers (the core never copies them), and their chunks need memory registered by the
//! verbs; they are a caller's steps ([`Connection::take_step`]) and the serving path's
//! ([`serve_call`](crate::server::serve_call)).

use std::collections::VecDeque;

use rpcrdma_v1::header::Fixed;
use rpcrdma_v1::verdict::ErrorReply;
use rpcrdma_v2::draft07::header::HeaderType;

use super::Connection;
use crate::datapath::DataPathError;

/// The most answers a connection holds while one is out: a peer that sends faster than its
/// answers' Sends complete (one that never reads, RFC 8166 section 4.5) makes the core drop
/// further answers, counted ([`Connection::transmissions_dropped`]), instead of holding
/// memory it sizes. The drivers in this crate read no further message until an answer's
/// Send has ended, so they never reach it.
pub const ANSWERS_HELD_MOST: usize = 8;

/// What a [`Transmission`] is: for the driver's counts and log.
///
/// ```
/// use negotiate::connection::TransmissionKind;
/// let refusal = TransmissionKind::Error { xid: 9, code: 3 }; // RDMA_ERR_INVAL_OPTION
/// assert_eq!(refusal.describe(), "an RDMA_ERROR");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransmissionKind {
    /// An RDMA_ERROR (a -07 RDMA2_ERROR) answering the peer's message `xid` with error
    /// `code` (RFC 8166 section 4.5; -07 section 7).
    Error {
        /// The XID of the message it answers.
        xid: u32,
        /// `rdma_err`: 1 is ERR_VERS, 2 ERR_CHUNK; Version Two adds its own.
        code: u32,
    },
    /// An extension's answer: to an RDMA_OPTIONAL (draft-cel-00 section 3.1), or a -07
    /// extension's message (Appendix B).
    Answer,
    /// A -07 RDMA2_GRANT, opening the peer's window (section 4.2.1.1).
    Grant,
    /// A -07 RDMA2_CONNPROP_FINAL or _MIDDLE: this side's transport properties (section 5).
    Properties,
    /// This side's -07 reply to the peer's reverse-direction call (section 4.6).
    Reply,
}

impl TransmissionKind {
    /// The kind of one of the -07 messages a half of the connection owes of its own, by its
    /// header type (`rdma_htype`, section 6.2).
    fn of_draft07(bytes: &[u8]) -> TransmissionKind {
        let fixed = Fixed::read(bytes);
        match fixed.and_then(|f| f.proc).and_then(HeaderType::from_wire) {
            Some(HeaderType::Error) => {
                let code = bytes.get(16..20).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
                TransmissionKind::Error { xid: fixed.map_or(0, |f| f.xid), code }
            }
            Some(HeaderType::Grant) => TransmissionKind::Grant,
            Some(HeaderType::ConnPropFinal | HeaderType::ConnPropMiddle) => TransmissionKind::Properties,
            Some(HeaderType::ReplyInline | HeaderType::ReplyMiddle | HeaderType::ReplyExternal) => {
                TransmissionKind::Reply
            }
            _ => TransmissionKind::Answer,
        }
    }

    /// What it is, in words, for a cause ("sending an RDMA_ERROR: ...").
    pub fn describe(&self) -> &'static str {
        match self {
            TransmissionKind::Error { .. } => "an RDMA_ERROR",
            TransmissionKind::Answer => "an extension's answer",
            TransmissionKind::Grant => "an RDMA2_GRANT",
            TransmissionKind::Properties => "this side's -07 properties",
            TransmissionKind::Reply => "a reply to a reverse-direction call",
        }
    }
}

/// One message for the driver to post on the current transport connection, already
/// marshaled ([`Connection::poll_transmit`], whose example takes two).
///
/// ```
/// # use negotiate::connection::{Transmission, TransmissionKind};
/// // How a driver posts one (the crate's drivers call `datapath::send_answer`).
/// fn post(t: &Transmission) -> Result<(), String> {
///     match t.kind {
///         TransmissionKind::Error { xid, code } => println!("RDMA_ERROR {code} for {xid:#x}"),
///         other => println!("{}", other.describe()),
///     }
///     Ok(())
/// }
/// # let t = Transmission { id: 0, bytes: vec![0; 28], kind: TransmissionKind::Grant, draft07: true };
/// # post(&t).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmission {
    /// What [`Connection::handle_completion`] names it by.
    pub id: u64,
    /// The whole message: transport header and, for an answer that has one, its body.
    pub bytes: Vec<u8>,
    /// What it is.
    pub kind: TransmissionKind,
    /// Whether it goes on a -07 connection, where every Send carries the highest running
    /// credit total sent so far (section 4.2.1), stamped as it is posted
    /// (`datapath::send_answer`'s flag).
    pub draft07: bool,
}

/// The core's transmissions not yet taken, and the one out.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    queued: VecDeque<Transmission>,
    /// The one taken whose Send has not ended yet.
    out: Option<u64>,
    next_id: u64,
    dropped: u64,
}

impl Outbox {
    /// Holds `bytes` of `kind` until the driver takes them; dropped, and counted, once
    /// [`ANSWERS_HELD_MOST`] wait.
    fn push(&mut self, bytes: Vec<u8>, kind: TransmissionKind, draft07: bool) {
        if self.queued.len() >= ANSWERS_HELD_MOST {
            self.dropped += 1;
            log::warn!("{} answers wait for an earlier one's Send: {} dropped", self.queued.len(), kind.describe());
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.queued.push_back(Transmission { id, bytes, kind, draft07 });
    }
}

impl<L: Clone> Connection<L> {
    /// The next message this side's core sends of its own on the current transport
    /// connection, marshaled ([`Transmission`]); `None` when there is none, or while the one
    /// taken before has not been reported to [`Connection::handle_completion`]. What a half of
    /// the connection owes of its own (a -07 RDMA2_CONNPROP_FINAL, a GRANT, replies held for
    /// room in the window) goes before the answers to what was received. Calls and a
    /// handler's replies are not here: their bytes are their callers' and handlers', which
    /// the core never copies, and their chunks need memory the verbs register.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use negotiate::connection::{Arrival, Connection, Received, TransmissionKind};
    /// use negotiate::responder::ResponderConfig;
    /// use rpcrdma_v1::Version;
    /// let to_bytes = |words: &[u32]| -> Vec<u8> { words.iter().flat_map(|w| w.to_be_bytes()).collect() };
    /// let now = Instant::now();
    /// let cfg = ResponderConfig::default().versions((Version::ONE, Version::ONE));
    /// let mut conn: Connection<()> = Connection::server(cfg, Duration::from_secs(60), &[], None, now);
    ///
    /// // Two Version Two probes to a Version One responder: each is answered ERR_VERS (code 1),
    /// // one at a time.
    /// for xid in [5, 6] {
    ///     let probe = to_bytes(&[xid, 2, 32, 0, 0, 0, 0, xid, 0]);
    ///     assert_eq!(conn.handle_receive(&probe, Arrival::default(), now), Received::Answered);
    /// }
    /// let first = conn.poll_transmit().expect("the first answer");
    /// assert_eq!(first.kind, TransmissionKind::Error { xid: 5, code: 1 });
    /// assert_eq!(&first.bytes[..4], &5u32.to_be_bytes());
    /// assert!(conn.poll_transmit().is_none(), "the first one's Send has not completed");
    /// conn.handle_completion(first.id, Ok(()));
    /// let second = conn.poll_transmit().expect("the second answer");
    /// assert_eq!(second.kind, TransmissionKind::Error { xid: 6, code: 1 });
    /// ```
    pub fn poll_transmit(&mut self) -> Option<Transmission> {
        if self.outbox.out.is_some() {
            return None;
        }
        let own = match (&mut self.serving, &mut self.req) {
            (Some(s), _) => s.responder.poll_transmit(),
            (None, Some(r)) => r.poll_transmit(),
            (None, None) => None,
        };
        if let Some(bytes) = own {
            let kind = TransmissionKind::of_draft07(&bytes);
            self.outbox.push(bytes, kind, true);
        }
        let t = self.outbox.queued.pop_front()?;
        self.outbox.out = Some(t.id);
        Some(t)
    }

    /// The Send of transmission `id` ended: completed, or failed with its cause. A failure
    /// is the transport connection's (RFC 8166 section 4.5.4): nothing else the core holds
    /// can go on it, and it is let go, counted as dropped.
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use negotiate::connection::{Arrival, Connection};
    /// # use negotiate::datapath::DataPathError;
    /// # use negotiate::responder::ResponderConfig;
    /// # use rpcrdma_v1::Version;
    /// # let now = Instant::now();
    /// # let cfg = ResponderConfig::default().versions((Version::ONE, Version::ONE));
    /// # let mut conn: Connection<()> = Connection::server(cfg, Duration::from_secs(60), &[], None, now);
    /// // Three probes a Version One responder refuses, and the first refusal's Send fails.
    /// for xid in 1..=3u32 {
    ///     let probe: Vec<u8> = [xid, 2, 32, 0, 0, 0, 0, xid, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
    ///     conn.handle_receive(&probe, Arrival::default(), now);
    /// }
    /// let t = conn.poll_transmit().unwrap();
    /// let failed = DataPathError::Timeout { wr_id: 1, timeout: Duration::from_secs(1) };
    /// conn.handle_completion(t.id, Err(&failed));
    /// assert_eq!((conn.poll_transmit(), conn.transmissions_dropped()), (None, 2));
    /// ```
    pub fn handle_completion(&mut self, id: u64, result: Result<(), &DataPathError>) {
        if self.outbox.out != Some(id) {
            log::debug!("the completion of transmission {id}, which is not the one out");
            return;
        }
        self.outbox.out = None;
        if let Err(e) = result {
            let lost = self.outbox.queued.len() as u64;
            log::debug!("transmission {id} failed ({e}): {lost} more let go");
            self.outbox.dropped += lost;
            self.outbox.queued.clear();
        }
    }

    /// Answers the core let go: over [`ANSWERS_HELD_MOST`] waiting, or behind a failed Send.
    /// ([`Connection::handle_completion`]'s example counts two.)
    pub fn transmissions_dropped(&self) -> u64 {
        self.outbox.dropped
    }

    /// Queues an RDMA_ERROR answering what was just received.
    pub(super) fn answer_error(&mut self, e: ErrorReply) {
        let draft07 = self.speaks_draft07();
        let kind = TransmissionKind::Error { xid: e.xid(), code: e.code() };
        self.outbox.push(e.as_bytes().to_vec(), kind, draft07);
    }

    /// Queues an answer that is not an error: an extension's, or a -07 GRANT.
    pub(super) fn answer_with(&mut self, bytes: Vec<u8>) {
        let draft07 = self.speaks_draft07();
        let kind = if draft07 { TransmissionKind::of_draft07(&bytes) } else { TransmissionKind::Answer };
        self.outbox.push(bytes, kind, draft07);
    }

    /// Whether the connection is settled on draft-ietf-nfsv4-rpcrdma-version-two-07, either
    /// side's.
    fn speaks_draft07(&self) -> bool {
        let dialect = match &self.serving {
            Some(s) => s.responder.dialect(),
            None => self.dialect(),
        };
        dialect == Some(rpcrdma_v2::dialect::Dialect::Ietf07)
    }

    /// A new transport connection (or none): what the core held for the old one cannot go
    /// on it.
    pub(super) fn forget_transmissions(&mut self) {
        self.outbox.queued.clear();
        self.outbox.out = None;
    }
}
