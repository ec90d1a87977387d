//! Pass 5, write sinking: a write to the source of a copy moves below the
//! copy's last reader when nothing in between depends on it.

use super::*;

/// How far (in instructions) the pass looks from a copy for the write to
/// its source, and from that write for the copy's last reader: a budget
/// that keeps the pass linear in a block's length (a block of thousands of
/// phi moves would otherwise cost the square of that). Moving a write is
/// sound wherever it stops (`movable` checks everything it passes); the
/// window only bounds how far it may go.
const WINDOW: usize = 128;

/// For `copy t, s` followed in the same block by a pure write to `s` and
/// then more reads of `t`: move the write below the last read of `t` when it
/// does not depend on, and is not depended on by, anything it passes. The
/// copy can then be coalesced (`t` and `s` no longer hold different live
/// values at once). Both searches look at most `WINDOW` instructions
/// ahead.
pub fn sink_writes(f: &mut Function) -> bool {
    let mut changed = false;
    for block in &mut f.blocks {
        let insts = &mut block.insts;
        let mut i = 0;
        while i < insts.len() {
            let copy = &insts[i];
            let (Op::Mov, Some(t), Some(&s)) = (copy.op, copy.dst, copy.args.first()) else {
                i += 1;
                continue;
            };
            let end = insts.len().min(i + 1 + WINDOW);
            let Some(j) = (i + 1..end).find(|&j| writes(&insts[j]).contains(&s)) else {
                i += 1;
                continue;
            };
            let Some(last) = (j + 1..insts.len().min(j + 1 + WINDOW))
                .rev()
                .find(|&k| reads(&insts[k]).contains(&t))
            else {
                i += 1;
                continue;
            };
            let w = &insts[j];
            if !w.op.facts().pure || writes(w).contains(&t) {
                i += 1;
                continue;
            }
            let (w_reads, w_writes) = (reads(w), writes(w));
            let movable = insts[j + 1..=last].iter().all(|x| {
                let (xr, xw) = (reads(x), writes(x));
                w_writes.iter().all(|v| !xr.contains(v) && !xw.contains(v))
                    && w_reads.iter().all(|v| !xw.contains(v))
            });
            if movable {
                let w = insts.remove(j);
                insts.insert(last, w);
                changed = true;
            }
            i += 1;
        }
    }
    changed
}
