//! Bytecode instructions per loop iteration of the suite's counted loops
//! (the primal; what the AD stage emits is its own business): each loop
//! ends in one fused step-and-branch (`jmp.step.if.<cc>.i`), so powloop costs 2
//! instructions per iteration and branchy 5 per element, either sign (the
//! arm laid out first ends in a copy of the join, not a jump to it).

use vm::bytecode::Program;
use vm::ir::FuncId;
use vm::op::Fused;
use vm::Vm;

fn load(file: &str) -> (Program, FuncId) {
    let path = format!("programs/bench/{file}.adasm");
    let src = std::fs::read_to_string(testkit::workspace_root().join(&path)).expect("program");
    let module = assembler::assemble(&src, &path).unwrap_or_else(|d| panic!("{d}"));
    let mut p = vm::lower::lower_module(&module).expect("lowers");
    vm::verify::verify_program(&mut p).expect("verifies");
    (p, FuncId(0))
}

/// Instructions executed by one call on raw arguments (arrays first
/// copied into the heap).
fn executed(p: &Program, f: FuncId, scalars: &[u64], array: Option<&[f64]>) -> u64 {
    let mut vm = Vm::default();
    vm.begin(false);
    let mut args = Vec::new();
    if let Some(a) = array {
        args.push(vm.alloc_array(a).expect("allocates"));
    }
    args.extend_from_slice(scalars);
    vm.call_raw(p, f, &args).expect("runs");
    vm.executed()
}

#[test]
fn powloop_costs_two_instructions_per_iteration() {
    let (p, f) = load("powloop");
    assert!(
        p.func(f)
            .code
            .iter()
            .any(|i| matches!(i.op.branch(), Some(b) if b.fused == Fused::StepI)),
        "{}",
        vm::disasm::function(p.func(f))
    );
    let x = 1.0001f64.to_bits();
    let n100 = executed(&p, f, &[x, 100], None);
    let n101 = executed(&p, f, &[x, 101], None);
    assert_eq!(n101 - n100, 2);
    assert_eq!(executed(&p, f, &[x, 1000], None), 2004);
}

#[test]
fn branchy_costs_five_instructions_per_element_either_sign() {
    let (p, f) = load("branchy");
    assert!(
        p.func(f)
            .code
            .iter()
            .any(|i| matches!(i.op.branch(), Some(b) if b.fused == Fused::StepI)),
        "{}",
        vm::disasm::function(p.func(f))
    );
    let count = |v: &[f64]| executed(&p, f, &[], Some(v));
    let pos = count(&[1.0; 11]) - count(&[1.0; 10]);
    let neg = count(&[-1.0; 11]) - count(&[-1.0; 10]);
    assert_eq!((pos, neg), (5, 5));
}
