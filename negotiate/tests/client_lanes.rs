//! A client's connections (`ClientConfig::connections`) under one dispatcher: what one
//! connection's turn does holds up no other (found by a review of the change that gave a
//! client one dispatcher for all its connections).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess, QpCaps};

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// An RPC-shaped call: XID, CALL, one argument word.
fn call(xid: u32, arg: u32) -> Vec<u8> {
    [xid, 0, arg].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// What the servers here answer: XID, REPLY, the argument plus one.
fn reply_to(call: &[u8]) -> Vec<u8> {
    let word = |i: usize| u32::from_be_bytes(call[i..i + 4].try_into().unwrap());
    [word(0), 1, word(8).wrapping_add(1)].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// A backchannel handler that makes a forward call before it answers, on the connection
/// whose backward call it serves or on the other one: the forward call completes, the
/// backward call is answered, and the client goes on serving. (With one dispatcher for both
/// connections, a forward call on the other connection hung the whole client: its reply
/// woke only the dispatcher, which was running the handler; on the same connection it hung
/// with a dispatcher per connection too.)
#[test]
fn a_backchannel_handler_may_call_forward_on_either_connection() {
    for (connection, forward_xid) in [(0usize, 0x100u32), (1, 0x100), (0, 0x101), (1, 0x101)] {
        let cfg = ServerConfig::default().timeout(Duration::from_secs(5));
        let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), reply_to).unwrap();
        let client_slot: Arc<OnceLock<Weak<Client<InProcess>>>> = Arc::new(OnceLock::new());
        let forward: Arc<Mutex<Option<Vec<u8>>>> = Arc::new(Mutex::new(None));
        let (slot, got) = (client_slot.clone(), forward.clone());
        let handler = Arc::new(move |c: &[u8]| {
            let client = slot.get().and_then(Weak::upgrade).expect("the client");
            *got.lock().unwrap() = client.call(&call(forward_xid, 7), &ULB).ok();
            [&c[..4], &[0, 0, 0, 1][..], &c[8..]].concat()
        });
        let client = Arc::new(Client::with_backchannel(
            InProcess,
            server.local_addr(),
            ClientConfig::default().connections(2),
            handler,
        ));
        client_slot.set(Arc::downgrade(&client)).ok();
        // Both connections made (a call goes on connection XID mod 2), then idle: the
        // dispatcher receives on both.
        for x in 0..4u32 {
            assert_eq!(client.call(&call(x, x), &ULB).unwrap(), reply_to(&call(x, x)));
        }
        std::thread::sleep(Duration::from_millis(100));
        let back = server.backchannels()[connection].clone();
        let answer = back.call(&[0x80, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4]);
        assert_eq!(answer.unwrap(), [0x80, 0, 0, 1, 0, 0, 0, 1, 1, 2, 3, 4], "{connection}, {forward_xid:#x}");
        let forward = forward.lock().unwrap().clone();
        assert_eq!(forward, Some(reply_to(&call(forward_xid, 7))), "{connection}, {forward_xid:#x}");
        // And both connections serve afterwards (within the requester's timeout, or the
        // client hangs: a channel with a deadline, not a join).
        let (tx, rx) = mpsc::channel();
        let c = client.clone();
        std::thread::spawn(move || {
            let replies = [0x200, 0x201].map(|x| c.call(&call(x, 1), &ULB).ok());
            let _ = tx.send(replies);
        });
        let after = rx.recv_timeout(Duration::from_secs(10)).expect("calls afterwards come back");
        assert_eq!(after, [0x200, 0x201].map(|x| Some(reply_to(&call(x, 1)))), "{connection}, {forward_xid:#x}");
    }
}

/// A backend whose every connection attempt after the first `fast` takes `delay` (a
/// responder slow to accept), recording when the slow one ran.
#[derive(Clone)]
struct SlowConnect<B> {
    inner: B,
    fast: Arc<AtomicUsize>,
    delay: Duration,
    slow: Arc<Mutex<Option<(Instant, Instant)>>>,
}

impl<B: Backend + Clone> Backend for SlowConnect<B> {
    type Pd = B::Pd;
    type Region = B::Region;
    type Qp = B::Qp;
    type Listener = B::Listener;
    type Request = B::Request;
    fn any_address(&self) -> String {
        self.inner.any_address()
    }
    fn alloc_pd(&self) -> rpcrdma_verbs::Result<Self::Pd> {
        self.inner.alloc_pd()
    }
    fn wakes_wakers(&self) -> bool {
        self.inner.wakes_wakers()
    }
    fn rdma_at_post(&self) -> bool {
        self.inner.rdma_at_post()
    }
    fn readiness(&self) -> Option<rpcrdma_verbs::Readiness> {
        self.inner.readiness()
    }
    fn listen_with(&self, addr: &str, opts: &rpcrdma_verbs::ListenOptions) -> rpcrdma_verbs::Result<Self::Listener> {
        self.inner.listen_with(addr, opts)
    }
    fn connect(
        &self,
        pd: &Self::Pd,
        addr: &str,
        private_data: &[u8],
        caps: QpCaps,
        timeout: Duration,
    ) -> rpcrdma_verbs::Result<(Self::Qp, Vec<u8>)> {
        let fast = self.fast.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if !fast {
            let start = Instant::now();
            std::thread::sleep(self.delay);
            self.slow.lock().unwrap().get_or_insert((start, Instant::now()));
        }
        self.inner.connect(pd, addr, private_data, caps, timeout)
    }
}

/// One connection's reconnect, slow because the responder is, holds up no call on the
/// other: calls on connection 0 complete while connection 1 waits for its connection.
/// (With the connection attempt made on the one dispatcher's thread, connection 0's
/// callers, who leave the receiving to the dispatcher while several wait, completed none
/// then, and their calls timed out.)
#[test]
fn a_slow_reconnect_on_one_connection_holds_up_no_other() {
    let slow_call = |c: &[u8]| {
        if c[8..12] == [0xde, 0xad, 0xbe, 0xef] {
            std::thread::sleep(Duration::from_millis(700));
        }
        reply_to(c)
    };
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), slow_call).unwrap();
    let slow = Arc::new(Mutex::new(None));
    let b = SlowConnect {
        inner: InProcess,
        fast: Arc::new(AtomicUsize::new(2)),
        delay: Duration::from_secs(2),
        slow: slow.clone(),
    };
    let mut cfg = ClientConfig::default().connections(2);
    cfg.requester.timeout = Duration::from_millis(300);
    let client = Client::new(b, server.local_addr(), cfg);
    for x in 0..4u32 {
        client.call(&call(x, x), &ULB).unwrap();
    }
    // Completion instants of connection 0's calls, as microseconds since `t0`.
    let t0 = Instant::now();
    let done: Mutex<Vec<u64>> = Mutex::new(Vec::with_capacity(1 << 16));
    let failed = AtomicU64::new(0);
    std::thread::scope(|s| {
        // Connection 1: a call with no reply within the timeout closes its connection; the
        // next is made slowly.
        s.spawn(|| {
            let _ = client.call(&call(101, 0xdead_beef), &ULB);
        });
        for t in 0..8u32 {
            let (client, done, failed) = (&client, &done, &failed);
            s.spawn(move || {
                let mut i = 0;
                while t0.elapsed() < Duration::from_millis(3000) {
                    i += 1;
                    let m = call((t << 20 | i) * 2, i); // even XIDs: connection 0
                    match client.call(&m, &ULB) {
                        Ok(reply) => {
                            assert_eq!(reply, reply_to(&m));
                            done.lock().unwrap().push(t0.elapsed().as_micros() as u64);
                        }
                        Err(_) => _ = failed.fetch_add(1, Ordering::Relaxed),
                    }
                }
            });
        }
    });
    let (start, end) = slow.lock().unwrap().expect("connection 1 was made again, slowly");
    let (start, end) = ((start - t0).as_micros() as u64, (end - t0).as_micros() as u64);
    let during = done.lock().unwrap().iter().filter(|&&at| at > start && at < end).count();
    // (A call on connection 0 may still time out on a loaded machine, 300 ms being short:
    // counted, not asserted.)
    let failed = failed.load(Ordering::Relaxed);
    assert!(during > 0, "no call on connection 0 completed while connection 1 reconnected ({failed} failed)");
}

/// A backward call whose handler runs long holds up no forward call, on its own connection
/// or the other: the handler runs on the client's workers, not on the one dispatcher nor on
/// the caller that received the backward call. (With the handler run where the backward
/// call was received, the dispatcher, receiving for both idle connections, ran it, and the
/// forward calls made meanwhile waited for it to end.)
#[test]
fn a_backward_call_that_runs_long_holds_up_no_forward_call() {
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), reply_to).unwrap();
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let (started, entered) = mpsc::channel::<()>();
    let started = Mutex::new(started);
    let handler = Arc::new(move |c: &[u8]| {
        started.lock().unwrap().send(()).unwrap();
        // Until the test lets it go (or 20 s: the test has failed by then).
        let _ = released.lock().unwrap().recv_timeout(Duration::from_secs(20));
        [&c[..4], &[0, 0, 0, 1][..], &c[8..]].concat()
    });
    let client =
        Client::with_backchannel(InProcess, server.local_addr(), ClientConfig::default().connections(2), handler);
    for x in 0..4u32 {
        assert_eq!(client.call(&call(x, x), &ULB).unwrap(), reply_to(&call(x, x)));
    }
    // Idle: the dispatcher receives on both connections, and takes the backward call.
    std::thread::sleep(Duration::from_millis(100));
    for connection in 0..2 {
        let back = server.backchannels()[connection].clone();
        let backward = std::thread::spawn(move || back.call(&[0x80, 0, 0, 7, 0, 0, 0, 0, 9, 9, 9, 9]));
        entered.recv_timeout(Duration::from_secs(5)).expect("the handler runs");
        // While it runs: calls on both connections, from one thread and from several.
        for x in 0..8u32 {
            let m = call(0x1000 * (connection as u32 + 1) + x, x);
            assert_eq!(client.call(&m, &ULB).unwrap(), reply_to(&m), "connection {connection}, call {x}");
        }
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let client = &client;
                s.spawn(move || {
                    let m = call(0x2000 * (connection as u32 + 1) + t, t);
                    assert_eq!(client.call(&m, &ULB).unwrap(), reply_to(&m));
                });
            }
        });
        release.send(()).unwrap();
        let answer = backward.join().unwrap().expect("the backward call is answered once let go");
        assert_eq!(answer, [0x80, 0, 0, 7, 0, 0, 0, 1, 9, 9, 9, 9]);
    }
}

/// One connection's backward calls, beyond its credit and slow, hold up no other
/// connection's: a server sends four slow backward calls on connection A (two served by the
/// workers, two waiting in A's lane) and then one on connection B, which is answered while
/// A's still run. (A review found B's call waiting for A's handlers when the workers' threads
/// were bounded for the client, not a connection, and when the calls beyond a lane's share
/// ran on the dispatcher's thread.) The server is written by hand over the data path.
#[test]
fn one_connections_backward_calls_hold_up_no_others() {
    use negotiate::datapath::{send_error, ReceivePool, Transport};
    use rpcrdma_v1::Version;
    use rpcrdma_verbs::{ConnectRequest, Listener};
    use std::sync::atomic::AtomicBool;
    const T: Duration = Duration::from_secs(10);
    const SLOW: u32 = 0x5105_5105;
    let word = |b: &[u8], at: usize| u32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    // An RPC-over-RDMA Version One RDMA_MSG with no chunks, granting 8 credits.
    let msg = |xid: u32, rpc: &[u8]| -> Vec<u8> {
        let head: Vec<u8> = [xid, 1, 8, 0, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
        [head, rpc.to_vec()].concat()
    };
    let release = Arc::new(AtomicBool::new(false));
    let let_go = release.clone();
    let handler = Arc::new(move |c: &[u8]| {
        if c[8..12] == SLOW.to_be_bytes() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !let_go.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        reply_to(c)
    });
    let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    let requester = negotiate::requester::RequesterConfig::default().versions((Version::ONE, Version::ONE));
    let cfg = ClientConfig::default().connections(2).requester(requester);
    let client = Arc::new(Client::with_backchannel(InProcess, listener.local_addr(), cfg, handler));
    let pd = InProcess.alloc_pd().unwrap();
    let ends: Vec<_> = (0..2)
        .map(|_| {
            let qp = listener.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
            let conn = Transport::<InProcess>::new(pd.clone(), qp, T);
            let pool = ReceivePool::new(&conn, 32, 1024).unwrap();
            (conn, pool)
        })
        .collect();
    // A first call on each connection (XIDs 100 and 101: one each), answered.
    let first: Vec<_> = (100..102u32)
        .map(|xid| {
            let c = client.clone();
            std::thread::spawn(move || c.call(&call(xid, 0), &ULB).unwrap())
        })
        .collect();
    std::thread::scope(|s| {
        for (conn, pool) in &ends {
            s.spawn(move || {
                let m = pool.receive(conn).unwrap();
                // (The call offers a Reply chunk, which an inline reply leaves unused: its RPC
                // message is the last 12 bytes.)
                let xid = word(&m.bytes, 0);
                send_error(conn, &msg(xid, &reply_to(&m.bytes[m.bytes.len() - 12..]))).unwrap();
            });
        }
    });
    for f in first {
        f.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let ((a, a_pool), (b, b_pool)) = (&ends[0], &ends[1]);
    for i in 0..4u32 {
        let xid = 0xc000_0000 + i;
        send_error(a, &msg(xid, &call(xid, SLOW))).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    send_error(b, &msg(0xe000_0001, &call(0xe000_0001, 1))).unwrap();
    let on_b = b_pool.receive_within(b, Duration::from_secs(2));
    let took = started.elapsed();
    release.store(true, Ordering::SeqCst);
    let on_a: Vec<u32> = (0..4).map(|_| word(&a_pool.receive(a).unwrap().bytes[28..], 0)).collect();
    let on_b = on_b.unwrap_or_else(|e| panic!("connection B's backward call waited for A's handlers ({took:?}): {e}"));
    assert_eq!(&on_b.bytes[28..], &reply_to(&call(0xe000_0001, 1))[..]);
    assert_eq!(on_a.len(), 4, "A's four answered once let go");
    assert_eq!(client.stats().backward_dropped, 0);
}
