//! How advm's gradient scales with the trip count: powloop at
//! n = 10^2 .. 10^6. Prints, per n, the peak bytes on the AD stacks
//! (`Vm::peak_stack_bytes` after a gradient) and bytes per iteration, then
//! times the gradient (and the primal, for the ratio) with criterion,
//! throughput in iterations.
//!
//! `cargo bench -p advm-bench --bench scaling` (about 1 minute).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use suite::advm::Advm;
use suite::native;
use vm::Value;

fn scaling(c: &mut Criterion) {
    let x = 1.000_000_1;
    let mut group = c.benchmark_group("powloop_scaling");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    eprintln!("{:>9} {:>14} {:>16}", "n", "peak bytes", "bytes/iteration");
    for e in 2..=6u32 {
        let n = 10i64.pow(e);
        let args = vec![Value::F64(x), Value::I64(n)];
        let mut advm = Advm::load("powloop", "pow", args).unwrap_or_else(|e| panic!("{e}"));
        let value = advm.grad().expect("advm gradient");
        let peak = advm.peak_stack_bytes();
        let (want, dwant) = native::powloop_grad(x, n, &mut Vec::new());
        assert_eq!(value, want, "n = {n}: value");
        let mut g = [0.0];
        advm.flat_grad(&mut g);
        let d = &g[0];
        assert!(
            suite::close(*d, dwant, 1e-8),
            "n = {n}: derivative {d} vs {dwant}"
        );
        eprintln!("{n:>9} {peak:>14} {:>16.2}", peak as f64 / n as f64);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("advm_grad", n), &n, |b, _| {
            b.iter(|| advm.grad().expect("advm gradient"))
        });
        group.bench_with_input(BenchmarkId::new("advm_primal", n), &n, |b, _| {
            b.iter(|| advm.primal().expect("advm primal"))
        });
    }
    group.finish();
}

criterion_group!(benches, scaling);
criterion_main!(benches);
