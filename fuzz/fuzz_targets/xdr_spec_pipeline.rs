//! Arbitrary bytes through the whole xdr-spec pipeline: extract (with and
//! without repair), then parse, check and generate, as the CLI and build
//! scripts run them, on the extracted XDR and on the bytes taken as XDR
//! directly. Never a panic; every error that concerns a place in the text
//! names a line (and a column, where the text is XDR).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;
use xdr_spec::ast::{source_text, LineIndex};
use xdr_spec::check::{check, has_errors};
use xdr_spec::extract::{extract, ExtractError, ExtractOptions};

/// Parse, check and generate `xdr`, asserting that every failure has a
/// position inside the text.
fn xdr_pipeline(xdr: &str) {
    let lines = xdr.lines().count().max(1);
    let spec = match xdr_spec::parse::parse(xdr) {
        Ok(spec) => spec,
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines + 1 && e.column >= 1, "parse error out of the text: {e}");
            return;
        }
    };
    let diags = check(&spec);
    let index = LineIndex::new(xdr);
    for d in &diags {
        assert!(d.span.offset <= xdr.len(), "diagnostic past the end: {d:?}");
        let (line, column) = index.line_col(d.span.offset);
        assert!(line >= 1 && column >= 1);
    }
    if has_errors(&diags) {
        return;
    }
    // What the checker accepts, the generator must generate.
    if let Err(e) = xdr_spec::gen::generate(&spec, xdr, &Default::default()) {
        panic!("check accepted what gen refuses: {e}");
    }
}

fuzz_target!(|data: &[u8]| {
    let text = match source_text(data) {
        Ok(text) => text,
        Err(e) => {
            // Invalid UTF-8 is reported where it is.
            assert_eq!(e.byte, data[e.offset]);
            assert!(e.line >= 1 && e.column >= 1);
            return;
        }
    };
    for repair in [false, true] {
        match extract(text, &ExtractOptions::new().repair(repair)) {
            Ok(x) => {
                assert_eq!(x.origins.len(), x.xdr.lines().count(), "one origin per line");
                for r in &x.repairs {
                    assert!(r.spec_line >= 1 && r.spec_line <= text.lines().count().max(1), "{r:?}");
                }
                xdr_pipeline(&x.xdr);
            }
            Err(ExtractError::NoXdr) => {}
            Err(ExtractError::UnjustifiedRepair { line, .. }) => {
                assert!(line >= 1 && line <= text.lines().count().max(1), "repair error at line {line}");
            }
            Err(e) => panic!("an extraction error this target does not know: {e}"),
        }
    }
    // The bytes as XDR themselves (a `.x` file), which is what most of the
    // seeds are.
    xdr_pipeline(text);
});
