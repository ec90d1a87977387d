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

thread_local! {
    static FAIL: Cell<FailState> = const { Cell::new(FailState::OFF) };
}

/// The state of [`Failing`] on one thread.
#[derive(Clone, Copy)]
struct FailState {
    armed: bool,
    /// Allocations smaller than this are neither counted nor failed.
    min_size: usize,
    /// The allocation (1-based, among those counted) that fails.
    fail_at: u64,
    /// Counted allocations since arming.
    seen: u64,
    /// Whether the failure was injected.
    injected: bool,
}

impl FailState {
    const OFF: FailState = FailState {
        armed: false,
        min_size: 0,
        fail_at: 0,
        seen: 0,
        injected: false,
    };
}

/// Arm [`Failing`] on this thread: the `k`-th allocation (`alloc`,
/// `alloc_zeroed` or `realloc`, 1-based) of at least `min_size` bytes from
/// now on fails (returns null); the others succeed. SQLite's malloc tests
/// are the model: run an operation for k = 1, 2, ... until it completes
/// with no failure injected.
pub fn arm_failure(k: u64, min_size: usize) {
    FAIL.with(|s| {
        s.set(FailState {
            armed: true,
            min_size,
            fail_at: k,
            seen: 0,
            injected: false,
        })
    });
}

/// Disarm [`Failing`] on this thread: the number of allocations it counted
/// since [`arm_failure`] and whether it made one fail.
pub fn disarm_failure() -> (u64, bool) {
    FAIL.with(|s| {
        let st = s.replace(FailState::OFF);
        (st.seen, st.injected)
    })
}

/// Whether this allocation of `size` bytes is the one to fail.
fn fail_now(size: usize) -> bool {
    FAIL.try_with(|s| {
        let mut st = s.get();
        if !st.armed || size < st.min_size {
            return false;
        }
        st.seen += 1;
        let fail = st.seen == st.fail_at;
        st.injected |= fail;
        s.set(st);
        fail
    })
    .unwrap_or(false)
}

/// Forwards to the system allocator, counting like [`Counting`], except
/// for the one allocation [`arm_failure`] selects, which fails: the test
/// allocator of `ad/tests/alloc_failure.rs`.
pub struct Failing;

// SAFETY: every method forwards to `System` with the caller's arguments, or
// returns null, which `GlobalAlloc` allows for `alloc`, `alloc_zeroed` and
// `realloc` (a failed `realloc` leaves the old block as it was, which not
// calling `System.realloc` does).
unsafe impl GlobalAlloc for Failing {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if fail_now(l.size()) {
            return std::ptr::null_mut();
        }
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if fail_now(l.size()) {
            return std::ptr::null_mut();
        }
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if fail_now(n) {
            return std::ptr::null_mut();
        }
        count();
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, n) }
    }
}
