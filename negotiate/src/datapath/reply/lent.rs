//! A reply whose DDP-eligible results a server's handler lent from memory it keeps
//! ([`LentResults`](crate::server::LentResults)): the reply message comes reduced (each lent
//! result's length word written, its bytes and XDR padding left out, as a reply arrives whose
//! results went by Write chunk, RFC 8166 section 3.4.6.1), and the results as `Arc<[u8]>`s.
//! When the requester's Write chunks take every lent result and the rest goes inline, each
//! result is RDMA-Written from the registered copy the connection keeps of it
//! ([`super::super::lent_sources`]): the reply copies none of its bytes. Otherwise the whole
//! reply is put together in the handler's buffer and sent as any other ([`send_reply_lent`]).

use std::ops::Range;
use std::sync::Arc;

use smallvec::SmallVec;

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
    /// The binding placed a lent result outside the reply, before the result ahead of it, or
    /// off the reply's four-byte XDR units.
    #[error("the binding places lent result {index} at byte {at} of a {len}-byte reduced reply, after byte {after}")]
    Misplaced {
        /// Which result, in stream order.
        index: usize,
        /// Where the binding places it in the reduced reply.
        at: usize,
        /// Where the reply's pieces before it end.
        after: usize,
        /// The reduced reply's length.
        len: usize,
    },
    /// An RDMA Write of the reply was to carry bytes that are not a lent result's, where the
    /// reply was marshaled to carry only those (a binding that found other results on a second
    /// reading). Nothing more of the reply was posted; Writes posted before it still complete.
    #[error("the reply's RDMA Write of bytes {write:?} is not of a lent result")]
    Unplaced {
        /// The bytes of the whole reply the Write was to carry.
        write: Range<usize>,
    },
}

/// A reduced reply, the results lent for it in stream order, and their registered copies
/// (empty until they are taken, [`send_reply_with_lent_results`]).
pub(super) struct ReducedReply<'r, R> {
    /// The reply without the lent results' bytes and padding.
    pub(super) message: &'r [u8],
    /// The lent results.
    pub(super) lent: &'r [Arc<[u8]>],
    /// Their registered copies, in the same order (none for a result of no bytes, which no
    /// Write carries).
    pub(super) sources: &'r [Option<R>],
}

// (Not derived: that would ask `R: Copy` of the regions it only refers to.)
impl<R> Clone for ReducedReply<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for ReducedReply<'_, R> {}

impl<R> ReducedReply<'_, R> {
    /// Every DDP-eligible result of the whole reply into `out`, where each lies in the reply
    /// with the lent results put back (what `marshal_reply_of_len` indexes); fails if the
    /// lent results are not the first results `ulb` finds, in order within the reply, with
    /// their declared lengths.
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
        let (mut shift, mut after) = (0, 0);
        for (index, item) in out.iter_mut().enumerate() {
            let Some(lent) = self.lent.get(index) else {
                item.offset += shift;
                continue;
            };
            if lent.len() != item.len {
                return Err(LentMismatch::Length { index, lent: lent.len(), declared: item.len });
            }
            // Checked here, so that putting the reply together cannot index out of it.
            let (at, len) = (item.offset, self.message.len());
            if at < after || at > len || !at.is_multiple_of(4) {
                return Err(LentMismatch::Misplaced { index, at, after, len });
            }
            after = at;
            item.offset += shift;
            shift += item.padded_len();
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
    /// piece from the message, a lent result, or its padding. `items` are
    /// [`ReducedReply::items`].
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

/// Puts the whole reply together in `reply`, which holds the reduced reply: each lent result's
/// bytes and padding inserted where `items` ([`ReducedReply::items`]) place it, the message's
/// pieces after it moved along, from the last piece to the first so that none is overwritten
/// before it moved.
fn put_together(reply: &mut Vec<u8>, lent: &[Arc<[u8]>], items: &[DdpItem]) {
    let whole = ReducedReply::<()> { message: reply, lent, sources: &[] }.len();
    let mut end = reply.len(); // the message's pieces from here on are in place
    reply.resize(whole, 0);
    let mut shift = whole - end;
    for (item, lent) in items.iter().zip(lent).rev() {
        // The message's piece after this result: [reduced start, end) moves by `shift`.
        let start = item.offset + item.padded_len() - shift;
        reply.copy_within(start..end, start + shift);
        reply[item.offset..item.end()].copy_from_slice(lent);
        reply[item.end()..item.padded_end()].fill(0);
        shift -= item.padded_len();
        end = start;
    }
}

/// [`send_reply_lent`] for a reply whose first DDP-eligible results `lent` were lent by the
/// server's handler: `reply` is the reduced reply (each lent result's length word written,
/// its bytes and padding left out).
///
/// When the requester's Write chunks take every lent result, and nothing else of the reply,
/// and the rest of the reply fits inline (one marshaling of the header alone decides it), each
/// result goes by RDMA Write from the registered copy the connection keeps of its `Arc`,
/// copied the first time the connection sends it. Otherwise (no Write chunk for a lent
/// result, Write chunks for other results too, a reply too large to go inline, a header over
/// 1 KiB, or a copy that could not be registered) the whole reply is put together in `reply`
/// and sent by [`send_reply_lent`]. [`DataPathError::Lent`]: the lent results are not the
/// first DDP-eligible results `ulb` finds, in order, with the lengths their length words
/// declare; nothing was sent.
///
/// ```no_run
/// # fn demo(conn: &negotiate::datapath::Transport<rpcrdma_verbs::InProcess>, call: &rpcrdma_v1::header::Header<'_>,
/// #         ulb: &rpcrdma_v1::ulb::OpaqueAtUlb, params: &negotiate::datapath::ReplyParams) {
/// use std::sync::Arc;
/// // XID 7, REPLY, then an opaque<> of 5 bytes (its length word at 8): the bytes are lent.
/// let mut reply = vec![0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 5];
/// let lent: Arc<[u8]> = b"hello".to_vec().into();
/// let call_message = [0, 0, 0, 7, 0, 0, 0, 0]; // the RPC call it answers
/// negotiate::datapath::send_reply_with_lent_results(conn, call, &call_message, &mut reply, &[lent], ulb, params).unwrap();
/// # }
/// ```
pub fn send_reply_with_lent_results<B: Backend, U: UpperLayerBinding + ?Sized>(
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
    let reduced = ReducedReply::<B::Region> { message: reply, lent, sources: &[] };
    // The items found here stay in this thread's scratch list for the reply put together below,
    // which nothing between uses.
    let fits = SCRATCH.with_borrow_mut(|(results, out)| -> Result<bool, DataPathError> {
        reduced.items(call_message, ulb, results)?;
        Ok(fits_without_copies(call, reduced, results, params, out))
    })?;
    // The copies are taken before anything is posted: when one cannot be registered, the reply
    // is put together instead.
    if let Some((sources, copies)) = fits.then(|| lent_sources(conn, lent)).flatten() {
        let reduced = ReducedReply { sources: &sources, ..reduced };
        let sent = send_reply_from(conn, call, call_message, ReplyBytes::WithLentResults(reduced), ulb, params);
        return sent.map(|s| ReplySent { lent_copies: copies, ..s });
    }
    SCRATCH.with_borrow_mut(|(results, _)| put_together(reply, lent, results));
    let sent = send_reply_lent(conn, call, call_message, reply, ulb, params);
    sent.map(|s| ReplySent { lent_copies: lent.iter().filter(|r| !r.is_empty()).count(), ..s })
}

/// The registered copies of `lent` (none for a result of no bytes), and how many were copied
/// now; `None` (logged) when one could not be registered.
#[allow(clippy::type_complexity)]
fn lent_sources<B: Backend>(
    conn: &Transport<B>,
    lent: &[Arc<[u8]>],
) -> Option<(SmallVec<[Option<B::Region>; 2]>, usize)> {
    let (mut sources, mut copies) = (SmallVec::new(), 0);
    for r in lent {
        if r.is_empty() {
            sources.push(None);
            continue;
        }
        match conn.lent_source(r) {
            Ok(source) => {
                copies += usize::from(source.copied);
                sources.push(Some(source.region));
            }
            Err(e) => {
                log::warn!(
                    "a lent result of {} bytes could not be registered ({e}): its reply is put together",
                    r.len()
                );
                return None;
            }
        }
    }
    Some((sources, copies))
}

/// Whether the reply goes with every lent result in a Write chunk, nothing else in one, and
/// the rest inline: a marshaling of its header alone, with the same inputs as the one that
/// sends it.
fn fits_without_copies<R>(
    call: &Header<'_>,
    reduced: ReducedReply<'_, R>,
    results: &[DdpItem],
    params: &ReplyParams,
    out: &mut MarshaledReply,
) -> bool {
    let Some(xid) = reduced.xid() else { return false };
    let (provided, req) = marshal_inputs(call, params, results);
    out.set_version(params.version);
    // (A header too long for this buffer is put together and sent the usual way.)
    let mut header = [0; 1024];
    let marshaled = marshal_reply_of_len(xid, reduced.len(), provided, &req, &mut header, out);
    marshaled.is_ok() && out.form() == ReplyForm::Inline && out.reduced_results() == reduced.lent.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reduced reply, its lent results, their items and the whole reply it stands for.
    type Case = (Vec<u8>, Vec<Arc<[u8]>>, Vec<DdpItem>, Vec<u8>);

    /// A reduced reply with lent results at `at` (offsets into it) and the whole reply it
    /// stands for, built piece by piece.
    fn case(message: &[u8], at: &[usize], lent: &[&[u8]]) -> Case {
        let lent: Vec<Arc<[u8]>> = lent.iter().map(|b| b.to_vec().into()).collect();
        let (mut whole, mut items, mut from, mut shift) = (Vec::new(), Vec::new(), 0, 0);
        for (&a, l) in at.iter().zip(&lent) {
            whole.extend_from_slice(&message[from..a]);
            items.push(DdpItem::new(a + shift, l.len()));
            whole.extend_from_slice(l);
            whole.resize(whole.len().next_multiple_of(4), 0);
            shift += DdpItem::new(0, l.len()).padded_len();
            from = a;
        }
        whole.extend_from_slice(&message[from..]);
        (message.to_vec(), lent, items, whole)
    }

    #[test]
    fn put_together_and_copy_give_the_whole_reply_with_padding_and_pieces_between() {
        let message: Vec<u8> = (1..=24).collect();
        // Two results, the second zero-length, then a trailing piece; and one at the very end.
        for (at, lent) in [
            (&[8usize, 16][..], &[&b"hello"[..], &b""[..]][..]),
            (&[4, 12], &[&b"abcdefgh"[..], &b"xyz"[..]]),
            (&[24], &[&b"tail"[..]]),
            (&[0], &[&b"q"[..]]),
        ] {
            let (reduced, lent, items, whole) = case(&message, at, lent);
            let r = ReducedReply::<()> { message: &reduced, lent: &lent, sources: &[] };
            assert_eq!(r.len(), whole.len());
            let mut copied = vec![0xee; whole.len()];
            r.copy(0..whole.len(), &items, &mut copied);
            assert_eq!(copied, whole, "copy, {at:?}");
            // Any range of it too.
            let mut part = vec![0xee; 7];
            r.copy(3..10, &items, &mut part);
            assert_eq!(part, whole[3..10]);
            // In place, over a buffer whose spare capacity holds old bytes, not zeros.
            let mut buf = vec![0xee; whole.len() + 8];
            buf.clear();
            buf.extend_from_slice(&reduced);
            put_together(&mut buf, &lent, &items);
            assert_eq!(buf, whole, "put together, {at:?}");
        }
    }
}
