//! The fuzz targets' global allocator: any single allocation larger than [`LIMIT`] aborts the
//! run, which libFuzzer reports as a crash with the input that caused it. The targets' inputs
//! are at most a few KiB, so an allocation that large is sized by a length the input claims,
//! not by memory it brings: the bug issue 26 found (a 106-byte reply that made reassembly
//! reserve 2,258,829,326 bytes) is the kind this catches. libFuzzer's own `-malloc_limit_mb`
//! needs a sanitizer's allocator hooks, which the stable toolchain's `--sanitizer none`
//! builds do not have.

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest single allocation a fuzz input may cause.
pub const LIMIT: usize = 64 << 20;

/// [`System`], with every allocation checked against [`LIMIT`].
pub struct Bounded;

fn check(size: usize) {
    if size > LIMIT {
        eprintln!("bounded_alloc: an allocation of {size} bytes (the limit is {LIMIT})");
        std::process::abort();
    }
}

// SAFETY: every call is forwarded to `System` unchanged, after a check that only aborts.
unsafe impl GlobalAlloc for Bounded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}
