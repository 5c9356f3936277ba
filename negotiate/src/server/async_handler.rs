//! Async handlers: [`OnExecutor`] serves a [`Server`](super::Server)'s calls with futures
//! ([`AsyncHandler`]) run on the caller's own executor, which a spawner names (no executor is
//! built in, nor depended on). Its documentation says where the reply is sent from, what
//! bounds the futures pending, and what becomes of a future that panics, is dropped, or
//! outlives its connection or the server.

use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use super::{lock, Handler};

/// What serves a call as a future: from the whole RPC call message to a future of the whole
/// RPC reply message. Any `Fn(Vec<u8>) -> F` closure is one, where `F` is a
/// `Future<Output = Vec<u8>> + Send + 'static` (an `async move` block); give it to the server
/// inside an [`OnExecutor`], with the spawner that runs its futures.
///
/// The future owns everything it uses (it outlives this call to `handle` on another thread):
/// the call is given by value, and a handler's shared state goes in by an `Arc` clone.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use negotiate::onc::{self, CallHeader};
/// use negotiate::server::AsyncHandler;
///
/// // A counter shared by every call's future; each call succeeds with no results.
/// let served = Arc::new(AtomicU32::new(0));
/// let handler = move |call: Vec<u8>| {
///     let served = served.clone();
///     async move {
///         served.fetch_add(1, Ordering::Relaxed);
///         let mut reply = Vec::new();
///         onc::reply_success(onc::peek_xid(&call).unwrap(), &[], &mut reply);
///         reply
///     }
/// };
/// let _future = handler.handle(CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap());
/// ```
pub trait AsyncHandler: Send + Sync + 'static {
    /// The future of the reply to `call`; it runs on the executor of the [`OnExecutor`]'s
    /// spawner.
    fn handle(&self, call: Vec<u8>) -> impl Future<Output = Vec<u8>> + Send + 'static;
}

impl<F, R> AsyncHandler for F
where
    F: Fn(Vec<u8>) -> R + Send + Sync + 'static,
    R: Future<Output = Vec<u8>> + Send + 'static,
{
    fn handle(&self, call: Vec<u8>) -> impl Future<Output = Vec<u8>> + Send + 'static {
        self(call)
    }
}

/// A [`Handler`] that serves each call with an [`AsyncHandler`]'s future, run on the
/// executor that `spawn` hands it to.
///
/// Each call is still served by one of the server's event-loop threads, as with a blocking
/// [`Handler`]: the thread fetches the call, spawns the handler's future as a [`CallTask`] and
/// waits for its reply, then sends it. So:
///
/// - the calls in progress on a connection stay bounded by
///   [`ServerLimits::calls_in_progress`](crate::limits::ServerLimits::calls_in_progress),
///   as the credits granted (RFC 8166 section 3.3.1): a connection has at most that many
///   futures pending, and a requester that sends more waits, whatever it sends;
/// - the reply is sent from the call's thread, never from the executor's: sending waits for
///   the Send's (and the Writes') completion, up to
///   [`ServerConfig::timeout`](super::ServerConfig::timeout), which would stall every other
///   task of an executor thread;
/// - a future that panics, or that the executor drops before it completes, is answered with
///   an RPC SYSTEM_ERR reply, as a blocking handler's panic is, and counted in
///   [`ServerStats::handler_panics`](super::ServerStats::handler_panics); the connection
///   serves on (the executor never sees the panic: the [`CallTask`] catches it);
/// - a call whose connection closed while its future was pending has its reply dropped once
///   the future completes (the thread finds the connection down and ends, sending nothing);
///   until then the call holds its thread, as a blocking handler's call does;
/// - when the server stops ([`Handler::stopping`]), each thread waiting for a future is told
///   at once (it waits with no timeout: nothing looks on a tick) and wakes the future's
///   task, whose next poll drops the
///   future unfinished: dropping the [`Server`](super::Server) returns even with futures that
///   would never complete.
///
/// What a thread per call in progress costs is what the blocking handler costs already; what
/// the async handler adds is that its work may await the executor's timers and I/O (a
/// `tokio::time::sleep` panics when polled outside a tokio runtime) and share its threads.
/// The async path allocates (the call's copy, the task, its reply); the blocking one does not.
///
/// `spawn` is given each call's [`CallTask`], a `Future<Output = ()> + Send + 'static`: with
/// tokio, `move |task| { runtime.spawn(task); }` for a `tokio::runtime::Handle`. It must run
/// the task or drop it (a task dropped unfinished is a SYSTEM_ERR reply); one it keeps
/// without ever polling holds its call's thread until the server stops.
///
/// Here each task runs on a thread of its own, under a `block_on` written out in full: no
/// executor needed.
///
/// ```
/// use std::future::Future;
/// use std::pin::pin;
/// use std::sync::Arc;
/// use std::task::{Context, Poll, Wake, Waker};
/// use negotiate::client::{Client, ClientConfig};
/// use negotiate::onc::{self, CallHeader};
/// use negotiate::server::{CallTask, OnExecutor, Server, ServerConfig};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_verbs::InProcess;
///
/// /// Polls `task` on this thread, parking between its wake-ups.
/// fn block_on(task: CallTask) {
///     struct Unpark(std::thread::Thread);
///     impl Wake for Unpark {
///         fn wake(self: Arc<Self>) {
///             self.0.unpark();
///         }
///     }
///     let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
///     let mut task = pin!(task);
///     while task.as_mut().poll(&mut Context::from_waker(&waker)).is_pending() {
///         std::thread::park();
///     }
/// }
///
/// // SUCCESS, the call's arguments as the results.
/// let echo = |call: Vec<u8>| async move {
///     let (h, args_at) = CallHeader::decode(&call).unwrap();
///     let mut reply = Vec::new();
///     onc::reply_success(h.xid, &call[args_at..], &mut reply);
///     reply
/// };
/// let spawn = |task: CallTask| drop(std::thread::spawn(move || block_on(task)));
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), OnExecutor::new(echo, spawn))?;
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// let call = CallHeader::new(7, 0x2000_0001, 1, 1).message(&[0, 0, 0, 42]).unwrap();
/// assert_eq!(onc::results(&client.call(&call, &ulb).unwrap(), 7), Ok(&[0, 0, 0, 42][..]));
/// # Ok::<(), rpcrdma_verbs::Error>(())
/// ```
pub struct OnExecutor<H, S> {
    handler: H,
    spawn: S,
    /// The server is stopping ([`Handler::stopping`]): no call waits for its future any more.
    stopped: AtomicBool,
    /// The calls whose threads wait for their futures, told when the server stops: each
    /// waits with no timeout, and no thread looks on a tick (issue 25). At most the server's
    /// calls in progress.
    waiting: Mutex<Vec<Arc<Slot>>>,
}

impl<H, S> OnExecutor<H, S>
where
    H: AsyncHandler,
    S: Fn(CallTask) + Send + Sync + 'static,
{
    /// Serves each call with `handler`'s future, run by `spawn` on its executor.
    pub fn new(handler: H, spawn: S) -> Self {
        OnExecutor { handler, spawn, stopped: AtomicBool::new(false), waiting: Mutex::new(Vec::new()) }
    }
}

impl<H, S> std::fmt::Debug for OnExecutor<H, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnExecutor").field("stopped", &self.stopped).finish_non_exhaustive()
    }
}

/// Why a call's future gave no reply: the payload its thread unwinds with, so that the server
/// answers the call as it answers a blocking handler's panic ([`serve_call`](super::serve_call)).
/// `resume_unwind` runs no panic hook: a panicking future's message is printed once, by its
/// own panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoReply {
    /// The future panicked.
    Panicked,
    /// The executor dropped the task before the future completed.
    Dropped,
    /// The server stopped while the future was pending. (Its connection is closed: the
    /// SYSTEM_ERR reply goes nowhere, and the call is not counted.)
    Stopped,
}

impl<H, S> Handler for OnExecutor<H, S>
where
    H: AsyncHandler,
    S: Fn(CallTask) + Send + Sync + 'static,
{
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        let slot = Arc::new(Slot::default());
        let task = CallTask { future: Some(Box::pin(self.handler.handle(call.to_vec()))), slot: slot.clone() };
        // Registered before it waits: `stopping` tells every slot it finds here, after it set
        // `stopped`, which a slot registered later sees when it first looks.
        lock(&self.waiting).push(slot.clone());
        (self.spawn)(task);
        let outcome = slot.wait(&self.stopped);
        lock(&self.waiting).retain(|s| !Arc::ptr_eq(s, &slot));
        match outcome {
            Ok(r) => *reply = r,
            Err(why) => resume_unwind(Box::new(why)),
        }
    }

    fn stopping(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for slot in lock(&self.waiting).iter() {
            slot.tell_stopped();
        }
    }
}

/// One call's future, as given to the spawner of an [`OnExecutor`]: a
/// `Future<Output = ()> + Send + 'static` for the executor to run. It completes when the
/// handler's future does, and hands its reply to the thread that serves the call; a panic of
/// the handler's future is caught here (the executor never sees it) and answered with
/// SYSTEM_ERR; dropped unfinished, it tells the call's thread so (also SYSTEM_ERR).
#[must_use = "a call is served only when its task is run"]
pub struct CallTask {
    /// The handler's future; `None` once it has completed, panicked or been given up.
    future: Option<Pin<Box<dyn Future<Output = Vec<u8>> + Send>>>,
    slot: Arc<Slot>,
}

impl std::fmt::Debug for CallTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallTask").field("finished", &self.future.is_none()).finish_non_exhaustive()
    }
}

impl Future for CallTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(future) = this.future.as_mut() else { return Poll::Ready(()) };
        {
            let mut state = this.slot.lock();
            if state.given_up {
                // Nobody waits for the reply: the future is dropped here, on its executor.
                drop(state);
                this.future = None;
                return Poll::Ready(());
            }
            // Kept so that the call's thread can wake the task when it gives up waiting.
            if !state.task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                state.task = Some(cx.waker().clone());
            }
        }
        let outcome = match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(reply)) => Ok(reply),
            Err(_) => Err(NoReply::Panicked),
        };
        this.future = None;
        this.slot.finish(outcome);
        Poll::Ready(())
    }
}

impl Drop for CallTask {
    fn drop(&mut self) {
        if self.future.take().is_some() {
            self.slot.finish(Err(NoReply::Dropped));
        }
    }
}

/// Where a call's task leaves its outcome for the call's thread.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    done: Condvar,
}

#[derive(Default)]
struct SlotState {
    outcome: Option<Result<Vec<u8>, NoReply>>,
    /// The call's thread no longer waits (the server stops): the task drops its future.
    given_up: bool,
    /// Wakes the task (its latest poll's waker).
    task: Option<Waker>,
}

impl Slot {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The server stops: the call's thread, if it waits, looks again (under the state's
    /// lock, so that a thread between its look at `stopped` and its wait is waiting by then).
    fn tell_stopped(&self) {
        let _state = self.lock();
        self.done.notify_all();
    }

    /// The task's end: its reply, or why there is none; the first one counts.
    fn finish(&self, outcome: Result<Vec<u8>, NoReply>) {
        let mut state = self.lock();
        state.outcome.get_or_insert(outcome);
        self.done.notify_one();
    }

    /// The call's thread: waits for the task's outcome, or until the server stops; then it
    /// gives the task up and wakes it, so that its executor drops the future.
    fn wait(&self, stopped: &AtomicBool) -> Result<Vec<u8>, NoReply> {
        let mut state = self.lock();
        loop {
            if let Some(outcome) = state.outcome.take() {
                return outcome;
            }
            if stopped.load(Ordering::SeqCst) {
                state.given_up = true;
                let task = state.task.take();
                drop(state);
                if let Some(task) = task {
                    task.wake();
                }
                return Err(NoReply::Stopped);
            }
            state = self.done.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}
