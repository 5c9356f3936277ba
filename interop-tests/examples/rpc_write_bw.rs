//! RPC bandwidth through a Write chunk on the rdma-core backend: calls whose 64 KiB result is
//! DDP-eligible, so the server RDMA-Writes it into the client's Write chunk (RFC 8166 section
//! 3.4.6) and sends a small reply. `guest/bench-rdma` runs it beside perftest's `ib_write_bw`
//! on the Soft-RoCE guest and prints the ratio.
//!
//! ```sh
//! RDMA_TEST_ADDR=10.0.2.15 rpc_write_bw [RESULT_BYTES [CALLS [CALLERS [copy|in-place [written|lent]]]]]
//! # defaults 65536 400 8 copy written
//! ```
//!
//! `CALLERS` threads share one `Client` (as an NFS client's tasks share a transport), each
//! with its own XIDs; the clock runs from the first call to the last reply. `copy` calls
//! `Client::call`, which copies the reply out of the Write chunk into a `Vec`; `in-place`
//! calls `Client::call_in_place` and reads the result where the server's RDMA Write put it.
//! `written`: the server's handler writes the result into its reply on every call; `lent`: it
//! lends one result it keeps (`LendReply`), which the server RDMA-Writes from the registered
//! copy the connection keeps of it, as a server whose data is in memory already.
//! Prints `#bytes #calls MiB/s` after a `#bytes` header, like perftest, counting result bytes
//! only.

use std::sync::Arc;
use std::time::Instant;

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{LendReply, LentResults, Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_verbs::{Backend, Rdma};

fn arg(n: usize, default: usize) -> usize {
    std::env::args().nth(n).map_or(default, |a| a.parse().unwrap_or_else(|_| panic!("argument {n}: {a:?}")))
}

fn main() {
    let Some(backend) = Rdma::from_test_env() else { std::process::exit(2) };
    let (size, calls, callers) = (arg(1, 65536), arg(2, 400), arg(3, 8).max(1));
    let in_place = match std::env::args().nth(4).as_deref() {
        None | Some("copy") => false,
        Some("in-place") => true,
        Some(other) => panic!("argument 4: {other:?} is neither copy nor in-place"),
    };
    let lent = match std::env::args().nth(5).as_deref() {
        None | Some("written") => false,
        Some("lent") => true,
        Some(other) => panic!("argument 5: {other:?} is neither written nor lent"),
    };
    // Replies: XID, REPLY, then an opaque<> of `size` bytes whose length word is at offset 8.
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(8), max_result: size, max_reply: 256 };
    let written = move |call: &[u8]| {
        let mut r = call[..4].to_vec();
        r.extend_from_slice(&1u32.to_be_bytes());
        r.extend_from_slice(&(size as u32).to_be_bytes());
        r.resize(12 + size, 0x5a);
        r.resize(12 + rpcrdma_v1::ulb::roundup(size), 0);
        r
    };
    let block: Arc<[u8]> = vec![0x5a; size].into();
    let lending = LendReply(move |call: &[u8], r: &mut Vec<u8>, lent: &mut LentResults| {
        r.extend_from_slice(&call[..4]);
        r.extend_from_slice(&1u32.to_be_bytes());
        r.extend_from_slice(&(size as u32).to_be_bytes());
        lent.lend(block.clone());
    });
    let (addr, cfg) = (backend.any_address(), ServerConfig::default());
    let server = match lent {
        false => Server::start(backend.clone(), addr, cfg, Arc::new(ulb), written),
        true => Server::start(backend.clone(), addr, cfg, Arc::new(ulb), lending),
    };
    let server = server.expect("server");
    let client = Client::new(backend, server.local_addr(), ClientConfig::default());
    // Settle the version first: the probe goes out alone.
    client.call(&[0, 0, 0, 0, 0, 0, 0, 0], &ulb).expect("first call");
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..callers {
            let (client, ulb) = (&client, &ulb);
            s.spawn(move || {
                for i in (t..calls).step_by(callers) {
                    let xid = (i as u32 + 1).to_be_bytes();
                    let call = [xid[0], xid[1], xid[2], xid[3], 0, 0, 0, 0];
                    if in_place {
                        let mut reply = client.call_in_place(&call, ulb).expect("call");
                        assert_eq!(reply.len(), 12 + rpcrdma_v1::ulb::roundup(size));
                        assert_eq!(reply.view().result(0).map(<[u8]>::len), Some(size));
                    } else {
                        let reply = client.call(&call, ulb).expect("call");
                        assert_eq!(reply.len(), 12 + rpcrdma_v1::ulb::roundup(size));
                    }
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    // The server counts a call once its reply is sent, which can be just after the client
    // has the reply: wait (bounded) for the last counts before judging them.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    while server.stats().write_chunk_results < calls as u64 && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let written = server.stats().write_chunk_results;
    assert!(written >= calls as u64, "results did not go through Write chunks ({written} of {calls})");
    let stats = server.stats();
    assert!(!lent || stats.lent_results >= calls as u64, "lent results were not written from their copy: {stats:?}");
    let mib_s = (size * calls) as f64 / secs / (1 << 20) as f64;
    println!(" #bytes     #calls    BW average[MiB/sec]");
    println!(" {size}      {calls}           {mib_s:.2}");
}
