//! The extension registry (draft-cel-nfsv4-rpcrdma-version-two-00 section
//! 3.1): an application registers one handler per `rdma_opttype` value; a
//! received RDMA_OPTIONAL reaches its handler with `rdma_optinfo` and any
//! RPC Payload Stream after it (section 4.2: one MAY follow), both borrowed
//! from the receive buffer. An opttype nobody registered, or whose handler
//! answers [`OptionOutcome::Unsupported`], is answered with
//! RDMA_ERR_INVAL_OPTION by [`crate::verdict::receive`] (section 3.1: "When
//! an implementation does not recognize or support the value ... it MUST
//! send ... RDMA_ERR_INVAL_OPTION").
//!
//! A handler may also *answer*: [`OptionOutcome::Answer`] asks the receiver
//! to send an RDMA_OPTIONAL of the handler's own back with the same XID (the
//! draft leaves what an extension sends to the extension's document, section
//! 3.2; echoing the XID is how the sender matches it, as RDMA_ERR_INVAL_OPTION
//! does in section 3.1).
//!
//! Registering allocates; dispatching a message does not (a binary search
//! over the registered opttypes); only an answer's own bytes, when a handler
//! answers, are allocated (by the handler).
//!
//! ```
//! use rpcrdma_v2::options::{OptionOutcome, OptionalMessage, Registry};
//! let mut registry = Registry::new();
//! registry.register(7, |m: &OptionalMessage<'_>| {
//!     assert_eq!(m.optinfo, b"ping");
//!     OptionOutcome::Done
//! }).unwrap();
//! assert!(registry.is_registered(7));
//! assert!(!registry.is_registered(8));
//! ```

use rpcrdma_v1::rt::{Reader, Xdr};

use crate::xdr::{Rpcrdma2Body, Rpcrdma2Optional, Rpcrdma2XprtHdr};

/// A received RDMA_OPTIONAL, borrowed from the receive buffer.
///
/// ```
/// use rpcrdma_v2::options::OptionalMessage;
/// let m = OptionalMessage { xid: 1, credit: 8, opttype: 7, optinfo: b"x", payload: &[] };
/// assert!(m.payload.is_empty());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalMessage<'a> {
    /// `rdma_xid`.
    pub xid: u32,
    /// `rdma_credit`.
    pub credit: u32,
    /// `rdma_opttype`: which optional operation (section 3.1).
    pub opttype: u32,
    /// `rdma_optinfo`: its data, meaningful to that operation only.
    pub optinfo: &'a [u8],
    /// What followed the transport header: an RPC Payload Stream when the
    /// extension has one follow (section 3.2 makes each extension say MUST
    /// or MUST NOT), else empty.
    pub payload: &'a [u8],
}

impl<'a> OptionalMessage<'a> {
    /// Decode the RDMA_OPTIONAL body that follows the four fixed words of
    /// `bytes`; the caller has read `xid`, `credit` and the procedure. Error
    /// offsets count from the start of `bytes`.
    ///
    /// ```
    /// use rpcrdma_v2::options::{encode_optional, OptionalMessage};
    /// let mut buf = [0u8; 32];
    /// let n = encode_optional(9, 1, 7, b"hi", &mut buf).unwrap();
    /// let m = OptionalMessage::decode(&buf[..n], 9, 1).unwrap();
    /// assert_eq!((m.opttype, m.optinfo), (7, &b"hi"[..]));
    /// ```
    pub fn decode(bytes: &'a [u8], xid: u32, credit: u32) -> Result<Self, rpcrdma_v1::rt::Error> {
        let mut r = Reader::new(bytes);
        r.take(rpcrdma_v1::header::offsets::BODY)?;
        let opt = Rpcrdma2Optional::decode_from(&mut r)?;
        let payload = &bytes[r.position()..];
        Ok(OptionalMessage { xid, credit, opttype: opt.rdma_opttype, optinfo: opt.rdma_optinfo, payload })
    }
}

/// What a handler did with a message.
///
/// ```
/// assert_ne!(rpcrdma_v2::options::OptionOutcome::Done, rpcrdma_v2::options::OptionOutcome::Unsupported);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionOutcome {
    /// Handled; nothing to send on the transport's behalf (an extension
    /// reports its own errors by its own means: section 3.2).
    Done,
    /// The handler does not support this use of its opttype now: answered
    /// with RDMA_ERR_INVAL_OPTION as if it were unregistered (section 3.1:
    /// "does not recognize or support").
    Unsupported,
    /// Handled, and this RDMA_OPTIONAL goes back to the sender with the
    /// received message's XID: the extension's answer.
    Answer(OptionalAnswer),
}

/// An RDMA_OPTIONAL a handler sends back ([`OptionOutcome::Answer`]): its
/// `rdma_opttype` and `rdma_optinfo`; the receiver fills in the XID of the
/// message answered and its own `rdma_credit`. No RPC Payload Stream follows
/// an answer.
///
/// ```
/// use rpcrdma_v2::options::OptionalAnswer;
/// let a = OptionalAnswer { opttype: 7, optinfo: b"pong".to_vec() };
/// let bytes = a.to_message(9, 32);
/// assert_eq!(bytes.len(), a.encoded_len());
/// assert_eq!(&bytes[..4], 9u32.to_be_bytes());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionalAnswer {
    /// `rdma_opttype` of the answer.
    pub opttype: u32,
    /// `rdma_optinfo` of the answer.
    pub optinfo: Vec<u8>,
}

impl OptionalAnswer {
    /// The length of the encoded transport header: 24 bytes and `optinfo`
    /// padded to four (section 4.2). A receiver checks it against the
    /// peer's inline threshold before sending.
    ///
    /// ```
    /// let a = rpcrdma_v2::options::OptionalAnswer { opttype: 1, optinfo: vec![0; 5] };
    /// assert_eq!(a.encoded_len(), 24 + 8);
    /// ```
    pub fn encoded_len(&self) -> usize {
        24 + self.optinfo.len().div_ceil(4) * 4
    }

    /// The whole RDMA_OPTIONAL answering message `xid`, carrying `credit`.
    ///
    /// ```
    /// let a = rpcrdma_v2::options::OptionalAnswer { opttype: 3, optinfo: vec![] };
    /// assert_eq!(a.to_message(1, 2)[12..20], [0, 0, 0, 5, 0, 0, 0, 3]);
    /// ```
    pub fn to_message(&self, xid: u32, credit: u32) -> Vec<u8> {
        let mut buf = vec![0; self.encoded_len()];
        // The buffer is exactly the encoded length: encoding cannot fail.
        let n = encode_optional(xid, credit, self.opttype, &self.optinfo, &mut buf).unwrap_or(0);
        buf.truncate(n);
        buf
    }
}

/// A handler for one opttype. Closures taking `&OptionalMessage` and
/// returning [`OptionOutcome`] are handlers.
///
/// ```
/// use rpcrdma_v2::options::{OptionHandler, OptionOutcome, OptionalMessage};
/// struct Count(u32);
/// impl OptionHandler for Count {
///     fn handle(&mut self, _: &OptionalMessage<'_>) -> OptionOutcome {
///         self.0 += 1;
///         OptionOutcome::Done
///     }
/// }
/// let mut c = Count(0);
/// c.handle(&OptionalMessage { xid: 1, credit: 1, opttype: 3, optinfo: &[], payload: &[] });
/// assert_eq!(c.0, 1);
/// ```
pub trait OptionHandler {
    /// Act on `msg`, whose opttype this handler was registered for.
    fn handle(&mut self, msg: &OptionalMessage<'_>) -> OptionOutcome;
}

impl<F: FnMut(&OptionalMessage<'_>) -> OptionOutcome> OptionHandler for F {
    fn handle(&mut self, msg: &OptionalMessage<'_>) -> OptionOutcome {
        self(msg)
    }
}

/// An opttype registered twice.
///
/// ```
/// use rpcrdma_v2::options::{AlreadyRegistered, OptionOutcome, OptionalMessage, Registry};
/// let mut r = Registry::new();
/// let h = |_: &OptionalMessage<'_>| OptionOutcome::Done;
/// r.register(1, h).unwrap();
/// assert_eq!(r.register(1, h), Err(AlreadyRegistered(1)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a handler for rdma_opttype {0} is already registered")]
pub struct AlreadyRegistered(pub u32);

/// The handlers, one per opttype, sorted for lookup.
///
/// ```
/// use rpcrdma_v2::options::{encode_optional, OptionOutcome, OptionalAnswer, OptionalMessage, Registry};
/// use rpcrdma_v2::verdict::{default_policy, receive, Reason, Verdict};
/// let mut registry = Registry::new();
/// // opttype 7 answers "ping" with "pong"; nothing else is registered.
/// registry
///     .register(7, |m: &OptionalMessage<'_>| {
///         OptionOutcome::Answer(OptionalAnswer { opttype: 7, optinfo: [b"pong", m.optinfo].concat() })
///     })
///     .unwrap();
///
/// let mut buf = [0u8; 32];
/// let n = encode_optional(9, 1, 7, b"ping", &mut buf).unwrap();
/// match receive(&buf[..n], &default_policy(), &mut registry) {
///     Verdict::Handled { xid: 9, opttype: 7, answer: Some(a) } => assert_eq!(a.optinfo, b"pongping"),
///     other => panic!("{other:?}"),
/// }
/// // An opttype with no handler is refused with RDMA_ERR_INVAL_OPTION.
/// let n = encode_optional(10, 1, 8, b"", &mut buf).unwrap();
/// let Verdict::Reply { reason, .. } = receive(&buf[..n], &default_policy(), &mut registry) else { panic!() };
/// assert_eq!(reason, Reason::UnsupportedOption(8));
/// ```
#[derive(Default)]
pub struct Registry {
    handlers: Vec<(u32, Box<dyn OptionHandler + Send>)>,
}

impl core::fmt::Debug for Registry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_set().entries(self.handlers.iter().map(|(t, _)| t)).finish()
    }
}

impl Registry {
    /// An empty registry: every RDMA_OPTIONAL is answered with
    /// RDMA_ERR_INVAL_OPTION.
    ///
    /// ```
    /// assert!(rpcrdma_v2::options::Registry::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `handler` for `opttype`; refused if one is registered.
    ///
    /// ```
    /// use rpcrdma_v2::options::{OptionOutcome, OptionalMessage, Registry};
    /// let mut r = Registry::new();
    /// r.register(u32::MAX, |_: &OptionalMessage<'_>| OptionOutcome::Done).unwrap();
    /// assert_eq!(r.len(), 1);
    /// ```
    pub fn register<H: OptionHandler + Send + 'static>(
        &mut self,
        opttype: u32,
        handler: H,
    ) -> Result<(), AlreadyRegistered> {
        match self.find(opttype) {
            Ok(_) => Err(AlreadyRegistered(opttype)),
            Err(at) => {
                self.handlers.insert(at, (opttype, Box::new(handler)));
                Ok(())
            }
        }
    }

    /// Remove the handler for `opttype`; whether there was one.
    ///
    /// ```
    /// use rpcrdma_v2::options::{OptionOutcome, OptionalMessage, Registry};
    /// let mut r = Registry::new();
    /// r.register(5, |_: &OptionalMessage<'_>| OptionOutcome::Done).unwrap();
    /// assert!(r.unregister(5));
    /// assert!(!r.unregister(5));
    /// ```
    pub fn unregister(&mut self, opttype: u32) -> bool {
        self.find(opttype).map(|at| self.handlers.remove(at)).is_ok()
    }

    /// Whether a handler is registered for `opttype`.
    ///
    /// ```
    /// assert!(!rpcrdma_v2::options::Registry::new().is_registered(0));
    /// ```
    pub fn is_registered(&self, opttype: u32) -> bool {
        self.find(opttype).is_ok()
    }

    /// How many opttypes have handlers.
    ///
    /// ```
    /// assert_eq!(rpcrdma_v2::options::Registry::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.handlers.len()
    }

    /// Whether no opttype has a handler.
    ///
    /// ```
    /// assert!(rpcrdma_v2::options::Registry::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }

    /// Hand `msg` to its opttype's handler: `None` if none is registered.
    /// Allocates nothing.
    ///
    /// ```
    /// use rpcrdma_v2::options::{OptionOutcome, OptionalMessage, Registry};
    /// let mut r = Registry::new();
    /// r.register(2, |m: &OptionalMessage<'_>| if m.optinfo.is_empty() { OptionOutcome::Unsupported } else { OptionOutcome::Done }).unwrap();
    /// let m = OptionalMessage { xid: 1, credit: 1, opttype: 2, optinfo: b"ok", payload: &[] };
    /// assert_eq!(r.dispatch(&m), Some(OptionOutcome::Done));
    /// assert_eq!(r.dispatch(&OptionalMessage { opttype: 3, ..m }), None);
    /// ```
    pub fn dispatch(&mut self, msg: &OptionalMessage<'_>) -> Option<OptionOutcome> {
        let at = self.find(msg.opttype).ok()?;
        Some(self.handlers[at].1.handle(msg))
    }

    fn find(&self, opttype: u32) -> Result<usize, usize> {
        self.handlers.binary_search_by_key(&opttype, |(t, _)| *t)
    }
}

/// Encode an RDMA_OPTIONAL transport header into `buf` (section 4.2): the
/// caller sends `buf[..n]` followed by the RPC Payload Stream, if its
/// extension has one follow. Returns `n`.
///
/// ```
/// use rpcrdma_v2::options::encode_optional;
/// let mut buf = [0u8; 32];
/// let n = encode_optional(9, 1, 7, b"hello", &mut buf).unwrap();
/// assert_eq!(n, 16 + 4 + 4 + 8);
/// assert_eq!(&buf[12..20], [0, 0, 0, 5, 0, 0, 0, 7]); // RDMA_OPTIONAL, opttype 7
/// ```
pub fn encode_optional(
    xid: u32,
    credit: u32,
    opttype: u32,
    optinfo: &[u8],
    buf: &mut [u8],
) -> Result<usize, rpcrdma_v1::rt::Error> {
    let rdma_body = Rpcrdma2Body::RdmaOptional(Rpcrdma2Optional { rdma_opttype: opttype, rdma_optinfo: optinfo });
    Rpcrdma2XprtHdr { rdma_xid: xid, rdma_vers: crate::RPCRDMA2_VERSION.wire(), rdma_credit: credit, rdma_body }
        .encode(buf)
}
