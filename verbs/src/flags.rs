//! Per-work-request flags of the send queue.

bitflags::bitflags! {
    /// Flags of one send-queue work request (`enum ibv_send_flags`; same bit values), taken by
    /// the `*_with` posting methods of [`QueuePair`](crate::QueuePair); the plain ones post
    /// [`SendFlags::SIGNALED`].
    ///
    /// Selective signaling (IBA 10.8.6.1; `ibv_post_send(3)`, a queue pair created with
    /// `sq_sig_all` = 0): a work request posted without [`SIGNALED`](SendFlags::SIGNALED) that
    /// succeeds produces no completion; one that fails still does (an error completion, and
    /// the queue pair goes to the Error state, flushing the rest with a completion each). A
    /// send queue completes its work requests in posting order, so a completion says that
    /// every work request posted before it on that queue pair has completed: that is how the
    /// poster learns that an unsignaled work request is done and its memory free. Its
    /// send-queue slot (`max_send_wr`) stays held until such a later completion is reaped, so
    /// a poster that leaves work requests unsignaled must signal one at least every
    /// `max_send_wr` of them, or the queue fills ([`Error::QueueFull`](crate::Error::QueueFull)).
    ///
    /// ```
    /// use rpcrdma_verbs::SendFlags;
    /// assert!(SendFlags::default().contains(SendFlags::SIGNALED));
    /// assert!(!SendFlags::empty().contains(SendFlags::SIGNALED)); // unsignaled
    /// assert_eq!(SendFlags::SIGNALED.bits(), 2); // IBV_SEND_SIGNALED
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct SendFlags: u32 {
        /// Report the work request's successful completion (`IBV_SEND_SIGNALED`).
        const SIGNALED = 2;
    }
}

impl Default for SendFlags {
    /// [`SendFlags::SIGNALED`], what the plain posting methods use.
    fn default() -> Self {
        SendFlags::SIGNALED
    }
}
