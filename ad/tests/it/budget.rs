//! The AD budget (`vm::Limits::ad_budget`, `Engine::set_ad_budget`,
//! `--ad-budget`): the AD stacks never reserve more than the budget; a
//! derivative whose storage fits gives the gradient of a run without a
//! budget bit for bit; one that does not traps with `TrapKind::AdBudget`,
//! which names exactly the bytes a run without a budget stores; the engine
//! works on afterwards.
//!
//! `ADVM_PROP_CASES` sets the number of random programs (default 200) and
//! `ADVM_PROP_SEED` the first seed, as in `random_programs.rs`.

use ad::{AdError, Engine, Gradient};
use testkit::gen::{program, Config, Rng};
use vm::interp::TrapKind;
use vm::Value;

fn same_bits(a: &Gradient, b: &Gradient) -> bool {
    let eq = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    eq(a.value, b.value)
        && a.grad.len() == b.grad.len()
        && a.grad.iter().zip(&b.grad).all(|(x, y)| match (x, y) {
            (None, None) => true,
            (Some(Value::F64(x)), Some(Value::F64(y))) => eq(*x, *y),
            (Some(Value::Arr(xs)), Some(Value::Arr(ys))) => {
                xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| eq(*x, *y))
            }
            _ => false,
        })
}

fn engine(src: &str) -> Engine {
    let module = assembler::assemble(src, "t.adasm").expect("assembles");
    Engine::new(module).expect("verifies")
}

/// The budget trap's numbers, or a panic naming what came instead.
fn budget_trap<T: std::fmt::Debug>(r: Result<T, AdError>) -> (usize, usize, String) {
    match r {
        Err(AdError::Trap(t)) => match t.kind {
            TrapKind::AdBudget {
                budget,
                needed,
                exact: true,
            } => (budget, needed, t.to_string()),
            _ => panic!("not a budget trap: {t}"),
        },
        other => panic!("not a budget trap: {other:?}"),
    }
}

#[test]
fn random_programs_under_random_budgets() {
    let cases = testkit::env_u64("ADVM_PROP_CASES", 200);
    let first = testkit::env_u64("ADVM_PROP_SEED", 1);
    let cfg = Config::default();
    let (mut fits, mut traps, mut exact) = (0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    for seed in first..first + cases {
        let g = program(seed, &cfg);
        let module = assembler::assemble(&g.source, "gen.adasm")
            .unwrap_or_else(|d| panic!("seed {seed}: bad program:\n{d}\n{}", g.source));
        let policy = if seed % 2 == 1 {
            ad::Policy::NONE
        } else {
            ad::Policy::default()
        };
        let mut e = Engine::with_inlining(module, &policy)
            .unwrap_or_else(|err| panic!("seed {seed}: {err}"));
        e.vm_mut().limits_mut().fuel = Some(10_000_000);
        let f = e.find(&g.entry).expect("entry exists");
        let Ok(all) = e.grad(f, &g.args) else {
            continue;
        };
        let stored = e.vm_mut().peak_stack_bytes();
        let mut rng = Rng::new(seed ^ 0xb0d6e7);
        // Budgets around what storing everything takes, below and above.
        let budget = match rng.below(4) {
            0 => rng.below(64),
            1 => stored.saturating_sub(1 + rng.below(stored.max(1))),
            2 => stored + rng.below(64),
            _ => stored,
        };
        e.set_ad_budget(Some(budget));
        let r = e.grad(f, &g.args);
        let high = e.vm_mut().stack_high_water_bytes();
        if high > budget {
            failures.push(format!(
                "seed {seed}: the stacks reserved {high} bytes under a budget of {budget}"
            ));
        }
        match r {
            Ok(got) if stored <= budget => {
                fits += 1;
                if !same_bits(&got, &all) {
                    failures.push(format!("seed {seed}: {got:?} vs {all:?}"));
                }
            }
            Ok(got) => failures.push(format!(
                "seed {seed}: {stored} bytes stored under a budget of {budget}: {got:?}"
            )),
            Err(AdError::Trap(t)) if stored > budget => match t.kind {
                TrapKind::AdBudget {
                    budget: b,
                    needed,
                    exact: e,
                } => {
                    traps += 1;
                    // Exact, unless one batch of pushes alone is larger
                    // than the budget (then the call stops there and
                    // says "at least").
                    exact += u64::from(e);
                    let text = t.to_string();
                    if b != budget
                        || needed <= budget
                        || needed > stored
                        || (e && needed != stored)
                        || e == text.contains("at least")
                    {
                        failures.push(format!(
                            "seed {seed}: {t} (budget {budget}, {stored} stored)"
                        ));
                    }
                }
                _ => failures.push(format!("seed {seed}: {t}")),
            },
            Err(err) => failures.push(format!(
                "seed {seed}: {err} ({stored} stored, budget {budget})"
            )),
        }
        // Without a budget again: the same gradient.
        e.set_ad_budget(None);
        match e.grad(f, &g.args) {
            Ok(again) if same_bits(&again, &all) => {}
            other => failures.push(format!("seed {seed}: after the budget: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if cases >= 100 {
        assert!(fits >= cases / 10, "{fits} fitted their budget");
        assert!(traps >= cases / 10, "{traps} trapped");
        // Both kinds of trap are seen: the exact count (the budget holds
        // a batch of pushes) and "at least" (budgets under 64 bytes often
        // do not).
        assert!(
            exact >= cases / 20 && exact < traps,
            "{exact} of {traps} traps named the exact bytes"
        );
    }
}

const POW: &str = "
fn @pow(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %r = phi [entry: 1.0], [body: %r2]
    %k = phi [entry: %n],  [body: %k2]
    %c = gt %k, 0
    br %c, body, done
body:
    %r2 = mul %r, %x
    %k2 = sub %k, 1
    jmp head
done:
    ret %r
}";

#[test]
fn powloop_budget_trap_names_the_bytes_storing_everything_needs() {
    let mut e = engine(POW);
    let f = e.find("pow").expect("defined");
    let args = [Value::F64(1.0001), Value::I64(10_000)];
    let all = e.grad(f, &args).expect("runs");
    let stored = e.vm_mut().peak_stack_bytes();
    // One f64 per iteration, and the counter and the entry values.
    assert!((80_000..80_100).contains(&stored), "{stored}");
    e.set_ad_budget(Some(1000));
    assert_eq!(e.ad_budget(), Some(1000));
    let (budget, needed, text) = budget_trap(e.grad(f, &args));
    assert_eq!((budget, needed), (1000, stored), "{text}");
    assert!(
        text.contains("budget of 1000 bytes")
            && text.contains(&format!("need {stored} bytes"))
            && text.contains("--ad-budget")
            // Where the stacks first filled up.
            && text.contains("in @pow (gradient's forward sweep), block body, at `mul.push"),
        "{text}"
    );
    assert!(e.vm_mut().stack_high_water_bytes() <= 1000);
    // The other derivatives that store: the same trap.
    let seed = Value::F64(1.0);
    let (_, needed, _) = budget_trap(e.vjp(f, &args, &seed));
    assert_eq!(needed, stored);
    let dir = [Some(Value::F64(1.0)), None];
    let (_, needed, _) = budget_trap(e.hvp(f, &args, &dir));
    assert!(needed > 1000, "{needed}");
    // Forward mode stores nothing: no budget applies.
    e.set_ad_budget(Some(0));
    assert!(e.jvp(f, &args, &dir).is_ok());
    // Exactly enough.
    e.set_ad_budget(Some(stored));
    let got = e.grad(f, &args).expect("fits");
    assert!(same_bits(&got, &all), "{got:?} vs {all:?}");
    assert!(e.vm_mut().stack_high_water_bytes() <= stored);
}

#[test]
fn the_smaller_of_the_budget_and_max_stack_bytes_applies() {
    let mut e = engine(POW);
    let f = e.find("pow").expect("defined");
    let args = [Value::F64(1.0001), Value::I64(10_000)];
    e.vm_mut().limits_mut().max_stack_bytes = 4096;
    e.set_ad_budget(Some(1 << 20));
    match e.grad(f, &args) {
        Err(AdError::Trap(t)) => assert_eq!(t.kind, TrapKind::StackLimit { limit: 4096 }),
        other => panic!("{other:?}"),
    }
    e.set_ad_budget(Some(2048));
    let (budget, _, _) = budget_trap(e.grad(f, &args));
    assert_eq!(budget, 2048);
    assert!(e.vm_mut().stack_high_water_bytes() <= 2048);
}

#[test]
fn deep_recursion_past_the_budget_traps() {
    let src = "
fn @down(%x: f64, %n: i64) -> f64 {
entry:
    %c = gt %n, 0
    br %c, rec, base
rec:
    %m = sub %n, 1
    %s = sin %x
    %y = call @down(%s, %m)
    %z = mul %y, %x
    ret %z
base:
    ret %x
}";
    let module = assembler::assemble(src, "t.adasm").expect("assembles");
    let mut e = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    let f = e.find("down").expect("defined");
    let args = [Value::F64(0.5), Value::I64(2000)];
    let all = e.grad(f, &args).expect("runs");
    let stored = e.vm_mut().peak_stack_bytes();
    assert!(stored > 2000 * 16, "{stored}");
    e.set_ad_budget(Some(stored / 2));
    let (_, needed, _) = budget_trap(e.grad(f, &args));
    assert_eq!(needed, stored);
    e.set_ad_budget(Some(stored));
    let got = e.grad(f, &args).expect("fits");
    assert!(same_bits(&got, &all));
}
