//! The in-process reliable-connected queue pair.
//!
//! Every work request executes synchronously at post time, under the connection's lock,
//! against the peer's memory and receive queue, and queues its completions. That makes the
//! verbs ordering rules hold by construction: work requests of one queue pair run in posting
//! order, so every RDMA Write posted before a Send has landed before the Send's Receive
//! completion is even queued; the receiver reaps that completion through the same lock, which
//! orders its later reads of the region after the writes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::lock;
use super::region::{transfer, Fault, InProcPd, InProcRegion, PdShared, Rule};
use super::rules::{self, PostedRecv, Queues, Refusal, UNUSABLE_RECEIVE};
use crate::{
    check_window, Access, CmEvent, Completion, Error, MemoryRegion, Opcode, QpCaps, QpState, QueuePair, RemoteBuf,
    Result, SendFlags, Sge, Status,
};

/// One side of an in-process connection. Dropping it disconnects.
pub struct InProcQp {
    conn: Arc<Conn>,
    me: usize,
    /// A copy of this side's caps, so checks that need no shared state take no lock.
    caps: QpCaps,
}

struct Conn {
    st: Mutex<ConnState>,
    /// Signals new completions and CM events, one per side: a work request wakes only the
    /// side whose queues it filled (one shared one woke both sides' waiters on every post,
    /// a thread switch for nothing on each side that had no new completion).
    cv: [Condvar; 2],
    /// What a poller asks most often, mirrored out of `st` so that asking takes no lock: both
    /// sides' threads poll one connection, and each lock they take for nothing is one the
    /// other may find held (a client's `poll_cq` and `state` were a fifth of its thread's time
    /// in the async load, much of it spinning on this lock).
    mirror: Mirror,
}

/// Copies of [`ConnState`] fields, written only under its lock, before it is released
/// ([`Conn::publish`]): whenever the lock is free they equal the fields. A reader without
/// the lock sees them as of some moment, which for a poll is the same as polling at that
/// moment; every wait re-checks under the lock, so none misses what was published after it.
struct Mirror {
    connected: AtomicBool,
    /// Completions queued on each side's completion queue.
    queued: [AtomicUsize; 2],
}

struct ConnState {
    connected: bool,
    sides: [Side; 2],
    /// The sides given a completion or an event since the last wake-up.
    to_wake: [bool; 2],
    /// The threads asleep on each side's condition variable: a side with none is not
    /// signalled (a futex wake with no sleeper is still a system call, on every post).
    sleepers: [u32; 2],
}

struct Side {
    /// Names this queue pair to the windows it binds.
    qp: u64,
    pd: Arc<PdShared>,
    caps: QpCaps,
    rq: VecDeque<PostedRecv>,
    /// Completions; a send-queue one holds its slot from when it is queued until reaped.
    q: Queues,
    events: VecDeque<CmEvent>,
}

impl ConnState {
    fn complete(&mut self, side: usize, c: Completion) {
        self.complete_wr(side, c, SendFlags::SIGNALED);
    }

    /// Completes a work request posted with `flags`: a successful unsignaled one queues
    /// nothing and wakes nobody, but holds its send-queue slot ([`Queues::push_wr`]).
    fn complete_wr(&mut self, side: usize, c: Completion, flags: SendFlags) {
        let q = &mut self.sides[side].q;
        if c.opcode.is_send_queue() {
            q.sq_outstanding += 1;
        }
        if q.push_wr(c, flags) {
            self.to_wake[side] = true;
        }
    }

    /// Tears the connection down: both sides to Error, posted Receives flushed, one
    /// Disconnected event each. Idempotent.
    fn fail(&mut self) {
        if !std::mem::replace(&mut self.connected, false) {
            return;
        }
        for side in 0..2 {
            while let Some(r) = self.sides[side].rq.pop_front() {
                self.complete(side, Completion::new(r.wr_id, Status::WorkRequestFlushed, Opcode::Recv, 0));
            }
            self.sides[side].events.push_back(CmEvent::Disconnected);
            self.to_wake[side] = true;
        }
    }

    /// Queues an error completion for `me` and tears the connection down.
    fn fatal(&mut self, me: usize, wr_id: u64, status: Status, opcode: Opcode) {
        self.complete(me, Completion::new(wr_id, status, opcode, 0));
        self.fail();
    }
}

impl Conn {
    /// Copies what [`Mirror`] holds out of `st`, whose lock the caller holds. The queues'
    /// lengths go first: a reader that sees `connected` false sees the flushes that came with
    /// it.
    fn publish(&self, st: &ConnState) {
        for (side, queued) in self.mirror.queued.iter().enumerate() {
            queued.store(st.sides[side].q.len(), Ordering::Release);
        }
        self.mirror.connected.store(st.connected, Ordering::Release);
    }

    /// Unlocks, then wakes the waiters of each side given something under the lock.
    fn wake(&self, mut st: MutexGuard<'_, ConnState>) {
        let mut to_wake = std::mem::take(&mut st.to_wake);
        // Read under the lock: a thread about to sleep has counted itself before it
        // released the lock in its wait, so none is missed.
        for (side, wake) in to_wake.iter_mut().enumerate() {
            *wake &= st.sleepers[side] > 0;
        }
        let fired = [st.sides[0].q.take_fired(), st.sides[1].q.take_fired()];
        self.publish(&st);
        drop(st);
        for (side, cv) in self.cv.iter().enumerate() {
            if to_wake[side] {
                cv.notify_all();
            }
        }
        for waker in fired.into_iter().flatten() {
            waker.wake();
        }
    }
}

pub(crate) fn connect_pair(a: &InProcPd, a_caps: QpCaps, b: &InProcPd, b_caps: QpCaps) -> (InProcQp, InProcQp) {
    let side = |pd: &InProcPd, caps| Side {
        qp: super::keys::next_id(),
        pd: pd.0.clone(),
        caps,
        rq: VecDeque::new(),
        q: Queues::default(),
        events: VecDeque::new(),
    };
    let conn = Arc::new(Conn {
        st: Mutex::new(ConnState {
            connected: true,
            sides: [side(a, a_caps), side(b, b_caps)],
            to_wake: [false; 2],
            sleepers: [0; 2],
        }),
        cv: [Condvar::new(), Condvar::new()],
        mirror: Mirror { connected: AtomicBool::new(true), queued: [AtomicUsize::new(0), AtomicUsize::new(0)] },
    });
    (InProcQp { conn: conn.clone(), me: 0, caps: a_caps }, InProcQp { conn, me: 1, caps: b_caps })
}

impl InProcQp {
    /// Locks the connection for a send-queue work request: refuses it if the send queue is
    /// full, and flushes it (returning `None`) if the connection is down.
    fn begin_send(&self, wr_id: u64, opcode: Opcode) -> Result<Option<MutexGuard<'_, ConnState>>> {
        let mut st = lock(&self.conn.st);
        let side = &st.sides[self.me];
        if side.q.sq_outstanding >= side.caps.max_send_wr {
            return Err(Error::QueueFull);
        }
        if !st.connected {
            st.complete(self.me, Completion::new(wr_id, Status::WorkRequestFlushed, opcode, 0));
            self.conn.wake(st);
            return Ok(None);
        }
        Ok(Some(st))
    }

    fn local_ok(&self, st: &ConnState, sges: &[Sge<'_, InProcRegion>], write: bool) -> bool {
        rules::local_sges_ok(sges, st.sides[self.me].pd.id, write)
    }

    /// The common path of RDMA Write and Read: resolve and bounds-check the remote range as a
    /// whole (so nothing moves unless all of it is inside the region), then move each SGE.
    fn rdma(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, InProcRegion>],
        remote: RemoteBuf,
        opcode: Opcode,
        flags: SendFlags,
    ) -> Result<()> {
        let me = self.me;
        let total = rules::total_len(sges, self.caps.max_sge)?;
        let Some(mut st) = self.begin_send(wr_id, opcode)? else { return Ok(()) };
        let write = opcode == Opcode::RdmaWrite;
        // Local faults are the requester's and are detected before anything reaches the wire.
        if !self.local_ok(&st, sges, !write) {
            st.fatal(me, wr_id, Status::LocalProtectionError, opcode);
            return self.finish(st);
        }
        let peer = &st.sides[1 - me];
        let target = match rules::rdma_target(&peer.pd, peer.qp, remote, total as usize, write) {
            Ok(target) => target,
            Err(status) => {
                st.fatal(me, wr_id, status, opcode);
                return self.finish(st);
            }
        };
        if let Some((target, base)) = target {
            let local = Rule::Local { pd: st.sides[me].pd.id, write: !write };
            let remote_rule = Rule::Remote;
            let mut at = base;
            for s in sges {
                let r = if write {
                    transfer(&s.region.0, s.offset, local, &target, at, remote_rule, s.len).map_err(|f| {
                        if f == Fault::Src {
                            Status::LocalProtectionError
                        } else {
                            Status::RemoteAccessError
                        }
                    })
                } else {
                    transfer(&target, at, remote_rule, &s.region.0, s.offset, local, s.len).map_err(|f| {
                        if f == Fault::Dst {
                            Status::LocalProtectionError
                        } else {
                            Status::RemoteAccessError
                        }
                    })
                };
                if let Err(status) = r {
                    st.fatal(me, wr_id, status, opcode);
                    return self.finish(st);
                }
                at += s.len;
            }
        }
        st.complete_wr(me, Completion::new(wr_id, Status::Success, opcode, total), flags);
        self.finish(st)
    }

    fn finish(&self, st: MutexGuard<'_, ConnState>) -> Result<()> {
        self.conn.wake(st);
        Ok(())
    }

    /// Waits on this side's condvar until `take` yields something or `timeout` passes.
    fn wait_for<T>(&self, timeout: Duration, take: impl FnMut(&mut ConnState) -> Option<T>) -> Option<T> {
        let me = self.me;
        rules::wait_for(&self.conn.st, &self.conn.cv[me], timeout, |st| &mut st.sleepers[me], take)
    }
}

impl QueuePair for InProcQp {
    type Region = InProcRegion;

    fn post_recv(&self, wr_id: u64, sge: Sge<'_, InProcRegion>) -> Result<()> {
        let mut st = lock(&self.conn.st);
        let side = &mut st.sides[self.me];
        if side.rq.len() >= side.caps.max_recv_wr as usize {
            return Err(Error::QueueFull);
        }
        let r = PostedRecv::new(wr_id, sge)?;
        if st.connected {
            st.sides[self.me].rq.push_back(r);
            return Ok(());
        }
        st.complete(self.me, Completion::new(wr_id, Status::WorkRequestFlushed, Opcode::Recv, 0));
        self.finish(st)
    }

    fn post_send(&self, wr_id: u64, sges: &[Sge<'_, InProcRegion>], invalidate: Option<u32>) -> Result<()> {
        self.post_send_with(wr_id, sges, invalidate, SendFlags::SIGNALED)
    }

    fn post_send_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, InProcRegion>],
        invalidate: Option<u32>,
        flags: SendFlags,
    ) -> Result<()> {
        let (me, peer) = (self.me, 1 - self.me);
        let total = rules::total_len(sges, self.caps.max_sge)?;
        let Some(mut st) = self.begin_send(wr_id, Opcode::Send)? else { return Ok(()) };
        if !self.local_ok(&st, sges, false) {
            st.fatal(me, wr_id, Status::LocalProtectionError, Opcode::Send);
            return self.finish(st);
        }
        let refuse = |st: &mut ConnState, recv: Option<PostedRecv>, r: Refusal| {
            if let (Some(recv), Some(status)) = (recv, r.recv) {
                st.complete(peer, Completion::new(recv.wr_id, status, Opcode::Recv, 0));
            }
            st.fatal(me, wr_id, r.sender, Opcode::Send);
        };
        let side = &st.sides[peer];
        if let Err(r) = rules::admit_send(side.rq.front(), total as usize, invalidate, &side.pd, side.qp) {
            let recv = st.sides[peer].rq.pop_front();
            refuse(&mut st, recv, r);
            return self.finish(st);
        }
        let recv = st.sides[peer].rq.pop_front().expect("admitted: a Receive is posted");
        let src_rule = Rule::Local { pd: st.sides[me].pd.id, write: false };
        let dst_rule = PostedRecv::rule(&st.sides[peer].pd);
        let mut at = recv.offset;
        for s in sges {
            if let Err(f) = transfer(&s.region.0, s.offset, src_rule, &recv.region, at, dst_rule, s.len) {
                // Only reachable if a region was invalidated or deregistered concurrently.
                let r = match f {
                    Fault::Src => {
                        Refusal { recv: Some(Status::WorkRequestFlushed), sender: Status::LocalProtectionError }
                    }
                    Fault::Dst => UNUSABLE_RECEIVE,
                };
                refuse(&mut st, Some(recv), r);
                return self.finish(st);
            }
            at += s.len;
        }
        st.complete(peer, recv.received(total as usize, invalidate));
        st.complete_wr(me, Completion::new(wr_id, Status::Success, Opcode::Send, total), flags);
        self.finish(st)
    }

    fn post_write(&self, wr_id: u64, sges: &[Sge<'_, InProcRegion>], remote: RemoteBuf) -> Result<()> {
        self.post_write_with(wr_id, sges, remote, SendFlags::SIGNALED)
    }

    fn post_write_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, InProcRegion>],
        remote: RemoteBuf,
        flags: SendFlags,
    ) -> Result<()> {
        self.rdma(wr_id, sges, remote, Opcode::RdmaWrite, flags)
    }

    fn post_read(&self, wr_id: u64, sges: &[Sge<'_, InProcRegion>], remote: RemoteBuf) -> Result<()> {
        self.rdma(wr_id, sges, remote, Opcode::RdmaRead, SendFlags::SIGNALED)
    }

    fn post_local_invalidate(&self, wr_id: u64, rkey: u32) -> Result<()> {
        self.post_local_invalidate_with(wr_id, rkey, SendFlags::SIGNALED)
    }

    fn post_local_invalidate_with(&self, wr_id: u64, rkey: u32, flags: SendFlags) -> Result<()> {
        let Some(mut st) = self.begin_send(wr_id, Opcode::LocalInvalidate)? else { return Ok(()) };
        let side = &st.sides[self.me];
        if side.pd.invalidate_local(rkey, side.qp) {
            st.complete_wr(self.me, Completion::new(wr_id, Status::Success, Opcode::LocalInvalidate, 0), flags);
        } else {
            st.fatal(self.me, wr_id, Status::LocalProtectionError, Opcode::LocalInvalidate);
        }
        self.finish(st)
    }

    fn post_bind_window(
        &self,
        wr_id: u64,
        region: &InProcRegion,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<RemoteBuf> {
        self.post_bind_window_with(wr_id, region, offset, len, access, SendFlags::SIGNALED)
    }

    fn post_bind_window_with(
        &self,
        wr_id: u64,
        region: &InProcRegion,
        offset: usize,
        len: usize,
        access: Access,
        flags: SendFlags,
    ) -> Result<RemoteBuf> {
        check_window(region, offset, len, access)?;
        // What a bind that fails or is flushed returns: a fresh key that names nothing.
        let remote = RemoteBuf { addr: region.addr() + offset as u64, rkey: super::keys::next_key() };
        let Some(mut st) = self.begin_send(wr_id, Opcode::BindWindow)? else { return Ok(remote) };
        let side = &st.sides[self.me];
        match side.pd.bind_window(region, offset, len, access, side.qp) {
            Some(window) => {
                st.complete_wr(self.me, Completion::new(wr_id, Status::Success, Opcode::BindWindow, 0), flags);
                self.finish(st)?;
                Ok(window)
            }
            None => {
                st.fatal(self.me, wr_id, Status::LocalProtectionError, Opcode::BindWindow);
                self.finish(st)?;
                Ok(remote)
            }
        }
    }

    /// Sends and RDMA Writes are copied as they are posted.
    fn memory_read_at_post(&self) -> bool {
        true
    }

    fn caps(&self) -> QpCaps {
        self.caps
    }

    fn poll_cq(&self, out: &mut [Completion]) -> usize {
        if self.conn.mirror.queued[self.me].load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut st = lock(&self.conn.st);
        let n = st.sides[self.me].q.poll(out);
        self.conn.publish(&st);
        n
    }

    fn wait_cq(&self, timeout: Duration) -> Option<Completion> {
        self.wait_for(timeout, |st| {
            let c = st.sides[self.me].q.pop();
            if c.is_some() {
                self.conn.publish(st);
            }
            c
        })
    }

    fn arm_waker(&self, waker: &std::task::Waker) -> crate::Arm {
        // Completions queued already: nothing to arm (`Queues::arm` says the same, locked).
        if self.conn.mirror.queued[self.me].load(Ordering::Acquire) > 0 {
            return crate::Arm::Waiting;
        }
        lock(&self.conn.st).sides[self.me].q.arm(waker)
    }

    fn cm_event(&self, timeout: Duration) -> Option<CmEvent> {
        self.wait_for(timeout, |st| st.sides[self.me].events.pop_front())
    }

    fn state(&self) -> QpState {
        if self.conn.mirror.connected.load(Ordering::Acquire) {
            QpState::Ready
        } else {
            QpState::Error
        }
    }

    fn disconnect(&self) {
        let mut st = lock(&self.conn.st);
        st.fail();
        self.conn.wake(st);
    }
}

impl Drop for InProcQp {
    fn drop(&mut self) {
        self.disconnect();
        let (pd, qp) = {
            let st = lock(&self.conn.st);
            (st.sides[self.me].pd.clone(), st.sides[self.me].qp)
        };
        pd.unbind_all(qp);
    }
}

impl std::fmt::Debug for InProcQp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcQp").field("side", &self.me).field("state", &self.state()).finish()
    }
}
