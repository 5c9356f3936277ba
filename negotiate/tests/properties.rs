//! The transport-properties extension (specs/rpcrdma2-transport-properties.txt) between our
//! Client and Server, on the in-process and TCP backends: each of {both sides have it,
//! requester only, responder only, Version One}, checking the fallback and that stated
//! properties took effect (a 10,000-byte call and reply travel inline only when both stated
//! 16 KiB Receives; private data says 4096). Each test names the section it checks.

use std::sync::Arc;
use std::time::Duration;

use negotiate::client::{Client, ClientConfig};
use negotiate::connection::PeerProperties;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_v2::properties::TransportProperties;
use rpcrdma_verbs::Backend;

/// Nothing DDP-eligible: a message over the inline threshold goes Long, a reply in a Reply chunk.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 16384 };

const BIG: TransportProperties = TransportProperties {
    max_send_size: Some(16384),
    max_recv_size: Some(16384),
    remote_invalidation: None,
    backward_credits: None,
};

/// An RPC call (or reply) of `len` bytes: XID, `msg_type`, zeros.
fn message(xid: u32, msg_type: u32, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = [xid, msg_type].iter().flat_map(|w| w.to_be_bytes()).collect();
    m.resize(len, 0);
    m
}

/// Replies with as many bytes as the call had.
fn same_size(call: &[u8]) -> Vec<u8> {
    let xid = u32::from_be_bytes(call[..4].try_into().unwrap());
    message(xid, 1, call.len())
}

struct Outcome {
    properties: PeerProperties,
    call_threshold: usize,
    /// The 10,000-byte call went Short (inline).
    big_call_inline: bool,
    /// Its 10,000-byte reply came inline.
    big_reply_inline: bool,
}

fn run<B: Backend + Clone>(
    b: B,
    client_props: Option<TransportProperties>,
    server_props: Option<TransportProperties>,
    versions: (u32, u32),
) -> Outcome {
    let server_cfg = ServerConfig::default().properties(server_props);
    let server = Server::start(b.clone(), b.any_address(), server_cfg, Arc::new(ULB), same_size).unwrap();
    let mut cfg = ClientConfig::default().properties(client_props);
    cfg.requester.versions = (Version::from_wire(versions.0), Version::from_wire(versions.1));
    cfg.requester.timeout = Duration::from_secs(5);
    let client = Client::new(b, server.local_addr(), cfg);
    // The first call settles the version (and is followed by the exchange, when configured).
    assert_eq!(client.call(&message(1, 0, 64), &ULB).unwrap(), message(1, 1, 64));
    // The server counts a reply once sent, which may be just after the client has it.
    let replies_counted = |n: u64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let s = server.stats();
            if s.inline_replies + s.reply_chunk_replies >= n || std::time::Instant::now() > deadline {
                return s;
            }
            std::thread::yield_now();
        }
    };
    let before = (client.stats(), replies_counted(1));
    assert_eq!(client.call(&message(2, 0, 10_000), &ULB).unwrap(), message(2, 1, 10_000));
    let after = replies_counted(2);
    let out = Outcome {
        properties: client.peer_properties(),
        call_threshold: client.thresholds().unwrap().call,
        big_call_inline: client.stats().short == before.0.short + 1,
        big_reply_inline: after.inline_replies == before.1.inline_replies + 1,
    };
    // Calls keep being served after the exchange, whatever it gave.
    assert_eq!(client.call(&message(3, 0, 64), &ULB).unwrap(), message(3, 1, 64));
    out
}

fn both_sides_state_16k_receives_and_a_10k_call_and_reply_go_inline<B: Backend + Clone>(b: B) {
    let out = run(b, Some(BIG), Some(BIG), (1, 2));
    assert_eq!(out.properties, PeerProperties::Stated(BIG));
    assert_eq!(out.call_threshold, 16384, "section 2.4: the responder's stated Receive size");
    assert!(out.big_call_inline, "the 10,000-byte call went inline");
    assert!(out.big_reply_inline, "the 10,000-byte reply came inline");
}

fn a_responder_without_the_extension_answers_inval_option_and_both_fall_back<B: Backend + Clone>(b: B) {
    let out = run(b, Some(BIG), None, (1, 2));
    assert_eq!(out.properties, PeerProperties::Refused, "section 2.3");
    assert_eq!(out.call_threshold, 4096, "private data's 4096 stays in effect");
    assert!(!out.big_call_inline && !out.big_reply_inline, "the call went Long, the reply in a Reply chunk");
}

fn a_requester_without_the_extension_makes_no_exchange<B: Backend + Clone>(b: B) {
    let out = run(b, None, Some(BIG), (1, 2));
    assert_eq!(out.properties, PeerProperties::NotExchanged);
    assert_eq!(out.call_threshold, 4096);
    assert!(!out.big_call_inline && !out.big_reply_inline);
}

fn no_exchange_on_a_connection_settled_on_version_one<B: Backend + Clone>(b: B) {
    let out = run(b, Some(BIG), Some(BIG), (1, 1));
    assert_eq!(out.properties, PeerProperties::NotExchanged, "section 2.1: MUST NOT on Version One");
    assert!(!out.big_call_inline && !out.big_reply_inline);
}

macro_rules! instantiate {
    ($module:ident, $backend:expr) => {
        mod $module {
            #[test]
            fn properties_2_4_both_sides_state_16k_receives_and_a_10k_call_and_reply_go_inline() {
                super::both_sides_state_16k_receives_and_a_10k_call_and_reply_go_inline($backend)
            }
            #[test]
            fn properties_2_3_a_responder_without_the_extension_answers_inval_option_and_both_fall_back() {
                super::a_responder_without_the_extension_answers_inval_option_and_both_fall_back($backend)
            }
            #[test]
            fn properties_2_1_a_requester_without_the_extension_makes_no_exchange() {
                super::a_requester_without_the_extension_makes_no_exchange($backend)
            }
            #[test]
            fn properties_2_1_no_exchange_on_a_connection_settled_on_version_one() {
                super::no_exchange_on_a_connection_settled_on_version_one($backend)
            }
        }
    };
}

instantiate!(inproc, rpcrdma_verbs::InProcess);
instantiate!(tcp, rpcrdma_verbs::Tcp);

/// The responder's side alone, bytes only (`negotiate::responder::Responder`): a request it
/// cannot take is answered RDMA_ERR_INVAL_OPTION with its XID (sections 2.2 and 2.5), and
/// nothing stated takes effect.
mod responder_rules {
    use negotiate::responder::{Asked, Responder, ResponderConfig};
    use rpcrdma_v2::options::encode_optional;
    use rpcrdma_v2::properties::{Exchange, RPCRDMA2_OPT_PROPERTIES};

    use super::BIG;

    /// An RDMA_OPTIONAL of type properties, XID 9, carrying `optinfo` then `payload`.
    fn request(optinfo: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut msg = vec![0u8; 64 + optinfo.len()];
        let n = encode_optional(9, 4, RPCRDMA2_OPT_PROPERTIES, optinfo, &mut msg).unwrap();
        msg.truncate(n);
        msg.extend_from_slice(payload);
        msg
    }

    fn answer_to(msg: &[u8]) -> (Option<Vec<u8>>, bool) {
        let mut r = Responder::new(ResponderConfig::default());
        r.set_properties(BIG);
        r.handle_connected(&[], None);
        let refused = match r.handle_receive(msg) {
            Asked::SendError(e) => {
                // RDMA_ERROR (4), RDMA_ERR_INVAL_OPTION (3), the request's XID.
                assert_eq!(&e.as_bytes()[..4], 9u32.to_be_bytes());
                assert_eq!(&e.as_bytes()[12..20], [0, 0, 0, 4, 0, 0, 0, 3]);
                true
            }
            Asked::Handled { answer, .. } => return (answer.map(|a| a.optinfo), r.stated().requester.is_some()),
            other => panic!("{other:?}"),
        };
        assert!(refused);
        assert_eq!(r.stated().requester, None, "nothing stated took effect");
        (None, false)
    }

    #[test]
    fn properties_2_2_a_request_followed_by_a_payload_stream_is_answered_inval_option() {
        let mut optinfo = [0u8; 64];
        let n = BIG.encode(Exchange::Request, &mut optinfo).unwrap();
        assert_eq!(answer_to(&request(&optinfo[..n], &[0, 0, 0, 1])), (None, false));
        // The same request without the payload is answered, and takes effect.
        let (answer, took_effect) = answer_to(&request(&optinfo[..n], &[]));
        assert!(answer.is_some() && took_effect);
    }

    #[test]
    fn properties_2_5_a_request_that_does_not_decode_is_answered_inval_option() {
        // A count of 65 properties: beyond RDMA2_PROPS_MAX.
        let optinfo: Vec<u8> = [0u32, 65].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(answer_to(&request(&optinfo, &[])), (None, false));
        // A reply where a request belongs.
        let mut reply = [0u8; 64];
        let n = BIG.encode(Exchange::Reply, &mut reply).unwrap();
        assert_eq!(answer_to(&request(&reply[..n], &[])), (None, false));
    }
}

/// Section 2.1: the exchange follows the first call settled on Version Two, whichever API
/// made it: after an async call it is made too (by the client's workers, never blocking the
/// caller's executor), and the stated sizes then take effect (a 10,000-byte call goes inline).
#[test]
fn properties_2_1_the_exchange_follows_an_async_first_call_too() {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    fn block_on<F: Future + Unpin>(mut f: F) -> F::Output {
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(v) = std::pin::Pin::new(&mut f).poll(&mut cx) {
                return v;
            }
            std::thread::park_timeout(Duration::from_millis(10));
        }
    }
    let b = rpcrdma_verbs::InProcess;
    let server_cfg = ServerConfig::default().properties(Some(BIG));
    let server = Server::start(b, b.any_address(), server_cfg, Arc::new(ULB), same_size).unwrap();
    let client = Client::new(b, server.local_addr(), ClientConfig::default().properties(Some(BIG)));
    assert_eq!(block_on(client.call_async(&message(1, 0, 64), &ULB)).unwrap(), message(1, 1, 64));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while client.peer_properties() == PeerProperties::NotExchanged {
        assert!(std::time::Instant::now() < deadline, "no exchange followed the async call");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(client.peer_properties(), PeerProperties::Stated(BIG));
    assert_eq!(client.thresholds().unwrap().call, 16384);
    let short_before = client.stats().short;
    assert_eq!(block_on(client.call_async(&message(2, 0, 10_000), &ULB)).unwrap(), message(2, 1, 10_000));
    assert_eq!(client.stats().short, short_before + 1, "the 10,000-byte call went inline");
}

/// Section 2.1, with blocking calls in progress: the exchange an async first call leaves to the
/// client (made by its workers since the twenty-third session, by its dispatcher before) goes
/// on while two blocking callers wait for their replies (the dispatcher receives for them
/// then), and every call ends. (The dispatcher, when it made the exchange, once left the
/// receiving to itself while it waited, so neither the answer nor the blocking call's reply
/// was ever received.)
#[test]
fn properties_2_1_the_dispatchers_exchange_goes_on_beside_waiting_blocking_calls() {
    use std::sync::mpsc;
    let b = rpcrdma_verbs::InProcess;
    // The async call (XID 1) is answered after 100 ms, the blocking ones (XIDs 2 and 3) after
    // 400 ms: the exchange starts while they wait.
    let slow = |call: &[u8]| {
        let xid = u32::from_be_bytes(call[..4].try_into().unwrap());
        std::thread::sleep(Duration::from_millis(match xid {
            1 => 100,
            2 | 3 => 400,
            _ => 0,
        }));
        same_size(call)
    };
    let server_cfg = ServerConfig::default().properties(Some(BIG));
    let server = Server::start(b, b.any_address(), server_cfg, Arc::new(ULB), slow).unwrap();
    let client = Arc::new(Client::new(b, server.local_addr(), ClientConfig::default().properties(Some(BIG))));
    let (tx, rx) = mpsc::channel();
    let (c, t) = (client.clone(), tx.clone());
    std::thread::spawn(move || {
        let _ = t.send((1, run_to_end(c.call_async(&message(1, 0, 64), &ULB))));
    });
    std::thread::sleep(Duration::from_millis(20));
    for xid in [2, 3] {
        let (c, t) = (client.clone(), tx.clone());
        std::thread::spawn(move || {
            let _ = t.send((xid, c.call(&message(xid, 0, 64), &ULB)));
        });
    }
    // (On a hang the threads keep their clients: the test fails instead of waiting in a drop.)
    for _ in 0..3 {
        let (xid, result) = rx.recv_timeout(Duration::from_secs(10)).expect("every call ends");
        assert_eq!(result.unwrap(), message(xid, 1, 64), "call {xid}");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while client.peer_properties() == PeerProperties::NotExchanged {
        assert!(std::time::Instant::now() < deadline, "no exchange followed the async call");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(client.peer_properties(), PeerProperties::Stated(BIG));
}

/// Runs a future to completion on this thread.
fn run_to_end<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut f = std::pin::pin!(f);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
}
