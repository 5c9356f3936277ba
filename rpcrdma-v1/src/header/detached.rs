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
use crate::xdr::XdrWriteChunk;

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
}
