//! The bytes a peer offered ahead of its Sends ([`Head::Offer`](crate::tcp::frame::Head::Offer),
//! `QueuePair::offer_read`), held for this side to take (`QueuePair::take_offered`) instead of
//! reading them with an RDMA Read, which over TCP costs a network round trip and a wake-up on
//! each side. An offer is let go when taken, when passed over, and when this side invalidates
//! the peer's key it was made under (a Send with Invalidate).
//!
//! What a peer can make this side hold is bounded: [`HELD_BYTES`] in one buffer, allocated at
//! the first offer (the one memory a payload lands in that is not registered for it), and
//! [`HELD_MOST`] ranges; each new offer passes over the oldest ones it
//! needs the room of. An offer longer than [`OFFER_MOST`] is not held (its bytes are read off
//! the stream and dropped), and an offer not read is only ever passed over: a peer that
//! offers bytes this side never reads costs its own bytes on the wire, nothing more here.
//!
//! (Its tests below show each rule.)

use std::collections::VecDeque;

/// The most offered bytes a queue pair holds.
pub(crate) const HELD_BYTES: usize = 256 << 10;
/// The most offered ranges a queue pair holds.
pub(crate) const HELD_MOST: usize = 64;
/// The longest offer a queue pair holds, and so the longest a sender offers: a quarter of
/// [`HELD_BYTES`], so that the offers of several calls in flight are held together.
pub(crate) const OFFER_MOST: usize = HELD_BYTES / 4;

/// One range offered: the peer's key and address, where its bytes are in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    rkey: u32,
    addr: u64,
    len: usize,
    at: usize,
    /// All its bytes have arrived.
    landed: bool,
}

impl Range {
    fn overlaps_buffer(&self, at: usize, len: usize) -> bool {
        self.at < at + len && at < self.at + self.len
    }

    fn overlaps_peer(&self, rkey: u32, addr: u64, len: usize) -> bool {
        self.rkey == rkey
            && self.addr < addr.saturating_add(len as u64)
            && addr < self.addr.saturating_add(self.len as u64)
    }
}

/// Where an offer being landed goes ([`Offered::begin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Landing {
    at: usize,
}

/// A queue pair's offered bytes (see the [module documentation](self)).
#[derive(Debug, Default)]
pub(crate) struct Offered {
    buf: Vec<u8>,
    /// Oldest first, laid in the buffer in that order from where the oldest is.
    ranges: VecDeque<Range>,
    /// Where the next offer goes.
    next: usize,
    /// Offers taken ([`Offered::take`]); offers passed over before they were.
    taken: u64,
    passed_over: u64,
}

impl Offered {
    /// Makes room for an offer of `len` bytes at `addr` under `rkey`, passing over the oldest
    /// offers in its way, and an earlier offer of an overlapping range under the same key; `None`
    /// when the offer is too long to hold ([`OFFER_MOST`]) or empty.
    pub(crate) fn begin(&mut self, rkey: u32, addr: u64, len: usize) -> Option<Landing> {
        if len == 0 || len > OFFER_MOST {
            return None;
        }
        if self.buf.is_empty() {
            self.buf = vec![0; HELD_BYTES];
        }
        if self.next + len > self.buf.len() {
            self.next = 0;
        }
        let at = self.next;
        let before = self.ranges.len();
        // (Every range in the way is among the oldest, but checking them all costs nothing
        // at HELD_MOST, and a broken invariant here would hand out another call's bytes.)
        self.ranges.retain(|r| !r.overlaps_buffer(at, len) && !r.overlaps_peer(rkey, addr, len));
        while self.ranges.len() >= HELD_MOST {
            self.ranges.pop_front();
        }
        let passed = (before - self.ranges.len()) as u64;
        self.passed_over += passed;
        super::OFFERS_PASSED_OVER.fetch_add(passed, std::sync::atomic::Ordering::Relaxed);
        self.ranges.push_back(Range { rkey, addr, len, at, landed: false });
        self.next = at + len;
        Some(Landing { at })
    }

    /// Lands `bytes` at `offset` of the offer being landed at `to`.
    pub(crate) fn land(&mut self, to: Landing, offset: usize, bytes: &[u8]) {
        let start = to.at + offset;
        self.buf[start..start + bytes.len()].copy_from_slice(bytes);
    }

    /// The offer being landed at `to` has all its bytes: a Read may take it.
    pub(crate) fn finish(&mut self, to: Landing) {
        if let Some(r) = self.ranges.iter_mut().rev().find(|r| r.at == to.at && !r.landed) {
            r.landed = true;
        }
    }

    /// Whether an offer of exactly `len` bytes at `addr` under `rkey` is held, all landed.
    pub(crate) fn holds(&self, rkey: u32, addr: u64, len: usize) -> bool {
        self.find(rkey, addr, len).is_some()
    }

    fn find(&self, rkey: u32, addr: u64, len: usize) -> Option<usize> {
        self.ranges.iter().rposition(|r| r.landed && r.rkey == rkey && r.addr == addr && r.len == len)
    }

    /// Hands `f` the bytes offered for exactly `len` bytes at `addr` under `rkey`, and lets
    /// them go; false (nothing called) if no such offer is held.
    pub(crate) fn take(&mut self, rkey: u32, addr: u64, len: usize, f: impl FnOnce(&[u8])) -> bool {
        let Some(i) = self.find(rkey, addr, len) else { return false };
        let r = self.ranges.remove(i).expect("found");
        f(&self.buf[r.at..r.at + r.len]);
        self.taken += 1;
        true
    }

    /// Lets go of every offer under `rkey`, a key of the peer's this side invalidated.
    pub(crate) fn forget(&mut self, rkey: u32) {
        self.ranges.retain(|r| r.rkey != rkey);
    }

    /// The bytes of the offers held.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn held_bytes(&self) -> usize {
        self.ranges.iter().map(|r| r.len).sum()
    }

    /// Offers taken so far, and offers passed over before they were.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.taken, self.passed_over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(held: &mut Offered, rkey: u32, addr: u64, bytes: &[u8]) {
        let at = held.begin(rkey, addr, bytes.len()).expect("held");
        held.land(at, 0, bytes);
        held.finish(at);
    }

    fn take(held: &mut Offered, rkey: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut got = None;
        held.take(rkey, addr, len, |b| got = Some(b.to_vec())).then_some(())?;
        got
    }

    #[test]
    fn only_exactly_the_offered_range_is_taken_and_only_once_landed() {
        let mut held = Offered::default();
        let at = held.begin(1, 100, 4).unwrap();
        held.land(at, 0, b"ab");
        assert_eq!(take(&mut held, 1, 100, 4), None, "half landed");
        held.land(at, 2, b"cd");
        held.finish(at);
        assert_eq!(take(&mut held, 1, 100, 2), None, "a part of it");
        assert_eq!(take(&mut held, 2, 100, 4), None, "another key");
        assert_eq!(take(&mut held, 1, 100, 4).as_deref(), Some(&b"abcd"[..]));
        assert_eq!(held.counts(), (1, 0));
    }

    #[test]
    fn a_newer_offer_of_the_same_range_replaces_the_older() {
        let mut held = Offered::default();
        offer(&mut held, 1, 100, b"old!");
        offer(&mut held, 1, 102, b"new!");
        assert_eq!(take(&mut held, 1, 100, 4), None, "overlapped by a newer offer under its key");
        assert_eq!(take(&mut held, 1, 102, 4).as_deref(), Some(&b"new!"[..]));
        assert_eq!(held.counts(), (1, 1));
    }

    #[test]
    fn what_a_peer_offers_is_bounded_and_the_oldest_offers_are_passed_over() {
        let mut held = Offered::default();
        assert!(held.begin(1, 0, OFFER_MOST + 1).is_none());
        assert!(held.begin(1, 0, 0).is_none());
        // Far more than the buffer holds, in offers of every size up to the most.
        let sizes = [1, OFFER_MOST, 4200, 12 << 10, 3, OFFER_MOST - 1];
        for (i, len) in sizes.iter().cycle().take(200).enumerate() {
            let byte = i as u8;
            offer(&mut held, i as u32, 0, &vec![byte; *len]);
            assert!(held.buf.len() == HELD_BYTES && held.ranges.len() <= HELD_MOST);
            let total: usize = held.ranges.iter().map(|r| r.len).sum();
            assert!(total <= HELD_BYTES);
            // The newest is always whole, and every range held still has its own bytes.
            for r in &held.ranges {
                assert!(held.buf[r.at..r.at + r.len].iter().all(|&b| b == r.rkey as u8), "{r:?} overwritten");
            }
        }
        assert_eq!(take(&mut held, 199, 0, sizes[199 % sizes.len()]).map(|b| b[0]), Some(199));
        assert_eq!(take(&mut held, 0, 0, 1), None, "passed over long ago");
        assert!(held.counts().1 > 150);
    }

    #[test]
    fn an_invalidated_keys_offers_are_let_go() {
        let mut held = Offered::default();
        offer(&mut held, 1, 100, b"one");
        offer(&mut held, 2, 100, b"two");
        held.forget(1);
        assert_eq!(take(&mut held, 1, 100, 3), None);
        assert_eq!(take(&mut held, 2, 100, 3).as_deref(), Some(&b"two"[..]));
    }

    #[test]
    fn many_small_offers_are_held_at_most_held_most() {
        let mut held = Offered::default();
        for i in 0..1000u32 {
            offer(&mut held, i, u64::from(i), &[i as u8]);
        }
        assert_eq!(held.ranges.len(), HELD_MOST);
        assert_eq!(take(&mut held, 999, 999, 1).as_deref(), Some(&[999u32 as u8][..]));
        assert_eq!(take(&mut held, 0, 0, 1), None);
    }
}
