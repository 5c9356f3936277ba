//! The Rust generated for the workspace's specifications (RPC-over-RDMA
//! Versions One and Two, NFSv3 with MOUNTv3, the CALC and KV examples with their typed
//! services, and the corpus's XDR files) as a person
//! reads it: formatted exactly as `rustfmt` formats it with its default
//! configuration, and with layout constants that are literals the generator
//! worked out and the compiler confirms.

use std::path::{Path, PathBuf};
use std::process::Command;

use xdr_spec::pipeline::Build;

#[path = "support/files.rs"]
mod files;
#[path = "support/rustc.rs"]
mod rustc_support;
use rustc_support::compile_with_rt;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Each specification as its crate's build script builds it, then the XDR
/// files of the corpus (every language feature): a name, and the build.
fn builds() -> Vec<(&'static str, Build)> {
    let corpus = ["arrays", "lists", "program", "scalars", "unions"]
        .map(|name| (name, Build::xdr(repo(&format!("xdr-spec/corpus/xdr/{name}.x")))));
    let specs = vec![
        (
            "v1",
            Build::new(repo("specs/rfc5666bis-draft-rpcrdma-v1.txt"))
                .errata(repo("specs/rfc5666bis-draft-rpcrdma-v1.errata")),
        ),
        (
            "v2",
            Build::new(repo("specs/draft-cel-nfsv4-rpcrdma-version-two-00.txt"))
                .errata(repo("specs/draft-cel-nfsv4-rpcrdma-version-two-00.errata"))
                .repair(true)
                .extension_as("properties", repo("specs/rpcrdma2-transport-properties.txt"), None),
        ),
        ("nfs3", Build::new(repo("specs/nfs3-mount3.txt"))),
        ("calc", Build::new(repo("examples/calc/calc.txt"))),
        // Typed services (`Build::services`): a module per program version.
        ("calc_services", Build::new(repo("examples/calc/calc.txt")).services(true)),
        ("kv_services", Build::xdr(repo("examples/kv/kv.x")).services(true)),
        ("program_services", Build::xdr(repo("xdr-spec/corpus/xdr/program.x")).services(true)),
    ];
    specs.into_iter().chain(corpus).collect()
}

/// The generated files pass `rustfmt --edition 2021 --check` with rustfmt's
/// default configuration: they are written where no `rustfmt.toml` applies
/// (a directory of the system's temporary one, outside the workspace, whose
/// own `rustfmt.toml` sets a width of 120). Skipped, saying so, where no
/// `rustfmt` is installed.
#[test]
fn generated_code_is_formatted_as_rustfmt_formats_it() {
    if Command::new("rustfmt").arg("--version").output().map_or(true, |o| !o.status.success()) {
        println!("SKIPPED: no `rustfmt` on the PATH, so the generated code's formatting is not checked here");
        return;
    }
    let dir = files::scratch("format", "rustfmt");
    assert!(!dir.starts_with(repo("")), "{} must be outside the workspace", dir.display());
    let mut failures = String::new();
    for (name, build) in builds() {
        let rust = build.generate().unwrap_or_else(|e| panic!("{name}: {e}")).rust;
        let file = files::write(&dir, &format!("{name}.rs"), &rust);
        assert!(rust.lines().all(|l| l.len() <= 100 || l.trim_start().starts_with("///")), "{name}: a line over 100");
        let out = Command::new("rustfmt")
            .args(["--edition", "2021", "--check"])
            .arg(&file)
            .current_dir(&dir)
            .output()
            .expect("run rustfmt");
        if !out.status.success() {
            failures.push_str(&format!(
                "{name}:\n{}{}\n",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "the generated code is not as rustfmt formats it:\n{failures}");
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

/// Every generated type's `MIN_LEN`, `FIXED_LEN`, `PLAIN` and `BOUNDED`
/// (literals the generator computed) equal what the runtime composes from
/// the constants of the type's parts (`fixed_add`, `min_len`, each part's
/// own `Xdr` constants): the generated code and its layout checks
/// (`GenOptions::layout_checks`) are compiled together, and a constant that
/// differs fails the compiler's evaluation of the checks.
#[test]
fn literal_layout_constants_equal_the_runtimes_composition() {
    let dir = files::scratch("format", "layout");
    let mut lib = String::from("#![allow(warnings)]\n");
    for (name, build) in builds() {
        let rust = build.layout_checks(true).generate().unwrap_or_else(|e| panic!("{name}: {e}")).rust;
        assert!(rust.contains("const fn check<'a>()"), "{name}: no layout checks generated");
        files::write(&dir, &format!("{name}.rs"), &rust);
        lib.push_str(&format!("pub mod {name} {{\n    include!(\"{name}.rs\");\n}}\n"));
    }
    let src = files::write(&dir, "lib.rs", &lib);
    let built = compile_with_rt(&src, "lib", "layouts", &dir.join("liblayouts.rmeta"), true);
    assert!(built.status.success(), "a layout constant is wrong:\n{}", String::from_utf8_lossy(&built.stderr));
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

/// The checks can fail: a spec's literal that differs from the composition
/// is refused by the compiler.
#[test]
fn a_wrong_layout_constant_fails_the_checks() {
    let dir = files::scratch("format", "wrong");
    let spec =
        files::write(&dir, "pair.x", "struct seg { unsigned int a; hyper b; };\nstruct pair { seg x; seg y; };\n");
    let rust = Build::xdr(&spec).layout_checks(true).generate().expect("generate").rust;
    assert!(rust.contains("const MIN_LEN: usize = 24;"), "{rust}");
    let wrong = rust.replace("const MIN_LEN: usize = 24;", "const MIN_LEN: usize = 20;");
    let src = files::write(&dir, "lib.rs", &format!("#![allow(warnings)]\n{wrong}"));
    let built = compile_with_rt(&src, "lib", "wrong", &dir.join("libwrong.rmeta"), true);
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(!built.status.success() && stderr.contains("Pair MIN_LEN"), "{stderr}");
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}
