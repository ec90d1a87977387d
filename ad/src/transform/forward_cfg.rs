//! Step 4, the forward CFG: the primal blocks with their pushes, block ids
//! pushed only on edges into ambiguous joins, and at each counted loop's exits
//! and at `ret` the values the reverse code reads once.

use super::*;

impl Transform<'_> {
    pub(super) fn assemble_forward(&mut self) {
        let p = self.primal.p;
        let n = p.blocks.len();
        let nrets = self.primal.cfg.rets.len();
        // The loops whose synthetic counter steps in each block (a list per
        // block, not a search of every loop for each block).
        let mut synthetic_at: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (l, s) in self.plan.loops.iter().enumerate() {
            if let Some(Some((latch, _))) = s.as_ref().map(|s| &s.synthetic) {
                if let Some(at) = synthetic_at.get_mut(*latch) {
                    at.push(l);
                }
            }
        }
        for (b, synthetic) in synthetic_at.iter().enumerate() {
            let mut insts = Vec::with_capacity(p.blocks[b].insts.len() + self.plan.needs[b].len());
            let needs = &self.plan.needs[b];
            let push = |v: ValueId| Inst::new(Op::CommsPush, None, vec![v], Loc::default());
            // A callee's forward code pushes onto the same stack, and the
            // reverse block pops all of its own values before it replays the
            // callee's pullback. So nothing of this block may be pushed
            // before its last differentiated call: up to that call, pushes
            // wait and happen right after it (in `needs` order).
            let cut = (0..p.blocks[b].insts.len())
                .rev()
                .find(|i| self.fwd.calls.contains_key(&(b, *i)));
            let defined_at = |v: ValueId| -> Option<usize> {
                p.blocks[b].insts.iter().enumerate().find_map(|(i, inst)| {
                    (inst.dst == Some(v)
                        || self.fwd.overwritten.get(&(b, i)) == Some(&v)
                        || self.fwd.factors.get(&(b, i)) == Some(&v))
                    .then_some(i)
                })
            };
            let waits = |v: ValueId| match (defined_at(v), cut) {
                (None, _) => true,
                (Some(i), Some(c)) => i <= c,
                (Some(_), None) => false,
            };
            if cut.is_none() {
                // Values defined before this block: pushed on entry.
                for v in needs.iter().filter(|v| defined_at(**v).is_none()) {
                    insts.push(push(*v));
                }
            }
            for (i, inst) in p.blocks[b].insts.iter().enumerate() {
                let mut inst = inst.clone();
                if let Some(old) = self.fwd.overwritten.get(&(b, i)) {
                    let read = Inst::new(Op::AGet, Some(*old), inst.args[..2].to_vec(), inst.loc);
                    insts.push(read);
                    if needs.contains(old) && !(cut.is_some() && waits(*old)) {
                        insts.push(push(*old));
                    }
                }
                if let Some(d) = self.fwd.calls.get(&(b, i)) {
                    inst.callee = Some(d.fwd);
                }
                let dst = inst.dst;
                // The factor right after the instruction, so that the
                // lowering fuses the two into one `sincos`.
                let factor = self.fwd.factors.get(&(b, i)).copied();
                let factor_inst = factor.and_then(|f| {
                    let (other, a) = self.factor(&inst)?;
                    Some(Inst::new(other, Some(f), vec![a], inst.loc))
                });
                insts.push(inst);
                insts.extend(factor_inst);
                // In `order_needs` order: the factor first.
                for d in factor.into_iter().chain(dst) {
                    if needs.contains(&d) && !(cut.is_some() && waits(d)) {
                        insts.push(push(d));
                    }
                }
                if cut == Some(i) {
                    for v in needs.iter().filter(|v| waits(**v)) {
                        insts.push(push(*v));
                    }
                }
            }
            // The counter the forward code adds to a loop without an
            // induction variable steps at the end of the latch.
            for &l in synthetic {
                if let Some(Some((_, inc))) = self.plan.loops[l].as_ref().map(|s| &s.synthetic) {
                    insts.push(inc.clone());
                }
            }
            let here = BlockId(b as u32);
            let term = p.blocks[b].term.clone();
            match &term {
                Term::Jmp(s) => {
                    let edge = self.edge_insts(here, *s);
                    insts.extend(edge);
                }
                Term::Br { cond, then_, else_ } => {
                    let t = self.fwd_edge(here, *then_);
                    let e = if else_ == then_ {
                        t
                    } else {
                        self.fwd_edge(here, *else_)
                    };
                    self.fwd.func.blocks[b].term = Term::Br {
                        cond: *cond,
                        then_: t,
                        else_: e,
                    };
                }
                Term::Ret(_) => {
                    // The last pushed is the first the reverse code reads.
                    // Before the block id (the two stacks are independent),
                    // so that these pushes share one reservation with the
                    // block's own (a `blk.push` ends a batch).
                    for v in self.plan.entry_values.iter().rev() {
                        insts.push(Inst::new(Op::CommsPush, None, vec![*v], Loc::default()));
                    }
                    if nrets > 1 {
                        let k = self
                            .primal
                            .cfg
                            .rets
                            .iter()
                            .position(|r| r.index() == b)
                            .unwrap_or(0);
                        insts.push(blk_push(k as u32));
                    }
                }
                Term::RetN(_) | Term::BlkPop(_) => {}
            }
            self.fwd.func.blocks[b].insts = insts;
        }
    }

    /// What the forward code does on the edge `from -> to`: for each counted
    /// loop it leaves (innermost first), push the values defined before the
    /// loop that its reverse needs and then its counter; then, if `to` is a
    /// join whose predecessor the reverse code cannot know otherwise, push
    /// `from`'s index among `to`'s predecessors.
    pub(super) fn edge_insts(&self, from: BlockId, to: BlockId) -> Vec<Inst> {
        let mut insts = Vec::new();
        for l in self.counted_exited(from, to) {
            let Some(s) = &self.plan.loops[l] else {
                continue;
            };
            for v in s.invariants.iter().chain([&s.iv]) {
                insts.push(Inst::new(Op::CommsPush, None, vec![*v], Loc::default()));
            }
        }
        if let Some(k) = self.pred_index(from, to) {
            insts.push(blk_push(k));
        }
        insts
    }

    /// The id pushed on the edge `from -> to`, if `to` has several
    /// predecessors and is not the header of a counted loop (otherwise the
    /// reverse code knows the edge statically or by the loop counter).
    pub(super) fn pred_index(&self, from: BlockId, to: BlockId) -> Option<u32> {
        let preds = &self.primal.cfg.preds[to.index()];
        if preds.len() < 2 {
            return None;
        }
        // A header's innermost loop is its own (one loop per header).
        let counted_header = self.primal.cfg.loop_of[to.index()]
            .is_some_and(|l| self.primal.cfg.loops[l].header == to && self.plan.loops[l].is_some());
        if counted_header {
            return None;
        }
        preds.iter().position(|p| *p == from).map(|k| k as u32)
    }

    /// The block a forward `br` in `b` should jump to for target `to`: `to`
    /// itself, or a new edge block running [`Transform::edge_insts`] first
    /// (and then taking `b`'s place in `to`'s phis).
    pub(super) fn fwd_edge(&mut self, from: BlockId, to: BlockId) -> BlockId {
        let insts = self.edge_insts(from, to);
        if insts.is_empty() {
            return to;
        }
        let name = format!(
            "push.{}.{}",
            self.primal.p.blocks[from.index()].name,
            self.primal.p.blocks[to.index()].name
        );
        self.fwd.func.blocks.push(Block {
            name,
            phis: Vec::new(),
            insts,
            term: Term::Jmp(to),
            term_loc: self.primal.p.blocks[from.index()].term_loc,
        });
        let edge = BlockId(self.fwd.func.blocks.len() as u32 - 1);
        for phi in &mut self.fwd.func.blocks[to.index()].phis {
            for (label, _) in &mut phi.incoming {
                if *label == from {
                    *label = edge;
                }
            }
        }
        edge
    }
}
