//! Issue 25: a client's threads. One dispatcher thread serves every connection of a client
//! (`ClientConfig::connections`), receiving for its blocking callers on each; no thread is
//! made per call. Counted from the process's own threads (`/proc/self/task/*/comm`), Linux
//! only; the tests in this binary take turns (`ONE_AT_A_TIME`), so that no other test's
//! threads are counted.

#![cfg(target_os = "linux")]

use std::sync::Arc;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// Held by each test: one counts threads while no other runs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The names of this process's threads (at most 15 characters each, as the kernel keeps).
fn thread_names() -> Vec<String> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap().flatten();
    tasks.map(|t| std::fs::read_to_string(t.path().join("comm")).unwrap_or_default().trim_end().to_string()).collect()
}

/// How many of this process's threads are a client's dispatcher ("negotiate-client", 15
/// characters kept).
fn dispatchers() -> usize {
    thread_names().iter().filter(|n| *n == "negotiate-clien").count()
}

/// [`dispatchers`], once `want` are counted or a second has passed: a thread takes its name
/// once it runs, a moment after it was spawned.
fn dispatchers_settled(want: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let n = dispatchers();
        if n == want || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn one_dispatcher_for_every_connection<B: Backend + Clone>(b: B, name: &str) {
    let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ULB), echo).unwrap();
    assert_eq!(dispatchers(), 0, "{name}: no client yet");
    let clients: Vec<_> =
        (0..2).map(|_| Client::new(b.clone(), server.local_addr(), ClientConfig::default().connections(4))).collect();
    assert_eq!(clients[0].connections(), 4);
    assert_eq!(dispatchers_settled(2), 2, "{name}: one dispatcher a client, not one a connection");
    // (And no more once every thread spawned has had time to take its name.)
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(dispatchers(), 2, "{name}: one dispatcher a client, not one a connection");
    // Eight callers a client, two on each of its connections (a call goes on connection XID
    // mod 4): several blocking callers wait on each, so the dispatcher receives for them.
    let threads_before = thread_names().len();
    std::thread::scope(|s| {
        for (c, client) in clients.iter().enumerate() {
            for t in 0..8u32 {
                s.spawn(move || {
                    for i in 0..200u32 {
                        let xid = (c as u32) << 24 | t << 16 | i;
                        let call = [&xid.to_be_bytes()[..], &[0, 0, 0, 0], &i.to_be_bytes()].concat();
                        let reply = client.call(&call, &ULB).unwrap();
                        assert_eq!(reply, [&xid.to_be_bytes()[..], &[0, 0, 0, 1], &i.to_be_bytes()].concat());
                    }
                });
            }
        }
        // While they call: the callers' own 16 threads are the only ones added, and the
        // server's loop threads (at most its calls in progress); still one dispatcher each.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(dispatchers(), 2, "{name}: while calling");
    });
    let stats: Vec<_> = clients.iter().map(|c| c.stats()).collect();
    let calls = |s: &negotiate::client::ClientStats| s.short + s.chunked + s.long;
    assert_eq!(stats.iter().map(calls).sum::<u64>(), 2 * 8 * 200, "{name}: every call sent once");
    // No thread per call: after 3,200 calls the process has no more threads than before
    // them but what the server started to serve calls at once (it keeps a few a while).
    let grown = thread_names().len().saturating_sub(threads_before);
    let most = ServerConfig::default().limits.calls_in_progress_per_connection * 8;
    assert!(grown <= most, "{name}: {grown} threads more after the calls");
    drop(clients);
    // Dropped clients take their dispatchers with them.
    // (A joined thread may stay listed a moment after `join` returns.)
    assert_eq!(dispatchers_settled(0), 0, "{name}: the clients' dispatchers are joined on drop");
}

#[test]
fn issue_25_a_client_has_one_dispatcher_thread_for_all_its_connections() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    one_dispatcher_for_every_connection(InProcess, "in process");
    one_dispatcher_for_every_connection(Tcp, "tcp");
}

/// How many of this process's threads have `name` (at most 15 characters kept).
fn named(name: &str) -> usize {
    thread_names().iter().filter(|n| *n == name).count()
}

/// A client that serves backward calls, and keeps its connections for them
/// (`ClientConfig::keep_connected`), has one dispatcher for all its connections too, and no
/// thread a connection: its handler runs on the client's workers, which start with the
/// first job (at most four a connection at once), and the keeper is the dispatcher's
/// timer, its NULL calls made by the workers.
#[test]
fn issue_25_a_client_with_a_backchannel_has_one_dispatcher_and_no_thread_a_connection() {
    use negotiate::client::KeepConnected;
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), echo).unwrap();
    let cfg = ClientConfig::default().connections(4).keep_connected(Some(KeepConnected { program: 7, version: 1 }));
    let client = Client::with_backchannel(InProcess, server.local_addr(), cfg, Arc::new(echo));
    // The keeper's NULL calls settle every connection: the server has four to call back on.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while server.backchannels().iter().filter(|b| b.is_open()).count() < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(server.backchannels().len(), 4, "the keeper connected every connection");
    assert_eq!(dispatchers_settled(1), 1, "one dispatcher for four connections");
    assert_eq!(named("negotiate-keepe"), 0, "no keeper thread");
    for (i, back) in server.backchannels().iter().enumerate() {
        let call = [0x80, 0, 0, i as u8, 0, 0, 0, 0, 5, 5, 5, 5];
        let reply = back.call(&call).unwrap();
        assert_eq!(reply, [0x80, 0, 0, i as u8, 0, 0, 0, 1, 5, 5, 5, 5]);
    }
    let workers = named("negotiate-work");
    assert!((1..=16).contains(&workers), "{workers} worker threads for four connections");
    assert_eq!(dispatchers(), 1);
    drop(client);
    assert_eq!(dispatchers_settled(0), 0, "the dispatcher is joined on drop");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while named("negotiate-work") > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(named("negotiate-work"), 0, "the workers are joined on drop");
}
