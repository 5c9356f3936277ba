//! `verdict::receive` on arbitrary bytes under a few policies. Whatever it
//! answers must be consistent with the bytes: an accepted header's chunks all
//! lie within the limits and the input, a reply is a well-formed RDMA_ERROR
//! for the same XID, and discards and peer errors happen only where the rules
//! of RFC 8166 section 4.5 put them.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;
use rpcrdma_v1::header::{chunk_len, Header, HeaderError, HeaderLimits};
use rpcrdma_v1::rt::Xdr;
use rpcrdma_v1::verdict::{receive, DiscardReason, PeerError, ReceivePolicy, Verdict};
use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg, RpcRdmaError};
use rpcrdma_v1::Version;

fn word(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// The policies every input is judged under (the limits' setters are not `const`).
fn policies() -> [ReceivePolicy; 3] {
    [
        // Linux's 16 segments, chunks up to 4 GiB - 1.
        ReceivePolicy {
            limits: HeaderLimits::unlimited().max_segments(16).max_chunk_len(u32::MAX as u64),
            versions: (Version::ONE, Version::ONE),
            credit: 32,
        },
        // No limits at all: the decoder walks whatever the input holds.
        ReceivePolicy { limits: HeaderLimits::unlimited(), versions: (Version::ONE, Version::TWO), credit: 0 },
        // Tight: two segments, 4 KiB chunks.
        ReceivePolicy {
            limits: HeaderLimits::default().max_segments(2).max_chunk_len(4096).max_message_len(8192),
            versions: (Version::ONE, Version::ONE),
            credit: 1,
        },
    ]
}

fn check_accept(data: &[u8], h: &Header<'_>, policy: &ReceivePolicy) {
    let limits = &policy.limits;
    assert!(h.header_len() <= data.len());
    assert!(h.header_len() >= 28, "a v1 MSG/NOMSG header has at least 7 words");
    assert_eq!(h.payload(), &data[h.header_len()..]);
    assert_eq!(Some(h.xid()), word(data, 0));
    // The generated codec agrees on where the header ends.
    let (msg, consumed) = RdmaMsg::decode(data).expect("an accepted header decodes");
    assert_eq!(consumed, h.header_len());
    assert!(matches!(msg.rdma_body, RdmaBody::RdmaMsg(_) | RdmaBody::RdmaNomsg(_)));

    let mut segments: u64 = 0;
    let mut read_segments = 0usize;
    let mut previous: Option<(u32, u64)> = None;
    for chunk in h.read_chunks() {
        assert_eq!(chunk.position() % 4, 0);
        assert!(chunk.len() <= limits.max_chunk_len);
        let mut n = 0usize;
        let mut len = 0u64;
        for seg in chunk.segments() {
            n += 1;
            len += u64::from(seg.length);
        }
        assert!(n >= 1);
        assert_eq!((n, len), (chunk.segment_count(), chunk.len()));
        if let Some((prev, prev_len)) = previous {
            assert!(chunk.position() > prev);
            if prev != 0 {
                assert!(u64::from(chunk.position()) >= u64::from(prev) + prev_len);
            }
        }
        previous = Some((chunk.position(), chunk.len()));
        read_segments += n;
    }
    assert_eq!(read_segments, h.read_list().len());
    segments += read_segments as u64;
    for w in h.write_list().iter() {
        assert!(chunk_len(&w) <= limits.max_chunk_len);
        segments += w.target.iter().count() as u64;
    }
    if let Some(r) = h.reply_chunk() {
        assert!(chunk_len(&r) <= limits.max_chunk_len);
        segments += r.target.iter().count() as u64;
    }
    assert!(segments <= u64::from(limits.max_segments));
}

fn check_reply(data: &[u8], reply: &[u8], reason: &HeaderError, policy: &ReceivePolicy) {
    let (xid, vers) = (word(data, 0).unwrap(), word(data, 4).unwrap());
    let (msg, n) = RdmaMsg::decode(reply).expect("the reply decodes");
    assert_eq!(n, reply.len());
    assert_eq!((msg.rdma_xid, msg.rdma_vers, msg.rdma_credit), (xid, vers, policy.credit));
    let RdmaBody::RdmaError(err) = msg.rdma_body else { panic!("reply is not RDMA_ERROR: {msg:?}") };
    match reason {
        HeaderError::Version { vers: v } => {
            assert_eq!(*v, vers);
            assert_ne!(vers, 1);
            assert_eq!(reply.len(), 28);
            let RpcRdmaError::ErrVers(range) = err else { panic!("version error answered with {err:?}") };
            assert_eq!(
                (range.rdma_vers_low, range.rdma_vers_high),
                (policy.versions.0.wire(), policy.versions.1.wire())
            );
        }
        HeaderError::TooShortForVersion { .. } | HeaderError::IsError => panic!("{reason:?} must not be answered"),
        _ => {
            assert_eq!(vers, 1);
            assert_eq!(reply.len(), 20);
            assert_eq!(err, RpcRdmaError::ErrChunk);
        }
    }
    // The peer, receiving our reply, completes the XID's transaction.
    let back = receive(reply, policy);
    assert!(matches!(back, Verdict::PeerError { xid: x, .. } if x == xid), "{back:?}");
}

fuzz_target!(|data: &[u8]| {
    for policy in &policies() {
        let verdict = receive(data, policy);
        let is_error = word(data, 12) == Some(4);
        // receive is a function of its input: parse agrees with it.
        if data.len() >= 8 && !is_error {
            let parsed = Header::parse(data, &policy.limits);
            match (&verdict, &parsed) {
                (Verdict::Accept(a), Ok(b)) => assert_eq!(a, b),
                (Verdict::Reply { reason, .. }, Err(e)) => assert_eq!(reason, e),
                _ => panic!("receive {verdict:?} but parse {parsed:?}"),
            }
        }
        match verdict {
            Verdict::Accept(h) => {
                assert!(!is_error);
                check_accept(data, &h, policy);
            }
            Verdict::Reply { reply, reason } => {
                assert!(!is_error, "an RDMA_ERROR is never answered");
                check_reply(data, reply.as_bytes(), &reason, policy);
            }
            Verdict::PeerError { xid, error } => {
                assert!(is_error);
                assert_eq!(Some(xid), word(data, 0));
                match error {
                    PeerError::Chunk => assert_eq!((word(data, 4), word(data, 16)), (Some(1), Some(2))),
                    PeerError::Vers { vers, low, high } => {
                        assert_eq!(Some(vers), word(data, 4));
                        assert_eq!((word(data, 16), word(data, 20), word(data, 24)), (Some(1), Some(low), Some(high)));
                        assert!(low <= high);
                    }
                }
            }
            Verdict::Discard(DiscardReason::TooShort(n)) => assert!(n == data.len() && n < 8),
            Verdict::Discard(DiscardReason::UndecodableError) => assert!(is_error),
        }
    }
});
