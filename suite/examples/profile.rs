//! Run one implementation of one suite program in a loop, for profiling
//! (`perf record`, `valgrind --tool=callgrind`), and print ns per call and,
//! for advm, instructions per call and ns per instruction.
//!
//! ```text
//! cargo build -p suite --release --example profile
//! target/release/examples/profile powloop advm_grad 3
//! perf record -g target/release/examples/profile powloop advm_grad 3
//! valgrind --tool=callgrind target/release/examples/profile powloop advm_grad 0.2
//! ```
//!
//! Arguments: program (`sincos`, `powloop`, ...; `all` for every one), what
//! (`advm_primal`, `advm_grad`, `native_primal`, `native_adjoint`,
//! `reverse`, `echidna`, `counts` to print instruction counts only),
//! seconds (default 2).

use std::hint::black_box;
use std::time::{Duration, Instant};
use suite::advm::Advm;
use suite::native::Native;
use suite::peers::{EchidnaPeer, ReversePeer};
use suite::{cases, Input};

fn run(what: &str, advm: &mut Advm, input: &Input, seconds: f64) -> Result<f64, String> {
    let mut native = Native::new();
    let mut rev = ReversePeer::new();
    let mut ech = EchidnaPeer::new(input);
    let mut g = vec![0.0; input.grad_len()];
    let mut step: Box<dyn FnMut() -> f64> = match what {
        "advm_primal" => Box::new(|| advm.primal().expect("advm primal")),
        "advm_grad" => Box::new(|| advm.grad().expect("advm gradient")),
        "native_primal" => Box::new(|| native.primal(black_box(input))),
        "native_adjoint" => Box::new(|| native.grad(black_box(input), &mut g)),
        "reverse" => Box::new(|| rev.grad(black_box(input), &mut g)),
        "echidna" => Box::new(|| ech.grad(&mut g)),
        other => return Err(format!("unknown implementation {other}")),
    };
    let budget = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < budget {
        for _ in 0..16 {
            black_box(step());
        }
        calls += 16;
    }
    Ok(start.elapsed().as_nanos() as f64 / calls as f64)
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let program = args.first().map(String::as_str).unwrap_or("all");
    let what = args.get(1).map(String::as_str).unwrap_or("counts");
    let seconds: f64 = match args.get(2) {
        Some(s) => s.parse().map_err(|e| format!("seconds: {e}"))?,
        None => 2.0,
    };
    for (case, input) in cases() {
        if program != "all" && program != case.file {
            continue;
        }
        let mut advm = Advm::from_case(&case)?;
        let counts = advm.instruction_counts()?;
        let ns = if what == "counts" {
            None
        } else {
            Some(run(what, &mut advm, &input, seconds)?)
        };
        let per_instr = match (what, ns) {
            ("advm_primal", Some(ns)) => format!(", {:.2} ns/instr", ns / counts.primal as f64),
            ("advm_grad", Some(ns)) => format!(
                ", {:.2} ns/instr",
                ns / (counts.forward + counts.reverse) as f64
            ),
            _ => String::new(),
        };
        let time = ns
            .map(|ns| format!(": {ns:.1} ns/call"))
            .unwrap_or_default();
        println!(
            "{:10} {what}{time}{per_instr} (instructions: primal {}, forward {}, reverse {})",
            case.file, counts.primal, counts.forward, counts.reverse
        );
    }
    Ok(())
}
