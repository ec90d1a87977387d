//! Step 3, the reverse CFG: the prologue that pops the entry values and
//! dispatches on the returning block, one reverse block per primal block, the
//! edges that move phi cotangents along the edge taken (by block id, or by a
//! counted loop's counter), and the exit that returns the cotangents.

use super::*;

impl Transform<'_> {
    pub(super) fn assemble_reverse(&mut self) {
        let p = self.primal.p;
        let n = p.blocks.len();
        let start = self.new_block("start".into());
        let rets: Vec<BlockId> = self.primal.cfg.rets.clone();
        let ret_blocks: Vec<BlockId> = rets
            .iter()
            .map(|r| self.new_block(format!("ret.{}", p.blocks[r.index()].name)))
            .collect();
        // Reverse blocks in reverse block order, so loops read top-down.
        let mut rblk = vec![BlockId(0); n];
        for b in (0..n).rev() {
            rblk[b] = self.new_block(format!("rev.{}", p.blocks[b].name));
        }
        let exit = self.new_block("exit".into());

        // Prologue: pop the entry values, then find the block that returned.
        // They are in the order the reverse code first reads them (it was
        // built from the last instruction up), and the forward code pushed
        // them in the opposite order, so each pop can sink to its first
        // reader and fuse with it (`mul.pop`, `acc.mul.pop`).
        let mut insts = Vec::new();
        for v in self.plan.entry_values.clone().iter() {
            let m = self.mirror_of(*v);
            insts.push(Inst::new(Op::CommsPop, Some(m), Vec::new(), Loc::default()));
        }
        self.rev.func.blocks[start.index()].insts = insts;
        self.rev.func.blocks[start.index()].term = match ret_blocks.len() {
            0 => Term::Jmp(exit),
            1 => Term::Jmp(ret_blocks[0]),
            _ => Term::BlkPop(ret_blocks.clone()),
        };
        for (k, r) in rets.iter().enumerate() {
            let mut insts = Vec::new();
            if let (Term::Ret(v), Some(seed)) = (&p.blocks[r.index()].term, self.rev.seed) {
                if let Some(c) = self.rev.cot[v.index()] {
                    let loc = p.blocks[r.index()].term_loc;
                    insts.push(self.contribution(Op::Acc, c, vec![seed], loc));
                }
            }
            let rb = ret_blocks[k];
            self.rev.func.blocks[rb.index()].insts = insts;
            self.rev.func.blocks[rb.index()].term = Term::Jmp(rblk[r.index()]);
        }

        // One reverse block per primal block.
        let header_of: HashMap<usize, usize> = (0..self.plan.loops.len())
            .filter(|l| self.plan.loops[*l].is_some())
            .map(|l| (self.primal.cfg.loops[l].header.index(), l))
            .collect();
        for b in 0..n {
            let mut insts = Vec::new();
            for v in self.plan.needs[b].clone().iter().rev() {
                let m = self.mirror_of(*v);
                insts.push(Inst::new(Op::CommsPop, Some(m), Vec::new(), Loc::default()));
            }
            insts.append(&mut self.plan.remat[b]);
            insts.append(&mut self.rev.frags[b]);
            let term = match header_of.get(&b) {
                Some(&l) => self.counted_dispatch(l, b, &rblk, &mut insts),
                None => {
                    let preds = self.primal.cfg.preds[b].clone();
                    let targets: Vec<BlockId> = preds
                        .iter()
                        .map(|pred| self.edge_target(*pred, b, &rblk))
                        .collect();
                    match targets.len() {
                        0 => Term::Jmp(exit),
                        1 => Term::Jmp(targets[0]),
                        _ => Term::BlkPop(targets),
                    }
                }
            };
            let rb = rblk[b];
            self.rev.func.blocks[rb.index()].insts = insts;
            self.rev.func.blocks[rb.index()].term = term;
        }

        // Exit: the parameters' cotangents (zero for unselected ones).
        let params: Vec<ValueId> = p
            .params
            .iter()
            .filter(|v| p.ty(**v) == Type::F64)
            .copied()
            .collect();
        let grads: Vec<ValueId> = params
            .iter()
            .map(|v| match self.rev.cot[v.index()] {
                Some(c) => c,
                None => self.kf(0.0),
            })
            .collect();
        self.rev.func.blocks[exit.index()].term = Term::RetN(grads);
        debug_assert_eq!(start, BlockId(0));
    }

    /// The end of the reverse block of counted loop `l`'s header: step the
    /// counter back one iteration; if it has passed the first iteration, leave
    /// by the entry edge, else go back through the latch edge.
    pub(super) fn counted_dispatch(
        &mut self,
        l: usize,
        header: usize,
        rblk: &[BlockId],
        insts: &mut Vec<Inst>,
    ) -> Term {
        let Some(s) = &self.plan.loops[l] else {
            return Term::Jmp(rblk[header]);
        };
        let (ctr, lim, step) = (s.ctr, s.lim, s.step);
        let Some(c) = &self.primal.cfg.loops[l].counted else {
            return Term::Jmp(rblk[header]);
        };
        let (entry, latch) = (c.entry, c.latch);
        let step_reg = self.konst(Type::I64, step as u64);
        let first = self.rev.func.new_value(Type::Bool, None);
        insts.push(Inst::new(
            Op::SubI,
            Some(ctr),
            vec![ctr, step_reg],
            Loc::default(),
        ));
        insts.push(Inst::new(
            Op::EqI,
            Some(first),
            vec![ctr, lim],
            Loc::default(),
        ));
        let out = self.edge_target(entry, header, rblk);
        let back = self.edge_target(latch, header, rblk);
        Term::Br {
            cond: first,
            then_: out,
            else_: back,
        }
    }

    /// The reverse block to go to after the reverse of `b` when `b` was
    /// entered from `pred`: an edge block that pops what the forward edge
    /// pushed for the counted loops it leaves and moves phi cotangents, or
    /// directly the predecessor's reverse block.
    pub(super) fn edge_target(&mut self, pred: BlockId, b: usize, rblk: &[BlockId]) -> BlockId {
        let exited = self.counted_exited(pred, BlockId(b as u32));
        if exited.is_empty() && !self.has_active_phis(b) {
            return rblk[pred.index()];
        }
        let p = self.primal.p;
        let name = format!("edge.{}.{}", p.blocks[pred.index()].name, p.blocks[b].name);
        let edge = self.new_block(name);
        let mut insts = Vec::new();
        // The forward edge pushed loop by loop, innermost first: pop the
        // outermost first.
        for &l in exited.iter().rev() {
            let Some(s) = &self.plan.loops[l] else {
                continue;
            };
            let (ctr, invariants) = (s.ctr, s.invariants.clone());
            let (lim, lim_const, init_reg, step) = (s.lim, s.lim_const, s.init_reg, s.step);
            insts.push(Inst::new(
                Op::CommsPop,
                Some(ctr),
                Vec::new(),
                Loc::default(),
            ));
            for v in invariants.iter().rev() {
                let m = self.mirror_of(*v);
                insts.push(Inst::new(Op::CommsPop, Some(m), Vec::new(), Loc::default()));
            }
            if let (false, Some(init)) = (lim_const, init_reg) {
                let step_reg = self.konst(Type::I64, step as u64);
                insts.push(Inst::new(
                    Op::SubI,
                    Some(lim),
                    vec![init, step_reg],
                    Loc::default(),
                ));
            }
        }
        self.phi_moves(pred, b, &mut insts);
        self.rev.func.blocks[edge.index()].insts = insts;
        self.rev.func.blocks[edge.index()].term = Term::Jmp(rblk[pred.index()]);
        edge
    }

    /// The counted loops the edge `from -> to` leaves, innermost first.
    pub(super) fn counted_exited(&self, from: BlockId, to: BlockId) -> Vec<usize> {
        self.primal
            .cfg
            .loops_exited(from, to)
            .into_iter()
            .filter(|l| self.plan.loops[*l].is_some())
            .collect()
    }

    /// Move the cotangents of `b`'s phis to their incoming values on the
    /// edge from `pred`.
    pub(super) fn phi_moves(&mut self, pred: BlockId, b: usize, insts: &mut Vec<Inst>) {
        let p = self.primal.p;
        let phis = &p.blocks[b].phis;
        // A set, not a search of the phis: a block may have tens of
        // thousands of them.
        let here: hashbrown::HashSet<ValueId> = phis.iter().map(|ph| ph.dst).collect();
        let is_phi_here = |v: ValueId| here.contains(&v);
        if phis
            .first()
            .is_some_and(|ph| ph.incoming.len() > super::JOIN_INDEXED)
            && !self.plan.join_phis.contains_key(&b)
        {
            let maps = phis
                .iter()
                .map(|ph| {
                    let mut m = HashMap::with_capacity(ph.incoming.len());
                    for (l, v) in &ph.incoming {
                        // The first, as a search finds it.
                        m.entry(*l).or_insert(*v);
                    }
                    m
                })
                .collect();
            self.plan.join_phis.insert(b, maps);
        }
        let index = self.plan.join_phis.get(&b);
        let moves: Vec<(ValueId, Option<ValueId>, Loc)> = phis
            .iter()
            .enumerate()
            .filter_map(|(k, ph)| {
                let c = self.rev.cot[ph.dst.index()]?;
                let w = match index.and_then(|maps| maps.get(k)) {
                    Some(m) => m.get(&pred).copied(),
                    None => ph
                        .incoming
                        .iter()
                        .find(|(l, _)| *l == pred)
                        .map(|(_, v)| *v),
                };
                Some((c, w, ph.loc))
            })
            .collect();
        let cyclic = self.primal.cfg.in_cycle[b];
        // Phis are a parallel copy: when an incoming value is itself a phi of
        // this block (the swap), read every phi cotangent before writing any.
        let parallel = moves.iter().any(|(_, w, _)| w.is_some_and(is_phi_here));
        if parallel {
            let mut temps = Vec::new();
            for (c, w, loc) in &moves {
                let t = self.rev.func.new_value(Type::F64, None);
                insts.push(Inst::new(Op::Mov, Some(t), vec![*c], *loc));
                insts.push(Inst::new(Op::Zero, Some(*c), Vec::new(), *loc));
                temps.push((t, *w, *loc));
            }
            for (t, w, loc) in temps {
                if let Some(cw) = w.and_then(|w| self.rev.cot[w.index()]) {
                    insts.push(self.contribution(Op::Acc, cw, vec![t], loc));
                }
            }
        } else {
            for (c, w, loc) in moves {
                let cw = w.and_then(|w| self.rev.cot[w.index()]);
                if let (Some(cw), true) = (cw, cyclic) {
                    if self.rev.set_once[cw.index()] {
                        // Move and clear in one instruction.
                        insts.push(Inst::new(Op::Take, Some(cw), vec![c], loc));
                        continue;
                    }
                }
                if let Some(cw) = cw {
                    insts.push(self.contribution(Op::Acc, cw, vec![c], loc));
                }
                if cyclic {
                    insts.push(Inst::new(Op::Zero, Some(c), Vec::new(), loc));
                }
            }
        }
    }
}
