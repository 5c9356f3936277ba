//! Typed ONC RPC services over RPC-over-RDMA: the transport half of what `xdr-spec`
//! generates from a `program` block (`Build::services`, `xdr_spec_rt::rpc`).
//!
//! - [`RpcClient`] is the generated `Client`'s transport ([`Caller`]): it takes an XID, builds
//!   the RPC call header, encodes the arguments straight after it into the one message the
//!   [`Client`](crate::client::Client) sends (lent, so that a large DDP-eligible argument is RDMA-Read from it in
//!   place), and decodes the reply into the procedure's [`Results`], or a [`CallError`] that
//!   names the procedure and says what went wrong: the transport, the server's RPC-level
//!   refusal, or results that do not decode.
//! - [`Services`] is a server [`Handler`](crate::server::Handler) for any number of
//!   generated `Server`s ([`Program`]s): it decodes the RPC call header, finds the program
//!   and version, and answers as RFC 5531 section 9 says when it cannot serve the call
//!   (PROG_UNAVAIL, PROG_MISMATCH with the versions it has, PROC_UNAVAIL, GARBAGE_ARGS,
//!   SYSTEM_ERR); the results are encoded straight into the reply.
//!
//! ```
//! use std::sync::Arc;
//! use negotiate::client::{Client, ClientConfig};
//! use negotiate::server::{Server, ServerConfig};
//! use negotiate::service::{CallError, RpcClient, Services, NO_CHUNKS};
//! use rpcrdma_verbs::InProcess;
//! use xdr_spec_rt::rpc::{self, Caller, Dispatched, Procedure, Program, Reply};
//!
//! // By hand here, what `xdr-spec` generates from
//! // `program P { version V { unsigned int DOUBLE(unsigned int) = 1; } = 1; } = 0x20000001;`
//! struct Double;
//! impl Procedure for Double {
//!     const PROGRAM: u32 = 0x2000_0001;
//!     const VERSION: u32 = 1;
//!     const PROCEDURE: u32 = 1;
//!     const NAME: &'static str = "DOUBLE";
//!     type Args<'a> = u32;
//!     type Results<'a> = u32;
//! }
//! struct Doubler;
//! impl Program for Doubler {
//!     fn program(&self) -> u32 { 0x2000_0001 }
//!     fn version(&self) -> u32 { 1 }
//!     fn dispatch(&self, procedure: u32, args: &[u8], results: &mut Vec<u8>) -> Dispatched {
//!         match (procedure, rpc::decode_args::<Double>(args)) {
//!             (1, Ok(n)) => Reply::<Double>::new(results).ok(&(2 * n)).into(),
//!             (1, Err(_)) => Dispatched::GarbageArgs,
//!             _ => Dispatched::ProcUnavail,
//!         }
//!     }
//! }
//! let services = Services::new().with(Doubler);
//! let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(NO_CHUNKS), services).unwrap();
//! let client = RpcClient::new(Client::new(InProcess, &server.local_addr(), ClientConfig::default()), NO_CHUNKS);
//! assert_eq!(client.call::<Double>(&21).unwrap().get(), 42);
//!
//! // A version the server does not have: the error names the procedure and the versions.
//! struct DoubleV2;
//! impl Procedure for DoubleV2 {
//!     const PROGRAM: u32 = 0x2000_0001;
//!     const VERSION: u32 = 2;
//!     const PROCEDURE: u32 = 1;
//!     const NAME: &'static str = "DOUBLE";
//!     type Args<'a> = u32;
//!     type Results<'a> = u32;
//! }
//! let e = client.call::<DoubleV2>(&1).unwrap_err();
//! assert!(matches!(e, CallError::VersionMismatch { low: 1, high: 1, .. }), "{e}");
//! assert_eq!(e.to_string(), "DOUBLE (program 0x20000001 version 2): the server has versions 1 to 1 of the program");
//! ```

mod async_server;
mod binding;
mod client;
pub mod error;
mod server;

pub use async_server::AsyncServices;
pub use binding::Bindings;
pub use client::{RpcClient, NO_CHUNKS};
pub use error::CallError;
pub use server::Services;
pub use xdr_spec_rt::rpc::{Caller, Program, Results};
