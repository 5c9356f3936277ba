//! A client connection's verbs resources, in a module of their own: the lane that drives the
//! connection and the in-place replies that give its buffers back both hold them.

use rpcrdma_verbs::Backend;

use crate::datapath::{ReceivePool, Transport};

/// A connection's verbs resources: its queue pair and the Receives posted on it.
pub(super) struct Link<B: Backend> {
    pub(super) conn: Transport<B>,
    pub(super) pool: ReceivePool<B>,
}
