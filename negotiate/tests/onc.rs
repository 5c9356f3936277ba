//! `negotiate::onc` (issue 16): byte-exact call headers against hand-written words, round
//! trips, every truncation an error, peer lengths bounded without allocating beyond the input,
//! and the reply builders against `rpcrdma_v1`'s GARBAGE_ARGS and SYSTEM_ERR encoders.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use negotiate::onc::{
    self, AcceptStat, Auth, AuthStat, AuthSys, CallHeader, OncError, Rejected, Reply, ReplyHeader, XidSource,
};
use rpcrdma_v1::reassemble::{encode_garbage_args_reply, encode_system_err_reply, GARBAGE_ARGS_REPLY_LEN};

/// Records the largest allocation made by a thread that asked for it.
struct Largest;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
}
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHING.with(Cell::get) {
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if WATCHING.with(Cell::get) {
            LARGEST.fetch_max(new_size, Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Largest = Largest;

/// Runs `f` and returns its result and the largest single allocation it made. Only one test
/// watches at a time (the others' allocations are not counted: the flag is per thread).
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    LARGEST.store(0, Ordering::Relaxed);
    WATCHING.with(|w| w.set(true));
    let out = f();
    WATCHING.with(|w| w.set(false));
    (out, LARGEST.load(Ordering::Relaxed))
}

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn encoded(h: &CallHeader) -> Vec<u8> {
    let mut out = Vec::new();
    h.encode(&mut out).unwrap();
    out
}

fn sys(machine_name: &str, gids: Vec<u32>) -> Auth {
    Auth::Sys(AuthSys { stamp: 0x5eed, machine_name: machine_name.into(), uid: 1000, gid: 100, gids })
}

#[test]
fn auth_none_call_is_byte_exact() {
    let h = CallHeader::new(0x0102_0304, 100_003, 3, 6);
    assert_eq!(encoded(&h), words(&[0x0102_0304, 0, 2, 100_003, 3, 6, 0, 0, 0, 0]));
}

#[test]
fn auth_sys_call_is_byte_exact() {
    let h = CallHeader::new(7, 100_003, 4, 1).with_cred(sys("rpcrdma-rs", vec![100, 10]));
    let name = u32::from_be_bytes(*b"rpcr");
    let name2 = u32::from_be_bytes(*b"dma-");
    let name3 = u32::from_be_bytes(*b"rs\0\0");
    #[rustfmt::skip]
    let expected = words(&[
        7, 0, 2, 100_003, 4, 1,
        1, 40, // AUTH_SYS, body length: stamp, name (4 + 12), uid, gid, gids (4 + 8)
        0x5eed, 10, name, name2, name3, 1000, 100, 2, 100, 10,
        0, 0, // verifier AUTH_NONE
    ]);
    assert_eq!(encoded(&h), expected);
    assert_eq!(h.encoded_len(), Ok(expected.len()));

    // The examples' AUTH_SYS header (interop-tests/examples/common/onc_rpc.rs): uid 0, gid 0,
    // no gids, written out by hand.
    let h = CallHeader::new(9, 100_003, 3, 0).with_cred(Auth::Sys(AuthSys {
        stamp: 0x5eed,
        machine_name: "rpcrdma-rs".into(),
        ..AuthSys::default()
    }));
    #[rustfmt::skip]
    let expected = words(&[9, 0, 2, 100_003, 3, 0, 1, 32, 0x5eed, 10, name, name2, name3, 0, 0, 0, 0, 0]);
    assert_eq!(encoded(&h), expected);
}

/// Calls covering each flavor and the bounds at their limits.
fn calls() -> Vec<CallHeader> {
    let name255: String = "m".repeat(255);
    vec![
        CallHeader::new(1, 2, 3, 4),
        CallHeader::new(u32::MAX, 100_003, 4, 1).with_cred(sys("client", vec![])),
        CallHeader::new(5, 6, 7, 8).with_cred(sys("abc", vec![1])),
        CallHeader::new(5, 6, 7, 8).with_cred(sys(&name255, (0..16).collect())),
        CallHeader {
            verf: Auth::Other { flavor: 6, body: vec![0xaa; 400] },
            ..CallHeader::new(9, 10, 11, 12).with_cred(Auth::Other { flavor: 6, body: vec![1, 2, 3, 4, 5] })
        },
        // AUTH_NONE with a body is kept as sent.
        CallHeader::new(1, 1, 1, 1).with_cred(Auth::Other { flavor: 0, body: vec![7] }),
    ]
}

#[test]
fn calls_round_trip_with_their_arguments() {
    for h in calls() {
        let args = [0, 0, 0, 42, 0xff, 0xfe, 0xfd, 0xfc];
        let msg = h.message(&args).unwrap();
        let (back, at) = CallHeader::decode(&msg).unwrap();
        assert_eq!(back, h);
        assert_eq!(at, msg.len() - args.len());
        assert_eq!(&msg[at..], args);
        assert_eq!(h.encoded_len(), Ok(at));
    }
}

#[test]
fn every_truncated_call_header_is_an_error() {
    for h in calls() {
        let msg = encoded(&h);
        for len in 0..msg.len() {
            match CallHeader::decode(&msg[..len]) {
                Err(OncError::Truncated { field, have, need, .. }) => {
                    assert!(have < need, "{len}: {field} {have} {need}");
                }
                other => panic!("{h:?} cut at {len}: {other:?}"),
            }
        }
    }
}

/// Every reply builder, with what the decoder must say of it and the results that follow.
fn replies() -> Vec<(Vec<u8>, ReplyHeader, Vec<u8>)> {
    let accepted = |stat| Reply::Accepted { verf: Auth::None, stat };
    let mut out = Vec::new();
    let mut built = |f: &dyn Fn(&mut Vec<u8>), xid, reply, results: &[u8]| {
        out.clear();
        f(&mut out);
        (out.clone(), ReplyHeader { xid, reply }, results.to_vec())
    };
    vec![
        built(&|o| onc::reply_success(1, &[1, 2, 3, 4], o), 1, accepted(AcceptStat::Success), &[1, 2, 3, 4]),
        built(&|o| onc::reply_success(2, &[], o), 2, accepted(AcceptStat::Success), &[]),
        built(&|o| onc::reply_prog_unavail(3, o), 3, accepted(AcceptStat::ProgUnavail), &[]),
        built(
            &|o| onc::reply_prog_mismatch(4, 2, 3, o),
            4,
            accepted(AcceptStat::ProgMismatch { low: 2, high: 3 }),
            &[],
        ),
        built(&|o| onc::reply_proc_unavail(5, o), 5, accepted(AcceptStat::ProcUnavail), &[]),
        built(&|o| onc::reply_garbage_args(6, o), 6, accepted(AcceptStat::GarbageArgs), &[]),
        built(&|o| onc::reply_system_err(7, o), 7, accepted(AcceptStat::SystemErr), &[]),
        built(
            &|o| onc::reply_rpc_mismatch(8, 2, 2, o),
            8,
            Reply::Denied(Rejected::RpcMismatch { low: 2, high: 2 }),
            &[],
        ),
        built(
            &|o| onc::reply_auth_error(9, AuthStat::REJECTEDVERF, o),
            9,
            Reply::Denied(Rejected::AuthError(AuthStat::REJECTEDVERF)),
            &[],
        ),
    ]
}

#[test]
fn reply_builders_are_byte_exact() {
    let r = replies();
    let acc = |xid, stat: &[u32]| words(&[&[xid, 1, 0, 0, 0][..], stat].concat());
    assert_eq!(r[0].0, [acc(1, &[0]), vec![1, 2, 3, 4]].concat());
    assert_eq!(r[1].0, acc(2, &[0]));
    assert_eq!(r[2].0, acc(3, &[1]));
    assert_eq!(r[3].0, acc(4, &[2, 2, 3]));
    assert_eq!(r[4].0, acc(5, &[3]));
    assert_eq!(r[5].0, acc(6, &[4]));
    assert_eq!(r[6].0, acc(7, &[5]));
    assert_eq!(r[7].0, words(&[8, 1, 1, 0, 2, 2]));
    assert_eq!(r[8].0, words(&[9, 1, 1, 1, 4]));
}

#[test]
fn replies_decode_to_what_was_built() {
    for (msg, header, results) in replies() {
        let (back, at) = ReplyHeader::decode(&msg).unwrap();
        assert_eq!(back, header);
        assert_eq!(&msg[at..], results);
        match onc::results(&msg, header.xid) {
            Ok(r) => assert!(header.reply.is_success() && r == results),
            Err(OncError::NotSuccess(reply)) => assert_eq!(reply, header.reply),
            Err(e) => panic!("{e}"),
        }
        assert_eq!(
            onc::results(&msg, header.xid ^ 0x100),
            Err(OncError::XidMismatch { expected: header.xid ^ 0x100, got: header.xid })
        );
    }
}

#[test]
fn every_truncated_reply_is_an_error() {
    for (msg, _, results) in replies() {
        let header_len = msg.len() - results.len();
        for len in 0..header_len {
            assert!(
                matches!(ReplyHeader::decode(&msg[..len]), Err(OncError::Truncated { .. })),
                "{msg:?} cut at {len}: {:?}",
                ReplyHeader::decode(&msg[..len])
            );
        }
    }
}

#[test]
fn builders_match_rpcrdma_v1_encoders() {
    for xid in [0, 1, 7, 0x0102_0304, 0x8000_0000, u32::MAX] {
        let mut theirs = [0u8; GARBAGE_ARGS_REPLY_LEN];
        let mut ours = Vec::new();
        encode_garbage_args_reply(xid, &mut theirs).unwrap();
        onc::reply_garbage_args(xid, &mut ours);
        assert_eq!(ours, theirs);
        ours.clear();
        encode_system_err_reply(xid, &mut theirs).unwrap();
        onc::reply_system_err(xid, &mut ours);
        assert_eq!(ours, theirs);
    }
    // Builders append: what was in the buffer stays.
    let mut out = vec![9, 9];
    onc::reply_garbage_args(1, &mut out);
    assert_eq!(out[..2], [9, 9]);
    assert_eq!(out.len(), 2 + GARBAGE_ARGS_REPLY_LEN);
}

/// A call header up to its credential, then `cred` words, then nothing.
fn call_with_cred_words(cred: &[u32]) -> Vec<u8> {
    words(&[&[1, 0, 2, 3, 4, 5][..], cred].concat())
}

#[test]
fn oversized_lengths_are_refused_without_allocating_by_them() {
    let cases: Vec<(Vec<u8>, &str, u32)> = vec![
        // An opaque_auth body over 400 bytes, with and without the bytes to back it.
        (call_with_cred_words(&[6, 401]), "cred.body", 401),
        ([call_with_cred_words(&[6, 404]), vec![0; 404]].concat(), "cred.body", 404),
        (call_with_cred_words(&[6, u32::MAX]), "cred.body", u32::MAX),
        // A machine name over 255 bytes within a 400-byte body.
        ([call_with_cred_words(&[1, 400, 0, 256]), vec![b'm'; 392]].concat(), "cred.machinename", 256),
        (call_with_cred_words(&[1, 20, 0, u32::MAX, 0, 0, 0]), "cred.machinename", u32::MAX),
        // More than 16 gids.
        (call_with_cred_words(&[1, 20, 0, 0, 0, 0, 17]), "cred.gids", 17),
        (call_with_cred_words(&[1, 20, 0, 0, 0, 0, u32::MAX]), "cred.gids", u32::MAX),
        // The verifier, too.
        (words(&[1, 0, 2, 3, 4, 5, 0, 0, 6, 0x7fff_ffff]), "verf.body", 0x7fff_ffff),
    ];
    for (msg, field, len) in cases {
        let (result, largest) = largest_allocation(|| CallHeader::decode(&msg));
        assert_eq!(
            result,
            Err(OncError::TooLong {
                field,
                len,
                max: if field.ends_with("body") {
                    400
                } else if field.ends_with("gids") {
                    16
                } else {
                    255
                }
            })
        );
        assert!(largest <= msg.len(), "{field}: allocated {largest} bytes for a {}-byte message", msg.len());
    }
    // Bounds the input cannot back: 16 gids stated, 2 present; a name of 200 bytes in a
    // body of 20. Truncated, and nothing allocated beyond the input.
    let short_gids = call_with_cred_words(&[1, 28, 0, 0, 0, 0, 16, 1, 2]);
    let (result, largest) = largest_allocation(|| CallHeader::decode(&short_gids));
    assert!(matches!(result, Err(OncError::Truncated { field: "cred.gids", .. })), "{result:?}");
    assert!(largest <= short_gids.len());
    let short_name = call_with_cred_words(&[1, 20, 0, 200, 0, 0, 0]);
    assert!(matches!(CallHeader::decode(&short_name), Err(OncError::Truncated { field: "cred.machinename", .. })));
    // A reply's verifier.
    let reply = words(&[1, 1, 0, 6, 401]);
    assert_eq!(ReplyHeader::decode(&reply), Err(OncError::TooLong { field: "verf.body", len: 401, max: 400 }));
    // A full-sized AUTH_SYS decodes within its input, too.
    let msg = encoded(&calls()[3]);
    let (result, largest) = largest_allocation(|| CallHeader::decode(&msg));
    assert!(result.is_ok());
    assert!(largest <= msg.len(), "{largest}");
}

#[test]
fn malformed_headers_name_the_field() {
    // Not a call.
    assert_eq!(CallHeader::decode(&words(&[1, 1])), Err(OncError::Unexpected { field: "msg_type", value: 1 }));
    // RPC version 3: the XID to answer RPC_MISMATCH with.
    assert_eq!(CallHeader::decode(&words(&[0x77, 0, 3])), Err(OncError::RpcVersion { xid: 0x77, rpcvers: 3 }));
    // AUTH_SYS with a byte after its parameters, and with a name that is not UTF-8.
    let trailing = call_with_cred_words(&[1, 24, 0, 0, 0, 0, 0, 0xdead, 0, 0]);
    assert_eq!(CallHeader::decode(&trailing), Err(OncError::Trailing { field: "cred.trailing bytes", extra: 4 }));
    let latin1 = call_with_cred_words(&[1, 24, 0, 1, 0xff00_0000, 0, 0, 0, 0, 0]);
    let e = CallHeader::decode(&latin1).unwrap_err();
    assert_eq!(e, OncError::NotUtf8 { field: "cred.machinename" });
    assert!(e.in_auth());
    // Replies: unknown discriminants.
    assert_eq!(ReplyHeader::decode(&words(&[1, 0])), Err(OncError::Unexpected { field: "msg_type", value: 0 }));
    assert_eq!(ReplyHeader::decode(&words(&[1, 1, 2])), Err(OncError::Unexpected { field: "reply_stat", value: 2 }));
    assert_eq!(
        ReplyHeader::decode(&words(&[1, 1, 0, 0, 0, 6])),
        Err(OncError::Unexpected { field: "accept_stat", value: 6 })
    );
    assert_eq!(
        ReplyHeader::decode(&words(&[1, 1, 1, 2])),
        Err(OncError::Unexpected { field: "reject_stat", value: 2 })
    );
    // A reply's verifier of another flavor is kept.
    let reply = words(&[1, 1, 0, 6, 4, 0xabcd, 0, 0xee]);
    let (h, at) = ReplyHeader::decode(&reply).unwrap();
    assert_eq!(
        h.reply,
        Reply::Accepted { verf: Auth::Other { flavor: 6, body: words(&[0xabcd]) }, stat: AcceptStat::Success }
    );
    assert_eq!(&reply[at..], words(&[0xee]));
}

#[test]
fn encoders_refuse_what_breaks_the_bounds_and_append_nothing() {
    let too_long_name = CallHeader::new(1, 2, 3, 4).with_cred(sys(&"m".repeat(256), vec![]));
    let too_many_gids = CallHeader::new(1, 2, 3, 4).with_cred(sys("m", (0..17).collect()));
    let too_big_verf =
        CallHeader { verf: Auth::Other { flavor: 6, body: vec![0; 401] }, ..CallHeader::new(1, 2, 3, 4) };
    for (h, field, len, max) in [
        (too_long_name, "authsys_parms.machinename", 256, 255),
        (too_many_gids, "authsys_parms.gids", 17, 16),
        (too_big_verf, "opaque_auth.body", 401, 400),
    ] {
        let mut out = vec![1];
        assert_eq!(h.encode(&mut out), Err(OncError::TooLong { field, len, max }));
        assert_eq!(out, [1]);
        assert_eq!(h.message(&[]), Err(OncError::TooLong { field, len, max }));
    }
}

#[test]
fn xids_are_distinct_across_threads_and_skip_zero() {
    let xids = XidSource::new(u32::MAX - 1000);
    let all: Vec<u32> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4).map(|_| s.spawn(|| (0..1000).map(|_| xids.next()).collect::<Vec<_>>())).collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let mut sorted = all.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 4000);
    assert!(!all.contains(&0));
    // It wrapped: 1001 values at the top, 2999 from 1.
    assert_eq!(sorted[0], 1);
    assert_eq!(sorted[2998], 2999);
    assert_eq!(sorted[2999], u32::MAX - 1000);
    let a = XidSource::seeded();
    assert_ne!(a.next(), 0);
}
