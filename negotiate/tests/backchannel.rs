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

/// A client's backward-call handler that panics leaves that call unanswered (the server's
/// backward call ends with its timeout) and costs the client nothing: the panic does not
/// unwind through the caller that happened to be receiving, and forward calls in progress
/// meanwhile all complete.
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
            assert!(matches!(back.call(&rpc(0xa000_0000 + i, 0, &[])), Err(BackchannelError::Timeout(_))));
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
