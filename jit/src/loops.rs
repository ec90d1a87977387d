//! The innermost loops of a bytecode function whose array views can be
//! read once, before the loop, instead of at every access: what
//! `translate.rs` reads on the edges into such a loop ([`T::loop_views`]).
//!
//! A view (an array's buffer address and length, and its shadow's) stays
//! valid while no array is allocated: only `anew` moves the views
//! (`Vm::native_array_moves`), and a call may run one. So a loop without
//! `anew` and without a call may read the view of an array register it
//! does not write once, on entry. Only innermost loops do: they are where
//! the time goes, and each view read keeps two machine registers busy
//! through the loop, which in an outer loop would crowd the inner one.
//!
//! [`T::loop_views`]: crate::translate

use crate::translate::{accessed_views, operands_written};
use vm::bytecode::Function;
use vm::dom::Loops;
use vm::op::Op;

/// The most blocks the loops of one function may come to, all loops
/// together, for the tier to look at them (`vm::dom::Loops::new`).
const LOOP_BLOCKS_MOST: usize = 1 << 22;

/// An innermost loop whose views are read on entry.
#[derive(Debug)]
pub(crate) struct LoopViews {
    /// The `pc` of its header (a leader).
    pub header: usize,
    /// The leaders (by index) of its blocks, in increasing order.
    pub blocks: Vec<usize>,
    /// The array registers whose views it reads on entry.
    pub regs: Vec<u32>,
}

impl LoopViews {
    /// Whether the block of leader index `k` is in the loop.
    pub(crate) fn contains(&self, k: usize) -> bool {
        self.blocks.binary_search(&k).is_ok()
    }
}

/// The leader index of the block holding `pc` (`starts` sorted, from 0).
fn block_of(starts: &[usize], pc: usize) -> usize {
    starts.partition_point(|s| *s <= pc).saturating_sub(1)
}

/// The loops of `f` (blocks starting at `starts`, its leaders; `writes`
/// per register, `translate::writes`) whose views [`LoopViews`] reads on
/// entry, each reading at most `most` views (an array's elements or its
/// shadow, as `T::hoist_views` counts them).
pub(crate) fn loop_views(
    f: &Function,
    starts: &[usize],
    writes: &[(u32, usize)],
    most: usize,
) -> Vec<LoopViews> {
    let n = starts.len();
    let end_of = |k: usize| starts.get(k + 1).copied().unwrap_or(f.code.len());
    // Successors of each block, by the jump that ends it.
    let mut succs: Vec<Vec<u32>> = Vec::with_capacity(n);
    // Blocks a block-table jump (`blk.pop`) reaches, from which block.
    let mut table_edges: Vec<(usize, usize)> = Vec::new();
    for k in 0..n {
        let end = end_of(k);
        let mut s = Vec::new();
        if let Some(ins) = end.checked_sub(1).and_then(|pc| f.code.get(pc)) {
            let target = |pc: u32| block_of(starts, pc as usize) as u32;
            if ins.op == Op::Jmp {
                s.push(target(ins.x));
            } else if ins.op.is_cond_jump() {
                s.push(target(ins.x));
                s.push(block_of(starts, end) as u32);
            } else if ins.op == Op::BlkPop {
                for t in f.tables.get(ins.x as usize).into_iter().flatten() {
                    s.push(target(*t));
                    table_edges.push((k, target(*t) as usize));
                }
            } else if !ins.op.is_terminator() && end < f.code.len() {
                s.push(block_of(starts, end) as u32);
            }
        }
        succs.push(s);
    }
    let Loops { loops, .. } = Loops::new(&succs, LOOP_BLOCKS_MOST);
    // The smallest loop holding each block: loops come innermost first, so
    // a loop is innermost when it is the smallest loop of all its blocks.
    let mut smallest = vec![usize::MAX; n];
    for (i, l) in loops.iter().enumerate() {
        for &b in &l.blocks {
            if smallest[b] == usize::MAX {
                smallest[b] = i;
            }
        }
    }
    // Headers a block table jumps to from some block.
    let mut tabled: Vec<(usize, usize)> = table_edges.iter().map(|(a, b)| (*b, *a)).collect();
    tabled.sort_unstable();
    let mut out = Vec::new();
    for (i, l) in loops.iter().enumerate() {
        let h = l.header;
        // Innermost; entered only at the header (its header dominates
        // every block of a natural loop), and not from a block table
        // (whose edges have no place for the reads), nor at the function's
        // entry.
        let inner = l.blocks.iter().all(|b| smallest[*b] == i);
        let from = tabled.partition_point(|(to, _)| *to < h);
        let by_table = tabled[from..]
            .iter()
            .take_while(|(to, _)| *to == h)
            .any(|(_, from)| !l.contains(*from));
        if !inner || by_table || h == 0 {
            continue;
        }
        let pcs = || l.blocks.iter().flat_map(|b| starts[*b]..end_of(*b));
        let changes =
            pcs().any(|pc| matches!(f.code[pc].op, Op::ANew | Op::Call | Op::CallAcc | Op::CallN));
        if changes {
            continue;
        }
        let Some(mut regs) = accessed_views(pcs().map(|pc| &f.code[pc]), most) else {
            continue;
        };
        // A register the loop writes changes its view: not read once.
        let written: Vec<u32> = regs
            .iter()
            .copied()
            .filter(|r| writes.get(*r as usize).is_some_and(|w| w.0 > 0))
            .filter(|r| pcs().any(|pc| operands_written(&f.code[pc]).any(|w| w == *r)))
            .collect();
        regs.retain(|r| !written.contains(r));
        if regs.is_empty() {
            continue;
        }
        out.push(LoopViews {
            header: starts[h],
            blocks: l.blocks.clone(),
            regs,
        });
    }
    out
}
