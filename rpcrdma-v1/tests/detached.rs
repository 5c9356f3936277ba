//! A validated header detached from its bytes (`Header::detach`) and laid over them again
//! after they moved (`Detached::attach`) is the view the parse gave, for every shape of the
//! three chunk lists (RFC 8166 section 4.2), without a second parse.

use proptest::prelude::*;
use rpcrdma_v1::header::{Header, HeaderLimits};
use rpcrdma_v1::rt::{List, Seq, Xdr};
use rpcrdma_v1::xdr::*;

fn seg(h: u32, l: u32, o: u64) -> XdrRdmaSegment {
    XdrRdmaSegment { handle: h, length: l, offset: o }
}

/// An RDMA_MSG with `reads` Read chunks, `writes` Write chunks of `segs` segments each, an
/// optional Reply chunk, then an RPC message of `words` words whose XID is the header's: a
/// call when it has Read chunks (a reply has none: RFC 8166 section 3.4.5), else a reply.
fn message(reads: usize, writes: usize, segs: usize, reply: bool, words: usize) -> Vec<u8> {
    let xid = 0x1234_5678;
    let read_chunks: Vec<_> =
        (0..reads).map(|i| XdrReadChunk { position: 8 + 4 * i as u32, target: seg(i as u32, 4, 0x1000) }).collect();
    let write_segs: Vec<_> = (0..segs).map(|i| seg(0x20 + i as u32, 4096, 0x2000 * i as u64)).collect();
    let write_chunks: Vec<_> = (0..writes).map(|_| XdrWriteChunk { target: Seq::from_slice(&write_segs) }).collect();
    let body = RpcRdmaHeader {
        rdma_reads: List::from_slice(&read_chunks),
        rdma_writes: List::from_slice(&write_chunks),
        rdma_reply: reply.then(|| XdrWriteChunk { target: Seq::from_slice(&write_segs[..1]) }),
    };
    let msg = RdmaMsg { rdma_xid: xid, rdma_vers: 1, rdma_credit: 32, rdma_body: RdmaBody::RdmaMsg(body) };
    let mut bytes = msg.to_vec().unwrap();
    bytes.extend(xid.to_be_bytes());
    bytes.extend(u32::from(reads == 0).to_be_bytes());
    bytes.extend(std::iter::repeat_n(0xa5, 4 * words.saturating_sub(2)));
    bytes
}

proptest! {
    #[test]
    fn a_detached_header_attaches_to_its_moved_bytes_as_the_view_the_parse_gave(
        reads in 0usize..4,
        writes in 0usize..3,
        segs in 1usize..4,
        reply in any::<bool>(),
        words in 2usize..12,
    ) {
        let bytes = message(reads, writes, segs, reply, words);
        let limits = HeaderLimits::default();
        let detached = Header::parse(&bytes, &limits).unwrap().detach();
        // The bytes move (to another buffer, as they do to a caller's thread).
        let moved = bytes.clone();
        drop(bytes);
        let attached = detached.attach(&moved).expect("same length");
        let parsed = Header::parse(&moved, &limits).unwrap();
        prop_assert_eq!(attached, parsed);
        prop_assert_eq!(attached.write_list().iter().map(|w| w.target.len()).sum::<usize>(), writes * segs);
        prop_assert_eq!(attached.read_chunks().count(), reads);
        prop_assert_eq!(attached.reply_chunk().is_some(), reply);
        prop_assert_eq!(detached.xid(), 0x1234_5678);
    }
}

#[test]
fn a_detached_header_refuses_bytes_of_another_length() {
    let bytes = message(1, 1, 2, true, 4);
    let detached = Header::parse(&bytes, &HeaderLimits::default()).unwrap().detach();
    assert!(detached.attach(&bytes[..bytes.len() - 4]).is_none());
    assert!(detached.attach(&[bytes.as_slice(), &[0; 4]].concat()).is_none());
}

#[test]
fn a_detached_header_over_other_bytes_of_its_length_is_safe() {
    // Wrong, but never a panic: a view over bytes it was not detached from decodes what it can.
    let bytes = message(2, 2, 3, true, 4);
    let detached = Header::parse(&bytes, &HeaderLimits::default()).unwrap().detach();
    for fill in [0x00, 0xff, 0x5a] {
        let other = vec![fill; bytes.len()];
        let h = detached.attach(&other).expect("same length");
        let _ = (h.read_chunks().count(), h.write_list().iter().count(), h.reply_chunk().map(|r| r.target.len()));
    }
}
