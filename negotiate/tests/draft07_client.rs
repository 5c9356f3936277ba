//! draft-ietf-nfsv4-rpcrdma-version-two-07 from the requester's side: a real [`Client`] whose
//! configuration speaks -07 ([`RequesterConfig::version_two`]) against a real [`Server`], with
//! every Send captured off the wire ([`Captured`]); and the client's connection core
//! ([`Connection::client`]) driven by bytes alone, for what a well-behaved server never sends
//! (refusals in each dialect, a GRANT, a continued reply, a reverse-direction call). Each test
//! names the section whose rule it checks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use negotiate::client::{Client, ClientConfig, ClientError};
use negotiate::connection::{Arrival, CallStep, Connection, Received};
use negotiate::datapath::DataPathError;
use negotiate::datapath::Ended;
use negotiate::requester::CallFailure;
use negotiate::requester::RequesterConfig;
use negotiate::responder::ResponderConfig;
use negotiate::server::{Server, ServerConfig};
use rpcrdma_v1::marshal_call::CallForm;
use rpcrdma_v1::ulb::OpaqueAtUlb;
use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::{Dialect, VersionTwo};
use rpcrdma_v2::draft07::header::{Header, HeaderType};
use rpcrdma_v2::draft07::marshal::{self, MessageType};
use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};
use rpcrdma_v2::HeaderLimits;
use rpcrdma_verbs::capture::{Captured, CapturedMessage};
use rpcrdma_verbs::{Backend, InProcess, Tcp};

const D07: VersionTwo = VersionTwo::One(Dialect::Ietf07);
const CEL00: VersionTwo = VersionTwo::One(Dialect::Cel00);

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

fn word(bytes: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap())
}

/// The message forms a call can take, and what each makes the wire carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Short,
    ChunkedRead,
    ChunkedWrite,
    LongCall,
    LongReply,
}

const FORMS: [Form; 5] = [Form::Short, Form::ChunkedRead, Form::ChunkedWrite, Form::LongCall, Form::LongReply];
/// Beyond every inline threshold here.
const BIG: usize = 16 * 1024;
/// Where the `opaque<>`'s length word sits: after the XID, the message type and the form.
const OPAQUE_AT: usize = 12;

impl Form {
    fn code(self) -> u32 {
        FORMS.iter().position(|&f| f == self).unwrap() as u32
    }

    /// The requester's binding: what marshaling may reduce, and how large a reply it provisions.
    fn ulb(self) -> OpaqueAtUlb {
        let (call, reply, max_result, max_reply) = match self {
            Form::Short | Form::ChunkedRead => (Some(OPAQUE_AT), None, 0, 128),
            Form::ChunkedWrite => (None, Some(OPAQUE_AT), BIG, 128),
            Form::LongCall => (None, None, 0, 128),
            Form::LongReply => (None, None, 0, 2 * BIG),
        };
        OpaqueAtUlb { call_opaque: call, reply_opaque: reply, max_result, max_reply }
    }

    /// The -07 header types the call and its reply travel in.
    fn htypes(self) -> (HeaderType, HeaderType) {
        let call = if self == Form::LongCall { HeaderType::CallExternal } else { HeaderType::CallInline };
        let reply = if self == Form::LongReply { HeaderType::ReplyExternal } else { HeaderType::ReplyInline };
        (call, reply)
    }
}

/// An RPC message: XID, type (0 call, 1 reply), form code, then an `opaque<>` of `len`
/// pattern bytes.
fn message(xid: u32, msg_type: u32, form_code: u32, len: usize) -> Vec<u8> {
    let mut m = words(&[xid, msg_type, form_code, len as u32]);
    m.extend((0..len).map(|i| (i as u8).wrapping_mul(7) ^ (xid as u8)));
    m.resize(m.len() + rpcrdma_v1::ulb::roundup_pad(len), 0);
    m
}

fn call_for(form: Form, xid: u32) -> Vec<u8> {
    let len = if matches!(form, Form::ChunkedRead | Form::LongCall) { BIG } else { 16 };
    message(xid, 0, form.code(), len)
}

/// The service: a reply from the call's XID and form, large for the forms whose reply is.
fn serve(call: &[u8]) -> Vec<u8> {
    let form = FORMS.get(word(call, 2) as usize).copied().unwrap_or(Form::Short);
    let len = if matches!(form, Form::ChunkedWrite | Form::LongReply) { BIG } else { 16 };
    message(word(call, 0), 1, form.code(), len)
}

const SERVER_ULB: OpaqueAtUlb = OpaqueAtUlb {
    call_opaque: Some(OPAQUE_AT),
    reply_opaque: Some(OPAQUE_AT),
    max_result: 4 * BIG,
    max_reply: 4 * BIG,
};

/// Every Send one side posted, in order.
type Seen = Arc<Mutex<Vec<Vec<u8>>>>;

fn capturing<B: Backend>(inner: B) -> (Captured<B>, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    (Captured::new(inner, Arc::new(move |m: &CapturedMessage<'_>| s.lock().unwrap().push(m.bytes.to_vec()))), seen)
}

/// Which Version Two a responder speaks: none, -00 only, -07 only, or both
/// (`ResponderConfig::draft07` and `draft00`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Responds {
    V1Only,
    Cel00,
    Ietf07,
    Both,
}

fn start<B: Backend + Clone>(backend: B, responds: Responds) -> Server {
    let versions =
        if responds == Responds::V1Only { (Version::ONE, Version::ONE) } else { (Version::ONE, Version::TWO) };
    let responder = ResponderConfig::default()
        .versions(versions)
        .draft07(matches!(responds, Responds::Ietf07 | Responds::Both))
        .draft00(responds != Responds::Ietf07);
    let cfg = ServerConfig::default().responder(responder);
    Server::start(backend.clone(), backend.any_address(), cfg, Arc::new(SERVER_ULB), serve).unwrap()
}

fn client_config(versions: (Version, Version), v2: VersionTwo) -> ClientConfig {
    ClientConfig::default()
        .requester(RequesterConfig::default().versions(versions).version_two(v2).timeout(Duration::from_secs(5)))
}

fn htype(send: &[u8]) -> HeaderType {
    Header::parse(send, &HeaderLimits::default()).expect("a -07 header").header_type()
}

/// Sections 6.3.5, 6.3.7, 6.3.8 and 6.3.10: on a -07 connection every call goes as
/// RDMA2_CALL_INLINE (its Read, Write and Reply chunks in the lists) or, when the whole call is
/// in a Position-zero Read chunk, RDMA2_CALL_EXTERNAL; every reply as RDMA2_REPLY_INLINE or,
/// through the Reply chunk, RDMA2_REPLY_EXTERNAL; every byte of every reply arrives. Both
/// sides' Sends are read off the wire and parsed by -07's own parser.
fn every_form_travels_in_draft07_headers<B: Backend + Clone>(backend: B) {
    let (server_side, replies) = capturing(backend.clone());
    let server = start(server_side, Responds::Both);
    let (client_side, calls) = capturing(backend);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    for (i, form) in FORMS.into_iter().enumerate() {
        let xid = 0x700 + i as u32;
        let call = call_for(form, xid);
        let reply = client.call(&call, &form.ulb()).unwrap_or_else(|e| panic!("{form:?}: {e}"));
        assert_eq!(reply, serve(&call), "{form:?}: the reply's bytes");
        let (call_type, reply_type) = form.htypes();
        let sent = take_xid(&calls, xid);
        assert_eq!(sent.iter().map(|m| htype(m)).collect::<Vec<_>>(), [call_type], "{form:?}: the call's header");
        // The server's Send is posted before the reply reaches the caller.
        let answered = take_xid(&replies, xid);
        assert_eq!(answered.iter().map(|m| htype(m)).collect::<Vec<_>>(), [reply_type], "{form:?}: the reply's header");
    }
    assert_eq!((client.version(), client.dialect()), (Some(Version::TWO), Some(Dialect::Ietf07)));
    let stats = client.stats();
    // (A call whose result goes in a Write chunk is a short call: its reply is chunked.)
    assert_eq!((stats.short, stats.chunked, stats.long), (3, 1, 1), "{stats:?}");
    // Besides: each side's one RDMA2_CONNPROP_FINAL (section 6.3.4), and nothing else, nothing
    // in -00's shape either way.
    let connprop = |seen: &Seen| seen.lock().unwrap().iter().map(|m| htype(m)).collect::<Vec<_>>();
    assert_eq!(
        (connprop(&calls), connprop(&replies)),
        (vec![HeaderType::ConnPropFinal], vec![HeaderType::ConnPropFinal])
    );
}

/// The Sends of `seen` that carry XID `xid`, taken out.
fn take_xid(seen: &Seen, xid: u32) -> Vec<Vec<u8>> {
    let mut all = seen.lock().unwrap();
    let (these, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|m| word(m, 0) == xid);
    *all = rest;
    these
}

/// Sections 6.3.4 and 5.2.2: once the connection settles on -07, each peer sends its
/// RDMA2_CONNPROP_FINAL; the requester states the size of its Receives, and takes the
/// responder's as its call inline threshold. Here the server's Receives are 12 KiB (its -00
/// properties configuration sizes them), which nothing but its CONNPROP tells a -07 client:
/// once that has arrived, a 6000-byte call goes inline, where it went external before.
#[test]
fn draft07_6_3_4_each_side_states_its_receive_size_and_the_client_honours_the_servers() {
    let big = rpcrdma_v2::properties::TransportProperties {
        max_send_size: Some(12 << 10),
        max_recv_size: Some(12 << 10),
        ..Default::default()
    };
    let (server_side, replies) = capturing(InProcess);
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true)).properties(Some(big));
    let server = Server::start(server_side, "inproc:*", scfg, Arc::new(SERVER_ULB), serve).unwrap();
    let (client_side, calls) = capturing(InProcess);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    let six_k = |xid: u32| message(xid, 0, Form::LongCall.code(), 6000);
    assert_eq!(client.call(&six_k(1), &Form::LongCall.ulb()).unwrap(), serve(&six_k(1)));
    // The server's CONNPROP_FINAL, sent unasked once the probe said -07, came ahead of the
    // probe's reply.
    let small = call_for(Form::Short, 2);
    assert_eq!(client.call(&small, &Form::Short.ulb()).unwrap(), serve(&small));
    assert_eq!(client.thresholds().map(|t| t.call), Some(12 << 10), "the server's RBSIZ");
    assert_eq!(client.call(&six_k(3), &Form::LongCall.ulb()).unwrap(), serve(&six_k(3)));
    let (first, third) = (take_xid(&calls, 1), take_xid(&calls, 3));
    assert_eq!((htype(&first[0]), htype(&third[0])), (HeaderType::CallExternal, HeaderType::CallInline));
    // The client's CONNPROP_FINAL states its Receives (RBSIZ, 4096: no private data); the
    // server's, 12 KiB.
    let rbsiz = |seen: &Seen| {
        let all = seen.lock().unwrap();
        let m = all.iter().find(|m| htype(m) == HeaderType::ConnPropFinal).expect("a CONNPROP_FINAL").clone();
        let h = Header::parse(&m, &HeaderLimits::default()).unwrap();
        rpcrdma_v2::draft07::properties::Properties::from_propset(&h.properties().unwrap()).unwrap().receive_buffer_size
    };
    assert_eq!((rbsiz(&calls), rbsiz(&replies)), (4096, 12 << 10));
}

#[test]
fn draft07_6_3_every_form_travels_in_draft07_headers_in_process() {
    every_form_travels_in_draft07_headers(InProcess);
}

#[test]
fn draft07_6_3_every_form_travels_in_draft07_headers_over_tcp() {
    every_form_travels_in_draft07_headers(Tcp);
}

/// Section 4.2.1: with 16 callers on one -07 connection to a responder that advertises 4
/// credits, every call is answered and the server counts no message beyond the totals it
/// sent (`credit_overruns`, checked per message on -07: `CreditWindow::within_granted`).
/// (The gate itself, each Send waiting for room under the total, is
/// `draft07_4_2_1_the_running_total_gates_each_send_and_a_grant_opens_it`'s: a server that
/// reads its Receives one at a time hardly ever sees the excess a requester without it sends.)
#[test]
fn draft07_4_2_1_many_callers_stay_within_the_running_totals() {
    // The responder advertises 4; the requester would allow itself 32 by its own window.
    let responder = ResponderConfig::default().draft07(true).credits(4);
    let scfg = ServerConfig::default().responder(responder);
    let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(SERVER_ULB), serve).unwrap();
    let cfg = client_config((Version::ONE, Version::TWO), D07).credits(32);
    let client = Arc::new(Client::new(InProcess, server.local_addr(), cfg));
    let threads: Vec<_> = (0..16u32)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                for i in 0..50u32 {
                    let call = call_for(Form::Short, (t << 16) | i);
                    assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(client.dialect(), Some(Dialect::Ietf07));
    assert_eq!(served(&server, 16 * 50), 16 * 50);
    let stats = server.stats();
    assert_eq!(stats.credit_overruns, 0, "{stats:?}");
}

/// docs/design.md's table, through a real Client and Server for each of its 20 pairings: the
/// requester speaks Version One only, -00, -07, or both with either preferred; the responder
/// Version One only, -00, -07, or both. Every pair ends on a version both speak, on the one
/// connection, and the call is answered.
#[test]
fn draft07_4_3_every_pairing_of_dialects_ends_on_a_version_both_speak() {
    let v1 = (Version::ONE, Version::ONE);
    let v2 = (Version::ONE, Version::TWO);
    let both07 = VersionTwo::Both { preferred: Dialect::Ietf07 };
    let both00 = VersionTwo::Both { preferred: Dialect::Cel00 };
    let c00 = VersionTwo::One(Dialect::Cel00);
    let (one, zero, seven) =
        ((Version::ONE, None), (Version::TWO, Some(Dialect::Cel00)), (Version::TWO, Some(Dialect::Ietf07)));
    #[rustfmt::skip]
    let table = [
        // requester                 v1 only  -00    -07    both
        ("v1",             v1, c00,    [one,    one,   one,   one]),
        ("-00",            v2, c00,    [one,    zero,  one,   zero]),
        ("-07",            v2, D07,    [one,    one,   seven, seven]),
        ("both, -07 first", v2, both07, [one,    zero,  seven, seven]),
        ("both, -00 first", v2, both00, [one,    zero,  seven, zero]),
    ];
    let responders = [Responds::V1Only, Responds::Cel00, Responds::Ietf07, Responds::Both];
    for (name, versions, speaks, want) in table {
        for (responds, want) in responders.into_iter().zip(want) {
            let server = start(InProcess, responds);
            let client = Client::new(InProcess, server.local_addr(), client_config(versions, speaks));
            let call = call_for(Form::Short, 0x44);
            let reply = client.call(&call, &Form::Short.ulb()).unwrap_or_else(|e| panic!("{name} x {responds:?}: {e}"));
            assert_eq!(reply, serve(&call), "{name} x {responds:?}");
            let got = (client.version().unwrap(), client.dialect());
            assert_eq!(got, want, "{name} x {responds:?}");
            assert_eq!(served(&server, 1), 1, "{name} x {responds:?}: the call ran once");
            assert_eq!(server.stats().connections, 1, "{name} x {responds:?}: on the one connection");
        }
    }
}

/// The calls `server` served, once it served `n` or five seconds passed: it counts a call when
/// its reply's Send completes, which may be after the reply reached the caller.
fn served(server: &Server, n: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stats().calls.total() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    server.stats().calls.total()
}

// ---- the client's connection core, driven by bytes ----

const ADDR: &str = "10.0.2.15:20049";

fn core(v2: VersionTwo) -> Connection<u32> {
    Connection::client(client_config((Version::ONE, Version::TWO), v2), ADDR)
}

/// What the core sends of its own next ([`Connection::poll_transmit`]), its Send reported
/// complete at once, as a driver reports it.
fn transmitted(c: &mut Connection<u32>) -> Option<Vec<u8>> {
    let t = c.poll_transmit()?;
    c.handle_completion(t.id, Ok(()));
    Some(t.bytes)
}

/// A -07 core with calls `xids` started and connected, the first one's probe sent.
fn probing(xids: std::ops::RangeInclusive<u32>) -> Connection<u32> {
    let now = Instant::now();
    let mut c = core(D07);
    let first = *xids.start();
    for xid in xids {
        c.start_call(xid, now).unwrap();
    }
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    assert!(transmit(&mut c, first).probe);
    c
}

/// Completes call `xid` with a -07 reply carrying total `total`.
fn answer(c: &mut Connection<u32>, xid: u32, total: u32) {
    let reply = reply_inline(xid, total);
    assert_eq!(c.handle_receive(&reply, Arrival::default(), Instant::now()), Received::Reply { xid });
    c.deliver(xid, reply, None);
    assert!(matches!(c.take_step(xid), Some(CallStep::Reply { .. })));
    c.finish_call(xid);
}

/// The next transmission of `xid`, reported sent.
fn transmit(c: &mut Connection<u32>, xid: u32) -> negotiate::requester::Transmit {
    let Some(CallStep::Transmit { transmit, .. }) = c.take_step(xid) else { panic!("no transmission of {xid}") };
    c.handle_sent(CallForm::Short, 1);
    transmit
}

/// A -07 RDMA2_REPLY_INLINE answering `xid` with total `total`, around an RPC reply.
fn reply_inline(xid: u32, total: u32) -> Vec<u8> {
    let mut out = vec![0u8; 64];
    let n =
        marshal::reply_inline(&mut out, xid, total, rpcrdma_v1::rt::List::from_slice(&[]), &words(&[xid, 1])).unwrap();
    out.truncate(n);
    out
}

fn receive(c: &mut Connection<u32>, bytes: &[u8]) -> String {
    format!("{:?}", c.handle_receive(bytes, Arrival::default(), Instant::now()))
}

/// Section 4.3.2 and docs/design.md: a requester that speaks both, -07 first, whose -07 first
/// message a -00 responder refuses (RDMA_ERR_BAD_HEADER, which -07 reads as BAD_XDR), sends
/// the call again in -00 on the same connection, settles there, and its next connection to
/// that responder starts in -00 (the memory of its dialect).
#[test]
fn draft07_4_3_a_refused_draft07_probe_goes_again_in_draft00_and_is_remembered() {
    let now = Instant::now();
    let mut c = core(VersionTwo::Both { preferred: Dialect::Ietf07 });
    c.start_call(7, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    let t = transmit(&mut c, 7);
    assert_eq!((t.probe, t.dialect), (true, Some(Dialect::Ietf07)));
    // A -00 responder's RDMA_ERROR (4), ERR_CHUNK / BAD_HEADER (2).
    assert_eq!(receive(&mut c, &words(&[7, 2, 1, 4, 2])), "Nothing(None)");
    let t = transmit(&mut c, 7);
    // (Still its first attempt: a probe refused for its dialect spends none.)
    assert_eq!((t.probe, t.dialect, t.attempt), (true, Some(Dialect::Cel00), 1));
    // The -00 reply: RDMA_MSG, no chunks, the RPC reply.
    let reply = words(&[7, 2, 32, 0, 0, 0, 0, 7, 1]);
    assert_eq!(c.handle_receive(&reply, Arrival::default(), now), Received::Reply { xid: 7 });
    c.deliver(7, reply, None);
    assert!(matches!(c.take_step(7), Some(CallStep::Reply { .. })));
    c.finish_call(7);
    assert_eq!((c.version(), c.dialect()), (Some(Version::TWO), Some(Dialect::Cel00)));
    // The next connection to that responder: its probe goes in -00 at once.
    c.handle_link_down(Ended::Lost { first_error: None }, now);
    c.start_call(8, now).unwrap();
    while c.poll_event().is_some() {}
    c.handle_connected(2, None, &[], now);
    let t = transmit(&mut c, 8);
    assert_eq!((t.probe, t.dialect), (true, Some(Dialect::Cel00)));
}

/// Section 7.1.3 read by a -00 requester: a -07 responder answers a -00 first message with
/// RDMA2_ERR_INVAL_HTYPE (4), which no -00 responder sends; a requester that speaks -00 only
/// goes on in Version One on the same connection (before, it failed the call and settled
/// Version Two with a responder that cannot read it).
#[test]
fn draft07_7_1_3_inval_htype_to_a_draft00_probe_falls_back_to_version_one() {
    let now = Instant::now();
    let mut c = core(VersionTwo::One(Dialect::Cel00));
    c.start_call(7, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    assert_eq!(transmit(&mut c, 7).dialect, Some(Dialect::Cel00));
    assert_eq!(receive(&mut c, &words(&[7, 2, 1, 4, 4])), "Nothing(None)");
    let t = transmit(&mut c, 7);
    assert_eq!((t.version, t.probe, t.dialect), (Version::ONE, false, None));
}

/// Section 4.2.1: until the responder's first header a -07 requester sends one message; then
/// each Send needs room under the responder's running total, whatever the per-call window;
/// an RDMA2_GRANT raising the total lets the waiting calls go (4.2.1.1), and each call's
/// `rdma_credit` is this side's own running total (received count plus advertised).
#[test]
fn draft07_4_2_1_the_running_total_gates_each_send_and_a_grant_opens_it() {
    let now = Instant::now();
    let mut c = core(D07);
    for xid in 1..=4 {
        c.start_call(xid, now).unwrap();
    }
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    let first = transmit(&mut c, 1);
    assert_eq!((first.probe, first.credits), (true, 32), "nothing received yet, 32 advertised");
    assert!(c.take_step(2).is_none(), "one message until the first answer (the probe's rule and -07's alike)");
    // The reply's total is 1: the one Send made, no room for another.
    assert_eq!(c.handle_receive(&reply_inline(1, 1), Arrival::default(), now), Received::Reply { xid: 1 });
    c.deliver(1, reply_inline(1, 1), None);
    c.take_step(1);
    c.finish_call(1);
    assert_eq!(c.dialect(), Some(Dialect::Ietf07));
    assert!(c.take_step(2).is_none(), "the total leaves no room");
    // A GRANT: the prefix alone, XID zero, total 4 (three more Sends: this side's
    // CONNPROP_FINAL, owed since it settled, then two calls).
    let mut grant = [0u8; 16];
    marshal::grant(&mut grant, 4).unwrap();
    assert_eq!(receive(&mut c, &grant), "Nothing(None)");
    assert!(transmitted(&mut c).is_some_and(|m| htype(&m) == HeaderType::ConnPropFinal));
    assert_eq!(transmit(&mut c, 2).credits, 2 + 32, "two received, 32 advertised");
    assert_eq!(transmit(&mut c, 3).credits, 2 + 32);
    assert!(c.take_step(4).is_none(), "the granted room is used up");
}

/// Section 4.1: a reply continued across Sends (RDMA2_REPLY_MIDDLE parts, then the final
/// RDMA2_REPLY_INLINE) is reassembled; the caller gets the whole RPC reply, in a header view
/// over a buffer of its own.
#[test]
fn draft07_4_1_a_continued_reply_is_reassembled_for_its_caller() {
    let now = Instant::now();
    let mut c = core(D07);
    c.start_call(9, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    transmit(&mut c, 9);
    let rpc = [words(&[9, 1]), (0..200u8).collect::<Vec<u8>>()].concat();
    let (a, b) = rpc.split_at(100);
    let mut middle = vec![0u8; 256];
    let n = marshal::middle(&mut middle, 9, 40, MessageType::Reply, b.len() as u32, a).unwrap();
    middle.truncate(n);
    assert_eq!(receive(&mut c, &middle), "Nothing(None)", "a part is held");
    let mut last = vec![0u8; 256];
    let n = marshal::reply_inline(&mut last, 9, 40, rpcrdma_v1::rt::List::from_slice(&[]), b).unwrap();
    last.truncate(n);
    assert_eq!(c.handle_receive(&last, Arrival::default(), now), Received::Reply { xid: 9 });
    c.deliver(9, last, None);
    let Some(CallStep::Reply { message, header: Some(h), .. }) = c.take_step(9) else { panic!("no reply") };
    let view = h.attach(&message).unwrap();
    assert_eq!(view.payload(), rpc.as_slice());
}

/// Sections 4.6 and 7.1.3: this requester offers no reverse direction, so a call from the
/// responder is a header type it does not take: RDMA2_ERR_INVAL_HTYPE goes back, in version 2,
/// naming the call's XID. Section 4.2.1: the refusal is a Send like any other, so it waits
/// while the responder's window is shut (its total is the one Send this side made) and goes,
/// carrying this side's running total, once a GRANT opens it.
#[test]
fn draft07_7_1_3_a_reverse_direction_call_is_answered_inval_htype() {
    let now = Instant::now();
    let mut c = core(D07);
    c.start_call(1, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    transmit(&mut c, 1);
    let mut call = vec![0u8; 64];
    let n = marshal::call_inline(&mut call, 0x55, 1, 0, &marshal::NO_CHUNKS, &words(&[0x55, 0])).unwrap();
    assert_eq!(c.handle_receive(&call[..n], Arrival::default(), now), Received::Nothing(None));
    assert_eq!(transmitted(&mut c), None, "the window is shut: the refusal waits");
    assert_eq!(c.handle_receive(&marshal::grant_message(3), Arrival::default(), now), Received::Nothing(None));
    let e = transmitted(&mut c).expect("the window opened: the refusal goes");
    let back = Header::parse(&e, &HeaderLimits::default()).unwrap();
    assert_eq!((back.xid(), back.header_type(), word(&e, 4)), (0x55, HeaderType::Error, 4));
    assert_eq!(word(&e, 1), 2);
    assert!(word(&e, 2) > 0, "it carries this side's running total");
}

/// Section 4.2.1 counts the Sends posted: a -07 call handed out and then given up unsent (it
/// could not be marshaled, or its caller went away) gives its place in the window back, so
/// such calls never close the window for good.
#[test]
fn draft07_4_2_1_a_call_given_up_unsent_gives_its_place_in_the_window_back() {
    let now = Instant::now();
    let mut c = probing(1..=3);
    answer(&mut c, 1, 3); // room for two more Sends: this side's CONNPROP_FINAL and one call
    assert!(transmitted(&mut c).is_some_and(|m| htype(&m) == HeaderType::ConnPropFinal));
    assert!(matches!(c.take_step(2), Some(CallStep::Transmit { .. })));
    c.cancel(2, now); // never posted
    assert!(matches!(c.take_step(3), Some(CallStep::Transmit { .. })), "the window is back");
}

/// Sections 4.1 and 7.1.4: a continued reply longer than this side holds is refused with
/// RDMA2_ERR_INVAL_CONT's kin (the responder hears of it), and the call it answers fails with
/// the cause at once instead of waiting out its timeout and going out again.
#[test]
fn draft07_4_1_a_continued_reply_too_long_to_hold_fails_its_call() {
    let mut c = probing(9..=9);
    let mut middle = vec![0u8; 64];
    let too_long = negotiate::reply::MAX_CONTINUED_REPLY as u32;
    let n = marshal::middle(&mut middle, 9, 40, MessageType::Reply, too_long, &words(&[9, 1])).unwrap();
    c.handle_receive(&middle[..n], Arrival::default(), Instant::now());
    // (Its total, 40, leaves the window room: the refusal goes at once.)
    let e = transmitted(&mut c).expect("no RDMA2_ERROR back");
    assert_eq!((word(&e, 0), word(&e, 3)), (9, 4), "an RDMA2_ERROR naming the reply");
    let Some(CallStep::Failed(why)) = c.take_step(9) else { panic!("the call did not fail") };
    assert!(why.to_string().contains("draft-07"), "{why}");
}

/// Section 4.2.1.1: while a continued reply's parts arrive this side sends nothing else, so
/// once they have used half the window it last gave, it sends an RDMA2_GRANT (XID zero, the
/// prefix alone) raising the total.
#[test]
fn draft07_4_2_1_1_a_long_continued_reply_draws_a_grant() {
    let now = Instant::now();
    let mut c = probing(9..=9);
    let (parts, part) = (20u32, words(&[9, 1]));
    let mut grants = Vec::new();
    for i in 0..parts {
        let mut middle = vec![0u8; 64];
        let remaining = (parts - i) * 8;
        let n = marshal::middle(&mut middle, 9, 40, MessageType::Reply, remaining, &part).unwrap();
        match c.handle_receive(&middle[..n], Arrival::default(), now) {
            Received::Answered => grants.push((i, transmitted(&mut c).expect("the answer queued"))),
            Received::Nothing(None) => {}
            other => panic!("part {i}: {other:?}"),
        }
    }
    let (i, g) = grants.first().expect("no GRANT");
    assert_eq!((word(g, 0), word(g, 1), htype(g), g.len()), (0, 2, HeaderType::Grant, 16));
    // 32 advertised: due once more than 16 of the window are used.
    assert_eq!(*i, 16);
    assert_eq!(word(g, 2), 17 + 32, "17 received, 32 advertised");
}

/// Section 4.3 and docs/design.md: a requester that speaks -07 and nothing else (no Version
/// One), refused by a -00 responder, has nowhere to go: the call fails with the responder's
/// answer and the version stays unsettled (it does not settle on a dialect the responder
/// cannot read).
#[test]
fn draft07_4_3_a_draft07_only_requester_refused_fails_the_call_and_settles_nothing() {
    let now = Instant::now();
    let mut c = Connection::client(client_config((Version::TWO, Version::TWO), D07), ADDR);
    c.start_call(7, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    transmit(&mut c, 7);
    receive(&mut c, &words(&[7, 2, 1, 4, 2]));
    assert!(matches!(c.take_step(7), Some(CallStep::Failed(_))));
    assert_eq!(c.version(), None);
}

/// -00's transport-properties exchange is an RDMA_OPTIONAL, header type 5, which on -07 is
/// RDMA2_GRANT (a GRANT has no body): a -07 client with properties to state never sends it,
/// and its calls go on.
#[test]
fn draft07_6_3_2_no_draft00_rdma_optional_goes_out_on_a_draft07_connection() {
    let (server_side, replies) = capturing(InProcess);
    let server = start(server_side, Responds::Both);
    let (client_side, calls) = capturing(InProcess);
    let stated = rpcrdma_v2::properties::TransportProperties { max_send_size: Some(8192), ..Default::default() };
    let cfg = client_config((Version::ONE, Version::TWO), D07).properties(Some(stated));
    let client = Client::new(client_side, server.local_addr(), cfg);
    for xid in 1..=3 {
        let call = call_for(Form::Short, xid);
        assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
    }
    assert_eq!(client.peer_properties(), negotiate::connection::PeerProperties::NotExchanged);
    let types = |seen: &Seen| seen.lock().unwrap().iter().map(|m| htype(m)).collect::<Vec<_>>();
    let (c, r) = (types(&calls), types(&replies));
    assert_eq!(c.iter().filter(|&&t| t == HeaderType::CallInline).count(), 3, "{c:?}");
    assert!(c.iter().all(|&t| matches!(t, HeaderType::CallInline | HeaderType::ConnPropFinal)), "{c:?}");
    assert!(r.iter().all(|&t| matches!(t, HeaderType::ReplyInline | HeaderType::ConnPropFinal)), "{r:?}");
}

/// Section 4.3: "this initial message MUST be no larger than 1024 bytes" (a responder that
/// speaks Version One only may have Receives no larger), so a -07 first call of 2 KiB goes as
/// RDMA2_CALL_EXTERNAL within 1024 bytes, while the same call once settled (4096-byte
/// Receives) goes inline; and section 4.3.3: once settled, the client keeps the version (and
/// dialect): every later Send is -07.
#[test]
fn draft07_4_3_the_first_message_fits_1024_bytes_and_the_version_stays() {
    let server = start(InProcess, Responds::Both);
    let (client_side, calls) = capturing(InProcess);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    let first = message(0x51, 0, Form::LongCall.code(), 2048);
    assert_eq!(client.call(&first, &Form::LongCall.ulb()).unwrap(), serve(&first));
    let again = message(0x52, 0, Form::LongCall.code(), 2048);
    assert_eq!(client.call(&again, &Form::LongCall.ulb()).unwrap(), serve(&again));
    for xid in 0x53..0x56 {
        let call = call_for(Form::Short, xid);
        assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
    }
    let sent: Vec<Vec<u8>> =
        calls.lock().unwrap().iter().filter(|m| htype(m) != HeaderType::ConnPropFinal).cloned().collect();
    assert_eq!(sent.len(), 5);
    assert!(sent[0].len() <= 1024 && htype(&sent[0]) == HeaderType::CallExternal, "{} bytes", sent[0].len());
    assert!(sent[1].len() > 2048 && htype(&sent[1]) == HeaderType::CallInline, "the same call, settled, inline");
    assert!(sent[1..].iter().all(|m| word(m, 1) == 2 && htype(m) == HeaderType::CallInline));
}

/// Section 7.1.2: after RDMA2_ERR_VERS (here a Version One responder's RDMA_ERR_VERS to the -07
/// first message), the requester sends nothing more in the version refused: the call goes
/// again in Version One, and so does every later one.
#[test]
fn draft07_7_1_2_after_err_vers_no_message_goes_in_the_version_refused() {
    let server = start(InProcess, Responds::V1Only);
    let (client_side, calls) = capturing(InProcess);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    for xid in 0x61..0x64 {
        let call = call_for(Form::Short, xid);
        assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
    }
    let versions: Vec<u32> = calls.lock().unwrap().iter().map(|m| word(m, 1)).collect();
    assert_eq!(versions, [2, 1, 1, 1], "the first message, then Version One only");
}

/// Sections 7.3.1 to 7.3.5 and 7.4.1: a requester that receives RDMA2_ERR_READ_CHUNKS,
/// WRITE_CHUNKS, SEGMENTS, WRITE_RESOURCE, REPLY_RESOURCE or SYSTEM for a call, and does not
/// send it again, "MUST terminate this RPC transaction with an error": the call fails at once
/// with the responder's error, arm values and all, and is not sent again.
#[test]
fn draft07_7_3_each_responder_error_ends_its_call_with_that_error() {
    use rpcrdma_v2::draft07::xdr::*;
    let errors = [
        Rpcrdma2HdrError::RdmaMaxChunks { discriminant: RDMA2_ERR_READ_CHUNKS, value: 0 },
        Rpcrdma2HdrError::RdmaMaxChunks { discriminant: RDMA2_ERR_WRITE_CHUNKS, value: 2 },
        Rpcrdma2HdrError::Rdma2ErrSegments(8),
        Rpcrdma2HdrError::Rdma2ErrWriteResource(Rpcrdma2ErrWrite { rdma_chunk_index: 1, rdma_length_needed: 9000 }),
        Rpcrdma2HdrError::Rdma2ErrReplyResource(70000),
        Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_SYSTEM },
    ];
    for (i, body) in errors.into_iter().enumerate() {
        let now = Instant::now();
        let mut c = probing(1..=2);
        answer(&mut c, 1, 8);
        transmit(&mut c, 2);
        let mut e = [0u8; 32];
        let n = marshal::error(&mut e, 2, 8, &body).unwrap();
        receive(&mut c, &e[..n]);
        let Some(CallStep::Failed(why)) = c.take_step(2) else { panic!("{i}: the call did not end") };
        assert!(format!("{why:?}").contains(&format!("{body:?}")), "{i}: {why:?} names {body:?}");
        c.finish_call(2);
        c.handle_timeout(now + Duration::from_secs(60));
        assert!(c.take_step(2).is_none() && !c.has_calls() && c.poll_event().is_none(), "{i}: not sent again");
    }
}

/// The conversations above over real verbs (rdma-core, the Soft-RoCE guest:
/// `guest/test-draft07`).
#[cfg(feature = "rdma")]
mod rdma {
    #[test]
    fn every_form_travels_in_draft07_headers() {
        let Some(b) = rpcrdma_verbs::Rdma::from_test_env() else { return };
        super::every_form_travels_in_draft07_headers(b);
    }
}

/// Section 4.3 with RFC 8166 section 4.5: a first message refused for its version or dialect
/// was not run, and going again in the version the refusal leads to is the negotiation, not
/// a retransmission: a call allowed one attempt (`max_attempts(1)`) goes again in Version One
/// instead of failing. (The simulator's 100,000-seed run first found such a call failing with
/// "no version in common", which it was not; it then failed with the responder's answer;
/// since the thirteenth session it spends no attempt on the refusal:
/// `requester_faults.rs::draft_5_2_a_probe_refused_for_its_version_does_not_spend_the_calls_attempt`.)
#[test]
fn draft07_4_3_a_first_message_refused_on_its_last_attempt_goes_again_in_version_one() {
    let now = Instant::now();
    let cfg = ClientConfig::default()
        .requester(RequesterConfig::default().version_two(D07).max_attempts(1).timeout(Duration::from_secs(5)));
    let mut c = Connection::client(cfg, ADDR);
    c.start_call(7, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    transmit(&mut c, 7);
    receive(&mut c, &words(&[7, 2, 1, 4, 2])); // a -00 responder's BAD_HEADER
    let Some(CallStep::Transmit { transmit, .. }) = c.take_step(7) else { panic!("the call did not go again") };
    assert_eq!((transmit.version, transmit.probe), (Version::ONE, false));
    assert_eq!(c.version(), Some(Version::ONE), "and the connection goes on in Version One");
}

/// Section 6.5: a -07 call whose chunks all share one handle names it in `rdma_inv_handle`,
/// and the server's reply is a Send With Invalidate of exactly that handle, which the client
/// takes (the call completes, its memory released without a second invalidation); a call
/// with no chunk asks for nothing, and neither does a client whose RFC 8797 private data
/// clears the R flag (it takes no remote invalidation).
#[test]
fn draft07_6_5_a_call_solicits_remote_invalidation_of_its_chunks_handle() {
    type Sent = Arc<Mutex<Vec<(Vec<u8>, Option<u32>)>>>;
    let replies: Sent = Arc::default();
    let r = replies.clone();
    let server_side = Captured::new(
        InProcess,
        Arc::new(move |m: &CapturedMessage<'_>| r.lock().unwrap().push((m.bytes.to_vec(), m.invalidate))),
    );
    let server = start(server_side, Responds::Both);
    let (client_side, calls) = capturing(InProcess);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    for (xid, form) in [(0x81, Form::Short), (0x82, Form::ChunkedWrite), (0x83, Form::ChunkedWrite)] {
        let call = call_for(form, xid);
        assert_eq!(client.call(&call, &form.ulb()).unwrap(), serve(&call), "{form:?}");
    }
    let inv_handle = |xid: u32| {
        let m = take_xid(&calls, xid).remove(0);
        let h = Header::parse(&m, &HeaderLimits::default()).unwrap();
        let handles: Vec<u32> = h.chunk_lists().writes.iter().flat_map(|c| c.target.iter().map(|s| s.handle)).collect();
        (h.inv_handle(), handles)
    };
    let invalidated = |xid: u32| replies.lock().unwrap().iter().find(|(m, _)| word(m, 0) == xid).map(|(_, i)| *i);
    assert_eq!(inv_handle(0x81), (Some(0), vec![]), "no chunk, nothing asked");
    assert_eq!(invalidated(0x81), Some(None));
    for xid in [0x82, 0x83] {
        let (asked, handles) = inv_handle(xid);
        assert_eq!(handles.len(), 1, "one Write chunk of one segment");
        assert_eq!(asked, Some(handles[0]), "the Write chunk's handle asked for");
        assert_eq!(invalidated(xid), Some(Some(handles[0])), "and invalidated by the reply's Send");
    }
    let no_r = cm_private_data::PrivateData::new(cm_private_data::Flags::empty(), 4096, 4096);
    let cfg = client_config((Version::ONE, Version::TWO), D07).private_data(Some(no_r));
    let plain = Client::new(capturing(InProcess).0, server.local_addr(), cfg);
    let call = call_for(Form::ChunkedWrite, 0x84);
    assert_eq!(plain.call(&call, &Form::ChunkedWrite.ulb()).unwrap(), serve(&call));
    assert_eq!(plain.dialect(), Some(Dialect::Ietf07));
    assert_eq!(invalidated(0x84), Some(None), "no R flag: a plain Send");
}

/// Sections 6.3.4 and 5.2.2 through the client's core, bytes only: once settled on -07, calls
/// keep to the default 4096-byte threshold until the responder's RDMA2_CONNPROP_FINAL states a
/// receive buffer size, and use that from then on; this side's own CONNPROP_FINAL is owed until
/// the window has room for it (a first answer that leaves none), then goes before the calls.
#[test]
fn draft07_6_3_4_the_responders_receive_size_takes_effect_and_ours_waits_for_room() {
    let mut c = probing(1..=3);
    answer(&mut c, 1, 1); // settled, and no room left: our CONNPROP_FINAL is owed
    assert_eq!(transmitted(&mut c), None);
    assert_eq!(c.thresholds().map(|t| t.call), Some(4096), "the default until the responder states its size");
    let mut grant = [0u8; 16];
    marshal::grant(&mut grant, 3).unwrap();
    receive(&mut c, &grant);
    let ours = transmitted(&mut c).expect("the CONNPROP_FINAL owed, now the window has room");
    assert_eq!((htype(&ours), word(&ours, 2)), (HeaderType::ConnPropFinal, 1 + 32 + 1), "two received");
    assert_eq!(transmit(&mut c, 2).thresholds.call, 4096);
    // The responder's CONNPROP_FINAL: 12 KiB Receives.
    let theirs = rpcrdma_v2::draft07::properties::Properties { receive_buffer_size: 12 << 10, ..Default::default() };
    let m = theirs.connprop_messages(0, 4, 4096).unwrap().remove(0);
    assert_eq!(receive(&mut c, &m), "Nothing(None)");
    assert_eq!(c.thresholds().map(|t| t.call), Some(12 << 10));
    answer(&mut c, 2, 6);
    assert_eq!(transmit(&mut c, 3).thresholds.call, 12 << 10, "the next call goes under it");
}

/// A call whose reply is `len` bytes while its binding provisions `max_reply` bytes for it:
/// below `len`, the reply fits neither the client's Receive nor its Reply chunk (none at all
/// under the inline threshold).
fn reply_of(len: usize, xid: u32, max_reply: usize) -> (Vec<u8>, OpaqueAtUlb) {
    // The form code past the table: the service answers `len` bytes (`serve_sized`).
    let call = words(&[xid, 0, 99, len as u32]);
    (call, OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply })
}

/// The service of the continuation tests: a reply of the length the call asks for.
fn serve_sized(call: &[u8]) -> Vec<u8> {
    if word(call, 2) == 99 {
        message(word(call, 0), 1, 99, word(call, 3) as usize)
    } else {
        serve(call)
    }
}

/// The server's Sends of a continued reply, read off the wire: their header types in order,
/// each within the client's Receive (4096: no private data), the parts' `rdma_remaining`
/// counting down to the final RDMA2_REPLY_INLINE, and the payloads together the reply.
fn check_parts(sends: &[Vec<u8>], reply: &[u8]) {
    let limits = HeaderLimits::default();
    let headers: Vec<_> = sends.iter().map(|m| Header::parse(m, &limits).unwrap()).collect();
    let (last, middles) = headers.split_last().expect("a Send");
    assert_eq!(last.header_type(), HeaderType::ReplyInline);
    assert!(middles.iter().all(|h| h.header_type() == HeaderType::ReplyMiddle), "{:?}", headers);
    assert!(sends.iter().all(|m| m.len() <= 4096), "a part beyond the client's Receive");
    // Section 6.3.9: each part's rdma_xid is the RPC reply's XID.
    assert!(headers.iter().all(|h| h.xid() == word(reply, 0)), "a part under another XID");
    let mut payload = Vec::new();
    for (h, m) in headers.iter().zip(sends) {
        if let Some(remaining) = h.remaining() {
            assert_eq!(remaining as usize, reply.len() - payload.len() - (m.len() - h.header_len()));
        }
        payload.extend_from_slice(&m[h.header_len()..]);
    }
    assert_eq!(payload, reply, "the parts' payloads, in order");
}

/// Section 6.6.4: "If the combination of the provided Write chunk list and Reply chunk is not
/// adequate to convey a Reply, the Responder SHOULD use Message Continuation to send that
/// Reply." A 20,000-byte reply to a call that provisioned no Reply chunk (and, second, one
/// too small) goes as RDMA2_REPLY_MIDDLE parts and a final RDMA2_REPLY_INLINE, each within
/// the client's Receive, and the caller gets every byte (before, RDMA2_ERR_REPLY_RESOURCE).
#[test]
fn draft07_6_6_4_a_reply_the_chunks_cannot_carry_continues_across_sends() {
    let (server_side, replies) = capturing(InProcess);
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let server = Server::start(server_side, "inproc:*", scfg, Arc::new(SERVER_ULB), serve_sized).unwrap();
    let client = Client::new(InProcess, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    for (xid, max_reply) in [(0x66, 128), (0x67, 4096)] {
        let (call, ulb) = reply_of(20_000, xid, max_reply);
        let reply = client.call(&call, &ulb).unwrap_or_else(|e| panic!("max_reply {max_reply}: {e}"));
        assert_eq!(reply, serve_sized(&call), "max_reply {max_reply}");
        let sends = take_xid(&replies, xid);
        assert_eq!(sends.len(), 5, "20,000 bytes in 4096-byte Receives");
        check_parts(&sends, &reply);
    }
    assert_eq!(client.dialect(), Some(Dialect::Ietf07));
    assert_eq!(served(&server, 2), 2);
    let stats = server.stats();
    assert_eq!((stats.continued_replies, stats.errors_sent, stats.credit_overruns), (2, 0, 0), "{stats:?}");
}

/// Sections 4.2.1 and 4.2.1.1 with 6.6.4: a continued reply longer than the window the client
/// gives (2 credits) waits for the client's RDMA2_GRANTs between parts instead of sending
/// beyond the running total. Both sides' Sends are captured into one log in posting order:
/// each server Send is posted only while the server's count of Sends is within the last total
/// the client had posted (a GRANT travels after it is posted, so a server that respects the
/// window never overtakes that). Over TCP too, where each GRANT is a frame on the wire.
/// Both sides' Sends, in posting order: (from the server?, the Send's bytes).
type Log = Arc<Mutex<Vec<(bool, Vec<u8>)>>>;

fn a_continued_reply_waits_for_grants<B: Backend + Clone>(backend: B) {
    let log: Log = Arc::default();
    let tap = |server: bool| {
        let log = log.clone();
        Arc::new(move |m: &CapturedMessage<'_>| log.lock().unwrap().push((server, m.bytes.to_vec())))
    };
    let server_side = Captured::new(backend.clone(), tap(true));
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let server = Server::start(server_side, backend.any_address(), scfg, Arc::new(SERVER_ULB), serve_sized).unwrap();
    let cfg = client_config((Version::ONE, Version::TWO), D07).credits(2);
    let client = Client::new(Captured::new(backend, tap(false)), server.local_addr(), cfg);
    let (call, ulb) = reply_of(60_000, 0x68, 128);
    let reply = client.call(&call, &ulb).unwrap();
    assert_eq!(reply, serve_sized(&call));
    let log = log.lock().unwrap().clone();
    let sends: Vec<_> = log.iter().filter(|(s, m)| *s && word(m, 0) == 0x68).map(|(_, m)| m.clone()).collect();
    assert_eq!(sends.len(), 15);
    check_parts(&sends, &reply);
    // The gate, Send by Send: 1 before the client's first header (section 4.2.1).
    let (mut client_total, mut server_sent, mut grants) = (1u32, 0u32, 0);
    for (from_server, m) in &log {
        if *from_server {
            server_sent += 1;
            assert!(
                (client_total.wrapping_sub(server_sent) as i32) >= 0,
                "server Send {server_sent} posted beyond the client's total {client_total}"
            );
        } else {
            client_total = word(m, 2);
            grants += usize::from(htype(m) == HeaderType::Grant);
        }
    }
    assert!(grants >= 5, "{grants} GRANTs for 15 parts in a window of 2");
    // Each part's total never below the last (stamped in posting order).
    let totals: Vec<u32> = sends.iter().map(|m| word(m, 2)).collect();
    assert!(totals.windows(2).all(|w| w[1].wrapping_sub(w[0]) as i32 >= 0), "{totals:?}");
    // And the connection goes on.
    let short = call_for(Form::Short, 0x69);
    assert_eq!(client.call(&short, &Form::Short.ulb()).unwrap(), serve(&short));
    assert_eq!(served(&server, 2), 2);
    let stats = server.stats();
    assert_eq!((stats.continued_replies, stats.credit_overruns), (1, 0), "{stats:?}");
}

#[test]
fn draft07_4_2_1_a_continued_reply_waits_for_grants_in_process() {
    a_continued_reply_waits_for_grants(InProcess);
}

#[test]
fn draft07_4_2_1_a_continued_reply_waits_for_grants_over_tcp() {
    a_continued_reply_waits_for_grants(Tcp);
}

/// Sections 4.1, 4.2.1 and 6.6.4 under concurrency: 12 callers on one -07 connection whose
/// client grants a window of 2, a third of them asking for 60,000-byte replies that continue
/// across 15 Sends each (with no Reply chunk), the rest short calls, all at once, more than
/// the server's calls in progress per connection (8). Every reply arrives whole, on the one
/// connection (a reply left without credit would close it: `DataPathError::NoCredit`), and
/// the server counts no message beyond its totals. Two stalls this found, each ended only by a
/// timeout closing the connection: a call prepared ahead carried the total of when it was
/// marshaled, after a GRANT with a higher one, which the server read as a lowered limit (each
/// -07 Send is now stamped with the highest total as it is posted); and a reply counted when
/// its call was judged, blocked behind a continued reply, used a place in the window the
/// client never saw used (each Send is now counted as it is posted).
fn continued_and_short_replies_at_once<B: Backend + Clone>(backend: B) {
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let server =
        Server::start(backend.clone(), backend.any_address(), scfg, Arc::new(SERVER_ULB), serve_sized).unwrap();
    let cfg = client_config((Version::ONE, Version::TWO), D07).credits(2);
    let (client_side, sent) = capturing(backend);
    let client = Arc::new(Client::new(client_side, server.local_addr(), cfg));
    let threads: Vec<_> = (0..12u32)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                for i in 0..5u32 {
                    let xid = 0x1000 * (t + 1) + i;
                    let (call, ulb) = if t % 3 == 0 {
                        reply_of(60_000, xid, 128)
                    } else {
                        (call_for(Form::Short, xid), Form::Short.ulb())
                    };
                    let reply = client.call(&call, &ulb).unwrap_or_else(|e| panic!("{xid:#x}: {e}"));
                    assert_eq!(reply, serve_sized(&call), "{xid:#x}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(served(&server, 60), 60);
    let stats = server.stats();
    let ended: Vec<_> = server.peers().iter().filter_map(|p| p.ended.clone()).map(|e| e.to_string()).collect();
    assert_eq!((stats.connections, stats.continued_replies, stats.credit_overruns), (1, 20, 0), "{stats:?} {ended:?}");
    // The client's running totals never go down on the wire, whatever order its calls
    // (prepared ahead) and GRANTs were marshaled in: a lower one reads as a lowered limit.
    let totals: Vec<u32> = sent.lock().unwrap().iter().map(|m| word(m, 2)).collect();
    assert!(totals.windows(2).all(|w| w[1].wrapping_sub(w[0]) as i32 >= 0), "{totals:?}");
}

#[test]
fn draft07_4_2_1_continued_and_short_replies_at_once_in_process() {
    continued_and_short_replies_at_once(InProcess);
}

#[test]
fn draft07_4_2_1_continued_and_short_replies_at_once_over_tcp() {
    continued_and_short_replies_at_once(Tcp);
}

/// Section 4.2.1 with 7.3.4: a reply the server cannot fill (its DDP-eligible result longer
/// than the Write chunk the call provided) takes no place in the client's window: only the
/// RDMA2_ERR_WRITE_RESOURCE that answers instead does. With a window of 2, three such calls
/// and then a short one all get their answers on the one connection (a total taken for the
/// reply and never used would shut the window for good after two, and the short call's reply
/// would wait out the server's timeout and close the connection).
#[test]
fn draft07_4_2_1_a_reply_that_could_not_be_filled_takes_no_credit() {
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(SERVER_ULB), serve).unwrap();
    let cfg = client_config((Version::ONE, Version::TWO), D07).credits(2);
    let client = Client::new(InProcess, server.local_addr(), cfg);
    // Room for a 64-byte result where the service answers 16 KiB.
    let short_write = OpaqueAtUlb { max_result: 64, ..Form::ChunkedWrite.ulb() };
    for xid in 0x80..0x83 {
        let e = client.call(&call_for(Form::ChunkedWrite, xid), &short_write).unwrap_err();
        // Issue 28: the client's error names both sides' sizes, its own chunk's and the
        // result's that the responder reported.
        let ClientError::ChunksRefused { chunks, .. } = &e else { panic!("{e:?}") };
        assert_eq!(chunks.write, [64]);
        let text = e.to_string();
        assert!(
            text.contains("Write chunks of [64] bytes")
                && text.contains("RDMA2_ERR_WRITE_RESOURCE: Write chunk 1 (counting from one) is too small; its result needs 16384 bytes"),
            "{text}"
        );
    }
    let short = call_for(Form::Short, 0x83);
    assert_eq!(client.call(&short, &Form::Short.ulb()).unwrap(), serve(&short));
    assert_eq!(server.stats().connections, 1);
}

/// Section 4.2.1: a requester whose responder's running total leaves no room for its next
/// message, with nothing of its own in flight, can be let out only by the responder's GRANT
/// (4.2.1.1); if none comes within the call timeout, the connection is closed and the calls
/// waiting go out on the next, whose window starts anew (RFC 8166 section 4.5.4's remedy). Here
/// the probe's reply carries total 1 (the one Send made: no room), and nothing else arrives:
/// before the timeout the connection stays, at it the core asks to disconnect, and the waiting
/// call goes out on the next connection.
#[test]
fn draft07_4_2_1_a_window_shut_with_nothing_in_flight_closes_the_connection() {
    let now = Instant::now();
    let mut c = probing(1..=2);
    answer(&mut c, 1, 1);
    assert_eq!(c.dialect(), Some(Dialect::Ietf07));
    assert!(c.take_step(2).is_none(), "the total leaves no room for call 2");
    let due = c.poll_timeout().expect("the shut window is timed");
    assert!(due > now, "not at once");
    c.handle_timeout(due - Duration::from_millis(1));
    assert!(c.poll_event().is_none(), "the connection stays until the timeout");
    c.handle_timeout(due);
    assert!(
        matches!(c.poll_event(), Some(negotiate::connection::Event::Disconnect { link: 1, .. })),
        "closed at the timeout"
    );
    c.handle_link_down(Ended::Closed("shut window".into()), due);
    assert!(matches!(c.poll_event(), Some(negotiate::connection::Event::Ended(Ended::Closed(_)))));
    assert!(matches!(c.poll_event(), Some(negotiate::connection::Event::Connect { .. })));
    c.handle_connected(2, None, &[], due);
    let again = transmit(&mut c, 2);
    assert_eq!(again.attempt, 1, "call 2 goes out for the first time, on the next connection");
}

/// Sections 5.2.3, 5.2.4 and 4.2.2: until the server's CONNPROP_FINAL says otherwise the client
/// assumes Table 1's Maximum Segment Size (1 MiB), so its first call's 1.5 MiB Read chunk goes
/// as two segments of one window (1 MiB, then the rest); the server states its own (its
/// largest chunk, 2 MiB by default, and its header's most segments, 16), after which the same
/// chunk goes as one segment. Both calls are served whole.
#[test]
fn draft07_5_2_3_a_chunk_is_cut_to_the_segment_size_the_server_states() {
    let (server_side, _) = capturing(InProcess);
    let server = start(server_side, Responds::Both);
    let (client_side, calls) = capturing(InProcess);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    let big = |xid: u32| message(xid, 0, Form::ChunkedRead.code(), 3 << 19);
    let read_segments = |xid: u32| {
        let sent = take_xid(&calls, xid);
        let h = Header::parse(&sent[0], &HeaderLimits::default()).unwrap();
        assert_eq!(h.header_type(), HeaderType::CallInline);
        h.chunk_lists().reads.iter().map(|r| (r.target.handle, r.target.length)).collect::<Vec<_>>()
    };
    for xid in [1, 2] {
        assert_eq!(client.call(&big(xid), &Form::ChunkedRead.ulb()).unwrap(), serve(&big(xid)), "call {xid}");
    }
    let first = read_segments(1);
    assert_eq!(first.iter().map(|s| s.1).collect::<Vec<_>>(), [1 << 20, 1 << 19], "Table 1's 1 MiB");
    assert_eq!(first[0].0, first[1].0, "one window");
    assert_eq!(read_segments(2).iter().map(|s| s.1).collect::<Vec<_>>(), [3 << 19], "the server's 2 MiB");
}

/// Section 5.2.6: each side states its host authentication material in its
/// RDMA2_CONNPROP_FINAL, and the other's reaches the application, for its local policy to
/// judge: the client's in `Server::peers`, the server's in `Client::draft07_peer_properties`,
/// byte for byte (the longest this crate states, `MAX_HOST_AUTH`, on the client's side).
#[test]
fn draft07_5_2_6_each_sides_host_authentication_reaches_the_other_application() {
    use negotiate::host_auth::{HostAuth, MAX_HOST_AUTH};
    let server_auth: Vec<u8> = b"server credential".to_vec();
    let client_auth: Vec<u8> = (0..MAX_HOST_AUTH).map(|i| i as u8).collect();
    let scfg = ServerConfig::default()
        .responder(ResponderConfig::default().draft07(true))
        .host_auth(Some(HostAuth::new(server_auth.clone()).unwrap()));
    let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(SERVER_ULB), serve).unwrap();
    let ccfg =
        client_config((Version::ONE, Version::TWO), D07).host_auth(Some(HostAuth::new(client_auth.clone()).unwrap()));
    let client = Client::new(InProcess, server.local_addr(), ccfg);
    assert_eq!(client.draft07_peer_properties(), None, "nothing stated before the connection");
    for xid in [1, 2] {
        let call = call_for(Form::Short, xid);
        assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
    }
    let theirs = client.draft07_peer_properties().expect("the server's CONNPROP_FINAL");
    assert_eq!(theirs.host_auth, Some(server_auth));
    // The client's CONNPROP_FINAL goes once its window has room: after the first reply.
    let deadline = Instant::now() + Duration::from_secs(5);
    let peer_auth = || server.peers().first().and_then(|p| p.draft07_properties.clone()).and_then(|p| p.host_auth);
    while peer_auth().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(peer_auth(), Some(client_auth));
}

/// Sections 4.5.2, 4.5.2.4, 4.5.3, 4.5.3.1 and 4.5.3.2, on a -07 connection between a real
/// Client and Server, read off both sides' Sends with -07's own parser. A call whose
/// DDP-eligible `opaque<>` argument is 3,001 bytes: its count stays in the Payload stream
/// (4.5.3.1, 4.5.3.2), its bytes (and only they: one item, 4.5.3) go in one Read chunk at a
/// four-byte aligned Position whose length is the item's, no roundup padding (4.5.3.1), and the
/// padding leaves the Payload stream too (aligned: what follows stays aligned, 4.5.3); the
/// server reads back exactly the call. Then a call whose 3,001-byte result goes in a Write
/// chunk: provisioned at the largest result the binding allows (4.5.2), with no room for
/// padding when that is 3,001 bytes (4.5.2.4); the server writes 3,001 bytes, no padding,
/// even into a chunk of 4,000 (4.5.2.4), and the count stays in the reply's Payload stream.
#[test]
fn draft07_4_5_a_reduced_item_moves_whole_without_padding_and_its_count_stays() {
    const ITEM: usize = 3001;
    // The server answers a call with a 4-byte opaque holding the sum of the call's bytes, or
    // for a "ChunkedWrite" call with an ITEM-byte opaque result.
    let handler = |call: &[u8]| {
        let (xid, form) = (word(call, 0), word(call, 2));
        if form == Form::ChunkedWrite.code() {
            return message(xid, 1, form, ITEM);
        }
        let sum = call.iter().fold(0u32, |s, &b| s.wrapping_add(u32::from(b)));
        [words(&[xid, 1, form, 4]), sum.to_be_bytes().to_vec()].concat()
    };
    let (server_side, replies) = capturing(InProcess);
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let server = Server::start(server_side, "inproc:*", scfg, Arc::new(SERVER_ULB), handler).unwrap();
    let (client_side, calls) = capturing(InProcess);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));

    // The Read chunk.
    let call = message(0x451, 0, Form::ChunkedRead.code(), ITEM);
    let reply = client.call(&call, &Form::ChunkedRead.ulb()).unwrap();
    let sum = call.iter().fold(0u32, |s, &b| s.wrapping_add(u32::from(b)));
    assert_eq!(reply[16..20], sum.to_be_bytes(), "the server read back exactly the call");
    let sent = take_xid(&calls, 0x451);
    let h = Header::parse(&sent[0], &HeaderLimits::default()).unwrap();
    let reads: Vec<(u32, u32)> = h.chunk_lists().reads.iter().map(|r| (r.position, r.target.length)).collect();
    let data_at = OPAQUE_AT + 4;
    assert_eq!(reads, [(data_at as u32, ITEM as u32)], "one chunk, the item's length, no padding");
    assert_eq!(data_at % 4, 0, "a four-byte aligned Position");
    let padded = ITEM.div_ceil(4) * 4;
    let inline = [&call[..data_at], &call[data_at + padded..]].concat();
    assert_eq!(h.payload(), &inline[..], "the count stays; the bytes and their padding leave");
    assert_eq!(word(h.payload(), 3), ITEM as u32);

    // The Write chunk, provisioned exactly, then with room to spare.
    for (xid, max_result) in [(0x452, ITEM), (0x453, 4000)] {
        let ulb = OpaqueAtUlb { max_result, ..Form::ChunkedWrite.ulb() };
        let call = message(xid, 0, Form::ChunkedWrite.code(), 16);
        assert_eq!(client.call(&call, &ulb).unwrap(), message(xid, 1, Form::ChunkedWrite.code(), ITEM));
        let sent = take_xid(&calls, xid);
        let h = Header::parse(&sent[0], &HeaderLimits::default()).unwrap();
        let provisioned: Vec<u32> =
            h.chunk_lists().writes.iter().map(|c| c.target.iter().map(|s| s.length).sum()).collect();
        assert_eq!(provisioned, [max_result as u32], "the largest result, no room added for padding");
        let answered = take_xid(&replies, xid);
        let r = Header::parse(&answered[0], &HeaderLimits::default()).unwrap();
        let written: Vec<u32> =
            r.chunk_lists().writes.iter().map(|c| c.target.iter().map(|s| s.length).sum()).collect();
        assert_eq!(written, [ITEM as u32], "the result's bytes, no padding written");
        assert_eq!(word(r.payload(), 3), ITEM as u32, "the count stays in the reply's Payload stream");
        assert_eq!(r.payload().len(), OPAQUE_AT + 4, "nothing of the result inline");
    }
}

/// A -07 client and server, settled on -07 by a first small call; the server advertising
/// `credits`, the client continuing a call across at most `max_parts` Sends.
fn continuing(credits: u32, max_parts: usize) -> (Server, Client<Captured<InProcess>>, Seen) {
    let responder = ResponderConfig::default().draft07(true).credits(credits);
    let scfg = ServerConfig::default().responder(responder);
    let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(SERVER_ULB), serve).unwrap();
    let (client_side, calls) = capturing(InProcess);
    let requester = RequesterConfig::default().version_two(D07).max_call_parts(max_parts);
    let client = Client::new(client_side, server.local_addr(), ClientConfig::default().requester(requester));
    let call = call_for(Form::Short, 0x800);
    assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
    assert_eq!(client.dialect(), Some(Dialect::Ietf07));
    calls.lock().unwrap().clear();
    (server, client, calls)
}

/// The header types of `sends`.
fn htypes(sends: &[Vec<u8>]) -> Vec<HeaderType> {
    sends.iter().map(|m| htype(m)).collect()
}

/// Sections 4.1, 6.3.6 and 6.3.7: a -07 call too large for the responder's 4096-byte Receive,
/// with nothing DDP-eligible, goes as RDMA2_CALL_MIDDLE parts and a final RDMA2_CALL_INLINE:
/// each Send within the Receive, every part with the call's XID ("MUST set the rdma_xid field
/// to the same value as the xid of the RPC ... message"), each MIDDLE saying how many bytes
/// remain after it, the parts in XDR stream order making up the call byte for byte; and the
/// server, reassembling them, answers the whole call.
#[test]
fn draft07_4_1_a_call_too_large_for_the_receive_continues_across_sends() {
    let (server, client, calls) = continuing(32, 4);
    let call = message(0x801, 0, Form::LongCall.code(), 10_000);
    assert_eq!(client.call(&call, &Form::LongCall.ulb()).unwrap(), serve(&call));
    let sent = take_xid(&calls, 0x801);
    assert_eq!(htypes(&sent), [HeaderType::CallMiddle, HeaderType::CallMiddle, HeaderType::CallInline]);
    let mut whole = Vec::new();
    for send in &sent {
        assert!(send.len() <= 4096, "a {}-byte Send into a 4096-byte Receive", send.len());
        let h = Header::parse(send, &HeaderLimits::default()).unwrap();
        assert_eq!(h.xid(), 0x801);
        whole.extend_from_slice(h.payload());
        let remaining = h.remaining().map_or(0, |r| r as usize);
        assert_eq!(remaining, call.len() - whole.len(), "rdma_remaining: the bytes after this part");
    }
    assert_eq!(whole, call, "the parts in stream order are the call");
    let last = Header::parse(&sent[2], &HeaderLimits::default()).unwrap();
    assert!(last.chunk_lists().reads.is_empty() && last.call_chunk().is_empty(), "nothing by RDMA Read");
    let stats = client.stats();
    assert_eq!((stats.short, stats.long, stats.continued), (2, 0, 1), "{stats:?}");
    assert_eq!(server.stats().credit_overruns, 0);
}

/// Section 4.1 with section 6.3.5 for the rest: a call needing more Sends than the requester
/// allows one call (`RequesterConfig::max_call_parts`), or more than the responder's window
/// has room for as it goes (4.2.1), travels whole in a Call chunk (RDMA2_CALL_EXTERNAL) in one
/// Send instead; one that fits the window continues.
#[test]
fn draft07_4_1_a_call_beyond_the_parts_allowed_or_the_window_goes_in_a_call_chunk() {
    // Three parts, two allowed.
    let (_server, client, calls) = continuing(32, 2);
    let call = message(0x802, 0, Form::LongCall.code(), 10_000);
    assert_eq!(client.call(&call, &Form::LongCall.ulb()).unwrap(), serve(&call));
    assert_eq!(htypes(&take_xid(&calls, 0x802)), [HeaderType::CallExternal]);
    // Two parts fit.
    let call = message(0x803, 0, Form::LongCall.code(), 6000);
    assert_eq!(client.call(&call, &Form::LongCall.ulb()).unwrap(), serve(&call));
    assert_eq!(htypes(&take_xid(&calls, 0x803)), [HeaderType::CallMiddle, HeaderType::CallInline]);

    // A responder advertising 2: a call's first Send leaves room for one more, not two.
    let (server, client, calls) = continuing(2, 4);
    let call = message(0x804, 0, Form::LongCall.code(), 10_000);
    assert_eq!(client.call(&call, &Form::LongCall.ulb()).unwrap(), serve(&call));
    assert_eq!(htypes(&take_xid(&calls, 0x804)), [HeaderType::CallExternal]);
    let call = message(0x805, 0, Form::LongCall.code(), 6000);
    assert_eq!(client.call(&call, &Form::LongCall.ulb()).unwrap(), serve(&call));
    assert_eq!(htypes(&take_xid(&calls, 0x805)), [HeaderType::CallMiddle, HeaderType::CallInline]);
    assert_eq!(server.stats().credit_overruns, 0);
}

/// Section 4.1: a sender "MUST NOT interleave Payload streams from multiple RPC messages".
/// Eight callers on one -07 connection send continued and single-Send calls at once: on the
/// wire, every RDMA2_CALL_MIDDLE is followed by the next part of the same call, every call is
/// answered whole, and the server counts no message beyond the totals it sent (4.2.1).
#[test]
fn draft07_4_1_continued_calls_from_many_callers_never_interleave() {
    let (server, client, calls) = continuing(8, 4);
    let client = Arc::new(client);
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                for i in 0..30u32 {
                    let len = [16, 6000, 10_000][(i % 3) as usize];
                    let call = message(0x1000 + (t << 8) + i, 0, Form::LongCall.code(), len);
                    assert_eq!(client.call(&call, &Form::LongCall.ulb()).unwrap(), serve(&call));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let sent = calls.lock().unwrap().clone();
    let calls_only: Vec<_> = sent.iter().filter(|m| htype(m).is_call()).collect();
    for pair in calls_only.windows(2) {
        if htype(pair[0]) == HeaderType::CallMiddle {
            assert_eq!(word(pair[1], 0), word(pair[0], 0), "a part of another call after a CALL_MIDDLE");
        }
    }
    let between: Vec<_> = sent
        .windows(2)
        .filter(|w| htype(&w[0]) == HeaderType::CallMiddle && !htype(&w[1]).is_call())
        .map(|w| htype(&w[1]))
        .collect();
    assert!(between.is_empty(), "nothing but the call's next part after a CALL_MIDDLE: {between:?}");
    let stats = client.stats();
    assert!(stats.continued > 0, "{stats:?}");
    assert_eq!(stats.short + stats.long, 8 * 30 + 1, "{stats:?}");
    assert_eq!(server.stats().credit_overruns, 0);
}

/// A -07 core offering the reverse direction in the Simple format (as a client with a
/// backchannel handler does), settled on -07 by call 1's reply (total `total`).
fn offering_reverse(total: u32) -> Connection<u32> {
    let now = Instant::now();
    let mut c = core(D07);
    c.offer_reverse_direction(ReverseDirection::Simple);
    c.start_call(1, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    transmit(&mut c, 1);
    answer(&mut c, 1, total);
    c
}

/// A -07 RDMA2_CALL_INLINE from the responder: XID `xid`, total `total`, chunk lists `lists`
/// and the RPC call `rpc`.
fn reverse_call(xid: u32, total: u32, lists: &rpcrdma_v1::header::ChunkLists<'_>, rpc: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 256];
    let n = marshal::call_inline(&mut out, xid, total, 0, lists, rpc).unwrap();
    out.truncate(n);
    out
}

/// Section 5.2.5: a requester that answers the responder's calls states RDMA2_PROPID_BRS in
/// its RDMA2_CONNPROP_FINAL, Simple; and section 4.6.1 read by the receiver: a reverse call in
/// the Simple format, its RPC call starting with the header's XID, is handed to the
/// backchannel as a call in version 2, and the reply queued for it goes out when the window
/// has room, carrying the running total (4.2.1).
#[test]
fn draft07_4_6_a_reverse_call_is_taken_and_its_reply_waits_for_the_window() {
    let mut c = offering_reverse(2);
    let connprop = transmitted(&mut c).expect("this side's CONNPROP_FINAL");
    let h = Header::parse(&connprop, &HeaderLimits::default()).unwrap();
    assert_eq!(h.header_type(), HeaderType::ConnPropFinal);
    let stated = Properties::default().apply(&h.properties().unwrap()).unwrap();
    assert_eq!(stated.reverse_direction, ReverseDirection::Simple);
    // The CONNPROP took the window's one place left: the reply waits for the next total.
    let call = reverse_call(0x66, 2, &marshal::NO_CHUNKS, &words(&[0x66, 0, 7]));
    let Received::Call { header, params } = c.handle_receive(&call, Arrival::default(), Instant::now()) else {
        panic!("not taken as a call")
    };
    assert_eq!((header.xid(), header.version(), header.payload()), (0x66, Version::TWO, &words(&[0x66, 0, 7])[..]));
    assert!(params.draft07);
    assert!(c.queue_reverse_reply(vec![0; 28]));
    assert_eq!(transmitted(&mut c), None, "no room in the responder's window");
    // A GRANT raises the total: the reply goes, stamped with this side's total.
    let grant = marshal::grant_message(5);
    receive(&mut c, &grant);
    let reply = transmitted(&mut c).expect("the reply, once the window opened");
    assert_eq!(word(&reply, 2), 32 + 3, "this side's total: three Receives, 32 advertised");
}

/// Section 4.6.4: "If a reverse-direction Requester provides a non-empty chunk list to a
/// Responder that does not support chunks, the Responder MUST report its lack of support
/// using one of the error values defined in Section 7.3". A requester offering the Simple
/// format answers a reverse call with a Read chunk RDMA2_ERR_READ_CHUNKS, with a Write chunk
/// RDMA2_ERR_WRITE_CHUNKS (both taking none, `rdma_max_chunks` 0), with a Reply chunk
/// RDMA2_ERR_REPLY_RESOURCE, and one in a Call chunk (CALL_EXTERNAL) READ_CHUNKS; a CALL_MIDDLE
/// (the Continued format, not offered) INVAL_HTYPE; a call whose RPC XID differs from the
/// header's (4.6.1) BAD_XDR. None reaches the backchannel.
#[test]
fn draft07_4_6_4_a_reverse_call_with_chunks_is_refused_with_a_7_3_error() {
    use rpcrdma_v1::header::ChunkLists;
    use rpcrdma_v1::rt::List;
    use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrReadChunk, XdrWriteChunk};
    let seg = XdrRdmaSegment { handle: 9, length: 64, offset: 0x1000 };
    let read = [XdrReadChunk { position: 12, target: seg }];
    let segs = [seg];
    let write = [XdrWriteChunk { target: rpcrdma_v1::rt::Seq::from_slice(&segs) }];
    let rpc = words(&[0x70, 0, 0, 0]);
    let cases: [(ChunkLists<'_>, u32); 3] = [
        (ChunkLists { reads: List::from_slice(&read), ..marshal::NO_CHUNKS }, 6),
        (ChunkLists { writes: List::from_slice(&write), ..marshal::NO_CHUNKS }, 7),
        (ChunkLists { reply: Some(write[0]), ..marshal::NO_CHUNKS }, 10),
    ];
    // Each refusal waits, like any -07 Send, for room in the responder's window (section
    // 4.2.1): the reverse calls here carry a total that leaves room.
    let mut c = offering_reverse(32);
    transmitted(&mut c); // this side's CONNPROP_FINAL
    let total = 100;
    let refused = |c: &mut Connection<u32>, bytes: &[u8]| {
        assert_eq!(c.handle_receive(bytes, Arrival::default(), Instant::now()), Received::Nothing(None));
        let e = transmitted(c).expect("the RDMA2_ERROR, the window having room");
        let h = Header::parse(&e, &HeaderLimits::default()).unwrap();
        assert_eq!(h.header_type(), HeaderType::Error);
        (h.xid(), h.error().unwrap().code(), e)
    };
    for (lists, code) in cases {
        let (xid, got, e) = refused(&mut c, &reverse_call(0x70, total, &lists, &rpc));
        assert_eq!((xid, got), (0x70, code), "{lists:?}");
        if code != 10 {
            assert_eq!(word(&e, 5), 0, "rdma_max_chunks: none taken");
        }
    }
    // In a Call chunk.
    let whole = [XdrReadChunk { position: 0, target: seg }];
    let mut ext = vec![0u8; 128];
    let n = marshal::call_external(&mut ext, 0x71, total, 0, List::from_slice(&whole), &marshal::NO_CHUNKS).unwrap();
    let (xid, code, _) = refused(&mut c, &ext[..n]);
    assert_eq!((xid, code), (0x71, 6));
    // Continued.
    let mut mid = vec![0u8; 64];
    let n = marshal::middle(&mut mid, 0x72, total, MessageType::Call, 8, &words(&[0x72, 0])).unwrap();
    let (xid, code, _) = refused(&mut c, &mid[..n]);
    assert_eq!((xid, code), (0x72, 4));
    // Its RPC call starting with another XID.
    let (xid, code, _) = refused(&mut c, &reverse_call(0x73, total, &marshal::NO_CHUNKS, &words(&[0x99, 0])));
    assert_eq!((xid, code), (0x73, 2));

    // With the window shut, a refusal waits for the responder's next total.
    let mut c = offering_reverse(2);
    transmitted(&mut c); // this side's CONNPROP_FINAL took the last place
    let call = reverse_call(0x74, 2, &ChunkLists { reads: List::from_slice(&read), ..marshal::NO_CHUNKS }, &rpc);
    assert_eq!(c.handle_receive(&call, Arrival::default(), Instant::now()), Received::Nothing(None));
    assert_eq!(transmitted(&mut c), None, "no room: the refusal waits");
    receive(&mut c, &marshal::grant_message(5));
    let e = transmitted(&mut c).expect("the RDMA2_ERROR, once the window opened");
    assert_eq!((word(&e, 0), word(&e, 3), word(&e, 4)), (0x74, 4, 6));
}

/// A server whose procedure 9 is call-only: its handler records the call and answers with
/// nothing (an empty reply), every other call is served as `serve` serves it.
fn call_only_server<B: Backend + Clone>(backend: B, seen: Arc<Mutex<Vec<Vec<u8>>>>) -> Server {
    let handler = move |call: &[u8]| {
        if word(call, 1) == 0 && word(call, 2) == 9 {
            seen.lock().unwrap().push(call.to_vec());
            return Vec::new();
        }
        serve(call)
    };
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    Server::start(backend.clone(), backend.any_address(), scfg, Arc::new(SERVER_ULB), handler).unwrap()
}

/// Section 4.7: "There is no corresponding Reply to a Call-only procedure ... Therefore,
/// Requesters MUST NOT use chunks when sending Call-only RPC procedures". Through a real
/// Client and Server: call-only calls go in RDMA2_CALL_INLINE with empty chunk lists, one too
/// large for the server's Receive is refused unsent (`DataPathError::CallOnlyTooLarge`:
/// nothing else would carry it without a chunk), and the server runs each once, sending
/// nothing back for it. Two hundred of them, far beyond the server's 32 credits, all go:
/// the server's RDMA2_GRANTs (4.2.1.1) open the window no reply does, and it never counts a
/// message beyond its totals.
#[test]
fn draft07_4_7_call_only_calls_go_without_chunks_and_get_no_reply() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (server_side, replies) = capturing(InProcess);
    let server = call_only_server(server_side, seen.clone());
    let (client_side, calls) = capturing(InProcess);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    let call = call_for(Form::Short, 0x900);
    assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
    calls.lock().unwrap().clear();
    replies.lock().unwrap().clear();
    let mut sent = Vec::new();
    for i in 0..200u32 {
        let len = if i % 50 == 7 { 3000 } else { 16 };
        let m = message(0x1000 + i, 0, 9, len);
        client.call_only(&m).unwrap();
        sent.push(m);
    }
    // A call after them is answered: the connection goes on. The call-only ones are all
    // served (a handler that runs long may let a later one overtake it), each once.
    let call = call_for(Form::Short, 0x901);
    assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().len() < sent.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    sent.sort();
    assert_eq!(got, sent, "each call-only call served once");
    // On the wire: each in one RDMA2_CALL_INLINE with no chunk.
    let wire = calls.lock().unwrap().clone();
    let call_only: Vec<_> = wire.iter().filter(|m| (0x1000..0x1000 + 200).contains(&word(m, 0))).collect();
    assert_eq!(call_only.len(), 200);
    for m in &call_only {
        let h = Header::parse(m, &HeaderLimits::default()).unwrap();
        assert_eq!(h.header_type(), HeaderType::CallInline);
        let l = h.chunk_lists();
        assert!(l.reads.is_empty() && l.writes.is_empty() && l.reply.is_none() && h.call_chunk().is_empty());
    }
    // Nothing answers them; GRANTs kept the window open.
    let back = replies.lock().unwrap().clone();
    assert!(back.iter().all(|m| !(0x1000..0x1000 + 200).contains(&word(m, 0))), "a reply to a call-only call");
    assert!(back.iter().any(|m| htype(m) == HeaderType::Grant), "no RDMA2_GRANT");
    let (c, s) = (client.stats(), server.stats());
    assert_eq!((c.call_only, s.call_only_calls), (200, 200), "{c:?} {s:?}");
    assert_eq!(s.credit_overruns, 0);
    // Too large to go without chunks: refused, nothing sent.
    let before = calls.lock().unwrap().len();
    for len in [6000, 100_000] {
        let got = client.call_only(&message(0x2000, 0, 9, len));
        let refused =
            matches!(got, Err(ClientError::DataPath(DataPathError::CallOnlyTooLarge { threshold: 4096, .. })));
        assert!(refused, "{got:?}");
    }
    assert_eq!(calls.lock().unwrap().len(), before, "nothing sent");
    let call = call_for(Form::Short, 0x902);
    assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
}

/// Section 4.7 needs -07's running totals: on a connection that does not speak -07, where
/// each call holds a credit until its reply, a call-only call fails at once, unsent.
#[test]
fn draft07_4_7_call_only_needs_a_connection_settled_on_draft07() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = call_only_server(InProcess, seen.clone());
    let client = Client::new(InProcess, server.local_addr(), client_config((Version::ONE, Version::TWO), CEL00));
    let call = call_for(Form::Short, 0x900);
    assert_eq!(client.call(&call, &Form::Short.ulb()).unwrap(), serve(&call));
    let got = client.call_only(&message(0x1000, 0, 9, 16));
    assert!(matches!(got, Err(ClientError::Call(CallFailure::NotVersionTwo))), "{got:?}");
    assert!(seen.lock().unwrap().is_empty());
}

/// Section 4.5.3: "As body chunks contain a Payload stream, they MUST include all appropriate
/// XDR roundup padding to maintain proper XDR alignment of their contents." A call whose
/// opaque has an odd length travels in a Call chunk (RDMA2_CALL_EXTERNAL) as long as the
/// whole message, padding included; a reply with an odd-length opaque comes back through the
/// Reply chunk (RDMA2_REPLY_EXTERNAL) written as long as the whole reply, padding included;
/// both arrive byte for byte.
#[test]
fn draft07_4_5_3_body_chunks_carry_the_roundup_padding() {
    const ODD: usize = 16_381; // three bytes of padding after it
    let handler = |call: &[u8]| message(word(call, 0), 1, Form::LongReply.code(), ODD);
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let (server_side, replies) = capturing(InProcess);
    let server = Server::start(server_side, "inproc:*", scfg, Arc::new(SERVER_ULB), handler).unwrap();
    let (client_side, calls) = capturing(InProcess);
    // (Calls never continue here: a long one goes in its Call chunk.)
    let requester = RequesterConfig::default().version_two(D07).max_call_parts(1);
    let client = Client::new(client_side, server.local_addr(), ClientConfig::default().requester(requester));
    client.call(&message(0x500, 0, Form::Short.code(), 16), &Form::Short.ulb()).unwrap();
    let call = message(0x501, 0, Form::LongCall.code(), ODD);
    assert_eq!(call.len() % 4, 0);
    let ulb = OpaqueAtUlb { max_reply: 2 * BIG, ..Form::LongCall.ulb() };
    let reply = client.call(&call, &ulb).unwrap();
    assert_eq!(reply, message(0x501, 1, Form::LongReply.code(), ODD));
    let sent = take_xid(&calls, 0x501);
    let h = Header::parse(&sent[0], &HeaderLimits::default()).unwrap();
    assert_eq!(h.header_type(), HeaderType::CallExternal);
    let chunk: u32 = h.call_chunk().iter().map(|r| r.target.length).sum();
    assert_eq!(chunk as usize, call.len(), "the Call chunk holds the whole call, its padding included");
    let answered = take_xid(&replies, 0x501);
    let r = Header::parse(&answered[0], &HeaderLimits::default()).unwrap();
    assert_eq!(r.header_type(), HeaderType::ReplyExternal);
    let written: u32 = r.chunk_lists().reply.iter().flat_map(|c| c.target.iter().map(|s| s.length)).sum();
    assert_eq!(written as usize, reply.len(), "the Reply chunk holds the whole reply, its padding included");
    assert_eq!(written % 4, 0);
}

/// Section 4.5.3.3: "when reducing an optional-data data type, the discriminator field MUST
/// remain in the Payload stream. The sender MUST place the data, when present, in the
/// chunk." A call carrying an optional `opaque<>` (`*opaque<>`: a present/absent word, then
/// the opaque) whose binding makes the data DDP-eligible goes with the discriminator and the
/// count inline and only the data in its Read chunk, at the data's position; absent, nothing
/// is reduced; the server reads back exactly the call either way.
#[test]
fn draft07_4_5_3_3_optional_data_keeps_its_discriminator_inline_and_its_data_in_the_chunk() {
    const DISCRIMINATOR_AT: usize = 12;
    // The binding both sides use: the opaque's length word follows the discriminator.
    let ulb =
        OpaqueAtUlb { call_opaque: Some(DISCRIMINATOR_AT + 4), reply_opaque: None, max_result: 0, max_reply: 128 };
    let handler = |call: &[u8]| {
        let sum = call.iter().fold(0u32, |s, &b| s.wrapping_add(u32::from(b)));
        words(&[word(call, 0), 1, sum])
    };
    let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ulb), handler).unwrap();
    let (client_side, calls) = capturing(InProcess);
    let client = Client::new(client_side, server.local_addr(), client_config((Version::ONE, Version::TWO), D07));
    client.call(&words(&[0x600, 0, 0, 0, 0]), &ulb).unwrap();
    const DATA: usize = 6001;
    let mut call = words(&[0x601, 0, 0, 1, DATA as u32]);
    call.extend((0..DATA).map(|i| (i * 13) as u8));
    call.resize(call.len() + rpcrdma_v1::ulb::roundup_pad(DATA), 0);
    let sum = call.iter().fold(0u32, |s, &b| s.wrapping_add(u32::from(b)));
    assert_eq!(client.call(&call, &ulb).unwrap(), words(&[0x601, 1, sum]), "the server read back the call");
    let sent = take_xid(&calls, 0x601);
    let h = Header::parse(&sent[0], &HeaderLimits::default()).unwrap();
    let reads: Vec<(u32, u32)> = h.chunk_lists().reads.iter().map(|r| (r.position, r.target.length)).collect();
    assert_eq!(reads, [(DISCRIMINATOR_AT as u32 + 8, DATA as u32)], "the data, and only the data, in the chunk");
    assert_eq!(word(h.payload(), 3), 1, "the discriminator stays in the Payload stream");
    assert_eq!(word(h.payload(), 4), DATA as u32, "so does the count");
    assert_eq!(h.payload().len(), DISCRIMINATOR_AT + 8);
    // Absent: the discriminator alone, nothing to reduce.
    let absent = words(&[0x602, 0, 0, 0]);
    let sum = absent.iter().fold(0u32, |s, &b| s.wrapping_add(u32::from(b)));
    assert_eq!(client.call(&absent, &ulb).unwrap(), words(&[0x602, 1, sum]));
    let sent = take_xid(&calls, 0x602);
    let h = Header::parse(&sent[0], &HeaderLimits::default()).unwrap();
    assert!(h.chunk_lists().reads.is_empty());
    assert_eq!(h.payload(), &absent[..]);
}
