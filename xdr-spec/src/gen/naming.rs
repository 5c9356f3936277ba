//! Rust names for XDR names: CamelCase types, snake_case fields,
//! SCREAMING_CASE constants, and what to do with Rust keywords.

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

pub(crate) fn screaming(name: &str) -> String {
    snake(name).trim_start_matches("r#").to_ascii_uppercase()
}

/// `self::NAME`, the generated constant of the XDR constant or enumerator
/// `xdr` as a match pattern; `None` where that constant cannot be named
/// (`_`, which declares an unnamed constant).
pub(crate) fn const_pattern(xdr: &str) -> Option<String> {
    let name = screaming(xdr);
    (name != "_").then(|| format!("self::{name}"))
}

/// The Rust names of an optional-data list struct whose entries have more
/// than one field, and so get a struct of their own: `(list, entry)`, from
/// the struct's [`camel`] name. The entry struct is the list's name with
/// `Entry` after it, unless the name already says that the struct is one
/// entry: then the entry keeps it, and the list is named `...List`, rather
/// than doubling the suffix.
///
/// ```text
/// struct seg_list { ...; seg_list *next; }     -> (SegList, SegListEntry)
/// struct tkvs_entry { ...; tkvs_entry *next; } -> (TkvsList, TkvsEntry)
/// ```
pub(crate) fn list_names(camel_name: &str) -> (String, String) {
    match camel_name.strip_suffix("Entry") {
        Some(stem) if !stem.is_empty() => (format!("{stem}List"), camel_name.to_string()),
        _ => (camel_name.to_string(), format!("{camel_name}Entry")),
    }
}
