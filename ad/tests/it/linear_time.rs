//! Inputs on which a pass of the reverse clean-up (`ad::optimize`) that
//! is quadratic in their size would take far too long (hours in a debug
//! build), while the linear passes take well under a second each. Nothing
//! is timed: a regression shows as a test that does not finish.
//!
//! Found by a probe of the binary (docs/reliability.md): a straight-line
//! function of N copies of one register, and a chain of N empty blocks,
//! took seconds to differentiate at N = 20 000 and 100 000.

use ad::optimize;
use vm::ir::{Block, BlockId, Function, Inst, Loc, RetType, Term, ValueId};
use vm::op::Op;
use vm::Type;

fn function(nregs: usize, nparams: usize) -> Function {
    let mut f = Function {
        name: "t".into(),
        params: Vec::new(),
        ret: RetType::Many(vec![Type::F64]),
        values: Vec::new(),
        blocks: Vec::new(),
        loc: Loc::default(),
    };
    for i in 0..nregs {
        let v = f.new_value(Type::F64, None);
        if i < nparams {
            f.params.push(v);
        }
    }
    f
}

fn block(insts: Vec<Inst>, term: Term) -> Block {
    Block {
        name: String::new(),
        phis: Vec::new(),
        insts,
        term,
        term_loc: Loc::default(),
    }
}

fn inst(op: Op, dst: ValueId, args: &[ValueId]) -> Inst {
    Inst::new(op, Some(dst), args.to_vec(), Loc::default())
}

/// `%c_i = copy %x; %s_i = add %s_{i-1}, %c_i` for i = 1..N: N copies of
/// `%x` valid at once. A list of the valid copies, searched at each read,
/// takes about N² / 2 steps (2·10¹⁰ here).
#[test]
fn propagating_200_000_copies_of_one_register() {
    const N: usize = 200_000;
    // r0 = x, r1 = s_0, then c_i = r(2i), s_i = r(2i + 1).
    let mut f = function(2 * N + 2, 1);
    let r = |i: usize| ValueId(i as u32);
    let mut insts = vec![inst(Op::Mov, r(1), &[r(0)])];
    for i in 1..=N {
        insts.push(inst(Op::Mov, r(2 * i), &[r(0)]));
        insts.push(inst(Op::AddF, r(2 * i + 1), &[r(2 * i - 1), r(2 * i)]));
    }
    f.blocks
        .push(block(insts, Term::RetN(vec![r(2 * N + 1), r(2 * N)])));
    assert!(optimize::propagate_copies(&mut f));
    let insts = &f.blocks[0].insts;
    // Every read of a copy reads `%x`; `%s_1` reads `%x` twice.
    assert_eq!(insts[2].args, [r(0), r(0)]);
    for i in 2..=N {
        assert_eq!(insts[2 * i].args, [r(2 * i - 1), r(0)], "s_{i}");
    }
    assert_eq!(f.blocks[0].term, Term::RetN(vec![r(2 * N + 1), r(0)]));
}

/// `entry: jmp b0`, `bI: jmp bI+1` for I < N, `bN: %y = neg %x; ret %y`.
/// Following each block's chain to its end takes about N² / 2 steps
/// (2·10¹⁰ here).
#[test]
fn threading_a_chain_of_200_000_empty_blocks() {
    const N: usize = 200_000;
    let mut f = function(2, 1);
    let (x, y) = (ValueId(0), ValueId(1));
    f.blocks.push(block(vec![], Term::Jmp(BlockId(1))));
    for b in 1..=N {
        f.blocks
            .push(block(vec![], Term::Jmp(BlockId(b as u32 + 1))));
    }
    f.blocks
        .push(block(vec![inst(Op::NegF, y, &[x])], Term::RetN(vec![y])));
    optimize::merge_blocks(&mut f);
    assert_eq!(f.blocks.len(), 1);
    assert_eq!(f.blocks[0].insts, [inst(Op::NegF, y, &[x])]);
    assert_eq!(f.blocks[0].term, Term::RetN(vec![y]));
}

/// A cycle of N empty blocks entered from a chain of N more: each block
/// of the chain and of the cycle goes `n` steps (`n` = 2N + 2 blocks), so
/// round the cycle; about n² steps in all when each walk is taken step by
/// step.
#[test]
fn threading_a_cycle_of_100_000_empty_blocks() {
    const N: usize = 100_000;
    let mut f = function(1, 1);
    let x = ValueId(0);
    // entry: br %x, exit, chain_0; chain_i = 1 + i; cycle_i = 1 + N + i.
    let n = 2 * N + 2;
    f.blocks.push(block(
        vec![],
        Term::Br {
            cond: x,
            then_: BlockId(n as u32 - 1),
            else_: BlockId(1),
        },
    ));
    for b in 1..=2 * N {
        let t = if b == 2 * N { N + 1 } else { b + 1 };
        f.blocks.push(block(vec![], Term::Jmp(BlockId(t as u32))));
    }
    f.blocks.push(block(vec![], Term::RetN(vec![x])));
    optimize::merge_blocks(&mut f);
    // The chain is jumped over; `n` steps from anywhere end on the cycle,
    // each cycle block sent 2 blocks on (n = 2 mod N). The entry reaches
    // cycle_2, cycle_4, ..., cycle_0, which merge into one block that
    // jumps to itself.
    assert_eq!(f.blocks.len(), 3);
    let Term::Br { then_, else_, .. } = f.blocks[0].term else {
        panic!("{:?}", f.blocks[0].term);
    };
    let (exit, cycle) = (&f.blocks[then_.index()], &f.blocks[else_.index()]);
    assert_eq!(exit.term, Term::RetN(vec![x]));
    assert!(cycle.insts.is_empty());
    assert_eq!(cycle.term, Term::Jmp(else_));
}

/// `%c_i = copy %s_i; %s_i' = mul %s_i, 2.0; ...` in one block, N pairs:
/// the copies a block of N phi moves leaves. Write sinking looked, for each
/// copy, at the rest of the block (N² / 2 steps, 2·10¹⁰ here); it now looks
/// a bounded window ahead.
#[test]
fn sinking_writes_past_200_000_copies_in_one_block() {
    const N: usize = 200_000;
    let mut f = function(2 * N + 1, 1);
    let r = |i: usize| ValueId(i as u32);
    let two = f.new_const(Type::F64, 2.0f64.to_bits());
    let mut insts = Vec::new();
    for i in 0..N {
        // c_i = copy s; s = s * 2 (written in place, as reverse code does).
        insts.push(inst(Op::Mov, r(i + 1), &[r(0)]));
        insts.push(inst(Op::MulF, r(0), &[r(0), two]));
    }
    let sum = (1..=N).fold(r(0), |_, i| r(i));
    f.blocks.push(block(insts, Term::RetN(vec![sum])));
    optimize::sink_writes(&mut f);
    assert_eq!(f.blocks[0].insts.len(), 2 * N);
}

/// A function whose entry block overwrites one array element 100 000 times:
/// each `aset` gives the reverse code an entry value (the element it
/// overwrote), and looking each up in the list of those already there took
/// N² / 2 steps (5·10⁹ here). Derivation now ends quickly, refused as too
/// large for a frame (it needs more registers than a frame has).
#[test]
fn deriving_100_000_overwrites_in_one_block() {
    const N: usize = 100_000;
    let mut src = String::from("fn @g(%x: f64) -> f64 {\nentry:\n    %a = anew 4\n");
    for i in 0..N {
        src.push_str(&format!("    aset %a, {}, %x\n", i % 4));
    }
    src.push_str("    %r = aget %a, 0\n    ret %r\n}\n");
    let module = assembler::assemble(&src, "asets.adasm").expect("assembles");
    let mut engine = ad::Engine::new(module).expect("verifies");
    let g = engine.find("g").expect("defined");
    match engine.derive(g) {
        Err(ad::AdError::TooLarge { .. }) => {}
        other => panic!("expected a too-large refusal, got {other:?}"),
    }
}
