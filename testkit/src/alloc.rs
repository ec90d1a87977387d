//! The counting global allocator of the tests: [`vm::alloc_count`], the
//! one `advm bench` uses too, re-exported where the tests look for it. A
//! test binary installs it and reads [`allocs`] (this thread's count)
//! before and after the call it checks:
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
//! }
//! ```

pub use vm::alloc_count::{allocs, total, Counting};
