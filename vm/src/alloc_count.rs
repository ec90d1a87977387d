//! The global allocators, the one module of allocator `unsafe`:
//! [`Counting`], which counts allocations; [`Failing`], which fails an
//! armed one (`ad/tests/alloc_failure.rs`); and [`Reserve`], which serves
//! a request its inner allocator refuses inside a compile section from a
//! static region ([`crate::oom`]).
//!
//! The count is what `advm bench` reports per call, and what the tests
//! that assert "no allocation per call after warm-up" read
//! (`vm/tests/alloc.rs`, `ad/tests/alloc.rs`, ...). A binary installs
//! [`Counting`] as its global allocator and reads the count before and
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
use std::cell::{Cell, UnsafeCell};
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

/// Bytes of [`Reserve`]'s region: what compile work may still allocate in
/// a [`section`](crate::oom::section) once the allocator underneath refuses.
pub const RESERVE_BYTES: usize = 32 << 20;

/// The reserve's bytes, in the zero-initialised data of the binary (no
/// memory is touched until a block is handed out).
#[repr(C, align(4096))]
struct Region(UnsafeCell<[u8; RESERVE_BYTES]>);

// SAFETY: the bytes are reached only through the blocks `reserve_alloc`
// hands out, which are disjoint while live (the bump offset and the live
// count change by compare-and-swap on `RESERVE`), and a block is used by its
// owner alone, as any allocator's block is.
unsafe impl Sync for Region {}

static REGION: Region = Region(UnsafeCell::new([0; RESERVE_BYTES]));

/// The reserve's bump offset (low 32 bits) and its count of live blocks
/// (high 32 bits), changed together by compare-and-swap.
static RESERVE: AtomicU64 = AtomicU64::new(0);

fn unpack(s: u64) -> (usize, u64) {
    ((s & 0xffff_ffff) as usize, s >> 32)
}

fn pack(top: usize, live: u64) -> u64 {
    (live << 32) | top as u64
}

/// The region's first byte.
fn region_base() -> *mut u8 {
    REGION.0.get().cast::<u8>()
}

/// Whether `p` points into the region.
#[inline]
fn in_region(p: *mut u8) -> bool {
    let base = region_base().addr();
    p.addr().wrapping_sub(base) < RESERVE_BYTES
}

/// A block of the region for `l`, or null if what is left cannot hold it.
fn reserve_alloc(l: Layout) -> *mut u8 {
    let base = region_base();
    let size = l.size().max(1);
    let mut s = RESERVE.load(Ordering::Acquire);
    loop {
        let (top, live) = unpack(s);
        let addr = base.addr() + top;
        let start = top + (addr.next_multiple_of(l.align()) - addr);
        let Some(end) = start.checked_add(size).filter(|e| *e <= RESERVE_BYTES) else {
            return std::ptr::null_mut();
        };
        match RESERVE.compare_exchange_weak(
            s,
            pack(end, live + 1),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return base.wrapping_add(start),
            Err(now) => s = now,
        }
    }
}

/// Give back the region's block `p` of layout `l`: the last block given
/// back resets the region; the block at the top lowers it.
fn reserve_free(p: *mut u8, l: Layout) {
    let start = p.addr() - region_base().addr();
    let end = start + l.size().max(1);
    let mut s = RESERVE.load(Ordering::Acquire);
    loop {
        let (top, live) = unpack(s);
        let live = live.saturating_sub(1);
        let top = if live == 0 {
            0
        } else if end == top {
            start
        } else {
            top
        };
        match RESERVE.compare_exchange_weak(s, pack(top, live), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return,
            Err(now) => s = now,
        }
    }
}

/// Requests the reserve served, in the whole process.
static SERVED: AtomicU64 = AtomicU64::new(0);

/// How many requests [`Reserve`]s served from the reserve so far, in the
/// whole process (each one a failure of the allocator underneath inside a
/// section).
pub fn reserve_served() -> u64 {
    SERVED.load(Ordering::Relaxed)
}

/// What the reserve holds now: its live blocks and its bump offset in
/// bytes (both 0 when nothing of it is in use).
pub fn reserve_in_use() -> (u64, usize) {
    let (top, live) = unpack(RESERVE.load(Ordering::Acquire));
    (live, top)
}

/// A global allocator that forwards to `A` and keeps a reserve for compile
/// work: when `A` refuses an `alloc`, `alloc_zeroed` or `realloc` while
/// the thread is inside a [`section`](crate::oom::section) (and not in a
/// [`bypass`](crate::oom::bypass)), the request is served from a static
/// region of [`RESERVE_BYTES`], and the section reports
/// [`OutOfMemory`](crate::oom::OutOfMemory) instead of std aborting the
/// process. Outside sections, or when the region cannot hold the request,
/// a refusal is null, as from `A` (std then aborts, as without it).
///
/// A block of the region is given back by `dealloc` (the region is reset
/// when none is live) or moved out by `realloc` (a new block, from `A` if
/// it can, and a copy). The success path costs one null test per
/// allocation and one address comparison per `dealloc`.
///
/// ```
/// #[global_allocator]
/// static GLOBAL: vm::alloc_count::Reserve<vm::alloc_count::Counting> =
///     vm::alloc_count::Reserve::new(vm::alloc_count::Counting);
///
/// fn main() {
///     let v = vm::oom::section(|| vec![0u8; 64]).expect("nothing fails here");
///     assert_eq!(v.len(), 64);
/// }
/// ```
pub struct Reserve<A> {
    inner: A,
}

impl<A: GlobalAlloc> Reserve<A> {
    /// `inner` with a reserve behind it.
    pub const fn new(inner: A) -> Reserve<A> {
        Reserve { inner }
    }

    /// `A` refused `l`: a block of the region if the thread may use it
    /// (and the failure recorded), else null.
    #[cold]
    #[inline(never)]
    fn refused(&self, l: Layout) -> *mut u8 {
        if !crate::oom::reserve_allowed() {
            return std::ptr::null_mut();
        }
        let p = reserve_alloc(l);
        if !p.is_null() {
            crate::oom::note_failure();
            SERVED.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
}

// SAFETY: a block is either `A`'s (every call about it forwarded to `A`
// with the caller's arguments, `A`'s contract) or the region's: aligned
// and `l.size()` bytes long inside the region, disjoint from every other
// live block (`reserve_alloc`), never passed to `A`, and given back only by
// `dealloc` or `realloc` (`in_region` tells the two kinds apart). A
// `realloc` that returns null leaves the old block as it was.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Reserve<A> {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { self.inner.alloc(l) };
        if p.is_null() {
            return self.refused(l);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { self.inner.alloc_zeroed(l) };
        if p.is_null() {
            let p = self.refused(l);
            if !p.is_null() {
                // SAFETY: `p` is a fresh block of `l.size()` writable
                // bytes (a reused part of the region may hold old ones).
                unsafe { std::ptr::write_bytes(p, 0, l.size()) };
            }
            return p;
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if in_region(p) {
            reserve_free(p, l);
            return;
        }
        // SAFETY: forwarded contract (`p` is `A`'s).
        unsafe { self.inner.dealloc(p, l) }
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if in_region(p) {
            return self.move_out(p, l, n);
        }
        // SAFETY: forwarded contract (`p` is `A`'s).
        let q = unsafe { self.inner.realloc(p, l, n) };
        if !q.is_null() {
            return q;
        }
        // A refused: a block of the region, the bytes copied, `p` given
        // back to `A`.
        let Ok(nl) = Layout::from_size_align(n, l.align()) else {
            return std::ptr::null_mut();
        };
        let q = self.refused(nl);
        if !q.is_null() {
            // SAFETY: `p` holds `l.size()` readable bytes, `q` has room for
            // `n`; they are different blocks. `p` is `A`'s, of layout `l`,
            // and no longer used.
            unsafe {
                std::ptr::copy_nonoverlapping(p, q, l.size().min(n));
                self.inner.dealloc(p, l);
            }
        }
        q
    }
}

impl<A: GlobalAlloc> Reserve<A> {
    /// `realloc` of the region's block `p`: a new block (`A`'s if it can,
    /// else the region's), the bytes copied, `p` given back; null (and `p`
    /// kept) if there is none.
    #[cold]
    #[inline(never)]
    fn move_out(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let Ok(nl) = Layout::from_size_align(n, l.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `realloc`'s caller guarantees `n` is nonzero and, with
        // `l.align()`, a valid layout (checked above anyway).
        let q = unsafe { self.alloc(nl) };
        if !q.is_null() {
            // SAFETY: `p` holds `l.size()` readable bytes, `q` has room for
            // `n`; they are different live blocks.
            unsafe { std::ptr::copy_nonoverlapping(p, q, l.size().min(n)) };
            reserve_free(p, l);
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oom::{bypass, failed, section, OutOfMemory};

    thread_local! {
        static REFUSE: Cell<bool> = const { Cell::new(false) };
    }

    /// The system allocator, refusing everything while `REFUSE` is set.
    struct Refusing;

    // SAFETY: forwards to `System` with the caller's arguments, or returns
    // null from `alloc`, `alloc_zeroed` and `realloc` (the old block kept).
    unsafe impl GlobalAlloc for Refusing {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            if REFUSE.with(Cell::get) {
                return std::ptr::null_mut();
            }
            // SAFETY: forwarded contract.
            unsafe { System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            // SAFETY: forwarded contract.
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            if REFUSE.with(Cell::get) {
                return std::ptr::null_mut();
            }
            // SAFETY: forwarded contract.
            unsafe { System.realloc(p, l, n) }
        }
    }

    fn refuse(on: bool) {
        REFUSE.with(|r| r.set(on));
    }

    /// The only test of this binary that uses the region (the others
    /// would see its counts move).
    #[test]
    fn the_reserve_serves_sections_only() {
        let r = Reserve::new(Refusing);
        let l = Layout::from_size_align(100, 16).expect("layout");
        assert_eq!(reserve_in_use(), (0, 0));

        // Outside a section: null, as from the allocator underneath.
        refuse(true);
        // SAFETY: a nonzero size.
        assert!(unsafe { r.alloc(l) }.is_null());
        assert!(!failed());

        let out = section(|| {
            // Inside: a block of the region, the failure recorded.
            // SAFETY: a nonzero size.
            let p = unsafe { r.alloc(l) };
            assert!(in_region(p) && p.addr() % 16 == 0);
            assert!(failed());
            assert_eq!(reserve_in_use().0, 1);
            // SAFETY: `p` is a live block of 100 bytes.
            unsafe { std::ptr::write_bytes(p, 7, 100) };

            // A bypass sees the refusal.
            // SAFETY: a nonzero size.
            assert!(bypass(|| unsafe { r.alloc(l) }).is_null());

            // Too large for the region: null.
            let huge = Layout::from_size_align(RESERVE_BYTES + 1, 8).expect("layout");
            // SAFETY: a nonzero size.
            assert!(unsafe { r.alloc(huge) }.is_null());

            // A second block; freeing the top one lowers the top, freeing
            // the last resets the region.
            // SAFETY: a nonzero size.
            let q = unsafe { r.alloc_zeroed(l) };
            assert!(in_region(q) && q.addr() >= p.addr() + 100);
            // SAFETY: `q` is a live block of 100 bytes.
            assert!(unsafe { std::slice::from_raw_parts(q, 100) }
                .iter()
                .all(|b| *b == 0));
            let top = reserve_in_use().1;
            // SAFETY: `q` is the region's block of layout `l`.
            unsafe { r.dealloc(q, l) };
            assert!(reserve_in_use().1 < top);
            assert_eq!(reserve_in_use().0, 1);

            // `realloc` of a block of the region moves it out when the
            // allocator underneath can take it, the bytes kept.
            refuse(false);
            // SAFETY: `p` is the region's block of layout `l`; 200 > 0.
            let moved = unsafe { r.realloc(p, l, 200) };
            assert!(!moved.is_null() && !in_region(moved));
            // SAFETY: the first 100 bytes of `moved` were copied from `p`.
            assert!(unsafe { std::slice::from_raw_parts(moved, 100) }
                .iter()
                .all(|b| *b == 7));
            assert_eq!(reserve_in_use(), (0, 0), "reset: no block live");

            // `realloc` of the allocator's block, refused: into the
            // region, the bytes kept.
            refuse(true);
            let l200 = Layout::from_size_align(200, 16).expect("layout");
            // SAFETY: `moved` is `System`'s block of layout `l200`.
            let back = unsafe { r.realloc(moved, l200, 300) };
            assert!(in_region(back));
            // SAFETY: the first 100 bytes were copied.
            assert!(unsafe { std::slice::from_raw_parts(back, 100) }
                .iter()
                .all(|b| *b == 7));
            // Reused part of the region, dirty: `alloc_zeroed` zeroes it.
            let l300 = Layout::from_size_align(300, 16).expect("layout");
            // SAFETY: `back` is the region's block of layout `l300`.
            unsafe { r.dealloc(back, l300) };
            assert_eq!(reserve_in_use(), (0, 0));
            // SAFETY: a nonzero size.
            let z = unsafe { r.alloc_zeroed(l300) };
            assert!(in_region(z));
            // SAFETY: `z` is a live block of 300 bytes.
            assert!(unsafe { std::slice::from_raw_parts(z, 300) }
                .iter()
                .all(|b| *b == 0));
            // SAFETY: `z` is the region's block of layout `l300`.
            unsafe { r.dealloc(z, l300) };
            refuse(false);
        });
        assert_eq!(out, Err(OutOfMemory));
        assert!(!failed());
        assert_eq!(reserve_in_use(), (0, 0));

        // Nothing refused: no failure, nothing of the region used.
        let ok = section(|| {
            // SAFETY: a nonzero size.
            let p = unsafe { r.alloc(l) };
            assert!(!p.is_null() && !in_region(p));
            // SAFETY: `p` is `System`'s block of layout `l`.
            unsafe { r.dealloc(p, l) };
        });
        assert_eq!(ok, Ok(()));
    }
}
