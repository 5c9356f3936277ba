//! The TCP backend: the in-process semantics between two processes or two hosts, over one TCP
//! connection per queue pair.
//!
//! Memory registration is local, exactly as in the [in-process backend](crate::inproc): a TCP
//! protection domain *is* an [`InProcPd`] and its regions are [`InProcRegion`]s (same
//! unpredictable, never-reissued keys and random page-aligned addresses). What differs is how a
//! work request reaches the peer: as a frame on the queue pair's TCP stream, applied by the
//! peer's readiness loop against the peer's own registrations. The **target enforces** every
//! remote rule (rkey known in its protection domain and not invalidated, range inside the
//! region, Remote Read / Remote Write granted); the initiator only checks its own local
//! scatter/gather entries.
//!
//! # Wire protocol
//!
//! Connection management (one TCP connection per queue pair): the active side sends
//! `"VRBT" 1` and its private data padded to 56 bytes; the passive side answers `'A'` and its
//! private data padded to 196 bytes, or `'R'` (reject; a closed stream reads as a reject too);
//! the active side confirms with `'U'` (ready to use, as in the InfiniBand CM), so `accept`
//! fails with [`ConnectionAborted`](crate::Error::ConnectionAborted) when the connector has
//! given up. Oversized private data is refused before anything is sent.
//!
//! Then frames: a head per work request or answer, and its payload ([`frame`] has the
//! table and the codec).
//!
//! Disconnection is the TCP FIN (`shutdown(Write)`); a peer process that dies is seen the same
//! way, as end of stream or a reset.
//!
//! # How the rules hold
//!
//! * **Threads.** A queue pair has none of its own. The thread that posts a work request
//!   writes its frame at once, without blocking; whatever a full socket holds back, the
//!   process's one readiness loop (a thread named `verbs-io`, sleeping in epoll through
//!   mio) writes when the socket drains. The same loop reads every connection's socket as it
//!   becomes readable and applies the peer's frames, and fires the timers the queue pairs ask
//!   for (the retry timeout below): there is no polling tick, so an idle connection costs a
//!   socket and no CPU.
//! * **Ordering.** Frames are queued in posting order and written in that order (whoever writes
//!   takes them off the one queue), and the loop applies the peer's frames in stream order, so
//!   a Write posted before a Send has landed before the Send's Receive completion is queued.
//!   Responses come back in the same order, so the initiator matches each `ACK`/`READ_RESP`/
//!   `NAK` to the oldest outstanding work request.
//! * **Sender completions are generated on the responder's answer** (the `ACK`, as RC hardware
//!   generates them on the transport ACK), never when the frame is written: that is what lets
//!   a Send that finds no Receive fail the *sender* with
//!   [`RnrRetryExceeded`](crate::Status::RnrRetryExceeded), and an out-of-bounds Write fail
//!   with [`RemoteAccessError`](crate::Status::RemoteAccessError).
//! * **Fatal errors.** A responder that refuses a request (no Receive posted, Send larger than
//!   the Receive, bad rkey / range / access, unusable Receive, bad invalidate) queues the
//!   matching Receive completion where the in-process backend does, sends `NAK` with the
//!   sender's status, moves to Error (flushing its Receives, one `Disconnected` event) and
//!   closes its half of the stream; the initiator completes the refused work request with that
//!   status and flushes the rest. Checks happen under the target region's lock before a byte is
//!   copied, so a refused Write or Read touches nothing.
//! * **Local errors** (a scatter/gather entry outside its region, of another protection domain,
//!   invalidated, or lacking Local Write where written) complete with
//!   [`LocalProtectionError`](crate::Status::LocalProtectionError) in posting order, after the
//!   work requests posted before them, and tear the connection down.
//! * **Copies and locks.** A Send or Write gathers its bytes when posted (so, unlike hardware,
//!   the source may be reused as soon as the post returns); the target's loop lands them from
//!   its read buffer into the target region piece by piece as they arrive, each piece under
//!   that region's lock and checked against the rule for the whole range. Nobody holds a lock
//!   across a socket operation that could wait, and nobody ever waits on a socket, so crossing
//!   bulk transfers cannot deadlock (a test checks this). Reading a source region at
//!   transmission time instead would save the post-time copy, at the cost of holding the
//!   region for as long as the peer takes to read.
//! * **Read chunks offered with their call.** An RDMA Read here is a network round trip, on
//!   which the reader waits and the peer's loop wakes to answer. A side that knows the peer
//!   will read a range of its memory offers it ahead of the Send that says so
//!   ([`QueuePair::offer_read`](crate::QueuePair::offer_read): a [`frame::Head::Offer`] frame,
//!   the range checked as a Read of it would be), and the peer copies it with
//!   [`QueuePair::take_offered`](crate::QueuePair::take_offered), no work request and nothing
//!   to wait for, instead of reading it. An RDMA Read still goes to the peer, offered or not,
//!   so the peer's rules hold at the time of the Read; an offer taken is what the memory held
//!   when offered, even if the peer has closed its key since with a Local Invalidate (a Send
//!   with Invalidate from this side lets go of the key's offers). A queue pair holds at most
//!   256 KiB of offers (one buffer, allocated at the first offer) and 64 ranges, each at most
//!   64 KiB, and offers about 64 KiB at most between two Sends of its own (the constants of
//!   `tcp/qp/offered.rs` are these bounds' one home); a newer offer passes over the oldest,
//!   and a range not offered, or passed over, is read from the peer as before (its bytes then
//!   cross twice: a sender keeps what it offers and has not seen taken within
//!   [`QueuePair::offers_held`](crate::QueuePair::offers_held), as negotiate's data path does).
//!   [`offers_taken`] counts the process's offers taken.
//! * **Queue depths** are enforced at post time: `max_recv_wr` posted Receives, `max_send_wr`
//!   send-queue work requests posted and not yet reaped.
//! * **A peer that stays connected but stops taking part** is what hardware's transport
//!   retries catch: when writing has moved nothing for [`QpCaps::retry_timeout`], or a work
//!   request on the wire has gone unanswered that long, the oldest work request on the wire
//!   fails with [`RetryExceeded`](crate::Status::RetryExceeded) and the socket is cut. The
//!   answers queued for a peer that sends requests but never reads are bounded (ACKs coalesce;
//!   at most 4096 answers and 64 MiB of Read responses, then a NAK), and after a disconnect
//!   the socket is held at most the retry timeout for the peer's end of stream.
//!
//! Addresses are socket addresses, `HOST:PORT`; [`Tcp::any_address`](crate::Backend::any_address)
//! is `127.0.0.1:0` and [`Listener::local_addr`](crate::Listener::local_addr) gives the bound port.
//!
//! Not modelled, besides what the in-process backend leaves out: payloads are landed while the
//! target region is locked, one read's worth at a time, so its owner's
//! [`with`](crate::MemoryRegion::with) may wait for a piece of a frame being landed, and a
//! `with` that runs long (or a waker that blocks) holds up the one loop, so every TCP
//! connection of the process, not just its own; no
//! authentication or encryption: anyone who can reach the port and guess an rkey can use it,
//! so listen on trusted networks only.
mod cm;
pub mod frame;
mod qp;

use std::time::Duration;

pub use cm::{TcpCmListener, TcpRequest};
pub use qp::TcpQp;

/// How many ranges this process's TCP queue pairs took from what their peers offered
/// ([`QueuePair::take_offered`](crate::QueuePair::take_offered)) instead of reading them:
/// what tests and benchmarks count to see offers used.
///
/// ```
/// let before = rpcrdma_verbs::tcp::offers_taken();
/// assert!(rpcrdma_verbs::tcp::offers_taken() >= before);
/// ```
pub fn offers_taken() -> u64 {
    qp::OFFERS_TAKEN.load(std::sync::atomic::Ordering::Relaxed)
}

/// How many offers this process's TCP queue pairs passed over (to hold newer ones, or
/// replaced by a newer offer of the same range) before they were taken: each a range whose
/// bytes crossed for nothing, if the peer then read it.
///
/// ```
/// let before = rpcrdma_verbs::tcp::offers_passed_over();
/// assert!(rpcrdma_verbs::tcp::offers_passed_over() >= before);
/// ```
pub fn offers_passed_over() -> u64 {
    qp::OFFERS_PASSED_OVER.load(std::sync::atomic::Ordering::Relaxed)
}

/// How many writes to a socket this process's TCP queue pairs made (each a `sendto` that
/// moved bytes): what tests and benchmarks count to see a burst's frames go in one write
/// ([`PostBatch`](crate::PostBatch)).
///
/// ```
/// let before = rpcrdma_verbs::tcp::socket_writes();
/// assert!(rpcrdma_verbs::tcp::socket_writes() >= before);
/// ```
pub fn socket_writes() -> u64 {
    qp::SOCKET_WRITES.load(std::sync::atomic::Ordering::Relaxed)
}

use crate::lock;

use crate::inproc::{InProcPd, InProcRegion};
use crate::{Backend, ListenOptions, QpCaps, Result};

/// A TCP protection domain: registration is local, so it is the in-process one.
pub type TcpPd = InProcPd;

/// A region registered in a [`TcpPd`].
pub type TcpRegion = InProcRegion;

/// The TCP backend. A unit value: all state is per protection domain, connection and listener.
///
/// ```
/// use std::net::SocketAddr;
/// use std::time::Duration;
/// use rpcrdma_verbs::*;
/// let t = Duration::from_secs(5);
/// let listener = Tcp.listen(&Tcp.any_address()).unwrap(); // an ephemeral loopback port
/// let addr: SocketAddr = listener.local_addr().parse().unwrap();
/// assert!(addr.ip().is_loopback() && addr.port() != 0);
///
/// let client = std::thread::spawn(move || {
///     let pd = Tcp.alloc_pd().unwrap();
///     let (qp, _) = Tcp.connect(&pd, &addr.to_string(), &[], QpCaps::default(), t).unwrap();
///     let msg = pd.register(b"over tcp".to_vec(), Access::empty()).unwrap();
///     qp.post_send(1, &[Sge::whole(&msg)], None).unwrap();
///     assert!(qp.wait_cq(t).unwrap().is_ok());
///     qp // keep the connection up until joined
/// });
/// let pd = Tcp.alloc_pd().unwrap();
/// let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
/// let req = listener.get_request(t).unwrap();
/// let qp = req.accept_with(&pd, &[], QpCaps::default(), |qp| qp.post_recv(7, Sge::whole(&buf))).unwrap();
/// let c = qp.wait_cq(t).unwrap();
/// buf.with(|b| assert_eq!(&b[..c.byte_len as usize], b"over tcp"));
/// client.join().unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Tcp;

impl Backend for Tcp {
    type Pd = TcpPd;
    type Region = TcpRegion;
    type Qp = TcpQp;
    type Listener = TcpCmListener;
    type Request = TcpRequest;

    /// `127.0.0.1:0`: an ephemeral loopback port.
    fn any_address(&self) -> String {
        "127.0.0.1:0".to_string()
    }

    fn alloc_pd(&self) -> Result<TcpPd> {
        Ok(InProcPd::new())
    }

    fn wakes_wakers(&self) -> bool {
        true
    }

    fn readiness(&self) -> Option<crate::Readiness> {
        crate::Readiness::get()
    }

    fn listen_with(&self, addr: &str, opts: &ListenOptions) -> Result<TcpCmListener> {
        cm::listen(addr, opts)
    }

    fn connect(
        &self,
        pd: &TcpPd,
        addr: &str,
        private_data: &[u8],
        caps: QpCaps,
        timeout: Duration,
    ) -> Result<(TcpQp, Vec<u8>)> {
        cm::connect(pd, addr, private_data, caps, timeout)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        Access, ConnectRequest, Error, Listener, MemoryRegion, Opcode, ProtectionDomain, QpState, QueuePair, RemoteBuf,
        Sge, Status,
    };

    const T: Duration = Duration::from_secs(10);

    fn pair() -> (TcpPd, TcpQp, TcpQp) {
        let l = Tcp.listen(&Tcp.any_address()).unwrap();
        let addr = l.local_addr();
        let pd = Tcp.alloc_pd().unwrap();
        let pd2 = pd.clone();
        let t = std::thread::spawn(move || Tcp.connect(&pd2, &addr, &[], QpCaps::default(), T).unwrap().0);
        let server = l.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
        (pd, t.join().unwrap(), server)
    }

    #[test]
    fn local_error_completes_after_earlier_work_and_flushes_later_work() {
        let (pd, client, server) = pair();
        let target = pd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        let src = pd.register(vec![1; 64], Access::empty()).unwrap();
        client.post_write(1, &[Sge::whole(&src)], target.remote_at(0)).unwrap();
        // Outside its own region: a local protection error, reported in posting order.
        client.post_send(2, &[Sge::new(&src, 60, 8)], None).unwrap();
        client.post_write(3, &[Sge::whole(&src)], target.remote_at(0)).unwrap();
        let got: Vec<_> = (0..3).map(|_| client.wait_cq(T).unwrap()).map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(got, [(1, Status::Success), (2, Status::LocalProtectionError), (3, Status::WorkRequestFlushed)]);
        assert_eq!(server.cm_event(T), Some(crate::CmEvent::Disconnected));
        assert_eq!((client.state(), server.state()), (QpState::Error, QpState::Error));
    }

    #[test]
    fn read_into_a_region_without_local_write_is_a_local_error() {
        let (pd, client, _server) = pair();
        let source = pd.register(vec![5; 64], Access::REMOTE_READ).unwrap();
        let dst = pd.register(vec![0; 64], Access::empty()).unwrap();
        client.post_read(1, &[Sge::whole(&dst)], source.remote_at(0)).unwrap();
        let c = client.wait_cq(T).unwrap();
        assert_eq!((c.wr_id, c.opcode, c.status), (1, Opcode::RdmaRead, Status::LocalProtectionError));
        dst.with(|d| assert!(d.iter().all(|&x| x == 0)));
    }

    #[test]
    fn send_queue_depth_counts_unreaped_work() {
        let l = Tcp.listen(&Tcp.any_address()).unwrap();
        let addr = l.local_addr();
        let pd = Tcp.alloc_pd().unwrap();
        let caps = QpCaps::default().max_send_wr(2);
        let pd2 = pd.clone();
        let t = std::thread::spawn(move || Tcp.connect(&pd2, &addr, &[], caps, T).unwrap().0);
        let _server = l.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
        let client = t.join().unwrap();
        let target = pd.register(vec![0; 8], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        let src = pd.register(vec![1; 8], Access::empty()).unwrap();
        for i in 0..2 {
            client.post_write(i, &[Sge::whole(&src)], target.remote_at(0)).unwrap();
        }
        assert_eq!(client.post_write(9, &[Sge::whole(&src)], target.remote_at(0)), Err(Error::QueueFull));
        assert!(client.wait_cq(T).unwrap().is_ok());
        client.post_write(2, &[Sge::whole(&src)], target.remote_at(0)).unwrap();
    }

    /// An acknowledgement waits for a frame of ours going the other way (TCP's delayed ACK,
    /// `qp::ACK_DELAY`): a Send's ACK rides the answering Send, so a ping-pong of Sends costs
    /// one socket write per message, not two (the ACK alone, then the answer). And an ACK with
    /// nothing to carry it still goes out once due: a Send nobody answers completes.
    #[test]
    fn acknowledgements_ride_the_next_frame_the_other_way() {
        let (pd, client, server) = pair();
        let region = |fill| pd.register(vec![fill; 64], Access::LOCAL_WRITE).unwrap();
        let (client_rx, server_rx, ping, pong) = (region(0), region(0), region(1), region(2));
        const ROUNDS: u64 = 200;
        let before = client.socket_writes() + server.socket_writes();
        client.post_recv(100, Sge::whole(&client_rx)).unwrap();
        server.post_recv(200, Sge::whole(&server_rx)).unwrap();
        // Waits on `qp` for the Receive `wr_id`, taking the Send completions that come first.
        let receive = |qp: &TcpQp, wr_id: u64| loop {
            let c = qp.wait_cq(T).unwrap();
            assert_eq!(c.status, Status::Success, "{c:?}");
            if c.opcode == Opcode::Recv {
                assert_eq!((c.wr_id, c.byte_len), (wr_id, 64));
                return;
            }
        };
        for i in 0..ROUNDS {
            client.post_send(i, &[Sge::whole(&ping)], None).unwrap();
            receive(&server, 200);
            server.post_recv(200, Sge::whole(&server_rx)).unwrap();
            server.post_send(1000 + i, &[Sge::whole(&pong)], None).unwrap();
            receive(&client, 100);
            client.post_recv(100, Sge::whole(&client_rx)).unwrap();
        }
        let writes = client.socket_writes() + server.socket_writes() - before;
        // 2 messages a round: 2 writes a round when each ACK rides the answer, 4 when each goes
        // alone; a few ACKs whose answer was late (a busy machine) go alone at their deadline.
        // Measured: 400 in every run, also beside another test run; 800 with every ACK written
        // as it is queued.
        assert!(writes < 3 * ROUNDS, "{writes} socket writes for {ROUNDS} rounds of two Sends");
        server_rx.with(|b| assert!(b.iter().all(|&x| x == 1)));
        client_rx.with(|b| assert!(b.iter().all(|&x| x == 2)));
        // The server's last reply is acknowledged with nothing of the client's to carry it:
        // the ACK goes alone at its deadline and the server's Send completes.
        let last = loop {
            let c = server.wait_cq(T).unwrap();
            if c.wr_id == 1000 + ROUNDS - 1 {
                break c;
            }
        };
        assert_eq!((last.opcode, last.status), (Opcode::Send, Status::Success));
    }

    #[test]
    fn addresses_and_timeouts() {
        let pd = Tcp.alloc_pd().unwrap();
        assert!(matches!(Tcp.listen("not an address"), Err(Error::BadAddress(_))));
        assert!(matches!(Tcp.connect(&pd, "nowhere", &[], QpCaps::default(), T), Err(Error::BadAddress(_))));
        // A listener that never takes the request: the connect times out.
        let l = Tcp.listen(&Tcp.any_address()).unwrap();
        let addr = l.local_addr();
        assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"));
        let short = Duration::from_millis(200);
        assert_eq!(Tcp.connect(&pd, &addr, &[], QpCaps::default(), short).err(), Some(Error::Timeout));
        // Its request is still queued; accepting it finds the connector gone.
        let req = l.get_request(T).unwrap();
        assert_eq!(req.accept(&pd, &[], QpCaps::default()).err(), Some(Error::ConnectionAborted));
    }

    /// A raw peer's side of the handshake with `listener`: the stream after the accept.
    fn raw_peer(addr: &str) -> std::net::TcpStream {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let mut req = b"VRBT\x01".to_vec();
        req.resize(5 + crate::CONNECT_PRIVATE_DATA_MAX, 0);
        s.write_all(&req).unwrap();
        let mut accept = [0u8; 1 + crate::ACCEPT_PRIVATE_DATA_MAX];
        s.read_exact(&mut accept).unwrap();
        assert_eq!(accept[0], b'A');
        s.write_all(b"U").unwrap();
        s
    }

    /// A listener that answers the handshake a byte at a time, each just within the connect's
    /// timeout, cannot stretch `connect` past that timeout: it fails with `Error::Timeout` when
    /// the timeout is up. Before: each read had the whole timeout, so the 197 bytes of the
    /// accept could take 197 timeouts (here 10 s against 300 ms).
    #[test]
    fn a_listener_answering_a_byte_at_a_time_cannot_stretch_connect_past_its_timeout() {
        use std::io::{Read, Write};
        let raw = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = raw.local_addr().unwrap().to_string();
        let slow = std::thread::spawn(move || {
            let (mut s, _) = raw.accept().unwrap();
            let mut req = vec![0u8; 5 + crate::CONNECT_PRIVATE_DATA_MAX];
            s.read_exact(&mut req).unwrap();
            let mut accept = vec![b'A'];
            accept.resize(1 + crate::ACCEPT_PRIVATE_DATA_MAX, 0);
            for b in accept {
                if s.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let pd = Tcp.alloc_pd().unwrap();
        let started = std::time::Instant::now();
        let got = Tcp.connect(&pd, &addr, &[], QpCaps::default(), Duration::from_millis(300));
        let took = started.elapsed();
        assert_eq!(got.err(), Some(Error::Timeout));
        assert!(took < Duration::from_secs(2), "connect took {took:?} against its 300 ms");
        let _ = slow.join();
    }

    /// A queue pair accepted from a raw peer ([`raw_peer`]), its protection domain, and the
    /// peer's stream.
    fn accepted_from_raw_peer() -> (TcpPd, TcpQp, std::net::TcpStream) {
        let l = Tcp.listen(&Tcp.any_address()).unwrap();
        let addr = l.local_addr();
        let pd = Tcp.alloc_pd().unwrap();
        let peer = std::thread::spawn(move || raw_peer(&addr));
        let qp = l.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
        (pd, qp, peer.join().unwrap())
    }

    /// A queue pair in Error accepts nothing: a Write its peer sends after this side tore the
    /// connection down never lands, even in a region that outlives the queue pair (the peer
    /// here ignores the FIN and writes anyway, as a hostile one would).
    #[test]
    fn a_write_after_this_side_disconnected_never_lands() {
        use std::io::Write;
        let (pd, qp, mut peer) = accepted_from_raw_peer();
        let target = pd.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        qp.disconnect();
        assert_eq!(qp.cm_event(T), Some(crate::CmEvent::Disconnected));
        let mut frame = Vec::new();
        let remote = target.remote_at(0);
        frame::Head::Write { addr: remote.addr, rkey: remote.rkey, len: 8 }.encode(&mut frame);
        frame.extend_from_slice(&[0xee; 8]);
        let before = qp.applied();
        let _ = peer.write_all(&frame);
        seen_by(&qp, before + frame.len() as u64);
        target.with(|b| assert!(b.iter().all(|&x| x == 0), "a Write landed after the disconnect"));
    }

    /// Waits until `qp`'s readiness loop has read `total` bytes from its peer: what they
    /// would land has landed by then (frames are applied as they are read).
    fn seen_by(qp: &TcpQp, total: u64) {
        let deadline = std::time::Instant::now() + T;
        while qp.applied() < total {
            assert!(std::time::Instant::now() < deadline, "{} of {total} bytes read", qp.applied());
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A raw peer's Write of 8 bytes at `at`: its head and first 4 bytes are sent now, and it
    /// returns once `qp` has read them; the other 4 go when the returned closure is called,
    /// which returns once `qp` has read those too.
    fn half_a_write(
        peer: &mut std::net::TcpStream,
        qp: &TcpQp,
        at: RemoteBuf,
    ) -> impl FnOnce(&mut std::net::TcpStream, &TcpQp) {
        use std::io::Write;
        let mut frame = Vec::new();
        frame::Head::Write { addr: at.addr, rkey: at.rkey, len: 8 }.encode(&mut frame);
        frame.extend_from_slice(&[0xee; 4]);
        let before = qp.applied();
        peer.write_all(&frame).unwrap();
        seen_by(qp, before + frame.len() as u64);
        |peer: &mut std::net::TcpStream, qp: &TcpQp| {
            let before = qp.applied();
            let _ = peer.write_all(&[0xee; 4]);
            seen_by(qp, before + 4);
        }
    }

    /// A Write whose payload is still arriving when this side tears the connection down lands
    /// nothing more after it (a queue pair in Error accepts nothing, as on a real device, whose
    /// later packets meet a queue pair in Error): its first bytes landed, the rest never do.
    #[test]
    fn a_write_under_way_when_this_side_disconnects_lands_nothing_more() {
        let (pd, qp, mut peer) = accepted_from_raw_peer();
        let target = pd.register(vec![0; 8], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        let rest = half_a_write(&mut peer, &qp, target.remote_at(0));
        let deadline = std::time::Instant::now() + T;
        while target.with(|b| b[..4] != [0xee; 4]) {
            assert!(std::time::Instant::now() < deadline, "the first bytes landed");
            std::thread::sleep(Duration::from_millis(1));
        }
        qp.disconnect();
        rest(&mut peer, &qp);
        target.with(|b| assert_eq!(b[4..], [0; 4], "bytes landed after the disconnect"));
    }

    /// A Write into a memory window whose payload is still arriving when this side invalidates
    /// the window (Local Invalidate, RFC 8166 section 4.5.4's fence) lands nothing more after
    /// it: the window's key no longer names the memory, as on a real device, which checks each
    /// packet against the key.
    #[test]
    fn a_write_under_way_when_its_window_is_invalidated_lands_nothing_more() {
        let (pd, qp, mut peer) = accepted_from_raw_peer();
        let target = pd.register(vec![0; 8], Access::LOCAL_WRITE).unwrap();
        let window = qp.post_bind_window(1, &target, 0, 8, Access::REMOTE_WRITE).unwrap();
        assert!(qp.wait_cq(T).unwrap().is_ok());
        let rest = half_a_write(&mut peer, &qp, window);
        let deadline = std::time::Instant::now() + T;
        while target.with(|b| b[..4] != [0xee; 4]) {
            assert!(std::time::Instant::now() < deadline, "the first bytes landed");
            std::thread::sleep(Duration::from_millis(1));
        }
        qp.post_local_invalidate(2, window.rkey).unwrap();
        assert!(qp.wait_cq(T).unwrap().is_ok(), "the window invalidated");
        rest(&mut peer, &qp);
        target.with(|b| assert_eq!(b[4..], [0; 4], "bytes landed through an invalidated window"));
    }

    /// A retry timeout too long to add to an instant (`Duration::MAX`, "never") is no
    /// deadline, not an overflow on the loop every connection shares: the connection works,
    /// its peer's end is seen, and the process's other connections go on.
    #[test]
    fn a_retry_timeout_of_duration_max_is_no_deadline() {
        let l = Tcp.listen(&Tcp.any_address()).unwrap();
        let addr = l.local_addr();
        let pd = Tcp.alloc_pd().unwrap();
        let caps = QpCaps::default().retry_timeout(Duration::MAX);
        let pd2 = pd.clone();
        let t = std::thread::spawn(move || Tcp.connect(&pd2, &addr, &[], caps, T).unwrap().0);
        let server = l.get_request(T).unwrap().accept(&pd, &[], caps).unwrap();
        let client = t.join().unwrap();
        let target = pd.register(vec![0; 8], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        let src = pd.register(vec![1; 8], Access::empty()).unwrap();
        client.post_write(1, &[Sge::whole(&src)], target.remote_at(0)).unwrap();
        assert!(client.wait_cq(T).unwrap().is_ok());
        drop(server);
        assert_eq!(client.cm_event(T), Some(crate::CmEvent::Disconnected));
        // The loop is alive: another pair still moves data.
        let (pd, a, _b) = pair();
        let t2 = pd.register(vec![0; 8], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        let s2 = pd.register(vec![2; 8], Access::empty()).unwrap();
        a.post_write(2, &[Sge::whole(&s2)], t2.remote_at(0)).unwrap();
        assert!(a.wait_cq(T).unwrap().is_ok());
        t2.with(|b| assert_eq!(b, &[2; 8]));
    }

    #[test]
    fn crossing_bulk_writes_and_reads_do_not_deadlock() {
        // Each side writes from the region the other side writes into, and reads it back,
        // far beyond the socket buffers: the writer must let go of a source region's lock
        // while its peer is not reading.
        const LEN: usize = 4 << 20;
        const N: u64 = 8;
        let (pd, a, b) = pair();
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let ra = pd.register(vec![1; LEN], rw).unwrap();
        let rb = pd.register(vec![2; LEN], rw).unwrap();
        std::thread::scope(|s| {
            for (qp, local, remote) in [(&a, &ra, &rb), (&b, &rb, &ra)] {
                s.spawn(move || {
                    for i in 0..N {
                        qp.post_write(2 * i, &[Sge::whole(local)], remote.remote_at(0)).unwrap();
                        qp.post_read(2 * i + 1, &[Sge::whole(local)], remote.remote_at(0)).unwrap();
                    }
                    for i in 0..2 * N {
                        let c = qp.wait_cq(T).expect("a completion");
                        assert_eq!((c.wr_id, c.status, c.byte_len), (i, Status::Success, LEN as u32));
                    }
                });
            }
        });
        assert_eq!((a.state(), b.state()), (QpState::Ready, QpState::Ready));
    }

    /// The client's side of a call with a Read chunk, `len` bytes at `at` of `chunk` offered,
    /// then a Send that the server receives; the chunk's memory is then overwritten (as a
    /// requester must not), so that what the server finds tells where it came from.
    fn offer_then_send(client: &TcpQp, server: &TcpQp, pd: &TcpPd, chunk: &TcpRegion, at: usize, len: u32) {
        let receive = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        server.post_recv(10, Sge::whole(&receive)).unwrap();
        assert!(client.offer_read(chunk.remote_at(at), len));
        chunk.with_mut(|b| b.fill(0xcc));
        let call = pd.register(b"read my chunk".to_vec(), Access::empty()).unwrap();
        client.post_send(11, &[Sge::whole(&call)], None).unwrap();
        assert_eq!(server.wait_cq(T).map(|c| (c.wr_id, c.opcode)), Some((10, Opcode::Recv)));
    }

    /// What `server` takes of `len` bytes at `at` of `chunk`, if it is offered.
    fn take(server: &TcpQp, pd: &TcpPd, chunk: &TcpRegion, at: usize, len: usize) -> Option<Vec<u8>> {
        let into = pd.register(vec![0; len], Access::LOCAL_WRITE).unwrap();
        server.take_offered(Sge::whole(&into), chunk.remote_at(at)).then(|| into.with(|b| b.to_vec()))
    }

    #[test]
    fn an_offered_range_is_taken_where_the_reader_is() {
        let (pd, client, server) = pair();
        let chunk = pd.register((0..=255u8).collect(), Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
        offer_then_send(&client, &server, &pd, &chunk, 16, 100);
        let before = offers_taken();
        assert_eq!(take(&server, &pd, &chunk, 16, 100), Some((16..116).collect()), "the bytes offered");
        assert!(offers_taken() > before);
        assert_eq!(server.offers_counted(), (1, 0));
        assert_eq!(take(&server, &pd, &chunk, 16, 100), None, "taken once");
        assert_eq!((client.state(), server.state()), (QpState::Ready, QpState::Ready));
    }

    #[test]
    fn only_exactly_the_range_offered_is_taken_and_a_read_always_goes_to_the_peer() {
        let (pd, client, server) = pair();
        let chunk = pd.register((0..=255u8).collect(), Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
        offer_then_send(&client, &server, &pd, &chunk, 16, 100);
        assert_eq!(take(&server, &pd, &chunk, 16, 50), None, "a part of it");
        assert_eq!(take(&server, &pd, &chunk, 8, 120), None, "a range around it");
        // Into memory it may not write: false, and the offer stays.
        let ro = pd.register(vec![0; 100], Access::empty()).unwrap();
        assert!(!server.take_offered(Sge::whole(&ro), chunk.remote_at(16)));
        // An RDMA Read of the offered range reads the client's memory as it is now.
        let into = pd.register(vec![0; 100], Access::LOCAL_WRITE).unwrap();
        server.post_read(12, &[Sge::whole(&into)], chunk.remote_at(16)).unwrap();
        let c = server.wait_cq(T).unwrap();
        assert_eq!((c.wr_id, c.opcode, c.status, c.byte_len), (12, Opcode::RdmaRead, Status::Success, 100));
        into.with(|b| assert!(b.iter().all(|&x| x == 0xcc)));
        assert_eq!(take(&server, &pd, &chunk, 16, 100), Some((16..116).collect()), "the offer stayed");
    }

    /// The completion of `wr_id` on `qp`, those before it passed over.
    fn completion_of(qp: &TcpQp, wr_id: u64) -> crate::Completion {
        loop {
            let c = qp.wait_cq(T).expect("a completion");
            if c.wr_id == wr_id {
                return c;
            }
        }
    }

    /// A Send with Invalidate of the client's key lets go of what the client offered under it,
    /// and a Read through the key fails after it as it must.
    #[test]
    fn an_invalidated_key_is_closed_to_reads_and_its_offers_let_go() {
        let (pd, client, server) = pair();
        let region = pd.register(vec![7; 64], Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
        let w = client.post_bind_window(1, &region, 0, 64, Access::REMOTE_READ).unwrap();
        assert!(client.wait_cq(T).unwrap().is_ok());
        let receive = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        for _ in 0..2 {
            server.post_recv(10, Sge::whole(&receive)).unwrap();
            assert!(client.offer_read(w, 64));
            client.post_send(11, &[], None).unwrap();
            assert_eq!(server.wait_cq(T).map(|c| c.opcode), Some(Opcode::Recv));
        }
        // The server invalidates the client's key with its reply: the offer goes with it.
        let creceive = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        client.post_recv(20, Sge::whole(&creceive)).unwrap();
        server.post_send(21, &[], Some(w.rkey)).unwrap();
        let c = completion_of(&client, 20);
        assert_eq!(c.invalidated_rkey, Some(w.rkey));
        let into = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        assert!(!server.take_offered(Sge::whole(&into), w), "offered under a key invalidated since");
        server.post_read(22, &[Sge::whole(&into)], w).unwrap();
        assert_eq!(completion_of(&server, 22).status, Status::RemoteAccessError);
    }

    #[test]
    fn only_what_the_peer_may_read_is_offered() {
        let (pd, client, server) = pair();
        let readable = pd.register(vec![1; qp::OFFER_MOST + 8], Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
        let private = pd.register(vec![2; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        assert!(!client.offer_read(private.remote_at(0), 64), "no Remote Read");
        assert!(!client.offer_read(readable.remote_at(16), qp::OFFER_MOST as u32), "past the region");
        assert!(!client.offer_read(readable.remote_at(0), qp::OFFER_MOST as u32 + 1), "too long to offer");
        assert!(!client.offer_read(readable.remote_at(0), 0), "nothing to offer");
        assert!(client.offer_read(readable.remote_at(0), qp::OFFER_MOST as u32));
        // No more than that ahead of one Send: a call's offers fit what its peer holds.
        assert!(!client.offer_read(readable.remote_at(0), 64), "beyond what one Send may have offered");
        let receive = pd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
        server.post_recv(3, Sge::whole(&receive)).unwrap();
        client.post_send(2, &[], None).unwrap();
        assert!(client.offer_read(readable.remote_at(0), 64));
        // A memory window this queue pair bound may be offered; one bound by another may not.
        let w = client.post_bind_window(1, &readable, 0, 64, Access::REMOTE_READ).unwrap();
        assert!(client.offer_read(w, 64));
        // (The two ends of a pair share a protection domain: only the queue pair differs.)
        assert!(!server.offer_read(w, 64), "a window of another queue pair");
    }

    /// A hostile peer offers far more than is held, offers too long to hold, and lies about
    /// nothing it could gain from: the offers held stay within their bound, what is dropped
    /// is read off the stream, and the connection keeps serving (a Send after them lands).
    #[test]
    fn a_peer_that_offers_without_end_costs_only_the_bound() {
        use std::io::Write;
        let l = Tcp.listen(&Tcp.any_address()).unwrap();
        let addr = l.local_addr();
        let pd = Tcp.alloc_pd().unwrap();
        let peer = std::thread::spawn(move || raw_peer(&addr));
        let qp = l.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
        let mut peer = peer.join().unwrap();
        let receive = pd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
        qp.post_recv(1, Sge::whole(&receive)).unwrap();
        let mut wire = Vec::new();
        for i in 0..64u32 {
            let len = if i % 8 == 0 { qp::OFFER_MOST as u32 + 1 } else { 40 << 10 };
            frame::Head::Offer { addr: u64::from(i) << 20, rkey: i, len }.encode(&mut wire);
            wire.resize(wire.len() + len as usize, i as u8);
        }
        frame::Head::Send { len: 5 }.encode(&mut wire);
        wire.extend_from_slice(b"after");
        peer.write_all(&wire).unwrap();
        let c = qp.wait_cq(T).unwrap();
        assert_eq!((c.wr_id, c.status, c.byte_len), (1, Status::Success, 5));
        receive.with(|b| assert_eq!(&b[..5], b"after"));
        let held = qp.offered_held_bytes();
        assert!(held <= qp::HELD_BYTES, "{held} bytes held");
        // The newest offer held is whole, and taken as it was offered.
        let into = pd.register(vec![0; 40 << 10], Access::LOCAL_WRITE).unwrap();
        assert!(qp.take_offered(Sge::whole(&into), RemoteBuf { addr: 63 << 20, rkey: 63 }));
        into.with(|b| assert!(b.iter().all(|&x| x == 63)));
        assert_eq!(qp.state(), QpState::Ready);
    }

    /// The server's Receives that completed by now, looked at without waiting (a wait would
    /// hand the test thread's held posts over).
    fn received_now(server: &TcpQp, settle: Duration) -> usize {
        std::thread::sleep(settle);
        let mut c = [crate::Completion::default(); 16];
        let n = server.poll_cq(&mut c);
        c[..n].iter().filter(|c| c.opcode == Opcode::Recv && c.status == Status::Success).count()
    }

    /// How many Receives completed on `server`, polled (never waited for) until `want` have or
    /// `T` passed.
    fn received_by_polling(server: &TcpQp, want: usize) -> usize {
        let deadline = std::time::Instant::now() + T;
        let mut got = 0;
        while got < want && std::time::Instant::now() < deadline {
            got += received_now(server, Duration::from_millis(1));
        }
        got
    }

    /// Frames arriving from the peer have the readiness loop write whatever is queued (a batch
    /// is cut short then): a test of what a batch holds lets the connection's first frames (the
    /// peer's Receives posted) arrive before it opens one.
    fn let_first_frames_arrive() {
        std::thread::sleep(Duration::from_millis(200));
    }

    /// `crate::batch`: the Sends a thread posts in an open batch stay queued, and go in one
    /// socket write when the batch closes.
    #[test]
    fn a_batch_writes_its_sends_together_when_it_closes() {
        let (pd, client, server) = pair();
        let rx = pd.register(vec![0; 8 * 64], Access::LOCAL_WRITE).unwrap();
        let msg = pd.register(vec![3; 64], Access::empty()).unwrap();
        for i in 0..8 {
            server.post_recv(i, Sge::new(&rx, i as usize * 64, 64)).unwrap();
        }
        let_first_frames_arrive();
        let before = client.socket_writes();
        let batch = crate::PostBatch::open();
        for i in 0..8 {
            client.post_send_with(i, &[Sge::whole(&msg)], None, crate::SendFlags::empty()).unwrap();
        }
        assert_eq!(received_now(&server, Duration::from_millis(50)), 0, "held while the batch is open");
        assert_eq!(client.socket_writes(), before);
        drop(batch);
        assert_eq!(received_by_polling(&server, 8), 8, "every Send arrived once the batch closed");
        assert_eq!(client.socket_writes() - before, 1, "eight Sends, one write");
        rx.with(|b| assert!(b.iter().all(|&x| x == 3)));
    }

    /// What is held never waits on its holder: a thread that waits for a completion hands its
    /// held posts over first (here the completion of its own held Send, which needs the peer's
    /// acknowledgement), and an RDMA Read, which its requester waits for, is never held.
    #[test]
    fn what_a_batch_holds_never_waits_on_its_holder() {
        let (pd, client, server) = pair();
        let rx = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        let msg = pd.register(vec![4; 64], Access::empty()).unwrap();
        server.post_recv(1, Sge::whole(&rx)).unwrap();
        let _batch = crate::PostBatch::open();
        client.post_send(7, &[Sge::whole(&msg)], None).unwrap();
        let c = client.wait_cq(T).expect("the held Send went out when its poster waited");
        assert_eq!((c.wr_id, c.opcode, c.status), (7, Opcode::Send, Status::Success));
        // A Read posted in the batch (still open on this thread) is answered without its
        // poster waiting through the backend (looked at by polling only).
        let source = pd.register((0..64).collect(), Access::REMOTE_READ).unwrap();
        let into = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        server.post_read(9, &[Sge::whole(&into)], source.remote_at(0)).unwrap();
        let deadline = std::time::Instant::now() + T;
        let mut c = [crate::Completion::default()];
        while server.poll_cq(&mut c) == 0 || c[0].opcode != Opcode::RdmaRead {
            assert!(std::time::Instant::now() < deadline, "the Read was held");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!((c[0].wr_id, c[0].status), (9, Status::Success));
        into.with(|b| assert!(b.iter().enumerate().all(|(i, &x)| x == i as u8)));
    }

    /// `QueuePair::flush_posts` from another thread hands over what the holder holds (the
    /// server's loop does so when the thread holding a burst's replies runs long).
    #[test]
    fn another_thread_hands_over_what_a_busy_holder_holds() {
        let (pd, client, server) = pair();
        let rx = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        let msg = pd.register(vec![5; 64], Access::empty()).unwrap();
        server.post_recv(1, Sge::whole(&rx)).unwrap();
        let_first_frames_arrive();
        let client = std::sync::Arc::new(client);
        let batch = crate::PostBatch::open();
        client.post_send_with(1, &[Sge::whole(&msg)], None, crate::SendFlags::empty()).unwrap();
        assert_eq!(received_now(&server, Duration::from_millis(20)), 0);
        let other = client.clone();
        std::thread::spawn(move || other.flush_posts()).join().unwrap();
        assert_eq!(received_by_polling(&server, 1), 1, "not handed over by the other thread");
        drop(batch);
        rx.with(|b| assert!(b.iter().all(|&x| x == 5)));
    }
}
