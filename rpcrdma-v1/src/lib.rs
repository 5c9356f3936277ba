//! RPC-over-RDMA Version One (RFC 8166): the transport header types,
//! generated at build time from the XDR in the specification's own text
//! (`specs/rfc5666bis-draft-rpcrdma-v1.txt`, section 5.1.2, which became RFC
//! 8166 section 4.2), with the errata in `specs/rfc5666bis-draft-rpcrdma-v1.errata`.
//!
//! Decoding borrows from the received buffer and never allocates; chunk lists
//! are walked in a loop and every count is checked against the bytes that
//! remain. The protocol semantics (chunk validation, message forms, error
//! rules) build on these types; see the crate's later modules as they land.
//!
//! ```
//! use rpcrdma_v1::xdr::{RdmaBody, RdmaMsg, RpcRdmaHeader};
//! use rpcrdma_v1::rt::{List, Xdr};
//!
//! // An RDMA_MSG with no chunks, as rpcgen + libtirpc encode it.
//! let msg = RdmaMsg {
//!     rdma_xid: 0x01020304,
//!     rdma_vers: 1,
//!     rdma_credit: 32,
//!     rdma_body: RdmaBody::RdmaMsg(RpcRdmaHeader {
//!         rdma_reads: List::default(),
//!         rdma_writes: List::default(),
//!         rdma_reply: None,
//!     }),
//! };
//! let mut buf = [0u8; 64];
//! let n = msg.encode(&mut buf).unwrap();
//! assert_eq!(n, 28);
//! assert_eq!(&buf[..16], &[1, 2, 3, 4, 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0, 0]);
//!
//! // The RPC message follows the header: decode tells where it starts.
//! let (back, header_len) = RdmaMsg::decode(&buf[..n]).unwrap();
//! assert_eq!((back, header_len), (msg, 28));
//! ```

#![warn(missing_docs)]

/// The generated types (RFC 8166 section 4.2), one per XDR definition; each
/// item's documentation names the spec section and line it came from.
pub mod xdr {
    include!(concat!(env!("OUT_DIR"), "/generated.rs"));
}

pub mod credits;
pub mod direction;
pub mod header;
pub mod marshal_call;
pub mod marshal_reply;
pub mod reassemble;
pub mod ulb;
pub mod verdict;
pub mod version;

pub use version::Version;

/// The runtime the generated types use: [`rt::Xdr`], [`rt::Seq`], [`rt::List`],
/// [`rt::Limits`] and [`rt::Error`].
pub use xdr_spec_rt as rt;

/// The XDR the types were generated from: the spec's text as extracted, with
/// the errata applied.
pub const XDR: &str = include_str!(concat!(env!("OUT_DIR"), "/generated.x"));

/// How the types were obtained: every erratum applied and every note from the
/// checker, one per line.
pub const GENERATION_REPORT: &str = include_str!(concat!(env!("OUT_DIR"), "/report.txt"));
