//! A requester receiving whatever a hostile responder sends as the reply to its call, through
//! negotiate's data path: the input, judged by `rpcrdma_v1::verdict::receive` as the client's
//! connection judges it, completes a call that advertised a Write chunk (up to 64 KiB of
//! result) and a Reply chunk (`PendingCall::complete`: the chunks released, the lengths the
//! reply claims checked against the memory the call registered, the reply reassembled). It
//! must never panic, and never allocate what the reply's own length words claim
//! (`bounded_alloc`: issue 26's reply claimed 2.26 GB of `reassemble_reply`).
//!
//! One in-process connection serves every input: its responder side only receives each call
//! (so that its Receive is posted again) and sends nothing; the input stands for its reply.

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;

use negotiate::datapath::{send_call, CallParams, ReceivePool, Transport};
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Backend, ConnectRequest, InProcess, Listener, QpCaps};

/// The call's result is DDP-eligible (an `opaque<>` at the reply's word 2), up to 64 KiB, so
/// the call advertises a Write chunk; its reply may need a Reply chunk too.
const ULB: OpaqueAtUlb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: 1 << 16, max_reply: 8192 };

struct Pair {
    requester: Transport<InProcess>,
    responder: Transport<InProcess>,
    receives: ReceivePool<InProcess>,
}

fn pair() -> &'static Pair {
    static P: OnceLock<Pair> = OnceLock::new();
    P.get_or_init(|| {
        let t = Duration::from_secs(5);
        let listener = InProcess.listen(&InProcess.any_address()).expect("listen");
        let addr = listener.local_addr();
        let responder = std::thread::spawn(move || {
            let pd = InProcess.alloc_pd().expect("pd");
            let qp = listener.get_request(t).expect("request").accept(&pd, &[], QpCaps::default()).expect("accept");
            let conn = Transport::new(pd, qp, t);
            let receives = ReceivePool::new(&conn, 4, 4096).expect("receives");
            (conn, receives)
        });
        let pd = InProcess.alloc_pd().expect("pd");
        let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).expect("connect");
        let (responder, receives) = responder.join().expect("responder");
        Pair { requester: Transport::new(pd, qp, t), responder, receives }
    })
}

fuzz_target!(|data: &[u8]| {
    let p = pair();
    let call = [0, 0, 0, 9, 0, 0, 0, 0];
    let params = CallParams {
        version: Version::ONE,
        credits: 4,
        thresholds: InlineThresholds::default(),
        dialect: None,
        remote_invalidation: false,
        segments: negotiate::thresholds::SegmentLimits::NONE,
    };
    let Ok(pending) = send_call(&p.requester, &call, &ULB, &params) else { return };
    // The responder takes the call (its Receive is posted again) and answers nothing: the
    // input is the reply.
    let _ = p.receives.receive(&p.responder);
    let policy = ReceivePolicy::default();
    let mut out = Vec::new();
    match receive(data, &policy) {
        Verdict::Accept(reply) => {
            let _ = pending.complete(&p.requester, &call, &reply, None, &ULB, &mut out);
        }
        _ => {
            let _ = pending.abandon(&p.requester, None);
        }
    }
});
