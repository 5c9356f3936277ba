//! The document around the XDR: section headings, code blocks, page
//! furniture. Every function here takes arbitrary text and never panics.

/// A section heading: its number (`"4.2"`) when it has one, and its title.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Section {
    pub(crate) number: Option<String>,
    pub(crate) title: Option<String>,
}

/// A section heading, if `line` is one.
///
/// Plain-text RFCs and drafts put headings in column 0 as `4.2.  Title`
/// (body text is indented); the renderings in `specs/` wrap the
/// number in `<u>4</u>` or `$\underline{4}$`. Markdown headings start with
/// `#` and may carry link and attribute markup (`[4.](#section-4){...}`).
/// Table-of-contents entries look like headings but end in a page number
/// after a tab or dot leaders; they are refused.
pub(crate) fn heading(line: &str) -> Option<Section> {
    if let Some(rest) = markdown_heading(line) {
        let text = strip_markdown(rest);
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        return Some(match split_number(text) {
            Some((number, title)) => Section { number: Some(number), title: nonempty(title) },
            None => Section { number: None, title: Some(text.to_string()) },
        });
    }
    if line.starts_with(char::is_whitespace) || line.contains('\t') {
        return None;
    }
    let text = line.replace("<u>", "").replace("</u>", "").replace("$\\underline{", "").replace("}$", "");
    // RFC 7322 §4.8 headings number with a trailing dot (`4.2.`, `4.`);
    // requiring it keeps `1024 bytes ...` prose out.
    let (number, title, dotted) = split_number_dotted(text.trim_end())?;
    let title = title.trim();
    let plausible = dotted
        && title.chars().next().is_some_and(char::is_alphabetic)
        && title.chars().count() <= 100
        && !title.contains("...")
        && !title.ends_with(['.', ',', ';', ':']);
    plausible.then(|| Section { number: Some(number), title: Some(title.to_string()) })
}

fn nonempty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// The text after the `#`s of an ATX markdown heading.
fn markdown_heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    rest.starts_with([' ', '\t']).then_some(rest)
}

/// Drop markdown link targets, attribute blocks and backslash escapes:
/// `[4.](#section-4){.x} [Title](#name){.y} {#id}` → `4. Title`.
fn strip_markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '[' | ']' => {
                if c == ']' && chars.peek() == Some(&'(') {
                    skip_group(&mut chars, '(', ')');
                }
            }
            '{' => {
                // `{` has been consumed; skip to the matching `}`.
                let mut depth = 1usize;
                for n in chars.by_ref() {
                    match n {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn skip_group(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, open: char, close: char) {
    let mut depth = 0usize;
    for n in chars.by_ref() {
        if n == open {
            depth += 1;
        } else if n == close {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                break;
            }
        }
    }
}

/// `4.2. Title` or `4.2 Title` or `4.  Title` → (`4.2`, `Title`).
fn split_number(text: &str) -> Option<(String, &str)> {
    split_number_dotted(text).map(|(num, title, _)| (num, title))
}

/// Like [`split_number`], also telling whether the number ended in a dot.
fn split_number_dotted(text: &str) -> Option<(String, &str, bool)> {
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (num, rest) = text.split_at(end);
    let mut dotted = num.ends_with('.');
    let num = num.trim_end_matches('.');
    let well_formed = !num.is_empty() && num.split('.').all(|p| !p.is_empty());
    // A heading number is followed by white space (then the title), or by
    // ` .` in some renderings (`<u>4.1</u> . Title`).
    let rest = match rest.strip_prefix(" .") {
        Some(r) => {
            dotted = true;
            r
        }
        None => rest,
    };
    (well_formed && rest.starts_with(char::is_whitespace)).then(|| (num.to_string(), rest.trim(), dotted))
}

/// `<CODE BEGINS>`, the marker IETF documents put before a code component
/// (a file name may follow), in plain or markdown-escaped form.
pub(crate) fn is_code_begins(trimmed: &str) -> bool {
    unescape_angle(trimmed).starts_with("<CODE BEGINS>")
}

/// `<CODE ENDS>`.
pub(crate) fn is_code_ends(trimmed: &str) -> bool {
    unescape_angle(trimmed).starts_with("<CODE ENDS>")
}

fn unescape_angle(s: &str) -> String {
    s.replace("\\<", "<").replace("\\>", ">")
}

/// An opening or closing markdown code fence (CommonMark §4.5): three or more
/// backticks or tildes, optionally followed by an info string (`~~~ xdr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fence {
    ch: char,
    len: usize,
    has_info: bool,
}

impl Fence {
    /// Whether this fence line closes the block that `open` opened.
    pub(crate) fn closes(&self, open: &Fence) -> bool {
        self.ch == open.ch && self.len >= open.len && !self.has_info
    }
}

/// A fence line, if `trimmed` is one.
pub(crate) fn fence(trimmed: &str) -> Option<Fence> {
    let ch = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|c| *c == ch).count();
    let info = trimmed[len * ch.len_utf8()..].trim();
    // A backtick fence's info string may not contain backticks (CommonMark
    // §4.5); that rules out inline code spans such as ```x``` in prose.
    (len >= 3 && !(ch == '`' && info.contains('`'))).then_some(Fence { ch, len, has_info: !info.is_empty() })
}

/// Recognises the lines that paginated plain text puts between the lines of
/// the body: running headers (`Internet-Draft   Title   May 2016`, also when
/// a rendering split it over three lines), footers (`Lever, et al.  Expires
/// ...  [Page 12]`), and the date or title lines of a split header.
#[derive(Debug, Default)]
pub(crate) struct Furniture {
    /// Lines of a split header (title, date) still expected.
    pending: u8,
}

impl Furniture {
    /// Forget a split header in progress (something else came first).
    pub(crate) fn reset(&mut self) {
        self.pending = 0;
    }

    /// What kind of page furniture `trimmed` is, if any.
    pub(crate) fn classify(&mut self, trimmed: &str) -> Option<&'static str> {
        if is_footer(trimmed) {
            self.pending = 0;
            return Some("page footer");
        }
        if let Some(complete) = header_start(trimmed) {
            // A header that lost its title and date to line breaks is
            // followed by them on their own lines.
            self.pending = if complete { 0 } else { 2 };
            return Some("page header");
        }
        if self.pending > 0 {
            if is_month_year(trimmed) {
                self.pending = 0;
                return Some("page header date");
            }
            if is_title_like(trimmed) {
                self.pending -= 1;
                return Some("page header title");
            }
        }
        self.pending = 0;
        None
    }
}

/// `[Page 12]` at the end of the line (markdown may escape the brackets).
fn is_footer(trimmed: &str) -> bool {
    let t = trimmed.replace("\\[", "[").replace("\\]", "]");
    let Some(open) = t.rfind("[Page") else { return false };
    let tail = &t[open + "[Page".len()..];
    tail.ends_with(']') && tail[..tail.len() - 1].trim().chars().all(|c| c.is_ascii_digit())
}

/// A running header: `Internet-Draft` or `RFC NNNN` first. Returns whether
/// the header is complete on this line (it ends with its date).
fn header_start(trimmed: &str) -> Option<bool> {
    let rest = if let Some(rest) = trimmed.strip_prefix("Internet-Draft") {
        rest
    } else {
        let rest = trimmed.strip_prefix("RFC ")?;
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let rest = &rest[digits..];
        // An RFC header line always carries its title and date; anything
        // else starting with `RFC 1234` is prose.
        if !ends_with_month_year(rest) {
            return None;
        }
        rest
    };
    if rest.is_empty() {
        return Some(false);
    }
    // `Internet-Drafts are ...` is prose: the header word stands alone,
    // separated from title and date by runs of spaces.
    if !rest.starts_with("  ") {
        return None;
    }
    Some(ends_with_month_year(rest))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

fn is_month_year(trimmed: &str) -> bool {
    let mut words = trimmed.split_whitespace();
    let (Some(month), Some(year), None) = (words.next(), words.next(), words.next()) else { return false };
    MONTHS.contains(&month) && year.len() == 4 && year.chars().all(|c| c.is_ascii_digit())
}

fn ends_with_month_year(s: &str) -> bool {
    let words: Vec<&str> = s.split_whitespace().collect();
    words.len() >= 2 && is_month_year(&words[words.len() - 2..].join(" "))
}

/// The running title of a split header: words only, no XDR punctuation (an
/// XDR line always has some: `;`, `{`, `}`, `,`, `=`, `:`...).
fn is_title_like(trimmed: &str) -> bool {
    trimmed.split_whitespace().count() >= 2
        && trimmed.chars().count() <= 72
        && trimmed.chars().all(|c| c.is_alphanumeric() || c == ' ' || c == '-' || c == '/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(line: &str) -> Option<(Option<String>, Option<String>)> {
        heading(line).map(|s| (s.number, s.title))
    }

    #[test]
    fn headings() {
        let some = |n: &str, t: &str| Some((Some(n.to_string()), Some(t.to_string())));
        assert_eq!(h("4.2. RPC-Over-RDMA Version Two XDR"), some("4.2", "RPC-Over-RDMA Version Two XDR"));
        assert_eq!(h("5.1.2. RPC-Over-RDMA Version One XDR"), some("5.1.2", "RPC-Over-RDMA Version One XDR"));
        assert_eq!(h("<u>4</u>. XDR Protocol Definition"), some("4", "XDR Protocol Definition"));
        assert_eq!(h("$\\underline{3}$. Protocol Extensibility"), some("3", "Protocol Extensibility"));
        assert_eq!(h("2.2.4.1.  XDR Opaque Data"), some("2.2.4.1", "XDR Opaque Data"));
        assert_eq!(
            h("### [4.1.](#section-4.1){.section-number .selfRef} [Using the R Field](#name-using-the-r-field){.section-name .selfRef} {#name-using-the-r-field}"),
            some("4.1", "Using the R Field")
        );
        assert_eq!(h("## [Abstract](#abstract){.selfRef}"), Some((None, Some("Abstract".to_string()))));
        // Table of contents, prose, indented text.
        assert_eq!(h("<u>4.1</u> . Code Component License\t7"), None);
        assert_eq!(h("1.  Introduction ....................................................3"), None);
        assert_eq!(h("   4.2. Indented"), None);
        assert_eq!(h("1024 bytes is the default."), None);
        assert_eq!(h("1024 bytes are the default"), None);
        assert_eq!(h("5. This is a sentence."), None);
        assert_eq!(h("#"), None);
        assert_eq!(h("#######"), None);
    }

    #[test]
    fn furniture() {
        let mut f = Furniture::default();
        assert_eq!(f.classify("Internet-Draft"), Some("page header"));
        assert_eq!(f.classify("RDMA Transport for RPC V2"), Some("page header title"));
        assert_eq!(f.classify("April 2016"), Some("page header date"));
        assert_eq!(f.classify("April 2016"), None);
        assert_eq!(f.classify("Internet-Draft   RPC-over-RDMA Version One   May 2016"), Some("page header"));
        assert_eq!(f.classify("uint32 x;"), None);
        assert_eq!(f.classify("Lever, et al.  Expires November 2, 2016  [Page 12]"), Some("page footer"));
        assert_eq!(f.classify("RFC 8166        RPC-over-RDMA Version 1        June 2017"), Some("page header"));
        assert_eq!(f.classify("Internet-Drafts are working documents"), None);
        assert_eq!(f.classify("RFC 8166 says so"), None);
        assert_eq!(f.classify("Internet-Draft"), Some("page header"));
        assert_eq!(f.classify("uint32"), None);
    }

    #[test]
    fn fences() {
        assert!(fence("```").is_some());
        let open = fence("~~~ xdr").unwrap();
        assert!(fence("~~~").unwrap().closes(&open));
        assert!(!fence("```").unwrap().closes(&open));
        assert!(fence("``").is_none());
        assert!(fence("```a```").is_none());
        assert!(fence("~").is_none());
    }
}
