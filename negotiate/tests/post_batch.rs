//! A server's burst of replies in one write, over TCP (issue 25, "Batch: post a reply's
//! Writes and Send together; reap completions in bursts"): while a connection's next calls
//! are waiting behind the one served, the server's event loop holds the replies it sends
//! (`rpcrdma_verbs::PostBatch`) and writes them together once none waits. The requester here
//! is written from RFC 8166's header, bytes only: it sends its calls in one write, so that all
//! of them are waiting when the server takes the first.
//!
//! And what is held never waits long on its holder: a reply held behind a call whose handler
//! runs long goes when another thread takes the loop's role over
//! (`ServerLimits::run_inline_for`), not when that handler returns. A call whose Read chunks
//! came offered with it (over TCP) keeps the burst going; and a call that runs long is taken
//! over while the loop's spare threads wait, told of no call's start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{
    Access, Backend, Completion, MemoryRegion, Opcode, PostBatch, ProtectionDomain, QpCaps, QueuePair, RemoteBuf,
    SendFlags, Sge, Status, Tcp,
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
    let replies = burst_offering(server, calls.len(), &[], |i, _| calls[i].clone());
    replies.into_iter().map(|(xid, at, _)| (xid, at)).collect()
}

/// [`burst`] of `n` calls, each made by `call` from its index and, when `chunk` is not empty,
/// where the requester's copy of `chunk` is registered for it: offered with its Send
/// (`QueuePair::offer_read`), as our Client offers a Read chunk over TCP. Each reply comes
/// with its RPC message's words after the message type.
fn burst_offering(
    server: &Server,
    n: usize,
    chunk: &[u8],
    call: impl Fn(usize, Option<RemoteBuf>) -> Vec<u8>,
) -> Vec<(u32, Instant, Vec<u8>)> {
    let pd = Tcp.alloc_pd().unwrap();
    let (qp, _) = Tcp.connect(&pd, &server.local_addr(), &[], QpCaps::default(), T).expect("connected");
    let rx = pd.register(vec![0; n * 1024], Access::LOCAL_WRITE).unwrap();
    for i in 0..n {
        qp.post_recv(i as u64, Sge::new(&rx, i * 1024, 1024)).unwrap();
    }
    let chunks: Vec<_> = (0..n)
        .filter(|_| !chunk.is_empty())
        .map(|_| pd.register(chunk.to_vec(), Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap())
        .collect();
    let remote = |i: usize| chunks.get(i).map(|c| c.remote_at(0));
    let sends: Vec<_> = (0..n).map(|i| pd.register(call(i, remote(i)), Access::empty()).unwrap()).collect();
    {
        let _one_write = PostBatch::open();
        for (i, s) in sends.iter().enumerate() {
            if let Some(r) = remote(i) {
                assert!(qp.offer_read(r, chunk.len() as u32), "offered");
            }
            qp.post_send_with(100 + i as u64, &[Sge::whole(s)], None, SendFlags::empty()).unwrap();
        }
    }
    let mut replies = Vec::new();
    let deadline = Instant::now() + T;
    while replies.len() < n && Instant::now() < deadline {
        let Some(c): Option<Completion> = qp.wait_cq(Duration::from_millis(100)) else { continue };
        assert_eq!(c.status, Status::Success, "{c:?}");
        if c.opcode == Opcode::Recv {
            let at = c.wr_id as usize * 1024;
            let reply = rx.with(|b| b[at..at + c.byte_len as usize].to_vec());
            // An RDMA_MSG whose RPC message is the REPLY to the call the header names.
            assert_eq!(reply[12..16], [0, 0, 0, 0], "RDMA_MSG");
            assert_eq!((reply[..4].to_vec(), &reply[32..36]), (reply[28..32].to_vec(), &[0, 0, 0, 1][..]));
            let xid = u32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]);
            replies.push((xid, Instant::now(), reply[36..].to_vec()));
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

/// The argument of a call with a Read chunk: an `opaque<>` whose length word is at offset 8 of
/// the RPC message (after XID and CALL), its bytes DDP-eligible.
const CHUNKED_ULB: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: Some(8), reply_opaque: None, max_result: 0, max_reply: 512 };

/// An RDMA_MSG of Version One (RFC 8166 section 4.2.1) whose RPC call `xid` carries a
/// `len`-byte opaque in one Read chunk at `at` (section 3.4.5: at its position in the Payload
/// stream, 12, after XID, CALL and the opaque's length), the rest inline.
fn call_with_read_chunk(xid: u32, at: RemoteBuf, len: u32) -> Vec<u8> {
    let (hi, lo) = ((at.addr >> 32) as u32, at.addr as u32);
    words(&[xid, 1, 32, 0, 1, 12, at.rkey, len, hi, lo, 0, 0, 0, xid, 0, len])
}

#[test]
fn issue_25_calls_whose_read_chunks_came_offered_keep_the_burst() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // The handler answers with the sum of the argument's bytes: each reply says the chunk's
    // bytes reached it.
    let handler = |c: &[u8]| {
        let sum: u32 = c[12..].iter().map(|&b| u32::from(b)).sum();
        [&c[..4], &[0, 0, 0, 1][..], &sum.to_be_bytes()[..]].concat()
    };
    let server = Server::start(Tcp, Tcp.any_address(), ServerConfig::default(), Arc::new(CHUNKED_ULB), handler)
        .expect("the server starts");
    let chunk: Vec<u8> = (0..1024u32).map(|i| (i % 251) as u8).collect();
    let sum: u32 = chunk.iter().map(|&b| u32::from(b)).sum();
    let make =
        |base: u32| move |i: usize, at: Option<RemoteBuf>| call_with_read_chunk(base + i as u32, at.unwrap(), 1024);
    // A first call alone, so that the server's loop is started and waiting.
    assert_eq!(burst_offering(&server, 1, &chunk, make(1)).len(), 1);
    // A burst cut short by the scheduler (a busy machine: the loop's thread writes a reply
    // before the next call's frame is read) costs a few writes more: 9 to 15 in one run of ten
    // or twenty with two CPU hogs beside it. A loop that steps aside for each call's Reads
    // breaks every burst (17 writes and more), so the fewest of up to three bursts is what
    // tells the two apart.
    let mut fewest = u64::MAX;
    let mut bursts = 0;
    while bursts < 3 && fewest > 8 {
        let base = 10 + 100 * bursts;
        bursts += 1;
        let (before, taken_before) = (rpcrdma_verbs::tcp::socket_writes(), rpcrdma_verbs::tcp::offers_taken());
        let replies = burst_offering(&server, 16, &chunk, make(base));
        let writes = rpcrdma_verbs::tcp::socket_writes() - before;
        let taken = rpcrdma_verbs::tcp::offers_taken() - taken_before;
        let mut xids: Vec<u32> = replies.iter().map(|r| r.0).collect();
        xids.sort_unstable();
        assert_eq!(xids, (base..base + 16).collect::<Vec<_>>(), "every call answered once");
        for (xid, _, body) in &replies {
            assert_eq!(body[..], sum.to_be_bytes(), "call {xid}: its chunk's bytes, as the handler summed them");
        }
        assert_eq!(taken, 16, "every chunk taken from its offer, none read from the requester");
        // The calls' write, the replies' (one each if the loop stepped aside for each call's
        // Reads, its burst broken: 17 and more), the handshake's and acknowledgements.
        fewest = fewest.min(writes);
    }
    // (The server counts a reply once it is sent, which may be after the requester has it.)
    let want = 1 + 16 * u64::from(bursts);
    let deadline = Instant::now() + T;
    while server.stats().read_chunk_calls < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(server.stats().read_chunk_calls, want, "each call's argument came by its Read chunk");
    assert!(
        fewest <= 8,
        "{fewest} socket writes at best in {bursts} bursts of 16 calls with offered Read chunks sent in one and their replies"
    );
}

/// How many of the process's threads serve calls (the server's event loop names them).
fn serving_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").expect("Linux's /proc");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "negotiate-call")
        .count()
}

#[test]
fn issue_25_a_long_call_is_taken_over_while_spare_threads_wait() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = start();
    // Brief calls one behind another, each running past `run_inline_for` (1 ms): each is taken
    // over and the next served beside it, on a thread of its own. Once they are done, those
    // threads wait for the role, all but one of them spare.
    let brief: Vec<_> = (30..36).map(|xid| call(xid, 2)).collect();
    assert_eq!(burst(&server, &brief).len(), 6);
    assert!(serving_threads() >= 3, "{} threads: none spare", serving_threads());
    // A slow call on one connection, taken over by the thread waiting for the role; then, on
    // another, a slow call and a quick one behind it: the slow one begins on the thread that
    // took the role over, and a spare thread, waiting in its place since, must take the role
    // over from it within `run_inline_for`, though the spare ones are told of no call's start.
    std::thread::scope(|s| {
        let first = s.spawn(|| burst(&server, &[call(50, 1)]));
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let replies = burst(&server, &[call(60, 1), call(61, 0)]);
        assert_eq!(replies.iter().map(|r| r.0).collect::<Vec<_>>(), [61, 60]);
        let quick = replies[0].1 - started;
        assert!(quick < SLOW / 3, "the quick call's reply came after {quick:?}, behind the slow handler");
        assert_eq!(first.join().unwrap().len(), 1);
    });
}
