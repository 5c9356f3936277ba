//! The rpcgen + libtirpc harness checked on itself: the two encodings known
//! from ORACLES.md, the chunked benchmark header, and the canonical text in
//! both directions.  Without rpcgen/libtirpc it prints a SKIP line and
//! passes, except under `CI=true`, where a missing oracle fails.

use std::path::Path;
use std::time::Instant;

use interop_tests::oracle::{canonical_from_peer, Harness};
use interop_tests::{
    peer_chunked_msg, peer_encode, peer_err_vers_msg, peer_plain_msg, ERR_VERS_BYTES, PLAIN_MSG_BYTES,
};

const PLAIN: &str = "xid=16909060 vers=1 credit=32 proc=0 reads=[] writes=[] reply=none";
const ERR_VERS: &str = "xid=16909060 vers=1 credit=32 proc=4 err=1 low=1 high=1";
const CHUNKED: &str = "xid=16909060 vers=1 credit=32 proc=0 reads=[96,17,4096,4096] \
    writes=[[33,4096,8192;34,4096,12288]] reply=[49,4096,16384]";

fn harness() -> Option<Harness> {
    Harness::v1_or_skip(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

#[test]
fn plain_rdma_msg() {
    let Some(mut h) = harness() else { return };
    assert_eq!(h.encode(PLAIN).unwrap(), PLAIN_MSG_BYTES);
    assert_eq!(h.decode(&PLAIN_MSG_BYTES).unwrap(), PLAIN);
    assert_eq!(canonical_from_peer(&peer_plain_msg()), PLAIN);
}

#[test]
fn err_vers() {
    let Some(mut h) = harness() else { return };
    assert_eq!(h.encode(ERR_VERS).unwrap(), ERR_VERS_BYTES);
    assert_eq!(h.decode(&ERR_VERS_BYTES).unwrap(), ERR_VERS);
    assert_eq!(canonical_from_peer(&peer_err_vers_msg()), ERR_VERS);
}

#[test]
fn chunked_header_agrees_with_the_xdrgen_peer() {
    let Some(mut h) = harness() else { return };
    let peer = peer_encode(&peer_chunked_msg());
    assert_eq!(canonical_from_peer(&peer_chunked_msg()), CHUNKED);
    assert_eq!(h.encode(CHUNKED).unwrap(), peer);
    assert_eq!(h.encode(CHUNKED).unwrap().len(), 112);
    let mut with_body = peer.clone();
    with_body.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(h.decode_prefix(&with_body).unwrap(), (112, CHUNKED.to_string()));
}

#[test]
fn every_proc_round_trips() {
    let Some(mut h) = harness() else { return };
    for text in [
        "xid=0 vers=4294967295 credit=0 proc=1 reads=[0,1,2,18446744073709551615;4,5,6,7] writes=[] reply=[]",
        "xid=1 vers=1 credit=1 proc=0 reads=[] writes=[[];[1,2,3]] reply=none",
        "xid=1 vers=1 credit=1 proc=2 align=4 thresh=1024 reads=[] writes=[] reply=[1,2,3;4,5,6]",
        "xid=1 vers=1 credit=1 proc=3",
        "xid=1 vers=1 credit=1 proc=4 err=2",
    ] {
        let bytes = h.encode(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(h.decode(&bytes).unwrap(), text);
    }
}

#[test]
fn rejections_are_errors_not_crashes() {
    let Some(mut h) = harness() else { return };
    // No union arm: rpcgen fails to encode or decode.
    assert!(h.encode("xid=1 vers=1 credit=1 proc=5").is_err());
    assert!(h.encode("xid=1 vers=1 credit=1 proc=4 err=3").is_err());
    let mut proc5 = PLAIN_MSG_BYTES;
    proc5[15] = 5;
    assert!(h.decode(&proc5).is_err());
    // Bad canonical text.
    assert!(h.encode("xid=01 vers=1 credit=1 proc=3").is_err());
    assert!(h.encode("xid=4294967296 vers=1 credit=1 proc=3").is_err());
    assert!(h.encode("xid=1 vers=1 credit=1 proc=3 extra").is_err());
    // Truncations, and a 28-byte header claiming 0xffffffff write segments.
    for len in 0..PLAIN_MSG_BYTES.len() {
        assert!(h.decode(&PLAIN_MSG_BYTES[..len]).is_err(), "{len}-byte prefix decoded");
    }
    let hostile: Vec<u8> = [0x0102_0304u32, 1, 32, 0, 0, 1, 0xffff_ffff].iter().flat_map(|w| w.to_be_bytes()).collect();
    assert!(h.decode(&hostile).is_err());
    // Still alive.
    assert_eq!(h.decode(&PLAIN_MSG_BYTES).unwrap(), PLAIN);
}

#[test]
fn ten_thousand_round_trips_are_quick() {
    let Some(mut h) = harness() else { return };
    let start = Instant::now();
    for _ in 0..5_000 {
        let bytes = h.encode(CHUNKED).unwrap();
        assert_eq!(h.decode(&bytes).unwrap(), CHUNKED);
    }
    let took = start.elapsed();
    println!("10,000 harness requests took {took:?}");
    assert!(took.as_secs() < 10, "10,000 harness requests took {took:?}");
}
