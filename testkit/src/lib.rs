//! # testkit: shared test support for advm
//!
//! * [`gen`]: a seeded generator of random well-formed `.adasm` programs,
//!   shared by the property tests and the fuzz targets.
//! * [`fd`]: central finite differences to check gradients against.
//! * [`ir`]: a builder of SSA IR by hand, and small modules built with it.
//! * `checks`, `intgen` (feature `engine`): what the fuzz targets check, as
//!   plain functions of their input bytes, and an integer-heavy program
//!   generator; the fuzz crate (`fuzz/`) and the workspace's smoke and
//!   differential tests (`ad/tests/it/fuzz_smoke.rs`, `differential.rs`) run
//!   the same code.
//! * [`errfiles`]: the data-driven negative tests of the assembler and of
//!   the `.adl` front end (error files with located directives).
//! * [`refeval`]: an independent reference evaluator of the SSA IR, for
//!   differential testing against the VM.
//! * [`suite`]: the benchmark programs' inputs and reference values.

pub mod alloc;
#[cfg(feature = "engine")]
pub mod checks;
pub mod errfiles;
pub mod fd;
pub mod gen;
#[cfg(feature = "engine")]
pub mod intgen;
pub mod ir;
pub mod refeval;
pub mod suite;

/// The workspace root (for reading `programs/`).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default()
}

/// The text of a file of the workspace (`programs/...`); panics, naming
/// the file, if it cannot be read (for tests and benchmarks).
pub fn read_program(file: &str) -> String {
    let path = workspace_root().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The environment variable `name` as a number, `default` if it is unset
/// or not one (the number of random cases and the first seed of the
/// property tests: `ADVM_PROP_CASES`, `ADVM_PROP_SEED`, ...).
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Two gradient entries equal up to rounding (relative 1e-12; nan equals
/// nan, an infinity itself): the derived code of a partial gradient skips
/// the work of unselected parameters, which can change the order in which
/// the remaining contributions are added.
pub fn same_gradient(a: &Option<vm::Value>, b: &Option<vm::Value>) -> bool {
    use vm::Value;
    let close = |x: f64, y: f64| {
        x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()) || (x.is_nan() && y.is_nan())
    };
    match (a, b) {
        (None, None) => true,
        (Some(Value::F64(x)), Some(Value::F64(y))) => close(*x, *y),
        (Some(Value::Arr(xs)), Some(Value::Arr(ys))) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| close(*x, *y))
        }
        _ => false,
    }
}
