//! The library facade (`advm::Program`, `advm::Function`): every mode
//! checked against central finite differences or an identity between modes,
//! parameters by name, clones that share derived code, and the errors of
//! each kind of mistake with their messages.

use advm::{args, Derivative, Error, Lang, Program, Value};
use std::path::{Path, PathBuf};

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../programs")
        .join(name)
}

fn program(name: &str) -> Program {
    Program::from_file(corpus(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

fn f64s(v: &Value) -> Vec<f64> {
    match v {
        Value::F64(x) => vec![*x],
        Value::Arr(xs) => xs.clone(),
        other => panic!("not a number: {other}"),
    }
}

/// The central difference of `f` at `x`, by the one finite-difference
/// checker (`advm::fd`, step `advm::fd::STEP`).
fn diff<E>(x: f64, mut f: impl FnMut(f64) -> Result<f64, E>) -> Result<f64, E> {
    advm::fd::directional(&[Value::F64(x)], &[Some(Value::F64(1.0))], |a, _| match a {
        [Value::F64(x)] => f(*x),
        _ => unreachable!("one f64 argument"),
    })
}

#[test]
fn program_is_clone_send_sync() {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    fn sendable<T: Send + Sync + 'static>() {}
    shareable::<Program>();
    sendable::<Error>();
}

#[test]
fn clones_made_after_derive_share_the_derived_code() -> Result<(), Error> {
    let mut p = program("sincos.adasm");
    let name = p.functions().next().expect("a function").to_string();
    p.function(&name)?.derive()?;
    let len = p.engine_mut().program().len();
    let arity = p.function(&name)?.params().len();
    let mut clone = p.clone();
    clone.grad(&name, vec![0.5; arity])?;
    // Nothing was derived again: the clone's bytecode did not grow.
    assert_eq!(clone.engine_mut().program().len(), len);
    // A selection not derived yet does grow it (the check can fail).
    let first = clone.function(&name)?.params()[0].0.clone();
    clone
        .function(&name)?
        .wrt([first])?
        .grad(vec![0.5; arity])?;
    assert!(clone.engine_mut().program().len() > len);
    Ok(())
}

#[test]
fn gradient_and_hessian_match_finite_differences() -> Result<(), Error> {
    // f(x, n) = Σ_k (k + 1) x^k over k < n.
    let mut p = program("array_return.adasm");
    let x = 0.9;
    let f = |x: f64| -> f64 { (0..6).map(|k| (k as f64 + 1.0) * x.powi(k)).sum() };
    let mut func = p.function("f")?;
    let g = func.grad(args![x, 6])?;
    assert!(close(g.value, f(x), 1e-12));
    let dx = diff(x, |x| Ok::<f64, Error>(f(x)))?;
    assert!(close(g.f64("x").expect("∂x"), dx, 1e-7), "{g:?} vs {dx}");
    assert_eq!(g.get("n"), None);
    assert_eq!(g.grad.names(), ["x", "n"]);
    assert_eq!(g.to_vec().len(), 1);

    let h = func.hessian(args![x, 6])?;
    let mut other = program("array_return.adasm");
    let dxx = diff(x, |x| p_grad(&mut other, x))?;
    assert_eq!(h.inputs, ["x"]);
    assert!(close(h.matrix[0][0], dxx, 1e-6), "{:?} vs {dxx}", h.matrix);
    // hvp along 0.5 is half the Hessian's column; its gradient is grad's.
    let hv = func.hvp(args![x, 6], args![0.5, 0])?;
    assert!(close(
        hv.hvp.f64("x").expect("H·d"),
        0.5 * h.matrix[0][0],
        1e-12
    ));
    assert_eq!(hv.grad, g.grad);
    Ok(())
}

fn p_grad(p: &mut Program, x: f64) -> Result<f64, Error> {
    Ok(p.grad("f", args![x, 6])?.f64("x").unwrap_or(f64::NAN))
}

#[test]
fn jacobian_vjp_and_jvp_of_an_array_result_agree_with_differences() -> Result<(), Error> {
    // powers(x, n) = [1, x, x², x³].
    let mut p = program("array_return.adasm");
    let mut powers = p.function("powers")?;
    let x = 1.5;
    let j = powers.jacobian(args![x, 4])?;
    assert_eq!(f64s(&j.value), [1.0, 1.5, 2.25, 3.375]);
    assert_eq!(j.inputs, ["x"]);
    for (k, row) in j.matrix.iter().enumerate() {
        let fd = diff(x, |x| Ok::<f64, Error>(f64s(&powers.run(args![x, 4])?)[k]))?;
        assert!(close(row[0], fd, 1e-7), "{row:?} vs {fd}");
    }
    // vjp with seed s is sᵀJ; jvp along 1 is J's column.
    let seed = vec![1.0, -2.0, 0.5, 3.0];
    let v = powers.vjp(args![x, 4], seed.clone())?;
    let sj: f64 = seed.iter().zip(&j.matrix).map(|(s, r)| s * r[0]).sum();
    assert!(close(v.grad.f64("x").expect("sᵀJ"), sj, 1e-12));
    let t = powers.jvp(args![x, 4], args![1.0, 0])?;
    let column: Vec<f64> = j.matrix.iter().map(|r| r[0]).collect();
    assert_eq!(t.tangent.as_ref().map(f64s), Some(column));
    Ok(())
}

#[test]
fn array_parameters_have_array_derivatives() -> Result<(), Error> {
    // s(w, x) = Σ w[i] x², by name and flattened.
    let src = "fn @s(%w: f64[], %x: f64) -> f64 {
entry:
    %n = alen %w
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %wi = aget %w, %i
    %t = mul %wi, %x
    %t2 = mul %t, %x
    %s2 = add %s, %t2
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}
";
    let mut p = Program::parse(src)?;
    let g = p.grad("s", args![vec![1.0, 2.0, 3.0], 2.0])?;
    assert_eq!(g.value, 24.0);
    assert_eq!(g.get("w"), Some(&Derivative::Array(vec![4.0, 4.0, 4.0])));
    assert_eq!(g.get("%w").and_then(Derivative::as_f64), None);
    assert_eq!(g.f64("x"), Some(24.0)); // 2x Σw
    assert_eq!(g.to_vec(), [4.0, 4.0, 4.0, 24.0]);
    let names: Vec<&str> = g.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["w", "x"]);
    let only_w = p.function("s")?.wrt(["%w"])?.grad(args![vec![1.0], 2.0])?;
    assert_eq!(only_w.to_vec(), [4.0]);
    Ok(())
}

#[test]
fn mistakes_are_usage_errors_with_messages() -> Result<(), Error> {
    let mut p = program("array_return.adasm");
    let err = p.function("power").expect_err("no @power");
    assert_eq!(err.to_string(), "no function @power; did you mean @powers?");
    assert_eq!(err.exit_status(), 64);
    let err = p.function("f")?.wrt(["n"]).expect_err("n is an i64");
    assert_eq!(
        err.to_string(),
        "cannot differentiate @f with respect to %n: it is i64, not f64 or f64[]"
    );
    let err = p.function("f")?.wrt(["rate"]).expect_err("no %rate");
    assert_eq!(
        err.to_string(),
        "@f has no parameter %rate (its parameters: %x, %n)"
    );
    let err = p.grad("f", [1.0, 2.0]).expect_err("n must be an i64");
    assert_eq!(
        err.to_string(),
        "bad arguments: argument 2 of @f must be i64, got f64"
    );
    let err = p
        .function("f")?
        .jvp(args![1.0, 2], [1.0])
        .expect_err("a direction one short");
    assert_eq!(
        err.to_string(),
        "the direction has 1 entry, but @f takes 2 parameter(s)"
    );
    let err = p
        .grad("powers", args![1.0, 2])
        .expect_err("not an f64 result");
    assert!(matches!(err, Error::NotDifferentiable(_)), "{err:?}");
    assert!(err.to_string().starts_with("cannot differentiate"), "{err}");
    Ok(())
}

#[test]
fn sources_errors_name_their_file_and_language() {
    let err = Program::from_source("fn @f( {", "bad.adasm", Lang::Adasm).expect_err("bad");
    assert!(matches!(err, Error::Assembly(_)));
    assert!(err.to_string().starts_with("bad.adasm:1:"), "{err}");
    assert_eq!(err.exit_status(), 2);

    let src = "fn sq(x: f64) -> f64 {\n    return x * x;\n}\n";
    let mut program = Program::from_source(src, "m.adl", Lang::Adl).expect("compiles");
    assert_eq!(
        program.run("sq", [3.0]).expect("runs"),
        advm::Value::F64(9.0)
    );
    let err = Program::from_source("fn f() -> f64 {\n    return y;\n}\n", "m.adl", Lang::Adl)
        .expect_err("undeclared name");
    assert!(matches!(err, Error::Assembly(_)));
    assert!(err.to_string().starts_with("m.adl:2:"), "{err}");
    assert_eq!(Lang::from_path(Path::new("a/b.adl")).ok(), Some(Lang::Adl));
    assert_eq!(Lang::Adasm.extension(), "adasm");

    let err = Program::from_file("notes.txt").expect_err("unknown extension");
    assert_eq!(
        err.to_string(),
        "notes.txt: cannot tell the language of the source: expected a .adasm or .adl file"
    );

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("latin1.adasm");
    std::fs::write(&path, b"; caf\xE9\n").expect("written");
    let err = Program::from_file(&path).expect_err("not UTF-8");
    assert!(matches!(err, Error::Assembly(_)));
    assert!(
        err.to_string().contains(":1:6: error: invalid UTF-8"),
        "{err}"
    );

    let err = Program::from_file(dir.path().join("missing.adasm")).expect_err("missing");
    assert!(matches!(err, Error::Io { .. }));
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn traps_and_limits_are_trap_errors() -> Result<(), Error> {
    let mut p = program("array_return.adasm");
    p.limits_mut().fuel = Some(10);
    let err = p.run("powers", args![2.0, 1000]).expect_err("out of fuel");
    assert!(matches!(err, Error::Trap(_)), "{err:?}");
    assert!(!err.to_string().starts_with("trap: trap"), "{err}");
    assert!(err.to_string().starts_with("trap: "), "{err}");
    assert_eq!(err.exit_status(), 1);
    Ok(())
}
