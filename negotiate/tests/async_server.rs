//! The server's async handler (issue 14): `OnExecutor` serves each call with an
//! `AsyncHandler`'s future on the caller's executor. Most tests run the futures on a
//! thread-per-task executor written out here, so that what each proves does not depend on a
//! runtime; two run them on tokio, whose timers panic outside its own runtime.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::responder;
use negotiate::server::{CallTask, OnExecutor, Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::InProcess;

/// Inline calls; replies up to 1 MiB (a long one goes back through a Reply chunk).
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1 << 20 };

/// What the test handlers do with a call, by its argument word.
const SLOW: u32 = 0;
const PANIC: u32 = 1;
const NEVER: u32 = 2;
const QUICK: u32 = 3;
/// The XID of each client's first call ([`patient_client`]).
const SETTLE: u32 = 0xffff_fff0;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// XID, CALL, one argument word.
fn call(xid: u32, arg: u32) -> Vec<u8> {
    words(&[xid, 0, arg])
}

fn word(message: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(message[4 * i..4 * i + 4].try_into().unwrap())
}

/// XID, REPLY, the argument plus one.
fn reply_to(call: &[u8]) -> Vec<u8> {
    words(&[word(call, 0), 1, word(call, 2) + 1])
}

/// The RPC SYSTEM_ERR reply to `xid`: REPLY, MSG_ACCEPTED, a null verifier, SYSTEM_ERR (5).
fn system_err(xid: u32) -> Vec<u8> {
    words(&[xid, 1, 0, 0, 0, 5])
}

/// Runs `task` on this thread, parking between its wake-ups.
fn block_on<F: Future>(task: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut task = pin!(task);
    loop {
        if let Poll::Ready(v) = task.as_mut().poll(&mut Context::from_waker(&waker)) {
            return v;
        }
        std::thread::park();
    }
}

/// The executor of most tests: each task on a thread of its own.
fn thread_per_task(task: CallTask) {
    std::thread::spawn(move || block_on(task));
}

/// A future that is pending once: its task is woken and polled again.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// Holds the futures that wait on it until it opens.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, Vec<Waker>)>,
}

impl Gate {
    fn open(&self) {
        let mut st = self.state.lock().unwrap();
        st.0 = true;
        st.1.drain(..).for_each(Waker::wake);
    }

    fn passed(self: Arc<Self>) -> impl Future<Output = ()> {
        std::future::poll_fn(move |cx| {
            let mut st = self.state.lock().unwrap();
            if st.0 {
                Poll::Ready(())
            } else {
                st.1.push(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}

/// What the test handler's futures did.
#[derive(Default)]
struct Counts {
    started: AtomicUsize,
    finished: AtomicUsize,
    /// Futures dropped, finished or not.
    dropped: AtomicUsize,
}

impl Counts {
    fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }
    fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }
    fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// Counts a future's drop.
struct Dropped(Arc<Counts>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// The test handler: a SLOW call waits for the gate, a PANIC call panics, a NEVER call never
/// completes, a QUICK call is answered at once; any other is answered with [`reply_to`] after
/// one yield (so its task is woken and polled again).
fn handler(gate: Arc<Gate>, counts: Arc<Counts>) -> impl Fn(Vec<u8>) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send>> {
    move |call: Vec<u8>| {
        let (gate, counts) = (gate.clone(), counts.clone());
        // The settling call of each client is not counted.
        let counts = (word(&call, 0) != SETTLE).then_some(counts);
        Box::pin(async move {
            let _dropped = counts.clone().map(Dropped);
            if let Some(counts) = &counts {
                counts.started.fetch_add(1, Ordering::SeqCst);
            }
            match word(&call, 2) {
                SLOW => gate.passed().await,
                PANIC => panic!("the handler's future panics (as the test wants)"),
                NEVER => std::future::pending().await,
                QUICK => {}
                _ => yield_now().await,
            }
            if let Some(counts) = &counts {
                counts.finished.fetch_add(1, Ordering::SeqCst);
            }
            reply_to(&call)
        })
    }
}

/// A server whose connections each serve up to `in_progress` calls at once, running the test
/// handler with `spawn`.
fn server(in_progress: usize, spawn: fn(CallTask)) -> (Server, Arc<Gate>, Arc<Counts>) {
    let (gate, counts) = (Arc::new(Gate::default()), Arc::new(Counts::default()));
    let mut cfg = ServerConfig::default().responder(responder::ResponderConfig::default().credits(32));
    cfg.limits.calls_in_progress_per_connection = in_progress;
    let served = OnExecutor::new(handler(gate.clone(), counts.clone()), spawn);
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), served).unwrap();
    (server, gate, counts)
}

/// A client whose calls wait up to a minute for their replies (a slow future is never taken
/// for a lost reply, which would close the connection and send the call again), connected
/// and settled by a first call: its version probe answered and its credits granted, so that
/// the calls the test makes go out at once (a requester's first call goes alone, draft
/// section 5).
fn patient_client(server: &Server) -> Client<InProcess> {
    let mut cfg = ClientConfig::default();
    cfg.requester.timeout = Duration::from_secs(60);
    cfg.requester.max_attempts = 1;
    let client = Client::new(InProcess, server.local_addr(), cfg);
    let settle = call(SETTLE, QUICK);
    assert_eq!(client.call(&settle, &ULB).unwrap(), reply_to(&settle));
    client
}

/// Whether `done` holds within 20 s.
fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Makes `message`'s call on a thread of its own; its result comes on the channel.
fn call_on_thread(
    client: &Arc<Client<InProcess>>,
    message: Vec<u8>,
) -> mpsc::Receiver<Result<Vec<u8>, negotiate::client::ClientError>> {
    let (tx, rx) = mpsc::channel();
    let client = client.clone();
    std::thread::spawn(move || {
        let _ = tx.send(client.call(&message, &ULB));
    });
    rx
}

const LONG: Duration = Duration::from_secs(30);

#[test]
fn a_slow_future_does_not_hold_up_the_calls_behind_it_and_a_connection_has_up_to_its_limit_pending() {
    const LIMIT: usize = 4;
    let (server, gate, counts) = server(LIMIT, thread_per_task);
    let client = Arc::new(patient_client(&server));
    let first = call_on_thread(&client, call(1, SLOW));
    assert!(eventually(|| counts.started() == 1), "the slow call's future started");
    // Ten calls on the same connection, one after another, answered while the first waits.
    for xid in 10..20 {
        assert_eq!(client.call(&call(xid, 7), &ULB).unwrap(), reply_to(&call(xid, 7)));
    }
    assert_eq!(counts.finished(), 10, "the slow call is still pending");
    // Up to the limit of calls in progress at once: all their futures are pending together.
    let more: Vec<_> = (2..=LIMIT as u32).map(|xid| call_on_thread(&client, call(xid, SLOW))).collect();
    assert!(eventually(|| counts.started() == 1 + 10 + (LIMIT - 1)), "{LIMIT} slow futures pending at once");
    // One beyond the limit waits in its Receive: its future does not start.
    let beyond = call_on_thread(&client, call(99, SLOW));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(counts.started(), 10 + LIMIT, "no future beyond the connection's limit");
    gate.open();
    assert_eq!(first.recv_timeout(LONG).unwrap().unwrap(), reply_to(&call(1, SLOW)));
    for (xid, rx) in (2..).zip(more) {
        assert_eq!(rx.recv_timeout(LONG).unwrap().unwrap(), reply_to(&call(xid, SLOW)));
    }
    assert_eq!(beyond.recv_timeout(LONG).unwrap().unwrap(), reply_to(&call(99, SLOW)));
    assert_eq!(server.stats().connections, 1, "all on one connection");
    assert_eq!(server.stats().handler_panics, 0);
}

#[test]
fn replies_of_every_size_come_back_byte_for_byte_from_concurrent_futures() {
    // The reply: XID, REPLY, then `len` bytes that depend on the XID and their place.
    let body = |xid: u32, len: usize| (0..len).map(|i| (xid as usize * 31 + i * 7) as u8).collect::<Vec<u8>>();
    let served = OnExecutor::new(
        move |call: Vec<u8>| async move {
            yield_now().await;
            let (xid, len) = (word(&call, 0), word(&call, 2) as usize);
            [&words(&[xid, 1])[..], &body(xid, len)].concat()
        },
        thread_per_task,
    );
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), served).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    // XDR lengths: multiples of four (RFC 4506 section 3).
    let sizes = [0usize, 4, 100, 1000, 3000, 4000, 10_000, 65_536, 300_000];
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let client = &client;
            s.spawn(move || {
                for (i, &len) in sizes.iter().enumerate() {
                    let xid = 1000 * (t + 1) + i as u32;
                    let reply = client.call(&call(xid, len as u32), &ULB).unwrap();
                    assert_eq!(reply, [&words(&[xid, 1])[..], &body(xid, len)].concat(), "xid {xid}, {len} bytes");
                }
            });
        }
    });
    assert!(eventually(|| server.stats().calls.v2 == 8 * sizes.len() as u64), "{:?}", server.stats());
    assert!(server.stats().reply_chunk_replies > 0, "the long replies went through Reply chunks");
}

#[test]
fn a_panicking_future_is_answered_with_system_err_and_the_next_call_on_the_connection_is_served() {
    let (server, _gate, counts) = server(8, thread_per_task);
    let client = patient_client(&server);
    assert_eq!(client.call(&call(1, 5), &ULB).unwrap(), reply_to(&call(1, 5)));
    assert_eq!(client.call(&call(2, PANIC), &ULB).unwrap(), system_err(2));
    assert_eq!(client.call(&call(3, 5), &ULB).unwrap(), reply_to(&call(3, 5)));
    assert!(eventually(|| server.stats().handler_panics == 1), "{:?}", server.stats());
    assert!(eventually(|| counts.dropped() == 3), "every future was dropped, the panicked one too");
    assert_eq!(server.stats().connections, 1, "one connection served all three");
}

/// A waker that does nothing.
fn noop_waker() -> Waker {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    Waker::from(Arc::new(Noop))
}

/// An executor that polls each task once, on the spawning thread, and drops it if it is not
/// done then (as an executor shutting down drops its tasks).
fn poll_once_then_drop(task: CallTask) {
    let mut task = pin!(task);
    let _ = task.as_mut().poll(&mut Context::from_waker(&noop_waker()));
}

#[test]
fn a_future_its_executor_drops_unfinished_is_answered_with_system_err_and_the_connection_serves_on() {
    let (server, _gate, counts) = server(8, poll_once_then_drop);
    let client = patient_client(&server);
    // A NEVER call's future is pending at its one poll: dropped unfinished.
    assert_eq!(client.call(&call(1, NEVER), &ULB).unwrap(), system_err(1));
    assert_eq!(client.call(&call(2, QUICK), &ULB).unwrap(), reply_to(&call(2, QUICK)));
    // So is one that yields once.
    assert_eq!(client.call(&call(3, 5), &ULB).unwrap(), system_err(3));
    assert_eq!(client.call(&call(4, QUICK), &ULB).unwrap(), reply_to(&call(4, QUICK)));
    assert!(eventually(|| server.stats().handler_panics == 2), "{:?}", server.stats());
    assert_eq!((counts.started(), counts.finished(), counts.dropped()), (4, 2, 4));
    assert_eq!(server.stats().connections, 1, "one connection served all four");
}

#[test]
fn dropping_the_server_returns_with_futures_pending_and_their_executor_drops_them() {
    const LIMIT: usize = 4;
    let (server, _gate, counts) = server(LIMIT, thread_per_task);
    let client = Arc::new(patient_client(&server));
    // Futures that never complete, as many as the connection serves at once; the gate
    // never opens.
    let pending: Vec<_> = (1..=LIMIT as u32).map(|xid| call_on_thread(&client, call(xid, NEVER))).collect();
    assert!(eventually(|| counts.started() == LIMIT));
    let (done, stopped) = mpsc::channel();
    std::thread::spawn(move || {
        drop(server);
        let _ = done.send(());
    });
    stopped.recv_timeout(LONG).expect("dropping the server returns");
    // Each pending task was woken and dropped its future on its executor's thread.
    assert!(eventually(|| counts.dropped() == LIMIT), "{} of {LIMIT} futures dropped", counts.dropped());
    assert_eq!(counts.finished(), 0);
    // The calls fail: the connection closed under them and nothing listens any more.
    for rx in pending {
        assert!(rx.recv_timeout(LONG).unwrap().is_err());
    }
}

#[test]
fn other_clients_are_served_while_one_clients_calls_all_wait_in_slow_futures() {
    const LIMIT: usize = 4;
    let (server, gate, counts) = server(LIMIT, thread_per_task);
    let stuck = Arc::new(patient_client(&server));
    let slow: Vec<_> = (1..=LIMIT as u32).map(|xid| call_on_thread(&stuck, call(xid, SLOW))).collect();
    assert!(eventually(|| counts.started() == LIMIT), "the first client's connection is at its limit");
    // Two other clients, each on its own connection, served meanwhile.
    for c in 0..2u32 {
        let other = patient_client(&server);
        for i in 0..20 {
            let xid = 100 * (c + 1) + i;
            assert_eq!(other.call(&call(xid, 9), &ULB).unwrap(), reply_to(&call(xid, 9)));
        }
    }
    assert_eq!(counts.finished(), 40, "the slow ones still pending");
    gate.open();
    for (xid, rx) in (1..).zip(slow) {
        assert_eq!(rx.recv_timeout(LONG).unwrap().unwrap(), reply_to(&call(xid, SLOW)));
    }
    assert_eq!(server.stats().connections, 3);
}

#[test]
fn a_connection_closed_while_its_futures_are_pending_drops_their_replies_and_the_server_serves_on() {
    const LIMIT: usize = 4;
    let (server, gate, counts) = server(LIMIT, thread_per_task);
    {
        let leaving = patient_client(&server);
        // Sent (one poll each), then given up with the client, which closes its connection.
        let messages: Vec<_> = (1..=LIMIT as u32).map(|xid| call(xid, SLOW)).collect();
        let mut calls: Vec<_> = messages.iter().map(|m| leaving.call_async(m, &ULB)).collect();
        let waker = noop_waker();
        for c in &mut calls {
            assert!(Pin::new(c).poll(&mut Context::from_waker(&waker)).is_pending());
        }
        assert!(eventually(|| counts.started() == LIMIT));
    }
    // The futures complete after their connection is gone: their replies have nowhere to go.
    gate.open();
    assert!(eventually(|| counts.dropped() == LIMIT), "the futures completed");
    // The connection's threads all ended (its record says how it ended only then) and sent
    // nothing: no call counted, no panic.
    assert!(eventually(|| server.peers()[0].ended.is_some()), "{:?}", server.peers());
    assert_eq!(
        server.stats().calls,
        negotiate::server::CallsByVersion { v1: 0, v2: 1 },
        "only the settling call was answered"
    );
    assert_eq!(server.stats().handler_panics, 0);
    let next = patient_client(&server);
    assert_eq!(next.call(&call(10, 3), &ULB).unwrap(), reply_to(&call(10, 3)));
    assert!(server.peers()[1].ended.is_none());
}

#[test]
fn a_future_awaits_its_executors_own_timer_tokio() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let on_tokio = runtime.handle().clone();
    // `tokio::time::sleep` panics outside a tokio runtime: these futures run on this one.
    let served = OnExecutor::new(
        |call: Vec<u8>| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            reply_to(&call)
        },
        move |task| drop(on_tokio.spawn(task)),
    );
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), served).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    std::thread::scope(|s| {
        for t in 0..16u32 {
            let client = &client;
            s.spawn(move || {
                for i in 0..5 {
                    let m = call(100 * t + i, t);
                    assert_eq!(client.call(&m, &ULB).unwrap(), reply_to(&m));
                }
            });
        }
    });
    assert_eq!(server.stats().handler_panics, 0);
}

#[test]
fn a_call_spawned_on_a_shut_down_tokio_runtime_is_answered_with_system_err() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_time().build().unwrap();
    let on_tokio = runtime.handle().clone();
    // A runtime that has shut down drops every task spawned on it, unpolled.
    runtime.shutdown_background();
    let served =
        OnExecutor::new(|call: Vec<u8>| async move { reply_to(&call) }, move |task| drop(on_tokio.spawn(task)));
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), served).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    assert_eq!(client.call(&call(1, 1), &ULB).unwrap(), system_err(1));
    assert_eq!(client.call(&call(2, 1), &ULB).unwrap(), system_err(2));
    assert!(eventually(|| server.stats().handler_panics == 2), "{:?}", server.stats());
}
