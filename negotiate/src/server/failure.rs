//! What a responder answers when a call cannot be served, so that the connection is kept
//! (RFC 8166 section 4.5): the one home of that rule, which the [`Server`](super::Server) and
//! the simulator share.

use super::*;
use crate::datapath::send_answer;
use crate::datapath::InlineOnly;

/// How a responder answers a call it could not serve, and keeps the connection (RFC 8166
/// section 4.5); see [`FailureAnswer::for_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAnswer {
    /// RDMA_ERROR `ERR_CHUNK` for the call's XID.
    ErrChunk,
    /// An RPC reply accepting the call with `GARBAGE_ARGS`, in an RDMA_MSG.
    GarbageArgs,
}

impl FailureAnswer {
    /// The answer to a call whose serving failed with `e`, or `None` when nothing can be sent
    /// and the connection must close (4.5.4: "MUST close the connection to signal to the
    /// requester that a reply was lost"): `ERR_CHUNK` when the requester's chunks cannot hold
    /// the reply (4.5.3's "no RPC-level reply is possible for that XID") or the transport
    /// header carries no usable RPC message (4.5.2, MUST); `GARBAGE_ARGS` when the chunks do
    /// not fit the Payload stream or break DDP-eligibility (4.5.2, SHOULD; 6.1.1). The one
    /// place this rule lives: the [`Server`] and the simulator both ask it.
    ///
    /// ```
    /// use negotiate::datapath::DataPathError;
    /// use negotiate::server::FailureAnswer;
    /// use rpcrdma_v1::reassemble::ReassemblyError;
    /// let e = DataPathError::Reassembly(ReassemblyError::NoPositionZeroChunk);
    /// assert_eq!(FailureAnswer::for_error(&e), Some(FailureAnswer::ErrChunk));
    /// assert_eq!(FailureAnswer::for_error(&DataPathError::Verbs(rpcrdma_verbs::Error::Timeout)), None);
    /// ```
    pub fn for_error(e: &DataPathError) -> Option<FailureAnswer> {
        match e {
            DataPathError::Reply(r) if r.errcode().is_some() => Some(FailureAnswer::ErrChunk),
            DataPathError::Reassembly(r) if r.is_header_error() => Some(FailureAnswer::ErrChunk),
            DataPathError::Reassembly(_) | DataPathError::DdpViolation(_) => Some(FailureAnswer::GarbageArgs),
            _ => None,
        }
    }
}

/// Sends `answer` ([`FailureAnswer::for_error`]) for a call that could not be served; the
/// connection stays up.
pub(super) fn answer_failure<B: Backend>(
    conn: &Transport<B>,
    call: &Header<'_>,
    call_message: &[u8],
    params: &ReplyParams,
    answer: FailureAnswer,
    cause: &DataPathError,
) -> Result<Answered, DataPathError> {
    match answer {
        FailureAnswer::ErrChunk => {
            send_answer(conn, unservable(call.xid(), params, Some(cause)).as_bytes(), params.draft07)
                .map(|()| Answered::ErrChunk)
        }
        FailureAnswer::GarbageArgs => {
            send_rpc_error(conn, call, call_message, params, encode_garbage_args_reply).map(|()| Answered::GarbageArgs)
        }
    }
}

/// Sends the accepted RPC reply `encode` writes (GARBAGE_ARGS, SYSTEM_ERR) as the reply to
/// `call`, inline and without invalidation (error replies never invalidate, as the Linux
/// server). The server's binding is not asked where its results are: an error reply has none
/// (RFC 5531 section 9: results follow only SUCCESS), and the binding may be what failed
/// ([`Answered::BindingPanicked`]).
pub(super) fn send_rpc_error<B: Backend>(
    conn: &Transport<B>,
    call: &Header<'_>,
    call_message: &[u8],
    params: &ReplyParams,
    encode: fn(u32, &mut [u8]) -> Result<usize, rpcrdma_v1::rt::Error>,
) -> Result<(), DataPathError> {
    let mut reply = [0u8; GARBAGE_ARGS_REPLY_LEN];
    let n = encode(call.xid(), &mut reply).expect("the buffer holds the reply");
    let params = ReplyParams { remote_invalidation: false, ..*params };
    // A binding with no DDP-eligible result, as the client's backward replies use.
    let no_results = InlineOnly { max_reply: n };
    send_reply(conn, call, call_message, &reply[..n], &no_results, &params).map(drop)
}

/// The RDMA_ERROR that says no RPC-level reply is possible for call `xid`, in the call's
/// version and dialect: Version One's (and -00's) ERR_CHUNK (RFC 8166 section 4.5.3); on a -07
/// connection section 7's codes: RDMA2_ERR_WRITE_RESOURCE or RDMA2_ERR_REPLY_RESOURCE for
/// chunks that cannot carry the reply (7.3.4, 7.3.5), RDMA2_ERR_BAD_XDR for a header whose
/// chunks do not make a call (7.2.1), and RDMA2_ERR_SYSTEM for the responder's own shortage
/// (`cause` `None`: its memory budget, 7.4.1).
pub(super) fn unservable(xid: u32, params: &ReplyParams, cause: Option<&DataPathError>) -> ErrorReply {
    use rpcrdma_v2::draft07::verdict::{error_reply, reply_error_answer};
    use rpcrdma_v2::draft07::xdr::{Rpcrdma2HdrError, RDMA2_ERR_BAD_XDR, RDMA2_ERR_SYSTEM};
    if !params.draft07 {
        return ErrorReply::err_chunk(xid, params.version, params.credits);
    }
    let code = |discriminant| Rpcrdma2HdrError::Default { discriminant };
    let body = match cause {
        Some(DataPathError::Reply(r)) => reply_error_answer(r).unwrap_or(code(RDMA2_ERR_SYSTEM)),
        Some(DataPathError::Reassembly(_)) => code(RDMA2_ERR_BAD_XDR),
        _ => code(RDMA2_ERR_SYSTEM),
    };
    error_reply(xid, params.credits, &body)
}
