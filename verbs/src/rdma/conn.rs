//! One connection's rdma-core objects: an rdma_cm id on an event channel of its own, and the
//! completion queue and RC queue pair created on it. The connection manager (`cm`) makes them,
//! the queue pair (`qp`) works on them; this module depends on neither.

use std::time::Instant;

use rdma_sys::*;

use super::cq::Cq;
use super::ffi::{self, errno, os_error, Event, Ptr};
use super::pd::RdmaPd;
use crate::{QpCaps, Result};

/// An rdma_cm id on its own event channel, with the CQ and QP created on it. Dropping it
/// destroys, in order, the QP, the CQ, the id and the channel.
pub(super) struct Conn {
    pub(super) channel: Ptr<rdma_event_channel>,
    pub(super) id: Ptr<rdma_cm_id>,
    /// The CQ and its completion channel, from `create_qp` on.
    cq: Option<Cq>,
    has_qp: bool,
}

impl Conn {
    /// A fresh event channel and an RC (`RDMA_PS_TCP`) id on it.
    pub(super) fn new() -> Result<Conn> {
        let channel = new_channel()?;
        let mut id = std::ptr::null_mut();
        // SAFETY: `channel` is live; rdma_create_id writes the new id through `id`.
        if unsafe { rdma_create_id(channel.0, &mut id, std::ptr::null_mut(), rdma_port_space::RDMA_PS_TCP) } != 0 {
            let e = errno();
            // SAFETY: the channel has no ids; destroyed once.
            unsafe { rdma_destroy_event_channel(channel.0) };
            return Err(os_error("rdma_create_id", e));
        }
        Ok(Conn { channel, id: Ptr(id), cq: None, has_qp: false })
    }

    /// An id handed out by a CONNECT_REQUEST, moved onto a channel of its own.
    pub(super) fn adopt(id: Ptr<rdma_cm_id>) -> Result<Conn> {
        let channel = match new_channel() {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: we own the request's id; reject and destroy it once.
                unsafe {
                    rdma_reject(id.0, std::ptr::null(), 0);
                    rdma_destroy_id(id.0);
                }
                return Err(e);
            }
        };
        let conn = Conn { channel, id, cq: None, has_qp: false };
        // SAFETY: both live; the request event has been acked, so migration does not block.
        if unsafe { rdma_migrate_id(id.0, channel.0) } != 0 {
            // Still on the listener's channel: destroying it is fine, the channel is not ours
            // to destroy but `Conn::drop` destroys `channel`, our fresh empty one.
            let e = errno();
            // SAFETY: as above.
            unsafe { rdma_reject(id.0, std::ptr::null(), 0) };
            drop(conn);
            return Err(os_error("rdma_migrate_id", e));
        }
        Ok(conn)
    }

    /// Creates the CQ (on the id's device) and the RC queue pair in `pd`
    /// (`ibv_create_cq`, `rdma_create_qp`), with `sq_sig_all` = 0: each send-queue work
    /// request's `IBV_SEND_SIGNALED` decides whether its success is reported
    /// ([`SendFlags`](crate::SendFlags); the plain posting methods set it).
    pub(super) fn create_qp(&mut self, pd: &RdmaPd, caps: QpCaps) -> Result<()> {
        // SAFETY: `id` is live and resolved (or from a request), so `verbs` is its device.
        let verbs = unsafe { (*self.id.0).verbs };
        let cqe = caps.max_send_wr.saturating_add(caps.max_recv_wr).max(1).min(i32::MAX as u32) as i32;
        let cq = self.cq.insert(Cq::new(verbs, cqe)?).raw();
        // SAFETY: ibv_qp_init_attr is plain data for which all-zero is a valid value.
        let mut attr: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        attr.send_cq = cq;
        attr.recv_cq = cq;
        attr.qp_type = ibv_qp_type::IBV_QPT_RC;
        attr.sq_sig_all = 0;
        attr.cap.max_send_wr = caps.max_send_wr.max(1);
        attr.cap.max_recv_wr = caps.max_recv_wr.max(1);
        attr.cap.max_send_sge = caps.max_sge.max(1);
        attr.cap.max_recv_sge = 1;
        // SAFETY: id, pd and cq are live; attr is initialised.
        if unsafe { rdma_create_qp(self.id.0, pd.0.pd.0, &mut attr) } != 0 {
            return Err(os_error("rdma_create_qp", errno()));
        }
        self.has_qp = true;
        Ok(())
    }

    /// The CQ created by `create_qp`.
    pub(super) fn cq(&self) -> &Cq {
        self.cq.as_ref().expect("a queue pair's connection has its CQ")
    }

    /// The QP created by `create_qp`.
    pub(super) fn qp(&self) -> Ptr<ibv_qp> {
        // SAFETY: `id` is live; `qp` was set by rdma_create_qp.
        Ptr(unsafe { (*self.id.0).qp })
    }

    /// The event channel's descriptor, readable while a CM event waits.
    pub(super) fn channel_fd(&self) -> std::os::fd::RawFd {
        // SAFETY: the channel is live while `self` is.
        unsafe { (*self.channel.0).fd }
    }

    pub(super) fn next_event(&self, deadline: Instant) -> Result<Option<Event>> {
        ffi::next_event(self.channel, deadline)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: each object is destroyed once, dependents first; all events retrieved from
        // the channel were acked at once, so rdma_destroy_id does not block on them.
        unsafe {
            if self.has_qp {
                rdma_destroy_qp(self.id.0);
            }
            // The CQ (and its completion channel) go after the QP that uses them.
            drop(self.cq.take());
            if !self.id.is_null() {
                rdma_destroy_id(self.id.0);
            }
            rdma_destroy_event_channel(self.channel.0);
        }
    }
}

fn new_channel() -> Result<Ptr<rdma_event_channel>> {
    // SAFETY: no arguments; returns null on failure.
    let ch = unsafe { rdma_create_event_channel() };
    if ch.is_null() {
        return Err(os_error("rdma_create_event_channel", errno()));
    }
    Ok(Ptr(ch))
}
