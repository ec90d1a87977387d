//! The integration tests, one module per topic, in one test binary (one
//! link of the dependency graph instead of one per file):
//! `cargo test -p advm-assembler --test it`, or one module with
//! `cargo test -p advm-assembler --test it MODULE::`.

mod errors;
mod listing;
mod programs;
mod robustness;
