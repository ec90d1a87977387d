//! A zero cotangent (or tangent) contributes exactly zero, whatever the
//! local derivative (adasm.md §7), in every mode the engine has:
//! gradients, vjp with any seed, jvp, Hessian-vector products and
//! Hessians. `programs/where.adasm` holds the shapes (`sqrt`, `log`,
//! `div`, `asin`, `pow` under a `select` or `min` whose other side is
//! chosen, where the unchosen side's derivative is inf or nan); its
//! directives check gradients, tangents and products at one seed, this
//! checks the other modes and seeds, with and without the clean-up of
//! reverse code.

use ad::Engine;
use vm::Value;

fn engine(cleanup: bool) -> Engine {
    let src = testkit::read_program("programs/where.adasm");
    let m = assembler::assemble(&src, "where.adasm").unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::new(m).expect("verifies");
    e.set_reverse_cleanup(cleanup);
    e
}

fn f64_of(v: &Option<Value>) -> f64 {
    match v {
        Some(Value::F64(x)) => *x,
        other => panic!("not an f64: {other:?}"),
    }
}

/// `(function, arguments, gradient)` where the side not chosen has an
/// infinite or nan local derivative.
const CASES: &[(&str, &[f64], &[f64])] = &[
    ("sqrt_where", &[-1.0], &[1.0]),
    ("log_where", &[0.0], &[1.0]),
    ("log_where", &[-2.0], &[1.0]),
    ("div_where", &[0.0, 2.0], &[0.0, 1.0]),
    ("asin_where", &[2.0], &[1.0]),
    ("asin_where", &[1.0], &[1.0]),
    ("min_where", &[-1.0], &[1.0]),
    ("pow_where", &[-4.0], &[3.0]),
    ("pow_where", &[0.0], &[3.0]),
];

#[test]
fn the_side_not_chosen_adds_no_nan_in_any_mode() {
    for cleanup in [true, false] {
        let mut e = engine(cleanup);
        for &(name, args, want) in CASES {
            let f = e.find(name).expect("defined");
            let vals: Vec<Value> = args.iter().map(|x| Value::F64(*x)).collect();
            let what = format!("@{name}{args:?} (clean-up {cleanup})");
            let g = e.grad(f, &vals).expect("grad");
            let got: Vec<f64> = g.grad.iter().map(f64_of).collect();
            assert_eq!(got, want, "grad of {what}");
            // vjp: the gradient scaled by the seed, exactly; a zero seed
            // gives zeros, not nan.
            for seed in [2.0, -0.5, 0.0] {
                let v = e.vjp(f, &vals, &Value::F64(seed)).expect("vjp");
                for (k, w) in want.iter().enumerate() {
                    let got = f64_of(&v.grad[k]);
                    assert_eq!(got, seed * w, "vjp of {what}, seed {seed}");
                }
            }
            // jvp along each axis: the gradient's entry; along zero: 0.
            for (k, w) in want.iter().enumerate() {
                let dir: Vec<Option<Value>> = (0..args.len())
                    .map(|i| Some(Value::F64(if i == k { 1.0 } else { 0.0 })))
                    .collect();
                let t = e.jvp(f, &vals, &dir).expect("jvp");
                assert_eq!(f64_of(&t.tangent), *w, "jvp of {what} along {k}");
            }
            let zero: Vec<Option<Value>> = args.iter().map(|_| Some(Value::F64(0.0))).collect();
            let t = e.jvp(f, &vals, &zero).expect("jvp");
            assert_eq!(f64_of(&t.tangent), 0.0, "jvp of {what} along 0");
            // Hessian-vector products and the Hessian: finite (the chosen
            // side is linear in these cases, or a product with a zero).
            let h = e.hessian(f, &vals).expect("hessian");
            for row in &h.hessian {
                for x in row {
                    assert!(x.is_finite(), "hessian of {what}: {:?}", h.hessian);
                }
            }
            let hv = e.hvp(f, &vals, &zero).expect("hvp");
            for x in &hv.hvp {
                assert_eq!(f64_of(x), 0.0, "hvp of {what} along 0");
            }
        }
    }
}

/// Where the derivative itself is infinite (sqrt at 0), a zero seed still
/// gives exactly zero: the gradient is `0 · inf`, which derived code
/// computes as 0 (the strong-zero product), not nan.
#[test]
fn a_zero_seed_over_an_infinite_derivative_gives_zero() {
    let src = "fn @f(%x: f64) -> f64 {\nentry:\n    %y = sqrt %x\n    ret %y\n}\n\
               fn @g(%x: f64) -> f64 {\nentry:\n    %y = log %x\n    %z = mul %y, 3.0\n    ret %z\n}\n";
    let m = assembler::assemble(src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::new(m).expect("verifies");
    for name in ["f", "g"] {
        let f = e.find(name).expect("defined");
        let at = [Value::F64(0.0)];
        let g = e.grad(f, &at).expect("grad");
        assert!(f64_of(&g.grad[0]).is_infinite(), "@{name}: {g:?}");
        let v = e.vjp(f, &at, &Value::F64(0.0)).expect("vjp");
        assert_eq!(
            f64_of(&v.grad[0]).to_bits(),
            0.0f64.to_bits(),
            "@{name}: {v:?}"
        );
        let t = e.jvp(f, &at, &[Some(Value::F64(0.0))]).expect("jvp");
        assert_eq!(f64_of(&t.tangent), 0.0, "@{name}: {t:?}");
    }
}
