//! Connection-manager vocabulary shared by every backend: private data limits and events.

/// The most private data an active side may send with a connect request: 56 bytes, the
/// InfiniBand CM REQ limit that `rdma_connect` enforces.
pub const CONNECT_PRIVATE_DATA_MAX: usize = 56;

/// The most private data a passive side may send with its accept: 196 bytes, the InfiniBand
/// CM REP limit that `rdma_accept` enforces.
pub const ACCEPT_PRIVATE_DATA_MAX: usize = 196;

/// A connection-manager event on an established connection (`enum rdma_cm_event_type`,
/// the part that concerns a connected queue pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CmEvent {
    /// The connection is gone (`RDMA_CM_EVENT_DISCONNECTED`): either side disconnected, or a
    /// fatal error on either side tore it down. Delivered once to each side.
    Disconnected,
}

/// Checks `data` against `max` and returns it zero-padded to exactly `max` bytes, which is how
/// rdma_cm delivers private data: the receiver sees the CM message's whole field, never the
/// length the sender used.
///
/// ```
/// use rpcrdma_verbs::{pad_private_data, CONNECT_PRIVATE_DATA_MAX};
/// let padded = pad_private_data(&[1, 2, 3], CONNECT_PRIVATE_DATA_MAX).unwrap();
/// assert_eq!(padded.len(), 56);
/// assert_eq!(&padded[..4], &[1, 2, 3, 0]);
/// assert!(pad_private_data(&[0; 57], CONNECT_PRIVATE_DATA_MAX).is_err());
/// ```
pub fn pad_private_data(data: &[u8], max: usize) -> crate::Result<Vec<u8>> {
    if data.len() > max {
        return Err(crate::Error::PrivateDataTooLong { len: data.len(), max });
    }
    let mut padded = vec![0; max];
    padded[..data.len()].copy_from_slice(data);
    Ok(padded)
}

/// Who asks to connect, as the connection manager reports it ([`ConnectRequest::peer`](crate::ConnectRequest::peer)).
///
/// A responder uses it to name a connection in its logs and to know a requester again when
/// it reconnects: [`PeerAddress::host`] is the same for every connection one requester makes
/// (its port changes with each).
///
/// ```
/// use rpcrdma_verbs::PeerAddress;
/// let a = PeerAddress::Ip("192.0.2.7:40001".parse().unwrap());
/// let b = PeerAddress::Ip("192.0.2.7:40002".parse().unwrap());
/// assert_eq!(a.host(), b.host());
/// assert_eq!(a.to_string(), "192.0.2.7:40001");
/// assert_eq!(PeerAddress::InProcess(9).to_string(), "inproc:pd-9");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PeerAddress {
    /// An IP endpoint: the TCP socket's peer, or rdma_cm's destination address
    /// (`rdma_get_peer_addr`).
    Ip(std::net::SocketAddr),
    /// An in-process connector, named by the protection domain it connected with: the same
    /// for every connection made from that protection domain (a `negotiate` client keeps one
    /// across reconnects).
    InProcess(u64),
}

/// The part of a [`PeerAddress`] that stays the same across one requester's connections: the
/// IP address without the port, or the in-process protection domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PeerHost {
    /// An IP address.
    Ip(std::net::IpAddr),
    /// An in-process protection domain.
    InProcess(u64),
}

impl PeerAddress {
    /// The part that stays the same across the requester's connections.
    pub fn host(&self) -> PeerHost {
        match self {
            // (An IPv4 address mapped into IPv6 is the IPv4 host it names.)
            PeerAddress::Ip(a) => PeerHost::Ip(a.ip().to_canonical()),
            PeerAddress::InProcess(pd) => PeerHost::InProcess(*pd),
        }
    }
}

impl PeerHost {
    /// The host as a bound per host counts it: an IPv6 address's /64 prefix, which a network
    /// usually hands one host and any address of which that host may take (RFC 4291 section
    /// 2.5.1, RFC 8981), so that a peer cannot step around the bound by changing address;
    /// otherwise the host itself.
    ///
    /// ```
    /// use rpcrdma_verbs::PeerHost;
    /// let ip = |s: &str| PeerHost::Ip(s.parse().unwrap());
    /// assert_eq!(ip("2001:db8:1:2::5").for_limits(), ip("2001:db8:1:2:ffff::9").for_limits());
    /// assert_ne!(ip("2001:db8:1:2::5").for_limits(), ip("2001:db8:1:3::5").for_limits());
    /// assert_eq!(ip("192.0.2.7").for_limits(), ip("192.0.2.7"));
    /// ```
    pub fn for_limits(&self) -> PeerHost {
        match self {
            PeerHost::Ip(std::net::IpAddr::V6(a)) => {
                let prefix = u128::from(*a) & !((1u128 << 64) - 1);
                PeerHost::Ip(std::net::IpAddr::V6(prefix.into()))
            }
            other => *other,
        }
    }
}

impl std::fmt::Display for PeerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerAddress::Ip(a) => write!(f, "{a}"),
            PeerAddress::InProcess(pd) => write!(f, "inproc:pd-{pd}"),
        }
    }
}
