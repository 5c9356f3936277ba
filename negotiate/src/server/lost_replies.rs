//! Transactions whose reply an RDMA operational error made impossible, remembered across the
//! requester's reconnection (draft-ietf-nfsv4-rpcrdma-version-two-07 section 7.3).
//!
//! A Remote Access Error on the Responder's RDMA Read or Write of a requester's chunk (its
//! region no longer registered, a segment longer than the region) or the reply's Send failing
//! on the requester's too small Receive is fatal to the connection. The requester then reconnects and sends the
//! call again with the same XID, on chunks that fail the same way: "To avoid a retransmission
//! loop and repeated connection loss that deadlocks the connection, once the Requester has
//! re-established a connection, the Responder SHOULD send an RDMA2_ERROR response to indicate
//! that no RPC-level reply is possible for that transaction." The server remembers such a
//! transaction by the requester's host (the connection manager's [`PeerHost`]: its port
//! changes with each connection), its XID and a fingerprint of the call ([`fingerprint`]: its
//! inline bytes and its chunks' lengths, which a retransmission repeats and another requester
//! on the same host, guessing the XID, does not); when that call comes again on another
//! connection it is answered RDMA2_ERR_SYSTEM (section 7.4.1: a permanent error that ends the transaction;
//! none of 7.3's sizing codes describes a failed RDMA operation) and not served again, which
//! also keeps a handler that had already run from running twice.
//!
//! Not covered: a retransmission that reaches the server before the serving thread has seen
//! the failed operation's completion (microseconds, against the requester's reconnect) is
//! served again.

use std::collections::VecDeque;

use std::hash::{Hash, Hasher};

use rpcrdma_v1::header::Header;
use rpcrdma_verbs::{Completion, Opcode, PeerHost, Status};

use crate::datapath::DataPathError;

/// The most transactions remembered, across all requesters: the oldest is forgotten first.
/// Each is one retransmission answered with an error instead of a loop of reconnections, so a
/// peer that fills the memory with failures of its own costs another requester only that;
/// and one host holds at most [`LOST_REPLIES_PER_HOST`] of them, so that it alone cannot
/// push out every other host's.
pub const LOST_REPLIES_KEPT: usize = 64;

/// The most transactions remembered for one host (an IPv4 address, an IPv6 address or prefix,
/// an in-process protection domain; as [`ServerLimits::max_connections_per_host`] counts
/// hosts): beyond them, that host's oldest is forgotten, not another host's.
///
/// [`ServerLimits::max_connections_per_host`]: crate::limits::ServerLimits::max_connections_per_host
pub const LOST_REPLIES_PER_HOST: usize = 16;

/// The transactions remembered, oldest first.
#[derive(Debug)]
pub(super) struct LostReplies {
    lost: VecDeque<(PeerHost, u32, u64)>,
    /// How IPv6 hosts are counted for [`LOST_REPLIES_PER_HOST`] ([`PeerHost::for_limits`]).
    ipv6_prefix: u8,
}

/// What a call's retransmission repeats besides its XID: its inline bytes and the positions
/// and lengths of its chunks (their handles and addresses change with each registration).
pub(super) fn fingerprint(call: &Header<'_>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    call.payload().hash(&mut h);
    for r in call.read_list().iter() {
        (r.position, r.target.length).hash(&mut h);
    }
    for w in call.write_list().iter() {
        w.target.iter().for_each(|s| s.length.hash(&mut h));
    }
    if let Some(reply) = call.reply_chunk() {
        reply.target.iter().for_each(|s| s.length.hash(&mut h));
    }
    h.finish()
}

impl LostReplies {
    /// Nothing remembered; IPv6 hosts counted by their first `ipv6_prefix` bits.
    pub(super) fn new(ipv6_prefix: u8) -> Self {
        LostReplies { lost: VecDeque::new(), ipv6_prefix }
    }

    /// Remembers call `xid` of `host` when serving it failed with `e` because of an RDMA
    /// operational error of section 7.3, and gives that error's completion. `first_error` is
    /// the connection's first error completion: a reply's RDMA Writes are unsignaled, so when
    /// one fails, what the serving thread waited for (the Send) is only flushed.
    pub(super) fn remember(
        &mut self,
        host: PeerHost,
        (xid, print): (u32, u64),
        e: &DataPathError,
        first_error: Option<Completion>,
    ) -> Option<Completion> {
        let failed = match e {
            DataPathError::Completion(c) if c.status != Status::WorkRequestFlushed => Some(*c),
            DataPathError::Completion(_) => first_error,
            _ => None,
        };
        let failed = failed.filter(is_operational)?;
        let prefix = self.ipv6_prefix;
        let bound = host.for_limits(prefix);
        let of_host = |&(h, ..): &(PeerHost, u32, u64)| h.for_limits(prefix) == bound;
        if self.lost.iter().filter(|l| of_host(l)).count() >= LOST_REPLIES_PER_HOST {
            let oldest = self.lost.iter().position(of_host).expect("the host holds some");
            self.lost.remove(oldest);
        } else if self.lost.len() >= LOST_REPLIES_KEPT {
            self.lost.pop_front();
        }
        self.lost.push_back((host, xid, print));
        Some(failed)
    }

    /// Whether call `xid` of `host`, whose [`fingerprint`] `print` gives, is one remembered,
    /// forgetting it: it is answered once. The fingerprint is taken only when the host and
    /// XID match one (hashing every call's payload would cost each call for the rare one).
    pub(super) fn take(&mut self, host: PeerHost, xid: u32, print: impl FnOnce() -> u64) -> bool {
        if !self.lost.iter().any(|&(h, x, _)| (h, x) == (host, xid)) {
            return false;
        }
        let print = print();
        let found = self.lost.iter().position(|&l| l == (host, xid, print));
        found.map(|at| self.lost.remove(at)).is_some()
    }
}

/// Section 7.3's errors: the Responder's RDMA Read or Write of the requester's memory failed,
/// or its Send found the requester's Receive too small (the draft's Local Length Error; the
/// sender of a Send sees it as the IBA's Remote Invalid Request, or rxe's Remote Operation
/// Error). A flushed work request is not one: it follows another error.
fn is_operational(c: &Completion) -> bool {
    match c.opcode {
        Opcode::RdmaRead | Opcode::RdmaWrite => c.status != Status::WorkRequestFlushed,
        Opcode::Send => {
            matches!(c.status, Status::LocalLengthError | Status::RemoteInvalidRequest | Status::RemoteOperationError)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(opcode: Opcode, status: Status) -> DataPathError {
        DataPathError::Completion(Completion { opcode, status, ..Completion::default() })
    }

    /// Only section 7.3's errors are remembered; each is answered once; a peer filling the
    /// memory evicts the oldest, never grows it.
    #[test]
    fn remembers_operational_errors_once_and_at_most_lost_replies_kept() {
        let (a, b) = (PeerHost::InProcess(1), PeerHost::InProcess(2));
        let mut lost = LostReplies::new(128);
        let remote_access = failed(Opcode::RdmaWrite, Status::RemoteAccessError);
        let flushed = failed(Opcode::Send, Status::WorkRequestFlushed);
        assert!(lost.remember(a, (1, 0), &DataPathError::Verbs(rpcrdma_verbs::Error::Timeout), None).is_none());
        assert!(lost.remember(a, (1, 0), &flushed, None).is_none(), "a flush alone says nothing");
        assert!(lost.remember(a, (1, 0), &failed(Opcode::Recv, Status::LocalLengthError), None).is_none());
        // A flushed Send whose connection first failed an RDMA Read: that Read is the cause.
        let read = Completion { opcode: Opcode::RdmaRead, status: Status::RemoteAccessError, ..Completion::default() };
        assert_eq!(lost.remember(a, (1, 0), &flushed, Some(read)), Some(read));
        assert!(lost.remember(a, (2, 0), &remote_access, None).is_some());
        assert!(!lost.take(b, 1, || 0), "another host's XID 1 is its own");
        assert!(!lost.take(a, 1, || 9), "another call with XID 1 (another fingerprint) is its own");
        assert!(!lost.take(a, 77, || panic!("fingerprinted")), "no fingerprint unless host and XID match");
        assert!(lost.take(a, 1, || 0));
        assert!(!lost.take(a, 1, || 0), "answered once");
        // Hosts c0, c1, ... fill the memory, 16 each.
        let host = |n: u64| PeerHost::InProcess(10 + n);
        for xid in 0..2 * LOST_REPLIES_KEPT as u32 {
            lost.remember(host(u64::from(xid) / 16), (100 + xid, 0), &remote_access, None);
        }
        assert_eq!(lost.lost.len(), LOST_REPLIES_KEPT);
        assert!(!lost.take(a, 2, || 0), "the oldest went first");
        assert!(lost.take(host(7), 100 + 2 * LOST_REPLIES_KEPT as u32 - 1, || 0));
    }

    /// One host failing call after call keeps at most `LOST_REPLIES_PER_HOST` records, its
    /// own oldest forgotten first: another host's record stays.
    #[test]
    fn one_host_alone_cannot_push_out_another_hosts_lost_replies() {
        let (a, b) = (PeerHost::Ip("192.0.2.1".parse().unwrap()), PeerHost::Ip("192.0.2.2".parse().unwrap()));
        let remote_access = failed(Opcode::RdmaWrite, Status::RemoteAccessError);
        let mut lost = LostReplies::new(64);
        assert!(lost.remember(b, (1, 7), &remote_access, None).is_some());
        for xid in 0..10 * LOST_REPLIES_KEPT as u32 {
            lost.remember(a, (100 + xid, 0), &remote_access, None);
        }
        assert_eq!(lost.lost.len(), 1 + LOST_REPLIES_PER_HOST, "the flooding host holds its share only");
        assert!(!lost.take(a, 100, || 0), "its own oldest went");
        assert!(lost.take(a, 100 + 10 * LOST_REPLIES_KEPT as u32 - 1, || 0), "its newest is kept");
        assert!(lost.take(b, 1, || 7), "the other host's record survived the flood");
        // Counted by /64s (`ipv6_prefix` 64): addresses within one share one share.
        let v6 = |s: &str| PeerHost::Ip(s.parse().unwrap());
        for n in 0..2 * LOST_REPLIES_PER_HOST as u32 {
            lost.remember(v6(&format!("2001:db8::{:x}", n + 1)), (n, 0), &remote_access, None);
        }
        assert_eq!(lost.lost.len(), 2 * LOST_REPLIES_PER_HOST - 1, "16 of the /64, 15 of a's");
    }
}
