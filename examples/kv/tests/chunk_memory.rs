//! Issue 28 item 4: a call whose binding provisions a large Write chunk (KV_GET: 1 MiB, for
//! the largest value) costs no fresh chunk memory per call once warm: the connection keeps
//! the buffer registered, unzeroed (its registration cache, `Transport::chunk_region`), so a 4 KiB GET
//! neither allocates nor zero-fills 1 MiB. Counted in bytes by the process's allocator, in a
//! binary of its own so that nothing else runs meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use kv::{kv_v1, KvKey, KvPutArgs, KvValue, Store};
use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use negotiate::service::{Bindings, RpcClient, Services};
use rpcrdma_verbs::{Backend, InProcess};

struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static BYTES: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            BYTES.fetch_add(new_size, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn a_provisioned_write_chunk_is_reused_not_allocated_per_call() {
    let services = Services::new().with(kv_v1::Server(Store::default()));
    let binding = Arc::new(Bindings::new().with(kv_v1::Binding));
    let server = Server::start(InProcess, InProcess.any_address(), ServerConfig::default(), binding, services).unwrap();
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let kv = kv_v1::Client(RpcClient::new(client, Bindings::new().with(kv_v1::Binding)));
    let value = vec![7u8; 4096];
    kv.kv_put(&KvPutArgs { key: KvKey("k"), value: KvValue(&value) }).unwrap();
    for _ in 0..20 {
        assert_eq!(kv.kv_get(&KvKey("k")).unwrap().get(), KvValue(&value));
    }
    const CALLS: usize = 50;
    ON.store(true, Ordering::SeqCst);
    for _ in 0..CALLS {
        let got = kv.kv_get(&KvKey("k")).unwrap();
        assert_eq!(got.get().0.len(), 4096);
    }
    ON.store(false, Ordering::SeqCst);
    let per_call = BYTES.load(Ordering::SeqCst) / CALLS;
    // The reply (4 KiB of value and its header) and the call's small pieces, not 1 MiB.
    assert!(per_call < 64 << 10, "{per_call} bytes allocated per GET: a 1 MiB Write chunk each time?");
}
