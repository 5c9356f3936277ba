//! The async load of issue 25's targets: 64 tasks on ONE current-thread tokio runtime share
//! one `Client`, each making short calls (`Client::call_async`, 64-byte calls and replies,
//! inline) against an in-process `Server`, and every reply is checked against its call.
//! Prints calls per second; run it under `perf stat -e context-switches,task-clock` to get
//! the switches and CPU time per call (docs/benchmarks.md).
//!
//! `cargo run --release -p negotiate --example async_load [calls per task (2000)] [tasks (64)] [inproc|tcp]`
//!
//! With `tcp` as the third argument, client and server talk over the TCP backend on the
//! loopback instead (the same shape: 64 tasks, one runtime thread, the server's one loop).

use std::sync::Arc;
use std::time::Instant;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

/// Nothing DDP-eligible, and replies of at most 512 bytes: every call and reply goes inline,
/// with no chunk to register.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 512 };
/// The tasks, unless the second argument says otherwise.
const TASKS: u32 = 64;
/// 64 bytes: XID, CALL, then 14 words of arguments.
const WORDS: usize = 16;

/// An RPC call message of 64 bytes: XID, CALL (0), then the arguments.
fn call(xid: u32) -> Vec<u8> {
    let mut words = [xid; WORDS];
    words[1] = 0;
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn main() {
    let per_task: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let tasks: u32 = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(TASKS);
    match std::env::args().nth(3).as_deref() {
        None | Some("inproc") => run(InProcess, "in-process", per_task, tasks),
        Some("tcp") => run(Tcp, "tcp", per_task, tasks),
        Some(other) => panic!("no backend {other:?}: inproc or tcp"),
    }
}

/// The load over `backend`.
fn run<B: Backend + Clone>(backend: B, name: &str, per_task: u32, tasks: u32) {
    // The service: the call echoed as a REPLY (1).
    let echo = |c: &[u8]| [&c[..4], &[0, 0, 0, 1][..], &c[8..]].concat();
    let server = Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(ULB), echo)
        .expect("the server starts");
    let client = Arc::new(Client::new(backend, server.local_addr(), ClientConfig::default()));
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let started = Instant::now();
    runtime.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let client = client.clone();
                tokio::spawn(async move {
                    for i in 0..per_task {
                        let xid = 1 + t * per_task + i;
                        let reply = client.call_async(&call(xid), &ULB).await.expect("the call succeeds");
                        let mut want = call(xid);
                        want[4..8].copy_from_slice(&1u32.to_be_bytes());
                        assert_eq!(reply, want, "call {xid:#x} got another call's reply");
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.expect("the task ends");
        }
    });
    let elapsed = started.elapsed();
    let calls = u64::from(tasks * per_task);
    println!(
        "async load: {tasks} tasks x {per_task} calls on one current-thread runtime, {name}: {calls} calls in {elapsed:.2?}, {:.0} calls/s",
        calls as f64 / elapsed.as_secs_f64()
    );
}
