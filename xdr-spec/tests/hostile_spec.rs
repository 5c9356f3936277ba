//! Hostile spec text: inputs built to break the pipeline rather than to
//! describe a protocol. One test (or more) per rule; each names it.

use xdr_spec::ast::{line_col, LineIndex};

/// The obvious definition, to compare the index with: count the newlines
/// before `offset`, and the bytes since the last of them.
fn naive_line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source.as_bytes()[..offset.min(source.len())];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let col = 1 + before.len() - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    (line, col)
}

// ---- rule: gen is linear in the number of definitions --------------------------

#[test]
fn line_index_agrees_with_a_scan_at_every_offset() {
    // Empty lines, a leading and a trailing newline, CRLF, a multi-byte
    // character (columns count bytes), no final newline.
    let texts =
        ["", "\n", "a", "ab\ncd", "\n\nx\n", "a\r\nb\r\n\r\nc", "é\nü x\n", "const A = 1;\n\nstruct s { int x; };"];
    for text in texts {
        let index = LineIndex::new(text);
        for offset in 0..=text.len() + 2 {
            let want = naive_line_col(text, offset);
            assert_eq!(index.line_col(offset), want, "{text:?} at {offset}");
            assert_eq!(line_col(text, offset), want, "{text:?} at {offset}");
        }
    }
}

#[test]
fn line_index_on_many_lines() {
    // Lines of every length from 0 to 199: the binary search must land on the
    // right one wherever it starts.
    let text: String = (0..200).map(|n| format!("{}\n", "x".repeat(n))).collect();
    let index = LineIndex::new(&text);
    for offset in (0..=text.len()).step_by(7) {
        assert_eq!(index.line_col(offset), naive_line_col(&text, offset), "at {offset}");
    }
    assert_eq!(index.line_col(text.len()), (201, 1));
}

// ---- rule: a constant too large for 64 bits says what range is accepted --------

#[test]
fn constant_past_64_bits_names_the_accepted_range() {
    for (src, col) in [
        ("const BIG = 9223372036854775808;", 13),
        ("const BIG = 0x8000000000000000;", 13),
        ("const BIG = 01000000000000000000000;", 13),
        ("typedef int a[\n  -99999999999999999999];", 4),
    ] {
        let e = xdr_spec::parse::parse(src).expect_err(src);
        assert_eq!((e.line, e.column), (src.lines().count(), col), "{src}: {e}");
        assert!(
            e.message
                .starts_with("expected an integer constant from -2147483648 to 4294967295 (XDR constants are 32-bit"),
            "{src}: {e}"
        );
    }
    // The largest that parses is still refused by the checker, which says why.
    let spec = xdr_spec::parse::parse("const BIG = 9223372036854775807;").unwrap();
    let diags = xdr_spec::check::check(&spec);
    assert_eq!(
        diags[0].message,
        "constant `BIG` = 9223372036854775807 does not fit in 32 bits (an int or an unsigned int)"
    );
}

// ---- rule: invalid UTF-8 is reported at the line and column of its first byte --

#[test]
fn invalid_utf8_names_line_and_column() {
    let e = xdr_spec::ast::source_text(b"const A = 1;\n\nstruct s { int \xc3\x28; };").unwrap_err();
    assert_eq!((e.line, e.column, e.offset, e.byte), (3, 16, 29, 0xc3));
    assert_eq!(e.to_string(), "3:16: invalid UTF-8 (byte 0xc3): a specification must be UTF-8 text");
    // Through the pipeline, as build scripts read a spec.
    let dir = std::env::temp_dir().join(format!("xdr-spec-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.txt");
    std::fs::write(&path, b"/// const A = 1;\n///  \xff\n").unwrap();
    let err = xdr_spec::pipeline::spec_to_xdr(&path, None, false).unwrap_err();
    assert!(
        err.to_string().ends_with("bad.txt:2:6: invalid UTF-8 (byte 0xff): a specification must be UTF-8 text"),
        "{err}"
    );
    // And through the CLI.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xdr-spec")).arg("check").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.txt:2:6: invalid UTF-8 (byte 0xff)"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- rule: a long identifier is cut short in every message ---------------------

#[test]
fn megabyte_identifier_is_not_echoed_whole() {
    let name = format!("x{}", "y".repeat(1 << 20));
    let src = format!("struct s {{\n  {name} a;\n}};\nconst {name} = 1;\nconst {name} = 2;\n");
    let spec = xdr_spec::parse::parse(&src).unwrap();
    let diags = xdr_spec::check::check(&spec);
    let shown = format!("{}... ({} bytes)", &name[..64], name.len());
    let rendered: Vec<String> = diags.iter().map(|d| d.render("t.x", &src)).collect();
    assert_eq!(
        rendered,
        [
            format!("t.x:2:3: error: `{shown}` is a constant, not a type"),
            format!("t.x:4:7: note: `{shown}` is first defined here"),
            format!("t.x:5:7: error: duplicate name `{shown}` (already defined as a constant)"),
        ]
    );
    // The generator's refusals are cut the same way.
    let src = format!("typedef int t[{name}];");
    let spec = xdr_spec::parse::parse(&src).unwrap();
    let e = xdr_spec::gen::generate(&spec, &src, &Default::default()).unwrap_err();
    assert_eq!(e.to_string(), format!("1:15: `{shown}` is not a constant"));
}

// ---- rule: a procedure repeated in a later version is one constant -------------

#[test]
fn procedure_repeated_in_a_later_version_is_generated_once() {
    // rpcbind repeats procedures across versions; the checker allows it (same
    // name, same number), and two `pub const X` would not compile (E0428).
    let src = "program P { version V1 { void X(void) = 1; } = 1; version V2 { void X(void) = 1; int Y(int) = 2; } = 2; } = 9;";
    let spec = xdr_spec::parse::parse(src).unwrap();
    assert!(!xdr_spec::check::has_errors(&xdr_spec::check::check(&spec)));
    let rust = xdr_spec::gen::generate(&spec, src, &Default::default()).unwrap();
    assert_eq!(rust.matches("pub const X: u32 = 1;").count(), 1, "{rust}");
    assert_eq!(rust.matches("pub const Y: u32 = 2;").count(), 1, "{rust}");
}

// ---- rule: a list entry holding a float derives no Eq ---------------------------

#[test]
fn list_entry_with_a_float_does_not_derive_eq() {
    // `f64` is not `Eq`: the entry struct derived it anyway, and did not
    // compile (E0277), as the property test in generated_compiles.rs found.
    let src = "struct l { int a; double b; l *next; };";
    let spec = xdr_spec::parse::parse(src).unwrap();
    let rust = xdr_spec::gen::generate(&spec, src, &Default::default()).unwrap();
    let entry = rust.find("pub struct LEntry").expect("an entry struct");
    let derive = &rust[rust[..entry].rfind("#[derive").unwrap()..entry];
    assert_eq!(derive.trim(), "#[derive(Debug, Clone, Copy, PartialEq)]", "{rust}");
}
