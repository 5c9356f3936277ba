//! What each peer host holds, so that one host alone cannot take all a server has: its
//! connections ([`ServerLimits::max_connections_per_host`]: a peer that connects a thousand
//! times and keeps each connection meets this bound, and every other host keeps being
//! served), and the memory its calls in progress hold beyond its share once calls are short
//! of memory ([`ServerLimits::memory_per_host`]: a peer whose calls' Read chunks fill the
//! memory budget would leave every other host's chunked calls refused).
//!
//! A host is an IPv4 address, an IPv6 address or prefix ([`ServerLimits::ipv6_prefix_per_host`]),
//! or an in-process protection domain ([`PeerHost::for_limits`], as the TCP listener's bound
//! on handshakes and the lost replies' share per host count it). A peer the connection manager
//! does not name is not bounded here (only by the server's bounds on the whole).
//!
//! [`ServerLimits::max_connections_per_host`]: crate::limits::ServerLimits::max_connections_per_host
//! [`ServerLimits::memory_per_host`]: crate::limits::ServerLimits::memory_per_host
//! [`ServerLimits::ipv6_prefix_per_host`]: crate::limits::ServerLimits::ipv6_prefix_per_host

use crate::budget::Charge;
use rpcrdma_verbs::PeerHost;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What each host holds of one thing (connections accepted or being accepted, or bytes of
/// call memory). An entry exists only while its count is above 0, so the map holds at most
/// as many entries as there are [`HostSlot`]s.
#[derive(Debug)]
pub(super) struct HostCounts {
    /// How IPv6 hosts are counted ([`PeerHost::for_limits`]).
    ipv6_prefix: u8,
    held: Mutex<HashMap<PeerHost, usize>>,
    /// How many times [`HostCounts::take`] refused.
    refused: AtomicU64,
}

/// What one connection or call holds of its host's count, given back when dropped (when the
/// connection's state is dropped or its accept fails; when the call is answered).
#[derive(Debug)]
pub(super) struct HostSlot {
    counts: Arc<HostCounts>,
    host: PeerHost,
    amount: usize,
}

impl HostCounts {
    /// Nothing held yet; IPv6 hosts counted by their first `ipv6_prefix` bits.
    pub(super) fn new(ipv6_prefix: u8) -> Self {
        HostCounts { ipv6_prefix, held: Mutex::default(), refused: AtomicU64::new(0) }
    }

    /// `amount` more for `host`, unless that would take it past `most`.
    pub(super) fn take(self: &Arc<Self>, host: PeerHost, amount: usize, most: usize) -> Option<HostSlot> {
        self.take_if(host, amount, |after| after <= most)
    }

    /// `amount` more of the call memory for `host`: within its share `most`, or beyond it
    /// while `budget` would not be short with `amount` more (more than half what calls may
    /// have used: [`MemoryBudget::is_short_with`]). So a host alone may use what nobody
    /// else needs, and once calls are short of memory, the hosts beyond their share are the
    /// ones refused: whatever one host does, the others have at least half the call memory.
    pub(super) fn take_memory(
        self: &Arc<Self>,
        host: PeerHost,
        amount: usize,
        most: usize,
        budget: &Charge,
    ) -> Option<HostSlot> {
        self.take_if(host, amount, |after| after <= most || !budget.would_be_short(amount))
    }

    /// `amount` more for `host` if `allowed` says so of what it would hold then (an overflow
    /// never is).
    fn take_if(
        self: &Arc<Self>,
        host: PeerHost,
        amount: usize,
        allowed: impl FnOnce(usize) -> bool,
    ) -> Option<HostSlot> {
        let host = host.for_limits(self.ipv6_prefix);
        let mut counts = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let held = counts.entry(host).or_insert(0);
        if !held.checked_add(amount).is_some_and(allowed) {
            if *held == 0 {
                counts.remove(&host);
            }
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *held += amount;
        Some(HostSlot { counts: self.clone(), host, amount })
    }

    /// How many times [`HostCounts::take`] refused so far.
    pub(super) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// What `host` holds now.
    #[cfg(test)]
    fn held(&self, host: PeerHost) -> usize {
        let counts = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        counts.get(&host.for_limits(self.ipv6_prefix)).copied().unwrap_or(0)
    }
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = counts.get_mut(&self.host) {
            *held -= self.amount;
            if *held == 0 {
                counts.remove(&self.host);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> PeerHost {
        rpcrdma_verbs::PeerAddress::Ip(s.parse().unwrap()).host()
    }

    #[test]
    fn a_host_holds_at_most_its_bound_and_gets_places_back() {
        let counts = Arc::new(HostCounts::new(128));
        let a = ip("192.0.2.1:700");
        let slots: Vec<_> = (0..3).map(|_| counts.take(a, 1, 3).expect("within the bound")).collect();
        assert!(counts.take(ip("192.0.2.1:701"), 1, 3).is_none(), "another port of the same host");
        assert!(counts.take(ip("192.0.2.2:700"), 1, 3).is_some(), "another host");
        drop(slots);
        assert_eq!(counts.held(a), 0);
        assert!(counts.held.lock().unwrap().is_empty(), "nothing kept for hosts holding nothing");
        assert!(counts.take(a, 1, 0).is_none(), "a bound of 0 refuses every connection");
        assert!(counts.held.lock().unwrap().is_empty());
    }

    #[test]
    fn an_ipv6_host_is_its_prefix_and_a_mapped_ipv4_address_its_ipv4_host() {
        let counts = Arc::new(HostCounts::new(64));
        let _one = counts.take(ip("[2001:db8:1:2::1]:700"), 1, 2).unwrap();
        let _two = counts.take(ip("[2001:db8:1:2:ffff::9]:700"), 1, 2).unwrap();
        assert!(counts.take(ip("[2001:db8:1:2:abcd::7]:700"), 1, 2).is_none(), "the same /64");
        assert!(counts.take(ip("[2001:db8:1:3::1]:700"), 1, 2).is_some(), "another /64");
        let _v4 = counts.take(ip("192.0.2.9:1"), 1, 1).unwrap();
        assert!(counts.take(ip("[::ffff:192.0.2.9]:2"), 1, 1).is_none(), "the IPv4 host, mapped");
    }

    #[test]
    fn amounts_add_up_to_the_bound_and_no_further() {
        let counts = Arc::new(HostCounts::new(128));
        let a = ip("192.0.2.1:700");
        let big = counts.take(a, 3 << 20, 4 << 20).expect("3 MiB of 4");
        assert!(counts.take(a, (1 << 20) + 1, 4 << 20).is_none(), "past the bound");
        let small = counts.take(a, 1 << 20, 4 << 20).expect("exactly the bound");
        assert!(counts.take(a, usize::MAX, usize::MAX).is_none(), "an overflow is past any bound");
        drop(big);
        assert_eq!(counts.held(a), 1 << 20);
        drop(small);
        assert!(counts.held.lock().unwrap().is_empty());
    }
}
