//! A client's connection core speaking draft-ietf-nfsv4-rpcrdma-version-two-07 (issue 27),
//! fed arbitrary message sequences as its responder's answers: the input is cut into messages
//! (each a 2-byte length, then that many bytes), each judged by `negotiate::connection::
//! Connection::client` with `RequesterConfig::version_two` -07 (or both dialects, by the first
//! byte's lowest bit; offering the reverse direction, Simple, by its next), eight calls
//! started. A -07 reverse-direction call taken is one this side offered, whose RPC message
//! starts with its XID, and its reply is queued as a client's backchannel queues it. Whatever the responder sends: nothing panics, no allocation
//! exceeds what the input brings and the continued-reply limit (`bounded_alloc`), what goes
//! back is an RDMA_ERROR of at most 28 bytes or an RDMA2_GRANT (the prefix alone, XID zero), a
//! reply reaches only a call in flight and carries the header view its bytes parse to, and a
//! rewritten (continued) reply is no larger than the limit allows.

#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;
#[path = "length_prefixed.rs"]
mod length_prefixed;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;

use negotiate::client::ClientConfig;
use negotiate::connection::{Arrival, CallStep, Connection, Received, TransmissionKind};
use negotiate::reply::{reply_header, MAX_CONTINUED_REPLY};
use negotiate::requester::RequesterConfig;
use rpcrdma_v1::marshal_call::CallForm;
use rpcrdma_v1::verdict::ErrorReply;
use rpcrdma_v2::dialect::{Dialect, VersionTwo};

fuzz_target!(|data: &[u8]| {
    let Some((&choice, data)) = data.split_first() else { return };
    let v2 = if choice & 1 == 0 {
        VersionTwo::One(Dialect::Ietf07)
    } else {
        VersionTwo::Both { preferred: Dialect::Ietf07 }
    };
    let requester = RequesterConfig::default().version_two(v2).timeout(Duration::from_secs(5));
    let mut c: Connection<u32> = Connection::client(ClientConfig::default().requester(requester), "fuzz:responder");
    if choice & 2 != 0 {
        c.offer_reverse_direction(rpcrdma_v2::draft07::properties::ReverseDirection::Simple);
    }
    let mut now = Instant::now();
    for xid in 1..=8 {
        c.start_call(xid, now).expect("distinct XIDs");
    }
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    let limits = ClientConfig::default().requester.limits;
    for message in length_prefixed::messages(data) {
        // Every transmission the core hands out is reported sent.
        for xid in 1..=8 {
            if let Some(CallStep::Transmit { .. }) = c.take_step(xid) {
                c.handle_sent(CallForm::Short, 1);
            }
        }
        match c.handle_receive(message, Arrival::default(), now) {
            Received::Reply { xid } => {
                assert!((1..=8).contains(&xid), "a reply for {xid:#x}, no call of ours");
                c.deliver(xid, message.to_vec(), None);
                if let Some(CallStep::Reply { message: got, header, .. }) = c.take_step(xid) {
                    assert!(got.len() <= MAX_CONTINUED_REPLY + 4096 || got == message, "{} bytes", got.len());
                    let view = header.and_then(|h| h.attach(&got)).expect("a reply comes with its header view");
                    assert_eq!(reply_header(&got, &limits), Some(view), "the view its bytes parse to");
                }
                c.finish_call(xid);
            }
            // (A backward call in Version One or -00, RFC 8167, needs no offer.)
            Received::Call { header, params } if params.draft07 => {
                assert!(choice & 2 != 0, "a reverse-direction call taken, none offered");
                assert_eq!(header.payload().get(..4), Some(&header.xid().to_be_bytes()[..]));
                c.queue_reverse_reply(vec![0; 28]);
            }
            _ => {}
        }
        // What the core sends of its own (its answers, its CONNPROP_FINAL, replies to reverse
        // calls) goes, each reported sent before the next is taken.
        while let Some(t) = c.poll_transmit() {
            let m = &t.bytes;
            assert!(m.len() <= 4096, "{} bytes", m.len());
            match t.kind {
                TransmissionKind::Error { .. } => assert!(m.len() <= ErrorReply::MAX_LEN, "{m:?}"),
                TransmissionKind::Grant => {
                    assert!(m.len() == 16 && m[..4] == [0; 4] && m[12..16] == [0, 0, 0, 5], "{m:?}")
                }
                _ => {}
            }
            c.handle_completion(t.id, Ok(()));
        }
        for xid in 1..=8 {
            if let Some(CallStep::Failed(_)) = c.take_step(xid) {
                c.finish_call(xid);
            }
        }
        // Time moves by the message's last byte, in tenths of a second: calls time out, and a
        // window left shut closes the connection, as the input makes them.
        now += Duration::from_millis(100 * u64::from(message.last().copied().unwrap_or(0)));
        c.handle_timeout(now);
        while let Some(event) = c.poll_event() {
            if let negotiate::connection::Event::Disconnect { .. } = event {
                c.handle_link_down(negotiate::datapath::Ended::Closed("fuzz".into()), now);
            }
        }
    }
});
