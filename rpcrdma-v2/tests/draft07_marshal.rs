//! Writing draft-ietf-nfsv4-rpcrdma-version-two-07 messages (`draft07::marshal`) and reading
//! them back (`draft07::header`, `draft07::continuation`), and the sans-I/O pieces together:
//! two peers exchanging continued calls and replies within their credits, driven by bytes.

use std::collections::VecDeque;

use proptest::prelude::*;
use rpcrdma_v1::header::ChunkLists;
use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrReadChunk, XdrWriteChunk};
use rpcrdma_v2::draft07::continuation::{Reassembly, Step};
use rpcrdma_v2::draft07::credits::CreditWindow;
use rpcrdma_v2::draft07::header::{Header, HeaderType};
use rpcrdma_v2::draft07::marshal::*;
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::rt::{List, Seq};
use rpcrdma_v2::HeaderLimits;

fn parse(bytes: &[u8]) -> Header<'_> {
    Header::parse(bytes, &HeaderLimits::default()).expect("what was written parses")
}

fn seg(handle: u32, length: u32) -> XdrRdmaSegment {
    XdrRdmaSegment { handle, length, offset: 0x1000 }
}

#[test]
fn every_writer_reads_back_as_written() {
    let reads = [XdrReadChunk { position: 8, target: seg(1, 64) }];
    let targets = [seg(2, 512)];
    let write = XdrWriteChunk { target: Seq::from_slice(&targets) };
    let writes = [write];
    let chunks = ChunkLists { reads: List::from_slice(&reads), writes: List::from_slice(&writes), reply: Some(write) };
    let rpc = [0, 0, 0, 9, 0, 0, 0, 0];
    let mut out = [0u8; 512];

    let n = call_inline(&mut out, 9, 32, 0x77, &chunks, &rpc).unwrap();
    let h = parse(&out[..n]);
    assert_eq!(
        (h.header_type(), h.inv_handle(), h.chunk_lists(), h.payload()),
        (HeaderType::CallInline, Some(0x77), chunks, &rpc[..])
    );
    assert_eq!(h.header_len(), call_inline_header_len(&chunks));

    let call = [XdrReadChunk { position: 0, target: seg(3, 4096) }];
    let n = call_external(&mut out, 9, 32, 0, List::from_slice(&call), &chunks).unwrap();
    let h = parse(&out[..n]);
    assert_eq!(
        (h.header_type(), h.call_chunk(), h.chunk_lists()),
        (HeaderType::CallExternal, List::from_slice(&call[..]), chunks)
    );

    for (of, kind) in [(MessageType::Call, HeaderType::CallMiddle), (MessageType::Reply, HeaderType::ReplyMiddle)] {
        let n = middle(&mut out, 9, 32, of, 4000, &rpc).unwrap();
        let h = parse(&out[..n]);
        assert_eq!((h.header_type(), h.remaining(), h.payload()), (kind, Some(4000), &rpc[..]));
    }

    let n = reply_inline(&mut out, 9, 32, List::from_slice(&writes), &rpc).unwrap();
    let h = parse(&out[..n]);
    assert_eq!(
        (h.header_type(), h.chunk_lists().writes, h.payload()),
        (HeaderType::ReplyInline, List::from_slice(&writes[..]), &rpc[..])
    );

    let n = reply_external(&mut out, 9, 32, List::from_slice(&[]), write).unwrap();
    let h = parse(&out[..n]);
    assert_eq!((h.header_type(), h.chunk_lists().reply), (HeaderType::ReplyExternal, Some(write)));

    let body =
        Rpcrdma2HdrError::Rdma2ErrWriteResource(Rpcrdma2ErrWrite { rdma_chunk_index: 1, rdma_length_needed: 900 });
    let n = error(&mut out, 9, 32, &body).unwrap();
    assert_eq!(parse(&out[..n]).error(), Some(body));
}

/// Section 6.3.2: "Senders MUST set the rdma_xid field to zero" in an RDMA2_GRANT.
#[test]
fn section_6_3_2_a_grant_carries_xid_zero_and_its_credit() {
    let mut out = [0xffu8; 32];
    let n = grant(&mut out, 77).unwrap();
    let h = parse(&out[..n]);
    assert_eq!((h.header_type(), h.xid(), h.credit(), n), (HeaderType::Grant, 0, 77, 16));
}

/// A Send buffer too small for the message: an error, nothing written past its end.
#[test]
fn a_buffer_too_small_is_an_error_not_a_panic() {
    let rpc = [7u8; 100];
    for len in 0..120 {
        let mut out = vec![0u8; len];
        let r = call_inline(&mut out, 1, 1, 0, &NO_CHUNKS, &rpc);
        assert_eq!(r.is_ok(), len >= 32 + 100, "{len}: {r:?}");
    }
}

proptest! {
    /// Section 4.1 from the sender's side: `sends` cuts a call of any length into Sends that
    /// each fit the peer's Receive, and the receiver's `Reassembly` gives back the call, with
    /// the final header's chunks and `rdma_inv_handle`.
    #[test]
    fn section_4_1_sends_fit_the_receive_and_reassemble(len in 4usize..30_000, receive_size in 64usize..8192) {
        let message: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let reads = [XdrReadChunk { position: 4, target: seg(1, 8) }];
        let chunks = ChunkLists { reads: List::from_slice(&reads), writes: List::from_slice(&[]), reply: None };
        let sends = sends(5, 32, 0x42, &chunks, &message, receive_size).unwrap();
        let mut r = Reassembly::new(1 << 20);
        for (i, s) in sends.iter().enumerate() {
            prop_assert!(s.len() <= receive_size);
            match r.receive(parse(s)) {
                Step::Held => prop_assert!(i + 1 < sends.len()),
                Step::Whole { header, message: got } => {
                    prop_assert_eq!(i + 1, sends.len());
                    prop_assert_eq!(&got[..], &message[..]);
                    prop_assert_eq!((header.inv_handle(), header.chunk_lists()), (Some(0x42), chunks));
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

/// A peer as a connection would drive the sans-I/O pieces: its credits, its reassembly, the
/// Sends it has ready (their `rdma_credit` stamped as each goes), and what it has received.
struct Peer {
    credits: CreditWindow,
    reassembly: Reassembly,
    outgoing: VecDeque<Vec<u8>>,
    whole: Vec<(u32, Vec<u8>)>,
    most_in_flight_to_it: usize,
}

impl Peer {
    fn new(advertised: u32) -> Peer {
        Peer {
            credits: CreditWindow::new(advertised).unwrap(),
            reassembly: Reassembly::new(1 << 20),
            outgoing: VecDeque::new(),
            whole: Vec::new(),
            most_in_flight_to_it: 0,
        }
    }

    /// Posts its next Send onto `wire` if its credits allow, else a GRANT if one is due and
    /// allowed; false when it posted nothing.
    fn post(&mut self, wire: &mut VecDeque<Vec<u8>>) -> bool {
        let message = if self.credits.may_send() && !self.outgoing.is_empty() {
            let mut m = self.outgoing.pop_front().unwrap();
            m[8..12].copy_from_slice(&self.credits.send().to_be_bytes());
            m
        } else if self.credits.grant_due() && self.credits.may_send_grant() {
            let mut g = [0u8; 16];
            grant(&mut g, self.credits.send()).unwrap();
            g.to_vec()
        } else {
            return false;
        };
        wire.push_back(message);
        true
    }

    /// Receives the next Send from `wire`: counts it, reassembles it, keeps a whole message.
    fn receive(&mut self, wire: &mut VecDeque<Vec<u8>>) {
        self.most_in_flight_to_it = self.most_in_flight_to_it.max(wire.len());
        let Some(m) = wire.pop_front() else { return };
        let h = parse(&m);
        self.credits.received(h.credit()).unwrap();
        match self.reassembly.receive(h) {
            Step::Whole { header, message } => self.whole.push((header.xid(), message.into_owned())),
            Step::Held | Step::Other(_) => {}
            other => panic!("{other:?}"),
        }
    }
}

/// Sends `message` as `of`, continued across Sends of `receive` bytes.
fn continued(xid: u32, of: MessageType, message: &[u8], receive: usize) -> Vec<Vec<u8>> {
    let room = receive - MIDDLE_HEADER_LEN;
    let parts = rpcrdma_v2::draft07::continuation::split(message.len(), room, room).unwrap();
    parts
        .into_iter()
        .map(|p| {
            let mut out = vec![0u8; receive];
            let part = &message[p.bytes];
            let n = match (p.remaining, of) {
                (Some(rem), _) => middle(&mut out, xid, 0, of, rem, part),
                (None, MessageType::Call) => call_inline(&mut out, xid, 0, 0, &NO_CHUNKS, part),
                (None, MessageType::Reply) => reply_inline(&mut out, xid, 0, List::from_slice(&[]), part),
            }
            .unwrap();
            out.truncate(n);
            out
        })
        .collect()
}

proptest! {
    /// The pieces together, under any schedule: a requester sends three calls of 10,000
    /// bytes, each continued across 4096-byte Sends, to a responder advertising 4 credits; the
    /// responder answers each with a reply of the call's own bytes, continued the same way;
    /// each side bursts all its credits allow, and sends a GRANT when one is due and it has
    /// nothing else to send. In whatever order the two sides post and receive, every call is
    /// answered with its own bytes, no more Sends are ever in flight towards a side than the
    /// Receives it keeps posted, no message is refused, and nothing deadlocks.
    #[test]
    fn two_peers_exchange_continued_calls_within_their_credits(schedule in proptest::collection::vec(0u8..4, 64)) {
        const RECEIVE: usize = 4096;
        let (mut requester, mut responder) = (Peer::new(4), Peer::new(4));
        let (mut to_responder, mut to_requester) = (VecDeque::new(), VecDeque::new());
        let calls: Vec<Vec<u8>> = (0..3u32).map(|x| (0..10_000u32).map(|i| (i + x) as u8).collect()).collect();
        for (x, call) in calls.iter().enumerate() {
            requester.outgoing.extend(continued(x as u32 + 1, MessageType::Call, call, RECEIVE));
        }
        let mut rounds = 0;
        while requester.whole.len() < calls.len() {
            rounds += 1;
            prop_assert!(rounds < 10_000, "deadlock: {} of {} calls answered", requester.whole.len(), calls.len());
            // The schedule, over and over: who acts next.
            match schedule[rounds % schedule.len()] {
                0 => while requester.post(&mut to_responder) {},
                1 => while responder.post(&mut to_requester) {},
                2 => responder.receive(&mut to_responder),
                _ => requester.receive(&mut to_requester),
            }
            // Each whole call the responder got is answered: its bytes back, continued.
            for (xid, call) in std::mem::take(&mut responder.whole) {
                responder.outgoing.extend(continued(xid, MessageType::Reply, &call, RECEIVE));
            }
            // A schedule that starves one side still ends: every fourth round all act.
            if rounds % 4 == 0 {
                while requester.post(&mut to_responder) {}
                while responder.post(&mut to_requester) {}
                responder.receive(&mut to_responder);
                requester.receive(&mut to_requester);
            }
        }
        for (xid, reply) in &requester.whole {
            prop_assert_eq!(reply, &calls[*xid as usize - 1], "xid {}'s reply", xid);
        }
        // Each side keeps 5 Receives posted (4 credits and one for a GRANT).
        prop_assert!(responder.most_in_flight_to_it <= responder.credits.receives_to_post() as usize);
        prop_assert!(requester.most_in_flight_to_it <= requester.credits.receives_to_post() as usize);
    }
}
