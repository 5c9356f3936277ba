//! The deterministic simulator (tests/sim) over many seeds: the requester and responder state
//! machines, marshaling and reassembly, under injected faults, with every invariant checked
//! after every step. A sweep must also have injected every fault kind and seen every outcome
//! ([`sim::trace::Kind`]) at least once. A failing seed prints itself with the command that
//! replays it exactly (`SIM_SEED=<seed> SIM_EXTRAS=<faults> cargo test -p negotiate --test
//! simulation replay -- --nocapture`).
//!
//! `cargo test` runs a few thousand seeds; the ignored `long_run` runs 100,000
//! (`cargo test --release -p negotiate --test simulation -- --ignored long_run --nocapture`).

mod sim;

use std::time::Instant;

use sim::trace::{Coverage, Kind};
use sim::{Config, Extras, Report, Violation};

/// What a sweep of seeds gave.
struct Sweep {
    seeds: u64,
    coverage: Coverage,
    violations: Vec<Violation>,
}

/// Runs `seeds` seeds from `first` with `extras`, and prints what they did.
fn sweep(first: u64, seeds: u64, extras: Extras) -> Sweep {
    let start = Instant::now();
    let mut totals = Report::default();
    let mut coverage = Coverage::default();
    let mut violations = Vec::new();
    for seed in first..first + seeds {
        match (Config { seed, extras }).run() {
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
                coverage.merge(&r.trace.coverage());
            }
            Err(v) => violations.push(v),
        }
    }
    eprintln!(
        "simulation: {seeds} seeds from {first} (extras {extras}) in {:.2?}: {} calls ({} ok, {} failed), {} connections, {} executions, {} steps, backward calls ended by reply/RDMA_ERROR/disconnect {:?}, calls abandoned unsent/sent {:?}; {} violations\n{coverage}",
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
        eprintln!("  {v}");
    }
    Sweep { seeds, coverage, violations }
}

impl Sweep {
    /// What is wrong with the sweep: a broken invariant, or a fault kind never injected or an
    /// outcome never seen (a sweep that injects nothing, or whose faults stopped reaching
    /// what they were for, checks nothing).
    fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if let Some(v) = self.violations.first() {
            failures.push(format!("{} of {} seeds broke an invariant; first: {v}", self.violations.len(), self.seeds));
        }
        let missing = self.coverage.missing();
        if !missing.is_empty() {
            let named: Vec<String> = missing.iter().map(|k| format!("{k:?} ({})", k.what())).collect();
            failures.push(format!("never happened in {} seeds: {}", self.seeds, named.join("; ")));
        }
        failures
    }
}

/// Runs `seeds` seeds from `first` with every fault; fails with every violation found (the
/// first few printed in full), and unless every fault kind was injected and every outcome seen.
fn run_seeds(first: u64, seeds: u64) {
    let sweep = sweep(first, seeds, Extras::ALL);
    let failures = sweep.failures();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn two_thousand_seeds_keep_every_invariant() {
    run_seeds(0, 2_000);
}

/// What each named seed is about, as a check of its trace: the fault it is named for was
/// injected and led to the outcome it is about. A seed whose run changes (a new fault drawn
/// from the main stream, a changed requester) stops reaching its scenario and fails here,
/// instead of passing on without checking anything; `scan_for_scenarios` finds seeds that do.
mod scenario {
    use super::sim::trace::{BackwardEnd, Closer, End, Event, Got, Lie, Refusal, Trace};

    pub type Check = fn(&Trace) -> bool;

    fn transmit(e: &Event) -> Option<(u32, u32, bool, u32)> {
        match *e {
            Event::Transmit { xid, link, probe, attempt, .. } => Some((xid, link, probe, attempt)),
            _ => None,
        }
    }

    /// Whether another call goes out on `link` after position `at` with no connection loss
    /// between, and ends: the connection was kept and the calls behind went on.
    fn calls_go_on(t: &Trace, at: usize, link: u32, not: u32) -> bool {
        let Some((next, (y, _, _, _))) =
            t.next(Some(at), |e| transmit(e).filter(|&(y, l, _, _)| l == link && y != not))
        else {
            return false;
        };
        !t.between(at, next, |e| matches!(*e, Event::LinkDown { link: l, .. } if l == link))
            && t.next(Some(next), |e| matches!(*e, Event::Ended { xid, .. } if xid == y).then_some(())).is_some()
    }

    /// RFC 8166 section 3.3.3 (seed 16): the probe, executed slower than the timeout, timed
    /// out; the requester closed its connection and sent it again, on a new connection, where
    /// it was executed (once per connection: invariant 2).
    pub fn slow_probe_sent_again_on_a_new_connection(t: &Trace) -> bool {
        t.all(|e| transmit(e).filter(|&(_, _, probe, _)| probe)).any(|(i, (x, link, _, _))| {
            let slow =
                |e: &Event| matches!(*e, Event::Executed { xid, link: l, slow: true, .. } if xid == x && l == link);
            let Some((j, ())) = t.next(Some(i), |e| slow(e).then_some(())) else { return false };
            let closed =
                |e: &Event| matches!(*e, Event::LinkDown { link: l, by: Closer::ClientTimeout, .. } if l == link);
            let Some((k, ())) = t.next(Some(j), |e| closed(e).then_some(())) else { return false };
            let again = t.next(Some(k), |e| transmit(e).filter(|&(y, l, _, a)| y == x && l != link && a > 1));
            again.is_some_and(|(m, (_, l2, _, _))| {
                t.next(Some(m), |e| {
                    matches!(*e, Event::Executed { xid, link, .. } if xid == x && link == l2).then_some(())
                })
                .is_some()
            })
        })
    }

    /// Draft section 5 (seed 7): the probe was answered ERR_CHUNK (RDMA2_ERR_BAD_HEADER), its
    /// call failed so, and the calls behind it went on on the same connection.
    pub fn probe_answered_err_chunk_then_calls_go_on(t: &Trace) -> bool {
        probe_failed_then_calls_go_on(t, End::ErrChunk)
    }

    /// Draft section 5.2 (seed 540's finding): the probe was answered RDMA_ERR_VERS with no
    /// version in common (the lie), its call failed so, and the calls behind it went on.
    pub fn probe_answered_no_common_version_then_calls_go_on(t: &Trace) -> bool {
        probe_failed_then_calls_go_on(t, End::NoCommonVersion)
            && t.all(|e| matches!(e, Event::Lie { lie: Lie::ErrVersNone, .. }).then_some(())).next().is_some()
    }

    fn probe_failed_then_calls_go_on(t: &Trace, how: End) -> bool {
        t.all(|e| transmit(e).filter(|&(_, _, probe, _)| probe)).any(|(i, (x, link, _, _))| {
            let ended = t.next(Some(i), |e| match *e {
                Event::Ended { xid, how } if xid == x => Some(how),
                _ => None,
            });
            let again = t.next(Some(i), |e| transmit(e).filter(|&(y, _, _, _)| y == x));
            match ended {
                Some((j, h)) if h == how && again.is_none_or(|(a, _)| a > j) => calls_go_on(t, j, link, x),
                _ => false,
            }
        })
    }

    /// Issue 27, section 4.2.1 ("the sender uses appropriate modulo arithmetic"): on a -07
    /// connection whose counters start near 2^32 (the `draft07` extra), the client's running
    /// totals wrapped past zero, and a call sent on that connection after the wrap was
    /// answered with its echo: neither side took the small total for a lowered limit.
    pub fn draft07_totals_wrapped_and_calls_went_on(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::Draft07TotalsWrapped { link } => Some(link),
            _ => None,
        })
        .any(|(i, link)| {
            t.all(|e| match *e {
                Event::Transmit { xid, link: l, .. } if l == link => Some(xid),
                _ => None,
            })
            .filter(|&(j, _)| j > i)
            .any(|(j, x)| {
                t.next(Some(j), |e| matches!(*e, Event::Ended { xid, how: End::Echo } if xid == x).then_some(()))
                    .is_some()
            })
        })
    }

    /// Issue 27, section 4.1 under loss: a -07 call continued across Sends lost its
    /// connection before its reply, with messages undelivered, went out again on another
    /// connection and was answered with its echo: nothing the responder held of the parts of
    /// the lost connection came into the next.
    pub fn continued_call_lost_with_its_connection_then_answered(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::Continued { xid, .. } => Some(xid),
            _ => None,
        })
        .any(|(i, x)| {
            let sent_on = t.all(transmit).take_while(|(s, _)| *s < i).filter(|(_, (y, ..))| *y == x).last();
            let Some((_, (_, link, _, _))) = sent_on else { return false };
            let lost =
                |e: &Event| matches!(*e, Event::LinkDown { link: l, undelivered, .. } if l == link && undelivered > 0);
            let Some((d, ())) = t.next(Some(i), |e| lost(e).then_some(())) else { return false };
            let ended = |e: &Event| matches!(*e, Event::Ended { xid, .. } if xid == x);
            let again = t.next(Some(d), |e| transmit(e).filter(|&(y, l, _, _)| y == x && l != link));
            !t.between(i, d, ended)
                && again.is_some_and(|(a, _)| {
                    t.next(Some(a), |e| matches!(*e, Event::Ended { xid, how: End::Echo } if xid == x).then_some(()))
                        .is_some()
                })
        })
    }

    /// Issue 27, section 4.2.1.1: a -07 responder sent an RDMA2_GRANT while a continued call's
    /// parts arrived, and that call was answered with its echo on the same connection: the
    /// GRANT's total took nothing from the calls (it answers none of them).
    pub fn responder_granted_during_a_continued_call_and_it_was_answered(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::Continued { xid, .. } => Some(xid),
            _ => None,
        })
        .any(|(i, x)| {
            let sent_on = t.all(transmit).take_while(|(s, _)| *s < i).filter(|(_, (y, ..))| *y == x).last();
            let Some((_, (_, link, _, _))) = sent_on else { return false };
            let granted = |e: &Event| matches!(*e, Event::Draft07Grant { link: l, by_responder: true } if l == link);
            let Some((g, ())) = t.next(Some(i), |e| granted(e).then_some(())) else { return false };
            let answered =
                t.next(Some(g), |e| matches!(*e, Event::Ended { xid, how: End::Echo } if xid == x).then_some(()));
            answered
                .is_some_and(|(a, ())| !t.between(i, a, |e| matches!(*e, Event::LinkDown { link: l, .. } if l == link)))
        })
    }

    /// Issue 13, finding 7 (seed 19): a call whose last attempt had no reply within the
    /// timeout, whose connection the requester closed, failed with `ReplyTimeout`.
    pub fn failed_reply_timeout_after_its_connection_was_closed(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::Ended { xid, how: End::ReplyTimeout } => Some(xid),
            _ => None,
        })
        .any(|(j, x)| {
            let last = t.all(|e| transmit(e).filter(|&(y, ..)| y == x)).take_while(|(i, _)| *i < j).last();
            last.is_some_and(|(i, (_, link, _, _))| {
                t.between(
                    i,
                    j,
                    |e| matches!(*e, Event::LinkDown { link: l, by: Closer::ClientTimeout, .. } if l == link),
                )
            })
        })
    }

    /// Issue 13, finding 7 (seed 281): a call whose connection was lost and whose reconnect
    /// was refused failed with `Refused`.
    pub fn failed_refused_after_a_refused_connect(t: &Trace) -> bool {
        t.all(|e| matches!(e, Event::Ended { how: End::Refused, .. }).then_some(())).any(|(j, ())| {
            let refused =
                t.all(|e| matches!(e, Event::ConnectRefused).then_some(())).take_while(|(i, _)| *i < j).last();
            refused.is_some_and(|(i, ())| !t.between(i, j, |e| matches!(e, Event::Connected { .. })))
        })
    }

    /// RFC 8166 section 4.5.2 (seed 0): a call sent as RDMA_NOMSG with no call message was
    /// answered ERR_CHUNK, its call failed so, and the connection was kept.
    pub fn no_message_answered_err_chunk_and_connection_kept(t: &Trace) -> bool {
        unusable_answered(t, true, Refusal::ErrChunk, End::ErrChunk)
    }

    /// RFC 8166 section 4.5.2 (seed 19): a call with a Read chunk past its payload was
    /// answered GARBAGE_ARGS, its caller got that reply, and the connection was kept.
    pub fn past_payload_answered_garbage_args_and_connection_kept(t: &Trace) -> bool {
        unusable_answered(t, false, Refusal::GarbageArgs, End::GarbageArgs)
    }

    fn unusable_answered(t: &Trace, nomsg: bool, answer: Refusal, end: End) -> bool {
        t.all(|e| match *e {
            Event::Unusable { xid, no_message } if no_message == nomsg => Some(xid),
            _ => None,
        })
        .any(|(i, x)| {
            let Some((j, link)) = t.next(Some(i), |e| match *e {
                Event::Refused { xid, link, with } if xid == x && with == answer => Some(link),
                _ => None,
            }) else {
                return false;
            };
            let ended = t.next(Some(j), |e| match *e {
                Event::Ended { xid, how } if xid == x => Some(how),
                _ => None,
            });
            ended.is_some_and(|(_, how)| how == end) && calls_go_on(t, j, link, x)
        })
    }

    /// RFC 8166 section 4.5 (seed 2): a backward call the requester answered with RDMA_ERROR
    /// ended by it.
    pub fn backward_call_ended_by_rdma_error(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::BackwardAnswered { xid, error: true } => Some(xid),
            _ => None,
        })
        .any(|(i, _)| {
            t.next(Some(i), |e| match *e {
                Event::BackwardEnded { by, .. } => Some(by),
                _ => None,
            })
            .is_some_and(|(_, by)| by == BackwardEnd::Error)
        })
    }

    /// RFC 8166 section 3.3.1 (seed 588): a call given up with its transmission out was held
    /// by the core past that step, never sent again, until the responder's answer to it or
    /// its connection's loss let it go.
    pub fn abandoned_call_held_until_answered_or_lost(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::Abandoned { xid, sent: true } => Some(xid),
            _ => None,
        })
        .any(|(i, x)| {
            let ended = t.next(Some(i), |e| matches!(*e, Event::AbandonedEnded { xid, .. } if xid == x).then_some(()));
            ended.is_some_and(|(j, ())| {
                t.events[j].step > t.events[i].step
                    && t.next(Some(i), |e| transmit(e).filter(|&(y, ..)| y == x)).is_none()
            })
        })
    }

    /// RFC 8166 section 3.3.1 (seeds 734, 833): a call given up with its transmission out
    /// on a connection with one credit (no reply accepted there yet) kept that credit: no
    /// other call went out on the connection until the responder answered it, and then one
    /// that had waited did.
    pub fn abandoned_call_kept_its_credit(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::Abandoned { xid, sent: true } => Some(xid),
            _ => None,
        })
        .any(|(i, x)| {
            let Some((s, (_, link, _, _))) =
                t.all(transmit).take_while(|(s, _)| *s < i).filter(|(_, (y, ..))| *y == x).last()
            else {
                return false;
            };
            let connected = t.all(|e| matches!(*e, Event::Connected { link: l, .. } if l == link).then_some(())).next();
            let Some((c, ())) = connected else { return false };
            let one_credit =
                !t.between(c, i, |e| matches!(*e, Event::Received { link: l, got: Got::Reply(_) } if l == link));
            let Some((j, by_answer)) = t.next(Some(i), |e| match *e {
                Event::AbandonedEnded { xid, by_answer } if xid == x => Some(by_answer),
                _ => None,
            }) else {
                return false;
            };
            let held = !t.between(s, j, |e| matches!(*e, Event::Transmit { link: l, .. } if l == link));
            let waited = t.next(Some(j), transmit).is_some_and(|(k, (y, l, _, _))| {
                l == link
                    && t.all(|e| matches!(*e, Event::CallMade { xid, .. } if xid == y).then_some(()))
                        .next()
                        .is_some_and(|(m, ())| m < j)
                    && k > j
            });
            one_credit && by_answer && held && waited
        })
    }

    /// Whether the next end of call `x` after position `at` is its echo.
    fn echoed_after(t: &Trace, at: usize, x: u32) -> bool {
        t.next(Some(at), |e| match *e {
            Event::Ended { xid, how } if xid == x => Some(how),
            _ => None,
        })
        .is_some_and(|(_, how)| how == End::Echo)
    }

    /// RFC 8166 section 3.3.1, "RPC calls complete in any order" (seed 0): on a connection
    /// serving several calls at once, the answer to a call left before the answer to one taken
    /// earlier there, and each call ended with its own echo (invariant 4: each successful
    /// reply is its own call's).
    pub fn an_answer_overtook_and_each_call_got_its_own(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::AnswerLeft { xid, link, overtook: true } => Some((xid, link)),
            _ => None,
        })
        .any(|(i, (x, link))| {
            let serving = |e: &Event| match *e {
                Event::Serving { xid, link: l, .. } if l == link => Some(xid),
                _ => None,
            };
            let left =
                |y: u32| move |e: &Event| matches!(*e, Event::AnswerLeft { xid, link: l, .. } if xid == y && l == link);
            let Some((sx, _)) = t.all(serving).take_while(|(j, _)| *j < i).filter(|&(_, y)| y == x).last() else {
                return false;
            };
            // The calls taken before it there whose answers had not left yet.
            let overtaken: Vec<u32> = t
                .all(serving)
                .take_while(|(j, _)| *j < sx)
                .filter(|&(j, y)| !t.between(j, i, left(y)))
                .map(|(_, y)| y)
                .collect();
            echoed_after(t, i, x)
                && overtaken.iter().any(|&y| {
                    t.next(Some(i), |e| left(y)(e).then_some(())).is_some_and(|(j, ())| echoed_after(t, j, y))
                })
        })
    }

    /// RFC 8166 section 3.3.1 (seed 11): on a Version One or -00 connection granted 4 credits
    /// (a responder that also speaks -07 grants 4: `Faults::credits`), a call was taken while 3
    /// others were being served there (the window full); the responder, counting the calls
    /// being served as in flight as `Server` does (`Arrival::behind`), found it within the
    /// credits, and it ended with its echo.
    pub fn calls_being_served_filled_the_credits(t: &Trace) -> bool {
        t.all(|e| match *e {
            Event::Serving { xid, link, alongside: 3, .. } => Some((xid, link)),
            _ => None,
        })
        .any(|(i, (x, link))| {
            let settled = t.all(|e| match *e {
                Event::Settled { link: l, draft07, .. } if l == link => Some(draft07),
                _ => None,
            });
            let granted_4 = t
                .all(|e| {
                    matches!(*e, Event::Connected { link: l, responder_draft07: true, .. } if l == link).then_some(())
                })
                .any(|(j, ())| j < i);
            granted_4
                && settled.take_while(|(j, _)| *j < i).last().is_some_and(|(_, draft07)| !draft07)
                && echoed_after(t, i, x)
        })
    }
}

/// Runs `config` and checks that it keeps every invariant and that its trace shows
/// `scenario`.
fn named(config: Config, name: &str, scenario: scenario::Check) {
    match config.run() {
        Ok(r) => assert!(
            scenario(&r.trace),
            "{name}: the run no longer shows its scenario (trace {:016x}); replay: SIM_TRACE=1 {}",
            r.trace.hash(),
            config.replay_command()
        ),
        Err(v) => panic!("{name}: {v}"),
    }
}

fn none(seed: u64) -> Config {
    Config { seed, extras: Extras::NONE }
}

fn all(seed: u64) -> Config {
    Config { seed, extras: Extras::ALL }
}

/// Every extra but `draft07`, `one_attempt` and `several`: a seed named before -07 was
/// simulated, whose scenario is -00's.
fn all_before_draft07(seed: u64) -> Config {
    Config { seed, extras: Extras { draft07: false, ..all_before_one_attempt(seed).extras } }
}

/// Every extra but `one_attempt` and `several`: a seed named before the simulator gave some
/// runs one attempt per call, replayed as found.
fn all_before_one_attempt(seed: u64) -> Config {
    Config { seed, extras: Extras { one_attempt: false, ..all_before_several(seed).extras } }
}

/// Every extra but `several`: a seed named before the simulator served several calls at once
/// per connection, replayed as found.
fn all_before_several(seed: u64) -> Config {
    Config { seed, extras: Extras { several: false, ..Extras::ALL } }
}

/// Seeds that found the requester's bugs before they were fixed (issue 13), kept as named
/// regressions: with the old requester each broke an invariant. Each checks that its run
/// still shows what it was named for.
#[test]
fn rfc8166_3_3_3_seed_6_a_slow_first_call_is_not_run_twice_on_one_connection() {
    // Before: the probe timed out and went out again in Version One on the same connection;
    // the responder ran it twice (seed 16: "call 0x1002 executed 2 times on connection 1").
    // Seed 16's run has changed since (its probe is now answered with a lie, never run), so
    // it no longer shows a slow probe; seed 6 is the first that does (`scan_for_scenarios`).
    named(none(6), "seed 6", scenario::slow_probe_sent_again_on_a_new_connection);
}

#[test]
fn draft_5_seed_7_a_probe_answered_err_chunk_does_not_stall_the_calls_behind_it() {
    // Before: ERR_CHUNK to the probe left the version state probing; no later call was ever
    // sent, and none timed out ("calls ... are open and nothing is scheduled").
    named(none(7), "seed 7", scenario::probe_answered_err_chunk_then_calls_go_on);
}

#[test]
fn draft_5_2_seed_274_a_probe_answered_with_no_common_version_does_not_stall_the_calls_behind_it() {
    // Before (after the first fix): RDMA_ERR_VERS with no common version failed the probe but
    // sent nothing more (seed 540). Seed 540's run has changed since and its probe is no
    // longer answered so; seed 274 is the first whose is (`scan_for_scenarios`).
    named(none(274), "seed 274", scenario::probe_answered_no_common_version_then_calls_go_on);
}

#[test]
fn issue_13_finding_7_seeds_19_and_281_a_failed_call_reports_what_happened_to_its_last_attempt() {
    // With every failure reported as "connection lost" (as `Client` did before), seed 19 has a
    // call that timed out and seed 281 one whose reconnect was refused: each broke the cause
    // invariant ("failed with connection lost ..., but its latest attempt was TimedOut").
    named(none(19), "seed 19", scenario::failed_reply_timeout_after_its_connection_was_closed);
    named(none(281), "seed 281", scenario::failed_refused_after_a_refused_connect);
}

#[test]
fn rfc8166_4_5_2_seeds_0_and_19_a_call_with_unusable_chunks_is_answered_and_the_connection_kept() {
    // With `FailureAnswer::for_error` closing the connection for reassembly errors (as
    // `Server` did before), seed 0 (RDMA_NOMSG with only a Reply chunk) and seed 19 (a Read
    // chunk past the payload) broke invariant 5: "connection closed over call ..., which it
    // could answer". Answering GARBAGE_ARGS where ERR_CHUNK is due breaks seed 0 too.
    let unusable = |seed| Config { seed, extras: Extras { unusable_calls: true, ..Extras::NONE } };
    named(unusable(0), "seed 0", scenario::no_message_answered_err_chunk_and_connection_kept);
    named(unusable(19), "seed 19", scenario::past_payload_answered_garbage_args_and_connection_kept);
}

#[test]
fn rfc8166_4_5_seed_2_a_backward_call_ends_at_once_with_the_requesters_rdma_error() {
    // With the backward slot ignoring the requester's RDMA_ERROR (as `Server` did before),
    // 2,000 seeds give 430 violations, the first seed 2's: "backward call 0xb0000001 on
    // connection 1 still waits after the client's answer".
    named(all_before_draft07(2), "seed 2", scenario::backward_call_ended_by_rdma_error);
}

// Issue 27's seed 16 (the `draft07` extra) was named here: the probe's answer was a lie the
// -07 requester could not take, so the responder's running total never rose above the one
// message sent, and with nothing in flight the requester's window stayed shut (before the fix,
// until the idle timeout). Since the eleventh session the server sends its RDMA2_CONNPROP_FINAL
// unasked, before anything the first -07 message prompts (section 6.3.4), and its total opens
// the window whatever the lie: no seed of 3,000 reaches that state any more. The rule is checked
// by bytes instead, `draft07_client.rs::draft07_4_2_1_a_window_shut_with_nothing_in_flight_closes_the_connection`.

#[test]
fn draft07_4_2_1_seed_5_running_totals_wrap_past_zero_and_calls_go_on() {
    // With the `draft07` extra both sides' -07 counters start 6 to 17 messages short of the
    // totals wrapping (`Faults::draft07_counters_from`); 361 seeds of 3,000 show a wrap
    // followed by a call answered on the same connection.
    named(all_before_one_attempt(5), "seed 5", scenario::draft07_totals_wrapped_and_calls_went_on);
}

#[test]
fn draft07_4_1_seed_20_a_continued_call_lost_with_its_connection_is_answered_on_the_next() {
    // One call in seven goes with nothing DDP-eligible (`WHOLE_ULB`), and on -07 one too large
    // for the responder's Receive continues across Sends when the window has room; 42 seeds of
    // 3,000 show such a call lost with its connection, messages undelivered, and answered on
    // another.
    named(all_before_one_attempt(20), "seed 20", scenario::continued_call_lost_with_its_connection_then_answered);
}

#[test]
fn draft07_4_2_1_1_seed_54_a_responder_grants_while_a_continued_call_arrives() {
    // The -07 server advertises 4 credits in the simulator, so that a continued call's parts
    // use more than half of the requester's window; 24 seeds of 3,000 show such a GRANT
    // followed by the call's echo on the same connection (seed 20 shows it too, and is
    // `draft07_4_1_seed_20`'s).
    named(
        all_before_one_attempt(54),
        "seed 54",
        scenario::responder_granted_during_a_continued_call_and_it_was_answered,
    );
}

#[test]
fn rfc8166_3_3_1_seeds_588_734_833_a_call_given_up_keeps_its_credit_until_its_reply() {
    // With `Connection::abandon` giving a sent call's credit back at once (as cancelling an
    // unsent one does), 2,000 seeds give 6 violations, these three among them: "2 calls
    // outstanding on connection 3, beyond its 1 credits": the responder still serves the
    // call its caller gave up. (The simulator's emulation of that change, `abandon` told the
    // call was unsent, still gives these three among its 6 violations.) In 734 and 833 the
    // call given up holds a connection's only credit; in 588 the core holds one across its
    // connection's loss, and the runs part from there.
    // (Found before the `draft07` extra: replayed as found.)
    named(all_before_draft07(588), "seed 588", scenario::abandoned_call_held_until_answered_or_lost);
    for seed in [734, 833] {
        named(all_before_draft07(seed), &format!("seed {seed}"), scenario::abandoned_call_kept_its_credit);
    }
}

#[test]
fn rfc8166_3_3_1_seed_0_calls_complete_in_any_order_each_with_its_own_reply() {
    // With the `several` extra a connection serves up to 4 calls at once (the credits a
    // responder that also speaks -07 grants), each answer leaving when its call's service is
    // done (`Faults::calls_at_once`); 420 seeds of 3,000 show an answer overtaking an earlier
    // call's and both calls ending with their own echoes.
    named(all(0), "seed 0", scenario::an_answer_overtook_and_each_call_got_its_own);
}

#[test]
fn rfc8166_3_3_1_seed_11_calls_being_served_count_against_the_credits() {
    // The responder counts the calls being served as in flight, as `Server` does; 63 seeds of
    // 3,000 fill a 4-credit window so on a Version One or -00 connection. Counting them one too
    // many would count the fourth as an overrun, which breaks invariant 3 ("arrived beyond the
    // credits granted"); counting too few is caught by
    // `lifecycle.rs::rfc8166_3_3_1_calls_being_served_count_against_the_grant`.
    named(all(11), "seed 11", scenario::calls_being_served_filled_the_credits);
}

/// Not a check: lists, for each named scenario, the seeds below 3,000 whose runs show it (to
/// replace a named seed that stopped reaching its scenario). `SIM_SCAN=<part of a name>`
/// scans only the scenarios whose name has it.
#[test]
#[ignore = "a search, run by hand"]
fn scan_for_scenarios() {
    let unusable = Extras { unusable_calls: true, ..Extras::NONE };
    // As the named tests run them.
    let (before_draft07, before_one_attempt) = (all_before_draft07(0).extras, all_before_one_attempt(0).extras);
    let scenarios: [(&str, Extras, scenario::Check); 15] = [
        ("slow probe sent again", Extras::NONE, scenario::slow_probe_sent_again_on_a_new_connection),
        ("probe ERR_CHUNK", Extras::NONE, scenario::probe_answered_err_chunk_then_calls_go_on),
        ("probe no common version", Extras::NONE, scenario::probe_answered_no_common_version_then_calls_go_on),
        ("ReplyTimeout", Extras::NONE, scenario::failed_reply_timeout_after_its_connection_was_closed),
        ("Refused", Extras::NONE, scenario::failed_refused_after_a_refused_connect),
        ("NOMSG ERR_CHUNK", unusable, scenario::no_message_answered_err_chunk_and_connection_kept),
        ("past payload GARBAGE_ARGS", unusable, scenario::past_payload_answered_garbage_args_and_connection_kept),
        ("backward RDMA_ERROR", before_draft07, scenario::backward_call_ended_by_rdma_error),
        ("abandoned keeps credit", before_draft07, scenario::abandoned_call_kept_its_credit),
        ("abandoned held", before_draft07, scenario::abandoned_call_held_until_answered_or_lost),
        ("-07 totals wrapped", before_one_attempt, scenario::draft07_totals_wrapped_and_calls_went_on),
        (
            "-07 continued call lost",
            before_one_attempt,
            scenario::continued_call_lost_with_its_connection_then_answered,
        ),
        ("-07 GRANT", before_one_attempt, scenario::responder_granted_during_a_continued_call_and_it_was_answered),
        ("answer overtook", Extras::ALL, scenario::an_answer_overtook_and_each_call_got_its_own),
        ("served at once filled the credits", Extras::ALL, scenario::calls_being_served_filled_the_credits),
    ];
    let only = std::env::var("SIM_SCAN").ok();
    let scenarios = scenarios.into_iter().filter(|(name, ..)| only.as_deref().is_none_or(|o| name.contains(o)));
    for (name, extras, check) in scenarios {
        let seeds: Vec<u64> =
            (0..3_000).filter(|&seed| Config { seed, extras }.run().is_ok_and(|r| check(&r.trace))).collect();
        eprintln!("{name} ({extras}): {} seeds, first {:?}", seeds.len(), &seeds[..seeds.len().min(12)]);
    }
}

/// The same seed, twice: the same run, event for event (the trace's hash covers every
/// event of every step, each message's bytes included); another seed, or the same seed with
/// other faults, gives another trace.
#[test]
fn a_seed_replays_exactly() {
    let mut hashes = std::collections::BTreeMap::new();
    for seed in [1, 2, 77, 1234] {
        let (a, b) = (sim::run(seed).expect("keeps the invariants"), sim::run(seed).expect("keeps the invariants"));
        assert!(!a.trace.events.is_empty(), "seed {seed}");
        assert_eq!(a.trace.hash(), b.trace.hash(), "seed {seed}");
        assert_eq!(a.trace.events, b.trace.events, "seed {seed}");
        assert_eq!(a, b, "seed {seed}");
        if let Some(other) = hashes.insert(a.trace.hash(), seed) {
            panic!("seeds {other} and {seed} give the same trace hash {:016x}", a.trace.hash());
        }
    }
    // Seed 2 with and without the later faults (its backward calls).
    let (with, without) = (sim::run(2).unwrap(), sim::run_with(2, Extras::NONE).unwrap());
    assert_ne!(with.trace.hash(), without.trace.hash());
    // One event changed, or two swapped, changes the hash.
    let mut trace = sim::trace::Trace::default();
    let mut swapped = sim::trace::Trace::default();
    let events = &with.trace.events;
    for e in events {
        trace.push(e.clone());
    }
    assert_eq!(trace.hash(), with.trace.hash());
    for e in [&events[1], &events[0]].into_iter().chain(&events[2..]) {
        swapped.push(e.clone());
    }
    assert_ne!(swapped.hash(), with.trace.hash());
}

/// Every replay command printed (a violation's, a named seed's) reads back as the run it was
/// printed for, and running what it reads back as (the `replay` test's own path) gives the
/// same trace.
#[test]
fn a_printed_replay_command_reproduces_its_run() {
    let unusable = Extras { unusable_calls: true, ..Extras::NONE };
    let two = Extras { backward_calls: true, abandoned_calls: true, ..Extras::NONE };
    for config in [all(2), none(6), Config { seed: 19, extras: unusable }, Config { seed: 833, extras: two }] {
        let command = config.replay_command();
        assert_eq!(Config::parse_command(&command), Ok(config), "{command}");
        let vars: std::collections::HashMap<String, String> = command
            .split_whitespace()
            .map_while(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (replayed, got) = replay_from(|k| vars.get(k).cloned()).expect("the command sets SIM_SEED");
        assert_eq!(replayed, config, "{command}");
        let (got, want) = (got.expect("keeps the invariants"), config.run().expect("keeps the invariants"));
        assert_eq!(got.trace.hash(), want.trace.hash(), "{command}");
        // What a violation prints ends with the same command.
        let v = Violation {
            seed: config.seed,
            extras: config.extras,
            at: got.virtual_time,
            what: "x".into(),
            trace_hash: 0,
        };
        let printed = v.to_string();
        let tail = printed.rsplit_once("replay: ").map(|(_, c)| c.trim_end_matches(')'));
        assert_eq!(tail.map(Config::parse_command), Some(Ok(config)), "{printed}");
    }
    // Without SIM_EXTRAS, the replay test runs every fault, as the sweeps do.
    assert_eq!(
        Config::parse_command("SIM_SEED=5 cargo test -p negotiate --test simulation replay -- --nocapture"),
        Ok(all(5))
    );
    for bad in [
        "SIM_SEED=x SIM_EXTRAS=all cargo test -p negotiate --test simulation replay -- --nocapture",
        "SIM_EXTRAS=all cargo test -p negotiate --test simulation replay -- --nocapture",
        "SIM_SEED=1 SIM_EXTRAS=most cargo test -p negotiate --test simulation replay -- --nocapture",
        "SIM_SEED=1 SIM_EXTRAS=backward,backward cargo test -p negotiate --test simulation replay -- --nocapture",
        "SIM_SEED=1 SIM_EXTRAS=all cargo test -p negotiate --test simulation long_run -- --nocapture",
        "SIM_SEED=1 SIM_FAULTS=all cargo test -p negotiate --test simulation replay -- --nocapture",
    ] {
        assert!(Config::parse_command(bad).is_err(), "{bad} read as {:?}", Config::parse_command(bad));
    }
}

/// A sweep that injected no fault, or whose faults never reached an outcome, fails: the
/// check counts what happened, not only what did not go wrong.
#[test]
fn a_sweep_that_injects_nothing_fails() {
    let nothing = Sweep { seeds: 0, coverage: Coverage::default(), violations: Vec::new() };
    assert_eq!(nothing.coverage.missing(), Kind::ALL);
    assert_eq!(nothing.failures().len(), 1);
    // Without the later faults, what only they inject is missing, and the sweep fails.
    let older = sweep(0, 20, Extras::NONE);
    assert!(older.violations.is_empty(), "{:?}", older.violations);
    let missing = older.coverage.missing();
    for kind in [Kind::UnusableNoMessage, Kind::BackwardCall, Kind::AbandonedSent, Kind::BackwardEndedError] {
        assert!(missing.contains(&kind), "{kind:?} happened without its fault: {missing:?}");
    }
    assert!(!older.failures().is_empty());
}

/// `SIM_SEED=n` (and `SIM_EXTRAS`, by default `all`): that run alone, with its outcome and
/// its trace's hash printed (`SIM_TRACE=1`: every event too).
#[test]
fn replay() {
    let Some((config, got)) = replay_from(|k| std::env::var(k).ok()) else { return };
    match &got {
        Ok(r) => eprintln!("{}: ok, trace {:016x}: {r:?}", config.replay_command(), r.trace.hash()),
        Err(v) => eprintln!("{v}"),
    }
    assert!(got.is_ok());
}

/// The run the `replay` test makes of the variables `var` gives it.
fn replay_from(var: impl Fn(&str) -> Option<String>) -> Option<(Config, Result<Report, Violation>)> {
    let config = Config::from_vars(var).unwrap_or_else(|e| panic!("{e}"))?;
    Some((config, config.run()))
}

#[test]
#[ignore = "100,000 seeds: run in release by hand or in CI's long run"]
fn long_run() {
    run_seeds(1_000_000, 100_000);
}
