//! The seam's premise: Version Two's `rpcrdma2_chunk_lists` (draft section
//! 4.2) has Version One's wire shape, so Version One's decoder reads what
//! Version Two's generated encoder writes, segment for segment.

use proptest::prelude::*;
use rpcrdma_v1::header::{Header, HeaderLimits, MessageKind};
use rpcrdma_v2::rt::{List, Seq, Xdr};
use rpcrdma_v2::xdr::*;

fn seg() -> impl Strategy<Value = Rpcrdma2Segment> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(h, l, o)| Rpcrdma2Segment {
        rdma_handle: h,
        rdma_length: l,
        rdma_offset: o,
    })
}

proptest! {
    #[test]
    fn v2_chunk_lists_decode_as_v1(
        reads in prop::collection::vec((any::<u32>(), seg()), 0..5),
        writes in prop::collection::vec(prop::collection::vec(seg(), 0..4), 0..4),
        reply in prop::option::of(prop::collection::vec(seg(), 0..4)),
    ) {
        let reads: Vec<_> = reads.into_iter().map(|(p, s)| Rpcrdma2ReadSegment { rdma_position: p, rdma_target: s }).collect();
        let writes: Vec<_> = writes.iter().map(|w| Rpcrdma2WriteChunk { rdma_target: Seq::from_slice(w) }).collect();
        let lists = Rpcrdma2ChunkLists {
            rdma_reads: List::from_slice(&reads),
            rdma_writes: List::from_slice(&writes),
            rdma_reply: reply.as_deref().map(|r| Rpcrdma2WriteChunk { rdma_target: Seq::from_slice(r) }),
        };
        let hdr = Rpcrdma2XprtHdr { rdma_xid: 1, rdma_vers: 2, rdma_credit: 1, rdma_body: Rpcrdma2Body::RdmaNomsg(lists) };
        let bytes = hdr.to_vec().unwrap();
        let limits = HeaderLimits::unlimited();
        // The chunk rules may refuse the lists (positions, NOMSG without a
        // chunk); what matters is that the decoder reads exactly them.
        let (v1, n) = rpcrdma_v1::xdr::RdmaMsg::decode(&bytes).unwrap();
        prop_assert_eq!(n, bytes.len());
        let rpcrdma_v1::xdr::RdmaBody::RdmaNomsg(v1) = v1.rdma_body else { panic!() };
        prop_assert!(v1.rdma_reads.iter().map(|r| (r.position, r.target.handle, r.target.length, r.target.offset))
            .eq(reads.iter().map(|r| (r.rdma_position, r.rdma_target.rdma_handle, r.rdma_target.rdma_length, r.rdma_target.rdma_offset))));
        prop_assert!(v1.rdma_writes.iter().map(|w| w.target.len()).eq(writes.iter().map(|w| w.rdma_target.len())));
        prop_assert_eq!(v1.rdma_reply.map(|r| r.target.len()), reply.as_ref().map(Vec::len));
        if let Ok(h) = Header::parse_chunk_lists(&bytes, MessageKind::NoMsg, &limits) {
            prop_assert_eq!(h.header_len(), bytes.len());
            prop_assert_eq!(h.read_list().len(), reads.len());
        }
    }
}
