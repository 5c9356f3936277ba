//! A -07 connection's payload stream (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.1:
//! "MUST NOT interleave Payload streams from multiple RPC messages"; 6.3.9: after a
//! REPLY_MIDDLE only its next part): one reply's Sends at a time, and the answers (RDMA2_ERROR,
//! CONNPROP) that must not go between its parts. A reply holds the stream while its Sends go
//! out ([`Transport::payload_stream`]), waiting for the requester's GRANT if its window is
//! shut; an answer never waits for either on the thread that reads the connection
//! ([`Transport::answer_draft07`]): it is queued and posted as soon as the stream is free and
//! the window has room, by whoever frees them. A reading thread that waited would leave the
//! GRANT unread that the reply ahead of it waits for.

use std::sync::atomic::fence;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{MutexGuard, PoisonError, TryLockError};
use std::time::Instant;

use rpcrdma_v1::header::Fixed;
use rpcrdma_verbs::Backend;

use super::{DataPathError, Transport};

/// The most answers a connection queues behind a continued reply or a shut window (as many
/// as a server's default credits let a requester have in flight; each a few words, or one
/// CONNPROP): a requester that sends more while it lets none of them go is cut
/// ([`DataPathError::AnswersPiledUp`]).
pub const ANSWERS_QUEUED_MOST: usize = 32;

/// The payload stream, held ([`Transport::payload_stream`]): when it is let go, the answers
/// queued meanwhile go out.
pub(crate) struct PayloadStream<'a, B: Backend> {
    conn: &'a Transport<B>,
    held: Option<MutexGuard<'a, ()>>,
    /// A message whose Sends failed: if partway (a continued reply cut off after a
    /// REPLY_MIDDLE), nothing may follow its parts (section 6.3.9) and the connection is
    /// being closed. Either way the queued answers stay queued until the stream is next let
    /// go (by the failure's own answer, [`super::send_draft07`], when the connection goes on).
    broken: bool,
}

impl<B: Backend> PayloadStream<'_, B> {
    /// The message's Sends failed: see [`PayloadStream::broken`].
    pub(crate) fn break_off(&mut self) {
        self.broken = true;
    }
}

impl<B: Backend> Drop for PayloadStream<'_, B> {
    fn drop(&mut self) {
        self.held.take();
        if !self.broken {
            // (Ordered against `answer_draft07`'s queuing: one of the two sees the other.)
            fence(SeqCst);
            self.conn.flush_answers();
        }
    }
}

impl<B: Backend> Transport<B> {
    /// Holds the payload stream while a -07 reply's Sends are posted, waiting for it if
    /// another reply's are going out (counted: [`Transport::blocked_sending`]).
    pub(crate) fn payload_stream(&self) -> PayloadStream<'_, B> {
        let held = match self.payload_stream.try_lock() {
            Ok(stream) => stream,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.stream_waiters.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if let Some(tell) = self.blocked_tell.get() {
                    tell.wake_by_ref();
                }
                // Its holder may wait for what this thread holds (`PostBatch`): that goes first.
                rpcrdma_verbs::flush_held();
                let stream = self.payload_stream.lock().unwrap_or_else(PoisonError::into_inner);
                self.stream_waiters.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                stream
            }
        };
        PayloadStream { conn: self, held: Some(held), broken: false }
    }

    /// Threads waiting to post a -07 reply while another's Sends go out (a continued reply
    /// whose next part may wait for the requester's GRANT): a server counts them out of the
    /// calls in progress that hold back receiving, since the GRANT must still be read.
    pub fn blocked_sending(&self) -> usize {
        self.stream_waiters.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Wakes `waker` each time a thread comes to wait to post a -07 reply
    /// ([`Transport::blocked_sending`] has grown): a server's event loop, which counts those
    /// threads out of the calls that hold back receiving, is told so at once, and reads the
    /// GRANT they wait for. Set once; false if it was set already.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use negotiate::datapath::Transport;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let peer = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
    /// # });
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// let conn = Transport::<InProcess>::new(pd, qp, t);
    /// assert!(conn.tell_when_blocked(std::task::Waker::noop().clone()));
    /// assert!(!conn.tell_when_blocked(std::task::Waker::noop().clone()));
    /// # drop(peer.join());
    /// ```
    pub fn tell_when_blocked(&self, waker: std::task::Waker) -> bool {
        self.blocked_tell.set(waker).is_ok()
    }

    /// Sends a -07 answer that is not a reply (an RDMA2_ERROR, a CONNPROP, a GRANT) from the
    /// thread that reads the connection: a GRANT at once (it may go between a continued
    /// reply's parts and one beyond the window, section 4.2.1.1); anything else at once if the
    /// stream is free and the window has room, else queued for whoever frees them. `Err` when
    /// the answer could not be posted, or [`ANSWERS_QUEUED_MOST`] wait already.
    pub(crate) fn answer_draft07(&self, bytes: &[u8]) -> Result<(), DataPathError> {
        if super::reply::is_grant(bytes) {
            return super::send_draft07(self, bytes);
        }
        {
            let mut queued = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
            if queued.len() >= ANSWERS_QUEUED_MOST {
                return Err(DataPathError::AnswersPiledUp { most: ANSWERS_QUEUED_MOST });
            }
            queued.push_back(bytes.to_vec());
            self.answers_waiting.store(queued.len(), std::sync::atomic::Ordering::SeqCst);
        }
        // (Ordered against the stream's release: one of the two sees the other.)
        fence(SeqCst);
        self.flush_answers_now()
    }

    /// Posts the queued answers while the stream is free and the window has room, without
    /// waiting for either; call it when either may have changed (a message judged, a reply's
    /// Sends done). A failure to post is the connection's: seen as its state.
    pub(crate) fn flush_answers(&self) {
        let _ = self.flush_answers_now();
    }

    fn flush_answers_now(&self) -> Result<(), DataPathError> {
        while self.answers_waiting.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            let _stream = match self.payload_stream.try_lock() {
                Ok(stream) => stream,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                // Its holder flushes when it lets go.
                Err(TryLockError::WouldBlock) => return Ok(()),
            };
            let Some(bytes) = self.pop_answer() else { return Ok(()) };
            let carried = Fixed::read(&bytes).and_then(|f| f.credit).unwrap_or(0);
            // Its total taken once filled, with no wait for credit: a shut window leaves the
            // answer first in the queue. Not waited for either (selectively signaled, its
            // buffer given back when a later completion covers it): the thread that reads the
            // connection flushes too, and must not stall on a requester that stops reading.
            let id = self.unwaited_wr_id();
            let posted =
                self.post_send_filled_draft07(id, None, bytes.len(), carried, Some(Instant::now()), |buf, _| {
                    buf.copy_from_slice(&bytes);
                    Ok(bytes.len())
                });
            match posted {
                Ok(()) => {}
                Err(DataPathError::NoCredit { .. }) => {
                    self.unpop_answer(bytes);
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn pop_answer(&self) -> Option<Vec<u8>> {
        let mut queued = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = queued.pop_front();
        self.answers_waiting.store(queued.len(), std::sync::atomic::Ordering::SeqCst);
        bytes
    }

    fn unpop_answer(&self, bytes: Vec<u8>) {
        let mut queued = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        queued.push_front(bytes);
        self.answers_waiting.store(queued.len(), std::sync::atomic::Ordering::SeqCst);
    }
}
