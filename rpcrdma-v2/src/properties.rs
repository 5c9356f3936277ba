//! The transport-properties extension (`specs/rpcrdma2-transport-properties.txt`, "the
//! properties document"): what each peer states about its end of a Version Two connection,
//! carried in the `rdma_optinfo` of an RDMA_OPTIONAL whose `rdma_opttype` is
//! [`RPCRDMA2_OPT_PROPERTIES`]. The types are generated from the document's own `///` XDR
//! ([`crate::xdr::properties`]); this module is the sans-I/O part of its rules: encoding
//! one's properties (section 2.2), decoding a peer's while ignoring what section 2.4 says to
//! ignore, and what the properties change ([`TransportProperties::effect`]).
//!
//! ```
//! use rpcrdma_v2::properties::{Exchange, TransportProperties};
//!
//! let ours = TransportProperties { max_recv_size: Some(8192), remote_invalidation: Some(true), ..Default::default() };
//! let mut optinfo = [0u8; 256];
//! let n = ours.encode(Exchange::Request, &mut optinfo).unwrap();
//! let (kind, theirs) = TransportProperties::decode(&optinfo[..n]).unwrap();
//! assert_eq!((kind, theirs), (Exchange::Request, ours));
//! ```

use rpcrdma_v1::rt::{Error as XdrError, Seq, Xdr};

use crate::xdr::properties::{
    Rpcrdma2Properties, Rpcrdma2Property, RDMA2_PROP_BACKWARD_CREDITS, RDMA2_PROP_MAX_RECV_SIZE,
    RDMA2_PROP_MAX_SEND_SIZE, RDMA2_PROP_REMOTE_INVALIDATION,
};
pub use crate::xdr::properties::{RDMA2_PROPS_MAX, RDMA2_PROPVAL_MAX, RPCRDMA2_OPT_PROPERTIES};

/// Whether an `rpcrdma2_properties` is the requester's request or the responder's reply
/// (`rdma_props_reply`, properties document section 2.2).
///
/// ```
/// assert_ne!(rpcrdma_v2::properties::Exchange::Request, rpcrdma_v2::properties::Exchange::Reply);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// Sent by the requester once the connection settled on Version Two (section 2.1).
    Request,
    /// The responder's answer, same XID (section 2.2).
    Reply,
}

/// The properties one peer states (properties document section 2.4); `None` is a property
/// not stated, which keeps what RFC 8797 private data or the draft's defaults give.
///
/// ```
/// use rpcrdma_v2::properties::TransportProperties;
/// assert_eq!(TransportProperties::default().max_recv_size, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TransportProperties {
    /// `RDMA2_PROP_MAX_SEND_SIZE`: the largest message the sender sends.
    pub max_send_size: Option<u32>,
    /// `RDMA2_PROP_MAX_RECV_SIZE`: the largest message the sender receives (its Receive size).
    pub max_recv_size: Option<u32>,
    /// `RDMA2_PROP_REMOTE_INVALIDATION`: whether the sender, as requester, accepts replies
    /// sent with Send With Invalidate.
    pub remote_invalidation: Option<bool>,
    /// `RDMA2_PROP_BACKWARD_CREDITS`: the most backward-direction calls the sender serves at
    /// once.
    pub backward_credits: Option<u32>,
}

/// Why a received `rdma_optinfo` is not a properties message (section 2.5: a request that
/// does not decode is answered with RDMA_ERR_INVAL_OPTION, a reply is ignored).
///
/// ```
/// use rpcrdma_v2::properties::{Exchange, Malformed, TransportProperties};
/// let props = TransportProperties { max_send_size: Some(8192), ..Default::default() };
/// let mut optinfo = [0u8; 64];
/// let n = props.encode(Exchange::Reply, &mut optinfo).unwrap();
/// // Cut short: not XDR. With a word too many: trailing bytes.
/// assert!(matches!(TransportProperties::decode(&optinfo[..n - 4]), Err(Malformed::Xdr(_))));
/// assert_eq!(
///     TransportProperties::decode(&optinfo[..n + 4]),
///     Err(Malformed::TrailingBytes { end: n, extra: 4 })
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// It does not decode, or breaks a bound of the XDR.
    #[error("not an rpcrdma2_properties (transport-properties section 2.5): {0}")]
    Xdr(#[source] XdrError),
    /// Bytes follow the `rpcrdma2_properties`.
    #[error(
        "{extra} bytes after the rpcrdma2_properties, which ends at byte {end} (transport-properties section 2.5)"
    )]
    TrailingBytes {
        /// Where the properties end.
        end: usize,
        /// How many bytes follow.
        extra: usize,
    },
}

impl TransportProperties {
    /// Encodes these properties as an `rpcrdma2_properties` (the `rdma_optinfo` of an
    /// RDMA_OPTIONAL of type [`RPCRDMA2_OPT_PROPERTIES`]) into `buf`; returns its length.
    /// Properties not stated are left out. Allocates nothing.
    pub fn encode(&self, kind: Exchange, buf: &mut [u8]) -> Result<usize, XdrError> {
        let words: [Option<(u32, [u8; 4])>; 4] = [
            self.max_send_size.map(|v| (RDMA2_PROP_MAX_SEND_SIZE, v.to_be_bytes())),
            self.max_recv_size.map(|v| (RDMA2_PROP_MAX_RECV_SIZE, v.to_be_bytes())),
            self.remote_invalidation.map(|v| (RDMA2_PROP_REMOTE_INVALIDATION, u32::from(v).to_be_bytes())),
            self.backward_credits.map(|v| (RDMA2_PROP_BACKWARD_CREDITS, v.to_be_bytes())),
        ];
        let mut props = [Rpcrdma2Property { rdma_propid: 0, rdma_propval: &[] }; 4];
        let mut n = 0;
        for (id, value) in words.iter().flatten() {
            props[n] = Rpcrdma2Property { rdma_propid: *id, rdma_propval: value };
            n += 1;
        }
        let msg =
            Rpcrdma2Properties { rdma_props_reply: kind == Exchange::Reply, rdma_props: Seq::from_slice(&props[..n]) };
        msg.encode(buf)
    }

    /// Decodes a peer's `rpcrdma2_properties`. Per section 2.4, a property whose identifier
    /// is unknown, or whose value does not decode as its type (wrong length, a boolean other
    /// than 0 or 1), is ignored, and only a property's first occurrence counts. The bounds
    /// of section 2.5 ([`RDMA2_PROPS_MAX`] properties of at most [`RDMA2_PROPVAL_MAX`] bytes)
    /// are the generated decoder's; anything beyond them, or trailing bytes, is [`Malformed`].
    pub fn decode(optinfo: &[u8]) -> Result<(Exchange, TransportProperties), Malformed> {
        let (msg, used) = Rpcrdma2Properties::decode(optinfo).map_err(Malformed::Xdr)?;
        if used != optinfo.len() {
            return Err(Malformed::TrailingBytes { end: used, extra: optinfo.len() - used });
        }
        let kind = if msg.rdma_props_reply { Exchange::Reply } else { Exchange::Request };
        let mut props = TransportProperties::default();
        for p in msg.rdma_props.iter() {
            let word = p.rdma_propval.try_into().ok().map(u32::from_be_bytes);
            match p.rdma_propid {
                RDMA2_PROP_MAX_SEND_SIZE => first(&mut props.max_send_size, word),
                RDMA2_PROP_MAX_RECV_SIZE => first(&mut props.max_recv_size, word),
                RDMA2_PROP_REMOTE_INVALIDATION => {
                    let flag = word.and_then(|w| match w {
                        0 => Some(false),
                        1 => Some(true),
                        _ => None,
                    });
                    first(&mut props.remote_invalidation, flag)
                }
                RDMA2_PROP_BACKWARD_CREDITS => first(&mut props.backward_credits, word),
                _ => {} // unknown: ignored (section 2.4, MUST)
            }
        }
        Ok((kind, props))
    }

    /// What these properties, stated by the peer, change for the messages this side sends
    /// it, starting from `base` (what private data or the defaults gave): section 2.4.
    ///
    /// ```
    /// use rpcrdma_v2::properties::{Effect, TransportProperties};
    /// let base = Effect { send_limit: 4096, remote_invalidation: false, backward_calls: 2 };
    /// let peer = TransportProperties { max_recv_size: Some(16384), remote_invalidation: Some(true), ..Default::default() };
    /// assert_eq!(peer.effect(base), Effect { send_limit: 16384, remote_invalidation: true, backward_calls: 2 });
    /// // A receive size below the draft's 4096 bytes is ignored.
    /// let tiny = TransportProperties { max_recv_size: Some(1024), ..Default::default() };
    /// assert_eq!(tiny.effect(base).send_limit, 4096);
    /// ```
    pub fn effect(&self, base: Effect) -> Effect {
        Effect {
            send_limit: match self.max_recv_size {
                Some(size) if size as usize >= crate::DEFAULT_INLINE_THRESHOLD => size as usize,
                _ => base.send_limit,
            },
            remote_invalidation: self.remote_invalidation.unwrap_or(base.remote_invalidation),
            backward_calls: self.backward_credits.map_or(base.backward_calls, |c| c.min(base.backward_calls)),
        }
    }
}

/// What a peer's properties decide for this side (see [`TransportProperties::effect`]).
///
/// ```
/// use rpcrdma_v2::properties::{Effect, Exchange, TransportProperties};
/// // What private data gave, then the peer's reply, as it arrives in rdma_optinfo.
/// let base = Effect { send_limit: 4096, remote_invalidation: true, backward_calls: 8 };
/// let theirs = TransportProperties { remote_invalidation: Some(false), backward_credits: Some(32), ..Default::default() };
/// let mut optinfo = [0u8; 64];
/// let n = theirs.encode(Exchange::Reply, &mut optinfo).unwrap();
/// let (_, stated) = TransportProperties::decode(&optinfo[..n]).unwrap();
/// let e = stated.effect(base);
/// assert_eq!(e.send_limit, 4096); // not stated: unchanged
/// assert!(!e.remote_invalidation); // the peer said no: MUST NOT
/// assert_eq!(e.backward_calls, 8); // never above this side's own bound
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effect {
    /// The largest message this side may send the peer inline (the peer's receive size).
    pub send_limit: usize,
    /// Whether this side, as responder, may reply with Send With Invalidate (section 2.4: MUST
    /// NOT when the requester stated FALSE).
    pub remote_invalidation: bool,
    /// The most backward-direction calls this side may have outstanding toward the peer:
    /// never more than this side's own bound.
    pub backward_calls: u32,
}

/// Keeps a property's first valid occurrence (section 2.4).
fn first<T>(slot: &mut Option<T>, value: Option<T>) {
    if slot.is_none() {
        *slot = value;
    }
}
