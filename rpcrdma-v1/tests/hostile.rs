//! Hostile input against the generated v1 decoder: nothing a peer sends may
//! make it allocate beyond the input's size, recurse on a peer-chosen depth,
//! or panic. A counting allocator measures the allocations.

use rpcrdma_v1::rt::{Error, Limits, List, Seq, Xdr};
use rpcrdma_v1::xdr::*;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{counted, serial};

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The benchmark's chunked RDMA_MSG: a read chunk, a 2-segment write chunk
/// and a reply chunk (112 bytes).
fn chunked() -> Vec<u8> {
    words(&[
        7, 1, 32, 0, // xid, vers, credit, RDMA_MSG
        1, 96, 0x11, 4096, 0, 0x1000, 0, // read list: one read segment
        1, 2, 0x21, 8192, 0, 0x2000, 0x22, 8192, 0, 0x4000, 0, // write list: one 2-segment chunk
        1, 1, 0x31, 65536, 0, 0x8000, // reply chunk
    ])
}

#[test]
fn huge_write_chunk_count_is_refused_without_allocating() {
    let _g = serial();
    // 28 bytes: xid, vers, credit, RDMA_MSG, no reads, one write chunk that
    // claims 0xffffffff segments.
    let bytes = words(&[1, 1, 1, 0, 0, 1, 0xffff_ffff]);
    assert_eq!(bytes.len(), 28);
    let (r, calls, allocated) = counted(|| RdmaMsg::decode(&bytes).map(|(m, n)| (m.rdma_xid, n)));
    assert_eq!(
        r,
        Err(Error::CountExceedsInput { what: "xdr_write_chunk.target", count: u32::MAX, remaining: 0, at: 24 })
    );
    assert_eq!((calls, allocated), (0, 0), "decoding hostile counts must not allocate");
}

#[test]
fn decode_and_encode_allocate_nothing() {
    let _g = serial();
    let bytes = chunked();
    let mut out = [0u8; 256];
    let ((), calls, _) = counted(|| {
        let (msg, n) = RdmaMsg::decode(&bytes).unwrap();
        assert_eq!(n, 112);
        let RdmaBody::RdmaMsg(h) = msg.rdma_body else { panic!("not RDMA_MSG") };
        let segs: u32 = h.rdma_writes.iter().map(|w| w.target.iter().map(|s| s.length).sum::<u32>()).sum();
        assert_eq!(segs, 16384);
        assert_eq!(h.rdma_reads.iter().next().map(|c| c.position), Some(96));
        assert_eq!(msg.encode(&mut out), Ok(112));
        // Encoding a header built from the caller's own values.
        let seg = [XdrRdmaSegment { handle: 1, length: 2, offset: 3 }];
        let reply = XdrWriteChunk { target: Seq::from_slice(&seg) };
        let built = RdmaMsg {
            rdma_xid: 1,
            rdma_vers: 1,
            rdma_credit: 1,
            rdma_body: RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg {
                rdma_reads: List::default(),
                rdma_writes: List::default(),
                rdma_reply: Some(reply),
            }),
        };
        assert_eq!(built.encode(&mut out), Ok(48));
    });
    assert_eq!(&out[..4], &[0, 0, 0, 1]);
    assert_eq!(calls, 0, "the header codec must not allocate");
}

#[test]
fn a_100000_entry_read_list_decodes_without_recursion() {
    let _g = serial();
    let mut ws = vec![1, 1, 1, 0];
    for i in 0..100_000u32 {
        ws.extend_from_slice(&[1, i * 4, i, 8, 0, 0]);
    }
    ws.extend_from_slice(&[0, 0, 0]);
    let bytes = words(&ws);
    // A 64 KiB stack: recursion per entry would overflow it many times over.
    let handle = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            let (msg, n) = RdmaMsg::decode(&bytes).unwrap();
            let RdmaBody::RdmaMsg(h) = msg.rdma_body else { panic!("not RDMA_MSG") };
            let last = h.rdma_reads.iter().last().map(|c| c.target.handle);
            let limited = RdmaMsg::decode_with_limits(&bytes, Limits::default().max_list_entries(16)).err();
            (n == bytes.len(), h.rdma_reads.len(), last, limited)
        })
        .unwrap();
    let (all, len, last, limited) = handle.join().unwrap();
    assert!(all);
    assert_eq!((len, last), (100_000, Some(99_999)));
    assert!(matches!(limited, Some(Error::LimitExceeded { limit: 16, .. })));
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let _g = serial();
    let bytes = chunked();
    for cut in 0..bytes.len() {
        let r = RdmaMsg::decode(&bytes[..cut]);
        assert!(matches!(r, Err(Error::Truncated { .. } | Error::CountExceedsInput { .. })), "cut at {cut}: {r:?}");
    }
    assert!(RdmaMsg::decode(&bytes).is_ok());
}

#[test]
fn bad_booleans_and_procedures_are_errors() {
    let _g = serial();
    let bad_bool = words(&[1, 1, 1, 0, 2, 0, 0]);
    assert_eq!(RdmaMsg::decode(&bad_bool).unwrap_err(), Error::BadBool { value: 2, at: 16 });
    for proc in [5u32, 6, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
        let b = words(&[1, 1, 1, proc, 0, 0, 0]);
        // The error names the discriminant word's offset, after xid, vers and credit.
        assert!(
            matches!(RdmaMsg::decode(&b), Err(Error::BadDiscriminant { type_name: "rdma_body", at: 12, .. })),
            "{proc}"
        );
    }
}

#[test]
fn the_counting_allocator_sees_allocations() {
    let _g = serial();
    let ((), calls, bytes) = counted(|| drop(std::hint::black_box(vec![0u8; 100])));
    assert_eq!((calls, bytes), (1, 100), "the counter must be live, or the zero-allocation tests prove nothing");
}
