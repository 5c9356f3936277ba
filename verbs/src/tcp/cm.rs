//! The TCP connection manager: a non-blocking listening socket polled by `get_request`, and
//! the three-message handshake (request, accept or reject, ready-to-use) that carries private
//! data both ways.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::qp::TcpQp;
use super::TcpPd;
use crate::{
    pad_private_data, ConnectRequest, Error, Listener, QpCaps, Result, ACCEPT_PRIVATE_DATA_MAX,
    CONNECT_PRIVATE_DATA_MAX,
};

const MAGIC: &[u8; 4] = b"VRBT";
const VERSION: u8 = 1;
const ACCEPT: u8 = b'A';
const REJECT: u8 = b'R';
const READY: u8 = b'U';
/// How long a passive side waits for the request frame of a fresh TCP connection, and for the
/// ready-to-use after accepting; the active side sends both at once.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often `get_request` polls the listening socket.
const POLL: Duration = Duration::from_millis(1);

/// A listening TCP endpoint; dropping it closes the socket, which resets connections not yet
/// taken, so their connectors see [`Error::Rejected`].
pub struct TcpCmListener {
    listener: TcpListener,
    addr: String,
}

/// A connect request taken from a [`TcpCmListener`]; dropping it rejects it.
pub struct TcpRequest {
    stream: TcpStream,
    private_data: Vec<u8>,
}

fn resolve(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or_else(|| Error::BadAddress(addr.into()))
}

fn left(deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        Some(d) => d.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()),
        None => Some(Duration::from_secs(3600)),
    }
}

pub(super) fn listen(addr: &str) -> Result<TcpCmListener> {
    let sa = resolve(addr)?;
    let listener = TcpListener::bind(sa).map_err(|e| match e.kind() {
        ErrorKind::AddrInUse => Error::AddressInUse(addr.into()),
        _ => Error::BadAddress(addr.into()),
    })?;
    let bound = listener.local_addr().map_err(|_| Error::BadAddress(addr.into()))?;
    listener.set_nonblocking(true).map_err(|_| Error::BadAddress(addr.into()))?;
    Ok(TcpCmListener { listener, addr: bound.to_string() })
}

pub(super) fn connect(
    pd: &TcpPd,
    addr: &str,
    private_data: &[u8],
    caps: QpCaps,
    timeout: Duration,
) -> Result<(TcpQp, Vec<u8>)> {
    let private_data = pad_private_data(private_data, CONNECT_PRIVATE_DATA_MAX)?;
    let sa = resolve(addr)?;
    let deadline = Instant::now().checked_add(timeout);
    let first = left(deadline).ok_or(Error::Timeout)?;
    let mut s = TcpStream::connect_timeout(&sa, first).map_err(|e| match e.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => Error::Timeout,
        _ => Error::ConnectionRefused(addr.into()),
    })?;
    let _ = s.set_nodelay(true);
    let mut req = Vec::with_capacity(5 + CONNECT_PRIVATE_DATA_MAX);
    req.extend_from_slice(MAGIC);
    req.push(VERSION);
    req.extend_from_slice(&private_data);
    s.write_all(&req).map_err(|_| Error::Rejected)?;
    let read_err = |e: std::io::Error| match e.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => Error::Timeout,
        _ => Error::Rejected,
    };
    s.set_read_timeout(Some(left(deadline).ok_or(Error::Timeout)?)).map_err(|_| Error::Rejected)?;
    let mut tag = [0u8];
    s.read_exact(&mut tag).map_err(read_err)?;
    if tag[0] != ACCEPT {
        return Err(Error::Rejected);
    }
    let mut accepted = vec![0u8; ACCEPT_PRIVATE_DATA_MAX];
    s.read_exact(&mut accepted).map_err(read_err)?;
    s.write_all(&[READY]).map_err(|_| Error::ConnectionAborted)?;
    Ok((TcpQp::start(s, pd, caps, |_| Ok(()))?, accepted))
}

/// Reads the request frame of a fresh connection; `None` if it is not one of ours.
fn read_request(mut stream: TcpStream) -> Option<TcpRequest> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).ok()?;
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).ok()?;
    if &head[..4] != MAGIC || head[4] != VERSION {
        return None;
    }
    let mut private_data = vec![0u8; CONNECT_PRIVATE_DATA_MAX];
    stream.read_exact(&mut private_data).ok()?;
    let _ = stream.set_nodelay(true);
    Some(TcpRequest { stream, private_data })
}

impl Listener for TcpCmListener {
    type Request = TcpRequest;

    fn local_addr(&self) -> String {
        self.addr.clone()
    }

    fn get_request(&self, timeout: Duration) -> Result<TcpRequest> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Some(req) = read_request(stream) {
                        return Ok(req);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    // WouldBlock, or a connection reset before we took it: wait and poll again.
                    let l = left(deadline).ok_or(Error::Timeout)?;
                    std::thread::sleep(l.min(POLL));
                }
            }
        }
    }
}

impl ConnectRequest for TcpRequest {
    type Pd = TcpPd;
    type Qp = TcpQp;

    fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    fn accept_with(
        mut self,
        pd: &TcpPd,
        private_data: &[u8],
        caps: QpCaps,
        before: impl FnOnce(&TcpQp) -> Result<()>,
    ) -> Result<TcpQp> {
        // On error the stream closes here, which the active side reads as a rejection.
        let private_data = pad_private_data(private_data, ACCEPT_PRIVATE_DATA_MAX)?;
        let mut rep = Vec::with_capacity(1 + ACCEPT_PRIVATE_DATA_MAX);
        rep.push(ACCEPT);
        rep.extend_from_slice(&private_data);
        self.stream.write_all(&rep).map_err(|_| Error::ConnectionAborted)?;
        let mut ready = [0u8];
        match self.stream.read_exact(&mut ready) {
            Ok(()) if ready[0] == READY => TcpQp::start(self.stream, pd, caps, before),
            _ => Err(Error::ConnectionAborted),
        }
    }

    fn reject(mut self) {
        let _ = self.stream.write_all(&[REJECT]);
    }
}

impl std::fmt::Debug for TcpCmListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpCmListener").field("addr", &self.addr).finish()
    }
}

impl std::fmt::Debug for TcpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpRequest")
            .field("peer", &self.stream.peer_addr().ok())
            .field("private_data", &self.private_data)
            .finish()
    }
}
