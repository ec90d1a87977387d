//! Hessian-vector products by forward-over-reverse (the forward-mode
//! transform applied to reverse mode's forward function and pullback):
//! random programs against central differences of the gradient, the
//! symmetry `uᵀHv = vᵀHu`, symmetric Hessians, the corpus along the
//! all-ones direction, the shape of the generated code and the library
//! entry points.
//!
//! `ADVM_PROP_CASES` sets the number of random programs (default 200) and
//! `ADVM_PROP_SEED` the first seed, as in `random_programs.rs`.

use ad::{Engine, Hvp};
use testkit::fd::{along, check, dot, random_dir, Verdict};
use testkit::gen::{program, Config, Rng};
use vm::op::Op;
use vm::Value;

fn engine(src: &str) -> Engine {
    let module = assembler::assemble(src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
    Engine::new(module).expect("verifies")
}

/// Central differences of `s ↦ u·∇f(args + s·v)` at 0 against `u·(H v)`.
fn fd_of_gradient(
    e: &mut Engine,
    f: vm::ir::FuncId,
    args: &[Value],
    u: &[Option<Value>],
    v: &[Option<Value>],
    uhv: f64,
) -> Verdict {
    check(
        |ts| {
            let Some(Value::F64(s)) = ts.first() else {
                return None;
            };
            let g = e.grad(f, &along(args, v, *s)).ok()?;
            let (d, _) = dot(&g.grad, u);
            d.is_finite().then_some(d)
        },
        &[Value::F64(0.0)],
        &[Some(Value::F64(uhv))],
    )
}

#[test]
fn powloop_hvp_is_n_times_n_minus_one_x_to_the_n_minus_two() {
    let mut e = engine(&testkit::read_program("programs/powloop.adasm"));
    let f = e.find("pow").expect("exists");
    let (x, n) = (1.0001f64, 1000);
    let h = e
        .hvp(
            f,
            &[Value::F64(x), Value::I64(n)],
            &[Some(Value::F64(2.0)), None],
        )
        .expect("runs");
    let want = 2.0 * (n * (n - 1)) as f64 * x.powi(n as i32 - 2);
    let Some(Value::F64(got)) = h.hvp[0] else {
        panic!("{h:?}")
    };
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    assert_eq!(h.hvp[1], None);
    let Some(Value::F64(g)) = h.grad[0] else {
        panic!("{h:?}")
    };
    let gw = n as f64 * x.powi(n as i32 - 1);
    assert!((g - gw).abs() <= 1e-9 * gw, "{g} vs {gw}");
    assert!(
        (h.value - x.powi(n as i32)).abs() <= 1e-12 * h.value,
        "{}",
        h.value
    );
}

#[test]
fn hvps_of_random_programs_agree_with_differences_of_gradients() {
    let cases = testkit::env_u64("ADVM_PROP_CASES", 200);
    let first = testkit::env_u64("ADVM_PROP_SEED", 1);
    let cfg = Config::default();
    let (mut agree, mut unreliable, mut symmetric, mut hessians) = (0u64, 0u64, 0u64, 0u64);
    let (mut nonzero, mut with_arrays) = (0u64, 0u64);
    let mut failures = Vec::new();
    for seed in first..first + cases {
        let g = program(seed, &cfg);
        let module = assembler::assemble(&g.source, "gen.adasm")
            .unwrap_or_else(|d| panic!("seed {seed}: bad program:\n{d}\n{}", g.source));
        // Odd seeds keep every call a call: the tangents of pullbacks that
        // call pullbacks (`call.acc`), recursion included.
        let policy = if seed % 2 == 1 {
            ad::Policy::NONE
        } else {
            ad::Policy::default()
        };
        let mut e = Engine::with_inlining(module, &policy)
            .unwrap_or_else(|err| panic!("seed {seed}: {err}"));
        e.vm_mut().limits_mut().fuel = Some(10_000_000);
        let f = e.find(&g.entry).expect("entry exists");
        let Ok(grad) = e.grad(f, &g.args) else {
            continue;
        };
        let mut rng = Rng::new(seed ^ 0x4e55);
        let (u, v) = (random_dir(&g.args, &mut rng), random_dir(&g.args, &mut rng));
        let (hv, hu) = match (e.hvp(f, &g.args, &v), e.hvp(f, &g.args, &u)) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                failures.push(format!(
                    "seed {seed}: hvp failed: {a:?} / {b:?}\n{}",
                    g.source
                ));
                continue;
            }
        };
        // Value and gradient as reverse mode's, bit for bit.
        if hv.value.to_bits() != grad.value.to_bits() && !(hv.value.is_nan() && grad.value.is_nan())
        {
            failures.push(format!("seed {seed}: value {} vs {}", hv.value, grad.value));
        }
        if !hv
            .grad
            .iter()
            .zip(&grad.grad)
            .all(|(a, b)| testkit::same_gradient(a, b))
        {
            failures.push(format!(
                "seed {seed}: gradient {:?} vs {:?}",
                hv.grad, grad.grad
            ));
        }
        // Comparisons are relative, with a floor at the gradient's
        // scale: a Hessian that is zero up to rounding may
        // give an exact 0 one way and 1e-17 the other.
        let gscale: f64 = hv
            .grad
            .iter()
            .flatten()
            .map(|g| match g {
                Value::F64(x) => x.abs(),
                Value::Arr(xs) => xs.iter().map(|x| x.abs()).sum(),
                _ => 0.0,
            })
            .sum();
        // uᵀ(Hv) = vᵀ(Hu) to rounding.
        let ((uhv, s1), (vhu, s2)) = (dot(&hv.hvp, &u), dot(&hu.hvp, &v));
        if uhv.is_finite() && vhu.is_finite() {
            symmetric += 1;
            let scale = s1.max(s2).max(uhv.abs());
            if (uhv - vhu).abs() > 1e-9 * scale + 1e-13 * gscale.min(1e300) + 1e-300 {
                failures.push(format!(
                    "seed {seed}: uᵀHv = {uhv} but vᵀHu = {vhu}\n{}",
                    g.source
                ));
            }
        }
        if uhv != 0.0 && uhv.is_finite() {
            nonzero += 1;
            if g.args.iter().any(|a| matches!(a, Value::Arr(_))) {
                with_arrays += 1;
            }
        }
        match fd_of_gradient(&mut e, f, &g.args, &u, &v, uhv) {
            Verdict::Agree => agree += 1,
            Verdict::Unreliable(_) => unreliable += 1,
            Verdict::Disagree(why) => failures.push(format!(
                "seed {seed}: {why}\nargs {:?} u {u:?} v {v:?}\nhvp {:?}\n{}",
                g.args, hv.hvp, g.source
            )),
        }
        // Hessians of few inputs are symmetric.
        let inputs: usize = g
            .args
            .iter()
            .map(|a| match a {
                Value::F64(_) => 1,
                Value::Arr(xs) => xs.len(),
                _ => 0,
            })
            .sum();
        if inputs <= 8 {
            if let Ok(h) = e.hessian(f, &g.args) {
                hessians += 1;
                for i in 0..h.hessian.len() {
                    for j in 0..i {
                        let (a, b) = (h.hessian[i][j], h.hessian[j][i]);
                        let ok = a == b
                            || (a - b).abs()
                                <= 1e-9 * a.abs().max(b.abs()) + 1e-13 * gscale.min(1e300)
                            || (a.is_nan() && b.is_nan());
                        if !ok {
                            failures.push(format!(
                                "seed {seed}: H[{i}][{j}] = {a}, H[{j}][{i}] = {b}\n{}",
                                g.source
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        agree * 10 >= cases * 6,
        "only {agree} of {cases} products were checked ({unreliable} near kinks)"
    );
    assert!(
        symmetric * 10 >= cases * 8,
        "only {symmetric} symmetries checked"
    );
    // Most programs are not linear: the products checked are not all zero.
    assert!(nonzero * 2 >= cases, "only {nonzero} nonzero products");
    eprintln!(
        "{agree} products agreed with differences of gradients ({unreliable} near kinks), \
         {nonzero} of them nonzero ({with_arrays} with array arguments), \
         {symmetric} symmetries held, {hessians} Hessians symmetric"
    );
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

fn ones(args: &[Value]) -> Vec<Option<Value>> {
    args.iter()
        .map(|a| match a {
            Value::F64(_) => Some(Value::F64(1.0)),
            Value::Arr(xs) => Some(Value::Arr(vec![1.0; xs.len()])),
            _ => None,
        })
        .collect()
}

/// Every corpus function with an `f64` result and a differentiable
/// parameter whose gradient is finite at arguments of 0.5 (i64: 3, arrays
/// of four): the product along all ones is finite and equals central
/// differences of the gradient along all ones (summed), and its value and
/// gradient are reverse mode's.
#[test]
fn corpus_hvps_along_ones_equal_differences_of_gradients() {
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
    let (mut checked, mut unreliable) = (0, 0);
    let mut failures = Vec::new();
    for path in &files {
        let src = std::fs::read_to_string(path).expect("readable");
        // A stop-gradient is constant in the gradient code too, so the
        // product differentiates a gradient that differences do not see
        // (nograd.adasm: f = x·nograd(x) + x has H = 0, while the gradient
        // nograd(x) + 1 changes with x).
        if src.contains("nograd") {
            continue;
        }
        let Ok(module) = assembler::assemble(&src, &path.display().to_string()) else {
            continue; // the corpus holds programs that must fail too
        };
        let names: Vec<(String, Vec<vm::Type>)> = module
            .funcs
            .iter()
            .filter(|f| f.ret == vm::ir::RetType::One(vm::Type::F64))
            .map(|f| (f.name.clone(), f.param_types()))
            .filter(|(_, t)| t.iter().any(|t| t.is_differentiable()))
            .collect();
        // Inlined, and every call a call (the tangents of pullbacks calling
        // pullbacks).
        for policy in [ad::Policy::default(), ad::Policy::NONE] {
            let Ok(mut e) = Engine::with_inlining(module.clone(), &policy) else {
                continue;
            };
            e.vm_mut().limits_mut().fuel = Some(50_000_000);
            for (name, types) in names.clone() {
                let f = e.find(&name).expect("listed");
                let args = default_args(&types);
                let Ok(grad) = e.grad(f, &args) else {
                    continue; // traps at this point (a corpus of traps too)
                };
                if !dot(&grad.grad, &ones(&args)).1.is_finite() {
                    continue;
                }
                let dir = ones(&args);
                let h = match e.hvp(f, &args, &dir) {
                    Ok(h) => h,
                    Err(err) => {
                        failures.push(format!("{}: @{name}: {err}", path.display()));
                        continue;
                    }
                };
                let (uhv, scale) = dot(&h.hvp, &dir);
                if !scale.is_finite()
                    || h.value.to_bits() != grad.value.to_bits()
                    || h.grad != grad.grad
                {
                    failures.push(format!(
                        "{}: @{name}: hvp {h:?}, grad {grad:?}",
                        path.display()
                    ));
                    continue;
                }
                match fd_of_gradient(&mut e, f, &args, &dir, &dir, uhv) {
                    Verdict::Agree => {}
                    Verdict::Unreliable(_) => unreliable += 1,
                    Verdict::Disagree(why) => {
                        failures.push(format!("{}: @{name}: {why}", path.display()))
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 60, "only {checked} corpus functions checked");
    eprintln!("{checked} corpus functions (twice: inlined, not): hvp along ones = differences of grad ({unreliable} near kinks)");
}

#[test]
fn hvp_wrt_is_the_block_of_the_selected_parameters() {
    // f(x, y, z) = x²·y + sin(y)·z: H = [[2y, 2x, 0], [2x, -sin(y)·z, cos y], [0, cos y, 0]].
    let mut e = engine(
        "fn @f(%x: f64, %y: f64, %z: f64) -> f64 {
entry:
    %a = mul %x, %x
    %b = mul %a, %y
    %s = sin %y
    %c = mul %s, %z
    %r = add %b, %c
    ret %r
}",
    );
    let f = e.find("f").expect("exists");
    let (x, y, z) = (0.7, -1.3, 2.1);
    let args = [Value::F64(x), Value::F64(y), Value::F64(z)];
    let h = e.hessian(f, &args).expect("runs");
    let want = [
        [2.0 * y, 2.0 * x, 0.0],
        [2.0 * x, -y.sin() * z, y.cos()],
        [0.0, y.cos(), 0.0],
    ];
    for i in 0..3 {
        for j in 0..3 {
            assert!(
                (h.hessian[i][j] - want[i][j]).abs() <= 1e-14,
                "{:?} vs {want:?}",
                h.hessian
            );
        }
    }
    // With respect to x and z: the rows and columns of x and z only.
    let wrt = [true, false, true];
    let dir = [
        Some(Value::F64(1.0)),
        Some(Value::F64(5.0)),
        Some(Value::F64(2.0)),
    ];
    let p = e.hvp_wrt(f, &args, &dir, &wrt).expect("runs");
    assert_eq!(p.hvp[1], None);
    assert_eq!(p.grad[1], None);
    assert_eq!(p.hvp[0], Some(Value::F64(2.0 * y)));
    assert_eq!(p.hvp[2], Some(Value::F64(0.0)));
    let hw = e.hessian_wrt(f, &args, &wrt).expect("runs");
    assert_eq!(hw.hessian, vec![vec![2.0 * y, 0.0], vec![0.0, 0.0]]);
    // The prepared form gives the same numbers.
    let prep = e.prepare_hvp(f, &[true; 3]).expect("prepares");
    let (mut g, mut hv) = ([0.0; 3], [0.0; 3]);
    let v = e
        .hvp_prepared(&prep, &args, &[1.0, 0.0, 0.0], &mut g, &mut hv)
        .expect("runs");
    assert_eq!(v, x * x * y + y.sin() * z);
    assert_eq!(hv, [2.0 * y, 2.0 * x, 0.0]);
    assert_eq!(g[0], 2.0 * x * y);
    // Bad calls are refused with a message, not a panic.
    let err = e
        .hvp_prepared(&prep, &args, &[1.0], &mut g, &mut hv)
        .expect_err("short direction");
    assert!(err.to_string().contains("direction"), "{err}");
    let err = e
        .hvp(f, &args, &[Some(Value::F64(1.0))])
        .expect_err("short direction");
    assert!(err.to_string().contains("direction"), "{err}");
}

#[test]
fn hvp_through_calls_recursion_and_arrays() {
    // A helper called through, recursion, an array read and written in
    // place: the products agree with differences of gradients.
    let src = "
fn @sq(%x: f64) -> f64 {
entry:
    %y = mul %x, %x
    ret %y
}
fn @rec(%x: f64, %n: i64) -> f64 {
entry:
    %c = gt %n, 0
    br %c, more, done
more:
    %m = sub %n, 1
    %r = call @rec(%x, %m)
    %s = sin %r
    %t = mul %s, %x
    ret %t
done:
    ret %x
}
fn @f(%v: f64[], %x: f64) -> f64 {
entry:
    %a = aget %v, 0
    %b = call @sq(%a)
    %p = mul %b, %x
    aset %v, 1, %p
    %q = aget %v, 1
    %e = exp %q
    %r = call @rec(%e, 3)
    %w = aget %v, 2
    %z = mul %r, %w
    ret %z
}";
    let module = assembler::assemble(src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    let f = e.find("f").expect("exists");
    let args = [Value::Arr(vec![0.3, 0.1, -0.7]), Value::F64(0.4)];
    let mut rng = Rng::new(7);
    for _ in 0..5 {
        let (u, v) = (random_dir(&args, &mut rng), random_dir(&args, &mut rng));
        let h: Hvp = e.hvp(f, &args, &v).expect("runs");
        let (uhv, _) = dot(&h.hvp, &u);
        assert!(uhv != 0.0);
        let verdict = fd_of_gradient(&mut e, f, &args, &u, &v, uhv);
        assert_eq!(verdict, Verdict::Agree, "{h:?}");
    }
}

/// The opcodes of every function a Hessian-vector product runs.
fn hvp_ops(e: &mut Engine, name: &str) -> (Vec<Op>, Vec<Op>) {
    let f = e.find(name).expect("exists");
    let (fwd, rev) = e
        .derive_hvp(f, &ad::analysis::all_params(e.module().func(f)))
        .expect("derives");
    let ops = |g| e.program().func(g).code.iter().map(|i| i.op).collect();
    (ops(fwd), ops(rev))
}

#[test]
fn hvp_code_of_powloop_pairs_every_push_with_its_tangent() {
    let mut e = engine(&testkit::read_program("programs/powloop.adasm"));
    let (fwd, rev) = hvp_ops(&mut e, "pow");
    let f = e.find("pow").expect("exists");
    let d = e.derive(f).expect("derives");
    let count = |ops: &[Op], which: &[Op]| ops.iter().filter(|o| which.contains(o)).count();
    let pushes = [Op::CommsPush, Op::CommsReserve, Op::CommsPushR, Op::MulPush];
    let pops = [Op::CommsPop, Op::MulPop, Op::AccMulPop, Op::AccMulPopMul];
    let fwd0: Vec<Op> = e.program().func(d.fwd).code.iter().map(|i| i.op).collect();
    // Two places push an f64 (the loop's product, and `x` at `ret`; the
    // counters are i64): with tangents, one more push each.
    assert_eq!(
        count(&fwd0, &pushes) + 2,
        count(&fwd, &pushes),
        "{fwd0:?}\n{fwd:?}"
    );
    assert!(count(&rev, &pops) >= 3, "{rev:?}");
    // No interpreter of dual numbers: plain opcodes, the tangent products
    // strong-zero ones.
    assert!(
        rev.contains(&Op::AccMul) || rev.contains(&Op::AccMulPop),
        "{rev:?}"
    );
    assert!(!fwd.contains(&Op::CallAcc) && !rev.contains(&Op::CallN));
}

/// Every opcode reverse mode writes has a tangent rule: the product code of
/// every corpus function with an `f64` result (and of every derived
/// function it calls) builds, lowers and verifies, whatever its arguments
/// would do. A missing rule is an internal error naming the opcode.
#[test]
fn every_corpus_function_has_product_code() {
    let mut built = 0;
    for dir in ["programs", "programs/bench"] {
        let root = testkit::workspace_root().join(dir);
        for entry in std::fs::read_dir(&root).expect("corpus") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|x| x != "adasm") {
                continue;
            }
            let src = std::fs::read_to_string(&path).expect("readable");
            let Ok(module) = assembler::assemble(&src, &path.display().to_string()) else {
                continue;
            };
            let Ok(mut e) = Engine::with_inlining(module, &ad::Policy::NONE) else {
                continue;
            };
            let funcs: Vec<vm::ir::FuncId> = (0..e.module().funcs.len())
                .map(|i| vm::ir::FuncId(i as u32))
                .filter(|f| e.module().func(*f).ret == vm::ir::RetType::One(vm::Type::F64))
                .collect();
            for f in funcs {
                let wrt = ad::analysis::all_params(e.module().func(f));
                match e.derive_hvp(f, &wrt) {
                    Ok(_) => built += 1,
                    Err(err) => panic!("{}: {err}", path.display()),
                }
            }
        }
    }
    assert!(built >= 60, "only {built} functions");
}
