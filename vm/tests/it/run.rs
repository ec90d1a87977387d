//! Running hand-built programs: semantics, traps and limits.

use testkit::ir::*;
use vm::bytecode::Program;
use vm::interp::{TrapKind, Vm};
use vm::ir::FuncId;
use vm::Value;

fn load(m: &vm::ir::Module) -> Program {
    let mut p = vm::lower::lower_module(m).expect("lowers");
    vm::verify::verify_program(&mut p).expect("verifies");
    p
}

#[test]
fn powloop_computes_powers() {
    let p = load(&powloop());
    let mut vm = Vm::default();
    let v = vm
        .run(&p, FuncId(0), &[Value::F64(2.0), Value::I64(10)])
        .expect("runs");
    assert_eq!(v, Value::F64(1024.0));
}

#[test]
fn phi_swap_is_a_parallel_copy() {
    let p = load(&fib());
    let mut vm = Vm::default();
    let v = vm.run(&p, FuncId(0), &[Value::I64(10)]).expect("runs");
    assert_eq!(v, Value::F64(55.0));
}

#[test]
fn deep_recursion_traps_instead_of_overflowing() {
    let p = load(&deep());
    let mut vm = Vm::default();
    let v = vm.run(&p, FuncId(0), &[Value::I64(1000)]).expect("runs");
    assert_eq!(v, Value::F64(1000.0));
    let err = vm
        .run(&p, FuncId(0), &[Value::I64(10_000_000)])
        .expect_err("traps");
    assert!(matches!(err.kind, TrapKind::CallDepth { .. }), "{err}");
    assert!(err.to_string().contains("call depth exceeded"), "{err}");
}

#[test]
fn fuel_limit_traps() {
    let p = load(&powloop());
    let mut vm = Vm::default();
    vm.limits_mut().fuel = Some(1000);
    let err = vm
        .run(&p, FuncId(0), &[Value::F64(1.0), Value::I64(1_000_000)])
        .expect_err("traps");
    assert!(matches!(err.kind, TrapKind::OutOfFuel { .. }), "{err}");
    assert!(err.to_string().contains("--fuel"), "{err}");
}

#[test]
fn interrupt_flag_traps() {
    let p = load(&powloop());
    let mut vm = Vm::default();
    vm.interrupt_handle()
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let err = vm
        .run(&p, FuncId(0), &[Value::F64(1.0), Value::I64(1_000_000)])
        .expect_err("traps");
    assert_eq!(err.kind, TrapKind::Interrupted);
}
