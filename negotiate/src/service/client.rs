//! [`RpcClient`]: a [`Client`] as the transport of generated typed clients.

use std::future::Future;

use rpcrdma_v1::ulb::{OpaqueAtUlb, UpperLayerBinding};
use rpcrdma_verbs::Backend;
use xdr_spec_rt::rpc::{encode_append, Call, Caller, Procedure, Results};

use super::error::{CallError, Named};
use crate::client::Client;
use crate::onc::{AcceptStat, CallHeader, OncError, Reply, ReplyHeader, XidSource};

/// An Upper-Layer Binding with nothing DDP-eligible (RFC 8166 section 6) and replies of at
/// most 1024 bytes, which every inline threshold holds: for programs whose calls and replies
/// are small. A larger call still goes whole in a Read chunk (a Long call).
pub const NO_CHUNKS: OpaqueAtUlb = OpaqueAtUlb {
    call_opaque: None,
    reply_opaque: None,
    max_result: 0,
    max_reply: cm_private_data::MIN_INLINE as usize,
};

/// A [`Client`] with what typed calls need around it: its XIDs, and the Upper-Layer Binding
/// that says which items of the program's calls and replies are DDP-eligible. Give it to a
/// generated `Client` (`kv_v1::Client(rpc_client)`), or call procedures with
/// [`Caller::call`].
///
/// Each call's RPC header and arguments are encoded once, into the message the transport
/// sends, which is lent to it ([`Client::call_lent`]): a DDP-eligible argument is RDMA-Read
/// by the server from that buffer, not copied first.
pub struct RpcClient<B: Backend, U = OpaqueAtUlb> {
    client: Client<B>,
    binding: U,
    xids: XidSource,
}

impl<B: Backend, U: UpperLayerBinding> RpcClient<B, U> {
    /// Typed calls over `client`, whose programs' DDP-eligible items `binding` declares; XIDs
    /// start from a seeded value ([`XidSource::seeded`]).
    pub fn new(client: Client<B>, binding: U) -> Self {
        RpcClient { client, binding, xids: XidSource::seeded() }
    }

    /// The [`Client`] beneath: its version, thresholds, statistics.
    pub fn client(&self) -> &Client<B> {
        &self.client
    }
}

/// Procedure `P`'s results in reply `message` to call `xid`, or the reply's RPC-level
/// refusal.
fn results<P: Procedure>(message: Vec<u8>, xid: u32) -> Result<Results<P>, CallError> {
    let procedure = Named::of::<P>();
    let (header, at) = ReplyHeader::decode(&message).map_err(|source| CallError::BadReply { procedure, source })?;
    if header.xid != xid {
        let source = OncError::XidMismatch { expected: xid, got: header.xid };
        return Err(CallError::BadReply { procedure, source });
    }
    match header.reply {
        Reply::Accepted { stat: AcceptStat::Success, .. } => {
            Results::new(message, at).map_err(|source| CallError::BadResults { procedure, source })
        }
        Reply::Accepted { stat, .. } => Err(match stat {
            AcceptStat::ProgUnavail => CallError::ProgramUnavailable { procedure },
            AcceptStat::ProgMismatch { low, high } => CallError::VersionMismatch { procedure, low, high },
            AcceptStat::ProcUnavail => CallError::ProcedureUnavailable { procedure },
            AcceptStat::GarbageArgs => CallError::GarbageArgs { procedure },
            AcceptStat::SystemErr | AcceptStat::Success => CallError::SystemError { procedure },
        }),
        Reply::Denied(rejected) => Err(CallError::Denied { procedure, rejected }),
    }
}

impl<B: Backend, U: UpperLayerBinding + Sync> Caller for RpcClient<B, U>
where
    Client<B>: Sync,
{
    type Error = CallError;

    fn call<P: Procedure>(&self, args: &P::Args<'_>) -> Result<Results<P>, CallError> {
        let (xid, mut message) = self.encode::<P>(args)?.into_parts();
        let mut reply = Vec::new();
        self.client
            .call_lent(&mut message, &self.binding, &mut reply)
            .map_err(|source| CallError::Transport { procedure: Named::of::<P>(), source })?;
        results(reply, xid)
    }

    /// The call message: the RPC header (a fresh XID, AUTH_NONE) and the arguments encoded
    /// straight after it.
    fn encode<P: Procedure>(&self, args: &P::Args<'_>) -> Result<Call<P>, CallError> {
        let xid = self.xids.next();
        let header = CallHeader::new(xid, P::PROGRAM, P::VERSION, P::PROCEDURE);
        let mut message = Vec::with_capacity(64);
        header.encode(&mut message).expect("an AUTH_NONE call header encodes");
        encode_append(args, &mut message)
            .map_err(|source| CallError::Arguments { procedure: Named::of::<P>(), source })?;
        Ok(Call::new(xid, message))
    }

    fn send_async<P: Procedure>(&self, call: Call<P>) -> impl Future<Output = Result<Results<P>, CallError>> + Send {
        let (xid, message) = call.into_parts();
        async move {
            let reply = self
                .client
                .call_async(&message, &self.binding)
                .await
                .map_err(|source| CallError::Transport { procedure: Named::of::<P>(), source })?;
            results(reply, xid)
        }
    }
}
