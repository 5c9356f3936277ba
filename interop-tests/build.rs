//! Build script of interop-tests.
//!
//! 1. Obtains the RPC-over-RDMA Version One XDR from the spec text
//!    (`../specs/rfc5666bis-draft-rpcrdma-v1.txt`, with its errata) through
//!    our extractor, `xdr_spec::pipeline::spec_to_xdr`, and writes it to
//!    `$OUT_DIR/rpcrdma_v1.x` (what was applied: `rpcrdma_v1.report`);
//!    `interop_tests::V1_XDR` includes it, and the rpcgen oracle is built from
//!    that same text at test time.
//! 2. With feature `peer-xdrgen` only, generates the benchmark/differential PEER from it with
//!    xdrgen 0.4.4 into `$OUT_DIR/peer_xdrgen.rs`, which `src/peer_xdrgen.rs` includes.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

const SPEC: &str = "../specs/rfc5666bis-draft-rpcrdma-v1.txt";
const ERRATA: &str = "../specs/rfc5666bis-draft-rpcrdma-v1.errata";

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let spec = manifest.join(SPEC);
    let errata = manifest.join(ERRATA);
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={SPEC}");
    println!("cargo:rerun-if-changed={ERRATA}");

    let xdr = v1_xdr(&spec, &errata);
    let xdr_path = out.join("rpcrdma_v1.x");
    fs::write(&xdr_path, &xdr).unwrap_or_else(|e| panic!("writing {}: {e}", xdr_path.display()));
    #[cfg(feature = "peer-xdrgen")]
    generate_peer(&xdr, &xdr_path, &out);
}

/// The PEER: xdrgen 0.4.4's code for the v1 XDR, in `$OUT_DIR/peer_xdrgen.rs`.
#[cfg(feature = "peer-xdrgen")]
fn generate_peer(xdr: &str, xdr_path: &Path, out: &Path) {
    let mut generated = Vec::new();
    if let Err(e) = xdrgen::generate("rpcrdma_v1.x", xdr.as_bytes(), &mut generated) {
        panic!("xdrgen 0.4.4 rejected {}: {e}", xdr_path.display());
    }
    let generated = String::from_utf8(generated).expect("xdrgen wrote UTF-8");
    // xdrgen treats `//` as a comment and stops silently at what it does not
    // understand, so an extraction that left the `///` markers in would yield
    // an empty module.  Insist on the types the peer helpers use.
    for needle in ["pub struct rdma_msg", "pub enum rdma_body", "pub struct xdr_write_chunk"] {
        assert!(
            generated.contains(needle),
            "xdrgen output from {} lacks `{needle}`: was the XDR extracted correctly?",
            xdr_path.display()
        );
    }
    let rs = out.join("peer_xdrgen.rs");
    fs::write(&rs, generated).unwrap_or_else(|e| panic!("writing {}: {e}", rs.display()));
}

/// The v1 XDR, as our extractor produces it: extracted from the spec text by
/// the spec's own `///` convention, then the errata applied (they prepend the
/// `uint32`/`uint64` typedefs rpcgen and xdrgen need).
fn v1_xdr(spec: &Path, errata: &Path) -> String {
    let got = xdr_spec::pipeline::spec_to_xdr(spec, Some(errata), false)
        .unwrap_or_else(|e| panic!("extracting the v1 XDR from {}: {e}", spec.display()));
    // Every repair and erratum applied, beside the XDR (no build warnings).
    let report = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join("rpcrdma_v1.report");
    let mut text = got.report.join("\n");
    text.push('\n');
    fs::write(&report, text).unwrap_or_else(|e| panic!("writing {}: {e}", report.display()));
    got.xdr
}
