//! A server's handler lends DDP-eligible results from memory it keeps (`LentResults`): the
//! reply it writes is reduced (the result's length word only), the result an `Arc<[u8]>`.
//! Through the real Client and Server, every reply arrives whole and byte for byte what a
//! handler writing the result would have sent, whichever way it travels:
//! - in the requester's Write chunk (RFC 8166 section 3.4.6), written from the registered copy
//!   the connection keeps of that `Arc`, made once however often it is lent;
//! - inline or in the Reply chunk, when the requester provided no Write chunk (section 3.5),
//!   the reply put together by the server;
//! - on every version and dialect, in process and over TCP.
//!
//! A handler whose lent results do not fit its reply gets its call answered with an RPC
//! SYSTEM_ERR reply (RFC 5531 section 9), and the connection serves on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::onc::{self, CallHeader};
use negotiate::requester::RequesterConfig;
use negotiate::responder::ResponderConfig;
use negotiate::server::{LendReply, LentResults, Server, ServerConfig, ServerStats};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::{Dialect, VersionTwo};
use rpcrdma_verbs::{Backend, InProcess, Tcp};

/// The result's length word follows an accepted SUCCESS reply's 24-byte header (RFC 5531).
const SERVER_ULB: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24), max_result: 1 << 20, max_reply: 256 };

/// A requester that provides a Write chunk for the result.
const WITH_WRITE_CHUNK: OpaqueAtUlb = SERVER_ULB;

/// A requester that provides none, but a Reply chunk for a reply this large.
const NO_WRITE_CHUNK: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: (1 << 20) + 256 };

/// The procedure number names the block to answer with: 0 or 1 of `blocks`.
fn call(xid: u32, block: u32) -> Vec<u8> {
    CallHeader::new(xid, 0x2000_0001, 1, block).message(&[]).unwrap()
}

/// The reply a handler writing the whole result sends: SUCCESS, the opaque, its padding.
fn whole_reply(xid: u32, block: &[u8]) -> Vec<u8> {
    let mut results = (block.len() as u32).to_be_bytes().to_vec();
    results.extend_from_slice(block);
    results.resize(results.len().next_multiple_of(4), 0);
    let mut r = Vec::new();
    onc::reply_success(xid, &results, &mut r);
    r
}

/// A handler lending `blocks[procedure]`.
fn lending(blocks: [Arc<[u8]>; 2]) -> LendReply<impl Fn(&[u8], &mut Vec<u8>, &mut LentResults) + Send + Sync> {
    LendReply(move |call: &[u8], reply: &mut Vec<u8>, lent: &mut LentResults| {
        let (h, _) = CallHeader::decode(call).unwrap();
        let block = &blocks[h.proc as usize];
        onc::reply_success(h.xid, &(block.len() as u32).to_be_bytes(), reply);
        lent.lend(block.clone());
    })
}

/// Two blocks of odd lengths (their replies carry XDR padding), different bytes.
fn blocks(len: usize) -> [Arc<[u8]>; 2] {
    [(0..len).map(|i| i as u8).collect::<Vec<_>>().into(), vec![0xa5; len + 2].into()]
}

/// The server's statistics once it has counted `calls` answers (it counts one once sent,
/// which may be after the client has it): replies served, and those answered SYSTEM_ERR for
/// the handler's bad reply.
fn settled(server: &Server, calls: u64) -> ServerStats {
    let deadline = Instant::now() + Duration::from_secs(10);
    let counted = |s: ServerStats| s.calls.total() + s.bad_replies;
    while counted(server.stats()) < calls && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    server.stats()
}

/// `n` calls alternating between the two blocks every `run` calls, half of them read in
/// place; each reply checked byte for byte.
fn calls<B: Backend + Clone>(client: &Client<B>, ulb: &OpaqueAtUlb, blocks: &[Arc<[u8]>; 2], n: u32, run: u32) {
    for xid in 1..=n {
        let b = (xid - 1) / run % 2;
        let want = whole_reply(xid, &blocks[b as usize]);
        let got = match xid % 2 {
            0 => client.call(&call(xid, b), ulb).unwrap(),
            _ => client.call_in_place(&call(xid, b), ulb).unwrap().to_vec(),
        };
        assert_eq!(got, want, "call {xid}");
    }
}

fn start<B: Backend + Clone>(
    backend: B,
    server: ServerConfig,
    client: ClientConfig,
    len: usize,
) -> (Server, Client<B>) {
    let server =
        Server::start(backend.clone(), backend.any_address(), server, Arc::new(SERVER_ULB), lending(blocks(len)))
            .unwrap();
    let client = Client::new(backend, server.local_addr(), client);
    (server, client)
}

/// Write chunks: 20 calls lending one block, then the other, then the first again: each
/// result written from the connection's copy, two copies made (the first block's is kept).
fn lent_by_write_chunk<B: Backend + Clone>(backend: B, server: ServerConfig, client: ClientConfig) {
    let len = 10_001;
    let (server, client) = start(backend, server, client, len);
    calls(&client, &WITH_WRITE_CHUNK, &blocks(len), 30, 10);
    let stats = settled(&server, 30);
    assert_eq!((stats.write_chunk_results, stats.lent_results), (30, 30));
    assert_eq!(stats.lent_copies, 2, "each block copied once: {stats:?}");
    assert_eq!(stats.bad_replies, 0);
}

#[test]
fn rfc8166_3_4_6_lent_results_go_by_write_chunk_from_one_copy_each_v1() {
    let mut cfg = ClientConfig::default();
    cfg.requester.versions = (Version::ONE, Version::ONE);
    lent_by_write_chunk(InProcess, ServerConfig::default(), cfg);
}

#[test]
fn rfc8166_3_4_6_lent_results_go_by_write_chunk_from_one_copy_each_v2() {
    lent_by_write_chunk(InProcess, ServerConfig::default(), ClientConfig::default());
}

#[test]
fn rfc8166_3_4_6_lent_results_go_by_write_chunk_from_one_copy_each_draft07() {
    let server = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let client =
        ClientConfig::default().requester(RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07)));
    lent_by_write_chunk(InProcess, server, client);
}

#[test]
fn rfc8166_3_4_6_lent_results_go_by_write_chunk_from_one_copy_each_tcp() {
    lent_by_write_chunk(Tcp, ServerConfig::default(), ClientConfig::default());
}

/// No Write chunk: the reply is put together, its result copied into it, and it goes in the
/// Reply chunk (large) or inline (small), byte for byte the same.
#[test]
fn rfc8166_3_5_lent_results_without_a_write_chunk_go_in_the_reply() {
    for len in [10_001, 101] {
        let (server, client) = start(InProcess, ServerConfig::default(), ClientConfig::default(), len);
        calls(&client, &NO_WRITE_CHUNK, &blocks(len), 10, 5);
        let stats = settled(&server, 10);
        assert_eq!((stats.write_chunk_results, stats.lent_results, stats.lent_copies), (0, 0, 10), "{len}: {stats:?}");
        let (inline, chunk) = if len > 1000 { (0, 10) } else { (10, 0) };
        assert_eq!((stats.inline_replies, stats.reply_chunk_replies), (inline, chunk), "{len}");
    }
}

/// Lent results the binding does not find in the reply, or whose lengths differ from their
/// length words: SYSTEM_ERR (RFC 5531 section 9), and the next call is served.
#[test]
fn rfc5531_9_lent_results_that_do_not_fit_the_reply_are_answered_system_err() {
    let block: Arc<[u8]> = vec![1u8; 4000].into();
    let handler = LendReply(move |call: &[u8], reply: &mut Vec<u8>, lent: &mut LentResults| {
        let (h, _) = CallHeader::decode(call).unwrap();
        // Procedure 0: one result, as declared. 1: two lent, one in the reply. 2: one byte
        // fewer than its length word declares.
        let declared = block.len() as u32 + u32::from(h.proc == 2);
        onc::reply_success(h.xid, &declared.to_be_bytes(), reply);
        lent.lend(block.clone());
        if h.proc == 1 {
            lent.lend(block.clone());
        }
    });
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(SERVER_ULB), handler).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let system_err = |xid| {
        let mut r = Vec::new();
        onc::reply_system_err(xid, &mut r);
        r
    };
    for (xid, proc) in [(1, 0), (2, 1), (3, 0), (4, 2), (5, 0)] {
        let got = client.call(&CallHeader::new(xid, 0x2000_0001, 1, proc).message(&[]).unwrap(), &WITH_WRITE_CHUNK);
        let got = got.unwrap();
        match proc {
            0 => assert_eq!(got, whole_reply(xid, &[1u8; 4000]), "call {xid}"),
            _ => assert_eq!(got, system_err(xid), "call {xid}"),
        }
    }
    let stats = settled(&server, 5);
    assert_eq!((stats.bad_replies, stats.lent_results, stats.connections), (2, 3, 1), "{stats:?}");
}
