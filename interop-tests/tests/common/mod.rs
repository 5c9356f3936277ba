//! Helpers the Client/Server test suites share (faults.rs, hostile_peer.rs): the echo service
//! and its calls, bounded waits, and a raw requester that sends whatever bytes a test gives it.
#![allow(dead_code, unused_macros)] // each test binary uses its own share

/// Each scenario `NAME` (a function generic over the backend) as the tests `in_process::NAME`
/// and `over_tcp::NAME`. Declared before the items below, so that `#[macro_use] mod common;`
/// brings it to the test file.
macro_rules! on_both_backends {
    ($($test:ident),* $(,)?) => {
        mod in_process {
            $( #[test] fn $test() { super::$test(verbs::InProcess); } )*
        }
        mod over_tcp {
            $( #[test] fn $test() { super::$test(verbs::Tcp); } )*
        }
    };
}

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use negotiate::client::{Client, ClientError};
use negotiate::datapath::{send_call, CallParams, Connection, ReceivePool};
use negotiate::responder::{self, Responder};
use negotiate::server::{Server, ServerStats};
use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::{roundup_pad, OpaqueAtUlb};
use rpcrdma_v1::Version;
use rpcrdma_v2::options::Registry;
use rpcrdma_v2::verdict::{self as v2, Verdict};
use verbs::{Access, Backend, ConnectRequest, ProtectionDomain, QpCaps, QueuePair, Sge};

/// Where the call's `opaque<>` length word sits: after XID, message type and one spare word.
pub const OPAQUE_AT: usize = 12;
/// Calls may reduce their opaque into a Read chunk; replies (echoes, as large as their call)
/// come inline or, when large, through the Reply chunk.
pub const ULB: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: Some(OPAQUE_AT), reply_opaque: None, max_result: 0, max_reply: 32 * 1024 };
/// Nothing DDP-eligible: a call is Short or Long, which makes the call threshold visible.
pub const PLAIN: OpaqueAtUlb =
    OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 32 * 1024 };
/// A call that fits any threshold (even the 1024-byte probe's) and one that needs a Read
/// chunk and a Reply chunk at every threshold here.
pub const SMALL: usize = 32;
pub const BIG: usize = 8000;
/// How long any one call may take, all its retransmissions included, before the test fails
/// instead of hanging.
pub const CALL_LIMIT: Duration = Duration::from_secs(20);
/// How long the tests wait for a condition they can see coming (a connection counted, ...).
pub const WAIT_LIMIT: Duration = Duration::from_secs(10);
pub const TICK: Duration = Duration::from_millis(10);

/// An RPC call: XID, message type 0, a spare word, then an `opaque<>` of `len` bytes.
pub fn call(xid: u32, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = [xid, 0, 0, len as u32].iter().flat_map(|w| w.to_be_bytes()).collect();
    m.extend((0..len).map(|i| (i as u8) ^ (xid as u8).wrapping_mul(3)));
    m.resize(m.len() + roundup_pad(len), 0);
    m
}

/// The service: the call echoed back as a reply (message type 1).
pub fn echo(call: &[u8]) -> Vec<u8> {
    let mut r = call.to_vec();
    r[4..8].copy_from_slice(&1u32.to_be_bytes());
    r
}

pub fn word(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).map_or(u32::MAX, |w| u32::from_be_bytes(w.try_into().unwrap()))
}

pub fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// `client.call` on another thread, so that a call that never ends fails the test after
/// [`CALL_LIMIT`] instead of hanging it.
pub fn call_within<B: Backend>(
    client: &Arc<Client<B>>,
    message: Vec<u8>,
    ulb: OpaqueAtUlb,
) -> Result<Vec<u8>, ClientError> {
    let (tx, rx) = mpsc::channel();
    let c = client.clone();
    std::thread::spawn(move || {
        let _ = tx.send(c.call(&message, &ulb));
    });
    rx.recv_timeout(CALL_LIMIT).unwrap_or_else(|_| panic!("a call did not end within {CALL_LIMIT:?}"))
}

/// Calls `xid` with an opaque of `len` bytes and checks it came back with exactly its reply.
pub fn call_ok<B: Backend>(client: &Arc<Client<B>>, xid: u32, len: usize) {
    let message = call(xid, len);
    let reply = call_within(client, message.clone(), ULB).unwrap_or_else(|e| panic!("call {xid:#x}: {e}"));
    assert!(reply == echo(&message), "call {xid:#x}: a reply of {} bytes that is not its own", reply.len());
}

/// The server's counts once `done` holds: it counts a call after its reply's Send completed,
/// which may be after the reply reached us. Fails the test after [`WAIT_LIMIT`].
pub fn stats_once(server: &Server, what: &str, done: impl Fn(&ServerStats) -> bool) -> ServerStats {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let s = server.stats();
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "waited {WAIT_LIMIT:?} for the server to count {what}: {s:?}");
        std::thread::yield_now();
    }
}

/// A raw requester's connection to a server.
pub struct RawRequester<B: Backend> {
    pub conn: Connection<B>,
    pub pool: ReceivePool<B>,
}

impl<B: Backend> RawRequester<B> {
    pub fn connect(backend: &B, addr: &str) -> Self {
        let t = Duration::from_secs(5);
        let pd = backend.alloc_pd().expect("pd");
        let (qp, _) = backend.connect(&pd, addr, &[], QpCaps::default(), t).expect("connect");
        let conn = Connection::<B>::new(pd, qp, t);
        let pool = ReceivePool::new(&conn, 4, 4096).expect("receives");
        RawRequester { conn, pool }
    }

    /// Sends `bytes` as one RDMA Send, whatever they are.
    pub fn send_raw(&self, bytes: &[u8]) {
        let region = self.conn.pd().register(bytes.to_vec(), Access::empty()).expect("register");
        let id = self.conn.wr_id();
        self.conn.qp().post_send(id, &[Sge::whole(&region)], None).expect("post");
        self.conn.wait(id).expect("sent");
    }

    /// The next message from the server.
    pub fn receive(&self) -> Vec<u8> {
        self.pool.receive(&self.conn).expect("a message from the server").bytes
    }

    /// A valid call in `vers`; the next message must be its reply, with its bytes.
    pub fn valid_call(&self, xid: u32, vers: Version) {
        let message = call(xid, SMALL);
        let params =
            CallParams { version: vers, credits: 32, thresholds: InlineThresholds { call: 1024, reply: 1024 } };
        let pending = send_call(&self.conn, &message, &ULB, &params).expect("send call");
        let got = self.pool.receive(&self.conn).expect("the reply");
        let policy = v2::ReceivePolicy { versions: (Version::ONE, Version::TWO), ..v2::default_policy() };
        let header: Header<'_> = match v2::receive(&got.bytes, &policy, &mut Registry::new()) {
            Verdict::Accept(h) | Verdict::Version1(rpcrdma_v1::verdict::Verdict::Accept(h)) => h,
            other => panic!("call {xid:#x}: expected its reply, got {other:?} ({:?})", &got.bytes),
        };
        assert_eq!((header.xid(), header.version()), (xid, vers), "the reply answers the call just sent");
        let mut out = Vec::new();
        pending.complete(&self.conn, &header, got.invalidated_rkey, &ULB, &mut out).expect("complete");
        assert!(out == echo(&message), "call {xid:#x}: not its own reply");
    }
}

/// A raw responder's side of a connect request: accepts it with `ours` as private data, a
/// Receive for every credit and the backward slot posted before the first Send can arrive
/// (RFC 8166 section 3.3.1), and a `Responder` for `versions` that has seen both sides'
/// private data. `None` when the requester went away before the accept completed.
pub fn accept_raw<B: Backend>(
    backend: &B,
    req: B::Request,
    versions: (Version, Version),
    ours: PrivateData,
) -> Option<(Responder, Connection<B>, ReceivePool<B>)> {
    let credits = responder::Config::default().credits;
    let mut responder = Responder::new(responder::Config { versions, ..Default::default() });
    responder.on_connected(req.private_data(), Some(ours));
    let pd = backend.alloc_pd().expect("pd");
    let mut pool = None;
    let accepted = req.accept_with(&pd, &ours.encode(), QpCaps::default(), |qp| {
        pool = Some(ReceivePool::<B>::post(&pd, qp, credits as usize + 1, 4096)?);
        Ok(())
    });
    let (Ok(qp), Some(pool)) = (accepted, pool) else { return None };
    Some((responder, Connection::<B>::new(pd, qp, Duration::from_secs(5)), pool))
}

/// One message as a raw responder received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Which connection (0 for the first accepted).
    pub conn: u32,
    /// Its place among the messages of that connection (0 first).
    pub nth: u32,
    pub xid: u32,
    pub vers: u32,
}
