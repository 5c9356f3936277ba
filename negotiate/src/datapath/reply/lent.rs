//! A reply whose DDP-eligible results a server's handler lent from memory it keeps
//! ([`LentResults`](crate::server::LentResults)): the reply message comes reduced (each lent
//! result's length word written, its bytes and XDR padding left out, as a reply that went by
//! Write chunk arrives, RFC 8166 section 3.4.6.1), and the results as `Arc<[u8]>`s. When the
//! requester's Write chunks take every lent result and the rest goes inline, each result is
//! RDMA-Written from its registered copy the connection keeps ([`super::super::lent_sources`]):
//! no byte of it is copied for the reply. Otherwise the whole reply is put together and sent
//! as any other ([`send_reply_lent`]).

use std::ops::Range;
use std::sync::Arc;

use super::*;

/// Why a handler's lent results do not fit the reply it wrote: the call is answered with an
/// RPC SYSTEM_ERR reply, as for any reply that is not one to its call.
///
/// ```
/// use negotiate::datapath::LentMismatch;
/// let e = LentMismatch::Length { index: 0, lent: 10, declared: 12 };
/// assert_eq!(e.to_string(), "lent result 0 is 10 bytes where its length word in the reply says 12");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LentMismatch {
    /// The binding found fewer DDP-eligible results in the reply than were lent.
    #[error("{lent} results lent where the binding finds {found} DDP-eligible results in the reply")]
    Count {
        /// Results lent.
        lent: usize,
        /// DDP-eligible results the binding found.
        found: usize,
    },
    /// A lent result's length is not what its length word in the reply declares.
    #[error("lent result {index} is {lent} bytes where its length word in the reply says {declared}")]
    Length {
        /// Which result, in stream order.
        index: usize,
        /// Its length.
        lent: usize,
        /// What the reply declares.
        declared: usize,
    },
    /// An RDMA Write of the reply was to carry bytes that are not a lent result's, where the
    /// reply was marshaled to carry only those (a binding that found other results on a second
    /// reading). Nothing was posted of the Write.
    #[error("the reply's RDMA Write of bytes {write:?} is not of a lent result")]
    Unplaced {
        /// The bytes of the whole reply the Write was to carry.
        write: Range<usize>,
    },
}

/// A reduced reply and the results lent for it, in stream order.
#[derive(Clone, Copy)]
pub(super) struct Gathered<'r> {
    /// The reply without the lent results' bytes and padding.
    pub(super) message: &'r [u8],
    /// The lent results.
    pub(super) lent: &'r [Arc<[u8]>],
}

impl Gathered<'_> {
    /// Every DDP-eligible result of the whole reply into `out`, where each lies in the reply
    /// with the lent results put back (what `marshal_reply_of_len` indexes); fails if the
    /// lent results are not the first results `ulb` finds, with their declared lengths.
    pub(super) fn items<U: UpperLayerBinding + ?Sized>(
        &self,
        call_message: &[u8],
        ulb: &U,
        out: &mut Vec<DdpItem>,
    ) -> Result<(), LentMismatch> {
        out.clear();
        // The binding reports a reduced result where its bytes belong in the reduced reply
        // (just after its length word), with the length the word declares.
        ulb.reply_ddp_items(call_message, self.message, self.lent.len(), out);
        if out.len() < self.lent.len() {
            return Err(LentMismatch::Count { lent: self.lent.len(), found: out.len() });
        }
        let mut shift = 0;
        for (index, item) in out.iter_mut().enumerate() {
            item.offset += shift;
            if let Some(lent) = self.lent.get(index) {
                if lent.len() != item.len {
                    return Err(LentMismatch::Length { index, lent: lent.len(), declared: item.len });
                }
                shift += item.padded_len();
            }
        }
        Ok(())
    }

    /// The whole reply's length.
    pub(super) fn len(&self) -> usize {
        self.message.len() + self.lent.iter().map(|r| DdpItem::new(0, r.len()).padded_len()).sum::<usize>()
    }

    /// The reply's XID (its first word).
    pub(super) fn xid(&self) -> Option<u32> {
        self.message.first_chunk::<4>().map(|w| u32::from_be_bytes(*w))
    }

    /// Copies bytes `range` of the whole reply into `dst` (as long as `range`), taking each
    /// piece from the message, a lent result, or its padding. `items` are [`Gathered::items`].
    pub(super) fn copy(&self, range: Range<usize>, items: &[DdpItem], dst: &mut [u8]) {
        // One piece of `len` bytes at `at` in the whole reply: `bytes`, or padding (zeros).
        let mut put = |at: usize, bytes: Option<&[u8]>, len: usize| {
            let (lo, hi) = (range.start.max(at), range.end.min(at + len));
            if lo < hi {
                let to = &mut dst[lo - range.start..hi - range.start];
                match bytes {
                    Some(b) => to.copy_from_slice(&b[lo - at..hi - at]),
                    None => to.fill(0),
                }
            }
        };
        let (mut at, mut from) = (0, 0); // where the next piece starts: in the reply, in the message
        for (item, lent) in items.iter().zip(self.lent) {
            let before = item.offset - at;
            put(at, Some(&self.message[from..from + before]), before);
            put(item.offset, Some(lent), lent.len());
            put(item.end(), None, item.padded_len() - item.len);
            (at, from) = (item.padded_end(), from + before);
        }
        put(at, Some(&self.message[from..]), self.message.len() - from);
    }

    /// Which lent result bytes `range` of the whole reply lie in, and where in it they start.
    pub(super) fn lent_at(&self, range: &Range<usize>, items: &[DdpItem]) -> Option<(usize, usize)> {
        let k = items[..self.lent.len()].iter().position(|i| i.offset <= range.start && range.end <= i.end())?;
        Some((k, range.start - items[k].offset))
    }
}

/// [`send_reply_lent`] for a reply whose first DDP-eligible results `lent` were lent:
/// `reply` is the reduced reply (each lent result's length word written, its bytes and
/// padding left out). When the requester's Write chunks take all of them and the rest of the
/// reply fits inline, each goes by RDMA Write from the registered copy the connection keeps of
/// it, copied the first time the connection sends it; otherwise the whole reply is put
/// together in `reply` and sent by [`send_reply_lent`].
/// [`DataPathError::Lent`]: the lent results are not the first DDP-eligible results `ulb`
/// finds with the lengths their length words declare; nothing was sent.
pub fn send_reply_lending<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Transport<B>,
    call: &Header<'_>,
    call_message: &[u8],
    reply: &mut Vec<u8>,
    lent: &[Arc<[u8]>],
    ulb: &U,
    params: &ReplyParams,
) -> Result<ReplySent, DataPathError> {
    if lent.is_empty() {
        return send_reply_lent(conn, call, call_message, reply, ulb, params);
    }
    let gathered = Gathered { message: reply, lent };
    let fits = SCRATCH.with_borrow_mut(|(results, out)| -> Result<bool, DataPathError> {
        gathered.items(call_message, ulb, results)?;
        Ok(fits_without_copies(call, gathered, results, params, out))
    })?;
    if fits {
        return send_reply_from(conn, call, call_message, ReplyBytes::Gathered(gathered), ulb, params);
    }
    // Put together: the lent results' bytes copied into the reply where they belong.
    let mut whole = vec![0; gathered.len()];
    SCRATCH.with_borrow_mut(|(results, _)| gathered.copy(0..whole.len(), results, &mut whole));
    let sent = send_reply_lent(conn, call, call_message, &mut whole, ulb, params);
    sent.map(|s| ReplySent { lent_copied: lent.len(), ..s })
}

/// Whether the reply goes with every lent result in a Write chunk and the rest inline: a
/// marshaling of its header alone, with the same inputs as the one that sends it.
fn fits_without_copies(
    call: &Header<'_>,
    gathered: Gathered<'_>,
    results: &[DdpItem],
    params: &ReplyParams,
    out: &mut MarshaledReply,
) -> bool {
    let Some(xid) = gathered.xid() else { return false };
    let (provided, req) = marshal_inputs(call, params, results);
    out.set_version(params.version);
    // (A header too long for this buffer is put together and sent the usual way.)
    let mut header = [0; 1024];
    let marshaled = marshal_reply_of_len(xid, gathered.len(), provided, &req, &mut header, out);
    marshaled.is_ok() && out.form() == ReplyForm::Inline && out.reduced_results() == gathered.lent.len()
}
