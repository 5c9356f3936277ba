//! Calls set aside while their Read chunks are fetched, where an RDMA Read crosses a network
//! (TCP, rdma-core; not in process, where a Read is a copy made as it is posted): the thread
//! holding the loop's role posts a call's Reads and goes on to the next message, of that
//! connection or another, instead of waiting for them or handing the role on (a thread switch
//! each side, a call, over TCP). The Reads' completions wake the connection's waker
//! (`RESUMES_WR_BIT`), and whoever holds the role when it comes up finishes the calls whose
//! Reads are in, oldest first: runs the handler and sends the reply, as for any call (eRPC's
//! continuations, where a blocked thread was). Up to [`SET_ASIDE_MOST`] calls per connection
//! (and one fewer than its calls in progress); another with Read chunks meanwhile is served
//! as before, its thread waiting for the Reads.

use std::collections::VecDeque;

use super::*;
use crate::datapath::Fetching;
use crate::server::call::{serve_fetching, start_fetching, Begun};
use rpcrdma_v1::header::Detached;

/// The most calls one connection has set aside at once (with those being finished): a
/// requester's window of calls in flight, 16 by default.
const SET_ASIDE_MOST: usize = 16;

/// A connection's calls set aside, and the buffers they are served from: kept for its next
/// ones, so that a steady stream of them allocates nothing; counted against the server's
/// memory budget as a thread's are.
pub(in crate::server) struct SetAside<B: Backend> {
    budget: Arc<MemoryBudget>,
    /// Buffers free for the next call set aside.
    spare: Vec<CallBuffers>,
    /// The calls set aside, oldest first, each with its buffers.
    parked: VecDeque<(Parked<B>, CallBuffers)>,
    /// Calls taken from `parked` and being finished (their handlers may run long): they count
    /// against the most set aside, so that a connection whose handlers block does not take
    /// ever more calls aside.
    finishing: usize,
    /// The connection ended ([`Loop::drop_set_aside`]): nothing is set aside nor kept.
    ended: bool,
}

/// What [`Loop::set_aside`] did with a call.
pub(super) enum Aside {
    /// Set aside, its Reads out.
    Parked,
    /// Answered already (its memory did not fit the budget), with the message it came in.
    Answered(Result<Answered, DataPathError>, Vec<u8>),
    /// Not set aside: serve it now. The message it came in.
    NotNow(Vec<u8>),
}

/// A call set aside: the message it came in (its header kept as offsets into it), how to
/// answer it, and its Reads.
struct Parked<B: Backend> {
    message: Vec<u8>,
    header: Detached,
    params: ReplyParams,
    fetching: Fetching<B>,
}

impl<B: Backend> SetAside<B> {
    /// Nothing set aside yet; the buffers' memory counted against `budget`.
    pub(in crate::server) fn new(budget: &Arc<MemoryBudget>) -> Self {
        SetAside { budget: budget.clone(), spare: Vec::new(), parked: VecDeque::new(), finishing: 0, ended: false }
    }

    /// Whether one more call may be set aside on a connection of at most `most` calls in
    /// progress: the calls set aside count as in progress, and with every call it may have
    /// set aside, the connection would be held off the ready queue and never looked at again.
    fn has_room(&self, most: usize) -> bool {
        !self.ended && self.parked.len() + self.finishing < SET_ASIDE_MOST.min(most.saturating_sub(1))
    }
}

impl<B: Backend, U: UpperLayerBinding + Send + Sync + ?Sized + 'static> Loop<B, U> {
    /// Whether a call of connection `served` with this header may be set aside: the backend's
    /// Reads cross a network, the connection wakes the loop (the Reads' completions must), and
    /// it has room for one more ([`SetAside::has_room`]).
    pub(super) fn may_set_aside(&self, served: &LoopConnection<B>, header: &Header<'_>) -> bool {
        !self.rdma_at_post
            && self.arms
            && !header.read_list().is_empty()
            && lock(&served.set_aside).has_room(served.most)
    }

    /// Sets the call whose message is `message` (its header `header`, answered with `params`)
    /// aside, its Read chunks posted; it is in progress until [`Loop::resume`] finishes it. A
    /// call whose memory does not fit the budget is answered here instead; one for which
    /// nothing was begun (no Read of any length, none could be posted, or no room) is served
    /// now, the usual way, which answers it. `answering` as for [`serve_call`].
    pub(super) fn set_aside(
        &self,
        served: &LoopConnection<B>,
        header: Detached,
        params: &ReplyParams,
        message: Vec<u8>,
        answering: impl FnOnce(),
    ) -> Aside {
        let mut aside = lock(&served.set_aside);
        let (true, Some(call)) = (aside.has_room(served.most), header.attach(&message)) else {
            return Aside::NotNow(message);
        };
        let mut buffers = aside.spare.pop().unwrap_or_else(|| CallBuffers::with_budget(&aside.budget));
        let begun = start_fetching(&served.conn, &call, params, &mut buffers, answering);
        let fetching = match begun {
            Begun::Fetching(fetching) => fetching,
            Begun::Answered(answered) => {
                aside.spare.push(buffers);
                return Aside::Answered(answered, message);
            }
            Begun::Not => {
                aside.spare.push(buffers);
                return Aside::NotNow(message);
            }
        };
        aside.parked.push_back((Parked { message, header, params: *params, fetching }, buffers));
        drop(aside);
        lock(&self.shared.stats).calls_set_aside += 1;
        Aside::Parked
    }

    /// Finishes connection `id`'s oldest call set aside if all of its Reads are in: serves it
    /// (its handler, its reply) on this thread, which holds the role. The ticket of that
    /// service for [`Loop::call_done`], or `None` when there was nothing to finish.
    pub(super) fn resume(&self, id: u64, served: &LoopConnection<B>) -> Option<Option<u64>> {
        let mut aside = lock(&served.set_aside);
        // A queue pair completes its work requests in the order they were posted: the oldest
        // call's Reads are in first.
        if !aside.parked.front_mut()?.0.fetching.poll(&served.conn) {
            return None;
        }
        let (parked, mut buffers) = aside.parked.pop_front()?;
        aside.finishing += 1;
        drop(aside);
        let ticket = {
            let mut st = lock(&self.st);
            // The connection may have more (another call set aside, a message), which must not
            // wait for this call's handler: as for any call taken (`Loop::take_on`), whoever
            // holds the role next looks.
            self.enqueue(&mut st, id);
            let ticket = self.begin_alone(&mut st);
            self.tell_untimed(&st);
            self.keep_one_waiting(&mut st);
            Some(ticket)
        };
        let Parked { message, header, params, fetching } = parked;
        let call = header.attach(&message).expect("the header was detached from these bytes");
        let answering = || {
            served.unanswered.fetch_sub(1, Ordering::SeqCst);
        };
        let (ulb, handler) = (&*self.ulb, &*self.handler);
        let result = serve_fetching(&served.conn, &call, &params, ulb, handler, &mut buffers, fetching, answering);
        self.served(served, &call, &params, result);
        let mut aside = lock(&served.set_aside);
        aside.finishing -= 1;
        if !aside.ended {
            aside.spare.push(buffers);
        }
        drop(aside);
        served.pool.recycle(message);
        Some(ticket)
    }

    /// Connection `served` ends: its calls set aside are dropped once their Reads are done
    /// (the queue pair is down: they complete or flush), never to be answered, and the buffers
    /// it kept are let go. How many calls there were (they no longer count as in progress).
    pub(super) fn drop_set_aside(&self, served: &LoopConnection<B>) -> usize {
        let (parked, spare) = {
            let mut aside = lock(&served.set_aside);
            aside.ended = true;
            (std::mem::take(&mut aside.parked), std::mem::take(&mut aside.spare))
        };
        // The buffers kept for its next calls go back now, memory and budget: the connection's
        // record may outlive it.
        drop(spare);
        let dropped = parked.len();
        for (mut parked, _) in parked {
            // Its landing memory stays registered until the Reads are done with it.
            parked.fetching.wait(&served.conn);
            served.unanswered.fetch_sub(1, Ordering::SeqCst);
            served.pool.recycle(parked.message);
        }
        dropped
    }
}
