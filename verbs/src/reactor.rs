//! The process's one readiness loop: a single thread, sleeping in `epoll_wait` (through mio),
//! that does the work the backends' posting threads leave. For the TCP backend it reads and
//! applies the peer's frames, writes what a full socket held back, and fires the deadlines the
//! queue pairs ask for (the retry timeout, the linger after a disconnect); for rdma-core it
//! watches each armed completion queue's fd and wakes the waker armed on it
//! ([`QueuePair::arm_waker`](crate::QueuePair::arm_waker)), and reads each connection's CM
//! events (a peer's disconnect answered at once). So a connection costs a descriptor
//! and a registration, not threads, and an idle one costs no CPU: there is no polling tick, the
//! loop sleeps until a descriptor is ready or the earliest deadline.
//!
//! Descriptors are registered edge-triggered for reading and writing: a source that is told
//! it is ready must read until the descriptor would block (or say [`Step::More`] to be called
//! again before the loop sleeps), so that no readiness is lost.
//!
//! # Lent to a thread that would sleep anyway
//!
//! Waking a thread costs a context switch, and the thread woken here is usually one that was
//! about to wait for exactly this readiness: a server's event loop for its connections'
//! frames, a thread in `wait_cq` for its completion. So that thread may do the loop's work
//! itself ([`drive`]: whoever holds [`Reactor::driver`] drives), and the loop's own thread
//! steps aside meanwhile.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};

use crate::lock;

mod drive;
pub use drive::{Drove, Readiness};

thread_local! {
    /// This thread holds [`Reactor::driver`] now.
    static DRIVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread drives the readiness loop now (its own thread, or a guest).
pub(crate) fn driving_here() -> bool {
    DRIVING.with(|d| d.get())
}

/// What the loop does with a source after calling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Wait for its socket's next readiness or deadline.
    Idle,
    /// It stopped before its socket would block (a fairness bound): call it again before
    /// sleeping.
    More,
    /// It is finished: deregister it and let it go.
    Done,
}

/// A descriptor the loop serves (a TCP queue pair's socket, an rdma-core completion queue's or
/// CM event channel's).
pub(crate) trait Source: Send + Sync {
    /// The socket's descriptor, as registered.
    fn fd(&self) -> RawFd;
    /// The socket is readable, writable or hung up (or [`Step::More`] was returned): advance
    /// with `scratch` as the read buffer.
    fn on_ready(&self, scratch: &mut [u8]) -> Step;
    /// A deadline asked for by [`Reactor::wake_at`] has come.
    fn on_deadline(&self, at: Instant, now: Instant) -> Step;
}

/// The loop's shared state: who is registered, the deadlines asked for, and how long the
/// loop's thread is asleep for.
struct Inner {
    sources: HashMap<u64, Arc<dyn Source>>,
    deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Sources to call again before sleeping.
    again: VecDeque<u64>,
    /// `Some(t)`: the thread sleeps until `t` at the latest, so a deadline before `t` must
    /// wake it. `None`: it is awake and looks at the deadlines before it sleeps again.
    asleep_until: Option<Instant>,
}

/// The readiness loop (see the [module documentation](self)).
pub(crate) struct Reactor {
    registry: Registry,
    /// Wakes the thread early, under token [`WAKE`].
    waker: Waker,
    inner: Mutex<Inner>,
    /// The right to wait for readiness and call the sources: held by whoever drives (the
    /// loop's own thread, or a [guest](Readiness::drive)).
    driver: Mutex<Driver>,
    /// What the guests do (see [`drive`]).
    guests: drive::Guests,
}

/// What one drives with: the poll, its events, the read buffer.
struct Driver {
    poll: Poll,
    events: Events,
    scratch: Vec<u8>,
    /// The deadlines due in one round, kept from round to round: a connection's delayed
    /// acknowledgements are due every few calls, and a list made afresh each time allocated.
    due: Vec<(Instant, u64)>,
}

/// The waker's token; queue pairs' tokens are their ids, which start at 1.
const WAKE: Token = Token(0);
/// Bytes read from one socket per read at most: the loop's one buffer.
const SCRATCH: usize = 256 << 10;
/// Readiness events taken per wait.
const EVENTS: usize = 256;
/// The longest sleep with no deadline due (the thread has nothing to look at meanwhile).
const LONGEST_SLEEP: Duration = Duration::from_secs(3600);
/// The process's readiness loop, started on first use.
pub(crate) fn reactor() -> io::Result<&'static Reactor> {
    static LOOP: OnceLock<Result<&'static Reactor, io::ErrorKind>> = OnceLock::new();
    let r = LOOP.get_or_init(|| {
        let poll = Poll::new().map_err(|e| e.kind())?;
        let r = Reactor {
            registry: poll.registry().try_clone().map_err(|e| e.kind())?,
            waker: Waker::new(poll.registry(), WAKE).map_err(|e| e.kind())?,
            inner: Mutex::new(Inner {
                sources: HashMap::new(),
                deadlines: BinaryHeap::new(),
                again: VecDeque::new(),
                asleep_until: None,
            }),
            driver: Mutex::new(Driver {
                poll,
                events: Events::with_capacity(EVENTS),
                scratch: vec![0u8; SCRATCH],
                due: Vec::with_capacity(16),
            }),
            guests: drive::Guests::default(),
        };
        let r: &'static Reactor = Box::leak(Box::new(r));
        std::thread::Builder::new().name("verbs-io".into()).spawn(move || r.run()).map_err(|e| e.kind())?;
        Ok(r)
    });
    r.map_err(io::Error::from)
}

impl Reactor {
    /// Registers `source` under `token` (unique, not [`WAKE`]). Edge-triggered: the loop calls
    /// it at once if its socket is already readable or writable.
    pub(crate) fn add(&self, token: u64, source: Arc<dyn Source>) -> io::Result<()> {
        debug_assert_ne!(Token(token as usize), WAKE);
        let fd = source.fd();
        lock(&self.inner).sources.insert(token, source);
        let r =
            self.registry.register(&mut SourceFd(&fd), Token(token as usize), Interest::READABLE | Interest::WRITABLE);
        r.inspect_err(|_| {
            lock(&self.inner).sources.remove(&token);
        })
    }

    /// Deregisters `token` (if registered) while its descriptor is still open: its owner
    /// calls this before closing the descriptor itself.
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    pub(crate) fn remove(&self, token: u64) {
        self.after(token, Step::Done);
    }

    /// Asks for `token`'s [`Source::on_deadline`] at `at` (or soon after), waking whoever
    /// drives if it waits past `at` (while the loop's own thread is aside and no guest
    /// drives, the deadline waits for the next to drive: at most `drive::ASIDE_AT_MOST`).
    pub(crate) fn wake_at(&self, token: u64, at: Instant) {
        let mut inner = lock(&self.inner);
        inner.deadlines.push(Reverse((at, token)));
        let wake = inner.asleep_until.is_some_and(|t| at < t);
        if wake {
            inner.asleep_until = None;
        }
        drop(inner);
        if wake {
            self.poke();
        }
    }

    pub(crate) fn poke(&self) {
        // A failed wake leaves the thread to its deadline: the next event or the next wait.
        let _ = self.waker.wake();
    }

    fn source(&self, token: u64) -> Option<Arc<dyn Source>> {
        lock(&self.inner).sources.get(&token).cloned()
    }

    /// Acts on what a source said.
    fn after(&self, token: u64, step: Step) {
        match step {
            Step::Idle => {}
            Step::More => lock(&self.inner).again.push_back(token),
            Step::Done => {
                if let Some(s) = lock(&self.inner).sources.remove(&token) {
                    // A descriptor shared with other handles stays registered until removed.
                    let _ = self.registry.deregister(&mut SourceFd(&s.fd()));
                }
            }
        }
    }

    /// The loop's own thread: drives, except while a guest does or did lately
    /// ([`drive::Guests`]).
    fn run(&self) {
        DRIVING.with(|d| d.set(true));
        let mut aside = drive::Aside::default();
        loop {
            match self.guests.keep_aside(&mut aside) {
                Some(drive::StayAside::For(sleep)) => {
                    std::thread::sleep(sleep);
                    continue;
                }
                Some(drive::StayAside::UntilLeft) => {
                    self.guests.stay_aside_until_left();
                    continue;
                }
                None => {}
            }
            // (A guest that took the driver since is left to it.)
            let Some(mut d) = self.try_driver() else { continue };
            if self.guests.enter_own() {
                self.turn(&mut d, None);
            }
            self.guests.leave_own();
            drop(d);
            // (Orders the unlock before `after_own`'s look at the lobby: see `Guest`'s drop.)
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            self.guests.after_own();
        }
    }

    /// One round: the deadlines due and the sources to call again, then one wait for
    /// readiness (until the earliest deadline, or `until`), then the sources it found ready.
    fn turn(&self, d: &mut Driver, until: Option<Instant>) {
        let Driver { poll, events, scratch, due } = d;
        // The deadlines due, and the sources to call again, then how long to sleep.
        let now = Instant::now();
        let again = {
            let mut inner = lock(&self.inner);
            due.clear();
            while let Some(&Reverse((at, token))) = inner.deadlines.peek() {
                if at > now {
                    break;
                }
                inner.deadlines.pop();
                due.push((at, token));
            }
            std::mem::take(&mut inner.again)
        };
        for &(at, token) in due.iter() {
            if let Some(s) = self.source(token) {
                self.after(token, s.on_deadline(at, now));
            }
        }
        for token in again {
            if let Some(s) = self.source(token) {
                self.after(token, s.on_ready(scratch));
            }
        }
        let timeout = {
            let mut inner = lock(&self.inner);
            let now = Instant::now();
            if !inner.again.is_empty() || inner.deadlines.peek().is_some_and(|Reverse((at, _))| *at <= now) {
                Duration::ZERO
            } else {
                let due = inner.deadlines.peek().map_or(now + LONGEST_SLEEP, |Reverse((at, _))| *at);
                let until = until.map_or(due, |u| u.min(due));
                inner.asleep_until = Some(until);
                until.saturating_duration_since(now)
            }
        };
        // An interrupted wait is a wait with no events.
        let _ = poll.poll(events, Some(timeout));
        lock(&self.inner).asleep_until = None;
        for ev in events.iter() {
            let token = ev.token().0 as u64;
            if ev.token() == WAKE {
                continue;
            }
            if let Some(s) = self.source(token) {
                self.after(token, s.on_ready(scratch));
            }
        }
    }

    fn try_driver(&self) -> Option<MutexGuard<'_, Driver>> {
        match self.driver.try_lock() {
            Ok(d) => Some(d),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}
