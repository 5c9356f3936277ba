//! [`InPlaceReply`]: a reply read where it landed ([`Client::call_in_place`]).
//!
//! [`Client::call_in_place`]: super::Client::call_in_place

use std::sync::Arc;

use rpcrdma_v1::reassemble::ReplyPiece;
use rpcrdma_verbs::Backend;

use super::link::Link;
use crate::datapath::{LandedView, ReducedAt, ReplyInPlace};

/// XDR roundup padding a result lacks in its chunk (RFC 8166 section 3.4.6.2: never written).
const PADDING: [u8; 3] = [0; 3];

/// An RPC reply left where it landed ([`Client::call_in_place`](super::Client::call_in_place)):
/// its DDP-eligible results in the Write chunk buffers the server RDMA-Wrote them into, the
/// rest in the received message (or, for a Long Reply, in the Reply chunk). The buffers go back
/// to the connection, for the next calls' chunks, when it is dropped.
///
/// ```
/// # use std::sync::Arc;
/// # use negotiate::client::{Client, ClientConfig};
/// # use negotiate::onc::{self, CallHeader};
/// # use negotiate::server::{Server, ServerConfig};
/// # use rpcrdma_v1::ulb::OpaqueAtUlb;
/// # use rpcrdma_verbs::InProcess;
/// # // The reply's one result: an opaque<> of 5000 bytes, its length word just after the SUCCESS header.
/// # let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: Some(24), max_result: 8192, max_reply: 256 };
/// # let big = |call: &[u8]| {
/// #     let mut result = 5000u32.to_be_bytes().to_vec();
/// #     result.resize(4 + 5000, 7);
/// #     let mut reply = Vec::new();
/// #     onc::reply_success(onc::peek_xid(call).unwrap(), &result, &mut reply);
/// #     reply
/// # };
/// # let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), big).unwrap();
/// # let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
/// let mut reply = client.call_in_place(&CallHeader::new(1, 0x2000_0001, 1, 1).message(&[]).unwrap(), &ulb).unwrap();
/// assert_eq!(reply.len(), 5028);
/// // The whole reply as slices, in order: the 28 bytes before the result (the 24-byte reply
/// // header and the opaque's length word), then the result itself where it landed (with
/// // its padding after it, had its length not been a multiple of 4).
/// let view = reply.view();
/// let lens: Vec<usize> = view.pieces().map(<[u8]>::len).collect();
/// assert_eq!(lens, [28, 5000]);
/// assert_eq!(view.result(0), Some(&[7u8; 5000][..]));
/// ```
pub struct InPlaceReply<B: Backend> {
    link: Arc<Link<B>>,
    /// The received message (the transport header and the inline part of the reply).
    message: Vec<u8>,
    parts: ReplyInPlace<B>,
}

impl<B: Backend> InPlaceReply<B> {
    pub(super) fn new(link: Arc<Link<B>>, message: Vec<u8>, parts: ReplyInPlace<B>) -> Self {
        InPlaceReply { link, message, parts }
    }

    /// The whole reply's length, as [`Client::call`](super::Client::call) would return it.
    pub fn len(&self) -> usize {
        self.parts.len
    }

    /// Whether the reply is empty (never, for an RPC reply).
    pub fn is_empty(&self) -> bool {
        self.parts.len == 0
    }

    /// The reply's pieces held for reading while the view lives: the chunk buffers the server
    /// wrote stay locked meanwhile ([`MemoryRegion::bytes`](rpcrdma_verbs::MemoryRegion::bytes)),
    /// which is why the view borrows the reply mutably: nothing else can lock them again
    /// (a second view, [`to_vec`](InPlaceReply::to_vec)) until it is dropped.
    pub fn view(&mut self) -> ReplyView<'_, B> {
        // (No other view of these buffers exists while `self` is borrowed mutably.)
        self.view_shared()
    }

    /// [`view`](InPlaceReply::view) where no other view can be held: `self` borrowed.
    fn view_shared(&self) -> ReplyView<'_, B> {
        ReplyView { message: &self.message, parts: &self.parts, landed: self.parts.landed.view_shared() }
    }

    /// The whole reply, copied into `out` (cleared first).
    pub fn copy_into(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.len());
        // (No view of these buffers exists while `self` is borrowed.)
        self.view_shared().pieces().for_each(|p| out.extend_from_slice(p));
    }

    /// The whole reply, copied.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.copy_into(&mut out);
        out
    }
}

/// An [`InPlaceReply`] held for reading ([`InPlaceReply::view`]).
pub struct ReplyView<'a, B: Backend> {
    message: &'a [u8],
    parts: &'a ReplyInPlace<B>,
    landed: LandedView<'a, B>,
}

impl<'a, B: Backend> ReplyView<'a, B> {
    /// The result the server wrote into Write chunk `chunk`, where it landed (padding
    /// excluded); `None` if the reply placed no result there.
    pub fn result(&self, chunk: usize) -> Option<&[u8]> {
        self.parts.pieces.iter().find_map(|p| match *p {
            ReplyPiece::Result { chunk: c, len } if c == chunk => Some(self.landed(c, len)),
            _ => None,
        })
    }

    /// The reply in stream order, as slices of where each piece lies: concatenated, they are
    /// the bytes [`Client::call`](super::Client::call) returns.
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> + use<'_, 'a, B> {
        let parts = self.parts;
        let reduced = match parts.reduced {
            Some(ReducedAt::Message { start, end }) => &self.message[start..end],
            Some(ReducedAt::ReplyChunk { len }) => &self.landed.reply()[..len],
            None => &[][..],
        };
        parts.pieces.iter().flat_map(move |p| {
            let (data, pad): (&[u8], &[u8]) = match *p {
                ReplyPiece::Reduced { start, end } => (&reduced[start..end], &[]),
                ReplyPiece::Result { chunk, len } => {
                    (self.landed(chunk, len), &PADDING[..rpcrdma_v1::ulb::roundup_pad(len)])
                }
            };
            [data, pad].into_iter().filter(|s| !s.is_empty())
        })
    }

    /// The first `len` bytes of Write chunk `chunk`'s buffer, which the reply's walk checked
    /// it holds (an empty result may have no buffer at all).
    fn landed(&self, chunk: usize, len: usize) -> &[u8] {
        &self.landed.write(chunk)[..len]
    }
}

impl<B: Backend> std::fmt::Debug for InPlaceReply<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InPlaceReply").field("len", &self.parts.len).field("pieces", &self.parts.pieces).finish()
    }
}

impl<B: Backend> Drop for InPlaceReply<B> {
    /// The chunk buffers go back to the connection, the message's buffer to its Receives.
    fn drop(&mut self) {
        self.link.conn.recycle_landed(std::mem::take(&mut self.parts.landed));
        self.link.pool.recycle(std::mem::take(&mut self.message));
    }
}
