//! A connection kept up for the server's reverse-direction calls
//! (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.6.5, [`ClientConfig::keep_connected`]).
//!
//! The server cannot connect to a client, and on a new connection it learns the client's
//! version, and its offer of the reverse direction, only from the client's first message. So
//! a client that has no call to make would leave the server unable to call back until it
//! had one. The keeper is a thread per lane that, whenever the lane has no connection, calls
//! the configured program's NULL procedure: the call makes the connection (with the
//! requester's backoff), settles its version, and the -07 properties exchange follows as it
//! does after any first call.

use super::*;
use crate::client_config::KeepConnected;
use crate::datapath::InlineOnly;
use crate::onc::{CallHeader, XidSource};
use rpcrdma_v1::marshal_call::InlineThresholds;

/// The least time between two of the keeper's NULL calls.
const KEEP_INTERVAL: Duration = Duration::from_secs(1);

impl<B: Backend> Shared<B> {
    /// The keeper's loop: a NULL call whenever the lane has no connection, until the client is
    /// dropped.
    pub(super) fn keep_connected(&self, keep: KeepConnected) {
        let xids = XidSource::seeded();
        let mut reply = Vec::new();
        let mut last: Option<Instant> = None;
        loop {
            {
                let mut st = self.lock();
                while st.core.link().is_some() && !st.core.is_closing() {
                    let guard = self.link_changed.wait(st.into_guard()).unwrap_or_else(PoisonError::into_inner);
                    st = Locked::from_guard(guard);
                }
                // A server that closes each kept connection at once is not reconnected to in
                // a loop: one NULL call per KEEP_INTERVAL at most.
                while let Some(wait) = last.map(|t| KEEP_INTERVAL.saturating_sub(t.elapsed())).filter(|w| !w.is_zero())
                {
                    if st.core.is_closing() {
                        return;
                    }
                    let (guard, _) =
                        self.link_changed.wait_timeout(st.into_guard(), wait).unwrap_or_else(PoisonError::into_inner);
                    st = Locked::from_guard(guard);
                }
                if st.core.is_closing() {
                    return;
                }
            }
            last = Some(Instant::now());
            let xid = xids.next();
            let call = CallHeader::new(xid, keep.program, keep.version, 0).message(&[]).expect("a NULL call encodes");
            match self.call_into(
                xid,
                Message::Borrowed(&call),
                // A NULL call carries nothing DDP-eligible; its reply is short.
                &InlineOnly { max_reply: InlineThresholds::MINIMUM },
                Sink::Copy(&mut reply),
            ) {
                Ok(()) => log::debug!("kept the connection to {} for reverse-direction calls", self.addr),
                Err(ClientError::Closed) => return,
                // (One of the application's calls used this XID: the next one.)
                Err(ClientError::DuplicateXid(_)) => {}
                Err(e) => {
                    log::warn!("keeping a connection to {} for reverse-direction calls: {e}", self.addr);
                    // Not at once again: a server that refuses, or answers nothing, is not
                    // called in a loop.
                    let st = self.lock();
                    if !st.core.is_closing() {
                        let pause = self.cfg.requester.timeout;
                        drop(self.link_changed.wait_timeout(st.into_guard(), pause));
                    }
                }
            }
        }
    }
}
