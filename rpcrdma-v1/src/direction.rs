//! Which way an RPC travels on a bidirectional connection (RFC 8167, the
//! bidirectional convention for Version One; draft-cel-nfsv4-rpcrdma-
//! version-two-00 section 4.2 makes backward-direction operation REQUIRED in
//! Version Two). Both directions share one connection and the same
//! transport header forms, so a receiver tells them apart only by the RPC
//! message's `msg_type` word (RFC 5531 section 9: CALL = 0, REPLY = 1), the
//! word after the XID, and by its own role: a CALL reaching the client is a
//! backward-direction call from the server. One function serves both
//! versions, because it reads only the RPC message.
//!
//! ```
//! use rpcrdma_v1::direction::{classify_rpc, Direction, Role};
//! let call = [0, 0, 0, 7, 0, 0, 0, 0]; // XID 7, msg_type CALL
//! assert_eq!(classify_rpc(&call, Role::Client), Some(Direction::BackwardCall));
//! assert_eq!(classify_rpc(&call, Role::Server), Some(Direction::ForwardCall));
//! ```

use crate::header::{Header, MessageKind};

/// This endpoint's role on the connection: the side that connected (the
/// client, forward-direction Requester) or the side that accepted.
///
/// ```
/// assert_ne!(rpcrdma_v1::direction::Role::Client, rpcrdma_v1::direction::Role::Server);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The connecting side: it sends forward calls and receives backward ones.
    Client,
    /// The accepting side: it receives forward calls and sends backward ones.
    Server,
}

/// What a received RPC message is, relative to this endpoint.
///
/// ```
/// use rpcrdma_v1::direction::Direction;
/// assert!(Direction::BackwardCall.is_backward());
/// assert!(!Direction::ForwardReply.is_backward());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// A client's call, received by the server.
    ForwardCall,
    /// The server's reply to a forward call, received by the client.
    ForwardReply,
    /// A server's call, received by the client (a callback).
    BackwardCall,
    /// The client's reply to a backward call, received by the server.
    BackwardReply,
}

impl Direction {
    /// Whether the message belongs to the backward direction (server to
    /// client calls and their replies).
    ///
    /// ```
    /// assert!(rpcrdma_v1::direction::Direction::BackwardReply.is_backward());
    /// ```
    pub fn is_backward(self) -> bool {
        matches!(self, Direction::BackwardCall | Direction::BackwardReply)
    }
}

/// RPC `msg_type` values (RFC 5531 section 9).
const RPC_CALL: u32 = 0;
const RPC_REPLY: u32 = 1;

/// Classify an RPC message (its first bytes suffice: XID, then `msg_type`)
/// received by an endpoint in `role`. `None` when the message is shorter
/// than two words or `msg_type` is neither CALL nor REPLY.
///
/// ```
/// use rpcrdma_v1::direction::{classify_rpc, Direction, Role};
/// let reply = [0, 0, 0, 7, 0, 0, 0, 1];
/// assert_eq!(classify_rpc(&reply, Role::Server), Some(Direction::BackwardReply));
/// assert_eq!(classify_rpc(&reply[..6], Role::Server), None);
/// ```
pub fn classify_rpc(rpc: &[u8], role: Role) -> Option<Direction> {
    let msg_type = rpc.get(4..8).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))?;
    match (msg_type, role) {
        (RPC_CALL, Role::Server) => Some(Direction::ForwardCall),
        (RPC_CALL, Role::Client) => Some(Direction::BackwardCall),
        (RPC_REPLY, Role::Client) => Some(Direction::ForwardReply),
        (RPC_REPLY, Role::Server) => Some(Direction::BackwardReply),
        _ => None,
    }
}

/// Classify a validated header's inline RPC message ([`classify_rpc`] on
/// its payload). `None` for RDMA_NOMSG, whose RPC message is in a chunk:
/// classify the reassembled message instead.
///
/// ```
/// use rpcrdma_v1::direction::{classify, Direction, Role};
/// use rpcrdma_v1::header::{Header, HeaderLimits};
/// // RDMA_MSG, no chunks, then an RPC CALL with the same XID.
/// let words = [7u32, 1, 32, 0, 0, 0, 0, 7, 0];
/// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
/// let h = Header::parse(&bytes, &HeaderLimits::default()).unwrap();
/// assert_eq!(classify(&h, Role::Client), Some(Direction::BackwardCall));
/// ```
pub fn classify(header: &Header<'_>, role: Role) -> Option<Direction> {
    match header.kind() {
        MessageKind::Msg => classify_rpc(header.payload(), role),
        MessageKind::NoMsg => None,
    }
}
