//! The names the generated module defines, for the checker to find
//! collisions before rustc does.

use super::*;

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
        let kind = match item.kind {
            ItemKind::Struct(_) => "struct",
            ItemKind::List(_) => "list struct",
            ItemKind::Enum(_) => "enum",
            ItemKind::Union(_) => "union",
            ItemKind::Typedef(_) => "typedef",
        };
        // Inline bodies are named `Parent.field` by `collect`.
        let (what, field, xdr) = match item.xdr.split_once('.') {
            Some((_, field)) => (format!("the anonymous {kind} of field `{field}`"), true, field),
            None => (format!("{kind} `{}`", item.xdr), false, item.xdr.as_str()),
        };
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
                let entry = list_names(&camel(&item.xdr)).1;
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
