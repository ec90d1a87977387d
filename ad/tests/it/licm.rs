//! Loop-invariant code motion (`vm::licm`, on by default in `Engine::new`,
//! after inlining): which instructions leave their loops and where they
//! go, that results do not change, and what it saves: instructions run,
//! and values the forward code hands the reverse code. (The corpus test
//! `inlining_changes_no_result_of_the_corpus` compares every corpus call
//! with and without it.)

use ad::{Engine, Policy};
use vm::ir::{Function, Module, ValueId};
use vm::Value;

fn module(src: &str) -> Module {
    assembler::assemble(src, "t.adasm").expect("assembles")
}

/// The name of the block of `f` whose instructions define `%name`.
fn block_of(f: &Function, name: &str) -> String {
    let v = (0..f.values.len())
        .find(|v| f.values[*v].name.as_deref() == Some(name))
        .map(|v| ValueId(v as u32))
        .unwrap_or_else(|| panic!("no %{name}"));
    f.blocks
        .iter()
        .find(|b| b.insts.iter().any(|i| i.dst == Some(v)))
        .map(|b| b.name.clone())
        .unwrap_or_else(|| panic!("%{name} is not an instruction's"))
}

/// `sum_i sum_j a[w_i + 2b + 1 + j]^2 · x` over an `f64[]` of `n + 2` rows
/// of `b` and one more element, with the row offset `w_i = i·b`: `2b + 1`
/// is invariant in both loops, the row's start in the inner one.
const ROWS: &str = "
fn @rows(%a: f64[], %x: f64, %n: i64, %b: i64) -> f64 {
entry:
    jmp outer
outer:
    %i = phi [entry: 0], [olatch: %i2]
    %s = phi [entry: 0.0], [olatch: %s3]
    %c = lt %i, %n
    br %c, obody, done
obody:
    %w = mul %i, %b
    jmp inner
inner:
    %j = phi [obody: 0], [ibody: %j2]
    %s2 = phi [obody: %s], [ibody: %s4]
    %d = lt %j, %b
    br %d, ibody, olatch
ibody:
    %t = mul %b, 2
    %t1 = add %t, 1
    %u = add %w, %t1
    %k = add %u, %j
    %q = div %n, %b
    %e = aget %a, %k
    %p = mul %e, %e
    %px = mul %p, %x
    %s4 = add %s2, %px
    %j2 = add %j, 1
    jmp inner
olatch:
    %s3 = copy %s2
    %i2 = add %i, 1
    jmp outer
done:
    ret %s
}
";

/// Pure instructions whose operands come from outside a loop leave it,
/// one loop at a time: `%t` and `%t1` (of a parameter) leave both loops,
/// `%u` (of the outer loop's `%w`) the inner one only; `%k` (of the inner
/// counter), the division (invariant, but it may trap) and the element
/// read (memory) stay.
#[test]
fn invariant_instructions_leave_their_loops_one_level_at_a_time() {
    let mut m = module(ROWS);
    let moved = vm::licm::hoist(&mut m.funcs[0]);
    let f = &m.funcs[0];
    assert_eq!(moved, 5, "t and t1 twice, u once");
    assert_eq!(block_of(f, "t"), "entry");
    assert_eq!(block_of(f, "t1"), "entry");
    assert_eq!(block_of(f, "u"), "obody");
    for stays in ["k", "q", "e", "p", "px", "j2"] {
        assert_eq!(block_of(f, stays), "ibody", "%{stays}");
    }
    assert!(vm::lower::check_module(&m).is_ok());
    // A second pass finds nothing left to move.
    assert_eq!(vm::licm::hoist(&mut m.funcs[0]), 0);
}

/// A loop whose header has two predecessors outside it has no preheader:
/// nothing leaves it.
#[test]
fn a_loop_entered_from_two_blocks_keeps_its_instructions() {
    let src = "
fn @two(%x: f64, %n: i64, %f: bool) -> f64 {
entry:
    br %f, left, right
left:
    jmp head
right:
    jmp head
head:
    %i = phi [left: 0], [right: 1], [body: %i2]
    %s = phi [left: 0.0], [right: 1.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %y = mul %x, 3.0
    %s2 = add %s, %y
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}
";
    let mut m = module(src);
    assert_eq!(vm::licm::hoist(&mut m.funcs[0]), 0);
    assert_eq!(block_of(&m.funcs[0], "y"), "body");
}

/// The same values and gradients with and without the motion, and fewer
/// instructions run: `%t`, `%t1` and `%u` leave the inner loop.
#[test]
fn moved_code_computes_the_same_with_fewer_instructions() {
    let (n, b) = (40usize, 50usize);
    let a: Vec<f64> = (0..(n + 2) * b + 1)
        .map(|i| (i as f64 * 0.37).sin())
        .collect();
    let args = [
        Value::Arr(a),
        Value::F64(1.25),
        Value::I64(n as i64),
        Value::I64(b as i64),
    ];
    let mut moved = Engine::new(module(ROWS)).expect("verifies");
    let mut kept = Engine::with_inlining(module(ROWS), &Policy::NONE).expect("verifies");
    assert_eq!(
        block_of(moved.module().func(vm::ir::FuncId(0)), "t"),
        "entry"
    );
    assert_eq!(
        block_of(kept.module().func(vm::ir::FuncId(0)), "t"),
        "ibody"
    );
    let f = moved.find("rows").expect("defined");
    let (r1, r2) = (moved.run(f, &args), kept.run(f, &args));
    assert!(r1.is_ok(), "{r1:?}");
    assert_eq!(format!("{r1:?}"), format!("{r2:?}"));
    let (run_moved, run_kept) = (moved.vm_mut().executed(), kept.vm_mut().executed());
    // t, t1 and u leave the inner loop (the lowering fuses some of what
    // is left differently): more than one instruction fewer per element.
    assert!(
        run_moved + (n * b) as u64 <= run_kept,
        "{run_moved} instructions against {run_kept}"
    );
    let g1 = moved.grad(f, &args).expect("grad");
    let g2 = kept.grad(f, &args).expect("grad");
    assert_eq!(g1.value.to_bits(), g2.value.to_bits());
    assert_eq!(format!("{:?}", g1.grad), format!("{:?}", g2.grad));
}

/// `sum_j a[j] · sin(x² + 1)`, the factor computed in the loop although
/// it does not change there.
const SCALED: &str = "
fn @scaled(%a: f64[], %x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %j = phi [entry: 0], [body: %j2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %j, %n
    br %c, body, done
body:
    %e = aget %a, %j
    %x2 = mul %x, %x
    %x3 = add %x2, 1.0
    %g = sin %x3
    %p = mul %e, %g
    %s2 = add %s, %p
    %j2 = add %j, 1
    jmp head
done:
    ret %s
}
";

/// Fewer bytes cross to the reverse code: without the motion the factor
/// `%g` (a sine, which the reverse code does not compute again) and the
/// cosine its pullback reads are pushed per element; with it they are
/// computed once, before the loop, and cross once. The same value, and
/// the same gradient up to rounding.
#[test]
fn moved_code_hands_the_reverse_code_less() {
    let n = 500usize;
    let a: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let args = [Value::Arr(a), Value::F64(0.75), Value::I64(n as i64)];
    let mut moved = Engine::new(module(SCALED)).expect("verifies");
    let mut kept = Engine::with_inlining(module(SCALED), &Policy::NONE).expect("verifies");
    let f = moved.find("scaled").expect("defined");
    assert_eq!(block_of(moved.module().func(f), "g"), "entry");
    assert_eq!(block_of(kept.module().func(f), "g"), "body");
    let g1 = moved.grad(f, &args).expect("grad");
    let bytes_moved = moved.vm_mut().peak_stack_bytes();
    let g2 = kept.grad(f, &args).expect("grad");
    let bytes_kept = kept.vm_mut().peak_stack_bytes();
    assert_eq!(g1.value.to_bits(), g2.value.to_bits());
    // x's cotangent is summed in another order (once, before the loop, in
    // place of once per element): the same up to rounding.
    assert!(
        g1.grad
            .iter()
            .zip(&g2.grad)
            .all(|(a, b)| testkit::same_gradient(a, b)),
        "the gradients differ"
    );
    assert!(
        bytes_kept >= 8 * n,
        "{bytes_kept} bytes crossed without the motion"
    );
    assert!(
        bytes_moved <= 128,
        "{bytes_moved} bytes crossed with it (without: {bytes_kept})"
    );
}
