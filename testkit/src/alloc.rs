//! A global allocator that counts allocations per thread, for the tests
//! that assert "no allocation per call after warm-up" (`vm/tests/alloc.rs`,
//! `ad/tests/alloc.rs`, `suite/tests/alloc.rs`). A test binary installs it
//! as its global allocator and reads [`allocs`] before and after the call
//! it checks:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: testkit::alloc::Counting = testkit::alloc::Counting;
//!
//! fn main() {
//!     let before = testkit::alloc::allocs();
//!     let v = std::hint::black_box(vec![1u8; 16]);
//!     assert_eq!(testkit::alloc::allocs(), before + 1);
//!     drop(v);
//!     assert_eq!(testkit::alloc::allocs(), before + 1, "freeing is no allocation");
//! }
//! ```
//!
//! Counts are per thread, because the test harness runs tests on several
//! threads at once. (`vm`
//! takes testkit as a dev-dependency for its integration tests only:
//! testkit depends on `vm`.)
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: allocations while the thread's locals are torn down are
    // not counted (and must not panic).
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

/// Allocations (`alloc`, `alloc_zeroed`, `realloc`) made by this thread so
/// far.
pub fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

/// Forwards to the system allocator and counts calls per thread.
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments, so
// the `GlobalAlloc` contract is `System`'s; the counter has no effect on it.
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
