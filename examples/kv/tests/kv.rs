//! KV's generated client and server, end to end over the in-process and TCP backends:
//! values in and out, blocking and from 64 tokio tasks, and each RPC-level refusal RFC 5531
//! section 9 gives, as the typed client reports it.

use std::sync::Arc;

use kv::{kv_v1, KvKey, KvPutArgs, KvValue, Store, KV_PROG};
use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use negotiate::service::{Bindings, CallError, RpcClient, Services};
use rpcrdma_verbs::{Backend, InProcess, Tcp};
use xdr_spec_rt::rpc::{Caller, Procedure, Replied, Reply};

/// Whether `server`'s statistics come to satisfy `what` within five seconds: a call is
/// counted once its reply's Send has completed, which may be after the client has the reply.
fn counted(server: &Server, what: impl Fn(&negotiate::server::ServerStats) -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !what(&server.stats()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    what(&server.stats())
}

/// KV's Upper-Layer Binding, generated from kv.binding: a value moves by RDMA.
fn binding() -> Bindings {
    Bindings::new().with(kv_v1::Binding)
}

fn serve<B: Backend + Clone>(backend: B, store: impl kv_v1::Service + 'static) -> Server {
    let services = Services::new().with(kv_v1::Server(store));
    Server::start(backend.clone(), backend.any_address(), ServerConfig::default(), Arc::new(binding()), services)
        .unwrap()
}

fn client<B: Backend + Clone>(backend: B, server: &Server) -> kv_v1::Client<RpcClient<B, Bindings>> {
    kv_v1::Client(RpcClient::new(Client::new(backend, server.local_addr(), ClientConfig::default()), binding()))
}

fn put_and_get<B: Backend + Clone>(backend: B) {
    let server = serve(backend.clone(), Store::default());
    let kv = client(backend, &server);
    kv.kv_null().unwrap();
    kv.kv_put(&KvPutArgs { key: KvKey("greeting"), value: KvValue(b"hello") }).unwrap();
    assert_eq!(kv.kv_get(&KvKey("greeting")).unwrap().get(), KvValue(b"hello"));
    assert_eq!(kv.kv_get(&KvKey("absent")).unwrap().get(), KvValue(b""));
}

/// RFC 8166 section 6 through the generated binding (kv.binding): a 1 MiB value goes to the
/// server in a Read chunk and comes back in a Write chunk, byte for byte; the inline
/// messages carry only the rest of the call and reply.
fn a_mebibyte_through_chunks<B: Backend + Clone>(backend: B) {
    let server = serve(backend.clone(), Store::default());
    let kv = client(backend, &server);
    let value: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    kv.kv_put(&KvPutArgs { key: KvKey("big"), value: KvValue(&value) }).unwrap();
    let got = kv.kv_get(&KvKey("big")).unwrap();
    assert!(got.get().0 == value.as_slice(), "the value came back changed");
    assert_eq!(kv.0.client().stats().chunked, 1, "the PUT's value went in a Read chunk");
    assert!(counted(&server, |s| s.read_chunk_calls == 1 && s.write_chunk_results == 1), "{:?}", server.stats());
    assert_eq!(server.stats().long_calls, 0);
}

#[test]
fn a_mebibyte_through_chunks_in_process() {
    a_mebibyte_through_chunks(InProcess);
}

#[test]
fn a_mebibyte_through_chunks_over_tcp() {
    a_mebibyte_through_chunks(Tcp);
}

#[test]
fn put_and_get_in_process() {
    put_and_get(InProcess);
}

#[test]
fn put_and_get_over_tcp() {
    put_and_get(Tcp);
}

/// 64 tasks on one current-thread runtime, each putting and getting its own key through the
/// generated `_async` methods.
#[test]
fn sixty_four_tokio_tasks() {
    let server = serve(InProcess, Store::default());
    let kv = Arc::new(client(InProcess, &server));
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..64u32)
            .map(|t| {
                let kv = kv.clone();
                tokio::spawn(async move {
                    for i in 0..20u32 {
                        let key = format!("task {t} key {i}");
                        let value = (t * 1000 + i).to_be_bytes();
                        kv.kv_put_async(&KvPutArgs { key: KvKey(&key), value: KvValue(&value) }).await.unwrap();
                        assert_eq!(kv.kv_get_async(&KvKey(&key)).await.unwrap().get(), KvValue(&value));
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// A procedure the specification does not have, by hand: `P` of program `program`, version
/// `version`, number `number`, taking and returning a `u32`.
macro_rules! procedure {
    ($name:ident, $program:expr, $version:expr, $number:expr) => {
        struct $name;
        impl Procedure for $name {
            const PROGRAM: u32 = $program;
            const VERSION: u32 = $version;
            const PROCEDURE: u32 = $number;
            const NAME: &'static str = stringify!($name);
            type Args<'a> = u32;
            type Results<'a> = u32;
        }
    };
}

procedure!(OtherProgram, 0x2000_0f03, 1, 1);
procedure!(VersionTwo, KV_PROG, 2, 1);
procedure!(ProcedureNine, KV_PROG, 1, 9);
// KV_PUT's number, with a u32 for its arguments: not a kv_put_args.
procedure!(PutOfAWord, KV_PROG, 1, 1);

/// RFC 5531 section 9, each refusal as the typed client reports it: the error names the
/// procedure and says what the server answered.
#[test]
fn rfc5531_9_each_refusal_reaches_the_caller_with_its_cause() {
    let server = serve(InProcess, Store::default());
    let kv = client(InProcess, &server);
    let rpc = &kv.0;
    let e = rpc.call::<OtherProgram>(&1).unwrap_err();
    assert!(matches!(e, CallError::ProgramUnavailable { .. }), "{e:?}");
    assert_eq!(e.to_string(), "OtherProgram (program 0x20000f03 version 1): the server does not serve the program");
    let e = rpc.call::<VersionTwo>(&1).unwrap_err();
    assert!(matches!(e, CallError::VersionMismatch { low: 1, high: 1, .. }), "{e:?}");
    let e = rpc.call::<ProcedureNine>(&1).unwrap_err();
    assert!(matches!(e, CallError::ProcedureUnavailable { .. }), "{e:?}");
    let e = rpc.call::<PutOfAWord>(&7).unwrap_err();
    assert!(matches!(e, CallError::GarbageArgs { .. }), "{e:?}");
    assert!(e.to_string().starts_with("PutOfAWord (program 0x20000f02 version 1): "), "{e}");
    // Arguments that break the specification's bound (a key over KV_MAX_KEY) are refused
    // before anything is sent.
    let long = "k".repeat(257);
    let e = kv.kv_get(&KvKey(&long)).unwrap_err();
    assert!(matches!(e, CallError::Arguments { .. }), "{e:?}");
    assert!(e.to_string().starts_with("KV_GET (program 0x20000f02 version 1): the arguments have no XDR encoding"));
    // The connection served on through all of it.
    kv.kv_put(&KvPutArgs { key: KvKey("k"), value: KvValue(b"v") }).unwrap();
    assert_eq!(kv.kv_get(&KvKey("k")).unwrap().get(), KvValue(b"v"));
}

/// A store that fails: GET answers SYSTEM_ERR, PUT panics (the server catches it and answers
/// SYSTEM_ERR too).
struct Failing;

impl kv_v1::Service for Failing {
    fn kv_put(&self, _: KvPutArgs<'_>, _: Reply<'_, kv_v1::KvPut>) -> Replied {
        panic!("a store that fails")
    }

    fn kv_get(&self, _: KvKey<'_>, reply: Reply<'_, kv_v1::KvGet>) -> Replied {
        reply.system_err()
    }
}

#[test]
fn rfc5531_9_a_failing_procedure_is_system_err_and_the_server_serves_on() {
    let server = serve(InProcess, Failing);
    let kv = client(InProcess, &server);
    let e = kv.kv_get(&KvKey("k")).unwrap_err();
    assert!(matches!(e, CallError::SystemError { .. }), "{e:?}");
    let e = kv.kv_put(&KvPutArgs { key: KvKey("k"), value: KvValue(b"v") }).unwrap_err();
    assert!(matches!(e, CallError::SystemError { .. }), "{e:?}");
    kv.kv_null().unwrap();
    assert!(counted(&server, |s| s.handler_panics == 1), "{:?}", server.stats());
}

/// RFC 5531 section 9: a call whose credential does not decode (its body said to be 500
/// bytes, more than the 400 allowed) is denied AUTH_ERROR / AUTH_BADCRED, not GARBAGE_ARGS.
#[test]
fn rfc5531_9_a_malformed_credential_is_auth_badcred() {
    use negotiate::onc::{AuthStat, CallHeader, Rejected, Reply, ReplyHeader};
    let server = serve(InProcess, Store::default());
    let kv = client(InProcess, &server);
    let mut call = CallHeader::new(0x51, KV_PROG, 1, 0).message(&[]).unwrap();
    call[28..32].copy_from_slice(&500u32.to_be_bytes());
    call.resize(call.len() + 500, 0);
    let reply = kv.0.client().call(&call, &binding()).unwrap();
    let (h, _) = ReplyHeader::decode(&reply).unwrap();
    assert_eq!((h.xid, h.reply), (0x51, Reply::Denied(Rejected::AuthError(AuthStat::BADCRED))));
}

/// The generated async server trait (`kv_v1::AsyncService`), each method a future with owned
/// arguments, served by `AsyncServices` under `OnExecutor` on a multi-threaded tokio runtime:
/// the same store, called by the same generated client.
#[test]
fn an_async_service_on_tokio() {
    use negotiate::server::{CallTask, OnExecutor};
    use negotiate::service::AsyncServices;
    use xdr_spec_rt::rpc::{Answer, Args};

    /// KV's store, answering from futures.
    #[derive(Default)]
    struct AsyncStore(std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>);

    impl kv_v1::AsyncService for AsyncStore {
        async fn kv_put(&self, args: Args<kv_v1::KvPut>) -> Answer {
            let a = args.get();
            tokio::task::yield_now().await;
            self.0.lock().unwrap().insert(a.key.0.to_string(), a.value.0.to_vec());
            Answer::ok::<kv_v1::KvPut>(&xdr_spec_rt::rpc::Void)
        }

        async fn kv_get(&self, args: Args<kv_v1::KvGet>) -> Answer {
            let value = self.0.lock().unwrap().get(args.get().0).cloned().unwrap_or_default();
            Answer::ok::<kv_v1::KvGet>(&KvValue(&value))
        }
    }

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let handle = runtime.handle().clone();
    let spawn = move |task: CallTask| drop(handle.spawn(task));
    let services = AsyncServices::new().with(kv_v1::AsyncServer(std::sync::Arc::new(AsyncStore::default())));
    let server = Server::start(
        InProcess,
        InProcess.any_address(),
        ServerConfig::default(),
        Arc::new(binding()),
        OnExecutor::new(services, spawn),
    )
    .unwrap();
    let kv = client(InProcess, &server);
    kv.kv_null().unwrap();
    for i in 0..20u32 {
        let key = format!("key {i}");
        kv.kv_put(&KvPutArgs { key: KvKey(&key), value: KvValue(&i.to_be_bytes()) }).unwrap();
        assert_eq!(kv.kv_get(&KvKey(&key)).unwrap().get(), KvValue(&i.to_be_bytes()));
    }
    // A procedure the version lacks, through the async path too.
    let e = kv.0.call::<ProcedureNine>(&1).unwrap_err();
    assert!(matches!(e, CallError::ProcedureUnavailable { .. }), "{e:?}");
    drop(server);
}
