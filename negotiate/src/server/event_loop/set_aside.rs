//! A call set aside while its Read chunks are fetched, where an RDMA Read crosses a network
//! (TCP, rdma-core; not in process, where a Read is a copy made as it is posted): the thread
//! holding the loop's role posts the call's Reads and goes on to the next message, of that
//! connection or another, instead of waiting for them or handing the role on (a thread switch
//! each side, a call, over TCP). The Reads' completions wake the connection's waker
//! (`RESUMES_WR_BIT`), and whoever holds the role when it comes up finishes the call: runs its
//! handler and sends its reply, as for any call (eRPC's continuations, where a blocked thread
//! was). One call at a time per connection is set aside; another with Read chunks meanwhile is
//! served as before.

use super::*;
use crate::datapath::Fetching;
use crate::server::call::{serve_fetching, start_fetching, Begun};
use rpcrdma_v1::header::Detached;

/// A connection's room for one call set aside, and the buffers such calls are served from:
/// kept for its next one, so that a steady stream of them allocates nothing; counted against
/// the server's memory budget as a thread's are.
pub(in crate::server) struct SetAside<B: Backend> {
    /// `None` while a call resumed is served from them: no other is set aside meanwhile (its
    /// memory would not be counted, nor would the connection's calls set aside be one at a
    /// time).
    buffers: Option<CallBuffers>,
    call: Option<Parked<B>>,
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

/// The call set aside: the message it came in (its header kept as offsets into it), how to
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
        SetAside { buffers: Some(CallBuffers::with_budget(budget)), call: None }
    }

    /// Whether a call may be set aside: none is, nor is one resumed being served.
    fn is_free(&self) -> bool {
        self.call.is_none() && self.buffers.is_some()
    }
}

impl<B: Backend, U: UpperLayerBinding + Send + Sync + ?Sized + 'static> Loop<B, U> {
    /// Whether a call of connection `served` with this header may be set aside: the backend's
    /// Reads cross a network, the connection wakes the loop (the Reads' completions must), it
    /// may have more than one call in progress (the call set aside counts as one: with room
    /// for only that, the connection would be held off the ready queue and never looked at
    /// again), and has no call set aside or being finished already.
    pub(super) fn may_set_aside(&self, served: &LoopConnection<B>, header: &Header<'_>) -> bool {
        !self.rdma_at_post
            && self.arms
            && served.most > 1
            && !header.read_list().is_empty()
            && lock(&served.set_aside).is_free()
    }

    /// Sets the call whose message is `message` (its header `header`, answered with `params`)
    /// aside, its Read chunks posted; it is in progress until [`Loop::resume`] finishes it. A
    /// call whose memory does not fit the budget is answered here instead; one for which
    /// nothing was begun (no Read of any length, or none could be posted, or a call set aside
    /// already) is served now, the usual way, which answers it. `answering` as for
    /// [`serve_call`].
    pub(super) fn set_aside(
        &self,
        served: &LoopConnection<B>,
        header: Detached,
        params: &ReplyParams,
        message: Vec<u8>,
        answering: impl FnOnce(),
    ) -> Aside {
        let mut aside = lock(&served.set_aside);
        let (true, Some(call)) = (aside.is_free(), header.attach(&message)) else { return Aside::NotNow(message) };
        let buffers = aside.buffers.as_mut().expect("free: the buffers are here");
        let fetching = match start_fetching(&served.conn, &call, params, buffers, answering) {
            Begun::Fetching(fetching) => fetching,
            Begun::Answered(answered) => return Aside::Answered(answered, message),
            Begun::Not => return Aside::NotNow(message),
        };
        aside.call = Some(Parked { message, header, params: *params, fetching });
        drop(aside);
        lock(&self.shared.stats).calls_set_aside += 1;
        Aside::Parked
    }

    /// Finishes connection `id`'s call set aside if all of its Reads are in: serves it (its
    /// handler, its reply) on this thread, which holds the role. The ticket of that service
    /// for [`Loop::call_done`], or `None` when there was nothing to finish.
    pub(super) fn resume(&self, id: u64, served: &LoopConnection<B>) -> Option<Option<u64>> {
        let mut aside = lock(&served.set_aside);
        if !aside.call.as_mut()?.fetching.poll(&served.conn) {
            return None;
        }
        let parked = aside.call.take()?;
        let mut buffers = aside.buffers.take().expect("a call set aside has the buffers it began with");
        drop(aside);
        let ticket = {
            let mut st = lock(&self.st);
            // The connection may have more, which must not wait for this call's handler: as
            // for any call taken (`Loop::take_on`), whoever holds the role next looks.
            self.enqueue(&mut st, id);
            let ticket = self.begin_alone(&mut st);
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
        lock(&served.set_aside).buffers = Some(buffers);
        served.pool.recycle(message);
        Some(ticket)
    }

    /// Connection `served` ends: its call set aside, if any, is dropped once its Reads are
    /// done (the queue pair is down: they complete or flush), never to be answered. Whether
    /// there was one (it no longer counts as in progress).
    pub(super) fn drop_set_aside(&self, served: &LoopConnection<B>) -> bool {
        let parked = lock(&served.set_aside).call.take();
        let Some(mut parked) = parked else { return false };
        // Its landing memory stays registered until the Reads are done with it.
        parked.fetching.wait(&served.conn);
        served.unanswered.fetch_sub(1, Ordering::SeqCst);
        served.pool.recycle(parked.message);
        true
    }
}
