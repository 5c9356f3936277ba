//! Step 2 of the pipeline: explicit, reasoned corrections to extracted XDR.
//!
//! Some defects are in the specification itself, not in its rendering: the
//! RPC-over-RDMA Version Two draft's body union uses `rpcrdma2_chunks`, which
//! it never defines, and both drafts use `uint32`/`uint64` without typedefs.
//! Such corrections live in an errata file beside the spec
//! (`specs/NAME.errata` for `specs/NAME.txt`), where a reader can see each
//! one, where it applies and why. Repairs of rendering damage belong to
//! [`crate::extract`] instead.
//!
//! # The errata file format
//!
//! Line based, UTF-8:
//!
//! * A line whose first non-blank character is `#` is a comment. Blank lines
//!   are ignored.
//! * `erratum: ID` starts an erratum. `ID` is letters, digits, `-`, `_` and
//!   `.`, unique within the file.
//! * Then, in any order, one of each:
//!   * `location: TEXT`: where in the spec it applies (section, lines), free
//!     text;
//!   * `reason: TEXT`: why, free text;
//!   * an action, one of
//!     * `replace-identifier: OLD NEW` together with `expect-count: N`:
//!       replace every whole-word occurrence of the identifier `OLD` in the
//!       XDR code (not in comments) by `NEW`. Applying fails unless there are
//!       exactly `N`: an erratum that no longer matches its spec fails loudly
//!       instead of silently doing something else;
//!     * `replace-text: OLD` and `with: NEW` together with `expect-count: N`:
//!       replace every occurrence of the text `OLD` (spaces as written) by
//!       `NEW`, for a defect that is not one identifier, such as a declaration
//!       written backwards; the same count rule applies. Given no value on its
//!       line, each takes the `|` lines below it instead (text over several
//!       lines, indentation kept); `OLD` and `NEW` then have as many lines, so
//!       that every line of the spec keeps its number;
//!     * `prepend:` followed by lines starting with `|`: XDR text (one line
//!       per `|` line, the text after `| `) put before the extracted XDR, for
//!       definitions the spec uses but never gives.
//! * A line that starts with white space continues the `location` or
//!   `reason` above it (joined with one space), so free text may span lines.
//!
//! ```text
//! # Errata for draft-example-00
//!
//! erratum: undefined-chunks
//! location: section 4.2, union body, spec lines 277 and 281
//! reason: the union uses chunks_t, which is never defined; the struct
//!   that holds the chunk lists is chunk_lists.
//! replace-identifier: chunks_t chunk_lists
//! expect-count: 2
//!
//! erratum: integer-typedefs
//! location: section 4.2
//! reason: uint32 is used but never defined.
//! prepend:
//! | typedef unsigned int uint32;
//! ```
//!
//! A file with comments only is valid and holds no errata (the specs without
//! XDR have one, so that every spec has its errata file beside it).
//!
//! # Applying
//!
//! [`Errata::apply`] applies the errata in file order. Replacements keep the
//! lines of the XDR where they are; the `prepend` blocks, in file order, go
//! before the first line, so [`Errata::apply_with_offset`] also returns how
//! many lines were added: line `i` of the result is line `i - offset` of the
//! input when `i >= offset`.
//!
//! ```
//! let text = "\
//! erratum: e1
//! location: section 1
//! reason: the spec says bar
//! replace-identifier: foo bar
//! expect-count: 1
//!
//! erratum: e2
//! location: section 1
//! reason: uint32 is never defined
//! prepend:
//! | typedef unsigned int uint32;
//! ";
//! let errata = xdr_spec::errata::parse(text).unwrap();
//! let (xdr, applied, offset) = errata.apply_with_offset("struct foo { uint32 x; };\n").unwrap();
//! assert_eq!(xdr, "typedef unsigned int uint32;\nstruct bar { uint32 x; };\n");
//! assert_eq!(offset, 1);
//! assert_eq!(applied[0].summary, "replaced foo with bar (1 occurrence): the spec says bar");
//! ```

/// One correction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Erratum {
    /// Short name, unique in its file.
    pub id: String,
    /// Where in the spec it applies (section, lines), free text.
    pub location: String,
    /// Why it is needed, free text.
    pub reason: String,
    /// What it does.
    pub action: Action,
}

/// What an erratum does to the XDR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Replace the identifier `old` by `new` wherever it occurs as a whole
    /// word in XDR code (not in comments); there must be exactly
    /// `expect_count` occurrences.
    ReplaceIdentifier {
        /// The identifier in the spec.
        old: String,
        /// Its replacement.
        new: String,
        /// How many occurrences the spec has.
        expect_count: usize,
    },
    /// Replace the text `old` (one line's worth) by `new` wherever it occurs;
    /// there must be exactly `expect_count` occurrences.
    ReplaceText {
        /// The text in the spec.
        old: String,
        /// Its replacement.
        new: String,
        /// How many occurrences the spec has.
        expect_count: usize,
    },
    /// Put XDR text before the extracted XDR.
    Prepend {
        /// The text, lines separated by `\n`, without a final `\n`.
        xdr: String,
    },
}

/// The errata of one spec, in file order.
///
/// ```
/// let text = "\
/// erratum: chunk-lists
/// location: section 4.2
/// reason: the type is named rpcrdma2_chunk_lists where it is defined
/// replace-identifier: rpcrdma2_chunks rpcrdma2_chunk_lists
/// expect-count: 1
/// ";
/// let errata = xdr_spec::errata::parse(text).unwrap();
/// assert_eq!(errata.errata[0].id, "chunk-lists");
/// let (xdr, applied) = errata.apply("struct msg { rpcrdma2_chunks c; };").unwrap();
/// assert_eq!(xdr, "struct msg { rpcrdma2_chunk_lists c; };");
/// assert_eq!(applied[0].id, "chunk-lists");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Errata {
    /// The errata.
    pub errata: Vec<Erratum>,
}

/// A report that an erratum was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The erratum's id.
    pub id: String,
    /// What was done and why, e.g. `replaced rpcrdma2_chunks with
    /// rpcrdma2_chunk_lists (2 occurrences): <reason>`.
    pub summary: String,
}

/// An errata file that cannot be read, or errata that do not fit the XDR.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrataError {
    /// A line of the errata file is malformed.
    #[error("line {line}: {message}")]
    Syntax {
        /// 1-based line in the errata file.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An erratum lacks a field or has conflicting ones.
    #[error("line {line}: erratum {id}: {message}")]
    Incomplete {
        /// 1-based line of the erratum's `erratum:` line.
        line: usize,
        /// The erratum.
        id: String,
        /// What is missing or conflicting.
        message: String,
    },
    /// A `replace-identifier` erratum found a different number of
    /// occurrences than it expects: the spec (or the extraction) changed.
    #[error(
        "erratum {id}: expected {expected} occurrence(s) of `{old}` in the XDR, found {found}; the erratum no longer \
         matches the spec"
    )]
    CountMismatch {
        /// The erratum.
        id: String,
        /// The identifier it replaces.
        old: String,
        /// `expect-count`.
        expected: usize,
        /// Occurrences found.
        found: usize,
    },
}

/// An erratum being read.
#[derive(Default)]
struct Draft {
    line: usize,
    id: String,
    location: Option<String>,
    reason: Option<String>,
    replace: Option<(String, String)>,
    replace_text: Option<String>,
    with: Option<String>,
    expect_count: Option<usize>,
    prepend: Option<Vec<String>>,
}

/// The field a continuation line continues.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    None,
    Location,
    Reason,
    /// A block of `|` lines: `prepend:`, or a `replace-text:` / `with:` given no value.
    Prepend,
    ReplaceText,
    With,
}

impl Last {
    fn is_block(self) -> bool {
        matches!(self, Last::Prepend | Last::ReplaceText | Last::With)
    }
}

impl Draft {
    fn finish(self) -> Result<Erratum, ErrataError> {
        let incomplete = |message: &str| ErrataError::Incomplete {
            line: self.line,
            id: self.id.clone(),
            message: message.to_string(),
        };
        let location = self.location.clone().ok_or_else(|| incomplete("no `location:`"))?;
        let reason = self.reason.clone().ok_or_else(|| incomplete("no `reason:`"))?;
        let text = match (self.replace_text.clone(), self.with.clone()) {
            (Some(old), _) if old.is_empty() => return Err(incomplete("`replace-text:` has no text")),
            (Some(old), Some(new)) if old.lines().count() != new.split('\n').count() => {
                return Err(incomplete(
                    "`replace-text:` and `with:` must have as many lines (lines keep their numbers)",
                ))
            }
            (Some(old), Some(new)) => Some((old, new)),
            (None, None) => None,
            (Some(_), None) => return Err(incomplete("`replace-text:` needs `with:`")),
            (None, Some(_)) => return Err(incomplete("`with:` without `replace-text:`")),
        };
        let action = match (self.replace.clone(), text, self.expect_count, self.prepend.clone()) {
            (Some((old, new)), None, Some(expect_count), None) => Action::ReplaceIdentifier { old, new, expect_count },
            (None, Some((old, new)), Some(expect_count), None) => Action::ReplaceText { old, new, expect_count },
            (Some(_), None, None, None) => return Err(incomplete("`replace-identifier:` needs `expect-count:`")),
            (None, Some(_), None, None) => return Err(incomplete("`replace-text:` needs `expect-count:`")),
            (None, None, Some(_), None) => return Err(incomplete("`expect-count:` without a replacement")),
            (None, None, None, Some(lines)) if lines.is_empty() => {
                return Err(incomplete("`prepend:` is not followed by any `|` line"))
            }
            (None, None, None, Some(lines)) => Action::Prepend { xdr: lines.join("\n") },
            (None, None, None, None) => {
                return Err(incomplete("no action (`replace-identifier:`, `replace-text:` or `prepend:`)"))
            }
            _ => return Err(incomplete("more than one action")),
        };
        Ok(Erratum { id: self.id, location, reason, action })
    }
}

fn is_identifier(s: &str) -> bool {
    // RFC 4506 §6.2: a letter, then letters, digits and underscores.
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_id(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Parse an errata file.
///
/// # Errors
///
/// [`ErrataError::Syntax`] for a malformed line and
/// [`ErrataError::Incomplete`] for an erratum lacking a field or with
/// conflicting ones, each with its 1-based line number.
///
/// ```
/// use xdr_spec::errata::{parse, ErrataError};
///
/// assert!(parse("# no errata\n").unwrap().errata.is_empty());
/// let err = parse("erratum: x\nbogus: y\n").unwrap_err();
/// assert!(matches!(err, ErrataError::Syntax { line: 2, .. }));
/// ```
pub fn parse(text: &str) -> Result<Errata, ErrataError> {
    let mut errata: Vec<Erratum> = Vec::new();
    let mut ids: Vec<(String, usize)> = Vec::new();
    let mut draft: Option<Draft> = None;
    let mut last = Last::None;

    for (idx, raw) in text.split('\n').enumerate() {
        let line = idx + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let syntax = |message: String| ErrataError::Syntax { line, message };
        let trimmed = raw.trim();
        if trimmed.starts_with('#') {
            continue;
        }
        if trimmed.is_empty() {
            // A blank line ends free text, but not a prepend block, which
            // only `|` lines continue anyway.
            if !last.is_block() {
                last = Last::None;
            }
            continue;
        }
        if let Some(rest) = raw.strip_prefix('|') {
            let Some(d) = draft.as_mut().filter(|_| last.is_block()) else {
                return Err(syntax("a `|` line outside a `prepend:`, `replace-text:` or `with:` block".into()));
            };
            let text = rest.strip_prefix(' ').unwrap_or(rest);
            match last {
                Last::Prepend => d.prepend.get_or_insert_with(Vec::new).push(text.to_string()),
                _ => {
                    let slot = if last == Last::With { &mut d.with } else { &mut d.replace_text };
                    match slot {
                        Some(block) if !block.is_empty() => {
                            block.push('\n');
                            block.push_str(text);
                        }
                        _ => *slot = Some(text.to_string()),
                    }
                }
            }
            continue;
        }
        if raw.starts_with([' ', '\t']) {
            let d = draft.as_mut().ok_or_else(|| syntax("a continuation line outside an erratum".into()))?;
            let field = match last {
                Last::Location => d.location.as_mut(),
                Last::Reason => d.reason.as_mut(),
                _ => None,
            };
            let Some(field) = field else {
                return Err(syntax("a continuation line that follows no `location:` or `reason:`".into()));
            };
            field.push(' ');
            field.push_str(trimmed);
            continue;
        }
        let Some((key, value)) = raw.split_once(':') else {
            return Err(syntax(format!("expected `KEY: VALUE`, found `{trimmed}`")));
        };
        let (key, value) = (key.trim(), value.trim());
        if key == "erratum" {
            if !is_id(value) {
                return Err(syntax(format!("`{value}` is not an erratum id (letters, digits, `-`, `_`, `.`)")));
            }
            if let Some((_, first)) = ids.iter().find(|(id, _)| id == value) {
                return Err(syntax(format!("erratum id `{value}` already used on line {first}")));
            }
            ids.push((value.to_string(), line));
            if let Some(d) = draft.take() {
                errata.push(d.finish()?);
            }
            draft = Some(Draft { line, id: value.to_string(), ..Draft::default() });
            last = Last::None;
            continue;
        }
        let Some(d) = draft.as_mut() else {
            return Err(syntax(format!("`{key}:` before the first `erratum:` line")));
        };
        let duplicate = || syntax(format!("a second `{key}:` in erratum {}", d.id));
        match key {
            "location" | "reason" => {
                let slot = if key == "location" { &mut d.location } else { &mut d.reason };
                if slot.is_some() {
                    return Err(duplicate());
                }
                if value.is_empty() {
                    return Err(syntax(format!("`{key}:` is empty")));
                }
                *slot = Some(value.to_string());
                last = if key == "location" { Last::Location } else { Last::Reason };
            }
            "replace-identifier" => {
                if d.replace.is_some() {
                    return Err(duplicate());
                }
                let words: Vec<&str> = value.split_whitespace().collect();
                let [old, new] = words.as_slice() else {
                    return Err(syntax(format!("`replace-identifier:` takes OLD NEW, found `{value}`")));
                };
                for w in [old, new] {
                    if !is_identifier(w) {
                        return Err(syntax(format!("`{w}` is not an XDR identifier")));
                    }
                }
                d.replace = Some(((*old).to_string(), (*new).to_string()));
                last = Last::None;
            }
            "replace-text" | "with" => {
                let slot = if key == "with" { &mut d.with } else { &mut d.replace_text };
                if slot.is_some() {
                    return Err(duplicate());
                }
                // Given no value, the text is the `|` lines below (several lines).
                *slot = Some(value.to_string());
                last = match (value.is_empty(), key) {
                    (false, _) => Last::None,
                    (true, "with") => Last::With,
                    (true, _) => Last::ReplaceText,
                };
            }
            "expect-count" => {
                if d.expect_count.is_some() {
                    return Err(duplicate());
                }
                let n =
                    value.parse().map_err(|_| syntax(format!("`expect-count:` takes a number, found `{value}`")))?;
                d.expect_count = Some(n);
                last = Last::None;
            }
            "prepend" => {
                if d.prepend.is_some() {
                    return Err(duplicate());
                }
                if !value.is_empty() {
                    return Err(syntax("`prepend:` takes no value; put the XDR on `|` lines below it".into()));
                }
                d.prepend = Some(Vec::new());
                last = Last::Prepend;
            }
            _ => return Err(syntax(format!("unknown key `{key}:`"))),
        }
    }
    if let Some(d) = draft.take() {
        errata.push(d.finish()?);
    }
    Ok(Errata { errata })
}

/// Byte ranges of the whole-word occurrences of identifier `word` in XDR
/// code, skipping `/* ... */` comments (RFC 4506 §6.2).
fn occurrences(xdr: &str, word: &str) -> Vec<(usize, usize)> {
    let bytes = xdr.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i = match xdr[i + 2..].find("*/") {
                Some(p) => i + 2 + p + 2,
                None => bytes.len(),
            };
        } else if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if &xdr[start..i] == word {
                found.push((start, i));
            }
        } else if bytes[i].is_ascii_digit() {
            // A number (`0x1f`) is one token: no identifier starts inside it.
            while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    found
}

impl Errata {
    /// Apply the errata to `xdr`, in file order. Returns the corrected XDR
    /// and one [`Applied`] per erratum.
    ///
    /// # Errors
    ///
    /// [`ErrataError::CountMismatch`] when a `replace-identifier` erratum
    /// does not find exactly the occurrences it expects.
    ///
    /// ```
    /// let errata = xdr_spec::errata::parse(
    ///     "erratum: e\nlocation: 4.2\nreason: typo\nreplace-identifier: a b\nexpect-count: 2\n",
    /// )
    /// .unwrap();
    /// let (xdr, _) = errata.apply("struct s { a x; a y; };").unwrap();
    /// assert_eq!(xdr, "struct s { b x; b y; };");
    /// assert!(errata.apply("struct s { a x; };").is_err());
    /// ```
    pub fn apply(&self, xdr: &str) -> Result<(String, Vec<Applied>), ErrataError> {
        self.apply_with_offset(xdr).map(|(xdr, applied, _)| (xdr, applied))
    }

    /// Like [`Errata::apply`], also returning how many lines the `prepend`
    /// errata put before the XDR: line `i` of the result came from line
    /// `i - offset` of `xdr` when `i >= offset`, and from an erratum
    /// otherwise. Replacements never add or remove lines.
    ///
    /// # Errors
    ///
    /// As [`Errata::apply`].
    pub fn apply_with_offset(&self, xdr: &str) -> Result<(String, Vec<Applied>, usize), ErrataError> {
        let mut body = xdr.to_string();
        let mut prefix = String::new();
        let mut prepended = 0;
        let mut applied = Vec::with_capacity(self.errata.len());
        for e in &self.errata {
            let summary = match &e.action {
                Action::ReplaceIdentifier { old, new, expect_count } => {
                    let found = occurrences(&body, old);
                    if found.len() != *expect_count {
                        return Err(ErrataError::CountMismatch {
                            id: e.id.clone(),
                            old: old.clone(),
                            expected: *expect_count,
                            found: found.len(),
                        });
                    }
                    for &(start, end) in found.iter().rev() {
                        body.replace_range(start..end, new);
                    }
                    let plural = if found.len() == 1 { "" } else { "s" };
                    format!("replaced {old} with {new} ({} occurrence{plural}): {}", found.len(), e.reason)
                }
                Action::ReplaceText { old, new, expect_count } => {
                    let found = body.matches(old.as_str()).count();
                    if found != *expect_count {
                        return Err(ErrataError::CountMismatch {
                            id: e.id.clone(),
                            old: old.clone(),
                            expected: *expect_count,
                            found,
                        });
                    }
                    body = body.replace(old.as_str(), new);
                    let plural = if found == 1 { "" } else { "s" };
                    // One line of report: the lines of a block joined by ` | `.
                    let flat = |t: &str| t.split('\n').map(str::trim).collect::<Vec<_>>().join(" | ");
                    format!("replaced `{}` with `{}` ({found} occurrence{plural}): {}", flat(old), flat(new), e.reason)
                }
                Action::Prepend { xdr: text } => {
                    let lines: Vec<&str> = text.split('\n').collect();
                    for l in &lines {
                        prefix.push_str(l);
                        prefix.push('\n');
                    }
                    prepended += lines.len();
                    let plural = if lines.len() == 1 { "" } else { "s" };
                    format!("prepended {} line{plural} ({}): {}", lines.len(), lines.join(" "), e.reason)
                }
            };
            applied.push(Applied { id: e.id.clone(), summary });
        }
        prefix.push_str(&body);
        Ok((prefix, applied, prepended))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_text_swaps_a_declaration_and_counts() {
        let e = parse(
            "erratum: b\nlocation: 8.3\nreason: backwards\nreplace-text: typedef t uint32;\n\
             with: typedef uint32 t;\nexpect-count: 1\n",
        )
        .unwrap();
        let (xdr, applied) = e.apply("typedef t uint32;\nstruct s { t x; };").unwrap();
        assert_eq!(xdr, "typedef uint32 t;\nstruct s { t x; };");
        assert!(applied[0].summary.starts_with("replaced `typedef t uint32;` with `typedef uint32 t;` (1 occurrence)"));
        assert!(matches!(e.apply("struct s { t x; };"), Err(ErrataError::CountMismatch { found: 0, .. })));
        let missing = parse("erratum: b\nlocation: x\nreason: y\nreplace-text: a\nexpect-count: 1\n");
        assert!(matches!(missing, Err(ErrataError::Incomplete { .. })));
    }

    #[test]
    fn replace_text_over_several_lines_keeps_the_line_count() {
        // `| ` then the text: the space after the bar is not part of it, the rest is.
        let text = "erratum: m\nlocation: 8.4\nreason: one arm\nreplace-text:\n|   case 1:\n|     int a;\n\
                    |   case 2:\nwith:\n|   case 1:\n|\n|   case 2:\nexpect-count: 1\n";
        let e = parse(text).unwrap();
        let xdr = "union u switch (int d) {\n  case 1:\n    int a;\n  case 2:\n    int a;\n};";
        let (fixed, applied) = e.apply(xdr).unwrap();
        assert_eq!(fixed, "union u switch (int d) {\n  case 1:\n\n  case 2:\n    int a;\n};");
        assert!(applied[0].summary.starts_with("replaced `case 1: | int a; | case 2:` with `case 1: |  | case 2:`"));
        let uneven = text.replace("with:\n|   case 1:\n|\n", "with:\n|   case 1:\n");
        assert!(matches!(parse(&uneven), Err(ErrataError::Incomplete { .. })), "lines must keep their numbers");
    }

    #[test]
    fn occurrences_skip_comments_and_partial_words() {
        let xdr = "a ab _a a_ /* a */ a;0a a";
        assert_eq!(occurrences(xdr, "a").len(), 3);
        assert_eq!(occurrences("/* unterminated a", "a").len(), 0);
        assert_eq!(occurrences("é a", "a").len(), 1);
    }
}
