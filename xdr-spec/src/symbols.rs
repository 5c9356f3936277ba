//! The name table of a parsed specification: what each name denotes, the
//! value of every constant and enumerator, and which structs are
//! optional-data lists (RFC 4506 section 4.19's `*next` idiom).
//!
//! Shared by the checker and the generator so that both resolve names the
//! same way.

use std::collections::HashMap;

use crate::ast::*;

/// What a name denotes.
#[derive(Debug, Clone, Copy)]
pub enum Symbol<'s> {
    /// A top-level definition.
    Definition(&'s Definition),
    /// A member of the named top-level enum, with its value if it resolves.
    Enumerator {
        /// The enum that defines it.
        parent: &'s Definition,
        /// Its value expression.
        value: &'s Value,
    },
}

/// The names of a specification.
///
/// ```
/// let spec = xdr_spec::parse::parse("const N = 4; enum e { A = N };").unwrap();
/// let syms = xdr_spec::symbols::Symbols::new(&spec);
/// assert_eq!(syms.value_of_name("A"), Some(4));
/// ```
#[derive(Debug, Default)]
pub struct Symbols<'s> {
    names: HashMap<&'s str, Symbol<'s>>,
}

impl<'s> Symbols<'s> {
    /// Index every top-level definition and every enumerator of a top-level
    /// enum. On duplicates the first definition wins (the checker reports the
    /// rest).
    pub fn new(spec: &'s Spec) -> Self {
        let mut names = HashMap::new();
        for def in &spec.definitions {
            names.entry(def.name.name.as_str()).or_insert(Symbol::Definition(def));
            if let DefinitionKind::Enum(body) = &def.kind {
                for (id, value) in &body.members {
                    names.entry(id.name.as_str()).or_insert(Symbol::Enumerator { parent: def, value });
                }
            }
            if let DefinitionKind::Program(p) = &def.kind {
                for v in &p.versions {
                    names.entry(v.name.name.as_str()).or_insert(Symbol::Definition(def));
                    for proc in &v.procedures {
                        names.entry(proc.name.name.as_str()).or_insert(Symbol::Definition(def));
                    }
                }
            }
        }
        Symbols { names }
    }

    /// What `name` denotes, if anything.
    pub fn get(&self, name: &str) -> Option<Symbol<'s>> {
        self.names.get(name).copied()
    }

    /// The top-level type definition called `name` (not a const or program).
    pub fn type_def(&self, name: &str) -> Option<&'s Definition> {
        match self.get(name)? {
            Symbol::Definition(d) if !matches!(d.kind, DefinitionKind::Const(_) | DefinitionKind::Program(_)) => {
                Some(d)
            }
            _ => None,
        }
    }

    /// Every defined name, for "did you mean" suggestions.
    pub fn names(&self) -> impl Iterator<Item = &'s str> + '_ {
        self.names.keys().copied()
    }

    /// The integer a value denotes, following named constants and
    /// enumerators (with a bound on the chain, so a cycle is `None`).
    pub fn value(&self, v: &Value) -> Option<i64> {
        match v {
            Value::Literal { value, .. } => Some(*value),
            Value::Named(id) => self.value_of_name(&id.name),
        }
    }

    /// The integer a constant or enumerator name denotes. `TRUE` and `FALSE`,
    /// the members of RFC 4506's `bool` (section 4.4), denote 1 and 0 unless
    /// the specification defines them.
    pub fn value_of_name(&self, name: &str) -> Option<i64> {
        let mut name = name;
        for _ in 0..64 {
            let Some(symbol) = self.get(name) else {
                return match name {
                    "TRUE" => Some(1),
                    "FALSE" => Some(0),
                    _ => None,
                };
            };
            let next = match symbol {
                Symbol::Enumerator { value, .. } => value,
                Symbol::Definition(Definition { kind: DefinitionKind::Const(value), .. }) => value,
                Symbol::Definition(_) => return None,
            };
            match next {
                Value::Literal { value, .. } => return Some(*value),
                Value::Named(id) => name = &id.name,
            }
        }
        None
    }

    /// Follow typedefs of plain scalar declarations (`typedef T name;`) to the
    /// type they rename.
    pub fn resolve_alias<'t>(&self, ty: &'t TypeSpec) -> &'t TypeSpec
    where
        's: 't,
    {
        let mut ty = ty;
        for _ in 0..64 {
            let TypeSpec::Named { name, .. } = ty else { return ty };
            match self.type_def(&name.name) {
                Some(Definition {
                    kind: DefinitionKind::Typedef(Declaration::Named { ty: inner, shape: Shape::Scalar, .. }),
                    ..
                }) => ty = inner,
                _ => return ty,
            }
        }
        ty
    }
}

/// Whether `def` is an optional-data list: a struct whose last field is an
/// optional pointer to the struct itself (`struct S *next;`), the idiom of
/// RFC 4506 section 4.19 that the generator turns into a sequence decoded in
/// a loop.
pub fn is_list_struct(def: &Definition) -> bool {
    list_link(def).is_some()
}

/// The `*next` field of an optional-data list struct.
pub fn list_link(def: &Definition) -> Option<&Ident> {
    let DefinitionKind::Struct(body) = &def.kind else { return None };
    match body.fields.last()? {
        Declaration::Named { name, ty: TypeSpec::Named { name: target, .. }, shape: Shape::Optional }
            if target.name == def.name.name && body.fields.len() >= 2 =>
        {
            Some(name)
        }
        _ => None,
    }
}
