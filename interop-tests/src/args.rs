//! The `interop-tests` binary's command line (a module of `main.rs`, not of the library):
//! what each command accepts, and the errors that name the argument at fault.

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddrV4};

pub const USAGE: &str = "usage:
  interop-tests [--json] [--backend inproc|tcp|tcp-local|rdma] [--addr IPV4]
                                     run the matrix (616 cells) and print its table
  interop-tests decode HEX...        a v1 or v2 transport header as JSON, with a receiver's verdict
  interop-tests decode -             the same, the hex read from stdin
  interop-tests pcap FILE [--backend inproc|tcp|tcp-local]
                                     run the matrix in this process and write every message
                                     sent into FILE, as RoCEv2 frames
  interop-tests --help | --version

options:
  --json           the matrix as one JSON object: backend, passed, failed and cells
  --backend NAME   inproc (default): both ends in this process, in memory;
                   tcp: each cell's responder in a second process, over TCP loopback
                   (for pcap: both ends in this process, as tcp-local);
                   tcp-local: both ends in this process, over TCP loopback;
                   rdma: rdma-core (a build with --features rdma, on an RDMA device)
  --addr IPV4      the RDMA device's address for --backend rdma
                   (default: $RDMA_TEST_ADDR, which the Soft-RoCE guest sets)

exit status: 0 success (every cell passed); 1 the work failed (a cell failed, a file could
not be written); 2 a usage error (unknown option or command, missing or malformed argument,
input that is not hex)";

/// Exit status of a usage error (see [`USAGE`]).
pub const EXIT_USAGE: u8 = 2;

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Request {
    Matrix {
        backend: BackendName,
        json: bool,
    },
    /// The hex arguments, or `["-"]` for stdin.
    Decode {
        hex: Vec<String>,
    },
    Pcap {
        file: String,
        backend: BackendName,
    },
    Help,
    Version,
}

/// A verbs backend, as `--backend` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendName {
    InProcess,
    Tcp,
    TcpLocal,
    /// rdma-core on the device with this address.
    Rdma(Ipv4Addr),
}

impl BackendName {
    pub fn label(self) -> &'static str {
        match self {
            BackendName::InProcess => "inproc",
            BackendName::Tcp => "tcp",
            BackendName::TcpLocal => "tcp-local",
            BackendName::Rdma(_) => "rdma",
        }
    }
}

/// An IPv4 address, `a.b.c.d` or `a.b.c.d:port` (the port ignored), as `RDMA_TEST_ADDR` is
/// written.
fn ipv4_host(what: &str, s: &str) -> Result<Ipv4Addr, String> {
    s.parse::<SocketAddrV4>()
        .map(|a| *a.ip())
        .or_else(|_| s.parse::<Ipv4Addr>())
        .map_err(|e| format!("{what} {s:?}: not an IPv4 address ({e})"))
}

/// The backend `--backend NAME` names, with `--addr` for rdma (else `RDMA_TEST_ADDR`).
fn backend(name: Option<&str>, addr: Option<&str>) -> Result<BackendName, String> {
    let name = name.unwrap_or("inproc");
    if addr.is_some() && name != "rdma" {
        return Err(format!("--addr applies to --backend rdma, not {name}"));
    }
    Ok(match name {
        "inproc" => BackendName::InProcess,
        "tcp" => BackendName::Tcp,
        "tcp-local" => BackendName::TcpLocal,
        "rdma" => match (addr, std::env::var("RDMA_TEST_ADDR")) {
            (Some(a), _) => BackendName::Rdma(ipv4_host("--addr", a)?),
            (None, Ok(a)) => BackendName::Rdma(ipv4_host("RDMA_TEST_ADDR", &a)?),
            (None, Err(_)) => return Err("--backend rdma needs --addr IPV4 (or RDMA_TEST_ADDR)".into()),
        },
        other => return Err(format!("--backend {other:?}: expected inproc, tcp, tcp-local or rdma")),
    })
}

/// Parses the arguments after the program's name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Request, lexopt::Error> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut command: Option<String> = None;
    let (mut json, mut backend_name, mut addr) = (false, None, None);
    let mut values = Vec::new();
    while let Some(arg) = parser.next()? {
        match arg {
            Short('h') | Long("help") => return Ok(Request::Help),
            Short('V') | Long("version") => return Ok(Request::Version),
            Long("json") => json = true,
            Long("backend") => backend_name = Some(parser.value()?.string()?),
            Long("addr") => addr = Some(parser.value()?.string()?),
            Value(v) if command.is_none() => {
                let v = v.string()?;
                if v != "decode" && v != "pcap" {
                    return Err(format!("unknown command {v:?} (expected decode or pcap, or none)").into());
                }
                command = Some(v);
            }
            Value(v) => values.push(v.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let only_matrix = |cmd: &str| -> Result<(), String> {
        match (json, addr.is_some()) {
            (true, _) => Err(format!("--json applies to the matrix, not {cmd}")),
            (_, true) => Err(format!("--addr applies to the matrix's --backend rdma, not {cmd}")),
            _ => Ok(()),
        }
    };
    match command.as_deref() {
        // Without a command no value got past the loop: the first one would have been it.
        None => Ok(Request::Matrix { backend: backend(backend_name.as_deref(), addr.as_deref())?, json }),
        Some("decode") => {
            only_matrix("decode")?;
            if backend_name.is_some() {
                return Err("--backend applies to the matrix and pcap, not decode".into());
            }
            if values.is_empty() {
                return Err("decode: missing HEX (or - to read it from stdin)".into());
            }
            if values.len() > 1 && values.iter().any(|v| v == "-") {
                return Err("decode: - (stdin) stands alone".into());
            }
            Ok(Request::Decode { hex: values })
        }
        _ => {
            only_matrix("pcap")?;
            if backend_name.as_deref() == Some("rdma") {
                return Err("pcap: --backend rdma: only inproc and tcp run both ends in this process".into());
            }
            let backend = backend(backend_name.as_deref(), None)?;
            match <[String; 1]>::try_from(values) {
                Ok([file]) => Ok(Request::Pcap { file, backend }),
                Err(v) if v.is_empty() => Err("pcap: missing FILE".into()),
                Err(v) => Err(lexopt::Error::UnexpectedArgument(v[1].clone().into())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Request, String> {
        parse(args.iter().map(OsString::from)).map_err(|e| e.to_string())
    }

    /// What `.ci/run`, `guest/matrix-rdma` and the README run keeps its meaning.
    #[test]
    fn the_callers_command_lines_still_parse() {
        let matrix = |backend, json| Ok(Request::Matrix { backend, json });
        assert_eq!(parse_strs(&[]), matrix(BackendName::InProcess, false));
        assert_eq!(parse_strs(&["--json", "--backend", "tcp"]), matrix(BackendName::Tcp, true));
        assert_eq!(parse_strs(&["--backend=tcp-local"]), matrix(BackendName::TcpLocal, false));
        let host = Ipv4Addr::new(10, 0, 2, 15);
        for addr in ["10.0.2.15", "10.0.2.15:20049"] {
            assert_eq!(
                parse_strs(&["--backend", "rdma", "--addr", addr, "--json"]),
                matrix(BackendName::Rdma(host), true)
            );
        }
        let pcap = |backend| Ok(Request::Pcap { file: "m.pcap".into(), backend });
        assert_eq!(parse_strs(&["pcap", "m.pcap"]), pcap(BackendName::InProcess));
        assert_eq!(parse_strs(&["pcap", "--backend", "tcp", "m.pcap"]), pcap(BackendName::Tcp));
        assert_eq!(
            parse_strs(&["decode", "0001", "0203"]),
            Ok(Request::Decode { hex: vec!["0001".into(), "0203".into()] })
        );
        assert_eq!(parse_strs(&["decode", "-"]), Ok(Request::Decode { hex: vec!["-".into()] }));
    }

    #[test]
    fn options_that_do_not_apply_are_refused() {
        for (args, named) in [
            (&["decode", "00", "--json"][..], "--json"),
            (&["decode", "00", "--backend", "tcp"], "--backend"),
            (&["decode", "-", "00"], "stands alone"),
            (&["pcap", "m.pcap", "--addr", "10.0.2.15"], "--addr"),
            (&["pcap", "m.pcap", "--backend", "rdma"], "rdma"),
            (&["pcap", "a.pcap", "b.pcap"], "b.pcap"),
            (&["--backend", "tcp", "--addr", "10.0.2.15"], "--addr"),
            (&["--backend", "rdma", "--addr", "10.0.2"], "10.0.2"),
        ] {
            let e = parse_strs(args).expect_err(&format!("{args:?} parsed"));
            assert!(e.contains(named), "{args:?}: {named:?} not in {e:?}");
        }
    }
}
