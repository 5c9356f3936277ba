//! `interop-tests`: the cross-version interop matrix, the workspace's main job.
//!
//! ```text
//! interop-tests [--json] [--backend inproc|tcp|tcp-local|rdma]
//! interop-tests decode HEX...
//! interop-tests pcap FILE [--backend inproc|tcp]
//! ```
//!
//! Runs every cell of [`interop_tests::matrix`] (requester x responder x private data x
//! transport-properties extension x message form: 168 cells) on one verbs backend and prints
//! the table (or JSON with `--json`); exits
//! non-zero if any cell failed, saying why. `tcp` runs each pair as two processes over TCP
//! loopback (the responder is this binary's `serve-cell`, see [`interop_tests::remote`]);
//! `tcp-local` runs both ends in this process; `rdma` (built with `--features rdma`) uses the
//! rdma-core backend on the address in `RDMA_TEST_ADDR`, inside the Soft-RoCE guest.
//!
//! `decode` prints any Version One or Version Two transport header (hex, optionally followed
//! by the RPC message) as JSON with the verdict of a versions 1..=2 receiver
//! ([`interop_tests::decode`]). `pcap` runs the matrix in this process and writes every
//! RPC-over-RDMA message sent as a RoCEv2 frame into a pcap that Wireshark dissects
//! ([`interop_tests::pcap`]).

use std::io::Write;
use std::process::ExitCode;

use interop_tests::matrix::{all_cells, json, run_cell, table, Cell, Outcome};
use interop_tests::remote::{run_cell_two_processes, serve_cell_main};
use verbs::Backend;

fn usage() -> ExitCode {
    eprintln!("usage: interop-tests [--json] [--backend inproc|tcp|tcp-local|rdma]");
    eprintln!("       interop-tests decode HEX...");
    eprintln!("       interop-tests pcap FILE [--backend inproc|tcp]");
    ExitCode::from(2)
}

/// `decode HEX...`: the arguments joined are one message in hex; prints its JSON report
/// ([`interop_tests::decode`]). Exit status 2 for input that is not hex.
fn decode_main(args: &[String]) -> ExitCode {
    if args.is_empty() {
        return usage();
    }
    match interop_tests::decode::parse_hex(&args.join(" ")) {
        Ok(bytes) => {
            println!("{}", interop_tests::decode::decode(&bytes).pretty());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("interop-tests decode: not hex: {e}");
            ExitCode::from(2)
        }
    }
}

/// `pcap FILE [--backend inproc|tcp]`: runs the matrix with every Send recorded and writes them
/// as RoCEv2 frames to FILE ([`interop_tests::pcap`]). Both ends must run in this process on
/// the recorder's wrapped backend, so `tcp` here is the one-process TCP backend (`tcp-local`).
fn pcap_main(args: &[String]) -> ExitCode {
    let (file, backend) = match args {
        [file] => (file, "inproc"),
        [file, flag, b] | [flag, b, file] if flag == "--backend" => (file, b.as_str()),
        _ => return usage(),
    };
    let recorder = interop_tests::pcap::Recorder::start();
    let run = |run_cell: &dyn Fn(Cell) -> Outcome| {
        run_each(|cell| {
            let o = run_cell(cell);
            recorder.close_group();
            o
        })
    };
    let outcomes = match backend {
        "inproc" => {
            let b = recorder.capture(verbs::InProcess);
            run(&|cell| run_cell(&b, cell))
        }
        "tcp" | "tcp-local" => {
            let b = recorder.capture(verbs::Tcp);
            run(&|cell| run_cell(&b, cell))
        }
        other => {
            eprintln!("interop-tests pcap: backend {other:?}: only inproc and tcp run both ends in this process");
            return usage();
        }
    };
    let sent = recorder.finish();
    let written = std::fs::File::create(file)
        .map(std::io::BufWriter::new)
        .and_then(|f| interop_tests::pcap::write_capture(f, &sent))
        .and_then(|p| p.into_inner().flush());
    if let Err(e) = written {
        eprintln!("interop-tests pcap: writing {file}: {e}");
        return ExitCode::from(2);
    }
    let failed = outcomes.iter().filter(|o| o.verdict.is_err()).count();
    eprintln!(
        "interop matrix on {backend}: {} passed, {failed} failed; {} messages written to {file}",
        outcomes.len() - failed,
        sent.len()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs every cell on `backend`, with a progress line on stderr.
fn run_all<B: Backend + Clone>(backend: &B) -> Vec<Outcome> {
    run_each(|cell| run_cell(backend, cell))
}

/// Runs every cell with `run`, with a progress line on stderr.
fn run_each(run: impl Fn(Cell) -> Outcome) -> Vec<Outcome> {
    let cells = all_cells();
    let mut out = Vec::with_capacity(cells.len());
    for (i, cell) in cells.into_iter().enumerate() {
        let o = run(cell);
        let mark = if o.verdict.is_ok() { "ok" } else { "FAILED" };
        eprint!(
            "\r[{:>3}/{}] {:<11} -> {:<11} {:<15} {:<14} {:<14} {:<6}",
            i + 1,
            out.capacity(),
            cell.requester.label(),
            cell.responder.label(),
            cell.pdata.label(),
            cell.extension.label(),
            cell.form.label(),
            mark
        );
        let _ = std::io::stderr().flush();
        out.push(o);
    }
    eprintln!();
    out
}

fn main() -> ExitCode {
    let all: Vec<String> = std::env::args().skip(1).collect();
    match all.first().map(String::as_str) {
        Some("serve-cell") => return ExitCode::from(serve_cell_main(&all[1..]) as u8),
        Some("decode") => return decode_main(&all[1..]),
        Some("pcap") => return pcap_main(&all[1..]),
        _ => {}
    }
    let mut as_json = false;
    let mut backend = "inproc".to_string();
    let mut args = all.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => as_json = true,
            "--backend" => match args.next() {
                Some(b) => backend = b,
                None => return usage(),
            },
            "-h" | "--help" => {
                usage();
                return ExitCode::SUCCESS;
            }
            _ => return usage(),
        }
    }
    let outcomes = match backend.as_str() {
        "inproc" => run_all(&verbs::InProcess),
        "tcp" => match std::env::current_exe() {
            Ok(exe) => run_each(|cell| run_cell_two_processes(&exe, cell)),
            Err(e) => {
                eprintln!("interop-tests: cannot find its own executable: {e}");
                return ExitCode::from(2);
            }
        },
        "tcp-local" => run_all(&verbs::Tcp),
        #[cfg(feature = "rdma")]
        "rdma" => match verbs::Rdma::from_test_env() {
            Some(b) => run_all(&b),
            None => return ExitCode::from(2),
        },
        #[cfg(not(feature = "rdma"))]
        "rdma" => {
            eprintln!("interop-tests: built without the `rdma` feature (cargo run -p interop-tests --features rdma)");
            return ExitCode::from(2);
        }
        other => {
            eprintln!("interop-tests: unknown backend {other:?}");
            return usage();
        }
    };
    if as_json {
        print!("{}", json(&outcomes));
    } else {
        print!("{}", table(&outcomes));
    }
    let failed = outcomes.iter().filter(|o| o.verdict.is_err()).count();
    eprintln!("interop matrix on {backend}: {} passed, {failed} failed", outcomes.len() - failed);
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
