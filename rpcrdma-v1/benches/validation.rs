//! Validation of received v1 headers (`verdict::receive`: decode, chunk
//! checks, verdict) with 0, 4 and 16 segments. The path allocates nothing
//! (asserted in `tests/hostile.rs`).
//!
//! Run: `cargo bench -p rpcrdma-v1 --bench validation`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rpcrdma_v1::verdict::{receive, ReceivePolicy, Verdict};

/// An RDMA_MSG with `n` segments spread over the three lists (reads at
/// ascending positions, one write chunk, a reply chunk), then an RPC call.
fn header(n: u32) -> Vec<u8> {
    let (reads, writes, reply) = (n / 2, n / 4, n - n / 2 - n / 4);
    let mut w = vec![7u32, 1, 32, 0];
    for i in 0..reads {
        w.extend([1, 8 + i * 8192, 0x100 + i, 4096, 0, 0x1000]);
    }
    w.push(0);
    if writes > 0 {
        w.extend([1, writes]);
        for i in 0..writes {
            w.extend([0x200 + i, 4096, 0, 0x2000]);
        }
    }
    w.push(0);
    if reply > 0 {
        w.extend([1, reply]);
        for i in 0..reply {
            w.extend([0x300 + i, 4096, 0, 0x3000]);
        }
    } else {
        w.push(0);
    }
    w.extend([7, 0, 2, 100_003, 3, 0]);
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

fn bench(c: &mut Criterion) {
    let policy = ReceivePolicy::default();
    let mut g = c.benchmark_group("v1 receive (decode + validate)");
    for n in [0u32, 4, 16] {
        let bytes = header(n);
        assert!(matches!(receive(&bytes, &policy), Verdict::Accept(_)), "{n} segments");
        g.bench_function(format!("{n} segments ({} bytes)", bytes.len()), |b| {
            b.iter(|| match receive(black_box(&bytes), &policy) {
                Verdict::Accept(h) => h.header_len(),
                _ => 0,
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
