//! A global allocator that counts allocations: what `advm bench` reports
//! per call, and what the tests that assert "no allocation per call after
//! warm-up" read (`vm/tests/alloc.rs`, `ad/tests/alloc.rs`, ...). A binary
//! installs it as its global allocator and reads the count before and
//! after the call it measures:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: vm::alloc_count::Counting = vm::alloc_count::Counting;
//!
//! fn main() {
//!     let before = vm::alloc_count::allocs();
//!     let v = std::hint::black_box(vec![1u8; 16]);
//!     assert_eq!(vm::alloc_count::allocs(), before + 1);
//!     drop(v);
//!     assert_eq!(vm::alloc_count::allocs(), before + 1, "freeing is no allocation");
//! }
//! ```
//!
//! Counts are kept per thread ([`allocs`]: the test harness runs tests on
//! several threads at once) and for the whole process ([`total`]).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

static TOTAL: AtomicU64 = AtomicU64::new(0);

fn count() {
    TOTAL.fetch_add(1, Ordering::Relaxed);
    // `try_with`: allocations while the thread's locals are torn down are
    // not counted per thread (and must not panic).
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

/// Allocations (`alloc`, `alloc_zeroed`, `realloc`) made by this thread so
/// far.
pub fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

/// Allocations made by every thread so far.
pub fn total() -> u64 {
    TOTAL.load(Ordering::Relaxed)
}

/// Forwards to the system allocator and counts calls.
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments, so
// the `GlobalAlloc` contract is `System`'s; the counters have no effect on
// it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, n) }
    }
}
