//! Hostile inputs against the Linux kernel's own RPC-over-RDMA server (nfsd + svcrdma),
//! compared with our library's verdict for the same bytes (issue 7 item 4). Runs inside the
//! Soft-RoCE guest: `guest/test-kernel-hostile` starts the kernel NFS server there
//! (`guest/kernel-nfsd.sh`, RDMA port 20049) and runs this program against it.
//!
//! ```sh
//! RDMA_TEST_ADDR=10.0.2.15 kernel_hostile [PORT]     # PORT defaults to 20049
//! ```
//!
//! For each case it Sends one malformed (or merely unusual) RPC-over-RDMA Version One message
//! on a raw verbs connection (RFC 8797 private data, Receives posted before anything is sent),
//! waits a bounded time for what the kernel does with it (an RDMA_ERROR with its code and
//! version words, a reply, silence, or a disconnect), then Sends a valid NFSv3 NULL call to
//! prove the connection still serves. The same bytes go through
//! [`rpcrdma_v1::verdict::receive`]. A table of case, bytes, kernel, ours and agreement is
//! printed. A new connection is made after a case the kernel disconnected.
//!
//! The exit status is 1 when a case disagrees in a way [`KNOWN`] does not list, or when the
//! connection failed to serve the NULL call without a disconnect; 2 without RDMA_TEST_ADDR
//! (under `CI=true` a missing address panics instead: `Rdma::from_test_env`).
//! `docs/conformance.md` ("Differences from the Linux kernel server (6.1)") gives the same
//! list with the reasons.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use cm_private_data::{Flags, PrivateData};
use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
use rpcrdma_v2::draft07::marshal as draft07;
#[path = "common/onc_rpc.rs"]
mod onc_rpc;
use onc_rpc::{rpc_call, word, words, NFS_PROGRAM};
use rpcrdma_verbs::{
    Access, Backend, CmEvent, MemoryRegion, Opcode, ProtectionDomain, QpCaps, QpState, QueuePair, Rdma, Sge,
};

type Qp = <Rdma as Backend>::Qp;
type Region = <Rdma as Backend>::Region;
type Pd = <Rdma as Backend>::Pd;

/// How long to wait for the kernel's reaction to a hostile message before calling it silence.
const HOSTILE_WAIT: Duration = Duration::from_secs(2);
/// How long the NULL call after each case may take.
const NULL_WAIT: Duration = Duration::from_secs(8);
/// Receives posted, each of `RECV_SIZE` bytes (the kernel's Send size is 4096).
const RECVS: usize = 32;
const RECV_SIZE: usize = 4096;
const SEND_WR: u64 = u64::MAX;

// RPC-over-RDMA Version One procedures and errors (RFC 8166 section 4.2).
const RDMA_MSG: u32 = 0;
const RDMA_NOMSG: u32 = 1;
const RDMA_MSGP: u32 = 2;
const RDMA_DONE: u32 = 3;
const RDMA_ERROR: u32 = 4;
const ERR_VERS: u32 = 1;
const ERR_CHUNK: u32 = 2;
const CREDITS: u32 = 32;

/// What one side does with a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Processes it: an RPC reply comes back (ours: `Verdict::Accept`, the ULP answers).
    Reply,
    /// RDMA_ERROR / ERR_VERS with the header's version word and the range.
    ErrVers { vers: u32, low: u32, high: u32 },
    /// RDMA_ERROR / ERR_CHUNK with the header's version word.
    ErrChunk { vers: u32 },
    /// Some other RDMA_ERROR code.
    OtherError(u32),
    /// Another kind of message (the proc word).
    Other(u32),
    /// Nothing within the bounded wait.
    Silence,
    /// The connection went down.
    Disconnect,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Reply => write!(f, "reply"),
            Outcome::ErrVers { vers, low, high } => write!(f, "ERR_VERS vers={vers} {low}..{high}"),
            Outcome::ErrChunk { vers } => write!(f, "ERR_CHUNK vers={vers}"),
            Outcome::OtherError(e) => write!(f, "RDMA_ERROR err={e}"),
            Outcome::Other(p) => write!(f, "proc {p}"),
            Outcome::Silence => write!(f, "silence"),
            Outcome::Disconnect => write!(f, "disconnect"),
        }
    }
}

/// The known, justified differences: case, the kernel's outcome, ours, and why both stand.
/// The same list, with the spec text, is in docs/conformance.md.
const KNOWN: &[(&str, Outcome, Outcome, &str)] = &[
    (
        "RDMA_DONE",
        Outcome::Silence,
        Outcome::ErrChunk { vers: 1 },
        "RFC 8166 4.6.2 (draft 5.6.2): receivers SHOULD reply ERR_CHUNK; a SHOULD, so the kernel's drop is allowed",
    ),
    (
        "RDMA_MSG with no body",
        Outcome::Silence,
        Outcome::ErrChunk { vers: 1 },
        "RFC 8166 4.5.2 (draft 5.5.2): no RPC message (no XID to match rdma_xid) is an XDR error, MUST ERR_CHUNK; svcrdma passes it up and the RPC layer drops it",
    ),
    (
        "RDMA_NOMSG with no chunk",
        Outcome::Silence,
        Outcome::ErrChunk { vers: 1 },
        "RFC 8166 4.5.2 (draft 5.5.2) names this very case as an XDR error that MUST get ERR_CHUNK; svcrdma passes it up and the RPC layer drops it",
    ),
    (
        "rdma_xid != RPC xid",
        Outcome::Reply,
        Outcome::ErrChunk { vers: 1 },
        "RFC 8166 4.5.2 (draft 5.5.2) names an rdma_xid that does not match the RPC XID as an XDR error (MUST ERR_CHUNK); the kernel never compares them and answers the call",
    ),
];

fn hex_words(b: &[u8]) -> String {
    b.chunks(4).map(|c| c.iter().map(|x| format!("{x:02x}")).collect::<String>()).collect::<Vec<_>>().join(" ")
}

/// An NFSv3 NULL call (RFC 5531: xid, CALL, rpcvers 2, program 100003, version 3, proc 0,
/// AUTH_NONE credential and verifier).
fn null_call(xid: u32) -> Vec<u8> {
    rpc_call(xid, NFS_PROGRAM, 3, 0, false).0
}

/// An RDMA_MSG, Version One, no chunks, carrying `rpc`.
fn rdma_msg(rdma_xid: u32, vers: u32, rpc: &[u8]) -> Vec<u8> {
    let mut m = words(&[rdma_xid, vers, CREDITS, RDMA_MSG, 0, 0, 0]);
    m.extend_from_slice(rpc);
    m
}

/// What the kernel sent: the outcome it stands for.
fn classify(m: &[u8]) -> Outcome {
    match word(m, 12) {
        Some(RDMA_ERROR) => match word(m, 16) {
            Some(ERR_VERS) => Outcome::ErrVers {
                vers: word(m, 4).unwrap_or(0),
                low: word(m, 20).unwrap_or(0),
                high: word(m, 24).unwrap_or(0),
            },
            Some(ERR_CHUNK) => Outcome::ErrChunk { vers: word(m, 4).unwrap_or(0) },
            e => Outcome::OtherError(e.unwrap_or(u32::MAX)),
        },
        Some(RDMA_MSG | RDMA_NOMSG) => Outcome::Reply,
        p => Outcome::Other(p.unwrap_or(u32::MAX)),
    }
}

/// Our library's verdict, as the outcome a responder using it produces.
fn ours(bytes: &[u8]) -> (Outcome, String) {
    match receive(bytes, &ReceivePolicy::default()) {
        Verdict::Accept(_) => (Outcome::Reply, "accept".into()),
        Verdict::Reply { reply, reason } => {
            let o = classify(reply.as_bytes());
            (o, format!("{o} ({reason:?})"))
        }
        // A responder has no transaction for the XID: nothing is sent.
        Verdict::PeerError { error, .. } => (Outcome::Silence, format!("silence (peer error {error:?}, no call)")),
        Verdict::Discard(r) => (Outcome::Silence, format!("silence (discard {r:?})")),
    }
}

enum Event {
    Msg(Vec<u8>),
    Down(String),
}

/// A raw verbs connection to the kernel server.
struct Conn {
    qp: Qp,
    recv: Region,
    send: Region,
    inbox: VecDeque<Event>,
    down: bool,
}

impl Conn {
    fn open(rdma: &Rdma, pd: &Pd, addr: &str) -> Result<Conn, String> {
        let recv = pd.register(vec![0; RECVS * RECV_SIZE], Access::LOCAL_WRITE).map_err(|e| e.to_string())?;
        let send = pd.register(vec![0; RECV_SIZE], Access::LOCAL_WRITE).map_err(|e| e.to_string())?;
        let private = PrivateData::new(Flags::empty(), 4096, 4096).encode();
        let caps = QpCaps::default().max_send_wr(16).max_recv_wr(RECVS as u32).max_sge(1);
        let (qp, _accepted) =
            rdma.connect(pd, addr, &private, caps, Duration::from_secs(10)).map_err(|e| format!("connect: {e}"))?;
        for slot in 0..RECVS {
            qp.post_recv(slot as u64, Sge::new(&recv, slot * RECV_SIZE, RECV_SIZE)).map_err(|e| e.to_string())?;
        }
        Ok(Conn { qp, recv, send, inbox: VecDeque::new(), down: false })
    }

    /// Handles completions for up to `wait`; returns true when a Send completed.
    fn pump(&mut self, wait: Duration) -> bool {
        if self.down {
            return false;
        }
        if let Some(CmEvent::Disconnected) = self.qp.cm_event(Duration::ZERO) {
            self.mark_down("CM disconnected");
            return false;
        }
        let Some(c) = self.qp.wait_cq(wait) else {
            if self.qp.state() == QpState::Error {
                self.mark_down("queue pair in the Error state");
            }
            return false;
        };
        if !c.is_ok() {
            self.mark_down(&format!("{:?} completion {:?}", c.opcode, c.status));
            return false;
        }
        if c.opcode != Opcode::Recv {
            return c.wr_id == SEND_WR;
        }
        let slot = c.wr_id as usize;
        let at = slot * RECV_SIZE;
        let bytes = self.recv.with(|b| b[at..at + c.byte_len as usize].to_vec());
        self.inbox.push_back(Event::Msg(bytes));
        if let Err(e) = self.qp.post_recv(c.wr_id, Sge::new(&self.recv, at, RECV_SIZE)) {
            self.mark_down(&format!("post_recv: {e}"));
        }
        false
    }

    fn mark_down(&mut self, why: &str) {
        if !self.down {
            self.down = true;
            self.inbox.push_back(Event::Down(why.to_string()));
        }
    }

    /// Sends `bytes` and waits for the Send's completion.
    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.send.with_mut(|b| b[..bytes.len()].copy_from_slice(bytes));
        self.qp.post_send(SEND_WR, &[Sge::new(&self.send, 0, bytes.len())], None).map_err(|e| e.to_string())?;
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end && !self.down {
            if self.pump(Duration::from_millis(100)) {
                return Ok(());
            }
        }
        Err(if self.down { "connection down".into() } else { "no Send completion in 5 s".into() })
    }

    /// The next event within `wait`.
    fn next(&mut self, wait: Duration) -> Option<Event> {
        let end = Instant::now() + wait;
        loop {
            if let Some(e) = self.inbox.pop_front() {
                return Some(e);
            }
            let now = Instant::now();
            if now >= end || self.down {
                return None;
            }
            self.pump((end - now).min(Duration::from_millis(100)));
        }
    }
}

/// One hostile case.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// Sent as the first message of a connection of its own.
    first: bool,
}

fn cases(read_target: (u32, u64)) -> Vec<Case> {
    let (rkey, addr) = read_target;
    let hi = (addr >> 32) as u32;
    let lo = addr as u32;
    let mut v = Vec::new();
    let mut case = |name: &'static str, bytes: Vec<u8>| v.push(Case { name, bytes, first: false });
    case("valid NFSv3 NULL (baseline)", rdma_msg(0x4800_0001, 1, &null_call(0x4800_0001)));
    case("rdma_vers 2", rdma_msg(0x4800_0002, 2, &null_call(0x4800_0002)));
    case("rdma_vers 0", rdma_msg(0x4800_0003, 0, &null_call(0x4800_0003)));
    // rpc_rdma_header_padded: rdma_align, rdma_thresh, then the three chunk lists.
    let mut msgp = words(&[0x4800_0004, 1, CREDITS, RDMA_MSGP, 4, 1024, 0, 0, 0]);
    msgp.extend_from_slice(&null_call(0x4800_0004));
    case("RDMA_MSGP", msgp);
    case("RDMA_DONE", words(&[0x4800_0005, 1, CREDITS, RDMA_DONE]));
    let mut unknown = words(&[0x4800_0006, 1, CREDITS, 7, 0, 0, 0]);
    unknown.extend_from_slice(&null_call(0x4800_0006));
    case("unknown proc 7", unknown);
    // A Read chunk at position 2 (not a multiple of 4), naming 4 readable bytes of ours.
    let mut misaligned = words(&[0x4800_0007, 1, CREDITS, RDMA_MSG, 1, 2, rkey, 4, hi, lo, 0, 0, 0]);
    misaligned.extend_from_slice(&null_call(0x4800_0007));
    case("misaligned read position", misaligned);
    case("12-byte header", words(&[0x4800_0008, 1, CREDITS]));
    case("RDMA_NOMSG with no chunk", words(&[0x4800_0009, 1, CREDITS, RDMA_NOMSG, 0, 0, 0]));
    case("RDMA_MSG with no body", words(&[0x4800_000a, 1, CREDITS, RDMA_MSG, 0, 0, 0]));
    case("rdma_xid != RPC xid", rdma_msg(0x4800_000b, 1, &null_call(0x4800_0b0b)));
    case("client-sent RDMA_ERROR ERR_CHUNK", words(&[0x4800_000c, 1, CREDITS, RDMA_ERROR, ERR_CHUNK]));
    // draft-ietf-nfsv4-rpcrdma-version-two-07 first messages (issue 27), written by
    // rpcrdma_v2::draft07::marshal: the kernel speaks Version One only, so each must draw
    // ERR_VERS (-07 section 4.3.2) and the connection go on in Version One (the NULL after it).
    let mut call = [0u8; 256];
    let rpc = null_call(0x4800_000d);
    let n = draft07::call_inline(&mut call, 0x4800_000d, CREDITS, 0, &draft07::NO_CHUNKS, &rpc).expect("fits");
    v.push(Case { name: "draft-07 RDMA2_CALL_INLINE first message", bytes: call[..n].to_vec(), first: true });
    let mut grant = [0u8; 16];
    let n = draft07::grant(&mut grant, CREDITS).expect("fits");
    v.push(Case { name: "draft-07 RDMA2_GRANT first message", bytes: grant[..n].to_vec(), first: true });
    v
}

/// The kernel's reaction to one case, and whether the NULL after it was answered.
struct Seen {
    outcome: Outcome,
    detail: String,
    served: bool,
}

fn run_case(conn: &mut Conn, case: &Case, null_xid: u32) -> Seen {
    let mut reactions: Vec<Vec<u8>> = Vec::new();
    let mut down: Option<String> = None;
    if let Err(e) = conn.send(&case.bytes) {
        down = Some(format!("hostile Send: {e}"));
    }
    // The reaction: the first event within the bounded wait.
    if down.is_none() {
        match conn.next(HOSTILE_WAIT) {
            Some(Event::Msg(m)) => reactions.push(m),
            Some(Event::Down(w)) => down = Some(w),
            None => {}
        }
    }
    // The NULL call; anything else arriving before its reply is part of the reaction.
    let mut served = false;
    if down.is_none() {
        match conn.send(&rdma_msg(null_xid, 1, &null_call(null_xid))) {
            Err(e) => down = Some(format!("NULL Send: {e}")),
            Ok(()) => {
                let end = Instant::now() + NULL_WAIT;
                while !served && down.is_none() {
                    let left = end.saturating_duration_since(Instant::now());
                    match conn.next(left) {
                        Some(Event::Msg(m)) => {
                            let is_null_reply = word(&m, 12) == Some(RDMA_MSG)
                                && (word(&m, 0) == Some(null_xid) || word(&m, 28) == Some(null_xid));
                            if is_null_reply {
                                served = word(&m, 32) == Some(1) && word(&m, 36) == Some(0);
                            } else {
                                reactions.push(m);
                            }
                        }
                        Some(Event::Down(w)) => down = Some(w),
                        None => break,
                    }
                }
            }
        }
    }
    let shown: Vec<String> = reactions.iter().map(|m| hex_words(&m[..m.len().min(32)])).collect();
    let mut detail = if shown.is_empty() { String::new() } else { format!("received [{}]", shown.join("; ")) };
    if let Some(w) = &down {
        detail = format!("{detail} down: {w}");
    }
    let outcome = match (reactions.first(), &down) {
        (Some(m), _) => classify(m),
        (None, Some(_)) => Outcome::Disconnect,
        (None, None) => Outcome::Silence,
    };
    // A reaction followed by a disconnect reads as the disconnect.
    let outcome = if down.is_some() && !served { Outcome::Disconnect } else { outcome };
    Seen { outcome, detail, served }
}

fn main() {
    let Some(rdma) = Rdma::from_test_env() else { std::process::exit(2) };
    let host = rdma.host();
    let port = std::env::args().nth(1).unwrap_or_else(|| "20049".into());
    let addr = format!("{host}:{port}");
    let pd = rdma.alloc_pd().expect("alloc_pd");
    // What the misaligned Read chunk names: 4 bytes the kernel could read.
    let target = pd.register(vec![0xab; 4096], Access::LOCAL_WRITE | Access::REMOTE_READ).expect("register");
    let cases = cases((target.rkey(), target.addr()));

    let mut conn: Option<Conn> = None;
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        if case.first || conn.as_ref().is_none_or(|c| c.down) {
            drop(conn.take());
            match Conn::open(&rdma, &pd, &addr) {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    println!("FAIL: {}: cannot connect to {addr}: {e}", case.name);
                    std::process::exit(1);
                }
            }
        }
        let c = conn.as_mut().unwrap();
        let seen = run_case(c, case, 0x4e55_0000 + i as u32);
        let (our, our_detail) = ours(&case.bytes);
        let known = KNOWN.iter().find(|k| k.0 == case.name && k.1 == seen.outcome && k.2 == our);
        let agree = if seen.outcome == our {
            "yes".to_string()
        } else if known.is_some() {
            "no (known)".to_string()
        } else {
            failed.push(case.name);
            "NO".to_string()
        };
        if !seen.served && seen.outcome != Outcome::Disconnect {
            failed.push(case.name);
        }
        println!(
            "case {:>2} {}: kernel {} {}| NULL after: {} | ours {}",
            i,
            case.name,
            seen.outcome,
            seen.detail,
            if seen.served { "served" } else { "NOT served" },
            our_detail
        );
        rows.push((case.name, hex_words(&case.bytes), seen.outcome, our, agree, seen.served));
    }
    drop(conn);

    println!();
    println!("| case | bytes (hex) | kernel | ours | agree? |");
    println!("|---|---|---|---|---|");
    for (name, bytes, kernel, our, agree, served) in &rows {
        let kernel = if *served { format!("{kernel}, NULL served") } else { format!("{kernel}") };
        println!("| {name} | {bytes} | {kernel} | {our} | {agree} |");
    }
    println!();
    println!("Known differences:");
    for (name, k, o, why) in KNOWN {
        println!("- {name}: kernel {k}, ours {o}: {why}");
    }
    if failed.is_empty() {
        println!("kernel_hostile: every case agrees or differs as documented");
    } else {
        println!("kernel_hostile: undocumented disagreement or dead connection: {}", failed.join("; "));
        std::process::exit(1);
    }
}
