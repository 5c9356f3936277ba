//! The responder's side: the real `Responder` state machine per connection, served as
//! `Server`'s connection loop serves it (negotiate/src/server.rs): the call's Read chunks
//! fetched from simulated memory, reassembled, run by a service that may be slow, panic or
//! answer too much, and answered with a reply marshaled by `rpcrdma-v1`, or with what
//! `FailureAnswer` says when it cannot be served. With the hostile fault on, the responder
//! sometimes answers a call with something else altogether.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cm_private_data::{Flags, PrivateData};
use negotiate::backchannel::{BackwardEnd, BackwardSlot};
use negotiate::datapath::DataPathError;
use negotiate::responder::{self, ReplyParams};
use negotiate::serve::{Serve, Service, Step};
use negotiate::server::FailureAnswer;
use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_reply::{marshal_reply, MarshaledReply, ProvidedChunks, ReplyRequest};
use rpcrdma_v1::reassemble::{
    check_call_ddp_eligibility, encode_garbage_args_reply, encode_system_err_reply, fetch_len, read_list_fetches,
    reassemble_call, GARBAGE_ARGS_REPLY_LEN,
};
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::verdict::ErrorReply;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Completion, Status};

use super::client::{echo, oversized, ULB};
use super::trace::{BackwardEnd as Ended, Closer, Event, Lie, Refusal};
use super::{words, Faults, Rng, Sim, TIMEOUT};

pub struct SimServer {
    faults: Faults,
    conns: HashMap<u32, Serve>,
    /// Executions of each call on each connection.
    executions: HashMap<(u32, u32), u32>,
    twice: Option<String>,
    /// A connection closed over a call the server could have answered.
    closed_instead: Option<String>,
    overrun: Option<String>,
    /// Per connection, the service is running a call until then; that connection's later
    /// messages wait (one serving thread per connection, as `Server` has).
    busy: HashMap<u32, Duration>,
    /// Per connection, its backward-direction call (`Server`'s own `BackwardSlot`).
    backward: HashMap<u32, BackwardSlot>,
    /// The side stream ([`Rng::side`]): when backward calls go out.
    side: Rng,
    backward_sent: u32,
    /// Backward calls ended: by the client's reply, its RDMA_ERROR, the connection's end.
    pub backward_ended: (u32, u32, u32),
    /// A backward call the client answered that did not end then (finding 6).
    backward_stuck: Option<String>,
}

/// The reply a call got, and how long its service took.
struct Served {
    send: Vec<u8>,
    took: Duration,
}

impl SimServer {
    pub fn new(faults: Faults, side: Rng) -> SimServer {
        SimServer {
            backward: HashMap::new(),
            side,
            backward_sent: 0,
            backward_ended: (0, 0, 0),
            backward_stuck: None,
            faults,
            conns: HashMap::new(),
            executions: HashMap::new(),
            twice: None,
            closed_instead: None,
            overrun: None,
            busy: HashMap::new(),
        }
    }

    /// Accepts link `id` at `now`; returns the private data of the accept.
    pub fn on_connected(&mut self, id: u32, received: &[u8], now: Instant) -> Vec<u8> {
        let versions =
            if self.faults.v1_only_responder { (Version::ONE, Version::ONE) } else { (Version::ONE, Version::TWO) };
        let cfg = responder::ResponderConfig::default().versions(versions);
        let ours = self.faults.private_data.1.then(|| PrivateData::new(Flags::empty(), 4096, 4096));
        self.conns.insert(id, Serve::new(cfg, self.faults.idle_timeout, received, ours, now));
        ours.map(|p| p.encode().to_vec()).unwrap_or_default()
    }

    /// When connection `link` turns idle if nothing arrives before.
    pub fn idle_deadline(&self, link: u32) -> Option<Instant> {
        self.conns.get(&link).map(Serve::idle_deadline)
    }

    /// Closes connection `link` if it has been idle for the idle timeout (as `Server` does),
    /// unless its serving thread is still running a call.
    pub fn close_if_idle(&mut self, sim: &mut Sim, link: u32) {
        let busy = self.busy_until(link) > sim.now;
        if !busy && self.conns.get(&link).is_some_and(|c| c.is_idle(sim.instant())) {
            self.close(sim, link, Closer::ServerIdle);
        }
    }

    pub fn on_disconnected(&mut self, sim: &mut Sim, id: u32) {
        self.conns.remove(&id);
        self.busy.remove(&id);
        if let Some(mut slot) = self.backward.remove(&id) {
            slot.close();
            if slot.take() == Some(BackwardEnd::Closed) {
                self.backward_ended.2 += 1;
                sim.record(Event::BackwardEnded { link: id, by: Ended::Closed });
            }
        }
    }

    /// RFC 8166 section 4.5 (finding 6): the client's RDMA_ERROR completes the backward call
    /// it names, as its reply does: none may wait once its answer has arrived.
    pub fn backward_call_stuck(&self) -> Option<String> {
        self.backward_stuck.clone()
    }

    /// After serving a call in `version` on `link`, now and then, a backward call of our own
    /// (an RPC CALL inline in an RDMA_MSG, as `Backchannel::call` sends it).
    fn maybe_call_backward(&mut self, sim: &mut Sim, link: u32, version: u32) {
        if !self.side.chance(self.faults.backward_calls) {
            return;
        }
        self.backward_sent += 1;
        let xid = 0xb000_0000 | self.backward_sent;
        if self.backward.entry(link).or_default().start(xid).is_ok() {
            sim.record(Event::BackwardCall { xid, link });
            sim.send_backward(false, words(&[xid, version, 1, 0, 0, 0, 0, xid, 0, 2, 0x4000_0000, 1, 0]));
        }
    }

    /// A message from the client that the responder took for an answer to a backward call.
    fn backward_answer(
        &mut self,
        sim: &mut Sim,
        link: u32,
        xid: u32,
        end: Result<Vec<u8>, negotiate::reply::PeerError>,
    ) {
        let Some(slot) = self.backward.get_mut(&link) else { return };
        let taken = match end {
            Ok(bytes) => slot.on_reply(xid, bytes),
            Err(e) => slot.on_peer_error(xid, e),
        };
        if taken {
            match slot.take() {
                Some(BackwardEnd::Reply(_)) => {
                    self.backward_ended.0 += 1;
                    sim.record(Event::BackwardEnded { link, by: Ended::Reply });
                }
                Some(BackwardEnd::Error(_)) => {
                    self.backward_ended.1 += 1;
                    sim.record(Event::BackwardEnded { link, by: Ended::Error });
                }
                _ => {}
            }
            slot.finish();
        }
    }

    /// When connection `link`'s serving thread is free to take its next message.
    pub fn busy_until(&self, link: u32) -> Duration {
        self.busy.get(&link).copied().unwrap_or_default()
    }

    pub fn executions(&self) -> u32 {
        self.executions.values().sum()
    }

    /// RFC 8166 section 4.5: a call the responder cannot serve is answered (ERR_CHUNK, an
    /// RPC error reply) and the connection kept; only a failure of the transport itself, after
    /// which nothing can be sent, may close it (4.5.4).
    pub fn closed_over_an_answerable_call(&self) -> Option<String> {
        self.closed_instead.clone()
    }

    pub fn twice_on_one_connection(&self) -> Option<String> {
        self.twice.clone()
    }

    pub fn credit_overrun(&self) -> Option<String> {
        self.overrun.clone()
    }

    pub fn on_message(&mut self, sim: &mut Sim, link: u32, bytes: &[u8]) {
        let now = sim.instant();
        // What arrived behind it already (due now), as a Receive queue would hold it.
        let waiting = sim.link.as_ref().map_or(0, |l| l.to_server.iter().take_while(|(t, _)| *t <= sim.now).count());
        let Some(conn) = self.conns.get_mut(&link) else { return };
        match conn.on_message(bytes, waiting, now) {
            Step::Call { header, params: p } => {
                let xid = header.xid();
                if conn.responder().overruns() > 0 {
                    self.overrun =
                        Some(format!("call {xid:#x} arrived beyond the credits granted on connection {link}"));
                }
                if sim.rng.chance(self.faults.hostile) {
                    let (what, lie) = hostile(sim, xid, p.version.wire(), p.credits);
                    sim.record(Event::Lie { xid, link, lie: what });
                    sim.send(false, lie);
                    return;
                }
                let runs = self.executions.entry((link, xid)).or_default();
                *runs += 1;
                if *runs > 1 {
                    self.twice = Some(format!("call {xid:#x} executed {runs} times on connection {link}"));
                }
                let served = serve(sim, conn, link, &header, &p);
                match served {
                    Ok(served) => {
                        self.busy.insert(link, sim.now + served.took);
                        sim.send_after(false, served.send, served.took);
                        self.maybe_call_backward(sim, link, p.version.wire());
                    }
                    Err(e) => match self.conns.get(&link).and_then(|c| c.on_failure(&e)) {
                        Some(FailureAnswer::ErrChunk) => {
                            sim.record(Event::Refused { xid, link, with: Refusal::ErrChunk });
                            sim.send(false, ErrorReply::err_chunk(xid, p.version, p.credits).as_bytes().to_vec())
                        }
                        Some(FailureAnswer::GarbageArgs) => {
                            let mut reply = [0u8; GARBAGE_ARGS_REPLY_LEN];
                            let n = encode_garbage_args_reply(xid, &mut reply).expect("sized");
                            sim.record(Event::Refused { xid, link, with: Refusal::GarbageArgs });
                            // The call was not received whole: the binding gets none.
                            match marshal(sim, link, &header, &[], &p, &reply[..n]) {
                                Ok(send) => sim.send(false, send),
                                Err(_) => self.close(sim, link, Closer::ServerFailure),
                            }
                        }
                        // Nothing can be sent: close (RFC 8166 section 4.5.4).
                        None => {
                            if !matches!(e, DataPathError::Completion(_)) {
                                self.closed_instead = Some(format!(
                                    "connection {link} closed over call {xid:#x}, which it could answer: {e}"
                                ));
                            }
                            self.close(sim, link, Closer::ServerFailure)
                        }
                    },
                }
            }
            Step::SendError(e) => {
                let bytes = e.as_bytes().to_vec();
                let word = |i: usize| bytes.get(i * 4..i * 4 + 4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
                let (xid, vers) = (word(0).unwrap_or_default(), word(4) == Some(1));
                sim.record(Event::ResponderError { xid, link, vers });
                sim.send(false, bytes)
            }
            // The simulated server registers no extension and sends no RDMA_OPTIONAL.
            Step::SendBack(answer) => sim.send(false, answer),
            Step::OptionAnswer { .. } => {}
            Step::BackwardReply(h) => {
                let xid = h.xid();
                self.backward_answer(sim, link, xid, Ok(bytes.to_vec()));
            }
            Step::PeerError { xid, error } => self.backward_answer(sim, link, xid, Err(error)),
            Step::Nothing => {}
        }
        // Whatever the responder made of it: a message carrying the outstanding backward
        // call's XID is the client's answer to it (its reply or its RDMA_ERROR), which ends it.
        let xid = bytes.get(..4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        let waiting = self.backward.get(&link).and_then(BackwardSlot::waiting_for);
        if waiting == Some(xid) && self.backward_stuck.is_none() {
            self.backward_stuck =
                Some(format!("backward call {xid:#x} on connection {link} still waits after the client's answer"));
        }
    }

    fn close(&mut self, sim: &mut Sim, link: u32, by: Closer) {
        if sim.link.as_ref().is_some_and(|l| l.id == link) {
            if let Some(id) = sim.link_down(by) {
                self.on_disconnected(sim, id);
                sim.with_client(|c, sim| c.on_disconnected(sim, id));
            }
        }
    }
}

/// Fetches, reassembles and runs one call, and marshals its reply.
fn serve(
    sim: &mut Sim,
    conn: &mut Serve,
    link: u32,
    header: &Header<'_>,
    p: &ReplyParams,
) -> Result<Served, DataPathError> {
    let msg = header.to_msg();
    let mut landing = vec![0u8; fetch_len(header.read_list()) as usize];
    for f in read_list_fetches(header.read_list()).filter(|f| f.length > 0) {
        let Some(data) = sim.mem.read(link, f.handle, f.offset, f.length as usize) else {
            return Err(remote_access_error());
        };
        landing[f.landing..f.landing + f.length as usize].copy_from_slice(data);
    }
    let mut call = Vec::new();
    reassemble_call(&msg, header.payload(), &landing, &mut call)?;
    check_call_ddp_eligibility(&msg, &call, &ULB, &mut Vec::new())?;
    let xid = header.xid();
    // The service, run as `Server` runs it (`Serve::run_service`): slow now and then (past
    // the requester's timeout), panicking now and then, and too large for the requester for
    // some calls.
    let slow = sim.rng.chance(50);
    let took = if slow { TIMEOUT * 3 / 2 } else { sim.rng.millis(2) };
    let panics = sim.rng.chance(20);
    let version = p.version.wire();
    sim.record(Event::Executed { xid, link, version, slow, panicked: panics, oversized: !panics && oversized(xid) });
    let service = || {
        if panics {
            std::panic::panic_any(SimulatedPanic);
        }
        let mut r = echo(&call);
        if oversized(xid) {
            r.resize(ULB.max_reply + 4096, 0);
        }
        r
    };
    let reply = match conn.run_service(service) {
        Service::Replied(r) => r,
        Service::Panicked => {
            let mut r = vec![0u8; GARBAGE_ARGS_REPLY_LEN];
            encode_system_err_reply(xid, &mut r).expect("sized");
            r
        }
    };
    Ok(Served { send: marshal(sim, link, header, &call, p, &reply)?, took })
}

/// Places `reply` in the call's chunks (simulated RDMA Writes) and returns the Send.
fn marshal(
    sim: &mut Sim,
    link: u32,
    header: &Header<'_>,
    call: &[u8],
    p: &ReplyParams,
    reply: &[u8],
) -> Result<Vec<u8>, DataPathError> {
    let mut results = Vec::new();
    ULB.reply_ddp_items(call, reply, 0, &mut results);
    let provided = ProvidedChunks { writes: header.write_list(), reply: header.reply_chunk() };
    let req =
        ReplyRequest { credits: p.credits, reply_inline_threshold: p.reply_inline_threshold, ddp_results: &results };
    let mut out = MarshaledReply::with_version(p.version);
    let mut send = vec![0; p.reply_inline_threshold];
    marshal_reply(reply, provided, &req, &mut send, &mut out)?;
    for w in out.writes() {
        if !sim.mem.write(link, w.handle, w.offset, &reply[w.src.clone()]) {
            return Err(remote_access_error());
        }
    }
    send.truncate(out.header_len());
    for r in out.inline() {
        send.extend_from_slice(&reply[r.clone()]);
    }
    Ok(send)
}

/// The payload of the simulated service's panics, which the quiet hook leaves unprinted.
pub struct SimulatedPanic;

/// Installs, once, a panic hook that prints every panic but the simulated service's.
pub fn quiet_simulated_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<SimulatedPanic>() {
                default(info);
            }
        }));
    });
}

fn remote_access_error() -> DataPathError {
    DataPathError::Completion(Completion { status: Status::RemoteAccessError, ..Completion::default() })
}

/// What a lying responder sends instead of a call's reply: every RDMA_ERROR kind, an
/// undecodable one, RDMA_OPTIONAL, a reply in another version, or garbage.
fn hostile(sim: &mut Sim, xid: u32, vers: u32, credits: u32) -> (Lie, Vec<u8>) {
    let error = 4; // RDMA_ERROR
    match sim.rng.below(10) {
        0 => (Lie::ErrChunk, words(&[xid, vers, credits, error, 2])), // ERR_CHUNK / RDMA2_ERR_BAD_HEADER
        1 => (Lie::ErrVersOne, words(&[xid, vers, credits, error, 1, 1, 1])), // ERR_VERS 1..1
        2 => (Lie::ErrVersNone, words(&[xid, vers, credits, error, 1, 3, 5])), // ERR_VERS with no common version
        3 => (Lie::InvalOption, words(&[xid, 2, credits, error, 3])), // RDMA2_ERR_INVAL_OPTION
        4 => (Lie::Undecodable, words(&[xid, vers, credits, error, 77])), // undecodable: dropped
        5 => (Lie::Optional, words(&[xid, 2, credits, 5, 0x99, 0])),  // RDMA_OPTIONAL
        // A version nobody speaks, and a reply whose RPC XID is another call's: neither may
        // complete the call (a lie the requester cannot tell from a real reply, a well-formed
        // reply of its own XID, is out of any requester's reach and not injected).
        6 => (Lie::UnknownVersion, words(&[xid, 7, credits, 0, 0, 0, 0, xid, 1, 0, 0, 0, 0])),
        7 => (Lie::OtherXid, words(&[xid, vers, credits, 0, 0, 0, 0, xid ^ 0x8000, 1, 0, 0, 0, 0])),
        // No such call.
        8 => (Lie::NoSuchCall, words(&[0xffff_0000 ^ xid, vers, credits, 0, 0, 0, 0, 0xffff_0000 ^ xid, 1])),
        _ => {
            let len = sim.rng.below(40) as usize;
            let mut b = words(&[xid]);
            b.extend((0..len).map(|_| sim.rng.next() as u8));
            (Lie::Garbage, b)
        }
    }
}
