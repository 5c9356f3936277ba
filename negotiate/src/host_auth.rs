//! The host authentication material a side states on a draft-ietf-nfsv4-rpcrdma-version-two-07
//! connection (RDMA2_PROPID_HOSTAUTH, section 5.2.6), and its bound.
//!
//! The draft defines only the carrier: an opaque in the sender's RDMA2_CONNPROP_FINAL, whose
//! meaning and judgement are local policy ("When this property is not present, the peer(s)
//! remain unauthenticated. Local security policy on each peer determines whether the
//! connection is permitted to continue"; its section 11.4 is unfinished). So this crate
//! carries it both ways and hands the peer's to the application, which decides:
//! [`ClientConfig::host_auth`](crate::client::ClientConfig::host_auth) and
//! [`ServerConfig::host_auth`](crate::server::ServerConfig::host_auth) state ours;
//! [`Client::draft07_peer_properties`](crate::client::Client::draft07_peer_properties) and
//! [`Peer::draft07_properties`](crate::server::Peer::draft07_properties) give theirs.

/// The longest host authentication message a side states: this implementation states its
/// properties in one RDMA2_CONNPROP_FINAL (it sends no CONNPROP_MIDDLE), which must fit the
/// smallest Receive a peer may post (1024 bytes, section 4.3) beside every other property of
/// section 5.2 (five of one word each, 12 bytes with their id and length), after the 16-byte
/// prefix and the property count, with its own id and length and the length word of the
/// `opaque<>` its value is.
pub const MAX_HOST_AUTH: usize = rpcrdma_v1::marshal_call::InlineThresholds::MINIMUM - (16 + 4) - 5 * 12 - 8 - 4;

/// Host authentication material to state ([`MAX_HOST_AUTH`] bytes at most).
///
/// ```
/// use negotiate::host_auth::{HostAuth, MAX_HOST_AUTH};
/// let ours = HostAuth::new(b"a token the peer's policy reads".to_vec()).unwrap();
/// assert_eq!(ours.as_bytes(), b"a token the peer's policy reads");
/// let err = HostAuth::new(vec![0; MAX_HOST_AUTH + 1]).unwrap_err();
/// assert_eq!(err.to_string(), format!("host authentication of {} bytes: at most {MAX_HOST_AUTH} fit one RDMA2_CONNPROP_FINAL", MAX_HOST_AUTH + 1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAuth(Vec<u8>);

/// A host authentication message longer than [`MAX_HOST_AUTH`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("host authentication of {len} bytes: at most {MAX_HOST_AUTH} fit one RDMA2_CONNPROP_FINAL")]
pub struct HostAuthTooLong {
    /// Its length.
    pub len: usize,
}

impl HostAuth {
    /// `message`, if it is [`MAX_HOST_AUTH`] bytes or fewer.
    pub fn new(message: Vec<u8>) -> Result<HostAuth, HostAuthTooLong> {
        if message.len() > MAX_HOST_AUTH {
            return Err(HostAuthTooLong { len: message.len() });
        }
        Ok(HostAuth(message))
    }

    /// The material.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpcrdma_v2::draft07::properties::{Properties, ReverseDirection};

    /// Every property a side of this crate may state, with the longest host authentication,
    /// fits one RDMA2_CONNPROP_FINAL within 1024 bytes: the bound is not an estimate.
    #[test]
    fn the_longest_host_auth_fits_one_connprop_final_beside_everything_else() {
        let all = Properties {
            max_send_size: 8192,
            receive_buffer_size: 8192,
            max_segment_size: 2 << 20,
            max_segment_count: 32,
            reverse_direction: ReverseDirection::General,
            host_auth: Some(vec![7; MAX_HOST_AUTH]),
            others: Vec::new(),
        };
        let messages = all.connprop_messages(0, 0, 1024).expect("it fits");
        assert_eq!(messages.len(), 1, "one RDMA2_CONNPROP_FINAL");
        assert!(messages[0].len() <= 1024);
        // And it is the bound: a word more does not fit.
        let over = Properties { host_auth: Some(vec![7; MAX_HOST_AUTH + 4]), ..all };
        assert_eq!(over.connprop_messages(0, 0, 1024).map(|m| m.len()), Some(2));
    }
}
