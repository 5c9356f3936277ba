//! The capture decorator (`rpcrdma_verbs::capture::Captured`) over each software backend: every Send
//! posted through it reaches the sink once, with its bytes as posted and its queue pair's
//! endpoint; nothing else does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpcrdma_verbs::capture::{Captured, CapturedMessage};
use rpcrdma_verbs::*;

const T: Duration = Duration::from_secs(10);

/// What a capturing backend saw: each Send's endpoint, bytes and the rkey it invalidates.
type Seen = Arc<Mutex<Vec<(u64, Vec<u8>, Option<u32>)>>>;

/// A client and a server queue pair over `inner` wrapped in capture, with what it captures,
/// both protection domains and the server's one Receive posted (64 bytes).
#[allow(clippy::type_complexity)]
fn captured_pair<B: Backend + Clone>(
    inner: B,
) -> (
    Seen,
    <Captured<B> as Backend>::Pd,
    <Captured<B> as Backend>::Pd,
    <Captured<B> as Backend>::Qp,
    <Captured<B> as Backend>::Qp,
    <<Captured<B> as Backend>::Pd as ProtectionDomain>::Region,
) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let b = Captured::new(
        inner,
        Arc::new(move |m: &CapturedMessage<'_>| s.lock().unwrap().push((m.endpoint, m.bytes.to_vec(), m.invalidate))),
    );
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let (cpd, spd) = (b.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let sbuf = spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let (client, server) = std::thread::scope(|sc| {
        let c = sc.spawn(|| b.connect(&cpd, &addr, &[], QpCaps::default(), T).unwrap().0);
        let req = listener.get_request(T).unwrap();
        let server = req.accept_with(&spd, &[], QpCaps::default(), |qp| qp.post_recv(1, Sge::whole(&sbuf))).unwrap();
        (c.join().unwrap(), server)
    });
    (seen, cpd, spd, client, server, sbuf)
}

/// A call and its reply, the reply gathered from two scatter/gather entries; then a Send whose
/// entry lies outside its region (it fails locally and is not captured).
fn captures_each_send_with_its_endpoint<B: Backend + Clone>(inner: B) {
    let (seen, cpd, spd, client, server, _sbuf) = captured_pair(inner);
    let cbuf = cpd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    client.post_recv(2, Sge::whole(&cbuf)).unwrap();

    let call = cpd.register(b"call: xid 1".to_vec(), Access::empty()).unwrap();
    client.post_send(10, &[Sge::whole(&call)], None).unwrap();
    assert!(client.wait_cq(T).unwrap().is_ok());
    assert!(server.wait_cq(T).unwrap().is_ok());
    let reply = spd.register(b"....reply: xid 1....".to_vec(), Access::empty()).unwrap();
    server.post_send(20, &[Sge::new(&reply, 4, 6), Sge::new(&reply, 10, 7)], None).unwrap();
    assert!(server.wait_cq(T).unwrap().is_ok());
    assert_eq!(client.wait_cq(T).unwrap().byte_len, 13);
    cbuf.with(|c| assert_eq!(&c[..13], b"reply: xid 1."));

    client.post_send(30, &[Sge::new(&call, 8, 64)], None).unwrap();
    assert_eq!(client.wait_cq(T).unwrap().status, Status::LocalProtectionError);

    let seen = seen.lock().unwrap();
    assert_eq!(*seen, [(1, b"call: xid 1".to_vec(), None), (2, b"reply: xid 1.".to_vec(), None)]);
    assert_eq!((client.endpoint(), server.endpoint()), (Some(1), Some(2)));
}

/// Queue pairs made by the wrapped backend itself are not captured: nothing is global.
fn only_the_wrapping_backend_is_captured<B: Backend + Clone>(inner: B) {
    let seen = Arc::new(Mutex::new(0));
    let s = seen.clone();
    let _captured = Captured::new(inner.clone(), Arc::new(move |_: &CapturedMessage<'_>| *s.lock().unwrap() += 1));
    let listener = inner.listen(&inner.any_address()).unwrap();
    let addr = listener.local_addr();
    let pd = inner.alloc_pd().unwrap();
    let buf = pd.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
    let (client, server) = std::thread::scope(|sc| {
        let c = sc.spawn(|| inner.connect(&pd, &addr, &[], QpCaps::default(), T).unwrap().0);
        let req = listener.get_request(T).unwrap();
        let server = req.accept_with(&pd, &[], QpCaps::default(), |qp| qp.post_recv(1, Sge::whole(&buf))).unwrap();
        (c.join().unwrap(), server)
    });
    let msg = pd.register(b"plain".to_vec(), Access::empty()).unwrap();
    client.post_send(1, &[Sge::whole(&msg)], None).unwrap();
    assert!(server.wait_cq(T).unwrap().is_ok());
    assert_eq!(*seen.lock().unwrap(), 0);
}

/// A Send with Invalidate is captured with the rkey it invalidates: the server binds a window
/// over its chunk, and the client's Send asks for it to be invalidated.
fn captures_the_rkey_a_send_with_invalidate_names<B: Backend + Clone>(inner: B) {
    let (seen, cpd, spd, client, server, _sbuf) = captured_pair(inner);
    let chunk = spd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let window = server.post_bind_window(9, &chunk, 0, 64, Access::REMOTE_WRITE).unwrap();
    assert!(server.wait_cq(T).unwrap().is_ok());
    let msg = cpd.register(b"done".to_vec(), Access::empty()).unwrap();
    client.post_send(2, &[Sge::whole(&msg)], Some(window.rkey)).unwrap();
    assert!(client.wait_cq(T).unwrap().is_ok());
    assert_eq!(server.wait_cq(T).unwrap().invalidated_rkey, Some(window.rkey));
    assert_eq!(*seen.lock().unwrap(), [(1, b"done".to_vec(), Some(window.rkey))]);
}

#[test]
fn inproc_captures_the_rkey_a_send_with_invalidate_names() {
    captures_the_rkey_a_send_with_invalidate_names(InProcess);
}

#[test]
fn tcp_captures_the_rkey_a_send_with_invalidate_names() {
    captures_the_rkey_a_send_with_invalidate_names(Tcp);
}

#[test]
fn inproc_captures_each_send_with_its_endpoint() {
    captures_each_send_with_its_endpoint(InProcess);
}

#[test]
fn tcp_captures_each_send_with_its_endpoint() {
    captures_each_send_with_its_endpoint(Tcp);
}

#[test]
fn inproc_only_the_wrapping_backend_is_captured() {
    only_the_wrapping_backend_is_captured(InProcess);
}

#[test]
fn tcp_only_the_wrapping_backend_is_captured() {
    only_the_wrapping_backend_is_captured(Tcp);
}
