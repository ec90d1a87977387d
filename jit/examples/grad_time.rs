//! Time the gradient of one function in both tiers in the same process:
//! `grad_time FILE.adasm FN ARGS.json WRT [MS]`, where `ARGS.json` holds the
//! arguments as a JSON array (numbers for f64, integers for i64, arrays
//! for f64[]) and `WRT` is a comma-separated list of parameter indices to
//! differentiate with respect to. Prints one line per tier: the median
//! time of `Engine::grad_wrt_into` over about `MS` milliseconds of calls
//! (after one warm-up call, which compiles), the value and the first
//! gradient entries (`scripts/jax/compare.py` runs it beside JAX).

use ad::{Engine, Gradient};
use std::time::{Duration, Instant};
use vm::Value;

fn fail(msg: String) -> ! {
    eprintln!("grad_time: {msg}");
    std::process::exit(64)
}

fn value(v: &serde_json::Value) -> Option<Value> {
    match v {
        serde_json::Value::Array(xs) => Some(Value::Arr(
            xs.iter()
                .map(|x| x.as_f64())
                .collect::<Option<Vec<f64>>>()?,
        )),
        serde_json::Value::Number(n) if n.is_i64() && !n.to_string().contains('.') => {
            Some(Value::I64(n.as_i64()?))
        }
        serde_json::Value::Number(n) => Some(Value::F64(n.as_f64()?)),
        serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
        _ => None,
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        fail("usage: grad_time FILE.adasm FN ARGS.json WRT [MS]".into());
    }
    let src = std::fs::read_to_string(&a[1]).unwrap_or_else(|e| fail(format!("{}: {e}", a[1])));
    let json = std::fs::read_to_string(&a[3]).unwrap_or_else(|e| fail(format!("{}: {e}", a[3])));
    let parsed: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| fail(format!("{}: {e}", a[3])));
    let args: Vec<Value> = parsed
        .as_array()
        .and_then(|xs| xs.iter().map(value).collect())
        .unwrap_or_else(|| fail(format!("{}: not an array of arguments", a[3])));
    let mut mask = vec![false; args.len()];
    for w in a[4].split(',') {
        match w.trim().parse::<usize>() {
            Ok(i) if i < mask.len() => mask[i] = true,
            _ => fail(format!("bad parameter index {w}")),
        }
    }
    let ms: u64 = a.get(5).and_then(|s| s.parse().ok()).unwrap_or(2000);
    // What compiling the gradient's functions costs, in a tier of its own.
    {
        let module = assembler::assemble(&src, &a[1]).unwrap_or_else(|d| fail(format!("{d}")));
        let mut e = Engine::new(module).unwrap_or_else(|e| fail(e.to_string()));
        let f = e
            .find(&a[2])
            .unwrap_or_else(|| fail(format!("no function {}", a[2])));
        let t = Instant::now();
        let d = e
            .derive_wrt(f, &mask)
            .unwrap_or_else(|e| fail(e.to_string()));
        let derive = t.elapsed();
        let prog = e.program().clone();
        let mut j = jit::Jit::eager();
        for g in [d.fwd, d.rev] {
            let _ = j.prepare(&prog, g);
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let cpu: Duration = j.compile_times().iter().filter_map(|t| t.cpu).sum();
        println!(
            "derive {:.0} µs; compile {:.0} µs CPU in all: {}",
            us(derive),
            us(cpu),
            j.compile_times()
                .iter()
                .map(|t| format!(
                    "{}{} IR instructions {:.0} µs",
                    if t.trampoline { "trampoline " } else { "" },
                    t.insts,
                    us(t.cpu.unwrap_or(t.wall))
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for jit in [true, false] {
        let module = assembler::assemble(&src, &a[1]).unwrap_or_else(|d| fail(format!("{d}")));
        let mut e = Engine::new(module).unwrap_or_else(|e| fail(e.to_string()));
        if jit {
            jit::install(e.vm_mut());
        }
        let f = e
            .find(&a[2])
            .unwrap_or_else(|| fail(format!("no function {}", a[2])));
        let mut out = Gradient::default();
        let t = Instant::now();
        e.grad_wrt_into(f, &args, &mask, &mut out)
            .unwrap_or_else(|e| fail(e.to_string()));
        let first = t.elapsed();
        let tier = e.vm_mut().last_tier();
        let mut samples = Vec::new();
        let start = Instant::now();
        while samples.len() < 5 || start.elapsed() < Duration::from_millis(ms) {
            let t = Instant::now();
            let _ = e.grad_wrt_into(f, &args, &mask, &mut out);
            samples.push(t.elapsed());
        }
        samples.sort();
        let g: Vec<String> = out
            .grad
            .iter()
            .flatten()
            .flat_map(|v| match v {
                Value::F64(x) => vec![*x],
                Value::Arr(xs) => xs.clone(),
                _ => vec![],
            })
            .take(3)
            .map(|x| format!("{x:.17e}"))
            .collect();
        println!(
            "{}: tier {:?}, first call {:.3} ms, median {:.3} ms over {} calls, value {:.17e}, gradient starts [{}]",
            if jit { "jit" } else { "interp" },
            tier,
            first.as_secs_f64() * 1e3,
            samples[samples.len() / 2].as_secs_f64() * 1e3,
            samples.len(),
            out.value,
            g.join(", ")
        );
    }
}
