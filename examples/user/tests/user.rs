//! The `advm` facade as a user meets it: parse, gradients by parameter
//! name checked against finite differences, an optimiser converging to a
//! known minimum, and errors read through `Display`.

use advm::{Error, Program, Value};
use advm_user_example::minimise;

const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/model.adasm");

/// f(x, y) = (x - 3)² + 10 (y + 1)² + exp(x - 3) - (x - 3), in Rust.
fn f(x: f64, y: f64) -> f64 {
    let a = x - 3.0;
    a * a + 10.0 * (y + 1.0) * (y + 1.0) + a.exp() - a
}

#[test]
fn gradient_by_name_matches_finite_differences() -> Result<(), Error> {
    let mut program = Program::from_file(MODEL)?;
    let (x, y) = (1.5, 0.25);
    let g = program.grad("f", [x, y])?;
    assert_eq!(g.value, f(x, y));
    let h = 1e-6;
    let dx = (f(x + h, y) - f(x - h, y)) / (2.0 * h);
    let dy = (f(x, y + h) - f(x, y - h)) / (2.0 * h);
    let gx = g.f64("x").expect("x is differentiated");
    let gy = g.f64("y").expect("y is differentiated");
    assert!((gx - dx).abs() < 1e-6 * dx.abs().max(1.0), "{gx} vs {dx}");
    assert!((gy - dy).abs() < 1e-6 * dy.abs().max(1.0), "{gy} vs {dy}");
    // Parameter order, and a selection by name.
    let names: Vec<&str> = g.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["x", "y"]);
    let only_y = program.function("f")?.wrt(["y"])?.grad([x, y])?;
    assert_eq!(only_y.get("x"), None);
    assert_eq!(only_y.f64("y"), Some(gy));
    Ok(())
}

#[test]
fn gradient_descent_reaches_the_minimum() -> Result<(), Error> {
    let mut program = Program::from_file(MODEL)?;
    let (x, steps) = minimise(&mut program, "f", &[0.0, 2.0], 0.04, 1e-10, 10_000)?;
    assert!(steps < 10_000, "did not converge: {x:?}");
    assert!(
        (x[0] - 3.0).abs() < 1e-9 && (x[1] + 1.0).abs() < 1e-9,
        "{x:?}"
    );
    match program.run("f", &x)? {
        Value::F64(v) => assert!((v - 1.0).abs() < 1e-15, "minimum value {v}"),
        other => panic!("@f returned {other}"),
    }
    Ok(())
}

#[test]
fn second_order_and_forward_mode_agree() -> Result<(), Error> {
    let mut program = Program::from_file(MODEL)?;
    let mut f = program.function("f")?;
    // At the minimum the Hessian is diag(2 + e^0, 20).
    let h = f.hessian([3.0, -1.0])?;
    assert_eq!(h.inputs, ["x", "y"]);
    assert_eq!(h.matrix, [[3.0, 0.0], [0.0, 20.0]]);
    // jvp along (1, 1) is the sum of the gradient's entries.
    let g = f.grad([1.0, 1.0])?;
    let t = f.jvp([1.0, 1.0], [1.0, 1.0])?;
    let sum: f64 = g.to_vec().iter().sum();
    assert_eq!(t.tangent, Some(Value::F64(sum)));
    Ok(())
}

#[test]
fn errors_read_as_messages() {
    let bad = "fn @f(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %z\n    ret %y\n}\n";
    let err = Program::parse(bad).expect_err("%z is not defined");
    let text = err.to_string();
    assert!(text.starts_with("<input>:3:18: error:"), "{text}");
    assert!(text.contains('^'), "a caret under the mistake: {text}");

    let mut program = Program::from_file(MODEL).expect("the model assembles");
    let err = program.grad("g", [1.0, 2.0]).expect_err("no @g");
    assert_eq!(err.to_string(), "no function @g; did you mean @f?");
    let err = program
        .function("f")
        .and_then(|f| f.wrt(["z"]))
        .expect_err("no %z");
    assert!(
        err.to_string().starts_with("@f has no parameter %z"),
        "{err}"
    );
    let err = program.grad("f", [1.0]).expect_err("one argument short");
    assert_eq!(
        err.to_string(),
        "bad arguments: @f takes 2 argument(s), got 1"
    );

    let div = "fn @d(%n: i64) -> i64 {\nentry:\n    %q = div 1, %n\n    ret %q\n}\n";
    let mut program = Program::parse(div).expect("assembles");
    let err = program
        .run("d", advm::args![0])
        .expect_err("division by zero");
    assert!(matches!(err, Error::Trap(_)), "{err:?}");
    assert!(err.to_string().starts_with("trap: "), "{err}");

    let err = Program::from_file("no/such/model.adl").expect_err("no such file");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
}
