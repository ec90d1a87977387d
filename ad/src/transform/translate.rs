//! Step 2, translation: each primal instruction becomes its reverse fragment
//! (by its rule, `crate::rules::reverse`), with what the forward code adds for
//! it (the overwritten element of an `aset`, the derived callee of a call, the
//! factor of a `sin` or `cos`).

use super::*;

impl Transform<'_> {
    pub(super) fn translate(
        &mut self,
        derived: &mut dyn FnMut(FuncId, Vec<bool>) -> Derived,
    ) -> Result<(), NoRule> {
        let p = self.primal.p;
        for (b, block) in p.blocks.iter().enumerate() {
            for (i, inst) in block.insts.iter().enumerate() {
                match inst.op {
                    Op::ASet => {
                        let old = self.fwd.func.new_value(Type::F64, None);
                        self.fwd.def.push(Some(BlockId(b as u32)));
                        self.fwd.overwritten.insert((b, i), old);
                    }
                    Op::Call if call_is_active(p, inst, &self.primal.active) => {
                        let callee = inst.callee.expect("calls name a callee");
                        let wrt = call_wrt(&inst.args, &self.primal.active);
                        self.fwd.calls.insert((b, i), derived(callee, wrt));
                    }
                    _ => {}
                }
                if let Some((other, a)) = self.factor(inst) {
                    // Named after what it holds: `cos.x` for `sin %x`.
                    let name = p.values[a.index()]
                        .name
                        .as_ref()
                        .map(|n| format!("{}.{n}", other.mnemonic()));
                    let f = self.fwd.func.new_value(Type::F64, name);
                    self.fwd.def.push(Some(BlockId(b as u32)));
                    self.fwd.factors.insert((b, i), f);
                }
            }
            let mut frag = Vec::new();
            for (i, inst) in block.insts.iter().enumerate().rev() {
                self.reverse_inst(b, i, inst, &mut frag)?;
            }
            self.rev.frags[b] = frag;
        }
        // Where each counted loop's reverse reads the first value of its
        // induction variable. It is defined before the loop (its definition
        // dominates the entry edge, which is not a back edge), so this is a
        // constant, an entry value, an outer loop's counter, or a value
        // pushed at the loop's exits: never a per-iteration push.
        for l in 0..self.plan.loops.len() {
            let Some(s) = &self.plan.loops[l] else {
                continue;
            };
            if s.lim_const {
                continue;
            }
            let (init, header) = (s.init, self.primal.cfg.loops[l].header);
            let r = self.supply_reg(header, init);
            if let Some(s) = &mut self.plan.loops[l] {
                s.init_reg = Some(r);
            }
        }
        Ok(())
    }

    /// For an active `sin a` or `cos a`: the opcode of the factor its
    /// pullback needs (`cos` for `sin`, `sin` for `cos`) and `a`.
    ///
    /// The forward code computes the factor right after the instruction,
    /// where the lowering fuses the pair into one `sincos` (about the cost
    /// of one `sin`), and the reverse code reads it like any forward value
    /// (usually popped). That trades a push and a pop (8 bytes) for a
    /// transcendental function in the reverse code, which costs several
    /// times as much; recomputing `a` and then `cos a` in the reverse code
    /// would need no memory but a whole `cos`.
    pub(super) fn factor(&self, inst: &Inst) -> Option<(Op, ValueId)> {
        let other = match inst.op {
            Op::Sin => Op::Cos,
            Op::Cos => Op::Sin,
            _ => return None,
        };
        let (&[a], Some(d)) = (&inst.args[..], inst.dst) else {
            return None;
        };
        (self.primal.active[a.index()] && self.primal.active[d.index()]).then_some((other, a))
    }

    /// Append the reverse fragment of `inst` (block `b`, index `i`) to
    /// `out`: its rule ([`crate::rules::reverse`]), then, in a block on a
    /// cycle, the zeroing of its result's cotangent.
    pub(super) fn reverse_inst(
        &mut self,
        b: usize,
        i: usize,
        inst: &Inst,
        out: &mut Vec<Inst>,
    ) -> Result<(), NoRule> {
        let loc = inst.loc;
        let mut e = Emit {
            t: self,
            out,
            b,
            loc,
        };
        rules::reverse::rule(&mut e, i, inst)?;
        if let Some(d) = inst.dst.and_then(|d| e.t.rev.cot[d.index()]) {
            // A single-contribution cotangent is overwritten, not added to,
            // by its next instance, so it needs no zeroing.
            if e.t.primal.cfg.in_cycle[b] && !e.t.rev.set_once[d.index()] {
                e.op(Op::Zero, None, vec![d]);
            }
        }
        Ok(())
    }

    /// A contribution `to op= args`: accumulated in general, but written
    /// outright into a cotangent that receives exactly one contribution per
    /// instance (see [`single_contribution`]).
    pub(super) fn contribution(&self, op: Op, to: ValueId, args: Vec<ValueId>, loc: Loc) -> Inst {
        if !self.rev.set_once.get(to.index()).copied().unwrap_or(false) {
            let mut all = vec![to];
            all.extend(args);
            return Inst::new(op, None, all, loc);
        }
        let set = match op {
            Op::Acc => Op::Mov,
            Op::AccNeg => Op::NegF,
            _ => Op::MulZ,
        };
        Inst::new(set, Some(to), args, loc)
    }
}
