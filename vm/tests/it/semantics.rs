//! The semantics of every opcode (adasm.md §3 and the docs in `op.rs`) and
//! the interpreter's traps, on hand-built IR.

use testkit::ir::*;
use vm::interp::{Trap, TrapKind, Vm};
use vm::ir::{FuncId, Term};
use vm::op::{Fused, Op};
use vm::{Type, Value};

use Type::{Arr, Bool, F64, I64};

fn run(m: &vm::ir::Module, args: &[Value]) -> Result<Value, Trap> {
    let p = load(m);
    Vm::default().run(&p, FuncId(0), args)
}

fn ok(m: &vm::ir::Module, args: &[Value]) -> Value {
    match run(m, args) {
        Ok(v) => v,
        Err(t) => panic!("trapped: {t}"),
    }
}

fn trap(m: &vm::ir::Module, args: &[Value]) -> Trap {
    match run(m, args) {
        Ok(v) => panic!("returned {v}, expected a trap"),
        Err(t) => t,
    }
}

fn int2(op: Op, a: i64, b: i64) -> Result<Value, Trap> {
    run(
        &single(op, I64, Some(I64), I64),
        &[Value::I64(a), Value::I64(b)],
    )
}

fn f2(op: Op, a: f64, b: f64) -> f64 {
    match ok(
        &single(op, F64, Some(F64), F64),
        &[Value::F64(a), Value::F64(b)],
    ) {
        Value::F64(x) => x,
        v => panic!("{v:?}"),
    }
}

fn f1(op: Op, a: f64) -> f64 {
    match ok(&single(op, F64, None, F64), &[Value::F64(a)]) {
        Value::F64(x) => x,
        v => panic!("{v:?}"),
    }
}

type Bin = fn(f64, f64) -> f64;
type Un = fn(f64) -> f64;

/// The same bits, or both nan (of any payload).
pub(crate) fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn i64_arithmetic_wraps() {
    let cases = [
        (Op::AddI, i64::MAX, 1, i64::MIN),
        (Op::SubI, i64::MIN, 1, i64::MAX),
        (Op::MulI, i64::MAX, 2, -2),
        (Op::MulI, i64::MIN, -1, i64::MIN),
        (Op::DivI, i64::MIN, -1, i64::MIN),
        (Op::RemI, i64::MIN, -1, 0),
        (Op::DivI, -7, 2, -3),
        (Op::RemI, -7, 2, -1),
        (Op::RemI, 7, -2, 1),
        (Op::AddI, 2, 3, 5),
        (Op::SubI, 2, 3, -1),
    ];
    for (op, a, b, want) in cases {
        assert_eq!(int2(op, a, b), Ok(Value::I64(want)), "{op:?} {a} {b}");
    }
    let neg = single(Op::NegI, I64, None, I64);
    assert_eq!(ok(&neg, &[Value::I64(i64::MIN)]), Value::I64(i64::MIN));
    assert_eq!(ok(&neg, &[Value::I64(5)]), Value::I64(-5));
}

#[test]
fn integer_division_and_remainder_by_zero_trap() {
    let t = int2(Op::DivI, 1, 0).expect_err("traps");
    assert_eq!(t.kind, TrapKind::DivByZero);
    let t = int2(Op::RemI, 1, 0).expect_err("traps");
    assert_eq!(t.kind, TrapKind::RemByZero);
    let t = int2(Op::DivI, i64::MIN, 0).expect_err("traps");
    assert_eq!(t.kind, TrapKind::DivByZero);
}

#[test]
fn trap_message_names_function_block_instruction_and_line() {
    let mut b = B::new("f", &[("a", I64), ("b", I64)], I64);
    let entry = b.block("entry");
    let body = b.block("body");
    b.jmp(entry, body);
    let q = b.val("q", I64);
    let (x, y) = (b.p(0), b.p(1));
    b.set(body, Op::DivI, q, &[x, y]);
    b.line(body, 7);
    b.ret(body, q);
    let t = trap(&b.module(), &[Value::I64(1), Value::I64(0)]);
    assert_eq!(
        t.to_string(),
        "trap: integer division by zero in @f, block body, at `div.i %q, %a, %b` (line 7)"
    );
    assert_eq!((t.func.as_str(), t.block.as_str()), ("f", "body"));
    assert_eq!(t.loc.line, 7);
}

#[test]
fn f64_arithmetic_and_math() {
    let bin: [(Op, Bin); 5] = [
        (Op::AddF, |a, b| a + b),
        (Op::SubF, |a, b| a - b),
        (Op::MulF, |a, b| a * b),
        (Op::DivF, |a, b| a / b),
        (Op::PowF, f64::powf),
    ];
    for (op, g) in bin {
        for (a, b) in [(1.5, 2.25), (-3.0, 0.5), (2.0, 0.0), (0.0, 0.0)] {
            assert!(same(f2(op, a, b), g(a, b)), "{op:?} {a} {b}");
        }
    }
    let un: [(Op, Un); 10] = [
        (Op::NegF, |a| -a),
        (Op::Sin, f64::sin),
        (Op::Cos, f64::cos),
        (Op::Tan, f64::tan),
        (Op::Exp, f64::exp),
        (Op::Log, f64::ln),
        (Op::Sqrt, f64::sqrt),
        (Op::Tanh, f64::tanh),
        (Op::AbsF, f64::abs),
        (Op::NoGrad, |a| a),
    ];
    for (op, g) in un {
        for a in [0.7, -1.3, 0.0, -0.0, 4.0] {
            assert!(same(f1(op, a), g(a)), "{op:?} {a}");
        }
    }
}

/// The math instructions of adasm.md §7 compute exactly Rust's `f64`
/// methods (libm's `erf` and `erfc`), bit for bit, at ordinary points and
/// at the edges: signed zeros, tiny and huge arguments, the ends of a
/// domain, half-way points of rounding, infinities and nan. (Their values
/// against the independent Python reference are the corpus's `math_*`
/// programs; the native tier's are `jit/tests/it/differential.rs`.)
#[test]
fn math_library_matches_rust_and_libm_at_edges() {
    let un: [(Op, Un); 16] = [
        (Op::Erf, libm::erf),
        (Op::Erfc, libm::erfc),
        (Op::Atan, f64::atan),
        (Op::Asin, f64::asin),
        (Op::Acos, f64::acos),
        (Op::Sinh, f64::sinh),
        (Op::Cosh, f64::cosh),
        (Op::Log1p, f64::ln_1p),
        (Op::Expm1, f64::exp_m1),
        (Op::Log2, f64::log2),
        (Op::Log10, f64::log10),
        (Op::Cbrt, f64::cbrt),
        (Op::Floor, f64::floor),
        (Op::Ceil, f64::ceil),
        (Op::Round, f64::round),
        (Op::Trunc, f64::trunc),
    ];
    let points = [
        0.7,
        -1.3,
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -2.5,
        1e-300,
        -5e-324,
        1e300,
        -1e300,
        710.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    for (op, g) in un {
        for a in points {
            assert!(same(f1(op, a), g(a)), "{op:?} {a}");
        }
    }
    let bin: [(Op, Bin); 2] = [(Op::Atan2, f64::atan2), (Op::Hypot, f64::hypot)];
    for (op, g) in bin {
        for a in points {
            for b in [0.0, -0.0, 1.0, -2.5, 1e-300, 1e300, f64::INFINITY, f64::NAN] {
                assert!(same(f2(op, a, b), g(a, b)), "{op:?} {a} {b}");
            }
        }
    }
    // A few values the contract names: round goes half-way away from
    // zero; hypot does not overflow; asin ends at ±π/2.
    assert_eq!(f1(Op::Round, 2.5), 3.0);
    assert_eq!(f1(Op::Round, -2.5), -3.0);
    assert!(f2(Op::Hypot, 1e300, 1e300).is_finite());
    assert_eq!(f1(Op::Asin, 1.0), std::f64::consts::FRAC_PI_2);
    assert!(f1(Op::Asin, 1.5).is_nan());
}

#[test]
fn min_and_max_ties_go_to_the_first_operand() {
    let z = 0.0f64;
    let nz = -0.0f64;
    // Ties: the first operand, bit for bit.
    assert!(same(f2(Op::MinF, z, nz), z));
    assert!(same(f2(Op::MinF, nz, z), nz));
    assert!(same(f2(Op::MaxF, z, nz), z));
    assert!(same(f2(Op::MaxF, nz, z), nz));
    // A nan second operand loses; a nan first operand is kept.
    assert_eq!(f2(Op::MinF, 1.0, f64::NAN), 1.0);
    assert_eq!(f2(Op::MaxF, 1.0, f64::NAN), 1.0);
    assert!(f2(Op::MinF, f64::NAN, 1.0).is_nan());
    assert_eq!(f2(Op::MinF, 2.0, 1.0), 1.0);
    assert_eq!(f2(Op::MaxF, 2.0, 3.0), 3.0);
    assert_eq!(int2(Op::MinI, 3, -4), Ok(Value::I64(-4)));
    assert_eq!(int2(Op::MaxI, 3, -4), Ok(Value::I64(3)));
    assert_eq!(int2(Op::MinI, 5, 5), Ok(Value::I64(5)));
}

#[test]
fn select_picks_by_condition_for_every_type() {
    for (t, a, b) in [
        (F64, Value::F64(1.5), Value::F64(-2.0)),
        (I64, Value::I64(7), Value::I64(-9)),
        (Bool, Value::Bool(true), Value::Bool(false)),
        (Arr, Value::Arr(vec![1.0]), Value::Arr(vec![2.0, 3.0])),
    ] {
        let mut bl = B::new("sel", &[("c", Bool), ("a", t), ("b", t)], t);
        let entry = bl.block("entry");
        let (c, x, y) = (bl.p(0), bl.p(1), bl.p(2));
        let r = bl.op(entry, Op::Select, Some(t), &[c, x, y]);
        bl.ret(entry, r);
        let m = bl.module();
        for (cond, want) in [(true, &a), (false, &b)] {
            let got = ok(&m, &[Value::Bool(cond), a.clone(), b.clone()]);
            assert_eq!(&got, want, "{t} {cond}");
        }
    }
}

#[test]
fn comparisons_are_ieee() {
    let cmp = |op: Op, a: f64, b: f64| {
        ok(
            &single(op, F64, Some(F64), Bool),
            &[Value::F64(a), Value::F64(b)],
        )
    };
    let t = Value::Bool(true);
    let f = Value::Bool(false);
    for op in [Op::LtF, Op::LeF, Op::GtF, Op::GeF, Op::EqF] {
        assert_eq!(cmp(op, f64::NAN, 1.0), f, "{op:?}");
        assert_eq!(cmp(op, 1.0, f64::NAN), f, "{op:?}");
        assert_eq!(cmp(op, f64::NAN, f64::NAN), f, "{op:?}");
    }
    assert_eq!(cmp(Op::NeF, f64::NAN, f64::NAN), t);
    assert_eq!(cmp(Op::NeF, 1.0, 1.0), f);
    assert_eq!(cmp(Op::EqF, 0.0, -0.0), t);
    assert_eq!(cmp(Op::LtF, 1.0, 2.0), t);
    assert_eq!(cmp(Op::LeF, 2.0, 2.0), t);
    assert_eq!(cmp(Op::GtF, 1.0, 2.0), f);
    assert_eq!(cmp(Op::GeF, 2.0, 2.0), t);
    let icmp = |op: Op, a: i64, b: i64| {
        ok(
            &single(op, I64, Some(I64), Bool),
            &[Value::I64(a), Value::I64(b)],
        )
    };
    assert_eq!(icmp(Op::LtI, -1, 0), t);
    assert_eq!(icmp(Op::LeI, 0, 0), t);
    assert_eq!(icmp(Op::GtI, i64::MIN, i64::MAX), f);
    assert_eq!(icmp(Op::GeI, 3, 4), f);
    assert_eq!(icmp(Op::EqI, 3, 3), t);
    assert_eq!(icmp(Op::NeI, 3, 3), f);
}

/// Comparisons feeding a branch become fused compare-and-branch
/// instructions: the same IEEE answers (a negated `lt` is not `ge`), with
/// the branch negated (`yes` right after `entry`) or not.
#[test]
fn fused_branches_are_ieee() {
    for (op, yes_next) in [Op::LtF, Op::LeF, Op::GtF, Op::GeF, Op::EqF, Op::NeF]
        .into_iter()
        .flat_map(|op| [(op, true), (op, false)])
    {
        let p = load(&branch_on(op, F64, yes_next));
        assert!(
            p.func(FuncId(0))
                .code
                .iter()
                .any(|i| matches!(i.op.branch(), Some(b) if b.fused == Fused::CmpF)),
            "{op:?} fused"
        );
        let fused = p.func(FuncId(0)).code[0].op.branch().expect("fused");
        assert_eq!(fused.negated, yes_next, "{op:?}");
        for (a, bb) in [
            (1.0, 2.0),
            (2.0, 1.0),
            (1.0, 1.0),
            (f64::NAN, 1.0),
            (1.0, f64::NAN),
        ] {
            let want = match op {
                Op::LtF => a < bb,
                Op::LeF => a <= bb,
                Op::GtF => a > bb,
                Op::GeF => a >= bb,
                Op::EqF => a == bb,
                _ => a != bb,
            };
            let got = Vm::default()
                .run(&p, FuncId(0), &[Value::F64(a), Value::F64(bb)])
                .expect("runs");
            assert_eq!(got, Value::I64(want as i64), "{op:?} {yes_next} {a} {bb}");
        }
    }
}

/// `@br(a, b) = a OP b ? 1 : 0` as a comparison feeding a `br`, with the
/// `yes` block laid out right after `entry` or not (so that the lowering
/// negates the fused branch or not).
fn branch_on(op: Op, ty: Type, yes_next: bool) -> vm::ir::Module {
    let mut b = B::new("br", &[("a", ty), ("b", ty)], I64);
    let entry = b.block("entry");
    let (yes, no) = if yes_next {
        let y = b.block("yes");
        (y, b.block("no"))
    } else {
        let n = b.block("no");
        (b.block("yes"), n)
    };
    let (x, y) = (b.p(0), b.p(1));
    let c = b.op(entry, op, Some(Bool), &[x, y]);
    b.br(entry, c, yes, no);
    let (one, zero) = (b.i64(1), b.i64(0));
    b.ret(yes, one);
    b.ret(no, zero);
    b.module()
}

/// Integer comparisons feeding a branch: one opcode per condition, a
/// negated branch being the inverse condition.
#[test]
fn fused_integer_branches() {
    for op in [Op::LtI, Op::LeI, Op::GtI, Op::GeI, Op::EqI, Op::NeI] {
        for yes_next in [true, false] {
            let p = load(&branch_on(op, I64, yes_next));
            let fused = p.func(FuncId(0)).code[0].op.branch().expect("fused");
            assert_eq!(fused.fused, Fused::CmpI);
            assert!(!fused.negated);
            for (a, bb) in [(1, 2), (2, 1), (1, 1), (i64::MIN, i64::MAX)] {
                let want = match op {
                    Op::LtI => a < bb,
                    Op::LeI => a <= bb,
                    Op::GtI => a > bb,
                    Op::GeI => a >= bb,
                    Op::EqI => a == bb,
                    _ => a != bb,
                };
                let got = Vm::default()
                    .run(&p, FuncId(0), &[Value::I64(a), Value::I64(bb)])
                    .expect("runs");
                assert_eq!(got, Value::I64(want as i64), "{op:?} {yes_next} {a} {bb}");
            }
        }
    }
}

fn is_step(op: Op) -> bool {
    matches!(op.branch(), Some(b) if b.fused == Fused::StepI)
}

/// `%c = add.i %c, %s` followed by a branch on an integer comparison
/// reading `%c` becomes one `jmp.step.i`: the same wrapping step, the same
/// answer for every condition, with the counter on either side of the
/// comparison (or both), branch negated or not. `sub.i` by a register is
/// not fused (the step-and-branch only adds), and gives the same answers.
/// (By a constant it is: `sub_by_a_constant_steps_by_its_negation`.)
#[test]
fn fused_step_and_branch() {
    let conds = [Op::LtI, Op::LeI, Op::GtI, Op::GeI, Op::EqI, Op::NeI];
    let values = [
        (i64::MAX, 1, i64::MIN),
        (i64::MIN, 1, i64::MAX),
        (0, 1, 1),
        (5, 3, 2),
        (-7, 2, -5),
        (3, 0, 3),
        (i64::MIN, -1, 0),
    ];
    for step_op in [Op::AddI, Op::SubI] {
        for cmp in conds {
            // Which operands of the comparison are the counter.
            for sides in [(true, false), (false, true), (true, true)] {
                // `yes` right after `entry` (the branch is negated) or not.
                for yes_next in [true, false] {
                    let mut b = B::new("step", &[("c", I64), ("s", I64), ("n", I64)], I64);
                    let (c, st, n) = (b.p(0), b.p(1), b.p(2));
                    let entry = b.block("entry");
                    let (yes, no) = if yes_next {
                        let y = b.block("yes");
                        (y, b.block("no"))
                    } else {
                        let no = b.block("no");
                        (b.block("yes"), no)
                    };
                    b.set(entry, step_op, c, &[c, st]);
                    let lhs = if sides.0 { c } else { n };
                    let rhs = if sides.1 { c } else { n };
                    let t = b.op(entry, cmp, Some(Bool), &[lhs, rhs]);
                    b.br(entry, t, yes, no);
                    b.ret(yes, c);
                    let k = b.i64(12345);
                    let r = b.op(no, Op::SubI, Some(I64), &[c, k]);
                    b.ret(no, r);
                    let p = load(&b.module());
                    let code = &p.func(FuncId(0)).code;
                    let what = format!("{step_op:?} {cmp:?} {sides:?} {yes_next}");
                    let fused = step_op == Op::AddI;
                    assert_eq!(is_step(code[0].op), fused, "{what}");
                    for (c0, s0, n0) in values {
                        let c1 = if step_op == Op::AddI {
                            c0.wrapping_add(s0)
                        } else {
                            c0.wrapping_sub(s0)
                        };
                        let l = if sides.0 { c1 } else { n0 };
                        let r = if sides.1 { c1 } else { n0 };
                        let holds = match cmp {
                            Op::LtI => l < r,
                            Op::LeI => l <= r,
                            Op::GtI => l > r,
                            Op::GeI => l >= r,
                            Op::EqI => l == r,
                            _ => l != r,
                        };
                        let want = if holds { c1 } else { c1.wrapping_sub(12345) };
                        let mut vm = Vm::default();
                        let got = vm
                            .run(
                                &p,
                                FuncId(0),
                                &[Value::I64(c0), Value::I64(s0), Value::I64(n0)],
                            )
                            .expect("runs");
                        assert_eq!(got, Value::I64(want), "{what}: {c0} {s0} {n0}");
                        // One instruction for the step and the branch
                        // when fused.
                        let steps = if holds { 2 } else { 3 } + u64::from(!fused);
                        assert_eq!(vm.executed(), steps, "{what}");
                    }
                }
            }
        }
    }
}

/// `%c = sub.i %c, k` by a constant `k` fuses into a step-and-branch that
/// adds the constant `-k` (made by the lowering when the function has no
/// such constant), with the same wrapping results; `k = i64::MIN`, whose
/// negation does not exist, stays unfused.
#[test]
fn sub_by_a_constant_steps_by_its_negation() {
    for k in [1, 3, -2, 0, i64::MAX, i64::MIN + 1, i64::MIN] {
        for cmp in [Op::LtI, Op::GeI, Op::EqI, Op::NeI] {
            let mut b = B::new("down", &[("c", I64), ("n", I64)], I64);
            let (c, n) = (b.p(0), b.p(1));
            let entry = b.block("entry");
            let yes = b.block("yes");
            let no = b.block("no");
            let kk = b.i64(k);
            b.set(entry, Op::SubI, c, &[c, kk]);
            let t = b.op(entry, cmp, Some(Bool), &[c, n]);
            b.br(entry, t, yes, no);
            b.ret(yes, c);
            let m = b.i64(-7);
            let r = b.op(no, Op::MulI, Some(I64), &[c, m]);
            b.ret(no, r);
            let p = load(&b.module());
            let f = p.func(FuncId(0));
            let what = format!("{k} {cmp:?}");
            assert_eq!(is_step(f.code[0].op), k != i64::MIN, "{what}");
            if k != i64::MIN {
                // The step register holds -k.
                let r = f.code[0].r1 as usize - f.param_types.len();
                assert_eq!(f.consts.get(r).map(|b| *b as i64), Some(-k), "{what}");
            }
            for (c0, n0) in [(0, 0), (5, 2), (i64::MIN, 0), (i64::MAX, -1), (-3, -3)] {
                let c1 = c0.wrapping_sub(k);
                let holds = match cmp {
                    Op::LtI => c1 < n0,
                    Op::GeI => c1 >= n0,
                    Op::EqI => c1 == n0,
                    _ => c1 != n0,
                };
                let want = if holds { c1 } else { c1.wrapping_mul(-7) };
                let got = Vm::default()
                    .run(&p, FuncId(0), &[Value::I64(c0), Value::I64(n0)])
                    .expect("runs");
                assert_eq!(got, Value::I64(want), "{what}: {c0} {n0}");
            }
        }
    }
}

/// Non-SSA code, as reverse functions have it: a counter written in place
/// in a self-loop (`%c = sub.i %c, 3; %t = eq %c, %lim; br %t, done,
/// loop`) is fused too, and the loop runs the same.
#[test]
fn step_and_branch_in_non_ssa_loops() {
    let mut b = B::new("down", &[("c", I64), ("lim", I64)], I64);
    let (c, lim) = (b.p(0), b.p(1));
    let entry = b.block("entry");
    let lp = b.block("loop");
    let done = b.block("done");
    let n = b.val("n", I64);
    let (zero, one, three) = (b.i64(0), b.i64(1), b.i64(3));
    b.set(entry, Op::Mov, n, &[zero]);
    b.jmp(entry, lp);
    b.set(lp, Op::AddI, n, &[n, one]);
    b.set(lp, Op::SubI, c, &[c, three]);
    let t = b.op(lp, Op::EqI, Some(Bool), &[lim, c]);
    b.br(lp, t, done, lp);
    b.ret(done, n);
    let p = load(&b.module());
    let f = p.func(FuncId(0));
    assert!(
        f.code.iter().any(|i| is_step(i.op)),
        "{}",
        vm::disasm::function(f)
    );
    let mut vm = Vm::default();
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::I64(30), Value::I64(0)]),
        Ok(Value::I64(10))
    );
    // `copy`, then 2 per iteration (`add.i %n` and the step-and-branch),
    // then `ret`.
    assert_eq!(vm.executed(), 1 + 10 * 2 + 1, "{}", vm::disasm::function(f));
}

#[test]
fn bool_logic() {
    for (op, g) in [
        (Op::And, (|a, b| a && b) as fn(bool, bool) -> bool),
        (Op::Or, |a, b| a || b),
    ] {
        for a in [false, true] {
            for b in [false, true] {
                let got = ok(
                    &single(op, Bool, Some(Bool), Bool),
                    &[Value::Bool(a), Value::Bool(b)],
                );
                assert_eq!(got, Value::Bool(g(a, b)));
            }
        }
    }
    let not = single(Op::Not, Bool, None, Bool);
    assert_eq!(ok(&not, &[Value::Bool(true)]), Value::Bool(false));
    assert_eq!(ok(&not, &[Value::Bool(false)]), Value::Bool(true));
}

#[test]
fn conversions() {
    let itof = single(Op::ItoF, I64, None, F64);
    assert_eq!(ok(&itof, &[Value::I64(-3)]), Value::F64(-3.0));
    let ftoi = single(Op::FtoI, F64, None, I64);
    for (x, want) in [
        (2.9, 2),
        (-2.9, -2),
        (-0.5, 0),
        (i64::MIN as f64, i64::MIN),
        // The largest f64 below 2^63.
        (
            f64::from_bits(2f64.powi(63).to_bits() - 1),
            9_223_372_036_854_774_784,
        ),
    ] {
        assert_eq!(ok(&ftoi, &[Value::F64(x)]), Value::I64(want), "{x}");
    }
    for x in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        9.3e18,
        -9.3e18,
        2f64.powi(63),
    ] {
        let t = trap(&ftoi, &[Value::F64(x)]);
        assert!(matches!(t.kind, TrapKind::FtoiInvalid(_)), "{x}: {t}");
        assert!(t.to_string().contains("ftoi"), "{t}");
    }
}

#[test]
fn copy_moves_every_type() {
    for (t, v) in [
        (F64, Value::F64(-1.25)),
        (I64, Value::I64(-5)),
        (Bool, Value::Bool(true)),
        (Arr, Value::Arr(vec![1.0, 2.0])),
    ] {
        let m = single(Op::Mov, t, None, t);
        assert_eq!(ok(&m, std::slice::from_ref(&v)), v);
    }
}

/// `fn @arr(%n: i64, %i: i64) -> f64`: `a = anew n; a[i] = 2.5;
/// return a[i] + itof(alen a)`.
fn array_program() -> vm::ir::Module {
    let mut b = B::new("arr", &[("n", I64), ("i", I64)], F64);
    let entry = b.block("entry");
    let (n, i) = (b.p(0), b.p(1));
    let a = b.op(entry, Op::ANew, Some(Arr), &[n]);
    let v = b.f64(2.5);
    b.eff(entry, Op::ASet, &[a, i, v]);
    let x = b.op(entry, Op::AGet, Some(F64), &[a, i]);
    let len = b.op(entry, Op::ALen, Some(I64), &[a]);
    let lf = b.op(entry, Op::ItoF, Some(F64), &[len]);
    let r = b.op(entry, Op::AddF, Some(F64), &[x, lf]);
    b.ret(entry, r);
    b.module()
}

#[test]
fn arrays_new_len_get_set() {
    let m = array_program();
    assert_eq!(ok(&m, &[Value::I64(3), Value::I64(2)]), Value::F64(5.5));
}

#[test]
fn out_of_bounds_access_traps() {
    let m = array_program();
    // aset comes first, so it is the one that traps.
    for i in [3, -1, i64::MIN] {
        let t = trap(&m, &[Value::I64(3), Value::I64(i)]);
        assert_eq!(t.kind, TrapKind::OutOfBounds { index: i, len: 3 }, "{t}");
        assert!(t.instr.starts_with("aset"), "{t}");
    }
    // aget on an array argument.
    let mut b = B::new("get", &[("v", Arr), ("i", I64)], F64);
    let entry = b.block("entry");
    let (v, i) = (b.p(0), b.p(1));
    let x = b.op(entry, Op::AGet, Some(F64), &[v, i]);
    b.ret(entry, x);
    let m = b.module();
    let arr = Value::Arr(vec![1.0, 2.0]);
    assert_eq!(ok(&m, &[arr.clone(), Value::I64(1)]), Value::F64(2.0));
    let t = trap(&m, &[arr.clone(), Value::I64(2)]);
    assert_eq!(t.kind, TrapKind::OutOfBounds { index: 2, len: 2 });
    assert!(
        t.to_string()
            .contains("array index 2 out of bounds for length 2"),
        "{t}"
    );
    let t = trap(&m, &[arr, Value::I64(-1)]);
    assert_eq!(t.kind, TrapKind::OutOfBounds { index: -1, len: 2 });
}

#[test]
fn negative_and_oversized_anew_trap() {
    let m = array_program();
    let t = trap(&m, &[Value::I64(-1), Value::I64(0)]);
    assert_eq!(t.kind, TrapKind::NegativeLength(-1));
    let p = load(&m);
    let mut vm = Vm::default();
    vm.limits_mut().max_array_len = 10;
    let t = vm
        .run(&p, FuncId(0), &[Value::I64(11), Value::I64(0)])
        .expect_err("traps");
    assert!(
        matches!(t.kind, TrapKind::ArrayTooLarge { limit: 10, .. }),
        "{t}"
    );
    assert!(t.to_string().contains("--max-array"), "{t}");
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::I64(10), Value::I64(0)]),
        Ok(Value::F64(12.5))
    );
    // i64::MAX elements: a trap, not an allocation failure.
    let t = Vm::default()
        .run(&p, FuncId(0), &[Value::I64(i64::MAX), Value::I64(0)])
        .expect_err("traps");
    assert!(matches!(t.kind, TrapKind::ArrayTooLarge { .. }), "{t}");
}

/// An array register that was never assigned holds the null handle.
#[test]
fn unassigned_array_register_is_a_bad_handle() {
    let mut b = B::new("null", &[], I64);
    let entry = b.block("entry");
    let a = b.val("a", Arr);
    let n = b.op(entry, Op::ALen, Some(I64), &[a]);
    b.ret(entry, n);
    let t = trap(&b.module(), &[]);
    assert_eq!(t.kind, TrapKind::BadHandle);
}

/// Arrays are passed by reference: a callee's `aset` is seen by the
/// caller, and an array result is copied out.
#[test]
fn arrays_are_passed_by_reference_and_returned() {
    let mut g = B::new("fill", &[("v", Arr), ("x", F64)], F64);
    let e = g.block("entry");
    let (v, x) = (g.p(0), g.p(1));
    let z = g.i64(0);
    g.eff(e, Op::ASet, &[v, z, x]);
    g.ret(e, x);
    let mut f = B::new("f", &[("v", Arr)], Arr);
    let e = f.block("entry");
    let v = f.p(0);
    let c = f.f64(9.0);
    f.call(e, 1, F64, &[v, c]);
    f.ret(e, v);
    let m = module(vec![f, g]);
    assert_eq!(
        ok(&m, &[Value::Arr(vec![1.0, 2.0])]),
        Value::Arr(vec![9.0, 2.0])
    );
}

#[test]
fn host_arguments_are_checked() {
    let p = load(&powloop());
    let mut vm = Vm::default();
    let t = vm
        .run(&p, FuncId(0), &[Value::F64(1.0)])
        .expect_err("count");
    assert!(matches!(t.kind, TrapKind::ArgMismatch(_)), "{t}");
    let t = vm
        .run(&p, FuncId(0), &[Value::F64(1.0), Value::F64(2.0)])
        .expect_err("type");
    assert!(matches!(t.kind, TrapKind::ArgMismatch(_)), "{t}");
    let t = vm.run(&p, FuncId(7), &[]).expect_err("no function");
    assert!(matches!(t.kind, TrapKind::ArgMismatch(_)), "{t}");
    let t = vm.call_raw(&p, FuncId(0), &[0]).expect_err("raw count");
    assert!(matches!(t.kind, TrapKind::ArgMismatch(_)), "{t}");
}

#[test]
fn accumulators_zero_and_take() {
    // r = 1; r += 2; r -= 0.5; r += 3 * 4 (14.5); s = 5; t = take s
    // (t = 5, s = 0); z = 5; zero z; return r + t + s + z = 19.5
    let mut b = B::new("acc", &[], F64);
    let e = b.block("entry");
    let r = b.val("r", F64);
    let s = b.val("s", F64);
    let t = b.val("t", F64);
    let (c1, c2, c05, c3, c4, c5) = (
        b.f64(1.0),
        b.f64(2.0),
        b.f64(0.5),
        b.f64(3.0),
        b.f64(4.0),
        b.f64(5.0),
    );
    b.set(e, Op::Mov, r, &[c1]);
    b.set(e, Op::Acc, r, &[r, c2]);
    b.set(e, Op::AccNeg, r, &[r, c05]);
    b.set(e, Op::AccMul, r, &[r, c3, c4]);
    b.set(e, Op::Mov, s, &[c5]);
    b.set(e, Op::Take, t, &[s]);
    let u = b.op(e, Op::AddF, Some(F64), &[r, t]);
    let w = b.op(e, Op::AddF, Some(F64), &[u, s]);
    let z = b.val("z", F64);
    b.set(e, Op::Mov, z, &[c5]);
    b.set(e, Op::Zero, z, &[]);
    let out = b.op(e, Op::AddF, Some(F64), &[w, z]);
    b.ret(e, out);
    assert_eq!(ok(&b.module(), &[]), Value::F64(19.5));
}

/// The fused pops multiply by the value on top of the comms stack:
/// `acc.mul.pop r, a` is `r += a * pop()`, `mul.pop r, a` is `r = a * pop()`;
/// popping an empty stack traps.
#[test]
fn fused_pops_multiply_by_the_popped_value() {
    let mut b = B::new("fused", &[], F64);
    let e = b.block("entry");
    let (c1, c2, c3, c5, c10) = (b.f64(1.0), b.f64(2.0), b.f64(3.0), b.f64(5.0), b.f64(10.0));
    b.eff(e, Op::CommsPush, &[c3]);
    b.eff(e, Op::CommsPush, &[c5]);
    let r = b.val("r", F64);
    let s = b.val("s", F64);
    b.set(e, Op::Mov, r, &[c1]);
    b.eff(e, Op::AccMulPop, &[r, c2]); // r = 1 + 2 * 5
    b.set(e, Op::MulPop, s, &[c10]); // s = 10 * 3
    let out = b.op(e, Op::AddF, Some(F64), &[r, s]);
    b.ret(e, out);
    assert_eq!(ok(&b.module(), &[]), Value::F64(41.0));

    for op in [Op::AccMulPop, Op::MulPop] {
        let mut b = B::new("empty", &[], F64);
        let e = b.block("entry");
        let r = b.val("r", F64);
        let c2 = b.f64(2.0);
        if op == Op::AccMulPop {
            b.eff(e, op, &[r, c2]);
        } else {
            b.set(e, op, r, &[c2]);
        }
        b.ret(e, r);
        let t = trap(&b.module(), &[]);
        assert_eq!(t.kind, TrapKind::StackUnderflow, "{op:?}");
        assert!(t.instr.starts_with(op.mnemonic()), "{t}");
    }
}

/// `call.acc` adds each value a `ret.n` callee returns to the caller's
/// registers (reverse code calling a pullback).
#[test]
fn call_acc_accumulates_returned_values() {
    let mut g = B::new_many("pull", &[("x", F64)], 2);
    let e = g.block("entry");
    let x = g.p(0);
    let (c2, c3) = (g.f64(2.0), g.f64(3.0));
    let a = g.op(e, Op::MulF, Some(F64), &[x, c2]);
    let b2 = g.op(e, Op::MulF, Some(F64), &[x, c3]);
    g.term(e, Term::RetN(vec![a, b2]));

    let mut f = B::new("f", &[("x", F64)], F64);
    let e = f.block("entry");
    let x = f.p(0);
    let acc_a = f.val("da", F64);
    let acc_b = f.val("db", F64);
    let c1 = f.f64(1.0);
    f.set(e, Op::Mov, acc_a, &[c1]);
    f.call_acc(e, 1, &[x], &[acc_a, acc_b]);
    f.call_acc(e, 1, &[x], &[acc_a, acc_b]);
    let c100 = f.f64(100.0);
    let scaled = f.op(e, Op::MulF, Some(F64), &[acc_b, c100]);
    let r = f.op(e, Op::AddF, Some(F64), &[acc_a, scaled]);
    f.ret(e, r);
    let m = module(vec![f, g]);
    // da = 1 + 2x + 2x, db = 3x + 3x; x = 0.5: 3 + 100 * 3
    assert_eq!(ok(&m, &[Value::F64(0.5)]), Value::F64(303.0));

    // A ret.n function called from the host: its values are the results.
    let p = load(&m);
    let mut vm = Vm::default();
    vm.begin(false);
    vm.call_raw(&p, FuncId(1), &[2.0f64.to_bits()])
        .expect("runs");
    let got: Vec<f64> = vm.results().iter().map(|b| f64::from_bits(*b)).collect();
    assert_eq!(got, vec![4.0, 6.0]);
    assert_eq!(
        vm.run(&p, FuncId(1), &[Value::F64(1.0)]),
        Ok(Value::Arr(vec![2.0, 3.0]))
    );
}

/// `blk.push 2; blk.push 1; blk.push 0`, then three `blk.pop`s over the
/// same table: the first dispatches to `a` (id 0, the interpreter's branch
/// of its own), the second to `b` (id 1) and the third to `c` (id 2), both
/// through the table.
#[test]
fn block_stack_dispatch() {
    let mut bl = B::new("blk", &[], F64);
    let entry = bl.block("entry");
    let a = bl.block("a");
    let b = bl.block("b");
    let c = bl.block("c");
    let r = bl.val("r", F64);
    let (c1, c10, c100) = (bl.f64(1.0), bl.f64(10.0), bl.f64(100.0));
    bl.blk_push(entry, 2);
    bl.blk_push(entry, 1);
    bl.blk_push(entry, 0);
    bl.term(entry, Term::BlkPop(vec![a, b, c]));
    bl.set(a, Op::Acc, r, &[r, c1]);
    bl.term(a, Term::BlkPop(vec![a, b, c]));
    bl.set(b, Op::Acc, r, &[r, c10]);
    bl.term(b, Term::BlkPop(vec![a, b, c]));
    bl.set(c, Op::Acc, r, &[r, c100]);
    bl.ret(c, r);
    let p = load(&bl.module());
    let mut vm = Vm::default();
    vm.begin(false);
    vm.call_raw(&p, FuncId(0), &[]).expect("runs");
    assert_eq!(f64::from_bits(vm.results()[0]), 111.0);
    assert_eq!(vm.blk_len(), 0);
    assert_eq!(vm.peak_stack_bytes(), 0);
}

#[test]
fn block_stack_underflow_and_bad_ids_trap() {
    let mut bl = B::new("blk", &[], F64);
    let entry = bl.block("entry");
    let a = bl.block("a");
    let z = bl.f64(0.0);
    bl.term(entry, Term::BlkPop(vec![a]));
    bl.ret(a, z);
    let m = bl.module();
    assert_eq!(trap(&m, &[]).kind, TrapKind::StackUnderflow);

    let mut bl = B::new("blk", &[], F64);
    let entry = bl.block("entry");
    let a = bl.block("a");
    let z = bl.f64(0.0);
    bl.blk_push(entry, 5);
    bl.term(entry, Term::BlkPop(vec![a]));
    bl.ret(a, z);
    let t = trap(&bl.module(), &[]);
    assert_eq!(t.kind, TrapKind::BadBlockId(5));
    assert!(t.instr.starts_with("blk.pop"), "{t}");
}

/// The comms stack moves raw 64 bits, last in first out, between registers
/// of any type; `comms_len` sees what the forward call left.
#[test]
fn comms_stack_moves_raw_bits() {
    let mut b = B::new("push", &[("x", F64), ("n", I64), ("c", Bool)], F64);
    let e = b.block("entry");
    let (x, n, c) = (b.p(0), b.p(1), b.p(2));
    b.eff(e, Op::CommsPush, &[x]);
    b.eff(e, Op::CommsPush, &[n]);
    b.eff(e, Op::CommsPush, &[c]);
    b.ret(e, x);

    let mut q = B::new("pop", &[], F64);
    let e = q.block("entry");
    let c = q.val("c", Bool);
    let n = q.val("n", I64);
    let bits = q.val("bits", I64);
    q.set(e, Op::CommsPop, c, &[]);
    q.set(e, Op::CommsPop, n, &[]);
    // The f64 comes back as its bits, in an i64 register.
    q.set(e, Op::CommsPop, bits, &[]);
    let nf = q.op(e, Op::ItoF, Some(F64), &[n]);
    let one = q.f64(1.0);
    let zero = q.f64(0.0);
    let cf = q.op(e, Op::Select, Some(F64), &[c, one, zero]);
    let s = q.op(e, Op::AddF, Some(F64), &[nf, cf]);
    let big = q.i64(1 << 40);
    let hi = q.op(e, Op::DivI, Some(I64), &[bits, big]);
    let hf = q.op(e, Op::ItoF, Some(F64), &[hi]);
    let k = q.f64(1e-6);
    let scaled = q.op(e, Op::MulF, Some(F64), &[hf, k]);
    let r = q.op(e, Op::AddF, Some(F64), &[s, scaled]);
    q.ret(e, r);
    let p = load(&module(vec![b, q]));

    let mut vm = Vm::default();
    vm.begin(false);
    let x = 3.5f64;
    vm.call_raw(&p, FuncId(0), &[x.to_bits(), (-7i64) as u64, 1])
        .expect("pushes");
    assert_eq!(vm.comms_len(), 3);
    assert_eq!(vm.peak_stack_bytes(), 24);
    vm.call_raw(&p, FuncId(1), &[]).expect("pops");
    assert_eq!(vm.comms_len(), 0);
    let want = -7.0 + 1.0 + ((x.to_bits() as i64) / (1 << 40)) as f64 * 1e-6;
    assert_eq!(f64::from_bits(vm.results()[0]), want);
    // begin() empties the stacks; popping then underflows.
    vm.call_raw(&p, FuncId(0), &[0, 0, 0]).expect("pushes");
    vm.begin(false);
    assert_eq!(vm.comms_len(), 0);
    let t = vm.call_raw(&p, FuncId(1), &[]).expect_err("underflow");
    assert_eq!(t.kind, TrapKind::StackUnderflow);
}

/// `n` iterations of one comms push (8 bytes) and one block push (4).
fn pusher() -> vm::ir::Module {
    let mut b = B::new("pusher", &[("n", I64)], F64);
    let entry = b.block("entry");
    let head = b.block("head");
    let body = b.block("body");
    let done = b.block("done");
    b.jmp(entry, head);
    let i = b.val("i", I64);
    let i2 = b.val("i2", I64);
    let (z, one) = (b.i64(0), b.i64(1));
    b.phi(head, i, &[(entry, z), (body, i2)]);
    let n = b.p(0);
    let c = b.op(head, Op::LtI, Some(Bool), &[i, n]);
    b.br(head, c, body, done);
    b.eff(body, Op::CommsPush, &[i]);
    b.blk_push(body, 0);
    b.set(body, Op::AddI, i2, &[i, one]);
    b.jmp(body, head);
    let f = b.f64(0.0);
    b.ret(done, f);
    b.module()
}

#[test]
fn ad_stack_limit_traps_and_names_its_flag() {
    let p = load(&pusher());
    let mut vm = Vm::default();
    vm.limits_mut().max_stack_bytes = 1200;
    vm.begin(false);
    // 100 iterations of 12 bytes fit exactly.
    vm.call_raw(&p, FuncId(0), &[100]).expect("fits");
    assert_eq!(vm.peak_stack_bytes(), 1200);
    vm.begin(false);
    let t = vm.call_raw(&p, FuncId(0), &[101]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::StackLimit { limit: 1200 });
    assert!(t.to_string().contains("--max-stack-bytes"), "{t}");
    assert!(vm.peak_stack_bytes() <= 1200);
    // Lowering the limit after the stacks grew still holds.
    vm.limits_mut().max_stack_bytes = 120;
    vm.begin(false);
    vm.call_raw(&p, FuncId(0), &[10]).expect("fits");
    vm.begin(false);
    let t = vm.call_raw(&p, FuncId(0), &[11]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::StackLimit { limit: 120 });
    // Raising it again works on the same VM.
    vm.limits_mut().max_stack_bytes = 1 << 20;
    vm.begin(false);
    vm.call_raw(&p, FuncId(0), &[10_000]).expect("fits");
    assert_eq!(vm.comms_len(), 10_000);
    assert_eq!(vm.blk_len(), 10_000);
    assert_eq!(vm.peak_stack_bytes(), 120_000);
}

/// The AD stacks' peak is sampled when a call from the host ends, by a
/// return or by a trap inside it (fuel here), and not by a call the host
/// checks refuse before anything runs.
#[test]
fn the_stack_peak_is_sampled_when_a_call_ends() {
    let p = load(&pusher());
    let mut vm = Vm::default();
    vm.begin(false);
    vm.call_raw(&p, FuncId(0), &[10]).expect("runs");
    assert_eq!(vm.peak_stack_bytes(), 120);
    // Pushes on top of the 120 bytes left, cut short by fuel: 1 + 3
    // instructions, then 5 per iteration, so fuel 50 stops the run at its
    // first taken jump past it, after 9 iterations and a push.
    vm.limits_mut().fuel = Some(50);
    let t = vm.call_raw(&p, FuncId(0), &[100]).expect_err("out of fuel");
    assert_eq!(t.kind, TrapKind::OutOfFuel { limit: 50 });
    let peak = vm.peak_stack_bytes();
    assert_eq!(peak, vm.comms_len() * 8 + vm.blk_len() * 4);
    assert!(peak > 120, "{peak}");
    // A call the host checks refuse runs nothing: the peak stays.
    vm.limits_mut().fuel = None;
    let t = vm
        .call_raw(&p, FuncId(0), &[1, 2])
        .expect_err("two arguments");
    assert!(matches!(t.kind, TrapKind::ArgMismatch(_)), "{t}");
    assert_eq!(vm.peak_stack_bytes(), peak);
}

/// `@push3(n)`: `n` iterations of a one-block loop body pushing `i`,
/// `7 i` and `i + 1000` (lowered to `comms.reserve 3` and three
/// `comms.push.r`); `@popall(m)`: pops `m` i64 values, folding them into
/// `acc = 31 acc + v` (wrapping), which depends on their order.
fn reserved_pushes() -> vm::ir::Module {
    let mut b = B::new("push3", &[("n", I64)], F64);
    let entry = b.block("entry");
    let head = b.block("head");
    let body = b.block("body");
    let done = b.block("done");
    let i = b.val("i", I64);
    let (zero, one, seven, thousand) = (b.i64(0), b.i64(1), b.i64(7), b.i64(1000));
    b.set(entry, Op::Mov, i, &[zero]);
    b.jmp(entry, head);
    let n = b.p(0);
    let c = b.op(head, Op::LtI, Some(Bool), &[i, n]);
    b.br(head, c, body, done);
    b.eff(body, Op::CommsPush, &[i]);
    let i7 = b.op(body, Op::MulI, Some(I64), &[i, seven]);
    b.eff(body, Op::CommsPush, &[i7]);
    let ik = b.op(body, Op::AddI, Some(I64), &[i, thousand]);
    b.eff(body, Op::CommsPush, &[ik]);
    b.set(body, Op::AddI, i, &[i, one]);
    b.jmp(body, head);
    let z = b.f64(0.0);
    b.ret(done, z);

    let mut q = B::new("popall", &[("m", I64)], I64);
    let entry = q.block("entry");
    let head = q.block("head");
    let body = q.block("body");
    let done = q.block("done");
    let (i, acc, v) = (q.val("i", I64), q.val("acc", I64), q.val("v", I64));
    let (zero, one, k31) = (q.i64(0), q.i64(1), q.i64(31));
    q.set(entry, Op::Mov, i, &[zero]);
    q.set(entry, Op::Mov, acc, &[zero]);
    q.jmp(entry, head);
    let m = q.p(0);
    let c = q.op(head, Op::LtI, Some(Bool), &[i, m]);
    q.br(head, c, body, done);
    q.set(body, Op::CommsPop, v, &[]);
    q.set(body, Op::MulI, acc, &[acc, k31]);
    q.set(body, Op::AddI, acc, &[acc, v]);
    q.set(body, Op::AddI, i, &[i, one]);
    q.jmp(body, head);
    q.ret(done, acc);
    module(vec![b, q])
}

/// What `@popall(3 n)` returns after `@push3(n)`.
fn popall_after_push3(n: i64) -> i64 {
    let mut stack = Vec::new();
    for i in 0..n {
        stack.extend([i, 7 * i, i + 1000]);
    }
    stack
        .iter()
        .rev()
        .fold(0i64, |acc, v| acc.wrapping_mul(31).wrapping_add(*v))
}

/// Reserved pushes (`comms.reserve`, itself the first push, then
/// `comms.push.r`) push the same values
/// in the same order as checked ones, across the stack's growth (3 pushes
/// per reservation against capacities of 256 and more: some reservations
/// find room for one or two, not three).
#[test]
fn reserved_pushes_keep_values_and_order_across_growth() {
    let p = load(&reserved_pushes());
    let ops: Vec<Op> = p.func(FuncId(0)).code.iter().map(|i| i.op).collect();
    assert_eq!(ops.iter().filter(|o| **o == Op::CommsReserve).count(), 1);
    assert_eq!(ops.iter().filter(|o| **o == Op::CommsPushR).count(), 2);
    assert!(!ops.contains(&Op::CommsPush), "{ops:?}");
    let mut vm = Vm::default();
    for n in [0, 1, 85, 86, 1000] {
        vm.begin(true);
        vm.call_raw(&p, FuncId(0), &[n as u64]).expect("pushes");
        assert_eq!(vm.comms_len(), 3 * n as usize);
        vm.call_raw(&p, FuncId(1), &[3 * n as u64]).expect("pops");
        assert_eq!(vm.results(), &[popall_after_push3(n) as u64], "n = {n}");
        assert_eq!(vm.comms_len(), 0);
    }
}

/// A reservation the stack limit cannot hold traps as the first push it
/// stands for would: `StackLimit`, at the `comms.reserve`.
#[test]
fn a_reservation_past_the_stack_limit_traps_like_a_push() {
    let p = load(&reserved_pushes());
    let mut vm = Vm::default();
    // 100 iterations of 24 bytes fit exactly.
    vm.limits_mut().max_stack_bytes = 2400;
    vm.begin(true);
    vm.call_raw(&p, FuncId(0), &[100]).expect("fits");
    assert_eq!(vm.peak_stack_bytes(), 2400);
    vm.begin(true);
    let t = vm.call_raw(&p, FuncId(0), &[101]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::StackLimit { limit: 2400 });
    assert!(t.instr.starts_with("comms.reserve %i, 3"), "{t}");
    assert!(t.to_string().contains("--max-stack-bytes"), "{t}");
    assert_eq!(vm.comms_len(), 300);
    // A limit that is not a whole number of iterations: the reservation
    // traps once the three pushes would not fit, as the pushes would
    // within the same iteration.
    vm.limits_mut().max_stack_bytes = 2400 + 16;
    vm.begin(true);
    let t = vm.call_raw(&p, FuncId(0), &[101]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::StackLimit { limit: 2416 });
    assert_eq!(vm.comms_len(), 300);
    // Lowered after the stack grew, the limit still holds.
    vm.limits_mut().max_stack_bytes = 240;
    vm.begin(true);
    vm.call_raw(&p, FuncId(0), &[10]).expect("fits");
    vm.begin(true);
    let t = vm.call_raw(&p, FuncId(0), &[11]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::StackLimit { limit: 240 });
}

/// `fn @sh(%v: f64[]) -> f64`: `shadow(v)[1] += 2; shadow(v)[1] += 0.5;
/// return take shadow(v)[0]`.
fn shadow_program() -> vm::ir::Module {
    let mut b = B::new("sh", &[("v", Arr)], F64);
    let e = b.block("entry");
    let v = b.p(0);
    let (i0, i1, c2, c05) = (b.i64(0), b.i64(1), b.f64(2.0), b.f64(0.5));
    b.eff(e, Op::ShadowAcc, &[v, i1, c2]);
    b.eff(e, Op::ShadowAcc, &[v, i1, c05]);
    let t = b.op(e, Op::ShadowTake, Some(F64), &[v, i0]);
    b.ret(e, t);
    b.module()
}

#[test]
fn shadows_exist_in_ad_mode_only() {
    let p = load(&shadow_program());
    let mut vm = Vm::default();
    vm.begin(true);
    let h = vm.alloc_array(&[1.0, 2.0]).expect("alloc");
    assert_eq!(vm.shadow(h), Some(&[0.0, 0.0][..]));
    vm.call_raw(&p, FuncId(0), &[h]).expect("runs");
    assert_eq!(f64::from_bits(vm.results()[0]), 0.0);
    assert_eq!(vm.shadow(h), Some(&[0.0, 2.5][..]));
    assert_eq!(vm.array(h), Some(&[1.0, 2.0][..]));
    // shadow.take returns the cotangent and clears it.
    let mut b = B::new("take", &[("v", Arr)], F64);
    let e = b.block("entry");
    let v = b.p(0);
    let i1 = b.i64(1);
    let t = b.op(e, Op::ShadowTake, Some(F64), &[v, i1]);
    b.ret(e, t);
    let take = load(&b.module());
    vm.call_raw(&take, FuncId(0), &[h]).expect("runs");
    assert_eq!(f64::from_bits(vm.results()[0]), 2.5);
    assert_eq!(vm.shadow(h), Some(&[0.0, 0.0][..]));
    // Arrays made by anew get shadows too.
    let mut b = B::new("mk", &[], Arr);
    let e = b.block("entry");
    let n = b.i64(3);
    let a = b.op(e, Op::ANew, Some(Arr), &[n]);
    b.ret(e, a);
    let mk = load(&b.module());
    vm.call_raw(&mk, FuncId(0), &[]).expect("runs");
    let a = vm.results()[0];
    assert_eq!(vm.shadow(a), Some(&[0.0; 3][..]));
    // Out of bounds on a shadow traps.
    let mut b = B::new("oob", &[("v", Arr)], F64);
    let e = b.block("entry");
    let v = b.p(0);
    let (i9, c) = (b.i64(9), b.f64(1.0));
    b.eff(e, Op::ShadowAcc, &[v, i9, c]);
    b.ret(e, c);
    let oob = load(&b.module());
    let t = vm.call_raw(&oob, FuncId(0), &[h]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::OutOfBounds { index: 9, len: 2 });
    // Outside AD mode there is no shadow.
    vm.begin(false);
    let h = vm.alloc_array(&[1.0, 2.0]).expect("alloc");
    assert_eq!(vm.shadow(h), None);
    let t = vm.call_raw(&p, FuncId(0), &[h]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::NoShadow);
    let t = vm.call_raw(&take, FuncId(0), &[h]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::NoShadow);
    // A bad handle in AD mode.
    vm.begin(true);
    let t = vm.call_raw(&p, FuncId(0), &[42]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::BadHandle);
}

#[test]
fn begin_forgets_arrays() {
    let mut vm = Vm::default();
    vm.begin(false);
    let h = vm.alloc_array(&[1.0]).expect("alloc");
    assert_eq!(vm.array(h), Some(&[1.0][..]));
    assert_eq!(vm.array(0), None);
    assert_eq!(vm.array(h + 1), None);
    vm.begin(false);
    assert_eq!(vm.array(h), None);
    vm.limits_mut().max_array_len = 1;
    let t = vm.alloc_array(&[1.0, 2.0]).expect_err("too large");
    assert_eq!(t.kind, TrapKind::ArgArrayTooLarge { len: 2, limit: 1 });
}

#[test]
fn recursion_and_deep_recursion() {
    let p = load(&deep());
    let mut vm = Vm::default();
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::I64(5000)]),
        Ok(Value::F64(5000.0))
    );
    // One million frames: a trap, never a Rust stack overflow.
    let t = vm
        .run(&p, FuncId(0), &[Value::I64(1_000_000)])
        .expect_err("traps");
    let limit = vm.limits().max_call_depth;
    assert_eq!(t.kind, TrapKind::CallDepth { limit });
    assert!(
        t.to_string().contains(&format!(
            "call depth exceeded (limit {limit}; raise it with --max-depth)"
        )),
        "{t}"
    );
    // Raised, the same call completes (frames live on the heap).
    vm.limits_mut().max_call_depth = 1_000_001;
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::I64(1_000_000)]),
        Ok(Value::F64(1_000_000.0))
    );
    // The limit counts frames, the top-level one included.
    vm.limits_mut().max_call_depth = 11;
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::I64(10)]),
        Ok(Value::F64(10.0))
    );
    let t = vm.run(&p, FuncId(0), &[Value::I64(11)]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::CallDepth { limit: 11 });
}

/// powloop executes 2 instructions per iteration plus 4 (`mul.f` and the
/// fused step-and-branch, which counts as one): fuel is counted exactly,
/// and exactly that much is enough.
#[test]
fn fuel_counts_executed_instructions() {
    let p = load(&powloop());
    let mut vm = Vm::default();
    let args = [Value::F64(1.0), Value::I64(1000)];
    vm.run(&p, FuncId(0), &args).expect("runs");
    let n = vm.executed();
    assert_eq!(n, 2004);
    vm.limits_mut().fuel = Some(n);
    vm.run(&p, FuncId(0), &args).expect("enough fuel");
    vm.limits_mut().fuel = Some(n - 1);
    let t = vm.run(&p, FuncId(0), &args).expect_err("traps");
    assert_eq!(t.kind, TrapKind::OutOfFuel { limit: n - 1 });
    assert!(t.to_string().contains("--fuel"), "{t}");
    // A long loop stops soon after the limit, not at its end.
    vm.limits_mut().fuel = Some(500);
    let t = vm
        .run(&p, FuncId(0), &[Value::F64(1.0), Value::I64(i64::MAX)])
        .expect_err("traps");
    assert_eq!(t.kind, TrapKind::OutOfFuel { limit: 500 });
    assert!(vm.executed() <= 503, "{}", vm.executed());
    // Straight-line code past the limit: caught at the return.
    vm.limits_mut().fuel = Some(2);
    let q = load(&array_program());
    let t = vm
        .run(&q, FuncId(0), &[Value::I64(1), Value::I64(0)])
        .expect_err("traps");
    assert_eq!(t.kind, TrapKind::OutOfFuel { limit: 2 });
    assert!(t.instr.starts_with("ret"), "{t}");
    // Recursion burns fuel through calls.
    let d = load(&deep());
    vm.limits_mut().fuel = Some(1000);
    let t = vm
        .run(&d, FuncId(0), &[Value::I64(100_000)])
        .expect_err("traps");
    assert_eq!(t.kind, TrapKind::OutOfFuel { limit: 1000 });
}

#[test]
fn interrupt_from_another_thread() {
    let p = load(&powloop());
    let mut vm = Vm::default();
    let flag = vm.interrupt_handle();
    let setter = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let t = vm
        .run(&p, FuncId(0), &[Value::F64(1.0), Value::I64(i64::MAX)])
        .expect_err("interrupted");
    assert_eq!(t.kind, TrapKind::Interrupted);
    assert_eq!(t.block, "body");
    setter.join().expect("joins");
    // The VM does not clear the flag; the host does.
    vm.interrupt_handle()
        .store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::F64(2.0), Value::I64(3)]),
        Ok(Value::F64(8.0))
    );
}

/// A caller verified against one callee signature, whose callee is then
/// replaced by a verified function with another: the call is refused.
#[test]
fn stale_call_sites_are_refused() {
    let g = B::identity("g");
    let mut f = B::new("f", &[("x", F64)], F64);
    let e = f.block("entry");
    let x = f.p(0);
    let r = f.call(e, 1, F64, &[x]);
    f.ret(e, r);
    let m = module(vec![f, g]);
    let mut p = load(&m);
    let mut vm = Vm::default();
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::F64(3.0)]),
        Ok(Value::F64(3.0))
    );

    // Replaced by a function of two parameters returning several values.
    let mut g2 = B::new_many("g", &[("x", F64), ("y", F64)], 3);
    let e = g2.block("entry");
    let (a, b) = (g2.p(0), g2.p(1));
    g2.term(e, Term::RetN(vec![a, b, a]));
    let bc = vm::lower::lower_function(&g2.f).expect("lowers");
    p.set(FuncId(1), bc).expect("exists");
    // Replacing the callee unverifies it and its caller.
    assert!(!p.is_verified(FuncId(1)));
    assert!(!p.is_verified(FuncId(0)));
    let t = vm
        .run(&p, FuncId(0), &[Value::F64(3.0)])
        .expect_err("refused");
    assert_eq!(t.kind, TrapKind::NotVerified);
    vm::verify::verify_function(&mut p, FuncId(1)).expect("g2 verifies");
    assert!(!p.is_verified(FuncId(0)));
    let t = vm
        .run(&p, FuncId(0), &[Value::F64(3.0)])
        .expect_err("refused");
    assert_eq!(t.kind, TrapKind::NotVerified);
    // Re-verifying the caller finds the mismatch.
    assert!(vm::verify::verify_function(&mut p, FuncId(0)).is_err());
    // Truncating away a callee unverifies its callers too (its id could be
    // reused by another function).
    let mut p = load(&m);
    assert!(p.is_verified(FuncId(0)));
    p.truncate(1);
    assert!(!p.is_verified(FuncId(0)));
}

/// Registers that are neither parameters nor constants start at zero in
/// every frame, even where an earlier frame at the same place wrote them.
#[test]
fn frames_start_zeroed() {
    // dirty() writes 123.0 into its register 1; clean() returns its
    // register 1, never written; f calls both at the same frame base.
    let mut dirty = B::new("dirty", &[], F64);
    let e = dirty.block("entry");
    let c = dirty.f64(123.0);
    let w = dirty.val("w", F64);
    dirty.set(e, Op::Mov, w, &[c]);
    dirty.ret(e, w);
    let mut clean = B::new("clean", &[], F64);
    let e = clean.block("entry");
    let _unused = clean.f64(5.0);
    let z = clean.val("z", F64);
    clean.ret(e, z);
    let mut f = B::new("f", &[], F64);
    let e = f.block("entry");
    let a = f.call(e, 1, F64, &[]);
    let b = f.call(e, 2, F64, &[]);
    let r = f.op(e, Op::AddF, Some(F64), &[a, b]);
    f.ret(e, r);
    let p = load(&module(vec![f, dirty, clean]));
    let mut vm = Vm::default();
    for _ in 0..2 {
        assert_eq!(vm.run(&p, FuncId(0), &[]), Ok(Value::F64(123.0)));
    }
}

/// Frames of every shape (0 to 6 parameters, 0 to 9 constants, 0 to 20
/// registers never written) start with their arguments, their constants
/// and zeros, whatever an earlier call left in the register stack.
#[test]
fn frames_of_every_size_start_clean() {
    // dirty(): 60 registers of 999.
    let mut dirty = B::new("dirty", &[], I64);
    let e = dirty.block("entry");
    let junk = dirty.i64(999);
    let mut last = junk;
    for k in 0..60 {
        last = dirty.val(&format!("j{k}"), I64);
        dirty.set(e, Op::Mov, last, &[junk]);
    }
    dirty.ret(e, last);
    let dirty = load(&dirty.module());
    let mut vm = Vm::default();
    for np in 0..=6usize {
        for nc in 0..=9usize {
            for nz in [0usize, 1, 3, 4, 5, 8, 13, 20] {
                let names: Vec<String> = (0..np).map(|i| format!("p{i}")).collect();
                let params: Vec<(&str, Type)> = names.iter().map(|n| (n.as_str(), I64)).collect();
                let mut b = B::new("f", &params, I64);
                let e = b.block("entry");
                let mut terms: Vec<_> = (0..np).map(|i| b.p(i)).collect();
                terms.extend((0..nc).map(|i| b.i64(1000 * (i as i64 + 1))));
                terms.extend((0..nz).map(|i| b.val(&format!("z{i}"), I64)));
                let mut s = b.i64(0);
                for t in terms {
                    s = b.op(e, Op::AddI, Some(I64), &[s, t]);
                }
                b.ret(e, s);
                let p = load(&b.module());
                let args: Vec<Value> = (0..np).map(|i| Value::I64(i as i64 + 1)).collect();
                let want =
                    (1..=np as i64).sum::<i64>() + (1..=nc as i64).map(|i| 1000 * i).sum::<i64>();
                assert_eq!(vm.run(&dirty, FuncId(0), &[]), Ok(Value::I64(999)));
                assert_eq!(
                    vm.run(&p, FuncId(0), &args),
                    Ok(Value::I64(want)),
                    "{np} params, {nc} consts, {nz} zeros"
                );
            }
        }
    }
}

/// `shadow.acc.mul h, i, a, b` is `shadow(h)[i] += a * b` with the product
/// rounded first, as `mul.f` then `shadow.acc` (bit for bit, also where a
/// fused multiply-add would round differently), and traps as `shadow.acc`.
#[test]
fn shadow_acc_mul_is_a_product_then_a_shadow_acc() {
    // a * b + s rounds differently with one rounding than with two here.
    let (a, b0, s) = (0.1f64, 10.0f64, -1.0f64);
    assert_ne!(a.mul_add(b0, s), a * b0 + s);
    let module = |op: Op| {
        let mut b = B::new("sm", &[("v", Arr), ("a", F64), ("b", F64), ("i", I64)], F64);
        let e = b.block("entry");
        let (v, x, y, i) = (b.p(0), b.p(1), b.p(2), b.p(3));
        if op == Op::ShadowAccMul {
            b.eff(e, Op::ShadowAccMul, &[v, i, x, y]);
        } else {
            let p = b.op(e, Op::MulF, Some(F64), &[x, y]);
            b.eff(e, Op::ShadowAcc, &[v, i, p]);
        }
        b.ret(e, x);
        load(&b.module())
    };
    let (fused, pair) = (module(Op::ShadowAccMul), module(Op::MulF));
    assert!(fused
        .func(FuncId(0))
        .code
        .iter()
        .any(|i| i.op == Op::ShadowAccMul));
    let mut vm = Vm::default();
    let mut run = |p: &vm::bytecode::Program, i: i64| {
        vm.begin(true);
        let h = vm.alloc_array(&[0.0, 0.0]).expect("alloc");
        // Start the shadow at `s`.
        let mut seed = B::new("seed", &[("v", Arr)], F64);
        let e = seed.block("entry");
        let (v, one, c) = (seed.p(0), seed.i64(1), seed.f64(s));
        seed.eff(e, Op::ShadowAcc, &[v, one, c]);
        seed.ret(e, c);
        vm.call_raw(&load(&seed.module()), FuncId(0), &[h])
            .expect("seeds");
        let args = [h, a.to_bits(), b0.to_bits(), i as u64];
        match vm.call_raw(p, FuncId(0), &args) {
            Ok(()) => Ok(vm.shadow(h).map(|s| s[1])),
            Err(t) => Err(t.kind),
        }
    };
    let got = run(&fused, 1);
    assert_eq!(got, run(&pair, 1));
    assert_eq!(got, Ok(Some(a * b0 + s)));
    assert_eq!(
        run(&fused, 2),
        Err(TrapKind::OutOfBounds { index: 2, len: 2 })
    );
    assert_eq!(
        run(&fused, -1),
        Err(TrapKind::OutOfBounds { index: -1, len: 2 })
    );
    vm.begin(false);
    let h = vm.alloc_array(&[1.0, 2.0]).expect("alloc");
    let t = vm
        .call_raw(&fused, FuncId(0), &[h, a.to_bits(), b0.to_bits(), 0])
        .expect_err("traps");
    assert_eq!(t.kind, TrapKind::NoShadow);
}

/// `@main(a, b)` calls `@g` (line 20), which calls `@h` (line 10), whose
/// integer division (line 3) traps for `b = 0`.
fn three_deep() -> vm::ir::Module {
    let mut h = B::new("h", &[("a", I64), ("b", I64)], I64);
    let e = h.block("entry");
    let q = h.val("q", I64);
    let (a, b) = (h.p(0), h.p(1));
    h.set(e, Op::DivI, q, &[a, b]);
    h.line(e, 3);
    h.ret(e, q);
    let mut g = B::new("g", &[("a", I64), ("b", I64)], I64);
    let e = g.block("entry");
    let (a, b) = (g.p(0), g.p(1));
    let r = g.call(e, 2, I64, &[a, b]);
    g.line(e, 10);
    g.ret(e, r);
    let mut main = B::new("main", &[("a", I64), ("b", I64)], I64);
    let e = main.block("entry");
    let (a, b) = (main.p(0), main.p(1));
    let r = main.call(e, 1, I64, &[a, b]);
    main.line(e, 20);
    main.ret(e, r);
    module(vec![main, g, h])
}

#[test]
fn a_trap_lists_its_callers_innermost_first() {
    let mut p = load(&three_deep());
    let mut vm = Vm::default();
    let args = [Value::I64(1), Value::I64(0)];
    let t = vm.run(&p, FuncId(0), &args).expect_err("div by zero");
    assert_eq!(t.func, "h");
    let callers: Vec<(&str, u32)> = t
        .callers()
        .iter()
        .map(|c| (c.func.as_str(), c.loc.line))
        .collect();
    assert_eq!(callers, [("g", 10), ("main", 20)]);
    assert_eq!(t.stack.as_ref().map(|s| s.more), Some(0));
    assert_eq!(
        t.to_string(),
        "trap: integer division by zero in @h, block entry, at `div.i %q, %a, %b` (line 3)\n  \
         called from @g, line 10\n  called from @main, line 20"
    );
    // The same VM: a trap in the entry function has no caller (the frames
    // of the last trap are gone).
    let t = vm.run(&p, FuncId(2), &args).expect_err("div by zero");
    assert!(t.callers().is_empty() && t.stack.is_none(), "{t}");
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::I64(6), Value::I64(3)]),
        Ok(Value::I64(2))
    );
    // Derived code is named by the function it was derived from.
    for (id, of) in [(1, 0), (2, 0)] {
        p.set_origin(
            FuncId(id),
            vm::bytecode::Origin {
                of: FuncId(of),
                code: "test code".into(),
            },
        );
    }
    let t = vm.run(&p, FuncId(0), &args).expect_err("div by zero");
    assert_eq!(
        t.to_string(),
        "trap: integer division by zero in @main (test code), block entry, at `div.i %q, %a, %b` (line 3)\n  \
         called from @main (test code), line 10\n  called from @main, line 20"
    );
    assert_eq!(p.origin(FuncId(1)).map(|o| o.of), Some(FuncId(0)));
    p.truncate(2);
    assert!(p.origin(FuncId(2)).is_none() && p.origin(FuncId(1)).is_some());
}

#[test]
fn a_trap_shows_its_source_line_when_given_the_text() {
    let t = trap(&three_deep(), &[Value::I64(1), Value::I64(0)]);
    let src = "a\nb\n    %q = div\t%a, %b   ; divide\n";
    let mut shown = t.clone();
    shown.show_source_line(src, 1);
    assert_eq!(shown.instr, "%q = div %a, %b");
    // Lines counted from another first line; a text without the line, or
    // a blank line, keep the bytecode.
    let mut from2 = t.clone();
    from2.show_source_line("b\n%q = div %a, %b\n", 2);
    assert_eq!(from2.instr, "%q = div %a, %b");
    for text in ["a\n", "a\nb\n   ; only a comment\n", ""] {
        let mut same = t.clone();
        same.show_source_line(text, 1);
        assert_eq!(same.instr, t.instr, "{text:?}");
    }
    // Control characters are escaped, a long line is cut.
    let mut ctl = t.clone();
    ctl.show_source_line(&format!("\n\n\x1b[2J{}", "x".repeat(1000)), 1);
    assert!(ctl.instr.starts_with("\\u{1b}[2J") && !ctl.instr.contains('\x1b'));
    assert!(ctl.instr.ends_with("x..."));
    assert_eq!(ctl.instr.chars().count(), vm::SOURCE_LINE_CHARS + 3 + 5);
}

#[test]
fn a_deep_recursion_keeps_five_callers_and_counts_the_rest() {
    // @rec(n) = n == 0 ? 1 / 0 : rec(n - 1): traps 30 calls deep.
    let mut b = B::new("rec", &[("n", I64)], I64);
    let (entry, base, step) = (b.block("entry"), b.block("base"), b.block("step"));
    let n = b.p(0);
    let zero = b.i64(0);
    let one = b.i64(1);
    let z = b.val("z", Bool);
    b.set(entry, Op::EqI, z, &[n, zero]);
    b.br(entry, z, base, step);
    let q = b.val("q", I64);
    b.set(base, Op::DivI, q, &[one, zero]);
    b.ret(base, q);
    let m = b.val("m", I64);
    b.set(step, Op::SubI, m, &[n, one]);
    let r = b.call(step, 0, I64, &[m]);
    b.line(step, 9);
    b.ret(step, r);
    let t = trap(&b.module(), &[Value::I64(30)]);
    assert_eq!(t.callers().len(), vm::CALLERS_SHOWN);
    assert!(t
        .callers()
        .iter()
        .all(|c| c.func == "rec" && c.loc.line == 9));
    assert_eq!(
        t.stack.as_ref().map(|s| s.more),
        Some(30 - vm::CALLERS_SHOWN)
    );
    assert!(t.to_string().ends_with("\n  ... and 25 more calls"), "{t}");
}

#[test]
fn a_trap_stays_small() {
    // Within clippy.toml's large-error-threshold.
    assert!(
        std::mem::size_of::<Trap>() <= 160,
        "{}",
        std::mem::size_of::<Trap>()
    );
}
