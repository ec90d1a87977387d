//! Blocks, edges and terminators: laying out a block (with tail duplication of
//! small joins), the copies of phis on edges (cycles through a scratch
//! register), conditional branches (threaded into compare-and-branch) and
//! returns.

use super::*;

/// How much code may be copied in place of one `jmp` (see
/// [`Lowerer::block`]): a block costs its instructions plus one for its
/// terminator.
pub(super) const COPY_BUDGET: usize = 5;

/// Above this many copies on one edge, [`Lowerer::copies`] keeps an index
/// of their registers instead of searching the list for each copy (which
/// takes time cubic in their number).
const SMALL_COPIES: usize = 16;

impl Lowerer<'_> {
    /// Lower block `here` at the end of the code, with its mark; `next` is
    /// the block whose code follows (fall-through), if any.
    ///
    /// Tail duplication: a `jmp` to a small block that does not follow
    /// (the join of an if/else, from the arm laid out first; the exit of a
    /// reverse loop body) is replaced by a copy of that block's code and
    /// terminator, which saves a dispatch on that path. The copy's own
    /// `jmp`s may copy further while the budget lasts ([`COPY_BUDGET`] in
    /// all: every copy spends some, so cycles of small blocks end). Each
    /// copy gets a mark with its block's name, so a trap in it names the
    /// same block as in the original; jumps and tables still go to the
    /// original. Nothing but that fall-through reaches a copy (`copy`), so
    /// it continues the straight-line run of the block that jumped to it:
    /// the look-back peepholes (`fuse`, `mul_add`, `take_step`) see across
    /// its start, so a counter stepped at the end of a loop body fuses with
    /// the copied header's compare-and-branch. So does a block that no jump
    /// reaches (`reached`, from the first pass), entered only by falling
    /// through. The peepholes only fuse with arithmetic, loads and pushes,
    /// never with a branch, so a run that holds the previous block's
    /// conditional jump is safe too.
    pub(super) fn block(
        &mut self,
        here: BlockId,
        next: Option<BlockId>,
        copy: bool,
    ) -> Result<(), LowerError> {
        let b = &self.f.blocks[here.index()];
        if !copy && self.reached.get(here.index()).copied().unwrap_or(true) {
            self.block_start = self.code.len();
        }
        self.marks.push(BlockMark {
            name: b.name.clone(),
            start: self.code.len() as u32,
        });
        for (inst, push) in b.insts.iter().zip(reservations(&b.insts)) {
            self.inst(inst, &b.name)?;
            if let Some(last) = self.code.last_mut() {
                match push {
                    Push::Plain => {}
                    Push::Reserve(n) => {
                        last.op = Op::CommsReserve;
                        last.x = n;
                    }
                    Push::Reserved => last.op = Op::CommsPushR,
                }
            }
        }
        self.term(here, b, next)
    }

    /// Go to `then_` if `test` holds, else to `else_`, with no copies on
    /// either edge: one conditional jump, falling through to `next` if
    /// that is one of the two; else the conditional jump goes to the
    /// earlier block (a loop's body, from a copy of its latch) and a `jmp`
    /// to the other.
    pub(super) fn two_way(
        &mut self,
        test: Test,
        then_: BlockId,
        else_: BlockId,
        next: BlockId,
        loc: Loc,
    ) {
        if then_ == next || (else_ != next && else_.0 < then_.0) {
            self.cond_jump(test, true, Fixup::Block(else_), loc);
            if then_ != next {
                self.jump(Op::Jmp, 0, Fixup::Block(then_), loc);
            }
        } else {
            self.cond_jump(test, false, Fixup::Block(then_), loc);
            if else_ != next {
                self.jump(Op::Jmp, 0, Fixup::Block(else_), loc);
            }
        }
    }

    /// What copying block `to` in place of a `jmp` from `here` costs, if
    /// it may: it is a join (a block with one predecessor would only move,
    /// leaving its original dead), not `here` itself, fits the budget left,
    /// and has no call (a copy would need its own call site) and no
    /// `blk.pop`.
    pub(super) fn copy_cost(&self, here: BlockId, to: BlockId) -> Option<usize> {
        let b = &self.f.blocks[to.index()];
        let cost = b.insts.len() + 1;
        let plain = !b
            .insts
            .iter()
            .any(|i| matches!(i.op, Op::Call | Op::CallAcc | Op::CallN))
            && !matches!(b.term, Term::BlkPop(_));
        let join = self.preds.get(to.index()).is_some_and(|&n| n >= 2);
        (join && to != here && cost <= self.budget && plain).then_some(cost)
    }

    pub(super) fn r(&self, v: ValueId) -> Reg {
        self.reg.get(v.index()).copied().unwrap_or(0)
    }

    pub(super) fn emit(&mut self, i: Instr, loc: Loc) -> usize {
        self.code.push(i);
        self.locs.push(loc);
        self.code.len() - 1
    }

    pub(super) fn bad(&self, block: &str, detail: String) -> LowerError {
        LowerError::BadInstruction {
            func: self.f.name.clone(),
            block: block.to_string(),
            detail,
        }
    }

    /// The parallel copies of the edge `from -> to`, as (dst, src) registers.
    pub(super) fn edge_copies(
        &self,
        from: BlockId,
        to: BlockId,
    ) -> Result<Vec<(Reg, Reg)>, LowerError> {
        let target = &self.f.blocks[to.index()];
        let mut copies = Vec::with_capacity(target.phis.len());
        let index = self.join_phis.get(&to);
        for (k, phi) in target.phis.iter().enumerate() {
            let v = match index.and_then(|maps| maps.get(k)) {
                Some(m) => m.get(&from).copied(),
                None => phi
                    .incoming
                    .iter()
                    .find(|(l, _)| *l == from)
                    .map(|(_, v)| *v),
            };
            let v = v.ok_or_else(|| LowerError::MissingPhiEdge {
                func: self.f.name.clone(),
                block: target.name.clone(),
            })?;
            copies.push((self.r(phi.dst), self.r(v)));
        }
        Ok(copies)
    }

    pub(super) fn scratch(&mut self, ty: Type) -> Reg {
        if let Some((_, r)) = self.scratch.iter().find(|(t, _)| *t == ty) {
            return *r;
        }
        let r = self.reg_types.len() as Reg;
        self.reg_types.push(ty);
        self.reg_names.push(String::new());
        self.scratch.push((ty, r));
        r
    }

    /// Emit a parallel copy as a sequence of moves.
    pub(super) fn copies(&mut self, mut pending: Vec<(Reg, Reg)>, loc: Loc) {
        pending.retain(|(d, s)| d != s);
        if pending.len() > SMALL_COPIES {
            self.many_copies(pending, loc);
        } else {
            self.few_copies(pending, loc);
        }
    }

    /// [`Lowerer::copies`] by searching the list (for a few copies).
    pub(super) fn few_copies(&mut self, mut pending: Vec<(Reg, Reg)>, loc: Loc) {
        while !pending.is_empty() {
            // A copy whose destination no other copy still reads can go now.
            if let Some(i) = (0..pending.len()).find(|&i| {
                let d = pending[i].0;
                !pending.iter().any(|(_, s)| *s == d)
            }) {
                let (d, s) = pending.remove(i);
                self.emit(Instr::new(Op::Mov, d, s, 0, 0), loc);
                continue;
            }
            // Only cycles remain: save one destination's old value and let
            // its readers read the saved copy.
            let d = pending[0].0;
            let t = self.scratch(self.reg_types[d as usize]);
            self.emit(Instr::new(Op::Mov, t, d, 0, 0), loc);
            for (_, s) in &mut pending {
                if *s == d {
                    *s = t;
                }
            }
        }
    }

    /// [`Lowerer::copies`] for many copies (the phis of a loop header with
    /// tens of thousands of them), in time linear in their number, emitting
    /// the same code: the copy of smallest index whose destination no copy
    /// still reads goes first; when there is none, the first copy left
    /// breaks its cycle through the scratch register.
    pub(super) fn many_copies(&mut self, mut pending: Vec<(Reg, Reg)>, loc: Loc) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let n = pending.len();
        // Copies not yet emitted that read each register, the copy that
        // writes each register (destinations are distinct).
        let mut readers: hashbrown::HashMap<Reg, Vec<usize>> = hashbrown::HashMap::new();
        let mut writer: hashbrown::HashMap<Reg, usize> = hashbrown::HashMap::new();
        for (i, &(d, s)) in pending.iter().enumerate() {
            readers.entry(s).or_default().push(i);
            writer.insert(d, i);
        }
        let mut reads: hashbrown::HashMap<Reg, usize> =
            readers.iter().map(|(r, v)| (*r, v.len())).collect();
        let mut ready: BinaryHeap<Reverse<usize>> = (0..n)
            .filter(|&i| reads.get(&pending[i].0).is_none_or(|&c| c == 0))
            .map(Reverse)
            .collect();
        let mut done = vec![false; n];
        let mut first_left = 0;
        loop {
            while let Some(Reverse(i)) = ready.pop() {
                if done[i] {
                    continue;
                }
                done[i] = true;
                let (d, s) = pending[i];
                self.emit(Instr::new(Op::Mov, d, s, 0, 0), loc);
                if let Some(c) = reads.get_mut(&s) {
                    *c -= 1;
                    if *c == 0 {
                        if let Some(&j) = writer.get(&s) {
                            if !done[j] {
                                ready.push(Reverse(j));
                            }
                        }
                    }
                }
            }
            while first_left < n && done[first_left] {
                first_left += 1;
            }
            if first_left == n {
                return;
            }
            // Only cycles remain: save the first copy's destination and let
            // its readers read the saved copy.
            let d = pending[first_left].0;
            let t = self.scratch(self.reg_types[d as usize]);
            self.emit(Instr::new(Op::Mov, t, d, 0, 0), loc);
            let moved: Vec<usize> = readers
                .remove(&d)
                .unwrap_or_default()
                .into_iter()
                .filter(|&k| !done[k])
                .collect();
            for &k in &moved {
                pending[k].1 = t;
            }
            *reads.entry(t).or_insert(0) += moved.len();
            readers.entry(t).or_default().extend(moved);
            reads.insert(d, 0);
            ready.push(Reverse(first_left));
        }
    }

    /// How a `br` on `cond` at the end of block `b` tests it: as a fused
    /// compare-and-branch when `cond` is computed by the block's last
    /// instruction, a comparison, and used nowhere else (the comparison,
    /// already emitted, is taken back), else as a bool register.
    pub(super) fn branch_test(&mut self, b: &ir::Block, cond: ValueId) -> Test {
        let fusable = b.insts.last().filter(|last| {
            last.dst == Some(cond)
                && self.uses.get(cond.index()) == Some(&1)
                && last.args.len() == 2
        });
        if let Some(last) = fusable {
            if let Some((cc, fused)) = Cond::of(last.op) {
                let (ra, rb) = (self.r(last.args[0]), self.r(last.args[1]));
                self.code.pop();
                self.locs.pop();
                return Test::Fused(fused, cc, ra, rb);
            }
        }
        Test::Reg(self.r(cond))
    }

    /// If block `to` is nothing but a `blk.pop`, its targets.
    pub(super) fn pop_only(&self, to: BlockId) -> Option<Vec<BlockId>> {
        let b = &self.f.blocks[to.index()];
        match &b.term {
            Term::BlkPop(targets) if b.insts.is_empty() && b.phis.is_empty() => {
                Some(targets.clone())
            }
            _ => None,
        }
    }

    /// If block `to` is a single comparison feeding its `br`, with no copies
    /// on either outgoing edge, its fused test and targets.
    pub(super) fn threadable(
        &self,
        to: BlockId,
    ) -> Result<Option<(Test, BlockId, BlockId)>, LowerError> {
        let b = &self.f.blocks[to.index()];
        let Term::Br { cond, then_, else_ } = &b.term else {
            return Ok(None);
        };
        let [cmp] = b.insts.as_slice() else {
            return Ok(None);
        };
        if cmp.dst != Some(*cond) || self.uses.get(cond.index()) != Some(&1) || cmp.args.len() != 2
        {
            return Ok(None);
        }
        let Some((cc, fused)) = Cond::of(cmp.op) else {
            return Ok(None);
        };
        let trivial = |c: Vec<(Reg, Reg)>| c.iter().all(|(d, s)| d == s);
        if !trivial(self.edge_copies(to, *then_)?) || !trivial(self.edge_copies(to, *else_)?) {
            return Ok(None);
        }
        let test = Test::Fused(fused, cc, self.r(cmp.args[0]), self.r(cmp.args[1]));
        Ok(Some((test, *then_, *else_)))
    }

    /// Jump to `fix` when the test holds (or, with `negate`, fails).
    /// Returns the jump's pc: fusing a counter's step into the branch
    /// (`take_step`) removes the step, so it need not be the code's length
    /// before the call.
    pub(super) fn cond_jump(&mut self, test: Test, negate: bool, fix: Fixup, loc: Loc) -> usize {
        let ins = match test {
            Test::Reg(c) => Instr::new(if negate { Op::JmpIfNot } else { Op::JmpIf }, c, 0, 0, 0),
            Test::Fused(fused, cc, a, b) => match self.take_step(fused, cc, a, b, negate) {
                Some(i) => i,
                None => Instr::new(Op::fused_branch(fused, cc, negate), a, b, 0, 0),
            },
        };
        let pc = self.emit(ins, loc);
        self.fixups.push((pc, fix));
        pc
    }

    pub(super) fn jump(&mut self, op: Op, cond: Reg, fix: Fixup, loc: Loc) {
        let pc = self.emit(Instr::new(op, cond, 0, 0, 0), loc);
        self.fixups.push((pc, fix));
    }

    pub(super) fn term(
        &mut self,
        here: BlockId,
        b: &ir::Block,
        next: Option<BlockId>,
    ) -> Result<(), LowerError> {
        let loc = b.term_loc;
        let fall = next;
        // A block id no block has, where nothing falls through.
        let next = next.unwrap_or(BlockId(u32::MAX));
        match &b.term {
            Term::Jmp(to) => {
                let copies = self.edge_copies(here, *to)?;
                self.copies(copies, loc);
                if *to == next {
                    return Ok(());
                }
                if let Some(targets) = self.pop_only(*to) {
                    // `to` only pops a block id and dispatches (a reverse
                    // loop header): dispatch here.
                    self.tables.push(Vec::new());
                    self.table_blocks.push(targets);
                    let x = self.tables.len() as u32 - 1;
                    self.emit(Instr::new(Op::BlkPop, 0, 0, 0, x), loc);
                } else if let Some((test, then_, else_)) = self.threadable(*to)? {
                    // Jump threading: `to` only tests and branches (a loop
                    // header), so test here and go straight to its targets;
                    // a loop then costs one jump per iteration, not two.
                    self.two_way(test, then_, else_, next, loc);
                } else if let Some(cost) = self.copy_cost(here, *to) {
                    // The copy is followed by what follows `here`.
                    self.budget -= cost;
                    let copied = self.block(*to, fall, true);
                    self.budget += cost;
                    copied?;
                } else {
                    self.jump(Op::Jmp, 0, Fixup::Block(*to), loc);
                }
            }
            Term::Br { cond, then_, else_ } => {
                let ct = self.edge_copies(here, *then_)?;
                let ce = self.edge_copies(here, *else_)?;
                let ct_trivial = ct.iter().all(|(d, s)| d == s);
                let ce_trivial = ce.iter().all(|(d, s)| d == s);
                let test = self.branch_test(b, *cond);
                if ct_trivial && ce_trivial {
                    self.two_way(test, *then_, *else_, next, loc);
                } else if ct_trivial {
                    // jump-if -> then; [else copies]; jmp else
                    self.cond_jump(test, false, Fixup::Block(*then_), loc);
                    self.copies(ce, loc);
                    if *else_ != next {
                        self.jump(Op::Jmp, 0, Fixup::Block(*else_), loc);
                    }
                } else if ce_trivial {
                    self.cond_jump(test, true, Fixup::Block(*else_), loc);
                    self.copies(ct, loc);
                    if *then_ != next {
                        self.jump(Op::Jmp, 0, Fixup::Block(*then_), loc);
                    }
                } else {
                    let skip = self.cond_jump(test, true, Fixup::Pc(0), loc);
                    self.copies(ct, loc);
                    self.jump(Op::Jmp, 0, Fixup::Block(*then_), loc);
                    let else_pc = self.code.len();
                    if let Some(f) = self.fixups.iter_mut().find(|(pc, _)| *pc == skip) {
                        f.1 = Fixup::Pc(else_pc);
                    }
                    self.copies(ce, loc);
                    if *else_ != next {
                        self.jump(Op::Jmp, 0, Fixup::Block(*else_), loc);
                    }
                }
            }
            Term::Ret(v) => {
                let r = self.r(*v);
                self.emit(Instr::new(Op::Ret, r, 0, 0, 0), loc);
            }
            Term::RetN(vs) => {
                let list = vs.iter().map(|v| self.r(*v)).collect();
                self.lists.push(list);
                let x = self.lists.len() as u32 - 1;
                self.emit(Instr::new(Op::RetN, 0, 0, 0, x), loc);
            }
            Term::BlkPop(targets) => {
                for t in targets {
                    if !self.f.blocks[t.index()].phis.is_empty() {
                        return Err(LowerError::PhiOnDispatchEdge {
                            func: self.f.name.clone(),
                            block: self.f.blocks[t.index()].name.clone(),
                        });
                    }
                }
                self.tables.push(Vec::new());
                self.table_blocks.push(targets.clone());
                let x = self.tables.len() as u32 - 1;
                self.emit(Instr::new(Op::BlkPop, 0, 0, 0, x), loc);
            }
        }
        Ok(())
    }
}
