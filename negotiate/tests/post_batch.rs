//! A server's burst of replies in one write, over TCP (issue 25, "Batch: post a reply's
//! Writes and Send together; reap completions in bursts"): while a connection's next calls
//! are waiting behind the one served, the server's event loop holds the replies it sends
//! (`rpcrdma_verbs::PostBatch`) and writes them together once none waits. The requester here
//! is written from RFC 8166's header, bytes only: it sends its calls in one write, so that all
//! of them are waiting when the server takes the first.
//!
//! And what is held never waits long on its holder: a reply held behind a call whose handler
//! runs long goes when another thread takes the loop's role over
//! (`ServerLimits::run_inline_for`), not when that handler returns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{
    Access, Backend, Completion, MemoryRegion, Opcode, PostBatch, ProtectionDomain, QpCaps, QueuePair, SendFlags, Sge,
    Status, Tcp,
};

const T: Duration = Duration::from_secs(10);
/// Nothing DDP-eligible: every call and reply inline.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 512 };
/// How long the handler sleeps for a slow call (argument 1).
const SLOW: Duration = Duration::from_secs(3);
/// How long it sleeps for a call of argument 2: longer than the TCP backend's delay for
/// acknowledgements (500 us), whose write would otherwise carry a held reply out with them.
const BRIEF: Duration = Duration::from_millis(5);
/// `run_inline_for` for the held reply's test: longer than [`BRIEF`].
const RUN_INLINE_FOR: Duration = Duration::from_millis(50);
/// The tests count the process's socket writes: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// An RDMA_MSG (RFC 8166 section 4.2.1) of Version One carrying the RPC call `xid` (XID,
/// CALL, one argument word: 0 for a quick call, 1 for a slow one, 2 for a brief one), no
/// chunks.
fn call(xid: u32, arg: u32) -> Vec<u8> {
    words(&[xid, 1, 32, 0, 0, 0, 0, xid, 0, arg])
}

/// A server whose handler echoes each call as a reply, after sleeping [`SLOW`] for a slow
/// one and [`BRIEF`] for a brief one; a thread takes the loop's role over from a call that
/// runs longer than `run_inline_for` (the default, 1 ms, unless given).
fn start() -> Server {
    start_with(ServerConfig::default())
}

fn start_with(cfg: ServerConfig) -> Server {
    let handler = |c: &[u8]| {
        match c[8..12] {
            [0, 0, 0, 1] => std::thread::sleep(SLOW),
            [0, 0, 0, 2] => std::thread::sleep(BRIEF),
            _ => {}
        }
        [&c[..4], &[0, 0, 0, 1][..], &c[8..]].concat()
    };
    Server::start(Tcp, Tcp.any_address(), cfg, Arc::new(ULB), handler).expect("the server starts")
}

/// Connects to `server`, posts a Receive for each of `calls`, sends them all in one write
/// (one batch), and returns the XID of each reply as it arrives, with when.
fn burst(server: &Server, calls: &[Vec<u8>]) -> Vec<(u32, Instant)> {
    let pd = Tcp.alloc_pd().unwrap();
    let (qp, _) = Tcp.connect(&pd, &server.local_addr(), &[], QpCaps::default(), T).expect("connected");
    let rx = pd.register(vec![0; calls.len() * 1024], Access::LOCAL_WRITE).unwrap();
    for i in 0..calls.len() {
        qp.post_recv(i as u64, Sge::new(&rx, i * 1024, 1024)).unwrap();
    }
    let sends: Vec<_> = calls.iter().map(|c| pd.register(c.clone(), Access::empty()).unwrap()).collect();
    {
        let _one_write = PostBatch::open();
        for (i, s) in sends.iter().enumerate() {
            qp.post_send_with(100 + i as u64, &[Sge::whole(s)], None, SendFlags::empty()).unwrap();
        }
    }
    let mut replies = Vec::new();
    let deadline = Instant::now() + T;
    while replies.len() < calls.len() && Instant::now() < deadline {
        let Some(c): Option<Completion> = qp.wait_cq(Duration::from_millis(100)) else { continue };
        assert_eq!(c.status, Status::Success, "{c:?}");
        if c.opcode == Opcode::Recv {
            let at = c.wr_id as usize * 1024;
            let reply = rx.with(|b| b[at..at + c.byte_len as usize].to_vec());
            // An RDMA_MSG whose RPC message is the REPLY to the call the header names.
            assert_eq!(reply[12..16], [0, 0, 0, 0], "RDMA_MSG");
            assert_eq!((reply[..4].to_vec(), &reply[32..36]), (reply[28..32].to_vec(), &[0, 0, 0, 1][..]));
            replies.push((u32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]), Instant::now()));
        }
    }
    replies
}

#[test]
fn issue_25_a_burst_of_calls_is_answered_in_one_write() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = start();
    // A first call alone, so that the server's loop is started and waiting.
    assert_eq!(burst(&server, &[call(1, 0)]).len(), 1);
    let calls: Vec<_> = (10..26).map(|xid| call(xid, 0)).collect();
    let before = rpcrdma_verbs::tcp::socket_writes();
    let replies = burst(&server, &calls);
    let writes = rpcrdma_verbs::tcp::socket_writes() - before;
    let mut xids: Vec<u32> = replies.iter().map(|r| r.0).collect();
    xids.sort_unstable();
    assert_eq!(xids, (10..26).collect::<Vec<_>>(), "every call answered once");
    // The calls' write, the replies' (one each if nothing were held: 17 and more), and the
    // connection's handshake and acknowledgements.
    assert!(writes <= 8, "{writes} socket writes for 16 calls sent in one and their replies");
}

#[test]
fn issue_25_a_reply_held_behind_a_long_handler_goes_when_the_role_is_taken_over() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // The brief call runs within `run_inline_for` (no thread takes the role over from it),
    // past the acknowledgements' delay (their write carries nothing of it out).
    let mut cfg = ServerConfig::default();
    cfg.limits.run_inline_for = RUN_INLINE_FOR;
    let server = start_with(cfg);
    let started = Instant::now();
    // The brief call's reply is held while the slow call behind it is served (it was
    // waiting, and a third behind it: the burst goes on): it must not wait for the slow
    // handler, only for the role's takeover. (The third, slow too, is served by the thread
    // that takes the role over: nothing it posts carries the held reply out before its
    // handler returns.)
    let replies = burst(&server, &[call(7, 2), call(8, 1), call(9, 1)]);
    let mut xids: Vec<u32> = replies.iter().map(|r| r.0).collect();
    xids[1..].sort_unstable();
    assert_eq!(xids, [7, 8, 9]);
    let brief = replies[0].1 - started;
    assert!(brief < SLOW / 3, "the brief call's reply came after {brief:?}, behind the slow handler");
}
