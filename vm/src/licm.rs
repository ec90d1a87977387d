//! Loop-invariant code motion on the IR: a pure instruction (one that
//! cannot trap, allocate or touch memory: [`crate::op::Facts::pure`]) whose
//! operands are all defined outside a loop moves to the end of the loop's
//! preheader, so that it runs once per entry into the loop instead of once
//! per iteration.
//!
//! It runs before a module is lowered ([`crate::inline`] first), so both
//! tiers run the hoisted code, and before the AD stage reads it: a value
//! computed before a counted loop crosses from the forward to the reverse
//! code once per execution of the loop, not once per iteration, and an
//! index such as `w + 2·b + j` becomes one addition of a counter to an
//! invariant, which the reverse code recomputes instead of receiving.
//!
//! A loop is the natural loop of a back edge (an edge to a block that
//! dominates its source); its preheader is the one predecessor of its
//! header outside it. A loop whose header has several predecessors outside
//! it is left as it is. Moving an instruction there is sound: its operands
//! are defined outside the loop and used inside it, so their definitions
//! dominate the header and thus the end of the preheader; the preheader
//! dominates every block of the loop and every block after it, so every
//! use stays dominated. Moving it changes no value (the instruction is
//! pure), only how many instructions run, which is what `--fuel` counts.

use crate::dom::Loops;
use crate::ir::{Function, Module, ValueId};
use crate::op::Origin;

/// [`hoist`] every function of `m`.
pub fn hoist_module(m: &mut Module) {
    for f in &mut m.funcs {
        hoist(f);
    }
}

/// Move the loop-invariant pure instructions of `f` to the preheaders of
/// their loops, innermost loops first (so an instruction leaves a nest of
/// loops one level at a time). Returns how many moved.
pub fn hoist(f: &mut Function) -> usize {
    let n = f.blocks.len();
    let succs: Vec<Vec<u32>> = f
        .blocks
        .iter()
        .map(|b| b.term.successors().iter().map(|s| s.0).collect())
        .collect();
    let Loops { preds, loops, .. } = Loops::new(&succs);
    let mut moved = 0;
    for (h, body) in &loops {
        let mut outside = preds[*h].iter().filter(|p| !body[**p]);
        let (Some(&pre), None) = (outside.next(), outside.next()) else {
            continue;
        };
        // Values defined in the loop (phis and instructions), updated as
        // instructions leave it.
        let mut inside = vec![false; f.values.len()];
        for b in (0..n).filter(|b| body[*b]) {
            let block = &f.blocks[b];
            for d in block.phis.iter().map(|p| p.dst) {
                inside[d.index()] = true;
            }
            for d in block.insts.iter().filter_map(|i| i.dst) {
                inside[d.index()] = true;
            }
        }
        let invariant = |inside: &[bool], args: &[ValueId]| args.iter().all(|a| !inside[a.index()]);
        // Until nothing moves: an instruction may become invariant when
        // the one defining its operand has moved.
        loop {
            let mut any = false;
            for b in (0..n).filter(|b| body[*b]) {
                let mut k = 0;
                while k < f.blocks[b].insts.len() {
                    let inst = &f.blocks[b].insts[k];
                    let facts = inst.op.facts();
                    let movable = facts.pure
                        && facts.origin == Origin::User
                        && inst.accs.is_empty()
                        && inst.callee.is_none()
                        && inst.dst.is_some()
                        && invariant(&inside, &inst.args);
                    if !movable {
                        k += 1;
                        continue;
                    }
                    let inst = f.blocks[b].insts.remove(k);
                    if let Some(d) = inst.dst {
                        inside[d.index()] = false;
                    }
                    f.blocks[pre].insts.push(inst);
                    moved += 1;
                    any = true;
                }
            }
            if !any {
                break;
            }
        }
    }
    moved
}
