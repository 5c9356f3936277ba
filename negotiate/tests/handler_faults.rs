//! A handler whose reply is not an RPC reply to its call (issue 28, "errors that say what
//! went wrong"): another XID, nothing at all, or not a REPLY. The server warns, answers the
//! caller with SYSTEM_ERR (RFC 5531 section 9) and serves on; the caller learns it at once,
//! not after its timeouts; and a first call answered so does not make the client remember
//! the server as lacking Version Two.

use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig};
use negotiate::onc::{AcceptStat, CallHeader, Reply, ReplyHeader};
use negotiate::server::{Server, ServerConfig, ServerStats};
use negotiate::service::{CallError, RpcClient, NO_CHUNKS};
use rpcrdma_v1::Version;
use rpcrdma_verbs::InProcess;
use xdr_spec_rt::rpc::{Caller, Procedure};

/// Every warning, as "target: message".
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            self.0.lock().unwrap().push(format!("{}: {}", r.target(), r.args()));
        }
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

/// Installs the capturing logger, once per test binary.
fn capture_warnings() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&CAPTURE).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
    });
}

fn warnings_about(xid: u32) -> Vec<String> {
    let tag = format!("{xid:#010x}");
    CAPTURE.0.lock().unwrap().iter().filter(|l| l.contains(&tag)).cloned().collect()
}

/// A reply: XID, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS, then `results`.
fn success(xid: u32, results: &[u8]) -> Vec<u8> {
    let mut reply = Vec::new();
    negotiate::onc::reply_success(xid, results, &mut reply);
    reply
}

/// A server whose handler answers each call as `fault` says, by the call's procedure: 1
/// another XID, 2 nothing, 3 the call itself (a CALL, not a REPLY), anything else a proper
/// empty SUCCESS.
fn faulty_server() -> Server {
    capture_warnings();
    let handler = |call: &[u8]| {
        let (h, _) = CallHeader::decode(call).unwrap();
        match h.proc {
            1 => success(h.xid.wrapping_add(1), &[]),
            2 => Vec::new(),
            3 => call.to_vec(),
            _ => success(h.xid, &[]),
        }
    };
    Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(NO_CHUNKS), handler).unwrap()
}

fn stats_reach(server: &Server, what: impl Fn(&ServerStats) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !what(&server.stats()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    what(&server.stats())
}

/// Each fault, as the caller sees it: a SYSTEM_ERR reply with its own XID, at once.
#[test]
fn a_reply_that_is_not_the_calls_is_answered_system_err_and_the_server_warns() {
    let server = faulty_server();
    let cfg = ClientConfig::default().timeout(Duration::from_secs(30));
    let client = Client::new(InProcess, server.local_addr(), cfg);
    for (n, (proc, why)) in
        [(1, "its XID is"), (2, "it is empty"), (3, "its message type is 0, not REPLY (1)")].into_iter().enumerate()
    {
        let xid = 0x7700 + proc;
        let started = Instant::now();
        let reply = client.call(&CallHeader::new(xid, 0x2000_0001, 1, proc).message(&[]).unwrap(), &NO_CHUNKS).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "answered at once, not after a timeout");
        let (h, _) = ReplyHeader::decode(&reply).unwrap();
        assert_eq!(h.xid, xid, "the caller's own XID");
        assert!(matches!(h.reply, Reply::Accepted { stat: AcceptStat::SystemErr, .. }), "{:?}", h.reply);
        assert!(stats_reach(&server, |s| s.bad_replies == n as u64 + 1), "{:?}", server.stats());
        let warned = warnings_about(xid);
        assert!(warned.iter().any(|w| w.contains("not an RPC reply to it") && w.contains(why)), "{warned:?}");
    }
    // The connection went on through all of it, and the first call, the Version Two probe,
    // settled Version Two: a handler's fault is not the transport's.
    assert_eq!(
        client.call(&CallHeader::new(0x7800, 0x2000_0001, 1, 9).message(&[]).unwrap(), &NO_CHUNKS).unwrap(),
        success(0x7800, &[])
    );
    assert_eq!(client.version(), Some(Version::TWO));
    assert!(client.ended().is_empty(), "{:?}", client.ended());
    assert_eq!(client.memory().no_v2(&server.local_addr()), None);
}

struct Faulty;
impl Procedure for Faulty {
    const PROGRAM: u32 = 0x2000_0001;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 1;
    const NAME: &'static str = "FAULTY";
    type Args<'a> = xdr_spec_rt::rpc::Void;
    type Results<'a> = xdr_spec_rt::rpc::Void;
}

/// A typed caller says so: the server failed to carry the call out.
#[test]
fn a_typed_caller_reports_system_err() {
    let server = faulty_server();
    let client = RpcClient::new(Client::new(InProcess, server.local_addr(), ClientConfig::default()), NO_CHUNKS);
    let e = client.call::<Faulty>(&xdr_spec_rt::rpc::Void).unwrap_err();
    assert!(matches!(e, CallError::SystemError { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "FAULTY (program 0x20000001 version 1): the server failed to carry the call out (SYSTEM_ERR)"
    );
}

/// A chunk over the server's limit (a Write chunk of 4 MiB for a result, where a default
/// server takes 2 MiB): the server's warning names its limit and the chunk's size, and the
/// client's error the sizes of the chunks it asked for and where the limit is set.
#[test]
fn a_chunk_over_the_servers_limit_is_refused_naming_the_limit_and_the_sizes() {
    use negotiate::client::{ChunkSizes, ClientError};
    use rpcrdma_v1::ulb::OpaqueAtUlb;
    let server = faulty_server();
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(28), max_result: 4 << 20, max_reply: 1024 };
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let xid = 0x7900;
    let e = client.call(&CallHeader::new(xid, 0x2000_0001, 1, 9).message(&[]).unwrap(), &ulb).unwrap_err();
    let ClientError::ChunksRefused { chunks, .. } = &e else { panic!("{e:?}") };
    assert_eq!(**chunks, ChunkSizes { read: vec![], write: vec![4 << 20], max_reply: 1024 });
    let text = e.to_string();
    assert!(text.contains("Write chunks of [4194304] bytes") && text.contains("HeaderLimits::max_chunk_len"), "{text}");
    let warned = warnings_about(xid);
    assert!(warned.iter().any(|w| w.contains("a chunk of 4194304 bytes exceeds the limit 2097152")), "{warned:?}");
    // The connection serves on.
    assert_eq!(
        client.call(&CallHeader::new(0x7901, 0x2000_0001, 1, 9).message(&[]).unwrap(), &NO_CHUNKS).unwrap(),
        success(0x7901, &[])
    );
}

/// The same refusal met by an async call (`Client::call_async`), which takes its reply
/// through the same lane as a blocking one: the same error, with the same sizes.
#[test]
fn an_async_call_whose_chunk_is_over_the_servers_limit_gets_the_sizes_too() {
    use negotiate::client::{ChunkSizes, ClientError};
    use rpcrdma_v1::ulb::OpaqueAtUlb;
    let server = faulty_server();
    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(28), max_result: 4 << 20, max_reply: 1024 };
    let client = Client::new(InProcess, server.local_addr(), ClientConfig::default());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let xid = 0x7a00;
    let message = CallHeader::new(xid, 0x2000_0001, 1, 9).message(&[]).unwrap();
    let e = runtime.block_on(client.call_async(&message, &ulb)).unwrap_err();
    let ClientError::ChunksRefused { chunks, .. } = &e else { panic!("{e:?}") };
    assert_eq!(**chunks, ChunkSizes { read: vec![], write: vec![4 << 20], max_reply: 1024 });
    assert!(e.to_string().contains("Write chunks of [4194304] bytes"), "{e}");
    assert!(warnings_about(xid).iter().any(|w| w.contains("a chunk of 4194304 bytes exceeds the limit 2097152")));
    let next = CallHeader::new(0x7a01, 0x2000_0001, 1, 9).message(&[]).unwrap();
    assert_eq!(runtime.block_on(client.call_async(&next, &NO_CHUNKS)).unwrap(), success(0x7a01, &[]));
}
