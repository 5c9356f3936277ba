//! Issue 14: a steady-state small call allocates nothing, on either side. One test in its own
//! binary, so that nothing else runs while the process's allocations are counted: the caller,
//! the client's dispatcher, the server's acceptor and its connection's thread all count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig, WriteReply};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::InProcess;

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

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };

#[test]
fn issue_14_a_steady_state_small_call_allocates_nothing_on_either_side() {
    // The reply: the call with its message type set to REPLY, written into the server's
    // buffer.
    let echo = WriteReply(|c: &[u8], r: &mut Vec<u8>| {
        r.extend_from_slice(c);
        r[7] = 1;
    });
    // Two threads may serve the connection's calls: the warm-up below surely starts both,
    // so that no thread is started (and sizes its buffers) while allocations are counted.
    let mut cfg = ServerConfig::default();
    cfg.limits.calls_in_progress_per_connection = 2;
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), echo).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    // Warm up: the connection made, the version settled, and the pools, maps and threads at
    // their steady size. Eight callers at once make the server start every thread it may
    // serve the connection's calls on (a thread's first call sizes its own buffers).
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let client = &client;
            s.spawn(move || {
                let mut call = [0u8; 64];
                let mut reply = Vec::with_capacity(1024);
                for i in 0..200u8 {
                    call[2] = t + 1;
                    call[3] = i;
                    client.call_into(&call, &ULB, &mut reply).unwrap();
                }
            });
        }
    });
    let mut call = [0u8; 64];
    call[3] = 1;
    let mut reply = Vec::with_capacity(1024);
    for _ in 0..200 {
        client.call_into(&call, &ULB, &mut reply).unwrap();
    }
    ON.store(true, Ordering::SeqCst);
    const N: usize = 1000;
    for _ in 0..N {
        client.call_into(&call, &ULB, &mut reply).unwrap();
    }
    ON.store(false, Ordering::SeqCst);
    let total = CALLS.load(Ordering::SeqCst);
    eprintln!("allocations in {N} calls: {total}");
    assert_eq!(reply[..8], [0, 0, 0, 1, 0, 0, 0, 1]);
    // Every call reached the server's handler (it counts a call once its reply is sent).
    let served = 8 * 200 + 200 + N as u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.stats().calls.v2 < served && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(server.stats().calls.v2, served);
    assert_eq!(total, 0, "allocations in {N} steady-state calls, on either side");
}
