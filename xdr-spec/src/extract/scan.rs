//! Step one of extraction: walk the document once, find the marker lines,
//! and (with repair) the XDR lines that a degraded rendering separated from
//! their markers.

use std::borrow::Cow;

use super::layout::{self, Fence, Furniture, Section};
use super::lex::{lex_line, TokKind};
use super::{ExtractError, Repair};

/// How a line of XDR was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// After a `///` marker: the extraction convention of RFC 8166 §5.1.
    Marked,
    /// After `111`, a `///` marker that a rendering turned into digits.
    Garbled,
    /// Without any marker, inside a code block and an open declaration.
    Unmarked,
}

/// A line of XDR as found in the spec, before structural repairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawLine {
    pub(crate) text: String,
    pub(crate) spec_line: usize,
    pub(crate) source: Source,
    /// Index into [`Scanned::sections`].
    pub(crate) section: usize,
}

/// What the scan found.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    pub(crate) lines: Vec<RawLine>,
    /// Section headings in document order; index 0 is "before any heading".
    pub(crate) sections: Vec<Section>,
    pub(crate) repairs: Vec<Repair>,
}

/// Where the XDR taken so far stands: an unmarked line is XDR only when it
/// continues something (an open body, comment or statement).
#[derive(Debug, Default)]
struct XdrState {
    depth: usize,
    in_comment: bool,
    /// Code seen at depth 0 since the last `;`: a statement is incomplete.
    pending: bool,
}

impl XdrState {
    fn feed(&mut self, text: &str) {
        let lexed = lex_line(text, self.in_comment);
        self.in_comment = lexed.ends_in_comment;
        for t in lexed.code() {
            match t.kind {
                TokKind::Punct('{') => self.depth += 1,
                TokKind::Punct('}') => self.depth = self.depth.saturating_sub(1),
                TokKind::Punct(';') if self.depth == 0 => self.pending = false,
                _ if self.depth == 0 => self.pending = true,
                _ => {}
            }
        }
    }

    fn open(&self) -> bool {
        self.depth > 0 || self.in_comment || self.pending
    }
}

/// The content of a `///` line: RFC 8166 §5.1's `sed 's?^ /// ??'` and
/// `sed 's?^ *///$??'`, tolerating any leading white space (the v1 draft
/// has its markers in column 0, where the first sed taken literally strips
/// nothing).
pub(crate) fn marker_content(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches([' ', '\t']).strip_prefix("///")?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// A `///` marker rendered as `111`: the whole line, or `111 ` where the
/// marker belongs.
fn garbled_marker(trimmed: &str) -> Option<&str> {
    if trimmed == "111" {
        return Some("");
    }
    let rest = trimmed.strip_prefix("111 ")?;
    // Only when what follows reads as XDR; `111 bytes` is prose.
    lex_line(rest, false).is_xdr().then_some(rest)
}

/// Undo markdown backslash escapes (CommonMark §2.4: a backslash before
/// ASCII punctuation). XDR itself has no backslash (RFC 4506 §6.2), so a
/// backslash before punctuation can only be the rendering's.
fn unescape(text: &str) -> Cow<'_, str> {
    if !text.contains('\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&n) = chars.peek() {
                if n.is_ascii_punctuation() && n != '\\' {
                    continue;
                }
            }
        }
        out.push(c);
    }
    if out == text {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(out)
    }
}

/// A comment block that a rendering flattened into one line, its line breaks
/// surviving as inline `///` (and `111`) markers (the v2 draft §4.1 licence).
/// Returns the lines, or `None` when `content` is not such a comment.
fn split_flattened_comment(content: &str) -> Option<(Vec<String>, usize)> {
    let t = content.trim();
    // Exactly one comment making up the whole line: splitting it cannot
    // change any code, only the layout of comment text.
    let body = t.strip_prefix("/*")?.strip_suffix("*/")?;
    if body.contains("*/") || !t.split_whitespace().any(|w| w == "///") {
        return None;
    }
    let mut lines = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut markers = 0;
    for word in t.split_whitespace() {
        if word == "///" || word == "111" {
            markers += 1;
            lines.push(current.join(" "));
            current.clear();
        } else {
            current.push(word);
        }
    }
    lines.push(current.join(" "));
    // The usual block-comment layout: continuation lines start ` *`.
    let lines = lines.into_iter().map(|l| if l.starts_with('*') { format!(" {l}") } else { l }).collect();
    Some((lines, markers))
}

/// Scan `spec_text`. Without `repair`, this is exactly the `///` convention.
pub(crate) fn scan(spec_text: &str, repair: bool) -> Result<Scanned, ExtractError> {
    let mut out = Scanned { sections: vec![Section::default()], ..Scanned::default() };
    let mut code_begins = false;
    let mut fence: Option<Fence> = None;
    let mut xdr = XdrState::default();
    let mut furniture = Furniture::default();
    // The last significant line was a marker line: a `111` line here is in
    // a run of markers even outside a code block.
    let mut after_marker = false;

    for (idx, raw) in spec_text.split('\n').enumerate() {
        let spec_line = idx + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        // A form feed is a page break in paginated plain text; the text
        // around it belongs to the lines as usual.
        let line: Cow<'_, str> = if raw.contains('\x0c') { Cow::Owned(raw.replace('\x0c', "")) } else { raw.into() };
        let trimmed = line.trim();
        let in_code = code_begins || fence.is_some();
        let section = out.sections.len() - 1;
        let mut report = |what: String| out.repairs.push(Repair { spec_line, what });

        if let Some(content) = marker_content(&line) {
            furniture.reset();
            after_marker = true;
            let mut content = Cow::Borrowed(content);
            if repair {
                if let Cow::Owned(u) = unescape(&content) {
                    report(format!("removed markdown escapes: `{}` -> `{}`", content.trim(), u.trim()));
                    content = Cow::Owned(u);
                }
                if let Some((pieces, markers)) = split_flattened_comment(&content) {
                    report(format!(
                        "split a comment rendered as one line at its {markers} inline markers (`///`, and `111` \
                         for `///`) into {} lines",
                        pieces.len()
                    ));
                    for text in pieces {
                        xdr.feed(&text);
                        out.lines.push(RawLine { text, spec_line, source: Source::Marked, section });
                    }
                    continue;
                }
            }
            xdr.feed(&content);
            out.lines.push(RawLine { text: content.into_owned(), spec_line, source: Source::Marked, section });
            continue;
        }
        if trimmed.is_empty() {
            // Blank lines are never XDR (the convention's grep skips them)
            // and do not interrupt a run of markers across a page break.
            continue;
        }
        if layout::is_code_begins(trimmed) || layout::is_code_ends(trimmed) {
            code_begins = layout::is_code_begins(trimmed);
            furniture.reset();
            after_marker = false;
            continue;
        }
        if let Some(f) = layout::fence(trimmed) {
            match fence {
                None => fence = Some(f),
                Some(open) if f.closes(&open) => fence = None,
                Some(_) => {}
            }
            if repair && code_begins && xdr.open() {
                report(format!(
                    "dropped a markdown fence line inside a <CODE BEGINS> block, within an open declaration \
                     (a page-break artifact): `{trimmed}`"
                ));
            }
            continue;
        }
        if let Some(what) = furniture.classify(trimmed) {
            // Page furniture is never XDR; it is reported only where repair
            // would otherwise have read it as part of a declaration.
            if repair && in_code && xdr.open() {
                report(format!("dropped a {what} line inside an open declaration: `{trimmed}`"));
            }
            continue;
        }
        if repair && (in_code || after_marker) {
            if let Some(rest) = garbled_marker(trimmed) {
                let text = unescape(rest).into_owned();
                xdr.feed(&text);
                out.lines.push(RawLine { text, spec_line, source: Source::Garbled, section });
                after_marker = true;
                continue;
            }
        }
        after_marker = false;
        if !in_code {
            if let Some(h) = layout::heading(&line) {
                out.sections.push(h);
            }
            continue;
        }
        if repair && xdr.open() {
            // Inside a code block and inside a declaration that is still
            // open, a line without a marker is the declaration's next line:
            // the rendering put its `///` elsewhere (RENDERINGS.md, v2).
            let text = unescape(trimmed);
            if !lex_line(&text, xdr.in_comment).is_xdr() {
                return Err(ExtractError::UnjustifiedRepair {
                    line: spec_line,
                    text: trimmed.to_string(),
                    why: "an unmarked line inside an open XDR declaration is not XDR, and is not a page header \
                          or footer"
                        .to_string(),
                });
            }
            if let Cow::Owned(u) = &text {
                report(format!("removed markdown escapes: `{trimmed}` -> `{u}`"));
            }
            report(format!(
                "took an unmarked code line inside an open declaration (its `///` marker was rendered on \
                 another line): `{text}`"
            ));
            xdr.feed(&text);
            out.lines.push(RawLine { text: text.into_owned(), spec_line, source: Source::Unmarked, section });
        }
        // Otherwise: prose or shell inside a code block (the v2 draft's
        // extract.sh), not XDR.
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        assert_eq!(marker_content("/// struct a {"), Some("struct a {"));
        assert_eq!(marker_content("   ///  * x"), Some(" * x"));
        assert_eq!(marker_content("///"), Some(""));
        assert_eq!(marker_content("\t///x"), Some("x"));
        assert_eq!(marker_content("// x"), None);
        assert_eq!(marker_content("grep '^ *///'"), None);
    }

    #[test]
    fn garbled() {
        assert_eq!(garbled_marker("111"), Some(""));
        assert_eq!(garbled_marker("111 uint32 x;"), Some("uint32 x;"));
        assert_eq!(garbled_marker("111 bytes."), None);
        assert_eq!(garbled_marker("1111"), None);
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape("RDMA\\_ERR\\_VERS = 1,"), "RDMA_ERR_VERS = 1,");
        assert_eq!(unescape("a \\\\ b"), "a \\\\ b");
        assert_eq!(unescape("end\\"), "end\\");
        assert!(matches!(unescape("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn flattened_comment() {
        let (lines, markers) = split_flattened_comment("/* /// * a /// * b 111 /// */").unwrap();
        assert_eq!(lines, vec!["/*", " * a", " * b", "", " */"]);
        assert_eq!(markers, 4);
        assert!(split_flattened_comment("/* a */ x /* b */").is_none());
        assert!(split_flattened_comment("/* no inline markers 111 */").is_none());
    }
}
