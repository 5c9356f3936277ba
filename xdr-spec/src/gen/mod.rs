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

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use crate::ast::*;
use crate::shorten::shorten_names;
use crate::symbols::{is_list_struct, list_link, Symbols};

mod codec;
mod collect;
mod consts;
mod enums;
mod layout;
mod module_names;
mod naming;
mod services;
mod structs;
mod typedefs;
mod unions;
mod writer;
mod xdr_impl;

use codec::*;
use collect::*;
use consts::new_procedures;
use layout::Layout;
use writer::Code;
use xdr_impl::*;

pub(crate) use module_names::{module_names, ModuleName, Namespace, OTHER_PRELUDE_NAMES, USED_PRELUDE_NAMES};
pub use naming::{camel, snake};
pub(crate) use naming::{const_pattern, list_names, screaming, snake_case, UNRAWABLE};

/// What the generator needs to know beyond the specification.
///
/// ```
/// use xdr_spec::gen::{generate, GenOptions};
/// let src = "struct point {\n  int x;\n  int y;\n};";
/// let spec = xdr_spec::parse::parse(src).unwrap();
/// let opts = GenOptions::default()
///     .source_name("geometry.x")
///     .line_origins(vec!["geometry.txt section 2, line 40".into()]);
/// let rust = generate(&spec, src, &opts).unwrap();
/// // Each generated item's documentation cites where its XDR came from.
/// assert!(rust.contains("geometry.txt section 2, line 40"), "{rust}");
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct GenOptions {
    /// The name used in documentation for the XDR source, e.g. a spec file.
    pub source_name: String,
    /// Per line of the XDR source (index 0 is line 1), where it came from in
    /// the specification, e.g. `"rfc5666bis-draft-rpcrdma-v1.txt section
    /// 5.1.2, line 518"`. Lines without an entry are cited as lines of
    /// `source_name`.
    pub line_origins: Vec<String>,
    /// Also generate, after the types of each module, a constant whose
    /// evaluation asserts that every type's `MIN_LEN`, `FIXED_LEN`, `PLAIN`
    /// and `BOUNDED` (literals, computed here) equal what the runtime's
    /// `const fn`s compose from the constants of the type's parts: a build
    /// that fails where the generator computed a layout wrongly. For tests.
    #[doc(hidden)]
    pub layout_checks: bool,
    /// Also generate, for each version of each `program`, a module of typed services: a
    /// type per procedure, a `Client` and a `Service` trait with its `Server` (see
    /// `xdr_spec_rt::rpc`). Off by default: a protocol's own types need none.
    pub services: bool,
    /// With [`services`](Self::services): the Upper-Layer Binding file beside the
    /// specification (its name, for documentation and diagnostics, and what it declares),
    /// from which each version's `Binding` is generated. Without one, a version's `Binding`
    /// has nothing DDP-eligible and replies of at most 1024 bytes.
    pub binding: Option<(String, crate::binding::BindingFile)>,
}

impl GenOptions {
    /// Sets [`source_name`](Self::source_name).
    pub fn source_name(mut self, name: impl Into<String>) -> Self {
        self.source_name = name.into();
        self
    }

    /// Sets [`line_origins`](Self::line_origins).
    pub fn line_origins(mut self, origins: Vec<String>) -> Self {
        self.line_origins = origins;
        self
    }

    /// Sets [`services`](Self::services).
    pub fn services(mut self, on: bool) -> Self {
        self.services = on;
        self
    }

    /// Sets [`layout_checks`](Self::layout_checks).
    #[doc(hidden)]
    pub fn layout_checks(mut self, on: bool) -> Self {
        self.layout_checks = on;
        self
    }
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
        out: Code::default(),
        inline_names: HashMap::new(),
        items: Vec::new(),
        item_index: HashMap::new(),
        inline_index: HashMap::new(),
        layouts: RefCell::new(HashMap::new()),
        checks: Vec::new(),
        lifetime: HashSet::new(),
        float: HashSet::new(),
    };
    (g.items, g.inline_names) = collect(spec);
    for (i, item) in g.items.iter().enumerate() {
        g.item_index.insert(item.xdr.clone(), i);
        if item.xdr.contains('.') {
            g.inline_index.insert(item.rust.clone(), i);
        }
    }
    g.infer();
    g.out.line("// @generated by xdr-spec. Do not edit: edit the specification or its errata and rebuild.");
    g.out.blank();
    let ends = modules.iter().map(|m| m.first_definition).chain([spec.definitions.len()]);
    let starts = std::iter::once(0).chain(modules.iter().map(|m| m.first_definition));
    for (part, (start, end)) in starts.zip(ends).enumerate() {
        let module = part.checked_sub(1).map(|m| &modules[m]);
        if let Some(m) = module {
            g.out.line(format!("/// {}", m.doc));
            g.out.line(format!("pub mod {} {{", m.name));
            g.out.indent();
            g.out.line("// The base's names, which an extension may use (none is required).");
            g.out.line("#[allow(unused_imports)]");
            g.out.line("use super::*;");
            g.out.blank();
        }
        g.emit_part(spec, start..end)?;
        g.emit_layout_checks();
        if module.is_some() {
            g.out.trim_blank();
            g.out.dedent();
            g.out.line("}");
            g.out.blank();
        }
    }
    g.check_binding_versions(spec)?;
    g.out.trim_blank();
    Ok(g.out.into_string())
}

/// A line of documentation: `/// text`, or `///` for an empty one.
fn doc_line(text: &str) -> String {
    if text.trim_end().is_empty() {
        "///".to_string()
    } else {
        format!("/// {}", text.trim_end())
    }
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

struct Gen<'s> {
    syms: Symbols<'s>,
    /// Line starts of the XDR source, for diagnostics and the origin of each
    /// item (indexed once: see [`LineIndex`]).
    lines: LineIndex,
    opts: &'s GenOptions,
    out: Code,
    /// Names given to inline bodies, by their address in the AST.
    inline_names: HashMap<usize, String>,
    items: Vec<Item<'s>>,
    /// Index in `items` by XDR name (an inline body's is `parent.field`).
    item_index: HashMap<String, usize>,
    /// Index in `items` of each inline body, by its Rust name.
    inline_index: HashMap<String, usize>,
    /// Each item's layout, once worked out (`None` while it is being
    /// worked out: a type that contains itself).
    layouts: RefCell<HashMap<usize, Option<Layout>>>,
    /// The layout of each `impl Xdr` written, for
    /// [`GenOptions::layout_checks`]: the type, its literals, and their
    /// composition from its parts.
    checks: Vec<(String, Layout, layout::Reference)>,
    /// Rust names of items that borrow from the input.
    lifetime: HashSet<String>,
    /// Rust names of items that hold a float (no `Eq`).
    float: HashSet<String>,
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
                let entry = list_names(&camel(&self.items[i].xdr)).1;
                let (lt, fl) = decls.iter().fold((false, false), |(lt, fl), d| {
                    let (a, b) = self.decl_traits(d);
                    (lt || a, fl || b)
                });
                if let ItemKind::List(_) = self.items[i].kind {
                    // The list view always borrows; its entry struct only if
                    // its fields do.
                    if lt && self.lifetime.insert(entry.clone()) {
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
                if fl && matches!(self.items[i].kind, ItemKind::List(_)) && self.float.insert(entry) {
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

    fn doc(&mut self, i: usize, kind: &str) {
        let item = &self.items[i];
        let origin = self.origin(item.span);
        self.out.line(format!("/// XDR `{kind} {}` ({origin}).", item.xdr));
        if !item.doc.is_empty() {
            self.out.line("///");
            for line in item.doc {
                self.out.line(doc_line(&line.replace('[', "\\[").replace(']', "\\]")));
            }
        }
    }

    fn derives(&mut self, rust: &str, hash: bool) {
        let eq = if self.float.contains(rust) { "" } else { ", Eq" };
        let hash = if hash && eq.is_empty() {
            ""
        } else if hash {
            ", Hash"
        } else {
            ""
        };
        self.out.line(format!("#[derive(Debug, Clone, Copy, PartialEq{eq}{hash})]"));
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
}
