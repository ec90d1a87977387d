//! Criterion benches of the suite: one group per program (`sincos`,
//! `powloop`, `logsumexp`, `branchy`, `recursion`, `logreg`, `mlp`), each
//! timing in one run
//!
//! * `advm_primal`: the user function by `Vm::call_raw` (no allocation);
//! * `advm_grad`: value and gradient by `Engine::grad_into` (no allocation);
//! * `native_primal`, `native_adjoint`: plain Rust (suite::native);
//! * `reverse`, `echidna`: the peer AD crates (suite::peers).
//!
//! Every implementation is checked against the others and against testkit's
//! reference values before anything is timed.
//!
//! `cargo bench -p advm-bench --features peers --bench suite` (about 3 minutes), or one program:
//! `cargo bench -p advm-bench --features peers --bench suite -- powloop`, or one function
//! everywhere: `cargo bench -p advm-bench --features peers --bench suite -- advm_grad`. Then
//! `cargo run -p suite --release --example table` prints the table of
//! docs/benchmarks.md from target/criterion.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use suite::advm::Advm;
use suite::native::Native;
use suite::peers::{EchidnaPeer, ReversePeer};
use suite::{cases, check_agreement};

/// The 1-minute load average, to tell a quiet run from a disturbed one (the
/// machine has 2 cores shared with builds and other benches).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn suite(c: &mut Criterion) {
    eprintln!("load average at start: {}", load());
    for (case, input) in cases() {
        if let Err(e) = check_agreement(&case) {
            panic!("implementations disagree, not timing: {e}");
        }
        let mut advm = Advm::from_case(&case).unwrap_or_else(|e| panic!("{e}"));
        let mut native = Native::new();
        let mut rev = ReversePeer::new();
        let mut ech = EchidnaPeer::new(&input);
        let mut g = vec![0.0; input.grad_len()];

        let mut group = c.benchmark_group(case.file);
        group
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(2))
            .sample_size(30);
        group.bench_function("advm_primal", |b| {
            b.iter(|| advm.primal().expect("advm primal"))
        });
        group.bench_function("advm_grad", |b| {
            b.iter(|| advm.grad().expect("advm gradient"))
        });
        group.bench_function("native_primal", |b| {
            b.iter(|| native.primal(black_box(&input)))
        });
        group.bench_function("native_adjoint", |b| {
            b.iter(|| native.grad(black_box(&input), black_box(&mut g)))
        });
        group.bench_function("reverse", |b| {
            b.iter(|| rev.grad(black_box(&input), black_box(&mut g)))
        });
        group.bench_function("echidna", |b| b.iter(|| ech.grad(black_box(&mut g))));
        group.finish();
    }
    eprintln!("load average at end: {}", load());
}

criterion_group!(benches, suite);
criterion_main!(benches);
