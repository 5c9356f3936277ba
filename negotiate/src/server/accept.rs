//! Accepting one connection of a [`Server`](super::Server): its core, its Receives posted
//! before the accept, its record and its backchannel; an event loop serves it from then on
//! ([`super::event_loop`]).

use std::sync::{Condvar, OnceLock, PoisonError};

use super::per_host::HostSlot;
use super::*;
use rpcrdma_v2::draft07::properties::Properties;
use rpcrdma_verbs::PeerHost;

/// The decisions of one connection (the sans-I/O core), for a server: no transport handle.
pub(super) type Core = crate::connection::Connection<()>;

/// One accepted connection, as its event loop serves it.
pub(super) struct LoopConnection<B: Backend> {
    pub(super) conn: Arc<Transport<B>>,
    pub(super) pool: ReceivePool<B>,
    /// Its decisions; locked by the thread judging a message (one at a time: the loop's role)
    /// and by those reading what it settled.
    pub(super) core: Mutex<Core>,
    /// When the core says it turns idle if nothing arrives, as of the latest message judged:
    /// for the loop's timers, read without locking the core.
    idle_at: Mutex<Option<Instant>>,
    pub(super) peer: Arc<Mutex<Peer>>,
    /// The requester's host, the same on its next connection: what [`LostReplies`] knows it
    /// by (`None` where the backend names no peer).
    ///
    /// [`LostReplies`]: super::lost_replies::LostReplies
    pub(super) host: Option<PeerHost>,
    pub(super) back: Arc<ServerSide<B>>,
    /// The most calls served at once ([`ServerLimits::calls_in_progress`]).
    pub(super) most: usize,
    /// The most calls blocked on the requester counted out of `most` ([`LoopConnection::blocked`]):
    /// twice the credits the server grants.
    blocked_most: usize,
    /// Calls taken whose answer has not been posted yet: each is still in flight for the
    /// requester, so it counts against the credits of the next call judged (RFC 8166 section
    /// 3.3.1). A call stops counting just before its answer is posted, so a requester that
    /// sends its next call once it has that answer is never taken for one beyond its credits.
    pub(super) unanswered: AtomicUsize,
    /// What wakes its event loop for it: made once, when the loop takes it (arming the queue
    /// pair with it then allocates nothing).
    pub(super) waker: OnceLock<std::task::Waker>,
    /// Signaled when a message was judged while a -07 reply waits for credit
    /// ([`LoopConnection::part_credit`]) and when the connection ends.
    granted: Condvar,
    /// The replies waiting on `granted`: the judging thread signals only when there are some.
    part_waiters: AtomicUsize,
    /// Set when the loop ends the connection: a reply waiting for credit gives up then.
    ending: AtomicBool,
    /// Its Receives (and on a -07 connection what it may hold of a continued call), counted
    /// against the server's memory budget while it lives.
    _receives: Charge,
    /// Its place in its host's count ([`ServerLimits::max_connections_per_host`]), given back
    /// with the connection's state.
    _host_slot: Option<HostSlot>,
}

impl<B: Backend> LoopConnection<B> {
    pub(super) fn idle_at(&self) -> Option<Instant> {
        *lock(&self.idle_at)
    }

    pub(super) fn set_idle_at(&self, at: Option<Instant>) {
        *lock(&self.idle_at) = at;
    }

    /// The running total for one more -07 Send of a reply (its part after the first, or a
    /// reply held for credit): taken from the core at once if the requester's window has
    /// room, or once a message it sends (an RDMA2_GRANT, draft-ietf-nfsv4-rpcrdma-version-two-07
    /// section 4.2.1.1) opens it; `None` at `deadline` or once the connection is down. The
    /// loop's other threads judge that message meanwhile (this one waits like a long call).
    pub(super) fn part_credit(&self, deadline: Instant) -> Option<u32> {
        // What this thread holds goes first (the credit may come in answer to it), and not
        // under the core's lock (writing may end the connection).
        rpcrdma_verbs::flush_held();
        let mut core = lock(&self.core);
        let mut waiting = false;
        let total = loop {
            if let Some(total) = core.draft07_part_credit() {
                break Some(total);
            }
            let now = Instant::now();
            let down = self.ending.load(Ordering::SeqCst) || self.conn.qp().state() != QpState::Ready;
            let Some(left) = deadline.checked_duration_since(now).filter(|d| !d.is_zero() && !down) else {
                break None;
            };
            if !waiting {
                // The GRANT must be read even with the connection's most calls in progress
                // (this one among them): the loop leaves calls waiting on the requester out of
                // that count ([`LoopConnection::blocked`]), and is told once that this one
                // waits (as a thread that comes to wait behind it tells it,
                // `Transport::tell_when_blocked`). Not with the core locked: the loop's state is
                // locked to queue the connection; then everything is looked at again, since a
                // message may have been judged meanwhile.
                waiting = true;
                self.part_waiters.fetch_add(1, Ordering::SeqCst);
                if let Some(waker) = self.waker.get() {
                    drop(core);
                    waker.wake_by_ref();
                    core = lock(&self.core);
                    continue;
                }
            }
            // Woken by the judging of a message (`credit_may_have_changed`) or the
            // connection's end (`ending`), both under the core's lock.
            core = self.granted.wait_timeout(core, left).unwrap_or_else(PoisonError::into_inner).0;
        };
        if waiting {
            self.part_waiters.fetch_sub(1, Ordering::SeqCst);
        }
        total
    }

    /// Closes the connection for `why`: its backward call waiting, if any, fails, and a reply
    /// waiting for credit gives up at once.
    pub(super) fn close(&self, why: impl std::fmt::Display) {
        self.back.close();
        self.conn.close(why);
        self.ending();
    }

    /// Its calls in progress whose thread waits on the requester (a -07 reply waiting for
    /// credit, or to post behind one that does): not counted against its most calls in
    /// progress, nor the loop's threads, since the GRANT they wait for is among the messages
    /// still to be read. Counted out only up to twice the server's credits: beyond them (a
    /// requester that sends calls beyond the totals the server sent, which are counted and
    /// still served, -07 section 4.2.1, or one that pipelines that deep while its own window
    /// holds the replies back) they count against its most calls in progress, and the loop
    /// receives nothing more for it until a reply goes. Before, each such call took a thread
    /// of its own, without bound. The cost at the bound: a message that would open the
    /// requester's window, if it is behind those not read, is not read either, and the
    /// replies waiting wait out `ServerConfig::timeout`, which closes the connection. (-07
    /// credits bound the messages not yet read, not the calls not yet answered: a requester
    /// keeping to them can reach the bound; the way around it, replies waiting for credit
    /// parked without a thread each, is not built.)
    pub(super) fn blocked(&self) -> usize {
        (self.part_waiters.load(Ordering::SeqCst) + self.conn.blocked_sending()).min(self.blocked_most)
    }

    /// Whether it has its most calls in progress, those blocked on the requester left out:
    /// the loop receives nothing more for it until one ends.
    pub(super) fn is_full(&self, in_progress: usize) -> bool {
        in_progress.saturating_sub(self.blocked()) >= self.most
    }

    /// The connection is closing: a reply waiting for credit gives up at once.
    fn ending(&self) {
        // Under the core's lock, as the waiters look at it: none misses the wake-up.
        let _core = lock(&self.core);
        self.ending.store(true, Ordering::SeqCst);
        self.granted.notify_all();
    }

    /// After a message was judged: wakes the replies waiting for credit, if any
    /// ([`LoopConnection::part_credit`]).
    pub(super) fn credit_may_have_changed(&self) {
        if self.part_waiters.load(Ordering::SeqCst) > 0 {
            self.granted.notify_all();
        }
    }
}

/// Accepts the connection `req` asks for: the private data, Receives of the largest size a
/// requester may send, one per credit (RFC 8166 section 3.3.1), posted before it is
/// established, its record in [`Server::peers`] and its backchannel. `None` when the accept
/// failed (the requester went away, or memory ran out).
pub(super) fn accept<B: Backend>(
    backend: &B,
    req: B::Request,
    host_slot: Option<HostSlot>,
    cfg: &ServerConfig,
    shared: &Shared,
) -> Option<LoopConnection<B>> {
    let (ours, pdata) = thresholds::what_to_send(cfg.private_data, cfg.foreign_private_data);
    let now = Instant::now();
    let mut core = Core::server(cfg.responder, cfg.limits.idle_timeout, req.private_data(), ours, now);
    // This connection's own handlers for RDMA_OPTIONAL (each connection has its Responder).
    core.set_registry(crate::extension::registry(&cfg.extensions));
    let registry07 = crate::extension07::Registry07::of(&cfg.draft07_extensions);
    let extension_properties = registry07.properties().to_vec();
    core.set_draft07_registry(registry07);
    if let Some(ours) = cfg.properties {
        core.set_properties(ours);
    }
    let received = req.private_data().to_vec();
    let address = req.peer();
    let size = thresholds::receive_size_stating(ours, cfg.responder.versions.1, cfg.properties.as_ref());
    // On a -07 connection the server states the Receives it posts (section 5.2.2), and the
    // segments its header limits take (5.2.3, 5.2.4): no segment longer than a chunk may be,
    // no more in one header than it reads.
    let receive_buffer_size = u32::try_from(size).unwrap_or(u32::MAX);
    let limits = &cfg.responder.limits;
    core.set_draft07_properties(Properties {
        receive_buffer_size,
        max_segment_size: u32::try_from(limits.max_chunk_len).unwrap_or(u32::MAX),
        max_segment_count: limits.max_segments,
        host_auth: cfg.host_auth.as_ref().map(|a| a.as_bytes().to_vec()),
        others: extension_properties,
        ..Properties::default()
    });
    let pd = backend.alloc_pd().ok()?;
    let mut pool = None;
    let count = cfg.responder.credits as usize + backchannel::SLOTS;
    // Counted whatever the budget holds: sized by this server's configuration, and calls in
    // progress must not shut a new connection out. With them, what a -07 connection may hold
    // of a continued call (ResponderConfig::max_continued).
    let continued = if cfg.responder.draft07 { cfg.responder.max_continued } else { 0 };
    let receives = shared.budget.charge(count * size + continued);
    let accepted = req.accept_with(&pd, &pdata, cfg.caps, |qp| {
        pool = Some(ReceivePool::<B>::post(&pd, qp, count, size)?);
        Ok(())
    });
    let (Ok(qp), Some(pool)) = (accepted, pool) else { return None };
    log::info!(
        "accepted a connection from {}: private data received {:?} ({} bytes), sent {:?}",
        super::peer_name(address),
        core.responder().advertised().requester,
        received.len(),
        ours
    );
    lock(&shared.stats).connections += 1;
    let peer = Arc::new(Mutex::new(Peer {
        address,
        private_data: received,
        advertised: core.responder().advertised(),
        credits_requested: 0,
        ended: None,
        draft07_properties: None,
        versions_seen: Default::default(),
    }));
    lock(&shared.peers).push(peer.clone());
    let mut conn = Transport::<B>::new(pd, qp, cfg.timeout);
    // Where a Send's completion waits on the peer (TCP's acknowledgement; not in process,
    // where it completes as posted), a reply is not waited for (docs/design.md).
    conn.set_unwaited_replies(!backend.rdma_at_post());
    let conn = Arc::new(conn);
    let back = ServerSide::new(conn.clone());
    lock(&shared.backchannels).push(back.handle());
    let idle_at = Mutex::new(core.poll_timeout());
    Some(LoopConnection {
        conn,
        pool,
        core: Mutex::new(core),
        idle_at,
        peer,
        host: address.map(|a| a.host()),
        back,
        most: cfg.limits.calls_in_progress(cfg.responder.credits),
        blocked_most: 2 * cfg.responder.credits as usize,
        unanswered: AtomicUsize::new(0),
        waker: OnceLock::new(),
        granted: Condvar::new(),
        part_waiters: AtomicUsize::new(0),
        ending: AtomicBool::new(false),
        _receives: receives,
        _host_slot: host_slot,
    })
}
