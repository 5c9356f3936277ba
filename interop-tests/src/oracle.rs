//! The rpcgen + libtirpc oracle: a C harness (`oracle/harness.c`) built from
//! rpcgen's output for the v1 XDR, driven over pipes with a line protocol.
//!
//! # Canonical text
//!
//! The harness and Rust exchange messages as one line of text (defined
//! precisely at the top of `oracle/harness.c` and in `oracle/README.md`):
//!
//! ```text
//! xid=U32 vers=U32 credit=U32 proc=0|1 reads=READS writes=WRITES reply=REPLY
//! xid=U32 vers=U32 credit=U32 proc=2 align=U32 thresh=U32 reads=READS writes=WRITES reply=REPLY
//! xid=U32 vers=U32 credit=U32 proc=3
//! xid=U32 vers=U32 credit=U32 proc=4 err=1 low=U32 high=U32
//! xid=U32 vers=U32 credit=U32 proc=4 err=2
//! READS  = [pos,handle,len,off;...]   or []   (read list, in order)
//! WRITES = [[h,l,o;h,l,o];[h,l,o]]   or []   (write list of write chunks)
//! REPLY  = [h,l,o;...] | none
//! ```
//!
//! Numbers are decimal (u32, and u64 for offsets), with no leading zeros.

use std::fmt;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::v1_model::HeaderModel;

/// The harness's C source, compiled against rpcgen's output.
pub const HARNESS_C: &str = include_str!("../oracle/harness.c");

/// Why the oracle could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OracleMissing {
    /// rpcgen, a C compiler, or libtirpc (headers or library) is not
    /// installed: tests print a SKIP line, except under `CI=true`.
    NotInstalled(String),
    /// Everything is installed but the build failed: always a test failure.
    BuildFailed(String),
}

impl fmt::Display for OracleMissing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OracleMissing::NotInstalled(why) => {
                write!(f, "rpcgen/libtirpc not installed (install libtirpc-dev): {why}")
            }
            OracleMissing::BuildFailed(why) => write!(f, "building the rpcgen harness failed: {why}"),
        }
    }
}

impl std::error::Error for OracleMissing {}

/// True when the environment variable `CI` is `true`: CI installs the
/// oracles, so a missing one is a failure there, not a skip.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// How to install tshark on Debian (what `.ci/run` does).
pub const TSHARK_INSTALL: &str = "echo 'wireshark-common wireshark-common/install-setuid boolean false' | \
    debconf-set-selections; DEBIAN_FRONTEND=noninteractive apt-get install -y tshark";

/// Whether tshark runs. If not, prints `SKIP: ...` with how to install it and returns false,
/// except under `CI=true`, where it fails the test.
pub fn tshark_present() -> bool {
    match Command::new("tshark").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        other => {
            let why = match other {
                Ok(o) => format!("tshark --version exited with {}", o.status),
                Err(e) => format!("tshark: {e}"),
            };
            assert!(
                !ci(),
                "{why}\n(CI=true: the oracles must be installed; .ci/run installs tshark: {TSHARK_INSTALL})"
            );
            println!("SKIP: tshark missing ({why}); install it: {TSHARK_INSTALL}");
            false
        }
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<(), OracleMissing> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.output().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            OracleMissing::NotInstalled(format!("`{program}` not found"))
        } else {
            OracleMissing::BuildFailed(format!("running `{program}` ({what}): {e}"))
        }
    })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let missing_tirpc = stderr.contains("rpc/rpc.h")
        || stderr.contains("rpc/xdr.h")
        || stderr.contains("-ltirpc")
        || stderr.contains("tirpc/");
    if missing_tirpc {
        return Err(OracleMissing::NotInstalled(format!("libtirpc headers or library missing: {stderr}")));
    }
    Err(OracleMissing::BuildFailed(format!("{what} failed ({}): {stderr}", out.status)))
}

/// Writes `xdr` and the harness to `out_dir`, runs rpcgen (header and XDR
/// routines) and the C compiler (`$CC`, else `cc`) against libtirpc, and
/// returns the harness executable's path.
pub fn build_rpcgen_harness(xdr: &str, out_dir: &Path) -> Result<PathBuf, OracleMissing> {
    let io_err = |what: &str, e: io::Error| OracleMissing::BuildFailed(format!("{what}: {e}"));
    std::fs::create_dir_all(out_dir).map_err(|e| io_err(&format!("creating {}", out_dir.display()), e))?;
    std::fs::write(out_dir.join("rpcrdma_v1.x"), xdr).map_err(|e| io_err("writing rpcrdma_v1.x", e))?;
    std::fs::write(out_dir.join("harness.c"), HARNESS_C).map_err(|e| io_err("writing harness.c", e))?;
    // rpcgen runs cpp and names the header after the input file: run it
    // in out_dir on relative names.
    run(Command::new("rpcgen").current_dir(out_dir).args(["-h", "-o", "rpcrdma_v1.h", "rpcrdma_v1.x"]), "rpcgen -h")?;
    run(
        Command::new("rpcgen").current_dir(out_dir).args(["-c", "-o", "rpcrdma_v1_xdr.c", "rpcrdma_v1.x"]),
        "rpcgen -c",
    )?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let exe = out_dir.join("rpcgen-harness");
    run(
        Command::new(&cc).current_dir(out_dir).args([
            "-O2",
            "-pthread",
            "-I/usr/include/tirpc",
            "-o",
            "rpcgen-harness",
            "harness.c",
            "rpcrdma_v1_xdr.c",
            "-ltirpc",
        ]),
        "compiling the harness",
    )?;
    Ok(exe)
}

/// A running harness process; requests and replies are single lines.
pub struct Harness {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    stdout: BufReader<ChildStdout>,
    line: String,
}

static SCRATCH: AtomicUsize = AtomicUsize::new(0);

impl Harness {
    /// Starts an already-built harness executable.
    pub fn spawn(exe: &Path) -> io::Result<Harness> {
        let mut child = Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdin = child.stdin.take().map(BufWriter::new);
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(Harness { child, stdin, stdout, line: String::new() })
    }

    /// Builds the harness for [`crate::V1_XDR`] in a fresh directory under
    /// `scratch` (integration tests pass `env!("CARGO_TARGET_TMPDIR")`),
    /// starts it, and removes the directory again.
    pub fn build_v1(scratch: &Path) -> Result<Harness, OracleMissing> {
        let n = SCRATCH.fetch_add(1, Ordering::Relaxed);
        let dir = scratch.join(format!("rpcgen-harness-{}-{n}", std::process::id()));
        let exe = build_rpcgen_harness(crate::V1_XDR, &dir)?;
        let h =
            Harness::spawn(&exe).map_err(|e| OracleMissing::BuildFailed(format!("starting {}: {e}", exe.display())))?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(h)
    }

    /// Like [`Harness::build_v1`], with the tests' policy for a missing
    /// oracle: print `SKIP: rpcgen/libtirpc missing (install
    /// libtirpc-dev)` and return `None`; but under `CI=true`, and for a
    /// build failure with everything installed, panic.
    pub fn v1_or_skip(scratch: &Path) -> Option<Harness> {
        match Harness::build_v1(scratch) {
            Ok(h) => Some(h),
            Err(OracleMissing::NotInstalled(why)) if !ci() => {
                println!("SKIP: rpcgen/libtirpc missing (install libtirpc-dev): {why}");
                None
            }
            Err(e @ OracleMissing::NotInstalled(_)) => {
                panic!("{e}\n(CI=true: the oracles must be installed, .ci/run installs them)")
            }
            Err(e) => panic!("{e}"),
        }
    }

    fn request(&mut self, cmd: char, arg: &str) -> Result<&str, String> {
        let stdin = self.stdin.as_mut().expect("stdin open until drop");
        let sent = (|| {
            stdin.write_all(&[cmd as u8, b' '])?;
            stdin.write_all(arg.as_bytes())?;
            stdin.write_all(b"\n")?;
            stdin.flush()
        })();
        self.line.clear();
        let got = sent.and_then(|()| self.stdout.read_line(&mut self.line));
        match got {
            Ok(0) | Err(_) => {
                let status = self.child.try_wait().ok().flatten();
                return Err(format!("rpcgen harness died ({got:?}, exit status {status:?})"));
            }
            Ok(_) => {}
        }
        let reply = self.line.trim_end_matches(['\n', '\r']);
        if let Some(ok) = reply.strip_prefix("OK ") {
            Ok(ok)
        } else if let Some(err) = reply.strip_prefix("ERR ") {
            Err(err.to_string())
        } else {
            Err(format!("rpcgen harness: unexpected reply {reply:?}"))
        }
    }

    /// Encodes a message given as canonical text with `xdr_rdma_msg`.
    pub fn encode(&mut self, canonical: &str) -> Result<Vec<u8>, String> {
        let hex = self.request('E', canonical)?.to_string();
        crate::unhex(&hex)
    }

    /// Decodes a header with `xdr_rdma_msg` from the start of `bytes`
    /// (anything after the header is ignored) into canonical text.
    pub fn decode(&mut self, bytes: &[u8]) -> Result<String, String> {
        self.request('D', &crate::hex(bytes)).map(str::to_string)
    }

    /// Like [`Harness::decode`], also returning how many bytes the header took.
    pub fn decode_prefix(&mut self, bytes: &[u8]) -> Result<(usize, String), String> {
        let reply = self.request('P', &crate::hex(bytes))?;
        let (n, text) = reply.split_once(' ').ok_or_else(|| format!("bad P reply {reply:?}"))?;
        let n = n.parse().map_err(|e| format!("bad length in P reply {reply:?}: {e}"))?;
        Ok((n, text.to_string()))
    }

    /// Benchmark set-up (`B`): parses `canonical` into bench slot `slot`
    /// (0..=3) and encodes it once with `xdr_rdma_msg`; returns those
    /// bytes, which the slot's timed decodes read and its timed encodes
    /// must reproduce.
    pub fn bench_load(&mut self, slot: u8, canonical: &str) -> Result<Vec<u8>, String> {
        let hex = self.request('B', &format!("{slot} {canonical}"))?.to_string();
        crate::unhex(&hex)
    }

    /// Benchmark (`T`): `iters` encodes (`op` = `'E'`) or decodes (`'D'`)
    /// of slot `slot`, timed inside the harness with
    /// `clock_gettime(CLOCK_MONOTONIC)`; returns the total nanoseconds.
    /// What one iteration does is described in `oracle/harness.c`
    /// ("Benchmark mode").
    pub fn bench_time(&mut self, slot: u8, op: char, iters: u64) -> Result<u64, String> {
        let reply = self.request('T', &format!("{slot} {op} {iters}"))?;
        let total = reply.split(' ').next().unwrap_or_default();
        total.parse().map_err(|e| format!("bad T reply {reply:?}: {e}"))
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF: the harness exits
        let _ = self.child.wait();
    }
}

/// The canonical text of a header in OUR generated types
/// (`rpcrdma_v1::xdr`), as the harness prints it: the model's one printer
/// ([`HeaderModel::canonical`]) on [`HeaderModel::from_ours`].
///
/// ```
/// use rpcrdma_v1::rt::List;
/// use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg, RpcRdmaHeader};
/// let m = RdmaMsg {
///     rdma_xid: 16909060,
///     rdma_vers: 1,
///     rdma_credit: 32,
///     rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
///         rdma_reads: List::default(),
///         rdma_writes: List::default(),
///         rdma_reply: None,
///     }),
/// };
/// assert_eq!(
///     interop_tests::oracle::canonical_from_ours(&m),
///     "xid=16909060 vers=1 credit=32 proc=0 reads=[] writes=[] reply=none"
/// );
/// ```
pub fn canonical_from_ours(m: &rpcrdma_v1::xdr::RdmaMsg<'_>) -> String {
    HeaderModel::from_ours(m).canonical()
}

/// The canonical text of a PEER message (what the harness prints for the
/// same header): [`HeaderModel::canonical`] on [`HeaderModel::from_peer`].
#[cfg(feature = "peer-xdrgen")]
pub fn canonical_from_peer(m: &crate::peer_xdrgen::rdma_msg) -> String {
    HeaderModel::from_peer(m).canonical()
}
