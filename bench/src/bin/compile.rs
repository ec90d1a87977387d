//! Compile the corpus (`programs/**/*.adasm`, every user function and its
//! derived functions) in the native tier `N` times and print the compile
//! time per function (median and 90th percentile, wall-clock and CPU
//! time, bodies and trampolines apart), to compare builds or run under a
//! profiler: `cargo build --release -p advm-bench --bin compile`, then
//! `target/release/compile 20` (or `perf record -g ...`).

use advm_bench::corpus;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let progs = corpus::programs();
    let mut all = Vec::new();
    for _ in 0..n {
        all.extend(corpus::compile_times(&progs));
    }
    println!("{} programs, {n} passes", progs.len());
    print!("{}", corpus::summary(&all));
}
