//! The errata files in `specs/`, and the errata format's rules.

use xdr_spec::errata::{parse, Action, Errata, ErrataError};
use xdr_spec::extract::{extract, ExtractOptions};

const V1: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/rfc5666bis-draft-rpcrdma-v1.txt"));
const V2: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/draft-cel-nfsv4-rpcrdma-version-two-00.txt"));
const V1_ERRATA: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/rfc5666bis-draft-rpcrdma-v1.errata"));
const V2_ERRATA: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/draft-cel-nfsv4-rpcrdma-version-two-00.errata"));
const RFC8166_PART1_ERRATA: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/rfc8166-part1.errata"));
const RFC8797_ERRATA: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/rfc8797-cm-private-data.errata"));

const TYPEDEFS: &str = "typedef unsigned int uint32;\ntypedef unsigned hyper uint64;";

/// Whole-word occurrences of an identifier.
fn count_word(text: &str, word: &str) -> usize {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| *w == word).count()
}

fn repaired_v2() -> String {
    extract(V2, &ExtractOptions::new().repair(true)).unwrap().xdr
}

#[test]
fn errata_files_parse() {
    let v2 = parse(V2_ERRATA).unwrap();
    assert_eq!(v2.errata.len(), 2);
    assert_eq!(v2.errata[0].id, "v2-undefined-chunks");
    assert!(v2.errata[0].location.contains("section 4.2") && v2.errata[0].location.contains("277 and 281"));
    assert!(v2.errata[0].reason.contains("never defines"));
    assert_eq!(
        v2.errata[0].action,
        Action::ReplaceIdentifier {
            old: "rpcrdma2_chunks".into(),
            new: "rpcrdma2_chunk_lists".into(),
            expect_count: 2
        }
    );
    assert_eq!(v2.errata[1].action, Action::Prepend { xdr: TYPEDEFS.into() });
    // Continuation lines are joined with single spaces.
    assert!(v2.errata[1].reason.contains("32- and 64-bit unsigned integers"));

    let v1 = parse(V1_ERRATA).unwrap();
    assert_eq!(v1.errata.len(), 1);
    assert!(v1.errata[0].location.contains("section 5.1.2"));
    assert_eq!(v1.errata[0].action, Action::Prepend { xdr: TYPEDEFS.into() });

    for text in [RFC8166_PART1_ERRATA, RFC8797_ERRATA] {
        assert!(text.contains("no XDR"));
        assert_eq!(parse(text).unwrap(), Errata::default());
    }
}

#[test]
fn v2_errata_apply_to_the_repaired_xdr() {
    let xdr = repaired_v2();
    let lines = xdr.lines().count();
    let errata = parse(V2_ERRATA).unwrap();
    let (fixed, applied, prepended) = errata.apply_with_offset(&xdr).unwrap();
    assert_eq!(count_word(&fixed, "rpcrdma2_chunks"), 0);
    // The struct, and the two arms of union rpcrdma2_body.
    assert_eq!(count_word(&fixed, "rpcrdma2_chunk_lists"), 3);
    assert!(fixed.contains("        case RDMA_MSG:\n          rpcrdma2_chunk_lists rdma_chunks;\n"));
    assert_eq!(prepended, 2);
    assert!(fixed.starts_with(&format!("{TYPEDEFS}\n/*\n")));
    assert_eq!(fixed.lines().count(), lines + prepended);
    // Replacements keep every line where it was: origins stay right.
    for (i, line) in xdr.lines().enumerate() {
        let after = fixed.lines().nth(i + prepended).unwrap();
        assert_eq!(after, line.replace("rpcrdma2_chunks", "rpcrdma2_chunk_lists"));
    }
    assert_eq!(applied.len(), 2);
    assert_eq!(applied[0].id, "v2-undefined-chunks");
    assert!(applied[0]
        .summary
        .starts_with("replaced rpcrdma2_chunks with rpcrdma2_chunk_lists (2 occurrences): the body union uses"));
    assert!(applied[1].summary.starts_with(
        "prepended 2 lines (typedef unsigned int uint32; typedef unsigned hyper uint64;): the XDR uses uint32"
    ));
    // `apply` is the same without the offset.
    assert_eq!(errata.apply(&xdr).unwrap(), (fixed, applied));
}

#[test]
fn v2_errata_do_not_fit_the_unrepaired_xdr() {
    // Without repair the union's arms are lost, so the erratum finds none of
    // the occurrences it expects: a stale erratum fails loudly.
    let xdr = extract(V2, &ExtractOptions::new().repair(false)).unwrap().xdr;
    let err = parse(V2_ERRATA).unwrap().apply(&xdr).unwrap_err();
    assert_eq!(
        err,
        ErrataError::CountMismatch {
            id: "v2-undefined-chunks".into(),
            old: "rpcrdma2_chunks".into(),
            expected: 2,
            found: 0
        }
    );
    assert!(err.to_string().contains("expected 2 occurrence(s) of `rpcrdma2_chunks` in the XDR, found 0"));
}

#[test]
fn v1_errata_apply() {
    let xdr = extract(V1, &ExtractOptions::default()).unwrap().xdr;
    let (fixed, applied, prepended) = parse(V1_ERRATA).unwrap().apply_with_offset(&xdr).unwrap();
    assert_eq!(prepended, 2);
    assert_eq!(fixed, format!("{TYPEDEFS}\n{xdr}"));
    assert_eq!(applied[0].id, "v1-integer-typedefs");
}

const ONE: &str = "\
erratum: e
location: 1
reason: r
replace-identifier: foo bar
expect-count: 2
";

#[test]
fn expect_count_mismatch_is_an_error() {
    let errata = parse(ONE).unwrap();
    assert!(errata.apply("struct foo { foo x; };").is_ok());
    for (xdr, found) in [("struct foo { int x; };", 1), ("foo foo foo", 3), ("", 0)] {
        let err = errata.apply(xdr).unwrap_err();
        assert!(matches!(err, ErrataError::CountMismatch { expected: 2, found: f, .. } if f == found), "{err}");
    }
    // Only whole identifiers in code count: not `foobar`, `foo_x`, nor a
    // comment that mentions foo.
    let (fixed, _) = errata.apply("foo foobar foo_x /* foo */ foo;").unwrap();
    assert_eq!(fixed, "bar foobar foo_x /* foo */ bar;");
}

#[test]
fn prepends_go_first_in_file_order() {
    let text = "\
erratum: a
location: l
reason: r
prepend:
| const A = 1;
|
|     /* indented */

erratum: b
location: l
reason: r
prepend:
| const B = 2;
";
    let (xdr, applied, n) = parse(text).unwrap().apply_with_offset("struct s { int x; };\n").unwrap();
    assert_eq!(xdr, "const A = 1;\n\n    /* indented */\nconst B = 2;\nstruct s { int x; };\n");
    assert_eq!(n, 4);
    assert_eq!(applied.len(), 2);
}

#[test]
fn parse_errors_carry_line_numbers() {
    let cases: &[(&str, usize, &str)] = &[
        ("location: x\n", 1, "before the first `erratum:`"),
        ("# c\nerratum: a\nlocation: l\nbogus: y\n", 4, "unknown key `bogus:`"),
        ("erratum: a\nlocation: l\nlocation: m\n", 3, "a second `location:`"),
        ("erratum: a\nno colon here\n", 2, "expected `KEY: VALUE`"),
        ("erratum: a b\n", 1, "not an erratum id"),
        ("erratum: a\nlocation: l\nreason: r\nprepend:\n| x;\n\nerratum: a\n", 7, "already used on line 1"),
        ("erratum: a\nreplace-identifier: foo\n", 2, "takes OLD NEW"),
        ("erratum: a\nreplace-identifier: foo 9bar\n", 2, "not an XDR identifier"),
        ("erratum: a\nexpect-count: two\n", 2, "takes a number"),
        ("erratum: a\nprepend: x\n", 2, "takes no value"),
        ("| x;\n", 1, "outside a `prepend:`, `replace-text:` or `with:` block"),
        ("erratum: a\nlocation: l\n\n  more\n", 4, "follows no `location:` or `reason:`"),
        ("  more\n", 1, "outside an erratum"),
        ("erratum: a\nreason:\n", 2, "is empty"),
    ];
    for (text, line, needle) in cases {
        match parse(text) {
            Err(ErrataError::Syntax { line: l, message }) => {
                assert_eq!(l, *line, "{text:?}: {message}");
                assert!(message.contains(needle), "{text:?}: {message}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    let err = parse("erratum: x\nbogus: y\n").unwrap_err();
    assert!(err.to_string().starts_with("line 2: "), "{err}");
}

#[test]
fn incomplete_errata_name_their_line() {
    let cases: &[(&str, usize, &str)] = &[
        ("erratum: a\nreason: r\nprepend:\n| x;\n", 1, "no `location:`"),
        ("erratum: a\nlocation: l\nprepend:\n| x;\n", 1, "no `reason:`"),
        ("\nerratum: a\nlocation: l\nreason: r\n", 2, "no action"),
        ("erratum: a\nlocation: l\nreason: r\nreplace-identifier: a b\n", 1, "needs `expect-count:`"),
        ("erratum: a\nlocation: l\nreason: r\nexpect-count: 1\n", 1, "without a replacement"),
        ("erratum: a\nlocation: l\nreason: r\nreplace-text: a b;\nexpect-count: 1\n", 1, "needs `with:`"),
        ("erratum: a\nlocation: l\nreason: r\nwith: b a;\nexpect-count: 1\n", 1, "without `replace-text:`"),
        ("erratum: a\nlocation: l\nreason: r\nreplace-text: a b;\nwith: b a;\n", 1, "needs `expect-count:`"),
        ("erratum: a\nlocation: l\nreason: r\nprepend:\n", 1, "not followed by any `|` line"),
        (
            "erratum: a\nlocation: l\nreason: r\nreplace-identifier: a b\nexpect-count: 1\nprepend:\n| x;\n",
            1,
            "more than one action",
        ),
        ("erratum: a\nlocation: l\nreason: r\nprepend:\n| x;\nerratum: b\nlocation: l\n", 6, "no `reason:`"),
    ];
    for (text, line, needle) in cases {
        match parse(text) {
            Err(ErrataError::Incomplete { line: l, message, .. }) => {
                assert_eq!(l, *line, "{text:?}: {message}");
                assert!(message.contains(needle), "{text:?}: {message}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

/// The repaired, corrected v2 XDR compiles with rpcgen, the reference XDR
/// compiler (skipped where rpcgen is not installed).
#[test]
fn repaired_v2_with_errata_compiles_with_rpcgen() {
    let rpcgen = std::path::Path::new("/usr/bin/rpcgen");
    if !rpcgen.exists() {
        eprintln!("skipped: no /usr/bin/rpcgen");
        return;
    }
    let (xdr, _) = parse(V2_ERRATA).unwrap().apply(&repaired_v2()).unwrap();
    let dir = std::env::temp_dir().join(format!("xdr-spec-errata-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rpcrdma_v2.x");
    std::fs::write(&file, &xdr).unwrap();
    let out = std::process::Command::new(rpcgen).arg("-h").arg(&file).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "rpcgen: {}", String::from_utf8_lossy(&out.stderr));
    let header = String::from_utf8_lossy(&out.stdout);
    assert!(header.contains("struct rpcrdma2_xprt_hdr {"));
    assert!(header.contains("RDMA_OPTIONAL = 5"));
}

/// Issue 27: draft-ietf-nfsv4-rpcrdma-version-two-07's XDR with its errata compiles with
/// rpcgen, the reference XDR compiler; as published it does not (the backwards typedef makes
/// `uint32` an alias of an undefined type). Skipped, saying so, where rpcgen is missing;
/// under `CI=true` that fails instead.
#[test]
fn draft_07_with_errata_compiles_with_rpcgen() {
    let rpcgen = std::path::Path::new("/usr/bin/rpcgen");
    if !rpcgen.exists() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and no /usr/bin/rpcgen");
        eprintln!("SKIP: no /usr/bin/rpcgen");
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/");
    let text = std::fs::read_to_string(format!("{dir}draft-ietf-nfsv4-rpcrdma-version-two-07.txt")).unwrap();
    let errata = std::fs::read_to_string(format!("{dir}draft-ietf-nfsv4-rpcrdma-version-two-07.errata")).unwrap();
    let published = extract(&text, &ExtractOptions::new().repair(false)).unwrap().xdr;
    let (fixed, _) = parse(&errata).unwrap().apply(&published).unwrap();
    let tmp = std::env::temp_dir().join(format!("xdr-spec-draft07-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let compile = |name: &str, xdr: &str| {
        let file = tmp.join(name);
        std::fs::write(&file, xdr).unwrap();
        std::process::Command::new(rpcgen).arg("-h").arg(&file).output().unwrap()
    };
    let (fixed_h, published_h) = (compile("fixed.x", &fixed), compile("published.x", &published));
    assert!(fixed_h.status.success(), "rpcgen: {}", String::from_utf8_lossy(&fixed_h.stderr));
    let header = String::from_utf8_lossy(&fixed_h.stdout).to_string();
    assert!(header.contains("typedef uint32 rpcrdma2_propid;"), "{header}");
    assert!(header.contains("struct rpcrdma2_hdr_call_inline {"), "{header}");
    // rpcgen does not check: it takes the published text too. The C it makes of it is what
    // fails, compiled against libtirpc's headers: the published text's C does not compile
    // (uint32 an alias of an undefined type, a union with two members of one name), the
    // corrected text's does.
    let tirpc = std::path::Path::new("/usr/include/tirpc/rpc/rpc.h");
    let gcc = std::path::Path::new("/usr/bin/gcc");
    if !(tirpc.exists() && gcc.exists()) {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and no gcc or libtirpc-dev");
        eprintln!("SKIP: the C check needs /usr/bin/gcc and libtirpc-dev");
        let _ = std::fs::remove_dir_all(&tmp);
        return;
    }
    let c_compiles = |name: &str, header: &[u8]| {
        std::fs::write(tmp.join(format!("{name}.h")), header).unwrap();
        let c = tmp.join(format!("{name}.c"));
        std::fs::write(&c, format!("#include <rpc/rpc.h>\n#include \"{name}.h\"\n")).unwrap();
        let out =
            std::process::Command::new(gcc).args(["-fsyntax-only", "-I/usr/include/tirpc"]).arg(&c).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (fixed_ok, fixed_err) = c_compiles("fixed", header.as_bytes());
    let (published_ok, published_err) = c_compiles("published", &published_h.stdout);
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(fixed_ok, "the corrected XDR's C: {fixed_err}");
    assert!(!published_ok, "the published XDR's C compiled");
    assert!(published_err.contains("duplicate member") && published_err.contains("uint32"), "{published_err}");
}
