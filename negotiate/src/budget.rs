//! One memory budget for everything peers can make a server hold at once: each connection's
//! Receives, and each call's chunk memory (the message its Read chunks land in, an
//! RDMA_NOMSG call's landing buffer) from the moment it is fetched until its serving thread
//! gives the memory up.
//!
//! Every limit in [`HeaderLimits`](rpcrdma_v1::header::HeaderLimits) and
//! [`ServerLimits`](crate::limits::ServerLimits) bounds one message or one connection; their
//! product does not bound the server: 256 connections x 8 calls x 4 MiB of Read chunks is
//! 8 GiB, which a set of peers that never answer the server's RDMA Reads once made a server
//! hold (issue 26). The budget is the bound on the whole.
//!
//! A [`Charge`] is memory counted against the budget, given back when it drops. Receives are
//! charged whatever the budget holds (they are sized by this server's configuration:
//! `max_connections` x credits x the receive size), so that calls in progress never shut a
//! new connection out; a call's chunk memory is charged only if it fits
//! ([`MemoryBudget::try_charge`]), and a call that does not fit is answered with RDMA_ERROR
//! ERR_CHUNK (RFC 8166 section 4.5.2: the responder cannot process its chunks) and counted.
//!
//! Memory given back returns to the system: call buffers are allocated zeroed
//! (`vec![0; n]`), which glibc serves from fresh mappings or trims from its arenas once
//! freed; `interop-tests/tests/memory_returns.rs` fills a 64 MiB budget from another process
//! and sees the server's resident memory go from 4 MiB to 68 MiB and back to 6 MiB.
//!
//! ```
//! use negotiate::budget::MemoryBudget;
//! let budget = MemoryBudget::new(1 << 20);
//! let receives = budget.charge(256 << 10); // always counted
//! let call = budget.try_charge(512 << 10).expect("fits");
//! assert!(budget.try_charge(512 << 10).is_none(), "256 KiB + 512 KiB + 512 KiB > 1 MiB");
//! drop(call);
//! assert_eq!(budget.used(), 256 << 10);
//! assert_eq!(budget.peak(), 768 << 10);
//! drop(receives);
//! assert_eq!((budget.used(), budget.refused()), (0, 1));
//! ```

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The budget: a limit and what is charged against it now (see the [module
/// documentation](self)). Shared by every connection of a server.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: AtomicUsize,
    /// The part of `used` charged whatever the budget holds ([`MemoryBudget::charge`]).
    fixed: AtomicUsize,
    peak: AtomicUsize,
    refused: AtomicU64,
}

impl MemoryBudget {
    /// A budget of `limit` bytes, nothing charged.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(MemoryBudget {
            limit,
            used: AtomicUsize::new(0),
            fixed: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
        })
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The bytes charged now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The most bytes ever charged at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Acquire)
    }

    /// How many charges [`MemoryBudget::try_charge`] refused.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Acquire)
    }

    /// Charges `bytes` whatever the budget holds: for memory this side sized itself (a
    /// connection's Receives), which calls must not shut out.
    pub fn charge(self: &Arc<Self>, bytes: usize) -> Charge {
        let now = self.used.fetch_add(bytes, Ordering::AcqRel).saturating_add(bytes);
        self.fixed.fetch_add(bytes, Ordering::AcqRel);
        self.peak.fetch_max(now, Ordering::AcqRel);
        Charge { budget: Some(self.clone()), bytes, fixed: true }
    }

    /// Charges `bytes` if they fit within the limit with everything charged now; `None` (and
    /// counted in [`MemoryBudget::refused`]) if not.
    pub fn try_charge(self: &Arc<Self>, bytes: usize) -> Option<Charge> {
        self.try_add(bytes).then(|| Charge { budget: Some(self.clone()), bytes, fixed: false })
    }

    /// Whether calls have more than half of what the fixed charges (Receives) leave them:
    /// memory kept only for reuse is given back then ([`Charge::give_back_if_short`]). The
    /// fixed charges themselves never make it short: at the defaults the Receives of 256
    /// connections are half the budget, and calls' buffers would be freed after every call.
    pub fn is_short(&self) -> bool {
        self.is_short_with(0)
    }

    /// Whether it would be short ([`MemoryBudget::is_short`]) with `extra` bytes more charged
    /// to calls: how a server decides that calls beyond their host's share of the call
    /// memory ([`ServerLimits::memory_per_host`](crate::limits::ServerLimits::memory_per_host))
    /// may still have it, while nobody else is short of it.
    pub fn is_short_with(&self, extra: usize) -> bool {
        let (used, fixed) = (self.used(), self.fixed.load(Ordering::Acquire).min(self.used()));
        (used - fixed).saturating_add(extra) > self.limit.saturating_sub(fixed) / 2
    }

    fn try_add(&self, bytes: usize) -> bool {
        let added = self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(bytes).filter(|&after| after <= self.limit)
        });
        match added {
            Ok(before) => {
                self.peak.fetch_max(before + bytes, Ordering::AcqRel);
                true
            }
            Err(_) => {
                self.refused.fetch_add(1, Ordering::AcqRel);
                false
            }
        }
    }

    fn release(&self, bytes: usize, fixed: bool) {
        if fixed {
            self.fixed.fetch_sub(bytes, Ordering::AcqRel);
        }
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Memory counted against a [`MemoryBudget`], given back when it drops. The default charges
/// nothing to no budget (memory nobody counts).
///
/// ```
/// use negotiate::budget::{Charge, MemoryBudget};
/// let budget = MemoryBudget::new(1000);
/// let mut c = budget.try_charge(100).unwrap();
/// assert!(c.try_grow_to(900));
/// assert!(!c.try_grow_to(1001), "beyond the limit");
/// assert_eq!((c.bytes(), budget.used()), (900, 900));
/// assert_eq!(Charge::default().bytes(), 0);
///
/// // Short: calls hold more than half of what the fixed charges (Receives) leave them.
/// let budget = MemoryBudget::new(1000);
/// let receives = budget.charge(600);
/// let mut call = budget.try_charge(200).unwrap();
/// assert!(!budget.is_short(), "200 of the 400 left");
/// assert!(call.try_grow_to(201) && budget.is_short());
/// assert!(call.give_back_if_short() && budget.used() == 600);
/// drop(receives);
/// ```
#[derive(Debug, Default)]
pub struct Charge {
    budget: Option<Arc<MemoryBudget>>,
    bytes: usize,
    /// Charged whatever the budget holds ([`MemoryBudget::charge`]).
    fixed: bool,
}

impl Charge {
    /// A charge of nothing yet against `budget`, to grow ([`Charge::try_grow_to`]).
    pub fn empty(budget: &Arc<MemoryBudget>) -> Self {
        Charge { budget: Some(budget.clone()), bytes: 0, fixed: false }
    }

    /// The bytes it counts.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether its budget would be short with `extra` bytes more ([`MemoryBudget::is_short_with`]);
    /// false with no budget.
    pub(crate) fn would_be_short(&self, extra: usize) -> bool {
        self.budget.as_ref().is_some_and(|b| b.is_short_with(extra))
    }

    /// Grows the charge to `bytes` if the growth fits the budget (true), or if it counts
    /// that much already; a charge with no budget always grows.
    pub fn try_grow_to(&mut self, bytes: usize) -> bool {
        if bytes <= self.bytes {
            return true;
        }
        let grown = self.budget.as_ref().is_none_or(|b| b.try_add(bytes - self.bytes));
        if grown {
            self.bytes = bytes;
        }
        grown
    }

    /// Gives the charge back down to nothing when its budget is short (more than half
    /// used), so that memory kept only for reuse does not hold the budget from the calls
    /// that need it; true if it did (the caller frees the memory).
    pub fn give_back_if_short(&mut self) -> bool {
        let short = self.budget.as_ref().is_some_and(|b| b.is_short());
        if short && self.bytes > 0 {
            self.set_nothing();
            return true;
        }
        false
    }

    /// Gives back what the charge counts beyond `bytes`.
    pub fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.bytes {
            if let Some(b) = &self.budget {
                b.release(self.bytes - bytes, self.fixed);
            }
            self.bytes = bytes;
        }
    }

    /// Gives the whole charge back; the charge stays tied to its budget.
    pub fn set_nothing(&mut self) {
        self.shrink_to(0);
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.set_nothing();
    }
}
