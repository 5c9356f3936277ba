//! The responder's version-hiding API: [`Server::start`] listens, accepts each connection with
//! its private data and Receives already posted, and serves every call with a handler that
//! sees only RPC messages (blocking, or a future on the caller's executor: [`OnExecutor`]),
//! several calls of one connection at once up to
//! [`ServerLimits::calls_in_progress`] (the credits granted, RFC 8166 section 3.3.1, and a
//! bound of the server's own); replies go out as their calls finish, in any order (RPC
//! matches them by XID). Each connection's decisions are its [`Connection`](crate::connection::Connection) core's (the
//! [`Responder`](crate::responder::Responder) state machine judges each message by its
//! version's rules and says how to reply); the data path fetches Read chunks and fills Write
//! and Reply chunks; [`crate::limits`] lists every bound the server keeps.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cm_private_data::PrivateData;
use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_reply::ReplyForm;
use rpcrdma_v1::reassemble::{encode_garbage_args_reply, encode_system_err_reply, GARBAGE_ARGS_REPLY_LEN};
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::verdict::ErrorReply;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Backend, ConnectRequest, Listener, PeerAddress, QpCaps, QpState, QueuePair};

use crate::backchannel::{self, Backchannel, Forward, ServerSide};
use crate::budget::{Charge, MemoryBudget};
use crate::datapath::{fetch_call, send_reply, DataPathError, Ended, ReceivePool, ReplyParams, ReplySent, Transport};
use crate::extension::Extension;
use crate::limits::{Refusals, ServerLimits};
use crate::responder::{self, ResponderConfig};
use crate::thresholds::{self, Advertised, ADVERTISED_SIZE};
use rpcrdma_v2::properties::TransportProperties;

use crate::host_auth::HostAuth;

mod accept;
mod async_handler;
mod call;
mod event_loop;
mod failure;
mod lost_replies;
mod per_host;
pub use async_handler::{AsyncHandler, CallTask, OnExecutor};
pub use call::{serve_call, Answered, ArrivedAs, CallBuffers};
use event_loop::Loop;
pub use failure::FailureAnswer;
use failure::{answer_failure, send_rpc_error};
pub use lost_replies::{LOST_REPLIES_KEPT, LOST_REPLIES_PER_HOST};

/// How a [`Server`] accepts and serves. Build one from [`Default`] with the setters, each
/// named after the field it sets (the responder's most used fields have their own):
///
/// ```
/// use negotiate::limits::ServerLimits;
/// use negotiate::server::ServerConfig;
/// use rpcrdma_v1::Version;
/// let v1_only = ServerConfig::default()
///     .versions((Version::ONE, Version::ONE))
///     .credits(16)
///     .limits(ServerLimits::default().max_connections(8));
/// assert_eq!((v1_only.responder.credits, v1_only.limits.max_connections), (16, 8));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Versions, credits, header limits.
    pub responder: responder::ResponderConfig,
    /// The RFC 8797 private data to send in each accept, or `None`.
    pub private_data: Option<PrivateData>,
    /// Eight bytes to send in each accept *instead of* `private_data`, for interop tests only
    /// ([`ServerConfig::foreign_private_data`]).
    pub(crate) foreign_private_data: Option<[u8; 8]>,
    /// Queue pair capacities.
    pub caps: QpCaps,
    /// How long the server waits for the completion of one of its own work requests (the RDMA
    /// Reads of a call's chunks, the Writes and the Send of its reply) before it gives the
    /// connection up and closes it ([`Peer::ended`] then says so, and why). It bounds nothing
    /// else: an idle connection, or a handler slower than this, keeps its connection.
    ///
    /// A completion that never comes is a peer that stays connected but no longer takes part.
    /// RC hardware fails such a work request itself once its retries are spent and moves the
    /// queue pair to Error (the Linux kernel's svcrdma relies on that alone, with no timer of
    /// its own); the TCP backend waits on the peer's reader and would wait for ever, holding
    /// the connection's thread, so the server keeps this bound. The default, 5 s, is far above
    /// what a live peer takes even on a starved machine: 640,000 calls of 64 callers over TCP
    /// on two cores beside four busy-looping processes (about 1,300 calls/s) saw at most 64 ms
    /// for one wait, and never the timeout. A longer one would only notice a dead TCP peer
    /// later; a shorter one risks closing a live connection, whose calls in flight the client
    /// then sends again (and, with no duplicate reply cache, may have executed twice).
    pub timeout: Duration,
    /// Connection counts, handshake, idle and memory bounds ([`crate::limits`] lists every
    /// bound and where it is set).
    pub limits: ServerLimits,
    /// Version Two extensions (draft section 3.1): RDMA_OPTIONAL messages from clients go to
    /// these handlers, each connection registering them anew ([`crate::extension`]); any
    /// other opttype is answered with RDMA_ERR_INVAL_OPTION. None by default.
    pub extensions: Vec<Extension>,
    /// draft-ietf-nfsv4-rpcrdma-version-two-07's extensions (its Appendix B): clients'
    /// messages of their header types go to their handlers, and their properties are stated
    /// in this server's RDMA2_CONNPROP_FINAL ([`crate::extension07`]). None by default.
    pub draft07_extensions: Vec<crate::extension07::Draft07Extension>,
    /// The transport properties this server states (`specs/rpcrdma2-transport-properties.txt`,
    /// types in `rpcrdma_v2::properties`), or `None` to not have the extension (a client's
    /// properties request is then answered RDMA_ERR_INVAL_OPTION, and the client falls back).
    /// A requester's stated properties change the replies after its request: their inline
    /// threshold, and whether they may use Send with Invalidate. The Receives are made no
    /// smaller than the stated `max_recv_size`. `None` by default.
    pub properties: Option<TransportProperties>,
    /// The host authentication material this server states on each -07 connection, in its
    /// RDMA2_CONNPROP_FINAL (draft-ietf-nfsv4-rpcrdma-version-two-07 section 5.2.6; see
    /// [`crate::host_auth`]); `None` (the default) states none. The client's, if it states
    /// any, is in [`Peer::draft07_properties`].
    pub host_auth: Option<HostAuth>,
}

impl Default for ServerConfig {
    /// Versions 1 to 2, 32 credits, private data advertising 4096-byte Sends and Receives with
    /// the R flag set, a 5 s completion timeout (see [`ServerConfig::timeout`] for why).
    ///
    /// The R flag is set as the Linux server sets it: toward a requester that sets it too, a
    /// reply whose call's chunks all use one rkey is a Send with Invalidate (RFC 8797 section
    /// 4.1), which spares the requester a Local Invalidate and its wait for every such call.
    fn default() -> Self {
        ServerConfig {
            responder: responder::ResponderConfig::default(),
            private_data: Some(PrivateData::new(
                cm_private_data::Flags::REMOTE_INVALIDATE,
                ADVERTISED_SIZE,
                ADVERTISED_SIZE,
            )),
            foreign_private_data: None,
            caps: QpCaps::default(),
            timeout: Duration::from_secs(5),
            limits: ServerLimits::default(),
            extensions: Vec::new(),
            draft07_extensions: Vec::new(),
            properties: None,
            host_auth: None,
        }
    }
}

rpcrdma_verbs::setters!(ServerConfig {
    responder: ResponderConfig,
    private_data: Option<PrivateData>,
    caps: QpCaps,
    timeout: Duration,
    limits: ServerLimits,
    extensions: Vec<Extension>,
    draft07_extensions: Vec<crate::extension07::Draft07Extension>,
    properties: Option<TransportProperties>,
    host_auth: Option<HostAuth>,
});

nested_setters!(ServerConfig, responder { versions: (Version, Version), credits: u32 });

impl ServerConfig {
    /// For interop tests only: send these eight bytes in each accept *instead of*
    /// `private_data` (another layer's, or garbage), to see a requester treat them as absent
    /// (RFC 8797 section 5.1). The interop matrix's "garbage private data" axis uses it.
    #[doc(hidden)]
    #[must_use]
    pub fn foreign_private_data(mut self, bytes: Option<[u8; 8]>) -> Self {
        self.foreign_private_data = bytes;
        self
    }
}

/// What serves a [`Server`]'s calls: from the whole RPC call message to the whole RPC reply
/// message. Any `Fn(&[u8]) -> Vec<u8>` closure is one; [`WriteReply`] wraps one that writes
/// its reply into the buffer it is given instead, so that a steady small call allocates
/// nothing. A panic inside it is caught: the call is answered with an RPC SYSTEM_ERR reply and
/// the connection goes on. So is a reply that is not an RPC reply to the call (empty, with
/// another XID, or not a REPLY), with a warning in the log ([`ServerStats::bad_replies`]);
/// the one exception is -07's call-only operation, where an empty reply to a call with no
/// chunk means that no reply is due ([`ServerStats::call_only_calls`]). It runs on the
/// server's event-loop threads, several calls of a connection at once (up to
/// [`ServerLimits::calls_in_progress`]). An [`OnExecutor`] is one that serves each call with
/// an [`AsyncHandler`]'s future on the caller's executor; [`Services`](crate::service::Services)
/// is one that serves typed programs generated from a specification.
///
/// ```
/// use negotiate::onc::{self, CallHeader};
/// use negotiate::server::Handler;
/// // An RPC NULL procedure of any program: SUCCESS, no results.
/// let null = |call: &[u8]| {
///     let mut reply = Vec::new();
///     onc::reply_success(onc::peek_xid(call).unwrap_or(0), &[], &mut reply);
///     reply
/// };
/// let mut reply = Vec::new();
/// null.handle(&CallHeader::new(7, 100003, 3, 0).message(&[]).unwrap(), &mut reply);
/// assert_eq!(onc::results(&reply, 7).unwrap(), []);
/// ```
pub trait Handler: Send + Sync + 'static {
    /// Writes the reply to `call` into `reply`, which is empty (its memory kept from the
    /// thread's earlier calls).
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>);

    /// Writes the reply to `call` into `reply`, as [`handle`](Handler::handle), and may lend
    /// its first DDP-eligible results from memory the handler keeps instead of writing their
    /// bytes ([`LentResults`]); a handler that lends implements this (or is a [`LendReply`]).
    /// The server calls this one. By default, [`handle`](Handler::handle), lending nothing:
    /// so do an [`OnExecutor`] and [`Services`](crate::service::Services).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::onc;
    /// use negotiate::server::{Handler, LentResults};
    /// // A store that answers every call with the value it holds, lent.
    /// struct Store(Arc<[u8]>);
    /// impl Handler for Store {
    ///     fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
    ///         let mut results = (self.0.len() as u32).to_be_bytes().to_vec();
    ///         results.extend_from_slice(&self.0); // (a multiple of four bytes here)
    ///         onc::reply_success(onc::peek_xid(call).unwrap_or(0), &results, reply);
    ///     }
    ///     fn handle_lending(&self, call: &[u8], reply: &mut Vec<u8>, lent: &mut LentResults) {
    ///         onc::reply_success(onc::peek_xid(call).unwrap_or(0), &(self.0.len() as u32).to_be_bytes(), reply);
    ///         lent.lend(self.0.clone());
    ///     }
    /// }
    /// let store = Store(vec![1u8; 4096].into());
    /// let (mut reduced, mut lent) = (Vec::new(), LentResults::default());
    /// store.handle_lending(&[0, 0, 0, 9, 0, 0, 0, 0], &mut reduced, &mut lent);
    /// let mut whole = Vec::new();
    /// store.handle(&[0, 0, 0, 9, 0, 0, 0, 0], &mut whole);
    /// assert_eq!((reduced.len(), whole.len(), lent.len()), (28, 28 + 4096, 1));
    /// ```
    fn handle_lending(&self, call: &[u8], reply: &mut Vec<u8>, lent: &mut LentResults) {
        let _ = lent;
        self.handle(call, reply);
    }

    /// The server is stopping: it has closed every connection and waits for the calls in
    /// progress to return. A handler that waits on something other than its own work (an
    /// [`OnExecutor`] waits for its futures) stops waiting; its reply would not be sent
    /// anyway. Nothing by default.
    fn stopping(&self) {}
}

impl<F: Fn(&[u8]) -> Vec<u8> + Send + Sync + 'static> Handler for F {
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        *reply = self(call);
    }
}

/// A [`Handler`] from a closure that writes the reply into the buffer it is given.
///
/// ```
/// use std::sync::Arc;
/// use negotiate::onc::{self, CallHeader};
/// use negotiate::server::{Handler, Server, ServerConfig, WriteReply};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_verbs::InProcess;
///
/// // SUCCESS, the call's arguments as the results: nothing allocated once warm (an
/// // AUTH_NONE header decodes without allocating).
/// let echo = WriteReply(|call: &[u8], reply: &mut Vec<u8>| {
///     let (h, args_at) = CallHeader::decode(call).unwrap();
///     onc::reply_success(h.xid, &call[args_at..], reply);
/// });
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
/// # drop(server);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WriteReply<F>(pub F);

impl<F: Fn(&[u8], &mut Vec<u8>) + Send + Sync + 'static> Handler for WriteReply<F> {
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        (self.0)(call, reply)
    }
}

/// The DDP-eligible results a [`Handler`] lends for its reply from memory it keeps (a cached
/// file block, a stored value), instead of writing their bytes into the reply: the reply it
/// writes is then *reduced* for them, each lent result's length word written and its bytes
/// and XDR padding left out, as a reply arrives whose results went by Write chunk (RFC 8166
/// section 3.4.6.1). Lend the first DDP-eligible results of the reply, in stream order.
///
/// When the requester provided Write chunks for them (RFC 8166 section 3.4.6), and for no
/// other result, and the rest of the reply goes inline, each lent result is RDMA-Written from
/// a registered copy the connection keeps of that `Arc`, made the first time the connection
/// sends it: lending the same `Arc` again copies none of its bytes, the RDMA Write being the
/// one transfer, as with raw verbs. A connection keeps copies of up to 8 results and 2 MiB
/// (pinned memory, outside [`ServerLimits::memory_budget`]), the least recently sent let go
/// first, and holds a clone of each kept `Arc`. Otherwise (no Write chunk for a lent result,
/// Write chunks for other results too, a reply too large to go inline, a transport header over
/// 1 KiB, or a copy that could not be registered) the server puts the reply together in the
/// handler's buffer and sends it as any other ([`ServerStats::lent_copies`] counts both kinds
/// of copy). Lent results that the binding does not find in the reply, in order, or whose
/// lengths differ from their length words, are answered with an RPC SYSTEM_ERR reply
/// ([`ServerStats::bad_replies`]).
///
/// ```
/// use std::sync::Arc;
/// use negotiate::onc::{self, CallHeader};
/// use negotiate::server::{Handler, LendReply, LentResults};
/// // A READ-like procedure whose result is an opaque<> the server holds: its reply is the
/// // RPC header and the opaque's length word; the bytes are lent.
/// let block: Arc<[u8]> = vec![7u8; 8192].into();
/// let read = LendReply(move |call: &[u8], reply: &mut Vec<u8>, lent: &mut LentResults| {
///     onc::reply_success(onc::peek_xid(call).unwrap_or(0), &(block.len() as u32).to_be_bytes(), reply);
///     lent.lend(block.clone());
/// });
/// let (mut reply, mut lent) = (Vec::new(), LentResults::default());
/// read.handle_lending(&CallHeader::new(7, 100003, 3, 6).message(&[]).unwrap(), &mut reply, &mut lent);
/// assert_eq!((reply.len(), lent.len(), lent.as_slice()[0].len()), (28, 1, 8192));
/// ```
#[derive(Debug, Default, Clone)]
pub struct LentResults(Vec<Arc<[u8]>>);

impl LentResults {
    /// Lends `result`, the next DDP-eligible result of the reply in stream order.
    ///
    /// ```
    /// # use negotiate::server::LentResults;
    /// let mut lent = LentResults::default();
    /// lent.lend(b"abc".to_vec().into());
    /// assert_eq!(&*lent.as_slice()[0], b"abc");
    /// ```
    pub fn lend(&mut self, result: std::sync::Arc<[u8]>) {
        self.0.push(result);
    }

    /// The results lent, in stream order.
    ///
    /// ```
    /// # use negotiate::server::LentResults;
    /// assert!(LentResults::default().as_slice().is_empty());
    /// ```
    pub fn as_slice(&self) -> &[Arc<[u8]>] {
        &self.0
    }

    /// How many results are lent.
    ///
    /// ```
    /// # use negotiate::server::LentResults;
    /// let mut lent = LentResults::default();
    /// lent.lend(vec![0; 8].into());
    /// assert_eq!(lent.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when nothing is lent.
    ///
    /// ```
    /// # use negotiate::server::LentResults;
    /// assert!(LentResults::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Lends nothing again, its memory kept for the next reply.
    ///
    /// ```
    /// # use negotiate::server::LentResults;
    /// let mut lent = LentResults::default();
    /// lent.lend(vec![0; 8].into());
    /// lent.clear();
    /// assert!(lent.is_empty());
    /// ```
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// A [`Handler`] from a closure that writes its reply into the buffer it is given and may lend
/// DDP-eligible results ([`LentResults`]).
///
/// ```
/// use std::sync::Arc;
/// use negotiate::client::{Client, ClientConfig};
/// use negotiate::onc::{self, CallHeader};
/// use negotiate::server::{LendReply, LentResults, Server, ServerConfig};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_verbs::InProcess;
/// // Replies carry an opaque<> whose length word follows the 24-byte accepted reply header:
/// // the client provides a Write chunk for it, the server writes the lent bytes into it.
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24), max_result: 8192, max_reply: 64 };
/// let block: Arc<[u8]> = vec![9u8; 8192].into();
/// let lending = LendReply(move |call: &[u8], reply: &mut Vec<u8>, lent: &mut LentResults| {
///     onc::reply_success(onc::peek_xid(call).unwrap_or(0), &8192u32.to_be_bytes(), reply);
///     lent.lend(block.clone());
/// });
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), lending).unwrap();
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// let reply = client.call(&CallHeader::new(1, 0x2000_0001, 1, 1).message(&[]).unwrap(), &ulb).unwrap();
/// assert_eq!(onc::results(&reply, 1).unwrap()[4..], [9u8; 8192]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LendReply<F>(pub F);

impl<F: Fn(&[u8], &mut Vec<u8>, &mut LentResults) + Send + Sync + 'static> Handler for LendReply<F> {
    /// Outside a server (which calls [`handle_lending`](Handler::handle_lending)): the
    /// closure's reply with each lent result's bytes and padding appended in turn, the whole
    /// reply when the lent results end it, as a READ's data ends its reply. (Where each goes
    /// otherwise is for the binding to say, which the server's path asks.)
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        let mut lent = LentResults::default();
        (self.0)(call, reply, &mut lent);
        for r in lent.as_slice() {
            reply.extend_from_slice(r);
            reply.resize(reply.len().next_multiple_of(4), 0);
        }
    }

    fn handle_lending(&self, call: &[u8], reply: &mut Vec<u8>, lent: &mut LentResults) {
        (self.0)(call, reply, lent)
    }
}

/// What a server counted, summed over its connections.
///
/// ```
/// # use std::sync::Arc;
/// # use negotiate::client::{Client, ClientConfig};
/// # use negotiate::server::{Server, ServerConfig};
/// # use rpcrdma_v1::ulb::OpaqueAtUlb;
/// # use rpcrdma_verbs::InProcess;
/// # use negotiate::onc::{self, CallHeader};
/// # let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// # let null = |call: &[u8]| {
/// #     let mut reply = Vec::new();
/// #     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
/// #     reply
/// # };
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), null).unwrap();
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// for xid in 1..=3 {
///     client.call(&CallHeader::new(xid, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap();
/// }
/// # use std::time::{Duration, Instant};
/// // A call is counted once its reply is sent, which may be just after the client has it.
/// let deadline = Instant::now() + Duration::from_secs(10);
/// while server.stats().calls.total() < 3 && Instant::now() < deadline {
///     std::thread::sleep(Duration::from_millis(1));
/// }
/// let stats = server.stats();
/// assert_eq!((stats.connections, stats.calls.v2, stats.calls.total()), (1, 3, 3));
/// assert_eq!((stats.inline_replies, stats.long_calls, stats.errors_sent), (3, 0, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// Connections accepted.
    pub connections: u64,
    /// Calls served, by version.
    pub calls: CallsByVersion,
    /// Calls whose DDP-eligible arguments came in Read chunks beside the inline part, pulled
    /// with RDMA Read (RFC 8166 section 3.5.2).
    pub read_chunk_calls: u64,
    /// Long calls: sent whole in a Position-zero Read chunk behind an RDMA_NOMSG (RFC 8166
    /// section 3.5.3).
    pub long_calls: u64,
    /// Replies sent inline (RDMA_MSG).
    pub inline_replies: u64,
    /// Replies sent through the requester's Reply chunk (RDMA_NOMSG).
    pub reply_chunk_replies: u64,
    /// Of the inline replies, those continued across several Sends on a -07 connection
    /// (RDMA2_REPLY_MIDDLE parts, draft-ietf-nfsv4-rpcrdma-version-two-07 section 6.6.4).
    pub continued_replies: u64,
    /// Calls served with no reply: call-only procedures' on -07 connections, whose handler
    /// answered with an empty reply ([`Answered::CallOnly`], section 4.7).
    pub call_only_calls: u64,
    /// DDP-eligible results written into the requester's Write chunks.
    pub write_chunk_results: u64,
    /// Of those, results a [`Handler`] lent ([`LentResults`]), written from the registered
    /// copy the connection keeps of each.
    pub lent_results: u64,
    /// Copies of lent results' bytes: into a registered copy the connection keeps (the first
    /// time it sends an `Arc`, or again once that copy was let go), or into a reply that could
    /// not go with each lent result in a Write chunk.
    pub lent_copies: u64,
    /// RDMA_ERROR replies sent.
    pub errors_sent: u64,
    /// Calls that arrived beyond the credits granted.
    pub credit_overruns: u64,
    /// What the server refused to keep serving or to take on, by bound.
    pub refused: Refusals,
    /// Calls answered with an RPC GARBAGE_ARGS reply: their chunks did not fit their Payload
    /// stream, or broke DDP-eligibility (RFC 8166 sections 4.5.2 and 6.1.1).
    pub garbage_args_replies: u64,
    /// Calls whose handler panicked, answered with an RPC SYSTEM_ERR reply; the connection and
    /// the server go on. An [`OnExecutor`]'s calls whose future panicked or was dropped by its
    /// executor before it completed count here too.
    pub handler_panics: u64,
    /// Calls on which the server's binding (its [`UpperLayerBinding`]) panicked, as the call was
    /// read or as its reply was marshaled, answered with an RPC SYSTEM_ERR reply
    /// ([`Answered::BindingPanicked`]); the connection and the server go on. (The catch covers
    /// the reply's post too: a capture sink's panic as the reply goes counts here.)
    pub binding_panics: u64,
    /// Calls whose handler's reply was not an RPC reply to them (empty, with another XID, or
    /// not a REPLY), answered with an RPC SYSTEM_ERR reply and logged as a warning; the
    /// connection goes on. (On a -07 connection an empty reply to a call with no chunk is a
    /// call-only procedure's, `call_only_calls`.)
    pub bad_replies: u64,
    /// -07 calls sent again on a new connection after an RDMA operational error lost their
    /// reply (a Remote Access Error on a chunk, the reply's Send too large for the Receive),
    /// answered RDMA2_ERR_SYSTEM and not served again
    /// (draft-ietf-nfsv4-rpcrdma-version-two-07 section 7.3; see [`LOST_REPLIES_KEPT`]).
    pub lost_replies_answered: u64,
    /// Threads of the server's loop that panicked serving a connection:
    /// application code run outside the handler and the binding, which are caught (a capture
    /// sink, `rpcrdma_verbs::capture`), or a fault of this crate's. Each closed that
    /// connection (the message can no longer be answered: RFC 8166 section 4.5.4) and gave
    /// back what the thread held; the other connections go on.
    pub loop_panics: u64,
    /// The bytes charged now against [`ServerLimits::memory_budget`]
    /// ([`crate::budget`]): Receives, and the chunk memory of calls being served or kept for
    /// the next call.
    pub memory_held: usize,
    /// The most bytes ever charged at once against [`ServerLimits::memory_budget`].
    pub memory_peak: usize,
}

/// Calls counted by the RPC-over-RDMA version they used ([`ServerStats::calls`]).
///
/// ```
/// use negotiate::server::CallsByVersion;
/// use rpcrdma_v1::Version;
/// let calls = CallsByVersion { v1: 3, v2: 5 };
/// assert_eq!((calls.of(Version::ONE), calls.of(Version::TWO), calls.total()), (3, 5, 8));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallsByVersion {
    /// Version One (RFC 8166).
    pub v1: u64,
    /// Version Two, in either dialect (draft-cel-nfsv4-rpcrdma-version-two-00, or -07 on a
    /// server whose responder speaks it).
    pub v2: u64,
}

impl CallsByVersion {
    /// The count for `version`: Version One's, or Version Two's for any later one (none is
    /// ever served: a responder accepts versions 1 and 2 only).
    pub fn of(&self, version: Version) -> u64 {
        if version <= Version::ONE {
            self.v1
        } else {
            self.v2
        }
    }

    /// Counts one more call of `version`.
    pub(crate) fn count(&mut self, version: Version) {
        if version <= Version::ONE {
            self.v1 += 1;
        } else {
            self.v2 += 1;
        }
    }

    /// Both versions' calls.
    pub fn total(&self) -> u64 {
        self.v1 + self.v2
    }
}

/// One accepted connection's requester, as it presented itself (see [`Server::peers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Who connected, as the connection manager says ([`ConnectRequest::peer`]): its IP
    /// address and port, or in-process its protection domain.
    pub address: Option<PeerAddress>,
    /// The private data its connect request carried, as received (the CM may have padded it).
    pub private_data: Vec<u8>,
    /// What each side advertised at connect (RFC 8797), as the responder decoded it.
    pub advertised: Advertised,
    /// The `rdma_credit` of its latest call (the credits it asks for); 0 before its first.
    pub credits_requested: u32,
    /// How the connection ended, once it has: [`Ended::Closed`] with the reason when this
    /// server closed it (a call it could neither serve nor answer, or the server stopping),
    /// [`Ended::Lost`] when the requester or the transport did. `None` while it is served.
    pub ended: Option<Ended>,
    /// On a -07 connection, the properties the client stated in its RDMA2_CONNPROP_FINAL
    /// (draft-ietf-nfsv4-rpcrdma-version-two-07 section 5), once it came: its receive size,
    /// and its host authentication material (`host_auth`, section 5.2.6) for the
    /// application's policy to judge. `None` before, and on the other versions.
    pub draft07_properties: Option<rpcrdma_v2::draft07::properties::Properties>,
    /// The versions its calls have used so far (each logged at its first call).
    pub versions_seen: std::collections::BTreeSet<u32>,
}

/// How the server's log names a peer: its address, or "an unnamed peer" where the connection
/// manager gave none.
pub(crate) fn peer_name(address: Option<PeerAddress>) -> String {
    address.map_or_else(|| "an unnamed peer".to_string(), |a| a.to_string())
}

/// A running responder. Dropping it stops accepting, closes every connection and waits for
/// the event loops' threads: it returns once the handlers running then have returned (every
/// other wait is cut by the close, and an [`OnExecutor`]'s wait for its futures by
/// [`Handler::stopping`]), with no thread of the server left.
///
/// ```
/// use std::sync::Arc;
/// use negotiate::client::{Client, ClientConfig};
/// use negotiate::onc::{self, CallHeader};
/// use negotiate::server::{Server, ServerConfig};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_verbs::{Backend, InProcess};
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };
/// // Answers each call with SUCCESS, the call's arguments as the results.
/// let echo = |call: &[u8]| {
///     let (h, args_at) = CallHeader::decode(call).unwrap();
///     let mut reply = Vec::new();
///     onc::reply_success(h.xid, &call[args_at..], &mut reply);
///     reply
/// };
/// let server = Server::start(InProcess, &InProcess.any_address(), ServerConfig::default(), Arc::new(ulb), echo)?;
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// let call = CallHeader::new(7, 0x2000_0001, 1, 1).message(&[0, 0, 0, 42]).unwrap();
/// assert_eq!(onc::results(&client.call(&call, &ulb).unwrap(), 7), Ok(&[0, 0, 0, 42][..]));
/// assert_eq!(server.stats().connections, 1);
/// # Ok::<(), rpcrdma_verbs::Error>(())
/// ```
pub struct Server {
    addr: String,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    /// The listener's count of connections turned away ([`Refusals::handshakes`]).
    turned_away: Box<dyn Fn() -> u64 + Send + Sync>,
    /// The listener's [`Listener::close`](rpcrdma_verbs::Listener::close), which wakes the
    /// acceptor.
    close_listener: Box<dyn Fn() + Send + Sync>,
    acceptor: Option<JoinHandle<()>>,
}

/// What the acceptor, the connections and the [`Server`] handle share.
struct Shared {
    stats: Mutex<ServerStats>,
    /// What every connection's Receives and calls' chunk memory are charged against.
    budget: Arc<MemoryBudget>,
    /// Open connections' records and the most recent closed ones.
    peers: Mutex<Vec<Arc<Mutex<Peer>>>>,
    backchannels: Mutex<Vec<Backchannel>>,
    /// -07 transactions whose reply an RDMA operational error lost, by requester host.
    lost: Mutex<lost_replies::LostReplies>,
    /// The connections each host holds ([`ServerLimits::max_connections_per_host`]).
    hosts: Arc<per_host::HostCounts>,
    /// The call memory each host's calls in progress hold ([`ServerLimits::memory_per_host`]).
    host_memory: Arc<per_host::HostCounts>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Forgets closed connections: their backchannels, and their records beyond the `kept`
    /// most recent, so that a peer connecting and closing a thousand times leaves nothing.
    pub(super) fn prune(&self, kept: usize) {
        lock(&self.backchannels).retain(Backchannel::is_open);
        let mut peers = lock(&self.peers);
        let closed = peers.iter().filter(|p| lock(p).ended.is_some()).count();
        let mut forget = closed.saturating_sub(kept);
        peers.retain(|p| {
            let drop = forget > 0 && lock(p).ended.is_some();
            forget -= usize::from(drop);
            !drop
        });
    }
}

/// How long the acceptor pauses after its listener fails before it tries again.
const LISTENER_RETRY: Duration = Duration::from_millis(50);

impl Server {
    /// Listens on `addr` and serves each call with `handler` ([`Handler`]: a closure from
    /// the whole RPC call message to the whole RPC reply message, or a [`WriteReply`] that
    /// writes the reply into a buffer kept between calls); `ulb` says which items of both are
    /// DDP-eligible (RFC 8166 section 6). `addr` is a `&str`, a `String` or a
    /// [`SocketAddr`](std::net::SocketAddr) ([`Address`](rpcrdma_verbs::Address)).
    ///
    /// ```
    /// use std::net::SocketAddr;
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::Tcp;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Every procedure succeeds and returns its arguments as its results.
    /// let echo = |call: &[u8]| {
    ///     let (h, args_at) = CallHeader::decode(call).unwrap();
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(h.xid, &call[args_at..], &mut reply);
    ///     reply
    /// };
    /// let any = SocketAddr::from(([127, 0, 0, 1], 0));
    /// let server = Server::start(Tcp, any, ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let at: SocketAddr = server.local_addr().parse().unwrap();
    /// let client = Client::new(Tcp, at, ClientConfig::default());
    /// let reply = client.call(&CallHeader::new(1, 0x2000_0001, 1, 1).message(&[0, 0, 0, 5]).unwrap(), &ulb).unwrap();
    /// assert_eq!(onc::results(&reply, 1), Ok(&[0, 0, 0, 5][..]));
    /// ```
    pub fn start<B, U, H>(
        backend: B,
        addr: impl Into<rpcrdma_verbs::Address>,
        cfg: ServerConfig,
        ulb: Arc<U>,
        handler: H,
    ) -> rpcrdma_verbs::Result<Server>
    where
        B: Backend + Clone,
        U: UpperLayerBinding + Send + Sync + ?Sized + 'static,
        H: Handler,
    {
        let listener = Arc::new(backend.listen_with(addr.into().as_str(), &cfg.limits.listen_options())?);
        let local = listener.local_addr();
        let (l, l2) = (listener.clone(), listener.clone());
        let turned_away = Box::new(move || l.turned_away());
        let close_listener = Box::new(move || l2.close());
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            stats: Mutex::default(),
            budget: MemoryBudget::new(cfg.limits.memory_budget),
            peers: Mutex::default(),
            backchannels: Mutex::default(),
            lost: Mutex::new(lost_replies::LostReplies::new(cfg.limits.ipv6_prefix_per_host)),
            hosts: Arc::new(per_host::HostCounts::new(cfg.limits.ipv6_prefix_per_host)),
            host_memory: Arc::new(per_host::HostCounts::new(cfg.limits.ipv6_prefix_per_host)),
        });
        let handler = Arc::new(handler);
        // Shared by every connection's thread (its extensions are not `Copy`).
        let cfg = Arc::new(cfg);
        let (s, sh) = (stop.clone(), shared.clone());
        let acceptor = std::thread::Builder::new()
            .name("negotiate-server".into())
            .spawn(move || {
                let handler: Arc<dyn Handler> = handler;
                let new_loop = || Loop::new(cfg.clone(), ulb.clone(), handler.clone(), s.clone(), sh.clone(), &backend);
                // Connections whose queue pairs wake a waker share one event loop; each of the
                // others gets a loop of its own, whose first thread accepts it.
                let shared_loop = backend.wakes_wakers().then(new_loop);
                let mut own: Vec<Arc<Loop<B, U>>> = Vec::new();
                // Accepts in progress for the shared loop, each on a thread of its own until
                // its connection joins the loop: an accept may wait on the peer (TCP's
                // confirmation, up to the handshake timeout), and other handshakes and the
                // loop must not wait on it.
                let mut accepting: Vec<JoinHandle<()>> = Vec::new();
                // The acceptor sleeps until a request comes or `Server::drop` closes the
                // listener: no tick.
                while !s.load(Ordering::Relaxed) {
                    let req = listener.get_request(Duration::MAX);
                    // A finished loop of one connection, or accept, is gone.
                    own.retain(|l| !l.is_finished());
                    accepting.retain(|a| !a.is_finished());
                    sh.prune(cfg.limits.closed_peers_kept);
                    let req = match req {
                        Ok(req) => req,
                        // Closed by `Server::drop`: the loop sees the stop flag.
                        Err(rpcrdma_verbs::Error::ConnectionAborted | rpcrdma_verbs::Error::Timeout) => continue,
                        Err(e) => {
                            // A listener that fails (a descriptor or device error) is tried
                            // again after a pause, not in a busy loop.
                            log::warn!("taking a connect request failed: {e}");
                            std::thread::sleep(LISTENER_RETRY);
                            continue;
                        }
                    };
                    let live = own.len() + shared_loop.as_ref().map_or(0, |l| l.live());
                    if live >= cfg.limits.max_connections {
                        // Counted first: the connector may look at the stats once refused.
                        lock(&sh.stats).refused.connections += 1;
                        req.reject();
                        continue;
                    }
                    // A named peer's place in its host's count, held with its connection.
                    let slot = match req.peer() {
                        Some(address) => match sh.hosts.take(address.host(), 1, cfg.limits.max_connections_per_host) {
                            Some(slot) => Some(slot),
                            // (Counted by `take`: the connector may look once refused.)
                            None => {
                                let n = sh.hosts.refused();
                                if crate::flood::logged(n) {
                                    log::warn!(
                                        "rejected a connect from {}: its host holds {} connections ({n} refused so)",
                                        peer_name(Some(address)),
                                        cfg.limits.max_connections_per_host
                                    );
                                }
                                req.reject();
                                continue;
                            }
                        },
                        None => None,
                    };
                    match &shared_loop {
                        Some(lp) => {
                            lp.accepting();
                            let (l, b, cfg, sh) = (lp.clone(), backend.clone(), cfg.clone(), sh.clone());
                            let spawned = std::thread::Builder::new()
                                .name("negotiate-accept".into())
                                .spawn(move || l.accepted(accept::accept(&b, req, slot, &cfg, &sh)));
                            match spawned {
                                Ok(a) => accepting.push(a),
                                // A thread that could not be spawned dropped its request:
                                // rejected.
                                Err(_) => lp.accepted(None),
                            }
                        }
                        None => {
                            let lp = new_loop();
                            lp.accept_on_own_thread(backend.clone(), req, slot);
                            own.push(lp);
                        }
                    }
                }
                // Closing cuts every wait but a handler's, an accept's wait on its peer
                // included; then no thread is left behind.
                listener.close();
                let loops: Vec<_> = shared_loop.into_iter().chain(own).collect();
                for lp in &loops {
                    lp.close_all();
                }
                handler.stopping();
                // (An accept finishing now finds its loop ended and closes its connection.)
                for a in accepting {
                    let _ = a.join();
                }
                for lp in &loops {
                    lp.join();
                }
            })
            .map_err(|_| rpcrdma_verbs::Error::ConnectionAborted)?;
        Ok(Server { addr: local, stop, shared, turned_away, close_listener, acceptor: Some(acceptor) })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> String {
        self.addr.clone()
    }

    /// Handles for calling the clients of the open connections in the backward direction
    /// (RFC 8167), oldest connection first.
    pub fn backchannels(&self) -> Vec<Backchannel> {
        let mut all = lock(&self.shared.backchannels);
        all.retain(Backchannel::is_open);
        all.clone()
    }

    /// What the server has counted so far.
    pub fn stats(&self) -> ServerStats {
        let mut s = *lock(&self.shared.stats);
        s.refused.handshakes = (self.turned_away)();
        let budget = &self.shared.budget;
        (s.refused.memory, s.memory_held, s.memory_peak) = (budget.refused(), budget.used(), budget.peak());
        s.refused.memory += self.shared.host_memory.refused();
        s.refused.per_host = self.shared.hosts.refused();
        s
    }

    /// The connections accepted, oldest first: every open one and the most recent closed ones
    /// (up to [`ServerLimits::closed_peers_kept`]): the requester's private data as received
    /// and as decoded, the credits it last asked for, and how it ended. For diagnostics and
    /// interop tests against other requesters.
    pub fn peers(&self) -> Vec<Peer> {
        lock(&self.shared.peers).iter().map(|p| lock(p).clone()).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the acceptor from its wait for a request.
        (self.close_listener)();
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}
