//! Issue 25, "parse once": a received message is judged once, by the one version dispatch,
//! into one outcome carrying its validated header view, and nothing downstream decodes its
//! header again. Counted by `rpcrdma_v1::header::validations` (the `count-validations`
//! feature, on for this crate's tests): every header validated, Version One's and
//! draft-cel-00's chunk lists (`Header::parse_chunk_lists`) and -07's (`Header::parse`). A
//! settled call of every form of RFC 8166 section 3.5 costs two: its call at the server, its
//! reply at the client; on each version and dialect, in process and over TCP. One test in
//! this binary: the count is the process's.

use std::sync::Arc;

use negotiate::client::{Client, ClientConfig};
use negotiate::requester::RequesterConfig;
use negotiate::responder::ResponderConfig;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::header::validations;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::{Dialect, VersionTwo};
use rpcrdma_verbs::{Backend, InProcess, Tcp};

/// The opaque's length word follows the XID and the message type.
const OPAQUE_AT: usize = 8;
/// Large enough to go by chunk at every version's default thresholds (1024, 4096).
const BIG: usize = 8192;

/// The forms: the call's binding, the call's opaque length and the reply's.
const FORMS: [(&str, OpaqueAtUlb, usize, usize); 5] = [
    ("short", ulb(None, None, 4096), 32, 32),
    ("Read chunk", ulb(Some(OPAQUE_AT), None, 4096), BIG, 32),
    ("Write chunk", ulb(None, Some(OPAQUE_AT), 4096), 32, BIG),
    ("Long call", ulb(None, None, 4096), BIG, 32),
    ("Long reply", ulb(None, None, 2 * BIG), 32, BIG),
];

const fn ulb(call_opaque: Option<usize>, reply_opaque: Option<usize>, max_reply: usize) -> OpaqueAtUlb {
    OpaqueAtUlb { call_opaque, reply_opaque, max_result: 2 * BIG, max_reply }
}

/// `[xid, msg_type, len, opaque]`: the reply's opaque length is the call's XID's low 16 bits.
fn message(xid: u32, msg_type: u32, len: usize) -> Vec<u8> {
    let mut m = [xid.to_be_bytes(), msg_type.to_be_bytes(), (len as u32).to_be_bytes()].concat();
    m.resize(m.len() + len, 0x5a);
    m
}

fn each_form_validates_twice<B: Backend + Clone>(
    b: B,
    label: &str,
    responder: ResponderConfig,
    requester: RequesterConfig,
) {
    let server_ulb = OpaqueAtUlb {
        call_opaque: Some(OPAQUE_AT),
        reply_opaque: Some(OPAQUE_AT),
        max_result: 2 * BIG,
        max_reply: 2 * BIG,
    };
    let handler = |call: &[u8]| {
        let xid = u32::from_be_bytes(call[..4].try_into().unwrap());
        message(xid, 1, (xid & 0xffff) as usize)
    };
    let scfg = ServerConfig::default().responder(responder);
    let server = Server::start(b.clone(), b.any_address(), scfg, Arc::new(server_ulb), handler).unwrap();
    let client = Client::new(b, server.local_addr(), ClientConfig::default().requester(requester));
    let mut xid = 0u32;
    let mut call = |ulb: &OpaqueAtUlb, call_len: usize, reply_len: usize| {
        xid += 0x1_0000;
        let x = xid | reply_len as u32;
        let reply = client.call(&message(x, 0, call_len), ulb).unwrap();
        assert_eq!(reply, message(x, 1, reply_len), "{label}: the reply to {x:#x}");
    };
    // Settled, and every buffer and registration made, first.
    for (_, ulb, call_len, reply_len) in &FORMS {
        call(ulb, *call_len, *reply_len);
    }
    for (form, ulb, call_len, reply_len) in &FORMS {
        let before = validations::total();
        for _ in 0..20 {
            call(ulb, *call_len, *reply_len);
        }
        let validated = validations::total() - before;
        assert_eq!(validated, 40, "{label}, {form}: 20 calls validated {validated} headers, not one a message");
    }
    let s = server.stats();
    assert!(s.write_chunk_results > 0 && s.reply_chunk_replies > 0, "{label}: the chunked forms went by chunk: {s:?}");
    assert!(client.stats().chunked > 0 && client.stats().long > 0, "{label}: {:?}", client.stats());
}

fn every_version(b: impl Backend + Clone, on: &str) {
    let v1 = ResponderConfig::default().versions((Version::ONE, Version::ONE));
    each_form_validates_twice(b.clone(), &format!("Version One, {on}"), v1, RequesterConfig::default());
    each_form_validates_twice(
        b.clone(),
        &format!("draft-cel-00, {on}"),
        ResponderConfig::default(),
        RequesterConfig::default(),
    );
    // (-07's messages too large for a Receive continue across Sends, each a message of its
    // own: here one part each, so that a call is two messages, as on the other versions.)
    let d07 = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07)).max_call_parts(1);
    let r07 = ResponderConfig::default().draft07(true).max_reply_parts(1);
    each_form_validates_twice(b, &format!("-07, {on}"), r07, d07);
}

#[test]
fn issue_25_parse_once_each_received_message_is_validated_once() {
    let before = validations::total();
    every_version(InProcess, "in process");
    assert!(validations::total() > before, "the count is on (the count-validations feature)");
    every_version(Tcp, "over TCP");
}
