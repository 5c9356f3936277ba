//! A connection kept up for the server's reverse-direction calls
//! (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.6.5, [`ClientConfig::keep_connected`]).
//!
//! The server cannot connect to a client, and on a new connection it learns the client's
//! version, and its offer of the reverse direction, only from the client's first message. So
//! a client that has no call to make would leave the server unable to call back until it
//! had one. The keeper is a timer of the dispatcher's ([`Shared::keep_when`], looked at the
//! end of each of the lane's turns): whenever the lane's connection has carried no call
//! (none yet, or it went down) and no call is in progress, it has the client's workers call
//! the configured program's NULL procedure ([`Shared::keep_once`]): the call makes the
//! connection (with the requester's backoff), settles its version, and the -07 properties
//! exchange follows as it does after any first call.

use super::workers::Job;
use super::*;
use crate::client_config::KeepConnected;
use crate::datapath::InlineOnly;
use crate::onc::{CallHeader, XidSource};
use rpcrdma_v1::marshal_call::InlineThresholds;

/// The least time between two of the keeper's NULL calls.
const KEEP_INTERVAL: Duration = Duration::from_secs(1);

/// The keeper's state in a lane's.
#[derive(Debug)]
pub(super) struct Keeping {
    /// A NULL call is with the workers.
    running: bool,
    /// No NULL call starts before this.
    next: Instant,
    /// The NULL calls' XIDs.
    xids: XidSource,
}

impl Keeping {
    pub(super) fn new() -> Self {
        Keeping { running: false, next: Instant::now(), xids: XidSource::seeded() }
    }
}

impl<B: Backend> Shared<B> {
    /// At the end of a turn due next at `due`: where the lane keeps its connection and it
    /// carries no call (no settled version, nothing in progress), hands the keeper's NULL
    /// call to the workers, once [`KEEP_INTERVAL`] has passed since the last; returns when
    /// the lane's next turn is due (the NULL call's end pokes it).
    pub(super) fn keep_when(&self, due: Instant) -> Instant {
        let (Some(keep), Some(lane)) = (self.cfg.keep_connected, self.me.upgrade()) else {
            return due;
        };
        if self.backchannel.is_none() {
            return due;
        }
        let mut st = self.lock();
        let carries = st.core.version().is_some() || st.core.has_calls();
        if st.keeping.running || carries || st.core.is_closing() {
            return due;
        }
        let now = Instant::now();
        if now < st.keeping.next {
            return due.min(st.keeping.next);
        }
        st.keeping.running = true;
        drop(st);
        if self.workers.submit(Job::Keep { lane, keep }).is_some() {
            // Closing, or no thread to be had: looked at again after the interval.
            let mut st = self.lock();
            st.keeping.running = false;
            st.keeping.next = now + KEEP_INTERVAL;
            return due.min(st.keeping.next);
        }
        due
    }

    /// The keeper's NULL call, on a worker; then the lane's turn, which looks again. A server
    /// that closes each kept connection at once is not reconnected to in a loop: one NULL
    /// call per [`KEEP_INTERVAL`] at most, and after a failure (a server that refuses, or
    /// answers nothing) none for the requester's timeout.
    pub(super) fn keep_once(&self, keep: KeepConnected) {
        let started = Instant::now();
        let xid = self.lock().keeping.xids.next();
        let call = CallHeader::new(xid, keep.program, keep.version, 0).message(&[]).expect("a NULL call encodes");
        let mut reply = Vec::new();
        let next = match self.call_into(
            xid,
            Message::Borrowed(&call),
            // A NULL call carries nothing DDP-eligible; its reply is short.
            &InlineOnly { max_reply: InlineThresholds::MINIMUM },
            Sink::Copy(&mut reply),
        ) {
            Ok(()) => {
                log::debug!("kept the connection to {} for reverse-direction calls", self.addr);
                started + KEEP_INTERVAL
            }
            Err(ClientError::Closed) => started + KEEP_INTERVAL,
            // (One of the application's calls used this XID: the next one, after the interval.)
            Err(ClientError::DuplicateXid(_)) => started + KEEP_INTERVAL,
            Err(e) => {
                log::warn!("keeping a connection to {} for reverse-direction calls: {e}", self.addr);
                Instant::now() + self.cfg.requester.timeout.max(KEEP_INTERVAL)
            }
        };
        let mut st = self.lock();
        st.keeping.running = false;
        st.keeping.next = next;
        drop(st);
        self.poke.poke();
    }
}
