//! Reassembly of chunked messages (`rpcrdma_v1::reassemble`) from arbitrary
//! headers: the Responder's side (`read_list_fetches`, `fetch_len`,
//! `reassemble_call`) and the Requester's (`reassemble_reply_with_ulb` with a
//! one-`opaque<>` ULB). The chunk data "moved by RDMA" is a known byte
//! pattern, so the rebuilt stream can be checked: every Read chunk's data
//! sits at its Position followed by zero padding, and the stream is exactly
//! the reduced stream plus the inserted (padded) chunks.
//!
//! Headers that `Header::parse` accepts (default limits) must reassemble
//! without a Position or landing-buffer error; any header that decodes at all
//! must not make reassembly panic. Chunk data is capped at 64 KiB per input so
//! the fuzzer does not spend its time filling buffers.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "bounded_alloc.rs"]
mod bounded_alloc;

/// Aborts on any allocation larger than 64 MiB: a length the input claims, not memory it
/// brings (`bounded_alloc`).
#[global_allocator]
static ALLOC: bounded_alloc::Bounded = bounded_alloc::Bounded;
use rpcrdma_v1::header::{chunk_len, Header, HeaderLimits, MessageKind};
use rpcrdma_v1::reassemble::{
    fetch_len, read_list_fetches, reassemble_call, reassemble_reply_with_ulb, ReassemblyError,
};
use rpcrdma_v1::rt::Xdr;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg};

const CAP: u64 = 1 << 16;

/// `n` bytes of a pattern no chunk boundary can hide (251 is prime).
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8 ^ seed).collect()
}

fn pad(n: usize) -> usize {
    (4 - n % 4) % 4
}

fuzz_target!(|data: &[u8]| {
    let Ok((msg, header_len)) = RdmaMsg::decode(data) else { return };
    let (reads, writes, reply) = match msg.rdma_body {
        RdmaBody::RdmaMsg(h) => (h.rdma_reads, h.rdma_writes, h.rdma_reply),
        RdmaBody::RdmaNomsg(h) => (h.rdma_reads, h.rdma_writes, h.rdma_reply),
        _ => {
            let mut out = Vec::new();
            assert_eq!(reassemble_call(&msg, &[], &[], &mut out), Err(ReassemblyError::NoRpcMessage));
            return;
        }
    };
    let inline = &data[header_len..];
    let accepted = Header::parse(data, &HeaderLimits::default()).ok();

    // The Responder: fetch the Read list into one landing buffer.
    let need = fetch_len(reads);
    assert_eq!(need, reads.iter().map(|r| u64::from(r.target.length)).sum::<u64>());
    if need <= CAP {
        let mut landing_at = 0usize;
        let mut chunks = 0usize;
        let mut last = None;
        for (i, f) in read_list_fetches(reads).enumerate() {
            assert_eq!(f.landing, landing_at, "fetch {i} does not land right after the previous one");
            if last.is_some_and(|p| p != f.position) {
                chunks += 1;
            }
            assert_eq!(f.chunk, chunks);
            last = Some(f.position);
            landing_at += f.length as usize;
        }
        assert_eq!(landing_at as u64, need);

        let landing = pattern(need as usize, 0x5a);
        let mut out = Vec::new();
        if need > 0 {
            let short = reassemble_call(&msg, inline, &landing[..need as usize - 1], &mut out);
            assert_eq!(short, Err(ReassemblyError::LandingTooShort { need, have: need as usize - 1 }));
        }
        let r = reassemble_call(&msg, inline, &landing, &mut out);
        if let Some(h) = &accepted {
            match r {
                Ok(()) => {
                    // Where each chunk's data came from in the landing buffer.
                    let mut at = 0usize;
                    let mut inserted = 0usize;
                    let mut chunks = h.read_chunks();
                    let reduced_len = match h.kind() {
                        MessageKind::Msg => inline.len(),
                        MessageKind::NoMsg => {
                            let z = chunks.next().expect("a NOMSG call reassembles from its Position-zero chunk");
                            assert_eq!(z.position(), 0);
                            at += z.len() as usize;
                            z.len() as usize
                        }
                    };
                    for c in chunks {
                        let (p, n) = (c.position() as usize, c.len() as usize);
                        assert_eq!(&out[p..p + n], &landing[at..at + n], "chunk at {p}");
                        assert!(out[p + n..p + n + pad(n)].iter().all(|&b| b == 0), "padding after chunk at {p}");
                        at += n;
                        inserted += n + pad(n);
                    }
                    assert_eq!(out.len(), reduced_len + inserted);
                }
                // A Position past the end of the reduced stream and a NOMSG
                // call without a Position-zero chunk (a NOMSG reply carries a
                // Reply chunk instead) are for the caller to refuse; the
                // header rules refuse out-of-order chunks and an RDMA_MSG
                // with a Position-zero chunk, so neither may reach here.
                Err(ReassemblyError::PositionBeyondPayload { .. }) => {}
                Err(ReassemblyError::NoPositionZeroChunk) => assert_eq!(h.kind(), MessageKind::NoMsg),
                Err(e) => panic!("an accepted header fails to reassemble: {e:?}"),
            }
        }
    }

    // The Requester: a reply with at most one DDP result, its length word at
    // offset 4 of the reduced stream.
    let reply_len = reply.map_or(0, |r| chunk_len(&r));
    let write_lens: Vec<u64> = writes.iter().map(|w| chunk_len(&w)).collect();
    if reply_len <= CAP && write_lens.iter().sum::<u64>() <= CAP {
        let reply_buf = pattern(reply_len as usize, 0x33);
        let write_bufs: Vec<Vec<u8>> =
            write_lens.iter().enumerate().map(|(i, &n)| pattern(n as usize, i as u8)).collect();
        let write_refs: Vec<&[u8]> = write_bufs.iter().map(|b| &b[..]).collect();
        let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(4), max_result: 1 << 20, max_reply: 1 << 20 };
        let (mut results, mut out) = (Vec::new(), Vec::new());
        // OpaqueAtUlb serves one procedure: it reads no call.
        if reassemble_reply_with_ulb(&[], &msg, inline, &reply_buf, &write_refs, &ulb, &mut results, &mut out).is_ok() {
            let reduced_len = match msg.rdma_body {
                RdmaBody::RdmaNomsg(_) => reply_len as usize,
                _ => inline.len(),
            };
            let placed: usize = results.iter().take(write_lens.len()).map(|r| r.len + pad(r.len)).sum();
            assert_eq!(out.len(), reduced_len + placed);
            for (i, r) in results.iter().take(write_lens.len()).enumerate() {
                assert_eq!(&out[r.offset..r.offset + r.len], &write_bufs[i][..r.len], "result {i}");
            }
        }
    }
});
