//! A `negotiate::server::Server` attacked as a hostile peer would (issue 12), from loopback
//! only, each attack bounded in count and time: a peer that connects a thousand times, says
//! nothing in its handshake or drips it, opens more handshakes than allowed, asks for
//! gigabytes with a 100-byte header, floods requests and never reads, stops reading its
//! replies, goes idle, or holds connections open past the cap. Each test asserts the bound the
//! attack meets (`negotiate::limits` lists them), that other clients are served meanwhile, and
//! that the server lets go of what the attacker made it hold.
//!
//! The tests measure process-wide counts (threads, file descriptors, resident memory), so they
//! run one at a time ([`serial`]).

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::*;
use negotiate::client::{Client, ClientConfig};
use negotiate::datapath::Ended;
use negotiate::limits::ServerLimits;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::Version;
use rpcrdma_verbs::tcp::frame::Head;
use rpcrdma_verbs::{Backend, QpCaps, QpState, QueuePair, Status};

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Entries of a `/proc/self` directory: open file descriptors, or threads.
fn proc_count(dir: &str) -> usize {
    std::fs::read_dir(format!("/proc/self/{dir}")).map_or(0, |d| d.count())
}

/// The threads of this process that belong to the library (the server's, its connections',
/// the TCP backend's): the test harness's own come and go with the tests it starts. The TCP
/// backend's one readiness loop ("verbs-io") lives as long as the process, once started,
/// whatever the connections: it is counted by [`io_loops`], not here.
fn threads() -> Vec<String> {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten();
    let names = tasks.filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok());
    let library = |n: &String| n.starts_with("negotiate") || n.starts_with("verbs");
    names.map(|n| n.trim().to_string()).filter(|n| library(n) && n != "verbs-io").collect()
}

/// How many TCP readiness loops the process runs: at most one, whatever the connections.
fn io_loops() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten();
    let names = tasks.filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok());
    names.filter(|n| n.trim() == "verbs-io").count()
}

/// CPU time this process has used (user and system), from `/proc/self/stat`, in clock ticks
/// (1/100 s on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

fn fds() -> usize {
    proc_count("fd")
}

/// Resident memory of this process, in bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<usize>().ok()).unwrap_or(0) * 4096
}

/// Waits up to `limit` for `cond`; fails the test with `what` (and the last value seen) if it
/// never holds.
fn eventually<T: std::fmt::Debug>(
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> T,
    cond: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let v = probe();
        if cond(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}; last seen {v:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A server echoing calls, with `limits` and a short retry timeout, so that attacks resolve
/// within a test's time.
fn server<B: Backend + Clone>(backend: &B, limits: ServerLimits) -> Server {
    let cfg = ServerConfig::default().limits(limits).caps(QpCaps::default().retry_timeout(Duration::from_millis(500)));
    Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(ULB), echo).expect("server starts")
}

fn client<B: Backend + Clone>(backend: &B, server: &Server) -> Arc<Client<B>> {
    let cfg = ClientConfig::default().connect_timeout(Duration::from_secs(2));
    Arc::new(Client::new(backend.clone(), server.local_addr(), cfg))
}

/// The TCP backend's connect request (magic, version, 56 bytes of private data), for a raw
/// peer that then behaves as it likes.
const TCP_REQUEST: [u8; 61] = {
    let mut r = [0u8; 61];
    (r[0], r[1], r[2], r[3], r[4]) = (b'V', b'R', b'B', b'T', 1);
    r
};

/// A raw TCP peer through the whole handshake: what is left is the frame stream.
fn raw_tcp_connection(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(WAIT_LIMIT)).unwrap();
    s.write_all(&TCP_REQUEST).unwrap();
    let mut accept = [0u8; 197];
    s.read_exact(&mut accept).expect("the accept");
    assert_eq!(accept[0], b'A', "accepted");
    s.write_all(b"U").unwrap();
    s
}

/// A raw peer's TCP connection to `addr` from the local address `from` (bound before it
/// connects, which std cannot do): accepted, or `Rejected` when the server answers otherwise.
fn raw_tcp_connection_from(from: std::net::Ipv4Addr, addr: &str) -> Result<TcpStream, rpcrdma_verbs::Error> {
    let mut s = raw_tcp_socket_from(from, addr);
    raw_handshake_after(&mut s, 0)?;
    Ok(s)
}

/// The rest of the TCP backend's handshake on `s`, whose first `sent` bytes of the request
/// went already: the request's rest, the accept read, the confirmation; `Rejected` when the
/// server answers otherwise.
fn raw_handshake_after(s: &mut TcpStream, sent: usize) -> Result<(), rpcrdma_verbs::Error> {
    s.set_read_timeout(Some(WAIT_LIMIT)).unwrap();
    s.write_all(&TCP_REQUEST[sent..]).map_err(|_| rpcrdma_verbs::Error::Rejected)?;
    let mut accept = [0u8; 197];
    match s.read(&mut accept[..1]) {
        Ok(1) if accept[0] == b'A' => {}
        _ => return Err(rpcrdma_verbs::Error::Rejected),
    }
    s.read_exact(&mut accept[1..]).expect("the accept's private data");
    s.write_all(b"U").unwrap();
    Ok(())
}

/// A raw TCP socket connected to `addr` from the local address `from` (bound before it
/// connects, which std cannot do; all of 127/8 is this machine's loopback).
fn raw_tcp_socket_from(from: std::net::Ipv4Addr, addr: &str) -> TcpStream {
    let to: std::net::SocketAddrV4 = addr.parse().expect("an IPv4 listener");
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    s.bind(&std::net::SocketAddrV4::new(from, 0).into()).expect("bound");
    s.connect(&to.into()).expect("connected");
    s.into()
}

/// Whether the server has closed a raw socket: a read returns end of stream or an error
/// (reset) rather than timing out.
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Attacks that do not depend on the transport: both backends.
// ------------------------------------------------------------------------------------------

/// A peer that connects and closes 1,000 times (100 on rdma_rxe, whose connects are slow under
/// emulation): every connection's thread, socket, Receives, backchannel and record are let go
/// once it closes (before, each stayed until the server was dropped: ~1,000 exhausted
/// `ulimit -n`, ~32,700 aborted the process).
fn a_thousand_connections_are_released_as_they_close<B: Backend + Clone>(backend: B) {
    connections_are_released_as_they_close(backend, 1000);
}

fn connections_are_released_as_they_close<B: Backend + Clone>(backend: B, cycles: u64) {
    let _g = serial();
    // Every connection from this one host, each closed as soon as it is made: its host's
    // bound raised to the server's, so that a close the server has not seen yet (rdma_cm's
    // DISCONNECTED event in a guest) refuses none of them.
    let limits = ServerLimits::default();
    let s = server(&backend, limits.max_connections_per_host(limits.max_connections));
    let c = client(&backend, &s);
    call_ok(&c, 1, SMALL);
    let (threads0, fds0) = (threads().len(), fds());
    for i in 0..cycles {
        let pd = backend.alloc_pd().expect("pd");
        let (qp, _) = backend.connect(&pd, &s.local_addr(), &[], QpCaps::default(), WAIT_LIMIT).expect("connect");
        if i % 100 == 0 {
            // Now and then a connection sends something first.
            qp.disconnect();
        }
    }
    eventually("the closed connections' records to be pruned", WAIT_LIMIT, || s.peers().len(), |n| *n <= 64 + 1);
    // No connection has a thread of its own; the server's one loop may have started a second
    // thread meanwhile (a hand-off while the accepts kept its holder busy) and keeps it: a
    // thread it no longer needs leaves only while it has more than two
    // (server/event_loop.rs, KEEP_ALIVE). Seen once in a fresh-clone CI run under load.
    eventually("every closed connection's thread to end", WAIT_LIMIT, threads, |n| n.len() <= threads0 + 1);
    eventually("every closed connection's socket to close", WAIT_LIMIT, fds, |n| *n <= fds0);
    assert_eq!(s.backchannels().len(), 1, "only the open client's backchannel is left");
    // Every connection was accepted. (Counted by its accept's thread once the connector has
    // its queue pair: the last one's count may come a moment after the checks above, that
    // thread being the one more they allow. Seen once in a fresh-clone CI run: 1000 of 1001.)
    eventually("every connection to be counted", WAIT_LIMIT, || s.stats().connections, |n| *n == cycles + 1);
    call_ok(&c, 2, SMALL);
}

/// A 100-byte header whose Read chunk of three segments adds up to 12 GiB: refused with ERR_CHUNK (RFC 8166
/// section 4.5.2) before anything is fetched or allocated, counted, and the connection keeps
/// serving. Lifting the per-chunk limit still leaves the whole-message limit.
fn a_header_asking_for_gigabytes_gets_err_chunk<B: Backend + Clone>(backend: B) {
    let _g = serial();
    for chunk_limit in [None, Some(u64::MAX)] {
        let mut cfg = ServerConfig::default();
        if let Some(l) = chunk_limit {
            cfg.responder.limits.max_chunk_len = l;
        }
        let executed = Arc::new(Mutex::new(0));
        let e = executed.clone();
        let service = move |c: &[u8]| {
            *e.lock().unwrap() += 1;
            echo(c)
        };
        let s = Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(ULB), service).expect("server");
        let raw = RawRequester::connect(&backend, &s.local_addr());
        let xid = 0xbad;
        let big = 0xffff_fffc;
        let mut header = vec![xid, 1, 32, 0];
        // One Read chunk of three segments (they share its position, RFC 8166 section 3.4.5).
        for handle in 0x100..0x103 {
            header.extend([1, 8, handle, big, 0, 0x1000]);
        }
        header.extend([0, 0, 0]);
        let mut bytes = words(&header);
        bytes.extend(call(xid, SMALL));
        assert!(bytes.len() < 160, "a small header: {} bytes", bytes.len());
        let rss0 = rss();
        raw.send_raw(&bytes);
        assert_eq!(raw.receive(), words(&[xid, 1, 32, 4, 2]), "ERR_CHUNK for that XID");
        raw.valid_call(0x100, Version::ONE);
        assert_eq!(raw.conn.qp().state(), QpState::Ready, "the connection keeps serving");
        let st = stats_once(&s, "the refusal", |st| st.refused.over_limits == 1 && st.calls.v1 == 1);
        assert_eq!(st.errors_sent, 1);
        // Nothing was counted against the memory budget for it but the connection's Receives
        // (33 of 4 KiB): the most held at once says so, which resident memory cannot (an
        // untouched allocation does not raise it).
        assert!(st.memory_peak < 1 << 20, "{} bytes charged at most", st.memory_peak);
        assert_eq!(*executed.lock().unwrap(), 1, "only the valid call reached the service");
        assert!(rss() < rss0 + (64 << 20), "no allocation the header sized: {} -> {} bytes", rss0, rss());
    }
}

/// Connections beyond `max_connections` are rejected at connect and counted; a slot frees when
/// a connection closes.
fn connections_beyond_the_cap_are_rejected<B: Backend + Clone>(backend: B) {
    let _g = serial();
    let s = server(&backend, ServerLimits::default().max_connections(3));
    let connect = || {
        let pd = backend.alloc_pd().expect("pd");
        backend.connect(&pd, &s.local_addr(), &[], QpCaps::default(), WAIT_LIMIT).map(|(qp, _)| (pd, qp))
    };
    let mut held: Vec<_> = (0..3).map(|_| connect().expect("within the cap")).collect();
    assert_eq!(connect().err(), Some(rpcrdma_verbs::Error::Rejected), "the fourth connection");
    assert_eq!(s.stats().refused.connections, 1);
    held.pop();
    eventually("a freed slot to take a new connection", WAIT_LIMIT, || connect().is_ok(), |ok| *ok);
}

/// One host cannot take every connection ([`ServerLimits::max_connections_per_host`]): its
/// connects beyond its bound are rejected and counted, while another host, the server far
/// from `max_connections`, is still served; a place its host freed by a close takes its next
/// connect. `same` and `other` connect from one host and from another.
fn one_host_holds_at_most_its_bound<C, D>(
    s: &Server,
    same: impl Fn() -> Result<C, rpcrdma_verbs::Error>,
    other: impl Fn() -> Result<D, rpcrdma_verbs::Error>,
) {
    let mut held: Vec<C> = (0..3).map(|_| same().expect("within the host's bound")).collect();
    assert_eq!(same().err(), Some(rpcrdma_verbs::Error::Rejected), "the host's fourth connection");
    assert_eq!(s.stats().refused.per_host, 1, "counted");
    assert_eq!(s.stats().refused.connections, 0, "not the server's bound: 3 of 16 held");
    let _others: Vec<D> = (0..3).map(|_| other().expect("another host is served")).collect();
    assert_eq!(same().err(), Some(rpcrdma_verbs::Error::Rejected), "still at the bound");
    held.pop();
    // The server frees the place once it sees the close: connects until then are refused,
    // and each is counted.
    let (until, mut refused) = (Instant::now() + WAIT_LIMIT, 2);
    loop {
        match same() {
            Ok(c) => break held.push(c),
            Err(e) => assert_eq!(e, rpcrdma_verbs::Error::Rejected),
        }
        refused += 1;
        assert!(Instant::now() < until, "the place freed by a close never took a connect");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.stats().refused.per_host, refused, "every refusal counted, once");
}

#[test]
fn in_process_one_host_holds_at_most_its_bound() {
    let _g = serial();
    let b = rpcrdma_verbs::InProcess;
    let s = server(&b, ServerLimits::default().max_connections(16).max_connections_per_host(3));
    // An in-process host is the protection domain it connects with.
    let pd = b.alloc_pd().unwrap();
    let addr = s.local_addr();
    let connect = |pd: &<rpcrdma_verbs::InProcess as Backend>::Pd| {
        b.connect(pd, &addr, &[], QpCaps::default(), WAIT_LIMIT).map(|(qp, _)| qp)
    };
    let other = || {
        let pd = b.alloc_pd().unwrap();
        connect(&pd).map(|qp| (qp, pd))
    };
    one_host_holds_at_most_its_bound(&s, || connect(&pd), other);
}

#[test]
fn over_tcp_one_host_holds_at_most_its_bound() {
    let _g = serial();
    let b = rpcrdma_verbs::Tcp;
    let s = server(&b, ServerLimits::default().max_connections(16).max_connections_per_host(3));
    let (addr, pd) = (s.local_addr(), b.alloc_pd().unwrap());
    // From 127.0.0.1, and from 127.0.0.2 (all of 127/8 is this machine's loopback).
    let same = || b.connect(&pd, &addr, &[], QpCaps::default(), WAIT_LIMIT).map(|(qp, _)| qp);
    let other = || raw_tcp_connection_from(std::net::Ipv4Addr::new(127, 0, 0, 2), &addr);
    one_host_holds_at_most_its_bound(&s, same, other);
}

/// A connection that says nothing for `idle_timeout` is closed and counted; its client
/// reconnects for its next call.
fn idle_connections_are_closed<B: Backend + Clone>(backend: B) {
    let _g = serial();
    let idle = Duration::from_millis(300);
    let s = server(&backend, ServerLimits::default().idle_timeout(idle));
    let c = client(&backend, &s);
    call_ok(&c, 1, SMALL);
    let peers = eventually("the idle connection to be closed", WAIT_LIMIT, || s.peers(), |p| p[0].ended.is_some());
    assert_eq!(peers[0].ended, Some(Ended::Closed(format!("idle for {idle:?}"))));
    assert_eq!(s.stats().refused.idle, 1);
    call_ok(&c, 2, SMALL);
    assert_eq!(s.stats().connections, 2, "the client reconnected");
}

/// Calls that hold chunk memory (a 1 MiB Read chunk each, their handler not done, as calls
/// whose RDMA Reads a peer never answers hold theirs) make the server as a whole hold no more
/// than `ServerLimits::memory_budget` (issue 26: 250 connections x 8 such calls once held
/// 8.6 GB, within every per-message and per-connection limit). The calls beyond the budget
/// are answered with RDMA_ERROR ERR_CHUNK before anything is fetched (RFC 8166 section 4.5.2)
/// and counted; a small call is still served meanwhile; the memory is given back once the
/// calls end and their clients go.
fn the_server_as_a_whole_holds_no_more_than_its_memory_budget<B: Backend + Clone>(backend: B) {
    let _g = serial();
    const BUDGET: usize = 6 << 20;
    const ARG: usize = 1 << 20;
    let (clients, per_client) = (3, 4);
    let cfg = ServerConfig::default()
        .limits(ServerLimits::default().memory_budget(BUDGET))
        .caps(QpCaps::default().retry_timeout(Duration::from_millis(500)));
    let gate = Gate::new();
    let g = gate.clone();
    // Large calls wait for the gate; small ones are answered at once. The reply: the call's
    // XID and message type 1, no body.
    let service = move |c: &[u8]| {
        if c.len() > ARG {
            g.hold();
        }
        [&c[..4], &[0, 0, 0, 1][..]].concat()
    };
    let s = Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(ULB), service).expect("server");
    let _opens = gate.opener();
    let cs: Vec<_> = (0..clients).map(|_| client(&backend, &s)).collect();
    // Each connection's version settled first by a small call, so that its big calls go out
    // together (the calls after a Version Two probe wait for its answer).
    for (n, c) in cs.iter().enumerate() {
        assert!(c.call(&call(0x10 + n as u32, SMALL), &ULB).is_ok());
    }
    let (tx, rx) = mpsc::channel();
    let mut callers = Vec::new();
    for (n, c) in cs.iter().enumerate() {
        for k in 0..per_client {
            let (c, tx) = (c.clone(), tx.clone());
            callers.push(std::thread::spawn(move || {
                let xid = (0x1000 + n * 16 + k) as u32;
                let got = c.call(&call(xid, ARG), &ULB);
                tx.send(got.map(|r| word(&r, 0) == xid).map_err(|e| e.to_string())).unwrap();
            }));
        }
    }
    let total = clients * per_client;
    // Every call is either in the handler, holding its memory, or refused.
    let mut refused = Vec::new();
    eventually(
        "every big call to be in its handler or refused",
        WAIT_LIMIT,
        || {
            while let Ok(r) = rx.try_recv() {
                refused.push(r);
            }
            (gate.inside(), refused.len(), s.stats())
        },
        |(inside, refused, _)| inside + refused == total,
    );
    let held = gate.inside();
    let st = s.stats();
    assert!(held >= 1, "some calls fit the budget");
    assert!(st.memory_peak <= BUDGET, "peak {} bytes charged, budget {BUDGET}", st.memory_peak);
    assert!(st.memory_held >= held * ARG, "{} bytes held for {held} calls of {ARG}", st.memory_held);
    assert_eq!(st.refused.memory, refused.len() as u64, "each refusal counted: {refused:?}");
    assert!(!refused.is_empty(), "{total} calls of {ARG} bytes do not fit {BUDGET} bytes");
    for r in &refused {
        let e = r.as_ref().expect_err("a refused call fails");
        assert!(e.contains("RDMA_ERROR") && e.contains("ERR_CHUNK"), "ERR_CHUNK: {e}");
    }
    // Another client is served while the budget is spent.
    let other = client(&backend, &s);
    assert_eq!(word(&other.call(&call(0x77, SMALL), &ULB).expect("a small call"), 0), 0x77);
    // The gate opens: every call that fit completes.
    gate.open();
    for _ in 0..held {
        let r = rx.recv_timeout(CALL_LIMIT).expect("a held call's result");
        assert_eq!(r, Ok(true), "a call that fit the budget completes");
    }
    for c in callers {
        c.join().unwrap();
    }
    assert_eq!(s.stats().refused.memory, refused.len() as u64);
    drop((cs, other));
    // Its memory given back: at most one thread's kept call buffer stays charged, and the
    // Receives of the connections closing.
    eventually("the chunk memory given back", WAIT_LIMIT, || s.stats().memory_held, |&h| h <= ARG + (64 << 10));
}

/// One host's calls in progress hold at most `memory_per_host` of the call memory once calls
/// are short of it (past half of what the budget leaves them): its calls beyond its share
/// are refused with ERR_CHUNK and counted, while another host's chunked call is served; and
/// the host's share comes back as its calls end (before: one host's calls held all the
/// budget let them, and every other host's chunked call was refused until they ended). In
/// process, where each client's protection domain is its host.
#[test]
fn in_process_one_hosts_calls_hold_at_most_its_share_of_call_memory() {
    let _g = serial();
    const ARG: usize = 1 << 20;
    const CALLS: usize = 8;
    let backend = rpcrdma_verbs::InProcess;
    // A budget seven of the host's calls would fill, a share of one and a half.
    let limits = ServerLimits::default().memory_budget(8 * ARG).memory_per_host(3 * ARG / 2);
    let cfg = ServerConfig::default().limits(limits);
    let gate = Gate::new();
    let g = gate.clone();
    // The first host's large calls (XIDs 0x1000 to 0x1fff) wait for the gate.
    let service = move |c: &[u8]| {
        if c.len() > ARG && (0x1000..0x2000).contains(&word(c, 0)) {
            g.hold();
        }
        [&c[..4], &[0, 0, 0, 1][..]].concat()
    };
    let s = Server::start(backend, backend.any_address(), cfg, Arc::new(ULB), service).expect("server");
    let _opens = gate.opener();
    let greedy = client(&backend, &s);
    assert!(greedy.call(&call(0x10, SMALL), &ULB).is_ok());
    let (tx, rx) = mpsc::channel();
    let callers: Vec<_> = (0..CALLS as u32)
        .map(|k| {
            let (c, tx) = (greedy.clone(), tx.clone());
            std::thread::spawn(move || {
                let got = c.call(&call(0x1000 + k, ARG), &ULB);
                tx.send(got.map(|r| word(&r, 0)).map_err(|e| e.to_string())).unwrap();
            })
        })
        .collect();
    let mut refused = Vec::new();
    eventually(
        "each of the host's calls to be in its handler or refused",
        WAIT_LIMIT,
        || {
            while let Ok(r) = rx.try_recv() {
                refused.push(r);
            }
            (gate.inside(), refused.len())
        },
        |&(inside, refused)| inside + refused == CALLS,
    );
    let held = gate.inside();
    // Within its share (one), then beyond it while calls had under half the budget.
    assert!((2..=4).contains(&held), "{held} of the host's calls held: {refused:?}");
    for r in &refused {
        let e = r.as_ref().expect_err("a refused call fails");
        assert!(e.contains("ERR_CHUNK"), "ERR_CHUNK: {e}");
    }
    assert_eq!(s.stats().refused.memory, refused.len() as u64, "each refusal counted");
    // Another host's call of the same size is served meanwhile.
    let other = client(&backend, &s);
    assert_eq!(word(&other.call(&call(0x77, ARG), &ULB).expect("another host's chunked call"), 0), 0x77);
    gate.open();
    for _ in 0..held {
        assert!(matches!(rx.recv_timeout(CALL_LIMIT), Ok(Ok(_))), "a call held completes");
    }
    callers.into_iter().for_each(|c| c.join().unwrap());
    // The host's share came back with its calls: its next is served.
    assert_eq!(word(&greedy.call(&call(0x2000, ARG), &ULB).expect("the host's next call"), 0), 0x2000);
    assert_eq!(s.stats().refused.memory, refused.len() as u64);
}

/// The attack of issue 26, on three connections: RDMA_NOMSG calls each naming 4 MiB of Read
/// chunks (a 2 MiB Position-Zero chunk and a 2 MiB chunk at position 4: exactly the default
/// per-message limit), eight at once per connection, and the server's RDMA Reads never
/// answered. With the default configuration the server holds no more than its memory budget:
/// the calls beyond it are refused before anything is fetched, counted, and a client is
/// served meanwhile (before: each call's 4 MiB was allocated and zero-filled at once, and 250
/// such connections held 8.6 GB).
#[test]
fn tcp_calls_whose_reads_are_never_answered_hold_no_more_than_the_memory_budget() {
    let _g = serial();
    // The three connections are one host's: its share of the call memory lifted, so that
    // the budget itself is what bounds them here (the share is tested beside).
    let limits = ServerLimits::default().memory_per_host(usize::MAX);
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let mut peers: Vec<TcpStream> = (0..3).map(|_| raw_tcp_connection(&s.local_addr())).collect();
    const HALF: u32 = 2 << 20;
    for (n, peer) in peers.iter_mut().enumerate() {
        for k in 0..8 {
            let xid = 0x4000 + 16 * n as u32 + k;
            // RDMA_NOMSG; Read list: (position 0, 2 MiB), (position 4, 2 MiB); no Write list,
            // no Reply chunk.
            let header =
                words(&[xid, 1, 32, 1, 1, 0, 0x100 + k, HALF, 0, 0x1000, 1, 4, 0x200 + k, HALF, 0, 0x1000, 0, 0, 0]);
            let mut frame = Vec::new();
            Head::Send { len: header.len() as u32 }.encode(&mut frame);
            frame.extend(&header);
            peer.write_all(&frame).unwrap();
        }
    }
    let st = eventually("calls refused for want of memory", WAIT_LIMIT, || s.stats(), |st| st.refused.memory >= 1);
    assert!(st.memory_peak <= limits.memory_budget, "{} bytes held, budget {}", st.memory_peak, limits.memory_budget);
    let c = client(&rpcrdma_verbs::Tcp, &s);
    call_ok(&c, 1, SMALL);
    let st = s.stats();
    assert!(st.memory_peak <= limits.memory_budget, "{} bytes held, budget {}", st.memory_peak, limits.memory_budget);
    drop(peers);
}

on_both_backends! {
    the_server_as_a_whole_holds_no_more_than_its_memory_budget,
    a_thousand_connections_are_released_as_they_close,
    a_header_asking_for_gigabytes_gets_err_chunk,
    connections_beyond_the_cap_are_rejected,
    idle_connections_are_closed,
}

/// The same attacks over real verbs (rdma-core on rdma_rxe): run inside the Soft-RoCE guest by
/// `guest/test-hostile`, which sets `RDMA_TEST_ADDR`; elsewhere each says SKIP and returns,
/// except under `CI=true`, where a missing address fails it.
#[cfg(feature = "rdma")]
mod rdma {
    fn backend() -> Option<rpcrdma_verbs::Rdma> {
        rpcrdma_verbs::Rdma::from_test_env()
    }

    #[test]
    fn a_hundred_connections_are_released_as_they_close() {
        let Some(b) = backend() else { return };
        super::connections_are_released_as_they_close(b, 100);
    }

    #[test]
    fn a_header_asking_for_gigabytes_gets_err_chunk() {
        let Some(b) = backend() else { return };
        super::a_header_asking_for_gigabytes_gets_err_chunk(b);
    }

    #[test]
    fn connections_beyond_the_cap_are_rejected() {
        let Some(b) = backend() else { return };
        super::connections_beyond_the_cap_are_rejected(b);
    }

    #[test]
    fn idle_connections_are_closed() {
        let Some(b) = backend() else { return };
        super::idle_connections_are_closed(b);
    }

    /// Idle rdma-core connections cost no thread (each queue pair's CM events are read by
    /// the process's readiness loop; before, each had a thread of its own on a 20 ms tick)
    /// and no CPU.
    #[test]
    fn idle_connections_cost_no_thread_and_no_cpu() {
        use rpcrdma_verbs::{Backend, QpCaps};
        let Some(b) = backend() else { return };
        let _g = super::serial();
        let s = super::server(&b, super::ServerLimits::default());
        let (addr, pd) = (s.local_addr(), b.alloc_pd().unwrap());
        super::idle_connections_cost_no_thread_and_no_cpu(&b, &s, 32, || {
            b.connect(&pd, &addr, &[], QpCaps::default(), super::WAIT_LIMIT).expect("an rdma connection").0
        });
    }

    /// Issue 26's budget over real verbs: the calls' chunk memory, fetched by real RDMA
    /// Reads, held within the server's budget, the rest answered ERR_CHUNK.
    #[test]
    fn the_server_as_a_whole_holds_no_more_than_its_memory_budget() {
        let Some(b) = backend() else { return };
        super::the_server_as_a_whole_holds_no_more_than_its_memory_budget(b);
    }
}

// ------------------------------------------------------------------------------------------
// Attacks on the TCP backend's handshake and flow control.
// ------------------------------------------------------------------------------------------

/// Sockets that connect and send nothing, or drip their request a byte at a time, hold up no
/// other client (before: each blocked the acceptor for 10 s per read) and are dropped at the
/// handshake deadline, counted. The honest client's first call (its connect included) is
/// timed against the handshake timeout: a server that waited on even one stuck handshake
/// before taking the next would take longer than half of it.
#[test]
fn tcp_silent_or_dripping_handshakes_hold_up_no_other_client() {
    let _g = serial();
    const HANDSHAKE: Duration = Duration::from_secs(3);
    let limits = ServerLimits::default().handshake_timeout(HANDSHAKE);
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let mut silent: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(s.local_addr()).unwrap()).collect();
    let addr = s.local_addr();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let dripper = std::thread::spawn(move || {
        let mut d = TcpStream::connect(addr).unwrap();
        for b in TCP_REQUEST {
            if d.write_all(&[b]).is_err() || stop_rx.recv_timeout(Duration::from_millis(100)).is_ok() {
                return;
            }
        }
    });
    // Served at once, though nine handshakes are stuck ahead of it.
    let started = Instant::now();
    let c = client(&rpcrdma_verbs::Tcp, &s);
    call_ok(&c, 1, SMALL);
    let took = started.elapsed();
    assert!(took < HANDSHAKE / 2, "the honest client took {took:?}; stuck handshakes time out after {HANDSHAKE:?}");
    for sock in &mut silent {
        eventually("a silent handshake to be dropped", WAIT_LIMIT, || closed_by_server(sock), |c| *c);
    }
    let st =
        eventually("the dropped handshakes to be counted", WAIT_LIMIT, || s.stats(), |st| st.refused.handshakes >= 9);
    assert_eq!(st.connections, 1, "only the client's connection was accepted");
    drop(stop_tx);
    dripper.join().unwrap();
}

/// A peer that sends its connect request, reads the accept and never confirms it: its accept
/// waits (up to the handshake timeout) on a thread of its own, and holds up neither other
/// clients' connects nor the connections being served (issue 25: the server's event loop
/// accepts off the acceptor's thread; done on it, the next client waited the whole 30 s).
#[test]
fn tcp_an_accept_never_confirmed_holds_up_no_other_client() {
    let _g = serial();
    let limits = ServerLimits::default().handshake_timeout(Duration::from_secs(30));
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let served = client(&rpcrdma_verbs::Tcp, &s);
    call_ok(&served, 1, SMALL);
    let stuck = unconfirmed_accept(&s);
    // Never confirmed. Another client connects and is served, and so is the first, at once.
    let start = Instant::now();
    let next = client(&rpcrdma_verbs::Tcp, &s);
    call_ok(&next, 2, SMALL);
    call_ok(&served, 3, SMALL);
    assert!(start.elapsed() < Duration::from_secs(10), "held up {:?} by an unconfirmed accept", start.elapsed());
    assert_eq!(s.stats().connections, 2);
    drop(stuck);
}

/// A TCP connection whose connect request the server accepted and that never confirms it: the
/// server's accept waits on it once this returns.
fn unconfirmed_accept(s: &Server) -> TcpStream {
    let mut stuck = TcpStream::connect(s.local_addr()).unwrap();
    stuck.set_read_timeout(Some(WAIT_LIMIT)).unwrap();
    stuck.write_all(&TCP_REQUEST).unwrap();
    let mut accept = [0u8; 197];
    stuck.read_exact(&mut accept).expect("the accept");
    stuck
}

/// An accept that fails (its connector never confirms it, past the handshake timeout) gives
/// its host's place back: with a bound of one connection a host, the host's next connect is
/// rejected while the accept waits, and accepted once it has failed.
#[test]
fn tcp_a_failed_accept_gives_its_hosts_place_back() {
    let _g = serial();
    let limits = ServerLimits::default().max_connections_per_host(1).handshake_timeout(Duration::from_secs(2));
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let stuck = unconfirmed_accept(&s);
    let connect = || {
        let pd = rpcrdma_verbs::Tcp.alloc_pd().expect("pd");
        rpcrdma_verbs::Tcp.connect(&pd, &s.local_addr(), &[], QpCaps::default(), WAIT_LIMIT).map(|(qp, _)| (pd, qp))
    };
    assert_eq!(connect().err(), Some(rpcrdma_verbs::Error::Rejected), "the place is the waiting accept's");
    let until = Instant::now() + WAIT_LIMIT;
    let held = loop {
        if let Ok(c) = connect() {
            break c;
        }
        assert!(Instant::now() < until, "the failed accept's place never came back");
        std::thread::sleep(Duration::from_millis(20));
    };
    // (Counted by its accept's thread once the connector has its queue pair.)
    eventually("the one confirmed connection counted", WAIT_LIMIT, || s.stats().connections, |n| *n == 1);
    drop((held, stuck));
}

/// Dropping a server whose accept waits for a peer's confirmation returns at once: the
/// listener is closed first, and the accept gives up (issue 26: the drop waited the whole
/// handshake timeout).
#[test]
fn tcp_server_drop_never_waits_on_a_handshake() {
    let _g = serial();
    const HANDSHAKE: Duration = Duration::from_secs(30);
    let s = server(&rpcrdma_verbs::Tcp, ServerLimits::default().handshake_timeout(HANDSHAKE));
    let mut stuck = unconfirmed_accept(&s);
    let started = Instant::now();
    drop(s);
    let took = started.elapsed();
    assert!(took < HANDSHAKE / 6, "the drop took {took:?}; the handshake timeout is {HANDSHAKE:?}");
    assert!(closed_by_server(&mut stuck), "the unconfirmed connection is closed");
}

/// `n` handshakes under way with server `s`: each socket has sent the first bytes of its
/// request, and no more.
fn handshakes_begun(s: &Server, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut sock = TcpStream::connect(s.local_addr()).unwrap();
            sock.write_all(&TCP_REQUEST[..3]).unwrap();
            sock
        })
        .collect()
}

/// How many of `socks` the server has closed, once at least `want` are (waiting for `what`).
fn turned_away_of(socks: &mut [TcpStream], want: usize, what: &str) -> usize {
    eventually(what, WAIT_LIMIT, || socks.iter_mut().map(closed_by_server).filter(|c| *c).count(), |n| *n >= want)
}

/// More handshakes under way at once than `max_handshakes` (each has sent the first bytes of
/// its request): the rest are turned away at once, counted; when the stuck ones go, a client
/// connects.
#[test]
fn tcp_handshakes_beyond_the_cap_are_turned_away_at_once() {
    let _g = serial();
    let limits = ServerLimits::default().max_handshakes(4).handshake_timeout(Duration::from_secs(60));
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let mut socks = handshakes_begun(&s, 20);
    let turned_away = turned_away_of(&mut socks, 16, "16 handshakes over the cap to be turned away");
    assert_eq!(turned_away, 16, "the four within the cap are still waiting");
    assert_eq!(s.stats().refused.handshakes, 16);
    drop(socks);
    let c = client(&rpcrdma_verbs::Tcp, &s);
    call_ok(&c, 1, SMALL);
}

/// One host's handshakes under way take at most `max_handshakes_per_host` of the places:
/// its next is turned away at once and counted, and another host still connects with every
/// place but those taken (before: one host dripping 64 requests took every place, and each
/// newcomer from anywhere was turned away).
#[test]
fn tcp_one_host_dripping_handshakes_shuts_out_no_other_host() {
    let _g = serial();
    let limits =
        ServerLimits::default().max_handshakes(3).max_handshakes_per_host(2).handshake_timeout(Duration::from_secs(60));
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let mut drips = handshakes_begun(&s, 3);
    let turned_away = turned_away_of(&mut drips, 1, "the host's third handshake under way to be turned away");
    assert_eq!(turned_away, 1, "its first two are still waiting");
    assert_eq!(s.stats().refused.handshakes, 1);
    // Another host's handshake, begun as the dripper's were, takes the place left: the rest
    // of its request, sent once the server has had its first bytes, is accepted.
    let mut theirs = raw_tcp_socket_from(std::net::Ipv4Addr::new(127, 0, 0, 2), &s.local_addr());
    theirs.write_all(&TCP_REQUEST[..3]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(raw_handshake_after(&mut theirs, 3).is_ok(), "another host connects beside the dripping one");
    assert_eq!(s.stats().refused.handshakes, 1, "nothing more turned away");
    drop(drips);
}

/// Sockets that connect and say nothing, ten times `max_handshakes` of them from one address
/// and each reopened as soon as the server drops it at the handshake timeout, shut out no
/// newcomer: each of ten fresh clients is served within a second (issue 26: 64 such sockets
/// once kept every handshake place taken, and 0 of 40 new clients were served over 20 s). A
/// socket takes a handshake place only once it speaks.
#[test]
fn tcp_silent_sockets_churning_shut_out_no_newcomer() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let _g = serial();
    const PLACES: usize = 16;
    let limits = ServerLimits::default().max_handshakes(PLACES).handshake_timeout(Duration::from_millis(300));
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let addr = s.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let reopened = Arc::new(AtomicUsize::new(0));
    let (st, re) = (stop.clone(), reopened.clone());
    let churn = std::thread::spawn(move || {
        let mut silent: Vec<TcpStream> = (0..10 * PLACES).map(|_| TcpStream::connect(addr.as_str()).unwrap()).collect();
        while !st.load(Ordering::Relaxed) {
            for sock in &mut silent {
                if closed_by_server(sock) {
                    *sock = TcpStream::connect(addr.as_str()).unwrap();
                    re.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    // The churn under way: silent sockets dropped at their deadline and opened again.
    eventually(
        "silent sockets to be dropped and reopened",
        WAIT_LIMIT,
        || reopened.load(Ordering::Relaxed),
        |n| *n >= 10 * PLACES,
    );
    for n in 0..10 {
        let started = Instant::now();
        let c = client(&rpcrdma_verbs::Tcp, &s);
        call_ok(&c, n, SMALL);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(1), "fresh client {n} took {took:?} beside {} silent sockets", 10 * PLACES);
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    assert_eq!(s.stats().connections, 10, "only the fresh clients were accepted");
}

/// A peer that floods zero-length RDMA Writes and never reads the ACKs: the ACKs coalesce, the
/// server's memory stays flat (before: ~2.5x the bytes sent), and once its socket write moves
/// nothing for the retry timeout the connection is cut. Another client is served meanwhile.
#[test]
fn tcp_a_peer_that_floods_and_never_reads_is_cut() {
    let _g = serial();
    let s = server(&rpcrdma_verbs::Tcp, ServerLimits::default());
    let c = client(&rpcrdma_verbs::Tcp, &s);
    call_ok(&c, 1, SMALL);
    let mut flood = raw_tcp_connection(&s.local_addr());
    flood.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut batch = Vec::new();
    while batch.len() < 64 << 10 {
        Head::Write { addr: 0, rkey: 0, len: 0 }.encode(&mut batch);
    }
    let rss0 = rss();
    let (mut sent, mut peak) = (0usize, rss0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let cut = loop {
        if Instant::now() > deadline {
            break false;
        }
        if flood.write_all(&batch).is_err() {
            break true;
        }
        sent += batch.len();
        if sent % (16 << 20) < batch.len() {
            peak = peak.max(rss());
            call_ok(&c, (sent >> 16) as u32, SMALL); // other clients are served throughout
        }
    };
    peak = peak.max(rss());
    eprintln!("flood: {} MiB of zero-length Writes sent; RSS {} -> peak {} MiB", sent >> 20, rss0 >> 20, peak >> 20);
    assert!(cut, "the server never cut a peer that does not read ({} MiB sent in 60 s)", sent >> 20);
    assert!(peak < rss0 + (64 << 20), "server memory grew with the flood: {rss0} -> {peak} bytes");
    call_ok(&c, 2, SMALL);
}

/// Issue 26, idle is cheap: `max_connections` (256) handshaken TCP connections held open and
/// idle cost the server no thread each (before: 2 threads per connection, 518 library threads
/// in all) and no CPU while idle (before: 20 % of a core in polling ticks): the TCP backend's
/// one readiness loop and the server's one event loop sleep until something happens.
#[test]
fn tcp_idle_connections_cost_no_thread_and_no_cpu() {
    let _g = serial();
    // Every connection from this one host: its bound raised to the server's.
    let limits = ServerLimits::default();
    let limits = limits.max_connections_per_host(limits.max_connections);
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let addr = s.local_addr();
    idle_connections_cost_no_thread_and_no_cpu(&rpcrdma_verbs::Tcp, &s, limits.max_connections - 1, || {
        raw_tcp_connection(&addr)
    });
}

/// `n` idle connections made by `open` (beside one client's) to server `s`: once served, they
/// add no library thread on either side, and the process spends at most 3 clock ticks
/// (3 % of a core) in a second of their idleness; then the client is still served.
fn idle_connections_cost_no_thread_and_no_cpu<B: Backend + Clone, C>(
    backend: &B,
    s: &Server,
    n: usize,
    open: impl Fn() -> C,
) {
    let c = client(backend, s);
    call_ok(&c, 1, SMALL);
    let threads0 = threads().len();
    let conns: Vec<C> = (0..n).map(|_| open()).collect();
    eventually("every connection served", WAIT_LIMIT, || s.stats().connections, |got| *got == n as u64 + 1);
    // Let the handshakes' work settle, then watch a second of idleness.
    std::thread::sleep(Duration::from_millis(300));
    let (ticks0, at) = (cpu_ticks(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let (ticks, took) = (cpu_ticks() - ticks0, at.elapsed());

    let threads = threads().len();
    eprintln!(
        "{} idle connections: {threads} library threads (before them {threads0}), {} readiness loop, \
         {ticks} CPU ticks in {took:?}",
        conns.len() + 1,
        io_loops()
    );
    assert!(threads <= threads0 + 2, "{threads} library threads for {} connections (before them {threads0})", n);
    assert_eq!(io_loops(), 1, "one readiness loop for the process");
    // A tick is 1 % of a core for the second: polling the handshakes each 1 ms took 7 here
    // (and polling 256 connections' queue pairs, before the event loop, 20).
    assert!(ticks <= 3, "{ticks} CPU ticks in {took:?} with {n} idle connections");
    drop(conns);
    call_ok(&c, 2, SMALL);
}

/// A peer that sends a call and never reads the reply: the reply's Send is not acknowledged
/// within the retry timeout, fails with RetryExceeded, and the connection closes (before, the
/// connection's thread could wait in `send()` for ever and `Server::drop` with it).
#[test]
fn tcp_a_peer_that_stops_reading_replies_is_cut_within_the_retry_timeout() {
    let _g = serial();
    let s = server(&rpcrdma_verbs::Tcp, ServerLimits::default());
    let mut raw = raw_tcp_connection(&s.local_addr());
    let xid = 0x51;
    let mut message = words(&[xid, 1, 32, 0, 0, 0, 0]);
    message.extend(call(xid, SMALL));
    let mut frame = Vec::new();
    Head::Send { len: message.len() as u32 }.encode(&mut frame);
    frame.extend(&message);
    raw.write_all(&frame).unwrap();
    // Never read: the server's Send stays unacknowledged.
    let peers =
        eventually("the connection to end", WAIT_LIMIT, || s.peers(), |p| p.first().is_some_and(|p| p.ended.is_some()));
    let ended = peers[0].ended.clone().unwrap();
    let retry_exceeded = match &ended {
        Ended::Lost { first_error: Some(c) } => c.status == Status::RetryExceeded,
        Ended::Closed(why) => why.contains("RetryExceeded"),
        _ => false,
    };
    assert!(retry_exceeded, "ended by the retry timeout: {ended}");
    assert!(
        closed_by_server(&mut raw) || {
            std::thread::sleep(Duration::from_secs(1));
            closed_by_server(&mut raw)
        }
    );
}

/// `Server::drop` under attack (a silent handshake, a half-open connection that never reads
/// and never closes, an idle client): returns once the connections are closed, and no thread
/// of the server or its connections is left.
#[test]
fn tcp_server_drop_returns_with_no_thread_left_behind() {
    let _g = serial();
    let limits = ServerLimits::default().handshake_timeout(Duration::from_millis(500));
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let _silent = TcpStream::connect(s.local_addr()).unwrap();
    let half_open = raw_tcp_connection(&s.local_addr());
    let c = client(&rpcrdma_verbs::Tcp, &s);
    call_ok(&c, 1, SMALL);
    drop(c);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(s);
        let _ = tx.send(());
    });
    rx.recv_timeout(WAIT_LIMIT).expect("Server::drop returned");
    eventually("every thread of the server and its connections to end", WAIT_LIMIT, threads, Vec::is_empty);
    drop(half_open);
}

// ------------------------------------------------------------------------------------------
// The cost at each bound, for docs/hostile.md (run by hand; prints, asserts only the bounds):
// cargo test --release -p interop-tests --test hostile_peer -- --ignored --nocapture costs
// ------------------------------------------------------------------------------------------

fn vm_size() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().next().and_then(|p| p.parse::<usize>().ok()).unwrap_or(0) * 4096
}

/// What the process holds: library threads, descriptors, resident and mapped memory.
fn held() -> (usize, usize, usize, usize) {
    (threads().len(), fds(), rss(), vm_size())
}

fn report(what: &str, n: usize, before: (usize, usize, usize, usize), after: (usize, usize, usize, usize)) {
    let per = |a: usize, b: usize| (a as f64 - b as f64) / n.max(1) as f64;
    eprintln!(
        "| {what} | {n} | {:+} ({:.1} each) | {:+} ({:.1} each) | {:+.1} MiB ({:.0} KiB each) | {:+.1} MiB mapped |",
        after.0 as i64 - before.0 as i64,
        per(after.0, before.0),
        after.1 as i64 - before.1 as i64,
        per(after.1, before.1),
        (after.2 as f64 - before.2 as f64) / 1048576.0,
        per(after.2, before.2) / 1024.0,
        (after.3 as f64 - before.3 as f64) / 1048576.0,
    );
}

#[test]
#[ignore = "prints the cost of each bound for docs/hostile.md"]
fn costs_at_the_bounds() {
    let _g = serial();
    eprintln!("| attack | count | library threads | fds | RSS | address space |");
    eprintln!("|---|---|---|---|---|---|");
    // Connections from this one host up to the server's bound (its host's bound raised to
    // it): what the server holds for as many hosts as it serves.
    let limits = ServerLimits::default();
    let limits = limits.max_connections_per_host(limits.max_connections);
    // Handshaken TCP connections held open up to the cap, by a peer that spends one socket on
    // each (no threads): what the server holds for them.
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let before = held();
    let conns: Vec<TcpStream> = (0..limits.max_connections).map(|_| raw_tcp_connection(&s.local_addr())).collect();
    eventually(
        "every connection served",
        WAIT_LIMIT,
        || s.stats().connections,
        |n| *n == limits.max_connections as u64,
    );
    report("TCP: connections held open, at max_connections", conns.len(), before, held());
    let mut over = TcpStream::connect(s.local_addr()).unwrap();
    over.write_all(&TCP_REQUEST).unwrap();
    eventually("the connection over the cap to be rejected", WAIT_LIMIT, || closed_by_server(&mut over), |c| *c);
    drop(conns);
    drop(s);
    // Silent handshakes up to the cap.
    let s = server(&rpcrdma_verbs::Tcp, limits);
    let before = held();
    let silent: Vec<TcpStream> =
        (0..limits.max_handshakes).map(|_| TcpStream::connect(s.local_addr()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    report("TCP: silent handshakes, at max_handshakes", silent.len(), before, held());
    drop(silent);
    drop(s);
    // In-process connections up to the cap (the peer's queue pairs live in this process too).
    let s = server(&rpcrdma_verbs::InProcess, limits);
    let before = held();
    let held_qps: Vec<_> = (0..limits.max_connections)
        .map(|_| {
            let pd = rpcrdma_verbs::InProcess.alloc_pd().unwrap();
            let (qp, _) =
                rpcrdma_verbs::InProcess.connect(&pd, &s.local_addr(), &[], QpCaps::default(), WAIT_LIMIT).unwrap();
            (pd, qp)
        })
        .collect();
    eventually(
        "every connection served",
        WAIT_LIMIT,
        || s.stats().connections,
        |n| *n == limits.max_connections as u64,
    );
    report("in-process: connections held open, at max_connections", held_qps.len(), before, held());
    drop(held_qps);
    drop(s);
    // A thousand connect-and-close cycles: what is left afterwards.
    for backend in ["TCP", "in-process"] {
        let before = held();
        let s = if backend == "TCP" {
            server(&rpcrdma_verbs::Tcp, limits)
        } else {
            server(&rpcrdma_verbs::InProcess, limits)
        };
        for _ in 0..1000 {
            if backend == "TCP" {
                drop(raw_tcp_connection(&s.local_addr()));
            } else {
                let pd = rpcrdma_verbs::InProcess.alloc_pd().unwrap();
                drop(
                    rpcrdma_verbs::InProcess.connect(&pd, &s.local_addr(), &[], QpCaps::default(), WAIT_LIMIT).unwrap(),
                );
            }
        }
        // Left: the acceptor and the event loop's threads (the one waiting for work, and at
        // most one more), which the server keeps while it lives.
        eventually("the closed connections' threads to end", WAIT_LIMIT, threads, |t| t.len() <= before.0 + 3);
        report(&format!("{backend}: left after 1,000 connect-and-close cycles"), 1000, before, held());
        drop(s);
    }
}
