//! [`Services`]: generated `Server`s as one server [`Handler`].

use xdr_spec_rt::rpc::{Dispatched, Program};

use crate::onc::{self, CallHeader, OncError};
use crate::server::Handler;

/// The programs a server serves, each version a [`Program`] (a generated `Server`), as one
/// [`Handler`] for [`Server::start`](crate::server::Server::start). It answers each call as
/// RFC 5531 section 9 says:
///
/// - a call whose RPC version is not 2: RPC_MISMATCH (2 to 2);
/// - a call whose credential or verifier is malformed: AUTH_ERROR (AUTH_BADCRED,
///   AUTH_BADVERF);
/// - a call whose header does not decode otherwise: GARBAGE_ARGS; a message too short to
///   hold an XID gets an empty reply here, which the server answers SYSTEM_ERR with the
///   transport header's XID ([`Handler`]);
/// - a program not served: PROG_UNAVAIL; a version not served: PROG_MISMATCH with the lowest
///   and highest versions served;
/// - then what the version's [`Program`] says: its results (SUCCESS), PROC_UNAVAIL,
///   GARBAGE_ARGS, or SYSTEM_ERR (logged as a warning when the results broke a bound of the
///   specification).
///
/// The RPC reply header is written first and the results encoded straight after it, into
/// the reply buffer the server keeps between calls.
#[derive(Default)]
pub struct Services {
    programs: Vec<Box<dyn Program>>,
    /// Each program's number and version, in the same order: looked up on every call.
    ids: Vec<(u32, u32)>,
}

impl Services {
    /// No program yet.
    pub fn new() -> Self {
        Services::default()
    }

    /// These services and `program` too. A second [`Program`] for the same program and
    /// version replaces the first.
    #[must_use]
    pub fn with(mut self, program: impl Program + 'static) -> Self {
        self.programs.retain(|p| (p.program(), p.version()) != (program.program(), program.version()));
        self.programs.push(Box::new(program));
        self.ids = self.programs.iter().map(|p| (p.program(), p.version())).collect();
        self
    }
}

/// The versions of `program` that `ids` (each served program's number and version) hold,
/// lowest and highest.
fn versions(ids: impl Iterator<Item = (u32, u32)>, program: u32) -> Option<(u32, u32)> {
    ids.filter(|&(p, _)| p == program).map(|(_, v)| v).fold(None, |range, v| match range {
        None => Some((v, v)),
        Some((low, high)) => Some((low.min(v), high.max(v))),
    })
}

/// Which of `ids` (each served program's number and version) `call` names, with its header
/// and where its arguments start; or, having written into `reply` the answer RFC 5531
/// section 9 gives a call nothing here serves, `None`. The one home of that rule, for
/// [`Services`] and [`AsyncServices`].
pub(super) fn route(ids: &[(u32, u32)], call: &[u8], reply: &mut Vec<u8>) -> Option<(usize, CallHeader, usize)> {
    let (h, args_at) = match CallHeader::decode(call) {
        Ok(decoded) => decoded,
        Err(e) => {
            let Some(xid) = onc::peek_xid(call) else {
                log::warn!("a call of {} bytes has no XID to answer: no reply", call.len());
                return None;
            };
            match (e.auth_stat(), e) {
                (_, OncError::RpcVersion { .. }) => onc::reply_rpc_mismatch(xid, 2, 2, reply),
                (Some(stat), e) => {
                    log::warn!("call {xid:#010x}: {e}; answered AUTH_ERROR, {stat}");
                    onc::reply_auth_error(xid, stat, reply);
                }
                (None, e) => {
                    log::warn!("call {xid:#010x}: its RPC header does not decode: {e}; answered GARBAGE_ARGS");
                    onc::reply_garbage_args(xid, reply);
                }
            }
            return None;
        }
    };
    let Some(i) = ids.iter().position(|&id| id == (h.prog, h.vers)) else {
        match versions(ids.iter().copied(), h.prog) {
            Some((low, high)) => onc::reply_prog_mismatch(h.xid, low, high, reply),
            None => onc::reply_prog_unavail(h.xid, reply),
        }
        return None;
    };
    Some((i, h, args_at))
}

/// Writes into `reply` (emptied) the RPC reply that says `answered`, which is not
/// [`Dispatched::Replied`], to call `h`.
pub(super) fn refused(h: &CallHeader, answered: Dispatched, reply: &mut Vec<u8>) {
    reply.clear();
    match answered {
        Dispatched::ProcUnavail => onc::reply_proc_unavail(h.xid, reply),
        Dispatched::GarbageArgs => onc::reply_garbage_args(h.xid, reply),
        Dispatched::BadResults(e) => {
            log::warn!(
                "call {:#010x} (program {:#x} version {} procedure {}): its results have no XDR encoding: {e}; \
                 answered SYSTEM_ERR",
                h.xid,
                h.prog,
                h.vers,
                h.proc
            );
            onc::reply_system_err(h.xid, reply);
        }
        Dispatched::SystemErr | Dispatched::Replied => onc::reply_system_err(h.xid, reply),
    }
}

impl Handler for Services {
    fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        let Some((i, h, args_at)) = route(&self.ids, call, reply) else { return };
        onc::reply_success(h.xid, &[], reply);
        match self.programs[i].dispatch(h.proc, &call[args_at..], reply) {
            Dispatched::Replied => {}
            answered => refused(&h, answered, reply),
        }
    }
}
