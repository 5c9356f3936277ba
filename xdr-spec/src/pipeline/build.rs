//! [`Build`]: a base specification and its extension documents, compiled
//! into one checked namespace and one Rust file.

use std::path::{Path, PathBuf};

use super::document::{self, Document, Kind};
use super::unit::Unit;
use super::{file_name, read, xdr_to_rust, PipelineError, PipelineXdr};
use crate::errata;
use crate::gen::{self, ModulePart};

/// An extension document: its file, its errata, and the module its types
/// are generated into.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Extension {
    module: String,
    path: PathBuf,
    errata: Option<PathBuf>,
}

/// A build of a base specification and, optionally, extension documents
/// that use its names: the pipeline of [`spec_to_rust`](super::spec_to_rust) over all of them,
/// in one namespace.
///
/// * Every document is extracted (and repaired, if asked) and has its own
///   errata applied on its own, so an extension's errata shift nothing in
///   the base's lines, nor the base's in the extension's.
/// * The base is checked alone: it may not depend on an extension. Each
///   extension is checked with the base: it sees the base's names (types,
///   constants, enumerators) and its own, not another extension's (which its
///   generated module could not see). Then all are checked together, so a
///   name two extensions define is reported.
/// * Diagnostics name the file, line and column the construct was written
///   at: an extension's are in the extension's own text. A duplicate comes
///   with a note at the first definition.
/// * The Rust is the base's, exactly as [`spec_to_rust`](super::spec_to_rust) writes it alone,
///   followed per extension by `pub mod MODULE { use super::*; ... }` (see
///   [`gen::generate_with_modules`]): one file to `include!`, and the base's
///   names resolve in a module as the checker resolved them.
///
/// With no extension, a build of a spec text is [`spec_to_rust`](super::spec_to_rust), and one of
/// an `.x` file ([`Build::xdr`]) what `xdr-spec gen` does, to the byte,
/// diagnostics included.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("xdr-spec-build-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let base = dir.join("base.txt");
/// # let ext = dir.join("ext.txt");
/// std::fs::write(&base, "4.  XDR\n\n   /// const MAX = 8;\n   /// struct item { unsigned int id; };\n").unwrap();
/// std::fs::write(&ext, "2.  Extension XDR\n\n   /// struct batch { item items<MAX>; };\n").unwrap();
/// let out = xdr_spec::pipeline::Build::new(&base).extension(&ext, None).generate().unwrap();
/// assert!(out.rust.contains("pub mod ext {\n"));
/// assert!(out.rust.contains("pub struct Batch<'a>"));
/// assert_eq!(out.extensions[0].module, "ext");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    base: PathBuf,
    errata: Option<PathBuf>,
    kind: Kind,
    extensions: Vec<Extension>,
    out_dir: Option<PathBuf>,
    out_file: String,
    layout_checks: bool,
    services: bool,
    binding: Option<PathBuf>,
}

/// What a [`Build`] generated.
///
/// ```
/// use xdr_spec::pipeline::Build;
/// # let dir = std::env::temp_dir().join(format!("xdr-spec-generated-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let spec = dir.join("spec.txt");
/// std::fs::write(&spec, "2.  XDR\n\n   /// struct item { unsigend int id; };\n").unwrap();
/// let errata = dir.join("spec.errata");
/// let fix = "erratum: typo\nlocation: 2\nreason: misspelt\nreplace-identifier: unsigend unsigned\nexpect-count: 1\n";
/// std::fs::write(&errata, fix).unwrap();
///
/// let generated = Build::new(&spec).errata(&errata).generate().unwrap();
/// assert!(generated.rust.contains("pub struct Item"));
/// assert_eq!(generated.base.xdr, "struct item { unsigned int id; };\n");
/// assert!(generated.extensions.is_empty());
/// assert!(generated.report().contains("typo"), "{}", generated.report());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Generated {
    /// The Rust source: the base's items, then a module per extension.
    pub rust: String,
    /// The base's XDR, errata applied, and its report.
    pub base: PipelineXdr,
    /// Per extension, in the order they were added.
    pub extensions: Vec<ExtensionXdr>,
    /// Warnings and notes from the checker.
    pub notes: Vec<String>,
}

/// The XDR of one extension document of a [`Build`].
#[derive(Debug, Clone)]
pub struct ExtensionXdr {
    /// The module its types were generated into.
    pub module: String,
    /// Its XDR, its own errata applied, and the report of its repairs and
    /// errata.
    pub xdr: PipelineXdr,
}

impl Generated {
    /// The report written to `report.txt`: the base's repairs and errata,
    /// each extension's, then the checker's notes.
    pub fn report(&self) -> String {
        let ext = self.extensions.iter().flat_map(|e| &e.xdr.report);
        self.base.report.iter().chain(ext).chain(&self.notes).map(|l| format!("{l}\n")).collect()
    }
}

impl Build {
    /// A build of the specification text at `spec` (its XDR extracted by
    /// the `///` convention of RFC 8166 §5.1).
    pub fn new(spec: impl Into<PathBuf>) -> Self {
        Build {
            base: spec.into(),
            errata: None,
            kind: Kind::Spec { repair: false },
            extensions: Vec::new(),
            out_dir: None,
            out_file: DEFAULT_OUT_FILE.to_string(),
            layout_checks: false,
            services: false,
            binding: None,
        }
    }

    /// A build of an XDR file (`.x`), taken as it is; its extensions are
    /// XDR files too.
    pub fn xdr(path: impl Into<PathBuf>) -> Self {
        Build { kind: Kind::Xdr, ..Build::new(path) }
    }

    /// The base's errata file ([`crate::errata`]).
    pub fn errata(mut self, path: impl Into<PathBuf>) -> Self {
        self.errata = Some(path.into());
        self
    }

    /// Repair degraded renderings of every spec text ([`crate::extract`]).
    pub fn repair(mut self, repair: bool) -> Self {
        if let Kind::Spec { .. } = self.kind {
            self.kind = Kind::Spec { repair };
        }
        self
    }

    /// Add an extension document with its errata file, if any. Its module is
    /// named after the file: the stem, lowercased, every character that
    /// cannot be in an identifier made `_` (`transport-properties.txt` ->
    /// `transport_properties`).
    pub fn extension(self, path: impl Into<PathBuf>, errata: Option<&Path>) -> Self {
        let path = path.into();
        let module = module_name_of(&path);
        self.extension_as(module, path, errata)
    }

    /// Add an extension document whose types go into module `module` (a
    /// snake_case identifier, checked when the build runs).
    pub fn extension_as(mut self, module: impl Into<String>, path: impl Into<PathBuf>, errata: Option<&Path>) -> Self {
        let errata = errata.map(Path::to_path_buf);
        self.extensions.push(Extension { module: module.into(), path: path.into(), errata });
        self
    }

    /// The directory [`Build::run`] writes into (default: `$OUT_DIR`).
    pub fn out(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The name of the Rust file [`Build::run`] writes (default:
    /// `generated.rs`). The other files are named after it: for
    /// `types.rs`, the XDR is `types.x` (an extension's `types.MODULE.x`)
    /// and the report `types.report.txt`; the default's report keeps its
    /// name, `report.txt`.
    pub fn out_file(mut self, name: impl Into<String>) -> Self {
        self.out_file = name.into();
        self
    }

    /// Generate typed services from each `program` block too ([`gen::GenOptions::services`]):
    /// per version, a module with a type per procedure, a `Client` and a `Service` trait
    /// served by `Server`, which the crate uses with `xdr_spec_rt::rpc` and a transport such
    /// as `negotiate::service`.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("xdr-spec-services-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let x = dir.join("kv.x");
    /// std::fs::write(&x, "typedef string kv_key<256>;\nprogram KV { version KV_V1 { opaque_t KV_GET(kv_key) = 1; } = 1; } = 9;\ntypedef opaque opaque_t<>;\n").unwrap();
    /// let rust = xdr_spec::pipeline::Build::xdr(&x).services(true).generate().unwrap().rust;
    /// assert!(rust.contains("pub mod kv_v1 {"));
    /// assert!(rust.contains("fn kv_get(&self, args: super::KvKey<'_>, reply: rpc::Reply<'_, KvGet>) -> rpc::Replied;"));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn services(mut self, on: bool) -> Self {
        self.services = on;
        self
    }

    /// The Upper-Layer Binding file beside the specification ([`crate::binding`]): which items
    /// of each version's calls and replies are DDP-eligible (RFC 8166 section 6), and how
    /// large its replies are. Each version's services module gets a `Binding` that says so
    /// (`xdr_spec_rt::rpc::Binding`). Implies [`Build::services`]; the file is an input
    /// ([`Build::inputs`]), so a build script reruns when it changes.
    pub fn binding(mut self, path: impl Into<PathBuf>) -> Self {
        self.binding = Some(path.into());
        self
    }

    /// Generate the layout checks of [`gen::GenOptions::layout_checks`]
    /// too (for tests).
    #[doc(hidden)]
    pub fn layout_checks(mut self, on: bool) -> Self {
        self.layout_checks = on;
        self
    }

    /// Every file the build reads, for `cargo:rerun-if-changed`.
    pub fn inputs(&self) -> Vec<&Path> {
        let ext = self.extensions.iter().flat_map(|e| std::iter::once(e.path.as_path()).chain(e.errata.as_deref()));
        let base = std::iter::once(self.base.as_path()).chain(self.errata.as_deref());
        base.chain(ext).chain(self.binding.as_deref()).collect()
    }

    /// Check every document; the diagnostics (warnings and notes) on
    /// success.
    ///
    /// # Errors
    ///
    /// As [`Build::generate`], short of generating.
    pub fn check(&self) -> Result<Vec<String>, PipelineError> {
        let (base, extensions) = self.load()?;
        self.check_loaded(&base, &extensions).map(|(_, notes)| notes)
    }

    /// Run the pipeline over every document.
    ///
    /// # Errors
    ///
    /// A [`PipelineError`]: a file unreadable or not UTF-8, no XDR, errata
    /// that do not apply, a syntax error ([`PipelineError::ParseAt`] with
    /// extensions), checker errors ([`PipelineError::Check`], one rendered
    /// diagnostic per line), a construct the generator refuses, or a module
    /// name that is not an identifier or is used twice
    /// ([`PipelineError::Config`]).
    pub fn generate(&self) -> Result<Generated, PipelineError> {
        if self.extensions.is_empty()
            && self.kind == Kind::Xdr
            && !self.layout_checks
            && !self.services
            && self.binding.is_none()
        {
            // (Services, and so a binding, go through the general path below.)
            return self.generate_xdr_alone();
        }
        let (base, extensions) = self.load()?;
        let (unit, notes) = self.check_loaded(&base, &extensions)?;
        let parts: Vec<ModulePart> = self
            .extensions
            .iter()
            .zip(&unit.first_definitions[1..])
            .map(|(e, &first_definition)| ModulePart {
                name: e.module.clone(),
                doc: format!("The types of the extension document `{}`.", file_name(&e.path)),
                first_definition,
            })
            .collect();
        let binding = match &self.binding {
            Some(path) => {
                let text = read(path)?;
                let file = crate::binding::parse(&text)
                    .map_err(|e| PipelineError::Config(format!("{}: {e}", path.display())))?;
                Some((file_name(path), file))
            }
            None => None,
        };
        let opts = gen::GenOptions {
            source_name: file_name(&self.base),
            line_origins: unit.line_origins(),
            layout_checks: self.layout_checks,
            services: self.services || binding.is_some(),
            binding,
        };
        let rust = gen::generate_with_modules(&unit.spec, &unit.text, &opts, &parts)
            .map_err(|source| PipelineError::GenAt { at: unit.locate(source.line, source.column), source })?;
        let extensions = self
            .extensions
            .iter()
            .zip(extensions)
            .map(|(e, d)| ExtensionXdr { module: e.module.clone(), xdr: xdr_of(d) })
            .collect();
        Ok(Generated { rust, base: xdr_of(base), extensions, notes })
    }

    /// What a crate's `build.rs` does: tell cargo to rerun when any input
    /// changes, [`Build::generate`], and write into the output directory the
    /// Rust (`generated.rs`, or [`Build::out_file`]), the base's XDR
    /// (`generated.x`), each extension's (`generated.MODULE.x`) and
    /// [`Generated::report`] (`report.txt`), for the crate to `include!`.
    ///
    /// # Errors
    ///
    /// As [`Build::generate`]; [`PipelineError::Config`] when no output
    /// directory is given and `$OUT_DIR` is not set; [`PipelineError::Io`]
    /// when a file cannot be written.
    pub fn run(&self) -> Result<Generated, PipelineError> {
        for input in self.inputs() {
            println!("cargo:rerun-if-changed={}", input.display());
        }
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| PipelineError::Config("no output directory: call Build::out or set OUT_DIR".into()))?,
        };
        let out = self.generate()?;
        let write = |name: &str, text: &str| {
            let path = out_dir.join(name);
            std::fs::write(&path, text).map_err(|source| PipelineError::Io { path, source })
        };
        let stem = self.out_file.strip_suffix(".rs").unwrap_or(&self.out_file);
        write(&self.out_file, &out.rust)?;
        write(&format!("{stem}.x"), &out.base.xdr)?;
        for e in &out.extensions {
            write(&format!("{stem}.{}.x", e.module), &e.xdr.xdr)?;
        }
        let report =
            if self.out_file == DEFAULT_OUT_FILE { "report.txt".to_string() } else { format!("{stem}.report.txt") };
        write(&report, &out.report())?;
        Ok(out)
    }

    /// An `.x` file and no extension: what `xdr-spec gen` does, whose
    /// diagnostics name the lines of the file with its errata applied.
    fn generate_xdr_alone(&self) -> Result<Generated, PipelineError> {
        let base = xdr_file(&self.base, self.errata.as_deref())?;
        let name = self.base.display().to_string();
        let (rust, notes) = xdr_to_rust(&name, &base.xdr, Vec::new())?;
        Ok(Generated { rust, base, extensions: Vec::new(), notes })
    }

    fn load(&self) -> Result<(Document, Vec<Document>), PipelineError> {
        self.check_modules()?;
        let base = document::load(&self.base, self.errata.as_deref(), self.kind)?;
        let extensions = self.extensions.iter().map(|e| document::load(&e.path, e.errata.as_deref(), self.kind));
        Ok((base, extensions.collect::<Result<_, _>>()?))
    }

    /// The checks in order (see [`Build`]): the base alone, each extension
    /// with the base, all together. Returns the whole, and its notes.
    fn check_loaded<'d>(
        &self,
        base: &'d Document,
        extensions: &'d [Document],
    ) -> Result<(Unit<'d>, Vec<String>), PipelineError> {
        if !extensions.is_empty() {
            // With none, the whole below is the base alone.
            Unit::new(vec![base])?.check()?;
        }
        for ext in extensions {
            Unit::new(vec![base, ext])?.check()?;
        }
        let all = Unit::new(std::iter::once(base).chain(extensions).collect())?;
        let notes = all.check()?;
        Ok((all, notes))
    }

    /// Module names are identifiers, not keywords, and distinct.
    fn check_modules(&self) -> Result<(), PipelineError> {
        for (i, e) in self.extensions.iter().enumerate() {
            let m = &e.module;
            let ident = m.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                && m.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            // `snake` makes a keyword a raw identifier; `_` alone is no name.
            if !ident || gen::snake(m) != *m || m == "_" {
                return Err(PipelineError::Config(format!(
                    "{}: `{m}` cannot name the extension's module: a snake_case identifier that is not a Rust keyword \
                     is needed",
                    e.path.display()
                )));
            }
            if let Some(first) = self.extensions[..i].iter().find(|f| f.module == *m) {
                return Err(PipelineError::Config(format!(
                    "{} and {} would both generate module `{m}`: name one with Build::extension_as",
                    first.path.display(),
                    e.path.display()
                )));
            }
        }
        Ok(())
    }
}

/// The Rust file [`Build::run`] writes unless told otherwise.
const DEFAULT_OUT_FILE: &str = "generated.rs";

/// `transport-properties.txt` -> `transport_properties`; a leading digit
/// gets a `_` before it.
fn module_name_of(path: &Path) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut name: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

fn xdr_of(d: Document) -> PipelineXdr {
    PipelineXdr { xdr: d.xdr, line_origins: d.line_origins, report: d.report }
}

/// An `.x` file with its errata applied, as `xdr-spec gen` reads one.
fn xdr_file(path: &Path, errata_path: Option<&Path>) -> Result<PipelineXdr, PipelineError> {
    let xdr = read(path)?;
    let Some(errata_path) = errata_path else {
        return Ok(PipelineXdr { xdr, line_origins: Vec::new(), report: Vec::new() });
    };
    let err = |source| PipelineError::Errata { path: errata_path.to_path_buf(), source };
    let (fixed, applied, _) = errata::parse(&read(errata_path)?).map_err(err)?.apply_with_offset(&xdr).map_err(err)?;
    let name = errata_path.display();
    let report = applied.iter().map(|a| format!("{name}: erratum {}: {}", a.id, a.summary)).collect();
    Ok(PipelineXdr { xdr: fixed, line_origins: Vec::new(), report })
}
