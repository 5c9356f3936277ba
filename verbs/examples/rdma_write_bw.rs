//! RDMA Write bandwidth of the rdma-core backend, measured the way perftest's `ib_write_bw`
//! measures it, so the two can be compared on the same device (`guest/bench-rdma` runs both in
//! the Soft-RoCE guest and prints the ratio).
//!
//! ```sh
//! RDMA_TEST_ADDR=10.0.2.15 rdma_write_bw [SIZE [ITERATIONS [DEPTH]]]   # defaults 65536 1000 128
//! ```
//!
//! One process, two connections' worth of work on one device: a server thread accepts and
//! advertises a `SIZE`-byte target region (address and rkey in its accept private data); the
//! client posts `ITERATIONS` RDMA Writes of `SIZE` bytes from one source region, keeping up to
//! `DEPTH` in flight (ib_write_bw's default tx depth is 128), and busy-polls the completion
//! queue. The clock runs from the first post to the last completion, as in perftest. Prints
//! `bytes iterations MiB/s` on one line after a `#bytes` header, like perftest's result table.

use std::time::{Duration, Instant};

use rpcrdma_verbs::{
    Access, Backend, Completion, ConnectRequest, Listener, MemoryRegion, ProtectionDomain, QpCaps, QueuePair, Rdma,
    RemoteBuf, Sge,
};

const T: Duration = Duration::from_secs(30);

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .map_or(default, |a| a.parse().unwrap_or_else(|_| panic!("argument {n}: {a:?} is not a number")))
}

fn main() {
    let Some(b) = Rdma::from_test_env() else { std::process::exit(2) };
    let (size, iters, depth) = (arg(1, 65536), arg(2, 1000), arg(3, 128));
    let caps = QpCaps::default().max_send_wr(depth as u32);

    let listener = b.listen(&b.any_address()).expect("listen");
    let addr = listener.local_addr();
    let server = std::thread::spawn(move || {
        let pd = Rdma::from_test_env().unwrap().alloc_pd().unwrap();
        let target = pd.register(vec![0; size], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        let mut pdata = target.addr().to_le_bytes().to_vec();
        pdata.extend_from_slice(&target.rkey().to_le_bytes());
        let qp = listener.get_request(T).unwrap().accept(&pd, &pdata, QpCaps::default()).unwrap();
        // Stay connected until the client is done (its disconnect is the signal).
        let _ = qp.cm_event(Duration::from_secs(600));
        target.with(|t| assert!(t.iter().all(|&x| x == 0x5a), "the writes did not land"));
    });

    let pd = b.alloc_pd().unwrap();
    let (qp, accepted) = b.connect(&pd, &addr, &[], caps, T).expect("connect");
    let remote = RemoteBuf {
        addr: u64::from_le_bytes(accepted[..8].try_into().unwrap()),
        rkey: u32::from_le_bytes(accepted[8..12].try_into().unwrap()),
    };
    let src = pd.register(vec![0x5a; size], Access::empty()).unwrap();
    let mut cqes = vec![Completion::default(); depth];
    let (mut posted, mut done) = (0usize, 0usize);
    let start = Instant::now();
    while done < iters {
        while posted < iters && posted - done < depth {
            qp.post_write(posted as u64, &[Sge::whole(&src)], remote).expect("post_write");
            posted += 1;
        }
        let n = qp.poll_cq(&mut cqes);
        for c in &cqes[..n] {
            assert!(c.is_ok(), "{c:?}");
        }
        done += n;
        assert!(start.elapsed() < T * 4, "no progress: {done} of {iters} writes completed");
    }
    let secs = start.elapsed().as_secs_f64();
    qp.disconnect();
    server.join().unwrap();
    let mib_s = (size * iters) as f64 / secs / (1 << 20) as f64;
    println!(" #bytes     #iterations    BW average[MiB/sec]");
    println!(" {size}      {iters}           {mib_s:.2}");
}
