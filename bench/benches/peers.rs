//! advm's gradient in both tiers against the peer AD crates (`reverse`,
//! `echidna`) and the hand-written native adjoint, on the seven suite
//! programs, measured in one run and printed as a table of medians and
//! ratios (docs/benchmarks.md, *Native tier*). No criterion: each figure
//! is the median over batches of about a millisecond, and the programs are
//! measured in three interleaved rounds (the median of the three is
//! printed), so that a burst of load on the shared machine moves all
//! implementations alike.
//!
//! The peers are meant to be measured at their best, built as a user who
//! cares about speed builds them (fat LTO, one codegen unit, so that
//! `reverse`'s small operator methods are inlined across the crate
//! boundary):
//!
//! ```text
//! CARGO_PROFILE_BENCH_LTO=fat CARGO_PROFILE_BENCH_CODEGEN_UNITS=1 \
//!     cargo bench -p advm-bench --features peers --bench peers
//! ```
//!
//! (the same settings apply to advm itself). Every implementation's
//! gradient is checked against the others (`suite::check_agreement`) first.

use std::hint::black_box;
use std::time::{Duration, Instant};
use suite::advm::Advm;
use suite::native::Native;
use suite::peers::{EchidnaPeer, ReversePeer};
use suite::{cases, check_agreement};
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

/// The middle of three.
fn mid(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    // Under `cargo bench`, arguments such as `--bench` are passed: a
    // filter is any other argument.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    eprintln!("load average at start: {}", load());
    let mut rows: Vec<(&str, Tier, [Vec<f64>; 5])> = Vec::new();
    let mut setups = Vec::new();
    for (case, input) in cases() {
        if !filter.is_empty() && !filter.iter().any(|f| case.file.contains(f.as_str())) {
            continue;
        }
        if let Err(e) = check_agreement(&case) {
            panic!("implementations disagree, not timing: {e}");
        }
        let interp = Advm::from_case(&case).unwrap_or_else(|e| panic!("{e}"));
        let mut jit = Advm::from_case(&case).unwrap_or_else(|e| panic!("{e}"));
        jit::install(jit.engine_mut().vm_mut());
        jit.grad().expect("advm gradient (jit)");
        let tier = jit.engine_mut().vm_mut().last_tier();
        let native = Native::new();
        let rev = ReversePeer::new();
        let ech = EchidnaPeer::new(&input);
        let g = vec![0.0; input.grad_len()];
        rows.push((case.file, tier, Default::default()));
        setups.push((input, jit, interp, native, rev, ech, g));
    }
    for _round in 0..3 {
        for (k, (input, jit, interp, native, rev, ech, g)) in setups.iter_mut().enumerate() {
            let t = &mut rows[k].2;
            t[0].push(median(|| {
                black_box(jit.grad().is_ok());
            }));
            t[1].push(median(|| {
                black_box(interp.grad().is_ok());
            }));
            t[2].push(median(|| {
                black_box(rev.grad(black_box(input), black_box(g)));
            }));
            t[3].push(median(|| {
                black_box(ech.grad(black_box(g)));
            }));
            t[4].push(median(|| {
                black_box(native.grad(black_box(input), black_box(g)));
            }));
        }
    }
    eprintln!("load average at end: {}", load());
    println!("\n| program | advm tier | advm grad | advm grad (interp) | reverse | echidna | native adjoint | advm / reverse | advm / echidna | advm / native adjoint |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (file, tier, t) in rows {
        let [a, i, r, e, n] = t.map(mid);
        let tier = if tier == Tier::Native {
            "jit"
        } else {
            "interp"
        };
        println!(
            "| {file} | {tier} | {a:.0} ns | {i:.0} ns | {r:.0} ns | {e:.0} ns | {n:.0} ns | {:.2} | {:.2} | {:.2} |",
            a / r,
            a / e,
            a / n
        );
    }
}
