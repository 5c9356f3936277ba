//! The XDR examples of draft-ietf-nfsv4-rfc5666bis section 5.7 (RFC 8166
//! section 4.7, "XDR Examples"), as tests.
//!
//! The rendering of the draft in `specs/rfc5666bis-draft-rpcrdma-v1.txt` lost
//! the section's figures (only one fragment, `1 2 HLOO HLOO`, survived); the
//! prose did. So the expected 32-bit words below are written by hand from that
//! prose and from the XDR of section 5.1.2, one comment per word:
//!
//! - "An RDMA segment is [...] a 32-bit handle (H), a 32-bit length (L), and
//!   64-bits of offset (OO)"; an XDR hyper is sent high word first (RFC 4506
//!   section 4.5), so every offset here has both words nonzero and different;
//! - "A Read segment has an additional 32-bit position field" (P), first;
//! - a Read chunk and the Read list: "Each segment is preceded by a 32-bit word
//!   containing a one if there is a segment, or a zero if there are no more
//!   segments (optional-data)"; "An empty Read List is encoded as a single
//!   32-bit zero";
//! - "One Write chunk is a counted array of segments [...] the count would
//!   appear as the first 32-bit word, followed by an HLOO for each element";
//! - "The Write List is a list of counted arrays [...] a combination of
//!   optional-data and counted arrays";
//! - "The Reply chunk is a Write chunk. Since it is an optional-data field,
//!   however, there is a 32-bit field in front of it that contains a one if the
//!   Reply chunk is present, or a zero if it is not";
//! - "Frequently a requester does not provide any chunks. In that case, after
//!   the four fixed fields in the RPC-over-RDMA header, there are simply three
//!   32-bit fields that contain zero."
//!
//! Each test builds the value with the generated types, encodes it with our
//! encoder and compares with the hand-written words, then decodes the
//! hand-written bytes and compares with the value.

use rpcrdma_v1::rt::{List, Seq, Xdr};
use rpcrdma_v1::xdr::*;

/// The big-endian bytes of hand-written words.
fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// Encode `value`, compare with `words`; decode `words`, compare with `value`,
/// and check the decoder took every byte.
fn check<'a, T: Xdr<'a> + PartialEq + std::fmt::Debug>(value: T, words: &[u32], wire: &'a [u8]) {
    assert_eq!(value.encoded_len(), words.len() * 4, "encoded length");
    let mut out = vec![0u8; words.len() * 4];
    let n = value.encode(&mut out).expect("encode");
    assert_eq!(n, out.len());
    let got: Vec<u32> = out.chunks(4).map(|w| u32::from_be_bytes(w.try_into().unwrap())).collect();
    assert_eq!(got, words, "our encoding against the hand-written words");

    let (back, used) = T::decode(wire).expect("decode the hand-written words");
    assert_eq!(used, wire.len(), "the decoder took every word");
    assert_eq!(back, value);
}

fn seg(handle: u32, length: u32, offset: u64) -> XdrRdmaSegment {
    XdrRdmaSegment { handle, length, offset }
}

/// "An RDMA segment is the simplest component, being made up of a 32-bit
/// handle (H), a 32-bit length (L), and 64-bits of offset (OO)": HLOO.
#[test]
fn example_4_7_segment_hloo() {
    let value = seg(0x11, 0x100, 0x1_0000_0002);
    let words: [u32; 4] = [
        0x11,  // H: handle
        0x100, // L: length
        0x1,   // O: offset, high word first
        0x2,   // O: offset, low word
    ];
    let wire = bytes(&words);
    check(value, &words, &wire);
}

/// "A Read segment has an additional 32-bit position field": PHLOO.
#[test]
fn example_4_7_read_segment_phloo() {
    let value = XdrReadChunk { position: 0x40, target: seg(0x11, 0x100, 0x1_0000_0002) };
    let words: [u32; 5] = [
        0x40,  // P: position in the XDR stream
        0x11,  // H: handle
        0x100, // L: length
        0x1,   // O: offset, high word
        0x2,   // O: offset, low word
    ];
    let wire = bytes(&words);
    check(value, &words, &wire);
}

/// "A Read chunk is a list of Read segments. Each segment is preceded by a
/// 32-bit word containing a one if there is a segment, or a zero if there are
/// no more segments (optional-data). [...] The Read List is also a list of Read
/// segments. In XDR form, this would look like a Read chunk, except that the P
/// values could vary across the list. An empty Read List is encoded as a single
/// 32-bit zero."
///
/// Here: a Read list of three Read segments, the first two one Read chunk at
/// position 0x40, the third a second chunk at position 0x80.
#[test]
fn example_4_7_read_list() {
    let segments = [
        XdrReadChunk { position: 0x40, target: seg(0x11, 0x100, 0x1_0000_0002) },
        XdrReadChunk { position: 0x40, target: seg(0x12, 0x101, 0x3_0000_0004) },
        XdrReadChunk { position: 0x80, target: seg(0x13, 0x102, 0x5_0000_0006) },
    ];
    let value: XdrReadList<'_> = List::from_slice(&segments);
    let words: [u32; 19] = [
        1,     // Read list: an entry follows (optional-data TRUE)
        0x40,  //   P: position (first Read chunk)
        0x11,  //   H
        0x100, //   L
        0x1,   //   O: high word
        0x2,   //   O: low word
        1,     // an entry follows
        0x40,  //   P: same position, same Read chunk
        0x12,  //   H
        0x101, //   L
        0x3,   //   O: high word
        0x4,   //   O: low word
        1,     // an entry follows
        0x80,  //   P: another position, a second Read chunk
        0x13,  //   H
        0x102, //   L
        0x5,   //   O: high word
        0x6,   //   O: low word
        0,     // no more entries (optional-data FALSE)
    ];
    let wire = bytes(&words);
    check(value, &words, &wire);

    // "An empty Read List is encoded as a single 32-bit zero."
    let empty_words: [u32; 1] = [
        0, // no entry (optional-data FALSE)
    ];
    let empty_wire = bytes(&empty_words);
    check(XdrReadList::default(), &empty_words, &empty_wire);
}

/// "One Write chunk is a counted array of segments. In XDR form, the count
/// would appear as the first 32-bit word, followed by an HLOO for each element
/// of the array. For instance, a Write chunk with three elements would look
/// like" 3 HLOO HLOO HLOO.
#[test]
fn example_4_7_write_chunk_of_3_segments() {
    let segments = [seg(0x21, 0x200, 0x1_0000_0002), seg(0x22, 0x201, 0x3_0000_0004), seg(0x23, 0x202, 0x5_0000_0006)];
    let value = XdrWriteChunk { target: Seq::from_slice(&segments) };
    let words: [u32; 13] = [
        3,     // count: three segments
        0x21,  // H
        0x200, // L
        0x1,   // O: high word
        0x2,   // O: low word
        0x22,  // H
        0x201, // L
        0x3,   // O: high word
        0x4,   // O: low word
        0x23,  // H
        0x202, // L
        0x5,   // O: high word
        0x6,   // O: low word
    ];
    let wire = bytes(&words);
    check(value, &words, &wire);
}

/// "The Write List is a list of counted arrays. In XDR form, this is a
/// combination of optional-data and counted arrays. To represent a Write List
/// containing a Write chunk with three segments and a Write chunk with two
/// segments, XDR would encode" 1 3 HLOO HLOO HLOO 1 2 HLOO HLOO 0 (the
/// rendering kept only the fragment `1 2 HLOO HLOO`).
#[test]
fn example_4_7_write_list_of_3_and_2_segment_chunks() {
    let first = [seg(0x21, 0x200, 0x1_0000_0002), seg(0x22, 0x201, 0x3_0000_0004), seg(0x23, 0x202, 0x5_0000_0006)];
    let second = [seg(0x31, 0x300, 0x7_0000_0008), seg(0x32, 0x301, 0x9_0000_000a)];
    let chunks =
        [XdrWriteChunk { target: Seq::from_slice(&first) }, XdrWriteChunk { target: Seq::from_slice(&second) }];
    let value: XdrWriteList<'_> = List::from_slice(&chunks);
    let words: [u32; 25] = [
        1,     // Write list: an entry follows (optional-data TRUE)
        3,     //   Write chunk: count of three segments
        0x21,  //     H
        0x200, //     L
        0x1,   //     O: high word
        0x2,   //     O: low word
        0x22,  //     H
        0x201, //     L
        0x3,   //     O: high word
        0x4,   //     O: low word
        0x23,  //     H
        0x202, //     L
        0x5,   //     O: high word
        0x6,   //     O: low word
        1,     // an entry follows
        2,     //   Write chunk: count of two segments
        0x31,  //     H
        0x300, //     L
        0x7,   //     O: high word
        0x8,   //     O: low word
        0x32,  //     H
        0x301, //     L
        0x9,   //     O: high word
        0xa,   //     O: low word
        0,     // no more entries (optional-data FALSE)
    ];
    let wire = bytes(&words);
    check(value, &words, &wire);
}

/// "The Reply chunk is a Write chunk. Since it is an optional-data field,
/// however, there is a 32-bit field in front of it that contains a one if the
/// Reply chunk is present, or a zero if it is not. After encoding, a Reply
/// chunk with 2 segments would look like" 1 2 HLOO HLOO.
#[test]
fn example_4_7_reply_chunk_of_2_segments() {
    let segments = [seg(0x41, 0x400, 0x1_0000_0002), seg(0x42, 0x401, 0x3_0000_0004)];
    let value: Option<XdrWriteChunk<'_>> = Some(XdrWriteChunk { target: Seq::from_slice(&segments) });
    let words: [u32; 10] = [
        1,     // Reply chunk present (optional-data TRUE)
        2,     // count: two segments
        0x41,  //   H
        0x400, //   L
        0x1,   //   O: high word
        0x2,   //   O: low word
        0x42,  //   H
        0x401, //   L
        0x3,   //   O: high word
        0x4,   //   O: low word
    ];
    let wire = bytes(&words);
    check(value, &words, &wire);

    // "or a zero if it is not".
    let absent_words: [u32; 1] = [
        0, // no Reply chunk (optional-data FALSE)
    ];
    let absent_wire = bytes(&absent_words);
    check(None::<XdrWriteChunk<'_>>, &absent_words, &absent_wire);
}

/// "Frequently a requester does not provide any chunks. In that case, after
/// the four fixed fields in the RPC-over-RDMA header, there are simply three
/// 32-bit fields that contain zero." The four fixed fields are rdma_xid,
/// rdma_vers, rdma_credit and the rdma_body discriminator (draft section 5.2).
#[test]
fn example_4_7_header_with_no_chunks() {
    let value = RdmaMsg {
        rdma_xid: 0x1234_5678,
        rdma_vers: 1,
        rdma_credit: 0x80,
        rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
            rdma_reads: List::default(),
            rdma_writes: List::default(),
            rdma_reply: None,
        }),
    };
    let words: [u32; 7] = [
        0x1234_5678, // rdma_xid
        1,           // rdma_vers: Version One
        0x80,        // rdma_credit: requested (call) or granted (reply) credits
        0,           // rdma_proc: RDMA_MSG
        0,           // Read list: empty (optional-data FALSE)
        0,           // Write list: empty (optional-data FALSE)
        0,           // Reply chunk: absent (optional-data FALSE)
    ];
    let wire = bytes(&words);
    check(value, &words, &wire);
}

/// The chunk examples put together in one header: an RDMA_MSG carrying a Read
/// list, a Write list and a Reply chunk, to check the three fields follow the
/// fixed fields in that order.
#[test]
fn example_4_7_header_with_all_three_chunk_fields() {
    let reads = [XdrReadChunk { position: 0x40, target: seg(0x11, 0x100, 0x1_0000_0002) }];
    let write = [seg(0x21, 0x200, 0x3_0000_0004)];
    let writes = [XdrWriteChunk { target: Seq::from_slice(&write) }];
    let reply = [seg(0x41, 0x400, 0x5_0000_0006)];
    let value = RdmaMsg {
        rdma_xid: 0x1234_5678,
        rdma_vers: 1,
        rdma_credit: 0x80,
        rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
            rdma_reads: List::from_slice(&reads),
            rdma_writes: List::from_slice(&writes),
            rdma_reply: Some(XdrWriteChunk { target: Seq::from_slice(&reply) }),
        }),
    };
    let words: [u32; 24] = [
        0x1234_5678, // rdma_xid
        1,           // rdma_vers
        0x80,        // rdma_credit
        0,           // rdma_proc: RDMA_MSG
        1,           // Read list: an entry follows
        0x40,        //   P
        0x11,        //   H
        0x100,       //   L
        0x1,         //   O: high word
        0x2,         //   O: low word
        0,           // Read list: no more entries
        1,           // Write list: an entry follows
        1,           //   Write chunk: count of one segment
        0x21,        //     H
        0x200,       //     L
        0x3,         //     O: high word
        0x4,         //     O: low word
        0,           // Write list: no more entries
        1,           // Reply chunk present
        1,           //   count of one segment
        0x41,        //     H
        0x400,       //     L
        0x5,         //     O: high word
        0x6,         //     O: low word
    ];
    let wire = bytes(&words);
    check(value, &words, &wire);
}
