//! The TCP queue pair: frames sent in posting order (by the poster or a writer thread), and a reader thread
//! that applies the peer's frames in stream order against this side's registrations and turns
//! the peer's answers into completions.

use std::collections::VecDeque;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::frame::{self, Head, NakCode};
use super::{lock, TcpPd, TcpRegion};
use crate::inproc::region::Rule;
use crate::rules::{self, PostedRecv, Queues, Refusal, UNUSABLE_RECEIVE};
use crate::{
    check_window, Access, CmEvent, Completion, Error, MemoryRegion, Opcode, QpCaps, QpState, QueuePair, RemoteBuf,
    Result, SendFlags, Sge, Status,
};

/// Answers (ACK runs, Read responses) queued for the peer at most, and the Read-response bytes
/// among them: the peer's outstanding requests, which a peer within its own send queue never
/// exceeds (hardware bounds incoming Reads the same way, by `max_dest_rd_atomic`). A peer that
/// floods requests and never reads our answers is refused (NAK, Remote Invalid Request) at the
/// bound instead of growing this side's memory.
const MAX_QUEUED_ANSWERS: usize = 4096;
const MAX_QUEUED_ANSWER_BYTES: usize = 64 << 20;

enum Out {
    /// A frame of a work request of ours, in posting order.
    Request(Vec<u8>),
    /// ACKs in a row, coalesced: a flood of zero-length Writes costs a counter, not a queue.
    Acks(u32),
    /// A Read response or a NAK.
    Answer(Vec<u8>),
    /// Flush what is queued, then send FIN.
    Shutdown,
}

/// The frames waiting to go out, in order, and the stream they go to. Whoever holds `stream`
/// writes queued frames until none are left: the posting thread itself when the stream is
/// free (no thread hop on the hot path), else the writer thread, woken by `send`. The reader
/// thread only queues (`send`, `answer`): it never blocks on a socket write, so two peers'
/// readers can never wait on each other.
struct Outbox {
    q: Mutex<OutQ>,
    cv: Condvar,
    stream: Mutex<BufWriter<TcpStream>>,
    /// The same socket, to cut it (`shutdown(Both)`) while a writer is blocked on it.
    sock: TcpStream,
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

/// How many written frames an [`Outbox`] keeps for reuse, and the largest it keeps: what a
/// steady stream of small messages needs, and no more memory than that.
const SPARE_FRAMES: usize = 16;
const SPARE_FRAME_MAX: usize = 64 << 10;

/// Why writing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Broke {
    /// The peer took nothing for the whole write timeout (the queue pair's retry timeout).
    Stalled,
    /// The stream failed (reset, or cut by this side).
    Reset,
}

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
    fn recycle(&self, mut f: Vec<u8>) {
        if f.capacity() <= SPARE_FRAME_MAX {
            let mut q = lock(&self.q);
            if q.spare.len() < SPARE_FRAMES {
                f.clear();
                q.spare.push(f);
            }
        }
    }

    fn push(&self, m: Out) {
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

    /// Queues `m` and wakes the writer thread to send it.
    fn send(&self, m: Out) {
        self.push(m);
        self.cv.notify_one();
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
        self.send(m);
        true
    }

    /// Sends what is queued from this thread if no other is sending, else leaves it to the
    /// writer thread.
    fn flush_here(&self) -> Result<(), Broke> {
        let r = match self.stream.try_lock() {
            Ok(mut w) => self.drain(&mut w),
            Err(std::sync::TryLockError::Poisoned(e)) => self.drain(&mut e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => Ok(()),
        };
        // Frames queued while the stream was held (by us, or by whoever refused us) must not wait.
        if !lock(&self.q).frames.is_empty() {
            self.cv.notify_one();
        }
        r
    }

    /// Writes queued frames until none are left.
    fn drain(&self, w: &mut BufWriter<TcpStream>) -> Result<(), Broke> {
        loop {
            let m = {
                let mut q = lock(&self.q);
                if q.closed {
                    q.frames.clear();
                    return Ok(());
                }
                let m = q.frames.pop_front();
                match &m {
                    Some(Out::Acks(_)) => q.answers -= 1,
                    Some(Out::Answer(f)) => {
                        q.answers -= 1;
                        q.answer_bytes -= f.len();
                    }
                    _ => {}
                }
                m
            };
            let r = match m {
                None => return w.flush().map_err(|e| self.broken(&e)),
                Some(Out::Request(f) | Out::Answer(f)) => {
                    let r = w.write_all(&f);
                    self.recycle(f);
                    r
                }
                Some(Out::Acks(n)) => Head::write_acks(w, n),
                Some(Out::Shutdown) => {
                    lock(&self.q).closed = true;
                    let _ = w.flush();
                    let _ = w.get_ref().shutdown(Shutdown::Write);
                    self.cv.notify_all();
                    return Ok(());
                }
            };
            if let Err(e) = r {
                return Err(self.broken(&e));
            }
        }
    }

    fn broken(&self, e: &io::Error) -> Broke {
        lock(&self.q).closed = true;
        let _ = self.sock.shutdown(Shutdown::Both);
        self.cv.notify_all();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Broke::Stalled,
            _ => Broke::Reset,
        }
    }

    /// Cuts the socket: a writer blocked on it, and the reader, return at once.
    fn cut(&self) {
        lock(&self.q).closed = true;
        let _ = self.sock.shutdown(Shutdown::Both);
        self.cv.notify_all();
    }
}

/// One side of a TCP connection. Dropping it disconnects.
pub struct TcpQp {
    sh: Arc<Shared>,
    caps: QpCaps,
}

struct Shared {
    st: Mutex<State>,
    /// Signals new completions and CM events.
    cv: Condvar,
    pd: TcpPd,
    /// Names this queue pair to the windows it binds.
    qp: u64,
}

struct State {
    connected: bool,
    caps: QpCaps,
    rq: VecDeque<PostedRecv>,
    /// Completions; a send-queue work request holds its slot from its post until its
    /// completion is reaped.
    q: Queues,
    /// Send-queue work requests posted and not yet completed, oldest first.
    pending: VecDeque<Pending>,
    /// A local error is queued in `pending`: later work requests are flushed behind it.
    sq_error: bool,
    events: VecDeque<CmEvent>,
    out: Arc<Outbox>,
    /// The reader thread has not finished yet (the writer lingers for it before cutting the
    /// socket).
    reader_running: bool,
}

enum Pending {
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
    /// flushed, one Disconnected event, FIN to the peer. Idempotent.
    fn fail(&mut self) {
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
        self.out.send(Out::Shutdown);
    }

    /// Refuses the peer's request: `NAK` with the status its work request gets, then tear down.
    fn nak(&mut self, status: Status) {
        if self.connected {
            let mut f = Vec::with_capacity(2);
            Head::Nak(NakCode::for_status(status)).encode(&mut f);
            self.out.send(Out::Answer(f));
        }
        self.fail();
    }

    /// Queues an answer to the peer's request; over the answer bounds the request is refused
    /// instead (false: stop applying the peer's frames).
    fn answer(&mut self, m: Out) -> bool {
        if !self.connected || self.out.answer(m) {
            return true;
        }
        self.nak(Status::RemoteInvalidRequest);
        false
    }

    /// The peer stopped acknowledging (see [`QpCaps::retry_timeout`]): the oldest work request
    /// on the wire fails with [`Status::RetryExceeded`], the rest are flushed, and the socket
    /// is cut, so that a thread blocked writing to the peer returns at once.
    fn stall(&mut self) {
        if let Some(Pending::Wire { wr_id, opcode, .. }) = self.pending.front() {
            let c = Completion::new(*wr_id, Status::RetryExceeded, *opcode, 0);
            self.pending.pop_front();
            self.q.push(c);
        }
        self.fail();
        self.out.cut();
    }

    /// [`State::stall`] if the oldest work request on the wire has waited longer than `limit`
    /// for its answer; true if so.
    fn expire(&mut self, limit: Duration) -> bool {
        let stale = matches!(self.pending.front(), Some(Pending::Wire { since, .. }) if since.elapsed() > limit);
        if stale {
            self.stall();
        }
        stale
    }

    /// Completes the locally decided work requests now at the head of the send queue.
    fn drain_local(&mut self) {
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
    /// Starts the queue pair on an established, handshaken stream. `before` runs before the
    /// reader thread applies the peer's first frame, so the Receives it posts are in place.
    pub(super) fn start(
        stream: TcpStream,
        pd: &TcpPd,
        caps: QpCaps,
        before: impl FnOnce(TcpQp) -> (TcpQp, Result<()>),
    ) -> Result<TcpQp> {
        let clone = |s: &TcpStream| s.try_clone().map_err(|_| Error::ConnectionAborted);
        stream.set_read_timeout(None).map_err(|_| Error::ConnectionAborted)?;
        // A write that moves nothing for this long is a peer that stopped reading.
        stream
            .set_write_timeout(Some(caps.retry_timeout.max(Duration::from_millis(1))))
            .map_err(|_| Error::ConnectionAborted)?;
        let _ = stream.set_nodelay(true);
        let rd = clone(&stream)?;
        let out = Arc::new(Outbox {
            q: Mutex::new(OutQ {
                frames: VecDeque::new(),
                closed: false,
                answers: 0,
                answer_bytes: 0,
                spare: Vec::new(),
            }),
            cv: Condvar::new(),
            sock: clone(&stream)?,
            stream: Mutex::new(BufWriter::with_capacity(64 << 10, stream)),
        });
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
                reader_running: true,
            }),
            cv: Condvar::new(),
            pd: pd.clone(),
            qp: crate::inproc::next_id(),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name.into()).spawn(f).map_err(|_| Error::ConnectionAborted)
        };
        let w = sh.clone();
        let retry = caps.retry_timeout;
        spawn("verbs-tcp-tx", Box::new(move || writer(w, out, retry)))?;
        // Dropping `qp` on an error disconnects, which the peer sees as end of stream.
        let (qp, before) = before(TcpQp { sh, caps });
        if let Err(e) = before {
            lock(&qp.sh.st).reader_running = false;
            return Err(e);
        }
        let r = qp.sh.clone();
        if let Err(e) = spawn("verbs-tcp-rx", Box::new(move || reader(r, rd))) {
            let mut st = lock(&qp.sh.st);
            st.reader_running = false;
            st.fail();
            return Err(e);
        }
        Ok(qp)
    }

    fn notify(&self, st: MutexGuard<'_, State>) -> Result<()> {
        self.sh.signal(st);
        Ok(())
    }

    /// Locks the state for a send-queue work request: refuses it if the send queue is full,
    /// and completes it as flushed (returning `None`) if the queue pair is in Error or a local
    /// error is queued ahead of it.
    /// The connection's outbox (for a frame to fill before posting).
    fn outbox(&self) -> Arc<Outbox> {
        lock(&self.sh.st).out.clone()
    }

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

    /// Posts a frame-carrying work request, or its local failure.
    fn post(
        &self,
        wr_id: u64,
        opcode: Opcode,
        len: u32,
        frame: Option<Vec<u8>>,
        read_into: Vec<(TcpRegion, usize, usize)>,
        flags: SendFlags,
    ) -> Result<()> {
        let Some(mut st) = self.begin(wr_id, opcode, flags)? else { return Ok(()) };
        let Some(frame) = frame else {
            st.local(wr_id, opcode, Status::LocalProtectionError, flags);
            return self.notify(st);
        };
        st.pending.push_back(Pending::Wire { wr_id, opcode, len, read_into, since: Instant::now(), flags });
        st.out.push(Out::Request(frame));
        let out = st.out.clone();
        self.notify(st)?;
        if let Err(broke) = out.flush_here() {
            self.sh.broke(broke);
        }
        Ok(())
    }

    fn rdma(
        &self,
        wr_id: u64,
        sges: &[Sge<'_, TcpRegion>],
        remote: RemoteBuf,
        opcode: Opcode,
        flags: SendFlags,
    ) -> Result<()> {
        let total = rules::total_len(sges, self.caps.max_sge)?;
        let write = opcode == Opcode::RdmaWrite;
        let mut frame = self.outbox().frame(frame::MAX_HEAD_LEN + if write { total as usize } else { 0 });
        let (addr, rkey, len) = (remote.addr, remote.rkey, total);
        let head = if write { Head::Write { addr, rkey, len } } else { Head::ReadReq { addr, rkey, len } };
        head.encode(&mut frame);
        let mut read_into = Vec::new();
        let ok = if write {
            self.gather(sges, &mut frame)
        } else {
            let pd = self.sh.pd.0.id;
            read_into = sges.iter().map(|s| (s.region.clone(), s.offset, s.len)).collect();
            rules::local_sges_ok(sges, pd, true)
        };
        self.post(wr_id, opcode, total, ok.then_some(frame), read_into, flags)
    }

    fn wait_for<T>(&self, timeout: Duration, take: impl FnMut(&mut State) -> Option<T>) -> Option<T> {
        // Not counted: this condition variable has other waiters too (the writer's linger).
        rules::wait_for(&self.sh.st, &self.sh.cv, timeout, |_| None, take)
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
        let total = rules::total_len(sges, self.caps.max_sge)?;
        let mut frame = self.outbox().frame(frame::MAX_HEAD_LEN + total as usize);
        let head = match invalidate {
            Some(rkey) => Head::SendInv { rkey, len: total },
            None => Head::Send { len: total },
        };
        head.encode(&mut frame);
        let ok = self.gather(sges, &mut frame);
        self.post(wr_id, Opcode::Send, total, ok.then_some(frame), Vec::new(), flags)
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
        self.rdma(wr_id, sges, remote, Opcode::RdmaWrite, flags)
    }

    fn post_read(&self, wr_id: u64, sges: &[Sge<'_, TcpRegion>], remote: RemoteBuf) -> Result<()> {
        self.rdma(wr_id, sges, remote, Opcode::RdmaRead, SendFlags::SIGNALED)
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

    /// Queues the FIN behind what is already queued; if a thread is blocked writing to the
    /// peer (which then is not reading), cuts the socket instead, so nothing waits on it.
    fn disconnect(&self) {
        let mut st = lock(&self.sh.st);
        st.fail();
        let out = st.out.clone();
        self.sh.signal(st);
        if matches!(out.stream.try_lock(), Err(std::sync::TryLockError::WouldBlock)) {
            out.cut();
        }
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

impl Shared {
    /// The stream broke under a writer: a stall fails the oldest work request on the wire with
    /// [`Status::RetryExceeded`]; anything else just tears the connection down.
    fn broke(&self, how: Broke) {
        let mut st = lock(&self.st);
        match how {
            Broke::Stalled => st.stall(),
            Broke::Reset => st.fail(),
        }
        self.signal(st);
    }

    /// Fails the oldest work request on the wire if it has waited longer than `retry`
    /// ([`State::expire`]) and wakes its waiters; true if it did. The state is locked only
    /// for that: the writer that calls this locks its outbox next.
    fn expire(&self, retry: Duration) -> bool {
        let mut st = lock(&self.st);
        let expired = st.expire(retry);
        if expired {
            self.signal(st);
        }
        expired
    }

    /// Unlocks `st`, then wakes whoever waits on what changed under it: the threads in
    /// `wait_cq` and `cm_event`, and the waker a queued completion fired
    /// ([`QueuePair::arm_waker`]).
    fn signal(&self, mut st: MutexGuard<'_, State>) {
        let fired = st.q.take_fired();
        drop(st);
        self.cv.notify_all();
        if let Some(waker) = fired {
            waker.wake();
        }
    }
}

/// Sends frames the posting threads left queued (responses, and posts made while the stream
/// was busy) until the FIN is out or the stream breaks, and watches the oldest work request on
/// the wire against the retry timeout. Then lingers up to the retry timeout for the reader to
/// see the peer's end of stream, and cuts the socket: a peer that never closes its half keeps
/// no thread of ours.
fn writer(sh: Arc<Shared>, out: Arc<Outbox>, retry: Duration) {
    let tick = (retry / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        {
            let mut q = lock(&out.q);
            while q.frames.is_empty() && !q.closed {
                let (g, waited) = out.cv.wait_timeout(q, tick).unwrap_or_else(|e| e.into_inner());
                q = g;
                if waited.timed_out() {
                    drop(q);
                    sh.expire(retry);
                    q = lock(&out.q);
                }
            }
            if q.closed {
                break;
            }
        }
        let drained = out.drain(&mut lock(&out.stream));
        if let Err(how) = drained {
            sh.broke(how);
            break;
        }
        if sh.expire(retry) {
            break;
        }
    }
    let deadline = Instant::now() + retry;
    let mut st = lock(&sh.st);
    while st.reader_running {
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else { break };
        st = sh.cv.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
    }
    drop(st);
    out.cut();
}

/// Applies the peer's frames until the stream ends or the connection fails, then drains the
/// stream to its end (or until the writer cuts it) so the peer's writer never blocks on us.
fn reader(sh: Arc<Shared>, stream: TcpStream) {
    let mut r = BufReader::with_capacity(256 << 10, stream);
    let _ = apply_frames(&sh, &mut r);
    let mut st = lock(&sh.st);
    st.fail();
    sh.signal(st);
    let _ = io::copy(&mut r, &mut io::sink());
    lock(&sh.st).reader_running = false;
    sh.cv.notify_all();
}

/// Why frame processing stopped: the stream ended or broke, or the connection failed.
struct Stop;

impl From<io::Error> for Stop {
    fn from(_: io::Error) -> Self {
        Stop
    }
}

/// Runs `f` on the state and wakes waiters if it gave them something (a completion, a CM
/// event, the Error state); `f` returning false stops frame processing. An answer to the
/// peer's request, or an unsignaled work request's success ([`SendFlags`]), gives a waiter
/// nothing: waking it for that was a thread switch for nothing.
fn with_state(sh: &Shared, f: impl FnOnce(&mut State) -> bool) -> Result<(), Stop> {
    let mut st = lock(&sh.st);
    let mark = |st: &State| (st.q.queued(), st.events.len(), st.connected);
    let before = mark(&st);
    let go = f(&mut st);
    if mark(&st) != before {
        sh.signal(st);
    }
    if go {
        Ok(())
    } else {
        Err(Stop)
    }
}

fn apply_frames(sh: &Shared, r: &mut impl Read) -> Result<(), Stop> {
    let pd = sh.pd.0.id;
    loop {
        if !lock(&sh.st).connected {
            return Err(Stop);
        }
        match Head::read(r)? {
            Head::Send { len } => recv_send(sh, r, None, len as usize)?,
            Head::SendInv { rkey, len } => recv_send(sh, r, Some(rkey), len as usize)?,
            head @ (Head::Write { addr, rkey, len } | Head::ReadReq { addr, rkey, len }) => {
                let write = matches!(head, Head::Write { .. });
                let len = len as usize;
                let target = match rules::rdma_target(&sh.pd.0, sh.qp, RemoteBuf { addr, rkey }, len, write) {
                    Ok(target) => target,
                    Err(status) => return with_state(sh, |st| (st.nak(status), false).1),
                };
                let mut resp = Vec::new();
                if let Some((t, off)) = target {
                    let mut d = lock(&t.data);
                    if !Rule::Remote.allows(&t, &d, off, len) {
                        drop(d);
                        return with_state(sh, |st| (st.nak(Status::RemoteAccessError), false).1);
                    }
                    if write {
                        r.read_exact(&mut d.buf[off..off + len])?;
                    } else {
                        resp.reserve_exact(frame::MAX_HEAD_LEN + len);
                        Head::ReadResp { len: len as u32 }.encode(&mut resp);
                        resp.extend_from_slice(&d.buf[off..off + len]);
                    }
                } else if !write {
                    Head::ReadResp { len: 0 }.encode(&mut resp);
                }
                let answer = if write { Out::Acks(1) } else { Out::Answer(resp) };
                with_state(sh, |st| st.answer(answer))?;
            }
            Head::Ack => with_state(sh, |st| match st.pending.pop_front() {
                Some(Pending::Wire { wr_id, opcode, len, flags, .. }) if opcode != Opcode::RdmaRead => {
                    st.q.push_wr(Completion::new(wr_id, Status::Success, opcode, len), flags);
                    st.drain_local();
                    true
                }
                _ => false, // protocol violation
            })?,
            Head::ReadResp { len } => {
                let front = match lock(&sh.st).pending.front() {
                    Some(Pending::Wire { opcode: Opcode::RdmaRead, len: want, read_into, .. }) if *want == len => {
                        read_into.clone()
                    }
                    _ => return Err(Stop),
                };
                let mut landed = true;
                let rule = Rule::Local { pd, write: true };
                for (region, off, l) in &front {
                    let mut d = lock(&region.0.data);
                    if !rule.allows(&region.0, &d, *off, *l) {
                        landed = false;
                        break;
                    }
                    r.read_exact(&mut d.buf[*off..*off + *l])?;
                }
                with_state(sh, |st| {
                    if !st.connected {
                        return false;
                    }
                    let Some(Pending::Wire { wr_id, len, flags, .. }) = st.pending.pop_front() else { return false };
                    if landed {
                        st.q.push_wr(Completion::new(wr_id, Status::Success, Opcode::RdmaRead, len), flags);
                        st.drain_local();
                    } else {
                        st.q.push(Completion::new(wr_id, Status::LocalProtectionError, Opcode::RdmaRead, 0));
                        st.fail();
                    }
                    landed
                })?;
            }
            Head::Nak(code) => {
                return with_state(sh, |st| {
                    if let Some(Pending::Wire { wr_id, opcode, .. }) = st.pending.pop_front() {
                        st.q.push(Completion::new(wr_id, code.status(), opcode, 0));
                    }
                    st.fail();
                    false
                });
            }
        }
    }
}

/// Lands an incoming Send in the oldest posted Receive, or refuses it.
fn recv_send(sh: &Shared, r: &mut impl Read, invalidate: Option<u32>, len: usize) -> Result<(), Stop> {
    // Queues the Receive's error completion, if one was consumed, and refuses the Send.
    let refuse = |refusal: Refusal| {
        with_state(sh, |st| {
            if let Some(p) = st.rq.pop_front() {
                if let Some(status) = refusal.recv {
                    st.q.push(Completion::new(p.wr_id, status, Opcode::Recv, 0));
                }
            }
            st.nak(refusal.sender);
            false
        })
    };
    let front = {
        let st = lock(&sh.st);
        let admitted = rules::admit_send(st.rq.front(), len, invalidate, &sh.pd.0, sh.qp);
        admitted.map(|()| st.rq.front().map(|p| (p.region.clone(), p.offset)))
    };
    let (region, off) = match front {
        Ok(Some(front)) => front,
        Ok(None) => return Err(Stop), // admitted, so a Receive was there
        Err(refusal) => return refuse(refusal),
    };
    if len > 0 {
        let mut d = lock(&region.data);
        // Checked again under the lock that covers the copy: an invalidation may have raced.
        if !PostedRecv::rule(&sh.pd.0).allows(&region, &d, off, len) {
            drop(d);
            return refuse(UNUSABLE_RECEIVE);
        }
        r.read_exact(&mut d.buf[off..off + len])?;
    }
    with_state(sh, |st| {
        if !st.connected {
            return false;
        }
        let Some(p) = st.rq.pop_front() else { return false };
        st.q.push(p.received(len, invalidate));
        st.answer(Out::Acks(1))
    })
}
