//! The client's dispatcher: one thread for every lane of a client (each of its connections,
//! [`ClientConfig::connections`]), which connects, reads the clock and receives when no
//! caller does. It never blocks on one lane: a lane's turn does what the lane needs until
//! it would wait, says until when, and the thread parks until the earliest such instant or
//! until a lane pokes it. What pokes it: a caller that leaves it something (a call to
//! receive for, an async call's properties exchange, the client's drop), and the lane's
//! connection itself, armed with the lane's waker while the dispatcher holds the receiving
//! role there (`Transport::arm_receive`), so that the message's completion wakes it from the
//! thread that delivered it, as a server's event loop is woken.
//!
//! What could take long is not done in a turn: a connection attempt of a dispatcher of
//! several lanes runs on a short-lived thread of its own; a backward call's handler, the
//! keeper's NULL call ([`Shared::keep_when`]) and an async call's properties exchange run on
//! the client's workers (`workers.rs`).
//! What it still does in place, holding up the other lanes meanwhile: a lone lane's
//! connection attempt (bounded by `ClientConfig::connect_timeout`), and, on a backend whose
//! connections cannot wake a waker (each lane then has a dispatcher of its own), the wait
//! for a message on the connection it receives for. The transport-properties exchange an
//! async call's settling asks for is the workers' too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Wake, Waker};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use rpcrdma_verbs::{Arm, Backend, PostBatch};

use super::{Link, Locked, Receiver, Shared, GRACE, IDLE_WAIT, LINGER};
use crate::connection::Event;

/// How a lane wakes the dispatcher: made once per lane, its waker armed on the lane's
/// connection while the dispatcher receives there.
pub(super) struct Poke {
    /// The lane wants a turn: set before the thread is unparked, cleared by the dispatcher
    /// before the turn.
    poked: AtomicBool,
    /// The dispatcher's thread, once it runs.
    thread: Arc<OnceLock<Thread>>,
}

impl Poke {
    pub(super) fn new(thread: Arc<OnceLock<Thread>>) -> Arc<Self> {
        Arc::new(Poke { poked: AtomicBool::new(false), thread })
    }

    /// Asks the dispatcher for a turn of this lane.
    pub(super) fn poke(&self) {
        self.poked.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

impl Wake for Poke {
    fn wake(self: Arc<Self>) {
        self.poke();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.poke();
    }
}

/// What a lane's last turn left it waiting for.
pub(super) enum Waiting<B: Backend> {
    /// Nothing: the next turn starts afresh.
    Nothing,
    /// A connection attempt after the backoff, at this instant.
    Connect(Instant),
    /// A connection attempt on a thread of its own (a dispatcher of several lanes), which
    /// sets its flag and pokes when it is done (the thread itself ends a moment later).
    Connecting(JoinHandle<()>, Arc<AtomicBool>),
    /// Callers receive (or the lane has no connection): a poke, or the core's deadline.
    Callers,
    /// The dispatcher holds the receiving role on this connection, armed to be poked when a
    /// message arrives (or at the deadline).
    Receive(Arc<Link<B>>),
}

/// The lanes one dispatcher thread serves, and the slot their pokes unpark it by.
pub(super) type Group<B> = (Vec<Arc<Shared<B>>>, Arc<OnceLock<Thread>>);

/// The client's dispatcher threads, joined on drop once every lane is closing: one for all
/// the lanes, or one a lane where a lane's turn may run long (see
/// [`Lane::start_all`](super::Lane::start_all)).
pub(in crate::client) struct Dispatcher {
    threads: Vec<JoinHandle<()>>,
    /// Ends the client's workers (`workers.rs`), once the dispatcher threads have left.
    close_workers: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Dispatcher {
    /// Starts a dispatcher thread for each group of lanes, whose pokes unpark the thread put
    /// in the group's slot.
    pub(super) fn start<B: Backend>(
        groups: Vec<Group<B>>,
        close_workers: Box<dyn FnOnce() + Send + Sync>,
    ) -> Dispatcher {
        let threads = groups
            .into_iter()
            .map(|(lanes, thread)| {
                std::thread::Builder::new()
                    .name("negotiate-client".into())
                    .spawn(move || {
                        let _ = thread.set(std::thread::current());
                        run(&lanes)
                    })
                    .expect("spawn")
            })
            .collect();
        Dispatcher { threads, close_workers: Some(close_workers) }
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        // (Never the dropping thread, which runs no turn and serves no call: a guard against
        // a thread joining itself, which fails.)
        let me = std::thread::current().id();
        for t in self.threads.drain(..).filter(|t| t.thread().id() != me) {
            let _ = t.join();
        }
        if let Some(close) = self.close_workers.take() {
            close();
        }
    }
}

/// The dispatcher's loop: a turn for each lane poked or due, then a park until the earliest
/// due, until every lane is closing.
fn run<B: Backend>(lanes: &[Arc<Shared<B>>]) {
    for lane in lanes {
        let _ = lane.dispatcher.set(std::thread::current().id());
    }
    // Each lane's wait and when its next turn is due; `None` once it is closing.
    let now = Instant::now();
    let mut turns: Vec<Option<(Waiting<B>, Instant)>> = lanes.iter().map(|_| Some((Waiting::Nothing, now))).collect();
    loop {
        let mut next: Option<Instant> = None;
        for (lane, slot) in lanes.iter().zip(turns.iter_mut()) {
            let Some((waiting, due)) = slot else { continue };
            let poked = lane.poke.poked.swap(false, Ordering::SeqCst);
            if poked || Instant::now() >= *due {
                // The calls a turn sends (those its replies gave credit for) go together
                // when it ends: over TCP in one write.
                let batch = PostBatch::open();
                let turned = lane.turn(waiting, poked, lanes.len() == 1);
                drop(batch);
                match turned {
                    Some(at) => *due = at,
                    None => {
                        *slot = None;
                        continue;
                    }
                }
            }
            next = Some(next.map_or(*due, |n| n.min(*due)));
        }
        let Some(next) = next else { return };
        if lanes.iter().any(|l| l.poke.poked.load(Ordering::SeqCst)) {
            continue;
        }
        let now = Instant::now();
        if next > now {
            std::thread::park_timeout(next - now);
        }
    }
}

impl<B: Backend> Shared<B> {
    /// One turn of this lane: carries on from what the last turn waited for (`poked`: a
    /// poke, not the deadline, ended the wait), then does what the lane needs until it would
    /// wait again, left in `waiting`; returns when its next turn is due unless poked before,
    /// or `None` once the client is closing. `alone`: the dispatcher has no other lane.
    fn turn(self: &Arc<Self>, waiting: &mut Waiting<B>, poked: bool, alone: bool) -> Option<Instant> {
        match std::mem::replace(waiting, Waiting::Nothing) {
            Waiting::Nothing => {}
            Waiting::Connect(at) => {
                if self.lock().core.is_closing() {
                    return None;
                }
                if Instant::now() < at {
                    *waiting = Waiting::Connect(at);
                    return Some(at);
                }
                if let Some(due) = self.connect_from_turn(alone, waiting) {
                    return Some(due);
                }
            }
            Waiting::Connecting(attempt, done) => {
                if self.lock().core.is_closing() {
                    // (The attempt ends within its connect timeout, on its own.)
                    return None;
                }
                if !done.load(Ordering::SeqCst) {
                    *waiting = Waiting::Connecting(attempt, done);
                    return Some(Instant::now() + IDLE_WAIT);
                }
                // (Its thread has nothing left to do but end.)
                let _ = attempt.join();
            }
            Waiting::Callers => {
                let mut st = self.lock();
                st.dispatcher_due = None;
                st.core.handle_timeout(Instant::now());
                st = self.release_abandoned(st, None);
                st.wake();
                // Calls in progress and none of their callers took the role for a whole
                // wait: receive for them rather than leave their replies waiting. Async calls
                // on a backend that cannot wake their tasks: for them at once; on one that
                // can, never while they wait (the connection wakes them).
                let unserved = !poked && st.unreceived();
                if unserved || st.tasks_unserved() || st.dispatcher_wanted() {
                    if let Some(link) = st.core.link().cloned() {
                        st.receive_for_all(Receiver::Dispatcher);
                        return Some(self.receive_turn(st, &link, waiting, alone));
                    }
                }
            }
            Waiting::Receive(link) => {
                // The message that poked, or the deadline: what is there is taken, and the
                // role given up (the next turn takes it again if it is still wanted); unless
                // a call the dispatcher made meanwhile took the role as a caller and gave it
                // up (`Shared::wait_step`).
                let st = self.lock();
                if st.receiver == Receiver::Dispatcher {
                    let (mut st, came, _) = self.receive_within(st, &link, Duration::ZERO);
                    if came {
                        st = self.receive_more(st, &link);
                    }
                    let _ = st.stop_receiving(None);
                }
            }
        }
        self.dispatch_until_wait(waiting, alone).map(|due| self.keep_when(due))
    }

    /// A connection attempt the core asked for: made here by a dispatcher of this lane alone
    /// (`None`: carry on), or on a thread of its own, which pokes when it is done, by a
    /// dispatcher of several, whose other lanes a slow attempt must not hold up (when this
    /// lane's next turn is due: at the poke).
    fn connect_from_turn(self: &Arc<Self>, alone: bool, waiting: &mut Waiting<B>) -> Option<Instant> {
        if alone {
            let _ = self.connect();
            return None;
        }
        let (lane, done) = (self.clone(), Arc::new(AtomicBool::new(false)));
        let finished = done.clone();
        let spawned = std::thread::Builder::new().name("negotiate-dial".into()).spawn(move || {
            let _ = lane.connect();
            finished.store(true, Ordering::SeqCst);
            lane.poke.poke();
        });
        match spawned {
            Ok(attempt) => {
                *waiting = Waiting::Connecting(attempt, done);
                Some(Instant::now() + IDLE_WAIT)
            }
            // No thread to be had: made here after all.
            Err(e) => {
                log::warn!("no thread for a connection attempt ({e}): made on the dispatcher's");
                let _ = self.connect();
                None
            }
        }
    }

    /// Carries out the core's actions and receives while that is the dispatcher's to do,
    /// until the lane must wait: for a connection's backoff or attempt, for its callers, or
    /// for a message (see [`Shared::turn`]).
    fn dispatch_until_wait(self: &Arc<Self>, waiting: &mut Waiting<B>, alone: bool) -> Option<Instant> {
        loop {
            let (actions, link) = {
                let mut st = self.lock();
                if st.core.is_closing() {
                    return None;
                }
                let actions: Vec<_> = std::iter::from_fn(|| st.core.poll_event()).collect();
                (actions, st.core.link().cloned())
            };
            let mut connect_at = None;
            for action in actions {
                match action {
                    Event::Connect { after } => connect_at = Some(Instant::now() + after),
                    Event::Disconnect { link, cause } => link.conn.close(format_args!("{cause}")),
                    // (Logged by the core as it learned it; the calls' failures carry it.)
                    Event::Ended(_) => {}
                    // (A server's connection's: a client's never is idle.)
                    Event::Idle => {}
                }
            }
            match connect_at {
                Some(at) if at > Instant::now() => {
                    *waiting = Waiting::Connect(at);
                    return Some(at);
                }
                Some(_) => {
                    if let Some(due) = self.connect_from_turn(alone, waiting) {
                        return Some(due);
                    }
                    continue;
                }
                None => {}
            }
            let Some(link) = link else {
                let st = self.lock();
                if st.core.link().is_none() && !st.core.is_closing() && !st.core.has_event() {
                    // Until the core's next deadline (a call's), or a caller's poke.
                    *waiting = Waiting::Callers;
                    return Some(Instant::now() + st.wait_for_deadline());
                }
                continue;
            };
            let mut st = self.lock();
            let idle = !st.core.has_calls() && st.last_active.elapsed() >= LINGER;
            if !st.tasks_unserved() && !st.dispatcher_wanted() && (!idle || st.receiver != Receiver::Nobody) {
                // Callers receive (or will, when the next call starts); the clock is still
                // ours to read, at the core's next deadline. Calls nobody receives for get
                // GRACE; the receiving role is the dispatcher's LINGER after the last call,
                // looked at again LINGER after the last call began or ended (an idle timer
                // re-armed lazily, as quinn's is); after a quiet spell only at the deadline,
                // unless a call's end pokes (`Shared::end`).
                let mut wait = st.wait_for_deadline();
                let since = st.last_active.elapsed();
                if st.unreceived() {
                    wait = wait.min(GRACE);
                } else if since < LINGER {
                    wait = wait.min((LINGER - since).max(Duration::from_millis(1)));
                }
                let due = Instant::now() + wait;
                st.dispatcher_due = Some(due);
                *waiting = Waiting::Callers;
                return Some(due);
            }
            st.receive_for_all(Receiver::Dispatcher);
            return Some(self.receive_turn(st, &link, waiting, alone));
        }
    }

    /// The dispatcher, holding the receiving role on `link`, takes what is there; with
    /// nothing there it keeps the role and arms the connection to poke it when a message
    /// arrives (`waiting` says so), until the core's next deadline. Returns when the next
    /// turn is due: at once when something came.
    fn receive_turn(&self, st: Locked<'_, B>, link: &Arc<Link<B>>, waiting: &mut Waiting<B>, alone: bool) -> Instant {
        if !st.arms {
            // A connection that cannot wake a waker: its message is waited for here, until
            // the core's deadline by a dispatcher of this lane alone; by one of several (a
            // backend that said it wakes wakers, and a connection that then could not), for
            // at most GRACE, so that the other lanes' turns come round.
            let mut st = match alone {
                true => self.receive_once(st, link),
                false => self.receive_within(st, link, GRACE).0,
            };
            st = self.receive_more(st, link);
            let _ = st.stop_receiving(None);
            return Instant::now();
        }
        let (mut st, came, _) = self.receive_within(st, link, Duration::ZERO);
        let here = st.core.link().is_some_and(|l| Arc::ptr_eq(l, link));
        if came || !here || st.core.is_closing() {
            if came {
                st = self.receive_more(st, link);
            }
            let _ = st.stop_receiving(None);
            return Instant::now();
        }
        // Armed with the role kept: a message there already (`Arm::Waiting`) is taken by
        // the turn due at once.
        *waiting = Waiting::Receive(link.clone());
        match link.conn.arm_receive(&self.loop_waker) {
            Arm::Waiting => Instant::now(),
            Arm::Armed | Arm::Unsupported => Instant::now() + st.wait_for_deadline(),
        }
    }
}

/// The waker of a lane's pokes.
pub(super) fn waker(poke: &Arc<Poke>) -> Waker {
    Waker::from(poke.clone())
}
