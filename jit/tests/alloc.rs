//! After a warm-up call (which compiles), calls in the native tier
//! allocate nothing on the heap: primal runs, gradients and tangents, for
//! a loop and an array program. Counted by a global allocator wrapper.

use ad::{Engine, Gradient, Tangent};
use testkit::alloc::allocs;
use vm::{Tier, Value};

#[global_allocator]
static GLOBAL: testkit::alloc::Counting = testkit::alloc::Counting;

fn engine(file: &str) -> Engine {
    let src = testkit::read_program(file);
    let module = assembler::assemble(&src, file).unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::new(module).expect("verifies");
    jit::install_eager(e.vm_mut());
    e
}

#[test]
fn native_calls_allocate_nothing_after_warm_up() {
    for (file, name, args) in [
        (
            "programs/bench/powloop.adasm",
            "pow",
            vec![Value::F64(1.0001), Value::I64(1000)],
        ),
        (
            "programs/bench/logsumexp.adasm",
            "logsumexp",
            vec![Value::Arr(testkit::suite::sines(100))],
        ),
    ] {
        let mut e = engine(file);
        let f = e.find(name).expect("exists");
        let mut g = Gradient::default();
        e.grad_into(f, &args, &mut g).expect("warm-up");
        assert_eq!(e.vm_mut().last_tier(), Tier::Native, "{file}");
        let before = allocs();
        e.grad_into(f, &args, &mut g).expect("second call");
        assert_eq!(allocs() - before, 0, "{file}: allocations per gradient");
        let dir: Vec<Option<Value>> = args
            .iter()
            .map(|a| match a {
                Value::F64(_) => Some(Value::F64(1.0)),
                Value::Arr(xs) => Some(Value::Arr(vec![1.0; xs.len()])),
                _ => None,
            })
            .collect();
        let mask = ad::analysis::all_params(e.module().func(f));
        let mut t = Tangent::default();
        e.jvp_wrt_into(f, &args, &dir, &mask, &mut t)
            .expect("warm-up");
        let before = allocs();
        e.jvp_wrt_into(f, &args, &dir, &mask, &mut t)
            .expect("second call");
        assert_eq!(allocs() - before, 0, "{file}: allocations per tangent");
        assert_eq!(e.vm_mut().last_tier(), Tier::Native, "{file}");
    }
    // Primal runs through the VM's raw entry (`Vm::run` builds its result
    // value, an allocation of its own for arrays).
    let mut e = engine("programs/bench/powloop.adasm");
    let f = e.find("pow").expect("exists");
    let args = [1.0001f64.to_bits(), 1000];
    let prog = e.program().clone();
    e.vm_mut().begin(false);
    e.vm_mut().call_raw(&prog, f, &args).expect("warm-up");
    let before = allocs();
    e.vm_mut().call_raw(&prog, f, &args).expect("second call");
    assert_eq!(allocs() - before, 0, "allocations per primal call");
    assert_eq!(e.vm_mut().last_tier(), Tier::Native);
}
