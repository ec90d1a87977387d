//! AD benchmarks: `cargo bench -p advm-bench --bench ad`.
//!
//! * `stacks`: ns per `comms.push` + `comms.pop` pair and per `blk.push` +
//!   `blk.pop` pair, from loops of 8 pushes or pops per iteration, minus the
//!   same loop doing 8 register copies (the 8 comms pushes of a block are
//!   lowered to one `comms.reserve 8` and 8 `comms.push.r`). And batched
//!   reservation: a one-block loop pushing 4 values per iteration, as
//!   lowered (`comms.reserve 4` and 4 unchecked `comms.push.r`) and with 4
//!   checked `comms.push` instead: the difference over 4000 pushes is the
//!   saving per push, the reservation's own cost included.
//! * `dispatch`: the same loops doing 8 `add.f`, 8 `sub.f`, 8 `mul.f`, 8 `sin` or 8
//!   calls of a function that returns its argument: minus the copy loop,
//!   the cost of one such instruction (or call + return) over a copy.
//! * `iteration`: powloop (n = 1000) forward function alone, and forward
//!   then reverse: per iteration of each loop, divide by 1000.
//! * `ratio/<program>`: primal call vs gradient call on the suite programs,
//!   in one group so that the ratio is measured in one run.

use ad::{Engine, Gradient};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use vm::bytecode::Program;
use vm::ir::{Block, BlockId, FuncId, Function, Inst, Loc, Module, Phi, RetType, Term, ValueId};
use vm::op::Op;
use vm::{Type, Vm};

const PER_ITER: usize = 8;
/// Pushes per iteration of the batched-reservation loops.
const PUSHES: usize = 4;
/// Index of `@id(x) = x` in the dispatch module (the callee of `call`).
const IDENTITY: u32 = 4;
const ITERS: i64 = 1000;

/// `for i < n { body x 8 }; ret 0.0` where `body` is one instruction kind.
fn loop_fn(name: &str, op: Op) -> Function {
    loop_fn_n(name, op, PER_ITER)
}

/// `for i < n { body x per_iter }; ret 0.0`.
fn loop_fn_n(name: &str, op: Op, per_iter: usize) -> Function {
    let mut f = Function {
        name: name.into(),
        params: Vec::new(),
        ret: RetType::One(Type::F64),
        values: Vec::new(),
        blocks: Vec::new(),
        loc: Loc::default(),
    };
    let n = f.new_value(Type::I64, Some("n".into()));
    f.params.push(n);
    let x = f.new_value(Type::F64, Some("x".into()));
    f.params.push(x);
    let (zero, one, fzero) = (
        f.new_const(Type::I64, 0),
        f.new_const(Type::I64, 1),
        f.new_const(Type::F64, 0),
    );
    let i = f.new_value(Type::I64, Some("i".into()));
    let i2 = f.new_value(Type::I64, Some("i2".into()));
    let c = f.new_value(Type::Bool, None);
    let y = f.new_value(Type::F64, Some("y".into()));
    let block = |name: &str, insts: Vec<Inst>, term: Term| Block {
        name: name.into(),
        phis: Vec::new(),
        insts,
        term,
        term_loc: Loc::default(),
    };
    let l = Loc::default();
    let mut body = Vec::new();
    for _ in 0..per_iter {
        body.push(match op {
            Op::CommsPush => Inst::new(Op::CommsPush, None, vec![x], l),
            Op::CommsPop => Inst::new(Op::CommsPop, Some(y), vec![], l),
            Op::BlkPush => {
                let mut p = Inst::new(Op::BlkPush, None, vec![], l);
                p.imm = 0;
                p
            }
            Op::AddF | Op::SubF | Op::MulF => Inst::new(op, Some(y), vec![x, x], l),
            Op::Sin => Inst::new(Op::Sin, Some(y), vec![x], l),
            Op::Call => {
                let mut call = Inst::new(Op::Call, Some(y), vec![x], l);
                call.callee = Some(FuncId(IDENTITY));
                call
            }
            _ => Inst::new(Op::Mov, Some(y), vec![x], l),
        });
    }
    body.push(Inst::new(Op::AddI, Some(i2), vec![i, one], l));
    let mut head = block(
        "head",
        vec![Inst::new(Op::LtI, Some(c), vec![i, n], l)],
        Term::Br {
            cond: c,
            then_: BlockId(2),
            else_: BlockId(3),
        },
    );
    head.phis.push(Phi {
        dst: i,
        incoming: vec![(BlockId(0), zero), (BlockId(2), i2)],
        loc: l,
    });
    f.blocks = vec![
        block("entry", vec![], Term::Jmp(BlockId(1))),
        head,
        block("body", body, Term::Jmp(BlockId(1))),
        block("done", vec![], Term::Ret(fzero)),
    ];
    if op == Op::BlkPop {
        // Eight dispatching pops per iteration: a chain of blocks.
        let mut blocks = vec![f.blocks[0].clone(), f.blocks[1].clone()];
        for k in 0..PER_ITER {
            let next = if k + 1 < PER_ITER {
                BlockId(3 + k as u32)
            } else {
                BlockId(2 + PER_ITER as u32)
            };
            blocks.push(block(&format!("pop{k}"), vec![], Term::BlkPop(vec![next])));
        }
        blocks.push(block(
            "latch",
            vec![Inst::new(Op::AddI, Some(i2), vec![i, one], l)],
            Term::Jmp(BlockId(1)),
        ));
        blocks.push(block("done", vec![], Term::Ret(fzero)));
        blocks[1].term = Term::Br {
            cond: c,
            then_: BlockId(2),
            else_: BlockId(3 + PER_ITER as u32),
        };
        blocks[1].phis[0].incoming[1].0 = BlockId(2 + PER_ITER as u32);
        f.blocks = blocks;
    }
    let _ = ValueId(0);
    f
}

fn stacks(c: &mut Criterion) {
    let module = Module {
        funcs: vec![
            loop_fn("push", Op::CommsPush),
            loop_fn("pop", Op::CommsPop),
            loop_fn("mov", Op::Mov),
            loop_fn("bpush", Op::BlkPush),
            loop_fn("bpop", Op::BlkPop),
        ],
        rules: Vec::new(),
    };
    let mut p: Program = vm::lower::lower_module(&module).expect("lowers");
    vm::verify::verify_program(&mut p).expect("verifies");
    let mut vm = Vm::default();
    let args = [ITERS as u64, 1.5f64.to_bits()];
    let mut g = c.benchmark_group("stacks");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.bench_function("comms_push_then_pop_8000", |b| {
        b.iter(|| {
            vm.begin(true);
            vm.call_raw(&p, FuncId(0), black_box(&args)).expect("push");
            vm.call_raw(&p, FuncId(1), black_box(&args)).expect("pop");
        })
    });
    g.bench_function("blk_push_then_pop_8000", |b| {
        b.iter(|| {
            vm.begin(true);
            vm.call_raw(&p, FuncId(3), black_box(&args)).expect("push");
            vm.call_raw(&p, FuncId(4), black_box(&args)).expect("pop");
        })
    });
    g.bench_function("copy_twice_8000_baseline", |b| {
        b.iter(|| {
            vm.begin(true);
            vm.call_raw(&p, FuncId(2), black_box(&args)).expect("mov");
            vm.call_raw(&p, FuncId(2), black_box(&args)).expect("mov");
        })
    });
    // Batched reservation: 4 pushes per iteration, reserved (as lowered)
    // and checked (the same code without its reservation).
    let module = Module {
        funcs: vec![loop_fn_n("push4", Op::CommsPush, PUSHES)],
        rules: Vec::new(),
    };
    let mut p: Program = vm::lower::lower_module(&module).expect("lowers");
    let reserved = p.func(FuncId(0)).clone();
    assert!(reserved.code.iter().any(|i| i.op == Op::CommsReserve));
    let checked = p.push(unreserve(&reserved));
    vm::verify::verify_program(&mut p).expect("verifies");
    for (name, f) in [
        ("push4_reserved_4000", FuncId(0)),
        ("push4_checked_4000", checked),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                vm.begin(true);
                vm.call_raw(&p, f, black_box(&args)).expect("push");
            })
        });
    }
    g.finish();
}

/// `f` as the lowering made it before batched reservation: every
/// `comms.reserve` (the first push of its batch) and every `comms.push.r`
/// a checked `comms.push` again (same positions, so no jump moves).
fn unreserve(f: &vm::bytecode::Function) -> vm::bytecode::Function {
    let mut g = f.clone();
    for i in &mut g.code {
        if matches!(i.op, Op::CommsReserve | Op::CommsPushR) {
            i.op = Op::CommsPush;
            i.x = 0;
        }
    }
    g
}

/// `@id(%x: f64) -> f64 { ret %x }`.
fn identity() -> Function {
    let mut f = Function {
        name: "id".into(),
        params: Vec::new(),
        ret: RetType::One(Type::F64),
        values: Vec::new(),
        blocks: Vec::new(),
        loc: Loc::default(),
    };
    let x = f.new_value(Type::F64, Some("x".into()));
    f.params.push(x);
    f.blocks.push(Block {
        name: "entry".into(),
        phis: Vec::new(),
        insts: Vec::new(),
        term: Term::Ret(x),
        term_loc: Loc::default(),
    });
    f
}

fn dispatch(c: &mut Criterion) {
    let module = Module {
        funcs: vec![
            loop_fn("mov", Op::Mov),
            loop_fn("add", Op::AddF),
            loop_fn("mul", Op::MulF),
            loop_fn("sin", Op::Sin),
            identity(),
            loop_fn("call", Op::Call),
            loop_fn("sub", Op::SubF),
        ],
        rules: Vec::new(),
    };
    let mut p: Program = vm::lower::lower_module(&module).expect("lowers");
    vm::verify::verify_program(&mut p).expect("verifies");
    let mut vm = Vm::default();
    let args = [ITERS as u64, 1.5f64.to_bits()];
    let mut g = c.benchmark_group("dispatch");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    for (name, id) in [
        ("copy_8000_baseline", 0),
        ("add_8000", 1),
        ("sub_8000", 6),
        ("mul_8000", 2),
        ("sin_8000", 3),
        ("call_return_8000", 5),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| vm.call_raw(&p, FuncId(id), black_box(&args)).expect("runs"))
        });
    }
    g.finish();
}

fn iteration(c: &mut Criterion) {
    let src =
        std::fs::read_to_string(testkit::workspace_root().join("programs/bench/powloop.adasm"))
            .expect("program");
    let module = assembler::assemble(&src, "powloop.adasm").expect("assembles");
    let mut engine = Engine::new(module).expect("verifies");
    let f = engine.find("pow").expect("pow");
    let d = engine.derive(f).expect("derives");
    let p = engine.program().clone();
    let mut vm = Vm::default();
    let args = [1.0001f64.to_bits(), 1000];
    let seed = [1.0f64.to_bits()];
    let mut g = c.benchmark_group("iteration");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.bench_function("powloop_forward_1000", |b| {
        b.iter(|| {
            vm.begin(true);
            vm.call_raw(&p, d.fwd, black_box(&args)).expect("forward");
        })
    });
    g.bench_function("powloop_forward_reverse_1000", |b| {
        b.iter(|| {
            vm.begin(true);
            vm.call_raw(&p, d.fwd, black_box(&args)).expect("forward");
            vm.call_raw(&p, d.rev, black_box(&seed)).expect("reverse");
        })
    });
    g.finish();
}

fn ratio(c: &mut Criterion) {
    let root = testkit::workspace_root();
    for case in testkit::suite::cases() {
        let src = std::fs::read_to_string(root.join(testkit::suite::path(&case))).expect("program");
        let module = assembler::assemble(&src, case.file).expect("assembles");
        let mut engine = Engine::new(module).expect("verifies");
        let f = engine.find(case.func).expect("function");
        let mut out = Gradient::default();
        engine.grad_into(f, &case.args, &mut out).expect("grad");
        let mut g = c.benchmark_group(format!("ratio/{}", case.file));
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(2));
        g.sample_size(30);
        g.bench_function("primal", |b| {
            b.iter(|| black_box(engine.run(f, black_box(&case.args)).expect("run")))
        });
        g.bench_function("grad", |b| {
            b.iter(|| {
                engine
                    .grad_into(f, black_box(&case.args), &mut out)
                    .expect("grad")
            })
        });
        g.finish();
    }
}

criterion_group!(benches, stacks, dispatch, iteration, ratio);
criterion_main!(benches);
