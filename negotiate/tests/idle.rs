//! An idle connection costs no CPU on either side: no thread of the connection, the server's
//! or the client's dispatcher, wakes while nothing arrives (no polling tick; a wait lasts
//! until the next deadline, and a message, a close or a stop ends it). Counted from the kernel's own context-switch counts of the
//! connection's threads (`/proc/self/task/*/status`), Linux only.

#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// The context switches so far of each of this process's threads whose name starts with one
/// of `prefixes`, by thread id.
fn switches_of(prefixes: &[&str]) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !prefixes.iter().any(|p| comm.starts_with(p)) {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let n = (status.lines().filter(|l| l.contains("ctxt_switches")))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum();
        out.insert(task.file_name().to_string_lossy().into_owned(), n);
    }
    out
}

fn idle_threads_stay_asleep<B: Backend + Clone>(b: B) {
    let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ULB), echo).unwrap();
    let client = Client::new(b, server.local_addr(), ClientConfig::default());
    for xid in 1..=3u32 {
        let call = [&xid.to_be_bytes()[..], &[0, 0, 0, 0]].concat();
        client.call(&call, &ULB).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    // "negotiate-conn" is the connection's first thread, "negotiate-call" its others; the
    // client's dispatcher is "negotiate-client" (15 characters kept).
    let server_threads = ["negotiate-conn", "negotiate-call", "negotiate-clien"];
    let before = switches_of(&server_threads);
    std::thread::sleep(Duration::from_secs(1));
    let after = switches_of(&server_threads);
    assert!(!before.is_empty(), "no server thread found");
    let woke: u64 = before.iter().map(|(tid, n)| after.get(tid).map_or(0, |m| m - n)).sum();
    // A 10 ms polling tick would be about 100.
    assert!(woke <= 3, "the idle connection's threads switched {woke} times in 1 s");
    assert_eq!(server.stats().calls.v2, 3);
}

/// One test, so that no other test's threads are counted.
#[test]
fn an_idle_connection_wakes_no_thread_on_either_side() {
    idle_threads_stay_asleep(InProcess);
    idle_threads_stay_asleep(Tcp);
}
