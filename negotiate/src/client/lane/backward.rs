//! Serving the server's backward calls (RFC 8167) and sending what the core has to send on
//! a connection. A backward call is judged once by whoever receives it (a caller or the
//! dispatcher) and handed, with its detached header, to the client's workers
//! (`workers.rs`), so that the handler, the application's code, holds up neither the
//! receiver's other replies nor any other connection; the reply goes from the worker.

use super::workers::{Job, BACKWARD_HELD_MOST};
use super::*;
use rpcrdma_v1::header::Detached;

use crate::datapath::ReplyParams;

impl<B: Backend> Shared<B> {
    /// Hands the backward call in `bytes` (received on `link`, judged into `header`) to the
    /// workers, or, where they cannot take it (the lane has [`BACKWARD_HELD_MOST`] there
    /// already: a server beyond its one backward credit; the client closing), serves it here.
    pub(super) fn hand_on_backward<'a>(
        &'a self,
        mut st: Locked<'a, B>,
        link: &Arc<Link<B>>,
        bytes: Vec<u8>,
        header: Detached,
        params: ReplyParams,
    ) -> Locked<'a, B> {
        let lane = self.me.upgrade();
        let Some(lane) = lane.filter(|_| st.backward_held < BACKWARD_HELD_MOST) else {
            drop(st);
            self.serve_backward(link, bytes, header, &params);
            return self.lock();
        };
        st.backward_held += 1;
        drop(st);
        let job = Job::Backward { lane, link: link.clone(), bytes, header, params };
        if let Some(Job::Backward { bytes, header, params, .. }) = self.workers.submit(job) {
            self.lock().backward_held -= 1;
            self.serve_backward(link, bytes, header, &params);
        }
        self.lock()
    }

    /// Runs the client's handler on the backward call in `bytes` and answers it on `link`.
    /// A failure to send is the connection's (its receiver sees it as the connection's
    /// state). A panicking handler leaves that call unanswered (the server's backward call
    /// times out) and must not unwind through a worker or a receiver.
    pub(super) fn serve_backward(&self, link: &Arc<Link<B>>, bytes: Vec<u8>, header: Detached, params: &ReplyParams) {
        let answered = match (header.attach(&bytes), &self.backchannel) {
            (Some(call), Some(handler)) => {
                let answer = || backchannel::answer(&link.conn, &call, params, handler);
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(answer)).ok()
            }
            // (A client without a handler offers no backchannel: the core judged nothing
            // here a backward call to serve.)
            _ => None,
        };
        link.pool.recycle(bytes);
        let mut st = self.lock();
        st.backward_held = st.backward_held.saturating_sub(1);
        // On -07 the reply waits for room in the window: sent with what else the core has
        // to send.
        if let Some(Ok(Some(reply))) = answered {
            st.core.queue_reverse_reply(reply);
        }
        drop(self.send_queued(st, link));
    }

    /// Sends what the core has to send of its own on `link`: its answers to what came
    /// (RDMA_ERR_INVAL_OPTION for the server's RDMA_OPTIONAL, draft section 3.1, an
    /// extension's answer, on -07 an RDMA2_ERROR or GRANT), a -07 CONNPROP_FINAL once
    /// settled, replies to reverse-direction calls. The core has one out at a time: whoever
    /// sent it sends the next once it completes, so a server that floods them has at most
    /// one answer outstanding. A failure is the connection's, seen by its receiver as its
    /// state.
    pub(super) fn send_queued<'a>(&'a self, mut st: Locked<'a, B>, link: &Arc<Link<B>>) -> Locked<'a, B> {
        while st.core.link().is_some_and(|l| Arc::ptr_eq(l, link)) {
            let Some(t) = st.core.poll_transmit() else { break };
            st.wake_deferred();
            drop(st);
            let sent = send_answer(&link.conn, &t.bytes, t.draft07);
            st = self.lock();
            st.core.handle_completion(t.id, sent.as_ref().map(drop));
        }
        st
    }
}
