//! Recursive call graphs in compiled code: self and mutual recursion,
//! through loops and arrays, with one result and with several (a reverse
//! function's cotangents), as deep as the depth limit allows. Compiled
//! frames past the first 64 KiB of the host's stack run on the tier's own
//! stack segments, so the deep cases run on a thread with a 1 MiB stack
//! and take several megabytes of frames. Every value, gradient, HVP and
//! trap is the interpreter's, bit for bit.

use crate::three_calls::{self, Kind};
use vm::{Limits, Tier, Value};

const SRC: &str = "
fn @rec(%x: f64, %n: i64) -> f64 {
entry:
    %z = eq %n, 0
    br %z, base, step
base:
    ret %x
step:
    %m = sub %n, 1
    %r = call @rec(%x, %m)
    %s = sin %r
    %y = mul %x, %s
    ret %y
}

; Two float parameters: the reverse function returns two cotangents
; (`ret.n`, called with `call.acc`).
fn @rec2(%x: f64, %y: f64, %n: i64) -> f64 {
entry:
    %z = eq %n, 0
    br %z, base, step
base:
    %b = mul %x, %y
    ret %b
step:
    %m = sub %n, 1
    %c = cos %y
    %r = call @rec2(%c, %x, %m)
    %t = tanh %r
    %u = mul %t, %y
    %v = add %u, %x
    ret %v
}

fn @even(%x: f64, %n: i64) -> f64 {
entry:
    %z = eq %n, 0
    br %z, base, step
base:
    ret %x
step:
    %m = sub %n, 1
    %s = sin %x
    %r = call @odd(%s, %m)
    ret %r
}

; Mutual recursion through a function with a loop.
fn @odd(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %p = phi [entry: %x], [body: %p2]
    %k = phi [entry: 0], [body: %k2]
    %c = lt %k, 3
    br %c, body, out
body:
    %q = mul %p, 0.9
    %p2 = add %q, 0.01
    %k2 = add %k, 1
    jmp head
out:
    %z = eq %n, 0
    br %z, base, step
base:
    %nx = neg %p
    ret %nx
step:
    %m = sub %n, 1
    %r = call @even(%p, %m)
    ret %r
}

; The squares of `%a[%i..]`, summed from the deepest level up.
fn @sumsq(%a: f64[], %i: i64) -> f64 {
entry:
    %len = alen %a
    %end = ge %i, %len
    br %end, base, step
base:
    ret 0.0
step:
    %v = aget %a, %i
    %sq = mul %v, %v
    %j = add %i, 1
    %r = call @sumsq(%a, %j)
    %s = add %sq, %r
    ret %s
}

; An integer division at the bottom traps when %d is 0.
fn @divdeep(%x: f64, %n: i64, %d: i64) -> f64 {
entry:
    %z = eq %n, 0
    br %z, base, step
base:
    %q = div 7, %d
    %f = itof %q
    %b = mul %x, %f
    ret %b
step:
    %m = sub %n, 1
    %r = call @divdeep(%x, %m, %d)
    %s = sin %r
    ret %s
}
";

/// [`three_calls::outcome`] of `f` in [`SRC`] under `limits`.
fn outcome(kind: Kind, limits: &Limits, f: &str, args: &[Value]) -> (String, [Tier; 3]) {
    three_calls::outcome(&mut three_calls::engine(SRC, kind, Some(limits)), f, args)
}

/// `f` on a thread whose stack is `stack` bytes.
fn on_thread<T: Send + 'static>(stack: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .expect("spawns")
        .join()
        .expect("runs")
}

fn cases() -> Vec<(&'static str, Vec<Value>)> {
    let arr = |n: usize| Value::Arr((0..n).map(|i| 0.5 + (i % 7) as f64 * 0.1).collect());
    vec![
        ("rec", vec![Value::F64(0.9), Value::I64(0)]),
        ("rec", vec![Value::F64(0.9), Value::I64(3)]),
        ("rec", vec![Value::F64(1.3), Value::I64(99_990)]),
        (
            "rec2",
            vec![Value::F64(0.7), Value::F64(-0.4), Value::I64(1)],
        ),
        (
            "rec2",
            vec![Value::F64(0.7), Value::F64(-0.4), Value::I64(40_000)],
        ),
        ("even", vec![Value::F64(0.3), Value::I64(7)]),
        ("even", vec![Value::F64(0.3), Value::I64(60_001)]),
        ("sumsq", vec![arr(5), Value::I64(0)]),
        ("sumsq", vec![arr(30_000), Value::I64(0)]),
        (
            "divdeep",
            vec![Value::F64(0.2), Value::I64(50_000), Value::I64(2)],
        ),
    ]
}

#[test]
fn deep_recursion_runs_compiled_on_stack_segments_with_the_same_bits() {
    let limits = Limits::default();
    for (f, args) in cases() {
        let (l, a) = (limits.clone(), args.clone());
        let (interp, _) = on_thread(64 << 20, move || outcome(Kind::Interp, &l, f, &a));
        for kind in [Kind::Default, Kind::Eager] {
            let (l, a) = (limits.clone(), args.clone());
            let (native, tiers) = on_thread(1 << 20, move || outcome(kind, &l, f, &a));
            assert_eq!(native, interp, "@{f} {args:?} {kind:?}");
            assert_eq!(tiers, [Tier::Native; 3], "@{f} {args:?} {kind:?}");
        }
    }
}

#[test]
fn deep_recursion_traps_as_the_interpreter() {
    let fuel = Limits {
        fuel: Some(700_001),
        ..Limits::default()
    };
    let shallow = Limits {
        max_call_depth: 5_000,
        ..Limits::default()
    };
    let cases: Vec<(Limits, &str, Vec<Value>)> = vec![
        // The depth limit, 100 000 frames down.
        (
            Limits::default(),
            "rec",
            vec![Value::F64(0.9), Value::I64(1_000_000)],
        ),
        (
            Limits::default(),
            "even",
            vec![Value::F64(0.9), Value::I64(100_000)],
        ),
        (
            shallow.clone(),
            "rec2",
            vec![Value::F64(0.9), Value::F64(0.1), Value::I64(5_000)],
        ),
        (
            shallow,
            "sumsq",
            vec![Value::Arr(vec![1.0; 6_000]), Value::I64(0)],
        ),
        // Fuel runs out deep down (and, for the gradient, on the way back).
        (
            fuel.clone(),
            "rec",
            vec![Value::F64(0.9), Value::I64(99_000)],
        ),
        (fuel, "even", vec![Value::F64(0.9), Value::I64(40_000)]),
        // A trap at the bottom unwinds through every level.
        (
            Limits::default(),
            "divdeep",
            vec![Value::F64(0.2), Value::I64(50_000), Value::I64(0)],
        ),
    ];
    for (limits, f, args) in cases {
        let (l, a) = (limits.clone(), args.clone());
        let (interp, _) = on_thread(64 << 20, move || outcome(Kind::Interp, &l, f, &a));
        assert!(interp.contains("Err("), "@{f} {args:?} traps: {interp}");
        let (l, a) = (limits.clone(), args.clone());
        let (native, tiers) = on_thread(1 << 20, move || outcome(Kind::Default, &l, f, &a));
        assert_eq!(native, interp, "@{f} {args:?}");
        assert_eq!(tiers, [Tier::Native; 3], "@{f} {args:?}");
    }
}

#[test]
fn a_recursion_the_memory_budget_cannot_hold_runs_interpreted() {
    // 100 000 levels at the largest frame's estimate are more than 4 MB:
    // the call runs interpreted, and traps where the interpreter does.
    let small = Limits {
        max_memory_bytes: 4 << 20,
        ..Limits::default()
    };
    let args = vec![Value::F64(0.9), Value::I64(99_000)];
    let (l, a) = (small.clone(), args.clone());
    let (interp, _) = on_thread(64 << 20, move || outcome(Kind::Interp, &l, "rec", &a));
    let (l, a) = (small.clone(), args.clone());
    let (native, tiers) = on_thread(64 << 20, move || outcome(Kind::Default, &l, "rec", &a));
    assert_eq!(native, interp);
    assert_eq!(tiers, [Tier::Interp; 3]);
    // A shallow depth limit makes the same budget enough.
    let shallow = Limits {
        max_call_depth: 2_000,
        ..small
    };
    let args = vec![Value::F64(0.9), Value::I64(1_500)];
    let (l, a) = (shallow.clone(), args.clone());
    let (interp, _) = outcome(Kind::Interp, &l, "rec", &a);
    let (native, tiers) = outcome(Kind::Default, &shallow, "rec", &args);
    assert_eq!(native, interp);
    assert_eq!(tiers, [Tier::Native; 3]);
}

#[test]
fn recursive_functions_say_they_run_compiled() {
    let e = three_calls::engine(SRC, Kind::Interp, None);
    for f in ["rec", "rec2", "even", "odd", "sumsq"] {
        let id = e.find(f).expect("exists");
        assert_eq!(jit::tier_of(e.program(), id), Ok(()), "@{f}");
    }
}

#[test]
fn deep_recursion_under_an_ad_budget_runs_the_same_in_both_tiers() {
    // The forward sweep stores more than the budget allows, so the
    // gradient is checkpointed (its segments recomputed in the reverse
    // sweep), 40 000 frames deep.
    let limits = Limits {
        ad_budget: Some(100_000),
        ..Limits::default()
    };
    for (f, args) in [
        ("rec", vec![Value::F64(0.9), Value::I64(40_000)]),
        ("even", vec![Value::F64(0.3), Value::I64(30_001)]),
    ] {
        let (l, a) = (limits.clone(), args.clone());
        let (interp, _) = on_thread(64 << 20, move || outcome(Kind::Interp, &l, f, &a));
        let (l, a) = (limits.clone(), args.clone());
        let (native, tiers) = on_thread(1 << 20, move || outcome(Kind::Default, &l, f, &a));
        assert_eq!(native, interp, "@{f}");
        assert_eq!(tiers[0], Tier::Native, "@{f}");
        assert!(!interp.contains("AdBudget"), "@{f}: {interp}");
    }
}
