//! How many connections each peer host holds, so that one host alone cannot take every
//! connection a server serves ([`ServerLimits::max_connections_per_host`]): a peer that
//! connects a thousand times and keeps each connection meets this bound, and every other
//! host keeps being served.
//!
//! A host is what a peer cannot choose freely ([`Host`], which the lost replies' share per
//! host counts by too, `super::lost_replies`): an IPv4 address; an IPv6 /64, the prefix a
//! network usually hands one host, any of whose 2^64 addresses the host may take (RFC 4291
//! section 2.5.1, RFC 8981); an in-process protection domain. A peer the connection manager
//! does not name is not bounded here (only by `max_connections`).
//!
//! [`ServerLimits::max_connections_per_host`]: crate::limits::ServerLimits::max_connections_per_host

use rpcrdma_verbs::{PeerAddress, PeerHost};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// What a bound per host counts one host by (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Host {
    Ip(IpAddr),
    /// Another kind of host a future backend names (`PeerHost` is non-exhaustive): its own.
    Other(PeerHost),
}

impl Host {
    fn of(address: PeerAddress) -> Host {
        Host::bounding(address.host())
    }

    /// The host `host` is counted as: its IPv6 /64, or itself.
    pub(super) fn bounding(host: PeerHost) -> Host {
        match host {
            PeerHost::Ip(IpAddr::V6(a)) => {
                let prefix = u128::from(a) & !((1u128 << 64) - 1);
                Host::Ip(IpAddr::V6(Ipv6Addr::from(prefix)))
            }
            PeerHost::Ip(a) => Host::Ip(a),
            other => Host::Other(other),
        }
    }
}

/// The connections held by each host, accepted or being accepted. An entry exists only
/// while its count is above 0, so the map holds at most as many entries as the server holds
/// connections.
#[derive(Debug, Default)]
pub(super) struct HostCounts(Mutex<HashMap<Host, usize>>);

/// One connection's place in its host's count, given back when dropped: when the
/// connection's state is dropped, or its accept fails.
#[derive(Debug)]
pub(super) struct HostSlot {
    counts: Arc<HostCounts>,
    host: Host,
}

impl HostCounts {
    /// A place for another connection from `address`'s host, unless it holds `most` already.
    pub(super) fn take(self: &Arc<Self>, address: PeerAddress, most: usize) -> Option<HostSlot> {
        let host = Host::of(address);
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let held = counts.entry(host).or_insert(0);
        if *held >= most {
            if *held == 0 {
                counts.remove(&host);
            }
            return None;
        }
        *held += 1;
        Some(HostSlot { counts: self.clone(), host })
    }

    /// The connections `address`'s host holds now.
    #[cfg(test)]
    fn held(&self, address: PeerAddress) -> usize {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts.get(&Host::of(address)).copied().unwrap_or(0)
    }
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = counts.get_mut(&self.host) {
            *held -= 1;
            if *held == 0 {
                counts.remove(&self.host);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> PeerAddress {
        PeerAddress::Ip(s.parse().unwrap())
    }

    #[test]
    fn a_host_holds_at_most_its_bound_and_gets_places_back() {
        let counts = Arc::new(HostCounts::default());
        let a = ip("192.0.2.1:700");
        let slots: Vec<_> = (0..3).map(|_| counts.take(a, 3).expect("within the bound")).collect();
        assert!(counts.take(ip("192.0.2.1:701"), 3).is_none(), "another port of the same host");
        assert!(counts.take(ip("192.0.2.2:700"), 3).is_some(), "another host");
        drop(slots);
        assert_eq!(counts.held(a), 0);
        assert!(counts.0.lock().unwrap().is_empty(), "nothing kept for hosts holding nothing");
        assert!(counts.take(a, 0).is_none(), "a bound of 0 refuses every connection");
        assert!(counts.0.lock().unwrap().is_empty());
    }

    #[test]
    fn an_ipv6_host_is_its_64_bit_prefix_and_a_mapped_ipv4_address_its_ipv4_host() {
        let counts = Arc::new(HostCounts::default());
        let _one = counts.take(ip("[2001:db8:1:2::1]:700"), 2).unwrap();
        let _two = counts.take(ip("[2001:db8:1:2:ffff::9]:700"), 2).unwrap();
        assert!(counts.take(ip("[2001:db8:1:2:abcd::7]:700"), 2).is_none(), "the same /64");
        assert!(counts.take(ip("[2001:db8:1:3::1]:700"), 2).is_some(), "another /64");
        let _v4 = counts.take(ip("192.0.2.9:1"), 1).unwrap();
        assert!(counts.take(ip("[::ffff:192.0.2.9]:2"), 1).is_none(), "the IPv4 host, mapped");
    }
}
