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

/// The workspace root (for reading `programs/`), found at run time: the
/// nearest directory holding a `Cargo.toml` with a `[workspace]` table,
/// looking up from the package directory cargo names in
/// `CARGO_MANIFEST_DIR` when it runs a test or benchmark, else from the
/// current directory (which cargo sets to the package directory). So a
/// checkout that was moved (or test binaries copied elsewhere and run from
/// inside a checkout) reads its own files. Only if neither finds one: the
/// parent of this crate's directory at compile time.
pub fn workspace_root() -> std::path::PathBuf {
    let starts = [
        std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from),
        std::env::current_dir().ok(),
    ];
    starts
        .into_iter()
        .flatten()
        .find_map(|start| find_workspace_root(&start))
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .map(|p| p.to_path_buf())
                .unwrap_or_default()
        })
}

/// The nearest of `start` and its ancestors whose `Cargo.toml` has a
/// `[workspace]` table.
pub fn find_workspace_root(start: &std::path::Path) -> Option<std::path::PathBuf> {
    start.ancestors().find_map(|dir| {
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        text.lines()
            .any(|l| l.trim() == "[workspace]")
            .then(|| dir.to_path_buf())
    })
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

/// Two gradient entries bit for bit, arrays element by element (two nans
/// of any payload alike).
pub fn same_bits(a: &Option<vm::Value>, b: &Option<vm::Value>) -> bool {
    same_entries(a, b, false)
}

/// [`same_bits`], but a zero may differ in sign (`+0` where the other has
/// `-0`): what if-converted code may change in a gradient, where the arm
/// not taken adds an exact `+0`.
pub fn same_but_zero_sign(a: &Option<vm::Value>, b: &Option<vm::Value>) -> bool {
    same_entries(a, b, true)
}

/// Two lists of gradient entries (or HVP entries) of one length, entry by
/// entry [`same_bits`].
pub fn all_same_bits(a: &[Option<vm::Value>], b: &[Option<vm::Value>]) -> bool {
    same_lists(a, b, false)
}

/// [`all_same_bits`], but zeros may differ in sign ([`same_but_zero_sign`]).
pub fn all_same_but_zero_sign(a: &[Option<vm::Value>], b: &[Option<vm::Value>]) -> bool {
    same_lists(a, b, true)
}

fn same_lists(a: &[Option<vm::Value>], b: &[Option<vm::Value>], zeros: bool) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_entries(x, y, zeros))
}

fn same_entries(a: &Option<vm::Value>, b: &Option<vm::Value>, zeros: bool) -> bool {
    use vm::Value;
    let eq = |x: f64, y: f64| {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) || (zeros && x == 0.0 && y == 0.0)
    };
    match (a, b) {
        (None, None) => true,
        (Some(Value::F64(x)), Some(Value::F64(y))) => eq(*x, *y),
        (Some(Value::Arr(xs)), Some(Value::Arr(ys))) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| eq(*x, *y))
        }
        _ => false,
    }
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

#[cfg(test)]
mod root_tests {
    use super::*;

    #[test]
    fn the_workspace_root_is_found_from_a_moved_checkout() {
        let base = std::env::temp_dir().join(format!("advm-root-{}", std::process::id()));
        let pkg = base.join("moved/ws/pkg/src");
        std::fs::create_dir_all(&pkg).expect("temp dirs");
        std::fs::write(
            base.join("moved/ws/Cargo.toml"),
            "[workspace]\nmembers = [\"pkg\"]\n",
        )
        .expect("write");
        std::fs::write(
            base.join("moved/ws/pkg/Cargo.toml"),
            "[package]\nname = \"pkg\"\n",
        )
        .expect("write");
        let found = find_workspace_root(&pkg);
        assert_eq!(found, Some(base.join("moved/ws")));
        // (The package's own Cargo.toml, nearer, has no `[workspace]`.)
        let _ = std::fs::remove_dir_all(&base);
        // This checkout's root holds `programs/`, wherever it is.
        assert!(workspace_root().join("programs").is_dir());
    }
}
