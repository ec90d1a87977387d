//! Unit tests of the lowering's parts.

use super::*;

/// A lowerer over an empty function with `types` as its registers.
fn lowerer<'f>(f: &'f ir::Function, types: &[Type]) -> Lowerer<'f> {
    Lowerer {
        f,
        reg: Vec::new(),
        reg_types: types.to_vec(),
        reg_names: vec![String::new(); types.len()],
        scratch: Vec::new(),
        code: Vec::new(),
        locs: Vec::new(),
        fixups: Vec::new(),
        sites: Vec::new(),
        tables: Vec::new(),
        table_blocks: Vec::new(),
        lists: Vec::new(),
        uses: &[],
        block_start: 0,
        reached: &[],
        marks: Vec::new(),
        budget: COPY_BUDGET,
        preds: Vec::new(),
        neg_steps: Vec::new(),
        join_phis: Default::default(),
        select_once: None,
    }
}

fn empty() -> ir::Function {
    ir::Function {
        name: "t".into(),
        params: Vec::new(),
        ret: ir::RetType::One(Type::F64),
        values: Vec::new(),
        blocks: Vec::new(),
        loc: Loc::default(),
    }
}

/// Run the emitted moves on `regs`.
fn simulate(code: &[Instr], regs: &mut Vec<u64>) {
    for i in code {
        assert_eq!(i.op, Op::Mov);
        let v = regs[i.r1 as usize];
        if regs.len() <= i.r0 as usize {
            regs.resize(i.r0 as usize + 1, 0);
        }
        regs[i.r0 as usize] = v;
    }
}

#[test]
fn a_swap_goes_through_one_scratch_register() {
    let f = empty();
    let mut l = lowerer(&f, &[Type::F64, Type::F64]);
    l.copies(vec![(0, 1), (1, 0)], Loc::default());
    assert_eq!(l.code.len(), 3);
    assert_eq!(l.reg_types, vec![Type::F64; 3], "one f64 scratch");
    let mut regs = vec![10, 20];
    simulate(&l.code, &mut regs);
    assert_eq!(&regs[..2], &[20, 10]);
}

#[test]
fn chains_need_no_scratch_and_self_copies_vanish() {
    let f = empty();
    let mut l = lowerer(&f, &[Type::I64; 4]);
    // a <- b, b <- c, d <- d
    l.copies(vec![(0, 1), (1, 2), (3, 3)], Loc::default());
    assert_eq!(l.code.len(), 2);
    assert_eq!(l.reg_types.len(), 4, "no scratch");
    let mut regs = vec![1, 2, 3, 4];
    simulate(&l.code, &mut regs);
    assert_eq!(regs, vec![2, 3, 3, 4]);
}

#[test]
fn scratch_registers_are_per_type_and_reused() {
    let f = empty();
    let mut l = lowerer(&f, &[Type::F64, Type::F64, Type::I64, Type::I64]);
    l.copies(vec![(0, 1), (1, 0), (2, 3), (3, 2)], Loc::default());
    l.copies(vec![(0, 1), (1, 0)], Loc::default());
    assert_eq!(l.reg_types.len(), 6, "one f64 and one i64 scratch");
    let mut regs = vec![1, 2, 3, 4];
    simulate(&l.code, &mut regs);
    assert_eq!(&regs[..4], &[1, 2, 4, 3]);
}

/// Parallel copies of every shape (chains, fan-out, cycles of one and two
/// types, copies onto themselves) from a fixed generator: the indexed
/// sequentialization of many copies emits exactly the code of the search
/// over the list, and that code performs the parallel assignment.
#[test]
fn many_copies_emit_what_the_list_search_emits() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % m as u64) as usize
    };
    let f = empty();
    for case in 0..300 {
        let nregs = 2 + next(80);
        let types: Vec<Type> = (0..nregs)
            .map(|r| if r % 3 == 0 { Type::I64 } else { Type::F64 })
            .collect();
        // Distinct destinations, sources of the same type.
        let mut dests: Vec<usize> = (0..nregs).collect();
        for i in (1..nregs).rev() {
            dests.swap(i, next(i + 1));
        }
        dests.truncate(1 + next(nregs));
        let pending: Vec<(Reg, Reg)> = dests
            .iter()
            .map(|&d| {
                let same: Vec<usize> = (0..nregs).filter(|&s| types[s] == types[d]).collect();
                (d as Reg, same[next(same.len())] as Reg)
            })
            .collect();
        let mut few = lowerer(&f, &types);
        let mut kept = pending.clone();
        kept.retain(|(d, s)| d != s);
        few.few_copies(kept.clone(), Loc::default());
        let mut many = lowerer(&f, &types);
        many.many_copies(kept, Loc::default());
        assert_eq!(few.code, many.code, "case {case}: {pending:?}");
        assert_eq!(few.reg_types, many.reg_types, "case {case}");
        let start: Vec<u64> = (0..nregs as u64).map(|r| 100 + r).collect();
        let mut regs = start.clone();
        simulate(&many.code, &mut regs);
        for &(d, s) in &pending {
            assert_eq!(
                regs[d as usize], start[s as usize],
                "case {case}: {pending:?}"
            );
        }
    }
}
