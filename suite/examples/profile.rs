//! Run one implementation of one suite program in a loop, for profiling
//! (`perf record`, `valgrind --tool=callgrind`), and print ns per call and,
//! for advm, instructions per call and ns per instruction.
//!
//! ```text
//! cargo build -p suite --features peers --release --example profile
//! target/release/examples/profile powloop advm_grad 3
//! perf record -g target/release/examples/profile powloop advm_grad 3
//! valgrind --tool=callgrind target/release/examples/profile powloop advm_grad 1000x
//! ```
//!
//! Arguments: program (`sincos`, `powloop`, ...; `all` for every one), what
//! (`advm_primal`, `advm_primal_in_vm`, `advm_grad`, `modes_primal`,
//! `modes_grad`, `modes_jvp`, `modes_hvp` (the calls of the modes bench:
//! every f64 and f64[] parameter, along all ones), `native_primal`,
//! `native_adjoint`, `reverse`, `echidna`, `counts` to print instruction
//! counts only),
//! seconds (default 2), or a call count written `N x` (`1000x`): exactly N
//! calls, a deterministic workload for callgrind (subtract a `0x` run to
//! remove the set-up).
//!
//! `advm_primal_in_vm` calls the function from a loop in the VM
//! ([`suite::advm::InVmLoop`]), 1000 calls per host call, and reports ns
//! per call of the function: the way `suite/lua/` times Lua (a call from
//! interpreted code), for the comparison with LuaJIT's interpreter.

use std::hint::black_box;
use std::time::{Duration, Instant};
use suite::advm::{Advm, InVmLoop};
use suite::modes::AdvmModes;
use suite::native::Native;
use suite::peers::{EchidnaPeer, ReversePeer};
use suite::{cases, Input};
use testkit::suite::Case;

/// Calls of the function per host call in `advm_primal_in_vm`.
const IN_VM_REPS: u64 = 1000;
/// Bytecode instructions of the in-VM loop per call: `call`, the callee's
/// `ret` is counted in the primal's, then the step-and-branch.
const IN_VM_LOOP_INSTRS: u64 = 2;

/// How long to run: seconds, or exactly this many calls.
#[derive(Clone, Copy)]
enum Budget {
    Seconds(f64),
    Calls(u64),
}

fn run(
    what: &str,
    case: &Case,
    advm: &mut Advm,
    input: &Input,
    budget: Budget,
) -> Result<f64, String> {
    let mut native = Native::new();
    let mut rev = ReversePeer::new();
    let mut ech = EchidnaPeer::new(input);
    let mut g = vec![0.0; input.grad_len()];
    // Calls of the function per step (the in-VM loop makes many).
    let mut per_step = 1u64;
    let mut step: Box<dyn FnMut() -> f64> = match what {
        "advm_primal" => Box::new(|| advm.primal().expect("advm primal")),
        "advm_primal_in_vm" => {
            per_step = IN_VM_REPS;
            let mut l = InVmLoop::from_case(case)?;
            Box::new(move || l.run(IN_VM_REPS).expect("advm primal in the VM"))
        }
        "advm_grad" => Box::new(|| advm.grad().expect("advm gradient")),
        // The modes bench's four calls (`suite::modes`): with respect to
        // every f64 and f64[] parameter, along all ones.
        "modes_primal" | "modes_grad" | "modes_jvp" | "modes_hvp" => {
            let mut m = AdvmModes::from_case(case)?;
            match what {
                "modes_primal" => Box::new(move || m.primal().expect("advm primal")),
                "modes_grad" => Box::new(move || m.grad().expect("advm gradient")),
                "modes_jvp" => Box::new(move || m.jvp().expect("advm jvp").1),
                _ => Box::new(move || m.hvp().expect("advm hvp")),
            }
        }
        "native_primal" => Box::new(|| native.primal(black_box(input))),
        "native_adjoint" => Box::new(|| native.grad(black_box(input), &mut g)),
        "reverse" => Box::new(|| rev.grad(black_box(input), &mut g)),
        "echidna" => Box::new(|| ech.grad(&mut g)),
        other => return Err(format!("unknown implementation {other}")),
    };
    let start = Instant::now();
    let mut calls = 0u64;
    match budget {
        Budget::Seconds(seconds) => {
            let budget = Duration::from_secs_f64(seconds);
            while start.elapsed() < budget {
                for _ in 0..16 {
                    black_box(step());
                }
                calls += 16;
            }
        }
        Budget::Calls(n) => {
            for _ in 0..n {
                black_box(step());
            }
            calls = n;
        }
    }
    Ok(start.elapsed().as_nanos() as f64 / (calls.max(1) * per_step) as f64)
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let program = args.first().map(String::as_str).unwrap_or("all");
    let what = args.get(1).map(String::as_str).unwrap_or("counts");
    let budget = match args.get(2) {
        Some(s) => match s.strip_suffix('x') {
            Some(n) => Budget::Calls(n.parse().map_err(|e| format!("calls: {e}"))?),
            None => Budget::Seconds(s.parse().map_err(|e| format!("seconds: {e}"))?),
        },
        None => Budget::Seconds(2.0),
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
            Some(run(what, &case, &mut advm, &input, budget)?)
        };
        let per_instr = match (what, ns) {
            ("advm_primal", Some(ns)) => format!(", {:.2} ns/instr", ns / counts.primal as f64),
            ("advm_primal_in_vm", Some(ns)) => {
                // The loop adds a call, a return and its step and branch.
                format!(
                    ", {:.2} ns/instr",
                    ns / (counts.primal + IN_VM_LOOP_INSTRS) as f64
                )
            }
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
