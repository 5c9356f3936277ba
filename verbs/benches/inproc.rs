//! In-process backend costs: a 1 MiB RDMA Write against a plain 1 MiB memcpy in the same run
//! (the ratio of their throughputs is the figure of merit; target >= 0.7), and the 64-byte
//! Send/Receive message rate.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rpcrdma_verbs::{
    Access, Backend, Completion, ConnectRequest, InProcess, Listener, MemoryRegion, ProtectionDomain, QpCaps,
    QueuePair, Sge,
};

const MIB: usize = 1 << 20;
const T: Duration = Duration::from_secs(5);

fn pair() -> (<InProcess as Backend>::Pd, <InProcess as Backend>::Qp, <InProcess as Backend>::Qp) {
    let b = InProcess;
    let pd = b.alloc_pd().unwrap();
    let l = b.listen(&b.any_address()).unwrap();
    let addr = l.local_addr();
    let pd2 = pd.clone();
    let t = std::thread::spawn(move || InProcess.connect(&pd2, &addr, &[], QpCaps::default(), T).unwrap().0);
    let server = l.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    (pd, t.join().unwrap(), server)
}

fn rdma_write_vs_memcpy(c: &mut Criterion) {
    let mut g = c.benchmark_group("1MiB");
    g.throughput(Throughput::Bytes(MIB as u64));
    let src = vec![0xa5u8; MIB];
    let mut dst = vec![0u8; MIB];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&mut dst);
        })
    });
    let (pd, client, _server) = pair();
    let local = pd.register(vec![0xa5; MIB], Access::empty()).unwrap();
    let target = pd.register(vec![0; MIB], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let mut out = [Completion::default(); 1];
    g.bench_function("rdma_write", |b| {
        b.iter(|| {
            client.post_write(1, &[Sge::whole(&local)], target.remote_at(0)).unwrap();
            assert_eq!(client.poll_cq(&mut out), 1);
            assert!(out[0].is_ok());
        })
    });
    g.finish();
}

fn send_recv_64(c: &mut Criterion) {
    let mut g = c.benchmark_group("send_recv");
    g.throughput(Throughput::Elements(1));
    let (pd, client, server) = pair();
    let msg = pd.register(vec![7; 64], Access::empty()).unwrap();
    let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let mut out = [Completion::default(); 1];
    g.bench_function("64B", |b| {
        b.iter(|| {
            server.post_recv(1, Sge::whole(&buf)).unwrap();
            client.post_send(2, &[Sge::whole(&msg)], None).unwrap();
            assert_eq!(server.poll_cq(&mut out), 1);
            assert_eq!(client.poll_cq(&mut out), 1);
        })
    });
    g.finish();
}

criterion_group!(benches, rdma_write_vs_memcpy, send_recv_64);
criterion_main!(benches);
