//! Reply builders and the reply decoder (`rpc_msg` with `msg_type` REPLY, RFC 5531 section 9).
//!
//! Every accepted reply built here has an `AUTH_NONE` verifier, the verifier for calls with
//! `AUTH_NONE` or `AUTH_SYS` credentials; its head is written by
//! [`rpcrdma_v1::reassemble::encode_accepted_reply_head`], the one home of that layout, which
//! the responder's own GARBAGE_ARGS and SYSTEM_ERR replies also use.

use rpcrdma_v1::reassemble::{
    encode_accepted_reply_head, encode_garbage_args_reply, encode_system_err_reply, GARBAGE_ARGS_REPLY_LEN,
};

use super::call::Which;
use super::xdr::{put_u32, Reader};
use super::{Auth, OncError, REPLY};
use std::fmt;

const MSG_ACCEPTED: u32 = 0;
const MSG_DENIED: u32 = 1;
const SUCCESS: u32 = 0;
const PROG_UNAVAIL: u32 = 1;
const PROG_MISMATCH: u32 = 2;
const PROC_UNAVAIL: u32 = 3;
const GARBAGE_ARGS: u32 = 4;
const SYSTEM_ERR: u32 = 5;
const RPC_MISMATCH: u32 = 0;
const AUTH_ERROR: u32 = 1;

/// Appends the 24-byte head of an accepted reply with `accept_stat` `stat`, through `encode`
/// (one of `rpcrdma_v1::reassemble`'s encoders).
fn accepted(out: &mut Vec<u8>, encode: impl FnOnce(&mut [u8]) -> Result<usize, rpcrdma_v1::rt::Error>) {
    let at = out.len();
    out.resize(at + GARBAGE_ARGS_REPLY_LEN, 0);
    let n = encode(&mut out[at..]).expect("the head was given its 24 bytes");
    debug_assert_eq!(n, GARBAGE_ARGS_REPLY_LEN);
}

/// Appends the reply accepting call `xid` with `SUCCESS`, followed by `results` (the
/// procedure's results, already XDR-encoded: a multiple of four bytes).
///
/// ```
/// let mut out = Vec::new();
/// negotiate::onc::reply_success(7, &[0, 0, 0, 42], &mut out);
/// assert_eq!(out, [0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42]);
/// ```
pub fn reply_success(xid: u32, results: &[u8], out: &mut Vec<u8>) {
    out.reserve(GARBAGE_ARGS_REPLY_LEN + results.len());
    accepted(out, |b| encode_accepted_reply_head(xid, SUCCESS, b));
    out.extend_from_slice(results);
}

/// Appends the reply accepting call `xid` with `PROG_UNAVAIL`: the program is not served here.
///
/// ```
/// let mut out = Vec::new();
/// negotiate::onc::reply_prog_unavail(7, &mut out);
/// assert_eq!((out.len(), &out[20..]), (24, &[0, 0, 0, 1][..]));
/// ```
pub fn reply_prog_unavail(xid: u32, out: &mut Vec<u8>) {
    accepted(out, |b| encode_accepted_reply_head(xid, PROG_UNAVAIL, b));
}

/// Appends the reply accepting call `xid` with `PROG_MISMATCH`: the program is served, in
/// versions `low` to `high` only.
///
/// ```
/// let mut out = Vec::new();
/// negotiate::onc::reply_prog_mismatch(7, 2, 4, &mut out);
/// assert_eq!(&out[20..], [0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 4]);
/// ```
pub fn reply_prog_mismatch(xid: u32, low: u32, high: u32, out: &mut Vec<u8>) {
    accepted(out, |b| encode_accepted_reply_head(xid, PROG_MISMATCH, b));
    put_u32(out, low);
    put_u32(out, high);
}

/// Appends the reply accepting call `xid` with `PROC_UNAVAIL`: the program has no such
/// procedure.
///
/// ```
/// let mut out = Vec::new();
/// negotiate::onc::reply_proc_unavail(7, &mut out);
/// assert_eq!(&out[20..], [0, 0, 0, 3]);
/// ```
pub fn reply_proc_unavail(xid: u32, out: &mut Vec<u8>) {
    accepted(out, |b| encode_accepted_reply_head(xid, PROC_UNAVAIL, b));
}

/// Appends the reply accepting call `xid` with `GARBAGE_ARGS`: the arguments do not decode.
/// The same bytes as [`rpcrdma_v1::reassemble::encode_garbage_args_reply`], which writes them.
///
/// ```
/// let mut out = Vec::new();
/// negotiate::onc::reply_garbage_args(7, &mut out);
/// assert_eq!(&out[20..], [0, 0, 0, 4]);
/// ```
pub fn reply_garbage_args(xid: u32, out: &mut Vec<u8>) {
    accepted(out, |b| encode_garbage_args_reply(xid, b));
}

/// Appends the reply accepting call `xid` with `SYSTEM_ERR` (RFC 5531: "errors like memory
/// allocation failure"). The same bytes as
/// [`rpcrdma_v1::reassemble::encode_system_err_reply`], which writes them.
///
/// ```
/// let mut out = Vec::new();
/// negotiate::onc::reply_system_err(7, &mut out);
/// assert_eq!(&out[20..], [0, 0, 0, 5]);
/// ```
pub fn reply_system_err(xid: u32, out: &mut Vec<u8>) {
    accepted(out, |b| encode_system_err_reply(xid, b));
}

/// Appends the reply denying call `xid` with `RPC_MISMATCH`: this server speaks RPC versions
/// `low` to `high` (2 and 2 for RFC 5531), not the call's.
///
/// ```
/// let mut out = Vec::new();
/// negotiate::onc::reply_rpc_mismatch(7, 2, 2, &mut out);
/// assert_eq!(out, [0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2]);
/// ```
pub fn reply_rpc_mismatch(xid: u32, low: u32, high: u32, out: &mut Vec<u8>) {
    for w in [xid, REPLY, MSG_DENIED, RPC_MISMATCH, low, high] {
        put_u32(out, w);
    }
}

/// Appends the reply denying call `xid` with `AUTH_ERROR` and `stat`: why its credential or
/// verifier was refused.
///
/// ```
/// use negotiate::onc::{reply_auth_error, AuthStat};
/// let mut out = Vec::new();
/// reply_auth_error(7, AuthStat::TOOWEAK, &mut out);
/// assert_eq!(out, [0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5]);
/// ```
pub fn reply_auth_error(xid: u32, stat: AuthStat, out: &mut Vec<u8>) {
    for w in [xid, REPLY, MSG_DENIED, AUTH_ERROR, stat.0] {
        put_u32(out, w);
    }
}

/// An `auth_stat` (RFC 5531 section 9, and RFC 2203 for the RPCSEC_GSS values): why a
/// credential or verifier was refused. Any value decodes; the named ones are constants.
///
/// ```
/// use negotiate::onc::AuthStat;
/// assert_eq!(AuthStat::BADCRED, AuthStat(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AuthStat(pub u32);

impl AuthStat {
    /// Success (not sent in an AUTH_ERROR).
    pub const OK: AuthStat = AuthStat(0);
    /// Bad credential (seal broken).
    pub const BADCRED: AuthStat = AuthStat(1);
    /// The client must begin a new session.
    pub const REJECTEDCRED: AuthStat = AuthStat(2);
    /// Bad verifier (seal broken).
    pub const BADVERF: AuthStat = AuthStat(3);
    /// Verifier expired or replayed.
    pub const REJECTEDVERF: AuthStat = AuthStat(4);
    /// Refused for security reasons.
    pub const TOOWEAK: AuthStat = AuthStat(5);
    /// Bogus response verifier.
    pub const INVALIDRESP: AuthStat = AuthStat(6);
    /// Reason unknown.
    pub const FAILED: AuthStat = AuthStat(7);
}

impl fmt::Display for AuthStat {
    /// The name RFC 5531 section 9 gives the value (13 and 14 are RPCSEC_GSS's, RFC 2203),
    /// with its comment there, or the number.
    ///
    /// ```
    /// use negotiate::onc::AuthStat;
    /// assert_eq!(AuthStat::BADCRED.to_string(), "AUTH_BADCRED (bad credential)");
    /// assert_eq!(AuthStat(14).to_string(), "RPCSEC_GSS_CTXPROBLEM (problem with context)");
    /// assert_eq!(AuthStat(99).to_string(), "auth_stat 99");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            0 => "AUTH_OK",
            1 => "AUTH_BADCRED (bad credential)",
            2 => "AUTH_REJECTEDCRED (the client must begin a new session)",
            3 => "AUTH_BADVERF (bad verifier)",
            4 => "AUTH_REJECTEDVERF (verifier expired or replayed)",
            5 => "AUTH_TOOWEAK (rejected for security reasons)",
            6 => "AUTH_INVALIDRESP (bogus response verifier)",
            7 => "AUTH_FAILED (reason unknown)",
            8 => "AUTH_KERB_GENERIC (Kerberos generic error)",
            9 => "AUTH_TIMEEXPIRE (time of credential expired)",
            10 => "AUTH_TKT_FILE (problem with ticket file)",
            11 => "AUTH_DECODE (cannot decode authenticator)",
            12 => "AUTH_NET_ADDR (wrong net address in ticket)",
            13 => "RPCSEC_GSS_CREDPROBLEM (no credentials for user)",
            14 => "RPCSEC_GSS_CTXPROBLEM (problem with context)",
            n => return write!(f, "auth_stat {n}"),
        };
        f.write_str(name)
    }
}

/// What an accepted reply says (`accept_stat` and the data that goes with it).
///
/// ```
/// use negotiate::onc::{AcceptStat, Reply, ReplyHeader};
/// let mut out = Vec::new();
/// negotiate::onc::reply_prog_mismatch(1, 3, 4, &mut out);
/// let (h, _) = ReplyHeader::decode(&out).unwrap();
/// assert!(matches!(h.reply, Reply::Accepted { stat: AcceptStat::ProgMismatch { low: 3, high: 4 }, .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptStat {
    /// The call was executed; its results follow the header.
    Success,
    /// The program is not served.
    ProgUnavail,
    /// The program is served in versions `low` to `high` only.
    ProgMismatch {
        /// The lowest version served.
        low: u32,
        /// The highest version served.
        high: u32,
    },
    /// The program has no such procedure.
    ProcUnavail,
    /// The arguments did not decode.
    GarbageArgs,
    /// The server failed (memory allocation, a panicking handler).
    SystemErr,
}

impl fmt::Display for AcceptStat {
    /// The `accept_stat` name with what it means.
    ///
    /// ```
    /// use negotiate::onc::AcceptStat;
    /// let s = AcceptStat::ProgMismatch { low: 3, high: 4 }.to_string();
    /// assert_eq!(s, "PROG_MISMATCH (the program is served in versions 3 to 4 only)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcceptStat::Success => f.write_str("SUCCESS"),
            AcceptStat::ProgUnavail => f.write_str("PROG_UNAVAIL (the program is not served)"),
            AcceptStat::ProgMismatch { low, high } => {
                write!(f, "PROG_MISMATCH (the program is served in versions {low} to {high} only)")
            }
            AcceptStat::ProcUnavail => f.write_str("PROC_UNAVAIL (the program has no such procedure)"),
            AcceptStat::GarbageArgs => f.write_str("GARBAGE_ARGS (the arguments did not decode)"),
            AcceptStat::SystemErr => f.write_str("SYSTEM_ERR (the server failed to carry the call out)"),
        }
    }
}

/// Why a call was denied (`rejected_reply`).
///
/// ```
/// use negotiate::onc::{AuthStat, Rejected, Reply, ReplyHeader};
/// let mut out = Vec::new();
/// negotiate::onc::reply_auth_error(1, AuthStat::BADCRED, &mut out);
/// assert_eq!(ReplyHeader::decode(&out).unwrap().0.reply, Reply::Denied(Rejected::AuthError(AuthStat::BADCRED)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// The RPC version was not 2; the server speaks `low` to `high`.
    RpcMismatch {
        /// The lowest RPC version spoken.
        low: u32,
        /// The highest RPC version spoken.
        high: u32,
    },
    /// The credential or verifier was refused.
    AuthError(AuthStat),
}

impl fmt::Display for Rejected {
    /// ```
    /// use negotiate::onc::{AuthStat, Rejected};
    /// assert_eq!(Rejected::AuthError(AuthStat::TOOWEAK).to_string(), "AUTH_ERROR: AUTH_TOOWEAK (rejected for security reasons)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::RpcMismatch { low, high } => {
                // (Also a backward-direction call's reply, whose replier is the client: "peer".)
                write!(f, "RPC_MISMATCH (the peer speaks RPC versions {low} to {high}, not 2)")
            }
            Rejected::AuthError(stat) => write!(f, "AUTH_ERROR: {stat}"),
        }
    }
}

/// An RPC reply's body: accepted (with the server's verifier and its `accept_stat`) or denied.
///
/// ```
/// use negotiate::onc::{AcceptStat, Auth, Reply};
/// let r = Reply::Accepted { verf: Auth::None, stat: AcceptStat::Success };
/// assert!(r.is_success());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// MSG_ACCEPTED.
    Accepted {
        /// The server's verifier.
        verf: Auth,
        /// What became of the call.
        stat: AcceptStat,
    },
    /// MSG_DENIED.
    Denied(Rejected),
}

impl Reply {
    /// Whether the call was accepted with SUCCESS, so that results follow.
    ///
    /// ```
    /// use negotiate::onc::{Reply, Rejected};
    /// assert!(!Reply::Denied(Rejected::RpcMismatch { low: 2, high: 2 }).is_success());
    /// ```
    pub fn is_success(&self) -> bool {
        matches!(self, Reply::Accepted { stat: AcceptStat::Success, .. })
    }
}

impl fmt::Display for Reply {
    /// What became of the call, without the verifier.
    ///
    /// ```
    /// use negotiate::onc::{AcceptStat, Auth, Reply};
    /// let r = Reply::Accepted { verf: Auth::None, stat: AcceptStat::GarbageArgs };
    /// assert_eq!(r.to_string(), "accepted, GARBAGE_ARGS (the arguments did not decode)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Accepted { stat, .. } => write!(f, "accepted, {stat}"),
            Reply::Denied(why) => write!(f, "denied, {why}"),
        }
    }
}

/// A decoded RPC reply header: the XID it answers and what it says.
///
/// ```
/// use negotiate::onc::{AcceptStat, Auth, Reply, ReplyHeader};
/// let mut out = Vec::new();
/// negotiate::onc::reply_success(9, &[0, 0, 0, 1], &mut out);
/// let (h, results_at) = ReplyHeader::decode(&out).unwrap();
/// assert_eq!(h, ReplyHeader { xid: 9, reply: Reply::Accepted { verf: Auth::None, stat: AcceptStat::Success } });
/// assert_eq!(&out[results_at..], [0, 0, 0, 1]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The XID of the call answered.
    pub xid: u32,
    /// What the reply says.
    pub reply: Reply,
}

impl ReplyHeader {
    /// Decodes a reply header from the start of `msg`, and returns it with the offset of
    /// what follows (the results, for SUCCESS; the end of the header otherwise). Bounded as
    /// [`super::CallHeader::decode`] is: the verifier's body is at most
    /// [`super::MAX_AUTH_BYTES`] and must lie within `msg`; a `msg_type`, `reply_stat`,
    /// `accept_stat` or `reject_stat` outside RFC 5531's enums is [`OncError::Unexpected`].
    ///
    /// ```
    /// use negotiate::onc::{OncError, ReplyHeader};
    /// let mut out = Vec::new();
    /// negotiate::onc::reply_garbage_args(3, &mut out);
    /// assert!(ReplyHeader::decode(&out).is_ok());
    /// assert!(matches!(ReplyHeader::decode(&out[..23]), Err(OncError::Truncated { field: "accept_stat", .. })));
    /// ```
    pub fn decode(msg: &[u8]) -> Result<(ReplyHeader, usize), OncError> {
        let mut r = Reader::new(msg);
        let xid = r.u32("xid")?;
        let mtype = r.u32("msg_type")?;
        if mtype != REPLY {
            return Err(OncError::Unexpected { field: "msg_type", value: mtype });
        }
        let reply = match r.u32("reply_stat")? {
            MSG_ACCEPTED => {
                let verf = Auth::decode(&mut r, Which::Verf)?;
                let stat = match r.u32("accept_stat")? {
                    SUCCESS => AcceptStat::Success,
                    PROG_UNAVAIL => AcceptStat::ProgUnavail,
                    PROG_MISMATCH => AcceptStat::ProgMismatch {
                        low: r.u32("mismatch_info.low")?,
                        high: r.u32("mismatch_info.high")?,
                    },
                    PROC_UNAVAIL => AcceptStat::ProcUnavail,
                    GARBAGE_ARGS => AcceptStat::GarbageArgs,
                    SYSTEM_ERR => AcceptStat::SystemErr,
                    value => return Err(OncError::Unexpected { field: "accept_stat", value }),
                };
                Reply::Accepted { verf, stat }
            }
            MSG_DENIED => Reply::Denied(match r.u32("reject_stat")? {
                RPC_MISMATCH => {
                    Rejected::RpcMismatch { low: r.u32("mismatch_info.low")?, high: r.u32("mismatch_info.high")? }
                }
                AUTH_ERROR => Rejected::AuthError(AuthStat(r.u32("auth_stat")?)),
                value => return Err(OncError::Unexpected { field: "reject_stat", value }),
            }),
            value => return Err(OncError::Unexpected { field: "reply_stat", value }),
        };
        Ok((ReplyHeader { xid, reply }, r.at))
    }
}

/// The results of a reply to call `xid`, if it was accepted with SUCCESS: a client's usual
/// check. Otherwise [`OncError::XidMismatch`], [`OncError::NotSuccess`] with what the reply
/// said, or the header's decoding error.
///
/// ```
/// use negotiate::onc::{results, AcceptStat, OncError, Reply};
/// let mut out = Vec::new();
/// negotiate::onc::reply_success(5, &[0, 0, 0, 8], &mut out);
/// assert_eq!(results(&out, 5), Ok(&[0, 0, 0, 8][..]));
/// assert_eq!(results(&out, 6), Err(OncError::XidMismatch { expected: 6, got: 5 }));
/// out.clear();
/// negotiate::onc::reply_proc_unavail(5, &mut out);
/// assert!(matches!(results(&out, 5), Err(OncError::NotSuccess(Reply::Accepted { stat: AcceptStat::ProcUnavail, .. }))));
/// ```
pub fn results(msg: &[u8], xid: u32) -> Result<&[u8], OncError> {
    let (h, at) = ReplyHeader::decode(msg)?;
    if h.xid != xid {
        return Err(OncError::XidMismatch { expected: xid, got: h.xid });
    }
    if !h.reply.is_success() {
        return Err(OncError::NotSuccess(h.reply));
    }
    Ok(&msg[at..])
}
