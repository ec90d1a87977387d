//! AD benchmarks: `cargo bench -p ad`.
//!
//! * `stacks`: ns per `comms.push` + `comms.pop` pair and per `blk.push` +
//!   `blk.pop` pair, from loops of 8 pushes or pops per iteration, minus the
//!   same loop doing 8 register copies.
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
const ITERS: i64 = 1000;

/// `for i < n { body x 8 }; ret 0.0` where `body` is one instruction kind.
fn loop_fn(name: &str, op: Op) -> Function {
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
    for _ in 0..PER_ITER {
        body.push(match op {
            Op::CommsPush => Inst::new(Op::CommsPush, None, vec![x], l),
            Op::CommsPop => Inst::new(Op::CommsPop, Some(y), vec![], l),
            Op::BlkPush => {
                let mut p = Inst::new(Op::BlkPush, None, vec![], l);
                p.imm = 0;
                p
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

criterion_group!(benches, stacks, ratio);
criterion_main!(benches);
