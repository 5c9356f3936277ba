//! The one connection core (`negotiate::connection::Connection`), both sides driven by bytes
//! only: what a received message is for is judged once, in one vocabulary, whichever side
//! receives it and whichever direction it travels (RFC 8167: each side of a connection is a
//! requester and a responder).

use std::time::{Duration, Instant};

use cm_private_data::{Flags, PrivateData};
use negotiate::client::ClientConfig;
use negotiate::connection::{Arrival, CallStep, CloseCause, Connection, Event, Received};
use negotiate::datapath::Ended;
use negotiate::reply::DropReason;
use negotiate::responder::ResponderConfig;
use rpcrdma_v1::marshal_call::CallForm;
use rpcrdma_v1::Version;
use rpcrdma_verbs::{Completion, Status};

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// An RDMA_MSG with no chunks around a tiny RPC message (`msg_type` 0 call, 1 reply).
fn msg(xid: u32, vers: Version, credit: u32, msg_type: u32) -> Vec<u8> {
    bytes(&[xid, vers.wire(), credit, 0, 0, 0, 0, xid, msg_type])
}

/// A client's connection and a server's, with the private data given, after one forward call
/// settled the version (Version Two: both speak it).
fn settled(client_pd: PrivateData, server_pd: PrivateData) -> (Connection<u32>, Connection<()>, Instant) {
    let now = Instant::now();
    let mut client: Connection<u32> = Connection::client(ClientConfig::default(), "test:server");
    let mut server: Connection<()> = Connection::server(
        ResponderConfig::default(),
        Duration::from_secs(60),
        &client_pd.encode(),
        Some(server_pd),
        now,
    );
    client.start_call(1, now).unwrap();
    assert!(matches!(client.poll_event(), Some(Event::Connect { .. })));
    client.handle_connected(7, Some(client_pd), &server_pd.encode(), now);
    let Some(CallStep::Transmit { transmit: t, link: 7 }) = client.take_step(1) else { panic!("no transmission") };
    client.handle_sent(CallForm::Short, 1);
    let call = msg(t.xid, t.version, t.credits, 0);
    let Received::Call { header, params } = server.handle_receive(&call, Arrival::default(), now) else {
        panic!("the forward call is a call to serve")
    };
    let reply = msg(header.xid(), params.version, params.credits, 1);
    assert_eq!(client.handle_receive(&reply, Arrival::default(), now), Received::Reply { xid: 1 });
    client.deliver(1, reply, None);
    assert!(matches!(client.take_step(1), Some(CallStep::Reply { .. })));
    client.finish_call(1);
    assert_eq!(client.version(), Some(Version::TWO));
    // (The wake-ups of that call's steps, which were taken above.)
    while client.poll_ready().is_some() {}
    (client, server, now)
}

/// RFC 8167 section 4 (and v2 draft section 4.2): a backward-direction call arriving on a
/// client's connection is a call to serve, answered in its own version, within the server's
/// Receives (the forward call threshold, RFC 8797 section 4.2: min of the client's send size
/// and the server's receive size), granting the one backward credit, never by Send With
/// Invalidate (the server registered nothing for it).
#[test]
fn rfc8167_a_backward_call_on_a_clients_connection_is_judged_with_how_to_answer_it() {
    // The client sends up to 4096 and the server receives 2048: the forward call threshold is 2048.
    let client_pd = PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096);
    let server_pd = PrivateData::new(Flags::REMOTE_INVALIDATE, 8192, 2048);
    let (mut client, _, now) = settled(client_pd, server_pd);
    let backward = msg(0x99, Version::TWO, 1, 0);
    let Received::Call { header, params } = client.handle_receive(&backward, Arrival::default(), now) else {
        panic!("a backward call is a call to serve")
    };
    assert_eq!((header.xid(), header.version()), (0x99, Version::TWO));
    assert_eq!(params.version, Version::TWO);
    assert_eq!(params.credits, 1);
    assert_eq!(params.reply_inline_threshold, 2048);
    assert!(!params.remote_invalidation);
    // It is no call of the client's: no caller is woken, no event raised.
    assert_eq!(client.poll_ready(), None);
    assert_eq!(client.poll_event(), None);
}

/// RFC 8166 section 4.5: on a server's connection, the client's reply to a backward call and
/// its RDMA_ERROR naming one come out as the same `Reply` and `PeerError` a client's
/// connection speaks of for its forward calls.
#[test]
fn rfc8166_4_5_replies_and_errors_to_a_servers_backward_call_in_the_same_vocabulary() {
    let pd = PrivateData::new(Flags::empty(), 4096, 4096);
    let (_, mut server, now) = settled(pd, pd);
    let reply = msg(0x77, Version::TWO, 1, 1);
    assert_eq!(server.handle_receive(&reply, Arrival::default(), now), Received::Reply { xid: 0x77 });
    // RDMA_ERROR (proc 4), ERR_CHUNK (2) naming XID 0x78.
    let error = bytes(&[0x78, 2, 1, 4, 2]);
    assert!(matches!(server.handle_receive(&error, Arrival::default(), now), Received::PeerError { xid: 0x78, .. }));
}

/// The core's timers come from `poll_timeout`, and `handle_timeout` acts on them: a server's
/// connection raises `Idle` once at its idle deadline, which a message received pushes back.
#[test]
fn a_servers_connection_is_idle_at_the_deadline_poll_timeout_gives() {
    let now = Instant::now();
    let idle = Duration::from_secs(5);
    let mut server: Connection<()> = Connection::server(ResponderConfig::default(), idle, &[], None, now);
    assert_eq!(server.poll_timeout(), Some(now + idle));
    let later = now + Duration::from_secs(3);
    server.handle_receive(&msg(1, Version::ONE, 1, 0), Arrival::default(), later);
    assert_eq!(server.poll_timeout(), Some(later + idle));
    server.handle_timeout(now + idle);
    assert_eq!(server.poll_event(), None, "a message arrived since: not idle yet");
    server.handle_timeout(later + idle);
    server.handle_timeout(later + idle + Duration::from_secs(1));
    assert_eq!(server.poll_event(), Some(Event::Idle));
    assert_eq!(server.poll_event(), None, "raised once");
}

/// RFC 8166 section 4.5.4 through the core's timer: a call with no reply by its deadline
/// closes the connection, whenever `handle_timeout` is asked, and whatever it was asked
/// before. The core answers most asks without looking at its calls (it keeps a bound below
/// every deadline): asked first at a later time with nothing in flight, then given a call sent
/// earlier than that, the call's deadline still counts; asked just before it, nothing happens.
#[test]
fn rfc8166_4_5_4_a_call_past_its_deadline_closes_the_connection_however_the_clock_was_asked() {
    let (mut client, _server, now) = settled(PrivateData::default(), PrivateData::default());
    let timeout = ClientConfig::default().requester.timeout;
    // Nothing in flight: nothing due, even long after.
    client.handle_timeout(now + 3 * timeout);
    assert_eq!(client.poll_event(), None, "nothing in flight: nothing times out");
    // A call sent at `now`, before the time just asked about.
    client.start_call(2, now).unwrap();
    let Some(CallStep::Transmit { link: 7, .. }) = client.take_step(2) else { panic!("no transmission") };
    client.handle_sent(CallForm::Short, 1);
    assert_eq!(client.poll_timeout(), Some(now + timeout));
    for before in [Duration::from_millis(1), timeout / 2, timeout - Duration::from_millis(1)] {
        client.handle_timeout(now + before);
        assert_eq!(client.poll_event(), None, "{before:?} after the call: not due");
    }
    client.handle_timeout(now + timeout);
    let cause = CloseCause::ReplyTimeout { timeout };
    assert_eq!(client.poll_event(), Some(Event::Disconnect { link: 7, cause }), "the call's deadline passed");
}

/// Issue 25: the connection's end comes out of `poll_event` with its cause, in its place
/// among the events: closed here for the reason the core gave (then the next connection is
/// asked for), or lost under this side with the first error completion reaped on it.
#[test]
fn issue_25_the_connections_end_comes_out_of_poll_event_with_its_cause() {
    let (mut client, _server, now) = settled(PrivateData::default(), PrivateData::default());
    let timeout = ClientConfig::default().requester.timeout;
    client.start_call(2, now).unwrap();
    let Some(CallStep::Transmit { link: 7, .. }) = client.take_step(2) else { panic!("no transmission") };
    client.handle_sent(CallForm::Short, 1);
    client.handle_timeout(now + timeout);
    let Some(Event::Disconnect { link: 7, cause }) = client.poll_event() else { panic!("the deadline closes link 7") };
    // The driver closes the link for that cause, and reports it down.
    let closed = Ended::Closed(cause.to_string());
    client.handle_link_down(closed.clone(), now + timeout);
    assert_eq!(client.poll_event(), Some(Event::Ended(closed)), "the end, with the words it was closed for");
    assert!(matches!(client.poll_event(), Some(Event::Connect { .. })), "then the next connection");
    assert_eq!(client.poll_event(), None);

    // The next connection is lost under this side: its end carries the completion that said so.
    client.handle_connected(8, None, &[], now + timeout);
    let first_error = Completion { status: Status::RnrRetryExceeded, ..Completion::default() };
    let lost = Ended::Lost { first_error: Some(first_error) };
    client.handle_link_down(lost.clone(), now + timeout);
    assert_eq!(client.poll_event(), Some(Event::Ended(lost.clone())));
    assert_eq!(client.ended().last(), Some(&lost), "and kept among the latest ends");
}

/// A reply's caller is woken before anything its credit lets go: the core routes the reply
/// when its bytes are delivered, so the caller whose reply arrived is first in `poll_ready`.
#[test]
fn a_replys_caller_comes_before_the_transmission_its_credit_lets_go() {
    let (mut client, _, first, waiting, _) = window_full_then_the_first_reply();
    assert_eq!(client.poll_ready(), Some(first));
    assert_eq!(client.poll_ready(), Some(waiting));
}

/// A settled client whose window the server's grant opened is full, with one call more
/// waiting for a credit; then the server's reply to the first call arrives and is delivered.
/// The client, the time, the first call's XID and the waiting one's, the reply's version and
/// credits.
fn window_full_then_the_first_reply() -> (Connection<u32>, Instant, u32, u32, (Version, u32)) {
    let pd = PrivateData::new(Flags::empty(), 4096, 4096);
    let (mut client, mut server, now) = settled(pd, pd);
    let window = client.window();
    let mut sent = Vec::new();
    for xid in 10..10 + window {
        client.start_call(xid, now).unwrap();
        let Some(CallStep::Transmit { transmit, .. }) = client.take_step(xid) else { panic!("credit for {xid}") };
        client.handle_sent(CallForm::Short, 1);
        sent.push(transmit);
    }
    let waiting = 10 + window;
    client.start_call(waiting, now).unwrap();
    while client.poll_ready().is_some() {}
    assert!(client.take_step(waiting).is_none(), "no credit left");
    let t = &sent[0];
    let call = msg(t.xid, t.version, t.credits, 0);
    let Received::Call { header, params } = server.handle_receive(&call, Arrival::default(), now) else { panic!() };
    let reply = msg(header.xid(), params.version, params.credits, 1);
    assert_eq!(client.handle_receive(&reply, Arrival::default(), now), Received::Reply { xid: t.xid });
    client.deliver(t.xid, reply, None);
    (client, now, t.xid, waiting, (params.version, params.credits))
}

/// RFC 8166 section 4.2.1 (a reply's XID matches the call it answers): a reply to a call whose
/// transmission was handed out and not yet taken by its caller answers nothing the responder
/// can have received (a hostile peer that guessed the next XID, here as soon as the credit
/// that lets the call go is granted). It is dropped as answering no call in flight, and the
/// call goes out as it would have; once sent, the same reply completes it. Before: the reply
/// took the untaken transmission's place, and the caller, with nothing posted to complete,
/// panicked ("a reply answers a transmitted call").
#[test]
fn rfc8166_4_2_1_a_reply_to_a_call_not_yet_sent_is_dropped_and_the_call_goes_out() {
    // The reply to the first call frees the credit the next call waits for: its transmission
    // is handed out, not yet taken.
    let (mut client, now, first, next, (version, credits)) = window_full_then_the_first_reply();
    assert!(matches!(client.take_step(first), Some(CallStep::Reply { .. })));
    client.finish_call(first);
    assert!(client.ready_transmit(next).is_some(), "the next call's transmission is handed out");
    // The guessed reply, before the caller took it.
    let guessed = msg(next, version, credits, 1);
    assert_eq!(
        client.handle_receive(&guessed, Arrival::default(), now),
        Received::Nothing(Some(DropReason::UnknownXid(next))),
        "a reply to a call not yet sent answers no call in flight"
    );
    let Some(CallStep::Transmit { transmit, .. }) = client.take_step(next) else {
        panic!("the call's transmission is still its step")
    };
    assert_eq!(transmit.xid, next);
    client.handle_sent(CallForm::Short, 1);
    // Sent now: the same bytes answer it.
    assert_eq!(client.handle_receive(&guessed, Arrival::default(), now), Received::Reply { xid: next });
}

/// The same for the probe (v2 draft section 5.2): an RDMA_ERROR ERR_VERS naming a probe whose
/// transmission its caller has not taken yet answers nothing the responder read, and moves
/// nothing (no fallback to Version One); once the probe is sent, the same bytes make the
/// connection fall back and the call go out again in Version One. (A refusal of the probe's
/// dialect, read before the reply is matched, `Requester::refusal`, is still acted on for a
/// probe not yet taken: it requeues or fails the call, which a peer can bring about as well
/// once the probe is sent.)
#[test]
fn draft_5_2_an_error_naming_a_probe_not_yet_sent_is_dropped() {
    let now = Instant::now();
    let mut client: Connection<u32> = Connection::client(ClientConfig::default(), "test:server");
    client.start_call(1, now).unwrap();
    assert!(matches!(client.poll_event(), Some(Event::Connect { .. })));
    client.handle_connected(7, None, &[], now);
    let Some((t, _)) = client.ready_transmit(1) else { panic!("the probe is handed out") };
    assert_eq!((t.probe, t.version), (true, Version::TWO));
    // RDMA_ERROR (4), ERR_VERS (1), versions 1 to 1 (RFC 8166 section 4.2.2).
    let err_vers = bytes(&[1, 1, 1, 4, 1, 1, 1]);
    assert_eq!(
        client.handle_receive(&err_vers, Arrival::default(), now),
        Received::Nothing(Some(DropReason::UnknownXid(1))),
        "an error naming a probe not yet sent answers no call in flight"
    );
    let Some(CallStep::Transmit { transmit, .. }) = client.take_step(1) else { panic!("the probe is still the step") };
    assert_eq!((transmit.probe, transmit.version), (true, Version::TWO), "no fallback yet");
    client.handle_sent(CallForm::Short, 1);
    client.handle_receive(&err_vers, Arrival::default(), now);
    let Some(CallStep::Transmit { transmit, .. }) = client.take_step(1) else { panic!("sent again") };
    assert_eq!((transmit.probe, transmit.version), (false, Version::ONE), "fallen back to Version One");
}
