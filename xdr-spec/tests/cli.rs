//! The `xdr-spec` binary, end to end on the real spec documents.

use std::process::{Command, Output};

fn xdr_spec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xdr-spec"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("run xdr-spec")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn extract_prints_the_v1_xdr() {
    let out = xdr_spec(&["extract", "specs/rfc5666bis-draft-rpcrdma-v1.txt"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let xdr = text(&out.stdout);
    assert!(xdr.contains("struct xdr_rdma_segment {"));
    assert!(xdr.contains("union rdma_body switch (rdma_proc proc) {"));
    assert!(out.stderr.is_empty(), "no repairs expected: {}", text(&out.stderr));
}

#[test]
fn extract_repair_reports_every_repair_with_its_line() {
    let out = xdr_spec(&["extract", "specs/draft-cel-nfsv4-rpcrdma-version-two-00.txt", "--repair"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stderr);
    assert!(report.contains("draft-cel-nfsv4-rpcrdma-version-two-00.txt:270: repaired: restored a lost underscore"));
    assert!(text(&out.stdout).contains("RDMA_OPTIONAL = 5"));
}

#[test]
fn extract_without_xdr_fails_clearly() {
    let out = xdr_spec(&["extract", "specs/rfc8166-part1.txt"]);
    assert!(!out.status.success());
    assert!(!text(&out.stderr).is_empty());
}

#[test]
fn check_names_the_undefined_type_and_suggests_the_errata_fix() {
    let dir = std::env::temp_dir().join(format!("xdr-spec-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x = dir.join("v2.x");
    let out = xdr_spec(&["extract", "specs/draft-cel-nfsv4-rpcrdma-version-two-00.txt", "--repair"]);
    std::fs::write(&x, format!("typedef unsigned int uint32;\ntypedef unsigned hyper uint64;\n{}", text(&out.stdout)))
        .unwrap();
    let x = x.to_str().unwrap();
    let checked = xdr_spec(&["check", x]);
    assert_eq!(checked.status.code(), Some(1));
    let diags = text(&checked.stderr);
    assert!(
        diags.contains("error: undefined name `rpcrdma2_chunks` (did you mean `rpcrdma2_chunk_lists`?)"),
        "{diags}"
    );
    assert!(diags.lines().any(|l| l.starts_with(&format!("{x}:")) && l.contains(":11: error")), "{diags}");

    // With the errata file the v2 XDR checks clean (the typedefs are then
    // added twice, so start from the bare extraction).
    let bare = dir.join("v2-bare.x");
    std::fs::write(&bare, text(&out.stdout)).unwrap();
    let fixed =
        xdr_spec(&["check", bare.to_str().unwrap(), "--errata", "specs/draft-cel-nfsv4-rpcrdma-version-two-00.errata"]);
    assert!(fixed.status.success(), "{}", text(&fixed.stderr));
    let gen =
        xdr_spec(&["gen", bare.to_str().unwrap(), "--errata", "specs/draft-cel-nfsv4-rpcrdma-version-two-00.errata"]);
    assert!(gen.status.success(), "{}", text(&gen.stderr));
    assert!(text(&gen.stdout).contains("pub struct Rpcrdma2XprtHdr<'a>"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn spec_runs_the_whole_pipeline() {
    let out = xdr_spec(&[
        "spec",
        "specs/rfc5666bis-draft-rpcrdma-v1.txt",
        "--errata",
        "specs/rfc5666bis-draft-rpcrdma-v1.errata",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rust = text(&out.stdout);
    assert!(rust.contains("pub struct RdmaMsg<'a>"));
    assert!(rust.contains("section 5.1.2"), "rustdoc names the spec section");
}

#[test]
fn bad_usage_exits_2() {
    assert_eq!(xdr_spec(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(xdr_spec(&[]).status.code(), Some(2));
}

#[test]
fn help_goes_to_stdout_and_exits_0() {
    for flag in ["--help", "-h"] {
        let out = xdr_spec(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", text(&out.stderr));
        let usage = text(&out.stdout);
        for needle in ["extract SPEC", "check FILE.x", "--extension", "exit status"] {
            assert!(usage.contains(needle), "{flag}: no {needle:?} in {usage}");
        }
        assert!(out.stderr.is_empty());
    }
}

#[test]
fn version_names_the_package_version() {
    let out = xdr_spec(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).trim(), format!("xdr-spec {}", env!("CARGO_PKG_VERSION")));
}

/// Usage errors exit 2 and name what is wrong; a file that cannot be read is a failure (1).
#[test]
fn usage_errors_name_the_argument_and_exit_2() {
    let cases: [(&[&str], &str); 6] = [
        (&["check", "x.x", "--frobnicate"], "--frobnicate"),
        (&["frobnicate", "x.x"], "frobnicate"),
        (&["check"], "missing"),
        (&["gen", "x.x", "--errata"], "--errata"),
        (&["check", "a.x", "b.x"], "b.x"),
        (&["extract", "x.txt", "--extension", "e.x"], "--extension"),
    ];
    for (args, named) in cases {
        let out = xdr_spec(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(named), "{args:?}: {named:?} not in {}", text(&out.stderr));
    }
    let missing = xdr_spec(&["check", "no/such/file.x"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("no/such/file.x"), "{}", text(&missing.stderr));
}

/// The v2 draft's text is damaged: without `--repair` every declaration comes out empty,
/// and the CLI says to try `--repair`.
#[test]
fn extract_suggests_repair_when_every_declaration_is_empty() {
    let out = xdr_spec(&["extract", "specs/draft-cel-nfsv4-rpcrdma-version-two-00.txt"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("struct rpcrdma2_segment {"));
    assert!(text(&out.stderr).contains("try --repair"), "{}", text(&out.stderr));
}
