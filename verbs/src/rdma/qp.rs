//! The connected RC queue pair: posting, polling, CM events, disconnect.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};

use rdma_sys::rdma_cm_event_type::*;
use rdma_sys::*;

use super::conn::Conn;
use super::cq::{wc_opcode, wc_status};
use super::ffi::{self, os_error, Ptr};
use super::pd::{PdInner, RdmaRegion};
use crate::reactor::{self, Source, Step};
use crate::{
    check_window, lock, Access, Arm, ChainError, CmEvent, Completion, Error, MemoryRegion, Opcode, QpCaps, QpState,
    QueuePair, RemoteBuf, Result, SendFlags, Sge, Status, WorkRequest,
};

/// A connected RC queue pair with its CQ and its connection's event channel.
///
/// The process's readiness loop reads the connection's CM events as they come (its channel's
/// descriptor is registered there, [`CmWatch`]), so a peer's disconnect is answered
/// (`rdma_disconnect`, which sends the DREP and moves the QP to Error, flushing it) even when
/// the owner is not looking, with no thread of the queue pair's own; it stashes
/// [`CmEvent::Disconnected`] for [`QueuePair::cm_event`].
pub struct RdmaQp {
    s: Arc<Shared>,
    /// The CM events' registration in the readiness loop, from [`Self::watch_cm_events`].
    cm_watch: Option<u64>,
    /// The waker armed on its completion queue, watched by the process's readiness loop
    /// ([`QueuePair::arm_waker`]); registered there on the first arm.
    watch: Arc<CqWatch>,
}

/// A completion queue's fd as the readiness loop watches it: its next readiness wakes the
/// waker armed, once.
struct CqWatch {
    /// The CQ's epoll fd (the completion channel and the backend's own completions).
    fd: RawFd,
    /// Its name in the readiness loop.
    token: u64,
    waker: Mutex<Option<Waker>>,
    registered: AtomicBool,
}

impl Source for CqWatch {
    fn fd(&self) -> RawFd {
        self.fd
    }

    fn on_ready(&self, _scratch: &mut [u8]) -> Step {
        // Woken after the unlock: an arm waits on this lock while it decides.
        let armed = lock(&self.waker).take();
        if let Some(w) = armed {
            w.wake();
        }
        Step::Idle
    }

    fn on_deadline(&self, _at: Instant, _now: Instant) -> Step {
        Step::Idle
    }
}

/// A connection's CM event channel as the readiness loop watches it: each readiness reads
/// every event waiting. It holds the queue pair weakly: the queue pair's drop deregisters it.
struct CmWatch {
    fd: RawFd,
    qp: Weak<Shared>,
}

impl Source for CmWatch {
    fn fd(&self) -> RawFd {
        self.fd
    }

    fn on_ready(&self, _scratch: &mut [u8]) -> Step {
        match self.qp.upgrade() {
            Some(s) => s.read_cm_events(),
            None => Step::Done,
        }
    }

    fn on_deadline(&self, _at: Instant, _now: Instant) -> Step {
        Step::Idle
    }
}

struct Shared {
    conn: Conn,
    pd: Arc<PdInner>,
    caps: QpCaps,
    inner: Mutex<Inner>,
    /// Signalled when a CM event is stashed.
    cm_cv: Condvar,
}

struct Inner {
    /// The device-level wr_id of the next work request; the device sees these, never the
    /// caller's, so a completion finds its `Pending` entry.
    next_seq: u64,
    pending: HashMap<u64, Pending>,
    /// Device completions taken off the CQ and not yet handed out: whoever polls the CQ takes
    /// all it holds, so that a completion left behind is never one no event will announce.
    drained: VecDeque<Completion>,
    /// Completions the backend produced itself (Local Invalidate; work requests posted in the
    /// Error state), returned after the device's.
    synthetic: VecDeque<Completion>,
    /// Whether the CQ's wake eventfd is readable: kept equal to "`drained` or `synthetic` holds
    /// a completion", so a sleeping waiter wakes for those too.
    wake_on: bool,
    send_outstanding: u32,
    /// The device wr_ids of unsignaled send-queue work requests not yet covered by a later
    /// completion, oldest first (see [`Shared::retire_covered`]).
    unsignaled: VecDeque<u64>,
    recv_outstanding: u32,
    error: bool,
    disconnect_sent: bool,
    cm_events: VecDeque<CmEvent>,
    /// Memory windows this queue pair bound, by rkey, each with the region it covers (an MR
    /// cannot be deregistered under a bound window). Freed once invalidated, or on drop.
    windows: HashMap<u32, (Ptr<ibv_mw>, RdmaRegion)>,
}

/// A work request handed to the device: the caller's wr_id, what it was, its length, and the
/// regions it names, kept alive (pinned) until its completion is reaped.
struct Pending {
    wr_id: u64,
    opcode: Opcode,
    len: u32,
    /// For a Local Invalidate of a window: its rkey, freed when the invalidation completes.
    window: Option<u32>,
    _regions: Vec<RdmaRegion>,
}

/// A send-queue work request built and not yet posted ([`Shared::build`]): the device's
/// work request, the scatter/gather list it points into once posted, and what becomes its
/// `Pending` entry.
struct Built {
    wr: ibv_send_wr,
    list: Vec<ibv_sge>,
    signaled: bool,
    pending: Option<Pending>,
}

// SAFETY: `Conn` holds rdma-core handles (thread-safe, see `ffi::Ptr`); all mutable state is
// behind the mutexes.
unsafe impl Sync for Shared {}
// SAFETY: as above.
unsafe impl Send for Shared {}

impl RdmaQp {
    /// A queue pair on an established connection, its CM events watched.
    pub(super) fn new(conn: Conn, pd: Arc<PdInner>, caps: QpCaps) -> Result<Self> {
        let mut qp = Self::unstarted(conn, pd, caps);
        qp.watch_cm_events()?;
        Ok(qp)
    }

    /// A queue pair whose connection is not established yet: work can be posted (Receives,
    /// before `rdma_accept`), and nobody reads its CM events until [`Self::watch_cm_events`].
    pub(super) fn unstarted(conn: Conn, pd: Arc<PdInner>, caps: QpCaps) -> Self {
        let s = Arc::new(Shared {
            conn,
            pd,
            caps,
            inner: Mutex::new(Inner {
                next_seq: 1,
                pending: HashMap::new(),
                drained: VecDeque::new(),
                synthetic: VecDeque::new(),
                wake_on: false,
                send_outstanding: 0,
                unsignaled: VecDeque::new(),
                recv_outstanding: 0,
                error: false,
                disconnect_sent: false,
                cm_events: VecDeque::new(),
                windows: HashMap::new(),
            }),
            cm_cv: Condvar::new(),
        });
        let watch = Arc::new(CqWatch {
            fd: s.conn.cq().fd().as_raw_fd(),
            token: crate::inproc::next_id(),
            waker: Mutex::new(None),
            registered: AtomicBool::new(false),
        });
        RdmaQp { s, cm_watch: None, watch }
    }

    /// Hands the connection's CM event channel to the process's readiness loop, which reads
    /// its events from now on (events already waiting included: the registration is
    /// edge-triggered, and epoll reports a descriptor already readable at once).
    pub(super) fn watch_cm_events(&mut self) -> Result<()> {
        let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(0);
        let r = reactor::reactor().map_err(|e| os_error("starting the readiness loop", errno(e)))?;
        let token = crate::inproc::next_id();
        let watch = Arc::new(CmWatch { fd: self.s.conn.channel_fd(), qp: Arc::downgrade(&self.s) });
        r.add(token, watch).map_err(|e| os_error("epoll_ctl", errno(e)))?;
        self.cm_watch = Some(token);
        Ok(())
    }

    /// The connection's cm_id and event channel.
    pub(super) fn conn(&self) -> &Conn {
        &self.s.conn
    }
}

impl Shared {
    /// `rdma_disconnect` once (it also moves the QP to the Error state, flushing it).
    fn disconnect_locked(&self, inner: &mut Inner) {
        inner.error = true;
        if !inner.disconnect_sent {
            inner.disconnect_sent = true;
            // SAFETY: the id is live; a failure (already disconnected by the peer) is harmless.
            let rc = unsafe { rdma_disconnect(self.conn.id.0) };
            log::debug!("rdma_disconnect -> {rc} (errno {})", ffi::errno());
        }
    }

    /// The scatter/gather list for `sges`, checked against the caps.
    fn sg_list(&self, sges: &[Sge<'_, RdmaRegion>]) -> Result<(Vec<ibv_sge>, u32)> {
        if sges.len() > self.caps.max_sge as usize {
            return Err(Error::TooManySges(sges.len()));
        }
        let total: usize = sges.iter().map(|s| s.len).sum();
        let total = u32::try_from(total).map_err(|_| Error::TooLong)?;
        let list = sges
            .iter()
            .map(|s| ibv_sge {
                addr: s.region.addr().wrapping_add(s.offset as u64),
                length: s.len as u32,
                lkey: s.region.lkey(),
            })
            .collect();
        Ok((list, total))
    }

    /// Posts one send-queue work request built by `fill` (which sets opcode and its fields).
    fn post_sq(
        &self,
        wr_id: u64,
        opcode: Opcode,
        sges: &[Sge<'_, RdmaRegion>],
        flags: SendFlags,
        fill: impl FnOnce(&mut ibv_send_wr),
    ) -> Result<()> {
        let built = self.build(wr_id, opcode, sges, None, flags, fill)?;
        self.post_sq_locked(lock(&self.inner), built)
    }

    /// Posts one work request [built](Self::build) with the state already locked.
    fn post_sq_locked(&self, mut inner: std::sync::MutexGuard<'_, Inner>, built: Built) -> Result<()> {
        match self.post_built(&mut inner, &mut [built]) {
            (_, None) => Ok(()),
            (_, Some(e)) => Err(e),
        }
    }

    /// A send-queue work request with its scatter/gather list, not yet posted; `fill` sets
    /// its opcode and the opcode's fields.
    fn build(
        &self,
        wr_id: u64,
        opcode: Opcode,
        sges: &[Sge<'_, RdmaRegion>],
        window: Option<u32>,
        flags: SendFlags,
        fill: impl FnOnce(&mut ibv_send_wr),
    ) -> Result<Built> {
        let (list, len) = self.sg_list(sges)?;
        // SAFETY: ibv_send_wr is plain data for which all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        // Per work request: the QP is created with sq_sig_all = 0 (`Conn::create_qp`).
        let signaled = flags.contains(SendFlags::SIGNALED);
        wr.send_flags = if signaled { ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 };
        fill(&mut wr);
        let regions = sges.iter().map(|s| s.region.clone()).collect();
        Ok(Built { wr, list, signaled, pending: Some(Pending { wr_id, opcode, len, window, _regions: regions }) })
    }

    /// Posts `built` linked, as one `ibv_post_send` (one doorbell), with the state locked.
    /// Returns how many were posted, from the first, and why the next one was refused: the
    /// send queue had no room for it, or the device refused it (`bad_wr`). In the Error state
    /// each is completed as flushed instead (they count as posted).
    fn post_built(&self, inner: &mut Inner, built: &mut [Built]) -> (usize, Option<Error>) {
        let room = self.caps.max_send_wr.saturating_sub(inner.send_outstanding) as usize;
        let n = built.len().min(room);
        let mut refused = (n < built.len()).then_some(Error::QueueFull);
        if inner.error {
            for b in &mut built[..n] {
                let p = b.pending.take().expect("posted once");
                self.push_synthetic(inner, Completion::new(p.wr_id, Status::WorkRequestFlushed, p.opcode, 0));
            }
            return (n, refused);
        }
        let base = inner.next_seq;
        for (k, b) in built[..n].iter_mut().enumerate() {
            b.wr.wr_id = base + k as u64;
            b.wr.sg_list = if b.list.is_empty() { std::ptr::null_mut() } else { b.list.as_mut_ptr() };
            b.wr.num_sge = b.list.len() as i32;
            b.wr.next = std::ptr::null_mut();
        }
        // Linked, and handed over, through pointers all taken from one: no reference made
        // after them invalidates them.
        let at = built.as_mut_ptr();
        let wr = |k: usize| -> *mut ibv_send_wr {
            // SAFETY: k < n <= built.len(); no reference into `built` is live meanwhile.
            unsafe { std::ptr::addr_of_mut!((*at.add(k)).wr) }
        };
        for k in 1..n {
            // SAFETY: as above; both are work requests of `built`.
            unsafe { (*wr(k - 1)).next = wr(k) };
        }
        let mut bad = std::ptr::null_mut();
        let rc = if n == 0 {
            0
        } else {
            // SAFETY: the QP is live; the linked work requests and their sg lists are valid
            // for the call (the device copies them); the memory they name stays registered
            // while `Pending` holds the regions.
            unsafe { ibv_post_send(self.conn.qp().0, wr(0), &mut bad) }
        };
        // The sequence numbers handed out are used up whatever happened: a provider that
        // posted some and named none as refused never gets one twice.
        inner.next_seq = base + n as u64;
        let posted = if rc == 0 {
            n
        } else {
            refused = Some(if rc == libc::ENOMEM { Error::QueueFull } else { os_error("ibv_post_send", rc) });
            // `bad` is the first work request not posted.
            (0..n).find(|&k| std::ptr::eq(wr(k), bad)).unwrap_or(0)
        };
        for b in &mut built[..posted] {
            let seq = b.wr.wr_id;
            inner.send_outstanding += 1;
            if !b.signaled {
                inner.unsignaled.push_back(seq);
            }
            inner.pending.insert(seq, b.pending.take().expect("posted once"));
        }
        (posted, refused)
    }

    /// Frees the window with `rkey` if this queue pair bound it (it has been invalidated).
    fn free_window(inner: &mut Inner, rkey: u32) {
        if let Some((mw, _region)) = inner.windows.remove(&rkey) {
            // SAFETY: the window was allocated by this queue pair and is freed once, here.
            unsafe { ibv_dealloc_mw(mw.0) };
        }
    }

    /// A send-queue completion for device wr_id `seq` arrived: every unsignaled work request
    /// posted before it has completed successfully (a send queue completes in order, and a
    /// failed or flushed work request reports itself, signaled or not: IBA 10.8.6.1,
    /// `ibv_post_send(3)`), so its slot, its pinned regions and, for a Local Invalidate, its
    /// window are released now. `seq` itself leaves the list if it was unsignaled (it failed).
    fn retire_covered(inner: &mut Inner, seq: u64) {
        while let Some(&s) = inner.unsignaled.front() {
            if s > seq {
                break;
            }
            inner.unsignaled.pop_front();
            if s == seq {
                break;
            }
            if let Some(p) = inner.pending.remove(&s) {
                inner.send_outstanding = inner.send_outstanding.saturating_sub(1);
                if let Some(rkey) = p.window {
                    Self::free_window(inner, rkey);
                }
            }
        }
    }

    /// Turns a device completion into the crate's, updating the bookkeeping.
    fn complete(&self, inner: &mut Inner, wc: &ibv_wc) -> Completion {
        if inner.pending.get(&wc.wr_id).is_some_and(|p| p.opcode.is_send_queue()) {
            Self::retire_covered(inner, wc.wr_id);
        }
        let p = inner.pending.remove(&wc.wr_id);
        let (wr_id, opcode, len, window) = match &p {
            Some(p) => (p.wr_id, p.opcode, p.len, p.window),
            None => (wc.wr_id, wc_opcode(wc.opcode), wc.byte_len, None),
        };
        if opcode.is_send_queue() {
            inner.send_outstanding = inner.send_outstanding.saturating_sub(1);
        } else {
            inner.recv_outstanding = inner.recv_outstanding.saturating_sub(1);
        }
        let status = wc_status(wc.status);
        if status != Status::Success {
            log::debug!("wc wr_id {wr_id} {opcode:?}: ibv_wc_status {} -> {status:?}", wc.status);
        }
        let mut c = Completion::new(wr_id, status, opcode, 0);
        match status {
            Status::Success => {
                c.byte_len = if opcode == Opcode::Recv { wc.byte_len } else { len };
                if opcode == Opcode::Recv {
                    // SAFETY: reading a u32 out of a union of two u32s.
                    let rkey = unsafe { wc.imm_data_invalidated_rkey_union.invalidated_rkey };
                    let flags = wc.wc_flags;
                    let with_inv = flags & ibv_wc_flags::IBV_WC_WITH_INV.0 != 0;
                    let with_imm = flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
                    // rxe sets the rkey but not IBV_WC_WITH_INV: detect it from the rkey.
                    if with_inv || (!with_imm && rkey != 0) {
                        c.invalidated_rkey = Some(rkey);
                        Self::free_window(inner, rkey);
                    }
                }
                if let Some(rkey) = window {
                    Self::free_window(inner, rkey);
                }
            }
            Status::WorkRequestFlushed => inner.error = true,
            _ => self.disconnect_locked(inner),
        }
        c
    }

    /// Queues a completion the backend made itself, and wakes a waiter for it.
    fn push_synthetic(&self, inner: &mut Inner, c: Completion) {
        inner.synthetic.push_back(c);
        self.update_wake(inner);
    }

    /// Keeps the wake eventfd readable exactly while completions wait outside the CQ.
    fn update_wake(&self, inner: &mut Inner) {
        let on = !inner.drained.is_empty() || !inner.synthetic.is_empty();
        if on != inner.wake_on {
            inner.wake_on = on;
            self.conn.cq().set_wake(on);
        }
    }

    /// Takes every completion the CQ holds into `drained`.
    fn drain_cq(&self, inner: &mut Inner) {
        // SAFETY: ibv_wc is plain data for which all-zero is valid.
        let mut wcs: [ibv_wc; 16] = unsafe { std::mem::zeroed() };
        loop {
            let got = self.conn.cq().poll(&mut wcs);
            for wc in &wcs[..got] {
                let c = self.complete(inner, wc);
                inner.drained.push_back(c);
            }
            if got < wcs.len() {
                return;
            }
        }
    }

    /// Moves up to `out.len()` completions into `out`: the device's, oldest first, then the
    /// backend's own.
    fn reap(&self, out: &mut [Completion]) -> usize {
        let mut inner = lock(&self.inner);
        self.drain_cq(&mut inner);
        let mut n = 0;
        while n < out.len() {
            let Some(c) = inner.drained.pop_front().or_else(|| inner.synthetic.pop_front()) else { break };
            out[n] = c;
            n += 1;
        }
        self.update_wake(&mut inner);
        n
    }

    /// Arms the CQ before a sleep, and says whether completions are waiting already (then the
    /// caller polls instead of sleeping). Whoever consumes a CQ event re-arms here before
    /// polling, so the CQ is never left unarmed while another waiter sleeps on it; the poll
    /// after the arm catches a completion that arrived between the last empty poll and the
    /// arm, which raises no event.
    fn arm(&self) -> bool {
        if !self.conn.cq().rearm() {
            // Nothing would wake a sleeper: the caller polls again instead.
            return true;
        }
        let mut inner = lock(&self.inner);
        self.drain_cq(&mut inner);
        self.update_wake(&mut inner);
        inner.wake_on
    }

    /// Reads every CM event waiting on the connection's channel (the readiness loop calls
    /// this when the channel is readable; edge-triggered, so it reads until none is left).
    fn read_cm_events(&self) -> Step {
        loop {
            // A deadline of now: poll(2) with no wait, then the event it says is there.
            match ffi::next_event(self.conn.channel, Instant::now()) {
                Ok(Some(ev)) if ev.kind == RDMA_CM_EVENT_DISCONNECTED || ev.kind == RDMA_CM_EVENT_DEVICE_REMOVAL => {
                    log::info!("cm event {} (disconnected)", ev.kind);
                    let mut inner = lock(&self.inner);
                    // Answers the peer's DREQ with a DREP (a no-op if we sent the DREQ).
                    self.disconnect_locked(&mut inner);
                    inner.cm_events.push_back(CmEvent::Disconnected);
                    self.cm_cv.notify_all();
                }
                Ok(Some(ev)) => log::debug!("cm event {} status {}", ev.kind, ev.status),
                Ok(None) => return Step::Idle,
                Err(e) => {
                    // The channel is broken: nothing more will come from it.
                    log::warn!("cm event error {e}");
                    return Step::Done;
                }
            }
        }
    }
}

/// Sets a Send's opcode: with Invalidate of `invalidate` when given.
fn send_fields(invalidate: Option<u32>) -> impl FnOnce(&mut ibv_send_wr) {
    move |wr| match invalidate {
        None => wr.opcode = ibv_wr_opcode::IBV_WR_SEND,
        Some(rkey) => {
            wr.opcode = ibv_wr_opcode::IBV_WR_SEND_WITH_INV;
            wr.imm_data_invalidated_rkey_union.invalidated_rkey = rkey;
        }
    }
}

/// Sets an RDMA Write's opcode and destination.
fn write_fields(remote: RemoteBuf) -> impl FnOnce(&mut ibv_send_wr) {
    move |wr| {
        wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
        wr.wr.rdma = rdma_t { remote_addr: remote.addr, rkey: remote.rkey };
    }
}

impl QueuePair for RdmaQp {
    type Region = RdmaRegion;

    fn post_recv(&self, wr_id: u64, sge: Sge<'_, RdmaRegion>) -> Result<()> {
        let (mut list, _) = self.s.sg_list(&[sge])?;
        let mut inner = lock(&self.s.inner);
        if inner.recv_outstanding >= self.s.caps.max_recv_wr {
            return Err(Error::QueueFull);
        }
        if inner.error {
            self.s.push_synthetic(&mut inner, Completion::new(wr_id, Status::WorkRequestFlushed, Opcode::Recv, 0));
            return Ok(());
        }
        let seq = inner.next_seq;
        let mut wr = ibv_recv_wr { wr_id: seq, next: std::ptr::null_mut(), sg_list: list.as_mut_ptr(), num_sge: 1 };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live; `wr` and its one sge are valid for the call; the region is
        // kept alive by `Pending` until the completion is reaped.
        let rc = unsafe { ibv_post_recv(self.s.conn.qp().0, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(if rc == libc::ENOMEM { Error::QueueFull } else { os_error("ibv_post_recv", rc) });
        }
        inner.next_seq += 1;
        inner.recv_outstanding += 1;
        let regions = vec![sge.region.clone()];
        inner.pending.insert(seq, Pending { wr_id, opcode: Opcode::Recv, len: 0, window: None, _regions: regions });
        Ok(())
    }

    fn post_send(&self, wr_id: u64, sges: &[Sge<'_, RdmaRegion>], invalidate: Option<u32>) -> Result<()> {
        self.post_send_with(wr_id, sges, invalidate, SendFlags::SIGNALED)
    }

    fn post_send_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, RdmaRegion>],
        invalidate: Option<u32>,
        flags: SendFlags,
    ) -> Result<()> {
        self.s.post_sq(wr_id, Opcode::Send, sges, flags, send_fields(invalidate))
    }

    fn post_write(&self, wr_id: u64, sges: &[Sge<'_, RdmaRegion>], remote: RemoteBuf) -> Result<()> {
        self.post_write_with(wr_id, sges, remote, SendFlags::SIGNALED)
    }

    fn post_write_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, RdmaRegion>],
        remote: RemoteBuf,
        flags: SendFlags,
    ) -> Result<()> {
        self.s.post_sq(wr_id, Opcode::RdmaWrite, sges, flags, write_fields(remote))
    }

    fn post_read(&self, wr_id: u64, sges: &[Sge<'_, RdmaRegion>], remote: RemoteBuf) -> Result<()> {
        self.s.post_sq(wr_id, Opcode::RdmaRead, sges, SendFlags::SIGNALED, |wr| {
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_READ;
            wr.wr.rdma = rdma_t { remote_addr: remote.addr, rkey: remote.rkey };
        })
    }

    /// A window this queue pair bound gets a real `IBV_WR_LOCAL_INV`. Otherwise deregisters
    /// the region with `rkey` in this queue pair's protection domain (plain MRs cannot take
    /// `IBV_WR_LOCAL_INV`; see the module documentation) and queues its completion: success,
    /// or [`Status::LocalProtectionError`] (which tears the connection down) when no live
    /// region here has that rkey.
    fn post_local_invalidate(&self, wr_id: u64, rkey: u32) -> Result<()> {
        self.post_local_invalidate_with(wr_id, rkey, SendFlags::SIGNALED)
    }

    /// As [`post_local_invalidate`](QueuePair::post_local_invalidate); the software
    /// invalidation of a region completes at once, not after the work requests before it.
    fn post_local_invalidate_with(&self, wr_id: u64, rkey: u32, flags: SendFlags) -> Result<()> {
        let mut inner = lock(&self.s.inner);
        if inner.windows.contains_key(&rkey) {
            let built = self.s.build(wr_id, Opcode::LocalInvalidate, &[], Some(rkey), flags, |wr| {
                wr.opcode = ibv_wr_opcode::IBV_WR_LOCAL_INV;
                wr.imm_data_invalidated_rkey_union.invalidated_rkey = rkey;
            })?;
            return self.s.post_sq_locked(inner, built);
        }
        if inner.send_outstanding >= self.s.caps.max_send_wr {
            return Err(Error::QueueFull);
        }
        let status = if inner.error {
            Status::WorkRequestFlushed
        } else if self.s.pd.invalidate(rkey) {
            Status::Success
        } else {
            self.s.disconnect_locked(&mut inner);
            Status::LocalProtectionError
        };
        if status != Status::Success || flags.contains(SendFlags::SIGNALED) {
            self.s.push_synthetic(&mut inner, Completion::new(wr_id, status, Opcode::LocalInvalidate, 0));
        }
        Ok(())
    }

    /// `ibv_alloc_mw` (type 2) and `IBV_WR_BIND_MW` with the next key of that window
    /// (`ibv_inc_rkey`), which is the rkey returned.
    fn post_bind_window(
        &self,
        wr_id: u64,
        region: &RdmaRegion,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<RemoteBuf> {
        self.post_bind_window_with(wr_id, region, offset, len, access, SendFlags::SIGNALED)
    }

    fn post_bind_window_with(
        &self,
        wr_id: u64,
        region: &RdmaRegion,
        offset: usize,
        len: usize,
        access: Access,
        flags: SendFlags,
    ) -> Result<RemoteBuf> {
        check_window(region, offset, len, access)?;
        let addr = region.addr() + offset as u64;
        // SAFETY: the PD is live (the queue pair holds it).
        let mw = unsafe { ibv_alloc_mw(self.s.pd.pd.0, ibv_mw_type::IBV_MW_TYPE_2) }.unwrap_or(std::ptr::null_mut());
        if mw.is_null() {
            return Err(os_error("ibv_alloc_mw", ffi::errno()));
        }
        // SAFETY: `mw` was just allocated; its initial key is readable.
        let rkey = unsafe { ibv_inc_rkey((*mw).rkey) };
        // A deregistered region: the bind fails on the device with a null MR, as it should.
        let mr = region.0.mr().unwrap_or(Ptr::null());
        let mut inner = lock(&self.s.inner);
        inner.windows.insert(rkey, (Ptr(mw), region.clone()));
        let built = self.s.build(wr_id, Opcode::BindWindow, &[], None, flags, |wr| {
            wr.opcode = ibv_wr_opcode::IBV_WR_BIND_MW;
            wr.bind_mw_tso_union.bind_mw = bind_mw_t {
                mw,
                rkey,
                bind_info: ibv_mw_bind_info { mr: mr.0, addr, length: len as u64, mw_access_flags: access.bits() },
            };
        });
        let posted = built.and_then(|built| self.s.post_sq_locked(inner, built));
        if let Err(e) = posted {
            Shared::free_window(&mut lock(&self.s.inner), rkey);
            return Err(e);
        }
        Ok(RemoteBuf { addr, rkey })
    }

    /// The work requests linked in one `ibv_post_send`: one doorbell (on rdma_rxe one system
    /// call) for a reply's Writes and Send.
    fn post_chain(&self, wrs: &[WorkRequest<'_, RdmaRegion>]) -> std::result::Result<(), ChainError> {
        let mut built = Vec::with_capacity(wrs.len());
        // A work request that cannot be built (its scatter/gather list) ends the chain there.
        let mut unbuilt = None;
        for wr in wrs {
            let b = match *wr {
                WorkRequest::Write { wr_id, sges, remote, flags } => {
                    self.s.build(wr_id, Opcode::RdmaWrite, sges, None, flags, write_fields(remote))
                }
                WorkRequest::Send { wr_id, sges, invalidate, flags } => {
                    self.s.build(wr_id, Opcode::Send, sges, None, flags, send_fields(invalidate))
                }
            };
            match b {
                Ok(b) => built.push(b),
                Err(e) => {
                    unbuilt = Some(e);
                    break;
                }
            }
        }
        let (posted, refused) = self.s.post_built(&mut lock(&self.s.inner), &mut built);
        match refused.or(unbuilt) {
            None => Ok(()),
            Some(error) => Err(ChainError { posted, error }),
        }
    }

    fn caps(&self) -> QpCaps {
        self.s.caps
    }

    fn poll_cq(&self, out: &mut [Completion]) -> usize {
        self.s.reap(out)
    }

    /// Polls; when nothing is there, arms the CQ, polls again, and sleeps on the completion
    /// channel (and the wake eventfd) for what is left of `timeout`.
    fn wait_cq(&self, timeout: Duration) -> Option<Completion> {
        let deadline = Instant::now().checked_add(timeout);
        let mut c = [Completion::default()];
        loop {
            if self.s.reap(&mut c) == 1 {
                return Some(c[0]);
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return None;
            }
            if !self.s.arm() {
                self.s.conn.cq().sleep(left);
            }
        }
    }

    /// The epoll fd that watches the CQ's completion channel and the backend's own
    /// completions (see [`QueuePair::completion_fd`]).
    fn completion_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.s.conn.cq().fd())
    }

    fn req_notify_cq(&self) -> bool {
        self.s.arm()
    }

    /// Arms the CQ and hands its fd to the process's readiness loop, which wakes `waker` at
    /// the next completion (the channel's event, or a completion the backend made itself).
    fn arm_waker(&self, waker: &Waker) -> Arm {
        let Ok(r) = reactor::reactor() else { return Arm::Unsupported };
        if !self.watch.registered.swap(true, Ordering::AcqRel) && r.add(self.watch.token, self.watch.clone()).is_err() {
            self.watch.registered.store(false, Ordering::Release);
            return Arm::Unsupported;
        }
        // The slot stays locked while the CQ is re-armed: a completion meanwhile makes the
        // readiness loop wait for this decision, and then wake whichever waker it left armed
        // (a readiness before the lock was taken found the earlier one, and the re-arm below
        // finds its completions: Waiting).
        let mut slot = lock(&self.watch.waker);
        if self.s.arm() {
            // Completions wait already: the caller polls them. The waker armed before stays
            // armed, as the software backends leave it (`Queues::arm`): whoever armed it
            // counts on being woken by the next completion (a lane's one armed task), and
            // this caller's arming did not happen.
            return Arm::Waiting;
        }
        *slot = Some(waker.clone());
        Arm::Armed
    }

    fn cm_event(&self, timeout: Duration) -> Option<CmEvent> {
        let deadline = Instant::now() + timeout;
        let mut inner = lock(&self.s.inner);
        loop {
            if let Some(e) = inner.cm_events.pop_front() {
                return Some(e);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            inner = self.s.cm_cv.wait_timeout(inner, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    fn state(&self) -> QpState {
        if lock(&self.s.inner).error {
            QpState::Error
        } else {
            QpState::Ready
        }
    }

    fn disconnect(&self) {
        let mut inner = lock(&self.s.inner);
        self.s.disconnect_locked(&mut inner);
    }
}

impl Drop for RdmaQp {
    fn drop(&mut self) {
        // Out of the readiness loop while the CQ's fd is still open.
        if self.watch.registered.load(Ordering::Acquire) {
            if let Ok(r) = reactor::reactor() {
                r.remove(self.watch.token);
            }
        }
        // The same for the CM event channel.
        if let (Some(token), Ok(r)) = (self.cm_watch, reactor::reactor()) {
            r.remove(token);
        }
        self.disconnect();
        let mut inner = lock(&self.s.inner);
        for rkey in inner.windows.keys().copied().collect::<Vec<_>>() {
            Shared::free_window(&mut inner, rkey);
        }
        // The last `Arc<Shared>` goes now: `conn` destroys QP, CQ, id and channel, then
        // `inner.pending` releases the regions, when the device no longer touches them.
    }
}
