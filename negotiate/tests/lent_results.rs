//! A server's handler lends DDP-eligible results from memory it keeps (`LentResults`): the
//! reply it writes is reduced (the result's length word only), the result an `Arc<[u8]>`.
//! Through the real Client and Server, every reply arrives whole and byte for byte what a
//! handler writing the result would have sent, whichever way it travels:
//! - in the requester's Write chunk (RFC 8166 section 3.4.6), written from the registered copy
//!   the connection keeps of that `Arc`, made once however often it is lent;
//! - inline or in the Reply chunk, when the requester provided no Write chunk (section 3.5),
//!   the reply put together by the server;
//! - on every version and dialect, in process and over TCP;
//! - several lent results, one of them empty, with reply bytes after them; a lent result too
//!   large for its Write chunk (ERR_CHUNK).
//!
//! A handler whose lent results do not fit its reply gets its call answered with an RPC
//! SYSTEM_ERR reply (RFC 5531 section 9), and the connection serves on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig, ClientError};
use negotiate::onc::{self, CallHeader};
use negotiate::requester::RequesterConfig;
use negotiate::responder::ResponderConfig;
use negotiate::server::{LendReply, LentResults, Server, ServerConfig, ServerStats};
use rpcrdma_v1::ulb::{DdpItem, OpaqueAtUlb, UpperLayerBinding};
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

/// A binding whose replies carry two DDP-eligible opaques after the 24-byte accepted reply
/// header, then a trailing word: `maximum` is what the requester provides a Write chunk of
/// for each (none when 0).
struct TwoOpaques {
    maximum: usize,
}

impl UpperLayerBinding for TwoOpaques {
    fn call_ddp_items(&self, _: &[u8], _: &mut Vec<DdpItem>) {}
    fn reply_ddp_maxima(&self, _: &[u8], out: &mut Vec<usize>) {
        if self.maximum > 0 {
            out.extend([self.maximum, self.maximum]);
        }
    }
    fn max_reply_size(&self, _: &[u8]) -> usize {
        1 << 16
    }
    fn reply_ddp_items(&self, _: &[u8], reply: &[u8], reduced: usize, out: &mut Vec<DdpItem>) {
        let mut at = 24;
        for i in 0..2 {
            let Some(word) = reply.get(at..at + 4) else { return };
            let item = DdpItem::new(at + 4, u32::from_be_bytes(word.try_into().unwrap()) as usize);
            at = if i < reduced { item.offset } else { item.padded_end() };
            if at > reply.len() {
                return;
            }
            out.push(item);
        }
    }
}

const TRAILER: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];

/// The whole reply of two opaques and the trailer.
fn two_opaques(xid: u32, a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut results = Vec::new();
    for x in [a, b] {
        results.extend_from_slice(&(x.len() as u32).to_be_bytes());
        results.extend_from_slice(x);
        results.resize(results.len().next_multiple_of(4), 0);
    }
    results.extend_from_slice(&TRAILER);
    let mut r = Vec::new();
    onc::reply_success(xid, &results, &mut r);
    r
}

/// A server lending both opaques of every reply: `a` of 5,001 bytes and `b` of 0 or 3 (its
/// length the call's procedure number), the trailer after them in the reply it writes.
fn two_lent(a: Arc<[u8]>) -> Server {
    let handler = LendReply(move |call: &[u8], reply: &mut Vec<u8>, lent: &mut LentResults| {
        let (h, _) = CallHeader::decode(call).unwrap();
        let b: Arc<[u8]> = vec![0x77; h.proc as usize].into();
        let words = [a.len() as u32, b.len() as u32].map(u32::to_be_bytes).concat();
        onc::reply_success(h.xid, &[&words[..], &TRAILER].concat(), reply);
        lent.lend(a.clone());
        lent.lend(b);
    });
    let ulb = TwoOpaques { maximum: 8192 };
    Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), handler).unwrap()
}

/// Two lent results, the second of 0 or 3 bytes, a word of the reply after them: by Write
/// chunks, and put together (inline, with padding after each, over the server's reused reply
/// buffer) when the requester provides none.
#[test]
fn rfc8166_3_4_6_several_lent_results_with_reply_bytes_after_them() {
    let a: Arc<[u8]> = (0..5001).map(|i| (i % 251) as u8).collect::<Vec<_>>().into();
    let server = two_lent(a.clone());
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let mut xid = 0;
    for (ulb, b) in
        [(TwoOpaques { maximum: 8192 }, 3), (TwoOpaques { maximum: 8192 }, 0), (TwoOpaques { maximum: 0 }, 3)]
    {
        for _ in 0..4 {
            xid += 1;
            let got = client.call(&call(xid, b), &ulb).unwrap();
            assert_eq!(got, two_opaques(xid, &a, &vec![0x77; b as usize]), "call {xid}");
        }
    }
    let stats = settled(&server, 12);
    // By Write chunk: both results of 8 calls (a zero-length one is placed with no Write);
    // `a` copied once, `b` (a new Arc every call) four times, none when empty. Put together:
    // both results of 4 calls.
    assert_eq!((stats.lent_results, stats.write_chunk_results), (16, 16), "{stats:?}");
    assert_eq!(stats.lent_copies, 1 + 4 + 4 * 2, "{stats:?}");
    assert_eq!(stats.bad_replies, 0);
}

/// A Write chunk too small for the lent result: the reply is put together and cannot go
/// (RFC 8166 section 3.4.6: the result does not fit its chunk), so the requester gets
/// ERR_CHUNK (section 4.5.2's answer, 4.5 for the connection going on), and the next call,
/// with a chunk large enough, is served.
#[test]
fn rfc8166_4_5_a_lent_result_larger_than_its_write_chunk_is_answered_err_chunk() {
    let a: Arc<[u8]> = vec![5u8; 5000].into();
    let server = two_lent(a.clone());
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let small = TwoOpaques { maximum: 4096 };
    let refused = client.call(&call(1, 3), &small);
    assert!(matches!(refused, Err(ClientError::ChunksRefused { .. })), "{refused:?}");
    let got = client.call(&call(2, 3), &TwoOpaques { maximum: 8192 }).unwrap();
    assert_eq!(got, two_opaques(2, &a, &[0x77; 3]));
    assert_eq!(server.stats().errors_sent, 1);
}
