//! RFC 8797 and Version Two draft rules through the real connect path: a `Client` and a
//! `Server` over the in-process backend wrapped in `rpcrdma_verbs::capture::Captured`, so that
//! each test sees every Send as posted (its bytes, and the rkey a Send with Invalidate names)
//! beside what the client and the server report. Nothing here sets thresholds or reply
//! parameters directly: they come from the private data each side sends at connect (or
//! does not), and from the version the connection settles on.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use cm_private_data::{Flags, PrivateData};
use negotiate::client::{Client, ClientConfig, ClientStats};
use negotiate::server::{Server, ServerConfig, ServerStats};
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_verbs::capture::{Captured, CapturedMessage};
use rpcrdma_verbs::{Backend, InProcess};

const V1_ONLY: (Version, Version) = (Version::ONE, Version::ONE);
const V2_CAPABLE: (Version, Version) = (Version::ONE, Version::TWO);

/// RDMA_MSG and RDMA_NOMSG (`rdma_proc`, the same numbers in both versions).
const RDMA_MSG: u32 = 0;
const RDMA_NOMSG: u32 = 1;

/// The transport header of an RDMA_MSG with no chunks: XID, version, credits, procedure and
/// three empty chunk lists (RFC 8166 section 4; Version Two's is laid out the same).
const BARE_HEADER: usize = 28;

/// Calls and replies with no DDP-eligible item, and replies small enough to come back inline
/// under any threshold here: the call carries no Reply chunk, so its header is [`BARE_HEADER`].
const SMALL_REPLIES: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 64 };

/// Calls that provision a Reply chunk for replies of up to 8 KiB.
const LARGE_REPLIES: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 8192 };

/// Every Send: (endpoint, bytes, rkey invalidated).
type Sends = Arc<Mutex<Vec<(u64, Vec<u8>, Option<u32>)>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The in-process backend, capturing. The requester sends first (a connection's first message
/// is its call), so its queue pair is endpoint 1 and the server's endpoint 2, as long as one
/// client and one server use the backend.
fn captured() -> (Captured<InProcess>, Sends) {
    let sends: Sends = Arc::default();
    let s = sends.clone();
    let b = Captured::new(
        InProcess,
        Arc::new(move |m: &CapturedMessage<'_>| lock(&s).push((m.endpoint, m.bytes.to_vec(), m.invalidate))),
    );
    (b, sends)
}

const CLIENT: u64 = 1;
const SERVER: u64 = 2;

fn word(bytes: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap())
}

/// The Sends `endpoint` made whose XID is `xid`, oldest first: (bytes, rkey invalidated).
fn sent(sends: &Sends, endpoint: u64, xid: u32) -> Vec<(Vec<u8>, Option<u32>)> {
    lock(sends)
        .iter()
        .filter(|(e, b, _)| *e == endpoint && word(b, 0) == xid)
        .map(|(_, b, i)| (b.clone(), *i))
        .collect()
}

/// A call of `len` bytes in all: XID, CALL, the length of the reply wanted, then pattern bytes.
fn call(xid: u32, len: usize, reply_len: usize) -> Vec<u8> {
    let mut c = [xid, 0, reply_len as u32].iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
    c.extend((c.len()..len).map(|i| (i as u8) ^ (xid as u8)));
    c
}

/// The reply to a [`call`]: XID, REPLY, then pattern bytes up to the length the call asked for.
fn reply_to(call: &[u8]) -> Vec<u8> {
    let mut r = [word(call, 0), 1].iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
    r.extend((r.len()..word(call, 2) as usize).map(|i| (i as u8).wrapping_mul(3)));
    r
}

/// A server on `b` that answers each [`call`] with [`reply_to`] it.
fn server<B: Backend + Clone>(b: &B, cfg: ServerConfig) -> Server {
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 16 * 1024 };
    Server::start(b.clone(), b.any_address(), cfg, Arc::new(ulb), |c: &[u8]| reply_to(c)).unwrap()
}

/// Calls `c` and checks the reply.
#[track_caller]
fn call_ok<B: Backend>(client: &Client<B>, c: &[u8], ulb: &OpaqueAtUlb) {
    let reply = client.call(c, ulb).unwrap_or_else(|e| panic!("call {:#x}: {e}", word(c, 0)));
    assert_eq!(reply, reply_to(c), "the reply to call {:#x}", word(c, 0));
}

/// The server's counters once it has counted `calls` calls (it counts a call after its reply's
/// Send completed, which may be after the client has the reply): waits, bounded.
fn stats_after(server: &Server, calls: u64) -> ServerStats {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut s = server.stats();
    while s.calls.total() < calls && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
        s = server.stats();
    }
    assert_eq!(s.calls.total(), calls, "{s:?}");
    s
}

fn client_stats(short: u64, chunked: u64, long: u64) -> ClientStats {
    ClientStats { short, chunked, long, continued: 0, call_only: 0, backward_dropped: 0 }
}

// ---- RFC 8797 section 5.1 on Version One ----

/// RFC 8797 section 5.1 on a connection that settles on Version One, with one side sending no
/// private data (the other 8 KiB both ways): both thresholds are 1024. A call of exactly 1024
/// bytes goes inline; one of 1028 bytes (the next size an RPC message can have) goes Long, in
/// a Position-zero Read chunk; a 2000-byte reply comes back through the Reply chunk. For a
/// Version Two capable client the first call is the probe the server refuses with
/// RDMA_ERR_VERS, then the same call in Version One.
fn version_one_without_private_data_on_one_side(client_pd: Option<PrivateData>, server_pd: Option<PrivateData>) {
    for client_versions in [V1_ONLY, V2_CAPABLE] {
        let (b, sends) = captured();
        let server = server(&b, ServerConfig::default().versions(V1_ONLY).private_data(server_pd));
        let cfg = ClientConfig::default().versions(client_versions).private_data(client_pd);
        let client = Client::new(b.clone(), server.local_addr(), cfg);
        call_ok(&client, &call(1, 64, 64), &SMALL_REPLIES);
        assert_eq!(client.version(), Some(Version::ONE));
        assert_eq!(client.thresholds(), Some(InlineThresholds { call: 1024, reply: 1024 }), "{client_versions:?}");
        let first = client.stats().short;
        assert_eq!(first, if client_versions == V2_CAPABLE { 2 } else { 1 }, "the probe and the call again");

        call_ok(&client, &call(2, 1024 - BARE_HEADER, 64), &SMALL_REPLIES);
        let inline = sent(&sends, CLIENT, 2);
        assert_eq!(inline.len(), 1);
        assert_eq!((inline[0].0.len(), word(&inline[0].0, 1), word(&inline[0].0, 3)), (1024, 1, RDMA_MSG));
        call_ok(&client, &call(3, 1028 - BARE_HEADER, 64), &SMALL_REPLIES);
        let long = sent(&sends, CLIENT, 3);
        assert_eq!(long.len(), 1);
        assert_eq!((word(&long[0].0, 1), word(&long[0].0, 3)), (1, RDMA_NOMSG), "a Long call");
        assert_eq!((word(&long[0].0, 4), word(&long[0].0, 5)), (1, 0), "a Read chunk at position zero");
        assert_eq!(client.stats(), client_stats(first + 1, 0, 1));

        call_ok(&client, &call(4, 64, 2000), &LARGE_REPLIES);
        let s = stats_after(&server, 4);
        assert_eq!((s.long_calls, s.inline_replies, s.reply_chunk_replies), (1, 3, 1), "{s:?}");
        assert_eq!(s.calls.v1, 4);
        assert!(client.ended().is_empty(), "{:?}", client.ended());
    }
}

#[test]
fn rfc8797_5_1_version_one_responder_without_private_data_means_1024_both_ways() {
    version_one_without_private_data_on_one_side(Some(PrivateData::new(Flags::empty(), 8192, 8192)), None);
}

#[test]
fn rfc8797_5_1_version_one_requester_without_private_data_means_1024_both_ways() {
    version_one_without_private_data_on_one_side(None, Some(PrivateData::new(Flags::empty(), 8192, 8192)));
}

// ---- RFC 8797 section 4: reserved flag bits ----

/// Private data of 2048 bytes both ways, R clear, its seven reserved flag bits set to
/// `reserved` (0 to 127), as a peer that does not zero them would send it.
fn with_reserved_bits(reserved: u8) -> [u8; 8] {
    let mut bytes = PrivateData::new(Flags::empty(), 2048, 2048).encode();
    bytes[5] |= reserved << 1;
    bytes
}

/// RFC 8797 section 4: "Receivers MUST ignore" the reserved flag bits. For each of the 128
/// patterns a client sends 2048/2048 private data with those bits set (through the connect
/// path's `foreign_private_data`); the server decodes it as 2048/2048 with R clear, and its
/// 3000-byte reply goes through the Reply chunk (a server that dropped the private data for
/// its reserved bits would assume 4096 and send it inline).
#[test]
fn rfc8797_4_a_server_ignores_every_pattern_of_reserved_flag_bits() {
    let (b, _) = captured();
    let server = server(&b, ServerConfig::default().private_data(Some(PrivateData::new(Flags::empty(), 8192, 8192))));
    for reserved in 0..128u8 {
        let sent = with_reserved_bits(reserved);
        let cfg = ClientConfig::default().foreign_private_data(Some(sent));
        let client = Client::new(b.clone(), server.local_addr(), cfg);
        let before = server.stats();
        call_ok(&client, &call(1, 64, 64), &LARGE_REPLIES);
        call_ok(&client, &call(2, 64, 3000), &LARGE_REPLIES);
        let s = stats_after(&server, before.calls.total() + 2);
        let peer = server.peers().into_iter().find(|p| p.private_data.starts_with(&sent)).expect("its connection");
        assert_eq!(peer.advertised.requester, Some(PrivateData::new(Flags::empty(), 2048, 2048)), "{reserved:#09b}");
        assert_eq!(s.reply_chunk_replies - before.reply_chunk_replies, 1, "reserved bits {reserved:#09b}: {s:?}");
        assert_eq!(s.inline_replies - before.inline_replies, 1, "reserved bits {reserved:#09b}: {s:?}");
    }
}

/// RFC 8797 section 4, the other way: a server sends 2048/2048 private data with each of the
/// 128 patterns of reserved flag bits set; the client's thresholds are 2048 both ways (not
/// Version Two's 4096), and its 3000-byte call goes Long.
#[test]
fn rfc8797_4_a_client_ignores_every_pattern_of_reserved_flag_bits() {
    let patterns: Vec<u8> = (0..128).collect();
    std::thread::scope(|s| {
        for some in patterns.chunks(16) {
            s.spawn(move || {
                for &reserved in some {
                    let (b, _) = captured();
                    let cfg = ServerConfig::default().foreign_private_data(Some(with_reserved_bits(reserved)));
                    let server = server(&b, cfg);
                    let client = Client::new(b.clone(), server.local_addr(), ClientConfig::default());
                    call_ok(&client, &call(1, 64, 64), &SMALL_REPLIES);
                    let t = client.thresholds();
                    assert_eq!(t, Some(InlineThresholds { call: 2048, reply: 2048 }), "reserved bits {reserved:#09b}");
                    call_ok(&client, &call(2, 3000, 64), &SMALL_REPLIES);
                    assert_eq!(client.stats(), client_stats(1, 0, 1), "reserved bits {reserved:#09b}");
                    assert_eq!(stats_after(&server, 2).long_calls, 1);
                }
            });
        }
    });
}

// ---- RFC 8797 section 4.1: the R flag ----

/// RFC 8797 section 4.1, all four pairs of R flags, on each version: the requester's call has
/// one Write chunk (one rkey, which belongs to that call alone) and the responder's reply is a
/// Send with Invalidate of exactly that rkey when both sides set R, and a plain Send otherwise
/// ("When either peer clears the R flag, the responder uses only RDMA Send"). The flags travel
/// in the private data each side sends at connect.
#[test]
fn rfc8797_4_1_the_reply_invalidates_the_calls_rkey_only_when_both_sides_set_the_r_flag() {
    // XID, REPLY, then an opaque<> the responder writes into the call's Write chunk.
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 8192, max_reply: 64 };
    let pd = |r: bool| Some(PrivateData::new(if r { Flags::REMOTE_INVALIDATE } else { Flags::empty() }, 4096, 4096));
    for versions in [V1_ONLY, V2_CAPABLE] {
        for (client_r, server_r) in [(false, false), (false, true), (true, false), (true, true)] {
            let case = format!("client R {client_r}, server R {server_r}, versions {versions:?}");
            let (b, sends) = captured();
            let cfg = ServerConfig::default().versions(versions).private_data(pd(server_r));
            let server = Server::start(b.clone(), b.any_address(), cfg, Arc::new(ulb), |c: &[u8]| {
                let mut r = [&c[..4], &[0, 0, 0, 1][..], &4096u32.to_be_bytes()[..]].concat();
                r.resize(12 + 4096, 0x5a);
                r
            })
            .unwrap();
            let client =
                Client::new(b.clone(), server.local_addr(), ClientConfig::default().private_data(pd(client_r)));
            for xid in [1, 2] {
                let reply = client.call(&call(xid, 16, 0), &ulb).unwrap_or_else(|e| panic!("{case}: {e}"));
                assert_eq!((reply.len(), reply[12..].iter().all(|&x| x == 0x5a)), (12 + 4096, true), "{case}");
            }
            assert_eq!(client.version(), Some(versions.1), "{case}");
            // The second call's header: an empty Read list, then one Write chunk of one segment.
            let calls = sent(&sends, CLIENT, 2);
            assert_eq!(calls.len(), 1, "{case}");
            let c = &calls[0].0;
            assert_eq!((word(c, 3), word(c, 4), word(c, 5), word(c, 6)), (RDMA_MSG, 0, 1, 1), "{case}");
            let rkey = word(c, 7);
            let replies = sent(&sends, SERVER, 2);
            assert_eq!(replies.len(), 1, "{case}");
            let want = (client_r && server_r).then_some(rkey);
            assert_eq!(replies[0].1, want, "{case}: the reply's invalidation");
            assert_eq!(stats_after(&server, 2).write_chunk_results, 2, "{case}");
            assert!(client.ended().is_empty(), "{case}: {:?}", client.ended());
        }
    }
}

/// The defaults set the R flag on both sides, as the Linux client and server do (RFC 8797
/// section 4.1): a call whose one Write chunk has one rkey is answered with a Send with
/// Invalidate naming that rkey, and the client's call ends without a Local Invalidate.
#[test]
fn rfc8797_4_1_by_default_both_sides_set_the_r_flag_and_the_reply_invalidates() {
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 8192, max_reply: 64 };
    let (b, sends) = captured();
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ulb), |c: &[u8]| {
        let mut r = [&c[..4], &[0, 0, 0, 1][..], &4096u32.to_be_bytes()[..]].concat();
        r.resize(12 + 4096, 0x5a);
        r
    })
    .unwrap();
    let client = Client::new(b.clone(), server.local_addr(), ClientConfig::default());
    let reply = client.call(&call(1, 16, 0), &ulb).unwrap();
    assert_eq!((reply.len(), reply[12..].iter().all(|&x| x == 0x5a)), (12 + 4096, true));
    let calls = sent(&sends, CLIENT, 1);
    let c = &calls[0].0;
    assert_eq!((word(c, 4), word(c, 5), word(c, 6)), (0, 1, 1), "one Write chunk of one segment");
    assert_eq!(sent(&sends, SERVER, 1)[0].1, Some(word(c, 7)), "the reply invalidates the Write chunk's rkey");
}

/// Issue 25, data in place: a client keeps one protection domain across its connections. The
/// server goes away and another listens at the same address; the client's next calls reconnect,
/// in the protection domain its first connection was made in.
#[test]
fn a_client_keeps_its_protection_domain_across_reconnects() {
    let addr = "inproc:connect-path-one-pd";
    let plain = |c: &[u8]| reply_to(c);
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 16 * 1024 };
    let first = Server::start(InProcess, addr, ServerConfig::default(), Arc::new(ulb), plain).unwrap();
    let (b, _) = captured();
    let client = Client::new(b.clone(), addr, ClientConfig::default());
    call_ok(&client, &call(1, 16, 32), &SMALL_REPLIES);
    drop(first);
    let _second = Server::start(InProcess, addr, ServerConfig::default(), Arc::new(ulb), plain).unwrap();
    // The call across the drop may fail with the lost connection; the next one reconnects.
    let _ = client.call(&call(2, 16, 32), &SMALL_REPLIES);
    call_ok(&client, &call(3, 16, 32), &SMALL_REPLIES);
    assert_eq!(client.ended().len(), 1, "one connection ended, a second made: {:?}", client.ended());
    assert_eq!(b.protection_domains(), 1, "one protection domain for both connections");
}

// ---- Version Two draft sections 2.3 and 5 ----

/// Draft section 2.3: with no private data on either side a Version Two connection's
/// thresholds are 4096 both ways, and a receiver takes a 4096-byte message into its
/// 4096-byte Receive: a 4096-byte call goes inline (the Send is 4096 bytes) and is served, a
/// larger one goes Long; a 4096-byte reply comes back inline, a larger one through the Reply
/// chunk. "Larger" is 4100 bytes: a transport header and an RPC message are XDR, a multiple
/// of four bytes each (the client refuses a 4069-byte RPC message, which would make 4097), so
/// 4100 is the smallest message over the threshold.
#[test]
fn draft_2_3_a_4096_byte_message_goes_inline_into_a_4096_byte_receive_and_a_4100_byte_one_by_chunk() {
    let (b, sends) = captured();
    let server = server(&b, ServerConfig::default().private_data(None));
    let client = Client::new(b.clone(), server.local_addr(), ClientConfig::default().private_data(None));
    call_ok(&client, &call(1, 64, 64), &SMALL_REPLIES);
    assert_eq!(client.version(), Some(Version::TWO));
    assert_eq!(client.thresholds(), Some(InlineThresholds { call: 4096, reply: 4096 }));

    call_ok(&client, &call(2, 4096 - BARE_HEADER, 64), &SMALL_REPLIES);
    let c = &sent(&sends, CLIENT, 2)[0].0;
    assert_eq!((c.len(), word(c, 1), word(c, 3)), (4096, 2, RDMA_MSG), "the whole call in one 4096-byte Send");
    call_ok(&client, &call(3, 4100 - BARE_HEADER, 64), &SMALL_REPLIES);
    let c = &sent(&sends, CLIENT, 3)[0].0;
    assert_eq!((word(c, 3), word(c, 4), word(c, 5)), (RDMA_NOMSG, 1, 0), "Long: a Position-zero Read chunk");
    assert_eq!(client.stats(), client_stats(2, 0, 1));

    // These calls provide a Reply chunk of one segment, which the reply's header carries
    // whatever its form (inline, unused): 20 bytes more than a bare header.
    let reply_header = BARE_HEADER + 20;
    call_ok(&client, &call(4, 64, 4096 - reply_header), &LARGE_REPLIES);
    let r = &sent(&sends, SERVER, 4)[0].0;
    assert_eq!((r.len(), word(r, 3)), (4096, RDMA_MSG), "the whole reply in one 4096-byte Send");
    call_ok(&client, &call(5, 64, 4100 - reply_header), &LARGE_REPLIES);
    let r = &sent(&sends, SERVER, 5)[0].0;
    assert_eq!((r.len(), word(r, 3)), (reply_header, RDMA_NOMSG), "the header alone: the reply in the Reply chunk");
    let s = stats_after(&server, 5);
    assert_eq!((s.long_calls, s.inline_replies, s.reply_chunk_replies), (1, 4, 1), "{s:?}");
    assert!(client.ended().is_empty(), "{:?}", client.ended());
}

/// Draft section 5: "this initial message can be no larger than the Version One default
/// inline threshold of 1024 bytes". A Version Two client's first call of 2000 bytes (which
/// Version Two's 4096-byte threshold would carry inline) goes Long: an RDMA_NOMSG in Version
/// Two whose Send fits 1024 bytes, the call in a Position-zero Read chunk. The same call made
/// again once the connection settled goes inline.
#[test]
fn draft_5_a_first_call_over_1024_bytes_goes_long_in_a_position_zero_read_chunk() {
    let (b, sends) = captured();
    let server = server(&b, ServerConfig::default());
    let client = Client::new(b.clone(), server.local_addr(), ClientConfig::default());
    call_ok(&client, &call(1, 2000, 64), &SMALL_REPLIES);
    let first = lock(&sends).iter().find(|(e, _, _)| *e == CLIENT).cloned().expect("the client's first Send");
    let p = &first.1;
    assert_eq!((word(p, 0), word(p, 1), word(p, 3)), (1, 2, RDMA_NOMSG), "the first message: version 2, Long");
    assert!(p.len() <= 1024, "{} bytes", p.len());
    assert_eq!((word(p, 4), word(p, 5), word(p, 7)), (1, 0, 2000), "a Position-zero Read chunk of the whole call");
    assert_eq!(sent(&sends, CLIENT, 1).len(), 1, "sent once");
    assert_eq!(client.version(), Some(Version::TWO));
    assert_eq!(client.thresholds(), Some(InlineThresholds { call: 4096, reply: 4096 }));
    call_ok(&client, &call(2, 2000, 64), &SMALL_REPLIES);
    let again = &sent(&sends, CLIENT, 2)[0].0;
    assert_eq!((again.len(), word(again, 3)), (BARE_HEADER + 2000, RDMA_MSG), "settled: inline");
    assert_eq!(client.stats(), client_stats(1, 0, 1));
    let s = stats_after(&server, 2);
    assert_eq!((s.long_calls, s.calls.v2), (1, 2), "{s:?}");
}
