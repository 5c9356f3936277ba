//! Backward-direction RPC (RFC 8167, "Bidirectional Remote Procedure Call on RPC-over-RDMA
//! Transports"; required in Version Two by the v2 draft section 4.2): the server calls the
//! client over the connection the client made, and the client answers.
//!
//! Both directions share the connection's Receives. Backward-direction messages here are
//! always sent inline (RDMA_MSG, no chunks), as Linux does: RFC 8167 section 4 leaves chunk
//! use in the backward direction to each Upper-Layer Binding, and NFSv4.1 callbacks fit the
//! inline threshold. One backward call is outstanding at a time per connection (RFC 8167
//! section 4.1: its credit accounting is the backward requester's; we request and grant one),
//! and each side posts one Receive beyond its forward credits for it.
//!
//! A client answers with [`Client::with_backchannel`](crate::client::Client::with_backchannel);
//! a server calls with [`Server::backchannels`](crate::server::Server::backchannels).

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use rpcrdma_v1::header::{Header, HeaderLimits};
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::{DdpItem, UpperLayerBinding};
use verbs::Backend;

use crate::datapath::{send_call, send_reply, CallParams, Connection, DataPathError, ReplyParams};
use crate::reply::PeerError;

/// An RPC service for calls in the backward direction: the whole call message in, the whole
/// reply message out.
pub type Handler = Arc<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

/// The Receives each side posts beyond its forward credits for the backward direction.
pub const SLOTS: usize = 1;

/// The credits a backward call requests and its reply grants.
const CREDITS: u32 = 1;

/// The binding of the backward direction: nothing is DDP-eligible and the reply must fit
/// inline, so no chunk is ever provisioned or used.
struct InlineOnly {
    max_reply: usize,
}

impl UpperLayerBinding for InlineOnly {
    fn call_ddp_items(&self, _call: &[u8], _out: &mut Vec<DdpItem>) {}
    fn reply_ddp_maxima(&self, _call: &[u8], _out: &mut Vec<usize>) {}
    fn max_reply_size(&self, _call: &[u8]) -> usize {
        self.max_reply
    }
    fn reply_ddp_items(&self, _reply: &[u8], _reduced: usize, _out: &mut Vec<DdpItem>) {}
}

/// Why a backward-direction call failed.
#[derive(Debug, thiserror::Error)]
pub enum BackchannelError {
    /// The client has made no call yet, so the connection's version is not known.
    #[error("no forward call yet: the connection's version is unknown")]
    NoVersionYet,
    /// The call does not fit the client's inline threshold (backward messages are inline).
    #[error("a backward call of {len} bytes exceeds the inline threshold of {threshold}")]
    TooLarge {
        /// The message's length.
        len: usize,
        /// The threshold.
        threshold: usize,
    },
    /// Another backward call is outstanding on this connection.
    #[error("a backward call is already outstanding on this connection")]
    Busy,
    /// The connection is gone.
    #[error("the connection is closed")]
    Closed,
    /// No reply in time.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The client answered the call with an RDMA_ERROR (RFC 8166 section 4.5: it "completes
    /// the RPC transaction associated with XID"): the call ends at once, with no reply.
    #[error("the client answered with RDMA_ERROR: {0:?}")]
    Peer(PeerError),
    /// Moving the bytes failed.
    #[error(transparent)]
    DataPath(#[from] DataPathError),
}

/// The client's side: answers a backward call that arrived on `conn`, inline, in the call's
/// version, with the reply inline threshold being the forward call threshold (the server's
/// Receives).
pub(crate) fn answer<B: Backend>(
    conn: &Connection<B>,
    call: &Header<'_>,
    handler: &Handler,
    forward: InlineThresholds,
) -> Result<(), DataPathError> {
    let reply = handler(call.payload());
    let params = ReplyParams {
        version: call.version(),
        credits: CREDITS,
        reply_inline_threshold: forward.call,
        remote_invalidation: false,
    };
    send_reply(conn, call, &reply, &InlineOnly { max_reply: forward.call }, &params).map(drop)
}

/// What the serving thread hands the backward caller.
enum Slot {
    Idle,
    /// A call with this XID is outstanding.
    Waiting(u32),
    Reply(Vec<u8>),
    /// The client's RDMA_ERROR for the outstanding call.
    Error(PeerError),
    Closed,
}

/// The server's handle for calling the client of one connection. Cheap to clone.
#[derive(Clone)]
pub struct Backchannel {
    inner: Arc<dyn Caller>,
}

impl std::fmt::Debug for Backchannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backchannel").finish_non_exhaustive()
    }
}

impl Backchannel {
    /// Sends the RPC call `message` (its XID first, chosen by the caller) to the client and
    /// returns its RPC reply.
    pub fn call(&self, message: &[u8]) -> Result<Vec<u8>, BackchannelError> {
        self.inner.call(message)
    }

    /// Whether the connection is still up.
    pub fn is_open(&self) -> bool {
        self.inner.is_open()
    }
}

trait Caller: Send + Sync {
    fn call(&self, message: &[u8]) -> Result<Vec<u8>, BackchannelError>;
    fn is_open(&self) -> bool;
}

/// The server side of one connection's backward direction: the serving thread records the
/// connection's version and thresholds and delivers replies; callers wait here.
pub(crate) struct ServerSide<B: Backend> {
    conn: Arc<Connection<B>>,
    limits: HeaderLimits,
    state: Mutex<(Slot, Option<(u32, InlineThresholds)>)>,
    cv: Condvar,
}

impl<B: Backend> ServerSide<B> {
    pub(crate) fn new(conn: Arc<Connection<B>>, limits: HeaderLimits) -> Arc<Self> {
        Arc::new(ServerSide { conn, limits, state: Mutex::new((Slot::Idle, None)), cv: Condvar::new() })
    }

    pub(crate) fn handle(self: &Arc<Self>) -> Backchannel {
        Backchannel { inner: self.clone() }
    }

    /// A forward call of `version` arrived: backward calls use its version and thresholds.
    pub(crate) fn on_forward_call(&self, version: u32, thresholds: InlineThresholds) {
        self.lock().1 = Some((version, thresholds));
    }

    /// A backward reply arrived.
    pub(crate) fn on_reply(&self, bytes: Vec<u8>) {
        let mut st = self.lock();
        if matches!(st.0, Slot::Waiting(_)) {
            st.0 = Slot::Reply(bytes);
            self.cv.notify_all();
        }
    }

    /// The client's RDMA_ERROR naming `xid` arrived: if it is the outstanding backward call's,
    /// that call ends with it (true); otherwise it names nothing of ours (false).
    pub(crate) fn on_peer_error(&self, xid: u32, error: PeerError) -> bool {
        let mut st = self.lock();
        if !matches!(st.0, Slot::Waiting(w) if w == xid) {
            return false;
        }
        st.0 = Slot::Error(error);
        self.cv.notify_all();
        true
    }

    /// The connection is gone.
    pub(crate) fn close(&self) {
        self.lock().0 = Slot::Closed;
        self.cv.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Slot, Option<(u32, InlineThresholds)>)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<B: Backend> Caller for ServerSide<B> {
    fn call(&self, message: &[u8]) -> Result<Vec<u8>, BackchannelError> {
        let (version, t, xid) = {
            let mut st = self.lock();
            match st.0 {
                Slot::Closed => return Err(BackchannelError::Closed),
                Slot::Waiting(_) | Slot::Reply(_) | Slot::Error(_) => return Err(BackchannelError::Busy),
                Slot::Idle => {}
            }
            let Some((version, t)) = st.1 else { return Err(BackchannelError::NoVersionYet) };
            // An RPC message starts with its XID; a shorter one fails in send_call below.
            let xid = message.get(..4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
            st.0 = Slot::Waiting(xid);
            (version, t, xid)
        };
        // Server to client: the client's Receives bound the call, ours the reply.
        let backward = InlineThresholds { call: t.reply, reply: t.call };
        let ulb = InlineOnly { max_reply: backward.reply };
        let result = (|| {
            // 36 bytes: the RDMA_MSG header with three empty lists, the largest this sends.
            if message.len() + 28 > backward.call {
                return Err(BackchannelError::TooLarge { len: message.len(), threshold: backward.call });
            }
            let params = CallParams { version, credits: CREDITS, thresholds: backward };
            let pending = send_call(&self.conn, message, &ulb, &params)?;
            let timeout = self.conn.timeout();
            let bytes = {
                let st = self.lock();
                let (mut st, _) = self
                    .cv
                    .wait_timeout_while(st, timeout, |s| matches!(s.0, Slot::Waiting(_)))
                    .unwrap_or_else(PoisonError::into_inner);
                // Still ours (Busy to other callers) until this call is complete.
                match std::mem::replace(&mut st.0, Slot::Waiting(xid)) {
                    Slot::Reply(b) => b,
                    Slot::Error(e) => {
                        // An error reply never invalidates (RFC 8797 section 4.1's rule is for
                        // replies): release the call's chunks ourselves.
                        let _ = pending.abandon(&self.conn, None);
                        return Err(BackchannelError::Peer(e));
                    }
                    Slot::Closed => {
                        st.0 = Slot::Closed;
                        let _ = pending.abandon(&self.conn, None);
                        return Err(BackchannelError::Closed);
                    }
                    _ => {
                        let _ = pending.abandon(&self.conn, None);
                        return Err(BackchannelError::Timeout(timeout));
                    }
                }
            };
            let header = crate::reply::reply_header(&bytes, &self.limits).ok_or(BackchannelError::Closed)?;
            let mut out = Vec::new();
            pending.complete(&self.conn, &header, None, &ulb, &mut out)?;
            Ok(out)
        })();
        let mut st = self.lock();
        if !matches!(st.0, Slot::Closed) {
            st.0 = Slot::Idle;
        }
        result
    }

    fn is_open(&self) -> bool {
        !matches!(self.lock().0, Slot::Closed)
    }
}
