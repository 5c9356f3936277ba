//! [`AsyncServices`]: generated `AsyncServer`s as one async server handler.

use std::future::Future;

use xdr_spec_rt::rpc::{AsyncProgram, Dispatched};

use super::server::{refused, route};
use crate::onc;
use crate::server::AsyncHandler;

/// The programs an async server serves, each version an [`AsyncProgram`] (a generated
/// `AsyncServer`), as one [`AsyncHandler`] for [`OnExecutor`](crate::server::OnExecutor):
/// each call's RPC header is read and refused as [`Services`](super::Services) does, on the
/// server's thread; the version's method then runs as a future on the executor, and its
/// answer becomes the reply.
///
/// ```
/// use std::sync::Arc;
/// use negotiate::service::AsyncServices;
/// use negotiate::server::AsyncHandler;
/// // With no program, every call is PROG_UNAVAIL.
/// let call = negotiate::onc::CallHeader::new(5, 0x2000_0001, 1, 1).message(&[]).unwrap();
/// let reply = now(AsyncServices::new().handle(call));
/// # fn now<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
/// #         std::task::Poll::Ready(v) => v,
/// #         std::task::Poll::Pending => unreachable!(),
/// #     }
/// # }
/// assert!(negotiate::onc::results(&reply, 5).is_err());
/// ```
#[derive(Default)]
pub struct AsyncServices {
    programs: Vec<std::sync::Arc<dyn AsyncProgram>>,
    ids: Vec<(u32, u32)>,
}

impl AsyncServices {
    /// No program yet.
    pub fn new() -> Self {
        AsyncServices::default()
    }

    /// These services and `program` too. A second for the same program and version replaces
    /// the first.
    #[must_use]
    pub fn with(mut self, program: impl AsyncProgram + 'static) -> Self {
        self.programs.retain(|p| (p.program(), p.version()) != (program.program(), program.version()));
        self.programs.push(std::sync::Arc::new(program));
        self.ids = self.programs.iter().map(|p| (p.program(), p.version())).collect();
        self
    }
}

impl AsyncHandler for AsyncServices {
    fn handle(&self, call: Vec<u8>) -> impl Future<Output = Vec<u8>> + Send + 'static {
        let mut reply = Vec::new();
        let routed = route(&self.ids, &call, &mut reply).map(|(i, h, at)| (self.programs[i].clone(), h, at));
        async move {
            let Some((program, h, at)) = routed else { return reply };
            let (answered, results) = program.dispatch(h.proc, call, at).await.into_parts();
            match answered {
                Dispatched::Replied => onc::reply_success(h.xid, &results, &mut reply),
                answered => refused(&h, answered, &mut reply),
            }
            reply
        }
    }
}
