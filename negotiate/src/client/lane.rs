//! One connection's worth of a [`Client`](super::Client): the [`Connection`](crate::connection::Connection) core deciding it, the
//! callers waiting on it, and the lane's turns of the client's one dispatcher thread
//! (`dispatch.rs`), which connects, reads the clock and receives when no caller does. A client
//! with several connections ([`ClientConfig::connections`]) has one lane for each, and one
//! dispatcher for them all.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Context, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::Dialect;
use rpcrdma_verbs::{Arm, Backend, QpState, QueuePair};

use super::in_place::InPlaceReply;
use super::link::Link;
use crate::backchannel::{self, Handler};
use crate::client_config::{ClientConfig, ClientError, ClientStats};
use crate::connection::{self, Arrival, CallStep, Event, PeerProperties, Received};
use crate::datapath::{
    prepare_call, send_answer, send_call_continuing, send_call_lent, send_draft07, send_error, CallParams,
    DataPathError, Ended, PendingCall, PreparedCall, ReceivePool, Transport,
};
use crate::extension::{option_message, OptionReply};
use crate::own_keys::{self, XidMap, CALLS_AT_ONCE};
use crate::reply::PeerError;
use crate::requester::{CallFailure, Transmit};
use crate::thresholds;
use crate::thresholds::SegmentLimits;
use rpcrdma_v2::properties::{Exchange, TransportProperties, RPCRDMA2_OPT_PROPERTIES};

/// A transmission sent, with the memory its reply releases and the connection it went on.
pub(super) type Sent<B> = (PendingCall<B>, Arc<Link<B>>);

/// What another thread did for a blocking call while its caller slept, taken with its step:
/// posted it ([`State::posted`]) or marshaled it ahead ([`State::prepared`]).
pub(super) type Handed<B> = (Option<Sent<B>>, Option<(PreparedCall<B>, Arc<Link<B>>)>);

struct State<B: Backend> {
    core: connection::Connection<Arc<Link<B>>>,
    /// Each caller waiting, by XID, to be woken alone (waking all 64 callers of a busy client
    /// for every reply is what a shared condition variable would cost).
    waiters: XidMap<Waiter>,
    /// How many of them are async calls ([`Waiter::Task`]). Their polls receive for them
    /// and arm the connection ([`Shared::poll_step`]); on a backend that cannot wake a waker,
    /// the dispatcher receives while any waits and no thread does.
    tasks: usize,
    /// The memory of calls given up while their transmission was out
    /// ([`connection::Connection::abandon`]): open to the responder, which may still write its reply
    /// into it, until the reply arrives or the connection is lost; released then
    /// ([`Shared::release_abandoned`]).
    abandoned: XidMap<Sent<B>>,
    /// The connection whose transport properties were exchanged (or are being).
    properties_for: Option<Weak<Link<B>>>,
    /// Blocking calls waiting for a credit, marshaled ahead by their callers on the
    /// connection they expect to go out on: whoever makes such a call's transmission ready
    /// (most often the thread that received the reply freeing a credit) posts it then
    /// ([`State::wake`]), and its caller sleeps once, until its reply.
    prepared: XidMap<(PreparedCall<B>, Arc<Link<B>>)>,
    /// Calls posted that way, for their callers to take when their reply (or failure) comes.
    posted: XidMap<Sent<B>>,
    /// Who receives on the connection now: one at a time, a caller waiting for its reply
    /// while calls are in progress (so that the reply to a lone caller reaches it with no
    /// hand-off between threads), the dispatcher otherwise (backward calls, a connection lost
    /// while idle).
    receiver: Receiver,
    /// When a call last started or ended: the dispatcher receives only after [`LINGER`]
    /// without calls, so that back-to-back calls keep receiving their own replies.
    last_active: Instant,
    /// When the dispatcher, waiting for this lane's callers (`Waiting::Callers`), looks
    /// next; `None` while it does anything else. Its waits are not cut to a tick: a call's
    /// end that needs it sooner (the lane idle after [`LINGER`]) pokes it ([`Shared::end`]).
    dispatcher_due: Option<Instant>,
    /// Whether the backend's connections wake a task when a message arrives
    /// ([`Connection::arm_receive`]); learned when a connection is made.
    arms: bool,
    /// Threads woken, to unpark once the lock is released ([`Locked`]).
    unpark: Vec<Sleeper>,
    /// The next unlock moves `unpark` to `deferred` instead of waking it: the dispatcher's
    /// burst ([`Shared::receive_more`]) unlocks to receive its next message.
    hold_wakes: bool,
    /// Threads the dispatcher's burst will wake at its end, or before any unlock that does
    /// more than receive ([`State::wake_deferred`]); no other thread's unlock wakes them.
    deferred: Vec<Sleeper>,
    /// The async call whose task the connection was last armed to wake; `None` once a
    /// receiver other than a task took the role or that call ended: then whoever leaves the
    /// role, or ends the call, wakes a task to look and arm ([`State::stop_receiving`]).
    armed_task: Option<u32>,
    /// Workers serving this lane's backward calls (`workers::BACKWARD_HELD_MOST`).
    backward_held: usize,
    /// Backward calls waiting for one of them (`backward::BACKWARD_QUEUED_MOST`).
    backward_queue: std::collections::VecDeque<workers::BackwardCall<B>>,
    /// Backward calls dropped, beyond those (`ClientStats::backward_dropped`).
    backward_dropped: u64,
    /// The keeper's NULL calls ([`ClientConfig::keep_connected`]).
    keeping: keeper::Keeping,
    /// A properties exchange is with the workers, not yet begun.
    exchange_queued: bool,
}

mod backward;
mod dispatch;
mod keeper;
mod locked;
mod sleeper;
mod workers;

pub(super) use dispatch::Dispatcher;
use sleeper::Sleeper;
use workers::Workers;
mod options;

use locked::Locked;

/// How long the connection must be without calls before the dispatcher takes over receiving
/// (a caller that finds the dispatcher receiving waits for it to hand the reply over).
const LINGER: Duration = Duration::from_millis(20);

/// The most messages an async call's poll receives before it lets its executor run the
/// tasks they woke.
const TASK_DRAIN_MOST: usize = 64;

/// The most times an async call's poll looks again because something waited to be received,
/// before it yields to its executor.
const TASK_LOOKS_MOST: u32 = 8;

/// How a waiting caller is woken.
pub(super) enum Waiter {
    /// A blocking [`Client::call`](super::Client::call)'s thread, parked (nothing allocated per call).
    Thread(Sleeper),
    /// An async call's task ([`Client::call_async`](super::Client::call_async)).
    Task(Waker),
}

impl Waiter {
    /// Wakes a task now; a thread is put on `unpark`, woken once the state's lock is released
    /// ([`Locked`]).
    fn wake(&self, unpark: &mut Vec<Sleeper>) {
        match self {
            Waiter::Thread(t) => unpark.push(t.clone()),
            Waiter::Task(w) => w.wake_by_ref(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Receiver {
    Nobody,
    Caller,
    Dispatcher,
}

impl<B: Backend> State<B> {
    /// Wakes the callers whose step the core has ready; a transmission whose call was
    /// prepared ahead is posted here instead, and its caller sleeps on.
    fn wake(&mut self) {
        while let Some(xid) = self.core.poll_ready() {
            if self.prepared.contains_key(&xid) && self.post_prepared(xid) {
                continue;
            }
            if let Some(caller) = self.waiters.get(&xid) {
                caller.wake(&mut self.unpark);
            }
        }
    }

    /// Posts call `xid`'s prepared transmission if the core has it ready, on the connection
    /// and with the parameters it was prepared with: true if the caller need not wake. A
    /// prepared call that no longer fits is discarded, and its caller sends it itself.
    fn post_prepared(&mut self, xid: u32) -> bool {
        let Some((t, link)) = self.core.ready_transmit(xid) else { return false };
        let (prepared, on) = self.prepared.remove(&xid).expect("checked by the caller");
        if !fits(&prepared, &on, t, link) {
            // Its caller discards it (closing its windows may wait for Local Invalidates:
            // not with the lane's state locked) and sends the call itself.
            self.prepared.insert(xid, (prepared, on));
            return false;
        }
        let step = self.core.take_step(xid).expect("a transmission is ready");
        // Posted on whichever thread took the reply that freed the credit (often the
        // dispatcher, which serves every connection): a panic in code run while posting it (a
        // capture sink, before the backend gets it: nothing was posted) is caught here, and
        // the call's own caller, woken, sends it itself, meeting the panic only if it comes
        // again.
        // (The catch copies the call and its outcome through it: in the 64-caller load some
        // 170 instructions a call, 0.8 %, by callgrind.)
        let Some(posted) = crate::application::run(|| prepared.post(&on.conn)) else {
            log::warn!("a panic in code run while posting call {xid:#x}, marshaled ahead: its caller sends it itself");
            self.core.untake_step(xid, step);
            return false;
        };
        match posted {
            Ok(pending) => {
                self.core.handle_sent(pending.form(), pending.parts());
                self.posted.insert(xid, (pending, on));
                true
            }
            // A broken connection sends it again on the next one, as when its caller posts.
            Err(_) if on.conn.qp().state() == QpState::Error => true,
            // Anything else: its caller sends it itself, and meets the failure there.
            Err(_) => {
                // (Ready again, it comes out of `poll_ready` once more: a second wake-up, harmless.)
                self.core.untake_step(xid, step);
                false
            }
        }
    }

    /// Gives up the receiver's role (`leaving`: the caller that had it and is done): another
    /// blocking caller still waiting for its step takes it over (woken here); with none, a
    /// waiting async call's task is woken to receive and arm, unless one is armed; with
    /// neither, the next call takes it when it starts, or the dispatcher after [`LINGER`], or
    /// at once when async calls wait on a backend that cannot wake them (true then: the caller
    /// must wake the dispatcher).
    #[must_use]
    fn stop_receiving(&mut self, leaving: Option<u32>) -> bool {
        self.receiver = Receiver::Nobody;
        // Several callers wait: the dispatcher receives for them all, so that each is woken
        // once, by its reply, instead of once more to take the role.
        if self.dispatcher_wanted() {
            return true;
        }
        // None waiting, no search.
        let next = self
            .threads_wait()
            .then(|| {
                self.waiters
                    .iter()
                    .find(|(&x, w)| Some(x) != leaving && matches!(w, Waiter::Thread(_)) && !self.core.has_ready(x))
            })
            .flatten();
        match next {
            Some((_, caller)) => {
                caller.wake(&mut self.unpark);
                false
            }
            // Async calls wait: on a backend that wakes tasks, one of them receives next (it
            // takes what is there and arms the connection) unless one is armed already;
            // otherwise the dispatcher does.
            None if self.arms && self.armed_task.is_some() => false,
            None if self.arms => {
                let task = self.waiters.iter().find(|(&x, w)| matches!(w, Waiter::Task(_)) && !self.core.has_ready(x));
                if let Some((_, task)) = task {
                    task.wake(&mut self.unpark);
                }
                false
            }
            None => self.tasks > 0,
        }
    }

    /// How long a wait may last: until the core's next deadline (a call's, a reconnect's),
    /// at least 1 ms, at most [`IDLE_WAIT`] or the requester's timeout. No shorter: nothing
    /// is looked at on a tick, a thread waiting for a message is woken by it, and what else
    /// needs a waiting thread sooner wakes it (issue 25: no polling ticks).
    fn wait_for_deadline(&self) -> Duration {
        // At most the requester's timeout: a call started while the dispatcher waits for a
        // message (its caller parks, or its task waits) has its deadline looked at in time,
        // with nobody told.
        let most = IDLE_WAIT.min(self.core.timeout());
        let until = self.core.poll_timeout().map(|d| d.saturating_duration_since(Instant::now()));
        until.unwrap_or(most).min(most).max(Duration::from_millis(1))
    }

    /// Whether calls are in progress with nobody receiving for them, not even an async
    /// call's task armed on the connection: the dispatcher takes the role after [`GRACE`].
    fn unreceived(&self) -> bool {
        let tasks_armed = self.arms && self.tasks > 0 && !self.threads_wait();
        self.receiver == Receiver::Nobody && self.core.has_calls() && !tasks_armed
    }

    /// Whether an async call waits with nobody receiving for it: the dispatcher's to do, on a
    /// backend whose connections cannot wake a task ([`Shared::poll_step`]).
    fn tasks_unserved(&self) -> bool {
        self.tasks > 0 && self.receiver == Receiver::Nobody && !self.arms
    }

    /// Whether blocking callers wait: the waiters that are not async calls' tasks.
    fn threads_wait(&self) -> bool {
        self.waiters.len() > self.tasks
    }

    /// Whether the dispatcher should take the receiving role now: nobody has it and more
    /// than one blocking caller waits. A lone caller receives its own reply (no hand-off);
    /// with several, a caller that received would have to wake another to take the role on
    /// (a second wake-up for that caller's call), so the dispatcher receives and wakes each
    /// caller once, with its reply.
    fn dispatcher_wanted(&self) -> bool {
        self.receiver == Receiver::Nobody && self.several_threads_wait()
    }

    /// Whether more than one blocking caller waits.
    fn several_threads_wait(&self) -> bool {
        self.waiters.len() > self.tasks + 1
    }

    /// The threads a dispatcher's burst deferred, to wake at the next unlock: before one that
    /// does more than receive (serves a backward call, sends, releases memory), so that no
    /// caller whose reply came waits on that work.
    fn wake_deferred(&mut self) {
        self.unpark.append(&mut self.deferred);
    }

    /// A blocking caller or the dispatcher takes the receiving role, for every call: whether
    /// a task is armed is unknown once it leaves, so it then wakes one (`stop_receiving`).
    fn receive_for_all(&mut self, who: Receiver) {
        self.receiver = who;
        self.armed_task = None;
    }
}

pub(super) struct Shared<B: Backend> {
    backend: B,
    addr: String,
    cfg: ClientConfig,
    backchannel: Option<Handler>,
    st: Mutex<State<B>>,
    /// Asks the client's dispatcher for a turn of this lane: the core may have an action for
    /// it, or a call to receive for.
    poke: Arc<dispatch::Poke>,
    /// The waker of `poke`, armed on the connection while the dispatcher receives there.
    loop_waker: Waker,
    /// This lane's state, for the jobs it hands the workers.
    me: Weak<Shared<B>>,
    /// The client's workers, which serve its backward calls and make the keeper's calls and
    /// an async call's properties exchange (no thread until the first).
    workers: Arc<Workers<B>>,
    /// The protection domain of every connection this lane makes, from the first on: it
    /// outlives reconnects.
    pd: OnceLock<B::Pd>,
    /// The dispatcher's thread, once it runs.
    dispatcher: OnceLock<std::thread::ThreadId>,
}

/// One lane: its shared state, closed on drop (the client's dispatcher then leaves it).
pub(super) struct Lane<B: Backend> {
    shared: Arc<Shared<B>>,
}

/// How long calls in progress may go without anybody receiving for them before the
/// dispatcher does (a caller between two steps would otherwise take the role itself); not
/// while every waiting call is an async one armed on its connection.
const GRACE: Duration = Duration::from_millis(5);

/// How many more messages the dispatcher takes, of those already there, before it wakes the
/// callers of the replies it received ([`Shared::receive_more`]). Measured
/// (docs/benchmarks.md, "eighteenth session"): 64 blocking callers in process, 99k-121k
/// calls/s at 14.9-18.2 us of CPU a call waking each caller as its reply came; taking up to 8
/// more first 132k-133k at 13.5-13.7 us, 16 more 131k-133k at 13.6-13.9 us (4: 120k-129k;
/// 64: no better).
const DISPATCH_BURST: usize = 16;

/// How long a receiver or the dispatcher waits when the lane has no calls and the core no
/// deadline: an idle client polls nothing; a message, the connection going down, the
/// client's drop (which closes the connection) or a caller's notification ends the wait
/// sooner. While calls are in progress a wait lasts at most [`LINGER`], so that whatever
/// they leave to the dispatcher (an async call's properties exchange, a call whose step is
/// ready and not yet taken) is looked at again.
const IDLE_WAIT: Duration = Duration::from_secs(60);

impl<B: Backend + Clone> Lane<B> {
    /// Starts a lane per connection [`ClientConfig::connections`] asks for, and their
    /// dispatcher; with `eager`, each lane makes its first connection here (or fails with its
    /// error), before the dispatcher starts.
    ///
    /// One dispatcher thread serves every lane, unless the backend's connections cannot wake
    /// a waker (the dispatcher then waits for a lane's message on that lane's completion
    /// queue, a turn that may run long): each lane then has a dispatcher of its own, so that
    /// one lane's wait holds up no other. The client's workers (`workers.rs`) run what may
    /// take long off the dispatcher's thread and its callers': a backward call's handler,
    /// the keeper's calls, an async call's properties exchange.
    pub(super) fn start_all(
        backend: B,
        addr: &str,
        cfg: ClientConfig,
        backchannel: Option<Handler>,
        eager: bool,
    ) -> Result<(Vec<Self>, Dispatcher), ClientError> {
        let n = cfg.connections.max(1);
        let one_for_all = backend.wakes_wakers();
        let workers = Workers::new(workers::JOBS_A_LANE_MOST * n);
        let threads: Vec<Arc<OnceLock<Thread>>> =
            (0..if one_for_all { 1 } else { n }).map(|_| Arc::new(OnceLock::new())).collect();
        let lanes = (0..n)
            .map(|i| {
                let thread = &threads[if one_for_all { 0 } else { i }];
                let parts = (backchannel.clone(), workers.clone());
                Self::start(backend.clone(), addr, cfg.clone(), parts, eager, thread)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let shared = lanes.iter().map(|l| l.shared.clone());
        let groups = match one_for_all {
            true => vec![(shared.collect(), threads[0].clone())],
            false => shared.zip(threads).map(|(lane, thread)| (vec![lane], thread)).collect(),
        };
        let close_workers = Box::new(move || workers.close());
        Ok((lanes, Dispatcher::start(groups, close_workers)))
    }

    /// Makes a lane whose pokes unpark the dispatcher's `thread`, serving backward calls with
    /// the handler and workers of `backchannel`, if any; with `eager`, its first connection
    /// is made here.
    fn start(
        backend: B,
        addr: &str,
        cfg: ClientConfig,
        (backchannel, workers): (Option<Handler>, Arc<Workers<B>>),
        eager: bool,
        thread: &Arc<OnceLock<Thread>>,
    ) -> Result<Self, ClientError> {
        let mut core = connection::Connection::client(cfg.clone(), addr);
        // A client that answers the server's calls offers -07's reverse direction in the
        // Simple format, which is what its backchannel takes (section 5.2.5).
        if backchannel.is_some() {
            core.offer_reverse_direction(rpcrdma_v2::draft07::properties::ReverseDirection::Simple);
        }
        let poke = dispatch::Poke::new(thread.clone());
        let shared = Arc::new_cyclic(|me| Shared {
            backend,
            addr: addr.to_string(),
            cfg,
            backchannel,
            st: Mutex::new(State {
                core,
                waiters: own_keys::with_capacity(CALLS_AT_ONCE),
                tasks: 0,
                abandoned: XidMap::default(),
                properties_for: None,
                prepared: own_keys::with_capacity(CALLS_AT_ONCE),
                posted: own_keys::with_capacity(CALLS_AT_ONCE),
                receiver: Receiver::Nobody,
                last_active: Instant::now(),
                dispatcher_due: None,
                arms: false,
                armed_task: None,
                unpark: Vec::with_capacity(CALLS_AT_ONCE),
                hold_wakes: false,
                deferred: Vec::with_capacity(CALLS_AT_ONCE),
                backward_held: 0,
                backward_queue: std::collections::VecDeque::with_capacity(backward::BACKWARD_QUEUED_MOST),
                backward_dropped: 0,
                keeping: keeper::Keeping::new(),
                exchange_queued: false,
            }),
            poke: poke.clone(),
            loop_waker: dispatch::waker(&poke),
            me: me.clone(),
            workers,
            pd: OnceLock::new(),
            dispatcher: OnceLock::new(),
        });
        if eager {
            // The core's first action asks for the connection: made here, not by the
            // dispatcher.
            let first = shared.lock().core.poll_event();
            debug_assert!(matches!(first, Some(Event::Connect { .. })));
            if let Err(e) = shared.connect() {
                return Err(shared.lock().core.connect_failure(&e, 1));
            }
        }
        Ok(Lane { shared })
    }
}

/// Whether a call prepared ahead on connection `on` can go out as transmission `t` on `link`:
/// the same connection, the same parameters.
fn fits<B: Backend>(prepared: &PreparedCall<B>, on: &Arc<Link<B>>, t: &Transmit, link: &Arc<Link<B>>) -> bool {
    Arc::ptr_eq(on, link) && prepared.params() == CallParams::from(t)
}

/// Where a call's reply goes: reassembled into the caller's buffer, or left where it landed
/// ([`InPlaceReply`]).
pub(super) enum Sink<'r, B: Backend> {
    Copy(&'r mut Vec<u8>),
    InPlace(&'r mut Option<InPlaceReply<B>>),
}

/// A call's message as its caller gave it: borrowed (copied where a Read chunk needs it), or
/// lent to the call ([`send_call_lent`]), and handed back when the call's memory is released.
pub(super) enum Message<'m> {
    Borrowed(&'m [u8]),
    Lent(&'m mut Vec<u8>),
}

impl Message<'_> {
    /// The call message.
    fn bytes(&self) -> &[u8] {
        match self {
            Message::Borrowed(b) => b,
            Message::Lent(b) => b,
        }
    }

    /// Releases `sent`'s memory, taking a lent message back.
    fn abandon<B: Backend>(
        &mut self,
        sent: PendingCall<B>,
        conn: &Transport<B>,
        invalidated: Option<u32>,
    ) -> Result<(), DataPathError> {
        match self {
            Message::Borrowed(_) => sent.abandon(conn, invalidated),
            Message::Lent(buffer) => sent.abandon_lent(conn, invalidated, buffer),
        }
    }
}

impl<B: Backend> Shared<B> {
    /// Makes call `xid` (`message`) and waits for it, as [`Client::call_into`](super::Client::call_into) says.
    pub(super) fn call_into<U: UpperLayerBinding + ?Sized>(
        &self,
        xid: u32,
        mut message: Message<'_>,
        ulb: &U,
        mut reply: Sink<'_, B>,
    ) -> Result<(), ClientError> {
        let ready = self.begin(xid, Waiter::Thread(Sleeper::current()))?;
        let unwinding = EndOnUnwind { lane: self, xid };
        if let (Message::Borrowed(bytes), false) = (&message, ready) {
            self.prepare_if_waiting(xid, bytes, ulb);
        }
        let mut pending = None;
        let result = loop {
            let (step, handed) = self.wait_step(xid);
            if let Some(result) = self.take(xid, step, handed, &mut message, ulb, &mut pending, &mut reply) {
                break result;
            }
        };
        std::mem::forget(unwinding);
        self.end(xid, None);
        if result.is_ok() {
            self.exchange_properties();
        }
        result
    }

    /// A blocking call that must wait for a credit is marshaled now, on the connection and
    /// with the parameters it will most likely go out with ([`State::prepared`]).
    fn prepare_if_waiting<U: UpperLayerBinding + ?Sized>(&self, xid: u32, bytes: &[u8], ulb: &U) {
        let (link, params) = {
            let st = self.lock();
            if st.core.has_ready(xid) {
                return; // it goes out at once
            }
            let (Some(link), Some((version, credits, thresholds))) = (st.core.link(), st.core.next_transmit()) else {
                return; // no settled connection: nothing to guess from
            };
            // (Only a connection off -07 gives a guess: -07's credit word changes per Send.)
            let dialect = (version == Version::TWO).then_some(Dialect::Cel00);
            (
                link.clone(),
                CallParams {
                    version,
                    credits,
                    thresholds,
                    dialect,
                    remote_invalidation: false,
                    segments: SegmentLimits::NONE,
                },
            )
        };
        let Ok(prepared) = prepare_call(&link.conn, bytes, ulb, &params) else { return };
        let mut st = self.lock();
        st.prepared.insert(xid, (prepared, link));
        // Its transmission may have become ready meanwhile, its caller woken already: then
        // the caller finds it prepared; otherwise it is posted when it becomes ready.
    }

    /// Waits for the next step of `xid`, a blocking caller's call or RDMA_OPTIONAL,
    /// receiving on the connection meanwhile if nobody else does; with it, what another
    /// thread did for the call, taken under the same lock.
    fn wait_step(&self, xid: u32) -> (CallStep<Arc<Link<B>>>, Handed<B>) {
        // (The dispatcher makes no calls: it would wait for what only it receives. What
        // could call from a turn, a backward call's handler, the keeper, the properties
        // exchange, runs on the workers.)
        debug_assert!(!self.on_dispatcher(), "a call made on the dispatcher's thread");
        let mut st = self.lock();
        let me = match st.waiters.get(&xid) {
            Some(Waiter::Thread(me)) => me.clone(),
            _ => Sleeper::current(),
        };
        loop {
            if let Some(step) = st.core.take_step(xid) {
                let handed = (st.posted.remove(&xid), st.prepared.remove(&xid));
                return (step, handed);
            }
            // Receive ourselves if nobody does: most often what arrives is our reply.
            match (st.receiver, st.core.link().cloned()) {
                (Receiver::Nobody, Some(_)) if st.dispatcher_wanted() => {
                    drop(st);
                    self.poke.poke();
                    me.park();
                    st = self.lock();
                }
                (Receiver::Nobody, Some(link)) => {
                    st.receive_for_all(Receiver::Caller);
                    st = self.receive_once(st, &link);
                    if st.core.has_ready(xid) {
                        if st.stop_receiving(Some(xid)) {
                            self.poke.poke();
                        }
                    } else {
                        st.receiver = Receiver::Nobody;
                    }
                }
                // Woken by whoever makes our step ready, or hands us the receiver's
                // role; a spurious wake-up only looks again.
                _ => {
                    drop(st);
                    me.park();
                    st = self.lock();
                }
            }
        }
    }

    /// Starts call `xid`, whose caller `waiter` waits for its steps; true when its first
    /// step is ready already (a credit was free).
    pub(super) fn begin(&self, xid: u32, waiter: Waiter) -> Result<bool, ClientError> {
        let mut st = self.lock();
        let now = Instant::now();
        st.core.start_call(xid, now)?;
        st.last_active = now;
        st.tasks += usize::from(matches!(waiter, Waiter::Task(_)));
        st.waiters.insert(xid, waiter);
        st.wake();
        // A connection to make, or an async call to receive for, is the dispatcher's;
        // otherwise it need not wake.
        if st.core.has_event() || st.tasks_unserved() {
            self.poke.poke();
        }
        Ok(st.core.has_ready(xid))
    }

    /// Takes one step of call `xid`: sends a transmission (the previous one's memory given
    /// up), completes the reply, or fails. `Some` once the call is over. `handed` is what
    /// another thread did for the call (an async call's is always nothing): posted it (its
    /// reply or failure is this step), or not yet (prepared, and this step is its
    /// transmission, or its failure).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn take<U: UpperLayerBinding + ?Sized>(
        &self,
        xid: u32,
        step: CallStep<Arc<Link<B>>>,
        handed: Handed<B>,
        message: &mut Message<'_>,
        ulb: &U,
        pending: &mut Option<Sent<B>>,
        reply: &mut Sink<'_, B>,
    ) -> Option<Result<(), ClientError>> {
        let (posted, prepared) = handed;
        if let Some(sent) = posted {
            debug_assert!(pending.is_none(), "a call posted by another thread was not sent by its caller");
            *pending = Some(sent);
        }
        match step {
            CallStep::Transmit { transmit: t, link } => {
                if let Some((old, old_link)) = pending.take() {
                    // A retransmission: the old attempt's windows must not stay open.
                    let _ = message.abandon(old, &old_link.conn, None);
                }
                let params = CallParams::from(&t);
                let sent = match (message, prepared) {
                    (_, Some((p, on))) if fits(&p, &on, &t, &link) => p.post(&link.conn),
                    (message, prepared) => {
                        if let Some((p, on)) = prepared {
                            p.discard(&on.conn);
                        }
                        match message {
                            // A -07 call too large for the responder's Receive may continue
                            // across Sends, each counted now in the core (section 4.2.1).
                            Message::Borrowed(bytes) => {
                                let more = self.parts_on(&link);
                                send_call_continuing(&link.conn, bytes, ulb, &params, t.max_parts, more)
                            }
                            Message::Lent(buffer) => send_call_lent(&link.conn, buffer, ulb, &params),
                        }
                    }
                };
                match sent {
                    Ok(p) => {
                        self.lock().core.handle_sent(p.form(), p.parts());
                        *pending = Some((p, link));
                        None
                    }
                    // A broken connection comes back as a retransmission; anything else ends
                    // the call here (RFC 8166 section 4.5.4).
                    Err(_) if link.conn.qp().state() == QpState::Error => None,
                    Err(e) => {
                        let mut st = self.lock();
                        st.core.cancel(xid, Instant::now());
                        st.wake();
                        Some(Err(e.into()))
                    }
                }
            }
            CallStep::Reply { message: bytes, header, invalidated } => {
                debug_assert!(prepared.is_none(), "a reply answers a call posted");
                let (p, link) = pending.take().expect("a reply answers a transmitted call");
                // The header the core judged on the receiving thread, laid over the bytes
                // again: nothing parses the reply twice.
                let header = header.and_then(|h| h.attach(&bytes)).expect("a call's reply is judged by the core");
                let done = match (message, reply) {
                    (Message::Borrowed(call), Sink::InPlace(out)) => {
                        let parts = p.complete_in_place(&link.conn, call, &bytes, &header, invalidated, ulb);
                        return Some(match parts {
                            Ok(parts) => {
                                **out = Some(InPlaceReply::new(link.clone(), bytes, parts));
                                Ok(())
                            }
                            Err(e) => {
                                link.pool.recycle(bytes);
                                Err(e.into())
                            }
                        });
                    }
                    (Message::Lent(_), Sink::InPlace(_)) => unreachable!("an in-place call borrows its message"),
                    (Message::Borrowed(call), Sink::Copy(out)) => {
                        out.clear();
                        p.complete(&link.conn, call, &header, invalidated, ulb, out)
                    }
                    (Message::Lent(buffer), Sink::Copy(out)) => {
                        out.clear();
                        p.complete_lent(&link.conn, &header, invalidated, ulb, out, buffer)
                    }
                };
                let done = done.map_err(Into::into);
                // The message's buffer takes the next message received.
                link.pool.recycle(bytes);
                Some(done)
            }
            CallStep::Failed(e) => {
                if let Some((p, link)) = pending.take() {
                    let _ = message.abandon(p, &link.conn, None);
                }
                if let Some((p, on)) = prepared {
                    p.discard(&on.conn);
                }
                Some(Err(e.with_chunks(ulb, message.bytes())))
            }
        }
    }

    /// Where the parts after the first of a -07 call continued across Sends on `link` get
    /// their running total ([`Connection::take_call_parts`]): counted on that connection only,
    /// the core being perhaps on the next one by now.
    pub(super) fn parts_on<'a>(&'a self, link: &'a Arc<Link<B>>) -> impl FnOnce(u32) -> Option<u32> + 'a {
        move |n| {
            let mut st = self.lock();
            let here = st.core.link().is_some_and(|l| Arc::ptr_eq(l, link));
            if here {
                st.core.take_call_parts(n)
            } else {
                None
            }
        }
    }

    /// Call `xid` is over; or given up by a dropped [`AsyncCall`] (`abandoned`, with the
    /// transmission it sent, if any: that keeps its credit and its memory until its reply or
    /// its connection's loss).
    pub(super) fn end(&self, xid: u32, abandoned: Option<Option<Sent<B>>>) {
        let mut st = self.lock();
        if let Some(Waiter::Task(_)) = st.waiters.remove(&xid) {
            st.tasks -= 1;
        }
        // Its task was the one armed: it will not look again; another is woken to look and
        // arm in its place (`State::stop_receiving`, below).
        if st.armed_task == Some(xid) {
            st.armed_task = None;
        }
        let now = Instant::now();
        st.last_active = now;
        match abandoned {
            Some(sent) => {
                // A step handed out and not taken decides first: its reply arrived (whose
                // remote invalidation counts when the memory is released: invalidating that
                // window again would fail and take the connection down), or it failed, or a
                // retransmission is due that was never sent (the earlier attempt went out on
                // a connection since lost).
                let reply = match st.core.take_step(xid) {
                    Some(CallStep::Reply { invalidated, .. }) => {
                        st.core.finish_call(xid);
                        Some((xid, invalidated))
                    }
                    Some(CallStep::Failed(_)) => {
                        st.core.finish_call(xid);
                        None
                    }
                    Some(CallStep::Transmit { .. }) => {
                        st.core.abandon(xid, false, now);
                        None
                    }
                    None => {
                        st.core.abandon(xid, sent.is_some(), now);
                        None
                    }
                };
                if let Some(sent) = sent {
                    st.abandoned.insert(xid, sent);
                }
                // Released now unless the core keeps it waiting for its reply.
                st = self.release_abandoned(st, reply);
            }
            None => st.core.finish_call(xid),
        }
        st.wake();
        // The dispatcher asleep for longer than the lane's idle wait: told, so that it takes
        // the receiving role LINGER after the last call (once a quiet spell: it then looks
        // again within LINGER while calls keep ending).
        let linger_due = st.dispatcher_due.is_some_and(|due| due > now + LINGER);
        if (st.receiver == Receiver::Nobody && st.stop_receiving(None)) || linger_due {
            self.poke.poke();
        }
    }

    /// The next step of async call `xid`, or `None` after keeping `cx`'s waker for when it
    /// is ready.
    ///
    /// Run to completion on the executor's thread: when nobody receives, the poll itself takes
    /// what the completion queue holds (without waiting) and hands each reply to its task (a
    /// wake-up on this same thread), then arms the connection to wake this task when the next
    /// message arrives ([`Connection::arm_receive`]): no thread of the client's stands between
    /// the completion and the task. On a backend that cannot wake a waker the dispatcher
    /// receives for the tasks instead.
    ///
    /// A poll does not look for messages first when its step is ready already (its reply
    /// handed over by another task's look, which woke it) or when the task has just posted
    /// its call (`just_sent`: the poll before this one, in the same wake-up, took a
    /// `Transmit`), whose reply is rarely there yet: a look that finds nothing cost as much as
    /// the rest of the poll, and an async call made three. Nothing is left waiting by that:
    /// arming finds what has arrived ([`Arm::Waiting`]) and the poll then looks, and a task
    /// that was the one armed and ends arms another in its place (`Shared::end`).
    pub(super) fn poll_step(&self, xid: u32, cx: &Context<'_>, just_sent: bool) -> Option<CallStep<Arc<Link<B>>>> {
        let mut st = self.lock();
        if let Some(step) = st.core.take_step(xid) {
            return Some(step);
        }
        let mut looks = 0;
        loop {
            let mut down = false;
            // (Where the connection cannot wake a task, the look after sending stays: nothing
            // but the dispatcher would look otherwise.)
            if st.receiver == Receiver::Nobody && !(just_sent && looks == 0 && st.arms) {
                if let Some(link) = st.core.link().cloned() {
                    (st, down) = self.receive_for_tasks(st, &link);
                }
            }
            if let Some(step) = st.core.take_step(xid) {
                // (If this task was the one armed and its call now ends, `Shared::end` arms
                // another in its place.)
                return Some(step);
            }
            // The waker to use now: an executor may move the task between polls.
            if let Some(Waiter::Task(w)) = st.waiters.get_mut(&xid) {
                if !w.will_wake(cx.waker()) {
                    *w = cx.waker().clone();
                }
            }
            // A connection gone down queues nothing more to wake a waker with: its flushes are
            // taken by receiving until the link-down is reported.
            let arm = if down { Arm::Waiting } else { self.arm_receive(&mut st, cx.waker(), xid) };
            match arm {
                Arm::Armed => return None,
                // Something is there to receive; but while another thread polls, it may not be
                // reapable yet: after a few looks, let the executor run its other tasks and
                // come back (woken now).
                Arm::Waiting if looks < TASK_LOOKS_MOST => looks += 1,
                Arm::Waiting => {
                    cx.waker().wake_by_ref();
                    return None;
                }
                Arm::Unsupported => {
                    if st.tasks_unserved() {
                        self.poke.poke();
                    }
                    return None;
                }
            }
        }
    }

    /// Takes, as the receiver for the moment, up to [`TASK_DRAIN_MOST`] messages that are on
    /// `link` now, without waiting, and hands the role back; true if the connection is down
    /// (its flushes are still being taken: nothing more will be queued to wake a waker).
    fn receive_for_tasks<'a>(&'a self, mut st: Locked<'a, B>, link: &Arc<Link<B>>) -> (Locked<'a, B>, bool) {
        st.receiver = Receiver::Caller;
        let mut down = false;
        for _ in 0..TASK_DRAIN_MOST {
            let (guard, came, was_down) = self.receive_within(st, link, Duration::ZERO);
            st = guard;
            down = was_down;
            if !came {
                break;
            }
        }
        // A blocking caller waiting for the role takes it; tasks arm for themselves.
        if st.threads_wait() {
            if st.stop_receiving(None) {
                self.poke.poke();
            }
        } else {
            st.receiver = Receiver::Nobody;
        }
        (st, down)
    }

    /// Arms the current connection to wake `waker`, async call `xid`'s task, when a message
    /// arrives while nobody receives; [`Arm::Armed`] too while somebody does (it hands each
    /// task its reply, and wakes one when it leaves the role: [`State::stop_receiving`]).
    fn arm_receive(&self, st: &mut State<B>, waker: &Waker, xid: u32) -> Arm {
        if !st.arms {
            return Arm::Unsupported;
        }
        match (st.receiver, st.core.link()) {
            (Receiver::Nobody, Some(link)) => {
                let arm = link.conn.arm_receive(waker);
                if arm == Arm::Armed {
                    st.armed_task = Some(xid);
                }
                arm
            }
            // No connection: the dispatcher makes one, and each waiting call's step (its
            // transmission) wakes its task. Somebody receiving: it wakes the task, and whoever
            // takes the role after it ([`State::stop_receiving`]); the task armed before may
            // have been fired by what that receiver takes, so none counts as armed now: the
            // receiver, or the end of its call, wakes one to arm.
            (Receiver::Caller, _) => {
                st.armed_task = None;
                Arm::Armed
            }
            _ => Arm::Armed,
        }
    }

    /// The version the current connection settled on, if it has.
    pub(super) fn version(&self) -> Option<Version> {
        self.lock().core.version()
    }

    /// The current connection's Version Two dialect, once settled on Version Two.
    pub(super) fn dialect(&self) -> Option<Dialect> {
        self.lock().core.dialect()
    }

    /// The responder's -07 properties on the current connection, once stated.
    pub(super) fn draft07_peer_properties(&self) -> Option<rpcrdma_v2::draft07::properties::Properties> {
        self.lock().core.draft07_peer_properties().cloned()
    }

    /// The current connection's inline thresholds, once its version is settled.
    pub(super) fn thresholds(&self) -> Option<InlineThresholds> {
        self.lock().core.thresholds()
    }

    /// What this client has sent so far.
    pub(super) fn stats(&self) -> ClientStats {
        let st = self.lock();
        ClientStats { backward_dropped: st.backward_dropped, ..st.core.stats() }
    }

    /// How this lane's connections ended, oldest first.
    pub(super) fn ended(&self) -> Vec<Ended> {
        self.lock().core.ended().cloned().collect()
    }

    /// The credit window of the current connection.
    pub(super) fn window(&self) -> u32 {
        self.lock().core.window()
    }

    /// What the client learned about responders (which lack Version Two).
    pub(super) fn memory(&self) -> crate::memory::PeerMemory {
        self.lock().core.memory().clone()
    }
}

/// A lane is used through its shared state, which its dispatcher uses too.
impl<B: Backend> std::ops::Deref for Lane<B> {
    type Target = Shared<B>;
    fn deref(&self) -> &Shared<B> {
        &self.shared
    }
}

/// Ends a blocking call whose caller's thread unwinds through [`Shared::call_into`]: its
/// binding panicked, as the call was marshaled or its reply reassembled (the binding is the
/// caller's own code, and its panic goes on to the caller). Whichever step the call was in, a
/// transmission handed out and never sent is withdrawn (its credit returns) and a reply taken
/// is done with, so that the lane's other and later calls go on. No memory of the call's stays
/// open to the responder: the binding is asked about the call before anything of it is posted,
/// and about its reply after its windows are invalidated ([`PendingCall::complete`]).
///
/// [`PendingCall::complete`]: crate::datapath::PendingCall::complete
struct EndOnUnwind<'a, B: Backend> {
    lane: &'a Shared<B>,
    xid: u32,
}

impl<B: Backend> Drop for EndOnUnwind<'_, B> {
    fn drop(&mut self) {
        {
            let mut st = self.lane.lock();
            st.core.cancel(self.xid, Instant::now());
            st.wake();
        }
        self.lane.end(self.xid, None);
    }
}

impl<B: Backend> Drop for Lane<B> {
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.core.close();
            st.wake();
            // The dispatcher may be waiting for a message with no deadline: closing the
            // connection ends that wait (its Receives are flushed).
            if let Some(link) = st.core.link() {
                link.conn.close("the client was dropped");
            }
        }
        self.shared.poke.poke();
    }
}

impl<B: Backend> Shared<B> {
    /// The dispatcher, receiving for several blocking callers, takes up to [`DISPATCH_BURST`]
    /// more messages of those already there (without waiting) before the callers of the
    /// replies are woken, together, once the state is unlocked. Woken one at a time, as each
    /// reply came, each caller was woken by a system call after which the kernel most often
    /// ran that caller at once in the dispatcher's place (wake-up preemption: 80 % of the
    /// dispatcher's thread switches under 64 callers), the dispatcher coming back later to
    /// receive the next reply: a thread switch and a lap of its loop per reply. Only the
    /// unlock that receives the next message defers the wakes (`State::hold_wakes`; no other
    /// thread's unlock wakes them meanwhile, which measured slower); one that does more (a
    /// backward call served, an answer sent, abandoned calls' memory released) wakes everyone
    /// gathered so far first (`State::wake_deferred`), so that no caller whose reply came
    /// waits on other work.
    fn receive_more<'a>(&'a self, mut st: Locked<'a, B>, link: &Arc<Link<B>>) -> Locked<'a, B> {
        for _ in 0..DISPATCH_BURST {
            if st.receiver != Receiver::Dispatcher || !st.several_threads_wait() {
                break;
            }
            st.hold_wakes = true;
            let (next, came, _) = self.receive_within(st, link, Duration::ZERO);
            st = next;
            if !came {
                break;
            }
        }
        st.wake_deferred();
        st
    }

    /// Whether this is the dispatcher's thread.
    fn on_dispatcher(&self) -> bool {
        self.dispatcher.get() == Some(&std::thread::current().id())
    }

    /// Receives one message on `link` (or waits up to a tick for one) as the one receiver,
    /// with the state unlocked meanwhile, and hands it to the core: a reply wakes its caller, a
    /// backward call is answered here. Also tells the core when the connection is down (once
    /// every message that arrived before is handled) and reads the clock.
    fn receive_once<'a>(&'a self, st: Locked<'a, B>, link: &Arc<Link<B>>) -> Locked<'a, B> {
        let wait = st.wait_for_deadline();
        self.receive_within(st, link, wait).0
    }

    /// [`Shared::receive_once`], waiting at most `wait` (zero: only what is there now) for
    /// the message; whether one came, and whether the connection was down before.
    fn receive_within<'a>(
        &'a self,
        st: Locked<'a, B>,
        link: &Arc<Link<B>>,
        wait: Duration,
    ) -> (Locked<'a, B>, bool, bool) {
        // A lone call's receiver polls before it sleeps (ClientConfig::poll_before_wait): with
        // more calls in progress, their callers and the server want the CPU it would spin on.
        let poll_first = if st.waiters.len() <= 1 { self.cfg.poll_before_wait } else { Duration::ZERO };
        drop(st);
        // Read before receiving: once the queue pair is down, the messages that arrived
        // before it went down are already complete and come out first, so the link is given
        // up only when none is left: a reply or an RDMA_ERR_VERS (draft 5.2: lost right after
        // it means no Version Two) received just before a disconnect counts. Those are
        // there already: once down, they are reaped without waiting for more.
        let was_down = link.conn.qp().state() == QpState::Error;
        let wait = if was_down { Duration::from_millis(1) } else { wait };
        let got = link.pool.receive_polling(&link.conn, wait, poll_first);
        let drained = matches!(got, Err(DataPathError::Timeout { .. }));
        let came = got.is_ok();
        let now = Instant::now();
        let mut st = self.lock();
        let mut reply = None;
        if let Ok(m) = got {
            match st.core.handle_receive(&m.bytes, Arrival::default(), now) {
                Received::Reply { xid } => {
                    st.core.deliver(xid, m.bytes, m.invalidated_rkey);
                    reply = Some((xid, m.invalidated_rkey));
                }
                Received::Call { header, params } => {
                    st.wake_deferred();
                    let header = header.detach();
                    st = self.hand_on_backward(st, link, m.bytes, header, params);
                }
                // Its effect, if any, is in the calls' steps; an answer the core queued goes
                // below. (Rewritten is a server's connection's: never here.)
                Received::PeerError { .. } | Received::Nothing(_) | Received::Answered | Received::Rewritten => {
                    link.pool.recycle(m.bytes)
                }
            }
        }
        // What the core sends of its own, each waited for before the next message is read; a
        // failure is the connection's, seen below as its state.
        st = self.send_queued(st, link);
        // The core may have moved on to another connection meanwhile.
        let current = st.core.link().is_some_and(|l| Arc::ptr_eq(l, link));
        if was_down && drained && current {
            let ended = link.conn.ended().unwrap_or(Ended::Lost { first_error: None });
            st.core.handle_link_down(ended, now);
            // (A keeper's turn: the lane has no connection now.)
            self.poke.poke();
        } else if !was_down {
            st.core.handle_timeout(now);
        }
        st = self.release_abandoned(st, reply);
        st.wake();
        // Actions (a reconnect after the link went down) are the dispatcher's.
        if st.core.has_event() {
            self.poke.poke();
        }
        (st, came, was_down)
    }

    /// Releases the memory of abandoned calls the core has ended (their reply arrived, or it
    /// failed them: their windows are invalidated, with the state unlocked meanwhile) or whose
    /// connection is lost (nothing to invalidate). `reply` is the call whose reply was just
    /// received and the rkey that reply's Send with Invalidate killed (RFC 8797 section 4.1).
    fn release_abandoned<'a>(&'a self, mut st: Locked<'a, B>, reply: Option<(u32, Option<u32>)>) -> Locked<'a, B> {
        if st.abandoned.is_empty() {
            return st;
        }
        let ended: Vec<u32> = st.abandoned.keys().copied().filter(|&x| !st.core.is_abandoned(x)).collect();
        if ended.is_empty() {
            return st;
        }
        let released: Vec<_> = ended.into_iter().filter_map(|x| st.abandoned.remove(&x).map(|p| (x, p))).collect();
        st.wake_deferred();
        drop(st);
        for (xid, (p, link)) in released {
            let invalidated = reply.filter(|&(x, _)| x == xid).and_then(|(_, rkey)| rkey);
            let _ = p.abandon(&link.conn, invalidated);
        }
        self.lock()
    }

    /// One connection attempt, reported to the core; its error is also returned.
    fn connect(&self) -> Result<(), Arc<DataPathError>> {
        let cfg = &self.cfg;
        let (ours, pdata) = thresholds::what_to_send(cfg.private_data, cfg.foreign_private_data);
        log::info!("connecting to {} (attempt {})", self.addr, self.lock().core.connect_attempt());
        let attempt = (|| -> Result<(Link<B>, Vec<u8>), DataPathError> {
            // One protection domain for every connection of this lane, made with the first:
            // what is registered in it can outlive a reconnect.
            let pd = match self.pd.get() {
                Some(pd) => pd.clone(),
                None => {
                    let pd = self.backend.alloc_pd()?;
                    self.pd.get_or_init(|| pd).clone()
                }
            };
            let (qp, accepted) = self.backend.connect(&pd, &self.addr, &pdata, cfg.caps, cfg.connect_timeout)?;
            let conn = Transport::new(pd, qp, cfg.requester.timeout);
            // Our Receives hold what a responder may send us.
            let size = thresholds::receive_size_stating(ours, cfg.requester.versions.1, cfg.properties.as_ref());
            let pool = ReceivePool::new(&conn, cfg.requester.credits as usize + backchannel::SLOTS, size)?;
            Ok((Link { conn, pool }, accepted))
        })();
        let now = Instant::now();
        let mut st = self.lock();
        let result = match attempt {
            Ok((link, accepted)) => {
                // Whether its tasks can be woken by the connection itself ([`Shared::poll_step`]):
                // asked once, with a waker that does nothing (the first task's arm replaces it).
                st.arms = link.conn.arm_receive(Waker::noop()) != Arm::Unsupported;
                st.core.handle_connected(Arc::new(link), ours, &accepted, now);
                Ok(())
            }
            Err(e) => {
                let e = Arc::new(e);
                st.core.handle_connect_failed(e.clone(), now);
                Err(e)
            }
        };
        st.wake();
        result
    }
}
