//! TCP backend cost: a 1 MiB RDMA Write, posted and completed (the completion waits for the
//! target's ACK, i.e. the bytes are in the target region), against raw TCP loopback moving the
//! same 1 MiB the same way in the same run: a plain `TcpStream` pair where the sender writes
//! 1 MiB, the receiver reads it fully into a buffer and answers one byte, and the sender waits
//! for that byte. The ratio of their throughputs is the figure of merit (target >= 0.7); the
//! pipelined variants (8 Writes in flight / 8 x 1 MiB streamed per one-byte answer) show the streaming rate.
//! Also the 64-byte Send/Receive round trip.

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rpcrdma_verbs::{
    Access, Backend, Completion, ConnectRequest, Listener, MemoryRegion, ProtectionDomain, QpCaps, QueuePair, Sge, Tcp,
};

const MIB: usize = 1 << 20;
const DEPTH: usize = 8;
const T: Duration = Duration::from_secs(5);

fn pair() -> (<Tcp as Backend>::Pd, <Tcp as Backend>::Qp, <Tcp as Backend>::Qp) {
    let b = Tcp;
    let pd = b.alloc_pd().unwrap();
    let l = b.listen(&b.any_address()).unwrap();
    let addr = l.local_addr();
    let pd2 = pd.clone();
    let t = std::thread::spawn(move || Tcp.connect(&pd2, &addr, &[], QpCaps::default(), T).unwrap().0);
    let server = l.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
    (pd, t.join().unwrap(), server)
}

/// A raw loopback pair whose receiver thread reads `chunk` bytes fully `per_ack` times (into
/// the same buffer), then answers one byte.
fn raw_pair(chunk: usize, per_ack: usize) -> TcpStream {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let client = TcpStream::connect(addr).unwrap();
    let (mut server, _) = l.accept().unwrap();
    client.set_nodelay(true).unwrap();
    server.set_nodelay(true).unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; chunk];
        'run: loop {
            for _ in 0..per_ack {
                if server.read_exact(&mut buf).is_err() {
                    break 'run;
                }
                black_box(&buf);
            }
            if server.write_all(&[1]).is_err() {
                break;
            }
        }
    });
    client
}

fn rdma_write_vs_raw_tcp(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_1MiB");
    g.throughput(Throughput::Bytes(MIB as u64));
    let src = vec![0xa5u8; MIB];
    let mut ack = [0u8];

    let mut raw = raw_pair(MIB, 1);
    g.bench_function("raw_tcp", |b| {
        b.iter(|| {
            raw.write_all(black_box(&src)).unwrap();
            raw.read_exact(&mut ack).unwrap();
        })
    });
    drop(raw);

    let (pd, client, _server) = pair();
    let local = pd.register(vec![0xa5; MIB], Access::empty()).unwrap();
    let target = pd.register(vec![0; MIB], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    g.bench_function("rdma_write", |b| {
        b.iter(|| {
            client.post_write(1, &[Sge::whole(&local)], target.remote_at(0)).unwrap();
            assert!(client.wait_cq(T).unwrap().is_ok());
        })
    });
    g.finish();

    let mut g = c.benchmark_group("tcp_1MiB_x8");
    g.throughput(Throughput::Bytes((DEPTH * MIB) as u64));
    let mut raw = raw_pair(MIB, DEPTH);
    g.bench_function("raw_tcp", |b| {
        b.iter(|| {
            for _ in 0..DEPTH {
                raw.write_all(black_box(&src)).unwrap();
            }
            raw.read_exact(&mut ack).unwrap();
        })
    });
    drop(raw);
    let mut out = [Completion::default(); DEPTH];
    g.bench_function("rdma_write", |b| {
        b.iter(|| {
            for i in 0..DEPTH as u64 {
                client.post_write(i, &[Sge::whole(&local)], target.remote_at(0)).unwrap();
            }
            let mut n = 0;
            while n < DEPTH {
                let c = client.wait_cq(T).unwrap();
                assert!(c.is_ok());
                n += 1 + client.poll_cq(&mut out[..DEPTH - n - 1]);
            }
        })
    });
    g.finish();
}

fn send_recv_64(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_send_recv");
    g.throughput(Throughput::Elements(1));
    let (pd, client, server) = pair();
    let msg = pd.register(vec![7; 64], Access::empty()).unwrap();
    let buf = pd.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    g.bench_function("64B", |b| {
        b.iter(|| {
            server.post_recv(1, Sge::whole(&buf)).unwrap();
            client.post_send(2, &[Sge::whole(&msg)], None).unwrap();
            assert!(server.wait_cq(T).unwrap().is_ok());
            assert!(client.wait_cq(T).unwrap().is_ok());
        })
    });
    g.finish();
}

criterion_group!(benches, rdma_write_vs_raw_tcp, send_recv_64);
criterion_main!(benches);
