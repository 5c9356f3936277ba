//! `Client::call_lent`: the call message's own buffer is what the server RDMA-Reads its Read
//! chunk from, and it comes back to the caller unchanged whatever happens to the call: a
//! reply, an RDMA_ERROR, or a retransmission on a new connection (RFC 8166 section 3.4.5.1:
//! the Requester must not change that memory until the reply).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use negotiate::client::{Client, ClientConfig, ClientError};
use negotiate::requester::CallFailure;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::InProcess;

/// The opaque whose length word is at 8 is DDP-eligible.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: Some(8), reply_opaque: None, max_result: 0, max_reply: 4096 };

/// XID, CALL, then an opaque of `len` bytes, each byte its index mod 251.
fn message(xid: u32, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = [xid, 0, len as u32].iter().flat_map(|w| w.to_be_bytes()).collect();
    m.extend((0..len).map(|i| (i % 251) as u8));
    m.resize(m.len().next_multiple_of(4), 0);
    m
}

/// The reply: XID, REPLY, then a checksum of everything after the opaque's length word.
fn checksum_reply(call: &[u8]) -> Vec<u8> {
    let sum = call[12..].iter().enumerate().fold(0u32, |s, (i, &b)| s.wrapping_add((i as u32 + 1) * u32::from(b)));
    [&call[..4], &[0, 0, 0, 1][..], &sum.to_be_bytes()].concat()
}

#[test]
fn issue_14_a_lent_message_is_read_in_place_and_handed_back_unchanged() {
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), checksum_reply).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let mut reply = Vec::new();
    for (xid, len) in [(1, 256 << 10), (2, 100), (3, 70_001)] {
        let original = message(xid, len);
        let mut lent = original.clone();
        client.call_lent(&mut lent, &ULB, &mut reply).unwrap();
        assert_eq!(reply, checksum_reply(&original), "call {xid}: the server read the argument whole");
        assert_eq!(lent, original, "call {xid}: the buffer came back unchanged");
    }
    let stats = client.stats();
    assert_eq!((stats.chunked, stats.short), (2, 1), "the large arguments went in Read chunks");
}

#[test]
fn rfc8166_4_5_a_lent_message_comes_back_when_the_responder_answers_rdma_error() {
    // A responder that takes no chunk over 4 KiB answers this call's header with an RDMA_ERROR.
    let mut cfg = ServerConfig::default();
    cfg.responder.limits.max_chunk_len = 4096;
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), checksum_reply).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let original = message(7, 64 << 10);
    let mut lent = original.clone();
    let mut reply = Vec::new();
    let err = client.call_lent(&mut lent, &ULB, &mut reply).unwrap_err();
    assert!(matches!(err, ClientError::ChunksRefused { failure: CallFailure::Peer(_), .. }), "{err:?}");
    assert!(err.to_string().contains("Read chunks of [65536] bytes"), "the sizes it asked for: {err}");
    assert_eq!(lent, original, "the buffer came back unchanged");
    // The connection still serves, and the buffer can be lent again.
    lent.truncate(12);
    lent[8..12].copy_from_slice(&0u32.to_be_bytes());
    lent[..4].copy_from_slice(&8u32.to_be_bytes());
    client.call_lent(&mut lent, &ULB, &mut reply).unwrap();
    assert_eq!(reply, checksum_reply(&lent));
}

#[test]
fn rfc8166_3_4_5_1_a_lent_message_goes_out_again_unchanged_after_a_timeout() {
    // The first attempt's handler outlives the client's timeout: the client gives that
    // connection up and sends the call again on a new one, from the same lent buffer.
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = attempts.clone();
    let slow_first = move |call: &[u8]| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        checksum_reply(call)
    };
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), slow_first).unwrap();
    let mut cfg = ClientConfig::default();
    cfg.requester.timeout = Duration::from_millis(300);
    let client = Client::new(InProcess, server.local_addr(), cfg);
    let original = message(9, 128 << 10);
    let mut lent = original.clone();
    let mut reply = Vec::new();
    client.call_lent(&mut lent, &ULB, &mut reply).unwrap();
    assert_eq!(reply, checksum_reply(&original), "the second attempt read the same argument");
    assert_eq!(lent, original, "the buffer came back unchanged");
    assert!(attempts.load(Ordering::SeqCst) >= 2, "the call was served again");
    assert!(client.stats().chunked >= 2, "each attempt sent the argument in a Read chunk");
}
