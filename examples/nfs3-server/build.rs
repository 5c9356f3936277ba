//! Generates the NFSv3 and MOUNTv3 types (RFC 1813) from the XDR in
//! `specs/nfs3-mount3.txt` into OUT_DIR (`generated.rs`), as the protocol crates do
//! with their specifications: no generated type is written by hand. With them, NFSv3's
//! Upper-Layer Binding (RFC 8267), from `specs/nfs3-mount3.binding` (`xdr::nfs_v3::Binding`).

use std::path::{Path, PathBuf};

const SPEC: &str = "nfs3-mount3.txt";
const BINDING: &str = "nfs3-mount3.binding";

fn main() {
    let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../specs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if let Err(e) = xdr_spec::pipeline::Build::new(specs.join(SPEC)).binding(specs.join(BINDING)).out(out).run() {
        panic!("generating the NFSv3/MOUNTv3 types from {SPEC} failed:\n{e}");
    }
}
