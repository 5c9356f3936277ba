//! Pass 1: the types to emit, in order, with the names given to inline
//! bodies.

use super::*;

/// The types to emit, in order, and the names given to inline bodies (by the
/// address of their [`TypeSpec`]). Shared with [`module_names`](fn@super::module_names), so that the
/// checker sees exactly the names the generator will write.
pub(super) fn collect(spec: &Spec) -> (Vec<Item<'_>>, HashMap<usize, String>) {
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
        // A list whose entries get a struct of their own names the list and
        // the entry apart; inline bodies are still named after the struct.
        let item_rust = match &def.kind {
            DefinitionKind::Struct(b) if is_list_struct(def) && b.fields.len() != 2 => list_names(&rust).0,
            _ => rust.clone(),
        };
        items.push(Item {
            def: index,
            rust: item_rust,
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
pub(super) fn collect_inline<'s>(
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

pub(super) fn union_decls(u: &UnionBody) -> Vec<&Declaration> {
    u.arms.iter().map(|a| &a.decl).chain(u.default.as_deref()).collect()
}
