//! The fuzz targets' shared logic lives in `testkit` (feature `engine`):
//! `testkit::checks` (what each target checks, as plain functions of the
//! input bytes) and `testkit::intgen` (the integer-heavy program
//! generator), so that the workspace's tests (`ad/tests/it/differential.rs`,
//! `ad/tests/it/fuzz_smoke.rs`) run the same checks without cargo-fuzz.

pub use testkit::{checks, intgen};
