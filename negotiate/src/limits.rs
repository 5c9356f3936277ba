//! Every resource bound a [`Server`](crate::server::Server) keeps against its peers, in one
//! place: what a peer alone can make this side hold (connections, threads, sockets, memory,
//! time) has a configured limit with a safe default, and each refusal is counted in
//! [`ServerStats::refused`](crate::server::ServerStats::refused).
//!
//! | bound | where | default | what a peer meets at the bound |
//! |---|---|---|---|
//! | connections served at once | [`ServerLimits::max_connections`] | 256 | its connect is rejected (the CM's reject) |
//! | connections served at once for one host (an IPv4 address, an IPv6 address or prefix: [`ServerLimits::ipv6_prefix_per_host`], an in-process protection domain) | [`ServerLimits::max_connections_per_host`] | 64 | its connect is rejected; other hosts keep being served |
//! | calls served at once on one connection (each a thread) | [`ServerLimits::calls_in_progress_per_connection`], and never more than `responder.credits` | 8 | its further calls wait in their Receives until one is answered |
//! | -07 calls whose reply waits for the requester's credit, counted out of those | twice `responder.credits` | 64 | beyond them, they count against the calls served at once, and nothing more is read from the connection until a reply goes (a requester that keeps the server's window shut holds at most 64 + 8 threads; one whose message opening the window is behind those not read waits for `ServerConfig::timeout`, and the connection closes) |
//! | connections in handshake | [`ServerLimits::max_handshakes`] | 64 | turned away at once ([`rpcrdma_verbs::ListenOptions::max_pending`]) |
//! | connections in handshake for one host (TCP) | [`ServerLimits::max_handshakes_per_host`] | 16 | turned away at once ([`rpcrdma_verbs::ListenOptions::max_pending_per_host`]); other hosts' handshakes are heard |
//! | handshake time | [`ServerLimits::handshake_timeout`] | 5 s | its socket is dropped; other handshakes never wait on it |
//! | idle time | [`ServerLimits::idle_timeout`] | 360 s | the connection is closed (as Linux's nfsd ages idle transports) |
//! | a peer that stops reading | [`rpcrdma_verbs::QpCaps::retry_timeout`] (`ServerConfig::caps`) | 10 s | the work request fails with `RetryExceeded`, the connection closes |
//! | one work request's completion | `ServerConfig::timeout` | 5 s | the connection closes |
//! | segments in one header | [`HeaderLimits::max_segments`] (`responder.limits`) | 16 | RDMA_ERROR ERR_CHUNK (RFC 8166 section 4.5.2) |
//! | Read chunks, Write chunks in one header | [`HeaderLimits::max_read_chunks`], [`HeaderLimits::max_write_chunks`] | no limit beyond the segments' | ERR_CHUNK; on -07 RDMA2_ERR_READ_CHUNKS or RDMA2_ERR_WRITE_CHUNKS with the limit (draft-ietf-nfsv4-rpcrdma-version-two-07 sections 7.3.1, 7.3.2), or RDMA2_ERR_REPLY_RESOURCE when no Write chunk is taken and `responder.max_reply_parts` is 1 (7.3.2) |
//! | one chunk | [`HeaderLimits::max_chunk_len`] | 2 MiB | ERR_CHUNK (RFC 8166 section 3.4.4: "sanity check chunk sizes") |
//! | all chunks of one message | [`HeaderLimits::max_message_len`] | 4 MiB | ERR_CHUNK, before anything is fetched or allocated |
//! | Receives per connection | `responder.credits` | 32 (+ backward slots) | a Send beyond them is a credit overrun, counted |
//! | CPU spent looking at an empty completion queue | [`ServerLimits::poll_before_wait`] | 30 us each time a connection's queue runs dry | the thread sleeps until the next message |
//! | memory all peers make the server hold | [`ServerLimits::memory_budget`] ([`crate::budget`]) | 64 MiB | ERR_CHUNK for a call whose chunks do not fit (on -07 also a reassembled continued call: RDMA2_ERR_SYSTEM), counted; memory kept for reuse given back while the budget is over half used |
//! | call memory one host's calls in progress hold (their Read chunks' landing, as the budget counts it, and -07 calls reassembled) once calls are short of memory | [`ServerLimits::memory_per_host`] | 16 MiB, enforced once calls hold half what the Receives leave them | ERR_CHUNK (-07 reassembled: RDMA2_ERR_SYSTEM), counted in [`Refusals::memory`]: one host's calls cannot take more than half the call memory and shut other hosts' chunked calls out |
//! | closed connections remembered | [`ServerLimits::closed_peers_kept`] | 64 | the oldest record is forgotten |
//! | -07 transactions whose reply an RDMA operational error lost, remembered for the requester's next connection (draft-ietf-nfsv4-rpcrdma-version-two-07 section 7.3) | [`LOST_REPLIES_KEPT`](crate::server::LOST_REPLIES_KEPT) | 64, all requesters together, 16 for one host ([`LOST_REPLIES_PER_HOST`](crate::server::LOST_REPLIES_PER_HOST)) | the oldest is forgotten (the host's own oldest where it holds 16): its retransmission is served again |
//! | TCP answers queued for a peer that never reads | the TCP backend | 4096 answers, 64 MiB | NAK, the connection closes |
//!
//! [`HeaderLimits::max_segments`]: rpcrdma_v1::header::HeaderLimits::max_segments
//! [`HeaderLimits::max_chunk_len`]: rpcrdma_v1::header::HeaderLimits::max_chunk_len
//! [`HeaderLimits::max_read_chunks`]: rpcrdma_v1::header::HeaderLimits::max_read_chunks
//! [`HeaderLimits::max_write_chunks`]: rpcrdma_v1::header::HeaderLimits::max_write_chunks
//! [`HeaderLimits::max_message_len`]: rpcrdma_v1::header::HeaderLimits::max_message_len
//!
//! docs/hostile.md lists the attacks tried against these bounds and what each costs at its
//! bound.

use std::time::{Duration, Instant};

/// The instant `after` past `from`; for a configured time too long to add (`Duration::MAX`:
/// never), a century on, which is as good as never for any deadline here. The one place a
/// configured duration becomes a deadline without panicking on the addition.
pub(crate) fn deadline(from: Instant, after: Duration) -> Instant {
    from.checked_add(after).unwrap_or(from + Duration::from_secs(100 * 365 * 86_400))
}

/// The connection-level bounds of a [`Server`](crate::server::Server) (see the [module
/// documentation](self) for all of them, message limits included).
///
/// ```
/// use std::time::Duration;
/// use negotiate::limits::ServerLimits;
/// let strict = ServerLimits::default().max_connections(16).idle_timeout(Duration::from_secs(30));
/// assert_eq!(strict.max_handshakes, 64);
/// // A server whose connections each serve one call at a time.
/// let serial = ServerLimits::default().calls_in_progress_per_connection(1);
/// assert_eq!(serial.calls_in_progress(32), 1);
/// assert_eq!(ServerLimits::default().calls_in_progress(4), 4); // never beyond the credits
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ServerLimits {
    /// Connections served at once; a connect beyond them is rejected and counted. Each costs
    /// the threads its calls in progress hold in the server's event loop (up to
    /// [`ServerLimits::calls_in_progress_per_connection`]; on TCP a socket, on rdma-core a
    /// thread reading its CM events), its Receives and its chunk memory.
    pub max_connections: usize,
    /// Connections served at once, or being accepted, for one host: an IPv4 address, an IPv6
    /// address (or prefix, [`ServerLimits::ipv6_prefix_per_host`]), an in-process protection
    /// domain. A connection's place is given back when its state is: once it has ended and
    /// its last call in progress is answered (a handler that never returns keeps it). A connect beyond them is rejected and counted in
    /// [`Refusals::per_host`], so that one peer connecting again and again cannot take every
    /// one of [`ServerLimits::max_connections`] and shut other hosts out. Raise it where many
    /// clients share one address (behind NAT); a peer the backend does not name is bounded
    /// by `max_connections` only.
    pub max_connections_per_host: usize,
    /// How every bound per host here counts IPv6 hosts: by this many leading bits of their
    /// addresses ([`rpcrdma_verbs::PeerHost::for_limits`]). 128, the default, counts each
    /// address as a host: a host that takes many addresses of its link's prefix (RFC 8981)
    /// counts as many. 64 counts a whole /64 as one, which stops that and also puts every
    /// host on one link together: right for a server whose clients each have a /64 of their
    /// own, wrong for clients that share a link. IPv4 carried in IPv6 (mapped, 6to4,
    /// `64:ff9b::/96`) counts as its IPv4 host either way.
    pub ipv6_prefix_per_host: u8,
    /// Calls one connection has served at once: fetched, in the handler, or being answered.
    /// The server serves up to this many, and never more than the credits it grants
    /// (`responder.credits`: a requester never has more in flight, RFC 8166 section 3.3.1),
    /// each on a thread of the server's event loop, spawned when a call arrives while all of
    /// them are busy (one the loop no longer needs leaves after a while). A requester that
    /// sends more than this waits: its further calls stay in their Receives until a thread is
    /// free. So the threads
    /// and the memory a connection holds for its calls (each call's Read chunks, up to
    /// [`HeaderLimits::max_message_len`]) are sized by this server's configuration, never by
    /// what a peer sends. 0 counts as 1.
    ///
    /// [`HeaderLimits::max_message_len`]: rpcrdma_v1::header::HeaderLimits::max_message_len
    pub calls_in_progress_per_connection: usize,
    /// Connect requests whose handshake is in progress or not yet taken
    /// ([`rpcrdma_verbs::ListenOptions::max_pending`]).
    pub max_handshakes: usize,
    /// Of those under way, the most one host holds (as `max_connections_per_host` counts hosts;
    /// [`rpcrdma_verbs::ListenOptions::max_pending_per_host`], TCP only: rdma_cm's handshakes
    /// are the kernel's). Beyond them its next one is turned away, counted in
    /// [`Refusals::handshakes`], so that one host dripping its requests cannot take every place.
    pub max_handshakes_per_host: usize,
    /// How long a connection may take to send its whole connect request and confirm the
    /// accept ([`rpcrdma_verbs::ListenOptions::handshake_timeout`]).
    pub handshake_timeout: Duration,
    /// A connection that sends nothing for this long, with no call in progress, is closed.
    pub idle_timeout: Duration,
    /// Closed connections [`Server::peers`](crate::server::Server::peers) still reports, most
    /// recent first kept; open ones are always reported.
    pub closed_peers_kept: usize,
    /// How long the thread that received a call runs it before another of the event loop's
    /// threads takes over receiving: a call served within this (a short handler) runs to
    /// completion on the thread that received it, with no hand-off between threads, and the
    /// calls queued behind it follow on the same thread; a longer one no longer holds them up
    /// (they are received and served beside it, up to
    /// [`ServerLimits::calls_in_progress_per_connection`]).
    pub run_inline_for: Duration,
    /// How long the receiving thread keeps looking for a message (the event loop's ready
    /// queue; a loop of one connection, its completion queue) before it sleeps until one
    /// arrives, as `ib_send_lat` polls: a call that arrives within it costs no wake-up of a
    /// sleeping thread. It spends that much CPU each time the queue
    /// runs dry, and costs nothing while calls keep coming. Zero: sleep at once.
    ///
    /// Measured (docs/benchmarks.md, "Issue 25, second session"): 64 async tasks on one
    /// executor thread, in-process, 0.24-0.44 thread switches per call without it and
    /// 0.035-0.08 with 30 us, where the server's thread slept and was woken for almost every
    /// call; the 64-thread blocking load unchanged. Not used where the backend lends its
    /// readiness loop (`Backend::readiness`: TCP): the thread waits by driving it instead.
    pub poll_before_wait: Duration,
    /// The memory all peers together can make the server hold at once, in bytes
    /// ([`crate::budget`]): every connection's Receives, and every call's chunk memory from
    /// its fetch until its serving thread gives it up, and a -07 continued call's reassembled
    /// message while it is served. A call whose chunks do not fit is answered with RDMA_ERROR
    /// ERR_CHUNK (RFC 8166 section 4.5.2; on -07 a continued call that does not fit,
    /// RDMA2_ERR_SYSTEM, section 7.4.1) and counted in [`Refusals::memory`]; the Receives of a new connection are counted whatever the budget
    /// holds (they are sized by `max_connections` and the credits, not by a peer). Memory
    /// kept between calls for reuse is given back while more than half the budget is used.
    pub memory_budget: usize,
    /// Of the call memory the budget counts ([`ServerLimits::memory_budget`]: a call's Read
    /// chunks' landing from its fetch until it is answered, an RDMA_NOMSG call's twice, as
    /// its landing buffer and its message; a -07 call reassembled), one host's share (a host
    /// as [`ServerLimits::max_connections_per_host`] counts it). A host's calls may go beyond
    /// their share while calls hold less than half of what the Receives leave of the budget
    /// ([`MemoryBudget::is_short_with`](crate::budget::MemoryBudget::is_short_with)); past
    /// that, a call beyond its host's share is answered as one beyond the budget (ERR_CHUNK;
    /// a -07 reassembled call RDMA2_ERR_SYSTEM) and counted in [`Refusals::memory`]. So a
    /// host alone may use what nobody else needs, and one whose calls' RDMA Reads are never
    /// answered holds at most half the call memory or its share: every other host's chunked
    /// calls keep the rest. (What a serving thread keeps between calls for reuse is counted
    /// against the budget only.) The cost, under contention only: a client whose calls in
    /// progress carry more than its share on all its connections together (at the defaults
    /// 8 calls a connection; an NFS client with 1 MiB writes holds some 8 MiB a connection,
    /// and Linux's fails a WRITE answered ERR_CHUNK with EIO) has the calls beyond it
    /// refused; raise it for such clients, and with the budget.
    pub memory_per_host: usize,
}

rpcrdma_verbs::setters!(ServerLimits {
    max_connections: usize,
    max_connections_per_host: usize,
    ipv6_prefix_per_host: u8,
    calls_in_progress_per_connection: usize,
    max_handshakes: usize,
    max_handshakes_per_host: usize,
    handshake_timeout: Duration,
    idle_timeout: Duration,
    closed_peers_kept: usize,
    run_inline_for: Duration,
    poll_before_wait: Duration,
    memory_budget: usize,
    memory_per_host: usize,
});

impl Default for ServerLimits {
    /// 256 connections, 64 of them for one host, 8 calls served at once on each, 64 handshakes
    /// (16 for one host) of at most 5 s, 360 s
    /// idle (Linux's nfsd closes idle transports after 6 minutes), 64 closed connections
    /// remembered, calls run inline for up to 1 ms, an empty completion queue polled for
    /// 30 us before the receiving thread sleeps, a memory budget of 64 MiB of which one
    /// host's calls hold at most 16 MiB.
    fn default() -> Self {
        ServerLimits {
            max_connections: 256,
            max_connections_per_host: 64,
            ipv6_prefix_per_host: 128,
            calls_in_progress_per_connection: 8,
            max_handshakes: 64,
            max_handshakes_per_host: 16,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(360),
            closed_peers_kept: 64,
            run_inline_for: Duration::from_millis(1),
            poll_before_wait: Duration::from_micros(30),
            memory_budget: 64 << 20,
            memory_per_host: 16 << 20,
        }
    }
}

impl ServerLimits {
    /// How many calls one connection serves at once when the server grants `credits`:
    /// [`ServerLimits::calls_in_progress_per_connection`], no more than `credits`, at least 1.
    pub fn calls_in_progress(&self, credits: u32) -> usize {
        let credits = usize::try_from(credits).unwrap_or(usize::MAX);
        self.calls_in_progress_per_connection.min(credits).max(1)
    }

    /// The listener's share of these bounds.
    pub fn listen_options(&self) -> rpcrdma_verbs::ListenOptions {
        rpcrdma_verbs::ListenOptions::default()
            .max_pending(self.max_handshakes)
            .max_pending_per_host(self.max_handshakes_per_host)
            .ipv6_prefix_per_host(self.ipv6_prefix_per_host)
            .handshake_timeout(self.handshake_timeout)
    }
}

/// What a [`Server`](crate::server::Server) refused, by bound (see [`ServerLimits`]).
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
/// # use std::time::{Duration, Instant};
/// use negotiate::limits::{Refusals, ServerLimits};
/// // A server that closes a connection silent for 50 ms.
/// let cfg = ServerConfig::default().limits(ServerLimits::default().idle_timeout(Duration::from_millis(50)));
/// let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ulb), null).unwrap();
/// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// client.call(&CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap();
/// let deadline = Instant::now() + Duration::from_secs(10);
/// while server.stats().refused.idle == 0 && Instant::now() < deadline {
///     std::thread::sleep(Duration::from_millis(10));
/// }
/// assert_eq!(server.stats().refused, Refusals { idle: 1, ..Refusals::default() });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Refusals {
    /// Connects rejected because [`ServerLimits::max_connections`] were being served.
    pub connections: u64,
    /// Connects rejected because their host held
    /// [`ServerLimits::max_connections_per_host`] connections.
    pub per_host: u64,
    /// Connections the listener turned away before they became requests: over
    /// [`ServerLimits::max_handshakes`], past the handshake timeout, or not speaking the
    /// backend's handshake.
    pub handshakes: u64,
    /// Connections closed after [`ServerLimits::idle_timeout`] without a message.
    pub idle: u64,
    /// Calls refused with ERR_CHUNK for breaking a header limit: too many segments, a chunk or
    /// a whole message too long.
    pub over_limits: u64,
    /// Calls refused with ERR_CHUNK because their chunk memory did not fit
    /// [`ServerLimits::memory_budget`] with everything else the server held, or their host's
    /// share of it ([`ServerLimits::memory_per_host`]).
    pub memory: u64,
}
