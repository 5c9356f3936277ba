//! A line-at-a-time tokenizer for the XDR language, just precise enough for
//! extraction: it tells code from comments, counts braces, and recognises the
//! shapes of declarations that degraded renderings break apart.
//!
//! It is deliberately not the parser (that is [`crate::parse`]): extraction
//! must work on text that is not yet valid XDR, and must never fail on it.

/// What a token is. Identifiers follow RFC 4506 §6.2 ("a letter followed by
/// an optional sequence of letters, digits, or underscore"); a leading
/// underscore is tolerated because rendering damage is exactly what this
/// module looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokKind {
    /// An identifier or keyword.
    Ident,
    /// A numeric constant (decimal, octal or hexadecimal; a sign is a
    /// separate [`TokKind::Punct`]).
    Number,
    /// One of the XDR punctuation characters.
    Punct(char),
    /// A `/* ... */` comment, or the part of one that lies on this line.
    Comment,
    /// A character that has no place in XDR outside a comment.
    Other(char),
}

/// A token: its kind and its byte range in the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: TokKind,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// One lexed line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Lexed {
    pub(crate) tokens: Vec<Token>,
    /// The line began inside a comment opened on an earlier line.
    pub(crate) starts_in_comment: bool,
    /// A comment is still open at the end of the line.
    pub(crate) ends_in_comment: bool,
}

impl Lexed {
    /// The tokens that are code, not comment.
    pub(crate) fn code(&self) -> impl Iterator<Item = &Token> + '_ {
        self.tokens.iter().filter(|t| t.kind != TokKind::Comment)
    }

    /// True when every token is XDR (or comment).
    pub(crate) fn is_xdr(&self) -> bool {
        !self.tokens.iter().any(|t| matches!(t.kind, TokKind::Other(_)))
    }

    /// True when the line holds no code at all (blank, or comment only).
    pub(crate) fn is_code_free(&self) -> bool {
        self.code().next().is_none()
    }

    /// Byte offset where the trailing comment starts, when the line's
    /// comments all come after its code (`uint32 x; /* why */`). `None` when
    /// there is no comment, or when code follows a comment.
    pub(crate) fn trailing_comment_start(&self) -> Option<usize> {
        let first = self.tokens.iter().position(|t| t.kind == TokKind::Comment)?;
        if self.tokens[first..].iter().all(|t| t.kind == TokKind::Comment) {
            Some(self.tokens[first].start)
        } else {
            None
        }
    }
}

const PUNCT: &[char] = &['{', '}', '[', ']', '<', '>', '(', ')', '*', ';', ':', ',', '=', '-'];

/// Lex one line; `in_comment` says whether a comment is open from the line
/// before. Never fails: characters that are not XDR become
/// [`TokKind::Other`].
pub(crate) fn lex_line(line: &str, in_comment: bool) -> Lexed {
    let bytes = line.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut open = in_comment;
    if open {
        let (end, closed) = comment_end(line, 0);
        tokens.push(Token { kind: TokKind::Comment, start: 0, end });
        open = !closed;
        i = end;
    }
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let (end, closed) = comment_end(line, i + 2);
            tokens.push(Token { kind: TokKind::Comment, start: i, end });
            open = !closed;
            i = end;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let end = scan_while(bytes, i, |b| b.is_ascii_alphanumeric() || b == b'_');
            tokens.push(Token { kind: TokKind::Ident, start: i, end });
            i = end;
        } else if c.is_ascii_digit() {
            let end = scan_while(bytes, i, |b| b.is_ascii_alphanumeric());
            tokens.push(Token { kind: TokKind::Number, start: i, end });
            i = end;
        } else if PUNCT.contains(&char::from(c)) {
            tokens.push(Token { kind: TokKind::Punct(char::from(c)), start: i, end: i + 1 });
            i += 1;
        } else {
            // Not XDR. Take the whole UTF-8 character so ranges stay on
            // character boundaries (these read arbitrary text).
            let ch = line[i..].chars().next().unwrap_or('\u{fffd}');
            let end = i + ch.len_utf8();
            tokens.push(Token { kind: TokKind::Other(ch), start: i, end });
            i = end;
        }
    }
    Lexed { tokens, starts_in_comment: in_comment, ends_in_comment: open }
}

/// End (exclusive) of a comment whose body starts at `from`, and whether it
/// closed on this line.
fn comment_end(line: &str, from: usize) -> (usize, bool) {
    match line.get(from..).and_then(|rest| rest.find("*/")) {
        Some(pos) => (from + pos + 2, true),
        None => (line.len(), false),
    }
}

fn scan_while(bytes: &[u8], start: usize, keep: impl Fn(u8) -> bool) -> usize {
    let mut end = start;
    while end < bytes.len() && keep(bytes[end]) {
        end += 1;
    }
    end
}

/// The text of a token.
pub(crate) fn text<'a>(line: &'a str, t: &Token) -> &'a str {
    line.get(t.start..t.end).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_code() {
        let l = lex_line("uint32 x; /* a */ /* b", false);
        assert_eq!(l.code().count(), 3);
        assert!(l.ends_in_comment);
        assert_eq!(l.trailing_comment_start(), Some(10));
        let l = lex_line(" still comment */ int y;", true);
        assert!(l.starts_in_comment && !l.ends_in_comment);
        assert_eq!(l.code().count(), 3);
        assert_eq!(l.trailing_comment_start(), None);
    }

    #[test]
    fn other_characters_do_not_panic() {
        let l = lex_line("héllo § \\_ 'x'", false);
        assert!(!l.is_xdr());
        for t in &l.tokens {
            let _ = text("héllo § \\_ 'x'", t);
        }
    }
}
