//! The in-process connection manager: a process-global registry of listening names, connect
//! requests queued on the listener, and the accept travelling back on a channel.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::qp::{connect_pair, InProcQp};
use super::region::InProcPd;
use super::{keys, lock};
use crate::{
    pad_private_data, ConnectRequest, Error, ListenOptions, Listener, PeerAddress, QpCaps, Result,
    ACCEPT_PRIVATE_DATA_MAX, CONNECT_PRIVATE_DATA_MAX,
};

const PREFIX: &str = "inproc:";

fn registry() -> &'static Mutex<HashMap<String, Weak<ListenerShared>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Weak<ListenerShared>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// What the passive side sends back: the active side's queue pair and the padded accept
/// private data, or a rejection (also signalled by dropping the sender).
type Reply = Result<(InProcQp, Vec<u8>)>;

struct ListenerShared {
    pending: Mutex<VecDeque<InProcRequest>>,
    cv: Condvar,
    /// [`ListenOptions::max_pending`].
    max_pending: usize,
    /// Connects refused because `max_pending` requests were waiting.
    turned_away: AtomicU64,
    /// [`Listener::close`] was called: no request is handed out any more.
    closed: AtomicBool,
}

/// A listening in-process endpoint; dropping it frees the name and rejects pending requests.
pub struct InProcListener {
    addr: String,
    shared: Arc<ListenerShared>,
}

/// A connect request waiting on an [`InProcListener`]; dropping it rejects it.
pub struct InProcRequest {
    private_data: Vec<u8>,
    peer_pd: InProcPd,
    peer_caps: QpCaps,
    reply: SyncSender<Reply>,
}

pub(super) fn listen(addr: &str, opts: &ListenOptions) -> Result<InProcListener> {
    let name = addr.strip_prefix(PREFIX).filter(|n| !n.is_empty()).ok_or_else(|| Error::BadAddress(addr.into()))?;
    let addr = if name == "*" { format!("{PREFIX}anon-{:016x}", keys::random_u64()) } else { addr.to_string() };
    let mut reg = lock(registry());
    if reg.get(&addr).is_some_and(|w| w.strong_count() > 0) {
        return Err(Error::AddressInUse(addr));
    }
    let shared = Arc::new(ListenerShared {
        pending: Mutex::new(VecDeque::new()),
        cv: Condvar::new(),
        max_pending: opts.max_pending,
        turned_away: AtomicU64::new(0),
        closed: AtomicBool::new(false),
    });
    reg.insert(addr.clone(), Arc::downgrade(&shared));
    Ok(InProcListener { addr, shared })
}

pub(super) fn connect(
    pd: &InProcPd,
    addr: &str,
    private_data: &[u8],
    caps: QpCaps,
    timeout: Duration,
) -> Result<(InProcQp, Vec<u8>)> {
    let private_data = pad_private_data(private_data, CONNECT_PRIVATE_DATA_MAX)?;
    if !addr.starts_with(PREFIX) {
        return Err(Error::BadAddress(addr.into()));
    }
    let listener = lock(registry()).get(addr).and_then(Weak::upgrade);
    let listener = listener.ok_or_else(|| Error::ConnectionRefused(addr.into()))?;
    let (tx, rx): (_, Receiver<Reply>) = sync_channel(1);
    let req = InProcRequest { private_data, peer_pd: pd.clone(), peer_caps: caps, reply: tx };
    {
        let mut pending = lock(&listener.pending);
        if listener.closed.load(Ordering::Acquire) {
            // Nobody will take it: refused at once.
            return Err(Error::Rejected);
        }
        if pending.len() >= listener.max_pending {
            // The backlog is full: refused at once, as rdma_cm refuses past rdma_listen's.
            listener.turned_away.fetch_add(1, Ordering::Relaxed);
            return Err(Error::Rejected);
        }
        pending.push_back(req);
    }
    listener.cv.notify_all();
    drop(listener);
    // If we time out, `rx` drops: a later accept sees its send fail and drops our side of the
    // queue pair, which disconnects its own.
    match rx.recv_timeout(timeout) {
        Ok(reply) => reply,
        Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
        Err(RecvTimeoutError::Disconnected) => Err(Error::Rejected),
    }
}

impl Listener for InProcListener {
    type Request = InProcRequest;

    fn local_addr(&self) -> String {
        self.addr.clone()
    }

    fn get_request(&self, timeout: Duration) -> Result<InProcRequest> {
        let deadline = Instant::now().checked_add(timeout);
        let mut pending = lock(&self.shared.pending);
        loop {
            if self.shared.closed.load(Ordering::Acquire) {
                return Err(Error::ConnectionAborted);
            }
            if let Some(r) = pending.pop_front() {
                return Ok(r);
            }
            let left = match deadline {
                Some(d) => d.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()).ok_or(Error::Timeout)?,
                None => Duration::from_secs(3600),
            };
            pending = self.shared.cv.wait_timeout(pending, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    fn turned_away(&self) -> u64 {
        self.shared.turned_away.load(Ordering::Relaxed)
    }

    fn close(&self) {
        // Set under the lock a waiter checks it under, so that none misses the notification;
        // the requests waiting are dropped, which rejects them.
        let mut pending = lock(&self.shared.pending);
        self.shared.closed.store(true, Ordering::Release);
        pending.clear();
        self.shared.cv.notify_all();
    }
}

impl Drop for InProcListener {
    fn drop(&mut self) {
        let mut reg = lock(registry());
        if reg.get(&self.addr).is_some_and(|w| w.as_ptr() == Arc::as_ptr(&self.shared)) {
            reg.remove(&self.addr);
        }
        drop(reg);
        // Dropping the queued requests drops their reply senders: each connector sees Rejected.
        lock(&self.shared.pending).clear();
    }
}

impl ConnectRequest for InProcRequest {
    type Pd = InProcPd;
    type Qp = InProcQp;

    fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    fn peer(&self) -> Option<PeerAddress> {
        Some(PeerAddress::InProcess(self.peer_pd.0.id))
    }

    fn accept_owning(
        self,
        pd: &InProcPd,
        private_data: &[u8],
        caps: QpCaps,
        before: impl FnOnce(InProcQp) -> (InProcQp, Result<()>),
    ) -> Result<InProcQp> {
        // On error `self` drops here, which rejects the active side.
        let private_data = pad_private_data(private_data, ACCEPT_PRIVATE_DATA_MAX)?;
        let (theirs, ours) = connect_pair(&self.peer_pd, self.peer_caps, pd, caps);
        // The active side cannot post anything before it holds its queue pair, sent below.
        let (ours, before) = before(ours);
        before?;
        // A failed send means the connector gave up; its queue pair drops with the error
        // value and disconnects, and we report that instead of handing out a dead queue pair.
        self.reply.send(Ok((theirs, private_data))).map_err(|_| Error::ConnectionAborted)?;
        Ok(ours)
    }

    fn reject(self) {
        let _ = self.reply.send(Err(Error::Rejected));
    }
}

impl std::fmt::Debug for InProcListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcListener").field("addr", &self.addr).finish()
    }
}

impl std::fmt::Debug for InProcRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcRequest").field("private_data", &self.private_data).finish()
    }
}
