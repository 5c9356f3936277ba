//! Async calls on tokio: many tasks share one `Client`, each awaiting `Client::call_async`,
//! against an in-process `Server`; one more call is given up by a timeout, which drops its
//! future (the call is abandoned and keeps its credit until its reply arrives).
//!
//! `cargo run -p negotiate --example async_calls`

use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::InProcess;

/// Nothing DDP-eligible: every call and reply goes inline.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
const TASKS: u32 = 64;
const CALLS_PER_TASK: u32 = 100;

/// An RPC call message: XID, CALL (0), then one word of arguments.
fn call(xid: u32, arg: u32) -> Vec<u8> {
    [xid, 0, arg].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The reply the service sends: XID, REPLY (1), then the result.
fn reply(xid: u32, result: u32) -> Vec<u8> {
    [xid, 1, result].iter().flat_map(|w| w.to_be_bytes()).collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The service: REPLY (1) with the argument doubled; the call with argument 0 is slow.
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), |c: &[u8]| {
        let arg = u32::from_be_bytes(c[8..12].try_into().unwrap());
        if arg == 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
        reply(u32::from_be_bytes(c[..4].try_into().unwrap()), arg * 2)
    })
    .expect("the server starts");
    let client = Arc::new(Client::new(InProcess, server.local_addr(), ClientConfig::default()));

    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..CALLS_PER_TASK {
                    let xid = 1 + t * CALLS_PER_TASK + i;
                    let reply = client.call_async(&call(xid, xid), &ULB).await.expect("the call succeeds");
                    assert_eq!(reply, self::reply(xid, xid * 2));
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
        "{calls} async calls from {TASKS} tasks in {elapsed:?} ({:.0} calls/s)",
        calls as f64 / elapsed.as_secs_f64()
    );

    // Giving up: a timeout drops the future of a slow call.
    let slow = call(0xffff_0000, 0);
    let given_up = tokio::time::timeout(Duration::from_millis(20), client.call_async(&slow, &ULB)).await;
    println!("the slow call after 20 ms: {}", if given_up.is_err() { "given up" } else { "answered" });
    // The client goes on serving calls.
    let reply = client.call_async(&call(0xffff_0001, 21), &ULB).await.expect("the next call succeeds");
    println!("the next call's result: {}", u32::from_be_bytes(reply[8..12].try_into().unwrap()));
    println!("client stats: {:?}; server stats: {:?}", client.stats(), server.stats());
}
