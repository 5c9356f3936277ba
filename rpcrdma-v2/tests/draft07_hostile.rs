//! Hostile input against draft-ietf-nfsv4-rpcrdma-version-two-07's receive side: every
//! truncation of a valid message of each header type, counts up to 0xffffffff in every list
//! and property set, header types and error codes across the u32 range. Each gets its verdict
//! with no panic, `draft07::verdict::receive` allocates nothing for any of them (the counting
//! allocator checks every call), and a continued message holds no more than arrived.

use rpcrdma_v2::draft07::continuation::{Reassembly, Step};
use rpcrdma_v2::draft07::header::Header;
use rpcrdma_v2::draft07::verdict::{receive, Discard, Policy, Verdict};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::HeaderLimits;

#[path = "../../rpcrdma-v1/tests/support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{counted, serial};

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// `receive()` under the default policy, asserting it allocated nothing.
fn judge(b: &[u8]) -> Verdict<'_> {
    let (v, calls, allocated) = counted(|| receive(b, &Policy::default()));
    assert_eq!((calls, allocated), (0, 0), "receive() allocated on {} bytes: {v:?}", b.len());
    v
}

/// A valid message of every header type.
fn valid() -> Vec<Vec<u8>> {
    vec![
        bytes(&[7, 2, 1, RDMA2_ERROR, RDMA2_ERR_VERS, 1, 2]),
        bytes(&[0, 2, 1, RDMA2_GRANT]),
        bytes(&[0, 2, 1, RDMA2_CONNPROP_MIDDLE, 1, RDMA2_PROPID_RBSIZ, 4, 8192]),
        bytes(&[0, 2, 1, RDMA2_CONNPROP_FINAL, 1, RDMA2_PROPID_HOSTAUTH, 8, 3, 0x6162_6300]),
        // CALL_EXTERNAL: a Call chunk, a Read chunk at 8, a Write chunk, a Reply chunk.
        bytes(&[
            7,
            2,
            1,
            RDMA2_CALL_EXTERNAL,
            0x55,
            1,
            0,
            9,
            64,
            0,
            0x1000,
            0,
            1,
            8,
            9,
            64,
            0,
            0x2000,
            0,
            1,
            1,
            9,
            64,
            0,
            0x3000,
            0,
            1,
            1,
            9,
            64,
            0,
            0x4000,
        ]),
        bytes(&[7, 2, 1, RDMA2_CALL_MIDDLE, 4, 7, 0]),
        bytes(&[7, 2, 1, RDMA2_CALL_INLINE, 0, 1, 8, 9, 64, 0, 0x1000, 0, 0, 0, 7, 0, 2]),
        bytes(&[7, 2, 1, RDMA2_REPLY_EXTERNAL, 1, 1, 9, 64, 0, 0x1000, 0, 1, 1, 9, 64, 0, 0x2000]),
        bytes(&[7, 2, 1, RDMA2_REPLY_MIDDLE, 4, 7, 1]),
        bytes(&[7, 2, 1, RDMA2_REPLY_INLINE, 1, 1, 9, 64, 0, 0x1000, 0, 7, 1, 0]),
    ]
}

#[test]
fn every_truncation_of_every_header_type_gets_its_verdict_without_allocating() {
    let _s = serial();
    for msg in valid() {
        let whole = judge(&msg);
        assert!(matches!(whole, Verdict::Accept(_) | Verdict::PeerError { .. }), "{whole:?}");
        for len in 0..msg.len() {
            match judge(&msg[..len]) {
                Verdict::Discard(Discard::TooShort(n)) => assert!(n < 16 && n == len),
                // A payload-carrying message cut within its payload is still a header.
                Verdict::Accept(h) => assert!(h.header_type().carries_payload() && len >= h.header_len() + 4),
                Verdict::Reply { reply, .. } => {
                    let r = reply.as_bytes();
                    assert_eq!(&r[..8], &msg[..8]);
                    // A cut header is an XDR error (or, for a CONNPROP, a property set that
                    // does not decode): BAD_XDR or BAD_PROPVAL.
                    let code = u32::from_be_bytes(r[16..20].try_into().unwrap());
                    assert!(
                        code == RDMA2_ERR_BAD_XDR || code == RDMA2_ERR_BAD_PROPVAL,
                        "code {code} for {len} bytes of {msg:?}"
                    );
                }
                Verdict::Discard(Discard::ErrorNotTaken) => assert_eq!(&msg[12..16], &RDMA2_ERROR.to_be_bytes()),
                other => panic!("{len} bytes of {msg:?}: {other:?}"),
            }
        }
    }
}

/// Every count word of every valid message set to large values: refused (segment limit, or
/// the body does not decode) without allocating, never accepted with a count it lacks the
/// bytes for.
#[test]
fn huge_counts_are_refused_before_any_work() {
    let _s = serial();
    for msg in valid() {
        for at in (16..msg.len()).step_by(4) {
            for count in [17, 0x1000, 0x7fff_ffff, 0xffff_ffff] {
                let mut m = msg.clone();
                m[at..at + 4].copy_from_slice(&u32::to_be_bytes(count));
                if let Verdict::Accept(h) = judge(&m) {
                    let lists = h.chunk_lists();
                    let segments = h.call_chunk().len()
                        + lists.reads.len()
                        + lists.writes.iter().map(|w| w.target.len()).sum::<usize>()
                        + lists.reply.map_or(0, |r| r.target.len());
                    assert!(segments <= 16, "{segments} segments accepted from {} bytes", m.len());
                }
            }
        }
    }
}

/// Header types and error codes across the u32 range: each judged as section 7 says.
#[test]
fn header_types_and_error_codes_across_the_u32_range() {
    let _s = serial();
    for htype in [0, 1, 2, 3, 14, 15, 100, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, 0xffff_ffff] {
        let m = bytes(&[7, 2, 1, htype, 0, 0, 0, 0]);
        let Verdict::Reply { reply, .. } = judge(&m) else { panic!("htype {htype}") };
        assert_eq!(&reply.as_bytes()[16..], &RDMA2_ERR_INVAL_HTYPE.to_be_bytes(), "htype {htype}");
    }
    for code in [0, 12, 13, 99, 101, 0x8000_0000, 0xffff_ffff] {
        let m = bytes(&[7, 2, 1, RDMA2_ERROR, code]);
        assert_eq!(judge(&m), Verdict::Discard(Discard::UnknownErrorCode(code)));
    }
}

/// A peer that claims a continued message of 4 GiB, then sends parts of one within the limit,
/// makes a receiver hold no more than the parts that arrived. (A later part cannot pass the
/// limit: each must add up to what the first, checked against it, said remained.)
#[test]
fn a_continued_message_claiming_gigabytes_holds_only_what_arrived() {
    let limits = HeaderLimits::default();
    let mut r = Reassembly::new(64 << 10);
    let claim = bytes(&[9, 2, 1, RDMA2_CALL_MIDDLE, u32::MAX, 0]);
    let h = Header::parse(&claim, &limits).unwrap();
    assert!(matches!(r.receive(h), Step::Refused { .. }));
    assert_eq!(r.held(), 0);
    // A message of exactly the limit, in 64-byte parts: held grows by each part.
    let mut remaining: u32 = (64 << 10) - 64;
    let mut n = 0;
    while remaining >= 64 {
        let mut m = bytes(&[10, 2, 1, RDMA2_CALL_MIDDLE, remaining]);
        m.extend([n as u8; 64]);
        match r.receive(Header::parse(&m, &limits).unwrap()) {
            Step::Held => assert_eq!(r.held(), 64 * (n + 1)),
            other => panic!("part {n}: {other:?}"),
        }
        remaining -= 64;
        n += 1;
    }
    // A part claiming more than remained: refused, and nothing more held.
    let held = r.held();
    let mut over = bytes(&[10, 2, 1, RDMA2_CALL_MIDDLE, 64 + 4]);
    over.extend([0u8; 4]);
    assert!(matches!(r.receive(Header::parse(&over, &limits).unwrap()), Step::Refused { .. }));
    assert!(held <= 64 << 10);
    assert_eq!(r.held(), 0, "the broken sequence's parts are given up");
}
