//! A global allocator that counts the allocations of the thread under
//! measurement, shared by the test binaries that assert the hot paths
//! allocate nothing (included with `#[path]`; each binary gets its own
//! `#[global_allocator]`).

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Counting;

static BYTES: AtomicUsize = AtomicUsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Only the thread under measurement counts: the test harness allocates
    /// on its own threads meanwhile.
    static COUNTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            BYTES.fetch_add(layout.size(), Ordering::SeqCst);
            CALLS.fetch_add(1, Ordering::SeqCst);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Run `f` and return (its result, allocation calls, bytes allocated) on this
/// thread. Tests in this file run one at a time (see `serial`).
pub fn counted<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    let (c0, b0) = (CALLS.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst));
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, CALLS.load(Ordering::SeqCst) - c0, BYTES.load(Ordering::SeqCst) - b0)
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
