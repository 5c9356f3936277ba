//! Hostile input against Version Two's receive rules: every truncation of
//! valid messages of each procedure, counts up to 0xffffffff, procedures and
//! opttypes across the u32 range. Each gets its verdict with no panic, and
//! `receive()` allocates nothing for any of them (the counting allocator
//! checks every call).

use rpcrdma_v1::header::HeaderError;
use rpcrdma_v2::options::{encode_optional, OptionOutcome, OptionalMessage, Registry};
use rpcrdma_v2::verdict::{default_policy, receive, DiscardReason, Reason, Verdict};

#[path = "../../rpcrdma-v1/tests/support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{counted, serial};

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// `receive()` with opttype 1 registered, asserting no allocation.
fn judge<'a>(b: &'a [u8], registry: &mut Registry) -> Verdict<'a> {
    let (v, calls, allocated) = counted(|| receive(b, &default_policy(), registry));
    assert_eq!((calls, allocated), (0, 0), "receive() allocated on {} bytes: {v:?}", b.len());
    v
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(1, |_: &OptionalMessage<'_>| OptionOutcome::Done).unwrap();
    r
}

fn is_bad_header(v: &Verdict<'_>) -> bool {
    matches!(v, Verdict::Reply { reply, .. } if reply.as_bytes().len() == 20 && reply.as_bytes()[16..] == [0, 0, 0, 2])
}

#[test]
fn every_truncation_gets_its_verdict_without_allocating() {
    let _s = serial();
    let mut reg = registry();
    let mut optional = [0u8; 40];
    let n = encode_optional(7, 1, 1, b"optinfo!", &mut optional).unwrap();
    let valid = [
        // RDMA_MSG with a Read chunk, a Write chunk and a Reply chunk.
        bytes(&[7, 2, 1, 0, 1, 8, 9, 64, 0, 0x1000, 0, 1, 1, 9, 64, 0, 0x2000, 0, 1, 1, 9, 64, 0, 0x3000, 7, 0, 0]),
        // RDMA_NOMSG, a Long call.
        bytes(&[7, 2, 1, 1, 1, 0, 9, 64, 0, 0x1000, 0, 0, 0]),
        optional[..n].to_vec(),
    ];
    for msg in &valid {
        let whole = judge(msg, &mut reg);
        assert!(matches!(whole, Verdict::Accept(_) | Verdict::Handled { .. }));
        // An RDMA_MSG stays valid while its RPC message keeps its XID.
        let shortest = match whole {
            Verdict::Accept(h) if h.payload().len() >= 4 => h.header_len() + 4,
            _ => msg.len(),
        };
        for len in 0..msg.len() {
            let v = judge(&msg[..len], &mut reg);
            if len >= shortest {
                assert!(matches!(v, Verdict::Accept(_)));
            } else if len < 8 {
                assert_eq!(v, Verdict::Discard(DiscardReason::TooShort(len)));
            } else {
                assert!(is_bad_header(&v), "{len} bytes of {msg:?}: {v:?}");
            }
        }
    }
    // Truncated RDMA_ERRORs are dropped, never answered.
    let err = bytes(&[7, 2, 1, 4, 1, 2, 2]);
    for len in 16..err.len() {
        assert!(matches!(judge(&err[..len], &mut reg), Verdict::Discard(_)));
    }
}

#[test]
fn huge_counts_are_refused_before_any_work() {
    let _s = serial();
    let mut reg = registry();
    // A Write chunk claiming 0xffffffff segments; optinfo claiming 0xffffffff bytes.
    let writes = bytes(&[7, 2, 1, 0, 0, 1, u32::MAX, 0, 0]);
    let v = judge(&writes, &mut reg);
    assert!(matches!(v, Verdict::Reply { reason: Reason::Header(HeaderError::TooManySegments { .. }), .. }), "{v:?}");
    let optinfo = bytes(&[7, 2, 1, 5, 1, u32::MAX, 0]);
    let v = judge(&optinfo, &mut reg);
    assert!(matches!(v, Verdict::Reply { reason: Reason::Header(HeaderError::Xdr(_)), .. }), "{v:?}");
    // A 1,000,000-entry Read list: stopped at the segment limit.
    let mut long = bytes(&[7, 2, 1, 0]);
    for _ in 0..1_000_000 {
        long.extend(bytes(&[1, 0, 9, 4, 0, 0]));
    }
    long.extend(bytes(&[0, 0, 0, 7, 0]));
    let v = judge(&long, &mut reg);
    assert!(matches!(v, Verdict::Reply { reason: Reason::Header(HeaderError::TooManySegments { .. }), .. }), "{v:?}");
}

/// 0..64, then strides of 0x0100_0007 across the range, and u32::MAX.
fn across_u32() -> impl Iterator<Item = u64> {
    (0..64).chain((64..=u64::from(u32::MAX)).step_by(0x0100_0007)).chain([u64::from(u32::MAX)])
}

#[test]
fn procedures_across_the_u32_range() {
    let _s = serial();
    let mut reg = registry();
    for p in across_u32() {
        let msg = bytes(&[7, 2, 1, p as u32, 0, 0, 0, 7, 0]);
        let v = judge(&msg, &mut reg);
        match p {
            0 => assert!(matches!(v, Verdict::Accept(_))),
            1 => assert!(matches!(v, Verdict::Reply { reason: Reason::Header(HeaderError::NoMsgWithoutChunk), .. })),
            2 | 3 => assert!(matches!(v, Verdict::Reply { reason: Reason::Header(HeaderError::Obsolete(_)), .. })),
            4 => assert!(matches!(v, Verdict::Discard(_) | Verdict::PeerError { .. })),
            5 => assert!(matches!(v, Verdict::Reply { reason: Reason::UnsupportedOption(0), .. })),
            _ => assert!(
                matches!(v, Verdict::Reply { reason: Reason::Header(HeaderError::UnknownProc(q)), .. } if u64::from(q) == p)
            ),
        }
    }
}

#[test]
fn opttypes_across_the_u32_range() {
    let _s = serial();
    let mut reg = registry();
    for t in across_u32() {
        let msg = bytes(&[7, 2, 1, 5, t as u32, 0]);
        let v = judge(&msg, &mut reg);
        if t == 1 {
            assert_eq!(v, Verdict::Handled { xid: 7, opttype: 1, answer: None });
        } else {
            assert!(matches!(v, Verdict::Reply { reason: Reason::UnsupportedOption(o), .. } if u64::from(o) == t));
        }
    }
}
