//! CALC's types and constants, generated from `calc.txt` by `build.rs`, and what the client
//! and the server share.

include!(concat!(env!("OUT_DIR"), "/generated.rs"));

/// Which parts of CALC's calls and replies are DDP-eligible (RFC 8166 section 6): none, so
/// every call and reply goes inline, or as a Long message when it is large.
pub const BINDING: rpcrdma_v1::ulb::OpaqueAtUlb =
    rpcrdma_v1::ulb::OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 1024 };
