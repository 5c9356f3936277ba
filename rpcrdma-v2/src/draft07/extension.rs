//! -07's extension points (draft-ietf-nfsv4-rpcrdma-version-two-07 Appendix B): an extension
//! document defines new header types (B.2), transport properties (B.3) and error codes
//! (B.4), with its own XDR compiled with the base's (B.1; this crate's build compiles
//! `specs/rpcrdma2-ping.txt` so, into [`crate::draft07::xdr::ping`]).
//!
//! A message of a header type the base does not define is an [`ExtensionMessage`]: the four
//! words every header starts with (section 6.2, `rpcrdma_common`), then a body only the
//! extension's XDR describes. A receiver that takes no extension of that type answers it
//! RDMA2_ERR_INVAL_HTYPE (7.1.3), which is how a sender learns the type is not supported
//! (B.2: "a test invocation"). New transport properties travel in CONNPROP messages beside the
//! base's ([`crate::draft07::properties::Properties::others`]); a new error code that carries
//! nothing goes in RDMA2_ERROR's default arm (B.4), which [`crate::draft07::xdr::Rpcrdma2HdrError`]
//! decodes as `Default { discriminant }`.
//!
//! ```
//! use rpcrdma_v2::draft07::extension::ExtensionMessage;
//! use rpcrdma_v2::draft07::xdr::ping::{Rpcrdma2HdrPing, RDMA2_PING};
//! use rpcrdma_v2::rt::Xdr;
//! // An RDMA2_PING (the ping extension's header type) with cookie 7 and four bytes of data.
//! let body = Rpcrdma2HdrPing { rdma_ping_cookie: 7, rdma_ping_data: b"abcd" }.to_vec().unwrap();
//! let wire = ExtensionMessage::to_message(0x10, 32, RDMA2_PING, &body);
//! let m = ExtensionMessage::parse(&wire).unwrap();
//! assert_eq!((m.xid, m.credit, m.htype), (0x10, 32, RDMA2_PING));
//! let (ping, _) = Rpcrdma2HdrPing::decode(m.body).unwrap();
//! assert_eq!((ping.rdma_ping_cookie, ping.rdma_ping_data), (7, &b"abcd"[..]));
//! // A base header type is not an extension's.
//! assert!(ExtensionMessage::parse(&ExtensionMessage::to_message(0x10, 32, 10, &[])).is_none());
//! ```

use crate::draft07::header::HeaderType;

/// The length of the words every -07 header starts with (`rpcrdma_common`, section 6.2).
const PREFIX_LEN: usize = 16;

/// The highest header type the base defines (RDMA2_REPLY_INLINE, section 6.1): an
/// extension's are above it (Appendix B.2; the values below 4 are Version One's and -00's).
pub const LAST_BASE_HTYPE: u32 = 13;

/// A -07 message of a header type the base does not define (Appendix B.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionMessage<'a> {
    /// `rdma_xid`: chosen by its sender as for a call; an answer carries it back.
    pub xid: u32,
    /// `rdma_credit`: the sender's running total, as every -07 header carries (4.2.1).
    pub credit: u32,
    /// `rdma_htype`: above [`LAST_BASE_HTYPE`].
    pub htype: u32,
    /// What follows the four words: the extension's XDR says what it holds.
    pub body: &'a [u8],
}

impl<'a> ExtensionMessage<'a> {
    /// `bytes` as an extension's message: version 2, and a header type above the base's
    /// ([`LAST_BASE_HTYPE`], so never one [`HeaderType::from_wire`] knows). `None` otherwise,
    /// and for fewer than the four words.
    pub fn parse(bytes: &'a [u8]) -> Option<Self> {
        let word = |i: usize| u32::from_be_bytes(bytes[4 * i..4 * i + 4].try_into().expect("four bytes"));
        if bytes.len() < PREFIX_LEN || word(1) != crate::RPCRDMA2_VERSION.wire() {
            return None;
        }
        let htype = word(3);
        if htype <= LAST_BASE_HTYPE || HeaderType::from_wire(htype).is_some() {
            return None;
        }
        Some(ExtensionMessage { xid: word(0), credit: word(2), htype, body: &bytes[PREFIX_LEN..] })
    }

    /// A message of header type `htype` with `body` after the four words, version 2.
    pub fn to_message(xid: u32, credit: u32, htype: u32, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::with_capacity(PREFIX_LEN + body.len());
        for w in [xid, crate::RPCRDMA2_VERSION.wire(), credit, htype] {
            m.extend_from_slice(&w.to_be_bytes());
        }
        m.extend_from_slice(body);
        m
    }
}
