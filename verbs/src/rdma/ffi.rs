//! The few raw pieces of rdma-core this backend needs beyond rdma-sys's own functions: a
//! pointer wrapper that may cross threads, errno, address conversion, and waiting on an
//! rdma_cm event channel with a timeout.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use rdma_sys::*;

use crate::{Error, Result};

/// A raw pointer to an rdma-core object that may be shared between threads.
///
/// libibverbs and librdmacm objects (contexts, PDs, MRs, CQs, QPs, cm_ids, event channels) are
/// documented thread-safe: every verb may be called on them from any thread. What this
/// wrapper does not make safe is use after destruction; each owner destroys its object once,
/// in `Drop`, after everything that uses it is gone.
#[derive(Debug)]
pub(super) struct Ptr<T>(pub(super) *mut T);

impl<T> Clone for Ptr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Ptr<T> {}

// SAFETY: see the type's documentation: rdma-core objects are thread-safe handles.
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Ptr<T> {}

impl<T> Ptr<T> {
    pub(super) fn null() -> Self {
        Ptr(std::ptr::null_mut())
    }
    pub(super) fn is_null(self) -> bool {
        self.0.is_null()
    }
}

/// The calling thread's errno, as left by the last failed libibverbs/librdmacm call.
pub(super) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A failure of a setup call that has no better [`Error`] variant, named after the call.
pub(super) fn os_error(call: &'static str, errno: i32) -> Error {
    Error::Os { call, errno }
}

/// Takes ownership of an fd a libc call returned, or reports the call's errno.
pub(super) fn owned(call: &'static str, fd: i32) -> Result<OwnedFd> {
    if fd < 0 {
        return Err(os_error(call, errno()));
    }
    // SAFETY: `fd` was just returned open by the call, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes eventfd `fd` readable (adds one to its counter); never blocks on a non-blocking one.
pub(super) fn eventfd_signal(fd: RawFd) {
    let one = 1u64;
    // SAFETY: eight bytes from a live u64 to an eventfd the caller owns.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Parses "a.b.c.d:port".
pub(super) fn parse_addr(addr: &str) -> Result<SocketAddrV4> {
    addr.parse::<SocketAddrV4>().map_err(|_| Error::BadAddress(addr.to_string()))
}

/// The `sockaddr_in` for `addr`.
pub(super) fn sockaddr_in(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

/// The IPv4 address and port an rdma_cm id is bound to (`rdma_get_local_addr`,
/// `rdma_get_src_port`).
pub(super) fn local_addr(id: Ptr<rdma_cm_id>) -> Option<SocketAddrV4> {
    // SAFETY: `id` is a live cm_id owned by the caller; rdma_get_local_addr returns a pointer
    // into it, valid while it lives, which we read at once.
    unsafe {
        let sa = rdma_get_local_addr(&*id.0);
        if sa.sa_family != libc::AF_INET as libc::sa_family_t {
            return None;
        }
        let sin = &*(sa as *const libc::sockaddr as *const libc::sockaddr_in);
        let port = u16::from_be(rdma_get_src_port(id.0));
        Some(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)), port))
    }
}

/// The address and port of the peer an rdma_cm id is connected or connecting to
/// (`rdma_get_peer_addr`), IPv4 or IPv6.
pub(super) fn peer_addr(id: Ptr<rdma_cm_id>) -> Option<std::net::SocketAddr> {
    // SAFETY: `id` is a live cm_id owned by the caller; its destination address is a union of
    // the sockaddr types, large enough for each (`sockaddr_storage`), read at once through the
    // member its family names (what `rdma_get_peer_addr` returns a pointer to).
    unsafe {
        let dst = &(*id.0).route.addr.dst_addr_union;
        let family = dst.dst_addr.sa_family;
        if family == libc::AF_INET as libc::sa_family_t {
            let sin = dst.dst_sin;
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(std::net::SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
        } else if family == libc::AF_INET6 as libc::sa_family_t {
            let sin6 = dst.dst_sin6;
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(std::net::SocketAddr::new(ip.into(), u16::from_be(sin6.sin6_port)))
        } else {
            None
        }
    }
}

/// A connection-manager event, copied out of librdmacm's `rdma_cm_event` before it is acked.
pub(super) struct Event {
    /// `rdma_cm_event_type`.
    pub(super) kind: rdma_cm_event_type::Type,
    /// `event->status` (for REJECTED: the IB CM reject reason).
    pub(super) status: i32,
    /// `event->id`: for CONNECT_REQUEST, the new cm_id the caller now owns.
    pub(super) id: Ptr<rdma_cm_id>,
    /// `event->param.conn.private_data`, as long as librdmacm says it is.
    pub(super) private_data: Vec<u8>,
    /// `event->param.conn.initiator_depth` and `responder_resources` (CONNECT_REQUEST).
    pub(super) initiator_depth: u8,
    pub(super) responder_resources: u8,
}

/// Waits until `deadline` for the next event on `channel` (`poll` on its fd, then
/// `rdma_get_cm_event`), copies it and acks it. `Ok(None)` on timeout.
pub(super) fn next_event(channel: Ptr<rdma_event_channel>, deadline: Instant) -> Result<Option<Event>> {
    next_event_unless(channel, deadline, None)
}

/// [`next_event`], ending early with `None` when `unless` (an eventfd, say) is readable.
pub(super) fn next_event_unless(
    channel: Ptr<rdma_event_channel>,
    deadline: Instant,
    unless: Option<RawFd>,
) -> Result<Option<Event>> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Round up so a sub-millisecond remainder still polls once.
        let ms = left.as_millis().min(i32::MAX as u128) as i32 + i32::from(left > Duration::ZERO);
        // SAFETY: `channel` is a live event channel owned by the caller.
        let fd = unsafe { (*channel.0).fd };
        let mut pfds = [
            libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: unless.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: two valid pollfds (a negative fd is ignored by poll).
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), 2, ms) };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(os_error("poll", e));
        }
        if n == 0 || pfds[0].revents == 0 {
            return Ok(None);
        }
        return get_event(channel).map(Some);
    }
}

/// `rdma_get_cm_event` + copy + `rdma_ack_cm_event`. Blocks if no event is ready, so call it
/// only after `poll` said the channel is readable.
fn get_event(channel: Ptr<rdma_event_channel>) -> Result<Event> {
    let mut ev: *mut rdma_cm_event = std::ptr::null_mut();
    // SAFETY: `channel` is live; on success `ev` points to an event librdmacm owns until we
    // ack it, and we copy everything we need (including the private data bytes) before that.
    unsafe {
        if rdma_get_cm_event(channel.0, &mut ev) != 0 {
            return Err(os_error("rdma_get_cm_event", errno()));
        }
        let e = &*ev;
        let conn = &e.param.conn;
        use rdma_cm_event_type::*;
        let has_conn_param =
            matches!(e.event, RDMA_CM_EVENT_CONNECT_REQUEST | RDMA_CM_EVENT_ESTABLISHED | RDMA_CM_EVENT_REJECTED);
        let private_data = if !has_conn_param || conn.private_data.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(conn.private_data as *const u8, usize::from(conn.private_data_len)).to_vec()
        };
        let out = Event {
            kind: e.event,
            status: e.status,
            id: Ptr(e.id),
            private_data,
            initiator_depth: conn.initiator_depth,
            responder_resources: conn.responder_resources,
        };
        rdma_ack_cm_event(ev);
        Ok(out)
    }
}
