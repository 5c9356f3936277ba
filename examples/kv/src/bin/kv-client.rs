//! KV's client: `kv-client ADDRESS` calls a kv-server over TCP, blocking and from 64 tokio
//! tasks, moves a 1 MiB value through RDMA chunks, and meets three errors; it exits non-zero
//! if an answer is wrong.

use std::sync::Arc;

use kv::{kv_v1, KvKey, KvPutArgs, KvValue};
use negotiate::client::{Client, ClientConfig};
use negotiate::service::{Bindings, CallError, RpcClient};
use rpcrdma_verbs::Tcp;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).ok_or("usage: kv-client ADDRESS")?;
    let client = Client::connect(Tcp, addr.as_str(), ClientConfig::default())?;
    let kv = Arc::new(kv_v1::Client(RpcClient::new(client, Bindings::new().with(kv_v1::Binding))));

    kv.kv_put(&KvPutArgs { key: KvKey("greeting"), value: KvValue(b"hello") })?;
    assert_eq!(kv.kv_get(&KvKey("greeting"))?.get(), KvValue(b"hello"));

    // 1 MiB: a Read chunk to the server, a Write chunk back (kv.binding), byte for byte.
    let big: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    kv.kv_put(&KvPutArgs { key: KvKey("big"), value: KvValue(&big) })?;
    assert!(kv.kv_get(&KvKey("big"))?.get().0 == big.as_slice());
    println!("1 MiB through chunks: {} chunked calls", kv.0.client().stats().chunked);

    // 64 tasks on one tokio runtime, each with keys of its own.
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    runtime.block_on(async {
        let tasks = (0..64).map(|t| {
            let kv = kv.clone();
            tokio::spawn(async move {
                let key = format!("task {t}");
                kv.kv_put_async(&KvPutArgs { key: KvKey(&key), value: KvValue(key.as_bytes()) }).await?;
                let got = kv.kv_get_async(&KvKey(&key)).await?;
                assert_eq!(got.get(), KvValue(key.as_bytes()));
                Ok::<_, CallError>(())
            })
        });
        for task in tasks.collect::<Vec<_>>() {
            task.await.expect("a task panicked")?;
        }
        Ok::<_, CallError>(())
    })?;

    // Errors say what went wrong. A key over KV_MAX_KEY: refused before anything is sent.
    let e = kv.kv_get(&KvKey(&"k".repeat(300))).unwrap_err();
    println!("as expected: {e}");
    assert!(matches!(e, CallError::Arguments { .. }));
    // A 3 MiB value: over the server's largest chunk (2 MiB), refused with the sizes.
    let e = kv.kv_put(&KvPutArgs { key: KvKey("huge"), value: KvValue(&vec![0; 3 << 20]) }).unwrap_err();
    println!("as expected: {e}");
    assert!(e.to_string().contains("Read chunks of [3145728] bytes"));
    // A version the server does not serve (KV_GET's numbers in version 2).
    struct GetV2;
    impl xdr_spec_rt::rpc::Procedure for GetV2 {
        const PROGRAM: u32 = kv::KV_PROG;
        const VERSION: u32 = 2;
        const PROCEDURE: u32 = kv::KV_GET;
        const NAME: &'static str = "KV_GET";
        type Args<'a> = KvKey<'a>;
        type Results<'a> = KvValue<'a>;
    }
    let e = xdr_spec_rt::rpc::Caller::call::<GetV2>(&kv.0, &KvKey("greeting")).unwrap_err();
    println!("as expected: {e}");
    assert!(matches!(e, CallError::VersionMismatch { low: 1, high: 1, .. }));
    println!("settled on RPC-over-RDMA version {:?}", kv.0.client().version());
    Ok(())
}
