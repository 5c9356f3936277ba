//! Work completions: what `ibv_poll_cq` hands back.

/// The operation a work completion reports (`enum ibv_wc_opcode`).
///
/// Flushed completions carry the opcode of the work request they flush, which is more than
/// hardware promises (its opcode is undefined on error) but never contradicts it.
///
/// ```
/// # use std::time::Duration;
/// # use rpcrdma_verbs::*;
/// # // A connected pair of queue pairs: (client pd, client qp, server pd, server qp).
/// # fn pair<B: Backend + Copy>(b: B) -> (B::Pd, B::Qp, B::Pd, B::Qp) {
/// #     let t = Duration::from_secs(5);
/// #     let listener = b.listen(&b.any_address()).unwrap();
/// #     let addr = listener.local_addr();
/// #     let client = std::thread::spawn(move || {
/// #         let pd = b.alloc_pd().unwrap();
/// #         let (qp, _) = b.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// #         (pd, qp)
/// #     });
/// #     let pd = b.alloc_pd().unwrap();
/// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
/// #     let (cpd, cqp) = client.join().unwrap();
/// #     (cpd, cqp, pd, qp)
/// # }
/// let t = Duration::from_secs(5);
/// let (cpd, client, spd, server) = pair(InProcess);
/// let buf = spd.register(vec![0; 8], Access::LOCAL_WRITE).unwrap();
/// server.post_recv(10, Sge::whole(&buf)).unwrap();
/// let msg = cpd.register(vec![1; 8], Access::empty()).unwrap();
/// client.post_send(20, &[Sge::whole(&msg)], None).unwrap();
/// let (sent, received) = (client.wait_cq(t).unwrap(), server.wait_cq(t).unwrap());
/// assert_eq!((sent.wr_id, sent.opcode), (20, Opcode::Send));
/// assert_eq!((received.wr_id, received.opcode), (10, Opcode::Recv));
/// // Reaping a send-queue completion frees a send-queue slot; a Receive's does not.
/// assert!(sent.opcode.is_send_queue() && !received.opcode.is_send_queue());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Opcode {
    /// A Send, with or without Invalidate (`IBV_WC_SEND`).
    #[default]
    Send,
    /// A Receive consumed by an incoming Send (`IBV_WC_RECV`).
    Recv,
    /// An RDMA Write (`IBV_WC_RDMA_WRITE`).
    RdmaWrite,
    /// An RDMA Read (`IBV_WC_RDMA_READ`).
    RdmaRead,
    /// A Local Invalidate (`IBV_WC_LOCAL_INV`).
    LocalInvalidate,
    /// A memory window bind (`IBV_WC_BIND_MW`).
    BindWindow,
}

impl Opcode {
    /// True for operations posted on the send queue (everything but [`Opcode::Recv`]); their
    /// completions free a send-queue slot when reaped.
    pub fn is_send_queue(self) -> bool {
        !matches!(self, Opcode::Recv)
    }
}

/// The status of a work completion (`enum ibv_wc_status`). Any status other than
/// [`Status::Success`] has moved the queue pair to the Error state: a reliable-connected
/// queue pair does not survive an error completion.
///
/// ```
/// # use std::time::Duration;
/// # use rpcrdma_verbs::*;
/// # // A connected pair of queue pairs: (client pd, client qp, server pd, server qp).
/// # fn pair<B: Backend + Copy>(b: B) -> (B::Pd, B::Qp, B::Pd, B::Qp) {
/// #     let t = Duration::from_secs(5);
/// #     let listener = b.listen(&b.any_address()).unwrap();
/// #     let addr = listener.local_addr();
/// #     let client = std::thread::spawn(move || {
/// #         let pd = b.alloc_pd().unwrap();
/// #         let (qp, _) = b.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// #         (pd, qp)
/// #     });
/// #     let pd = b.alloc_pd().unwrap();
/// #     let qp = listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap();
/// #     let (cpd, cqp) = client.join().unwrap();
/// #     (cpd, cqp, pd, qp)
/// # }
/// let t = Duration::from_secs(5);
/// let (cpd, client, spd, server) = pair(InProcess);
/// // A 16-byte Send into an 8-byte Receive: fatal for the connection, reported on both sides.
/// let small = spd.register(vec![0; 8], Access::LOCAL_WRITE).unwrap();
/// server.post_recv(1, Sge::whole(&small)).unwrap();
/// let msg = cpd.register(vec![0; 16], Access::empty()).unwrap();
/// client.post_send(2, &[Sge::whole(&msg)], None).unwrap();
/// assert_eq!(server.wait_cq(t).unwrap().status, Status::LocalLengthError);
/// assert_eq!(client.wait_cq(t).unwrap().status, Status::RemoteInvalidRequest);
/// assert_eq!(client.state(), QpState::Error);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Status {
    /// The operation completed (`IBV_WC_SUCCESS`).
    #[default]
    Success,
    /// An incoming Send was larger than the Receive buffer it consumed (`IBV_WC_LOC_LEN_ERR`),
    /// reported on the receiver's Receive.
    LocalLengthError,
    /// A local scatter/gather entry named memory that is not registered in this queue pair's
    /// protection domain, has been invalidated or deregistered, lies outside its region, or
    /// lacks Local Write where the operation writes (`IBV_WC_LOC_PROT_ERR`). Also the status of
    /// a Local Invalidate, or of a Receive for a Send with Invalidate, naming a key that is not
    /// valid in this protection domain.
    LocalProtectionError,
    /// The responder refused an RDMA Read or Write: unknown or invalidated rkey, range outside
    /// the region, or the region lacks Remote Read / Remote Write (`IBV_WC_REM_ACCESS_ERR`).
    RemoteAccessError,
    /// The responder found the request invalid, here: a Send larger than the Receive it
    /// consumed (`IBV_WC_REM_INV_REQ_ERR`), reported to the sender.
    RemoteInvalidRequest,
    /// The responder failed to carry out a valid request because its own Receive was unusable,
    /// or the rkey named by a Send with Invalidate was not valid there (`IBV_WC_REM_OP_ERR`).
    RemoteOperationError,
    /// A Send arrived with no Receive posted, and (as with `rnr_retry_count` 0) the sender
    /// does not retry (`IBV_WC_RNR_RETRY_EXC_ERR`).
    RnrRetryExceeded,
    /// The peer did not acknowledge the work request within the queue pair's
    /// [`retry_timeout`](crate::QpCaps::retry_timeout): it stays connected but no longer takes
    /// part (`IBV_WC_RETRY_EXC_ERR`).
    RetryExceeded,
    /// The work request never ran because the queue pair was in the Error state
    /// (`IBV_WC_WR_FLUSH_ERR`).
    WorkRequestFlushed,
}

/// One work completion (`struct ibv_wc`, the fields a protocol needs).
///
/// ```
/// use rpcrdma_verbs::{Completion, Opcode, Status};
/// let c = Completion::default();
/// assert_eq!((c.status, c.opcode, c.byte_len), (Status::Success, Opcode::Send, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Completion {
    /// The caller's identifier from the work request (`wr_id`).
    pub wr_id: u64,
    /// How it ended (`status`).
    pub status: Status,
    /// What it was (`opcode`).
    pub opcode: Opcode,
    /// Bytes moved: received for a Receive, sent, written or read otherwise; 0 on error.
    pub byte_len: u32,
    /// For a Receive consumed by a Send with Invalidate: the rkey the peer invalidated here
    /// (`IBV_WC_WITH_INV` and `invalidated_rkey`).
    pub invalidated_rkey: Option<u32>,
}

impl Completion {
    pub(crate) fn new(wr_id: u64, status: Status, opcode: Opcode, byte_len: u32) -> Self {
        Completion { wr_id, status, opcode, byte_len, invalidated_rkey: None }
    }

    /// True when the work request succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Success
    }
}
