//! Hessian-vector products against gradients: `cargo bench -p ad --bench hvp`.
//!
//! For each program, one group with the gradient call (`grad_wrt_into`) and
//! the Hessian-vector product along all ones (`hvp_wrt_into`: the tangents
//! of the forward function and of the pullback), so that the ratio
//! hvp/grad is measured in one run. Programs: powloop (x = 1.0001,
//! n = 1000) and logsumexp over 100 elements.

use ad::{Engine, Gradient, Hvp};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use vm::Value;

fn hvp_vs_grad(c: &mut Criterion) {
    let root = testkit::workspace_root();
    let xs: Vec<f64> = (0..100).map(|i| (i as f64 * 0.37).sin()).collect();
    let cases = [
        (
            "powloop",
            "programs/bench/powloop.adasm",
            "pow",
            vec![Value::F64(1.0001), Value::I64(1000)],
        ),
        (
            "logsumexp",
            "programs/bench/logsumexp.adasm",
            "logsumexp",
            vec![Value::Arr(xs)],
        ),
    ];
    for (name, file, func, args) in cases {
        let src = std::fs::read_to_string(root.join(file)).expect("program");
        let module = assembler::assemble(&src, file).expect("assembles");
        let mut engine = Engine::new(module).expect("verifies");
        let f = engine.find(func).expect("function");
        let wrt = ad::analysis::all_params(engine.module().func(f));
        let dir: Vec<Option<Value>> = args
            .iter()
            .map(|a| match a {
                Value::F64(_) => Some(Value::F64(1.0)),
                Value::Arr(xs) => Some(Value::Arr(vec![1.0; xs.len()])),
                _ => None,
            })
            .collect();
        let mut g = Gradient::default();
        let mut h = Hvp::default();
        engine.grad_wrt_into(f, &args, &wrt, &mut g).expect("grad");
        engine
            .hvp_wrt_into(f, &args, &dir, &wrt, &mut h)
            .expect("hvp");
        let mut group = c.benchmark_group(format!("hvp/{name}"));
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        group.sample_size(30);
        group.bench_function("grad", |b| {
            b.iter(|| {
                engine
                    .grad_wrt_into(f, black_box(&args), &wrt, &mut g)
                    .expect("grad")
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

criterion_group!(benches, hvp_vs_grad);
criterion_main!(benches);
