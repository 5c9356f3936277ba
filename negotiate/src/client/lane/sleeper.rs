//! How a blocking caller sleeps until its step is ready, and how the threads that make
//! steps ready wake callers: a futex word per thread (std's own parker, made reachable), so
//! that a thread waking several callers at once (the dispatcher at the end of a burst of
//! replies) wakes them all in one system call, one io_uring submission of a FUTEX_WAKE per
//! caller (Linux 6.7 and later), instead of a system call each. Woken one system call at
//! a time, the first caller woken most often preempts the dispatcher at that call's return
//! (wake-up preemption), and the others wait for the dispatcher to run again.
//!
//! Elsewhere than Linux a sleeper is std's parker, each woken by its own system call.

#[cfg(target_os = "linux")]
pub(in crate::client) use futex::Sleeper;
#[cfg(not(target_os = "linux"))]
pub(in crate::client) use portable::Sleeper;

#[cfg(not(target_os = "linux"))]
mod portable {
    use std::thread::Thread;

    /// A thread to wake.
    #[derive(Clone, Debug)]
    pub(in crate::client) struct Sleeper(Thread);

    impl Sleeper {
        pub(in crate::client) fn current() -> Sleeper {
            Sleeper(std::thread::current())
        }

        pub(in crate::client) fn park() {
            std::thread::park()
        }

        pub(in crate::client) fn wake_all(list: &mut Vec<Sleeper>) {
            list.drain(..).for_each(|s| s.0.unpark());
        }
    }
}

#[cfg(target_os = "linux")]
mod futex {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// Nothing to take.
    const EMPTY: u32 = 0;
    /// Woken: the next park returns at once.
    const NOTIFIED: u32 = 1;
    /// Asleep in the kernel, or about to be.
    const PARKED: u32 = u32::MAX;

    /// One thread's futex word, to wake it with.
    #[derive(Clone, Debug)]
    pub(in crate::client) struct Sleeper(Arc<AtomicU32>);

    thread_local! {
        static ME: Sleeper = Sleeper(Arc::new(AtomicU32::new(EMPTY)));
    }

    impl Sleeper {
        /// The calling thread's.
        pub(in crate::client) fn current() -> Sleeper {
            ME.with(Sleeper::clone)
        }

        /// Sleeps until woken ([`Sleeper::wake_all`]); at once if woken since the last park. As
        /// `std::thread::park`, it may return without a wake: callers look again.
        pub(in crate::client) fn park() {
            ME.with(|me| {
                let word = &*me.0;
                if word.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
                    return;
                }
                loop {
                    futex_wait(word, PARKED);
                    if word.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Acquire).is_ok() {
                        return;
                    }
                }
            })
        }

        /// Marks it woken; true where it sleeps (or is about to) and needs the kernel's wake.
        fn notify(&self) -> bool {
            self.0.swap(NOTIFIED, Ordering::Release) == PARKED
        }

        /// Wakes every sleeper in `list`, which it empties: the ones asleep in one system call
        /// where the kernel can (io_uring), else one each.
        pub(in crate::client) fn wake_all(list: &mut Vec<Sleeper>) {
            let mut asleep: [Option<&AtomicU32>; BATCH] = [None; BATCH];
            let mut n = 0;
            for s in list.iter() {
                if s.notify() {
                    if n == BATCH {
                        wake_batch(&asleep[..n]);
                        n = 0;
                    }
                    asleep[n] = Some(&s.0);
                    n += 1;
                }
            }
            wake_batch(&asleep[..n]);
            list.clear();
        }
    }

    /// The most futex wakes in one submission.
    const BATCH: usize = 32;

    fn wake_batch(words: &[Option<&AtomicU32>]) {
        if words.len() >= 2 && uring::wake(words) {
            return;
        }
        for w in words.iter().flatten() {
            futex_wake(w);
        }
    }

    fn futex_wait(word: &AtomicU32, expect: u32) {
        // SAFETY: FUTEX_WAIT on a live word of ours; the kernel only reads it.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expect,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }

    fn futex_wake(word: &AtomicU32) {
        // SAFETY: FUTEX_WAKE of one waiter on a live word.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
        }
    }

    mod uring {
        use std::sync::atomic::AtomicU32;
        use std::sync::{Mutex, OnceLock};

        use io_uring::{opcode, IoUring};

        /// futex2's flags: a 32-bit word, private to the process.
        const FUTEX2_SIZE_U32: u32 = 0x02;
        const FUTEX2_PRIVATE: u32 = 128;

        /// The process's one ring for wakes, made at the first batch (one descriptor, whatever the
        /// number of clients and threads); `None` where the kernel has no io_uring, or no futex
        /// wake in it (learned at the first submission). A thread that finds it in use wakes its
        /// batch one by one instead of waiting.
        static RING: OnceLock<Mutex<Option<IoUring>>> = OnceLock::new();

        /// Wakes one waiter on each of `words` in one submission; false where that cannot be
        /// done (the caller wakes them one by one).
        pub(super) fn wake(words: &[Option<&AtomicU32>]) -> bool {
            let ring = RING.get_or_init(|| Mutex::new(IoUring::new(super::BATCH as u32 * 2).ok()));
            let Ok(mut ring) = ring.try_lock() else { return false };
            let Some(r) = ring.as_mut() else { return false };
            let mut ok = true;
            {
                let mut sq = r.submission();
                for w in words.iter().flatten() {
                    let e =
                        opcode::FutexWake::new(w.as_ptr(), 1, u64::from(u32::MAX), FUTEX2_SIZE_U32 | FUTEX2_PRIVATE)
                            .build();
                    // SAFETY: the entry names a word that stays alive (its Sleeper's Arc is held
                    // by the list being woken) until the wake has completed, waited for below; a
                    // ring that could not take it is dropped with what it holds, unsubmitted.
                    ok &= unsafe { sq.push(&e) }.is_ok();
                }
            }
            ok = ok && r.submit_and_wait(words.len()).is_ok();
            for cqe in r.completion() {
                // (A kernel without IORING_OP_FUTEX_WAKE, before Linux 6.7: -EINVAL.)
                ok &= cqe.result() >= 0;
            }
            if !ok {
                // Never again: the batch is woken one by one, as every later one.
                *ring = None;
            }
            ok
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::time::{Duration, Instant};

        /// A wake before the park is kept: the park returns at once.
        #[test]
        fn a_wake_before_the_park_is_kept() {
            let me = Sleeper::current();
            Sleeper::wake_all(&mut vec![me]);
            let t = Instant::now();
            Sleeper::park();
            assert!(t.elapsed() < Duration::from_secs(5));
        }

        /// Eight parked threads, woken in one batch: every one wakes, whichever way the
        /// kernel lets the batch go.
        #[test]
        fn a_batch_wakes_every_sleeper() {
            let (tx, rx) = std::sync::mpsc::channel();
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let tx = tx.clone();
                    std::thread::spawn(move || {
                        tx.send(Sleeper::current()).unwrap();
                        Sleeper::park();
                    })
                })
                .collect();
            let mut all: Vec<Sleeper> = (0..8).map(|_| rx.recv().unwrap()).collect();
            // Until each is asleep in the kernel (or gave up waiting: it then returns at
            // once, woken before its park).
            let deadline = Instant::now() + Duration::from_secs(2);
            while all.iter().any(|s| s.0.load(Ordering::SeqCst) != PARKED) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            Sleeper::wake_all(&mut all);
            assert!(all.is_empty());
            for t in threads {
                t.join().unwrap();
            }
        }

        /// On Linux 6.7 and later with io_uring allowed, a batch goes in one submission
        /// (IORING_OP_FUTEX_WAKE); elsewhere it falls back, said plainly.
        #[test]
        fn a_batch_goes_in_one_submission_where_the_kernel_can() {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            let mut v = release.trim().split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
            let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
            let allowed =
                std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").map_or(true, |d| d.trim() == "0");
            if (major, minor) < (6, 7) || !allowed {
                eprintln!("SKIP: kernel {} (io_uring allowed: {allowed}) has no io_uring futex wake", release.trim());
                return;
            }
            let (a, b) = (AtomicU32::new(EMPTY), AtomicU32::new(EMPTY));
            // (No waiter on either: the wakes wake nobody, and succeed.)
            let mut woke = false;
            // The ring may be in use by another test's batch at this moment: tried again.
            for _ in 0..100 {
                woke = uring::wake(&[Some(&a), Some(&b)]);
                if woke {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(woke, "kernel {}: the batch was not submitted", release.trim());
        }
    }
}
