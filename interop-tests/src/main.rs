//! `interop-tests`: the cross-version interop matrix, the workspace's main job.
//!
//! ```text
//! interop-tests [--json] [--backend inproc|tcp|tcp-local|rdma] [--addr IPV4]
//! interop-tests decode HEX...|-
//! interop-tests pcap FILE [--backend inproc|tcp|tcp-local]
//! interop-tests --help | --version
//! ```
//!
//! Runs every cell of [`interop_tests::matrix`] (requester x responder, with Version Two's
//! dialects, x private data x transport-properties extension x message form: 616 cells) on one verbs backend and prints
//! the table (or, with `--json`, one JSON object: the backend, the counts and the cells).
//! `tcp` runs each pair as two processes over TCP loopback (the responder is this binary's
//! `serve-cell`, see [`interop_tests::remote`]); `tcp-local` runs both ends in this process;
//! `rdma` (built with `--features rdma`) uses the rdma-core backend on `--addr`, by default
//! the address in `RDMA_TEST_ADDR` (set inside the Soft-RoCE guest).
//!
//! `decode` prints any Version One or Version Two transport header (hex, optionally followed
//! by the RPC message; `-` reads the hex from stdin) as JSON with the verdict of a versions
//! 1..=2 receiver ([`interop_tests::decode`]). `pcap` runs the matrix in this process and
//! writes every RPC-over-RDMA message sent as a RoCEv2 frame into a pcap that Wireshark
//! dissects ([`interop_tests::pcap`]); it creates FILE before the first cell runs.
//!
//! Exit status, as for `xdr-spec`: 0 success, 1 the work failed (a cell failed, a file could
//! not be written), 2 a usage error. The arguments are parsed in [`args`].

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Read, Write};
use std::process::ExitCode;

use interop_tests::matrix::{all_cells, json, run_cell, table, Cell, Outcome};
use interop_tests::remote::{run_cell_two_processes, serve_cell_main};
use rpcrdma_verbs::Backend;

mod args;

use args::{BackendName, Request, EXIT_USAGE, USAGE};

fn main() -> ExitCode {
    let all: Vec<_> = std::env::args_os().skip(1).collect();
    // The responder process `--backend tcp` starts: an internal interface, not parsed here.
    if all.first().is_some_and(|a| a == "serve-cell") {
        let rest: Vec<String> = all[1..].iter().map(|a| a.to_string_lossy().into_owned()).collect();
        return ExitCode::from(serve_cell_main(&rest) as u8);
    }
    match args::parse(all) {
        Ok(Request::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Request::Version) => {
            println!("interop-tests {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Ok(Request::Matrix { backend, json }) => matrix_main(backend, json),
        Ok(Request::Decode { hex }) => decode_main(&hex),
        Ok(Request::Pcap { file, backend }) => pcap_main(&file, backend),
        Err(e) => usage_error(&e),
    }
}

fn usage_error(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("interop-tests: {e}\n(interop-tests --help for usage)");
    ExitCode::from(EXIT_USAGE)
}

/// The matrix on `backend`: the table (or JSON) on stdout, the summary on stderr.
fn matrix_main(backend: BackendName, as_json: bool) -> ExitCode {
    let outcomes = match backend {
        BackendName::InProcess => run_all(&rpcrdma_verbs::InProcess),
        BackendName::Tcp => match std::env::current_exe() {
            Ok(exe) => run_each(|cell| run_cell_two_processes(&exe, cell)),
            Err(e) => {
                eprintln!("interop-tests: cannot find its own executable (for serve-cell): {e}");
                return ExitCode::FAILURE;
            }
        },
        BackendName::TcpLocal => run_all(&rpcrdma_verbs::Tcp),
        #[cfg(feature = "rdma")]
        BackendName::Rdma(host) => run_all(&rpcrdma_verbs::Rdma::new(host)),
        #[cfg(not(feature = "rdma"))]
        BackendName::Rdma(_) => {
            return usage_error(
                &"--backend rdma: built without the `rdma` feature (cargo run -p interop-tests --features rdma)",
            )
        }
    };
    if as_json {
        print!("{}", json(backend.label(), &outcomes));
    } else {
        print!("{}", table(&outcomes));
    }
    summary(backend, &outcomes, "")
}

/// The summary line on stderr, and the exit status: 1 when a cell failed.
fn summary(backend: BackendName, outcomes: &[Outcome], more: &str) -> ExitCode {
    let failed = outcomes.iter().filter(|o| o.verdict.is_err()).count();
    eprintln!("interop matrix on {}: {} passed, {failed} failed{more}", backend.label(), outcomes.len() - failed);
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `decode HEX...` or `decode -`: the arguments joined (or stdin) are one message in hex;
/// prints its JSON report ([`interop_tests::decode`]). Input that is not hex is a usage error.
fn decode_main(hex: &[String]) -> ExitCode {
    let text = if hex == ["-"] {
        let mut s = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut s) {
            eprintln!("interop-tests decode: reading stdin: {e}");
            return ExitCode::FAILURE;
        }
        s
    } else {
        hex.join(" ")
    };
    match interop_tests::decode::parse_hex(&text) {
        Ok(bytes) => {
            println!("{}", interop_tests::decode::decode(&bytes).pretty());
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(&format!("decode: not hex: {e}")),
    }
}

/// `pcap FILE [--backend inproc|tcp|tcp-local]`: runs the matrix with every Send recorded and
/// writes them as RoCEv2 frames to FILE ([`interop_tests::pcap`]). FILE is created first, so
/// that a bad path fails before the first cell. Both ends must run in this process on the
/// recorder's wrapped backend, so `tcp` here is the one-process TCP backend (`tcp-local`).
fn pcap_main(path: &str, backend: BackendName) -> ExitCode {
    let file = match File::create(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("interop-tests pcap: creating {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let recorder = interop_tests::pcap::Recorder::start();
    let run = |run_cell: &dyn Fn(Cell) -> Outcome| {
        run_each(|cell| {
            let o = run_cell(cell);
            recorder.close_group();
            o
        })
    };
    let outcomes = if backend == BackendName::InProcess {
        let b = recorder.capture(rpcrdma_verbs::InProcess);
        run(&|cell| run_cell(&b, cell))
    } else {
        let b = recorder.capture(rpcrdma_verbs::Tcp);
        run(&|cell| run_cell(&b, cell))
    };
    let sent = recorder.finish();
    let written = interop_tests::pcap::write_capture(BufWriter::new(file), &sent).and_then(|p| p.into_inner().flush());
    if let Err(e) = written {
        eprintln!("interop-tests pcap: writing {path}: {e}");
        return ExitCode::FAILURE;
    }
    summary(backend, &outcomes, &format!("; {} messages written to {path}", sent.len()))
}

/// Runs every cell on `backend`, with a progress line on stderr.
fn run_all<B: Backend + Clone>(backend: &B) -> Vec<Outcome> {
    run_each(|cell| run_cell(backend, cell))
}

/// Runs every cell with `run`. On a terminal, one progress line on stderr, rewritten in
/// place (`\r`) after each cell; elsewhere (a log, a pipe) nothing per cell: the table and
/// the summary say it all, and a log is not filled with carriage returns.
fn run_each(run: impl Fn(Cell) -> Outcome) -> Vec<Outcome> {
    let cells = all_cells();
    let progress = std::io::stderr().is_terminal();
    let mut out = Vec::with_capacity(cells.len());
    for (i, cell) in cells.into_iter().enumerate() {
        let o = run(cell);
        if progress {
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
        }
        out.push(o);
    }
    if progress {
        eprintln!();
    }
    out
}
