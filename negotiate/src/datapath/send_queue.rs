//! A connection's send queue as this side tracks it: which work requests to signal, which
//! posted ones are known complete, and the registered Send buffers they free.
//!
//! Selective signaling, as the Linux xprtrdma and svcrdma post their Sends: a work request
//! nobody waits for is posted unsignaled except every [`SIGNAL_EVERY`]-th, so that a Send's
//! completion wakes no thread for nothing. A send queue completes its work requests in posting
//! order, and a completion (signaled, or an error, which every work request reports) says that
//! every work request posted before it on the queue pair has completed (IBA 10.8.6.1;
//! `verbs::SendFlags`): a completion frees the buffers of everything posted up to it. The
//! posting order is the order of successful posts, so a post is recorded under the same lock
//! as the post itself ([`Connection::post_sq`](super::Connection)), never by `wr_id`.

use std::collections::VecDeque;

use verbs::SendFlags;

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
    /// Work requests posted and not yet known complete, in posting order, each with the Send
    /// buffer it holds.
    posted: VecDeque<(u64, Option<R>)>,
    /// Unsignaled work requests posted since the last signaled one.
    unsignaled: u32,
    /// Signal at least every this many: [`SIGNAL_EVERY`], fewer on a short send queue, whose
    /// slots unsignaled work requests hold until a later completion is reaped.
    signal_every: u32,
    /// Send buffers registered so far.
    pub(super) registered: u64,
}

impl<R> SendQueue<R> {
    /// Bookkeeping for a queue pair of `max_send_wr` send-queue slots: at most a quarter of
    /// them unsignaled in a row, so that a few batches waiting to be reaped still fit.
    pub(super) fn new(max_send_wr: u32) -> Self {
        SendQueue {
            free: Vec::new(),
            posted: VecDeque::with_capacity(2 * SEND_BUFFERS_KEPT),
            unsignaled: 0,
            signal_every: SIGNAL_EVERY.min(max_send_wr / 4).max(1),
            registered: 0,
        }
    }

    /// The flags of the next work request: signaled if someone waits for it, or if it is the
    /// `signal_every`-th in a row nobody waits for.
    pub(super) fn flags(&self, waited: bool) -> SendFlags {
        if waited || self.unsignaled + 1 >= self.signal_every {
            SendFlags::SIGNALED
        } else {
            SendFlags::empty()
        }
    }

    /// Work request `wr_id` was posted with `flags`, holding `buffer`.
    pub(super) fn posted(&mut self, wr_id: u64, flags: SendFlags, buffer: Option<R>) {
        if flags.contains(SendFlags::SIGNALED) {
            self.unsignaled = 0;
        } else {
            self.unsignaled += 1;
        }
        self.posted.push_back((wr_id, buffer));
    }

    /// A completion for `wr_id` was reaped: it and everything posted before it are complete,
    /// and their buffers free. A `wr_id` not posted through here frees nothing (it was taken
    /// off already, or never recorded), so each buffer comes back exactly once.
    pub(super) fn completed(&mut self, wr_id: u64) {
        let Some(at) = self.posted.iter().position(|&(id, _)| id == wr_id) else { return };
        for _ in 0..=at {
            if let Some((_, Some(buffer))) = self.posted.pop_front() {
                self.give_back(buffer);
            }
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

    #[test]
    fn every_sixteenth_unwaited_work_request_is_signaled_and_a_waited_one_restarts_the_count() {
        let mut q = SendQueue::<()>::new(128);
        let mut signaled = Vec::new();
        for id in 1..=40 {
            let flags = q.flags(id == 20);
            if flags.contains(SendFlags::SIGNALED) {
                signaled.push(id);
            }
            q.posted(id, flags, None);
        }
        assert_eq!(signaled, [16, 20, 36]);
    }

    #[test]
    fn a_short_send_queue_is_signaled_more_often() {
        let q = SendQueue::<()>::new(4);
        assert_eq!(q.flags(false), SendFlags::SIGNALED);
        assert_eq!(SendQueue::<()>::new(32).signal_every, 8);
    }

    #[test]
    fn a_completion_frees_every_buffer_posted_up_to_it_once() {
        let mut q = SendQueue::new(128);
        for id in [7, 3, 9, 4] {
            q.posted(id, SendFlags::empty(), Some(id));
        }
        q.completed(9);
        assert_eq!(q.free, [7, 3, 9]);
        q.completed(9); // a flush of one already covered: nothing more
        q.completed(3);
        assert_eq!(q.free, [7, 3, 9]);
        q.completed(4);
        assert_eq!(q.free, [7, 3, 9, 4]);
        assert!(q.posted.is_empty());
    }
}
