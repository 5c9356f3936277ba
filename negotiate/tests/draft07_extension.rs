//! draft-ietf-nfsv4-rpcrdma-version-two-07 Appendix B, its extension points, through this
//! workspace's example extension `specs/rpcrdma2-ping.txt` (two header types, a transport
//! property and an error code), whose types the build compiles with the base's XDR
//! (`rpcrdma_v2::draft07::xdr::ping`): a real Client and Server, each side's handler
//! registered with `negotiate::extension07`, and a client's connection core driven by bytes.

use std::sync::Arc;
use std::time::Instant;

use negotiate::client::{Client, ClientConfig, ClientError};
use negotiate::connection::{Arrival, CallStep, Connection, Received};
use negotiate::extension07::{Draft07Extension, ExtensionOutcome, ExtensionReply};
use negotiate::requester::{CallFailure, RequesterConfig};
use negotiate::responder::ResponderConfig;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::marshal_call::CallForm;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v2::dialect::{Dialect, VersionTwo};
use rpcrdma_v2::draft07::extension::ExtensionMessage;
use rpcrdma_v2::draft07::header::{Header, HeaderType};
use rpcrdma_v2::draft07::marshal;
use rpcrdma_v2::draft07::properties::Properties;
use rpcrdma_v2::draft07::xdr::ping::{Rpcrdma2HdrPing, RDMA2_ERR_PING_DATA, RDMA2_PING, RDMA2_PONG, RDMA2_PROPID_PING};
use rpcrdma_v2::draft07::xdr::RDMA2_ERR_BAD_XDR;
use rpcrdma_v2::rt::Xdr;
use rpcrdma_v2::HeaderLimits;
use rpcrdma_verbs::InProcess;

const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };

/// An RPC message: XID, msg_type, then `body`.
fn rpc(xid: u32, msg_type: u32, body: &[u8]) -> Vec<u8> {
    [&xid.to_be_bytes()[..], &msg_type.to_be_bytes(), body].concat()
}

fn echo(call: &[u8]) -> Vec<u8> {
    rpc(u32::from_be_bytes(call[..4].try_into().unwrap()), 1, &call[8..])
}

/// The ping extension as its document has a receiver take it: an RDMA2_PING answered with
/// RDMA2_PONG carrying the same body (section 2.1); a body that does not decode
/// RDMA2_ERR_BAD_XDR; data beyond the `max_data` it states (RDMA2_PROPID_PING, 2.2)
/// RDMA2_ERR_PING_DATA, the extension's own error code (2.3).
fn ping_extension(max_data: u32) -> Draft07Extension {
    Draft07Extension::new([RDMA2_PING], move |m: &ExtensionMessage<'_>| match Rpcrdma2HdrPing::decode(m.body) {
        Ok((_, used)) if used != m.body.len() => ExtensionOutcome::Error(RDMA2_ERR_BAD_XDR),
        Err(_) => ExtensionOutcome::Error(RDMA2_ERR_BAD_XDR),
        Ok((ping, _)) if ping.rdma_ping_data.len() > max_data as usize => ExtensionOutcome::Error(RDMA2_ERR_PING_DATA),
        Ok(_) => ExtensionOutcome::Answer { htype: RDMA2_PONG, body: m.body.to_vec() },
    })
    .stating(RDMA2_PROPID_PING, max_data.to_be_bytes().to_vec())
}

fn ping(cookie: u32, data: &[u8]) -> Vec<u8> {
    Rpcrdma2HdrPing { rdma_ping_cookie: cookie, rdma_ping_data: data }.to_vec().unwrap()
}

/// A -07 server (with `extensions`) and client, settled by one call.
fn pair(extensions: Vec<Draft07Extension>) -> (Server, Client<InProcess>) {
    let mut scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    scfg.draft07_extensions = extensions;
    let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ULB), echo).unwrap();
    let requester = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default().requester(requester));
    assert_eq!(client.call(&rpc(1, 0, &[1; 8]), &ULB).unwrap(), rpc(1, 1, &[1; 8]));
    assert_eq!(client.dialect(), Some(Dialect::Ietf07));
    (server, client)
}

/// Appendix B.2 and B.3 with the ping document's sections 2.1 to 2.3, through a real Client
/// and Server: the server states the extension's property in its RDMA2_CONNPROP_FINAL, where
/// the client finds it; an RDMA2_PING is answered with RDMA2_PONG echoing cookie and data;
/// data beyond what the server stated is answered with the extension's own error code
/// (B.4: RDMA2_ERROR's default arm), a body that does not decode with RDMA2_ERR_BAD_XDR; the
/// connection goes on serving calls, within the credits granted (section 4.2.1).
#[test]
fn appendix_b_an_extension_compiled_with_the_base_answers_through_a_real_client_and_server() {
    let (server, client) = pair(vec![ping_extension(64)]);
    let stated = client.draft07_peer_properties().expect("the server's CONNPROP_FINAL");
    assert_eq!(stated.others, [(RDMA2_PROPID_PING, 64u32.to_be_bytes().to_vec())]);
    for (cookie, data) in [(7, &b"hello, ping!"[..]), (8, &[]), (9, &[0xa5; 64])] {
        let got = client.send_extension(RDMA2_PING, &ping(cookie, data)).unwrap();
        let ExtensionReply::Answer { htype, body } = got else { panic!("{got:?}") };
        assert_eq!(htype, RDMA2_PONG);
        let (pong, used) = Rpcrdma2HdrPing::decode(&body).unwrap();
        assert_eq!((pong.rdma_ping_cookie, pong.rdma_ping_data, used), (cookie, data, body.len()));
    }
    assert_eq!(
        client.send_extension(RDMA2_PING, &ping(10, &[1; 65])).unwrap(),
        ExtensionReply::Error(RDMA2_ERR_PING_DATA)
    );
    assert_eq!(client.send_extension(RDMA2_PING, &[0, 0, 0]).unwrap(), ExtensionReply::Error(RDMA2_ERR_BAD_XDR));
    assert_eq!(client.call(&rpc(2, 0, &[2; 8]), &ULB).unwrap(), rpc(2, 1, &[2; 8]));
    assert_eq!(server.stats().credit_overruns, 0);
}

/// Appendix B.2 ("It is always possible to send a test invocation of a particular header
/// type to see if support is available") with section 7.1.3: a server without the extension
/// answers RDMA2_ERR_INVAL_HTYPE, which the client reports as not supported; its connection
/// goes on. And on a -00 connection there is no -07 extension to send.
#[test]
fn appendix_b_2_a_peer_without_the_extension_answers_inval_htype_and_goes_on() {
    let (_server, client) = pair(Vec::new());
    assert!(client.draft07_peer_properties().expect("the server's CONNPROP_FINAL").others.is_empty());
    assert_eq!(client.send_extension(RDMA2_PING, &ping(1, b"x")).unwrap(), ExtensionReply::NotSupported);
    assert_eq!(client.call(&rpc(2, 0, &[2; 8]), &ULB).unwrap(), rpc(2, 1, &[2; 8]));

    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ULB), echo).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    client.call(&rpc(1, 0, &[1; 8]), &ULB).unwrap();
    assert_eq!(client.dialect(), Some(Dialect::Cel00));
    let got = client.send_extension(RDMA2_PING, &ping(1, b"x"));
    assert!(matches!(got, Err(ClientError::Call(CallFailure::NotVersionTwo))), "{got:?}");
}

/// Appendix B from the client's side, by bytes: a client's connection core with the
/// extension states its property in its RDMA2_CONNPROP_FINAL, and answers the server's
/// RDMA2_PING with RDMA2_PONG (same XID, same body) once the server's window has room,
/// carrying its running total (section 4.2.1); an RDMA2_PING with data beyond what it stated
/// is answered with RDMA2_ERR_PING_DATA.
#[test]
fn appendix_b_a_client_core_with_the_extension_answers_the_servers_message() {
    let now = Instant::now();
    let requester = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    let mut cfg = ClientConfig::default().requester(requester);
    cfg.draft07_extensions = vec![ping_extension(8)];
    let mut c: Connection<u32> = Connection::client(cfg, "peer");
    c.start_call(1, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    let Some(CallStep::Transmit { .. }) = c.take_step(1) else { panic!() };
    c.handle_sent(CallForm::Short, 1);
    let mut reply = vec![0u8; 64];
    let n = marshal::reply_inline(&mut reply, 1, 32, rpcrdma_v1::rt::List::from_slice(&[]), &rpc(1, 1, &[])).unwrap();
    assert_eq!(c.handle_receive(&reply[..n], Arrival::default(), now), Received::Reply { xid: 1 });
    let connprop = transmitted(&mut c).expect("this side's CONNPROP_FINAL");
    let h = Header::parse(&connprop, &HeaderLimits::default()).unwrap();
    assert_eq!(h.header_type(), HeaderType::ConnPropFinal);
    let stated = Properties::default().apply(&h.properties().unwrap()).unwrap();
    assert_eq!(stated.others, [(RDMA2_PROPID_PING, 8u32.to_be_bytes().to_vec())]);

    let body = ping(0xc0ffee, b"12345678");
    let probe = ExtensionMessage::to_message(0x77, 33, RDMA2_PING, &body);
    assert_eq!(c.handle_receive(&probe, Arrival::default(), now), Received::Nothing(None));
    let pong = transmitted(&mut c).expect("the answer, the window having room");
    let m = ExtensionMessage::parse(&pong).unwrap();
    assert_eq!((m.xid, m.htype, m.body), (0x77, RDMA2_PONG, &body[..]));
    assert_eq!(m.credit, 32 + 2, "this side's running total: two Receives, 32 advertised");

    // The refusal, like the answer, waits for room in the window (section 4.2.1).
    let probe = ExtensionMessage::to_message(0x78, 34, RDMA2_PING, &ping(1, b"123456789"));
    assert_eq!(c.handle_receive(&probe, Arrival::default(), now), Received::Nothing(None));
    let e = transmitted(&mut c).expect("the RDMA2_ERROR");
    let h = Header::parse(&e, &HeaderLimits::default()).unwrap();
    assert_eq!(
        (h.xid(), h.header_type(), h.error().map(|e| e.code())),
        (0x78, HeaderType::Error, Some(RDMA2_ERR_PING_DATA))
    );
}

/// Appendix B both ways: the server's RDMA2_PING reaches the client's handler through a real
/// Server and Client, and comes back as RDMA2_PONG; a client without the extension answers
/// RDMA2_ERR_INVAL_HTYPE; forward calls go on from four threads meanwhile, within the credits
/// granted (section 4.2.1).
#[test]
fn appendix_b_the_servers_extension_message_reaches_the_clients_handler() {
    for with in [true, false] {
        let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
        let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ULB), echo).unwrap();
        let requester = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
        let mut cfg = ClientConfig::default().requester(requester);
        if with {
            cfg.draft07_extensions = vec![ping_extension(16)];
        }
        let client = Arc::new(Client::new(InProcess, server.local_addr(), cfg));
        assert_eq!(client.call(&rpc(1, 0, &[1; 8]), &ULB).unwrap(), rpc(1, 1, &[1; 8]));
        let back = server.backchannels().into_iter().next().expect("the connection");
        let forward: Vec<_> = (0..4u32)
            .map(|t| {
                let client = client.clone();
                std::thread::spawn(move || {
                    for i in 0..40u32 {
                        let call = rpc(0x100 + (t << 8) + i, 0, &[t as u8; 12]);
                        assert_eq!(client.call(&call, &ULB).unwrap(), echo(&call));
                    }
                })
            })
            .collect();
        for cookie in 0..10u32 {
            let got = back.send_extension(RDMA2_PING, &ping(cookie, b"back")).unwrap();
            if with {
                assert_eq!(got, ExtensionReply::Answer { htype: RDMA2_PONG, body: ping(cookie, b"back") });
            } else {
                assert_eq!(got, ExtensionReply::NotSupported);
            }
        }
        if with {
            // The extension's own error code, back to the server (B.4).
            let got = back.send_extension(RDMA2_PING, &ping(1, &[0; 17])).unwrap();
            assert_eq!(got, ExtensionReply::Error(RDMA2_ERR_PING_DATA));
        }
        for t in forward {
            t.join().unwrap();
        }
        assert_eq!(server.stats().credit_overruns, 0);
    }
}

/// Appendix B.4 with sections 4.2.1 and 7.4.1, through a real Client and Server: a handler's
/// answer larger than the requester's Receive is not sent, and the message is answered
/// RDMA2_ERR_SYSTEM instead, one Send taking one credit. With a window of 2, three such
/// answers and then a call all get through, with no overrun. (A Server counts its Sends as it
/// posts them; the core counting as it judges is checked in `responder.rs`'s own test,
/// `an_answer_too_large_to_send_takes_no_place_in_the_window`.)
#[test]
fn appendix_b_4_an_answer_over_the_requesters_receive_is_err_system_and_takes_one_credit() {
    let big = Draft07Extension::new([RDMA2_PING], |_: &ExtensionMessage<'_>| ExtensionOutcome::Answer {
        htype: RDMA2_PONG,
        body: vec![0; 8192],
    });
    let mut scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    scfg.draft07_extensions = vec![big];
    let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ULB), echo).unwrap();
    let requester = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    let cfg = ClientConfig::default().requester(requester).credits(2).timeout(std::time::Duration::from_secs(5));
    let client = Client::new(InProcess, server.local_addr(), cfg);
    assert_eq!(client.call(&rpc(1, 0, &[1; 8]), &ULB).unwrap(), rpc(1, 1, &[1; 8]));
    for cookie in 0..3 {
        let got = client.send_extension(RDMA2_PING, &ping(cookie, b"x")).unwrap();
        assert_eq!(got, ExtensionReply::Error(rpcrdma_v2::draft07::xdr::RDMA2_ERR_SYSTEM), "{cookie}");
    }
    assert_eq!(client.call(&rpc(2, 0, &[2; 8]), &ULB).unwrap(), rpc(2, 1, &[2; 8]));
    assert_eq!(server.stats().credit_overruns, 0);
}

/// What the core sends of its own next ([`Connection::poll_transmit`]), its Send reported
/// complete at once, as a driver reports it.
fn transmitted(c: &mut Connection<u32>) -> Option<Vec<u8>> {
    let t = c.poll_transmit()?;
    c.handle_completion(t.id, Ok(()));
    Some(t.bytes)
}

/// Appendix B.2 with section 7.1.3, for an extension whose handler panics (the application's
/// code, run on the peer's bytes): the server answers the message RDMA2_ERR_INVAL_HTYPE, as
/// for a type it does not take, which the client reports as not supported, and the connection
/// and the server serve on, more times than the server has threads. Before: the panic unwound
/// the server's event loop thread that judged the message.
#[test]
fn appendix_b_2_an_extension_that_panics_is_answered_inval_htype_and_the_server_serves_on() {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let r = runs.clone();
    let fragile = Draft07Extension::new([RDMA2_PING], move |_: &ExtensionMessage<'_>| {
        r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        panic!("the extension failed (this panic is the test's)")
    });
    let (_server, client) = pair(vec![fragile]);
    for i in 0..12u32 {
        assert_eq!(client.send_extension(RDMA2_PING, &ping(i, b"x")).unwrap(), ExtensionReply::NotSupported, "{i}");
        assert_eq!(client.call(&rpc(10 + i, 0, &[3; 8]), &ULB).unwrap(), rpc(10 + i, 1, &[3; 8]));
    }
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 12);
}
