//! Polling for a bounded time before sleeping, the one rule both waiters use: a thread that
//! expects something within microseconds looks for it every few hundred nanoseconds rather
//! than sleep and be woken, which is most of a short round trip's time (`ib_send_lat`
//! busy-polls for the same reason). The client's receiver polls its completion queue so
//! ([`ClientConfig::poll_before_wait`](crate::client::ClientConfig::poll_before_wait)), the
//! server's loop its ready queue
//! ([`ServerLimits::poll_before_wait`](crate::limits::ServerLimits::poll_before_wait)).

use std::time::{Duration, Instant};

/// Spin-loop hints between two looks: a look every few hundred nanoseconds, not continuously.
/// A hint (x86's PAUSE) takes from a few nanoseconds to some 40 depending on the CPU: 27 ns
/// on the AMD EPYC these figures come from, where the 128 hints this was once meant 3.5 us
/// between looks, and a 64-byte round trip in process took twice as long (7.0 us against
/// 3.6 with 8, docs/benchmarks.md, "twenty-fourth session").
const SPINS_BETWEEN_LOOKS: u32 = 8;

/// Looks with `look` until it finds something or `limit` has passed; `None` if nothing came.
/// A zero limit looks not at all. (A limit too long to add to an instant polls for a second.)
pub(crate) fn poll_for<T>(limit: Duration, mut look: impl FnMut() -> Option<T>) -> Option<T> {
    if limit.is_zero() {
        return None;
    }
    let now = Instant::now();
    let until = now.checked_add(limit).unwrap_or(now + Duration::from_secs(1));
    loop {
        if let Some(found) = look() {
            return Some(found);
        }
        if Instant::now() >= until {
            return None;
        }
        for _ in 0..SPINS_BETWEEN_LOOKS {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_until_found_or_out_of_time() {
        let mut looks = 0;
        assert_eq!(
            poll_for(Duration::from_secs(5), || (looks == 3).then_some(7).or_else(|| {
                looks += 1;
                None
            })),
            Some(7)
        );
        assert_eq!(looks, 3);
        let mut looks = 0;
        assert_eq!(
            poll_for(Duration::ZERO, || {
                looks += 1;
                Some(())
            }),
            None,
            "a zero limit does not look"
        );
        assert_eq!(looks, 0);
        assert_eq!(poll_for::<()>(Duration::from_micros(50), || None), None);
    }
}
