//! The build-script entry points ([`build_script`], [`Build::run`],
//! [`spec_to_rust`]) on a spec without extensions: optional errata, the
//! output file's name, and diagnostics at the spec text's own lines.

use std::path::PathBuf;

use xdr_spec::pipeline::{build_script, spec_to_rust, Build, PipelineError};

#[path = "support/files.rs"]
mod files;
use files::write;

/// A directory of this test's own.
fn scratch(test: &str) -> PathBuf {
    files::scratch("build-script", test)
}

/// A spec whose XDR (RFC 8166 §5.1's `///` lines) starts after some prose.
const SPEC: &str = "Internet-Draft                 Example\n\n1.  Introduction\n\n   Prose.\n\n4.  XDR\n\n   \
                    /// struct good { uint32 a; };\n   /// struct bad { uint32 b; undefined_t c; };\n";

/// An erratum that puts three lines before the extracted XDR.
const ERRATA: &str = "erratum: integer-typedefs\nlocation: section 4\nreason: uint32 is used but never defined.\n\
                      prepend:\n| /* From the errata: */\n| typedef unsigned int uint32;\n| typedef unsigned hyper uint64;\n";

#[test]
fn an_error_after_prepended_errata_lines_is_at_its_spec_line() {
    let dir = scratch("errata-lines");
    let spec = write(&dir, "spec.txt", SPEC);
    let errata = write(&dir, "spec.errata", ERRATA);
    // Line 10 of the spec text, whatever the errata put before the XDR.
    let (line, column) = SPEC
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("undefined_t").map(|c| (i + 1, c + 1)))
        .expect("the error's place");
    assert_eq!(line, 10);
    let expected = format!("{}:{line}:{column}: error: undefined name `undefined_t`", spec.display());
    let out = dir.join("out");
    std::fs::create_dir_all(&out).expect("out dir");
    for result in [
        build_script(&spec, Some(&errata), false, &out).map(|_| ()),
        spec_to_rust(&spec, Some(&errata), false).map(|_| ()),
    ] {
        match result {
            Err(PipelineError::Check(diags)) => {
                assert!(diags.iter().any(|d| d.starts_with(&expected)), "want {expected} in {diags:#?}")
            }
            other => panic!("expected checker errors, got {other:?}"),
        }
    }
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}

#[test]
fn errata_are_optional_and_the_output_file_is_named_by_the_caller() {
    let dir = scratch("out-file");
    let spec = write(&dir, "spec.txt", "4.  XDR\n\n   /// struct point { int x; int y; };\n");
    build_script(&spec, None, false, &dir).expect("build_script without errata");
    assert!(std::fs::read_to_string(dir.join("generated.rs")).expect("generated.rs").contains("pub struct Point"));
    assert!(dir.join("generated.x").exists() && dir.join("report.txt").exists());

    let errata = write(&dir, "spec.errata", "# No errata.\n");
    let out = Build::new(&spec).errata(&errata).out(&dir).out_file("types.rs").run().expect("run");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("an output file");
    assert_eq!(read("types.rs"), out.rust);
    assert_eq!(read("types.x"), out.base.xdr);
    assert_eq!(read("types.report.txt"), out.report());
    std::fs::remove_dir_all(&dir).expect("remove scratch");
}
