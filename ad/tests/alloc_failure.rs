//! Allocation failure, after SQLite's malloc tests: a test allocator
//! (`vm::alloc_count::Failing`) fails the k-th allocation after arming, and
//! an operation runs for k = 1, 2, ... until it completes with no failure
//! injected. Each run is a child process (this test binary itself, the
//! `child` test selected by `ADVM_ALLOC_FAIL`), since an allocation that
//! Rust's standard library cannot report aborts the process: the parent
//! sees the abort instead of dying of it.
//!
//! Two bars (docs/reliability.md, *Allocation failure*):
//! * allocations whose size the user controls (the VM's registers, frames,
//!   AD stacks, arrays and shadows, and the gradient's output arrays): every
//!   failure of one is a clean error (`out of memory`), never an abort, and
//!   the engine works afterwards (`user_sized_failures_are_clean_errors`);
//! * every allocation (assembly, engine construction, derivation, small
//!   messages): std's collections abort on failure, so these are surveyed:
//!   every run ends in a clean result or in std's allocation-error abort,
//!   never a panic, another signal or a wrong result
//!   (`every_allocation_fails_cleanly_or_aborts`).

#[global_allocator]
static GLOBAL: vm::alloc_count::Failing = vm::alloc_count::Failing;

use ad::Engine;
use std::process::Command;
use vm::alloc_count::{arm_failure, disarm_failure};
use vm::Value;

/// Allocations at least this large are "user-sized" in the first bar: the
/// program's small fixed structures stay below it, the arrays and stacks
/// of the scenario's 100 000-element argument above.
const USER_SIZED: usize = 64 * 1024;

const PROGRAM: &str = "programs/bench/logsumexp.adasm";

fn argument(n: usize) -> Vec<Value> {
    vec![Value::Arr(testkit::suite::sines(n))]
}

/// What one child run printed.
#[derive(Debug)]
struct Outcome {
    /// `ok`: finished without an error; `err`: a clean error.
    result: String,
    injected: bool,
    seen: u64,
    message: String,
}

/// The scenarios: `asm` assembles the program, `grad` builds an engine,
/// takes a first gradient and a warm one; `n` is the array length.
fn scenario(which: &str, src: &str, args: &[Value]) -> Result<(), String> {
    match which {
        "asm" => assembler::assemble(src, "t.adasm")
            .map(drop)
            .map_err(|d| d.to_string()),
        "grad" => {
            let module = assembler::assemble(src, "t.adasm").map_err(|d| d.to_string())?;
            grad_calls(module, args)
        }
        _ => Err(format!("unknown scenario {which}")),
    }
}

fn grad_calls(module: vm::ir::Module, args: &[Value]) -> Result<(), String> {
    let mut e = Engine::new(module).map_err(|e| e.to_string())?;
    let f = e.find("logsumexp").ok_or("no @logsumexp")?;
    let mut out = ad::Gradient::default();
    e.grad_into(f, args, &mut out).map_err(|e| e.to_string())?;
    e.grad_into(f, args, &mut out).map_err(|e| e.to_string())?;
    Ok(())
}

/// The child: run the scenario of `ADVM_ALLOC_FAIL=which:k:min_size:n`
/// with the k-th allocation of at least `min_size` bytes failing, and
/// print the outcome on one line. Without the variable it does nothing.
#[test]
fn child() {
    let Ok(spec) = std::env::var("ADVM_ALLOC_FAIL") else {
        return;
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let [which, k, min, n] = parts[..] else {
        panic!("bad ADVM_ALLOC_FAIL {spec}");
    };
    let k: u64 = k.parse().expect("k");
    let min: usize = min.parse().expect("min_size");
    let n: usize = n.parse().expect("n");
    let src = testkit::read_program(PROGRAM);
    let args = argument(n);
    // The reference gradient, with nothing armed.
    let reference = {
        let module = assembler::assemble(&src, "t.adasm").expect("assembles");
        let mut e = Engine::new(module).expect("engine");
        let f = e.find("logsumexp").expect("exists");
        e.grad(f, &args).expect("gradient")
    };
    arm_failure(k, min);
    let r = scenario(which, &src, &args);
    let (seen, injected) = disarm_failure();
    // After a failure the library still works: a clean engine, and the
    // gradient equal to the reference.
    if which == "grad" {
        let module = assembler::assemble(&src, "t.adasm").expect("assembles");
        let mut e = Engine::new(module).expect("engine");
        let f = e.find("logsumexp").expect("exists");
        let g = e.grad(f, &args).expect("gradient after the failure");
        assert_eq!(g.value.to_bits(), reference.value.to_bits());
        assert_eq!(g.grad, reference.grad);
    }
    let (result, message) = match r {
        Ok(()) => ("ok", String::new()),
        Err(m) => ("err", m.replace('\n', " ")),
    };
    println!("ALLOC-OUTCOME {result} injected={injected} seen={seen} {message}");
}

enum Run {
    Clean(Outcome),
    /// std's allocation-error handler aborted the process.
    Aborted,
}

fn run_child(which: &str, k: u64, min: usize, n: usize) -> Run {
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(exe)
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("ADVM_ALLOC_FAIL", format!("{which}:{k}:{min}:{n}"))
        .output()
        .expect("child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The harness writes `test child ... ` before the line, without a
    // newline.
    if let Some(line) = stdout
        .lines()
        .find_map(|l| l.find("ALLOC-OUTCOME ").map(|at| &l[at..]))
    {
        assert!(out.status.success(), "{which} k={k}: {stdout}\n{stderr}");
        let mut it = line.splitn(5, ' ').skip(1);
        let result = it.next().unwrap_or_default().to_string();
        let injected = it.next() == Some("injected=true");
        let seen = it
            .next()
            .and_then(|s| s.strip_prefix("seen="))
            .and_then(|s| s.parse().ok())
            .expect("seen");
        let message = it.next().unwrap_or_default().to_string();
        return Run::Clean(Outcome {
            result,
            injected,
            seen,
            message,
        });
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if out.status.signal() == Some(6) && stderr.contains("memory allocation of") {
            return Run::Aborted;
        }
    }
    panic!(
        "{which} k={k} min={min}: neither an outcome nor std's allocation abort \
         ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

/// Run `which` for k = 1, 2, ... (every `stride`-th k when the uninjected
/// run counts more than `max_runs` allocations), until a run injects
/// nothing. Returns the outcomes of the runs that injected a failure
/// (aborts as `None`), and the allocations counted without failure.
fn sweep(which: &str, min: usize, n: usize, max_runs: u64) -> (Vec<Option<Outcome>>, u64) {
    let total = match run_child(which, u64::MAX, min, n) {
        Run::Clean(o) => {
            assert!(!o.injected && o.result == "ok", "{which}: {o:?}");
            o.seen
        }
        Run::Aborted => panic!("{which}: aborted with nothing injected"),
    };
    let stride = total.div_ceil(max_runs).max(1);
    let mut runs = Vec::new();
    let mut k = 1;
    loop {
        match run_child(which, k, min, n) {
            Run::Clean(o) if !o.injected => {
                assert_eq!(o.result, "ok", "{which} k={k}: {o:?}");
                assert!(k > total, "{which}: k={k} injected nothing of {total}");
                break;
            }
            Run::Clean(o) => runs.push(Some(o)),
            Run::Aborted => runs.push(None),
        }
        // The last counted allocation is always tried.
        k = if k < total {
            (k + stride).min(total)
        } else {
            k + 1
        };
    }
    (runs, total)
}

/// The first bar: every failure of a user-sized allocation (the VM's
/// stores, the arrays, the gradient's output) in building an engine, a
/// first gradient and a warm one is a clean `out of memory` error.
#[test]
fn user_sized_failures_are_clean_errors() {
    let (runs, total) = sweep("grad", USER_SIZED, 100_000, 1000);
    assert!(
        total >= 4,
        "the scenario makes user-sized allocations: {total}"
    );
    assert_eq!(runs.len() as u64, total);
    for (k, o) in runs.iter().enumerate() {
        let o = o
            .as_ref()
            .unwrap_or_else(|| panic!("user-sized allocation {} aborted", k + 1));
        assert_eq!(
            o.result,
            "err",
            "allocation {} failed unnoticed: {o:?}",
            k + 1
        );
        assert!(
            o.message.contains("out of memory"),
            "allocation {}: {}",
            k + 1,
            o.message
        );
    }
}

/// The second bar: with every allocation candidate, a run ends in a
/// result (a clean error, or success where the failed allocation was
/// recovered from) or in std's allocation abort: never a panic, another
/// signal or a wrong gradient (the child compares it). Prints the counts
/// (`--nocapture`).
#[test]
fn every_allocation_fails_cleanly_or_aborts() {
    // The two surveys' child processes run side by side (each waits on its
    // children, one at a time).
    let surveys = std::thread::scope(|s| {
        let asm = s.spawn(|| sweep("asm", 0, 16, 40));
        let grad = s.spawn(|| sweep("grad", 0, 16, 40));
        [("asm", asm.join()), ("grad", grad.join())]
    });
    for (which, survey) in surveys {
        let (runs, total) = survey.unwrap_or_else(|e| std::panic::resume_unwind(e));
        let aborts = runs.iter().filter(|o| o.is_none()).count();
        let clean = runs.len() - aborts;
        println!(
            "{which}: {total} allocations, {} failures injected: {clean} clean, {aborts} aborts",
            runs.len()
        );
        assert!(!runs.is_empty());
    }
}
