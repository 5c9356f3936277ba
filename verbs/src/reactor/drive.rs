//! Guests: threads that drive the readiness loop while they wait for what it delivers.
//!
//! A thread about to sleep until a frame arrives (a server's event loop between calls, a
//! thread in `wait_cq`) waits in `epoll_wait` itself and applies what comes: the frame then
//! costs the kernel's one wake-up of that thread, where the loop's own thread woke first and
//! woke it second (eRPC's run to completion on the thread that polls).
//!
//! One thread drives at a time ([`Reactor::driver`](super::Reactor)):
//! * a [`Readiness::drive`] (a server loop's holder) that finds another driving waits in the
//!   *lobby*, woken by [`Readiness::interrupt`] and by the thread driving when it leaves;
//! * a thread in `wait_cq` drives only if nobody does, and for at most [`SLICE`]
//!   ([`Reactor::try_drive`]): its wait may be long, and a thread serving many connections
//!   should drive instead; otherwise it waits on its queue pair as before, woken by whoever
//!   drives;
//! * a thread leaving with others in the lobby first looks once more without waiting, so
//!   that what came for them meanwhile reaches them.
//!
//! The loop's own thread steps aside while a guest drives and for [`GRACE`] after one left (a
//! guest that serves a call is usually back within it), then takes over, so that readiness
//! nobody waits for (another connection's frames, a deadline) is never held up for longer
//! while the threads that drove are busy; when it finds threads in the lobby it wakes them to
//! drive instead. A guest that finds it driving asks it to step aside. While guests keep
//! coming and going it looks again after 1 ms, then 2 ms ([`ASIDE_AT_MOST`]); a guest that
//! has driven longer than that (one waiting long for a message) is left to it with no look
//! on a tick: the loop's own thread sleeps until that guest leaves, which wakes it
//! ([`Guests::keep_aside`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::{driving_here, reactor, Reactor, DRIVING};
use crate::lock;

/// How long the loop's own thread stays aside after a guest stopped driving.
const GRACE: Duration = Duration::from_millis(1);
/// The longest the loop's own thread sleeps aside on a timer while a guest drives before it
/// looks again (it is not told when a guest stops: that would be a wake-up a call). It
/// bounds how long readiness nobody waits in the lobby for (a queue pair's waiter that found
/// another thread driving, a deadline) may wait when a guest leaves: 2 ms. A guest it finds
/// still driving after that wakes it when it leaves instead (issue 25: no polling ticks;
/// before, a guest waiting 1 s for a reply cost 500 wake-ups of this thread).
const ASIDE_AT_MOST: Duration = Duration::from_millis(2);
/// Threads in the lobby at once that it holds without growing.
const LOBBY_SIZED: usize = 64;
/// The longest a thread waiting on one queue pair drives ([`Reactor::try_drive`]).
const SLICE: Duration = Duration::from_millis(1);

/// What the guests are doing, for the loop's own thread and for each other.
pub(super) struct Guests {
    /// A guest drives now.
    driving: AtomicBool,
    /// The loop's own thread drives now.
    own_driving: AtomicBool,
    /// When a guest last stopped driving, in nanoseconds since `born`.
    left: AtomicU64,
    /// A guest waits for the loop's own thread to step aside.
    wants: AtomicBool,
    born: Instant,
    /// The threads waiting to drive ([`Readiness::drive`]).
    lobby: Mutex<Vec<Thread>>,
    in_lobby: AtomicUsize,
    /// The loop's own thread sleeps aside until a guest leaves (set by it, taken by the
    /// guest that wakes it).
    own_parked: AtomicBool,
    /// The loop's own thread, once it runs.
    own: std::sync::OnceLock<Thread>,
}

impl Default for Guests {
    fn default() -> Self {
        Guests {
            driving: AtomicBool::new(false),
            own_driving: AtomicBool::new(false),
            left: AtomicU64::new(0),
            wants: AtomicBool::new(false),
            born: Instant::now(),
            // (Sized once: a steady state allocates nothing.)
            lobby: Mutex::new(Vec::with_capacity(LOBBY_SIZED)),
            in_lobby: AtomicUsize::new(0),
            own_parked: AtomicBool::new(false),
            own: std::sync::OnceLock::new(),
        }
    }
}

/// How long the loop's own thread sleeps aside next, while a guest keeps driving.
pub(super) struct Aside(Duration);

impl Default for Aside {
    fn default() -> Self {
        Aside(GRACE)
    }
}

/// How the loop's own thread stays aside ([`Guests::keep_aside`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StayAside {
    /// For this long, then it looks again.
    For(Duration),
    /// Until the guest driving leaves, which wakes it.
    UntilLeft,
}

impl Guests {
    fn now(&self) -> u64 {
        self.born.elapsed().as_nanos() as u64
    }

    /// For the loop's own thread: how long to stay aside, or `None` to drive. A guest found
    /// driving at each look for longer than [`ASIDE_AT_MOST`] is waited out: the next stay is
    /// [`StayAside::UntilLeft`], and [`Guests::stay_aside_until_left`] carries it out.
    pub(super) fn keep_aside(&self, aside: &mut Aside) -> Option<StayAside> {
        if self.driving.load(Ordering::Acquire) {
            let sleep = aside.0;
            if sleep > ASIDE_AT_MOST {
                // (Back to short looks once that guest has left: the next may be quick.)
                *aside = Aside::default();
                return Some(StayAside::UntilLeft);
            }
            aside.0 *= 2;
            return Some(StayAside::For(sleep));
        }
        *aside = Aside::default();
        let since = Duration::from_nanos(self.now().saturating_sub(self.left.load(Ordering::Acquire)));
        (since < GRACE).then(|| StayAside::For(GRACE - since))
    }

    /// The loop's own thread sleeps until the guest driving now leaves (at once if none
    /// does by the time it has said it sleeps: the guest's drop and this look at each
    /// other's flags across SeqCst fences, so that one of them sees the other).
    pub(super) fn stay_aside_until_left(&self) {
        let me = self.own.get_or_init(std::thread::current);
        self.own_parked.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.driving.load(Ordering::SeqCst) {
            // (A spurious wake-up, or one from a guest that left before this slept, only
            // looks again.)
            debug_assert_eq!(me.id(), std::thread::current().id());
            std::thread::park();
        }
        self.own_parked.store(false, Ordering::SeqCst);
    }

    /// A guest left: the loop's own thread, if it sleeps until then, is woken.
    fn wake_own(&self) {
        if self.own_parked.swap(false, Ordering::SeqCst) {
            if let Some(own) = self.own.get() {
                own.unpark();
            }
        }
    }

    /// The loop's own thread holds the driver: false when it should not wait with it, since
    /// threads wait in the lobby to drive themselves ([`Guests::after_own`] wakes them).
    pub(super) fn enter_own(&self) -> bool {
        self.own_driving.store(true, Ordering::SeqCst);
        self.in_lobby.load(Ordering::SeqCst) == 0
    }

    /// The loop's own thread is about to give the driver up.
    pub(super) fn leave_own(&self) {
        self.own_driving.store(false, Ordering::SeqCst);
    }

    /// The loop's own thread gave the driver up: if a guest asked, or waits in the lobby, it
    /// steps aside and wakes them.
    pub(super) fn after_own(&self) {
        if self.wants.swap(false, Ordering::AcqRel) || self.in_lobby.load(Ordering::SeqCst) > 0 {
            self.left.store(self.now(), Ordering::Release);
            self.call();
        }
    }

    /// Wakes the threads in the lobby.
    fn call(&self) {
        if self.in_lobby.load(Ordering::SeqCst) == 0 {
            return;
        }
        for t in lock(&self.lobby).iter() {
            t.unpark();
        }
    }
}

/// A thread driving as a guest: on its way out, even by a panic in a source or a waker, it
/// gives the driver up and says so, and one waiting in the lobby takes over.
struct Guest<'a> {
    guests: &'a Guests,
    /// Always `Some` until dropped.
    driver: Option<std::sync::MutexGuard<'a, super::Driver>>,
}

impl<'a> Guest<'a> {
    fn enter(guests: &'a Guests, driver: std::sync::MutexGuard<'a, super::Driver>) -> Self {
        guests.driving.store(true, Ordering::SeqCst);
        DRIVING.with(|d| d.set(true));
        Guest { guests, driver: Some(driver) }
    }

    fn driver(&mut self) -> &mut super::Driver {
        self.driver.as_mut().expect("held until dropped")
    }
}

/// A thread waiting in the lobby: counted in, and out on its way out, a panicking `stop`
/// included (a count left behind would keep the loop's own thread from ever driving again).
struct InLobby<'a> {
    guests: &'a Guests,
    me: Thread,
}

impl<'a> InLobby<'a> {
    fn enter(guests: &'a Guests) -> Self {
        let me = std::thread::current();
        lock(&guests.lobby).push(me.clone());
        guests.in_lobby.fetch_add(1, Ordering::SeqCst);
        InLobby { guests, me }
    }
}

impl Drop for InLobby<'_> {
    fn drop(&mut self) {
        self.guests.in_lobby.fetch_sub(1, Ordering::SeqCst);
        lock(&self.guests.lobby).retain(|t| t.id() != self.me.id());
    }
}

impl Drop for Guest<'_> {
    fn drop(&mut self) {
        DRIVING.with(|d| d.set(false));
        self.guests.left.store(self.guests.now(), Ordering::Release);
        self.guests.driving.store(false, Ordering::SeqCst);
        drop(self.driver.take());
        // Given up first, then looked at: a thread that came to the lobby while this one
        // drove is there by now, and takes over. (The fence orders the unlock, a release,
        // before the count's load, as the lobby's SeqCst count and `try_driver` need; and
        // `driving`'s store before the look at `own_parked`, as `stay_aside_until_left`
        // needs.)
        std::sync::atomic::fence(Ordering::SeqCst);
        self.guests.call();
        self.guests.wake_own();
    }
}

impl Reactor {
    /// [`Readiness::drive`]: waits in the lobby while another thread drives.
    fn drive(&self, timeout: Duration, stop: &mut dyn FnMut() -> bool) -> Drove {
        // A thread that may wait hands over the posts it holds first: what it waits for may
        // be the peer's answer to them (`crate::batch`).
        if !timeout.is_zero() {
            crate::batch::flush_held();
        }
        let until = Instant::now().checked_add(timeout);
        match self.take_driver(until, stop) {
            Ok(d) => self.drive_with(d, until, stop),
            Err(drove) => drove,
        }
    }

    /// Drives for a thread waiting on one queue pair, if no other thread drives: `None` then
    /// (it waits as it would have, and the thread driving wakes it). At most for [`SLICE`]:
    /// such a wait may be long, and a thread serving many connections should drive instead.
    pub(crate) fn try_drive(&self, timeout: Duration, stop: &mut dyn FnMut() -> bool) -> Option<Drove> {
        let d = self.try_driver()?;
        let until = Instant::now().checked_add(timeout.min(SLICE));
        Some(self.drive_with(d, until, stop))
    }

    fn drive_with(
        &self,
        d: std::sync::MutexGuard<'_, super::Driver>,
        until: Option<Instant>,
        stop: &mut dyn FnMut() -> bool,
    ) -> Drove {
        let mut guest = Guest::enter(&self.guests, d);
        // At least one round, even with no time: a zero timeout is a look without waiting.
        let mut turned = false;
        let drove = loop {
            if stop() {
                break Drove::Stopped;
            }
            if turned && until.is_some_and(|u| Instant::now() >= u) {
                break Drove::TimedOut;
            }
            self.turn(guest.driver(), until);
            turned = true;
        };
        if self.guests.in_lobby.load(Ordering::SeqCst) > 0 {
            // What came meanwhile for those in the lobby reaches them before this thread goes.
            self.turn(guest.driver(), Some(Instant::now()));
        }
        drove
    }

    /// The driver, once free, unless `stop()` or `until` comes first: waits in the lobby
    /// meanwhile, asking the loop's own thread to step aside if it drives.
    fn take_driver(
        &self,
        until: Option<Instant>,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<std::sync::MutexGuard<'_, super::Driver>, Drove> {
        if let Some(d) = self.try_driver() {
            return Ok(d);
        }
        let g = &self.guests;
        let _waiting = InLobby::enter(g);
        loop {
            // (Looked at once registered: what comes after is told by an unpark.)
            if stop() {
                return Err(Drove::Stopped);
            }
            if let Some(d) = self.try_driver() {
                return Ok(d);
            }
            if g.own_driving.load(Ordering::SeqCst) {
                g.wants.store(true, Ordering::Release);
                self.poke();
            }
            let left = until.map_or(super::LONGEST_SLEEP, |u| u.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return Err(Drove::TimedOut);
            }
            std::thread::park_timeout(left);
        }
    }

    /// Has the thread driving look at its `stop` again (unless it is this one: it looks
    /// after the round) and, with `lobby`, those waiting in the lobby too (a server loop's
    /// holder; a queue pair's waiter is told by its condition variable).
    pub(crate) fn nudge(&self, lobby: bool) {
        if !driving_here() {
            self.poke();
        }
        if lobby {
            self.guests.call();
        }
    }
}

/// How a [`Readiness::drive`] ended.
///
/// ```
/// use rpcrdma_verbs::{Backend, Drove, Tcp};
/// use std::time::Duration;
///
/// let readiness = Tcp.readiness().unwrap();
/// // What this thread waits for is there already: it stops at the first look.
/// match readiness.drive(Duration::from_millis(100), &mut || true) {
///     Drove::Stopped => {}
///     Drove::TimedOut => unreachable!("looked at before the first round"),
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drove {
    /// Its `stop` said so.
    Stopped,
    /// Its timeout passed first.
    TimedOut,
}

/// The backend's readiness loop, lent to a thread that would otherwise sleep until a queue
/// pair of the backend wakes it ([`Backend::readiness`](crate::Backend::readiness)): the TCP
/// backend's.
///
/// The thread that drives waits in `epoll_wait` itself and applies the frames that come, so
/// that the frame it waits for wakes only it, where the loop's own thread would have woken
/// first and woken it second. One thread drives at a time: another that calls
/// [`Readiness::drive`] meanwhile waits for it to give the loop up (or for its own `stop`),
/// and the loop's own thread stays aside while threads drive, taking over at most about
/// 3 ms after the last left, so that frames nobody waits for are not held up for long.
///
/// ```
/// use rpcrdma_verbs::{Backend, Drove, InProcess, Tcp};
/// use std::time::Duration;
///
/// assert!(InProcess.readiness().is_none());
/// let readiness = Tcp.readiness().expect("the TCP backend lends its readiness loop");
/// // Nothing to wait for: drives for a millisecond (or waits that long for the thread driving).
/// let drove = readiness.drive(Duration::from_millis(1), &mut || false);
/// assert_eq!(drove, Drove::TimedOut);
/// // What it waits for has come: returns at once.
/// assert_eq!(readiness.drive(Duration::from_secs(1), &mut || true), Drove::Stopped);
///
/// // What it waits for is set on another thread, which interrupts the wait.
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// let done = Arc::new(AtomicBool::new(false));
/// let d = done.clone();
/// let setter = std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_millis(10));
///     d.store(true, Ordering::SeqCst);
///     readiness.interrupt();
/// });
/// assert_eq!(readiness.drive(Duration::from_secs(60), &mut || done.load(Ordering::SeqCst)), Drove::Stopped);
/// setter.join().unwrap();
/// ```
#[derive(Clone, Copy)]
pub struct Readiness(&'static Reactor);

impl Readiness {
    /// The process's readiness loop (started on first use).
    pub(crate) fn get() -> Option<Readiness> {
        reactor().ok().map(Readiness)
    }

    /// Does the readiness loop's work on this thread (reads and applies what the sockets
    /// hold, fires the wakers and deadlines that follow) until `stop()` is true (looked at
    /// before each round), or `timeout` has passed (a zero timeout: one round that does not
    /// wait). Where another thread drives, waits for it to give the loop up, or for
    /// `stop()`. Call [`Readiness::interrupt`] when `stop()` turns true on another thread
    /// than the one driving.
    pub fn drive(&self, timeout: Duration, stop: &mut dyn FnMut() -> bool) -> Drove {
        self.0.drive(timeout, stop)
    }

    /// Has whoever drives, or waits to in [`Readiness::drive`], look at its `stop` again.
    pub fn interrupt(&self) {
        self.0.nudge(true);
    }
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness").finish_non_exhaustive()
    }
}
