//! The data path: one RPC message exchange over a connected verbs queue pair, for either
//! protocol version.
//!
//! Every protocol decision is made by `rpcrdma-v1`'s sans-I/O functions (marshaling,
//! reassembly, the header view, which Version Two shares through
//! `MarshaledCall::with_version` / `MarshaledReply::with_version` and
//! `Header::parse_chunk_lists`); this module only moves the bytes they describe. The version,
//! the credit value and the inline thresholds are parameters: the negotiation state machines
//! decide them.
//!
//! * [`Connection`] wraps a protection domain and a queue pair, allocates work-request ids and
//!   holds the one place where a caller waits for *its* completion ([`Connection::wait`]),
//!   setting aside completions that belong to other work requests, so that calls in flight on
//!   one completion queue can be told apart by `wr_id`.
//! * [`ReceivePool`]: the pre-posted Receives RPC-over-RDMA needs, one per credit (RFC 8166
//!   section 3.3.1), each re-posted as soon as its bytes are copied out.
//! * [`WindowRegistrar`] (the `Registrar` of `marshal_call`): chunk memory registered per call
//!   and exposed through memory windows bound on the connection's queue pair, the only keys a
//!   Send with Invalidate can kill (RFC 8797 section 4.1); [`ChunkMemory::release`] invalidates
//!   what the peer did not.
//! * Requester: [`send_call`] then [`PendingCall::complete`] (or [`PendingCall::abandon`] for an
//!   RDMA_ERROR).
//! * Responder: [`fetch_call`] (RDMA Read of the Read chunks, reassembly), then [`send_reply`]
//!   (RDMA Writes into the Requester's chunks, then the Send, with Invalidate when allowed) or
//!   [`send_error`].
//! * [`capture`]: an optional process-global tap that sees the bytes of every Send posted.
//!
//! The helpers block (post, then wait up to the connection's timeout). A later dispatcher that
//! polls one completion queue for many calls replaces [`Connection::wait`] and nothing else.
//!
//! ```
//! use std::time::Duration;
//! use negotiate::datapath::*;
//! use rpcrdma_v1::marshal_call::InlineThresholds;
//! use rpcrdma_v1::ulb::OpaqueAtUlb;
//! use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
//! use verbs::{Backend, ConnectRequest, InProcess, Listener, QpCaps};
//!
//! let t = Duration::from_secs(5);
//! let listener = InProcess.listen(&InProcess.any_address()).unwrap();
//! let addr = listener.local_addr();
//! let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 64 };
//! let (ready, posted) = std::sync::mpsc::channel();
//! let responder = std::thread::spawn(move || {
//!     let pd = InProcess.alloc_pd().unwrap();
//!     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
//!     let conn = Connection::<InProcess>::new(pd, qp, t);
//!     let pool = ReceivePool::new(&conn, 4, 1024).unwrap();
//!     ready.send(()).unwrap(); // a Send that finds no Receive posted kills the connection
//!     let got = pool.receive(&conn).unwrap();
//!     let Verdict::Accept(call) = receive(&got.bytes, &ReceivePolicy::default()) else { panic!() };
//!     let mut message = Vec::new();
//!     fetch_call(&conn, &call, &ulb, &mut message).unwrap();
//!     assert_eq!(message, [0, 0, 0, 7, 0, 0, 0, 0]);
//!     let params = ReplyParams { version: 1, credits: 4, reply_inline_threshold: 1024, remote_invalidation: false };
//!     send_reply(&conn, &call, &[0, 0, 0, 7, 0, 0, 0, 1], &ulb, &params).unwrap();
//!     conn
//! });
//! let pd = InProcess.alloc_pd().unwrap();
//! let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
//! let conn = Connection::<InProcess>::new(pd, qp, t);
//! let pool = ReceivePool::new(&conn, 4, 1024).unwrap();
//! let params = CallParams { version: 1, credits: 4, thresholds: InlineThresholds::default() };
//! posted.recv().unwrap();
//! let pending = send_call(&conn, &[0, 0, 0, 7, 0, 0, 0, 0], &ulb, &params).unwrap();
//! let got = pool.receive(&conn).unwrap();
//! let Verdict::Accept(reply) = receive(&got.bytes, &ReceivePolicy::default()) else { panic!() };
//! let mut message = Vec::new();
//! pending.complete(&conn, &reply, got.invalidated_rkey, &ulb, &mut message).unwrap();
//! assert_eq!(message, [0, 0, 0, 7, 0, 0, 0, 1]);
//! responder.join().unwrap();
//! ```

mod call;
pub mod capture;
mod receive;
mod registrar;
mod reply;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rpcrdma_v1::marshal_call::CallError;
use rpcrdma_v1::marshal_reply::ReplyError;
use rpcrdma_v1::reassemble::{DdpViolation, ReassemblyError};
use verbs::{Access, Backend, Completion, MemoryRegion, ProtectionDomain, QueuePair, Sge};

pub use call::{send_call, CallParams, PendingCall};
pub use receive::{ReceivePool, Received};
pub use registrar::{ChunkMemory, Landed, WindowRegistrar};
pub use reply::{fetch_call, send_error, send_reply, ReplyParams, ReplySent};

/// Why one step of the data path failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataPathError {
    /// A verbs call was refused at once (queue full, bad arguments, ...).
    #[error("verbs: {0}")]
    Verbs(#[from] verbs::Error),
    /// A work request completed with an error; the queue pair is in the Error state.
    #[error("work request {} ({:?}) failed: {:?}", .0.wr_id, .0.opcode, .0.status)]
    Completion(Completion),
    /// No completion for the work request within the connection's timeout.
    #[error("no completion for work request {wr_id} within {timeout:?}")]
    Timeout {
        /// The work request waited for (0 when waiting for any Receive).
        wr_id: u64,
        /// The timeout.
        timeout: Duration,
    },
    /// The call could not be marshaled (`rpcrdma_v1::marshal_call::marshal_call`).
    #[error("marshaling the call: {0}")]
    Call(#[from] CallError<verbs::Error>),
    /// The reply could not be marshaled; [`ReplyError::errcode`] says whether to answer
    /// `ERR_CHUNK` with [`send_error`] instead.
    #[error("marshaling the reply: {0}")]
    Reply(#[from] ReplyError),
    /// The received message could not be reassembled from its chunks.
    #[error("reassembly: {0}")]
    Reassembly(#[from] ReassemblyError),
    /// A received call's Read chunks break DDP-eligibility (RFC 8166 section 6.1.1): do not
    /// process it; answer `GARBAGE_ARGS`.
    #[error("{0}")]
    DdpViolation(#[from] DdpViolation),
    /// The reply's XID is not the call's (the caller matches replies to calls).
    #[error("reply XID {got:#x} completes a call with XID {want:#x}")]
    XidMismatch {
        /// The call's XID.
        want: u32,
        /// The reply's.
        got: u32,
    },
    /// The peer's Send with Invalidate killed a key that is not one of this call's (RFC 8797
    /// section 4.1: it "MUST invalidate an STag associated only with the Transaction ID").
    #[error("the reply invalidated rkey {0:#x}, which belongs to no chunk of this call")]
    ForeignInvalidation(u32),
}

/// The bit that marks a Receive's `wr_id` ([`ReceivePool`]); send-queue work requests take ids
/// from [`Connection::wr_id`], which never sets it.
const RECV_WR_BIT: u64 = 1 << 63;

/// How long one poller holds the completion queue before letting another waiter look at what
/// it set aside.
const POLL_SLICE: Duration = Duration::from_millis(10);

/// A connected queue pair, its protection domain, the work-request ids handed out on it, and the
/// completions reaped but not yet claimed.
///
/// Every wait for a completion goes through [`Connection::wait`] (or [`Connection::wait_all`],
/// [`ReceivePool::receive`]), which reaps the queue and sets aside completions of other work
/// requests until their owner asks: calls in flight at once never steal each other's
/// completions.
///
/// ```
/// # use std::time::Duration;
/// # use negotiate::datapath::Connection;
/// # use verbs::*;
/// # let t = Duration::from_secs(5);
/// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
/// # let addr = listener.local_addr();
/// # let peer = std::thread::spawn(move || {
/// #     let pd = InProcess.alloc_pd().unwrap();
/// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
/// # });
/// let pd = InProcess.alloc_pd().unwrap();
/// let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// let conn = Connection::<InProcess>::new(pd, qp, t);
/// let region = conn.pd().register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
/// let (a, b) = (conn.wr_id(), conn.wr_id());
/// conn.qp().post_bind_window(a, &region, 0, 32, Access::REMOTE_READ).unwrap();
/// conn.qp().post_bind_window(b, &region, 32, 32, Access::REMOTE_READ).unwrap();
/// // Waiting for the second sets the first aside; it is still there afterwards.
/// assert_eq!(conn.wait(b).unwrap().opcode, Opcode::BindWindow);
/// assert_eq!(conn.wait(a).unwrap().wr_id, a);
/// # drop(peer.join());
/// ```
pub struct Connection<B: Backend> {
    pd: B::Pd,
    qp: B::Qp,
    timeout: Duration,
    next_wr_id: AtomicU64,
    /// Completions reaped while waiting for another one, and whether a waiter is polling
    /// now: one polls at a time (outside the lock), the others wait on `reaped` for what it
    /// sets aside.
    set_aside: Mutex<Reaped>,
    reaped: Condvar,
    /// This side's number for [`capture`], drawn on its first Send under a sink.
    capture: capture::Endpoint,
}

impl<B: Backend> Connection<B> {
    /// Wraps a connected queue pair and the protection domain it was created in; every wait
    /// gives up after `timeout`.
    pub fn new(pd: B::Pd, qp: B::Qp, timeout: Duration) -> Self {
        Connection {
            pd,
            qp,
            timeout,
            next_wr_id: AtomicU64::new(1),
            set_aside: Mutex::new(Reaped::default()),
            reaped: Condvar::new(),
            capture: Default::default(),
        }
    }

    /// The protection domain.
    pub fn pd(&self) -> &B::Pd {
        &self.pd
    }

    /// The queue pair.
    pub fn qp(&self) -> &B::Qp {
        &self.qp
    }

    /// How long a wait lasts before [`DataPathError::Timeout`].
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Gives the protection domain and queue pair back.
    pub fn into_parts(self) -> (B::Pd, B::Qp) {
        (self.pd, self.qp)
    }

    /// A fresh `wr_id` for a send-queue work request; unique on this connection.
    pub fn wr_id(&self) -> u64 {
        self.next_wr_id.fetch_add(1, Ordering::Relaxed) & !RECV_WR_BIT
    }

    /// Waits for the completion of work request `wr_id`; an error completion is
    /// [`DataPathError::Completion`].
    pub fn wait(&self, wr_id: u64) -> Result<Completion, DataPathError> {
        self.wait_for(wr_id, |c| c.wr_id == wr_id)
    }

    /// Waits for every work request in `wr_ids`, even after one failed (the others are flushed
    /// then, and their completions must still be reaped); returns the first failure in list
    /// order. Stops at a timeout.
    pub fn wait_all(&self, wr_ids: &[u64]) -> Result<(), DataPathError> {
        let mut first = None;
        for &id in wr_ids {
            match self.wait(id) {
                Ok(_) => {}
                Err(e @ DataPathError::Timeout { .. }) => return Err(first.unwrap_or(e)),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The one wait: the first completion, set aside or newly reaped, that `mine` claims;
    /// everything else reaped meanwhile is set aside for its owner.
    fn wait_for(&self, wr_id: u64, mine: impl Fn(&Completion) -> bool) -> Result<Completion, DataPathError> {
        self.wait_for_within(wr_id, self.timeout, mine)
    }

    /// [`Connection::wait_for`] giving up after `timeout`.
    fn wait_for_within(
        &self,
        wr_id: u64,
        timeout: Duration,
        mine: impl Fn(&Completion) -> bool,
    ) -> Result<Completion, DataPathError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(i) = st.completions.iter().position(&mine) {
                return checked(st.completions.swap_remove(i));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(DataPathError::Timeout { wr_id, timeout });
            }
            if st.polling {
                // Another waiter polls; it wakes us when it sets something aside.
                st = self.reaped.wait_timeout(st, left).unwrap_or_else(PoisonError::into_inner).0;
                continue;
            }
            // Poll without the lock, so waiters for completions already set aside (a Send's,
            // while a dispatcher waits for Receives) are not held up behind a blocking poll.
            st.polling = true;
            drop(st);
            let reaped = self.qp.wait_cq(left.min(POLL_SLICE));
            st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
            st.polling = false;
            self.reaped.notify_all();
            if let Some(c) = reaped {
                if mine(&c) {
                    return checked(c);
                }
                st.completions.push(c);
            }
        }
    }

    /// Registers `bytes` and posts them as one Send (with Invalidate of `invalidate`); returns
    /// the work request's id. The posted Send keeps the registration alive until it completes.
    /// Every message this crate sends passes here, so this is where [`capture`] taps them.
    fn post_send_bytes(&self, bytes: Vec<u8>, invalidate: Option<u32>) -> Result<u64, DataPathError> {
        capture::sent(&self.capture, &bytes);
        let region = self.pd.register(bytes, Access::empty())?;
        let id = self.wr_id();
        self.qp.post_send(id, &[Sge::whole(&region)], invalidate)?;
        Ok(id)
    }

    /// Registers a zeroed buffer of `len` bytes the local queue pair (and, through a window, the
    /// peer) may write.
    fn register_zeroed(&self, len: usize) -> verbs::Result<B::Region> {
        self.pd.register(vec![0; len], Access::LOCAL_WRITE)
    }
}

/// What [`Connection`]'s waiters share.
#[derive(Default)]
struct Reaped {
    completions: Vec<Completion>,
    polling: bool,
}

/// A completion as a result: success, or the error it reports.
fn checked(c: Completion) -> Result<Completion, DataPathError> {
    if c.is_ok() {
        Ok(c)
    } else {
        Err(DataPathError::Completion(c))
    }
}

/// The bytes of a region this side owns, handed back by deregistering it.
fn take_bytes<R: MemoryRegion>(region: R) -> Vec<u8> {
    // Deregistering fails only for a region already deregistered, which then holds nothing.
    region.deregister().unwrap_or_default()
}
