//! Generates this crate's protocol types from the specification text in
//! `specs/`: extract the XDR, apply the errata file
//! beside the spec, check, and generate Rust into OUT_DIR. No generated type
//! is written by hand; editing the spec or its errata regenerates them.

use std::path::{Path, PathBuf};

const SPEC: &str = "rfc5666bis-draft-rpcrdma-v1.txt";
const ERRATA: &str = "rfc5666bis-draft-rpcrdma-v1.errata";
const REPAIR: bool = false;

fn main() {
    // Relative to the package (a build script runs there): the report the
    // crate embeds (GENERATION_REPORT) cites `specs/FILE:LINE:COLUMN`, not
    // the path of the machine that built it. `specs/` holds links to the
    // workspace's `specs/`, so that the published package carries its texts.
    let specs = Path::new("specs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if let Err(e) = xdr_spec::pipeline::build_script(&specs.join(SPEC), Some(&specs.join(ERRATA)), REPAIR, &out) {
        panic!("generating types from {SPEC} failed:\n{e}");
    }
}
