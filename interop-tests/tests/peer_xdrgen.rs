//! The xdrgen 0.4.4 peer on the benchmark headers: bytes known from rpcgen +
//! libtirpc, round trips, and the chunked header's 112-byte shape.

use interop_tests::peer_xdrgen::{rdma_body, rpc_rdma_error};
use interop_tests::{
    peer_chunked_msg, peer_decode, peer_encode, peer_err_vers_msg, peer_plain_msg, CHUNKED_MSG_LEN, ERR_VERS_BYTES,
    PLAIN_MSG_BYTES,
};

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks(4).map(|w| u32::from_be_bytes(w.try_into().unwrap())).collect()
}

#[test]
fn plain_rdma_msg_matches_rpcgen_bytes() {
    let bytes = peer_encode(&peer_plain_msg());
    assert_eq!(words(&bytes), [0x0102_0304, 1, 0x20, 0, 0, 0, 0]);
    assert_eq!(bytes, PLAIN_MSG_BYTES);
    let (m, n) = peer_decode(&bytes).unwrap();
    assert_eq!(n, 28);
    assert_eq!(peer_encode(&m), bytes);
    assert!(matches!(m.rdma_body, rdma_body::RDMA_MSG(ref h)
        if h.rdma_reads.is_none() && h.rdma_writes.is_none() && h.rdma_reply.is_none()));
}

#[test]
fn err_vers_matches_rpcgen_bytes() {
    let bytes = peer_encode(&peer_err_vers_msg());
    assert_eq!(words(&bytes), [0x0102_0304, 1, 0x20, 4, 1, 1, 1]);
    assert_eq!(bytes, ERR_VERS_BYTES);
    let (m, n) = peer_decode(&bytes).unwrap();
    assert_eq!(n, 28);
    match m.rdma_body {
        rdma_body::RDMA_ERROR(rpc_rdma_error::ERR_VERS(v)) => {
            assert_eq!((v.rdma_vers_low, v.rdma_vers_high), (1, 1));
        }
        _ => panic!("not ERR_VERS"),
    }
}

#[test]
fn chunked_header_is_112_bytes_with_the_expected_layout() {
    let bytes = peer_encode(&peer_chunked_msg());
    assert_eq!(bytes.len(), CHUNKED_MSG_LEN);
    assert_eq!(bytes.len(), 112);
    #[rustfmt::skip]
    let expected: [u32; 28] = [
        0x0102_0304, 1, 32, 0,              // xid, vers, credit, RDMA_MSG
        1, 96, 0x11, 4096, 0, 0x1000,       // read list: present, position, handle, length, offset (hi, lo)
        0,                                  // end of read list
        1, 2,                               // write list: present; write chunk of 2 segments
        0x21, 4096, 0, 0x2000,
        0x22, 4096, 0, 0x3000,
        0,                                  // end of write list
        1, 1, 0x31, 4096, 0, 0x4000,        // reply chunk: present, 1 segment
    ];
    assert_eq!(words(&bytes), expected);
    let (m, n) = peer_decode(&bytes).unwrap();
    assert_eq!(n, 112);
    assert_eq!(peer_encode(&m), bytes);
}

#[test]
fn decode_ignores_what_follows_the_header() {
    let mut bytes = peer_encode(&peer_chunked_msg());
    bytes.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let (_, n) = peer_decode(&bytes).unwrap();
    assert_eq!(n, 112);
}

#[test]
fn truncated_headers_are_errors() {
    let bytes = peer_encode(&peer_chunked_msg());
    for len in 0..bytes.len() {
        assert!(peer_decode(&bytes[..len]).is_err(), "{len}-byte prefix decoded");
    }
}

#[test]
fn unknown_proc_is_an_error() {
    let mut bytes = PLAIN_MSG_BYTES;
    bytes[15] = 5;
    assert!(peer_decode(&bytes).is_err());
}
