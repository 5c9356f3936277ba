//! Backward-direction calls (RFC 8167; required in Version Two by the v2 draft section 4.2)
//! through Client and Server on the in-process backend, in both versions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use negotiate::backchannel::BackchannelError;
use negotiate::client::{Client, ClientConfig};
use negotiate::requester;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_v2::draft07::header::{Header, HeaderType};
use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};
use rpcrdma_v2::HeaderLimits;
use rpcrdma_verbs::capture::{Captured, CapturedMessage};
use rpcrdma_verbs::InProcess;

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// An RPC message: XID, msg_type, then `body`.
fn rpc(xid: u32, msg_type: u32, body: &[u8]) -> Vec<u8> {
    [&xid.to_be_bytes()[..], &msg_type.to_be_bytes(), body].concat()
}

/// Answers a call with a reply carrying the same body.
fn echo(call: &[u8]) -> Vec<u8> {
    rpc(u32::from_be_bytes(call[..4].try_into().unwrap()), 1, &call[8..])
}

fn pair(versions: (Version, Version), seen: Arc<Mutex<Vec<Vec<u8>>>>) -> (Server, Client<InProcess>) {
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), echo).unwrap();
    let cfg = ClientConfig::default().requester(requester::RequesterConfig::default().versions(versions));
    let handler = Arc::new(move |call: &[u8]| {
        seen.lock().unwrap().push(call.to_vec());
        echo(call)
    });
    let client = Client::with_backchannel(InProcess, server.local_addr(), cfg, handler);
    (server, client)
}

/// The server's handle for the one connection, once it is there.
fn backchannel(server: &Server) -> negotiate::backchannel::Backchannel {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(b) = server.backchannels().into_iter().next() {
            return b;
        }
        assert!(Instant::now() < deadline, "no connection");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn rfc8167_backward_calls_reach_the_client_handler_in_both_versions() {
    for versions in [(Version::ONE, Version::ONE), (Version::ONE, Version::TWO)] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (server, client) = pair(versions, seen.clone());
        assert_eq!(client.call(&rpc(1, 0, &[0; 8]), &ULB).unwrap(), rpc(1, 1, &[0; 8]));
        assert_eq!(client.version(), Some(versions.1));
        let back = backchannel(&server);
        for i in 0..5u32 {
            let call = rpc(0x8000_0000 + i, 0, &[i as u8; 12]);
            assert_eq!(back.call(&call).unwrap(), rpc(0x8000_0000 + i, 1, &[i as u8; 12]));
        }
        assert_eq!(seen.lock().unwrap().len(), 5);
        assert_eq!(seen.lock().unwrap()[4], rpc(0x8000_0004, 0, &[4; 12]));
        // The forward direction keeps working around them.
        assert_eq!(client.call(&rpc(2, 0, &[5; 4]), &ULB).unwrap(), rpc(2, 1, &[5; 4]));
    }
}

#[test]
fn rfc8167_backward_and_forward_calls_interleave() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (server, client) = pair((Version::ONE, Version::TWO), seen.clone());
    client.call(&rpc(1, 0, &[]), &ULB).unwrap();
    let back = backchannel(&server);
    std::thread::scope(|s| {
        let b = s.spawn(|| {
            (0..20u32)
                .filter(|&i| {
                    back.call(&rpc(0x9000_0000 + i, 0, &i.to_be_bytes())).unwrap()
                        == rpc(0x9000_0000 + i, 1, &i.to_be_bytes())
                })
                .count()
        });
        for i in 0..20u32 {
            assert_eq!(
                client.call(&rpc(100 + i, 0, &i.to_be_bytes()), &ULB).unwrap(),
                rpc(100 + i, 1, &i.to_be_bytes())
            );
        }
        assert_eq!(b.join().unwrap(), 20);
    });
    assert_eq!(seen.lock().unwrap().len(), 20);
}

#[test]
fn backward_calls_need_a_forward_call_first_and_must_fit_inline() {
    let (server, client) = pair((Version::ONE, Version::TWO), Arc::new(Mutex::new(Vec::new())));
    // The connection exists as soon as the client does; its version does not yet.
    let back = backchannel(&server);
    assert!(matches!(back.call(&rpc(7, 0, &[])), Err(BackchannelError::NoVersionYet)));
    client.call(&rpc(1, 0, &[]), &ULB).unwrap();
    let big = rpc(8, 0, &vec![0; 8192]);
    assert!(matches!(back.call(&big), Err(BackchannelError::TooLarge { .. })));
    // Refusals cost nothing: the backward direction still works.
    assert_eq!(back.call(&rpc(9, 0, &[])).unwrap(), rpc(9, 1, &[]));
}

/// A client's backward-call handler that panics gets that call an RPC SYSTEM_ERR reply (RFC
/// 5531 section 9), as the server answers a forward call whose handler panicked, and costs the
/// client nothing: the panic does not unwind through the caller that happened to be receiving,
/// and forward calls in progress meanwhile all complete. Before: the call was left unanswered,
/// and the server's backward call ended with its timeout.
#[test]
fn a_panicking_backchannel_handler_does_not_stall_the_client() {
    let cfg = ServerConfig::default().timeout(Duration::from_millis(300));
    let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ULB), echo).unwrap();
    let handler = Arc::new(|_: &[u8]| -> Vec<u8> { std::panic::panic_any("a backchannel handler that fails") });
    let client = Client::with_backchannel(InProcess, server.local_addr(), ClientConfig::default(), handler);
    client.call(&rpc(1, 0, &[]), &ULB).unwrap();
    let back = backchannel(&server);
    std::thread::scope(|s| {
        let forward = s.spawn(|| (0..200u32).all(|i| client.call(&rpc(10 + i, 0, &[]), &ULB).is_ok()));
        for i in 0..3u32 {
            let xid = 0xa000_0000 + i;
            let got = back.call(&rpc(xid, 0, &[]));
            let system_err: Vec<u8> = [xid, 1, 0, 0, 0, 5].iter().flat_map(|w| w.to_be_bytes()).collect();
            assert!(matches!(&got, Ok(r) if *r == system_err), "backward call {i}: SYSTEM_ERR, not {got:?}");
        }
        assert!(forward.join().unwrap(), "every forward call completes");
    });
    assert_eq!(client.call(&rpc(2, 0, &[7; 4]), &ULB).unwrap(), rpc(2, 1, &[7; 4]));
}

/// `specs/rpcrdma2-transport-properties.txt` section 2.4 (RDMA2_PROP_BACKWARD_CREDITS: the
/// most backward-direction calls the sender serves at once): a client that stated 0 serves
/// none, so the server sends it none and says why; a client that stated 1 (or nothing) gets
/// its backward call. Through the real exchange: the properties follow the first call.
#[test]
fn properties_2_4_a_stated_backward_credits_takes_effect_zero_included() {
    use rpcrdma_v2::properties::TransportProperties;
    for (stated, served) in [(Some(0), false), (Some(1), true), (None, true)] {
        let props = TransportProperties { backward_credits: stated, ..Default::default() };
        let server_cfg = ServerConfig::default().properties(Some(TransportProperties::default()));
        let server = Server::start(InProcess, "inproc:*", server_cfg, Arc::new(ULB), echo).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = {
            let seen = seen.clone();
            Arc::new(move |call: &[u8]| {
                seen.lock().unwrap().push(call.to_vec());
                echo(call)
            })
        };
        let client = Client::with_backchannel(
            InProcess,
            server.local_addr(),
            ClientConfig::default().properties(Some(props)),
            handler,
        );
        // The first call settles Version Two and is followed by the exchange; the second tells
        // the server's backward direction what was stated.
        for xid in 1..=2 {
            assert_eq!(client.call(&rpc(xid, 0, &[0; 8]), &ULB).unwrap(), rpc(xid, 1, &[0; 8]));
        }
        assert!(matches!(client.peer_properties(), negotiate::connection::PeerProperties::Stated(_)));
        let back = backchannel(&server);
        let call = rpc(0x8000_0001, 0, &[7; 4]);
        match back.call(&call) {
            Ok(reply) => {
                assert!(served, "stated {stated:?}: a backward call was sent");
                assert_eq!(reply, rpc(0x8000_0001, 1, &[7; 4]));
                assert_eq!(seen.lock().unwrap().len(), 1);
            }
            Err(e) => {
                assert!(!served, "stated {stated:?}: {e}");
                assert!(matches!(e, BackchannelError::NoBackwardCredits), "{e:?}");
                assert!(seen.lock().unwrap().is_empty(), "nothing reached the client");
            }
        }
    }
}

/// A -07 pair: both sides speak draft-ietf-nfsv4-rpcrdma-version-two-07; the client answers
/// the server's calls with `echo` when `answers`, and every Send each side posts is kept.
fn pair_07(answers: bool) -> (Server, Client<Captured<InProcess>>, Seen, Seen) {
    use negotiate::responder::ResponderConfig;
    use rpcrdma_v2::dialect::{Dialect, VersionTwo};
    let (server_side, from_server) = capturing();
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let server = Server::start(server_side, "inproc:*", scfg, Arc::new(ULB), echo).unwrap();
    let requester = requester::RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    let cfg = ClientConfig::default().requester(requester);
    let (client_side, from_client) = capturing();
    let client = match answers {
        true => Client::with_backchannel(client_side, server.local_addr(), cfg, Arc::new(echo)),
        false => Client::new(client_side, server.local_addr(), cfg),
    };
    // Two forward calls: the first settles -07, and the client's CONNPROP_FINAL goes before
    // the second.
    for xid in 1..=2 {
        assert_eq!(client.call(&rpc(xid, 0, &[0; 8]), &ULB).unwrap(), rpc(xid, 1, &[0; 8]));
    }
    assert_eq!(client.dialect(), Some(Dialect::Ietf07));
    (server, client, from_server, from_client)
}

type Seen = Arc<Mutex<Vec<Vec<u8>>>>;

fn capturing() -> (Captured<InProcess>, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    (Captured::new(InProcess, Arc::new(move |m: &CapturedMessage<'_>| s.lock().unwrap().push(m.bytes.to_vec()))), seen)
}

/// The -07 Sends of `seen` of header type `htype`.
fn sends_of(seen: &Seen, htype: HeaderType) -> Vec<Vec<u8>> {
    let parsed = |m: &Vec<u8>| Header::parse(m, &HeaderLimits::default()).map(|h| h.header_type());
    seen.lock().unwrap().iter().filter(|m| parsed(m).ok() == Some(htype)).cloned().collect()
}

/// Sections 4.6.1, 4.6.2 and 5.2.5 through a real Client and Server on -07: the client that
/// answers the server's calls offers the reverse direction (RDMA2_PROPID_BRS, Simple); the
/// server's reverse-direction call goes as RDMA2_CALL_INLINE with no chunk, "The RPC Call
/// header MUST start with the same XID value that is present in the transport header" and its
/// `rdma_vers` is the forward calls' ("MUST contain the same value"); the client's reply is
/// RDMA2_REPLY_INLINE, its RPC reply starting with the call's XID, in version 2; the caller
/// gets the reply, and neither side sent beyond the other's credit totals (4.2.1).
#[test]
fn draft07_4_6_reverse_direction_calls_reach_the_client_and_come_back() {
    let (server, client, from_server, from_client) = pair_07(true);
    let connprop = sends_of(&from_client, HeaderType::ConnPropFinal);
    let h = Header::parse(&connprop[0], &HeaderLimits::default()).unwrap();
    let stated = Properties::default().apply(&h.properties().unwrap()).unwrap();
    assert_eq!(stated.reverse_direction, ReverseDirection::Simple);
    let back = backchannel(&server);
    for i in 0..5u32 {
        let call = rpc(0x8000_0000 + i, 0, &[i as u8; 12]);
        assert_eq!(back.call(&call).unwrap(), echo(&call), "reverse call {i}");
    }
    let calls = sends_of(&from_server, HeaderType::CallInline);
    assert_eq!(calls.len(), 5);
    let forward_vers = u32::from_be_bytes(from_client.lock().unwrap()[0][4..8].try_into().unwrap());
    for (i, send) in calls.iter().enumerate() {
        let h = Header::parse(send, &HeaderLimits::default()).unwrap();
        assert_eq!(h.payload()[..4], h.xid().to_be_bytes(), "the RPC call starts with the header's XID");
        assert_eq!((h.xid(), forward_vers), (0x8000_0000 + i as u32, 2));
        assert_eq!(u32::from_be_bytes(send[4..8].try_into().unwrap()), forward_vers, "rdma_vers: the forward calls'");
        let l = h.chunk_lists();
        assert!(l.reads.is_empty() && l.writes.is_empty() && l.reply.is_none(), "Simple format: no chunk");
    }
    let replies = sends_of(&from_client, HeaderType::ReplyInline);
    assert_eq!(replies.len(), 5);
    for (i, send) in replies.iter().enumerate() {
        let h = Header::parse(send, &HeaderLimits::default()).unwrap();
        assert_eq!(h.xid(), 0x8000_0000 + i as u32);
        assert_eq!(h.payload()[..4], h.xid().to_be_bytes(), "the RPC reply starts with the call's XID");
        assert_eq!(u32::from_be_bytes(send[4..8].try_into().unwrap()), 2);
    }
    // Both directions at once: forward calls from four threads while reverse calls go.
    let client = Arc::new(client);
    let forward: Vec<_> = (0..4u32)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                for i in 0..50u32 {
                    let call = rpc(0x100 + (t << 8) + i, 0, &[t as u8; 16]);
                    assert_eq!(client.call(&call, &ULB).unwrap(), echo(&call));
                }
            })
        })
        .collect();
    for i in 0..20u32 {
        let call = rpc(0x9000_0000 + i, 0, &[i as u8; 20]);
        assert_eq!(back.call(&call).unwrap(), echo(&call), "reverse call {i} among forward calls");
    }
    for t in forward {
        t.join().unwrap();
    }
    assert_eq!(server.stats().credit_overruns, 0);
}

/// Section 4.6.3: "an Upper-Layer Protocol MUST NOT perform reverse-direction RPC operations
/// until the RPC client indicates support for them". A -07 client with no backchannel states
/// no reverse direction; the server's backward call fails with
/// `BackchannelError::ReverseDirectionNotOffered` and nothing goes to the client.
#[test]
fn draft07_4_6_3_no_reverse_call_goes_to_a_client_that_did_not_offer_it() {
    let (server, client, from_server, from_client) = pair_07(false);
    let connprop = sends_of(&from_client, HeaderType::ConnPropFinal);
    let h = Header::parse(&connprop[0], &HeaderLimits::default()).unwrap();
    let stated = Properties::default().apply(&h.properties().unwrap()).unwrap();
    assert_eq!(stated.reverse_direction, ReverseDirection::None);
    let back = backchannel(&server);
    let before = from_server.lock().unwrap().len();
    let got = back.call(&rpc(0x8000_0000, 0, &[0; 12]));
    assert!(matches!(got, Err(BackchannelError::ReverseDirectionNotOffered)), "{got:?}");
    assert_eq!(from_server.lock().unwrap().len(), before, "nothing sent");
    assert!(sends_of(&from_server, HeaderType::CallInline).is_empty());
    assert_eq!(client.call(&rpc(3, 0, &[3; 8]), &ULB).unwrap(), rpc(3, 1, &[3; 8]));
}

/// Section 4.6 with 7.1.3, by bytes: a -07 server's connection core answers a reply that
/// names none of its reverse-direction calls RDMA2_ERR_INVAL_HTYPE while its client has not
/// offered the reverse direction (a header type it does not take), and drops it once the
/// client has (a reverse call given up before its reply came: answering it would tell the
/// client replies are not taken here, and fail its own call of that XID).
#[test]
fn draft07_4_6_a_late_reverse_reply_is_dropped_not_refused() {
    use negotiate::connection::{Arrival, Connection, Received, TransmissionKind};
    use negotiate::responder::ResponderConfig;
    use rpcrdma_v2::draft07::marshal;
    let now = Instant::now();
    let mut server: Connection<()> =
        Connection::server(ResponderConfig::default().draft07(true), Duration::from_secs(60), &[], None, now);
    let mut first = vec![0u8; 64];
    let n = marshal::call_inline(&mut first, 1, 1, 0, &marshal::NO_CHUNKS, &rpc(1, 0, &[])).unwrap();
    assert!(matches!(server.handle_receive(&first[..n], Arrival::default(), now), Received::Call { .. }));
    let reply = |xid: u32, total: u32| {
        let mut out = vec![0u8; 64];
        let n = marshal::reply_inline(&mut out, xid, total, rpcrdma_v1::rt::List::from_slice(&[]), &rpc(xid, 1, &[]))
            .unwrap();
        out.truncate(n);
        out
    };
    let late = reply(0x9000_0001, 2);
    let got = server.handle_receive(&late, Arrival::default(), now);
    assert_eq!(got, Received::Answered);
    let answer = server.poll_transmit().expect("the RDMA2_ERROR queued");
    assert!(matches!(answer.kind, TransmissionKind::Error { xid: 0x9000_0001, code: 4 }), "{answer:?}");
    assert!(answer.draft07, "stamped with the running total as a -07 message");
    server.handle_completion(answer.id, Ok(()));
    // The client's CONNPROP_FINAL offers the reverse direction.
    let offer = Properties { reverse_direction: ReverseDirection::Simple, ..Properties::default() };
    let connprop = offer.connprop_messages(0, 3, 4096).unwrap().remove(0);
    assert!(matches!(server.handle_receive(&connprop, Arrival::default(), now), Received::Nothing(_)));
    let late = reply(0x9000_0002, 4);
    let got = server.handle_receive(&late, Arrival::default(), now);
    assert!(matches!(got, Received::Nothing(_)), "{got:?}");
}

/// Whether a reverse-direction call (XID `xid`) comes back from the client on one of the
/// server's open connections within `within`.
fn reverse_call_within(server: &Server, xid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let call = rpc(xid, 0, &xid.to_be_bytes());
    while Instant::now() < deadline {
        for back in server.backchannels().into_iter().filter(|b| b.is_open()) {
            if back.call(&call).is_ok_and(|reply| reply == echo(&call)) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Section 4.6.5: "forward-direction Requesters SHOULD maintain a transport connection as long
/// as the RPC server might send reverse-direction Calls". A -07 client with a backchannel and
/// [`ClientConfig::keep_connected`] makes one call of its own and no more; each time the
/// server closes its connection as idle, the client connects again and calls the configured
/// program's NULL procedure, and the server's reverse-direction calls reach it on the new
/// connection. The same client without `keep_connected` leaves the server, after the first
/// idle close, with no connection to call on.
#[test]
fn draft07_4_6_5_a_client_keeps_a_connection_for_reverse_direction_calls() {
    use negotiate::client::KeepConnected;
    use negotiate::limits::ServerLimits;
    use negotiate::responder::ResponderConfig;
    use rpcrdma_v2::dialect::{Dialect, VersionTwo};
    const PROGRAM: u32 = 400_100;
    let idle = Duration::from_millis(200);
    for keep in [true, false] {
        let nulls = Arc::new(Mutex::new(0u32));
        let counted = nulls.clone();
        let handler = move |call: &[u8]| {
            let word = |at: usize| u32::from_be_bytes(call[at..at + 4].try_into().unwrap());
            if call.len() == 40 && word(12) == PROGRAM && word(20) == 0 {
                *counted.lock().unwrap() += 1;
            }
            echo(call)
        };
        let scfg = ServerConfig::default()
            .responder(ResponderConfig::default().draft07(true))
            .limits(ServerLimits::default().idle_timeout(idle));
        let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ULB), handler).unwrap();
        let requester = requester::RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
        let kept = keep.then_some(KeepConnected { program: PROGRAM, version: 1 });
        let cfg = ClientConfig::default().requester(requester).keep_connected(kept);
        let client = Client::with_backchannel(InProcess, server.local_addr(), cfg, Arc::new(echo));
        assert_eq!(client.call(&rpc(1, 0, &[0; 8]), &ULB).unwrap(), rpc(1, 1, &[0; 8]));
        assert_eq!(client.dialect(), Some(Dialect::Ietf07));
        assert!(reverse_call_within(&server, 0x8000_0000, Duration::from_secs(5)), "keep {keep}: the first connection");
        for round in 1..=3u64 {
            let deadline = Instant::now() + Duration::from_secs(5);
            while server.stats().refused.idle < round && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(server.stats().refused.idle, round, "keep {keep}: idle close {round}");
            // (A kept connection comes back within the keeper's interval, a second.)
            let within = if keep { Duration::from_secs(5) } else { 5 * idle };
            let back = reverse_call_within(&server, 0x8000_0000 + round as u32, within);
            if !keep {
                assert!(!back, "a client that does not keep its connection was called back");
                assert!(server.backchannels().iter().all(|b| !b.is_open()));
                break;
            }
            assert!(back, "round {round}: no connection to call back on");
        }
        if keep {
            assert!(*nulls.lock().unwrap() >= 3, "the keeper's NULL calls: {}", nulls.lock().unwrap());
            assert_eq!(client.stats().short, 1 + u64::from(*nulls.lock().unwrap()), "no other call was made");
        } else {
            assert_eq!(*nulls.lock().unwrap(), 0);
        }
    }
}

/// A Version One client that serves backward calls with `handler`, and the server's end of
/// its connection written by hand over the data path (`receives` Receives posted), so that a
/// test sends exactly the messages it means to, back to back. The client's first call is
/// answered, granting 8 credits.
struct HandBuilt {
    client: Arc<Client<InProcess>>,
    conn: negotiate::datapath::Transport<InProcess>,
    pool: negotiate::datapath::ReceivePool<InProcess>,
    _listener: <InProcess as rpcrdma_verbs::Backend>::Listener,
}

fn hand_built(handler: negotiate::backchannel::Handler, receives: usize) -> HandBuilt {
    use negotiate::datapath::{ReceivePool, Transport};
    use rpcrdma_verbs::{Backend, ConnectRequest, Listener, QpCaps};
    const T: Duration = Duration::from_secs(10);
    let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    let cfg =
        ClientConfig::default().requester(requester::RequesterConfig::default().versions((Version::ONE, Version::ONE)));
    let client = Arc::new(Client::with_backchannel(InProcess, listener.local_addr(), cfg, handler));
    let pd = InProcess.alloc_pd().unwrap();
    let qp = listener.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    let conn = Transport::<InProcess>::new(pd, qp, T);
    let pool = ReceivePool::new(&conn, receives, 1024).unwrap();
    let end = HandBuilt { client, conn, pool, _listener: listener };
    end.forward_call(100);
    end
}

impl HandBuilt {
    /// A forward call `xid` of the client's, answered by this end (granting 8 credits).
    fn forward_call(&self, xid: u32) {
        let caller = std::thread::spawn({
            let client = self.client.clone();
            move || client.call(&rpc(xid, 0, &[]), &ULB).unwrap()
        });
        let call = self.pool.receive(&self.conn).unwrap();
        negotiate::datapath::send_error(&self.conn, &v1_msg(xid, &rpc(word(&call.bytes, 0), 1, &[]))).unwrap();
        assert_eq!(caller.join().unwrap(), rpc(xid, 1, &[]));
    }
}

/// An RPC-over-RDMA Version One RDMA_MSG with no chunks, granting 8 credits.
fn v1_msg(xid: u32, rpc: &[u8]) -> Vec<u8> {
    let head: Vec<u8> = [xid, 1, 8, 0, 0, 0, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
    [head, rpc.to_vec()].concat()
}

/// The big-endian word of `b` at byte `at`.
fn word(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// A backward call that arrives in the same burst as a reply is served only once the reply's
/// caller is woken: the dispatcher, receiving for several blocking callers, holds their
/// wake-ups until its burst of messages ends (docs/design.md, "Who runs what"), but not across
/// a backward call's handler, which may need what that caller does next. Here the handler
/// waits for the caller whose reply came just before its call to have returned; a dispatcher
/// that served it with the caller still asleep would leave it waiting. The server is written
/// by hand over the data path, so that the reply and the backward call go out back to back.
#[test]
fn a_backward_call_waits_for_no_caller_whose_reply_came_before_it() {
    use negotiate::datapath::send_error;
    const CALLERS: u32 = 3;
    // The XIDs of the calls whose callers have returned.
    let returned = Arc::new(Mutex::new(Vec::<u32>::new()));
    let seen = returned.clone();
    // Answers a backward call whose body is a forward call's XID with one word: 1 if that
    // call's caller returned within two seconds of the backward call's arrival, else 0.
    let handler = Arc::new(move |call: &[u8]| {
        let xid = u32::from_be_bytes(call[8..12].try_into().unwrap());
        let deadline = Instant::now() + Duration::from_secs(2);
        let back = loop {
            if seen.lock().unwrap().contains(&xid) {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        rpc(u32::from_be_bytes(call[..4].try_into().unwrap()), 1, &u32::from(back).to_be_bytes())
    });
    let HandBuilt { client, conn, pool, .. } = &hand_built(handler, 8);

    let callers: Vec<_> = (1..=CALLERS)
        .map(|xid| {
            let (client, returned) = (client.clone(), returned.clone());
            std::thread::spawn(move || {
                let reply = client.call(&rpc(xid, 0, &[]), &ULB).unwrap();
                returned.lock().unwrap().push(xid);
                reply
            })
        })
        .collect();
    // Every caller's call is here, so every caller waits for its reply; time for the
    // dispatcher to take the receiving role from a caller that took it first (a lone caller
    // receives its own reply, and one receiving wakes each caller at once).
    let calls: Vec<u32> = (0..CALLERS).map(|_| word(&pool.receive(conn).unwrap().bytes, 0)).collect();
    std::thread::sleep(Duration::from_millis(100));
    // A's reply, and at once a backward call naming A.
    let a = calls[0];
    send_error(conn, &v1_msg(a, &rpc(a, 1, &[]))).unwrap();
    send_error(conn, &v1_msg(0xb000_0001, &rpc(0xb000_0001, 0, &a.to_be_bytes()))).unwrap();
    // The backward call's reply, then the other calls' replies.
    let m = pool.receive(conn).unwrap();
    let rpc_msg = &m.bytes[28..];
    assert_eq!((word(rpc_msg, 0), word(rpc_msg, 4)), (0xb000_0001, 1), "the backward call's reply");
    let answer = word(rpc_msg, 8);
    for &xid in &calls[1..] {
        send_error(conn, &v1_msg(xid, &rpc(xid, 1, &[]))).unwrap();
    }
    for (i, c) in callers.into_iter().enumerate() {
        assert_eq!(c.join().unwrap(), rpc(i as u32 + 1, 1, &[]));
    }
    assert_eq!(answer, 1, "the backward call was served while call {a:#x}'s caller slept");
}

/// A server that sends more backward calls than its one backward credit (RFC 8167 section
/// 4.1) has every one of them answered, once each: two of the client's workers serve the
/// connection's backward calls (`BACKWARD_HELD_MOST`), and the rest wait in the lane for them
/// (up to `BACKWARD_QUEUED_MOST`, 16); no handler runs on the receiving thread. The server is
/// written by hand over the data path, so that the calls go out back to back.
#[test]
fn backward_calls_beyond_the_credit_are_each_answered_once() {
    use negotiate::datapath::send_error;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const FLOOD: u32 = 12;
    let (running, most, served) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let (r, m, s) = (running.clone(), most.clone(), served.clone());
    let handler = Arc::new(move |call: &[u8]| {
        let now = r.fetch_add(1, Ordering::SeqCst) + 1;
        m.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        s.lock().unwrap().push(u32::from_be_bytes(call[..4].try_into().unwrap()));
        r.fetch_sub(1, Ordering::SeqCst);
        echo(call)
    });
    let HandBuilt { client, conn, pool, .. } = &hand_built(handler, 32);
    // The client is idle now; its dispatcher receives. Twelve backward calls at once.
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..FLOOD {
        let xid = 0xb000_0000 + i;
        send_error(conn, &v1_msg(xid, &rpc(xid, 0, &i.to_be_bytes()))).unwrap();
    }
    let mut replies: Vec<u32> = (0..FLOOD)
        .map(|_| {
            let m = pool.receive(conn).unwrap();
            let rpc_msg = &m.bytes[28..];
            assert_eq!(word(rpc_msg, 4), 1, "a reply");
            assert_eq!(word(rpc_msg, 8), word(rpc_msg, 0) - 0xb000_0000, "its call's body");
            word(rpc_msg, 0)
        })
        .collect();
    replies.sort_unstable();
    assert_eq!(replies, (0..FLOOD).map(|i| 0xb000_0000 + i).collect::<Vec<_>>(), "each answered once");
    let mut served = served.lock().unwrap().clone();
    served.sort_unstable();
    assert_eq!(served, replies, "each handled once");
    // Two workers ran them, at once: never more.
    let most = most.load(Ordering::SeqCst);
    assert_eq!(most, 2, "handlers at once");
    assert_eq!(client.stats().backward_dropped, 0);
}

/// A server far beyond its backward credit, 60 calls in 40 ms to handlers that take a while:
/// the client serves what its workers and its lane's queue hold (2 + 16) and drops the rest,
/// counted in `ClientStats::backward_dropped` (each dropped call times out at the server);
/// every call is answered at most once, every answer is its call's, and the connection
/// serves on: a forward call and one more backward call afterwards are answered.
#[test]
fn backward_calls_far_beyond_the_credit_are_dropped_counted_and_the_connection_serves_on() {
    use negotiate::datapath::send_error;
    const FLOOD: u32 = 60;
    let handler = Arc::new(move |call: &[u8]| {
        std::thread::sleep(Duration::from_millis(100));
        echo(call)
    });
    let end = hand_built(handler, 64);
    let HandBuilt { client, conn, pool, .. } = &end;
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..FLOOD {
        let xid = 0xb000_0000 + i;
        send_error(conn, &v1_msg(xid, &rpc(xid, 0, &i.to_be_bytes()))).unwrap();
        // (In bursts of 20, within the client's Receives: one more than it posted would be
        // the transport's own bound, receiver not ready, and end the connection.)
        if i % 20 == 19 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Every call answered or dropped: the answers come within 2 s (18 of 100 ms, 2 at once).
    let mut replies = Vec::new();
    while let Ok(m) = pool.receive_within(conn, Duration::from_secs(2)) {
        let rpc_msg = &m.bytes[28..];
        assert_eq!(word(rpc_msg, 8), word(rpc_msg, 0) - 0xb000_0000, "its call's body");
        replies.push(word(rpc_msg, 0));
    }
    let answered = replies.len() as u64;
    replies.sort_unstable();
    replies.dedup();
    assert_eq!(replies.len() as u64, answered, "none answered twice");
    let dropped = client.stats().backward_dropped;
    assert_eq!(answered + dropped, u64::from(FLOOD), "each call answered or counted dropped");
    assert!(answered >= 18, "{answered} answered: the workers' two and the queue's 16 at least");
    assert!(dropped > 0, "60 at once with 2 + 16 held: some dropped");
    // The connection serves on, both ways.
    end.forward_call(200);
    send_error(conn, &v1_msg(0xb100_0000, &rpc(0xb100_0000, 0, &[7, 7, 7, 7]))).unwrap();
    let m = pool.receive(conn).unwrap();
    assert_eq!(&m.bytes[28..], &rpc(0xb100_0000, 1, &[7, 7, 7, 7])[..], "a backward call after the flood");
}
