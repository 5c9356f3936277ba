//! Generates this crate's protocol types from the specification text in
//! `specs/`: extract the XDR (repairing the degraded rendering), apply the errata file
//! beside the spec, check, and generate Rust into OUT_DIR. No generated type
//! is written by hand; editing the spec or its errata regenerates them.
//!
//! The transport-properties extension (`specs/rpcrdma2-transport-properties.txt`, an
//! RFC-style document with its own `///` XDR that uses the draft's types) is compiled with
//! the draft into one checked namespace; its types land in `xdr::properties`.

use std::path::{Path, PathBuf};

const SPEC: &str = "draft-cel-nfsv4-rpcrdma-version-two-00.txt";
const ERRATA: &str = "draft-cel-nfsv4-rpcrdma-version-two-00.errata";
const REPAIR: bool = true;
const PROPERTIES: &str = "rpcrdma2-transport-properties.txt";
/// The working group's last revision of Version Two (issue 27): its own types, in
/// `rpcrdma_v2::draft07`. Its `///` lines need no repair.
const DRAFT_07: &str = "draft-ietf-nfsv4-rpcrdma-version-two-07.txt";
const DRAFT_07_ERRATA: &str = "draft-ietf-nfsv4-rpcrdma-version-two-07.errata";
/// An extension of -07 (its Appendix B): two header types, a transport property and an error
/// code, compiled with -07 into one checked namespace; its types land in
/// `draft07::xdr::ping`.
const PING: &str = "rpcrdma2-ping.txt";

fn main() {
    // Relative to the package (a build script runs there): the report the
    // crate embeds (GENERATION_REPORT) cites `specs/FILE:LINE:COLUMN`, not
    // the path of the machine that built it. `specs/` holds links to the
    // workspace's `specs/`, so that the published package carries its texts.
    let specs = Path::new("specs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let build = xdr_spec::pipeline::Build::new(specs.join(SPEC))
        .errata(specs.join(ERRATA))
        .repair(REPAIR)
        .extension_as("properties", specs.join(PROPERTIES), None)
        .out(out);
    if let Err(e) = build.run() {
        panic!("generating types from {SPEC} and {PROPERTIES} failed:\n{e}");
    }
    let draft07 = xdr_spec::pipeline::Build::new(specs.join(DRAFT_07))
        .errata(specs.join(DRAFT_07_ERRATA))
        .extension_as("ping", specs.join(PING), None)
        .out_file("draft07.rs")
        .out(PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")));
    if let Err(e) = draft07.run() {
        panic!("generating types from {DRAFT_07} and {PING} failed:\n{e}");
    }
}
