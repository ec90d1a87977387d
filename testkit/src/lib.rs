//! # testkit: shared test support for advm
//!
//! * [`gen`]: a seeded generator of random well-formed `.adasm` programs,
//!   shared by the property tests and the fuzz targets.
//! * [`fd`]: central finite differences to check gradients against.
//! * [`ir`]: a builder of SSA IR by hand, and small modules built with it.
//! * `checks`, `intgen` (feature `engine`): what the fuzz targets check, as
//!   plain functions of their input bytes, and an integer-heavy program
//!   generator; the fuzz crate (`fuzz/`) and the workspace's smoke and
//!   differential tests (`ad/tests/fuzz_smoke.rs`, `differential.rs`) run
//!   the same code.
//! * [`refeval`]: an independent reference evaluator of the SSA IR, for
//!   differential testing against the VM.
//! * [`suite`]: the benchmark programs' inputs and reference values.

pub mod alloc;
#[cfg(feature = "engine")]
pub mod checks;
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

/// Problems with the plain rendering `text` of the diagnostics `items`
/// (line, column, message) of the file `name`, as the error-file tests of
/// `.adasm` and `.adl` check it: per diagnostic, the header
/// `name:line:col: error: message`, the source line after its line number in
/// a gutter (`12 │ `), and a caret line whose caret sits under the column
/// (the files have no tabs, which the rendering expands).
pub fn rendering_problems(text: &str, name: &str, items: &[(u32, u32, &str)]) -> Vec<String> {
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.len() != 3 * items.len() {
        return vec![format!(
            "{name}: render has {} lines for {} diagnostics",
            lines.len(),
            items.len()
        )];
    }
    let mut problems = Vec::new();
    for (&(line, col, message), chunk) in items.iter().zip(lines.chunks(3)) {
        let head = format!("{name}:{line}:{col}: error: {message}");
        let gutter = format!("{line} │ ");
        let blank = format!("{} │ ", " ".repeat(gutter.chars().count() - 3));
        let caret_col = chunk[2]
            .chars()
            .position(|c| c == '^')
            .map(|p| (p + 1).saturating_sub(gutter.chars().count()));
        if chunk[0] != head
            || !chunk[1].starts_with(&gutter)
            || !chunk[2].starts_with(&blank)
            || caret_col != Some(col as usize)
        {
            problems.push(format!("{name}: bad rendering:\n{}", chunk.join("\n")));
        }
    }
    problems
}
