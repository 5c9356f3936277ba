//! Issues 14 and 25: a steady-state small call allocates nothing, on either side, in process
//! and over TCP, with one caller and with callers waiting for credits; nor does a call whose
//! 4 KiB result the server's handler lends and the server RDMA-Writes into the call's Write
//! chunk (the client's chunk memory, windows and reassembly; the server's lent copy). Every
//! other call is read in place (`Client::call_in_place`). One test in its own
//! binary, so that nothing else runs while the process's allocations are counted: the
//! callers, the client's dispatcher, the server's acceptor and its connection's threads (and
//! the TCP backend's) all count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{LendReply, LentResults, Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            CALLS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            CALLS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Calls each caller makes before allocations are counted.
const WARM_UP: usize = 1000;

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };

/// Replies whose 4 KiB result the server's handler lends (`LendReply`): its length word right
/// after the echoed call's first eight bytes, the result in the call's Write chunk.
const LENT_ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 4096, max_reply: 64 };

/// What the calls' replies carry: the call's first 64 bytes as sent, or its first eight and a
/// lent 4 KiB result.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Replies {
    Echoed,
    Lent,
}

/// Counts the process's allocations over `n` steady-state 64-byte calls from each of
/// `callers` threads sharing one client of a server on `backend` that grants `credits`
/// (fewer credits than callers: calls wait for a credit, and are marshaled ahead and posted
/// by whoever frees one). Everything that sizes itself on first use is warmed up before.
fn steady_state_allocations<B: Backend + Clone>(
    backend: B,
    callers: usize,
    credits: u32,
    n: usize,
    replies: Replies,
) -> usize {
    // The reply: the call with its message type set to REPLY, written into the server's
    // buffer.
    // A call marked 0xee runs 3 ms: longer than `run_inline_for`, so that the connection's
    // other thread takes the receiving role and serves calls too during the warm-up (a short
    // call runs to completion on the thread that received it, so only a long one brings the
    // second thread in, which then sizes its own buffers).
    let block: Arc<[u8]> = vec![0x3c; 4096].into();
    let echo = LendReply(move |c: &[u8], r: &mut Vec<u8>, lent: &mut LentResults| {
        if c[1] == 0xee {
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
        match replies {
            Replies::Echoed => r.extend_from_slice(c),
            Replies::Lent => {
                r.extend_from_slice(&c[..8]);
                r.extend_from_slice(&4096u32.to_be_bytes());
                lent.lend(block.clone());
            }
        }
        r[7] = 1;
    });
    let ulb = match replies {
        Replies::Echoed => ULB,
        Replies::Lent => LENT_ULB,
    };
    // Two threads may serve the connection's calls: the warm-up below surely starts both,
    // so that no thread is started (and sizes its buffers) while allocations are counted.
    let mut cfg = ServerConfig::default();
    cfg.limits.calls_in_progress_per_connection = 2;
    cfg.responder.credits = credits;
    let server = Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(ulb), echo).unwrap();
    let client = Client::new(backend, server.local_addr(), ClientConfig::default());
    // Warm up: the connection made, the version settled, and the pools, maps and threads at
    // their steady size. Eight callers at once, some calls long, make the server start and
    // use every thread it may serve the connection's calls on (a thread's first call sizes
    // its own buffers).
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let client = &client;
            s.spawn(move || {
                let mut call = [0u8; 64];
                let mut reply = Vec::with_capacity(8192);
                for i in 0..200u8 {
                    call[1] = if t == 0 && i % 10 == 0 { 0xee } else { 0 };
                    call[2] = t + 1;
                    call[3] = i;
                    client.call_into(&call, &ulb, &mut reply).unwrap();
                }
            });
        }
    });
    let before = CALLS.load(Ordering::SeqCst);
    // The callers: started and warmed up before counting starts, counted between the
    // barriers.
    let (start, end) = (Barrier::new(callers + 1), Barrier::new(callers + 1));
    std::thread::scope(|s| {
        for t in 0..callers {
            let (client, start, end) = (&client, &start, &end);
            s.spawn(move || {
                let mut call = [0u8; 64];
                call[1] = 9;
                call[2] = t as u8;
                let mut reply = Vec::with_capacity(8192);
                // Long enough for the pools and maps to reach the high-water marks that
                // callers racing for credits reach.
                let want_len = if replies == Replies::Lent { 12 + 4096 } else { 64 };
                // Every other call read in place (`call_in_place`): its reply handed over where
                // it landed, its chunk buffers back to the connection on drop.
                let mut one = |i: usize, call: &[u8]| {
                    if i % 2 == 1 {
                        assert_eq!(client.call_in_place(call, &ulb).unwrap().len(), want_len);
                    } else {
                        client.call_into(call, &ulb, &mut reply).unwrap();
                    }
                };
                for i in 0..WARM_UP {
                    call[3] = i as u8;
                    one(i, &call);
                }
                start.wait();
                for i in 0..n {
                    call[3] = call[3].wrapping_add(1);
                    one(i, &call);
                }
                // The last call's reply, copied out, checked byte for byte.
                call[3] = call[3].wrapping_add(1);
                client.call_into(&call, &ulb, &mut reply).unwrap();
                assert_eq!(reply[..8], [0, 9, t as u8, call[3], 0, 0, 0, 1]);
                match replies {
                    Replies::Echoed => assert_eq!(reply[8..], call[8..]),
                    Replies::Lent => assert!(reply.len() == 12 + 4096 && reply[12..].iter().all(|&b| b == 0x3c)),
                }
                end.wait();
            });
        }
        start.wait();
        ON.store(true, Ordering::SeqCst);
        end.wait();
        ON.store(false, Ordering::SeqCst);
    });
    let total = CALLS.load(Ordering::SeqCst) - before;
    // Every call reached the server's handler (it counts a call once its reply is sent).
    let served = (8 * 200 + callers * (WARM_UP + n + 1)) as u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.stats().calls.v2 < served && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    let stats = server.stats();
    assert_eq!(stats.calls.v2, served);
    if replies == Replies::Lent {
        // Every result went from the connection's one copy of the block.
        assert_eq!((stats.lent_results, stats.lent_copies), (served, 1), "{stats:?}");
    }
    total
}

/// One test, so that nothing else runs in the process while its allocations are counted.
#[test]
fn issue_14_25_a_steady_state_small_call_allocates_nothing_on_either_side() {
    const N: usize = 1000;
    let phases = [
        ("in-process", 1, 32, Replies::Echoed),
        ("tcp", 1, 32, Replies::Echoed),
        ("in-process", 16, 4, Replies::Echoed),
        ("tcp", 16, 4, Replies::Echoed),
        ("in-process", 1, 32, Replies::Lent),
        ("tcp", 1, 32, Replies::Lent),
    ];
    for (backend, callers, credits, replies) in phases {
        // The previous phase's client and server are dropped; their threads (the TCP
        // backend's readers and writers among them) finish first, outside the count.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let total = match backend {
            "tcp" => steady_state_allocations(Tcp, callers, credits, N, replies),
            _ => steady_state_allocations(InProcess, callers, credits, N, replies),
        };
        eprintln!(
            "{backend}, {callers} callers, {credits} credits, {replies:?}: allocations in {} calls: {total}",
            callers * N
        );
        // One caller, small calls or lent 4 KiB results: nothing at all. (The lent phases
        // saw one allocation in 1,000 calls in 6 of 50 runs until the software backends'
        // key tables kept room for twice their live keys: a table full of the tombstones of
        // earlier calls' windows grew when it next rehashed; 0 in 90 since.) Callers racing
        // for credits may push a pool (the Receive buffers the dispatcher receives into, the
        // Send buffers of calls marshaled ahead, the TCP backend's frames) past a peak the
        // warm-up did not reach: a few buffers in all, never one per call. Each caller holds
        // at most one call marshaled ahead, and a Send buffer beyond the peak is two
        // allocations (its bytes and its registration: found by backtrace, twenty-third
        // session); 0 to 15 of 16,000 calls here, and 27 once in a fresh-clone CI run, after
        // a burst's callers came to be woken together (which may leave more of them
        // marshaling ahead at once).
        let bound = if callers == 1 { 0 } else { 2 * callers };
        assert!(total <= bound, "{backend}, {callers} callers, {replies:?}: {total} allocations in steady-state calls");
    }
}
