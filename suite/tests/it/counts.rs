//! Bytecode instructions per loop iteration of the suite's counted loops
//! (the primal; what the AD stage emits is its own business): each loop
//! ends in one fused step-and-branch (`jmp.step.if.<cc>.i`), so powloop costs 2
//! instructions per iteration and branchy 4 per element, either sign (the
//! arm laid out first ends in a copy of the join, not a jump to it, and
//! each arm sums its term by one `acc.mul`); a dot product's term costs 4
//! (load, load, `acc.mul`, step-and-branch) and logsumexp 8 per element.

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

/// Instructions executed by one call on raw arguments: `arrays` (copied
/// into the heap) are the first parameters, `scalars` the rest.
fn executed(p: &Program, f: FuncId, arrays: &[&[f64]], scalars: &[u64]) -> u64 {
    let mut vm = Vm::default();
    vm.begin(false);
    let mut args = Vec::new();
    for a in arrays {
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
    let n100 = executed(&p, f, &[], &[x, 100]);
    let n101 = executed(&p, f, &[], &[x, 101]);
    assert_eq!(n101 - n100, 2);
    assert_eq!(executed(&p, f, &[], &[x, 1000]), 2004);
}

/// Either sign: load, branch, `acc.mul` (the square or the scaled value
/// summed: in the copy of the join after the arm laid out first, in the
/// join itself after the other, which only that arm reaches by falling
/// through), step-and-branch.
#[test]
fn branchy_costs_four_instructions_per_element_either_sign() {
    let (p, f) = load("branchy");
    assert!(
        p.func(f)
            .code
            .iter()
            .any(|i| matches!(i.op.branch(), Some(b) if b.fused == Fused::StepI)),
        "{}",
        vm::disasm::function(p.func(f))
    );
    let count = |v: &[f64]| executed(&p, f, &[v], &[]);
    let pos = count(&[1.0; 11]) - count(&[1.0; 10]);
    let neg = count(&[-1.0; 11]) - count(&[-1.0; 10]);
    assert_eq!((pos, neg), (4, 4));
}

/// logreg's and mlp's inner loops (a row of `X` or `W1` times a vector):
/// one more column adds, per row, two loads, one `acc.mul` (the product
/// summed in place) and the step-and-branch.
#[test]
fn a_dot_product_costs_four_instructions_per_term() {
    let (rows, cols) = (3usize, 5usize);
    let ramp = |n: usize| (0..n).map(|i| 0.1 * i as f64 - 0.2).collect::<Vec<f64>>();
    let (p, f) = load("logreg");
    let logreg = |d: usize| {
        let (x, y, w) = (ramp(rows * d), vec![1.0; rows], ramp(d));
        executed(&p, f, &[&x, &y, &w], &[rows as u64, d as u64])
    };
    assert_eq!(logreg(cols + 1) - logreg(cols), 4 * rows as u64);
    let (q, g) = load("mlp");
    let mlp = |d: usize| {
        let (x, w1, b1, w2) = (ramp(d), ramp(rows * d), ramp(rows), ramp(rows));
        executed(&q, g, &[&x, &w1, &b1, &w2], &[0.05f64.to_bits()])
    };
    assert_eq!(mlp(cols + 1) - mlp(cols), 4 * rows as u64);
}

/// logsumexp's two loops: the maximum (load, `max.f`, step-and-branch:
/// the counter's step fuses with the copied loop header) and the sum
/// (load, subtract, `exp`, add, step-and-branch).
#[test]
fn logsumexp_costs_eight_instructions_per_element() {
    let (p, f) = load("logsumexp");
    let count = |n: usize| {
        let v: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
        executed(&p, f, &[&v], &[])
    };
    assert_eq!(count(11) - count(10), 3 + 5);
}

/// sincos's pullback pops the two factors in the order it reads them (the
/// forward code pushes its entry-block values in the opposite order), so
/// both pops fuse into products: `mul.pop`, `mul.pop`, `neg.f`, `ret.n`.
#[test]
fn sincos_pullback_fuses_both_pops() {
    let mut advm = suite::advm::Advm::load("sincos", "sincos", vec![vm::Value::F64(0.9)])
        .expect("sincos loads");
    let counts = advm.instruction_counts().expect("counts");
    assert_eq!((counts.primal, counts.forward, counts.reverse), (3, 5, 4));
}

/// recursion's pullback, per level: the forward code pushes `cos r` before
/// `sin r` (the factor before its instruction's result), so the pullback
/// pops `sin r` first, where `y = x * s` reads it, and `cos r` last, where
/// `sin`'s own fragment reads it: both pops fuse, where pushing in the
/// other order left one `comms.pop` unfused.
///
/// And `@rec` is small, so seven levels of its recursive call are inlined
/// (`vm::inline`): a frame runs eight levels, and so does its pullback's.
/// Per frame the pullback pops the entry value `x` and the return block
/// (2), then the outermost level `mul.pop`, `mul.f`, `mul.pop`, `blk.pop`
/// (4), each inlined level `acc.mul.pop.mul`, `mul.pop` and a `blk.pop` or,
/// in the innermost, the `call.acc` (3 each, 21), and returns (1): 28 for
/// eight levels, where one level per frame cost 7. The forward code per
/// frame: eight compare-and-branches and seven `sub.i` on the way down
/// (15), the innermost level's `sub.i`, `call`, `sincos`, `comms.reserve`,
/// `comms.push.r`, `mul.f`, `blk.push` (7), six middle levels' five each
/// (30, no call), the outermost's five plus the entry value's push and the
/// `ret` (7): 59 for eight levels, where one cost 10.
#[test]
fn recursion_runs_eight_levels_per_frame_and_fuses_both_pops() {
    // n = 96: twelve whole frames, then the base level's.
    let mut advm = suite::advm::Advm::load(
        "recursion",
        "rec",
        vec![vm::Value::F64(0.9), vm::Value::I64(96)],
    )
    .expect("recursion loads");
    let counts = advm.instruction_counts().expect("counts");
    // The base level's frame: its pop, its `blk.pop` and `ret.n`; forward:
    // branch, push, `blk.push`, `ret`.
    assert_eq!(counts.reverse, 12 * 28 + 3);
    assert_eq!(counts.forward, 12 * (15 + 7 + 30 + 7) + 4);
}

/// logreg's reverse inner loop, with respect to `w` as the suite asks:
/// `aget.add` (the element of `X`), `shadow.acc.mul` (`w̄[j] += z̄ · X[k,j]`,
/// the product fused into the shadow update) and the step-and-branch:
/// one more column adds 3 reverse instructions per row (4 before the
/// fusion).
#[test]
fn logreg_reverse_costs_three_instructions_per_term() {
    let rows = 3usize;
    let ramp = |n: usize| (0..n).map(|i| 0.1 * i as f64 - 0.2).collect::<Vec<f64>>();
    let reverse = |d: usize| {
        let args = vec![
            vm::Value::Arr(ramp(rows * d)),
            vm::Value::Arr(vec![1.0; rows]),
            vm::Value::Arr(ramp(d)),
            vm::Value::I64(rows as i64),
            vm::Value::I64(d as i64),
        ];
        let mut advm = suite::advm::Advm::load("logreg", "logreg", args).expect("logreg loads");
        advm.instruction_counts().expect("counts").reverse
    };
    assert_eq!(reverse(6) - reverse(5), 3 * rows as u64);
}

/// branchy's pullback per element: `blk.pop`, then for a positive element
/// `aget` (the element again), `mul.f` (`ȳ · x`), `shadow.acc.mul` (`v̄[i]
/// += 2 · (ȳ · x)`: a square's two contributions as one) and the
/// step-and-branch (5; 6 while `x * x` gave `x̄` two products), for a
/// negative one `shadow.acc.mul` (`v̄[i] += ȳ · 0.01`) and the
/// step-and-branch (3). The gradient is `2x` (exact: doubling is) or 0.01.
#[test]
fn branchy_reverse_costs_five_or_three_instructions_per_element() {
    let reverse = |v: Vec<f64>| {
        let mut advm = suite::advm::Advm::load("branchy", "branchy", vec![vm::Value::Arr(v)])
            .expect("branchy loads");
        advm.instruction_counts().expect("counts").reverse
    };
    assert_eq!(reverse(vec![0.75; 11]) - reverse(vec![0.75; 10]), 5);
    assert_eq!(reverse(vec![-0.75; 11]) - reverse(vec![-0.75; 10]), 3);

    let v = vec![0.1, -0.3, 1.0 / 3.0, 1e300, -2.5];
    let module = assembler::assemble(
        &std::fs::read_to_string(testkit::workspace_root().join("programs/bench/branchy.adasm"))
            .expect("program"),
        "branchy.adasm",
    )
    .expect("assembles");
    let mut engine = ad::Engine::new(module).expect("verifies");
    let f = engine.find("branchy").expect("@branchy");
    let g = engine
        .grad(f, &[vm::Value::Arr(v.clone())])
        .expect("differentiates");
    let want: Vec<f64> = v
        .iter()
        .map(|&x| if x > 0.0 { 2.0 * x } else { 0.01 })
        .collect();
    match &g.grad[0] {
        Some(vm::Value::Arr(got)) => assert_eq!(got, &want),
        other => panic!("{other:?}"),
    }
}
