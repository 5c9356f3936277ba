//! ONC RPC (RFC 5531) message headers, for the RPC messages that [`Client`](crate::client::Client)
//! carries and a [`Server`](crate::server::Server)'s handler answers: a call header builder
//! and decoder ([`CallHeader`], with [`Auth::None`] or [`Auth::Sys`] credentials), reply
//! builders for every accepted and denied reply ([`reply_success`], [`reply_prog_unavail`],
//! [`reply_prog_mismatch`], [`reply_proc_unavail`], [`reply_garbage_args`],
//! [`reply_system_err`], [`reply_rpc_mismatch`], [`reply_auth_error`]), a reply decoder
//! ([`ReplyHeader`], [`results`]), and transaction IDs ([`XidSource`]).
//!
//! The decoders take received bytes: every length a peer states is checked against its bound
//! (an `opaque_auth` body of at most 400 bytes, a machine name of 255, 16 gids) and against
//! what is left of the input before anything is sliced or allocated, and an error names the
//! field ([`OncError`]).
//!
//! # A program served and called
//!
//! A made-up program 0x2000_0001, version 1, with two procedures: 0 (NULL) and 1 (ADD, two
//! unsigned ints in, their wrapping sum out). The server decodes each call's header,
//! dispatches on program, version and procedure, and answers an unknown procedure with
//! PROC_UNAVAIL and arguments that do not decode with GARBAGE_ARGS; the client numbers its
//! calls from an [`XidSource`] and decodes the replies.
//!
//! ```
//! use std::sync::Arc;
//! use negotiate::client::{Client, ClientConfig};
//! use negotiate::onc::{self, AcceptStat, CallHeader, OncError, Reply, ReplyHeader, XidSource};
//! use negotiate::server::{Server, ServerConfig};
//! use rpcrdma_v1::ulb::OpaqueAtUlb;
//! use rpcrdma_verbs::InProcess;
//!
//! const PROG: u32 = 0x2000_0001;
//! const VERS: u32 = 1;
//! const NULL: u32 = 0;
//! const ADD: u32 = 1;
//!
//! fn serve(call: &[u8]) -> Vec<u8> {
//!     let mut reply = Vec::new();
//!     let (h, args_at) = match CallHeader::decode(call) {
//!         Ok(decoded) => decoded,
//!         Err(OncError::RpcVersion { xid, .. }) => {
//!             onc::reply_rpc_mismatch(xid, 2, 2, &mut reply);
//!             return reply;
//!         }
//!         Err(e) if e.in_auth() => {
//!             if let Some(xid) = onc::peek_xid(call) {
//!                 onc::reply_auth_error(xid, onc::AuthStat::BADCRED, &mut reply);
//!             }
//!             return reply;
//!         }
//!         Err(_) => return reply, // not a call: nothing to answer
//!     };
//!     let args = &call[args_at..];
//!     match (h.prog, h.vers, h.proc) {
//!         (PROG, VERS, NULL) => onc::reply_success(h.xid, &[], &mut reply),
//!         (PROG, VERS, ADD) => match args {
//!             [a0, a1, a2, a3, b0, b1, b2, b3] => {
//!                 let sum = u32::from_be_bytes([*a0, *a1, *a2, *a3])
//!                     .wrapping_add(u32::from_be_bytes([*b0, *b1, *b2, *b3]));
//!                 onc::reply_success(h.xid, &sum.to_be_bytes(), &mut reply);
//!             }
//!             _ => onc::reply_garbage_args(h.xid, &mut reply),
//!         },
//!         (PROG, VERS, _) => onc::reply_proc_unavail(h.xid, &mut reply),
//!         (PROG, _, _) => onc::reply_prog_mismatch(h.xid, VERS, VERS, &mut reply),
//!         _ => onc::reply_prog_unavail(h.xid, &mut reply),
//!     }
//!     reply
//! }
//!
//! let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
//! let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), serve).unwrap();
//! let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
//! let xids = XidSource::new(1);
//!
//! // ADD 40 + 2.
//! let call = CallHeader::new(xids.next(), PROG, VERS, ADD);
//! let reply = client.call(&call.message(&[0, 0, 0, 40, 0, 0, 0, 2]).unwrap(), &ulb).unwrap();
//! assert_eq!(onc::results(&reply, call.xid), Ok(&[0, 0, 0, 42][..]));
//!
//! // NULL, with the reply header decoded by hand.
//! let call = CallHeader::new(xids.next(), PROG, VERS, NULL);
//! let reply = client.call(&call.message(&[]).unwrap(), &ulb).unwrap();
//! let (h, results_at) = ReplyHeader::decode(&reply).unwrap();
//! assert_eq!((h.xid, h.reply.is_success(), reply.len() - results_at), (call.xid, true, 0));
//!
//! // A procedure the program lacks, and arguments that do not decode.
//! let call = CallHeader::new(xids.next(), PROG, VERS, 7);
//! let reply = client.call(&call.message(&[]).unwrap(), &ulb).unwrap();
//! assert!(matches!(ReplyHeader::decode(&reply).unwrap().0.reply, Reply::Accepted { stat: AcceptStat::ProcUnavail, .. }));
//! let call = CallHeader::new(xids.next(), PROG, VERS, ADD);
//! let reply = client.call(&call.message(&[0, 0, 0, 1]).unwrap(), &ulb).unwrap();
//! assert!(matches!(onc::results(&reply, call.xid), Err(OncError::NotSuccess(Reply::Accepted { stat: AcceptStat::GarbageArgs, .. }))));
//!
//! // Another version, and another program.
//! let call = CallHeader::new(xids.next(), PROG, 9, NULL);
//! let reply = client.call(&call.message(&[]).unwrap(), &ulb).unwrap();
//! assert!(matches!(ReplyHeader::decode(&reply).unwrap().0.reply, Reply::Accepted { stat: AcceptStat::ProgMismatch { low: 1, high: 1 }, .. }));
//! let call = CallHeader::new(xids.next(), PROG + 1, VERS, NULL);
//! let reply = client.call(&call.message(&[]).unwrap(), &ulb).unwrap();
//! assert!(matches!(ReplyHeader::decode(&reply).unwrap().0.reply, Reply::Accepted { stat: AcceptStat::ProgUnavail, .. }));
//! ```

mod call;
mod reply;
mod xdr;

use std::sync::atomic::{AtomicU32, Ordering};

pub use call::{Auth, AuthSys, CallHeader};
pub use reply::{
    reply_auth_error, reply_garbage_args, reply_proc_unavail, reply_prog_mismatch, reply_prog_unavail,
    reply_rpc_mismatch, reply_success, reply_system_err, results, AcceptStat, AuthStat, Rejected, Reply, ReplyHeader,
};

/// The RPC protocol version, `rpcvers`, of RFC 5531: 2.
pub const RPC_VERSION: u32 = 2;
/// `msg_type` CALL.
pub const CALL: u32 = 0;
/// `msg_type` REPLY.
pub const REPLY: u32 = 1;
/// `auth_flavor` AUTH_NONE (RFC 5531 section 8.2).
pub const AUTH_NONE: u32 = 0;
/// `auth_flavor` AUTH_SYS (RFC 5531 appendix A).
pub const AUTH_SYS: u32 = 1;
/// The largest `opaque_auth` body, in bytes (RFC 5531 section 8.2: `opaque body<400>`).
pub const MAX_AUTH_BYTES: u32 = 400;
/// The longest `authsys_parms.machinename`, in bytes (`string machinename<255>`).
pub const MAX_MACHINE_NAME: u32 = 255;
/// The most `authsys_parms.gids` (`unsigned int gids<16>`).
pub const MAX_GIDS: u32 = 16;

/// Why an RPC header could not be encoded or decoded, naming the field.
///
/// ```
/// use negotiate::onc::{CallHeader, OncError};
/// let e = CallHeader::decode(&[0, 0, 0, 1, 0, 0]).unwrap_err();
/// assert_eq!(e, OncError::Truncated { field: "msg_type", at: 4, need: 4, have: 2 });
/// assert_eq!(e.to_string(), "RPC header ends within msg_type: 4 bytes needed at offset 4, 2 left");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OncError {
    /// The message ends within `field`.
    #[error("RPC header ends within {field}: {need} bytes needed at offset {at}, {have} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Its offset in the message (or in the `opaque_auth` body, for `authsys_parms` fields).
        at: usize,
        /// The bytes it needs.
        need: usize,
        /// The bytes left.
        have: usize,
    },
    /// A variable-length `field` is longer than its bound.
    #[error("RPC header field {field} has length {len}, more than its bound {max}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its stated (or, when encoding, actual) length.
        len: u32,
        /// Its bound.
        max: u32,
    },
    /// A `field` that is a string is not UTF-8.
    #[error("RPC header field {field} is not UTF-8")]
    NotUtf8 {
        /// The field.
        field: &'static str,
    },
    /// An `AUTH_SYS` body goes on after its `authsys_parms`.
    #[error("RPC header: {extra} bytes follow authsys_parms in its opaque_auth ({field})")]
    Trailing {
        /// Which body.
        field: &'static str,
        /// How many bytes.
        extra: usize,
    },
    /// A discriminant outside RFC 5531's enum (`msg_type` REPLY where a CALL was expected,
    /// an `accept_stat` of 9).
    #[error("RPC header field {field} has unexpected value {value}")]
    Unexpected {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// A call whose `rpcvers` is not 2: answer it with [`reply_rpc_mismatch`] (2, 2).
    #[error("RPC call {xid:#x} has rpcvers {rpcvers}, not 2")]
    RpcVersion {
        /// The call's XID.
        xid: u32,
        /// Its `rpcvers`.
        rpcvers: u32,
    },
    /// A reply answers another XID ([`results`]).
    #[error("RPC reply to XID {got:#x}, expected {expected:#x}")]
    XidMismatch {
        /// The call's XID.
        expected: u32,
        /// The reply's.
        got: u32,
    },
    /// A reply that is not an accepted SUCCESS ([`results`]).
    #[error("the RPC reply is not SUCCESS: {0}")]
    NotSuccess(Reply),
}

impl OncError {
    /// Whether the error is in a call's credential or verifier (a field named `cred.` or
    /// `verf.`), which a server answers with [`reply_auth_error`] (`AUTH_BADCRED` or
    /// `AUTH_BADVERF`) rather than silence.
    ///
    /// ```
    /// use negotiate::onc::{CallHeader, OncError};
    /// let mut msg = CallHeader::new(1, 2, 3, 4).message(&[]).unwrap();
    /// msg[31] = 200; // the verifier's body length, with nothing after it
    /// let e = CallHeader::decode(&msg).unwrap_err();
    /// assert!(e.in_auth(), "{e}");
    /// assert!(!CallHeader::decode(&msg[..10]).unwrap_err().in_auth());
    /// ```
    pub fn in_auth(&self) -> bool {
        self.auth_stat().is_some()
    }

    /// The AUTH_ERROR a server answers for this error (RFC 5531 section 9): AUTH_BADCRED when
    /// the credential is malformed, AUTH_BADVERF when the verifier is; `None` elsewhere.
    ///
    /// ```
    /// use negotiate::onc::{AuthStat, CallHeader};
    /// let mut msg = CallHeader::new(1, 100003, 3, 0).message(&[]).unwrap();
    /// msg[28..32].copy_from_slice(&500u32.to_be_bytes()); // a credential body of 500 bytes
    /// assert_eq!(CallHeader::decode(&msg).unwrap_err().auth_stat(), Some(AuthStat::BADCRED));
    /// ```
    pub fn auth_stat(&self) -> Option<reply::AuthStat> {
        let field = match self {
            OncError::Truncated { field, .. }
            | OncError::TooLong { field, .. }
            | OncError::NotUtf8 { field }
            | OncError::Trailing { field, .. } => field,
            _ => return None,
        };
        if field.starts_with("cred.") {
            Some(reply::AuthStat::BADCRED)
        } else if field.starts_with("verf.") {
            Some(reply::AuthStat::BADVERF)
        } else {
            None
        }
    }
}

/// The XID of an RPC message (its first word), if it has one: what a server needs to answer a
/// call whose header does not decode.
///
/// ```
/// assert_eq!(negotiate::onc::peek_xid(&[0, 0, 1, 0, 9]), Some(256));
/// assert_eq!(negotiate::onc::peek_xid(&[0, 0, 1]), None);
/// ```
pub fn peek_xid(msg: &[u8]) -> Option<u32> {
    msg.get(..4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// Transaction IDs for calls: consecutive values from a start, skipping 0, shared between
/// threads. A [`Client`](crate::client::Client) keeps no XIDs of its own: give each call the
/// next one, e.g. `client.call(&CallHeader::new(xids.next(), prog, vers, proc).message(&args)?, &ulb)`.
/// Consecutive XIDs also spread calls evenly over a client's connections (it picks one by XID
/// modulo [`ClientConfig::connections`](crate::client::ClientConfig::connections)). A client
/// that restarts should not reuse the XIDs of its previous life while a server may still
/// cache their replies (RFC 5531 section 9: the XID is how a server detects retransmissions):
/// [`XidSource::seeded`] starts from the clock.
///
/// ```
/// use negotiate::onc::XidSource;
/// let xids = XidSource::new(u32::MAX);
/// assert_eq!([xids.next(), xids.next(), xids.next()], [u32::MAX, 1, 2]);
/// ```
#[derive(Debug)]
pub struct XidSource(AtomicU32);

impl XidSource {
    /// A source whose first XID is `first` (or 1, if `first` is 0).
    ///
    /// ```
    /// assert_eq!(negotiate::onc::XidSource::new(0).next(), 1);
    /// ```
    pub fn new(first: u32) -> Self {
        XidSource(AtomicU32::new(first))
    }

    /// A source starting from a value taken from the clock and the process ID, so that two
    /// runs of a program do not begin with the same XIDs.
    ///
    /// ```
    /// assert_ne!(negotiate::onc::XidSource::seeded().next(), 0);
    /// ```
    pub fn seeded() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        // A multiplicative mix, so that starts a few nanoseconds apart are far apart.
        let mixed = (nanos ^ (u64::from(std::process::id()) << 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        XidSource::new((mixed >> 32) as u32)
    }

    /// The next XID: never 0, and distinct from the previous 2^32 - 2.
    ///
    /// ```
    /// let xids = negotiate::onc::XidSource::new(10);
    /// assert_eq!((xids.next(), xids.next()), (10, 11));
    /// ```
    // Not an Iterator: it is shared by reference between threads.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&self) -> u32 {
        loop {
            let xid = self.0.fetch_add(1, Ordering::Relaxed);
            if xid != 0 {
                return xid;
            }
        }
    }
}
