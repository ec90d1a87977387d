//! The compile-time corpus shared by the `native` bench and the `compile`
//! binary: every `programs/**/*.adasm` (but `programs/reference/`), with
//! its user functions' gradients derived.

use ad::Engine;
use jit::CompileTime;
use std::time::Duration;
use vm::bytecode::Program;

/// Every corpus program that assembles and verifies, as a program holding
/// its user functions and their derived (forward and reverse) functions.
pub fn programs() -> Vec<Program> {
    let mut paths = Vec::new();
    let root = testkit::workspace_root().join("programs");
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "reference") {
                    dirs.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "adasm") {
                paths.push(p);
            }
        }
    }
    paths.sort();
    let mut progs = Vec::new();
    for p in paths {
        let Ok(src) = std::fs::read_to_string(&p) else {
            continue;
        };
        let Ok(module) = assembler::assemble(&src, "corpus") else {
            continue;
        };
        let Ok(mut e) = Engine::new(module) else {
            continue;
        };
        let n = e.module().funcs.len();
        for i in 0..n {
            let _ = e.derive(vm::ir::FuncId(i as u32));
        }
        progs.push(e.program().clone());
    }
    progs
}

/// Compile every function of every program in a fresh tier per program;
/// the compile time of each function (bodies and entry trampolines).
pub fn compile_times(progs: &[Program]) -> Vec<CompileTime> {
    let mut times = Vec::new();
    for prog in progs {
        let mut j = jit::Jit::eager();
        for i in 0..prog.len() {
            let _ = j.prepare(prog, vm::ir::FuncId(i as u32));
        }
        times.extend_from_slice(j.compile_times());
    }
    times
}

/// `q`-quantile (0..=1) of `xs` (sorted here), or zero when empty.
pub fn quantile(xs: &mut [Duration], q: f64) -> Duration {
    xs.sort();
    if xs.is_empty() {
        return Duration::ZERO;
    }
    let k = ((xs.len() - 1) as f64 * q).round() as usize;
    xs[k]
}

/// One line per kind of function (bodies, trampolines, both): how many,
/// and the median and 90th percentile of wall-clock and CPU time.
pub fn summary(times: &[CompileTime]) -> String {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut out = String::new();
    type Keep = dyn Fn(&CompileTime) -> bool;
    let kinds: [(&str, &Keep); 5] = [
        ("function bodies", &|t| !t.trampoline),
        ("  loop-free (cheap settings)", &|t| {
            !t.trampoline && t.cheap
        }),
        ("  with loops", &|t| !t.trampoline && !t.cheap),
        ("entry trampolines", &|t| t.trampoline),
        ("bodies and trampolines", &|_| true),
    ];
    for (name, keep) in kinds {
        let sel: Vec<&CompileTime> = times.iter().filter(|t| keep(t)).collect();
        let mut wall: Vec<Duration> = sel.iter().map(|t| t.wall).collect();
        let mut cpu: Vec<Duration> = sel.iter().filter_map(|t| t.cpu).collect();
        let mut tr: Vec<Duration> = sel.iter().map(|t| t.translate).collect();
        let mut insts: Vec<Duration> = sel
            .iter()
            .map(|t| Duration::from_nanos(t.insts as u64))
            .collect();
        out.push_str(&format!(
            "{name}: {}; IR instructions median {}; translation median {:.1} µs; wall median {:.1} µs, p90 {:.1} µs; CPU median {:.1} µs, p90 {:.1} µs, total {:.1} ms\n",
            sel.len(),
            quantile(&mut insts, 0.5).as_nanos(),
            us(quantile(&mut tr, 0.5)),
            us(quantile(&mut wall, 0.5)),
            us(quantile(&mut wall, 0.9)),
            us(quantile(&mut cpu, 0.5)),
            us(quantile(&mut cpu, 0.9)),
            cpu.iter().sum::<Duration>().as_secs_f64() * 1e3,
        ));
    }
    out
}
