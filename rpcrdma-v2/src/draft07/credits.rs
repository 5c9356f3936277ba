//! -07's credits: running totals with wrap-around (draft-ietf-nfsv4-rpcrdma-version-two-07
//! section 4.2.1), RDMA2_GRANT (4.2.1.1, 6.3.2), and the Receive kept for it. Sans-I/O: the
//! connection tells a [`CreditWindow`] what it sends and receives, and asks it what to put in
//! `rdma_credit`, whether a message may go, and whether to send a GRANT.
//!
//! Each peer counts the Sends it posted and the Receives that completed, from zero when the
//! connection is established; `rdma_credit` carries a running total, and a peer may post its
//! next message while its count of Sends stays within the last total it received (starting
//! at one: one message until the peer's first header, 4.2.1's "Received credits ... MUST set
//! this value to one (1)"). Totals are compared modulo 2^32.
//!
//! **The total a peer advertises.** The text has a sender set `rdma_credit` to its own "Sent
//! message count" plus its "Advertised credits". Taken literally, every message this side
//! sends raises the other side's window by one whatever it received, so each RDMA2_GRANT would
//! hand out a Receive this side never posted; and with call-only operation (4.7), where this
//! side sends nothing, the window never moves. The quantity the peer compares its own Sends
//! against is how many of them this side is prepared to have received: this side's "Received
//! message count" plus its "Advertised credits". That is what is sent here (noted with the
//! draft's other prose defects in `specs/draft-ietf-nfsv4-rpcrdma-version-two-07.errata`). In
//! strict call and reply, where each side's Sends match the other's Receives, both readings
//! give the same number.
//!
//! ```
//! use rpcrdma_v2::draft07::credits::CreditWindow;
//! let mut w = CreditWindow::new(32).unwrap();
//! assert!(w.may_send()); // one message before the peer's first header
//! assert_eq!(w.send(), 32); // its rdma_credit: nothing received yet, 32 advertised
//! assert!(!w.may_send());
//! w.received(0 + 32).unwrap(); // the peer had received nothing, and advertises 32
//! assert_eq!(w.window(), 31);
//! assert_eq!(w.credit_field(), 1 + 32); // we received one message and advertise 32
//! assert_eq!(w.receives_to_post(), 33); // one more than advertised, for a GRANT
//! ```

/// Credit totals and limits must be less than 2^31 - 1 (section 4.2.1).
pub const MAX_CREDITS: u32 = (1 << 31) - 2;

/// Why a credit value is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreditError {
    /// An advertised limit of 2^31 - 1 or more (section 4.2.1: "credit limit values MUST be
    /// less than 2^31 - 1").
    #[error("a credit limit of {0}: limits must be less than 2^31 - 1 (section 4.2.1)")]
    LimitTooLarge(u32),
    /// A received total that grants 2^31 - 1 or more messages beyond those sent: no limit
    /// the peer may hold gives that.
    #[error("rdma_credit {total} grants {window} messages beyond the {sent} sent (section 4.2.1)")]
    WindowTooLarge {
        /// The total received.
        total: u32,
        /// This side's Sends so far.
        sent: u32,
        /// What it would grant.
        window: u32,
    },
}

/// One connection's credit state, both ways (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditWindow {
    /// Sends posted ("Sent message count"), modulo 2^32.
    sent: u32,
    /// Receives completed ("Received message count"), modulo 2^32.
    received: u32,
    /// The messages this side is prepared to receive beyond those received ("Advertised
    /// credits").
    advertised: u32,
    /// The last `rdma_credit` received ("Received credits").
    peer_total: u32,
    /// The total this side last sent, to judge when a GRANT is due.
    last_sent_total: u32,
    /// Where both counters started (0 on a real connection; [`CreditWindow::starting_at`]).
    origin: u32,
}

impl CreditWindow {
    /// A connection just established, advertising `advertised` credits.
    pub fn new(advertised: u32) -> Result<CreditWindow, CreditError> {
        Self::starting_at(advertised, 0)
    }

    /// [`CreditWindow::new`] with both counters starting at `count` instead of zero, as if
    /// that many messages had gone each way: the peer's window must start at the same count
    /// (each side's Sends are the other's Receives). Not for a real connection, whose
    /// counters start at zero (section 4.2.1): for tests that cross the wrap at 2^32 within a
    /// short run, as the simulator does.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::credits::CreditWindow;
    /// let (mut a, mut b) = (CreditWindow::starting_at(4, u32::MAX - 1).unwrap(), CreditWindow::starting_at(4, u32::MAX - 1).unwrap());
    /// for _ in 0..3 {
    ///     assert!(a.may_send());
    ///     let total = a.send();
    ///     b.received(total).unwrap();
    ///     assert!(b.within_granted());
    ///     a.received(b.send()).unwrap();
    /// }
    /// assert_eq!(a.credit_field(), 1 + 4, "the totals wrapped past zero");
    /// ```
    pub fn starting_at(advertised: u32, count: u32) -> Result<CreditWindow, CreditError> {
        check_limit(advertised)?;
        Ok(CreditWindow {
            sent: count,
            received: count,
            advertised,
            peer_total: count.wrapping_add(1),
            last_sent_total: count,
            origin: count,
        })
    }

    /// How many more messages this side may send now: the peer's total less this side's
    /// Sends, or 0 when the peer's total is behind them (the peer lowered its limit while
    /// messages were in flight, which section 4.2.1 allows).
    pub fn window(&self) -> u32 {
        let w = self.peer_total.wrapping_sub(self.sent);
        if w > MAX_CREDITS {
            0
        } else {
            w
        }
    }

    /// Whether a payload-bearing or control message other than RDMA2_GRANT may be posted now
    /// (section 4.2.1: "MUST NOT post this message if the connection's Sent message counter is
    /// greater than ... Received credits", the counter counting the message itself).
    pub fn may_send(&self) -> bool {
        self.window() > 0
    }

    /// Whether an RDMA2_GRANT may be posted now: within the window, or as the one message
    /// beyond it the peer keeps a Receive for (section 4.2.1.1: receivers "MUST always be in
    /// a position to receive one asynchronous credit update message, in addition to
    /// payload-bearing messages").
    pub fn may_send_grant(&self) -> bool {
        self.may_send() || self.sent == self.peer_total
    }

    /// Posts a Send (any header type): returns the `rdma_credit` to write in its header (the
    /// Receives this side is prepared to have completed, see the module documentation),
    /// remembers it as the total the peer now holds, and counts the Send. Call it once per
    /// Send, after [`CreditWindow::may_send`] (or [`CreditWindow::may_send_grant`] for an
    /// RDMA2_GRANT) said yes.
    pub fn send(&mut self) -> u32 {
        let total = self.credit_field();
        self.last_sent_total = total;
        self.sent = self.sent.wrapping_add(1);
        total
    }

    /// Takes back a Send counted by [`CreditWindow::send`] that was never posted (its message
    /// could not be marshaled, or its caller went away first): the peer never receives it, so
    /// it uses none of the peer's window. The total it would have carried stays given: a
    /// later header carries one at least as high.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::credits::CreditWindow;
    /// let mut w = CreditWindow::new(8).unwrap();
    /// w.send();
    /// assert!(!w.may_send());
    /// w.withdraw();
    /// assert!(w.may_send());
    /// ```
    pub fn withdraw(&mut self) {
        self.sent = self.sent.wrapping_sub(1);
    }

    /// Counts a Receive completed whose header carried `rdma_credit` `total`; refuses a total
    /// that no limit below 2^31 - 1 gives (the count is kept either way: the Receive was
    /// consumed). That check is all a receiver can make of one number: a total within 2^31 - 2
    /// ahead of this side's Sends is a window, one behind them a lowered limit, and only the
    /// three values between are impossible.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::credits::{CreditError, CreditWindow};
    /// let mut w = CreditWindow::new(8).unwrap();
    /// w.received(100).unwrap();
    /// assert_eq!(w.window(), 100);
    /// assert!(matches!(w.received(1 << 31), Err(CreditError::WindowTooLarge { .. })));
    /// ```
    pub fn received(&mut self, total: u32) -> Result<(), CreditError> {
        self.received = self.received.wrapping_add(1);
        let window = total.wrapping_sub(self.sent);
        // Ahead of this side's Sends by a limit the peer may hold, or behind them (a lowered
        // limit, with messages in flight) by no more than such a limit; anything else is a
        // total no peer following section 4.2.1 sends.
        let (ahead, behind) = (window <= MAX_CREDITS, window.wrapping_neg() <= MAX_CREDITS);
        if !(ahead || behind) {
            return Err(CreditError::WindowTooLarge { total, sent: self.sent, window });
        }
        self.peer_total = total;
        Ok(())
    }

    /// Whether the peer has sent no more than this side allowed: its messages received so far
    /// within the last total this side sent (one before any, section 4.2.1: "Received
    /// credits ... MUST set this value to one"). A GRANT the peer may send beyond it (4.2.1.1)
    /// is the caller's to tell apart.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::credits::CreditWindow;
    /// let mut w = CreditWindow::new(2).unwrap();
    /// w.note_received();
    /// assert!(w.within_granted()); // one before this side's first header
    /// w.note_received();
    /// assert!(!w.within_granted());
    /// assert_eq!(w.send(), 2 + 2); // now two received, two more allowed
    /// w.note_received();
    /// assert!(w.within_granted());
    /// ```
    pub fn within_granted(&self) -> bool {
        let allowed = if self.sent == self.origin { self.origin.wrapping_add(1) } else { self.last_sent_total };
        (self.received.wrapping_sub(allowed) as i32) <= 0
    }

    /// Counts a Receive completed whose header's `rdma_credit` cannot be taken (a message
    /// refused or dropped before its header was valid): it consumed a Receive all the same,
    /// and the peer's total stays as it was.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::credits::CreditWindow;
    /// let mut w = CreditWindow::new(8).unwrap();
    /// w.note_received();
    /// assert_eq!((w.credit_field(), w.window()), (1 + 8, 1));
    /// ```
    pub fn note_received(&mut self) {
        self.received = self.received.wrapping_add(1);
    }

    /// The `rdma_credit` the next header would carry ([`CreditWindow::send`] returns it).
    pub fn credit_field(&self) -> u32 {
        self.received.wrapping_add(self.advertised)
    }

    /// Changes the credits this side advertises from the next header on (section 4.2.1: "A
    /// peer MAY adjust its Advertised credits"); it must then keep
    /// [`CreditWindow::receives_to_post`] Receives posted.
    pub fn advertise(&mut self, advertised: u32) -> Result<(), CreditError> {
        check_limit(advertised)?;
        self.advertised = advertised;
        Ok(())
    }

    /// The Receives this side keeps posted: one more than it advertises, for an RDMA2_GRANT
    /// (section 4.2.1.1).
    pub fn receives_to_post(&self) -> u32 {
        self.advertised + 1
    }

    /// Whether an RDMA2_GRANT is due: the peer has used more than half of the window this
    /// side last gave it, and a larger one is there to give (section 4.2.1.1: "a good
    /// receiver implementation provides a credit refresh before half its credit limit is
    /// exceeded"). A message this side sends anyway carries the refresh; call this when none
    /// is ready. True on a new connection too: until this side's first header the peer may
    /// send only one message (4.2.1), and a GRANT opens the window.
    pub fn grant_due(&self) -> bool {
        let left = self.last_sent_total.wrapping_sub(self.received);
        let left = if left > MAX_CREDITS { 0 } else { left };
        left < self.advertised.div_ceil(2) && self.credit_field() != self.last_sent_total
    }
    /// Counts an RDMA2_GRANT and returns the total it carries when one is due
    /// ([`CreditWindow::grant_due`]) and may be posted ([`CreditWindow::may_send_grant`]);
    /// `None` otherwise. The one home of "when does this side send a GRANT", for requester
    /// and responder alike.
    ///
    /// ```
    /// use rpcrdma_v2::draft07::credits::CreditWindow;
    /// let mut w = CreditWindow::new(8).unwrap();
    /// assert_eq!(w.take_grant(), Some(8)); // a new connection opens the peer's window
    /// assert_eq!(w.take_grant(), None); // nothing more to give until messages arrive
    /// ```
    pub fn take_grant(&mut self) -> Option<u32> {
        (self.grant_due() && self.may_send_grant()).then(|| self.send())
    }
}

fn check_limit(advertised: u32) -> Result<(), CreditError> {
    if advertised > MAX_CREDITS {
        return Err(CreditError::LimitTooLarge(advertised));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Section 4.2.1: counters wrap, and "the sender uses appropriate modulo arithmetic":
    /// with this side's Sends and Receives two short of 2^32, the peer's total (wrapped past
    /// zero) still gives a window of 4, the total this side sends wraps too, and the window
    /// closes after exactly 4 more Sends, across the wrap.
    #[test]
    fn section_4_2_1_totals_wrap() {
        let near = u32::MAX - 1;
        let mut w =
            CreditWindow { sent: near, received: near, advertised: 8, peer_total: 0, last_sent_total: 0, origin: 0 };
        w.received(near.wrapping_add(4)).unwrap();
        assert_eq!(w.peer_total, 2, "the total wrapped past zero");
        assert_eq!(w.window(), 4);
        assert_eq!(w.credit_field(), near.wrapping_add(1).wrapping_add(8));
        for left in (0..4).rev() {
            assert!(w.may_send());
            w.send();
            assert_eq!(w.window(), left);
        }
        assert!(!w.may_send());
        assert_eq!(w.sent, 2);
        // A total behind the Sends across the wrap is a lowered limit: no window, no error.
        w.received(u32::MAX).unwrap();
        assert_eq!(w.window(), 0);
    }
}
