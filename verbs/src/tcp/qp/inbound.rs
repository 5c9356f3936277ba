//! A connection's inbound frames, applied as their bytes arrive: the readiness loop hands each
//! read's bytes to [`Inbound::feed`], which keeps a head that arrived in parts and lands a
//! payload, piece by piece, straight where it goes (a posted Receive, a Write's target region,
//! a Read's scatter list), checking the target's rule under its lock for every piece, or among
//! the offers held for this side to take (`offered.rs`, one buffer of a fixed size). Nothing a
//! length announces is allocated: a payload lands only in memory registered for it or in that
//! buffer, and an offer too long for it is dropped as it arrives.

use std::sync::Arc;

use super::offered;
use super::{Out, Pending, Shared, Stop};
use crate::inproc::region::{RegionInner, Rule};
use crate::inproc::rules::{self, PostedRecv, Refusal, UNUSABLE_RECEIVE};
use crate::tcp::frame::{FrameError, Head, MAX_HEAD_LEN};
use crate::tcp::TcpRegion;
use crate::{lock, Completion, Opcode, RemoteBuf, Status};

/// The peer's frames so far (see the [module documentation](self)).
#[derive(Default)]
pub(super) struct Inbound {
    /// A head that arrived in parts.
    head: [u8; MAX_HEAD_LEN],
    filled: usize,
    /// The payload being landed.
    payload: Option<Payload>,
    /// Frame processing stopped (the connection failed): what still arrives is dropped.
    stopped: bool,
}

/// A payload partly landed.
struct Payload {
    to: Landing,
    done: usize,
    len: usize,
}

/// Where a payload lands.
enum Landing {
    /// A Send's, in the oldest posted Receive at `off`; `invalidate` is its Send with
    /// Invalidate's key.
    Receive { region: Arc<RegionInner>, off: usize, invalidate: Option<u32> },
    /// A Write's, in its target region at `off`, through `key` (looked up again for each
    /// later piece: [`Payload::land`]).
    Write { region: Arc<RegionInner>, off: usize, key: RemoteBuf },
    /// A Read response's, across the oldest Read's scatter list.
    ReadResponse { into: Vec<(TcpRegion, usize, usize)> },
    /// An offer's, among the offers held (`None`: too long to hold, its bytes dropped).
    Offer(Option<offered::Landing>),
}

impl Inbound {
    /// Applies `bytes`, the next of the stream. `Err` once the connection has failed (the
    /// caller tears it down); from then on bytes are dropped.
    pub(super) fn feed(&mut self, sh: &Shared, bytes: &[u8]) -> Result<(), Stop> {
        if self.stopped {
            return Ok(());
        }
        let r = self.apply(sh, bytes);
        if r.is_err() {
            self.stopped = true;
            self.payload = None;
        }
        r
    }

    fn apply(&mut self, sh: &Shared, mut bytes: &[u8]) -> Result<(), Stop> {
        while !bytes.is_empty() {
            if let Some(p) = &mut self.payload {
                let n = (p.len - p.done).min(bytes.len());
                p.land(sh, &bytes[..n])?;
                bytes = &bytes[n..];
                if p.done == p.len {
                    let p = self.payload.take().expect("a payload is being landed");
                    p.finish(sh)?;
                }
                continue;
            }
            let need = match Head::decode(&self.head[..self.filled]) {
                Err(FrameError::Incomplete { need }) => need,
                Ok(_) => 0,
                Err(_) => return Err(Stop), // not a frame: a protocol violation
            };
            let k = need.min(bytes.len());
            self.head[self.filled..self.filled + k].copy_from_slice(&bytes[..k]);
            self.filled += k;
            bytes = &bytes[k..];
            match Head::decode(&self.head[..self.filled]) {
                Ok((head, _)) => {
                    self.filled = 0;
                    // A queue pair in Error accepts nothing more: no Write lands, no Read is
                    // answered, once this side has torn down (as the old reader checked
                    // before each frame).
                    if !lock(&sh.st).connected {
                        return Err(Stop);
                    }
                    self.payload = start(sh, head)?;
                }
                Err(FrameError::Incomplete { .. }) => {}
                Err(_) => return Err(Stop),
            }
        }
        Ok(())
    }
}

/// Acts on a frame's head: what needs no payload is done at once; otherwise the payload's
/// landing, checked, is returned.
fn start(sh: &Shared, head: Head) -> Result<Option<Payload>, Stop> {
    match head {
        Head::Send { len } => start_send(sh, None, len as usize),
        Head::SendInv { rkey, len } => start_send(sh, Some(rkey), len as usize),
        Head::Write { addr, rkey, len } | Head::ReadReq { addr, rkey, len } => {
            let write = matches!(head, Head::Write { .. });
            let len = len as usize;
            let target = match rules::rdma_target(&sh.pd.0, sh.qp, RemoteBuf { addr, rkey }, len, write) {
                Ok(target) => target,
                Err(status) => return refuse_request(sh, status).map(|()| None),
            };
            let mut resp = Vec::new();
            if let Some((t, off)) = target {
                let d = lock(&t.data);
                if !Rule::Remote.allows(&t, &d, off, len) {
                    drop(d);
                    return refuse_request(sh, Status::RemoteAccessError).map(|()| None);
                }
                // A Read response longer than the answers this side queues is refused at the
                // answer bound anyway: refused here, before its copy is made (a request for a
                // large readable region would otherwise cost a transient copy of its size).
                if !write && MAX_HEAD_LEN + len > super::MAX_QUEUED_ANSWER_BYTES {
                    drop(d);
                    return refuse_request(sh, Status::RemoteInvalidRequest).map(|()| None);
                }
                if write {
                    drop(d);
                    let key = RemoteBuf { addr, rkey };
                    return Ok(Some(Payload { to: Landing::Write { region: t, off, key }, done: 0, len }));
                }
                resp.reserve_exact(MAX_HEAD_LEN + len);
                Head::ReadResp { len: len as u32 }.encode(&mut resp);
                resp.extend_from_slice(&d.buf[off..off + len]);
            } else if !write {
                Head::ReadResp { len: 0 }.encode(&mut resp);
            }
            let answer = if write { Out::Acks(1) } else { Out::Answer(resp) };
            sh.with_state(|st| st.answer(answer)).map(|()| None)
        }
        Head::Ack => sh
            .with_state(|st| match st.pending.pop_front() {
                Some(Pending::Wire { wr_id, opcode, len, flags, .. }) if opcode != Opcode::RdmaRead => {
                    st.q.push_wr(Completion::new(wr_id, Status::Success, opcode, len), flags);
                    st.drain_local();
                    true
                }
                _ => false, // protocol violation
            })
            .map(|()| None),
        Head::ReadResp { len } => {
            let into = match lock(&sh.st).pending.front() {
                Some(Pending::Wire { opcode: Opcode::RdmaRead, len: want, read_into, .. }) if *want == len => {
                    read_into.clone()
                }
                _ => return Err(Stop),
            };
            let p = Payload { to: Landing::ReadResponse { into }, done: 0, len: len as usize };
            if len == 0 {
                p.finish(sh)?;
                return Ok(None);
            }
            Ok(Some(p))
        }
        Head::Offer { addr, rkey, len } => {
            let to = lock(&sh.offered).begin(rkey, addr, len as usize);
            Ok(Some(Payload { to: Landing::Offer(to), done: 0, len: len as usize }).filter(|p| p.len > 0))
        }
        Head::Nak(code) => sh
            .with_state(|st| {
                if let Some(Pending::Wire { wr_id, opcode, .. }) = st.pending.pop_front() {
                    st.q.push(Completion::new(wr_id, code.status(), opcode, 0));
                }
                st.fail();
                false
            })
            .map(|()| None),
    }
}

/// Admits an incoming Send into the oldest posted Receive, or refuses it.
fn start_send(sh: &Shared, invalidate: Option<u32>, len: usize) -> Result<Option<Payload>, Stop> {
    let front = {
        let st = lock(&sh.st);
        let admitted = rules::admit_send(st.rq.front(), len, invalidate, &sh.pd.0, sh.qp);
        admitted.map(|()| st.rq.front().map(|p| (p.region.clone(), p.offset)))
    };
    let (region, off) = match front {
        Ok(Some(front)) => front,
        Ok(None) => return Err(Stop), // admitted, so a Receive was there
        Err(refusal) => return refuse(sh, refusal).map(|()| None),
    };
    let p = Payload { to: Landing::Receive { region, off, invalidate }, done: 0, len };
    if len == 0 {
        p.finish(sh)?;
        return Ok(None);
    }
    Ok(Some(p))
}

/// Refuses the peer's request (NAK with the status its work request gets) and tears the
/// connection down: frame processing stops.
fn refuse_request(sh: &Shared, status: Status) -> Result<(), Stop> {
    sh.with_state(|st| {
        st.nak(status);
        false
    })
}

/// Queues the Receive's error completion, if one was consumed, and refuses the Send.
fn refuse(sh: &Shared, refusal: Refusal) -> Result<(), Stop> {
    sh.with_state(|st| {
        if let Some(p) = st.rq.pop_front() {
            if let Some(status) = refusal.recv {
                st.q.push(Completion::new(p.wr_id, status, Opcode::Recv, 0));
            }
        }
        st.nak(refusal.sender);
        false
    })
}

impl Payload {
    /// Lands the next `bytes` of the payload, each piece checked under its region's lock
    /// against the rule for the whole range (an invalidation may come between two pieces).
    fn land(&mut self, sh: &Shared, bytes: &[u8]) -> Result<(), Stop> {
        let (len, done) = (self.len, self.done);
        if done > 0 {
            // This payload began in an earlier read of the socket: since then this side may
            // have torn the connection down (a queue pair in Error accepts nothing) or, for a
            // Write, invalidated the key it came through. The rest then never lands, as a
            // device's later packets fail against the queue pair or the key.
            if !lock(&sh.st).connected {
                return Err(Stop);
            }
            if let Landing::Write { region, off, key } = &self.to {
                let target = rules::rdma_target(&sh.pd.0, sh.qp, *key, len, true);
                if !matches!(target, Ok(Some((r, o))) if Arc::ptr_eq(&r, region) && o == *off) {
                    return refuse_request(sh, Status::RemoteAccessError);
                }
            }
        }
        match &self.to {
            Landing::Receive { region, off, .. } => {
                let mut d = lock(&region.data);
                if !PostedRecv::rule(&sh.pd.0).allows(region, &d, *off, len) {
                    drop(d);
                    return refuse(sh, UNUSABLE_RECEIVE);
                }
                d.buf[off + done..off + done + bytes.len()].copy_from_slice(bytes);
            }
            Landing::Write { region, off, .. } => {
                let mut d = lock(&region.data);
                if !Rule::Remote.allows(region, &d, *off, len) {
                    drop(d);
                    return refuse_request(sh, Status::RemoteAccessError);
                }
                d.buf[off + done..off + done + bytes.len()].copy_from_slice(bytes);
            }
            Landing::ReadResponse { into } => {
                let rule = Rule::Local { pd: sh.pd.0.id, write: true };
                // The pieces of the scatter list from stream position `done` on.
                let (mut pos, mut rest, mut start) = (done, bytes, 0usize);
                for (region, off, l) in into {
                    if rest.is_empty() {
                        break;
                    }
                    let end = start + l;
                    if pos < end {
                        let from = pos - start;
                        let n = (l - from).min(rest.len());
                        let mut d = lock(&region.0.data);
                        if !rule.allows(&region.0, &d, *off, *l) {
                            drop(d);
                            return sh.with_state(|st| {
                                if let Some(Pending::Wire { wr_id, .. }) = st.pending.pop_front() {
                                    let c = Completion::new(wr_id, Status::LocalProtectionError, Opcode::RdmaRead, 0);
                                    st.q.push(c);
                                }
                                st.fail();
                                false
                            });
                        }
                        d.buf[off + from..off + from + n].copy_from_slice(&rest[..n]);
                        rest = &rest[n..];
                        pos += n;
                    }
                    start = end;
                }
            }
            Landing::Offer(to) => {
                if let Some(to) = to {
                    lock(&sh.offered).land(*to, done, bytes);
                }
            }
        }
        self.done += bytes.len();
        Ok(())
    }

    /// The payload has landed: complete what it was.
    fn finish(self, sh: &Shared) -> Result<(), Stop> {
        match self.to {
            Landing::Receive { invalidate, .. } => sh.with_state(|st| {
                if !st.connected {
                    return false;
                }
                let Some(p) = st.rq.pop_front() else { return false };
                st.q.push(p.received(self.len, invalidate));
                st.answer(Out::Acks(1))
            }),
            Landing::Write { .. } => sh.with_state(|st| st.answer(Out::Acks(1))),
            Landing::Offer(to) => {
                if let Some(to) = to {
                    lock(&sh.offered).finish(to);
                }
                Ok(())
            }
            Landing::ReadResponse { .. } => sh.with_state(|st| {
                if !st.connected {
                    return false;
                }
                let Some(Pending::Wire { wr_id, len, flags, .. }) = st.pending.pop_front() else { return false };
                st.q.push_wr(Completion::new(wr_id, Status::Success, Opcode::RdmaRead, len), flags);
                st.drain_local();
                true
            }),
        }
    }
}
