//! The two benchmark headers built with our generated types, shared by the
//! codec benchmarks (`header_codec`, `codec_vs_rpcgen`), and a visitor that
//! reads every field of a decoded one.
//!
//! Both headers are the ones `interop_tests::peer_plain_msg` and
//! `interop_tests::peer_chunked_msg` build for the xdrgen peer; each bench
//! asserts that the encodings are the same bytes.

use interop_tests::{BENCH_CREDIT, BENCH_XID};
use rpcrdma_v1::rt::{List, Seq};
use rpcrdma_v1::xdr::*;

fn seg(handle: u32, offset: u64) -> XdrRdmaSegment {
    XdrRdmaSegment { handle, length: 4096, offset }
}

fn msg(body: RpcRdmaHeader<'static>) -> RdmaMsg<'static> {
    RdmaMsg { rdma_xid: BENCH_XID, rdma_vers: 1, rdma_credit: BENCH_CREDIT, rdma_body: RdmaBody::RdmaMsg(body) }
}

/// "plain": RDMA_MSG with no chunks, 28 bytes.
pub fn plain() -> RdmaMsg<'static> {
    msg(RpcRdmaHeader { rdma_reads: List::default(), rdma_writes: List::default(), rdma_reply: None })
}

/// "chunked", 112 bytes: a read chunk, a 2-segment write chunk and a reply
/// chunk, built from the caller's slices as a sender builds it (the lists
/// and arrays it borrows are leaked, a few bytes once per benchmark run).
pub fn chunked() -> RdmaMsg<'static> {
    let reads: &'static [XdrReadChunk] =
        Box::leak(Box::new([XdrReadChunk { position: 96, target: seg(0x11, 0x1000) }]));
    let w1: &'static [XdrRdmaSegment] = Box::leak(Box::new([seg(0x21, 0x2000), seg(0x22, 0x3000)]));
    let writes: &'static [XdrWriteChunk<'static>] =
        Box::leak(Box::new([XdrWriteChunk { target: Seq::from_slice(w1) }]));
    let reply: &'static [XdrRdmaSegment] = Box::leak(Box::new([seg(0x31, 0x4000)]));
    msg(RpcRdmaHeader {
        rdma_reads: List::from_slice(reads),
        rdma_writes: List::from_slice(writes),
        rdma_reply: Some(XdrWriteChunk { target: Seq::from_slice(reply) }),
    })
}

/// Sum every field of a decoded header, so that nothing is left unread.
pub fn visit(m: &RdmaMsg<'_>) -> u64 {
    let mut sum = u64::from(m.rdma_xid) + u64::from(m.rdma_vers) + u64::from(m.rdma_credit);
    let seg = |s: XdrRdmaSegment| u64::from(s.handle) + u64::from(s.length) + s.offset;
    if let RdmaBody::RdmaMsg(h) = m.rdma_body {
        sum += h.rdma_reads.iter().map(|c| u64::from(c.position) + seg(c.target)).sum::<u64>();
        sum += h.rdma_writes.iter().flat_map(|w| w.target.iter()).map(seg).sum::<u64>();
        sum += h.rdma_reply.map_or(0, |r| r.target.iter().map(seg).sum::<u64>());
    }
    sum
}
