//! The TCP queue pair: frames written in posting order by whichever thread posts (or, when the
//! socket is full, by the process's readiness loop), and the peer's frames applied in stream
//! order by that loop ([`crate::reactor`]) against this side's registrations, the peer's
//! answers turned into completions. No thread of its own: a connection costs a socket.

mod inbound;
mod offered;

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::frame::{self, Head, NakCode};
use super::{lock, TcpPd, TcpRegion};
use crate::batch;
use crate::inproc::region::Rule;
use crate::inproc::rules::{self, PostedRecv, Queues};
use crate::reactor::{self, Source, Step};
use crate::{
    check_window, Access, ChainError, CmEvent, Completion, Error, MemoryRegion, Opcode, QpCaps, QpState, QueuePair,
    RemoteBuf, Result, SendFlags, Sge, Status, WorkRequest,
};
use inbound::Inbound;
use offered::Offered;
pub(super) use offered::OFFER_MOST;

/// Writes to a socket that moved bytes, by every queue pair of the process ([`super::socket_writes`]).
pub(super) static SOCKET_WRITES: AtomicU64 = AtomicU64::new(0);

/// Offers taken, process-wide ([`super::offers_taken`]).
pub(super) static OFFERS_TAKEN: AtomicU64 = AtomicU64::new(0);
/// Offers passed over before they were taken, process-wide ([`super::offers_passed_over`]).
pub(super) static OFFERS_PASSED_OVER: AtomicU64 = AtomicU64::new(0);
#[cfg(test)]
pub(super) use offered::HELD_BYTES;

/// Answers (ACK runs, Read responses) queued for the peer at most, and the Read-response bytes
/// among them: the peer's outstanding requests, which a peer within its own send queue never
/// exceeds (hardware bounds incoming Reads the same way, by `max_dest_rd_atomic`). A peer that
/// floods requests and never reads our answers is refused (NAK, Remote Invalid Request) at the
/// bound instead of growing this side's memory.
const MAX_QUEUED_ANSWERS: usize = 4096;
pub(super) const MAX_QUEUED_ANSWER_BYTES: usize = 64 << 20;

/// Frames at least this long are written from their own buffer; shorter ones are gathered
/// into one write of up to this many bytes.
const GATHER: usize = 64 << 10;
/// The gather buffer an idle connection keeps at most: enough for a steady stream of calls,
/// and for a few-KiB RDMA Write gathered with the Send after it (a reply's result in a Write
/// chunk), whose gathering doubles the buffer past 8 KiB: kept at 8 KiB, it was let go at each
/// pause and allocated again (15 times in 1,000 calls with 4 KiB results, negotiate's
/// tests/allocations.rs).
const KEEP_GATHERED: usize = 16 << 10;

/// How long an acknowledgement may wait for a frame of ours going the other way to carry it
/// (TCP's delayed ACK, RFC 1122 section 4.2.3.2, with a far shorter bound): a call's ACK goes
/// with its reply, a reply's with the next call. The readiness loop's deadlines have a
/// millisecond's resolution (epoll), so an ACK with nothing to carry it waits 1 to 2 ms, and
/// up to about 2 ms more while the loop's own thread stands aside for a thread that drove it.
const ACK_DELAY: Duration = Duration::from_micros(500);

pub(super) enum Out {
    /// A frame of a work request of ours, in posting order.
    Request(Vec<u8>),
    /// ACKs in a row, coalesced: a flood of zero-length Writes costs a counter, not a queue.
    Acks(u32),
    /// A Read response or a NAK.
    Answer(Vec<u8>),
    /// Flush what is queued, then send FIN.
    Shutdown,
}

/// The frames waiting to go out, in order, and the bytes of them taken for writing. Any thread
/// that queues a frame then writes what it can without blocking ([`Outbox::flush_here`]); what
/// a full socket holds back the readiness loop writes when the socket drains. Nobody ever
/// blocks on the socket, so two peers can never wait on each other.
pub(super) struct Outbox {
    q: Mutex<OutQ>,
    wire: Mutex<Wire>,
    /// The socket (non-blocking).
    sock: TcpStream,
    /// Since when writing has moved nothing (the socket full, the peer not reading): a peer
    /// that takes nothing for the retry timeout is cut, as a transport's retries give up.
    stuck_since: Mutex<Option<Instant>>,
    /// Writes to the socket that moved bytes: what tests count to see an acknowledgement
    /// ride a frame of ours instead of going alone ([`ACK_DELAY`]).
    writes: AtomicU64,
}

struct OutQ {
    frames: VecDeque<Out>,
    /// FIN sent, or the stream broke: nothing more goes out.
    closed: bool,
    /// Answers queued (an ACK run counts once), and the bytes of those that are frames.
    answers: usize,
    answer_bytes: usize,
    /// Frames written, kept for the next ones ([`Outbox::frame`]): a steady stream of
    /// messages allocates nothing.
    spare: Vec<Vec<u8>>,
}

/// Bytes taken off the queue and partly written.
struct Wire {
    /// Short frames gathered, written from `at`.
    gathered: Vec<u8>,
    at: usize,
    /// A long frame, written from its offset, after `gathered`.
    long: Option<(Vec<u8>, usize)>,
    /// FIN goes out once the bytes above have.
    fin: bool,
}

/// How many written frames an [`Outbox`] keeps for reuse, and the largest it keeps: what a
/// steady stream of small messages needs, and no more memory than that.
const SPARE_FRAMES: usize = 16;
const SPARE_FRAME_MAX: usize = 64 << 10;

/// How far writing got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drained {
    /// Everything queued is written.
    Idle,
    /// The socket is full; the readiness loop writes the rest when it drains.
    Blocked,
    /// FIN is out or the stream broke: nothing more goes out.
    Closed,
}

/// The stream failed (reset, or cut by this side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Broke;

impl Outbox {
    /// An empty frame of at least `capacity` bytes: a written one kept for reuse, or new.
    fn frame(&self, capacity: usize) -> Vec<u8> {
        let mut q = lock(&self.q);
        match q.spare.iter().position(|f| f.capacity() >= capacity) {
            Some(i) => q.spare.swap_remove(i),
            None => Vec::with_capacity(capacity),
        }
    }

    /// Keeps a written frame for [`Outbox::frame`], within [`SPARE_FRAMES`] and
    /// [`SPARE_FRAME_MAX`].
    fn recycle(q: &mut OutQ, mut f: Vec<u8>) {
        if f.capacity() <= SPARE_FRAME_MAX && q.spare.len() < SPARE_FRAMES {
            f.clear();
            q.spare.push(f);
        }
    }

    /// Queues `m`; whoever queues writes it next ([`Outbox::flush_here`], or the loop).
    pub(super) fn push(&self, m: Out) {
        let mut q = lock(&self.q);
        match &m {
            Out::Acks(_) => q.answers += 1,
            Out::Answer(f) => {
                q.answers += 1;
                q.answer_bytes += f.len();
            }
            _ => {}
        }
        q.frames.push_back(m);
    }

    /// Queues an answer ([`Out::Acks`] of one, or [`Out::Answer`]) within the bounds; false
    /// when the peer has more requests outstanding than this side holds answers for.
    fn answer(&self, m: Out) -> bool {
        let mut q = lock(&self.q);
        if q.closed {
            return true;
        }
        if let (Out::Acks(1), Some(Out::Acks(n))) = (&m, q.frames.back_mut()) {
            if *n < u32::MAX {
                *n += 1;
                return true;
            }
        }
        let bytes = match &m {
            Out::Answer(f) => f.len(),
            _ => 0,
        };
        if q.answers >= MAX_QUEUED_ANSWERS || q.answer_bytes + bytes > MAX_QUEUED_ANSWER_BYTES {
            return false;
        }
        drop(q);
        self.push(m);
        true
    }

    /// Whether what is queued may wait for a frame of ours to carry it: only acknowledgements,
    /// and nothing partly written (a socket that drained must be written to now: its
    /// readiness is edge-triggered), nor a writer at work (it may have left the socket full).
    fn only_acks_queued(&self) -> bool {
        let Ok(w) = self.wire.try_lock() else { return false };
        if w.at < w.gathered.len() || w.long.is_some() || w.fin {
            return false;
        }
        let q = lock(&self.q);
        !q.closed && !q.frames.is_empty() && q.frames.iter().all(|m| matches!(m, Out::Acks(_)))
    }

    /// Whether a frame other than an acknowledgement is queued. Looked at (without the wire)
    /// after [`Outbox::only_acks_queued`] let the wire go: a posting thread whose
    /// [`Outbox::flush_here`] found the wire held by that look left its frame to the holder.
    fn more_than_acks_queued(&self) -> bool {
        lock(&self.q).frames.iter().any(|m| !matches!(m, Out::Acks(_)))
    }

    /// Writes what is queued without blocking, unless another thread is writing: that one
    /// looks at the queue again after it lets go, so nothing queued is left behind.
    fn flush_here(&self) -> Result<Drained, Broke> {
        loop {
            let mut w = match self.wire.try_lock() {
                Ok(w) => w,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Ok(Drained::Idle),
            };
            let r = self.drain(&mut w)?;
            drop(w);
            if r != Drained::Idle || lock(&self.q).frames.is_empty() {
                return Ok(r);
            }
        }
    }

    /// [`Outbox::flush_here`] for the readiness loop: waits its turn rather than leave a
    /// writable socket's readiness unused (it is edge-triggered: it will not be told again).
    fn flush_from_loop(&self) -> Result<Drained, Broke> {
        loop {
            let r = self.drain(&mut lock(&self.wire))?;
            if r != Drained::Idle || lock(&self.q).frames.is_empty() {
                return Ok(r);
            }
        }
    }

    /// Writes from `w`, refilling it from the queue, until all is written, the socket is full,
    /// or FIN is out.
    fn drain(&self, w: &mut Wire) -> Result<Drained, Broke> {
        loop {
            while w.at < w.gathered.len() {
                let n = self.write(&w.gathered[w.at..])?;
                if n == 0 {
                    return Ok(Drained::Blocked);
                }
                w.at += n;
            }
            if let Some((f, at)) = &mut w.long {
                while *at < f.len() {
                    let n = self.write(&f[*at..])?;
                    if n == 0 {
                        return Ok(Drained::Blocked);
                    }
                    *at += n;
                }
            }
            let mut q = lock(&self.q);
            if let Some((f, _)) = w.long.take() {
                Self::recycle(&mut q, f);
            }
            w.gathered.clear();
            w.at = 0;
            if q.closed {
                q.frames.clear();
                return Ok(Drained::Closed);
            }
            if w.fin {
                q.closed = true;
                q.frames.clear();
                drop(q);
                let _ = self.sock.shutdown(Shutdown::Write);
                return Ok(Drained::Closed);
            }
            if !self.refill(&mut q, w) {
                // What a burst of long gathers grew is not kept by an idle connection.
                if w.gathered.capacity() > KEEP_GATHERED {
                    w.gathered = Vec::new();
                }
                return Ok(Drained::Idle);
            }
        }
    }

    /// Takes queued frames into `w`: short ones gathered up to [`GATHER`] bytes, or one long
    /// one; false if nothing was queued.
    fn refill(&self, q: &mut OutQ, w: &mut Wire) -> bool {
        let mut took = false;
        while w.gathered.len() < GATHER && w.long.is_none() && !w.fin {
            let long = matches!(q.frames.front(), Some(Out::Request(f) | Out::Answer(f)) if f.len() >= GATHER);
            if long && !w.gathered.is_empty() {
                break;
            }
            let Some(m) = q.frames.pop_front() else { break };
            took = true;
            match m {
                Out::Request(f) => self.take(q, w, f, long),
                Out::Answer(f) => {
                    q.answers -= 1;
                    q.answer_bytes -= f.len();
                    self.take(q, w, f, long);
                }
                Out::Acks(n) => {
                    // A long run goes out a gather at a time: its bytes are never all held.
                    let k = n.min((GATHER - w.gathered.len()) as u32);
                    let _ = Head::write_acks(&mut w.gathered, k);
                    if k < n {
                        q.frames.push_front(Out::Acks(n - k));
                    } else {
                        q.answers -= 1;
                    }
                }
                Out::Shutdown => w.fin = true,
            }
        }
        took
    }

    fn take(&self, q: &mut OutQ, w: &mut Wire, f: Vec<u8>, long: bool) {
        if long {
            w.long = Some((f, 0));
        } else {
            w.gathered.extend_from_slice(&f);
            Self::recycle(q, f);
        }
    }

    /// One non-blocking write; 0 when the socket is full.
    fn write(&self, bytes: &[u8]) -> Result<usize, Broke> {
        loop {
            match (&self.sock).write(bytes) {
                Ok(0) => return Err(self.broken()),
                Ok(n) => {
                    *lock(&self.stuck_since) = None;
                    self.writes.fetch_add(1, Ordering::Relaxed);
                    SOCKET_WRITES.fetch_add(1, Ordering::Relaxed);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    lock(&self.stuck_since).get_or_insert_with(Instant::now);
                    return Ok(0);
                }
                Err(_) => return Err(self.broken()),
            }
        }
    }

    fn stuck_since(&self) -> Option<Instant> {
        *lock(&self.stuck_since)
    }

    fn broken(&self) -> Broke {
        self.cut();
        Broke
    }

    /// Cuts the socket both ways: nothing more is written, and reading sees the end.
    fn cut(&self) {
        lock(&self.q).closed = true;
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    fn is_closed(&self) -> bool {
        lock(&self.q).closed
    }
}

/// One side of a TCP connection. Dropping it disconnects.
pub struct TcpQp {
    sh: Arc<Shared>,
    caps: QpCaps,
}

/// A connection's state, shared by its [`TcpQp`] and the readiness loop.
pub(super) struct Shared {
    pub(super) st: Mutex<State>,
    /// Signals new completions and CM events.
    cv: Condvar,
    pub(super) pd: TcpPd,
    /// Names this queue pair to the windows it binds, and to the readiness loop.
    pub(super) qp: u64,
    pub(super) out: Arc<Outbox>,
    /// The peer's frames as they arrive, applied by the readiness loop only.
    inbound: Mutex<Inbound>,
    /// What the peer offered for this side's Reads (`QueuePair::offer_read`).
    offered: Mutex<Offered>,
    /// Threads waiting on this queue pair by driving the readiness loop (`wait_for`): what
    /// another thread changes must interrupt their wait for readiness.
    drivers: AtomicUsize,
    /// Bytes read from the peer and applied (or, torn down, dropped): how a test knows that
    /// what a peer sent has been seen, instead of sleeping and hoping.
    applied: AtomicU64,
}

pub(super) struct State {
    pub(super) connected: bool,
    caps: QpCaps,
    pub(super) rq: VecDeque<PostedRecv>,
    /// Completions; a send-queue work request holds its slot from its post until its
    /// completion is reaped.
    pub(super) q: Queues,
    /// Send-queue work requests posted and not yet completed, oldest first.
    pub(super) pending: VecDeque<Pending>,
    /// A local error is queued in `pending`: later work requests are flushed behind it.
    sq_error: bool,
    pub(super) events: VecDeque<CmEvent>,
    out: Arc<Outbox>,
    qp: u64,
    /// Torn down at this time; the socket is cut once the retry timeout has passed since,
    /// if the peer has not closed its half by then.
    closing_since: Option<Instant>,
    /// The deadline the readiness loop holds for this connection, if any
    /// ([`State::arm`]).
    timer_at: Option<Instant>,
    /// When the acknowledgements queued and left for a frame of ours to carry are written
    /// anyway ([`ACK_DELAY`]): the readiness loop holds this deadline too.
    acks_due: Option<Instant>,
    /// Bytes offered ([`QueuePair::offer_read`]) since the last Send was queued: at most
    /// [`OFFER_MOST`], so that what one call offers fits the peer's offers held several times
    /// over, and is taken rather than passed over and read again.
    offered_since_send: usize,
    /// Threads asleep on the queue pair's condition variable (`wait_cq`, `cm_event`):
    /// [`Shared::signal`] wakes them only when there are any. (A notify is a system call
    /// whether or not anybody sleeps; over TCP a completion, an acknowledgement or an event
    /// signals every time.)
    sleepers: u32,
}

pub(super) enum Pending {
    /// On the wire since `since`, waiting for the peer's answer. `read_into` is a Read's
    /// scatter list.
    Wire {
        wr_id: u64,
        opcode: Opcode,
        len: u32,
        read_into: Vec<(TcpRegion, usize, usize)>,
        since: Instant,
        flags: SendFlags,
    },
    /// Decided locally; completes with `status` once everything before it has.
    Local { wr_id: u64, opcode: Opcode, status: Status, flags: SendFlags },
}

impl State {
    /// Tears the connection down: Error state, posted Receives and outstanding work requests
    /// flushed, one Disconnected event, FIN to the peer (written by whoever flushes next).
    /// Idempotent.
    pub(super) fn fail(&mut self) {
        if !std::mem::replace(&mut self.connected, false) {
            return;
        }
        while let Some(r) = self.rq.pop_front() {
            self.q.push(Completion::new(r.wr_id, Status::WorkRequestFlushed, Opcode::Recv, 0));
        }
        while let Some(p) = self.pending.pop_front() {
            let c = match p {
                Pending::Wire { wr_id, opcode, .. } => Completion::new(wr_id, Status::WorkRequestFlushed, opcode, 0),
                Pending::Local { wr_id, opcode, status, .. } => Completion::new(wr_id, status, opcode, 0),
            };
            // A flushed or failed work request reports itself, signaled or not.
            self.q.push(c);
        }
        self.events.push_back(CmEvent::Disconnected);
        self.out.push(Out::Shutdown);
        self.closing_since = Some(Instant::now());
        self.arm();
    }

    /// Refuses the peer's request: `NAK` with the status its work request gets, then tear down.
    pub(super) fn nak(&mut self, status: Status) {
        if self.connected {
            let mut f = Vec::with_capacity(2);
            Head::Nak(NakCode::for_status(status)).encode(&mut f);
            self.out.push(Out::Answer(f));
        }
        self.fail();
    }

    /// Queues an answer to the peer's request; over the answer bounds the request is refused
    /// instead (false: stop applying the peer's frames).
    pub(super) fn answer(&mut self, m: Out) -> bool {
        if !self.connected || self.out.answer(m) {
            return true;
        }
        self.nak(Status::RemoteInvalidRequest);
        false
    }

    /// The peer stopped acknowledging (see [`QpCaps::retry_timeout`]): the oldest work request
    /// on the wire fails with [`Status::RetryExceeded`], the rest are flushed, and the socket
    /// is cut.
    fn stall(&mut self) {
        if let Some(Pending::Wire { wr_id, opcode, .. }) = self.pending.front() {
            let c = Completion::new(*wr_id, Status::RetryExceeded, *opcode, 0);
            self.pending.pop_front();
            self.q.push(c);
        }
        self.fail();
        self.out.cut();
    }

    /// When the readiness loop must look at this connection next: the retry timeout after a
    /// teardown, after the oldest work request on the wire was posted, or after writing
    /// last moved nothing.
    fn deadline(&self) -> Option<Instant> {
        // (A retry timeout too long to add to an instant, `Duration::MAX` for "never", has no
        // deadline: an overflow here would panic on the loop that every connection shares.)
        let retry = self.caps.retry_timeout;
        if let Some(since) = self.closing_since {
            return since.checked_add(retry);
        }
        let oldest = match self.pending.front() {
            Some(Pending::Wire { since, .. }) => Some(*since),
            _ => None,
        };
        let since = match (oldest, self.out.stuck_since()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        since.and_then(|s| s.checked_add(retry))
    }

    /// Leaves the acknowledgements queued for a frame of ours to carry, for [`ACK_DELAY`] at
    /// most: a deadline of its own in the readiness loop, beside the retry timeout's (which
    /// stays where it is: moved earlier and back at every delay, it left an entry behind in the
    /// loop's deadlines each time, to be dropped only seconds later).
    fn delay_acks(&mut self) {
        if self.acks_due.is_none() {
            let at = Instant::now() + ACK_DELAY;
            self.acks_due = Some(at);
            if let Ok(r) = reactor::reactor() {
                r.wake_at(self.qp, at);
            }
        }
    }

    /// Asks the readiness loop for [`State::deadline`] unless it already holds an earlier one:
    /// one deadline per connection at most, moved on when it comes.
    fn arm(&mut self) {
        let Some(at) = self.deadline() else { return };
        if self.timer_at.is_some_and(|t| t <= at) {
            return;
        }
        self.timer_at = Some(at);
        if let Ok(r) = reactor::reactor() {
            r.wake_at(self.qp, at);
        }
    }

    /// Completes the locally decided work requests now at the head of the send queue.
    pub(super) fn drain_local(&mut self) {
        while let Some(Pending::Local { .. }) = self.pending.front() {
            let Some(Pending::Local { wr_id, opcode, status, flags }) = self.pending.pop_front() else {
                unreachable!()
            };
            self.q.push_wr(Completion::new(wr_id, status, opcode, 0), flags);
            if status != Status::Success {
                self.fail();
                return;
            }
        }
    }

    /// Queues a locally decided work request behind the outstanding ones.
    fn local(&mut self, wr_id: u64, opcode: Opcode, status: Status, flags: SendFlags) {
        if status != Status::Success {
            self.sq_error = true;
        }
        self.pending.push_back(Pending::Local { wr_id, opcode, status, flags });
        self.drain_local();
    }
}

impl TcpQp {
    /// Bytes of the peer's the readiness loop has read so far (see `Shared::applied`).
    #[cfg(test)]
    pub(super) fn applied(&self) -> u64 {
        self.sh.applied.load(Ordering::Acquire)
    }

    /// Starts the queue pair on an established, handshaken stream. `before` runs before the
    /// readiness loop applies the peer's first frame, so the Receives it posts are in place.
    pub(super) fn start(
        stream: TcpStream,
        pd: &TcpPd,
        caps: QpCaps,
        before: impl FnOnce(TcpQp) -> (TcpQp, Result<()>),
    ) -> Result<TcpQp> {
        let r = reactor::reactor().map_err(|_| Error::ConnectionAborted)?;
        stream.set_nonblocking(true).map_err(|_| Error::ConnectionAborted)?;
        let _ = stream.set_nodelay(true);
        let out = Arc::new(Outbox {
            q: Mutex::new(OutQ {
                frames: VecDeque::new(),
                closed: false,
                answers: 0,
                answer_bytes: 0,
                spare: Vec::new(),
            }),
            wire: Mutex::new(Wire { gathered: Vec::new(), at: 0, long: None, fin: false }),
            sock: stream,
            stuck_since: Mutex::new(None),
            writes: AtomicU64::new(0),
        });
        let qp = crate::inproc::next_id();
        let sh = Arc::new(Shared {
            st: Mutex::new(State {
                connected: true,
                caps,
                rq: VecDeque::new(),
                q: Queues::default(),
                pending: VecDeque::new(),
                sq_error: false,
                events: VecDeque::new(),
                out: out.clone(),
                qp,
                closing_since: None,
                timer_at: None,
                acks_due: None,
                offered_since_send: 0,
                sleepers: 0,
            }),
            cv: Condvar::new(),
            pd: pd.clone(),
            qp,
            out,
            inbound: Mutex::new(Inbound::default()),
            offered: Mutex::new(Offered::default()),
            drivers: AtomicUsize::new(0),
            applied: AtomicU64::new(0),
        });
        // Dropping `qp` on an error disconnects, which the peer sees as end of stream.
        let (qp, before) = before(TcpQp { sh, caps });
        before?;
        if r.add(qp.sh.qp, qp.sh.clone()).is_err() {
            let mut st = lock(&qp.sh.st);
            st.fail();
            drop(st);
            qp.sh.out.cut();
            return Err(Error::ConnectionAborted);
        }
        // A deadline asked for by what `before` posted may have come before the loop knew
        // this connection (and been dropped there): asked for again now that it does.
        let mut st = lock(&qp.sh.st);
        st.timer_at = None;
        st.arm();
        drop(st);
        Ok(qp)
    }

    /// Wakes the waiters on what changed under `st`, then writes what it queued.
    fn notify(&self, st: MutexGuard<'_, State>) -> Result<()> {
        self.sh.signal(st);
        self.sh.flush();
        Ok(())
    }

    /// Writes to the socket so far that moved bytes (tests count them: acknowledgements
    /// carried by the next frame the other way cost no write of their own).
    #[cfg(test)]
    pub(super) fn socket_writes(&self) -> u64 {
        self.sh.out.writes.load(Ordering::Relaxed)
    }

    /// The connection's outbox (for a frame to fill before posting).
    fn outbox(&self) -> &Outbox {
        &self.sh.out
    }

    /// Locks the state for a send-queue work request: refuses it if the send queue is full,
    /// and completes it as flushed (returning `None`) if the queue pair is in Error or a local
    /// error is queued ahead of it.
    fn begin(&self, wr_id: u64, opcode: Opcode, flags: SendFlags) -> Result<Option<MutexGuard<'_, State>>> {
        let mut st = lock(&self.sh.st);
        if st.q.sq_outstanding >= st.caps.max_send_wr {
            return Err(Error::QueueFull);
        }
        st.q.sq_outstanding += 1;
        if !st.connected {
            st.q.push(Completion::new(wr_id, Status::WorkRequestFlushed, opcode, 0));
            self.notify(st)?;
            return Ok(None);
        }
        if st.sq_error {
            st.pending.push_back(Pending::Local { wr_id, opcode, status: Status::WorkRequestFlushed, flags });
            return Ok(None);
        }
        Ok(Some(st))
    }

    /// Gathers `sges` into `frame`; false (nothing usable) on a local protection fault.
    fn gather(&self, sges: &[Sge<'_, TcpRegion>], frame: &mut Vec<u8>) -> bool {
        let pd = self.sh.pd.0.id;
        for s in sges {
            let rule = Rule::Local { pd, write: false };
            let d = lock(&s.region.0.data);
            if !rule.allows(&s.region.0, &d, s.offset, s.len) {
                return false;
            }
            frame.extend_from_slice(&d.buf[s.offset..s.offset + s.len]);
        }
        true
    }

    /// [`Self::post`] for a Send or Write: while this thread has a [`PostBatch`] open, its
    /// frame stays queued, written with the others the thread posts when it hands them over
    /// (`crate::batch`).
    ///
    /// [`PostBatch`]: crate::PostBatch
    fn post_held(&self, queued: Option<MutexGuard<'_, State>>) -> Result<()> {
        if !crate::PostBatch::is_open() {
            return self.post(queued);
        }
        if let Some(st) = queued {
            self.sh.signal(st);
            batch::hold(&self.sh);
        }
        Ok(())
    }

    /// Notifies for what [`Self::queue`] queued (posting the frame, waking the waiters).
    fn post(&self, queued: Option<MutexGuard<'_, State>>) -> Result<()> {
        queued.map_or(Ok(()), |st| self.notify(st))
    }

    /// Queues a frame-carrying work request, or its local failure, and returns the state
    /// still locked for the caller to [notify](Self::notify) (`None`: nothing left to).
    fn queue(
        &self,
        wr_id: u64,
        opcode: Opcode,
        len: u32,
        frame: Option<Vec<u8>>,
        read_into: Vec<(TcpRegion, usize, usize)>,
        flags: SendFlags,
    ) -> Result<Option<MutexGuard<'_, State>>> {
        let Some(mut st) = self.begin(wr_id, opcode, flags)? else { return Ok(None) };
        let Some(frame) = frame else {
            st.local(wr_id, opcode, Status::LocalProtectionError, flags);
            return Ok(Some(st));
        };
        st.pending.push_back(Pending::Wire { wr_id, opcode, len, read_into, since: Instant::now(), flags });
        st.arm();
        st.out.push(Out::Request(frame));
        if opcode == Opcode::Send {
            st.offered_since_send = 0;
        }
        Ok(Some(st))
    }

    /// Queues a Send's or an RDMA Write's frame ([`Self::queue`]), built from `wr`.
    fn queue_wr(&self, wr: &WorkRequest<'_, TcpRegion>) -> Result<Option<MutexGuard<'_, State>>> {
        match *wr {
            WorkRequest::Write { wr_id, sges, remote, flags } => {
                let (len, frame) = self.write_frame(sges, remote)?;
                self.queue(wr_id, Opcode::RdmaWrite, len, frame, Vec::new(), flags)
            }
            WorkRequest::Send { wr_id, sges, invalidate, flags } => {
                let (len, frame) = self.send_frame(sges, invalidate)?;
                self.queue(wr_id, Opcode::Send, len, frame, Vec::new(), flags)
            }
        }
    }

    /// A Send's frame of `sges` (with Invalidate of `invalidate`) and its length; no frame on
    /// a local protection fault.
    fn send_frame(&self, sges: &[Sge<'_, TcpRegion>], invalidate: Option<u32>) -> Result<(u32, Option<Vec<u8>>)> {
        let total = rules::total_len(sges, self.caps.max_sge)?;
        let mut frame = self.outbox().frame(frame::MAX_HEAD_LEN + total as usize);
        let head = match invalidate {
            Some(rkey) => {
                // The peer's memory under `rkey` is closed to this side from here on: so is
                // what the peer offered of it.
                lock(&self.sh.offered).forget(rkey);
                Head::SendInv { rkey, len: total }
            }
            None => Head::Send { len: total },
        };
        head.encode(&mut frame);
        let ok = self.gather(sges, &mut frame);
        Ok((total, ok.then_some(frame)))
    }

    /// An RDMA Write's frame of `sges` to `remote` and its length; no frame on a local
    /// protection fault.
    fn write_frame(&self, sges: &[Sge<'_, TcpRegion>], remote: RemoteBuf) -> Result<(u32, Option<Vec<u8>>)> {
        let total = rules::total_len(sges, self.caps.max_sge)?;
        let mut frame = self.outbox().frame(frame::MAX_HEAD_LEN + total as usize);
        Head::Write { addr: remote.addr, rkey: remote.rkey, len: total }.encode(&mut frame);
        let ok = self.gather(sges, &mut frame);
        Ok((total, ok.then_some(frame)))
    }

    /// Posts an RDMA Read request: its data lands in `sges` when the response comes. (Always
    /// from the peer, offered or not: the peer's rules hold at the time of the Read, so that a
    /// Read through a key invalidated since its offer fails as it must.)
    fn read(&self, wr_id: u64, sges: &[Sge<'_, TcpRegion>], remote: RemoteBuf) -> Result<()> {
        let total = rules::total_len(sges, self.caps.max_sge)?;
        let mut frame = self.outbox().frame(frame::MAX_HEAD_LEN);
        Head::ReadReq { addr: remote.addr, rkey: remote.rkey, len: total }.encode(&mut frame);
        let read_into = sges.iter().map(|s| (s.region.clone(), s.offset, s.len)).collect();
        let ok = rules::local_sges_ok(sges, self.sh.pd.0.id, true);
        self.post(self.queue(wr_id, Opcode::RdmaRead, total, ok.then_some(frame), read_into, SendFlags::SIGNALED)?)
    }

    /// Copies `bytes` across `sges` (which hold as many), each checked writable here under its
    /// region's lock: [`Status::LocalProtectionError`] at the first that is not.
    fn scatter(&self, sges: &[Sge<'_, TcpRegion>], bytes: &[u8]) -> Status {
        let rule = Rule::Local { pd: self.sh.pd.0.id, write: true };
        let mut rest = bytes;
        for s in sges {
            let (now, later) = rest.split_at(s.len);
            let mut d = lock(&s.region.0.data);
            if !rule.allows(&s.region.0, &d, s.offset, s.len) {
                return Status::LocalProtectionError;
            }
            d.buf[s.offset..s.offset + s.len].copy_from_slice(now);
            rest = later;
        }
        Status::Success
    }

    /// Offers taken so far, and offers passed over before they were (tests count them).
    #[cfg(test)]
    pub(super) fn offers_counted(&self) -> (u64, u64) {
        lock(&self.sh.offered).counts()
    }

    /// The bytes of the offers held now (tests check the bound).
    #[cfg(test)]
    pub(super) fn offered_held_bytes(&self) -> usize {
        lock(&self.sh.offered).held_bytes()
    }

    fn wait_for<T>(&self, timeout: Duration, mut take: impl FnMut(&mut State) -> Option<T>) -> Option<T> {
        // A thread that waits hands over what it holds first: what it waits for may be the
        // peer's answer to it.
        if !timeout.is_zero() {
            batch::flush_held();
        }
        if let Some(v) = take(&mut lock(&self.sh.st)) {
            return Some(v);
        }
        // Waits by driving the readiness loop where no other thread does, for a while: the
        // frame that ends the wait is then read by this thread, instead of by one that would
        // wake it. Then as before, woken by whoever drives.
        let mut timeout = timeout;
        if let (false, Ok(r)) = (timeout.is_zero(), reactor::reactor()) {
            let start = Instant::now();
            let mut got = None;
            self.sh.drivers.fetch_add(1, Ordering::SeqCst);
            let drove = r.try_drive(timeout, &mut || {
                got = take(&mut lock(&self.sh.st));
                got.is_some()
            });
            self.sh.drivers.fetch_sub(1, Ordering::SeqCst);
            if got.is_some() {
                return got;
            }
            if drove.is_some() {
                timeout = timeout.saturating_sub(start.elapsed());
            }
        }
        rules::wait_for(&self.sh.st, &self.sh.cv, timeout, |st| &mut st.sleepers, take)
    }
}

impl QueuePair for TcpQp {
    type Region = TcpRegion;

    fn post_recv(&self, wr_id: u64, sge: Sge<'_, TcpRegion>) -> Result<()> {
        let mut st = lock(&self.sh.st);
        if st.rq.len() >= st.caps.max_recv_wr as usize {
            return Err(Error::QueueFull);
        }
        let r = PostedRecv::new(wr_id, sge)?;
        if st.connected {
            st.rq.push_back(r);
            return Ok(());
        }
        st.q.push(Completion::new(wr_id, Status::WorkRequestFlushed, Opcode::Recv, 0));
        self.notify(st)
    }

    fn post_send(&self, wr_id: u64, sges: &[Sge<'_, TcpRegion>], invalidate: Option<u32>) -> Result<()> {
        self.post_send_with(wr_id, sges, invalidate, SendFlags::SIGNALED)
    }

    fn post_send_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, TcpRegion>],
        invalidate: Option<u32>,
        flags: SendFlags,
    ) -> Result<()> {
        self.post_held(self.queue_wr(&WorkRequest::Send { wr_id, sges, invalidate, flags })?)
    }
    fn post_write(&self, wr_id: u64, sges: &[Sge<'_, TcpRegion>], remote: RemoteBuf) -> Result<()> {
        self.post_write_with(wr_id, sges, remote, SendFlags::SIGNALED)
    }

    fn post_write_with(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, TcpRegion>],
        remote: RemoteBuf,
        flags: SendFlags,
    ) -> Result<()> {
        self.post_held(self.queue_wr(&WorkRequest::Write { wr_id, sges, remote, flags })?)
    }

    fn post_read(&self, wr_id: u64, sges: &[Sge<'_, TcpRegion>], remote: RemoteBuf) -> Result<()> {
        self.read(wr_id, sges, remote)
    }

    fn post_local_invalidate(&self, wr_id: u64, rkey: u32) -> Result<()> {
        self.post_local_invalidate_with(wr_id, rkey, SendFlags::SIGNALED)
    }

    fn post_local_invalidate_with(&self, wr_id: u64, rkey: u32, flags: SendFlags) -> Result<()> {
        let Some(mut st) = self.begin(wr_id, Opcode::LocalInvalidate, flags)? else { return Ok(()) };
        let ok = self.sh.pd.0.invalidate_local(rkey, self.sh.qp);
        let status = if ok { Status::Success } else { Status::LocalProtectionError };
        st.local(wr_id, Opcode::LocalInvalidate, status, flags);
        self.notify(st)
    }

    fn post_bind_window(
        &self,
        wr_id: u64,
        region: &TcpRegion,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<RemoteBuf> {
        self.post_bind_window_with(wr_id, region, offset, len, access, SendFlags::SIGNALED)
    }

    /// Binding is local (the target enforces every remote rule), so it is decided at once and
    /// completes in posting order behind the work requests before it.
    fn post_bind_window_with(
        &self,
        wr_id: u64,
        region: &TcpRegion,
        offset: usize,
        len: usize,
        access: Access,
        flags: SendFlags,
    ) -> Result<RemoteBuf> {
        check_window(region, offset, len, access)?;
        // What a bind that fails or is flushed returns: a fresh key that names nothing.
        let remote = RemoteBuf { addr: region.addr() + offset as u64, rkey: crate::inproc::next_key() };
        let Some(mut st) = self.begin(wr_id, Opcode::BindWindow, flags)? else { return Ok(remote) };
        let window = self.sh.pd.0.bind_window(region, offset, len, access, self.sh.qp);
        let status = if window.is_some() { Status::Success } else { Status::LocalProtectionError };
        st.local(wr_id, Opcode::BindWindow, status, flags);
        self.notify(st)?;
        Ok(window.unwrap_or(remote))
    }

    /// Every frame of the chain queued before one write: the Send after a reply's Writes goes
    /// out with them, in one system call where they fit one gather.
    fn post_chain(&self, wrs: &[WorkRequest<'_, TcpRegion>]) -> std::result::Result<(), ChainError> {
        let mut queued = false;
        let mut result = Ok(());
        for (posted, wr) in wrs.iter().enumerate() {
            match self.queue_wr(wr) {
                // Unlocked until the chain is queued.
                Ok(st) => queued |= st.is_some(),
                Err(error) => {
                    result = Err(ChainError { posted, error });
                    break;
                }
            }
        }
        if queued {
            // Infallible (`notify` returns Ok), as for a single post.
            let _ = self.post_held(Some(lock(&self.sh.st)));
        }
        result
    }

    /// Queues the bytes as a [`Head::Offer`] frame, written by the next write of this side
    /// (the Send that follows it, as a requester posts it). About 64 KiB (`OFFER_MOST`) at most
    /// is offered between two Sends of this side, beyond which false: what one call offers
    /// fits what the peer holds. (Between the budget's check and the frame's queueing another
    /// thread's Send may start a new budget: the bound the peer enforces is its own, this is
    /// the sender's courtesy.)
    fn offer_read(&self, remote: RemoteBuf, len: u32) -> bool {
        let len = len as usize;
        if len == 0 || len > OFFER_MOST {
            return false;
        }
        // The range a Read arriving on this queue pair could read: the same check.
        let Ok(Some((region, off))) = rules::rdma_target(&self.sh.pd.0, self.sh.qp, remote, len, false) else {
            return false;
        };
        {
            let mut st = lock(&self.sh.st);
            if !st.connected || st.offered_since_send + len > OFFER_MOST {
                return false;
            }
            st.offered_since_send += len;
        }
        let mut frame = self.outbox().frame(frame::MAX_HEAD_LEN + len);
        let copied = {
            let d = lock(&region.data);
            let ok = Rule::Remote.allows(&region, &d, off, len);
            if ok {
                Head::Offer { addr: remote.addr, rkey: remote.rkey, len: len as u32 }.encode(&mut frame);
                frame.extend_from_slice(&d.buf[off..off + len]);
            }
            ok
        };
        let mut st = lock(&self.sh.st);
        if !copied || !st.connected {
            st.offered_since_send = st.offered_since_send.saturating_sub(len);
            return false;
        }
        st.out.push(Out::Request(frame));
        true
    }

    fn offers_held(&self) -> usize {
        offered::HELD_BYTES
    }

    fn take_offered(&self, into: Sge<'_, TcpRegion>, remote: RemoteBuf) -> bool {
        let mut offered = lock(&self.sh.offered);
        if into.len == 0 || !offered.holds(remote.rkey, remote.addr, into.len) {
            return false;
        }
        // (Checked before the offer is let go: an unusable `into` leaves it for a Read.)
        if !rules::local_sges_ok(&[into], self.sh.pd.0.id, true) {
            return false;
        }
        let mut status = Status::LocalProtectionError;
        offered.take(remote.rkey, remote.addr, into.len, |bytes| status = self.scatter(&[into], bytes));
        let taken = status == Status::Success;
        if taken {
            OFFERS_TAKEN.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    fn holds_offered(&self, remote: RemoteBuf, len: u32) -> bool {
        len > 0 && lock(&self.sh.offered).holds(remote.rkey, remote.addr, len as usize)
    }

    /// Frames are gathered as they are posted.
    fn memory_read_at_post(&self) -> bool {
        true
    }

    fn caps(&self) -> QpCaps {
        self.caps
    }

    fn poll_cq(&self, out: &mut [Completion]) -> usize {
        lock(&self.sh.st).q.poll(out)
    }

    fn wait_cq(&self, timeout: Duration) -> Option<Completion> {
        self.wait_for(timeout, |st| st.q.pop())
    }

    fn arm_waker(&self, waker: &std::task::Waker) -> crate::Arm {
        lock(&self.sh.st).q.arm(waker)
    }

    fn cm_event(&self, timeout: Duration) -> Option<CmEvent> {
        self.wait_for(timeout, |st| st.events.pop_front())
    }

    fn state(&self) -> QpState {
        if lock(&self.sh.st).connected {
            QpState::Ready
        } else {
            QpState::Error
        }
    }

    /// Writes what is queued, held by a batch or not (`crate::batch`).
    fn flush_posts(&self) {
        self.sh.flush();
    }

    /// Queues the FIN behind what is already queued and writes what it can; the readiness
    /// loop writes the rest, and cuts the socket if the peer has not closed its half within
    /// the retry timeout.
    fn disconnect(&self) {
        self.sh.tear_down();
        self.sh.flush();
    }
}

impl Drop for TcpQp {
    fn drop(&mut self) {
        self.disconnect();
        self.sh.pd.0.unbind_all(self.sh.qp);
    }
}

impl std::fmt::Debug for TcpQp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpQp").field("state", &self.state()).finish()
    }
}

impl batch::Held for Shared {
    fn hand_over(&self) {
        self.flush();
    }
}

impl Shared {
    /// Unlocks `st`, then wakes whoever waits on what changed under it: the threads in
    /// `wait_cq` and `cm_event`, and the waker a queued completion fired
    /// ([`QueuePair::arm_waker`]).
    pub(super) fn signal(&self, mut st: MutexGuard<'_, State>) {
        let fired = st.q.take_fired();
        // Read under the lock that every sleeper counts itself under before it sleeps: one
        // that is not counted yet will look at the state changed here before it sleeps.
        let sleepers = st.sleepers > 0;
        drop(st);
        if sleepers {
            self.cv.notify_all();
        }
        // A thread waiting by driving the readiness loop learns of it at once.
        if self.drivers.load(Ordering::SeqCst) > 0 {
            if let Ok(r) = reactor::reactor() {
                r.nudge(false);
            }
        }
        if let Some(waker) = fired {
            waker.wake();
        }
    }

    /// Writes what is queued, from a posting thread; a broken stream tears the connection down.
    fn flush(&self) {
        let r = self.out.flush_here();
        self.wrote(r);
    }

    /// Acts on how writing went: a broken stream tears the connection down, and a full socket
    /// starts the retry timeout ([`State::deadline`]).
    fn wrote(&self, r: Result<Drained, Broke>) {
        match r {
            Ok(Drained::Blocked) => lock(&self.st).arm(),
            Ok(_) => {}
            Err(Broke) => self.tear_down(),
        }
    }

    /// Tears the connection down ([`State::fail`]) and wakes whoever waits on it.
    fn tear_down(&self) {
        let mut st = lock(&self.st);
        st.fail();
        self.signal(st);
    }

    /// Runs `f` on the state and wakes waiters if it gave them something (a completion, a CM
    /// event, the Error state); `f` returning false stops frame processing. An answer to the
    /// peer's request, or an unsignaled work request's success ([`SendFlags`]), gives a waiter
    /// nothing: waking it for that was a thread switch for nothing.
    pub(super) fn with_state(&self, f: impl FnOnce(&mut State) -> bool) -> Result<(), Stop> {
        let mut st = lock(&self.st);
        let mark = |st: &State| (st.q.queued(), st.events.len(), st.connected);
        let before = mark(&st);
        let go = f(&mut st);
        if mark(&st) != before {
            self.signal(st);
        }
        if go {
            Ok(())
        } else {
            Err(Stop)
        }
    }
}

/// Why frame processing stopped: the stream ended or broke, or the connection failed.
#[derive(Debug)]
pub(super) struct Stop;

impl Source for Shared {
    fn fd(&self) -> RawFd {
        self.out.sock.as_raw_fd()
    }

    /// Reads and applies the peer's frames until the socket would block, then writes what
    /// they (and anyone else) queued: acknowledgements alone are left for a frame of ours to
    /// carry, until their deadline ([`ACK_DELAY`]). Done once the stream has ended both ways.
    fn on_ready(&self, scratch: &mut [u8]) -> Step {
        let mut inbound = lock(&self.inbound);
        let mut read = 0usize;
        let ended = loop {
            match (&self.out.sock).read(scratch) {
                Ok(0) => break true,
                Ok(n) => {
                    read += n;
                    if inbound.feed(self, &scratch[..n]).is_err() {
                        // Torn down: what the peer still sends is read and dropped, so that
                        // its writer never blocks on us, until its end of stream.
                        self.tear_down();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                Err(_) => break true,
            }
            // Other connections wait on this thread too.
            if read >= FAIR_SHARE {
                break false;
            }
        };
        drop(inbound);
        self.applied.fetch_add(read as u64, Ordering::Release);
        if ended {
            self.tear_down();
        }
        if !ended && self.out.only_acks_queued() {
            // Carried by the next frame of ours (a reply, the next call), or written once due.
            lock(&self.st).delay_acks();
            if self.out.more_than_acks_queued() {
                let r = self.out.flush_from_loop();
                self.wrote(r);
            }
        } else {
            let r = self.out.flush_from_loop();
            self.wrote(r);
        }
        if ended && self.out.is_closed() {
            self.out.cut();
            return Step::Done;
        }
        if read >= FAIR_SHARE {
            Step::More
        } else {
            Step::Idle
        }
    }

    /// The delayed acknowledgements' deadline ([`ACK_DELAY`]): they are written if nothing
    /// carried them. Or the retry timeout has passed for the oldest work request on the wire
    /// (it fails with [`Status::RetryExceeded`]) or since the teardown (the socket is cut):
    /// either way the connection is done. Otherwise asks for its next deadline.
    fn on_deadline(&self, at: Instant, now: Instant) -> Step {
        let mut st = lock(&self.st);
        if st.acks_due == Some(at) {
            // Nothing of ours carried them (or it did, and this writes nothing).
            st.acks_due = None;
            drop(st);
            let r = self.out.flush_from_loop();
            self.wrote(r);
            return Step::Idle;
        }
        if st.timer_at != Some(at) {
            return Step::Idle; // moved earlier since; that one is still held
        }
        st.timer_at = None;
        match st.deadline() {
            Some(d) if d <= now => {
                if st.closing_since.is_none() {
                    st.stall();
                }
                self.signal(st);
                self.out.cut();
                Step::Done
            }
            _ => {
                st.arm();
                Step::Idle
            }
        }
    }
}

/// The most bytes the readiness loop reads from one connection before it serves the others.
const FAIR_SHARE: usize = 1 << 20;
