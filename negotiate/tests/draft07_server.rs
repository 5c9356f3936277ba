//! draft-ietf-nfsv4-rpcrdma-version-two-07 on a connection: a real [`Server`] whose responder
//! speaks -07 ([`ResponderConfig::draft07`]) serves a requester written here from the draft's
//! own marshaling (`rpcrdma_v2::draft07::marshal`), bytes only, over the in-process and TCP
//! backends. Each test names the section whose rule it checks.

use std::sync::Arc;
use std::time::Duration;

use negotiate::datapath::{send_error as post_raw, DataPathError, ReceivePool, Transport};
use negotiate::responder::ResponderConfig;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::header::ChunkLists;
use rpcrdma_v1::rt::{List, Seq};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrWriteChunk};
use rpcrdma_v2::draft07::header::{Header, HeaderType};
use rpcrdma_v2::draft07::marshal::{self, MessageType, NO_CHUNKS};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::HeaderLimits;
use rpcrdma_verbs::{Access, Backend, MemoryRegion, ProtectionDomain, QpCaps};

const T: Duration = Duration::from_secs(10);
/// The credits the server advertises (its default).
const ADVERTISED: u32 = 32;
/// Where the reply's `opaque<>` length word sits: [xid, msg_type, len, data...].
const REPLY_OPAQUE_AT: usize = 8;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

fn word(bytes: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap())
}

/// An RPC call message: XID, CALL (0), and how many words of result it asks for.
fn rpc_call(xid: u32, n: u32) -> Vec<u8> {
    words(&[xid, 0, n])
}

/// The handler's reply to [`rpc_call`]: XID, REPLY (1), an `opaque<>` of the `n` words asked
/// for, each its index mixed with the XID.
fn reply_for(call: &[u8]) -> Vec<u8> {
    let (xid, n) = (word(call, 0), word(call, 2));
    let mut w = vec![xid, 1, 4 * n];
    w.extend((0..n).map(|i| xid ^ i.wrapping_mul(0x9e37_79b9)));
    words(&w)
}

fn start<B: Backend + Clone>(backend: B, draft07: bool) -> Server {
    let cfg = ServerConfig::default().responder(ResponderConfig::default().draft07(draft07));
    let ulb =
        OpaqueAtUlb { call_opaque: None, reply_opaque: Some(REPLY_OPAQUE_AT), max_result: 1 << 16, max_reply: 1 << 16 };
    Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(ulb), |call: &[u8]| reply_for(call)).unwrap()
}

/// A requester written from the draft: raw Sends and Receives on one connection.
struct Requester<B: Backend> {
    conn: Transport<B>,
    pool: ReceivePool<B>,
    /// Messages received so far (this side's "Received message count", section 4.2.1).
    received: u32,
}

/// The credits this requester advertises.
const OURS: u32 = 8;

impl<B: Backend> Requester<B> {
    fn connect(backend: &B, server: &Server) -> Self {
        let pd = backend.alloc_pd().unwrap();
        let (qp, _) = backend.connect(&pd, &server.local_addr(), &[], QpCaps::default(), T).unwrap();
        let conn = Transport::new(pd, qp, T);
        let pool = ReceivePool::new(&conn, OURS as usize + 1, 1 << 16).unwrap();
        Requester { conn, pool, received: 0 }
    }

    /// The running total this side's headers carry: Received count plus advertised credits.
    fn credit(&self) -> u32 {
        self.received + OURS
    }

    fn send(&self, bytes: &[u8]) {
        post_raw(&self.conn, bytes).unwrap();
    }

    fn receive(&mut self) -> Vec<u8> {
        let m = self.pool.receive(&self.conn).unwrap().bytes;
        self.received += 1;
        m
    }

    fn call_inline(&self, xid: u32, chunks: &ChunkLists<'_>, message: &[u8]) {
        let mut send = vec![0u8; 4096 + message.len()];
        let n = marshal::call_inline(&mut send, xid, self.credit(), 0, chunks, message).unwrap();
        self.send(&send[..n]);
    }

    /// Nothing arrives within a short while.
    fn hears_nothing(&self) -> bool {
        matches!(self.pool.receive_within(&self.conn, Duration::from_millis(200)), Err(DataPathError::Timeout { .. }))
    }
}

/// Calls the server's handler ran.
fn served(server: &Server) -> u64 {
    let c = server.stats().calls;
    c.v1 + c.v2
}

fn parsed(bytes: &[u8]) -> Header<'_> {
    Header::parse(bytes, &HeaderLimits::default()).unwrap()
}

/// The code of an RDMA2_ERROR.
fn error_code(bytes: &[u8]) -> u32 {
    let h = parsed(bytes);
    assert_eq!(h.header_type(), HeaderType::Error, "{bytes:?}");
    match h.error().unwrap() {
        Rpcrdma2HdrError::Default { discriminant } | Rpcrdma2HdrError::RdmaMaxChunks { discriminant, .. } => {
            discriminant
        }
        Rpcrdma2HdrError::Rdma2ErrVers(_) => RDMA2_ERR_VERS,
        e => panic!("{e:?}"),
    }
}

/// Sections 4.3.3, 6.3.7, 6.3.10 and 4.2.1: a first message written in -07 settles the
/// connection on -07; each RDMA2_CALL_INLINE is answered by an RDMA2_REPLY_INLINE with the
/// call's XID, Version 2, the handler's reply as its payload, and in `rdma_credit` the
/// responder's running total (the calls it received plus the credits it advertises), which
/// grows by one per call. A -00 RDMA_MSG on that connection is then judged by -07's rules
/// (section 4.3.3: the dialect is kept): `rdma_htype` 0 is RDMA2_ERR_INVAL_HTYPE (7.2.3), and the
/// connection serves on.
fn calls_are_answered_reply_inline_with_running_totals<B: Backend + Clone>(backend: B) {
    let server = start(backend.clone(), true);
    let mut req = Requester::connect(&backend, &server);
    for (i, xid) in (0x70..0x74u32).enumerate() {
        let call = rpc_call(xid, 3 + i as u32);
        req.call_inline(xid, &NO_CHUNKS, &call);
        let reply = req.receive();
        let h = parsed(&reply);
        assert_eq!((h.header_type(), h.xid()), (HeaderType::ReplyInline, xid));
        assert_eq!(word(&reply, 1), 2, "rdma_vers");
        assert_eq!(h.credit(), i as u32 + 1 + ADVERTISED, "the responder's running total after {} calls", i + 1);
        assert!(h.chunk_lists().writes.is_empty());
        assert_eq!(h.payload(), &reply_for(&call)[..]);
    }
    // A -00 RDMA_MSG (rdma_proc 0, three empty lists, the call) on the -07 connection.
    let mut cel00 = words(&[0x75, 2, req.credit(), 0, 0, 0, 0]);
    cel00.extend(rpc_call(0x75, 1));
    req.send(&cel00);
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_INVAL_HTYPE, 0x75));
    let call = rpc_call(0x76, 2);
    req.call_inline(0x76, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
}

#[test]
fn draft07_4_3_3_calls_are_answered_reply_inline_with_running_totals_in_process() {
    calls_are_answered_reply_inline_with_running_totals(rpcrdma_verbs::InProcess);
}

#[test]
fn draft07_4_3_3_calls_are_answered_reply_inline_with_running_totals_over_tcp() {
    calls_are_answered_reply_inline_with_running_totals(rpcrdma_verbs::Tcp);
}

/// Section 6.3.2: an RDMA2_GRANT is taken without an answer, and it consumed a Receive: the
/// responder's total in its next reply counts it (GRANT, then a call: 2 received).
#[test]
fn draft07_6_3_2_a_grant_is_taken_silently_and_counted() {
    let server = start(rpcrdma_verbs::InProcess, true);
    let mut req = Requester::connect(&rpcrdma_verbs::InProcess, &server);
    // A call first: it settles the dialect (a GRANT alone would settle it too).
    let call = rpc_call(0x80, 1);
    req.call_inline(0x80, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).credit(), 1 + ADVERTISED);
    let mut grant = [0u8; 16];
    marshal::grant(&mut grant, req.credit()).unwrap();
    req.send(&grant);
    assert!(req.hears_nothing(), "a GRANT draws no answer");
    req.call_inline(0x81, &NO_CHUNKS, &rpc_call(0x81, 1));
    assert_eq!(parsed(&req.receive()).credit(), 3 + ADVERTISED, "the GRANT's Receive counted");
}

/// Section 7.2 (and 7.2.1): "The value of the rdma_xid field does not match the value of the
/// XID field in the accompanying RPC message" is an XDR error: RDMA2_ERR_BAD_XDR with the
/// message's XID, and the handler never sees the call. The connection serves on.
#[test]
fn draft07_7_2_1_an_rdma_xid_unlike_the_rpc_xid_is_bad_xdr() {
    let server = start(rpcrdma_verbs::InProcess, true);
    let mut req = Requester::connect(&rpcrdma_verbs::InProcess, &server);
    req.call_inline(0x90, &NO_CHUNKS, &rpc_call(0x91, 1));
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0), word(&err, 1)), (RDMA2_ERR_BAD_XDR, 0x90, 2));
    assert_eq!(served(&server), 0, "not passed to the RPC layer");
    let call = rpc_call(0x92, 1);
    req.call_inline(0x92, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
}

/// Sections 6.3.6, 6.3.9 and 7.1.4: a message other than the next part of a call being
/// continued breaks the sequence: RDMA2_ERR_INVAL_CONT with the offending message's XID; the
/// handler sees neither call, and the connection serves on.
#[test]
fn draft07_7_1_4_a_call_breaking_into_a_continued_one_is_inval_cont() {
    let server = start(rpcrdma_verbs::InProcess, true);
    let mut req = Requester::connect(&rpcrdma_verbs::InProcess, &server);
    // The first 16 bytes of a 32-byte call, 16 more said to come.
    let first = words(&[0xa0, 0, 0, 0]);
    let mut send = [0u8; 256];
    let n = marshal::middle(&mut send, 0xa0, req.credit(), MessageType::Call, 16, &first).unwrap();
    req.send(&send[..n]);
    assert!(req.hears_nothing(), "a MIDDLE part is held without an answer");
    req.call_inline(0xa1, &NO_CHUNKS, &rpc_call(0xa1, 1));
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_INVAL_CONT, 0xa1));
    assert_eq!(served(&server), 0);
    let call = rpc_call(0xa2, 1);
    req.call_inline(0xa2, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
}

/// Sections 4.5.2.1 and 6.3.10: a DDP-eligible result goes by RDMA Write, in its entirety,
/// into the Write chunk the call provided, and the RDMA2_REPLY_INLINE's Write list says how
/// much was written; the reduced reply follows inline.
#[test]
fn draft07_6_3_10_a_result_goes_in_the_write_chunk_provided() {
    let backend = rpcrdma_verbs::InProcess;
    let server = start(backend, true);
    let mut req = Requester::connect(&backend, &server);
    let sink = req.conn.pd().register(vec![0u8; 4096], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let seg = [XdrRdmaSegment { handle: sink.rkey(), length: 4096, offset: sink.addr() }];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&seg) }];
    let chunks = ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&writes), reply: None };
    let call = rpc_call(0xb0, 100);
    req.call_inline(0xb0, &chunks, &call);
    let reply = req.receive();
    let h = parsed(&reply);
    assert_eq!(h.header_type(), HeaderType::ReplyInline);
    let written: Vec<_> = h.chunk_lists().writes.iter().flat_map(|c| c.target.iter().collect::<Vec<_>>()).collect();
    assert_eq!(written.len(), 1);
    assert_eq!((written[0].handle, written[0].length), (sink.rkey(), 400), "the bytes written");
    let full = reply_for(&call);
    assert_eq!(h.payload(), &full[..12], "the reduced reply: the opaque's bytes left out");
    assert_eq!(sink.with(|b| b[..400].to_vec()), full[12..]);
}

/// Sections 6.3.8 and 6.6.3: a reply larger than the requester's inline threshold goes in the
/// Reply chunk it provided ("the Responder MUST use the Requester-provided Reply chunk"),
/// announced by an RDMA2_REPLY_EXTERNAL with no payload whose `rdma_xid` is the RPC reply's
/// XID.
#[test]
fn draft07_6_3_8_a_reply_over_the_inline_threshold_goes_external() {
    let backend = rpcrdma_verbs::InProcess;
    let server = start(backend, true);
    let mut req = Requester::connect(&backend, &server);
    let sink = req.conn.pd().register(vec![0u8; 8192], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let seg = [XdrRdmaSegment { handle: sink.rkey(), length: 8192, offset: sink.addr() }];
    let chunks = ChunkLists {
        reads: List::from_slice(&[]),
        writes: List::from_slice(&[]),
        reply: Some(XdrWriteChunk { target: Seq::from_slice(&seg) }),
    };
    // 1,500 words: more than the 1024-byte threshold of a connection without private data.
    let call = rpc_call(0xc0, 1500);
    req.call_inline(0xc0, &chunks, &call);
    let reply = req.receive();
    let h = parsed(&reply);
    assert_eq!((h.header_type(), h.xid(), h.payload().len()), (HeaderType::ReplyExternal, 0xc0, 0));
    let full = reply_for(&call);
    let target: Vec<_> = h.chunk_lists().reply.unwrap().target.iter().collect();
    assert_eq!(target[0].length as usize, full.len(), "the Reply chunk's length is the reply's");
    assert_eq!(sink.with(|b| b[..full.len()].to_vec()), full);
}

/// The dialect pairing of a -07 requester and a responder that speaks only -00 (issue 27,
/// docs/design.md "Version Two's two dialects"): the -07 first message draws -00's
/// RDMA_ERR_BAD_HEADER, which `dialect::after_refusal` reads as "the responder speaks the
/// other dialect".
#[test]
fn a_draft07_first_message_to_a_responder_of_00_only_draws_bad_header() {
    use rpcrdma_v2::dialect::{after_refusal, Dialect, Next, Speaks};
    let server = start(rpcrdma_verbs::InProcess, false);
    let mut req = Requester::connect(&rpcrdma_verbs::InProcess, &server);
    req.call_inline(0xd0, &NO_CHUNKS, &rpc_call(0xd0, 1));
    let err = req.receive();
    assert_eq!((word(&err, 0), word(&err, 1), word(&err, 3), word(&err, 4)), (0xd0, 2, 4, 2), "RDMA_ERROR, BAD_HEADER");
    let both = Speaks::both(Dialect::Ietf07);
    assert_eq!(after_refusal(&both, Dialect::Ietf07, &[], 0xd0, &err), Next::Retry(Some(Dialect::Cel00)));
    assert_eq!(after_refusal(&Speaks::one(Dialect::Ietf07), Dialect::Ietf07, &[], 0xd0, &err), Next::Retry(None));
}
