//! Step 1 of the pipeline: find the XDR inside a specification document.
//!
//! # The convention
//!
//! RFC 8166 §5.1 (and the RPC-over-RDMA Version Two draft, §4) mark every
//! line of their XDR with `///` and give the script that extracts it:
//!
//! ```text
//! grep '^ *///' | sed 's?^ /// ??' | sed 's?^ *///$??'
//! ```
//!
//! [`extract`] does the same: a line whose first non-blank characters are
//! `///` is XDR; the leading white space, the `///` and one following space
//! are removed. Unlike the literal script, any leading white space is
//! tolerated (the v1 draft has its markers in column 0, where the first `sed`
//! strips nothing). Everything else is skipped: prose, blank lines, and the
//! page furniture of paginated plain text (form feeds, running headers,
//! footers) that may sit between two marker lines. Markers are found the same
//! way inside markdown fences (```` ``` ````, `~~~ xdr`) and `<CODE BEGINS>`
//! blocks.
//!
//! # Repair
//!
//! With [`ExtractOptions::repair`], extraction also recovers XDR from a
//! degraded rendering (`specs/RENDERINGS.md` describes the v2 draft's) and
//! reports every change as a [`Repair`]:
//!
//! * `111` where a `///` marker belongs (a line `111`, or `111 ` before code);
//! * code lines whose marker was rendered on another line: inside a code
//!   block (`<CODE BEGINS>` or a fence) and inside a declaration that is still
//!   open, an unmarked line that reads as XDR is taken; a bare marker inside
//!   such a declaration's body is the displaced marker of a code line and is
//!   dropped;
//! * page headers, footers and fence lines inside an open declaration;
//! * markdown escapes (`RDMA\_ERR\_VERS`);
//! * a declaration split over two lines (`uint32` / `rdma_position;`), or
//!   rendered with its halves swapped (`rdma_credit;` / `uint32`): a bare
//!   name with no type next to a bare type with no name is one declaration;
//! * an enumerator that lost an underscore (`RDMA OPTIONAL = 5` among
//!   `RDMA_MSG`, `RDMA_NOMSG`, ...), joined only at a prefix every other
//!   enumerator of the enum shares;
//! * a comment block flattened into one line with inline markers (the v2
//!   draft's licence, §4.1), split back into lines.
//!
//! A repair that the text does not justify is an
//! [`ExtractError::UnjustifiedRepair`] naming the spec line; repair never
//! guesses, never renames, and never adds an identifier. Errors of the
//! specification itself (the v2 draft's undefined `rpcrdma2_chunks`) are not
//! rendering damage and are left to [`crate::errata`].
//!
//! On a clean document, repair changes nothing and reports nothing.
//!
//! # Example
//!
//! ```
//! use xdr_spec::extract::{extract, ExtractOptions};
//!
//! let spec = "\
//! 4.2. Example XDR
//!
//!    /// struct pair {
//!    ///     uint32 a;
//!    ///     uint32 b;
//!    /// };
//! ";
//! let x = extract(spec, &ExtractOptions::default()).unwrap();
//! assert_eq!(x.xdr, "struct pair {\n    uint32 a;\n    uint32 b;\n};\n");
//! assert_eq!(x.origins[1].spec_line, 4);
//! assert_eq!(x.origins[1].section.as_deref(), Some("4.2"));
//! assert!(x.repairs.is_empty());
//! ```

mod layout;
mod lex;
mod repair;
mod scan;

use scan::Source;

/// How to extract.
///
/// ```
/// use xdr_spec::extract::ExtractOptions;
/// let opts = ExtractOptions::new().repair(true);
/// assert!(opts.repair && !ExtractOptions::default().repair);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtractOptions {
    /// Recover XDR from degraded renderings, reporting each change (see the
    /// [module documentation](self)). Off by default: only `///` lines.
    pub repair: bool,
}

impl ExtractOptions {
    /// The defaults: only `///` lines, no repair. A `const fn`, for options in constants.
    pub const fn new() -> Self {
        ExtractOptions { repair: false }
    }

    /// Sets [`repair`](Self::repair).
    pub const fn repair(mut self, on: bool) -> Self {
        self.repair = on;
        self
    }
}

/// Where a line of extracted XDR came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// 1-based line number in the spec text (for a line that repair joined
    /// from two, the first of them).
    pub spec_line: usize,
    /// Number of the nearest section heading above that line (`"4.2"`,
    /// `"5.1.2"`); `None` before the first heading or under an unnumbered
    /// one (`Abstract`).
    pub section: Option<String>,
    /// Title of that heading (`"RPC-Over-RDMA Version Two XDR"`).
    pub section_title: Option<String>,
}

/// One change that repair made to the text of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// 1-based line number in the spec text where the damage is.
    pub spec_line: usize,
    /// What was changed, from what to what, in a sentence.
    pub what: String,
}

impl Repair {
    /// The repair as a report line, `SPEC:LINE: repaired: WHAT`, in the style
    /// of compiler diagnostics so that editors can jump to it.
    ///
    /// ```
    /// use xdr_spec::extract::Repair;
    ///
    /// let r = Repair { spec_line: 270, what: "restored a lost underscore".into() };
    /// assert_eq!(r.to_report_line("v2.txt"), "v2.txt:270: repaired: restored a lost underscore");
    /// ```
    pub fn to_report_line(&self, spec_name: &str) -> String {
        format!("{spec_name}:{}: repaired: {}", self.spec_line, self.what)
    }
}

/// The XDR found in a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The XDR text, each line ending in `\n`.
    pub xdr: String,
    /// Where each line of [`Extracted::xdr`] came from: `origins[i]` is the
    /// origin of `xdr.lines().nth(i)`.
    pub origins: Vec<Origin>,
    /// What repair changed, in the order it was found (empty without
    /// [`ExtractOptions::repair`]).
    pub repairs: Vec<Repair>,
}

/// Why extraction failed.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtractError {
    /// The document has no XDR: no `///` line (and, with repair, nothing
    /// recoverable), or only comments.
    #[error(
        "no XDR found: no line carries XDR code after a `///` marker (the extraction convention of RFC 8166 §5.1)"
    )]
    NoXdr,
    /// Repair found damage it cannot undo without guessing.
    #[error("line {line}: cannot repair `{text}`: {why}")]
    UnjustifiedRepair {
        /// 1-based line number in the spec text.
        line: usize,
        /// The text of that line.
        text: String,
        /// Why no repair is justified.
        why: String,
    },
}

/// Extract the XDR from the text of a specification.
///
/// Never panics, whatever the input. See the [module documentation](self)
/// for the rules.
///
/// # Errors
///
/// [`ExtractError::NoXdr`] when the document holds no XDR code;
/// [`ExtractError::UnjustifiedRepair`] when, with repair, damage cannot be
/// undone without guessing.
///
/// ```
/// use xdr_spec::extract::{extract, ExtractError, ExtractOptions};
///
/// let prose = "1.  Introduction\n\n   No XDR here.\n";
/// assert_eq!(extract(prose, &ExtractOptions::default()), Err(ExtractError::NoXdr));
/// ```
pub fn extract(spec_text: &str, opts: &ExtractOptions) -> Result<Extracted, ExtractError> {
    let scanned = scan::scan(spec_text, opts.repair)?;
    let mut repairs = scanned.repairs;
    let lines = if opts.repair {
        repair::repair(scanned.lines, &mut repairs)?
    } else {
        debug_assert!(scanned.lines.iter().all(|l| l.source == Source::Marked));
        scanned
            .lines
            .into_iter()
            .map(|l| repair::OutLine { text: l.text, spec_line: l.spec_line, section: l.section })
            .collect()
    };

    // XDR means code: a document whose marker lines hold only comments (a
    // licence block) has none.
    let mut in_comment = false;
    let has_code = lines.iter().any(|l| {
        let lexed = lex::lex_line(&l.text, in_comment);
        in_comment = lexed.ends_in_comment;
        !lexed.is_code_free()
    });
    if !has_code {
        return Err(ExtractError::NoXdr);
    }

    // Repairs in spec order (the scan and the structural pass each report in
    // order; merge them). The sort is stable: same-line repairs keep order.
    repairs.sort_by_key(|r| r.spec_line);

    let mut xdr = String::new();
    let mut origins = Vec::with_capacity(lines.len());
    for l in lines {
        // A line of XDR never holds a line break; keep `origins` and
        // `xdr.lines()` in step even if some input had a stray `\r`.
        xdr.push_str(&l.text.replace(['\r', '\n'], " "));
        xdr.push('\n');
        let section = scanned.sections.get(l.section).cloned().unwrap_or_default();
        origins.push(Origin { spec_line: l.spec_line, section: section.number, section_title: section.title });
    }
    Ok(Extracted { xdr, origins, repairs })
}
