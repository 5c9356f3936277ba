//! An idle connection costs the server no CPU: no thread of the connection wakes while nothing
//! arrives (no polling tick; the wait lasts until the idle timeout, and a close or the
//! server's stop ends it). Counted from the kernel's own context-switch counts of the
//! connection's threads (`/proc/self/task/*/status`), Linux only.

#![cfg(target_os = "linux")]

use std::sync::Arc;
use std::time::Duration;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// The context switches so far of this process's threads whose name starts with `prefix`.
fn switches_of(prefix: &str) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for line in status.lines().filter(|l| l.contains("ctxt_switches")) {
            total += line.split_whitespace().last().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total
}

fn idle_server_threads_stay_asleep<B: Backend + Clone>(b: B) {
    let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ULB), echo).unwrap();
    let client = Client::new(b, server.local_addr(), ClientConfig::default());
    for xid in 1..=3u32 {
        let call = [&xid.to_be_bytes()[..], &[0, 0, 0, 0]].concat();
        client.call(&call, &ULB).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    // "negotiate-conn" is the connection's first thread, "negotiate-call" its others.
    let before = switches_of("negotiate-c") - switches_of("negotiate-clien");
    std::thread::sleep(Duration::from_secs(1));
    let woke = switches_of("negotiate-c") - switches_of("negotiate-clien") - before;
    // A 10 ms polling tick would be about 100.
    assert!(woke <= 3, "the idle connection's server threads switched {woke} times in 1 s");
    assert_eq!(server.stats().calls.v2, 3);
}

#[test]
fn an_idle_connection_wakes_no_server_thread_in_process() {
    idle_server_threads_stay_asleep(InProcess);
}

#[test]
fn an_idle_connection_wakes_no_server_thread_over_tcp() {
    idle_server_threads_stay_asleep(Tcp);
}
