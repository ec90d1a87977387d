//! Liveness of registers (backward, per block and per instruction): what dead-
//! code removal, coalescing and the fusions ask.

use super::*;

/// Registers live at the start of each block (a worklist over blocks:
/// when a block's live-in set grows, its predecessors are looked at again).
pub(super) fn live_in(f: &Function) -> Vec<Bits> {
    let n = f.values.len();
    let nb = f.blocks.len();
    let succs = successors(f);
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for (b, ss) in succs.iter().enumerate() {
        for &s in ss {
            preds[s].push(b);
        }
    }
    let mut live = vec![Bits::new(n, false); nb];
    let mut queued = vec![true; nb];
    // Blocks last to first: reverse code mostly flows to later blocks.
    let mut work: Vec<usize> = (0..nb).collect();
    let mut l = Bits::new(n, false);
    while let Some(b) = work.pop() {
        queued[b] = false;
        l.clear();
        for &s in &succs[b] {
            l.or_with(&live[s]);
        }
        step_block_backward(&f.blocks[b], &mut l);
        if l != live[b] {
            std::mem::swap(&mut live[b], &mut l);
            for &p in &preds[b] {
                if !std::mem::replace(&mut queued[p], true) {
                    work.push(p);
                }
            }
        }
    }
    live
}

/// The registers live right before block `b`'s terminator: live into a
/// successor, or read by the terminator itself.
pub(super) fn live_at_term(f: &Function, live: &[Bits], b: usize) -> Bits {
    let mut l = Bits::new(f.values.len(), false);
    for s in f.blocks[b].term.successors() {
        l.or_with(&live[s.index()]);
    }
    for v in f.blocks[b].term.uses() {
        l.set(*v, true);
    }
    l
}

/// For each instruction `k` of block `b`: whether `value(insts, k)`, if it
/// names a register, is live right after instruction `k`.
pub(super) fn live_after(
    f: &Function,
    live: &[Bits],
    b: usize,
    value: impl Fn(&[Inst], usize) -> Option<ValueId>,
) -> Vec<bool> {
    let mut l = live_at_term(f, live, b);
    let insts = &f.blocks[b].insts;
    let mut out = vec![false; insts.len()];
    for (k, inst) in insts.iter().enumerate().rev() {
        if let Some(v) = value(insts, k) {
            out[k] = l.has(v);
        }
        step_backward(inst, &mut l);
    }
    out
}

pub(super) fn step_block_backward(block: &vm::ir::Block, l: &mut Bits) {
    for v in block.term.uses() {
        l.set(*v, true);
    }
    for inst in block.insts.iter().rev() {
        step_backward(inst, l);
    }
}

pub(super) fn step_backward(inst: &Inst, l: &mut Bits) {
    for w in writes(inst) {
        l.set(w, false);
    }
    for r in reads(inst) {
        l.set(r, true);
    }
}
