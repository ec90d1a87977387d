//! The native tier against the interpreter and against native Rust
//! (`suite::native`: the same primals, and hand-written adjoints), on the
//! suite's programs (`programs/bench/`), and its compile time per function
//! over the corpus. Criterion times each call; a summary of medians and
//! ratios is printed at the end (the figures of docs/benchmarks.md,
//! *Native tier*). `cargo bench -p advm-bench --bench native`.

use ad::{Engine, Gradient};
use advm_bench::corpus;
use criterion::Criterion;
use std::hint::black_box;
use std::time::{Duration, Instant};
use vm::{Tier, Value};

fn engine(file: &str, jit: bool) -> Engine {
    let path = format!("programs/bench/{file}.adasm");
    let src = testkit::read_program(&path);
    let module = assembler::assemble(&src, &path).unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::new(module).expect("verifies");
    if jit {
        jit::install(e.vm_mut());
    }
    e
}

/// Median time per call of `f` over batches of about a millisecond.
fn median(mut f: impl FnMut()) -> f64 {
    for _ in 0..20 {
        f();
    }
    let t = Instant::now();
    f();
    let one = t.elapsed().as_nanos().max(1) as usize;
    let batch = (1_000_000 / one).clamp(1, 100_000);
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 15
        || (start.elapsed() < Duration::from_millis(300) && samples.len() < 100)
    {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        samples.push(t.elapsed().as_nanos() as f64 / batch as f64);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(500))
        .sample_size(20)
        .configure_from_args();
    let mut rows = Vec::new();
    for (case, input) in suite::cases() {
        let file = case.file;
        let args: Vec<Value> = case.args.clone();
        let mut native = suite::native::Native::new();
        let mut g = vec![0.0; input.grad_len()];
        let mut tiers = Vec::new();
        for jit in [true, false] {
            let mut e = engine(file, jit);
            let f = e.find(case.func).expect("exists");
            let mut out = Gradient::default();
            e.grad_into(f, &args, &mut out).expect("gradient");
            let tier = e.vm_mut().last_tier();
            let name = if jit { "jit" } else { "interp" };
            c.bench_function(&format!("{file}/{name}/primal"), |b| {
                b.iter(|| black_box(e.run(f, &args).is_ok()))
            });
            c.bench_function(&format!("{file}/{name}/grad"), |b| {
                b.iter(|| black_box(e.grad_into(f, &args, &mut out).is_ok()))
            });
            let p = median(|| {
                black_box(e.run(f, &args).is_ok());
            });
            let gr = median(|| {
                black_box(e.grad_into(f, &args, &mut out).is_ok());
            });
            tiers.push((tier, p, gr));
        }
        c.bench_function(&format!("{file}/native/primal"), |b| {
            b.iter(|| black_box(native.primal(&input)))
        });
        c.bench_function(&format!("{file}/native/adjoint"), |b| {
            b.iter(|| black_box(native.grad(&input, &mut g)))
        });
        let np = median(|| {
            black_box(native.primal(&input));
        });
        let ng = median(|| {
            black_box(native.grad(&input, &mut g));
        });
        rows.push((file, tiers, np, ng));
    }
    let progs = corpus::programs();
    let mut times = Vec::new();
    for _ in 0..5 {
        times.extend(corpus::compile_times(&progs));
    }
    c.final_summary();
    println!("\n| program | tier | jit primal | jit grad | interp primal | interp grad | native primal | native adjoint | jit grad / native adjoint | jit primal / native primal | interp grad / jit grad |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (file, t, np, ng) in rows {
        let (tier, jp, jg) = t[0];
        let (_, ip, ig) = t[1];
        let tier = if tier == Tier::Native {
            "jit"
        } else {
            "interp"
        };
        println!(
            "| {file} | {tier} | {jp:.0} ns | {jg:.0} ns | {ip:.0} ns | {ig:.0} ns | {np:.0} ns | {ng:.0} ns | {:.2} | {:.2} | {:.2} |",
            jg / ng,
            jp / np,
            ig / jg
        );
    }
    println!(
        "\ncompile time per function over the corpus ({} programs, compiled 5 times):\n{}",
        progs.len(),
        corpus::summary(&times)
    );
}
