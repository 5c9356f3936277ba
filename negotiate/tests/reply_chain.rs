//! Issue 25 item 3, "post a reply's Writes and Send together": a reply whose result goes by
//! Write chunk is posted as one chain, its RDMA Writes and then its Send
//! (`QueuePair::post_chain`: one `ibv_post_send`, one doorbell, as the Linux server's
//! `svc_rdma_post_send` chains a reply's work requests). RFC 8166 section 3.4.6.1 relies on the
//! send queue's order: the Writes land before the Send that names them is received.
//!
//! Observed through the real Client and Server over a capturing backend, which records with
//! each Send how many Writes were chained just before it (`CapturedMessage::chained_writes`).

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

/// XID, CALL, the length of the opaque to answer with.
fn call(xid: u32, answer: u32) -> Vec<u8> {
    [xid, 0, answer].iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// XID, REPLY, then an opaque of the asked length.
fn reply_to(call: &[u8]) -> Vec<u8> {
    let len = u32::from_be_bytes(call[8..12].try_into().unwrap());
    let mut r = [&call[..4], &[0, 0, 0, 1][..], &len.to_be_bytes()].concat();
    r.resize(12 + len as usize, 7);
    r
}

/// Each Send seen: its endpoint, how many of its Write list's segments carry bytes (None: not
/// a transport header this test parses) and the Writes chained before it.
type Seen = Arc<Mutex<Vec<(u64, Option<usize>, usize)>>>;

/// `n` calls answered with `answer` bytes each, over `backend` captured; what was sent.
fn sends<B: Backend + Clone>(backend: B, answer: u32, n: u32) -> Vec<(u64, Option<usize>, usize)> {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let b = Captured::new(
        backend,
        Arc::new(move |m: &CapturedMessage<'_>| {
            let writes = Header::parse(m.bytes, &HeaderLimits::default())
                .ok()
                .map(|h| h.write_list().iter().flat_map(|c| c.target.iter()).filter(|s| s.length > 0).count());
            s.lock().unwrap_or_else(PoisonError::into_inner).push((m.endpoint, writes, m.chained_writes));
        }),
    );
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ULB), reply_to).unwrap();
    let mut cfg = ClientConfig::default();
    cfg.requester.versions = (Version::ONE, Version::ONE);
    let client = Client::new(b, server.local_addr(), cfg);
    for xid in 1..=n {
        let c = call(xid, answer);
        assert_eq!(client.call(&c, &ULB).unwrap(), reply_to(&c));
    }
    drop(client);
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    seen
}

/// Every reply whose result went by Write chunk was posted in one chain with its Writes, one
/// Write per segment of the Write list it filled; the calls (endpoint 1, the client's queue
/// pair) were posted alone.
fn each_reply_chains_its_writes<B: Backend + Clone>(backend: B) {
    let seen = sends(backend, 4096, 20);
    let calls: Vec<_> = seen.iter().filter(|s| s.0 == 1).collect();
    let replies: Vec<_> = seen.iter().filter(|s| s.0 != 1).collect();
    assert_eq!(calls.len(), 20, "{seen:?}");
    assert!(calls.iter().all(|c| c.2 == 0), "a call was posted in a chain of Writes: {calls:?}");
    let filled: Vec<_> = replies.iter().filter(|r| r.1.is_some_and(|w| w > 0)).collect();
    assert_eq!(filled.len(), 20, "every reply filled its Write chunk: {replies:?}");
    for r in filled {
        assert_eq!(Some(r.2), r.1, "a reply's Writes were not chained with its Send: {r:?}");
    }
}

#[test]
fn issue_25_a_replys_writes_and_send_are_one_chain_in_process() {
    each_reply_chains_its_writes(InProcess);
}

#[test]
fn issue_25_a_replys_writes_and_send_are_one_chain_over_tcp() {
    each_reply_chains_its_writes(Tcp);
}

/// A reply whose result is empty answers with its Write chunk's segment at length 0, and
/// writes nothing: its Send goes alone.
#[test]
fn issue_25_a_reply_with_an_empty_result_chains_no_write() {
    let seen = sends(InProcess, 0, 4);
    let replies: Vec<_> = seen.iter().filter(|s| s.0 != 1).collect();
    assert!(replies.len() >= 4, "{seen:?}");
    assert!(replies.iter().all(|r| r.1.is_none_or(|w| w == 0) && r.2 == 0), "{replies:?}");
}
