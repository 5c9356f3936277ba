//! The `log` events tell a connection's story (issue 16, "Observability"): a client that
//! speaks Version Two meets a server that speaks only Version One, and the log shows the
//! connect, the private data both ways, the probe, the ERR_VERS answer, the fallback and the
//! version settled on, in that order. A tiny capturing logger stands in for the application's.

use std::sync::{Arc, Mutex};

use negotiate::client::{Client, ClientConfig};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_verbs::InProcess;

/// Every record, as "LEVEL target: message".
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        self.0.lock().unwrap().push(format!("{} {}: {}", r.level(), r.target(), r.args()));
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn issue_16_the_log_tells_a_fallback_from_version_two_to_version_one() {
    // One logger per test binary: this file has one test.
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Debug);

    let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
    let v1_only = ServerConfig::default().versions((Version::ONE, Version::ONE));
    let server = Server::start(InProcess, "inproc:*", v1_only, Arc::new(ulb), echo).unwrap();
    let addr = server.local_addr();
    let client = Client::new(InProcess, &addr, ClientConfig::default());
    client.call(&[0, 0, 0, 7, 0, 0, 0, 0], &ulb).unwrap();
    assert_eq!(client.version(), Some(Version::ONE));
    drop(client);
    // The client's ordinary exit, as the server sees it: an end at INFO, not a loss.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while server.peers().iter().all(|p| p.ended.is_none()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    drop(server);

    let records = CAPTURE.0.lock().unwrap().clone();
    let story = [
        format!("INFO negotiate::client::lane: connecting to {addr} (attempt 1)"),
        // The server decoded the client's RFC 8797 private data ...
        // (The in-process backend names a connector by its protection domain.)
        "INFO negotiate::server::accept: accepted a connection from inproc:pd-".into(),
        // ... and the client the server's.
        format!("INFO negotiate::requester: connected to {addr}: private data sent Some("),
        format!("INFO negotiate::requester: probing {addr} for Version Two with call 0x00000007"),
        "INFO negotiate::responder: refusing message 0x00000007 with RDMA_ERROR code 1: ".into(),
        format!(
            "INFO negotiate::requester: {addr} answered call 0x00000007 with RDMA_ERR_VERS: it speaks versions 1 to 1"
        ),
        format!("INFO negotiate::requester: falling back to version 1 with {addr}"),
        format!("INFO negotiate::requester: settled on version 1 with {addr}"),
    ];
    // Each line of the story where it must be: the client's lines in order, the server's
    // accept before its ERR_VERS, which comes after the probe and before the fallback (the
    // two sides' threads interleave freely otherwise).
    let at = |line: &str| {
        records.iter().position(|r| r.starts_with(line)).unwrap_or_else(|| panic!("no {line:?} in\n{records:#?}"))
    };
    let p: Vec<usize> = story.iter().map(|l| at(l)).collect();
    let client_side = [p[0], p[2], p[3], p[5], p[6], p[7]];
    assert!(client_side.windows(2).all(|w| w[0] < w[1]), "the client's story out of order: {records:#?}");
    assert!(p[1] < p[4] && p[3] < p[4] && p[4] < p[5], "the server's answer out of place: {records:#?}");
    // Both sides' private data, decoded: 4096-byte Sends and Receives each way.
    assert!(records[p[2]].contains("received Some(PrivateData"), "{}", records[p[2]]);
    assert!(records[p[1]].contains(": private data received Some(PrivateData"), "{}", records[p[1]]);
    // The server says each connection's version at its first call, as the client does when
    // it settles, and a client's ordinary exit as an end, not a failure (issue 28).
    let server_says = |what: &str| records.iter().any(|r| r.starts_with("INFO negotiate::server") && r.contains(what));
    assert!(server_says("speaks version 1: inline thresholds"), "{records:#?}");
    assert!(server_says("ended: closed by the peer or the transport"), "{records:#?}");
    assert!(!records.iter().any(|r| r.starts_with("WARN") && r.contains("ended")), "{records:#?}");
}
