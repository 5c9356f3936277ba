//! The Upper-Layer Binding of NFS Version 3 to RPC-over-RDMA (RFC 8267 section 3): which XDR
//! items of NFSv3 calls and replies are DDP-eligible, and how large a reply may be.
//!
//! RFC 8267 section 3 makes exactly two items DDP-eligible for what this server serves: the
//! `data` of WRITE3args (so a large WRITE's data may arrive through a Read chunk) and the
//! `data` of a successful READ3res (sent through the client's Write chunk); the path of
//! SYMLINK and READLINK is the third. The Linux client sends a SYMLINK's path through a Read
//! chunk, so [`symlink_path`] locates it (otherwise the call's chunk would break
//! DDP-eligibility and be answered GARBAGE_ARGS, RFC 8166 section 4.5.2). A READLINK's path
//! is not moved by DDP here: its reply goes inline or, when long, through the Reply chunk,
//! like every other reply that can be large (READDIR and READDIRPLUS; section 3.2 of RFC 8267
//! leaves that to the transport).
//!
//! The items are located by decoding the XDR: the RPC header with
//! [`CallHeader::decode`](negotiate::onc::CallHeader::decode) or
//! [`ReplyHeader::decode`](negotiate::onc::ReplyHeader::decode), then the procedure's
//! arguments or results up to the item.
//!
//! A reply does not say which procedure it answers: [`UpperLayerBinding::reply_ddp_items`]
//! receives the call too, and a READ's data is located only in the reply to a READ call,
//! after decoding that reply strictly as a READ3res that ends exactly where the reply does.

use negotiate::onc::{CallHeader, ReplyHeader};
use rpcrdma_v1::ulb::{roundup, DdpItem, UpperLayerBinding};
use xdr_spec_rt::{Reader, Xdr};

use crate::xdr::{Diropargs3, NfsFh3, PostOpAttr, Sattr3, StableHow, NFSPROC3_READ, NFSPROC3_READDIR};
use crate::xdr::{NFSPROC3_READDIRPLUS, NFSPROC3_READLINK, NFSPROC3_SYMLINK, NFSPROC3_WRITE, NFS_PROGRAM, NFS_V3};

/// The largest reply other than READDIR's and READDIRPLUS's, with a READ's data reduced: the
/// RPC reply header and the largest fixed results (CREATE3resok: a handle, two `fattr3`s and
/// a `wcc_attr`, about 300 bytes).
pub const MAX_SMALL_REPLY: usize = 1024;

/// The most a READLINK reply adds to [`MAX_SMALL_REPLY`]: a path of up to PATH_MAX bytes.
pub const MAX_LINK_REPLY: usize = 4096;

/// The largest directory listing a client may ask for in one READDIR or READDIRPLUS: replies
/// up to this (and [`MAX_SMALL_REPLY`] more) go through the Reply chunk.
pub const MAX_DIR_REPLY: usize = 1 << 20;

/// The NFSv3 Upper-Layer Binding, for a client and a server alike.
#[derive(Debug, Default, Clone, Copy)]
pub struct Nfs3Binding;

/// The header of an NFSv3 call: its XID, procedure and where its arguments start.
fn nfs3_call(call: &[u8]) -> Option<(u32, u32, usize)> {
    let (h, at) = CallHeader::decode(call).ok()?;
    (h.prog == NFS_PROGRAM && h.vers == NFS_V3).then_some((h.xid, h.proc, at))
}

/// A reader at the arguments of `call` if it is an NFSv3 call of procedure `proc`, and
/// their offset in `call`.
fn arguments_of(call: &[u8], proc: u32) -> Option<(Reader<'_>, usize)> {
    let (_, p, at) = nfs3_call(call)?;
    (p == proc).then(|| (Reader::new(&call[at..]), at))
}

/// The DDP-eligible item of a WRITE call: WRITE3args' `data` (RFC 8267 section 3.1.1), in the
/// unreduced call. `None` for any other call, or one too short to hold its data.
pub fn write_data(call: &[u8]) -> Option<DdpItem> {
    let (mut r, at) = arguments_of(call, NFSPROC3_WRITE)?;
    // file, offset, count, stable, then data's length word.
    NfsFh3::decode_from(&mut r).ok()?;
    r.take(8 + 4).ok()?;
    StableHow::decode_from(&mut r).ok()?;
    let len = r.u32().ok()? as usize;
    let item = DdpItem::new(at + r.position(), len);
    (item.padded_end() <= call.len()).then_some(item)
}

/// The DDP-eligible item of a SYMLINK call: symlinkdata3's `symlink_data`, the path (RFC 8267
/// section 3.1.1), in the unreduced call. `None` for any other call, or one too short.
pub fn symlink_path(call: &[u8]) -> Option<DdpItem> {
    let (mut r, at) = arguments_of(call, NFSPROC3_SYMLINK)?;
    // where, symlink_attributes, then symlink_data's length word.
    Diropargs3::decode_from(&mut r).ok()?;
    Sattr3::decode_from(&mut r).ok()?;
    let len = r.u32().ok()? as usize;
    let item = DdpItem::new(at + r.position(), len);
    (item.padded_end() <= call.len()).then_some(item)
}

/// The `count` of a READ call: the most data its reply carries. `None` for any other call.
pub fn read_count(call: &[u8]) -> Option<u32> {
    let (mut r, _) = arguments_of(call, NFSPROC3_READ)?;
    // file, offset, then count.
    NfsFh3::decode_from(&mut r).ok()?;
    r.take(8).ok()?;
    r.u32().ok()
}

/// The DDP-eligible item of a reply to a READ: a successful READ3res's `data` (RFC 8267
/// section 3.1.1). With `reduced`, the data is absent (it went into the Write chunk) and the
/// item says where it belongs; otherwise the reply must hold it. `None` when the reply is not
/// a successful READ3res that ends where the reply does.
pub fn read_result(reply: &[u8], reduced: bool) -> Option<DdpItem> {
    let (h, at) = ReplyHeader::decode(reply).ok()?;
    if !h.reply.is_success() {
        return None;
    }
    let mut r = Reader::new(&reply[at..]);
    if r.i32().ok()? != 0 {
        return None; // READ3resfail: no data
    }
    PostOpAttr::decode_from(&mut r).ok()?;
    r.u32().ok()?; // count
    r.bool().ok()?; // eof
    let len = r.u32().ok()? as usize;
    let item = DdpItem::new(at + r.position(), len);
    let end = if reduced { item.offset } else { item.offset + roundup(len) };
    (end == reply.len()).then_some(item)
}

impl Nfs3Binding {
    /// The binding (it keeps no state: every item is found by decoding the call and reply).
    pub fn new() -> Self {
        Nfs3Binding
    }
}

impl UpperLayerBinding for Nfs3Binding {
    fn call_ddp_items(&self, call: &[u8], out: &mut Vec<DdpItem>) {
        out.extend(write_data(call).or_else(|| symlink_path(call)));
    }

    fn reply_ddp_maxima(&self, call: &[u8], out: &mut Vec<usize>) {
        out.extend(read_count(call).map(|count| count as usize));
    }

    fn max_reply_size(&self, call: &[u8]) -> usize {
        // READDIR3args: dir, cookie, cookieverf, count; READDIRPLUS3args: dir, cookie,
        // cookieverf, dircount, maxcount. Either way the last word bounds the reply.
        let listing_bound = |proc: u32, skipped: usize| {
            let (mut r, _) = arguments_of(call, proc)?;
            NfsFh3::decode_from(&mut r).ok()?;
            r.take(skipped).ok()?;
            r.u32().ok()
        };
        let listing = listing_bound(NFSPROC3_READDIR, 8 + 8).or_else(|| listing_bound(NFSPROC3_READDIRPLUS, 8 + 8 + 4));
        let readlink = arguments_of(call, NFSPROC3_READLINK).map_or(0, |_| MAX_LINK_REPLY);
        MAX_SMALL_REPLY + readlink + listing.map_or(0, |n| (n as usize).min(MAX_DIR_REPLY))
    }

    fn reply_ddp_items(&self, call: &[u8], reply: &[u8], reduced: usize, out: &mut Vec<DdpItem>) {
        if read_count(call).is_some() {
            out.extend(read_result(reply, reduced > 0));
        }
    }
}
