//! The requester's version-hiding API: [`Client::call`] takes an RPC call message and the
//! Upper-Layer Binding that says which of its items are DDP-eligible and how large the reply
//! may be, and returns the RPC reply message. Connection, private data, the Version Two probe
//! and fallback, thresholds, chunk choices, credits, timeouts and retransmission all happen
//! inside, driven by the sans-I/O [`Requester`](crate::requester::Requester) over any `verbs` backend.
//!
//! Three ways to call: [`Client::call`] blocks and returns a new `Vec`;
//! [`Client::call_into`] blocks and writes into the caller's buffer (a steady small call then
//! allocates nothing); [`Client::call_async`] is a [`Future`](std::future::Future) for any
//! executor. A client may use several connections ([`ClientConfig::connections`]).
//!
//! Threads: every blocking caller marshals, sends and reassembles its own call (it owns the
//! message and the binding), and while it waits for its reply it receives on the connection
//! itself if nobody else does: one receiver at a time, who hands each other caller its reply,
//! so that a lone caller's reply reaches it without a hand-off between threads. One dispatcher
//! thread per client, for all its connections (`client/lane/dispatch.rs`), makes connections,
//! reads the clock, and receives when several blocking callers wait on a connection, when no
//! call has been in progress there for a while (backward calls, a connection lost while
//! idle), or when async calls wait on a backend that cannot wake their tasks; it waits for a
//! message by arming the connection to wake it, so that it never waits on one connection
//! while another needs it. What happens in response is decided by one
//! [`Connection`](crate::connection::Connection) per connection under a mutex, the same value
//! the deterministic simulator drives; these files are only its I/O.

mod async_call;
mod in_place;
mod lane;
mod link;

use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Address, Backend};

pub use crate::client_config::{ChunkSizes, ClientConfig, ClientError, ClientStats, KeepConnected};
pub use async_call::AsyncCall;
pub use in_place::{InPlaceReply, ReplyView};
use lane::{Dispatcher, Lane, Message, Sink};

use crate::backchannel::Handler;
use crate::connection::PeerProperties;
pub use crate::connection::ENDED_KEPT;
use crate::datapath::Ended;
use crate::extension::OptionReply;
use crate::extension07::ExtensionReply;

/// A requester bound to one responder address.
///
/// ```
/// use std::sync::Arc;
/// use negotiate::client::{Client, ClientConfig};
/// use negotiate::onc::{self, CallHeader};
/// use negotiate::server::{Server, ServerConfig};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_verbs::InProcess;
///
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// // A service whose every procedure succeeds and returns its arguments as its results.
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), |call: &[u8]| {
///     let (h, args_at) = CallHeader::decode(call).unwrap();
///     let mut reply = Vec::new();
///     onc::reply_success(h.xid, &call[args_at..], &mut reply);
///     reply
/// })
/// .unwrap();
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// // XID 42: procedure 1 of program 0x2000_0001, version 1, with one unsigned int argument.
/// let call = CallHeader::new(42, 0x2000_0001, 1, 1).message(&[0, 0, 0, 7]).unwrap();
/// let reply = client.call(&call, &ulb).unwrap();
/// assert_eq!(onc::results(&reply, 42), Ok(&[0, 0, 0, 7][..]));
/// assert_eq!(client.version(), Some(rpcrdma_v1::Version::TWO)); // both sides speak Version Two
/// ```
pub struct Client<B: Backend> {
    /// One per connection ([`ClientConfig::connections`]); a call goes on lane XID mod their
    /// number, so that one XID always meets the same requester (which refuses a duplicate).
    lanes: Vec<Lane<B>>,
    /// The one thread that connects, reads the clock and receives for every lane when no
    /// caller does; joined after the lanes are closed (fields drop in order).
    _dispatcher: Dispatcher,
}

impl<B: Backend + Clone> Client<B> {
    /// A client for the responder at `addr` (a `&str`, a `String` or a
    /// [`SocketAddr`](std::net::SocketAddr): [`Address`]). It starts connecting in the background and
    /// returns at once; a connection that cannot be made shows in the calls that need it
    /// ([`ClientError::Refused`], ...). See [`Client::connect`] to fail early instead.
    pub fn new(backend: B, addr: impl Into<Address>, cfg: ClientConfig) -> Self {
        let (lanes, _dispatcher) =
            Lane::start_all(backend, addr.into().as_str(), cfg, None, false).expect("a lazy start makes no connection");
        Client { lanes, _dispatcher }
    }

    /// A client for the responder at `addr` whose first connection is made before this
    /// returns, or whose error this returns (after one attempt): refused, bad address, connect
    /// timeout, or another connect failure. Later connections are made as [`Client::new`]'s
    /// are.
    ///
    /// The version is not settled yet when this returns: the first call settles it (it goes
    /// out as the Version Two probe of the Version Two draft's section 5), so until that call's
    /// reply [`Client::version`] and [`Client::thresholds`] are `None`. The inline thresholds
    /// the connection's private data implies (RFC 8797) are already in effect.
    ///
    /// ```
    /// use negotiate::client::{Client, ClientConfig, ClientError};
    /// use rpcrdma_verbs::InProcess;
    ///
    /// match Client::connect(InProcess, "inproc:nobody-listens-here", ClientConfig::default()) {
    ///     Err(ClientError::Refused { attempts: 1, .. }) => {}
    ///     other => panic!("{:?}", other.err()),
    /// }
    /// ```
    pub fn connect(backend: B, addr: impl Into<Address>, cfg: ClientConfig) -> Result<Self, ClientError> {
        Lane::start_all(backend, addr.into().as_str(), cfg, None, true)
            .map(|(lanes, _dispatcher)| Client { lanes, _dispatcher })
    }

    /// A client whose connections also serve backward-direction calls from the server with
    /// `handler` (RFC 8167; see [`backchannel`](crate::backchannel)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Both sides answer every call with SUCCESS, its arguments as its results.
    /// let echo = |call: &[u8]| {
    ///     let (h, args_at) = CallHeader::decode(call).unwrap();
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(h.xid, &call[args_at..], &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::with_backchannel(InProcess, &server.local_addr(), ClientConfig::default(), Arc::new(echo));
    /// // The forward direction first: the server's backward calls need a connection.
    /// client.call(&CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap();
    /// // A backward call is an RPC call too (RFC 8167), here to the client's program 0x2000_0002.
    /// let back = &server.backchannels()[0];
    /// let reply = back.call(&CallHeader::new(9, 0x2000_0002, 1, 1).message(&[7, 7, 7, 7]).unwrap()).unwrap();
    /// assert_eq!(onc::results(&reply, 9), Ok(&[7, 7, 7, 7][..]));
    /// ```
    pub fn with_backchannel(backend: B, addr: impl Into<Address>, cfg: ClientConfig, handler: Handler) -> Self {
        let (lanes, _dispatcher) = Lane::start_all(backend, addr.into().as_str(), cfg, Some(handler), false)
            .expect("a lazy start makes no connection");
        Client { lanes, _dispatcher }
    }
}

impl<B: Backend> Client<B> {
    /// Calls: sends the RPC call `message` (whose first four bytes are its XID) and returns
    /// the RPC reply message. `ulb` declares the DDP-eligible arguments and results and the
    /// largest reply (RFC 8166 section 6). Draw each call's XID yourself (as an RPC client
    /// does), not from a peer: calls in progress are found by a hash that assumes no peer
    /// chose their XIDs (`own_keys` in the source).
    pub fn call<U: UpperLayerBinding + ?Sized>(&self, message: &[u8], ulb: &U) -> Result<Vec<u8>, ClientError> {
        let mut reply = Vec::new();
        self.call_into(message, ulb, &mut reply).map(|()| reply)
    }

    /// [`Client::call`] into `reply` (cleared first), whose memory a caller keeps from one call
    /// to the next: a small call then allocates nothing at all
    /// (negotiate/tests/allocations.rs counts).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Every procedure succeeds and returns its arguments as its results.
    /// let echo = |call: &[u8]| {
    ///     let (h, args_at) = CallHeader::decode(call).unwrap();
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(h.xid, &call[args_at..], &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let mut reply = Vec::with_capacity(4096);
    /// for xid in 1..=3 {
    ///     let call = CallHeader::new(xid, 0x2000_0001, 1, 1).message(&[0, 0, 0, 9]).unwrap();
    ///     client.call_into(&call, &ulb, &mut reply).unwrap();
    ///     assert_eq!(onc::results(&reply, xid), Ok(&[0, 0, 0, 9][..]));
    /// }
    /// ```
    pub fn call_into<U: UpperLayerBinding + ?Sized>(
        &self,
        message: &[u8],
        ulb: &U,
        reply: &mut Vec<u8>,
    ) -> Result<(), ClientError> {
        let xid = xid_of(message)?;
        self.lane(xid).call_into(xid, Message::Borrowed(message), ulb, Sink::Copy(reply))
    }

    /// [`Client::call_into`] with `message`'s buffer lent to the call instead of copied: its
    /// DDP-eligible arguments are RDMA-Read by the server straight from it (registered as it
    /// is), so a large argument is copied once, by the RDMA Read, as with raw verbs. The
    /// buffer is handed back, unchanged, before this returns (RFC 8166 section 3.4.5.1: a
    /// Requester must not change it until the reply, and nobody else holds it meanwhile); it
    /// comes back empty only when registering it failed, which is then the error returned.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// // The call's one argument is a DDP-eligible opaque<>: its length word follows the
    /// // 40-byte call header, and 64 KiB of its data go in a Read chunk.
    /// let ulb = OpaqueAtUlb { call_opaque: Some(40), reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // The procedure returns the sum of the opaque's bytes.
    /// let sum = |call: &[u8]| {
    ///     let (h, args_at) = CallHeader::decode(call).unwrap();
    ///     let total: u32 = call[args_at + 4..].iter().map(|&b| u32::from(b)).sum();
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(h.xid, &total.to_be_bytes(), &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), sum).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let mut message = CallHeader::new(1, 0x2000_0001, 1, 1).message(&(64u32 << 10).to_be_bytes()).unwrap();
    /// message.resize(44 + (64 << 10), 1); // the opaque's data: 64 KiB, no padding
    /// let mut reply = Vec::new();
    /// client.call_lent(&mut message, &ulb, &mut reply).unwrap();
    /// assert_eq!(onc::results(&reply, 1), Ok(&(64u32 << 10).to_be_bytes()[..]));
    /// assert_eq!(message.len(), 44 + (64 << 10)); // handed back
    /// assert_eq!(client.stats().chunked, 1);
    /// ```
    pub fn call_lent<U: UpperLayerBinding + ?Sized>(
        &self,
        message: &mut Vec<u8>,
        ulb: &U,
        reply: &mut Vec<u8>,
    ) -> Result<(), ClientError> {
        let xid = xid_of(message)?;
        self.lane(xid).call_into(xid, Message::Lent(message), ulb, Sink::Copy(reply))
    }

    /// [`Client::call`] without copying the results out of the Write chunks: the reply is
    /// handed over where it landed ([`InPlaceReply`]): its DDP-eligible results in the
    /// buffers the server RDMA-Wrote them into, the rest in the received message. A large
    /// result is copied once, by the RDMA Write, as with raw verbs; read it through
    /// [`InPlaceReply::view`] with [`ReplyView::result`], or walk the whole reply with
    /// [`ReplyView::pieces`]. The buffers, still registered, go back to the connection for the
    /// next calls when the reply is dropped: a warm connection registers no chunk memory.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// // The reply's one result is a DDP-eligible opaque<>: its length word follows the
    /// // 24-byte header of a SUCCESS reply, and its 64 KiB of data go in a Write chunk.
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24), max_result: 1 << 16, max_reply: 256 };
    /// let big = |call: &[u8]| {
    ///     let mut result = (1u32 << 16).to_be_bytes().to_vec();
    ///     result.resize(4 + (1 << 16), 7);
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(onc::peek_xid(call).unwrap(), &result, &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), big).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let call = CallHeader::new(9, 0x2000_0001, 1, 1).message(&[]).unwrap();
    /// let mut reply = client.call_in_place(&call, &ulb).unwrap();
    /// assert_eq!(reply.len(), 28 + (1 << 16));
    /// assert_eq!(onc::results(&reply.to_vec(), 9).unwrap()[..4], (1u32 << 16).to_be_bytes());
    /// let view = reply.view();
    /// let result = view.result(0).unwrap(); // where the server's RDMA Write put it
    /// assert!(result.len() == 1 << 16 && result.iter().all(|&b| b == 7));
    /// ```
    pub fn call_in_place<U: UpperLayerBinding + ?Sized>(
        &self,
        message: &[u8],
        ulb: &U,
    ) -> Result<InPlaceReply<B>, ClientError> {
        let xid = xid_of(message)?;
        let mut reply = None;
        self.lane(xid).call_into(xid, Message::Borrowed(message), ulb, Sink::InPlace(&mut reply))?;
        Ok(reply.expect("a call that succeeded in place left its reply"))
    }

    /// [`Client::call`] as a [`Future`](std::future::Future), for any executor: it never blocks on the network
    /// (the client's dispatcher thread receives for async calls and wakes their tasks). Its
    /// steps that touch the queue pair (posting the call, and on the reply invalidating the
    /// call's memory windows and reassembling) run inside `poll`, as they would in
    /// [`Client::call`]; only the Local Invalidates of a reply's windows are waited for there,
    /// as RFC 8166 section 8.1.3 requires before the reply is handed over.
    ///
    /// Dropping the future before it is ready gives the call up: its memory is fenced at once
    /// (its windows invalidated), and a transmission already out keeps its credit until its
    /// reply arrives (then dropped) or its connection is lost, since the responder still
    /// counts it (RFC 8166 section 3.3.1).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::future::Future;
    /// use std::task::{Context, Poll, Wake, Waker};
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Every procedure succeeds and returns its arguments as its results.
    /// let echo = |call: &[u8]| {
    ///     let (h, args_at) = CallHeader::decode(call).unwrap();
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(h.xid, &call[args_at..], &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    ///
    /// // Any executor drives it; here the smallest one, which parks the thread between polls.
    /// struct Unpark(std::thread::Thread);
    /// impl Wake for Unpark {
    ///     fn wake(self: Arc<Self>) { self.0.unpark() }
    /// }
    /// let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    /// let message = CallHeader::new(5, 0x2000_0001, 1, 1).message(&[0, 0, 0, 3]).unwrap();
    /// let mut call = std::pin::pin!(client.call_async(&message, &ulb));
    /// let reply = loop {
    ///     match call.as_mut().poll(&mut Context::from_waker(&waker)) {
    ///         Poll::Ready(reply) => break reply.unwrap(),
    ///         Poll::Pending => std::thread::park(),
    ///     }
    /// };
    /// assert_eq!(onc::results(&reply, 5), Ok(&[0, 0, 0, 3][..]));
    /// ```
    ///
    /// With tokio, `client.call_async(&msg, &ulb).await` (negotiate/examples/async_calls.rs).
    pub fn call_async<'a, U: UpperLayerBinding + ?Sized>(
        &'a self,
        message: &'a [u8],
        ulb: &'a U,
    ) -> AsyncCall<'a, B, U> {
        AsyncCall::new(self, message, ulb)
    }

    /// Sends an RDMA_OPTIONAL (draft section 3.1) on the first connection, and returns what
    /// the server made of it: its extension's answering RDMA_OPTIONAL
    /// ([`OptionReply::Answered`]), or [`OptionReply::NotSupported`] (RDMA_ERR_INVAL_OPTION:
    /// fall back). `optinfo` is the `rdma_optinfo`; `payload`, if not empty, follows the
    /// transport header as its RPC Payload Stream (section 4.2: "MAY follow"; the extension
    /// says whether). The whole goes inline and must fit the server's inline threshold.
    ///
    /// The connection must have settled on Version Two (make a call first): otherwise this
    /// fails at once with `ClientError::Call(CallFailure::NotVersionTwo)`. It is a message
    /// like a call: it waits for a credit and holds it until its outcome (RFC 8166 section
    /// 3.3.1), with the same XID matching the answer to it. No answer within the requester's
    /// timeout fails it alone with [`ClientError::ReplyTimeout`] (an extension that answers
    /// nothing by design times out here); it is never sent again.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::extension::OptionReply;
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Every procedure succeeds with no results, as a NULL procedure does.
    /// let null = |call: &[u8]| {
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), null).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let call = CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap();
    /// client.call(&call, &ulb).unwrap(); // settles Version Two
    /// // The server registered no extension: opttype 99 is not supported.
    /// assert_eq!(client.send_option(99, b"hello", &[]).unwrap(), OptionReply::NotSupported);
    /// ```
    pub fn send_option(&self, opttype: u32, optinfo: &[u8], payload: &[u8]) -> Result<OptionReply, ClientError> {
        self.lanes[0].send_option(opttype, optinfo, payload)
    }

    /// Sends the call `message` (XID first) of a call-only procedure, one whose Upper-Layer
    /// Protocol has no reply for it (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.7),
    /// and returns once it is posted: there is nothing to wait for. It goes with no chunk, as
    /// 4.7 requires, in one Send within the server's Receive; a larger one fails with
    /// `DataPathError::CallOnlyTooLarge`, unsent. It takes a place in the server's window,
    /// which the server's later messages (replies to other calls, or its RDMA2_GRANT) open
    /// again; it is never sent again once posted.
    ///
    /// The connection it goes on (the one of its XID's lane, when
    /// [`ClientConfig::connections`] is more than one) must have settled on -07: make a call
    /// first, on that connection. Otherwise this fails at once with
    /// `ClientError::Call(CallFailure::NotVersionTwo)`; and a call-only call whose connection
    /// is lost before it is sent fails with `CallFailure::ConnectionLost`. A server of this
    /// crate runs the call's handler and sends nothing back when the handler's reply is empty
    /// (and the call has no chunk).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::requester::RequesterConfig;
    /// use negotiate::responder::ResponderConfig;
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_v2::dialect::{Dialect, VersionTwo};
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Procedure 9 is call-only: the handler notes its call and answers nothing. The others
    /// // succeed with no results.
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let s = seen.clone();
    /// let handler = move |call: &[u8]| {
    ///     let (h, _) = CallHeader::decode(call).unwrap();
    ///     let mut reply = Vec::new();
    ///     match h.proc {
    ///         9 => s.lock().unwrap().push(call.to_vec()),
    ///         _ => onc::reply_success(h.xid, &[], &mut reply),
    ///     }
    ///     reply
    /// };
    /// let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    /// let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ulb), handler).unwrap();
    /// let requester = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default().requester(requester));
    /// client.call(&CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap(); // settles -07
    /// let notice = CallHeader::new(2, 0x2000_0001, 1, 9).message(&[0, 0, 0, 5]).unwrap();
    /// client.call_only(&notice).unwrap(); // posted: nothing comes back
    /// # let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    /// # while seen.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
    /// #     std::thread::sleep(std::time::Duration::from_millis(1));
    /// # }
    /// assert_eq!(seen.lock().unwrap().as_slice(), [notice]);
    /// ```
    pub fn call_only(&self, message: &[u8]) -> Result<(), ClientError> {
        let xid = xid_of(message)?;
        self.lane(xid).call_only(xid, message)
    }

    /// Sends a message of a draft-ietf-nfsv4-rpcrdma-version-two-07 extension's header type
    /// `htype` (its Appendix B.2; [`crate::extension07`]) with `body` after the four words
    /// every header starts with, on the first connection, and returns what the server made of
    /// it: its extension's answer with the same XID ([`ExtensionReply::Answer`]),
    /// [`ExtensionReply::NotSupported`] (RDMA2_ERR_INVAL_HTYPE: the server takes no such
    /// type), or another RDMA2_ERROR's code, an extension's own included (B.4). The whole goes
    /// in one Send within the server's Receive.
    ///
    /// The connection must have settled on -07 (make a call first): otherwise this fails at
    /// once with `ClientError::Call(CallFailure::NotVersionTwo)`. Like a call it takes a
    /// credit (section 4.2.1) and waits for its outcome for the requester's timeout at most
    /// ([`ClientError::ReplyTimeout`]); it is never sent again.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::extension07::ExtensionReply;
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::requester::RequesterConfig;
    /// use negotiate::responder::ResponderConfig;
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_v2::dialect::{Dialect, VersionTwo};
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Every procedure succeeds with no results, as a NULL procedure does.
    /// let null = |call: &[u8]| {
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
    ///     reply
    /// };
    /// let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    /// let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ulb), null).unwrap();
    /// let requester = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default().requester(requester));
    /// client.call(&CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap(); // settles -07
    /// // The server registered no extension: header type 0xF000_0099 is not supported.
    /// assert_eq!(client.send_extension(0xF000_0099, &[0; 8]).unwrap(), ExtensionReply::NotSupported);
    /// ```
    pub fn send_extension(&self, htype: u32, body: &[u8]) -> Result<ExtensionReply, ClientError> {
        self.lanes[0].send_extension(htype, body)
    }

    /// What the first connection's transport-properties exchange gave
    /// ([`ClientConfig::properties`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::connection::PeerProperties;
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_v2::properties::TransportProperties;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let big = TransportProperties { max_send_size: Some(16384), max_recv_size: Some(16384), ..Default::default() };
    /// let server_cfg = ServerConfig::default().properties(Some(big));
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 16384 };
    /// // Every procedure succeeds with no results, as a NULL procedure does.
    /// let null = |call: &[u8]| {
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", server_cfg, Arc::new(ulb), null).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default().properties(Some(big)));
    /// let call = CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap();
    /// client.call(&call, &ulb).unwrap(); // settles Version Two, then the exchange
    /// assert_eq!(client.peer_properties(), PeerProperties::Stated(big));
    /// assert_eq!(client.thresholds().unwrap().call, 16384); // private data said 4096
    /// ```
    pub fn peer_properties(&self) -> PeerProperties {
        self.lanes[0].peer_properties()
    }

    /// The version the first connection settled on, if it has (with several connections,
    /// each settles its own, normally the same).
    pub fn version(&self) -> Option<Version> {
        self.lanes[0].version()
    }

    /// The first connection's Version Two dialect, once it settled on Version Two: -00 or -07
    /// (`ClientConfig::version_two` says which it speaks; docs/design.md, "Version Two's two
    /// dialects", how a connection ends on one).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::responder::ResponderConfig;
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_v2::dialect::{Dialect, VersionTwo};
    /// use rpcrdma_verbs::InProcess;
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let cfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    /// // Every procedure succeeds with no results, as a NULL procedure does.
    /// let null = |call: &[u8]| {
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ulb), null).unwrap();
    /// let cfg = ClientConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    /// let client = Client::new(InProcess, &server.local_addr(), cfg);
    /// let reply = client.call(&CallHeader::new(7, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap();
    /// assert_eq!(onc::results(&reply, 7), Ok(&[][..]));
    /// assert_eq!(client.dialect(), Some(Dialect::Ietf07));
    /// ```
    pub fn dialect(&self) -> Option<rpcrdma_v2::dialect::Dialect> {
        self.lanes[0].dialect()
    }

    /// The server's -07 properties on the first connection, once its RDMA2_CONNPROP_FINAL
    /// came (draft-ietf-nfsv4-rpcrdma-version-two-07 section 5): its receive size, segment
    /// size and count, and the host authentication material it states (section 5.2.6) for
    /// this application's policy to judge (see [`crate::host_auth`]). `None` before, and
    /// off -07.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::host_auth::HostAuth;
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::responder::ResponderConfig;
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_v2::dialect::{Dialect, VersionTwo};
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };
    /// // Every procedure succeeds with no results, as a NULL procedure does.
    /// let null = |call: &[u8]| {
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
    ///     reply
    /// };
    /// let we_are = HostAuth::new(b"server 7".to_vec()).unwrap();
    /// let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true)).host_auth(Some(we_are));
    /// let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ulb), null).unwrap();
    /// let ccfg = ClientConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    /// let client = Client::new(InProcess, &server.local_addr(), ccfg);
    /// client.call(&CallHeader::new(7, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap();
    /// let theirs = client.draft07_peer_properties().expect("the server's CONNPROP_FINAL");
    /// assert_eq!(theirs.host_auth.as_deref(), Some(&b"server 7"[..]));
    /// ```
    pub fn draft07_peer_properties(&self) -> Option<rpcrdma_v2::draft07::properties::Properties> {
        self.lanes[0].draft07_peer_properties()
    }

    /// The first connection's inline thresholds, once its version is settled.
    pub fn thresholds(&self) -> Option<InlineThresholds> {
        self.lanes[0].thresholds()
    }

    /// What this client has sent so far, over all its connections.
    pub fn stats(&self) -> ClientStats {
        self.lanes.iter().map(|l| l.stats()).fold(ClientStats::default(), |a, s| ClientStats {
            short: a.short + s.short,
            chunked: a.chunked + s.chunked,
            long: a.long + s.long,
            continued: a.continued + s.continued,
            call_only: a.call_only + s.call_only,
            backward_dropped: a.backward_dropped + s.backward_dropped,
        })
    }

    /// How this client's connections ended, oldest first per lane (the latest [`ENDED_KEPT`]
    /// of each): each one it gave up ([`Ended::Closed`], e.g. a call with no reply within the
    /// requester's timeout) or lost ([`Ended::Lost`]: the responder or the transport closed
    /// it). Each is followed by a reconnect when calls are waiting, and calls in flight on it
    /// were retransmitted. Empty while the first connections last.
    pub fn ended(&self) -> Vec<Ended> {
        self.lanes.iter().flat_map(|l| l.ended()).collect()
    }

    /// The credits this client holds: the calls it may have in flight at once (its credit
    /// window, RFC 8166 section 3.3), summed over its connections.
    pub fn credits(&self) -> u32 {
        self.lanes.iter().map(|l| l.window()).sum()
    }

    /// What the client learned about responders (which lack Version Two), on its first
    /// connection.
    pub fn memory(&self) -> crate::memory::PeerMemory {
        self.lanes[0].memory()
    }

    /// How many connections it uses ([`ClientConfig::connections`]).
    pub fn connections(&self) -> usize {
        self.lanes.len()
    }

    /// The lane call `xid` goes on.
    fn lane(&self, xid: u32) -> &Lane<B> {
        &self.lanes[xid as usize % self.lanes.len()]
    }
}

/// A call message's XID: its first four bytes.
fn xid_of(message: &[u8]) -> Result<u32, ClientError> {
    message.first_chunk::<4>().map(|x| u32::from_be_bytes(*x)).ok_or(ClientError::NoXid(message.len()))
}
