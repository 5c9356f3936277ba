//! Credits: RPC-over-RDMA Version One flow control (RFC 8166 section 3.3.1,
//! draft-ietf-nfsv4-rfc5666bis section 4.3.1), as two small sans-I/O state
//! machines that never allocate.
//!
//! - [`RequesterCredits`]: the requester's window. It asks for a number of
//!   credits in the `rdma_credit` field of each call, learns the granted value
//!   from the `rdma_credit` field of each reply, and never has more calls in
//!   flight than the lower of the requested and granted values. Until the first
//!   valid (non-error) reply of a connection it assumes exactly one credit
//!   (section 3.3.3), and it goes back to that state on every reconnect.
//! - [`ResponderCredits`]: the responder's side. It chooses the value to grant
//!   (never 0, never above its own maximum) and checks that a requester keeps
//!   within what it was granted.
//!
//! The rules on peers seen in practice (see docs/design.md, "Facts learned
//! from the peers' code"): the Linux client treats a grant of 0 as 1, clamps a grant above its maximum to
//! that maximum, and resets its window to 1 on reconnect. These machines do
//! the same, and additionally count the zero grant as a peer fault, since
//! section 3.3.1 says "The granted value MUST NOT be zero".
//!
//! ```
//! use rpcrdma_v1::credits::{Release, RequesterCredits, ResponderCredits};
//!
//! let mut responder = ResponderCredits::new(32);
//! let mut requester = RequesterCredits::new(128);
//!
//! // A new connection: one credit until the first valid reply.
//! let first = requester.try_acquire().unwrap();
//! assert!(requester.try_acquire().is_err());
//! assert!(responder.on_call(requester.in_flight()).is_ok());
//!
//! // The reply grants min(128, 32) = 32; the window opens.
//! let granted = responder.grant(requester.requested());
//! requester.on_reply(granted);
//! assert_eq!(requester.on_complete(first), Release::Released);
//! assert_eq!(requester.window(), 32);
//! ```

use core::fmt;

/// The requester's credit window on one connection (RFC 8166 section 3.3.1
/// "RPC-over-RDMA Credits" and section 3.3.3 "Initial Connection State").
///
/// Section 3.3.1: "A Requester MUST NOT send unacknowledged requests in excess
/// of the Responder's granted credit limit. [...] The number of allowed new
/// requests the Requester may send is then the lower of the current requested
/// and granted credit values, minus the number of requests in flight."
///
/// Section 3.3.3: "a Requester MUST NOT assume more than one credit is
/// available and MUST receive a valid reply from the Responder carrying the
/// actual number of available credits, prior to sending its next request."
///
/// The caller drives it with events and asks it before each send:
///
/// - before sending a call: [`RequesterCredits::try_acquire`], which hands out
///   a [`Credit`] or refuses with [`NoCredit`]; the call's `rdma_credit` field
///   carries [`RequesterCredits::requested`];
/// - on a reply (an `RDMA_MSG` or `RDMA_NOMSG` whose XID matches a call in
///   flight): [`RequesterCredits::on_reply`] with the reply's `rdma_credit`;
/// - on an `RDMA_ERROR` reply: [`RequesterCredits::on_error_reply`];
/// - when a call is finished for any reason (reply, error reply, timeout,
///   local failure to send): [`RequesterCredits::on_complete`] with its
///   [`Credit`];
/// - when the connection is lost and re-established:
///   [`RequesterCredits::on_reconnect`].
///
/// Replies whose XID matches no call in flight are the caller's to drop
/// before they reach this machine.
///
/// ```
/// use rpcrdma_v1::credits::{Release, RequesterCredits};
///
/// let mut c = RequesterCredits::new(4);
/// assert_eq!(c.window(), 1); // section 3.3.3: one credit until a reply
/// let a = c.try_acquire().unwrap();
/// assert!(c.try_acquire().is_err());
///
/// let outcome = c.on_reply(16); // the responder grants 16
/// assert!(outcome.opened);
/// assert_eq!(c.window(), 4); // min(requested 4, granted 16)
/// assert_eq!(c.on_complete(a), Release::Released);
///
/// let credits: Vec<_> = (0..4).map(|_| c.try_acquire().unwrap()).collect();
/// assert!(c.try_acquire().is_err()); // 4 in flight: the window is full
/// for credit in credits {
///     c.on_complete(credit);
/// }
/// assert_eq!(c.in_flight(), 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequesterCredits {
    /// The value this requester asks for; at least 1.
    requested: u32,
    /// The last grant received on this connection, after the zero-grant
    /// rule; 1 until the first valid reply.
    granted: u32,
    /// Whether a valid (non-error) reply has arrived on this connection.
    opened: bool,
    /// Credits handed out on this connection and not yet released.
    in_flight: u32,
    /// Which connection the credits handed out now belong to.
    epoch: u64,
    /// Protocol violations by the responder seen so far (never reset).
    peer_faults: u64,
}

/// One call's credit, handed out by [`RequesterCredits::try_acquire`] and
/// given back, exactly once, to [`RequesterCredits::on_complete`].
///
/// It is neither `Clone` nor `Copy`, so the type system guarantees a credit is
/// released at most once. Dropping it without passing it to
/// [`RequesterCredits::on_complete`] leaks the credit for the rest of the
/// connection (the window stays one smaller until the next reconnect).
///
/// A credit remembers the connection it was taken on: after
/// [`RequesterCredits::on_reconnect`] it is stale and releasing it changes
/// nothing ([`Release::Stale`]).
///
/// ```
/// use rpcrdma_v1::credits::{Release, RequesterCredits};
///
/// let mut c = RequesterCredits::new(8);
/// let credit = c.try_acquire().unwrap();
/// c.on_reconnect();
/// assert_eq!(c.on_complete(credit), Release::Stale);
/// assert_eq!(c.in_flight(), 0);
/// ```
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a credit must be given back to RequesterCredits::on_complete, or it leaks"]
pub struct Credit {
    epoch: u64,
}

/// [`RequesterCredits::try_acquire`] refused: sending now would put more calls
/// in flight than the window allows (RFC 8166 section 3.3.1). Wait for a call
/// to complete or for a larger grant.
///
/// ```
/// use rpcrdma_v1::credits::{NoCredit, RequesterCredits};
///
/// let mut c = RequesterCredits::new(8);
/// let _first = c.try_acquire().unwrap();
/// assert_eq!(c.try_acquire(), Err(NoCredit { in_flight: 1, window: 1 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoCredit {
    /// Calls in flight when the send was refused.
    pub in_flight: u32,
    /// The window at that moment.
    pub window: u32,
}

impl fmt::Display for NoCredit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no RPC-over-RDMA credit: {} calls in flight, window {}", self.in_flight, self.window)
    }
}

impl std::error::Error for NoCredit {}

/// What [`RequesterCredits::on_complete`] did with a [`Credit`].
///
/// ```
/// use rpcrdma_v1::credits::{Release, RequesterCredits};
///
/// let mut c = RequesterCredits::new(2);
/// let credit = c.try_acquire().unwrap();
/// assert_eq!(c.on_complete(credit), Release::Released);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The credit belonged to this connection; one fewer call is in flight.
    Released,
    /// The credit was taken before a reconnect; the calls of the old
    /// connection were already dropped from the count by
    /// [`RequesterCredits::on_reconnect`], so nothing changed.
    Stale,
}

/// What a reply did to the window: returned by [`RequesterCredits::on_reply`]
/// and [`RequesterCredits::on_error_reply`].
///
/// ```
/// use rpcrdma_v1::credits::RequesterCredits;
///
/// let mut c = RequesterCredits::new(8);
/// let outcome = c.on_reply(0);
/// assert!(outcome.zero_grant);
/// assert_eq!(outcome.granted, 1);
/// assert_eq!(c.peer_faults(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantOutcome {
    /// The grant now in effect: the reply's value, with 0 read as 1 (for an
    /// error reply, the grant in effect before it).
    pub granted: u32,
    /// The window after the reply: [`RequesterCredits::window`].
    pub window: u32,
    /// This reply ended the single-credit initial state (RFC 8166 section
    /// 3.3.3): it was the connection's first valid reply.
    pub opened: bool,
    /// The reply granted 0, which RFC 8166 section 3.3.1 forbids ("The granted
    /// value MUST NOT be zero, since such a value would result in deadlock");
    /// it was read as 1 and counted in [`RequesterCredits::peer_faults`].
    pub zero_grant: bool,
    /// Calls in flight beyond the new window when the grant shrank it. They
    /// were sent within the window of their time and are not recalled; no new
    /// call is allowed until they drain below the window.
    pub over_window: u32,
}

impl RequesterCredits {
    /// A requester asking for `requested` credits, in the initial state of a
    /// new connection: one credit until the first valid reply (RFC 8166 section
    /// 3.3.3). A `requested` of 0 would never allow a call and is read as 1.
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let c = RequesterCredits::new(128);
    /// assert_eq!((c.requested(), c.window(), c.in_flight()), (128, 1, 0));
    /// ```
    pub const fn new(requested: u32) -> Self {
        RequesterCredits {
            requested: if requested == 0 { 1 } else { requested },
            granted: 1,
            opened: false,
            in_flight: 0,
            epoch: 0,
            peer_faults: 0,
        }
    }

    /// The value to put in the `rdma_credit` field of each call (RFC 8166
    /// section 4.2.3, draft section 5.2.3: "When sent with an RPC Call message,
    /// the requested credit value is provided").
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    /// assert_eq!(RequesterCredits::new(32).requested(), 32);
    /// ```
    pub const fn requested(&self) -> u32 {
        self.requested
    }

    /// Change the requested value; "The requested and granted credit values
    /// MAY be adjusted to match the needs or policies in effect on either
    /// peer" (RFC 8166 section 3.3.1). 0 is read as 1. Lowering it below the
    /// calls in flight allows no new call until they drain; the count of such
    /// calls is returned.
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(4);
    /// c.on_reply(64);
    /// assert_eq!(c.window(), 4);
    /// assert_eq!(c.set_requested(16), 0);
    /// assert_eq!(c.window(), 16);
    /// ```
    pub fn set_requested(&mut self, requested: u32) -> u32 {
        self.requested = requested.max(1);
        self.in_flight.saturating_sub(self.window())
    }

    /// The last grant received on this connection, with 0 read as 1; 1 before
    /// the first valid reply (RFC 8166 section 3.3.3).
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(4);
    /// assert_eq!(c.granted(), 1);
    /// c.on_reply(64);
    /// assert_eq!(c.granted(), 64);
    /// ```
    pub const fn granted(&self) -> u32 {
        self.granted
    }

    /// Whether the connection has left the single-credit initial state, that
    /// is, a valid (non-error) reply has arrived since it was established (RFC
    /// 8166 section 3.3.3).
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(4);
    /// assert!(!c.is_open());
    /// c.on_reply(4);
    /// assert!(c.is_open());
    /// ```
    pub const fn is_open(&self) -> bool {
        self.opened
    }

    /// The most calls that may be in flight: 1 before the connection's first
    /// valid reply (RFC 8166 section 3.3.3), then "the lower of the current
    /// requested and granted credit values" (section 3.3.1). Never 0.
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(8);
    /// assert_eq!(c.window(), 1);
    /// c.on_reply(3);
    /// assert_eq!(c.window(), 3);
    /// c.on_reply(100);
    /// assert_eq!(c.window(), 8);
    /// ```
    pub const fn window(&self) -> u32 {
        if !self.opened {
            return 1;
        }
        if self.requested < self.granted {
            self.requested
        } else {
            self.granted
        }
    }

    /// Calls sent on this connection whose credit has not been released.
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(8);
    /// let credit = c.try_acquire().unwrap();
    /// assert_eq!(c.in_flight(), 1);
    /// c.on_complete(credit);
    /// assert_eq!(c.in_flight(), 0);
    /// ```
    pub const fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// How many more calls may be sent now: the window minus the calls in
    /// flight, or 0 when a shrunken window is still over-full (RFC 8166
    /// section 3.3.1).
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(8);
    /// c.on_reply(8);
    /// let _a = c.try_acquire().unwrap();
    /// assert_eq!(c.available(), 7);
    /// ```
    pub const fn available(&self) -> u32 {
        self.window().saturating_sub(self.in_flight)
    }

    /// Responder protocol violations seen on any connection so far: each reply
    /// that granted 0 credits (RFC 8166 section 3.3.1).
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(8);
    /// c.on_reply(0);
    /// c.on_reply(0);
    /// assert_eq!(c.peer_faults(), 2);
    /// ```
    pub const fn peer_faults(&self) -> u64 {
        self.peer_faults
    }

    /// Take a credit to send one call, or refuse when the calls in flight
    /// already fill the window ("A Requester MUST NOT send unacknowledged
    /// requests in excess of the Responder's granted credit limit", RFC 8166
    /// section 3.3.1; one credit only before the first valid reply, section
    /// 3.3.3).
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(8);
    /// let credit = c.try_acquire().unwrap();
    /// assert!(c.try_acquire().is_err());
    /// c.on_complete(credit);
    /// assert!(c.try_acquire().is_ok());
    /// ```
    pub fn try_acquire(&mut self) -> Result<Credit, NoCredit> {
        let window = self.window();
        if self.in_flight >= window {
            return Err(NoCredit { in_flight: self.in_flight, window });
        }
        self.in_flight += 1;
        Ok(Credit { epoch: self.epoch })
    }

    /// A valid reply (`RDMA_MSG` or `RDMA_NOMSG`) arrived carrying
    /// `granted_in_reply` in its `rdma_credit` field ("When sent with an RPC
    /// Reply message, the granted credit value is returned", draft section
    /// 5.2.3 / RFC 8166 section 4.2.3).
    ///
    /// The grant replaces the previous one ("Advertised credit values are not
    /// altered when individual RPCs are started or completed", section 3.3.1).
    /// A grant of 0 breaks "The granted value MUST NOT be zero" (section
    /// 3.3.1): it is read as 1, as the Linux client does, and counted in
    /// [`RequesterCredits::peer_faults`]. The first valid reply of a connection
    /// ends the single-credit initial state (section 3.3.3). A grant above the
    /// requested value is not a fault: the window is the lower of the two.
    ///
    /// This does not release the call's credit: pass it to
    /// [`RequesterCredits::on_complete`] as well.
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(8);
    /// let credit = c.try_acquire().unwrap();
    /// let outcome = c.on_reply(5);
    /// assert!(outcome.opened && !outcome.zero_grant);
    /// assert_eq!((outcome.granted, outcome.window), (5, 5));
    /// c.on_complete(credit);
    /// ```
    pub fn on_reply(&mut self, granted_in_reply: u32) -> GrantOutcome {
        let zero_grant = granted_in_reply == 0;
        if zero_grant {
            self.peer_faults += 1;
        }
        self.granted = granted_in_reply.max(1);
        let opened = !self.opened;
        self.opened = true;
        let window = self.window();
        GrantOutcome {
            granted: self.granted,
            window,
            opened,
            zero_grant,
            over_window: self.in_flight.saturating_sub(window),
        }
    }

    /// An `RDMA_ERROR` reply arrived. It changes neither the grant nor the
    /// window, and does not end the single-credit initial state.
    ///
    /// Section 3.3.3 opens the window only on "a valid reply from the
    /// Responder carrying the actual number of available credits"; the rules
    /// for forming an `RDMA_ERROR` (draft section 5.5, RFC 8166 section 4.5)
    /// set its XID, version and procedure but say nothing of its `rdma_credit`
    /// field, so an error reply carries no grant to rely on. The call it
    /// answers is complete ("Receipt of this procedure completes the RPC
    /// transaction"): pass its credit to [`RequesterCredits::on_complete`].
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(8);
    /// let credit = c.try_acquire().unwrap();
    /// let outcome = c.on_error_reply();
    /// assert!(!outcome.opened);
    /// assert_eq!(c.window(), 1);
    /// c.on_complete(credit);
    /// ```
    pub fn on_error_reply(&mut self) -> GrantOutcome {
        let window = self.window();
        GrantOutcome {
            granted: self.granted,
            window,
            opened: false,
            zero_grant: false,
            over_window: self.in_flight.saturating_sub(window),
        }
    }

    /// A call is finished: its reply or `RDMA_ERROR` arrived, it timed out,
    /// or it could not be sent. Its credit is released ("The number of allowed
    /// new requests the Requester may send is then the lower of the current
    /// requested and granted credit values, minus the number of requests in
    /// flight", RFC 8166 section 3.3.1).
    ///
    /// A credit taken before the last [`RequesterCredits::on_reconnect`] is
    /// stale and changes nothing.
    ///
    /// On a timeout the responder may still answer and that reply will use a
    /// receive buffer; a requester that must keep "enough receive resources to
    /// accommodate expected replies" (section 3.3.1) may prefer to reconnect on
    /// a timeout, as the Linux client does, rather than reuse the credit.
    ///
    /// ```
    /// use rpcrdma_v1::credits::{Release, RequesterCredits};
    ///
    /// let mut c = RequesterCredits::new(8);
    /// let credit = c.try_acquire().unwrap();
    /// assert_eq!(c.on_complete(credit), Release::Released);
    /// assert_eq!(c.in_flight(), 0);
    /// ```
    pub fn on_complete(&mut self, credit: Credit) -> Release {
        if credit.epoch != self.epoch {
            return Release::Stale;
        }
        debug_assert!(self.in_flight > 0, "a credit of this connection was released twice");
        self.in_flight = self.in_flight.saturating_sub(1);
        Release::Released
    }

    /// The connection was lost and a new one established. The window returns
    /// to one credit until the new connection's first valid reply (RFC 8166
    /// section 3.3.3, which applies to every connection; the Linux client
    /// likewise resets its window to 1), and the grant is forgotten.
    ///
    /// The calls in flight are lost with the old connection: the count drops
    /// to 0 and their [`Credit`]s become stale. Retransmitting them is the
    /// caller's job, and each retransmission needs a new credit from
    /// [`RequesterCredits::try_acquire`], one at a time until the first reply.
    /// The requested value and the count of peer faults are kept.
    ///
    /// ```
    /// use rpcrdma_v1::credits::RequesterCredits;
    ///
    /// let mut c = RequesterCredits::new(8);
    /// c.on_reply(8);
    /// let _lost = c.try_acquire().unwrap();
    /// c.on_reconnect();
    /// assert_eq!((c.window(), c.in_flight(), c.granted()), (1, 0, 1));
    /// ```
    pub fn on_reconnect(&mut self) {
        self.epoch += 1;
        self.in_flight = 0;
        self.granted = 1;
        self.opened = false;
    }
}

/// The responder's side of the credit protocol on one connection (RFC 8166
/// section 3.3.1): the value to grant in each reply, and a check that the
/// requester keeps within its grants.
///
/// The grant is never 0 ("The granted value MUST NOT be zero, since such a
/// value would result in deadlock") and never above `max`, the receive
/// resources the responder actually has for this connection.
///
/// The check is against the largest grant sent on this connection (1 before
/// any, section 3.3.3), not the latest: a requester learns of a reduced grant
/// only when the reply carrying it arrives, and calls it sent before then were
/// within its window ("the current granted credit limit at the Responder is
/// known to the Requester from RDMA Send ordering properties").
///
/// ```
/// use rpcrdma_v1::credits::ResponderCredits;
///
/// let mut r = ResponderCredits::new(16);
/// assert_eq!(r.grant(0), 1); // never 0
/// assert_eq!(r.grant(128), 16); // clamped to max
/// assert!(r.admits(16));
/// assert!(r.on_call(17).is_err()); // a 17th call in flight: a peer fault
/// assert_eq!(r.peer_faults(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponderCredits {
    /// The most credits this responder grants; at least 1.
    max: u32,
    /// The largest grant sent on this connection; 1 before any (section
    /// 3.3.3: every connection allows one call at a time).
    ceiling: u32,
    /// Calls seen beyond the ceiling, on any connection.
    peer_faults: u64,
}

/// [`ResponderCredits::on_call`] found more calls in flight than the requester
/// was ever granted on this connection (RFC 8166 section 3.3.1: "A Requester
/// MUST NOT send unacknowledged requests in excess of the Responder's granted
/// credit limit").
///
/// ```
/// use rpcrdma_v1::credits::{CreditOverrun, ResponderCredits};
///
/// let mut r = ResponderCredits::new(4);
/// assert_eq!(r.on_call(2), Err(CreditOverrun { in_flight: 2, granted: 1 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditOverrun {
    /// Calls in flight from the requester, the new one included.
    pub in_flight: u32,
    /// The largest grant sent on this connection.
    pub granted: u32,
}

impl fmt::Display for CreditOverrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "requester has {} calls in flight but was granted at most {}", self.in_flight, self.granted)
    }
}

impl std::error::Error for CreditOverrun {}

impl ResponderCredits {
    /// A responder that grants at most `max` credits (its receive resources
    /// for the connection), in the initial state of a new connection: one call
    /// at a time until it has granted more (RFC 8166 section 3.3.3). A `max`
    /// of 0 is read as 1, since a grant MUST NOT be zero (section 3.3.1).
    ///
    /// ```
    /// use rpcrdma_v1::credits::ResponderCredits;
    /// assert_eq!(ResponderCredits::new(0).max(), 1);
    /// ```
    pub const fn new(max: u32) -> Self {
        ResponderCredits { max: if max == 0 { 1 } else { max }, ceiling: 1, peer_faults: 0 }
    }

    /// The most credits this responder grants.
    ///
    /// ```
    /// use rpcrdma_v1::credits::ResponderCredits;
    /// assert_eq!(ResponderCredits::new(32).max(), 32);
    /// ```
    pub const fn max(&self) -> u32 {
        self.max
    }

    /// The largest grant sent on this connection (1 before any): the most
    /// calls the requester may have in flight.
    ///
    /// ```
    /// use rpcrdma_v1::credits::ResponderCredits;
    ///
    /// let mut r = ResponderCredits::new(32);
    /// r.grant(8);
    /// r.grant(2);
    /// assert_eq!(r.ceiling(), 8);
    /// ```
    pub const fn ceiling(&self) -> u32 {
        self.ceiling
    }

    /// Violations by the requester seen on any connection so far.
    ///
    /// ```
    /// use rpcrdma_v1::credits::ResponderCredits;
    /// assert_eq!(ResponderCredits::new(32).peer_faults(), 0);
    /// ```
    pub const fn peer_faults(&self) -> u64 {
        self.peer_faults
    }

    /// The value to put in the `rdma_credit` field of a reply to a call that
    /// requested `requested` credits (draft section 5.2.3 / RFC 8166 section
    /// 4.2.3), recorded as granted: the request clamped to `1..=max`. Never 0
    /// ("The granted value MUST NOT be zero", RFC 8166 section 3.3.1), never
    /// more than this responder's resources. The responder "MUST ensure that
    /// an increase in receive resources is effected before the next RPC Reply
    /// message is sent" (section 3.3.1): have the receives posted before
    /// sending the reply carrying a larger grant.
    ///
    /// ```
    /// use rpcrdma_v1::credits::ResponderCredits;
    ///
    /// let mut r = ResponderCredits::new(64);
    /// assert_eq!(r.grant(0), 1);
    /// assert_eq!(r.grant(32), 32);
    /// assert_eq!(r.grant(u32::MAX), 64);
    /// ```
    pub fn grant(&mut self, requested: u32) -> u32 {
        let granted = requested.clamp(1, self.max);
        self.ceiling = self.ceiling.max(granted);
        granted
    }

    /// Whether `in_flight` calls from the requester (the newest included) are
    /// within what it was granted on this connection (RFC 8166 section 3.3.1).
    /// Changes nothing; [`ResponderCredits::on_call`] also counts a fault.
    ///
    /// ```
    /// use rpcrdma_v1::credits::ResponderCredits;
    ///
    /// let r = ResponderCredits::new(8);
    /// assert!(r.admits(1));
    /// assert!(!r.admits(2)); // nothing granted yet: one call at a time
    /// ```
    pub const fn admits(&self, in_flight: u32) -> bool {
        in_flight <= self.ceiling
    }

    /// A call arrived while `in_flight` calls (this one included) are
    /// unanswered on this connection. Past the grant it is a protocol
    /// violation by the requester ("A Requester MUST NOT send unacknowledged
    /// requests in excess of the Responder's granted credit limit", RFC 8166
    /// section 3.3.1), counted in [`ResponderCredits::peer_faults`]; what to do
    /// about it (process it anyway if resources allow, or close the
    /// connection) is the caller's choice.
    ///
    /// ```
    /// use rpcrdma_v1::credits::ResponderCredits;
    ///
    /// let mut r = ResponderCredits::new(8);
    /// assert!(r.on_call(1).is_ok());
    /// r.grant(8);
    /// assert!(r.on_call(8).is_ok());
    /// assert!(r.on_call(9).is_err());
    /// assert_eq!(r.peer_faults(), 1);
    /// ```
    pub fn on_call(&mut self, in_flight: u32) -> Result<(), CreditOverrun> {
        if self.admits(in_flight) {
            return Ok(());
        }
        self.peer_faults += 1;
        Err(CreditOverrun { in_flight, granted: self.ceiling })
    }

    /// The connection was lost and a new one established: back to one call
    /// at a time until a grant is sent on it (RFC 8166 section 3.3.3). The
    /// maximum and the count of peer faults are kept.
    ///
    /// ```
    /// use rpcrdma_v1::credits::ResponderCredits;
    ///
    /// let mut r = ResponderCredits::new(8);
    /// r.grant(8);
    /// r.on_reconnect();
    /// assert!(!r.admits(2));
    /// ```
    pub fn on_reconnect(&mut self) {
        self.ceiling = 1;
    }
}
