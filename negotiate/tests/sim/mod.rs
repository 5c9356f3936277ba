//! A deterministic simulator of a requester and a responder (issue 13), in the spirit of
//! FoundationDB's simulation testing and TigerBeetle's VOPR: one seed drives everything, one
//! virtual clock, no threads and no sleeps. It runs the crate's real decision makers — the
//! one `negotiate::connection::Connection` core per side (the client's, with the `Requester`
//! inside; each server connection's, with the `Responder` inside), `rpcrdma-v1`'s marshaling and reassembly, and the server's
//! rule for failed calls (`FailureAnswer`) — over a simulated reliable connection
//! and simulated registered memory, and injects faults: message delays, disconnects at any
//! step, refused connects, slow, panicking and oversized handlers, and a responder that
//! answers with every RDMA_ERROR kind, malformed bytes or RDMA_OPTIONAL.
//!
//! After every step it checks the invariants ([`Violation`]): every call ends once, within its
//! deadline; no call is executed twice on one connection; the requester never sends beyond
//! its credits; every successful reply is its own call's; a failed call reports what happened
//! to its last attempt; and no registration is left once the calls have ended. A failing seed
//! prints itself with the command that replays exactly that run ([`Config::replay_command`]:
//! `SIM_SEED=n SIM_EXTRAS=...`).
//!
//! Every run records its events, step by step ([`trace`]): what a named seed checks its
//! scenario against, what a sweep counts its faults and outcomes from, and, as one hash, what
//! a replay is compared by.
//!
//! What stays outside: the I/O around the two cores (`Client`'s dispatcher thread and
//! condition variables, `Server`'s threads and queue pairs), which this file replaces with
//! simulated links and memory; those are covered by the fault suites in interop-tests.

mod client;
mod server;
pub mod trace;
pub mod verbs;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use client::SimClient;
use rpcrdma_v2::dialect::{Dialect, VersionTwo};
use server::SimServer;
use trace::{Closer, Entry, Event, Trace};

/// SplitMix64: small, fast, and the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }

    /// Another stream from the same seed, for faults added later (`stream` 0: unusable calls,
    /// 1: the responder's backward calls, 2: the requester's answers to them, 3: their
    /// delays, 4: abandoned calls, 5: Version Two dialects, 6: attempts, 7: calls served at
    /// once): drawing from it leaves the main stream, and so every older seed's run,
    /// unchanged while the fault is off.
    pub fn side(seed: u64, stream: u64) -> Self {
        Rng(seed.wrapping_add(stream) ^ 0x005e_ed0f_5eed_0f00)
    }

    pub fn millis(&mut self, max: u64) -> Duration {
        Duration::from_millis(self.below(max + 1))
    }
}

/// What one run injects; drawn from the seed.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// Per step, the chance (per mille) that the connection breaks.
    pub disconnect: u32,
    /// The chance that a connect attempt is refused.
    pub refuse_connect: u32,
    /// The largest one-way delay of a message.
    pub max_delay_ms: u64,
    /// The chance that the responder answers a call with a hostile message instead.
    pub hostile: u32,
    /// The responder speaks Version One only.
    pub v1_only_responder: bool,
    /// Which sides send RFC 8797 private data: (requester, responder).
    pub private_data: (bool, bool),
    /// How long the responder lets a connection stay silent before closing it.
    pub idle_timeout: Duration,
    /// The chance that the requester sends a call whose header is valid but whose chunks are
    /// unusable (RFC 8166 section 4.5.2: the responder MUST answer ERR_CHUNK). Drawn from a
    /// stream of its own ([`Rng::side`]), so that the seeds drawn before it existed replay as
    /// they did; only with an honest responder (`hostile` 0), whose answer it checks.
    pub unusable_calls: u32,
    /// The chance, after serving a call, that the responder sends a backward-direction call
    /// (RFC 8167) when none is outstanding (side stream).
    pub backward_calls: u32,
    /// The chance that the requester answers a backward call with RDMA_ERROR instead of a
    /// reply (side stream): the call must end at once (RFC 8166 section 4.5, finding 6).
    pub backward_errors: u32,
    /// The chance that a call's caller gives it up at a random time after making it (side
    /// stream), as dropping `Client::call_async`'s future does: an abandoned call that was
    /// sent keeps its credit and its memory until its reply or its connection's loss.
    pub abandon: u32,
    /// The Version Two the requester speaks (side stream 5): -00 (the first simulator's), or,
    /// with the `draft07` extra, -07 alone or both with -07 preferred.
    pub version_two: VersionTwo,
    /// The responder also speaks -07 (`ResponderConfig::draft07`), taking each connection's
    /// dialect from its first message: on with the `draft07` extra.
    pub responder_draft07: bool,
    /// Where both sides' -07 credit counters start on each connection (`draft07_counters_from`
    /// in both configurations): with the `draft07` extra, 6 to 17 messages short of the
    /// running totals (received count plus 32 advertised) wrapping past 2^32, so that most
    /// -07 connections carry totals across the wrap (section 4.2.1); 0 otherwise.
    pub draft07_counters_from: u32,
    /// The requester's attempts per call: [`MAX_ATTEMPTS`], or with the `one_attempt` extra
    /// in a quarter of the runs (side stream 6) one, so that a call lost with its connection fails at once with
    /// `ConnectionLost`, saying who closed it, instead of going out again.
    pub max_attempts: u32,
    /// How many calls each connection of the responder serves at once: 1 (the first
    /// simulator's: a connection's later messages wait for its call), or with the `several`
    /// extra in three runs of four (side stream 7) 2, 4 or 8, never more than
    /// [`Faults::credits`] (as `Server` serves a connection's calls on several threads, at
    /// most the credits it grants): each call's answer leaves when its service is done, so
    /// that a later call's reply may overtake an earlier one's (RFC 8166 section 3.3.1: "RPC
    /// calls complete in any order"), and the calls being served count against the credits
    /// granted as `Server` counts them.
    pub calls_at_once: u32,
    /// The credits the responder grants: 32 (`ResponderConfig`'s default), or 4 where it also
    /// speaks -07 (so that a continued call's parts use more than half of a -07 window and the
    /// responder's GRANT is due; on its Version One and -00 connections, the calls served at
    /// once then fill the window).
    pub credits: u32,
}

impl Faults {
    pub fn draw(rng: &mut Rng) -> Faults {
        Faults {
            disconnect: [0, 0, 2, 10][rng.below(4) as usize],
            refuse_connect: [0, 0, 100][rng.below(3) as usize],
            max_delay_ms: [1, 5, 40][rng.below(3) as usize],
            hostile: [0, 0, 50, 300][rng.below(4) as usize],
            v1_only_responder: rng.chance(300),
            private_data: (rng.chance(700), rng.chance(700)),
            idle_timeout: Duration::from_millis([60_000, 60_000, 250][rng.below(3) as usize]),
            unusable_calls: 0,
            backward_calls: 0,
            backward_errors: 0,
            abandon: 0,
            version_two: VersionTwo::One(Dialect::Cel00),
            responder_draft07: false,
            draft07_counters_from: 0,
            max_attempts: MAX_ATTEMPTS,
            calls_at_once: 1,
            credits: 32,
        }
    }
}

/// A broken invariant, with what the simulator knew when it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub seed: u64,
    /// The faults the run had beside the seed's own.
    pub extras: Extras,
    pub at: Duration,
    pub what: String,
    /// The hash of the run's trace up to the violation.
    pub trace_hash: u64,
}

impl Violation {
    pub fn config(&self) -> Config {
        Config { seed: self.seed, extras: self.extras }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} (extras {}) at {:?}: {}  (trace {:016x}; replay: {})",
            self.seed,
            self.extras,
            self.at,
            self.what,
            self.trace_hash,
            self.config().replay_command()
        )
    }
}

/// How a run went, when no invariant broke.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub calls: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub connections: u32,
    pub executions: u32,
    pub steps: u32,
    pub virtual_time: Duration,
    /// Backward calls ended by the requester's reply, by its RDMA_ERROR, by the connection's
    /// end.
    pub backward: (u32, u32, u32),
    /// Calls given up by their caller: (before they were sent, while a transmission was out).
    pub abandoned: (u32, u32),
    /// Every step's events, and their hash.
    pub trace: Trace,
}

/// One reliable connection: messages in each direction, in order, each with the virtual time
/// it arrives. A closed link delivers nothing more.
pub struct Link {
    pub id: u32,
    pub up: bool,
    pub to_server: VecDeque<(Duration, Vec<u8>)>,
    pub to_client: VecDeque<(Duration, Vec<u8>)>,
    /// Calls the client sent on it that the server has not answered yet: what occupies the
    /// server's Receives (RFC 8166 section 3.3.1).
    pub outstanding: u32,
    /// The client accepted a reply on it, whose credit grant opens the window beyond one
    /// (section 3.3.3).
    pub opened: bool,
    /// The running total the client's latest -07 message carried, and whether the totals
    /// have wrapped past 2^32 on this link ([`Event::Draft07TotalsWrapped`]).
    pub draft07_total: Option<u32>,
    pub draft07_wrapped: bool,
}

impl Link {
    pub fn new(id: u32) -> Link {
        Link {
            id,
            up: true,
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            outstanding: 0,
            opened: false,
            draft07_total: None,
            draft07_wrapped: false,
        }
    }

    /// Notes the running total of a -07 message the client sent (every -07 header type, 4
    /// to 13, in Version Two; the client sends no -00 message with one of those types on a
    /// -07 connection); true when the totals just wrapped past 2^32. (The server's messages
    /// are not looked at: its lies carry any word there.)
    fn note_client_total(&mut self, bytes: &[u8]) -> bool {
        let Some(f) = rpcrdma_v1::header::Fixed::read(bytes) else { return false };
        let is_draft07 = f.proc.and_then(rpcrdma_v2::draft07::header::HeaderType::from_wire).is_some();
        let (Some(total), true) = (f.credit, is_draft07 && f.vers == 2) else { return false };
        let before = self.draft07_total.replace(total);
        let wrapped = before.is_some_and(|b| b >= 1 << 31 && total < 1 << 31) && !self.draft07_wrapped;
        self.draft07_wrapped |= wrapped;
        wrapped
    }
}

/// Whether `bytes` is a -07 RDMA2_CALL_MIDDLE: a part of a call, not the last.
fn is_call_middle(bytes: &[u8]) -> bool {
    use rpcrdma_v2::draft07::header::HeaderType;
    let f = rpcrdma_v1::header::Fixed::read(bytes);
    f.is_some_and(|f| f.vers == 2 && f.proc.and_then(HeaderType::from_wire) == Some(HeaderType::CallMiddle))
}

/// The requester's own limit of calls in flight on a connection: the credits it asks for
/// (`RequesterConfig::credits`' default).
const REQUESTER_CALLS: u32 = 32;

/// The whole simulated world.
pub struct Sim {
    pub seed: u64,
    extras: Extras,
    pub rng: Rng,
    /// The delays of backward-direction messages ([`Rng::side`] stream 3).
    backward_delays: Rng,
    pub faults: Faults,
    pub base: Instant,
    pub now: Duration,
    /// The memory windows the requester's connections opened to the responder.
    pub net: verbs::Net,
    pub link: Option<Link>,
    pub next_link: u32,
    /// The two sides; each is taken out while it acts (`with_client`, `with_server`), so that
    /// it can act on the rest of the world.
    client: Option<SimClient>,
    server: Option<SimServer>,
    pub steps: u32,
    /// The client sent beyond the credits (RFC 8166 sections 3.3.1 and 3.3.3).
    overrun: Option<String>,
    /// Every step's events.
    trace: Trace,
    /// `SIM_TRACE` set: every event is printed.
    print: bool,
}

/// The requester's per-attempt timeout and attempts, in virtual time.
pub const TIMEOUT: Duration = Duration::from_millis(200);
pub const MAX_ATTEMPTS: u32 = 4;
const MAX_STEPS: u32 = 200_000;

impl Sim {
    pub fn new(seed: u64, extras: Extras) -> Sim {
        server::quiet_simulated_panics();
        let mut rng = Rng::new(seed);
        let mut faults = Faults::draw(&mut rng);
        let mut side = Rng::side(seed, 0);
        if faults.hostile == 0 && extras.unusable_calls {
            faults.unusable_calls = [0, 0, 100, 300][side.below(4) as usize];
        }
        let mut backward = Rng::side(seed, 1);
        if extras.backward_calls {
            faults.backward_calls = [0, 100, 500][backward.below(3) as usize];
            faults.backward_errors = [0, 300, 1000][backward.below(3) as usize];
        }
        let mut abandons = Rng::side(seed, 4);
        if extras.abandoned_calls {
            faults.abandon = [0, 0, 100, 400][abandons.below(4) as usize];
        }
        if extras.draft07 {
            let mut dialects = Rng::side(seed, 5);
            faults.responder_draft07 = true;
            faults.version_two = [
                VersionTwo::One(Dialect::Cel00),
                VersionTwo::One(Dialect::Ietf07),
                VersionTwo::Both { preferred: Dialect::Ietf07 },
            ][dialects.below(3) as usize];
            faults.draft07_counters_from = u32::MAX - 48 + dialects.below(12) as u32;
        }
        if extras.one_attempt {
            faults.max_attempts = [MAX_ATTEMPTS, MAX_ATTEMPTS, MAX_ATTEMPTS, 1][Rng::side(seed, 6).below(4) as usize];
        }
        if extras.several {
            faults.calls_at_once = [1, 2, 4, 8][Rng::side(seed, 7).below(4) as usize];
        }
        if faults.responder_draft07 {
            faults.credits = 4;
        }
        let calls = 1 + rng.below(24) as u32;
        let server = SimServer::new(faults, backward);
        let client = SimClient::new(&mut rng, side, Rng::side(seed, 2), abandons, calls, faults);
        Sim {
            seed,
            extras,
            rng,
            backward_delays: Rng::side(seed, 3),
            faults,
            base: Instant::now(),
            now: Duration::ZERO,
            net: verbs::Net::default(),
            link: None,
            next_link: 1,
            client: Some(client),
            server: Some(server),
            steps: 0,
            overrun: None,
            trace: Trace::default(),
            print: std::env::var_os("SIM_TRACE").is_some(),
        }
    }

    pub fn with_client<T>(&mut self, f: impl FnOnce(&mut SimClient, &mut Sim) -> T) -> T {
        let mut c = self.client.take().expect("the client acts once at a time");
        let r = f(&mut c, self);
        self.client = Some(c);
        r
    }

    pub fn with_server<T>(&mut self, f: impl FnOnce(&mut SimServer, &mut Sim) -> T) -> T {
        let mut s = self.server.take().expect("the server acts once at a time");
        let r = f(&mut s, self);
        self.server = Some(s);
        r
    }

    fn client(&self) -> &SimClient {
        self.client.as_ref().expect("the client is in place between steps")
    }

    fn server(&self) -> &SimServer {
        self.server.as_ref().expect("the server is in place between steps")
    }

    /// Records `event` in the trace (and prints it with `SIM_TRACE`).
    pub fn record(&mut self, event: Event) {
        if self.print {
            eprintln!("[{:>9.3?}] {:>6} {event:?}", self.now, self.steps);
        }
        self.trace.push(Entry { step: self.steps, at: self.now, event });
    }

    pub fn instant(&self) -> Instant {
        self.base + self.now
    }

    pub fn violation(&self, what: impl Into<String>) -> Violation {
        let (seed, extras, at, trace_hash) = (self.seed, self.extras, self.now, self.trace.hash());
        Violation { seed, extras, at, what: what.into(), trace_hash }
    }

    /// A message on the current link, arriving after a random delay but never before the one
    /// sent ahead of it (RC delivers in order).
    pub fn send(&mut self, to_server: bool, bytes: Vec<u8>) {
        self.send_after(to_server, bytes, Duration::ZERO);
    }

    /// [`Sim::send`], leaving only after `wait` (a slow service's reply).
    pub fn send_after(&mut self, to_server: bool, bytes: Vec<u8>, wait: Duration) {
        self.send_message(to_server, bytes, wait, true);
    }

    /// A backward-direction message (RFC 8167: the responder's call, the requester's answer):
    /// it neither takes nor gives back a forward credit.
    pub fn send_backward(&mut self, to_server: bool, bytes: Vec<u8>) {
        self.send_message(to_server, bytes, Duration::ZERO, false);
    }

    fn send_message(&mut self, to_server: bool, bytes: Vec<u8>, wait: Duration, forward: bool) {
        let rng = if forward { &mut self.rng } else { &mut self.backward_delays };
        let delay = rng.millis(self.faults.max_delay_ms);
        let now = self.now + wait;
        let len = bytes.len() as u32;
        let Some(link) = self.link.as_mut().filter(|l| l.up) else {
            self.record(Event::SentNowhere { to_server, len });
            return;
        };
        // Every forward message the server sends answers one the client sent: a call, whose
        // parts before the last (-07's CALL_MIDDLE, section 4.1) are one message with it.
        if forward && to_server && !is_call_middle(&bytes) {
            link.outstanding += 1;
            // (On -07 the credits count Receives, not calls: a call being served has left
            // its Receive, so the bound is the requester's own limit of calls in flight; the
            // responder's own check is `CreditWindow::within_granted`.)
            let granted = if link.draft07_total.is_some() { REQUESTER_CALLS } else { self.faults.credits };
            let window = if link.opened { granted } else { 1 };
            if link.outstanding > window && self.overrun.is_none() {
                let (id, n) = (link.id, link.outstanding);
                self.overrun = Some(format!("{n} calls outstanding on connection {id}, beyond its {window} credits"));
            }
        } else if forward {
            link.outstanding = link.outstanding.saturating_sub(1);
        }
        let wrapped = forward && to_server && link.note_client_total(&bytes);
        let outstanding = if forward && to_server { link.outstanding } else { 0 };
        let q = if to_server { &mut link.to_server } else { &mut link.to_client };
        let at = q.back().map_or(now + delay, |(last, _)| (*last).max(now + delay));
        let (link, digest) = (link.id, trace::digest(&bytes));
        q.push_back((at, bytes));
        self.record(Event::Sent { to_server, forward, link, delay, arrives: at, len, digest, outstanding });
        if wrapped {
            self.record(Event::Draft07TotalsWrapped { link });
        }
    }

    /// The link goes down (a fault, or either side closing it): nothing more is delivered on
    /// it. Returns its id; the caller tells both sides, each of which fences what it bound on
    /// it.
    pub fn link_down(&mut self, by: Closer) -> Option<u32> {
        let link = self.link.take().filter(|l| l.up)?;
        // The windows bound on it die with it (each side's queue pair goes to Error as it
        // hears).
        self.net.drop_link(link.id);
        let undelivered = (link.to_server.len() + link.to_client.len()) as u32;
        self.record(Event::LinkDown { link: link.id, by, undelivered });
        Some(link.id)
    }

    /// A fault: the link breaks under both sides.
    fn break_link(&mut self) {
        let Some(id) = self.link_down(Closer::Fault) else { return };
        self.with_server(|s, sim| s.handle_disconnected(sim, id));
        self.with_client(|c, sim| c.handle_disconnected(sim, id));
    }

    /// Runs to the end: every call ended and nothing left to do, or a broken invariant.
    pub fn run(mut self) -> Result<Report, Violation> {
        loop {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Err(self.violation(format!("no end after {MAX_STEPS} steps")));
            }
            self.with_client(|c, sim| c.route(sim));
            self.check()?;
            if self.client().all_ended() && self.link.as_ref().is_none_or(|l| l.to_client.is_empty()) {
                return self.finish();
            }
            let Some(next) = self.next_time() else {
                return Err(
                    self.violation(format!("calls {:?} are open and nothing is scheduled", self.client().open()))
                );
            };
            self.now = self.now.max(next);
            if self.link.as_ref().is_some_and(|l| l.up) && self.rng.chance(self.faults.disconnect) {
                self.break_link();
                continue;
            }
            self.step();
        }
    }

    fn next_time(&self) -> Option<Duration> {
        let link = self.link.as_ref().filter(|l| l.up);
        let to_server =
            link.and_then(|l| l.to_server.front().map(|(t, _)| (*t).max(self.server().takes_next_at(l.id))));
        let to_client = link.and_then(|l| l.to_client.front()).map(|(t, _)| *t);
        let c = self.client();
        let timer = c.next_timer().filter(|_| link.is_some()).map(|t| t.saturating_duration_since(self.base));
        // Idle is judged once the connection's calls are served.
        let idle = link.and_then(|l| {
            let deadline = self.server().idle_deadline(l.id)?.saturating_duration_since(self.base);
            Some(deadline.max(self.server().idle_after(l.id)))
        });
        let answer = self.server().next_answer();
        [to_server, to_client, timer, idle, answer, c.next_connect(), c.next_call()].into_iter().flatten().min()
    }

    /// Everything due now, in a fixed order.
    fn step(&mut self) {
        let now = self.now;
        self.with_client(|c, sim| {
            c.start_due_calls(sim);
            c.abandon_due_calls(sim);
            c.connect_if_due(sim);
        });
        // The answers of calls done by now leave before the next message is taken (`Server`
        // counts a call as answered before its reply's Send).
        self.with_server(|s, sim| s.send_done_answers(sim));
        let due_server = self.link.as_ref().filter(|l| l.up).is_some_and(|l| {
            l.to_server.front().is_some_and(|(t, _)| *t <= now) && self.server().takes_next_at(l.id) <= now
        });
        if due_server {
            let (link_id, bytes) = {
                let l = self.link.as_mut().unwrap();
                (l.id, l.to_server.pop_front().unwrap().1)
            };
            self.record(Event::Delivered { to_server: true, link: link_id });
            self.with_server(|s, sim| s.handle_message(sim, link_id, &bytes));
        }
        let due_client =
            self.link.as_ref().filter(|l| l.up).and_then(|l| l.to_client.front()).is_some_and(|(t, _)| *t <= now);
        if due_client {
            let (link_id, bytes) = {
                let l = self.link.as_mut().unwrap();
                (l.id, l.to_client.pop_front().unwrap().1)
            };
            self.record(Event::Delivered { to_server: false, link: link_id });
            self.with_client(|c, sim| c.handle_message(sim, link_id, &bytes));
        }
        self.with_client(|c, sim| c.handle_timer(sim));
        if let Some(id) = self.link.as_ref().filter(|l| l.up).map(|l| l.id) {
            self.with_server(|s, sim| s.close_if_idle(sim, id));
        }
    }

    /// The invariants that hold after every step.
    fn check(&self) -> Result<(), Violation> {
        if let Some(what) = self.client().overdue(self.now) {
            return Err(self.violation(what));
        }
        if let Some(what) = self.server().twice_on_one_connection() {
            return Err(self.violation(what));
        }
        if let Some(what) = self.server().backward_call_stuck() {
            return Err(self.violation(what));
        }
        if let Some(what) = self.server().closed_over_an_answerable_call().or_else(|| self.server().left_unanswered()) {
            return Err(self.violation(what));
        }
        if let Some(what) = self.server().credit_overrun().or_else(|| self.overrun.clone()) {
            return Err(self.violation(what));
        }
        if let Some(what) = self.client().wrong_reply().or_else(|| self.client().beyond_attempts()) {
            return Err(self.violation(what));
        }
        Ok(())
    }

    /// The invariants of the end.
    fn finish(mut self) -> Result<Report, Violation> {
        if self.net.live() > 0 {
            let what = format!("{} memory windows left open after every call ended", self.net.live());
            return Err(self.violation(what));
        }
        let (succeeded, failed) = self.client().outcomes();
        Ok(Report {
            calls: self.client().calls(),
            succeeded,
            failed,
            connections: self.next_link - 1,
            executions: self.server().executions(),
            steps: self.steps,
            virtual_time: self.now,
            backward: self.server().backward_ended,
            abandoned: self.client().abandoned,
            trace: std::mem::take(&mut self.trace),
        })
    }
}

/// Runs seed `seed` with every fault.
pub fn run(seed: u64) -> Result<Report, Violation> {
    Sim::new(seed, Extras::ALL).run()
}

/// Runs seed `seed` with only the faults of `extras` among those added after the first
/// version: the run a named regression seed had when it was found.
pub fn run_with(seed: u64, extras: Extras) -> Result<Report, Violation> {
    Sim::new(seed, extras).run()
}

/// What decides a run: its seed, and which of the later faults it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub seed: u64,
    pub extras: Extras,
}

/// The test that replays one run; [`Config::replay_command`] names it.
const REPLAY: &str = "cargo test -p negotiate --test simulation replay -- --nocapture";

impl Config {
    pub fn run(self) -> Result<Report, Violation> {
        run_with(self.seed, self.extras)
    }

    /// The command line that replays this run exactly (`SIM_TRACE=1` before it prints every
    /// event).
    pub fn replay_command(&self) -> String {
        format!("SIM_SEED={} SIM_EXTRAS={} {REPLAY}", self.seed, self.extras)
    }

    /// The run the `replay` test makes of its environment (`var` reads it): `SIM_SEED` (none:
    /// no run), `SIM_EXTRAS` (by default `all`, as the sweeps run).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, String> {
        let Some(seed) = var("SIM_SEED") else { return Ok(None) };
        let seed = seed.trim().parse().map_err(|e| format!("SIM_SEED={seed}: {e}"))?;
        let extras = match var("SIM_EXTRAS") {
            Some(e) => e.parse()?,
            None => Extras::ALL,
        };
        Ok(Some(Config { seed, extras }))
    }

    /// Reads back a command line [`Config::replay_command`] printed: its variables, as the
    /// shell would set them for the `replay` test.
    pub fn parse_command(command: &str) -> Result<Config, String> {
        let mut vars = HashMap::new();
        let mut words = command.split_whitespace().peekable();
        while let Some((name, value)) = words.peek().and_then(|w| w.split_once('=')) {
            if vars.insert(name.to_string(), value.to_string()).is_some() {
                return Err(format!("{name} set twice in {command:?}"));
            }
            words.next();
        }
        let rest: Vec<&str> = words.collect();
        if rest.join(" ") != REPLAY {
            return Err(format!("{command:?} does not run the replay test ({REPLAY})"));
        }
        if let Some(other) = vars.keys().find(|k| !["SIM_SEED", "SIM_EXTRAS", "SIM_TRACE"].contains(&k.as_str())) {
            return Err(format!("{command:?} sets {other}, which the replay test does not read"));
        }
        Config::from_vars(|k| vars.get(k).cloned())?.ok_or_else(|| format!("{command:?} sets no SIM_SEED"))
    }
}

/// The faults added after the simulator's first version, each drawn from a stream of its own
/// ([`Rng::side`]), so that switching them off gives the older runs back exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extras {
    /// Calls with unusable chunks (finding 4).
    pub unusable_calls: bool,
    /// Backward-direction calls, answered with replies or RDMA_ERROR (finding 6).
    pub backward_calls: bool,
    /// Callers that give their call up before it ends, as a dropped `AsyncCall` does
    /// (issue 14).
    pub abandoned_calls: bool,
    /// draft-ietf-nfsv4-rpcrdma-version-two-07 (issue 27): a responder that speaks both
    /// Version Two dialects, and a requester that speaks -00, -07, or both.
    pub draft07: bool,
    /// A quarter of the runs give each call one attempt ([`Faults::max_attempts`]): the calls
    /// lost with a connection fail with `ConnectionLost`, which runs of four attempts reach
    /// about once in 2,000 seeds.
    pub one_attempt: bool,
    /// Each connection serves several calls at once in three runs of four
    /// ([`Faults::calls_at_once`]).
    pub several: bool,
}

impl Extras {
    pub const ALL: Extras = Extras {
        unusable_calls: true,
        backward_calls: true,
        abandoned_calls: true,
        draft07: true,
        one_attempt: true,
        several: true,
    };
    pub const NONE: Extras = Extras {
        unusable_calls: false,
        backward_calls: false,
        abandoned_calls: false,
        draft07: false,
        one_attempt: false,
        several: false,
    };

    fn names(self) -> [(&'static str, bool); 6] {
        [
            ("unusable", self.unusable_calls),
            ("backward", self.backward_calls),
            ("abandon", self.abandoned_calls),
            ("draft07", self.draft07),
            ("one_attempt", self.one_attempt),
            ("several", self.several),
        ]
    }
}

/// `all`, `none`, or the names of those on, comma-separated:
/// `unusable,backward,abandon,draft07,one_attempt,several`.
impl std::fmt::Display for Extras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Extras::ALL => f.write_str("all"),
            Extras::NONE => f.write_str("none"),
            e => {
                let on: Vec<&str> = e.names().iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect();
                f.write_str(&on.join(","))
            }
        }
    }
}

impl std::str::FromStr for Extras {
    type Err = String;

    fn from_str(s: &str) -> Result<Extras, String> {
        match s.trim() {
            "all" => return Ok(Extras::ALL),
            "none" => return Ok(Extras::NONE),
            _ => {}
        }
        let mut e = Extras::NONE;
        for name in s.trim().split(',') {
            let on = match name {
                "unusable" => &mut e.unusable_calls,
                "backward" => &mut e.backward_calls,
                "abandon" => &mut e.abandoned_calls,
                "draft07" => &mut e.draft07,
                "one_attempt" => &mut e.one_attempt,
                "several" => &mut e.several,
                _ => {
                    return Err(format!(
                        "SIM_EXTRAS={s}: {name:?} is not all, none, unusable, backward, abandon, draft07, one_attempt \
                         or several"
                    ))
                }
            };
            if std::mem::replace(on, true) {
                return Err(format!("SIM_EXTRAS={s}: {name} named twice"));
            }
        }
        Ok(e)
    }
}

/// The words of a simulated message, big-endian.
pub fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}
