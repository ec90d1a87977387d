//! A loop of gradient (or primal) calls of one suite program in the
//! native tier, to run under a profiler:
//! `cargo build --release -p advm-jit --example profile`, then
//! `perf record -g target/release/examples/profile powloop grad 200000`.
//! As the `native` bench runs them (`suite::advm::Advm`): the primal by
//! `Vm::call_raw`, the gradient with respect to the inputs the native
//! adjoint differentiates. `--no-jit` runs the interpreter instead,
//! `--if-convert` derives from if-converted code, `--eager` compiles
//! small loop-free calls too (`jit::install_eager`).

use std::hint::black_box;
use suite::advm::Advm;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map_or("powloop", String::as_str);
    let what = args.get(2).map_or("grad", String::as_str);
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let Some((case, _)) = suite::cases().into_iter().find(|(c, _)| c.file == name) else {
        eprintln!("no suite program {name}");
        std::process::exit(64);
    };
    let mut a = match Advm::from_case(&case) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    a.engine_mut()
        .set_if_conversion(args.iter().any(|s| s == "--if-convert"));
    if args.iter().any(|s| s == "--eager") {
        jit::install_eager(a.engine_mut().vm_mut());
        jit::install_eager(a.primal_vm_mut());
    } else if !args.iter().any(|s| s == "--no-jit") {
        jit::install(a.engine_mut().vm_mut());
        jit::install(a.primal_vm_mut());
    }
    for _ in 0..n {
        if what == "grad" {
            black_box(a.grad().is_ok());
        } else {
            black_box(a.primal().is_ok());
        }
    }
}
