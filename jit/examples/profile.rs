//! A loop of gradient (or primal) calls of one suite program in the
//! native tier, to run under a profiler:
//! `cargo build --release -p advm-jit --example profile`, then
//! `perf record -g target/release/examples/profile powloop grad 200000`.

use ad::{Engine, Gradient};
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map_or("powloop", String::as_str);
    let what = args.get(2).map_or("grad", String::as_str);
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let Some((case, _)) = suite::cases().into_iter().find(|(c, _)| c.file == name) else {
        eprintln!("no suite program {name}");
        std::process::exit(64);
    };
    let path = format!("programs/bench/{name}.adasm");
    let src = testkit::read_program(&path);
    let module = match assembler::assemble(&src, &path) {
        Ok(m) => m,
        Err(d) => {
            eprintln!("{d}");
            std::process::exit(2);
        }
    };
    let Ok(mut e) = Engine::new(module) else {
        eprintln!("{path}: does not verify");
        std::process::exit(2);
    };
    if !args.iter().any(|a| a == "--no-jit") {
        jit::install(e.vm_mut());
    }
    let Some(f) = e.find(case.func) else {
        eprintln!("{path}: no function {}", case.func);
        std::process::exit(64);
    };
    let mut out = Gradient::default();
    for _ in 0..n {
        if what == "grad" {
            black_box(e.grad_into(f, &case.args, &mut out).is_ok());
        } else {
            black_box(e.run(f, &case.args).is_ok());
        }
    }
}
