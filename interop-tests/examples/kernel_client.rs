//! The Linux kernel's own RPC-over-RDMA requester (xprtrdma, the NFS client) against our
//! responder, inside the Soft-RoCE guest: `guest/test-kernel-client` runs this program there.
//!
//! ```sh
//! RDMA_TEST_ADDR=10.0.2.15 kernel_client [PORT]     # PORT defaults to 20050
//! ```
//!
//! It loads the kernel's modules (`rpcrdma`, `nfsv4`), enables the kernel's rpcrdma
//! tracepoints, starts our [`Server`] on `RDMA_TEST_ADDR:PORT` over rdma-core with RFC 8797
//! private data (send 4096, receive 2048, R flag clear: values the kernel would not assume by
//! itself, so that its trace shows it read ours), then runs the kernel client's NFSv4.0 mount
//! against it in the background (`mount -t nfs4 -o vers=4.0,proto=rdma,port=PORT,...`). The
//! handler answers an NFS NULL (program 100003, any version, procedure 0) with
//! MSG_ACCEPTED/SUCCESS, any other procedure of program 100003 with PROC_UNAVAIL, any other
//! program with PROG_UNAVAIL, and an RPC version other than 2 with MSG_DENIED/RPC_MISMATCH
//! (RFC 5531, built by hand), and records every call.
//!
//! The pass condition: the kernel's next call after our NULL reply arrives within 60 s (so it
//! took our reply). Then it checks the requester's private data (R flag set, 4096/4096, as
//! Debian's 6.1 client sends), that our accept carried ours, the thresholds both sides'
//! private data give (call 2048, reply 4096), the credits the kernel asks for (128), and that
//! the kernel's `xprtrdma_inline_thresh` tracepoint shows the same thresholds. The mount
//! itself fails afterwards, which is expected: we implement no NFS. Each check prints one
//! `ok:` or `FAIL:` line; the exit status is 1 when any failed, 2 without `RDMA_TEST_ADDR`
//! (under `CI=true` a missing address panics instead: `Rdma::from_test_env`).

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cm_private_data::{Flags, PrivateData};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::Rdma;

#[path = "common/checks.rs"]
mod checks;
use checks::Checks;
#[path = "common/onc_rpc.rs"]
mod onc_rpc;
use interop_tests::hex;
use onc_rpc::{
    word, words, AUTH_NONE, CALL, GARBAGE_ARGS, MSG_ACCEPTED, MSG_DENIED, NFS_PROGRAM, PROC_UNAVAIL, PROG_UNAVAIL,
    REPLY, RPC_MISMATCH, SUCCESS,
};
use rpcrdma_v1::Version;

const TRACE: &str = "/sys/kernel/tracing";

/// One RPC call the handler saw.
#[derive(Debug, Clone, Copy)]
struct Seen {
    at: Duration,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    /// The accept_stat (or, for MSG_DENIED, 100 + reject_stat) we answered with.
    answer: u32,
}

/// The reply to one RPC call message, and what was seen (`None` when it is not a call).
fn answer(call: &[u8], t0: Instant) -> (Vec<u8>, Option<Seen>) {
    let (Some(xid), Some(CALL)) = (word(call, 0), word(call, 4)) else {
        // Not a call: a GARBAGE_ARGS reply is the least wrong thing to send.
        let xid = word(call, 0).unwrap_or(0);
        return (words(&[xid, REPLY, MSG_ACCEPTED, AUTH_NONE, 0, GARBAGE_ARGS]), None);
    };
    let (rpcvers, prog, vers, proc_) = (
        word(call, 8).unwrap_or(0),
        word(call, 12).unwrap_or(0),
        word(call, 16).unwrap_or(0),
        word(call, 20).unwrap_or(0),
    );
    let (reply, answer) = if rpcvers != 2 {
        // rejected_reply: RPC_MISMATCH with the supported range (RFC 5531 section 9).
        (words(&[xid, REPLY, MSG_DENIED, RPC_MISMATCH, 2, 2]), 100 + RPC_MISMATCH)
    } else {
        // accepted_reply: an AUTH_NONE verifier, then accept_stat (SUCCESS has no results for
        // NULL; PROG_UNAVAIL and PROC_UNAVAIL carry nothing more).
        let stat = match (prog, proc_) {
            (NFS_PROGRAM, 0) => SUCCESS,
            (NFS_PROGRAM, _) => PROC_UNAVAIL,
            _ => PROG_UNAVAIL,
        };
        (words(&[xid, REPLY, MSG_ACCEPTED, AUTH_NONE, 0, stat]), stat)
    };
    (reply, Some(Seen { at: t0.elapsed(), xid, prog, vers, proc_, answer }))
}

fn answer_name(a: u32) -> &'static str {
    match a {
        SUCCESS => "SUCCESS",
        PROG_UNAVAIL => "PROG_UNAVAIL",
        PROC_UNAVAIL => "PROC_UNAVAIL",
        100 => "MSG_DENIED/RPC_MISMATCH",
        _ => "?",
    }
}

/// Runs a command, saying what it printed when it fails (best effort: setup steps).
fn sh(args: &[&str]) {
    match Command::new(args[0]).args(&args[1..]).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => eprintln!(
            "kernel_client: '{}' failed ({}): {}{}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => eprintln!("kernel_client: cannot run '{}': {e}", args.join(" ")),
    }
}

/// Enables the kernel's rpcrdma tracepoints; false when there are none.
fn enable_trace() -> bool {
    let events = format!("{TRACE}/events/rpcrdma");
    if !std::path::Path::new(&events).is_dir() {
        sh(&["mount", "-t", "tracefs", "nodev", TRACE]);
    }
    if !std::path::Path::new(&events).is_dir() {
        return false;
    }
    let _ = std::fs::write(format!("{TRACE}/buffer_size_kb"), "4096");
    let _ = std::fs::write(format!("{TRACE}/trace"), "");
    std::fs::write(format!("{events}/enable"), "1").is_ok()
}

fn main() {
    let Some(rdma) = Rdma::from_test_env() else { std::process::exit(2) };
    let host = rdma.host();
    let port = std::env::args().nth(1).unwrap_or_else(|| "20050".into());
    let mut r = Checks::default();

    for m in ["sunrpc", "rpcrdma", "nfs", "nfsv4"] {
        sh(&["modprobe", m]);
    }
    let traced = enable_trace();
    if !traced {
        eprintln!("kernel_client: no rpcrdma tracepoints under {TRACE}");
    }

    // ---- Our responder.
    let ours = PrivateData::new(Flags::empty(), 4096, 2048);
    let cfg = ServerConfig::default().private_data(Some(ours));
    let responder = cfg.responder;
    let ulb = Arc::new(OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 });
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let t0 = Instant::now();
    let s = seen.clone();
    let server = Server::start(rdma, format!("{host}:{port}"), cfg, ulb, move |call: &[u8]| {
        let (reply, saw) = answer(call, t0);
        s.lock().unwrap().extend(saw);
        reply
    })
    .unwrap_or_else(|e| {
        println!("FAIL: start: our server on {host}:{port}: {e}");
        std::process::exit(1)
    });
    println!(
        "server: {}, versions {:?}, credits granted {}, private data {} (R flag clear, send {}, receive {})",
        server.local_addr(),
        responder.versions,
        responder.credits,
        hex(&ours.encode()),
        ours.send_size(),
        ours.receive_size()
    );

    // ---- The kernel client's mount, in the background.
    let _ = std::fs::create_dir_all("/mnt");
    let opts = format!("vers=4.0,proto=rdma,port={port},soft,timeo=50,retrans=1");
    println!("mount: mount -t nfs4 -o {opts} {host}:/ /mnt");
    let mut mount = Command::new("mount")
        .args(["-t", "nfs4", "-o", &opts, &format!("{host}:/"), "/mnt"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            println!("FAIL: mount: cannot run mount: {e}");
            std::process::exit(1)
        });

    // ---- Pass condition: a call after our NULL reply, within 60 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    let next_after_null = || {
        let s = seen.lock().unwrap();
        let null = s.iter().position(|c| c.prog == NFS_PROGRAM && c.proc_ == 0)?;
        s.get(null + 1).copied()
    };
    while next_after_null().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let next = next_after_null();
    // Let the mount give up (bounded), so that its outcome and the whole trace can be shown.
    let mut status = None;
    let give_up = Instant::now() + Duration::from_secs(if next.is_some() { 30 } else { 5 });
    while Instant::now() < give_up {
        if let Ok(Some(st)) = mount.try_wait() {
            status = Some(st);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut out = String::new();
    match status {
        Some(st) => {
            let _ = mount.stdout.take().map(|mut o| o.read_to_string(&mut out));
            let _ = mount.stderr.take().map(|mut e| e.read_to_string(&mut out));
            println!("mount: exited {st}: {}", out.trim());
        }
        None => {
            let _ = mount.kill();
            // Reaped in the background: a mount stuck in the kernel may not die at once.
            std::thread::spawn(move || mount.wait());
            println!("mount: still running after the calls; killed");
        }
    }

    let calls = seen.lock().unwrap().clone();
    for c in &calls {
        println!(
            "call: +{:.3} s xid {:#010x} program {} version {} procedure {} -> {}",
            c.at.as_secs_f64(),
            c.xid,
            c.prog,
            c.vers,
            c.proc_,
            answer_name(c.answer)
        );
    }
    let null = calls.iter().find(|c| c.prog == NFS_PROGRAM && c.proc_ == 0);
    r.check(
        "first call",
        calls.first().is_some_and(|c| c.prog == NFS_PROGRAM && c.proc_ == 0),
        format!("{} calls; the first: {:?}", calls.len(), calls.first()),
    );
    r.check(
        "pass: the kernel's next call after our NULL reply",
        next.is_some(),
        match (null, next) {
            (Some(n), Some(c)) => format!(
                "NULL xid {:#x} (version {}) answered SUCCESS; then xid {:#x} program {} version {} procedure {}, \
                 {:.3} s later",
                n.xid,
                n.vers,
                c.xid,
                c.prog,
                c.vers,
                c.proc_,
                (c.at - n.at).as_secs_f64()
            ),
            (Some(_), None) => "no call after the NULL within 60 s".into(),
            _ => "no NULL call within 60 s".into(),
        },
    );

    // ---- What the requester advertised, what we did, what was negotiated.
    let peers = server.peers();
    let stats = server.stats();
    println!(
        "server stats: connections {}, calls v1 {} v2 {}, inline replies {}, RDMA_ERRORs {}, credit overruns {}",
        stats.connections,
        stats.calls.v1,
        stats.calls.v2,
        stats.inline_replies,
        stats.errors_sent,
        stats.credit_overruns
    );
    r.check(
        "connections",
        !peers.is_empty(),
        format!("{} accepted: the kernel's connect request reached us", peers.len()),
    );
    for (i, p) in peers.iter().enumerate() {
        let theirs = p.advertised.requester;
        println!(
            "peer {i}: private data received ({} bytes) {}; decoded {:?}",
            p.private_data.len(),
            hex(&p.private_data),
            theirs
        );
        let padded = p.private_data.get(8..).is_some_and(|rest| rest.iter().all(|&b| b == 0));
        r.check(
            &format!("peer {i}: requester's private data"),
            theirs.is_some_and(|d| {
                d.flags().contains(Flags::REMOTE_INVALIDATE) && d.send_size() == 4096 && d.receive_size() == 4096
            }) && padded,
            format!(
                "{} then {} zero bytes: {}",
                hex(p.private_data.get(..8).unwrap_or(&p.private_data)),
                p.private_data.len().saturating_sub(8),
                theirs.map_or("not RFC 8797".into(), |d| format!(
                    "R flag {}, send {}, receive {}",
                    d.flags().contains(Flags::REMOTE_INVALIDATE),
                    d.send_size(),
                    d.receive_size()
                ))
            ),
        );
        r.check(
            &format!("peer {i}: our accept's private data"),
            p.advertised.responder == Some(ours),
            format!("{:?} (what the accept carried: {})", p.advertised.responder, hex(&ours.encode())),
        );
        let t = p.advertised.for_version(Version::ONE);
        r.check(
            &format!("peer {i}: thresholds"),
            t.call == 2048 && t.reply == 4096,
            format!(
                "call {} = min(kernel send 4096, our receive 2048), reply {} = min(our send 4096, kernel receive \
                 4096)",
                t.call, t.reply
            ),
        );
        r.check(
            &format!("peer {i}: credits asked"),
            p.credits_requested == 128,
            format!("rdma_credit of the kernel's latest call: {} (granted {})", p.credits_requested, responder.credits),
        );
    }
    r.check("credit overruns", stats.credit_overruns == 0, stats.credit_overruns);

    // ---- The kernel's side, from its rpcrdma tracepoints.
    if traced {
        let _ = std::fs::write(format!("{TRACE}/events/rpcrdma/enable"), "0");
        let trace = std::fs::read_to_string(format!("{TRACE}/trace")).unwrap_or_default();
        println!("--- rpcrdma trace (without Receives posted, or flushed at disconnect) ---");
        let lines: Vec<&str> = trace
            .lines()
            .filter(|l| !l.starts_with('#') && !l.contains("post_recv") && !l.contains("WR_FLUSH_ERR"))
            .map(str::trim_start)
            .collect();
        for l in lines.iter().take(200) {
            println!("{l}");
        }
        if lines.len() > 200 {
            println!("... {} more lines", lines.len() - 200);
        }
        let thresh: Vec<&&str> = lines.iter().filter(|l| l.contains("inline_thresh")).collect();
        // 6.1: "... neg send/recv=%u/%u, calc send/recv=%u/%u": negotiated send 2048 (our
        // Receive), receive 4096 (our Send).
        r.check(
            "kernel's thresholds (trace)",
            !thresh.is_empty() && thresh.iter().all(|l| l.contains("neg send/recv=2048/4096")),
            if thresh.is_empty() {
                "no xprtrdma_inline_thresh event".to_string()
            } else {
                thresh
                    .iter()
                    .map(|l| l.split(": ").skip(1).collect::<Vec<_>>().join(": "))
                    .collect::<Vec<_>>()
                    .join(" | ")
            },
        );
    }

    drop(server);
    std::process::exit(r.summary("kernel_client"));
}
