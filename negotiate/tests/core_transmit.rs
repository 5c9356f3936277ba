//! The connection core's own transmissions (`Connection::poll_transmit`,
//! `Connection::handle_completion`), driven by bytes only: what it answers, in which order,
//! one Send out at a time, and what it lets go.

use std::time::{Duration, Instant};

use negotiate::client::ClientConfig;
use negotiate::connection::{Arrival, CallStep, Connection, Received, TransmissionKind, ANSWERS_HELD_MOST};
use negotiate::datapath::{DataPathError, Ended};
use negotiate::responder::ResponderConfig;
use rpcrdma_v1::marshal_call::CallForm;
use rpcrdma_v1::Version;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// A Version One server's connection.
fn v1_server(now: Instant) -> Connection<()> {
    let cfg = ResponderConfig::default().versions((Version::ONE, Version::ONE));
    Connection::server(cfg, Duration::from_secs(60), &[], None, now)
}

/// The Version Two probe (RDMA_MSG, no chunks) of XID `xid`: a Version One responder answers
/// it ERR_VERS (RFC 8166 section 4.5; draft-cel-00 section 5.2).
fn probe(xid: u32) -> Vec<u8> {
    words(&[xid, 2, 32, 0, 0, 0, 0, xid, 0])
}

/// RFC 8166 section 4.5: each message refused gets its own RDMA_ERROR, in the order the
/// messages came, one Send out at a time.
#[test]
fn rfc8166_4_5_each_refused_message_is_answered_in_order_one_send_at_a_time() {
    let now = Instant::now();
    let mut s = v1_server(now);
    for xid in 1..=3 {
        assert_eq!(s.handle_receive(&probe(xid), Arrival::default(), now), Received::Answered);
    }
    for xid in 1..=3 {
        let t = s.poll_transmit().expect("an answer");
        assert_eq!(t.kind, TransmissionKind::Error { xid, code: 1 });
        assert!(!t.draft07);
        // The probe's XID and version, RDMA_ERROR (4), ERR_VERS (1), the range One to One.
        assert_eq!(t.bytes, words(&[xid, 2, 32, 4, 1, 1, 1]));
        assert_eq!(s.poll_transmit(), None, "the Send of {xid} has not ended");
        s.handle_completion(t.id, Ok(()));
    }
    assert_eq!(s.poll_transmit(), None);
    assert_eq!(s.transmissions_dropped(), 0);
}

/// A peer that sends faster than the answers' Sends complete (one that never reads) sizes
/// nothing: at most `ANSWERS_HELD_MOST` answers wait, the rest are let go and counted.
#[test]
fn a_peer_outpacing_its_answers_holds_at_most_answers_held_most() {
    let now = Instant::now();
    let mut s = v1_server(now);
    let out = {
        assert_eq!(s.handle_receive(&probe(1), Arrival::default(), now), Received::Answered);
        s.poll_transmit().expect("the first answer")
    };
    let sent = 1000;
    for xid in 2..=sent {
        assert_eq!(s.handle_receive(&probe(xid), Arrival::default(), now), Received::Answered);
    }
    let held = ANSWERS_HELD_MOST as u64;
    assert_eq!(s.transmissions_dropped(), u64::from(sent) - 1 - held);
    s.handle_completion(out.id, Ok(()));
    // The ones held are the first after the one out, in order.
    for xid in 2..2 + ANSWERS_HELD_MOST as u32 {
        let t = s.poll_transmit().expect("an answer held");
        assert_eq!(t.kind, TransmissionKind::Error { xid, code: 1 });
        s.handle_completion(t.id, Ok(()));
    }
    assert_eq!(s.poll_transmit(), None);
}

/// RFC 8166 section 4.5.4: a Send that failed means the transport connection failed; what the
/// core held for it is let go (counted), and the connection can still answer afterwards on
/// the driver's word (a server's driver closes it).
#[test]
fn rfc8166_4_5_4_a_failed_send_lets_go_of_what_waited_behind_it() {
    let now = Instant::now();
    let mut s = v1_server(now);
    for xid in 1..=4 {
        s.handle_receive(&probe(xid), Arrival::default(), now);
    }
    let t = s.poll_transmit().expect("an answer");
    // A completion that names another transmission changes nothing.
    s.handle_completion(t.id + 100, Ok(()));
    assert_eq!(s.poll_transmit(), None, "still out");
    s.handle_completion(t.id, Err(&DataPathError::Timeout { wr_id: 1, timeout: Duration::from_secs(1) }));
    assert_eq!(s.transmissions_dropped(), 3);
    assert_eq!(s.poll_transmit(), None);
}

/// On a client's connection, what the core held for a transport connection does not go on
/// the next one: an answer names a message of the connection it came on.
#[test]
fn a_clients_answers_do_not_outlive_their_transport_connection() {
    let now = Instant::now();
    let mut c: Connection<u32> = Connection::client(ClientConfig::default(), "peer");
    c.start_call(7, now).unwrap();
    c.poll_event();
    c.handle_connected(1, None, &[], now);
    let Some(CallStep::Transmit { .. }) = c.take_step(7) else { panic!("no transmission") };
    c.handle_sent(CallForm::Short, 1);
    // Settled on Version Two by the reply to its probe.
    let reply = words(&[7, 2, 32, 0, 0, 0, 0, 7, 1]);
    assert_eq!(c.handle_receive(&reply, Arrival::default(), now), Received::Reply { xid: 7 });
    c.deliver(7, reply, None);
    c.take_step(7);
    c.finish_call(7);
    assert_eq!(c.version(), Some(Version::TWO));
    // The server's RDMA_OPTIONAL of a type no extension here takes (draft-cel-00 section
    // 3.1): refused with RDMA_ERR_INVAL_OPTION (3), twice, the second behind the first.
    let option = |xid: u32| {
        let mut m = vec![0u8; 64];
        let n = rpcrdma_v2::options::encode_optional(xid, 1, 0x77, b"?", &mut m).unwrap();
        m.truncate(n);
        m
    };
    assert_eq!(c.handle_receive(&option(0x4000_0001), Arrival::default(), now), Received::Answered);
    assert_eq!(c.handle_receive(&option(0x4000_0002), Arrival::default(), now), Received::Answered);
    let t = c.poll_transmit().expect("the refusal");
    assert_eq!(t.kind, TransmissionKind::Error { xid: 0x4000_0001, code: 3 });
    // The connection ends with the first refusal out and the second held.
    c.handle_link_down(Ended::Closed("gone".into()), now);
    c.handle_completion(t.id, Err(&DataPathError::Timeout { wr_id: 1, timeout: Duration::from_secs(1) }));
    assert_eq!(c.poll_transmit(), None, "the refusal held was for the connection that ended");
    // A new connection starts with nothing to send of its own.
    c.handle_connected(2, None, &[], now);
    assert_eq!(c.poll_transmit(), None);
}
