//! A tap on every RDMA Send the data path posts, for packet captures and tests.
//!
//! Every RPC-over-RDMA message this crate sends (calls, replies, RDMA_ERRORs, Version Two
//! probes, backward-direction calls and replies) leaves through one Send posted by the
//! connection (RFC 8166 section 3.3: the transport header travels in a Send, never in RDMA
//! Read or Write). [`set`] installs one process-global sink that sees the bytes of each of them
//! at post time, before the peer can have received them. With no sink installed the cost is
//! one relaxed atomic load per Send; nothing is allocated or locked.
//!
//! A [`CapturedMessage`] names its sender by *endpoint*: one side of one connection, numbered
//! from 1 in the order endpoints first send while a sink is installed. Each endpoint sends in
//! one direction only, so the endpoint stands for the pair (connection, direction); which
//! endpoint is the requester is for the consumer to tell (the requester sends first: a
//! responder only ever answers, RFC 8166 section 3.3.1; RFC 8167 backward calls need a version,
//! which only a forward call establishes).
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use negotiate::datapath::capture;
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let s = seen.clone();
//! capture::set(Some(Arc::new(move |m: &capture::CapturedMessage<'_>| {
//!     s.lock().unwrap().push((m.endpoint, m.bytes.to_vec()));
//! })));
//! // ... run clients and servers: every Send lands in `seen` ...
//! capture::set(None);
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

/// One RPC-over-RDMA message, as posted in a Send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturedMessage<'a> {
    /// The sending endpoint: one side of one connection (see the module docs).
    pub endpoint: u64,
    /// The whole Send: transport header, then whatever follows it inline.
    pub bytes: &'a [u8],
}

/// What [`set`] installs: called on the posting thread, so it must be quick and must not post
/// Sends itself.
pub type Sink = Arc<dyn Fn(&CapturedMessage<'_>) + Send + Sync>;

/// Whether a sink is installed: the only thing the data path reads when none is.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static SINK: RwLock<Option<Sink>> = RwLock::new(None);
static NEXT_ENDPOINT: AtomicU64 = AtomicU64::new(1);

/// Installs `sink` (or with `None` removes the one installed) for the whole process, and
/// returns the one it replaces. Sends posted on any thread from then on reach it.
pub fn set(sink: Option<Sink>) -> Option<Sink> {
    let mut slot = SINK.write().unwrap_or_else(PoisonError::into_inner);
    ACTIVE.store(sink.is_some(), Ordering::Release);
    std::mem::replace(&mut *slot, sink)
}

/// A connection's endpoint number, drawn only when it first sends under a sink.
#[derive(Debug, Default)]
pub(crate) struct Endpoint(OnceLock<u64>);

impl Endpoint {
    fn id(&self) -> u64 {
        *self.0.get_or_init(|| NEXT_ENDPOINT.fetch_add(1, Ordering::Relaxed))
    }
}

/// The hook `Connection::post_send_bytes` calls with every Send.
#[inline]
pub(crate) fn sent(endpoint: &Endpoint, bytes: &[u8]) {
    if ACTIVE.load(Ordering::Relaxed) {
        emit(endpoint, bytes);
    }
}

#[cold]
fn emit(endpoint: &Endpoint, bytes: &[u8]) {
    // Cloned out so that the sink runs without the lock held (it may call `set`).
    let sink = SINK.read().unwrap_or_else(PoisonError::into_inner).clone();
    if let Some(sink) = sink {
        sink(&CapturedMessage { endpoint: endpoint.id(), bytes });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use rpcrdma_v1::marshal_call::InlineThresholds;
    use rpcrdma_v1::ulb::OpaqueAtUlb;
    use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
    use verbs::{Backend, ConnectRequest, InProcess, Listener, QpCaps};

    use super::*;
    use crate::datapath::{send_call, send_reply, CallParams, Connection, ReceivePool, ReplyParams};

    /// One call and its reply, captured: both Sends, each under its own endpoint, the call's
    /// endpoint first. Other tests of this crate may send meanwhile, so only the messages with
    /// this test's XID are looked at.
    #[test]
    fn captures_each_send_with_its_endpoint() {
        const XID: [u8; 4] = [0xca, 0x97, 0x00, 0x01];
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let previous = set(Some(Arc::new(move |m: &CapturedMessage<'_>| {
            if m.bytes.starts_with(&XID) {
                s.lock().unwrap().push((m.endpoint, m.bytes.to_vec()));
            }
        })));
        assert!(previous.is_none(), "another sink was installed");

        let t = Duration::from_secs(5);
        let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 64 };
        let call = [XID, [0, 0, 0, 0]].concat();
        let reply = [XID, [0, 0, 0, 1]].concat();
        let listener = InProcess.listen(&InProcess.any_address()).unwrap();
        let addr = listener.local_addr();
        let (ready, posted) = std::sync::mpsc::channel();
        let (r2, c2) = (reply.clone(), ulb);
        let responder = std::thread::spawn(move || {
            let pd = InProcess.alloc_pd().unwrap();
            let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
            let conn = Connection::<InProcess>::new(pd, qp, t);
            let pool = ReceivePool::new(&conn, 2, 1024).unwrap();
            ready.send(()).unwrap();
            let got = pool.receive(&conn).unwrap();
            let Verdict::Accept(h) = receive(&got.bytes, &ReceivePolicy::default()) else { panic!() };
            let params = ReplyParams {
                version: rpcrdma_v1::Version::ONE,
                credits: 2,
                reply_inline_threshold: 1024,
                remote_invalidation: false,
            };
            send_reply(&conn, &h, &r2, &c2, &params).unwrap();
            conn
        });
        let pd = InProcess.alloc_pd().unwrap();
        let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
        let conn = Connection::<InProcess>::new(pd, qp, t);
        let pool = ReceivePool::new(&conn, 2, 1024).unwrap();
        posted.recv().unwrap();
        let params =
            CallParams { version: rpcrdma_v1::Version::ONE, credits: 2, thresholds: InlineThresholds::default() };
        let pending = send_call(&conn, &call, &ulb, &params).unwrap();
        let got = pool.receive(&conn).unwrap();
        drop((pending, responder.join().unwrap()));
        set(None);
        assert!(!ACTIVE.load(Ordering::Relaxed));

        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{seen:?}");
        let ((call_ep, sent_call), (reply_ep, sent_reply)) = (&seen[0], &seen[1]);
        assert_ne!(call_ep, reply_ep);
        // The call as posted: a 28-byte RDMA_MSG header, then the RPC call itself.
        assert_eq!(&sent_call[28..], call);
        // The reply captured is exactly what arrived.
        assert_eq!(sent_reply, &got.bytes);
    }
}
