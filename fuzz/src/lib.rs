//! Shared logic of the fuzz targets (see `checks`) and the integer-heavy
//! program generator (`intgen`). Both files are also compiled into the
//! workspace's tests with `#[path]` (`ad/tests/differential.rs`,
//! `ad/tests/fuzz_smoke.rs`), so CI runs the same checks without cargo-fuzz.

pub mod checks;
pub mod intgen;
