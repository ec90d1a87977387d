//! Sweeps: `cargo bench -p advm-bench --bench sweep` (docs/benchmarks.md,
//! *Sweeps*).
//!
//! The gradient of powloop (n = 1000, with respect to x) at 10 000 points:
//!
//! * `threads/grad_many_{1,2}`: [`ad::Engine::grad_many`] on a rayon pool
//!   of 1 and of 2 threads (prepared gradient, points as values: the
//!   library's fastest path).
//! * `threads/lines_{1,2}`: what `advm sweep` does with a chunk of lines,
//!   file I/O aside: each line of JSON parsed, its gradient taken, its
//!   result line written ([`advm::points::Worker::result_line`]), in
//!   parallel with one engine clone per thread, as the binary runs it.
//! * `per_point/grad_into` and `per_point/line`, on one thread: the
//!   gradient alone (`Engine::grad_wrt_into`, arguments already values)
//!   and the whole line; their difference is the per-point cost of
//!   reading the JSON line and writing the result. `per_point/line_id` is
//!   that cost measured alone: the same lines through `--mode run` of
//!   `@id(x, n) = x` (parse, a call that returns at once, the result line
//!   written), a difference too small to see between the other two on a
//!   noisy machine.

use ad::{Engine, Gradient};
use advm::points::{Job, Task, Worker};
use criterion::{criterion_group, criterion_main, Criterion};
use rayon::prelude::*;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;
use vm::Value;

const POINTS: usize = 10_000;
const N: i64 = 1000;

fn engine() -> Engine {
    let path = testkit::workspace_root().join("programs/bench/powloop.adasm");
    let src = std::fs::read_to_string(path).expect("powloop exists");
    let module = assembler::assemble(&src, "powloop.adasm").unwrap_or_else(|d| panic!("{d}"));
    Engine::new(module).expect("verifies")
}

fn xs() -> impl Iterator<Item = f64> {
    (0..POINTS).map(|i| 1.0 + i as f64 * 1e-8)
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

fn bench(c: &mut Criterion) {
    let mut e = engine();
    let f = e.find("pow").expect("defined");
    let p = e.prepare(f, &[true, false]).expect("prepares");
    e.derive_wrt(f, &[true, false]).expect("derives");
    let points: Vec<[Value; 2]> = xs().map(|x| [Value::F64(x), Value::I64(N)]).collect();
    let lines: Vec<String> = xs().map(|x| format!("[{x}, {N}]")).collect();
    let task = Task::new(&e, f, Job::Grad(Some(vec![true, false])));

    let mut g = c.benchmark_group("threads");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for threads in [1, 2] {
        let pool = pool(threads);
        let (mut values, mut grads) = (vec![0.0; POINTS], vec![0.0; 2 * POINTS]);
        g.bench_function(format!("grad_many_{threads}"), |b| {
            b.iter(|| {
                let failed = pool
                    .install(|| e.grad_many(&p, &points, &mut values, &mut grads))
                    .expect("shapes fit");
                assert!(failed.is_empty());
                black_box(&values);
            })
        });
        let workers: Vec<Mutex<Worker>> = (0..threads)
            .map(|_| Mutex::new(Worker::new(e.clone())))
            .collect();
        let mut outs = vec![String::new(); POINTS];
        g.bench_function(format!("lines_{threads}"), |b| {
            b.iter(|| {
                pool.install(|| {
                    lines
                        .par_iter()
                        .zip(outs.par_iter_mut())
                        .enumerate()
                        .for_each(|(i, (line, out))| {
                            let me = rayon::current_thread_index().unwrap_or(0) % workers.len();
                            let mut w = workers[me].lock().unwrap_or_else(|e| e.into_inner());
                            assert!(w.result_line(&task, i, line.as_bytes(), out));
                        })
                });
                black_box(&outs);
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("per_point");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let mut out = Gradient::default();
    let mask = [true, false];
    g.bench_function("grad_into", |b| {
        b.iter(|| {
            for pt in &points {
                e.grad_wrt_into(f, pt, &mask, &mut out).expect("runs");
            }
            black_box(&out);
        })
    });
    let mut w = Worker::new(e.clone());
    let mut line_out = String::new();
    g.bench_function("line", |b| {
        b.iter(|| {
            for (i, line) in lines.iter().enumerate() {
                assert!(w.result_line(&task, i, line.as_bytes(), &mut line_out));
            }
            black_box(&line_out);
        })
    });
    let module = assembler::assemble(
        "fn @id(%x: f64, %n: i64) -> f64 {\nentry:\n    ret %x\n}",
        "id.adasm",
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let id_engine = Engine::new(module).expect("verifies");
    let id = id_engine.find("id").expect("defined");
    let id_task = Task::new(&id_engine, id, Job::Run);
    let mut w = Worker::new(id_engine);
    g.bench_function("line_id", |b| {
        b.iter(|| {
            for (i, line) in lines.iter().enumerate() {
                assert!(w.result_line(&id_task, i, line.as_bytes(), &mut line_out));
            }
            black_box(&line_out);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
