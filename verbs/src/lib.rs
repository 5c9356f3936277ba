//! The one verbs engine every RPC-over-RDMA version runs over.
//!
//! The API is shaped like the verbs (libibverbs + librdmacm), not like sockets: a
//! [protection domain](ProtectionDomain) in which [memory is registered](MemoryRegion) with
//! [`Access`] flags, yielding (address, length, rkey); a reliable-connected
//! [queue pair](QueuePair) on which one posts Receives, Sends (optionally with Invalidate),
//! RDMA Writes and Reads and Local Invalidates, and from which one reaps [`Completion`]s; and a
//! connection manager ([`Backend::listen`], [`Backend::connect`], [`ConnectRequest::accept`])
//! that carries private data both ways and reports disconnects ([`CmEvent`]).
//!
//! Credits are not the engine's business; receive buffers are: a Send that finds no Receive
//! posted, or one too small, is a fatal connection error, exactly as on hardware with
//! `rnr_retry_count` 0.
//!
//! [`Backend`] ties the pieces together so a test suite (tests/semantics.rs) is written once,
//! generic over the backend, and every backend must pass it. Backends:
//!
//! * [`InProcess`] — the embedded default, no C dependency, hardware-faithful semantics.
//! * [`Tcp`] — the same semantics between processes or hosts, one TCP connection per queue
//!   pair, the target enforcing its registrations.
//! * `Rdma` (cargo feature `rdma`) — rdma-core (libibverbs + librdmacm) through `rdma-sys`,
//!   for real devices and Soft-RoCE; `guest/test-rdma` runs the semantics suite on rdma_rxe.
//!
//! Code that picks a backend at run time is generic over [`Backend`] and instantiated once per
//! backend, as tests/semantics.rs does.
//!
//! ```
//! use std::time::Duration;
//! use rpcrdma_verbs::*;
//!
//! let b = InProcess;
//! let t = Duration::from_secs(5);
//! let listener = b.listen(&b.any_address()).unwrap();
//! let addr = listener.local_addr();
//! let client = std::thread::spawn(move || {
//!     let pd = InProcess.alloc_pd().unwrap();
//!     let (qp, accept_data) = InProcess.connect(&pd, &addr, b"hello", QpCaps::default(), t).unwrap();
//!     assert_eq!(accept_data.len(), ACCEPT_PRIVATE_DATA_MAX);
//!     let msg = pd.register(b"ping".to_vec(), Access::empty()).unwrap();
//!     qp.post_send(1, &[Sge::whole(&msg)], None).unwrap();
//!     assert!(qp.wait_cq(t).unwrap().is_ok());
//!     qp // keep the connection up until joined
//! });
//! let req = listener.get_request(t).unwrap();
//! assert_eq!(&req.private_data()[..5], b"hello");
//! let pd = b.alloc_pd().unwrap();
//! let buf = pd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
//! // The Receive is posted before the connection is established: the client Sends at once.
//! let qp = req.accept_with(&pd, b"welcome", QpCaps::default(), |qp| qp.post_recv(7, Sge::whole(&buf))).unwrap();
//! let c = qp.wait_cq(t).unwrap();
//! assert_eq!((c.wr_id, c.opcode, c.byte_len), (7, Opcode::Recv, 4));
//! buf.with(|b| assert_eq!(&b[..4], b"ping"));
//! client.join().unwrap();
//! ```

#![cfg_attr(not(feature = "rdma"), forbid(unsafe_code))]
#![cfg_attr(feature = "rdma", deny(unsafe_code))]
#![warn(missing_docs)]

mod batch;
pub mod capture;
mod chain;
mod cm;
mod completion;
mod flags;
pub mod inproc;
mod memory;
#[cfg(feature = "rdma")]
#[allow(unsafe_code)]
pub mod rdma;
mod reactor;
mod setters;
pub mod tcp;
pub mod test_env;

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub use batch::{flush_held, Paused, PostBatch};
pub use chain::{post_each, ChainError, WorkRequest};
pub use cm::{pad_private_data, CmEvent, PeerAddress, PeerHost, ACCEPT_PRIVATE_DATA_MAX, CONNECT_PRIVATE_DATA_MAX};
pub use completion::{Completion, Opcode, Status};
pub use flags::SendFlags;
pub use inproc::InProcess;
pub use memory::{Access, RemoteBuf, Sge};
#[cfg(feature = "rdma")]
pub use rdma::Rdma;
pub use reactor::{Drove, Readiness};
pub use tcp::Tcp;

/// The result of a verbs call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors returned synchronously by a verbs call (the `errno` of libibverbs/librdmacm).
/// Failures of the work itself arrive as [`Completion`]s with a [`Status`], never here.
///
/// ```
/// use std::time::Duration;
/// use rpcrdma_verbs::*;
/// let pd = InProcess.alloc_pd().unwrap();
/// let err = pd.register(vec![0; 8], Access::REMOTE_WRITE).unwrap_err();
/// assert_eq!(err, Error::InvalidAccess(Access::REMOTE_WRITE)); // needs LOCAL_WRITE too
///
/// let t = Duration::from_millis(100);
/// match InProcess.connect(&pd, "inproc:nobody-listens-here", &[], QpCaps::default(), t) {
///     Err(Error::ConnectionRefused(addr)) => assert_eq!(addr, "inproc:nobody-listens-here"),
///     other => panic!("{:?}", other.map(|_| ())),
/// }
/// let too_long = [0u8; CONNECT_PRIVATE_DATA_MAX + 1];
/// let err = InProcess.connect(&pd, "inproc:x", &too_long, QpCaps::default(), t).map(|_| ()).unwrap_err();
/// assert_eq!(err, Error::PrivateDataTooLong { len: 57, max: 56 });
/// assert_eq!(err.to_string(), "private data of 57 bytes exceeds the CM limit of 56");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Private data longer than the CM message allows (56 on connect, 196 on accept).
    #[error("private data of {len} bytes exceeds the CM limit of {max}")]
    PrivateDataTooLong {
        /// Bytes offered.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The access flags are not a valid combination (`REMOTE_WRITE` without `LOCAL_WRITE`).
    #[error("invalid access flags {0:?}")]
    InvalidAccess(Access),
    /// The region was already deregistered.
    #[error("memory region is not registered")]
    NotRegistered,
    /// The queue is full: `max_recv_wr` Receives posted, or `max_send_wr` send-queue work
    /// requests whose completions have not been reaped (`ENOMEM` from `ibv_post_*`).
    #[error("work queue full")]
    QueueFull,
    /// More scatter/gather entries than `max_sge` (`EINVAL` from `ibv_post_send`).
    #[error("{0} scatter/gather entries exceed max_sge")]
    TooManySges(usize),
    /// A memory window would reach past its region's end.
    #[error("{len} bytes at offset {offset} do not fit a region of {region_len} bytes")]
    OutOfBounds {
        /// The window's offset in the region.
        offset: usize,
        /// The window's length.
        len: usize,
        /// The region's length.
        region_len: usize,
    },
    /// The work request's total length does not fit the 32-bit verbs byte count.
    #[error("work request longer than 2^32-1 bytes")]
    TooLong,
    /// The address is malformed for this backend.
    #[error("bad address {0:?}")]
    BadAddress(String),
    /// A system or rdma-core call failed while setting up (no RDMA device, `ibv_alloc_pd`,
    /// `ibv_create_cq` or `rdma_create_id` failing, `poll` on the CM's channel, ...): which
    /// call, and the errno it left.
    ///
    /// ```
    /// let e = rpcrdma_verbs::Error::Os { call: "ibv_alloc_pd", errno: 12 };
    /// assert!(e.to_string().starts_with("ibv_alloc_pd failed: "));
    /// ```
    #[error("{call} failed: {}", std::io::Error::from_raw_os_error(*errno))]
    Os {
        /// The call that failed.
        call: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// Something already listens on the address (`EADDRINUSE`).
    #[error("address {0:?} in use")]
    AddressInUse(String),
    /// Nothing listens on the address (`RDMA_CM_EVENT_UNREACHABLE` / `ECONNREFUSED`).
    #[error("nothing listens on {0:?}")]
    ConnectionRefused(String),
    /// The passive side rejected the connection, or went away before answering
    /// (`RDMA_CM_EVENT_REJECTED`).
    #[error("connection rejected")]
    Rejected,
    /// The active side gave up before the accept reached it.
    #[error("connection aborted by the peer")]
    ConnectionAborted,
    /// No answer within the timeout.
    #[error("timed out")]
    Timeout,
}

/// Where to listen or connect, as a backend reads it: `inproc:name` for the in-process
/// backend, `host:port` for TCP, `a.b.c.d:port` for rdma-core. Made from anything that reads
/// as a string (`&str`, `&String`, `String`) or from a [`SocketAddr`], so that the
/// `negotiate` API takes `impl Into<Address>`.
///
/// ```
/// use std::net::{Ipv4Addr, SocketAddr};
/// use rpcrdma_verbs::Address;
/// assert_eq!(Address::from("inproc:a").as_str(), "inproc:a");
/// assert_eq!(Address::from(&String::from("inproc:b")).as_str(), "inproc:b");
/// assert_eq!(Address::from(SocketAddr::from((Ipv4Addr::new(10, 0, 2, 15), 20049))).as_str(), "10.0.2.15:20049");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address(String);

impl Address {
    /// The address as the backends take it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<T: AsRef<str> + ?Sized> From<&T> for Address {
    fn from(addr: &T) -> Self {
        Address(addr.as_ref().to_string())
    }
}

impl From<String> for Address {
    fn from(addr: String) -> Self {
        Address(addr)
    }
}

impl From<SocketAddr> for Address {
    /// `ip:port`, or `[ip6]:port`.
    fn from(addr: SocketAddr) -> Self {
        Address(addr.to_string())
    }
}

/// Queue pair capacities (`struct ibv_qp_cap`), enforced at post time. Built from
/// [`Default`] with setters named after the fields:
///
/// ```
/// let caps = rpcrdma_verbs::QpCaps::default().max_send_wr(256).max_recv_wr(64);
/// assert_eq!((caps.max_send_wr, caps.max_recv_wr, caps.max_sge), (256, 64, 16));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct QpCaps {
    /// Send-queue work requests (Send, Write, Read, Local Invalidate) whose completions may be
    /// outstanding, i.e. not yet reaped (`max_send_wr`). An unsignaled one ([`SendFlags`])
    /// holds its slot until a later completion on the send queue is reaped.
    pub max_send_wr: u32,
    /// Receives that may be posted and not yet consumed (`max_recv_wr`).
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send-queue work request (`max_send_sge`).
    pub max_sge: u32,
    /// How long a send-queue work request on the wire may stay unacknowledged by the peer
    /// before it fails with [`Status::RetryExceeded`] and the queue pair goes to Error: a peer
    /// that stays connected but stops taking part (stops reading, on TCP) costs at most this.
    /// On hardware it is the queue pair's local ACK timeout times its `retry_cnt`
    /// (`IBV_WC_RETRY_EXC_ERR`), set by the CM; the TCP backend enforces it with a socket
    /// write timeout and the age of its oldest unanswered frame. The in-process backend lands
    /// every work request when it is posted, so nothing there waits for an acknowledgment.
    pub retry_timeout: Duration,
}

impl Default for QpCaps {
    /// 128 send and 128 receive work requests, 16 scatter/gather entries, a 10 s retry
    /// timeout (far above what a live peer takes, even on a starved machine; a hardware queue
    /// pair gives up sooner, after about half a second with rdma_cm's defaults).
    fn default() -> Self {
        QpCaps { max_send_wr: 128, max_recv_wr: 128, max_sge: 16, retry_timeout: Duration::from_secs(10) }
    }
}

crate::setters!(QpCaps { max_send_wr: u32, max_recv_wr: u32, max_sge: u32, retry_timeout: Duration });

/// How a listener takes connections ([`Backend::listen_with`]): the bounds that keep a peer
/// that connects and then says nothing, or connects a thousand times, from stalling or
/// exhausting the listener.
///
/// ```
/// use std::time::Duration;
/// use rpcrdma_verbs::ListenOptions;
/// let opts = ListenOptions::default().max_pending(8);
/// assert_eq!(opts.handshake_timeout, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ListenOptions {
    /// Connect requests held at once before [`Listener::get_request`] hands them out: those
    /// whose handshake is still arriving and those complete but not yet taken (the backlog of
    /// `rdma_listen`). Beyond it a new connection is turned away at once and counted in
    /// [`Listener::turned_away`]. On TCP a connection takes one of these only once it has
    /// sent its first bytes ([`ListenOptions::max_silent`] bounds the others), so that sockets
    /// that say nothing cannot shut newcomers out.
    pub max_pending: usize,
    /// TCP: of `max_pending`, those one host may hold ([`PeerHost::for_limits`]); beyond them
    /// its next connection that begins a request is turned away at once, counted in
    /// [`Listener::turned_away`], so that one host dripping its requests cannot take every
    /// place and shut other hosts out. (rdma_cm's handshakes are the kernel's, and in process
    /// none waits: there this bounds nothing.)
    pub max_pending_per_host: usize,
    /// How `max_pending_per_host` counts IPv6 hosts: by this many leading bits of their
    /// addresses ([`PeerHost::for_limits`]; 128, each address).
    pub ipv6_prefix_per_host: u8,
    /// TCP: connections held that have sent nothing yet, beside `max_pending`. Each costs a
    /// descriptor and a few bytes; beyond this many (or when the process runs out of
    /// descriptors) the oldest silent one is closed, counted in [`Listener::turned_away`], so
    /// that a newcomer that speaks at once is always heard. The listener holds at most a
    /// quarter of the process's descriptor limit (`RLIMIT_NOFILE`) so, whatever this says:
    /// silent sockets never take the descriptors the connections being served need.
    pub max_silent: usize,
    /// How long a connection may take to deliver its whole connect request, and to confirm an
    /// accept, before it is dropped (and counted in [`Listener::turned_away`]). A handshake in
    /// progress never holds up another: the TCP listener reads every pending one without
    /// blocking.
    pub handshake_timeout: Duration,
}

impl Default for ListenOptions {
    /// 64 pending requests, 16 of them for one host (each IPv6 address a host), 1024 silent
    /// connections, a 5 s handshake.
    fn default() -> Self {
        ListenOptions {
            max_pending: 64,
            max_pending_per_host: 16,
            ipv6_prefix_per_host: 128,
            max_silent: 1024,
            handshake_timeout: Duration::from_secs(5),
        }
    }
}

crate::setters!(ListenOptions {
    max_pending: usize,
    max_pending_per_host: usize,
    ipv6_prefix_per_host: u8,
    max_silent: usize,
    handshake_timeout: Duration,
});

/// The state of a queue pair, reduced to what a connected user can observe
/// (`IBV_QPS_RTS` or `IBV_QPS_ERR`).
///
/// ```
/// # use std::time::Duration;
/// # use rpcrdma_verbs::*;
/// # // A connected pair of queue pairs: (client pd, client qp, server pd, server qp).
/// # fn pair<B: Backend + Copy>(b: B) -> (B::Pd, B::Qp, B::Pd, B::Qp) {
/// #     let t = Duration::from_secs(5);
/// #     let listener = b.listen(&b.any_address()).unwrap();
/// #     let addr = listener.local_addr();
/// #     let client = std::thread::spawn(move || {
/// #         let pd = b.alloc_pd().unwrap();
/// #         let (qp, _) = b.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// #         (pd, qp)
/// #     });
/// #     let pd = b.alloc_pd().unwrap();
/// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
/// #     let (cpd, cqp) = client.join().unwrap();
/// #     (cpd, cqp, pd, qp)
/// # }
/// let (cpd, client, _, server) = pair(InProcess);
/// assert_eq!((client.state(), server.state()), (QpState::Ready, QpState::Ready));
/// client.disconnect();
/// let t = Duration::from_secs(5);
/// assert_eq!(server.cm_event(t), Some(CmEvent::Disconnected));
/// assert_eq!((client.state(), server.state()), (QpState::Error, QpState::Error));
/// // Work posted now never runs: it completes flushed.
/// let buf = cpd.register(vec![0; 4], Access::LOCAL_WRITE).unwrap();
/// client.post_recv(1, Sge::whole(&buf)).unwrap();
/// assert_eq!(client.wait_cq(t).unwrap().status, Status::WorkRequestFlushed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Connected; work requests execute.
    Ready,
    /// Disconnected or failed; every work request completes with
    /// [`Status::WorkRequestFlushed`].
    Error,
}

/// A verbs implementation. One value of it stands for the device/CM context (`ibv_context`,
/// `rdma_event_channel`); its associated types are the handles that backend hands out.
///
/// Write the protocol once, generic over the backend, and pick the backend at the call:
///
/// ```
/// # use std::time::Duration;
/// # use rpcrdma_verbs::*;
/// # // A connected pair of queue pairs: (client pd, client qp, server pd, server qp).
/// # fn pair<B: Backend + Copy>(b: B) -> (B::Pd, B::Qp, B::Pd, B::Qp) {
/// #     let t = Duration::from_secs(5);
/// #     let listener = b.listen(&b.any_address()).unwrap();
/// #     let addr = listener.local_addr();
/// #     let client = std::thread::spawn(move || {
/// #         let pd = b.alloc_pd().unwrap();
/// #         let (qp, _) = b.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// #         (pd, qp)
/// #     });
/// #     let pd = b.alloc_pd().unwrap();
/// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
/// #     let (cpd, cqp) = client.join().unwrap();
/// #     (cpd, cqp, pd, qp)
/// # }
/// /// One Send from client to server over backend `b`; what the server received.
/// fn ping<B: Backend + Copy>(b: B) -> Vec<u8> {
///     let t = Duration::from_secs(5);
///     let (cpd, client, spd, server) = pair(b);
///     let buf = spd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
///     server.post_recv(1, Sge::whole(&buf)).unwrap();
///     let msg = cpd.register(b"ping".to_vec(), Access::empty()).unwrap();
///     client.post_send(2, &[Sge::whole(&msg)], None).unwrap();
///     assert!(client.wait_cq(t).unwrap().is_ok());
///     let c = server.wait_cq(t).unwrap();
///     buf.with(|b| b[..c.byte_len as usize].to_vec())
/// }
/// assert_eq!(ping(InProcess), b"ping");
/// assert_eq!(ping(Tcp), b"ping");
/// ```
pub trait Backend: Send + Sync + 'static {
    /// A protection domain.
    type Pd: ProtectionDomain<Region = Self::Region>;
    /// A registered memory region.
    type Region: MemoryRegion;
    /// A connected reliable-connected queue pair.
    type Qp: QueuePair<Region = Self::Region>;
    /// A listening CM endpoint.
    type Listener: Listener<Request = Self::Request>;
    /// An incoming connect request not yet accepted or rejected.
    type Request: ConnectRequest<Pd = Self::Pd, Qp = Self::Qp>;

    /// The wildcard address that makes [`listen`](Backend::listen) bind a fresh endpoint
    /// reachable from this process (TCP's `127.0.0.1:0`); [`Listener::local_addr`] then says
    /// what to connect to.
    fn any_address(&self) -> String;

    /// Allocates a protection domain (`ibv_alloc_pd`).
    fn alloc_pd(&self) -> Result<Self::Pd>;

    /// Whether this backend's queue pairs wake a waker ([`QueuePair::arm_waker`] arms
    /// rather than answering [`Arm::Unsupported`]): then one thread can wait for many
    /// connections at once. False by default.
    ///
    /// ```
    /// use rpcrdma_verbs::{Backend, InProcess, Tcp};
    /// assert!(InProcess.wakes_wakers() && Tcp.wakes_wakers());
    /// ```
    fn wakes_wakers(&self) -> bool {
        false
    }

    /// Whether an RDMA Read or Write is carried out as it is posted, so that its completion
    /// never waits on the network or the peer (the in-process backend copies at once). A
    /// thread that must wait for one then holds nothing up for long; elsewhere an RDMA Read
    /// is a round trip. False by default.
    ///
    /// ```
    /// use rpcrdma_verbs::{Backend, InProcess, Tcp};
    /// assert!(InProcess.rdma_at_post() && !Tcp.rdma_at_post());
    /// ```
    fn rdma_at_post(&self) -> bool {
        false
    }

    /// The readiness loop that wakes this backend's wakers, where a thread that would sleep
    /// until one wakes it may do the loop's work itself instead ([`Readiness::drive`]): then
    /// what it waits for wakes nobody. `None` by default (the in-process backend completes
    /// work requests as they are posted, on the posting thread).
    ///
    /// ```
    /// use rpcrdma_verbs::{Backend, InProcess, Tcp};
    /// assert!(InProcess.readiness().is_none() && Tcp.readiness().is_some());
    /// ```
    fn readiness(&self) -> Option<Readiness> {
        None
    }

    /// Binds and listens on `addr` (`rdma_bind_addr` + `rdma_listen`) with the default
    /// [`ListenOptions`].
    fn listen(&self, addr: &str) -> Result<Self::Listener> {
        self.listen_with(addr, &ListenOptions::default())
    }

    /// Binds and listens on `addr` within the bounds of `opts`.
    fn listen_with(&self, addr: &str, opts: &ListenOptions) -> Result<Self::Listener>;

    /// Connects to `addr`, sending `private_data` (at most [`CONNECT_PRIVATE_DATA_MAX`]
    /// bytes) with the request, and creates the queue pair in `pd` (`rdma_resolve_addr`,
    /// `rdma_create_qp`, `rdma_connect`, wait for `RDMA_CM_EVENT_ESTABLISHED`). Returns the
    /// queue pair and the passive side's private data, zero-padded to
    /// [`ACCEPT_PRIVATE_DATA_MAX`] bytes as rdma_cm delivers it.
    fn connect(
        &self,
        pd: &Self::Pd,
        addr: &str,
        private_data: &[u8],
        caps: QpCaps,
        timeout: Duration,
    ) -> Result<(Self::Qp, Vec<u8>)>;
}

/// A protection domain (`struct ibv_pd`): memory registered in it is usable only by queue
/// pairs created in it, and its rkeys are looked up only by those queue pairs' peers.
/// Handles are cheap clones of one protection domain, so that one can outlive the connections
/// made in it: a client keeps its domain across reconnects.
///
/// ```
/// use rpcrdma_verbs::{Access, Backend, Error, InProcess, MemoryRegion, ProtectionDomain};
/// let pd = InProcess.alloc_pd().unwrap();
/// let a = pd.register(vec![0; 4096], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
/// let b = pd.register(vec![0; 4096], Access::REMOTE_READ).unwrap();
/// assert_eq!((a.len(), b.access()), (4096, Access::REMOTE_READ));
/// assert_ne!(a.rkey(), b.rkey()); // every registration gets its own keys
/// assert!(matches!(pd.register(vec![], Access::REMOTE_WRITE), Err(Error::InvalidAccess(_))));
/// ```
pub trait ProtectionDomain: Send + Sync + Clone {
    /// The region type registration returns.
    type Region: MemoryRegion;

    /// Registers `buf` with `access` rights (`ibv_reg_mr`). The region owns the buffer until
    /// [`MemoryRegion::deregister`] gives it back. Each registration gets a fresh,
    /// unpredictable rkey and address, never one used before.
    fn register(&self, buf: Vec<u8>, access: Access) -> Result<Self::Region>;
}

/// A registered memory region (`struct ibv_mr`). Handles are cheap clones of one region; a
/// posted work request keeps its own clone, as hardware keeps the pinned pages.
///
/// The owner reads and writes the memory with [`with`](MemoryRegion::with) and
/// [`with_mut`](MemoryRegion::with_mut) (the CPU's view, always allowed, even after
/// invalidation); the verbs reach it only through its keys. Do not post work requests from
/// inside those closures: the region is locked there.
///
/// ```
/// use rpcrdma_verbs::{Access, Backend, InProcess, MemoryRegion, ProtectionDomain, RemoteBuf};
/// let pd = InProcess.alloc_pd().unwrap();
/// let mr = pd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
/// mr.with_mut(|b| b[..5].copy_from_slice(b"hello"));
/// assert_eq!(mr.with(|b| b[..5].to_vec()), b"hello");
/// // What to tell the peer so it can RDMA Read the bytes from offset 8 on.
/// assert_eq!(mr.remote_at(8), RemoteBuf { addr: mr.addr() + 8, rkey: mr.rkey() });
///
/// let other_handle = mr.clone();
/// let buf = mr.deregister().unwrap(); // the buffer comes back; the keys die
/// assert_eq!(&buf[..5], b"hello");
/// assert!(other_handle.with(|b| b.is_empty()));
/// ```
pub trait MemoryRegion: Clone + Send + Sync {
    /// The region's virtual address as a peer names it in [`RemoteBuf::addr`] (`mr->addr`).
    fn addr(&self) -> u64;
    /// Length in bytes (`mr->length`).
    fn len(&self) -> usize;
    /// True for a zero-length region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The key a peer uses for RDMA Read/Write (`mr->rkey`).
    fn rkey(&self) -> u32;
    /// The key local work requests use (`mr->lkey`); informational here, since [`Sge`]
    /// names the region itself.
    fn lkey(&self) -> u32;
    /// The access rights it was registered with.
    fn access(&self) -> Access;
    /// The peer-facing description of the byte at `offset`.
    fn remote_at(&self, offset: usize) -> RemoteBuf {
        RemoteBuf { addr: self.addr() + offset as u64, rkey: self.rkey() }
    }
    /// Runs `f` on the region's bytes (empty once deregistered).
    fn with<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T;
    /// The region's bytes held for reading while the guard lives (empty once deregistered):
    /// [`with`](MemoryRegion::with) for a reader that needs several regions at once, such as
    /// a reply read where its chunks landed. The region stays locked meanwhile: keep the guard
    /// only while nothing else of this side touches the region (its windows closed, no work
    /// request naming it outstanding). A second `bytes`, `with` or `with_mut` on the same
    /// region before the guard is dropped waits for it forever, as a nested `with` would.
    ///
    /// ```
    /// use rpcrdma_verbs::{Access, Backend, InProcess, MemoryRegion, ProtectionDomain};
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let (a, b) = (pd.register(b"left".to_vec(), Access::empty()).unwrap(), pd.register(b"right".to_vec(), Access::empty()).unwrap());
    /// let (ga, gb) = (a.bytes(), b.bytes());
    /// assert_eq!([&ga[..], &gb[..]].concat(), b"leftright");
    /// ```
    fn bytes(&self) -> Self::Bytes<'_>;
    /// What [`bytes`](MemoryRegion::bytes) returns.
    type Bytes<'a>: std::ops::Deref<Target = [u8]>
    where
        Self: 'a;
    /// Runs `f` on the region's bytes, mutably (empty once deregistered).
    fn with_mut<T>(&self, f: impl FnOnce(&mut [u8]) -> T) -> T;
    /// Deregisters the region (`ibv_dereg_mr`) and returns its buffer. Both keys die at once;
    /// other handles to it see an empty, dead region, and work requests still naming it fail
    /// with [`Status::LocalProtectionError`]. Registering the buffer again yields new keys.
    fn deregister(self) -> Result<Vec<u8>>;
}

/// A connected reliable-connected queue pair with its completion queue (one CQ serves both
/// the send and the receive queue). Work requests execute in posting order; the plain posting
/// methods signal every one, the `*_with` ones take [`SendFlags`] and may leave a work request
/// unsignaled (selective signaling: it then reports only a failure, and a later completion on
/// the send queue says it completed). Any error completion moves the queue pair, and its peer, to [`QpState::Error`]:
/// outstanding and later work requests complete with [`Status::WorkRequestFlushed`] and
/// both sides get [`CmEvent::Disconnected`].
///
/// ```
/// # use std::time::Duration;
/// # use rpcrdma_verbs::*;
/// # // A connected pair of queue pairs: (client pd, client qp, server pd, server qp).
/// # fn pair<B: Backend + Copy>(b: B) -> (B::Pd, B::Qp, B::Pd, B::Qp) {
/// #     let t = Duration::from_secs(5);
/// #     let listener = b.listen(&b.any_address()).unwrap();
/// #     let addr = listener.local_addr();
/// #     let client = std::thread::spawn(move || {
/// #         let pd = b.alloc_pd().unwrap();
/// #         let (qp, _) = b.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// #         (pd, qp)
/// #     });
/// #     let pd = b.alloc_pd().unwrap();
/// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
/// #     let (cpd, cqp) = client.join().unwrap();
/// #     (cpd, cqp, pd, qp)
/// # }
/// let t = Duration::from_secs(5);
/// let (cpd, client, spd, server) = pair(InProcess);
/// // The server exposes a region; the client writes into it, then reads it back.
/// let exposed = spd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
/// let src = cpd.register(b"written by RDMA".to_vec(), Access::empty()).unwrap();
/// client.post_write(1, &[Sge::whole(&src)], exposed.remote_at(0)).unwrap();
/// let c = client.wait_cq(t).unwrap();
/// assert_eq!((c.wr_id, c.opcode, c.status, c.byte_len), (1, Opcode::RdmaWrite, Status::Success, 15));
/// exposed.with(|b| assert_eq!(&b[..15], b"written by RDMA"));
///
/// let dst = cpd.register(vec![0; 7], Access::LOCAL_WRITE).unwrap();
/// client.post_read(2, &[Sge::whole(&dst)], exposed.remote_at(11)).unwrap();
/// assert_eq!(client.wait_cq(t).unwrap().opcode, Opcode::RdmaRead);
/// dst.with(|b| assert_eq!(b, b"RDMA\0\0\0"));
/// assert!(server.wait_cq(Duration::ZERO).is_none()); // one-sided: the server saw nothing
/// ```
pub trait QueuePair: Send + Sync {
    /// The region type scatter/gather entries name.
    type Region: MemoryRegion;

    /// Posts a Receive into `sge` (`ibv_post_recv`); an incoming Send consumes it. The region
    /// needs [`Access::LOCAL_WRITE`], checked when a Send lands in it.
    fn post_recv(&self, wr_id: u64, sge: Sge<'_, Self::Region>) -> Result<()>;

    /// Posts a Send gathering `sges` (`ibv_post_send` with `IBV_WR_SEND`), or with
    /// `invalidate = Some(rkey)` a Send with Invalidate that invalidates `rkey` in the
    /// receiver's protection domain (`IBV_WR_SEND_WITH_INV`).
    fn post_send(&self, wr_id: u64, sges: &[Sge<'_, Self::Region>], invalidate: Option<u32>) -> Result<()>;

    /// Posts an RDMA Write of `sges` to `remote` (`IBV_WR_RDMA_WRITE`).
    fn post_write(&self, wr_id: u64, sges: &[Sge<'_, Self::Region>], remote: RemoteBuf) -> Result<()>;

    /// Posts an RDMA Read from `remote` into `sges`, as many bytes as they hold
    /// (`IBV_WR_RDMA_READ`). The local regions need [`Access::LOCAL_WRITE`].
    fn post_read(&self, wr_id: u64, sges: &[Sge<'_, Self::Region>], remote: RemoteBuf) -> Result<()>;

    /// Posts a Local Invalidate of `rkey` (`IBV_WR_LOCAL_INV`): a memory window this queue
    /// pair bound, which dies; or a region of this queue pair's protection domain, whose keys
    /// are dead from the completion on for every verbs access, local and remote, until the
    /// buffer is registered again.
    fn post_local_invalidate(&self, wr_id: u64, rkey: u32) -> Result<()>;

    /// Binds a memory window over `len` bytes at `offset` of `region`, granting this
    /// connection's peer `access` ([`Access::REMOTE_READ`] and/or [`Access::REMOTE_WRITE`]),
    /// and returns the name the peer uses for its first byte (a type-2 window,
    /// `ibv_alloc_mw` + `IBV_WR_BIND_MW`).
    ///
    /// The window's rkey is fresh, accepted only for RDMA from this queue pair's peer, and
    /// limited to the window's range and rights. It dies when this queue pair posts a
    /// [Local Invalidate](QueuePair::post_local_invalidate) of it or the peer sends a
    /// [Send with Invalidate](QueuePair::post_send) naming it: this is the only kind of key a
    /// Send with Invalidate may name (a region's rkey cannot be invalidated remotely, as
    /// with `ibv_reg_mr` on hardware), which is what RPC-over-RDMA's remote invalidation
    /// (RFC 8797 section 4.1) needs. The bind is a send-queue work request completing with
    /// [`Opcode::BindWindow`]; work requests posted after it see the window.
    ///
    /// Refused at once with [`Error::InvalidAccess`] when `access` is empty, holds a local
    /// right, or grants Remote Write on a region without Local Write, and with
    /// [`Error::OutOfBounds`] when the range does not fit the region. A region of another
    /// protection domain fails the bind with [`Status::LocalProtectionError`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let b = InProcess;
    /// # let listener = b.listen(&b.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let client = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap().0
    /// # });
    /// # let pd = b.alloc_pd().unwrap();
    /// # let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// # let _client = client.join().unwrap();
    /// let reply_buf = pd.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
    /// let window = qp.post_bind_window(1, &reply_buf, 0, 1024, Access::REMOTE_WRITE).unwrap();
    /// assert_eq!(window.addr, reply_buf.addr());
    /// assert_ne!(window.rkey, reply_buf.rkey());
    /// assert_eq!(qp.wait_cq(t).unwrap().opcode, Opcode::BindWindow);
    /// ```
    fn post_bind_window(
        &self,
        wr_id: u64,
        region: &Self::Region,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<RemoteBuf>;

    /// [`post_send`](QueuePair::post_send) with per-work-request `flags`: without
    /// [`SendFlags::SIGNALED`], a Send that succeeds produces no completion, while one that
    /// fails still produces its error completion (see [`SendFlags`] for the verbs rules, and
    /// for how the poster learns that it completed).
    ///
    /// The default implementation ignores `flags` and signals, which the verbs permit (a queue
    /// pair created with `sq_sig_all` = 1 does so): a poster must tolerate a completion for an
    /// unsignaled work request. The crate's backends honour the flag.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let server = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    /// #     let req = listener.get_request(t).unwrap();
    /// #     let qp = req
    /// #         .accept_with(&pd, &[], QpCaps::default(), |qp| {
    /// #             (0..4).try_for_each(|i| qp.post_recv(i, Sge::new(&buf, 16 * i as usize, 16)))
    /// #         })
    /// #         .unwrap();
    /// #     (0..4).for_each(|_| assert!(qp.wait_cq(t).unwrap().is_ok()));
    /// #     qp
    /// # });
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// let msg = pd.register(b"ping".to_vec(), Access::empty()).unwrap();
    /// for id in 1..=3 {
    ///     qp.post_send_with(id, &[Sge::whole(&msg)], None, SendFlags::empty()).unwrap();
    /// }
    /// qp.post_send_with(4, &[Sge::whole(&msg)], None, SendFlags::SIGNALED).unwrap();
    /// // One completion, the signaled Send's: Sends 1 to 3 completed before it.
    /// assert_eq!(qp.wait_cq(t).unwrap().wr_id, 4);
    /// assert_eq!(qp.poll_cq(&mut [Completion::default()]), 0);
    /// # let _server = server.join().unwrap();
    /// ```
    fn post_send_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, Self::Region>],
        invalidate: Option<u32>,
        flags: SendFlags,
    ) -> Result<()> {
        let _ = flags;
        self.post_send(wr_id, sges, invalidate)
    }

    /// [`post_write`](QueuePair::post_write) with per-work-request `flags`, as
    /// [`post_send_with`](QueuePair::post_send_with) (whose example shows the pattern).
    fn post_write_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, Self::Region>],
        remote: RemoteBuf,
        flags: SendFlags,
    ) -> Result<()> {
        let _ = flags;
        self.post_write(wr_id, sges, remote)
    }

    /// [`post_local_invalidate`](QueuePair::post_local_invalidate) with per-work-request
    /// `flags`, as [`post_send_with`](QueuePair::post_send_with). (The rdma-core backend
    /// invalidates a region's rkey, which is no window, at once in software: that completion
    /// does not wait for the work requests before it.)
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let client = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap().0
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// # let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// # let _client = client.join().unwrap();
    /// let buf = pd.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
    /// let unsignaled = SendFlags::empty();
    /// let window = qp.post_bind_window_with(1, &buf, 0, 1024, Access::REMOTE_WRITE, unsignaled).unwrap();
    /// qp.post_local_invalidate_with(2, window.rkey, SendFlags::SIGNALED).unwrap();
    /// let c = qp.wait_cq(t).unwrap(); // the bind completed before it
    /// assert_eq!((c.wr_id, c.opcode), (2, Opcode::LocalInvalidate));
    /// assert_eq!(qp.poll_cq(&mut [Completion::default()]), 0);
    /// ```
    fn post_local_invalidate_with(&self, wr_id: u64, rkey: u32, flags: SendFlags) -> Result<()> {
        let _ = flags;
        self.post_local_invalidate(wr_id, rkey)
    }

    /// [`post_bind_window`](QueuePair::post_bind_window) with per-work-request `flags`, as
    /// [`post_send_with`](QueuePair::post_send_with); see
    /// [`post_local_invalidate_with`](QueuePair::post_local_invalidate_with) for an example.
    fn post_bind_window_with(
        &self,
        wr_id: u64,
        region: &Self::Region,
        offset: usize,
        len: usize,
        access: Access,
        flags: SendFlags,
    ) -> Result<RemoteBuf> {
        let _ = flags;
        self.post_bind_window(wr_id, region, offset, len, access)
    }

    /// Whether the local memory of a Send or RDMA Write is read as it is posted (TCP gathers
    /// it into the frame it writes; the in-process backend copies it at once), so that it is
    /// free for reuse when the post returns, before the work request completes. On a real
    /// device it is read by DMA until the completion, which this answers by default: false.
    ///
    /// A poster that waits for a Send's completion only to reuse its memory need not wait
    /// where this holds (it still learns of a failure from that completion, or from the
    /// queue pair's Error state).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let server = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
    /// # });
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// assert!(qp.memory_read_at_post());
    /// # let _server = server.join().unwrap();
    /// ```
    fn memory_read_at_post(&self) -> bool {
        false
    }

    /// Offers the peer the `len` bytes at `remote`, this side's memory that the peer may RDMA
    /// Read (a region, or a window of this queue pair's, with [`Access::REMOTE_READ`]), ahead
    /// of the Send posted next, which tells the peer to read them: where a Read costs a round
    /// trip of the backend's own, a backend may carry the bytes before that Send, for the peer
    /// to take with [`QueuePair::take_offered`] instead of reading them. True if it did. By
    /// default, as on a real device whose Reads take microseconds, nothing is offered: false.
    ///
    /// The peer takes what the memory held at the offer, so the memory must not change until
    /// the peer has taken it (as an RPC-over-RDMA requester leaves a call's chunks until its
    /// reply, RFC 8166 section 8.1.3), and an offer not taken stands until a newer offer of an
    /// overlapping range under the same key replaces it, the peer invalidates the key, or the
    /// peer's bound on what it holds passes it over: offer a range each time it is to be read.
    /// An RDMA Read is never answered from an offer: it reads the memory as it is, under the
    /// rules as they are. An offer taken is what the memory held when offered, even after this
    /// side closed the key with a Local Invalidate; a requester whose call is abandoned has had
    /// its bytes sent already, as a Read made before the invalidation would have taken them. An offer is a hint: a range not resolvable with Remote Read here, or
    /// too long to offer, is not offered, and the peer reads it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = Tcp.listen(&Tcp.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let server = std::thread::spawn(move || {
    /// #     let pd = Tcp.alloc_pd().unwrap();
    /// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// #     (pd, qp)
    /// # });
    /// let pd = Tcp.alloc_pd().unwrap();
    /// let (client, _) = Tcp.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// let (spd, server) = server.join().unwrap();
    /// let receive = spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    /// server.post_recv(1, Sge::whole(&receive)).unwrap();
    ///
    /// let chunk = pd.register(b"the call's chunk".to_vec(), Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
    /// assert!(client.offer_read(chunk.remote_at(0), 16));
    /// // (A requester must not change it now; here that shows where the bytes come from.)
    /// chunk.with_mut(|b| b.fill(0));
    /// let call = pd.register(b"read my chunk".to_vec(), Access::empty()).unwrap();
    /// client.post_send(2, &[Sge::whole(&call)], None).unwrap();
    ///
    /// assert_eq!(server.wait_cq(t).unwrap().opcode, Opcode::Recv); // the call, after its offer
    /// let into = spd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
    /// assert!(server.take_offered(Sge::whole(&into), chunk.remote_at(0)));
    /// into.with(|b| assert_eq!(b, b"the call's chunk"));
    /// // A Read reads the memory as it is now.
    /// server.post_read(3, &[Sge::whole(&into)], chunk.remote_at(0)).unwrap();
    /// assert!(server.wait_cq(t).unwrap().is_ok());
    /// into.with(|b| assert_eq!(b, &[0; 16]));
    /// ```
    fn offer_read(&self, remote: RemoteBuf, len: u32) -> bool {
        let _ = (remote, len);
        false
    }

    /// Copies into `into` what the peer offered of exactly `into.len` bytes at `remote`
    /// ([`QueuePair::offer_read`]), if that offer is held, and lets the offer go: true if it
    /// did. Not a work request: nothing completes, and nothing waits for the work requests
    /// posted before it, as an RDMA Read's completion would. False by default, and for a range
    /// not offered exactly, whose bytes an RDMA Read then fetches; `into` needs
    /// [`Access::LOCAL_WRITE`] (false without it, the offer left).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = Tcp.listen(&Tcp.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let server = std::thread::spawn(move || {
    /// #     let pd = Tcp.alloc_pd().unwrap();
    /// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// #     (pd, qp)
    /// # });
    /// # let pd = Tcp.alloc_pd().unwrap();
    /// # let (client, _) = Tcp.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// # let (spd, server) = server.join().unwrap();
    /// # let receive = spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    /// # server.post_recv(1, Sge::whole(&receive)).unwrap();
    /// let chunk = pd.register(vec![7; 4096], Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
    /// assert!(client.offer_read(chunk.remote_at(0), 4096));
    /// client.post_send(2, &[], None).unwrap();
    /// assert_eq!(server.wait_cq(t).unwrap().opcode, Opcode::Recv);
    ///
    /// let into = spd.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
    /// assert!(server.take_offered(Sge::whole(&into), chunk.remote_at(0)));
    /// into.with(|b| assert!(b.iter().all(|&x| x == 7)));
    /// assert!(!server.take_offered(Sge::whole(&into), chunk.remote_at(0)), "taken once");
    /// ```
    fn take_offered(&self, into: Sge<'_, Self::Region>, remote: RemoteBuf) -> bool {
        let _ = (into, remote);
        false
    }

    /// Whether the peer's offer of exactly `len` bytes at `remote` ([`QueuePair::offer_read`])
    /// is held here, so that [`QueuePair::take_offered`] would copy it with no RDMA Read (unless
    /// the offer is passed over meanwhile, or the copy's target is unusable): a look that takes
    /// nothing. A server that knows a call's Read chunks are all here need not
    /// step aside for a network round trip while it fetches them. False by default.
    ///
    /// ```
    /// # use rpcrdma_verbs::*;
    /// # let t = std::time::Duration::from_secs(5);
    /// # let listener = Tcp.listen(&Tcp.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let server = std::thread::spawn(move || {
    /// #     let pd = Tcp.alloc_pd().unwrap();
    /// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// #     (pd, qp)
    /// # });
    /// # let pd = Tcp.alloc_pd().unwrap();
    /// # let (client, _) = Tcp.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// # let (spd, server) = server.join().unwrap();
    /// # let receive = spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    /// # server.post_recv(1, Sge::whole(&receive)).unwrap();
    /// let chunk = pd.register(vec![7; 512], Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
    /// assert!(client.offer_read(chunk.remote_at(0), 512));
    /// client.post_send(2, &[], None).unwrap();
    /// assert_eq!(server.wait_cq(t).unwrap().opcode, Opcode::Recv);
    ///
    /// assert!(server.holds_offered(chunk.remote_at(0), 512));
    /// assert!(!server.holds_offered(chunk.remote_at(0), 256), "only the range offered");
    /// let into = spd.register(vec![0; 512], Access::LOCAL_WRITE).unwrap();
    /// assert!(server.take_offered(Sge::whole(&into), chunk.remote_at(0)));
    /// assert!(!server.holds_offered(chunk.remote_at(0), 512), "taken");
    /// ```
    fn holds_offered(&self, remote: RemoteBuf, len: u32) -> bool {
        let _ = (remote, len);
        false
    }

    /// How many bytes of offers ([`QueuePair::offer_read`]) the peer holds at once: a sender
    /// that keeps what it has offered and not yet seen taken well within this has none of
    /// its offers passed over (and so none of its bytes sent twice). 0 by default, where
    /// nothing is offered.
    ///
    /// ```
    /// # use rpcrdma_verbs::*;
    /// # let t = std::time::Duration::from_secs(5);
    /// # let listener = Tcp.listen(&Tcp.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let server = std::thread::spawn(move || {
    /// #     let pd = Tcp.alloc_pd().unwrap();
    /// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
    /// # });
    /// let pd = Tcp.alloc_pd().unwrap();
    /// let (qp, _) = Tcp.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// assert_eq!(qp.offers_held(), 256 << 10);
    /// # let _server = server.join().unwrap();
    /// ```
    fn offers_held(&self) -> usize {
        0
    }

    /// Posts `wrs` in order as one chain: on a real device one `ibv_post_send` of the work
    /// requests linked, one doorbell (on rdma_rxe one system call instead of one each); over
    /// TCP their frames go out in one write where they fit one. Each work request completes
    /// as if posted alone, in the chain's order. A refused one ends the chain: those before it
    /// stay posted, none after it is ([`ChainError::posted`]).
    ///
    /// The default implementation posts them one call at a time ([`post_each`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let server = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    /// #     let exposed = pd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    /// #     let req = listener.get_request(t).unwrap();
    /// #     let at = exposed.remote_at(0);
    /// #     let mut pdata = at.addr.to_be_bytes().to_vec();
    /// #     pdata.extend(at.rkey.to_be_bytes());
    /// #     let qp = req.accept_with(&pd, &pdata, QpCaps::default(), |qp| {
    /// #         qp.post_recv(1, Sge::whole(&buf))
    /// #     }).unwrap();
    /// #     let c = qp.wait_cq(t).unwrap();
    /// #     assert_eq!(c.byte_len, 4);
    /// #     exposed.with(|b| assert_eq!(&b[..6], b"result"));
    /// # });
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let (qp, accepted) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// # let addr = u64::from_be_bytes(accepted[..8].try_into().unwrap());
    /// # let rkey = u32::from_be_bytes(accepted[8..12].try_into().unwrap());
    /// # let remote = RemoteBuf { addr, rkey };
    /// let result = pd.register(b"result".to_vec(), Access::empty()).unwrap();
    /// let reply = pd.register(b"done".to_vec(), Access::empty()).unwrap();
    /// let (writes, sends) = ([Sge::whole(&result)], [Sge::whole(&reply)]);
    /// let unsignaled = SendFlags::empty();
    /// qp.post_chain(&[
    ///     WorkRequest::Write { wr_id: 1, sges: &writes, remote, flags: unsignaled },
    ///     WorkRequest::Send { wr_id: 2, sges: &sends, invalidate: None, flags: SendFlags::SIGNALED },
    /// ])
    /// .unwrap();
    /// assert_eq!(qp.wait_cq(t).unwrap().wr_id, 2); // the Write completed before it
    /// # server.join().unwrap();
    /// ```
    fn post_chain(&self, wrs: &[WorkRequest<'_, Self::Region>]) -> Result<(), ChainError> {
        post_each(self, wrs)
    }

    /// The capacities the queue pair was created with.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let client = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap().0
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// let caps = QpCaps::default().max_send_wr(32);
    /// let qp = listener.get_request(t).unwrap().accept(&pd, &[], caps).unwrap();
    /// assert_eq!(qp.caps().max_send_wr, 32);
    /// # let _client = client.join().unwrap();
    /// ```
    fn caps(&self) -> QpCaps;

    /// Moves up to `out.len()` completions into `out`, oldest first, without blocking, and
    /// returns how many (`ibv_poll_cq`).
    fn poll_cq(&self, out: &mut [Completion]) -> usize;

    /// Waits up to `timeout` for one completion (`ibv_req_notify_cq` + `ibv_get_cq_event`
    /// + `ibv_poll_cq`).
    fn wait_cq(&self, timeout: Duration) -> Option<Completion>;

    /// A file descriptor that an event loop (epoll, tokio's `AsyncFd`, ...) can watch instead
    /// of blocking a thread in [`wait_cq`](QueuePair::wait_cq): once
    /// [`req_notify_cq`](QueuePair::req_notify_cq) has armed it, it becomes readable when a
    /// completion arrives. The loop, for any number of queue pairs on one thread:
    ///
    /// 1. [`poll_cq`](QueuePair::poll_cq) until it returns 0;
    /// 2. call [`req_notify_cq`](QueuePair::req_notify_cq): if it returns true, completions
    ///    arrived meanwhile, so go back to 1;
    /// 3. wait until the fd is readable (it may be readable with nothing to poll: a waiter
    ///    elsewhere took the completion), then go back to 1.
    ///
    /// The rdma-core backend returns an epoll fd over its completion channel; it stays valid
    /// while the queue pair lives. The in-process and TCP backends return `None`: their
    /// completions are produced by threads of this process, and waiting is
    /// [`wait_cq`](QueuePair::wait_cq)'s (on a thread of the caller's, or the runtime's
    /// blocking pool).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let client = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap().0
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// # let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// # let _client = client.join().unwrap();
    /// // Which way a generic event loop waits on `qp`:
    /// let mut c = [Completion::default()];
    /// match qp.completion_fd() {
    ///     Some(_fd) => { /* register it with the event loop; steps 1 to 3 above */ }
    ///     None => assert_eq!(qp.wait_cq(Duration::ZERO), None), // a blocking thread waits
    /// }
    /// assert_eq!(qp.poll_cq(&mut c), 0);
    /// ```
    #[cfg(unix)]
    fn completion_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    /// Arms [`completion_fd`](QueuePair::completion_fd) before a wait on it
    /// (`ibv_req_notify_cq`, after reading and acknowledging the event that made it readable)
    /// and returns whether completions are waiting already, which [`poll_cq`](QueuePair::poll_cq)
    /// then returns: a completion that arrived before the arm raises no notification, so the
    /// caller must not wait on the fd when this returns true. Backends without a
    /// `completion_fd` have nothing to arm and return true.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let client = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap().0
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// # let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// # let _client = client.join().unwrap();
    /// // The in-process backend has no fd: never wait on one after this.
    /// assert!(qp.req_notify_cq());
    /// ```
    fn req_notify_cq(&self) -> bool {
        true
    }

    /// Registers `waker` to be woken once, when the next completion is queued on this queue
    /// pair (a failure's and a flush's included), so that an async executor can wait for
    /// completions with no thread of its own blocked in [`wait_cq`](QueuePair::wait_cq):
    /// poll with [`poll_cq`](QueuePair::poll_cq) until it returns 0, then arm, and sleep only
    /// on [`Arm::Armed`]. [`Arm::Waiting`]: completions were queued meanwhile (poll again;
    /// nothing was armed, and a waker armed before stays armed). One waker per queue pair:
    /// an arm that answers [`Arm::Armed`] replaces the one before. The software backends wake
    /// the waker on the thread that queued the completion, after it released the queue pair's
    /// locks; rdma-core's, on the process's readiness loop that watches the completion
    /// channel.
    ///
    /// The in-process, TCP and rdma-core backends support it; the default answers
    /// [`Arm::Unsupported`] (a backend's [`completion_fd`](QueuePair::completion_fd) can serve
    /// an event loop instead).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let client = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     (InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap().0, pd)
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// # let server = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    /// # let (client, cpd) = client.join().unwrap();
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::task::{Wake, Waker};
    /// struct Count(AtomicUsize);
    /// impl Wake for Count {
    ///     fn wake(self: Arc<Self>) { self.0.fetch_add(1, Ordering::SeqCst); }
    /// }
    /// let count = Arc::new(Count(AtomicUsize::new(0)));
    /// let waker = Waker::from(count.clone());
    /// assert_eq!(server.arm_waker(&waker), Arm::Armed);
    /// // A Receive posted and a Send into it: the server's Receive completes and wakes it.
    /// let buf = pd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
    /// server.post_recv(1, Sge::whole(&buf)).unwrap();
    /// # let msg = cpd.register(b"ping".to_vec(), Access::empty()).unwrap();
    /// client.post_send(2, &[Sge::whole(&msg)], None).unwrap();
    /// assert_eq!(count.0.load(Ordering::SeqCst), 1);
    /// // Not reaped yet: arming says so, and arms nothing.
    /// assert_eq!(server.arm_waker(&waker), Arm::Waiting);
    /// let mut c = [Completion::default()];
    /// assert_eq!((server.poll_cq(&mut c), c[0].status, c[0].byte_len), (1, Status::Success, 4));
    /// assert_eq!(server.arm_waker(&waker), Arm::Armed);
    /// ```
    fn arm_waker(&self, waker: &std::task::Waker) -> Arm {
        let _ = waker;
        Arm::Unsupported
    }

    /// Waits up to `timeout` (zero: just polls) for a connection-manager event on this
    /// connection (`rdma_get_cm_event`).
    fn cm_event(&self, timeout: Duration) -> Option<CmEvent>;

    /// The queue pair's state.
    fn state(&self) -> QpState;

    /// Hands the Sends and Writes held on this queue pair by an open [`PostBatch`] (of any
    /// thread) to the device now: a thread that sees their holder busy longer than it should
    /// be does not leave them waiting for it. Where nothing is held (every backend but TCP),
    /// nothing to do.
    ///
    /// ```
    /// # use rpcrdma_verbs::*;
    /// # let t = std::time::Duration::from_secs(5);
    /// # let listener = Tcp.listen(&Tcp.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let server = std::thread::spawn(move || {
    /// #     let pd = Tcp.alloc_pd().unwrap();
    /// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
    /// # });
    /// # let pd = Tcp.alloc_pd().unwrap();
    /// let (qp, _) = Tcp.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// let batch = PostBatch::open();
    /// // ... Sends posted here are held ...
    /// qp.flush_posts(); // ... and go now, the batch still open
    /// drop(batch);
    /// # let _server = server.join().unwrap();
    /// ```
    fn flush_posts(&self) {}

    /// Disconnects (`rdma_disconnect`): both sides go to [`QpState::Error`], their posted
    /// Receives are flushed, and each gets [`CmEvent::Disconnected`]. Dropping the queue pair
    /// does the same. Idempotent.
    fn disconnect(&self);
}

/// What [`QueuePair::arm_waker`] did.
///
/// ```
/// use rpcrdma_verbs::Arm;
/// assert_ne!(Arm::Armed, Arm::Waiting);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// The waker is woken when the next completion is queued.
    Armed,
    /// Completions are queued already: poll them; nothing was armed.
    Waiting,
    /// This backend cannot wake a waker; wait with [`QueuePair::wait_cq`] or
    /// [`QueuePair::completion_fd`].
    Unsupported,
}

/// Locks a mutex, ignoring poisoning: every critical section of the backends leaves its data
/// consistent before anything that can panic, so a panic elsewhere (a failed test assertion
/// inside `with_mut`, say) must not turn every later call, destructors included, into a panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The checks every backend makes before binding a memory window (see
/// [`QueuePair::post_bind_window`]).
pub(crate) fn check_window<R: MemoryRegion>(region: &R, offset: usize, len: usize, access: Access) -> Result<()> {
    let remote = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let write_without_local = access.contains(Access::REMOTE_WRITE) && !region.access().contains(Access::LOCAL_WRITE);
    if access.is_empty() || !remote.contains(access) || write_without_local {
        return Err(Error::InvalidAccess(access));
    }
    if !matches!(offset.checked_add(len), Some(end) if end <= region.len()) {
        return Err(Error::OutOfBounds { offset, len, region_len: region.len() });
    }
    Ok(())
}

/// A listening CM endpoint (`rdma_cm_id` after `rdma_listen`). Dropping it stops listening
/// and rejects requests not yet taken.
///
/// ```
/// use std::time::Duration;
/// use rpcrdma_verbs::*;
/// let t = Duration::from_secs(5);
/// let listener = InProcess.listen(&InProcess.any_address()).unwrap();
/// let addr = listener.local_addr(); // the wildcard resolved: what peers connect to
/// assert!(addr.starts_with("inproc:"));
/// assert_eq!(listener.get_request(Duration::from_millis(10)).map(|_| ()), Err(Error::Timeout));
///
/// let client = std::thread::spawn(move || {
///     let pd = InProcess.alloc_pd().unwrap();
///     InProcess.connect(&pd, &addr, b"hi", QpCaps::default(), t).map(|(_qp, data)| data)
/// });
/// let request = listener.get_request(t).unwrap();
/// assert_eq!(&request.private_data()[..2], b"hi");
/// drop(request); // rejects it
/// assert_eq!(client.join().unwrap(), Err(Error::Rejected));
/// assert_eq!(listener.turned_away(), 0);
/// ```
pub trait Listener: Send + Sync {
    /// The request type it hands out.
    type Request: ConnectRequest;

    /// The address peers connect to (resolves a wildcard bind).
    fn local_addr(&self) -> String;

    /// Waits up to `timeout` for a connect request (`rdma_get_request`).
    fn get_request(&self, timeout: Duration) -> Result<Self::Request>;

    /// Connections turned away so far before they became requests: over
    /// [`ListenOptions::max_pending`], past [`ListenOptions::handshake_timeout`], or not
    /// speaking this backend's handshake.
    fn turned_away(&self) -> u64;

    /// Stops taking requests, so that a server stopping never waits on a peer or a tick: a
    /// [`get_request`](Self::get_request) waiting returns [`Error::ConnectionAborted`] at once,
    /// as does every later one; and an accept of one of its requests that waits on the peer
    /// (TCP's wait for the connector's confirmation, up to
    /// [`ListenOptions::handshake_timeout`]) fails at once with the same error (rdma-core's
    /// accept waits for its CM's answer, which the kernel bounds itself). Connections already
    /// accepted are not touched. Idempotent.
    fn close(&self);
}

/// An incoming connect request (`RDMA_CM_EVENT_CONNECT_REQUEST`). Dropping it rejects it.
pub trait ConnectRequest: Send {
    /// The protection domain type.
    type Pd: ProtectionDomain;
    /// The queue pair type accepting creates.
    type Qp: QueuePair;

    /// The active side's private data, zero-padded to [`CONNECT_PRIVATE_DATA_MAX`] bytes as
    /// rdma_cm delivers it (`event->param.conn.private_data`).
    fn private_data(&self) -> &[u8];

    /// Who asks to connect, when the connection manager says: the TCP socket's peer,
    /// rdma_cm's destination address, an in-process connector's protection domain.
    fn peer(&self) -> Option<PeerAddress>;

    /// Creates the queue pair in `pd` and accepts, sending `private_data` (at most
    /// [`ACCEPT_PRIVATE_DATA_MAX`] bytes) back (`rdma_create_qp` + `rdma_accept`). On error
    /// the request is rejected.
    ///
    /// The peer may Send as soon as the connection is established, and a Send that finds no
    /// Receive is fatal: a side that expects to be sent to first posts its Receives with
    /// [`accept_with`](ConnectRequest::accept_with) instead.
    fn accept(self, pd: &Self::Pd, private_data: &[u8], caps: QpCaps) -> Result<Self::Qp>
    where
        Self: Sized,
    {
        self.accept_with(pd, private_data, caps, |_| Ok(()))
    }

    /// [`accept`](ConnectRequest::accept), calling `before` on the new queue pair before the
    /// connection is established (between `rdma_create_qp` and `rdma_accept`), so the Receives
    /// it posts are in place for the peer's first Send, as an RPC-over-RDMA responder needs
    /// (RFC 8166 section 3.3.1: a Receive for every credit). Post Receives (or bind windows)
    /// there; Sends wait until this returns. An error from `before` is returned and the peer
    /// is turned away: rejected (in-process, rdma-core), or on TCP, whose handshake is done by
    /// then, disconnected at once.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// let client = std::thread::spawn(move || {
    ///     let pd = InProcess.alloc_pd().unwrap();
    ///     let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    ///     let msg = pd.register(b"first".to_vec(), Access::empty()).unwrap();
    ///     qp.post_send(1, &[Sge::whole(&msg)], None).unwrap(); // at once: no RNR
    ///     assert!(qp.wait_cq(t).unwrap().is_ok());
    ///     qp
    /// });
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    /// let req = listener.get_request(t).unwrap();
    /// let qp = req.accept_with(&pd, &[], QpCaps::default(), |qp| qp.post_recv(7, Sge::whole(&buf))).unwrap();
    /// assert_eq!(qp.wait_cq(t).unwrap().byte_len, 5);
    /// # let _client = client.join().unwrap();
    /// ```
    fn accept_with(
        self,
        pd: &Self::Pd,
        private_data: &[u8],
        caps: QpCaps,
        before: impl FnOnce(&Self::Qp) -> Result<()>,
    ) -> Result<Self::Qp>
    where
        Self: Sized,
    {
        self.accept_owning(pd, private_data, caps, |qp| {
            let r = before(&qp);
            (qp, r)
        })
    }

    /// What backends implement under [`accept_with`](ConnectRequest::accept_with): `before`
    /// takes the new queue pair by value and hands it back with its result, so that a
    /// decorator ([`capture::Captured`]) can run its caller's hook on a wrapper of the queue
    /// pair, which it could not build from a reference. The rules are `accept_with`'s.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let client = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap().0
    /// # });
    /// let pd = InProcess.alloc_pd().unwrap();
    /// let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    /// let req = listener.get_request(t).unwrap();
    /// let qp = req
    ///     .accept_owning(&pd, &[], QpCaps::default(), |qp| {
    ///         let posted = qp.post_recv(7, Sge::whole(&buf));
    ///         (qp, posted)
    ///     })
    ///     .unwrap();
    /// assert_eq!(qp.state(), QpState::Ready);
    /// # let _client = client.join().unwrap();
    /// ```
    fn accept_owning(
        self,
        pd: &Self::Pd,
        private_data: &[u8],
        caps: QpCaps,
        before: impl FnOnce(Self::Qp) -> (Self::Qp, Result<()>),
    ) -> Result<Self::Qp>;

    /// Rejects the request (`rdma_reject`); the active side's connect fails with
    /// [`Error::Rejected`].
    fn reject(self);
}
