//! Property test: AD of random well-formed programs agrees with finite
//! differences.
//!
//! Programs come from `testkit::gen` (branches, three-way joins, loops with
//! data-dependent trip counts and early returns, calls, recursion, arrays
//! written in place). `ADVM_PROP_CASES` sets the number of programs (default
//! 300) and `ADVM_PROP_SEED` the first seed, so a failure is reproduced by
//! running with the seed it prints and `ADVM_PROP_CASES=1`.

use ad::Engine;
use testkit::fd::{check, Verdict};
use testkit::gen::{program, Config};
use testkit::same_gradient;
use vm::Value;

#[test]
fn ad_agrees_with_finite_differences_on_random_programs() {
    let cases = testkit::env_u64("ADVM_PROP_CASES", 300);
    let first = testkit::env_u64("ADVM_PROP_SEED", 1);
    let cfg = Config::default();
    let (mut agree, mut unreliable) = (0u64, 0u64);
    let mut failures = Vec::new();
    for seed in first..first + cases {
        let g = program(seed, &cfg);
        let module = match assembler::assemble(&g.source, "gen.adasm") {
            Ok(m) => m,
            Err(d) => panic!(
                "seed {seed}: generator produced a bad program:\n{d}\n{}",
                g.source
            ),
        };
        let mut engine = Engine::new(module).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        engine.vm_mut().limits_mut().fuel = Some(10_000_000);
        let f = engine.find(&g.entry).expect("entry exists");
        let grad = match engine.grad(f, &g.args) {
            Ok(grad) => grad,
            Err(e) => {
                failures.push(format!("seed {seed}: grad failed: {e}\n{}", g.source));
                continue;
            }
        };
        // With respect to a subset of the parameters (chosen by the seed):
        // the selected entries are those of the full gradient, the others
        // are absent.
        let wrt: Vec<bool> = g
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| !matches!(a, Value::I64(_) | Value::Bool(_)) && (seed >> i) & 1 == 1)
            .collect();
        if wrt.iter().any(|w| *w) {
            match engine.grad_wrt(f, &g.args, &wrt) {
                Ok(part) => {
                    for (i, w) in wrt.iter().enumerate() {
                        let want = if *w { grad.grad[i].clone() } else { None };
                        if !same_gradient(&part.grad[i], &want) {
                            failures.push(format!(
                                "seed {seed}: entry {i} with respect to {wrt:?} is {:?}, full gradient {:?}\n{}",
                                part.grad[i], grad.grad[i], g.source
                            ));
                        }
                    }
                }
                Err(e) => failures.push(format!(
                    "seed {seed}: grad_wrt {wrt:?} failed: {e}\n{}",
                    g.source
                )),
            }
        }
        let primal = engine.run(f, &g.args);
        match primal {
            Ok(Value::F64(y))
                if y.to_bits() == grad.value.to_bits() || (y.is_nan() && grad.value.is_nan()) => {}
            other => failures.push(format!(
                "seed {seed}: forward value {} differs from primal {other:?}",
                grad.value
            )),
        }
        let verdict = check(
            |args| match engine.run(f, args) {
                Ok(Value::F64(y)) => Some(y),
                _ => None,
            },
            &g.args,
            &grad.grad,
        );
        match verdict {
            Verdict::Agree => agree += 1,
            Verdict::Unreliable(_) => unreliable += 1,
            Verdict::Disagree(why) => failures.push(format!(
                "seed {seed}: {why}\nargs {:?}\n{}",
                g.args, g.source
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The check must actually check: most points are away from kinks.
    assert!(
        agree * 10 >= cases * 8,
        "only {agree} of {cases} programs were checked ({unreliable} near kinks)"
    );
    eprintln!("{agree} programs agreed with finite differences, {unreliable} skipped near kinks");
}
