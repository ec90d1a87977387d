//! Unit tests of the passes' internals, on hand-built reverse functions:
//! the linear formulations against their quadratic references on random
//! code, the limits (a rotation of 2 000 registers), and `fuse_tangent`,
//! whose input says where tangent values start (an argument register code
//! does not carry). What a pass does to a given function is a stage file
//! in `ad/tests/stages/` (`; stage: optimize PASS`, register code in, the
//! listing after the pass out).

use super::*;
use vm::ir::{Block, Loc};

/// A reverse-like function under construction: registers are f64
/// values `r0..rn`, those listed in `params` parameters.
struct Build {
    f: Function,
}

impl Build {
    fn new(nregs: usize, params: &[usize]) -> Build {
        let mut f = Function {
            name: "t".into(),
            params: Vec::new(),
            ret: vm::ir::RetType::Many(vec![Type::F64]),
            values: Vec::new(),
            blocks: Vec::new(),
            loc: Loc::default(),
        };
        for i in 0..nregs {
            let v = f.new_value(Type::F64, Some(format!("r{i}")));
            if params.contains(&i) {
                f.params.push(v);
            }
        }
        Build { f }
    }

    /// `br %c, then_, else_` on a new bool parameter `%c`.
    fn branch(&mut self, then_: u32, else_: u32) -> Term {
        let cond = self.f.new_value(Type::Bool, None);
        self.f.params.push(cond);
        Term::Br {
            cond,
            then_: BlockId(then_),
            else_: BlockId(else_),
        }
    }

    fn block(&mut self, name: &str, insts: Vec<Inst>, term: Term) -> &mut Build {
        self.f.blocks.push(Block {
            name: name.into(),
            phis: Vec::new(),
            insts,
            term,
            term_loc: Loc::default(),
        });
        self
    }
}

fn r(i: u32) -> ValueId {
    ValueId(i)
}

/// The opcodes of each block of `f`.
fn ops(f: &Function) -> Vec<Vec<Op>> {
    f.blocks
        .iter()
        .map(|b| b.insts.iter().map(|i| i.op).collect())
        .collect()
}

fn i(op: Op, dst: Option<u32>, args: &[u32]) -> Inst {
    Inst::new(
        op,
        dst.map(r),
        args.iter().map(|a| r(*a)).collect(),
        Loc::default(),
    )
}

/// The first formulation of [`sink_pops`]: each pop, the last first,
/// moved down past everything that neither touches its register nor
/// the stack. Quadratic; the reference for the linear one.
fn sink_pops_reference(insts: &mut Vec<Inst>) {
    for i in (0..insts.len()).rev() {
        let (Op::CommsPop, Some(t)) = (insts[i].op, insts[i].dst) else {
            continue;
        };
        let mut j = i + 1;
        while j < insts.len() {
            let x = &insts[j];
            if x.op.facts().touches_comms() || reads(x).contains(&t) || writes(x).contains(&t) {
                break;
            }
            j += 1;
        }
        if j > i + 1 {
            let pop = insts.remove(i);
            insts.insert(j - 1, pop);
        }
    }
}

#[test]
fn sinking_pops_in_one_pass_matches_moving_them_one_by_one() {
    // Random blocks over 6 registers: pops (some of one register
    // twice), reads, writes, accumulations and pushes.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as u32
    };
    for _ in 0..3000 {
        let len = 1 + next(24) as usize;
        let insts: Vec<Inst> = (0..len)
            .map(|_| {
                let (a, b, c) = (next(6), next(6), next(6));
                match next(6) {
                    0 | 1 => i(Op::CommsPop, Some(a), &[]),
                    2 => i(Op::MulF, Some(a), &[b, c]),
                    3 => i(Op::Acc, None, &[a, b]),
                    4 => i(Op::CommsPush, None, &[a]),
                    _ => i(Op::Mov, Some(a), &[b]),
                }
            })
            .collect();
        let mut want = insts.clone();
        sink_pops_reference(&mut want);
        let mut b = Build::new(6, &[]);
        b.block("entry", insts.clone(), Term::RetN(vec![]));
        let moved = sink_pops(&mut b.f);
        assert_eq!(b.f.blocks[0].insts, want, "from {insts:?}");
        assert_eq!(moved, want != insts, "from {insts:?}");
    }
}

/// A xorshift generator: `next(n)` is a number below `n`.
fn rng(mut seed: u64) -> impl FnMut(u64) -> u32 {
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as u32
    }
}

/// The first formulation of [`propagate_copies`]: the valid copies in
/// a list, searched for every read and filtered after every write.
/// Quadratic in the copies valid at once; the reference for the
/// indexed one.
fn propagate_copies_reference(f: &mut Function) -> bool {
    let mut changed = false;
    for block in &mut f.blocks {
        let mut copies: Vec<(ValueId, ValueId)> = Vec::new();
        let lookup = |copies: &[(ValueId, ValueId)], v: ValueId| {
            copies.iter().find(|(t, _)| *t == v).map(|(_, s)| *s)
        };
        for inst in &mut block.insts {
            for i in pure_reads(inst) {
                if let Some(s) = lookup(&copies, inst.args[i]) {
                    inst.args[i] = s;
                    changed = true;
                }
            }
            let ws = writes(inst);
            copies.retain(|(t, s)| !ws.contains(t) && !ws.contains(s));
            if inst.op == Op::Mov {
                if let (Some(t), Some(&s)) = (inst.dst, inst.args.first()) {
                    if t != s {
                        copies.push((t, s));
                    }
                }
            }
        }
        block.term.map_uses(|v| {
            if let Some(s) = lookup(&copies, *v) {
                *v = s;
                changed = true;
            }
        });
    }
    changed
}

#[test]
fn propagating_copies_through_an_index_matches_searching_a_list() {
    // Random functions of 1 to 3 blocks over 6 registers, copies
    // frequent (chains of them too), with every kind of write: a
    // definition, an in-out operand (`acc`), both at once (`take`).
    let mut next = rng(0x9e37_79b9_7f4a_7c15);
    let mut changed_some = 0;
    for _ in 0..3000 {
        let mut b = Build::new(6, &[0, 1]);
        let nblocks = 1 + next(3);
        for k in 0..nblocks {
            let len = next(20) as usize;
            let insts: Vec<Inst> = (0..len)
                .map(|_| {
                    let (a, x, y) = (next(6), next(6), next(6));
                    match next(10) {
                        0..=3 => i(Op::Mov, Some(a), &[x]),
                        4 => i(Op::MulF, Some(a), &[x, y]),
                        5 => i(Op::Acc, None, &[a, x]),
                        6 => i(Op::Take, Some(a), &[x]),
                        7 => i(Op::AccMul, None, &[a, x, y]),
                        8 => i(Op::Zero, Some(a), &[]),
                        _ => i(Op::CommsPop, Some(a), &[]),
                    }
                })
                .collect();
            let term = match next(4) {
                _ if k + 1 < nblocks && next(2) == 0 => Term::Jmp(BlockId(k + 1)),
                0 => Term::Br {
                    cond: r(next(6)),
                    then_: BlockId(0),
                    else_: BlockId(nblocks - 1),
                },
                1 => Term::Ret(r(next(6))),
                2 => Term::RetN((0..next(4)).map(|_| r(next(6))).collect()),
                _ => Term::Jmp(BlockId(next(nblocks as u64))),
            };
            b.block("b", insts, term);
        }
        let mut want = b.f.clone();
        let want_changed = propagate_copies_reference(&mut want);
        let from = b.f.clone();
        let changed = propagate_copies(&mut b.f);
        assert_eq!(b.f, want, "from {from:?}");
        assert_eq!(changed, want_changed, "from {from:?}");
        changed_some += usize::from(changed);
    }
    assert!(changed_some > 1000, "{changed_some}");
}

/// The first formulation of [`thread_empty_blocks`]: each block's
/// chain of empty blocks followed step by step, at most `n` steps.
/// Quadratic in the length of a chain; the reference for the linear
/// one.
fn thread_empty_blocks_reference(f: &mut Function) {
    let n = f.blocks.len();
    let forward = |f: &Function, mut b: usize| {
        for _ in 0..n {
            let block = &f.blocks[b];
            match block.term {
                Term::Jmp(t) if b != 0 && block.insts.is_empty() && t.index() != b => b = t.index(),
                _ => break,
            }
        }
        b
    };
    let targets: Vec<usize> = (0..n).map(|b| forward(f, b)).collect();
    let remap = |t: &mut BlockId| *t = BlockId(targets[t.index()] as u32);
    for block in &mut f.blocks {
        block.term.map_targets(remap);
    }
}

#[test]
fn threading_empty_blocks_in_one_walk_matches_following_each_chain() {
    // Random graphs of 1 to 12 blocks, most of them empty and ending
    // in a jump: chains, self-loops, cycles of empty blocks (entered
    // from a chain or not), jumps to the entry.
    let mut next = rng(0x2545_f491_4f6c_dd1d);
    let (mut cycles, mut moved) = (0, 0);
    for _ in 0..10_000 {
        let n = 1 + next(12);
        let mut b = Build::new(1, &[0]);
        for _ in 0..n {
            let insts = if next(4) == 0 {
                vec![i(Op::NegF, Some(0), &[0])]
            } else {
                vec![]
            };
            let term = match next(8) {
                0 => Term::RetN(vec![r(0)]),
                1 => Term::Br {
                    cond: r(0),
                    then_: BlockId(next(n as u64)),
                    else_: BlockId(next(n as u64)),
                },
                _ => Term::Jmp(BlockId(next(n as u64))),
            };
            b.block("b", insts, term);
        }
        let mut want = b.f.clone();
        thread_empty_blocks_reference(&mut want);
        let from = b.f.clone();
        thread_empty_blocks(&mut b.f);
        assert_eq!(b.f, want, "from {from:?}");
        moved += usize::from(want != from);
        // On a cycle of two or more empty blocks (or on the way into
        // one), a block's target still jumps on; elsewhere it ends
        // the chain.
        let step = |f: &Function, k: usize| match f.blocks[k].term {
            Term::Jmp(t) if k != 0 && f.blocks[k].insts.is_empty() && t.index() != k => {
                Some(t.index())
            }
            _ => None,
        };
        let on_cycle =
            (0..n as usize).any(|k| step(&want, k).is_some_and(|t| step(&want, t).is_some()));
        cycles += usize::from(on_cycle);
    }
    assert!(moved > 5000 && cycles > 400, "{moved} {cycles}");
}

/// A loop rotating `N` registers through `take`s passes "not zero" on by
/// one register per trip: the analysis gives up after a few trips through
/// the function instead of taking `N` of them, and giving up must be safe.
/// `r(N/2)` is zero on the first trip only, so its `acc` stays an `acc`.
#[test]
fn known_zeros_give_up_safely_on_a_long_rotation() {
    const N: u32 = 2_000;
    // r0 parameter, r1..=rN rotated, r(N+1) the rotation's temporary.
    let mut b = Build::new(N as usize + 2, &[0]);
    let mut body = vec![
        i(Op::Acc, None, &[N / 2, 0]),
        i(Op::Take, Some(N + 1), &[1]),
    ];
    for k in 1..N {
        body.push(i(Op::Take, Some(k), &[k + 1]));
    }
    body.push(i(Op::Take, Some(N), &[N + 1]));
    let back = b.branch(1, 2);
    b.block(
        "entry",
        vec![i(Op::Acc, None, &[1, 0])],
        Term::Jmp(BlockId(1)),
    )
    .block("loop", body, back)
    .block("exit", vec![], Term::RetN(vec![r(1)]));
    assert!(known_zero(&mut b.f), "the entry block's acc is a write");
    assert_eq!(b.f.blocks[0].insts[0].op, Op::Mov);
    assert_eq!(
        b.f.blocks[1].insts[0].op,
        Op::Acc,
        "not zero on later trips"
    );
}

/// [`fuse_tangent`]: a tangent product read only by a tangent sum goes into
/// it (`add.mul.z`), a product's two-term tangent summed becomes two
/// `add.mul.z`; a sum of primal values (before `first`), a product read
/// twice and a product from another block are left alone, and so is code
/// that is not SSA.
#[test]
fn tangent_products_go_into_their_sums() {
    // r0..r3 parameters; r4.. tangent values (first = 4).
    let mut b = Build::new(12, &[0, 1, 2, 3]);
    b.block(
        "entry",
        vec![
            i(Op::MulZ, Some(4), &[0, 1]),
            i(Op::AddF, Some(5), &[2, 4]),
            i(Op::MulZ, Some(6), &[0, 1]),
            i(Op::AddMulZ, Some(7), &[6, 2, 3]),
            i(Op::AddF, Some(8), &[7, 5]),
        ],
        Term::RetN(vec![r(8)]),
    );
    assert!(fuse_tangent(&mut b.f, 4));
    assert_eq!(ops(&b.f), [[Op::AddMulZ, Op::AddMulZ, Op::AddMulZ]]);
    let insts = &b.f.blocks[0].insts;
    // r5 = r2 + r0⊙r1; then (r5 + r0⊙r1) + r2⊙r3 into r8.
    assert_eq!(insts[0].dst, Some(r(5)));
    assert_eq!(insts[0].args, [r(2), r(0), r(1)]);
    assert_eq!(insts[1].args, [r(5), r(0), r(1)]);
    assert_eq!(insts[2].dst, Some(r(8)));
    assert_eq!(insts[2].args[1..], [r(2), r(3)]);
    assert_eq!(insts[2].args[0], insts[1].dst.expect("a value"));

    // Primal sums (values before `first`), a product read twice, a
    // product defined in another block: unchanged.
    let mut b = Build::new(12, &[0, 1]);
    b.block(
        "entry",
        vec![
            i(Op::MulZ, Some(2), &[0, 1]),
            i(Op::AddF, Some(3), &[0, 2]),
            i(Op::MulZ, Some(4), &[0, 1]),
            i(Op::AddF, Some(5), &[4, 4]),
            i(Op::MulZ, Some(6), &[0, 1]),
        ],
        Term::Jmp(BlockId(1)),
    );
    b.block(
        "next",
        vec![i(Op::AddF, Some(7), &[0, 6])],
        Term::RetN(vec![r(3), r(5), r(7)]),
    );
    assert!(!fuse_tangent(&mut b.f, 4));
    assert_eq!(
        ops(&b.f),
        [
            vec![Op::MulZ, Op::AddF, Op::MulZ, Op::AddF, Op::MulZ],
            vec![Op::AddF]
        ]
    );

    // Not SSA (r5 written twice): left alone.
    let mut b = Build::new(8, &[0, 1, 2]);
    b.block(
        "entry",
        vec![
            i(Op::MulZ, Some(4), &[0, 1]),
            i(Op::AddF, Some(5), &[2, 4]),
            i(Op::AddF, Some(5), &[5, 2]),
        ],
        Term::RetN(vec![r(5)]),
    );
    assert!(!fuse_tangent(&mut b.f, 3));
}
