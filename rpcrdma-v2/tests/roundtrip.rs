//! Round trips of every generated v2 type (draft section 4.2), and the
//! repaired, errata-corrected XDR they came from.

#[path = "../../xdr-spec/tests/support/mod.rs"]
#[macro_use]
mod support;

use proptest::prelude::*;
use rpcrdma_v2::rt::{List, Seq, Xdr};
use rpcrdma_v2::xdr::*;

roundtrip_props! {
    segment: Rpcrdma2Segment,
    read_segment: Rpcrdma2ReadSegment,
    read_list: Rpcrdma2ReadList<'_>,
    write_chunk: Rpcrdma2WriteChunk<'_>,
    write_list: Rpcrdma2WriteList<'_>,
    chunk_lists: Rpcrdma2ChunkLists<'_>,
    errcode: Rpcrdma2Errcode,
    err_vers: Rpcrdma2ErrVers,
    error: Rpcrdma2Error,
    optional: Rpcrdma2Optional<'_>,
    proc_: Rpcrdma2Proc,
    body: Rpcrdma2Body<'_>,
    xprt_hdr: Rpcrdma2XprtHdr<'_>,
}

#[test]
fn every_procedure_round_trips() {
    let seg = Rpcrdma2Segment { rdma_handle: 1, rdma_length: 2, rdma_offset: 3 };
    let reads = [Rpcrdma2ReadSegment { rdma_position: 0, rdma_target: seg }];
    let segs = [seg, seg];
    let writes = [Rpcrdma2WriteChunk { rdma_target: Seq::from_slice(&segs) }];
    let chunks = Rpcrdma2ChunkLists {
        rdma_reads: List::from_slice(&reads),
        rdma_writes: List::from_slice(&writes),
        rdma_reply: Some(Rpcrdma2WriteChunk { rdma_target: Seq::from_slice(&segs[..1]) }),
    };
    let bodies = [
        Rpcrdma2Body::RdmaMsg(chunks),
        Rpcrdma2Body::RdmaNomsg(chunks),
        Rpcrdma2Body::RdmaMsgp,
        Rpcrdma2Body::RdmaDone,
        Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrVers(Rpcrdma2ErrVers { rdma_vers_low: 1, rdma_vers_high: 2 })),
        Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrBadHeader),
        Rpcrdma2Body::RdmaError(Rpcrdma2Error::RdmaErrInvalOption),
        Rpcrdma2Body::RdmaOptional(Rpcrdma2Optional { rdma_opttype: 77, rdma_optinfo: b"abcde" }),
    ];
    for (proc, body) in bodies.into_iter().enumerate() {
        let hdr = Rpcrdma2XprtHdr { rdma_xid: 9, rdma_vers: 2, rdma_credit: 1, rdma_body: body };
        let bytes = roundtrip!(Rpcrdma2XprtHdr<'_>, hdr);
        let want = [0, 1, 2, 3, 4, 4, 4, 5][proc];
        assert_eq!(&bytes[12..16], &[0, 0, 0, want]);
    }
    assert_eq!((RDMA_OPTIONAL, RDMA_ERR_INVAL_OPTION), (5, 3));
}

#[test]
fn the_generated_xdr_records_its_repairs_and_errata() {
    assert!(rpcrdma_v2::XDR.contains("RDMA_OPTIONAL = 5"));
    assert!(rpcrdma_v2::XDR.contains("uint32 rdma_credit;"));
    assert!(!rpcrdma_v2::XDR.contains("rpcrdma2_chunks "));
    assert!(rpcrdma_v2::GENERATION_REPORT.contains("rpcrdma2_chunks with rpcrdma2_chunk_lists"));
    assert!(rpcrdma_v2::GENERATION_REPORT.contains("`RDMA OPTIONAL` -> `RDMA_OPTIONAL`"));
    assert!(rpcrdma_v2::GENERATION_REPORT.contains("swapped order"));
}
