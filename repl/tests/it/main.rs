//! The integration tests, one module per topic, in one test binary (one
//! link of the dependency graph instead of one per file):
//! `cargo test -p advm --test it`, or one module with
//! `cargo test -p advm --test it MODULE::`.
//!
//! `tests/budget_memory.rs` and `tests/sweep_memory.rs` stay binaries of
//! their own: they measure peak memory, with nothing else running beside
//! them.

mod adl_cli;
mod adl_repl;
mod cli;
mod corpus;
mod docs;
mod facade;
mod limits;
mod repl_cfg;
mod repl_session;
mod repl_terminal;
mod sweep;
