//! How many connections each peer host holds, so that one host alone cannot take every
//! connection a server serves ([`ServerLimits::max_connections_per_host`]): a peer that
//! connects a thousand times and keeps each connection meets this bound, and every other
//! host keeps being served.
//!
//! A host is what a peer cannot choose freely ([`PeerHost::for_limits`], as the TCP
//! listener's bound on handshakes and the lost replies' share per host count it): an IPv4
//! address; an IPv6 /64, the prefix a network usually hands one host, any of whose 2^64
//! addresses the host may take; an in-process protection domain. A peer the connection manager
//! does not name is not bounded here (only by `max_connections`).
//!
//! [`ServerLimits::max_connections_per_host`]: crate::limits::ServerLimits::max_connections_per_host

use rpcrdma_verbs::{PeerAddress, PeerHost};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The connections held by each host, accepted or being accepted. An entry exists only
/// while its count is above 0, so the map holds at most as many entries as the server holds
/// connections.
#[derive(Debug, Default)]
pub(super) struct HostCounts(Mutex<HashMap<PeerHost, usize>>);

/// One connection's place in its host's count, given back when dropped: when the
/// connection's state is dropped, or its accept fails.
#[derive(Debug)]
pub(super) struct HostSlot {
    counts: Arc<HostCounts>,
    host: PeerHost,
}

impl HostCounts {
    /// A place for another connection from `address`'s host, unless it holds `most` already.
    pub(super) fn take(self: &Arc<Self>, address: PeerAddress, most: usize) -> Option<HostSlot> {
        let host = address.host().for_limits();
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
        counts.get(&address.host().for_limits()).copied().unwrap_or(0)
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
