//! The AD budget (`vm::Limits::ad_budget`, `Engine::set_ad_budget`,
//! `--ad-budget`): what the forward code stores for the reverse code (the
//! AD stacks and the checkpoints' snapshots) never takes more than the
//! budget; where storing everything does not fit, the forward call is
//! checkpointed and recomputed in segments (`vm/src/interp/ckpt.rs`) and
//! every derivative is the one of a run without a budget bit for bit; a
//! budget below the minimum (snapshot 0 and one batch of pushes) traps with
//! `TrapKind::AdBudget`, which names the budget and the bytes needed; the
//! engine works on afterwards.
//!
//! `ADVM_PROP_CASES` sets the number of random programs (default 200) and
//! `ADVM_PROP_SEED` the first seed, as in `random_programs.rs`.

use ad::{AdError, Engine, Gradient};
use testkit::gen::{program, Config, Rng};
use vm::interp::TrapKind;
use vm::Value;

fn eq(x: f64, y: f64) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

fn same_bits(a: &Gradient, b: &Gradient) -> bool {
    eq(a.value, b.value) && testkit::all_same_bits(&a.grad, &b.grad)
}

fn engine(src: &str) -> Engine {
    let module = assembler::assemble(src, "t.adasm").expect("assembles");
    Engine::new(module).expect("verifies")
}

/// The budget trap's numbers, or a panic naming what came instead.
fn budget_trap<T: std::fmt::Debug>(r: Result<T, AdError>) -> (usize, usize, String) {
    match r {
        Err(AdError::Trap(t)) => match t.kind {
            TrapKind::AdBudget { budget, needed, .. } => (budget, needed, t.to_string()),
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
    let (mut stored_all, mut checkpointed, mut traps) = (0u64, 0u64, 0u64);
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
        // Budgets from nothing to what storing everything takes, and above.
        let budget = match rng.below(4) {
            0 => rng.below(64),
            1 => stored.saturating_sub(1 + rng.below(stored.max(1))),
            2 => stored / 2 + rng.below(stored / 2 + 1),
            _ => stored + rng.below(64),
        };
        e.set_ad_budget(Some(budget));
        let r = e.grad(f, &g.args);
        let high = e.vm_mut().stack_high_water_bytes();
        if high > budget {
            failures.push(format!(
                "seed {seed}: {high} bytes held under a budget of {budget}"
            ));
        }
        match r {
            Ok(got) => {
                if stored <= budget {
                    stored_all += 1;
                } else {
                    checkpointed += 1;
                    if e.vm_mut().recompute_factor() <= 1.0 {
                        failures.push(format!(
                            "seed {seed}: {stored} stored under {budget} and nothing recomputed"
                        ));
                    }
                }
                if !same_bits(&got, &all) {
                    failures.push(format!("seed {seed}: {got:?} vs {all:?}"));
                }
            }
            // Below the minimum: snapshot 0 and one batch of pushes.
            Err(AdError::Trap(t)) => match t.kind {
                TrapKind::AdBudget {
                    budget: b, needed, ..
                } if b == budget && needed > budget && stored > budget => {
                    traps += 1;
                    if !t.to_string().contains("budget") {
                        failures.push(format!("seed {seed}: {t}"));
                    }
                }
                _ => failures.push(format!(
                    "seed {seed}: {t} ({stored} stored, budget {budget})"
                )),
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
        assert!(stored_all >= cases / 10, "{stored_all} stored everything");
        assert!(
            checkpointed >= cases / 10,
            "{checkpointed} were checkpointed"
        );
        assert!(traps >= cases / 20, "{traps} trapped below the minimum");
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
fn powloop_under_a_small_budget_is_checkpointed() {
    let mut e = engine(POW);
    let f = e.find("pow").expect("defined");
    let args = [Value::F64(1.0001), Value::I64(10_000)];
    let all = e.grad(f, &args).expect("runs");
    let stored = e.vm_mut().peak_stack_bytes();
    let seed = Value::F64(1.0);
    let vjp_all = e.vjp(f, &args, &seed).expect("runs");
    let dir = [Some(Value::F64(1.0)), None];
    let hvp_all = e.hvp(f, &args, &dir).expect("runs");
    // One f64 per iteration, and the counter and the entry values.
    assert!((80_000..80_100).contains(&stored), "{stored}");
    for budget in [1000, 4096, 30_000, stored - 1] {
        e.set_ad_budget(Some(budget));
        assert_eq!(e.ad_budget(), Some(budget));
        let got = e.grad(f, &args).expect("checkpointed");
        assert!(same_bits(&got, &all), "{budget}: {got:?} vs {all:?}");
        let high = e.vm_mut().stack_high_water_bytes();
        assert!(high <= budget, "{high} held under {budget}");
        // Each segment but the last recomputed about once where snapshots
        // fit at every boundary; more where they are sparse (a 1000-byte
        // budget holds about six).
        let factor = e.vm_mut().recompute_factor();
        let most = if budget == 1000 { 8.0 } else { 3.5 };
        assert!(factor > 1.0 && factor < most, "{budget}: factor {factor}");
        assert_eq!(e.recompute_factor(), factor);
        let v = e.vjp(f, &args, &seed).expect("checkpointed");
        assert!(v.value == vjp_all.value && testkit::all_same_bits(&v.grad, &vjp_all.grad));
        let h = e.hvp(f, &args, &dir).expect("checkpointed");
        assert!(
            eq(h.value, hvp_all.value)
                && testkit::all_same_bits(&h.grad, &hvp_all.grad)
                && testkit::all_same_bits(&h.hvp, &hvp_all.hvp),
            "{budget}: {h:?} vs {hvp_all:?}"
        );
        assert!(e.vm_mut().stack_high_water_bytes() <= budget);
    }
    // Forward mode stores nothing: no budget applies.
    e.set_ad_budget(Some(0));
    assert!(e.jvp(f, &args, &dir).is_ok());
    // Exactly enough to store everything, and nothing is recomputed.
    e.set_ad_budget(Some(stored + 64));
    let got = e.grad(f, &args).expect("fits");
    assert!(same_bits(&got, &all), "{got:?} vs {all:?}");
    assert_eq!(e.recompute_factor(), 1.0);
    assert!(e.vm_mut().stack_high_water_bytes() <= stored + 64);
}

/// The reverse sweep recomputes segments by the binomial rule: the runs
/// the refills take are those planned when the forward sweep ended, at most
/// `binomial_runs(N - 1, s)` for `N` segments and room for `s` snapshots
/// (Revolve from snapshot 0, the online snapshots dropped) and at least
/// what Revolve would recompute had the forward sweep placed its snapshots
/// knowing `N`, `binomial_runs(N, s) - N`.
#[test]
fn recomputed_segments_follow_the_binomial_bound() {
    let mut e = engine(POW);
    let f = e.find("pow").expect("defined");
    let args = [Value::F64(1.000_01), Value::I64(100_000)];
    let all = e.grad(f, &args).expect("runs");
    let mut seen = Vec::new();
    for budget in [600, 1024, 1500, 2500, 4096, 20_000, 200_000] {
        e.set_ad_budget(Some(budget));
        let got = e.grad(f, &args).expect("checkpointed");
        assert!(same_bits(&got, &all), "{budget}: {got:?} vs {all:?}");
        assert!(e.vm_mut().stack_high_water_bytes() <= budget);
        let st = e.vm_mut().checkpoint_stats().expect("checkpointed");
        let (n, s) = (st.segments, st.slots);
        assert_eq!(st.recomputed, st.planned, "{budget}: {st:?}");
        let most = vm::interp::binomial_runs(n - 1, s);
        let least = vm::interp::binomial_runs(n, s).saturating_sub(n);
        assert!(
            (least..=most).contains(&st.recomputed),
            "{budget}: {st:?} not in {least}..={most}"
        );
        // The recompute factor is the runs over the segments (all full
        // but the last), plus the first try at storing everything (at
        // most the budget's worth, two segments).
        let factor = e.recompute_factor();
        let (runs, full) = (st.recomputed as f64, (n - 1) as f64);
        assert!(
            factor > 1.0 + runs / (full + 1.0) - 0.01 && factor < 1.0 + (runs + 2.0) / full + 0.01,
            "{budget}: factor {factor}, {st:?}"
        );
        seen.push((n, s));
    }
    // A few different shapes: from a handful of slots for over a thousand
    // segments to a slot at every boundary.
    assert!(seen.iter().any(|&(n, s)| n > 1000 && s < 8), "{seen:?}");
    assert!(seen.iter().any(|&(n, s)| s >= n), "{seen:?}");
    eprintln!("(segments, slots): {seen:?}");
}

/// The ADBench GMM objective (`bench/benches/gmm.adl`, compiled to
/// `gmm.adasm`) at a small size (d = 4, k = 5, n = 60): arrays written in
/// nested loops, a streaming logsumexp with branches. Under budgets from a
/// few segments' worth to just below storing everything, the gradient is
/// the one of storing everything bit for bit, within the budget.
#[test]
fn gmm_objective_under_budgets() {
    let mut e = engine(include_str!("../../../bench/benches/gmm.adasm"));
    let f = e.find("gmm").expect("defined");
    let (d, k, n) = (4usize, 5usize, 60usize);
    let mut rng = Rng::new(20);
    let mut draw = |len: usize, lo: f64, hi: f64| -> Value {
        Value::Arr(
            (0..len)
                .map(|_| lo + (hi - lo) * (rng.below(1 << 30) as f64 / (1u64 << 30) as f64))
                .collect(),
        )
    };
    let args = [
        draw(k, -1.0, 1.0),
        draw(k * d, 0.0, 1.0),
        draw(k * d * (d + 1) / 2, -0.5, 0.5),
        draw(n * d, 0.0, 1.0),
        Value::F64(1.0),
        Value::F64(0.5),
    ];
    let all = e.grad(f, &args).expect("runs");
    let stored = e.vm_mut().peak_stack_bytes();
    assert!(stored > 45_000, "{stored}");
    for budget in [12_000, 40_000, stored / 2, stored - 8] {
        e.set_ad_budget(Some(budget));
        let got = e.grad(f, &args).expect("checkpointed");
        assert!(same_bits(&got, &all), "{budget}: {got:?} vs {all:?}");
        assert!(e.recompute_factor() > 1.0, "{budget}");
        let high = e.vm_mut().stack_high_water_bytes();
        assert!(high <= budget, "{high} held under {budget}");
    }
}

#[test]
fn a_budget_below_the_minimum_traps_with_the_bytes_needed() {
    let mut e = engine(POW);
    let f = e.find("pow").expect("defined");
    // 1 000 iterations: under a budget this small the reverse sweep
    // recomputes the loop over and over (10 000 took seconds).
    let args = [Value::F64(1.0001), Value::I64(1_000)];
    let all = e.grad(f, &args).expect("runs");
    // Below snapshot 0 (the two arguments, 16 bytes) and one batch of
    // pushes: the trap names what is needed, and that budget is enough
    // (or, where a larger batch comes later, names more).
    for mut budget in [0, 8, 16, 20] {
        let mut tries = 0;
        loop {
            e.set_ad_budget(Some(budget));
            let r = e.grad(f, &args);
            assert!(e.vm_mut().stack_high_water_bytes() <= budget);
            if let Ok(got) = r {
                assert!(same_bits(&got, &all));
                break;
            }
            let (b, needed, text) = budget_trap(r);
            assert_eq!(b, budget, "{text}");
            assert!(needed > budget, "{text}");
            assert!(
                text.contains(&format!("budget of {budget} bytes"))
                    && text.contains("need at least")
                    && text.contains("--ad-budget"),
                "{text}"
            );
            budget = needed;
            tries += 1;
            assert!(tries < 4, "{text}");
        }
        assert!(budget < 64, "{budget}");
    }
}

#[test]
fn the_smaller_of_the_budget_and_max_stack_bytes_applies() {
    let mut e = engine(POW);
    let f = e.find("pow").expect("defined");
    let args = [Value::F64(1.0001), Value::I64(10_000)];
    let all = e.grad(f, &args).expect("runs");
    e.vm_mut().limits_mut().max_stack_bytes = 4096;
    e.set_ad_budget(Some(1 << 20));
    match e.grad(f, &args) {
        Err(AdError::Trap(t)) => assert_eq!(t.kind, TrapKind::StackLimit { limit: 4096 }),
        other => panic!("{other:?}"),
    }
    e.set_ad_budget(Some(2048));
    let got = e.grad(f, &args).expect("checkpointed");
    assert!(same_bits(&got, &all));
    assert!(e.vm_mut().stack_high_water_bytes() <= 2048);
}

#[test]
fn deep_recursion_under_a_small_budget_is_checkpointed() {
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
    // Snapshots hold every frame: the deeper, the larger; a budget of a
    // fraction of the storage still leaves room for a few.
    for budget in [stored / 2, stored / 4] {
        e.set_ad_budget(Some(budget));
        let got = e.grad(f, &args).expect("checkpointed");
        assert!(same_bits(&got, &all), "{budget}");
        assert!(e.recompute_factor() > 1.0);
        assert!(e.vm_mut().stack_high_water_bytes() <= budget);
    }
    e.set_ad_budget(Some(stored));
    let got = e.grad(f, &args).expect("fits");
    assert!(same_bits(&got, &all));
}

/// Arrays written in a loop (the heap is in every snapshot; the reverse
/// call's heap is rolled back by the reverse code as without a budget),
/// nested loops, a `while` loop and calls in one program.
#[test]
fn arrays_nested_loops_and_calls_under_a_budget() {
    let src = "
fn @step(%a: f64, %b: f64) -> f64 {
entry:
    %p = mul %a, %b
    %s = sin %p
    %r = add %s, %a
    ret %r
}
fn @f(%xs: f64[], %n: i64) -> f64 {
entry:
    %len = alen %xs
    jmp outer
outer:
    %k = phi [entry: 0], [inner_done: %k2]
    %acc = phi [entry: 0.0], [inner_done: %acc3]
    %c = lt %k, %n
    br %c, inner_pre, done
inner_pre:
    jmp inner
inner:
    %i = phi [inner_pre: 0], [inner: %i2]
    %acc2 = phi [inner_pre: %acc], [inner: %t]
    %x = aget %xs, %i
    %t = call @step(%x, %acc2)
    %y = mul %x, %t
    aset %xs, %i, %y
    %i2 = add %i, 1
    %ci = lt %i2, %len
    br %ci, inner, inner_done
inner_done:
    %acc3 = phi [inner: %t]
    %k2 = add %k, 1
    jmp outer
done:
    %z = aget %xs, 0
    %r = add %acc, %z
    ret %r
}";
    let module = assembler::assemble(src, "t.adasm").expect("assembles");
    for policy in [ad::Policy::NONE, ad::Policy::default()] {
        let mut e = Engine::with_inlining(module.clone(), &policy).expect("verifies");
        let f = e.find("f").expect("defined");
        let xs: Vec<f64> = (0..16).map(|i| 0.1 + 0.01 * f64::from(i)).collect();
        let args = [Value::Arr(xs), Value::I64(40)];
        let all = e.grad(f, &args).expect("runs");
        let stored = e.vm_mut().peak_stack_bytes();
        assert!(stored > 16 * 40 * 16, "{stored}");
        for budget in [stored / 2, stored / 5, stored / 20, 1024] {
            e.set_ad_budget(Some(budget));
            let got = e.grad(f, &args).expect("checkpointed");
            assert!(same_bits(&got, &all), "{budget}: {got:?} vs {all:?}");
            assert!(e.recompute_factor() > 1.0);
            let high = e.vm_mut().stack_high_water_bytes();
            assert!(high <= budget, "{high} under {budget}");
        }
        e.set_ad_budget(None);
        let got = e.grad(f, &args).expect("runs");
        assert!(same_bits(&got, &all));
    }
}

/// The inner loop of the two programs below: `acc` carried through a
/// read of `xs` and `ws`, and in the second an `aset` into `xs`.
fn sweep_program(write: bool) -> String {
    let aset = if write {
        "%h = mul %x, 0.5\n    %y = add %s, %h\n    aset %xs, %i, %y"
    } else {
        ""
    };
    format!(
        "
fn @f(%xs: f64[], %ws: f64[], %n: i64) -> f64 {{
entry:
    %len = alen %xs
    %tmp = anew %len
    jmp outer
outer:
    %k = phi [entry: 0], [inner_done: %k2]
    %acc = phi [entry: 0.5], [inner_done: %acc3]
    %c = lt %k, %n
    br %c, inner_pre, done
inner_pre:
    jmp inner
inner:
    %i = phi [inner_pre: 0], [inner: %i2]
    %acc2 = phi [inner_pre: %acc], [inner: %t]
    %x = aget %xs, %i
    %w = aget %ws, %i
    %p = mul %x, %acc2
    %s = sin %p
    %t = add %s, %w
    {aset}
    %i2 = add %i, 1
    %ci = lt %i2, %len
    br %ci, inner, inner_done
inner_done:
    %acc3 = phi [inner: %t]
    %k2 = add %k, 1
    jmp outer
done:
    %z = aget %xs, 3
    %r = add %acc, %z
    ret %r
}}"
    )
}

/// Array arguments that no function writes: snapshot 0 is taken only
/// when the stacks first fill (`vm::Program::writes_arrays` is false), from
/// the arrays as they were at entry. Where the program writes into its
/// argument they have changed by then, so they are copied at entry: a
/// snapshot taken when the stacks fill would restart the call from other
/// values (the gradient and value differ; this program keeps its elements
/// away from zero, so that they would). Either way the checkpointed
/// gradient is the one of storing everything bit for bit, within the
/// budget.
#[test]
fn array_arguments_are_copied_at_entry_only_if_the_call_may_write_them() {
    for write in [false, true] {
        let module = assembler::assemble(&sweep_program(write), "t.adasm").expect("assembles");
        assert_eq!(module.funcs.len(), 1);
        let mut e = Engine::new(module).expect("verifies");
        let f = e.find("f").expect("defined");
        let xs: Vec<f64> = (0..32).map(|i| 0.1 + 0.01 * f64::from(i)).collect();
        let ws: Vec<f64> = (0..32).map(|i| 0.3 - 0.02 * f64::from(i)).collect();
        let args = [Value::Arr(xs), Value::Arr(ws), Value::I64(50)];
        let all = e.grad(f, &args).expect("runs");
        assert!(all.value.abs() > 0.1, "{all:?}");
        let stored = e.vm_mut().peak_stack_bytes();
        assert!(stored > 32 * 50 * 8, "{stored}");
        for budget in [stored / 2, stored / 7, 2048] {
            e.set_ad_budget(Some(budget));
            let got = e.grad(f, &args).expect("checkpointed");
            assert!(
                same_bits(&got, &all),
                "{write} {budget}: {got:?} vs {all:?}"
            );
            assert!(e.recompute_factor() > 1.0, "{budget}");
            let high = e.vm_mut().stack_high_water_bytes();
            assert!(high <= budget, "{high} under {budget}");
        }
    }
}
