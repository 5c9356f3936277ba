//! Generates this crate's protocol types from the specification text in
//! `specs/`: extract the XDR (repairing the degraded rendering), apply the errata file
//! beside the spec, check, and generate Rust into OUT_DIR. No generated type
//! is written by hand; editing the spec or its errata regenerates them.

use std::path::{Path, PathBuf};

const SPEC: &str = "draft-cel-nfsv4-rpcrdma-version-two-00.txt";
const ERRATA: &str = "draft-cel-nfsv4-rpcrdma-version-two-00.errata";
const REPAIR: bool = true;

fn main() {
    let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let spec = specs.join(SPEC);
    let errata = specs.join(ERRATA);
    println!("cargo:rerun-if-changed={}", spec.display());
    println!("cargo:rerun-if-changed={}", errata.display());
    let out = match xdr_spec::pipeline::spec_to_rust(&spec, Some(&errata), REPAIR) {
        Ok(out) => out,
        Err(e) => {
            eprintln!("{e}");
            panic!("generating types from {SPEC} failed:\n{e}");
        }
    };
    let dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(dir.join("generated.rs"), &out.rust).expect("write generated.rs");
    std::fs::write(dir.join("generated.x"), &out.xdr.xdr).expect("write generated.x");
    let report: String = out.xdr.report.iter().chain(&out.notes).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("report.txt"), report).expect("write report.txt");
}
