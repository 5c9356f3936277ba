//! Issue 25 item 4, the registration cache: a connection keeps the memory it registered for a
//! call's chunks, so that a warm connection registers none per call (on real verbs
//! `ibv_reg_mr` pins every page, and costs more than the transfer it serves). What the peer may
//! reach is still decided per call: each call exposes the memory through windows of its own,
//! each with a fresh rkey, closed before the call completes (RFC 8166 section 4.5.4).
//!
//! Observed on the wire, through the real Client and Server: every registration gets an
//! address never used before (the backends' contract, `ProtectionDomain::register`), and a
//! window's address lies in its region's. So calls whose chunks are advertised at one address
//! again and again used one registration; calls that registered afresh each time would
//! advertise a new address each time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::header::{Header, HeaderLimits};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_verbs::capture::{Captured, CapturedMessage};
use rpcrdma_verbs::{Backend, InProcess, Tcp};

/// Replies carry a DDP-eligible opaque after the XID and msg_type: a Write chunk per call.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 1 << 16, max_reply: 1024 };

/// XID, CALL, the length of the opaque to answer with, then padding to `len` bytes.
fn call(xid: u32, answer: u32, len: usize) -> Vec<u8> {
    let mut c: Vec<u8> = [xid, 0, answer].iter().flat_map(|w| w.to_be_bytes()).collect();
    c.resize(len, 0x5a);
    c
}

/// XID, REPLY, then an opaque of the asked length.
fn reply_to(call: &[u8]) -> Vec<u8> {
    let len = u32::from_be_bytes(call[8..12].try_into().unwrap());
    let mut r = [&call[..4], &[0, 0, 0, 1][..], &len.to_be_bytes()].concat();
    r.resize(12 + len as usize, 7);
    r
}

/// The client's calls as sent, each as the (handle, address) of every segment it advertised.
type Advertised = Arc<Mutex<Vec<Vec<(u32, u64)>>>>;

/// Calls `n` times in a row on one connection, alternating `call` and `call_in_place` (whose
/// buffers come back when the reply is dropped), each call `call_len` bytes long, and returns
/// what each call advertised.
fn advertised<B: Backend + Clone>(backend: B, call_len: usize, n: u32) -> Vec<Vec<(u32, u64)>> {
    let seen: Advertised = Arc::default();
    let s = seen.clone();
    let b = Captured::new(
        backend,
        Arc::new(move |m: &CapturedMessage<'_>| {
            // Endpoint 1 is the client's queue pair: its first Send is the first call.
            let Ok(h) = Header::parse(m.bytes, &HeaderLimits::default()) else { return };
            if m.endpoint != 1 {
                return;
            }
            let reads = h.read_list().iter().map(|r| (r.target.handle, r.target.offset));
            let writes = h.write_list().iter().flat_map(|c| c.target.iter().map(|s| (s.handle, s.offset)));
            let segs = reads.chain(writes).collect::<Vec<_>>();
            s.lock().unwrap_or_else(PoisonError::into_inner).push(segs);
        }),
    );
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ULB), reply_to).unwrap();
    let mut cfg = ClientConfig::default();
    cfg.requester.versions = (Version::ONE, Version::ONE);
    let client = Client::new(b, server.local_addr(), cfg);
    for xid in 1..=n {
        let c = call(xid, 65_536, call_len);
        let want = reply_to(&c);
        if xid % 2 == 0 {
            assert_eq!(client.call(&c, &ULB).unwrap(), want);
        } else {
            assert_eq!(client.call_in_place(&c, &ULB).unwrap().to_vec(), want);
        }
    }
    let calls = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    calls.into_iter().filter(|segs| !segs.is_empty()).collect()
}

/// Each call's chunks at the one address of the first call's, through windows never used
/// before.
fn one_registration_fresh_windows(calls: &[Vec<(u32, u64)>], n: u32, segments_per_call: usize) {
    assert_eq!(calls.len(), n as usize, "every call advertised its chunks");
    assert!(calls.iter().all(|c| c.len() == segments_per_call), "{calls:?}");
    let addresses: HashSet<Vec<u64>> = calls.iter().map(|c| c.iter().map(|s| s.1).collect()).collect();
    assert_eq!(addresses.len(), 1, "a warm connection registered chunk memory again: {addresses:?}");
    let handles: HashSet<u32> = calls.iter().flatten().map(|s| s.0).collect();
    assert_eq!(handles.len(), calls.len() * segments_per_call, "a window's rkey was used twice");
}

#[test]
fn issue_25_a_warm_connection_registers_no_write_chunk_memory_in_process() {
    one_registration_fresh_windows(&advertised(InProcess, 12, 20), 20, 1);
}

#[test]
fn issue_25_a_warm_connection_registers_no_write_chunk_memory_over_tcp() {
    one_registration_fresh_windows(&advertised(Tcp, 12, 20), 20, 1);
}

/// A Long call (over the 1024-byte default inline threshold) goes as a Read chunk of a copy of
/// the call, which the connection keeps registered too; and its Write chunk.
#[test]
fn issue_25_a_warm_connection_registers_no_read_chunk_memory_in_process() {
    one_registration_fresh_windows(&advertised(InProcess, 8000, 20), 20, 2);
}
