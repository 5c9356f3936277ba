//! The matrix across two processes (`--backend tcp`): each cell's responder runs in a child
//! process (`interop-tests serve-cell RESPONDER PDATA EXTENSION`, the same binary) and the
//! requester in this one, over the TCP verbs backend on loopback. The child configures its
//! responder from those three (whether it has the transport-properties extension included), so
//! a cell's two ends agree on the cell as they do in one process.
//!
//! The child speaks a line protocol on its stdin and stdout:
//!
//! | parent sends | child answers |
//! |---|---|
//! | (nothing: at start) | `LISTENING <addr>` |
//! | `STATS` | `STATS <connections> <calls v1> <calls v2> <read chunk calls> <long calls> <inline> <reply chunk> <write results> <errors> <overruns>` |
//! | `BACK <hex>` | `BACK <hex of the reply>` or `ERR <why>` (a backward-direction call) |
//! | end of input | exits |

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use negotiate::server::{CallsByVersion, ServerStats};

use crate::matrix::{run_cell_against, start_server, Cell, Extension, Outcome, Pdata, ResponderEnd, Speaks};
use crate::{hex, unhex};

/// A cell's responder in a child process.
pub struct RemoteServer {
    child: Child,
    /// The child's stdin (`None` once closed) and stdout.
    io: Mutex<(Option<ChildStdin>, BufReader<ChildStdout>)>,
    addr: String,
}

impl RemoteServer {
    /// Starts `exe serve-cell R P E` and waits for its address.
    pub fn spawn(
        exe: &std::path::Path,
        responder: Speaks,
        pdata: Pdata,
        extension: Extension,
    ) -> Result<RemoteServer, String> {
        let r = Speaks::ALL.iter().position(|&x| x == responder).unwrap();
        let p = Pdata::ALL.iter().position(|&x| x == pdata).unwrap();
        let e = Extension::ALL.iter().position(|&x| x == extension).unwrap();
        let mut child = Command::new(exe)
            .args(["serve-cell", &r.to_string(), &p.to_string(), &e.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", exe.display()))?;
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        let addr = line.trim().strip_prefix("LISTENING ").ok_or(format!("child said {line:?}"))?.to_string();
        Ok(RemoteServer { child, io: Mutex::new((Some(stdin), stdout)), addr })
    }

    /// Sends one request line, returns the answer line.
    fn ask(&self, request: &str) -> Result<String, String> {
        let mut io = self.io.lock().unwrap();
        let stdin = io.0.as_mut().ok_or("the child's stdin is closed")?;
        writeln!(stdin, "{request}").map_err(|e| format!("child stdin: {e}"))?;
        stdin.flush().map_err(|e| e.to_string())?;
        let mut line = String::new();
        io.1.read_line(&mut line).map_err(|e| format!("child stdout: {e}"))?;
        Ok(line.trim_end().to_string())
    }
}

impl ResponderEnd for RemoteServer {
    fn addr(&self) -> String {
        self.addr.clone()
    }

    fn stats(&self) -> Result<ServerStats, String> {
        let line = self.ask("STATS")?;
        let n: Vec<u64> = line
            .strip_prefix("STATS ")
            .ok_or(format!("child said {line:?}"))?
            .split(' ')
            .map(|w| w.parse().map_err(|_| format!("child said {line:?}")))
            .collect::<Result<_, _>>()?;
        let [connections, v1, v2, read_chunks, long, inline, reply_chunk, continued, writes, errors, overruns] = n[..]
        else {
            return Err(format!("child said {line:?}"));
        };
        Ok(ServerStats {
            connections,
            calls: CallsByVersion { v1, v2 },
            read_chunk_calls: read_chunks,
            long_calls: long,
            inline_replies: inline,
            reply_chunk_replies: reply_chunk,
            continued_replies: continued,
            write_chunk_results: writes,
            errors_sent: errors,
            credit_overruns: overruns,
            // The matrix's child reports the counters the cells check; refusals are the
            // hostile-peer suite's, which reads them in-process.
            ..Default::default()
        })
    }

    fn call_back(&self, call: &[u8]) -> Result<Vec<u8>, String> {
        let line = self.ask(&format!("BACK {}", hex(call)))?;
        match line.split_once(' ') {
            Some(("BACK", h)) => unhex(h),
            _ => Err(format!("child: {line}")),
        }
    }
}

impl Drop for RemoteServer {
    fn drop(&mut self) {
        // Closing stdin tells the child to exit.
        self.io.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0.take();
        let _ = self.child.wait();
    }
}

/// Runs one cell with its responder in a child process (`exe`), over TCP.
pub fn run_cell_two_processes(exe: &std::path::Path, cell: Cell) -> Outcome {
    let start = Instant::now();
    match RemoteServer::spawn(exe, cell.responder, cell.pdata, cell.extension) {
        Ok(server) => run_cell_against(&rpcrdma_verbs::Tcp, cell, &server, start),
        Err(e) => Outcome::not_run(cell, format!("responder process: {e}"), start.elapsed()),
    }
}

/// The child's side: `serve-cell RESPONDER PDATA EXTENSION` (indexes into [`Speaks::ALL`],
/// [`Pdata::ALL`] and [`Extension::ALL`]). Returns the process exit code.
pub fn serve_cell_main(args: &[String]) -> i32 {
    let pick = |i: usize| args.get(i).and_then(|a| a.parse::<usize>().ok());
    let (Some(r), Some(p), Some(e), None) = (
        pick(0).and_then(|i| Speaks::ALL.get(i)),
        pick(1).and_then(|i| Pdata::ALL.get(i)),
        pick(2).and_then(|i| Extension::ALL.get(i)),
        args.get(3),
    ) else {
        eprintln!("usage: interop-tests serve-cell RESPONDER(0-3) PDATA(0-3) EXTENSION(0-3)");
        return 2;
    };
    let server = match start_server(&rpcrdma_verbs::Tcp, *r, *p, *e) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("serve-cell: {e}");
            return 1;
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "LISTENING {}", server.local_addr());
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = match line.split_once(' ').unwrap_or((line.as_str(), "")) {
            ("STATS", _) => {
                let s = server.stats();
                format!(
                    "STATS {} {} {} {} {} {} {} {} {} {} {}",
                    s.connections,
                    s.calls.v1,
                    s.calls.v2,
                    s.read_chunk_calls,
                    s.long_calls,
                    s.inline_replies,
                    s.reply_chunk_replies,
                    s.continued_replies,
                    s.write_chunk_results,
                    s.errors_sent,
                    s.credit_overruns
                )
            }
            ("BACK", h) => match unhex(h).and_then(|call| server.call_back(&call)) {
                Ok(reply) => format!("BACK {}", hex(&reply)),
                Err(e) => format!("ERR {e}"),
            },
            (other, _) => format!("ERR unknown request {other:?}"),
        };
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
    }
    0
}
