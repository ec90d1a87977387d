//! The AD modes of advm against the hand-written native tangent and HVP and
//! against echidna's dual numbers and HVP, on the seven suite programs, in
//! one run: `cargo bench -p advm-bench --features peers --bench modes` (about 4
//! minutes; one program: `... --bench modes -- powloop`).
//!
//! One criterion group per program (`modes/FILE`):
//!
//! * `interp/{primal,grad,jvp,hvp}` and `jit/{primal,grad,jvp,hvp}`: advm's
//!   calls (`suite::modes::AdvmModes`, as `bench/benches/hvp.rs`: `Engine::run`,
//!   `grad_wrt_into`, `jvp_wrt_into`, `hvp_wrt_into`) with respect to every
//!   f64 and f64[] parameter along all ones, on the interpreter and with the
//!   native tier installed (`jit::install`; a function the tier declines
//!   runs interpreted: the summary prints the tier the hvp ran on);
//! * `native/{primal,tangent,hvp}`: `suite::native` (plain Rust; tangent and
//!   HVP by hand);
//! * `echidna/{dual,hvp}`: `suite::peers::EchidnaDual`, `EchidnaHvp`.
//!
//! Everything is checked against everything else (`suite::modes::check_modes`)
//! before it is timed. At the end, a summary of medians over batches of
//! about a millisecond, measured in the same run, with the ratios of
//! docs/benchmarks.md (*The AD modes against each other*).

use criterion::{BenchmarkId, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};
use suite::modes::{check_modes, AdvmModes};
use suite::native::Native;
use suite::peers::{EchidnaDual, EchidnaHvp};
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

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Medians of one tier: primal, grad, jvp, hvp, and the tier the hvp ran on.
struct Tiered {
    t: [f64; 4],
    tier: Tier,
}

fn time_advm(c: &mut Criterion, group: &str, name: &str, a: &mut AdvmModes) -> Tiered {
    let mut g = c.benchmark_group(group);
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(700))
        .sample_size(20);
    g.bench_function(BenchmarkId::new(name, "primal"), |b| {
        b.iter(|| a.primal().expect("primal"))
    });
    g.bench_function(BenchmarkId::new(name, "grad"), |b| {
        b.iter(|| a.grad().expect("grad"))
    });
    g.bench_function(BenchmarkId::new(name, "jvp"), |b| {
        b.iter(|| a.jvp().expect("jvp"))
    });
    g.bench_function(BenchmarkId::new(name, "hvp"), |b| {
        b.iter(|| a.hvp().expect("hvp"))
    });
    g.finish();
    let t = [
        median(|| {
            black_box(a.primal().is_ok());
        }),
        median(|| {
            black_box(a.grad().is_ok());
        }),
        median(|| {
            black_box(a.jvp().is_ok());
        }),
        median(|| {
            black_box(a.hvp().is_ok());
        }),
    ];
    let tier = a.engine_mut().vm_mut().last_tier();
    Tiered { t, tier }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    eprintln!("load average at start: {}", load());
    let mut rows = Vec::new();
    for (case, input) in suite::cases() {
        let file = case.file;
        let ones = vec![1.0; input.params_len()];
        if let Err(e) = check_modes(&case, &ones) {
            panic!("implementations disagree, not timing: {e}");
        }
        let group = format!("modes/{file}");
        let mut interp = AdvmModes::from_case(&case).unwrap_or_else(|e| panic!("{e}"));
        let interp = time_advm(&mut c, &group, "interp", &mut interp);
        let mut jit = AdvmModes::from_case(&case).unwrap_or_else(|e| panic!("{e}"));
        jit::install(jit.engine_mut().vm_mut());
        let jit = time_advm(&mut c, &group, "jit", &mut jit);

        let mut native = Native::new();
        let mut dual = EchidnaDual::new(&input);
        let mut ehvp = EchidnaHvp::new(&input);
        let (mut g, mut hv) = (ones.clone(), ones.clone());
        let mut grp = c.benchmark_group(&group);
        grp.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(700))
            .sample_size(20);
        grp.bench_function("native/primal", |b| {
            b.iter(|| native.primal(black_box(&input)))
        });
        grp.bench_function("native/tangent", |b| {
            b.iter(|| native.jvp(black_box(&input), black_box(&ones)))
        });
        grp.bench_function("native/hvp", |b| {
            b.iter(|| native.hvp(black_box(&input), black_box(&ones), &mut g, &mut hv))
        });
        grp.bench_function("echidna/dual", |b| b.iter(|| dual.jvp(black_box(&ones))));
        grp.bench_function("echidna/hvp", |b| {
            b.iter(|| ehvp.hvp(black_box(&ones), &mut g, &mut hv))
        });
        grp.finish();
        let np = median(|| {
            black_box(native.primal(black_box(&input)));
        });
        let nt = median(|| {
            black_box(native.jvp(black_box(&input), black_box(&ones)));
        });
        let nh = median(|| {
            black_box(native.hvp(black_box(&input), black_box(&ones), &mut g, &mut hv));
        });
        let ed = median(|| {
            black_box(dual.jvp(black_box(&ones)));
        });
        let eh = median(|| {
            black_box(ehvp.hvp(black_box(&ones), &mut g, &mut hv));
        });
        rows.push((file, interp, jit, [np, nt, nh, ed, eh]));
    }
    eprintln!("load average at end: {}", load());
    let ns = |t: f64| {
        if t >= 10_000.0 {
            format!("{:.1} µs", t / 1000.0)
        } else {
            format!("{t:.0} ns")
        }
    };
    println!("\nTimes (medians; advm with respect to every f64 and f64[] parameter, direction all ones):\n");
    println!("| program | primal | grad | jvp | hvp | jit primal | jit grad | jit jvp | jit hvp (tier) | native primal | native tangent | native hvp | echidna dual | echidna hvp |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (file, i, j, n) in &rows {
        let tier = if j.tier == Tier::Native {
            "jit"
        } else {
            "interp"
        };
        println!(
            "| {file} | {} | {} | {} | {} | {} | {} | {} | {} ({tier}) | {} | {} | {} | {} | {} |",
            ns(i.t[0]),
            ns(i.t[1]),
            ns(i.t[2]),
            ns(i.t[3]),
            ns(j.t[0]),
            ns(j.t[1]),
            ns(j.t[2]),
            ns(j.t[3]),
            ns(n[0]),
            ns(n[1]),
            ns(n[2]),
            ns(n[3]),
            ns(n[4]),
        );
    }
    println!("\nRatios:\n");
    println!("| program | jvp / primal | hvp / grad | jit jvp / primal | jit hvp / grad | native tangent / primal | echidna dual / native primal | jvp / native tangent | jit jvp / native tangent | hvp / native hvp | jit hvp / native hvp | echidna dual / native tangent | echidna hvp / native hvp |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut jp = Vec::new();
    for (file, i, j, n) in &rows {
        jp.push(i.t[2] / i.t[0]);
        println!(
            "| {file} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            i.t[2] / i.t[0],
            i.t[3] / i.t[1],
            j.t[2] / j.t[0],
            j.t[3] / j.t[1],
            n[1] / n[0],
            n[3] / n[0],
            i.t[2] / n[1],
            j.t[2] / n[1],
            i.t[3] / n[2],
            j.t[3] / n[2],
            n[3] / n[1],
            n[4] / n[2],
        );
    }
    jp.sort_by(|a, b| a.total_cmp(b));
    println!(
        "\njvp / primal (interpreter): median {:.2}, worst {:.2}; hvp / grad worst {:.2}",
        jp[jp.len() / 2],
        jp[jp.len() - 1],
        rows.iter()
            .map(|(_, i, _, _)| i.t[3] / i.t[1])
            .fold(0.0, f64::max)
    );
    c.final_summary();
}
