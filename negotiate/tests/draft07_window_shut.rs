//! A draft-ietf-nfsv4-rpcrdma-version-two-07 requester that keeps the server's window shut
//! (its headers never grant the server a Send beyond its first, section 4.2.1) while it sends
//! call after call, beyond the server's credits: each reply waits for a credit that never
//! comes. A test of its own, in a process of its own, because it counts the process's serving
//! threads.

use std::sync::Arc;
use std::time::Duration;

use negotiate::datapath::{send_error as post_raw, ReceivePool, Transport};
use negotiate::limits::ServerLimits;
use negotiate::responder::ResponderConfig;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v2::draft07::marshal::{self, NO_CHUNKS};
use rpcrdma_verbs::{Backend, InProcess, QpCaps};

const T: Duration = Duration::from_secs(10);
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// The server's event loop threads now ("negotiate-conn", "negotiate-call").
fn serving_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten();
    let names = tasks.filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok());
    names.filter(|n| n.starts_with("negotiate-conn") || n.starts_with("negotiate-call")).count()
}

/// Section 4.2.1 against the server's bounds (`negotiate/src/limits.rs`): a call whose -07
/// reply waits for the requester's credit is counted out of the calls in progress that hold
/// back receiving (the GRANT it waits for is still to be read), but no more of them than twice
/// the server's credits. A requester that sends four times the credits' worth of calls with
/// the server's window shut has the rest count against its calls in progress: the server's
/// loop stops receiving for it, and keeps at most that bound + calls in progress + 2 threads.
/// Before: every call took a thread of its own, as many threads as calls (found by a reading
/// of the code).
#[test]
fn draft07_4_2_1_calls_beyond_the_credits_with_the_window_shut_take_no_thread_each() {
    let backend = InProcess;
    let responder = ResponderConfig::default().draft07(true);
    let (credits, limits) = (responder.credits as usize, ServerLimits::default());
    let most = limits.calls_in_progress(responder.credits);
    let cfg = ServerConfig::default().responder(responder).limits(limits).timeout(T);
    let echo = |c: &[u8]| [&c[..4], &[0, 0, 0, 1][..]].concat();
    let server = Server::start(backend, backend.any_address(), cfg, Arc::new(ULB), echo).unwrap();
    let pd = backend.alloc_pd().unwrap();
    let (qp, _) = backend.connect(&pd, &server.local_addr(), &[], QpCaps::default(), T).unwrap();
    let conn = Transport::<InProcess>::new(pd, qp, T);
    let _receives = ReceivePool::new(&conn, 9, 1 << 16).unwrap();
    let (mut sent, mut peak) = (0, 0);
    for i in 0..4 * credits as u32 {
        // Running total 1: the server may post one message (its CONNPROP_FINAL takes it), and
        // no reply.
        let mut send = [0u8; 256];
        let call: Vec<u8> = [0x100 + i, 0].iter().flat_map(|w: &u32| w.to_be_bytes()).collect();
        let n = marshal::call_inline(&mut send, 0x100 + i, 1, 0, &NO_CHUNKS, &call).unwrap();
        // (Refused once the server stops receiving and its Receives are all full.)
        if post_raw(&conn, &send[..n]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(2));
        peak = peak.max(serving_threads());
    }
    std::thread::sleep(Duration::from_millis(300));
    peak = peak.max(serving_threads());
    let bound = 2 * credits + most;
    assert!(sent > bound, "{sent} calls sent: beyond twice the credits and the calls in progress");
    assert!(peak <= bound + 2, "{peak} serving threads for {sent} calls ({credits} credits, {most} in progress)");
    // The server serves another requester meanwhile.
    let client = negotiate::client::Client::new(backend, server.local_addr(), Default::default());
    let call: Vec<u8> = [7u32, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
    assert_eq!(client.call(&call, &ULB).unwrap(), echo(&call));
}
