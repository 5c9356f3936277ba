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

/// A configured time too long to add to an instant (`Duration::MAX`: "never idle", "never
/// take the role over", "never probe again") is taken as that, not as a panic.
#[test]
fn durations_of_forever_in_the_configuration_are_accepted() {
    let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    let mut cfg = ServerConfig::default();
    cfg.limits.idle_timeout = Duration::MAX;
    cfg.limits.run_inline_for = Duration::MAX;
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), echo).unwrap();
    let mut client_cfg = ClientConfig::default();
    client_cfg.requester.reprobe_after = Duration::MAX;
    client_cfg.requester.versions = (rpcrdma_v1::Version::ONE, rpcrdma_v1::Version::TWO);
    let client = Client::new(InProcess, server.local_addr(), client_cfg);
    for xid in 1..=3u32 {
        let call = [&xid.to_be_bytes()[..], &[0, 0, 0, 0]].concat();
        assert_eq!(client.call(&call, &ULB).unwrap()[..8], [0, 0, 0, xid as u8, 0, 0, 0, 1]);
    }
}

/// RFC 8166 section 4.5.4 (a call without a reply in time): a call made while the client's
/// dispatcher waits for a message on an idle connection still times out on time. The
/// dispatcher's idle wait is bounded by the requester's timeout, so the deadline is looked
/// at with nobody told (it once waited a minute).
#[test]
fn a_call_made_while_the_client_idles_still_times_out_on_time() {
    let stuck = |call: &[u8]| {
        if call[3] == 2 {
            std::thread::sleep(Duration::from_secs(3));
        }
        [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat()
    };
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), stuck).unwrap();
    let mut cfg = ClientConfig::default();
    cfg.requester.timeout = Duration::from_millis(300);
    cfg.requester.max_attempts = 1;
    let client = Client::new(InProcess, server.local_addr(), cfg);
    client.call(&[0, 0, 0, 1, 0, 0, 0, 0], &ULB).unwrap();
    // Idle past LINGER: the dispatcher now waits for a message.
    std::thread::sleep(Duration::from_millis(200));
    let start = std::time::Instant::now();
    let got = client.call(&[0, 0, 0, 2, 0, 0, 0, 0], &ULB);
    let took = start.elapsed();
    assert!(got.is_err(), "{got:?}");
    assert!(took < Duration::from_millis(2500), "the 300 ms timeout was noticed after {took:?}");
}
