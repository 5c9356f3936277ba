//! What a reply can make a Requester reserve while reassembling it: only what has been checked
//! against memory the Requester holds (the reduced stream and its own Write chunk buffers),
//! never a length the reply's own words claim. The input is the one the `reassembly` fuzz
//! target found asking for 2,258,829,326 bytes (issue 26), kept as a seed in
//! fuzz/seeds/reassembly/issue26_reply_claims_2gib.

use rpcrdma_v1::header::chunk_len;
use rpcrdma_v1::reassemble::reassemble_reply_with_ulb;
use rpcrdma_v1::rt::Xdr;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg};

const CLAIMS_2GIB: &str = "00000007ffff000100000020000000000000000100000060000000110000107100400000000010000000000000000001000000020000002100002000000000000000200000000022000020003a0000000000400000000000000000000002000186a30000000300000000";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn rfc8166_3_4_6_1_a_reply_cannot_make_the_requester_reserve_what_it_claims() {
    let data = unhex(CLAIMS_2GIB);
    let (msg, header_len) = RdmaMsg::decode(&data).unwrap();
    let writes = match msg.rdma_body {
        RdmaBody::RdmaMsg(h) => h.rdma_writes,
        _ => unreachable!("the input is an RDMA_MSG"),
    };
    // The buffers the Requester registered for its Write chunks, as the fuzz target makes them.
    let bufs: Vec<Vec<u8>> = writes.iter().map(|w| vec![7; chunk_len(&w) as usize]).collect();
    let held: usize = bufs.iter().map(Vec::len).sum::<usize>() + data.len();
    let refs: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(4), max_result: 1 << 20, max_reply: 1 << 20 };
    let (mut results, mut out) = (Vec::new(), Vec::new());
    let got = reassemble_reply_with_ulb(&[], &msg, &data[header_len..], &[], &refs, &ulb, &mut results, &mut out);
    // The ULB located a result whose length word claims gigabytes; it does not match what
    // the Write chunk returned, so the reply is refused, having reserved nothing.
    assert!(results.iter().any(|r| r.len > 1 << 30), "the input claims a result of over 1 GiB: {results:?}");
    assert!(got.is_err(), "{got:?}");
    assert!(out.capacity() <= 4 * held, "reserved {} bytes for a reply whose memory is {held}", out.capacity());
}

/// RFC 8166 section 3.4.6: a result of length zero (an NFS READ of count 0) in a Write chunk
/// that returned zero bytes reassembles, whether or not the Requester registered a buffer for
/// it (a buffer of zero bytes is no buffer): nothing is to be read from it.
#[test]
fn rfc8166_3_4_6_an_empty_result_in_a_chunk_that_returned_nothing_reassembles() {
    use rpcrdma_v1::reassemble::reassemble_reply;
    use rpcrdma_v1::rt::{List, Seq};
    use rpcrdma_v1::ulb::DdpItem;
    use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrWriteChunk};
    let seg = [XdrRdmaSegment { handle: 1, length: 0, offset: 0x1000 }];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&seg) }];
    // XID, REPLY, then the result's length word (0), the result in the chunk.
    let reduced = [0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0];
    let mut out = Vec::new();
    for bufs in [&[][..], &[&[][..]][..]] {
        reassemble_reply(&reduced, List::from_slice(&writes), &[DdpItem::new(12, 0)], bufs, &mut out).unwrap();
        assert_eq!(out, reduced);
    }
}
