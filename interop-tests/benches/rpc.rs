//! The whole stack on the in-process backend, side by side with raw verbs in one run:
//!
//! * a small RPC (64-byte call, 64-byte reply) through `negotiate`'s Client and Server (probe
//!   settled, Version Two), against a raw 64-byte Send/Receive round trip between two threads
//!   on the same backend, both ends sleeping in the completion queue's wait or both
//!   busy-polling it (`_polled`, as `ib_send_lat`): what marshaling, negotiation state, credits
//!   and the dispatcher cost; (and the same pair on the TCP backend);
//! * a call with a 1 MiB DDP-eligible argument (a Read chunk the server RDMA-Reads straight
//!   into the call message), its message copied by the client (`call`) or lent (`call_lent`),
//!   against a raw 1 MiB RDMA Read on the same backend;
//! * a call whose reply carries a 1 MiB DDP-eligible result (RDMA-Written by the server into
//!   the call's Write chunk, then reassembled), against a raw 1 MiB RDMA Write: the result
//!   written by the handler each call, or lent from memory it keeps (`LendReply`).
//!
//! The ratios (ours / raw) are the figures of merit; docs/benchmarks.md reports them.

use std::sync::Arc;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use negotiate::client::{Client, ClientConfig};
use negotiate::server::{LendReply, LentResults, Server, ServerConfig, ServerStats, WriteReply};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{
    Access, Backend, ConnectRequest, InProcess, Listener, MemoryRegion, ProtectionDomain, QpCaps, QueuePair, Sge, Tcp,
};

#[path = "common/round_trip.rs"]
mod round_trip;
use round_trip::{reply_to, rpc_pair, Caller, RawPair, Wait};

const T: Duration = Duration::from_secs(5);
const MIB: usize = 1 << 20;

fn small_rpc_vs_raw_round_trip(c: &mut Criterion) {
    round_trip(c, "round_trip_64B", InProcess);
    round_trip(c, "round_trip_64B_tcp", Tcp);
}

/// A raw 64-byte Send/Receive round trip and a 64-byte RPC, both on `b`.
fn round_trip<B: Backend + Clone>(c: &mut Criterion, group: &str, b: B) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));

    for (name, wait) in [("raw_send_recv", Wait::Sleep), ("raw_send_recv_polled", Wait::Poll)] {
        let raw = RawPair::start(&b, wait);
        g.bench_function(name, |bench| bench.iter(|| raw.round_trip()));
        raw.stop();
    }

    let (_server, client) = rpc_pair(b);
    let mut caller = Caller::new(&client);
    g.bench_function("rpc_call", |bench| bench.iter(|| caller.call()));
    // (Unless a filter skipped it.)
    if client.stats().short > 0 {
        assert_eq!(client.version(), Some(Version::TWO));
    }
    g.finish();
}

/// One side of an in-process connection: its protection domain and queue pair.
type Side = (<InProcess as Backend>::Pd, <InProcess as Backend>::Qp);

/// Two connected in-process queue pairs, each with its protection domain: (ours, the peer's).
fn connected_pair() -> (Side, Side) {
    let b = InProcess;
    let listener = b.listen(&b.any_address()).unwrap();
    let addr = listener.local_addr();
    let server = std::thread::spawn(move || {
        let pd = InProcess.alloc_pd().unwrap();
        let qp = listener.get_request(T).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
        (pd, qp)
    });
    let pd = b.alloc_pd().unwrap();
    let (qp, _) = b.connect(&pd, &addr, &[], QpCaps::default(), T).unwrap();
    ((pd, qp), server.join().unwrap())
}

fn read_chunk_1mib_vs_raw_read(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_1MiB");
    g.throughput(Throughput::Bytes(MIB as u64));
    g.sample_size(20);

    // Raw: one 1 MiB RDMA Read of a registered region.
    let ((pd, qp), (spd, _sqp)) = connected_pair();
    let source = spd.register(vec![3; MIB], Access::REMOTE_READ).unwrap();
    let sink = pd.register(vec![0; MIB], Access::LOCAL_WRITE).unwrap();
    g.bench_function("raw_rdma_read", |bench| {
        bench.iter(|| {
            qp.post_read(1, &[Sge::whole(&sink)], source.remote_at(0)).unwrap();
            assert!(qp.wait_cq(T).unwrap().is_ok());
        })
    });

    // Ours: a call whose 1 MiB opaque (at offset 8) is DDP-eligible: Chunked, one Read chunk.
    let ulb = OpaqueAtUlb { call_opaque: Some(8), reply_opaque: None, max_result: 0, max_reply: 256 };
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), reply_to).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let mut call = vec![0u8; 12 + MIB];
    call[8..12].copy_from_slice(&(MIB as u32).to_be_bytes());
    let mut xid = 0u32;
    g.bench_function("rpc_read_chunk_call", |bench| {
        bench.iter(|| {
            xid = xid.wrapping_add(1);
            call[..4].copy_from_slice(&xid.to_be_bytes());
            assert_eq!(client.call(&call, &ulb).unwrap().len(), 64);
        })
    });
    // The same call with the message's buffer lent (`Client::call_lent`): the server reads the
    // argument straight from it, no registered copy.
    let mut reply = Vec::with_capacity(64);
    g.bench_function("rpc_read_chunk_call_lent", |bench| {
        bench.iter(|| {
            xid = xid.wrapping_add(1);
            call[..4].copy_from_slice(&xid.to_be_bytes());
            client.call_lent(&mut call, &ulb, &mut reply).unwrap();
            assert_eq!(reply.len(), 64);
        })
    });
    assert!(xid == 0 || client.stats().chunked > 0, "the call was not sent Chunked");
    g.finish();
}

fn write_chunk_1mib_vs_raw_write(c: &mut Criterion) {
    let mut g = c.benchmark_group("write_1MiB");
    g.throughput(Throughput::Bytes(MIB as u64));
    g.sample_size(20);

    // Raw: one 1 MiB RDMA Write into a registered region.
    let ((pd, qp), (spd, _sqp)) = connected_pair();
    let sink = spd.register(vec![0; MIB], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let source = pd.register(vec![3; MIB], Access::empty()).unwrap();
    g.bench_function("raw_rdma_write", |bench| {
        bench.iter(|| {
            qp.post_write(1, &[Sge::whole(&source)], sink.remote_at(0)).unwrap();
            assert!(qp.wait_cq(T).unwrap().is_ok());
        })
    });

    // Ours: a call whose reply carries a 1 MiB DDP-eligible opaque (at offset 8): the server
    // RDMA-Writes it into the call's Write chunk, then the client reassembles the reply.
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: MIB, max_reply: 256 };
    // Written into the buffer the server keeps from one reply to the next (`WriteReply`), as a
    // server that cares about copies would: producing the result is one memset.
    let big_reply = WriteReply(|call: &[u8], r: &mut Vec<u8>| {
        r.extend_from_slice(&call[..4]);
        r.extend_from_slice(&1u32.to_be_bytes());
        r.extend_from_slice(&(MIB as u32).to_be_bytes());
        r.resize(12 + MIB, 5);
    });
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), big_reply).unwrap();
    if write_chunk_calls(&mut g, "rpc_write_chunk_reply", &server, &ulb) {
        let stats = counted(&server, |s| s.write_chunk_results);
        assert!(stats.write_chunk_results > 0, "the result did not travel in a Write chunk");
    }

    // The same result lent by the handler from memory it keeps (`LendReply`): a server whose
    // data is there already, as the raw Write's source is. The reply is reduced (its length
    // word only) and the result RDMA-Written from the connection's registered copy of it.
    let block: Arc<[u8]> = vec![5u8; MIB].into();
    let lending = LendReply(move |call: &[u8], r: &mut Vec<u8>, lent: &mut LentResults| {
        r.extend_from_slice(&call[..4]);
        r.extend_from_slice(&1u32.to_be_bytes());
        r.extend_from_slice(&(MIB as u32).to_be_bytes());
        lent.lend(block.clone());
    });
    let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), lending).unwrap();
    if write_chunk_calls(&mut g, "rpc_write_chunk_reply_lent", &server, &ulb) {
        let stats = counted(&server, |s| s.lent_results);
        assert!(stats.lent_results > 0 && stats.lent_copies == 1, "the lent result was copied: {stats:?}");
    }
    g.finish();
}

/// Benchmarks `name`: calls answered by `server` with a 1 MiB result in the call's Write chunk,
/// the reply copied out (`Client::call_into`); and `name`_in_place: the same reply read where
/// it landed (`Client::call_in_place`), the result left in the Write chunk buffer the server's
/// RDMA Write filled, with no copy out of it. False when the benchmarks' filter left both out.
fn write_chunk_calls(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, server: &Server, ulb: &OpaqueAtUlb) -> bool {
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let mut call = vec![0u8; 64];
    let mut reply = Vec::with_capacity(12 + MIB);
    let mut xid = 0u32;
    g.bench_function(name, |bench| {
        bench.iter(|| {
            xid = xid.wrapping_add(1);
            call[..4].copy_from_slice(&xid.to_be_bytes());
            client.call_into(&call, ulb, &mut reply).unwrap();
            assert_eq!(reply.len(), 12 + MIB);
        })
    });
    g.bench_function(format!("{name}_in_place"), |bench| {
        bench.iter(|| {
            xid = xid.wrapping_add(1);
            call[..4].copy_from_slice(&xid.to_be_bytes());
            let mut reply = client.call_in_place(&call, ulb).unwrap();
            assert_eq!(reply.view().result(0).map(<[u8]>::len), Some(MIB));
        })
    });
    xid > 0
}

/// `server`'s statistics once `what` of them is not 0, or after 5 s: the server counts a reply
/// once it is sent, which may be after the client has it.
fn counted(server: &Server, what: fn(&ServerStats) -> u64) -> ServerStats {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while what(&server.stats()) == 0 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    server.stats()
}

criterion_group!(benches, small_rpc_vs_raw_round_trip, read_chunk_1mib_vs_raw_read, write_chunk_1mib_vs_raw_write);
criterion_main!(benches);
