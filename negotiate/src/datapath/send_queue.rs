//! A connection's send queue as this side tracks it: which work requests to signal, which
//! posted ones are known complete, and the registered Send buffers they free.
//!
//! Selective signaling, as the Linux xprtrdma and svcrdma post their Sends: a work request
//! nobody waits for is posted unsignaled except every [`SIGNAL_EVERY`]-th, so that a Send's
//! completion wakes no thread for nothing. A send queue completes its work requests in posting
//! order, and a completion (signaled, or an error, which every work request reports) says that
//! every work request posted before it on the queue pair has completed (IBA 10.8.6.1;
//! `rpcrdma_verbs::SendFlags`).
//!
//! "Posted before" is the order of the posts themselves, which several threads make without
//! a lock held across them (a post may be a socket write: holding one lock across every post
//! made concurrent callers wait for each other's writes, measured as more thread switches).
//! What is known instead, from two short critical sections around each post: an unsignaled
//! work request is recorded after its post returned, and each work request notes, before its
//! post, how many were recorded so far (its horizon). So the work requests recorded before
//! another's horizon were posted before it, and its completion frees them; a signaled work
//! request is recorded before its post (its completion may be reaped before the post
//! returns), so it cannot be known to precede anything and is freed by its own completion,
//! which it always gets. An unsignaled one that fails may have its completion reaped before
//! it is recorded: that completion waits in `strays` for the record.

use std::collections::VecDeque;

use rpcrdma_verbs::SendFlags;

/// At most this many unsignaled work requests in a row, the last signaled: a completion every
/// 16 posts keeps the Send buffers' reuse close and the wake-ups rare, as the Linux client
/// signals one Send per batch (`re_send_batch`, `frwr_send` in net/sunrpc/xprtrdma).
pub(super) const SIGNAL_EVERY: u32 = 16;

/// The most free Send buffers a connection keeps: those of the calls in flight (bounded by the
/// credits) and of the unsignaled Sends not yet known complete ([`SIGNAL_EVERY`]); a burst
/// beyond this many registers buffers that are then dropped.
const SEND_BUFFERS_KEPT: usize = 32 + SIGNAL_EVERY as usize;

/// A connection's send-queue bookkeeping; `R` is a registered Send buffer.
pub(super) struct SendQueue<R> {
    /// Send buffers free for the next Send.
    free: Vec<R>,
    /// Work requests recorded and not yet known complete, in recording order (`seq`); a
    /// signaled one still waiting for its own completion keeps the ones after it here even
    /// when they are freed (`buffer` taken, `done`).
    posted: VecDeque<Entry<R>>,
    /// Records made so far: the next record's `seq`.
    recorded: u64,
    /// Completions reaped for unsignaled work requests not recorded yet (they failed).
    strays: Vec<u64>,
    /// Unsignaled work requests decided since the last signaled one.
    unsignaled: u32,
    /// Signal at least every this many: [`SIGNAL_EVERY`], fewer on a short send queue, whose
    /// slots unsignaled work requests hold until a later completion is reaped.
    signal_every: u32,
    /// Send buffers registered so far.
    pub(super) registered: u64,
}

/// A recorded work request.
struct Entry<R> {
    wr_id: u64,
    seq: u64,
    /// The records made before its post began: those unsignaled were posted before it.
    horizon: u64,
    signaled: bool,
    buffer: Option<R>,
    done: bool,
}

/// A work request between [`SendQueue::start`] and [`SendQueue::finish`].
pub(super) struct Started<R> {
    /// The flags to post it with.
    pub(super) flags: SendFlags,
    horizon: u64,
    /// An unsignaled work request's buffer, recorded once posted.
    buffer: Option<R>,
}

impl<R> SendQueue<R> {
    /// Bookkeeping for a queue pair of `max_send_wr` send-queue slots: at most a quarter of
    /// them unsignaled in a row, so that a few batches waiting to be reaped still fit.
    pub(super) fn new(max_send_wr: u32) -> Self {
        SendQueue {
            free: Vec::new(),
            posted: VecDeque::with_capacity(2 * SEND_BUFFERS_KEPT),
            recorded: 0,
            strays: Vec::with_capacity(SIGNAL_EVERY as usize),
            unsignaled: 0,
            signal_every: SIGNAL_EVERY.min(max_send_wr / 4).max(1),
            registered: 0,
        }
    }

    /// Before posting work request `wr_id` holding `buffer`: its flags (signaled if someone
    /// waits for it, or if it is the `signal_every`-th in a row nobody waits for) and its
    /// horizon. A signaled one is recorded now.
    pub(super) fn start(&mut self, wr_id: u64, waited: bool, buffer: Option<R>) -> Started<R> {
        let horizon = self.recorded;
        if waited || self.unsignaled + 1 >= self.signal_every {
            self.unsignaled = 0;
            self.record(wr_id, horizon, true, buffer);
            Started { flags: SendFlags::SIGNALED, horizon, buffer: None }
        } else {
            self.unsignaled += 1;
            Started { flags: SendFlags::empty(), horizon, buffer }
        }
    }

    /// After the post of `wr_id`: `posted` says whether it was accepted. An unsignaled one is
    /// recorded now (or freed, if its failure was reaped already); a refused one frees its
    /// buffer.
    pub(super) fn finish(&mut self, wr_id: u64, started: Started<R>, posted: bool) {
        let signaled = started.flags.contains(SendFlags::SIGNALED);
        if signaled && !posted {
            // Refused: no completion will come; nothing else was freed by it.
            if let Some(at) = self.posted.iter().position(|e| e.wr_id == wr_id && !e.done) {
                self.free_at(at);
                self.pop_done();
            }
        } else if !signaled {
            let buffer = started.buffer;
            match self.strays.iter().position(|&id| id == wr_id) {
                _ if !posted => buffer.into_iter().for_each(|b| self.give_back(b)),
                Some(i) => {
                    self.strays.swap_remove(i);
                    buffer.into_iter().for_each(|b| self.give_back(b));
                }
                None => self.record(wr_id, started.horizon, false, buffer),
            }
        }
    }

    fn record(&mut self, wr_id: u64, horizon: u64, signaled: bool, buffer: Option<R>) {
        let seq = self.recorded;
        self.recorded += 1;
        self.posted.push_back(Entry { wr_id, seq, horizon, signaled, buffer, done: false });
    }

    /// A completion for `wr_id` was reaped (success, failure or flush): it is complete, and so
    /// is every unsignaled work request recorded before its horizon; their buffers are free,
    /// each once.
    pub(super) fn completed(&mut self, wr_id: u64) {
        let Some(at) = self.posted.iter().position(|e| e.wr_id == wr_id && !e.done) else {
            // An unsignaled work request's failure, reaped before its post was recorded (or a
            // work request posted elsewhere, which holds nothing here: the list stays short).
            if self.strays.len() == self.strays.capacity() {
                self.strays.remove(0);
            }
            self.strays.push(wr_id);
            return;
        };
        let horizon = self.posted[at].horizon;
        self.free_at(at);
        for i in 0..self.posted.len() {
            let e = &self.posted[i];
            if e.seq >= horizon {
                break;
            }
            if !e.signaled && !e.done {
                self.free_at(i);
            }
        }
        self.pop_done();
    }

    fn free_at(&mut self, at: usize) {
        let e = &mut self.posted[at];
        e.done = true;
        if let Some(buffer) = e.buffer.take() {
            self.give_back(buffer);
        }
    }

    fn pop_done(&mut self) {
        while self.posted.front().is_some_and(|e| e.done) {
            self.posted.pop_front();
        }
    }

    /// A free Send buffer, if one is kept; `None` counts a registration.
    pub(super) fn take_free(&mut self) -> Option<R> {
        let free = self.free.pop();
        self.registered += u64::from(free.is_none());
        free
    }

    /// A Send buffer is free again.
    pub(super) fn give_back(&mut self, buffer: R) {
        if self.free.len() < SEND_BUFFERS_KEPT {
            self.free.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts and finishes `wr_id` (posted) holding buffer `wr_id`; whether it was signaled.
    fn post(q: &mut SendQueue<u64>, wr_id: u64, waited: bool) -> bool {
        let s = q.start(wr_id, waited, Some(wr_id));
        let signaled = s.flags.contains(SendFlags::SIGNALED);
        q.finish(wr_id, s, true);
        signaled
    }

    #[test]
    fn every_sixteenth_unwaited_work_request_is_signaled_and_a_waited_one_restarts_the_count() {
        let mut q = SendQueue::new(128);
        let signaled: Vec<u64> = (1..=40).filter(|&id| post(&mut q, id, id == 20)).collect();
        assert_eq!(signaled, [16, 20, 36]);
    }

    #[test]
    fn a_short_send_queue_is_signaled_more_often() {
        let mut q = SendQueue::new(4);
        assert!(post(&mut q, 1, false));
        assert_eq!(SendQueue::<u64>::new(32).signal_every, 8);
    }

    #[test]
    fn a_completion_frees_what_was_recorded_before_its_post_once() {
        let mut q = SendQueue::new(128);
        for id in 1..=3 {
            post(&mut q, id, false);
        }
        // 10 is signaled and started; 4 is posted unsignaled meanwhile, before 10's post or
        // after it: 10's completion cannot free it.
        let s10 = q.start(10, true, Some(10));
        let s4 = q.start(4, false, Some(4));
        q.finish(4, s4, true);
        q.finish(10, s10, true);
        q.completed(10);
        assert_eq!(q.free, [10, 1, 2, 3]);
        q.completed(10); // flushed again? it is not recorded any more: nothing is freed
        assert_eq!(q.free, [10, 1, 2, 3]);
        post(&mut q, 11, true);
        q.completed(11);
        assert_eq!(q.free, [10, 1, 2, 3, 11, 4]);
        assert!(q.posted.is_empty());
    }

    #[test]
    fn a_signaled_work_request_waits_for_its_own_completion() {
        let mut q = SendQueue::new(128);
        let s1 = q.start(1, true, Some(1)); // signaled, its post still in progress
        let s2 = q.start(2, true, Some(2));
        q.finish(2, s2, true);
        q.completed(2); // 2 may have been posted first: 1 is not freed
        assert_eq!(q.free, [2]);
        q.finish(1, s1, true);
        q.completed(1);
        assert_eq!(q.free, [2, 1]);
        assert!(q.posted.is_empty());
    }

    #[test]
    fn a_failure_reaped_before_the_record_frees_the_buffer_once() {
        let mut q = SendQueue::new(128);
        let s = q.start(7, false, Some(7));
        q.completed(7); // another thread reaped its error completion inside the post
        q.finish(7, s, true);
        assert_eq!(q.free, [7]);
        assert!(q.posted.is_empty() && q.strays.is_empty());
        // A refused post gives its buffer back, signaled or not.
        let s = q.start(8, true, Some(8));
        q.finish(8, s, false);
        let s = q.start(9, false, Some(9));
        q.finish(9, s, false);
        assert_eq!(q.free, [7, 8, 9]);
        assert!(q.posted.is_empty());
    }
}
