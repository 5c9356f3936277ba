//! `Client::call_async` (issue 14): the call as a `Future`, driven here by a one-thread
//! executor written out in full, so that what each test proves does not depend on a runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use negotiate::client::{Client, ClientConfig};
use negotiate::responder;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess};

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// XID, CALL, one argument word.
fn call(xid: u32, arg: u32) -> Vec<u8> {
    [xid, 0, arg].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// XID, REPLY, the argument plus one.
fn reply_to(call: &[u8]) -> Vec<u8> {
    let word = |i: usize| u32::from_be_bytes(call[i..i + 4].try_into().unwrap());
    [word(0), 1, word(8) + 1].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// Wakes the test's thread.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

fn waker() -> Waker {
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

/// Polls every future in turn on this one thread until all are ready.
fn run_all<F: Future + Unpin>(mut futures: Vec<F>) -> Vec<F::Output> {
    let waker = waker();
    let mut cx = Context::from_waker(&waker);
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    while out.iter().any(Option::is_none) {
        for (f, o) in futures.iter_mut().zip(&mut out) {
            if o.is_none() {
                if let Poll::Ready(v) = Pin::new(f).poll(&mut cx) {
                    *o = Some(v);
                }
            }
        }
        if out.iter().any(Option::is_none) {
            std::thread::park_timeout(Duration::from_millis(50));
        }
    }
    out.into_iter().map(Option::unwrap).collect()
}

/// Whether `done` holds within 10 s (the server counts after it replies).
fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// A server whose handler waits for a release before answering a call with argument 0.
fn gated_server(credits: u32) -> (Server, mpsc::Sender<()>, Arc<Mutex<Vec<u32>>>) {
    let (release, gate) = mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let cfg = ServerConfig::default().responder(responder::ResponderConfig::default().credits(credits));
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), move |c: &[u8]| {
        s.lock().unwrap().push(u32::from_be_bytes(c[..4].try_into().unwrap()));
        if c[8..12] == [0; 4] {
            gate.lock().unwrap().recv_timeout(Duration::from_secs(20)).expect("released");
        }
        reply_to(c)
    })
    .unwrap();
    (server, release, seen)
}

#[test]
fn issue_14_one_thread_has_many_async_calls_in_flight_at_once() {
    let (server, release, _) = gated_server(32);
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    // Connected and settled first, so that the first poll of each call sends it.
    assert_eq!(client.call(&call(1, 1), &ULB).unwrap(), reply_to(&call(1, 1)));
    let msgs: Vec<Vec<u8>> = (0..16).map(|i| call(100 + i, i)).collect();
    let mut futures: Vec<_> = msgs.iter().map(|m| client.call_async(m, &ULB)).collect();
    let waker = waker();
    let mut cx = Context::from_waker(&waker);
    // One poll each sends each call. The first (argument 0) stays in the handler until
    // released; the others may be served beside it and even answered within their first poll.
    let mut early = Vec::new();
    for (i, f) in futures.iter_mut().enumerate() {
        if let Poll::Ready(r) = Pin::new(f).poll(&mut cx) {
            early.push((i, r));
        }
    }
    assert!(early.iter().all(|(i, _)| *i != 0), "the gated call is not answered before its release");
    // All 16 went out from this one thread while the first is still in the handler: a
    // blocking call would have sent one.
    assert_eq!(client.stats().short, 1 + 16);
    release.send(()).unwrap();
    for (i, r) in &early {
        assert_eq!(r.as_ref().unwrap(), &reply_to(&msgs[*i]));
    }
    let rest: Vec<_> = futures.into_iter().enumerate().filter(|(i, _)| early.iter().all(|(j, _)| j != i)).collect();
    let (indices, rest): (Vec<usize>, Vec<_>) = rest.into_iter().unzip();
    for (i, r) in indices.into_iter().zip(run_all(rest)) {
        assert_eq!(r.unwrap(), reply_to(&msgs[i]));
    }
}

#[test]
fn rfc8166_3_3_1_a_dropped_async_call_keeps_its_credit_until_its_reply() {
    // One credit: a requester that took the credit of a call it gave up back at once would
    // send the next call while the responder still serves the first (an overrun).
    let (server, release, seen) = gated_server(1);
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    assert_eq!(client.call(&call(1, 1), &ULB).unwrap(), reply_to(&call(1, 1)));
    assert_eq!(client.credits(), 1);
    let slow = call(2, 0);
    {
        let mut given_up = client.call_async(&slow, &ULB);
        let waker = waker();
        assert!(Pin::new(&mut given_up).poll(&mut Context::from_waker(&waker)).is_pending());
        assert_eq!(client.stats().short, 2, "sent");
    } // dropped: abandoned
    let next = call(3, 3);
    let mut next_call = client.call_async(&next, &ULB);
    let waker = waker();
    assert!(Pin::new(&mut next_call).poll(&mut Context::from_waker(&waker)).is_pending());
    assert_eq!(client.stats().short, 2, "the next call waits for the abandoned one's credit");
    release.send(()).unwrap();
    assert_eq!(run_all(vec![next_call]).pop().unwrap().unwrap(), reply_to(&next));
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3], "the abandoned call was served once, then the next");
    assert!(eventually(|| server.stats().calls.v2 == 3), "{:?}", server.stats());
    assert_eq!(server.stats().credit_overruns, 0);
}

#[test]
fn issue_14_a_dropped_async_call_that_was_never_sent_frees_its_place_at_once() {
    let (server, release, seen) = gated_server(1);
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    assert_eq!(client.call(&call(1, 1), &ULB).unwrap(), reply_to(&call(1, 1)));
    let (slow, queued, last) = (call(2, 0), call(3, 3), call(4, 4));
    let waker = waker();
    let mut cx = Context::from_waker(&waker);
    let mut first = client.call_async(&slow, &ULB);
    assert!(Pin::new(&mut first).poll(&mut cx).is_pending());
    {
        // Queued behind the one credit, never sent, then given up.
        let mut dropped = client.call_async(&queued, &ULB);
        assert!(Pin::new(&mut dropped).poll(&mut cx).is_pending());
    }
    let mut after = client.call_async(&last, &ULB);
    assert!(Pin::new(&mut after).poll(&mut cx).is_pending());
    release.send(()).unwrap();
    let mut both = run_all(vec![first, after]).into_iter();
    assert_eq!(both.next().unwrap().unwrap(), reply_to(&slow));
    assert_eq!(both.next().unwrap().unwrap(), reply_to(&last));
    assert_eq!(*seen.lock().unwrap(), [1, 2, 4], "the call given up before it was sent never went out");
    assert_eq!(server.stats().credit_overruns, 0);
}

#[test]
fn rfc8166_4_5_4_an_abandoned_calls_write_chunk_stays_open_until_its_reply_and_the_connection_stays_up() {
    // The result (an opaque after XID, REPLY and one word) is DDP-eligible: the responder
    // RDMA-Writes it into the call's Write chunk after the caller has given the call up.
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 8192, max_reply: 4096 };
    let (release, gate) = mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let cfg = ServerConfig::default().responder(responder::ResponderConfig::default().credits(4));
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ulb), move |c: &[u8]| {
        if c[8..12] == [0; 4] {
            gate.lock().unwrap().recv_timeout(Duration::from_secs(20)).expect("released");
        }
        // XID, REPLY, an opaque<> of 4096 bytes.
        let mut r = [&c[..4], &[0, 0, 0, 1][..], &4096u32.to_be_bytes()[..]].concat();
        r.resize(12 + 4096, 0xab);
        r
    })
    .unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let first = client.call(&call(1, 1), &ulb).unwrap();
    assert_eq!(first.len(), 12 + 4096);
    // The server counts a reply once it is sent, after the client may have received it.
    assert!(eventually(|| server.stats().write_chunk_results == 1), "the result travels in a Write chunk");
    let slow = call(2, 0);
    {
        let mut given_up = client.call_async(&slow, &ulb);
        let waker = waker();
        assert!(Pin::new(&mut given_up).poll(&mut Context::from_waker(&waker)).is_pending());
    }
    release.send(()).unwrap();
    // The next call is answered after the abandoned one (one connection, served in order):
    // its reply arriving means the responder's Write into the abandoned call's chunk is done.
    let next = client.call(&call(3, 3), &ulb).unwrap();
    assert_eq!(&next[..4], &[0, 0, 0, 3]);
    assert!(eventually(|| server.stats().write_chunk_results == 3), "{:?}", server.stats());
    assert!(client.ended().is_empty(), "no connection lost: {:?}", client.ended());
    assert!(server.peers().iter().all(|p| p.ended.is_none()), "{:?}", server.peers());
}

#[test]
fn issue_14_a_client_spreads_its_calls_over_several_connections() {
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), reply_to).unwrap();
    let cfg = ClientConfig::default().connections(4);
    let client = Client::new(InProcess, server.local_addr(), cfg);
    assert_eq!(client.connections(), 4);
    // Blocking and async calls, 8 XIDs in a row: two on each connection.
    for xid in 1..=4 {
        assert_eq!(client.call(&call(xid, xid), &ULB).unwrap(), reply_to(&call(xid, xid)));
    }
    let msgs: Vec<Vec<u8>> = (5..=8).map(|x| call(x, x)).collect();
    let replies = run_all(msgs.iter().map(|m| client.call_async(m, &ULB)).collect());
    for (m, r) in msgs.iter().zip(replies) {
        assert_eq!(r.unwrap(), reply_to(m));
    }
    assert!(eventually(|| server.stats().calls.v2 == 8), "{:?}", server.stats());
    assert_eq!(server.stats().connections, 4);
    assert_eq!(server.peers().len(), 4);
    assert_eq!(client.credits(), 4 * 32, "each connection has its own credits");
    assert_eq!(client.stats().short, 8);
}

#[test]
fn issue_14_one_xid_in_progress_twice_is_refused_whatever_the_connections() {
    let (server, release, _) = gated_server(32);
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default().connections(3));
    let slow = call(9, 0);
    let mut first = client.call_async(&slow, &ULB);
    let waker = waker();
    assert!(Pin::new(&mut first).poll(&mut Context::from_waker(&waker)).is_pending());
    match client.call(&call(9, 1), &ULB) {
        Err(negotiate::client::ClientError::DuplicateXid(_)) => {}
        other => panic!("{other:?}"),
    }
    release.send(()).unwrap();
    assert_eq!(run_all(vec![first]).pop().unwrap().unwrap(), reply_to(&slow));
}

#[test]
fn rfc8797_4_1_a_call_dropped_after_its_reply_arrived_releases_its_memory_without_undoing_the_remote_invalidation() {
    // Both sides set the R flag: the reply to a call with a chunk is a Send with Invalidate
    // of that chunk's window. A future dropped after its reply arrived, before it was polled
    // again, must release its memory as a completed call does: invalidating that window again
    // fails and takes the connection down.
    use cm_private_data::{Flags, PrivateData};
    let r = Some(PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096));
    // One Write chunk and no Reply chunk (the reduced reply fits inline): one rkey, which the
    // reply invalidates.
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 8192, max_reply: 64 };
    let scfg = ServerConfig::default().private_data(r);
    let (release, gate) = mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ulb), move |c: &[u8]| {
        if c[8..12] == [0; 4] {
            gate.lock().unwrap().recv_timeout(Duration::from_secs(20)).expect("released");
        }
        let mut r = [&c[..4], &[0, 0, 0, 1][..], &4096u32.to_be_bytes()[..]].concat();
        r.resize(12 + 4096, 0xcd);
        r
    })
    .unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default().private_data(r));
    assert_eq!(client.call(&call(1, 1), &ulb).unwrap().len(), 12 + 4096);
    let msg = call(2, 0);
    {
        let mut dropped = client.call_async(&msg, &ulb);
        // The first poll starts the call and sends it (its waker is woken for that step).
        let start = waker();
        assert!(Pin::new(&mut dropped).poll(&mut Context::from_waker(&start)).is_pending());
        assert_eq!(client.stats().short, 2, "the call went out");
        // Polled again while the handler holds the reply: no step ready, so the call keeps
        // this waker, which the client wakes only when the call's next step is: its reply.
        let arrived = Arc::new(Flag::default());
        let ready = Waker::from(arrived.clone());
        assert!(Pin::new(&mut dropped).poll(&mut Context::from_waker(&ready)).is_pending());
        assert!(!arrived.is_set(), "nothing arrived while the handler held the reply");
        release.send(()).unwrap();
        // The reply arrives (received by the dispatcher for this async call) and waits: the
        // future is dropped without being polled again.
        assert!(eventually(|| arrived.is_set()), "the reply never arrived: {:?}", server.stats());
        assert!(client.ended().is_empty(), "its step is the reply, not a lost connection: {:?}", client.ended());
    }
    assert!(eventually(|| server.stats().calls.v2 == 2), "{:?}", server.stats());
    assert_eq!(client.call(&call(3, 3), &ulb).unwrap().len(), 12 + 4096);
    assert!(client.ended().is_empty(), "no connection lost: {:?}", client.ended());
    assert_eq!(client.stats().short, 3, "nothing sent again");
}

/// A waker that only records that it was woken.
#[derive(Default)]
struct Flag(std::sync::atomic::AtomicBool);

impl Flag {
    fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A waker that records the name of each thread that woke it, and unparks the test's thread.
struct Witness {
    thread: std::thread::Thread,
    by: Mutex<Vec<String>>,
}

impl Wake for Witness {
    fn wake(self: Arc<Self>) {
        let me = std::thread::current();
        self.by.lock().unwrap().push(me.name().unwrap_or("unnamed").to_string());
        self.thread.unpark();
    }
}

/// Issue 25 item 3 ("an async caller's task only through its waker"): on a backend whose
/// connections wake a waker (`QueuePair::arm_waker`), a reply reaches its task from the
/// thread that delivered it (the server's, in process; the TCP backend's reader), never by
/// way of the client's dispatcher thread. Polled on this thread with a waker that records who
/// woke it, parking without end between polls except for a 10 s guard: a lost wake-up fails.
fn replies_wake_tasks_without_the_dispatcher<B: Backend + Clone>(backend: B) {
    let server =
        Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(ULB), reply_to)
            .unwrap();
    let client = Client::new(backend, server.local_addr(), ClientConfig::default());
    assert_eq!(client.call(&call(1, 1), &ULB).unwrap(), reply_to(&call(1, 1)));
    let witness = Arc::new(Witness { thread: std::thread::current(), by: Mutex::new(Vec::new()) });
    let waker = Waker::from(witness.clone());
    let mut cx = Context::from_waker(&waker);
    for round in 0..20u32 {
        let msgs: Vec<Vec<u8>> = (0..8).map(|i| call(1000 + round * 8 + i, i)).collect();
        let mut futures: Vec<_> = msgs.iter().map(|m| Some(client.call_async(m, &ULB))).collect();
        let mut left = futures.len();
        let mut seen = witness.by.lock().unwrap().len();
        while left > 0 {
            for (f, m) in futures.iter_mut().zip(&msgs) {
                if let Some(Poll::Ready(r)) = f.as_mut().map(|f| Pin::new(f).poll(&mut cx)) {
                    assert_eq!(r.unwrap(), reply_to(m));
                    *f = None;
                    left -= 1;
                }
            }
            if left > 0 {
                // Until woken (a wake-up between the polls above and here counts: its count
                // is past the one seen before the polls, and its unpark token is kept).
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while witness.by.lock().unwrap().len() == seen {
                    let now = std::time::Instant::now();
                    assert!(now < deadline, "round {round}: {left} calls wait and nothing woke their task in 10 s");
                    std::thread::park_timeout(deadline - now);
                }
            }
            seen = witness.by.lock().unwrap().len();
        }
    }
    let by = witness.by.lock().unwrap();
    assert!(!by.is_empty(), "the replies woke the tasks");
    assert!(
        by.iter().all(|t| t != "negotiate-client"),
        "woken by the client's dispatcher thread: {:?}",
        by.iter().filter(|t| *t == "negotiate-client").count()
    );
}

#[test]
fn issue_25_an_async_reply_wakes_its_task_from_the_connection_in_process() {
    replies_wake_tasks_without_the_dispatcher(InProcess);
}

#[test]
fn issue_25_an_async_reply_wakes_its_task_from_the_connection_over_tcp() {
    replies_wake_tasks_without_the_dispatcher(rpcrdma_verbs::Tcp);
}

/// Async calls on one current-thread executor beside blocking callers on their own threads,
/// on one lane, some async calls given up half-way (their futures dropped): every call that
/// is not given up gets its own reply, and nobody is left waiting: the roles the blocking
/// receivers, the dispatcher and the armed tasks hand each other never leave a message
/// without someone to receive it (a lost hand-off stalls a call until the 60 s guard).
fn mixed_callers_all_finish<B: Backend + Clone>(backend: B) {
    let slow = |c: &[u8]| {
        // Every 16th call answers late, so that some dropped futures are still in flight.
        if u32::from_be_bytes(c[..4].try_into().unwrap()) % 16 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
        reply_to(c)
    };
    let server =
        Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(ULB), slow).unwrap();
    let client = Arc::new(Client::new(backend, server.local_addr(), ClientConfig::default()));
    let (done, finished) = mpsc::channel();
    let blocking: Vec<_> = (0..4u32)
        .map(|t| {
            let (client, done) = (client.clone(), done.clone());
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    let m = call(0x1000_0000 + t * 1000 + i, i);
                    assert_eq!(client.call(&m, &ULB).unwrap(), reply_to(&m));
                }
                done.send(()).unwrap();
            })
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let async_client = client.clone();
    let async_done = done.clone();
    let tasks = std::thread::spawn(move || {
        runtime.block_on(async {
            let handles: Vec<_> = (0..8u32)
                .map(|t| {
                    let client = async_client.clone();
                    tokio::spawn(async move {
                        for i in 0..200u32 {
                            let m = call(0x2000_0000 + t * 1000 + i, i);
                            if i % 50 == 7 {
                                // Given up at once, or after it went out.
                                let _ =
                                    tokio::time::timeout(Duration::from_micros(50), client.call_async(&m, &ULB)).await;
                                continue;
                            }
                            assert_eq!(client.call_async(&m, &ULB).await.unwrap(), reply_to(&m));
                        }
                    })
                })
                .collect();
            for h in handles {
                h.await.unwrap();
            }
        });
        async_done.send(()).unwrap();
    });
    for _ in 0..5 {
        finished.recv_timeout(Duration::from_secs(60)).expect("every caller finishes");
    }
    for b in blocking {
        b.join().unwrap();
    }
    tasks.join().unwrap();
}

#[test]
fn issue_25_async_and_blocking_callers_on_one_lane_all_finish_in_process() {
    mixed_callers_all_finish(InProcess);
}

#[test]
fn issue_25_async_and_blocking_callers_on_one_lane_all_finish_over_tcp() {
    mixed_callers_all_finish(rpcrdma_verbs::Tcp);
}

/// Parks this thread until `witness` was woken more than `seen` times; false after 10 s.
fn woken_past(witness: &Witness, seen: usize) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while witness.by.lock().unwrap().len() <= seen {
        let now = std::time::Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::park_timeout(deadline - now);
    }
    true
}

/// One waker per connection is armed at a time, the last task's to ask. When that task's
/// call ends while another task still waits, the other is armed in its place: its reply,
/// coming later, wakes it (here B waits in the handler until released; A, armed last, gets
/// its reply and is never polled again).
#[test]
fn issue_25_when_the_armed_tasks_call_ends_another_waiting_task_is_armed() {
    let (server, release, _) = gated_server(32);
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    assert_eq!(client.call(&call(1, 1), &ULB).unwrap(), reply_to(&call(1, 1)));
    let witness = |_: ()| Arc::new(Witness { thread: std::thread::current(), by: Mutex::new(Vec::new()) });
    let (wa, wb) = (witness(()), witness(()));
    let (waker_a, waker_b) = (Waker::from(wa.clone()), Waker::from(wb.clone()));
    let (ma, mb) = (call(0xa, 1), call(0xb, 0)); // B (argument 0) waits for the release
    let mut fb = client.call_async(&mb, &ULB);
    let mut fa = client.call_async(&ma, &ULB);
    assert!(Pin::new(&mut fb).poll(&mut Context::from_waker(&waker_b)).is_pending());
    // A is polled until ready, each time after its waker fired (a wake between the poll and
    // the wait counts: the count is taken before the poll).
    let reply_a = loop {
        let seen = wa.by.lock().unwrap().len();
        if let Poll::Ready(r) = Pin::new(&mut fa).poll(&mut Context::from_waker(&waker_a)) {
            break r.unwrap();
        }
        assert!(woken_past(&wa, seen), "A's reply woke A");
    };
    assert_eq!(reply_a, reply_to(&ma));
    drop(fa);
    release.send(()).unwrap();
    // B is polled whenever woken, as an executor would, until its reply is there.
    let reply_b = loop {
        let seen = wb.by.lock().unwrap().len();
        if let Poll::Ready(r) = Pin::new(&mut fb).poll(&mut Context::from_waker(&waker_b)) {
            break r;
        }
        assert!(woken_past(&wb, seen), "B's reply woke B, though A was armed last");
    };
    assert_eq!(reply_b.unwrap(), reply_to(&mb));
}

/// An armed task whose connection goes down under it (here: its call has no reply within the
/// requester's timeout, so the client closes the connection, RFC 8166 section 4.5.4) is woken
/// by the flushes, sees the link down, and its call goes out again on a new connection and
/// fails there in time, all through its waker: polled only when woken, with a 20 s guard.
#[test]
fn issue_25_an_armed_task_whose_connection_goes_down_is_woken_and_its_call_ends() {
    let (server, release, seen) = gated_server(32);
    let requester =
        negotiate::requester::RequesterConfig::default().timeout(Duration::from_millis(300)).max_attempts(2);
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default().requester(requester));
    assert_eq!(client.call(&call(1, 1), &ULB).unwrap(), reply_to(&call(1, 1)));
    let witness = Arc::new(Witness { thread: std::thread::current(), by: Mutex::new(Vec::new()) });
    let waker = Waker::from(witness.clone());
    let m = call(0x99, 0); // argument 0: held in the handler until released
    let mut f = client.call_async(&m, &ULB);
    let failed = loop {
        let before = witness.by.lock().unwrap().len();
        if let Poll::Ready(r) = Pin::new(&mut f).poll(&mut Context::from_waker(&waker)) {
            break r;
        }
        assert!(woken_past(&witness, before), "the task was woken while its call went on");
    };
    match failed {
        Err(negotiate::client::ClientError::ReplyTimeout { attempts: 2, .. }) => {}
        other => panic!("expected a reply timeout after 2 attempts, got {other:?}"),
    }
    // Both attempts reached the handler, one per connection.
    assert_eq!(seen.lock().unwrap().iter().filter(|&&x| x == 0x99).count(), 2);
    release.send(()).unwrap();
    release.send(()).unwrap();
}
