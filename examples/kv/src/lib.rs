//! KV: a key-value store whose types, client and server trait are generated from `kv.x` by
//! `build.rs` (`Build::services`). The store below is the whole server; a client is
//! `kv_v1::Client(RpcClient::new(client, NO_CHUNKS))`.

use std::collections::HashMap;
use std::sync::Mutex;

use xdr_spec_rt::rpc::{Replied, Reply, Void};

include!(concat!(env!("OUT_DIR"), "/generated.rs"));

/// The store: keys to values, in memory.
#[derive(Default)]
pub struct Store(Mutex<HashMap<String, Vec<u8>>>);

impl kv_v1::Service for Store {
    fn kv_put(&self, args: KvPutArgs<'_>, reply: Reply<'_, kv_v1::KvPut>) -> Replied {
        self.0.lock().unwrap().insert(args.key.0.to_string(), args.value.0.to_vec());
        reply.ok(&Void)
    }

    fn kv_get(&self, key: KvKey<'_>, reply: Reply<'_, kv_v1::KvGet>) -> Replied {
        let store = self.0.lock().unwrap();
        // An absent key reads as an empty value.
        reply.ok(&KvValue(store.get(key.0).map_or(&[][..], Vec::as_slice)))
    }
}
