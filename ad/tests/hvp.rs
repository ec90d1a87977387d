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
use testkit::fd::{check, Verdict};
use testkit::gen::{program, Config, Rng};
use vm::op::Op;
use vm::Value;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn engine(src: &str) -> Engine {
    let module = assembler::assemble(src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
    Engine::new(module).expect("verifies")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(testkit::workspace_root().join(file)).expect("program exists")
}

/// A direction shaped like `args`: random entries in [-1, 1) for `f64` and
/// `f64[]` arguments, `None` for the others.
fn random_dir(args: &[Value], rng: &mut Rng) -> Vec<Option<Value>> {
    args.iter()
        .map(|a| match a {
            Value::F64(_) => Some(Value::F64(rng.float(-1.0, 1.0))),
            Value::Arr(xs) => Some(Value::Arr(
                xs.iter().map(|_| rng.float(-1.0, 1.0)).collect(),
            )),
            Value::I64(_) | Value::Bool(_) => None,
        })
        .collect()
}

/// `g · d` over the flattened inputs, and the sum of the magnitudes of its
/// terms (the scale its rounding error is relative to).
fn dot(grad: &[Option<Value>], dir: &[Option<Value>]) -> (f64, f64) {
    let (mut s, mut m) = (0.0, 0.0);
    for (g, d) in grad.iter().zip(dir) {
        match (g, d) {
            (Some(Value::F64(g)), Some(Value::F64(d))) => {
                s += g * d;
                m += (g * d).abs();
            }
            (Some(Value::Arr(gs)), Some(Value::Arr(ds))) => {
                for (g, d) in gs.iter().zip(ds) {
                    s += g * d;
                    m += (g * d).abs();
                }
            }
            _ => {}
        }
    }
    (s, m)
}

/// `args + t·dir`.
fn along(args: &[Value], dir: &[Option<Value>], t: f64) -> Vec<Value> {
    args.iter()
        .zip(dir)
        .map(|(a, d)| match (a, d) {
            (Value::F64(x), Some(Value::F64(dx))) => Value::F64(x + t * dx),
            (Value::Arr(xs), Some(Value::Arr(ds))) => {
                Value::Arr(xs.iter().zip(ds).map(|(x, dx)| x + t * dx).collect())
            }
            (a, _) => a.clone(),
        })
        .collect()
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
    let mut e = engine(&read("programs/powloop.adasm"));
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
    let cases = env_u64("ADVM_PROP_CASES", 200);
    let first = env_u64("ADVM_PROP_SEED", 1);
    let cfg = Config::default();
    let (mut agree, mut unreliable, mut symmetric, mut hessians) = (0u64, 0u64, 0u64, 0u64);
    let (mut nonzero, mut with_arrays) = (0u64, 0u64);
    let mut failures = Vec::new();
    for seed in first..first + cases {
        let g = program(seed, &cfg);
        let module = assembler::assemble(&g.source, "gen.adasm")
            .unwrap_or_else(|d| panic!("seed {seed}: bad program:\n{d}\n{}", g.source));
        let mut e = Engine::new(module).unwrap_or_else(|err| panic!("seed {seed}: {err}"));
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
        // uᵀ(Hv) = vᵀ(Hu) to rounding.
        let ((uhv, s1), (vhu, s2)) = (dot(&hv.hvp, &u), dot(&hu.hvp, &v));
        if uhv.is_finite() && vhu.is_finite() {
            symmetric += 1;
            let scale = s1.max(s2).max(uhv.abs());
            if (uhv - vhu).abs() > 1e-9 * scale + 1e-300 {
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
                            || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
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
