//! What a run did, step by step: every event of every step ([`Event`]), kept in order and
//! folded into one hash as it happens ([`Trace::hash`]), so that two runs can be compared
//! whole (`a_seed_replays_exactly`), a named seed can check that its scenario happened, and a
//! sweep can count the faults it injected and the outcomes it saw ([`Coverage`]).
//!
//! Recording draws nothing from any random stream: a run with its trace is the run without.

use std::hash::{Hash, Hasher};
use std::time::Duration;

/// Who brought a connection down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Closer {
    /// The injected fault: it broke under both sides.
    Fault,
    /// The requester: a call had no reply within its timeout (RFC 8166 section 4.5.4).
    ClientTimeout,
    /// The responder: the connection was idle for its idle timeout.
    ServerIdle,
    /// The responder: a call it could not answer (only a failure of the transport itself may
    /// do that: invariant 5).
    ServerFailure,
}

/// What a lying responder sent instead of a call's reply (`server::hostile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lie {
    ErrChunk,
    ErrVersOne,
    ErrVersNone,
    InvalOption,
    Undecodable,
    Optional,
    UnknownVersion,
    OtherXid,
    NoSuchCall,
    Garbage,
}

/// Why the requester's core dropped a message (`negotiate::reply::DropReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dropped {
    Undecodable,
    UnknownVersion,
    UnknownXid,
    WrongVersion,
}

/// What the requester's core made of a message (`connection::Received`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Got {
    Reply(u32),
    BackwardCall,
    Consumed,
    SendBack,
    Dropped(Dropped),
}

/// How a call ended, as its caller saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// Its service's echo.
    Echo,
    /// The RPC SYSTEM_ERR reply of a service that panicked.
    SystemErr,
    /// The RPC GARBAGE_ARGS reply to a call whose chunks did not match its payload.
    GarbageArgs,
    /// A reply that is none of those (invariant 4 reports it).
    NotOwn,
    /// The reply could not be reassembled.
    Reassembly,
    /// The call could not be marshaled.
    Marshaling,
    /// Its caller gave it up.
    GivenUp,
    /// `ClientError::Refused`.
    Refused,
    /// `ClientError::ReplyTimeout`.
    ReplyTimeout,
    /// `ClientError::ConnectionLost`, saying whether this side closed the connection.
    Lost { closed_here: bool },
    /// `CallFailure::Peer`: RDMA_ERROR ERR_CHUNK (Version Two: RDMA2_ERR_BAD_HEADER).
    ErrChunk,
    /// `CallFailure::Peer`: RDMA_ERROR ERR_VERS.
    ErrVers,
    /// `CallFailure::Peer`: RDMA2_ERR_INVAL_OPTION.
    InvalOption,
    /// `CallFailure::NoCommonVersion`.
    NoCommonVersion,
    /// `CallFailure::MalformedReply`.
    Malformed,
    /// Any other `ClientError`.
    Other,
}

/// How a backward-direction call ended at the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackwardEnd {
    Reply,
    Error,
    Closed,
}

/// What the responder answered a call it could not serve with (`FailureAnswer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    ErrChunk,
    GarbageArgs,
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// The caller made call `xid`, of `len` bytes, to be sent at most `attempts` times (once
    /// and on each new connection: [`super::Faults::max_attempts`]).
    CallMade { xid: u32, len: u32, attempts: u32 },
    /// A message left for the other side on `link`, to arrive at `arrives` after a drawn
    /// `delay`; `outstanding` is, for a forward call, the calls on the link not yet answered
    /// with it counted (invariant 3); `digest` is of its bytes.
    Sent {
        to_server: bool,
        forward: bool,
        link: u32,
        delay: Duration,
        arrives: Duration,
        len: u32,
        digest: u64,
        outstanding: u32,
    },
    /// A message sent with no connection up: it goes nowhere.
    SentNowhere { to_server: bool, len: u32 },
    /// The head of a queue was delivered.
    Delivered { to_server: bool, link: u32 },
    /// `link` went down; `undelivered` messages were still on it.
    LinkDown { link: u32, by: Closer, undelivered: u32 },
    /// The requester's core asked for a connection after `after`.
    ConnectAsked { after: Duration },
    /// A connect attempt was refused (the fault).
    ConnectRefused,
    /// Connection `link` was made: which sides sent private data, whether the responder
    /// speaks Version One only, whether the requester speaks -07 (`draft07`) and whether the
    /// responder does (`responder_draft07`).
    Connected { link: u32, private_data: (bool, bool), v1_only: bool, draft07: bool, responder_draft07: bool },
    /// The requester sent call `xid` on `link` (`attempt` 1 first, then each retransmission).
    Transmit { xid: u32, link: u32, version: u32, probe: bool, attempt: u32 },
    /// ... continued across `parts` Sends (-07's RDMA2_CALL_MIDDLE parts, section 4.1).
    Continued { xid: u32, parts: u32 },
    /// ... with unusable chunks (the fault): RDMA_NOMSG without a call message (`no_message`),
    /// or a Read chunk past the payload.
    Unusable { xid: u32, no_message: bool },
    /// What the requester's core made of a message on `link`.
    Received { link: u32, got: Got },
    /// The requester's core settled `link` on `version`; `probed`: the Version Two probe went
    /// out on it.
    Settled { link: u32, version: u32, probed: bool, draft07: bool },
    /// The client's -07 running totals wrapped past 2^32 on `link` (section 4.2.1).
    Draft07TotalsWrapped { link: u32 },
    /// A -07 RDMA2_GRANT went on `link` (section 4.2.1.1): from the responder (refreshing
    /// the requester's window while a continued call's parts arrive) or the requester.
    Draft07Grant { link: u32, by_responder: bool },
    /// The requester answered backward call `xid`: with RDMA_ERROR (`error`), or a reply.
    BackwardAnswered { xid: u32, error: bool },
    /// The caller gave call `xid` up: `sent` with a transmission out.
    Abandoned { xid: u32, sent: bool },
    /// The core let an abandoned call go: on the responder's answer to it (`by_answer`), or
    /// after its connection's loss (when the call would have gone out again).
    AbandonedEnded { xid: u32, by_answer: bool },
    /// Call `xid` could not be marshaled.
    Marshaling { xid: u32, error: String },
    /// The reply to call `xid` could not be reassembled.
    Reassembly { xid: u32, error: String },
    /// Call `xid` ended for its caller.
    Ended { xid: u32, how: End },
    /// The responder answered call `xid` with a lie (the fault).
    Lie { xid: u32, link: u32, lie: Lie },
    /// The responder ran call `xid`'s service on `link`.
    Executed { xid: u32, link: u32, version: u32, slow: bool, panicked: bool, oversized: bool },
    /// The responder served a -07 call from the buffer its core rewrote it into (an
    /// RDMA2_CALL_EXTERNAL: its message read from the Call chunk).
    ServedRewritten { xid: u32, link: u32 },
    /// The responder could not serve call `xid` and answered it so.
    Refused { xid: u32, link: u32, with: Refusal },
    /// The responder answered a message with its own RDMA_ERROR (`vers`: ERR_VERS).
    ResponderError { xid: u32, link: u32, vers: bool },
    /// The responder sent backward call `xid` on `link`.
    BackwardCall { xid: u32, link: u32 },
    /// A backward call on `link` ended.
    BackwardEnded { link: u32, by: BackwardEnd },
    // (Later events go last: a variant's place is part of each event's hash.)
    /// The responder took call `xid` on `link` beside `alongside` others still being served
    /// there ([`super::Faults::calls_at_once`]); its answer leaves at `leaves`.
    Serving { xid: u32, link: u32, alongside: u32, leaves: Duration },
    /// The answer to call `xid` left on `link`; `overtook`: before the answer to a call taken
    /// earlier on it.
    AnswerLeft { xid: u32, link: u32, overtook: bool },
}

/// One event, with the step and the virtual time it happened at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    pub step: u32,
    pub at: Duration,
    pub event: Event,
}

/// A run's events, in order, and their hash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    pub events: Vec<Entry>,
    hasher: Fnv,
}

impl Trace {
    pub fn push(&mut self, entry: Entry) {
        entry.hash(&mut self.hasher);
        self.events.push(entry);
    }

    /// The hash of every event of every step, with its step and time.
    pub fn hash(&self) -> u64 {
        self.hasher.finish()
    }

    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().map(|e| &e.event)
    }

    /// The positions of the events `f` picks, in order, with what it made of each.
    pub fn all<'a, T>(&'a self, mut f: impl FnMut(&Event) -> Option<T> + 'a) -> impl Iterator<Item = (usize, T)> + 'a {
        self.events.iter().enumerate().filter_map(move |(i, e)| f(&e.event).map(|t| (i, t)))
    }

    /// The first event after position `after` (`None`: from the start) that `f` picks.
    pub fn next<T>(&self, after: Option<usize>, f: impl FnMut(&Event) -> Option<T>) -> Option<(usize, T)> {
        let from = after.map_or(0, |a| a + 1);
        self.all(f).find(|(i, _)| *i >= from)
    }

    /// Whether an event strictly between positions `from` and `to` satisfies `f`.
    pub fn between(&self, from: usize, to: usize, mut f: impl FnMut(&Event) -> bool) -> bool {
        self.events.iter().take(to).skip(from + 1).any(|e| f(&e.event))
    }

    pub fn coverage(&self) -> Coverage {
        let mut c = Coverage::default();
        for e in self.events() {
            e.kinds(|k| c.add(k, 1));
        }
        c
    }
}

/// FNV-1a, 64 bits: the same on every machine and every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A message's bytes as one number (eight bytes at a time: messages are many and large).
pub fn digest(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().expect("eight bytes"));
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

macro_rules! kinds {
    (faults { $($f:ident: $fw:literal,)* } outcomes { $($o:ident: $ow:literal,)* }) => {
        /// Each fault the simulator injects and each outcome it can see; a sweep must see
        /// every one ([`Coverage::missing`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Kind { $($f,)* $($o,)* }

        impl Kind {
            pub const FAULTS: &'static [Kind] = &[$(Kind::$f,)*];
            pub const OUTCOMES: &'static [Kind] = &[$(Kind::$o,)*];
            pub const ALL: &'static [Kind] = &[$(Kind::$f,)* $(Kind::$o,)*];

            pub fn what(self) -> &'static str {
                match self { $(Kind::$f => $fw,)* $(Kind::$o => $ow,)* }
            }
        }
    };
}

kinds! {
    faults {
        LongDelay: "a message delayed 20 ms or more",
        LinkBroken: "a connection broken under both sides",
        ConnectRefused: "a connect refused",
        IdleClose: "a connection closed by the responder, idle",
        V1OnlyResponder: "a connection to a Version One-only responder",
        PrivateDataNone: "a connection with no RFC 8797 private data",
        PrivateDataRequester: "a connection with the requester's private data only",
        PrivateDataResponder: "a connection with the responder's private data only",
        PrivateDataBoth: "a connection with both sides' private data",
        LieErrChunk: "lie: ERR_CHUNK",
        LieErrVersOne: "lie: ERR_VERS 1..1",
        LieErrVersNone: "lie: ERR_VERS, no common version",
        LieInvalOption: "lie: RDMA2_ERR_INVAL_OPTION",
        LieUndecodable: "lie: an undecodable RDMA_ERROR",
        LieOptional: "lie: RDMA_OPTIONAL",
        LieUnknownVersion: "lie: an unknown version",
        LieOtherXid: "lie: a reply with another call's RPC XID",
        LieNoSuchCall: "lie: a reply to no call",
        LieGarbage: "lie: random bytes",
        SlowService: "a service slower than the timeout",
        PanickingService: "a service that panics",
        OversizedReply: "a reply too large for its Reply chunk",
        UnusableNoMessage: "a call sent as RDMA_NOMSG with no call message",
        UnusablePastPayload: "a call sent with a Read chunk past its payload",
        BackwardCall: "a backward-direction call",
        BackwardAnsweredWithError: "a backward call answered with RDMA_ERROR",
        AbandonedUnsent: "a call given up before it was sent",
        AbandonedSent: "a call given up with its transmission out",
        Draft07Requester: "a connection whose requester speaks -07",
        Draft07Responder: "a connection whose responder speaks -07",
        OneAttempt: "a call allowed one attempt only",
        ServedAlongside: "a call served while others were on its connection",
    }
    outcomes {
        ReplyEcho: "a call answered with its echo",
        ReplySystemErr: "a call answered SYSTEM_ERR",
        ReplyGarbageArgs: "a call answered GARBAGE_ARGS",
        FailedRefused: "a call failed: Refused",
        FailedReplyTimeout: "a call failed: ReplyTimeout",
        FailedLostClosedHere: "a call failed: ConnectionLost, closed by the requester",
        FailedLostClosedThere: "a call failed: ConnectionLost, not closed by the requester",
        FailedErrChunk: "a call failed: the responder's ERR_CHUNK / BAD_HEADER / BAD_XDR",
        FailedInvalOption: "a call failed: the responder's INVAL_OPTION",
        FailedNoCommonVersion: "a call failed: no common version",
        FailedMalformed: "a call failed: a malformed reply",
        SettledOne: "a connection settled on Version One",
        SettledTwo: "a connection settled on Version Two",
        Fallback: "a probe answered, the connection settled on Version One",
        Remembered: "a connection began in Version One, no probe",
        SettledDraft07: "a connection settled on -07",
        Draft07TotalsWrapped: "-07 running credit totals wrapped past 2^32",
        ContinuedCall: "a -07 call continued across Sends",
        GrantByResponder: "a -07 RDMA2_GRANT from the responder",
        Retransmission: "a call sent again",
        Reconnect: "a connection after the first",
        ClientTimeoutClose: "a connection closed by the requester (a timeout)",
        UndeliveredLost: "messages lost with their connection",
        WindowBeyondOne: "more than one call outstanding on a connection",
        ResponderErrVers: "the responder's ERR_VERS (to a probe)",
        RefusedErrChunk: "the responder refused a call: ERR_CHUNK",
        RefusedGarbageArgs: "the responder refused a call: GARBAGE_ARGS",
        DroppedUndecodable: "the requester dropped a message: undecodable",
        DroppedUnknownVersion: "the requester dropped a message: unknown version",
        DroppedUnknownXid: "the requester dropped a message: no such call",
        BackwardEndedReply: "a backward call ended by its reply",
        BackwardEndedError: "a backward call ended by RDMA_ERROR",
        BackwardEndedClosed: "a backward call ended by its connection's end",
        AbandonedEndedByAnswer: "a given-up call let go at the responder's answer",
        AbandonedEndedByLoss: "a given-up call let go after its connection's loss",
        AnswerOvertook: "an answer that left before an earlier call's on its connection",
    }
}

impl Event {
    /// The kinds this event is an instance of.
    pub fn kinds(&self, mut k: impl FnMut(Kind)) {
        match *self {
            Event::Sent { delay, outstanding, .. } => {
                if delay >= Duration::from_millis(20) {
                    k(Kind::LongDelay);
                }
                if outstanding > 1 {
                    k(Kind::WindowBeyondOne);
                }
            }
            Event::LinkDown { by, undelivered, .. } => {
                match by {
                    Closer::Fault => k(Kind::LinkBroken),
                    Closer::ClientTimeout => k(Kind::ClientTimeoutClose),
                    Closer::ServerIdle => k(Kind::IdleClose),
                    Closer::ServerFailure => {}
                }
                if undelivered > 0 {
                    k(Kind::UndeliveredLost);
                }
            }
            Event::ConnectRefused => k(Kind::ConnectRefused),
            Event::CallMade { attempts: 1, .. } => k(Kind::OneAttempt),
            Event::Connected { link, private_data, v1_only, draft07, responder_draft07 } => {
                if v1_only {
                    k(Kind::V1OnlyResponder);
                }
                if draft07 {
                    k(Kind::Draft07Requester);
                }
                if responder_draft07 {
                    k(Kind::Draft07Responder);
                }
                if link > 1 {
                    k(Kind::Reconnect);
                }
                k(match private_data {
                    (false, false) => Kind::PrivateDataNone,
                    (true, false) => Kind::PrivateDataRequester,
                    (false, true) => Kind::PrivateDataResponder,
                    (true, true) => Kind::PrivateDataBoth,
                });
            }
            Event::Transmit { attempt, .. } if attempt > 1 => k(Kind::Retransmission),
            Event::Unusable { no_message, .. } => {
                k(if no_message { Kind::UnusableNoMessage } else { Kind::UnusablePastPayload })
            }
            Event::Received { got: Got::Dropped(why), .. } => match why {
                Dropped::Undecodable => k(Kind::DroppedUndecodable),
                Dropped::UnknownVersion => k(Kind::DroppedUnknownVersion),
                Dropped::UnknownXid => k(Kind::DroppedUnknownXid),
                Dropped::WrongVersion => {}
            },
            Event::Settled { version, probed, draft07, .. } => {
                k(if version == 1 { Kind::SettledOne } else { Kind::SettledTwo });
                if draft07 {
                    k(Kind::SettledDraft07);
                }
                if version == 1 {
                    k(if probed { Kind::Fallback } else { Kind::Remembered });
                }
            }
            Event::Draft07TotalsWrapped { .. } => k(Kind::Draft07TotalsWrapped),
            Event::Continued { .. } => k(Kind::ContinuedCall),
            Event::Draft07Grant { by_responder: true, .. } => k(Kind::GrantByResponder),
            Event::BackwardAnswered { error: true, .. } => k(Kind::BackwardAnsweredWithError),
            Event::Abandoned { sent, .. } => k(if sent { Kind::AbandonedSent } else { Kind::AbandonedUnsent }),
            Event::AbandonedEnded { by_answer, .. } => {
                k(if by_answer { Kind::AbandonedEndedByAnswer } else { Kind::AbandonedEndedByLoss })
            }
            Event::Ended { how, .. } => match how {
                End::Echo => k(Kind::ReplyEcho),
                End::SystemErr => k(Kind::ReplySystemErr),
                End::GarbageArgs => k(Kind::ReplyGarbageArgs),
                End::Refused => k(Kind::FailedRefused),
                End::ReplyTimeout => k(Kind::FailedReplyTimeout),
                End::Lost { closed_here: true } => k(Kind::FailedLostClosedHere),
                End::Lost { closed_here: false } => k(Kind::FailedLostClosedThere),
                End::ErrChunk => k(Kind::FailedErrChunk),
                End::InvalOption => k(Kind::FailedInvalOption),
                End::NoCommonVersion => k(Kind::FailedNoCommonVersion),
                End::Malformed => k(Kind::FailedMalformed),
                _ => {}
            },
            Event::Lie { lie, .. } => k(match lie {
                Lie::ErrChunk => Kind::LieErrChunk,
                Lie::ErrVersOne => Kind::LieErrVersOne,
                Lie::ErrVersNone => Kind::LieErrVersNone,
                Lie::InvalOption => Kind::LieInvalOption,
                Lie::Undecodable => Kind::LieUndecodable,
                Lie::Optional => Kind::LieOptional,
                Lie::UnknownVersion => Kind::LieUnknownVersion,
                Lie::OtherXid => Kind::LieOtherXid,
                Lie::NoSuchCall => Kind::LieNoSuchCall,
                Lie::Garbage => Kind::LieGarbage,
            }),
            Event::Executed { slow, panicked, oversized, .. } => {
                if slow {
                    k(Kind::SlowService);
                }
                if panicked {
                    k(Kind::PanickingService);
                }
                if oversized {
                    k(Kind::OversizedReply);
                }
            }
            Event::Serving { alongside, .. } if alongside > 0 => k(Kind::ServedAlongside),
            Event::AnswerLeft { overtook: true, .. } => k(Kind::AnswerOvertook),
            Event::Refused { with, .. } => {
                k(if with == Refusal::ErrChunk { Kind::RefusedErrChunk } else { Kind::RefusedGarbageArgs })
            }
            Event::ResponderError { vers: true, .. } => k(Kind::ResponderErrVers),
            Event::BackwardCall { .. } => k(Kind::BackwardCall),
            Event::BackwardEnded { by, .. } => k(match by {
                BackwardEnd::Reply => Kind::BackwardEndedReply,
                BackwardEnd::Error => Kind::BackwardEndedError,
                BackwardEnd::Closed => Kind::BackwardEndedClosed,
            }),
            _ => {}
        }
    }
}

/// How many times each [`Kind`] happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage(Vec<u64>);

impl Default for Coverage {
    fn default() -> Self {
        Coverage(vec![0; Kind::ALL.len()])
    }
}

impl Coverage {
    pub fn add(&mut self, kind: Kind, n: u64) {
        self.0[kind as usize] += n;
    }

    pub fn count(&self, kind: Kind) -> u64 {
        self.0[kind as usize]
    }

    pub fn merge(&mut self, other: &Coverage) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a += b;
        }
    }

    /// The kinds that never happened.
    pub fn missing(&self) -> Vec<Kind> {
        Kind::ALL.iter().copied().filter(|&k| self.count(k) == 0).collect()
    }
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (title, kinds) in [("faults injected", Kind::FAULTS), ("outcomes seen", Kind::OUTCOMES)] {
            writeln!(f, "  {title}:")?;
            for &k in kinds {
                writeln!(f, "    {:>9}  {:?}: {}", self.count(k), k, k.what())?;
            }
        }
        Ok(())
    }
}
