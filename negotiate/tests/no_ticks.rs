//! Issue 25, "timers come from `poll_timeout`: no polling ticks anywhere": while a call waits
//! a second for a slow handler, no thread of the client, the server or the TCP backend's
//! readiness loop wakes on a tick. Counted from the kernel's context-switch counts of the
//! process's threads (`/proc/self/task/*/status`), Linux only; one test in this binary, so
//! that no other test's threads are counted.
//!
//! Before this was so, a blocking caller receiving for itself looked again every 20 ms
//! (`LINGER`), the client's dispatcher as often, and the TCP backend's loop thread every
//! 2 ms while a guest drove it: 45, 44 and 424 wake-ups in the 0.9 s counted here.

#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{OnExecutor, Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// How long the handler takes, and how long of it is counted.
const HANDLER_TAKES: Duration = Duration::from_secs(1);
const COUNTED: Duration = Duration::from_millis(900);

/// The most context switches one group of threads (by name) may make in [`COUNTED`]: a few
/// for the call's own hand-offs, where a 20 ms tick makes 45 and a 2 ms one 450.
const QUIET_MOST: u64 = 12;

/// Voluntary and involuntary context switches so far, summed by thread name (at most 15
/// characters, as the kernel keeps).
fn switches() -> BTreeMap<String, u64> {
    let mut by_name = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim_end().to_string();
        *by_name.entry(name).or_default() += switches_in(&task.path().join("status"));
    }
    by_name
}

/// The switches each group of threads made while `call` ran on a thread named `caller`, in
/// the first [`COUNTED`] of it.
fn counted_during(caller: &str, call: impl FnOnce() + Send) -> BTreeMap<String, u64> {
    std::thread::scope(|s| {
        let before = switches();
        let t = std::thread::Builder::new().name(caller.into()).spawn_scoped(s, call).unwrap();
        std::thread::sleep(COUNTED);
        let after = switches();
        t.join().unwrap();
        after.into_iter().map(|(name, n)| (name.clone(), n - before.get(&name).copied().unwrap_or(0))).collect()
    })
}

fn a_slow_call_wakes_nobody_on_a_tick<B: Backend + Clone>(b: B, label: &str) {
    let slow = |call: &[u8]| {
        std::thread::sleep(HANDLER_TAKES);
        [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat()
    };
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ULB), slow).unwrap();
    let client = Client::new(b, server.local_addr(), ClientConfig::default());
    let call = |xid: u32| [xid.to_be_bytes(), [0; 4], [0; 4], [0; 4]].concat();
    // The probe settled and the buffers registered first.
    client.call(&call(1), &ULB).unwrap();

    let blocking = counted_during("blocking-call", || assert_eq!(client.call(&call(2), &ULB).unwrap().len(), 16));
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let on_a_task =
        counted_during("async-call", || assert_eq!(rt.block_on(client.call_async(&call(3), &ULB)).unwrap().len(), 16));
    for (how, counts) in [("a blocking call", blocking), ("an async call", on_a_task)] {
        eprintln!("{label}, {how}: context switches in {COUNTED:?} of a {HANDLER_TAKES:?} call: {counts:?}");
        // The caller, the client's dispatcher, the server's loop threads, TCP's loop thread.
        for (name, n) in &counts {
            assert!(
                *n <= QUIET_MOST,
                "{label}, {how}: thread(s) {name:?} switched {n} times while the call waited: a tick"
            );
        }
        // (And the threads that would tick were there to be counted.)
        assert!(counts.contains_key("negotiate-clien") && counts.contains_key("negotiate-call"), "{label}: {counts:?}");
    }
}

/// A server's async handler (`OnExecutor`) whose future takes a second: the thread that
/// serves the call waits for it with no timeout (it looked every `STOP_CHECK`, 100 ms, until
/// the twenty-fourth session: 9 more wake-ups in the 0.9 s counted), and is told when the
/// server stops.
fn a_slow_future_wakes_nobody_on_a_tick() {
    let rt = Arc::new(tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_time().build().unwrap());
    let on = rt.clone();
    // The thread that serves the call makes the future (and then waits for it): its id.
    let server_thread = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let seen = server_thread.clone();
    let handler = OnExecutor::new(
        move |call: Vec<u8>| {
            // SAFETY: gettid has no preconditions.
            seen.store(unsafe { libc::syscall(libc::SYS_gettid) }, std::sync::atomic::Ordering::SeqCst);
            async move {
                tokio::time::sleep(HANDLER_TAKES).await;
                [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat()
            }
        },
        move |task| drop(on.spawn(task)),
    );
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), handler).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let call = |xid: u32| [xid.to_be_bytes(), [0; 4], [0; 4], [0; 4]].concat();
    client.call(&call(1), &ULB).unwrap();
    let serving = std::thread::scope(|s| {
        let t = s.spawn(|| assert_eq!(client.call(&call(2), &ULB).unwrap().len(), 16));
        std::thread::sleep(Duration::from_millis(50));
        let tid = server_thread.load(std::sync::atomic::Ordering::SeqCst);
        assert!(std::path::Path::new(&format!("/proc/self/task/{tid}/status")).exists(), "the serving thread {tid}");
        let before = thread_switches(tid);
        std::thread::sleep(COUNTED);
        let n = thread_switches(tid) - before;
        t.join().unwrap();
        n
    });
    eprintln!("in process, an async handler: the serving thread switched {serving} times in {COUNTED:?} of a {HANDLER_TAKES:?} future");
    assert!(
        serving <= ASYNC_QUIET_MOST,
        "an async handler: the serving thread switched {serving} times while the future ran: a tick"
    );
    // A future that never completes: dropping the server tells its waiting thread at once.
    drop(client);
    let pending = OnExecutor::new(|_call: Vec<u8>| std::future::pending::<Vec<u8>>(), {
        let on = rt.clone();
        move |task| drop(on.spawn(task))
    });
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), pending).unwrap();
    let client = Client::new(
        InProcess,
        server.local_addr(),
        ClientConfig::default()
            .requester(negotiate::requester::RequesterConfig::default().timeout(Duration::from_secs(2))),
    );
    std::thread::scope(|s| {
        s.spawn(|| client.call(&call(3), &ULB));
        std::thread::sleep(Duration::from_millis(200));
        let t = std::time::Instant::now();
        drop(server);
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "the server's drop waited {:?} for a pending future",
            t.elapsed()
        );
    });
}

/// A -07 server whose requester grants it nothing yet (its running total 0, section 4.2.1):
/// two calls' replies wait for the requester's RDMA2_GRANT, one for credit
/// (`LoopConnection::part_credit`), the other to post behind it, with one call in progress
/// allowed a connection. The GRANT must still be read, so each waiter tells the loop once
/// that it no longer holds the connection's place (until the twenty-fifth session the first
/// told it every 10 ms, `TELL_EVERY`, and the second not at all: 181 switches in the 0.9 s
/// counted; with the first telling once and the second not, the GRANT went unread and the
/// replies never came). When the GRANT comes, both replies go.
fn replies_waiting_for_a_grant_wake_nobody_on_a_tick() {
    use negotiate::datapath::{send_error as post_raw, ReceivePool, Transport};
    use negotiate::limits::ServerLimits;
    use negotiate::responder::ResponderConfig;
    use rpcrdma_v1::header::Fixed;
    use rpcrdma_v2::draft07::marshal::{self, NO_CHUNKS};
    use rpcrdma_v2::draft07::xdr::{RDMA2_CONNPROP_FINAL, RDMA2_REPLY_INLINE};
    use rpcrdma_verbs::QpCaps;

    const T: Duration = Duration::from_secs(10);
    let cfg = ServerConfig::default()
        .timeout(T)
        .responder(ResponderConfig::default().draft07(true))
        .limits(ServerLimits::default().calls_in_progress_per_connection(1));
    // The second call's handler takes a while, so that its reply comes to wait behind the
    // first's after the loop last looked at the connection.
    let echo = |call: &[u8]| {
        if call[..4] == 0x301u32.to_be_bytes() {
            std::thread::sleep(Duration::from_millis(100));
        }
        [&call[..4], &[0, 0, 0, 1][..]].concat()
    };
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), echo).unwrap();
    let pd = InProcess.alloc_pd().unwrap();
    let (qp, _) = InProcess.connect(&pd, &server.local_addr(), &[], QpCaps::default(), T).unwrap();
    let conn: Transport<InProcess> = Transport::new(pd, qp, T);
    let pool = ReceivePool::new(&conn, 9, 1 << 16).unwrap();
    let mut send = vec![0u8; 256];
    let counts = counted_during("granting-peer", || {
        for xid in [0x300u32, 0x301] {
            let rpc: Vec<u8> = [xid, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
            let n = marshal::call_inline(&mut send, xid, 0, 0, &NO_CHUNKS, &rpc).unwrap();
            post_raw(&conn, &send[..n]).unwrap();
        }
        std::thread::sleep(HANDLER_TAKES);
        let n = marshal::grant(&mut send, 8).unwrap();
        post_raw(&conn, &send[..n]).unwrap();
        let mut replied = Vec::new();
        while replied.len() < 2 {
            let m = pool.receive(&conn).unwrap();
            let fixed = Fixed::read(&m.bytes).unwrap();
            match fixed.proc {
                Some(RDMA2_CONNPROP_FINAL) => {}
                Some(RDMA2_REPLY_INLINE) => replied.push(fixed.xid),
                other => panic!("a message of type {other:?} where the replies belong"),
            }
        }
        replied.sort();
        assert_eq!(replied, [0x300, 0x301], "both replies, once granted");
    });
    eprintln!("in process, -07 replies waiting for a GRANT: context switches in {COUNTED:?}: {counts:?}");
    for (name, n) in &counts {
        assert!(*n <= QUIET_MOST, "-07 replies waiting for a GRANT: thread(s) {name:?} switched {n} times: a tick");
    }
    assert!(counts.contains_key("negotiate-call") || counts.contains_key("negotiate-conn"), "{counts:?}");
}

/// For the async handler's case: the thread serving the call waits once (a look every
/// 100 ms made it 9 or more).
const ASYNC_QUIET_MOST: u64 = 3;

/// Thread `tid`'s context switches so far (this process's).
fn thread_switches(tid: i64) -> u64 {
    switches_in(std::path::Path::new(&format!("/proc/self/task/{tid}/status")))
}

/// Voluntary and involuntary context switches in one thread's `status` file (0 if gone).
fn switches_in(status: &std::path::Path) -> u64 {
    let status = std::fs::read_to_string(status).unwrap_or_default();
    status
        .lines()
        .filter(|l| l.contains("ctxt_switches"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

#[test]
fn issue_25_no_polling_ticks_a_call_waiting_a_second_wakes_no_thread_on_a_tick() {
    a_slow_call_wakes_nobody_on_a_tick(InProcess, "in process");
    a_slow_call_wakes_nobody_on_a_tick(Tcp, "over TCP");
    assert!(switches().contains_key("verbs-io"), "the TCP backend's loop thread was counted");
    a_slow_future_wakes_nobody_on_a_tick();
    replies_waiting_for_a_grant_wake_nobody_on_a_tick();
}
