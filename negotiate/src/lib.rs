//! The connection lifecycle of RPC-over-RDMA, Version One (RFC 8166, with RFC 8797 private
//! data) and Version Two (draft-cel-nfsv4-rpcrdma-version-two-00), as sans-I/O state machines:
//! private data exchanged at connect sets the inline thresholds ([`thresholds`]); a requester
//! probes for Version Two and falls back to Version One on the same connection
//! ([`requester`]), remembering responders that lack it ([`memory`]); a responder answers each
//! call in the version the call used ([`responder`]). Bytes and clock readings go in, events
//! and bytes come out; [`datapath`] moves one message exchange over a `verbs` queue pair; and
//! [`client::Client`] and [`server::Server`] put them together behind an API that hides the
//! version: `call(message, binding) -> reply`, and a handler from call to reply.
//! [`onc`] builds and decodes the ONC RPC (RFC 5531) headers of those messages: call
//! headers with AUTH_NONE or AUTH_SYS, accepted and denied replies, and XIDs. [`service`]
//! carries typed programs generated from a specification's `program` block (a client, a
//! server trait, an Upper-Layer Binding; README.md's "Use it as a library" builds one from
//! a `.x` file), so that no RPC header, XID or dispatch is written by hand.
//!
//! # Writing an extension
//!
//! Version Two can be extended without a new version (draft section 3.1): an extension owns
//! `rdma_opttype` values and gives meaning to the RDMA_OPTIONAL messages carrying them. Give
//! its handler to [`server::ServerConfig::extensions`] (or [`client::ClientConfig::extensions`]
//! for the other direction) as an [`extension::Extension`]; every connection settled on
//! Version Two then hands it the RDMA_OPTIONAL messages of its opttypes, and answers any
//! other opttype with RDMA_ERR_INVAL_OPTION. The handler may answer with an RDMA_OPTIONAL of
//! its own ([`rpcrdma_v2::options::OptionOutcome::Answer`]). The other side sends one with
//! [`client::Client::send_option`] (or [`backchannel::Backchannel::send_option`]) and learns
//! the answer, or that the peer does not support it, and falls back.
//!
//! ```
//! use std::sync::Arc;
//! use negotiate::client::{Client, ClientConfig};
//! use negotiate::extension::{Extension, OptionReply};
//! use negotiate::server::{Server, ServerConfig};
//! use rpcrdma_v1::ulb::OpaqueAtUlb;
//! use rpcrdma_v2::options::{OptionOutcome, OptionalAnswer, OptionalMessage};
//! use rpcrdma_verbs::InProcess;
//!
//! // A made-up extension: opttype 0x100 asks for the server's name, answered as opttype 0x101.
//! const WHO: u32 = 0x100;
//! let who = Extension::new([WHO], |m: &OptionalMessage<'_>| {
//!     if !m.payload.is_empty() {
//!         return OptionOutcome::Unsupported; // its document says no payload follows
//!     }
//!     OptionOutcome::Answer(OptionalAnswer { opttype: WHO + 1, optinfo: b"server-1".to_vec() })
//! });
//! let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
//! // Any RPC call is answered SUCCESS with no results.
//! let null = |call: &[u8]| {
//!     let mut reply = Vec::new();
//!     negotiate::onc::reply_success(negotiate::onc::peek_xid(call).unwrap_or(0), &[], &mut reply);
//!     reply
//! };
//! let cfg = ServerConfig::default().extensions(vec![who]);
//! let server = Server::start(InProcess, "inproc:*", cfg, Arc::new(ulb), null).unwrap();
//!
//! let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
//! let call = negotiate::onc::CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap();
//! client.call(&call, &ulb).unwrap(); // settles Version Two
//! match client.send_option(WHO, &[], &[]).unwrap() {
//!     OptionReply::Answered { opttype, optinfo } => assert_eq!((opttype, &optinfo[..]), (WHO + 1, &b"server-1"[..])),
//!     OptionReply::NotSupported => unreachable!("this server has the extension"),
//! }
//! // An opttype the server does not know: the caller falls back.
//! assert_eq!(client.send_option(0x200, &[], &[]).unwrap(), OptionReply::NotSupported);
//! ```

//! # Seeing what happens
//!
//! The crate reports through the [`log`](https://docs.rs/log) facade; install any logger
//! (`env_logger`, `tracing`'s bridge, or a few lines of your own) to see it. Targets are the
//! modules' paths (`negotiate::requester`, `negotiate::client::lane`,
//! `negotiate::server::accept`, `negotiate::server::event_loop`, ...; the rdma-core backend's are `rpcrdma_verbs::rdma::...`).
//!
//! - info: the lifecycle: each connection attempt (address, attempt number), the RFC 8797
//!   private data sent and received (decoded), the Version Two probe, an RDMA_ERR_VERS answer
//!   and the fallback, the version settled on with its inline thresholds, the transport
//!   properties exchange's outcome, retransmissions, and each connection's end with its
//!   reason;
//! - warn: a peer's misbehaviour or refusal: an RDMA_ERROR received or sent (with its XID and
//!   code), a malformed reply, a call beyond the credits granted, a call with no reply in time;
//! - debug: per message (an RDMA_OPTIONAL's outcome; the rdma-core backend's error completions
//!   and CM events).
//!
//! Nothing is logged per call on the hot path above debug, and with no logger installed a
//! disabled event costs a load and a compare: no formatting, no allocation
//! (negotiate/tests/allocations.rs counts).
//!
//! ```
//! use std::sync::Arc;
//! use negotiate::client::{Client, ClientConfig};
//! use negotiate::server::{Server, ServerConfig};
//! use rpcrdma_v1::ulb::OpaqueAtUlb;
//! use rpcrdma_verbs::InProcess;
//!
//! // A ten-line logger: every event on stderr.
//! struct Stderr;
//! impl log::Log for Stderr {
//!     fn enabled(&self, _: &log::Metadata<'_>) -> bool { true }
//!     fn log(&self, r: &log::Record<'_>) { eprintln!("{} {}: {}", r.level(), r.target(), r.args()) }
//!     fn flush(&self) {}
//! }
//! log::set_logger(&Stderr).unwrap();
//! log::set_max_level(log::LevelFilter::Info);
//!
//! let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
//! let echo = |call: &[u8]| [&call[..4], &[0, 0, 0, 1][..], &call[8..]].concat();
//! let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), echo).unwrap();
//! let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
//! client.call(&[0, 0, 0, 1, 0, 0, 0, 0], &ulb).unwrap();
//! // stderr: "INFO negotiate::client::lane: connecting to inproc:... (attempt 1)", the private
//! // data, "probing ... for Version Two", "settled on version 2 ...".
//! ```

#![warn(missing_docs)]

#[macro_use]
mod setters;
mod application;
mod client_config;
mod flood;
mod own_keys;
mod spin;

pub mod backchannel;
pub mod budget;
pub mod client;
pub mod connection;
pub mod datapath;
pub mod extension;
pub mod extension07;
pub mod host_auth;
pub mod limits;
pub mod memory;
pub mod onc;
pub mod reply;
pub mod requester;
pub mod responder;
pub mod server;
pub mod service;
pub mod thresholds;
