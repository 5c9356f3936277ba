//! One connection of a [`Server`](super::Server): accepting it, then serving its calls on up
//! to [`ServerLimits::calls_in_progress`](crate::limits::ServerLimits::calls_in_progress)
//! threads in a leader/follower pattern (one thread receives, the others serve).

use super::*;
use crate::connection::{Arrival, Received};
use rpcrdma_v1::header::Header;

/// The decisions of one connection (the sans-I/O core), for a server: no transport handle.
type Core = crate::connection::Connection<()>;

/// Serves one connection until it goes down or the server stops: accepts it, then serves its
/// calls on up to [`ServerLimits::calls_in_progress`] threads of its own (this one the first),
/// which all have ended when this returns.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_connection<B: Backend, U: UpperLayerBinding + Sync + ?Sized>(
    backend: &B,
    req: B::Request,
    cfg: &ServerConfig,
    ulb: &U,
    handler: &dyn Handler,
    stop: &AtomicBool,
    shared: &Shared,
    slot: &OnceLock<Arc<Transport<B>>>,
) {
    let (ours, pdata) = thresholds::what_to_send(cfg.private_data, cfg.foreign_private_data);
    let now = Instant::now();
    let mut core = Core::server(cfg.responder, cfg.limits.idle_timeout, req.private_data(), ours, now);
    // This connection's own handlers for RDMA_OPTIONAL (each connection has its Responder).
    core.set_registry(crate::extension::registry(&cfg.extensions));
    if let Some(ours) = cfg.properties {
        core.set_properties(ours);
    }
    let received = req.private_data().to_vec();
    // Receives of the largest size a requester may send us, one per credit (RFC 8166 section
    // 3.3.1), posted before the connection is established.
    let size = thresholds::receive_size_stating(ours, cfg.responder.versions.1, cfg.properties.as_ref());
    let Ok(pd) = backend.alloc_pd() else { return };
    let mut pool = None;
    let accepted = req.accept_with(&pd, &pdata, cfg.caps, |qp| {
        let count = cfg.responder.credits as usize + backchannel::SLOTS;
        pool = Some(ReceivePool::<B>::post(&pd, qp, count, size)?);
        Ok(())
    });
    let (Ok(qp), Some(pool)) = (accepted, pool) else { return };
    log::info!(
        "accepted a connection: private data received {:?} ({} bytes), sent {:?}",
        core.responder().advertised().requester,
        received.len(),
        ours
    );
    lock(&shared.stats).connections += 1;
    let peer = Arc::new(Mutex::new(Peer {
        private_data: received,
        advertised: core.responder().advertised(),
        credits_requested: 0,
        ended: None,
    }));
    lock(&shared.peers).push(peer.clone());
    let conn = Arc::new(Transport::<B>::new(pd, qp, cfg.timeout));
    // The server closes it when it stops; it cannot be set twice (one slot per connection).
    let _ = slot.set(conn.clone());
    let back = ServerSide::new(conn.clone(), cfg.responder.limits);
    lock(&shared.backchannels).push(back.handle());
    let now = Instant::now();
    let served = ConnectionThreads {
        cfg,
        ulb,
        handler,
        stop,
        shared,
        conn: &conn,
        pool,
        peer: &peer,
        back: &back,
        most: cfg.limits.calls_in_progress(cfg.responder.credits),
        lead: Mutex::new(Lead { core }),
        crew: Mutex::new(Crew {
            threads: 1,
            waiting: 1,
            untimed: 0,
            in_progress: 0,
            last_finished: now,
            free: true,
            alone: None,
            next_ticket: 0,
            ended: false,
        }),
        turn: Condvar::new(),
        unanswered: AtomicUsize::new(0),
    };
    // Every thread spawned for the connection's calls ends inside this scope.
    std::thread::scope(|scope| served.work(scope));
    let ended = conn.ended();
    if let Some(ended) = &ended {
        log::info!("a connection ended: {ended}");
    }
    lock(&peer).ended = ended;
}

/// One connection's serving, shared by the threads that serve its calls.
///
/// Run to completion, as eRPC runs a short handler on the thread that polls its completions:
/// the thread that holds the receiving role receives and judges messages one at a time with
/// the connection's [`Serve`] (its credits, version and idle decisions need one order), and
/// when a message is a call it serves that call itself (fetches its chunks, runs the
/// handler, sends the reply) and then receives the next one, already queued under load: no
/// thread hands a call to another, and nobody waits for a wake-up on the common path.
/// Only when a call runs longer than [`ServerLimits::run_inline_for`] does a waiting thread
/// take the role over, so that a long handler does not hold up the calls behind it; while
/// such a call is being served, each further call is served beside it, on the thread that
/// received it, with the role handed on at once (up to
/// [`ServerLimits::calls_in_progress_per_connection`] threads). A call whose arguments come
/// by RDMA Read hands the role on at once when other messages wait: over TCP a Read is a
/// network round trip.
///
/// Measured (docs/benchmarks.md, "Issue 25"), the 64-caller in-process load, with prepared
/// transmissions on the client: handing the role on whenever another message waited (the
/// design before) 4.8 thread switches per call, keeping it for every call 3.8, and with the
/// Read-chunk rule 5.0 (keeping it for every call cost TCP 16 switches a call against 10); a
/// pool of workers fed by a receiver, measured earlier, 8.1 to 10.5.
///
/// [`ServerLimits::run_inline_for`]: crate::limits::ServerLimits::run_inline_for
/// [`ServerLimits::calls_in_progress_per_connection`]: crate::limits::ServerLimits::calls_in_progress_per_connection
struct ConnectionThreads<'a, B: Backend, U: ?Sized> {
    cfg: &'a ServerConfig,
    ulb: &'a U,
    handler: &'a dyn Handler,
    stop: &'a AtomicBool,
    shared: &'a Shared,
    conn: &'a Arc<Transport<B>>,
    pool: ReceivePool<B>,
    peer: &'a Mutex<Peer>,
    back: &'a ServerSide<B>,
    /// The most calls served at once, and so the most threads.
    most: usize,
    /// The receiving role and what it judges with.
    lead: Mutex<Lead>,
    crew: Mutex<Crew>,
    /// Signals the waiting threads (with `crew`): the role is free, a call is being served
    /// alone, or the connection ended.
    turn: Condvar,
    /// Calls taken whose answer has not been posted yet: each is still in flight for the
    /// requester, so it counts against the credits of the next call judged (RFC 8166 section
    /// 3.3.1). A call stops counting just before its answer is posted, so a requester that
    /// sends its next call once it has that answer is never taken for one beyond its credits.
    unanswered: AtomicUsize,
}

struct Lead {
    core: Core,
}

/// The connection's threads.
struct Crew {
    /// Spawned and not yet ended, this one included.
    threads: usize,
    /// Waiting for the receiving role (or spawned to): a call arriving finds one of them to
    /// receive the next message while it is served.
    waiting: usize,
    /// Of those, the ones waiting without a deadline (no call served alone when they began).
    untimed: usize,
    /// Calls taken and not yet answered.
    in_progress: usize,
    /// When the last call in progress was answered: a call that ran long is activity too.
    last_finished: Instant,
    /// The receiving role is free: the next waiting thread takes it.
    free: bool,
    /// The role's holder is serving a call itself, since when, under which ticket: it kept
    /// the role (the calls behind then need no thread hand-off); a waiting thread takes the
    /// role over once this is
    /// [`ServerLimits::run_inline_for`](crate::limits::ServerLimits::run_inline_for) old.
    alone: Option<(Instant, u64)>,
    next_ticket: u64,
    /// The connection is done: every thread leaves.
    ended: bool,
}

/// Spin-loop hints between two looks at an empty completion queue
/// ([`ServerLimits::poll_before_wait`](crate::limits::ServerLimits::poll_before_wait)).
const SPINS_BETWEEN_LOOKS: u32 = 128;

/// The longest a receiving thread waits for a message before it looks at the idle rule again.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

impl<'a, B: Backend, U: UpperLayerBinding + Sync + ?Sized> ConnectionThreads<'a, B, U> {
    /// One thread's part: take the receiving role, receive until a call arrives, serve it,
    /// and again, until the connection ends.
    fn work<'s>(&'s self, scope: &'s Scope<'s, '_>) {
        // This thread's call and reply buffers, kept from one call to the next.
        let mut buffers = CallBuffers::default();
        let mut holding = false;
        loop {
            if !holding && !self.take_role() {
                break;
            }
            // Receive and judge (one thread at a time: the role's holder) until a message is a
            // call; the others are answered here, and the role kept.
            let mut lead = lock(&self.lead);
            let m = match self.next_message(&lead.core) {
                Ok(m) => m,
                Err(why) => {
                    drop(lead);
                    self.end(why);
                    break;
                }
            };
            let (header, params) = match self.judge(&mut lead.core, &m.bytes) {
                Received::Call { header, params } => (header, params),
                // A reply to our backward call, or the answer to our RDMA_OPTIONAL: for whoever
                // waits on its XID (one that answers nothing of ours is dropped there).
                Received::Reply { xid } => {
                    drop(lead);
                    self.back.on_reply(xid, m.bytes);
                    holding = true;
                    continue;
                }
                other => {
                    drop(lead);
                    let answered = self.answer(other);
                    self.pool.recycle(m.bytes);
                    if let Err(why) = answered {
                        self.end(why);
                        break;
                    }
                    holding = true;
                    continue;
                }
            };
            self.take_call(&lead.core, &header);
            drop(lead);
            // This thread keeps the role while it serves, unless the call runs long, or waits
            // on the network for its Read chunks while other messages wait (over TCP an RDMA
            // Read is a round trip: keeping the role through it held the calls behind up,
            // 16 thread switches a call against 10 handing it on).
            let keep = header.read_list().is_empty() || self.conn.receives_waiting() == 0;
            let ticket = self.take_on(scope, keep);
            let answering = || {
                self.unanswered.fetch_sub(1, Ordering::SeqCst);
            };
            // The header the core judged, read in place: nothing parses the message again.
            let served = serve_call(self.conn, &header, &params, self.ulb, self.handler, &mut buffers, answering);
            match served {
                Ok(served) => self.count(served),
                // RFC 8166 section 4.5.4: a reply that could not be sent is signaled by closing
                // the connection; the receiving thread sees it down and ends the others.
                Err(e) => self.conn.close(format_args!("serving call {:#x}: {e}", header.xid())),
            }
            // The message's buffer takes the next message received.
            self.pool.recycle(m.bytes);
            let mut crew = lock(&self.crew);
            crew.in_progress -= 1;
            crew.last_finished = Instant::now();
            holding = ticket.is_some() && crew.alone.is_some_and(|(_, t)| Some(t) == ticket);
            if holding {
                crew.alone = None;
            } else {
                crew.waiting += 1;
            }
        }
        lock(&self.crew).threads -= 1;
    }

    /// Waits for the receiving role: free, or held by a thread serving a call alone for
    /// [`ServerLimits::run_inline_for`](crate::limits::ServerLimits::run_inline_for); false once
    /// the connection has ended. While a call is served alone
    /// the wait has a deadline, so that it notices the call running long without being told;
    /// otherwise it waits to be told (the role freed, or a call begun alone).
    fn take_role(&self) -> bool {
        let mut crew = lock(&self.crew);
        loop {
            if crew.ended {
                crew.waiting -= 1;
                return false;
            }
            let now = Instant::now();
            // (A `run_inline_for` too long to add to an instant: never overdue.)
            let overdue = crew.alone.and_then(|(since, _)| since.checked_add(self.cfg.limits.run_inline_for));
            if crew.free || overdue.is_some_and(|t| t <= now) {
                crew.free = false;
                crew.alone = None;
                crew.waiting -= 1;
                return true;
            }
            if let Some(until) = overdue {
                crew = self.turn.wait_timeout(crew, until - now).unwrap_or_else(PoisonError::into_inner).0;
            } else {
                crew.untimed += 1;
                crew = self.turn.wait(crew).unwrap_or_else(PoisonError::into_inner);
                crew.untimed -= 1;
            }
        }
    }

    /// A call was taken: counts it, and either keeps the receiving role while this thread
    /// serves the call (returning the ticket that says whether it still holds it afterwards),
    /// or, when `keep` is false or another call is being served beside (one that ran long),
    /// frees it. When no
    /// other thread waits to receive and the bound allows, spawns one (so a connection whose
    /// calls are all short keeps two threads, never [`ConnectionThreads::most`]).
    fn take_on<'s>(&'s self, scope: &'s Scope<'s, '_>, keep: bool) -> Option<u64> {
        let mut crew = lock(&self.crew);
        // A call with none beside it keeps the role: the calls queued behind it follow on
        // this thread. Beside a long one, the next message must not wait for this one.
        let keep = keep && crew.in_progress == 0;
        crew.in_progress += 1;
        let ticket = if keep {
            let t = crew.next_ticket;
            crew.next_ticket += 1;
            crew.alone = Some((Instant::now(), t));
            // Only a thread waiting without a deadline must be told; the others wake by
            // themselves when the call has run too long.
            if crew.untimed > 0 {
                self.turn.notify_one();
            }
            Some(t)
        } else {
            crew.free = true;
            self.turn.notify_one();
            None
        };
        if crew.waiting == 0 && crew.threads < self.most {
            let spawned =
                std::thread::Builder::new().name("negotiate-call".into()).spawn_scoped(scope, move || self.work(scope));
            // One that could not be spawned leaves the calls to the threads there are.
            if spawned.is_ok() {
                crew.threads += 1;
                crew.waiting += 1;
            }
        }
        ticket
    }

    /// The connection ends, for `why`: every thread leaves, and the backward call waiting,
    /// if any, fails.
    fn end(&self, why: String) {
        self.back.close();
        self.conn.close(why);
        lock(&self.crew).ended = true;
        self.turn.notify_all();
    }

    /// The role holder's wait for the next message; `Err` with the reason to close the
    /// connection (the server stopping, the queue pair down, idle).
    fn next_message(&self, core: &Core) -> Result<crate::datapath::Received, String> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err("the server stopped".to_string());
            }
            if self.conn.qp().state() != QpState::Ready {
                return Err("the queue pair went down".to_string());
            }
            // No polling tick: the wait lasts until the connection would be idle; the server
            // stopping, or the connection going down, ends it at once (the close flushes the
            // Receives).
            self.poll_before_wait();
            match self.pool.receive_within(self.conn, self.until_idle(core)) {
                Ok(m) => return Ok(m),
                Err(DataPathError::Timeout { .. }) => {
                    if self.is_idle(core) {
                        lock(&self.shared.stats).refused.idle += 1;
                        return Err(format!("idle for {:?}", self.cfg.limits.idle_timeout));
                    }
                }
                Err(e) => return Err(format!("receiving: {e}")),
            }
        }
    }

    /// Judges a received message once, with the connection's core.
    fn judge<'m>(&self, core: &mut Core, bytes: &'m [u8]) -> Received<'m> {
        // Behind this message: the ones received and not judged, and the calls being
        // served, all in flight for the requester.
        let behind = self.conn.receives_waiting() + self.unanswered.load(Ordering::SeqCst);
        // The answer to our own RDMA_OPTIONAL (Backchannel::send_option), if one waits.
        let arrival = Arrival { behind, awaiting: self.back.awaiting_option() };
        let received = core.handle_receive(bytes, arrival, Instant::now());
        // The stats are shared with the threads serving calls: locked only when there is
        // something to add (overruns are cumulative, kept as the most seen).
        let (overruns, over_limits) = (core.responder().overruns(), core.new_over_limits());
        if overruns > 0 || over_limits > 0 {
            let mut s = lock(&self.shared.stats);
            s.credit_overruns = s.credit_overruns.max(overruns);
            s.refused.over_limits += over_limits;
        }
        received
    }

    /// A call was judged: it is in flight until answered, and the backward direction follows
    /// the version and thresholds of the latest forward call.
    fn take_call(&self, core: &Core, header: &Header<'_>) {
        lock(self.peer).credits_requested = header.credit();
        let version = header.version();
        let responder = core.responder();
        self.back.on_forward_call(Forward {
            version,
            thresholds: responder.advertised().for_version(version),
            backward_credits: responder.stated().requester.and_then(|p| p.backward_credits),
        });
        self.unanswered.fetch_add(1, Ordering::SeqCst);
    }

    /// Answers a message that is not a call nor a reply; `Err` with the reason to close the
    /// connection.
    fn answer(&self, received: Received<'_>) -> Result<(), String> {
        match received {
            Received::SendError(e) => {
                // ERR_VERS answers a probe from a requester with a version we lack: part of
                // negotiating (draft section 5.2), not misbehaviour.
                let level = if e.code() == 1 { log::Level::Info } else { log::Level::Warn };
                log::log!(level, "answering message {:#010x} with RDMA_ERROR code {}", e.xid(), e.code());
                send_error(self.conn, e.as_bytes()).map_err(|e| format!("sending an RDMA_ERROR: {e}"))?;
                lock(&self.shared.stats).errors_sent += 1;
            }
            // An extension's answer (draft section 3.1), sent and waited for here, before
            // the next message is read: a client flooding RDMA_OPTIONAL messages has at
            // most one answer outstanding.
            Received::SendBack(bytes) => {
                send_error(self.conn, &bytes).map_err(|e| format!("sending an RDMA_OPTIONAL: {e}"))?;
            }
            // The client's RDMA_ERROR ends the backward call it names at once (RFC 8166
            // section 4.5); one that names no call of ours is dropped.
            Received::PeerError { xid, error } => {
                log::warn!("the client answered backward call {xid:#010x} with RDMA_ERROR {error:?}");
                self.back.on_peer_error(xid, error);
            }
            Received::Call { .. } | Received::Reply { .. } | Received::Nothing(_) => {}
        }
        Ok(())
    }

    /// Looks at the completion queue for up to [`ServerLimits::poll_before_wait`] while it is
    /// empty, so that a message arriving meanwhile is taken without the thread having slept.
    ///
    /// [`ServerLimits::poll_before_wait`]: crate::limits::ServerLimits::poll_before_wait
    fn poll_before_wait(&self) {
        let limit = self.cfg.limits.poll_before_wait;
        if limit.is_zero() {
            return;
        }
        // (A limit too long to add to an instant: a second at a time, so that the idle rule
        // is still looked at.)
        let until = Instant::now().checked_add(limit).unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
        // A look every few hundred nanoseconds, not continuously: each takes the completion
        // queue's lock, which the peer posting to it needs too.
        while self.conn.receives_waiting() == 0 && Instant::now() < until && !self.stop.load(Ordering::Relaxed) {
            for _ in 0..SPINS_BETWEEN_LOOKS {
                std::hint::spin_loop();
            }
        }
    }

    /// Idle: no message for the idle timeout, and no call in progress nor answered within it.
    /// How long until the connection would be idle ([`ConnectionThreads::is_idle`]) if nothing
    /// arrives.
    /// A call being served keeps the connection from being idle until it ends: then the wait
    /// is a whole idle timeout. At most [`LONGEST_WAIT`] (an idle timeout of `Duration::MAX`
    /// means never idle), at least 1 ms.
    fn until_idle(&self, core: &Core) -> Duration {
        let timeout = self.cfg.limits.idle_timeout;
        let crew = lock(&self.crew);
        let wait = if crew.in_progress > 0 {
            timeout
        } else {
            let now = Instant::now();
            let after_last_call = crew.last_finished.checked_add(timeout).map(|t| t.saturating_duration_since(now));
            let after_last_message = core.poll_timeout().map_or(LONGEST_WAIT, |t| t.saturating_duration_since(now));
            after_last_call.unwrap_or(LONGEST_WAIT).max(after_last_message)
        };
        wait.clamp(Duration::from_millis(1), LONGEST_WAIT)
    }

    fn is_idle(&self, core: &Core) -> bool {
        let now = Instant::now();
        let crew = lock(&self.crew);
        core.is_idle(now)
            && crew.in_progress == 0
            && now.saturating_duration_since(crew.last_finished) >= self.cfg.limits.idle_timeout
    }

    fn count(&self, served: Answered) {
        let mut s = lock(&self.shared.stats);
        match served {
            Answered::Reply(v, form, sent) => {
                s.calls.count(v);
                match form {
                    ArrivedAs::Inline => {}
                    ArrivedAs::ReadChunks => s.read_chunk_calls += 1,
                    ArrivedAs::Long => s.long_calls += 1,
                }
                match sent.form {
                    ReplyForm::Inline => s.inline_replies += 1,
                    ReplyForm::ReplyChunk => s.reply_chunk_replies += 1,
                }
                s.write_chunk_results += sent.reduced_results as u64;
            }
            Answered::ErrChunk => s.errors_sent += 1,
            Answered::GarbageArgs => s.garbage_args_replies += 1,
            Answered::SystemErr => s.handler_panics += 1,
        }
    }
}
