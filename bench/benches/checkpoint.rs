//! Checkpointing under the AD budget: `cargo bench -p advm-bench --bench
//! checkpoint`.
//!
//! The gradient of powloop (`programs/bench/powloop.adasm`) at n = 10^8,
//! which stores 800 MB without a budget, against budgets of 64 MB, 8 MB
//! and 1 MB (the forward sweep checkpointed and recomputed in segments,
//! `vm/src/interp/ckpt.rs`), in the interpreter. Before the timings it
//! prints each budget's recompute factor (`Engine::recompute_factor`);
//! `docs/benchmarks.md` ("The AD budget") has the figures.

use ad::{Engine, Gradient};
use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;
use vm::Value;

fn checkpoint(c: &mut Criterion) {
    let root = testkit::workspace_root();
    let file = "programs/bench/powloop.adasm";
    let src = std::fs::read_to_string(root.join(file)).expect("program");
    let module = assembler::assemble(&src, file).expect("assembles");
    let mut engine = Engine::new(module).expect("verifies");
    let f = engine.find("pow").expect("@pow");
    let args = [Value::F64(1.000_000_1), Value::I64(100_000_000)];
    let mut g = Gradient::default();
    let mut group = c.benchmark_group("powloop_1e8");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for (name, budget) in [
        ("store_all", None),
        ("64MB", Some(64_000_000)),
        ("8MB", Some(8_000_000)),
        ("1MB", Some(1_000_000)),
    ] {
        engine.set_ad_budget(budget);
        engine.grad_into(f, &args, &mut g).expect("gradient");
        eprintln!(
            "powloop n=1e8 budget {name}: recompute factor {:.3}",
            engine.recompute_factor()
        );
        group.bench_function(name, |b| {
            b.iter(|| engine.grad_into(f, &args, &mut g).expect("gradient"))
        });
    }
    group.finish();
}

criterion_group!(benches, checkpoint);
criterion_main!(benches);
