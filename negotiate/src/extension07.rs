//! draft-ietf-nfsv4-rpcrdma-version-two-07's extensions (its Appendix B), the way -00's
//! RDMA_OPTIONAL extensions work in [`crate::extension`]: a [`Draft07Extension`] owns new
//! header types (B.2) and states new transport properties (B.3), and its handler answers a
//! peer's message of one of its types, with a message of its own or an error code, a new one
//! included (B.4). Given to [`ClientConfig::draft07_extensions`](crate::client::ClientConfig)
//! and [`ServerConfig::draft07_extensions`](crate::server::ServerConfig), each connection
//! builds a [`Registry07`] from them; a message of a type nobody registered is answered
//! RDMA2_ERR_INVAL_HTYPE, as the base has it (section 7.1.3). An extension's types come from
//! its own document compiled with the base's XDR (B.1): this workspace's example is
//! `specs/rpcrdma2-ping.txt`, whose types are `rpcrdma_v2::draft07::xdr::ping`.
//!
//! A client sends one with [`Client::send_extension`](crate::client::Client::send_extension)
//! and learns the outcome ([`ExtensionReply`]); the peer's properties, extensions' included,
//! are [`Client::draft07_peer_properties`](crate::client::Client::draft07_peer_properties)
//! and `Peer::draft07_properties` on a server.
//!
//! Bounds: a handler runs on the connection's receiving thread (it should be quick), and its
//! answer is one message within the peer's Receive (a larger one is not sent, and the message
//! is answered RDMA2_ERR_SYSTEM instead: the base's error for this side's own limits, 7.4.1).
//! Every message either side sends takes a credit (4.2.1).
//!
//! ```
//! use negotiate::extension07::{Draft07Extension, ExtensionOutcome, Registry07};
//! use rpcrdma_v2::draft07::extension::ExtensionMessage;
//! let echo = Draft07Extension::new([100], |m: &ExtensionMessage<'_>| ExtensionOutcome::Answer {
//!     htype: 101,
//!     body: m.body.to_vec(),
//! })
//! .stating(0xF000_0001, vec![0, 0, 0, 1]);
//! let r = Registry07::of(&[echo]);
//! let wire = ExtensionMessage::to_message(9, 32, 100, &[1, 2, 3, 4]);
//! let got = r.handle(&ExtensionMessage::parse(&wire).unwrap());
//! assert_eq!(got, Some(ExtensionOutcome::Answer { htype: 101, body: vec![1, 2, 3, 4] }));
//! assert_eq!(r.handle(&ExtensionMessage::parse(&ExtensionMessage::to_message(9, 32, 102, &[])).unwrap()), None);
//! assert_eq!(r.properties(), [(0xF000_0001, vec![0, 0, 0, 1])]);
//! ```

use std::sync::Arc;

use rpcrdma_v2::draft07::extension::ExtensionMessage;

/// What a handler makes of a peer's message of one of its extension's types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtensionOutcome {
    /// Answer with a message of header type `htype` carrying `body` after the four words
    /// every header starts with, and the received message's XID.
    Answer {
        /// Its header type.
        htype: u32,
        /// What follows the four words.
        body: Vec<u8>,
    },
    /// Answer with RDMA2_ERROR and this code: a base one, or one the extension defines
    /// (Appendix B.4: the default arm, nothing after the code).
    Error(u32),
    /// Nothing to send back.
    Done,
    /// Not taken after all: answered RDMA2_ERR_INVAL_HTYPE, as for a type nobody registered.
    Unsupported,
}

/// The handler of a [`Draft07Extension`], shared by every connection.
pub type ExtensionFn07 = dyn Fn(&ExtensionMessage<'_>) -> ExtensionOutcome + Send + Sync;

/// One extension of -07: the header types it owns, the properties it states, its handler.
///
/// ```
/// use negotiate::extension07::{Draft07Extension, ExtensionOutcome};
/// let e = Draft07Extension::new([0xF000_0010], |_: &_| ExtensionOutcome::Done);
/// assert_eq!(e.htypes(), [0xF000_0010]);
/// assert!(e.properties().is_empty());
/// ```
#[derive(Clone)]
pub struct Draft07Extension {
    htypes: Vec<u32>,
    properties: Vec<(u32, Vec<u8>)>,
    handler: Arc<ExtensionFn07>,
}

impl Draft07Extension {
    /// An extension owning header types `htypes` (each above the base's,
    /// `rpcrdma_v2::draft07::extension::LAST_BASE_HTYPE`; others are never handed to it),
    /// handled by `handler`.
    pub fn new(
        htypes: impl IntoIterator<Item = u32>,
        handler: impl Fn(&ExtensionMessage<'_>) -> ExtensionOutcome + Send + Sync + 'static,
    ) -> Self {
        Draft07Extension { htypes: htypes.into_iter().collect(), properties: Vec::new(), handler: Arc::new(handler) }
    }

    /// States transport property `which` with value `data` (its XDR) in this side's
    /// RDMA2_CONNPROP_FINAL (Appendix B.3), the way a peer learns it supports the extension
    /// without a test invocation (B.2).
    pub fn stating(mut self, which: u32, data: Vec<u8>) -> Self {
        self.properties.push((which, data));
        self
    }

    /// The header types it owns.
    pub fn htypes(&self) -> &[u32] {
        &self.htypes
    }

    /// The properties it states.
    pub fn properties(&self) -> &[(u32, Vec<u8>)] {
        &self.properties
    }
}

/// Equal when they own the same types, state the same properties, and share one handler.
impl PartialEq for Draft07Extension {
    fn eq(&self, other: &Self) -> bool {
        let same_handler = std::ptr::addr_eq(Arc::as_ptr(&self.handler), Arc::as_ptr(&other.handler));
        self.htypes == other.htypes && self.properties == other.properties && same_handler
    }
}

impl Eq for Draft07Extension {}

impl std::fmt::Debug for Draft07Extension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Draft07Extension").field("htypes", &self.htypes).field("properties", &self.properties).finish()
    }
}

/// A connection's -07 extensions, by header type ([`Registry07::of`]).
#[derive(Clone, Default)]
pub struct Registry07 {
    handlers: Vec<(u32, Arc<ExtensionFn07>)>,
    properties: Vec<(u32, Vec<u8>)>,
}

impl std::fmt::Debug for Registry07 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let htypes: Vec<u32> = self.handlers.iter().map(|(h, _)| *h).collect();
        f.debug_struct("Registry07").field("htypes", &htypes).field("properties", &self.properties).finish()
    }
}

impl Registry07 {
    /// The registry of `extensions`: a header type two of them claim goes to the first.
    pub fn of(extensions: &[Draft07Extension]) -> Self {
        let mut r = Registry07::default();
        for e in extensions {
            for &h in &e.htypes {
                if !r.handlers.iter().any(|(t, _)| *t == h) {
                    r.handlers.push((h, e.handler.clone()));
                }
            }
            r.properties.extend(e.properties.iter().cloned());
        }
        r
    }

    /// What the extension owning `m`'s header type makes of it; `None` when none owns it. A
    /// handler that panics makes it [`ExtensionOutcome::Unsupported`].
    pub fn handle(&self, m: &ExtensionMessage<'_>) -> Option<ExtensionOutcome> {
        let (_, handler) = self.handlers.iter().find(|(h, _)| *h == m.htype)?;
        Some(crate::extension::caught(m.htype, || handler(m)).unwrap_or(ExtensionOutcome::Unsupported))
    }

    /// The properties the extensions state, in order.
    pub fn properties(&self) -> &[(u32, Vec<u8>)] {
        &self.properties
    }
}

/// What goes back for a peer's extension message, as its handler's outcome says: one home
/// for Appendix B.2 and B.4's rules, which each side then sends its own way (a responder at
/// once, a requester when its window has room).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Response {
    /// The handler's answer, marshaled with `rdma_credit` 0: the sender stamps its running
    /// total when it sends it (`rpcrdma_v1::header::set_credit`).
    Answer(Vec<u8>),
    /// RDMA2_ERROR with this code.
    Refuse(u32),
    /// Nothing.
    Nothing,
}

/// The [`Response`] to `m` for `outcome`: an answer no larger than `room` (the peer's
/// Receive, else RDMA2_ERR_SYSTEM: this side's own limit, section 7.4.1), the handler's error
/// code, nothing, or RDMA2_ERR_INVAL_HTYPE when the handler declines it (7.1.3). `peer` names
/// the peer in the warning.
pub(crate) fn response(m: &ExtensionMessage<'_>, outcome: ExtensionOutcome, room: u32, peer: &str) -> Response {
    use rpcrdma_v2::draft07::xdr::{RDMA2_ERR_INVAL_HTYPE, RDMA2_ERR_SYSTEM};
    match outcome {
        ExtensionOutcome::Answer { htype, body } => {
            let answer = ExtensionMessage::to_message(m.xid, 0, htype, &body);
            if answer.len() > room as usize {
                log::warn!(
                    "the answer to -07 extension message {:#010x} ({} bytes) is over the {peer}'s Receive ({room} bytes): answered RDMA2_ERR_SYSTEM",
                    m.xid,
                    answer.len()
                );
                return Response::Refuse(RDMA2_ERR_SYSTEM);
            }
            Response::Answer(answer)
        }
        ExtensionOutcome::Error(code) => Response::Refuse(code),
        ExtensionOutcome::Done => Response::Nothing,
        ExtensionOutcome::Unsupported => Response::Refuse(RDMA2_ERR_INVAL_HTYPE),
    }
}

/// The outcome of a message of an extension's type this side sent
/// ([`Client::send_extension`](crate::client::Client::send_extension)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtensionReply {
    /// The peer's answer with the same XID: its header type and what follows the four words.
    Answer {
        /// Its header type.
        htype: u32,
        /// What follows the four words.
        body: Vec<u8>,
    },
    /// RDMA2_ERR_INVAL_HTYPE: the peer does not take that header type (section 7.1.3).
    NotSupported,
    /// Another RDMA2_ERROR: its code (a base one, or one an extension defines, B.4).
    Error(u32),
}

impl ExtensionReply {
    /// The peer's answer, `message` (judged as the answer to ours): `None` when it is not an
    /// extension's message.
    ///
    /// ```
    /// use negotiate::extension07::ExtensionReply;
    /// use rpcrdma_v2::draft07::extension::ExtensionMessage;
    /// let m = ExtensionMessage::to_message(3, 32, 0xF000_0011, &[1, 2, 3, 4]);
    /// assert_eq!(ExtensionReply::from_message(&m), Some(ExtensionReply::Answer { htype: 0xF000_0011, body: vec![1, 2, 3, 4] }));
    /// ```
    pub fn from_message(message: &[u8]) -> Option<ExtensionReply> {
        let m = ExtensionMessage::parse(message)?;
        Some(ExtensionReply::Answer { htype: m.htype, body: m.body.to_vec() })
    }

    /// The peer's RDMA2_ERROR naming ours: RDMA2_ERR_INVAL_HTYPE is
    /// [`ExtensionReply::NotSupported`] (section 7.1.3), any other code an error.
    ///
    /// ```
    /// use negotiate::extension07::ExtensionReply;
    /// use rpcrdma_v2::draft07::xdr::Rpcrdma2HdrError;
    /// assert_eq!(ExtensionReply::from_error(&Rpcrdma2HdrError::Default { discriminant: 4 }), ExtensionReply::NotSupported);
    /// assert_eq!(ExtensionReply::from_error(&Rpcrdma2HdrError::Default { discriminant: 2 }), ExtensionReply::Error(2));
    /// ```
    pub fn from_error(error: &rpcrdma_v2::draft07::xdr::Rpcrdma2HdrError) -> ExtensionReply {
        match error.code() {
            rpcrdma_v2::draft07::xdr::RDMA2_ERR_INVAL_HTYPE => ExtensionReply::NotSupported,
            code => ExtensionReply::Error(code),
        }
    }
}
