//! The 64-byte round trip of `benches/rpc.rs`, raw Send/Receive against `Client::call_into`,
//! counted rather than timed by criterion: each side runs its round trips in turn, each alone
//! in the process while counted, and each round prints its time, thread switches and CPU per
//! round trip (the whole process's, summed over its threads alive at the start and end of
//! the count from `/proc/self/task/*/{status,stat}`), so that what explains a figure is
//! printed beside it.
//!
//! ```text
//! cargo run --release -p interop-tests --example round_trips -- tcp 20000 3
//! ```
//!
//! Arguments: `tcp` or `inproc` (default `tcp`), round trips per side and round (10,000),
//! rounds (3), and which sides (`raw,raw-polled,ours`, the default; one alone for a
//! profile, `perf record ... round_trips inproc 300000 1 ours`).

use std::time::Instant;

use rpcrdma_verbs::{Backend, InProcess, Tcp};

#[path = "../benches/common/round_trip.rs"]
mod round_trip;
use round_trip::{rpc_pair, Caller, RawPair, Wait};

/// The process's thread switches (voluntary and not) and CPU time in clock ticks, summed
/// over its live threads.
fn counters() -> (u64, u64) {
    let (mut switches, mut ticks) = (0, 0);
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return (0, 0) };
    for t in tasks.flatten() {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            if let Some(v) =
                line.strip_prefix("voluntary_ctxt_switches:").or(line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                switches += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
        if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            ticks += f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    (switches, ticks)
}

/// Runs `f` `n` times and prints what one run cost.
fn measure(label: &str, n: usize, mut f: impl FnMut()) {
    let (s0, t0) = counters();
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    let took = start.elapsed();
    let (s1, t1) = counters();
    // Clock ticks of /proc's stat are USER_HZ, 100 a second on Linux whatever the kernel's
    // own tick (its ABI).
    let cpu_us = (t1 - t0) as f64 * 10_000.0 / n as f64;
    println!(
        "{label:>10}: {:7.1} us a round trip, {:5.2} switches, {:6.1} us CPU",
        took.as_secs_f64() * 1e6 / n as f64,
        (s1 - s0) as f64 / n as f64,
        cpu_us
    );
}

fn run<B: Backend + Clone>(b: B, calls: usize, rounds: usize, sides: &str) {
    let runs = |side: &str| sides.split(',').any(|s| s == side);
    // Each side alone in the process while it is counted (over TCP a server's idle loop
    // would drive the readiness loop for the raw pair's threads), made afresh each round.
    for round in 1..=rounds {
        println!("round {round}");
        for (label, wait) in [("raw", Wait::Sleep), ("raw-polled", Wait::Poll)] {
            if !runs(label) {
                continue;
            }
            let raw = RawPair::start(&b, wait);
            (0..100).for_each(|_| raw.round_trip());
            measure(label, calls, || raw.round_trip());
            raw.stop();
        }
        if !runs("ours") {
            continue;
        }
        let (server, client) = rpc_pair(b.clone());
        let mut caller = Caller::new(&client);
        // The probe settles, the buffers are registered.
        (0..100).for_each(|_| caller.call());
        measure("ours", calls, || caller.call());
        drop(client);
        drop(server);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let calls = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let rounds = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(3);
    let sides = args.get(3).map_or("raw,raw-polled,ours", String::as_str);
    match args.first().map_or("tcp", String::as_str) {
        "inproc" => run(InProcess, calls, rounds, sides),
        "tcp" => run(Tcp, calls, rounds, sides),
        other => panic!("unknown backend {other:?}: tcp or inproc"),
    }
}
