//! [`AsyncCall`]: a call as a [`Future`] ([`Client::call_async`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_verbs::Backend;

use super::lane::{Message, Sent, Sink, Waiter};
use super::{xid_of, Client, ClientError};
use crate::connection::CallStep;

/// An async call in progress ([`Client::call_async`]): a [`Future`] of the RPC reply.
#[must_use = "a call is made only when its future is polled"]
pub struct AsyncCall<'a, B: Backend, U: ?Sized> {
    client: &'a Client<B>,
    message: &'a [u8],
    ulb: &'a U,
    /// Set once the call has started (on the first poll).
    xid: Option<u32>,
    /// The transmission sent last, whose memory the reply releases.
    pending: Option<Sent<B>>,
    done: bool,
}

impl<'a, B: Backend, U: ?Sized> AsyncCall<'a, B, U> {
    /// Call `message` on `client`, started on its first poll.
    pub(super) fn new(client: &'a Client<B>, message: &'a [u8], ulb: &'a U) -> Self {
        AsyncCall { client, message, ulb, xid: None, pending: None, done: false }
    }
}

// Nothing in it is pinned: it is moved freely between polls (no self-reference).
impl<B: Backend, U: ?Sized> Unpin for AsyncCall<'_, B, U> {}

impl<B: Backend, U: UpperLayerBinding + ?Sized> Future for AsyncCall<'_, B, U> {
    type Output = Result<Vec<u8>, ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.done, "AsyncCall polled after it was ready");
        let (xid, lane) = match this.xid {
            Some(xid) => (xid, this.client.lane(xid)),
            None => {
                let started = xid_of(this.message).and_then(|xid| {
                    let lane = this.client.lane(xid);
                    lane.begin(xid, Waiter::Task(cx.waker().clone())).map(|_| (xid, lane))
                });
                match started {
                    Ok((xid, lane)) => {
                        this.xid = Some(xid);
                        (xid, lane)
                    }
                    Err(e) => {
                        this.done = true;
                        return Poll::Ready(Err(e));
                    }
                }
            }
        };
        let mut just_sent = false;
        loop {
            let Some(step) = lane.poll_step(xid, cx, just_sent) else { return Poll::Pending };
            just_sent = matches!(step, CallStep::Transmit { .. });
            let mut reply = Vec::new();
            // Only blocking calls are marshaled ahead or posted by another thread.
            if let Some(result) = lane.take(
                xid,
                step,
                (None, None),
                &mut Message::Borrowed(this.message),
                this.ulb,
                &mut this.pending,
                &mut Sink::Copy(&mut reply),
            ) {
                this.done = true;
                lane.end(xid, None);
                if result.is_ok() {
                    lane.exchange_properties_soon();
                }
                return Poll::Ready(result.map(|()| reply));
            }
        }
    }
}

impl<B: Backend, U: ?Sized> Drop for AsyncCall<'_, B, U> {
    /// Gives up a call still in progress ([`Connection::abandon`](crate::connection::Connection::abandon)).
    fn drop(&mut self) {
        if let (Some(xid), false) = (self.xid, self.done) {
            self.client.lane(xid).end(xid, Some(self.pending.take()));
        }
    }
}
