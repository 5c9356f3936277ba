//! Compiling generated code in a test: the rustc that runs the test, and the
//! `xdr_spec_rt` library (the runtime generated code names) it was linked
//! with. Shared by the tests that type-check or run generated Rust (included
//! with `#[path]`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The directory of the `xdr_spec_rt` rlib this test was linked with and its
/// dependencies (`target/debug/deps`), and the rlib itself: the newest, as
/// the one cargo just built for this test.
fn xdr_spec_rt_rlib() -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().expect("test executable");
    let deps = exe.parent().expect("deps directory").to_path_buf();
    let rlib = std::fs::read_dir(&deps)
        .expect("read deps")
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("libxdr_spec_rt-") && n.ends_with(".rlib")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .expect("libxdr_spec_rt-*.rlib next to the test executable")
        .path();
    (deps, rlib)
}

/// The rustc of the toolchain that runs this test (next to its cargo), or
/// the one on the PATH.
fn rustc() -> PathBuf {
    let beside_cargo = std::env::var_os("CARGO").map(|c| Path::new(&c).with_file_name("rustc"));
    beside_cargo.filter(|p| p.exists()).unwrap_or_else(|| PathBuf::from("rustc"))
}

/// Runs [`rustc`] on `src`, a crate `name` of type `crate_type` (`lib`, `bin`) that may name
/// `xdr_spec_rt` (the one this test was linked with), writing `out`: with `metadata_only`,
/// type-checked only (`--emit=metadata`, `out` an `.rmeta`), else built.
pub fn compile_with_rt(src: &Path, crate_type: &str, name: &str, out: &Path, metadata_only: bool) -> Output {
    let (deps, rlib) = xdr_spec_rt_rlib();
    let mut rustc = Command::new(rustc());
    rustc.args(["--edition", "2021", "--crate-type", crate_type, "--crate-name", name]);
    if metadata_only {
        rustc.arg("--emit=metadata");
    }
    rustc
        .arg("-o")
        .arg(out)
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg("--extern")
        .arg(format!("xdr_spec_rt={}", rlib.display()))
        .arg(src)
        .output()
        .expect("run rustc")
}
