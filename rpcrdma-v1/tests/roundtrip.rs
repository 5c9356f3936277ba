//! Round trips of every generated v1 type (RFC 8166 section 4.2).

#[path = "../../xdr-spec/tests/support/mod.rs"]
#[macro_use]
mod support;

use proptest::prelude::*;
use rpcrdma_v1::rt::{List, Seq, Xdr};
use rpcrdma_v1::xdr::*;

roundtrip_props! {
    xdr_rdma_segment: XdrRdmaSegment,
    xdr_read_chunk: XdrReadChunk,
    xdr_read_list: XdrReadList<'_>,
    xdr_write_chunk: XdrWriteChunk<'_>,
    xdr_write_list: XdrWriteList<'_>,
    rpc_rdma_header: RpcRdmaHeader<'_>,
    rpc_rdma_header_nomsg: RpcRdmaHeaderNomsg<'_>,
    rpc_rdma_header_padded: RpcRdmaHeaderPadded<'_>,
    rpc_rdma_errcode: RpcRdmaErrcode,
    rpc_rdma_errvers: RpcRdmaErrvers,
    rpc_rdma_error: RpcRdmaError,
    rdma_proc: RdmaProc,
    rdma_body: RdmaBody<'_>,
    rdma_msg: RdmaMsg<'_>,
}

fn seg(h: u32, l: u32, o: u64) -> XdrRdmaSegment {
    XdrRdmaSegment { handle: h, length: l, offset: o }
}

#[test]
fn every_procedure_round_trips() {
    let reads = [XdrReadChunk { position: 96, target: seg(0x11, 4096, 0x1000) }];
    let w1 = [seg(0x21, 8192, 0x2000), seg(0x22, 8192, 0x4000)];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&w1) }];
    let reply = XdrWriteChunk { target: Seq::from_slice(&w1[..1]) };
    let lists = RpcRdmaHeader {
        rdma_reads: List::from_slice(&reads),
        rdma_writes: List::from_slice(&writes),
        rdma_reply: Some(reply),
    };
    let nomsg = RpcRdmaHeaderNomsg {
        rdma_reads: lists.rdma_reads,
        rdma_writes: lists.rdma_writes,
        rdma_reply: lists.rdma_reply,
    };
    let padded = RpcRdmaHeaderPadded {
        rdma_align: 4,
        rdma_thresh: 1024,
        rdma_reads: lists.rdma_reads,
        rdma_writes: List::default(),
        rdma_reply: None,
    };
    let bodies = [
        RdmaBody::RdmaMsg(lists),
        RdmaBody::RdmaNomsg(nomsg),
        RdmaBody::RdmaMsgp(padded),
        RdmaBody::RdmaDone,
        RdmaBody::RdmaError(RpcRdmaError::ErrVers(RpcRdmaErrvers { rdma_vers_low: 1, rdma_vers_high: 1 })),
        RdmaBody::RdmaError(RpcRdmaError::ErrChunk),
    ];
    for body in bodies {
        let msg = RdmaMsg { rdma_xid: 0x0102_0304, rdma_vers: 1, rdma_credit: 32, rdma_body: body };
        let bytes = roundtrip!(RdmaMsg<'_>, msg);
        assert_eq!(&bytes[..12], &[1, 2, 3, 4, 0, 0, 0, 1, 0, 0, 0, 32]);
    }
}

#[test]
fn chunked_header_is_112_bytes_and_views_are_lazy() {
    let reads = [XdrReadChunk { position: 96, target: seg(0x11, 4096, 0x1000) }];
    let w1 = [seg(0x21, 8192, 0x2000), seg(0x22, 8192, 0x4000)];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&w1) }];
    let msg = RdmaMsg {
        rdma_xid: 7,
        rdma_vers: 1,
        rdma_credit: 32,
        rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
            rdma_reads: List::from_slice(&reads),
            rdma_writes: List::from_slice(&writes),
            rdma_reply: Some(XdrWriteChunk { target: Seq::from_slice(&w1[..1]) }),
        }),
    };
    let bytes = roundtrip!(RdmaMsg<'_>, msg);
    assert_eq!(bytes.len(), 112);
    let (back, _) = RdmaMsg::decode(&bytes).unwrap();
    let RdmaBody::RdmaMsg(h) = back.rdma_body else { panic!("not RDMA_MSG") };
    // The decoded lists are views over the received bytes.
    assert_eq!(h.rdma_reads.wire_bytes().map(<[u8]>::len), Some(4 + 20 + 4));
    let w = h.rdma_writes.iter().next().unwrap();
    assert_eq!(w.target.get(1), Some(w1[1]));
    assert_eq!(w.target.wire_bytes().unwrap().as_ptr(), bytes[52..].as_ptr());
}
