//! The connection lifecycle of RPC-over-RDMA, Version One (RFC 8166, with RFC 8797 private
//! data) and Version Two (draft-cel-nfsv4-rpcrdma-version-two-00), as sans-I/O state machines:
//! private data exchanged at connect sets the inline thresholds ([`thresholds`]); a requester
//! probes for Version Two and falls back to Version One on the same connection
//! ([`requester`]), remembering responders that lack it ([`memory`]); a responder answers each
//! call in the version the call used ([`responder`]). Bytes and clock readings go in, events
//! and bytes come out; [`datapath`] moves one message exchange over a `verbs` queue pair; and
//! [`client::Client`] and [`server::Server`] put them together behind an API that hides the
//! version: `call(message, binding) -> reply`, and a handler from call to reply.

pub mod backchannel;
pub mod client;
pub mod client_core;
pub mod datapath;
pub mod extension;
pub mod limits;
pub mod memory;
pub mod reply;
pub mod requester;
pub mod responder;
pub mod serve;
pub mod server;
pub mod thresholds;
