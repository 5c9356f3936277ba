//! [`Locked`]: the lane's state, locked, waking the threads its changes woke only once the lock
//! is released.
//!
//! Unparked under the lock, a caller woken for its reply ran only to block on the lock its
//! waker still held (the dispatcher goes on receiving with it): under 64 callers that was
//! most of a second thread switch per call. The threads to wake are gathered in
//! [`State::unpark`] and woken by [`Locked`]'s drop, after the unlock.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::{MutexGuard, PoisonError};

use super::{Shared, Sleeper, State};
use rpcrdma_verbs::Backend;

/// The lane's state, locked ([`Shared::lock`]).
pub(super) struct Locked<'a, B: Backend> {
    guard: Option<MutexGuard<'a, State<B>>>,
}

thread_local! {
    /// This thread's list of threads to wake, swapped with the state's so that neither
    /// allocates once both have room (a steady stream of calls allocates nothing).
    static SPARE: RefCell<Vec<Sleeper>> = const { RefCell::new(Vec::new()) };
}

impl<B: Backend> Shared<B> {
    /// Locks the lane's state.
    pub(super) fn lock(&self) -> Locked<'_, B> {
        Locked { guard: Some(self.st.lock().unwrap_or_else(PoisonError::into_inner)) }
    }
}

impl<B: Backend> Deref for Locked<'_, B> {
    type Target = State<B>;

    fn deref(&self) -> &State<B> {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<B: Backend> DerefMut for Locked<'_, B> {
    fn deref_mut(&mut self) -> &mut State<B> {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl<B: Backend> Drop for Locked<'_, B> {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else { return };
        if std::thread::panicking() {
            // Nobody is left behind by a thread unwinding.
            guard.wake_deferred();
        } else if std::mem::take(&mut guard.hold_wakes) {
            // The dispatcher's burst unlocks to receive: these wait for its end
            // (`State::hold_wakes`).
            let g = &mut *guard;
            g.deferred.append(&mut g.unpark);
            return;
        }
        let mut guard = Some(guard);
        let swapped = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            let mut guard = guard.take().expect("taken once");
            // The state's list must not come back with less room than it had: a thread's
            // spare gets that room at its first unlock (a caller's warm-up), and no steady
            // call allocates after.
            if spare.capacity() < guard.unpark.capacity() {
                spare.reserve_exact(guard.unpark.capacity());
            }
            if guard.unpark.is_empty() {
                return;
            }
            std::mem::swap(&mut *spare, &mut guard.unpark);
            drop(guard);
            Sleeper::wake_all(&mut spare);
        });
        // A thread whose thread-locals are gone (it is exiting): the list itself, woken
        // after the unlock all the same.
        if let (Err(_), Some(mut guard)) = (swapped, guard) {
            let mut unpark = std::mem::take(&mut guard.unpark);
            drop(guard);
            Sleeper::wake_all(&mut unpark);
        }
    }
}
