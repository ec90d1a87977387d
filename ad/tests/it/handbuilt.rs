//! AD of hand-built IR (independent of the assembler).

use ad::Engine;
use vm::Value;

#[test]
fn powloop_gradient() {
    let mut e = Engine::new(testkit::ir::powloop()).expect("verifies");
    let g = e
        .grad(vm::ir::FuncId(0), &[Value::F64(2.0), Value::I64(10)])
        .expect("grad");
    assert_eq!(g.value, 1024.0);
    assert_eq!(g.grad, vec![Some(Value::F64(5120.0)), None]);
    println!("{}", e.disasm_ad(vm::ir::FuncId(0)).expect("disasm"));
}

#[test]
fn fib_swap_gradient_is_zero_but_runs() {
    let mut e = Engine::new(testkit::ir::fib()).expect("verifies");
    let g = e.grad(vm::ir::FuncId(0), &[Value::I64(10)]).expect("grad");
    assert_eq!(g.value, 55.0);
}

#[test]
fn recursion_gradient_runs() {
    let mut e = Engine::new(testkit::ir::deep()).expect("verifies");
    let g = e.grad(vm::ir::FuncId(0), &[Value::I64(50)]).expect("grad");
    assert_eq!(g.value, 50.0);
}
