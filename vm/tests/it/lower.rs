//! Lowering: side tables and debug tables, errors instead of panics on
//! malformed IR, and random parallel copies on edges. The code shape of
//! each concern of the lowering, with runs, is in stage files
//! (`ad/tests/stages/lower_*.adasm`, register code in, bytecode out,
//! `; run:` directives; phis as edge copies, cycles and non-SSA code in
//! `lower_edge_copies.adasm`): what stays here runs code many times,
//! counts what it executes or looks at traps and stacks.

use crate::semantics::same;
use proptest::prelude::*;
use testkit::ir::*;
use vm::bytecode::Program;
use vm::interp::Vm;
use vm::ir::{BlockId, FuncId, Module, Term, ValueId};
use vm::lower::{lower_function, lower_module, LowerError};
use vm::op::Op;
use vm::{Type, Value};

use Type::{Bool, F64, I64};

/// Run a `ret.n` function on raw arguments; its f64 results.
fn run_many(p: &Program, args: &[u64]) -> Vec<f64> {
    let mut vm = Vm::default();
    vm.begin(false);
    if let Err(t) = vm.call_raw(p, FuncId(0), args) {
        panic!("trapped: {t}");
    }
    vm.results().iter().map(|b| f64::from_bits(*b)).collect()
}

/// No `jmp` targets the instruction right after it.
fn no_jump_to_next(p: &Program) {
    for f in p.funcs() {
        for (pc, i) in f.code.iter().enumerate() {
            assert!(
                !(i.op == Op::Jmp && i.x as usize == pc + 1),
                "@{} {pc:04}: jump to the next instruction\n{}",
                f.name,
                vm::disasm::function(f)
            );
        }
    }
}

#[test]
fn registers_side_tables_and_debug_info() {
    let m = powloop();
    let f = lower_function(&m.funcs[0]).expect("lowers");
    // Parameters first, then constants.
    assert_eq!(f.param_types, vec![F64, I64]);
    assert_eq!(&f.reg_types[..2], &[F64, I64]);
    assert_eq!(f.reg_names[0], "x");
    assert_eq!(f.reg_names[1], "n");
    // The last is the negated step of `sub %k, 1`: the fused
    // step-and-branch adds -1.
    let consts: Vec<u64> = vec![1.0f64.to_bits(), 0, 1, (-1i64) as u64];
    assert_eq!(f.consts, consts);
    assert_eq!(&f.reg_types[2..6], &[F64, I64, I64, I64]);
    // Every block named at its start; locs per instruction.
    let names: Vec<&str> = f.blocks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["entry", "head", "body", "done"]);
    assert!(f.blocks.windows(2).all(|w| w[0].start <= w[1].start));
    assert_eq!(f.locs.len(), f.code.len());
    assert_eq!(f.reg_names.len(), f.reg_types.len());
    assert!(f.reg_names.iter().any(|n| n == "r"));
    // The loop is 2 instructions: mul and a fused step-and-branch (the
    // `sub` and the compare-and-branch).
    let body = f.blocks[2].start as usize;
    let done = f.blocks[3].start as usize;
    assert_eq!(done - body, 2, "{}", vm::disasm::function(&f));
    assert_eq!(f.code[done - 1].op, Op::JmpStepGtI);
    assert_eq!(f.code[done].op, Op::Ret);
}

#[test]
fn calls_returns_and_dispatch_tables() {
    // f(x) = g(x) with `ret`; h(x) returns (x, x) with `ret.n`; a `blk.pop`
    // table lists its targets' start pcs.
    let g = B::identity("g");
    let mut h = B::new_many("h", &[("x", F64)], 2);
    let e = h.block("entry");
    let x = h.p(0);
    h.term(e, Term::RetN(vec![x, x]));
    let mut f = B::new("f", &[("x", F64)], F64);
    let e = f.block("entry");
    let a = f.block("a");
    let bb = f.block("b");
    let x = f.p(0);
    let r = f.call(e, 1, F64, &[x]);
    let acc = f.val("acc", F64);
    f.call_acc(e, 2, &[x], &[acc, acc]);
    f.blk_push(e, 1);
    f.term(e, Term::BlkPop(vec![a, bb]));
    f.ret(a, r);
    f.ret(bb, acc);
    let p = load(&module(vec![f, g, h]));
    let fb = p.func(FuncId(0));
    assert_eq!(fb.sites.len(), 2);
    assert_eq!(fb.sites[0].func, FuncId(1));
    assert!(fb.sites[0].rets.is_empty());
    assert_eq!(fb.sites[1].func, FuncId(2));
    assert_eq!(fb.sites[1].rets.len(), 2);
    assert_eq!(
        fb.tables,
        vec![vec![fb.blocks[1].start, fb.blocks[2].start]]
    );
    assert_eq!(p.func(FuncId(2)).lists.len(), 1);
    let mut vm = Vm::default();
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::F64(1.5)]),
        Ok(Value::F64(3.0))
    );
}

#[test]
fn blk_pop_into_a_block_with_phis_is_an_error() {
    let mut b = B::new("f", &[], F64);
    let e = b.block("entry");
    let t = b.block("t");
    let v = b.val("v", F64);
    let c = b.f64(1.0);
    b.phi(t, v, &[(e, c)]);
    b.term(e, Term::BlkPop(vec![t]));
    b.ret(t, v);
    let err = lower_module(&b.module()).expect_err("refused");
    assert!(
        matches!(&err, LowerError::PhiOnDispatchEdge { block, .. } if block == "t"),
        "{err}"
    );
}

#[test]
fn a_phi_without_a_value_for_an_edge_is_an_error() {
    let mut b = B::new("f", &[], F64);
    let e = b.block("entry");
    let t = b.block("t");
    let v = b.val("v", F64);
    b.phi(t, v, &[]);
    b.jmp(e, t);
    b.ret(t, v);
    let err = lower_module(&b.module()).expect_err("refused");
    assert!(matches!(err, LowerError::MissingPhiEdge { .. }), "{err}");
}

#[test]
fn malformed_ir_is_an_error_not_a_panic() {
    let base = || {
        let mut b = B::new("f", &[("x", F64)], F64);
        let e = b.block("entry");
        let x = b.p(0);
        b.ret(e, x);
        b
    };
    let mut cases: Vec<(&str, Module)> = Vec::new();
    let mut b = base();
    b.term(BlockId(0), Term::Ret(ValueId(99)));
    cases.push(("value out of range", b.module()));
    let mut b = base();
    b.term(BlockId(0), Term::Jmp(BlockId(9)));
    cases.push(("block out of range", b.module()));
    let mut b = base();
    b.f.blocks.clear();
    cases.push(("no blocks", b.module()));
    let mut b = base();
    let x = b.p(0);
    b.eff(BlockId(0), Op::Ret, &[x]);
    cases.push(("terminator among instructions", b.module()));
    let mut b = base();
    b.eff(BlockId(0), Op::AddF, &[]);
    cases.push(("missing destination", b.module()));
    let mut b = base();
    let y = b.val("y", F64);
    b.set(BlockId(0), Op::AddF, y, &[]);
    cases.push(("missing operands", b.module()));
    let mut b = base();
    let y = b.val("y", F64);
    b.set(BlockId(0), Op::Call, y, &[]);
    cases.push(("call without callee", b.module()));
    let mut b = base();
    let y = b.val("y", F64);
    b.phi(BlockId(0), y, &[(BlockId(7), ValueId(0))]);
    cases.push(("phi from a block out of range", b.module()));
    // Made by the lowering itself, never in its input.
    for op in [Op::CommsReserve, Op::CommsPushR] {
        let mut b = base();
        let x = b.p(0);
        b.eff(BlockId(0), op, &[x]);
        cases.push((op.mnemonic(), b.module()));
    }
    for (what, m) in cases {
        match lower_module(&m) {
            Ok(_) => panic!("{what}: lowered"),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn too_many_registers_is_an_error() {
    let mut b = B::new("big", &[], F64);
    let e = b.block("entry");
    let c = b.f64(0.0);
    for _ in 0..70_000 {
        b.op(e, Op::Mov, Some(F64), &[c]);
    }
    b.ret(e, c);
    let err = lower_module(&b.module()).expect_err("too big");
    assert!(matches!(err, LowerError::TooManyRegisters { .. }), "{err}");
}

// ---- parallel copies, at random ------------------------------------------

/// Where a phi's value on an edge comes from.
#[derive(Clone, Copy, Debug)]
enum Src {
    /// Phi `j` of the loop (its value at the start of the iteration).
    Phi(usize),
    /// `phi j + (j + 1)`, computed in the loop body.
    Step(usize),
    /// A constant.
    Const(u8),
}

fn src() -> impl Strategy<Value = Src> {
    prop_oneof![
        (0usize..6).prop_map(Src::Phi),
        (0usize..6).prop_map(Src::Step),
        (0u8..3).prop_map(Src::Const),
    ]
}

/// A loop over `k` f64 phis whose back-edge values are `back`, exiting
/// through phis whose values are `out`. `do_while`: the body branches back
/// to itself (copies on both edges of one `br`); otherwise a `while` loop
/// with the test in the header (the back edge is a `jmp`, so values can be
/// coalesced into the phis). `fused`: whether the comparison is the last
/// instruction before the branch (`do_while` only).
fn copy_loop(back: &[Src], out: &[Src], do_while: bool, fused: bool) -> Module {
    let k = back.len();
    let mut b = B::new_many("loop", &[("n", I64)], out.len());
    let n = b.p(0);
    let entry = b.block("entry");
    let head = b.block("head");
    let body = if do_while { head } else { b.block("body") };
    let done = b.block("done");
    b.jmp(entry, head);
    let phis: Vec<ValueId> = (0..k).map(|j| b.val(&format!("p{j}"), F64)).collect();
    let i = b.val("i", I64);
    let i2 = b.val("i2", I64);
    let (i0, i1) = (b.i64(0), b.i64(1));
    let consts: Vec<ValueId> = (0..3).map(|c| b.f64(100.0 * (c + 1) as f64)).collect();
    let init: Vec<ValueId> = (0..k).map(|j| b.f64(j as f64 + 0.5)).collect();
    let incs: Vec<ValueId> = (0..k).map(|j| b.f64(j as f64 + 1.0)).collect();
    // The body: i2 = i + 1; steps; the comparison before or after the steps.
    let cmp_block = if do_while { body } else { head };
    let cmp_args = if do_while { [i2, n] } else { [i, n] };
    let mut cond = None;
    if !do_while {
        cond = Some(b.op(cmp_block, Op::LtI, Some(Bool), &cmp_args));
    }
    b.set(body, Op::AddI, i2, &[i, i1]);
    if do_while && !fused {
        cond = Some(b.op(cmp_block, Op::LtI, Some(Bool), &cmp_args));
    }
    let steps: Vec<ValueId> = (0..k)
        .map(|j| b.op(body, Op::AddF, Some(F64), &[phis[j], incs[j]]))
        .collect();
    if fused && do_while {
        cond = Some(b.op(cmp_block, Op::LtI, Some(Bool), &cmp_args));
    }
    let cond = cond.expect("made");
    let val = |s: Src| match s {
        Src::Phi(j) => phis[j % k],
        Src::Step(j) => steps[j % k],
        Src::Const(c) => consts[c as usize],
    };
    for j in 0..k {
        b.phi(head, phis[j], &[(entry, init[j]), (body, val(back[j]))]);
    }
    b.phi(head, i, &[(entry, i0), (body, i2)]);
    let outs: Vec<ValueId> = (0..out.len())
        .map(|j| b.val(&format!("q{j}"), F64))
        .collect();
    if do_while {
        b.br(body, cond, head, done);
        for (j, s) in out.iter().enumerate() {
            b.phi(done, outs[j], &[(body, val(*s))]);
        }
    } else {
        b.br(head, cond, body, done);
        b.jmp(body, head);
        // The exit edge leaves the header: no step values there.
        for (j, s) in out.iter().enumerate() {
            let v = match s {
                Src::Step(j) | Src::Phi(j) => phis[j % k],
                Src::Const(c) => consts[*c as usize],
            };
            b.phi(done, outs[j], &[(head, v)]);
        }
    }
    b.term(done, Term::RetN(outs));
    b.module()
}

/// What `copy_loop` computes, by direct simulation.
fn copy_loop_reference(back: &[Src], out: &[Src], do_while: bool, n: i64) -> Vec<f64> {
    let k = back.len();
    let mut p: Vec<f64> = (0..k).map(|j| j as f64 + 0.5).collect();
    let konst = |c: u8| 100.0 * (c as f64 + 1.0);
    let mut i = 0i64;
    loop {
        if !do_while && i >= n {
            let pick = |s: &Src| match *s {
                Src::Step(j) | Src::Phi(j) => p[j % k],
                Src::Const(c) => konst(c),
            };
            return out.iter().map(pick).collect();
        }
        let i2 = i + 1;
        let steps: Vec<f64> = (0..k).map(|j| p[j] + (j as f64 + 1.0)).collect();
        let val = |s: &Src| match *s {
            Src::Phi(j) => p[j % k],
            Src::Step(j) => steps[j % k],
            Src::Const(c) => konst(c),
        };
        if do_while && i2 >= n {
            return out.iter().map(val).collect();
        }
        p = back.iter().map(val).collect();
        i = i2;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Any parallel copy (permutations, cycles, fan-out, constants) on a
    /// back edge and an exit edge is sequentialised correctly.
    #[test]
    fn random_parallel_copies(
        back in prop::collection::vec(src(), 1..6),
        out in prop::collection::vec(src(), 1..5),
        do_while in any::<bool>(),
        fused in any::<bool>(),
        n in 0i64..6,
    ) {
        let m = copy_loop(&back, &out, do_while, fused);
        let p = load(&m);
        no_jump_to_next(&p);
        let got = run_many(&p, &[n as u64]);
        let want = copy_loop_reference(&back, &out, do_while, n);
        prop_assert_eq!(got, want, "{}", vm::disasm::program(&p));
    }
}

fn is_step(op: Op) -> bool {
    matches!(op.branch(), Some(b) if b.fused == vm::op::Fused::StepI)
}

/// The f64 result of function 0 of `p` on `args`; anything else panics,
/// naming `what`.
fn run_f64(vm: &mut Vm, p: &Program, args: &[Value], what: &str) -> f64 {
    match vm.run(p, FuncId(0), args) {
        Ok(Value::F64(v)) => v,
        other => panic!("{other:?}\n{what}"),
    }
}

/// The ops of a lowered function, in order.
fn ops(p: &Program) -> Vec<Op> {
    p.func(FuncId(0)).code.iter().map(|i| i.op).collect()
}

/// Batched reservation: a block's `comms.push`es are cut at every call
/// and `blk.push`; in a stretch with two or more the first becomes
/// `comms.reserve %v, n` (room for all `n`, and this push) and the others
/// unchecked `comms.push.r`s, a stretch with one keeps its checked
/// `comms.push`.
#[test]
fn pushes_are_reserved_per_stretch_between_calls_and_block_pushes() {
    let id = B::identity("id");
    let mut b = B::new("t", &[("x", F64)], F64);
    let e = b.block("entry");
    let x = b.p(0);
    b.eff(e, Op::CommsPush, &[x]);
    b.line(e, 7);
    let y = b.op(e, Op::AddF, Some(F64), &[x, x]);
    b.eff(e, Op::CommsPush, &[y]);
    let z = b.call(e, 1, F64, &[y]);
    b.eff(e, Op::CommsPush, &[z]);
    b.blk_push(e, 0);
    for _ in 0..3 {
        b.eff(e, Op::CommsPush, &[x]);
    }
    let done = b.block("done");
    b.jmp(e, done);
    // A new block: a new stretch.
    b.eff(done, Op::CommsPush, &[y]);
    b.ret(done, z);
    let p = load(&module(vec![b, id]));
    let f = p.func(FuncId(0));
    use Op::*;
    assert_eq!(
        ops(&p),
        [
            CommsReserve,
            AddF,
            CommsPushR,
            Call,
            CommsPush,
            BlkPush,
            CommsReserve,
            CommsPushR,
            CommsPushR,
            CommsPush,
            Ret
        ],
        "{}",
        vm::disasm::function(f)
    );
    assert_eq!((f.code[0].x, f.code[6].x), (2, 3));
    // The reservation is the push it starts with, at its location.
    assert_eq!(f.locs[0].line, 7);
    let text = vm::disasm::function(f);
    assert!(text.contains("comms.reserve %x, 2"), "{text}");
    assert!(text.contains("comms.push.r %x"), "{text}");
    // x, 2x, then id(2x), then x three times, then 2x.
    let mut vm = Vm::default();
    vm.begin(true);
    vm.call_raw(&p, FuncId(0), &[1.5f64.to_bits()])
        .expect("runs");
    assert_eq!(vm.comms_len(), 7);
    assert_eq!(vm.blk_len(), 1);
    assert_eq!(vm.peak_stack_bytes(), 7 * 8 + 4);
}

/// `sin` and `cos` of one register, one right after the other (in either
/// order), are one `sincos`, which gives the same bits as `f64::sin` and
/// `f64::cos` (glibc's `sincos` shares their code; nan stays nan).
#[test]
fn sin_and_cos_of_one_register_fuse_into_sincos() {
    for sin_first in [true, false] {
        let mut b = B::new_many("sc", &[("x", F64)], 2);
        let e = b.block("entry");
        let x = b.p(0);
        let (s, c) = if sin_first {
            let s = b.op(e, Op::Sin, Some(F64), &[x]);
            (s, b.op(e, Op::Cos, Some(F64), &[x]))
        } else {
            let c = b.op(e, Op::Cos, Some(F64), &[x]);
            (b.op(e, Op::Sin, Some(F64), &[x]), c)
        };
        b.term(e, Term::RetN(vec![s, c]));
        let p = load(&b.module());
        let ops: Vec<Op> = p.func(FuncId(0)).code.iter().map(|i| i.op).collect();
        assert_eq!(ops, [Op::SinCos, Op::RetN], "sin first: {sin_first}");
        let mut xs = vec![
            0.0,
            -0.0,
            0.9,
            -2.5,
            1e-310,
            0.855469,
            2.426265,
            105414350.0,
            1e22,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            xs.push(f64::from_bits(state));
            xs.push((state >> 11) as f64 / (1u64 << 53) as f64 * 20.0 - 10.0);
        }
        for x in xs {
            let got = run_many(&p, &[x.to_bits()]);
            assert!(same(got[0], x.sin()) && same(got[1], x.cos()), "{x:e}");
        }
    }
}

/// `sincos` is made by the lowering only: IR that contains it is refused.
#[test]
fn sincos_is_not_an_ir_instruction() {
    let mut b = B::new_many("f", &[("x", F64)], 2);
    let e = b.block("entry");
    let x = b.p(0);
    let (s, c) = (b.val("s", F64), b.val("c", F64));
    b.set(e, Op::SinCos, s, &[c, x]);
    b.term(e, Term::RetN(vec![s, c]));
    let m = b.module();
    match lower_function(&m.funcs[0]) {
        Err(LowerError::BadInstruction { detail, .. }) => {
            assert!(detail.contains("made by the lowering"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
}
/// `(x0, y, k, n)`: `s = 0; x = x0; n times { p = x * y; s = s + p;
/// x = x * k }`, returning `s` (and, with `reuse`, `t`, a second sum of the
/// same products); with `commuted` the sum is `s = p + s`.
fn mul_add_loop(commuted: bool, reuse: bool) -> Module {
    let params = [("x0", F64), ("y", F64), ("k", F64), ("n", I64)];
    let mut b = B::new_many("ma", &params, 1 + usize::from(reuse));
    let (entry, head, body, done) = (
        b.block("entry"),
        b.block("head"),
        b.block("body"),
        b.block("done"),
    );
    b.jmp(entry, head);
    let (x0, y, k, n) = (b.p(0), b.p(1), b.p(2), b.p(3));
    let (i, i2) = (b.val("i", I64), b.val("i2", I64));
    let (s, s2) = (b.val("s", F64), b.val("s2", F64));
    let (t, t2) = (b.val("t", F64), b.val("t2", F64));
    let (x, x2) = (b.val("x", F64), b.val("x2", F64));
    let (zero, one, fzero) = (b.i64(0), b.i64(1), b.f64(0.0));
    b.phi(head, i, &[(entry, zero), (body, i2)]);
    b.phi(head, s, &[(entry, fzero), (body, s2)]);
    b.phi(head, x, &[(entry, x0), (body, x2)]);
    if reuse {
        b.phi(head, t, &[(entry, fzero), (body, t2)]);
    }
    let c = b.op(head, Op::LtI, Some(Bool), &[i, n]);
    b.br(head, c, body, done);
    let p = b.op(body, Op::MulF, Some(F64), &[x, y]);
    let sum = if commuted { [p, s] } else { [s, p] };
    b.set(body, Op::AddF, s2, &sum);
    if reuse {
        b.set(body, Op::AddF, t2, &[t, p]);
    }
    b.set(body, Op::MulF, x2, &[x, k]);
    b.set(body, Op::AddI, i2, &[i, one]);
    b.jmp(body, head);
    let rets = if reuse { vec![s, t] } else { vec![s] };
    b.term(done, Term::RetN(rets));
    b.module()
}

/// A product read only by the `add.f` after it that accumulates it in
/// place (`s = s + p`: a dot product's step) is one `add.mul.f`, which
/// computes the same as the pair (two roundings, the sum in the same
/// order) on ordinary and special inputs; the commuted sum and a product
/// read twice stay a `mul.f` and an `add.f`.
#[test]
fn a_product_summed_in_place_fuses_into_add_mul() {
    let mut inputs = vec![
        (1.5, -2.25, 0.5),
        (0.1, 0.2, 1.1),
        (1e308, 10.0, 2.0),
        (-0.0, 0.0, -1.0),
        (1e-310, 1e-10, 3.0),
        (f64::INFINITY, 0.0, 1.0),
        (f64::INFINITY, 1.0, -1.0),
        (f64::NAN, 1.0, 1.0),
        (3.0, f64::NEG_INFINITY, 0.0),
    ];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0
    };
    for _ in 0..500 {
        inputs.push((next(), next(), next()));
    }
    for (commuted, reuse) in [(false, false), (true, false), (false, true)] {
        let p = load(&mul_add_loop(commuted, reuse));
        let what = format!(
            "commuted {commuted}, reuse {reuse}:\n{}",
            vm::disasm::function(p.func(FuncId(0)))
        );
        let fused = !commuted && !reuse;
        let ops = ops(&p);
        assert_eq!(ops.contains(&Op::MulAddF), fused, "{what}");
        assert_eq!(ops.contains(&Op::AddF), !fused, "{what}");
        for &(x0, y, k) in &inputs {
            let n = 7;
            let (mut s, mut t, mut x) = (0.0f64, 0.0f64, x0);
            for _ in 0..n {
                let p = x * y;
                // `p + s` for the commuted sum: the same value (the
                // comparison takes any NaN for any other).
                s += p;
                t += p;
                x *= k;
            }
            let want = if reuse { vec![s, t] } else { vec![s] };
            let got = run_many(&p, &[x0.to_bits(), y.to_bits(), k.to_bits(), n as u64]);
            assert!(
                got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(*a, *b)),
                "{x0:e} {y:e} {k:e}: got {got:?}, want {want:?}\n{what}"
            );
        }
    }
}

/// `%d = aget %a, add.i(%i, %j)` with `%j` read again (`reuse`) or not.
fn indexed_load(reuse: bool) -> Module {
    let mut b = B::new("row", &[("a", Type::Arr), ("i", I64), ("j", I64)], F64);
    let e = b.block("entry");
    let (a, i, j) = (b.p(0), b.p(1), b.p(2));
    let k = b.op(e, Op::AddI, Some(I64), &[i, j]);
    b.line(e, 3);
    let d = b.op(e, Op::AGet, Some(F64), &[a, k]);
    b.line(e, 4);
    let r = if reuse {
        let kf = b.op(e, Op::ItoF, Some(F64), &[k]);
        b.op(e, Op::AddF, Some(F64), &[d, kf])
    } else {
        d
    };
    b.ret(e, r);
    b.module()
}

/// An `add.i` read only by the `aget` right after it is one `aget.add`,
/// which loads the same element, wraps the sum like `add.i` and traps on
/// the sum, at the `aget`'s location; a sum read again stays an `add.i`.
#[test]
fn an_index_sum_read_once_fuses_into_the_load() {
    let p = load(&indexed_load(false));
    assert_eq!(ops(&p), [Op::AGetAdd, Op::Ret]);
    let text = vm::disasm::function(p.func(FuncId(0)));
    assert!(text.contains("aget.add    r4, %a, %i, %j"), "{text}");
    let xs = Value::Arr(vec![1.5, 2.5, 3.5, 4.5]);
    let mut vm = Vm::default();
    for (i, j, want) in [(0, 0, 1.5), (1, 2, 4.5), (5, -3, 3.5), (-1, 1, 1.5)] {
        let got = vm.run(&p, FuncId(0), &[xs.clone(), Value::I64(i), Value::I64(j)]);
        assert_eq!(got.ok(), Some(Value::F64(want)), "a[{i} + {j}]");
    }
    for (i, j, index) in [(3, 1, 4), (-3, 1, -2), (i64::MAX, 1, i64::MIN)] {
        let t = vm
            .run(&p, FuncId(0), &[xs.clone(), Value::I64(i), Value::I64(j)])
            .expect_err("out of bounds");
        assert_eq!(t.kind, vm::TrapKind::OutOfBounds { index, len: 4 }, "{t}");
        assert!(t.instr.starts_with("aget.add"), "{t}");
        assert_eq!(t.loc.line, 4, "the aget's location: {t}");
    }

    let p = load(&indexed_load(true));
    assert_eq!(
        ops(&p),
        [Op::AddI, Op::AGet, Op::ItoF, Op::AddF, Op::Ret],
        "the sum is read twice"
    );
    let got = vm.run(&p, FuncId(0), &[xs, Value::I64(1), Value::I64(1)]);
    assert_eq!(got.ok(), Some(Value::F64(5.5)));
}

/// `(s, t, k, d) -> s + t[k] ⊙ d` as `c = aget t, k; y = add.mul.z s, c,
/// d` (with `swap`, `s, d, c`); with `reuse`, `y + c` (`c` read twice).
fn tangent_load(swap: bool, reuse: bool) -> Module {
    let params = [("s", F64), ("t", Type::Arr), ("k", I64), ("d", F64)];
    let mut b = B::new("tl", &params, F64);
    let e = b.block("entry");
    let (s, t, k, d) = (b.p(0), b.p(1), b.p(2), b.p(3));
    let c = b.op(e, Op::AGet, Some(F64), &[t, k]);
    b.line(e, 3);
    let args = if swap { [s, d, c] } else { [s, c, d] };
    let y = b.op(e, Op::AddMulZ, Some(F64), &args);
    b.line(e, 4);
    let r = if reuse {
        b.op(e, Op::AddF, Some(F64), &[y, c])
    } else {
        y
    };
    b.ret(e, r);
    b.module()
}

/// An `aget` read only by the `add.mul.z` right after it (as either
/// factor) is one `add.mul.aget`, which computes what the pair computes
/// bit for bit (the strong-zero product rounded, then summed) and traps
/// as the `aget` does, at its location; an element read twice stays an
/// `aget`.
#[test]
fn a_tangent_load_summed_right_away_fuses_into_add_mul_aget() {
    use vm::math::mul_z;
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let arr = vec![1.5, 0.0, inf, nan, -0.1];
    let cases = [
        (0.25, 0, 2.0),
        (0.25, 1, inf),
        (-1.0, 1, nan),
        (1.0, 2, 0.0),
        (1.0, 2, 3.0),
        (2.0, 3, 0.0),
        (1e308, 0, 1e308),
        (0.1, 4, 0.3),
    ];
    for swap in [false, true] {
        for reuse in [false, true] {
            let p = load(&tangent_load(swap, reuse));
            let text = vm::disasm::function(p.func(FuncId(0)));
            let what = format!("swap {swap} reuse {reuse}:\n{text}");
            assert_eq!(ops(&p).contains(&Op::AddMulAGet), !reuse, "{what}");
            assert_eq!(ops(&p).contains(&Op::AGet), reuse, "{what}");
            if !reuse {
                assert!(text.contains(", %s, %t, %k, %d"), "{what}");
            }
            let mut vm = Vm::default();
            for &(s, k, d) in &cases {
                let args = [
                    Value::F64(s),
                    Value::Arr(arr.clone()),
                    Value::I64(k),
                    Value::F64(d),
                ];
                let c = arr[k as usize];
                let y = s + mul_z(c, d);
                let want = if reuse { y + c } else { y };
                let got = run_f64(&mut vm, &p, &args, &what);
                assert!(same(got, want), "{s} {k} {d}: {got} vs {want}\n{what}");
            }
            for k in [5, -1, i64::MIN] {
                let args = [
                    Value::F64(1.0),
                    Value::Arr(arr.clone()),
                    Value::I64(k),
                    Value::F64(1.0),
                ];
                let t = vm.run(&p, FuncId(0), &args).expect_err("out of bounds");
                assert_eq!(
                    t.kind,
                    vm::TrapKind::OutOfBounds { index: k, len: 5 },
                    "{t}"
                );
                assert_eq!(t.loc.line, 3, "the aget's location: {t}");
            }
        }
    }
}

/// `(s, t, i, j, d) -> s + t[i + j] ⊙ d`, non-SSA: `k = add.i i, j; c =
/// aget t, k; s = add.mul.z s, c, d` in place (with `fresh`, into a new
/// register instead).
fn tangent_row_load(fresh: bool) -> Module {
    let params = [
        ("s", F64),
        ("t", Type::Arr),
        ("i", I64),
        ("j", I64),
        ("d", F64),
    ];
    let mut b = B::new("tr", &params, F64);
    let e = b.block("entry");
    let (s, t, i, j, d) = (b.p(0), b.p(1), b.p(2), b.p(3), b.p(4));
    let k = b.op(e, Op::AddI, Some(I64), &[i, j]);
    let c = b.op(e, Op::AGet, Some(F64), &[t, k]);
    b.line(e, 3);
    let r = if fresh {
        b.op(e, Op::AddMulZ, Some(F64), &[s, c, d])
    } else {
        b.set(e, Op::AddMulZ, s, &[s, c, d]);
        s
    };
    b.line(e, 4);
    b.ret(e, r);
    b.module()
}

/// An `aget.add` read only by the `add.mul.z` right after it that sums in
/// place is one `acc.mul.aget.add`: the same bits as the three, the index
/// sum wrapping and trapping as `aget.add`'s, at the load's location. Into
/// a register of its own the sum stays apart (six registers).
#[test]
fn a_row_major_tangent_load_summed_in_place_fuses_into_acc_mul_aget_add() {
    use vm::math::mul_z;
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let arr = vec![1.5, 0.0, inf, nan, -0.1];
    for fresh in [false, true] {
        let p = load(&tangent_row_load(fresh));
        let text = vm::disasm::function(p.func(FuncId(0)));
        let what = format!("fresh {fresh}:\n{text}");
        assert_eq!(ops(&p).contains(&Op::AccMulAGetAdd), !fresh, "{what}");
        assert_eq!(ops(&p).contains(&Op::AGetAdd), fresh, "{what}");
        let mut vm = Vm::default();
        for &(s, i, j, d) in &[
            (0.25, 0, 0, 2.0),
            (0.25, 0, 1, inf),
            (-1.0, 2, -1, nan),
            (1.0, 1, 1, 0.0),
            (2.0, 5, -2, 0.0),
            (0.1, 2, 2, 0.3),
        ] {
            let args = [
                Value::F64(s),
                Value::Arr(arr.clone()),
                Value::I64(i),
                Value::I64(j),
                Value::F64(d),
            ];
            let want = s + mul_z(arr[(i + j) as usize], d);
            let got = run_f64(&mut vm, &p, &args, &what);
            assert!(same(got, want), "{s} {i} {j} {d}: {got} vs {want}\n{what}");
        }
        for (i, j, index) in [(3, 2, 5), (-3, 1, -2), (i64::MAX, 1, i64::MIN)] {
            let args = [
                Value::F64(1.0),
                Value::Arr(arr.clone()),
                Value::I64(i),
                Value::I64(j),
                Value::F64(1.0),
            ];
            let t = vm.run(&p, FuncId(0), &args).expect_err("out of bounds");
            assert_eq!(t.kind, vm::TrapKind::OutOfBounds { index, len: 5 }, "{t}");
            assert_eq!(t.loc.line, 3, "the load's location: {t}");
        }
    }
}

/// `aget.add` is made by the lowering only: IR that contains it is refused.
#[test]
fn aget_add_is_not_an_ir_instruction() {
    let mut b = B::new("row", &[("a", Type::Arr), ("i", I64)], F64);
    let e = b.block("entry");
    let (a, i) = (b.p(0), b.p(1));
    let d = b.op(e, Op::AGetAdd, Some(F64), &[a, i, i]);
    b.ret(e, d);
    let m = b.module();
    let err = lower_module(&m).expect_err("refused");
    assert!(err.to_string().contains("aget.add"), "{err}");
}

/// Copies stop when the budget is spent: a ring of one-instruction
/// blocks, each jumping to the one laid out before it, lowers to a
/// bounded amount of code and runs as written.
#[test]
fn copies_of_copies_are_bounded() {
    let k = 6;
    let mut bl = B::new("ring", &[("n", I64)], I64);
    let entry = bl.block("entry");
    let blocks: Vec<BlockId> = (0..k).map(|i| bl.block(&format!("b{i}"))).collect();
    let done = bl.block("done");
    let n = bl.p(0);
    let (zero, one) = (bl.i64(0), bl.i64(1));
    // entry: jmp b{k-1}; b{i}: %v{i} = sub.i %c, 1 ... each block counts
    // down one shared counter kept in phis; b0 tests it and loops.
    bl.jmp(entry, blocks[k - 1]);
    let counters: Vec<ValueId> = (0..k).map(|i| bl.val(&format!("c{i}"), I64)).collect();
    let mut prev_out = Vec::new();
    for i in 0..k {
        let out = bl.op(blocks[i], Op::SubI, Some(I64), &[counters[i], one]);
        prev_out.push(out);
    }
    for i in 0..k - 1 {
        bl.phi(blocks[i], counters[i], &[(blocks[i + 1], prev_out[i + 1])]);
        bl.jmp(blocks[i + 1], blocks[i]);
    }
    // b{k-1} is entered from entry (the counter n) and from b0's loop.
    bl.phi(
        blocks[k - 1],
        counters[k - 1],
        &[(entry, n), (blocks[0], prev_out[0])],
    );
    let more = bl.op(blocks[0], Op::GtI, Some(Bool), &[prev_out[0], zero]);
    bl.br(blocks[0], more, blocks[k - 1], done);
    bl.ret(done, prev_out[0]);
    let p = load(&bl.module());
    let f = p.func(FuncId(0));
    // A one-instruction block costs 2 of the budget of 5: a `jmp` gets at
    // most two copies, so no block's `sub.i` is written more than 3 times.
    let subs = f.code.iter().filter(|i| i.op == Op::SubI).count();
    assert!(subs > k && subs <= 3 * k, "{}", vm::disasm::function(f));
    let mut vm = Vm::default();
    // Counts down by k per round until the counter is at most 0.
    let got = vm.run(&p, FuncId(0), &[Value::I64(20)]);
    assert_eq!(got.ok(), Some(Value::I64(20 - 4 * k as i64)));
}

// ---- phi coalescing by liveness ------------------------------------------

/// `walk(x, n)`: `n` times `v <- v > 0.5 ? v * v : v + 0.3`, summing the
/// iterates (programs/branch_in_loop.adasm): the join's phi `%w` is
/// carried to the header's phi `%v` and also summed, so it has two
/// readers. `ret_v`: `%v` is also returned, read after the loop (through
/// the exit edge, where it is still the header's value).
fn walk(ret_v: bool) -> Module {
    let mut b = B::new_many("walk", &[("x", F64), ("n", I64)], 2);
    let entry = b.block("entry");
    let head = b.block("head");
    let body = b.block("body");
    let square = b.block("square");
    let shift = b.block("shift");
    let join = b.block("join");
    let done = b.block("done");
    let (x, n) = (b.p(0), b.p(1));
    let (v, s, k) = (b.val("v", F64), b.val("s", F64), b.val("k", I64));
    let (w, s2, k2) = (b.val("w", F64), b.val("s2", F64), b.val("k2", I64));
    let (z, i0, i1) = (b.f64(0.0), b.i64(0), b.i64(1));
    let (half, step) = (b.f64(0.5), b.f64(0.3));
    b.jmp(entry, head);
    b.phi(head, v, &[(entry, x), (join, w)]);
    b.phi(head, s, &[(entry, z), (join, s2)]);
    b.phi(head, k, &[(entry, i0), (join, k2)]);
    let c = b.op(head, Op::LtI, Some(Bool), &[k, n]);
    b.br(head, c, body, done);
    let big = b.op(body, Op::GtF, Some(Bool), &[v, half]);
    b.br(body, big, square, shift);
    let q = b.op(square, Op::MulF, Some(F64), &[v, v]);
    b.jmp(square, join);
    let r = b.op(shift, Op::AddF, Some(F64), &[v, step]);
    b.jmp(shift, join);
    b.phi(join, w, &[(square, q), (shift, r)]);
    b.set(join, Op::AddF, s2, &[s, w]);
    b.set(join, Op::AddI, k2, &[k, i1]);
    b.jmp(join, head);
    let last = if ret_v { v } else { s };
    b.term(done, Term::RetN(vec![s, last]));
    b.module()
}

fn walk_reference(x: f64, n: i64) -> (f64, f64) {
    let (mut v, mut s) = (x, 0.0);
    for _ in 0..n {
        v = if v > 0.5 { v * v } else { v + 0.3 };
        s += v;
    }
    (s, v)
}

/// The join's phi shares the header phi's register (they are never live
/// at once), so the loop copies nothing, and the counter's step then
/// fuses with the back edge's compare-and-branch: 4 instructions per
/// iteration on either arm (6 with the copy and a separate step).
#[test]
fn a_join_carried_to_the_loop_header_shares_its_register() {
    for ret_v in [false, true] {
        let p = load(&walk(ret_v));
        let f = p.func(FuncId(0));
        let text = vm::disasm::function(f);
        // The only copies are the header's initial values, on entry.
        let loop_start = f
            .blocks
            .iter()
            .find(|m| m.name == "head")
            .expect("head")
            .start;
        assert!(
            f.code[loop_start as usize..]
                .iter()
                .all(|i| i.op != Op::Mov),
            "{text}"
        );
        assert!(f.code.iter().any(|i| is_step(i.op)), "{text}");
        let mut vm = Vm::default();
        // 1.5 always squares, -5 always shifts (for the first 18 steps),
        // 0.45 and 0.1 alternate.
        for x in [1.5f64, -5.0, 0.45, 0.1] {
            let mut per_iter = Vec::new();
            for n in [0i64, 1, 5, 6] {
                vm.begin(false);
                vm.call_raw(&p, FuncId(0), &[x.to_bits(), n as u64])
                    .expect("runs");
                let got: Vec<f64> = vm.results().iter().map(|b| f64::from_bits(*b)).collect();
                let (s, v) = walk_reference(x, n);
                assert_eq!(
                    got,
                    vec![s, if ret_v { v } else { s }],
                    "x {x}, n {n}\n{text}"
                );
                per_iter.push(vm.executed());
            }
            if x == 1.5 || x == -5.0 {
                assert_eq!(per_iter[3] - per_iter[2], 4, "x {x}\n{text}");
            }
        }
    }
}

/// `count(n)`: the sum of `0..n` (n >= 1) by a bottom-tested loop,
/// `acc2 = acc + i; i2 = i + 1; if i2 < n goto body`, whose `%i2` is read
/// by the comparison and by the phi: it shares the phi's register, so the
/// step fuses with the branch. With the sum after the step (`use_old`),
/// `%i` is read after `%i2` is written: they are live at once and stay
/// apart (a copy per iteration). The value is right either way.
fn count(use_old: bool) -> Module {
    let mut b = B::new("count", &[("n", I64)], I64);
    let entry = b.block("entry");
    let body = b.block("body");
    let done = b.block("done");
    let n = b.p(0);
    let (i, i2, acc, acc2) = (
        b.val("i", I64),
        b.val("i2", I64),
        b.val("acc", I64),
        b.val("acc2", I64),
    );
    let (i0, i1) = (b.i64(0), b.i64(1));
    b.jmp(entry, body);
    b.phi(body, i, &[(entry, i0), (body, i2)]);
    b.phi(body, acc, &[(entry, i0), (body, acc2)]);
    if use_old {
        b.set(body, Op::AddI, i2, &[i, i1]);
        b.set(body, Op::AddI, acc2, &[acc, i]);
    } else {
        b.set(body, Op::AddI, acc2, &[acc, i]);
        b.set(body, Op::AddI, i2, &[i, i1]);
    }
    let c = b.op(body, Op::LtI, Some(Bool), &[i2, n]);
    b.br(body, c, body, done);
    b.ret(done, acc2);
    b.module()
}

#[test]
fn a_bottom_tested_counter_shares_the_phis_register() {
    for use_old in [false, true] {
        let p = load(&count(use_old));
        let f = p.func(FuncId(0));
        let text = vm::disasm::function(f);
        let mut vm = Vm::default();
        let mut executed = Vec::new();
        for n in [1i64, 2, 10, 11] {
            let got = vm.run(&p, FuncId(0), &[Value::I64(n)]);
            let want: i64 = (0..n).sum();
            assert_eq!(got, Ok(Value::I64(want)), "n {n}\n{text}");
            executed.push(vm.executed());
        }
        let per_iter = executed[3] - executed[2];
        let movs = f.code.iter().filter(|i| i.op == Op::Mov).count();
        if use_old {
            // `%i` is read after `%i2` is written: a copy per iteration.
            assert!(per_iter > 2, "{text}");
            assert!(movs > 2, "{text}");
        } else {
            // add.i (the sum, in place), jmp.step: no copy in the loop.
            assert_eq!(per_iter, 2, "{text}");
            assert!(f.code.iter().any(|i| is_step(i.op)), "{text}");
            assert_eq!(movs, 2, "only the initial values\n{text}");
        }
    }
}

/// `(t, c, a, b) -> ...`, non-SSA: `p = mul.z t, c; t = add.mul.z p, a, b`
/// (a running product's tangent, in place) returning `t`; with `reuse`,
/// the sum goes to a new register and `p` is returned too (read twice).
fn tangent_product(reuse: bool) -> Module {
    let params = [("t", F64), ("c", F64), ("a", F64), ("b", F64)];
    let mut b = B::new_many("tp", &params, if reuse { 2 } else { 1 });
    let e = b.block("entry");
    let (t, c, a, bb) = (b.p(0), b.p(1), b.p(2), b.p(3));
    let p = b.op(e, Op::MulZ, Some(F64), &[t, c]);
    if reuse {
        let y = b.op(e, Op::AddMulZ, Some(F64), &[p, a, bb]);
        b.term(e, Term::RetN(vec![y, p]));
    } else {
        b.set(e, Op::AddMulZ, t, &[p, a, bb]);
        b.term(e, Term::RetN(vec![t]));
    }
    b.module()
}

/// A `mul.z` read only by the `add.mul.z` after it that writes the
/// product's first factor is one `tmul.z`, which computes what the pair
/// computes bit for bit: both products strong-zero (a zero factor against
/// inf or nan gives 0), each rounded, then summed. `add.mul.z` alone is
/// `r1 + r2 ⊙ r3`. A product read twice stays a `mul.z`.
#[test]
fn a_running_products_tangent_fuses_into_tmul_z() {
    use vm::math::mul_z;
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let inputs = [
        (1.5, -2.25, 0.5, 3.0),
        (0.1, 10.0, -1.0, 0.1),
        (0.0, inf, 0.0, nan),
        (0.0, nan, 2.0, 3.0),
        (inf, 0.0, nan, 0.0),
        (2.0, 3.0, 0.0, inf),
        (-0.0, 1.0, -0.0, 1.0),
        (1e308, 10.0, 1e308, 10.0),
        (nan, 1.0, 1.0, 1.0),
    ];
    for reuse in [false, true] {
        let p = load(&tangent_product(reuse));
        let what = format!(
            "reuse {reuse}:\n{}",
            vm::disasm::function(p.func(FuncId(0)))
        );
        assert_eq!(ops(&p).contains(&Op::TMulZ), !reuse, "{what}");
        assert_eq!(ops(&p).contains(&Op::MulZ), reuse, "{what}");
        for &(t, c, a, b) in &inputs {
            let prod = mul_z(t, c);
            let want = prod + mul_z(a, b);
            let got = run_many(&p, &[t, c, a, b].map(f64::to_bits));
            assert!(
                same(got[0], want),
                "{t} {c} {a} {b}: {got:?} vs {want}\n{what}"
            );
            if reuse {
                assert!(same(got[1], prod), "{t} {c} {a} {b}: {got:?}\n{what}");
            }
        }
    }
    // The strong zeros: a zero tangent against an infinite or nan factor
    // contributes exactly 0.
    let p = load(&tangent_product(false));
    let got = run_many(&p, &[0.0, inf, 0.0, nan].map(f64::to_bits));
    assert_eq!(got[0].to_bits(), 0.0f64.to_bits());
}

/// `(m, e, dm, de) -> (m, dm[, q])`, non-SSA: `c = gt.f e, m; dm = select
/// c, de, dm; m = max.f m, e` (`lt.f` and `min.f` for `min`): a running
/// maximum and its tangent; with `reuse`, `q = select c, e, dm` reads the
/// comparison a second time.
fn tangent_choice(min: bool, reuse: bool) -> Module {
    let params = [("m", F64), ("e", F64), ("dm", F64), ("de", F64)];
    let mut b = B::new_many("tc", &params, if reuse { 3 } else { 2 });
    let e0 = b.block("entry");
    let (m, e, dm, de) = (b.p(0), b.p(1), b.p(2), b.p(3));
    let (cmp, pick) = if min {
        (Op::LtF, Op::MinF)
    } else {
        (Op::GtF, Op::MaxF)
    };
    let c = b.op(e0, cmp, Some(Bool), &[e, m]);
    b.set(e0, Op::Select, dm, &[c, de, dm]);
    let q = reuse.then(|| b.op(e0, Op::Select, Some(F64), &[c, e, dm]));
    b.set(e0, pick, m, &[m, e]);
    let mut rets = vec![m, dm];
    rets.extend(q);
    b.term(e0, Term::RetN(rets));
    b.module()
}

/// A running `max.f` (`min.f`) in place with its tangent chosen by the
/// same comparison is one `tmax.f` (`tmin.f`), which computes what the
/// three compute on ties, nans and signed zeros; a comparison read twice
/// stays as it is.
#[test]
fn a_running_max_and_its_tangent_fuse_into_tmax() {
    let nan = f64::NAN;
    let inputs = [
        (1.0, 2.0),
        (2.0, 1.0),
        (1.0, 1.0),
        (0.0, -0.0),
        (-0.0, 0.0),
        (nan, 1.0),
        (1.0, nan),
        (f64::NEG_INFINITY, -1e308),
    ];
    for min in [false, true] {
        for reuse in [false, true] {
            let p = load(&tangent_choice(min, reuse));
            let what = format!(
                "min {min}, reuse {reuse}:\n{}",
                vm::disasm::function(p.func(FuncId(0)))
            );
            let fused = if min { Op::TMinF } else { Op::TMaxF };
            assert_eq!(ops(&p).contains(&fused), !reuse, "{what}");
            for &(m, e) in &inputs {
                let (dm, de) = (0.25, -7.5);
                let took = if min { e < m } else { e > m };
                let want = if took { [e, de] } else { [m, dm] };
                let got = run_many(&p, &[m, e, dm, de].map(f64::to_bits));
                let same = |x: f64, y: f64| x.to_bits() == y.to_bits();
                assert!(
                    same(got[0], want[0]) && same(got[1], want[1]),
                    "{m} {e}: {got:?} vs {want:?}\n{what}"
                );
            }
        }
    }
}

/// `(a, t, k) -> a[k] + t[k]`: two `aget`s at one index, both at line 3
/// (the tangent code of one `aget`) or, with `apart`, at lines 3 and 4.
fn paired_loads(apart: bool) -> Module {
    let params = [("a", Type::Arr), ("t", Type::Arr), ("k", I64)];
    let mut b = B::new("pl", &params, F64);
    let e = b.block("entry");
    let (a, t, k) = (b.p(0), b.p(1), b.p(2));
    let x = b.op(e, Op::AGet, Some(F64), &[a, k]);
    b.line(e, 3);
    let y = b.op(e, Op::AGet, Some(F64), &[t, k]);
    b.line(e, if apart { 4 } else { 3 });
    let r = b.op(e, Op::AddF, Some(F64), &[x, y]);
    b.line(e, 5);
    b.ret(e, r);
    b.module()
}

/// Two `aget`s at one index standing for one instruction (one location)
/// are one `aget.pair`: the same values, the first array's trap before the
/// second's, each with its own length, at that location. Loads at two
/// locations stay two, so that a trap in the second names its own line.
#[test]
fn loads_of_one_instruction_at_one_index_pair() {
    let p = load(&paired_loads(false));
    assert_eq!(ops(&p), [Op::AGetPair, Op::AddF, Op::Ret]);
    let apart = load(&paired_loads(true));
    assert_eq!(ops(&apart), [Op::AGet, Op::AGet, Op::AddF, Op::Ret]);
    let (a, t) = (vec![1.5, -2.0, 4.0], vec![0.25, 8.0]);
    let mut vm = Vm::default();
    for prog in [&p, &apart] {
        for k in [0, 1] {
            let args = [Value::Arr(a.clone()), Value::Arr(t.clone()), Value::I64(k)];
            let want = a[k as usize] + t[k as usize];
            assert_eq!(vm.run(prog, FuncId(0), &args).ok(), Some(Value::F64(want)));
        }
    }
    // Out of the first array: its length, either way.
    for (k, len, line_pair, line_apart) in [(3, 3, 3, 3), (-1, 3, 3, 3), (2, 2, 3, 4)] {
        for (prog, line) in [(&p, line_pair), (&apart, line_apart)] {
            let args = [Value::Arr(a.clone()), Value::Arr(t.clone()), Value::I64(k)];
            let tr = vm.run(prog, FuncId(0), &args).expect_err("out of bounds");
            assert_eq!(tr.kind, vm::TrapKind::OutOfBounds { index: k, len }, "{tr}");
            assert_eq!(tr.loc.line, line, "{tr}");
        }
    }
}

/// `(a, b, c) -> (a ⊙ b) ⊙ c` as two `mul.z`s; with `reuse`, plus `a ⊙ b`
/// (the first product read twice).
fn product_of_three(reuse: bool) -> Module {
    let params = [("a", F64), ("b", F64), ("c", F64)];
    let mut b = B::new("p3", &params, F64);
    let e = b.block("entry");
    let (x, y, z) = (b.p(0), b.p(1), b.p(2));
    let p = b.op(e, Op::MulZ, Some(F64), &[x, y]);
    let q = b.op(e, Op::MulZ, Some(F64), &[p, z]);
    let r = if reuse {
        b.op(e, Op::AddF, Some(F64), &[q, p])
    } else {
        q
    };
    b.ret(e, r);
    b.module()
}

/// A `mul.z` read only by the `mul.z` after it is one `mul.mul.z`, with
/// the pair's bits (each strong-zero product rounded) on zeros, infinities,
/// nan and overflow; a product read again stays a `mul.z`.
#[test]
fn a_product_read_once_by_a_product_fuses_into_mul_mul_z() {
    use vm::math::mul_z;
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let vals = [0.0, -0.0, 1.5, -3.0, inf, nan, 1e308, 1e-310];
    for reuse in [false, true] {
        let p = load(&product_of_three(reuse));
        assert_eq!(ops(&p).contains(&Op::MulMulZ), !reuse, "{:?}", ops(&p));
        let mut vm = Vm::default();
        for &a in &vals {
            for &b in &vals {
                for &c in &vals {
                    let q = mul_z(mul_z(a, b), c);
                    let want = if reuse { q + mul_z(a, b) } else { q };
                    let args = [Value::F64(a), Value::F64(b), Value::F64(c)];
                    let got = run_f64(&mut vm, &p, &args, "");
                    assert!(same(got, want), "({a} ⊙ {b}) ⊙ {c}: {got} vs {want}");
                }
            }
        }
    }
}

/// `(a, b, c, d) -> a ⊙ b + c ⊙ d` as `mul.z` and `add.mul.z`; with
/// `reuse`, plus `a ⊙ b` (the product read twice).
fn product_tangent(reuse: bool) -> Module {
    let params = [("a", F64), ("b", F64), ("c", F64), ("d", F64)];
    let mut b = B::new("pt", &params, F64);
    let e = b.block("entry");
    let (w, x, y, z) = (b.p(0), b.p(1), b.p(2), b.p(3));
    let p = b.op(e, Op::MulZ, Some(F64), &[w, x]);
    let q = b.op(e, Op::AddMulZ, Some(F64), &[p, y, z]);
    let r = if reuse {
        b.op(e, Op::AddF, Some(F64), &[q, p])
    } else {
        q
    };
    b.ret(e, r);
    b.module()
}

/// A `mul.z` read only by the `add.mul.z` after it, as its sum (a
/// product's tangent), is one `tprod.z`, with the pair's bits on zeros,
/// infinities, nan and overflow; a product read again stays a `mul.z`.
#[test]
fn a_products_tangent_fuses_into_tprod_z() {
    use vm::math::mul_z;
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let vals = [0.0, -0.0, 1.5, inf, nan, 1e308];
    for reuse in [false, true] {
        let p = load(&product_tangent(reuse));
        assert_eq!(ops(&p).contains(&Op::TProdZ), !reuse, "{:?}", ops(&p));
        let mut vm = Vm::default();
        for &a in &vals {
            for &b in &vals {
                for &c in &vals {
                    for &d in &vals {
                        let q = mul_z(a, b) + mul_z(c, d);
                        let want = if reuse { q + mul_z(a, b) } else { q };
                        let args = [Value::F64(a), Value::F64(b), Value::F64(c), Value::F64(d)];
                        let got = run_f64(&mut vm, &p, &args, "");
                        assert!(same(got, want), "{a} ⊙ {b} + {c} ⊙ {d}: {got} vs {want}");
                    }
                }
            }
        }
    }
}

/// `(s, ṡ, x, ẋ, c) -> s' + ṡ'`, non-SSA: `ṡ += ẋ⊙c; s += x·c` (with
/// `square`, `ṡ += (ẋ⊙x)⊙c; s += x·x`), each product first, then the two
/// sums in place, the value's first (as tangent code has them).
fn dual_sum(square: bool) -> Module {
    let params = [("s", F64), ("ds", F64), ("x", F64), ("dx", F64), ("c", F64)];
    let mut b = B::new("ds", &params, F64);
    let e = b.block("entry");
    let (s, ds, x, dx, c) = (b.p(0), b.p(1), b.p(2), b.p(3), b.p(4));
    let (q, a) = if square {
        let p = b.op(e, Op::MulZ, Some(F64), &[dx, x]);
        let q = b.op(e, Op::MulZ, Some(F64), &[p, c]);
        (q, b.op(e, Op::MulF, Some(F64), &[x, x]))
    } else {
        let q = b.op(e, Op::MulZ, Some(F64), &[dx, c]);
        (q, b.op(e, Op::MulF, Some(F64), &[x, c]))
    };
    b.set(e, Op::AddF, s, &[s, a]);
    b.set(e, Op::AddF, ds, &[ds, q]);
    let r = b.op(e, Op::AddF, Some(F64), &[s, ds]);
    b.ret(e, r);
    b.module()
}

/// A tangent summed in place right before its value's sum with the same
/// factor is one `add.mul.t` (a square's, one `add.sq.t`), with the bits of
/// the pair of sums on zeros, infinities, nan and overflow.
#[test]
fn a_sum_and_its_tangent_sum_fuse_into_add_mul_t() {
    use vm::math::mul_z;
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let vals = [0.0, -0.0, 1.5, inf, nan, 1e308];
    for square in [false, true] {
        let p = load(&dual_sum(square));
        let want_op = if square { Op::AddSqT } else { Op::AddMulT };
        assert_eq!(ops(&p), [want_op, Op::AddF, Op::Ret], "square {square}");
        let mut vm = Vm::default();
        for &s in &[0.25, -1.0] {
            for &x in &vals {
                for &dx in &vals {
                    for &c in &vals {
                        let (a, q) = if square {
                            (x * x, mul_z(mul_z(dx, x), c))
                        } else {
                            (x * c, mul_z(dx, c))
                        };
                        let want = (s + a) + (0.5 + q);
                        let args = [s, 0.5, x, dx, c].map(Value::F64);
                        let got = run_f64(&mut vm, &p, &args, "");
                        assert!(
                            same(got, want),
                            "square {square}: {s} {x} {dx} {c}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
