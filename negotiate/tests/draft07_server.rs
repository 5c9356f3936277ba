//! draft-ietf-nfsv4-rpcrdma-version-two-07 on a connection: a real [`Server`] whose responder
//! speaks -07 ([`ResponderConfig::draft07`]) serves a requester written here from the draft's
//! own marshaling (`rpcrdma_v2::draft07::marshal`), bytes only, over the in-process and TCP
//! backends. Each test names the section whose rule it checks.

use std::sync::Arc;

use cm_private_data::{Flags, PrivateData};
use std::time::Duration;

use negotiate::datapath::{send_error as post_raw, DataPathError, ReceivePool, Transport};
use negotiate::limits::ServerLimits;
use negotiate::responder::ResponderConfig;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::header::{ChunkLists, Fixed};
use rpcrdma_v1::rt::{List, Seq};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrReadChunk, XdrWriteChunk};
use rpcrdma_v2::draft07::header::{Header, HeaderType};
use rpcrdma_v2::draft07::marshal::{self, MessageType, NO_CHUNKS};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::HeaderLimits;
use rpcrdma_verbs::{Access, Backend, MemoryRegion, Opcode, ProtectionDomain, QpCaps, QueuePair};

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
    start_with(backend, ResponderConfig::default().draft07(draft07))
}

fn start_with<B: Backend + Clone>(backend: B, responder: ResponderConfig) -> Server {
    let cfg = ServerConfig::default().responder(responder);
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
    /// The server's RDMA2_CONNPROP_FINAL, once it came (section 6.3.4: each peer sends one,
    /// unasked), and the count of messages received when it did.
    server_props: Option<(Vec<u8>, u32)>,
}

/// The credits this requester advertises.
const OURS: u32 = 8;

impl<B: Backend> Requester<B> {
    fn connect(backend: &B, server: &Server) -> Self {
        Self::connect_from(backend, server, backend.alloc_pd().unwrap())
    }

    /// A connection made with protection domain `pd`: on the in-process backend the server
    /// knows the requester by it (`ConnectRequest::peer`), as it knows a host by its address.
    fn connect_from(backend: &B, server: &Server, pd: B::Pd) -> Self {
        let (qp, _) = backend.connect(&pd, &server.local_addr(), &[], QpCaps::default(), T).unwrap();
        let conn = Transport::new(pd, qp, T);
        let pool = ReceivePool::new(&conn, OURS as usize + 1, 1 << 16).unwrap();
        Requester { conn, pool, received: 0, server_props: None }
    }

    /// The running total this side's headers carry: Received count plus advertised credits.
    fn credit(&self) -> u32 {
        self.received + OURS
    }

    fn send(&self, bytes: &[u8]) {
        post_raw(&self.conn, bytes).unwrap();
    }

    fn receive(&mut self) -> Vec<u8> {
        self.receive_invalidating().0
    }

    /// The next message, and the handle its Send With Invalidate invalidated, if it was one.
    /// The server's first RDMA2_CONNPROP_FINAL is kept aside ([`Requester::server_props`]),
    /// not returned: a second one is.
    fn receive_invalidating(&mut self) -> (Vec<u8>, Option<u32>) {
        loop {
            let m = self.pool.receive(&self.conn).unwrap();
            self.received += 1;
            if self.server_props.is_none() && Fixed::read(&m.bytes).and_then(|f| f.proc) == Some(RDMA2_CONNPROP_FINAL) {
                self.server_props = Some((m.bytes, self.received));
                continue;
            }
            return (m.bytes, m.invalidated_rkey);
        }
    }

    fn call_inline(&self, xid: u32, chunks: &ChunkLists<'_>, message: &[u8]) {
        self.call_inline_inv(xid, 0, chunks, message);
    }

    /// An RDMA2_CALL_INLINE whose `rdma_inv_handle` is `inv`.
    fn call_inline_inv(&self, xid: u32, inv: u32, chunks: &ChunkLists<'_>, message: &[u8]) {
        let mut send = vec![0u8; 4096 + message.len()];
        let n = marshal::call_inline(&mut send, xid, self.credit(), inv, chunks, message).unwrap();
        self.send(&send[..n]);
    }

    /// An RDMA2_CALL_EXTERNAL of a 5000-byte call `xid`, the whole call in its Call chunk
    /// (section 6.3.5): the call, and the region the server reads it from (kept until its
    /// reply).
    fn call_external(&self, xid: u32) -> (Vec<u8>, B::Region) {
        let mut call = rpc_call(xid, 2);
        call.resize(5000, 0);
        let source = self.conn.pd().register(call.clone(), Access::REMOTE_READ).unwrap();
        let seg = XdrRdmaSegment { handle: source.rkey(), length: call.len() as u32, offset: source.addr() };
        let chunk = [XdrReadChunk { position: 0, target: seg }];
        let mut send = [0u8; 256];
        let n = marshal::call_external(&mut send, xid, self.credit(), 0, List::from_slice(&chunk), &NO_CHUNKS).unwrap();
        self.send(&send[..n]);
        (call, source)
    }

    /// Nothing arrives within a short while; the server's first RDMA2_CONNPROP_FINAL, which it
    /// sends once the connection speaks -07 whatever else happens, is kept aside as
    /// [`Requester::receive`] keeps it.
    fn hears_nothing(&mut self) -> bool {
        loop {
            let m = match self.pool.receive_within(&self.conn, Duration::from_millis(200)) {
                Err(DataPathError::Timeout { .. }) => return true,
                Err(_) => return false,
                Ok(m) => m,
            };
            self.received += 1;
            if self.server_props.is_some() || Fixed::read(&m.bytes).and_then(|f| f.proc) != Some(RDMA2_CONNPROP_FINAL) {
                return false;
            }
            self.server_props = Some((m.bytes, self.received));
        }
    }
}

/// Calls the server's handler ran.
fn served(server: &Server) -> u64 {
    let c = server.stats().calls;
    c.v1 + c.v2
}

/// Whether the handler's runs reach `n` within a second (a call is counted once its reply's
/// Send completed, which may be after the requester has the reply), and stay there.
fn served_eventually(server: &Server, n: u64) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while served(server) < n && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(20));
    served(server) == n
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
        Rpcrdma2HdrError::Rdma2ErrReplyResource(_) => RDMA2_ERR_REPLY_RESOURCE,
        e => panic!("{e:?}"),
    }
}

/// Sections 4.3.3, 6.3.7, 6.3.10 and 4.2.1: a first message written in -07 settles the
/// connection on -07; each RDMA2_CALL_INLINE is answered by an RDMA2_REPLY_INLINE with the
/// call's XID, Version 2, the handler's reply as its payload, and in `rdma_credit` the
/// responder's running total (the calls it received plus the credits it advertises), which
/// grows by one per call. A -00 RDMA_MSG on that connection is then judged by -07's rules
/// (section 4.3.3: the dialect is kept): `rdma_htype` 0 is RDMA2_ERR_INVAL_HTYPE (7.1.3), and the
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
    // Held: answered only by the GRANT that lets the requester send past its first message.
    assert_eq!(parsed(&req.receive()).header_type(), HeaderType::Grant);
    assert!(req.hears_nothing(), "nothing more for a part held");
    req.call_inline(0xa1, &NO_CHUNKS, &rpc_call(0xa1, 1));
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_INVAL_CONT, 0xa1));
    assert_eq!(served(&server), 0);
    let call = rpc_call(0xa2, 1);
    req.call_inline(0xa2, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
}

/// Sections 4.1, 6.3.6 and 6.3.7: a call sent as RDMA2_CALL_MIDDLE parts and a final
/// RDMA2_CALL_INLINE, each Send of 1024 bytes at most, is reassembled in XDR stream order and
/// served once, whole, and every part's Receive counts in the responder's running total. The
/// requester keeps to its credits: its first part is the one message it may send before the
/// server's first header, and the server's RDMA2_GRANT lets the rest go (4.2.1, 4.2.1.1).
fn continued_call_is_reassembled_and_served<B: Backend + Clone>(backend: B) {
    let server = start(backend.clone(), true);
    let mut req = Requester::connect(&backend, &server);
    // A 3,000-byte call: [xid, 0, n = 0 words asked], then filler the reply does not echo.
    let mut call = rpc_call(0xe0, 0);
    call.extend((0..747u32).flat_map(|i| (i ^ 0xe0).to_be_bytes()));
    assert_eq!(call.len(), 3000);
    let parts = marshal::sends(0xe0, req.credit(), 0, &NO_CHUNKS, &call, 1024).unwrap();
    assert!(parts.len() >= 3, "{} parts", parts.len());
    for (i, p) in parts.iter().enumerate() {
        let h = parsed(p);
        let want = if i + 1 < parts.len() { HeaderType::CallMiddle } else { HeaderType::CallInline };
        assert_eq!(h.header_type(), want);
        req.send(p);
        if i == 0 {
            // Section 4.2.1: before the server's first header the requester may send one
            // message; the server's GRANT (4.2.1.1, 6.3.2: XID zero) opens its window for
            // the rest: one part received, the credits it advertises.
            let grant = req.receive();
            let g = parsed(&grant);
            assert_eq!((g.header_type(), g.xid(), g.credit()), (HeaderType::Grant, 0, 1 + ADVERTISED));
        }
    }
    let reply = req.receive();
    let h = parsed(&reply);
    assert_eq!((h.header_type(), h.xid()), (HeaderType::ReplyInline, 0xe0), "{reply:?}");
    assert_eq!(h.payload(), &reply_for(&call)[..]);
    assert!(served_eventually(&server, 1), "served once, whole");
    // The running total counted every part's Receive.
    assert_eq!(h.credit(), parts.len() as u32 + ADVERTISED);
}

#[test]
fn draft07_4_1_a_continued_call_is_reassembled_and_served() {
    continued_call_is_reassembled_and_served(rpcrdma_verbs::InProcess);
}

/// Sections 4.1 and 7.4.1: a continued call longer than the server holds
/// (`ResponderConfig::max_continued`) is refused with RDMA2_ERR_SYSTEM as soon as a part says
/// so, its later parts are dropped silently (7.1.4's rule for a refused sequence), and the
/// connection serves on.
#[test]
fn draft07_7_4_1_a_continued_call_beyond_the_limit_is_err_system() {
    let backend = rpcrdma_verbs::InProcess;
    let cfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true).max_continued(2048));
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1 << 16 };
    let server = Server::start(backend, backend.any_address(), cfg, Arc::new(ulb), |c: &[u8]| reply_for(c)).unwrap();
    let mut req = Requester::connect(&backend, &server);
    let mut call = rpc_call(0xe8, 0);
    call.resize(4000, 0);
    let parts = marshal::sends(0xe8, req.credit(), 0, &NO_CHUNKS, &call, 1024).unwrap();
    for p in &parts {
        req.send(p);
    }
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_SYSTEM, 0xe8));
    assert!(req.hears_nothing(), "one answer for the whole sequence");
    assert_eq!(served(&server), 0);
    let small = rpc_call(0xe9, 1);
    req.call_inline(0xe9, &NO_CHUNKS, &small);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&small)[..]);
}

/// Section 7.4.1 (RDMA2_ERR_SYSTEM, the responder's own shortage) and the server's memory
/// budget (`ServerLimits::memory_budget`): a continued call, once reassembled, is counted
/// against the budget while it is served; one that does not fit is refused with
/// RDMA2_ERR_SYSTEM, never served, counted in `refused.memory`, and the connection serves on.
/// Before: its memory was charged whatever the budget held, so continued calls kept in
/// progress could hold more than the budget says the server ever will (found by a reading of
/// the code).
#[test]
fn draft07_7_4_1_a_continued_call_beyond_the_memory_budget_is_err_system() {
    let backend = rpcrdma_verbs::InProcess;
    // A budget the connection's own Receives already fill (they are counted whatever it holds):
    // nothing a call brings fits.
    let cfg = ServerConfig::default()
        .responder(ResponderConfig::default().draft07(true))
        .limits(ServerLimits::default().memory_budget(1));
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1 << 16 };
    let server = Server::start(backend, backend.any_address(), cfg, Arc::new(ulb), |c: &[u8]| reply_for(c)).unwrap();
    let mut req = Requester::connect(&backend, &server);
    let mut call = rpc_call(0xea, 0);
    call.resize(3000, 0);
    let parts = marshal::sends(0xea, req.credit(), 0, &NO_CHUNKS, &call, 1024).unwrap();
    for (i, p) in parts.iter().enumerate() {
        req.send(p);
        if i == 0 {
            let grant = req.receive();
            assert_eq!(parsed(&grant).header_type(), HeaderType::Grant);
        }
    }
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_SYSTEM, 0xea));
    assert_eq!(served(&server), 0, "never served");
    // (The server counts an answer once it is sent, which may be after the requester has it.)
    let deadline = std::time::Instant::now() + T;
    while server.stats().errors_sent == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = server.stats();
    assert_eq!((stats.refused.memory, stats.errors_sent), (1, 1), "{stats:?}");
    // An inline call needs nothing of the budget: served.
    let small = rpc_call(0xeb, 1);
    req.call_inline(0xeb, &NO_CHUNKS, &small);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&small)[..]);
}

/// Section 6.3.5: an RDMA2_CALL_EXTERNAL's whole RPC call is in its Call chunk; the server
/// reads it from there (RDMA Read) and serves it.
fn external_call_is_read_from_its_call_chunk_and_served<B: Backend + Clone>(backend: B) {
    let server = start(backend.clone(), true);
    let mut req = Requester::connect(&backend, &server);
    let (call, _source) = req.call_external(0xf0);
    let reply = req.receive();
    let h = parsed(&reply);
    assert_eq!((h.header_type(), h.xid()), (HeaderType::ReplyInline, 0xf0), "{reply:?}");
    assert_eq!(h.payload(), &reply_for(&call)[..]);
    assert!(served_eventually(&server, 1));
}

#[test]
fn draft07_6_3_5_an_external_call_is_read_from_its_call_chunk_and_served() {
    external_call_is_read_from_its_call_chunk_and_served(rpcrdma_verbs::InProcess);
}

/// Section 6.5: a call whose `rdma_inv_handle` names one of its own handles (here its Write
/// chunk's) is answered by a Send With Invalidate of exactly that handle; one naming a handle
/// the call does not carry, or zero, by a plain Send.
fn remote_invalidation_follows_rdma_inv_handle<B: Backend + Clone>(backend: B) {
    let server = start(backend.clone(), true);
    let mut req = Requester::connect(&backend, &server);
    for (xid, solicited) in [(0x160u32, true), (0x161, false), (0x162, false)] {
        // A memory window: the kind of key a Send With Invalidate may name.
        let sink = req.conn.pd().register(vec![0u8; 4096], Access::LOCAL_WRITE).unwrap();
        let window = req.conn.qp().post_bind_window(xid.into(), &sink, 0, 4096, Access::REMOTE_WRITE).unwrap();
        assert_eq!(req.conn.qp().wait_cq(T).map(|c| c.opcode), Some(Opcode::BindWindow));
        let seg = [XdrRdmaSegment { handle: window.rkey, length: 4096, offset: window.addr }];
        let writes = [XdrWriteChunk { target: Seq::from_slice(&seg) }];
        let chunks = ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&writes), reply: None };
        let inv = match xid {
            0x160 => window.rkey,
            0x161 => window.rkey ^ 0x5a5a, // not a handle of this call
            _ => 0,
        };
        req.call_inline_inv(xid, inv, &chunks, &rpc_call(xid, 10));
        let (reply, invalidated) = req.receive_invalidating();
        assert_eq!(parsed(&reply).header_type(), HeaderType::ReplyInline);
        assert_eq!(invalidated, solicited.then_some(window.rkey), "call {xid:#x}");
        assert_eq!(sink.with(|b| b[..40].to_vec()), reply_for(&rpc_call(xid, 10))[12..]);
    }
}

#[test]
fn draft07_6_5_remote_invalidation_follows_rdma_inv_handle() {
    remote_invalidation_follows_rdma_inv_handle(rpcrdma_verbs::InProcess);
}

/// Sections 4.5.2.1 and 6.3.10: a DDP-eligible result goes by RDMA Write, in its entirety,
/// into the Write chunk the call provided, and the RDMA2_REPLY_INLINE's Write list says how
/// much was written; the reduced reply follows inline.
fn result_goes_in_the_write_chunk_provided<B: Backend + Clone>(backend: B) {
    let server = start(backend.clone(), true);
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

#[test]
fn draft07_6_3_10_a_result_goes_in_the_write_chunk_provided() {
    result_goes_in_the_write_chunk_provided(rpcrdma_verbs::InProcess);
}

/// Sections 6.3.8 and 6.6.3: a reply larger than the requester's inline threshold goes in the
/// Reply chunk it provided ("the Responder MUST use the Requester-provided Reply chunk"),
/// announced by an RDMA2_REPLY_EXTERNAL with no payload whose `rdma_xid` is the RPC reply's
/// XID.
fn reply_over_the_inline_threshold_goes_external<B: Backend + Clone>(backend: B) {
    let server = start(backend.clone(), true);
    let mut req = Requester::connect(&backend, &server);
    let sink = req.conn.pd().register(vec![0u8; 8192], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let seg = [XdrRdmaSegment { handle: sink.rkey(), length: 8192, offset: sink.addr() }];
    let chunks = ChunkLists {
        reads: List::from_slice(&[]),
        writes: List::from_slice(&[]),
        reply: Some(XdrWriteChunk { target: Seq::from_slice(&seg) }),
    };
    // 1,500 words: more than the 4096-byte threshold of Version Two without private data.
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

#[test]
fn draft07_6_3_8_a_reply_over_the_inline_threshold_goes_external() {
    reply_over_the_inline_threshold_goes_external(rpcrdma_verbs::InProcess);
}

/// Sections 6.6.4 and 7.3.5: a reply that fits neither the requester's Receives nor a Reply
/// chunk (none was provided) is not refused with RDMA2_ERR_REPLY_RESOURCE: "the Responder
/// SHOULD use Message Continuation", and the server can, so the reply comes as an
/// RDMA2_REPLY_MIDDLE part and a final RDMA2_REPLY_INLINE whose payloads together are the
/// reply; the connection serves on.
#[test]
fn draft07_6_6_4_a_reply_with_nowhere_else_to_go_continues() {
    let backend = rpcrdma_verbs::InProcess;
    let server = start(backend, true);
    let mut req = Requester::connect(&backend, &server);
    let big = rpc_call(0x100, 1500);
    req.call_inline(0x100, &NO_CHUNKS, &big);
    let (first, last) = (req.receive(), req.receive());
    let (h1, h2) = (parsed(&first), parsed(&last));
    assert_eq!((h1.header_type(), h2.header_type()), (HeaderType::ReplyMiddle, HeaderType::ReplyInline));
    assert_eq!((h1.xid(), h2.xid()), (0x100, 0x100));
    let whole = [h1.payload(), h2.payload()].concat();
    assert_eq!(h1.remaining(), Some(h2.payload().len() as u32), "what the final part carries");
    assert_eq!(whole, reply_for(&big));
    let call = rpc_call(0x101, 1);
    req.call_inline(0x101, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
}

/// Section 7.3.5: "If a Responder cannot send an RPC Reply using Message Continuation and the
/// Reply does not fit in the Reply chunk, the Responder MUST set the rdma_err field to
/// RDMA2_ERR_REPLY_RESOURCE" with the bytes needed. A server that sends a reply in one Send at
/// most (`ResponderConfig::max_reply_parts` 1) cannot; nor can one whose limit the reply's
/// parts would pass (a 10 KB reply in 4096-byte Receives takes 3, beyond 2). The connection
/// serves on.
#[test]
fn draft07_7_3_5_a_reply_that_cannot_continue_is_reply_resource() {
    let backend = rpcrdma_verbs::InProcess;
    for (most, len) in [(1, 1500), (2, 2500)] {
        let server = start_with(backend, ResponderConfig::default().draft07(true).max_reply_parts(most));
        let mut req = Requester::connect(&backend, &server);
        req.call_inline(0x100, &NO_CHUNKS, &rpc_call(0x100, len));
        let err = req.receive();
        let h = parsed(&err);
        let Some(Rpcrdma2HdrError::Rdma2ErrReplyResource(need)) = h.error() else { panic!("{most}: {err:?}") };
        assert_eq!(h.xid(), 0x100);
        assert!(need as usize >= reply_for(&rpc_call(0x100, len)).len(), "{need}");
        let call = rpc_call(0x101, 1);
        req.call_inline(0x101, &NO_CHUNKS, &call);
        assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
    }
}

/// Section 7.3.4: a Write chunk too short for its DDP-eligible result is answered
/// RDMA2_ERR_WRITE_RESOURCE naming the chunk (counted from one) and the result's length.
#[test]
fn draft07_7_3_4_a_write_chunk_too_short_is_write_resource() {
    let backend = rpcrdma_verbs::InProcess;
    let server = start(backend, true);
    let mut req = Requester::connect(&backend, &server);
    let sink = req.conn.pd().register(vec![0u8; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let seg = [XdrRdmaSegment { handle: sink.rkey(), length: 64, offset: sink.addr() }];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&seg) }];
    let chunks = ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&writes), reply: None };
    req.call_inline(0x110, &chunks, &rpc_call(0x110, 100));
    let err = req.receive();
    let want = Rpcrdma2ErrWrite { rdma_chunk_index: 1, rdma_length_needed: 400 };
    assert_eq!(parsed(&err).error(), Some(Rpcrdma2HdrError::Rdma2ErrWriteResource(want)));
    assert_eq!(word(&err, 0), 0x110);
}

/// Section 7.1.2: once a connection speaks -07, a message in another version (here a Version
/// One RDMA_MSG) is answered RDMA2_ERR_VERS_MISMATCH, whose `rdma_vers` is the message's
/// (section 7), and discarded: the handler never runs it, and the connection serves on.
#[test]
fn draft07_7_1_2_another_version_on_a_draft07_connection_is_vers_mismatch() {
    let backend = rpcrdma_verbs::InProcess;
    let server = start(backend, true);
    let mut req = Requester::connect(&backend, &server);
    let call = rpc_call(0x120, 1);
    req.call_inline(0x120, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
    let mut v1 = words(&[0x121, 1, 4, 0, 0, 0, 0]);
    v1.extend(rpc_call(0x121, 1));
    req.send(&v1);
    let err = req.receive();
    assert_eq!([word(&err, 0), word(&err, 1), word(&err, 3), word(&err, 4)], [0x121, 1, 4, RDMA2_ERR_VERS_MISMATCH]);
    assert!(served_eventually(&server, 1), "the Version One call was not run");
    let call = rpc_call(0x122, 1);
    req.call_inline(0x122, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
}

/// Section 6.3 (a header type the receiver does not take is RDMA2_ERR_INVAL_HTYPE, 7.1.3): a
/// server that offers no reverse direction answers a reply so, and leaves no sequence open
/// behind it: the call after a REPLY_MIDDLE is served, not refused as breaking the reply's
/// sequence.
#[test]
fn draft07_6_3_a_reply_it_does_not_take_is_inval_htype_and_leaves_nothing_open() {
    let backend = rpcrdma_verbs::InProcess;
    let server = start(backend, true);
    let mut req = Requester::connect(&backend, &server);
    let call = rpc_call(0x130, 1);
    req.call_inline(0x130, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
    // REPLY_MIDDLE, xid 0x131, 8 bytes to come, its first word.
    req.send(&words(&[0x131, 2, req.credit(), RDMA2_REPLY_MIDDLE, 8, 0x131]));
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_INVAL_HTYPE, 0x131));
    let call = rpc_call(0x132, 1);
    req.call_inline(0x132, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
}

/// An RDMA2_CONNPROP_FINAL stating `props` ((id, XDR of the value) pairs), XID `xid`.
fn connprop_final(xid: u32, credit: u32, props: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut bytes = words(&[xid, 2, credit, RDMA2_CONNPROP_FINAL, props.len() as u32]);
    for (which, data) in props {
        bytes.extend(words(&[*which, data.len() as u32]));
        bytes.extend(data);
        bytes.resize(bytes.len().div_ceil(4) * 4, 0);
    }
    bytes
}

/// Sections 5.2.2, 6.3.4 and 5.1: the server sends its own RDMA2_CONNPROP_FINAL unasked,
/// once, first of all it sends on a -07 connection (6.3.4: "Each peer sends an
/// RDMA2_CONNPROP_FINAL ... after the client has established a connection"), stating the size
/// of the Receives it posts; the requester's own FINAL, sent later, is not answered with a
/// second. The requester's stated receive buffer size then bounds the server's inline
/// replies: a 6 KB reply that went in two parts under the default 4096 goes in one Send once
/// the requester states 8192. A second CONNPROP after the FINAL is RDMA2_ERR_INVAL_CONT
/// (6.3.4).
fn properties_are_exchanged_and_honoured<B: Backend + Clone>(backend: B) {
    let server = start(backend.clone(), true);
    let mut req = Requester::connect(&backend, &server);
    let big = rpc_call(0x140, 1500);
    req.call_inline(0x140, &NO_CHUNKS, &big);
    // Beyond 4096 bytes: continued (section 6.6.4).
    assert_eq!(parsed(&req.receive()).header_type(), HeaderType::ReplyMiddle);
    assert_eq!(parsed(&req.receive()).header_type(), HeaderType::ReplyInline);
    // The server's properties came first, unasked.
    let (ours, at) = req.server_props.clone().expect("the server's RDMA2_CONNPROP_FINAL (6.3.4)");
    assert_eq!(at, 1, "the server's CONNPROP_FINAL is the first message it sends");
    let h = parsed(&ours);
    assert_eq!(h.header_type(), HeaderType::ConnPropFinal);
    let stated = rpcrdma_v2::draft07::properties::Properties::from_propset(&h.properties().unwrap()).unwrap();
    assert!(stated.receive_buffer_size >= 1024, "the server's Receives: {stated:?}");

    req.send(&connprop_final(0x141, req.credit(), &[(RDMA2_PROPID_RBSIZ, 8192u32.to_be_bytes().to_vec())]));
    // Not answered with a second CONNPROP_FINAL (nor anything else: the window is wide).
    assert!(req.hears_nothing(), "the requester's CONNPROP_FINAL is not answered");

    req.call_inline(0x142, &NO_CHUNKS, &rpc_call(0x142, 1500));
    let reply = req.receive();
    let h = parsed(&reply);
    assert_eq!(h.header_type(), HeaderType::ReplyInline, "{:?}", h.error());
    assert_eq!(h.payload(), &reply_for(&rpc_call(0x142, 1500))[..]);

    req.send(&connprop_final(0x143, req.credit(), &[]));
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_INVAL_CONT, 0x143));
}

#[test]
fn draft07_6_3_4_properties_are_exchanged_and_honoured() {
    properties_are_exchanged_and_honoured(rpcrdma_verbs::InProcess);
}

/// Section 5.1: a property value that is not the XDR of its type is RDMA2_ERR_BAD_PROPVAL, and
/// none of the set is applied: the server's inline replies stay within the default.
#[test]
fn draft07_5_1_a_bad_property_value_is_bad_propval_and_nothing_is_applied() {
    let backend = rpcrdma_verbs::InProcess;
    let server = start(backend, true);
    let mut req = Requester::connect(&backend, &server);
    let call = rpc_call(0x150, 1);
    req.call_inline(0x150, &NO_CHUNKS, &call);
    assert_eq!(parsed(&req.receive()).payload(), &reply_for(&call)[..]);
    // RBSIZ 8192 and a 2-byte SBSIZ: the set is refused whole.
    let props = [(RDMA2_PROPID_RBSIZ, 8192u32.to_be_bytes().to_vec()), (RDMA2_PROPID_SBSIZ, vec![0, 1])];
    req.send(&connprop_final(0x151, req.credit(), &props));
    let err = req.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_BAD_PROPVAL, 0x151));
    req.call_inline(0x152, &NO_CHUNKS, &rpc_call(0x152, 1500));
    // Still parts of 4096 bytes at most: the 8192 was not applied.
    let first = req.receive();
    assert_eq!((parsed(&first).header_type(), first.len()), (HeaderType::ReplyMiddle, 4096));
    assert_eq!(parsed(&req.receive()).header_type(), HeaderType::ReplyInline);
}

/// Section 4.2.1: an RDMA2_ERROR is a Send like any other, so it uses a place in the window
/// the requester granted. A requester whose total grants one message (it received nothing and
/// advertises one credit) gets an RDMA2_ERROR for a malformed message; its next call's reply
/// would then be a second message beyond that grant, so the reply is held: with Sends counted
/// as they are posted (as a Server's are), the error's poster takes the one credit, the reply's
/// finds none, and the requester's RDMA2_GRANT gives it one ("MUST NOT post this message if
/// the connection's Sent message counter is greater than ... Received credits"). Counted when
/// judged instead (a responder driven alone, with nothing to hold a reply), the reply is
/// counted and logged, and not taken for the requester's overrun.
#[test]
fn draft07_4_2_1_an_error_answer_uses_a_credit_and_the_reply_waits_for_a_grant() {
    use negotiate::responder::{Asked, Responder};
    for counted_when_posted in [true, false] {
        let mut r = Responder::new(ResponderConfig::default().draft07(true));
        if counted_when_posted {
            r.count_draft07_sends_when_posted();
        }
        // Both sides set the R flag (RFC 8797 section 4.1): a Version One reply could invalidate.
        let with_r = PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096);
        r.handle_connected(&with_r.encode(), Some(with_r));
        // A CALL_INLINE with an unknown extra word where its Read list count belongs (BAD_XDR):
        // xid 1, total 1.
        let bad = words(&[1, 2, 1, RDMA2_CALL_INLINE, 0, 0xffff_ffff]);
        assert!(matches!(r.handle_receive(&bad), Asked::SendError(_)));
        if counted_when_posted {
            assert_eq!(r.draft07_part_credit(), Some(1 + ADVERTISED), "the error's poster takes the one credit");
        }
        let mut call = vec![0u8; 64];
        let n = marshal::call_inline(&mut call, 2, 1, 0, &NO_CHUNKS, &rpc_call(2, 1)).unwrap();
        let Asked::Call(h) = r.handle_receive(&call[..n]) else { panic!() };
        assert_eq!(r.overruns(), 0);
        let params = r.reply_params(h.xid()).unwrap();
        assert!(params.draft07);
        assert!(
            !params.remote_invalidation,
            "section 6.5: no Send With Invalidate unless the call's rdma_inv_handle asks"
        );
        if !counted_when_posted {
            assert!(!params.credit_owed);
            // Counted now, beyond the grant (logged): not an overrun of the requester's.
            assert_eq!((r.overruns(), params.credits), (0, 2 + ADVERTISED));
            continue;
        }
        assert!(params.credit_owed);
        assert_eq!((r.overruns(), r.draft07_part_credit()), (0, None), "held, not sent beyond the total");
        // The requester's GRANT: total 2 (it received the error and advertises one more).
        assert!(matches!(r.handle_receive(&words(&[0, 2, 2, RDMA2_GRANT])), Asked::Taken));
        assert_eq!(r.draft07_part_credit(), Some(3 + ADVERTISED), "three messages received");
        assert_eq!(r.draft07_part_credit(), None, "one message for that total");
    }
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

/// The same conversations over real verbs (rdma-core on rdma_rxe): run inside the Soft-RoCE
/// guest by `guest/test-draft07`, which sets `RDMA_TEST_ADDR`; elsewhere each says SKIP and
/// returns (under `CI=true` a missing address fails it). The continued call's parts are real Sends, the external call's message and the
/// Write chunk's result move by real RDMA Read and Write.
/// Section 4.2.1, the responder's side: a requester that sends beyond the last total this
/// side sent (here a second call before this side's first header, when one message is all it
/// may send) is counted in `Responder::overruns` (the server's `credit_overruns`); a GRANT one
/// beyond is not (4.2.1.1: receivers keep a Receive for it). Bytes only, the responder alone.
#[test]
fn draft07_4_2_1_a_message_beyond_the_totals_sent_is_counted_and_a_grant_is_not() {
    use negotiate::responder::{Asked, Responder};
    let call = |xid: u32| {
        let mut out = vec![0u8; 64];
        let n = marshal::call_inline(&mut out, xid, 8, 0, &NO_CHUNKS, &rpc_call(xid, 1)).unwrap();
        out.truncate(n);
        out
    };
    let mut r = Responder::new(ResponderConfig::default().draft07(true));
    r.handle_connected(&[], None);
    assert!(matches!(r.handle_receive(&call(1)), Asked::Call(_)));
    assert_eq!(r.overruns(), 0, "one message before this side's first header");
    assert!(matches!(r.handle_receive(&call(2)), Asked::Call(_)));
    assert_eq!(r.overruns(), 1, "a second one is beyond");
    // Both answered: totals 1 + 32 and 2 + 32 sent, so the requester may send up to 34.
    r.reply_params(1).unwrap();
    r.reply_params(2).unwrap();
    for xid in 3..=34 {
        r.handle_receive(&call(xid));
    }
    assert_eq!(r.overruns(), 1, "the 32 after them within the total");
    let mut grant = [0u8; 16];
    marshal::grant(&mut grant, 40).unwrap();
    r.handle_receive(&grant);
    assert_eq!(r.overruns(), 1, "a GRANT one beyond is not an overrun");
    r.handle_receive(&call(35));
    assert_eq!(r.overruns(), 2, "a call beyond is");
}

#[cfg(feature = "rdma")]
mod rdma {
    fn backend() -> Option<rpcrdma_verbs::Rdma> {
        rpcrdma_verbs::Rdma::from_test_env()
    }

    #[test]
    fn calls_are_answered_reply_inline_with_running_totals() {
        let Some(b) = backend() else { return };
        super::calls_are_answered_reply_inline_with_running_totals(b);
    }

    #[test]
    fn a_continued_call_is_reassembled_and_served() {
        let Some(b) = backend() else { return };
        super::continued_call_is_reassembled_and_served(b);
    }

    #[test]
    fn an_external_call_is_read_from_its_call_chunk_and_served() {
        let Some(b) = backend() else { return };
        super::external_call_is_read_from_its_call_chunk_and_served(b);
    }

    #[test]
    fn a_result_goes_in_the_write_chunk_provided() {
        let Some(b) = backend() else { return };
        super::result_goes_in_the_write_chunk_provided(b);
    }

    #[test]
    fn a_reply_over_the_inline_threshold_goes_external() {
        let Some(b) = backend() else { return };
        super::reply_over_the_inline_threshold_goes_external(b);
    }

    #[test]
    fn properties_are_exchanged_and_honoured() {
        let Some(b) = backend() else { return };
        super::properties_are_exchanged_and_honoured(b);
    }

    #[test]
    fn remote_invalidation_follows_rdma_inv_handle() {
        let Some(b) = backend() else { return };
        super::remote_invalidation_follows_rdma_inv_handle(b);
    }
}

/// Sections 4.2.1 and 7.4: a requester whose running total leaves the server no credit (it
/// advertises none) and that never sends an RDMA2_GRANT gets no reply beyond its total: the
/// reply waits, and after the server's timeout the connection is closed ("If a Responder is
/// unable to construct and transmit an RPC Reply ..., the Responder MUST close the connection
/// to signal to the Requester that a reply was lost"). Another client is served meanwhile, and
/// the same requester that does send its GRANT in time gets the reply held for it.
#[test]
fn draft07_7_4_a_reply_never_granted_credit_closes_the_connection_and_holds_up_nobody() {
    let backend = rpcrdma_verbs::InProcess;
    let cfg =
        ServerConfig::default().timeout(Duration::from_millis(500)).responder(ResponderConfig::default().draft07(true));
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1 << 16 };
    let server = Server::start(backend, backend.any_address(), cfg, Arc::new(ulb), |c: &[u8]| reply_for(c)).unwrap();
    // Total 0: nothing received, no credits advertised.
    let stingy = Requester::connect(&backend, &server);
    let mut send = vec![0u8; 256];
    let n = marshal::call_inline(&mut send, 0x170, 0, 0, &NO_CHUNKS, &rpc_call(0x170, 1)).unwrap();
    stingy.send(&send[..n]);
    let began = std::time::Instant::now();
    // Another client is served while that reply waits.
    let mut other = Requester::connect(&backend, &server);
    let call = rpc_call(0x171, 1);
    other.call_inline(0x171, &NO_CHUNKS, &call);
    assert_eq!(parsed(&other.receive()).payload(), &reply_for(&call)[..]);
    // Nothing beyond the total, then the connection goes down.
    assert!(matches!(
        stingy.pool.receive_within(&stingy.conn, Duration::from_secs(3)),
        Err(DataPathError::Completion(_))
    ));
    assert!(began.elapsed() >= Duration::from_millis(400), "closed after {:?}", began.elapsed());
    // Recorded once the server's loop sees the queue pair down.
    let ended = || server.peers().iter().filter_map(|p| p.ended.clone()).map(|e| e.to_string()).collect::<Vec<_>>();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !ended().iter().any(|e| e.contains("no credit")) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(ended().iter().any(|e| e.contains("no credit")), "{:?}", ended());

    // The same, with a GRANT (total 1 + 8) sent while the reply waits: the reply comes.
    let mut granting = Requester::connect(&backend, &server);
    let n = marshal::call_inline(&mut send, 0x172, 0, 0, &NO_CHUNKS, &rpc_call(0x172, 1)).unwrap();
    granting.send(&send[..n]);
    assert!(granting.hears_nothing(), "a reply beyond the total");
    let mut grant = vec![0u8; 16];
    let n = marshal::grant(&mut grant, OURS).unwrap();
    granting.send(&grant[..n]);
    let reply = granting.receive();
    assert_eq!((word(&reply, 0), parsed(&reply).payload()), (0x172, &reply_for(&rpc_call(0x172, 1))[..]));
}

/// Sections 6.3.9 and 4.2.1: "the receiver MUST respond with [INVAL_CONT]" to anything but a
/// REPLY_MIDDLE's own next part, so nothing of the server's may go between a continued
/// reply's parts, even an RDMA2_ERROR it owes. A requester granting 3 Sends (the server's
/// CONNPROP_FINAL takes one) asks for a 10 KB reply (three parts in its 4096-byte Receives):
/// two parts go and the third waits for credit; a malformed message sent then draws its RDMA2_ERROR only after the final part,
/// once the requester's GRANT opened the window, and the server went on reading meanwhile
/// (the GRANT came after the malformed message).
#[test]
fn draft07_6_3_9_an_answer_owed_during_a_continued_reply_waits_for_its_last_part() {
    let backend = rpcrdma_verbs::InProcess;
    let server = start(backend, true);
    let mut req = Requester::connect(&backend, &server);
    let mut send = vec![0u8; 256];
    // Total 3: nothing received, three credits advertised.
    let n = marshal::call_inline(&mut send, 0x180, 3, 0, &NO_CHUNKS, &rpc_call(0x180, 2500)).unwrap();
    req.send(&send[..n]);
    let (first, second) = (req.receive(), req.receive());
    assert_eq!(
        (parsed(&first).header_type(), parsed(&second).header_type()),
        (HeaderType::ReplyMiddle, HeaderType::ReplyMiddle)
    );
    assert!(req.hears_nothing(), "a third Send beyond the total");
    // BAD_XDR: an unknown extra word where a CALL_INLINE's Read list count belongs.
    req.send(&words(&[0x181, 2, 2, RDMA2_CALL_INLINE, 0, 0xffff_ffff]));
    assert!(req.hears_nothing(), "the answer between the parts");
    let mut grant = vec![0u8; 16];
    let n = marshal::grant(&mut grant, 2 + 8).unwrap();
    req.send(&grant[..n]);
    let (last, answer) = (req.receive(), req.receive());
    assert_eq!((parsed(&last).header_type(), parsed(&last).xid()), (HeaderType::ReplyInline, 0x180));
    assert_eq!((error_code(&answer), word(&answer, 0)), (RDMA2_ERR_BAD_XDR, 0x181));
    let whole = [parsed(&first).payload(), parsed(&second).payload(), parsed(&last).payload()].concat();
    assert_eq!(whole, reply_for(&rpc_call(0x180, 2500)));
}

/// Sections 7.3.1 and 7.3.2: a call with more Read chunks, or more Write chunks, than the
/// server takes (`HeaderLimits::max_read_chunks`, `max_write_chunks`) is answered
/// RDMA2_ERR_READ_CHUNKS or RDMA2_ERR_WRITE_CHUNKS carrying the most it takes
/// (`rdma_max_chunks`, 0 when it takes none), and discarded: the handler never runs it, and
/// the connection serves the next call. A server that takes no Write chunk and cannot
/// continue a reply either (one Send per reply) answers RDMA2_ERR_REPLY_RESOURCE instead
/// (7.3.2). (The segments name no memory: nothing is read or written before the refusal.)
/// A CALL_EXTERNAL's Call chunk is not one of the Read chunks counted: a server that takes
/// none serves it.
/// Each refused call is its connection's first message: the running total its prefix
/// carries is taken all the same (4.2.1), so the refusal does not wait behind the server's
/// own CONNPROP_FINAL for a GRANT the requester, its one message unanswered, never sends.
#[test]
fn draft07_7_3_1_and_7_3_2_more_chunks_than_taken_are_refused_with_the_most_taken() {
    use rpcrdma_v1::header::HeaderLimits as Limits;
    let backend = rpcrdma_verbs::InProcess;
    let seg = |handle| [XdrRdmaSegment { handle, length: 4, offset: 0x1000 }];
    let (s1, s2) = (seg(1), seg(2));
    let reads = [XdrReadChunk { position: 12, target: s1[0] }, XdrReadChunk { position: 16, target: s2[0] }];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&s1) }, XdrWriteChunk { target: Seq::from_slice(&s2) }];
    let two_reads = ChunkLists { reads: List::from_slice(&reads), writes: List::from_slice(&[]), reply: None };
    let two_writes = ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&writes), reply: None };
    let cases = [
        (Limits::default().max_read_chunks(1), 256, &two_reads, RDMA2_ERR_READ_CHUNKS, Some(1)),
        (Limits::default().max_read_chunks(0), 256, &two_reads, RDMA2_ERR_READ_CHUNKS, Some(0)),
        (Limits::default().max_write_chunks(1), 256, &two_writes, RDMA2_ERR_WRITE_CHUNKS, Some(1)),
        (Limits::default().max_write_chunks(0), 256, &two_writes, RDMA2_ERR_WRITE_CHUNKS, Some(0)),
        (Limits::default().max_write_chunks(0), 1, &two_writes, RDMA2_ERR_REPLY_RESOURCE, Some(0)),
    ];
    for (i, (limits, parts, chunks, code, most)) in cases.into_iter().enumerate() {
        let mut responder = ResponderConfig::default().draft07(true);
        (responder.limits, responder.max_reply_parts) = (limits, parts);
        let server = start_with(backend, responder);
        let mut req = Requester::connect(&backend, &server);
        let xid = 0x190 + 2 * i as u32;
        // The call's message: XID, CALL, 1, then the two words the Read chunks were taken from.
        let mut call = rpc_call(xid, 1);
        call.extend(words(&[0, 0]));
        req.call_inline(xid, chunks, &call);
        let err = req.receive();
        assert_eq!((word(&err, 0), error_code(&err)), (xid, code), "case {i}");
        let body = parsed(&err).error();
        let want = match (code, most) {
            (RDMA2_ERR_REPLY_RESOURCE, _) => Rpcrdma2HdrError::Rdma2ErrReplyResource(0),
            (_, value) => Rpcrdma2HdrError::RdmaMaxChunks { discriminant: code, value: value.unwrap() },
        };
        assert_eq!(body, Some(want), "case {i}");
        assert!(served_eventually(&server, 0), "case {i}: the refused call was not run");
        let next = rpc_call(xid + 1, 1);
        req.call_inline(xid + 1, &NO_CHUNKS, &next);
        assert_eq!(parsed(&req.receive()).payload(), &reply_for(&next)[..], "case {i}");
    }
    // The Call chunk of an RDMA2_CALL_EXTERNAL carries the message, not an argument: a server
    // that takes no Read chunk still serves one.
    let mut responder = ResponderConfig::default().draft07(true);
    responder.limits = Limits::default().max_read_chunks(0);
    let server = start_with(backend, responder);
    let mut req = Requester::connect(&backend, &server);
    let (call, _source) = req.call_external(0x1a0);
    let reply = req.receive();
    assert_eq!(parsed(&reply).payload(), &reply_for(&call)[..], "the external call served");
}

/// Section 4.7 with 4.2.1.1, by bytes, for a driver of the sans-I/O core that counts Sends as
/// judged: each call-only call served without a reply is told to the core
/// (`Connection::draft07_served_without_reply`), whose answer is an RDMA2_GRANT carrying the
/// total the call's reply parameters counted, so that what the server counted is what it
/// posts and the requester's window moves: 200 call-only calls, every total higher than the
/// last and covering the calls received.
#[test]
fn draft07_4_7_a_call_only_call_served_without_reply_is_not_counted_as_a_send() {
    use negotiate::connection::{Arrival, Connection, Received, TransmissionKind};
    let now = std::time::Instant::now();
    let mut core: Connection<()> =
        Connection::server(ResponderConfig::default().draft07(true), Duration::from_secs(60), &[], None, now);
    let (mut grants, mut last_grant, mut properties_sent) = (0, 0, false);
    for i in 0..200u32 {
        let mut call = vec![0u8; 64];
        // The requester's total: what it received (the GRANTs) and its 32 advertised.
        let total = 32 + grants;
        let n =
            marshal::call_inline(&mut call, 0x100 + i, total, 0, &marshal::NO_CHUNKS, &rpc_call(0x100 + i, 0)).unwrap();
        let received = core.handle_receive(&call[..n], Arrival::default(), now);
        let Received::Call { params, .. } = received else { panic!("call {i}: {received:?}") };
        if core.draft07_served_without_reply(&params) {
            // (The server's own RDMA2_CONNPROP_FINAL goes first, once.)
            let mut t = core.poll_transmit().expect("the GRANT queued");
            core.handle_completion(t.id, Ok(()));
            if !properties_sent && t.kind == TransmissionKind::Properties {
                properties_sent = true;
                t = core.poll_transmit().expect("the GRANT queued");
                core.handle_completion(t.id, Ok(()));
            }
            assert_eq!(t.kind, TransmissionKind::Grant);
            let h = parsed(&t.bytes);
            assert_eq!(h.header_type(), HeaderType::Grant);
            assert!(h.credit() > last_grant, "each GRANT raises the total");
            last_grant = h.credit();
            grants += 1;
        }
    }
    assert_eq!(grants, 200, "one GRANT in place of each reply");
    assert!(properties_sent, "the server's CONNPROP_FINAL went, once, before a GRANT");
    assert_eq!(last_grant, 200 + 32, "the last total: every call received, 32 advertised");
}

/// Section 7.3: "once the Requester has re-established a connection, the Responder SHOULD send
/// an RDMA2_ERROR response to indicate that no RPC-level reply is possible for that
/// transaction". A call whose Write chunk claims 4096 bytes of a 64-byte region: the server's
/// RDMA Write of the result fails with a Remote Access Error, which ends the connection. The
/// requester reconnects (the same protection domain: the same peer host) and sends the call
/// again with the same XID: it is answered RDMA2_ERR_SYSTEM and its handler does not run a
/// second time. Another requester's call with that XID is served, and so is the first
/// requester's next one (the error is sent once), on the connection that goes on.
#[test]
fn draft07_7_3_a_transaction_whose_reply_was_lost_gets_rdma2_error_once_the_requester_reconnects() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let backend = rpcrdma_verbs::InProcess;
    let runs = Arc::new(AtomicU32::new(0));
    let counted = runs.clone();
    let handler = move |call: &[u8]| {
        counted.fetch_add(1, Ordering::SeqCst);
        reply_for(call)
    };
    let cfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let ulb =
        OpaqueAtUlb { call_opaque: None, reply_opaque: Some(REPLY_OPAQUE_AT), max_result: 1 << 16, max_reply: 1 << 16 };
    let server = Server::start(backend, backend.any_address(), cfg, Arc::new(ulb), handler).unwrap();
    let write_chunk = |req: &Requester<rpcrdma_verbs::InProcess>, region: usize, claimed: u32| {
        let sink = req.conn.pd().register(vec![0u8; region], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        (XdrRdmaSegment { handle: sink.rkey(), length: claimed, offset: sink.addr() }, sink)
    };
    let pd = backend.alloc_pd().unwrap();
    let req = Requester::connect_from(&backend, &server, pd.clone());
    let (seg, _sink) = write_chunk(&req, 64, 4096);
    let segs = [seg];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&segs) }];
    let chunks = ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&writes), reply: None };
    req.call_inline(0x300, &chunks, &rpc_call(0x300, 100));
    // No reply: only the server's CONNPROP_FINAL, then the connection's end.
    while let Ok(m) = req.pool.receive(&req.conn) {
        assert_eq!(Fixed::read(&m.bytes).and_then(|f| f.proc), Some(RDMA2_CONNPROP_FINAL), "{:?}", m.bytes);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran; its reply was lost");
    // Another requester's call with the same XID is its own transaction.
    let mut other = Requester::connect(&backend, &server);
    other.call_inline(0x300, &NO_CHUNKS, &rpc_call(0x300, 2));
    assert_eq!(parsed(&other.receive()).header_type(), HeaderType::ReplyInline);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // The first requester again, on a new connection and with chunks that would do now.
    let mut again = Requester::connect_from(&backend, &server, pd);
    let (seg, sink) = write_chunk(&again, 4096, 4096);
    let segs = [seg];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&segs) }];
    let chunks = ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&writes), reply: None };
    again.call_inline(0x300, &chunks, &rpc_call(0x300, 100));
    let err = again.receive();
    assert_eq!((error_code(&err), word(&err, 0)), (RDMA2_ERR_SYSTEM, 0x300));
    assert_eq!(runs.load(Ordering::SeqCst), 2, "not served again");
    // (Counted once the error's Send completed, which may be after the requester has it.)
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while server.stats().lost_replies_answered == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(server.stats().lost_replies_answered, 1);
    assert!(sink.with(|b| b.iter().all(|&x| x == 0)), "nothing written");
    // Once only: the next call with that XID is served, on the connection that went on.
    again.call_inline(0x300, &chunks, &rpc_call(0x300, 100));
    let reply = again.receive();
    assert_eq!(parsed(&reply).header_type(), HeaderType::ReplyInline);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(sink.with(|b| b[..400].to_vec()), reply_for(&rpc_call(0x300, 100))[12..]);
}
