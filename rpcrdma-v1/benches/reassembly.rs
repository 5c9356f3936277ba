//! Reassembly throughput: a call with one 4 KiB Read chunk (the Responder
//! rebuilding an NFS-WRITE-like call) and a reply with one 64 KiB Write chunk
//! (the Requester rebuilding an NFS-READ-like reply). Marshaling the same
//! messages is measured alongside for scale.
//!
//! `cargo bench -p rpcrdma-v1 --bench reassembly`

use std::convert::Infallible;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rpcrdma_v1::marshal_call::{
    marshal_call, CallDescription, ChunkPurpose, InlineThresholds, MarshaledCall, Registrar,
};
use rpcrdma_v1::marshal_reply::{marshal_reply, MarshaledReply, ProvidedChunks, ReplyRequest};
use rpcrdma_v1::reassemble::{read_list_fetches, reassemble_call, reassemble_reply_with_ulb};
use rpcrdma_v1::rt::Xdr;
use rpcrdma_v1::ulb::{OpaqueAtUlb, UpperLayerBinding};
use rpcrdma_v1::xdr::{RdmaMsg, XdrRdmaSegment};

/// Everything in one pre-registered region (handle 1): the call message at
/// address 0, receive buffers at 1 MiB.
struct OneRegion;

impl Registrar for OneRegion {
    type Error = Infallible;
    fn register(&mut self, p: ChunkPurpose, out: &mut Vec<XdrRdmaSegment>) -> Result<(), Infallible> {
        let offset = p.call_range().map_or(1 << 20, |r| r.start) as u64;
        out.push(XdrRdmaSegment { handle: 1, length: p.len() as u32, offset });
        Ok(())
    }
}

/// 120 bytes of RPC and ULP header, a length word, `data` bytes, 8 bytes more.
fn message(data: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..120u32).map(|i| i as u8).collect();
    m.extend_from_slice(&(data as u32).to_be_bytes());
    m.extend((0..data).map(|i| (i * 7) as u8));
    m.extend_from_slice(&[0xEE; 8]);
    m
}

fn bench(c: &mut Criterion) {
    let thresholds = InlineThresholds { call: 1024, reply: 1024 };

    // --- the call: one 4 KiB Read chunk ---
    let call = message(4096);
    let ulb = OpaqueAtUlb { call_opaque: Some(120), reply_opaque: Some(120), max_result: 65536, max_reply: 512 };
    let mut desc = CallDescription::default();
    desc.describe(&ulb, &call);
    let req = desc.request(32, thresholds);
    let mut header = vec![0u8; 1024];
    let mut marshaled = MarshaledCall::default();
    marshal_call(&call, &req, &mut OneRegion, &mut header, &mut marshaled).unwrap();
    let mut send = Vec::new();
    marshaled.gather_into(&header, &call, &mut send);
    let (msg, hlen) = RdmaMsg::decode(&send).unwrap();
    let inline = &send[hlen..];
    let reads = match msg.rdma_body {
        rpcrdma_v1::xdr::RdmaBody::RdmaMsg(h) => h.rdma_reads,
        _ => unreachable!(),
    };
    let mut landing = vec![0u8; 4096];
    for f in read_list_fetches(reads) {
        let src = f.offset as usize;
        landing[f.landing..f.landing + f.length as usize].copy_from_slice(&call[src..src + f.length as usize]);
    }
    let mut out = Vec::with_capacity(call.len());
    reassemble_call(&msg, inline, &landing, &mut out).unwrap();
    assert_eq!(out, call);

    let mut g = c.benchmark_group("call_4k_read_chunk");
    g.throughput(Throughput::Bytes(call.len() as u64));
    g.bench_function("reassemble", |b| {
        b.iter(|| reassemble_call(black_box(&msg), black_box(inline), black_box(&landing), &mut out).unwrap())
    });
    g.bench_function("decode_header_and_reassemble", |b| {
        b.iter(|| {
            let (msg, hlen) = RdmaMsg::decode(black_box(&send)).unwrap();
            reassemble_call(&msg, &send[hlen..], black_box(&landing), &mut out).unwrap()
        })
    });
    g.finish();

    // --- the reply: one 64 KiB Write chunk ---
    let reply = message(65536);
    let provided = ProvidedChunks::from_call(&msg).unwrap();
    let mut results = Vec::new();
    ulb.reply_ddp_items(&call, &reply, 0, &mut results);
    let rreq = ReplyRequest { credits: 32, reply_inline_threshold: thresholds.reply, ddp_results: &results };
    let mut rheader = vec![0u8; 1024];
    let mut rmarshaled = MarshaledReply::default();
    marshal_reply(&reply, provided, &rreq, &mut rheader, &mut rmarshaled).unwrap();
    let mut write_buf = vec![0u8; 65536];
    for w in rmarshaled.writes() {
        let at = (w.offset - (1 << 20)) as usize;
        write_buf[at..at + w.src.len()].copy_from_slice(&reply[w.src.clone()]);
    }
    let mut rsend = Vec::new();
    rmarshaled.gather_into(&rheader, &reply, &mut rsend);
    let (rmsg, rhlen) = RdmaMsg::decode(&rsend).unwrap();
    let rinline = &rsend[rhlen..];
    let bufs = [&write_buf[..]];
    let mut scratch = Vec::new();
    let mut rout = Vec::with_capacity(reply.len());
    reassemble_reply_with_ulb(&call, &rmsg, rinline, &[], &bufs, &ulb, &mut scratch, &mut rout).unwrap();
    assert_eq!(rout, reply);

    let mut g = c.benchmark_group("reply_64k_write_chunk");
    g.throughput(Throughput::Bytes(reply.len() as u64));
    g.bench_function("reassemble", |b| {
        b.iter(|| {
            reassemble_reply_with_ulb(
                &call,
                black_box(&rmsg),
                black_box(rinline),
                &[],
                &bufs,
                &ulb,
                &mut scratch,
                &mut rout,
            )
            .unwrap()
        })
    });
    g.finish();

    // Marshaling copies no payload: measured per message.
    let mut g = c.benchmark_group("marshal");
    g.throughput(Throughput::Elements(1));
    g.bench_function("call_4k_read_chunk", |b| {
        b.iter(|| marshal_call(black_box(&call), &req, &mut OneRegion, &mut header, &mut marshaled).unwrap())
    });
    g.bench_function("reply_64k_write_chunk", |b| {
        b.iter(|| marshal_reply(black_box(&reply), provided, &rreq, &mut rheader, &mut rmarshaled).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
