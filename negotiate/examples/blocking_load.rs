//! The blocking load of issue 25's targets in its plainest shape: a number of threads share
//! one `Client`, each making short blocking calls (`Client::call`, 64-byte calls and replies,
//! inline) against an in-process `Server`, and every reply is checked against its call.
//! Prints calls per second. `interop-tests/tests/load.rs` is the load of record (its calls
//! mix inline and chunked messages, and it checks every byte and execution); this one has
//! nothing but the stack's small-call path in it, so that it can be counted: under
//! `valgrind --tool=callgrind --separate-threads=yes`, two runs of different lengths give the
//! instructions a call on each thread (docs/benchmarks.md, thirty-third session), and under
//! `perf stat -e context-switches,task-clock` the switches and CPU time a call.
//!
//! `cargo run --release -p negotiate --example blocking_load [calls per thread (2000)] [threads (64)] [inproc|tcp]`

use std::sync::Arc;
use std::time::Instant;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

/// Nothing DDP-eligible, and replies of at most 512 bytes: every call and reply goes inline,
/// with no chunk to register.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 512 };
/// The calling threads, unless the second argument says otherwise.
const THREADS: u32 = 64;
/// 64 bytes: XID, CALL, then 14 words of arguments.
const WORDS: usize = 16;

/// An RPC message of 64 bytes: XID, `msg_type`, then the arguments.
fn message(xid: u32, msg_type: u32) -> [u8; 4 * WORDS] {
    let mut bytes = [0; 4 * WORDS];
    for (i, word) in bytes.chunks_exact_mut(4).enumerate() {
        word.copy_from_slice(&if i == 1 { msg_type } else { xid }.to_be_bytes());
    }
    bytes
}

fn main() {
    let per_thread: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let threads: u32 = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(THREADS);
    match std::env::args().nth(3).as_deref() {
        None | Some("inproc") => run(InProcess, "in-process", per_thread, threads),
        Some("tcp") => run(Tcp, "tcp", per_thread, threads),
        Some(other) => panic!("no backend {other:?}: inproc or tcp"),
    }
}

/// The load over `backend`.
fn run<B: Backend + Clone + Send + Sync + 'static>(backend: B, name: &str, per_thread: u32, threads: u32) {
    // The service: the call echoed as a REPLY (1).
    let echo = |c: &[u8]| [&c[..4], &[0, 0, 0, 1][..], &c[8..]].concat();
    let server = Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(ULB), echo)
        .expect("the server starts");
    let client = Arc::new(Client::new(backend, server.local_addr(), ClientConfig::default()));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                let mut reply = Vec::with_capacity(512);
                for i in 0..per_thread {
                    let xid = 1 + t * per_thread + i;
                    client.call_into(&message(xid, 0), &ULB, &mut reply).expect("the call succeeds");
                    assert_eq!(reply, message(xid, 1), "call {xid:#x} got another call's reply");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("the thread ends");
    }
    let elapsed = started.elapsed();
    let calls = u64::from(threads * per_thread);
    println!(
        "blocking load: {threads} threads x {per_thread} calls, {name}: {calls} calls in {elapsed:.2?}, {:.0} calls/s",
        calls as f64 / elapsed.as_secs_f64()
    );
}
