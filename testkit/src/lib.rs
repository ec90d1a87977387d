//! # testkit: shared test support for advm
//!
//! * [`gen`]: a seeded generator of random well-formed `.adasm` programs,
//!   shared by the property tests and the fuzz targets.
//! * [`fd`]: central finite differences to check gradients against.
//! * [`refeval`]: an independent reference evaluator of the SSA IR, for
//!   differential testing against the VM.
//! * [`suite`]: the benchmark programs' inputs and reference values.

pub mod fd;
pub mod gen;
pub mod refeval;
pub mod suite;

/// The workspace root (for reading `programs/`).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default()
}
