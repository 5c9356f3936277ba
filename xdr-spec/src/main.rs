//! `xdr-spec`: the command-line face of the library.
//!
//! ```text
//! xdr-spec extract SPEC [--repair]            XDR of a spec text on stdout; repairs on stderr
//! xdr-spec check FILE.x [--errata FILE]       diagnostics as FILE:LINE:COL; non-zero exit on errors
//! xdr-spec gen FILE.x [--errata FILE]         Rust on stdout
//! xdr-spec spec SPEC [--errata FILE] [--repair]
//!                                             the whole pipeline, spec text to Rust, as build.rs runs it
//! ```
//!
//! `check`, `gen` and `spec` also take `--extension [MODULE=]FILE[:ERRATA]`,
//! repeatable: an extension document (an `.x` file for `check` and `gen`, a
//! spec text for `spec`) compiled with the base in one namespace, its types
//! in module `MODULE` (by default named after the file), as
//! [`pipeline::Build`] does. Diagnostics then name each document's own file,
//! line and column.

use std::path::Path;
use std::process::ExitCode;

use xdr_spec::{check, errata, extract, pipeline};

const USAGE: &str = "usage:
  xdr-spec extract SPEC [--repair]
  xdr-spec check FILE.x [--errata FILE]
  xdr-spec gen FILE.x [--errata FILE]
  xdr-spec spec SPEC [--errata FILE] [--repair]
check, gen and spec take --extension [MODULE=]FILE[:ERRATA], repeatable";

struct Args {
    command: String,
    file: String,
    errata: Option<String>,
    repair: bool,
    extensions: Vec<ExtensionArg>,
}

/// `--extension [MODULE=]FILE[:ERRATA]`.
struct ExtensionArg {
    module: Option<String>,
    file: String,
    errata: Option<String>,
}

impl ExtensionArg {
    /// The module name is what precedes a `=`; the errata file what
    /// follows the first `:` after it (so FILE may not hold a `:`).
    fn parse(arg: &str) -> Result<Self, String> {
        let (module, rest) = match arg.split_once('=') {
            Some((m, rest)) => (Some(m.to_string()), rest),
            None => (None, arg),
        };
        let (file, errata) = match rest.split_once(':') {
            Some((f, e)) => (f, Some(e.to_string())),
            None => (rest, None),
        };
        if file.is_empty() || errata.as_deref() == Some("") {
            return Err(format!("--extension {arg}: expected [MODULE=]FILE[:ERRATA]"));
        }
        Ok(ExtensionArg { module, file: file.to_string(), errata })
    }
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let command = it.next().ok_or("missing command")?;
    let mut file = None;
    let mut errata = None;
    let mut repair = false;
    let mut extensions = Vec::new();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--repair" => repair = true,
            "--extension" => extensions.push(ExtensionArg::parse(&it.next().ok_or("--extension needs a file")?)?),
            "--errata" => errata = Some(it.next().ok_or("--errata needs a file")?),
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            _ if file.is_none() => file = Some(a),
            _ => return Err(format!("unexpected argument {a}")),
        }
    }
    Ok(Args { command, file: file.ok_or("missing file")?, errata, repair, extensions })
}

fn read(path: &str) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    // Invalid UTF-8 is reported at its line and column, as a diagnostic is.
    xdr_spec::ast::source_text(&bytes).map(str::to_string).map_err(|e| format!("{path}:{e}"))
}

/// The XDR of a `.x` file with the errata file applied, if one was given.
fn xdr_with_errata(args: &Args) -> Result<String, String> {
    let xdr = read(&args.file)?;
    let Some(path) = &args.errata else { return Ok(xdr) };
    let e = errata::parse(&read(path)?).map_err(|e| format!("{path}: {e}"))?;
    let (fixed, applied, _) = e.apply_with_offset(&xdr).map_err(|e| format!("{path}: {e}"))?;
    for a in applied {
        eprintln!("{path}: erratum {}: {}", a.id, a.summary);
    }
    Ok(fixed)
}

/// The build of `check`, `gen` or `spec` with extension documents.
fn build(args: &Args, base: pipeline::Build) -> pipeline::Build {
    let mut build = base;
    if let Some(e) = &args.errata {
        build = build.errata(e);
    }
    for e in &args.extensions {
        let errata = e.errata.as_deref().map(Path::new);
        build = match &e.module {
            Some(m) => build.extension_as(m, &e.file, errata),
            None => build.extension(&e.file, errata),
        };
    }
    build
}

/// `check`, `gen` and `spec` with extensions: the diagnostics of a failed
/// check are the output, as they are for `check` alone.
fn run_extended(args: &Args) -> Result<ExitCode, String> {
    let base = match args.command.as_str() {
        "check" | "gen" => pipeline::Build::xdr(&args.file),
        "spec" => pipeline::Build::new(&args.file).repair(args.repair),
        other => return Err(format!("--extension applies to check, gen and spec, not {other}")),
    };
    let build = build(args, base);
    let result = if args.command == "check" {
        build.check().map(|notes| notes.iter().for_each(|n| eprintln!("{n}")))
    } else {
        build.generate().map(|out| {
            eprint!("{}", out.report());
            print!("{}", out.rust);
        })
    };
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(pipeline::PipelineError::Check(diags)) => {
            diags.iter().for_each(|d| eprintln!("{d}"));
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e.to_string()),
    }
}

fn run(args: &Args) -> Result<ExitCode, String> {
    if !args.extensions.is_empty() {
        return run_extended(args);
    }
    match args.command.as_str() {
        "extract" => {
            let text = read(&args.file)?;
            let out = extract::extract(&text, &extract::ExtractOptions { repair: args.repair })
                .map_err(|e| format!("{}: {e}", args.file))?;
            for r in &out.repairs {
                eprintln!("{}", r.to_report_line(&args.file));
            }
            print!("{}", out.xdr);
            Ok(ExitCode::SUCCESS)
        }
        "check" => {
            let xdr = xdr_with_errata(args)?;
            let spec = xdr_spec::parse::parse(&xdr).map_err(|e| format!("{}:{e}", args.file))?;
            let diags = check::check(&spec);
            let lines = xdr_spec::ast::LineIndex::new(&xdr);
            for d in &diags {
                eprintln!("{}", d.render_indexed(&args.file, &lines));
            }
            Ok(if check::has_errors(&diags) { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        "gen" => {
            let xdr = xdr_with_errata(args)?;
            let (rust, notes) = pipeline::xdr_to_rust(&args.file, &xdr, Vec::new()).map_err(|e| e.to_string())?;
            notes.iter().for_each(|n| eprintln!("{n}"));
            print!("{rust}");
            Ok(ExitCode::SUCCESS)
        }
        "spec" => {
            let out = pipeline::spec_to_rust(Path::new(&args.file), args.errata.as_deref().map(Path::new), args.repair)
                .map_err(|e| e.to_string())?;
            out.xdr.report.iter().chain(&out.notes).for_each(|n| eprintln!("{n}"));
            print!("{}", out.rust);
            Ok(ExitCode::SUCCESS)
        }
        other => Err(format!("unknown command {other}")),
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("xdr-spec: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xdr-spec: {e}");
            ExitCode::FAILURE
        }
    }
}
