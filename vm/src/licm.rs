//! Loop-invariant code motion on the IR: a pure instruction (one that
//! cannot trap, allocate or touch memory: `Facts::pure` of [`crate::op`]) whose
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

/// The most blocks the loops of one function may come to, all loops
/// together, for the motion to look at them ([`Loops::new`]); a function
/// with more keeps the instructions of the loops left over.
const LOOP_BLOCKS_MOST: usize = 1 << 22;

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
    let succs: Vec<Vec<u32>> = f
        .blocks
        .iter()
        .map(|b| b.term.successors().iter().map(|s| s.0).collect())
        .collect();
    let Loops { dom, preds, loops } = Loops::new(&succs, LOOP_BLOCKS_MOST);
    let mut moved = 0;
    // Values defined in the loop at hand (phis and instructions), updated
    // as instructions leave it; cleared after each loop.
    let mut inside = vec![false; f.values.len()];
    for l in &loops {
        let mut outside = preds[l.header].iter().filter(|p| !l.contains(**p));
        let (Some(&pre), None) = (outside.next(), outside.next()) else {
            continue;
        };
        let defs = |f: &Function, b: usize| -> Vec<ValueId> {
            let block = &f.blocks[b];
            let phis = block.phis.iter().map(|p| p.dst);
            phis.chain(block.insts.iter().filter_map(|i| i.dst))
                .collect()
        };
        for &b in &l.blocks {
            for d in defs(f, b) {
                inside[d.index()] = true;
            }
        }
        // Blocks in dominator-tree preorder: every definition an
        // instruction reads comes before it, so one pass finds every
        // instruction that becomes invariant when the one defining its
        // operand has moved.
        let mut order = l.blocks.clone();
        order.sort_by_key(|b| dom.preorder(*b as u32));
        for b in order {
            let insts = std::mem::take(&mut f.blocks[b].insts);
            let mut kept = Vec::with_capacity(insts.len());
            for inst in insts {
                let facts = inst.op.facts();
                let movable = facts.pure
                    && facts.origin == Origin::User
                    && inst.accs.is_empty()
                    && inst.callee.is_none()
                    && inst.args.iter().all(|a| !inside[a.index()]);
                match inst.dst {
                    Some(d) if movable => {
                        inside[d.index()] = false;
                        f.blocks[pre].insts.push(inst);
                        moved += 1;
                    }
                    _ => kept.push(inst),
                }
            }
            f.blocks[b].insts = kept;
        }
        for &b in &l.blocks {
            for d in defs(f, b) {
                inside[d.index()] = false;
            }
        }
    }
    moved
}
