//! Hostile input against the receive rules: every truncation, counts up to
//! 0xffffffff, a 1,000,000-entry Read list, misaligned and overlapping
//! positions, procedure numbers across the u32 range, segment lengths whose
//! sum overflows 32 bits. Each case gets the verdict the rules of RFC 8166
//! section 4.5 give it (accept, ERR_CHUNK, ERR_VERS, peer error or discard),
//! with the reason asserted, and `receive()` allocates nothing for any of
//! them: the counting allocator below checks every call.

use rpcrdma_v1::header::{chunk_len, Header, HeaderError, HeaderLimits, MessageKind};
use rpcrdma_v1::rt::Error;
use rpcrdma_v1::verdict::{receive, DiscardReason, PeerError, ReceivePolicy, Verdict};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{counted, serial};

/// `receive()`, asserting that judging the bytes (and, for an accepted
/// header, walking every chunk and segment) allocates nothing.
fn judge<'a>(bytes: &'a [u8], policy: &ReceivePolicy) -> Verdict<'a> {
    let ((verdict, walked), calls, allocated) = counted(|| {
        let v = receive(bytes, policy);
        let walked = match v {
            Verdict::Accept(h) => walk(&h),
            _ => 0,
        };
        (v, walked)
    });
    assert_eq!((calls, allocated), (0, 0), "receive() allocated on a {}-byte input: {verdict:?}", bytes.len());
    if let Verdict::Accept(h) = verdict {
        assert!(h.header_len() <= bytes.len());
        assert_eq!(walked, h.read_list().len() + segments_outside_read_list(&h));
    }
    verdict
}

/// Visit every segment of an accepted header; the number visited.
///
/// `ReadChunk::segments()` starts by skipping the chunks before it, one list
/// entry at a time, so visiting every chunk's segments costs time quadratic
/// in the Read list's length. Lists longer than the default limit allows are
/// walked chunk by chunk and then entry by entry instead.
fn walk(h: &Header<'_>) -> usize {
    let reads: usize = if h.read_list().len() <= 1000 {
        h.read_chunks().map(|c| c.segments().count()).sum()
    } else {
        let in_chunks: usize = h.read_chunks().map(|c| c.segment_count()).sum();
        assert_eq!(in_chunks, h.read_list().iter().count());
        in_chunks
    };
    let writes: usize = h.write_list().iter().map(|w| w.target.iter().count()).sum();
    reads + writes + h.reply_chunk().map_or(0, |r| r.target.iter().count())
}

fn segments_outside_read_list(h: &Header<'_>) -> usize {
    h.write_list().iter().map(|w| w.target.len()).sum::<usize>() + h.reply_chunk().map_or(0, |r| r.target.len())
}

fn default() -> ReceivePolicy {
    ReceivePolicy::default()
}

/// Chunks up to 2^32 - 1 bytes (the largest a 32-bit position can address) and no limit on a
/// whole message: the arithmetic of huge lengths, which the default limits refuse earlier.
fn wide() -> ReceivePolicy {
    let limits = HeaderLimits::default().max_chunk_len(u64::from(u32::MAX)).max_message_len(u64::MAX);
    ReceivePolicy { limits, ..Default::default() }
}

/// A policy with the segment limit lifted.
fn unlimited_segments() -> ReceivePolicy {
    ReceivePolicy { limits: HeaderLimits::default().max_segments(u32::MAX), ..Default::default() }
}

fn bytes(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4).map(|w| u32::from_be_bytes(w.try_into().unwrap())).collect()
}

/// An RPC call: xid, CALL, rpcvers 2, NFS, version 3, NULL.
fn rpc_call(xid: u32) -> [u32; 6] {
    [xid, 0, 2, 100_003, 3, 0]
}

/// The ERR_CHUNK reply for a version 1 message with `xid` (credit 32, the
/// default policy's); the rule the message broke.
#[track_caller]
fn err_chunk(v: Verdict<'_>, xid: u32) -> HeaderError {
    match v {
        Verdict::Reply { reply, reason } => {
            assert_eq!(words(reply.as_bytes()), [xid, 1, 32, 4, 2], "ERR_CHUNK for {reason:?}");
            reason
        }
        other => panic!("expected ERR_CHUNK, got {other:?}"),
    }
}

#[track_caller]
fn accept(v: Verdict<'_>) -> Header<'_> {
    match v {
        Verdict::Accept(h) => h,
        other => panic!("expected Accept, got {other:?}"),
    }
}

/// `[7, 1, 1, RDMA_MSG]`, then `body`, then an RPC call with XID 7.
fn msg(body: &[u32]) -> Vec<u8> {
    let mut w = vec![7, 1, 1, 0];
    w.extend_from_slice(body);
    w.extend(rpc_call(7));
    bytes(&w)
}

// ---------------------------------------------------------------------------
// Every truncation.
// ---------------------------------------------------------------------------

/// What a v1 header is made of, for an independent model of where a
/// truncated copy must fail to decode.
#[derive(Clone, Copy)]
enum Item {
    /// A 4-byte word: a fixed field, a list's boolean, an optional's flag.
    Word,
    /// A Read list entry: position and segment, 20 bytes taken at once.
    ReadEntry,
    /// A segment count and that many 16-byte segments.
    Segments(u32),
}

use Item::{ReadEntry, Segments, Word};

/// The header's length when `cut` bytes hold it all, or the decode error
/// the codec must report: `Truncated` at the start of the item that does not
/// fit, or `CountExceedsInput` for a segment count whose segments do not.
fn model(layout: &[Item], cut: usize) -> Result<usize, Error> {
    let mut pos = 0;
    for item in layout {
        let n = match *item {
            Word => 4,
            ReadEntry => 20,
            Segments(count) => {
                if cut < pos + 4 {
                    return Err(Error::Truncated { at: pos, need: pos + 4 - cut });
                }
                let remaining = cut - pos - 4;
                if count as usize * 16 > remaining {
                    return Err(Error::CountExceedsInput { what: "xdr_write_chunk.target", count, remaining, at: pos });
                }
                pos += 4 + count as usize * 16;
                continue;
            }
        };
        if cut < pos + n {
            return Err(Error::Truncated { at: pos, need: pos + n - cut });
        }
        pos += n;
    }
    Ok(pos)
}

struct Sample {
    name: &'static str,
    layout: Vec<Item>,
    bytes: Vec<u8>,
    kind: MessageKind,
}

fn samples() -> Vec<Sample> {
    let fixed = [Word, Word, Word, Word];
    let mut plain = vec![7, 1, 32, 0, 0, 0, 0];
    plain.extend(rpc_call(7));
    let mut chunked = vec![
        7, 1, 32, 0, // xid, vers, credit, RDMA_MSG
        1, 96, 0x11, 4096, 0, 0x1000, 0, // read list: one segment at 96
        1, 2, 0x21, 8192, 0, 0x2000, 0x22, 8192, 0, 0x4000, 0, // write list: one 2-segment chunk
        1, 1, 0x31, 65536, 0, 0x8000, // reply chunk
    ];
    chunked.extend(rpc_call(7));
    vec![
        Sample {
            name: "plain RDMA_MSG",
            layout: [&fixed[..], &[Word, Word, Word]].concat(),
            bytes: bytes(&plain),
            kind: MessageKind::Msg,
        },
        Sample {
            name: "RDMA_MSG with read, write and reply chunks",
            layout: [&fixed[..], &[Word, ReadEntry, Word, Word, Segments(2), Word, Word, Segments(1)]].concat(),
            bytes: bytes(&chunked),
            kind: MessageKind::Msg,
        },
        Sample {
            name: "RDMA_NOMSG long call",
            layout: [&fixed[..], &[Word, ReadEntry, Word, Word, Word]].concat(),
            bytes: bytes(&[7, 1, 32, 1, 1, 0, 9, 4096, 0, 0, 0, 0, 0]),
            kind: MessageKind::NoMsg,
        },
        Sample {
            name: "RDMA_NOMSG long reply",
            layout: [&fixed[..], &[Word, Word, Word, Segments(1)]].concat(),
            bytes: bytes(&[7, 1, 32, 1, 0, 0, 1, 1, 9, 4096, 0, 0]),
            kind: MessageKind::NoMsg,
        },
    ]
}

#[test]
fn every_truncation_of_msg_and_nomsg_gets_discard_err_chunk_or_accept_as_the_rules_say() {
    let _g = serial();
    for s in samples() {
        let full_len = s.bytes.len();
        let header_len = model(&s.layout, full_len).unwrap();
        for cut in 0..=full_len {
            let b = &s.bytes[..cut];
            let v = judge(b, &default());
            let what = format!("{} cut at {cut}", s.name);
            if cut < 8 {
                // No version to answer: drop it.
                assert_eq!(v, Verdict::Discard(DiscardReason::TooShort(cut)), "{what}");
                continue;
            }
            if cut < 16 {
                // Version 1 but no procedure: an XDR error, ERR_CHUNK. The
                // reason reports the input's length as `at` (where the
                // 16-byte fixed header falls short).
                let reason = err_chunk(v, 7);
                assert_eq!(
                    reason,
                    HeaderError::Xdr(Error::Truncated { at: cut & !3, need: (cut & !3) + 4 - cut }),
                    "{what}"
                );
                continue;
            }
            match model(&s.layout, cut) {
                Err(e) => assert_eq!(err_chunk(v, 7), HeaderError::Xdr(e), "{what}"),
                Ok(hl) => {
                    assert_eq!(hl, header_len, "{what}");
                    if s.kind == MessageKind::Msg && cut < hl + 4 {
                        // Header whole, but not even the RPC message's XID.
                        assert_eq!(err_chunk(v, 7), HeaderError::MissingPayload, "{what}");
                    } else {
                        let h = accept(v);
                        assert_eq!((h.xid(), h.kind(), h.header_len()), (7, s.kind, hl), "{what}");
                        assert_eq!(h.payload(), &s.bytes[hl..cut], "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn every_truncation_of_a_version_2_message_gets_err_vers_once_the_version_is_readable_rfc8166_4_5_1() {
    let _g = serial();
    let mut w = vec![9, 2, 1, 0, 0, 0, 0];
    w.extend(rpc_call(9));
    let full = bytes(&w);
    for cut in 0..=full.len() {
        let v = judge(&full[..cut], &default());
        if cut < 8 {
            assert_eq!(v, Verdict::Discard(DiscardReason::TooShort(cut)), "cut at {cut}");
            continue;
        }
        let Verdict::Reply { reply, reason } = v else { panic!("cut at {cut}: {v:?}") };
        assert_eq!(reason, HeaderError::Version { vers: 2 }, "cut at {cut}");
        assert_eq!(words(reply.as_bytes()), [9, 2, 32, 4, 1, 1, 1], "cut at {cut}");
    }
}

#[test]
fn every_truncation_of_a_received_rdma_error_is_discarded_never_answered_rfc8166_4_5() {
    let _g = serial();
    let cases: [(&[u32], Verdict<'static>); 2] = [
        (&[7, 1, 32, 4, 1, 1, 1], Verdict::PeerError { xid: 7, error: PeerError::Vers { vers: 1, low: 1, high: 1 } }),
        (&[7, 1, 32, 4, 2], Verdict::PeerError { xid: 7, error: PeerError::Chunk }),
    ];
    for (ws, whole) in cases {
        let full = bytes(ws);
        for cut in 0..=full.len() {
            let v = judge(&full[..cut], &default());
            let what = format!("{ws:?} cut at {cut}");
            if cut < 8 {
                assert_eq!(v, Verdict::Discard(DiscardReason::TooShort(cut)), "{what}");
            } else if cut < 16 {
                // The procedure word is not all there: nothing says this is
                // an RDMA_ERROR, so it is a version 1 header cut short.
                assert_eq!(
                    err_chunk(v, 7),
                    HeaderError::Xdr(Error::Truncated { at: cut & !3, need: (cut & !3) + 4 - cut }),
                    "{what}"
                );
            } else if cut < full.len() {
                // An RDMA_ERROR whose body is cut: MUST be discarded silently.
                assert_eq!(v, Verdict::Discard(DiscardReason::UndecodableError), "{what}");
            } else {
                assert_eq!(v, whole, "{what}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Counts up to 0xffffffff.
// ---------------------------------------------------------------------------

const HOSTILE_COUNTS: [u32; 4] = [17, 1000, 0x7fff_ffff, 0xffff_ffff];

/// A write chunk (or, with `reply`, a reply chunk) claiming `count` segments
/// with one segment of data behind the count.
fn claiming(count: u32, reply: bool) -> Vec<u8> {
    let list = if reply { vec![0, 0, 1, count] } else { vec![0, 1, count] };
    bytes(&[&[7, 1, 1, 0][..], &list, &[0x21, 8192, 0, 0x2000]].concat())
}

#[test]
fn segment_counts_over_the_limit_get_err_chunk_too_many_segments_before_the_input_is_consulted() {
    let _g = serial();
    // The decoder runs with the segment limit as its array bound: any count
    // above 16 is refused as soon as it is read, whatever follows.
    for count in HOSTILE_COUNTS {
        for reply in [false, true] {
            let b = claiming(count, reply);
            assert_eq!(
                err_chunk(judge(&b, &default()), 7),
                HeaderError::TooManySegments { count: 17, limit: 16 },
                "count {count:#x}, reply chunk {reply}"
            );
        }
    }
}

#[test]
fn segment_counts_within_the_limit_but_beyond_the_input_get_err_chunk_count_exceeds_input() {
    let _g = serial();
    // With the limit lifted, the count is checked against the bytes left
    // (16 after it here) before anything is walked.
    for count in HOSTILE_COUNTS {
        for (reply, at) in [(false, 24), (true, 28)] {
            let b = claiming(count, reply);
            assert_eq!(
                err_chunk(judge(&b, &unlimited_segments()), 7),
                HeaderError::Xdr(Error::CountExceedsInput { what: "xdr_write_chunk.target", count, remaining: 16, at }),
                "count {count:#x}, reply chunk {reply}"
            );
        }
    }
    // A limit of 1000: counts up to it are measured against the input,
    // counts above it stop at the limit.
    let policy = ReceivePolicy { limits: HeaderLimits::default().max_segments(1000), ..Default::default() };
    for count in HOSTILE_COUNTS {
        let reason = err_chunk(judge(&claiming(count, false), &policy), 7);
        if count <= 1000 {
            assert!(matches!(reason, HeaderError::Xdr(Error::CountExceedsInput { count: c, .. }) if c == count));
        } else {
            assert_eq!(reason, HeaderError::TooManySegments { count: 1001, limit: 1000 });
        }
    }
}

/// `n` read segments in separate, ascending chunks (position 4(i+1), 4
/// bytes each).
fn read_list(n: u32) -> Vec<u32> {
    let mut w = Vec::with_capacity(n as usize * 6 + 1);
    for i in 0..n {
        w.extend([1, (i + 1) * 4, i, 4, 0, 0x1000 * i]);
    }
    w.push(0);
    w
}

#[test]
fn more_than_16_read_segments_get_err_chunk_too_many_segments() {
    let _g = serial();
    // 16 is the limit and is accepted.
    let b = msg(&[&read_list(16)[..], &[0, 0]].concat());
    assert_eq!(accept(judge(&b, &default())).read_chunks().count(), 16);
    // 17 entries decode (the decoder allows one over) and are counted; 18
    // and more stop the decoder at the 18th. Both report 17.
    for n in [17, 18, 1000] {
        let b = msg(&[&read_list(n)[..], &[0, 0]].concat());
        assert_eq!(
            err_chunk(judge(&b, &default()), 7),
            HeaderError::TooManySegments { count: 17, limit: 16 },
            "{n} read segments"
        );
    }
}

#[test]
fn the_segment_limit_counts_all_three_lists_together() {
    let _g = serial();
    let seg = |h: u32| [h, 512, 0, 0x1000 * h];
    // 6 read segments, 6 write segments in two chunks, 4 or 5 reply segments.
    let build = |reply_segments: u32| {
        let mut w = read_list(6);
        for c in 0..2 {
            w.extend([1, 3]);
            for s in 0..3 {
                w.extend(seg(10 + c * 3 + s));
            }
        }
        w.extend([0, 1, reply_segments]);
        for s in 0..reply_segments {
            w.extend(seg(20 + s));
        }
        msg(&w)
    };
    let b = build(4);
    let h = accept(judge(&b, &default()));
    assert_eq!((h.read_list().len(), h.write_list().len(), h.reply_chunk().map(|r| r.target.len())), (6, 2, Some(4)));
    let b = build(5);
    assert_eq!(err_chunk(judge(&b, &default()), 7), HeaderError::TooManySegments { count: 17, limit: 16 });
}

#[test]
fn a_write_list_of_17_chunks_gets_err_chunk_too_many_segments() {
    let _g = serial();
    // 17 one-segment write chunks: 17 segments.
    let mut w = vec![0];
    for i in 0..17 {
        w.extend([1, 1, i, 8, 0, 0]);
    }
    w.extend([0, 0]);
    assert_eq!(err_chunk(judge(&msg(&w), &default()), 7), HeaderError::TooManySegments { count: 17, limit: 16 });
    // 18 empty write chunks carry no segment at all, but the decoder's bound
    // on list entries (the segment limit plus one) stops the list at the
    // 18th entry, reported the same way.
    let mut w = vec![0];
    for _ in 0..18 {
        w.extend([1, 0]);
    }
    w.extend([0, 0]);
    assert_eq!(err_chunk(judge(&msg(&w), &default()), 7), HeaderError::TooManySegments { count: 17, limit: 16 });
}

// ---------------------------------------------------------------------------
// A 1,000,000-entry Read list.
// ---------------------------------------------------------------------------

const MILLION: u32 = 1_000_000;

#[test]
fn a_million_entry_read_list_gets_err_chunk_and_the_decoder_stops_at_the_17th_segment() {
    let _g = serial();
    let list = read_list(MILLION);
    let b = msg(&[&list[..], &[0, 0]].concat());
    assert_eq!(b.len(), 24_000_000 + 16 + 4 + 8 + 24);

    // Default limit: refused, and nothing allocated.
    assert_eq!(err_chunk(judge(&b, &default()), 7), HeaderError::TooManySegments { count: 17, limit: 16 });

    // With the limit lifted the same bytes are a valid header: the whole
    // list is walked (a million chunks, in order, none overlapping).
    let h = accept(judge(&b, &unlimited_segments()));
    assert_eq!(h.read_list().len(), MILLION as usize);
    assert_eq!(h.read_chunks().count(), MILLION as usize);
    assert_eq!(h.read_chunks().last().map(|c| (c.position(), c.len())), Some((4 * MILLION, 4)));
    assert_eq!(h.header_len(), b.len() - 24);

    // Work is bounded without a clock: break the list far past the 17th
    // entry. The default limit never gets there (same verdict as the intact
    // list); walking the whole list does and finds the damage.
    let entry = |i: usize| 16 + i * 24;
    let mut bad_bool = b.clone();
    bad_bool[entry(500_000)..entry(500_000) + 4].copy_from_slice(&2u32.to_be_bytes());
    assert_eq!(err_chunk(judge(&bad_bool, &default()), 7), HeaderError::TooManySegments { count: 17, limit: 16 });
    assert_eq!(
        err_chunk(judge(&bad_bool, &unlimited_segments()), 7),
        HeaderError::Xdr(Error::BadBool { value: 2, at: entry(500_000) })
    );
    let cut = &b[..entry(500_000) + 10];
    assert_eq!(err_chunk(judge(cut, &default()), 7), HeaderError::TooManySegments { count: 17, limit: 16 });
    assert_eq!(
        err_chunk(judge(cut, &unlimited_segments()), 7),
        HeaderError::Xdr(Error::Truncated { at: entry(500_000) + 4, need: 14 })
    );
    // A misaligned position at the last entry: found only by a full walk.
    let mut misaligned = b.clone();
    let last = entry(MILLION as usize - 1) + 4;
    misaligned[last..last + 4].copy_from_slice(&4_000_001u32.to_be_bytes());
    assert_eq!(err_chunk(judge(&misaligned, &default()), 7), HeaderError::TooManySegments { count: 17, limit: 16 });
    assert_eq!(err_chunk(judge(&misaligned, &unlimited_segments()), 7), HeaderError::MisalignedPosition(4_000_001));
}

// ---------------------------------------------------------------------------
// Misaligned and overlapping positions.
// ---------------------------------------------------------------------------

/// Read segments given as (position, length), then no writes, no reply.
fn reads(segs: &[(u32, u32)]) -> Vec<u32> {
    let mut w = Vec::new();
    for (i, &(position, length)) in segs.iter().enumerate() {
        w.extend([1, position, i as u32 + 1, length, 0, 0x1000]);
    }
    w.extend([0, 0, 0]);
    w
}

#[test]
fn misaligned_read_positions_get_err_chunk_rfc8166_3_4_5() {
    let _g = serial();
    for p in [1, 2, 3, 5, 6, 7, 0x8000_0001, 0xffff_fffd, 0xffff_fffe, u32::MAX] {
        // Alone, after a valid chunk, and as the second segment of a chunk
        // that starts at an aligned position (a new chunk, then).
        for segs in [vec![(p, 4)], vec![(8, 4), (p, 4)], vec![(p & !3, 0), (p, 4)]] {
            let b = msg(&reads(&segs));
            assert_eq!(err_chunk(judge(&b, &default()), 7), HeaderError::MisalignedPosition(p), "{segs:?}");
        }
    }
    // The alignment rule comes before the ordering rule: a misaligned
    // position that also goes backwards is reported as misaligned.
    let b = msg(&reads(&[(200, 4), (5, 4)]));
    assert_eq!(err_chunk(judge(&b, &default()), 7), HeaderError::MisalignedPosition(5));
    // Aligned positions up to the top of the range are fine.
    for p in [4, 0x8000_0000, 0xffff_fff8, 0xffff_fffc] {
        let b = msg(&reads(&[(p, 4)]));
        assert_eq!(accept(judge(&b, &default())).read_chunks().next().map(|c| c.position()), Some(p));
    }
}

#[test]
fn overlapping_descending_or_scattered_read_chunks_get_err_chunk_rfc8166_3_4_5() {
    let _g = serial();
    let overlap =
        |position, previous, previous_len| HeaderError::OverlappingReadChunks { position, previous, previous_len };
    let cases: [(&[(u32, u32)], HeaderError); 6] = [
        // Inside the previous chunk's data.
        (&[(8, 100), (52, 4)], overlap(52, 8, 100)),
        // One word short of its end.
        (&[(8, 100), (104, 4)], overlap(104, 8, 100)),
        // Descending.
        (&[(200, 4), (8, 4)], overlap(8, 200, 4)),
        // A chunk's segments not together: 8, 200, 8.
        (&[(8, 4), (200, 4), (8, 4)], overlap(8, 200, 4)),
        // A Position-zero chunk after another.
        (&[(8, 4), (0, 4)], overlap(0, 8, 4)),
        // The previous chunk's end is past 2^32: computed in 64 bits, no wrap.
        (&[(0xffff_fff0, u32::MAX), (0xffff_fffc, 4)], overlap(0xffff_fffc, 0xffff_fff0, u64::from(u32::MAX))),
    ];
    for (segs, reason) in cases {
        assert_eq!(err_chunk(judge(&msg(&reads(segs)), &wide()), 7), reason, "{segs:?}");
    }
}

#[test]
fn adjacent_read_chunks_and_chunks_after_position_zero_are_accepted_rfc8166_3_4_5() {
    let _g = serial();
    // Exactly at the previous chunk's end.
    let b = msg(&reads(&[(8, 100), (108, 4)]));
    let h = accept(judge(&b, &default()));
    let chunks: Vec<_> = h.read_chunks().map(|c| (c.position(), c.len())).collect();
    assert_eq!(chunks, [(8, 100), (108, 4)]);
    // The Position-zero chunk holds the whole call: later chunks' positions
    // are within it by design (a long call with a separate data chunk).
    let mut w = vec![7, 1, 1, 1];
    w.extend(reads(&[(0, 4096), (0, 100), (4, 8192)]));
    let b = bytes(&w);
    let h = accept(judge(&b, &default()));
    let chunks: Vec<_> = h.read_chunks().map(|c| (c.position(), c.segment_count(), c.len())).collect();
    assert_eq!(chunks, [(0, 2, 4196), (4, 1, 8192)]);
}

// ---------------------------------------------------------------------------
// Procedure numbers across the u32 range.
// ---------------------------------------------------------------------------

/// 10,000 values spread over the u32 range, plus both ends.
fn sampled_procs() -> Vec<u32> {
    let mut procs: Vec<u32> = (0..10_000u32).map(|i| i.wrapping_mul(429_497).wrapping_add(i % 7)).collect();
    procs.extend(0..=16);
    procs.extend(u32::MAX - 16..=u32::MAX);
    procs
}

#[test]
fn procedures_across_the_u32_range_get_the_verdict_of_their_rule_rfc8166_4_5_2() {
    let _g = serial();
    let msg_body: Vec<u32> = [&[0, 0, 0][..], &rpc_call(7)].concat();
    let nomsg_body: Vec<u32> = vec![1, 0, 9, 4096, 0, 0, 0, 0, 0];
    let msgp_body: Vec<u32> = [&[4, 1024, 0, 0, 0][..], &rpc_call(7)].concat();
    let empty: Vec<u32> = Vec::new();
    let procs = sampled_procs();
    assert!(procs.len() > 10_000);
    assert!(procs.iter().any(|&p| p > 0x8000_0000 && p < u32::MAX - 16));
    for proc in procs {
        for (name, body) in [("msg", &msg_body), ("nomsg", &nomsg_body), ("msgp", &msgp_body), ("empty", &empty)] {
            let b = bytes(&[&[7, 1, 32, proc][..], body].concat());
            let v = judge(&b, &default());
            let what = format!("proc {proc:#x}, {name} body");
            match (proc, name) {
                (0, "msg") => assert_eq!(accept(v).kind(), MessageKind::Msg, "{what}"),
                (1, "nomsg") => assert_eq!(accept(v).kind(), MessageKind::NoMsg, "{what}"),
                // A Position-zero chunk in RDMA_MSG: a Long call belongs in
                // RDMA_NOMSG (RFC 8166 section 3.5.3).
                (0, "nomsg") => assert_eq!(err_chunk(v, 7), HeaderError::PositionZeroInRdmaMsg, "{what}"),
                // RDMA_MSGP's two extra words read as the Read list's first
                // boolean (4): not a boolean.
                (0, "msgp") => {
                    assert_eq!(err_chunk(v, 7), HeaderError::Xdr(Error::BadBool { value: 4, at: 16 }), "{what}")
                }
                (1, "msgp") => {
                    assert_eq!(err_chunk(v, 7), HeaderError::Xdr(Error::BadBool { value: 4, at: 16 }), "{what}")
                }
                (1, "msg") => assert_eq!(err_chunk(v, 7), HeaderError::NoMsgWithoutChunk, "{what}"),
                (0 | 1, "empty") => {
                    assert_eq!(err_chunk(v, 7), HeaderError::Xdr(Error::Truncated { at: 16, need: 4 }), "{what}")
                }
                // RDMA_MSGP and RDMA_DONE: ERR_CHUNK whatever follows.
                (2 | 3, _) => assert_eq!(err_chunk(v, 7), HeaderError::Obsolete(proc), "{what}"),
                // RDMA_ERROR: never answered. ERR_VERS (1) with low <= high
                // completes the XID; anything else is undecodable.
                (4, "nomsg") => assert_eq!(
                    v,
                    Verdict::PeerError { xid: 7, error: PeerError::Vers { vers: 1, low: 0, high: 9 } },
                    "{what}"
                ),
                (4, _) => assert_eq!(v, Verdict::Discard(DiscardReason::UndecodableError), "{what}"),
                _ => assert_eq!(err_chunk(v, 7), HeaderError::UnknownProc(proc), "{what}"),
            }
        }
        // A well-formed RDMA_ERROR body after each procedure number.
        let b = bytes(&[7, 1, 32, proc, 2]);
        let v = judge(&b, &default());
        match proc {
            4 => assert_eq!(v, Verdict::PeerError { xid: 7, error: PeerError::Chunk }),
            0 | 1 => assert_eq!(err_chunk(v, 7), HeaderError::Xdr(Error::BadBool { value: 2, at: 16 })),
            2 | 3 => assert_eq!(err_chunk(v, 7), HeaderError::Obsolete(proc)),
            _ => assert_eq!(err_chunk(v, 7), HeaderError::UnknownProc(proc)),
        }
    }
}

// ---------------------------------------------------------------------------
// Segment lengths whose sum overflows 32 bits.
// ---------------------------------------------------------------------------

const TWICE_MAX: u64 = 2 * u32::MAX as u64;

#[test]
fn chunk_lengths_that_overflow_u32_when_summed_get_err_chunk_chunk_too_long_rfc8166_3_4_4() {
    let _g = serial();
    // Lengths are summed in 64 bits, so two segments of 0xffffffff make a
    // chunk of 0x1_ffff_fffe bytes, not 0xfffffffe: over the default limit
    // (here u32::MAX, the largest message a 32-bit position can address).
    let too_long = HeaderError::ChunkTooLong { len: TWICE_MAX, limit: u64::from(u32::MAX) };
    let m = u32::MAX;
    // A write chunk.
    let b = msg(&[0, 1, 2, 1, m, 0, 0, 2, m, 0, 0, 0, 0]);
    assert_eq!(err_chunk(judge(&b, &wide()), 7), too_long);
    // A reply chunk.
    let b = msg(&[0, 0, 1, 2, 1, m, 0, 0, 2, m, 0, 0]);
    assert_eq!(err_chunk(judge(&b, &wide()), 7), too_long);
    // A read chunk: two segments at the same position.
    let b = msg(&reads(&[(8, m), (8, m)]));
    assert_eq!(err_chunk(judge(&b, &wide()), 7), too_long);
    // One segment of 0xffffffff is exactly the limit.
    let b = msg(&[0, 1, 1, 1, m, 0, 0, 0, 0]);
    assert_eq!(chunk_len(&accept(judge(&b, &wide())).write_list().iter().next().unwrap()), u64::from(m));
}

#[test]
fn the_chunk_limit_applies_per_chunk_so_lengths_summed_across_chunks_are_accepted() {
    let _g = serial();
    let m = u32::MAX;
    // Two write chunks of 0xffffffff each and a reply chunk of the same:
    // 3 * (2^32 - 1) bytes in all, every chunk within the limit.
    let b = msg(&[0, 1, 1, 1, m, 0, 0, 1, 1, 2, m, 0, 0, 0, 1, 1, 3, m, 0, 0]);
    let h = accept(judge(&b, &wide()));
    let total: u64 = h.write_list().iter().map(|w| chunk_len(&w)).sum::<u64>() + chunk_len(&h.reply_chunk().unwrap());
    assert_eq!(total, 3 * u64::from(m));
}

#[test]
fn sixteen_maximal_segments_sum_without_wrapping_when_the_chunk_limit_is_lifted() {
    let _g = serial();
    let m = u32::MAX;
    let policy = ReceivePolicy {
        limits: HeaderLimits::default().max_chunk_len(u64::MAX).max_message_len(u64::MAX),
        ..Default::default()
    };
    let sixteen = 16 * u64::from(m);
    // A write chunk of 16 segments.
    let mut w = vec![0, 1, 16];
    for i in 0..16 {
        w.extend([i, m, 0, 0]);
    }
    w.extend([0, 0]);
    let b = msg(&w);
    let h = accept(judge(&b, &policy));
    assert_eq!(chunk_len(&h.write_list().iter().next().unwrap()), sixteen);
    // A read chunk of 16 segments at position 8: its end is far past 2^32,
    // so no chunk can follow it.
    let segs = vec![(8, m); 16];
    let b = msg(&reads(&segs));
    let h = accept(judge(&b, &policy));
    assert_eq!(h.read_chunks().next().map(|c| (c.segment_count(), c.len())), Some((16, sixteen)));
    let mut segs = vec![(8, m); 15];
    segs.push((0xffff_fffc, 4));
    let b = msg(&reads(&segs));
    assert_eq!(
        err_chunk(judge(&b, &policy), 7),
        HeaderError::OverlappingReadChunks { position: 0xffff_fffc, previous: 8, previous_len: 15 * u64::from(m) }
    );
}

#[test]
fn chunks_that_together_exceed_the_message_limit_get_err_chunk_before_anything_is_fetched() {
    let _g = serial();
    // The attack: a 100-byte header with three Read chunks of 4 GiB - 1 each asked a server
    // to fetch (and allocate) 12 GiB. The default limits refuse each chunk, and a receiver that
    // lifts the chunk limit still has the message limit.
    let m = u32::MAX;
    let b = msg(&reads(&[(8, m), (0x8000_0000, m - 0x8000_0000 + 8)]));
    assert_eq!(err_chunk(judge(&b, &default()), 7), HeaderError::ChunkTooLong { len: u64::from(m), limit: 2 << 20 });
    let limits = HeaderLimits::default().max_chunk_len(u64::MAX).max_message_len(1 << 20);
    let policy = ReceivePolicy { limits, ..Default::default() };
    // Read, Write and Reply chunks all count: 512 KiB + 256 KiB + 256 KiB is exactly the limit,
    // one byte more is refused.
    let (half, quarter) = (512 << 10, 256 << 10);
    let at_limit = msg(&[1, 8, 1, half, 0, 0, 0, 1, 1, 2, quarter, 0, 0, 0, 1, 1, 3, quarter, 0, 0]);
    assert!(matches!(judge(&at_limit, &policy), Verdict::Accept(_)));
    let over = msg(&[1, 8, 1, half, 0, 0, 0, 1, 1, 2, quarter, 0, 0, 0, 1, 1, 3, quarter + 1, 0, 0]);
    assert_eq!(err_chunk(judge(&over, &policy), 7), HeaderError::MessageTooLong { len: 1 << 20 | 1, limit: 1 << 20 });
}
