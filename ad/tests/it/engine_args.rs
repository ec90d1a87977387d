//! `Engine::run` and `Engine::grad_into` check their arguments against the
//! user function's parameters (count and types) and refuse ids that are not
//! user functions, with a message; `grad_into` reuses its output buffer
//! across calls of different arities.

use ad::{AdError, Engine, Gradient};
use vm::ir::FuncId;
use vm::Value;

const SRC: &str = "
fn @f(%x: f64, %n: i64, %v: f64[]) -> f64 {
entry:
    %a = aget %v, %n
    %y = mul %x, %a
    ret %y
}
fn @g(%x: f64) -> f64 {
entry:
    %y = sin %x
    ret %y
}";

fn engine() -> Engine {
    Engine::new(assembler::assemble(SRC, "args.adasm").expect("assembles")).expect("verifies")
}

fn args_error(r: Result<(), AdError>) -> String {
    match r {
        Err(AdError::Args(m)) => m,
        other => panic!("expected an argument error, got {other:?}"),
    }
}

#[test]
fn arguments_are_checked_before_anything_runs() {
    let mut e = engine();
    let f = e.find("f").expect("defined");
    let g = e.find("g").expect("defined");
    let mut out = Gradient::default();
    let good = [Value::F64(2.0), Value::I64(1), Value::Arr(vec![1.0, 3.0])];
    e.grad_into(f, &good, &mut out).expect("runs");
    assert_eq!(out.value, 6.0);
    assert_eq!(out.grad.len(), 3);
    // The same buffer, another arity.
    e.grad_into(g, &[Value::F64(0.0)], &mut out).expect("runs");
    assert_eq!(out.grad, vec![Some(Value::F64(1.0))]);

    let m = args_error(e.grad_into(f, &good[..2], &mut out));
    assert!(m.contains("@f takes 3 argument(s), got 2"), "{m}");
    let m = args_error(e.grad_into(
        f,
        &[Value::I64(2), Value::I64(1), Value::Arr(vec![1.0])],
        &mut out,
    ));
    assert!(m.contains("argument 1 of @f must be f64, got i64"), "{m}");
    let m = args_error(e.grad_into(
        f,
        &[Value::F64(2.0), Value::I64(1), Value::F64(1.0)],
        &mut out,
    ));
    assert!(m.contains("argument 3 of @f must be f64[]"), "{m}");
    assert!(matches!(
        e.run(g, &[Value::Bool(true)]),
        Err(AdError::Args(_))
    ));
    // Derived functions exist in the program after a gradient, but are no
    // user functions.
    assert!(e.program().len() > 2);
    for id in [FuncId(2), FuncId(3), FuncId(1000)] {
        let m = args_error(e.grad_into(id, &[Value::F64(0.0)], &mut out));
        assert!(m.contains("no function"), "{m}");
        match e.run(id, &[Value::F64(0.0)]) {
            Err(AdError::Args(m)) => assert!(m.contains("no function"), "{m}"),
            other => panic!("run of {id}: expected an argument error, got {other:?}"),
        }
    }
    let m = match e.run(g, &[]) {
        Err(AdError::Args(m)) => m,
        other => panic!("expected an argument error, got {other:?}"),
    };
    assert!(m.contains("@g takes 1 argument(s), got 0"), "{m}");
}
