//! Version Two's extensions (draft-cel-nfsv4-rpcrdma-version-two-00 sections 3.1 and 3.2),
//! in both directions and both roles: an [`Extension`] is a handler and the `rdma_opttype`
//! values it owns, given to [`ClientConfig::extensions`](crate::client::ClientConfig) and
//! [`ServerConfig::extensions`](crate::server::ServerConfig); each connection builds its own
//! [`Registry`] from them ([`registry`]), so that a received RDMA_OPTIONAL reaches its
//! handler, and one with an opttype nobody registered is answered with RDMA_ERR_INVAL_OPTION
//! echoing its XID (section 3.1, MUST). That rule lives once, in
//! [`rpcrdma_v2::verdict::receive_awaiting`]; the requester and the responder both ask it.
//!
//! A side sends its own RDMA_OPTIONAL with
//! [`Client::send_option`](crate::client::Client::send_option) or
//! [`Backchannel::send_option`](crate::backchannel::Backchannel::send_option), and learns
//! the outcome ([`OptionReply`]): the peer's answering RDMA_OPTIONAL (same XID), or
//! [`OptionReply::NotSupported`] (RDMA_ERR_INVAL_OPTION), on which the caller falls back.
//!
//! Only a connection settled on Version Two sends or answers RDMA_OPTIONAL. On a Version One
//! connection nothing is sent (the call is refused locally), and a Version Two RDMA_OPTIONAL
//! that arrives anyway is treated as before this module existed: a requester drops it
//! silently (it cannot be the reply to any of its calls, whose version is 1: draft 5.3), and a
//! responder whose versions stop at 1 answers RDMA_ERR_VERS (RFC 8166 section 4.5.1).
//!
//! Bounds, against a peer that floods RDMA_OPTIONAL messages: every received one is judged
//! and answered on the receiving thread before the next is read, and each answer's Send is
//! waited for, so at most one answer per connection is outstanding; a handler's answer larger
//! than the peer's inline threshold (its Receives) is not sent ([`fits`]). Every RDMA_OPTIONAL
//! a side sends holds a credit until its outcome (see `send_option` on each side), so the
//! number in flight is bounded by the credits.
//!
//! ```
//! use negotiate::extension::{registry, Extension};
//! use rpcrdma_v2::options::{OptionOutcome, OptionalAnswer, OptionalMessage};
//! let echo = Extension::new([70, 71], |m: &OptionalMessage<'_>| {
//!     OptionOutcome::Answer(OptionalAnswer { opttype: m.opttype, optinfo: m.optinfo.to_vec() })
//! });
//! let r = registry(&[echo]);
//! assert!(r.is_registered(70) && r.is_registered(71) && !r.is_registered(72));
//! ```

use std::sync::Arc;

use rpcrdma_v2::options::{encode_optional, OptionOutcome, OptionalAnswer, OptionalMessage, Registry};

/// The handler of an [`Extension`]: shared by every connection (hence `Fn`, `Send` and
/// `Sync`; state it keeps is behind its own lock or atomics). It runs on the connection's
/// receiving thread, before the next message is read: it should be quick. On a `Client` it
/// runs with the connection's state locked, so it must not call the `Client` itself.
pub type OptionFn = dyn Fn(&OptionalMessage<'_>) -> OptionOutcome + Send + Sync;

/// One extension: the opttypes it owns and its handler (draft section 3.2: an extension
/// document defines "a new rdma_opttype value and XDR description of the corresponding
/// rdma_optinfo content").
///
/// ```
/// use negotiate::extension::Extension;
/// use rpcrdma_v2::options::{OptionOutcome, OptionalMessage};
/// let e = Extension::new([7], |_: &OptionalMessage<'_>| OptionOutcome::Done);
/// assert_eq!(e.opttypes(), [7]);
/// assert_eq!(e.clone(), e);
/// ```
#[derive(Clone)]
pub struct Extension {
    opttypes: Vec<u32>,
    handler: Arc<OptionFn>,
}

impl Extension {
    /// An extension owning `opttypes`, handled by `handler`.
    ///
    /// ```
    /// use negotiate::extension::Extension;
    /// use rpcrdma_v2::options::{OptionOutcome, OptionalMessage};
    /// let picky = Extension::new([9], |m: &OptionalMessage<'_>| {
    ///     if m.optinfo.is_empty() { OptionOutcome::Unsupported } else { OptionOutcome::Done }
    /// });
    /// # drop(picky);
    /// ```
    pub fn new(
        opttypes: impl IntoIterator<Item = u32>,
        handler: impl Fn(&OptionalMessage<'_>) -> OptionOutcome + Send + Sync + 'static,
    ) -> Self {
        Extension { opttypes: opttypes.into_iter().collect(), handler: Arc::new(handler) }
    }

    /// The opttypes it owns.
    ///
    /// ```
    /// # use negotiate::extension::Extension;
    /// # use rpcrdma_v2::options::{OptionOutcome, OptionalMessage};
    /// assert!(Extension::new([], |_: &OptionalMessage<'_>| OptionOutcome::Done).opttypes().is_empty());
    /// ```
    pub fn opttypes(&self) -> &[u32] {
        &self.opttypes
    }
}

impl std::fmt::Debug for Extension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extension").field("opttypes", &self.opttypes).finish_non_exhaustive()
    }
}

/// Two extensions are equal when they own the same opttypes with the same handler (the same
/// `Arc`), so that configurations stay comparable.
impl PartialEq for Extension {
    fn eq(&self, other: &Self) -> bool {
        let same_handler = std::ptr::addr_eq(Arc::as_ptr(&self.handler), Arc::as_ptr(&other.handler));
        self.opttypes == other.opttypes && same_handler
    }
}

impl Eq for Extension {}

/// One connection's registry: every opttype of every extension, each going to its
/// extension's handler. An opttype two extensions claim goes to the first.
///
/// ```
/// use negotiate::extension::{registry, Extension};
/// use rpcrdma_v2::options::{OptionOutcome, OptionalMessage};
/// let a = Extension::new([1], |_: &OptionalMessage<'_>| OptionOutcome::Done);
/// let b = Extension::new([1, 2], |_: &OptionalMessage<'_>| OptionOutcome::Unsupported);
/// let mut r = registry(&[a, b]);
/// let m = OptionalMessage { xid: 1, credit: 1, opttype: 1, optinfo: &[], payload: &[] };
/// assert_eq!(r.dispatch(&m), Some(OptionOutcome::Done));
/// assert_eq!(r.len(), 2);
/// ```
pub fn registry(extensions: &[Extension]) -> Registry {
    let mut r = Registry::new();
    for e in extensions {
        for &t in &e.opttypes {
            let h = e.handler.clone();
            // Refused only for an opttype already claimed: the first extension keeps it.
            let _ = r.register(t, move |m: &OptionalMessage<'_>| {
                caught(m.opttype, || h(m)).unwrap_or(OptionOutcome::Unsupported)
            });
        }
    }
    r
}

/// Runs an extension's handler for a message of `kind` (an opttype, or a -07 header type):
/// `None` when it panicked, logged. A handler is the application's code run on the peer's
/// bytes, on the thread that judged them (a server's event loop, a client's dispatcher): its
/// panic is that message's failure, answered as one the handler does not support (draft
/// section 3.1: RDMA_ERR_INVAL_OPTION; -07 Appendix B: RDMA2_ERR_INVAL_HTYPE), not the
/// thread's end.
pub(crate) fn caught<T>(kind: u32, handler: impl FnOnce() -> T) -> Option<T> {
    let outcome = crate::application::run(handler);
    if outcome.is_none() {
        log::warn!("the extension handling type {kind} panicked; answered as unsupported");
    }
    outcome
}

/// What the peer made of an RDMA_OPTIONAL this side sent.
///
/// ```
/// use negotiate::extension::OptionReply;
/// let r = OptionReply::Answered { opttype: 7, optinfo: b"pong".to_vec() };
/// assert_ne!(r, OptionReply::NotSupported);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionReply {
    /// The peer's extension answered with an RDMA_OPTIONAL of its own (same XID).
    Answered {
        /// Its `rdma_opttype`.
        opttype: u32,
        /// Its `rdma_optinfo`.
        optinfo: Vec<u8>,
    },
    /// RDMA_ERR_INVAL_OPTION: the peer does not recognize or support the opttype (section
    /// 3.1). The caller goes on without the feature.
    NotSupported,
}

impl OptionReply {
    /// The answer in `message`, a received RDMA_OPTIONAL (already judged as the answer to
    /// ours); `None` if it does not decode.
    ///
    /// ```
    /// use negotiate::extension::OptionReply;
    /// use rpcrdma_v2::options::OptionalAnswer;
    /// let m = OptionalAnswer { opttype: 4, optinfo: vec![1] }.to_message(3, 1);
    /// assert_eq!(OptionReply::from_message(&m), Some(OptionReply::Answered { opttype: 4, optinfo: vec![1] }));
    /// ```
    pub fn from_message(message: &[u8]) -> Option<OptionReply> {
        let m = OptionalMessage::decode(message, 0, 0).ok()?;
        Some(OptionReply::Answered { opttype: m.opttype, optinfo: m.optinfo.to_vec() })
    }
}

/// An RDMA_OPTIONAL of ours: the transport header, then `payload` as its RPC Payload Stream
/// (section 4.2: one MAY follow); `None` when the whole does not fit `threshold`, the
/// peer's inline threshold for what this side sends (always inline: no chunk lists).
///
/// ```
/// let m = negotiate::extension::option_message(5, 1, 7, b"hi", b"payload", 1024).unwrap();
/// assert_eq!(m.len(), 24 + 4 + 7);
/// assert!(negotiate::extension::option_message(5, 1, 7, &[0; 1024], &[], 1024).is_none());
/// ```
pub fn option_message(
    xid: u32,
    credit: u32,
    opttype: u32,
    optinfo: &[u8],
    payload: &[u8],
    threshold: usize,
) -> Option<Vec<u8>> {
    let header = OptionalAnswer { opttype, optinfo: Vec::new() }.encoded_len() + optinfo.len().div_ceil(4) * 4;
    if header + payload.len() > threshold {
        return None;
    }
    let mut bytes = vec![0; header];
    encode_optional(xid, credit, opttype, optinfo, &mut bytes).ok()?;
    bytes.extend_from_slice(payload);
    Some(bytes)
}

/// Whether a handler's `answer` fits the peer's Receives (`threshold`): one that does not is
/// not sent (the sender then sees no answer, as from a handler that gave none).
///
/// ```
/// use rpcrdma_v2::options::OptionalAnswer;
/// assert!(negotiate::extension::fits(&OptionalAnswer { opttype: 1, optinfo: vec![0; 1000] }, 1024));
/// assert!(!negotiate::extension::fits(&OptionalAnswer { opttype: 1, optinfo: vec![0; 1001] }, 1024));
/// ```
pub fn fits(answer: &OptionalAnswer, threshold: usize) -> bool {
    answer.encoded_len() <= threshold
}
