//! Serving the server's backward calls (RFC 8167) and sending what the core has to send on
//! a connection. A backward call is judged once by whoever receives it (a caller or the
//! dispatcher) and handed, with its detached header, to the client's workers
//! (`workers.rs`), so that the handler, the application's code, holds up neither the
//! receiver's other replies nor any other connection; the reply goes from the worker.
//!
//! The server holds one backward credit (`backchannel::CREDITS`, RFC 8167 section 4.1): a
//! server that keeps to it has one call at a time, and a lane gives at most
//! [`BACKWARD_HELD_MOST`] workers to its backward calls. Calls beyond them wait in the lane,
//! at most [`BACKWARD_QUEUED_MOST`], for the next of those workers; beyond that, a server
//! far beyond its credit has its calls dropped, logged and counted
//! ([`ClientStats::backward_dropped`]), and the connection serves on. Linux's client
//! disconnects on such an overflow instead (xprtrdma's backchannel).

use super::workers::{BackwardCall, Job, BACKWARD_HELD_MOST};
use super::*;
use rpcrdma_v1::header::Detached;

use crate::datapath::ReplyParams;

/// The most backward calls a lane keeps waiting for a worker, beyond those being served.
pub(super) const BACKWARD_QUEUED_MOST: usize = 16;

impl<B: Backend> Shared<B> {
    /// Hands the backward call in `bytes` (received on `link`, judged into `header`) to a
    /// worker, or has it wait in the lane for one of this lane's (see the module's docs).
    pub(super) fn hand_on_backward<'a>(
        &'a self,
        mut st: Locked<'a, B>,
        link: &Arc<Link<B>>,
        bytes: Vec<u8>,
        header: Detached,
        params: ReplyParams,
    ) -> Locked<'a, B> {
        let call = BackwardCall { link: link.clone(), bytes, header, params };
        if st.backward_held >= BACKWARD_HELD_MOST {
            if st.backward_queue.len() < BACKWARD_QUEUED_MOST {
                st.backward_queue.push_back(call);
            } else {
                st = self.drop_backward(st, call, "the server is beyond its backward credit (RFC 8167 section 4.1)");
            }
            return st;
        }
        let Some(lane) = self.me.upgrade() else {
            return self.drop_backward(st, call, "the client is being dropped");
        };
        st.backward_held += 1;
        drop(st);
        let unserved = self.workers.submit(Job::Backward { lane, call });
        let mut st = self.lock();
        if let Some(Job::Backward { call, .. }) = unserved {
            st.backward_held -= 1;
            st = self.drop_backward(st, call, "no worker to serve it (the client is closing, or no thread)");
        }
        st
    }

    /// Drops a backward call that cannot be served, with a log and a count: the server's
    /// call times out.
    fn drop_backward<'a>(&'a self, mut st: Locked<'a, B>, call: BackwardCall<B>, why: &str) -> Locked<'a, B> {
        st.backward_dropped += 1;
        let n = st.backward_dropped;
        if crate::flood::logged(n) {
            log::warn!("dropped backward call {:#010x} from {}: {why} ({n} dropped)", call.header.xid(), self.addr);
        }
        call.link.pool.recycle(call.bytes);
        st
    }

    /// A worker's backward calls: `call`, then those waiting in the lane, until none waits.
    pub(super) fn serve_backward_calls(&self, mut call: BackwardCall<B>) {
        loop {
            self.serve_backward(call);
            let mut st = self.lock();
            match st.backward_queue.pop_front() {
                Some(next) => call = next,
                None => {
                    st.backward_held -= 1;
                    return;
                }
            }
        }
    }

    /// Runs the client's handler on a backward call and answers it on its connection. A
    /// failure to send is the connection's (its receiver sees it as the connection's
    /// state). A panicking handler's call is answered SYSTEM_ERR ([`backchannel::answer`]);
    /// nothing else that panics here unwinds through a worker (that call is left unanswered,
    /// and the server's backward call times out).
    fn serve_backward(&self, call: BackwardCall<B>) {
        let BackwardCall { link, bytes, header, params } = call;
        let answered = match (header.attach(&bytes), &self.backchannel) {
            (Some(call), Some(handler)) => {
                crate::application::run(|| backchannel::answer(&link.conn, &call, &params, handler))
            }
            // (A client without a handler offers no backchannel: the core judged nothing
            // here a backward call to serve.)
            _ => None,
        };
        link.pool.recycle(bytes);
        let mut st = self.lock();
        // On -07 the reply waits for room in the window: sent with what else the core has
        // to send.
        if let Some(Ok(Some(reply))) = answered {
            st.core.queue_reverse_reply(reply);
        }
        drop(self.send_queued(st, &link));
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
            // (Run where the dispatcher serves every lane: a panic as it is posted closes
            // this connection, not the dispatcher.)
            let sent = crate::application::run(|| send_answer(&link.conn, &t.bytes, t.draft07)).unwrap_or_else(|| {
                log::warn!("a panic in code run while posting the core's answer: closing the connection");
                link.conn.close("a panic in code run while posting the core's answer");
                Err(DataPathError::PostPanicked("the core's answer"))
            });
            st = self.lock();
            st.core.handle_completion(t.id, sent.as_ref().map(drop));
        }
        st
    }
}
