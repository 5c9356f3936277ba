//! The requester's side: `Client`'s own decision maker, the client's `Connection` core (with the `Requester`
//! state machine inside), driven as `Client`'s dispatcher and callers drive it
//! (negotiate/src/client.rs), with each transmission made by the production data path over
//! the simulated verbs backend ([`super::verbs`]): `datapath::send_call_continuing` marshals it and
//! opens its chunks' memory windows, `PendingCall::complete` invalidates them and
//! reassembles the reply from what landed, `PendingCall::abandon` gives up an attempt.
//! Beside it, the simulator keeps its own account of what happened to each call's latest
//! attempt, to check that a failed call reports that cause (issue 13, finding 7).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use cm_private_data::{Flags, PrivateData};
use negotiate::client::{ClientConfig, ClientError};
use negotiate::connection::{Arrival, CallStep, Connection as Core, Event as CoreEvent, Received};
use negotiate::datapath::{send_call_continuing, CallParams, DataPathError, Ended, PendingCall, Transport};
use negotiate::reply::{DropReason, PeerError};
use negotiate::requester::{self, CallFailure};
use negotiate::thresholds;
use rpcrdma_v1::header::Detached;
use rpcrdma_v1::ulb::{roundup_pad, OpaqueAtUlb};
use rpcrdma_verbs::{Access, MemoryRegion, ProtectionDomain, QueuePair, SendFlags};

use super::trace::{Closer, Dropped, End, Event, Got};
use super::verbs::{SimPd, SimQp, SimVerbs};
use super::{Faults, Rng, Sim, TIMEOUT};

/// Calls carry an `opaque<>` after XID, message type and a spare word; it may go in a Read
/// chunk; replies (echoes) up to 32 KiB, through the Reply chunk when large.
pub const ULB: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: Some(12), reply_opaque: None, max_result: 0, max_reply: 32 << 10 };

/// The binding one call in seven is marshaled with: nothing DDP-eligible, so that when it is
/// too large for the responder's Receive it goes whole, continued across Sends on -07
/// (section 4.1) or in a Call chunk (RFC 8166 section 3.5.3). The responder reads every call
/// with [`ULB`]: a call may always carry inline what its binding allows in a Read chunk.
pub const WHOLE_ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, ..ULB };

/// The binding call `xid` is marshaled with.
fn ulb_for(xid: u32) -> &'static OpaqueAtUlb {
    if xid % 7 == 3 {
        &WHOLE_ULB
    } else {
        &ULB
    }
}

/// A call whose service answers with more than [`ULB`]'s `max_reply`: the responder must
/// answer ERR_CHUNK (RFC 8166 section 4.5.3), every time it runs.
pub fn oversized(xid: u32) -> bool {
    xid % 17 == 5
}

/// An RPC call: XID, CALL, a spare word, an opaque of `len` bytes.
pub fn call_message(xid: u32, len: usize) -> Vec<u8> {
    let mut m = super::words(&[xid, 0, 0, len as u32]);
    m.extend((0..len).map(|i| (i as u8) ^ (xid as u8)));
    m.resize(m.len() + roundup_pad(len), 0);
    m
}

/// The service's answer: the call echoed as a reply.
pub fn echo(call: &[u8]) -> Vec<u8> {
    let mut r = call.to_vec();
    r[4..8].copy_from_slice(&1u32.to_be_bytes());
    r
}

struct Planned {
    xid: u32,
    start: Duration,
    message: Vec<u8>,
    /// When its caller gives it up, if it does.
    abandon: Option<Duration>,
}

struct Record {
    message: Vec<u8>,
    started: Duration,
    /// When its caller gives it up, if it does and it has not ended by then.
    abandon: Option<Duration>,
    ended: Option<Result<Vec<u8>, End>>,
    /// What happened to its latest attempt, as the simulator saw it.
    fate: Fate,
    /// Its latest attempt went out with unusable chunks, and how.
    unusable: Option<Unusable>,
}

/// A call whose header is valid but whose chunks cannot carry it (issue 13, finding 4), and
/// what the responder must answer (RFC 8166 section 4.5.2, docs/conformance.md "ERR_CHUNK or
/// GARBAGE_ARGS"), keeping the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unusable {
    /// RDMA_NOMSG with only a Reply chunk: no call message anywhere, an error in the transport
    /// header: ERR_CHUNK (MUST).
    NoMessage,
    /// A Read chunk positioned past the Payload stream: the chunks do not match the payload:
    /// an RPC GARBAGE_ARGS reply (SHOULD).
    PositionPastPayload,
}

/// What happened to a call's latest attempt: the cause its failure must report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Not sent yet.
    Waiting,
    /// Sent on `link`, due by `deadline`: only the responder's answer or the clock ends it.
    InFlight { link: u32, deadline: Duration },
    /// A connection attempt failed while it waited: `Refused`.
    Refused,
    /// Its deadline passed and the client closed the connection: `ReplyTimeout`.
    TimedOut,
    /// The connection went down under it: `ConnectionLost`, saying how (`closed_here`).
    Lost { closed_here: bool },
}

/// One transmission: the data path's account of its memory, and the windows the simulator
/// opened itself for an unusable call.
struct Attempt {
    pending: PendingCall<SimVerbs>,
    link: u32,
    extra: Vec<u32>,
    /// Its reply arrived: its caller completes it from what landed, even if the connection
    /// goes down first (as `datapath`'s release hands back what landed).
    answered: bool,
}

pub struct SimClient {
    /// The side streams ([`Rng::side`]): which transmissions go out with unusable chunks;
    /// how backward calls are answered.
    side: Rng,
    answers: Rng,
    unusable_calls: u32,
    backward_errors: u32,
    core: Core<u32>,
    cfg: ClientConfig,
    planned: Vec<Planned>,
    records: BTreeMap<u32, Record>,
    attempts: HashMap<u32, Attempt>,
    /// The requester's end of every link made, by link.
    conns: HashMap<u32, Transport<SimVerbs>>,
    connect_at: Option<Duration>,
    connects: u32,
    wrong: Option<String>,
    /// The ends told to the core (`Core::handle_link_down`) that its
    /// [`CoreEvent::Ended`] has yet to report.
    end_told: std::collections::VecDeque<Ended>,
    /// A call sent more times than its attempts allow ([`super::Faults::max_attempts`]).
    beyond: Option<String>,
    bound: Duration,
    /// Calls given up: (unsent, with a transmission out).
    pub abandoned: (u32, u32),
    /// Calls given up with a transmission out that the core still holds.
    held: BTreeSet<u32>,
    /// The connection the latest Version Two probe went out on.
    probed: Option<u32>,
    /// The connection and version the core was last seen settled on.
    settled: Option<(u32, u32)>,
}

impl SimClient {
    pub fn new(rng: &mut Rng, side: Rng, answers: Rng, mut abandons: Rng, calls: u32, faults: Faults) -> SimClient {
        let mut cfg = requester::RequesterConfig::default()
            .timeout(TIMEOUT)
            .max_attempts(faults.max_attempts)
            .version_two(faults.version_two);
        cfg.draft07_counters_from = faults.draft07_counters_from;
        let sizes = [0, 16, 200, 900, 3000, 5000, 12000];
        let planned = (0..calls)
            .map(|i| {
                let xid = 0x1000 + i;
                let len = sizes[rng.below(sizes.len() as u64) as usize];
                let start = rng.millis(300);
                // Drawn from its own stream, so that runs without this fault are unchanged.
                let abandon = abandons.chance(faults.abandon).then(|| start + abandons.millis(600));
                Planned { xid, start, message: call_message(xid, len), abandon }
            })
            .collect();
        // Each call's own bound, times the calls that may be ahead of it in the queue: every
        // transmission waits at most the timeout, plus its messages' delays and a reconnect
        // with backoff; a call that never ends breaks any bound.
        let per_attempt = TIMEOUT + Duration::from_millis(2 * faults.max_delay_ms + 450);
        let bound = per_attempt * faults.max_attempts * calls + Duration::from_secs(1);
        let private_data = faults.private_data.0.then(|| PrivateData::new(Flags::empty(), 4096, 4096));
        let cfg = ClientConfig::default().requester(cfg).private_data(private_data);
        SimClient {
            side,
            answers,
            unusable_calls: faults.unusable_calls,
            backward_errors: faults.backward_errors,
            core: Core::client(cfg.clone(), "sim:responder"),
            cfg,
            planned,
            records: BTreeMap::new(),
            attempts: HashMap::new(),
            conns: HashMap::new(),
            connect_at: None,
            connects: 0,
            wrong: None,
            end_told: std::collections::VecDeque::new(),
            beyond: None,
            bound,
            abandoned: (0, 0),
            held: BTreeSet::new(),
            probed: None,
            settled: None,
        }
    }

    pub fn calls(&self) -> u32 {
        self.planned.len() as u32 + self.records.len() as u32
    }

    /// Every call ended, and the core holds none: an abandoned call's reply (or its
    /// connection's loss) has come too.
    pub fn all_ended(&self) -> bool {
        self.planned.is_empty() && self.records.values().all(|r| r.ended.is_some()) && !self.core.has_calls()
    }

    pub fn open(&self) -> Vec<u32> {
        self.records.iter().filter(|(_, r)| r.ended.is_none()).map(|(x, _)| *x).collect()
    }

    pub fn outcomes(&self) -> (u32, u32) {
        let ok = self.records.values().filter(|r| matches!(r.ended, Some(Ok(_)))).count() as u32;
        (ok, self.records.len() as u32 - ok)
    }

    pub fn next_timer(&self) -> Option<std::time::Instant> {
        self.core.poll_timeout()
    }

    pub fn next_connect(&self) -> Option<Duration> {
        self.connect_at
    }

    /// When a call is next made or given up.
    pub fn next_call(&self) -> Option<Duration> {
        let abandons = self.records.values().filter(|r| r.ended.is_none()).filter_map(|r| r.abandon);
        self.planned.iter().map(|p| p.start).chain(abandons).min()
    }

    /// The callers who give their call up now, as a dropped `AsyncCall` does: a call with a
    /// transmission out keeps its memory open (the responder may still write into its
    /// chunks) until the core ends it ([`SimClient::release_abandoned`]); any other is
    /// released now.
    pub fn abandon_due_calls(&mut self, sim: &mut Sim) {
        let now = sim.now;
        let due: Vec<u32> = self
            .records
            .iter()
            .filter(|(_, r)| r.ended.is_none() && r.abandon.is_some_and(|t| t <= now))
            .map(|(x, _)| *x)
            .collect();
        for xid in due {
            let sent = self.attempts.contains_key(&xid);
            sim.record(Event::Abandoned { xid, sent });
            self.core.abandon(xid, sent, sim.instant());
            if sent {
                self.abandoned.1 += 1;
            } else {
                self.abandoned.0 += 1;
            }
            if self.core.is_abandoned(xid) {
                self.held.insert(xid);
            } else {
                self.release(sim, xid);
            }
            self.end(sim, xid, Err(End::GivenUp));
        }
    }

    /// Releases the memory of abandoned calls the core no longer holds.
    fn release_abandoned(&mut self, sim: &mut Sim) {
        let ended: Vec<u32> = self
            .attempts
            .keys()
            .copied()
            .filter(|x| self.records.get(x).is_some_and(|r| r.ended.is_some()) && !self.core.is_abandoned(*x))
            .collect();
        for xid in ended {
            self.release(sim, xid);
        }
    }

    /// The API calls whose time has come.
    pub fn start_due_calls(&mut self, sim: &mut Sim) {
        let (now, base) = (sim.now, sim.base);
        let (due, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.planned).into_iter().partition(|p| p.start <= now);
        self.planned = later;
        for p in due {
            self.core.start_call(p.xid, base + now).expect("unique XIDs");
            let attempts = sim.faults.max_attempts;
            sim.record(Event::CallMade { xid: p.xid, len: p.message.len() as u32, attempts });
            self.records.insert(
                p.xid,
                Record {
                    message: p.message,
                    started: now,
                    abandon: p.abandon,
                    ended: None,
                    fate: Fate::Waiting,
                    unusable: None,
                },
            );
        }
    }

    /// Carries out the core's actions and its callers' steps, as `Client`'s dispatcher and
    /// callers do, until it has nothing more.
    pub fn route(&mut self, sim: &mut Sim) {
        self.note_core(sim, None);
        self.release_abandoned(sim);
        loop {
            // Callers first: what reached the core before an action (a reply or an RDMA_ERROR
            // received before a disconnect) is theirs, as it is `Client`'s callers'.
            if let Some(xid) = self.core.poll_ready() {
                self.take_step(sim, xid);
                continue;
            }
            let Some(action) = self.core.poll_event() else {
                if let Some(told) = self.end_told.pop_front() {
                    self.wrong.get_or_insert(format!("the core never reported the end it was told: {told:?}"));
                }
                return;
            };
            match action {
                CoreEvent::Connect { after } => {
                    sim.record(Event::ConnectAsked { after });
                    if self.connect_at.is_none() && self.core.link().is_none() {
                        self.connect_at = Some(sim.now + after + sim.rng.millis(5));
                    }
                }
                // A call timed out: close the connection (RFC 8166 section 4.5.4), which fences
                // its memory; the core requeues what was in flight on it.
                CoreEvent::Disconnect { link, cause } => {
                    if sim.link.as_ref().is_some_and(|l| l.id == link) {
                        if let Some(id) = sim.link_down(Closer::ClientTimeout) {
                            sim.with_server(|s, sim| s.handle_disconnected(sim, id));
                            self.handle_link_down(sim, id, Some(cause.to_string()));
                        }
                    }
                }
                // The end the core was told of, once, with its cause, in its place in the
                // events: what a driver's log and counts read.
                CoreEvent::Ended(ended) => match self.end_told.pop_front() {
                    Some(told) if told == ended => {}
                    told => self.wrong = Some(format!("the core reported the end {ended:?}, told {told:?}")),
                },
                CoreEvent::Idle => self.wrong = Some("a client's connection reported itself idle".into()),
            }
        }
    }

    /// What the caller of `xid` does with its next step, as `Client::call` does.
    fn take_step(&mut self, sim: &mut Sim, xid: u32) {
        let Some(step) = self.core.take_step(xid) else { return };
        self.take(sim, xid, step);
        // The data path closes a connection only when it cannot invalidate or unbind a
        // call's memory, which the simulated backend always can while the link is up: a
        // connection it closed under a live link is a bug the simulator would otherwise
        // miss (nothing here tells the link).
        let up = sim.link.as_ref().filter(|l| l.up).map(|l| l.id);
        if let Some(conn) = up.and_then(|id| self.conns.get(&id)) {
            if conn.qp().state() != rpcrdma_verbs::QpState::Ready && self.wrong.is_none() {
                self.wrong =
                    Some(format!("the data path closed connection {:?} under a live link: {:?}", up, conn.ended()));
            }
        }
    }

    fn take(&mut self, sim: &mut Sim, xid: u32, step: CallStep<u32>) {
        match step {
            CallStep::Transmit { transmit, link } => self.transmit(sim, transmit, link),
            CallStep::Reply { message, header, invalidated } => {
                self.complete(sim, xid, &message, header, invalidated);
                self.core.finish_call(xid);
            }
            CallStep::Failed(error) => {
                self.release(sim, xid);
                self.check_cause(xid, &error);
                self.end(sim, xid, Err(end_of(&error)));
                self.core.finish_call(xid);
            }
        }
    }

    /// Records what the core decided out of sight: the version it settled on, and the
    /// abandoned calls it let go (`answer`: the XID of the message it just received, which
    /// lets go the call it answers; any other it lets go for another reason: a retransmission
    /// due after its connection's loss).
    fn note_core(&mut self, sim: &mut Sim, answer: Option<u32>) {
        let settled = self.core.link().copied().zip(self.core.version().map(|v| v.wire()));
        if let Some((link, version)) = settled.filter(|_| settled != self.settled) {
            let draft07 = self.core.dialect() == Some(rpcrdma_v2::dialect::Dialect::Ietf07);
            sim.record(Event::Settled { link, version, probed: self.probed == Some(link), draft07 });
        }
        self.settled = settled;
        let let_go: Vec<u32> = self.held.iter().copied().filter(|&x| !self.core.is_abandoned(x)).collect();
        for xid in let_go {
            self.held.remove(&xid);
            sim.record(Event::AbandonedEnded { xid, by_answer: answer == Some(xid) });
        }
    }

    pub fn connect_if_due(&mut self, sim: &mut Sim) {
        if self.connect_at.is_none_or(|t| t > sim.now) {
            return;
        }
        self.connect_at = None;
        let now = sim.instant();
        if sim.rng.chance(sim.faults.refuse_connect) {
            sim.record(Event::ConnectRefused);
            for r in self.records.values_mut().filter(|r| r.ended.is_none()) {
                if !matches!(r.fate, Fate::InFlight { .. }) {
                    r.fate = Fate::Refused;
                }
            }
            let refused = rpcrdma_verbs::Error::ConnectionRefused("sim:responder".into());
            self.core.handle_connect_failed(Arc::new(DataPathError::Verbs(refused)), now);
            return;
        }
        self.connects += 1;
        let id = sim.next_link;
        sim.next_link += 1;
        sim.link = Some(super::Link::new(id));
        let (ours, sent) = thresholds::what_to_send(self.cfg.private_data, self.cfg.sends_foreign_private_data());
        let accepted = sim.with_server(|s, sim| s.handle_connected(id, &sent, &sim.net, now));
        // The requester's end: its calls' memory windows are bound on it.
        self.conns.insert(id, Transport::new(SimPd, SimQp::new(id, sim.net.clone()), TIMEOUT));
        let private_data = (!sent.is_empty(), !accepted.is_empty());
        let draft07 = sim.faults.version_two.speaks(rpcrdma_v2::dialect::Dialect::Ietf07);
        let (v1_only, responder_draft07) = (sim.faults.v1_only_responder, sim.faults.responder_draft07);
        sim.record(Event::Connected { link: id, private_data, v1_only, draft07, responder_draft07 });
        self.core.handle_connected(id, ours, &accepted, now);
        self.note_core(sim, None);
    }

    fn transmit(&mut self, sim: &mut Sim, t: requester::Transmit, link: u32) {
        // A retransmission: the earlier attempt's chunks must not stay open.
        self.release(sim, t.xid);
        let (xid, version, probe, attempt) = (t.xid, t.version.wire(), t.probe, t.attempt);
        sim.record(Event::Transmit { xid, link, version, probe, attempt });
        // Each transmission costs an attempt (`RequesterConfig::max_attempts`).
        if attempt > sim.faults.max_attempts && self.beyond.is_none() {
            let most = sim.faults.max_attempts;
            self.beyond = Some(format!("call {xid:#x} sent {attempt} times, beyond its {most} attempts"));
        }
        if probe {
            self.probed = Some(link);
        }
        let record = self.records.get_mut(&t.xid).expect("a transmitted call was made");
        record.fate = Fate::InFlight { link, deadline: sim.now + self.cfg.requester.timeout };
        let message = record.message.clone();
        let conn = self.conns.get(&link).expect("a transmission goes on a link made");
        let params = CallParams::from(&t);
        // A -07 call too large for the responder's Receive continues across Sends when the
        // window has room for them all (section 4.1), as the Client's callers send it.
        let core = &mut self.core;
        let more = |n| core.take_call_parts(n);
        let pending = match send_call_continuing(conn, &message, ulb_for(t.xid), &params, t.max_parts, more) {
            Ok(pending) => pending,
            Err(e) => {
                conn.qp().take_sent();
                self.core.cancel(t.xid, sim.instant());
                sim.record(Event::Marshaling { xid: t.xid, error: e.to_string() });
                self.end(sim, t.xid, Err(End::Marshaling));
                self.core.finish_call(t.xid);
                return;
            }
        };
        self.core.handle_sent(pending.form(), pending.parts());
        let mut sends = conn.qp().take_sent();
        assert_eq!(sends.len(), pending.parts(), "one Send per part");
        let mut send = sends.pop().expect("one Send at least");
        let parts = pending.parts() as u32;
        self.attempts.insert(t.xid, Attempt { pending, link, extra: Vec::new(), answered: false });
        if parts > 1 {
            // (A continued call is not made unusable: the fault's shapes are one Send's.)
            sim.record(Event::Continued { xid: t.xid, parts });
            self.records.get_mut(&t.xid).expect("made").unusable = None;
            sends.into_iter().chain([send]).for_each(|s| sim.send(true, s));
            return;
        }
        let unusable = self.side.chance(self.unusable_calls).then(|| {
            if self.side.chance(500) {
                Unusable::NoMessage
            } else {
                Unusable::PositionPastPayload
            }
        });
        // (Drawn, then dropped for) the first message of a requester that speaks -07: its
        // refusal is read as naming the responder's dialect (docs/design.md, "Version Two's two
        // dialects"), which holds for the first messages this implementation encodes, never
        // malformed; a malformed one would be read as the other dialect's refusal.
        let speaks_07 = sim.faults.version_two.speaks(rpcrdma_v2::dialect::Dialect::Ietf07);
        let unusable = unusable.filter(|_| !(t.probe && speaks_07));
        if let Some(how) = unusable {
            sim.record(Event::Unusable { xid: t.xid, no_message: how == Unusable::NoMessage });
            send = self.unusable(link, &t, &message, how);
        }
        self.records.get_mut(&t.xid).expect("made").unusable = unusable;
        sim.send(true, send);
    }

    /// The Send of call `t` made unusable as `how` says. Its segments are real registrations,
    /// so that a responder that used them would not fail on memory.
    fn unusable(&mut self, link: u32, t: &requester::Transmit, message: &[u8], how: Unusable) -> Vec<u8> {
        let (xid, vers, credits) = (t.xid, t.version.wire(), t.credits);
        let nomsg = how == Unusable::NoMessage;
        let conn = self.conns.get(&link).expect("a transmission goes on a link made");
        let access = if nomsg { Access::LOCAL_WRITE | Access::REMOTE_WRITE } else { Access::REMOTE_READ };
        let region = conn.pd().register(vec![0; 64], Access::LOCAL_WRITE).expect("simulated memory registers");
        let window = conn.qp().post_bind_window_with(0, &region, 0, region.len(), access, SendFlags::empty());
        let remote = window.expect("a 64-byte window over a 64-byte region binds");
        if let Some(a) = self.attempts.get_mut(&xid) {
            a.extra.push(remote.rkey);
        }
        let (handle, offset) = (remote.rkey, remote.addr);
        let (hi, lo) = ((offset >> 32) as u32, offset as u32);
        if t.dialect == Some(rpcrdma_v2::dialect::Dialect::Ietf07) {
            return if nomsg {
                // RDMA2_CALL_EXTERNAL (8) with no Call chunk, a Reply chunk of one segment
                // (section 6.3.5: RDMA2_ERR_BAD_XDR).
                super::words(&[xid, vers, credits, 8, 0, 0, 0, 0, 1, 1, handle, 64, hi, lo])
            } else {
                // RDMA2_CALL_INLINE (10), one Read segment 8 bytes past the payload's end.
                let position = message.len() as u32 + 8;
                let mut m = super::words(&[xid, vers, credits, 10, 0, 1, position, handle, 4, hi, lo, 0, 0, 0]);
                m.extend_from_slice(message);
                m
            };
        }
        if nomsg {
            // RDMA_NOMSG, no Read list, no Write list, a Reply chunk of one segment.
            super::words(&[xid, vers, credits, 1, 0, 0, 1, 1, handle, 64, hi, lo])
        } else {
            // RDMA_MSG, one Read segment at a position 8 bytes past the payload's end.
            let position = message.len() as u32 + 8;
            let mut m = super::words(&[xid, vers, credits, 0, 1, position, handle, 4, hi, lo, 0, 0, 0]);
            m.extend_from_slice(message);
            m
        }
    }

    pub fn handle_message(&mut self, sim: &mut Sim, link: u32, bytes: &[u8]) {
        if self.core.link() != Some(&link) {
            return;
        }
        let received = self.core.handle_receive(bytes, Arrival::default(), sim.instant());
        let got = match &received {
            Received::Reply { xid } => Got::Reply(*xid),
            Received::Answered => Got::SendBack,
            Received::Call { .. } => Got::BackwardCall,
            // (Rewritten is a server's connection's: never on a client's.)
            Received::PeerError { .. } | Received::Nothing(None) | Received::Rewritten => Got::Consumed,
            Received::Nothing(Some(why)) => Got::Dropped(match why {
                DropReason::Undecodable => Dropped::Undecodable,
                DropReason::UnknownVersion(_) => Dropped::UnknownVersion,
                DropReason::UnknownXid(_) => Dropped::UnknownXid,
                DropReason::WrongVersion { .. } => Dropped::WrongVersion,
            }),
        };
        sim.record(Event::Received { link, got });
        if let Received::Reply { xid } = received {
            // As `Client`'s receiving thread does: the bytes go to the call's caller.
            self.core.deliver(xid, bytes.to_vec(), None);
        }
        let xid = bytes.get(..4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        self.note_core(sim, xid);
        // What the core sends of its own on this link (a -07 CONNPROP_FINAL, its answers to
        // what came: an RDMA_ERROR, a GRANT), as the lane does after a receive; not a forward
        // call (it takes no Receive the simulator counts).
        while let Some(t) = self.core.poll_transmit() {
            self.core.handle_completion(t.id, Ok(()));
            sim.send_backward(true, t.bytes);
        }
        if let Received::Call { header, .. } = &received {
            self.answer_backward(sim, header);
        }
        if let Received::Reply { xid } = received {
            // Its credit grant opens the window beyond one (RFC 8166 section 3.3.3).
            if let Some(l) = sim.link.as_mut() {
                l.opened = true;
            }
            if let Some(a) = self.attempts.get_mut(&xid) {
                a.answered = true;
            }
        }
    }

    /// A backward-direction call from the responder (RFC 8167): answered as `Client`'s
    /// dispatcher answers it, inline in the call's version, or, as a fault, with RDMA_ERROR
    /// ERR_CHUNK naming it (RFC 8166 section 4.5), which must end it at the responder at once.
    fn answer_backward(&mut self, sim: &mut Sim, header: &rpcrdma_v1::header::Header<'_>) {
        let (xid, vers) = (header.xid(), header.version().wire());
        let error = self.answers.chance(self.backward_errors);
        sim.record(Event::BackwardAnswered { xid, error });
        let answer = if error {
            super::words(&[xid, vers, 1, 4, 2])
        } else {
            super::words(&[xid, vers, 1, 0, 0, 0, 0, xid, 1, 0, 0, 0, 0])
        };
        sim.send_backward(true, answer);
    }

    /// The reply to `xid` arrived: the data path invalidates its windows and reassembles it
    /// from the message and what the responder wrote into its chunks, as the caller does.
    fn complete(
        &mut self,
        sim: &mut Sim,
        xid: u32,
        message: &[u8],
        header: Option<Detached>,
        invalidated: Option<u32>,
    ) {
        let Some(attempt) = self.attempts.remove(&xid) else {
            self.wrong = Some(format!("a reply matched call {xid:#x}, which has no transmission"));
            return;
        };
        for rkey in &attempt.extra {
            sim.net.invalidate(*rkey);
        }
        // The header the core judged, laid over the bytes as the caller's thread does; it must
        // be the view a parse of them gives.
        let Some(header) = header.and_then(|h| h.attach(message)) else {
            self.wrong = Some(format!("the reply to call {xid:#x} came without the header the core judged"));
            return;
        };
        let limits = self.cfg.requester.limits;
        if negotiate::reply::reply_header(message, &limits) != Some(header) {
            self.wrong = Some(format!("the header the core judged for call {xid:#x} is not the reply's own"));
            return;
        }
        if self.records.get(&xid).is_some_and(|r| r.unusable == Some(Unusable::NoMessage)) && self.wrong.is_none() {
            self.wrong = Some(format!("call {xid:#x} went out with no call message and got a reply, not ERR_CHUNK"));
        }
        let conn = self.conns.get(&attempt.link).expect("an attempt went on a link made");
        let mut out = Vec::new();
        let call = self.records.get(&xid).map_or(&[][..], |r| &r.message[..]);
        let got = attempt.pending.complete(conn, call, &header, invalidated, &ULB, &mut out);
        if let Err(e) = &got {
            sim.record(Event::Reassembly { xid, error: e.to_string() });
        }
        self.end(sim, xid, got.map(|_| out).map_err(|_| End::Reassembly));
    }

    pub fn handle_timer(&mut self, sim: &mut Sim) {
        self.core.handle_timeout(sim.instant());
    }

    /// A fault broke the link under the client.
    pub fn handle_disconnected(&mut self, sim: &mut Sim, link: u32) {
        self.handle_link_down(sim, link, None);
    }

    /// The link went down (`closed_here`: the client closed it): what was transmitted on it is
    /// fenced (its registrations died with it) and the core requeues or fails its calls.
    fn handle_link_down(&mut self, sim: &mut Sim, link: u32, closed_for: Option<String>) {
        let closed_here = closed_for.is_some();
        if self.core.link() != Some(&link) {
            return;
        }
        for r in self.records.values_mut().filter(|r| r.ended.is_none()) {
            if let Fate::InFlight { link: on, deadline } = r.fate {
                if on == link {
                    // The client closes a connection when a call's deadline passes: that call
                    // timed out; the others on it were lost with it.
                    r.fate =
                        if closed_here && deadline <= sim.now { Fate::TimedOut } else { Fate::Lost { closed_here } };
                }
            }
        }
        // Its queue pair goes down with it (the windows bound on it already died).
        if let Some(conn) = self.conns.get(&link) {
            conn.qp().disconnect();
        }
        let fenced: Vec<u32> = self.attempts.iter().filter(|(_, a)| !a.answered).map(|(x, _)| *x).collect();
        for xid in fenced {
            self.release(sim, xid);
        }
        let ended = match closed_for {
            Some(cause) => Ended::Closed(cause),
            None => Ended::Lost { first_error: None },
        };
        self.end_told.push_back(ended.clone());
        self.core.handle_link_down(ended, sim.instant());
        self.note_core(sim, None);
    }

    /// A failed call must report what happened to its latest attempt (issue 13, finding 7).
    fn check_cause(&mut self, xid: u32, error: &ClientError) {
        let fate = self.records.get(&xid).map_or(Fate::Waiting, |r| r.fate);
        let unusable = self.records.get(&xid).and_then(|r| r.unusable);
        let matches = match (fate, error) {
            // RFC 8166 section 4.5.2 (draft section 4: RDMA2_ERR_BAD_HEADER, the same code).
            // -07 section 6.3.5 / 7.2.1: RDMA2_ERR_BAD_XDR, the same code again.
            (Fate::InFlight { .. }, ClientError::Call(CallFailure::Peer(e)))
                if unusable == Some(Unusable::NoMessage) =>
            {
                let bad_xdr = rpcrdma_v2::draft07::xdr::Rpcrdma2HdrError::Default {
                    discriminant: rpcrdma_v2::draft07::xdr::RDMA2_ERR_BAD_XDR,
                };
                *e == PeerError::BAD_HEADER || *e == PeerError::Draft07(bad_xdr)
            }
            (Fate::InFlight { .. }, ClientError::Call(_)) if unusable.is_some() => false,
            (Fate::Refused, ClientError::Refused { .. }) => true,
            (Fate::TimedOut, ClientError::ReplyTimeout { .. }) => true,
            (Fate::Lost { closed_here }, ClientError::ConnectionLost { ended, .. }) => {
                ended.closed_here() == closed_here
            }
            // On a connection still up, only the responder's answer ends a call.
            (Fate::InFlight { .. }, ClientError::Call(_)) => true,
            _ => false,
        };
        if !matches && self.wrong.is_none() {
            self.wrong =
                Some(format!("call {xid:#x} failed with \"{error}\" ({error:?}), but its latest attempt was {fate:?}"));
        }
    }

    /// Gives up call `xid`'s latest attempt, as its caller does: the data path closes its
    /// windows (on a connection already down, closing it fences them).
    fn release(&mut self, sim: &mut Sim, xid: u32) {
        if let Some(a) = self.attempts.remove(&xid) {
            for rkey in a.extra {
                sim.net.invalidate(rkey);
            }
            let conn = self.conns.get(&a.link).expect("an attempt went on a link made");
            // An error here closes the connection, which is the fence (RFC 8166 4.5.4).
            let _ = a.pending.abandon(conn, None);
        }
    }

    fn end(&mut self, sim: &mut Sim, xid: u32, outcome: Result<Vec<u8>, End>) {
        let Some(r) = self.records.get_mut(&xid) else {
            self.wrong = Some(format!("call {xid:#x} ended before it was made"));
            return;
        };
        if let Some(first) = &r.ended {
            self.wrong = Some(format!("call {xid:#x} ended twice: {first:?}, then {outcome:?}"));
            return;
        }
        if let Ok(reply) = &outcome {
            // Its echo, or the SYSTEM_ERR of a service that failed on it; never an echo that
            // did not fit its Reply chunk (the responder must refuse those, RFC 8166 4.5.3).
            let echoed = *reply == echo(&r.message);
            let system_err = *reply == super::words(&[xid, 1, 0, 0, 0, 5]);
            let garbage_args = *reply == super::words(&[xid, 1, 0, 0, 0, 4]);
            let own = match r.unusable {
                // A Read chunk past the payload: GARBAGE_ARGS, never served.
                Some(Unusable::PositionPastPayload) => garbage_args,
                Some(Unusable::NoMessage) => false,
                None => echoed || system_err,
            };
            if !own || (echoed && oversized(xid)) {
                self.wrong = Some(format!("call {xid:#x} got a reply of {} bytes that is not its own", reply.len()));
            }
        }
        let how = match &outcome {
            Err(how) => *how,
            Ok(reply) if *reply == echo(&r.message) => End::Echo,
            Ok(reply) if *reply == super::words(&[xid, 1, 0, 0, 0, 5]) => End::SystemErr,
            Ok(reply) if *reply == super::words(&[xid, 1, 0, 0, 0, 4]) => End::GarbageArgs,
            Ok(_) => End::NotOwn,
        };
        r.ended = Some(outcome);
        sim.record(Event::Ended { xid, how });
    }

    /// A call past its deadline.
    pub fn overdue(&self, now: Duration) -> Option<String> {
        self.records.iter().find(|(_, r)| r.ended.is_none() && now > r.started + self.bound).map(|(xid, r)| {
            format!("call {xid:#x}, made at {:?}, has not ended by {:?} (bound {:?})", r.started, now, self.bound)
        })
    }

    pub fn wrong_reply(&self) -> Option<String> {
        self.wrong.clone()
    }

    pub fn beyond_attempts(&self) -> Option<String> {
        self.beyond.clone()
    }
}

/// How a call that failed with `error` ended.
fn end_of(error: &ClientError) -> End {
    use rpcrdma_v1::verdict::PeerError as V1;
    use rpcrdma_v2::draft07::xdr::Rpcrdma2HdrError;
    match error {
        ClientError::Refused { .. } => End::Refused,
        ClientError::ReplyTimeout { .. } => End::ReplyTimeout,
        ClientError::ConnectionLost { ended, .. } => End::Lost { closed_here: ended.closed_here() },
        ClientError::Call(CallFailure::Peer(PeerError::Common(V1::Chunk))) => End::ErrChunk,
        // -07's RDMA2_ERR_BAD_XDR: the same code, 2.
        ClientError::Call(CallFailure::Peer(PeerError::Draft07(Rpcrdma2HdrError::Default { discriminant: 2 }))) => {
            End::ErrChunk
        }
        ClientError::Call(CallFailure::Peer(PeerError::Common(V1::Vers { .. }))) => End::ErrVers,
        ClientError::Call(CallFailure::Peer(PeerError::InvalOption)) => End::InvalOption,
        ClientError::Call(CallFailure::NoCommonVersion { .. }) => End::NoCommonVersion,
        ClientError::Call(CallFailure::MalformedReply(_)) => End::Malformed,
        _ => End::Other,
    }
}
