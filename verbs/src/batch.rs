//! Posts held for one doorbell: the Sends and Writes a thread posts while a [`PostBatch`] is
//! open may be handed to the device together when it closes, as eRPC batches a burst's
//! transmissions and as a chain of work requests rings a device's doorbell once.
//!
//! Over TCP each posted work request otherwise costs its own `sendto`, which on the loopback
//! also runs the receiver's side of the stack: about a quarter of the CPU of the 64 x 10,000
//! load went to them, two a call (docs/benchmarks.md, "twenty-seventh session"). A server
//! answering a burst of calls, or a client's dispatcher sending the calls its replies gave
//! credit for, writes the burst's frames in one system call instead.
//!
//! What is held never waits on its holder: a thread that waits for anything through the
//! backend (a completion, a readiness loop's turn) hands its held posts over first
//! ([`flush_held`]), and any thread may hand over a queue pair's held posts
//! ([`QueuePair::flush_posts`]). An RDMA Read is never held: its requester waits for it. Which
//! backends hold: TCP. In process a Send is delivered as it is posted (nothing to gather);
//! rdma-core posts each work request at once (a chain of one `ibv_post_send` is
//! [`QueuePair::post_chain`]'s, not a batch's).
//!
//! [`QueuePair::flush_posts`]: crate::QueuePair::flush_posts
//! [`QueuePair::post_chain`]: crate::QueuePair::post_chain

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::Arc;

/// A queue pair's posts held by this thread: what hands them over.
pub(crate) trait Held: Send + Sync {
    /// Writes (posts to the device) what is queued on this queue pair.
    fn hand_over(&self);
}

/// The most queue pairs a thread holds posts on at once; a post on one more is handed over
/// as it is made. (A fixed table: holding allocates nothing, not even a thread's first time.)
const HELD_MOST: usize = 8;

thread_local! {
    /// Open batches on this thread (they nest).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The queue pairs this thread holds posts on, each once.
    static HELD: RefCell<[Option<Arc<dyn Held>>; HELD_MOST]> = const { RefCell::new([const { None }; HELD_MOST]) };
}

/// While open, the Sends and Writes this thread posts may be held and handed to the device
/// together: when the last open batch of the thread closes (drop), when the thread waits
/// through the backend, or when [`flush_held`] or a queue pair's `flush_posts` says. Not
/// `Send`: a batch is its thread's.
///
/// ```
/// use rpcrdma_verbs::PostBatch;
///
/// let batch = PostBatch::open();
/// // ... post a burst's Sends: over TCP they go in one write ...
/// drop(batch); // handed over here
/// assert!(!PostBatch::is_open());
/// ```
#[derive(Debug)]
#[must_use = "a batch holds posts only while it is open"]
pub struct PostBatch {
    _this_thread: PhantomData<*const ()>,
}

impl PostBatch {
    /// Opens a batch on this thread (inside an open one: nested, handed over when the
    /// outermost closes).
    pub fn open() -> PostBatch {
        DEPTH.set(DEPTH.get() + 1);
        PostBatch { _this_thread: PhantomData }
    }

    /// Whether a batch is open on this thread.
    pub fn is_open() -> bool {
        DEPTH.get() > 0
    }

    /// Until the returned guard drops, this thread's posts are not held (what was held
    /// stays held): for code run inside a batch that posts and then waits by means the
    /// backend does not see, as a server's handler making calls of its own may.
    ///
    /// ```
    /// use rpcrdma_verbs::PostBatch;
    ///
    /// let batch = PostBatch::open();
    /// {
    ///     let _paused = PostBatch::pause();
    ///     assert!(!PostBatch::is_open());
    /// }
    /// assert!(PostBatch::is_open());
    /// drop(batch);
    /// ```
    pub fn pause() -> Paused {
        Paused { depth: DEPTH.replace(0), _this_thread: PhantomData }
    }
}

/// A pause of this thread's batches ([`PostBatch::pause`]); they hold again when it drops.
#[derive(Debug)]
#[must_use = "posts are held again as soon as the pause drops"]
pub struct Paused {
    depth: u32,
    _this_thread: PhantomData<*const ()>,
}

impl Drop for Paused {
    fn drop(&mut self) {
        DEPTH.set(self.depth);
    }
}

impl Drop for PostBatch {
    fn drop(&mut self) {
        // (Saturating: a batch dropped inside a pause it was opened before finds 0.)
        let depth = DEPTH.get();
        debug_assert!(depth > 0, "a PostBatch closed inside a pause of it");
        DEPTH.set(depth.saturating_sub(1));
        if depth <= 1 {
            flush_held();
        }
    }
}

/// Hands this thread's held posts to their devices now (the batch stays open). The backends
/// call it before a thread waits; a caller that waits by other means (a condition variable,
/// a channel) calls it first.
pub fn flush_held() {
    if HELD.with(|h| h.borrow()[0].is_none()) {
        return;
    }
    // Taken out before handing over: writing may close a connection, whose teardown must
    // not find the table borrowed.
    let mut held: [Option<Arc<dyn Held>>; HELD_MOST] = [const { None }; HELD_MOST];
    HELD.with(|h| std::mem::swap(&mut *h.borrow_mut(), &mut held));
    for qp in held.iter().flatten() {
        qp.hand_over();
    }
}

/// Notes that this thread holds posts on `qp` (once per queue pair), to hand over later.
pub(crate) fn hold(qp: &Arc<impl Held + 'static>) {
    let this = Arc::as_ptr(qp) as *const ();
    let kept = HELD.with(|h| {
        let mut h = h.borrow_mut();
        // (Filled from the front, and emptied whole: the first free slot ends the held.)
        for slot in h.iter_mut() {
            match slot {
                Some(q) if Arc::as_ptr(q) as *const () == this => return true,
                Some(_) => {}
                None => {
                    *slot = Some(qp.clone());
                    return true;
                }
            }
        }
        false
    });
    if !kept {
        qp.hand_over();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Counting(AtomicU32);

    impl Held for Counting {
        fn hand_over(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn held_posts_are_handed_over_once_when_the_outermost_batch_closes() {
        let qp = Arc::new(Counting(AtomicU32::new(0)));
        let outer = PostBatch::open();
        let inner = PostBatch::open();
        hold(&qp);
        hold(&qp);
        drop(inner);
        assert_eq!(qp.0.load(Ordering::SeqCst), 0, "a nested batch's close hands nothing over");
        assert!(PostBatch::is_open());
        drop(outer);
        assert_eq!(qp.0.load(Ordering::SeqCst), 1, "once per queue pair, at the outermost close");
        assert!(!PostBatch::is_open());
    }

    #[test]
    fn a_queue_pair_beyond_the_table_is_handed_over_at_once() {
        let qps: Vec<_> = (0..=HELD_MOST).map(|_| Arc::new(Counting(AtomicU32::new(0)))).collect();
        let batch = PostBatch::open();
        for qp in &qps {
            hold(qp);
        }
        let handed = |qp: &Arc<Counting>| qp.0.load(Ordering::SeqCst);
        assert!(qps[..HELD_MOST].iter().all(|q| handed(q) == 0), "held");
        assert_eq!(handed(&qps[HELD_MOST]), 1, "one beyond the table goes at once");
        drop(batch);
        assert!(qps.iter().all(|q| handed(q) == 1));
    }

    #[test]
    fn a_pause_holds_nothing_and_keeps_what_was_held() {
        let qp = Arc::new(Counting(AtomicU32::new(0)));
        let batch = PostBatch::open();
        hold(&qp);
        let paused = PostBatch::pause();
        assert!(!PostBatch::is_open());
        drop(paused);
        assert!(PostBatch::is_open());
        assert_eq!(qp.0.load(Ordering::SeqCst), 0, "the pause handed nothing over");
        drop(batch);
        assert_eq!(qp.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn flush_held_hands_over_with_the_batch_still_open() {
        let qp = Arc::new(Counting(AtomicU32::new(0)));
        let batch = PostBatch::open();
        hold(&qp);
        flush_held();
        assert_eq!(qp.0.load(Ordering::SeqCst), 1);
        assert!(PostBatch::is_open());
        drop(batch);
        assert_eq!(qp.0.load(Ordering::SeqCst), 1, "nothing held since: nothing more handed over");
    }
}
