//! Application code that runs on a thread serving others, outside the handlers and bindings
//! (whose panics are caught): a capture sink ([`Captured`]) that panics as a Send is posted.
//! Nothing of the server or client may die with it.
//!
//! - A reply's post runs inside the catch that guards the binding (`serve_call`): the call is
//!   answered SYSTEM_ERR and its connection serves on.
//! - An answer the loop sends of its own (here the RDMA_ERROR for a message of an unknown
//!   version) is outside every catch: the thread dies with the message in hand. No answer to
//!   it can come now, so its connection is closed, the signal RFC 8166 section 4.5.4 gives
//!   for a reply that cannot be sent; the role the thread held is freed only if it still held
//!   it, and a call it had in hand gives its place in progress back (`Leaving`). Before, the
//!   connection was left open with its message unanswered, silent for good.
//!
//! - On a client, a call's Send is posted by its caller, whose code the sink is: the panic
//!   unwinds that caller, its call ended. A call marshaled ahead is posted by whichever thread
//!   took the reply that freed its credit, often the dispatcher that serves every connection:
//!   there the panic is caught and the call's own caller sends it itself (before, the
//!   dispatcher died and every caller waited for good).
//!
//! Every other connection is served throughout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::limits::ServerLimits;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::capture::{Captured, CapturedMessage};
use rpcrdma_verbs::{Access, Backend, InProcess, MemoryRegion, ProtectionDomain, QpCaps, QpState, QueuePair, Sge};

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// A call whose first argument is this is answered with [`MARK`] in its reply.
const TRIGGER: u32 = 0x7419_9e12;
/// What the sink panics on (once), seen in a Send: only a triggered call's reply holds it.
const MARK: u32 = 0xfa11_fa11;

/// A call: XID, CALL, then `arg` and six words more.
fn call(xid: u32, arg: u32) -> Vec<u8> {
    let words = [xid, 0, arg, 1, 2, 3, 4, 5, 6];
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The call echoed as a REPLY, its first argument [`MARK`] where it was [`TRIGGER`].
fn answer(call: &[u8]) -> Vec<u8> {
    let mut reply = [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    if reply[8..12] == TRIGGER.to_be_bytes() {
        reply[8..12].copy_from_slice(&MARK.to_be_bytes());
    }
    reply
}

/// A backend whose capture sink panics the first time it sees a Send holding the word
/// `marked` anywhere (for [`RDMA_ERROR`]: where a header's procedure is), and is quiet
/// afterwards; it takes `first` before it panics. `armed` says whether it has not yet.
fn panicking_once(marked: u32, first: Duration) -> (Captured<InProcess>, Arc<AtomicBool>) {
    let armed = Arc::new(AtomicBool::new(true));
    let a = armed.clone();
    let sink = move |m: &CapturedMessage<'_>| {
        let word = marked.to_be_bytes();
        let hit = if marked != RDMA_ERROR {
            m.bytes.chunks_exact(4).any(|w| w == word)
        } else {
            m.bytes.get(12..16) == Some(&word[..])
        };
        if hit && a.swap(false, Ordering::SeqCst) {
            std::thread::sleep(first);
            panic!("the capture sink's own fault, as a reply is posted");
        }
    };
    (Captured::new(InProcess, Arc::new(sink)), armed)
}

/// Calls through `client` until one is answered or `within` is up; the replies checked.
fn served_within(client: &Client<Captured<InProcess>>, mut xid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        xid += 1;
        if let Ok(reply) = client.call(&call(xid, 0), &ULB) {
            assert_eq!(reply, answer(&call(xid, 0)), "call {xid:#x}");
            return true;
        }
    }
    false
}

/// The server of these tests, its handler echoing.
fn server(b: &Captured<InProcess>) -> Server {
    let limits = ServerLimits::default().calls_in_progress_per_connection(1);
    let handler = |c: &[u8]| answer(c);
    Server::start(b.clone(), b.any_address(), ServerConfig::default().limits(limits), Arc::new(ULB), handler).unwrap()
}

fn client_of(b: &Captured<InProcess>, server: &Server) -> Client<Captured<InProcess>> {
    let mut cfg = ClientConfig::default();
    cfg.requester.timeout = Duration::from_millis(500);
    cfg.requester.max_attempts = 1;
    Client::new(b.clone(), server.local_addr(), cfg)
}

#[test]
fn a_sink_panicking_as_a_reply_is_posted_fails_that_call_only() {
    let (b, armed) = panicking_once(MARK, Duration::ZERO);
    let server = server(&b);
    let client = client_of(&b, &server);
    assert!(served_within(&client, 1 << 20, Duration::from_secs(5)), "served at first");
    let reply = client.call(&call(0x77, TRIGGER), &ULB).expect("the call is answered");
    assert!(!armed.load(Ordering::SeqCst), "the sink saw the triggered call's reply");
    // XID, REPLY, MSG_ACCEPTED, AUTH_NONE and an empty verifier, SYSTEM_ERR (RFC 5531).
    assert_eq!(reply, [0x77, 1, 0, 0, 0, 5].iter().flat_map(|w: &u32| w.to_be_bytes()).collect::<Vec<_>>());
    // On the same connection.
    assert!(served_within(&client, 2 << 20, Duration::from_secs(5)), "not served after it");
    assert!(server.peers().iter().all(|p| p.ended.is_none()), "a connection ended");
    // (Counted with the binding's: the catch covers the reply's marshaling and its post.)
    assert_eq!((server.stats().binding_panics, server.stats().loop_panics), (1, 0));
}

/// RDMA_ERROR in the header's procedure word (RFC 8166 section 4.2.4, `rdma_proc` 4).
const RDMA_ERROR: u32 = 4;

/// A raw requester: connected to `addr` with a Receive posted, it sends a message of
/// RPC-over-RDMA version 7, which the server answers with RDMA_ERROR ERR_VERS (RFC 8166
/// section 4.2.4.1). What it sees within `within`: `Some(true)` that answer, `Some(false)`
/// its connection closed first, `None` neither.
fn version_seven_from(b: &Captured<InProcess>, addr: &str, within: Duration) -> Option<bool> {
    let pd = b.alloc_pd().unwrap();
    let (qp, _) = b.connect(&pd, addr, &[], QpCaps::default(), Duration::from_secs(5)).unwrap();
    let receive = pd.register(vec![0; 1024], Access::LOCAL_WRITE).unwrap();
    qp.post_recv(1, Sge::whole(&receive)).unwrap();
    // XID, version 7, credits 1, RDMA_MSG, three empty chunk lists, then an RPC call's first
    // words.
    let words: [u32; 9] = [0x55, 7, 1, 0, 0, 0, 0, 0x55, 0];
    let message = pd.register(words.iter().flat_map(|w| w.to_be_bytes()).collect(), Access::empty()).unwrap();
    qp.post_send(2, &[Sge::whole(&message)], None).unwrap();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match qp.wait_cq(Duration::from_millis(50)) {
            Some(c) if c.wr_id == 1 && c.is_ok() => {
                let answered = receive.with(|bytes| bytes[12..16] == RDMA_ERROR.to_be_bytes());
                return Some(answered);
            }
            Some(c) if !c.is_ok() => return Some(false),
            _ if qp.state() != QpState::Ready => return Some(false),
            _ => {}
        }
    }
    None
}

/// The sink panics as the loop posts an answer of its own, after `first`.
fn an_answer_panicking_after(first: Duration) {
    let (b, armed) = panicking_once(RDMA_ERROR, first);
    let server = server(&b);
    let other = client_of(&b, &server);
    assert!(served_within(&other, 1 << 20, Duration::from_secs(5)), "the other client is served at first");
    let addr = server.local_addr();

    // The sink panics as the loop posts its ERR_VERS: the connection is closed, not left
    // silent.
    assert_eq!(version_seven_from(&b, &addr, Duration::from_secs(5)), Some(false), "not closed");
    assert!(!armed.load(Ordering::SeqCst), "the sink saw the RDMA_ERROR");
    assert!(served_within(&other, 2 << 20, Duration::from_secs(5)), "the other client is no longer served");
    // The next such requester is answered (the sink is quiet now).
    assert_eq!(version_seven_from(&b, &addr, Duration::from_secs(5)), Some(true), "not answered");
    assert!(served_within(&other, 3 << 20, Duration::from_secs(5)), "the other client is no longer served");

    // (Recorded by the dying thread once it closed the connection: waited for, bounded.)
    let deadline = Instant::now() + Duration::from_secs(5);
    let ended = loop {
        let ended: Vec<_> = server.peers().iter().filter_map(|p| p.ended.as_ref().map(|e| e.to_string())).collect();
        if ended.iter().any(|e| e.contains("panicked")) || Instant::now() > deadline {
            break ended;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(ended.iter().any(|e| e.contains("panicked")), "the cause: {ended:?}");
    assert_eq!(server.stats().loop_panics, 1);
}

#[test]
fn a_loop_thread_that_panics_sending_an_answer_of_its_own_closes_that_connection_only() {
    an_answer_panicking_after(Duration::ZERO);
}

/// The same after the role was taken over from the dying thread (the answer ran past
/// `run_inline_for`, 1 ms): the connection is closed all the same, and the other client
/// served by the thread that took the role.
#[test]
fn a_loop_thread_that_panics_after_its_role_was_taken_over_closes_that_connection_only() {
    an_answer_panicking_after(Duration::from_millis(30));
}

/// On the client a call's Send is posted by its caller, so a sink panicking on it unwinds
/// the caller, whose code it is; the call ends with it (its credit back), and the client
/// calls on, on the same connection, as do its other callers.
#[test]
fn a_sink_panicking_as_a_call_is_posted_unwinds_that_caller_only() {
    let (b, armed) = panicking_once(TRIGGER, Duration::ZERO);
    // (The server's own backend captures nothing: only the client's Sends are seen.)
    let server =
        Server::start(InProcess, InProcess.any_address(), ServerConfig::default(), Arc::new(ULB), answer).unwrap();
    let client = Arc::new(client_of(&b, &server));
    assert!(served_within(&client, 1 << 20, Duration::from_secs(5)), "served at first");
    let c = client.clone();
    let unwound = std::thread::spawn(move || c.call(&call(0x77, TRIGGER), &ULB)).join();
    assert!(unwound.is_err(), "the caller did not unwind: {unwound:?}");
    assert!(!armed.load(Ordering::SeqCst), "the sink saw the call");
    // Every credit's worth of calls and more, from several threads at once.
    let callers: Vec<_> = (0..4u32)
        .map(|t| {
            let c = client.clone();
            std::thread::spawn(move || {
                (0..40).all(|i| served_within(&c, ((t + 2) << 20) + i * 2, Duration::from_secs(5)))
            })
        })
        .collect();
    assert!(callers.into_iter().all(|h| h.join().unwrap()), "a caller was not served after the sink's panic");
    assert!(server.peers().iter().all(|p| p.ended.is_none()), "a connection ended");
}

/// With one credit, calls beyond it are marshaled ahead and posted by whichever thread
/// takes the reply that frees the credit (`State::post_prepared`): often the client's
/// dispatcher, or another caller. A sink panicking on such a call's Send must not take that
/// thread, nor the client, with it.
#[test]
fn a_sink_panicking_as_a_call_marshaled_ahead_is_posted_leaves_the_client_serving() {
    let (b, armed) = panicking_once(TRIGGER, Duration::ZERO);
    let server =
        Server::start(InProcess, InProcess.any_address(), ServerConfig::default(), Arc::new(ULB), answer).unwrap();
    let mut cfg = ClientConfig::default();
    cfg.requester.credits = 1;
    cfg.requester.timeout = Duration::from_secs(2);
    cfg.requester.max_attempts = 1;
    let client = Arc::new(Client::new(b.clone(), server.local_addr(), cfg));
    let callers: Vec<_> = (0..8u32)
        .map(|t| {
            let c = client.clone();
            std::thread::spawn(move || {
                let mut served = 0;
                for i in 0..50u32 {
                    let xid = ((t + 1) << 20) + i;
                    let arg = if t == 3 && i == 25 { TRIGGER } else { 0 };
                    let outcome =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.call(&call(xid, arg), &ULB)));
                    if let Ok(Ok(reply)) = outcome {
                        assert_eq!(reply, answer(&call(xid, arg)), "call {xid:#x}");
                        served += 1;
                    }
                }
                served
            })
        })
        .collect();
    let served: Vec<u32> = callers.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(!armed.load(Ordering::SeqCst), "the sink saw the triggered call");
    // All but the triggered call at most: with the credit free as it was made, its caller
    // posted it and unwound; marshaled ahead (nearly always), its caller sent it again.
    assert!(served.iter().sum::<u32>() >= 399, "calls not served: {served:?}");
    // And the client calls on afterwards.
    assert!(served_within(&client, 100 << 20, Duration::from_secs(2)), "not served afterwards");
}

/// The client's dispatcher posts the core's own answers too (`send_queued`): here its
/// RDMA_ERR_INVAL_OPTION for an RDMA_OPTIONAL the server sends and no extension of the client
/// takes (draft-cel-nfsv4-rpcrdma-version-two-00 section 3.1). A sink panicking on it closes
/// that connection; the dispatcher serves on, so that the client reconnects and calls on.
#[test]
fn a_sink_panicking_as_the_client_answers_an_option_closes_that_connection_only() {
    let (b, armed) = panicking_once(RDMA_ERROR, Duration::ZERO);
    let server = server(&b);
    let client = Client::with_backchannel(b.clone(), server.local_addr(), ClientConfig::default(), Arc::new(answer));
    assert!(served_within(&client, 1 << 20, Duration::from_secs(5)), "served at first");
    let deadline = Instant::now() + Duration::from_secs(5);
    let back = loop {
        if let Some(back) = server.backchannels().into_iter().next() {
            break back;
        }
        assert!(Instant::now() < deadline, "no connection");
        std::thread::sleep(Duration::from_millis(5));
    };
    // Its answer never goes: the connection is closed under the option.
    let unanswered = back.send_option(20, b"from the server", &[]);
    assert!(!armed.load(Ordering::SeqCst), "the sink saw the client's answer");
    assert!(unanswered.is_err(), "the option was answered: {unanswered:?}");
    assert!(served_within(&client, 2 << 20, Duration::from_secs(5)), "the client is not served after it");
    let ended: Vec<_> = client.ended().iter().map(|e| e.to_string()).collect();
    assert!(
        ended.iter().any(|e| e.contains("a panic in code run while posting")),
        "how its connections ended: {ended:?}"
    );
}
