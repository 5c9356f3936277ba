//! Extension documents compiled with a base specification
//! ([`xdr_spec::pipeline::Build`]): names of the base resolve in an
//! extension, the extension's types live in their own module, and every
//! diagnostic about an extension names the extension's own file, line and
//! column, errata or not.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/files.rs"]
mod files;
#[path = "support/rustc.rs"]
mod rustc_support;
use files::write;
use rustc_support::compile_with_rt;

use xdr_spec::pipeline::{build_script, spec_to_rust, Build, PipelineError};

const V2: &str = "specs/draft-cel-nfsv4-rpcrdma-version-two-00.txt";
const V2_ERRATA: &str = "specs/draft-cel-nfsv4-rpcrdma-version-two-00.errata";
const V1: &str = "specs/rfc5666bis-draft-rpcrdma-v1.txt";
const V1_ERRATA: &str = "specs/rfc5666bis-draft-rpcrdma-v1.errata";
const SAMPLE: &str = "xdr-spec/tests/fixtures/sample-extension.txt";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The Version Two draft as rpcrdma-v2's build script compiles it.
fn v2() -> Build {
    Build::new(repo(V2)).errata(repo(V2_ERRATA)).repair(true)
}

/// A directory of this test's own.
fn scratch(test: &str) -> PathBuf {
    files::scratch("ext", test)
}

/// The 1-based `(line, column)` of the first `needle` in `text`, so that the
/// expected positions are found in the text rather than counted by hand.
fn position(text: &str, needle: &str) -> (usize, usize) {
    text.lines()
        .enumerate()
        .find_map(|(i, l)| l.find(needle).map(|c| (i + 1, c + 1)))
        .unwrap_or_else(|| panic!("`{needle}` not in the text"))
}

/// The rendered diagnostics of a failed check.
fn check_errors(result: Result<impl std::fmt::Debug, PipelineError>) -> Vec<String> {
    match result {
        Err(PipelineError::Check(diags)) => diags,
        other => panic!("expected checker errors, got {other:?}"),
    }
}

/// An RFC-style extension text: a heading, then `xdr` with every line
/// prefixed `   /// `. The XDR's first line is the text's line 3.
fn extension_text(xdr: &str) -> String {
    let body: String = xdr.lines().map(|l| format!("   /// {l}\n")).collect();
    format!("2.  Extension XDR\n\n{body}")
}

#[test]
fn an_extension_using_base_types_and_constants_compiles_into_its_own_module() {
    let out = v2().extension(repo(SAMPLE), None).generate().expect("the sample extension compiles");
    let module = &out.rust[out.rust.find("pub mod sample_extension {\n").expect("the module")..];
    assert!(module.contains("pub struct SampleSegments<'a>"));
    assert!(module.contains("pub sample_targets: xdr_spec_rt::Seq<'a, Rpcrdma2Segment>"), "a base struct, resolved");
    assert!(module.contains("pub const SAMPLE_PROC: u32 = 5;"), "a base enumerator as a constant's value");
    assert!(module.contains("pub const SAMPLE_ERR: u32 = 3;"));
    assert!(module.contains("(sample-extension.txt section 2.2, line"), "documentation cites the extension text");
    assert!(!out.rust[..out.rust.len() - module.len()].contains("Sample"), "nothing of the extension at top level");
    assert_eq!(out.extensions.len(), 1);
    assert_eq!(out.extensions[0].module, "sample_extension");
    assert!(out.extensions[0].xdr.xdr.contains("struct sample_segments {"));

    // The generated file, with a program that uses the extension's types and
    // the base's: it must build and run.
    let program = format!(
        "#![allow(warnings)]\n{}\n{}",
        out.rust,
        r#"
use xdr_spec_rt::Xdr;
const _: () = assert!(sample_extension::SAMPLE_PROC == RDMA_OPTIONAL as u32);
fn main() {
    let bytes: Vec<u8> = [5u32, sample_extension::SAMPLE_OPTTYPE, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
    let (reply, used) = sample_extension::SampleReply::decode(&bytes).unwrap();
    assert_eq!(used, 12);
    match reply {
        sample_extension::SampleReply::RdmaOptional(o) => assert_eq!(o.rdma_opttype, 0x53),
        other => panic!("{other:?}"),
    }
    assert_eq!(reply.to_vec().unwrap(), bytes);
    let info = sample_extension::SampleInfo::SampleError(Rpcrdma2Errcode::RdmaErrInvalOption);
    assert_eq!(info.to_vec().unwrap(), [0, 0, 0, 2, 0, 0, 0, 3]);
    println!("extension ok");
}
"#
    );
    let dir = scratch("compiles");
    let src = write(&dir, "main.rs", &program);
    let built = compile_with_rt(&src, "bin", "ext_program", &dir.join("ext_program"), false);
    assert!(built.status.success(), "the generated module does not build:\n{}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(dir.join("ext_program")).output().expect("run the program");
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "extension ok\n");
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

#[test]
fn the_base_output_is_unchanged_by_an_extension() {
    let alone = v2().generate().expect("the base alone");
    let extended = v2().extension(repo(SAMPLE), None).generate().expect("with the extension");
    let base_len = extended.rust.find("/// The types of the extension document").expect("the module's doc");
    // The base's items, to the byte, then a blank line and the module.
    assert_eq!(&extended.rust[..base_len], format!("{}\n", alone.rust), "the base's items, then the module");
    assert_eq!(extended.base.xdr, alone.base.xdr);
}

#[test]
fn no_extension_writes_what_spec_to_rust_generates() {
    for (spec, errata, repair) in [(V2, V2_ERRATA, true), (V1, V1_ERRATA, false)] {
        let reference = spec_to_rust(&repo(spec), Some(&repo(errata)), repair).expect("the single-spec pipeline");
        let dir = scratch(&format!("alone-{repair}"));
        build_script(&repo(spec), Some(&repo(errata)), repair, &dir).expect("build_script");
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("an output file");
        assert_eq!(read("generated.rs"), reference.rust, "{spec}");
        assert_eq!(read("generated.x"), reference.xdr.xdr, "{spec}");
        let report: String = reference.xdr.report.iter().chain(&reference.notes).map(|l| format!("{l}\n")).collect();
        assert_eq!(read("report.txt"), report, "{spec}");
        assert_eq!(std::fs::read_dir(&dir).expect("read out dir").count(), 3, "no other file");
        std::fs::remove_dir_all(&dir).expect("remove scratch");
    }
}

#[test]
fn run_writes_the_rust_and_each_documents_xdr() {
    let dir = scratch("run");
    let out = v2().extension_as("sample", repo(SAMPLE), None).out(&dir).run().expect("run");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("an output file");
    assert_eq!(read("generated.rs"), out.rust);
    assert!(out.rust.contains("pub mod sample {"));
    assert_eq!(read("generated.x"), out.base.xdr);
    assert!(read("generated.sample.x").starts_with("const SAMPLE_OPTTYPE = 0x53;"));
    assert_eq!(read("report.txt"), out.report());
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

#[test]
fn an_extension_redefining_a_base_name_is_an_error_at_the_extensions_line_and_column() {
    let dir = scratch("redefine");
    let text = extension_text("/* mine */\nstruct rpcrdma2_segment {\n        uint32 handle;\n};");
    let ext = write(&dir, "redefine.txt", &text);
    let diags = check_errors(v2().extension(&ext, None).generate());
    let (line, column) = position(&text, "rpcrdma2_segment");
    let expected = format!(
        "{}:{line}:{column}: error: duplicate name `rpcrdma2_segment` (already defined as a struct)",
        ext.display()
    );
    assert!(diags.contains(&expected), "{diags:#?}");
    // The note names the base's own line (section 4.2 of the draft) too.
    let base = std::fs::read_to_string(repo(V2)).expect("the draft");
    let (base_line, base_column) = position(&base, "struct rpcrdma2_segment {");
    let note = format!(
        "{}:{base_line}:{}: note: `rpcrdma2_segment` is first defined here",
        repo(V2).display(),
        base_column + 7
    );
    assert!(diags.contains(&note), "{diags:#?}");
}

#[test]
fn an_undefined_name_in_an_extension_is_reported_at_the_extensions_line_and_column() {
    let dir = scratch("undefined");
    let text = extension_text("struct uses_base {\n        uint32 ok;\n        rpcrdma2_segmnt typo;\n};");
    let ext = write(&dir, "undefined.txt", &text);
    let diags = check_errors(v2().extension(&ext, None).generate());
    let (line, column) = position(&text, "rpcrdma2_segmnt");
    let prefix = format!("{}:{line}:{column}: error: undefined name `rpcrdma2_segmnt`", ext.display());
    assert!(diags.iter().any(|d| d.starts_with(&prefix)), "{diags:#?}");
}

#[test]
fn an_extension_does_not_see_another_extensions_names() {
    let dir = scratch("isolated");
    let first = write(&dir, "first.txt", &extension_text("struct first_thing { uint32 a; };"));
    let text = extension_text("struct second_thing { first_thing inner; };");
    let second = write(&dir, "second.txt", &text);
    let diags = check_errors(v2().extension(&first, None).extension(&second, None).generate());
    let (line, column) = position(&text, "first_thing");
    let prefix = format!("{}:{line}:{column}: error: undefined name `first_thing`", second.display());
    assert!(diags.iter().any(|d| d.starts_with(&prefix)), "{diags:#?}");
}

#[test]
fn two_extensions_defining_one_name_collide_at_both_locations() {
    let dir = scratch("collide");
    let a_text = extension_text("const A_ONLY = 1;\nstruct shared { uint32 a; };");
    let b_text = extension_text("/* b */\n\nstruct shared { uint64 b; };");
    let a = write(&dir, "a.txt", &a_text);
    let b = write(&dir, "b.txt", &b_text);
    let diags = check_errors(v2().extension(&a, None).extension(&b, None).generate());
    let (a_line, a_column) = position(&a_text, "shared");
    let (b_line, b_column) = position(&b_text, "shared");
    assert_ne!(a_line, b_line, "the two definitions are on different lines");
    let error =
        format!("{}:{b_line}:{b_column}: error: duplicate name `shared` (already defined as a struct)", b.display());
    let note = format!("{}:{a_line}:{a_column}: note: `shared` is first defined here", a.display());
    assert!(diags.contains(&error), "{diags:#?}");
    assert!(diags.contains(&note), "{diags:#?}");
}

#[test]
fn errata_on_an_extension_shift_none_of_its_lines() {
    let dir = scratch("errata");
    let text = extension_text(
        "struct fixed_up {\n        wrong_name a;\n        missing_type b;\n};\nstruct s { wrong_name x; missing_too y; };",
    );
    let ext = write(&dir, "ext.txt", &text);
    let errata = write(
        &dir,
        "ext.errata",
        "erratum: local-typedef\nlocation: section 2\nreason: a test\nprepend:\n| typedef unsigned int local_u32;\n| \
         typedef unsigned hyper local_u64;\n\nerratum: rename\nlocation: section 2\nreason: a test\nreplace-identifier: \
         wrong_name local_u32\nexpect-count: 2\n",
    );
    let diags = check_errors(v2().extension(&ext, Some(&errata)).generate());
    // Two lines prepended by the extension's errata (and two by the base's):
    // the error is still at the extension text's own line and column.
    let (line, column) = position(&text, "missing_type");
    let expected = format!("{}:{line}:{column}: error: undefined name `missing_type`", ext.display());
    assert!(diags.iter().any(|d| d.starts_with(&expected)), "{diags:#?}");
    // After a replacement on the same line, the XDR's columns are not the
    // text's: the line is named, no column is made up.
    let (line, _) = position(&text, "missing_too");
    let expected = format!("{}:{line}: error: undefined name `missing_too`", ext.display());
    assert!(diags.iter().any(|d| d.starts_with(&expected)), "{diags:#?}");
}

#[test]
fn a_name_an_extensions_erratum_adds_is_reported_at_the_errata_files_line() {
    let dir = scratch("errata-line");
    let ext = write(&dir, "ext.txt", &extension_text("struct s { local_t a; };"));
    let errata_text =
        "# a comment\nerratum: e\nlocation: 2\nreason: a test\nprepend:\n| typedef undefined_t local_t;\n";
    let errata = write(&dir, "ext.errata", errata_text);
    let diags = check_errors(v2().extension(&ext, Some(&errata)).generate());
    let (line, column) = position(errata_text, "undefined_t");
    let expected = format!("{}:{line}:{column}: error: undefined name `undefined_t`", errata.display());
    assert!(diags.iter().any(|d| d.starts_with(&expected)), "{diags:#?}");
}

#[test]
fn a_syntax_error_in_an_extension_is_reported_in_its_file() {
    let dir = scratch("syntax");
    let text = extension_text("struct ok { uint32 a; };\nstruct broken { uint32 a }");
    let ext = write(&dir, "broken.txt", &text);
    match v2().extension(&ext, None).generate() {
        Err(PipelineError::ParseAt { at, .. }) => {
            assert_eq!(at.path, ext);
            assert_eq!(at.line, position(&text, "broken").0);
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn a_base_constant_bounds_an_extensions_array_and_the_module_is_named_after_the_file() {
    let dir = scratch("constant");
    let base = write(&dir, "base.txt", "4.  XDR\n\n   /// const RPCRDMA2_MAX_OPTS = 4;\n");
    let ext_text =
        extension_text("const EXT_MAX = RPCRDMA2_MAX_OPTS;\nstruct opts { unsigned int ids<RPCRDMA2_MAX_OPTS>; };");
    let ext = write(&dir, "my-ext.v1.txt", &ext_text);
    let out = Build::new(&base).extension(&ext, None).generate().expect("compiles");
    let module = &out.rust[out.rust.find("pub mod my_ext_v1 {").expect("module named after the file")..];
    assert!(module.contains("pub const EXT_MAX: u32 = 4;"), "{module}");
    assert!(module.contains("Some(4)"), "the bound is the base's constant: {module}");
}

#[test]
fn a_module_name_that_is_no_identifier_or_is_used_twice_is_refused() {
    let sample = repo(SAMPLE);
    for bad in ["Sample", "type", "9lives", "a-b", "_"] {
        match v2().extension_as(bad, &sample, None).generate() {
            Err(PipelineError::Config(m)) => assert!(m.contains(&format!("`{bad}`")), "{m}"),
            other => panic!("{bad}: expected a configuration error, got {other:?}"),
        }
    }
    match v2().extension(&sample, None).extension(&sample, None).generate() {
        Err(PipelineError::Config(m)) => assert!(m.contains("module `sample_extension`"), "{m}"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

#[test]
fn the_cli_compiles_an_extension_with_spec_and_reports_its_lines_with_check() {
    let xdr_spec = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_xdr-spec")).args(args).current_dir(repo("")).output().expect("run xdr-spec")
    };
    let out = xdr_spec(&["spec", V2, "--errata", V2_ERRATA, "--repair", "--extension", SAMPLE]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rust = String::from_utf8_lossy(&out.stdout);
    assert!(rust.contains("pub mod sample_extension {\n") && rust.contains("use super::*;"));

    let dir = scratch("cli");
    let base = write(&dir, "base.x", "typedef unsigned int u32;\nstruct point { u32 x; u32 y; };\n");
    let ext_text = "struct line {\n  point a;\n  pointt b;\n};\n";
    let ext = write(&dir, "ext.x", ext_text);
    let arg = format!("geometry={}", ext.display());
    let base_arg = base.display().to_string();
    let out = xdr_spec(&["check", &base_arg, "--extension", &arg]);
    assert!(!out.status.success());
    let (line, column) = position(ext_text, "pointt");
    let expected = format!("{}:{line}:{column}: error: undefined name `pointt`", ext.display());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&expected), "{}", String::from_utf8_lossy(&out.stderr));

    let fixed = write(
        &dir,
        "ext.errata",
        "erratum: t\nlocation: 1\nreason: typo\nreplace-identifier: pointt point\nexpect-count: 1\n",
    );
    let arg = format!("geometry={}:{}", ext.display(), fixed.display());
    let out = xdr_spec(&["gen", &base_arg, "--extension", &arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pub mod geometry {"));
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}
