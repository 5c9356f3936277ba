//! The two 64-byte round trips measured side by side (`benches/rpc.rs`,
//! `examples/round_trips.rs`): a raw Send and the answering Send between two threads on one
//! backend, and a call through `negotiate`'s Client and Server on the same backend. The raw
//! pair either sleeps in the completion queue's wait at both ends ([`Wait::Sleep`]) or
//! busy-polls it at both ends, as `ib_send_lat` does ([`Wait::Poll`]): the second is the
//! verbs' own floor, which a stack that polls before it sleeps is to be compared with.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{
    Access, Backend, Completion, ConnectRequest, Listener, Opcode, ProtectionDomain, QpCaps, QueuePair, Sge,
};

const T: Duration = Duration::from_secs(5);

/// How both ends of a [`RawPair`] wait for a completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// In the completion queue's wait (`wait_cq`: a completion channel's sleep on real verbs).
    Sleep,
    /// Polling the completion queue without a pause (`poll_cq`), as `ib_send_lat` does.
    Poll,
}

/// The next completion of `qp`, waited for as `wait` says; `None` after `timeout`.
fn next_completion<Q: QueuePair>(qp: &Q, wait: Wait, timeout: Duration) -> Option<Completion> {
    match wait {
        Wait::Sleep => qp.wait_cq(timeout),
        Wait::Poll => {
            let until = Instant::now() + timeout;
            let mut one = [Completion::default()];
            loop {
                if qp.poll_cq(&mut one) == 1 {
                    return Some(one[0]);
                }
                if Instant::now() >= until {
                    return None;
                }
            }
        }
    }
}

/// The raw pair: this side's queue pair and buffers, and the echoing thread.
pub struct RawPair<B: Backend> {
    wait: Wait,
    qp: B::Qp,
    buf: <B::Pd as ProtectionDomain>::Region,
    msg: <B::Pd as ProtectionDomain>::Region,
    echo: JoinHandle<()>,
    _pd: B::Pd,
}

impl<B: Backend + Clone> RawPair<B> {
    /// Connects to a thread that answers each 64-byte Send with one, Receives reposted each
    /// time; both ends wait as `wait` says.
    pub fn start(b: &B, wait: Wait) -> Self {
        let listener = b.listen(&b.any_address()).unwrap();
        let addr = listener.local_addr();
        let b2 = b.clone();
        let echo = std::thread::spawn(move || {
            let pd = b2.alloc_pd().unwrap();
            let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
            let msg = pd.register(vec![1; 64], Access::empty()).unwrap();
            let req = listener.get_request(T).unwrap();
            let qp = req.accept_with(&pd, &[], QpCaps::default(), |qp| qp.post_recv(0, Sge::whole(&buf))).unwrap();
            let mut n = 0u64;
            // Each Receive's completion is followed by our Send's; an error (the disconnect's
            // flush) ends the loop.
            while let Some(c) = next_completion(&qp, wait, Duration::from_secs(3600)) {
                if !c.is_ok() {
                    break;
                }
                if c.opcode == Opcode::Recv {
                    qp.post_recv(n, Sge::whole(&buf)).unwrap();
                    qp.post_send(n, &[Sge::whole(&msg)], None).unwrap();
                    n += 1;
                }
            }
        });
        let pd = b.alloc_pd().unwrap();
        let (qp, _) = b.connect(&pd, &addr, &[], QpCaps::default(), T).unwrap();
        let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        let msg = pd.register(vec![2; 64], Access::empty()).unwrap();
        RawPair { wait, qp, buf, msg, echo, _pd: pd }
    }

    /// One round trip: a Receive posted, the Send, and the waits until the answer came.
    pub fn round_trip(&self) {
        self.qp.post_recv(1, Sge::whole(&self.buf)).unwrap();
        self.qp.post_send(2, &[Sge::whole(&self.msg)], None).unwrap();
        loop {
            let c = next_completion(&self.qp, self.wait, T).expect("the echo's answer");
            assert!(c.is_ok());
            if c.opcode == Opcode::Recv {
                break;
            }
        }
    }

    /// Disconnects, and waits for the echoing thread to end.
    pub fn stop(self) {
        self.qp.disconnect();
        drop(self.qp);
        self.echo.join().unwrap();
    }
}

/// The upper-layer binding of the RPC round trip: no DDP-eligible items.
pub const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 256 };

/// The reply: the call's XID, REPLY, and a 56-byte body (64 bytes in all).
pub fn reply_to(call: &[u8]) -> Vec<u8> {
    let mut r = call[..4].to_vec();
    r.extend_from_slice(&1u32.to_be_bytes());
    r.resize(64, 0);
    r
}

/// A server answering with [`reply_to`], and a client of it, on `b`.
pub fn rpc_pair<B: Backend + Clone>(b: B) -> (Server, Client<B>) {
    let server = Server::start(b.clone(), b.any_address(), ServerConfig::default(), Arc::new(ULB), reply_to).unwrap();
    let client = Client::new(b, server.local_addr(), ClientConfig::default());
    (server, client)
}

/// Makes 64-byte calls with `Client::call_into` (the caller's reply buffer reused), each
/// with the next XID.
pub struct Caller<'a, B: Backend> {
    client: &'a Client<B>,
    xid: u32,
    call: Vec<u8>,
    reply: Vec<u8>,
}

impl<'a, B: Backend> Caller<'a, B> {
    pub fn new(client: &'a Client<B>) -> Self {
        Caller { client, xid: 0, call: vec![0; 64], reply: Vec::with_capacity(256) }
    }

    /// One call, its reply checked for length.
    pub fn call(&mut self) {
        self.xid = self.xid.wrapping_add(1);
        self.call[..4].copy_from_slice(&self.xid.to_be_bytes());
        self.client.call_into(&self.call, &ULB, &mut self.reply).unwrap();
        assert_eq!(self.reply.len(), 64);
    }
}
