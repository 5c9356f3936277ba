//! DDP-Eligibility Violation (RFC 8166 section 6.1.1; draft section 7.1.1)
//! and how it is reported (RFC 8166 section 4.5.2; draft section 5.5.2).
//!
//! A Requester that moves a non-DDP-eligible data item into a Read chunk
//! produces a call that reassembles into a perfectly good XDR stream: only
//! comparing the Read list with the ULB's DDP-eligible items
//! (`reassemble::check_call_ddp_eligibility`) catches it. The Responder then
//! does not process the call and answers with an RPC GARBAGE_ARGS reply in
//! an RDMA_MSG. A Responder that leaves a DDP-eligible result in the
//! Payload stream although the Requester provided a Write chunk for it is
//! caught by the Requester's reassembly (`ReassemblyError::UnreducedDdpResult`).

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use std::collections::BTreeMap;
use std::convert::Infallible;

use counting_alloc::{counted, serial};
use rpcrdma_v1::marshal_call::*;
use rpcrdma_v1::marshal_reply::*;
use rpcrdma_v1::reassemble::*;
use rpcrdma_v1::rt::{Error as XdrError, List, Xdr};
use rpcrdma_v1::ulb::*;
use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};
use rpcrdma_v1::xdr::*;

// ---- an NFS-WRITE-like call ---------------------------------------------------

/// Offset of the file handle's length word, and of its 16 bytes.
const FH_LEN_WORD: usize = 24;
const FH: usize = 28;
/// Offset of the data's length word, and of the data.
const DATA_LEN_WORD: usize = 56;
const DATA: usize = 60;
/// Bytes of data: not a multiple of four, so the item has 3 bytes of padding.
const DATA_BYTES: usize = 4001;

/// XID, 20 bytes of RPC header, a 16-byte file handle (`opaque<>`, not
/// DDP-eligible), offset and count (12 bytes), then the DDP-eligible data
/// (`opaque<>`) and 8 trailing bytes.
fn write_call(xid: u32) -> Vec<u8> {
    let mut m = xid.to_be_bytes().to_vec();
    m.extend([0x11; 20]);
    assert_eq!(m.len(), FH_LEN_WORD);
    m.extend(16u32.to_be_bytes());
    m.extend([0xF0; 16]);
    m.extend([0x22; 12]);
    assert_eq!(m.len(), DATA_LEN_WORD);
    m.extend((DATA_BYTES as u32).to_be_bytes());
    m.extend((0..DATA_BYTES).map(|i| (i % 251) as u8 | 1));
    m.resize(roundup(m.len()), 0);
    m.extend([0x33; 8]);
    m
}

/// The ULB of that call: its only DDP-eligible item is the data.
fn write_ulb() -> OpaqueAtUlb {
    OpaqueAtUlb { call_opaque: Some(DATA_LEN_WORD), reply_opaque: None, max_result: 0, max_reply: 128 }
}

// ---- the Requester's memory ----------------------------------------------------

/// Registers by copying (Read sources) or allocating (receive buffers), one
/// segment per registration, at offset 0 of its own handle.
struct Memory {
    call: Vec<u8>,
    regions: BTreeMap<u32, Vec<u8>>,
}

impl Registrar for Memory {
    type Error = Infallible;

    fn register(&mut self, p: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), Infallible> {
        let handle = 0x100 + self.regions.len() as u32;
        let bytes = match p.call_range() {
            Some(r) => self.call[r].to_vec(),
            None => vec![0xA5; p.len()],
        };
        out.push(XdrRdmaSegment { handle, length: p.len() as u32, offset: 0 });
        self.regions.insert(handle, bytes);
        Ok(())
    }
}

/// A Requester marshals `call`, reducing `args` into Read chunks whether or
/// not they are DDP-eligible (a faulty Requester passes the wrong ones).
/// Returns the Send and its memory.
fn requester_sends(call: &[u8], args: &[DdpItem], result_maxima: &[usize], max_reply: usize) -> (Vec<u8>, Source) {
    let req = CallRequest {
        credits: 8,
        thresholds: InlineThresholds::default(),
        ddp_args: args,
        ddp_result_maxima: result_maxima,
        max_reply,
    };
    let mut mem = Memory { call: call.to_vec(), regions: BTreeMap::new() };
    let (mut header, mut marshaled) = (vec![0u8; 4096], MarshaledCall::new());
    marshal_call(call, &req, &mut mem, &mut header, &mut marshaled).unwrap();
    let mut send = Vec::new();
    marshaled.gather_into(&header, call, &mut send);
    (send, Source::Memory(mem))
}

// ---- the Responder -----------------------------------------------------------------

/// What became of a call.
#[derive(Debug)]
enum Outcome {
    /// Handed to the ULP, which decoded this (unreduced) call.
    Processed(Vec<u8>),
    /// Not processed: the violation found, the Send answering it, and the
    /// call as reassembly rebuilt it (to show it was well-formed XDR).
    Refused { violation: DdpViolation, send: Vec<u8>, reassembled: Vec<u8> },
}

/// The Responder, as `reassemble`'s documentation lays it out: judge the
/// header (it is valid: no RDMA_ERROR), fetch the Read chunks, reassemble,
/// check DDP-eligibility; process the call only if the check passes,
/// otherwise answer GARBAGE_ARGS in an RDMA_MSG.
fn responder_receives<U: UpperLayerBinding>(send: &[u8], source: &Source, ulb: &U) -> Outcome {
    assert!(matches!(receive(send, &ReceivePolicy::default()), Verdict::Accept(_)), "the header is valid");
    let (msg, hlen) = RdmaMsg::decode(send).unwrap();
    let reads = match msg.rdma_body {
        RdmaBody::RdmaMsg(h) => h.rdma_reads,
        RdmaBody::RdmaNomsg(h) => h.rdma_reads,
        _ => unreachable!(),
    };
    let mut landing = vec![0u8; fetch_len(reads) as usize];
    for f in read_list_fetches(reads) {
        landing[f.landing..f.landing + f.length as usize].copy_from_slice(source.rdma_read(&f));
    }
    let mut call = Vec::new();
    reassemble_call(&msg, &send[hlen..], &landing, &mut call).expect("the chunks reassemble");
    let violation = match check_call_ddp_eligibility(&msg, &call, ulb, &mut Vec::new()) {
        Ok(()) => return Outcome::Processed(call),
        Err(v) => v,
    };
    // 6.1.1: "MUST be reported as described in Section 4.5.2": RPC
    // GARBAGE_ARGS, in an RDMA_MSG.
    let mut rpc = [0u8; GARBAGE_ARGS_REPLY_LEN];
    let n = encode_garbage_args_reply(msg.rdma_xid, &mut rpc).unwrap();
    let provided = ProvidedChunks::from_call(&msg).unwrap();
    let req = ReplyRequest { credits: 8, reply_inline_threshold: 1024, ddp_results: &[] };
    let (mut header, mut out) = ([0u8; 1024], MarshaledReply::new());
    marshal_reply(&rpc[..n], provided, &req, &mut header, &mut out).unwrap();
    let mut reply = Vec::new();
    out.gather_into(&header, &rpc[..n], &mut reply);
    Outcome::Refused { violation, send: reply, reassembled: call }
}

/// Where the Responder's RDMA Reads read from.
enum Source {
    /// The Requester's registered memory.
    Memory(Memory),
    /// One buffer, the offsets of hand-built segments indexing it.
    Landing(Vec<u8>),
}

impl Source {
    fn rdma_read(&self, f: &Fetch) -> &[u8] {
        let bytes = match self {
            Source::Memory(mem) => &mem.regions[&f.handle],
            Source::Landing(bytes) => bytes,
        };
        &bytes[f.offset as usize..f.offset as usize + f.length as usize]
    }
}

/// The call the ULP got; panics, naming the violation, if it got none.
fn processed(outcome: Outcome) -> Vec<u8> {
    match outcome {
        Outcome::Processed(call) => call,
        Outcome::Refused { violation, .. } => panic!("refused: {violation}"),
    }
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks(4).map(|w| u32::from_be_bytes(w.try_into().unwrap())).collect()
}

/// A hand-built call: its transport header, then `inline`.
fn header(nomsg: bool, xid: u32, reads: &[XdrReadChunk], inline: &[u8]) -> Vec<u8> {
    let lists = (List::from_slice(reads), List::default(), None);
    let rdma_body = if nomsg {
        RdmaBody::RdmaNomsg(RpcRdmaHeaderNomsg { rdma_reads: lists.0, rdma_writes: lists.1, rdma_reply: lists.2 })
    } else {
        RdmaBody::RdmaMsg(RpcRdmaHeader { rdma_reads: lists.0, rdma_writes: lists.1, rdma_reply: lists.2 })
    };
    let mut send = RdmaMsg { rdma_xid: xid, rdma_vers: 1, rdma_credit: 8, rdma_body }.to_vec().unwrap();
    send.extend_from_slice(inline);
    send
}

/// Read segments whose offsets index a [`Source::Landing`] buffer holding
/// the chunks back to back.
fn segments(chunks: &[(u32, u32)]) -> Vec<XdrReadChunk> {
    let mut at = 0;
    chunks
        .iter()
        .map(|&(position, length)| {
            let seg = XdrReadChunk { position, target: XdrRdmaSegment { handle: 1, length, offset: at } };
            at += u64::from(length);
            seg
        })
        .collect()
}

// ---- the rules -----------------------------------------------------------------------

#[test]
fn call_with_non_ddp_eligible_item_in_read_chunk_is_not_processed_rfc8166_6_1_1() {
    let xid = 0x600d;
    let call = write_call(xid);
    let ulb = write_ulb();
    let data = DdpItem::new(DATA, DATA_BYTES);
    let without = |item: DdpItem| -> Vec<u8> { [&call[..item.offset], &call[item.padded_end()..]].concat() };
    let fh = DdpItem::new(FH, 16);
    // Each faulty Requester reduces something the ULB does not name as a
    // DDP-eligible item; the Responder refuses every one of them, though
    // every call reassembles into exactly the bytes the Requester meant.
    // What the faulty Requester did, its Send and memory, what the
    // Responder must find.
    type Case = (&'static str, (Vec<u8>, Source), DdpViolation);
    let cases: Vec<Case> = vec![
        (
            // (By hand: reducing 16 bytes of a 4 KB call never fits the
            // inline threshold, so this crate's Requester would go Long.)
            "the file handle (not DDP-eligible) in a Read chunk",
            (
                header(false, xid, &segments(&[(FH as u32, 16)]), &without(fh)),
                Source::Landing(call[FH..FH + 16].to_vec()),
            ),
            DdpViolation::NotEligible { chunk: 0, position: FH as u32, len: 16 },
        ),
        (
            "the file handle as well as the data",
            requester_sends(&call, &[fh, data], &[], 128),
            DdpViolation::NotEligible { chunk: 0, position: FH as u32, len: 16 },
        ),
        (
            "the data from its 800th byte on: no item starts there",
            requester_sends(&call, &[DdpItem::new(DATA + 800, DATA_BYTES - 800)], &[], 128),
            DdpViolation::NotEligible { chunk: 0, position: (DATA + 800) as u32, len: (DATA_BYTES - 800) as u64 },
        ),
        (
            "only part of the data: the chunk is not the whole item",
            requester_sends(&call, &[DdpItem::new(DATA, 3600)], &[], 128),
            DdpViolation::LengthMismatch { chunk: 0, position: DATA as u32, len: 3600, item: data },
        ),
        (
            // A Long call (RDMA_NOMSG) may carry anything in its
            // Position-Zero Read chunk, but a further Read chunk must still
            // be a DDP-eligible item.
            "a Long call with the file handle in a further Read chunk",
            (
                header(true, xid, &segments(&[(0, without(fh).len() as u32), (FH as u32, 16)]), &[]),
                Source::Landing([&without(fh)[..], &call[FH..FH + 16]].concat()),
            ),
            DdpViolation::NotEligible { chunk: 1, position: FH as u32, len: 16 },
        ),
    ];
    for (what, (send, source), expect) in cases {
        let (msg, _) = RdmaMsg::decode(&send).unwrap();
        let rdma_reads = match msg.rdma_body {
            RdmaBody::RdmaMsg(h) => h.rdma_reads,
            RdmaBody::RdmaNomsg(h) => h.rdma_reads,
            _ => unreachable!(),
        };
        assert!(rdma_reads.iter().any(|r| r.position != 0), "{what}: the call has a Read chunk to check");
        match responder_receives(&send, &source, &ulb) {
            Outcome::Refused { violation, reassembled, .. } => {
                assert_eq!(violation, expect, "{what}");
                assert_eq!(reassembled, call, "{what}: reassembly alone would have accepted it");
                assert!(violation.to_string().starts_with("DDP-eligibility violation (RFC 8166 section 6.1.1)"));
            }
            Outcome::Processed(_) => panic!("{what}: a call with a non-DDP-eligible Read chunk was processed"),
        }
    }
}

#[test]
fn violation_is_reported_as_garbage_args_rfc8166_4_5_2() {
    // A call with the file handle in a Read chunk, and a Write chunk and a
    // Reply chunk provided for the reply.
    let call = write_call(0xfeed_0001);
    let (send, source) = requester_sends(&call, &[DdpItem::new(FH, 16), DdpItem::new(DATA, DATA_BYTES)], &[8192], 4096);
    let Outcome::Refused { send: answer, .. } = responder_receives(&send, &source, &write_ulb()) else {
        panic!("processed");
    };
    // Not an RDMA_ERROR: the transport header was valid (4.5.2). An
    // RDMA_MSG, same XID, version 1, carrying the RPC reply inline.
    let (reply_hdr, hlen) = RdmaMsg::decode(&answer).unwrap();
    assert_eq!((reply_hdr.rdma_xid, reply_hdr.rdma_vers), (0xfeed_0001, 1));
    let RdmaBody::RdmaMsg(h) = reply_hdr.rdma_body else { panic!("not RDMA_MSG: {:?}", reply_hdr.rdma_body) };
    assert!(h.rdma_reads.is_empty());
    // The Write list and Reply chunk come back unused (draft 5.3.2, 5.3.3).
    assert_eq!(h.rdma_writes.len(), 1);
    assert!(h.rdma_writes.iter().all(|c| c.target.iter().all(|s| s.length == 0)));
    assert!(h.rdma_reply.is_some_and(|c| c.target.iter().all(|s| s.length == 0)));
    // The RPC reply: xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, GARBAGE_ARGS.
    assert_eq!(words(&answer[hlen..]), [0xfeed_0001, 1, 0, 0, 0, 4]);
    // It is a reply the Requester can take: valid header, matching XID.
    assert!(matches!(receive(&answer, &ReceivePolicy::default()), Verdict::Accept(_)));
}

#[test]
fn reply_with_unreduced_ddp_result_is_a_violation_rfc8166_6_1_1() {
    // An NFS-READ-like exchange: the reply's DDP-eligible result is the
    // opaque<> whose length word is at 24 (XID, 20 bytes, length, data).
    let xid: u32 = 0xbad_0001;
    let call = {
        let mut c = xid.to_be_bytes().to_vec();
        c.extend([0x11; 36]);
        c
    };
    let reply = |len: usize| {
        let mut r = xid.to_be_bytes().to_vec();
        r.extend([0x44; 20]);
        r.extend((len as u32).to_be_bytes());
        r.extend((0..len).map(|i| i as u8 | 0x80));
        r.resize(roundup(r.len()), 0);
        r
    };
    for (max_reply, result_len) in [(256, 601), (4096, 3001)] {
        // 601 bytes: the unreduced reply fits inline; 3001: it needs the
        // Reply chunk the Requester provided (a Long Reply).
        let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24), max_result: 8192, max_reply };
        let mut maxima = Vec::new();
        ulb.reply_ddp_maxima(&call, &mut maxima);
        let (call_send, source) = requester_sends(&call, &[], &maxima, max_reply);
        let Source::Memory(mut mem) = source else { unreachable!() };
        let (call_hdr, _) = RdmaMsg::decode(&call_send).unwrap();
        let provided = ProvidedChunks::from_call(&call_hdr).unwrap();
        assert_eq!(provided.writes.len(), 1, "a Write list was provided");
        let reply = reply(result_len);

        // A faulty Responder: it does not reduce the result.
        let req = ReplyRequest { credits: 8, reply_inline_threshold: 1024, ddp_results: &[] };
        let (mut header, mut out) = ([0u8; 1024], MarshaledReply::new());
        marshal_reply(&reply, provided, &req, &mut header, &mut out).unwrap();
        for w in out.writes() {
            let region = mem.regions.get_mut(&w.handle).unwrap();
            region[w.offset as usize..w.offset as usize + w.src.len()].copy_from_slice(&reply[w.src.clone()]);
        }
        let mut send = Vec::new();
        out.gather_into(&header, &reply, &mut send);

        // The Requester, assuming the result was reduced (7.1.1), finds it
        // was not: the Write chunk returned nothing for a non-empty result.
        let (msg, hlen) = RdmaMsg::decode(&send).unwrap();
        let handles: Vec<u32> = mem.regions.keys().copied().collect();
        let bufs: Vec<&[u8]> = handles[..1].iter().map(|h| &mem.regions[h][..]).collect();
        let reply_buf = handles.get(1).map_or(&[][..], |h| &mem.regions[h][..]);
        let (mut results, mut stream) = (Vec::new(), Vec::new());
        let err =
            reassemble_reply_with_ulb(&call, &msg, &send[hlen..], reply_buf, &bufs, &ulb, &mut results, &mut stream)
                .unwrap_err();
        assert_eq!(err, ReassemblyError::UnreducedDdpResult { chunk: 0, result: result_len }, "{max_reply}");
        assert!(err.is_ddp_violation());
        assert!(err.to_string().starts_with("DDP-eligibility violation (RFC 8166 section 6.1.1)"), "{err}");
    }

    // The other ways a Write chunk can hold something other than exactly
    // its DDP-eligible result are DDP-eligibility violations too.
    assert!(ReassemblyError::WriteChunkLengthMismatch { chunk: 0, returned: 6, result: 5 }.is_ddp_violation());
    assert!(ReassemblyError::UnclaimedWriteChunk { chunk: 0, returned: 6 }.is_ddp_violation());
    assert!(!ReassemblyError::PositionBeyondPayload { position: 8, end: 4 }.is_ddp_violation());
}

#[test]
fn properly_chunked_calls_pass_the_ddp_eligibility_check_rfc8166_6_1_1() {
    let call = write_call(0x900d);
    let ulb = write_ulb();
    let data = DdpItem::new(DATA, DATA_BYTES);

    // Marshaled by this crate's Requester from the ULB's own items: Chunked.
    let (send, source) = requester_sends(&call, &[data], &[], 128);
    assert_eq!(processed(responder_receives(&send, &source, &ulb)), call);
    // Its Read chunk included roundup padding (3.4.5.2 allows it).
    let inline: Vec<u8> = [&call[..DATA], &call[data.padded_end()..]].concat();
    let landing = Source::Landing(call[DATA..data.padded_end()].to_vec());
    let send = header(false, 0x900d, &segments(&[(DATA as u32, data.padded_len() as u32)]), &inline);
    assert_eq!(processed(responder_receives(&send, &landing, &ulb)), call);
    // The data split over three segments of one chunk.
    let send = header(false, 0x900d, &segments(&[(DATA as u32, 1000), (DATA as u32, 3000), (DATA as u32, 1)]), &inline);
    assert_eq!(processed(responder_receives(&send, &landing, &ulb)), call);
    // A Long call: the Position-Zero Read chunk may hold anything, here
    // the whole call ...
    let send = header(true, 0x900d, &segments(&[(0, call.len() as u32)]), &[]);
    assert_eq!(processed(responder_receives(&send, &Source::Landing(call.clone()), &ulb)), call);
    // ... or the call reduced, with the data in a further Read chunk.
    let long_landing = Source::Landing([&inline[..], &call[DATA..DATA + DATA_BYTES]].concat());
    let reads = segments(&[(0, inline.len() as u32), (DATA as u32, DATA_BYTES as u32)]);
    let send = header(true, 0x900d, &reads, &[]);
    assert_eq!(processed(responder_receives(&send, &long_landing, &ulb)), call);
    // A Short call has no Read chunk to check.
    let short: Vec<u8> = write_call(0x900e)[..DATA_LEN_WORD].iter().copied().chain(0u32.to_be_bytes()).collect();
    let (send, source) = requester_sends(&short, &[], &[], 128);
    assert_eq!(processed(responder_receives(&send, &source, &ulb)), short);

    // With its scratch reserved, the check allocates nothing.
    let _g = serial();
    let reads = segments(&[(DATA as u32, DATA_BYTES as u32)]);
    let bytes = header(false, 0x900d, &reads, &inline);
    let (msg, _) = RdmaMsg::decode(&bytes).unwrap();
    let mut items = Vec::with_capacity(4);
    let (result, calls, _) = counted(|| check_call_ddp_eligibility(&msg, &call, &ulb, &mut items));
    assert_eq!((result, calls), (Ok(()), 0));
    assert_eq!(items, [data]);
}

#[test]
fn garbage_args_reply_is_the_rfc5531_accepted_reply_layout() {
    let _g = serial();
    for xid in [0, 1, 0x0102_0304, u32::MAX] {
        // A larger buffer: only the first six words are written.
        let mut buf = [0xEEu8; 32];
        let (n, calls, _) = counted(|| encode_garbage_args_reply(xid, &mut buf));
        assert_eq!((n, calls), (Ok(GARBAGE_ARGS_REPLY_LEN), 0), "no allocation");
        assert_eq!(GARBAGE_ARGS_REPLY_LEN, 6 * 4);
        // RFC 5531 section 9: rpc_msg { xid; body: REPLY (1) { reply_body:
        // MSG_ACCEPTED (0) { accepted_reply { opaque_auth verf = { AUTH_NONE
        // (0), body<> of length 0 }; accept_stat GARBAGE_ARGS (4) } } } }.
        assert_eq!(words(&buf[..24]), [xid, 1, 0, 0, 0, 4]);
        assert_eq!(buf[24..], [0xEE; 8]);
    }
    let mut short = [0u8; 23];
    assert_eq!(encode_garbage_args_reply(7, &mut short), Err(XdrError::BufferTooSmall { need: 24, have: 23 }));
    assert_eq!(short, [0; 23], "nothing written");
}
