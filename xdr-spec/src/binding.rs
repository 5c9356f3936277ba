//! Binding files: an Upper-Layer Binding (RFC 8166 section 6) declared beside a
//! specification, from which the generator writes the binding of each program version
//! ([`crate::pipeline::Build::binding`]).
//!
//! RFC 8166 section 6.1 has an Upper-Layer Binding "specify" which XDR items of each
//! procedure's arguments and results are DDP-eligible (moved by RDMA Read and Write instead
//! of inline), and section 6.2 the largest reply a Requester provisions for. A binding file
//! says that, one declaration a line (`#` starts a comment):
//!
//! ```text
//! version NFS_V3                        # the version the lines below bind
//! reply at most 1024                    # its replies, unless a procedure says otherwise
//! NFSPROC3_WRITE argument data          # WRITE3args' `data` is DDP-eligible
//! NFSPROC3_READ result resok.data at most argument count
//! NFSPROC3_READDIR reply at most argument count plus 1024 capped 1049600
//! ```
//!
//! - `PROC argument PATH`: a DDP-eligible item of the procedure's arguments. `PATH` names
//!   fields from the argument type down to a variable-length `opaque` or `string`: struct
//!   fields by name, union arms by their declaration's name (`resok`), separated by `.`; no
//!   path means the argument itself. Several lines give several items, in stream order.
//! - `PROC result PATH at most MAX`: the DDP-eligible item of its results (one per
//!   procedure), and the largest it can be: the Write chunk a Requester provides with every
//!   call of the procedure, whatever the result turns out to be. What that costs with
//!   `negotiate`: each call binds a memory window over a buffer of that size, which the
//!   connection keeps and reuses unzeroed (up to 2 MiB of such buffers), so a 4 KiB result
//!   under `at most 1048576` allocates nothing per call once warm; a larger `MAX` allocates
//!   per call, and a responder refuses a chunk over its own limit (a `negotiate` server's
//!   `HeaderLimits::max_chunk_len`, 2 MiB by default), so keep `MAX` to what the procedure
//!   can return.
//! - `reply at most MAX` (for the version), `PROC reply at most MAX` (for one procedure):
//!   the largest whole RPC reply message, DDP-eligible results reduced; 1024 where nothing
//!   is said.
//! - `MAX` is a number or a constant of the specification, or `argument PATH` (a number
//!   field of the call's arguments) with `plus N` added and `capped N` as its most.

use std::fmt;

/// One binding file, as written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BindingFile {
    /// Each `version` section, in order.
    pub versions: Vec<VersionBinding>,
}

/// The declarations of one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionBinding {
    /// The version's name in the specification.
    pub version: String,
    /// The line of its `version` declaration.
    pub line: usize,
    /// `reply at most MAX` for the version.
    pub default_reply: Option<Max>,
    /// The procedures' declarations, in order.
    pub declarations: Vec<Declared>,
}

/// One procedure's declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// Its line in the binding file.
    pub line: usize,
    /// The procedure's name in the specification.
    pub procedure: String,
    /// What it declares.
    pub what: What,
}

/// What a procedure's declaration says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// A DDP-eligible item of its arguments, at this path.
    Argument(Vec<String>),
    /// The DDP-eligible item of its results, at this path, and its largest length.
    Result(Vec<String>, Max),
    /// Its largest reply.
    Reply(Max),
}

/// A largest size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Max {
    /// A number, or a constant's name.
    Value(String),
    /// A number field of the call's arguments, plus `plus`, at most `capped`.
    Argument {
        /// The path to the field.
        path: Vec<String>,
        /// Added to it.
        plus: Option<String>,
        /// The most it can be.
        capped: Option<String>,
    },
}

/// A line of a binding file that says nothing this grammar knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct BindingError {
    /// The 1-based line.
    pub line: usize,
    /// What is wrong, and what was expected.
    pub message: String,
}

impl fmt::Display for Max {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Max::Value(v) => f.write_str(v),
            Max::Argument { path, plus, capped } => {
                write!(f, "argument {}", path.join("."))?;
                if let Some(p) = plus {
                    write!(f, " plus {p}")?;
                }
                if let Some(c) = capped {
                    write!(f, " capped {c}")?;
                }
                Ok(())
            }
        }
    }
}

/// Parses a binding file.
///
/// ```
/// use xdr_spec::binding::{parse, Max, What};
/// let file = parse("version KV_V1\nreply at most 1024\nKV_PUT argument value  # the value\nKV_GET result at most 1048576\n").unwrap();
/// let v = &file.versions[0];
/// assert_eq!((v.version.as_str(), v.default_reply.clone()), ("KV_V1", Some(Max::Value("1024".into()))));
/// assert_eq!(v.declarations[0].what, What::Argument(vec!["value".into()]));
/// assert_eq!(v.declarations[1].what, What::Result(vec![], Max::Value("1048576".into())));
/// let e = parse("KV_PUT argument value\n").unwrap_err();
/// assert_eq!(e.to_string(), "line 1: a declaration before any `version NAME` line");
/// ```
pub fn parse(text: &str) -> Result<BindingFile, BindingError> {
    let mut file = BindingFile::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let words: Vec<&str> = raw.split('#').next().unwrap_or_default().split_whitespace().collect();
        let err = |message: String| BindingError { line, message };
        match words.as_slice() {
            [] => continue,
            ["version", name] => {
                file.versions.push(VersionBinding {
                    version: name.to_string(),
                    line,
                    default_reply: None,
                    declarations: Vec::new(),
                });
                continue;
            }
            ["version", ..] => return Err(err("expected `version NAME`".into())),
            _ => {}
        }
        let Some(version) = file.versions.last_mut() else {
            return Err(err("a declaration before any `version NAME` line".into()));
        };
        match words.as_slice() {
            ["reply", "at", "most", max @ ..] => {
                if version.default_reply.is_some() {
                    return Err(err(format!("a second `reply at most` for version {}", version.version)));
                }
                version.default_reply = Some(parse_max(max).map_err(err)?);
            }
            [procedure, "argument", rest @ ..] => {
                let path = match rest {
                    [] => Vec::new(),
                    [path] => split_path(path).map_err(err)?,
                    _ => return Err(err("expected `PROC argument [PATH]`".into())),
                };
                version.declarations.push(Declared {
                    line,
                    procedure: procedure.to_string(),
                    what: What::Argument(path),
                });
            }
            [procedure, "result", rest @ ..] => {
                let (path, max) = match rest {
                    ["at", "most", max @ ..] => (Vec::new(), max),
                    [path, "at", "most", max @ ..] => (split_path(path).map_err(err)?, max),
                    _ => return Err(err("expected `PROC result [PATH] at most MAX`".into())),
                };
                let what = What::Result(path, parse_max(max).map_err(err)?);
                version.declarations.push(Declared { line, procedure: procedure.to_string(), what });
            }
            [procedure, "reply", "at", "most", max @ ..] => {
                let what = What::Reply(parse_max(max).map_err(err)?);
                version.declarations.push(Declared { line, procedure: procedure.to_string(), what });
            }
            _ => {
                return Err(err(format!(
                    "`{}`: expected `PROC argument [PATH]`, `PROC result [PATH] at most MAX`, \
                     `PROC reply at most MAX`, `reply at most MAX` or `version NAME`",
                    words.join(" ")
                )))
            }
        }
    }
    Ok(file)
}

/// `a.b.c` -> `["a", "b", "c"]`.
fn split_path(path: &str) -> Result<Vec<String>, String> {
    let parts: Vec<String> = path.split('.').map(str::to_string).collect();
    if parts.iter().any(|p| !is_name(p)) {
        return Err(format!("`{path}` is not a path of field names separated by `.`"));
    }
    Ok(parts)
}

fn is_name(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_alphabetic()) && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `N`, `NAME`, or `argument PATH [plus N] [capped N]`.
fn parse_max(words: &[&str]) -> Result<Max, String> {
    let value = |w: &str| -> Result<String, String> {
        let number = w.parse::<u64>().is_ok()
            || w.strip_prefix("0x").is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()));
        if number || is_name(w) {
            Ok(w.to_string())
        } else {
            Err(format!("`{w}` is not a number or a constant's name"))
        }
    };
    match words {
        [v] => Ok(Max::Value(value(v)?)),
        ["argument", path, rest @ ..] => {
            let path = split_path(path)?;
            let (plus, capped) = match rest {
                [] => (None, None),
                ["plus", p] => (Some(value(p)?), None),
                ["capped", c] => (None, Some(value(c)?)),
                ["plus", p, "capped", c] => (Some(value(p)?), Some(value(c)?)),
                _ => return Err("expected `argument PATH [plus N] [capped N]`".into()),
            };
            Ok(Max::Argument { path, plus, capped })
        }
        _ => Err("expected a size: `N`, a constant's name, or `argument PATH [plus N] [capped N]`".into()),
    }
}
