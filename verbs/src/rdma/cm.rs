//! Connection management on librdmacm: listen / get_request / accept / reject on the passive
//! side, resolve_addr / resolve_route / connect on the active side.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdma_sys::rdma_cm_event_type::*;
use rdma_sys::*;

use super::conn::Conn;
use super::ffi::{self, errno, os_error, owned};
use super::pd::RdmaPd;
use super::qp::RdmaQp;
use crate::{
    ConnectRequest, Error, ListenOptions, Listener, QpCaps, Result, ACCEPT_PRIVATE_DATA_MAX, CONNECT_PRIVATE_DATA_MAX,
};

/// Resolution timeout handed to `rdma_resolve_addr` / `rdma_resolve_route`.
const RESOLVE_MS: i32 = 2000;
/// How long `accept` waits for the active side's RTU (`RDMA_CM_EVENT_ESTABLISHED`).
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(10);
/// IB CM reject reason "invalid service ID": nothing listens on the port.
const REJ_INVALID_SERVICE_ID: i32 = 8;
/// Transport retries (timeouts without ACK) before `IBV_WC_RETRY_EXC_ERR`.
const RETRY_COUNT: u8 = 3;
/// RDMA Read depth offered on connect, and the most either way when accepting.
const RD_ATOMIC: u8 = 4;

/// Connection parameters: `private_data` (borrowed for the call), `rnr_retry_count` 0.
fn conn_param(private_data: &[u8], responder_resources: u8, initiator_depth: u8) -> rdma_conn_param {
    // SAFETY: rdma_conn_param is plain data for which all-zero is valid.
    let mut p: rdma_conn_param = unsafe { std::mem::zeroed() };
    p.private_data = if private_data.is_empty() { std::ptr::null() } else { private_data.as_ptr().cast() };
    p.private_data_len = private_data.len() as u8;
    p.responder_resources = responder_resources;
    p.initiator_depth = initiator_depth;
    p.retry_count = RETRY_COUNT;
    p.rnr_retry_count = 0;
    p
}

/// Binds and listens (`rdma_bind_addr`, `rdma_listen`).
pub(super) fn listen(addr: &str, opts: &ListenOptions) -> Result<RdmaListener> {
    let sa = ffi::parse_addr(addr)?;
    let conn = Conn::new()?;
    let mut sin = ffi::sockaddr_in(sa);
    // SAFETY: `id` is live; `sin` is a valid sockaddr_in for the call's duration.
    if unsafe { rdma_bind_addr(conn.id.0, (&mut sin as *mut libc::sockaddr_in).cast()) } != 0 {
        let e = errno();
        return Err(match e {
            libc::EADDRINUSE => Error::AddressInUse(addr.to_string()),
            libc::EADDRNOTAVAIL | libc::EINVAL | libc::ENODEV => Error::BadAddress(addr.to_string()),
            e => os_error("rdma_bind_addr", e),
        });
    }
    // SAFETY: `id` is live and bound.
    // The kernel's CM holds the handshakes in progress and answers them itself; the backlog
    // bounds how many complete requests wait for get_request (the rest are refused there).
    let backlog = i32::try_from(opts.max_pending).unwrap_or(i32::MAX);
    if unsafe { rdma_listen(conn.id.0, backlog) } != 0 {
        let e = errno();
        return Err(if e == libc::EADDRINUSE {
            Error::AddressInUse(addr.to_string())
        } else {
            os_error("rdma_listen", e)
        });
    }
    let local = ffi::local_addr(conn.id).map(|a| a.to_string()).unwrap_or_else(|| addr.to_string());
    // SAFETY: a plain syscall; the fd it returns is owned at once.
    let closing = owned("eventfd", unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    Ok(RdmaListener { conn, local, closing, closed: AtomicBool::new(false) })
}

/// A listening rdma_cm id on its own event channel. Dropping it destroys the id, which stops
/// listening.
pub struct RdmaListener {
    conn: Conn,
    local: String,
    /// An eventfd made readable by [`Listener::close`], which a `get_request` waits on
    /// beside the channel.
    closing: OwnedFd,
    closed: AtomicBool,
}

impl Listener for RdmaListener {
    type Request = RdmaRequest;

    fn local_addr(&self) -> String {
        self.local.clone()
    }

    fn get_request(&self, timeout: Duration) -> Result<RdmaRequest> {
        let at = Instant::now().checked_add(timeout);
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::ConnectionAborted);
            }
            // No deadline (`Duration::MAX`): an hour at a time.
            let until = at.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            let closing = Some(self.closing.as_raw_fd());
            let Some(ev) = ffi::next_event_unless(self.conn.channel, until, closing)? else {
                if at.is_some_and(|at| Instant::now() >= at) {
                    return Err(Error::Timeout);
                }
                continue;
            };
            if ev.kind != RDMA_CM_EVENT_CONNECT_REQUEST {
                continue;
            }
            let conn = Conn::adopt(ev.id)?;
            return Ok(RdmaRequest {
                conn: Some(conn),
                private_data: ev.private_data,
                initiator_depth: ev.initiator_depth,
                responder_resources: ev.responder_resources,
            });
        }
    }

    /// Always 0: the kernel's CM turns away connections beyond the backlog and times out
    /// handshakes itself, without telling user space.
    fn turned_away(&self) -> u64 {
        0
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        ffi::eventfd_signal(self.closing.as_raw_fd());
    }
}

/// A connect request taken from a listener; its id lives on its own channel. Dropping it
/// rejects it.
pub struct RdmaRequest {
    conn: Option<Conn>,
    private_data: Vec<u8>,
    initiator_depth: u8,
    responder_resources: u8,
}

impl RdmaRequest {
    fn reject_conn(conn: Conn) {
        // SAFETY: the id is live and not yet accepted or rejected.
        unsafe { rdma_reject(conn.id.0, std::ptr::null(), 0) };
        drop(conn);
    }
}

impl Drop for RdmaRequest {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            Self::reject_conn(conn);
        }
    }
}

impl ConnectRequest for RdmaRequest {
    type Pd = RdmaPd;
    type Qp = RdmaQp;

    fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    fn peer(&self) -> Option<crate::PeerAddress> {
        self.conn.as_ref().and_then(|c| ffi::peer_addr(c.id)).map(crate::PeerAddress::Ip)
    }

    fn accept_owning(
        mut self,
        pd: &RdmaPd,
        private_data: &[u8],
        caps: QpCaps,
        before: impl FnOnce(RdmaQp) -> (RdmaQp, Result<()>),
    ) -> Result<RdmaQp> {
        let mut conn = self.conn.take().expect("a request is accepted or rejected once");
        if private_data.len() > ACCEPT_PRIVATE_DATA_MAX {
            Self::reject_conn(conn);
            return Err(Error::PrivateDataTooLong { len: private_data.len(), max: ACCEPT_PRIVATE_DATA_MAX });
        }
        if let Err(e) = conn.create_qp(pd, caps) {
            Self::reject_conn(conn);
            return Err(e);
        }
        // The queue pair exists (in INIT; rdma_accept moves it on): Receives posted now are in
        // place for the peer's first Send. On any error below, dropping `qp` tears it down.
        let qp = RdmaQp::unstarted(conn, pd.0.clone(), caps);
        let reject = |qp: &RdmaQp| {
            // SAFETY: the id is live and not yet accepted.
            unsafe { rdma_reject(qp.conn().id.0, std::ptr::null(), 0) };
        };
        let (mut qp, before) = before(qp);
        if let Err(e) = before {
            reject(&qp);
            return Err(e);
        }
        // The connect request event already states both Read depths from this side's point of
        // view (the CM swaps the REQ's): its `responder_resources` is the most incoming RDMA
        // Reads this side may accept (the peer's initiator depth), its `initiator_depth` the
        // most this side may issue (the peer's responder resources); rdma_accept(3) bounds
        // each by them. Swapping them again would give an initiator depth of 0 against a peer
        // that issues no Reads (the Linux NFS client connects with initiator_depth 0), and
        // rxe then never sends this side's RDMA Reads (a Read chunk never arrives).
        let mut param =
            conn_param(private_data, self.responder_resources.min(RD_ATOMIC), self.initiator_depth.min(RD_ATOMIC));
        // SAFETY: the id is live with its QP; `param` and the private data outlive the call.
        if unsafe { rdma_accept(qp.conn().id.0, &mut param) } != 0 {
            let e = errno();
            reject(&qp);
            return Err(os_error("rdma_accept", e));
        }
        let deadline = Instant::now() + ACCEPT_TIMEOUT;
        loop {
            match qp.conn().next_event(deadline)? {
                None => return Err(Error::Timeout),
                Some(ev) if ev.kind == RDMA_CM_EVENT_ESTABLISHED => {
                    qp.watch_cm_events()?;
                    return Ok(qp);
                }
                Some(ev) if is_failure(ev.kind) => return Err(Error::ConnectionAborted),
                Some(_) => {}
            }
        }
    }

    fn reject(mut self) {
        if let Some(conn) = self.conn.take() {
            Self::reject_conn(conn);
        }
    }
}

fn is_failure(kind: rdma_cm_event_type::Type) -> bool {
    matches!(
        kind,
        RDMA_CM_EVENT_REJECTED
            | RDMA_CM_EVENT_CONNECT_ERROR
            | RDMA_CM_EVENT_UNREACHABLE
            | RDMA_CM_EVENT_DISCONNECTED
            | RDMA_CM_EVENT_ADDR_ERROR
            | RDMA_CM_EVENT_ROUTE_ERROR
            | RDMA_CM_EVENT_DEVICE_REMOVAL
    )
}

/// The active side: resolve, create the QP, connect, wait for ESTABLISHED.
pub(super) fn connect(
    pd: &RdmaPd,
    addr: &str,
    private_data: &[u8],
    caps: QpCaps,
    timeout: Duration,
) -> Result<(RdmaQp, Vec<u8>)> {
    if private_data.len() > CONNECT_PRIVATE_DATA_MAX {
        return Err(Error::PrivateDataTooLong { len: private_data.len(), max: CONNECT_PRIVATE_DATA_MAX });
    }
    let sa = ffi::parse_addr(addr)?;
    let deadline = Instant::now() + timeout;
    let refused = || Error::ConnectionRefused(addr.to_string());
    let mut conn = Conn::new()?;
    let mut sin = ffi::sockaddr_in(sa);
    // SAFETY: `id` is live; `sin` is valid for the call.
    if unsafe {
        rdma_resolve_addr(conn.id.0, std::ptr::null_mut(), (&mut sin as *mut libc::sockaddr_in).cast(), RESOLVE_MS)
    } != 0
    {
        return Err(os_error("rdma_resolve_addr", errno()));
    }
    let want = |conn: &Conn, kind| -> Result<()> {
        match conn.next_event(deadline)? {
            None => Err(Error::Timeout),
            Some(ev) if ev.kind == kind => Ok(()),
            Some(_) => Err(refused()),
        }
    };
    want(&conn, RDMA_CM_EVENT_ADDR_RESOLVED)?;
    // SAFETY: `id` is live with its address resolved.
    if unsafe { rdma_resolve_route(conn.id.0, RESOLVE_MS) } != 0 {
        return Err(os_error("rdma_resolve_route", errno()));
    }
    want(&conn, RDMA_CM_EVENT_ROUTE_RESOLVED)?;
    conn.create_qp(pd, caps)?;
    let mut param = conn_param(private_data, RD_ATOMIC, RD_ATOMIC);
    // SAFETY: the id is live with its QP; `param` and the private data outlive the call.
    if unsafe { rdma_connect(conn.id.0, &mut param) } != 0 {
        return Err(os_error("rdma_connect", errno()));
    }
    loop {
        match conn.next_event(deadline)? {
            None => return Err(Error::Timeout),
            Some(ev) if ev.kind == RDMA_CM_EVENT_ESTABLISHED => {
                return Ok((RdmaQp::new(conn, pd.0.clone(), caps)?, ev.private_data));
            }
            Some(ev) if ev.kind == RDMA_CM_EVENT_REJECTED => {
                return Err(if ev.status == REJ_INVALID_SERVICE_ID { refused() } else { Error::Rejected });
            }
            Some(ev) if is_failure(ev.kind) => return Err(refused()),
            Some(_) => {}
        }
    }
}
