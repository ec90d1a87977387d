//! The native tier against the interpreter and against native Rust
//! (`suite::native`: the same primals, and hand-written adjoints), on the
//! suite's programs (`programs/bench/`), what a call from the host costs
//! in each tier (`entry/*`), and its compile time per function over the
//! corpus. Criterion times each call; a summary of medians and
//! ratios is printed at the end (the figures of docs/benchmarks.md,
//! *Native tier*). `cargo bench -p advm-bench --bench native`.
//!
//! advm runs as `suite::advm::Advm` does for the suite bench: the primal
//! by `Vm::call_raw`, the gradient with respect to the inputs the native
//! adjoint differentiates (not logreg's data nor mlp's input), checked
//! against the native adjoint before anything is timed.

use advm_bench::corpus;
use criterion::Criterion;
use std::hint::black_box;
use std::time::{Duration, Instant};
use suite::advm::Advm;
use vm::Tier;

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
    // Each program as derived by default, and branchy also with its
    // conditional if-converted (`Engine::set_if_conversion`).
    let runs = suite::cases().into_iter().flat_map(|(case, input)| {
        let convert = case.file == "branchy";
        let again = convert.then(|| (case.clone(), input.clone(), true));
        std::iter::once((case, input, false)).chain(again)
    });
    for (case, input, convert) in runs {
        let file = if convert {
            format!("{}+ifconv", case.file)
        } else {
            case.file.to_string()
        };
        let file = file.as_str();
        let mut native = suite::native::Native::new();
        let mut g = vec![0.0; input.grad_len()];
        let mut tiers = Vec::new();
        for jit in [true, false] {
            let mut a = Advm::from_case(&case).unwrap_or_else(|e| panic!("{e}"));
            a.engine_mut().set_if_conversion(convert);
            if jit {
                jit::install(a.engine_mut().vm_mut());
                jit::install(a.primal_vm_mut());
            }
            let value = a.grad().expect("gradient");
            let mut got = vec![f64::NAN; g.len()];
            a.flat_grad(&mut got);
            let want = native.grad(&input, &mut g);
            assert!(
                suite::close(value, want, 1e-12),
                "{file}: value {value} vs {want}"
            );
            if let Some((i, x, y)) = suite::first_mismatch(&got, &g, 1e-8) {
                panic!("{file}: gradient[{i}] = {x:e} vs native adjoint {y:e}");
            }
            let tier = a.engine_mut().vm_mut().last_tier();
            a.primal().expect("primal");
            assert_eq!(
                a.primal_vm_mut().last_tier(),
                tier,
                "{file}: primal and gradient in one tier"
            );
            let name = if jit { "jit" } else { "interp" };
            c.bench_function(&format!("{file}/{name}/primal"), |b| {
                b.iter(|| black_box(a.primal().is_ok()))
            });
            c.bench_function(&format!("{file}/{name}/grad"), |b| {
                b.iter(|| black_box(a.grad().is_ok()))
            });
            let p = median(|| {
                black_box(a.primal().is_ok());
            });
            let gr = median(|| {
                black_box(a.grad().is_ok());
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
        rows.push((file.to_string(), tiers, np, ng));
    }
    let entry = entry_costs(&mut c);
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
    println!("\n| call from the host | interp | jit (eager) | jit / interp |");
    println!("|---|---:|---:|---:|");
    for (name, i, j) in entry {
        println!("| {name} | {i:.1} ns | {j:.1} ns | {:.2} |", j / i);
    }
    println!(
        "\ncompile time per function over the corpus ({} programs, compiled 5 times):\n{}",
        progs.len(),
        corpus::summary(&times)
    );
}

/// What a call from the host costs past the work it does: `Vm::call_raw`
/// of a function that returns its argument, and of `sin(cos x)`, in the
/// interpreter and compiled (a tier from `jit::install_eager`, which
/// compiles such small loop-free calls that `jit::install` leaves to the
/// interpreter). Name, interpreter and compiled medians.
fn entry_costs(c: &mut Criterion) -> Vec<(&'static str, f64, f64)> {
    let src = "fn @id(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n\
               fn @sincos(%x: f64) -> f64 {\nentry:\n    %c = cos %x\n    %s = sin %c\n    ret %s\n}\n";
    let module = assembler::assemble(src, "entry.adasm").expect("assembles");
    let mut prog = vm::lower::lower_module(&module).expect("lowers");
    vm::verify::verify_program(&mut prog).expect("verifies");
    let args = [0.9f64.to_bits()];
    let mut rows = Vec::new();
    for name in ["id", "sincos"] {
        let f = prog.find(name).expect("defined");
        let mut medians = [0.0; 2];
        for (k, tier) in ["interp", "jit"].into_iter().enumerate() {
            let mut v = vm::Vm::new(vm::Limits::default());
            if k == 1 {
                jit::install_eager(&mut v);
            }
            v.begin(false);
            v.call_raw(&prog, f, &args).expect("runs");
            assert_eq!(v.last_tier(), [Tier::Interp, Tier::Native][k]);
            c.bench_function(&format!("entry/{name}/{tier}"), |b| {
                b.iter(|| black_box(v.call_raw(&prog, f, black_box(&args)).is_ok()))
            });
            medians[k] = median(|| {
                black_box(v.call_raw(&prog, f, black_box(&args)).is_ok());
            });
        }
        rows.push((name, medians[0], medians[1]));
    }
    rows
}
