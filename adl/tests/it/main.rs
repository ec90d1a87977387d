//! The integration tests, one module per topic, in one test binary (one
//! link of the dependency graph instead of one per file):
//! `cargo test -p advm-adl --test it`, or one module with
//! `cargo test -p advm-adl --test it MODULE::`.

mod docs;
mod errors;
mod programs;
mod robustness;
