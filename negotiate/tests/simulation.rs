//! The deterministic simulator (tests/sim) over many seeds: the requester and responder state
//! machines, marshaling and reassembly, under injected faults, with every invariant checked
//! after every step. A failing seed prints itself; replay it exactly with
//! `SIM_SEED=<seed> cargo test -p negotiate --test simulation replay -- --nocapture`.
//!
//! `cargo test` runs a few thousand seeds; the ignored `long_run` runs 100,000
//! (`cargo test --release -p negotiate --test simulation -- --ignored long_run --nocapture`).

mod sim;

use std::time::Instant;

/// Runs `seeds` seeds from `first`; fails with every violation found (the first few printed
/// in full).
fn run_seeds(first: u64, seeds: u64) {
    let start = Instant::now();
    let mut totals = sim::Report::default();
    let mut violations = Vec::new();
    for seed in first..first + seeds {
        match sim::run(seed) {
            Ok(r) => {
                totals.calls += r.calls;
                totals.succeeded += r.succeeded;
                totals.failed += r.failed;
                totals.connections += r.connections;
                totals.executions += r.executions;
                totals.steps += r.steps;
                totals.backward.0 += r.backward.0;
                totals.backward.1 += r.backward.1;
                totals.backward.2 += r.backward.2;
                totals.abandoned.0 += r.abandoned.0;
                totals.abandoned.1 += r.abandoned.1;
            }
            Err(v) => violations.push(v),
        }
    }
    eprintln!(
        "simulation: {seeds} seeds from {first} in {:.2?}: {} calls ({} ok, {} failed), {} connections, {} executions, {} steps, backward calls ended by reply/RDMA_ERROR/disconnect {:?}, calls abandoned unsent/sent {:?}; {} violations",
        start.elapsed(),
        totals.calls,
        totals.succeeded,
        totals.failed,
        totals.connections,
        totals.executions,
        totals.steps,
        totals.backward,
        totals.abandoned,
        violations.len()
    );
    // How many of each kind (the message with its numbers taken out), then the first few.
    let mut kinds: std::collections::BTreeMap<String, (usize, u64)> = Default::default();
    for v in &violations {
        let no_list = v.what.split('[').next().unwrap_or_default();
        let words = no_list.split_whitespace().map(|w| if w.chars().any(|c| c.is_ascii_digit()) { "#" } else { w });
        let kind = words.collect::<Vec<_>>().join(" ");
        kinds.entry(kind).or_insert((0, v.seed)).0 += 1;
    }
    for (kind, (n, seed)) in &kinds {
        eprintln!("  {n} x {kind} (e.g. seed {seed})");
    }
    for v in violations.iter().take(5) {
        eprintln!("  seed {} at {:?}: {}  (replay: SIM_SEED={} cargo test -p negotiate --test simulation replay -- --nocapture)", v.seed, v.at, v.what, v.seed);
    }
    assert!(
        violations.is_empty(),
        "{} of {seeds} seeds broke an invariant; first: {:?}",
        violations.len(),
        violations[0]
    );
}

#[test]
fn two_thousand_seeds_keep_every_invariant() {
    run_seeds(0, 2_000);
}

/// Seeds that found the requester's bugs before they were fixed (issue 13), kept as named
/// regressions: with the old requester each broke an invariant.
#[test]
fn rfc8166_3_3_3_seed_16_a_slow_first_call_is_not_run_twice_on_one_connection() {
    // Before: the probe timed out and went out again in Version One on the same connection;
    // the responder ran it twice ("call 0x1002 executed 2 times on connection 1").
    assert!(sim::run_with(16, sim::Extras::NONE).is_ok(), "{:?}", sim::run_with(16, sim::Extras::NONE));
}

#[test]
fn draft_5_seed_7_a_probe_answered_err_chunk_does_not_stall_the_calls_behind_it() {
    // Before: ERR_CHUNK to the probe left the version state probing; no later call was ever
    // sent, and none timed out ("calls ... are open and nothing is scheduled").
    assert!(sim::run_with(7, sim::Extras::NONE).is_ok(), "{:?}", sim::run_with(7, sim::Extras::NONE));
}

#[test]
fn draft_5_2_seed_540_a_probe_answered_with_no_common_version_does_not_stall_the_calls_behind_it() {
    // Before (after the first fix): RDMA_ERR_VERS with no common version failed the probe but
    // sent nothing more.
    assert!(sim::run_with(540, sim::Extras::NONE).is_ok(), "{:?}", sim::run_with(540, sim::Extras::NONE));
}

#[test]
fn issue_13_finding_7_seeds_19_and_281_a_failed_call_reports_what_happened_to_its_last_attempt() {
    // With every failure reported as "connection lost" (as `Client` did before), seed 19 has a
    // call that timed out and seed 281 one whose reconnect was refused: each broke the cause
    // invariant ("failed with connection lost ..., but its latest attempt was TimedOut").
    for seed in [19, 281] {
        let run = sim::run_with(seed, sim::Extras::NONE);
        assert!(run.is_ok(), "seed {seed}: {run:?}");
    }
}

#[test]
fn rfc8166_4_5_2_seeds_0_and_19_a_call_with_unusable_chunks_is_answered_and_the_connection_kept() {
    // With `FailureAnswer::for_error` closing the connection for reassembly errors (as
    // `Server` did before), seed 0 (RDMA_NOMSG with only a Reply chunk) and seed 19 (a Read
    // chunk past the payload) broke invariant 5: "connection closed over call ..., which it
    // could answer". Answering GARBAGE_ARGS where ERR_CHUNK is due breaks seed 0 too.
    let unusable = sim::Extras { unusable_calls: true, ..sim::Extras::NONE };
    for seed in [0, 19] {
        let run = sim::run_with(seed, unusable);
        assert!(run.is_ok(), "seed {seed}: {run:?}");
    }
}

#[test]
fn rfc8166_4_5_seed_2_a_backward_call_ends_at_once_with_the_requesters_rdma_error() {
    // With the backward slot ignoring the requester's RDMA_ERROR (as `Server` did before),
    // 2,000 seeds give 430 violations, the first seed 2's: "backward call 0xb0000001 on
    // connection 1 still waits after the client's answer".
    let run = sim::run(2);
    assert!(run.as_ref().is_ok_and(|r| r.backward.1 > 0), "{run:?}");
}

#[test]
fn rfc8166_3_3_1_seeds_588_734_833_a_call_given_up_keeps_its_credit_until_its_reply() {
    // With `ClientCore::abandon` giving a sent call's credit back at once (as cancelling an
    // unsent one does), 2,000 seeds give 6 violations, these three among them: "2 calls
    // outstanding on connection 3, beyond its 1 credits": the responder still serves the
    // call its caller gave up.
    for seed in [588, 734, 833] {
        let run = sim::run(seed);
        assert!(run.as_ref().is_ok_and(|r| r.abandoned.1 > 0), "seed {seed}: {run:?}");
    }
}

/// The same seed, twice: the same run, step for step.
#[test]
fn a_seed_replays_exactly() {
    for seed in [1, 77, 1234] {
        assert_eq!(sim::run(seed), sim::run(seed), "seed {seed}");
    }
}

/// `SIM_SEED=n`: that run alone, with its outcome printed.
#[test]
fn replay() {
    let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) else { return };
    let got = sim::run(seed);
    eprintln!("seed {seed}: {got:?}");
    assert!(got.is_ok());
}

#[test]
#[ignore = "100,000 seeds: run in release by hand or in CI's long run"]
fn long_run() {
    run_seeds(1_000_000, 100_000);
}
