//! The integration tests, one module per topic, in one test binary (one
//! link of the dependency graph instead of one per file):
//! `cargo test -p advm-vm --test it`, or one module with
//! `cargo test -p advm-vm --test it MODULE::`.
//!
//! `tests/alloc.rs` stays a binary of its own: its counting global
//! allocator sees every allocation of the process.

mod disasm;
mod limits;
mod lower;
mod random_programs;
mod run;
mod semantics;
mod verify;
