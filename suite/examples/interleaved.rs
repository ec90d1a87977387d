//! The suite's times measured *interleaved*, a cross-check of the criterion
//! table that is robust to the slow phases of a shared 2-core VM: for every
//! program, `rounds` rounds each time all six implementations for a short
//! burst (~`burst_ms`), one after the other; a slow phase then hits all six
//! alike instead of whichever criterion happened to be timing. Prints the
//! per-implementation median over rounds in the format of `example table`.
//!
//! ```text
//! cargo run -p suite --features peers --release --example interleaved [rounds] [burst_ms]
//! ```
//!
//! Defaults: 15 rounds of 20 ms bursts, about 15 s in all.

use std::hint::black_box;
use std::time::{Duration, Instant};
use suite::advm::Advm;
use suite::native::Native;
use suite::peers::{EchidnaPeer, ReversePeer};
use suite::report::tables;
use suite::{cases, check_agreement};

/// ns per call of `f`, timed over at least `burst` (after a calibration
/// that picks a batch size of roughly 1 ms).
fn burst(mut f: impl FnMut() -> f64, burst: Duration) -> f64 {
    let mut batch = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            black_box(f());
        }
        if t.elapsed() >= Duration::from_millis(1) {
            break;
        }
        batch *= 2;
    }
    let start = Instant::now();
    let mut calls = 0;
    while start.elapsed() < burst {
        for _ in 0..batch {
            black_box(f());
        }
        calls += batch;
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: usize = match args.first() {
        Some(s) => s.parse().map_err(|e| format!("rounds: {e}"))?,
        None => 15,
    };
    let ms: u64 = match args.get(1) {
        Some(s) => s.parse().map_err(|e| format!("burst_ms: {e}"))?,
        None => 20,
    };
    let b = Duration::from_millis(ms);
    let mut rows = Vec::new();
    for (case, input) in cases() {
        check_agreement(&case)?;
        let mut advm = Advm::from_case(&case)?;
        let mut native = Native::new();
        let mut rev = ReversePeer::new();
        let mut ech = EchidnaPeer::new(&input);
        let mut g = vec![0.0; input.grad_len()];
        let mut times: [Vec<f64>; 6] = Default::default();
        for _ in 0..rounds {
            times[0].push(burst(|| advm.primal().expect("advm primal"), b));
            times[1].push(burst(|| advm.grad().expect("advm gradient"), b));
            times[2].push(burst(|| native.primal(black_box(&input)), b));
            times[3].push(burst(|| native.grad(black_box(&input), &mut g), b));
            times[4].push(burst(|| rev.grad(black_box(&input), &mut g), b));
            times[5].push(burst(|| ech.grad(&mut g), b));
        }
        rows.push((case.file, times.map(|mut t| Some(median(&mut t)))));
    }
    println!("Interleaved medians ({rounds} rounds of {ms} ms bursts):\n");
    print!("{}", tables(&rows));
    Ok(())
}
