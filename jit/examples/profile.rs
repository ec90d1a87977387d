//! A loop of gradient (or primal) calls of one suite program in the
//! native tier, to run under a profiler:
//! `cargo build --release -p advm-jit --example profile`, then
//! `perf record -g target/release/examples/profile powloop grad 200000`.
//! As the `native` bench runs them (`suite::advm::Advm`): the primal by
//! `Vm::call_raw`, the gradient with respect to the inputs the native
//! adjoint differentiates. `--no-jit` runs the interpreter instead,
//! `--if-convert` derives from if-converted code, `--eager` compiles
//! small loop-free calls too (`jit::install_eager`). With `ADVM_SRC` set
//! to a file, that file's listing replaces the program's (same function
//! and arguments), to time a variant of it.

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
    let made = match std::env::var("ADVM_SRC") {
        Ok(path) => std::fs::read_to_string(&path)
            .map_err(|e| format!("{path}: {e}"))
            .and_then(|src| {
                let wrt = suite::Input::from_case(&case).wrt();
                Advm::from_source(&src, &path, case.func, case.args.clone(), wrt)
            }),
        Err(_) => Advm::from_case(&case),
    };
    let mut a = match made {
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
