//! Waiting for completions on a [`Transport`]: one thread polls the completion queue at a
//! time, reaps a burst, and sets aside what belongs to other waiters, each woken alone
//! (`Want`, `Reaped`); Receives are handed out oldest first.

use std::sync::MutexGuard;
use std::task::Waker;

use rpcrdma_verbs::Arm;

use super::*;

/// How many completions one poll reaps at most: the first blocks, the rest are what the queue
/// already holds, so that a burst is handed out in one pass.
pub(super) const REAP_BATCH: usize = 16;

/// What a waiter on a [`Transport`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    /// The completion of this send-queue work request.
    WorkRequest(u64),
    /// Any Receive's ([`ReceivePool`]).
    AnyReceive,
}

impl Want {
    fn claims(self, c: &Completion) -> bool {
        match self {
            Want::WorkRequest(id) => c.wr_id == id,
            Want::AnyReceive => c.wr_id & RECV_WR_BIT != 0,
        }
    }

    /// The `wr_id` a timeout reports (0 for any Receive).
    fn wr_id(self) -> u64 {
        match self {
            Want::WorkRequest(id) => id,
            Want::AnyReceive => 0,
        }
    }
}

/// A thread waiting on a [`Transport`] while another polls.
pub(super) struct Waiting {
    want: Want,
    thread: std::thread::Thread,
}

impl<B: Backend> Transport<B> {
    /// Waits for the completion of work request `wr_id`; an error completion is
    /// [`DataPathError::Completion`].
    pub fn wait(&self, wr_id: u64) -> Result<Completion, DataPathError> {
        self.wait_within(Want::WorkRequest(wr_id), self.timeout, Duration::ZERO)
    }

    /// Waits for every work request in `wr_ids`, even after one failed (the others are flushed
    /// then, and their completions must still be reaped); returns the first failure in list
    /// order. Stops at a timeout.
    pub fn wait_all(&self, wr_ids: &[u64]) -> Result<(), DataPathError> {
        let mut first = None;
        for &id in wr_ids {
            match self.wait(id) {
                Ok(_) => {}
                Err(e @ DataPathError::Timeout { .. }) => return Err(first.unwrap_or(e)),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The one wait: the first completion, set aside or newly reaped, that `want` claims,
    /// giving up after `timeout`. One waiter polls the completion queue at a time (outside
    /// the lock, so that waiters for completions already set aside are not held up behind a
    /// blocking poll); it sets aside what belongs to others and wakes each owner alone, and
    /// when it leaves it wakes one other waiter to poll in its place. Waking every waiter for
    /// every completion reaped (as a shared condition variable would) cost two thread
    /// switches per call under load.
    ///
    /// The waiter that polls looks at the empty queue for up to `poll_first` (no longer than
    /// the timeout) before it sleeps ([`Transport::poll_first`]).
    pub(super) fn wait_within(
        &self,
        want: Want,
        timeout: Duration,
        poll_first: Duration,
    ) -> Result<Completion, DataPathError> {
        // A zero timeout (a look at what is there) reads no clock.
        let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
        let mut st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
        let mut reaped = false;
        loop {
            // The oldest one it claims: set-aside completions leave in the order they were
            // reaped, as from the completion queue itself.
            if let Some(c) = st.completions.iter().position(|c| want.claims(c)).and_then(|i| st.completions.remove(i)) {
                st.hand_over_polling();
                return checked(c);
            }
            let left = deadline.map_or(Duration::ZERO, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                // Out of time, or a zero timeout: what the queue holds now, reaped without
                // blocking (unless another waiter polls), is still looked at once.
                if !reaped && !st.polling {
                    reaped = true;
                    self.reap_ready(&mut st);
                    st = self.wake_receive_waker(st);
                    continue;
                }
                st.hand_over_polling();
                return Err(DataPathError::Timeout { wr_id: want.wr_id(), timeout });
            }
            if st.polling {
                // Another waiter polls; it wakes us when it sets ours aside, or leaves. (Not
                // reaped here without blocking, though it may be in the queue already: what
                // this waiter took for others would leave the poller blocked in its wait for
                // a completion no longer there, until its slice ran out: 10 ms stalls.)
                st.waiting.push(Waiting { want, thread: std::thread::current() });
                drop(st);
                // (What this thread holds goes first: the poller's completion may need it.)
                rpcrdma_verbs::flush_held();
                std::thread::park_timeout(left);
                st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
                let me = std::thread::current().id();
                st.waiting.retain(|w| w.thread.id() != me);
                continue;
            }
            st.polling = true;
            drop(st);
            let mut batch = [Completion::default(); REAP_BATCH];
            let polling = poll_first.min(left);
            let mut n = self.poll_first(&mut batch, polling);
            // The clock is read again only if time went by polling.
            let left = if polling.is_zero() {
                left
            } else {
                deadline.map_or(Duration::ZERO, |d| d.saturating_duration_since(Instant::now()))
            };
            // Blocks until a completion or the deadline, with no slice: a waiter whose
            // completion this reaps is woken as it is set aside, and a connection closed meanwhile
            // flushes its work requests, which wakes this wait too.
            if n == 0 && !left.is_zero() {
                if let Some(c) = self.qp.wait_cq(left) {
                    batch[0] = c;
                    n = 1 + self.qp.poll_cq(&mut batch[1..]);
                }
            }
            st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
            st.polling = false;
            self.pass_on_receive_waker(&mut st);
            let mut found = None;
            for &c in &batch[..n] {
                if found.is_none() && want.claims(&c) {
                    self.note_reaped(&mut st, &c);
                    found = Some(c);
                } else {
                    self.keep_for_owner(&mut st, c);
                }
            }
            st = self.wake_receive_waker(st);
            if let Some(c) = found {
                st.hand_over_polling();
                return checked(c);
            }
        }
    }

    /// A poller stopped: the waker left with it for the next message ([`Transport::arm_receive`])
    /// is armed on the queue pair, or fired at once if completions are queued there.
    fn pass_on_receive_waker(&self, st: &mut Reaped) {
        if let Some(w) = st.receive_waker.as_ref() {
            // Anything but armed (something queued, or a queue pair that cannot wake a waker):
            // its owner looks now.
            if self.qp.arm_waker(w) != Arm::Armed {
                let w = st.receive_waker.take().expect("just seen");
                st.fired.push(w);
            }
        }
    }

    /// Polls the completion queue without blocking for up to `limit` ([`crate::spin`]) until
    /// it holds something: a completion arriving meanwhile is reaped without this thread
    /// having slept and been woken. Returns how many completions it reaped into `batch`.
    fn poll_first(&self, batch: &mut [Completion], limit: Duration) -> usize {
        crate::spin::poll_for(limit, || Some(self.qp.poll_cq(batch)).filter(|&n| n > 0)).unwrap_or(0)
    }

    /// What every reaped completion tells the connection, whoever reaped it: a Send's buffer
    /// is free again, and the first error is kept for [`Transport::ended`].
    pub(super) fn note_reaped(&self, st: &mut Reaped, c: &Completion) {
        self.send_done(c.wr_id);
        if !c.is_ok() && st.first_error.is_none() {
            st.first_error = Some(*c);
        }
    }

    /// A completion reaped for another waiter: noted, and kept for its owner (woken if it
    /// waits) unless nobody waits for it ([`UNWAITED_WR_BIT`]).
    pub(super) fn keep_for_owner(&self, st: &mut Reaped, c: Completion) {
        self.note_reaped(st, &c);
        if c.wr_id & UNWAITED_WR_BIT == 0 {
            match st.waiting.iter().find(|w| w.want.claims(&c)) {
                // Unparked once the lock is released (`wake_receive_waker`): unparked under
                // it, the owner woke only to block on the lock its waker still held.
                Some(w) => {
                    let thread = w.thread.clone();
                    st.unpark.push(thread);
                }
                // A message nobody's thread waits for: the task that armed for one wakes
                // (once the lock is released: `wake_receive_waker`).
                None if Want::AnyReceive.claims(&c) => {
                    if let Some(w) = st.receive_waker.take() {
                        st.fired.push(w);
                    }
                }
                None => {}
            }
            st.completions.push_back(c);
        }
    }

    /// Wakes the waker a message set aside fired ([`Transport::arm_receive`]) and the
    /// threads whose completions were set aside, with the lock released, then locks again.
    fn wake_receive_waker<'a>(&'a self, mut st: MutexGuard<'a, Reaped>) -> MutexGuard<'a, Reaped> {
        // Taken out onto the stack a batch at a time, so that the lists keep their memory: a
        // list taken whole left an empty one behind, which a completion set aside by another
        // thread meanwhile grew again (an allocation now and then in the steady state).
        const BATCH: usize = 16;
        while !(st.fired.is_empty() && st.unpark.is_empty()) {
            let mut fired: [Option<Waker>; BATCH] = Default::default();
            let mut unpark: [Option<std::thread::Thread>; BATCH] = Default::default();
            // Oldest first, as they were set aside.
            let (f, u) = (st.fired.len().min(BATCH), st.unpark.len().min(BATCH));
            fired.iter_mut().zip(st.fired.drain(..f)).for_each(|(slot, w)| *slot = Some(w));
            unpark.iter_mut().zip(st.unpark.drain(..u)).for_each(|(slot, t)| *slot = Some(t));
            drop(st);
            fired.into_iter().flatten().for_each(Waker::wake);
            unpark.into_iter().flatten().for_each(|t| t.unpark());
            st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
        }
        st
    }

    /// Arms `waker` to be woken when a completion is queued on this connection (a message, or
    /// anything else: the waker's owner looks and arms again) or a message another thread
    /// reaped is set aside with no thread waiting for it, so that an async caller's executor
    /// receives without a thread of its own blocked on the completion queue
    /// ([`QueuePair::arm_waker`]). [`Arm::Waiting`]: a message is there already, or the queue
    /// pair still holds completions after one reaping (look again: receive it); the waker armed
    /// before stays armed on the queue pair; [`Arm::Unsupported`]: the backend cannot wake
    /// a waker. One waker at a time: an arm that answers [`Arm::Armed`] replaces the one
    /// before. (A lane's one armed task counts on staying armed while other tasks arm and are
    /// told to look: [`QueuePair::arm_waker`] keeps the same rule.) While another thread polls
    /// the queue pair, the waker is left with that thread, which fires it for a message it
    /// sets aside and arms the queue pair with it when it stops.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use negotiate::datapath::{Transport, ReceivePool};
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let peer = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     (InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap().0, pd)
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// # let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// # let (peer_qp, ppd) = peer.join().unwrap();
    /// let conn = Transport::<InProcess>::new(pd, qp, t);
    /// let pool = ReceivePool::new(&conn, 2, 64).unwrap();
    /// let waker = std::task::Waker::noop();
    /// assert_eq!(conn.arm_receive(waker), Arm::Armed);
    /// # let msg = ppd.register(b"ping".to_vec(), Access::empty()).unwrap();
    /// peer_qp.post_send(1, &[Sge::whole(&msg)], None).unwrap();
    /// assert_eq!(conn.arm_receive(waker), Arm::Waiting); // the message is there: receive it
    /// assert_eq!(&pool.receive_within(&conn, Duration::ZERO).unwrap().bytes[..], b"ping");
    /// ```
    pub fn arm_receive(&self, waker: &Waker) -> Arm {
        let mut st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
        for _ in 0..2 {
            if st.completions.iter().any(|c| Want::AnyReceive.claims(c)) {
                return Arm::Waiting;
            }
            if st.polling {
                // The thread polling takes what arrives: it fires this waker for a message it
                // sets aside (`keep_for_owner`), and arms the queue pair with it when it stops
                // (`pass_on_receive_waker`). Armed on the queue pair now instead, it found the
                // completions the poller had yet to take, and the connection looked ready again
                // and again with nothing to receive.
                st.receive_waker = Some(waker.clone());
                return Arm::Armed;
            }
            // Armed with the lock held: a poller that reaps the message meanwhile sets it
            // aside only after this, and so finds the waker.
            match self.qp.arm_waker(waker) {
                Arm::Armed => {
                    st.receive_waker = Some(waker.clone());
                    return Arm::Armed;
                }
                // Completions are queued: a message, or only the completion of a work request
                // nobody waits for (a reply's Send where its memory was read as it was posted).
                // Reaped here (that one is dropped), then looked at again: left queued, it made
                // the connection look ready again and again with nothing to receive.
                Arm::Waiting => {
                    // This caller's own waker, left from an earlier arm, is not fired for what
                    // is reaped here: it is armed again below. (Anyone else's is; this may run
                    // under a caller's lock, as the lane's: a woken task waits for it briefly.)
                    if st.receive_waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                        st.receive_waker = None;
                    }
                    st = self.reap_unless_polled(st);
                }
                arm => return arm,
            }
        }
        Arm::Waiting
    }

    /// Takes back `waker`, armed before with [`Transport::arm_receive`], as its owner is about
    /// to receive itself: the message it finds is not told to it, and the queue pair is not
    /// armed with it again when a poller stops (`pass_on_receive_waker`). A server's loop
    /// does this before each look at a connection it was woken for: the message it took
    /// fired its own waker, which queued the connection once more, and the waker left
    /// behind was armed again by the reply's Send completion, so that the requester's next
    /// call woke the loop from the requester's thread (a lock of the loop's state on the
    /// round trip's path, both sides).
    pub fn disarm_receive(&self, waker: &Waker) {
        let mut st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
        if st.receive_waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            st.receive_waker = None;
        }
    }

    /// Reaps what the completion queue holds, without blocking, unless another waiter polls
    /// it (which reaps it then): completions that nobody waits for (unwaited and selectively
    /// signaled work requests, [`Transport::set_unwaited_replies`]) free their send-queue
    /// slots only once reaped.
    pub(super) fn reap_queued(&self) {
        drop(self.reap_unless_polled(self.set_aside.lock().unwrap_or_else(PoisonError::into_inner)));
    }

    /// [`Transport::reap_ready`] and the wakes it gathered, unless another waiter polls the
    /// completion queue (it reaps what is there).
    fn reap_unless_polled<'a>(&'a self, mut st: MutexGuard<'a, Reaped>) -> MutexGuard<'a, Reaped> {
        if !st.polling {
            self.reap_ready(&mut st);
            st = self.wake_receive_waker(st);
        }
        st
    }

    /// Receives completed and not yet claimed: messages that arrived and wait to be read.
    /// Reaps what the completion queue holds first, without blocking, unless another waiter
    /// is polling it (then what that waiter has set aside counts).
    pub fn receives_waiting(&self) -> usize {
        let st = self.reap_unless_polled(self.set_aside.lock().unwrap_or_else(PoisonError::into_inner));
        st.completions.iter().filter(|c| Want::AnyReceive.claims(c)).count()
    }

    /// Reaps what the completion queue holds and waits (up to `limit`) for a waiter polling it
    /// to note what it reaped, so that [`Transport::ended`] afterwards names the error that
    /// ended the connection. A waiter polls outside the lock: without this wait, a connection
    /// cut by the retry timeout could be recorded as lost with no error while the waiter held
    /// the `RetryExceeded` completion (seen under load in CI). Once the queue pair is down its
    /// work requests are flushed, which wakes a poller at once; `limit` bounds the wait all
    /// the same, and a queue pair still up is not waited on.
    pub fn settle_reaped(&self, limit: Duration) {
        // Only a queue pair that is down has flushed what the poller waits for (and only then
        // does `ended` read the first error): one still up is not waited on.
        let down = self.qp.state() != QpState::Ready;
        let deadline = Instant::now() + limit;
        let mut st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
        while down && st.polling && Instant::now() < deadline {
            drop(st);
            std::thread::sleep(Duration::from_micros(200));
            st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
        }
        drop(self.reap_unless_polled(st));
    }

    /// Reaps what the completion queue holds, without blocking, for the owners; only while
    /// nobody polls (see [`Transport::wait_within`]).
    pub(super) fn reap_ready(&self, st: &mut Reaped) {
        debug_assert!(!st.polling);
        let mut batch = [Completion::default(); REAP_BATCH];
        loop {
            let n = self.qp.poll_cq(&mut batch);
            for &c in &batch[..n] {
                self.keep_for_owner(st, c);
            }
            if n < batch.len() {
                return;
            }
        }
    }
}

/// What [`Transport`]'s waiters share.
#[derive(Default)]
pub(super) struct Reaped {
    /// Reaped and not yet claimed, oldest first. Claimed oldest first too: taking the first
    /// match and filling its place with the newest (`swap_remove`) once let a server's newest
    /// Receive completion overtake older ones again and again, so that under steady load some
    /// calls were never served until the requester's timeout closed the connection.
    pub(super) completions: VecDeque<Completion>,
    pub(super) polling: bool,
    /// Who waits while another polls, and for what: each is woken alone when its completion is
    /// set aside, and one of them when the poller leaves.
    pub(super) waiting: Vec<Waiting>,
    /// The first error completion reaped, for [`Transport::ended`].
    pub(super) first_error: Option<Completion>,
    /// Why this side closed the connection ([`Transport::close`]), if it did.
    pub(super) closed: Option<String>,
    /// The waker [`Transport::arm_receive`] armed, for a message nobody's thread waits for.
    pub(super) receive_waker: Option<Waker>,
    /// Wakers a message set aside fired, to wake once the lock is released.
    pub(super) fired: Vec<Waker>,
    /// Waiting threads whose completions were set aside, to unpark once the lock is released.
    pub(super) unpark: Vec<std::thread::Thread>,
}

impl Reaped {
    /// A waiter leaves: if nobody polls, one of those still waiting is woken to poll in its
    /// place (it would otherwise sleep until its timeout with nobody reaping its completion).
    pub(super) fn hand_over_polling(&self) {
        if !self.polling {
            if let Some(w) = self.waiting.first() {
                w.thread.unpark();
            }
        }
    }
}
