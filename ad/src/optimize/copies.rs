//! Pass 3, copy propagation within a block.

use super::*;

/// Within each block, let reads of `t` after `copy t, s` read `s` while
/// neither is written again.
///
/// The valid copies are indexed both ways, by copy and by source, so each
/// read and each write costs time proportional to the copies it ends, not
/// to all the valid ones: linear in the size of the block.
pub fn propagate_copies(f: &mut Function) -> bool {
    let mut changed = false;
    let n = f.values.len();
    // source[t] = s while `copy t, s` is valid (at most one per `t`: a new
    // copy into `t` writes `t`, which ends the old one).
    let mut source: Vec<Option<ValueId>> = vec![None; n];
    // copies_of[s]: the registers `t` copied from `s` since `s` was last
    // written; some of those copies may have ended since, by a write to `t`.
    let mut copies_of: Vec<Vec<ValueId>> = vec![Vec::new(); n];
    // Registers whose entries above may be set, to clear between blocks.
    let mut touched: Vec<ValueId> = Vec::new();
    for block in &mut f.blocks {
        for inst in &mut block.insts {
            for i in pure_reads(inst) {
                if let Some(s) = source[inst.args[i].index()] {
                    inst.args[i] = s;
                    changed = true;
                }
            }
            for w in writes(inst) {
                source[w.index()] = None;
                for t in std::mem::take(&mut copies_of[w.index()]) {
                    if source[t.index()] == Some(w) {
                        source[t.index()] = None;
                    }
                }
            }
            if inst.op == Op::Mov {
                if let (Some(t), Some(&s)) = (inst.dst, inst.args.first()) {
                    if t != s {
                        source[t.index()] = Some(s);
                        copies_of[s.index()].push(t);
                        touched.push(t);
                        touched.push(s);
                    }
                }
            }
        }
        block.term.map_uses(|v| {
            if let Some(s) = source[v.index()] {
                *v = s;
                changed = true;
            }
        });
        for v in touched.drain(..) {
            source[v.index()] = None;
            copies_of[v.index()].clear();
        }
    }
    changed
}
