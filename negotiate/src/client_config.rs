//! What a [`Client`](crate::client::Client) is configured with, what it counts, and why a call fails:
//! the types the client's core ([`Connection`](crate::connection::Connection)) and its I/O
//! ([`Client`](crate::client::Client), `client/lane.rs`) both speak, kept apart from both so that neither
//! imports the other to name them.

use std::sync::Arc;
use std::time::Duration;

use cm_private_data::PrivateData;
use rpcrdma_v1::Version;
use rpcrdma_verbs::QpCaps;

use crate::datapath::{DataPathError, Ended};
use crate::extension::Extension;
use crate::requester::{self, CallFailure, DuplicateXid, RequesterConfig};
use crate::thresholds::ADVERTISED_SIZE;
use rpcrdma_v2::properties::TransportProperties;

use crate::host_auth::HostAuth;

/// How a [`Client`](crate::client::Client) connects and behaves. Build one from [`Default`] with the setters, each
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
    /// draft-ietf-nfsv4-rpcrdma-version-two-07's extensions (its Appendix B): messages of
    /// their header types from the server go to their handlers, and their properties are
    /// stated in this client's RDMA2_CONNPROP_FINAL ([`crate::extension07`]). None by default.
    pub draft07_extensions: Vec<crate::extension07::Draft07Extension>,
    /// The transport properties this client states on each connection that settles on
    /// Version Two (`specs/rpcrdma2-transport-properties.txt`, types in
    /// `rpcrdma_v2::properties`), or `None` to make no exchange. The exchange follows the
    /// first call that settled the connection (one more round trip: on a blocking caller's
    /// thread, or after an async call on the client's dispatcher thread, never on the executor);
    /// a responder's reply changes the thresholds of the calls after it, and a responder
    /// without the extension leaves private data and the defaults in effect
    /// ([`Client::peer_properties`](crate::client::Client::peer_properties)). The Receives are made no smaller than the stated
    /// `max_recv_size`. `None` by default.
    pub properties: Option<TransportProperties>,
    /// How long the thread receiving for a lone call in progress polls the empty completion
    /// queue before it sleeps: a reply that arrives within it is taken without a thread
    /// switch, which is most of a short round trip's time, at the price of this much CPU
    /// when none comes. With more calls in progress nobody polls: their callers and the
    /// server want the CPU (measured: polling under the 64-caller load cost a quarter of
    /// its calls per second on two vCPUs). 30 us by default, as the server's
    /// [`ServerLimits::poll_before_wait`](crate::limits::ServerLimits::poll_before_wait);
    /// 0 sleeps at once.
    pub poll_before_wait: Duration,
    /// The host authentication material this client states on each -07 connection, in its
    /// RDMA2_CONNPROP_FINAL (draft-ietf-nfsv4-rpcrdma-version-two-07 section 5.2.6; see
    /// [`crate::host_auth`]); `None` (the default) states none. The server's, if it states
    /// any, is in [`Client::draft07_peer_properties`](crate::client::Client::draft07_peer_properties).
    pub host_auth: Option<HostAuth>,
    /// Keeps a connection up for the server's reverse-direction calls: while set, a client
    /// made with [`Client::with_backchannel`](crate::client::Client::with_backchannel) connects at
    /// once and, whenever its connection ends (the server closed it as idle, it was lost),
    /// connects again and calls this program's NULL procedure on the new connection, so that
    /// the server learns its version and offer and can call back without waiting for the
    /// client's next call (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.6.5: "forward-
    /// direction Requesters SHOULD maintain a transport connection as long as the RPC server
    /// might send reverse-direction Calls"). The client's dispatcher decides when, and the
    /// workers that serve its backward calls make the NULL call: no thread a connection. `None` (the
    /// default) connects only for calls; a client without a backchannel ignores it.
    pub keep_connected: Option<KeepConnected>,
}

/// The ONC RPC program and version whose NULL procedure (procedure 0, which by convention
/// every program answers, taking and returning nothing) a client calls to establish a connection it keeps for the
/// server's reverse-direction calls ([`ClientConfig::keep_connected`]).
///
/// ```
/// use negotiate::client::{ClientConfig, KeepConnected};
/// // NFS version 4's NULL procedure, as an NFSv4.1 client with delegations would keep.
/// let cfg = ClientConfig::default().keep_connected(Some(KeepConnected { program: 100003, version: 4 }));
/// assert_eq!(cfg.keep_connected.unwrap().program, 100003);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepConnected {
    /// The program number.
    pub program: u32,
    /// The program's version.
    pub version: u32,
}

impl Default for ClientConfig {
    /// Versions 1 to 2, a lone call's empty completion queue polled for 30 us before its
    /// receiver sleeps, and private data advertising 4096-byte Sends and Receives with the R flag
    /// set, as the Linux client sets it: a responder that sets it too invalidates a call's one
    /// rkey with its reply's Send (RFC 8797 section 4.1), so the call ends without a Local
    /// Invalidate of its own to wait for.
    fn default() -> Self {
        ClientConfig {
            requester: requester::RequesterConfig::default(),
            private_data: Some(PrivateData::new(
                cm_private_data::Flags::REMOTE_INVALIDATE,
                ADVERTISED_SIZE,
                ADVERTISED_SIZE,
            )),
            foreign_private_data: None,
            caps: QpCaps::default(),
            connect_timeout: Duration::from_secs(5),
            connections: 1,
            extensions: Vec::new(),
            draft07_extensions: Vec::new(),
            properties: None,
            poll_before_wait: Duration::from_micros(30),
            host_auth: None,
            keep_connected: None,
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
    draft07_extensions: Vec<crate::extension07::Draft07Extension>,
    properties: Option<TransportProperties>,
    poll_before_wait: Duration,
    host_auth: Option<HostAuth>,
    keep_connected: Option<KeepConnected>,
});

nested_setters!(
    ClientConfig,
    requester {
        versions: (Version, Version),
        credits: u32,
        timeout: Duration,
        max_attempts: u32,
        version_two: rpcrdma_v2::dialect::VersionTwo
    }
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

/// Why a call failed, or (from [`Client::connect`](crate::client::Client::connect)) why the first connection could not be
/// made. A call that ran out of attempts says what happened to its last attempt, with the
/// cause: the verbs error of the connection attempt, or how the connection ended.
///
/// ```
/// use negotiate::client::{Client, ClientConfig, ClientError};
/// use negotiate::onc::CallHeader;
/// use rpcrdma_v1::ulb::OpaqueAtUlb;
/// use rpcrdma_verbs::InProcess;
/// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// let cfg = ClientConfig::default();
/// let client = Client::new(InProcess, "inproc:nobody-listens-here", cfg);
/// // Refused before any connection is tried: a message too short to have an XID.
/// assert!(matches!(client.call(&[0, 0], &ulb), Err(ClientError::NoXid(2))));
/// match client.call(&CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb) {
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
    /// The responder refused the call's chunks (RDMA_ERROR ERR_CHUNK, and on -07
    /// RDMA2_ERR_READ_CHUNKS, WRITE_CHUNKS, SEGMENTS, WRITE_RESOURCE or REPLY_RESOURCE),
    /// with the sizes of the chunks the call's Upper-Layer Binding asked for: a Version One
    /// responder says nothing of its limits, so this side says what it sent. A
    /// [`Server`](crate::server::Server) refuses a chunk longer than its
    /// `HeaderLimits::max_chunk_len` (2 MiB by default) and logs that limit with the size.
    #[error("the responder refused the call's chunks ({chunks}): {failure}; a responder refuses chunks over its own limit (a negotiate Server's HeaderLimits::max_chunk_len, 2 MiB by default)")]
    ChunksRefused {
        /// The chunks the call asked for (boxed: an error stays small).
        chunks: Box<ChunkSizes>,
        /// The responder's answer.
        #[source]
        failure: CallFailure,
    },
    /// Its XID is in use by another call in progress on this client.
    #[error(transparent)]
    DuplicateXid(#[from] DuplicateXid),
    /// The message is not an RPC message (shorter than its XID).
    #[error("an RPC message of {0} bytes has no XID")]
    NoXid(usize),
    /// Moving its bytes failed: marshaling, registration, reassembly.
    #[error(transparent)]
    DataPath(#[from] DataPathError),
    /// An RDMA_OPTIONAL ([`Client::send_option`](crate::client::Client::send_option)), or a -07
    /// extension's message ([`Client::send_extension`](crate::client::Client::send_extension)),
    /// larger than the server's inline threshold.
    #[error("a message of {len} bytes for an extension exceeds the inline threshold of {threshold}")]
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
/// use negotiate::onc::{self, CallHeader};
/// // Every reply is a SUCCESS with no results: 24 bytes.
/// let handler = |call: &[u8]| {
///     let mut reply = Vec::new();
///     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
///     reply
/// };
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), handler).unwrap();
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// let small = CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap();
/// client.call(&small, &ulb).unwrap(); // fits inline: Short
/// // 8 KiB of arguments: over the inline threshold, nothing DDP-eligible: Long.
/// let big = CallHeader::new(2, 0x2000_0001, 1, 1).message(&[0; 8192]).unwrap();
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
    /// Of the short ones, those continued across several Sends (-07's RDMA2_CALL_MIDDLE
    /// parts, [`RequesterConfig::max_call_parts`](crate::requester::RequesterConfig::max_call_parts)).
    pub continued: u64,
    /// Of the short ones, call-only procedures' calls ([`Client::call_only`](crate::client::Client::call_only)).
    pub call_only: u64,
    /// Backward calls from the server dropped unserved: beyond its backward credit by more
    /// than the client keeps waiting (RFC 8167 section 4.1; `client/lane/backward.rs`), or
    /// while the client was closing. Each such call times out at the server.
    pub backward_dropped: u64,
}

/// The chunks a call asked for, as its Upper-Layer Binding gave them
/// ([`ClientError::ChunksRefused`]).
///
/// ```
/// use negotiate::client::ChunkSizes;
/// let c = ChunkSizes { read: vec![1 << 20], write: vec![4 << 20], max_reply: 1024 };
/// assert_eq!(c.to_string(), "Read chunks of [1048576] bytes, Write chunks of [4194304] bytes, replies of up to 1024 bytes");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChunkSizes {
    /// Each DDP-eligible argument's length: a Read chunk each.
    pub read: Vec<usize>,
    /// Each DDP-eligible result's largest length: a Write chunk each.
    pub write: Vec<usize>,
    /// The largest reply (a Reply chunk this large where it exceeds the inline threshold).
    pub max_reply: usize,
}

impl ChunkSizes {
    /// What `ulb` asks for the call `message`.
    pub fn of<U: rpcrdma_v1::ulb::UpperLayerBinding + ?Sized>(ulb: &U, message: &[u8]) -> ChunkSizes {
        let mut items = Vec::new();
        ulb.call_ddp_items(message, &mut items);
        let mut write = Vec::new();
        ulb.reply_ddp_maxima(message, &mut write);
        ChunkSizes { read: items.iter().map(|i| i.len).collect(), write, max_reply: ulb.max_reply_size(message) }
    }
}

impl std::fmt::Display for ChunkSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Read chunks of {:?} bytes, Write chunks of {:?} bytes, replies of up to {} bytes",
            self.read, self.write, self.max_reply
        )
    }
}

impl ClientError {
    /// `self`, with the sizes of `message`'s chunks when it is the responder's refusal of
    /// them ([`ClientError::ChunksRefused`]).
    pub(crate) fn with_chunks<U: rpcrdma_v1::ulb::UpperLayerBinding + ?Sized>(self, ulb: &U, message: &[u8]) -> Self {
        use rpcrdma_v2::draft07::xdr::Rpcrdma2HdrError as E07;
        let refused = match &self {
            ClientError::Call(CallFailure::Peer(e)) => match e {
                crate::reply::PeerError::Common(rpcrdma_v1::verdict::PeerError::Chunk) => true,
                crate::reply::PeerError::Draft07(e) => matches!(
                    e,
                    E07::RdmaMaxChunks { .. }
                        | E07::Rdma2ErrSegments(_)
                        | E07::Rdma2ErrWriteResource(_)
                        | E07::Rdma2ErrReplyResource(_)
                ),
                _ => false,
            },
            _ => false,
        };
        if !refused {
            return self;
        }
        // (ERR_CHUNK also answers a header the responder could not parse: only a call that
        // asked for Read or Write chunks was refused for them.)
        let chunks = ChunkSizes::of(ulb, message);
        match self {
            ClientError::Call(failure) if !chunks.read.is_empty() || !chunks.write.is_empty() => {
                ClientError::ChunksRefused { chunks: Box::new(chunks), failure }
            }
            other => other,
        }
    }
}
