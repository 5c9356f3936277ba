//! RFC 8797: the eight bytes of RDMA-CM private data with which RPC-over-RDMA
//! Version One peers advertise their inline thresholds and whether they
//! accept remote invalidation.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       Format Identifier                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Version    |  Reserved   |R|   Send Size   | Receive Size  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Sans-I/O: bytes in, decisions out.
//!
//! ```
//! use cm_private_data::{negotiate, Flags, PrivateData};
//! // What the Linux 6.1 client sends (docs/design.md), padded by the CM to 56 bytes.
//! let mut received = [0u8; 56];
//! received[..8].copy_from_slice(&[0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3]);
//! let client = PrivateData::from_received(&received);
//! assert_eq!((client.send_size(), client.receive_size()), (4096, 4096));
//! assert!(client.flags().contains(Flags::REMOTE_INVALIDATE));
//!
//! let server = PrivateData::new(Flags::empty(), 8192, 2048);
//! let n = negotiate(&client, &server);
//! assert_eq!((n.client_to_server, n.server_to_client), (2048, 4096));
//! assert!(!n.remote_invalidation);
//! ```

#![warn(missing_docs)]

use bitflags::bitflags;

/// The Format Identifier, 0xf6ab0e18 in network byte order (RFC 8797
/// section 4).
pub const FORMAT_IDENTIFIER: u32 = 0xf6ab_0e18;

/// The message format version this crate speaks (RFC 8797 section 4).
pub const VERSION: u8 = 1;

/// Length of a version 1 message.
pub const MESSAGE_LEN: usize = 8;

/// The smallest inline threshold, and the default when a peer sends no
/// valid private data (RFC 8166 section 3.3.3; RFC 8797 section 5.1).
pub const MIN_INLINE: u32 = 1024;

/// The largest inline threshold the Size fields can express: (255 + 1) *
/// 1024 (RFC 8797 section 4.2).
pub const MAX_INLINE: u32 = 256 * 1024;

bitflags! {
    /// The flags byte: seven reserved bits, which senders MUST set to zero
    /// and receivers MUST ignore, and R (RFC 8797 section 4).
    ///
    /// ```
    /// use cm_private_data::{Flags, PrivateData};
    /// let r = PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096);
    /// assert_eq!(r.encode()[5], 0x01);
    /// // Reserved bits a peer sets are ignored on receipt.
    /// let peer = PrivateData::decode(&[0xf6, 0xab, 0x0e, 0x18, 1, 0xff, 0, 0]).unwrap();
    /// assert_eq!(peer.flags(), Flags::REMOTE_INVALIDATE);
    /// assert!(!PrivateData::default().flags().contains(Flags::REMOTE_INVALIDATE));
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Flags: u8 {
        /// R: the sender supports remote invalidation (RFC 8797 section 4.1).
        const REMOTE_INVALIDATE = 0x01;
    }
}

/// One peer's advertisement. Sizes are in bytes, always a multiple of 1024
/// from [`MIN_INLINE`] to [`MAX_INLINE`].
///
/// ```
/// use cm_private_data::{Flags, PrivateData, MAX_INLINE};
/// // Sizes round down to a 1024-byte step and clamp to what the field holds.
/// let ours = PrivateData::new(Flags::REMOTE_INVALIDATE, 5000, 1 << 20);
/// assert_eq!((ours.send_size(), ours.receive_size()), (4096, MAX_INLINE));
///
/// let wire = ours.encode();
/// assert_eq!(wire, [0xf6, 0xab, 0x0e, 0x18, 1, 0x01, 3, 255]);
/// assert_eq!(PrivateData::decode(&wire), Some(ours));
///
/// // Found behind another layer's bytes; absent, the RFC 8797 defaults apply.
/// let mut cm = [0u8; 56];
/// cm[13..21].copy_from_slice(&wire);
/// assert_eq!(PrivateData::find(&cm), Some(ours));
/// assert_eq!(PrivateData::from_received(&[0u8; 56]), PrivateData::default());
/// assert_eq!(PrivateData::default().send_size(), 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrivateData {
    flags: Flags,
    send_size: u32,
    receive_size: u32,
}

impl Default for PrivateData {
    /// What a peer that sent no valid private data is taken to have sent:
    /// R clear and both Size fields zero, i.e. 1024 bytes (RFC 8797 section
    /// 5.1).
    fn default() -> Self {
        PrivateData { flags: Flags::empty(), send_size: MIN_INLINE, receive_size: MIN_INLINE }
    }
}

/// A size in bytes to its Size field: bytes / 1024 - 1 (RFC 8797 section
/// 4.2), for a buffer clamped to what the field can say. Rounding down never
/// advertises more than the buffer holds.
pub fn encode_size(bytes: u32) -> u8 {
    (bytes.clamp(MIN_INLINE, MAX_INLINE) / 1024 - 1) as u8
}

/// A Size field to bytes: (value + 1) * 1024 (RFC 8797 section 4.2).
pub fn decode_size(field: u8) -> u32 {
    (u32::from(field) + 1) * 1024
}

impl PrivateData {
    /// An advertisement of `flags` and the largest Send and Receive this peer
    /// handles, each rounded down to what the Size fields can express
    /// (1024-byte steps from 1024 to 262144). Reserved flag bits are dropped:
    /// senders MUST send them as zero.
    pub fn new(flags: Flags, send_size: u32, receive_size: u32) -> Self {
        PrivateData {
            flags: flags & Flags::all(),
            send_size: decode_size(encode_size(send_size)),
            receive_size: decode_size(encode_size(receive_size)),
        }
    }

    /// The flags (reserved bits never set).
    pub fn flags(&self) -> Flags {
        self.flags
    }

    /// The largest RDMA Send this peer will transmit, in bytes.
    pub fn send_size(&self) -> u32 {
        self.send_size
    }

    /// The largest RDMA Receive this peer has posted, in bytes.
    pub fn receive_size(&self) -> u32 {
        self.receive_size
    }

    /// The eight bytes to put at the start of the CM private data.
    pub fn encode(&self) -> [u8; MESSAGE_LEN] {
        let id = FORMAT_IDENTIFIER.to_be_bytes();
        [
            id[0],
            id[1],
            id[2],
            id[3],
            VERSION,
            self.flags.bits(),
            encode_size(self.send_size),
            encode_size(self.receive_size),
        ]
    }

    /// Decode a message that starts at `bytes[0]`: the Format Identifier,
    /// a Version of 1 and the eight bytes all present, else `None`. The
    /// reserved bits are ignored (RFC 8797 section 4).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let m: &[u8; MESSAGE_LEN] = bytes.get(..MESSAGE_LEN)?.try_into().ok()?;
        if u32::from_be_bytes([m[0], m[1], m[2], m[3]]) != FORMAT_IDENTIFIER || m[4] != VERSION {
            return None;
        }
        Some(PrivateData {
            flags: Flags::from_bits_truncate(m[5]),
            send_size: decode_size(m[6]),
            receive_size: decode_size(m[7]),
        })
    }

    /// Search received private data for a valid message (RFC 8797 section
    /// 5.2): at any offset and any alignment, since other layers (MPAv2,
    /// say) may put theirs first and the CM pads what arrives. An
    /// occurrence of the identifier whose version is not 1, or whose message
    /// would run past the buffer, is skipped and the search goes on.
    pub fn find(received: &[u8]) -> Option<Self> {
        let id = FORMAT_IDENTIFIER.to_be_bytes();
        received.windows(4).enumerate().filter(|(_, w)| *w == id).find_map(|(at, _)| Self::decode(&received[at..]))
    }

    /// What the peer advertised, or the defaults when it sent nothing
    /// valid: RFC 8797 section 5.1 says to behave as if R were clear and
    /// both sizes 1024.
    pub fn from_received(received: &[u8]) -> Self {
        Self::find(received).unwrap_or_default()
    }
}

/// What a connection uses once both sides' private data is known.
///
/// ```
/// use cm_private_data::{negotiate, Flags, PrivateData};
/// let client = PrivateData::new(Flags::REMOTE_INVALIDATE, 8192, 4096);
/// let server = PrivateData::new(Flags::REMOTE_INVALIDATE, 16384, 2048);
/// let n = negotiate(&client, &server);
/// assert_eq!(n.client_to_server, 2048); // client Send capped by server Receive
/// assert_eq!(n.server_to_client, 4096); // server Send capped by client Receive
/// assert!(n.remote_invalidation);
///
/// // A server that sent no private data counts as R clear, 1024 both ways.
/// let n = negotiate(&client, &PrivateData::default());
/// assert_eq!((n.client_to_server, n.server_to_client, n.remote_invalidation), (1024, 1024, false));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// Client-to-server inline threshold: min(client Send, server Receive).
    pub client_to_server: u32,
    /// Server-to-client inline threshold: min(server Send, client Receive).
    pub server_to_client: u32,
    /// Whether the server may reply with Send with Invalidate: both set R
    /// (RFC 8797 section 4.1).
    pub remote_invalidation: bool,
}

/// The one home of RFC 8797 section 4.2's rule: from each side's `(send,
/// receive)` sizes, the client-to-server (call) threshold is min(client
/// Send, server Receive) and the server-to-client (reply) threshold
/// min(server Send, client Receive). Sizes from private data, a version's
/// default or stated transport properties all meet here.
///
/// ```
/// // A Linux client (4096/4096) and a server that receives 1024 and sends 8192.
/// assert_eq!(cm_private_data::inline_thresholds((4096, 4096), (8192, 1024)), (1024, 4096));
/// ```
pub fn inline_thresholds(client: (u32, u32), server: (u32, u32)) -> (u32, u32) {
    (client.0.min(server.1), server.0.min(client.1))
}

/// Both inline thresholds and the remote invalidation decision (RFC 8797
/// sections 4.1 and 4.2). Pass [`PrivateData::default`] for a side that sent
/// none.
pub fn negotiate(client: &PrivateData, server: &PrivateData) -> Negotiated {
    let (client_to_server, server_to_client) =
        inline_thresholds((client.send_size, client.receive_size), (server.send_size, server.receive_size));
    Negotiated {
        client_to_server,
        server_to_client,
        remote_invalidation: client.flags.contains(Flags::REMOTE_INVALIDATE)
            && server.flags.contains(Flags::REMOTE_INVALIDATE),
    }
}

/// The rkey a reply to one transaction may invalidate with Send with
/// Invalidate, given the rkeys of that transaction's chunks (RFC 8797
/// section 4.1: each Send with Invalidate invalidates an STag of that
/// reply's XID only). Like the Linux server, it offers one only when remote
/// invalidation was negotiated and every segment of every chunk uses the
/// same rkey, so no other registration of the requester is touched.
///
/// ```
/// use cm_private_data::{reply_invalidate_rkey, Negotiated};
/// let on = Negotiated { client_to_server: 1024, server_to_client: 1024, remote_invalidation: true };
/// assert_eq!(reply_invalidate_rkey(&on, [7, 7, 7]), Some(7));
/// assert_eq!(reply_invalidate_rkey(&on, [7, 8]), None);
/// assert_eq!(reply_invalidate_rkey(&on, []), None);
/// ```
pub fn reply_invalidate_rkey(n: &Negotiated, rkeys_of_xid: impl IntoIterator<Item = u32>) -> Option<u32> {
    if !n.remote_invalidation {
        return None;
    }
    let mut it = rkeys_of_xid.into_iter();
    let first = it.next()?;
    it.all(|k| k == first).then_some(first)
}
