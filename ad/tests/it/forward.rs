//! Forward mode (jvp): tangents of random programs against central finite
//! differences and against the reverse-mode gradient (the dot-product
//! identity `ȳ·(J ẋ) = (Jᵀ ȳ)·ẋ`, to rounding), the corpus along the
//! all-ones direction, the shape of the tangent code, and the library
//! entry points.
//!
//! `ADVM_PROP_CASES` sets the number of random programs (default 300) and
//! `ADVM_PROP_SEED` the first seed, as in `random_programs.rs`.

use ad::{Engine, Policy, Tangent};
use testkit::fd::{along, check, dot, random_dir, Verdict};
use testkit::gen::{program, Config, Rng};
use vm::op::Op;
use vm::Value;

fn engine(src: &str) -> Engine {
    let module = assembler::assemble(src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
    Engine::new(module).expect("verifies")
}

fn tangent_f64(t: &Tangent) -> f64 {
    match t.tangent {
        Some(Value::F64(x)) => x,
        ref other => panic!("not an f64 tangent: {other:?}"),
    }
}

#[test]
fn tangents_of_random_programs_agree_with_differences_and_gradients() {
    let cases = testkit::env_u64("ADVM_PROP_CASES", 300);
    let first = testkit::env_u64("ADVM_PROP_SEED", 1);
    let cfg = Config::default();
    let (mut agree, mut unreliable, mut identities) = (0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    for seed in first..first + cases {
        let g = program(seed, &cfg);
        let module = assembler::assemble(&g.source, "gen.adasm")
            .unwrap_or_else(|d| panic!("seed {seed}: bad program:\n{d}\n{}", g.source));
        let mut e = Engine::new(module).unwrap_or_else(|err| panic!("seed {seed}: {err}"));
        e.vm_mut().limits_mut().fuel = Some(10_000_000);
        let f = e.find(&g.entry).expect("entry exists");
        let mut rng = Rng::new(seed ^ 0x5eed);
        let dir = random_dir(&g.args, &mut rng);
        let t = match e.jvp(f, &g.args, &dir) {
            Ok(t) => t,
            Err(err) => {
                failures.push(format!("seed {seed}: jvp failed: {err}\n{}", g.source));
                continue;
            }
        };
        let ydot = tangent_f64(&t);
        // The value is the primal's, bit for bit.
        match (e.run(f, &g.args), &t.value) {
            (Ok(Value::F64(y)), Value::F64(v)) if y.to_bits() == v.to_bits() => {}
            (Ok(Value::F64(y)), Value::F64(v)) if y.is_nan() && v.is_nan() => {}
            (p, v) => failures.push(format!("seed {seed}: jvp value {v:?}, primal {p:?}")),
        }
        // The dot-product identity with reverse mode: ȳ·(J ẋ) = (Jᵀ ȳ)·ẋ
        // for a random output cotangent ȳ.
        let ybar = rng.float(-2.0, 2.0);
        if let Ok(v) = e.vjp(f, &g.args, &Value::F64(ybar)) {
            let (rhs, scale) = dot(&v.grad, &dir);
            let lhs = ybar * ydot;
            if rhs.is_finite() && lhs.is_finite() {
                identities += 1;
                if (lhs - rhs).abs() > 1e-11 * scale.max(lhs.abs()) + 1e-300 {
                    failures.push(format!(
                        "seed {seed}: ȳ·(J ẋ) = {lhs} but (Jᵀ ȳ)·ẋ = {rhs} (scale {scale})\n{}",
                        g.source
                    ));
                }
            }
        }
        // Central differences along the direction.
        let verdict = check(
            |ts| {
                let Some(Value::F64(s)) = ts.first() else {
                    return None;
                };
                match e.run(f, &along(&g.args, &dir, *s)) {
                    Ok(Value::F64(y)) => Some(y),
                    _ => None,
                }
            },
            &[Value::F64(0.0)],
            &[Some(Value::F64(ydot))],
        );
        match verdict {
            Verdict::Agree => agree += 1,
            Verdict::Unreliable(_) => unreliable += 1,
            Verdict::Disagree(why) => failures.push(format!(
                "seed {seed}: {why}\nargs {:?} dir {dir:?}\n{}",
                g.args, g.source
            )),
        }
        // With respect to a subset: the tangent along the direction with
        // the unselected entries zeroed.
        let wrt: Vec<bool> = g
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| !matches!(a, Value::I64(_) | Value::Bool(_)) && (seed >> i) & 1 == 1)
            .collect();
        let part: Vec<Option<Value>> = dir
            .iter()
            .zip(&wrt)
            .map(|(d, w)| if *w { d.clone() } else { None })
            .collect();
        match (e.jvp_wrt(f, &g.args, &dir, &wrt), e.jvp(f, &g.args, &part)) {
            (Ok(a), Ok(b)) => {
                let (x, y) = (tangent_f64(&a), tangent_f64(&b));
                if !(x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs())) {
                    failures.push(format!(
                        "seed {seed}: jvp_wrt {wrt:?} gives {x}, the zeroed direction {y}\n{}",
                        g.source
                    ));
                }
            }
            (a, b) => failures.push(format!("seed {seed}: {a:?} / {b:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        agree * 10 >= cases * 8,
        "only {agree} of {cases} tangents were checked ({unreliable} near kinks)"
    );
    assert!(
        identities * 10 >= cases * 9,
        "only {identities} identities checked"
    );
    eprintln!("{agree} tangents agreed with differences ({unreliable} near kinks), {identities} identities held");
}

/// Every function of the corpus with an `f64` result and a differentiable
/// parameter, at arguments of 0.5 (i64: 3, arrays of four), along the
/// all-ones direction: the tangent equals the gradient summed.
#[test]
fn corpus_tangents_along_ones_equal_gradient_sums() {
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["programs", "programs/bench"] {
        let root = testkit::workspace_root().join(dir);
        for entry in std::fs::read_dir(&root).expect("corpus") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|x| x == "adasm") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in &files {
        let src = std::fs::read_to_string(path).expect("readable");
        let Ok(module) = assembler::assemble(&src, &path.display().to_string()) else {
            continue; // the corpus holds programs that must fail too
        };
        let names: Vec<(String, Vec<vm::Type>, bool)> = module
            .funcs
            .iter()
            .map(|f| {
                (
                    f.name.clone(),
                    f.param_types(),
                    f.ret == vm::ir::RetType::One(vm::Type::F64),
                )
            })
            .collect();
        let Ok(mut e) = Engine::new(module) else {
            continue;
        };
        e.vm_mut().limits_mut().fuel = Some(50_000_000);
        for (name, types, f64_result) in names {
            if !f64_result || !types.iter().any(|t| t.is_differentiable()) {
                // Other results (i64, bool, f64[]): forward mode runs or
                // traps like the primal, never fails inside advm.
                let f = e.find(&name).expect("listed");
                let args = default_args(&types);
                let dir: Vec<Option<Value>> = args.iter().map(|_| None).collect();
                match (e.run(f, &args), e.jvp(f, &args, &dir)) {
                    (Ok(v), Ok(t)) if v == t.value => {}
                    (Err(ad::AdError::Trap(_)), Err(ad::AdError::Trap(_))) => {}
                    (p, t) => failures.push(format!("{}: @{name}: {p:?} / {t:?}", path.display())),
                }
                continue;
            }
            let args = default_args(&types);
            let dir: Vec<Option<Value>> = args
                .iter()
                .map(|a| match a {
                    Value::F64(_) => Some(Value::F64(1.0)),
                    Value::Arr(xs) => Some(Value::Arr(vec![1.0; xs.len()])),
                    _ => None,
                })
                .collect();
            let f = e.find(&name).expect("listed");
            let Ok(grad) = e.grad(f, &args) else {
                continue; // traps at this point (a corpus of traps too)
            };
            let t = match e.jvp(f, &args, &dir) {
                Ok(t) => t,
                Err(err) => {
                    failures.push(format!("{}: @{name}: {err}", path.display()));
                    continue;
                }
            };
            let (gd, scale) = dot(&grad.grad, &dir);
            let ydot = tangent_f64(&t);
            let same = (gd - ydot).abs() <= 1e-11 * scale + 1e-300
                || (gd.is_nan() && ydot.is_nan())
                || gd == ydot;
            if !same || Value::F64(grad.value) != t.value {
                failures.push(format!(
                    "{}: @{name}: jvp {:?} {ydot}, grad {} and grad·1 {gd}",
                    path.display(),
                    t.value,
                    grad.value
                ));
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 30, "only {checked} corpus functions checked");
    eprintln!("{checked} corpus functions: jvp along ones = grad·ones");
}

/// Arguments of 0.5 (i64: 3, bool: true, arrays of four).
fn default_args(types: &[vm::Type]) -> Vec<Value> {
    types
        .iter()
        .map(|t| match t {
            vm::Type::F64 => Value::F64(0.5),
            vm::Type::I64 => Value::I64(3),
            vm::Type::Bool => Value::Bool(true),
            vm::Type::Arr => Value::Arr(vec![0.5, 0.25, -0.5, 1.0]),
        })
        .collect()
}

/// The opcodes of a tangent function's bytecode (and of its callees').
fn jvp_ops(e: &mut Engine, name: &str) -> Vec<Op> {
    let f = e.find(name).expect("exists");
    let id = e
        .derive_jvp(f, &ad::analysis::all_params(e.module().func(f)))
        .expect("derives");
    e.program().func(id).code.iter().map(|i| i.op).collect()
}

fn no_stack_ops(ops: &[Op]) -> bool {
    !ops.iter().any(|op| {
        matches!(
            op,
            Op::CommsPush
                | Op::CommsPop
                | Op::CommsReserve
                | Op::CommsPushR
                | Op::BlkPush
                | Op::BlkPop
                | Op::MulPush
                | Op::MulPop
                | Op::AccMulPop
                | Op::AccMulPopMul
        )
    })
}

#[test]
fn tangent_code_of_straight_lines_and_loops_touches_no_stack() {
    let mut e = engine(
        "fn @f(%x: f64, %y: f64) -> f64 {
entry:
    %p = mul %x, %y
    %s = sin %p
    %q = div %s, %y
    ret %q
}",
    );
    let ops = jvp_ops(&mut e, "f");
    assert!(no_stack_ops(&ops), "{ops:?}");
    // The tangent work is there: products of the tangents and a cosine.
    let cosine = ops.contains(&Op::Cos) || ops.contains(&Op::SinCos);
    assert!(cosine && ops.contains(&Op::RetN), "{ops:?}");

    let mut e = engine(&testkit::read_program("programs/powloop.adasm"));
    let ops = jvp_ops(&mut e, "pow");
    assert!(no_stack_ops(&ops), "{ops:?}");
    // The loop's tangent: `ṙ = ṙ⊙x + ẋ⊙r`, two strong-zero products and
    // their sum in one `tmul.z`, beside the primal's product and step, and
    // no copy of a loop-carried value (the tangent code reads `r` before
    // `r * x` replaces it, so both share a register).
    assert_eq!(
        ops.iter().filter(|o| **o == Op::TMulZ).count(),
        1,
        "{ops:?}"
    );
    assert_eq!(ops.iter().filter(|o| **o == Op::MulZ).count(), 0, "{ops:?}");
    assert_eq!(ops.iter().filter(|o| **o == Op::MulF).count(), 1, "{ops:?}");
    assert_eq!(ops.len(), 8, "{ops:?}");
    // The reverse-mode forward function of the same loop does push.
    let f = e.find("pow").expect("exists");
    let d = e.derive(f).expect("derives");
    let fwd: Vec<Op> = e.program().func(d.fwd).code.iter().map(|i| i.op).collect();
    assert!(
        !no_stack_ops(&fwd),
        "reverse mode's forward code pushes: {fwd:?}"
    );
}

#[test]
fn powloop_tangent_is_n_x_to_the_n_minus_one() {
    let mut e = engine(&testkit::read_program("programs/powloop.adasm"));
    let f = e.find("pow").expect("exists");
    let (x, n) = (1.0001f64, 1000);
    let t = e
        .jvp(
            f,
            &[Value::F64(x), Value::I64(n)],
            &[Some(Value::F64(2.0)), None],
        )
        .expect("runs");
    let want = 2.0 * n as f64 * x.powi(n as i32 - 1);
    assert!(
        (tangent_f64(&t) - want).abs() <= 1e-9 * want,
        "{t:?} vs {want}"
    );
    assert_eq!(t.arg_tangents, vec![None, None]);
}

#[test]
fn array_results_and_array_arguments_have_tangents() {
    let src = "
fn @scale(%v: f64[], %s: f64) -> f64[] {
entry:
    %n = alen %v
    %out = anew %n
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %c = lt %i, %n
    br %c, body, done
body:
    %e = aget %v, %i
    %p = mul %e, %s
    aset %out, %i, %p
    %sq = mul %e, %e
    aset %v, %i, %sq
    %i2 = add %i, 1
    jmp head
done:
    ret %out
}

fn @twice(%v: f64[], %s: f64) -> f64 {
entry:
    %w = call @scale(%v, %s)
    %a = aget %w, 1
    %b = aget %v, 0
    %r = add %a, %b
    ret %r
}";
    let mut e = engine(src);
    let f = e.find("scale").expect("exists");
    let v = vec![1.0, 2.0, 3.0];
    let dv = vec![0.5, -1.0, 2.0];
    let t = e
        .jvp(
            f,
            &[Value::Arr(v.clone()), Value::F64(3.0)],
            &[Some(Value::Arr(dv.clone())), Some(Value::F64(0.25))],
        )
        .expect("runs");
    // out = v*s: tangent dv*s + v*ds; v becomes v², tangent 2 v dv.
    assert_eq!(t.value, Value::Arr(vec![3.0, 6.0, 9.0]));
    let want: Vec<f64> = v.iter().zip(&dv).map(|(x, d)| d * 3.0 + x * 0.25).collect();
    assert_eq!(t.tangent, Some(Value::Arr(want)));
    let want: Vec<f64> = v.iter().zip(&dv).map(|(x, d)| 2.0 * x * d).collect();
    assert_eq!(t.arg_tangents, vec![Some(Value::Arr(want)), None]);

    // Through a call returning an array (no inlining: a real call).
    let module = assembler::assemble(src, "t.adasm").expect("assembles");
    let mut e = Engine::with_inlining(module, &Policy::NONE).expect("verifies");
    let g = e.find("twice").expect("exists");
    let args = [Value::Arr(v.clone()), Value::F64(3.0)];
    let dir = [Some(Value::Arr(dv.clone())), Some(Value::F64(0.25))];
    let t = e.jvp(g, &args, &dir).expect("runs");
    let grad = e.grad(g, &args).expect("grad");
    let (gd, _) = dot(&grad.grad, &dir);
    assert_eq!(t.value, Value::F64(6.0 + 1.0));
    assert!((tangent_f64(&t) - gd).abs() < 1e-14, "{t:?} vs {gd}");
    let listing = e.disasm_jvp(g).expect("lists");
    assert!(
        listing.contains("@scale.jvp(%v, %s, %d.v, %d.s) -> (%w, %d.w)"),
        "{listing}"
    );
}

#[test]
fn recursion_and_mutual_recursion_get_tangents() {
    let mut e = engine(&testkit::read_program("programs/mutual.adasm"));
    let mut n = 0;
    for name in e
        .module()
        .funcs
        .iter()
        .filter(|f| f.ret == vm::ir::RetType::One(vm::Type::F64))
        .map(|f| f.name.clone())
        .collect::<Vec<_>>()
    {
        let f = e.find(&name).expect("exists");
        let types = e.module().func(f).param_types();
        let args: Vec<Value> = types
            .iter()
            .map(|t| match t {
                vm::Type::I64 => Value::I64(5),
                _ => Value::F64(0.7),
            })
            .collect();
        let dir: Vec<Option<Value>> = args
            .iter()
            .map(|a| matches!(a, Value::F64(_)).then_some(Value::F64(1.0)))
            .collect();
        let t = e.jvp(f, &args, &dir).expect("runs");
        let g = e.grad(f, &args).expect("grad");
        let (gd, scale) = dot(&g.grad, &dir);
        assert!(
            (tangent_f64(&t) - gd).abs() <= 1e-12 * scale,
            "@{name}: {t:?} vs {gd}"
        );
        n += 1;
    }
    assert!(n >= 2);
}

#[test]
fn prepared_jvp_matches_jvp_and_checks_its_input() {
    let mut e = engine(&testkit::read_program("programs/powloop.adasm"));
    let f = e.find("pow").expect("exists");
    let p = e.prepare_jvp(f, &[true, false]).expect("prepares");
    assert_eq!(p.arity(), 2);
    let args = [Value::F64(1.5), Value::I64(7)];
    let (y, t) = e.jvp_prepared(&p, &args, &[1.0, 0.0]).expect("runs");
    let full = e
        .jvp(f, &args, &[Some(Value::F64(1.0)), None])
        .expect("runs");
    assert_eq!(Value::F64(y), full.value);
    assert_eq!(t, tangent_f64(&full));
    // Wrong kinds and counts are refused with a message, never a panic.
    let err = e
        .jvp_prepared(&p, &[Value::I64(1), Value::I64(7)], &[1.0, 0.0])
        .expect_err("refused");
    assert!(err.to_string().contains("must be f64"), "{err}");
    let err = e.jvp_prepared(&p, &args, &[1.0]).expect_err("refused");
    assert!(err.to_string().contains("direction"), "{err}");
    // A prepared jvp takes scalars and an f64 result only.
    let mut e2 = engine(&testkit::read_program("programs/array_sum.adasm"));
    let g = e2.module().funcs[0].name.clone();
    let g = e2.find(&g).expect("exists");
    let mask = ad::analysis::all_params(e2.module().func(g));
    assert!(e2.prepare_jvp(g, &mask).is_err());
    // Another engine's preparation is refused.
    assert!(e2.jvp_prepared(&p, &args, &[1.0, 0.0]).is_err());
}

#[test]
fn bad_directions_and_masks_are_refused() {
    let mut e = engine(&testkit::read_program("programs/powloop.adasm"));
    let f = e.find("pow").expect("exists");
    let args = [Value::F64(1.5), Value::I64(7)];
    for dir in [
        vec![Some(Value::F64(1.0))],
        vec![Some(Value::Arr(vec![1.0])), None],
        vec![Some(Value::I64(1)), None],
    ] {
        let err = e.jvp(f, &args, &dir).expect_err("refused");
        assert!(matches!(err, ad::AdError::Args(_)), "{err}");
    }
    // An i64 parameter cannot be selected.
    let err = e
        .jvp_wrt(f, &args, &[None, None], &[true, true])
        .expect_err("refused");
    assert!(err.to_string().contains("not f64"), "{err}");
    // A direction of the wrong length for an array.
    let mut e = engine(&testkit::read_program("programs/bench/logsumexp.adasm"));
    let f = e.find("logsumexp").expect("exists");
    let err = e
        .jvp(
            f,
            &[Value::Arr(vec![1.0, 2.0])],
            &[Some(Value::Arr(vec![1.0]))],
        )
        .expect_err("refused");
    assert!(err.to_string().contains("element"), "{err}");
}

/// Functions returning `f64[]`: a loop filling a new array, one writing its
/// parameter in place and returning it (the result aliases an argument),
/// and one calling another through an array result.
const ARRAY_RESULTS: &str = "
fn @powers(%x: f64, %n: i64) -> f64[] {
entry:
    %a = anew %n
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %p = phi [entry: 1.0], [body: %p2]
    %c = lt %i, %n
    br %c, body, done
body:
    aset %a, %i, %p
    %p2 = mul %p, %x
    %i2 = add %i, 1
    jmp head
done:
    ret %a
}

fn @inplace(%v: f64[], %s: f64) -> f64[] {
entry:
    %n = alen %v
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %c = lt %i, %n
    br %c, body, done
body:
    %e = aget %v, %i
    %t = sin %e
    %u = mul %t, %s
    aset %v, %i, %u
    %i2 = add %i, 1
    jmp head
done:
    ret %v
}

fn @chain(%v: f64[], %x: f64) -> f64[] {
entry:
    %n = alen %v
    %p = call @powers(%x, %n)
    %e = aget %p, 1
    %w = call @inplace(%v, %e)
    %f = aget %w, 0
    %q = mul %f, %x
    aset %p, 0, %q
    ret %p
}";

fn flat_dot(a: &Value, b: &Value) -> f64 {
    match (a, b) {
        (Value::F64(x), Value::F64(y)) => x * y,
        (Value::Arr(xs), Value::Arr(ys)) => xs.iter().zip(ys).map(|(x, y)| x * y).sum(),
        _ => panic!("shapes differ: {a:?} {b:?}"),
    }
}

#[test]
fn vjp_and_jvp_of_array_results_satisfy_the_dot_product_identity() {
    for policy in [Policy::default(), Policy::NONE] {
        let module = assembler::assemble(ARRAY_RESULTS, "t.adasm").expect("assembles");
        let mut e = Engine::with_inlining(module, &policy).expect("verifies");
        let mut rng = Rng::new(7);
        for (name, args) in [
            ("powers", vec![Value::F64(0.9), Value::I64(5)]),
            (
                "inplace",
                vec![Value::Arr(vec![0.3, -1.2, 2.0]), Value::F64(1.5)],
            ),
            (
                "chain",
                vec![Value::Arr(vec![0.3, -1.2, 2.0, 0.7]), Value::F64(0.8)],
            ),
        ] {
            let f = e.find(name).expect("exists");
            for _ in 0..20 {
                let dir = random_dir(&args, &mut rng);
                let t = e.jvp(f, &args, &dir).expect("jvp");
                let Value::Arr(y) = &t.value else {
                    panic!("@{name}: {t:?}")
                };
                let seed = Value::Arr(y.iter().map(|_| rng.float(-1.0, 1.0)).collect());
                let v = e.vjp(f, &args, &seed).expect("vjp");
                assert_eq!(v.value, t.value, "@{name}");
                let lhs = flat_dot(&seed, t.tangent.as_ref().expect("tangent"));
                let (rhs, scale) = dot(&v.grad, &dir);
                assert!(
                    (lhs - rhs).abs() <= 1e-12 * scale.max(lhs.abs()) + 1e-300,
                    "@{name}: ȳ·(J ẋ) = {lhs}, (Jᵀ ȳ)·ẋ = {rhs}"
                );
            }
        }
    }
}

#[test]
fn vjp_of_an_f64_result_is_the_seed_times_the_gradient() {
    let mut e = engine(&testkit::read_program("programs/array_param.adasm"));
    let f = e.find("f").expect("exists");
    let args = [Value::Arr(vec![1.0, 2.0, 3.0]), Value::F64(2.0)];
    let g = e.grad(f, &args).expect("grad");
    let v = e.vjp(f, &args, &Value::F64(-2.5)).expect("vjp");
    assert_eq!(v.value, Value::F64(g.value));
    assert_eq!(v.grad[1], Some(Value::F64(-2.5 * 56.0)));
    assert_eq!(v.grad[0], Some(Value::Arr(vec![-20.0, -40.0, -60.0])));
    // Seeds of the wrong kind or length are refused.
    assert!(matches!(
        e.vjp(f, &args, &Value::Arr(vec![1.0])),
        Err(ad::AdError::Args(_))
    ));
    let module = assembler::assemble(ARRAY_RESULTS, "t.adasm").expect("assembles");
    let mut e = Engine::new(module).expect("verifies");
    let p = e.find("powers").expect("exists");
    let args = [Value::F64(0.9), Value::I64(3)];
    let err = e
        .vjp(p, &args, &Value::Arr(vec![1.0]))
        .expect_err("refused");
    assert!(err.to_string().contains("seed has 1"), "{err}");
    assert!(e.vjp(p, &args, &Value::F64(1.0)).is_err());
    // Then a good call works on the same engine.
    let v = e
        .vjp(p, &args, &Value::Arr(vec![0.0, 1.0, 1.0]))
        .expect("vjp");
    // d/dx (x + x²) = 1 + 2x
    assert_eq!(v.grad[0], Some(Value::F64(1.0 + 2.0 * 0.9)));
}

#[test]
fn jacobian_columns_are_tangents_and_rows_are_vjps() {
    let module = assembler::assemble(ARRAY_RESULTS, "t.adasm").expect("assembles");
    let mut e = Engine::new(module).expect("verifies");
    let f = e.find("chain").expect("exists");
    let args = [Value::Arr(vec![0.3, -1.2, 2.0, 0.7]), Value::F64(0.8)];
    let j = e.jacobian(f, &args).expect("jacobian");
    assert_eq!(j.jacobian.len(), 4, "one row per result element");
    assert!(j.jacobian.iter().all(|r| r.len() == 5), "4 + 1 columns");
    for (r, row) in j.jacobian.iter().enumerate() {
        let mut seed = vec![0.0; 4];
        seed[r] = 1.0;
        let v = e.vjp(f, &args, &Value::Arr(seed)).expect("vjp");
        let mut flat = Vec::new();
        for g in &v.grad {
            match g {
                Some(Value::F64(x)) => flat.push(*x),
                Some(Value::Arr(xs)) => flat.extend(xs),
                _ => {}
            }
        }
        for (a, b) in row.iter().zip(&flat) {
            assert!(
                (a - b).abs() <= 1e-12 * a.abs().max(1.0),
                "row {r}: {row:?} vs {flat:?}"
            );
        }
    }
    // Only x: one column. An f64 result: one row, the gradient.
    let j = e.jacobian_wrt(f, &args, &[false, true]).expect("jacobian");
    assert!(j.jacobian.iter().all(|r| r.len() == 1));
    let mut e = engine(&testkit::read_program("programs/array_param.adasm"));
    let f = e.find("f").expect("exists");
    let args = [Value::Arr(vec![1.0, 2.0, 3.0]), Value::F64(2.0)];
    let j = e.jacobian(f, &args).expect("jacobian");
    assert_eq!(j.jacobian, vec![vec![8.0, 16.0, 24.0, 56.0]]);
}

/// A row-major dot product `Σ_j M[base + j]·v[j]` (logreg's and mlp's inner
/// loop) with respect to both arrays: each load's index is fused with it
/// (`aget.add`, the tangent's load with its own copy of the sum), the
/// primal's product and sum stay one `add.mul.f`, and the tangent's two
/// products go into the sum, in the sum's register, as an
/// `acc.mul.aget.add` and an `add.mul.aget` (each tangent load moved down
/// to its sum and fused with it) (`(ṡ + Ṁ⊙v) + M⊙v̇`, one
/// rounding moved from the unfused `ṡ + (Ṁ⊙v + M⊙v̇)`). The tangent equals
/// the unfused sum to rounding, and is exact where a zero direction meets
/// an infinite or nan entry (strong zeros: such a term contributes 0).
#[test]
fn a_dot_products_tangent_sums_its_products_in_place() {
    let src = "fn @dot(%M: f64[], %v: f64[], %base: i64) -> f64 {
entry:
    %n = alen %v
    jmp head
head:
    %j = phi [entry: 0], [body: %j2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %j, %n
    br %c, body, done
body:
    %k = add %base, %j
    %m = aget %M, %k
    %x = aget %v, %j
    %p = mul %m, %x
    %s2 = add %s, %p
    %j2 = add %j, 1
    jmp head
done:
    ret %s
}";
    let mut e = engine(src);
    let ops = jvp_ops(&mut e, "dot");
    let count = |op: Op| ops.iter().filter(|o| **o == op).count();
    assert_eq!(count(Op::AGetAdd), 1, "{ops:?}");
    assert_eq!(count(Op::AccMulAGetAdd), 1, "{ops:?}");
    assert_eq!(count(Op::AddMulZ), 0, "{ops:?}");
    assert_eq!(count(Op::AddMulAGet), 1, "{ops:?}");
    assert_eq!(count(Op::MulAddF), 1, "{ops:?}");
    assert_eq!(count(Op::MulZ) + count(Op::AddF), 0, "{ops:?}");
    let f = e.find("dot").expect("exists");
    let mz = vm::math::mul_z;
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let mut rng = Rng::new(7);
    let mut cases: Vec<[Vec<f64>; 4]> = (0..50)
        .map(|_| {
            let mut v = || (0..4).map(|_| rng.float(-3.0, 3.0)).collect::<Vec<f64>>();
            [v(), v(), v(), v()]
        })
        .collect();
    cases.push([
        vec![9.0, 1.0, inf, nan],
        vec![2.0, 3.0],
        vec![5.0, 1.0, 0.0, 0.0],
        vec![0.0, 0.0],
    ]);
    for [m, v, dm, dv] in cases {
        let base = (m.len() - v.len()) as i64;
        let args = [
            Value::Arr(m.clone()),
            Value::Arr(v.clone()),
            Value::I64(base),
        ];
        let dir = [
            Some(Value::Arr(dm.clone())),
            Some(Value::Arr(dv.clone())),
            None,
        ];
        let t = e.jvp(f, &args, &dir).expect("runs");
        let (mut s, mut ds) = (0.0, 0.0);
        for j in 0..v.len() {
            let k = base as usize + j;
            s += m[k] * v[j];
            ds += mz(dm[k], v[j]) + mz(m[k], dv[j]);
        }
        match t.value {
            Value::F64(y) => assert!(y.to_bits() == s.to_bits() || (y.is_nan() && s.is_nan())),
            ref other => panic!("{other:?}"),
        }
        let got = tangent_f64(&t);
        assert!(
            (got - ds).abs() <= 1e-13 * (1.0 + ds.abs()),
            "{m:?} {v:?} along {dm:?} {dv:?}: {got} vs {ds}"
        );
    }
}
