//! [`Detached`]: a validated [`Header`] kept as offsets, without its bytes, to be laid over
//! them again with no second parse.
//!
//! A received message is judged on the thread that receives it, and its bytes then travel
//! (as an owned buffer) to the thread of the call it answers, which reassembles the reply. A
//! [`Header`] borrows the bytes, so it cannot travel with them; parsing them again on the
//! caller's thread would re-read every word the receiver already checked. [`Header::detach`]
//! keeps what the view holds as positions within the message, and [`Detached::attach`] builds
//! the same view over the moved bytes in constant time.

use xdr_spec_rt::{List, Seq};

use super::{Header, MessageKind};
use crate::xdr::{XdrReadChunk, XdrWriteChunk};

/// Where one decoded list or array lies in the message: its bytes and its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    len: u32,
}

/// A validated [`Header`] without the bytes it borrowed: what [`Header::detach`] keeps, for
/// [`Detached::attach`] to lay over the same message again.
///
/// ```
/// use rpcrdma_v1::header::{Header, HeaderLimits};
/// // RDMA_MSG, xid 7, no chunks, then an RPC reply whose XID is also 7.
/// let words = [7u32, 1, 32, 0, 0, 0, 0, 7, 1];
/// let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
/// let detached = Header::parse(&bytes, &HeaderLimits::default()).unwrap().detach();
/// let moved = std::thread::spawn(move || {
///     let h = detached.attach(&bytes).expect("the bytes it was detached from");
///     (h.xid(), h.credit(), h.payload().len())
/// });
/// assert_eq!(moved.join().unwrap(), (7, 32, 8));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detached {
    xid: u32,
    vers: u32,
    credit: u32,
    kind: MessageKind,
    reads: Span,
    writes: Span,
    reply: Option<Span>,
    header_len: usize,
    message_len: usize,
}

impl<'a> Header<'a> {
    /// This view as positions within its message, to be laid over the same bytes again
    /// ([`Detached::attach`]) after they moved, without parsing them again.
    pub fn detach(&self) -> Detached {
        // The message starts `header_len` bytes before the payload, which runs to its end.
        let base = self.payload.as_ptr() as usize - self.header_len;
        let span = |bytes: Option<&[u8]>, len: usize| {
            let bytes = bytes.unwrap_or_default();
            let start = (bytes.as_ptr() as usize).saturating_sub(base).min(self.header_len);
            Span { start, end: start + bytes.len(), len: len as u32 }
        };
        Detached {
            xid: self.xid,
            vers: self.vers,
            credit: self.credit,
            kind: self.kind,
            reads: span(self.reads.wire_bytes(), self.reads.len()),
            writes: span(self.writes.wire_bytes(), self.writes.len()),
            reply: self.reply.map(|r| span(r.target.wire_bytes(), r.target.len())),
            header_len: self.header_len,
            message_len: self.header_len + self.payload.len(),
        }
    }
}

impl Detached {
    /// The header over `bytes`, which must be the message it was detached from: checked
    /// only by length (`None` when it differs), since comparing the bytes would cost the
    /// parse this saves. Over other bytes of that length the view is wrong but safe: its
    /// lists end at the first entry that does not decode.
    pub fn attach<'a>(&self, bytes: &'a [u8]) -> Option<Header<'a>> {
        if bytes.len() != self.message_len {
            return None;
        }
        let wire = |s: Span| bytes.get(s.start..s.end).unwrap_or_default();
        Some(Header {
            xid: self.xid,
            vers: self.vers,
            credit: self.credit,
            kind: self.kind,
            reads: List::from_wire_bytes(wire(self.reads), self.reads.len),
            writes: List::from_wire_bytes(wire(self.writes), self.writes.len),
            reply: self.reply.map(|s| XdrWriteChunk { target: Seq::from_wire_bytes(wire(s), s.len) }),
            header_len: self.header_len,
            payload: &bytes[self.header_len..],
        })
    }

    /// `rdma_xid` of the header it was detached from.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// Encodes a header of Version One's shape from chunk lists another header carried and
    /// its receiver validated, followed by `message`, with the view of it ([`attach`] it to
    /// the bytes returned): for a receiver that rewrites a message of another shape (a -07
    /// call whose chunk lists it serves as Version One's) and serves the rewrite without
    /// parsing it again. The lists are taken as they are; nothing checks them here.
    ///
    /// [`attach`]: Detached::attach
    ///
    /// ```
    /// use rpcrdma_v1::header::{Detached, Header, HeaderLimits, MessageKind};
    /// use rpcrdma_v1::xdr::{XdrRdmaSegment, XdrReadChunk};
    /// use xdr_spec_rt::List;
    /// let chunk = XdrReadChunk { position: 0, target: XdrRdmaSegment { handle: 9, length: 4096, offset: 0x1000 } };
    /// let (bytes, view) = Detached::encode(7, 2, 32, MessageKind::NoMsg, &[chunk], List::from_slice(&[]), None, &[]);
    /// let h = view.attach(&bytes).unwrap();
    /// assert_eq!(h, Header::parse_chunk_lists(&bytes, MessageKind::NoMsg, &HeaderLimits::default()).unwrap());
    /// assert_eq!(h.read_chunks().count(), 1);
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        xid: u32,
        vers: u32,
        credit: u32,
        kind: MessageKind,
        reads: &[XdrReadChunk],
        writes: List<'_, XdrWriteChunk<'_>>,
        reply: Option<XdrWriteChunk<'_>>,
        message: &[u8],
    ) -> (Vec<u8>, Detached) {
        use xdr_spec_rt::Xdr;
        let rdma_reads = List::from_slice(reads);
        let lists = super::ChunkLists { reads: rdma_reads, writes, reply };
        let msg = super::rdma_msg(xid, vers, credit, kind, lists);
        let mut out = Vec::with_capacity(msg.encoded_len() + message.len());
        out.extend(msg.to_vec().expect("lists decoded from a header encode again"));
        let header_len = out.len();
        out.extend_from_slice(message);
        // Where each list lies: after the four fixed words, one after another, as decoding
        // them would find them (a list's bytes end with its FALSE word; the Reply chunk's are
        // its segments, after its "present" word and its count).
        let reads_span = Span {
            start: super::offsets::BODY,
            end: super::offsets::BODY + rdma_reads.encoded_len(),
            len: reads.len() as u32,
        };
        let writes_span =
            Span { start: reads_span.end, end: reads_span.end + writes.encoded_len(), len: writes.len() as u32 };
        // (The Reply chunk is the header's last item: its segments run to the header's end.)
        let reply_span =
            reply.map(|r| Span { start: writes_span.end + 8, end: header_len, len: r.target.len() as u32 });
        debug_assert!(reply.is_some() || writes_span.end + 4 == header_len);
        let view = Detached {
            xid,
            vers,
            credit,
            kind,
            reads: reads_span,
            writes: writes_span,
            reply: reply_span,
            header_len,
            message_len: out.len(),
        };
        (out, view)
    }
}

#[cfg(test)]
mod tests {
    use xdr_spec_rt::{List, Seq};

    use super::Detached;
    use crate::header::{Header, HeaderLimits, MessageKind};
    use crate::xdr::{XdrRdmaSegment, XdrReadChunk, XdrWriteChunk};

    /// Every combination of lists, none to several entries, with and without a Reply chunk,
    /// both kinds: the view `encode` gives is the one parsing its bytes gives.
    #[test]
    fn an_encoded_view_is_the_parsed_one() {
        let seg = |n: u32| XdrRdmaSegment { handle: n, length: 512 * n, offset: 0x1000 * u64::from(n) };
        // (Read chunks at position zero for RDMA_NOMSG, at the message's second word for
        // RDMA_MSG: the chunk rules' other combinations are refused by the parse.)
        let at = |kind: MessageKind| if kind == MessageKind::NoMsg { 0 } else { 4 };
        let segs: Vec<XdrRdmaSegment> = (4..=6).map(seg).collect();
        let chunks: Vec<XdrWriteChunk<'_>> =
            (1..=3).map(|n| XdrWriteChunk { target: Seq::from_slice(&segs[..n]) }).collect();
        let mut compared = 0;
        for kind in [MessageKind::Msg, MessageKind::NoMsg] {
            let reads: Vec<XdrReadChunk> =
                (1..=3).map(|n| XdrReadChunk { position: at(kind), target: seg(n) }).collect();
            for r in 0..=reads.len() {
                for w in 0..=chunks.len() {
                    for reply in [None, Some(XdrWriteChunk { target: Seq::from_slice(&segs[..2]) })] {
                        let message: &[u8] = if kind == MessageKind::Msg { &[0, 0, 0, 7, 0, 0, 0, 0] } else { &[] };
                        let (bytes, view) = Detached::encode(
                            7,
                            2,
                            32,
                            kind,
                            &reads[..r],
                            List::from_slice(&chunks[..w]),
                            reply,
                            message,
                        );
                        let Ok(parsed) = Header::parse_chunk_lists(&bytes, kind, &HeaderLimits::default()) else {
                            continue;
                        };
                        assert_eq!(view.attach(&bytes), Some(parsed), "{kind:?}, {r} reads, {w} writes, {reply:?}");
                        assert_eq!(view, parsed.detach(), "{kind:?}, {r} reads, {w} writes, {reply:?}");
                        compared += 1;
                    }
                }
            }
        }
        // (Of the 64: the RDMA_NOMSG ones with neither a position-zero chunk nor a Reply
        // chunk, and any the rules refuse, are not compared.)
        assert!(compared >= 48, "{compared} compared");
    }
}
