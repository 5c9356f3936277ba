//! The MOUNT program, version 3 (RFC 1813 section 5), over TCP with record marking
//! ([`crate::record`]): how a client gets the export root's file handle.
//!
//! One export: the root, under the path `/` or its absolute path on this machine. NULL, MNT
//! (the root's handle, with auth flavors AUTH_UNIX and AUTH_NONE), DUMP (an empty list: no
//! mounts are recorded), UMNT and UMNTALL (nothing to forget), EXPORT (the one export, open
//! to every host).

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use negotiate::onc::{self, AuthStat, CallHeader, OncError};
use xdr_spec_rt::{List, Seq, Xdr};

use crate::handles::Handles;
use crate::record::{read_record, write_record, MAX_RECORD};
use crate::xdr::*;

/// The auth flavors MNT offers (RFC 1813 section 5.2.1): AUTH_UNIX (1), then AUTH_NONE (0).
pub const AUTH_FLAVORS: [i32; 2] = [1, 0];

/// The most MOUNT connections held at once. A connection beyond them takes the place of the
/// one held longest that is not being answered (waiting for its next call, or silent since it
/// connected): connections that say nothing never shut a newcomer out (issue 26: 64 silent
/// sockets, each held up to [`IDLE`], once did).
pub const MAX_CONNECTIONS: usize = 64;

/// How long a MOUNT connection may stay silent before it is closed.
pub const IDLE: Duration = Duration::from_secs(60);

/// The kernel buffers of a MOUNT connection, each way (`SO_SNDBUF`, `SO_RCVBUF`; Linux
/// doubles them for its bookkeeping). MOUNT's records are small; left to autotuning, a peer
/// that pipelines calls and never reads could make the kernel hold megabytes per connection.
pub const SOCKET_BUFFER: usize = 64 * 1024;

/// Sets both kernel buffers of `stream` to [`SOCKET_BUFFER`] (a failure leaves the defaults).
fn bound_buffers(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let size = SOCKET_BUFFER as libc::c_int;
    for option in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: a live socket, and a c_int option value of the length given.
        unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
}

/// The MOUNT service for one export root.
#[derive(Debug)]
pub struct Mount {
    handles: Arc<Handles>,
}

impl Mount {
    /// The MOUNT service for the root of `handles`.
    pub fn new(handles: Arc<Handles>) -> Self {
        Mount { handles }
    }

    /// Whether `path` names the export: `/` or the root's absolute path (a trailing `/`
    /// ignored).
    fn is_export(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        path.is_empty() || std::path::Path::new(path) == self.handles.root()
    }

    /// Answers one MOUNT call message with its whole reply message.
    pub fn handle(&self, call: &[u8], reply: &mut Vec<u8>) {
        reply.clear();
        let (h, at) = match CallHeader::decode(call) {
            Ok(decoded) => decoded,
            Err(OncError::RpcVersion { xid, .. }) => return onc::reply_rpc_mismatch(xid, 2, 2, reply),
            Err(e) if e.in_auth() => {
                return onc::reply_auth_error(onc::peek_xid(call).unwrap_or(0), AuthStat::BADCRED, reply)
            }
            Err(_) => return onc::reply_garbage_args(onc::peek_xid(call).unwrap_or(0), reply),
        };
        if h.prog != MOUNT_PROGRAM {
            return onc::reply_prog_unavail(h.xid, reply);
        }
        if h.vers != MOUNT_V3 {
            return onc::reply_prog_mismatch(h.xid, MOUNT_V3, MOUNT_V3, reply);
        }
        let args = &call[at..];
        let results = match h.proc {
            MOUNTPROC3_NULL | MOUNTPROC3_UMNTALL => Ok(Vec::new()),
            MOUNTPROC3_UMNT => match Dirpath::decode(args) {
                Ok(_) => Ok(Vec::new()),
                Err(_) => return onc::reply_garbage_args(h.xid, reply),
            },
            MOUNTPROC3_MNT => match Dirpath::decode(args) {
                Ok((path, _)) => self.mnt(path.0),
                Err(_) => return onc::reply_garbage_args(h.xid, reply),
            },
            MOUNTPROC3_DUMP => List::<MountbodyEntry>::from_slice(&[]).to_vec(),
            MOUNTPROC3_EXPORT => {
                let export = [ExportnodeEntry { ex_dir: Dirpath("/"), ex_groups: List::from_slice(&[]) }];
                List::from_slice(&export).to_vec()
            }
            _ => return onc::reply_proc_unavail(h.xid, reply),
        };
        match results {
            Ok(results) => onc::reply_success(h.xid, &results, reply),
            // A result over its XDR bound (RFC 4506): ours to fix, so the call fails whole.
            Err(_) => onc::reply_system_err(h.xid, reply),
        }
    }

    /// MNT's results for `path`.
    fn mnt(&self, path: &str) -> Result<Vec<u8>, xdr_spec_rt::Error> {
        if !self.is_export(path) {
            return Mountres3::Default { discriminant: Mountstat3::Mnt3errNoent }.to_vec();
        }
        match self.handles.root_handle() {
            Ok(fh) => {
                let ok = Mountres3Ok { fhandle: Fhandle3(&fh), auth_flavors: Seq::from_slice(&AUTH_FLAVORS) };
                Mountres3::Mnt3Ok(ok).to_vec()
            }
            Err(_) => Mountres3::Default { discriminant: Mountstat3::Mnt3errIo }.to_vec(),
        }
    }
}

/// A connection held by a [`MountServer`], as its acceptor sees it.
struct Held {
    /// The same socket, to shut it down when the connection gives its place up.
    socket: TcpStream,
    /// Whether a call of its is being answered (not to be cut then); not while its reply is
    /// being written.
    busy: Arc<AtomicBool>,
    /// Whether its thread has ended.
    done: Arc<AtomicBool>,
}

/// The connections a [`MountServer`] holds, oldest first.
#[derive(Default)]
struct Connections(Mutex<Vec<Held>>);

impl Connections {
    /// Makes room for one more connection: forgets those that ended, then, with
    /// [`MAX_CONNECTIONS`] held, cuts the oldest one not being answered; false if every one is.
    fn make_room(&self) -> bool {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        held.retain(|h| !h.done.load(Ordering::Acquire));
        if held.len() < MAX_CONNECTIONS {
            return true;
        }
        // The oldest idle one whose call has not arrived: a newcomer whose call waits unread
        // (its thread not yet scheduled, on a loaded machine) is not cut by the connections
        // behind it. Failing that, the oldest idle one, so that silent sockets never shut a
        // newcomer out.
        let idle = |h: &&Held| !h.busy.load(Ordering::Acquire);
        let i = held.iter().position(|h| idle(&h) && !has_bytes_waiting(&h.socket));
        let Some(i) = i.or_else(|| held.iter().position(|h| idle(&h))) else { return false };
        let _ = held.remove(i).socket.shutdown(Shutdown::Both);
        true
    }

    fn hold(&self, h: Held) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(h);
    }
}

/// Whether bytes wait unread on `socket`: one byte peeked without blocking (`MSG_PEEK |
/// MSG_DONTWAIT`, flags of this one call: the socket's own, which its serving thread's
/// blocking reads share, are left alone).
fn has_bytes_waiting(socket: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: `recv` writes at most one byte into `byte`, which lives across the call; the
    // descriptor is `socket`'s, open for as long as it is borrowed.
    let n = unsafe {
        libc::recv(socket.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    n > 0
}

/// A MOUNT server listening on TCP: one thread accepts, one thread serves each connection, at
/// most [`MAX_CONNECTIONS`] held. Dropping it stops accepting; connections in progress end at
/// their next idle timeout.
pub struct MountServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl MountServer {
    /// Listens on `addr` (e.g. `0.0.0.0:20048`) and serves `mount` there.
    ///
    /// # Errors
    ///
    /// The address cannot be bound.
    pub fn start(addr: &str, mount: Mount) -> io::Result<MountServer> {
        let listener = TcpListener::bind(addr)?;
        // A deeper accept queue than std's 128 (Linux caps it at net.core.somaxconn): under a
        // churn of silent sockets a full queue drops a newcomer's SYN, which then waits 1 s
        // for its retransmission.
        // SAFETY: listen(2) again on a listening socket only changes its backlog.
        unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 4096) };
        let local = listener.local_addr()?;
        // Non-blocking, so that the acceptor takes every connection waiting and then sleeps
        // in poll(2) until the next (`MountServer::drop` wakes it with a connection of its own).
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let mount = Arc::new(mount);
        let acceptor = std::thread::Builder::new().name("mount-accept".into()).spawn(move || {
            let held = Connections::default();
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) if held.make_room() => {
                        bound_buffers(&stream);
                        let Ok(socket) = stream.try_clone() else { continue };
                        let (busy, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
                        let (m, b, d) = (mount.clone(), busy.clone(), done.clone());
                        let spawned = std::thread::Builder::new().name("mount-conn".into()).spawn(move || {
                            let _ = serve_connection(stream, &m, &b);
                            d.store(true, Ordering::Release);
                        });
                        if spawned.is_ok() {
                            held.hold(Held { socket, busy, done });
                        }
                    }
                    // Every connection held is being answered: this one is closed.
                    Ok((stream, _)) => drop(stream),
                    // Nothing waiting: sleep until a connection arrives, with no tick. (A fixed
                    // sleep let the kernel's backlog fill under a churn of silent sockets, and a
                    // newcomer's dropped SYN cost it a 1 s retransmission.)
                    Err(_) => wait_readable(&listener),
                }
            }
        })?;
        Ok(MountServer { addr: local, stop, acceptor: Some(acceptor) })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MountServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The acceptor sleeps until a connection comes: this one wakes it to see `stop`. (If
        // the connect fails the listener is gone, and so is the acceptor's wait.)
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

/// Waits for `listener` to have a connection to accept (`poll(2)`, no timeout).
fn wait_readable(listener: &TcpListener) {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the length of the call; the result is only a wake-up.
    unsafe { libc::poll(&mut fd, 1, -1) };
}

/// Serves one connection's calls until it closes, idles past [`IDLE`], sends a record beyond
/// the bounds (then it is closed: record marking cannot resynchronize), or is cut to make room
/// for a newcomer while it is not `busy` answering a call (its reply's write, which a peer
/// that does not read can block, may be cut).
fn serve_connection(mut stream: TcpStream, mount: &Mount, busy: &AtomicBool) -> Result<(), crate::record::RecordError> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IDLE))?;
    stream.set_write_timeout(Some(IDLE))?;
    let (mut call, mut reply) = (Vec::new(), Vec::new());
    let served = loop {
        match read_record(&mut stream, MAX_RECORD, &mut call) {
            Ok(true) => {}
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
        // Busy only while the call is being answered, not while its reply waits on the peer:
        // a peer that pipelines calls and never reads its replies blocks this write, and
        // counted busy it would hold its place (64 of them locked MOUNT out) until the write
        // timed out. Not busy, it is the oldest idle connection, cut for a newcomer.
        busy.store(true, Ordering::Release);
        mount.handle(&call, &mut reply);
        busy.store(false, Ordering::Release);
        if let Err(e) = write_record(&mut stream, &reply) {
            break Err(e.into());
        }
    };
    let _ = stream.shutdown(Shutdown::Both);
    served
}
