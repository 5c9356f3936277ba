//! An async server on tokio: its handler awaits `tokio::time::sleep` (a timer that works only
//! inside a tokio runtime) before it replies, its futures spawned on the runtime by an
//! `OnExecutor`; many tokio tasks call it at once with `Client::call_async`. It prints how
//! many calls it served, how many futures were pending at most (never more than the calls one
//! connection may have in progress), and the server's counts.
//!
//! `cargo run -p negotiate --example async_server`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{OnExecutor, Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::InProcess;

/// Nothing DDP-eligible: every call and reply goes inline.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
const TASKS: u32 = 64;
const CALLS_PER_TASK: u32 = 20;
/// How long the service sleeps before each reply.
const SLEEP: Duration = Duration::from_millis(10);

/// An RPC call message: XID, CALL (0), then one word of arguments.
fn call(xid: u32, arg: u32) -> Vec<u8> {
    [xid, 0, arg].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The reply the service sends: XID, REPLY (1), then the result.
fn reply(xid: u32, result: u32) -> Vec<u8> {
    [xid, 1, result].iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn word(message: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(message[4 * i..4 * i + 4].try_into().unwrap())
}

/// Counts the futures pending now and the most seen at once.
#[derive(Default)]
struct Pending {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Pending {
    fn begin(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
    }
    fn end(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let pending = Arc::new(Pending::default());
    let in_handler = pending.clone();
    // The service: sleeps on tokio's timer, then replies with the argument doubled.
    let service = move |call: Vec<u8>| {
        let pending = in_handler.clone();
        async move {
            pending.begin();
            tokio::time::sleep(SLEEP).await;
            pending.end();
            reply(word(&call, 0), word(&call, 2) * 2)
        }
    };
    // Each call's future goes to this runtime; the reply is sent by the connection's thread
    // that took the call, once the future completes.
    let runtime = tokio::runtime::Handle::current();
    let spawn = move |task| drop(runtime.spawn(task));
    let mut cfg = ServerConfig::default();
    // Up to 32 calls of one connection in progress at once (the credits granted, 32, are the
    // most a requester has in flight).
    cfg.limits.calls_in_progress_per_connection = 32;
    let server = Server::start(InProcess, "inproc:*", cfg.clone(), Arc::new(ULB), OnExecutor::new(service, spawn))
        .expect("the server starts");
    let client = Arc::new(Client::new(InProcess, server.local_addr(), ClientConfig::default()));

    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..CALLS_PER_TASK {
                    let xid = 1 + t * CALLS_PER_TASK + i;
                    let r = client.call_async(&call(xid, xid), &ULB).await.expect("the call succeeds");
                    assert_eq!(r, reply(xid, xid * 2));
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("the task ends");
    }
    let elapsed = started.elapsed();
    let calls = TASKS * CALLS_PER_TASK;
    println!(
        "{calls} calls from {TASKS} tasks, each reply after a {SLEEP:?} tokio sleep, in {elapsed:?} ({:.0} calls/s; \
         one at a time would take {:?})",
        calls as f64 / elapsed.as_secs_f64(),
        SLEEP * calls
    );
    println!(
        "at most {} handler futures pending at once (the connection's limit: {})",
        pending.most.load(Ordering::SeqCst),
        cfg.limits.calls_in_progress(cfg.responder.credits)
    );
    println!("server stats: {:?}", server.stats());
}
