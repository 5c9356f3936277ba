//! One input document of a build (a spec text or an `.x` file, with its
//! errata applied), and where every line of its XDR was written: so that a
//! diagnostic about an extension names the extension's own file, line and
//! column, not a line of some concatenation.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{file_name, read, PipelineError};
use crate::{errata, extract};

/// A place in a file as written: a spec text, an `.x` file, or the errata
/// file whose `prepend:` block added the line.
///
/// Displayed `PATH:LINE:COLUMN`, or `PATH:LINE` where the column is not
/// known: on a line that repair rebuilt (see [`crate::extract`]), and past a
/// `replace-identifier` erratum on its line, the XDR's columns are not the
/// file's.
///
/// ```
/// use xdr_spec::pipeline::Location;
/// let at = Location { path: "ext.txt".into(), line: 12, column: Some(8) };
/// assert_eq!(at.to_string(), "ext.txt:12:8");
/// assert_eq!(Location { column: None, ..at }.to_string(), "ext.txt:12");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file, as the build was given it.
    pub path: PathBuf,
    /// 1-based line in that file.
    pub line: usize,
    /// 1-based column (in bytes) in that file, where known.
    pub column: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path.display(), self.line)?;
        match self.column {
            Some(c) => write!(f, ":{c}"),
            None => Ok(()),
        }
    }
}

/// How a document's file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A specification text: its XDR is extracted (RFC 8166 §5.1's `///`
    /// convention), repaired if asked.
    Spec {
        /// Repair a degraded rendering.
        repair: bool,
    },
    /// A file of XDR (`.x`), taken as it is.
    Xdr,
}

/// Where one line of a document's XDR was written.
#[derive(Debug, Clone)]
pub(crate) struct LineSource {
    path: PathBuf,
    /// 1-based line in `path`.
    line: usize,
    /// Bytes on that line before the XDR text (`   /// `); `None` where the
    /// XDR line is not a suffix of the file's line (repair rebuilt it).
    shift: Option<usize>,
    /// How many leading bytes of the XDR line are as the file has them: an
    /// identifier erratum changes what follows its first replacement.
    exact: usize,
}

impl LineSource {
    /// The file position of 1-based `column` of this XDR line.
    fn locate(&self, column: usize) -> Location {
        let column = self.shift.filter(|_| column.saturating_sub(1) <= self.exact).map(|s| s + column);
        Location { path: self.path.clone(), line: self.line, column }
    }
}

/// One document, loaded: its XDR with errata applied, line by line traced
/// back to the files.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    /// The document's file, as given.
    pub(crate) path: PathBuf,
    /// The XDR, errata applied.
    pub(crate) xdr: String,
    /// Per line of `xdr`, where it was written.
    pub(crate) lines: Vec<LineSource>,
    /// Per line of `xdr`, its origin as the generated documentation cites it
    /// ("FILE section S, line N").
    pub(crate) line_origins: Vec<String>,
    /// One line per repair and per erratum applied.
    pub(crate) report: Vec<String>,
}

impl Document {
    /// The file position of 1-based `(line, column)` of the document's XDR.
    pub(crate) fn locate(&self, line: usize, column: usize) -> Location {
        match self.lines.get(line.wrapping_sub(1)) {
            Some(source) => source.locate(column),
            // Past the last line (an error at the end of the input): the
            // end of the document's file.
            None => Location { path: self.path.clone(), line: self.lines.last().map_or(1, |l| l.line), column: None },
        }
    }
}

/// Read the document at `path` as `kind`, then apply the errata file if one
/// is given.
pub(crate) fn load(path: &Path, errata_path: Option<&Path>, kind: Kind) -> Result<Document, PipelineError> {
    let text = read(path)?;
    let name = file_name(path);
    let mut doc = match kind {
        Kind::Spec { repair } => from_spec(path, &name, &text, repair)?,
        Kind::Xdr => from_xdr(path, &name, text),
    };
    if let Some(errata_path) = errata_path {
        apply_errata(&mut doc, errata_path)?;
    }
    Ok(doc)
}

/// The XDR of a spec text, each line traced to its line of the text.
fn from_spec(path: &Path, name: &str, text: &str, repair: bool) -> Result<Document, PipelineError> {
    let extracted = extract::extract(text, &extract::ExtractOptions { repair })
        .map_err(|source| PipelineError::Extract { path: path.to_path_buf(), source })?;
    let report = extracted.repairs.iter().map(|r| r.to_report_line(name)).collect();
    let line_origins = extracted
        .origins
        .iter()
        .map(|o| match &o.section {
            Some(s) => format!("{name} section {s}, line {}", o.spec_line),
            None => format!("{name}, line {}", o.spec_line),
        })
        .collect();
    let spec_lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let lines = extracted
        .xdr
        .lines()
        .zip(&extracted.origins)
        .map(|(xdr_line, o)| {
            let written = spec_lines.get(o.spec_line - 1).copied().unwrap_or_default();
            // A marked line is `   /// ` and the XDR: the XDR is the line's
            // suffix. A line repair joined or unescaped is not.
            let shift = written.ends_with(xdr_line).then(|| written.len() - xdr_line.len());
            LineSource { path: path.to_path_buf(), line: o.spec_line, shift, exact: xdr_line.len() }
        })
        .collect();
    Ok(Document { path: path.to_path_buf(), xdr: extracted.xdr, lines, line_origins, report })
}

/// An `.x` file: every line is its own.
fn from_xdr(path: &Path, name: &str, xdr: String) -> Document {
    let lines = xdr
        .lines()
        .enumerate()
        .map(|(i, l)| LineSource { path: path.to_path_buf(), line: i + 1, shift: Some(0), exact: l.len() })
        .collect();
    let line_origins = (1..=xdr.lines().count()).map(|n| format!("{name}, line {n}")).collect();
    Document { path: path.to_path_buf(), xdr, lines, line_origins, report: Vec::new() }
}

/// Apply an errata file to a loaded document, keeping every line traced:
/// a prepended line to its `|` line in the errata file, a line an
/// identifier was replaced in to its own line, exact up to the first
/// change.
fn apply_errata(doc: &mut Document, errata_path: &Path) -> Result<(), PipelineError> {
    let errata_text = read(errata_path)?;
    let err = |source| PipelineError::Errata { path: errata_path.to_path_buf(), source };
    let errata = errata::parse(&errata_text).map_err(err)?;
    let (fixed, applied, prepended) = errata.apply_with_offset(&doc.xdr).map_err(err)?;
    let errata_name = file_name(errata_path);

    // The prepended lines are the errata file's `|` lines, in file order
    // (`errata` module documentation: one XDR line per `|` line).
    let bars = errata_text.split('\n').enumerate().filter_map(|(i, l)| {
        let l = l.strip_suffix('\r').unwrap_or(l);
        let rest = l.strip_prefix('|')?;
        let shift = if rest.starts_with(' ') { 2 } else { 1 };
        Some(LineSource { path: errata_path.to_path_buf(), line: i + 1, shift: Some(shift), exact: usize::MAX })
    });
    let mut lines: Vec<LineSource> = bars.take(prepended).collect();
    for ((mut source, before), after) in doc.lines.drain(..).zip(doc.xdr.lines()).zip(fixed.lines().skip(prepended)) {
        let same = before.bytes().zip(after.bytes()).take_while(|(a, b)| a == b).count();
        source.exact = source.exact.min(same);
        lines.push(source);
    }
    doc.lines = lines;

    let mut origins = vec![format!("added by {errata_name}"); prepended];
    origins.append(&mut doc.line_origins);
    doc.line_origins = origins;
    doc.report.extend(applied.iter().map(|a| format!("{errata_name}: erratum {}: {}", a.id, a.summary)));
    doc.xdr = fixed;
    Ok(())
}
