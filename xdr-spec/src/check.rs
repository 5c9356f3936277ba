//! The semantic checker: everything about a parsed specification that the
//! grammar cannot say.
//!
//! [`check`] reports, each at the name or token it concerns:
//!
//! - names that are used but never defined, with the closest defined name as a
//!   suggestion;
//! - names defined twice (definitions, enumerators, which share the global
//!   namespace, program versions and procedures), duplicate struct fields,
//!   union arms of the same name but different types, duplicate enum values;
//! - union case labels that are not values of the discriminant's type,
//!   duplicate case values, and discriminants that are not `int`,
//!   `unsigned int`, `bool` or an enum;
//! - types outside RFC 4506 that rpcgen tolerates (`unsigned short`, `u_int`,
//!   ...), with what rpcgen takes them to mean;
//! - recursive types: infinite-size ones, the optional-data list idiom (a
//!   note: the generator turns it into a loop), and every other recursion,
//!   which the generator does not support;
//! - misuse the parser lets through: `string x[N]`, `void` struct fields,
//!   array sizes that are negative or do not fit an `unsigned int`, enum and
//!   constant values that do not fit 32 bits, `struct X` naming a union, a
//!   constant used as a type, a type used as a constant, program, version
//!   and procedure numbers undefined or used twice.
//! - names that are distinct in XDR but not in the generated Rust: two types,
//!   or two constants (enumerators, tuple-struct constructors), of one name
//!   after case conversion (`foo_bar` and `FooBar`, `const foo` and
//!   enumerator `FOO`), the generator's derived names included (inline bodies
//!   named after parent and field, the `...Entry` struct of a list), struct
//!   fields, union arms and enumerators of one type that convert to one name,
//!   a field named `_`, and names that would hide the prelude items the
//!   generated code uses (`Option`, `Some`, `Ok`, ...); a warning where a
//!   name hides another prelude item (`Result`, `Vec`, ...) or is renamed
//!   (`self` -> `self_`, `Self` -> `Self_`).
//!
//! Where a diagnostic concerns an earlier definition too (a duplicate), a
//! [`Severity::Note`] at the earlier one follows it, so that the rendered
//! output names both lines.
//!
//! Names are resolved exactly as the generator resolves them, through
//! [`Symbols`]: a value the checker accepts is one the generator can compute.
//!
//! Nothing here recurses on the number of definitions: the type graph is
//! searched with an explicit stack. Recursion over inline bodies is bounded by
//! the parser's nesting limit.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;

use crate::ast::*;
use crate::gen::{self, Namespace};
use crate::shorten::shorten_names;
use crate::symbols::{is_list_struct, Symbol, Symbols};

mod recursion;

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Information: something the generator treats specially, or the earlier
    /// location an error refers to.
    Note,
    /// Legal but probably not meant.
    Warning,
    /// The specification cannot be turned into code as written.
    Error,
}

impl Severity {
    /// The word used when rendering: `note`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding of the checker.
///
/// ```
/// use xdr_spec::check::{check, has_errors, Severity};
/// let src = "struct s {\n  uint32 n;\n};";
/// let diags = check(&xdr_spec::parse::parse(src).unwrap());
/// assert!(has_errors(&diags));
/// let d = &diags[0];
/// assert_eq!(d.severity, Severity::Error);
/// assert!(d.message.starts_with("undefined name `uint32` (XDR has no `uint32`: a 32-bit unsigned integer is `unsigned int`"));
/// assert!(d.render("s.x", src).starts_with("s.x:2:3: error: undefined name `uint32`"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// How serious it is.
    pub severity: Severity,
    /// The name or token it concerns.
    pub span: Span,
    /// What is wrong, in one line.
    pub message: String,
}

impl Diagnostic {
    /// `FILE:LINE:COL: SEVERITY: MESSAGE`, with a 1-based line and column
    /// computed from `source`, the text the specification was parsed from.
    ///
    /// ```
    /// use xdr_spec::ast::Span;
    /// use xdr_spec::check::{Diagnostic, Severity};
    /// let d = Diagnostic { severity: Severity::Error, span: Span { offset: 3 }, message: "bad".into() };
    /// assert_eq!(d.render("a.x", "ab\ncd"), "a.x:2:1: error: bad");
    /// ```
    pub fn render(&self, file: &str, source: &str) -> String {
        self.render_indexed(file, &LineIndex::new(source))
    }

    /// As [`Diagnostic::render`], with the source's lines indexed once by the
    /// caller: rendering every diagnostic of a long specification through
    /// `render` would scan the source once per diagnostic.
    ///
    /// ```
    /// use xdr_spec::ast::{LineIndex, Span};
    /// use xdr_spec::check::{Diagnostic, Severity};
    /// let d = Diagnostic { severity: Severity::Note, span: Span { offset: 4 }, message: "here".into() };
    /// assert_eq!(d.render_indexed("a.x", &LineIndex::new("ab\ncd")), "a.x:2:2: note: here");
    /// ```
    pub fn render_indexed(&self, file: &str, lines: &LineIndex) -> String {
        let (line, column) = lines.line_col(self.span.offset);
        format!("{file}:{line}:{column}: {}: {}", self.severity, self.message)
    }
}

/// Check a parsed specification. The diagnostics come sorted by span (a note
/// about an earlier definition therefore comes before the error at the later
/// one); diagnostics at the same span keep the order they were found in.
///
/// ```
/// let spec = xdr_spec::parse::parse("struct s { uint32 x; };").unwrap();
/// let diags = xdr_spec::check::check(&spec);
/// assert!(diags[0].message.starts_with("undefined name `uint32`"));
/// assert!(xdr_spec::check::has_errors(&diags));
/// ```
pub fn check(spec: &Spec) -> Vec<Diagnostic> {
    let mut c = Checker::new(spec);
    c.namespace();
    c.rust_names();
    for def in &spec.definitions {
        c.definition(def);
    }
    c.program_numbers();
    c.recursion();
    let mut diags = c.diags;
    diags.sort_by_key(|d| d.span);
    // A note about a first definition is made once per later duplicate.
    let mut seen = HashSet::new();
    diags.retain(|d| seen.insert((d.span, d.severity, d.message.clone())));
    diags
}

/// Whether any diagnostic is an [`Severity::Error`].
pub fn has_errors(diags: &[Diagnostic]) -> bool {
    diags.iter().any(|d| d.severity == Severity::Error)
}

// ---- the checker -----------------------------------------------------------

/// Constant chains longer than this are not followed (as in
/// [`Symbols::value_of_name`]).
const MAX_VALUE_CHAIN: usize = 64;

/// Work allowed for "did you mean" suggestions in one check (see
/// `Checker::suggest_budget`).
const SUGGEST_BUDGET: usize = 20_000_000;

/// Where a declaration appears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Field,
    Arm,
    Typedef,
}

/// The type of a union's discriminant, as far as case labels care.
#[derive(Debug, Clone, Copy)]
enum Disc<'s> {
    Int,
    Unsigned,
    Bool,
    Enum {
        name: Option<&'s str>,
        body: &'s EnumBody,
    },
    /// Not checkable (already reported, or undefined).
    Unknown,
}

/// How a constant name's chain of definitions ends.
enum ChainEnd {
    Value,
    /// At an undefined name or a non-constant: reported where it is written.
    Broken,
    /// A cycle or a chain longer than [`MAX_VALUE_CHAIN`].
    Unresolvable,
}

struct Checker<'s> {
    spec: &'s Spec,
    syms: Symbols<'s>,
    diags: Vec<Diagnostic>,
    /// Members of anonymous (inline) enums: they are not indexed by
    /// [`Symbols`], so they cannot be used as values.
    anon_members: HashMap<&'s str, Span>,
    /// Defined type names, sorted, for suggestions.
    type_names: Vec<&'s str>,
    /// Defined constant and enumerator names, sorted, for suggestions.
    value_names: Vec<&'s str>,
    /// The top-level definition being checked, for messages about inline
    /// bodies.
    top: &'s str,
    /// Suggestions already computed, by undefined name and kind of use.
    suggestions: HashMap<(&'s str, bool), Option<&'s str>>,
    /// Work left for suggestions (candidates scanned plus edit-distance
    /// cells), so that a specification with very many undefined names still
    /// checks in linear time; past it, no more suggestions are made.
    suggest_budget: usize,
    /// Typedefs evidently written backwards, by the undefined name they alias
    /// ([`Backwards`]).
    backwards: HashMap<&'s str, Backwards<'s>>,
}

/// `typedef T N;` where `T` is defined nowhere yet used as a type elsewhere:
/// evidently written backwards (meant `typedef N T;`), as in
/// draft-ietf-nfsv4-rpcrdma-version-two-07's `typedef rpcrdma2_propid uint32;`.
/// "Undefined name `T`" alone would send a reader looking for a missing
/// definition rather than at the typedef.
#[derive(Debug, Clone, Copy)]
struct Backwards<'s> {
    /// Where `T` is written in the typedef.
    at: Span,
    /// The name the typedef declares (`N`).
    declared: &'s str,
    /// The first definition elsewhere that uses `T` as a type.
    used_by: &'s str,
}

/// The typedefs evidently written backwards (see [`Backwards`]). Linear in the
/// specification: one pass records, for each type name used, its first two uses.
fn backwards_typedefs<'s>(spec: &'s Spec, syms: &Symbols<'s>) -> HashMap<&'s str, Backwards<'s>> {
    let mut uses: HashMap<&'s str, Vec<(Span, &'s str)>> = HashMap::new();
    for def in &spec.definitions {
        definition_types(def, &mut |t| {
            if let TypeSpec::Named { name, .. } = t {
                let seen = uses.entry(name.name.as_str()).or_default();
                if seen.len() < 2 {
                    seen.push((name.span, def.name.name.as_str()));
                }
            }
        });
    }
    let mut found = HashMap::new();
    for def in &spec.definitions {
        let DefinitionKind::Typedef(Declaration::Named {
            ty: TypeSpec::Named { name: base, keyword: None },
            shape: Shape::Scalar,
            ..
        }) = &def.kind
        else {
            continue;
        };
        if syms.get(&base.name).is_some() || rpcgen_meaning(&base.name).is_some() {
            continue;
        }
        let elsewhere = uses.get(base.name.as_str()).and_then(|u| u.iter().find(|(span, _)| *span != base.span));
        if let Some(&(_, used_by)) = elsewhere {
            found.entry(base.name.as_str()).or_insert(Backwards { at: base.span, declared: &def.name.name, used_by });
        }
    }
    found
}

impl<'s> Checker<'s> {
    fn new(spec: &'s Spec) -> Self {
        let syms = Symbols::new(spec);
        let mut type_names = Vec::new();
        let mut value_names = Vec::new();
        for def in &spec.definitions {
            match &def.kind {
                DefinitionKind::Const(_) => value_names.push(def.name.name.as_str()),
                DefinitionKind::Program(_) => {}
                DefinitionKind::Enum(body) => {
                    type_names.push(def.name.name.as_str());
                    value_names.extend(body.members.iter().map(|(id, _)| id.name.as_str()));
                }
                _ => type_names.push(def.name.name.as_str()),
            }
        }
        type_names.extend(["bool", "double", "float", "hyper", "int", "quadruple"]);
        type_names.sort_unstable();
        type_names.dedup();
        value_names.sort_unstable();
        value_names.dedup();
        let backwards = backwards_typedefs(spec, &syms);
        Checker {
            backwards,
            spec,
            syms,
            diags: Vec::new(),
            anon_members: HashMap::new(),
            type_names,
            value_names,
            top: "",
            suggestions: HashMap::new(),
            suggest_budget: SUGGEST_BUDGET,
        }
    }

    fn push(&mut self, severity: Severity, span: Span, message: String) {
        self.diags.push(Diagnostic { severity, span, message: shorten_names(message) });
    }

    fn error(&mut self, span: Span, message: String) {
        self.push(Severity::Error, span, message);
    }

    fn warning(&mut self, span: Span, message: String) {
        self.push(Severity::Warning, span, message);
    }

    fn note(&mut self, span: Span, message: String) {
        self.push(Severity::Note, span, message);
    }

    // ---- the global namespace ----------------------------------------------

    /// Every name in the global namespace, in source order: definitions,
    /// enumerators (also of anonymous enums), program versions and
    /// procedures. A procedure may repeat in a later version of the same
    /// program with the same number (rpcbind does this).
    fn namespace(&mut self) {
        let spec = self.spec;
        let mut seen: HashMap<&'s str, (Span, String)> = HashMap::new();
        for def in &spec.definitions {
            let mut names: Vec<(&'s Ident, String)> = vec![(&def.name, definition_desc(def))];
            match &def.kind {
                DefinitionKind::Enum(body) => {
                    for (id, _) in &body.members {
                        names.push((id, format!("an enumerator of enum `{}`", def.name.name)));
                    }
                }
                DefinitionKind::Program(p) => {
                    let mut procs: HashMap<&str, (usize, Option<i64>)> = HashMap::new();
                    for (vi, v) in p.versions.iter().enumerate() {
                        names.push((&v.name, format!("a version of program `{}`", def.name.name)));
                        for proc in &v.procedures {
                            let number = self.syms.value(&proc.number);
                            match procs.get(proc.name.name.as_str()) {
                                Some(&(first_v, first_n)) if first_v != vi && first_n == number && number.is_some() => {
                                    continue
                                }
                                Some(_) => {}
                                None => {
                                    procs.insert(&proc.name.name, (vi, number));
                                }
                            }
                            names.push((&proc.name, format!("a procedure of program `{}`", def.name.name)));
                        }
                    }
                }
                _ => {}
            }
            let mut inline = Vec::new();
            definition_types(def, &mut |ty| {
                if let TypeSpec::InlineEnum(body) = ty {
                    inline.push(body);
                }
            });
            for body in inline {
                for (id, _) in &body.members {
                    names.push((id, "a member of an anonymous enum".to_string()));
                    self.anon_members.entry(&id.name).or_insert(id.span);
                }
            }
            for (id, desc) in names {
                match seen.get(id.name.as_str()) {
                    Some((first, first_desc)) => {
                        let (first, msg) =
                            (*first, format!("duplicate name `{}` (already defined as {first_desc})", id.name));
                        self.error(id.span, msg);
                        self.note(first, format!("`{}` is first defined here", id.name));
                    }
                    None => {
                        seen.insert(&id.name, (id.span, desc));
                    }
                }
            }
        }
    }

    // ---- the generated Rust's names ------------------------------------------

    /// Names that are distinct in XDR but not in the generated Rust module:
    /// two that become the same type, or the same constant (or tuple-struct
    /// constructor), after case conversion and the generator's own naming
    /// (inline bodies after parent and field, `...Entry` structs of lists);
    /// and names that would hide the prelude items the generated code uses
    /// unqualified. Each would be a rustc error (E0428, E0107, ...) in code
    /// the checker let through. The names come from the generator itself
    /// ([`gen::module_names`]), so the two cannot disagree.
    fn rust_names(&mut self) {
        let mut names = gen::module_names(self.spec);
        // The earlier name is the one noted, the later one the error.
        names.sort_by_key(|n| n.span);
        let mut seen: HashMap<(Namespace, &str), &gen::ModuleName> = HashMap::new();
        // A newtype is a type and a constructor of one name: say so once.
        let mut shadowing: HashSet<(Span, &str)> = HashSet::new();
        for n in &names {
            let rust = n.rust.as_str();
            let first_time = shadowing.insert((n.span, rust));
            if first_time && gen::USED_PRELUDE_NAMES.contains(&rust) {
                self.error(
                    n.span,
                    format!(
                        "{} becomes `{rust}` in the generated Rust, which would hide Rust's own `{rust}` that the \
                         generated code uses; rename it",
                        n.what
                    ),
                );
            } else if first_time && gen::OTHER_PRELUDE_NAMES.contains(&rust) {
                self.warning(
                    n.span,
                    format!(
                        "{} becomes `{rust}` in the generated Rust, which hides the Rust prelude's `{rust}` there",
                        n.what
                    ),
                );
            }
            if first_time && rust == "Self_" {
                self.warning(n.span, format!("{} is generated as `Self_`: `Self` cannot name a Rust type", n.what));
            }
            match seen.get(&(n.ns, rust)) {
                // The same XDR name defined twice: reported as a duplicate.
                Some(first) if first.global && n.global && first.xdr == n.xdr => {}
                Some(first) => {
                    let space = match n.ns {
                        Namespace::Type => "type",
                        Namespace::Value => "value (constant or constructor)",
                    };
                    let (first_span, first_what) = (first.span, first.what.clone());
                    self.error(
                        n.span,
                        format!(
                            "{} and {first_what} both become `{rust}` in the generated Rust, where they share the \
                             {space} namespace of one module; rename one of them",
                            n.what
                        ),
                    );
                    self.note(first_span, format!("{first_what} is defined here"));
                }
                None => {
                    seen.insert((n.ns, rust), n);
                }
            }
        }
    }

    /// Names within one Rust type (struct fields, enum variants, union arms)
    /// that are distinct in XDR but the same after `convert`, the case
    /// conversion the generator applies: rustc would refuse the duplicate
    /// field (E0124) or variant (E0428).
    fn rust_members(&mut self, ids: &[&'s Ident], convert: fn(&str) -> String, what: &str, owner: &str) {
        let mut seen: HashMap<String, &'s Ident> = HashMap::new();
        for &id in ids {
            let rust = convert(&id.name);
            match seen.get(&rust) {
                // The same XDR name twice is reported by the rule on
                // duplicates (or allowed, for union arms of one type).
                Some(first) if first.name == id.name => {}
                Some(first) => {
                    let first = *first;
                    self.error(
                        id.span,
                        format!(
                            "{what}s `{}` and `{}` of {owner} both become `{rust}` in the generated Rust; rename one \
                             of them",
                            first.name, id.name
                        ),
                    );
                    self.note(first.span, format!("`{}` is declared here", first.name));
                }
                None => {
                    seen.insert(rust, id);
                }
            }
        }
    }

    /// A struct field's name that is not a Rust identifier
    /// after conversion: `_` is an error, `self`, `super` and `crate` become
    /// `self_`, ... (a warning: they cannot be raw identifiers).
    fn rust_field_name(&mut self, id: &Ident, what: &str, owner: &str) {
        let base = gen::snake_case(&id.name);
        if base == "_" {
            self.error(
                id.span,
                format!("{what} `_` of {owner} cannot be generated: `_` is not a Rust identifier; rename it"),
            );
        } else if gen::UNRAWABLE.contains(&base.as_str()) {
            self.warning(
                id.span,
                format!(
                    "{what} `{}` of {owner} is generated as `{base}_`: `{base}` cannot be a Rust identifier, not even \
                     a raw one",
                    id.name
                ),
            );
        }
    }

    // ---- definitions -------------------------------------------------------

    fn definition(&mut self, def: &'s Definition) {
        self.top = &def.name.name;
        let name = &def.name.name;
        match &def.kind {
            DefinitionKind::Const(v) => self.const_def(def, v),
            DefinitionKind::Typedef(d) => self.decl(d, Place::Typedef),
            DefinitionKind::Enum(body) => self.enum_body(body, &format!("enum `{name}`")),
            DefinitionKind::Struct(body) => self.struct_body(body, &format!("struct `{name}`")),
            DefinitionKind::Union(body) => self.union_body(body, &format!("union `{name}`")),
            DefinitionKind::Program(p) => self.program(def, p),
        }
    }

    fn const_def(&mut self, def: &'s Definition, v: &'s Value) {
        match self.value(v) {
            Some(n) if !fits_32(n) => self.error(
                v.span(),
                format!(
                    "constant `{}` = {} does not fit in 32 bits (an int or an unsigned int)",
                    def.name.name,
                    show_value(v, n)
                ),
            ),
            Some(_) => {}
            None => {
                if let Value::Named(id) = v {
                    if let ChainEnd::Unresolvable = self.chain_end(&id.name) {
                        self.error(
                            def.name.span,
                            format!(
                                "the value of constant `{}` cannot be resolved: constants refer to each other in a \
                                 cycle, or in a chain longer than {MAX_VALUE_CHAIN}",
                                def.name.name
                            ),
                        );
                    }
                }
            }
        }
    }

    fn enum_body(&mut self, body: &'s EnumBody, owner: &str) {
        let ids: Vec<&'s Ident> = body.members.iter().map(|(id, _)| id).collect();
        self.rust_members(&ids, gen::camel, "enumerator", owner);
        let mut seen: HashMap<i64, &'s Ident> = HashMap::new();
        for (id, v) in &body.members {
            let Some(n) = self.value(v) else {
                if let Value::Named(target) = v {
                    if let ChainEnd::Unresolvable = self.chain_end(&target.name) {
                        self.error(
                            id.span,
                            format!(
                                "the value of enumerator `{}` cannot be resolved: constants refer to each other in a \
                                 cycle, or in a chain longer than {MAX_VALUE_CHAIN}",
                                id.name
                            ),
                        );
                    }
                }
                continue;
            };
            if i32::try_from(n).is_err() {
                self.error(
                    v.span(),
                    format!(
                        "the value {} of enumerator `{}` does not fit in a 32-bit signed int",
                        show_value(v, n),
                        id.name
                    ),
                );
            }
            match seen.get(&n) {
                Some(first) => {
                    let first = *first;
                    self.error(
                        id.span,
                        format!("enumerator `{}` of {owner} has the same value {n} as `{}`", id.name, first.name),
                    );
                    self.note(first.span, format!("`{}` is defined here", first.name));
                }
                None => {
                    seen.insert(n, id);
                }
            }
        }
    }

    fn struct_body(&mut self, body: &'s StructBody, owner: &str) {
        let mut seen: HashMap<&'s str, Span> = HashMap::new();
        let ids: Vec<&'s Ident> = body.fields.iter().filter_map(Declaration::name).collect();
        self.rust_members(&ids, gen::snake, "field", owner);
        for field in &body.fields {
            self.decl(field, Place::Field);
            let Some(id) = field.name() else { continue };
            self.rust_field_name(id, "field", owner);
            match seen.get(id.name.as_str()) {
                Some(&first) => {
                    self.error(id.span, format!("duplicate field `{}` in {owner}", id.name));
                    self.note(first, format!("`{}` is first declared here", id.name));
                }
                None => {
                    seen.insert(&id.name, id.span);
                }
            }
        }
    }

    fn union_body(&mut self, body: &'s UnionBody, owner: &str) {
        let disc = self.discriminant(&body.discriminant, owner);
        let members: HashSet<i64> = match disc {
            Disc::Enum { body, .. } => body.members.iter().filter_map(|(_, v)| self.syms.value(v)).collect(),
            _ => HashSet::new(),
        };
        let arm_ids: Vec<&'s Ident> = union_decls(body).into_iter().filter_map(Declaration::name).collect();
        // Arms are not fields in the generated enum, but Rust code names an
        // arm by its converted name (the variant of a multi-label arm, the
        // type of an inline body): two spellings of one name are one name.
        self.rust_members(&arm_ids, gen::snake, "arm", owner);
        let mut values: HashMap<i64, Span> = HashMap::new();
        let mut arms: HashMap<&'s str, (Span, String)> = HashMap::new();
        for arm in &body.arms {
            for label in &arm.cases {
                let Some(v) = self.value(label) else { continue };
                if !self.case_label(label, v, disc, &members, owner) {
                    continue;
                }
                match values.get(&v) {
                    Some(&first) => {
                        self.error(label.span(), format!("duplicate case value {} in {owner}", show_value(label, v)));
                        self.note(first, format!("the first case with value {v} is here"));
                    }
                    None => {
                        values.insert(v, label.span());
                    }
                }
            }
            self.decl(&arm.decl, Place::Arm);
            self.arm_name(&arm.decl, &mut arms, owner);
        }
        if let Some(d) = &body.default {
            self.decl(d, Place::Arm);
            self.arm_name(d, &mut arms, owner);
        }
    }

    /// Arms may share a name only when they share the type: they denote one
    /// field that several cases carry.
    fn arm_name(&mut self, d: &'s Declaration, arms: &mut HashMap<&'s str, (Span, String)>, owner: &str) {
        let Some(id) = d.name() else { return };
        let this = decl_str(d);
        match arms.get(id.name.as_str()) {
            Some((_, first)) if *first == this => self.note(
                id.span,
                format!(
                    "{owner} has more than one arm named `{}`, all `{this}`; allowed, as the types are identical \
                     (RFC 4506 section 6.4 wants names unique in a union, and the C rpcgen makes of it does not \
                     compile: one arm with several case labels says the same)",
                    id.name
                ),
            ),
            Some((first_span, first)) => {
                let (first_span, msg) = (
                    *first_span,
                    format!(
                        "union arm `{}` of {owner} is declared again with a different type: `{this}`, not `{first}`",
                        id.name
                    ),
                );
                self.error(id.span, msg);
                self.note(first_span, format!("`{}` is first declared here", id.name));
            }
            None => {
                arms.insert(&id.name, (id.span, this));
            }
        }
    }

    fn discriminant(&mut self, d: &'s Declaration, owner: &str) -> Disc<'s> {
        let Declaration::Named { name, ty, shape } = d else {
            self.error(d.span(), format!("the discriminant of {owner} cannot be `void`"));
            return Disc::Unknown;
        };
        self.type_spec(ty);
        if *shape != Shape::Scalar {
            self.error(
                name.span,
                format!("the discriminant `{}` of {owner} must be a single value, not an array or optional", name.name),
            );
            return Disc::Unknown;
        }
        let bad = |this: &mut Self| {
            this.error(
                name.span,
                format!(
                    "the discriminant `{}` of {owner} has type `{}`: it must be int, unsigned int, bool or an enum",
                    name.name,
                    type_str(ty)
                ),
            );
            Disc::Unknown
        };
        let mut t = ty;
        for _ in 0..=self.spec.definitions.len() {
            match t {
                TypeSpec::Int => return Disc::Int,
                TypeSpec::UnsignedInt => return Disc::Unsigned,
                TypeSpec::Bool => return Disc::Bool,
                TypeSpec::InlineEnum(body) => return Disc::Enum { name: None, body },
                TypeSpec::NonStandard { .. } => return Disc::Unknown,
                TypeSpec::Named { name: target, .. } => match self.syms.type_def(&target.name) {
                    Some(Definition { kind: DefinitionKind::Enum(body), name, .. }) => {
                        return Disc::Enum { name: Some(&name.name), body }
                    }
                    Some(Definition {
                        kind: DefinitionKind::Typedef(Declaration::Named { ty: inner, shape: Shape::Scalar, .. }),
                        ..
                    }) => t = inner,
                    Some(_) => return bad(self),
                    None => return Disc::Unknown,
                },
                _ => return bad(self),
            }
        }
        // A cycle of typedefs: reported as an infinite-size type.
        Disc::Unknown
    }

    /// Whether a case label is a legal value of the discriminant (reporting
    /// it if not).
    fn case_label(&mut self, label: &'s Value, v: i64, disc: Disc<'s>, members: &HashSet<i64>, owner: &str) -> bool {
        let shown = show_value(label, v);
        let problem = match disc {
            Disc::Enum { name, .. } => {
                let enum_desc = name.map_or("the discriminant's anonymous enum".to_string(), |n| format!("enum `{n}`"));
                let parent = match label {
                    Value::Named(id) => match self.syms.get(&id.name) {
                        Some(Symbol::Enumerator { parent, .. }) => Some((&id.name, &parent.name.name)),
                        _ => None,
                    },
                    Value::Literal { .. } => None,
                };
                match parent {
                    Some((label, p)) if Some(p.as_str()) != name => Some(format!(
                        "case label `{label}` is a member of enum `{p}`, not of {enum_desc}, the type of the \
                         discriminant of {owner}"
                    )),
                    Some(_) => None,
                    None if members.contains(&v) => None,
                    None => Some(format!("case value {shown} is not a value of {enum_desc}")),
                }
            }
            Disc::Bool if v != 0 && v != 1 => Some(format!("case value {shown} is not a bool (TRUE = 1 or FALSE = 0)")),
            Disc::Int if i32::try_from(v).is_err() => {
                Some(format!("case value {shown} does not fit the int discriminant of {owner}"))
            }
            Disc::Unsigned if u32::try_from(v).is_err() => {
                Some(format!("case value {shown} does not fit the unsigned int discriminant of {owner}"))
            }
            _ => None,
        };
        match problem {
            Some(msg) => {
                self.error(label.span(), msg);
                false
            }
            None => true,
        }
    }

    fn program(&mut self, def: &'s Definition, p: &'s Program) {
        let pname = &def.name.name;
        if let Some(n) = self.value(&p.number) {
            self.check_u32(&p.number, n, &format!("the number of program `{pname}`"));
        }
        let mut versions: HashMap<i64, &'s Ident> = HashMap::new();
        for v in &p.versions {
            if let Some(n) = self.value(&v.number) {
                self.check_u32(&v.number, n, &format!("the number of version `{}`", v.name.name));
                match versions.get(&n) {
                    Some(first) => {
                        let first = *first;
                        self.error(
                            v.number.span(),
                            format!(
                                "version number {} of program `{pname}` is already used by version `{}`",
                                show_value(&v.number, n),
                                first.name
                            ),
                        );
                        self.note(first.span, format!("`{}` is defined here", first.name));
                    }
                    None => {
                        versions.insert(n, &v.name);
                    }
                }
            }
            let mut procs: HashMap<i64, &'s Ident> = HashMap::new();
            for proc in &v.procedures {
                if let Some(t) = &proc.result {
                    self.type_spec(t);
                }
                for a in &proc.args {
                    self.type_spec(a);
                }
                let Some(n) = self.value(&proc.number) else { continue };
                self.check_u32(&proc.number, n, &format!("the number of procedure `{}`", proc.name.name));
                match procs.get(&n) {
                    Some(first) => {
                        let first = *first;
                        self.error(
                            proc.number.span(),
                            format!(
                                "procedure number {} of version `{}` is already used by procedure `{}`",
                                show_value(&proc.number, n),
                                v.name.name,
                                first.name
                            ),
                        );
                        self.note(first.span, format!("`{}` is defined here", first.name));
                    }
                    None => {
                        procs.insert(n, &proc.name);
                    }
                }
            }
        }
    }

    /// Two programs with the same number.
    fn program_numbers(&mut self) {
        let spec = self.spec;
        let mut seen: HashMap<i64, &'s Ident> = HashMap::new();
        for def in &spec.definitions {
            let DefinitionKind::Program(p) = &def.kind else { continue };
            let Some(n) = self.syms.value(&p.number) else { continue };
            match seen.get(&n) {
                Some(first) => {
                    let first = *first;
                    self.error(
                        p.number.span(),
                        format!(
                            "program number {} of `{}` is already used by program `{}`",
                            show_value(&p.number, n),
                            def.name.name,
                            first.name
                        ),
                    );
                    self.note(first.span, format!("`{}` is defined here", first.name));
                }
                None => {
                    seen.insert(n, &def.name);
                }
            }
        }
    }

    fn check_u32(&mut self, v: &Value, n: i64, what: &str) {
        if u32::try_from(n).is_err() {
            self.error(v.span(), format!("{what}, {}, does not fit in an unsigned int", show_value(v, n)));
        }
    }

    // ---- declarations and types --------------------------------------------

    fn decl(&mut self, d: &'s Declaration, place: Place) {
        let Declaration::Named { name, ty, shape } = d else {
            if place == Place::Field {
                self.error(d.span(), "`void` is not allowed as a struct field (only a union arm may be void)".into());
            }
            return;
        };
        self.type_spec(ty);
        let n = &name.name;
        if let TypeSpec::Named { name: target, .. } = ty {
            // The generator turns a list struct into a sequence, which only a
            // pointer to it denotes; any other use it refuses.
            if *shape != Shape::Optional && self.syms.type_def(&target.name).is_some_and(is_list_struct) {
                self.error(
                    target.span,
                    format!(
                        "`{t}` is an optional-data list; the generator supports it only through a pointer (`{t} \
                         *{n}`), which is how RFC 4506 section 4.19 uses it",
                        t = target.name
                    ),
                );
            }
        }
        match (ty, shape) {
            (TypeSpec::String, Shape::FixedArray(_)) => self.error(
                name.span,
                format!(
                    "`string {n}[...]` is not XDR: strings are variable-length; write `string {n}<N>` (or \
                     `opaque {n}[N]` for fixed-length bytes)"
                ),
            ),
            (TypeSpec::String, Shape::Scalar | Shape::Optional) => {
                self.error(name.span, format!("`string {n}` needs a maximum length: write `string {n}<N>` or `<>`"))
            }
            (TypeSpec::Opaque, Shape::Scalar | Shape::Optional) => {
                self.error(name.span, format!("`opaque {n}` needs a length: write `opaque {n}[N]` or `opaque {n}<N>`"))
            }
            _ => {}
        }
        match shape {
            Shape::FixedArray(v) => {
                if let Some(size) = self.value(v) {
                    if self.bound(v, size, n) && size == 0 {
                        self.warning(v.span(), format!("fixed-length array `{n}` has size 0"));
                    }
                }
            }
            Shape::VarArray(Some(v)) => {
                if let Some(size) = self.value(v) {
                    self.bound(v, size, n);
                }
            }
            _ => {}
        }
    }

    /// An array size or maximum: whether it is a legal one.
    fn bound(&mut self, v: &Value, size: i64, name: &str) -> bool {
        if size < 0 {
            self.error(v.span(), format!("the size of array `{name}`, {}, is negative", show_value(v, size)));
            false
        } else if u32::try_from(size).is_err() {
            self.error(
                v.span(),
                format!("the size of array `{name}`, {}, does not fit in an unsigned int", show_value(v, size)),
            );
            false
        } else {
            true
        }
    }

    fn type_spec(&mut self, ty: &'s TypeSpec) {
        let top = self.top;
        match ty {
            TypeSpec::NonStandard { spelling, span } => self.non_standard(spelling, *span),
            TypeSpec::Named { name, keyword } => self.type_ref(name, *keyword),
            TypeSpec::InlineEnum(body) => self.enum_body(body, &format!("the anonymous enum in `{top}`")),
            TypeSpec::InlineStruct(body) => self.struct_body(body, &format!("the anonymous struct in `{top}`")),
            TypeSpec::InlineUnion(body) => self.union_body(body, &format!("the anonymous union in `{top}`")),
            _ => {}
        }
    }

    fn non_standard(&mut self, spelling: &str, span: Span) {
        let meaning = rpcgen_meaning(spelling).unwrap_or("a C type");
        self.error(span, format!("`{spelling}` is not an RFC 4506 type (rpcgen accepts it as {meaning})"));
    }

    /// A name used as a type.
    fn type_ref(&mut self, id: &'s Ident, keyword: Option<TypeKeyword>) {
        let name = &id.name;
        match self.syms.get(name) {
            None => {
                if keyword.is_none() && rpcgen_meaning(name).is_some() {
                    self.non_standard(name, id.span);
                } else {
                    self.undefined(id, true);
                }
            }
            Some(Symbol::Enumerator { parent, .. }) => {
                let msg = format!("`{name}` is an enumerator of enum `{}`, not a type", parent.name.name);
                self.error(id.span, msg);
            }
            Some(Symbol::Definition(def)) => match (&def.kind, keyword) {
                (DefinitionKind::Const(_) | DefinitionKind::Program(_), _) => {
                    let msg = format!("`{name}` is {}, not a type", symbol_desc(name, def));
                    self.error(id.span, msg);
                }
                (DefinitionKind::Struct(_), None | Some(TypeKeyword::Struct))
                | (DefinitionKind::Union(_), None | Some(TypeKeyword::Union))
                | (DefinitionKind::Enum(_), None | Some(TypeKeyword::Enum))
                | (DefinitionKind::Typedef(_), None) => {}
                (_, Some(kw)) => {
                    let kw = keyword_str(kw);
                    let article = if kw == "enum" { "an" } else { "a" };
                    let msg = format!("`{kw} {name}` refers to {}, not {article} {kw}", symbol_desc(name, def));
                    self.error(id.span, msg);
                }
            },
        }
    }

    /// A value: checks the name it uses, and returns the integer if it
    /// resolves.
    fn value(&mut self, v: &'s Value) -> Option<i64> {
        let id = match v {
            Value::Literal { value, .. } => return Some(*value),
            Value::Named(id) => id,
        };
        let name = &id.name;
        match self.syms.get(name) {
            None => {
                if let Some(n) = self.syms.value_of_name(name) {
                    return Some(n); // TRUE and FALSE
                }
                if self.anon_members.contains_key(name.as_str()) {
                    self.error(
                        id.span,
                        format!(
                            "`{name}` is a member of an anonymous enum, which cannot be used as a value: define the \
                             enum at top level"
                        ),
                    );
                } else {
                    self.undefined(id, false);
                }
                None
            }
            Some(Symbol::Enumerator { .. }) => self.syms.value_of_name(name),
            Some(Symbol::Definition(def)) => match &def.kind {
                DefinitionKind::Const(_) => self.syms.value_of_name(name),
                _ => {
                    let msg = format!("`{name}` is {}, not a constant", symbol_desc(name, def));
                    self.error(id.span, msg);
                    None
                }
            },
        }
    }

    fn chain_end(&self, name: &str) -> ChainEnd {
        let mut name = name;
        for _ in 0..MAX_VALUE_CHAIN {
            let next = match self.syms.get(name) {
                Some(Symbol::Enumerator { value, .. }) => value,
                Some(Symbol::Definition(Definition { kind: DefinitionKind::Const(value), .. })) => value,
                _ => return ChainEnd::Broken,
            };
            match next {
                Value::Literal { .. } => return ChainEnd::Value,
                Value::Named(id) => name = &id.name,
            }
        }
        ChainEnd::Unresolvable
    }

    fn undefined(&mut self, id: &'s Ident, as_type: bool) {
        if let Some(b) = self.backwards.get(id.name.as_str()).copied().filter(|_| as_type) {
            let (t, n) = (&id.name, b.declared);
            let msg = if b.at == id.span {
                format!(
                    "`typedef {t} {n};` looks written backwards: it declares `{n}` as a new name for `{t}`, \
                     which nothing defines, while `{t}` is used as a type (by `{}`); a typedef names the \
                     existing type first: `typedef {n} {t};`",
                    b.used_by
                )
            } else {
                format!("undefined name `{t}` (the typedef `typedef {t} {n};` looks written backwards)")
            };
            return self.error(id.span, msg);
        }
        if let Some(hint) = as_type.then(|| fixed_width_integer(&id.name)).flatten() {
            // A "did you mean" would name another undefined-by-XDR spelling at best.
            return self.error(id.span, format!("undefined name `{}` ({hint})", id.name));
        }
        let key = (id.name.as_str(), as_type);
        let suggestion = match self.suggestions.get(&key) {
            Some(s) => *s,
            None => {
                let candidates = if as_type { &self.type_names } else { &self.value_names };
                let s = suggest(&id.name, candidates, &mut self.suggest_budget);
                self.suggestions.insert(key, s);
                s
            }
        };
        let msg = match suggestion {
            Some(s) => format!("undefined name `{}` (did you mean `{s}`?)", id.name),
            None => format!("undefined name `{}`", id.name),
        };
        self.error(id.span, msg);
    }
}

// ---- helpers -----------------------------------------------------------------

/// The arms' declarations of a union, the default last.
fn union_decls(u: &UnionBody) -> Vec<&Declaration> {
    u.arms.iter().map(|a| &a.decl).chain(u.default.as_deref()).collect()
}

/// Visit every type specifier in a definition, inline bodies included.
fn definition_types<'a>(def: &'a Definition, f: &mut impl FnMut(&'a TypeSpec)) {
    match &def.kind {
        DefinitionKind::Const(_) => {}
        DefinitionKind::Typedef(d) => decl_types(d, f),
        DefinitionKind::Enum(_) => {}
        DefinitionKind::Struct(b) => b.fields.iter().for_each(|d| decl_types(d, f)),
        DefinitionKind::Union(b) => union_types(b, f),
        DefinitionKind::Program(p) => {
            for v in &p.versions {
                for proc in &v.procedures {
                    proc.result.iter().chain(&proc.args).for_each(|t| type_types(t, f));
                }
            }
        }
    }
}

fn decl_types<'a>(d: &'a Declaration, f: &mut impl FnMut(&'a TypeSpec)) {
    if let Declaration::Named { ty, .. } = d {
        type_types(ty, f);
    }
}

fn union_types<'a>(b: &'a UnionBody, f: &mut impl FnMut(&'a TypeSpec)) {
    decl_types(&b.discriminant, f);
    b.arms.iter().for_each(|a| decl_types(&a.decl, f));
    if let Some(d) = &b.default {
        decl_types(d, f);
    }
}

fn type_types<'a>(ty: &'a TypeSpec, f: &mut impl FnMut(&'a TypeSpec)) {
    f(ty);
    match ty {
        TypeSpec::InlineStruct(b) => b.fields.iter().for_each(|d| decl_types(d, f)),
        TypeSpec::InlineUnion(b) => union_types(b, f),
        _ => {}
    }
}

/// For a fixed-width integer name a specification uses without defining it (`uint32`,
/// `uint64_t`, ...), what XDR calls that integer and the typedef that would define it: the
/// RPC-over-RDMA drafts all use `uint32` and `uint64` this way.
fn fixed_width_integer(name: &str) -> Option<String> {
    let bare = name.strip_suffix("_t").unwrap_or(name);
    let (unsigned, bits) = match bare.strip_prefix("uint").or_else(|| bare.strip_prefix("u_int")) {
        Some(bits) => (true, bits),
        None => (false, bare.strip_prefix("int")?),
    };
    let (xdr, section) = match (unsigned, bits) {
        (true, "32") => ("unsigned int", "4.2"),
        (false, "32") => ("int", "4.1"),
        (true, "64") => ("unsigned hyper", "4.5"),
        (false, "64") => ("hyper", "4.5"),
        _ => return None,
    };
    Some(format!(
        "XDR has no `{name}`: a {bits}-bit {}integer is `{xdr}` (RFC 4506 section {section}); \
         `typedef {xdr} {name};` defines it",
        if unsigned { "unsigned " } else { "" }
    ))
}

/// What rpcgen makes of a type name or spelling outside RFC 4506.
fn rpcgen_meaning(spelling: &str) -> Option<&'static str> {
    Some(match spelling {
        "unsigned short" | "u_short" => {
            "`u_short`, a 4-byte unsigned int on the wire via xdr_u_short; write `unsigned int`"
        }
        "unsigned long" | "u_long" => {
            "`u_long`, a 4-byte unsigned int on the wire via xdr_u_long; write `unsigned int`"
        }
        "unsigned char" | "u_char" => {
            "`u_char`, a 4-byte unsigned int on the wire via xdr_u_char; write `unsigned int`"
        }
        "short" => "`short`, a 4-byte int on the wire via xdr_short; write `int`",
        "long" => "`long`, a 4-byte int on the wire via xdr_long; write `int`",
        "char" => "`char`, a 4-byte int on the wire via xdr_char; write `int`",
        "unsigned" | "u_int" => "`unsigned int` via xdr_u_int; write `unsigned int`",
        "u_hyper" => "`unsigned hyper` via xdr_u_hyper; write `unsigned hyper`",
        "u_quad_t" => "`unsigned hyper` via xdr_u_quad_t; write `unsigned hyper`",
        "quad_t" => "`hyper` via xdr_quad_t; write `hyper`",
        _ => return None,
    })
}

fn keyword_str(kw: TypeKeyword) -> &'static str {
    match kw {
        TypeKeyword::Struct => "struct",
        TypeKeyword::Union => "union",
        TypeKeyword::Enum => "enum",
    }
}

/// "a struct", "a constant", ... for a top-level definition.
fn definition_desc(def: &Definition) -> String {
    match &def.kind {
        DefinitionKind::Const(_) => "a constant",
        DefinitionKind::Typedef(_) => "a typedef",
        DefinitionKind::Enum(_) => "an enum",
        DefinitionKind::Struct(_) => "a struct",
        DefinitionKind::Union(_) => "a union",
        DefinitionKind::Program(_) => "a program",
    }
    .to_string()
}

/// What `name`, which [`Symbols`] maps to `def`, is.
fn symbol_desc(name: &str, def: &Definition) -> String {
    if let DefinitionKind::Program(p) = &def.kind {
        if def.name.name != name {
            let what = if p.versions.iter().any(|v| v.name.name == name) { "a version" } else { "a procedure" };
            return format!("{what} of program `{}`", def.name.name);
        }
    }
    definition_desc(def)
}

fn fits_32(n: i64) -> bool {
    (i64::from(i32::MIN)..=i64::from(u32::MAX)).contains(&n)
}

/// `5`, or `` `NAME` (= 5) `` for a named value.
fn show_value(v: &Value, n: i64) -> String {
    match v {
        Value::Literal { .. } => n.to_string(),
        Value::Named(id) => format!("`{}` (= {n})", id.name),
    }
}

fn value_str(v: &Value) -> String {
    match v {
        Value::Literal { value, .. } => value.to_string(),
        Value::Named(id) => id.name.clone(),
    }
}

/// A type as it would be written, without spans (used to compare union arms).
fn type_str(ty: &TypeSpec) -> String {
    match ty {
        TypeSpec::Int => "int".into(),
        TypeSpec::UnsignedInt => "unsigned int".into(),
        TypeSpec::Hyper => "hyper".into(),
        TypeSpec::UnsignedHyper => "unsigned hyper".into(),
        TypeSpec::Float => "float".into(),
        TypeSpec::Double => "double".into(),
        TypeSpec::Quadruple => "quadruple".into(),
        TypeSpec::Bool => "bool".into(),
        TypeSpec::Opaque => "opaque".into(),
        TypeSpec::String => "string".into(),
        TypeSpec::NonStandard { spelling, .. } => spelling.clone(),
        TypeSpec::Named { name, keyword } => match keyword {
            Some(kw) => format!("{} {}", keyword_str(*kw), name.name),
            None => name.name.clone(),
        },
        TypeSpec::InlineEnum(b) => {
            let members: Vec<_> = b.members.iter().map(|(id, v)| format!("{} = {}", id.name, value_str(v))).collect();
            format!("enum {{ {} }}", members.join(", "))
        }
        TypeSpec::InlineStruct(b) => {
            let fields: String = b.fields.iter().map(|d| format!("{}; ", decl_str(d))).collect();
            format!("struct {{ {fields}}}")
        }
        TypeSpec::InlineUnion(b) => {
            let mut s = format!("union switch ({}) {{ ", decl_str(&b.discriminant));
            for arm in &b.arms {
                for c in &arm.cases {
                    s += &format!("case {}: ", value_str(c));
                }
                s += &format!("{}; ", decl_str(&arm.decl));
            }
            if let Some(d) = &b.default {
                s += &format!("default: {}; ", decl_str(d));
            }
            s + "}"
        }
    }
}

/// A declaration as it would be written, without spans.
fn decl_str(d: &Declaration) -> String {
    let Declaration::Named { name, ty, shape } = d else { return "void".into() };
    let (t, n) = (type_str(ty), &name.name);
    match shape {
        Shape::Scalar => format!("{t} {n}"),
        Shape::FixedArray(v) => format!("{t} {n}[{}]", value_str(v)),
        Shape::VarArray(None) => format!("{t} {n}<>"),
        Shape::VarArray(Some(v)) => format!("{t} {n}<{}>", value_str(v)),
        Shape::Optional => format!("{t} *{n}"),
    }
}

// ---- suggestions -------------------------------------------------------------

/// The defined name closest to `name` by edit distance, if close enough: at
/// most a third of the name's length (at least 2, and less than the whole
/// name). Ties go to the longer common prefix, then to the alphabetically
/// first. Each candidate scanned and each edit-distance cell computed is taken
/// from `budget`; when it runs out the answer is `None`.
fn suggest<'a>(name: &str, candidates: &[&'a str], budget: &mut usize) -> Option<&'a str> {
    let len = name.chars().count();
    let limit = (len / 3).max(2).min(len.saturating_sub(1));
    let mut best: Option<(usize, Reverse<usize>, &'a str)> = None;
    for &c in candidates {
        let clen = c.chars().count();
        let cost = 1 + if clen.abs_diff(len) > limit { 0 } else { len * clen };
        if *budget < cost {
            *budget = 0;
            return None;
        }
        *budget -= cost;
        if clen.abs_diff(len) > limit {
            continue;
        }
        let d = levenshtein(name, c);
        if d == 0 || d > limit {
            continue;
        }
        let prefix = name.chars().zip(c.chars()).take_while(|(a, b)| a == b).count();
        let key = (d, Reverse(prefix), c);
        if best.is_none_or(|b| key < b) {
            best = Some(key);
        }
    }
    best.map(|(.., c)| c)
}

/// The Levenshtein distance between two strings, by characters.
fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_in_messages() {
        let long = "a".repeat(70);
        assert_eq!(
            shorten_names(format!("undefined name `{long}` (did you mean `{long}_`?)")),
            format!("undefined name `{0}... (70 bytes)` (did you mean `{0}... (71 bytes)`?)", &long[..64])
        );
        let short = format!("`{}` and `{}` are fine", "b".repeat(64), "c".repeat(10));
        assert_eq!(shorten_names(short.clone()), short);
    }

    #[test]
    fn levenshtein_distances() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("rpcrdma2_chunks", "rpcrdma2_chunk_lists"), 5);
    }

    #[test]
    fn suggestions() {
        let names = ["rpcrdma2_chunk_lists", "rpcrdma2_write_list", "rpcrdma2_write_chunk", "rpcrdma2_proc"];
        let mut budget = usize::MAX;
        assert_eq!(suggest("rpcrdma2_chunks", &names, &mut budget), Some("rpcrdma2_chunk_lists"));
        assert_eq!(suggest("x", &["y"], &mut budget), None);
        assert_eq!(suggest("uint32", &["uint64"], &mut budget), Some("uint64"));
        assert_eq!(suggest("completely", &["different"], &mut budget), None);
        // Equal distance: the longer common prefix wins.
        assert_eq!(suggest("abcd_x", &["aacd_x", "abcd_y"], &mut budget), Some("abcd_y"));
        let mut small = 3;
        assert_eq!(suggest("uint32", &["uint64"], &mut small), None);
        assert_eq!(small, 0);
    }
}
