//! If-conversion before deriving (`vm::ifconv`, on with
//! `Engine::set_if_conversion(true)`): which conditionals it converts and
//! which it leaves, that converted code computes what the branches did,
//! and what derived code gains: no block ids, and nothing more crossing to
//! the reverse code. (The corpus test
//! `if_conversion_changes_no_derivative_of_the_corpus` compares every
//! corpus gradient and Hessian-vector product with and without it.)

use ad::Engine;
use vm::ir::{FuncId, Module};
use vm::Value;

fn module(src: &str) -> Module {
    assembler::assemble(src, "t.adasm").expect("assembles")
}

/// `@f(%x: f64, %y: f64) -> f64` whose body is `body` (blocks after
/// `entry:`, which may branch on `%c = gt %x, %y` and must reach `ret`).
fn func(body: &str) -> String {
    format!(
        "fn @f(%x: f64, %y: f64, %k: i64, %v: f64[]) -> f64 {{\nentry:\n    %c = gt %x, %y\n{body}\n}}\n"
    )
}

/// Convert `@f` of `src`; how many conditionals, and how many blocks are
/// left. The converted function lowers, verifies and gives the same bits
/// (or the same trap) as the original at a few points.
fn convert(src: &str) -> (usize, usize) {
    let m = module(src);
    let mut c = m.clone();
    let n = vm::ifconv::convert(&mut c.funcs[0]);
    let blocks = c.funcs[0].blocks.len();
    assert!(vm::lower::check_module(&c).is_ok(), "converted:\n{c:?}");
    let mut before = Engine::with_inlining(m, &ad::Policy::NONE).expect("verifies");
    let mut after = Engine::with_inlining(c, &ad::Policy::NONE).expect("verifies");
    for (x, y) in [
        (1.5, 0.5),
        (-2.0, 0.25),
        (0.0, 0.0),
        (1e200, -1.0),
        (f64::NAN, 1.0),
    ] {
        let args = [
            Value::F64(x),
            Value::F64(y),
            Value::I64(1),
            Value::Arr(vec![0.5, -1.0, 2.0]),
        ];
        let (a, b) = (before.run(FuncId(0), &args), after.run(FuncId(0), &args));
        match (a, b) {
            (Ok(Value::F64(a)), Ok(Value::F64(b))) => assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "at ({x}, {y}): {a} before, {b} after"
            ),
            (a, b) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "at ({x}, {y})"),
        }
    }
    (n, blocks)
}

#[test]
fn diamonds_and_triangles_of_pure_cheap_arms_become_selects() {
    // A diamond: four blocks become one.
    let diamond = func(
        "    br %c, a, b
a:
    %p = mul %x, %x
    jmp j
b:
    %q = sub %y, %x
    %q2 = mul %q, 3.0
    jmp j
j:
    %r = phi [a: %p], [b: %q2]
    %s = add %r, 1.0
    ret %s",
    );
    assert_eq!(convert(&diamond), (1, 1));
    // Triangles, the arm on either side; phis of each scalar type, one
    // with the same value on both edges (a copy).
    for (br, arm_side) in [("br %c, a, j", "a"), ("br %c, j, a", "a")] {
        let src = func(&format!(
            "    {br}
{arm_side}:
    %p = mul %x, 0.5
    %i = add %k, 1
    jmp j
j:
    %r = phi [entry: %x], [a: %p]
    %n = phi [entry: %k], [a: %i]
    %t = phi [entry: true], [a: false]
    %same = phi [entry: %y], [a: %y]
    %nf = itof %n
    %u = select %t, %r, %nf
    %w = add %u, %same
    ret %w"
        ));
        assert_eq!(convert(&src), (1, 1), "{br}");
    }
    // A triangle inside a diamond's arm: the triangle first, then the
    // diamond, whose arm it has become.
    let nested = func(
        "    br %c, a, b
a:
    %d = gt %x, 1.0
    br %d, sq, inner
sq:
    %p = mul %x, %x
    jmp inner
inner:
    %u = phi [a: %x], [sq: %p]
    jmp j
b:
    %q = neg %y
    jmp j
j:
    %r = phi [inner: %u], [b: %q]
    ret %r",
    );
    assert_eq!(convert(&nested), (2, 1));
}

#[test]
fn arms_that_may_trap_touch_memory_cost_much_or_are_long_keep_their_branches() {
    let arm = |insts: &str| {
        func(&format!(
            "    br %c, a, j
a:
{insts}
    jmp j
j:
    %r = phi [entry: %x], [a: %p]
    ret %r"
        ))
    };
    // An element read (memory; it may trap), an integer division (it may
    // trap), a division and an exponential (not cheap), five instructions.
    for insts in [
        "    %p = aget %v, %k",
        "    %i = div %k, %k\n    %p = itof %i",
        "    %p = div %x, %y",
        "    %p = exp %x",
        "    %p1 = add %x, 1.0\n    %p2 = add %p1, 1.0\n    %p3 = add %p2, 1.0\n    %p4 = add %p3, 1.0\n    %p = add %p4, 1.0",
    ] {
        assert_eq!(convert(&arm(insts)), (0, 3), "{insts}");
    }
    // Four cheap instructions are few enough.
    let four = "    %p1 = add %x, 1.0\n    %p2 = add %p1, 1.0\n    %p3 = add %p2, 1.0\n    %p = add %p3, 1.0";
    assert_eq!(convert(&arm(four)), (1, 1));
    // A join with a third predecessor is no triangle's.
    let three = func(
        "    br %c, a, b
b:
    %d = gt %y, 0.0
    br %d, a, j
a:
    %p = mul %x, %x
    jmp j
j:
    %r = phi [b: %x], [a: %p]
    ret %r",
    );
    assert_eq!(convert(&three), (0, 4));
    // A join of arrays.
    let arrays = "
fn @f(%x: f64, %v: f64[], %w: f64[]) -> f64 {
entry:
    %c = gt %x, 0.0
    br %c, a, j
a:
    jmp j
j:
    %u = phi [entry: %v], [a: %w]
    %r = aget %u, 0
    ret %r
}
";
    let mut m = module(arrays);
    assert_eq!(vm::ifconv::convert(&mut m.funcs[0]), 0);
}

/// `Σ (v_i > 0 ? v_i² : 0.01 v_i)` over 1000 elements (the suite's
/// branchy): converted, the forward code pushes nothing per element (the
/// condition is recomputed from the element, read again); with the
/// branches, a block id per element. Same value and gradient.
#[test]
fn converted_joins_cost_derived_code_no_block_ids() {
    let src =
        std::fs::read_to_string(testkit::workspace_root().join("programs/bench/branchy.adasm"))
            .expect("readable");
    let n = 1000;
    let v: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
    let args = [Value::Arr(v)];
    let mut with = Engine::new(module(&src)).expect("verifies");
    with.set_if_conversion(true);
    let mut without = Engine::new(module(&src)).expect("verifies");
    let f = with.find("branchy").expect("defined");
    let a = with.grad(f, &args).expect("grad");
    let with_bytes = with.vm_mut().peak_stack_bytes();
    let b = without.grad(f, &args).expect("grad");
    let without_bytes = without.vm_mut().peak_stack_bytes();
    assert_eq!(a.value.to_bits(), b.value.to_bits());
    assert_eq!(format!("{:?}", a.grad), format!("{:?}", b.grad));
    assert!(with_bytes <= 64, "{with_bytes} bytes crossed converted");
    assert!(
        without_bytes >= 4 * n,
        "{without_bytes} bytes crossed with the branches"
    );
    let text = with.disasm_ad(f).expect("derives");
    assert!(!text.contains("blk.") && text.contains("select"), "{text}");
}

/// A condition the reverse code could only receive (it reads a value the
/// loop overwrites: `%v` of branch_in_loop's `@walk`) would cost 8 bytes
/// per iteration where a block id costs 4: that conditional keeps its
/// branches, and the derived code its block ids.
#[test]
fn a_condition_that_would_cross_keeps_its_branches() {
    let src =
        std::fs::read_to_string(testkit::workspace_root().join("programs/branch_in_loop.adasm"))
            .expect("readable");
    let mut e = Engine::new(module(&src)).expect("verifies");
    e.set_if_conversion(true);
    let f = e.find("walk").expect("defined");
    let text = e.disasm_ad(f).expect("derives");
    assert!(
        text.contains("blk.push") && !text.contains("select"),
        "{text}"
    );
}
