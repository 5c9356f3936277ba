//! The TCP backend's frames after the handshake, from a hostile peer: arbitrary bytes are
//! decoded head by head (every head re-encodes to the bytes it came from; no payload is
//! allocated by the decoder), and then written, as they are, into a real TCP queue pair over
//! loopback whose reader applies them against posted Receives, a registered region and a
//! bound memory window. Never a panic, in this thread or the backend's; the connection always
//! ends (the raw peer's end of stream tears it down), with its Receives flushed.
#![no_main]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;
use rpcrdma_verbs::tcp::frame::Head;
use rpcrdma_verbs::{
    Access, Backend, CmEvent, ConnectRequest, Listener, ProtectionDomain, QpCaps, QpState, QueuePair, Sge, Tcp,
};

fn listener() -> &'static rpcrdma_verbs::tcp::TcpCmListener {
    static L: OnceLock<rpcrdma_verbs::tcp::TcpCmListener> = OnceLock::new();
    L.get_or_init(|| Tcp.listen(&Tcp.any_address()).expect("listen"))
}

fn decode_all(data: &[u8]) {
    let mut at = 0;
    while at < data.len() {
        let Ok((head, used)) = Head::decode(&data[at..]) else { return };
        let mut again = Vec::new();
        head.encode(&mut again);
        assert_eq!(again, data[at..at + used], "a head re-encodes to its bytes");
        at = at.saturating_add(used).saturating_add(head.payload_len());
    }
}

fuzz_target!(|data: &[u8]| {
    decode_all(data);
    let l = listener();
    let mut raw = TcpStream::connect(l.local_addr()).expect("connect");
    // The request and, ahead of the accept, the ready-to-use: the accept does not wait on us.
    let mut request = b"VRBT\x01".to_vec();
    request.resize(61, 0);
    request.push(b'U');
    raw.write_all(&request).unwrap();
    let req = l.get_request(Duration::from_secs(5)).expect("request");
    let pd = Tcp.alloc_pd().unwrap();
    let buf = pd.register(vec![0; 256], Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
    let caps = QpCaps::default().retry_timeout(Duration::from_millis(200));
    let qp = req
        .accept_with(&pd, &[], caps, |qp| {
            for i in 0..4 {
                qp.post_recv(i, Sge::new(&buf, i as usize * 32, 32))?;
            }
            qp.post_bind_window(9, &buf, 128, 64, Access::REMOTE_READ | Access::REMOTE_WRITE).map(drop)
        })
        .map_err(drop);
    let mut accept = [0u8; 197];
    if raw.read_exact(&mut accept).is_err() {
        return;
    }
    let Ok(qp) = qp else { return };
    let _ = raw.write_all(data);
    let _ = raw.shutdown(std::net::Shutdown::Write);
    // The reader applies what it can, then the end of stream (or a refusal) ends it.
    let mut ended = false;
    for _ in 0..50 {
        if qp.cm_event(Duration::from_millis(100)) == Some(CmEvent::Disconnected) {
            ended = true;
            break;
        }
    }
    assert!(ended && qp.state() == QpState::Error, "the connection ended");
    while qp.poll_cq(&mut [Default::default(); 8]) > 0 {}
    drop(raw);
});
