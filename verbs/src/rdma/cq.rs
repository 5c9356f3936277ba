//! A queue pair's completion queue with its completion channel: how a thread, or an event
//! loop, sleeps until a completion arrives instead of polling.
//!
//! `ibv_req_notify_cq` arms the CQ for one event: the next completion added to it writes an
//! event on the channel's fd, which `ibv_get_cq_event` reads and `ibv_ack_cq_events`
//! acknowledges (`ibv_destroy_cq` waits forever for events read and not acknowledged, so each
//! is acknowledged as soon as it is read). A completion that arrives between an empty poll and
//! the arm raises no event, so whoever arms polls again before sleeping.
//!
//! Completions the backend makes itself (see `RdmaQp`) never pass through the CQ, and neither
//! do device completions one waiter polled and left for another: an eventfd, readable exactly
//! while such completions wait, stands for them. One epoll fd watches both the channel and the
//! eventfd, level-triggered: it is what `wait_cq` sleeps on and what an event loop watches.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rdma_sys::*;

use super::ffi::{self, errno, os_error, owned, Ptr};
use crate::{Opcode, Result, Status};

/// A CQ created on its own completion channel, and the fds that wake its waiters. Dropping it
/// destroys the CQ, then the channel; the queue pair using the CQ must be destroyed first.
pub(super) struct Cq {
    cq: Ptr<ibv_cq>,
    channel: Ptr<ibv_comp_channel>,
    /// An eventfd (non-blocking), readable while completions wait outside the CQ.
    wake: OwnedFd,
    /// Watches the channel's fd and `wake` (both for `EPOLLIN`, level-triggered).
    epoll: OwnedFd,
}

impl Cq {
    /// A CQ of `cqe` entries on the device `verbs`, with its channel and wake fds.
    pub(super) fn new(verbs: *mut ibv_context, cqe: i32) -> Result<Cq> {
        // SAFETY: plain syscalls; the fds they return are owned at once.
        let wake = owned("eventfd", unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: as above.
        let epoll = owned("epoll_create1", unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `verbs` is a live device context (the caller's cm_id is bound to it).
        let channel = unsafe { ibv_create_comp_channel(verbs) };
        if channel.is_null() {
            return Err(os_error("ibv_create_comp_channel", errno()));
        }
        // SAFETY: `verbs` and `channel` are live; no CQ context pointer, completion vector 0.
        let cq = unsafe { ibv_create_cq(verbs, cqe, std::ptr::null_mut(), channel, 0) };
        if cq.is_null() {
            let e = errno();
            // SAFETY: the channel has no CQ; destroyed once.
            unsafe { ibv_destroy_comp_channel(channel) };
            return Err(os_error("ibv_create_cq", e));
        }
        // From here on, `Drop` destroys what exists.
        let cq = Cq { cq: Ptr(cq), channel: Ptr(channel), wake, epoll };
        // SAFETY: `channel` is live; reading its fd field.
        let channel_fd = unsafe { (*cq.channel.0).fd };
        // Non-blocking: a waiter reads an event only after poll said there was one, but
        // another waiter may have read it meanwhile; ibv_get_cq_event then fails with EAGAIN
        // instead of blocking.
        // SAFETY: fcntl on an fd the channel owns, changing only its status flags.
        let set = unsafe {
            let flags = libc::fcntl(channel_fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(channel_fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
        if !set {
            return Err(os_error("fcntl(O_NONBLOCK) on the completion channel", errno()));
        }
        for fd in [channel_fd, cq.wake.as_raw_fd()] {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
            // SAFETY: both fds are open for as long as the epoll fd (all three close in Drop);
            // `ev` is valid for the call.
            if unsafe { libc::epoll_ctl(cq.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
                return Err(os_error("epoll_ctl", errno()));
            }
        }
        Ok(cq)
    }

    /// The CQ, to create the queue pair on.
    pub(super) fn raw(&self) -> *mut ibv_cq {
        self.cq.0
    }

    /// Moves up to `wcs.len()` device completions into `wcs` (`ibv_poll_cq`); how many.
    pub(super) fn poll(&self, wcs: &mut [ibv_wc]) -> usize {
        let want = wcs.len().min(i32::MAX as usize) as i32;
        // SAFETY: the CQ is live; `wcs` has room for `want` entries.
        let got = unsafe { ibv_poll_cq(self.cq.0, want, wcs.as_mut_ptr()) };
        usize::try_from(got).unwrap_or(0)
    }

    /// Reads and acknowledges the event that made the channel readable, if one is there, then
    /// arms the CQ for the next completion (`ibv_req_notify_cq`, any completion, not only
    /// solicited ones). False if arming failed: nothing will wake a sleeper then.
    pub(super) fn rearm(&self) -> bool {
        let mut cq = std::ptr::null_mut();
        let mut context = std::ptr::null_mut();
        // SAFETY: the channel is live and non-blocking (EAGAIN when no event waits); an event
        // read is acknowledged at once, so none is left when the CQ is destroyed.
        unsafe {
            if ibv_get_cq_event(self.channel.0, &mut cq, &mut context) == 0 {
                ibv_ack_cq_events(cq, 1);
            }
        }
        // SAFETY: the CQ is live.
        let rc = unsafe { ibv_req_notify_cq(self.cq.0, 0) };
        if rc != 0 {
            log::warn!("ibv_req_notify_cq -> {rc}");
        }
        rc == 0
    }

    /// Makes the wake eventfd readable (`on`) or not: the caller keeps it readable exactly
    /// while completions wait outside the CQ.
    pub(super) fn set_wake(&self, on: bool) {
        if on {
            ffi::eventfd_signal(self.wake.as_raw_fd());
            return;
        }
        let mut counter = 0u64;
        // SAFETY: eight bytes into a live u64, from an eventfd we own: reading resets it
        // (EAGAIN if already zero); it does not block.
        let _ = unsafe { libc::read(self.wake.as_raw_fd(), (&mut counter as *mut u64).cast(), 8) };
    }

    /// Sleeps until the channel or the wake eventfd is readable, or `timeout` has passed
    /// (`poll` on the epoll fd). A signal ends the sleep early; callers loop on their deadline.
    pub(super) fn sleep(&self, timeout: Duration) {
        // Round up so a sub-millisecond remainder still sleeps.
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32
            + i32::from(!timeout.subsec_nanos().is_multiple_of(1_000_000));
        let mut pfd = libc::pollfd { fd: self.epoll.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, count 1.
        unsafe { libc::poll(&mut pfd, 1, ms) };
    }

    /// The epoll fd, for an event loop.
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: the queue pair on this CQ is gone (`Conn` destroys it first); every event
        // read was acknowledged at once, so ibv_destroy_cq does not wait; the channel has no
        // CQ left when it is destroyed. The fds close after, as fields.
        unsafe {
            ibv_destroy_cq(self.cq.0);
            ibv_destroy_comp_channel(self.channel.0);
        }
    }
}

/// The crate's status for a device completion's.
pub(super) fn wc_status(s: ibv_wc_status::Type) -> Status {
    use ibv_wc_status::*;
    match s {
        IBV_WC_SUCCESS => Status::Success,
        IBV_WC_LOC_LEN_ERR => Status::LocalLengthError,
        IBV_WC_LOC_PROT_ERR | IBV_WC_LOC_ACCESS_ERR | IBV_WC_LOC_QP_OP_ERR | IBV_WC_MW_BIND_ERR => {
            Status::LocalProtectionError
        }
        IBV_WC_REM_ACCESS_ERR => Status::RemoteAccessError,
        IBV_WC_REM_INV_REQ_ERR | IBV_WC_REM_INV_RD_REQ_ERR => Status::RemoteInvalidRequest,
        IBV_WC_RNR_RETRY_EXC_ERR => Status::RnrRetryExceeded,
        IBV_WC_RETRY_EXC_ERR => Status::RetryExceeded,
        IBV_WC_WR_FLUSH_ERR => Status::WorkRequestFlushed,
        // REM_OP_ERR, and everything with no closer match in the crate's `Status` (transport
        // retries exceeded, bad response, fatal, ...): the far side failed the operation.
        _ => Status::RemoteOperationError,
    }
}

/// The crate's opcode for a device completion's (used only when the work request is unknown).
pub(super) fn wc_opcode(o: ibv_wc_opcode::Type) -> Opcode {
    use ibv_wc_opcode::*;
    match o {
        IBV_WC_RDMA_WRITE => Opcode::RdmaWrite,
        IBV_WC_RDMA_READ => Opcode::RdmaRead,
        IBV_WC_LOCAL_INV => Opcode::LocalInvalidate,
        IBV_WC_BIND_MW => Opcode::BindWindow,
        o if o & IBV_WC_RECV != 0 => Opcode::Recv,
        _ => Opcode::Send,
    }
}
