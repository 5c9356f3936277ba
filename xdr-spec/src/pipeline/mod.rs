//! The whole pipeline in one call, for build scripts and tools: spec text ->
//! extracted (and, where asked, repaired) XDR -> errata -> parse -> check ->
//! Rust. Every repair and erratum applied is returned in the report, so
//! nothing about the generated types is implicit.
//!
//! [`Build`] runs it over a base specification and its extension documents
//! together (one namespace, one Rust file, a module per extension);
//! [`build_script`] is a [`Build`] of one spec.
//!
//! ```no_run
//! // In a build.rs:
//! use std::path::Path;
//! let out = xdr_spec::pipeline::spec_to_rust(
//!     Path::new("../specs/rfc5666bis-draft-rpcrdma-v1.txt"),
//!     Some(Path::new("../specs/rfc5666bis-draft-rpcrdma-v1.errata")),
//!     false,
//! )
//! .unwrap();
//! std::fs::write(Path::new(&std::env::var("OUT_DIR").unwrap()).join("v1.rs"), out.rust).unwrap();
//! ```

use std::path::{Path, PathBuf};

use crate::ast::{source_text, InvalidUtf8, LineIndex};
use crate::{check, errata, extract, gen, parse};

mod build;
mod document;
mod unit;

pub use build::{Build, ExtensionXdr, Generated};
pub use document::Location;

/// Why the pipeline stopped. Each variant's message names the file and, where
/// there is one, the line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A file is not UTF-8 text; the message names the line and column of
    /// the first invalid byte.
    #[error("{path}:{source}")]
    Utf8 {
        /// The file.
        path: PathBuf,
        /// Where the first invalid byte is.
        source: InvalidUtf8,
    },
    /// No XDR could be extracted, or a repair could not be justified.
    #[error("{path}: {source}")]
    Extract {
        /// The spec.
        path: PathBuf,
        /// The error.
        source: extract::ExtractError,
    },
    /// The errata file is malformed or no longer matches the spec.
    #[error("{path}: {source}")]
    Errata {
        /// The errata file.
        path: PathBuf,
        /// The error.
        source: errata::ErrataError,
    },
    /// The XDR does not parse.
    #[error("{name}:{source}")]
    Parse {
        /// Name of the XDR (the spec it came from).
        name: String,
        /// The error.
        source: parse::ParseError,
    },
    /// The checker found errors; each line is one rendered diagnostic.
    #[error("{}", .0.join("\n"))]
    Check(Vec<String>),
    /// The generator refused a construct.
    #[error("{name}:{source}")]
    Gen {
        /// Name of the XDR.
        name: String,
        /// The error.
        source: gen::GenError,
    },
    /// The XDR of a document of a [`Build`] with extensions does not parse,
    /// at a place in the document's own file.
    #[error("{at}: {}", source.message)]
    ParseAt {
        /// Where, in the spec text, `.x` file or errata file.
        at: Location,
        /// The error, its line and column those of the document's XDR.
        source: parse::ParseError,
    },
    /// The generator refused a construct of a [`Build`] with extensions.
    #[error("{at}: {}", source.message)]
    GenAt {
        /// Where, in the file the construct was written in.
        at: Location,
        /// The error, its line and column those of the documents' XDR
        /// together.
        source: gen::GenError,
    },
    /// A [`Build`] was asked for something it cannot do (a module name that
    /// is no identifier, used twice; no output directory).
    #[error("{0}")]
    Config(String),
}

/// XDR recovered from a spec, with where each line came from and what was
/// done to it.
#[derive(Debug, Clone)]
pub struct PipelineXdr {
    /// The XDR text, errata applied.
    pub xdr: String,
    /// Per XDR line, its origin in the spec ("FILE section S, line N"), or the
    /// erratum that added it.
    pub line_origins: Vec<String>,
    /// One line per repair and per erratum applied.
    pub report: Vec<String>,
}

/// Generated Rust and the report of how it was obtained.
#[derive(Debug, Clone)]
pub struct PipelineRust {
    /// The XDR the Rust was generated from.
    pub xdr: PipelineXdr,
    /// The generated Rust source.
    pub rust: String,
    /// Notes from the checker (lists recognised, and the like).
    pub notes: Vec<String>,
}

pub(crate) fn read(path: &Path) -> Result<String, PipelineError> {
    let bytes = std::fs::read(path).map_err(|source| PipelineError::Io { path: path.to_path_buf(), source })?;
    source_text(&bytes).map(str::to_owned).map_err(|source| PipelineError::Utf8 { path: path.to_path_buf(), source })
}

pub(crate) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Extract the XDR of the spec at `spec_path` (repairing it if `repair`),
/// then apply the errata file if one is given.
pub fn spec_to_xdr(spec_path: &Path, errata_path: Option<&Path>, repair: bool) -> Result<PipelineXdr, PipelineError> {
    let doc = document::load(spec_path, errata_path, document::Kind::Spec { repair })?;
    Ok(PipelineXdr { xdr: doc.xdr, line_origins: doc.line_origins, report: doc.report })
}

/// Check XDR text and generate Rust from it. `name` is used in messages
/// and documentation.
pub fn xdr_to_rust(name: &str, xdr: &str, line_origins: Vec<String>) -> Result<(String, Vec<String>), PipelineError> {
    let spec = parse::parse(xdr).map_err(|source| PipelineError::Parse { name: name.to_string(), source })?;
    let diags = check::check(&spec);
    let lines = LineIndex::new(xdr);
    if check::has_errors(&diags) {
        return Err(PipelineError::Check(
            diags
                .iter()
                .filter(|d| d.severity == check::Severity::Error)
                .map(|d| d.render_indexed(name, &lines))
                .collect(),
        ));
    }
    let notes = diags.iter().map(|d| d.render_indexed(name, &lines)).collect();
    let opts = gen::GenOptions { source_name: name.to_string(), line_origins, ..Default::default() };
    let rust =
        gen::generate(&spec, xdr, &opts).map_err(|source| PipelineError::Gen { name: name.to_string(), source })?;
    Ok((rust, notes))
}

/// The whole pipeline: spec text to Rust. Diagnostics (errors in
/// [`PipelineError::Check`], and the notes) name the line and column of the
/// spec text the construct is written on, or of the errata file that added
/// it; a syntax error or a construct the generator refuses is reported the
/// same way ([`PipelineError::ParseAt`], [`PipelineError::GenAt`]).
pub fn spec_to_rust(spec_path: &Path, errata_path: Option<&Path>, repair: bool) -> Result<PipelineRust, PipelineError> {
    let mut build = Build::new(spec_path).repair(repair);
    if let Some(errata) = errata_path {
        build = build.errata(errata);
    }
    let out = build.generate()?;
    Ok(PipelineRust { xdr: out.base, rust: out.rust, notes: out.notes })
}

/// What a crate's `build.rs` does with a spec: tell cargo to rerun when the
/// spec or its errata change, run [`spec_to_rust`], and write into
/// `out_dir` the generated Rust (`generated.rs`), the XDR it came from
/// (`generated.x`) and the report of repairs, errata and notes
/// (`report.txt`), for the crate to `include!`. The same as [`Build::run`]
/// with the spec, its errata if any, and no extension; a crate whose spec
/// has extension documents, or that wants other file names
/// ([`Build::out_file`]), uses [`Build`]:
///
/// ```no_run
/// // build.rs
/// let specs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
/// let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
/// xdr_spec::pipeline::build_script(&specs.join("v1.txt"), Some(&specs.join("v1.errata")), false, &out).unwrap();
/// // The same, writing `types.rs` (and `types.x`, `types.report.txt`):
/// xdr_spec::pipeline::Build::new(specs.join("v1.txt"))
///     .errata(specs.join("v1.errata"))
///     .out(&out)
///     .out_file("types.rs")
///     .run()
///     .unwrap();
/// ```
pub fn build_script(spec: &Path, errata: Option<&Path>, repair: bool, out_dir: &Path) -> Result<(), PipelineError> {
    let mut build = Build::new(spec).repair(repair).out(out_dir);
    if let Some(errata) = errata {
        build = build.errata(errata);
    }
    build.run().map(|_| ())
}
