//! Several send-queue work requests posted as one chain ([`QueuePair::post_chain`]).
//!
//! `ibv_post_send(3)` takes a linked list of work requests and rings the device's doorbell
//! once for all of them; on a software device (rdma_rxe) that is one system call instead of
//! one per work request. A reply whose results go by Write chunk is such a chain: its RDMA
//! Writes, then its Send (RFC 8166 section 3.4.6.1 relies on the send queue's order, which a
//! chain keeps). The Linux server posts a reply that way (`svc_rdma_post_send` chains the
//! Write and Send work requests of one reply).

use crate::{Error, QueuePair, RemoteBuf, SendFlags, Sge};

/// One work request of a chain.
///
/// ```
/// use rpcrdma_verbs::{InProcess, ProtectionDomain, Access, Backend, Sge, SendFlags, WorkRequest};
/// let pd = InProcess.alloc_pd().unwrap();
/// let mr = pd.register(vec![0; 8], Access::empty()).unwrap();
/// let sges = [Sge::whole(&mr)];
/// let send = WorkRequest::Send { wr_id: 7, sges: &sges, invalidate: None, flags: SendFlags::SIGNALED };
/// assert_eq!(send.wr_id(), 7);
/// ```
#[derive(Debug)]
pub enum WorkRequest<'a, R> {
    /// An RDMA Write of `sges` to `remote` ([`QueuePair::post_write_with`]).
    Write {
        /// The work request's id, returned in its completion.
        wr_id: u64,
        /// The local memory written from.
        sges: &'a [Sge<'a, R>],
        /// Where it goes in the peer's memory.
        remote: RemoteBuf,
        /// Signaled or not.
        flags: SendFlags,
    },
    /// A Send gathering `sges`, with Invalidate of `invalidate` if given
    /// ([`QueuePair::post_send_with`]).
    Send {
        /// The work request's id, returned in its completion.
        wr_id: u64,
        /// The local memory sent.
        sges: &'a [Sge<'a, R>],
        /// The rkey the receiver's device invalidates (Send with Invalidate).
        invalidate: Option<u32>,
        /// Signaled or not.
        flags: SendFlags,
    },
}

impl<R> WorkRequest<'_, R> {
    /// The work request's id.
    pub fn wr_id(&self) -> u64 {
        match self {
            WorkRequest::Write { wr_id, .. } | WorkRequest::Send { wr_id, .. } => *wr_id,
        }
    }
}

/// A chain posted only in part: the first `posted` work requests were posted (they complete
/// as any others do), the one after them was refused with `error`, and none after it was
/// posted (`ibv_post_send`'s `bad_wr`).
///
/// ```
/// use rpcrdma_verbs::{ChainError, Error};
/// let e = ChainError { posted: 2, error: Error::QueueFull };
/// assert_eq!(e.to_string(), "work request 2 of the chain refused: work queue full");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("work request {posted} of the chain refused: {error}")]
pub struct ChainError {
    /// How many work requests, from the first, were posted.
    pub posted: usize,
    /// Why the next one was refused.
    #[source]
    pub error: Error,
}

/// Posts `wrs` one call at a time: what [`QueuePair::post_chain`] does on a backend that has
/// nothing better (each post is then its own doorbell).
pub fn post_each<Q: QueuePair + ?Sized>(qp: &Q, wrs: &[WorkRequest<'_, Q::Region>]) -> Result<(), ChainError> {
    for (posted, wr) in wrs.iter().enumerate() {
        let r = match *wr {
            WorkRequest::Write { wr_id, sges, remote, flags } => qp.post_write_with(wr_id, sges, remote, flags),
            WorkRequest::Send { wr_id, sges, invalidate, flags } => qp.post_send_with(wr_id, sges, invalidate, flags),
        };
        r.map_err(|error| ChainError { posted, error })?;
    }
    Ok(())
}
