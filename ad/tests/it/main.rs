//! The integration tests, one module per topic, in one test binary (one
//! link of the dependency graph instead of one per file):
//! `cargo test -p advm-ad --test it`, or one module with
//! `cargo test -p advm-ad --test it MODULE::`.
//!
//! `tests/alloc.rs` and `tests/many.rs` stay binaries of their own: their
//! counting global allocators see every allocation of the process.

mod budget;
mod compile_work;
mod differential;
mod engine_args;
mod filetests;
mod forward;
mod fuzz_smoke;
mod handbuilt;
mod hvp;
mod ifconv;
mod inline;
mod ir_boundary;
mod layout;
mod licm;
mod linear_time;
mod prepared;
mod random_programs;
mod rules_custom;
mod rules_exhaustive;
mod structure;
mod suite;
mod zero_cotangent;
