//! Several calls in flight on one connection (issue 14): a `negotiate::server::Server` serves
//! up to `ServerLimits::calls_in_progress_per_connection` calls of one connection at once, and
//! never more than the credits it grants (RFC 8166 section 3.3.1), so that a requester with
//! several calls in flight gets them served side by side instead of one after another. Each
//! test's handler waits (boundedly) for the other calls it expects beside it, so the
//! one-call-at-a-time server fails each of them. On the in-process and TCP backends.

#[macro_use]
mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::*;
use negotiate::client::{Client, ClientConfig};
use negotiate::datapath::{send_call, CallParams};
use negotiate::limits::ServerLimits;
use negotiate::reply::reply_header;
use negotiate::server::{Server, ServerConfig};
use negotiate::{requester, responder};
use rpcrdma_v1::header::HeaderLimits;
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::Version;
use rpcrdma_verbs::Backend;

/// How long a handler waits for the calls it expects beside it before it gives up (and the
/// test then fails on what it saw): far longer than any call here takes, and shorter than the
/// client's timeout ([`client_for`]), so that a server that fails a test fails it by what the
/// handler saw, not by retransmissions.
const GATHER: Duration = Duration::from_secs(3);
/// The call each client makes first, alone, which every handler here answers at once: a
/// requester has one credit until its first reply (RFC 8166 section 3.3.3), after which its
/// window is the grant.
const WARM_UP: u32 = 0x1;

/// The handlers running at once on the server, and the most seen.
#[derive(Default)]
struct Inside {
    /// (running now, most running at once).
    count: Mutex<(usize, usize)>,
    changed: Condvar,
}

impl Inside {
    /// A handler starts.
    fn enter(&self) {
        let mut c = self.count.lock().unwrap();
        c.0 += 1;
        c.1 = c.1.max(c.0);
        self.changed.notify_all();
    }

    /// A handler ends.
    fn leave(&self) {
        self.count.lock().unwrap().0 -= 1;
        self.changed.notify_all();
    }

    /// Waits until at least `k` handlers have run at once (the most so far: the first of them
    /// to see it may leave before the last looks), or `within` passed; whether they have.
    fn gather(&self, k: usize, within: Duration) -> bool {
        let c = self.count.lock().unwrap();
        let (c, _) = self.changed.wait_timeout_while(c, within, |c| c.1 < k).unwrap();
        c.1 >= k
    }

    fn most(&self) -> usize {
        self.count.lock().unwrap().1
    }
}

/// A server whose echo handler calls `during` between entering and leaving `inside`.
fn server_with<B: Backend + Clone>(
    backend: &B,
    cfg: ServerConfig,
    during: impl Fn(&Inside, &[u8]) + Send + Sync + 'static,
) -> (Server, Arc<Inside>) {
    let inside = Arc::new(Inside::default());
    let i = inside.clone();
    let handler = move |c: &[u8]| {
        if word(c, 0) == WARM_UP {
            return echo(c);
        }
        i.enter();
        during(&i, c);
        i.leave();
        echo(c)
    };
    let server = Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(ULB), handler).expect("server");
    (server, inside)
}

/// A client of `server` whose window is open: its first call answered. Its timeout is long
/// (30 s), so that the calls held in the handler here are never sent again.
fn client_for<B: Backend + Clone>(backend: B, server: &Server) -> Arc<Client<B>> {
    let cfg = ClientConfig::default().requester(requester::RequesterConfig::default().timeout(Duration::from_secs(30)));
    let client = Arc::new(Client::new(backend, server.local_addr(), cfg));
    call_ok(&client, WARM_UP, SMALL);
    client
}

/// `callers` threads, each making `calls` echo calls (XIDs `base + caller * 1000 + i`) over
/// `client`; returns once every call got its own reply.
fn call_from_threads<B: Backend + Clone>(client: &Arc<Client<B>>, callers: u32, calls: u32, base: u32) {
    let threads: Vec<_> = (0..callers)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || (0..calls).for_each(|i| call_ok(&client, base + t * 1000 + i, SMALL)))
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("every call got its own reply"));
}

/// Issue 14: one connection's calls run in the handler at once, up to the bound. Four
/// callers on one client, a handler that waits until four calls are inside it: the
/// one-call-at-a-time server saw one.
fn issue14_several_calls_of_one_connection_are_in_the_handler_at_once<B: Backend + Clone>(backend: B) {
    const K: usize = 4;
    let (server, inside) = server_with(&backend, ServerConfig::default(), |i, _| {
        i.gather(K, GATHER);
    });
    assert!(K <= ServerLimits::default().calls_in_progress(ServerConfig::default().responder.credits));
    let client = client_for(backend, &server);
    call_from_threads(&client, K as u32, 1, 0x100);
    assert_eq!(inside.most(), K, "calls in the handler at once");
    let s = stats_once(&server, "every call", |s| s.calls.total() == K as u64 + 1);
    assert_eq!((s.connections, s.credit_overruns, s.errors_sent), (1, 0, 0), "one connection, within its credits");
}

/// Issue 14: never more calls in the handler than `calls_in_progress_per_connection`, however
/// many callers and credits. Twelve callers, 32 credits, a bound of 3: each handler waits for
/// three beside it, then stays a little, so that a fourth let in would be seen.
fn issue14_calls_in_the_handler_never_exceed_calls_in_progress_per_connection<B: Backend + Clone>(backend: B) {
    const BOUND: usize = 3;
    let cfg = ServerConfig::default().limits(ServerLimits::default().calls_in_progress_per_connection(BOUND));
    assert_eq!(cfg.responder.credits, 32, "more credits than the bound");
    let (server, inside) = server_with(&backend, cfg, |i, _| {
        i.gather(BOUND, GATHER);
        std::thread::sleep(Duration::from_millis(20));
    });
    let client = client_for(backend, &server);
    call_from_threads(&client, 12, 3, 0x1000);
    assert_eq!(inside.most(), BOUND, "calls in the handler at once: the bound, reached and never passed");
    let s = stats_once(&server, "every call", |s| s.calls.total() == 37);
    assert_eq!(s.connections, 1);
}

/// Issue 14, RFC 8166 section 3.3.1: the credits granted bound the calls served at once too,
/// even for a requester that sends beyond them. Two credits (three Receives with the
/// backward slot), a bound of 8, a raw requester that sends three calls without waiting:
/// two at a time in the handler, and all three answered.
fn issue14_a_requester_beyond_its_credits_gets_no_more_calls_served_at_once<B: Backend + Clone>(backend: B) {
    let cfg = ServerConfig::default()
        .responder(responder::ResponderConfig::default().credits(2))
        .limits(ServerLimits::default().calls_in_progress_per_connection(8));
    // Each handler waits for all three: only a server serving beyond the grant lets them in.
    let (server, inside) = server_with(&backend, cfg, |i, _| {
        i.gather(3, Duration::from_secs(1));
    });
    let raw = RawRequester::connect(&backend, &server.local_addr());
    let params = CallParams {
        version: Version::ONE,
        credits: 2,
        thresholds: InlineThresholds { call: 1024, reply: 1024 },
        dialect: None,
        remote_invalidation: false,
        segments: negotiate::thresholds::SegmentLimits::NONE,
    };
    let xids = [0x31, 0x32, 0x33];
    let mut pending: Vec<_> =
        xids.iter().map(|&x| (x, send_call(&raw.conn, &call(x, SMALL), &ULB, &params).expect("send"))).collect();
    for _ in xids {
        let got = raw.pool.receive(&raw.conn).expect("a reply");
        let header = reply_header(&got.bytes, &HeaderLimits::default()).expect("a reply");
        let at = pending.iter().position(|(x, _)| *x == header.xid()).expect("the reply to one of our calls");
        let (xid, p) = pending.swap_remove(at);
        let mut out = Vec::new();
        p.complete(&raw.conn, &call(xid, SMALL), &header, got.invalidated_rkey, &ULB, &mut out).expect("complete");
        assert!(out == echo(&call(xid, SMALL)), "call {xid:#x}: its own reply");
    }
    assert_eq!(inside.most(), 2, "calls in the handler at once: the credits granted");
    let s = stats_once(&server, "every call", |s| s.calls.total() == 3);
    assert_eq!(s.connections, 1);
}

/// Issue 14: a slow handler holds up only its own call. One call stays in the handler until
/// twenty others of the same connection have been answered (or [`GATHER`] passed); the
/// one-call-at-a-time server served none of them meanwhile.
fn issue14_a_slow_handler_does_not_hold_up_other_calls_on_its_connection<B: Backend + Clone>(backend: B) {
    const SLOW: u32 = 0x5105;
    const OTHERS: usize = 20;
    let answered = Arc::new((Mutex::new(0usize), Condvar::new()));
    let a = answered.clone();
    let (server, inside) = server_with(&backend, ServerConfig::default(), move |_, c| {
        if word(c, 0) == SLOW {
            let n = a.0.lock().unwrap();
            drop(a.1.wait_timeout_while(n, GATHER, |n| *n < OTHERS).unwrap());
        }
    });
    let client = client_for(backend, &server);
    let c = client.clone();
    let slow = std::thread::spawn(move || {
        call_ok(&c, SLOW, SMALL);
        Instant::now()
    });
    // The slow call is in the handler before the others start.
    assert!(inside.gather(1, GATHER), "the slow call reached the handler");
    let mut others_done = Instant::now();
    for i in 0..OTHERS as u32 {
        call_ok(&client, 0x600 + i, SMALL);
        others_done = Instant::now();
        *answered.0.lock().unwrap() += 1;
        answered.1.notify_all();
    }
    let slow_done = slow.join().expect("the slow call got its own reply");
    assert!(others_done < slow_done, "the other calls were answered while the slow one was in the handler");
    let s = stats_once(&server, "every call", |s| s.calls.total() == OTHERS as u64 + 2);
    assert_eq!(s.connections, 1);
}

/// Issue 14: a handler that panics while other calls of its connection are in the handler
/// ends only its own call (an RPC SYSTEM_ERR reply, counted); the calls beside it are
/// answered and the connection serves on.
fn issue14_a_panicking_handler_does_not_stop_other_calls_on_its_connection<B: Backend + Clone>(backend: B) {
    const PANIC: u32 = 0xdead;
    const BESIDE: usize = 3;
    let (server, inside) = server_with(&backend, ServerConfig::default(), |i, c| {
        // Every call waits until all are inside: the panic happens with the others there.
        i.gather(BESIDE + 1, GATHER);
        if word(c, 0) == PANIC {
            i.leave();
            panic!("the handler failed on call {PANIC:#x} (this panic is the test's)");
        }
    });
    let client = client_for(backend, &server);
    let c = client.clone();
    let panicking = std::thread::spawn(move || call_within(&c, call(PANIC, SMALL), ULB));
    call_from_threads(&client, BESIDE as u32, 1, 0x700);
    let reply = panicking.join().unwrap().expect("a reply, not a lost connection");
    assert_eq!(reply, words(&[PANIC, 1, 0, 0, 0, 5]), "MSG_ACCEPTED, SYSTEM_ERR");
    assert_eq!(inside.most(), BESIDE + 1, "the panicking call was in the handler beside the others");
    call_ok(&client, 0x800, SMALL);
    let s = stats_once(&server, "every call", |s| s.handler_panics == 1 && s.calls.total() == 5);
    assert_eq!(s.connections, 1);
}

/// Issue 14: dropping the server while several calls of a connection are in the handler
/// waits for those handlers (the close cuts every other wait) and leaves none of the
/// threads that served them: the connection's workers end with it.
fn issue14_server_drop_ends_every_thread_that_served_a_connection<B: Backend + Clone>(backend: B) {
    const K: usize = 4;
    let tasks = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new((Mutex::new(false), Condvar::new()));
    let (t, r) = (tasks.clone(), release.clone());
    let (server, inside) = server_with(&backend, ServerConfig::default(), move |i, _| {
        // This thread's entry under /proc ("PID/task/TID"): gone once the thread has ended.
        t.lock().unwrap().push(std::fs::read_link("/proc/thread-self").expect("/proc/thread-self"));
        i.gather(K, GATHER);
        drop(r.1.wait_timeout_while(r.0.lock().unwrap(), GATHER, |released| !*released).unwrap());
    });
    let client = client_for(backend, &server);
    for n in 0..K as u32 {
        let c = client.clone();
        // Their calls end with the connection: lost, then refused; what they return is not
        // this test's.
        std::thread::spawn(move || drop(c.call(&call(0x900 + n, SMALL), &ULB)));
    }
    assert!(inside.gather(K, GATHER), "{K} calls in the handler at once");
    let dropping = std::thread::spawn(move || drop(server));
    std::thread::sleep(Duration::from_millis(50));
    assert!(!dropping.is_finished(), "Server::drop waits for the handlers running");
    *release.0.lock().unwrap() = true;
    release.1.notify_all();
    dropping.join().expect("Server::drop returned");
    let tasks = tasks.lock().unwrap().clone();
    assert_eq!(tasks.len(), K, "one handler run per call");
    let deadline = Instant::now() + GATHER;
    while tasks.iter().any(|t| std::path::Path::new("/proc").join(t).exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let left: Vec<_> = tasks.iter().filter(|t| std::path::Path::new("/proc").join(t).exists()).collect();
    assert!(left.is_empty(), "threads that served calls still running after Server::drop: {left:?}");
}

on_both_backends!(
    issue14_several_calls_of_one_connection_are_in_the_handler_at_once,
    issue14_calls_in_the_handler_never_exceed_calls_in_progress_per_connection,
    issue14_a_requester_beyond_its_credits_gets_no_more_calls_served_at_once,
    issue14_a_slow_handler_does_not_hold_up_other_calls_on_its_connection,
    issue14_a_panicking_handler_does_not_stop_other_calls_on_its_connection,
    issue14_server_drop_ends_every_thread_that_served_a_connection,
);
