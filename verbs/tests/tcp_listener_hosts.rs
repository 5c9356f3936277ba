//! The TCP listener's bound per host on handshakes under way
//! ([`ListenOptions::max_pending_per_host`]), from real sockets bound to two loopback
//! addresses: one host cannot take every place and shut other hosts out.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

use rpcrdma_verbs::{Backend, ConnectRequest, Error, ListenOptions, Listener, Tcp, CONNECT_PRIVATE_DATA_MAX};

/// The TCP backend's connect request: magic, version, then the private data.
const REQUEST_HEAD: &[u8; 5] = b"VRBT\x01";

/// A TCP connection to `addr` from the local address `from` (bound before it connects,
/// which std cannot do): another host, as far as the listener can tell, on one machine (all
/// of 127/8 is this machine's loopback).
fn connect_from(from: Ipv4Addr, addr: &str) -> TcpStream {
    let to: SocketAddrV4 = addr.parse().expect("an IPv4 listener");
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    s.bind(&SocketAddrV4::new(from, 0).into()).expect("bound");
    s.connect(&to.into()).expect("connected");
    s.into()
}

/// Whether the listener closed this socket (its read sees the end, or a reset).
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    !matches!(s.read(&mut [0u8; 8]), Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
}

/// One host holds at most `max_pending_per_host` of the places for handshakes under way: its
/// next connection that begins a request is turned away at once, counted, while another
/// host's is heard; a place its host gives up takes its next one.
#[test]
fn one_host_holds_at_most_its_share_of_handshakes_under_way() {
    let opts = ListenOptions::default().max_pending(8).max_pending_per_host(2);
    let l = Tcp.listen_with("127.0.0.1:0", &opts).unwrap();
    let addr = l.local_addr();
    let (one, other) = (Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2));
    // A handshake under way: the first bytes of a request, the rest withheld.
    let begin = |from| {
        let mut s = connect_from(from, &addr);
        s.write_all(&REQUEST_HEAD[..3]).unwrap();
        assert!(matches!(l.get_request(Duration::from_millis(50)), Err(Error::Timeout)));
        s
    };
    let mut held = vec![begin(one), begin(one)];
    let mut third = begin(one);
    assert!(closed(&mut third), "the host's third handshake under way is turned away");
    assert_eq!(l.turned_away(), 1);
    assert!(held.iter_mut().all(|s| !closed(s)), "its first two are held");
    let mut theirs = begin(other);
    assert!(!closed(&mut theirs), "another host's is heard");
    let mut rest = REQUEST_HEAD[3..].to_vec();
    rest.resize(REQUEST_HEAD.len() - 3 + CONNECT_PRIVATE_DATA_MAX, 0);
    theirs.write_all(&rest).unwrap();
    let req = l.get_request(Duration::from_secs(5)).expect("the other host's request");
    assert_eq!(req.private_data().len(), CONNECT_PRIVATE_DATA_MAX);
    // One of the host's handshakes ends: its place takes the host's next.
    drop(held.pop());
    let until = Instant::now() + Duration::from_secs(5);
    let mut next = loop {
        let mut s = begin(one);
        if !closed(&mut s) {
            break s;
        }
        assert!(Instant::now() < until, "the freed place never took the host's next handshake");
    };
    assert!(!closed(&mut next));
    drop((held, req));
}
