//! The Requester's side: send a call, complete it from its reply.

use std::cell::RefCell;

use rpcrdma_v1::header::Header;
use rpcrdma_v1::marshal_call::{marshal_call, CallDescription, CallForm, InlineThresholds, MarshaledCall};
use rpcrdma_v1::reassemble::reassemble_reply_with_ulb;
use rpcrdma_v1::ulb::UpperLayerBinding;
use rpcrdma_v1::Version;
use verbs::Backend;

use super::{ChunkMemory, Connection, DataPathError, WindowRegistrar};

/// What the negotiation decided for the calls of a connection.
///
/// ```
/// use negotiate::datapath::CallParams;
/// use rpcrdma_v1::marshal_call::InlineThresholds;
/// let v2 = CallParams { version: rpcrdma_v1::Version::TWO, credits: 32, thresholds: InlineThresholds { call: 4096, reply: 4096 } };
/// assert_eq!(v2.thresholds.call, 4096);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallParams {
    /// `rdma_vers` of the call's header (1, or 2 for Version Two, whose chunk lists are Version
    /// One's).
    pub version: Version,
    /// `rdma_credit`: the credits requested (RFC 8166 section 3.3.1).
    pub credits: u32,
    /// The call inline threshold (the peer's receive size) and the reply inline threshold (this
    /// side's receive size, which decides whether a Reply chunk is needed).
    pub thresholds: InlineThresholds,
}

/// A call sent and not yet answered: its XID, its form, and the memory its chunks expose until
/// [`complete`](PendingCall::complete) or [`abandon`](PendingCall::abandon) releases it.
#[must_use = "the call's windows stay open to the peer until it is completed or abandoned"]
pub struct PendingCall<B: Backend> {
    xid: u32,
    form: CallForm,
    memory: ChunkMemory<B>,
}

/// Marshals `call` (an RPC Call message, XID first) with the DDP-eligible arguments, result
/// maxima and largest reply `ulb` gives for it (RFC 8166 sections 3.4 and 3.5; the form is
/// `marshal_call`'s choice), binds a window for every chunk, and sends header and inline payload
/// in one RDMA Send. Returns once the Send is posted: its completion is not waited for (the
/// reply says it arrived; a failed Send takes the connection down, and the call goes out again
/// on the next one), and the Send keeps its buffer until it completes.
///
/// The Send is one contiguous buffer: the header is encoded at its start and the inline ranges
/// copied after it (at most the call inline threshold, draft 5.2.4). See the [module
/// documentation](super) for a whole exchange.
pub fn send_call<B: Backend, U: UpperLayerBinding + ?Sized>(
    conn: &Connection<B>,
    call: &[u8],
    ulb: &U,
    params: &CallParams,
) -> Result<PendingCall<B>, DataPathError> {
    SCRATCH.with_borrow_mut(|(desc, out)| {
        desc.describe(ulb, call);
        let req = desc.request(params.credits, params.thresholds);
        out.set_version(params.version);
        let mut reg = WindowRegistrar::new(conn, call);
        // The header and the inline ranges are written straight into the Send's registered
        // buffer; marshal_call never writes more than the call inline threshold in all.
        let posted = conn.post_send_filled(conn.unwaited_wr_id(), None, params.thresholds.call, |buf| {
            marshal_call(call, &req, &mut reg, buf, out)?;
            let mut at = out.header_len();
            for range in out.inline() {
                buf[at..at + range.len()].copy_from_slice(&call[range.clone()]);
                at += range.len();
            }
            Ok(at)
        });
        let memory = reg.finish()?;
        let pending = PendingCall { xid: out.xid(), form: out.form(), memory };
        match posted {
            Ok(()) => Ok(pending),
            Err(e) => {
                // marshal_call released what it registered on failure; after a failed post no
                // reply will come on this connection: fence the chunks now.
                let _ = pending.abandon(conn, None);
                Err(e)
            }
        }
    })
}

thread_local! {
    /// Each thread's marshaling state, kept between calls so that a small call allocates
    /// nothing: the binding's description of the call and the marshaled call's lists.
    static SCRATCH: RefCell<(CallDescription, MarshaledCall)> = RefCell::new(Default::default());
}

impl<B: Backend> PendingCall<B> {
    /// The call's XID, which its reply's `rdma_xid` carries (RFC 8166 section 4.2.1).
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// How the call travelled.
    pub fn form(&self) -> CallForm {
        self.form
    }

    /// The rkeys of the windows its chunks expose (see [`ChunkMemory::rkeys`]).
    pub fn rkeys(&self) -> impl Iterator<Item = u32> + '_ {
        self.memory.rkeys()
    }

    /// Completes the call from its reply: `reply` is the accepted header of the received
    /// message (Version One's or Two's verdict), `invalidated` the received completion's
    /// invalidated rkey. Releases the chunks first ([`ChunkMemory::release`]), then rebuilds
    /// the whole RPC Reply message into `out` from the inline bytes, the Write chunks' and the
    /// Reply chunk's landed bytes (RFC 8166 sections 3.4.6.1 and 3.5.3; the ULB locates the
    /// reduced results).
    ///
    /// See the [module documentation](super) for an example.
    pub fn complete<U: UpperLayerBinding + ?Sized>(
        self,
        conn: &Connection<B>,
        reply: &Header<'_>,
        invalidated: Option<u32>,
        ulb: &U,
        out: &mut Vec<u8>,
    ) -> Result<(), DataPathError> {
        let want = self.xid;
        let landed = self.memory.release(conn, invalidated)?;
        if reply.xid() != want {
            return Err(DataPathError::XidMismatch { want, got: reply.xid() });
        }
        let write_bufs: Vec<&[u8]> = landed.writes.iter().map(Vec::as_slice).collect();
        let mut results = Vec::new();
        let reassembled = reassemble_reply_with_ulb(
            &reply.to_msg(),
            reply.payload(),
            &landed.reply,
            &write_bufs,
            ulb,
            &mut results,
            out,
        );
        drop(write_bufs);
        for buf in landed.writes.into_iter().chain([landed.reply]) {
            conn.recycle_chunk(buf);
        }
        Ok(reassembled?)
    }

    /// Ends the call without a reply to reassemble: the peer answered RDMA_ERROR (RFC 8166
    /// section 4.5; the caller has decoded it), or the call is given up. Releases its chunks
    /// like [`complete`](PendingCall::complete).
    pub fn abandon(self, conn: &Connection<B>, invalidated: Option<u32>) -> Result<(), DataPathError> {
        self.memory.release(conn, invalidated).map(drop)
    }
}
