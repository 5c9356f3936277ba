//! Documents compiled together: a base specification and the extension
//! documents that use its names, parsed into one [`Spec`] whose spans every
//! diagnostic traces back to the document, file, line and column it was
//! written at.

use super::document::{Document, Location};
use super::PipelineError;
use crate::ast::{LineIndex, Span, Spec};
use crate::check::{self, Diagnostic};
use crate::parse;

/// Documents, in order, as one specification.
pub(crate) struct Unit<'d> {
    docs: Vec<&'d Document>,
    /// Per document, the 1-based line of the combined text it starts at.
    first_lines: Vec<usize>,
    /// Per document, the index of its first definition in `spec`.
    pub(crate) first_definitions: Vec<usize>,
    /// The documents' XDR, one after the other.
    pub(crate) text: String,
    lines: LineIndex,
    /// The parsed whole.
    pub(crate) spec: Spec,
}

impl<'d> Unit<'d> {
    /// Parse the documents, each on its own first (so that a syntax error is
    /// one document's, reported in its file, and cannot run on into the
    /// next), then together.
    pub(crate) fn new(docs: Vec<&'d Document>) -> Result<Self, PipelineError> {
        let mut text = String::new();
        let mut first_lines = Vec::with_capacity(docs.len());
        let mut first_definitions = Vec::with_capacity(docs.len());
        let mut alone = Vec::with_capacity(docs.len());
        for doc in &docs {
            let spec = parse::parse(&doc.xdr)
                .map_err(|source| PipelineError::ParseAt { at: doc.locate(source.line, source.column), source })?;
            first_lines.push(text.matches('\n').count() + 1);
            first_definitions.push(alone.iter().map(|s: &Spec| s.definitions.len()).sum());
            alone.push(spec);
            text.push_str(&doc.xdr);
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        let lines = LineIndex::new(&text);
        let mut unit = Unit { docs, first_lines, first_definitions, text, lines, spec: Spec::default() };
        // A sequence of definitions followed by another parses as both: this
        // cannot fail where each part parsed, but is reported if it does.
        let mut spec = parse::parse(&unit.text)
            .map_err(|source| PipelineError::ParseAt { at: unit.locate(source.line, source.column), source })?;
        // A comment at the end of one document is no documentation of the
        // next one's first definition: each keeps the comments it has alone.
        for (first, part) in unit.first_definitions.iter().zip(&alone) {
            if let (Some(def), Some(own)) = (spec.definitions.get_mut(*first), part.definitions.first()) {
                def.doc.clone_from(&own.doc);
            }
        }
        unit.spec = spec;
        Ok(unit)
    }

    /// The file position of 1-based `(line, column)` of the combined text.
    pub(crate) fn locate(&self, line: usize, column: usize) -> Location {
        let k = self.first_lines.partition_point(|&first| first <= line).saturating_sub(1);
        self.docs[k].locate(line + 1 - self.first_lines[k], column)
    }

    /// The file position of a span of [`Unit::spec`].
    pub(crate) fn locate_span(&self, span: Span) -> Location {
        let (line, column) = self.lines.line_col(span.offset);
        self.locate(line, column)
    }

    /// `PATH:LINE:COL: SEVERITY: MESSAGE`, at the file the diagnostic's
    /// construct was written in.
    pub(crate) fn render(&self, d: &Diagnostic) -> String {
        format!("{}: {}: {}", self.locate_span(d.span), d.severity, d.message)
    }

    /// Check the whole. On errors, every diagnostic is in the error, so that
    /// a duplicate's note naming the first definition comes with it; without
    /// errors, the diagnostics (warnings and notes) are returned.
    pub(crate) fn check(&self) -> Result<Vec<String>, PipelineError> {
        let diags = check::check(&self.spec);
        let rendered = diags.iter().map(|d| self.render(d)).collect();
        if check::has_errors(&diags) {
            return Err(PipelineError::Check(rendered));
        }
        Ok(rendered)
    }

    /// Each line's origin, for the generated documentation.
    pub(crate) fn line_origins(&self) -> Vec<String> {
        self.docs.iter().flat_map(|d| d.line_origins.iter().cloned()).collect()
    }
}
