//! A `negotiate::server::Server` facing calls it cannot serve as asked (issue 13, findings 3 to
//! 6): each is answered the way RFC 8166 section 4.5 says, the handler runs at most once, and
//! the connection keeps serving. Before these fixes each of them closed the connection (the
//! client then retransmitted, and the handler ran again) or left a caller waiting out its
//! timeout. And a binding (`UpperLayerBinding`) that panics, on either side: that call fails,
//! nothing else. On the in-process and TCP backends.

#[macro_use]
mod common;

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::*;
use negotiate::backchannel::BackchannelError;
use negotiate::client::{Client, ClientConfig, ClientError};
use negotiate::requester::CallFailure;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::{DdpItem, OpaqueAtUlb, UpperLayerBinding};
use rpcrdma_v1::Version;
use rpcrdma_v2::verdict::PeerError;
use rpcrdma_verbs::{Access, Backend, MemoryRegion, ProtectionDomain, QpState, QueuePair};

/// A server whose service echoes calls, counts every execution by XID, panics on XID
/// [`PANIC_XID`] and answers XID [`HUGE_XID`] with a 20,000-byte reply.
struct Counted {
    server: Server,
    executed: Arc<Mutex<Vec<u32>>>,
}

const PANIC_XID: u32 = 0xdead;
const HUGE_XID: u32 = 0xb16;

fn counted<B: Backend + Clone>(backend: &B, cfg: ServerConfig) -> Counted {
    let executed = Arc::new(Mutex::new(Vec::new()));
    let e = executed.clone();
    let service = move |c: &[u8]| {
        let xid = word(c, 0);
        e.lock().unwrap().push(xid);
        match xid {
            PANIC_XID => panic!("the service failed on call {xid:#x} (this panic is the test's)"),
            HUGE_XID => {
                let mut r = echo(c);
                r.resize(20_000, 0x5a);
                r
            }
            _ => echo(c),
        }
    };
    let server = Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(ULB), service).expect("server");
    Counted { server, executed }
}

impl Counted {
    fn executions(&self, xid: u32) -> usize {
        self.executed.lock().unwrap().iter().filter(|&&x| x == xid).count()
    }
}

/// RFC 8166 section 4.5.3: a reply that does not fit the requester's Reply chunk (or inline, with
/// none) means "no RPC-level reply is possible for that XID": RDMA_ERROR ERR_CHUNK, the
/// connection stays up, the handler ran once, and the client's call fails with that error, not
/// with a lost connection. Before: the reply parameters were already consumed, so the server
/// closed the connection; the client retransmitted, the handler ran three times, and the call
/// ended `ConnectionLost`.
fn rfc8166_4_5_3_a_reply_larger_than_the_requesters_chunks_gets_err_chunk_and_runs_once<B: Backend + Clone>(
    backend: B,
) {
    let s = counted(&backend, ServerConfig::default());
    let client = Arc::new(Client::new(backend.clone(), s.server.local_addr(), ClientConfig::default()));
    call_ok(&client, 1, SMALL);
    // The binding says replies are at most 4096 bytes: the client provides no room for 20,000.
    let ulb = OpaqueAtUlb { max_reply: 4096, ..ULB };
    let got = call_within(&client, call(HUGE_XID, SMALL), ulb);
    // (The call asked for a Write chunk: the error says the sizes it asked for, issue 28.)
    assert!(
        matches!(got, Err(ClientError::ChunksRefused { failure: CallFailure::Peer(PeerError::BAD_HEADER), .. })),
        "the call ends with the server's ERR_CHUNK: {got:?}"
    );
    let text = got.unwrap_err().to_string();
    assert!(text.contains("replies of up to 4096 bytes"), "{text}");
    assert_eq!(s.executions(HUGE_XID), 1, "the handler ran once");
    call_ok(&client, 2, SMALL);
    let st = stats_once(&s.server, "the error and both calls", |st| st.errors_sent == 1 && st.calls.total() == 2);
    assert_eq!(st.connections, 1, "the connection stayed up");
}

/// RFC 8166 section 4.5.2: a header that is valid XDR but carries no usable RPC call (an
/// RDMA_NOMSG with only a Reply chunk: no Position-zero Read chunk holds the call) is an
/// error in the transport header: ERR_CHUNK (MUST), and the connection keeps serving. Before:
/// the server closed the connection.
fn rfc8166_4_5_2_rdma_nomsg_with_only_a_reply_chunk_gets_err_chunk<B: Backend + Clone>(backend: B) {
    let s = counted(&backend, ServerConfig::default());
    let raw = RawRequester::connect(&backend, &s.server.local_addr());
    raw.valid_call(0x100, Version::ONE);
    let xid = 0x4e0;
    raw.send_raw(&words(&[xid, 1, 32, 1, 0, 0, 1, 1, 0x77, 4096, 0, 0x1000]));
    assert_eq!(raw.receive(), words(&[xid, 1, 32, 4, 2]), "ERR_CHUNK for that XID");
    raw.valid_call(0x101, Version::ONE);
    assert_eq!(raw.conn.qp().state(), QpState::Ready);
    let st = stats_once(&s.server, "the error", |st| st.errors_sent == 1 && st.calls.v1 == 2);
    assert_eq!(st.connections, 1);
}

/// RFC 8166 section 4.5.2, second paragraph: a valid header whose Read chunk's position lies
/// past the end of the call's Payload stream ("mismatches between chunk sizes or offsets and
/// the contents of the Payload stream") gets an RPC GARBAGE_ARGS reply in an RDMA_MSG
/// (SHOULD); the service never sees the call, and the connection keeps serving. Before: the
/// server closed the connection.
fn rfc8166_4_5_2_a_read_chunk_past_the_payload_gets_garbage_args<B: Backend + Clone>(backend: B) {
    let s = counted(&backend, ServerConfig::default());
    let raw = RawRequester::connect(&backend, &s.server.local_addr());
    raw.valid_call(0x100, Version::ONE);
    // A real, readable chunk, so that the RDMA Read succeeds and only its position is wrong.
    let chunk = raw.conn.pd().register(vec![7; 8], Access::REMOTE_READ).expect("register");
    let xid = 0x4e1;
    let rpc = call(xid, 0); // 16 bytes
    let (addr, rkey) = (chunk.addr(), chunk.rkey());
    let mut bytes = words(&[xid, 1, 32, 0, 1, 400, rkey, 8, (addr >> 32) as u32, addr as u32, 0, 0, 0]);
    bytes.extend(&rpc);
    raw.send_raw(&bytes);
    let mut want = words(&[xid, 1, 32, 0, 0, 0, 0]);
    want.extend(words(&[xid, 1, 0, 0, 0, 4]));
    assert_eq!(raw.receive(), want, "an RDMA_MSG carrying RPC GARBAGE_ARGS for that XID");
    raw.valid_call(0x101, Version::ONE);
    let st = stats_once(&s.server, "the GARBAGE_ARGS reply", |st| st.garbage_args_replies == 1 && st.calls.v1 == 2);
    assert_eq!((st.connections, st.errors_sent), (1, 0));
    assert_eq!(s.executions(xid), 0, "the service never saw the call");
}

/// A handler that panics: the panic is caught, the call gets an RPC SYSTEM_ERR reply (RFC 5531
/// section 9, accept_stat 5), counted, and the connection and the server serve on. Before: the
/// connection's thread died, and the client waited out its timeout for a lost connection.
fn a_panicking_handler_gets_system_err_and_the_connection_serves_on<B: Backend + Clone>(backend: B) {
    let s = counted(&backend, ServerConfig::default());
    let client = Arc::new(Client::new(backend.clone(), s.server.local_addr(), ClientConfig::default()));
    call_ok(&client, 1, SMALL);
    let reply = call_within(&client, call(PANIC_XID, SMALL), ULB).expect("a reply, not a lost connection");
    assert_eq!(reply, words(&[PANIC_XID, 1, 0, 0, 0, 5]), "MSG_ACCEPTED, SYSTEM_ERR");
    call_ok(&client, 2, SMALL);
    let st = stats_once(&s.server, "the panic", |st| st.handler_panics == 1 && st.calls.total() == 2);
    assert_eq!(st.connections, 1);
    assert_eq!(s.executions(PANIC_XID), 1);
}

/// RFC 8166 section 4.5: an RDMA_ERROR "completes the RPC transaction associated with XID":
/// the client's RDMA_ERROR for a backward-direction call ends that call at once with the
/// peer's error. Before: the server ignored it and the backward call waited out its timeout.
fn rfc8166_4_5_the_clients_rdma_error_ends_a_backward_call_at_once<B: Backend + Clone>(backend: B) {
    // A long timeout, so that an ignored error shows as a wait far past the bound below.
    let cfg = ServerConfig::default().timeout(Duration::from_secs(30));
    let s = counted(&backend, cfg);
    let raw = RawRequester::connect(&backend, &s.server.local_addr());
    raw.valid_call(0x100, Version::ONE);
    let back = s.server.backchannels().pop().expect("the connection's backchannel");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(back.call(&words(&[0xcb, 0, 2, 400_000, 1, 0])));
    });
    let backward_call = raw.receive();
    assert_eq!(word(&backward_call, 0), 0xcb, "the backward call arrived");
    raw.send_raw(&words(&[0xcb, 1, 1, 4, 2]));
    let got = rx.recv_timeout(Duration::from_secs(10)).expect("the backward call ended well before its 30 s timeout");
    assert!(matches!(got, Err(BackchannelError::Peer(PeerError::BAD_HEADER))), "{got:?}");
    raw.valid_call(0x101, Version::ONE);
}

/// RFC 8166 section 6.1.1 / 4.5.2: a client and server that disagree about which argument is
/// DDP-eligible (the client puts the call's opaque in a Read chunk, the server's binding says
/// nothing is) get an RPC GARBAGE_ARGS reply for that call, in an RDMA_MSG: the client's call
/// returns that reply, not a lost connection, and the service never runs it (one of the
/// failures issue 13 found reported as `ConnectionLost`; this mismatch, in the call's
/// direction, was answered before too: the test pins it).
fn rfc8166_6_1_1_a_binding_mismatch_gets_garbage_args_not_a_lost_connection<B: Backend + Clone>(backend: B) {
    let executed = Arc::new(Mutex::new(0));
    let e = executed.clone();
    let service = move |c: &[u8]| {
        *e.lock().unwrap() += 1;
        echo(c)
    };
    // The server's binding: nothing DDP-eligible.
    let server =
        Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(PLAIN), service)
            .expect("server");
    let client = Arc::new(Client::new(backend.clone(), server.local_addr(), ClientConfig::default()));
    call_ok(&client, 1, SMALL);
    // The client's binding reduces the opaque into a Read chunk; BIG needs one at any threshold.
    let xid = 0x6110;
    let got = call_within(&client, call(xid, BIG), ULB).expect("a reply, not a lost connection");
    assert_eq!(got, words(&[xid, 1, 0, 0, 0, 4]), "MSG_ACCEPTED, GARBAGE_ARGS");
    let st = stats_once(&server, "the GARBAGE_ARGS reply", |st| st.garbage_args_replies == 1);
    assert_eq!((st.connections, *executed.lock().unwrap()), (1, 1), "one connection; only the first call ran");
}

/// A binding that panics while reading call [`CALL_PANIC_XID`] (`call_ddp_items`, run on the
/// requester's bytes as the call's Read chunks are checked) and while reading the reply to call
/// [`REPLY_PANIC_XID`] (`reply_ddp_items`, run as the reply is marshaled); the rest is [`ULB`].
/// A binding is the application's code run on a peer's bytes, as a handler is.
struct Fragile;

const CALL_PANIC_XID: u32 = 0xca11;
const REPLY_PANIC_XID: u32 = 0x4e91;

impl UpperLayerBinding for Fragile {
    fn call_ddp_items(&self, call: &[u8], out: &mut Vec<DdpItem>) {
        assert_ne!(word(call, 0), CALL_PANIC_XID, "the binding failed on a call (this panic is the test's)");
        ULB.call_ddp_items(call, out)
    }
    fn reply_ddp_maxima(&self, call: &[u8], out: &mut Vec<usize>) {
        ULB.reply_ddp_maxima(call, out)
    }
    fn max_reply_size(&self, call: &[u8]) -> usize {
        ULB.max_reply_size(call)
    }
    fn reply_ddp_items(&self, call: &[u8], reply: &[u8], reduced: usize, out: &mut Vec<DdpItem>) {
        assert_ne!(word(call, 0), REPLY_PANIC_XID, "the binding failed on a reply (this panic is the test's)");
        ULB.reply_ddp_items(call, reply, reduced, out)
    }
}

/// A server's binding that panics on a call's bytes, as it reads the call or as it marshals its
/// reply, is a failure of that call only, as a handler's panic is: the call gets an RPC
/// SYSTEM_ERR reply (RFC 5531 section 9), counted in `binding_panics`, and its connection and
/// every other serve on, however many times it happens (more than the server has threads).
/// Before: the panic unwound one of the event loop's threads, and the call was never
/// answered: its caller waited out every attempt's timeout (15 s here).
fn a_binding_that_panics_on_a_call_gets_system_err_and_the_server_serves_on<B: Backend + Clone>(backend: B) {
    let executed = Arc::new(Mutex::new(Vec::new()));
    let e = executed.clone();
    let service = move |c: &[u8]| {
        e.lock().unwrap().push(word(c, 0));
        echo(c)
    };
    let server =
        Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(Fragile), service)
            .expect("server");
    let fragile = Arc::new(Client::new(backend.clone(), server.local_addr(), ClientConfig::default()));
    let other = Arc::new(Client::new(backend.clone(), server.local_addr(), ClientConfig::default()));
    call_ok(&fragile, 1, SMALL);
    call_ok(&other, 2, SMALL);
    // More times than the server keeps threads (8 calls in progress a connection by default),
    // so that a thread lost to each would show.
    let times = 12;
    for i in 0..times {
        // (The binding is asked about a call's items only when it brings Read chunks.)
        for (xid, len) in [(CALL_PANIC_XID, BIG), (REPLY_PANIC_XID, SMALL)] {
            let got = call_within(&fragile, call(xid, len), ULB);
            let system_err = words(&[xid, 1, 0, 0, 0, 5]);
            assert!(
                matches!(&got, Ok(r) if *r == system_err),
                "round {i}: MSG_ACCEPTED, SYSTEM_ERR for {xid:#x}: {got:?}"
            );
        }
        call_ok(&fragile, 0x100 + i, SMALL);
        call_ok(&other, 0x200 + i, SMALL);
    }
    let st = stats_once(&server, "the panics", |st| st.binding_panics == 2 * u64::from(times));
    assert_eq!((st.connections, st.handler_panics), (2, 0), "both connections stayed up; no handler panicked");
    let executed = executed.lock().unwrap();
    let runs = |xid| executed.iter().filter(|&&x| x == xid).count();
    // A call whose binding failed as it was read never reached the service; one whose reply
    // could not be marshaled ran once each time it was called, never again.
    assert_eq!((runs(CALL_PANIC_XID), runs(REPLY_PANIC_XID)), (0, times as usize));
}

/// Polls `call` on this thread until it is ready; fails the test after [`CALL_LIMIT`].
fn poll_within<T>(mut call: std::pin::Pin<&mut impl std::future::Future<Output = T>>) -> T {
    let deadline = std::time::Instant::now() + CALL_LIMIT;
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = call.as_mut().poll(&mut cx) {
            return out;
        }
        assert!(std::time::Instant::now() < deadline, "an async call did not end within {CALL_LIMIT:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A client's binding that panics on a call, as the call is marshaled (`call_ddp_items`) or as
/// its reply is reassembled (`reply_ddp_items`, run on the server's bytes), unwinds that
/// caller's thread (the binding is the caller's own code, passed to the call), and the call ends
/// with it: its credit comes back, its memory is closed to the server (the windows of a reply's
/// call are invalidated before the binding reads it), and the client's later calls are served,
/// however many times it happens (more than the client's 32 credits); made async, the panic
/// unwinds out of `poll` and the future's drop ends the call. Before: a blocking call stayed in
/// progress, its credit held (the next call with its XID failed `DuplicateXid`).
fn a_client_binding_that_panics_ends_its_call_and_the_client_calls_on<B: Backend + Clone>(backend: B) {
    let s = counted(&backend, ServerConfig::default());
    let client = Arc::new(Client::new(backend.clone(), s.server.local_addr(), ClientConfig::default()));
    call_ok(&client, 1, SMALL);
    let times = 40;
    for i in 0..times {
        for (xid, len) in [(CALL_PANIC_XID, BIG), (REPLY_PANIC_XID, SMALL)] {
            let c = client.clone();
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let unwound =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.call(&call(xid, len), &Fragile)));
                let _ = tx.send(unwound.map_err(drop));
            });
            let got = rx.recv_timeout(CALL_LIMIT).unwrap_or_else(|_| panic!("round {i}: call {xid:#x} did not end"));
            assert!(got.is_err(), "round {i}: call {xid:#x} unwound with its binding's panic, not {got:?}");
            // The same call made async: the panic unwinds out of `poll`, and the future's drop
            // ends the call.
            let message = call(xid, len);
            let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                poll_within(std::pin::pin!(client.call_async(&message, &Fragile)))
            }));
            assert!(got.is_err(), "round {i}: async call {xid:#x} unwound with its binding's panic, not {got:?}");
        }
        call_ok(&client, 0x100 + i, SMALL);
    }
    // A call whose binding failed as it was marshaled was never sent; one whose reply could not
    // be reassembled ran once each time, never again.
    assert_eq!((s.executions(CALL_PANIC_XID), s.executions(REPLY_PANIC_XID)), (0, 2 * times as usize));
    let st = stats_once(&s.server, "every call", |st| st.calls.total() == 1 + 3 * u64::from(times));
    assert_eq!(st.connections, 1, "the connection stayed up");
}

/// [`a_client_binding_that_panics_ends_its_call_and_the_client_calls_on`] for a call that
/// waits for a credit: such a call is marshaled while it waits (`prepare_if_waiting`, to be
/// posted by whichever thread frees the credit), and its binding's panic there unwinds its
/// caller as well, the call ended: once the 32 calls holding every credit are answered, the
/// same XID is called again (not `DuplicateXid`) and the client calls on.
fn a_client_binding_that_panics_while_its_call_waits_for_credit_ends_the_call<B: Backend + Clone>(backend: B) {
    const SLOW: u32 = 0x5000;
    let service = |c: &[u8]| {
        if (SLOW..SLOW + 32).contains(&word(c, 0)) {
            std::thread::sleep(Duration::from_millis(500));
        }
        echo(c)
    };
    let server = Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(ULB), service)
        .expect("server");
    let client = Arc::new(Client::new(backend.clone(), server.local_addr(), ClientConfig::default()));
    call_ok(&client, 1, SMALL);
    let slow: Vec<_> = (SLOW..SLOW + 32)
        .map(|xid| {
            let c = client.clone();
            std::thread::spawn(move || c.call(&call(xid, SMALL), &ULB).map(|r| r == echo(&call(xid, SMALL))))
        })
        .collect();
    // Every credit taken by a slow call.
    std::thread::sleep(Duration::from_millis(100));
    let panicking = || {
        let c = client.clone();
        let unwound =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.call(&call(CALL_PANIC_XID, BIG), &Fragile)));
        unwound.map_err(drop)
    };
    let got = panicking();
    assert!(got.is_err(), "the call waiting for credit unwound with its binding's panic, not {got:?}");
    for s in slow {
        assert!(matches!(s.join().unwrap(), Ok(true)), "every slow call answered with its own reply");
    }
    let again = panicking();
    assert!(again.is_err(), "the same XID called again unwinds again, not {again:?}");
    call_ok(&client, 2, SMALL);
}

on_both_backends! {
    rfc8166_4_5_3_a_reply_larger_than_the_requesters_chunks_gets_err_chunk_and_runs_once,
    rfc8166_4_5_2_rdma_nomsg_with_only_a_reply_chunk_gets_err_chunk,
    rfc8166_4_5_2_a_read_chunk_past_the_payload_gets_garbage_args,
    a_panicking_handler_gets_system_err_and_the_connection_serves_on,
    rfc8166_4_5_the_clients_rdma_error_ends_a_backward_call_at_once,
    rfc8166_6_1_1_a_binding_mismatch_gets_garbage_args_not_a_lost_connection,
    a_binding_that_panics_on_a_call_gets_system_err_and_the_server_serves_on,
    a_client_binding_that_panics_ends_its_call_and_the_client_calls_on,
    a_client_binding_that_panics_while_its_call_waits_for_credit_ends_the_call,
}
