//! One round of `guest/bench-kernel`: our Client against the Linux kernel's nfsd (svcrdma)
//! and against our own Server, in the Soft-RoCE guest, sequential calls timed end to end.
//!
//! ```sh
//! RDMA_TEST_ADDR=10.0.2.15 kernel_bench [NULL_CALLS [READS [PORT]]]   # defaults 2000 200 20049
//! ```
//!
//! Prints four `FIGURE` lines:
//!
//! - `null_kernel_rtps`: NFSv3 NULL calls (AUTH_NONE, Short) to the kernel, round trips/s;
//! - `null_ours_rtps`: the same calls to our Server (a handler answering NULL), round trips/s;
//! - `read_kernel_MiBps`: NFSv4 COMPOUND {PUTROOTFH, LOOKUP "data64k", READ 65536} whose
//!   64 KiB READ data the kernel RDMA-Writes into our Write chunk, one call at a time, in
//!   MiB/s of result data;
//! - `read_ours_MiBps`: calls whose 64 KiB DDP-eligible opaque our Server RDMA-Writes into
//!   the Write chunk, one at a time, MiB/s.
//!
//! Each client's first call (the Version Two probe against the kernel) is made before timing.
//!
//! `POLL_US`, when set, is every Client's and Server's `poll_before_wait` in microseconds
//! (30 by default): how long a thread looks at an empty completion queue before it sleeps.

use std::sync::Arc;
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, Rdma};

#[path = "common/onc_rpc.rs"]
mod onc_rpc;
use onc_rpc::{accepted_success, rpc_call, word, NFS_PROGRAM};

const READ_SIZE: usize = 65536;

fn arg(n: usize, default: usize) -> usize {
    std::env::args().nth(n).map_or(default, |a| a.parse().unwrap_or_else(|_| panic!("argument {n}: {a:?}")))
}

/// `n` sequential NULL calls; round trips per second.
fn nulls<B: Backend + Clone>(client: &Client<B>, n: usize, ulb: &OpaqueAtUlb, base: u32) -> f64 {
    let start = Instant::now();
    for i in 0..n {
        let xid = base + i as u32;
        let reply = client.call(&rpc_call(xid, NFS_PROGRAM, 3, 0, false).0, ulb).expect("NULL call");
        assert!(accepted_success(&reply, xid).is_ok(), "NULL reply {:02x?}", &reply[..reply.len().min(32)]);
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let Some(rdma) = Rdma::from_test_env() else { std::process::exit(2) };
    let host = rdma.host();
    let (null_calls, reads, port) = (arg(1, 2000), arg(2, 200), arg(3, 20049));
    let kernel_addr = format!("{host}:{port}");
    let small = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };
    let (mut client_cfg, mut server_cfg) = (ClientConfig::default(), ServerConfig::default());
    if let Some(us) = std::env::var("POLL_US").ok().map(|v| v.parse().expect("POLL_US: microseconds")) {
        client_cfg.poll_before_wait = Duration::from_micros(us);
        server_cfg.limits.poll_before_wait = Duration::from_micros(us);
    }

    // Our servers: one answering NULL (accepted, SUCCESS, no results), one returning a
    // 64 KiB DDP-eligible opaque after an RPC reply header.
    let null_server =
        Server::start(rdma.clone(), rdma.any_address(), server_cfg.clone(), Arc::new(small), |call: &[u8]| {
            let mut r = call[..4].to_vec();
            for w in [1u32, 0, 0, 0, 0] {
                r.extend_from_slice(&w.to_be_bytes());
            }
            r
        })
        .expect("NULL server");
    let ours_ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24), max_result: READ_SIZE, max_reply: 1024 };
    let read_server =
        Server::start(rdma.clone(), rdma.any_address(), server_cfg, Arc::new(ours_ulb), |call: &[u8]| {
            let mut r = call[..4].to_vec();
            for w in [1u32, 0, 0, 0, 0, READ_SIZE as u32] {
                r.extend_from_slice(&w.to_be_bytes());
            }
            r.resize(28 + READ_SIZE, 0x6b);
            r
        })
        .expect("read server");

    let kernel = Client::new(rdma.clone(), &kernel_addr, client_cfg.clone());
    let ours_null = Client::new(rdma.clone(), null_server.local_addr(), client_cfg.clone());
    let ours_read = Client::new(rdma, read_server.local_addr(), client_cfg);
    // Settle each connection and version before timing.
    nulls(&kernel, 10, &small, 0x6b00_0000);
    nulls(&ours_null, 10, &small, 0x6f00_0000);

    let null_kernel = nulls(&kernel, null_calls, &small, 0x6b10_0000);
    let null_ours = nulls(&ours_null, null_calls, &small, 0x6f10_0000);

    // READ of /srv/nfs/data64k: the data<> length word at 24 + 12 + 8 + 8 + 12 = 64.
    let read_ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(64), max_result: READ_SIZE, max_reply: 1024 };
    let read = |xid: u32| {
        rpc_call(xid, NFS_PROGRAM, 4, 1, true)
            .opaque(b"")
            .u32(0)
            .u32(3)
            .u32(24)
            .u32(15)
            .opaque(b"data64k")
            .u32(25)
            .u32(0)
            .fixed(&[0; 12])
            .u64(0)
            .u32(READ_SIZE as u32)
            .0
    };
    let read_once = |xid: u32| -> Result<(), String> {
        let reply = kernel.call(&read(xid), &read_ulb).map_err(|e| e.to_string())?;
        let (status, len) = (word(&reply, 24), word(&reply, 64));
        if accepted_success(&reply, xid).is_err()
            || status != Some(0)
            || len != Some(READ_SIZE as u32)
            || reply.len() != 68 + READ_SIZE
        {
            return Err(format!("NFS4 status {status:?}, data length {len:?}, reply {} bytes", reply.len()));
        }
        Ok(())
    };
    // Warm-up, waiting out NFS4ERR_GRACE if the grace period is still running.
    let mut warm = Err(String::new());
    for attempt in 0..20u32 {
        warm = read_once(0x6b20_0000 + attempt);
        if warm.is_ok() {
            break;
        }
        eprintln!("kernel_bench: warm-up READ: {}; again in 1 s", warm.as_ref().unwrap_err());
        std::thread::sleep(Duration::from_secs(1));
    }
    warm.expect("kernel READ of data64k");
    // 64 KiB cannot come back inline (reply threshold 4096, no Reply chunk offered): the
    // READ data arrived through the Write chunk.
    let start = Instant::now();
    for i in 0..reads {
        read_once(0x6b30_0000 + i as u32).expect("kernel READ");
    }
    let read_kernel = (READ_SIZE * reads) as f64 / start.elapsed().as_secs_f64() / (1 << 20) as f64;

    ours_read
        .call(&rpc_call(0x6f20_0000, NFS_PROGRAM, 3, 0, false).0, &ours_ulb)
        .expect("first call to our read server");
    let written = read_server.stats().write_chunk_results;
    let start = Instant::now();
    for i in 0..reads {
        let xid = 0x6f30_0000 + i as u32;
        let reply = ours_read.call(&rpc_call(xid, NFS_PROGRAM, 3, 0, false).0, &ours_ulb).expect("read call");
        assert!(
            accepted_success(&reply, xid).is_ok() && reply.len() == 28 + READ_SIZE,
            "our read reply of {} bytes",
            reply.len()
        );
    }
    let read_ours = (READ_SIZE * reads) as f64 / start.elapsed().as_secs_f64() / (1 << 20) as f64;
    // The server counts a Write-chunk result after its reply is sent: wait for the last.
    let deadline = Instant::now() + Duration::from_secs(2);
    while read_server.stats().write_chunk_results - written < reads as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let written = read_server.stats().write_chunk_results - written;
    assert!(written >= reads as u64, "our results did not go through Write chunks ({written})");

    println!("FIGURE null_kernel_rtps={null_kernel:.0}");
    println!("FIGURE null_ours_rtps={null_ours:.0}");
    println!("FIGURE read_kernel_MiBps={read_kernel:.2}");
    println!("FIGURE read_ours_MiBps={read_ours:.2}");
}
