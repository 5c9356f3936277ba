//! Rust from a checked XDR specification.
//!
//! What the generated code looks like, for each XDR construct:
//!
//! | XDR | Rust |
//! |---|---|
//! | `struct s {...}` | `pub struct S<'a> {...}` with snake_case fields, `Copy` |
//! | `enum e {...}` | `#[repr(i32)] pub enum E`, plus a `pub const` per enumerator |
//! | `union u switch (...)` | `pub enum U<'a>`, one variant per arm |
//! | `opaque x[N]` / `opaque x<N>` / `string x<N>` | `&'a [u8; N]` / `&'a [u8]` / `&'a str`, borrowed from the input |
//! | `T x[N]`, `T x<N>` | [`Seq<'a, T>`](crate::rt::Seq), validated once and decoded as iterated |
//! | `T *x` | `Option<T>` |
//! | `struct l { ...; l *next; }` used as `l *x` | [`List<'a, E>`](crate::rt::List), walked in a loop |
//! | `typedef` | a type alias, or a newtype where the typedef carries a bound |
//! | `const`, program numbers | `pub const` |
//!
//! Every type implements [`Xdr`](crate::rt::Xdr): `decode` borrows from a
//! `&[u8]` and never allocates, `encoded_len` is exact, and `encode` writes
//! into the caller's buffer after checking the specification's bounds.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::ast::*;
use crate::check::shorten_names;
use crate::symbols::{is_list_struct, list_link, Symbols};

/// What the generator needs to know beyond the specification.
#[derive(Debug, Clone, Default)]
pub struct GenOptions {
    /// The name used in documentation for the XDR source, e.g. a spec file.
    pub source_name: String,
    /// Per line of the XDR source (index 0 is line 1), where it came from in
    /// the specification, e.g. `"rfc5666bis-draft-rpcrdma-v1.txt section
    /// 5.1.2, line 518"`. Lines without an entry are cited as lines of
    /// `source_name`.
    pub line_origins: Vec<String>,
}

/// A construct the generator cannot turn into Rust.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct GenError {
    /// 1-based line in the XDR source.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Why.
    pub message: String,
}

/// Generate Rust for `spec`, parsed from `source`. The specification should
/// have passed [`check`](crate::check) first; what the generator cannot
/// express is still refused here with a [`GenError`].
///
/// ```
/// let src = "struct point { int x; int y; };";
/// let spec = xdr_spec::parse::parse(src).unwrap();
/// let rust = xdr_spec::gen::generate(&spec, src, &Default::default()).unwrap();
/// assert!(rust.contains("pub struct Point"));
/// ```
pub fn generate(spec: &Spec, source: &str, opts: &GenOptions) -> Result<String, GenError> {
    generate_with_modules(spec, source, opts, &[])
}

/// Definitions of a specification that [`generate_with_modules`] writes into
/// a module of their own: those of an extension document, compiled in one
/// namespace with the base specification they extend.
///
/// ```
/// use xdr_spec::gen::ModulePart;
/// let part = ModulePart { name: "ext".into(), doc: "An extension.".into(), first_definition: 2 };
/// # let _ = part;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModulePart {
    /// The module's name, a snake_case Rust identifier.
    pub name: String,
    /// The module's documentation, one line.
    pub doc: String,
    /// Index in [`Spec::definitions`] of the part's first definition; the
    /// part runs to the next part's first definition, or to the end.
    pub first_definition: usize,
}

/// As [`generate`], with the definitions from each part's
/// [`ModulePart::first_definition`] on written into `pub mod NAME { use
/// super::*; ... }` after the definitions before the first part, which stay
/// at the top level exactly as [`generate`] writes them alone.
///
/// The names are resolved in the whole specification, as the checker
/// resolved them; the glob import makes the earlier definitions' Rust names
/// resolve the same way inside a module. A part's definitions must refer only
/// to the top level and to themselves (as the pipeline checks for extension
/// documents): a module does not see another module's items.
///
/// The parts must be in ascending order of `first_definition`.
///
/// ```
/// use xdr_spec::gen::{generate_with_modules, ModulePart};
/// let src = "struct point { int x; int y; };\nstruct segment { point a; point b; };\n";
/// let spec = xdr_spec::parse::parse(src).unwrap();
/// let part = ModulePart { name: "shapes".into(), doc: "Shapes.".into(), first_definition: 1 };
/// let rust = generate_with_modules(&spec, src, &Default::default(), &[part]).unwrap();
/// let module = &rust[rust.find("pub mod shapes {").unwrap()..];
/// assert!(module.contains("use super::*;") && module.contains("pub struct Segment"));
/// assert!(!module.contains("pub struct Point"));
/// ```
pub fn generate_with_modules(
    spec: &Spec,
    source: &str,
    opts: &GenOptions,
    modules: &[ModulePart],
) -> Result<String, GenError> {
    let mut g = Gen {
        syms: Symbols::new(spec),
        lines: LineIndex::new(source),
        opts,
        out: String::new(),
        inline_names: HashMap::new(),
        items: Vec::new(),
        lifetime: HashSet::new(),
        float: HashSet::new(),
    };
    (g.items, g.inline_names) = collect(spec);
    g.infer();
    g.out.push_str("// @generated by xdr-spec. Do not edit: edit the specification or its errata and rebuild.\n\n");
    let ends = modules.iter().map(|m| m.first_definition).chain([spec.definitions.len()]);
    let starts = std::iter::once(0).chain(modules.iter().map(|m| m.first_definition));
    for (part, (start, end)) in starts.zip(ends).enumerate() {
        let module = part.checked_sub(1).map(|m| &modules[m]);
        if let Some(m) = module {
            let _ = write!(g.out, "/// {}\npub mod {} {{\n// The base's names, which an extension may use (none is required).\n#[allow(unused_imports)]\nuse super::*;\n\n", m.doc, m.name);
        }
        g.emit_part(spec, start..end)?;
        if module.is_some() {
            g.out.push_str("}\n\n");
        }
    }
    Ok(g.out)
}

/// A type to emit: a top-level definition or an inline body given a name.
struct Item<'s> {
    /// Index of the top-level definition it belongs to.
    def: usize,
    rust: String,
    xdr: String,
    span: Span,
    doc: &'s [String],
    kind: ItemKind<'s>,
}

enum ItemKind<'s> {
    Struct(&'s StructBody),
    /// An optional-data list struct: the fields that make up one entry.
    List(&'s StructBody),
    Enum(&'s EnumBody),
    Union(&'s UnionBody),
    Typedef(&'s Declaration),
}

/// How one declared value is typed, decoded, measured and encoded. The
/// expressions use `$v` for the value and `r`/`w` for the reader/writer.
struct Codec {
    ty: String,
    decode: String,
    len: String,
    encode: String,
    validate: Option<String>,
    min: String,
    fixed: String,
    plain: String,
    bounded: String,
}

struct Gen<'s> {
    syms: Symbols<'s>,
    /// Line starts of the XDR source, for diagnostics and the origin of each
    /// item (indexed once: see [`LineIndex`]).
    lines: LineIndex,
    opts: &'s GenOptions,
    out: String,
    /// Names given to inline bodies, by their address in the AST.
    inline_names: HashMap<usize, String>,
    items: Vec<Item<'s>>,
    /// Rust names of items that borrow from the input.
    lifetime: HashSet<String>,
    /// Rust names of items that hold a float (no `Eq`).
    float: HashSet<String>,
}

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn",
    "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static",
    "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do",
    "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// `xdr_rdma_segment` -> `XdrRdmaSegment`, `RDMA_MSG` -> `RdmaMsg`.
pub fn camel(name: &str) -> String {
    let mut out = String::new();
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()) {
        let upper_only = !part.chars().any(|c| c.is_ascii_lowercase());
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            let rest: String = chars.collect();
            out.push_str(&if upper_only { rest.to_ascii_lowercase() } else { rest });
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'X');
    }
    if out == "Self" {
        // `Self` cannot be an item's name, not even as a raw identifier; the
        // checker warns where this happens.
        out.push('_');
    }
    out
}

/// The names that [`camel`] and [`snake`] cannot write as they are, not even
/// as raw identifiers, and so write with a `_` appended: `Self` -> `Self_`,
/// `self` -> `self_`.
pub(crate) const UNRAWABLE: &[&str] = &["Self", "self", "super", "crate"];

/// `rdmaXid` -> `rdma_xid`; Rust keywords become raw identifiers.
pub fn snake(name: &str) -> String {
    let mut out = snake_case(name);
    if matches!(out.as_str(), "self" | "super" | "crate") {
        // These cannot be raw identifiers; the checker warns where this
        // happens.
        out.push('_');
    } else if RUST_KEYWORDS.contains(&out.as_str()) {
        out.insert_str(0, "r#");
    }
    out
}

/// The case conversion of [`snake`], before keywords are dealt with.
pub(crate) fn snake_case(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        }
    }
    out
}

fn screaming(name: &str) -> String {
    snake(name).trim_start_matches("r#").to_ascii_uppercase()
}

fn sub(template: &str, v: &str) -> String {
    template.replace("$v", v)
}

impl<'s> Gen<'s> {
    fn err(&self, span: Span, message: impl Into<String>) -> GenError {
        let (line, column) = self.lines.line_col(span.offset);
        GenError { line, column, message: shorten_names(message.into()) }
    }

    fn origin(&self, span: Span) -> String {
        let (line, _) = self.lines.line_col(span.offset);
        match self.opts.line_origins.get(line - 1) {
            Some(o) if !o.is_empty() => o.clone(),
            _ if self.opts.source_name.is_empty() => format!("line {line}"),
            _ => format!("{}, line {line}", self.opts.source_name),
        }
    }

    fn value(&self, v: &Value) -> Result<i64, GenError> {
        match v {
            Value::Literal { value, .. } => Ok(*value),
            Value::Named(id) => match id.name.as_str() {
                _ if self.syms.value_of_name(&id.name).is_some() => Ok(self.syms.value_of_name(&id.name).unwrap_or(0)),
                "TRUE" => Ok(1),
                "FALSE" => Ok(0),
                _ => Err(self.err(id.span, format!("`{}` is not a constant", id.name))),
            },
        }
    }

    fn bound(&self, v: &Value) -> Result<u32, GenError> {
        let n = self.value(v)?;
        u32::try_from(n).map_err(|_| self.err(v.span(), format!("bound {n} does not fit an unsigned 32-bit count")))
    }

    // ---- pass 2: which items borrow, which hold floats ---------------------

    fn infer(&mut self) {
        // A fixed point: each round can only add names, so it ends within
        // `items.len()` rounds.
        for _ in 0..=self.items.len() {
            let mut changed = false;
            for i in 0..self.items.len() {
                let decls: Vec<&Declaration> = match &self.items[i].kind {
                    ItemKind::Struct(b) => b.fields.iter().collect(),
                    ItemKind::List(b) => b.fields[..b.fields.len() - 1].iter().collect(),
                    ItemKind::Enum(_) => Vec::new(),
                    ItemKind::Union(u) => union_decls(u),
                    ItemKind::Typedef(d) => vec![*d],
                };
                let name = self.items[i].rust.clone();
                let (lt, fl) = decls.iter().fold((false, false), |(lt, fl), d| {
                    let (a, b) = self.decl_traits(d);
                    (lt || a, fl || b)
                });
                if let ItemKind::List(_) = self.items[i].kind {
                    // The list view always borrows; its entry struct only if
                    // its fields do.
                    if lt && self.lifetime.insert(format!("{name}Entry")) {
                        changed = true;
                    }
                    if self.lifetime.insert(name.clone()) {
                        changed = true;
                    }
                } else if lt && self.lifetime.insert(name.clone()) {
                    changed = true;
                }
                // A list's entry struct holds the floats of its fields as
                // much as the list does (and so cannot derive `Eq` either).
                if fl && matches!(self.items[i].kind, ItemKind::List(_)) && self.float.insert(format!("{name}Entry")) {
                    changed = true;
                }
                if fl && self.float.insert(name) {
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// (borrows from input, holds a float) for one declaration.
    fn decl_traits(&self, d: &Declaration) -> (bool, bool) {
        let Declaration::Named { ty, shape, .. } = d else { return (false, false) };
        let arrayish = matches!(shape, Shape::FixedArray(_) | Shape::VarArray(_));
        match self.syms.resolve_alias(ty) {
            TypeSpec::Opaque | TypeSpec::String => (true, false),
            TypeSpec::Float | TypeSpec::Double => (arrayish, true),
            TypeSpec::Named { name, .. } => {
                let rust = self.named_rust(&name.name);
                let list = self.syms.type_def(&name.name).is_some_and(is_list_struct);
                (arrayish || list || self.lifetime.contains(&rust), self.float.contains(&rust))
            }
            t @ (TypeSpec::InlineStruct(_) | TypeSpec::InlineUnion(_) | TypeSpec::InlineEnum(_)) => {
                let rust = self.inline_names.get(&(t as *const TypeSpec as usize)).cloned().unwrap_or_default();
                (arrayish || self.lifetime.contains(&rust), self.float.contains(&rust))
            }
            _ => (arrayish, false),
        }
    }

    fn named_rust(&self, xdr: &str) -> String {
        camel(xdr)
    }

    fn with_lt(&self, rust: &str) -> String {
        if self.lifetime.contains(rust) {
            format!("{rust}<'a>")
        } else {
            rust.to_string()
        }
    }

    // ---- codecs ------------------------------------------------------------

    /// The Rust type of a type specifier used as a plain value.
    fn scalar_type(&self, ty: &TypeSpec, at: Span) -> Result<String, GenError> {
        Ok(match self.syms.resolve_alias(ty) {
            TypeSpec::Int => "i32".into(),
            TypeSpec::UnsignedInt => "u32".into(),
            TypeSpec::Hyper => "i64".into(),
            TypeSpec::UnsignedHyper => "u64".into(),
            TypeSpec::Float => "f32".into(),
            TypeSpec::Double => "f64".into(),
            TypeSpec::Quadruple => "xdr_spec_rt::Quadruple".into(),
            TypeSpec::Bool => "bool".into(),
            TypeSpec::Named { name, .. } => {
                let Some(def) = self.syms.type_def(&name.name) else {
                    return Err(self.err(name.span, format!("undefined type `{}`", name.name)));
                };
                if is_list_struct(def) {
                    return Err(self.err(
                        name.span,
                        format!(
                            "`{}` is an optional-data list; the generator supports it only through a pointer \
                             (`{} *name`), which is how RFC 4506 section 4.19 uses it",
                            name.name, name.name
                        ),
                    ));
                }
                self.with_lt(&self.named_rust(&name.name))
            }
            t @ (TypeSpec::InlineStruct(_) | TypeSpec::InlineUnion(_) | TypeSpec::InlineEnum(_)) => {
                let rust = self.inline_names.get(&(t as *const TypeSpec as usize)).cloned().unwrap_or_default();
                self.with_lt(&rust)
            }
            TypeSpec::Opaque | TypeSpec::String => {
                return Err(self.err(at, "`opaque` and `string` need a length (`[n]` or `<n>`)"))
            }
            TypeSpec::NonStandard { spelling, span } => {
                return Err(self.err(*span, format!("`{spelling}` is not an RFC 4506 type")))
            }
        })
    }

    fn trait_codec(ty: String) -> Codec {
        // Primitives have known sizes: write them as literals so the
        // generated constants stay readable (and clippy sees no `x && x`).
        let known = match ty.as_str() {
            "i32" | "u32" | "f32" => Some(4),
            "i64" | "u64" | "f64" => Some(8),
            "xdr_spec_rt::Quadruple" => Some(16),
            _ => None,
        };
        let t = format!("<{ty} as xdr_spec_rt::Xdr>");
        let (min, fixed, plain, bounded, validate) = match known {
            Some(n) => (n.to_string(), format!("Some({n})"), "true".to_string(), "false".to_string(), None),
            None => (
                format!("{t}::MIN_LEN"),
                format!("{t}::FIXED_LEN"),
                format!("{t}::PLAIN"),
                format!("{t}::BOUNDED"),
                Some(format!("{t}::validate(&$v)?;")),
            ),
        };
        let bool_ty = ty == "bool";
        Codec {
            decode: format!("{t}::decode_from(r)?"),
            len: format!("{t}::encoded_len(&$v)"),
            encode: format!("{t}::encode_to(&$v, w)"),
            validate: if bool_ty { None } else { validate },
            min: if bool_ty { "4".into() } else { min },
            fixed: if bool_ty { "Some(4)".into() } else { fixed },
            plain: if bool_ty { "false".into() } else { plain },
            bounded: if bool_ty { "false".into() } else { bounded },
            ty,
        }
    }

    fn codec(&self, decl: &Declaration, what: &str) -> Result<Option<Codec>, GenError> {
        let Declaration::Named { name, ty, shape } = decl else { return Ok(None) };
        let what = format!("\"{what}\"");
        let base = self.syms.resolve_alias(ty);
        let c = match (shape, base) {
            (Shape::Scalar, _) => match self.list_behind_typedef(base) {
                // `typedef l *l_ptr;` used as `l_ptr x`: the list, decoded
                // under this field's name as a pointer to it would be.
                Some(target) => self.list_codec(target, &what)?,
                None => Self::trait_codec(self.scalar_type(ty, name.span)?),
            },
            (Shape::Optional, TypeSpec::Named { name: target, .. })
                if self.syms.type_def(&target.name).is_some_and(is_list_struct) =>
            {
                self.list_codec(&target.name, &what)?
            }
            (Shape::Optional, _) => Self::trait_codec(format!("Option<{}>", self.scalar_type(ty, name.span)?)),
            (Shape::FixedArray(n), TypeSpec::Opaque) => {
                let n = self.bound(n)?;
                Codec {
                    ty: format!("&'a [u8; {n}]"),
                    decode: format!("r.opaque_fixed::<{n}>()?"),
                    len: format!("xdr_spec_rt::opaque_len({n})"),
                    encode: "w.put_opaque_fixed(&$v[..])".into(),
                    validate: None,
                    min: format!("xdr_spec_rt::opaque_len({n})"),
                    fixed: format!("Some(xdr_spec_rt::opaque_len({n}))"),
                    plain: "true".into(),
                    bounded: "false".into(),
                }
            }
            (Shape::VarArray(max), TypeSpec::Opaque | TypeSpec::String) => {
                let string = matches!(base, TypeSpec::String);
                let max_v = max.as_ref().map(|m| self.bound(m)).transpose()?;
                let max_s = max_v.map_or("None".to_string(), |m| format!("Some({m})"));
                Codec {
                    ty: if string { "&'a str".into() } else { "&'a [u8]".into() },
                    decode: if string {
                        format!("r.string({max_s}, {what})?")
                    } else {
                        format!("r.opaque_var({max_s}, {what})?")
                    },
                    len: "4 + xdr_spec_rt::opaque_len($v.len())".into(),
                    encode: if string {
                        "w.put_opaque_var($v.as_bytes())".into()
                    } else {
                        "w.put_opaque_var($v)".into()
                    },
                    validate: max_v.map(|m| format!("xdr_spec_rt::check_max($v.len(), {m}, {what})?;")),
                    min: "4".into(),
                    fixed: "None".into(),
                    plain: "false".into(),
                    // Without a `<max>` the only bound is the 32-bit length,
                    // which `Xdr::encode` checks for the whole message.
                    bounded: if max_v.is_some() { "true".into() } else { "false".into() },
                }
            }
            (Shape::FixedArray(_), TypeSpec::String) => {
                return Err(self.err(name.span, "`string` takes a variable length (`<n>`), not `[n]`"))
            }
            (Shape::FixedArray(n), _) => {
                let n = self.bound(n)?;
                let elem = self.scalar_type(ty, name.span)?;
                let t = format!("<{elem} as xdr_spec_rt::Xdr>");
                Codec {
                    ty: format!("xdr_spec_rt::Seq<'a, {elem}>"),
                    decode: format!("r.fixed_seq::<{elem}>({n}, {what})?"),
                    len: "$v.elements_len()".into(),
                    encode: "$v.encode_elements(w)".into(),
                    validate: Some(format!("$v.validate_bounds(None, Some({n}), {what})?;")),
                    min: format!("{n} * {t}::MIN_LEN"),
                    fixed: format!("xdr_spec_rt::fixed_mul({t}::FIXED_LEN, {n})"),
                    plain: format!("{t}::PLAIN"),
                    bounded: "true".into(),
                }
            }
            (Shape::VarArray(max), _) => {
                let max_s = match max {
                    Some(m) => format!("Some({})", self.bound(m)?),
                    None => "None".into(),
                };
                let elem = self.scalar_type(ty, name.span)?;
                Codec {
                    ty: format!("xdr_spec_rt::Seq<'a, {elem}>"),
                    decode: format!("r.var_seq::<{elem}>({max_s}, {what})?"),
                    len: "$v.elements_len().saturating_add(4)".into(),
                    encode: "$v.encode_counted(w)".into(),
                    validate: Some(format!("$v.validate_bounds({max_s}, None, {what})?;")),
                    min: "4".into(),
                    fixed: "None".into(),
                    plain: "false".into(),
                    // An unbounded array of elements that take room needs no
                    // check of its own: `Xdr::encode` refuses a message over
                    // 4 GiB, which any count over 2^32 would make.
                    bounded: if max.is_some() {
                        "true".into()
                    } else {
                        format!("<{elem} as xdr_spec_rt::Xdr>::BOUNDED || <{elem} as xdr_spec_rt::Xdr>::MIN_LEN == 0")
                    },
                }
            }
        };
        Ok(Some(c))
    }

    /// The codec of a pointer to the optional-data list struct `list`: the
    /// runtime's [`List`](crate::rt::List), read with the field's name
    /// (`what`, quoted) so that a limit error names the field, not only "a
    /// list".
    fn list_codec(&self, list: &str, what: &str) -> Result<Codec, GenError> {
        let elem = self.list_elem(list)?;
        let mut c = Self::trait_codec(format!("xdr_spec_rt::List<'a, {elem}>"));
        c.decode = format!("r.list::<{elem}>({what})?");
        Ok(c)
    }

    /// The list struct that `ty` points to when it names a typedef of a
    /// pointer to one (`typedef l *l_ptr;`).
    fn list_behind_typedef(&self, ty: &TypeSpec) -> Option<&'s str> {
        let TypeSpec::Named { name, .. } = ty else { return None };
        let Definition {
            kind:
                DefinitionKind::Typedef(Declaration::Named {
                    ty: TypeSpec::Named { name: target, .. },
                    shape: Shape::Optional,
                    ..
                }),
            ..
        } = self.syms.type_def(&name.name)?
        else {
            return None;
        };
        self.syms.type_def(&target.name).is_some_and(is_list_struct).then_some(target.name.as_str())
    }

    /// The element type of the optional-data list struct `xdr`: the type of
    /// its one entry field, or a generated `...Entry` struct of its fields.
    fn list_elem(&self, xdr: &str) -> Result<String, GenError> {
        let def = self.syms.type_def(xdr).ok_or_else(|| self.err(Span::default(), format!("undefined `{xdr}`")))?;
        let DefinitionKind::Struct(b) = &def.kind else {
            return Err(self.err(def.name.span, format!("`{xdr}` is not an optional-data list struct")));
        };
        if b.fields.len() == 2 {
            if let Some(c) = self.codec(&b.fields[0], "")? {
                return Ok(c.ty);
            }
        }
        Ok(self.with_lt(&format!("{}Entry", camel(xdr))))
    }

    // ---- emission ----------------------------------------------------------

    fn doc(&mut self, i: usize, kind: &str) {
        let item = &self.items[i];
        let origin = self.origin(item.span);
        let _ = writeln!(self.out, "/// XDR `{kind} {}` ({origin}).", item.xdr);
        if !item.doc.is_empty() {
            self.out.push_str("///\n");
            for line in item.doc {
                let _ = writeln!(self.out, "/// {}", line.replace('[', "\\[").replace(']', "\\]"));
            }
        }
    }

    fn derives(&self, rust: &str, hash: bool) -> String {
        let eq = if self.float.contains(rust) { "" } else { ", Eq" };
        let hash = if hash && eq.is_empty() {
            ""
        } else if hash {
            ", Hash"
        } else {
            ""
        };
        format!("#[derive(Debug, Clone, Copy, PartialEq{eq}{hash})]\n")
    }

    /// The types, then the constants and programs, of the definitions in
    /// `defs` (all of them, for [`generate`]: the order it always had).
    fn emit_part(&mut self, spec: &'s Spec, defs: std::ops::Range<usize>) -> Result<(), GenError> {
        for i in 0..self.items.len() {
            if defs.contains(&self.items[i].def) {
                self.emit(i)?;
            }
        }
        for def in &spec.definitions[defs] {
            match &def.kind {
                DefinitionKind::Const(v) => self.emit_const(def, v)?,
                DefinitionKind::Program(p) => self.emit_program(def, p)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn emit(&mut self, i: usize) -> Result<(), GenError> {
        match self.items[i].kind {
            ItemKind::Struct(b) => self.emit_struct(i, &b.fields.iter().collect::<Vec<_>>(), None),
            ItemKind::List(b) => self.emit_list(i, b),
            ItemKind::Enum(b) => self.emit_enum(i, b),
            ItemKind::Union(u) => self.emit_union(i, u),
            ItemKind::Typedef(d) => self.emit_typedef(i, d),
        }
    }

    fn emit_struct(&mut self, i: usize, fields: &[&'s Declaration], rename: Option<String>) -> Result<(), GenError> {
        if rename.is_none() {
            self.doc(i, "struct");
        }
        let rust = rename.unwrap_or_else(|| self.items[i].rust.clone());
        let xdr = self.items[i].xdr.clone();
        let mut codecs = Vec::new();
        for f in fields {
            let Some(name) = f.name() else { return Err(self.err(f.span(), "`void` is not a struct field")) };
            let Some(c) = self.codec(f, &format!("{xdr}.{}", name.name))? else { continue };
            codecs.push((snake(&name.name), name.name.clone(), c));
        }
        let lt = if self.lifetime.contains(&rust) { "<'a>" } else { "" };
        let _ = writeln!(self.out, "{}pub struct {rust}{lt} {{", self.derives(&rust, true));
        for (f, xf, c) in &codecs {
            let _ = writeln!(self.out, "    /// XDR field `{xf}`.\n    pub {f}: {},", c.ty);
        }
        self.out.push_str("}\n\n");
        let min = sum_terms(codecs.iter().map(|(_, _, c)| c.min.as_str()));
        let fixed = fixed_terms(codecs.iter().map(|(_, _, c)| c.fixed.as_str()));
        let plain = bool_terms(codecs.iter().map(|(_, _, c)| c.plain.as_str()), true);
        let bounded = bool_terms(codecs.iter().map(|(_, _, c)| c.bounded.as_str()), false);
        let decode: String =
            codecs.iter().map(|(f, _, c)| format!("            {f}: {},\n", c.decode)).collect::<String>();
        // `a.saturating_add(b).saturating_add(c)`: a length that would not fit
        // saturates rather than wraps. Only the first term receives a method
        // call, so only there does a sum need parentheses.
        let mut terms = codecs.iter().map(|(f, _, c)| sub(&c.len, &format!("self.{f}")));
        let first = terms.next().map(|t| if t.contains(" + ") { format!("({t})") } else { t }).unwrap_or_default();
        let len = terms.fold(first, |acc, t| format!("{acc}\n            .saturating_add({t})"));
        let encode = struct_encode(&codecs, &fixed);
        let validate: String = codecs
            .iter()
            .filter(|(_, _, c)| c.bounded != "false")
            .filter_map(|(f, _, c)| c.validate.as_ref().map(|v| format!("        {}\n", sub(v, &format!("self.{f}")))))
            .collect();
        self.emit_xdr_impl(
            &rust,
            &min,
            &fixed,
            &plain,
            &bounded,
            &format!("Ok({rust} {{\n{decode}        }})"),
            &len,
            &encode,
            &validate,
            codecs.split_first().and_then(|((f, _, c), rest)| led_encode(&format!("self.{f}"), c, rest)),
        );
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_xdr_impl(
        &mut self,
        rust: &str,
        min: &str,
        fixed: &str,
        plain: &str,
        bounded: &str,
        decode: &str,
        len: &str,
        encode: &str,
        validate: &str,
        encode_led: Option<String>,
    ) {
        let ty = self.with_lt(rust);
        // A value whose encoding starts with a counted array takes the word
        // before it (a list's or an optional's TRUE) into the array's one
        // bounds check.
        let led = encode_led.map_or(String::new(), |body| {
            format!(
                "    #[inline(always)]\n    fn encode_led(&self, lead: u32, w: &mut xdr_spec_rt::Writer<'_>) {{\n{body}    }}\n"
            )
        });
        let validate = if validate.trim().is_empty() {
            String::new()
        } else {
            format!(
                "    const BOUNDED: bool = {bounded};\n    fn validate(&self) -> xdr_spec_rt::Result<()> {{\n{validate}        Ok(())\n    }}\n"
            )
        };
        let len_body = if fixed == "Some(0)" {
            len.to_string()
        } else {
            format!("if let Some(n) = Self::FIXED_LEN {{\n            return n;\n        }}\n        {len}")
        };
        let _ = write!(
            self.out,
            "impl<'a> xdr_spec_rt::Xdr<'a> for {ty} {{
    const MIN_LEN: usize = {min};
    const FIXED_LEN: Option<usize> = {fixed};
    const PLAIN: bool = {plain};
{validate}    #[inline(always)]
    fn decode_from(r: &mut xdr_spec_rt::Reader<'a>) -> xdr_spec_rt::Result<Self> {{
        {decode}
    }}
    #[inline(always)]
    fn encoded_len(&self) -> usize {{
        {len_body}
    }}
    #[inline(always)]
    fn encode_to(&self, w: &mut xdr_spec_rt::Writer<'_>) {{
{encode}    }}
{led}}}

"
        );
    }

    fn emit_list(&mut self, i: usize, b: &'s StructBody) -> Result<(), GenError> {
        let xdr = self.items[i].xdr.clone();
        let rust = self.items[i].rust.clone();
        let elem = self.list_elem(&xdr)?;
        self.doc(i, "struct");
        let link = self.syms.type_def(&xdr).and_then(list_link).map_or("next".to_string(), |l| l.name.clone());
        let _ = write!(
            self.out,
            "///\n/// An optional-data list (RFC 4506 section 4.19): `{xdr} *` is decoded as a\n\
             /// sequence of entries, walked in a loop rather than through `{link}`.\n\
             pub type {rust}<'a> = xdr_spec_rt::List<'a, {elem}>;\n\n"
        );
        if b.fields.len() != 2 {
            let entry = format!("{rust}Entry");
            let _ =
                writeln!(self.out, "/// One entry of [`{rust}`]: the fields of XDR `struct {xdr}` before `{link}`.");
            let fields: Vec<&Declaration> = b.fields[..b.fields.len() - 1].iter().collect();
            self.emit_struct(i, &fields, Some(entry))?;
        }
        Ok(())
    }

    fn emit_enum(&mut self, i: usize, b: &'s EnumBody) -> Result<(), GenError> {
        let rust = self.items[i].rust.clone();
        let xdr = self.items[i].xdr.clone();
        self.doc(i, "enum");
        let _ =
            write!(self.out, "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]\n#[repr(i32)]\npub enum {rust} {{\n");
        let mut members = Vec::new();
        for (id, v) in &b.members {
            let value = self.value(v)?;
            let value = i32::try_from(value)
                .map_err(|_| self.err(v.span(), format!("enum value {value} does not fit a signed 32-bit int")))?;
            let variant = camel(&id.name);
            let _ = writeln!(self.out, "    /// XDR `{} = {value}`.\n    {variant} = {value},", id.name);
            members.push((id.name.clone(), variant, value));
        }
        self.out.push_str("}\n\n");
        let arms: String = members.iter().map(|(_, v, n)| format!("            {n} => Some(Self::{v}),\n")).collect();
        let _ = write!(
            self.out,
            "impl {rust} {{
    /// The value on the wire.
    pub const fn value(self) -> i32 {{
        self as i32
    }}

    /// The member with wire value `v`, if any.
    pub const fn from_value(v: i32) -> Option<Self> {{
        match v {{
{arms}            _ => None,
        }}
    }}
}}

"
        );
        for (x, v, n) in &members {
            let _ = writeln!(self.out, "/// XDR enumerator `{x}` of `enum {xdr}` ([`{rust}::{v}`]), as a wire value.\npub const {}: i32 = {n};", screaming(x));
        }
        self.out.push('\n');
        let decode = format!(
            "let v = r.i32()?;\n        Self::from_value(v).ok_or_else(|| xdr_spec_rt::Error::BadEnum {{ type_name: \"{xdr}\", value: v, at: r.position() - 4 }})"
        );
        self.emit_xdr_impl(
            &rust,
            "4",
            "Some(4)",
            "false",
            "false",
            &decode,
            "4",
            "        w.put_i32(*self as i32);\n",
            "",
            None,
        );
        Ok(())
    }

    fn emit_union(&mut self, i: usize, u: &'s UnionBody) -> Result<(), GenError> {
        let rust = self.items[i].rust.clone();
        let xdr = self.items[i].xdr.clone();
        let Declaration::Named { ty: dty, shape: Shape::Scalar, name: dname } = &u.discriminant else {
            return Err(self
                .err(u.discriminant.span(), "a union discriminant is a plain `int`, `unsigned int`, `bool` or enum"));
        };
        // The discriminant's Rust type, how to read it raw, and how to write a
        // known value.
        let dbase = self.syms.resolve_alias(dty);
        let (dty_rust, read, enum_ty) = match dbase {
            TypeSpec::Int => ("i32".to_string(), "r.i32()?", None),
            TypeSpec::UnsignedInt => ("u32".to_string(), "r.u32()?", None),
            TypeSpec::Bool => ("bool".to_string(), "r.u32()?", None),
            TypeSpec::Named { .. } | TypeSpec::InlineEnum(_) => {
                let t = self.scalar_type(dty, dname.span)?;
                (t.clone(), "r.i32()?", Some(t))
            }
            _ => return Err(self.err(dname.span, "a union discriminant is `int`, `unsigned int`, `bool` or an enum")),
        };
        let lit = |v: i64| -> String {
            match dbase {
                TypeSpec::UnsignedInt | TypeSpec::Bool => format!("{}", v as u32),
                _ => format!("{}", v as i32),
            }
        };
        struct Arm {
            variant: String,
            values: Vec<i64>,
            codec: Option<Codec>,
            xdr_field: Option<String>,
            holds_disc: bool,
        }
        let mut arms = Vec::new();
        let mut used = HashSet::new();
        for arm in &u.arms {
            let values = arm.cases.iter().map(|c| self.value(c)).collect::<Result<Vec<_>, _>>()?;
            let mut variant = if arm.cases.len() == 1 {
                match &arm.cases[0] {
                    Value::Named(id) => camel(&id.name),
                    Value::Literal { value, .. } if *value < 0 => format!("CaseMinus{}", value.unsigned_abs()),
                    Value::Literal { value, .. } => format!("Case{value}"),
                }
            } else {
                arm.decl.name().map_or_else(|| "Void".to_string(), |n| camel(&n.name))
            };
            while !used.insert(variant.clone()) {
                variant.push('_');
            }
            let field = arm.decl.name().map(|n| format!("{xdr}.{}", n.name));
            let codec = self.codec(&arm.decl, field.as_deref().unwrap_or(""))?;
            arms.push(Arm { variant, values, codec, xdr_field: field, holds_disc: arm.cases.len() > 1 });
        }
        if let Some(d) = &u.default {
            let field = d.name().map(|n| format!("{xdr}.{}", n.name));
            let codec = self.codec(d, field.as_deref().unwrap_or(""))?;
            let mut variant = "Default".to_string();
            while !used.insert(variant.clone()) {
                variant.push('_');
            }
            arms.push(Arm { variant, values: Vec::new(), codec, xdr_field: field, holds_disc: true });
        }

        self.doc(i, "union");
        let lt = if self.lifetime.contains(&rust) { "<'a>" } else { "" };
        let _ = writeln!(self.out, "{}pub enum {rust}{lt} {{", self.derives(&rust, true));
        for a in &arms {
            let cases = if a.values.is_empty() {
                "default".to_string()
            } else {
                a.values.iter().map(|v| format!("case {v}")).collect::<Vec<_>>().join(", ")
            };
            let field = a.xdr_field.as_deref().map_or("void".to_string(), |f| format!("`{f}`"));
            let _ = writeln!(self.out, "    /// XDR {cases}: {field}.");
            match (&a.codec, a.holds_disc) {
                (None, false) => {
                    let _ = writeln!(self.out, "    {},", a.variant);
                }
                (Some(c), false) => {
                    let _ = writeln!(self.out, "    {}({}),", a.variant, c.ty);
                }
                (None, true) => {
                    let _ = writeln!(
                        self.out,
                        "    {} {{\n        /// The discriminant received.\n        discriminant: {dty_rust},\n    }},",
                        a.variant
                    );
                }
                (Some(c), true) => {
                    let _ = writeln!(
                        self.out,
                        "    {} {{\n        /// The discriminant received.\n        discriminant: {dty_rust},\n        /// The arm's value.\n        value: {},\n    }},",
                        a.variant, c.ty
                    );
                }
            }
        }
        self.out.push_str("}\n\n");

        // Decoding: read the raw word, dispatch on its value.
        let mut dec = format!("let d = {read};\n        Ok(match d {{\n");
        // Errors name the discriminant's offset, worked out on the error path
        // only: nothing has been read after the word when they are built.
        let at = "at: r.position() - 4";
        // A word that is not a value of the discriminant's enum is an error of
        // that enum, and names it (an inline enum by the name it is given).
        let enum_xdr = match dbase {
            TypeSpec::Named { name, .. } => name.name.clone(),
            _ => format!("{xdr}.{}", dname.name),
        };
        let disc_expr = match (&enum_ty, dbase) {
            (Some(t), _) => format!(
                "{t}::from_value(d).ok_or_else(|| xdr_spec_rt::Error::BadEnum {{ type_name: \"{enum_xdr}\", value: d, {at} }})?"
            ),
            (None, TypeSpec::Bool) => "d != 0".to_string(),
            _ => "d".to_string(),
        };
        let mut has_default = false;
        for a in &arms {
            let pat = if a.values.is_empty() {
                has_default = true;
                "_".to_string()
            } else {
                a.values.iter().map(|v| lit(*v)).collect::<Vec<_>>().join(" | ")
            };
            let body = match (&a.codec, a.holds_disc) {
                (None, false) => format!("Self::{}", a.variant),
                (Some(c), false) => format!("Self::{}({})", a.variant, c.decode),
                (None, true) => format!("Self::{} {{ discriminant: {disc_expr} }}", a.variant),
                (Some(c), true) => format!(
                    "{{\n                let discriminant = {disc_expr};\n                Self::{} {{ discriminant, value: {} }}\n            }}",
                    a.variant, c.decode
                ),
            };
            let _ = writeln!(dec, "            {pat} => {body},");
        }
        if !has_default {
            let widen =
                if matches!(dbase, TypeSpec::UnsignedInt | TypeSpec::Bool) { "d as i64" } else { "i64::from(d)" };
            let _ = writeln!(
                dec,
                "            _ => return Err(xdr_spec_rt::Error::BadDiscriminant {{ type_name: \"{xdr}\", value: {widen}, {at} }}),"
            );
        }
        dec.push_str("        })");
        if matches!(dbase, TypeSpec::Bool) {
            dec = dec.replace(
                "let d = r.u32()?;",
                &format!("let d = r.u32()?;\n        if d > 1 {{\n            return Err(xdr_spec_rt::Error::BadBool {{ value: d, {at} }});\n        }}"),
            );
        }

        // Encoding: write the discriminant (a held one, or the arm's first
        // label), then the arm.
        let write_disc = |v: &str| -> String {
            match (&enum_ty, dbase) {
                (Some(_), _) => format!("w.put_i32({v})"),
                (None, TypeSpec::UnsignedInt) => format!("w.put_u32({v})"),
                (None, TypeSpec::Bool) if v.parse::<u32>().is_ok() => format!("w.put_u32({v})"),
                (None, TypeSpec::Bool) => format!("w.put_bool({v})"),
                _ => format!("w.put_i32({v})"),
            }
        };
        let held = match (&enum_ty, dbase) {
            (Some(_), _) => "discriminant.value()".to_string(),
            _ => "discriminant".to_string(),
        };
        // Every generated type is `Copy`: arms bind their values by copy.
        let mut enc = "        match *self {\n".to_string();
        let mut len = "4usize.saturating_add(match *self {\n".to_string();
        let mut validate = String::new();
        for a in &arms {
            let first = a.values.first().map(|v| lit(*v)).unwrap_or_default();
            let (pat, disc) = match (&a.codec, a.holds_disc) {
                (None, false) => (format!("Self::{}", a.variant), write_disc(&first)),
                (Some(_), false) => (format!("Self::{}(v)", a.variant), write_disc(&first)),
                (None, true) => (format!("Self::{} {{ discriminant }}", a.variant), write_disc(&held)),
                (Some(_), true) => (format!("Self::{} {{ discriminant, value: v }}", a.variant), write_disc(&held)),
            };
            let pat_len = pat.replace("{ discriminant }", "{ .. }").replace("discriminant, value: v", "value: v, ..");
            match &a.codec {
                Some(c) => {
                    // The discriminant and a fixed-length arm are one run.
                    let run_len = format!("xdr_spec_rt::fixed_add(Some(4), {})", c.fixed);
                    let run = fixed_run(&run_len, [disc, sub(&c.encode, "v")].into_iter());
                    let _ = writeln!(enc, "            {pat} => {},", run.replace('\n', "\n            "));
                    let _ = writeln!(len, "            {pat_len} => {},", sub(&c.len, "v"));
                    if let (Some(vd), true) = (&c.validate, c.bounded != "false") {
                        let _ = writeln!(
                            validate,
                            "        if let {pat_len} = *self {{\n            {}\n        }}",
                            sub(vd, "v")
                        );
                    }
                }
                None => {
                    let _ = writeln!(enc, "            {pat} => {disc},");
                    let _ = writeln!(len, "            {pat_len} => 0,");
                }
            }
        }
        enc.push_str("        }\n");
        len.push_str("        })");
        // A held discriminant must select the arm it is stored in.
        let all_labels: Vec<String> = arms.iter().flat_map(|a| a.values.iter().map(|v| lit(*v))).collect();
        for a in arms.iter().filter(|a| a.holds_disc) {
            let held_raw = match (&enum_ty, dbase) {
                (Some(_), _) => "discriminant.value()".to_string(),
                (None, TypeSpec::Bool) => "discriminant as u32".to_string(),
                _ => "discriminant".to_string(),
            };
            // A default arm's discriminant must have no arm of its own; a
            // multi-label arm's must be one of its labels.
            let (labels, want) = if a.values.is_empty() {
                (all_labels.clone(), "")
            } else {
                (a.values.iter().map(|v| lit(*v)).collect(), "!")
            };
            if labels.is_empty() {
                continue;
            }
            let _ = writeln!(
                validate,
                "        if let Self::{} {{ discriminant, .. }} = *self {{\n            if {want}matches!({held_raw}, {}) {{\n                return Err(xdr_spec_rt::Error::BadDiscriminant {{ type_name: \"{xdr}\", value: {held_raw} as i64, at: 0 }});\n            }}\n        }}",
                a.variant,
                labels.join(" | ")
            );
        }
        let holds = if arms.iter().any(|a| a.holds_disc) { Some("true") } else { None };
        let bounded =
            bool_terms(arms.iter().filter_map(|a| a.codec.as_ref().map(|c| c.bounded.as_str())).chain(holds), false);
        let min_arms = arms.iter().map(|a| a.codec.as_ref().map_or("0".to_string(), |c| c.min.clone()));
        let min =
            min_arms.fold(
                String::new(),
                |acc, m| if acc.is_empty() { m } else { format!("xdr_spec_rt::min_len({acc}, {m})") },
            );
        let fixed_arms = arms.iter().map(|a| a.codec.as_ref().map_or("Some(0)".to_string(), |c| c.fixed.clone()));
        let fixed = fixed_arms.fold(String::new(), |acc, f| {
            if acc.is_empty() {
                f
            } else {
                format!("xdr_spec_rt::fixed_same({acc}, {f})")
            }
        });
        self.emit_xdr_impl(
            &rust,
            &format!("4 + {min}"),
            &format!("xdr_spec_rt::fixed_add(Some(4), {fixed})"),
            "false",
            &bounded,
            &dec,
            &len,
            &enc,
            &validate,
            None,
        );
        Ok(())
    }

    fn emit_typedef(&mut self, i: usize, d: &'s Declaration) -> Result<(), GenError> {
        let rust = self.items[i].rust.clone();
        let xdr = self.items[i].xdr.clone();
        let Declaration::Named { name, ty, shape } = d else { return Ok(()) };
        self.doc(i, "typedef");
        let lt = if self.lifetime.contains(&rust) { "<'a>" } else { "" };
        // A typedef without a bound of its own renames a type: an alias.
        let alias = match (shape, ty) {
            (Shape::Scalar, _) => Some(self.scalar_type(ty, name.span)?),
            (Shape::Optional, _) => self.codec(d, &xdr)?.map(|c| c.ty),
            _ => None,
        };
        if let Some(target) = alias {
            let _ = write!(self.out, "pub type {rust}{lt} = {target};\n\n");
            return Ok(());
        }
        let Some(c) = self.codec(d, &xdr)? else { return Ok(()) };
        let _ = write!(self.out, "{}pub struct {rust}{lt}(pub {});\n\n", self.derives(&rust, true), c.ty);
        let validate = c.validate.as_ref().map(|v| format!("        {}\n", sub(v, "self.0"))).unwrap_or_default();
        let led = led_encode("self.0", &c, &[]);
        self.emit_xdr_impl(
            &rust,
            &c.min,
            &c.fixed,
            &c.plain,
            &c.bounded,
            &format!("Ok({rust}({}))", c.decode),
            &sub(&c.len, "self.0"),
            &format!("        {};\n", sub(&c.encode, "self.0")),
            &validate,
            led,
        );
        Ok(())
    }

    fn emit_const(&mut self, def: &Definition, v: &Value) -> Result<(), GenError> {
        let value = self.value(v)?;
        let ty = if u32::try_from(value).is_ok() {
            "u32"
        } else if i32::try_from(value).is_ok() {
            "i32"
        } else {
            "i64"
        };
        let origin = self.origin(def.name.span);
        let _ = writeln!(self.out, "/// XDR `const {}` ({origin}).", def.name.name);
        for line in &def.doc {
            let _ = writeln!(self.out, "///\n/// {line}");
        }
        let _ = write!(self.out, "pub const {}: {ty} = {value};\n\n", screaming(&def.name.name));
        Ok(())
    }

    fn emit_program(&mut self, def: &Definition, p: &Program) -> Result<(), GenError> {
        let origin = self.origin(def.name.span);
        let number = self.bound(&p.number)?;
        let _ = write!(
            self.out,
            "/// RPC program `{}` (RFC 5531 section 12; {origin}).\npub const {}: u32 = {number};\n\n",
            def.name.name,
            screaming(&def.name.name)
        );
        let mut procs = HashSet::new();
        for v in &p.versions {
            let n = self.bound(&v.number)?;
            let _ = write!(
                self.out,
                "/// Version `{}` of program `{}`.\npub const {}: u32 = {n};\n\n",
                v.name.name,
                def.name.name,
                screaming(&v.name.name)
            );
            // A procedure that a later version repeats (with the same number,
            // which the checker requires) is one constant, not two.
            for proc in new_procedures(&v.procedures, &mut procs) {
                let n = self.bound(&proc.number)?;
                let _ = write!(
                    self.out,
                    "/// Procedure `{}` of version `{}` of program `{}`.\npub const {}: u32 = {n};\n\n",
                    proc.name.name,
                    v.name.name,
                    def.name.name,
                    screaming(&proc.name.name)
                );
            }
        }
        Ok(())
    }
}

// ---- pass 1: collect items, naming inline bodies -------------------------------

/// The types to emit, in order, and the names given to inline bodies (by the
/// address of their [`TypeSpec`]). Shared with [`module_names`], so that the
/// checker sees exactly the names the generator will write.
fn collect(spec: &Spec) -> (Vec<Item<'_>>, HashMap<usize, String>) {
    let mut items = Vec::new();
    let mut inline_names = HashMap::new();
    for (index, def) in spec.definitions.iter().enumerate() {
        let rust = camel(&def.name.name);
        let (kind, fields): (ItemKind<'_>, Vec<&Declaration>) = match &def.kind {
            DefinitionKind::Struct(b) if is_list_struct(def) => {
                (ItemKind::List(b), b.fields[..b.fields.len() - 1].iter().collect())
            }
            DefinitionKind::Struct(b) => (ItemKind::Struct(b), b.fields.iter().collect()),
            DefinitionKind::Enum(b) => (ItemKind::Enum(b), Vec::new()),
            DefinitionKind::Union(u) => (ItemKind::Union(u), union_decls(u)),
            DefinitionKind::Typedef(d) => (ItemKind::Typedef(d), vec![d]),
            DefinitionKind::Const(_) | DefinitionKind::Program(_) => continue,
        };
        items.push(Item {
            def: index,
            rust: rust.clone(),
            xdr: def.name.name.clone(),
            span: def.name.span,
            doc: &def.doc,
            kind,
        });
        collect_inline(index, &rust, &fields, &mut items, &mut inline_names);
    }
    (items, inline_names)
}

/// Name the inline bodies among `decls` after their parent and field,
/// breadth-first with an explicit queue.
fn collect_inline<'s>(
    def: usize,
    parent: &str,
    decls: &[&'s Declaration],
    items: &mut Vec<Item<'s>>,
    inline_names: &mut HashMap<usize, String>,
) {
    let mut queue: Vec<(String, &'s Declaration)> = decls.iter().map(|d| (parent.to_string(), *d)).collect();
    while let Some((parent, decl)) = queue.pop() {
        let Declaration::Named { name, ty, .. } = decl else { continue };
        let rust = format!("{parent}{}", camel(&name.name));
        let (kind, inner): (ItemKind<'s>, Vec<&'s Declaration>) = match ty {
            TypeSpec::InlineStruct(b) => (ItemKind::Struct(b), b.fields.iter().collect()),
            TypeSpec::InlineEnum(b) => (ItemKind::Enum(b), Vec::new()),
            TypeSpec::InlineUnion(u) => (ItemKind::Union(u), union_decls(u)),
            _ => continue,
        };
        inline_names.insert(ty as *const TypeSpec as usize, rust.clone());
        for d in inner {
            queue.push((rust.clone(), d));
        }
        items.push(Item { def, rust, xdr: format!("{}.{}", parent, name.name), span: name.span, doc: &[], kind });
    }
}

// ---- the names of the generated module -----------------------------------------

/// The two namespaces of a Rust module that generated items share: a name
/// may be a type and a value at once, but not two types or two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Namespace {
    /// Structs, enums, type aliases.
    Type,
    /// Constants, and the constructors of tuple structs.
    Value,
}

/// A name the generated module defines at its top level.
#[derive(Debug, Clone)]
pub(crate) struct ModuleName {
    /// The Rust name.
    pub(crate) rust: String,
    /// Which namespace it is in.
    pub(crate) ns: Namespace,
    /// Where the XDR name it comes from is written.
    pub(crate) span: Span,
    /// That XDR name.
    pub(crate) xdr: String,
    /// Whether the XDR name is in the XDR global namespace (a definition, an
    /// enumerator, a program, version or procedure), where the checker
    /// already reports a name defined twice.
    pub(crate) global: bool,
    /// What it is, in XDR terms, for messages: ``struct `foo` ``.
    pub(crate) what: String,
}

/// Names of the Rust prelude, and primitive types, that the generated code
/// writes unqualified (`Option<T>`, `Some(n)`, `Ok(v)`, `u32`, ...): a
/// generated item of the same name would be found in their place, and the
/// code would not compile. (A CamelCase or SCREAMING_CASE generated name can
/// be none of the primitive types; they are listed so that the list is the
/// whole truth.)
pub(crate) const USED_PRELUDE_NAMES: &[&str] = &[
    "Option", "Some", "None", "Ok", "Err", "Self", "bool", "str", "u8", "i32", "u32", "i64", "u64", "f32", "f64",
    "usize",
];

/// The other names of the Rust 2021 prelude: a generated item may take one
/// and still compile, but it hides the prelude's item in the generated
/// module.
pub(crate) const OTHER_PRELUDE_NAMES: &[&str] = &[
    "AsMut",
    "AsRef",
    "Box",
    "Clone",
    "Copy",
    "Debug",
    "Default",
    "DoubleEndedIterator",
    "Drop",
    "Eq",
    "ExactSizeIterator",
    "Extend",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "FromIterator",
    "Hash",
    "Into",
    "IntoIterator",
    "Iterator",
    "Ord",
    "PartialEq",
    "PartialOrd",
    "Result",
    "Send",
    "Sized",
    "String",
    "Sync",
    "ToOwned",
    "ToString",
    "TryFrom",
    "TryInto",
    "Unpin",
    "Vec",
];

/// Every name the generated module defines at its top level, as
/// [`generate`] writes them: the types of definitions and of inline bodies
/// (named after parent and field), the `...Entry` struct of a list whose
/// entry has more than one field, the constructor of each newtype (a
/// typedef with a bound), and the constants of constants, enumerators and
/// programs.
pub(crate) fn module_names(spec: &Spec) -> Vec<ModuleName> {
    let mut out = Vec::new();
    let (items, _) = collect(spec);
    for item in &items {
        // Inline bodies are named `Parent.field` by `collect`.
        let (word, field, xdr) = match item.xdr.split_once('.') {
            Some((_, field)) => (format!("the anonymous {{}} of field `{field}`"), true, field),
            None => (format!("{{}} `{}`", item.xdr), false, item.xdr.as_str()),
        };
        let kind = match item.kind {
            ItemKind::Struct(_) => "struct",
            ItemKind::List(_) => "list struct",
            ItemKind::Enum(_) => "enum",
            ItemKind::Union(_) => "union",
            ItemKind::Typedef(_) => "typedef",
        };
        let what = word.replacen("{}", kind, 1);
        let name = |rust: String, ns: Namespace, span: Span, what: String| ModuleName {
            rust,
            ns,
            span,
            xdr: xdr.to_string(),
            global: !field,
            what,
        };
        out.push(name(item.rust.clone(), Namespace::Type, item.span, what.clone()));
        match item.kind {
            ItemKind::List(b) if b.fields.len() != 2 => {
                let entry = format!("{}Entry", item.rust);
                out.push(name(entry, Namespace::Type, item.span, format!("the entry struct of {what}")));
            }
            ItemKind::Typedef(Declaration::Named { shape: Shape::FixedArray(_) | Shape::VarArray(_), .. }) => {
                out.push(name(item.rust.clone(), Namespace::Value, item.span, format!("the constructor of {what}")));
            }
            ItemKind::Enum(b) => {
                let owner = if field { what.clone() } else { format!("enum `{}`", item.xdr) };
                for (id, _) in &b.members {
                    let what = format!("enumerator `{}` of {owner}", id.name);
                    let rust = screaming(&id.name);
                    // Enumerators, anonymous enums' too, are global XDR names.
                    out.push(ModuleName {
                        xdr: id.name.clone(),
                        global: true,
                        ..name(rust, Namespace::Value, id.span, what)
                    });
                }
            }
            _ => {}
        }
    }
    for def in &spec.definitions {
        let value = |id: &Ident, what: String| ModuleName {
            rust: screaming(&id.name),
            ns: Namespace::Value,
            span: id.span,
            xdr: id.name.clone(),
            global: true,
            what,
        };
        match &def.kind {
            DefinitionKind::Const(_) => out.push(value(&def.name, format!("constant `{}`", def.name.name))),
            DefinitionKind::Program(p) => {
                out.push(value(&def.name, format!("program `{}`", def.name.name)));
                let mut procs = HashSet::new();
                for v in &p.versions {
                    out.push(value(&v.name, format!("version `{}`", v.name.name)));
                    // A procedure repeated in a later version is one constant.
                    for proc in new_procedures(&v.procedures, &mut procs) {
                        out.push(value(&proc.name, format!("procedure `{}`", proc.name.name)));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The procedures of a version not already seen (by name) in an earlier
/// version of the same program: a procedure that a later version repeats is
/// one constant.
fn new_procedures<'p>(procedures: &'p [Procedure], seen: &mut HashSet<&'p str>) -> Vec<&'p Procedure> {
    procedures.iter().filter(|p| seen.insert(p.name.name.as_str())).collect()
}

fn union_decls(u: &UnionBody) -> Vec<&Declaration> {
    u.arms.iter().map(|a| &a.decl).chain(u.default.as_deref()).collect()
}

/// `a + b + ...` with literal terms added up.
fn sum_terms<'t>(terms: impl Iterator<Item = &'t str>) -> String {
    let mut total = 0usize;
    let mut exprs: Vec<&str> = Vec::new();
    for t in terms {
        match t.parse::<usize>() {
            Ok(n) => total += n,
            Err(_) => exprs.push(t),
        }
    }
    let mut parts: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
    if total > 0 || parts.is_empty() {
        parts.push(total.to_string());
    }
    parts.join(" + ")
}

/// The fixed length of a concatenation: `None` if any part varies.
fn fixed_terms<'t>(terms: impl Iterator<Item = &'t str>) -> String {
    let mut total = 0usize;
    let mut exprs: Vec<&str> = Vec::new();
    for t in terms {
        if t == "None" {
            return "None".into();
        }
        match literal_fixed(t) {
            Some(n) => total += n,
            None => exprs.push(t),
        }
    }
    exprs.iter().fold(format!("Some({total})"), |acc, e| format!("xdr_spec_rt::fixed_add({acc}, {e})"))
}

/// `a && b` (`all`) or `a || b` (any), with literal terms folded and
/// repeated terms written once.
fn bool_terms<'t>(terms: impl Iterator<Item = &'t str>, all: bool) -> String {
    let (unit, absorbing) = if all { ("true", "false") } else { ("false", "true") };
    let mut exprs: Vec<&str> = Vec::new();
    for t in terms {
        if t == absorbing {
            return absorbing.into();
        }
        if t != unit && !exprs.contains(&t) {
            exprs.push(t);
        }
    }
    if exprs.is_empty() {
        unit.into()
    } else {
        exprs.join(if all { " && " } else { " || " })
    }
}

/// A struct's `encode_to` body: each run of two or more fields of literal
/// fixed length is one [`Writer::fixed`](crate::rt::Writer::fixed) run, and
/// so is the whole struct when it has a fixed length: one bounds check per
/// run instead of one per field.
fn struct_encode(codecs: &[(String, String, Codec)], fixed: &str) -> String {
    let field = |(f, _, c): &(String, String, Codec)| sub(&c.encode, &format!("self.{f}"));
    let mut statements = Vec::new();
    let mut rest = codecs;
    while let Some(first) = rest.first() {
        let run = rest.iter().take_while(|(_, _, c)| literal_fixed(&c.fixed).is_some()).count();
        if run < 2 {
            statements.push(field(first));
            rest = &rest[1..];
            continue;
        }
        let len: usize = rest[..run].iter().filter_map(|(_, _, c)| literal_fixed(&c.fixed)).sum();
        statements.push(fixed_run(&format!("Some({len})"), rest[..run].iter().map(field)));
        rest = &rest[run..];
    }
    if fixed != "None" && statements.len() > 1 {
        statements = vec![fixed_run("Self::FIXED_LEN", statements.into_iter())];
    }
    statements.iter().map(|st| format!("        {};\n", st.replace('\n', "\n        "))).collect()
}

/// The body of `encode_led` for a struct (or newtype) whose first field,
/// `first` at `place`, is a counted array: the lead word and the count share
/// one claim, and the `rest` of the fields follow as in `encode_to`.
fn led_encode(place: &str, first: &Codec, rest: &[(String, String, Codec)]) -> Option<String> {
    let head = first.encode.strip_suffix(".encode_counted(w)")?;
    Some(format!("        {}.encode_counted_led(lead, w);\n{}", sub(head, place), struct_encode(rest, "None")))
}

/// `n` for a fixed length written as the literal `Some(n)`.
fn literal_fixed(fixed: &str) -> Option<usize> {
    fixed.strip_prefix("Some(")?.strip_suffix(')')?.parse().ok()
}

/// A run of writes of length `len` (`Writer::fixed` spelled out, without a
/// closure, so inlining does not depend on how the compiler weighs one),
/// unindented.
fn fixed_run(len: &str, writes: impl Iterator<Item = String>) -> String {
    let body: String = writes.map(|e| format!("        {};\n", e.replace('\n', "\n        "))).collect();
    format!("{{\n    let mut run = w.begin_run({len});\n    {{\n        let w = &mut run;\n{body}    }}\n    w.end_run({len}, run);\n}}")
}
