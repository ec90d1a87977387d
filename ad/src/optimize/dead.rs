//! Pass 4, dead code: pure instructions whose results nobody reads disappear
//! (and the dead half of a `take`).

use super::*;

/// Remove pure instructions whose written registers are all dead (and the
/// dead half of a `take`).
pub fn remove_dead(f: &mut Function) -> bool {
    let mut any = false;
    for _ in 0..ROUNDS {
        let live = live_in(f);
        let mut changed = false;
        for b in 0..f.blocks.len() {
            let mut l = live_at_term(f, &live, b);
            let insts = std::mem::take(&mut f.blocks[b].insts);
            let mut kept = Vec::with_capacity(insts.len());
            for mut inst in insts.into_iter().rev() {
                if inst.op.facts().pure {
                    let ws = writes(&inst);
                    if ws.iter().all(|w| !l.has(*w)) {
                        changed = true;
                        continue;
                    }
                    if inst.op == Op::Take {
                        let (Some(d), Some(&s)) = (inst.dst, inst.args.first()) else {
                            kept.push(inst);
                            continue;
                        };
                        if !l.has(d) {
                            inst = Inst::new(Op::Zero, Some(s), Vec::new(), inst.loc);
                            changed = true;
                        } else if !l.has(s) {
                            inst = Inst::new(Op::Mov, Some(d), vec![s], inst.loc);
                            changed = true;
                        }
                    }
                    if inst.op == Op::Mov && inst.dst == inst.args.first().copied() {
                        changed = true;
                        continue;
                    }
                }
                step_backward(&inst, &mut l);
                kept.push(inst);
            }
            kept.reverse();
            f.blocks[b].insts = kept;
        }
        any |= changed;
        if !changed {
            break;
        }
    }
    any
}
