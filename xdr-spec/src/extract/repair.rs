//! Step two of extraction with repair: put back together the declarations
//! that a degraded rendering broke apart, line by line, and only where the
//! damage is unambiguous.
//!
//! Each top-level declaration (from the line that opens its body to the line
//! that closes it) is a *unit*. A unit is *degraded* when any of its lines
//! came without a `///` marker or with a `111` one: then, and only then, the
//! markers inside its body are known to be unreliable (displaced markers are
//! dropped, a line that cannot be read is an error, indentation is
//! normalised). A unit made only of `///` lines is left as written, except
//! for the two repairs that are unambiguous anywhere (a declaration split
//! over two lines, an enumerator that lost an underscore).

use super::lex::{lex_line, text, Lexed, TokKind, Token};
use super::scan::{RawLine, Source};
use super::{ExtractError, Repair};

/// A line of repaired XDR and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutLine {
    pub(crate) text: String,
    pub(crate) spec_line: usize,
    pub(crate) section: usize,
}

/// What kind of body a `{` opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Struct,
    Union,
    Enum,
    Other,
}

/// The body a line sits in: the index of the line that opened it, and its
/// kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Body {
    opener: usize,
    kind: BodyKind,
}

/// A line with its structure.
#[derive(Debug, Clone)]
struct Line {
    raw: RawLine,
    lexed: Lexed,
    depth_before: usize,
    depth_after: usize,
    body: Option<Body>,
}

impl Line {
    fn is_bare(&self) -> bool {
        self.raw.text.trim().is_empty() && !self.lexed.starts_in_comment
    }
}

/// A body line on its way out.
#[derive(Debug, Clone)]
struct Entry {
    text: String,
    spec_line: usize,
    section: usize,
    level: usize,
    body: Option<Body>,
    lexed: Lexed,
}

impl Entry {
    fn relex(&mut self) {
        self.lexed = lex_line(&self.text, self.lexed.starts_in_comment);
    }

    fn code_tokens(&self) -> Vec<Token> {
        self.lexed.code().copied().collect()
    }

    /// The line split into its code and its trailing comment.
    fn code_and_comment(&self) -> (&str, &str) {
        match self.lexed.trailing_comment_start() {
            Some(at) => (self.text[..at].trim(), self.text[at..].trim()),
            None => (self.text.trim(), ""),
        }
    }
}

/// Keywords that are (or start) a type specifier on their own.
const TYPE_WORDS: &[&str] = &["bool", "double", "quadruple", "float", "hyper", "int", "opaque", "string", "unsigned"];

/// The shape of a body line, for the split and swapped-declaration repairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A type specifier with no declarator: `uint32`, `struct foo`.
    TypeOnly,
    /// A declarator with no type: `rdma_position;`, `*rdma_next;`,
    /// `rdma_target<>;` (`void;` is a complete union arm, not this).
    NameOnly,
    Other,
}

fn shape(e: &Entry) -> Shape {
    let has_comment = e.lexed.tokens.iter().any(|t| t.kind == TokKind::Comment);
    if e.lexed.starts_in_comment || (has_comment && e.lexed.trailing_comment_start().is_none()) {
        // A comment before or between code: not something to rearrange.
        return Shape::Other;
    }
    let toks = e.code_tokens();
    let word = |t: &Token| (t.kind == TokKind::Ident).then(|| text(&e.text, t));
    let words: Vec<Option<&str>> = toks.iter().map(word).collect();
    // RFC 4506's reserved words, and RFC 5531's `program` and `version`.
    let is_name = |w: Option<&str>| {
        w.is_some_and(|w| !crate::parse::KEYWORDS.contains(&w) && !matches!(w, "program" | "version"))
    };
    match words.as_slice() {
        [Some(w)] if is_name(Some(w)) || TYPE_WORDS.contains(w) => return Shape::TypeOnly,
        [Some("struct" | "union" | "enum"), n] if is_name(*n) => return Shape::TypeOnly,
        [Some("unsigned"), Some("int" | "hyper" | "char" | "short" | "long")] => return Shape::TypeOnly,
        _ => {}
    }
    // [*] name [<N>|[N]] ;
    let mut i = 0;
    if toks.first().map(|t| t.kind) == Some(TokKind::Punct('*')) {
        i += 1;
    }
    if !is_name(words.get(i).copied().flatten()) {
        return Shape::Other;
    }
    i += 1;
    let kind = |j: usize| toks.get(j).map(|t| t.kind);
    let size = |j: usize| matches!(kind(j), Some(TokKind::Ident | TokKind::Number));
    match kind(i) {
        Some(TokKind::Punct('<')) if kind(i + 1) == Some(TokKind::Punct('>')) => i += 2,
        Some(TokKind::Punct('<')) if size(i + 1) && kind(i + 2) == Some(TokKind::Punct('>')) => i += 3,
        Some(TokKind::Punct('[')) if size(i + 1) && kind(i + 2) == Some(TokKind::Punct(']')) => i += 3,
        _ => {}
    }
    if kind(i) == Some(TokKind::Punct(';')) && i + 1 == toks.len() {
        Shape::NameOnly
    } else {
        Shape::Other
    }
}

fn body_kind(raw: &str, lexed: &Lexed) -> BodyKind {
    for t in lexed.code() {
        match (t.kind, text(raw, t)) {
            (TokKind::Ident, "struct") => return BodyKind::Struct,
            (TokKind::Ident, "union") => return BodyKind::Union,
            (TokKind::Ident, "enum") => return BodyKind::Enum,
            (TokKind::Punct('{'), _) => break,
            _ => {}
        }
    }
    BodyKind::Other
}

/// `struct NAME` for messages, from the line that opened a body.
fn body_name(opener: &RawLine) -> String {
    let words: Vec<&str> =
        opener.text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
    match words.as_slice() {
        [kw @ ("struct" | "union" | "enum"), name, ..] => format!("{kw} {name}"),
        _ => format!("the declaration on line {}", opener.spec_line),
    }
}

fn unjustified(line: usize, text: &str, why: String) -> ExtractError {
    ExtractError::UnjustifiedRepair { line, text: text.trim().to_string(), why }
}

/// Rebuild the XDR from the scanned lines, reporting every change.
pub(crate) fn repair(raw: Vec<RawLine>, repairs: &mut Vec<Repair>) -> Result<Vec<OutLine>, ExtractError> {
    // Structure: depth and enclosing body of every line.
    let mut lines = Vec::with_capacity(raw.len());
    let mut in_comment = false;
    let mut depth = 0usize;
    let mut stack: Vec<Body> = Vec::new();
    for (i, raw) in raw.into_iter().enumerate() {
        let lexed = lex_line(&raw.text, in_comment);
        in_comment = lexed.ends_in_comment;
        let body = stack.last().copied();
        let depth_before = depth;
        for t in lexed.code() {
            match t.kind {
                TokKind::Punct('{') => {
                    depth += 1;
                    stack.push(Body { opener: i, kind: body_kind(&raw.text, &lexed) });
                }
                TokKind::Punct('}') => {
                    depth = depth.saturating_sub(1);
                    stack.pop();
                }
                _ => {}
            }
        }
        lines.push(Line { raw, lexed, depth_before, depth_after: depth, body });
    }

    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        if lines[i].depth_before == 0 && lines[i].depth_after > 0 {
            let end = (i..lines.len()).find(|&j| lines[j].depth_after == 0).unwrap_or(lines.len() - 1);
            unit(&lines, i, end, repairs, &mut out)?;
            i = end + 1;
        } else {
            let l = &lines[i];
            let text = match l.raw.source {
                Source::Marked => l.raw.text.clone(),
                Source::Garbled => {
                    report_garbled(l, None, repairs);
                    l.raw.text.clone()
                }
                Source::Unmarked => l.raw.text.trim().to_string(),
            };
            out.push(OutLine { text, spec_line: l.raw.spec_line, section: l.raw.section });
            i += 1;
        }
    }
    Ok(out)
}

/// Report a `111` line. `displaced_in` names the body a bare one was
/// dropped from.
fn report_garbled(l: &Line, displaced_in: Option<&str>, repairs: &mut Vec<Repair>) {
    let what = match displaced_in {
        Some(body) => format!(
            "read `111` as a `///` marker rendered as digits; inside {body} it is displaced from its code line: dropped"
        ),
        None if l.is_bare() => {
            "read `111` as a `///` marker rendered as digits: a bare marker line, kept as a blank line".to_string()
        }
        None => format!("read `111` as the `///` marker (rendered as digits) of `{}`", l.raw.text.trim()),
    };
    repairs.push(Repair { spec_line: l.raw.spec_line, what });
}

/// Repair one top-level declaration, `lines[start..=end]`.
fn unit(
    lines: &[Line],
    start: usize,
    end: usize,
    repairs: &mut Vec<Repair>,
    out: &mut Vec<OutLine>,
) -> Result<(), ExtractError> {
    let degraded = lines[start..=end].iter().any(|l| l.raw.source != Source::Marked);
    let name = body_name(&lines[start].raw);
    let emit_edge = |l: &Line, repairs: &mut Vec<Repair>, out: &mut Vec<OutLine>| {
        if l.raw.source == Source::Garbled {
            report_garbled(l, None, repairs);
        }
        let text = if l.raw.source == Source::Unmarked { l.raw.text.trim().to_string() } else { l.raw.text.clone() };
        out.push(OutLine { text, spec_line: l.raw.spec_line, section: l.raw.section });
    };

    emit_edge(&lines[start], repairs, out);
    if start == end {
        return Ok(());
    }

    let mut entries = Vec::new();
    for l in &lines[start + 1..end] {
        if l.is_bare() && degraded {
            // Inside the body of a degraded declaration a bare marker is a
            // displaced one: its code was rendered on a line of its own
            // (RENDERINGS.md, v2: "markers and code sit on separate lines").
            match l.raw.source {
                Source::Garbled => report_garbled(l, Some(&name), repairs),
                _ => repairs.push(Repair {
                    spec_line: l.raw.spec_line,
                    what: format!("dropped a bare `///` marker inside {name}: it is displaced from its code line"),
                }),
            }
            continue;
        }
        if l.raw.source == Source::Garbled {
            report_garbled(l, None, repairs);
        }
        entries.push(Entry {
            text: l.raw.text.clone(),
            spec_line: l.raw.spec_line,
            section: l.raw.section,
            level: l.depth_before.min(l.depth_after),
            body: l.body,
            lexed: l.lexed.clone(),
        });
    }

    join_split_declarations(&mut entries, degraded, repairs)?;
    restore_enumerator_underscores(&mut entries, lines, repairs)?;
    if degraded {
        reindent(&mut entries);
    }
    out.extend(entries.into_iter().map(|e| OutLine { text: e.text, spec_line: e.spec_line, section: e.section }));
    emit_edge(&lines[end], repairs, out);
    Ok(())
}

/// A type on one line and its declarator on the next (`uint32` /
/// `rdma_position;`), or the two in swapped order (`rdma_credit;` / `uint32`,
/// v2 `rpcrdma2_xprt_hdr`): one declaration. Neither half is valid XDR alone
/// (a struct or union member needs a type and a name, RFC 4506 §6.3), so
/// joining them adds nothing that was not there.
fn join_split_declarations(
    entries: &mut Vec<Entry>,
    degraded: bool,
    repairs: &mut Vec<Repair>,
) -> Result<(), ExtractError> {
    let mut k = 0;
    while k < entries.len() {
        let here = shape(&entries[k]);
        let in_enum = entries[k].body.map(|b| b.kind) == Some(BodyKind::Enum);
        if here == Shape::Other || in_enum {
            k += 1;
            continue;
        }
        // The next line with anything on it, in the same body.
        let next = (k + 1..entries.len())
            .find(|&j| !entries[j].text.trim().is_empty())
            .filter(|&j| entries[j].body == entries[k].body);
        let there = next.map(|j| shape(&entries[j]));
        let swapped = match (here, there) {
            (Shape::TypeOnly, Some(Shape::NameOnly)) => false,
            (Shape::NameOnly, Some(Shape::TypeOnly)) => true,
            _ if degraded => {
                let why = if here == Shape::TypeOnly {
                    "a type with no name, and the next line is not a bare name: not a declaration split across lines"
                } else {
                    "a name with no type, and the next line is not a bare type: not a declaration with swapped halves"
                };
                return Err(unjustified(entries[k].spec_line, &entries[k].text, why.to_string()));
            }
            _ => {
                k += 1;
                continue;
            }
        };
        let Some(j) = next else { break };
        let (a_code, a_comment) = entries[k].code_and_comment();
        let (b_code, b_comment) = entries[j].code_and_comment();
        let code = if swapped { format!("{b_code} {a_code}") } else { format!("{a_code} {b_code}") };
        let comments = [a_comment, b_comment].iter().filter(|c| !c.is_empty()).copied().collect::<Vec<_>>().join(" ");
        let indent: String = entries[k].text.chars().take_while(|c| c.is_whitespace()).collect();
        let joined = if comments.is_empty() { format!("{indent}{code}") } else { format!("{indent}{code} {comments}") };
        let (a_line, b_line) = (entries[k].spec_line, entries[j].spec_line);
        let what = if swapped {
            format!(
                "joined a declaration rendered with its halves in swapped order on lines {a_line} and {b_line}: \
                 `{}` (a name with no type) then `{}` (a type with no name) -> `{}`",
                entries[k].text.trim(),
                entries[j].text.trim(),
                joined.trim()
            )
        } else {
            format!(
                "joined a declaration split across lines {a_line} and {b_line}: `{}` + `{}` -> `{}`",
                entries[k].text.trim(),
                entries[j].text.trim(),
                joined.trim()
            )
        };
        repairs.push(Repair { spec_line: a_line, what });
        entries[k].text = joined;
        entries[k].relex();
        entries.remove(j);
        k += 1;
    }
    Ok(())
}

/// `RDMA OPTIONAL = 5` in an enum whose other enumerators are `RDMA_MSG`,
/// `RDMA_NOMSG`, ...: the rendering lost an underscore. Joined only where
/// every other enumerator of the same enum has an underscore at that very
/// place (a shared prefix such as `RDMA_`); anything else is an error, never
/// a guess.
fn restore_enumerator_underscores(
    entries: &mut [Entry],
    lines: &[Line],
    repairs: &mut Vec<Repair>,
) -> Result<(), ExtractError> {
    // Enumerator names by enum body: an identifier right before `=`.
    let mut names: Vec<(usize, usize, String)> = Vec::new();
    for (idx, e) in entries.iter().enumerate() {
        let Some(body) = e.body.filter(|b| b.kind == BodyKind::Enum) else { continue };
        let toks = e.code_tokens();
        for w in toks.windows(2) {
            if w[0].kind == TokKind::Ident && w[1].kind == TokKind::Punct('=') {
                names.push((body.opener, idx, text(&e.text, &w[0]).to_string()));
            }
        }
    }
    for (idx, e) in entries.iter_mut().enumerate() {
        let Some(body) = e.body.filter(|b| b.kind == BodyKind::Enum) else { continue };
        let toks = e.code_tokens();
        let words = toks.iter().take_while(|t| t.kind == TokKind::Ident).count();
        if words < 2 || toks.get(words).map(|t| t.kind) != Some(TokKind::Punct('=')) {
            continue;
        }
        let parts: Vec<&str> = toks[..words].iter().map(|t| text(&e.text, t)).collect();
        let broken = parts.join(" ");
        let siblings: Vec<&str> = names
            .iter()
            .filter(|(opener, at, _)| *opener == body.opener && *at != idx)
            .map(|(_, _, n)| n.as_str())
            .collect();
        let enum_name = body_name(&lines[body.opener].raw);
        if siblings.is_empty() {
            return Err(unjustified(
                e.spec_line,
                &e.text,
                format!(
                    "`{broken}` is not one identifier, and {enum_name} has no other enumerators to justify joining it"
                ),
            ));
        }
        let mut joined = parts[0].to_string();
        for part in &parts[1..] {
            let prefix = format!("{joined}_");
            if !siblings.iter().all(|s| s.starts_with(&prefix)) {
                return Err(unjustified(
                    e.spec_line,
                    &e.text,
                    format!(
                        "`{broken}` is not one identifier, and joining it at `{joined} {part}` would not follow a \
                         prefix shared by the other enumerators of {enum_name} ({})",
                        siblings.join(", ")
                    ),
                ));
            }
            joined = format!("{prefix}{part}");
        }
        if siblings.contains(&joined.as_str()) {
            return Err(unjustified(
                e.spec_line,
                &e.text,
                format!("joining `{broken}` gives `{joined}`, which {enum_name} already has"),
            ));
        }
        let (from, to) = (toks[0].start, toks[words - 1].end);
        let prefix = common_prefix(&siblings);
        repairs.push(Repair {
            spec_line: e.spec_line,
            what: format!(
                "restored a lost underscore: `{broken}` -> `{joined}` (every other enumerator of {enum_name} starts \
                 with `{prefix}`)"
            ),
        });
        e.text = format!("{}{joined}{}", &e.text[..from], &e.text[to..]);
        e.relex();
    }
    Ok(())
}

/// The longest prefix, ending in `_`, that all `names` share.
fn common_prefix(names: &[&str]) -> String {
    let Some(first) = names.first() else { return String::new() };
    let mut prefix = String::new();
    let mut candidate = String::new();
    for c in first.chars() {
        candidate.push(c);
        if !names.iter().all(|n| n.starts_with(&candidate)) {
            break;
        }
        if c == '_' {
            prefix.clone_from(&candidate);
        }
    }
    prefix
}

/// One declaration per line, indented by nesting: 8 columns a level, union
/// arms 2 more than their `case`. The rendering's indentation of unmarked
/// lines is meaningless, and white space is insignificant in XDR (RFC 4506
/// §6.2), so this is not reported as a repair.
fn reindent(entries: &mut [Entry]) {
    let mut after_case: Option<Option<Body>> = None;
    for e in entries.iter_mut() {
        if e.lexed.starts_in_comment || e.text.trim().is_empty() {
            continue;
        }
        let arm = e.body.is_some_and(|b| b.kind == BodyKind::Union) && after_case == Some(e.body);
        let width = 8 * e.level + if arm { 2 } else { 0 };
        e.text = format!("{}{}", " ".repeat(width), e.text.trim());
        e.relex();
        let last = e.lexed.code().last().map(|t| t.kind);
        after_case = (last == Some(TokKind::Punct(':'))).then_some(e.body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Entry {
        Entry { text: text.to_string(), spec_line: 1, section: 0, level: 1, body: None, lexed: lex_line(text, false) }
    }

    #[test]
    fn shapes() {
        assert_eq!(shape(&entry("uint32")), Shape::TypeOnly);
        assert_eq!(shape(&entry("struct rpcrdma2_read_list")), Shape::TypeOnly);
        assert_eq!(shape(&entry("unsigned hyper")), Shape::TypeOnly);
        assert_eq!(shape(&entry("opaque")), Shape::TypeOnly);
        assert_eq!(shape(&entry("rdma_position;")), Shape::NameOnly);
        assert_eq!(shape(&entry("*rdma_next;")), Shape::NameOnly);
        assert_eq!(shape(&entry("rdma_target<>;")), Shape::NameOnly);
        assert_eq!(shape(&entry("data[16]; /* why */")), Shape::NameOnly);
        assert_eq!(shape(&entry("void;")), Shape::Other);
        assert_eq!(shape(&entry("case RDMA_MSG:")), Shape::Other);
        assert_eq!(shape(&entry("uint32 x;")), Shape::Other);
        assert_eq!(shape(&entry("struct")), Shape::Other);
        assert_eq!(shape(&entry("/* c */ x;")), Shape::Other);
        assert_eq!(shape(&entry("")), Shape::Other);
    }

    #[test]
    fn prefixes() {
        assert_eq!(common_prefix(&["RDMA_MSG", "RDMA_NOMSG"]), "RDMA_");
        assert_eq!(common_prefix(&["RDMA_ERR_VERS", "RDMA_ERR_BAD_HEADER"]), "RDMA_ERR_");
        assert_eq!(common_prefix(&["A", "B"]), "");
        assert_eq!(common_prefix(&[]), "");
    }
}
