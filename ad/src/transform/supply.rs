//! How the reverse code gets each forward value a fragment reads (a `Supply`):
//! a constant, an entry value, a loop counter, a value pushed at a loop's
//! exits, a recomputation, or a push by the forward block; and the order of
//! each block's pushes.

use super::*;

impl<'a> Transform<'a> {
    /// How the reverse block of `b` gets forward value `v` (see [`Supply`]).
    /// `depth` counts nested recomputations.
    pub(super) fn supply(&self, b: BlockId, v: ValueId, depth: u32) -> Supply {
        if self.fwd.func.values[v.index()].konst.is_some() {
            return Supply::Const;
        }
        let def = self.fwd.def.get(v.index()).copied().flatten();
        if def == Some(BlockId(0)) {
            return Supply::Entry;
        }
        let mut invariant = None;
        for l in self.primal.cfg.loops_around(b) {
            let Some(s) = &self.plan.loops[l] else {
                continue;
            };
            if s.iv == v {
                return Supply::Counter(l);
            }
            if def.is_some_and(|d| !self.primal.cfg.loops[l].contains(d)) {
                invariant = Some(l);
            }
        }
        if let Some(l) = invariant {
            return Supply::Invariant(l);
        }
        if let Some(inst) = self.remat_inst(b, v) {
            let limit = if int_arith(inst.op) {
                MAX_INT_REMAT_DEPTH
            } else {
                MAX_REMAT_DEPTH
            };
            if depth < limit {
                // An active element read in `b` itself: its own fragment
                // there reads its array and index anyway, so their being
                // pushed costs nothing more.
                let read_anyway =
                    inst.op == Op::AGet && def == Some(b) && self.rev.cot[v.index()].is_some();
                let available = read_anyway
                    || inst
                        .args
                        .iter()
                        .all(|a| self.supply(b, *a, depth + 1) != Supply::Push);
                if available {
                    return Supply::Remat;
                }
            }
        }
        Supply::Push
    }

    /// The primal instruction defining `v`, if the reverse block of `b` may
    /// simply run it again: pure, cheap, and reading nothing that can have
    /// changed there (see [`Primal::arrays_immutable`] and
    /// [`Primal::reread_in`]). A repeated instruction sees the
    /// operands it saw in the forward code, so it cannot trap.
    pub(super) fn remat_inst(&self, b: BlockId, v: ValueId) -> Option<&'a Inst> {
        let (d, i) = self.primal.def_inst.get(v.index()).copied().flatten()?;
        let inst = &self.primal.p.blocks[d].insts[i];
        let cheap = match inst.op.facts().remat {
            Remat::Cheap => true,
            // An integer division by a constant other than 0 and -1
            // cannot trap.
            Remat::Never if matches!(inst.op, Op::DivI | Op::RemI) => inst
                .args
                .get(1)
                .and_then(|k| self.fwd.func.values[k.index()].konst)
                .is_some_and(|k| k != 0 && k as i64 != -1),
            Remat::CheapUnlessArraysChange => {
                self.primal.arrays_immutable || self.primal.reread_in(b, d, v, inst.args[0])
            }
            Remat::Never => false,
        };
        cheap.then_some(inst)
    }

    /// The reverse register from which the reverse block of `b` reads
    /// forward value `v`, arranging for it to be there.
    pub(super) fn supply_reg(&mut self, b: BlockId, v: ValueId) -> ValueId {
        match self.supply(b, v, 0) {
            Supply::Const => {
                let data = &self.fwd.func.values[v.index()];
                let (ty, bits) = (data.ty, data.konst.unwrap_or(0));
                self.konst(ty, bits)
            }
            Supply::Entry => {
                if self.plan.listed.insert((Listed::Entry, v)) {
                    self.plan.entry_values.push(v);
                }
                self.mirror_of(v)
            }
            Supply::Counter(l) => self.plan.loops[l].as_ref().map_or(v, |s| s.ctr),
            Supply::Invariant(l) => {
                if let Some(s) = &mut self.plan.loops[l] {
                    if self.plan.listed.insert((Listed::Invariant(l), v)) {
                        s.invariants.push(v);
                    }
                }
                self.mirror_of(v)
            }
            Supply::Remat => self.rematerialize(b, v),
            Supply::Push => {
                if self.plan.listed.insert((Listed::Need(b.index()), v)) {
                    self.plan.needs[b.index()].push(v);
                }
                self.mirror_of(v)
            }
        }
    }

    /// Recompute `v` at the top of `b`'s reverse block (once per block).
    pub(super) fn rematerialize(&mut self, b: BlockId, v: ValueId) -> ValueId {
        if let Some(r) = self.plan.remat_memo.get(&(b.index(), v)) {
            return *r;
        }
        let Some(inst) = self.remat_inst(b, v) else {
            return self.mirror_of(v);
        };
        let args: Vec<ValueId> = inst.args.iter().map(|a| self.supply_reg(b, *a)).collect();
        let data = &self.fwd.func.values[v.index()];
        let dst = self.rev.func.new_value(data.ty, data.name.clone());
        self.plan.remat[b.index()].push(Inst::new(inst.op, Some(dst), args, inst.loc));
        self.plan.remat_memo.insert((b.index(), v), dst);
        dst
    }

    /// Make a value that several blocks of a straight line of blocks read
    /// (each the one successor of the block before and its one
    /// predecessor, as inlining leaves a callee's body) cross once: the
    /// last of them pushes it (on entry) and pops it, and the reverse
    /// blocks of the earlier ones, which run right after it (the reverse
    /// code walks the line backwards, with nothing in between), read the
    /// register it was popped into.
    pub(super) fn share_needs_along_lines(&mut self) {
        for b in 0..self.primal.p.blocks.len() {
            let mut line = Vec::new();
            let mut at = b;
            while let Some(c) = self.primal.line_after(at) {
                if line.len() == LINE_MOST || c == b {
                    break;
                }
                line.push(c);
                at = c;
            }
            if line.is_empty() || self.plan.needs[b].is_empty() {
                continue;
            }
            let later: hashbrown::HashSet<ValueId> = line
                .iter()
                .flat_map(|c| self.plan.needs[*c].iter().copied())
                .collect();
            self.plan.needs[b].retain(|v| !later.contains(v));
        }
    }

    /// Put each block's pushes in the order the forward code makes them:
    /// values defined before the block first (pushed on entry), then values
    /// the block defines, each pushed right after its definition. Pushing
    /// early ends the value's use in the forward code as soon as possible,
    /// which lets the lowering coalesce loop-carried values into their phis'
    /// registers. The reverse block pops in the opposite order.
    pub(super) fn order_needs(&mut self) {
        for b in 0..self.primal.p.blocks.len() {
            let mut late = Vec::new();
            for (i, inst) in self.primal.p.blocks[b].insts.iter().enumerate() {
                if let Some(old) = self.fwd.overwritten.get(&(b, i)) {
                    late.push(*old);
                }
                // A factor before its instruction's result: the reverse
                // code reads the result first (in the fragments of later
                // readers) and the factor last (in the instruction's own
                // fragment), so popping in that order lets both pops fuse.
                if let Some(f) = self.fwd.factors.get(&(b, i)) {
                    late.push(*f);
                }
                if let Some(d) = inst.dst {
                    late.push(d);
                }
            }
            let needs = &self.plan.needs[b];
            let mut ordered: Vec<ValueId> = needs
                .iter()
                .copied()
                .filter(|v| !late.contains(v))
                .collect();
            ordered.extend(late.into_iter().filter(|v| needs.contains(v)));
            self.plan.needs[b] = ordered;
        }
    }
}

/// Whether `op` is integer arithmetic (what [`MAX_INT_REMAT_DEPTH`] lets
/// the reverse code recompute deeper).
fn int_arith(op: Op) -> bool {
    matches!(
        op,
        Op::AddI | Op::SubI | Op::MulI | Op::DivI | Op::RemI | Op::NegI | Op::MinI | Op::MaxI
    )
}
