//! The TCP connection manager: a non-blocking listening socket and the three-message
//! handshake (request, accept or reject, ready-to-use) that carries private data both ways.
//!
//! `get_request` sleeps on readiness (epoll, through mio) for the listening socket and every
//! handshake in progress, and reads only the sockets that have something to read, each
//! against its own deadline ([`ListenOptions::handshake_timeout`]): a connection that says
//! nothing, or drips its request a byte at a time, holds up no other and costs no CPU. One that
//! has spoken takes one of [`ListenOptions::max_pending`] places (beyond them it is dropped);
//! one that has said nothing yet takes only a descriptor, and of those the oldest is closed
//! when [`ListenOptions::max_silent`] are held or the process runs out of descriptors. A new
//! connection is read once as it is taken, so one whose request is already there never counts
//! as silent. So sockets that connect and say nothing, reopened as fast as they are dropped,
//! never shut out a newcomer that speaks (issue 26: 64 of them once turned away every new
//! client).

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};

use super::qp::TcpQp;
use super::TcpPd;
use crate::{
    lock, pad_private_data, ConnectRequest, Error, ListenOptions, Listener, PeerAddress, PeerHost, QpCaps, Result,
    ACCEPT_PRIVATE_DATA_MAX, CONNECT_PRIVATE_DATA_MAX,
};

const MAGIC: &[u8; 4] = b"VRBT";
const VERSION: u8 = 1;
const ACCEPT: u8 = b'A';
const REJECT: u8 = b'R';
const READY: u8 = b'U';
/// The request frame: magic, version, private data.
const REQUEST_LEN: usize = 5 + CONNECT_PRIVATE_DATA_MAX;
/// Entries of ended handshakes [`Pending::arrived`] lets stand beyond twice the live ones.
const ARRIVED_SLACK: usize = 64;

/// The listening socket's token; handshakes' tokens count up from 1.
const LISTENING: Token = Token(0);
/// The token of the waker [`Listener::close`] fires.
const CLOSING: Token = Token(usize::MAX);
/// How soon `get_request` tries again to take a connection it could not for want of
/// descriptors (readiness is edge-triggered: the listening socket will not say so again).
const RETRY_ACCEPT: Duration = Duration::from_millis(10);
/// How often an accept waiting for the connector's confirmation looks whether its listener
/// was closed ([`Listener::close`]).
const CONFIRM_SLICE: Duration = Duration::from_millis(20);

/// A listening TCP endpoint; dropping it closes the socket, which resets connections not yet
/// taken, so their connectors see [`Error::Rejected`].
pub struct TcpCmListener {
    listener: TcpListener,
    addr: String,
    opts: ListenOptions,
    /// Connections whose request frame is still arriving, and the readiness they wait on.
    pending: Mutex<Pending>,
    turned_away: AtomicU64,
    /// Set by [`Listener::close`]: the accepts of its requests stop waiting.
    closed: Arc<AtomicBool>,
    /// Wakes a `get_request` asleep in the readiness wait when the listener closes.
    closing: Waker,
}

/// The handshakes in progress and the readiness set that wakes `get_request` for them.
struct Pending {
    poll: Poll,
    events: Events,
    handshakes: HashMap<Token, Handshake>,
    /// Tokens in the order their connections came, with their deadlines: the oldest first.
    /// A handshake that ends leaves its entry until it reaches the front, so that its end
    /// costs nothing; [`Pending::arrived`] compacts them where they outnumber the live ones.
    arrived: VecDeque<(Instant, Token)>,
    /// Tokens readiness named that are not yet read.
    ready: Vec<Token>,
    /// How many handshakes have spoken (the rest are silent).
    speaking: usize,
    /// Of those, how many each host holds ([`ListenOptions::max_pending_per_host`]); a host
    /// is here only while it holds some.
    speaking_by_host: HashMap<PeerHost, usize>,
    next: usize,
    /// The last accept failed (for want of descriptors, or otherwise): try again soon.
    starved: bool,
}

/// A fresh connection and what it has sent of its request so far.
struct Handshake {
    stream: TcpStream,
    got: [u8; REQUEST_LEN],
    filled: usize,
    deadline: Instant,
    /// It has spoken and holds one of the `max_pending` places.
    holds_place: bool,
    /// Its host as the bound per host counts it (`None` where the socket names no peer).
    host: Option<PeerHost>,
}

/// What reading a handshake without blocking came to.
enum Progress {
    Complete,
    Waiting,
    /// Closed, broken, late, or not our protocol.
    Dropped,
}

impl Handshake {
    /// Whether it has sent nothing yet.
    fn is_silent(&self) -> bool {
        self.filled == 0
    }

    fn poll(&mut self, now: Instant) -> Progress {
        while self.filled < REQUEST_LEN {
            match self.stream.read(&mut self.got[self.filled..]) {
                Ok(0) => return Progress::Dropped,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return if now >= self.deadline { Progress::Dropped } else { Progress::Waiting };
                }
                Err(_) => return Progress::Dropped,
            }
            // A stranger is turned away on its first bytes, not at its deadline.
            let head = self.filled.min(5);
            if self.got[..head.min(4)] != MAGIC[..head.min(4)] || (head == 5 && self.got[4] != VERSION) {
                return Progress::Dropped;
            }
        }
        Progress::Complete
    }
}

/// A connect request taken from a [`TcpCmListener`]; dropping it rejects it.
pub struct TcpRequest {
    stream: TcpStream,
    private_data: Vec<u8>,
    /// How long its accept waits for the connector's confirmation.
    handshake_timeout: Duration,
    /// Its listener's [`Listener::close`].
    closed: Arc<AtomicBool>,
}

fn resolve(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or_else(|| Error::BadAddress(addr.into()))
}

fn left(deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        Some(d) => d.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()),
        None => Some(Duration::from_secs(3600)),
    }
}

/// The process's soft limit on open descriptors (`RLIMIT_NOFILE`), read from
/// `/proc/self/limits` (no system call needed); `None` where that is not there or unlimited.
fn descriptor_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    soft_limit(&limits, "Max open files")
}

/// The soft limit on the line of `limits` (as `/proc/self/limits` writes it) named `name`.
fn soft_limit(limits: &str, name: &str) -> Option<usize> {
    let line = limits.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// The silent connections a listener holds at most: `max_silent`, and never more than a
/// quarter of the descriptor limit, so that they do not take the descriptors the
/// connections being served need.
fn silent_cap(max_silent: usize, descriptors: Option<usize>) -> usize {
    descriptors.map_or(max_silent, |d| max_silent.min(d / 4)).max(1)
}

pub(super) fn listen(addr: &str, opts: &ListenOptions) -> Result<TcpCmListener> {
    let sa = resolve(addr)?;
    let listener = TcpListener::bind(sa).map_err(|e| match e.kind() {
        ErrorKind::AddrInUse => Error::AddressInUse(addr.into()),
        _ => Error::BadAddress(addr.into()),
    })?;
    let bound = listener.local_addr().map_err(|_| Error::BadAddress(addr.into()))?;
    listener.set_nonblocking(true).map_err(|_| Error::BadAddress(addr.into()))?;
    let poll = Poll::new().map_err(|_| Error::BadAddress(addr.into()))?;
    let fd = listener.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), LISTENING, Interest::READABLE)
        .map_err(|_| Error::BadAddress(addr.into()))?;
    let closing = Waker::new(poll.registry(), CLOSING).map_err(|_| Error::BadAddress(addr.into()))?;
    let opts = ListenOptions { max_silent: silent_cap(opts.max_silent, descriptor_limit()), ..*opts };
    Ok(TcpCmListener {
        listener,
        addr: bound.to_string(),
        opts,
        pending: Mutex::new(Pending {
            poll,
            events: Events::with_capacity(256),
            handshakes: HashMap::new(),
            arrived: VecDeque::new(),
            ready: Vec::new(),
            speaking: 0,
            speaking_by_host: HashMap::new(),
            next: 1,
            starved: false,
        }),
        turned_away: AtomicU64::new(0),
        closed: Arc::new(AtomicBool::new(false)),
        closing,
    })
}

/// Fills `buf` from `s` by `deadline` (`Error::Timeout` past it, `Error::Rejected` when the
/// listener closes or fails): each read waits only what is left, so a listener that answers a
/// byte at a time cannot stretch the handshake past the connect's timeout (a socket's read
/// timeout is per read, not per `read_exact`).
fn read_by(s: &mut TcpStream, buf: &mut [u8], deadline: Option<Instant>) -> Result<()> {
    let mut at = 0;
    while at < buf.len() {
        s.set_read_timeout(Some(left(deadline).ok_or(Error::Timeout)?)).map_err(|_| Error::Rejected)?;
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(Error::Rejected),
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => return Err(Error::Timeout),
            Err(_) => return Err(Error::Rejected),
        }
    }
    Ok(())
}

pub(super) fn connect(
    pd: &TcpPd,
    addr: &str,
    private_data: &[u8],
    caps: QpCaps,
    timeout: Duration,
) -> Result<(TcpQp, Vec<u8>)> {
    let private_data = pad_private_data(private_data, CONNECT_PRIVATE_DATA_MAX)?;
    let sa = resolve(addr)?;
    let deadline = Instant::now().checked_add(timeout);
    let first = left(deadline).ok_or(Error::Timeout)?;
    let mut s = TcpStream::connect_timeout(&sa, first).map_err(|e| match e.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => Error::Timeout,
        _ => Error::ConnectionRefused(addr.into()),
    })?;
    let _ = s.set_nodelay(true);
    let mut req = Vec::with_capacity(5 + CONNECT_PRIVATE_DATA_MAX);
    req.extend_from_slice(MAGIC);
    req.push(VERSION);
    req.extend_from_slice(&private_data);
    s.write_all(&req).map_err(|_| Error::Rejected)?;
    // The tag first: a rejection is that one byte, and the connect learns of it at once
    // rather than waiting for private data that does not follow.
    let mut tag = [0u8];
    read_by(&mut s, &mut tag, deadline)?;
    if tag[0] != ACCEPT {
        return Err(Error::Rejected);
    }
    let mut accepted = vec![0u8; ACCEPT_PRIVATE_DATA_MAX];
    read_by(&mut s, &mut accepted, deadline)?;
    s.write_all(&[READY]).map_err(|_| Error::ConnectionAborted)?;
    Ok((TcpQp::start(s, pd, caps, |qp| (qp, Ok(())))?, accepted))
}

impl Pending {
    fn silent(&self) -> usize {
        self.handshakes.len() - self.speaking
    }

    /// Lets a handshake go (its socket closes, or is handed on) and forgets its readiness.
    fn remove(&mut self, token: Token) -> Option<Handshake> {
        let h = self.handshakes.remove(&token)?;
        self.speaking -= usize::from(h.holds_place);
        if let Some(host) = h.host.filter(|_| h.holds_place) {
            if let Some(n) = self.speaking_by_host.get_mut(&host) {
                *n -= 1;
                if *n == 0 {
                    self.speaking_by_host.remove(&host);
                }
            }
        }
        let _ = self.poll.registry().deregister(&mut SourceFd(&h.stream.as_raw_fd()));
        Some(h)
    }

    /// Records a new handshake's arrival. Entries of ended handshakes are dropped once they
    /// are most of the queue: else, behind one handshake that stays (silent or dripping, up
    /// to its deadline), a flood of connections that come and go would leave an entry each,
    /// as many as the flood's rate times the handshake timeout, and every look for the
    /// oldest silent one would scan them all. Compacted so, the queue holds, as each
    /// handshake arrives, at most twice the live handshakes (the new one among them) and
    /// [`ARRIVED_SLACK`] more; each compaction is paid for by the arrivals since the last.
    /// (Handshakes that end between arrivals leave their entries until the next one.)
    fn arrived(&mut self, deadline: Instant, token: Token) {
        if self.arrived.len() >= 2 * self.handshakes.len() + ARRIVED_SLACK {
            let live = &self.handshakes;
            self.arrived.retain(|(_, t)| live.contains_key(t));
        }
        self.arrived.push_back((deadline, token));
    }

    /// The earliest deadline of a handshake still in progress (the oldest's).
    fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(&(at, token)) = self.arrived.front() {
            if self.handshakes.contains_key(&token) {
                return Some(at);
            }
            self.arrived.pop_front();
        }
        None
    }
}

impl TcpCmListener {
    /// Takes every connection waiting on the listening socket into the handshakes in progress,
    /// reading each once: one whose request is already there is not silent. Room for a silent
    /// one is made by closing the oldest silent one when `max_silent` are held, or when the
    /// process is out of descriptors. A complete request found so is returned.
    fn take_new(&self, p: &mut Pending, now: Instant) -> Option<TcpRequest> {
        p.starved = false;
        loop {
            match self.listener.accept() {
                Ok((stream, from)) => {
                    if stream.set_nonblocking(true).is_err() {
                        self.turned_away.fetch_add(1, Ordering::Relaxed);
                        continue; // dropped: the connector sees a reset, i.e. a rejection
                    }
                    let token = Token(p.next);
                    p.next += 1;
                    let fd = stream.as_raw_fd();
                    let deadline = now + self.opts.handshake_timeout;
                    let host = Some(PeerAddress::Ip(from).host().for_limits(self.opts.ipv6_prefix_per_host));
                    let h = Handshake { stream, got: [0; REQUEST_LEN], filled: 0, deadline, holds_place: false, host };
                    if p.poll.registry().register(&mut SourceFd(&fd), token, Interest::READABLE).is_err() {
                        self.turned_away.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    p.handshakes.insert(token, h);
                    p.arrived(deadline, token);
                    if let Some(req) = self.advance(p, token, now) {
                        return Some(req);
                    }
                    if p.handshakes.get(&token).is_some_and(Handshake::is_silent)
                        && p.silent() > self.opts.max_silent.max(1)
                    {
                        self.close_oldest_silent(p);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Out of descriptors (EMFILE, ENFILE): one silent socket makes room, and the
                // connection waiting is taken.
                Err(e) if matches!(e.raw_os_error(), Some(23 | 24)) => {
                    if !self.close_oldest_silent(p) {
                        p.starved = true;
                        return None;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                // Anything else (a connection reset before we took it, ENOBUFS, ...): the
                // others waiting are taken soon, not at the next connection's readiness
                // (which is edge-triggered).
                Err(_) => {
                    p.starved = true;
                    return None;
                }
            }
        }
    }

    /// Closes the silent handshake held longest, counted; false if none is silent.
    fn close_oldest_silent(&self, p: &mut Pending) -> bool {
        let oldest = p.arrived.iter().find(|(_, t)| p.handshakes.get(t).is_some_and(Handshake::is_silent));
        let Some(&(_, token)) = oldest else { return false };
        p.remove(token);
        self.turned_away.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Reads what a handshake has sent; returns it as a request when complete. One that speaks
    /// for the first time while `max_pending` others are partway, or `max_pending_per_host`
    /// of its host's, is dropped.
    fn advance(&self, p: &mut Pending, token: Token, now: Instant) -> Option<TcpRequest> {
        let speaking = p.speaking;
        let h = p.handshakes.get_mut(&token)?;
        let was_silent = h.is_silent();
        match h.poll(now) {
            Progress::Waiting if was_silent && !h.is_silent() => {
                let host = h.host;
                let of_host = host.map_or(0, |host| p.speaking_by_host.get(&host).copied().unwrap_or(0));
                if speaking >= self.opts.max_pending || of_host >= self.opts.max_pending_per_host {
                    p.remove(token);
                    self.turned_away.fetch_add(1, Ordering::Relaxed);
                } else {
                    h.holds_place = true;
                    p.speaking += 1;
                    if let Some(host) = host {
                        *p.speaking_by_host.entry(host).or_insert(0) += 1;
                    }
                }
                None
            }
            Progress::Waiting => None,
            Progress::Dropped => {
                p.remove(token);
                self.turned_away.fetch_add(1, Ordering::Relaxed);
                None
            }
            Progress::Complete => {
                // Complete at once takes no place: it is handed on now.
                let h = p.remove(token)?;
                if h.stream.set_nonblocking(false).is_err() {
                    self.turned_away.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                let _ = h.stream.set_nodelay(true);
                // The accept's write; its wait for the ready-to-use looks at `closed` too.
                let _ = h.stream.set_read_timeout(Some(CONFIRM_SLICE));
                let _ = h.stream.set_write_timeout(Some(self.opts.handshake_timeout));
                Some(TcpRequest {
                    stream: h.stream,
                    private_data: h.got[5..].to_vec(),
                    handshake_timeout: self.opts.handshake_timeout,
                    closed: self.closed.clone(),
                })
            }
        }
    }

    /// Drops the handshakes whose deadline has passed, oldest first.
    fn expire(&self, p: &mut Pending, now: Instant) {
        while let Some(at) = p.next_deadline() {
            if at > now {
                return;
            }
            let (_, token) = p.arrived.pop_front().expect("a deadline was found");
            p.remove(token);
            self.turned_away.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Listener for TcpCmListener {
    type Request = TcpRequest;

    fn local_addr(&self) -> String {
        self.addr.clone()
    }

    fn get_request(&self, timeout: Duration) -> Result<TcpRequest> {
        let deadline = Instant::now().checked_add(timeout);
        let mut p = lock(&self.pending);
        let mut listening = true; // look at the listening socket first, whatever readiness said
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::ConnectionAborted);
            }
            let now = Instant::now();
            self.expire(&mut p, now);
            if listening {
                if let Some(req) = self.take_new(&mut p, now) {
                    return Ok(req);
                }
            }
            while let Some(token) = p.ready.pop() {
                if let Some(req) = self.advance(&mut p, token, now) {
                    return Ok(req);
                }
            }
            let l = left(deadline).ok_or(Error::Timeout)?;
            let mut wait = p.next_deadline().map_or(l, |at| at.saturating_duration_since(now).min(l));
            if p.starved {
                wait = wait.min(RETRY_ACCEPT);
            }
            let Pending { poll, events, .. } = &mut *p;
            // An interrupted wait is a wait with nothing ready.
            let _ = poll.poll(events, Some(wait));
            listening = p.starved;
            let named: Vec<Token> = p.events.iter().map(|e| e.token()).collect();
            for token in named {
                if token == LISTENING {
                    listening = true;
                } else if token != CLOSING {
                    p.ready.push(token);
                }
            }
        }
    }

    fn turned_away(&self) -> u64 {
        self.turned_away.load(Ordering::Relaxed)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // A failed wake leaves a waiting `get_request` to its own deadline.
        let _ = self.closing.wake();
    }
}

impl ConnectRequest for TcpRequest {
    type Pd = TcpPd;
    type Qp = TcpQp;

    fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    fn peer(&self) -> Option<PeerAddress> {
        self.stream.peer_addr().ok().map(PeerAddress::Ip)
    }

    fn accept_owning(
        mut self,
        pd: &TcpPd,
        private_data: &[u8],
        caps: QpCaps,
        before: impl FnOnce(TcpQp) -> (TcpQp, Result<()>),
    ) -> Result<TcpQp> {
        // On error the stream closes here, which the active side reads as a rejection.
        let private_data = pad_private_data(private_data, ACCEPT_PRIVATE_DATA_MAX)?;
        let mut rep = Vec::with_capacity(1 + ACCEPT_PRIVATE_DATA_MAX);
        rep.push(ACCEPT);
        rep.extend_from_slice(&private_data);
        // Bounded by the handshake timeout, set on the stream when the request was taken.
        self.stream.write_all(&rep).map_err(|_| Error::ConnectionAborted)?;
        // The confirmation, within the handshake timeout, a slice at a time so that a closed
        // listener's accept gives up at once.
        let deadline = Instant::now() + self.handshake_timeout;
        let mut ready = [0u8];
        loop {
            match self.stream.read(&mut ready) {
                Ok(1) if ready[0] == READY => return TcpQp::start(self.stream, pd, caps, before),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    if self.closed.load(Ordering::Acquire) || Instant::now() >= deadline {
                        return Err(Error::ConnectionAborted);
                    }
                }
                _ => return Err(Error::ConnectionAborted),
            }
        }
    }

    fn reject(mut self) {
        let _ = self.stream.write_all(&[REJECT]);
    }
}

impl std::fmt::Debug for TcpCmListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpCmListener").field("addr", &self.addr).finish()
    }
}

impl std::fmt::Debug for TcpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpRequest")
            .field("peer", &self.stream.peer_addr().ok())
            .field("private_data", &self.private_data)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Silent sockets never take more than a quarter of the descriptors: with the usual
    /// `ulimit -n` of 1024, 256 of them at most, whatever `max_silent` says.
    #[test]
    fn silent_connections_hold_at_most_a_quarter_of_the_descriptor_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             63439                63439                processes \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(soft_limit(limits, "Max open files"), Some(1024));
        assert_eq!(soft_limit("Max open files            unlimited   unlimited  files", "Max open files"), None);
        assert_eq!(silent_cap(1024, Some(1024)), 256);
        assert_eq!(silent_cap(100, Some(1024)), 100);
        assert_eq!(silent_cap(1024, None), 1024);
        assert_eq!(silent_cap(1024, Some(2)), 1, "always room for one");
        assert!(descriptor_limit().is_some(), "Linux says the limit in /proc/self/limits");
    }

    /// Whether the listener closed this socket (its read sees the end, or a reset).
    fn closed(s: &mut TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        !matches!(s.read(&mut [0u8; 8]), Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
    }

    /// One handshake that stays (here: silent until its deadline) while a thousand others
    /// come and are turned away behind it: the listener's queue of arrivals keeps no entry
    /// for each of them, only for what is live and a bounded slack.
    #[test]
    fn handshakes_that_end_behind_one_that_stays_leave_no_entry_each() {
        let opts = ListenOptions::default().handshake_timeout(Duration::from_secs(60));
        let l = listen("127.0.0.1:0", &opts).unwrap();
        let stays = TcpStream::connect(l.local_addr()).unwrap();
        assert!(matches!(l.get_request(Duration::from_millis(50)), Err(Error::Timeout)));
        for _ in 0..1000 {
            // A stranger's first bytes: turned away at once, its entry left behind the first.
            let mut s = TcpStream::connect(l.local_addr()).unwrap();
            s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            let _ = l.get_request(Duration::from_millis(1));
        }
        let until = Instant::now() + Duration::from_secs(10);
        while l.turned_away() < 1000 && Instant::now() < until {
            let _ = l.get_request(Duration::from_millis(10));
        }
        assert_eq!(l.turned_away(), 1000, "every stranger turned away, and only they");
        let p = lock(&l.pending);
        assert!(p.handshakes.contains_key(&Token(1)), "the first handshake is still held");
        // As of the last arrival, when this one was live too.
        assert!(
            p.arrived.len() <= 2 * (p.handshakes.len() + 1) + ARRIVED_SLACK,
            "{} arrivals kept for {} live handshakes",
            p.arrived.len(),
            p.handshakes.len()
        );
        drop(p);
        drop(stays);
    }

    /// Beyond `max_silent` connections that have said nothing, the oldest is closed to make
    /// room, counted; a speaker is still heard, and silent sockets take no `max_pending` place.
    #[test]
    fn the_oldest_silent_connection_makes_room_and_silent_ones_take_no_handshake_place() {
        let opts = ListenOptions::default().max_silent(2).max_pending(1);
        let l = listen("127.0.0.1:0", &opts).unwrap();
        let mut silent: Vec<TcpStream> = Vec::new();
        for _ in 0..3 {
            silent.push(TcpStream::connect(l.local_addr()).unwrap());
            // Taken by the listener one at a time, in order.
            assert!(matches!(l.get_request(Duration::from_millis(50)), Err(Error::Timeout)));
        }
        assert!(closed(&mut silent[0]), "the oldest silent connection is closed");
        assert!(!closed(&mut silent[1]) && !closed(&mut silent[2]), "the two newest are held");
        assert_eq!(l.turned_away(), 1);
        // One place for a handshake under way, and two silent sockets held: a speaker is heard.
        let addr = l.local_addr();
        let speaker = std::thread::spawn(move || {
            connect(
                &crate::Backend::alloc_pd(&super::super::Tcp).unwrap(),
                &addr,
                &[],
                QpCaps::default(),
                Duration::from_secs(5),
            )
            .map(drop)
        });
        let req = l.get_request(Duration::from_secs(5)).expect("the speaker's request");
        assert_eq!(req.private_data.len(), CONNECT_PRIVATE_DATA_MAX);
        drop(req); // rejected
        assert!(speaker.join().unwrap().is_err());
    }
}
