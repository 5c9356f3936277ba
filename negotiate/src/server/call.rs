//! Serving one call: the one path from an accepted call header to its answer on the wire.
//! The [`Server`](super::Server)'s threads run it, and the deterministic simulator
//! (negotiate/tests/sim) runs it over its simulated verbs backend, so what the simulator
//! checks is this code, not a copy of it.

use super::*;
use crate::datapath::{send_answer, send_reply_with_lent_results};
use rpcrdma_v1::header::MessageKind;
use rpcrdma_v1::reassemble::fetch_len;
use rpcrdma_verbs::PeerHost;

use super::per_host::{HostCounts, HostSlot};

/// What the handler made of a call.
enum HandlerOutcome {
    /// The RPC reply it wrote.
    Replied(Vec<u8>),
    /// It panicked: the call is answered with an RPC SYSTEM_ERR reply (RFC 5531 section 9),
    /// and the connection serves on. A panic is the handler's failure, not the connection's.
    Panicked,
}

impl HandlerOutcome {
    /// Runs `handler`, catching a panic inside it. Its own posts (calls it makes, which it
    /// may wait for by any means) are not held with the loop's burst of replies.
    fn of(handler: impl FnOnce() -> Vec<u8>) -> HandlerOutcome {
        let _unheld = rpcrdma_verbs::PostBatch::pause();
        match crate::application::run(handler) {
            Some(reply) => HandlerOutcome::Replied(reply),
            None => HandlerOutcome::Panicked,
        }
    }
}

/// How [`serve_call`] answered a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// With its handler's reply: the call's version, how its arguments arrived, and how the
    /// reply went out.
    Reply(Version, ArrivedAs, ReplySent),
    /// With RDMA_ERROR ERR_CHUNK (RFC 8166 section 4.5.2 or 4.5.3).
    ErrChunk,
    /// With RDMA_ERROR ERR_CHUNK, before anything was fetched: the call's chunk memory did
    /// not fit the server's memory budget ([`crate::budget`]).
    OverBudget,
    /// With an RPC GARBAGE_ARGS reply (RFC 8166 sections 4.5.2 and 6.1.1).
    GarbageArgs,
    /// With an RPC SYSTEM_ERR reply: its handler panicked (RFC 5531 section 9).
    SystemErr,
    /// With an RPC SYSTEM_ERR reply: the server's binding
    /// ([`UpperLayerBinding`](rpcrdma_v1::ulb::UpperLayerBinding)) panicked on the call, as it
    /// was read (its handler then never ran) or as its reply was marshaled.
    BindingPanicked,
    /// With an RPC SYSTEM_ERR reply: its handler's reply was not an RPC reply to it (empty,
    /// another XID, not a REPLY), which the server logs as a warning.
    BadReply,
    /// Not at all: on a -07 connection a handler's empty reply to a call with no chunk marks
    /// it as a call-only procedure's (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.7:
    /// "There is no corresponding Reply"), whose call's version and arrival this gives.
    /// Whoever serves it tells the connection's core
    /// (`Connection::draft07_served_without_reply`), and sends the requester the RDMA2_GRANT
    /// that gives if its window needs one (4.2.1.1): no reply will carry a new total.
    CallOnly(Version, ArrivedAs),
}

/// How a call's arguments arrived (RFC 8166 section 3.5): inline, with Read chunks beside the
/// inline part (section 3.5.2), or whole in a Position-Zero Read chunk (section 3.5.3).
///
/// ```
/// use negotiate::server::ArrivedAs;
/// use rpcrdma_v1::header::{Header, HeaderLimits};
/// // An RDMA_MSG with no chunks and a 4-byte payload.
/// let msg: Vec<u8> = [7u32, 1, 32, 0, 0, 0, 0, 7].iter().flat_map(|w| w.to_be_bytes()).collect();
/// let header = Header::parse(&msg, &HeaderLimits::default()).unwrap();
/// assert_eq!(ArrivedAs::of(&header), ArrivedAs::Inline);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivedAs {
    /// In the Send, whole.
    Inline,
    /// Partly in the Send, with Read chunks for its DDP-eligible items.
    ReadChunks,
    /// Whole in a Position-Zero Read chunk (RDMA_NOMSG).
    Long,
}

impl ArrivedAs {
    /// How the call with this header brings its arguments.
    pub fn of(header: &Header<'_>) -> Self {
        if header.position_zero_chunk().is_some() {
            ArrivedAs::Long
        } else if !header.read_list().is_empty() {
            ArrivedAs::ReadChunks
        } else {
            ArrivedAs::Inline
        }
    }
}

/// The memory one serving thread keeps from one call to the next: the call message the Read
/// chunks land in, and the reply its handler writes. Kept, so that a steady stream of calls
/// allocates nothing; the call message's memory is counted against a server's memory budget
/// ([`CallBuffers::with_budget`]) and given back while the budget is short.
///
/// ```
/// use negotiate::budget::MemoryBudget;
/// use negotiate::server::CallBuffers;
/// let budget = MemoryBudget::new(1 << 20);
/// let buffers = CallBuffers::with_budget(&budget);
/// assert_eq!(buffers.charged(), 0); // nothing fetched yet
/// ```
#[derive(Debug, Default)]
pub struct CallBuffers {
    call: Vec<u8>,
    reply: Vec<u8>,
    /// The results the handler lent for its reply, kept for the next.
    lent: LentResults,
    /// The call message's memory (and, while a call is fetched, its landing buffer) counted
    /// against the server's budget; nothing with the default (no budget).
    charge: Charge,
    /// The hosts' shares of the call memory ([`ServerLimits::memory_per_host`]), a server's
    /// loop's (`CallBuffers::sharing`); whose share the next call's memory is counted
    /// against, and the most that share holds (set for each call, [`CallBuffers::share_for`]:
    /// two words, nothing shared touched unless the call has chunks); and, while a call is
    /// served, what it holds of it.
    shares: Option<Arc<HostCounts>>,
    share: Option<(PeerHost, usize)>,
    held_share: Option<HostSlot>,
}

impl CallBuffers {
    /// Buffers whose chunk memory is counted against `budget`: a call whose chunks do not
    /// fit is answered with ERR_CHUNK before anything is fetched ([`Answered::OverBudget`]).
    pub fn with_budget(budget: &Arc<MemoryBudget>) -> Self {
        CallBuffers { charge: Charge::empty(budget), ..CallBuffers::default() }
    }

    /// The bytes counted against the budget now.
    pub fn charged(&self) -> usize {
        self.charge.bytes()
    }

    /// Counts the next call's memory against `host`'s share of the call memory too, of
    /// which it may hold at most `most` ([`ServerLimits::memory_per_host`]): a call that
    /// does not fit its host's share is refused as one that does not fit the budget. `None`:
    /// the next call is counted against the budget alone.
    pub(super) fn share_for(&mut self, host: Option<PeerHost>, most: usize) {
        self.share = host.map(|h| (h, most));
    }

    /// Buffers whose calls are counted against the hosts' shares in `shares` too, as
    /// [`CallBuffers::share_for`] names each call's host.
    pub(super) fn sharing(self, shares: &Arc<HostCounts>) -> Self {
        CallBuffers { shares: Some(shares.clone()), ..self }
    }

    /// Makes room for `header`'s call before its chunks are fetched, counted against the
    /// budget: false if it does not fit. Only a call with Read chunks is counted: an inline
    /// call is no larger than the Receive it came in, which is counted with the connection.
    /// A call message that must grow is allocated anew, zeroed by the allocator (fresh pages,
    /// touched only as the RDMA Reads write them), not grown and filled.
    fn make_room(&mut self, header: &Header<'_>) -> bool {
        let reads = header.read_list();
        if reads.is_empty() {
            return true;
        }
        let landing = usize::try_from(fetch_len(reads)).unwrap_or(usize::MAX);
        // The whole message, and each chunk's XDR padding (RFC 8166 section 3.4.5.2).
        let message = header.payload().len().saturating_add(landing).saturating_add(4 * reads.len());
        // An RDMA_NOMSG call's chunks land in a buffer of their own first (whether or not
        // it has a Position-Zero chunk: `fetch_call` decides by the message's kind).
        let landing_buffer = if header.kind() == MessageKind::NoMsg { landing } else { 0 };
        // The host's share counts what this call needs, not what the thread keeps.
        if let (Some(counts), Some((host, most))) = (&self.shares, self.share.take()) {
            match counts.take_memory(host, message.saturating_add(landing_buffer), most, &self.charge) {
                Some(held) => self.held_share = Some(held),
                None => return false,
            }
        }
        let want = self.call.capacity().max(message).saturating_add(landing_buffer);
        if !self.charge.try_grow_to(want) {
            return false;
        }
        if self.call.capacity() < message {
            self.call = vec![0; message];
        }
        true
    }

    /// After a call: the landing buffer's charge given back, and the call message's memory too
    /// while the budget is short (more than half used).
    fn settle(&mut self) {
        (self.share, self.held_share) = (None, None);
        if self.charge.give_back_if_short() {
            self.call = Vec::new();
        } else {
            self.charge.shrink_to(self.call.capacity());
        }
    }
}

/// Serves the call whose header the connection's core ([`Connection`](crate::connection::Connection)) accepted (and whose reply
/// parameters it gave): fetches its Read chunks straight to their place in the call message
/// (RFC 8166 section 3.4.5), runs `handler` on the message (a panic inside it is caught and
/// answered with SYSTEM_ERR), calls `answering` once the handler is done and before anything
/// is posted (the call stops counting as in flight there: RFC 8166 section 3.3.1), and
/// answers: the handler's reply, its RDMA Writes and Send together, or, when the call could
/// not be served, what [`FailureAnswer::for_error`] says (RFC 8166 section 4.5). `Err`:
/// nothing could be sent; the caller closes the connection to signal the lost reply (RFC 8166
/// section 4.5.4).
///
/// ```
/// use std::time::{Duration, Instant};
/// use negotiate::datapath::{send_call, CallParams, Transport, ReceivePool};
/// use negotiate::responder::ResponderConfig;
/// use negotiate::connection::{Arrival, Connection as Core, Received};
/// use negotiate::server::{serve_call, ArrivedAs, CallBuffers, Answered};
/// use rpcrdma_v1::marshal_call::InlineThresholds;
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
/// use rpcrdma_verbs::{Backend, ConnectRequest, InProcess, Listener, QpCaps};
///
/// let t = Duration::from_secs(5);
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 64 };
/// let listener = InProcess.listen(&InProcess.any_address()).unwrap();
/// let addr = listener.local_addr();
/// let (ready, posted) = std::sync::mpsc::channel();
/// let server = std::thread::spawn(move || {
///     let pd = InProcess.alloc_pd().unwrap();
///     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
///     let conn = Transport::<InProcess>::new(pd, qp, t);
///     let pool = ReceivePool::new(&conn, 4, 1024).unwrap();
///     ready.send(()).unwrap();
///     let got = pool.receive(&conn).unwrap();
///     let mut core: Core<()> = Core::server(ResponderConfig::default(), Duration::from_secs(60), &[], None, Instant::now());
///     let Received::Call { header, params } = core.handle_receive(&got.bytes, Arrival::default(), Instant::now()) else {
///         panic!()
///     };
///     // The handler: the call echoed as a reply (msg_type 1).
///     let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
///     let served = serve_call(&conn, &header, &params, &ulb, &echo, &mut CallBuffers::default(), || {});
///     assert!(matches!(served, Ok(Answered::Reply(_, ArrivedAs::Inline, _))));
///     conn
/// });
/// let pd = InProcess.alloc_pd().unwrap();
/// let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// let conn = Transport::<InProcess>::new(pd, qp, t);
/// let pool = ReceivePool::new(&conn, 4, 1024).unwrap();
/// let params = CallParams { version: rpcrdma_v1::Version::ONE, credits: 4, thresholds: InlineThresholds::default(), dialect: None, remote_invalidation: false, segments: negotiate::thresholds::SegmentLimits::NONE };
/// posted.recv().unwrap();
/// let call = [0, 0, 0, 7, 0, 0, 0, 0];
/// let pending = send_call(&conn, &call, &ulb, &params).unwrap();
/// let got = pool.receive(&conn).unwrap();
/// let Verdict::Accept(reply) = receive(&got.bytes, &ReceivePolicy::default()) else { panic!() };
/// let mut message = Vec::new();
/// pending.complete(&conn, &call, &reply, got.invalidated_rkey, &ulb, &mut message).unwrap();
/// assert_eq!(message, [0, 0, 0, 7, 0, 0, 0, 1]);
/// server.join().unwrap();
/// ```
pub fn serve_call<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    header: &Header<'_>,
    params: &ReplyParams,
    ulb: &U,
    handler: &dyn Handler,
    buffers: &mut CallBuffers,
    answering: impl FnOnce(),
) -> Result<Answered, DataPathError> {
    if !buffers.make_room(header) {
        // What this thread kept goes back too while the budget is short.
        buffers.settle();
        answering();
        let err = super::failure::unservable(header.xid(), params, None);
        return send_answer(conn, err.as_bytes(), params.draft07).map(|()| Answered::OverBudget);
    }
    let answered = serve_counted(
        conn,
        header,
        params,
        ulb,
        handler,
        (&mut buffers.call, &mut buffers.reply, &mut buffers.lent),
        answering,
    );
    // The handler's `Arc`s are not held past the call, whichever way it was answered.
    buffers.lent.clear();
    buffers.settle();
    answered
}

/// Whether `reply` is an RPC reply to `call`: its XID, then REPLY (RFC 5531 section 9).
fn replies_to(reply: &[u8], call: &[u8]) -> bool {
    reply.len() >= 8 && call.len() >= 4 && reply[..4] == call[..4] && reply[4..8] == [0, 0, 0, 1]
}

/// Why `reply` is not an RPC reply to `call`, for the log.
fn not_a_reply(reply: &[u8], call: &[u8]) -> String {
    let word = |b: &[u8], at: usize| b.get(at..at + 4).map(|w| u32::from_be_bytes(w.try_into().unwrap()));
    match (word(reply, 0), word(reply, 4)) {
        (None, _) if reply.is_empty() => "it is empty".into(),
        (None, _) | (_, None) => format!("{} bytes, too short for an XID and a message type", reply.len()),
        (Some(x), _) if Some(x) != word(call, 0) => format!("its XID is {x:#010x}"),
        (_, Some(t)) => format!("its message type is {t}, not REPLY (1)"),
    }
}

/// [`serve_call`] once its memory is counted, with the thread's call and reply buffers.
fn serve_counted<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    header: &Header<'_>,
    params: &ReplyParams,
    ulb: &U,
    handler: &dyn Handler,
    (call, reply, lent): (&mut Vec<u8>, &mut Vec<u8>, &mut LentResults),
    answering: impl FnOnce(),
) -> Result<Answered, DataPathError> {
    lent.clear();
    // `None`: the binding panicked reading the call (after its Reads completed).
    let service = match binding_step(|| fetch_call(conn, header, ulb, call)) {
        Some(fetched) => fetched.map(|()| {
            Some(HandlerOutcome::of(|| {
                let mut r = std::mem::take(reply);
                r.clear();
                handler.handle_lending(call, &mut r, lent);
                r
            }))
        }),
        None => Ok(None),
    };
    answering();
    service
        .and_then(|service| match service {
            None => binding_panicked(conn, header, call, params, "reading the call"),
            // An empty reply on -07 to a call with no chunk: a call-only procedure's call
            // (section 4.7: it has none), answered with nothing (an RPC reply is never empty:
            // its XID alone is four bytes).
            // (A call-only procedure's call has no chunk: draft-07 section 4.7.)
            Some(HandlerOutcome::Replied(r))
                if r.is_empty() && lent.is_empty() && params.draft07 && header.chunk_lists().is_empty() =>
            {
                *reply = r;
                Ok(Answered::CallOnly(params.version, ArrivedAs::of(header)))
            }
            // A reply that is not an RPC reply to this call (empty, another XID, not a REPLY)
            // would leave the caller waiting and, for a first call, taking the server for one
            // without Version Two: the caller gets SYSTEM_ERR instead (RFC 5531 section 9).
            Some(HandlerOutcome::Replied(r)) if !replies_to(&r, call) => {
                log::warn!(
                    "the handler's reply to call {:#010x} is not an RPC reply to it ({}); answered SYSTEM_ERR",
                    header.xid(),
                    not_a_reply(&r, call)
                );
                *reply = r;
                send_rpc_error(conn, header, call, params, encode_system_err_reply).map(|()| Answered::BadReply)
            }
            Some(HandlerOutcome::Replied(mut r)) => {
                let sent = binding_step(|| {
                    send_reply_with_lent_results(conn, header, call, &mut r, lent.as_slice(), ulb, params)
                        .map(|s| Answered::Reply(params.version, ArrivedAs::of(header), s))
                });
                // Its memory takes the next reply of this thread.
                *reply = r;
                match sent {
                    None => binding_panicked(conn, header, call, params, "marshaling the reply"),
                    // Lent results the reply has no place for: not an answer to the call.
                    Some(Err(DataPathError::Lent(e))) => {
                        log::warn!(
                            "the handler's reply to call {:#010x} does not fit the results it lent ({e}); answered SYSTEM_ERR",
                            header.xid()
                        );
                        send_rpc_error(conn, header, call, params, encode_system_err_reply)
                            .map(|()| Answered::BadReply)
                    }
                    Some(sent) => sent,
                }
            }
            Some(HandlerOutcome::Panicked) => {
                send_rpc_error(conn, header, call, params, encode_system_err_reply).map(|()| Answered::SystemErr)
            }
        })
        .or_else(|e| match FailureAnswer::for_error(&e) {
            // What of the call was received: a binding copes with a short one.
            Some(answer) => answer_failure(conn, header, call, params, answer, &e),
            None => Err(e),
        })
}

/// Runs `step`, which calls the server's binding on a call (its DDP-eligible items as it is
/// read, its results as its reply is marshaled): `None` when the binding panicked. A binding
/// is the application's code run on the peer's bytes, as a handler is: its panic is that
/// call's failure ([`Answered::BindingPanicked`]), not the serving thread's end. Both steps
/// call the binding before they post anything (the call's Reads complete first), so nothing
/// of the call is in flight when it unwinds.
fn binding_step<R>(step: impl FnOnce() -> R) -> Option<R> {
    crate::application::run(step)
}

/// Answers a call whose binding panicked while `doing`: an RPC SYSTEM_ERR reply (RFC 5531
/// section 9), which asks the binding nothing.
fn binding_panicked<B: Backend>(
    conn: &Transport<B>,
    header: &Header<'_>,
    call: &[u8],
    params: &ReplyParams,
    doing: &str,
) -> Result<Answered, DataPathError> {
    log::warn!("the server's binding panicked {doing} of call {:#010x}; answered SYSTEM_ERR", header.xid());
    send_rpc_error(conn, header, call, params, encode_system_err_reply).map(|()| Answered::BindingPanicked)
}
