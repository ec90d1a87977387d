//! Custom derivative rules (`rule @f jvp @f_jvp`): every mode uses the
//! rule, checked against closed forms, against the same program without the
//! rule, and against the identities that tie the modes together.

use ad::Engine;
use vm::ir::{FuncId, Rule};
use vm::Value;

fn engine(file: &str) -> Engine {
    let src = testkit::read_program(file);
    let m = assembler::assemble(&src, file).unwrap_or_else(|e| panic!("{}", e.render()));
    Engine::new(m).expect("verifies")
}

/// The same program with its `rule` lines removed.
fn engine_without_rules(file: &str) -> Engine {
    let src: String = testkit::read_program(file)
        .lines()
        .filter(|l| !l.starts_with("rule "))
        .map(|l| format!("{l}\n"))
        .collect();
    let m = assembler::assemble(&src, file).unwrap_or_else(|e| panic!("{}", e.render()));
    assert!(m.rules.is_empty());
    Engine::new(m).expect("verifies")
}

fn func(e: &Engine, name: &str) -> FuncId {
    e.find(name).unwrap_or_else(|| panic!("@{name} defined"))
}

fn f64_of(v: &Option<Value>) -> f64 {
    match v {
        Some(Value::F64(x)) => *x,
        other => panic!("not an f64: {other:?}"),
    }
}

fn arr_of(v: &Option<Value>) -> Vec<f64> {
    match v {
        Some(Value::Arr(x)) => x.clone(),
        other => panic!("not an array: {other:?}"),
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

#[track_caller]
fn assert_close(a: f64, b: f64, rel: f64) {
    assert!(close(a, b, rel), "{a} vs {b} (relative tolerance {rel})");
}

#[test]
fn cbrt_rule_is_the_closed_form_in_every_mode() {
    let mut e = engine("programs/rule_cbrt.adasm");
    let f = func(&e, "cbrt");
    for x in [0.3f64, 1.0, 2.0, 27.0, 1000.0, 12345.678] {
        let c = x.cbrt();
        let d1 = 1.0 / (3.0 * c * c);
        let d2 = -2.0 / (9.0 * x * c * c);
        let g = e.grad(f, &[Value::F64(x)]).expect("grad");
        assert_close(g.value, c, 4e-16);
        assert_close(f64_of(&g.grad[0]), d1, 4e-16);
        let t = e
            .jvp(f, &[Value::F64(x)], &[Some(Value::F64(0.5))])
            .expect("jvp");
        assert_close(f64_of(&t.tangent), 0.5 * d1, 4e-16);
        let h = e
            .hvp(f, &[Value::F64(x)], &[Some(Value::F64(0.5))])
            .expect("hvp");
        assert_close(f64_of(&h.grad[0]), d1, 4e-16);
        assert_close(f64_of(&h.hvp[0]), 0.5 * d2, 1e-15);
    }
}

#[test]
fn without_the_rule_the_derivative_goes_through_the_iterations() {
    let mut with = engine("programs/rule_cbrt.adasm");
    let mut without = engine_without_rules("programs/rule_cbrt.adasm");
    let (f, g) = (func(&with, "cbrt"), func(&without, "cbrt"));
    let ruled = with.disasm_ad(f).expect("derives");
    let iterated = without.disasm_ad(g).expect("derives");
    assert!(ruled.contains("; from rule @cbrt jvp @cbrt_jvp"), "{ruled}");
    assert!(!iterated.contains("from rule"), "{iterated}");
    // The rule's pair runs no loop of its own: its pullback calls the
    // rule's, which is straight-line code; the derived iteration replays
    // sixty steps (a counted loop in the reverse code).
    assert!(ruled.contains("call.acc    @cbrt_jvp.rev"), "{ruled}");
    assert_ne!(ruled, iterated);
    for x in [0.3, 2.0, 1000.0] {
        let a = with.grad(f, &[Value::F64(x)]).expect("grad");
        let b = without.grad(g, &[Value::F64(x)]).expect("grad");
        assert_eq!(a.value, b.value, "the value comes from the body either way");
        assert_close(f64_of(&a.grad[0]), f64_of(&b.grad[0]), 1e-12);
        let dir = [Some(Value::F64(1.0))];
        let ha = with.hvp(f, &[Value::F64(x)], &dir).expect("hvp");
        let hb = without.hvp(g, &[Value::F64(x)], &dir).expect("hvp");
        assert_close(f64_of(&ha.hvp[0]), f64_of(&hb.hvp[0]), 1e-9);
    }
}

#[test]
fn softplus_rule_is_the_sigmoid_without_overflow() {
    let mut e = engine("programs/rule_softplus.adasm");
    let f = func(&e, "softplus");
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    for x in [-800.0f64, -30.0, -3.0, -0.5, 0.25, 2.0, 30.0, 800.0, 1e300] {
        let g = e.grad(f, &[Value::F64(x)]).expect("grad");
        let d = f64_of(&g.grad[0]);
        assert!(g.value.is_finite() && d.is_finite(), "x = {x}: {g:?}");
        assert_close(d, sigmoid(x), 1e-15);
        let t = e
            .jvp(f, &[Value::F64(x)], &[Some(Value::F64(2.0))])
            .expect("jvp");
        assert_close(f64_of(&t.tangent), 2.0 * sigmoid(x), 1e-15);
        let h = e
            .hvp(f, &[Value::F64(x)], &[Some(Value::F64(1.0))])
            .expect("hvp");
        // σ'(x) = e^-|x| / (1 + e^-|x|)², without the cancellation of
        // σ(1 - σ) for large x.
        let ex = (-x.abs()).exp();
        let ds = ex / ((1.0 + ex) * (1.0 + ex));
        assert!(f64_of(&h.hvp[0]).is_finite());
        assert_close(f64_of(&h.hvp[0]), ds, 1e-14);
    }
    assert_eq!(e.grad(f, &[Value::F64(800.0)]).expect("grad").value, 800.0);
}

#[test]
fn array_rules_give_array_cotangents_and_compose() {
    let mut e = engine("programs/rule_norm.adasm");
    let sumsq = func(&e, "sumsq");
    let energy = func(&e, "energy");
    let v = vec![1.0, -2.0, 0.5, 3.0];
    let dir = vec![0.5, 1.0, -1.0, 0.25];
    let g = e.grad(sumsq, &[Value::Arr(v.clone())]).expect("grad");
    assert_eq!(arr_of(&g.grad[0]), vec![2.0, -4.0, 1.0, 6.0]);
    let h = e
        .hvp(
            sumsq,
            &[Value::Arr(v.clone())],
            &[Some(Value::Arr(dir.clone()))],
        )
        .expect("hvp");
    assert_eq!(arr_of(&h.hvp[0]), vec![1.0, 2.0, -2.0, 0.5]);

    // energy(v, s) = s‖v‖ + ‖v‖² + s²: gradient (s u + 2v, ‖v‖ + 2s) with
    // u = v/‖v‖; Hessian s (I - u uᵀ)/‖v‖ + 2I, ∂²/∂v∂s = u, ∂²/∂s² = 2.
    let s = 0.7;
    let r = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let u: Vec<f64> = v.iter().map(|x| x / r).collect();
    let args = [Value::Arr(v.clone()), Value::F64(s)];
    let g = e.grad(energy, &args).expect("grad");
    let gv = arr_of(&g.grad[0]);
    for i in 0..v.len() {
        assert_close(gv[i], s * u[i] + 2.0 * v[i], 1e-15);
    }
    assert_close(f64_of(&g.grad[1]), r + 2.0 * s, 1e-15);
    let ds = -0.3;
    let h = e
        .hvp(
            energy,
            &args,
            &[Some(Value::Arr(dir.clone())), Some(Value::F64(ds))],
        )
        .expect("hvp");
    let udir: f64 = u.iter().zip(&dir).map(|(a, b)| a * b).sum();
    let hv = arr_of(&h.hvp[0]);
    for i in 0..v.len() {
        let want = s * (dir[i] - u[i] * udir) / r + 2.0 * dir[i] + u[i] * ds;
        assert_close(hv[i], want, 1e-14);
    }
    assert_close(f64_of(&h.hvp[1]), udir + 2.0 * ds, 1e-14);
}

/// ⟨jvp(x, v), w⟩ = ⟨v, vjp(x, w)⟩ for a scalar result (w a number).
#[test]
fn jvp_and_vjp_agree_through_rules() {
    let cases: [(&str, &str, Vec<Value>, Vec<Value>); 3] = [
        (
            "programs/rule_cbrt.adasm",
            "wave",
            vec![Value::F64(3.0), Value::F64(0.7)],
            vec![Value::F64(0.3), Value::F64(-1.1)],
        ),
        (
            "programs/rule_softplus.adasm",
            "softplus",
            vec![Value::F64(1.7)],
            vec![Value::F64(-0.4)],
        ),
        (
            "programs/rule_norm.adasm",
            "energy",
            vec![Value::Arr(vec![0.3, -1.2, 2.5]), Value::F64(0.8)],
            vec![Value::Arr(vec![1.0, 0.5, -0.25]), Value::F64(2.0)],
        ),
    ];
    for (file, name, args, v) in cases {
        let mut e = engine(file);
        let f = func(&e, name);
        let dir: Vec<Option<Value>> = v.iter().cloned().map(Some).collect();
        let t = e.jvp(f, &args, &dir).expect("jvp");
        let w = 1.7;
        let b = e.vjp(f, &args, &Value::F64(w)).expect("vjp");
        let mut rhs = 0.0;
        for (vi, gi) in v.iter().zip(&b.grad) {
            match (vi, gi) {
                (Value::F64(a), Some(Value::F64(g))) => rhs += a * g,
                (Value::Arr(a), Some(Value::Arr(g))) => {
                    rhs += a.iter().zip(g).map(|(x, y)| x * y).sum::<f64>()
                }
                other => panic!("{other:?}"),
            }
        }
        assert_close(f64_of(&t.tangent) * w, rhs, 1e-14);
    }
}

#[test]
fn hessians_through_rules_are_symmetric() {
    for (file, name, args) in [
        (
            "programs/rule_cbrt.adasm",
            "wave",
            vec![Value::F64(3.0), Value::F64(0.7)],
        ),
        (
            "programs/rule_norm.adasm",
            "energy",
            vec![Value::Arr(vec![0.3, -1.2, 2.5]), Value::F64(0.8)],
        ),
    ] {
        let mut e = engine(file);
        let f = func(&e, name);
        let h = e.hessian(f, &args).expect("hessian").hessian;
        for (i, row) in h.iter().enumerate() {
            for (j, x) in row.iter().enumerate() {
                assert_close(*x, h[j][i], 1e-13);
            }
        }
    }
}

#[test]
fn listings_note_the_rule_in_every_mode() {
    let mut e = engine("programs/rule_cbrt.adasm");
    let f = func(&e, "wave");
    let note = "; from rule @cbrt jvp @cbrt_jvp";
    assert!(e.disasm_ad(f).expect("ad").contains(note));
    assert!(e.disasm_jvp(f).expect("jvp").contains(note));
    assert!(e.disasm_hvp(f).expect("hvp").contains(note));
    assert_eq!(
        e.rules_used(f),
        vec!["rule @cbrt jvp @cbrt_jvp".to_string()]
    );
    let e = engine("programs/rule_norm.adasm");
    let energy = func(&e, "energy");
    assert_eq!(
        e.rules_used(energy),
        vec![
            "rule @norm jvp @norm_jvp".to_string(),
            "rule @sumsq jvp @sumsq_jvp".to_string()
        ]
    );
}

#[test]
fn functions_with_rules_are_not_inlined() {
    let e = engine("programs/rule_cbrt.adasm");
    let wave = e.module().func(func(&e, "wave"));
    let cbrt = func(&e, "cbrt");
    assert!(wave
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .any(|i| i.callee == Some(cbrt)));
}

#[test]
fn rules_built_by_hand_are_checked() {
    let src = testkit::read_program("programs/rule_cbrt.adasm");
    let m = assembler::assemble(&src, "rule_cbrt.adasm").expect("assembles");
    let (cbrt, jvp, wave) = (
        m.find("cbrt").expect("cbrt"),
        m.find("cbrt_jvp").expect("jvp"),
        m.find("wave").expect("wave"),
    );
    let rule = |f, j| Rule {
        f,
        jvp: j,
        loc: Default::default(),
    };
    for (rules, want) in [
        (vec![rule(cbrt, FuncId(99))], "missing function"),
        (vec![rule(cbrt, jvp), rule(cbrt, jvp)], "two rules"),
        (vec![rule(wave, jvp)], "must take `@wave`'s 2 parameter(s)"),
        (vec![rule(cbrt, cbrt)], "its own rule"),
    ] {
        let mut m = m.clone();
        m.rules = rules;
        match Engine::new(m) {
            Err(e) => assert!(e.to_string().contains(want), "{e}"),
            Ok(_) => panic!("accepted: {want}"),
        }
    }
}

#[test]
fn rules_print_back() {
    let src = testkit::read_program("programs/rule_norm.adasm");
    let m = assembler::assemble(&src, "rule_norm.adasm").expect("assembles");
    let text = assembler::print_module(&m);
    assert!(text.contains(
        "rule @sumsq jvp @sumsq_jvp\nrule @norm jvp @norm_jvp\nrule @scale jvp @scale_jvp\n"
    ));
    let again = assembler::assemble(&text, "printed.adasm").expect("reassembles");
    assert_eq!(again.rules.len(), 3);
    assert_eq!(
        again.rules.iter().map(|r| (r.f, r.jvp)).collect::<Vec<_>>(),
        m.rules.iter().map(|r| (r.f, r.jvp)).collect::<Vec<_>>()
    );
}

/// A rule on a function of f64, i64 and f64[] parameters (the i64 one gets
/// no tangent): every mode agrees with the derivation of the body, which
/// the rule matches exactly.
#[test]
fn rules_with_integer_and_array_parameters_match_the_body() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/rules_mixed.adasm"
    ))
    .expect("readable");
    let with = assembler::assemble(&src, "mixed").expect("assembles");
    let mut without = with.clone();
    without.rules.clear();
    let mut with = Engine::new(with).expect("verifies");
    let mut without = Engine::new(without).expect("verifies");
    let g = func(&with, "g");
    assert!(with
        .disasm_ad(g)
        .expect("ad")
        .contains("; from rule @f jvp @f_jvp"));
    let args = [Value::F64(1.3), Value::Arr(vec![0.5, -0.2])];
    let a = with.grad(g, &args).expect("grad");
    let b = without.grad(g, &args).expect("grad");
    assert_close(f64_of(&a.grad[0]), f64_of(&b.grad[0]), 1e-13);
    for (x, y) in arr_of(&a.grad[1]).iter().zip(arr_of(&b.grad[1])) {
        assert_close(*x, y, 1e-13);
    }
    let ha = with.hessian(g, &args).expect("hessian").hessian;
    let hb = without.hessian(g, &args).expect("hessian").hessian;
    for (ra, rb) in ha.iter().zip(&hb) {
        for (x, y) in ra.iter().zip(rb) {
            assert_close(*x, *y, 1e-12);
        }
    }
    let f = func(&with, "f");
    let fargs = [Value::F64(1.3), Value::I64(4), Value::Arr(vec![0.5, -0.2])];
    let dir = [
        Some(Value::F64(0.5)),
        None,
        Some(Value::Arr(vec![1.0, 2.0])),
    ];
    let ta = with.jvp(f, &fargs, &dir).expect("jvp");
    let tb = without.jvp(f, &fargs, &dir).expect("jvp");
    assert_close(f64_of(&ta.tangent), f64_of(&tb.tangent), 1e-13);
    let ga = with.grad(f, &fargs).expect("grad");
    assert_eq!(ga.grad[1], None);
}

/// `ad/tests/rules_array.adasm`, with or without its rule line.
fn array_rule_engines() -> (Engine, Engine) {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/rules_array.adasm"
    ))
    .expect("readable");
    let with =
        assembler::assemble(&src, "rules_array").unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(with.rules.len(), 1);
    let mut without = with.clone();
    without.rules.clear();
    (
        Engine::new(with).expect("verifies"),
        Engine::new(without).expect("verifies"),
    )
}

/// The array a run of `f` returns.
fn run_arr(e: &mut Engine, f: FuncId, args: &[Value]) -> Vec<f64> {
    match e.run(f, args).expect("runs") {
        Value::Arr(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

/// The central difference of `f` (an array result) along `dir` (shaped
/// like the arguments, `None` for none), element by element: the one
/// finite-difference checker's ([`ad::fd::directional`]).
fn fd_along(e: &mut Engine, f: FuncId, args: &[Value], dir: &[Option<Value>]) -> Vec<f64> {
    let n = run_arr(e, f, args).len();
    (0..n)
        .map(|k| {
            ad::fd::directional(args, dir, |at, _| Ok::<f64, ()>(run_arr(e, f, at)[k]))
                .unwrap_or(f64::NAN)
        })
        .collect()
}

/// A rule on a function returning `f64[]`: its jvp is the rule's tangent
/// array (against finite differences of `@unit` itself and against the
/// derivation of the body), its vjp the transpose (the dot-product
/// identity, with an array seed), its Jacobian the rule's columns; the
/// reverse code is made from the rule.
#[test]
fn array_result_rules_serve_jvp_vjp_and_jacobian() {
    let (mut with, mut without) = array_rule_engines();
    let f = func(&with, "unit");
    let energy = func(&with, "energy");
    assert!(with
        .disasm_ad(energy)
        .expect("ad")
        .contains("; from rule @unit jvp @unit_jvp"));
    assert!(with
        .disasm_jvp(f)
        .expect("jvp")
        .contains("; from rule @unit jvp @unit_jvp"));
    let args = [Value::Arr(vec![0.3, -1.2, 2.5]), Value::F64(0.8)];
    let dir = [
        Some(Value::Arr(vec![1.0, 0.5, -0.25])),
        Some(Value::F64(2.0)),
    ];
    let t = with.jvp(f, &args, &dir).expect("jvp");
    let tb = without.jvp(f, &args, &dir).expect("jvp");
    let fd = fd_along(&mut with, f, &args, &dir);
    let ta = arr_of(&t.tangent);
    assert_eq!(ta.len(), 3);
    for ((a, b), d) in ta.iter().zip(arr_of(&tb.tangent)).zip(&fd) {
        assert_close(*a, b, 1e-13);
        assert_close(*a, *d, 1e-7);
    }
    // ⟨jvp(x, v), w⟩ = ⟨v, vjp(x, w)⟩ with an array cotangent w.
    let w = vec![0.7, -1.3, 0.4];
    let b = with.vjp(f, &args, &Value::Arr(w.clone())).expect("vjp");
    let bb = without.vjp(f, &args, &Value::Arr(w.clone())).expect("vjp");
    let lhs: f64 = ta.iter().zip(&w).map(|(x, y)| x * y).sum();
    let gv = arr_of(&b.grad[0]);
    let rhs = gv
        .iter()
        .zip([1.0, 0.5, -0.25])
        .map(|(g, v)| g * v)
        .sum::<f64>()
        + f64_of(&b.grad[1]) * 2.0;
    assert_close(lhs, rhs, 1e-14);
    for (a, c) in gv.iter().zip(arr_of(&bb.grad[0])) {
        assert_close(*a, c, 1e-13);
    }
    assert_close(f64_of(&b.grad[1]), f64_of(&bb.grad[1]), 1e-13);
    // Twice in a row: the pullback leaves nothing behind.
    let again = with.vjp(f, &args, &Value::Arr(w.clone())).expect("vjp");
    assert_eq!(again.grad, b.grad);
    // The Jacobian, column by column, is the rule's tangent along each
    // unit direction; row i is the vjp with seed e_i.
    let j = with.jacobian(f, &args).expect("jacobian").jacobian;
    let jb = without.jacobian(f, &args).expect("jacobian").jacobian;
    assert_eq!((j.len(), j[0].len()), (3, 4));
    for (i, (row, rowb)) in j.iter().zip(&jb).enumerate() {
        let mut seed = vec![0.0; 3];
        seed[i] = 1.0;
        let r = with.vjp(f, &args, &Value::Arr(seed)).expect("vjp");
        let mut flat = arr_of(&r.grad[0]);
        flat.push(f64_of(&r.grad[1]));
        for ((x, y), z) in row.iter().zip(rowb).zip(&flat) {
            assert_close(*x, *y, 1e-13);
            assert_close(*x, *z, 1e-14);
        }
    }
}

/// A scalar function calling a function with an array-result rule: its
/// gradient, Hessian-vector product and Hessian (symmetric) go through the
/// rule and agree with the derivation of the body and with finite
/// differences.
#[test]
fn scalar_functions_through_array_result_rules() {
    let (mut with, mut without) = array_rule_engines();
    let f = func(&with, "energy");
    let args = [Value::Arr(vec![0.3, -1.2, 2.5]), Value::F64(0.8)];
    let g = with.grad(f, &args).expect("grad");
    let gb = without.grad(f, &args).expect("grad");
    assert_eq!(g.value, gb.value);
    let value = |e: &mut Engine, a: &[Value]| match e.run(f, a).expect("runs") {
        Value::F64(y) => y,
        other => panic!("{other:?}"),
    };
    let gv = arr_of(&g.grad[0]);
    for k in 0..3 {
        let mut unit = vec![0.0; 3];
        unit[k] = 1.0;
        let dir = [Some(Value::Arr(unit)), None];
        let fd = ad::fd::directional(&args, &dir, |at, _| Ok::<f64, ()>(value(&mut with, at)))
            .expect("runs");
        assert_close(gv[k], fd, 1e-7);
        assert_close(gv[k], arr_of(&gb.grad[0])[k], 1e-13);
    }
    assert_close(f64_of(&g.grad[1]), f64_of(&gb.grad[1]), 1e-13);
    let dir = [
        Some(Value::Arr(vec![1.0, 0.5, -0.25])),
        Some(Value::F64(-0.3)),
    ];
    let hv = with.hvp(f, &args, &dir).expect("hvp");
    let hvb = without.hvp(f, &args, &dir).expect("hvp");
    for (a, b) in arr_of(&hv.hvp[0]).iter().zip(arr_of(&hvb.hvp[0])) {
        assert_close(*a, b, 1e-12);
    }
    assert_close(f64_of(&hv.hvp[1]), f64_of(&hvb.hvp[1]), 1e-12);
    assert!(with
        .disasm_hvp(f)
        .expect("hvp")
        .contains("; from rule @unit jvp @unit_jvp"));
    let hs = with.hessian(f, &args).expect("hessian").hessian;
    assert_eq!(hs.len(), 4);
    for (i, row) in hs.iter().enumerate() {
        for (j, x) in row.iter().enumerate() {
            assert_close(*x, hs[j][i], 1e-12);
        }
    }
    assert_eq!(
        with.rules_used(f),
        vec!["rule @unit jvp @unit_jvp".to_string()]
    );
}

/// A wrong rule on the array function is used in every mode (so the
/// derivative differs from the body's), which is what `advm check` finds.
#[test]
fn a_wrong_array_rule_is_used_not_ignored() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/rules_array.adasm"
    ))
    .expect("readable")
    .replace("rule @unit jvp @unit_jvp", "rule @unit jvp @unit_wrong");
    let m = assembler::assemble(&src, "wrong").unwrap_or_else(|e| panic!("{}", e.render()));
    let mut e = Engine::new(m).expect("verifies");
    let f = func(&e, "unit");
    let args = [Value::Arr(vec![0.3, -1.2, 2.5]), Value::F64(0.8)];
    let dir = [Some(Value::Arr(vec![1.0, 0.0, 0.0])), Some(Value::F64(0.0))];
    let t = arr_of(&e.jvp(f, &args, &dir).expect("jvp").tangent);
    let fd = fd_along(&mut e, f, &args, &dir);
    assert!(!close(t[0], fd[0], 1e-3), "{t:?} {fd:?}");
    let r = e
        .vjp(f, &args, &Value::Arr(vec![1.0, 0.0, 0.0]))
        .expect("vjp");
    assert_close(arr_of(&r.grad[0])[0], t[0], 1e-14);
}

/// `@unit_jvp` of `ad/tests/rules_array.adasm` with its tangent array made
/// `delta` elements longer (shorter, for a negative `delta`) than the
/// result: the elements past the result's end (or missing) are zeros.
fn tangent_of_length(delta: i64) -> String {
    let (op, k) = if delta >= 0 {
        ("add", delta)
    } else {
        ("sub", -delta)
    };
    format!(
        "
fn @unit_odd(%v: f64[], %s: f64, %dv: f64[], %ds: f64) -> f64[] {{
entry:
    %t = call @unit_jvp(%v, %s, %dv, %ds)
    %n = alen %t
    %m = {op} %n, {k}
    %u = anew %m
    %c = min %n, %m
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %more = lt %i, %c
    br %more, body, done
body:
    %x = aget %t, %i
    aset %u, %i, %x
    %i2 = add %i, 1
    jmp head
done:
    ret %u
}}
"
    )
}

/// The trap of a rule's tangent array of the wrong length: its kind
/// (both lengths), its location (the `rule` line, so a listing of the
/// error names the rule) and the function it names.
#[track_caller]
fn assert_length_trap(r: Result<impl std::fmt::Debug, ad::AdError>, result: usize, tangent: usize) {
    match r {
        Err(ad::AdError::Trap(t)) => {
            assert_eq!(
                t.kind,
                vm::TrapKind::RuleTangentLength { result, tangent },
                "{t}"
            );
            assert_eq!(t.loc.line, 6, "the rule's line: {t}");
            assert_eq!(t.func, "unit", "{t}");
            let msg = t.to_string();
            assert!(msg.contains("rule") && msg.contains("tangent"), "{msg}");
        }
        other => panic!("not the length trap: {other:?}"),
    }
}

/// A rule whose tangent array is longer or shorter than its function's
/// result is never silently used: every mode (forward, reverse, second
/// order, under a budget too) traps at the `rule` line with both
/// lengths, where a longer one used to give a tangent of the wrong shape
/// and a Jacobian without its elements, and a shorter one a trap out of
/// bounds in the reverse sweep.
#[test]
fn a_rule_tangent_of_the_wrong_length_traps_in_every_mode() {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/rules_array.adasm"
    ))
    .expect("readable")
    .replace("rule @unit jvp @unit_jvp", "rule @unit jvp @unit_odd");
    for delta in [1i64, -1, 2, -3] {
        let src = format!("{base}{}", tangent_of_length(delta));
        let m = assembler::assemble(&src, "odd").unwrap_or_else(|e| panic!("{}", e.render()));
        let tangent = (3 + delta) as usize;
        for budget in [None, Some(64)] {
            let mut e = Engine::new(m.clone()).expect("verifies");
            e.set_ad_budget(budget);
            let f = func(&e, "unit");
            let energy = func(&e, "energy");
            let args = [Value::Arr(vec![0.3, -1.2, 2.5]), Value::F64(0.8)];
            let dir = [
                Some(Value::Arr(vec![1.0, 0.5, -0.25])),
                Some(Value::F64(2.0)),
            ];
            assert_length_trap(e.jvp(f, &args, &dir), 3, tangent);
            assert_length_trap(e.vjp(f, &args, &Value::Arr(vec![1.0; 3])), 3, tangent);
            assert_length_trap(e.jacobian(f, &args), 3, tangent);
            assert_length_trap(e.grad(energy, &args), 3, tangent);
            assert_length_trap(e.jvp(energy, &args, &dir), 3, tangent);
            assert_length_trap(e.hvp(energy, &args, &dir), 3, tangent);
            assert_length_trap(e.hessian(energy, &args), 3, tangent);
            // The engine is usable afterwards: the primal runs.
            assert_eq!(run_arr(&mut e, f, &args).len(), 3);
        }
    }
    // The same rule with a tangent of the right length passes.
    let src = format!("{base}{}", tangent_of_length(0));
    let m = assembler::assemble(&src, "odd").unwrap_or_else(|e| panic!("{}", e.render()));
    let mut e = Engine::new(m).expect("verifies");
    let f = func(&e, "energy");
    let args = [Value::Arr(vec![0.3, -1.2, 2.5]), Value::F64(0.8)];
    let (mut with, _) = array_rule_engines();
    assert_eq!(
        e.grad(f, &args).expect("grad").grad,
        with.grad(f, &args).expect("grad").grad
    );
}
