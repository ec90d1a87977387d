//! Print the markdown tables of docs/benchmarks.md from criterion's results
//! (`target/criterion/<group>/<function>/new/estimates.json`, median):
//! per program the median times of the six functions of `benches/suite.rs`
//! and their ratios, then the powloop scaling of `benches/scaling.rs` if it
//! has been run.
//!
//! ```text
//! cargo bench -p advm-bench --features peers --bench suite
//! cargo run -p suite --release --example table
//! ```
//!
//! `CARGO_TARGET_DIR` is honoured; a missing result prints as `-`.

use std::path::{Path, PathBuf};
use suite::report::{ratio, tables, time, FUNCS, PROGRAMS};

fn criterion_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| testkit::workspace_root().join("target"))
        .join("criterion")
}

/// Median in nanoseconds of one benchmark, if it has been run.
fn median(dir: &Path, group: &str, func: &str) -> Option<f64> {
    let path = dir.join(group).join(func).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["median"]["point_estimate"].as_f64()
}

fn main() {
    let dir = criterion_dir();
    let rows: Vec<(&str, [Option<f64>; 6])> = PROGRAMS
        .iter()
        .map(|p| (*p, FUNCS.map(|f| median(&dir, p, f))))
        .collect();
    println!(
        "Median times (criterion, `cargo bench -p advm-bench --features peers --bench suite`):\n"
    );
    print!("{}", tables(&rows));
    let scaling = dir.join("powloop_scaling");
    if scaling.is_dir() {
        println!("\npowloop scaling (`cargo bench -p advm-bench --bench scaling`):\n");
        println!("| n | advm grad | ns / iteration | advm primal | grad / primal |");
        println!("|---:|---:|---:|---:|---:|");
        for e in 2..=6u32 {
            let n = 10u64.pow(e);
            let g = median(&dir, "powloop_scaling", &format!("advm_grad/{n}"));
            let p = median(&dir, "powloop_scaling", &format!("advm_primal/{n}"));
            let per = g.map(|g| format!("{:.2}", g / n as f64));
            println!(
                "| 10^{e} | {} | {} | {} | {} |",
                time(g),
                per.unwrap_or_else(|| "-".into()),
                time(p),
                ratio(g, p)
            );
        }
    }
}
