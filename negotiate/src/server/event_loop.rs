//! The server's event loop: one set of threads serving every connection whose queue pair can
//! wake it ([`QueuePair::arm_waker`]: all three backends), in a leader/follower pattern; a
//! connection whose backend cannot would get a loop of its own, the same code waiting on its
//! one completion queue.
//!
//! Run to completion, as eRPC runs a short handler on the thread that polls its completions:
//! the thread holding the loop's role takes the next connection with something to receive,
//! receives one message, judges it with that connection's [`Connection`] core, and when it is
//! a call serves it itself (fetches its chunks, runs the handler, sends the reply) and goes on
//! to the next message, of that connection or another, queued meanwhile: no thread hands a
//! call to another, and nobody waits for a wake-up on the common path. A connection with
//! nothing left is armed: its next completion puts it back on the ready queue and wakes the
//! role's holder if it sleeps. Only when a call runs longer than
//! [`ServerLimits::run_inline_for`] does a waiting thread take the role over, so that a long
//! handler holds up neither the calls behind it nor the other connections; further calls are
//! then served beside it (up to [`ServerLimits::calls_in_progress`] per connection), and a
//! call of a connection with one that ran long still in progress hands the role on at once. A
//! call whose arguments come by RDMA Read hands the role on at once when other messages wait:
//! over TCP a Read is a network round trip (not where the backend does a Read as it is posted,
//! [`Backend::rdma_at_post`]: in process; nor when every segment came offered with the call,
//! [`QueuePair::holds_offered`]). The threads beyond the one waiting for the role are spare:
//! they wait apart, told of no call's start.
//!
//! Timers come from the connections' cores (`poll_timeout`, the idle deadline) and the
//! loop's bookkeeping (calls in progress, the last answered): the role's holder sleeps until
//! the earliest, with no polling tick.
//!
//! [`Connection`]: crate::connection::Connection
//! [`QueuePair::arm_waker`]: rpcrdma_verbs::QueuePair::arm_waker
//! [`QueuePair::holds_offered`]: rpcrdma_verbs::QueuePair::holds_offered
//! [`ServerLimits::run_inline_for`]: crate::limits::ServerLimits::run_inline_for
//! [`ServerLimits::calls_in_progress`]: crate::limits::ServerLimits::calls_in_progress
//! [`Backend::rdma_at_post`]: rpcrdma_verbs::Backend::rdma_at_post

use std::collections::VecDeque;
use std::sync::Weak;
use std::task::{Wake, Waker};

use super::accept::{accept, Core, LoopConnection};
use super::per_host::HostSlot;
use super::*;
use crate::connection::{Arrival, Received, Transmission, TransmissionKind};
use crate::datapath::send_answer;
use crate::own_keys::IdMap;
use crate::responder::Behind;
use rpcrdma_v1::rt::List;
use rpcrdma_v1::xdr::XdrReadChunk;
use rpcrdma_v2::draft07::properties::ReverseDirection;
use rpcrdma_verbs::{Arm, PostBatch, Readiness, RemoteBuf};

/// The shortest [`ServerLimits::run_inline_for`] for which a thread waiting for the role
/// looks again on its own while the holder is awake, rather than being told at each call's
/// start ([`Loop::take_role`]).
const LOOK_AGAIN_AT_LEAST: Duration = Duration::from_micros(100);

/// How long a thread the loop no longer needs (one more than the one waiting for the role)
/// waits before it leaves.
const KEEP_ALIVE: Duration = Duration::from_secs(2);
/// The most replies a burst holds (`PostBatch`) before they are written: held work requests
/// keep their send-queue slots, and a reply may take several (its Writes and its Send).
const BURST_MOST: usize = 8;

/// The longest the role's holder sleeps before it looks at the idle rule again.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);
/// How long a connection's ending waits for a thread polling its completion queue to note
/// what it reaped ([`Transport::settle_reaped`]).
const SETTLE_LIMIT: Duration = Duration::from_millis(100);

/// One event loop and the connections it serves (see the [module documentation](self)).
pub(super) struct Loop<B: Backend, U: ?Sized> {
    cfg: Arc<ServerConfig>,
    ulb: Arc<U>,
    handler: Arc<dyn Handler>,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    /// Whether its connections wake it ([`Loop::arm`]); otherwise it has one connection, and
    /// the role's holder waits on that connection's completion queue.
    arms: bool,
    /// Whether its backend carries an RDMA Read out as it is posted ([`Backend::rdma_at_post`]):
    /// then a call's Read chunks hold the role's holder up no longer than its handler does.
    rdma_at_post: bool,
    /// Its backend's readiness loop, which the role's holder drives while it has nothing to
    /// serve ([`Backend::readiness`]: TCP): the frame that makes a connection ready is then
    /// read by the thread that serves it, not by one that wakes it.
    readiness: Option<Readiness>,
    st: Mutex<State<B>>,
    /// For the threads waiting for the role but the spare ones (with `st`): it is free, a call
    /// is being served alone, or the loop ended.
    turn: Condvar,
    /// For the spare threads (with `st`, [`State::spares`]): told only when no other thread
    /// is left to wait on `turn`, when the role is freed with none other waiting, when its
    /// holder leaves the loop, or when the loop ended.
    spare: Condvar,
    /// For the role's holder waiting for a connection to be ready (with `st`).
    work: Condvar,
    /// How many connections wait on the ready queue: looked at without the lock while the
    /// role's holder polls before it sleeps.
    ready_len: AtomicUsize,
    me: Weak<Self>,
}

/// How the role's holder learns that a connection is ready.
#[derive(Clone, Copy)]
enum HolderWake {
    /// It is awake and looks at the ready queue before it waits.
    Nobody,
    /// It sleeps on `work`.
    Sleeper,
    /// It drives the backend's readiness loop.
    Driver,
}

/// A connection of the loop, by its id there.
type Member<B> = (u64, Arc<LoopConnection<B>>);

/// One connection's place in the loop.
struct Slot<B: Backend> {
    connection: Arc<LoopConnection<B>>,
    /// Calls taken and not yet answered.
    in_progress: usize,
    /// When the last call in progress was answered: a call that ran long is activity too.
    last_finished: Instant,
    /// On the ready queue.
    queued: bool,
    /// Left off the ready queue while it has its most calls in progress; queued again when
    /// one ends.
    held: bool,
    /// Of the calls in progress, those that ran long: a waiting thread took the role over
    /// from the thread serving them ([`Loop::take_role`]).
    ran_long: usize,
}

struct State<B: Backend> {
    conns: IdMap<Slot<B>>,
    ready: VecDeque<u64>,
    next_id: u64,
    /// Connections being accepted for it ([`Loop::accepting`]): counted as its own.
    accepting: usize,
    /// Spawned and not yet ended.
    threads: usize,
    /// Waiting for the role (or spawned to): a call arriving finds one of them to take the
    /// role while it is served.
    waiting: usize,
    /// Of those, the ones waiting without a deadline (when they began, no call was served
    /// alone and the holder slept): [`Loop::begin_alone`] tells them.
    untimed: usize,
    /// Of the threads waiting for the role (`waiting`), the spare ones, never untimed: more
    /// than the one waiting thread the loop needs, each waiting
    /// on `spare` (not `turn`) to be needed again or to leave after [`KEEP_ALIVE`]. Told of
    /// no call's start: waking one at each call's start (as `turn` is told) was most of the
    /// server's thread switches over TCP.
    spares: usize,
    /// Calls taken and not yet answered whose connection has left the loop (their handlers
    /// still run): they hold threads as the connections' calls do.
    orphans: usize,
    /// The role's holder sleeps on `work`: only then does a connection made ready tell it
    /// (a notification is a system call).
    sleeping: bool,
    /// The role's holder drives the backend's readiness loop while it waits: a connection
    /// made ready on another thread interrupts it.
    driving: bool,
    /// When the idle rule is next looked at, busy or not.
    next_idle_check: Instant,
    /// The role is free: the next waiting thread takes it.
    free: bool,
    /// The role's holder is serving a call itself, since when, under which ticket: it kept
    /// the role (the calls behind then need no thread hand-off); a waiting thread takes the
    /// role over once this is [`ServerLimits::run_inline_for`] old.
    alone: Option<(Instant, u64)>,
    /// The connection whose call is served alone (none while an answer is sent alone): a
    /// takeover counts that call as one that ran long ([`Slot::ran_long`]).
    alone_call: Option<u64>,
    /// The connection whose replies the role's holder may be holding for a burst
    /// (`PostBatch`): whoever takes the role over from it writes them.
    held_on: Option<u64>,
    next_ticket: u64,
    /// The loop is done (the server stops, or a loop of one connection lost it): every thread
    /// leaves.
    ended: bool,
    handles: Vec<JoinHandle<()>>,
}

impl<B: Backend> State<B> {
    /// Whether what was begun alone under `ticket` ([`Loop::begin_alone`]) still holds the
    /// role: nobody took it over meanwhile.
    fn alone_under(&self, ticket: u64) -> bool {
        self.alone.is_some_and(|(_, t)| t == ticket)
    }
}

/// A thread of the loop on its way out, even by a panic (none of the handler's or binding's
/// gets here: they are caught and answered SYSTEM_ERR; a capture sink's, or a bug, can):
/// counted out, and the role freed if it still holds it, so that the other connections are
/// still served, and a thread takes its place if none is left. One that unwinds serving a
/// connection ends that connection, since no answer to what it had in hand can come now
/// (RFC 8166 section 4.5.4: a reply that cannot be sent is signaled by closing the
/// connection), and gives its call's place in progress back.
struct Leaving<'a, B: Backend, U: UpperLayerBinding + Send + Sync + ?Sized + 'static> {
    lp: &'a Loop<B, U>,
    /// The thread holds the role ...
    holding: bool,
    /// ... under this ticket, if it began something alone ([`Loop::begin_alone`]): then it
    /// still holds it only if nobody took it over meanwhile.
    ticket: Option<u64>,
    /// What it is serving.
    in_hand: InHand,
}

/// What a loop thread is serving, for [`Leaving`] to end should the thread unwind.
#[derive(Debug, Clone, Copy)]
enum InHand {
    Nothing,
    /// The connection it receives on, or whose message it handles.
    Connection(u64),
    /// A call of that connection, counted in progress ([`Loop::take_on`] until
    /// [`Loop::call_done`]).
    Call(u64),
}

impl<B: Backend, U: UpperLayerBinding + Send + Sync + ?Sized + 'static> Leaving<'_, B, U> {
    /// Says what the thread holds and serves from now on.
    fn holds(&mut self, holding: bool, ticket: Option<u64>, in_hand: InHand) {
        (self.holding, self.ticket, self.in_hand) = (holding, ticket, in_hand);
    }
}

impl<B: Backend, U: UpperLayerBinding + Send + Sync + ?Sized + 'static> Drop for Leaving<'_, B, U> {
    fn drop(&mut self) {
        let lp = self.lp;
        let mut st = lock(&lp.st);
        st.threads -= 1;
        let in_hand = if std::thread::panicking() { self.in_hand } else { InHand::Nothing };
        if let InHand::Call(id) = in_hand {
            match st.conns.get_mut(&id) {
                Some(slot) => slot.in_progress -= 1,
                None => st.orphans -= 1,
            }
        }
        let still_holding = self.ticket.is_none_or(|t| st.alone_under(t));
        if self.holding && still_holding {
            st.free = true;
            st.alone = None;
            st.alone_call = None;
            lp.turn.notify_all();
            lp.spare.notify_all();
        }
        let dying_with = match in_hand {
            InHand::Connection(id) | InHand::Call(id) => st.conns.get(&id).map(|slot| (id, slot.connection.clone())),
            InHand::Nothing => None,
        };
        if std::thread::panicking() {
            // It may have been the loop's one thread (none waits for the role before a first
            // call): one takes its place, or the other connections wait for the next accept.
            lp.keep_one_waiting(&mut st);
        }
        drop(st);
        if let Some((id, connection)) = dying_with {
            lock(&lp.shared.stats).loop_panics += 1;
            // (Closing runs code not ours too, a logger's: a second panic here would abort.)
            let why = "a thread of the server's loop panicked serving this connection";
            if crate::application::run(|| lp.end(id, &connection, why.to_string())).is_none() {
                log::error!("closing connection {id} after a loop thread's panic panicked as well");
            }
        }
    }
}

/// Wakes a loop for one of its connections: puts it on the ready queue.
struct ConnWaker<B: Backend, U: ?Sized> {
    lp: Weak<Loop<B, U>>,
    id: u64,
}

impl<B: Backend, U: UpperLayerBinding + Send + Sync + ?Sized + 'static> Wake for ConnWaker<B, U> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(lp) = self.lp.upgrade() {
            // Notified once the lock is released: notified under it, the role's holder woke
            // only to block on the lock this thread still held (a quarter of a thread switch
            // per call under load).
            let wake = lp.push_ready(&mut lock(&lp.st), self.id);
            lp.wake_holder(wake);
        }
    }
}

impl<B: Backend, U: UpperLayerBinding + Send + Sync + ?Sized + 'static> Loop<B, U> {
    /// A loop with no connection yet, of `backend`'s connections: they wake it when
    /// `backend` [wakes wakers](Backend::wakes_wakers) (else it is a loop of one connection).
    pub(super) fn new(
        cfg: Arc<ServerConfig>,
        ulb: Arc<U>,
        handler: Arc<dyn Handler>,
        stop: Arc<AtomicBool>,
        shared: Arc<Shared>,
        backend: &B,
    ) -> Arc<Self> {
        let (arms, rdma_at_post) = (backend.wakes_wakers(), backend.rdma_at_post());
        let readiness = if arms { backend.readiness() } else { None };
        Arc::new_cyclic(|me| Loop {
            cfg,
            ulb,
            handler,
            stop,
            shared,
            arms,
            rdma_at_post,
            readiness,
            st: Mutex::new(State {
                conns: IdMap::default(),
                ready: VecDeque::new(),
                next_id: 0,
                accepting: 0,
                threads: 0,
                waiting: 0,
                untimed: 0,
                spares: 0,
                orphans: 0,
                sleeping: false,
                driving: false,
                next_idle_check: Instant::now(),
                free: true,
                alone: None,
                alone_call: None,
                held_on: None,
                next_ticket: 0,
                ended: false,
                handles: Vec::new(),
            }),
            turn: Condvar::new(),
            spare: Condvar::new(),
            work: Condvar::new(),
            ready_len: AtomicUsize::new(0),
            me: me.clone(),
        })
    }

    /// Serves `connection` from now on: it is ready at once (its first messages may be there);
    /// the loop's first thread starts with its first connection.
    pub(super) fn add(&self, connection: LoopConnection<B>) {
        self.accepted(Some(connection));
    }

    /// A connection is being accepted for the loop, on a thread of its own: it counts as the
    /// loop's ([`Loop::live`]) until [`Loop::accepted`] says how the accept went.
    pub(super) fn accepting(&self) {
        lock(&self.st).accepting += 1;
    }

    /// An accept [`Loop::accepting`] announced is over: the connection joins the loop, or,
    /// `None`, the accept failed.
    pub(super) fn accepted(&self, connection: Option<LoopConnection<B>>) {
        let mut st = lock(&self.st);
        st.accepting = st.accepting.saturating_sub(1);
        let Some(connection) = connection else { return };
        if st.ended {
            // Accepted as the server stopped: closed at once.
            drop(st);
            connection.close("the server stopped");
            self.record_end(&connection, "the server stopped".to_string());
            return;
        }
        let id = st.next_id;
        st.next_id += 1;
        if let Some(me) = self.me.upgrade() {
            let waker = Waker::from(Arc::new(ConnWaker { lp: Arc::downgrade(&me), id }));
            connection.conn.tell_when_blocked(waker.clone());
            let _ = connection.waker.set(waker);
        }
        let connection = Arc::new(connection);
        // A -07 reply's Sends beyond its first take their credit from the core
        // (draft-ietf-nfsv4-rpcrdma-version-two-07 sections 4.2.1 and 6.6.4).
        let weak = Arc::downgrade(&connection);
        let most = self.cfg.responder.max_reply_parts;
        connection.conn.continue_with(Box::new(move |deadline| weak.upgrade()?.part_credit(deadline)), most);
        lock(&connection.core).count_draft07_sends_when_posted();
        let slot =
            Slot { connection, in_progress: 0, last_finished: Instant::now(), queued: false, held: false, ran_long: 0 };
        st.conns.insert(id, slot);
        st.next_idle_check =
            st.next_idle_check.min(crate::limits::deadline(Instant::now(), self.cfg.limits.idle_timeout));
        self.enqueue(&mut st, id);
        if st.threads == 0 {
            self.spawn(&mut st);
        }
    }

    /// A loop of one connection, `req`'s: its first thread accepts it, then serves it (the
    /// accept may wait for the connection to be established: rdma-core).
    pub(super) fn accept_on_own_thread(&self, backend: B, req: B::Request, slot: Option<HostSlot>)
    where
        B: Clone,
    {
        let Some(me) = self.me.upgrade() else { return };
        let mut st = lock(&self.st);
        let spawned = std::thread::Builder::new().name("negotiate-conn".into()).spawn(move || {
            match accept(&backend, req, slot, &me.cfg, &me.shared) {
                Some(connection) => me.add(connection),
                None => lock(&me.st).ended = true,
            }
            me.run();
        });
        // A thread that could not be spawned dropped its request: rejected.
        match spawned {
            Ok(h) => {
                st.threads += 1;
                st.waiting += 1;
                st.handles.push(h);
            }
            Err(_) => st.ended = true,
        }
    }

    /// Connections served now, and being accepted for it.
    pub(super) fn live(&self) -> usize {
        let st = lock(&self.st);
        st.conns.len() + st.accepting
    }

    /// Whether every thread has left (a loop of one connection, after it ended).
    pub(super) fn is_finished(&self) -> bool {
        let st = lock(&self.st);
        st.ended && st.threads == 0
    }

    /// The server stops: every connection is closed (which cuts every wait but a handler's),
    /// and every thread is told to leave ([`Loop::join`] waits for them).
    pub(super) fn close_all(&self) {
        let open: Vec<_> = {
            let mut st = lock(&self.st);
            st.ended = true;
            self.wake_all_waiting();
            self.work.notify_all();
            if let (true, Some(r)) = (st.driving, self.readiness) {
                r.interrupt();
            }
            st.conns.values().map(|s| s.connection.clone()).collect()
        };
        // (Not with the state locked: a close flushes the Receives, whose completions wake
        // the loop, which locks it.)
        for connection in open {
            connection.close("the server stopped");
        }
    }

    /// Returns once every thread of the loop has left ([`Loop::close_all`] first).
    pub(super) fn join(&self) {
        // Until none is left: a thread may start another while it still runs (one more to
        // wait for the role), after the handles were taken.
        loop {
            let handles = std::mem::take(&mut lock(&self.st).handles);
            if handles.is_empty() {
                break;
            }
            for h in handles {
                let _ = h.join();
            }
        }
        let ended: Vec<_> = lock(&self.st).conns.drain().map(|(_, s)| s.connection).collect();
        for connection in ended {
            self.record_end(&connection, "the server stopped".to_string());
        }
    }

    /// Puts connection `id` on the ready queue, once, and wakes the role's holder.
    fn enqueue(&self, st: &mut State<B>, id: u64) {
        let wake = self.push_ready(st, id);
        self.wake_holder(wake);
    }

    /// Puts connection `id` on the ready queue, once: says how the role's holder must be told
    /// ([`Loop::wake_holder`]).
    #[must_use]
    fn push_ready(&self, st: &mut State<B>, id: u64) -> HolderWake {
        // (A loop of one connection has no queue: its role's holder waits on the connection
        // itself, or, with its most calls in progress, to be told.)
        if self.arms {
            let Some(slot) = st.conns.get_mut(&id) else { return HolderWake::Nobody };
            if slot.queued {
                return HolderWake::Nobody;
            }
            slot.queued = true;
            st.ready.push_back(id);
            self.ready_len.store(st.ready.len(), Ordering::SeqCst);
        }
        if st.sleeping {
            HolderWake::Sleeper
        } else if st.driving {
            HolderWake::Driver
        } else {
            HolderWake::Nobody
        }
    }

    /// Tells the role's holder what [`Loop::push_ready`] said (the connection waker does so
    /// once the loop's lock is released; `enqueue`, on the rarer paths, with it held).
    fn wake_holder(&self, wake: HolderWake) {
        match (wake, self.readiness) {
            (HolderWake::Sleeper, _) => self.work.notify_one(),
            (HolderWake::Driver, Some(r)) => r.interrupt(),
            _ => {}
        }
    }

    /// Starts one more thread.
    fn spawn(&self, st: &mut State<B>) {
        let Some(me) = self.me.upgrade() else { return };
        let spawned = std::thread::Builder::new().name("negotiate-call".into()).spawn(move || me.run());
        // One that could not be spawned leaves the calls to the threads there are.
        if let Ok(h) = spawned {
            st.threads += 1;
            st.waiting += 1;
            // Threads that left (not needed after KEEP_ALIVE) are joined, not let go: one whose
            // main function returned may still be exiting.
            for done in st.handles.extract_if(.., |h| h.is_finished()) {
                let _ = done.join();
            }
            st.handles.push(h);
        }
    }

    /// One thread's part: take the role, serve what the connections send, and again, until
    /// the loop ends.
    fn run(&self) {
        // This thread's call and reply buffers, kept from one call to the next.
        let mut buffers = CallBuffers::with_budget(&self.shared.budget).sharing(&self.shared.host_memory);
        let mut holding = false;
        let mut leaving = Leaving { lp: self, holding: false, ticket: None, in_hand: InHand::Nothing };
        // This thread polled for work just now (`polled_for_more`) and found none: it does
        // not poll again before it sleeps.
        let mut polled = false;
        // While a connection's next messages are waiting behind the call served, the replies
        // this thread sends it are held and written together when none waits (over TCP one
        // write for the burst: `rpcrdma_verbs::PostBatch`). A reply held behind a call that
        // runs long goes when a thread takes the role over (`take_role`).
        let mut burst: Option<(u64, PostBatch)> = None;
        let mut burst_len = 0;
        loop {
            if !holding {
                // (Waiting for the role: what this thread holds goes first.)
                burst = None;
                if !self.take_role() {
                    break;
                }
            }
            holding = true;
            leaving.holds(true, None, InHand::Nothing);
            // A loop of one connection may wait in `next_ready` under its lock (for a call
            // to end): nothing is held then.
            if !self.arms {
                burst = None;
            }
            let Some((id, connection)) = self.next_ready(std::mem::take(&mut polled)) else {
                let mut st = lock(&self.st);
                st.ended = true;
                self.wake_all_waiting();
                break;
            };
            if burst.as_ref().is_some_and(|(of, _)| *of != id) {
                burst = None;
            }
            leaving.in_hand = InHand::Connection(id);
            // A connection that ended (or with its most calls in progress: held) has nothing
            // to receive now.
            if connection.conn.qp().state() != QpState::Ready {
                self.end(id, &connection, "the queue pair went down".to_string());
                continue;
            }
            let wait = if self.arms {
                // This thread looks itself: nothing is to tell it of what it finds.
                if let Some(waker) = connection.waker.get() {
                    connection.conn.disarm_receive(waker);
                }
                Duration::ZERO
            } else {
                self.poll_before_wait(|| connection.conn.receives_waiting() > 0);
                self.until_idle(id)
            };
            let mut received = connection.pool.receive_within(&connection.conn, wait);
            if matches!(received, Err(DataPathError::Timeout { .. })) && self.arms && self.readiness.is_none() {
                match self.polled_for_more(&connection) {
                    Some(true) => received = connection.pool.receive_within(&connection.conn, Duration::ZERO),
                    Some(false) => {}
                    None => polled = true,
                }
            }
            let m = match received {
                Ok(m) => m,
                Err(DataPathError::Timeout { .. }) if self.arms => {
                    burst = None;
                    self.arm(id, &connection);
                    continue;
                }
                Err(DataPathError::Timeout { .. }) => {
                    if self.is_idle(id) {
                        lock(&self.shared.stats).refused.idle += 1;
                        self.end(id, &connection, format!("idle for {:?}", self.cfg.limits.idle_timeout));
                    }
                    continue;
                }
                Err(e) => {
                    self.end(id, &connection, format!("receiving: {e}"));
                    continue;
                }
            };
            let mut core = lock(&connection.core);
            let mut m = m;
            let mut judged = self.judge(&connection, &mut core, &m.bytes);
            // The memory of a rewritten call, counted against the server's budget while it is
            // served (its size is within ResponderConfig::max_continued and the header limits):
            // the connection's own charge covers the next one assembled meanwhile. One that
            // does not fit the budget is refused below, not served (`over_budget`).
            let mut _rewritten_charge = None;
            // And against its host's share of the call memory, as a call's chunks are.
            let mut _rewritten_share = None;
            let mut over_budget = false;
            if judged == Received::Rewritten {
                // A -07 continued or external call, written into a buffer of its own: served
                // from that, which takes the Receive's place here (the Receive's buffer goes
                // back to the pool now).
                judged = match core.take_rewritten() {
                    Some(bytes) => {
                        let shared = &self.shared;
                        let (budget, most) = (Charge::empty(&shared.budget), self.cfg.limits.memory_per_host);
                        _rewritten_share = connection
                            .host
                            .map(|host| shared.host_memory.take_memory(host, bytes.len(), most, &budget));
                        if !matches!(_rewritten_share, Some(None)) {
                            _rewritten_charge = shared.budget.try_charge(bytes.len());
                        }
                        over_budget = _rewritten_charge.is_none();
                        connection.pool.recycle(std::mem::replace(&mut m.bytes, bytes));
                        self.judge_rewritten(&connection, &mut core, &m.bytes)
                    }
                    None => Received::Nothing(None),
                };
            }
            // What the core sends of its own before a call or reply is handled (a -07 server's
            // RDMA2_CONNPROP_FINAL once the connection speaks -07) is posted, or queued, before
            // anything the message prompts (a reply waiting for credit with the stream held may
            // still overtake a queued one: the draft asks no order). Answers to anything else
            // go below, while the role may be handed on.
            if matches!(judged, Received::Call { .. } | Received::Reply { .. }) {
                if let Some(first) = core.poll_transmit() {
                    drop(core);
                    if let Err(why) = self.transmit(&connection, Some(first)) {
                        connection.pool.recycle(m.bytes);
                        self.end(id, &connection, why);
                        continue;
                    }
                    core = lock(&connection.core);
                }
            }
            // The queued -07 answers go now if the message judged opened the window for them
            // (not with the core locked: taking a total locks it).
            let flush = || connection.conn.flush_answers();
            let (header, params) = match judged {
                Received::Call { header, params } => (header, params),
                // A reply to our backward call, or the answer to our RDMA_OPTIONAL: for
                // whoever waits on its XID (one that answers nothing of ours is dropped there).
                Received::Reply { xid } => {
                    let header = core.take_judged_reply(xid);
                    drop(core);
                    flush();
                    connection.back.handle_reply(xid, m.bytes, header);
                    self.requeue(id);
                    continue;
                }
                other => {
                    let first = core.poll_transmit();
                    // The client's -07 properties, once its CONNPROP_FINAL came, for
                    // `Server::peers` (its host authentication for the application to judge).
                    // And the reverse direction it offers, for backward calls from now on.
                    if let Some(stated) = core.responder().draft07_peer_properties() {
                        let mut peer = lock(&connection.peer);
                        if peer.draft07_properties.is_none() {
                            peer.draft07_properties = Some(stated.clone());
                            connection.back.handle_reverse_offered(stated.reverse_direction);
                        }
                    }
                    drop(core);
                    flush();
                    // Sending an answer waits for its Send to complete, which a peer that
                    // does not read holds up: like a call, it hands the role on if it takes
                    // long.
                    // (A -07 answer never waits here for the payload stream or credit: it is
                    // queued, `Transport::answer_draft07`.)
                    let ticket = Some(self.begin_alone(&mut lock(&self.st)));
                    leaving.ticket = ticket;
                    let answered = self.answer(&connection, other, first);
                    connection.pool.recycle(m.bytes);
                    match answered {
                        Ok(()) => self.requeue(id),
                        Err(why) => self.end(id, &connection, why),
                    }
                    holding = self.end_alone(&mut lock(&self.st), ticket);
                    leaving.holds(holding, None, InHand::Nothing);
                    continue;
                }
            };
            self.take_call(&connection, &core, &header);
            drop(core);
            flush();
            // This thread keeps the role while it serves, unless the call runs long, or waits
            // on the network for its Read chunks while other messages wait (over TCP an RDMA
            // Read is a round trip: keeping the role through it held the calls behind up,
            // 16 thread switches a call against 10 handing it on). Where a Read is done as it
            // is posted (in process), handing the role on only cost a switch: 2.7 a call in
            // the 64 x 10,000 load against 1.9 keeping it (fourteenth session).
            // A call whose Read chunks the requester offered with it (over TCP,
            // `QueuePair::offer_read`) has them here already: no round trip to step aside for,
            // and its reply joins the burst's.
            let more = connection.conn.receives_waiting() > 0;
            let keep = self.rdma_at_post || !more || all_offered(connection.conn.qp(), header.read_list());
            let (ticket, may_hold) = self.take_on(id, keep, more);
            // Handed on unless kept under the ticket; the call counted in progress.
            leaving.holds(ticket.is_some(), ticket, InHand::Call(id));
            let answering = || {
                connection.unanswered.fetch_sub(1, Ordering::SeqCst);
            };
            // The header the core judged, read in place: nothing parses the message again.
            let conn = &connection.conn;
            // (A rewritten call over the budget: RDMA2_ERR_SYSTEM, the responder's own
            // shortage, -07 section 7.4.1; counted in `refused.memory` by the budget.)
            if over_budget || self.lost_before(&connection, &header, &params) {
                answering();
                let refusal = super::failure::unservable(header.xid(), &params, None);
                match send_answer(conn, refusal.as_bytes(), true) {
                    Ok(()) if over_budget => lock(&self.shared.stats).errors_sent += 1,
                    Ok(()) => lock(&self.shared.stats).lost_replies_answered += 1,
                    Err(e) => connection.close(format_args!("answering call {:#x}: {e}", header.xid())),
                }
                connection.pool.recycle(m.bytes);
                holding = self.call_done(id, ticket);
                leaving.holds(holding, None, InHand::Nothing);
                continue;
            }
            // Held only where a thread would take the role over, and write them, should this
            // call run long; a burst of at most BURST_MOST replies (each keeps its send-queue
            // slots until written).
            if !may_hold || burst_len >= BURST_MOST {
                burst = None;
            }
            if may_hold && burst.is_none() {
                burst = Some((id, PostBatch::open()));
                burst_len = 0;
            }
            burst_len += 1;
            buffers.share_for(connection.host, self.cfg.limits.memory_per_host);
            match serve_call(conn, &header, &params, &*self.ulb, &*self.handler, &mut buffers, answering) {
                Ok(answered @ Answered::CallOnly(..)) => {
                    self.count(answered);
                    // No reply carries a new total for it: the requester's window may need a
                    // GRANT (section 4.2.1.1), sent as any -07 answer is.
                    if lock(&connection.core).draft07_served_without_reply(&params) {
                        if let Err(why) = self.transmit(&connection, None) {
                            connection.close(why);
                        }
                    }
                }
                Ok(answered) => self.count(answered),
                // RFC 8166 section 4.5.4: a reply that could not be sent is signaled by closing
                // the connection; whoever receives on it next sees it down and ends it.
                Err(e) => {
                    // -07 section 7.3: its retransmission on the next connection is answered
                    // RDMA2_ERROR rather than served again.
                    if let Some(host) = connection.host.filter(|_| params.draft07) {
                        let first = match connection.conn.ended() {
                            Some(Ended::Lost { first_error }) => first_error,
                            _ => None,
                        };
                        let call = (header.xid(), super::lost_replies::fingerprint(&header));
                        if let Some(c) = lock(&self.shared.lost).remember(host, call, &e, first) {
                            log::warn!(
                                "call {:#x} from {host:?}: no reply is possible after work request {} ({:?}) \
                                 failed: {:?}; its retransmission will be answered RDMA2_ERR_SYSTEM",
                                header.xid(),
                                c.wr_id,
                                c.opcode,
                                c.status
                            );
                        }
                    }
                    connection.close(format_args!("serving call {:#x}: {e}", header.xid()))
                }
            }
            // The burst's last reply goes now (and those held before it).
            if connection.conn.receives_waiting() == 0 {
                burst = None;
            }
            // The message's buffer takes the next message received.
            connection.pool.recycle(m.bytes);
            holding = self.call_done(id, ticket);
            leaving.holds(holding, None, InHand::Nothing);
        }
        leaving.holding = false;
    }

    /// The role holder's wait for a connection with something to receive: the next on the
    /// ready queue (a loop of one connection: that one, whose completion queue it then waits
    /// on); `None` once the loop ends. Drives the backend's readiness loop while it waits
    /// where the backend lends it (TCP), and otherwise polls for
    /// [`ServerLimits::poll_before_wait`] before it sleeps (unless it has `polled` just now);
    /// closes the connections found idle meanwhile.
    fn next_ready(&self, mut polled: bool) -> Option<Member<B>> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            let mut st = lock(&self.st);
            if st.ended {
                return None;
            }
            // The idle rule, looked at when due even while the loop is busy: a silent
            // connection must not wait for the others to fall quiet.
            if self.arms && Instant::now() >= st.next_idle_check {
                let (wait, idle) = self.idle_scan(&st);
                st.next_idle_check = Instant::now() + wait;
                if !idle.is_empty() {
                    drop(st);
                    self.close_idle(idle);
                    continue;
                }
            }
            if !self.arms {
                // Its one connection, unless it has its most calls in progress: then the
                // end of one (`call_done`) tells.
                let (&id, slot) = st.conns.iter_mut().next()?;
                if !slot.connection.is_full(slot.in_progress) {
                    return Some((id, slot.connection.clone()));
                }
                slot.held = true;
                st.sleeping = true;
                let mut st = self.work.wait(st).unwrap_or_else(PoisonError::into_inner);
                st.sleeping = false;
                continue;
            }
            if let Some(next) = self.pop_ready(&mut st) {
                return Some(next);
            }
            let wait = st.next_idle_check.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            if let Some(r) = self.readiness {
                // Waits by reading the connections' frames itself: the one that makes a
                // connection ready wakes nobody.
                st.driving = true;
                drop(st);
                // (Atomics only, looked at between the loop's rounds: the loop's lock would be
                // taken once a round. The server sets `stop` before it ends the loop. SeqCst
                // with the store in `push_ready`: the interrupt that follows it is ordered by
                // the reactor's own SeqCst lobby count.)
                r.drive(wait, &mut || self.ready_len.load(Ordering::SeqCst) > 0 || self.stop.load(Ordering::Relaxed));
                lock(&self.st).driving = false;
                continue;
            }
            drop(st);
            // (Not again if this thread polled its last connection just now and found
            // nothing: that poll was this wait's.)
            if !std::mem::take(&mut polled) {
                self.poll_before_wait(|| self.ready_len.load(Ordering::Acquire) > 0);
            }
            // What this thread holds goes before it sleeps, not under the loop's lock
            // (writing may end a connection, whose waker takes that lock). (Driving the
            // readiness loop, above, hands held posts over itself.)
            rpcrdma_verbs::flush_held();
            let mut st = lock(&self.st);
            if !st.ready.is_empty() || st.ended || self.stop.load(Ordering::Relaxed) {
                continue;
            }
            let wait = st.next_idle_check.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            st.sleeping = true;
            let mut st = self.work.wait_timeout(st, wait).unwrap_or_else(PoisonError::into_inner).0;
            st.sleeping = false;
        }
    }

    fn pop_ready(&self, st: &mut State<B>) -> Option<Member<B>> {
        while let Some(id) = st.ready.pop_front() {
            self.ready_len.store(st.ready.len(), Ordering::SeqCst);
            if let Some(slot) = st.conns.get_mut(&id) {
                slot.queued = false;
                if slot.connection.is_full(slot.in_progress) {
                    slot.held = true;
                    continue;
                }
                return Some((id, slot.connection.clone()));
            }
        }
        None
    }

    /// The connections idle now, and how long until the next would be.
    fn idle_scan(&self, st: &State<B>) -> (Duration, Vec<Member<B>>) {
        let now = Instant::now();
        let mut wait = LONGEST_WAIT;
        let mut idle = Vec::new();
        for (&id, slot) in st.conns.iter() {
            match self.idle_in(slot, now) {
                Some(after) => wait = wait.min(after),
                None => idle.push((id, slot.connection.clone())),
            }
        }
        (wait.clamp(Duration::from_millis(1), LONGEST_WAIT), idle)
    }

    /// Closes idle connections (RFC 8166 leaves it to the server; ServerLimits::idle_timeout):
    /// the flushed Receives wake the loop, which then ends each.
    fn close_idle(&self, idle: Vec<Member<B>>) {
        for (id, connection) in idle {
            lock(&self.shared.stats).refused.idle += 1;
            connection.close(format!("idle for {:?}", self.cfg.limits.idle_timeout));
            let mut st = lock(&self.st);
            self.enqueue(&mut st, id);
        }
    }

    /// How long until `slot`'s connection would be idle if nothing arrives, `None` if it is
    /// now: no message for the idle timeout, and no call in progress nor answered within it.
    /// A call being served keeps it from being idle until it ends.
    fn idle_in(&self, slot: &Slot<B>, now: Instant) -> Option<Duration> {
        let timeout = self.cfg.limits.idle_timeout;
        if slot.in_progress > 0 {
            return Some(timeout.min(LONGEST_WAIT));
        }
        let after_last_call = slot.last_finished.checked_add(timeout).map(|t| t.saturating_duration_since(now));
        let after_last_message = slot.connection.idle_at().map(|t| t.saturating_duration_since(now));
        let wait = after_last_call.unwrap_or(LONGEST_WAIT).max(after_last_message.unwrap_or(LONGEST_WAIT));
        (!wait.is_zero()).then_some(wait)
    }

    /// A loop of one connection: how long its wait for a message may last.
    fn until_idle(&self, id: u64) -> Duration {
        let st = lock(&self.st);
        let wait = st.conns.get(&id).map_or(Some(Duration::ZERO), |slot| self.idle_in(slot, Instant::now()));
        wait.unwrap_or(Duration::ZERO).clamp(Duration::from_millis(1), LONGEST_WAIT)
    }

    /// A loop of one connection: whether its connection is idle now.
    fn is_idle(&self, id: u64) -> bool {
        let st = lock(&self.st);
        st.conns.get(&id).is_some_and(|slot| self.idle_in(slot, Instant::now()).is_none())
    }

    /// Looks for work (`arrived`: the ready queue, or a loop of one connection's completion
    /// queue) for up to [`ServerLimits::poll_before_wait`] while there is none, so that a
    /// message arriving meanwhile is taken without the thread having slept.
    /// Whether something arrived (or the loop stops) before the time was up.
    fn poll_before_wait(&self, mut arrived: impl FnMut() -> bool) -> bool {
        let stop = || self.stop.load(Ordering::Relaxed);
        crate::spin::poll_for(self.cfg.limits.poll_before_wait, || (arrived() || stop()).then_some(())).is_some()
    }

    /// Whether a message came on `connection`, the one this thread just served, while it
    /// polled its completion queue for up to [`ServerLimits::poll_before_wait`] with nothing
    /// on the ready queue. A connection armed instead is told of its next message by a wake
    /// from the peer's post, which queues it, on the peer's thread, under the loop's lock
    /// (eRPC's loop polls its queues; in process the 64-byte round trip's quiet rounds took
    /// 0.3 to 0.4 us less, docs/benchmarks.md, twenty-fifth session). Not where the backend has a readiness loop
    /// to drive (TCP), whose completion queue fills only while that loop is driven.
    /// `None` when nothing came in that time.
    fn polled_for_more(&self, connection: &LoopConnection<B>) -> Option<bool> {
        let mut came = false;
        let found = self.poll_before_wait(|| {
            came = connection.conn.receives_waiting() > 0;
            came || self.ready_len.load(Ordering::Acquire) > 0
        });
        found.then_some(came)
    }

    /// Arms connection `id` to wake the loop at its next completion; one whose messages are
    /// there already goes back on the ready queue.
    fn arm(&self, id: u64, connection: &LoopConnection<B>) {
        let Some(waker) = connection.waker.get() else { return self.requeue(id) };
        match connection.conn.arm_receive(waker) {
            // (A queue pair that went down before it was armed has no completion left to
            // wake anyone: looked at again, it ends.)
            Arm::Armed if connection.conn.qp().state() == QpState::Ready => {}
            Arm::Armed | Arm::Waiting | Arm::Unsupported => self.requeue(id),
        }
    }

    /// Connection `id` may have more to receive: back on the ready queue (behind the others).
    fn requeue(&self, id: u64) {
        if self.arms {
            let mut st = lock(&self.st);
            self.enqueue(&mut st, id);
        }
    }

    /// Judges a received message once, with the connection's core.
    fn judge<'m>(&self, connection: &LoopConnection<B>, core: &mut Core, bytes: &'m [u8]) -> Received<'m> {
        // Behind this message: the ones received and not judged, and the calls being
        // served, all in flight for the requester.
        let behind = self.behind(connection);
        // The answer to our own RDMA_OPTIONAL (Backchannel::send_option), or on -07 the reply
        // to our reverse-direction call, if one waits.
        let arrival = Arrival { behind, awaiting: connection.back.awaiting_answer() };
        let received = core.handle_receive(bytes, arrival, Instant::now());
        connection.set_idle_at(core.poll_timeout());
        // A GRANT may have opened the window a held reply waits for (a queued answer's is
        // looked at once the core is unlocked: `Loop::run`).
        connection.credit_may_have_changed();
        // The stats are shared with the threads serving calls: locked only when there is
        // something to add (overruns are cumulative, kept as the most seen).
        let (overruns, over_limits) = (core.responder().overruns(), core.new_over_limits());
        if overruns > 0 || over_limits > 0 {
            let mut s = lock(&self.shared.stats);
            s.credit_overruns = s.credit_overruns.max(overruns);
            s.refused.over_limits += over_limits;
        }
        received
    }

    /// Judges a call [`Connection::take_rewritten`] gave, as [`Loop::judge`] judges a
    /// message.
    fn judge_rewritten<'m>(&self, connection: &LoopConnection<B>, core: &mut Core, bytes: &'m [u8]) -> Received<'m> {
        core.handle_rewritten(bytes, Arrival { behind: self.behind(connection), awaiting: None })
    }

    /// What is in flight for the requester besides the message judged: the messages received
    /// and not yet judged, and the calls being served.
    fn behind(&self, connection: &LoopConnection<B>) -> Behind {
        Behind { unjudged: connection.conn.receives_waiting(), serving: connection.unanswered.load(Ordering::SeqCst) }
    }

    /// A call was judged: it is in flight until answered, and the backward direction follows
    /// the version and thresholds of the latest forward call.
    fn take_call(&self, connection: &LoopConnection<B>, core: &Core, header: &Header<'_>) {
        let mut peer = lock(&connection.peer);
        peer.credits_requested = header.credit();
        let version = header.version();
        let responder = core.responder();
        // Said once per connection and version, at its first call: what the client's is said
        // when it settles.
        if peer.versions_seen.insert(version.wire()) {
            let from = super::peer_name(peer.address);
            let dialect = responder.dialect().filter(|_| version == Version::TWO);
            log::info!(
                "the connection from {from} speaks version {}{}: inline thresholds {:?}, the requester states {:?}",
                version.wire(),
                dialect.map_or_else(String::new, |d| format!(" ({d:?})")),
                responder.advertised().for_version(version),
                responder.stated().requester,
            );
        }
        drop(peer);
        connection.back.handle_forward_call(Forward {
            version,
            thresholds: responder.advertised().for_version(version),
            backward_credits: responder.stated().requester.and_then(|p| p.backward_credits),
            draft07: responder.dialect() == Some(rpcrdma_v2::dialect::Dialect::Ietf07),
            reverse: responder.draft07_peer_properties().map_or(ReverseDirection::None, |p| p.reverse_direction),
        });
        connection.unanswered.fetch_add(1, Ordering::SeqCst);
    }

    /// Answers a message that is not a call nor a reply, sending what the core queued for it
    /// (`first` taken already, the rest after it); `Err` with the reason to close the
    /// connection.
    fn answer(
        &self,
        connection: &LoopConnection<B>,
        received: Received<'_>,
        first: Option<Transmission>,
    ) -> Result<(), String> {
        // The client's RDMA_ERROR ends the backward call it names at once (RFC 8166 section
        // 4.5); one that names no call of ours is dropped.
        if let Received::PeerError { xid, error } = received {
            log::warn!("the client answered backward call {xid:#010x} with RDMA_ERROR {error:?}");
            connection.back.handle_peer_error(xid, error);
        }
        self.transmit(connection, first)
    }

    /// Sends what `connection`'s core has of its own (`first`, taken already, then each
    /// [`Connection::poll_transmit`](crate::connection::Connection::poll_transmit) gives), each
    /// Send waited for, and reported, before the
    /// next is taken: a client flooding RDMA_OPTIONAL messages has at most one answer
    /// outstanding. Not with the core locked (taking a -07 total locks it). On a -07
    /// connection each message keeps its running credit total in order with the replies'
    /// (`answer_draft07`, which queues it behind a continued reply, or until the window has
    /// room, rather than wait: this thread must go on reading, for the GRANT such a reply
    /// waits for). `Err` with the reason to close the connection.
    fn transmit(&self, connection: &LoopConnection<B>, first: Option<Transmission>) -> Result<(), String> {
        let mut next = first;
        while let Some(t) = next {
            let sent = match t.draft07 {
                true => connection.conn.answer_draft07(&t.bytes),
                false => send_answer(&connection.conn, &t.bytes, false),
            };
            let mut core = lock(&connection.core);
            core.handle_completion(t.id, sent.as_ref().map(drop));
            sent.map_err(|e| format!("sending {}: {e}", t.kind.describe()))?;
            if let TransmissionKind::Error { xid, code } = t.kind {
                // (Why was said where it was decided: the responder's "refusing message".)
                log::debug!("answered message {xid:#010x} with RDMA_ERROR code {code}");
                lock(&self.shared.stats).errors_sent += 1;
            }
            next = core.poll_transmit();
        }
        Ok(())
    }

    /// Connection `id` ends, for `why`: its backward call waiting, if any, fails, and it
    /// leaves the loop (a loop of one connection ends with it).
    fn end(&self, id: u64, connection: &LoopConnection<B>, why: String) {
        connection.close(&why);
        let removed = {
            let mut st = lock(&self.st);
            let removed = st.conns.remove(&id);
            st.orphans += removed.as_ref().map_or(0, |slot| slot.in_progress);
            st.ready.retain(|&r| r != id);
            self.ready_len.store(st.ready.len(), Ordering::SeqCst);
            if !self.arms {
                st.ended = true;
                self.wake_all_waiting();
            }
            removed
        };
        if let Some(slot) = removed {
            self.record_end(&slot.connection, why);
        }
    }

    /// Whether `call` on a -07 connection is the retransmission of a transaction whose reply
    /// an RDMA operational error lost on the requester's earlier connection (section 7.3):
    /// answered with RDMA2_ERROR, not served. Once only: it is forgotten here.
    fn lost_before(&self, connection: &LoopConnection<B>, call: &Header<'_>, params: &ReplyParams) -> bool {
        let Some(host) = connection.host.filter(|_| params.draft07) else { return false };
        lock(&self.shared.lost).take(host, call.xid(), || super::lost_replies::fingerprint(call))
    }

    /// Records how a connection ended in its [`Peer`]; `why` if its queue pair is not down
    /// yet (a close on TCP takes effect on the backend's own thread).
    fn record_end(&self, connection: &LoopConnection<B>, why: String) {
        // What the completion queue still holds is reaped first, and what a waiter polling it
        // holds is noted: the first error among it (a reply's Send, cut by the retry
        // timeout) is how it ended.
        connection.conn.settle_reaped(SETTLE_LIMIT);
        let ended = connection.conn.ended().unwrap_or(Ended::Closed(why));
        let mut peer = lock(&connection.peer);
        let from = super::peer_name(peer.address);
        // A peer's ordinary close is no news; anything that failed first is.
        if ended.is_orderly() {
            log::info!("the connection from {from} ended: {ended}");
        } else {
            log::warn!("the connection from {from} ended: {ended}");
        }
        peer.ended = Some(ended);
        drop(peer);
        // Forgotten beyond the records kept now, not at the next connect request: the
        // acceptor sleeps until one comes.
        self.shared.prune(self.cfg.limits.closed_peers_kept);
    }

    /// Waits for the role: free, or held by a thread serving a call alone for
    /// [`ServerLimits::run_inline_for`]; false once the loop has ended. While a call is served
    /// alone the wait has a deadline, so that it notices the call running long without being
    /// told; so has it while the holder is awake between calls (it looks again after
    /// [`ServerLimits::run_inline_for`], when a call begun meanwhile could first be overdue);
    /// otherwise, the holder asleep, it waits to be told (the role freed, or a call begun
    /// alone).
    fn take_role(&self) -> bool {
        let mut st = lock(&self.st);
        loop {
            if st.ended {
                st.waiting -= 1;
                return false;
            }
            let now = Instant::now();
            // (A `run_inline_for` too long to add to an instant: never overdue.)
            let overdue = st.alone.and_then(|(since, _)| since.checked_add(self.cfg.limits.run_inline_for));
            if st.free || overdue.is_some_and(|t| t <= now) {
                let taken_over = !st.free;
                st.free = false;
                st.alone = None;
                st.waiting -= 1;
                // The thread waiting on `turn` took the role: a spare one takes its place.
                if st.waiting > 0 && st.waiting == st.spares {
                    self.spare.notify_one();
                }
                if let Some(slot) = st.alone_call.take().and_then(|id| st.conns.get_mut(&id)) {
                    slot.ran_long += usize::from(taken_over);
                }
                if taken_over {
                    // The holder runs long: replies it holds from its burst go now rather
                    // than wait for it (a post from any thread writes a connection's queue).
                    let held = st.held_on.take().and_then(|id| st.conns.get(&id)).map(|s| s.connection.clone());
                    drop(st);
                    if let Some(c) = held {
                        c.conn.qp().flush_posts();
                    }
                }
                return true;
            }
            if let Some(until) = overdue {
                st = self.turn.wait_timeout(st, until - now).unwrap_or_else(PoisonError::into_inner).0;
            } else if st.waiting - st.spares > 1 && st.threads > 2 {
                // One thread waiting for the role is enough: one more, that served a call
                // beside a long one, is spare: it leaves if it is still not needed after
                // KEEP_ALIVE (the loop keeps the threads its calls have needed lately, not the
                // most they ever did, and does not make and end threads as calls come and go).
                st.spares += 1;
                let (guard, waited) = self.spare.wait_timeout(st, KEEP_ALIVE).unwrap_or_else(PoisonError::into_inner);
                st = guard;
                st.spares -= 1;
                if waited.timed_out() && st.waiting - st.spares > 1 && st.threads > 2 && !st.free && !st.ended {
                    st.waiting -= 1;
                    return false;
                }
            } else if self.arms && !st.sleeping && !st.driving && self.cfg.limits.run_inline_for >= LOOK_AGAIN_AT_LEAST
            {
                // The holder is awake between calls: it begins the next one soon, and a
                // call begun after this look is overdue no sooner than `run_inline_for`
                // from now. Looking again then costs this thread one wake-up a
                // `run_inline_for` instead of one a call (`begin_alone` tells only the
                // untimed, and nearly every call begins between two others). (A shorter
                // `run_inline_for` would have it wake nearly as often as calls come, and
                // contend for the loop's lock: told at each call's start instead.)
                st = self
                    .turn
                    .wait_timeout(st, self.cfg.limits.run_inline_for)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            } else {
                st.untimed += 1;
                st = self.turn.wait(st).unwrap_or_else(PoisonError::into_inner);
                st.untimed -= 1;
            }
        }
    }

    /// A call of connection `id` was taken: counts it, and either keeps the role while this
    /// thread serves the call (returning the ticket that says whether it still holds it
    /// afterwards), or, when `keep` is false or a call of its connection that ran long is
    /// still being served, frees it. When no other thread waits for the role and the bound allows,
    /// spawns one (so a loop whose calls are all short keeps two threads).
    ///
    /// With `hold` (the connection's next messages are waiting), also whether this thread may
    /// hold the call's reply for a burst: only when it keeps the role and a waiting thread
    /// would take the role over, and write what it holds, should the call run longer than
    /// `run_inline_for`.
    fn take_on(&self, id: u64, keep: bool, hold: bool) -> (Option<u64>, bool) {
        let mut st = lock(&self.st);
        let mut ran_long = 0;
        match st.conns.get_mut(&id) {
            Some(slot) => {
                ran_long = slot.ran_long;
                slot.in_progress += 1;
            }
            // Its connection left the loop since this thread took it (another thread ended
            // it): the call holds this thread as those of a connection that left do, and
            // `call_done` counts it out of them.
            None => st.orphans += 1,
        }
        // The connection may have more: whoever holds the role next looks.
        self.enqueue(&mut st, id);
        // A call keeps the role: the calls queued behind it follow on this thread. Beside one
        // of its connection's that ran long, it does not: its connection's next message must
        // not wait for this one, likely long too. (Beside calls handed on only for their RDMA
        // Reads it does: counting those too handed the role on for every call after one, as
        // long as any was in progress.)
        let ticket = if keep && ran_long == 0 {
            let ticket = self.begin_alone(&mut st);
            st.alone_call = Some(id);
            Some(ticket)
        } else {
            st.free = true;
            self.wake_one_waiting(&st);
            None
        };
        self.keep_one_waiting(&mut st);
        // (A `run_inline_for` too long to add to an instant: never overdue, never taken over.)
        let may_hold = hold
            && ticket.is_some()
            && st.waiting > 0
            && Instant::now().checked_add(self.cfg.limits.run_inline_for).is_some();
        if may_hold {
            st.held_on = Some(id);
        }
        (ticket, may_hold)
    }

    /// Tells one thread waiting for the role that it is free: one on `turn`, or a spare one
    /// where only spare ones wait.
    fn wake_one_waiting(&self, st: &State<B>) {
        if st.waiting > st.spares {
            self.turn.notify_one();
        } else {
            self.spare.notify_one();
        }
    }

    /// Tells every thread waiting for the role, spare or not: the loop ended. (A holder on its
    /// way out tells both itself, in `Leaving`, whose bounds this method's do not allow.)
    fn wake_all_waiting(&self) {
        self.turn.notify_all();
        self.spare.notify_all();
    }

    /// Starts a thread to wait for the role if none does and the bound allows: each
    /// connection's calls may take up to its bound of threads (more for those blocked on the
    /// requester, [`LoopConnection::blocked`]), and one more receives, so calls stuck in a handler on
    /// one connection never leave the others unserved.
    fn keep_one_waiting(&self, st: &mut State<B>) {
        let most =
            st.conns.values().map(|s| s.connection.most + s.connection.blocked()).sum::<usize>() + st.orphans + 1;
        if st.waiting == 0 && st.threads < most && !st.ended {
            self.spawn(st);
        }
    }

    /// The role's holder begins something that may take long (a call, or sending an answer
    /// that waits for its Send's completion): a waiting thread takes the role over if it runs
    /// longer than [`ServerLimits::run_inline_for`]. The ticket tells [`Loop::end_alone`]
    /// whether it did.
    fn begin_alone(&self, st: &mut State<B>) -> u64 {
        let t = st.next_ticket;
        st.next_ticket += 1;
        st.alone = Some((Instant::now(), t));
        st.alone_call = None;
        // Only a thread waiting without a deadline must be told; the others wake by
        // themselves when the call has run too long.
        if st.untimed > 0 {
            self.turn.notify_one();
        }
        t
    }

    /// What [`Loop::begin_alone`] began is done: whether this thread still holds the role
    /// (nobody took it over meanwhile).
    fn end_alone(&self, st: &mut State<B>, ticket: Option<u64>) -> bool {
        let holding = ticket.is_some_and(|t| st.alone_under(t));
        if holding {
            st.alone = None;
            st.alone_call = None;
        } else {
            st.waiting += 1;
        }
        holding
    }

    /// A call of connection `id` was answered: whether this thread still holds the role (it
    /// kept it, and nobody took it over meanwhile).
    fn call_done(&self, id: u64, ticket: Option<u64>) -> bool {
        let mut st = lock(&self.st);
        let now = Instant::now();
        let holding = self.end_alone(&mut st, ticket);
        // Served alone and no longer holding the role: it was taken over, having run long.
        let ran_long = ticket.is_some() && !holding;
        let held = match st.conns.get_mut(&id) {
            Some(slot) => {
                slot.in_progress -= 1;
                slot.ran_long = slot.ran_long.saturating_sub(usize::from(ran_long));
                slot.last_finished = now;
                std::mem::take(&mut slot.held)
            }
            // Its connection ended while it ran.
            None => {
                st.orphans -= 1;
                false
            }
        };
        if held {
            self.enqueue(&mut st, id);
        }
        holding
    }

    fn count(&self, connection: Answered) {
        let mut s = lock(&self.shared.stats);
        match connection {
            Answered::Reply(v, form, sent) => {
                s.calls.count(v);
                match form {
                    ArrivedAs::Inline => {}
                    ArrivedAs::ReadChunks => s.read_chunk_calls += 1,
                    ArrivedAs::Long => s.long_calls += 1,
                }
                match sent.form {
                    ReplyForm::Inline => s.inline_replies += 1,
                    ReplyForm::ReplyChunk => s.reply_chunk_replies += 1,
                }
                s.write_chunk_results += sent.reduced_results as u64;
                s.lent_results += sent.lent_results as u64;
                s.lent_copies += sent.lent_copies as u64;
                s.continued_replies += u64::from(sent.parts > 1);
            }
            // (An over-budget call is counted by the budget itself: `Server::stats`.)
            Answered::ErrChunk | Answered::OverBudget => s.errors_sent += 1,
            Answered::GarbageArgs => s.garbage_args_replies += 1,
            Answered::SystemErr => s.handler_panics += 1,
            Answered::BindingPanicked => s.binding_panics += 1,
            Answered::BadReply => s.bad_replies += 1,
            Answered::CallOnly(v, _) => {
                s.calls.count(v);
                s.call_only_calls += 1;
            }
        }
    }
}

/// Whether every segment of `reads` is held as the requester's offer on `qp`
/// ([`QueuePair::holds_offered`]): fetching them is then normally a copy, not an RDMA Read.
/// True for an empty Read list. A segment repeated exactly is not (one offer answers one
/// take, and the repeat would be read); nor, though this cannot see it, is an offer the peer's
/// later ones push out before the fetch takes it (`Offered`'s bound): then that segment is
/// read, and a call that runs long for it is taken over after `run_inline_for` as any other.
fn all_offered<Q: QueuePair>(qp: &Q, reads: List<'_, XdrReadChunk>) -> bool {
    let segment = |r: XdrReadChunk| (r.target.handle, r.target.offset, r.target.length);
    reads.iter().enumerate().all(|(i, r)| {
        let (rkey, addr, len) = segment(r);
        let repeated = || reads.iter().take(i).any(|earlier| segment(earlier) == (rkey, addr, len));
        len == 0 || (qp.holds_offered(RemoteBuf { addr, rkey }, len) && !repeated())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpcrdma_v1::header::{Header, HeaderLimits};
    use rpcrdma_verbs::{Access, MemoryRegion, Opcode, ProtectionDomain, QpCaps, Sge, Tcp};

    const T: Duration = Duration::from_secs(5);

    /// An RDMA_MSG of Version One (RFC 8166 section 4.2.1) whose Read list names `segments`,
    /// `len` bytes each, all at position 12, followed by a reduced RPC call.
    fn with_reads(segments: &[RemoteBuf], len: u32) -> Vec<u8> {
        let mut w = vec![1, 1, 32, 0];
        for s in segments {
            w.extend([1, 12, s.rkey, len, (s.addr >> 32) as u32, s.addr as u32]);
        }
        w.extend([0, 0, 0, 1, 0, len * segments.len() as u32]);
        w.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn a_segment_counts_as_offered_when_held_and_named_once() {
        let listener = Tcp.listen(&Tcp.any_address()).unwrap();
        let addr = listener.local_addr();
        let server = std::thread::spawn(move || {
            let pd = Tcp.alloc_pd().unwrap();
            let qp = listener.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
            (pd, qp)
        });
        let pd = Tcp.alloc_pd().unwrap();
        let (client, _) = Tcp.connect(&pd, &addr, &[], QpCaps::default(), T).unwrap();
        let (spd, server) = server.join().unwrap();
        let receive = spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        server.post_recv(1, Sge::whole(&receive)).unwrap();
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ;
        let (offered, other) = (pd.register(vec![7; 512], access).unwrap(), pd.register(vec![8; 512], access).unwrap());
        assert!(client.offer_read(offered.remote_at(0), 512));
        client.post_send(2, &[], None).unwrap();
        assert_eq!(server.wait_cq(T).unwrap().opcode, Opcode::Recv, "the offer is in before the Send");

        let look = |segments: &[RemoteBuf]| {
            let bytes = with_reads(segments, 512);
            let header = Header::parse(&bytes, &HeaderLimits::default()).expect("a valid header");
            all_offered(&server, header.read_list())
        };
        assert!(look(&[]), "no Read chunk: nothing to fetch");
        assert!(look(&[offered.remote_at(0)]));
        assert!(!look(&[other.remote_at(0)]), "never offered");
        assert!(!look(&[offered.remote_at(0), other.remote_at(0)]), "one segment not offered");
        assert!(!look(&[offered.remote_at(0), offered.remote_at(0)]), "one offer answers one take: the repeat is read");
        assert!(server.holds_offered(offered.remote_at(0), 512), "looking took nothing");
    }
}
