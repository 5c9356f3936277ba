//! One RPC exchange at a time over a real verbs connection, Requester and Responder in two
//! threads, written once generic over the backend and instantiated per backend at the bottom
//! (`instantiate!`, as verbs/tests/semantics.rs does). Every exchange compares the reassembled
//! call and reply with the originals, checks the forms chosen, and finally checks that the
//! Requester's chunk memory is closed to the Responder (an RDMA to one of its rkeys fails).

use std::time::Duration;

use negotiate::datapath::*;
use negotiate::thresholds::SegmentLimits;
use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_call::{CallForm, InlineThresholds};
use rpcrdma_v1::marshal_reply::ReplyForm;
use rpcrdma_v1::ulb::{roundup, OpaqueAtUlb};
use rpcrdma_v1::verdict::{ErrorReply, PeerError, ReceivePolicy};
use rpcrdma_v1::Version;
use rpcrdma_v2::options::Registry;
use rpcrdma_verbs::*;

/// Generous: a test that waits this long has already failed.
const T: Duration = Duration::from_secs(10);
/// Small thresholds, so that kilobyte messages take the chunked and long forms.
const SMALL: InlineThresholds = InlineThresholds { call: 1024, reply: 1024 };
/// Receive buffers per side.
const CREDITS: u32 = 4;
/// Where the DDP-eligible opaque's length word sits, in calls and replies.
const OPAQUE_AT: usize = 16;

/// A requester and a responder connection, each with its receive buffers posted.
struct Ends<B: Backend> {
    req: Transport<B>,
    req_pool: ReceivePool<B>,
    resp: Transport<B>,
    resp_pool: ReceivePool<B>,
}

fn connect<B: Backend>(b: &B) -> Ends<B> {
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let (cpd, spd) = (b.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (client, server) = std::thread::scope(|s| {
        let c = s.spawn(|| b.connect(&cpd, &addr, &[], QpCaps::default(), T).unwrap().0);
        let server = listener.get_request(T).unwrap().accept(&spd, &[], QpCaps::default()).unwrap();
        (c.join().unwrap(), server)
    });
    let req = Transport::new(cpd, client, T);
    let resp = Transport::new(spd, server, T);
    let req_pool = ReceivePool::new(&req, CREDITS as usize, SMALL.reply).unwrap();
    let resp_pool = ReceivePool::new(&resp, CREDITS as usize, SMALL.call).unwrap();
    Ends { req, req_pool, resp, resp_pool }
}

/// The received message's header, accepted by the verdict of `version`.
fn accept(bytes: &[u8], version: u32) -> Header<'_> {
    match version {
        1 => match rpcrdma_v1::verdict::receive(bytes, &ReceivePolicy::default()) {
            rpcrdma_v1::verdict::Verdict::Accept(h) => h,
            other => panic!("version 1 verdict {other:?}"),
        },
        _ => match rpcrdma_v2::verdict::receive(bytes, &rpcrdma_v2::verdict::default_policy(), &mut Registry::new()) {
            rpcrdma_v2::verdict::Verdict::Accept(h) => h,
            other => panic!("version 2 verdict {other:?}"),
        },
    }
}

/// An RPC message: XID, `msg_type`, filler words up to `len` bytes; with `opaque`, a
/// DDP-eligible `opaque<>` whose length word is at [`OPAQUE_AT`], then two trailer words.
fn message(xid: u32, msg_type: u32, len: usize, opaque: Option<&[u8]>) -> Vec<u8> {
    let mut m = [xid, msg_type].iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
    let filler = |m: &mut Vec<u8>, to: usize| {
        while m.len() < to {
            let i = m.len() as u32;
            m.extend_from_slice(&(i.wrapping_mul(0x9e37_79b9) ^ xid).to_be_bytes());
        }
    };
    match opaque {
        None => filler(&mut m, len),
        Some(data) => {
            filler(&mut m, OPAQUE_AT);
            m.extend_from_slice(&(data.len() as u32).to_be_bytes());
            m.extend_from_slice(data);
            m.resize(roundup(m.len()), 0);
            let end = m.len() + 8;
            filler(&mut m, end);
        }
    }
    m
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A ULB whose calls and replies may carry one DDP-eligible opaque at [`OPAQUE_AT`].
fn ulb(call_opaque: bool, reply_opaque: bool, max_reply: usize) -> OpaqueAtUlb {
    OpaqueAtUlb {
        call_opaque: call_opaque.then_some(OPAQUE_AT),
        reply_opaque: reply_opaque.then_some(OPAQUE_AT),
        max_result: 8192,
        max_reply,
    }
}

/// One exchange and what it should look like.
struct Case {
    version: u32,
    call: Vec<u8>,
    reply: Vec<u8>,
    ulb: OpaqueAtUlb,
    remote_invalidation: bool,
    call_form: CallForm,
    reply_form: ReplyForm,
    reduced_results: usize,
    /// How the call's chunks may be cut ([`SegmentLimits::NONE`] but where a case says).
    segments: SegmentLimits,
}

/// A segment of a call, as the Responder sees it: (handle, address, length, readable).
type Segment = (u32, u64, u32, bool);

/// Every segment of every chunk of a call header.
fn segments(call: &Header<'_>) -> Vec<Segment> {
    let reads = call.read_list().iter().map(|r| (r.target.handle, r.target.offset, r.target.length, true));
    let writes = call.write_list().iter().flat_map(|c| c.target.iter().map(|s| (s.handle, s.offset, s.length, false)));
    let reply =
        call.reply_chunk().into_iter().flat_map(|c| c.target.iter().map(|s| (s.handle, s.offset, s.length, false)));
    reads.chain(writes).chain(reply).collect()
}

/// What one exchange did.
struct Outcome {
    /// The call's segments, from the header the Responder received.
    segments: Vec<Segment>,
    /// The rkey the reply's Receive completion reported invalidated.
    invalidated: Option<u32>,
    /// The returned lengths of the reply's Write list, per chunk and segment.
    write_lengths: Vec<Vec<u32>>,
}

/// The Responder's half: receive, fetch and check the call, send the reply.
fn serve<B: Backend>(e: &Ends<B>, case: &Case) -> (Vec<Segment>, ReplySent) {
    let got = e.resp_pool.receive(&e.resp).unwrap();
    let call = accept(&got.bytes, case.version);
    assert_eq!(call.version().wire(), case.version);
    let mut message = Vec::new();
    fetch_call(&e.resp, &call, &case.ulb, &mut message).unwrap();
    assert_eq!(message, case.call, "the reassembled call");
    let params = ReplyParams {
        version: Version::from_wire(case.version),
        credits: CREDITS,
        credit_owed: false,
        reply_inline_threshold: SMALL.reply,
        remote_invalidation: case.remote_invalidation,
        draft07: false,
        invalidate: None,
    };
    let sent = send_reply(&e.resp, &call, &message, &case.reply, &case.ulb, &params).unwrap();
    (segments(&call), sent)
}

fn call_params(version: u32) -> CallParams {
    CallParams {
        version: Version::from_wire(version),
        credits: CREDITS,
        thresholds: SMALL,
        dialect: None,
        remote_invalidation: false,
        segments: SegmentLimits::NONE,
    }
}

/// One whole exchange on `e`, checked against `case`.
fn exchange_on<B: Backend>(e: &Ends<B>, case: &Case) -> Outcome {
    std::thread::scope(|s| {
        let responder = s.spawn(|| serve(e, case));
        let params = CallParams { segments: case.segments, ..call_params(case.version) };
        let pending = send_call(&e.req, &case.call, &case.ulb, &params).unwrap();
        assert_eq!(pending.form(), case.call_form);
        let mut rkeys: Vec<u32> = pending.rkeys().collect();
        let got = e.req_pool.receive(&e.req).unwrap();
        let reply = accept(&got.bytes, case.version);
        assert_eq!((reply.xid(), reply.version().wire()), (pending.xid(), case.version));
        let write_lengths = reply.write_list().iter().map(|c| c.target.iter().map(|s| s.length).collect()).collect();
        let mut message = Vec::new();
        pending.complete(&e.req, &case.call, &reply, got.invalidated_rkey, &case.ulb, &mut message).unwrap();
        assert_eq!(message, case.reply, "the reassembled reply");

        let (segments, sent) = responder.join().unwrap();
        assert_eq!((sent.form, sent.reduced_results), (case.reply_form, case.reduced_results));
        assert_eq!(sent.invalidated, got.invalidated_rkey);
        let mut advertised: Vec<u32> = segments.iter().map(|s| s.0).collect();
        rkeys.sort_unstable();
        advertised.sort_unstable();
        advertised.dedup();
        assert_eq!(rkeys, advertised, "one window per chunk, each advertised");
        Outcome { segments, invalidated: got.invalidated_rkey, write_lengths }
    })
}

/// Asserts the Requester closed `seg` to the Responder: an RDMA Read or Write through it fails.
/// That tears the connection down, so it is the last thing done on it.
fn assert_closed<B: Backend>(e: &Ends<B>, seg: Segment) {
    let (rkey, addr, len, readable) = seg;
    let local = e.resp.pd().register(vec![0; len.max(1) as usize], Access::LOCAL_WRITE).unwrap();
    let id = e.resp.wr_id();
    let remote = RemoteBuf { addr, rkey };
    if readable {
        e.resp.qp().post_read(id, &[Sge::whole(&local)], remote).unwrap();
    } else {
        e.resp.qp().post_write(id, &[Sge::whole(&local)], remote).unwrap();
    }
    match e.resp.wait(id) {
        Err(DataPathError::Completion(c)) => assert_eq!(c.status, Status::RemoteAccessError, "{c:?}"),
        other => panic!("RDMA through rkey {rkey:#x} after the call: {other:?}"),
    }
}

/// Runs `case` on a fresh connection, then checks the Requester's memory is closed: the
/// invalidated window when the reply was a Send with Invalidate, else the last segment.
fn exchange<B: Backend>(b: &B, case: &Case) -> Outcome {
    let e = connect(b);
    let out = exchange_on(&e, case);
    let probe = match out.invalidated {
        Some(k) => out.segments.iter().find(|s| s.0 == k).copied(),
        None => out.segments.last().copied(),
    };
    if let Some(probe) = probe {
        assert_closed(&e, probe);
    }
    out
}

// ---- the cases ----

/// A message body: `Plain(len)` bytes in all, or a DDP-eligible opaque holding these bytes.
enum Body {
    Plain(usize),
    Opaque(Vec<u8>),
}

impl Body {
    fn message(&self, xid: u32, msg_type: u32) -> Vec<u8> {
        match self {
            Body::Plain(len) => message(xid, msg_type, *len, None),
            Body::Opaque(d) => message(xid, msg_type, 0, Some(d)),
        }
    }
}

/// The call form, reply form and reduced results an exchange must show.
type Forms = (CallForm, ReplyForm, usize);

/// Runs one exchange per version (1 and 2) on fresh connections, XIDs from `xid`, remote
/// invalidation as `remote_invalidation` says.
fn each_version<B: Backend>(
    b: &B,
    xid: u32,
    call: Body,
    reply: Body,
    ulb: OpaqueAtUlb,
    forms: Forms,
    remote_invalidation: bool,
) -> Vec<Outcome> {
    [1, 2]
        .map(|version| {
            let case = Case {
                version,
                call: call.message(xid + version, 0),
                reply: reply.message(xid + version, 1),
                ulb,
                remote_invalidation,
                call_form: forms.0,
                reply_form: forms.1,
                reduced_results: forms.2,
                segments: SegmentLimits::NONE,
            };
            exchange(b, &case)
        })
        .into()
}

fn short_call_and_reply<B: Backend>(b: &B) {
    let forms = (CallForm::Short, ReplyForm::Inline, 0);
    for out in each_version(b, 0x100, Body::Plain(200), Body::Plain(120), ulb(false, false, 512), forms, true) {
        assert!(out.segments.is_empty() && out.invalidated.is_none());
    }
}

/// A 3001-byte DDP-eligible argument at Position 20 goes in a Read chunk (RFC 8166 3.5.2).
fn chunked_call_with_read_chunk_at_nonzero_position<B: Backend>(b: &B) {
    let forms = (CallForm::Chunked, ReplyForm::Inline, 0);
    let call = Body::Opaque(data(3001, 7));
    for out in each_version(b, 0x200, call, Body::Plain(64), ulb(true, false, 512), forms, false) {
        assert_eq!(out.segments.len(), 1);
        assert_eq!(out.segments[0].2, 3001, "no padding in the chunk (3.4.5.2)");
    }
}

/// draft-ietf-nfsv4-rpcrdma-version-two-07 sections 5.2.3 and 5.2.4: under a responder's
/// Maximum Segment Size of 1000 bytes, a 3001-byte Read chunk goes as four segments of its one
/// window (1000, 1000, 1000 and 1 bytes, back to back, one handle: remote invalidation still
/// covers the chunk), which the responder reads as the one chunk they make; under a Maximum
/// Segment Count of 3 the same call is not sent, and says why, and the connection carries the
/// next call. A one-byte segment size is refused by the count the call's 1024-byte Send could
/// list (64), however many the responder states.
fn a_chunk_is_cut_to_the_responders_segment_size_and_count<B: Backend>(b: &B) {
    let e = connect(b);
    let under = |max_count| SegmentLimits { max_size: 1000, max_count };
    let case = |xid: u32, segments| Case {
        version: 1,
        call: Body::Opaque(data(3001, 9)).message(xid, 0),
        reply: Body::Plain(64).message(xid, 1),
        ulb: ulb(true, false, 512),
        remote_invalidation: false,
        call_form: CallForm::Chunked,
        reply_form: ReplyForm::Inline,
        reduced_results: 0,
        segments,
    };
    let out = exchange_on(&e, &case(0x250, under(16)));
    let lengths: Vec<u32> = out.segments.iter().map(|s| s.2).collect();
    assert_eq!(lengths, [1000, 1000, 1000, 1]);
    let handle = out.segments[0].0;
    assert!(out.segments.iter().all(|s| s.0 == handle), "one window: {:?}", out.segments);
    let addrs: Vec<u64> = out.segments.iter().map(|s| s.1 - out.segments[0].1).collect();
    assert_eq!(addrs, [0, 1000, 2000, 3000], "back to back");

    let refused = case(0x251, under(3));
    let params = CallParams { segments: refused.segments, ..call_params(1) };
    match send_call(&e.req, &refused.call, &refused.ulb, &params) {
        Err(e @ DataPathError::TooManySegments { segments: 4, most: 3, max_size: 1000 }) => {
            assert!(e.to_string().contains("4 segments of at most 1000 bytes"), "{e}");
        }
        other => panic!("{:?}", other.map(|p| p.xid())),
    }
    // A segment size of one byte would take a segment per byte: refused by its count before
    // any segment is listed, whatever the count a peer states.
    let params = CallParams { segments: SegmentLimits { max_size: 1, max_count: u32::MAX }, ..call_params(1) };
    match send_call(&e.req, &refused.call, &refused.ulb, &params) {
        Err(DataPathError::TooManySegments { segments: 3001, most: 64, max_size: 1 }) => {}
        other => panic!("{:?}", other.map(|p| p.xid())),
    }
    exchange_on(&e, &case(0x252, under(16)));
}

/// A 3000-byte call with nothing DDP-eligible goes whole in a Position-Zero Read chunk.
fn long_call_in_position_zero_chunk<B: Backend>(b: &B) {
    let forms = (CallForm::Long, ReplyForm::Inline, 0);
    for out in each_version(b, 0x300, Body::Plain(3000), Body::Plain(64), ulb(false, false, 512), forms, false) {
        assert_eq!(out.segments.len(), 1);
        assert_eq!(out.segments[0].2, 3000);
    }
}

/// A 5001-byte DDP-eligible result goes by RDMA Write into the Write chunk (3.4.6), the reply
/// stays inline, and the Requester invalidates the window itself (no remote invalidation).
fn reply_through_write_chunk<B: Backend>(b: &B) {
    let forms = (CallForm::Short, ReplyForm::Inline, 1);
    let reply = Body::Opaque(data(5001, 3));
    for out in each_version(b, 0x400, Body::Plain(96), reply, ulb(false, true, 256), forms, false) {
        assert_eq!(out.write_lengths, [vec![5001]], "the Write list returns the result's length");
        assert_eq!(out.invalidated, None);
    }
}

/// A 3000-byte reply with nothing DDP-eligible goes in the Reply chunk (3.5.3).
fn long_reply_through_reply_chunk<B: Backend>(b: &B) {
    let forms = (CallForm::Short, ReplyForm::ReplyChunk, 0);
    for out in each_version(b, 0x500, Body::Plain(96), Body::Plain(3000), ulb(false, false, 4096), forms, false) {
        assert_eq!(out.segments.len(), 1);
        assert_eq!(out.segments[0].2, 4096);
    }
}

/// The reply has no result (think of an NFS READ that failed): the provided Write chunk comes
/// back with length 0 (3.4.6).
fn unused_write_chunk_is_returned_empty<B: Backend>(b: &B) {
    let forms = (CallForm::Short, ReplyForm::Inline, 0);
    for out in each_version(b, 0x600, Body::Plain(96), Body::Plain(8), ulb(false, true, 256), forms, false) {
        assert_eq!(out.write_lengths, [vec![0]]);
    }
}

/// With remote invalidation negotiated and one rkey for all the call's chunks, the reply is a
/// Send with Invalidate of that rkey (RFC 8797 4.1); the Requester skips its Local Invalidate
/// and the window is dead (checked by `exchange`).
fn send_with_invalidate_kills_the_window<B: Backend>(b: &B) {
    let forms = (CallForm::Short, ReplyForm::Inline, 1);
    let reply = Body::Opaque(data(2000, 9));
    for out in each_version(b, 0x700, Body::Plain(96), reply, ulb(false, true, 256), forms, true) {
        assert_eq!(out.invalidated, Some(out.segments[0].0));
    }
}

/// Two chunks with two rkeys: no single STag belongs to the call alone, so no Send with
/// Invalidate even when negotiated (docs/design.md's Linux rule); both windows are closed locally.
fn no_send_with_invalidate_when_chunks_use_several_rkeys<B: Backend>(b: &B) {
    let forms = (CallForm::Chunked, ReplyForm::Inline, 1);
    let (call, reply) = (Body::Opaque(data(2500, 1)), Body::Opaque(data(1500, 2)));
    for out in each_version(b, 0x800, call, reply, ulb(true, true, 256), forms, true) {
        assert_eq!(out.segments.len(), 2);
        assert_eq!(out.invalidated, None);
    }
}

/// An RDMA_ERROR reply: the Requester decodes it and abandons the call, whose windows close.
fn rdma_error_reply_releases_the_call<B: Backend>(b: &B) {
    for version in [1, 2] {
        let e = connect(b);
        let call = message(0x900 + version, 0, 3000, None);
        let ulb = ulb(false, false, 256);
        let segs = std::thread::scope(|s| {
            let responder = s.spawn(|| {
                let got = e.resp_pool.receive(&e.resp).unwrap();
                let call = accept(&got.bytes, version);
                send_error(&e.resp, ErrorReply::err_chunk(call.xid(), Version::from_wire(version), CREDITS).as_bytes())
                    .unwrap();
                segments(&call)
            });
            let pending = send_call(&e.req, &call, &ulb, &call_params(version)).unwrap();
            let got = e.req_pool.receive(&e.req).unwrap();
            assert_eq!(got.invalidated_rkey, None, "error replies never invalidate");
            let xid = match version {
                1 => match rpcrdma_v1::verdict::receive(&got.bytes, &ReceivePolicy::default()) {
                    rpcrdma_v1::verdict::Verdict::PeerError { xid, error: PeerError::Chunk } => xid,
                    other => panic!("{other:?}"),
                },
                _ => {
                    let policy = rpcrdma_v2::verdict::default_policy();
                    match rpcrdma_v2::verdict::receive(&got.bytes, &policy, &mut Registry::new()) {
                        rpcrdma_v2::verdict::Verdict::PeerError { xid, error } => {
                            assert_eq!(error, rpcrdma_v2::verdict::PeerError::BAD_HEADER);
                            xid
                        }
                        other => panic!("{other:?}"),
                    }
                }
            };
            assert_eq!(xid, pending.xid());
            pending.abandon(&e.req, got.invalidated_rkey).unwrap();
            responder.join().unwrap()
        });
        assert_eq!(segs.len(), 1);
        assert_closed(&e, segs[0]);
    }
}

/// More exchanges than receive buffers on one connection, both versions, remote invalidation
/// negotiated: the pools re-post; calls whose chunks share one rkey are invalidated remotely,
/// the others locally, and neither disturbs the next call. Each side registers a Send buffer
/// once and reuses it for every later message (issue 14: a registration per Send is what a
/// small message cost most on a real device).
fn many_exchanges_reuse_the_receive_buffers<B: Backend>(b: &B) {
    let e = connect(b);
    let mut last = None;
    for i in 0..(3 * CREDITS) {
        // Even: a Chunked call (Read chunk and Write chunk, two rkeys); odd: a Short one (the
        // Write chunk alone, one rkey).
        let chunked = i % 2 == 0;
        let argument = data(1500 + i as usize, i as u8);
        let case = Case {
            version: 1 + i % 2,
            call: message(0xa00 + i, 0, 96, chunked.then_some(&argument[..])),
            reply: message(0xa00 + i, 1, 0, Some(&data(900 + i as usize, i as u8))),
            ulb: ulb(chunked, true, 256),
            remote_invalidation: true,
            call_form: if chunked { CallForm::Chunked } else { CallForm::Short },
            reply_form: ReplyForm::Inline,
            reduced_results: 1,
            segments: SegmentLimits::NONE,
        };
        let out = exchange_on(&e, &case);
        assert_eq!(out.invalidated.is_some(), !chunked);
        last = out.segments.first().copied();
    }
    assert_eq!(e.req_pool.len(), CREDITS as usize);
    let registered = (e.req.send_buffers_registered(), e.resp.send_buffers_registered());
    assert!(registered.0 <= 2 && registered.1 <= 2, "{} exchanges registered {registered:?} Send buffers", 3 * CREDITS);
    assert_closed(&e, last.unwrap());
}

/// A call the Responder cannot answer within the Requester's chunks (no Reply chunk for a long
/// reply) fails to marshal with an `ERR_CHUNK` error code, and nothing was sent.
fn reply_too_long_for_the_chunks_is_err_chunk<B: Backend>(b: &B) {
    let e = connect(b);
    let ulb = ulb(false, false, 256);
    let call = message(0xb00, 0, 64, None);
    let call_message = &call;
    std::thread::scope(|s| {
        let responder = s.spawn(|| {
            let got = e.resp_pool.receive(&e.resp).unwrap();
            let call = accept(&got.bytes, 1);
            let params = ReplyParams {
                version: Version::ONE,
                credits: 1,
                credit_owed: false,
                reply_inline_threshold: 1024,
                remote_invalidation: false,
                draft07: false,
                invalidate: None,
            };
            match send_reply(&e.resp, &call, call_message, &message(0xb00, 1, 2048, None), &ulb, &params) {
                Err(DataPathError::Reply(r)) => assert!(r.errcode().is_some(), "{r:?}"),
                other => panic!("{other:?}"),
            }
            send_error(&e.resp, ErrorReply::err_chunk(0xb00, Version::ONE, 1).as_bytes()).unwrap();
        });
        let pending = send_call(&e.req, &call, &ulb, &call_params(1)).unwrap();
        let got = e.req_pool.receive(&e.req).unwrap();
        assert!(matches!(
            rpcrdma_v1::verdict::receive(&got.bytes, &ReceivePolicy::default()),
            rpcrdma_v1::verdict::Verdict::PeerError { xid: 0xb00, error: PeerError::Chunk }
        ));
        pending.abandon(&e.req, None).unwrap();
        responder.join().unwrap();
    });
}

/// Receive completions set aside while the Responder waits for its own work requests (as a
/// server does for its reply's Send while the next calls arrive) come out oldest first, so
/// under steady arrivals no message is overtaken again and again. Before, taking the first
/// match and moving the newest into its place (`swap_remove`) served the newest message next
/// and left older ones set aside for as long as new ones kept coming: in the 64 x 10,000 load
/// over TCP, calls that arrived in a burst waited the requester's whole 60 s timeout, which
/// then closed the connection.
fn receives_set_aside_come_out_oldest_first_under_steady_arrivals<B: Backend>(b: &B) {
    let e = connect(b);
    let scratch = e.resp.pd().register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    // A Send the Requester sees complete only once it has landed in a Responder Receive.
    let send = |n: u32| send_error(&e.req, &message(0xc00 + n, 0, 32, None)).unwrap();
    // The Responder waits for a work request of its own, reaping (and setting aside) every
    // Receive completion queued before it.
    let wait_own = || {
        let id = e.resp.wr_id();
        e.resp.qp().post_bind_window(id, &scratch, 0, 64, Access::REMOTE_READ).unwrap();
        e.resp.wait(id).unwrap();
    };
    let backlog = CREDITS - 1;
    for n in 0..backlog {
        send(n);
    }
    wait_own();
    let mut order = Vec::new();
    for n in backlog..backlog + 4 * CREDITS {
        let got = e.resp_pool.receive(&e.resp).unwrap();
        order.push(u32::from_be_bytes(got.bytes[..4].try_into().unwrap()) - 0xc00);
        // One more arrives while the Responder is busy with its own work again.
        send(n);
        wait_own();
    }
    assert_eq!(order, (0..4 * CREDITS).collect::<Vec<_>>(), "messages in arrival order");
}

/// An arm told that a message is there already (`Arm::Waiting`: receive it) leaves the waker
/// armed before in place: an async client's one armed task counts on being woken by the next
/// message nobody's thread waits for, while other tasks arm, are told to look, and look. Here
/// the message is reaped and set aside by `receives_waiting`; the first waker is the one it
/// wakes, and the second, told to look, is never woken.
fn an_arm_told_to_look_leaves_the_waker_armed_before<B: Backend>(b: &B) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};
    #[derive(Default)]
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let e = connect(b);
    let (first, second) = (Arc::new(Count::default()), Arc::new(Count::default()));
    let (first_waker, second_waker) = (Waker::from(first.clone()), Waker::from(second.clone()));
    assert_eq!(e.resp.arm_receive(&first_waker), Arm::Armed);
    // Complete once it has landed in a Responder Receive, whose completion fires the first
    // waker (the queue pair's arm).
    send_error(&e.req, &message(0xd00, 0, 32, None)).unwrap();
    assert_eq!(e.resp.arm_receive(&second_waker), Arm::Waiting, "the message is there: look");
    // Reaped and set aside, for no thread: the waker armed for messages is woken.
    assert_eq!(e.resp.receives_waiting(), 1);
    let deadline = std::time::Instant::now() + T;
    while first.0.load(Ordering::SeqCst) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(first.0.load(Ordering::SeqCst), 2, "woken by the completion, then by the message set aside");
    assert_eq!(second.0.load(Ordering::SeqCst), 0, "told to look, it was not armed");
    assert_eq!(&e.resp_pool.receive_within(&e.resp, T).unwrap().bytes[..4], &0xd00u32.to_be_bytes());
}

/// Instantiates every case above as a `#[test]` for one backend.
/// A Read chunk from a requester other than ours: one 4099-byte opaque split into three
/// segments of odd lengths in two regions, its padding left out (RFC 8166 3.4.5, 3.4.5.2). The
/// Responder reads each segment straight to its place in the call message (`fetch_call`
/// registers the caller's buffer for the Reads), and the message is the one `reassemble_call`
/// builds, whatever the buffer held before: longer garbage, or nothing.
fn foreign_read_list_lands_in_place<B: Backend>(b: &B) {
    use rpcrdma_v1::reassemble::reassemble_call;
    use rpcrdma_v1::rt::{List, Xdr};
    use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg, RpcRdmaHeader, XdrRdmaSegment, XdrReadChunk};

    let e = connect(b);
    let argument = data(4099, 11);
    // Segments 1 and 2 from region A (offset 7 onwards), segment 3 from region B.
    let mut a = vec![0xEE; 7];
    a.extend_from_slice(&argument[..4000]);
    let a = e.req.pd().register(a, Access::REMOTE_READ).unwrap();
    let b_region = e.req.pd().register(argument[4000..].to_vec(), Access::REMOTE_READ).unwrap();
    let seg = |r: &B::Region, at: usize, len: u32| XdrReadChunk {
        position: 12,
        target: XdrRdmaSegment { handle: r.rkey(), length: len, offset: r.addr() + at as u64 },
    };
    let reads = [seg(&a, 7, 1000), seg(&a, 1007, 3000), seg(&b_region, 0, 99)];
    let header = RdmaMsg {
        rdma_xid: 0x77,
        rdma_vers: 1,
        rdma_credit: CREDITS,
        rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
            rdma_reads: List::from_slice(&reads),
            rdma_writes: List::default(),
            rdma_reply: None,
        }),
    };
    // XID, CALL, the opaque's length word (its bytes travel in the chunk), one trailer word.
    let inline: Vec<u8> = [0x77u32, 0, 4099, 0xABCD].iter().flat_map(|w| w.to_be_bytes()).collect();
    let mut send = vec![0u8; header.encoded_len()];
    header.encode(&mut send).unwrap();
    send.extend_from_slice(&inline);
    let send = e.req.pd().register(send, Access::empty()).unwrap();
    let ulb = OpaqueAtUlb { call_opaque: Some(8), reply_opaque: None, max_result: 0, max_reply: 512 };

    let mut expected = Vec::new();
    reassemble_call(&header, &inline, &argument, &mut expected).unwrap();
    assert_eq!(expected.len(), 12 + 4100 + 4, "the padding is restored");
    for before in [vec![0x5A; 9000], Vec::new()] {
        e.req.qp().post_send(e.req.wr_id(), &[Sge::whole(&send)], None).unwrap();
        let got = e.resp_pool.receive(&e.resp).unwrap();
        let call = accept(&got.bytes, 1);
        let mut out = before;
        fetch_call(&e.resp, &call, &ulb, &mut out).unwrap();
        assert_eq!(out, expected);
    }
}

/// RFC 8166 section 4.5.4 and draft-ietf-nfsv4-rpcrdma-version-two-07 section 7.4: "After a
/// Requester has received a Reply, if it is unable to invalidate a memory region due to an
/// unrecoverable problem, the Requester MUST close the connection to protect that memory from
/// Responder access before the associated RPC transaction is complete." A responder invalidates
/// the call's Write chunk window behind its back (a Send With Invalidate of that key on a
/// message after the reply), so the requester's own Local Invalidate of it fails: the
/// connection is closed, with that failure as its cause, and the reply is still handed back
/// whole.
fn a_window_that_cannot_be_invalidated_closes_the_connection<B: Backend>(b: &B) {
    let e = connect(b);
    let ulb = ulb(false, true, 256);
    let call = message(0x74, 0, 64, None);
    let result = data(100, 3);
    let reply = message(0x74, 1, 0, Some(&result));
    let pending = send_call(&e.req, &call, &ulb, &call_params(1)).unwrap();
    let rkey = pending.rkeys().next().expect("the Write chunk's window");
    let got = e.resp_pool.receive(&e.resp).unwrap();
    let header = accept(&got.bytes, 1);
    // The reply, its result written into the Write chunk, with no invalidation; then a
    // message that kills the requester's window behind its back (an RDMA_MSG of no call, sent
    // with invalidate), before the requester releases the call's memory.
    let params = ReplyParams {
        version: Version::ONE,
        credits: CREDITS,
        credit_owed: false,
        reply_inline_threshold: SMALL.reply,
        remote_invalidation: false,
        draft07: false,
        invalidate: None,
    };
    let mut call_bytes = Vec::new();
    fetch_call(&e.resp, &header, &ulb, &mut call_bytes).unwrap();
    send_reply(&e.resp, &header, &call_bytes, &reply, &ulb, &params).unwrap();
    let stray = e.resp.pd().register(message(0x99, 1, 8, None), Access::empty()).unwrap();
    let id = e.resp.wr_id();
    e.resp.qp().post_send(id, &[Sge::whole(&stray)], Some(rkey)).unwrap();
    e.resp.wait(id).unwrap();
    let got = e.req_pool.receive(&e.req).unwrap();
    let reply_header = accept(&got.bytes, 1);
    assert_eq!(got.invalidated_rkey, None);
    let mut message_out = Vec::new();
    pending.complete(&e.req, &call, &reply_header, got.invalidated_rkey, &ulb, &mut message_out).unwrap();
    assert_eq!(message_out, reply, "the reply, whole");
    assert_eq!(e.req.qp().state(), QpState::Error, "the connection is closed");
    // (The failed Local Invalidate itself took the queue pair down: that is the cause kept.)
    let ended = e.req.ended();
    assert!(
        matches!(&ended, Some(Ended::Lost { first_error: Some(c) }) if c.opcode == Opcode::LocalInvalidate),
        "{ended:?}"
    );
}

macro_rules! instantiate {
    ($module:ident, $backend:expr) => {
        mod $module {
            instantiate!(@tests $backend;
                short_call_and_reply,
                chunked_call_with_read_chunk_at_nonzero_position,
                a_chunk_is_cut_to_the_responders_segment_size_and_count,
                long_call_in_position_zero_chunk,
                reply_through_write_chunk,
                long_reply_through_reply_chunk,
                unused_write_chunk_is_returned_empty,
                send_with_invalidate_kills_the_window,
                no_send_with_invalidate_when_chunks_use_several_rkeys,
                rdma_error_reply_releases_the_call,
                many_exchanges_reuse_the_receive_buffers,
                reply_too_long_for_the_chunks_is_err_chunk,
                receives_set_aside_come_out_oldest_first_under_steady_arrivals,
                an_arm_told_to_look_leaves_the_waker_armed_before,
                foreign_read_list_lands_in_place,
                a_window_that_cannot_be_invalidated_closes_the_connection,
            );
        }
    };
    (@tests $backend:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                super::$case(&$backend)
            }
        )*
    };
}

instantiate!(inproc, rpcrdma_verbs::InProcess);
instantiate!(tcp, rpcrdma_verbs::Tcp);
