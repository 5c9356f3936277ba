//! What a requester remembers about responders across connections: the v2 draft section 5.2
//! lets it assume a responder does not support Version Two when its probe was lost, or when
//! the connection was lost right after an RDMA_ERR_VERS, "to avoid a possible version
//! negotiation loop when re-establishing another connection". What it learned is kept for a
//! configured time ([`RequesterConfig::reprobe_after`](crate::requester::RequesterConfig)):
//! a lost probe may have been bad luck, and a responder may be upgraded, so after that time
//! the next connection probes again (one round trip, and one more RDMA_ERR_VERS at worst).

use rpcrdma_v1::Version;
use rpcrdma_v2::dialect::Dialect;
use std::collections::HashMap;
use std::time::Instant;

/// Why a responder is taken to lack Version Two.
///
/// ```
/// use std::time::Instant;
/// use negotiate::client::ClientConfig;
/// use negotiate::connection::{Arrival, CallStep, Connection};
/// use negotiate::memory::NoV2Reason;
/// use rpcrdma_v1::Version;
/// let now = Instant::now();
/// let mut core: Connection<u32> = Connection::client(ClientConfig::default(), "10.0.2.15:20049");
/// core.start_call(7, now).unwrap();
/// core.handle_connected(1, None, &[], now);
/// let Some(CallStep::Transmit { transmit, .. }) = core.take_step(7) else { panic!() };
/// assert!(transmit.probe);
/// // The responder answers the probe with ERR_VERS, versions 1..=1.
/// let err_vers: Vec<u8> = [7u32, 2, 1, 4, 1, 1, 1].iter().flat_map(|w| w.to_be_bytes()).collect();
/// core.handle_receive(&err_vers, Arrival::default(), now);
/// assert_eq!(core.memory().no_v2("10.0.2.15:20049"), Some(NoV2Reason::ErrVers { high: 1 }));
/// assert_eq!(core.memory().highest_for("10.0.2.15:20049", Version::TWO, now), Version::ONE);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoV2Reason {
    /// The Version Two probe got no answer in time.
    ProbeLost,
    /// The connection was lost after RDMA_ERR_VERS and before any reply in the fallback
    /// version.
    LostAfterErrVers,
    /// The responder answered RDMA_ERR_VERS with this highest supported version.
    ErrVers {
        /// The highest version it reported.
        high: u32,
    },
}

/// Per responder address, the highest version worth proposing. Cheap to keep per requester;
/// share one between requesters (behind a lock) to share what they learned.
///
/// ```
/// use std::time::{Duration, Instant};
/// use negotiate::memory::{NoV2Reason, PeerMemory};
/// use rpcrdma_v1::Version;
/// let now = Instant::now();
/// let mut m = PeerMemory::default();
/// assert_eq!(m.highest_for("10.0.2.15:20049", Version::TWO, now), Version::TWO);
/// m.remember_no_v2("10.0.2.15:20049", NoV2Reason::ProbeLost, now + Duration::from_secs(600));
/// assert_eq!(m.highest_for("10.0.2.15:20049", Version::TWO, now), Version::ONE);
/// assert_eq!(m.highest_for("10.0.2.16:20049", Version::TWO, now), Version::TWO);
/// // Ten minutes on, it is forgotten: the next connection probes again.
/// assert_eq!(m.highest_for("10.0.2.15:20049", Version::TWO, now + Duration::from_secs(600)), Version::TWO);
/// ```
#[derive(Debug, Clone, Default)]
pub struct PeerMemory {
    /// Per address: why, and until when it holds.
    no_v2: HashMap<String, (NoV2Reason, Instant)>,
    /// Per address: the Version Two dialect it answered in, and until when that holds.
    dialects: HashMap<String, (Dialect, Instant)>,
}

impl PeerMemory {
    /// Records that the responder at `addr` does not support Version Two, until `until`.
    pub fn remember_no_v2(&mut self, addr: &str, why: NoV2Reason, until: Instant) {
        self.no_v2.insert(addr.to_string(), (why, until));
    }

    /// What was recorded for `addr`, if anything, whether or not it has expired.
    pub fn no_v2(&self, addr: &str) -> Option<NoV2Reason> {
        self.no_v2.get(addr).map(|&(why, _)| why)
    }

    /// Until when what was recorded for `addr` holds.
    pub fn remembered_until(&self, addr: &str) -> Option<Instant> {
        self.no_v2.get(addr).map(|&(_, until)| until)
    }

    /// The highest version to propose to `addr` at `now`, given our own highest `ours`: what
    /// was recorded caps it until it expires.
    pub fn highest_for(&self, addr: &str, ours: Version, now: Instant) -> Version {
        match self.no_v2.get(addr) {
            Some(&(_, until)) if now >= until => ours,
            None => ours,
            Some((NoV2Reason::ErrVers { high }, _)) => ours.min(Version::from_wire(*high)),
            Some(_) => ours.min(Version::ONE),
        }
    }

    /// Records that the responder at `addr` settled Version Two in dialect `d`, until `until`:
    /// the next connection's first message uses it, if the requester speaks it (docs/design.md,
    /// "Version Two's two dialects": a requester that speaks both tries its preferred one once
    /// per responder, not once per connection).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use negotiate::memory::PeerMemory;
    /// use rpcrdma_v2::dialect::Dialect;
    /// let now = Instant::now();
    /// let mut m = PeerMemory::default();
    /// m.remember_dialect("a", Dialect::Cel00, now + Duration::from_secs(600));
    /// assert_eq!(m.dialect_for("a", now), Some(Dialect::Cel00));
    /// assert_eq!(m.dialect_for("a", now + Duration::from_secs(600)), None);
    /// ```
    pub fn remember_dialect(&mut self, addr: &str, d: Dialect, until: Instant) {
        self.dialects.insert(addr.to_string(), (d, until));
    }

    /// The dialect `addr` was last seen to settle in, while that holds at `now`.
    pub fn dialect_for(&self, addr: &str, now: Instant) -> Option<Dialect> {
        self.dialects.get(addr).filter(|&&(_, until)| now < until).map(|&(d, _)| d)
    }

    /// Forgets `addr` (an administrator knows it was upgraded).
    pub fn forget(&mut self, addr: &str) {
        self.no_v2.remove(addr);
        self.dialects.remove(addr);
    }
}
