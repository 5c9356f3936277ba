//! The `interop-tests` binary's command line: help, version, usage errors (exit 2, naming the
//! argument at fault), `decode -` from stdin, `pcap` failing on a bad path before any cell
//! runs, and `--json` output that parses.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn interop_tests(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_interop-tests")).args(args).output().expect("run interop-tests")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_goes_to_stdout_and_exits_0() {
    for flag in ["--help", "-h"] {
        let out = interop_tests(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", text(&out.stderr));
        let usage = text(&out.stdout);
        for needle in ["--backend", "--addr", "decode -", "pcap FILE", "exit status"] {
            assert!(usage.contains(needle), "{flag}: no {needle:?} in {usage}");
        }
        assert!(out.stderr.is_empty());
    }
}

#[test]
fn version_names_the_package_version() {
    let out = interop_tests(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).trim(), format!("interop-tests {}", env!("CARGO_PKG_VERSION")));
}

/// Usage errors exit 2, name what is wrong, and run nothing.
#[test]
fn usage_errors_name_the_argument_and_exit_2() {
    let cases: [(&[&str], &str); 8] = [
        (&["--frobnicate"], "--frobnicate"),
        (&["--backend"], "--backend"),
        (&["--backend", "carrier-pigeon"], "carrier-pigeon"),
        (&["frobnicate"], "frobnicate"),
        (&["decode"], "missing HEX"),
        (&["decode", "0g"], "not hex"),
        (&["pcap"], "missing FILE"),
        (&["--addr", "10.0.2.15"], "--addr"),
    ];
    for (args, named) in cases {
        let out = interop_tests(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(named), "{args:?}: {named:?} not in {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{args:?} printed {}", text(&out.stdout));
    }
}

#[test]
fn decode_dash_reads_the_hex_from_stdin() {
    let hex = "00000007 00000001 00000020 00000000\n00000000 00000000 00000000 00000007\n";
    let mut child = Command::new(env!("CARGO_BIN_EXE_interop-tests"))
        .args(["decode", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run interop-tests");
    child.stdin.take().unwrap().write_all(hex.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("decode prints JSON");
    assert_eq!((report["xid"].as_u64(), report["credit"].as_u64()), (Some(7), Some(32)));
    assert_eq!(report["verdict"]["action"], "accept");
    // The same bytes as arguments give the same report.
    let args = interop_tests(&["decode", hex.trim()]);
    assert_eq!(args.stdout, out.stdout);
}

/// The output file is created before the matrix runs: a bad path fails at once, not after
/// every cell has run.
#[test]
fn pcap_to_an_unwritable_path_fails_before_any_cell() {
    let path = concat!(env!("CARGO_TARGET_TMPDIR"), "/no-such-dir/matrix.pcap");
    let start = Instant::now();
    let out = interop_tests(&["pcap", path]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    // One line: the error, naming the file and the cause. No cell ran, so no summary.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(path) && stderr.contains("No such file"), "{stderr}");
    assert!(!stderr.contains("interop matrix on"), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
}

/// `--json` is one object: the backend, the counts, and every cell; no progress lines go to
/// a stderr that is not a terminal.
#[test]
fn json_output_parses_and_carries_the_summary() {
    let out = interop_tests(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(v["backend"], "inproc");
    assert_eq!((v["passed"].as_u64(), v["failed"].as_u64()), (Some(616), Some(0)));
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 616);
    assert!(cells.iter().all(|c| c["ok"] == true && c["verdict"] == "ok" && c["time_ms"].is_f64()));
    let stderr = text(&out.stderr);
    assert!(!stderr.contains('\r'), "progress lines on a pipe: {stderr:?}");
    assert_eq!(stderr.trim(), "interop matrix on inproc: 616 passed, 0 failed");
}
