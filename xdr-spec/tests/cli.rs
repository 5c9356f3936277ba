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
