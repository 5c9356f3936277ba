//! Upper-Layer Bindings (RFC 8166 section 6; draft section 7): which XDR data
//! items of an RPC message are DDP-eligible, how large a reply can be, and
//! the arithmetic of reducing an XDR stream (RFC 8166 sections 3.4.1 and
//! 3.4.4.4).
//!
//! RFC 8166 leaves the interface between an Upper-Layer Protocol and its
//! transport open ("The programming interface by which an Upper-Layer
//! implementation indicates the DDP-eligibility of a data item to the RPC
//! transport is not described by this specification", section 6.1). This
//! crate's interface is the small trait [`UpperLayerBinding`]: it locates
//! DDP-eligible items as [`DdpItem`]s (where the item's data starts in an XDR
//! stream, and its length without roundup padding) and states the sizes a
//! Requester provisions for a reply. [`OpaqueAtUlb`] is a minimal binding,
//! shaped like NFS WRITE and READ, for tests and examples.
//!
//! ```
//! use rpcrdma_v1::ulb::{reduce_payload, DdpItem};
//!
//! // 8 bytes of header, a 5-byte opaque<> (length word at 8, data at 12,
//! // 3 bytes of padding), then 4 bytes of trailer: 24 bytes in all.
//! let item = DdpItem::new(12, 5);
//! let mut ranges = Vec::new();
//! let reduced = reduce_payload(24, &[item], &mut ranges).unwrap();
//! // The length word stays (3.4.4.1); data and padding leave (3.4.4.4).
//! assert_eq!(ranges, [0..12, 20..24]);
//! assert_eq!(reduced, 16);
//! ```

use core::ops::Range;

/// Bytes in one XDR unit (RFC 4506 section 3): every XDR item, and so every
/// Payload stream, is a multiple of this long.
pub const XDR_UNIT: usize = 4;

/// The XDR roundup padding that follows `len` bytes of variable-length data
/// (RFC 8166 section 2.2.4.2; RFC 4506 section 4.10): 0 to 3 zero bytes.
///
/// ```
/// use rpcrdma_v1::ulb::roundup_pad;
/// assert_eq!([0, 1, 2, 3, 4, 5].map(roundup_pad), [0, 3, 2, 1, 0, 3]);
/// ```
#[inline]
pub const fn roundup_pad(len: usize) -> usize {
    (XDR_UNIT - (len % XDR_UNIT)) % XDR_UNIT
}

/// `len` rounded up to a whole number of XDR units (RFC 8166 section
/// 2.2.4.2): the encoded size of `len` bytes of opaque data, padding
/// included.
///
/// ```
/// assert_eq!(rpcrdma_v1::ulb::roundup(4097), 4100);
/// ```
#[inline]
pub const fn roundup(len: usize) -> usize {
    len + roundup_pad(len)
}

/// One DDP-eligible XDR data item in a Payload stream (RFC 8166 sections
/// 3.4.2 and 6.1).
///
/// `offset` is where the item's *data* begins: for a counted array such as
/// `opaque<>` that is just after its length word, which stays in the Payload
/// stream (RFC 8166 section 3.4.4.1); for optional-data (`T *name`) it is
/// just after the "is present" word, which stays too (3.4.4.2), and after
/// the length word as well when `T` is a counted array; absent optional-data
/// (the word is FALSE) is no item at all. It is a multiple of four. `len` is
/// the data's length without XDR roundup padding; the padding (see
/// [`roundup_pad`]) follows the data in an unreduced stream and is removed
/// with it when the item is reduced (section 3.4.4.4).
///
/// In an unreduced stream `offset` is also the Position of the Read chunk
/// that conveys the item (section 3.4.5).
///
/// ```
/// use rpcrdma_v1::ulb::DdpItem;
/// let item = DdpItem::new(100, 4097);
/// assert_eq!((item.end(), item.padded_len(), item.padded_end()), (4197, 4100, 4200));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DdpItem {
    /// Offset of the item's first data byte in the stream.
    pub offset: usize,
    /// Length of the item's data, roundup padding excluded.
    pub len: usize,
}

impl DdpItem {
    /// An item of `len` data bytes starting at `offset`.
    #[inline]
    pub const fn new(offset: usize, len: usize) -> Self {
        DdpItem { offset, len }
    }

    /// End of the data (exclusive), padding excluded.
    #[inline]
    pub const fn end(&self) -> usize {
        self.offset + self.len
    }

    /// The data's length with its roundup padding: what leaves an unreduced
    /// stream when the item is reduced (RFC 8166 section 3.4.4.4).
    #[inline]
    pub const fn padded_len(&self) -> usize {
        roundup(self.len)
    }

    /// End of the data and its padding (exclusive) in an unreduced stream.
    #[inline]
    pub const fn padded_end(&self) -> usize {
        self.offset + self.padded_len()
    }
}

/// Why a list of [`DdpItem`]s cannot describe a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ItemError {
    /// An item's data does not start on an XDR unit (RFC 8166 section 3.4.5:
    /// a Position "MUST be a multiple of four").
    #[error("DDP-eligible item {index} starts at offset {offset}, not a multiple of four")]
    Misaligned {
        /// Index of the item.
        index: usize,
        /// Its offset.
        offset: usize,
    },
    /// An item (with its padding) runs past the end of the stream.
    #[error("DDP-eligible item {index} ends at {padded_end} (padding included), past the stream's {stream_len} bytes")]
    OutOfBounds {
        /// Index of the item.
        index: usize,
        /// Where the item and its padding end.
        padded_end: usize,
        /// The stream's length.
        stream_len: usize,
    },
    /// An item starts before the previous one (with its padding) ends: items
    /// must be listed in stream order and must not overlap (each chunk holds
    /// exactly one XDR data item, RFC 8166 section 3.4.4.4).
    #[error("DDP-eligible item {index} at offset {offset} overlaps or precedes the item before it (which ends at {previous_end})")]
    OutOfOrder {
        /// Index of the item.
        index: usize,
        /// Its offset.
        offset: usize,
        /// Where the previous item and its padding end.
        previous_end: usize,
    },
    /// An item or its offset does not fit the 32-bit Length or Position
    /// fields of the transport header (RFC 8166 section 4.1.2).
    #[error("DDP-eligible item {index} (offset {offset}, length {len}) does not fit a 32-bit chunk field")]
    TooLarge {
        /// Index of the item.
        index: usize,
        /// Its offset.
        offset: usize,
        /// Its length.
        len: usize,
    },
}

/// Check that `items` can be reduced out of an unreduced stream of
/// `stream_len` bytes: each starts on an XDR unit, lies inside the stream
/// with its padding, follows the previous item without overlap (RFC 8166
/// sections 3.4.4.4 and 3.4.5), and fits the header's 32-bit fields.
///
/// ```
/// use rpcrdma_v1::ulb::{check_items, DdpItem, ItemError};
/// assert!(check_items(32, &[DdpItem::new(8, 5), DdpItem::new(20, 12)]).is_ok());
/// assert!(matches!(check_items(32, &[DdpItem::new(6, 4)]), Err(ItemError::Misaligned { .. })));
/// assert!(matches!(check_items(16, &[DdpItem::new(12, 5)]), Err(ItemError::OutOfBounds { .. })));
/// ```
pub fn check_items(stream_len: usize, items: &[DdpItem]) -> Result<(), ItemError> {
    let mut previous_end = 0;
    for (index, item) in items.iter().enumerate() {
        let DdpItem { offset, len } = *item;
        if offset > u32::MAX as usize || len > u32::MAX as usize {
            return Err(ItemError::TooLarge { index, offset, len });
        }
        if offset % XDR_UNIT != 0 {
            return Err(ItemError::Misaligned { index, offset });
        }
        if offset < previous_end {
            return Err(ItemError::OutOfOrder { index, offset, previous_end });
        }
        let padded_end = item.padded_end();
        if padded_end > stream_len {
            return Err(ItemError::OutOfBounds { index, padded_end, stream_len });
        }
        previous_end = padded_end;
    }
    Ok(())
}

/// Reduce a stream (RFC 8166 sections 3.4.1 and 3.4.4.4): replace `out` with
/// the byte ranges of the unreduced stream that remain in the reduced
/// Payload stream, in order, and return their total length. Each item's data
/// *and its roundup padding* are left out, so items that remain begin on
/// four-byte alignment; length words stay (section 3.4.4.1). Empty ranges
/// are not listed. Items of length zero remove nothing.
///
/// The ranges let a caller gather the reduced stream into a Send buffer
/// straight from the message, without copying it first.
///
/// ```
/// use rpcrdma_v1::ulb::{reduce_payload, DdpItem};
/// let mut ranges = Vec::new();
/// let n = reduce_payload(40, &[DdpItem::new(8, 8), DdpItem::new(20, 1)], &mut ranges).unwrap();
/// assert_eq!((ranges, n), (vec![0..8, 16..20, 24..40], 28));
/// ```
pub fn reduce_payload(stream_len: usize, items: &[DdpItem], out: &mut Vec<Range<usize>>) -> Result<usize, ItemError> {
    check_items(stream_len, items)?;
    out.clear();
    let mut at = 0;
    let mut total = 0;
    for item in items {
        if item.offset > at {
            out.push(at..item.offset);
            total += item.offset - at;
        }
        at = item.padded_end();
    }
    if stream_len > at {
        out.push(at..stream_len);
        total += stream_len - at;
    }
    Ok(total)
}

/// The length of the reduced stream [`reduce_payload`] would produce,
/// without listing its ranges. `items` must pass [`check_items`].
///
/// ```
/// use rpcrdma_v1::ulb::{reduced_len, DdpItem};
/// assert_eq!(reduced_len(40, &[DdpItem::new(8, 8), DdpItem::new(20, 1)]), 28);
/// ```
pub fn reduced_len(stream_len: usize, items: &[DdpItem]) -> usize {
    stream_len - items.iter().map(DdpItem::padded_len).sum::<usize>()
}

/// What an Upper-Layer Binding tells the transport (RFC 8166 section 6):
/// which data items are DDP-eligible (6.1) and how large a reply can be
/// (6.2). Implemented by the ULP (NFS, or a test); the transport calls it
/// with RPC messages as bytes, so the binding parses only as much XDR as it
/// needs to locate its items.
///
/// Methods append to caller-provided vectors so a transport can reuse them
/// from message to message.
///
/// See [`OpaqueAtUlb`] for a minimal implementation.
///
/// ```
/// use rpcrdma_v1::ulb::{reduced_len, DdpItem, UpperLayerBinding};
/// /// A program whose arguments are a 4-byte tag, then `opaque data<>`, and whose replies
/// /// (at most 32 bytes) carry nothing DDP-eligible. It is called with AUTH_NONE only, so
/// /// the arguments start 40 bytes into the call, after its ONC RPC header.
/// struct Blobs;
/// impl UpperLayerBinding for Blobs {
///     fn call_ddp_items(&self, call: &[u8], out: &mut Vec<DdpItem>) {
///         if let Some(len) = call.get(44..48) {
///             out.push(DdpItem::new(48, u32::from_be_bytes(len.try_into().unwrap()) as usize));
///         }
///     }
///     fn reply_ddp_maxima(&self, _call: &[u8], _out: &mut Vec<usize>) {}
///     fn max_reply_size(&self, _call: &[u8]) -> usize {
///         32
///     }
///     fn reply_ddp_items(&self, _: &[u8], _: &[u8], _: usize, _: &mut Vec<DdpItem>) {}
/// }
///
/// // XID 1, CALL, RPC version 2, program 0x20000000 version 1 procedure 1, AUTH_NONE
/// // credential and verifier (RFC 5531); then the tag and the opaque's length, 1000.
/// let header = [1, 0, 2, 0x2000_0000, 1, 1, 0, 0, 0, 0, 0xcafe, 1000];
/// let mut call: Vec<u8> = header.iter().flat_map(|w: &u32| w.to_be_bytes()).collect();
/// call.resize(48 + 1000, 0);
/// let mut items = Vec::new();
/// Blobs.call_ddp_items(&call, &mut items);
/// assert_eq!(items, [DdpItem::new(48, 1000)]);
/// // Moved into a Read chunk, the data leaves the RPC header, the tag and the length word.
/// assert_eq!(reduced_len(call.len(), &items), 48);
/// ```
pub trait UpperLayerBinding {
    /// The DDP-eligible argument items of an unreduced RPC Call message
    /// `call`, in stream order (RFC 8166 section 6.1). Append them to `out`;
    /// offsets are into `call`.
    ///
    /// A Requester reduces these items into Read chunks; a Responder checks
    /// a received call's Read chunks against them
    /// ([`crate::reassemble::check_call_ddp_eligibility`], section 6.1.1).
    fn call_ddp_items(&self, call: &[u8], out: &mut Vec<DdpItem>);

    /// For the call `call`, the largest length (roundup padding excluded) of
    /// each DDP-eligible result its reply may carry, in reply stream order:
    /// the Requester provisions one Write chunk of that size for each
    /// (RFC 8166 sections 3.4.6 and 3.4.6.2). Append them to `out`; append
    /// nothing when the reply has no DDP-eligible results.
    fn reply_ddp_maxima(&self, call: &[u8], out: &mut Vec<usize>);

    /// For the call `call`, the largest reply Payload stream with every
    /// result listed by [`UpperLayerBinding::reply_ddp_maxima`] reduced
    /// (RFC 8166 section 6.2), in bytes. Reduction leaves only a result's
    /// length word in the stream, so this bound does not depend on the
    /// results' sizes; the unreduced bound is this plus the padded maxima.
    fn max_reply_size(&self, call: &[u8]) -> usize;

    /// The DDP-eligible result items of the RPC Reply stream `reply` to the
    /// RPC Call message `call`, in stream order, appended to `out`.
    ///
    /// Which results are DDP-eligible is a property of the procedure (RFC
    /// 8166 section 6.1: the Upper-Layer Binding "specifies" them per
    /// procedure), and an RPC reply does not name its procedure: the call
    /// does (RFC 5531 section 9), so a binding for a program with several
    /// procedures reads the procedure from `call` before it parses `reply`.
    /// A Responder passes the call it served (when serving it failed, as much
    /// of the call as it received: a binding must cope with a short `call`
    /// by reporting nothing); a Requester passes the call it sent.
    ///
    /// The first `reduced` items found are absent from `reply` (their data
    /// went into Write chunks, RFC 8166 section 3.4.6): for those, report
    /// where the data belongs in `reply` (just after the length word, which
    /// stayed) and the length the length word declares, and continue parsing
    /// right there. A Responder passes `reduced == 0` for the reply it is
    /// about to marshal; a Requester passes the number of Write chunks it
    /// provided, to locate the results in the reduced reply it received
    /// (section 3.4.6.1: "at the known XDR position of the associated
    /// DDP-eligible result data item").
    fn reply_ddp_items(&self, call: &[u8], reply: &[u8], reduced: usize, out: &mut Vec<DdpItem>);
}

/// A minimal [`UpperLayerBinding`], shaped like NFS WRITE and READ: the call
/// carries at most one DDP-eligible `opaque<>` whose length word is at a
/// fixed offset, and so does the reply. For tests, examples and benchmarks;
/// a real ULB parses its protocol's XDR to find the items.
///
/// Offsets count from the start of the RPC message, its ONC RPC header
/// (RFC 5531) included, since the binding sees whole messages: the length
/// word of an AUTH_NONE call's first argument is at 40, and that of an
/// accepted SUCCESS reply's first result (AUTH_NONE verifier) at 24. The
/// example below writes those ONC RPC headers out word by word (the `negotiate`
/// crate's `onc` module builds them for you).
///
/// ```
/// use rpcrdma_v1::ulb::{DdpItem, OpaqueAtUlb, UpperLayerBinding};
///
/// fn words(w: &[u32]) -> Vec<u8> {
///     w.iter().flat_map(|w| w.to_be_bytes()).collect()
/// }
/// let ulb = OpaqueAtUlb { call_opaque: Some(40), reply_opaque: Some(24), max_result: 8192, max_reply: 64 };
/// // A call (RFC 5531): XID 7, CALL, RPC version 2, program 100003 version 3 procedure 7,
/// // AUTH_NONE credential and verifier; then its argument, an opaque<> of 5 bytes + 3 padding.
/// let mut call = words(&[7, 0, 2, 100003, 3, 7, 0, 0, 0, 0, 5]);
/// call.extend_from_slice(b"hello\0\0\0");
/// let mut items = Vec::new();
/// ulb.call_ddp_items(&call, &mut items);
/// assert_eq!(items, [DdpItem::new(44, 5)]);
///
/// // Its reply, reduced: XID 7, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS, and the
/// // result's length word (3), which stays; its data went into a Write chunk and belongs
/// // at offset 28.
/// let reply = words(&[7, 1, 0, 0, 0, 0, 3]);
/// items.clear();
/// ulb.reply_ddp_items(&call, &reply, 1, &mut items);
/// assert_eq!(items, [DdpItem::new(28, 3)]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpaqueAtUlb {
    /// Offset of the length word of the call's DDP-eligible `opaque<>`;
    /// `None` when calls carry none.
    pub call_opaque: Option<usize>,
    /// Offset of the length word of the reply's DDP-eligible `opaque<>`;
    /// `None` when replies carry none.
    pub reply_opaque: Option<usize>,
    /// The largest result data (like NFS `rsize`): the Write chunk size.
    pub max_result: usize,
    /// The largest reply with its result reduced.
    pub max_reply: usize,
}

impl OpaqueAtUlb {
    /// The item whose length word is at `at` in `stream`: `None` when the
    /// stream is too short for the word or (unless `reduced`) for the data.
    fn opaque_at(stream: &[u8], at: usize, reduced: bool) -> Option<DdpItem> {
        let word = stream.get(at..at.checked_add(4)?)?;
        let len = u32::from_be_bytes(word.try_into().ok()?) as usize;
        let item = DdpItem::new(at + 4, len);
        (reduced || item.padded_end() <= stream.len()).then_some(item)
    }
}

impl UpperLayerBinding for OpaqueAtUlb {
    fn call_ddp_items(&self, call: &[u8], out: &mut Vec<DdpItem>) {
        out.extend(self.call_opaque.and_then(|at| Self::opaque_at(call, at, false)));
    }

    fn reply_ddp_maxima(&self, _call: &[u8], out: &mut Vec<usize>) {
        if self.reply_opaque.is_some() {
            out.push(self.max_result);
        }
    }

    fn max_reply_size(&self, _call: &[u8]) -> usize {
        self.max_reply
    }

    fn reply_ddp_items(&self, _call: &[u8], reply: &[u8], reduced: usize, out: &mut Vec<DdpItem>) {
        out.extend(self.reply_opaque.and_then(|at| Self::opaque_at(reply, at, reduced > 0)));
    }
}
