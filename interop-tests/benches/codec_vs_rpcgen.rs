//! The v1 transport header codec against rpcgen + libtirpc, in one run:
//! our generated code (`rpcrdma_v1::xdr`, on the `xdr-spec` runtime) and the
//! C code rpcgen generates from the same XDR our extractor produced
//! (`interop_tests::V1_XDR`), on libtirpc's `xdrmem` stream.
//!
//! Two headers: the plain RDMA_MSG (28 bytes) and the chunked one (read
//! chunk, 2-segment write chunk, reply chunk; 112 bytes) of `header_codec`.
//!
//! The C side is the rpcgen oracle's harness (`oracle/harness.c`, built by
//! `interop_tests::oracle`), kept running beside this process. For each
//! criterion sample the bench asks it for N encodes or decodes; the harness
//! runs them in a loop timed with `clock_gettime(CLOCK_MONOTONIC)` and
//! answers with the total, which becomes the sample's time, so pipe traffic is
//! never timed. Per iteration the C side does what a user of libtirpc does
//! (harness.c, "Benchmark mode"): encode = `xdrmem_create` over a reused
//! buffer, `xdr_rdma_msg`, `xdr_getpos`, `xdr_destroy`; decode =
//! `xdrmem_create` over the bytes, `xdr_rdma_msg` into a preallocated
//! struct, `xdr_destroy`, and `xdr_free`, which frees the list entries and
//! segment arrays libtirpc allocated (5 allocations for the chunked header,
//! none for the plain one).
//!
//! Equal work, asserted once before timing: the harness encodes each
//! header, parsed from our canonical text, to exactly our bytes; it decodes
//! our bytes to the same header; its timed encodes reproduce those bytes
//! (checked after every timed loop); its timed decodes read them.
//!
//! Our side is timed as criterion's `Bencher::iter` times it. "decode"
//! yields our validated view; "decode+visit" also reads every field, the
//! like-for-like comparison with libtirpc, which builds the whole tree.
//!
//! At the end the bench prints, for each header and operation, the median
//! time per operation over criterion's 100 samples for both sides and their
//! ratio. Without rpcgen, a C compiler or libtirpc it prints `SKIP: ...`
//! and measures ours alone (under `CI=true` a missing oracle fails).
//!
//! Run: `cargo bench -p interop-tests --bench codec_vs_rpcgen -- --warm-up-time 2 --measurement-time 5`.

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{black_box, Bencher, Criterion};
use interop_tests::oracle::{canonical_from_ours, Harness};
use rpcrdma_v1::rt::Xdr;
use rpcrdma_v1::xdr::RdmaMsg;

mod common;

/// Criterion samples per benchmark function (its default, fixed here so
/// that the last `SAMPLES` recorded times are the measured ones).
const SAMPLES: usize = 100;

/// The time per iteration (ns) of every sample of one function, in the
/// order criterion took them: warm-up first, the `SAMPLES` measured last.
type Record = Vec<f64>;

/// Times `iters` calls of `f` as `Bencher::iter` does, and records the sample.
fn ours<R>(b: &mut Bencher<'_>, rec: &mut Record, mut f: impl FnMut() -> R) {
    b.iter_custom(|iters| {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(f());
        }
        let took = start.elapsed();
        rec.push(took.as_nanos() as f64 / iters as f64);
        took
    });
}

/// Has the harness run `iters` encodes (`'E'`) or decodes (`'D'`) of slot
/// `slot` in its own timed loop, and records the sample.
fn theirs(b: &mut Bencher<'_>, rec: &mut Record, h: &mut Harness, slot: u8, op: char) {
    b.iter_custom(|iters| {
        let ns = h.bench_time(slot, op, iters).unwrap_or_else(|e| panic!("rpcgen harness, T {slot} {op}: {e}"));
        rec.push(ns as f64 / iters as f64);
        Duration::from_nanos(ns)
    });
}

/// The median of the measured samples, when all of them were taken.
fn median(rec: &Record) -> Option<f64> {
    let mut last = rec.get(rec.len().checked_sub(SAMPLES)?..)?.to_vec();
    last.sort_by(f64::total_cmp);
    Some((last[SAMPLES / 2 - 1] + last[SAMPLES / 2]) / 2.0)
}

/// One header's records: decode, decode+visit and encode for ours; decode
/// and encode for rpcgen + libtirpc.
#[derive(Default)]
struct Records {
    decode: Record,
    visit: Record,
    encode: Record,
    c_decode: Record,
    c_encode: Record,
}

fn main() {
    let test_mode = std::env::args().any(|a| a == "--test");
    let mut c = Criterion::default().configure_from_args();
    let mut rpcgen = Harness::v1_or_skip(Path::new(env!("CARGO_TARGET_TMPDIR")));
    if rpcgen.is_none() {
        println!("SKIP: rpcgen + libtirpc side of codec_vs_rpcgen; measuring xdr-spec alone");
    }
    let mut rows = Vec::new();
    for (slot, name, msg) in [(0u8, "plain", common::plain()), (1, "chunked", common::chunked())] {
        let bytes = msg.to_vec().expect("the benchmark headers are in bounds");
        let text = canonical_from_ours(&msg);
        if let Some(h) = rpcgen.as_mut() {
            let c_bytes = h.bench_load(slot, &text).unwrap_or_else(|e| panic!("rpcgen harness, B {slot}: {e}"));
            assert_eq!(c_bytes, bytes, "rpcgen + libtirpc encodes the {name} header to our bytes");
            let c_text = h.decode(&bytes).unwrap_or_else(|e| panic!("rpcgen harness, D: {e}"));
            assert_eq!(c_text, text, "rpcgen + libtirpc decodes our {name} bytes to the same header");
        }
        let mut r = Records::default();
        let mut g = c.benchmark_group(format!("codec vs rpcgen, {name} ({} bytes)", bytes.len()));
        g.sample_size(SAMPLES);
        g.bench_function("decode/xdr-spec", |b| {
            ours(b, &mut r.decode, || RdmaMsg::decode(black_box(&bytes)).map(|(m, n)| (m.rdma_xid, n)))
        });
        g.bench_function("decode+visit/xdr-spec", |b| {
            ours(b, &mut r.visit, || RdmaMsg::decode(black_box(&bytes)).map(|(m, _)| common::visit(&m)).ok())
        });
        if let Some(h) = rpcgen.as_mut() {
            g.bench_function("decode/rpcgen+libtirpc", |b| theirs(b, &mut r.c_decode, h, slot, 'D'));
        }
        let mut out = [0u8; 256];
        g.bench_function("encode/xdr-spec", |b| ours(b, &mut r.encode, || black_box(&msg).encode(&mut out).ok()));
        if let Some(h) = rpcgen.as_mut() {
            g.bench_function("encode/rpcgen+libtirpc", |b| theirs(b, &mut r.c_encode, h, slot, 'E'));
        }
        g.finish();
        rows.push((name, bytes.len(), r));
    }
    c.final_summary();
    if test_mode {
        return;
    }
    let ns = |rec: &Record| median(rec).map_or_else(|| "-".to_string(), |t| format!("{t:.1} ns"));
    let ratio = |c: &Record, o: &Record| match (median(c), median(o)) {
        (Some(c), Some(o)) => format!("{:.1}x", c / o),
        _ => "-".to_string(),
    };
    println!("\nmedian time per operation over {SAMPLES} samples, this run (ratio: rpcgen+libtirpc / xdr-spec)");
    println!("{:<18} {:<13} {:>12} {:>16} {:>7}", "header", "operation", "xdr-spec", "rpcgen+libtirpc", "ratio");
    for (name, len, r) in &rows {
        let header = format!("{name}, {len} B");
        for (op, o, t) in [
            ("decode", &r.decode, &r.c_decode),
            ("decode+visit", &r.visit, &r.c_decode),
            ("encode", &r.encode, &r.c_encode),
        ] {
            println!("{header:<18} {op:<13} {:>12} {:>16} {:>7}", ns(o), ns(t), ratio(t, o));
        }
    }
}
