//! Recursive types: every cycle of type references, found without recursion
//! (strongly connected components of the type graph, with an explicit
//! stack), so no specification can overflow the checker's stack. Reported:
//! types of infinite size (a cycle that every value must follow), the
//! optional-data list idiom (a note: the generator turns it into a loop),
//! and every other recursion (the generator decodes without recursion).

use std::collections::HashMap;

use super::*;

impl<'s> Checker<'s> {
    /// Find every cycle of type references, iteratively.
    pub(super) fn recursion(&mut self) {
        let spec = self.spec;
        let defs = &spec.definitions;
        let index: HashMap<*const Definition, usize> =
            defs.iter().enumerate().map(|(i, d)| (d as *const Definition, i)).collect();
        let mut all: Vec<Vec<usize>> = vec![Vec::new(); defs.len()];
        let mut direct: Vec<Vec<usize>> = vec![Vec::new(); defs.len()];
        let mut refs = Vec::new();
        for (i, def) in defs.iter().enumerate() {
            refs.clear();
            match &def.kind {
                DefinitionKind::Typedef(d) => decl_refs(d, Via::Direct, &mut refs),
                DefinitionKind::Struct(b) => b.fields.iter().for_each(|f| decl_refs(f, Via::Direct, &mut refs)),
                DefinitionKind::Union(b) => union_refs(b, Via::Direct, &mut refs),
                _ => continue,
            }
            for &(name, via) in &refs {
                let Some(target) = self.syms.type_def(name) else { continue };
                let Some(&j) = index.get(&(target as *const Definition)) else { continue };
                all[i].push(j);
                if via == Via::Direct {
                    direct[i].push(j);
                }
            }
        }

        let comps = sccs(&all);
        let mut comp_of = vec![usize::MAX; defs.len()];
        for (c, members) in comps.iter().enumerate() {
            for &m in members {
                comp_of[m] = c;
            }
        }
        let mut reported = vec![false; comps.len()];

        // Cycles of direct containment: infinite size.
        let direct_comps = sccs(&direct);
        let mut dcomp_of = vec![usize::MAX; defs.len()];
        for (c, members) in direct_comps.iter().enumerate() {
            for &m in members {
                dcomp_of[m] = c;
            }
        }
        let mut found = Vec::new();
        for members in &direct_comps {
            if !is_cycle(members, &direct) {
                continue;
            }
            let root = *members.iter().min().expect("components are not empty");
            let path = cycle_path(root, &direct, |n| dcomp_of[n] == dcomp_of[root]);
            reported[comp_of[root]] = true;
            found.push((root, path, true));
        }
        for (c, members) in comps.iter().enumerate() {
            if reported[c] || !is_cycle(members, &all) {
                continue;
            }
            let root = *members.iter().min().expect("components are not empty");
            let self_refs = all[root].iter().filter(|&&t| t == root).count();
            if members.len() == 1 && self_refs == 1 && is_list_struct(&defs[root]) {
                let name = &defs[root].name;
                self.note(
                    name.span,
                    format!("`{}` is an optional-data list; generated as a sequence decoded in a loop", name.name),
                );
                continue;
            }
            let path = cycle_path(root, &all, |n| comp_of[n] == c);
            found.push((root, path, false));
        }
        found.sort_by_key(|(root, ..)| *root);
        for (root, path, infinite) in found {
            let name = &defs[root].name;
            let path = path_str(&path, defs);
            let msg = if infinite {
                format!(
                    "type `{}` contains itself ({path}) with no optional (`*`) or variable-length array on the way, \
                     so its size is infinite",
                    name.name
                )
            } else {
                format!(
                    "recursive type `{}` ({path}): the generator decodes without recursion and supports only the \
                     optional-data list idiom",
                    name.name
                )
            };
            self.error(name.span, msg);
        }
    }
}

/// How a reference is reached from the definition that makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Via {
    /// Contained: the referencing value always holds a referenced value.
    Direct,
    /// Through a union arm: held only for some discriminant values.
    Union,
    /// Through `*` or `<>`: possibly absent, so a cycle has finite values.
    Indirect,
}

fn decl_refs<'a>(d: &'a Declaration, via: Via, out: &mut Vec<(&'a str, Via)>) {
    let Declaration::Named { ty, shape, .. } = d else { return };
    let via = match shape {
        Shape::Optional | Shape::VarArray(_) => Via::Indirect,
        Shape::Scalar | Shape::FixedArray(_) => via,
    };
    match ty {
        TypeSpec::Named { name, .. } => out.push((&name.name, via)),
        TypeSpec::InlineStruct(b) => b.fields.iter().for_each(|f| decl_refs(f, via, out)),
        TypeSpec::InlineUnion(b) => union_refs(b, via, out),
        _ => {}
    }
}

fn union_refs<'a>(b: &'a UnionBody, via: Via, out: &mut Vec<(&'a str, Via)>) {
    decl_refs(&b.discriminant, via, out);
    let arm_via = via.max(Via::Union);
    for arm in &b.arms {
        decl_refs(&arm.decl, arm_via, out);
    }
    if let Some(d) = &b.default {
        decl_refs(d, arm_via, out);
    }
}

/// Strongly connected components (Tarjan), with an explicit stack.
fn sccs(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = adj.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    let mut calls: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        calls.push((root, 0));
        while let Some(top) = calls.last_mut() {
            let (v, pos) = *top;
            if let Some(&w) = adj[v].get(pos) {
                top.1 += 1;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    calls.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(u, _)) = calls.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(comp);
            }
        }
    }
    out
}

/// Whether a component contains a cycle (more than one node, or a self-loop).
fn is_cycle(members: &[usize], adj: &[Vec<usize>]) -> bool {
    members.len() > 1 || adj[members[0]].contains(&members[0])
}

/// A shortest cycle through `root` inside its component (breadth-first),
/// as the list of nodes from `root` back to `root`.
fn cycle_path(root: usize, adj: &[Vec<usize>], inside: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([root]);
    while let Some(v) = queue.pop_front() {
        for &w in &adj[v] {
            if w == root {
                let mut back = Vec::new();
                let mut at = v;
                while at != root {
                    back.push(at);
                    at = parent[&at];
                }
                let mut path = vec![root];
                path.extend(back.iter().rev());
                path.push(root);
                return path;
            }
            if inside(w) && !parent.contains_key(&w) && w != root {
                parent.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![root, root]
}

/// `A -> B -> A`, shortened in the middle when long.
fn path_str(path: &[usize], defs: &[Definition]) -> String {
    let name = |i: usize| defs[i].name.name.as_str();
    if path.len() <= 10 {
        return path.iter().map(|&i| name(i)).collect::<Vec<_>>().join(" -> ");
    }
    let head: Vec<_> = path[..4].iter().map(|&i| name(i)).collect();
    let tail: Vec<_> = path[path.len() - 3..].iter().map(|&i| name(i)).collect();
    format!("{} -> ... ({} more) -> {}", head.join(" -> "), path.len() - 7, tail.join(" -> "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_paths_and_components() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 3
        let adj = vec![vec![1], vec![2], vec![0, 3], vec![3]];
        let comps = sccs(&adj);
        assert_eq!(comps.len(), 2);
        assert_eq!(cycle_path(0, &adj, |n| n < 3), vec![0, 1, 2, 0]);
        assert_eq!(cycle_path(3, &adj, |n| n == 3), vec![3, 3]);
    }
}
