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
//! * [`Transport`] wraps a protection domain and a queue pair, allocates work-request ids and
//!   holds the one place where a caller waits for *its* completion ([`Transport::wait`]),
//!   setting aside completions that belong to other work requests, so that calls in flight on
//!   one completion queue can be told apart by `wr_id`.
//! * [`ReceivePool`]: the pre-posted Receives RPC-over-RDMA needs, one per credit (RFC 8166
//!   section 3.3.1), each re-posted as soon as its bytes are copied out.
//! * [`WindowRegistrar`] (the `Registrar` of `marshal_call`): chunk memory, registered once and
//!   kept by the connection for its next calls (`chunk_pool`, the registration cache), exposed
//!   per call through memory windows bound on the connection's queue pair, the only keys a Send
//!   with Invalidate can kill (RFC 8797 section 4.1); [`ChunkMemory::release`] invalidates what
//!   the peer did not.
//! * Requester: [`send_call`] then [`PendingCall::complete`] (or [`PendingCall::abandon`] for an
//!   RDMA_ERROR).
//! * Responder: [`fetch_call`] (RDMA Read of the Read chunks, reassembly), then [`send_reply`]
//!   (RDMA Writes into the Requester's chunks, then the Send, with Invalidate when allowed) or
//!   [`send_error`].
//!
//! The helpers block (post, then wait up to the connection's timeout). A later dispatcher that
//! polls one completion queue for many calls replaces [`Transport::wait`] and nothing else.
//!
//! ```
//! use std::time::Duration;
//! use negotiate::datapath::*;
//! use rpcrdma_v1::marshal_call::InlineThresholds;
//! use rpcrdma_v1::ulb::OpaqueAtUlb;
//! use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
//! use rpcrdma_verbs::{Backend, ConnectRequest, InProcess, Listener, QpCaps};
//!
//! let t = Duration::from_secs(5);
//! let listener = InProcess.listen(&InProcess.any_address()).unwrap();
//! let addr = listener.local_addr();
//! let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 64 };
//! let (ready, posted) = std::sync::mpsc::channel();
//! let responder = std::thread::spawn(move || {
//!     let pd = InProcess.alloc_pd().unwrap();
//!     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
//!     let conn = Transport::<InProcess>::new(pd, qp, t);
//!     let pool = ReceivePool::new(&conn, 4, 1024).unwrap();
//!     ready.send(()).unwrap(); // a Send that finds no Receive posted kills the connection
//!     let got = pool.receive(&conn).unwrap();
//!     let Verdict::Accept(call) = receive(&got.bytes, &ReceivePolicy::default()) else { panic!() };
//!     let mut message = Vec::new();
//!     fetch_call(&conn, &call, &ulb, &mut message).unwrap();
//!     assert_eq!(message, [0, 0, 0, 7, 0, 0, 0, 0]);
//!     let params = ReplyParams { version: rpcrdma_v1::Version::ONE, credits: 4, credit_owed: false, reply_inline_threshold: 1024, remote_invalidation: false, draft07: false, invalidate: None };
//!     send_reply(&conn, &call, &message, &[0, 0, 0, 7, 0, 0, 0, 1], &ulb, &params).unwrap();
//!     conn
//! });
//! let pd = InProcess.alloc_pd().unwrap();
//! let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
//! let conn = Transport::<InProcess>::new(pd, qp, t);
//! let pool = ReceivePool::new(&conn, 4, 1024).unwrap();
//! let params = CallParams { version: rpcrdma_v1::Version::ONE, credits: 4, thresholds: InlineThresholds::default(), dialect: None, remote_invalidation: false, segments: negotiate::thresholds::SegmentLimits::NONE };
//! posted.recv().unwrap();
//! let call = [0, 0, 0, 7, 0, 0, 0, 0];
//! let pending = send_call(&conn, &call, &ulb, &params).unwrap();
//! let got = pool.receive(&conn).unwrap();
//! let Verdict::Accept(reply) = receive(&got.bytes, &ReceivePolicy::default()) else { panic!() };
//! let mut message = Vec::new();
//! pending.complete(&conn, &call, &reply, got.invalidated_rkey, &ulb, &mut message).unwrap();
//! assert_eq!(message, [0, 0, 0, 7, 0, 0, 0, 1]);
//! responder.join().unwrap();
//! ```

#[cfg(test)]
mod arm_tests;
mod call;
#[cfg(test)]
mod chain_tests;
mod chunk_pool;
mod lent_sources;
mod receive;
mod registrar;
mod reply;
mod send_queue;
mod stream;
mod waiting;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rpcrdma_v1::header::Fixed;
use rpcrdma_v1::marshal_call::CallError;
use rpcrdma_v1::marshal_reply::ReplyError;
use rpcrdma_v1::reassemble::{DdpViolation, ReassemblyError};
use rpcrdma_verbs::{
    Access, Backend, Completion, MemoryRegion, ProtectionDomain, QpState, QueuePair, RemoteBuf, SendFlags, Sge,
    WorkRequest,
};
use smallvec::SmallVec;

pub(crate) use call::InlineOnly;
pub use call::{
    prepare_call, send_call, send_call_continuing, send_call_lent, send_call_only, CallParams, PendingCall,
    PreparedCall, ReducedAt, ReplyInPlace, ReplyPieces,
};
use chunk_pool::ChunkPool;
pub use chunk_pool::{Landed, LandedView};
use lent_sources::{LentSource, LentSources};
pub use receive::{ReceivePool, ReceivedMessage};
pub use registrar::{ChunkMemory, WindowRegistrar};
pub(crate) use reply::send_answer;
pub use reply::{
    fetch_call, send_draft07, send_error, send_reply, send_reply_lent, send_reply_with_lent_results, LentMismatch,
    ReplyParams, ReplySent,
};
use send_queue::SendQueue;
pub use stream::ANSWERS_QUEUED_MOST;
use waiting::{Reaped, Want, REAP_BATCH};

/// Why one step of the data path failed.
///
/// The errors of the protocol crates convert into it with `?`;
/// [`FailureAnswer::for_error`](crate::server::FailureAnswer::for_error) says how a responder answers one.
///
/// ```
/// use negotiate::datapath::DataPathError;
/// use negotiate::server::FailureAnswer;
/// use rpcrdma_v1::reassemble::{reassemble_call, ReassemblyError};
/// use rpcrdma_v1::rt::List;
/// use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg, RpcRdmaHeaderNomsg};
///
/// fn unreduced_call(header: &RdmaMsg<'_>, landing: &[u8]) -> Result<Vec<u8>, DataPathError> {
///     let mut call = Vec::new();
///     reassemble_call(header, &[], landing, &mut call)?;
///     Ok(call)
/// }
/// // An RDMA_NOMSG with no chunk to carry the call.
/// let (rdma_reads, rdma_writes, rdma_reply) = (List::default(), List::default(), None);
/// let body = RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads, rdma_writes, rdma_reply });
/// let header = RdmaMsg { rdma_xid: 1, rdma_vers: 1, rdma_credit: 1, rdma_body: body };
/// let e = unreduced_call(&header, &[]).unwrap_err();
/// assert!(matches!(e, DataPathError::Reassembly(ReassemblyError::NoPositionZeroChunk)));
/// assert_eq!(e.to_string(), "reassembly: RDMA_NOMSG call without a Position-Zero Read chunk");
/// assert_eq!(FailureAnswer::for_error(&e), Some(FailureAnswer::ErrChunk));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataPathError {
    /// A verbs call was refused at once (queue full, bad arguments, ...).
    #[error("verbs: {0}")]
    Verbs(#[from] rpcrdma_verbs::Error),
    /// A work request completed with an error; the queue pair is in the Error state.
    #[error("work request {} ({:?}) failed: {:?}", .0.wr_id, .0.opcode, .0.status)]
    Completion(Completion),
    /// A panic in application code run while posting a message (a capture sink,
    /// `rpcrdma_verbs::capture`, sees each Send before the backend gets it), caught on a
    /// thread that serves others too (a client's dispatcher, posting the core's own answers):
    /// the message was not sent, and the connection was closed (RFC 8166 section 4.5.4's
    /// signal for a message that cannot be sent); what was outstanding on it goes as on a
    /// lost connection.
    #[error("a panic in code run while posting {0}; the connection was closed")]
    PostPanicked(&'static str),
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
    Call(#[from] CallError<rpcrdma_verbs::Error>),
    /// The reply could not be marshaled; [`ReplyError::errcode`] says whether to answer
    /// `ERR_CHUNK` with [`send_error`] instead.
    #[error("marshaling the reply: {0}")]
    Reply(#[from] ReplyError),
    /// A draft-ietf-nfsv4-rpcrdma-version-two-07 header could not be written
    /// (`rpcrdma_v2::draft07::marshal`).
    #[error("marshaling the -07 header: {0}")]
    Draft07(#[from] rpcrdma_v2::draft07::marshal::MarshalError),
    /// The received message could not be reassembled from its chunks.
    #[error("reassembly: {0}")]
    Reassembly(#[from] ReassemblyError),
    /// A received call's Read chunks break DDP-eligibility (RFC 8166 section 6.1.1): do not
    /// process it; answer `GARBAGE_ARGS`.
    #[error("{0}")]
    DdpViolation(#[from] DdpViolation),
    /// A server's handler lent results that do not fit the reply it wrote
    /// ([`send_reply_with_lent_results`]): nothing was sent, and the call is answered with an RPC
    /// SYSTEM_ERR reply.
    #[error("the handler's lent results: {0}")]
    Lent(#[from] LentMismatch),
    /// The reply's XID is not the call's (the caller matches replies to calls).
    #[error("reply XID {got:#x} completes a call with XID {want:#x}")]
    XidMismatch {
        /// The call's XID.
        want: u32,
        /// The reply's.
        got: u32,
    },
    /// On a -07 connection the requester's credit window stayed shut for the connection's
    /// timeout while a reply waited to be sent: no RDMA2_GRANT opened it (section 4.2.1).
    /// The reply is lost; the connection is closed to say so.
    #[error("no credit to send on for {timeout:?}: the requester's window stayed shut (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.2.1)")]
    NoCredit {
        /// How long the reply waited.
        timeout: Duration,
    },
    /// On a -07 connection the requester sent more messages needing an answer than can wait
    /// behind a continued reply or its shut window ([`stream::ANSWERS_QUEUED_MOST`]): it lets
    /// none of them go and sends more. The connection is closed.
    #[error("{most} answers wait behind a continued reply or a shut credit window: the requester asks for more than it lets through")]
    AnswersPiledUp {
        /// How many may wait.
        most: usize,
    },
    /// The call's chunks, cut into segments no longer than the responder takes, make more
    /// segments than it takes in one header (draft-ietf-nfsv4-rpcrdma-version-two-07
    /// sections 5.2.3 and 5.2.4, its Maximum Segment Size and Count). The call is not sent;
    /// the connection goes on.
    #[error("the call's chunks take {segments} segments of at most {max_size} bytes, and at most {most} fit one header (the responder's Maximum Segment Count, draft-ietf-nfsv4-rpcrdma-version-two-07 section 5.2.4, or what the call's Send can list)")]
    TooManySegments {
        /// The segments the call's chunks took (counted up to the chunk that went over).
        segments: usize,
        /// The responder's Maximum Segment Count (or the most segments the call's Send could
        /// list, 16 bytes each, when that is fewer).
        most: usize,
        /// The responder's Maximum Segment Size, which the chunks were cut to.
        max_size: u32,
    },
    /// A call-only procedure's call (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.7,
    /// "Requesters MUST NOT use chunks when sending Call-only RPC procedures") too large to go
    /// without chunks: beyond the responder's Receive in one Send (or not on a -07
    /// connection). Nothing was sent; the connection goes on.
    #[error("a call-only message of {len} bytes goes without chunks in one Send of at most {threshold} bytes, and does not fit it (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.7)")]
    CallOnlyTooLarge {
        /// The RPC call's length.
        len: usize,
        /// The responder's Receive (the call inline threshold).
        threshold: usize,
    },
    /// The peer's Send with Invalidate killed a key that is not one of this call's (RFC 8797
    /// section 4.1: it "MUST invalidate an STag associated only with the Transaction ID").
    #[error("the reply invalidated rkey {0:#x}, which belongs to no chunk of this call")]
    ForeignInvalidation(u32),
}

/// The bit that marks a Receive's `wr_id` ([`ReceivePool`]); send-queue work requests take ids
/// from [`Transport::wr_id`], which never sets it.
const RECV_WR_BIT: u64 = 1 << 63;

/// Marks a send-queue work request nobody waits for (a call's Send: its reply says it
/// arrived, and a failure shows as the connection going down): it is posted unsignaled but
/// for every few ([`send_queue`]), and whoever reaps a completion of one drops it, keeping
/// only an error for [`Transport::ended`]. One fewer wait, and so one fewer wake-up of the
/// caller, per call.
const UNWAITED_WR_BIT: u64 = 1 << 62;

/// A connected queue pair, its protection domain, the work-request ids handed out on it, and the
/// completions reaped but not yet claimed.
///
/// Every wait for a completion goes through [`Transport::wait`] (or [`Transport::wait_all`],
/// [`ReceivePool::receive`]), which reaps the queue and sets aside completions of other work
/// requests until their owner asks: calls in flight at once never steal each other's
/// completions. What is set aside is handed out in the order it was reaped, as a completion
/// queue hands it out: a waiter for any Receive ([`ReceivePool::receive`]) gets the oldest, so a
/// message is never overtaken by later ones for as long as they keep arriving.
///
/// ```
/// # use std::time::Duration;
/// # use negotiate::datapath::Transport;
/// # use rpcrdma_verbs::*;
/// # let t = Duration::from_secs(5);
/// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
/// # let addr = listener.local_addr();
/// # let peer = std::thread::spawn(move || {
/// #     let pd = InProcess.alloc_pd().unwrap();
/// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
/// # });
/// let pd = InProcess.alloc_pd().unwrap();
/// let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// let conn = Transport::<InProcess>::new(pd, qp, t);
/// let region = conn.pd().register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
/// let (a, b) = (conn.wr_id(), conn.wr_id());
/// conn.qp().post_bind_window(a, &region, 0, 32, Access::REMOTE_READ).unwrap();
/// conn.qp().post_bind_window(b, &region, 32, 32, Access::REMOTE_READ).unwrap();
/// // Waiting for the second sets the first aside; it is still there afterwards.
/// assert_eq!(conn.wait(b).unwrap().opcode, Opcode::BindWindow);
/// assert_eq!(conn.wait(a).unwrap().wr_id, a);
/// # drop(peer.join());
/// ```
pub struct Transport<B: Backend> {
    pd: B::Pd,
    qp: B::Qp,
    timeout: Duration,
    next_wr_id: AtomicU64,
    /// Completions reaped while waiting for another one, and whether a waiter is polling
    /// now: one polls at a time (outside the lock), the others wait on `reaped` for what it
    /// sets aside.
    set_aside: Mutex<Reaped>,
    /// The send queue's signaling and what is known of its posting order, and the registered
    /// Send buffers, reused once their Send is known complete ([`Transport::post_sq`]).
    sends: Mutex<SendQueue<B::Region>>,
    /// Registered chunk regions of earlier calls, reused ([`Transport::chunk_region`]).
    chunks: ChunkPool<B::Region>,
    /// Registered copies of the results a server's handler lent ([`Transport::lent_source`]).
    lent: LentSources<B::Region>,
    /// The highest draft-ietf-07 running credit total a Send posted here carried, held while
    /// such a Send is stamped and posted ([`Transport::post_send_filled_draft07`]).
    draft07_total: Mutex<Option<u32>>,
    /// Where a -07 Send beyond a message's first gets its running total
    /// ([`Transport::continue_with`]); unset, no reply is held or continued.
    part_credits: OnceLock<(PartCredits, usize)>,
    /// Held while a -07 reply's Sends are posted: Payload streams of two RPC messages must not
    /// interleave (section 4.1), and a continued reply's parts may wait for a GRANT.
    payload_stream: Mutex<()>,
    /// Threads waiting for `payload_stream` ([`Transport::blocked_sending`]).
    stream_waiters: AtomicUsize,
    /// Woken as a thread comes to wait for `payload_stream` ([`Transport::tell_when_blocked`]).
    blocked_tell: OnceLock<std::task::Waker>,
    /// -07 answers waiting for the payload stream or for credit ([`Transport::answer_draft07`]).
    answers: Mutex<VecDeque<Vec<u8>>>,
    /// How many `answers` hold, read without the lock.
    answers_waiting: AtomicUsize,
    /// Whether a reply's Send is posted without waiting for its completion
    /// ([`Transport::set_unwaited_replies`]).
    unwaited_replies: bool,
    /// Bytes this side's calls offered (`QueuePair::offer_read`) whose replies have not come:
    /// kept within half what the peer holds (`QueuePair::offers_held`), so that none is
    /// passed over before the peer takes it (`datapath::call::offer_reads`).
    offered_out: Arc<AtomicUsize>,
}

/// Where a -07 connection's Sends get their running totals as they are posted
/// (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.2.1): given a deadline, it returns the
/// running total the next Send carries, counted as sent, once the requester's window has
/// room, waiting for its RDMA2_GRANT until then; `None` when none came by the deadline or the
/// connection ended. A server's connections have one from the server's event loop.
pub type PartCredits = Box<dyn Fn(Instant) -> Option<u32> + Send + Sync>;

impl<B: Backend> Transport<B> {
    /// Wraps a connected queue pair and the protection domain it was created in; every wait
    /// gives up after `timeout`.
    pub fn new(pd: B::Pd, qp: B::Qp, timeout: Duration) -> Self {
        let sends = Mutex::new(SendQueue::new(qp.caps().max_send_wr));
        Transport {
            pd,
            qp,
            timeout,
            next_wr_id: AtomicU64::new(1),
            // Room from the start for the waiters and the completions set aside a busy
            // connection sees, so that its steady state allocates nothing.
            set_aside: Mutex::new(Reaped {
                completions: VecDeque::with_capacity(2 * REAP_BATCH),
                waiting: Vec::with_capacity(16),
                unpark: Vec::with_capacity(16),
                ..Reaped::default()
            }),
            sends,
            chunks: ChunkPool::new(),
            lent: LentSources::new(),
            draft07_total: Mutex::default(),
            part_credits: OnceLock::new(),
            payload_stream: Mutex::default(),
            stream_waiters: AtomicUsize::new(0),
            blocked_tell: OnceLock::new(),
            answers: Mutex::default(),
            answers_waiting: AtomicUsize::new(0),
            unwaited_replies: false,
            offered_out: Arc::default(),
        }
    }

    /// Makes [`send_reply`] return once a reply is posted, without waiting for its Send's
    /// completion, where the queue pair reads a work request's memory as it is posted
    /// ([`QueuePair::memory_read_at_post`]; otherwise this does nothing): the memory is free
    /// then, and waiting only cost the wait. Worth it where that completion waits on the peer:
    /// over TCP it is the requester's acknowledgement, a network round trip on which the
    /// serving thread slept; in process a Send completes as it is posted, and the wait is one
    /// look. A Send that fails still ends the connection: its error completion, or the queue
    /// pair's Error state, reaches whoever reaps next.
    pub fn set_unwaited_replies(&mut self, on: bool) {
        self.unwaited_replies = on && self.qp.memory_read_at_post();
    }

    /// Makes this -07 connection take each Send's running total as it is posted (all but its
    /// GRANTs; draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.2.1): `credits` gives it (see
    /// [`PartCredits`]), so a reply waits for credit and may continue across Sends, up to
    /// `max_parts` of them (section 6.6.4). The core must count its Sends the same way
    /// ([`Responder::count_draft07_sends_when_posted`](crate::responder::Responder::count_draft07_sends_when_posted)).
    /// Without it a Send carries the total its message was given when judged, and a reply too
    /// large for the requester's Receive and Reply chunk is answered
    /// RDMA2_ERR_REPLY_RESOURCE. Set once; false if it was set already.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use negotiate::datapath::Transport;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let peer = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
    /// # });
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// let conn = Transport::<InProcess>::new(pd, qp, t);
    /// // A requester that grants 8 Sends in all, counted from 1.
    /// let sent = std::sync::atomic::AtomicU32::new(1);
    /// let credits = move |_deadline| {
    ///     let n = sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    ///     (n <= 8).then_some(n)
    /// };
    /// assert!(conn.continue_with(Box::new(credits), 16));
    /// assert!(!conn.continue_with(Box::new(|_| None), 16));
    /// # drop(peer.join());
    /// ```
    pub fn continue_with(&self, credits: PartCredits, max_parts: usize) -> bool {
        self.part_credits.set((credits, max_parts)).is_ok()
    }

    /// The running total a -07 Send about to be posted carries: taken now, waiting until
    /// `deadline` for the requester's window to open, where this connection's Sends are
    /// counted as posted ([`Transport::continue_with`]); else `carried`, the total its message
    /// was given when judged. Call it holding [`Transport::payload_stream`], so that totals are
    /// taken in posting order.
    pub(crate) fn draft07_credit(&self, carried: u32, deadline: Instant) -> Result<u32, DataPathError> {
        match self.part_credits.get() {
            Some((credits, _)) => credits(deadline).ok_or(DataPathError::NoCredit { timeout: self.timeout }),
            None => Ok(carried),
        }
    }

    /// When a -07 message's Sends started now must all be posted by: this connection's
    /// timeout from now (one deadline for every part of a continued reply).
    pub(crate) fn draft07_deadline(&self) -> Instant {
        // (A timeout too long to add, `Duration::MAX` for "never", is taken as a third of a
        // century.)
        Instant::now() + self.timeout.min(Duration::from_secs(1 << 30))
    }

    /// The most Sends a -07 reply on this connection may continue across: 0 when its replies
    /// do not continue ([`Transport::continue_with`]).
    pub(crate) fn max_parts(&self) -> usize {
        self.part_credits.get().map_or(0, |(_, most)| *most)
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
        self.next_wr_id.fetch_add(1, Ordering::Relaxed) & !(RECV_WR_BIT | UNWAITED_WR_BIT)
    }

    /// A fresh `wr_id` for a send-queue work request nobody will wait for: whoever reaps its
    /// completion drops it, keeping an error for [`Transport::ended`]. For work requests whose
    /// effect the send queue's order already guarantees to what follows them (a memory
    /// window bound before the Send that advertises it: a send queue executes its work
    /// requests in order), as the Linux client chains its registrations before its Send
    /// without waiting.
    fn unwaited_wr_id(&self) -> u64 {
        self.wr_id() | UNWAITED_WR_BIT
    }

    /// Closes the connection (its queue pair goes to the Error state, flushing what is
    /// outstanding), remembering `why` for [`Transport::ended`] if it was still up: a
    /// connection this side gives up on says so afterwards instead of looking lost.
    pub fn close(&self, why: impl std::fmt::Display) {
        if self.qp.state() == QpState::Ready {
            let mut st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
            st.closed.get_or_insert_with(|| why.to_string());
        }
        self.qp.disconnect();
    }

    /// How the connection ended; `None` while its queue pair is up. [`Ended::Closed`] when this
    /// side closed it with [`Transport::close`] first, [`Ended::Lost`] otherwise.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use negotiate::datapath::{Transport, Ended};
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let peer = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// #     Transport::<InProcess>::new(pd, qp, t)
    /// # });
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// let conn = Transport::<InProcess>::new(pd, qp, t);
    /// let other = peer.join().unwrap();
    /// assert_eq!(conn.ended(), None);
    /// conn.close("done with it");
    /// assert_eq!(conn.ended(), Some(Ended::Closed("done with it".into())));
    /// while other.qp().state() == QpState::Ready {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(other.ended(), Some(Ended::Lost { first_error: None }));
    /// ```
    pub fn ended(&self) -> Option<Ended> {
        if self.qp.state() == QpState::Ready {
            return None;
        }
        let st = self.set_aside.lock().unwrap_or_else(PoisonError::into_inner);
        Some(match &st.closed {
            Some(why) => Ended::Closed(why.clone()),
            None => Ended::Lost { first_error: st.first_error },
        })
    }

    /// Posts `bytes` as one Send (with Invalidate of `invalidate`); returns the work request's
    /// id.
    fn post_send_bytes(&self, bytes: &[u8], invalidate: Option<u32>) -> Result<u64, DataPathError> {
        let id = self.wr_id();
        self.post_send_filled(id, invalidate, bytes.len(), |buf, _| {
            buf.copy_from_slice(bytes);
            Ok(bytes.len())
        })?;
        Ok(id)
    }

    /// Posts one Send `id` (with Invalidate of `invalidate`) whose bytes `fill` writes into a
    /// buffer of `capacity` bytes and counts; a failing `fill` posts nothing. RDMA Writes that
    /// `fill` adds to its second argument go before the Send, in one chain with it (one
    /// doorbell, [`QueuePair::post_chain`]): a reply's Write chunks. Every message
    /// this crate sends passes here (to capture them, wrap the backend in
    /// `rpcrdma_verbs::capture::Captured`).
    ///
    /// The buffer is a registered Send buffer reused from an earlier Send when the message fits
    /// one of [`SEND_BUFFER_LEN`] (registering a buffer per Send is what a small message cost
    /// most on a real device, and marshaling straight into it saves a copy and an allocation);
    /// a larger one gets a buffer of its own. Whoever reaps the Send's completion, or that of a
    /// work request posted after it (the Send may be unsignaled), gives the buffer back
    /// ([`Transport::send_done`]); the posted Send keeps it registered until then.
    fn post_send_filled(
        &self,
        id: u64,
        invalidate: Option<u32>,
        capacity: usize,
        fill: impl FnOnce(&mut [u8], &mut ChainedWrites<B::Region>) -> Result<usize, DataPathError>,
    ) -> Result<(), DataPathError> {
        let filled = self.fill_send(capacity, fill)?;
        self.post_filled(id, invalidate, filled)
    }

    /// The first half of [`Transport::post_send_filled`]: a Send buffer of at least
    /// `capacity` bytes filled by `fill` (with the RDMA Writes to go before it), to be posted
    /// later ([`Transport::post_filled`]) or handed back ([`Transport::discard_filled`]).
    fn fill_send(
        &self,
        capacity: usize,
        fill: impl FnOnce(&mut [u8], &mut ChainedWrites<B::Region>) -> Result<usize, DataPathError>,
    ) -> Result<FilledSend<B>, DataPathError> {
        let mut writes = ChainedWrites::new();
        if capacity > SEND_BUFFER_LEN {
            let mut bytes = vec![0; capacity];
            let len = fill(&mut bytes, &mut writes)?;
            bytes.truncate(len);
            let region = self.pd.register(bytes, Access::empty())?;
            return Ok(FilledSend { region, len, pooled: false, writes });
        }
        // A free buffer, or a registration counted here.
        let reused = self.sends().take_free();
        let region = match reused {
            Some(region) => region,
            None => self.pd.register(vec![0; SEND_BUFFER_LEN], Access::empty())?,
        };
        match region.with_mut(|b| fill(&mut b[..capacity], &mut writes)) {
            Ok(len) => Ok(FilledSend { region, len, pooled: true, writes }),
            Err(e) => {
                self.sends().give_back(region);
                Err(e)
            }
        }
    }

    /// Posts a Send buffer [`Transport::fill_send`] filled, as send-queue work request `id`,
    /// after the RDMA Writes it carries, in one chain.
    fn post_filled(&self, id: u64, invalidate: Option<u32>, filled: FilledSend<B>) -> Result<(), DataPathError> {
        let FilledSend { region, len, pooled, writes } = filled;
        let sge = Sge::new(&region, 0, len);
        // The posted Send keeps its region registered until it completes; a pooled one is
        // recorded to be given back then.
        let buffer = pooled.then(|| region.clone());
        if writes.is_empty() {
            self.post_sq(id, buffer, |qp, flags| qp.post_send_with(id, &[sge], invalidate, flags))?;
        } else {
            self.post_sq_chain(&writes, Some(ChainedSend { id, buffer, sge, invalidate }))?;
        }
        Ok(())
    }

    /// Posts RDMA Writes alone, unwaited, in one chain: those of a reply whose Sends go out
    /// one part at a time after them (a -07 reply continued across Sends).
    fn post_writes_alone(&self, writes: &ChainedWrites<B::Region>) -> Result<(), DataPathError> {
        Ok(self.post_sq_chain(writes, None)?)
    }

    /// [`Transport::post_send_filled`] for a draft-ietf-nfsv4-rpcrdma-version-two-07 message
    /// whose `rdma_credit` is the running total `total`, or the one taken once it is filled
    /// when `take` gives a deadline ([`Transport::draft07_credit`]). The Send carries instead
    /// the highest total any Send of this connection has carried when that is higher, stamped
    /// and posted under one lock: a peer reads a total below the last as a lowered limit
    /// (section 4.2.1), which can leave its window shut with nothing in flight. Totals
    /// compare modulo 2^32.
    pub(crate) fn post_send_filled_draft07(
        &self,
        id: u64,
        invalidate: Option<u32>,
        capacity: usize,
        total: u32,
        take: Option<Instant>,
        fill: impl FnOnce(&mut [u8], &mut ChainedWrites<B::Region>) -> Result<usize, DataPathError>,
    ) -> Result<(), DataPathError> {
        let filled = self.fill_send(capacity, fill)?;
        // With `take`, the total is taken only now that the message is filled: one that could
        // not be filled (a reply its chunks cannot carry, answered with an RDMA2_ERROR instead)
        // uses no place in the window.
        let total = match take.map(|deadline| self.draft07_credit(total, deadline)) {
            Some(Err(e)) => {
                self.discard_filled(filled);
                return Err(e);
            }
            Some(Ok(taken)) => taken,
            None => total,
        };
        self.post_filled_stamped(id, invalidate, filled, total)
    }

    /// Posts a -07 message filled already (a call prepared ahead, say, whose `rdma_credit`
    /// was written when it was marshaled), stamped as [`Transport::post_send_filled_draft07`]
    /// stamps: the total it carries, or the highest one a Send of this connection carried.
    fn post_filled_draft07(
        &self,
        id: u64,
        invalidate: Option<u32>,
        filled: FilledSend<B>,
    ) -> Result<(), DataPathError> {
        let total = filled.region.with(|b| Fixed::read(b).and_then(|f| f.credit).unwrap_or(0));
        self.post_filled_stamped(id, invalidate, filled, total)
    }

    /// Stamps `filled` with `total`, or the highest total a Send of this connection carried
    /// when that is higher, and posts it, under one lock (totals compare modulo 2^32).
    fn post_filled_stamped(
        &self,
        id: u64,
        invalidate: Option<u32>,
        filled: FilledSend<B>,
        total: u32,
    ) -> Result<(), DataPathError> {
        let mut highest = self.draft07_total.lock().unwrap_or_else(PoisonError::into_inner);
        stamp(&mut highest, &filled, total);
        self.post_filled(id, invalidate, filled)
    }

    /// Posts the parts of one -07 message back to back, each unwaited and stamped as
    /// [`Transport::post_filled_stamped`] stamps it with its total from `totals`: every -07
    /// Send of a connection is stamped under the one lock held here, so nothing else goes
    /// between the parts (section 4.1: Payload streams do not interleave). After a failed
    /// post the parts left are given back unposted.
    fn post_parts_draft07(
        &self,
        parts: Vec<FilledSend<B>>,
        totals: impl Iterator<Item = u32>,
    ) -> Result<(), DataPathError> {
        let mut highest = self.draft07_total.lock().unwrap_or_else(PoisonError::into_inner);
        let mut parts = parts.into_iter();
        for (filled, total) in parts.by_ref().zip(totals) {
            stamp(&mut highest, &filled, total);
            if let Err(e) = self.post_filled(self.unwaited_wr_id(), None, filled) {
                parts.for_each(|f| self.discard_filled(f));
                return Err(e);
            }
        }
        Ok(())
    }

    /// Gives back a Send buffer filled and never posted.
    fn discard_filled(&self, filled: FilledSend<B>) {
        if filled.pooled {
            self.sends().give_back(filled.region);
        }
    }

    /// Posts send-queue work request `wr_id` with `post`, which gets the flags to post it
    /// with, holding `buffer` (a pooled Send buffer) until it is known complete. Every
    /// send-queue work request of the data path is posted here. Someone waits for the
    /// completion of a `wr_id` from [`Transport::wr_id`], so it is signaled; one from
    /// [`Transport::unwaited_wr_id`] is signaled only when [`send_queue`]'s rule says so,
    /// which also says how a completion frees what was posted before it without a lock held
    /// across the post.
    fn post_sq<T>(
        &self,
        wr_id: u64,
        buffer: Option<B::Region>,
        post: impl FnOnce(&B::Qp, SendFlags) -> rpcrdma_verbs::Result<T>,
    ) -> rpcrdma_verbs::Result<T> {
        let started = self.sends().start(wr_id, wr_id & UNWAITED_WR_BIT == 0, buffer);
        let flags = started.flags;
        let posted = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| post(&self.qp, flags))) {
            Ok(posted) => posted,
            Err(panic) => {
                // Code run as it was posted panicked (a capture sink, which sees each Send
                // before the backend gets it): not posted, so its record closes (a signaled
                // one left open would never complete, and hold every later one's), and the
                // panic goes on to whoever posted.
                self.sends().finish(wr_id, started, false);
                std::panic::resume_unwind(panic)
            }
        };
        if posted.is_err() || !flags.contains(SendFlags::SIGNALED) {
            self.sends().finish(wr_id, started, posted.is_ok());
        }
        posted
    }

    /// Posts `writes`, unwaited, then the Send `send` as one chain ([`QueuePair::post_chain`]: one doorbell
    /// instead of one per work request), each with the flags and bookkeeping [`Transport::post_sq`]
    /// gives it. The send queue executes them in order, so the Send completes after the Writes
    /// (RFC 8166 section 3.4.6.1 relies on that order).
    fn post_sq_chain(
        &self,
        writes: &[ChainedWrite<B::Region>],
        send: Option<ChainedSend<'_, B::Region>>,
    ) -> rpcrdma_verbs::Result<()> {
        let mut started: SmallVec<[(u64, send_queue::Started<B::Region>); CHAINED + 1]> = SmallVec::new();
        let send_sge;
        {
            let mut q = self.sends();
            for _ in writes {
                let id = self.unwaited_wr_id();
                started.push((id, q.start(id, false, None)));
            }
            send_sge = send.map(|ChainedSend { id, buffer, sge, invalidate }| {
                started.push((id, q.start(id, id & UNWAITED_WR_BIT == 0, buffer)));
                ([sge], invalidate)
            });
        }
        let sges: SmallVec<[[Sge<'_, B::Region>; 1]; CHAINED]> =
            writes.iter().map(|w| [Sge::new(&w.region, w.offset, w.len)]).collect();
        let mut wrs: SmallVec<[WorkRequest<'_, B::Region>; CHAINED + 1]> = writes
            .iter()
            .zip(&sges)
            .zip(&started)
            .map(|((w, sges), (wr_id, s))| WorkRequest::Write { wr_id: *wr_id, sges, remote: w.remote, flags: s.flags })
            .collect();
        if let (Some((sges, invalidate)), Some((wr_id, s))) = (&send_sge, started.last()) {
            wrs.push(WorkRequest::Send { wr_id: *wr_id, sges, invalidate: *invalidate, flags: s.flags });
        }
        // (A panic as the chain is posted closes its records as `post_sq`'s does: none posted.)
        let (posted, panic) = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.qp.post_chain(&wrs)))
        {
            Ok(posted) => (posted, None),
            Err(panic) => (Ok(()), Some(panic)),
        };
        let accepted = if panic.is_some() { 0 } else { posted.as_ref().map_or_else(|e| e.posted, |()| wrs.len()) };
        drop(wrs);
        // (`finish` leaves a signaled work request that was posted to its completion.)
        let mut q = self.sends();
        for (k, (wr_id, s)) in started.into_iter().enumerate() {
            q.finish(wr_id, s, k < accepted);
        }
        drop(q);
        if let Some(panic) = panic {
            std::panic::resume_unwind(panic);
        }
        posted.map_err(|e| e.error)
    }

    /// How many Send buffers this connection has registered: one per message larger than
    /// 4096 bytes, and otherwise only as many as were in flight at once (or not yet known
    /// complete: only every n-th Send is signaled), since a completed Send's buffer is reused.
    pub fn send_buffers_registered(&self) -> u64 {
        self.sends().registered
    }

    /// A completion of send-queue work request `wr_id` was reaped (success, failure or
    /// flush): it is complete, and so is what [`send_queue`] knows was posted before it; their
    /// Send buffers are free again.
    fn send_done(&self, wr_id: u64) {
        if wr_id & RECV_WR_BIT == 0 {
            self.sends().completed(wr_id);
        }
    }

    /// The send queue's bookkeeping, locked.
    fn sends(&self) -> std::sync::MutexGuard<'_, SendQueue<B::Region>> {
        self.sends.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A registered region of at least `len` bytes the local queue pair (and, through a
    /// window, the peer) may write: one this connection used before when one is kept (the
    /// registration cache, [`chunk_pool`]), its bytes not zeroed: only what the peer or a
    /// local RDMA Read writes into it, or what this side copies in, is ever read of it.
    fn chunk_region(&self, len: usize) -> rpcrdma_verbs::Result<B::Region> {
        self.chunks.take(&self.pd, len)
    }

    /// A kept (or new) chunk region holding a copy of `bytes` at its start
    /// ([`Transport::chunk_region`]): the registered source of a Read chunk or of RDMA Writes.
    fn chunk_copy(&self, bytes: &[u8]) -> rpcrdma_verbs::Result<B::Region> {
        let region = self.chunk_region(bytes.len())?;
        region.with_mut(|b| b[..bytes.len()].copy_from_slice(bytes));
        Ok(region)
    }

    /// The registered source of a result a server's handler lent: the copy this connection
    /// made when it sent the same `Arc` before, or a new one ([`lent_sources`]).
    fn lent_source(&self, result: &std::sync::Arc<[u8]>) -> rpcrdma_verbs::Result<LentSource<B::Region>> {
        self.lent.source(&self.pd, result)
    }

    /// Keeps a chunk region, its windows closed, for [`Transport::chunk_region`].
    fn keep_region(&self, region: B::Region) {
        self.chunks.keep(region);
    }

    /// Gives back the chunk buffers of a reply once its results have been read (a reply
    /// completed in place: [`PendingCall::complete_in_place`]); they stay registered for the
    /// connection's next calls.
    pub(crate) fn recycle_landed(&self, landed: Landed<B>) {
        landed.into_regions().for_each(|r| self.keep_region(r));
    }
}

/// The size of a pooled Send buffer: Version Two's default inline threshold, which every
/// small message fits.
const SEND_BUFFER_LEN: usize = rpcrdma_v2::DEFAULT_INLINE_THRESHOLD;

/// Writes into `filled`'s `rdma_credit` the running total `total`, or `highest` when that is
/// higher (a peer reads a total below the last as a lowered limit, section 4.2.1; totals
/// compare modulo 2^32), and keeps it as the highest.
fn stamp<B: Backend>(highest: &mut Option<u32>, filled: &FilledSend<B>, total: u32) {
    let stamped = match *highest {
        Some(h) if (total.wrapping_sub(h) as i32) < 0 => h,
        _ => total,
    };
    filled.region.with_mut(|b| rpcrdma_v1::header::set_credit(b, stamped));
    *highest = Some(stamped);
}

/// A Send buffer filled and not yet posted ([`Transport::fill_send`]).
struct FilledSend<B: Backend> {
    region: B::Region,
    len: usize,
    /// One of the connection's pooled buffers (given back when its Send completes), or one
    /// registered for this message alone.
    pooled: bool,
    /// RDMA Writes to post before it, in one chain with it: a reply's Write chunks.
    writes: ChainedWrites<B::Region>,
}

/// How many RDMA Writes a chain holds without allocating: a reply's Write chunks' segments.
const CHAINED: usize = 4;

/// The RDMA Writes to go before a Send ([`Transport::post_send_filled`]).
pub(crate) type ChainedWrites<R> = SmallVec<[ChainedWrite<R>; CHAINED]>;

/// The Send that ends a chain ([`Transport::post_sq_chain`]).
struct ChainedSend<'a, R> {
    id: u64,
    /// The pooled Send buffer it holds until it is known complete.
    buffer: Option<R>,
    sge: Sge<'a, R>,
    /// The rkey it invalidates (Send with Invalidate).
    invalidate: Option<u32>,
}

/// One RDMA Write of a chain: `len` bytes at `offset` of `region` to the peer's `remote`.
pub(crate) struct ChainedWrite<R> {
    pub(crate) region: R,
    pub(crate) offset: usize,
    pub(crate) len: usize,
    pub(crate) remote: RemoteBuf,
}

/// How a connection ended, as far as this side can tell ([`Transport::ended`]): the record
/// that says, after the fact, which side dropped a connection and why.
///
/// ```
/// use negotiate::datapath::Ended;
/// use rpcrdma_verbs::{Completion, Status};
/// let lost = Ended::Lost { first_error: Some(Completion { status: Status::RnrRetryExceeded, ..Completion::default() }) };
/// assert!(!lost.closed_here());
/// assert!(Ended::Closed("the server stopped".into()).closed_here());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// This side closed it ([`Transport::close`]) while it was up, for this reason.
    Closed(String),
    /// It went down under this side: the peer disconnected, or the transport failed a work
    /// request. `first_error` is the first error completion this side reaped on it: a
    /// [`WorkRequestFlushed`](rpcrdma_verbs::Status::WorkRequestFlushed) one says only that the queue
    /// pair was already down; any other status says what failed first (e.g.
    /// [`RnrRetryExceeded`](rpcrdma_verbs::Status::RnrRetryExceeded): the peer had no Receive posted
    /// for a Send of ours). `None` when no error completion was reaped here.
    Lost {
        /// The first error completion reaped on the connection, if any.
        first_error: Option<Completion>,
    },
}

impl Ended {
    /// Whether this side closed the connection (as opposed to losing it).
    pub fn closed_here(&self) -> bool {
        matches!(self, Ended::Closed(_))
    }

    /// Whether the connection ended without a failure on this side: closed here, or closed
    /// by the peer with nothing failing first but the work requests its close flushed (a
    /// client that exits, a server that stops). A log says such an end at info, and any
    /// other as a warning.
    ///
    /// ```
    /// use negotiate::datapath::Ended;
    /// use rpcrdma_verbs::{Completion, Opcode, Status};
    /// let flushed = Completion { opcode: Opcode::Recv, status: Status::WorkRequestFlushed, ..Completion::default() };
    /// assert!(Ended::Lost { first_error: Some(flushed) }.is_orderly());
    /// let failed = Completion { status: Status::RetryExceeded, ..Completion::default() };
    /// assert!(!Ended::Lost { first_error: Some(failed) }.is_orderly());
    /// ```
    pub fn is_orderly(&self) -> bool {
        match self {
            Ended::Closed(_) | Ended::Lost { first_error: None } => true,
            Ended::Lost { first_error: Some(c) } => c.status == rpcrdma_verbs::Status::WorkRequestFlushed,
        }
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Closed(why) => write!(f, "closed by this side: {why}"),
            Ended::Lost { first_error: None } => write!(f, "closed by the peer or the transport"),
            Ended::Lost { first_error: Some(c) } if c.status == rpcrdma_verbs::Status::WorkRequestFlushed => {
                write!(f, "closed by the peer or the transport (the work requests posted here were flushed)")
            }
            Ended::Lost { first_error: Some(c) } => {
                write!(f, "lost; first error completion: work request {} ({:?}) {:?}", c.wr_id, c.opcode, c.status)
            }
        }
    }
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
