//! Backward-direction RPC (RFC 8167, "Bidirectional Remote Procedure Call on RPC-over-RDMA
//! Transports"; required in Version Two by the v2 draft section 4.2): the server calls the
//! client over the connection the client made, and the client answers.
//!
//! Both directions share the connection's Receives. Backward-direction messages here are
//! always sent inline (RDMA_MSG, no chunks), as Linux does: RFC 8167 section 4 leaves chunk
//! use in the backward direction to each Upper-Layer Binding, and NFSv4.1 callbacks fit the
//! inline threshold. One backward call is outstanding at a time per connection (RFC 8167
//! section 4.1: its credit accounting is the backward requester's; we request and grant one),
//! and each side posts one Receive beyond its forward credits for it.
//!
//! A client answers with [`Client::with_backchannel`](crate::client::Client::with_backchannel);
//! a server calls with [`Server::backchannels`](crate::server::Server::backchannels).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use rpcrdma_v1::header::{Detached, Header};
use rpcrdma_v1::marshal_call::InlineThresholds;
use rpcrdma_v1::reassemble::{encode_system_err_reply, GARBAGE_ARGS_REPLY_LEN};
use rpcrdma_v1::Version;
use rpcrdma_verbs::Backend;

use rpcrdma_v2::draft07::extension::ExtensionMessage;
use rpcrdma_v2::draft07::properties::ReverseDirection;

use crate::extension07::ExtensionReply;

use crate::datapath::{
    send_call, send_draft07, send_error, send_reply, CallParams, DataPathError, InlineOnly, ReplyParams, Transport,
};
use crate::extension::{option_message, OptionReply};
use crate::reply::PeerError;

/// An RPC service for calls in the backward direction: the whole call message in, the whole
/// reply message out.
pub type Handler = Arc<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

/// The Receives each side posts beyond its forward credits for the backward direction.
pub const SLOTS: usize = 1;

/// The credits a backward call requests and its reply grants.
pub(crate) const CREDITS: u32 = 1;

/// Why a backward-direction call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackchannelError {
    /// The client has made no call yet, so the connection's version is not known.
    #[error("no forward call yet: the connection's version is unknown")]
    NoVersionYet,
    /// The call does not fit the client's inline threshold (backward messages are inline).
    #[error("a backward call of {len} bytes exceeds the inline threshold of {threshold}")]
    TooLarge {
        /// The message's length.
        len: usize,
        /// The threshold.
        threshold: usize,
    },
    /// An RDMA_OPTIONAL ([`Backchannel::send_option`]) on a connection whose client calls in
    /// Version One (draft section 3.1: only Version Two has RDMA_OPTIONAL).
    #[error("the connection's version is {0}, not Version Two")]
    NotVersionTwo(Version),
    /// The client stated RDMA2_PROP_BACKWARD_CREDITS 0 in its transport properties: it serves
    /// no backward-direction calls on this connection, so none is sent
    /// (`specs/rpcrdma2-transport-properties.txt` section 2.4).
    #[error("the client stated 0 backward credits: it serves no backward-direction calls")]
    NoBackwardCredits,
    /// An RDMA_OPTIONAL ([`Backchannel::send_option`]) on a connection that speaks
    /// draft-ietf-nfsv4-rpcrdma-version-two-07, which has no RDMA_OPTIONAL (its extensions
    /// are new header types, Appendix B): a message in -00's format would break its section
    /// 4.3.3 (one dialect per connection).
    #[error("the connection speaks draft-ietf-nfsv4-rpcrdma-version-two-07, which has no RDMA_OPTIONAL")]
    Draft07,
    /// A -07 extension's message ([`Backchannel::send_extension`]) on a connection that does
    /// not speak draft-ietf-nfsv4-rpcrdma-version-two-07: it has no such header types.
    #[error("the connection does not speak draft-ietf-nfsv4-rpcrdma-version-two-07")]
    NotDraft07,
    /// A -07 connection whose client has not offered the reverse direction (no RDMA2_PROPID_BRS
    /// in its RDMA2_CONNPROP_FINAL, or RDMA2_RVRSDIR_NONE): section 4.6.3, "an Upper-Layer
    /// Protocol MUST NOT perform reverse-direction RPC operations until the RPC client
    /// indicates support for them". Nothing was sent.
    #[error("the client has not offered -07's reverse direction (section 4.6.3): nothing sent")]
    ReverseDirectionNotOffered,
    /// Another backward call is outstanding on this connection.
    #[error("a backward call is already outstanding on this connection")]
    Busy,
    /// The connection is gone.
    #[error("the connection is closed")]
    Closed,
    /// No reply in time.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The client answered the call with an RDMA_ERROR (RFC 8166 section 4.5: it "completes
    /// the RPC transaction associated with XID"): the call ends at once, with no reply.
    #[error("the client answered with RDMA_ERROR {0}")]
    Peer(PeerError),
    /// Moving the bytes failed.
    #[error(transparent)]
    DataPath(#[from] DataPathError),
}

/// The client's side: answers a backward call that arrived on `conn`, inline (with an RPC
/// SYSTEM_ERR reply when `handler` panics), with the parameters its connection core gave it ([`Received::Call`](crate::connection::Received::Call):
/// the call's version, the forward call threshold as the reply's, the server's Receives).
/// On -07 the reply is returned instead, marshaled ([`reverse_reply`]): it goes when the
/// window has room for it (`Connection::queue_reverse_reply`).
pub(crate) fn answer<B: Backend>(
    conn: &Transport<B>,
    call: &Header<'_>,
    params: &ReplyParams,
    handler: &Handler,
) -> Result<Option<Vec<u8>>, DataPathError> {
    let message = call.payload();
    let mut system_err = [0u8; GARBAGE_ARGS_REPLY_LEN];
    let reply = match crate::application::run(|| handler(message)) {
        Some(reply) => reply,
        // The service failed: an RPC SYSTEM_ERR reply (RFC 5531 section 9), as the server
        // answers a forward call whose handler panicked; the connection serves on.
        None => {
            let n = encode_system_err_reply(call.xid(), &mut system_err).expect("the buffer holds the reply");
            system_err[..n].to_vec()
        }
    };
    if params.draft07 {
        return Ok(Some(reverse_reply(call.xid(), &reply, params.reply_inline_threshold)));
    }
    let ulb = InlineOnly { max_reply: params.reply_inline_threshold };
    send_reply(conn, call, message, &reply, &ulb, params).map(|_| None)
}

/// The client's reply `reply` to the server's -07 reverse-direction call `xid`, its credit
/// word to be stamped as it goes: RDMA2_REPLY_INLINE with no Write chunk, the RPC reply after
/// it (section 4.6.2; the Simple format this side offers, 5.2.5), within the server's
/// Receive (`threshold`). A reply larger than that, or not an XDR message, cannot go in the
/// Simple format: the call is answered RDMA2_ERR_REPLY_RESOURCE with the Reply chunk bytes
/// it would need (7.3.5), and the server's call ends with that error.
pub(crate) fn reverse_reply(xid: u32, reply: &[u8], threshold: usize) -> Vec<u8> {
    use rpcrdma_v1::rt::List;
    use rpcrdma_v2::draft07::marshal as marshal07;
    use rpcrdma_v2::draft07::xdr::Rpcrdma2HdrError;
    let mut out = vec![0u8; threshold];
    match marshal07::reply_inline(&mut out, xid, 0, List::from_slice(&[]), reply) {
        Ok(n) => {
            out.truncate(n);
            out
        }
        Err(e) => {
            log::warn!("the reply to reverse-direction call {xid:#010x} cannot go inline ({e}): REPLY_RESOURCE");
            let need = u32::try_from(reply.len()).unwrap_or(u32::MAX);
            let body = Rpcrdma2HdrError::Rdma2ErrReplyResource(need);
            rpcrdma_v2::draft07::verdict::error_reply(xid, 0, &body).as_bytes().to_vec()
        }
    }
}

/// The backward-direction call of one connection, decided without I/O: one at a time, and
/// ended by the client's reply with its XID, by the client's RDMA_ERROR naming it (RFC 8166
/// section 4.5: it "completes the RPC transaction associated with XID"), or by the connection
/// going down. `Server`'s backward callers and serving thread share one through a mutex; the
/// deterministic simulator drives the same value.
///
/// ```
/// use negotiate::backchannel::{BackwardEnd, BackwardSlot};
/// use negotiate::reply::PeerError;
/// let mut slot = BackwardSlot::default();
/// slot.start(9).unwrap();
/// assert!(slot.start(10).is_err()); // one at a time
/// assert!(!slot.handle_peer_error(8, PeerError::BAD_HEADER)); // names no call of ours
/// assert!(slot.handle_peer_error(9, PeerError::BAD_HEADER));
/// assert_eq!(slot.take(), Some(BackwardEnd::Error(PeerError::BAD_HEADER)));
/// slot.finish();
/// assert!(slot.start(10).is_ok());
/// ```
#[derive(Debug, Default)]
pub struct BackwardSlot {
    state: Slot,
}

/// How a backward call ended ([`BackwardSlot::take`]).
#[derive(Debug, PartialEq, Eq)]
pub enum BackwardEnd {
    /// The client's reply, whole (to reassemble).
    Reply {
        /// The received message.
        message: Vec<u8>,
        /// Its transport header as the connection's core judged it, to lay over `message`
        /// ([`Detached::attach`]) instead of parsing it again; `None` for the answer to an
        /// RDMA_OPTIONAL.
        header: Option<Detached>,
    },
    /// The client's RDMA_ERROR for it.
    Error(PeerError),
    /// The connection went down.
    Closed,
}

#[derive(Debug, Default)]
enum Slot {
    #[default]
    Idle,
    /// A call with this XID is outstanding.
    Waiting(u32),
    /// It ended; the caller has not taken the end yet (other callers still see it busy).
    Ended(u32, BackwardEnd),
    /// The caller took the end and is completing the call.
    Completing,
    Closed,
}

impl BackwardSlot {
    /// A backward call `xid` starts: refused while another is outstanding or once the
    /// connection is down.
    pub fn start(&mut self, xid: u32) -> Result<(), BackchannelError> {
        match self.state {
            Slot::Idle => {
                self.state = Slot::Waiting(xid);
                Ok(())
            }
            Slot::Closed => Err(BackchannelError::Closed),
            _ => Err(BackchannelError::Busy),
        }
    }

    /// A reply with `xid` arrived, with the header the core judged
    /// ([`Connection::take_judged_reply`](crate::connection::Connection::take_judged_reply)):
    /// it ends the outstanding call if it is that call's (true); otherwise it answers nothing
    /// of ours (false).
    pub fn handle_reply(&mut self, xid: u32, message: Vec<u8>, header: Option<Detached>) -> bool {
        self.end(xid, BackwardEnd::Reply { message, header })
    }

    /// The client's RDMA_ERROR naming `xid` arrived: it ends the outstanding call if it is
    /// that call's (true); otherwise it names nothing of ours (false).
    pub fn handle_peer_error(&mut self, xid: u32, error: PeerError) -> bool {
        self.end(xid, BackwardEnd::Error(error))
    }

    /// The connection is gone: the outstanding call, if any, ends [`BackwardEnd::Closed`],
    /// and no other starts.
    pub fn close(&mut self) {
        self.state = match std::mem::take(&mut self.state) {
            Slot::Waiting(xid) => Slot::Ended(xid, BackwardEnd::Closed),
            Slot::Ended(xid, end) => Slot::Ended(xid, end),
            _ => Slot::Closed,
        };
    }

    /// Whether a call is outstanding and has not ended.
    pub fn is_waiting(&self) -> bool {
        matches!(self.state, Slot::Waiting(_))
    }

    /// The XID of the outstanding call that has not ended, if one has not.
    pub fn waiting_for(&self) -> Option<u32> {
        match self.state {
            Slot::Waiting(xid) => Some(xid),
            _ => None,
        }
    }

    /// Whether the connection is down and nothing is left to take.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, Slot::Closed)
    }

    /// How the outstanding call ended, once it has (handed out once; the slot stays busy
    /// until [`BackwardSlot::finish`]).
    pub fn take(&mut self) -> Option<BackwardEnd> {
        match std::mem::take(&mut self.state) {
            Slot::Ended(_, BackwardEnd::Closed) => {
                self.state = Slot::Closed;
                Some(BackwardEnd::Closed)
            }
            Slot::Ended(_, end) => {
                self.state = Slot::Completing;
                Some(end)
            }
            other => {
                self.state = other;
                None
            }
        }
    }

    /// The caller is done with its call (completed, timed out or failed): the slot is free
    /// for the next, unless the connection is down.
    pub fn finish(&mut self) {
        let closed = matches!(self.state, Slot::Closed | Slot::Ended(_, BackwardEnd::Closed));
        self.state = if closed { Slot::Closed } else { Slot::Idle };
    }

    fn end(&mut self, xid: u32, end: BackwardEnd) -> bool {
        if !matches!(self.state, Slot::Waiting(w) if w == xid) {
            return false;
        }
        self.state = Slot::Ended(xid, end);
        true
    }
}

/// The server's handle for calling the client of one connection. Cheap to clone.
///
/// ```
/// # use std::sync::Arc;
/// # use negotiate::client::{Client, ClientConfig};
/// # use negotiate::server::{Server, ServerConfig};
/// # use rpcrdma_v1::ulb::OpaqueAtUlb;
/// # use rpcrdma_verbs::InProcess;
/// # let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
/// use negotiate::onc::{self, CallHeader};
/// # let null = |call: &[u8]| {
/// #     let mut reply = Vec::new();
/// #     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
/// #     reply
/// # };
/// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), null).unwrap();
/// // The client serves backward calls with a handler of its own: each succeeds with 4 bytes.
/// let callback = |call: &[u8]| {
///     let mut reply = Vec::new();
///     onc::reply_success(onc::peek_xid(call).unwrap(), b"ack!", &mut reply);
///     reply
/// };
/// let client = Client::with_backchannel(InProcess, &server.local_addr(), ClientConfig::default(), Arc::new(callback));
/// // The connection exists once a call was made.
/// client.call(&CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap();
///
/// let channels = server.backchannels(); // one per connection
/// let back = &channels[0];
/// assert!(back.is_open());
/// // A backward call is an RPC call (RFC 8167), here to the client's program 0x2000_0002.
/// let reply = back.call(&CallHeader::new(9, 0x2000_0002, 1, 1).message(&[]).unwrap()).unwrap();
/// assert_eq!(onc::results(&reply, 9), Ok(&b"ack!"[..]));
/// drop(client);
/// ```
#[derive(Clone)]
pub struct Backchannel {
    inner: Arc<dyn Caller>,
}

impl std::fmt::Debug for Backchannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backchannel").finish_non_exhaustive()
    }
}

impl Backchannel {
    /// Sends the RPC call `message` (its XID first, chosen by the caller) to the client and
    /// returns its RPC reply. In Version One and -00 it goes as RDMA_MSG (RFC 8167); on a
    /// draft-ietf-nfsv4-rpcrdma-version-two-07 connection as a reverse-direction
    /// RDMA2_CALL_INLINE with no chunk (section 4.6, the Simple format), which needs the
    /// client to have offered it in its RDMA2_CONNPROP_FINAL (RDMA2_PROPID_BRS, 5.2.5): until
    /// then [`BackchannelError::ReverseDirectionNotOffered`], nothing sent (4.6.3).
    pub fn call(&self, message: &[u8]) -> Result<Vec<u8>, BackchannelError> {
        self.inner.call(message)
    }

    /// Whether the connection is still up.
    pub fn is_open(&self) -> bool {
        self.inner.is_open()
    }

    /// Sends an RDMA_OPTIONAL (draft section 3.1) to the client, with an XID of the server's
    /// choosing, and returns what the client made of it: its extension's answering
    /// RDMA_OPTIONAL, or [`OptionReply::NotSupported`] (RDMA_ERR_INVAL_OPTION). `payload`, if
    /// not empty, follows as its RPC Payload Stream; the whole must fit the client's inline
    /// threshold. The client's forward calls must be in Version Two
    /// ([`BackchannelError::NotVersionTwo`], [`BackchannelError::NoVersionYet`]).
    ///
    /// It takes the backward direction's one slot, as a backward call does (one outstanding
    /// at a time, [`BackchannelError::Busy`]): the client posts one Receive beyond its forward
    /// credits for what the server sends it (RFC 8167 section 4.1), and the client's answer
    /// lands in the Receive the server keeps for backward replies. No answer within the
    /// server's timeout: [`BackchannelError::Timeout`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::extension::OptionReply;
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Every procedure succeeds with no results, as a NULL procedure does.
    /// let null = |call: &[u8]| {
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
    ///     reply
    /// };
    /// let server = Server::start(InProcess, "inproc:*", ServerConfig::default(), Arc::new(ulb), null).unwrap();
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default());
    /// let call = CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap();
    /// client.call(&call, &ulb).unwrap(); // Version Two, seen by the server
    /// // The client registered no extension.
    /// assert_eq!(server.backchannels()[0].send_option(99, &[], &[]).unwrap(), OptionReply::NotSupported);
    /// ```
    pub fn send_option(&self, opttype: u32, optinfo: &[u8], payload: &[u8]) -> Result<OptionReply, BackchannelError> {
        self.inner.send_option(opttype, optinfo, payload)
    }

    /// Sends the client a message of a draft-ietf-nfsv4-rpcrdma-version-two-07 extension's
    /// header type `htype` (its Appendix B.2; [`crate::extension07`]) with `body` after the
    /// four words every header starts with, within the client's Receive, and returns what the
    /// client made of it, as [`Client::send_extension`](crate::client::Client::send_extension)
    /// does the other way: its extension's answer, [`ExtensionReply::NotSupported`]
    /// (RDMA2_ERR_INVAL_HTYPE), or another RDMA2_ERROR's code. One at a time per connection
    /// (with backward calls: [`BackchannelError::Busy`]); on a connection that does not speak
    /// -07, [`BackchannelError::NotDraft07`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use negotiate::client::{Client, ClientConfig};
    /// use negotiate::extension07::ExtensionReply;
    /// use negotiate::onc::{self, CallHeader};
    /// use negotiate::requester::RequesterConfig;
    /// use negotiate::responder::ResponderConfig;
    /// use negotiate::server::{Server, ServerConfig};
    /// use rpcrdma_v1::ulb::OpaqueAtUlb;
    /// use rpcrdma_v2::dialect::{Dialect, VersionTwo};
    /// use rpcrdma_verbs::InProcess;
    ///
    /// let ulb = OpaqueAtUlb { call_opaque: None, reply_opaque: None, max_result: 0, max_reply: 4096 };
    /// // Every procedure succeeds with no results, as a NULL procedure does.
    /// let null = |call: &[u8]| {
    ///     let mut reply = Vec::new();
    ///     onc::reply_success(onc::peek_xid(call).unwrap(), &[], &mut reply);
    ///     reply
    /// };
    /// let scfg = ServerConfig::default().responder(ResponderConfig::default().draft07(true));
    /// let server = Server::start(InProcess, "inproc:*", scfg, Arc::new(ulb), null).unwrap();
    /// let requester = RequesterConfig::default().version_two(VersionTwo::One(Dialect::Ietf07));
    /// let client = Client::new(InProcess, &server.local_addr(), ClientConfig::default().requester(requester));
    /// client.call(&CallHeader::new(1, 0x2000_0001, 1, 0).message(&[]).unwrap(), &ulb).unwrap(); // settles -07
    /// // The client registered no extension.
    /// let back = &server.backchannels()[0];
    /// assert_eq!(back.send_extension(0xF000_0099, &[0; 8]).unwrap(), ExtensionReply::NotSupported);
    /// ```
    pub fn send_extension(&self, htype: u32, body: &[u8]) -> Result<ExtensionReply, BackchannelError> {
        self.inner.send_extension(htype, body)
    }
}

trait Caller: Send + Sync {
    fn call(&self, message: &[u8]) -> Result<Vec<u8>, BackchannelError>;
    fn send_option(&self, opttype: u32, optinfo: &[u8], payload: &[u8]) -> Result<OptionReply, BackchannelError>;
    fn send_extension(&self, htype: u32, body: &[u8]) -> Result<ExtensionReply, BackchannelError>;
    fn is_open(&self) -> bool;
}

/// The server side of one connection's backward direction: the serving thread records the
/// connection's version and thresholds and delivers replies; callers wait here.
pub(crate) struct ServerSide<B: Backend> {
    conn: Arc<Transport<B>>,
    state: Mutex<(BackwardSlot, Option<Forward>)>,
    cv: Condvar,
    /// The XID of our message awaiting its answer, or [`NO_OPTION`]: our RDMA_OPTIONAL, or on
    /// -07 our reverse-direction call. The serving thread reads it for each message it
    /// judges, without taking `state`.
    awaiting: AtomicU64,
    /// The XID of our next RDMA_OPTIONAL.
    next_option_xid: AtomicU32,
}

/// What the latest forward call settled for the backward direction: its version, the
/// connection's thresholds, and the backward credits the client stated in its transport
/// properties, if it did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Forward {
    pub(crate) version: Version,
    pub(crate) thresholds: InlineThresholds,
    pub(crate) backward_credits: Option<u32>,
    /// The connection speaks draft-ietf-nfsv4-rpcrdma-version-two-07: backward calls are its
    /// reverse-direction calls (section 4.6), as the client's `reverse` offer allows.
    pub(crate) draft07: bool,
    /// On -07, the reverse direction the client offered in its RDMA2_CONNPROP_FINAL
    /// (RDMA2_PROPID_BRS, section 5.2.5; none until that arrives).
    pub(crate) reverse: ReverseDirection,
}

/// No RDMA_OPTIONAL of ours awaits an answer.
const NO_OPTION: u64 = u64::MAX;

/// Where the XIDs of a server's own RDMA_OPTIONAL messages start (the client's answer is
/// matched to one by its XID; see a client's `Connection` for the other direction).
const FIRST_OPTION_XID: u32 = 0x5350_0000;

impl<B: Backend> ServerSide<B> {
    pub(crate) fn new(conn: Arc<Transport<B>>) -> Arc<Self> {
        Arc::new(ServerSide {
            conn,
            state: Mutex::new((BackwardSlot::default(), None)),
            cv: Condvar::new(),
            awaiting: AtomicU64::new(NO_OPTION),
            next_option_xid: AtomicU32::new(FIRST_OPTION_XID),
        })
    }

    pub(crate) fn handle(self: &Arc<Self>) -> Backchannel {
        Backchannel { inner: self.clone() }
    }

    /// A forward call arrived: backward calls use its version and thresholds, and never
    /// exceed the backward credits the client stated.
    pub(crate) fn handle_forward_call(&self, forward: Forward) {
        self.lock().1 = Some(forward);
    }

    /// The client's -07 RDMA2_CONNPROP_FINAL offered the reverse direction `offered`
    /// (section 5.2.5): backward calls may follow it before its next forward call.
    pub(crate) fn handle_reverse_offered(&self, offered: ReverseDirection) {
        if let Some(f) = self.lock().1.as_mut() {
            f.reverse = offered;
        }
    }

    /// A backward reply with `xid` arrived ([`BackwardSlot::handle_reply`]).
    pub(crate) fn handle_reply(&self, xid: u32, bytes: Vec<u8>, header: Option<Detached>) -> bool {
        let ended = self.lock().0.handle_reply(xid, bytes, header);
        self.cv.notify_all();
        ended
    }

    /// The client's RDMA_ERROR naming `xid` arrived ([`BackwardSlot::handle_peer_error`]).
    pub(crate) fn handle_peer_error(&self, xid: u32, error: PeerError) -> bool {
        let ended = self.lock().0.handle_peer_error(xid, error);
        self.cv.notify_all();
        ended
    }

    /// The XID of our RDMA_OPTIONAL that awaits its answer, or on -07 of our
    /// reverse-direction call awaiting its reply, if one does.
    pub(crate) fn awaiting_answer(&self) -> Option<u32> {
        u32::try_from(self.awaiting.load(Ordering::SeqCst)).ok()
    }

    /// The connection is gone.
    pub(crate) fn close(&self) {
        self.lock().0.close();
        self.cv.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (BackwardSlot, Option<Forward>)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<B: Backend> ServerSide<B> {
    /// Waits, for the connection's timeout at most, for the client's answer to the message
    /// this side sent (a -07 reverse-direction call, or an RDMA_OPTIONAL): its bytes and the
    /// header view the serving thread judged; the client's RDMA_ERROR naming it, the
    /// connection's loss or the timeout as the error.
    fn wait_answer(&self) -> Result<(Vec<u8>, Option<Detached>), BackchannelError> {
        let timeout = self.conn.timeout();
        let st = self.lock();
        let (mut st, _) =
            self.cv.wait_timeout_while(st, timeout, |s| s.0.is_waiting()).unwrap_or_else(PoisonError::into_inner);
        match st.0.take() {
            Some(BackwardEnd::Reply { message, header }) => Ok((message, header)),
            Some(BackwardEnd::Error(e)) => Err(BackchannelError::Peer(e)),
            Some(BackwardEnd::Closed) => Err(BackchannelError::Closed),
            None => Err(BackchannelError::Timeout(timeout)),
        }
    }

    /// One exchange of a message of ours that is not a call (an RDMA_OPTIONAL, a -07
    /// extension's message) and the client's answer to it, under a fresh XID: refused unless
    /// `allowed` says the connection's latest forward call permits it; `run` sends it and
    /// waits ([`ServerSide::wait_answer`]). The answer is awaited under that XID meanwhile,
    /// and the backward direction is this exchange's until it ends.
    fn exchange<T>(
        &self,
        allowed: impl FnOnce(&Forward) -> Result<(), BackchannelError>,
        run: impl FnOnce(InlineThresholds, u32) -> Result<T, BackchannelError>,
    ) -> Result<T, BackchannelError> {
        let (t, xid) = {
            let mut st = self.lock();
            let Some(forward) = st.1 else {
                return Err(if st.0.is_closed() { BackchannelError::Closed } else { BackchannelError::NoVersionYet });
            };
            allowed(&forward)?;
            let xid = self.next_option_xid.fetch_add(1, Ordering::Relaxed);
            st.0.start(xid)?;
            (forward.thresholds, xid)
        };
        self.answered_under(xid, || run(t, xid))
    }

    /// Runs `run`, which sends a message of ours under `xid` (the backward direction's, taken
    /// with `start`) and waits for its answer, with that answer awaited under `xid` meanwhile
    /// ([`ServerSide::wait_answer`]); then the backward direction is free again.
    fn answered_under<T>(
        &self,
        xid: u32,
        run: impl FnOnce() -> Result<T, BackchannelError>,
    ) -> Result<T, BackchannelError> {
        // Set before it is sent: the answer may be judged before the Send's completion.
        self.awaiting.store(u64::from(xid), Ordering::SeqCst);
        let result = run();
        self.awaiting.store(NO_OPTION, Ordering::SeqCst);
        self.lock().0.finish();
        result
    }

    /// A message of a -07 extension's header type to the client, and its outcome, as
    /// [`Backchannel::send_extension`] says.
    fn extension_exchange(&self, htype: u32, body: &[u8]) -> Result<ExtensionReply, BackchannelError> {
        let allowed = |f: &Forward| match f.draft07 {
            true => Ok(()),
            false => Err(BackchannelError::NotDraft07),
        };
        self.exchange(allowed, |t, xid| {
            // Server to client: the client's Receives, sized by the reply threshold.
            let bytes = ExtensionMessage::to_message(xid, 0, htype, body);
            if bytes.len() > t.reply {
                return Err(BackchannelError::TooLarge { len: bytes.len(), threshold: t.reply });
            }
            send_draft07(&self.conn, &bytes)?;
            match self.wait_answer() {
                Ok((message, _)) => ExtensionReply::from_message(&message).ok_or(BackchannelError::Closed),
                Err(BackchannelError::Peer(PeerError::Draft07(e))) => Ok(ExtensionReply::from_error(&e)),
                Err(e) => Err(e),
            }
        })
    }

    /// A backward call on a -07 connection: a reverse-direction call (section 4.6.1) in the
    /// Simple format, RDMA2_CALL_INLINE with no chunk (what every RVRSDIR level but NONE
    /// takes, 5.2.5), within the client's Receive (`t.reply`), carrying the running total
    /// as every -07 Send does and taking a place in the client's window (4.2.1). Its reply
    /// is the client's RDMA2_REPLY_INLINE with its XID, judged by the serving thread.
    fn reverse_call(
        &self,
        message: &[u8],
        offered: ReverseDirection,
        t: InlineThresholds,
    ) -> Result<Vec<u8>, BackchannelError> {
        use rpcrdma_v2::draft07::marshal as marshal07;
        // Section 4.6.3: nothing goes until the client has said it takes it.
        if offered == ReverseDirection::None {
            return Err(BackchannelError::ReverseDirectionNotOffered);
        }
        let xid = message.get(..4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        let mut bytes = vec![0u8; t.reply];
        let header = marshal07::call_inline_header_len(&marshal07::NO_CHUNKS);
        let n = marshal07::call_inline(&mut bytes, xid, 0, 0, &marshal07::NO_CHUNKS, message).map_err(|_| {
            BackchannelError::TooLarge { len: message.len(), threshold: t.reply.saturating_sub(header) }
        })?;
        bytes.truncate(n);
        self.lock().0.start(xid)?;
        self.answered_under(xid, || {
            send_draft07(&self.conn, &bytes)?;
            let (message, header) = self.wait_answer()?;
            let header = header.and_then(|h| h.attach(&message)).ok_or(BackchannelError::Closed)?;
            Ok(header.payload().to_vec())
        })
    }
}

impl<B: Backend> Caller for ServerSide<B> {
    fn call(&self, message: &[u8]) -> Result<Vec<u8>, BackchannelError> {
        let (version, t) = {
            let mut st = self.lock();
            let Some(Forward { version, thresholds: t, backward_credits, draft07, reverse }) = st.1 else {
                return Err(if st.0.is_closed() { BackchannelError::Closed } else { BackchannelError::NoVersionYet });
            };
            if draft07 {
                drop(st);
                return self.reverse_call(message, reverse, t);
            }
            // One backward call at a time ([`SLOTS`]) is within any credit stated but 0.
            if backward_credits == Some(0) {
                return Err(BackchannelError::NoBackwardCredits);
            }
            // An RPC message starts with its XID; a shorter one fails in send_call below.
            let xid = message.get(..4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
            st.0.start(xid)?;
            (version, t)
        };
        // Server to client: the client's Receives bound the call, ours the reply.
        let backward = InlineThresholds { call: t.reply, reply: t.call };
        let ulb = InlineOnly { max_reply: backward.reply };
        let result = (|| {
            // 36 bytes: the RDMA_MSG header with three empty lists, the largest this sends.
            if message.len() + 28 > backward.call {
                return Err(BackchannelError::TooLarge { len: message.len(), threshold: backward.call });
            }
            let params = CallParams {
                version,
                credits: CREDITS,
                thresholds: backward,
                dialect: None,
                remote_invalidation: false,
                segments: crate::thresholds::SegmentLimits::NONE,
            };
            let pending = send_call(&self.conn, message, &ulb, &params)?;
            let timeout = self.conn.timeout();
            let (bytes, header) = {
                let st = self.lock();
                let (mut st, _) = self
                    .cv
                    .wait_timeout_while(st, timeout, |s| s.0.is_waiting())
                    .unwrap_or_else(PoisonError::into_inner);
                // Still ours (Busy to other callers) until `finish` below.
                match st.0.take() {
                    Some(BackwardEnd::Reply { message, header }) => (message, header),
                    Some(BackwardEnd::Error(e)) => {
                        // An error reply never invalidates (RFC 8797 section 4.1's rule is for
                        // replies): release the call's chunks ourselves.
                        let _ = pending.abandon(&self.conn, None);
                        return Err(BackchannelError::Peer(e));
                    }
                    Some(BackwardEnd::Closed) => {
                        let _ = pending.abandon(&self.conn, None);
                        return Err(BackchannelError::Closed);
                    }
                    None => {
                        let _ = pending.abandon(&self.conn, None);
                        return Err(BackchannelError::Timeout(timeout));
                    }
                }
            };
            // The header the core judged on the receiving thread, laid over the bytes again.
            let header = header.and_then(|h| h.attach(&bytes)).ok_or(BackchannelError::Closed)?;
            let mut out = Vec::new();
            pending.complete(&self.conn, message, &header, None, &ulb, &mut out)?;
            Ok(out)
        })();
        self.lock().0.finish();
        result
    }

    fn is_open(&self) -> bool {
        !self.lock().0.is_closed()
    }

    fn send_extension(&self, htype: u32, body: &[u8]) -> Result<ExtensionReply, BackchannelError> {
        self.extension_exchange(htype, body)
    }

    fn send_option(&self, opttype: u32, optinfo: &[u8], payload: &[u8]) -> Result<OptionReply, BackchannelError> {
        let allowed = |f: &Forward| match (f.draft07, f.version) {
            (true, _) => Err(BackchannelError::Draft07),
            (false, version) if version != Version::TWO => Err(BackchannelError::NotVersionTwo(version)),
            _ => Ok(()),
        };
        self.exchange(allowed, |t, xid| {
            // Server to client: the client's Receives, sized by the reply threshold.
            let threshold = t.reply;
            let bytes = option_message(xid, CREDITS, opttype, optinfo, payload, threshold).ok_or(
                BackchannelError::TooLarge { len: 24 + optinfo.len().div_ceil(4) * 4 + payload.len(), threshold },
            )?;
            send_error(&self.conn, &bytes)?;
            match self.wait_answer() {
                Ok((message, _)) => OptionReply::from_message(&message).ok_or(BackchannelError::Closed),
                Err(BackchannelError::Peer(PeerError::InvalOption)) => Ok(OptionReply::NotSupported),
                Err(e) => Err(e),
            }
        })
    }
}
