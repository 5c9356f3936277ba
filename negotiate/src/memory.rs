//! What a requester remembers about responders across connections: the v2 draft section 5.2
//! lets it assume a responder does not support Version Two when its probe was lost, or when
//! the connection was lost right after an RDMA_ERR_VERS, "to avoid a possible version
//! negotiation loop when re-establishing another connection".

use rpcrdma_v1::Version;
use std::collections::HashMap;

/// Why a responder is taken to lack Version Two.
///
/// ```
/// use std::time::Instant;
/// use negotiate::client::ClientConfig;
/// use negotiate::client_core::{CallStep, ClientCore};
/// use negotiate::memory::NoV2Reason;
/// use rpcrdma_v1::Version;
/// let now = Instant::now();
/// let mut core: ClientCore<u32> = ClientCore::new(ClientConfig::default(), "10.0.2.15:20049");
/// core.start_call(7, now).unwrap();
/// core.handle_connected(1, None, &[], now);
/// let Some(CallStep::Transmit { transmit, .. }) = core.take_step(7) else { panic!() };
/// assert!(transmit.probe);
/// // The responder answers the probe with ERR_VERS, versions 1..=1.
/// let err_vers: Vec<u8> = [7u32, 2, 1, 4, 1, 1, 1].iter().flat_map(|w| w.to_be_bytes()).collect();
/// core.handle_receive(err_vers, None, now);
/// assert_eq!(core.memory().no_v2("10.0.2.15:20049"), Some(NoV2Reason::ErrVers { high: 1 }));
/// assert_eq!(core.memory().highest_for("10.0.2.15:20049", Version::TWO), Version::ONE);
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
/// use negotiate::memory::{NoV2Reason, PeerMemory};
/// use rpcrdma_v1::Version;
/// let mut m = PeerMemory::default();
/// assert_eq!(m.highest_for("10.0.2.15:20049", Version::TWO), Version::TWO);
/// m.remember_no_v2("10.0.2.15:20049", NoV2Reason::ProbeLost);
/// assert_eq!(m.highest_for("10.0.2.15:20049", Version::TWO), Version::ONE);
/// assert_eq!(m.highest_for("10.0.2.16:20049", Version::TWO), Version::TWO);
/// ```
#[derive(Debug, Clone, Default)]
pub struct PeerMemory {
    no_v2: HashMap<String, NoV2Reason>,
}

impl PeerMemory {
    /// Records that the responder at `addr` does not support Version Two.
    pub fn remember_no_v2(&mut self, addr: &str, why: NoV2Reason) {
        self.no_v2.insert(addr.to_string(), why);
    }

    /// What was recorded for `addr`, if anything.
    pub fn no_v2(&self, addr: &str) -> Option<NoV2Reason> {
        self.no_v2.get(addr).copied()
    }

    /// The highest version to propose to `addr`, given our own highest `ours`.
    pub fn highest_for(&self, addr: &str, ours: Version) -> Version {
        match self.no_v2.get(addr) {
            None => ours,
            Some(NoV2Reason::ErrVers { high }) => ours.min(Version::from_wire(*high)),
            Some(_) => ours.min(Version::ONE),
        }
    }

    /// Forgets `addr` (an administrator knows it was upgraded).
    pub fn forget(&mut self, addr: &str) {
        self.no_v2.remove(addr);
    }
}
