//! `Client::call_in_place`: a reply handed over where it landed. Its DDP-eligible result is
//! read in the Write chunk buffer the server RDMA-Wrote it into (RFC 8166 section 3.4.6.1: the
//! Requester "reconstructs the transferred data" at the result's XDR position; here it reads
//! it there instead of copying), and the pieces it gives, concatenated, are exactly the bytes
//! `Client::call` returns for the same call: inline replies, results with and without XDR
//! padding (3.4.6.2), empty results, Long Replies in a Reply chunk, in both versions and on
//! every software backend.

use std::sync::Arc;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Backend, InProcess, Tcp};

/// Replies carry an opaque after the XID and msg_type: DDP-eligible (`reply_opaque`), or not.
const WRITE_ULB: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 1 << 20, max_reply: 2 << 20 };
const INLINE_ULB: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 2 << 20 };

/// XID, CALL, then the length of the opaque to answer with.
fn call(xid: u32, len: u32) -> Vec<u8> {
    [xid, 0, len].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// XID, REPLY, then an opaque of the asked length (each byte its index mod 251, padded), then
/// a trailing word after it.
fn reply_to(call: &[u8]) -> Vec<u8> {
    let len = u32::from_be_bytes(call[8..12].try_into().unwrap()) as usize;
    let mut r = [&call[..4], &[0, 0, 0, 1][..], &(len as u32).to_be_bytes()].concat();
    r.extend((0..len).map(|i| (i % 251) as u8));
    r.resize(r.len().next_multiple_of(4), 0);
    r.extend_from_slice(&0xfeed_f00du32.to_be_bytes());
    r
}

fn same_bytes_as_call<B: Backend + Clone>(b: B) {
    for versions in [(Version::ONE, Version::ONE), (Version::ONE, Version::TWO)] {
        for ulb in [WRITE_ULB, INLINE_ULB] {
            let server =
                Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ulb), reply_to).unwrap();
            let mut cfg = ClientConfig::default();
            cfg.requester.versions = versions;
            let client = Client::new(b.clone(), server.local_addr(), cfg);
            let mut xid = 0;
            // Inline; an empty result; odd lengths (padding restored); past the 4096-byte
            // thresholds (a Write chunk, or a Long Reply without one); 1 MiB.
            for len in [0u32, 5, 100, 4097, 10_001, 65_536, 1 << 20] {
                xid += 1;
                let copied = client.call(&call(xid, len), &ulb).unwrap();
                assert_eq!(copied, reply_to(&call(xid, len)));
                xid += 1;
                let mut placed = client.call_in_place(&call(xid, len), &ulb).unwrap();
                let want = reply_to(&call(xid, len));
                assert_eq!(placed.len(), want.len(), "{versions:?} {len}");
                assert_eq!(placed.view().pieces().flatten().copied().collect::<Vec<u8>>(), want, "{versions:?} {len}");
                assert_eq!(placed.to_vec(), want);
                // The server may move any result into the Write chunk provided for it; one
                // too large for the reply threshold it must (or send a Long Reply: not ours).
                let view = placed.view();
                match view.result(0) {
                    Some(r) => {
                        assert!(ulb.reply_opaque.is_some(), "{versions:?} {len}: no Write chunk was provided");
                        assert_eq!(r, &want[12..12 + len as usize], "the result where it landed");
                    }
                    None => assert!(
                        ulb.reply_opaque.is_none() || want.len() <= 4096,
                        "{versions:?} {len}: the result did not travel in a Write chunk"
                    ),
                }
            }
            assert!(ulb.reply_opaque.is_none() || server.stats().write_chunk_results > 0);
        }
    }
}

#[test]
fn rfc8166_3_4_6_1_an_in_place_reply_is_the_reply_call_returns_in_process() {
    same_bytes_as_call(InProcess);
}

#[test]
fn rfc8166_3_4_6_1_an_in_place_reply_is_the_reply_call_returns_over_tcp() {
    same_bytes_as_call(Tcp);
}

/// Dropping an in-place reply gives its buffers back to the connection: two hundred 64 KiB
/// results read in place, four held at a time, land in the Write chunk buffers of the first
/// few (seen on the wire, as the addresses the calls advertise), while replies kept take a
/// buffer each.
#[test]
fn in_place_replies_give_their_buffers_back_when_dropped() {
    use std::collections::HashSet;
    use std::sync::{Mutex, PoisonError};

    use rpcrdma_v1::header::{Header, HeaderLimits};
    use rpcrdma_verbs::capture::{Captured, CapturedMessage};

    // The address of each call's Write chunk, as the client advertised it: every
    // registration gets an address never used before (`ProtectionDomain::register`), so a
    // buffer given back and used again shows as an address seen before.
    let advertised: Arc<Mutex<Vec<u64>>> = Arc::default();
    let seen = advertised.clone();
    let b = Captured::new(
        InProcess,
        Arc::new(move |m: &CapturedMessage<'_>| {
            // Endpoint 1 is the client's queue pair (the server's replies name the segments too).
            let Ok(h) = Header::parse(m.bytes, &HeaderLimits::default()) else { return };
            if m.endpoint != 1 {
                return;
            }
            if let Some(segment) = h.write_list().iter().flat_map(|c| c.target.iter()).next() {
                seen.lock().unwrap_or_else(PoisonError::into_inner).push(segment.offset);
            }
        }),
    );
    // 64 KiB results and a short rest: a call's chunk memory within what a connection keeps
    // (`CHUNK_BYTES_KEPT`; with WRITE_ULB's 2 MiB Reply chunk nothing is kept).
    const ULB: OpaqueAtUlb =
        OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 1 << 16, max_reply: 1024 };
    let addresses =
        || advertised.lock().unwrap_or_else(PoisonError::into_inner).iter().copied().collect::<HashSet<_>>();
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ULB), reply_to).unwrap();
    // (Version One, whose headers this parse reads.)
    let mut cfg = ClientConfig::default();
    cfg.requester.versions = (Version::ONE, Version::ONE);
    let client = Client::new(b, server.local_addr(), cfg);
    let mut held = Vec::new();
    for xid in 1..=200u32 {
        let mut r = client.call_in_place(&call(xid, 65_536), &ULB).unwrap();
        assert_eq!(r.view().result(0).unwrap().len(), 65_536);
        // A few held at once, as a caller reading several replies would.
        held.push(r);
        if held.len() == 4 {
            held.clear();
        }
    }
    held.clear();
    // 200 calls' Write chunks in the buffers of the first few: given back as each reply was
    // dropped, and used again (at most the four held at once, and one for the call being
    // made; a connection keeps a bounded number, `CHUNK_BYTES_KEPT`).
    let dropped = addresses();
    assert_eq!(advertised.lock().unwrap_or_else(PoisonError::into_inner).len(), 200, "each call had a Write chunk");
    assert!(dropped.len() <= 8, "200 calls' Write chunks took {} buffers: not given back on drop", dropped.len());

    // And the count sees a buffer kept: 20 replies never dropped each keep their own.
    for xid in 201..=220u32 {
        std::mem::forget(client.call_in_place(&call(xid, 65_536), &ULB).unwrap());
    }
    let forgotten: HashSet<u64> =
        advertised.lock().unwrap_or_else(PoisonError::into_inner)[200..].iter().copied().collect();
    assert_eq!(forgotten.len(), 20, "replies kept shared buffers: the count above cannot tell");
    // The server counts a reply once it is sent, which may be just after the client has it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.stats().write_chunk_results < 220 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(server.stats().write_chunk_results, 220);
}
