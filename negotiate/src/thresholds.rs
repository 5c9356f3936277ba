//! The inline thresholds of a connection: RFC 8797 private data when a peer sent it, the
//! protocol version's default when it did not (RFC 8166 section 3.3.3: 1024 bytes; the v2
//! draft section 2.3: 4096 bytes), and the 1024-byte cap on a version probe (draft section 5).

use cm_private_data::{Flags, PrivateData};
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::Version;
use rpcrdma_v2::properties::TransportProperties;

/// Version One's default inline threshold (RFC 8166 section 3.3.3), as private data sizes it.
const V1_DEFAULT: u32 = InlineThresholds::MINIMUM as u32;

/// Version Two's default inline threshold (draft-cel-nfsv4-rpcrdma-version-two-00 section 2.3).
const V2_DEFAULT: u32 = rpcrdma_v2::DEFAULT_INLINE_THRESHOLD as u32;

/// The sizes a [`Client`](crate::client::Client) and a [`Server`](crate::server::Server)
/// advertise by default in their private data, as the Linux client does: Version Two's default
/// inline threshold, which their Receives are sized for.
pub const ADVERTISED_SIZE: u32 = V2_DEFAULT;

/// RFC 8797 section 4.2's rule on each side's `(send, receive)` sizes
/// ([`cm_private_data::inline_thresholds`], its one home).
fn combine(requester: (u32, u32), responder: (u32, u32)) -> InlineThresholds {
    let (call, reply) = cm_private_data::inline_thresholds(requester, responder);
    InlineThresholds { call: call as usize, reply: reply as usize }
}

/// What a receiver of `version` supports when its peer learns nothing else about it.
///
/// ```
/// use rpcrdma_v1::Version;
/// assert_eq!(negotiate::thresholds::default_for(Version::ONE), 1024);
/// assert_eq!(negotiate::thresholds::default_for(Version::TWO), 4096);
/// ```
pub fn default_for(version: Version) -> u32 {
    if version >= Version::TWO {
        V2_DEFAULT
    } else {
        V1_DEFAULT
    }
}

/// The inline threshold a -07 peer's stated Receive size gives whoever sends to it
/// (RDMA2_PROPID_RBSIZ, draft-ietf-nfsv4-rpcrdma-version-two-07 section 5.2.2): bounded below
/// by 1024 (every receiver takes that, section 4.3) and above by RFC 8797's largest, 256 KiB
/// (a Send buffer that size may be allocated for a message that needs it, and the number is
/// the peer's). A requester's call threshold and a responder's reply threshold, both.
///
/// ```
/// use negotiate::thresholds::draft07_receive_threshold;
/// assert_eq!(draft07_receive_threshold(8192), 8192);
/// assert_eq!(draft07_receive_threshold(24), 1024);
/// assert_eq!(draft07_receive_threshold(u32::MAX), 256 << 10);
/// ```
pub fn draft07_receive_threshold(stated: u32) -> u32 {
    stated.clamp(cm_private_data::MIN_INLINE, cm_private_data::MAX_INLINE)
}

/// How a requester's chunks may be cut into segments for the responder it calls: no segment
/// longer than `max_size` bytes, and no more than `max_count` segments in one call's header.
/// On a -07 connection they are the responder's Maximum Segment Size and Count
/// (RDMA2_PROPID_RSSIZ and RDMA2_PROPID_RCSIZ, draft-ietf-nfsv4-rpcrdma-version-two-07
/// sections 5.2.3 and 5.2.4), Table 1's defaults (1 MiB, 16) until it states its own; the
/// other versions have no such property, and no bound ([`SegmentLimits::NONE`]).
///
/// ```
/// use negotiate::thresholds::SegmentLimits;
/// use rpcrdma_v2::draft07::properties::Properties;
/// let table_1 = SegmentLimits::of(&Properties::default());
/// assert_eq!((table_1.max_size, table_1.max_count), (1 << 20, 16));
/// // A chunk of 2.5 MiB takes three segments under Table 1's default size.
/// assert_eq!(table_1.segments_for(5 << 19), 3);
/// assert_eq!(SegmentLimits::NONE.segments_for(5 << 19), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLimits {
    /// The longest segment, in bytes (at least 1).
    pub max_size: u32,
    /// The most segments one call's header may carry.
    pub max_count: u32,
}

impl SegmentLimits {
    /// No bound: one segment per chunk, as many chunks as the call has.
    pub const NONE: SegmentLimits = SegmentLimits { max_size: u32::MAX, max_count: u32::MAX };

    /// What a -07 responder's `stated` properties allow (a stated size of 0 is taken as 1:
    /// no segment is empty of room).
    pub fn of(stated: &rpcrdma_v2::draft07::properties::Properties) -> SegmentLimits {
        SegmentLimits { max_size: stated.max_segment_size.max(1), max_count: stated.max_segment_count }
    }

    /// The segments a chunk of `len` bytes takes (one for an empty chunk; a `max_size` of 0
    /// is taken as 1).
    pub fn segments_for(&self, len: usize) -> usize {
        len.div_ceil(self.max_size.max(1) as usize).max(1)
    }
}

/// What one side says at connect: the RFC 8797 private data it advertises (`None` when it
/// sends none, or sends `foreign` bytes instead: another layer's, or garbage, which count as
/// none, section 5.1), and the bytes that go in the CM message. Client and Server both ask
/// it, so what a side advertises and what it sends never disagree.
///
/// ```
/// use cm_private_data::{Flags, PrivateData};
/// use negotiate::thresholds::what_to_send;
/// let pd = PrivateData::new(Flags::empty(), 4096, 4096);
/// assert_eq!(what_to_send(Some(pd), None), (Some(pd), pd.encode().to_vec()));
/// assert_eq!(what_to_send(Some(pd), Some([7; 8])), (None, vec![7; 8]));
/// assert_eq!(what_to_send(None, None), (None, vec![]));
/// ```
pub fn what_to_send(private_data: Option<PrivateData>, foreign: Option<[u8; 8]>) -> (Option<PrivateData>, Vec<u8>) {
    match foreign {
        Some(bytes) => (None, bytes.to_vec()),
        None => (private_data, private_data.map(|p| p.encode().to_vec()).unwrap_or_default()),
    }
}

/// How large this side's Receives must be: the receive size it advertised, or, without one,
/// what the highest version it speaks lets a peer assume (v2 draft section 2.3, RFC 8166
/// section 3.3.3).
///
/// ```
/// use cm_private_data::{Flags, PrivateData};
/// use negotiate::thresholds::receive_size;
/// use rpcrdma_v1::Version;
/// assert_eq!(receive_size(None, Version::TWO), 4096);
/// assert_eq!(receive_size(Some(PrivateData::new(Flags::empty(), 1024, 8192)), Version::ONE), 8192);
/// ```
pub fn receive_size(advertised: Option<PrivateData>, highest_version: Version) -> usize {
    advertised.map_or(0, |p| p.receive_size()).max(default_for(highest_version)) as usize
}

/// [`receive_size`], and no smaller than the receive size this side states in its transport
/// properties (`specs/rpcrdma2-transport-properties.txt` section 2.4: a peer may send messages
/// of that size inline, so the Receives must hold them).
///
/// ```
/// use rpcrdma_v2::properties::TransportProperties;
/// let big = TransportProperties { max_recv_size: Some(16384), ..Default::default() };
/// assert_eq!(negotiate::thresholds::receive_size_stating(None, rpcrdma_v1::Version::TWO, Some(&big)), 16384);
/// ```
pub fn receive_size_stating(
    advertised: Option<PrivateData>,
    highest_version: Version,
    stated: Option<&TransportProperties>,
) -> usize {
    let stated = stated.and_then(|p| p.max_recv_size).map_or(0, |s| s as usize);
    receive_size(advertised, highest_version).max(stated)
}

/// The transport properties each side stated on a Version Two connection
/// (`specs/rpcrdma2-transport-properties.txt`), refining what [`Advertised`] private data
/// says: `None` for a side that stated none (no exchange, or the responder answered
/// RDMA_ERR_INVAL_OPTION: section 2.3's fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stated {
    /// The requester's properties.
    pub requester: Option<TransportProperties>,
    /// The responder's properties.
    pub responder: Option<TransportProperties>,
}

impl Stated {
    /// The inline thresholds of `version`: [`Advertised::for_version`], with each size a side
    /// stated in its properties in place of what its private data or the default said (section
    /// 2.4; a size under Version Two's 4096 bytes is ignored). Version One never has
    /// properties (section 2.1).
    ///
    /// ```
    /// use negotiate::thresholds::{Advertised, Stated};
    /// use rpcrdma_v1::Version;
    /// use rpcrdma_v2::properties::TransportProperties;
    /// let big = TransportProperties { max_send_size: Some(16384), max_recv_size: Some(16384), ..Default::default() };
    /// let stated = Stated { requester: Some(big), responder: Some(big) };
    /// let t = stated.thresholds(&Advertised::default(), Version::TWO);
    /// assert_eq!((t.call, t.reply), (16384, 16384));
    /// // The responder stated nothing: its default Receive (4096) bounds the calls.
    /// let one_sided = Stated { requester: Some(big), responder: None };
    /// assert_eq!(one_sided.thresholds(&Advertised::default(), Version::TWO).call, 4096);
    /// assert_eq!(stated.thresholds(&Advertised::default(), Version::ONE).call, 1024);
    /// ```
    pub fn thresholds(&self, advertised: &Advertised, version: Version) -> InlineThresholds {
        if version < Version::TWO || (self.requester.is_none() && self.responder.is_none()) {
            return advertised.for_version(version);
        }
        let d = default_for(version);
        let sizes = |pd: Option<PrivateData>, props: Option<TransportProperties>| {
            let (send, recv) = pd.map_or((d, d), |p| (p.send_size(), p.receive_size()));
            let valid = |size: Option<u32>| size.filter(|&s| s >= V2_DEFAULT);
            let props = props.unwrap_or_default();
            (valid(props.max_send_size).unwrap_or(send), valid(props.max_recv_size).unwrap_or(recv))
        };
        combine(sizes(advertised.requester, self.requester), sizes(advertised.responder, self.responder))
    }

    /// Whether replies may use Send with Invalidate: the requester's stated
    /// `RDMA2_PROP_REMOTE_INVALIDATION` in place of its R flag (section 2.4), and the
    /// responder's own R flag as before (RFC 8797 section 4.1).
    ///
    /// ```
    /// use cm_private_data::{Flags, PrivateData};
    /// use negotiate::thresholds::{Advertised, Stated};
    /// use rpcrdma_v2::properties::TransportProperties;
    /// let (plain, r) = (PrivateData::new(Flags::empty(), 4096, 4096), PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096));
    /// let a = Advertised { requester: Some(plain), responder: Some(r) };
    /// assert!(!Stated::default().remote_invalidation(&a));
    /// let yes = TransportProperties { remote_invalidation: Some(true), ..Default::default() };
    /// assert!(Stated { requester: Some(yes), responder: None }.remote_invalidation(&a));
    /// ```
    pub fn remote_invalidation(&self, advertised: &Advertised) -> bool {
        match self.requester.and_then(|p| p.remote_invalidation) {
            Some(accepts) => {
                accepts && advertised.responder.is_some_and(|p| p.flags().contains(Flags::REMOTE_INVALIDATE))
            }
            None => advertised.remote_invalidation(),
        }
    }
}

/// What each side of a connection said at connect time: `None` for a side that sent no valid
/// RFC 8797 private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Advertised {
    /// The requester's (the active side's) private data.
    pub requester: Option<PrivateData>,
    /// The responder's (the passive side's) private data.
    pub responder: Option<PrivateData>,
}

impl Advertised {
    /// Both inline thresholds for calls and replies of `version` (RFC 8797 section 4.2: the call
    /// threshold is min(requester Send, responder Receive), the reply threshold min(responder
    /// Send, requester Receive)). A size a side did not advertise is the version's default: RFC
    /// 8797 section 5.1 says to behave as if an absent side sent 1024 for Version One, and the
    /// v2 draft section 2.3 says to assume 4096 in the absence of any mechanism.
    ///
    /// ```
    /// use cm_private_data::{Flags, PrivateData};
    /// use negotiate::thresholds::Advertised;
    /// use rpcrdma_v1::Version;
    /// let linux_client = PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096);
    /// let a = Advertised { requester: Some(linux_client), responder: None };
    /// assert_eq!(a.for_version(Version::ONE).call, 1024); // the responder said nothing: 1024
    /// assert_eq!(a.for_version(Version::TWO).call, 4096);
    /// let both = Advertised { requester: Some(linux_client), responder: Some(linux_client) };
    /// assert_eq!((both.for_version(Version::ONE).call, both.for_version(Version::ONE).reply), (4096, 4096));
    /// ```
    pub fn for_version(&self, version: Version) -> InlineThresholds {
        let d = default_for(version);
        let sizes = |pd: Option<PrivateData>| pd.map_or((d, d), |p| (p.send_size(), p.receive_size()));
        combine(sizes(self.requester), sizes(self.responder))
    }

    /// The thresholds of a version probe: the call threshold capped at Version One's default,
    /// because "the responder might support only RPC-over-RDMA Version One, this initial
    /// message can be no larger than the Version One default inline threshold of 1024 bytes"
    /// (draft section 5); the reply threshold is what a Version Two responder will assume.
    ///
    /// ```
    /// use negotiate::thresholds::Advertised;
    /// let t = Advertised::default().for_probe();
    /// assert_eq!((t.call, t.reply), (1024, 4096));
    /// ```
    pub fn for_probe(&self) -> InlineThresholds {
        let t = self.for_version(Version::TWO);
        InlineThresholds { call: t.call.min(rpcrdma_v2::PROBE_MAX_LEN), reply: t.reply }
    }

    /// Whether replies may use Send with Invalidate: both sides set the R flag (RFC 8797
    /// section 4.1); a side that sent nothing did not.
    pub fn remote_invalidation(&self) -> bool {
        match (self.requester, self.responder) {
            (Some(rq), Some(rs)) => cm_private_data::negotiate(&rq, &rs).remote_invalidation,
            _ => false,
        }
    }
}
