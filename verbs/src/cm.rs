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
    /// The host as a bound per host counts it, its IPv6 addresses counted by their first
    /// `ipv6_prefix` bits (128: each address a host of its own; 64: a whole /64, which is
    /// usually a link's prefix, RFC 4291 section 2.5.1, so every host on one link together):
    /// a setting, because a host may take many addresses of its link's prefix (RFC 8981)
    /// while on one link many hosts share it. Whatever the prefix, an IPv4 address carried in
    /// IPv6 counts as that IPv4 host: mapped (`::ffff:a.b.c.d`), 6to4 (`2002:AABB:CCDD::/48`,
    /// RFC 3056: the whole /48 is the IPv4 host's) and the well-known translation prefix
    /// (`64:ff9b::/96`, RFC 6052; not other translation prefixes, nor Teredo). A link-local
    /// address has no scope here: below 128 bits every `fe80::/10` peer is one host, and at
    /// 128 the same address on two links is one.
    ///
    /// ```
    /// use rpcrdma_verbs::PeerHost;
    /// let ip = |s: &str| PeerHost::Ip(s.parse().unwrap());
    /// assert_ne!(ip("2001:db8:1:2::5").for_limits(128), ip("2001:db8:1:2::9").for_limits(128));
    /// assert_eq!(ip("2001:db8:1:2::5").for_limits(64), ip("2001:db8:1:2:ffff::9").for_limits(64));
    /// assert_ne!(ip("2001:db8:1:2::5").for_limits(64), ip("2001:db8:1:3::5").for_limits(64));
    /// assert_eq!(ip("2002:c000:0207:1::5").for_limits(128), ip("192.0.2.7"));
    /// assert_eq!(ip("64:ff9b::c000:207").for_limits(128), ip("192.0.2.7"));
    /// assert_eq!(ip("::ffff:192.0.2.7").for_limits(128), ip("192.0.2.7"));
    /// ```
    pub fn for_limits(&self, ipv6_prefix: u8) -> PeerHost {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        match self {
            PeerHost::Ip(IpAddr::V6(a)) => {
                let bits = u128::from(*a);
                let v4 = if let Some(v4) = a.to_ipv4_mapped() {
                    Some(v4)
                } else if bits >> 112 == 0x2002 {
                    Some(Ipv4Addr::from((bits >> 80) as u32))
                } else if bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
                    Some(Ipv4Addr::from(bits as u32))
                } else {
                    None
                };
                match v4 {
                    Some(v4) => PeerHost::Ip(IpAddr::V4(v4)),
                    None => {
                        let keep = u32::from(ipv6_prefix.min(128));
                        let mask = u128::MAX.checked_shl(128 - keep).unwrap_or(0);
                        PeerHost::Ip(IpAddr::V6(Ipv6Addr::from(bits & mask)))
                    }
                }
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
