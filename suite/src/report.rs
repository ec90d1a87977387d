//! The markdown tables of docs/benchmarks.md, from six times per program
//! (in the order of [`FUNCS`]), however they were measured.

use std::fmt::Write;

/// The functions timed for every program, as named in `benches/suite.rs`.
pub const FUNCS: [&str; 6] = [
    "advm_primal",
    "advm_grad",
    "native_primal",
    "native_adjoint",
    "reverse",
    "echidna",
];

/// The suite's programs, in table order.
pub const PROGRAMS: [&str; 7] = [
    "sincos",
    "powloop",
    "logsumexp",
    "branchy",
    "recursion",
    "logreg",
    "mlp",
];

/// A time in nanoseconds, with a unit that keeps 3-4 digits.
pub fn time(ns: Option<f64>) -> String {
    match ns {
        None => "-".into(),
        Some(ns) if ns < 1e3 => format!("{ns:.1} ns"),
        Some(ns) if ns < 1e6 => format!("{:.2} µs", ns / 1e3),
        Some(ns) => format!("{:.2} ms", ns / 1e6),
    }
}

/// `a / b` with two decimals, `-` if either is missing.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

/// The times table and the ratios table for `rows` (program, times in the
/// order of [`FUNCS`], nanoseconds).
pub fn tables(rows: &[(&str, [Option<f64>; 6])]) -> String {
    let mut s = String::new();
    s.push_str(
        "| program | advm primal | advm grad | native primal | native adjoint | reverse | echidna |\n",
    );
    s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    for (p, t) in rows {
        let cells: Vec<String> = t.iter().map(|x| time(*x)).collect();
        let _ = writeln!(s, "| {p} | {} |", cells.join(" | "));
    }
    s.push_str("\nRatios:\n\n");
    s.push_str(
        "| program | advm grad / advm primal | advm grad / native adjoint | advm grad / reverse | advm grad / echidna | advm primal / native primal |\n",
    );
    s.push_str("|---|---:|---:|---:|---:|---:|\n");
    for (p, t) in rows {
        let [ap, ag, np, na, rv, ec] = *t;
        let _ = writeln!(
            s,
            "| {p} | {} | {} | {} | {} | {} |",
            ratio(ag, ap),
            ratio(ag, na),
            ratio(ag, rv),
            ratio(ag, ec),
            ratio(ap, np)
        );
    }
    s
}
