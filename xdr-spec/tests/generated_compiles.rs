//! Property: whatever specification `check` accepts, the generated Rust
//! compiles; whatever it rejects, every diagnostic has a line and column.
//!
//! The specifications are small and random (a fixed seed, so every run tries
//! the same ones), with names chosen to collide after case conversion, to be
//! Rust keywords and prelude names, and to clash with the names the
//! generator derives (`...Entry`, inline bodies named after parent and
//! field). The accepted ones are generated into one crate, one `mod` each,
//! and type-checked by a single `rustc --emit=metadata` run against the
//! `xdr_spec_rt` library this test was linked with. `SEED=N` in the environment
//! tries other specifications.

use std::fmt::Write as _;

#[path = "support/rustc.rs"]
mod rustc_support;
use rustc_support::compile_with_rt;

use xdr_spec::ast::LineIndex;
use xdr_spec::check::{check, has_errors};

/// How many specifications to try; enough that a few dozen are accepted,
/// few enough that rustc takes seconds.
const SPECS: usize = 600;

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// Names meant to collide: case-convention twins, Rust keywords (strict,
/// reserved, and the four that cannot be raw), prelude names, names the
/// generator derives, and the generated code's own locals.
const HOSTILE: &[&str] = &[
    "foo_bar",
    "FooBar",
    "fooBar",
    "FOO_BAR",
    "Foo_bar",
    "foo",
    "FOO",
    "Foo",
    "Option",
    "Some",
    "None",
    "Ok",
    "Err",
    "Result",
    "Vec",
    "Box",
    "String",
    "Copy",
    "Clone",
    "Debug",
    "Hash",
    "Eq",
    "Sized",
    "Default",
    "Self",
    "self",
    "self_",
    "Self_",
    "super",
    "crate",
    "type",
    "match",
    "fn",
    "async",
    "try",
    "gen",
    "yield",
    "r",
    "w",
    "v",
    "d",
    "n",
    "lead",
    "run",
    "value",
    "discriminant",
    "node",
    "node_entry",
    "NodeEntry",
    "Entry",
    "a",
    "a_b",
    "AB",
    "x",
    "X",
    "_",
    "__",
    "_1",
    "x1",
    "X1",
    "Case1",
    "xdr_spec",
    "xdr_spec_rt",
    "rt",
    "List",
    "Seq",
    "Xdr",
    "Reader",
    "Writer",
    "MIN_LEN",
    "FIXED_LEN",
    "PLAIN",
    "BOUNDED",
];

struct SpecGen {
    rng: Rng,
    /// Type names defined so far in the current spec (to refer to).
    types: Vec<String>,
    /// Every name used so far in the current spec.
    used: Vec<String>,
    fresh: usize,
}

impl SpecGen {
    /// A name: often hostile, otherwise fresh and harmless, so that a good
    /// share of specifications is accepted.
    fn name(&mut self) -> String {
        let name = if self.rng.below(3) == 0 {
            self.rng.pick(HOSTILE).to_string()
        } else {
            self.fresh += 1;
            format!("n{}", self.fresh)
        };
        self.used.push(name.clone());
        name
    }

    /// A field name, where the hostile ones matter most within one struct.
    fn field(&mut self) -> String {
        if self.rng.below(2) == 0 {
            self.rng.pick(HOSTILE).to_string()
        } else {
            self.fresh += 1;
            format!("f{}", self.fresh)
        }
    }

    fn type_spec(&mut self, depth: usize) -> String {
        match self.rng.below(9) {
            0 => "int".into(),
            1 => "unsigned hyper".into(),
            2 => "bool".into(),
            3 => "double".into(),
            4 if depth < 2 => {
                let n = 1 + self.rng.below(2);
                let fields = self.fields(depth + 1, n);
                format!("struct {{ {fields}}}")
            }
            5 if !self.types.is_empty() => self.types[self.rng.below(self.types.len())].clone(),
            6 if !self.types.is_empty() => self.types[self.rng.below(self.types.len())].clone(),
            _ => "unsigned int".into(),
        }
    }

    /// One declaration of some shape, ending in `;`.
    fn decl(&mut self, depth: usize) -> String {
        let name = self.field();
        match self.rng.below(8) {
            0 => format!("opaque {name}[{}];", 1 + self.rng.below(8)),
            1 => format!("opaque {name}<>;"),
            2 => format!("string {name}<{}>;", 1 + self.rng.below(64)),
            3 => format!("{} {name}<{}>;", self.type_spec(depth), self.rng.below(4)),
            4 => format!("{} {name}[{}];", self.type_spec(depth), 1 + self.rng.below(3)),
            5 => format!("{} *{name};", self.type_spec(depth)),
            _ => format!("{} {name};", self.type_spec(depth)),
        }
    }

    fn fields(&mut self, depth: usize, n: usize) -> String {
        (0..n).map(|_| format!("{} ", self.decl(depth))).collect()
    }

    fn definition(&mut self) -> String {
        let name = self.name();
        let text = match self.rng.below(8) {
            0 => format!("const {name} = {};", self.rng.below(100)),
            1 => {
                let members: Vec<String> =
                    (0..1 + self.rng.below(3)).map(|i| format!("{} = {i}", self.name())).collect();
                format!("enum {name} {{ {} }};", members.join(", "))
            }
            2 => {
                let (a, b) = (self.decl(0), self.decl(0));
                let default =
                    if self.rng.below(2) == 0 { format!(" default: {}", self.decl(0)) } else { String::new() };
                format!("union {name} switch (int d) {{ case 1: {a} case 2: case 3: {b} case 4: void;{default} }};")
            }
            3 => {
                let decl = self.decl(0);
                // `typedef T x<N>;` and friends: the declaration names the type.
                let rest = decl.split_once(' ').map_or(decl.as_str(), |(_, r)| r);
                let field = rest.trim_start_matches('*');
                let field_name: String = field.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                format!("typedef {}", decl.replacen(&field_name, &name, 1))
            }
            4 => {
                let n = self.rng.below(3);
                let extra = self.fields(0, n);
                format!("struct {name} {{ int {}; {extra}{name} *next; }};", self.field())
            }
            5 if self.rng.below(3) == 0 => {
                let (v, p) = (self.name(), self.name());
                format!("program {name} {{ version {v} {{ void {p}(void) = 1; }} = 1; }} = {};", 100 + self.fresh)
            }
            _ => {
                let n = 1 + self.rng.below(3);
                format!("struct {name} {{ {}}};", self.fields(0, n))
            }
        };
        if text.starts_with("struct")
            || text.starts_with("union")
            || text.starts_with("enum")
            || text.starts_with("typedef")
        {
            self.types.push(name);
        }
        text
    }

    fn spec(&mut self) -> String {
        self.types.clear();
        self.used.clear();
        let n = 1 + self.rng.below(5);
        (0..n).map(|_| format!("{}\n", self.definition())).collect()
    }
}

#[test]
fn every_accepted_spec_compiles_and_every_rejection_has_a_position() {
    let mut g = SpecGen {
        rng: Rng(std::env::var("SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_1234_abcd_0001)),
        types: Vec::new(),
        used: Vec::new(),
        fresh: 0,
    };
    let mut krate = String::from("#![allow(warnings)]\n");
    let mut accepted = Vec::new();
    let mut rejected = 0;
    for i in 0..SPECS {
        let src = g.spec();
        let spec = match xdr_spec::parse::parse(&src) {
            Ok(spec) => spec,
            Err(e) => {
                assert!(e.line >= 1 && e.column >= 1, "parse error without a position: {e}\n{src}");
                rejected += 1;
                continue;
            }
        };
        let diags = check(&spec);
        let lines = LineIndex::new(&src);
        for d in &diags {
            assert!(d.span.offset <= src.len(), "diagnostic past the end: {d:?}\n{src}");
            let rendered = d.render_indexed("t.x", &lines);
            let pos: Vec<&str> = rendered.splitn(4, ':').collect();
            assert!(
                pos.len() == 4 && pos[1].parse::<usize>().is_ok() && pos[2].parse::<usize>().is_ok(),
                "no line:col in {rendered}"
            );
        }
        if has_errors(&diags) {
            rejected += 1;
            continue;
        }
        let rust = xdr_spec::gen::generate(&spec, &src, &Default::default())
            .unwrap_or_else(|e| panic!("check accepted what gen refuses: {e}\n{src}"));
        let _ = write!(krate, "/// spec {i}\npub mod m{i} {{\n{rust}\n}}\n");
        accepted.push((i, src));
    }
    eprintln!("{} specs accepted and compiled, {rejected} rejected", accepted.len());
    // Both sides must be exercised for the property to mean anything.
    assert!(accepted.len() >= SPECS / 5, "only {} of {SPECS} specs accepted", accepted.len());
    assert!(rejected >= SPECS / 5, "only {rejected} of {SPECS} specs rejected");

    let dir = std::env::temp_dir().join(format!("xdr-spec-compile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let lib = dir.join("generated.rs");
    std::fs::write(&lib, &krate).expect("write crate");
    let out = compile_with_rt(&lib, "lib", "generated", &dir.join("libgenerated.rmeta"), true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // Name the specifications whose modules the errors are in.
        let mut culprits = Vec::new();
        for (i, src) in &accepted {
            if krate_module_has_error(&krate, &stderr, *i) {
                culprits.push(format!("spec {i}:\n{src}"));
            }
        }
        panic!("generated Rust does not compile:\n{}\n{}", culprits.join("\n"), &stderr[..stderr.len().min(20_000)]);
    }
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
}

/// Whether rustc's `stderr` reports an error on a line of module `m{i}` of
/// `krate`.
fn krate_module_has_error(krate: &str, stderr: &str, i: usize) -> bool {
    let lines: Vec<&str> = krate.lines().collect();
    let start = lines.iter().position(|l| *l == format!("pub mod m{i} {{")).unwrap_or(0) + 1;
    let end = lines[start..].iter().position(|l| l.starts_with("pub mod m")).map_or(lines.len(), |p| start + p);
    // `--> DIR/generated.rs:LINE:COL`, LINE 1-based; `start..end` 0-based.
    stderr.lines().filter_map(|l| l.trim_start().strip_prefix("--> ")).any(|loc| {
        let Some((_, at)) = loc.split_once("generated.rs:") else { return false };
        let line = at.split(':').next().and_then(|n| n.parse::<usize>().ok()).unwrap_or(0);
        (start + 1..=end).contains(&line)
    })
}
