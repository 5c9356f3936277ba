//! `xdr-spec`: the command-line face of the library.
//!
//! ```text
//! xdr-spec extract SPEC [--repair]            XDR of a spec text on stdout; repairs on stderr
//! xdr-spec check FILE.x [--errata FILE]       diagnostics as FILE:LINE:COL; exit 1 on errors
//! xdr-spec gen FILE.x [--errata FILE]         Rust on stdout
//! xdr-spec spec SPEC [--errata FILE] [--repair]
//!                                             the whole pipeline, spec text to Rust, as build.rs runs it
//! xdr-spec --help | --version
//! ```
//!
//! `check`, `gen` and `spec` also take `--extension [MODULE=]FILE[:ERRATA]`,
//! repeatable: an extension document (an `.x` file for `check` and `gen`, a
//! spec text for `spec`) compiled with the base in one namespace, its types
//! in module `MODULE` (by default named after the file), as
//! [`pipeline::Build`] does. Diagnostics then name each document's own file,
//! line and column.
//!
//! Exit status, as for `interop-tests`: 0 success, 1 the work failed (a spec with
//! errors, a file that cannot be read), 2 a usage error (an unknown option or command, a
//! missing or malformed argument).

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use xdr_spec::{check, errata, extract, pipeline};

const USAGE: &str = "usage:
  xdr-spec extract SPEC [--repair]             the XDR of a spec text on stdout
  xdr-spec check FILE.x [--errata FILE]        diagnostics as FILE:LINE:COL on stderr
  xdr-spec gen FILE.x [--errata FILE]          Rust on stdout
  xdr-spec spec SPEC [--errata FILE] [--repair]
                                               spec text to Rust, as build.rs runs it
  xdr-spec --help | --version

options:
  --repair                              undo known damage of a spec text (each repair reported)
  --errata FILE                         apply an errata file to the XDR
  --extension [MODULE=]FILE[:ERRATA]    check, gen, spec: compile an extension document with
                                        the base, its types in MODULE (repeatable)

exit status: 0 success; 1 the work failed (a spec with errors, a file that cannot be
read); 2 a usage error (unknown option or command, missing or malformed argument)";

/// Exit status of a usage error (see [`USAGE`]).
const EXIT_USAGE: u8 = 2;

/// What the command line asks for.
enum Request {
    Run(Args),
    Help,
    Version,
}

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

const COMMANDS: [&str; 4] = ["extract", "check", "gen", "spec"];

fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Request, lexopt::Error> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let (mut command, mut file, mut errata, mut repair, mut extensions) = (None, None, None, false, Vec::new());
    while let Some(arg) = parser.next()? {
        match arg {
            Short('h') | Long("help") => return Ok(Request::Help),
            Short('V') | Long("version") => return Ok(Request::Version),
            Long("repair") => repair = true,
            Long("errata") => errata = Some(parser.value()?.string()?),
            Long("extension") => extensions.push(ExtensionArg::parse(&parser.value()?.string()?)?),
            Value(v) if command.is_none() => {
                let v = v.string()?;
                if !COMMANDS.contains(&v.as_str()) {
                    return Err(format!("unknown command {v:?} (expected one of {})", COMMANDS.join(", ")).into());
                }
                command = Some(v);
            }
            Value(v) if file.is_none() => file = Some(v.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let command: String = command.ok_or("missing command (extract, check, gen or spec)")?;
    let file = file.ok_or_else(|| format!("{command}: missing its input file"))?;
    if !extensions.is_empty() && command == "extract" {
        return Err("--extension applies to check, gen and spec, not extract".into());
    }
    Ok(Request::Run(Args { command, file, errata, repair, extensions }))
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
        _ => pipeline::Build::new(&args.file).repair(args.repair),
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

/// `extract`. A spec text damaged in transit (code run together with the `///` markers,
/// lost underscores) extracts without `--repair` to declarations whose bodies are all empty:
/// valid-looking, useless XDR. Then stderr says to try `--repair`; the exit status stays 0,
/// as the XDR is what the text holds.
fn run_extract(args: &Args) -> Result<ExitCode, String> {
    let text = read(&args.file)?;
    let out = extract::extract(&text, &extract::ExtractOptions::new().repair(args.repair))
        .map_err(|e| format!("{}: {e}", args.file))?;
    for r in &out.repairs {
        eprintln!("{}", r.to_report_line(&args.file));
    }
    if !args.repair && only_empty_bodies(&out.xdr) {
        eprintln!(
            "xdr-spec: {}: every declaration extracted is empty: the text may be damaged; try --repair",
            args.file
        );
    }
    print!("{}", out.xdr);
    Ok(ExitCode::SUCCESS)
}

/// Whether the XDR has at least one `{ ... }` body and every one is blank. (A nested body
/// ends the outer one early here, which can only make a body look non-blank.)
fn only_empty_bodies(xdr: &str) -> bool {
    let mut bodies = xdr.split('{').skip(1).map(|rest| rest.split('}').next().unwrap_or_default()).peekable();
    bodies.peek().is_some() && bodies.all(|b| b.trim().is_empty())
}

fn run(args: &Args) -> Result<ExitCode, String> {
    if !args.extensions.is_empty() {
        return run_extended(args);
    }
    match args.command.as_str() {
        "extract" => run_extract(args),
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
        _ => {
            let out = pipeline::spec_to_rust(Path::new(&args.file), args.errata.as_deref().map(Path::new), args.repair)
                .map_err(|e| e.to_string())?;
            out.xdr.report.iter().chain(&out.notes).for_each(|n| eprintln!("{n}"));
            print!("{}", out.rust);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Ok(Request::Run(a)) => a,
        Ok(Request::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Request::Version) => {
            println!("xdr-spec {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("xdr-spec: {e}\n(xdr-spec --help for usage)");
            return ExitCode::from(EXIT_USAGE);
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
