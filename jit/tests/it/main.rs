//! The integration tests, one module per topic, in one test binary (one
//! link of the dependency graph instead of one per file):
//! `cargo test -p advm-jit --test it`, or one module with
//! `cargo test -p advm-jit --test it MODULE::`.
//!
//! `tests/alloc.rs` stays a binary of its own: its counting global
//! allocator sees every allocation of the process.

mod arrays;
mod checkpoint;
mod counted;
mod differential;
mod fuzz_smoke;
mod limits;
mod recursion;
mod settings;
mod three_calls;
mod tiering;
mod tiers;
