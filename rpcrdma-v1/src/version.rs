//! The protocol version a message is sent in or a peer speaks: the `rdma_vers` word (RFC 8166
//! section 4.2; draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2 keeps it in the same place).
//! One type for it across the workspace, so that a version is never confused with the other
//! `u32`s around it (credits, XIDs, procedures). Raw `u32`s remain only where a peer's word is
//! reported as received (an unknown version, the range of an RDMA_ERR_VERS).

use std::fmt;

/// An RPC-over-RDMA version.
///
/// ```
/// use rpcrdma_v1::Version;
/// assert!(Version::ONE < Version::TWO);
/// assert_eq!(Version::TWO.wire(), 2);
/// assert_eq!(Version::from_wire(1), Version::ONE);
/// assert_eq!(Version::TWO.to_string(), "Version Two");
/// assert_eq!(Version::from_wire(7).to_string(), "version 7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(u32);

impl Version {
    /// RPC-over-RDMA Version One (RFC 8166).
    pub const ONE: Version = Version(1);
    /// RPC-over-RDMA Version Two (draft-cel-nfsv4-rpcrdma-version-two-00).
    pub const TWO: Version = Version(2);

    /// The version an `rdma_vers` word names (whether or not anyone speaks it).
    pub const fn from_wire(vers: u32) -> Version {
        Version(vers)
    }

    /// Its `rdma_vers` word.
    pub const fn wire(self) -> u32 {
        self.0
    }
}

impl Default for Version {
    /// Version One: what a message is sent in unless its owner chose another.
    fn default() -> Self {
        Version::ONE
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Version::ONE => f.write_str("Version One"),
            Version::TWO => f.write_str("Version Two"),
            Version(n) => write!(f, "version {n}"),
        }
    }
}
