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
//! thread per connection (`client/lane.rs`) makes connections, reads the clock, and receives when no
//! call has been in progress for a while (backward calls, a connection lost while idle) or
//! when async calls wait. What happens in response is decided by one
//! [`ClientCore`](crate::client_core::ClientCore) per connection under a mutex, the same value
//! the deterministic simulator drives; these files are only its I/O.

mod async_call;
mod in_place;
mod lane;

use std::sync::Arc;
use std::time::Duration;

use cm_private_data::PrivateData;
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Address, Backend, QpCaps};

pub use async_call::AsyncCall;
pub use in_place::InPlaceReply;
use lane::{Lane, Message, Sink};

use crate::backchannel::Handler;
use crate::client_core::PeerProperties;
pub use crate::client_core::ENDED_KEPT;
use crate::datapath::{DataPathError, Ended};
use crate::extension::{Extension, OptionReply};
use crate::requester::{self, CallFailure, DuplicateXid, RequesterConfig};
use crate::thresholds::ADVERTISED_SIZE;
use rpcrdma_v2::properties::TransportProperties;

/// How a [`Client`] connects and behaves. Build one from [`Default`] with the setters, each
/// named after the field it sets (the requester's most used fields have their own):
///
/// ```
/// use std::time::Duration;
/// use negotiate::client::ClientConfig;
/// let cfg = ClientConfig::default().credits(64).connections(2).connect_timeout(Duration::from_secs(1));
/// assert_eq!((cfg.requester.credits, cfg.connections), (64, 2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Versions, credits, timeouts, limits.
    pub requester: requester::RequesterConfig,
    /// The RFC 8797 private data to send at connect, or `None` to send none.
    pub private_data: Option<PrivateData>,
    /// Eight bytes to send at connect *instead of* `private_data`, for interop tests only
    /// ([`ClientConfig::foreign_private_data`]).
    pub(crate) foreign_private_data: Option<[u8; 8]>,
    /// Queue pair capacities.
    pub caps: QpCaps,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
    /// How many connections to make to the responder (at least one; 0 counts as 1): each has
    /// its own credits, Receives and dispatcher, and a call goes on the one its XID picks
    /// (XID mod connections), so that consecutive XIDs spread evenly, as the Linux client's
    /// `nconnect` spreads its calls.
    pub connections: usize,
    /// Version Two extensions (draft section 3.1): the RDMA_OPTIONAL messages the server
    /// sends on a connection settled on Version Two go to these handlers; any other opttype
    /// is answered with RDMA_ERR_INVAL_OPTION. Each connection registers them anew
    /// ([`crate::extension`]). None by default.
    pub extensions: Vec<Extension>,
    /// The transport properties this client states on each connection that settles on
    /// Version Two (`specs/rpcrdma2-transport-properties.txt`, types in
    /// `rpcrdma_v2::properties`), or `None` to make no exchange. The exchange follows the
    /// first call that settled the connection (one more round trip: on a blocking caller's
    /// thread, or after an async call on the client's dispatcher thread, never on the executor);
    /// a responder's reply changes the thresholds of the calls after it, and a responder
    /// without the extension leaves private data and the defaults in effect
    /// ([`Client::peer_properties`]). The Receives are made no smaller than the stated
    /// `max_recv_size`. `None` by default.
    pub properties: Option<TransportProperties>,
}

impl Default for ClientConfig {
    /// Versions 1 to 2 and private data advertising 4096-byte Sends and Receives with the R flag
    /// clear.
    fn default() -> Self {
        ClientConfig {
            requester: requester::RequesterConfig::default(),
            private_data: Some(PrivateData::new(cm_private_data::Flags::empty(), ADVERTISED_SIZE, ADVERTISED_SIZE)),
            foreign_private_data: None,
            caps: QpCaps::default(),
            connect_timeout: Duration::from_secs(5),
            connections: 1,
            extensions: Vec::new(),
            properties: None,
        }
    }
}

rpcrdma_verbs::setters!(ClientConfig {
    requester: RequesterConfig,
    private_data: Option<PrivateData>,
    caps: QpCaps,
    connect_timeout: Duration,
    connections: usize,
    extensions: Vec<Extension>,
    properties: Option<TransportProperties>,
});

nested_setters!(
    ClientConfig,
    requester { versions: (Version, Version), credits: u32, timeout: Duration, max_attempts: u32 }
);

impl ClientConfig {
    /// For interop tests only: send these eight bytes at connect *instead of* `private_data`
    /// (another layer's private data, or garbage), to see a responder treat them as absent
    /// (RFC 8797 section 5.1). The interop matrix's "garbage private data" axis uses it.
    #[doc(hidden)]
    #[must_use]
    pub fn foreign_private_data(mut self, bytes: Option<[u8; 8]>) -> Self {
        self.foreign_private_data = bytes;
        self
    }

    /// For interop tests only: the bytes [`ClientConfig::foreign_private_data`] set.
    #[doc(hidden)]
    pub fn sends_foreign_private_data(&self) -> Option<[u8; 8]> {
        self.foreign_private_data
    }
}

/// Why a call failed, or (from [`Client::connect`]) why the first connection could not be
/// made. A call that ran out of attempts says what happened to its last attempt, with the
/// cause: the verbs error of the connection attempt, or how the connection ended.
///
/// ```
/// use negotiate::client::{Client, ClientConfig, ClientError};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_verbs::InProcess;
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// let cfg = ClientConfig::default();
/// let client = Client::new(InProcess, "inproc:nobody-listens-here", cfg);
/// // Refused before any connection is tried: a message too short to have an XID.
/// assert!(matches!(client.call(&[0, 0], &ulb), Err(ClientError::NoXid(2))));
/// match client.call(&[0, 0, 0, 1, 0, 0, 0, 0], &ulb) {
///     Err(e @ ClientError::Refused { .. }) => assert!(e.to_string().contains("nothing listens there")),
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Nothing listens at the address (`ECONNREFUSED`, `RDMA_CM_EVENT_UNREACHABLE`).
    #[error("connecting to {addr}: refused, nothing listens there (gave up after {attempts} attempts)")]
    Refused {
        /// The responder's address.
        addr: String,
        /// Attempts made.
        attempts: u32,
        /// The verbs error ([`rpcrdma_verbs::Error::ConnectionRefused`]).
        #[source]
        source: rpcrdma_verbs::Error,
    },
    /// The address is malformed for the backend or names no host: no attempt can succeed.
    #[error("connecting to {addr}: bad address")]
    BadAddress {
        /// The responder's address.
        addr: String,
        /// The verbs error ([`rpcrdma_verbs::Error::BadAddress`]).
        #[source]
        source: rpcrdma_verbs::Error,
    },
    /// The responder did not accept within [`ClientConfig::connect_timeout`] (a listener that
    /// never accepts, a hung or stopped server).
    #[error("connecting to {addr}: not accepted within {timeout:?} (gave up after {attempts} attempts)")]
    ConnectTimeout {
        /// The responder's address.
        addr: String,
        /// The connect timeout.
        timeout: Duration,
        /// Attempts made.
        attempts: u32,
        /// The verbs error ([`rpcrdma_verbs::Error::Timeout`]).
        #[source]
        source: rpcrdma_verbs::Error,
    },
    /// Connecting failed otherwise: rejected, aborted, or out of local resources.
    #[error("connecting to {addr} failed (gave up after {attempts} attempts)")]
    ConnectFailed {
        /// The responder's address.
        addr: String,
        /// Attempts made.
        attempts: u32,
        /// What failed (shared: one connection attempt can fail several calls).
        #[source]
        source: Arc<DataPathError>,
    },
    /// No reply within the requester's timeout on the last attempt; each attempt that timed
    /// out closed its connection (RFC 8166 section 4.5.4).
    #[error("no reply within {timeout:?} (gave up after {attempts} attempts)")]
    ReplyTimeout {
        /// The requester's timeout ([`requester::RequesterConfig::timeout`]).
        timeout: Duration,
        /// Attempts made.
        attempts: u32,
    },
    /// The connection went down under the last attempt before its reply: the responder closed
    /// it (a server that stopped, or whose handler failed), or the transport failed.
    #[error("connection lost (gave up after {attempts} attempts): {ended}")]
    ConnectionLost {
        /// Attempts made.
        attempts: u32,
        /// How that connection ended ([`Ended::Lost`] with the first error completion reaped
        /// on it, if any).
        ended: Ended,
    },
    /// The protocol's verdict on the call: the responder's RDMA_ERROR
    /// ([`CallFailure::Peer`]), no common version, a malformed reply.
    #[error(transparent)]
    Call(CallFailure),
    /// Its XID is in use by another call in progress on this client.
    #[error(transparent)]
    DuplicateXid(#[from] DuplicateXid),
    /// The message is not an RPC message (shorter than its XID).
    #[error("an RPC message of {0} bytes has no XID")]
    NoXid(usize),
    /// Moving its bytes failed: marshaling, registration, reassembly.
    #[error(transparent)]
    DataPath(#[from] DataPathError),
    /// An RDMA_OPTIONAL ([`Client::send_option`]) larger than the server's inline threshold.
    #[error("an RDMA_OPTIONAL of {len} bytes exceeds the inline threshold of {threshold}")]
    OptionTooLarge {
        /// Its length, transport header included.
        len: usize,
        /// The threshold.
        threshold: usize,
    },
    /// The client is shutting down.
    #[error("the client is closed")]
    Closed,
}

/// Calls sent, by the form marshaling chose (RFC 8166 section 3.5); retransmissions count
/// again.
///
/// ```
/// # use std::sync::Arc;
/// # use negotiate::client::{Client, ClientConfig};
/// # use negotiate::server::{Server, ServerConfig};
/// # use rpcrdma_v1::ulb::OpaqueAtUlb;
/// # use rpcrdma_verbs::InProcess;
/// # let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// // Every reply is 8 bytes: the call's XID, then REPLY.
/// let handler = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..]].concat();
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), handler).unwrap();
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// client.call(&[0, 0, 0, 1, 0, 0, 0, 0], &ulb).unwrap(); // fits inline: Short
/// let mut big = vec![0u8; 8192]; // over the inline threshold, nothing DDP-eligible: Long
/// big[3] = 2;
/// client.call(&big, &ulb).unwrap();
/// let stats = client.stats();
/// assert_eq!((stats.short, stats.chunked, stats.long), (1, 0, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientStats {
    /// Short: RDMA_MSG, all inline.
    pub short: u64,
    /// Chunked: RDMA_MSG with DDP-eligible arguments in Read chunks.
    pub chunked: u64,
    /// Long: RDMA_NOMSG, the whole call in a position-zero Read chunk.
    pub long: u64,
}

/// A requester bound to one responder address.
///
/// ```
/// use std::sync::Arc;
/// use negotiate::client::{Client, ClientConfig};
/// use negotiate::server::{Server, ServerConfig};
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_verbs::InProcess;
///
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// // A service that answers every call with an RPC reply of the same XID.
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), |call: &[u8]| {
///     let mut reply = call[..4].to_vec();
///     reply.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
///     reply
/// })
/// .unwrap();
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// let reply = client.call(&[0, 0, 0, 42, 0, 0, 0, 0], &ulb).unwrap();
/// assert_eq!(reply, [0, 0, 0, 42, 0, 0, 0, 1, 0, 0, 0, 0]);
/// assert_eq!(client.version(), Some(rpcrdma_v1::Version::TWO)); // both sides speak Version Two
/// ```
pub struct Client<B: Backend> {
    /// One per connection ([`ClientConfig::connections`]); a call goes on lane XID mod their
    /// number, so that one XID always meets the same requester (which refuses a duplicate).
    lanes: Vec<Lane<B>>,
}

impl<B: Backend + Clone> Client<B> {
    /// A client for the responder at `addr` (a `&str`, a `String` or a
    /// [`SocketAddr`](std::net::SocketAddr): [`Address`]). It starts connecting in the background and
    /// returns at once; a connection that cannot be made shows in the calls that need it
    /// ([`ClientError::Refused`], ...). See [`Client::connect`] to fail early instead.
    pub fn new(backend: B, addr: impl Into<Address>, cfg: ClientConfig) -> Self {
        let lanes =
            Lane::start_all(backend, addr.into().as_str(), cfg, None, false).expect("a lazy start makes no connection");
        Client { lanes }
    }

    /// A client for the responder at `addr` whose first connection is made before this
    /// returns, or whose error this returns (after one attempt): refused, bad address, connect
    /// timeout, or another connect failure. Later connections are made as [`Client::new`]'s
    /// are.
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
        Lane::start_all(backend, addr.into().as_str(), cfg, None, true).map(|lanes| Client { lanes })
    }

    /// A client whose connections also serve backward-direction calls from the server with
    /// `handler` (RFC 8167; see [`backchannel`](crate::backchannel)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::with_backchannel(InProcess, &server.local_addr(), ClientConfig::default(), Arc::new(echo));
    /// client.call(&[0, 0, 0, 1, 0, 0, 0, 0], &ulb).unwrap(); // the forward direction first
    /// let back = &server.backchannels()[0];
    /// assert_eq!(back.call(&[0, 0, 0, 9, 0, 0, 0, 0, 7, 7, 7, 7]).unwrap(), [0, 0, 0, 9, 0, 0, 0, 1, 7, 7, 7, 7]);
    /// ```
    pub fn with_backchannel(backend: B, addr: impl Into<Address>, cfg: ClientConfig, handler: Handler) -> Self {
        let lanes = Lane::start_all(backend, addr.into().as_str(), cfg, Some(handler), false)
            .expect("a lazy start makes no connection");
        Client { lanes }
    }
}

impl<B: Backend> Client<B> {
    /// Calls: sends the RPC call `message` (whose first four bytes are its XID) and returns
    /// the RPC reply message. `ulb` declares the DDP-eligible arguments and results and the
    /// largest reply (RFC 8166 section 6).
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
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let mut reply = Vec::with_capacity(4096);
    /// for xid in 1..=3u8 {
    ///     client.call_into(&[0, 0, 0, xid, 0, 0, 0, 0, 0, 0, 0, 9], &ulb, &mut reply).unwrap();
    ///     assert_eq!(reply, [0, 0, 0, xid, 0, 0, 0, 1, 0, 0, 0, 9]);
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
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// // The opaque whose length word is at 8 is DDP-eligible: 64 KiB of it go in a Read chunk.
    /// let ulb = OpaqueAtUlb { call_opaque: Some(8), reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let sum = |call: &[u8]| {
    ///     let total: u32 = call[12..].iter().map(|&b| u32::from(b)).sum();
    ///     [&call[..4], &[0, 0, 0, 1][..], &total.to_be_bytes()].concat()
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), sum).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let mut message = [0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0].to_vec();
    /// message.resize(12 + (64 << 10), 1);
    /// let mut reply = Vec::new();
    /// client.call_lent(&mut message, &ulb, &mut reply).unwrap();
    /// assert_eq!(reply[8..], (64u32 << 10).to_be_bytes());
    /// assert_eq!(message.len(), 12 + (64 << 10)); // handed back
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
    /// result is copied once, by the RDMA Write, as with raw verbs; read it with
    /// [`InPlaceReply::result`] or walk the whole reply with [`InPlaceReply::pieces`]. The
    /// buffers go back to the connection when the reply is dropped.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// // Replies carry a DDP-eligible opaque after the XID and msg_type words: 64 KiB here.
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 1 << 16, max_reply: 256 };
    /// let big = |call: &[u8]| {
    ///     let mut r = [&call[..4], &[0, 0, 0, 1], &(1u32 << 16).to_be_bytes()].concat();
    ///     r.resize(12 + (1 << 16), 7);
    ///     r
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), big).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let reply = client.call_in_place(&[0, 0, 0, 9, 0, 0, 0, 0], &ulb).unwrap();
    /// assert_eq!(reply.len(), 12 + (1 << 16));
    /// let result = reply.result(0).unwrap(); // where the server's RDMA Write put it
    /// assert!(result.len() == 1 << 16 && result.iter().all(|&b| b == 7));
    /// assert_eq!(reply.to_vec()[..12], [0, 0, 0, 9, 0, 0, 0, 1, 0, 1, 0, 0]);
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
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    ///
    /// // Any executor drives it; here the smallest one, which parks the thread between polls.
    /// struct Unpark(std::thread::Thread);
    /// impl Wake for Unpark {
    ///     fn wake(self: Arc<Self>) { self.0.unpark() }
    /// }
    /// let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    /// let mut call = std::pin::pin!(client.call_async(&[0, 0, 0, 5, 0, 0, 0, 0], &ulb));
    /// let reply = loop {
    ///     match call.as_mut().poll(&mut Context::from_waker(&waker)) {
    ///         Poll::Ready(reply) => break reply.unwrap(),
    ///         Poll::Pending => std::thread::park(),
    ///     }
    /// };
    /// assert_eq!(reply, [0, 0, 0, 5, 0, 0, 0, 1]);
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
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// client.call(&[0, 0, 0, 1, 0, 0, 0, 0], &ulb).unwrap(); // settles Version Two
    /// // The server registered no extension: opttype 99 is not supported.
    /// assert_eq!(client.send_option(99, b"hello", &[]).unwrap(), OptionReply::NotSupported);
    /// ```
    pub fn send_option(&self, opttype: u32, optinfo: &[u8], payload: &[u8]) -> Result<OptionReply, ClientError> {
        self.lanes[0].send_option(opttype, optinfo, payload)
    }

    /// What the first connection's transport-properties exchange gave
    /// ([`ClientConfig::properties`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::client_core::PeerProperties;
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_v2::properties::TransportProperties;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let big = TransportProperties { max_send_size: Some(16384), max_recv_size: Some(16384), ..Default::default() };
    /// let server_cfg = ServerConfig::default().properties(Some(big));
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 16384 };
    /// let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    /// let server = Server::start(InProcess, "inproc:*", server_cfg, Arc::new(ulb), echo).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default().properties(Some(big)));
    /// client.call(&[0, 0, 0, 1, 0, 0, 0, 0], &ulb).unwrap(); // settles Version Two, then the exchange
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
