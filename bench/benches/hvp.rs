//! The AD modes against each other on the seven suite programs: `cargo
//! bench -p advm-bench --bench hvp`.
//!
//! For each program of `programs/bench/` (testkit's suite inputs), one
//! criterion group with the primal call (`Engine::run`), the gradient
//! (`grad_wrt_into`), the tangent along all ones (`jvp_wrt_into`) and the
//! Hessian-vector product along all ones (`hvp_wrt_into`: the tangents of
//! the forward function and of the pullback), each with respect to every
//! f64 and f64[] parameter and allocating nothing per call, so that
//! jvp/primal and hvp/grad are measured in one run.

use ad::{Engine, Gradient, Hvp, Tangent};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use vm::Value;

fn modes(c: &mut Criterion) {
    let root = testkit::workspace_root();
    for case in testkit::suite::cases() {
        let file = testkit::suite::path(&case);
        let src = std::fs::read_to_string(root.join(&file)).expect("program");
        let module = assembler::assemble(&src, &file).expect("assembles");
        let mut engine = Engine::new(module).expect("verifies");
        let f = engine.find(case.func).expect("function");
        let wrt = ad::analysis::all_params(engine.module().func(f));
        let args = case.args.clone();
        let dir: Vec<Option<Value>> = args
            .iter()
            .map(|a| match a {
                Value::F64(_) => Some(Value::F64(1.0)),
                Value::Arr(xs) => Some(Value::Arr(vec![1.0; xs.len()])),
                _ => None,
            })
            .collect();
        let mut g = Gradient::default();
        let mut t = Tangent::default();
        let mut h = Hvp::default();
        engine.run(f, &args).expect("runs");
        engine.grad_wrt_into(f, &args, &wrt, &mut g).expect("grad");
        engine
            .jvp_wrt_into(f, &args, &dir, &wrt, &mut t)
            .expect("jvp");
        engine
            .hvp_wrt_into(f, &args, &dir, &wrt, &mut h)
            .expect("hvp");
        let mut group = c.benchmark_group(format!("modes/{}", case.file));
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(1));
        group.sample_size(20);
        group.bench_function("primal", |b| {
            b.iter(|| engine.run(f, black_box(&args)).expect("runs"))
        });
        group.bench_function("grad", |b| {
            b.iter(|| {
                engine
                    .grad_wrt_into(f, black_box(&args), &wrt, &mut g)
                    .expect("grad")
            })
        });
        group.bench_function("jvp", |b| {
            b.iter(|| {
                engine
                    .jvp_wrt_into(f, black_box(&args), &dir, &wrt, &mut t)
                    .expect("jvp")
            })
        });
        group.bench_function("hvp", |b| {
            b.iter(|| {
                engine
                    .hvp_wrt_into(f, black_box(&args), &dir, &wrt, &mut h)
                    .expect("hvp")
            })
        });
        group.finish();
    }
}

criterion_group!(benches, modes);
criterion_main!(benches);
