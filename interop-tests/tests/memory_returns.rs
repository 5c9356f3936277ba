//! Issue 26: memory peers made a server hold is given back to the system when they go. A
//! set of clients fills the server's memory budget with calls whose arguments come by Read
//! chunk (the data lands, so the pages are touched), held in their handler; then the calls
//! end and the clients go, and the server process's resident memory returns near where it was
//! before. The clients run in a process of their own (this test binary again, running
//! [`client_process`]), so that only the server's memory is measured. Linux only
//! (`/proc/self/statm`); its own test binary, so that no other test moves resident memory.

#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use negotiate::limits::ServerLimits;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_verbs::{Backend, QpCaps};

/// Resident memory of this process, in bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<usize>().ok()).unwrap_or(0) * 4096
}

fn mib(b: usize) -> f64 {
    b as f64 / 1048576.0
}

const ARG: usize = 2 << 20;
const CLIENTS: usize = 4;
const PER_CLIENT: usize = 8;
/// The environment variable that makes [`client_process`] the clients' side, with the
/// server's address.
const SERVER_AT: &str = "MEMORY_RETURNS_SERVER_AT";

#[test]
fn tcp_memory_peers_filled_is_given_back_when_they_go() {
    the_memory_is_given_back(rpcrdma_verbs::Tcp);
}

/// The clients' side, in a process of its own: `CLIENTS` clients with `PER_CLIENT` calls of
/// `ARG` bytes each at once. Does nothing unless run by the test above.
#[test]
fn client_process() {
    let Ok(addr) = std::env::var(SERVER_AT) else { return };
    let backend = rpcrdma_verbs::Tcp;
    let cs: Vec<_> = (0..CLIENTS)
        .map(|_| Arc::new(negotiate::client::Client::new(backend, addr.clone(), Default::default())))
        .collect();
    for (n, c) in cs.iter().enumerate() {
        assert!(c.call(&call(0x10 + n as u32, SMALL), &ULB).is_ok());
    }
    let callers: Vec<_> = cs
        .iter()
        .enumerate()
        .flat_map(|(n, c)| (0..PER_CLIENT).map(move |k| (n, k, c.clone())))
        .map(|(n, k, c)| std::thread::spawn(move || c.call(&call((0x1000 + n * 16 + k) as u32, ARG), &ULB).is_ok()))
        .collect();
    for c in callers {
        let _ = c.join();
    }
}

fn the_memory_is_given_back<B: Backend + Clone>(backend: B) {
    const BUDGET: usize = 64 << 20;
    // The clients' process is one host: its share of the call memory raised to the whole
    // budget, which it fills.
    let cfg = ServerConfig::default()
        .limits(ServerLimits::default().memory_budget(BUDGET).memory_per_host(BUDGET))
        .caps(QpCaps::default().retry_timeout(Duration::from_secs(2)));
    let gate = Gate::new();
    let g = gate.clone();
    let service = move |c: &[u8]| {
        if c.len() > ARG {
            g.hold();
        }
        [&c[..4], &[0, 0, 0, 1][..]].concat()
    };
    let s = Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(ULB), service).expect("server");
    let _opens = gate.opener();
    let before = rss();
    let mut clients = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "client_process", "--nocapture", "--test-threads=1"])
        .env(SERVER_AT, s.local_addr())
        .spawn()
        .expect("the clients' process starts");
    // Calls in their handlers, holding what their Read chunks brought, until no more fit.
    let deadline = Instant::now() + WAIT_LIMIT;
    let mut peak = before;
    while Instant::now() < deadline {
        peak = peak.max(rss());
        if gate.inside() + s.stats().refused.memory as usize >= CLIENTS * PER_CLIENT {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    peak = peak.max(rss());
    let held = s.stats().memory_peak;
    gate.open();
    assert!(clients.wait().expect("the clients' process ends").success(), "the clients' process failed");
    // The connections close; what they held is let go.
    let deadline = Instant::now() + WAIT_LIMIT;
    let mut after = rss();
    while after > before + (8 << 20) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        after = rss();
    }
    eprintln!(
        "server resident: {:.1} MiB before, {:.1} MiB at the peak ({:.1} MiB charged at most), {:.1} MiB after",
        mib(before),
        mib(peak),
        mib(held),
        mib(after)
    );
    assert!(peak > before + (48 << 20), "the calls made the server hold their arguments: {before} -> {peak} bytes");
    assert!(
        after <= before + (8 << 20),
        "resident memory did not return: {:.1} MiB before, {:.1} MiB at the peak, {:.1} MiB after",
        mib(before),
        mib(peak),
        mib(after)
    );
    drop(s);
}
