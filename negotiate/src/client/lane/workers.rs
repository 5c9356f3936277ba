//! The client's workers: threads for what must not hold up the dispatcher, nor a caller
//! that receives for others. Three jobs are theirs: a backward call's handler (the
//! application's code, for as long as it takes: RFC 8167), the keeper's NULL call
//! ([`ClientConfig::keep_connected`](crate::client::ClientConfig::keep_connected)), which waits
//! for a connection and its reply, and the transport-properties exchange an async call's
//! settling asks for (a blocking call of its own). A client has no worker thread until its
//! first job; the first thread then stays, others start while every thread is busy, up to
//! [`Workers::new`]'s bound, and leave once not needed for [`KEEP_ALIVE`].
//!
//! What bounds the queue is the lanes, not the peer: each lane hands over at most
//! [`BACKWARD_HELD_MOST`] backward calls at once (a server beyond its one backward credit,
//! RFC 8167 section 4.1, has the rest wait in the lane, bounded: `backward.rs`), one keeper
//! call and one exchange; the threads are bounded by [`JOBS_A_LANE_MOST`] a lane, so a job
//! never waits behind another lane's.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rpcrdma_v1::header::Detached;
use rpcrdma_verbs::Backend;

use super::{Link, Shared};
use crate::client_config::KeepConnected;
use crate::datapath::ReplyParams;

/// How long a thread beyond the first waits for a job before it leaves.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

/// The most workers serving one lane's backward calls at once; more calls wait in the lane
/// (`backward.rs`). The server holds one backward credit (`backchannel::CREDITS`): a
/// well-behaved one has a single call outstanding, and the room beyond that covers the
/// moment between a reply's Send and the worker counting it done.
pub(super) const BACKWARD_HELD_MOST: usize = 2;

/// The most jobs one lane has with the workers at once: [`BACKWARD_HELD_MOST`] backward
/// calls, one keeper call, one properties exchange. The workers' bound is this many threads
/// a lane, so that every job has a thread at once and no lane's jobs wait for another's.
pub(super) const JOBS_A_LANE_MOST: usize = BACKWARD_HELD_MOST + 2;

/// A backward call received and judged, to be served (`backward.rs`): its bytes, its
/// header's positions in them, how to answer it, and the connection it came on.
pub(super) struct BackwardCall<B: Backend> {
    pub(super) link: Arc<Link<B>>,
    pub(super) bytes: Vec<u8>,
    pub(super) header: Detached,
    pub(super) params: ReplyParams,
}

/// What a worker does.
pub(super) enum Job<B: Backend> {
    /// Serves a backward call of `lane`'s, then those waiting in the lane.
    Backward { lane: Arc<Shared<B>>, call: BackwardCall<B> },
    /// Makes the keeper's NULL call on `lane`.
    Keep { lane: Arc<Shared<B>>, keep: KeepConnected },
    /// Makes the transport-properties exchange an async call's settling asked for on `lane`
    /// (blocking: never on the caller's executor, nor on the dispatcher's thread).
    Exchange { lane: Arc<Shared<B>> },
}

impl<B: Backend> Job<B> {
    fn run(self) {
        match self {
            Job::Backward { lane, call } => lane.serve_backward_calls(call),
            Job::Keep { lane, keep } => lane.keep_once(keep),
            Job::Exchange { lane } => {
                lane.lock().exchange_queued = false;
                lane.exchange_properties()
            }
        }
    }
}

/// The client's workers: a queue of jobs and the threads that take them.
pub(in crate::client) struct Workers<B: Backend> {
    st: Mutex<Queue<B>>,
    work: Condvar,
    /// The most threads at once.
    most: usize,
}

struct Queue<B: Backend> {
    jobs: VecDeque<Job<B>>,
    threads: usize,
    /// Threads waiting for a job.
    idle: usize,
    closing: bool,
    handles: Vec<JoinHandle<()>>,
}

impl<B: Backend> Workers<B> {
    /// Workers of at most `most` threads (at least one), none started yet.
    pub(super) fn new(most: usize) -> Arc<Self> {
        Arc::new(Workers {
            st: Mutex::new(Queue { jobs: VecDeque::new(), threads: 0, idle: 0, closing: false, handles: Vec::new() }),
            work: Condvar::new(),
            most: most.max(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<B>> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `job` for a worker, starting a thread if none is free and the bound allows;
    /// gives it back (`Some`) once the client is closing, or when the first thread cannot be
    /// had.
    pub(super) fn submit(self: &Arc<Self>, job: Job<B>) -> Option<Job<B>> {
        let mut q = self.lock();
        if q.closing {
            return Some(job);
        }
        // (An idle thread not yet woken for the jobs queued before is no thread for this one.)
        if q.idle <= q.jobs.len() && q.threads < self.most {
            q.handles.retain(|h| !h.is_finished());
            let me = self.clone();
            match std::thread::Builder::new().name("negotiate-work".into()).spawn(move || me.run()) {
                Ok(h) => {
                    q.threads += 1;
                    q.handles.push(h);
                }
                Err(e) if q.threads == 0 => {
                    log::warn!("no thread for the client's workers ({e})");
                    return Some(job);
                }
                // The threads there take it when one is free.
                Err(_) => {}
            }
        }
        q.jobs.push_back(job);
        drop(q);
        self.work.notify_one();
        None
    }

    fn run(&self) {
        let mut q = self.lock();
        loop {
            if q.closing {
                break;
            }
            if let Some(job) = q.jobs.pop_front() {
                drop(q);
                job.run();
                q = self.lock();
                continue;
            }
            q.idle += 1;
            let (guard, waited) = self.work.wait_timeout(q, KEEP_ALIVE).unwrap_or_else(PoisonError::into_inner);
            q = guard;
            q.idle -= 1;
            if waited.timed_out() && q.jobs.is_empty() && q.threads > 1 {
                break;
            }
        }
        q.threads -= 1;
    }

    /// Ends the workers once the client's lanes are closing: jobs not yet taken are dropped
    /// (their connections are closed), the ones running are waited for.
    pub(super) fn close(&self) {
        let (jobs, handles) = {
            let mut q = self.lock();
            q.closing = true;
            (std::mem::take(&mut q.jobs), std::mem::take(&mut q.handles))
        };
        self.work.notify_all();
        // (Their lanes' state, held by the jobs, may be the last reference to these workers.)
        drop(jobs);
        // (A handler that dropped the client runs on one of them: not waited for by itself.)
        let me = std::thread::current().id();
        for h in handles.into_iter().filter(|h| h.thread().id() != me) {
            let _ = h.join();
        }
    }
}
