//! The responder's side: per connection, the production `Connection` core (with the `Responder` state
//! machine inside) judges each message, and the production serving path,
//! `negotiate::server::serve_call`, serves each call over the simulated verbs backend
//! ([`super::verbs`]): its Read chunks read in place from the requester's simulated memory,
//! its handler run (slow, panicking or answering too much now and then), and its answer
//! written and sent: the reply, SYSTEM_ERR for a panic, or ERR_CHUNK / GARBAGE_ARGS as
//! `FailureAnswer` says when it cannot be served. Each connection serves one call at a time,
//! or with the `several` extra up to [`Faults::calls_at_once`] (as `Server` serves a
//! connection's calls on several threads): each answer then leaves when its call's service
//! is done, overtaking those of slower calls taken before it, and the calls being served
//! count against the credits as `Server` counts them. What stays the simulator's own: the
//! service's virtual duration (its answer is made when the call is taken and leaves that much
//! later), and, with the hostile fault on, answering a call with something else altogether.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cm_private_data::{Flags, PrivateData};
use negotiate::backchannel::{BackwardEnd, BackwardSlot};
use negotiate::connection::{Arrival, Connection as Core, Received, TransmissionKind};
use negotiate::datapath::{DataPathError, Transport};
use negotiate::responder::{self, Behind};
use negotiate::server::{serve_call, Answered, CallBuffers, Handler};
use rpcrdma_v1::header::Detached;
use rpcrdma_v1::Version;
use rpcrdma_verbs::QueuePair;

use super::client::{echo, oversized, ULB};
use super::trace::{BackwardEnd as Ended, Closer, Event, Lie, Refusal};
use super::verbs::{Net, SimPd, SimQp, SimVerbs};
use super::{words, Faults, Rng, Sim, TIMEOUT};

/// One accepted connection: its decisions and its queue pair.
struct SimConn {
    core: Core<()>,
    conn: Transport<SimVerbs>,
    buffers: CallBuffers,
}

pub struct SimServer {
    faults: Faults,
    conns: HashMap<u32, SimConn>,
    /// Executions of each call on each connection.
    executions: HashMap<(u32, u32), u32>,
    twice: Option<String>,
    /// A connection closed over a call the server could have answered.
    closed_instead: Option<String>,
    /// A call served with nothing sent on a connection that stays up.
    unanswered: Option<String>,
    overrun: Option<String>,
    /// Per connection serving one call at a time, the service is running a call until then;
    /// that connection's later messages wait.
    busy: HashMap<u32, Duration>,
    /// The calls being served on connections that serve several at once, in the order taken.
    serving: Vec<Serving>,
    /// The place in that order of the next call taken.
    next_seq: u64,
    /// Per connection, its backward-direction call (`Server`'s own `BackwardSlot`).
    backward: HashMap<u32, BackwardSlot>,
    /// The side stream ([`Rng::side`]): when backward calls go out.
    side: Rng,
    backward_sent: u32,
    /// Backward calls ended: by the client's reply, its RDMA_ERROR, the connection's end.
    pub backward_ended: (u32, u32, u32),
    /// A backward call the client answered that did not end then (finding 6).
    backward_stuck: Option<String>,
}

impl SimServer {
    pub fn new(faults: Faults, side: Rng) -> SimServer {
        SimServer {
            backward: HashMap::new(),
            side,
            backward_sent: 0,
            backward_ended: (0, 0, 0),
            backward_stuck: None,
            faults,
            conns: HashMap::new(),
            executions: HashMap::new(),
            twice: None,
            closed_instead: None,
            unanswered: None,
            overrun: None,
            busy: HashMap::new(),
            serving: Vec::new(),
            next_seq: 0,
        }
    }

    /// Accepts link `id` at `now`; returns the private data of the accept.
    pub fn handle_connected(&mut self, id: u32, received: &[u8], net: &Net, now: Instant) -> Vec<u8> {
        let versions =
            if self.faults.v1_only_responder { (Version::ONE, Version::ONE) } else { (Version::ONE, Version::TWO) };
        let mut cfg = responder::ResponderConfig::default()
            .versions(versions)
            .draft07(self.faults.responder_draft07)
            .credits(self.faults.credits);
        cfg.draft07_counters_from = self.faults.draft07_counters_from;
        let ours = self.faults.private_data.1.then(|| PrivateData::new(Flags::empty(), 4096, 4096));
        let core = Core::server(cfg, self.faults.idle_timeout, received, ours, now);
        // The server's completion timeout; never reached: every simulated work request
        // completes when it is posted.
        let conn = Transport::new(SimPd, SimQp::new(id, net.clone()), TIMEOUT);
        self.conns.insert(id, SimConn { core, conn, buffers: CallBuffers::default() });
        ours.map(|p| p.encode().to_vec()).unwrap_or_default()
    }

    /// When connection `link` turns idle if nothing arrives before.
    pub fn idle_deadline(&self, link: u32) -> Option<Instant> {
        self.conns.get(&link).and_then(|c| c.core.poll_timeout())
    }

    /// Closes connection `link` if it has been idle for the idle timeout (as `Server` does),
    /// unless a call is still being served on it.
    pub fn close_if_idle(&mut self, sim: &mut Sim, link: u32) {
        let busy = self.idle_after(link) > sim.now;
        if !busy && self.conns.get(&link).is_some_and(|c| c.core.is_idle(sim.instant())) {
            self.close(sim, link, Closer::ServerIdle);
        }
    }

    pub fn handle_disconnected(&mut self, sim: &mut Sim, id: u32) {
        if let Some(c) = self.conns.remove(&id) {
            c.conn.qp().disconnect();
        }
        self.busy.remove(&id);
        // The answers still being made die with the connection (their Sends would fail).
        self.serving.retain(|s| s.link != id);
        if let Some(mut slot) = self.backward.remove(&id) {
            slot.close();
            if slot.take() == Some(BackwardEnd::Closed) {
                self.backward_ended.2 += 1;
                sim.record(Event::BackwardEnded { link: id, by: Ended::Closed });
            }
        }
    }

    /// RFC 8166 section 4.5 (finding 6): the client's RDMA_ERROR completes the backward call
    /// it names, as its reply does: none may wait once its answer has arrived.
    pub fn backward_call_stuck(&self) -> Option<String> {
        self.backward_stuck.clone()
    }

    /// After serving a call in `version` on `link`, now and then, a backward call of our own
    /// (an RPC CALL inline in an RDMA_MSG, as `Backchannel::call` sends it).
    fn maybe_call_backward(&mut self, sim: &mut Sim, link: u32, version: u32) {
        if !self.side.chance(self.faults.backward_calls) {
            return;
        }
        // The server's backchannel speaks -00's messages only: it refuses a -07 connection
        // (`BackchannelError::Draft07`), so no backward call goes on one.
        if self.speaks_draft07(link) {
            return;
        }
        self.backward_sent += 1;
        let xid = 0xb000_0000 | self.backward_sent;
        if self.backward.entry(link).or_default().start(xid).is_ok() {
            sim.record(Event::BackwardCall { xid, link });
            sim.send_backward(false, words(&[xid, version, 1, 0, 0, 0, 0, xid, 0, 2, 0x4000_0000, 1, 0]));
        }
    }

    /// A message from the client that the responder took for an answer to a backward call.
    fn backward_answer(
        &mut self,
        sim: &mut Sim,
        link: u32,
        xid: u32,
        end: Result<(Vec<u8>, Option<Detached>), negotiate::reply::PeerError>,
    ) {
        let Some(slot) = self.backward.get_mut(&link) else { return };
        let taken = match end {
            Ok((bytes, header)) => slot.handle_reply(xid, bytes, header),
            Err(e) => slot.handle_peer_error(xid, e),
        };
        if taken {
            match slot.take() {
                Some(BackwardEnd::Reply { message, header }) => {
                    // The backward caller lays the header the core judged over the reply, as
                    // `Backchannel::call` does; a reply it could not read would fail that call.
                    if header.and_then(|h| h.attach(&message)).is_none() && self.backward_stuck.is_none() {
                        self.backward_stuck = Some(format!(
                            "the reply to backward call {xid:#x} on connection {link} came without the header the core judged"
                        ));
                    }
                    self.backward_ended.0 += 1;
                    sim.record(Event::BackwardEnded { link, by: Ended::Reply });
                }
                Some(BackwardEnd::Error(_)) => {
                    self.backward_ended.1 += 1;
                    sim.record(Event::BackwardEnded { link, by: Ended::Error });
                }
                _ => {}
            }
            slot.finish();
        }
    }

    /// Whether connection `link` speaks draft-ietf-nfsv4-rpcrdma-version-two-07 (its dialect,
    /// taken from its first message).
    fn speaks_draft07(&self, link: u32) -> bool {
        let draft07 = rpcrdma_v2::dialect::Dialect::Ietf07;
        self.conns.get(&link).is_some_and(|c| c.core.responder().dialect() == Some(draft07))
    }

    /// How many calls a connection serves at once: [`Faults::calls_at_once`], never more than
    /// the credits granted (as `ServerLimits::calls_in_progress`).
    fn at_once(&self) -> usize {
        self.faults.calls_at_once.min(self.faults.credits) as usize
    }

    /// When connection `link` can take its next message: at once while it serves fewer calls
    /// than it may, otherwise when the first of them is done.
    pub fn takes_next_at(&self, link: u32) -> Duration {
        if self.faults.calls_at_once == 1 {
            return self.busy.get(&link).copied().unwrap_or_default();
        }
        let leaves = || self.serving.iter().filter(|s| s.link == link).map(|s| s.leaves);
        match leaves().count() < self.at_once() {
            true => Duration::ZERO,
            false => leaves().min().unwrap_or_default(),
        }
    }

    /// When every call connection `link` is serving is done (the idle rule waits for it).
    pub fn idle_after(&self, link: u32) -> Duration {
        let serving = self.serving.iter().filter(|s| s.link == link).map(|s| s.leaves).max();
        serving.unwrap_or_default().max(self.busy.get(&link).copied().unwrap_or_default())
    }

    /// When the next answer of a call being served leaves.
    pub fn next_answer(&self) -> Option<Duration> {
        self.serving.iter().map(|s| s.leaves).min()
    }

    /// Sends the answers whose calls are done by now, in the order they are done (and, at one
    /// instant, taken).
    pub fn send_done_answers(&mut self, sim: &mut Sim) {
        while let Some(i) = (0..self.serving.len())
            .filter(|&i| self.serving[i].leaves <= sim.now)
            .min_by_key(|&i| (self.serving[i].leaves, self.serving[i].seq))
        {
            let done = self.serving.remove(i);
            // A call taken before it on its connection is still being served.
            let overtook = self.serving.iter().any(|s| s.link == done.link && s.seq < done.seq);
            sim.record(Event::AnswerLeft { xid: done.xid, link: done.link, overtook });
            for message in done.sends {
                message.send(sim);
            }
        }
    }

    /// Sends `message` on `link` now, or, on a -07 connection serving calls whose answers are
    /// still to leave, after the last of them: -07 messages carry running totals, which leave
    /// in the order written (the simulator writes an answer when it takes the call). So a -07
    /// RDMA2_GRANT or RDMA2_ERROR written while a slow call is served waits for that call's
    /// answer here, where `Server`, writing an answer when its handler returns, sends it at
    /// once.
    fn send_behind_held(&mut self, sim: &mut Sim, link: u32, message: Message) {
        let is_draft07 = self.speaks_draft07(link);
        match self.serving.iter_mut().filter(|s| s.link == link && is_draft07).max_by_key(|s| s.seq) {
            Some(last) => last.sends.push(message),
            None => message.send(sim),
        }
    }

    pub fn executions(&self) -> u32 {
        self.executions.values().sum()
    }

    /// RFC 8166 section 4.5: a call the responder cannot serve is answered (ERR_CHUNK, an
    /// RPC error reply) and the connection kept; only a failure of the transport itself, after
    /// which nothing can be sent, may close it (4.5.4).
    pub fn closed_over_an_answerable_call(&self) -> Option<String> {
        self.closed_instead.clone()
    }

    /// RFC 8166 section 4.5.4: a responder that cannot reply closes the connection; a call it
    /// served answers something on it (its reply, an RPC error reply, or RDMA_ERROR).
    pub fn left_unanswered(&self) -> Option<String> {
        self.unanswered.clone()
    }

    pub fn twice_on_one_connection(&self) -> Option<String> {
        self.twice.clone()
    }

    pub fn credit_overrun(&self) -> Option<String> {
        self.overrun.clone()
    }

    pub fn handle_message(&mut self, sim: &mut Sim, link: u32, bytes: &[u8]) {
        let now = sim.instant();
        // What arrived behind it already (due now), as a Receive queue would hold it.
        let waiting = sim.link.as_ref().map_or(0, |l| l.to_server.iter().take_while(|(t, _)| *t <= sim.now).count());
        // And the calls being served, not yet answered: in flight for the requester too, as
        // `Server` counts them (`unanswered`).
        let serving = self.serving.iter().filter(|s| s.link == link).count();
        let Some(c) = self.conns.get_mut(&link) else { return };
        let arrival = Arrival { behind: Behind { unjudged: waiting, serving }, awaiting: None };
        let rewritten;
        let received = match c.core.handle_receive(bytes, arrival, now) {
            // A -07 call whose message is not in the Receive (an RDMA2_CALL_EXTERNAL): served
            // from the buffer the core wrote in Version One's shape, as the event loop does.
            Received::Rewritten => {
                rewritten = c.core.take_rewritten().expect("a rewritten call's buffer");
                let received = c.core.handle_rewritten(&rewritten, arrival);
                if let Received::Call { header, .. } = &received {
                    sim.record(Event::ServedRewritten { xid: header.xid(), link });
                }
                received
            }
            received => received,
        };
        // What the core sends of its own (a -07 server's CONNPROP_FINAL), before anything
        // the message prompts, and its answers to it, as the event loop sends them: each
        // taken once the one before was reported sent.
        let mut own = Vec::new();
        while let Some(t) = c.core.poll_transmit() {
            c.core.handle_completion(t.id, Ok(()));
            own.push(t);
        }
        for t in own {
            let message = match t.kind {
                TransmissionKind::Error { xid, code: _ } => {
                    let vers = t.bytes.get(4..8) == Some(&1u32.to_be_bytes()[..]);
                    sim.record(Event::ResponderError { xid, link, vers });
                    Message::Forward(t.bytes)
                }
                // What it sends back unasked is a -07 RDMA2_GRANT (section 4.2.1.1), which
                // answers no call (not a forward message the simulator counts against one).
                TransmissionKind::Grant => {
                    sim.record(Event::Draft07Grant { link, by_responder: true });
                    Message::Backward(t.bytes)
                }
                TransmissionKind::Properties => Message::Forward(t.bytes),
                // The simulated server registers no extension and sends no RDMA_OPTIONAL.
                TransmissionKind::Answer | TransmissionKind::Reply => {
                    if self.unanswered.is_none() {
                        self.unanswered = Some(format!("the server sent back {} on {link}", t.kind.describe()));
                    }
                    Message::Backward(t.bytes)
                }
            };
            self.send_behind_held(sim, link, message);
        }
        let Some(c) = self.conns.get_mut(&link) else { return };
        match received {
            Received::Call { header, params: p } => {
                let xid = header.xid();
                if c.core.responder().overruns() > 0 {
                    self.overrun =
                        Some(format!("call {xid:#x} arrived beyond the credits granted on connection {link}"));
                }
                if sim.rng.chance(self.faults.hostile) {
                    let (what, lie) = hostile(sim, xid, p.version.wire(), p.credits);
                    sim.record(Event::Lie { xid, link, lie: what });
                    // (On -07 a lie carries the running total counted now: behind the answers
                    // written before it, as the honest answers are.)
                    self.send_behind_held(sim, link, Message::Forward(lie));
                    return;
                }
                // The production serving path, with the simulator's service as its handler,
                // which draws its behaviour from the main stream when it runs.
                let service = Arc::new(SimService::new(std::mem::replace(&mut sim.rng, Rng::new(0))));
                let served = serve_call(&c.conn, &header, &p, &ULB, &*service, &mut c.buffers, || {});
                let sent = c.conn.qp().take_sent();
                let ran = service.take(&mut sim.rng);
                let mut took = Duration::ZERO;
                if let Some(run) = ran {
                    let version = p.version.wire();
                    let (slow, panicked, oversized) = (run.slow, run.panicked, !run.panicked && oversized(xid));
                    sim.record(Event::Executed { xid, link, version, slow, panicked, oversized });
                    let runs = self.executions.entry((link, xid)).or_default();
                    *runs += 1;
                    if *runs > 1 {
                        self.twice = Some(format!("call {xid:#x} executed {runs} times on connection {link}"));
                    }
                    // Its answer leaves when the service is done; serving one call at a time,
                    // the connection's later messages wait for it.
                    took = run.took;
                    if self.faults.calls_at_once == 1 {
                        self.busy.insert(link, sim.now + took);
                    }
                }
                match served {
                    Ok(served) => {
                        if sent.is_empty() && self.unanswered.is_none() {
                            self.unanswered = Some(format!(
                                "call {xid:#x} on connection {link} was served ({served:?}) and nothing was sent"
                            ));
                        }
                        match served {
                            // (Over budget: the simulated server has no budget.)
                            Answered::ErrChunk | Answered::OverBudget => {
                                sim.record(Event::Refused { xid, link, with: Refusal::ErrChunk })
                            }
                            Answered::GarbageArgs => {
                                sim.record(Event::Refused { xid, link, with: Refusal::GarbageArgs })
                            }
                            // (The simulated service echoes every call: none is call-only, and one
                            // served with nothing sent is a violation, above; its binding never
                            // panics.)
                            Answered::Reply(..)
                            | Answered::SystemErr
                            | Answered::BindingPanicked
                            | Answered::BadReply
                            | Answered::CallOnly(..) => {}
                        }
                        if self.faults.calls_at_once == 1 {
                            for send in sent {
                                sim.send_after(false, send, took);
                            }
                        } else {
                            self.serve_alongside(sim, link, xid, took, sent);
                        }
                        if matches!(served, Answered::Reply(..) | Answered::SystemErr) {
                            self.maybe_call_backward(sim, link, p.version.wire());
                        }
                    }
                    // Nothing could be sent: the server closes the connection (RFC 8166
                    // section 4.5.4). Only a failed work request may bring that about.
                    Err(e) => {
                        if !matches!(e, DataPathError::Completion(_)) {
                            self.closed_instead = Some(format!(
                                "connection {link} closed over call {xid:#x}, which it could answer: {e}"
                            ));
                        }
                        self.close(sim, link, Closer::ServerFailure)
                    }
                }
            }
            // (It sends no RDMA_OPTIONAL: a reply is to its backward call.)
            Received::Reply { xid } => {
                let header = c.core.take_judged_reply(xid);
                self.backward_answer(sim, link, xid, Ok((bytes.to_vec(), header)))
            }
            Received::PeerError { xid, error } => self.backward_answer(sim, link, xid, Err(error)),
            // (A rewritten call was judged above; an answer was sent above.)
            Received::Nothing(_) | Received::Rewritten | Received::Answered => {}
        }
        // Whatever the responder made of it: a message carrying the outstanding backward
        // call's XID is the client's answer to it (its reply or its RDMA_ERROR), which ends it.
        let xid = bytes.get(..4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        let waiting = self.backward.get(&link).and_then(BackwardSlot::waiting_for);
        if waiting == Some(xid) && self.backward_stuck.is_none() {
            self.backward_stuck =
                Some(format!("backward call {xid:#x} on connection {link} still waits after the client's answer"));
        }
    }

    /// Call `xid`, served on `link`, which serves several calls at once: `sent` (its answer)
    /// leaves when its service is done, `took` from now (on -07 not before the answers written
    /// before it: [`SimServer::send_behind_held`]), and until then the call counts against the
    /// credits.
    fn serve_alongside(&mut self, sim: &mut Sim, link: u32, xid: u32, took: Duration, sent: Vec<Vec<u8>>) {
        let is_draft07 = self.speaks_draft07(link);
        let mine = || self.serving.iter().filter(|s| s.link == link);
        let alongside = mine().count() as u32;
        let after = mine().map(|s| s.leaves).max().filter(|_| is_draft07).unwrap_or_default();
        let leaves = (sim.now + took).max(after);
        sim.record(Event::Serving { xid, link, alongside, leaves });
        let sends = sent.into_iter().map(Message::Forward).collect();
        self.serving.push(Serving { link, xid, seq: self.next_seq, leaves, sends });
        self.next_seq += 1;
        if leaves <= sim.now {
            self.send_done_answers(sim);
        }
    }

    fn close(&mut self, sim: &mut Sim, link: u32, by: Closer) {
        if sim.link.as_ref().is_some_and(|l| l.id == link) {
            if let Some(id) = sim.link_down(by) {
                self.handle_disconnected(sim, id);
                sim.with_client(|c, sim| c.handle_disconnected(sim, id));
            }
        }
    }
}

/// A call being served on a connection that serves several at once, with its answer, written
/// when the call was taken, to leave when its service is done.
struct Serving {
    link: u32,
    xid: u32,
    /// Its place in the order calls were taken.
    seq: u64,
    leaves: Duration,
    /// What leaves then: its answer, and what was written on its connection after it.
    sends: Vec<Message>,
}

/// A message of the responder's, held to leave after the answers written before it.
enum Message {
    /// An answer to a call of the requester's (it gives back a forward credit).
    Forward(Vec<u8>),
    /// Anything else (a -07 RDMA2_GRANT).
    Backward(Vec<u8>),
}

impl Message {
    fn send(self, sim: &mut Sim) {
        match self {
            Message::Forward(bytes) => sim.send(false, bytes),
            Message::Backward(bytes) => sim.send_backward(false, bytes),
        }
    }
}

/// The simulated service, as the production serving path runs it (`Handler`): slow now and
/// then (past the requester's timeout), panicking now and then, and too large for the
/// requester for some calls; otherwise the call echoed. It draws from the simulator's main
/// stream, lent to it for the call ([`SimService::take`] gives it back), in the order the
/// simulator drew before it served through the production path, so that seeds keep their
/// runs.
struct SimService(Mutex<(Rng, Option<Run>)>);

/// What the service did when it ran.
#[derive(Clone, Copy)]
struct Run {
    slow: bool,
    took: Duration,
    panicked: bool,
}

impl SimService {
    fn new(rng: Rng) -> SimService {
        SimService(Mutex::new((rng, None)))
    }

    /// Gives the main stream back to `rng`; what the service did, if it ran.
    fn take(&self, rng: &mut Rng) -> Option<Run> {
        let mut st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *rng = std::mem::replace(&mut st.0, Rng::new(0));
        st.1.take()
    }
}

impl Handler for SimService {
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        let xid = call.get(..4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        let panicked = {
            let mut st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let rng = &mut st.0;
            let slow = rng.chance(50);
            let took = if slow { TIMEOUT * 3 / 2 } else { rng.millis(2) };
            let panicked = rng.chance(20);
            st.1 = Some(Run { slow, took, panicked });
            panicked
        };
        if panicked {
            std::panic::panic_any(SimulatedPanic);
        }
        reply.extend_from_slice(&echo(call));
        if oversized(xid) {
            reply.resize(ULB.max_reply + 4096, 0);
        }
    }
}

/// The payload of the simulated service's panics, which the quiet hook leaves unprinted.
pub struct SimulatedPanic;

/// Installs, once, a panic hook that prints every panic but the simulated service's.
pub fn quiet_simulated_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<SimulatedPanic>() {
                default(info);
            }
        }));
    });
}

/// What a lying responder sends instead of a call's reply: every RDMA_ERROR kind, an
/// undecodable one, RDMA_OPTIONAL, a reply in another version, or garbage.
fn hostile(sim: &mut Sim, xid: u32, vers: u32, credits: u32) -> (Lie, Vec<u8>) {
    let error = 4; // RDMA_ERROR
    match sim.rng.below(10) {
        0 => (Lie::ErrChunk, words(&[xid, vers, credits, error, 2])), // ERR_CHUNK / RDMA2_ERR_BAD_HEADER
        1 => (Lie::ErrVersOne, words(&[xid, vers, credits, error, 1, 1, 1])), // ERR_VERS 1..1
        2 => (Lie::ErrVersNone, words(&[xid, vers, credits, error, 1, 3, 5])), // ERR_VERS with no common version
        3 => (Lie::InvalOption, words(&[xid, 2, credits, error, 3])), // RDMA2_ERR_INVAL_OPTION
        4 => (Lie::Undecodable, words(&[xid, vers, credits, error, 77])), // undecodable: dropped
        5 => (Lie::Optional, words(&[xid, 2, credits, 5, 0x99, 0])),  // RDMA_OPTIONAL
        // A version nobody speaks, and a reply whose RPC XID is another call's: neither may
        // complete the call (a lie the requester cannot tell from a real reply, a well-formed
        // reply of its own XID, is out of any requester's reach and not injected).
        6 => (Lie::UnknownVersion, words(&[xid, 7, credits, 0, 0, 0, 0, xid, 1, 0, 0, 0, 0])),
        7 => (Lie::OtherXid, words(&[xid, vers, credits, 0, 0, 0, 0, xid ^ 0x8000, 1, 0, 0, 0, 0])),
        // No such call.
        8 => (Lie::NoSuchCall, words(&[0xffff_0000 ^ xid, vers, credits, 0, 0, 0, 0, 0xffff_0000 ^ xid, 1])),
        _ => {
            let len = sim.rng.below(40) as usize;
            let mut b = words(&[xid]);
            b.extend((0..len).map(|_| sim.rng.next() as u8));
            (Lie::Garbage, b)
        }
    }
}
