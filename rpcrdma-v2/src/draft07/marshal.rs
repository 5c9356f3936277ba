//! Writing -07 messages (draft-ietf-nfsv4-rpcrdma-version-two-07 sections 6.3 and 6.4): each
//! header type's prefix and body, then the payload, straight into a Send buffer (nothing
//! allocated), with the chunk lists in Version One's types as [`Header`](super::header::Header)
//! hands them out. [`sends`] cuts an RPC message too long for one Send into MIDDLE parts and
//! a final INLINE (section 4.1), each within the peer's Receive size.
//!
//! ```
//! use rpcrdma_v2::draft07::header::{Header, HeaderType};
//! use rpcrdma_v2::draft07::marshal::{call_inline, NO_CHUNKS};
//! use rpcrdma_v2::HeaderLimits;
//! let rpc = [0, 0, 0, 7, 0, 0, 0, 0];
//! let mut send = [0u8; 64];
//! let n = call_inline(&mut send, 7, 32, 0x55, &NO_CHUNKS, &rpc).unwrap();
//! let h = Header::parse(&send[..n], &HeaderLimits::default()).unwrap();
//! assert_eq!((h.header_type(), h.inv_handle(), h.payload()), (HeaderType::CallInline, Some(0x55), &rpc[..]));
//! ```

use rpcrdma_v1::header::ChunkLists;
use rpcrdma_v1::xdr::{RpcRdmaHeader, XdrReadChunk, XdrWriteChunk};
use xdr_spec_rt::{List, Xdr};

use super::continuation::split;
use super::header::{PREFIX_LEN, VERSION};
use super::xdr::*;

/// Why a message was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MarshalError {
    /// The Send buffer is shorter than the message.
    #[error("the message needs {need} bytes; the buffer holds {have}")]
    BufferTooSmall {
        /// The bytes the message needs.
        need: usize,
        /// The buffer's length.
        have: usize,
    },
    /// A MIDDLE or INLINE part of fewer than 4 bytes: each carries at least the message's
    /// next word (`rdma_rpc_first_word`, sections 6.3.6 to 6.3.10), and a receiver refuses a
    /// shorter one.
    #[error("a message part of {0} bytes: each carries at least 4")]
    PartTooShort(usize),
}

/// Which RPC message a MIDDLE part belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    /// An RPC Call: RDMA2_CALL_MIDDLE.
    Call,
    /// An RPC Reply: RDMA2_REPLY_MIDDLE.
    Reply,
}

/// No chunks: an empty Read list and Write list, no Reply chunk.
pub const NO_CHUNKS: ChunkLists<'static> =
    ChunkLists { reads: List::from_slice(&[]), writes: List::from_slice(&[]), reply: None };

/// The length of a MIDDLE header: the prefix and `rdma_remaining`.
pub const MIDDLE_HEADER_LEN: usize = PREFIX_LEN + 4;

/// Writes `value` at `out[at..]`, returning where it ends.
fn put<'a>(out: &mut [u8], at: usize, value: &impl Xdr<'a>) -> Result<usize, MarshalError> {
    let have = out.len();
    let too_small = || MarshalError::BufferTooSmall { need: at + value.encoded_len(), have };
    let tail = out.get_mut(at..).ok_or_else(too_small)?;
    match value.encode_into(tail) {
        Ok(n) => Ok(at + n),
        Err(_) => Err(too_small()),
    }
}

/// Writes message part `bytes` at `out[at..]`, returning where they end.
fn put_part(out: &mut [u8], at: usize, bytes: &[u8]) -> Result<usize, MarshalError> {
    if bytes.len() < 4 {
        return Err(MarshalError::PartTooShort(bytes.len()));
    }
    let (end, have) = (at + bytes.len(), out.len());
    out.get_mut(at..end).ok_or(MarshalError::BufferTooSmall { need: end, have })?.copy_from_slice(bytes);
    Ok(end)
}

fn prefix(out: &mut [u8], xid: u32, credit: u32, htype: u32) -> Result<usize, MarshalError> {
    put(out, 0, &RpcrdmaCommon { rdma_xid: xid, rdma_vers: VERSION, rdma_credit: credit, rdma_htype: htype })
}

/// A call's three lists after its fixed words, in Version One's `rpcrdma_header` shape
/// (`rdma_reads`, `rdma_provisional_writes`, `rdma_provisional_reply`).
fn call_lists<'a>(chunks: &ChunkLists<'a>) -> RpcRdmaHeader<'a> {
    RpcRdmaHeader { rdma_reads: chunks.reads, rdma_writes: chunks.writes, rdma_reply: chunks.reply }
}

/// RDMA2_CALL_INLINE (6.3.7): `inv_handle`, `chunks` (the Read list must hold no
/// Position-zero chunk), then `part` (the whole RPC call, or its last part after MIDDLE ones).
/// Returns the bytes written.
pub fn call_inline(
    out: &mut [u8],
    xid: u32,
    credit: u32,
    inv_handle: u32,
    chunks: &ChunkLists<'_>,
    part: &[u8],
) -> Result<usize, MarshalError> {
    let at = call_inline_header(out, xid, credit, inv_handle, chunks)?;
    put_part(out, at, part)
}

/// The header of an RDMA2_CALL_INLINE (6.3.7) alone, for a sender that gathers the call's
/// bytes after it itself (at least 4: see [`MarshalError::PartTooShort`]). Returns its
/// length, [`call_inline_header_len`].
///
/// ```
/// use rpcrdma_v2::draft07::marshal::{call_inline_header, NO_CHUNKS};
/// let mut send = [0u8; 64];
/// assert_eq!(call_inline_header(&mut send, 7, 33, 0, &NO_CHUNKS), Ok(32));
/// assert_eq!(&send[12..16], &[0, 0, 0, 10]); // RDMA2_CALL_INLINE
/// ```
pub fn call_inline_header(
    out: &mut [u8],
    xid: u32,
    credit: u32,
    inv_handle: u32,
    chunks: &ChunkLists<'_>,
) -> Result<usize, MarshalError> {
    let at = prefix(out, xid, credit, RDMA2_CALL_INLINE)?;
    let at = put(out, at, &inv_handle)?;
    put(out, at, &call_lists(chunks))
}

/// RDMA2_CALL_EXTERNAL (6.3.5): `inv_handle`, the Call chunk `call` (at position zero), then
/// `chunks`; no payload.
pub fn call_external(
    out: &mut [u8],
    xid: u32,
    credit: u32,
    inv_handle: u32,
    call: List<'_, XdrReadChunk>,
    chunks: &ChunkLists<'_>,
) -> Result<usize, MarshalError> {
    let at = prefix(out, xid, credit, RDMA2_CALL_EXTERNAL)?;
    let at = put(out, at, &inv_handle)?;
    let at = put(out, at, &call)?;
    put(out, at, &call_lists(chunks))
}

/// RDMA2_CALL_MIDDLE (6.3.6) or RDMA2_REPLY_MIDDLE (6.3.9), as `of` says: `remaining` (the
/// message's bytes after this part), then `part`.
///
/// ```
/// use rpcrdma_v2::draft07::header::{Header, HeaderType};
/// use rpcrdma_v2::draft07::marshal::{middle, MarshalError, MessageType};
/// use rpcrdma_v2::HeaderLimits;
/// let mut send = [0u8; 64];
/// let n = middle(&mut send, 7, 32, MessageType::Reply, 100, &[1, 2, 3, 4]).unwrap();
/// let h = Header::parse(&send[..n], &HeaderLimits::default()).unwrap();
/// assert_eq!((h.header_type(), h.remaining()), (HeaderType::ReplyMiddle, Some(100)));
/// assert_eq!(middle(&mut send, 7, 32, MessageType::Call, 100, &[1, 2]), Err(MarshalError::PartTooShort(2)));
/// ```
pub fn middle(
    out: &mut [u8],
    xid: u32,
    credit: u32,
    of: MessageType,
    remaining: u32,
    part: &[u8],
) -> Result<usize, MarshalError> {
    let htype = match of {
        MessageType::Call => RDMA2_CALL_MIDDLE,
        MessageType::Reply => RDMA2_REPLY_MIDDLE,
    };
    let at = prefix(out, xid, credit, htype)?;
    let at = put(out, at, &remaining)?;
    put_part(out, at, part)
}

/// RDMA2_REPLY_INLINE (6.3.10): the Write list `writes`, then `part`.
pub fn reply_inline(
    out: &mut [u8],
    xid: u32,
    credit: u32,
    writes: List<'_, XdrWriteChunk<'_>>,
    part: &[u8],
) -> Result<usize, MarshalError> {
    let at = reply_inline_header(out, xid, credit, writes)?;
    put_part(out, at, part)
}

/// The header of an RDMA2_REPLY_INLINE (6.3.10) alone, for a sender that gathers the reply's
/// bytes after it itself (they must be at least 4: see [`MarshalError::PartTooShort`]).
/// Returns the header's length.
///
/// ```
/// use rpcrdma_v2::draft07::marshal::reply_inline_header;
/// use rpcrdma_v2::rt::List;
/// let mut send = [0u8; 64];
/// assert_eq!(reply_inline_header(&mut send, 7, 33, List::from_slice(&[])), Ok(20));
/// assert_eq!(&send[12..20], &[0, 0, 0, 13, 0, 0, 0, 0]); // RDMA2_REPLY_INLINE, no Write chunks
/// ```
pub fn reply_inline_header(
    out: &mut [u8],
    xid: u32,
    credit: u32,
    writes: List<'_, XdrWriteChunk<'_>>,
) -> Result<usize, MarshalError> {
    let at = prefix(out, xid, credit, RDMA2_REPLY_INLINE)?;
    put(out, at, &writes)
}

/// RDMA2_REPLY_EXTERNAL (6.3.8): the Write list `writes` and the Reply chunk `reply` (the
/// reply is in it); no payload.
pub fn reply_external(
    out: &mut [u8],
    xid: u32,
    credit: u32,
    writes: List<'_, XdrWriteChunk<'_>>,
    reply: XdrWriteChunk<'_>,
) -> Result<usize, MarshalError> {
    let at = prefix(out, xid, credit, RDMA2_REPLY_EXTERNAL)?;
    let at = put(out, at, &writes)?;
    put(out, at, &Some(reply))
}

/// RDMA2_ERROR (6.3.1): `body` answers the message whose XID is `xid` (section 7).
///
/// ```
/// use rpcrdma_v2::draft07::marshal::error;
/// use rpcrdma_v2::draft07::xdr::{Rpcrdma2HdrError, RDMA2_ERR_INVAL_CONT};
/// let mut send = [0u8; 32];
/// let n = error(&mut send, 9, 32, &Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_INVAL_CONT }).unwrap();
/// assert_eq!(&send[..n], &[0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 32, 0, 0, 0, 4, 0, 0, 0, 5]);
/// ```
pub fn error(out: &mut [u8], xid: u32, credit: u32, body: &Rpcrdma2HdrError) -> Result<usize, MarshalError> {
    let at = prefix(out, xid, credit, RDMA2_ERROR)?;
    put(out, at, body)
}

/// RDMA2_GRANT (6.3.2): the prefix alone, `rdma_xid` zero ("Senders MUST set the rdma_xid
/// field to zero").
///
/// ```
/// use rpcrdma_v2::draft07::marshal::grant;
/// let mut send = [0u8; 16];
/// assert_eq!(grant(&mut send, 40), Ok(16));
/// assert_eq!(send, [0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 40, 0, 0, 0, 5]);
/// ```
pub fn grant(out: &mut [u8], credit: u32) -> Result<usize, MarshalError> {
    prefix(out, 0, credit, RDMA2_GRANT)
}

/// An RDMA2_GRANT carrying `credit`, as its own buffer (see [`grant`]).
///
/// ```
/// use rpcrdma_v2::draft07::marshal::grant_message;
/// assert_eq!(grant_message(40), [0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 40, 0, 0, 0, 5]);
/// ```
pub fn grant_message(credit: u32) -> [u8; PREFIX_LEN] {
    let mut send = [0u8; PREFIX_LEN];
    grant(&mut send, credit).expect("a GRANT is its prefix alone");
    send
}

/// The length of an RDMA2_CALL_INLINE header with `chunks`: the RPC call starts there.
pub fn call_inline_header_len(chunks: &ChunkLists<'_>) -> usize {
    PREFIX_LEN + 4 + call_lists(chunks).encoded_len()
}

/// The Sends that carry RPC call `message` (XID `xid`, `rdma_credit` `credit` in each) to a
/// peer whose Receives hold `receive_size` bytes: one RDMA2_CALL_INLINE when it fits, else
/// RDMA2_CALL_MIDDLE parts and a final RDMA2_CALL_INLINE with `inv_handle` and `chunks`
/// (section 4.1). `None` when no cut fits (see [`split`]). Allocates each Send: for tests and
/// tools; a connection writes each part into its own Send buffer with the functions above.
///
/// ```
/// use rpcrdma_v2::draft07::marshal::{sends, NO_CHUNKS};
/// let message = vec![0u8; 10_000];
/// let parts = sends(7, 32, 0, &NO_CHUNKS, &message, 4096).unwrap();
/// assert_eq!(parts.len(), 3);
/// assert!(parts.iter().all(|p| p.len() <= 4096));
/// ```
pub fn sends(
    xid: u32,
    credit: u32,
    inv_handle: u32,
    chunks: &ChunkLists<'_>,
    message: &[u8],
    receive_size: usize,
) -> Option<Vec<Vec<u8>>> {
    let inline_len = call_inline_header_len(chunks);
    let parts =
        split(message.len(), receive_size.checked_sub(MIDDLE_HEADER_LEN)?, receive_size.checked_sub(inline_len)?)?;
    parts
        .into_iter()
        .map(|p| {
            let part = &message[p.bytes];
            // The header and the part, not the peer's Receive size: that is the peer's to state.
            let mut out = vec![0u8; inline_len.max(MIDDLE_HEADER_LEN) + part.len()];
            let n = match p.remaining {
                Some(remaining) => middle(&mut out, xid, credit, MessageType::Call, remaining, part),
                None => call_inline(&mut out, xid, credit, inv_handle, chunks, part),
            }
            .ok()?;
            out.truncate(n);
            Some(out)
        })
        .collect()
}
