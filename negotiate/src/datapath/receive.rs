//! The pre-posted Receives every credit needs.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rpcrdma_verbs::{Access, Backend, MemoryRegion, ProtectionDomain, QueuePair, Sge};

use super::{DataPathError, Transport, Want, RECV_WR_BIT};

/// One received message: its bytes, copied out of the receive buffer (which is posted again at
/// once), and the rkey a Send with Invalidate killed on the way in (RFC 8797 section 4.1), for
/// [`ChunkMemory::release`](super::ChunkMemory::release).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The whole message: transport header, then whatever followed it.
    pub bytes: Vec<u8>,
    /// The rkey the peer's Send with Invalidate invalidated here, if it sent one.
    pub invalidated_rkey: Option<u32>,
}

/// Registered receive buffers of the local receive inline threshold's size, each kept posted
/// while it is free: "a receiver MUST post at least as many Receive buffers as credits it
/// grants" (RFC 8166 section 3.3.1), and a Send that finds none posted is a fatal connection
/// error. One pool per connection (its Receives own the connection's receive `wr_id`s).
///
/// ```
/// # use std::time::Duration;
/// # use negotiate::datapath::*;
/// # use rpcrdma_verbs::*;
/// # let t = Duration::from_secs(5);
/// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
/// # let addr = listener.local_addr();
/// # let peer = std::thread::spawn(move || {
/// #     let pd = InProcess.alloc_pd().unwrap();
/// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
/// # });
/// # let pd = InProcess.alloc_pd().unwrap();
/// # let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
/// # let conn = Transport::<InProcess>::new(pd, qp, t);
/// let pool = ReceivePool::new(&conn, 2, 1024).unwrap();
/// pool.grow(&conn, 2).unwrap(); // four credits' worth
/// assert_eq!((pool.len(), pool.buffer_size()), (4, 1024));
/// # drop(peer.join());
/// ```
pub struct ReceivePool<B: Backend> {
    buffers: Mutex<Vec<B::Region>>,
    size: usize,
    /// Message buffers handed back ([`ReceivePool::recycle`]), reused for the next messages
    /// so that a steady exchange allocates nothing.
    spare: Mutex<Vec<Vec<u8>>>,
}

impl<B: Backend> ReceivePool<B> {
    /// Registers `count` buffers of `size` bytes (the local receive inline threshold) and posts
    /// a Receive into each.
    pub fn new(conn: &Transport<B>, count: usize, size: usize) -> Result<Self, DataPathError> {
        Self::post(conn.pd(), conn.qp(), count, size).map_err(Into::into)
    }

    /// [`ReceivePool::new`] on a queue pair that no [`Transport`] wraps yet: a responder posts
    /// its Receives from `ConnectRequest::accept_with`, before the requester's first call can
    /// arrive.
    pub fn post(pd: &B::Pd, qp: &B::Qp, count: usize, size: usize) -> rpcrdma_verbs::Result<Self> {
        let pool = ReceivePool { buffers: Mutex::new(Vec::with_capacity(count)), size, spare: Mutex::default() };
        pool.grow_on(pd, qp, count)?;
        Ok(pool)
    }

    /// Adds and posts `more` buffers, for when the credits granted go up.
    pub fn grow(&self, conn: &Transport<B>, more: usize) -> Result<(), DataPathError> {
        self.grow_on(conn.pd(), conn.qp(), more).map_err(Into::into)
    }

    fn grow_on(&self, pd: &B::Pd, qp: &B::Qp, more: usize) -> rpcrdma_verbs::Result<()> {
        let mut buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        for _ in 0..more {
            let region = pd.register(vec![0; self.size], Access::LOCAL_WRITE)?;
            let slot = buffers.len() as u64;
            qp.post_recv(RECV_WR_BIT | slot, Sge::whole(&region))?;
            buffers.push(region);
        }
        Ok(())
    }

    /// The number of buffers.
    pub fn len(&self) -> usize {
        self.buffers.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether the pool has no buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each buffer's size: the largest message it receives.
    pub fn buffer_size(&self) -> usize {
        self.size
    }

    /// Waits (up to the connection's timeout) for the next message, copies it out and posts
    /// the buffer again.
    pub fn receive(&self, conn: &Transport<B>) -> Result<ReceivedMessage, DataPathError> {
        self.receive_within(conn, conn.timeout())
    }

    /// [`ReceivePool::receive`], waiting at most `timeout` ([`DataPathError::Timeout`] then):
    /// for a dispatcher that also watches the clock and the connection.
    pub fn receive_within(&self, conn: &Transport<B>, timeout: Duration) -> Result<ReceivedMessage, DataPathError> {
        self.receive_polling(conn, timeout, Duration::ZERO)
    }

    /// [`ReceivePool::receive_within`], polling the empty completion queue for up to
    /// `poll_first` before the thread sleeps: a message that arrives within it is taken
    /// without a thread switch, which is most of a short round trip's time, at the price of
    /// that much CPU when none comes. For a lone caller waiting for its reply, with nobody
    /// else to give the CPU to (`ib_send_lat` busy-polls for the same reason).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use negotiate::datapath::*;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let peer = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// # let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// # let conn = Transport::<InProcess>::new(pd, qp, t);
    /// let pool = ReceivePool::new(&conn, 2, 1024).unwrap();
    /// // Nothing arrives: 50 us of polling, then a sleep until the timeout.
    /// let got = pool.receive_polling(&conn, Duration::from_millis(1), Duration::from_micros(50));
    /// assert!(matches!(got, Err(DataPathError::Timeout { .. })));
    /// # drop(peer.join());
    /// ```
    pub fn receive_polling(
        &self,
        conn: &Transport<B>,
        timeout: Duration,
        poll_first: Duration,
    ) -> Result<ReceivedMessage, DataPathError> {
        let c = conn.wait_within(Want::AnyReceive, timeout, poll_first)?;
        let region = {
            let buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
            buffers[(c.wr_id & !RECV_WR_BIT) as usize].clone()
        };
        let spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner).pop();
        // Room for the largest message at once, so that the copy never grows it.
        let mut bytes = spare.unwrap_or_else(|| Vec::with_capacity(self.size));
        bytes.clear();
        region.with(|b| bytes.extend_from_slice(&b[..c.byte_len as usize]));
        conn.qp().post_recv(c.wr_id, Sge::whole(&region))?;
        Ok(ReceivedMessage { bytes, invalidated_rkey: c.invalidated_rkey })
    }

    /// Hands a received message's buffer back once its bytes are no longer needed: the next
    /// message received is copied into it instead of a new allocation. Keeps at most one
    /// buffer per Receive, and only buffers of the receive size up to twice that.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use negotiate::datapath::*;
    /// # use rpcrdma_verbs::*;
    /// # let t = Duration::from_secs(5);
    /// # let listener = InProcess.listen(&InProcess.any_address()).unwrap();
    /// # let addr = listener.local_addr();
    /// # let peer = std::thread::spawn(move || {
    /// #     let pd = InProcess.alloc_pd().unwrap();
    /// #     listener.get_request(t).unwrap().accept(&pd, &[], QpCaps::default()).unwrap()
    /// # });
    /// # let pd = InProcess.alloc_pd().unwrap();
    /// # let (qp, _) = InProcess.connect(&pd, &addr, &[], QpCaps::default(), t).unwrap();
    /// # let conn = Transport::<InProcess>::new(pd, qp, t);
    /// let pool = ReceivePool::new(&conn, 2, 1024).unwrap();
    /// pool.recycle(Vec::with_capacity(1024)); // the next message lands in this one
    /// # drop(peer.join());
    /// ```
    pub fn recycle(&self, bytes: Vec<u8>) {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        let fits = (self.size..=2 * self.size).contains(&bytes.capacity());
        if fits && spare.len() < self.len() {
            spare.push(bytes);
        }
    }
}
