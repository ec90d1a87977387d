//! Allocation failure, after SQLite's malloc tests: a test allocator
//! (`vm::alloc_count::Failing`) fails the k-th allocation after arming, and
//! an operation runs for k = 1, 2, ... until it completes with no failure
//! injected. Each run is a child process (this test binary itself, the
//! `child` test selected by `ADVM_ALLOC_FAIL`), so that an abort, were
//! there one, would be seen by the parent instead of killing it.
//!
//! The global allocator is `Reserve<Failing>`: the reserve sits outside
//! the failing allocator, so that an injected failure inside a compile
//! section (`vm::oom`) is served from the reserve and becomes the error
//! `out of memory` of the section, as a real one would.
//!
//! Two bars (docs/reliability.md, *Allocation failure*):
//! * allocations whose size the user controls (the VM's registers, frames,
//!   AD stacks, arrays and shadows, and the gradient's output arrays): every
//!   failure of one is the trap `out of memory`, at its instruction, and
//!   the engine works afterwards (`user_sized_failures_are_clean_errors`);
//! * every allocation (assembly, engine construction, derivation, a
//!   call's bookkeeping): every failure is a clean result (an error, or
//!   success where the failed allocation was recovered from), never an
//!   abort, a panic or a wrong gradient
//!   (`every_allocation_failure_is_a_clean_error`).

#[global_allocator]
static GLOBAL: vm::alloc_count::Reserve<vm::alloc_count::Failing> =
    vm::alloc_count::Reserve::new(vm::alloc_count::Failing);

use ad::Engine;
use std::process::Command;
use vm::alloc_count::{arm_failure, disarm_failure, reserve_in_use, reserve_served};
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
    /// Requests served from the reserve (`vm::alloc_count::reserve_served`).
    served: u64,
    message: String,
}

/// The scenarios: `asm` assembles the program, `grad` builds an engine,
/// takes a first gradient and a warm one; `n` is the array length. When a
/// gradient fails, `again` gets the gradient the same engine computes
/// next.
fn scenario(
    which: &str,
    src: &str,
    args: &[Value],
    again: &mut Option<Result<ad::Gradient, String>>,
) -> Result<(), String> {
    match which {
        "asm" => assembler::assemble(src, "t.adasm")
            .map(drop)
            .map_err(|d| d.to_string()),
        "grad" => {
            let module = assembler::assemble(src, "t.adasm").map_err(|d| d.to_string())?;
            grad_calls(module, args, again)
        }
        _ => Err(format!("unknown scenario {which}")),
    }
}

fn grad_calls(
    module: vm::ir::Module,
    args: &[Value],
    again: &mut Option<Result<ad::Gradient, String>>,
) -> Result<(), String> {
    let mut e = Engine::new(module).map_err(|e| e.to_string())?;
    let f = e.find("logsumexp").ok_or("no @logsumexp")?;
    let mut out = ad::Gradient::default();
    for _ in 0..2 {
        if let Err(err) = e.grad_into(f, args, &mut out) {
            // The engine works after the failure (what a failed derivation
            // built is rolled back).
            *again = Some(e.grad(f, args).map_err(|e| e.to_string()));
            return Err(err.to_string());
        }
    }
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
    let served_before = reserve_served();
    arm_failure(k, min);
    let mut again = None;
    let r = scenario(which, &src, &args, &mut again);
    let (seen, injected) = disarm_failure();
    let served = reserve_served() - served_before;
    // What the scenario made is dropped: nothing of the reserve is held
    // (it is reset for the next failure).
    if let Some(g) = again {
        let g = g.expect("the same engine, after the failure");
        assert_eq!(g.value.to_bits(), reference.value.to_bits());
        assert_eq!(g.grad, reference.grad);
    }
    assert_eq!(
        reserve_in_use(),
        (0, 0),
        "{which} k={k}: the reserve still holds blocks"
    );
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
    println!("ALLOC-OUTCOME {result} injected={injected} seen={seen} served={served} {message}");
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
        let mut it = line.splitn(6, ' ').skip(1);
        let result = it.next().unwrap_or_default().to_string();
        let injected = it.next() == Some("injected=true");
        let mut number = |name: &str| -> u64 {
            it.next()
                .and_then(|s| s.strip_prefix(name))
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {line}"))
        };
        let seen = number("seen=");
        let served = number("served=");
        let message = it.next().unwrap_or_default().to_string();
        return Run::Clean(Outcome {
            result,
            injected,
            seen,
            served,
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
/// (each with its k; aborts as `None`), and the allocations counted without
/// failure.
fn sweep(which: &str, min: usize, n: usize, max_runs: u64) -> (Vec<(u64, Option<Outcome>)>, u64) {
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
            Run::Clean(o) => runs.push((k, Some(o))),
            Run::Aborted => runs.push((k, None)),
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
    for (k, o) in &runs {
        let o = o
            .as_ref()
            .unwrap_or_else(|| panic!("user-sized allocation {k} aborted"));
        assert_eq!(o.result, "err", "allocation {k} failed unnoticed: {o:?}");
        assert!(
            o.message.contains("out of memory"),
            "allocation {k}: {}",
            o.message
        );
        // Fallible (`try_reserve`, bypassing the reserve): the failure is
        // the allocation's own trap, not the section's.
        assert_eq!(o.served, 0, "allocation {k} served from the reserve: {o:?}");
    }
}

/// The second bar: with every allocation candidate, every run ends in a
/// clean result: an error (`out of memory`, from the reserve's section or
/// a run's trap), or success where the failed allocation was recovered
/// from; never an abort, a panic, another signal or a wrong gradient (the
/// child compares it). Every k is tried (a few seconds: one child process
/// per k); `ADVM_ALLOC_FAIL_RUNS=N` tries at most N values per scenario,
/// evenly spaced, the first and the last included. Prints the counts
/// (`--nocapture`).
#[test]
fn every_allocation_failure_is_a_clean_error() {
    let max_runs = std::env::var("ADVM_ALLOC_FAIL_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX);
    // The two surveys' child processes run side by side (each waits on its
    // children, one at a time).
    let surveys = std::thread::scope(|s| {
        let asm = s.spawn(|| sweep("asm", 0, 16, max_runs));
        let grad = s.spawn(|| sweep("grad", 0, 16, max_runs));
        [("asm", asm.join()), ("grad", grad.join())]
    });
    for (which, survey) in surveys {
        let (runs, total) = survey.unwrap_or_else(|e| std::panic::resume_unwind(e));
        let clean: Vec<&Outcome> = runs.iter().filter_map(|(_, o)| o.as_ref()).collect();
        let aborts = runs.len() - clean.len();
        let errors = clean.iter().filter(|o| o.result == "err").count();
        let served = clean
            .iter()
            .filter(|o| o.result == "err" && o.served > 0)
            .count();
        println!(
            "{which}: {total} allocations, {} failures injected: {errors} errors \
             ({served} served from the reserve, {} trapped at their instruction), {} ok, \
             {aborts} aborts",
            runs.len(),
            errors - served,
            clean.len() - errors,
        );
        assert!(!runs.is_empty());
        for (k, o) in &runs {
            let o = o
                .as_ref()
                .unwrap_or_else(|| panic!("{which} k={k}: aborted"));
            assert!(
                o.result == "ok" || o.message.contains("out of memory"),
                "{which} k={k}: an error other than out of memory: {o:?}"
            );
        }
    }
}
