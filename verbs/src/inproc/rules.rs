//! The verbs rules the two software backends enforce, each written once: the in-process
//! backend applies them at post time against the peer's memory, the TCP backend's reader
//! thread applies them when the peer's frame arrives. Registration itself (protection domains,
//! keys, windows, the byte-moving `transfer`) is `region`'s, beside it; the queues and the
//! waiting are [`Queues`].
//!
//! The statuses follow the crate's [`Status`] documentation, which follows the InfiniBand
//! responder rules (IBA 9.7.5): a refused Send fails the sender with the status the responder's
//! NAK carries and, where a Receive was consumed, that Receive too.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use super::region::{check, InProcRegion, PdShared, RegionInner, Rule};
use crate::{lock, Arm, Completion, Error, RemoteBuf, Result, SendFlags, Sge, Status};

/// A Receive waiting for a Send: `len` bytes at `offset` of `region`, validated only when a
/// Send lands in it, as hardware does.
pub(crate) struct PostedRecv {
    pub(crate) wr_id: u64,
    pub(crate) region: Arc<RegionInner>,
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

impl PostedRecv {
    /// The Receive `sge` posts under `wr_id`; its length must fit the verbs byte count.
    pub(crate) fn new(wr_id: u64, sge: Sge<'_, InProcRegion>) -> Result<PostedRecv> {
        u32::try_from(sge.len).map_err(|_| Error::TooLong)?;
        Ok(PostedRecv { wr_id, region: sge.region.0.clone(), offset: sge.offset, len: sge.len })
    }

    /// Its successful completion for a Send of `len` bytes that invalidated `invalidated`.
    pub(crate) fn received(&self, len: usize, invalidated: Option<u32>) -> Completion {
        let mut c = Completion::new(self.wr_id, Status::Success, crate::Opcode::Recv, len as u32);
        c.invalidated_rkey = invalidated;
        c
    }

    /// The rule its bytes are written under, on the receiver of protection domain `pd`.
    pub(crate) fn rule(pd: &PdShared) -> Rule {
        Rule::Local { pd: pd.id, write: true }
    }
}

/// Why a Send was refused: the status of the Receive it consumed (none when no Receive was
/// posted) and the status the sender's work request completes with. Either way the
/// connection is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) recv: Option<Status>,
    pub(crate) sender: Status,
}

/// The Receive's memory is unusable (another protection domain, no Local Write, invalidated,
/// out of its region), or the Send with Invalidate named a key the receiver may not
/// invalidate (only a window its queue pair bound; a region's rkey never, as with `ibv_reg_mr`).
pub(crate) const UNUSABLE_RECEIVE: Refusal =
    Refusal { recv: Some(Status::LocalProtectionError), sender: Status::RemoteOperationError };

/// A Send of `len` bytes, invalidating `invalidate`, arriving on queue pair `qp` of protection
/// domain `pd` whose oldest posted Receive is `recv`: Ok when its bytes may land there (the
/// invalidation is then done), else what fails. The bytes themselves land afterwards, under
/// the region's lock, rechecked there with [`PostedRecv::rule`]: a failure then is
/// [`UNUSABLE_RECEIVE`].
pub(crate) fn admit_send(
    recv: Option<&PostedRecv>,
    len: usize,
    invalidate: Option<u32>,
    pd: &PdShared,
    qp: u64,
) -> Result<(), Refusal> {
    // No Receive posted, and rnr_retry_count is 0: the sender gives up at once.
    let recv = recv.ok_or(Refusal { recv: None, sender: Status::RnrRetryExceeded })?;
    if len > recv.len {
        return Err(Refusal { recv: Some(Status::LocalLengthError), sender: Status::RemoteInvalidRequest });
    }
    if len > 0 && !check(&recv.region, recv.offset, len, PostedRecv::rule(pd)) {
        return Err(UNUSABLE_RECEIVE);
    }
    if invalidate.is_some_and(|rkey| !pd.invalidate_remote(rkey, qp)) {
        return Err(UNUSABLE_RECEIVE);
    }
    Ok(())
}

/// The target of an RDMA Write (`write`) or Read of `len` bytes at `remote`, arriving on queue
/// pair `qp` of protection domain `pd`: the region and the offset in it, or `None` for a
/// zero-length operation, which does not validate the rkey (IBA 9.4.3, 9.4.4). An unknown or
/// invalidated rkey, a range outside the region or window, or a right not granted is
/// [`Status::RemoteAccessError`]. The bytes move afterwards under [`Rule::Remote`].
pub(crate) fn rdma_target(
    pd: &PdShared,
    qp: u64,
    remote: RemoteBuf,
    len: usize,
    write: bool,
) -> Result<Option<(Arc<RegionInner>, usize)>, Status> {
    if len == 0 {
        return Ok(None);
    }
    let need = if write { crate::Access::REMOTE_WRITE } else { crate::Access::REMOTE_READ };
    pd.resolve(remote.rkey, remote.addr, len, need, qp).map(Some).ok_or(Status::RemoteAccessError)
}

/// Whether every local scatter/gather entry is usable by a queue pair of protection domain
/// `pd`: registered there, alive, in range, and with Local Write where the operation writes
/// into it (a Receive, an RDMA Read's destination). Else the work request fails with
/// [`Status::LocalProtectionError`] before anything reaches the peer.
pub(crate) fn local_sges_ok(sges: &[Sge<'_, InProcRegion>], pd: u64, write: bool) -> bool {
    sges.iter().all(|s| check(&s.region.0, s.offset, s.len, Rule::Local { pd, write }))
}

/// Total length of `sges`, at most `max_sge` of them, which must fit the 32-bit verbs byte
/// count (`ibv_post_send`'s `EINVAL` and the crate's [`Error::TooLong`]).
pub(crate) fn total_len(sges: &[Sge<'_, InProcRegion>], max_sge: u32) -> Result<u32> {
    if sges.len() > max_sge as usize {
        return Err(Error::TooManySges(sges.len()));
    }
    let total = sges.iter().try_fold(0usize, |acc, s| acc.checked_add(s.len)).ok_or(Error::TooLong)?;
    u32::try_from(total).map_err(|_| Error::TooLong)
}

/// The completion queue of a software queue pair, and the count of send-queue work requests
/// that hold a slot until a completion covering them is reaped (`max_send_wr`).
///
/// Selective signaling is written here once for both software backends (IBA 10.8.6.1, "Send
/// Queue Completion", and `ibv_post_send(3)`, `IBV_SEND_SIGNALED`): a send-queue work request
/// that succeeds unsignaled queues no completion, and its slot stays held until the next
/// completion queued on the send queue (signaled, or an error, which every work request
/// reports) is reaped, since that completion says every work request before it has completed.
#[derive(Default)]
pub(crate) struct Queues {
    /// Completions, each with the send-queue slots reaping it frees: its own and those of the
    /// unsignaled work requests it covers (none for a Receive's).
    cq: VecDeque<(Completion, u32)>,
    /// Send-queue slots held: by work requests not yet completed (TCP), or completed and not
    /// yet covered by a reaped completion.
    pub(crate) sq_outstanding: u32,
    /// Unsignaled work requests that succeeded since the last send-queue completion queued.
    uncovered: u32,
    /// Completions queued so far.
    queued: u64,
    /// The waker [`QueuePair::arm_waker`](crate::QueuePair::arm_waker) registered, until a
    /// completion is queued.
    armed: Option<Waker>,
    /// The armed waker a completion fired, for the backend to wake once it has unlocked.
    fired: Option<Waker>,
}

impl Queues {
    /// Queues `c`, a Receive's completion or a send-queue one reported whatever its flags (a
    /// failure, a flush).
    pub(crate) fn push(&mut self, c: Completion) {
        let slots = if c.opcode.is_send_queue() { 1 + std::mem::take(&mut self.uncovered) } else { 0 };
        self.cq.push_back((c, slots));
        self.queued += 1;
        if let Some(w) = self.armed.take() {
            self.fired = Some(w);
        }
    }

    /// Arms `waker` for the next completion queued ([`QueuePair::arm_waker`](crate::QueuePair::arm_waker)),
    /// replacing any armed before, unless completions are queued already.
    pub(crate) fn arm(&mut self, waker: &Waker) -> Arm {
        if !self.cq.is_empty() {
            return Arm::Waiting;
        }
        match &mut self.armed {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        Arm::Armed
    }

    /// The waker a completion fired since the last call: wake it once the lock is released.
    pub(crate) fn take_fired(&mut self) -> Option<Waker> {
        self.fired.take()
    }

    /// How many completions were ever queued: a waiter need only be woken when it changed.
    pub(crate) fn queued(&self) -> u64 {
        self.queued
    }

    /// A send-queue work request posted with `flags` finished with `c`: queued if signaled or
    /// failed; a successful unsignaled one queues nothing, and a later completion frees its
    /// slot. True if `c` was queued (its waiters need waking).
    pub(crate) fn push_wr(&mut self, c: Completion, flags: SendFlags) -> bool {
        if c.is_ok() && !flags.contains(SendFlags::SIGNALED) {
            self.uncovered += 1;
            return false;
        }
        self.push(c);
        true
    }

    /// The oldest completion, freeing the send-queue slots it covers.
    pub(crate) fn pop(&mut self) -> Option<Completion> {
        let (c, slots) = self.cq.pop_front()?;
        self.sq_outstanding -= slots;
        Some(c)
    }

    /// How many completions are queued.
    pub(crate) fn len(&self) -> usize {
        self.cq.len()
    }

    /// Moves up to `out.len()` completions into `out`; how many.
    pub(crate) fn poll(&mut self, out: &mut [Completion]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let Some(c) = self.pop() else { break };
            out[n] = c;
            n += 1;
        }
        n
    }
}

/// Waits on `cv` (which whoever changes `state` signals) until `take` yields something or
/// `timeout` passes; a timeout too long to represent waits in hour-long steps. `sleepers` is
/// the count in `state` of threads asleep on `cv`, which a signaller reads under the lock to
/// skip the notify (a system call) when nobody sleeps.
pub(crate) fn wait_for<S, T>(
    state: &Mutex<S>,
    cv: &Condvar,
    timeout: Duration,
    mut sleepers: impl FnMut(&mut S) -> &mut u32,
    mut take: impl FnMut(&mut S) -> Option<T>,
) -> Option<T> {
    let mut st = lock(state);
    if let Some(v) = take(&mut st) {
        return Some(v);
    }
    // Only a wait that sleeps reads the clock: a poll with nothing there costs none.
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let left = match deadline {
            Some(d) => d.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?,
            None => Duration::from_secs(3600),
        };
        // Counted while the lock is held, until it is held again: whoever signals `cv` may
        // skip it when nobody sleeps.
        *sleepers(&mut st) += 1;
        st = cv.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
        *sleepers(&mut st) -= 1;
        if let Some(v) = take(&mut st) {
            return Some(v);
        }
    }
}
