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

        pub(in crate::client) fn park(&self) {
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
        /// The calling thread's. (A thread whose thread-locals are gone, a blocking call
        /// made from a thread-local's destructor, gets a word of its own for the call.)
        pub(in crate::client) fn current() -> Sleeper {
            ME.try_with(Sleeper::clone).unwrap_or_else(|_| Sleeper(Arc::new(AtomicU32::new(EMPTY))))
        }

        /// Sleeps until woken ([`Sleeper::wake_all`]); at once if woken since the last park.
        /// Only the thread `self` was made for ([`Sleeper::current`]) parks on it. As
        /// `std::thread::park`, it may return without a wake: callers look again.
        pub(in crate::client) fn park(&self) {
            let word = &*self.0;
            if word.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
                return;
            }
            loop {
                futex_wait(word, PARKED);
                if word.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Acquire).is_ok() {
                    return;
                }
            }
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
        if words.len() >= 2 && uring::wake(words).is_some() {
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

        /// The kernel has no such operation (before Linux 6.7).
        const EINVAL: i32 = 22;

        /// The ring for wakes, made at the first batch (one descriptor, whatever the
        /// number of clients and threads), with the process it was made in: a child of a
        /// fork shares its parent's rings' memory, and makes its own. A thread that finds
        /// it in use wakes its batch one by one instead of waiting.
        enum Ring {
            Unmade,
            /// The kernel has no io_uring, or no futex wake in it: never tried again.
            Unsupported,
            /// (Boxed: the ring's handle is some hundreds of bytes.)
            Made {
                pid: u32,
                ring: Box<IoUring>,
            },
        }

        static RING: OnceLock<Mutex<Ring>> = OnceLock::new();

        /// Wakes one waiter on each of `words` in one submission: `Some(woken)`, how many
        /// waiters the kernel woke; `None` where that could not be done (the caller wakes
        /// them one by one: an extra wake is harmless, a missing one a hang).
        pub(super) fn wake(words: &[Option<&AtomicU32>]) -> Option<usize> {
            let ring = RING.get_or_init(|| Mutex::new(Ring::Unmade));
            let mut ring = ring.try_lock().ok()?;
            let pid = std::process::id();
            if !matches!(&*ring, Ring::Made { pid: p, .. } if *p == pid) && !matches!(*ring, Ring::Unsupported) {
                *ring = match IoUring::new(super::BATCH as u32 * 2) {
                    Ok(r) => Ring::Made { pid, ring: Box::new(r) },
                    Err(_) => Ring::Unsupported,
                };
            }
            let Ring::Made { ring: r, .. } = &mut *ring else { return None };
            let n = words.iter().flatten().count();
            let mut pushed = 0;
            {
                let mut sq = r.submission();
                for w in words.iter().flatten() {
                    let e =
                        opcode::FutexWake::new(w.as_ptr(), 1, u64::from(u32::MAX), FUTEX2_SIZE_U32 | FUTEX2_PRIVATE)
                            .build();
                    // SAFETY: the entry names a word that stays alive (its Sleeper's Arc is
                    // held by the list being woken) until the wake has completed, waited for
                    // below; a ring that could not take it is dropped with what it holds.
                    if unsafe { sq.push(&e) }.is_ok() {
                        pushed += 1;
                    }
                }
            }
            let submitted = r.submit_and_wait(pushed);
            let (mut done, mut woken, mut unsupported) = (0, 0, false);
            for cqe in r.completion() {
                done += 1;
                match cqe.result() {
                    w if w >= 0 => woken += w as usize,
                    e => unsupported |= e == -EINVAL,
                }
            }
            if unsupported {
                *ring = Ring::Unsupported;
                return None;
            }
            if pushed != n || submitted.map_or(true, |s| s != pushed) || done != pushed {
                // Whatever went wrong with this one (the ring's entries unsubmitted or
                // completions missing): a fresh ring next time, and these one by one now.
                *ring = Ring::Unmade;
                return None;
            }
            Some(woken)
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
            Sleeper::wake_all(&mut vec![me.clone()]);
            let t = Instant::now();
            me.park();
            assert!(t.elapsed() < Duration::from_secs(5));
        }

        /// Parks `n` threads, each on its own word, and returns their sleepers, once each is
        /// asleep in the kernel (its word PARKED, and a moment more), with a channel each
        /// reports its wake on.
        fn parked(n: usize) -> (Vec<Sleeper>, std::sync::mpsc::Receiver<()>) {
            let (tx, rx) = std::sync::mpsc::channel();
            let (woke, woken) = std::sync::mpsc::channel();
            for _ in 0..n {
                let (tx, woke) = (tx.clone(), woke.clone());
                std::thread::spawn(move || {
                    let me = Sleeper::current();
                    tx.send(me.clone()).unwrap();
                    me.park();
                    let _ = woke.send(());
                });
            }
            let all: Vec<Sleeper> = (0..n).map(|_| rx.recv().unwrap()).collect();
            let deadline = Instant::now() + Duration::from_secs(2);
            while all.iter().any(|s| s.0.load(Ordering::SeqCst) != PARKED) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(50));
            (all, woken)
        }

        /// Each of `n` parked threads reports its wake within 5 s.
        fn all_woke(woken: &std::sync::mpsc::Receiver<()>, n: usize) {
            for i in 0..n {
                woken.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| panic!("{} of {n} not woken", n - i));
            }
        }

        /// Eight parked threads, woken in one batch: every one wakes, whichever way the
        /// kernel lets the batch go.
        #[test]
        fn a_batch_wakes_every_sleeper() {
            let (mut all, woken) = parked(8);
            Sleeper::wake_all(&mut all);
            assert!(all.is_empty());
            all_woke(&woken, 8);
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
            // Four parked threads, woken through the ring alone: the kernel says it woke four,
            // and each reports its wake. (The ring may be in use by another test's batch at
            // this moment: tried again.)
            let (all, woken) = parked(4);
            let words: Vec<Option<&AtomicU32>> = all.iter().map(|s| Some(&*s.0)).collect();
            for s in &all {
                assert!(s.notify(), "asleep");
            }
            let mut woke = None;
            for _ in 0..100 {
                woke = uring::wake(&words);
                if woke.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(woke, Some(4), "kernel {}: the ring's wakes", release.trim());
            all_woke(&woken, 4);
        }
    }
}
