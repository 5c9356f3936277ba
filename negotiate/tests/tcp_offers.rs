//! Over TCP, where each RDMA Read is a network round trip the serving thread waits for, a
//! call's Read chunks go with the call: the client offers each segment ahead of its Send
//! (`QueuePair::offer_read`) and the server copies it from the offer (`take_offered`) instead
//! of reading it, for Read-chunk and Long calls (RFC 8166 sections 3.5.2 and 3.5.3), on every
//! version, and with more offered at once than the server holds, when the chunks passed over
//! are read instead. Counted by `rpcrdma_verbs::tcp::offers_taken`, the process's count: one
//! test in this binary. Every call's bytes are checked, so an offer taken for the wrong call
//! fails too.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use negotiate::client::{Client, ClientConfig};
use negotiate::requester::RequesterConfig;
use negotiate::responder::ResponderConfig;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::{Dialect, VersionTwo};
use rpcrdma_verbs::tcp::{offers_passed_over, offers_taken};
use rpcrdma_verbs::{Backend, Tcp};

/// The opaque's length word follows the XID and the message type.
const OPAQUE_AT: usize = 8;
/// Beyond every version's default inline threshold (4096): the call goes by chunk.
const BIG: usize = 12 << 10;
/// Beyond what a TCP queue pair holds of one offer (64 KiB): read from the client as before.
const TOO_BIG: usize = 80 << 10;

fn ulb(call_opaque: Option<usize>) -> OpaqueAtUlb {
    OpaqueAtUlb { call_opaque, reply_opaque: None, max_result: 0, max_reply: 4096 }
}

/// `[xid, msg_type, len, opaque]`, the opaque's bytes drawn from the XID.
fn message(xid: u32, msg_type: u32, len: usize) -> Vec<u8> {
    let mut m = [xid.to_be_bytes(), msg_type.to_be_bytes(), (len as u32).to_be_bytes()].concat();
    m.extend((0..len).map(|i| (i as u32 ^ xid) as u8));
    m.resize(12 + len.next_multiple_of(4), 0);
    m
}

fn calls_with_read_chunks_are_served_from_their_offers(
    label: &str,
    responder: ResponderConfig,
    requester: RequesterConfig,
) {
    let executed = Arc::new(AtomicU32::new(0));
    let seen = executed.clone();
    // The handler checks every byte the server fetched, and answers with the opaque's sum.
    let handler = move |call: &[u8]| {
        let xid = u32::from_be_bytes(call[..4].try_into().unwrap());
        let len = u32::from_be_bytes(call[8..12].try_into().unwrap()) as usize;
        assert_eq!(call, &message(xid, 0, len)[..], "{xid:#x}: the call as the client sent it");
        seen.fetch_add(1, Ordering::Relaxed);
        message(xid, 1, 4)
    };
    let server_ulb = OpaqueAtUlb { call_opaque: Some(OPAQUE_AT), reply_opaque: None, max_result: 0, max_reply: 4096 };
    let scfg = ServerConfig::default().responder(responder);
    let server = Server::start(Tcp, Tcp.any_address(), scfg, Arc::new(server_ulb), handler).unwrap();
    let client = Client::new(Tcp, server.local_addr(), ClientConfig::default().requester(requester));
    let mut xid = 0x100u32;
    let mut call = |ulb: &OpaqueAtUlb, len: usize| {
        xid += 1;
        assert_eq!(client.call(&message(xid, 0, len), ulb).unwrap(), message(xid, 1, 4), "{label}: {xid:#x}");
    };
    call(&ulb(None), 32); // settled first
    for (form, ulb, len, offered) in [
        ("Read chunk", ulb(Some(OPAQUE_AT)), BIG, true),
        ("Long call", ulb(None), BIG, true),
        ("Read chunk beyond an offer's bound", ulb(Some(OPAQUE_AT)), TOO_BIG, false),
    ] {
        let before = offers_taken();
        for _ in 0..20 {
            call(&ulb, len);
        }
        let taken = offers_taken() - before;
        assert_eq!(taken, if offered { 20 } else { 0 }, "{label}, {form}: reads answered from offers");
    }
    // Many callers at once, each call's chunk 60 KiB: more than the server holds of offers
    // (256 KiB) if each offered, so the client offers while its calls awaiting replies have
    // offered at most half of that, and the other calls' chunks are read (docs/benchmarks.md,
    // "Offers passed over under concurrency"). Every call's bytes are still the caller's (the
    // handler checks them), however many were taken.
    let before = offers_taken();
    std::thread::scope(|s| {
        for t in 0..CALLERS {
            let client = &client;
            s.spawn(move || {
                for i in 0..8 {
                    let x = 0x10_0000 * (t + 1) + i;
                    let reply = client.call(&message(x, 0, NEAR_OFFER_MOST), &ulb(Some(OPAQUE_AT)));
                    assert_eq!(reply.unwrap(), message(x, 1, 4), "{label}: {x:#x}, among {CALLERS} callers");
                }
            });
        }
    });
    let taken = offers_taken() - before;
    assert!(taken <= u64::from(CALLERS) * 8, "{label}: {taken} offers taken for {} calls", CALLERS * 8);
    assert_eq!(offers_passed_over(), 0, "{label}: offers passed over, their bytes sent for nothing");
    eprintln!("{label}: {taken} of {} calls of {CALLERS} callers at once took their offers", CALLERS * 8);
    assert_eq!(executed.load(Ordering::Relaxed), 61 + CALLERS * 8, "{label}: each call executed once");
}

/// Callers at once in the last part of the test.
const CALLERS: u32 = 16;
/// A chunk just within one offer's bound.
const NEAR_OFFER_MOST: usize = 60 << 10;

#[test]
fn read_chunks_go_with_their_call_over_tcp_on_every_version() {
    let v1 = ResponderConfig::default().versions((Version::ONE, Version::ONE));
    calls_with_read_chunks_are_served_from_their_offers("Version One", v1, RequesterConfig::default());
    let cel00 = ResponderConfig::default();
    calls_with_read_chunks_are_served_from_their_offers("draft-cel-00", cel00, RequesterConfig::default());
    // (-07's calls too large for a Receive would continue across Sends; one part each here,
    // so that they go by chunk as on the other versions.)
    let d07 = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07)).max_call_parts(1);
    calls_with_read_chunks_are_served_from_their_offers("-07", ResponderConfig::default().draft07(true), d07);
}
