//! Clean-up of reverse functions before lowering.
//!
//! The transform builds a reverse function fragment by fragment, each
//! correct on its own: cotangents are accumulated (`acc`), zeroed after use
//! when their value lives in a loop, and moved along phi edges (`take`)
//! through small edge blocks. Put together, that leaves work a compiler
//! would not do: a `take` into a register whose only reader adds it back, an
//! accumulation into a register that is known to hold zero, a `zero` of a
//! register that is overwritten before it is read. This module removes it,
//! with classical passes over the (non-SSA) reverse IR:
//!
//! 1. [`merge_blocks`]: a block that jumps to a block with no other
//!    predecessor absorbs it.
//! 2. [`known_zero`]: a forward must-analysis of the registers that hold
//!    zero (every register but the parameters starts at zero). An `acc`,
//!    `acc.neg` or `acc.mul` into such a register becomes a plain write
//!    (`copy`, `neg`, `mul`), and a `zero` of it disappears.
//! 3. [`propagate_copies`]: within a block, reads of a copy read its source
//!    while neither is written.
//! 4. [`remove_dead`]: liveness; pure instructions whose results nobody
//!    reads disappear (half of a `take` too).
//! 5. [`sink_writes`]: a write to the source of a copy moves below the
//!    copy's last reader in the block when nothing in between depends on it,
//!    so that the two registers can share one.
//! 6. [`coalesce`]: a copy between registers whose live ranges do not
//!    overlap merges them into one register.
//! 7. [`fuse_pops`]: a `comms.pop` whose value is read once, right after,
//!    as a factor of an `acc.mul` or `mul.f`, becomes part of it
//!    (`acc.mul.pop`, `mul.pop`): one dispatch less per popped factor.
//! 8. [`fuse_shadow_products`]: a `mul.f` whose product only a later
//!    `shadow.acc` of the block reads becomes part of it
//!    (`shadow.acc.mul`).
//! 9. [`layout`]: blocks are ordered so that the lowering falls through
//!    where it matters, above all so that a reverse loop ends in one
//!    backward conditional jump.
//!
//! Passes 2 to 6 repeat until nothing changes (at most a few rounds). Only
//! the value of each register at each read matters: the stack and array
//! effects of the code (pops, shadow updates, calls) are never moved or
//! removed. One deviation from bit-for-bit equality with the code as built:
//! `0.0 + x` becomes `x`, which differs for `x = -0.0` in the sign of a
//! zero cotangent only.
//!
//! Functions larger than [`MAX_WORDS`] words of analysis state per set get
//! only passes 1 and 9 (their code is correct, just slower).

use hashbrown::HashMap;
use vm::bits::Bits;
use vm::ir::{BlockId, Function, Inst, Term, ValueId};
use vm::op::{Op, Operand};
use vm::Type;

/// Bound on `blocks * ceil(values / 64)`, the size of one family of
/// per-block bit sets, for running the global passes (2 to 6). Each pass
/// costs about this many word operations per round, so the bound keeps the
/// clean-up of any function to a fraction of a second; larger functions get
/// block merging and layout only.
pub const MAX_WORDS: usize = 1 << 18;

/// Rounds of the global passes, and of dead-code removal within a round.
const ROUNDS: usize = 6;

/// Clean up reverse function `f` (see the module docs).
pub fn reverse(f: &mut Function) {
    merge_blocks(f);
    let words = f.values.len().div_ceil(64);
    if f.blocks.len().saturating_mul(words) <= MAX_WORDS {
        for _ in 0..ROUNDS {
            let mut changed = known_zero(f);
            changed |= propagate_copies(f);
            changed |= remove_dead(f);
            changed |= sink_writes(f);
            changed |= coalesce(f);
            if !changed {
                break;
            }
        }
        // Blocks emptied by the rounds above (phi-edge blocks whose moves
        // became renames) are jumped over.
        merge_blocks(f);
        fuse_pops(f);
        if fuse_shadow_products(f) {
            // Blocks emptied by moving their `shadow.acc`s are jumped over.
            merge_blocks(f);
        }
    }
    layout(f);
}

// ---- operands ---------------------------------------------------------------

/// Registers `inst` reads.
fn reads(inst: &Inst) -> Vec<ValueId> {
    let mut out = inst.args.clone();
    out.extend(&inst.accs);
    out
}

/// Registers `inst` writes.
fn writes(inst: &Inst) -> Vec<ValueId> {
    let mut out: Vec<ValueId> = inst.dst.into_iter().collect();
    out.extend(&inst.accs);
    if !is_call(inst.op) {
        for (o, a) in value_operands(inst.op).zip(&inst.args) {
            if matches!(o, Operand::InOut(_)) {
                out.push(*a);
            }
        }
    }
    out
}

fn is_call(op: Op) -> bool {
    matches!(op, Op::Call | Op::CallAcc)
}

/// The `Use` and `InOut` operands of `op`, in `args` order.
fn value_operands(op: Op) -> impl Iterator<Item = Operand> {
    op.operands()
        .iter()
        .copied()
        .filter(|o| matches!(o, Operand::Use(_) | Operand::InOut(_)))
}

/// Positions in `args` that are only read (so a copy's source may replace
/// them).
fn pure_reads(inst: &Inst) -> Vec<usize> {
    if is_call(inst.op) {
        return (0..inst.args.len()).collect();
    }
    value_operands(inst.op)
        .zip(0..inst.args.len())
        .filter(|(o, _)| matches!(o, Operand::Use(_)))
        .map(|(_, i)| i)
        .collect()
}

fn successors(f: &Function) -> Vec<Vec<usize>> {
    f.blocks
        .iter()
        .map(|b| b.term.successors().iter().map(|s| s.index()).collect())
        .collect()
}

// ---- 1. block merging -------------------------------------------------------------

/// Merge each block ending in `jmp B` with `B` when `B` has no other
/// predecessor, then drop unreachable blocks. A merged phi-edge block takes
/// the name of the block it led to.
pub fn merge_blocks(f: &mut Function) {
    thread_empty_blocks(f);
    copy_returns(f);
    // Blocks jumped over above are unreachable now: they must not count as
    // predecessors.
    let n = f.blocks.len();
    let reach = reachable(f);
    let mut npreds = vec![0usize; n];
    for b in f
        .blocks
        .iter()
        .zip(&reach)
        .filter(|(_, r)| **r)
        .map(|(b, _)| b)
    {
        let mut ss = b.term.successors();
        ss.dedup();
        for s in ss {
            npreds[s.index()] += 1;
        }
    }
    let mut gone = vec![false; n];
    for a in 0..n {
        if gone[a] || !reach[a] {
            continue;
        }
        while let Term::Jmp(b) = f.blocks[a].term {
            let b = b.index();
            if b == a || b == 0 || npreds[b] != 1 || gone[b] {
                break;
            }
            let taken = std::mem::replace(
                &mut f.blocks[b],
                vm::ir::Block {
                    name: String::new(),
                    phis: Vec::new(),
                    insts: Vec::new(),
                    term: Term::RetN(Vec::new()),
                    term_loc: Default::default(),
                },
            );
            gone[b] = true;
            let into = &mut f.blocks[a];
            if into.name.starts_with("edge.") {
                into.name = taken.name;
            }
            into.insts.extend(taken.insts);
            into.term = taken.term;
            into.term_loc = taken.term_loc;
        }
    }
    // Keep the blocks reachable from the entry, in their order.
    let reach = reachable(f);
    let mut new_index = vec![0u32; n];
    let mut next = 0u32;
    for b in 0..n {
        if reach[b] {
            new_index[b] = next;
            next += 1;
        }
    }
    let old = std::mem::take(&mut f.blocks);
    for (b, mut block) in old.into_iter().enumerate() {
        if !reach[b] {
            continue;
        }
        let remap = |t: &mut BlockId| *t = BlockId(new_index[t.index()]);
        block.term.map_targets(remap);
        f.blocks.push(block);
    }
}

/// Which blocks the entry block reaches.
fn reachable(f: &Function) -> Vec<bool> {
    let n = f.blocks.len();
    let succs = successors(f);
    let mut reach = vec![false; n];
    let mut stack = vec![0usize];
    while let Some(b) = stack.pop() {
        if b < n && !std::mem::replace(&mut reach[b], true) {
            stack.extend(&succs[b]);
        }
    }
    reach
}

/// Send every edge into an empty block that only jumps on to where it
/// jumps (the entry block stays).
///
/// Each block is sent where following the chain of empty blocks from it
/// ends, or, on a cycle of empty blocks, where `n` steps along it end (`n`
/// the number of blocks; cycles are left alone in effect, since a block on
/// one only moves to another block of it). Empty blocks with their jumps
/// form a graph in which each block has at most one successor, so one walk
/// per unvisited block and one pass back along it find every block's
/// target: linear in the number of blocks.
fn thread_empty_blocks(f: &mut Function) {
    let n = f.blocks.len();
    // The block an empty block jumps to (a self-loop ends the chain).
    let next = |b: usize| {
        let block = &f.blocks[b];
        match block.term {
            Term::Jmp(t) if b != 0 && block.insts.is_empty() && t.index() != b => Some(t.index()),
            _ => None,
        }
    };
    /// Where the chain from a block ends: at a block, or on a cycle of
    /// empty blocks (`cycles[cycle][pos]`) after `dist` more steps.
    #[derive(Clone, Copy)]
    enum End {
        Unknown,
        OnPath(usize),
        At(usize),
        Cycle {
            cycle: usize,
            pos: usize,
            dist: usize,
        },
    }
    let mut end = vec![End::Unknown; n];
    let mut cycles: Vec<Vec<usize>> = Vec::new();
    let mut path: Vec<usize> = Vec::new();
    for start in 0..n {
        if !matches!(end[start], End::Unknown) {
            continue;
        }
        let mut b = start;
        loop {
            match end[b] {
                End::Unknown => {}
                End::OnPath(k) => {
                    // The walk came back to its own block `b`: the path
                    // from `b` on is a cycle.
                    let cycle = cycles.len();
                    for (pos, &c) in path[k..].iter().enumerate() {
                        end[c] = End::Cycle {
                            cycle,
                            pos,
                            dist: 0,
                        };
                    }
                    cycles.push(path.split_off(k));
                    break;
                }
                _ => break,
            }
            match next(b) {
                Some(t) => {
                    end[b] = End::OnPath(path.len());
                    path.push(b);
                    b = t;
                }
                None => {
                    end[b] = End::At(b);
                    break;
                }
            }
        }
        // Each block left on the path ends where its successor does, one
        // step further from a cycle.
        while let Some(p) = path.pop() {
            let t = next(p).expect("a block on the path has a successor");
            end[p] = match end[t] {
                End::Cycle { cycle, pos, dist } => End::Cycle {
                    cycle,
                    pos,
                    dist: dist + 1,
                },
                e => e,
            };
        }
    }
    let targets: Vec<usize> = end
        .iter()
        .map(|e| match *e {
            End::At(t) => t,
            End::Cycle { cycle, pos, dist } => {
                // `dist` steps to the cycle, the other `n - dist` around it
                // (`dist < n`: the blocks on the way are distinct).
                let c = &cycles[cycle];
                c[(pos + (n - dist) % c.len()) % c.len()]
            }
            End::Unknown | End::OnPath(_) => unreachable!("every block's end is found"),
        })
        .collect();
    let remap = |t: &mut BlockId| *t = BlockId(targets[t.index()] as u32);
    for block in &mut f.blocks {
        block.term.map_targets(remap);
    }
}

/// Replace a jump to a block that only returns by that return: one
/// dispatch fewer on the way out (the reverse of a function with several
/// `ret`s ends each path with a jump to the one `exit` block).
fn copy_returns(f: &mut Function) {
    for b in 0..f.blocks.len() {
        let Term::Jmp(t) = f.blocks[b].term else {
            continue;
        };
        let target = &f.blocks[t.index()];
        if t.index() == 0 || !target.phis.is_empty() || !target.insts.is_empty() {
            continue;
        }
        if let Term::Ret(_) | Term::RetN(_) = target.term {
            let (term, loc) = (target.term.clone(), target.term_loc);
            f.blocks[b].term = term;
            f.blocks[b].term_loc = loc;
        }
    }
}

// ---- 2. known zeros ---------------------------------------------------------------

/// The effect of `inst` on the set of registers known to hold zero.
fn zero_step(z: &mut Bits, inst: &Inst) {
    match inst.op {
        Op::Zero => {
            if let Some(d) = inst.dst {
                z.set(d, true);
            }
        }
        Op::Mov | Op::Take => {
            let (Some(d), Some(&s)) = (inst.dst, inst.args.first()) else {
                return;
            };
            let src_zero = z.has(s);
            z.set(d, src_zero);
            if inst.op == Op::Take {
                z.set(s, true);
            }
        }
        _ => {
            for w in writes(inst) {
                z.set(w, false);
            }
        }
    }
}

/// Rewrite accumulations into registers known to hold zero as writes, and
/// drop `zero`s of registers known to hold zero. Returns whether anything
/// changed.
pub fn known_zero(f: &mut Function) -> bool {
    let n = f.values.len();
    let nb = f.blocks.len();
    if nb == 0 {
        return false;
    }
    let mut entry = Bits::new(n, false);
    for (i, v) in f.values.iter().enumerate() {
        let id = ValueId(i as u32);
        if v.ty == Type::F64 && v.konst.is_none() && !f.params.contains(&id) {
            entry.set(id, true);
        }
    }
    let succs = successors(f);
    let mut ins: Vec<Option<Bits>> = vec![None; nb];
    ins[0] = Some(entry);
    let mut work: Vec<usize> = vec![0];
    let mut queued = vec![false; nb];
    queued[0] = true;
    while let Some(b) = work.pop() {
        queued[b] = false;
        let Some(mut z) = ins[b].clone() else {
            continue;
        };
        for inst in &f.blocks[b].insts {
            zero_step(&mut z, inst);
        }
        for &s in &succs[b] {
            let merged = match &ins[s] {
                None => z.clone(),
                Some(old) => {
                    let mut m = old.clone();
                    m.and_with(&z);
                    m
                }
            };
            if ins[s].as_ref() != Some(&merged) {
                // The entry block has no predecessors, so its start state
                // (every register but the parameters is zero) is never
                // merged with anything.
                ins[s] = Some(merged);
                if !queued[s] {
                    queued[s] = true;
                    work.push(s);
                }
            }
        }
    }
    let mut changed = false;
    for (b, block) in f.blocks.iter_mut().enumerate() {
        let Some(mut z) = ins[b].clone() else {
            continue;
        };
        let mut out = Vec::with_capacity(block.insts.len());
        for mut inst in std::mem::take(&mut block.insts) {
            let target = match inst.op {
                Op::Acc | Op::AccNeg | Op::AccMul | Op::Zero => {
                    inst.dst.or(inst.args.first().copied())
                }
                _ => None,
            };
            // Adding a cotangent known to be zero does nothing (a product
            // only when the other factor is a finite constant: 0 * inf is
            // nan). That holds for a shadow element too: a `shadow.acc`
            // repeats the handle and index of a forward `aget` that
            // succeeded, so dropping it drops no trap.
            let adds_zero = match inst.op {
                Op::Acc | Op::AccNeg => inst.args.get(1).is_some_and(|a| z.has(*a)),
                Op::ShadowAcc => inst.args.get(2).is_some_and(|a| z.has(*a)),
                // A strong-zero product: zero whatever the other factor.
                Op::AccMul => match inst.args.as_slice() {
                    [_, a, b] => z.has(*a) || z.has(*b),
                    _ => false,
                },
                _ => false,
            };
            if adds_zero {
                changed = true;
                continue;
            }
            if let Some(r) = target.filter(|r| z.has(*r)) {
                changed = true;
                match inst.op {
                    Op::Zero => continue,
                    Op::Acc => {
                        inst = Inst::new(Op::Mov, Some(r), inst.args[1..].to_vec(), inst.loc)
                    }
                    Op::AccNeg => {
                        inst = Inst::new(Op::NegF, Some(r), inst.args[1..].to_vec(), inst.loc)
                    }
                    _ => inst = Inst::new(Op::MulZ, Some(r), inst.args[1..].to_vec(), inst.loc),
                }
            }
            zero_step(&mut z, &inst);
            out.push(inst);
        }
        block.insts = out;
    }
    changed
}

// ---- 3. copy propagation --------------------------------------------------------

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

// ---- 4. liveness and dead code ------------------------------------------------------

/// Registers live at the start of each block (a worklist over blocks:
/// when a block's live-in set grows, its predecessors are looked at again).
fn live_in(f: &Function) -> Vec<Bits> {
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
fn live_at_term(f: &Function, live: &[Bits], b: usize) -> Bits {
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
fn live_after(
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

fn step_block_backward(block: &vm::ir::Block, l: &mut Bits) {
    for v in block.term.uses() {
        l.set(*v, true);
    }
    for inst in block.insts.iter().rev() {
        step_backward(inst, l);
    }
}

fn step_backward(inst: &Inst, l: &mut Bits) {
    for w in writes(inst) {
        l.set(w, false);
    }
    for r in reads(inst) {
        l.set(r, true);
    }
}

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

// ---- 5. sinking writes ----------------------------------------------------------------

/// For `copy t, s` followed in the same block by a pure write to `s` and
/// then more reads of `t`: move the write below the last read of `t` when it
/// does not depend on, and is not depended on by, anything it passes. The
/// copy can then be coalesced (`t` and `s` no longer hold different live
/// values at once).
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
            let Some(j) = (i + 1..insts.len()).find(|&j| writes(&insts[j]).contains(&s)) else {
                i += 1;
                continue;
            };
            let Some(last) = (j + 1..insts.len())
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

// ---- 6. coalescing ---------------------------------------------------------------------

/// Merge the two registers of a `copy` when their live ranges do not
/// overlap: one round merges a set of disjoint pairs; the caller repeats.
pub fn coalesce(f: &mut Function) -> bool {
    // Candidate pairs: (register renamed away, register kept).
    let mut pairs: Vec<(ValueId, ValueId)> = Vec::new();
    let mut seen = hashbrown::HashSet::new();
    let fixed = |f: &Function, v: ValueId| f.values[v.index()].konst.is_some();
    for block in &f.blocks {
        for inst in &block.insts {
            let (Op::Mov, Some(t), Some(&s)) = (inst.op, inst.dst, inst.args.first()) else {
                continue;
            };
            if t == s || fixed(f, t) || fixed(f, s) || f.ty(t) != f.ty(s) {
                continue;
            }
            let pair = match (f.params.contains(&t), f.params.contains(&s)) {
                (false, _) => (t, s),
                (true, false) => (s, t),
                (true, true) => continue,
            };
            if seen.insert(pair) {
                pairs.push(pair);
            }
        }
    }
    if pairs.is_empty() {
        return false;
    }
    let n = f.values.len();
    let mut of_reg: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, (a, b)) in pairs.iter().enumerate() {
        of_reg[a.index()].push(k);
        of_reg[b.index()].push(k);
    }
    let mut clash = vec![false; pairs.len()];
    let live = live_in(f);
    let other = |k: usize, v: ValueId| {
        let (a, b) = pairs[k];
        if a == v {
            b
        } else {
            a
        }
    };
    for b in 0..f.blocks.len() {
        let mut l = live_at_term(f, &live, b);
        for inst in f.blocks[b].insts.iter().rev() {
            let copy_src = (inst.op == Op::Mov)
                .then(|| inst.args.first().copied())
                .flatten();
            for w in writes(inst) {
                for &k in &of_reg[w.index()] {
                    let x = other(k, w);
                    if l.has(x) && copy_src != Some(x) {
                        clash[k] = true;
                    }
                }
            }
            step_backward(inst, &mut l);
        }
    }
    // At entry, parameters hold their arguments and every other register
    // zero: a parameter clashes with anything live there.
    if let Some(entry_live) = live.first() {
        for (k, (a, b)) in pairs.iter().enumerate() {
            let param = f.params.contains(a) || f.params.contains(b);
            if param && entry_live.has(*a) && entry_live.has(*b) {
                clash[k] = true;
            }
        }
    }
    let mut used = vec![false; n];
    let mut rename: Vec<Option<ValueId>> = vec![None; n];
    let mut any = false;
    for (k, &(a, b)) in pairs.iter().enumerate() {
        if clash[k] || used[a.index()] || used[b.index()] {
            continue;
        }
        used[a.index()] = true;
        used[b.index()] = true;
        rename[a.index()] = Some(b);
        if f.values[b.index()].name.is_none() {
            f.values[b.index()].name = f.values[a.index()].name.clone();
        }
        any = true;
    }
    if !any {
        return false;
    }
    let map = |v: &mut ValueId| {
        if let Some(r) = rename[v.index()] {
            *v = r;
        }
    };
    for block in &mut f.blocks {
        for inst in &mut block.insts {
            inst.dst.iter_mut().for_each(map);
            inst.args.iter_mut().for_each(map);
            inst.accs.iter_mut().for_each(map);
        }
        block.term.map_uses(map);
        block
            .insts
            .retain(|i| !(i.op == Op::Mov && i.dst == i.args.first().copied()));
    }
    true
}

// ---- 7. pop fusion -------------------------------------------------------------

/// `comms.pop t` directly followed by `acc.mul r, a, t` (or `r, t, a`) or
/// `mul.f d, a, t` (or `d, t, a`), where `t` is read by nothing else (not
/// the other factor, not the accumulator, dead afterwards), becomes
/// `acc.mul.pop r, a` / `mul.pop d, a`. The pop happens at the same point
/// of the stack order, and `a * t` is `t * a` bit for bit.
pub fn fuse_pops(f: &mut Function) -> bool {
    let mut changed = sink_pops(f);
    let live = live_in(f);
    for b in 0..f.blocks.len() {
        // The register a `comms.pop` right before instruction `i` writes.
        let popped = |insts: &[Inst], i: usize| match i.checked_sub(1).map(|p| &insts[p]) {
            Some(Inst {
                op: Op::CommsPop,
                dst: Some(t),
                ..
            }) => Some(*t),
            _ => None,
        };
        let live_after = live_after(f, &live, b, popped);
        let insts = &mut f.blocks[b].insts;
        let pops: Vec<(usize, ValueId)> = (1..insts.len())
            .filter_map(|i| popped(insts, i).map(|t| (i - 1, t)))
            .collect();
        let mut fused = Vec::new();
        for (p, t) in pops {
            let user = &insts[p + 1];
            if live_after[p + 1] || f.values[t.index()].ty != Type::F64 {
                continue;
            }
            let other = |a: ValueId, c: ValueId| match (a == t, c == t) {
                (true, false) => Some(c),
                (false, true) => Some(a),
                _ => None,
            };
            let new = match (user.op, user.dst, user.args.as_slice()) {
                (Op::AccMul, None, [r, a, c]) if *r != t => {
                    other(*a, *c).map(|o| Inst::new(Op::AccMulPop, None, vec![*r, o], user.loc))
                }
                (Op::MulZ, Some(d), [a, c]) if d != t => {
                    other(*a, *c).map(|o| Inst::new(Op::MulPop, Some(d), vec![o], user.loc))
                }
                _ => None,
            };
            if let Some(new) = new {
                fused.push((p, new));
            }
        }
        let mut gone = vec![false; insts.len()];
        for (p, new) in fused {
            // Replace the user, then drop the pop.
            insts[p + 1] = new;
            gone[p] = true;
            changed = true;
        }
        remove_marked(insts, &gone);
    }
    changed
}

/// `mul.f d, a, b` and, later in the same block, `shadow.acc h, i, d`,
/// with `d` dead after it and nothing in between reading `d` or writing
/// `a`, `b` or `d`, become `shadow.acc.mul h, i, a, b` in the
/// `shadow.acc`'s place: the product is computed where it is added, from
/// the same operands, and rounded before the addition as before. An array
/// read's pullback in a loop (`d.x = g * w; shadow(X)[k] += d.x`) then
/// costs one dispatch, not two.
///
/// First, a `shadow.acc` that starts a block all of whose predecessors
/// only jump to it moves to the end of each of them (it runs at the same
/// point of every path): a join of arms that each compute their
/// contribution (branchy's `v[i] > 0 ? v[i]*v[i] : 0.01*v[i]`) then
/// fuses in the arms that end in a product.
pub fn fuse_shadow_products(f: &mut Function) -> bool {
    let mut changed = sink_shadow_accs(f);
    let live = live_in(f);
    for b in 0..f.blocks.len() {
        // Whether the value a `shadow.acc` adds is live after it.
        let live_after = live_after(f, &live, b, |insts, k| match insts[k] {
            Inst {
                op: Op::ShadowAcc,
                ref args,
                ..
            } => args.get(2).copied(),
            _ => None,
        });
        let insts = &f.blocks[b].insts;
        // Pairs `(j, k)`: the product at `j`, its `shadow.acc` at `k`.
        let mut pairs = Vec::new();
        for (k, inst) in insts.iter().enumerate() {
            let (Op::ShadowAcc, &[_, _, d]) = (inst.op, inst.args.as_slice()) else {
                continue;
            };
            if live_after[k] {
                continue;
            }
            // The last instruction before `k` that touches `d`.
            let Some(j) = (0..k)
                .rev()
                .find(|&j| writes(&insts[j]).contains(&d) || reads(&insts[j]).contains(&d))
            else {
                continue;
            };
            let (Op::MulZ, Some(dst), &[a, c]) =
                (insts[j].op, insts[j].dst, insts[j].args.as_slice())
            else {
                continue;
            };
            let kept = (j + 1..k).all(|m| {
                let w = writes(&insts[m]);
                !w.contains(&a) && !w.contains(&c)
            });
            if dst == d && a != d && c != d && kept {
                pairs.push((j, k));
            }
        }
        let insts = &mut f.blocks[b].insts;
        let mut gone = vec![false; insts.len()];
        for &(j, k) in &pairs {
            let (h, i) = (insts[k].args[0], insts[k].args[1]);
            let (a, c) = (insts[j].args[0], insts[j].args[1]);
            insts[k] = Inst::new(Op::ShadowAccMul, None, vec![h, i, a, c], insts[k].loc);
            gone[j] = true;
            changed = true;
        }
        remove_marked(insts, &gone);
    }
    changed
}

/// Move a `shadow.acc` that starts a block (not the entry block) to the
/// end of each predecessor, where every predecessor ends in a `jmp` to the
/// block and none is the block itself.
fn sink_shadow_accs(f: &mut Function) -> bool {
    let preds = f.predecessors();
    let mut changed = false;
    for (b, ps) in preds.iter().enumerate().skip(1) {
        let jumps_here = |p: &BlockId| {
            p.index() != b && matches!(f.blocks[p.index()].term, Term::Jmp(t) if t.index() == b)
        };
        if ps.len() < 2 || !ps.iter().all(jumps_here) {
            continue;
        }
        while f.blocks[b]
            .insts
            .first()
            .is_some_and(|i| i.op == Op::ShadowAcc)
        {
            let inst = f.blocks[b].insts.remove(0);
            for p in ps {
                f.blocks[p.index()].insts.push(inst.clone());
            }
            changed = true;
        }
    }
    changed
}

/// Remove the instructions marked in `gone` (one flag per instruction), in
/// one pass: removing them one by one would shift the block each time.
fn remove_marked(insts: &mut Vec<Inst>, gone: &[bool]) {
    let mut at = 0;
    insts.retain(|_| {
        at += 1;
        !gone[at - 1]
    });
}

/// Move each `comms.pop t` down to just before the first instruction that
/// reads or writes `t`, past instructions that neither touch `t` nor the
/// comms stack (the order of stack operations stays as it was). Pops at
/// the top of a reverse block then sit right before their reader, where
/// [`fuse_pops`] can merge them. Returns whether anything moved.
///
/// One pass per block: pops wait in a queue (in their order) and are
/// emitted, with every pop queued before them, right before the first
/// instruction that touches their register; anything else that touches
/// the stack emits them all. Linear in the block's length (a long
/// straight-line function pops thousands of values at its top).
fn sink_pops(f: &mut Function) -> bool {
    let mut changed = false;
    for block in &mut f.blocks {
        let insts = std::mem::take(&mut block.insts);
        let n = insts.len();
        let mut out: Vec<Inst> = Vec::with_capacity(n);
        // Queued pops, oldest first, with their sequence numbers; the
        // newest queued pop of each register.
        let mut queue: std::collections::VecDeque<(usize, Inst)> = Default::default();
        let mut newest: HashMap<ValueId, usize> = HashMap::new();
        let mut order = Vec::with_capacity(n);
        let flush_to = |last: usize,
                        queue: &mut std::collections::VecDeque<(usize, Inst)>,
                        newest: &mut HashMap<ValueId, usize>,
                        out: &mut Vec<Inst>,
                        order: &mut Vec<usize>| {
            while queue.front().is_some_and(|(seq, _)| *seq <= last) {
                if let Some((seq, pop)) = queue.pop_front() {
                    if let Some(t) = pop.dst {
                        if newest.get(&t) == Some(&seq) {
                            newest.remove(&t);
                        }
                    }
                    order.push(seq);
                    out.push(pop);
                }
            }
        };
        for (seq, inst) in insts.into_iter().enumerate() {
            if let (Op::CommsPop, Some(t)) = (inst.op, inst.dst) {
                newest.insert(t, seq);
                queue.push_back((seq, inst));
                continue;
            }
            let last = if inst.op.facts().touches_comms() {
                Some(usize::MAX)
            } else {
                reads(&inst)
                    .iter()
                    .chain(writes(&inst).iter())
                    .filter_map(|v| newest.get(v).copied())
                    .max()
            };
            if let Some(last) = last {
                flush_to(last, &mut queue, &mut newest, &mut out, &mut order);
            }
            order.push(seq);
            out.push(inst);
        }
        flush_to(usize::MAX, &mut queue, &mut newest, &mut out, &mut order);
        changed |= order.iter().enumerate().any(|(i, seq)| i != *seq);
        block.insts = out;
    }
    changed
}

// ---- 9. layout ------------------------------------------------------------------

/// Order the blocks (the entry block first) so that control falls through
/// instead of jumping where it runs most often. Blocks are laid out in
/// chains along each block's preferred successor: the target of a `jmp`,
/// or the `then` target of a `br` (the lowering then branches to the
/// `else` target, which in reverse code is the way back into a loop). A
/// block with several predecessors belongs to the chain of the one that
/// reaches it by a back edge (the block dominates it), so a loop's test
/// follows the loop's body rather than the code that enters the loop.
pub fn layout(f: &mut Function) {
    let n = f.blocks.len();
    if n <= 2 {
        return;
    }
    let succs = successors(f);
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (b, ss) in succs.iter().enumerate() {
        for &s in ss {
            if !preds[s].contains(&b) {
                preds[s].push(b);
            }
        }
    }
    let succ_u32: Vec<Vec<u32>> = succs
        .iter()
        .map(|ss| ss.iter().map(|&s| s as u32).collect())
        .collect();
    let dom = vm::dom::DomTree::new(&succ_u32);
    let pref: Vec<Option<usize>> = f
        .blocks
        .iter()
        .map(|b| match &b.term {
            Term::Jmp(t) => Some(t.index()),
            Term::Br { then_, .. } => Some(then_.index()),
            _ => None,
        })
        .collect();
    let claim: Vec<Option<usize>> = (0..n)
        .map(|s| {
            let wanting: Vec<usize> = preds[s]
                .iter()
                .copied()
                .filter(|&p| p != s && pref[p] == Some(s))
                .collect();
            // A back edge: `s` dominates its source.
            let inside = wanting
                .iter()
                .copied()
                .find(|&p| dom.dominates(s as u32, p as u32));
            inside.or(wanting.first().copied())
        })
        .collect();
    let mut order = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    let chain = |b: usize, order: &mut Vec<usize>, placed: &mut Vec<bool>| {
        let mut cur = b;
        loop {
            placed[cur] = true;
            order.push(cur);
            match pref[cur] {
                Some(s) if s != 0 && !placed[s] && claim[s] == Some(cur) => cur = s,
                _ => break,
            }
        }
    };
    chain(0, &mut order, &mut placed);
    for b in 0..n {
        if !placed[b] && claim[b].is_none() {
            chain(b, &mut order, &mut placed);
        }
    }
    for b in 0..n {
        if !placed[b] {
            chain(b, &mut order, &mut placed);
        }
    }
    let mut new_index = vec![0u32; n];
    for (pos, old) in order.iter().enumerate() {
        new_index[*old] = pos as u32;
    }
    let mut old_blocks: Vec<Option<vm::ir::Block>> = std::mem::take(&mut f.blocks)
        .into_iter()
        .map(Some)
        .collect();
    for old in order {
        let Some(mut b) = old_blocks[old].take() else {
            continue;
        };
        let remap = |t: &mut BlockId| *t = BlockId(new_index[t.index()]);
        b.term.map_targets(remap);
        f.blocks.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm::ir::{Block, Loc};

    /// A reverse-like function under construction: registers are f64
    /// values `r0..rn`, those listed in `params` parameters.
    struct Build {
        f: Function,
    }

    impl Build {
        fn new(nregs: usize, params: &[usize]) -> Build {
            let mut f = Function {
                name: "t".into(),
                params: Vec::new(),
                ret: vm::ir::RetType::Many(vec![Type::F64]),
                values: Vec::new(),
                blocks: Vec::new(),
                loc: Loc::default(),
            };
            for i in 0..nregs {
                let v = f.new_value(Type::F64, Some(format!("r{i}")));
                if params.contains(&i) {
                    f.params.push(v);
                }
            }
            Build { f }
        }

        /// `br %c, then_, else_` on a new bool parameter `%c`.
        fn branch(&mut self, then_: u32, else_: u32) -> Term {
            let cond = self.f.new_value(Type::Bool, None);
            self.f.params.push(cond);
            Term::Br {
                cond,
                then_: BlockId(then_),
                else_: BlockId(else_),
            }
        }

        fn konst(&mut self, x: f64) -> ValueId {
            self.f.new_const(Type::F64, x.to_bits())
        }

        fn block(&mut self, name: &str, insts: Vec<Inst>, term: Term) -> &mut Build {
            self.f.blocks.push(Block {
                name: name.into(),
                phis: Vec::new(),
                insts,
                term,
                term_loc: Loc::default(),
            });
            self
        }
    }

    fn r(i: u32) -> ValueId {
        ValueId(i)
    }

    fn i(op: Op, dst: Option<u32>, args: &[u32]) -> Inst {
        Inst::new(
            op,
            dst.map(r),
            args.iter().map(|a| r(*a)).collect(),
            Loc::default(),
        )
    }

    fn ops(f: &Function) -> Vec<Vec<Op>> {
        f.blocks
            .iter()
            .map(|b| b.insts.iter().map(|i| i.op).collect())
            .collect()
    }

    /// The first formulation of [`sink_pops`]: each pop, the last first,
    /// moved down past everything that neither touches its register nor
    /// the stack. Quadratic; the reference for the linear one.
    fn sink_pops_reference(insts: &mut Vec<Inst>) {
        for i in (0..insts.len()).rev() {
            let (Op::CommsPop, Some(t)) = (insts[i].op, insts[i].dst) else {
                continue;
            };
            let mut j = i + 1;
            while j < insts.len() {
                let x = &insts[j];
                if x.op.facts().touches_comms() || reads(x).contains(&t) || writes(x).contains(&t) {
                    break;
                }
                j += 1;
            }
            if j > i + 1 {
                let pop = insts.remove(i);
                insts.insert(j - 1, pop);
            }
        }
    }

    #[test]
    fn sinking_pops_in_one_pass_matches_moving_them_one_by_one() {
        // Random blocks over 6 registers: pops (some of one register
        // twice), reads, writes, accumulations and pushes.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as u32
        };
        for _ in 0..3000 {
            let len = 1 + next(24) as usize;
            let insts: Vec<Inst> = (0..len)
                .map(|_| {
                    let (a, b, c) = (next(6), next(6), next(6));
                    match next(6) {
                        0 | 1 => i(Op::CommsPop, Some(a), &[]),
                        2 => i(Op::MulF, Some(a), &[b, c]),
                        3 => i(Op::Acc, None, &[a, b]),
                        4 => i(Op::CommsPush, None, &[a]),
                        _ => i(Op::Mov, Some(a), &[b]),
                    }
                })
                .collect();
            let mut want = insts.clone();
            sink_pops_reference(&mut want);
            let mut b = Build::new(6, &[]);
            b.block("entry", insts.clone(), Term::RetN(vec![]));
            let moved = sink_pops(&mut b.f);
            assert_eq!(b.f.blocks[0].insts, want, "from {insts:?}");
            assert_eq!(moved, want != insts, "from {insts:?}");
        }
    }

    #[test]
    fn a_shadow_acc_of_a_known_zero_goes() {
        // r0 handle, r1 index; r2 is never written (zero), r3 is written:
        // shadow(r0)[r1] += r2 goes, shadow(r0)[r1] += r3 stays.
        let mut b = Build::new(5, &[0, 1, 4]);
        b.block(
            "entry",
            vec![
                i(Op::ShadowAcc, None, &[0, 1, 2]),
                i(Op::Mov, Some(3), &[4]),
                i(Op::ShadowAcc, None, &[0, 1, 3]),
            ],
            Term::RetN(vec![r(4)]),
        );
        assert!(known_zero(&mut b.f));
        assert_eq!(ops(&b.f), [[Op::Mov, Op::ShadowAcc]]);
    }

    #[test]
    fn a_product_only_a_shadow_acc_reads_fuses_into_it() {
        // r0 handle, r1 index, r2 and r3 factors (operand types do not
        // matter to the pass). r4 = r2 * r3; r5 = r2 * r2;
        // shadow(r0)[r1] += r5; shadow(r0)[r1] += r4: both fuse, each in
        // its `shadow.acc`'s place, from the same operands.
        let mut b = Build::new(6, &[0, 1, 2, 3]);
        b.block(
            "entry",
            vec![
                i(Op::MulZ, Some(4), &[2, 3]),
                i(Op::MulZ, Some(5), &[2, 2]),
                i(Op::ShadowAcc, None, &[0, 1, 5]),
                i(Op::ShadowAcc, None, &[0, 1, 4]),
            ],
            Term::RetN(vec![r(2)]),
        );
        assert!(fuse_shadow_products(&mut b.f));
        let insts = &b.f.blocks[0].insts;
        assert_eq!(ops(&b.f), [[Op::ShadowAccMul, Op::ShadowAccMul]]);
        assert_eq!(insts[0].args, [r(0), r(1), r(2), r(2)]);
        assert_eq!(insts[1].args, [r(0), r(1), r(2), r(3)]);

        // Not fused: the product is read again (r4), a factor is written in
        // between (r5's factor r3), or the last write is no product (r6).
        let mut b = Build::new(7, &[0, 1, 2, 3]);
        b.block(
            "entry",
            vec![
                i(Op::MulZ, Some(4), &[2, 3]),
                i(Op::ShadowAcc, None, &[0, 1, 4]),
                i(Op::MulZ, Some(5), &[2, 3]),
                i(Op::Acc, None, &[3, 2]),
                i(Op::ShadowAcc, None, &[0, 1, 5]),
                i(Op::MulZ, Some(6), &[2, 3]),
                i(Op::Acc, None, &[6, 2]),
                i(Op::ShadowAcc, None, &[0, 1, 6]),
            ],
            Term::RetN(vec![r(4)]),
        );
        assert!(!fuse_shadow_products(&mut b.f));
    }

    #[test]
    fn a_shadow_acc_at_a_join_moves_into_the_arms_and_fuses_where_a_product_ends_one() {
        // entry: br c, a, b ; a: r4 = r2 * r3; jmp j ; b: r4 = r2; r4 += r3;
        // jmp j ; j: shadow(r0)[r1] += r4; ret.n (r2).
        let mut b = Build::new(5, &[0, 1, 2, 3]);
        let entry = b.branch(1, 2);
        b.block("entry", vec![], entry)
            .block(
                "a",
                vec![i(Op::MulZ, Some(4), &[2, 3])],
                Term::Jmp(BlockId(3)),
            )
            .block(
                "b",
                vec![i(Op::Mov, Some(4), &[2]), i(Op::Acc, None, &[4, 3])],
                Term::Jmp(BlockId(3)),
            )
            .block(
                "j",
                vec![i(Op::ShadowAcc, None, &[0, 1, 4])],
                Term::RetN(vec![r(2)]),
            );
        assert!(fuse_shadow_products(&mut b.f));
        assert_eq!(
            ops(&b.f),
            [
                vec![],
                vec![Op::ShadowAccMul],
                vec![Op::Mov, Op::Acc, Op::ShadowAcc],
                vec![]
            ]
        );
        // A join also entered by a branch keeps its `shadow.acc`.
        let mut b = Build::new(5, &[0, 1, 2, 3]);
        let entry = b.branch(1, 2);
        b.block("entry", vec![], entry)
            .block(
                "a",
                vec![i(Op::MulZ, Some(4), &[2, 3])],
                Term::Jmp(BlockId(2)),
            )
            .block(
                "j",
                vec![i(Op::ShadowAcc, None, &[0, 1, 4])],
                Term::RetN(vec![r(2)]),
            );
        assert!(!fuse_shadow_products(&mut b.f));
    }

    #[test]
    fn a_jump_to_a_block_that_only_returns_becomes_the_return() {
        // entry: br c, a, b ; a: r1 += r0; jmp exit ; b: r2 += r0; jmp exit ;
        // exit: ret.n (r1, r2). Both jumps become the return, and the exit
        // block, now unreachable, goes.
        let mut b = Build::new(3, &[0]);
        let entry = b.branch(1, 2);
        b.block("entry", vec![], entry)
            .block("a", vec![i(Op::Acc, None, &[1, 0])], Term::Jmp(BlockId(3)))
            .block("b", vec![i(Op::Acc, None, &[2, 0])], Term::Jmp(BlockId(3)))
            .block("exit", vec![], Term::RetN(vec![r(1), r(2)]));
        merge_blocks(&mut b.f);
        assert_eq!(b.f.blocks.len(), 3);
        for block in &b.f.blocks[1..] {
            assert_eq!(block.term, Term::RetN(vec![r(1), r(2)]));
        }
        // A return block that computes something is not copied.
        let mut b = Build::new(2, &[0]);
        b.block("entry", vec![], Term::Jmp(BlockId(1))).block(
            "exit",
            vec![i(Op::Acc, None, &[1, 0])],
            Term::RetN(vec![r(1)]),
        );
        copy_returns(&mut b.f);
        assert_eq!(b.f.blocks[0].term, Term::Jmp(BlockId(1)));
    }

    #[test]
    fn accumulating_into_a_known_zero_is_a_write_and_zeroing_it_again_goes() {
        // r1 = 0 at entry; r1 += r0; r2 = 0 (known); r2 += r1 * r0.
        let mut b = Build::new(3, &[0]);
        b.block(
            "entry",
            vec![
                i(Op::Acc, None, &[1, 0]),
                i(Op::Zero, Some(2), &[]),
                i(Op::AccMul, None, &[2, 1, 0]),
            ],
            Term::RetN(vec![r(2)]),
        );
        assert!(known_zero(&mut b.f));
        assert_eq!(ops(&b.f), [[Op::Mov, Op::MulZ]]);
        assert_eq!(b.f.blocks[0].insts[0].dst, Some(r(1)));
        assert_eq!(b.f.blocks[0].insts[1].args, [r(1), r(0)]);
    }

    #[test]
    fn a_register_written_on_one_path_only_is_not_known_zero_at_the_join() {
        // entry: br r?, a, j ; a: r1 += r0 ; j: r1 += r0 (must stay an acc).
        let mut b = Build::new(2, &[0]);
        let entry = b.branch(1, 2);
        b.block("entry", vec![], entry)
            .block("a", vec![i(Op::Acc, None, &[1, 0])], Term::Jmp(BlockId(2)))
            .block("j", vec![i(Op::Acc, None, &[1, 0])], Term::RetN(vec![r(1)]));
        known_zero(&mut b.f);
        assert_eq!(ops(&b.f), [vec![], vec![Op::Mov], vec![Op::Acc]]);
    }

    #[test]
    fn adding_a_zero_cotangent_goes_whatever_the_other_factor() {
        // r1 is never written (zero); r2 += r1; r2 += r1 * 2.0 and
        // r2 += r1 * r0 go too: `acc.mul` is a strong-zero product, so a
        // zero factor adds zero even where r0 is inf.
        let mut b = Build::new(3, &[0]);
        let two = b.konst(2.0);
        b.block(
            "entry",
            vec![
                i(Op::Acc, None, &[2, 0]),
                i(Op::Acc, None, &[2, 1]),
                Inst::new(Op::AccMul, None, vec![r(2), r(1), two], Loc::default()),
                i(Op::AccMul, None, &[2, 1, 0]),
            ],
            Term::RetN(vec![r(2)]),
        );
        known_zero(&mut b.f);
        assert_eq!(ops(&b.f), [[Op::Mov]]);
    }

    #[test]
    fn dead_writes_go_and_a_take_keeps_its_live_half() {
        // r1 = r0 (dead); take r2 <- r0 with r0 dead afterwards: a copy.
        let mut b = Build::new(3, &[0]);
        b.block(
            "entry",
            vec![i(Op::Mov, Some(1), &[0]), i(Op::Take, Some(2), &[0])],
            Term::RetN(vec![r(2)]),
        );
        assert!(remove_dead(&mut b.f));
        assert_eq!(ops(&b.f), [[Op::Mov]]);
        assert_eq!(b.f.blocks[0].insts[0].dst, Some(r(2)));
    }

    #[test]
    fn copies_merge_registers_only_when_their_live_ranges_do_not_overlap() {
        // r1 = r0; r2 = r1 * r1; ret r2: r1 and r0 can share.
        let mut b = Build::new(3, &[0]);
        b.block(
            "entry",
            vec![i(Op::Mov, Some(1), &[0]), i(Op::MulF, Some(2), &[1, 1])],
            Term::RetN(vec![r(2)]),
        );
        assert!(coalesce(&mut b.f));
        assert_eq!(ops(&b.f), [[Op::MulF]]);
        assert_eq!(b.f.blocks[0].insts[0].args, [r(0), r(0)]);
        // r1 = r0; r0 = r0 * r0; r2 = r1 + r0: r1 must keep the old r0.
        let mut b = Build::new(3, &[0]);
        b.block(
            "entry",
            vec![
                i(Op::Mov, Some(1), &[0]),
                i(Op::MulF, Some(0), &[0, 0]),
                i(Op::AddF, Some(2), &[1, 0]),
            ],
            Term::RetN(vec![r(2)]),
        );
        assert!(!coalesce(&mut b.f));
    }

    #[test]
    fn a_write_sinks_below_the_last_reader_of_its_copy() {
        // r1 = r0; r0 = r0 * r2; r3 += r1 * r2  ->  the mul moves last, and
        // then r1 and r0 can share a register.
        let mut b = Build::new(4, &[0, 2]);
        b.block(
            "entry",
            vec![
                i(Op::Mov, Some(1), &[0]),
                i(Op::MulF, Some(0), &[0, 2]),
                i(Op::AccMul, None, &[3, 1, 2]),
            ],
            Term::RetN(vec![r(0), r(3)]),
        );
        assert!(sink_writes(&mut b.f));
        assert_eq!(ops(&b.f), [[Op::Mov, Op::AccMul, Op::MulF]]);
        assert!(coalesce(&mut b.f));
        assert_eq!(ops(&b.f), [[Op::AccMul, Op::MulF]]);
    }

    #[test]
    fn a_loop_test_is_laid_out_after_the_loop_body() {
        // 0 -> 1 (test) -> {2 exit, 3 body}; 3 -> 1.
        let mut b = Build::new(1, &[0]);
        let test = b.branch(2, 3);
        b.block("entry", vec![], Term::Jmp(BlockId(1)))
            .block("test", vec![], test)
            .block("exit", vec![], Term::RetN(vec![r(0)]))
            .block(
                "body",
                vec![i(Op::NegF, Some(0), &[0])],
                Term::Jmp(BlockId(1)),
            );
        layout(&mut b.f);
        let names: Vec<&str> = b.f.blocks.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["entry", "body", "test", "exit"]);
        assert_eq!(b.f.blocks[1].term, Term::Jmp(BlockId(2)));
    }

    #[test]
    fn a_pop_read_once_by_a_product_is_fused_into_it_after_later_pops_sink() {
        // pop r2; pop r3; r4 = r0 * r2; r5 = sin r3: r3's pop sinks to the
        // sin, and r2's pop fuses into the mul (r2 is read nowhere else).
        let mut b = Build::new(6, &[0]);
        b.block(
            "entry",
            vec![
                i(Op::CommsPop, Some(2), &[]),
                i(Op::CommsPop, Some(3), &[]),
                i(Op::MulZ, Some(4), &[0, 2]),
                i(Op::Sin, Some(5), &[3]),
            ],
            Term::RetN(vec![r(4), r(5)]),
        );
        assert!(fuse_pops(&mut b.f));
        assert_eq!(ops(&b.f), [[Op::MulPop, Op::CommsPop, Op::Sin]]);
        assert_eq!(b.f.blocks[0].insts[0].args, [r(0)]);
        // A pop never moves past another stack operation, and a value read
        // twice is not fused.
        let mut b = Build::new(6, &[0]);
        b.block(
            "entry",
            vec![
                i(Op::CommsPop, Some(2), &[]),
                i(Op::CommsPop, Some(3), &[]),
                i(Op::MulZ, Some(4), &[3, 2]),
                i(Op::AddF, Some(5), &[2, 0]),
            ],
            Term::RetN(vec![r(4), r(5)]),
        );
        fuse_pops(&mut b.f);
        assert_eq!(ops(&b.f), [[Op::CommsPop, Op::MulPop, Op::AddF]]);
    }

    #[test]
    fn blocks_with_one_predecessor_are_merged_and_empty_ones_skipped() {
        let mut b = Build::new(1, &[0]);
        b.block("entry", vec![], Term::Jmp(BlockId(1)))
            .block("edge.x", vec![], Term::Jmp(BlockId(2)))
            .block(
                "rev.x",
                vec![i(Op::NegF, Some(0), &[0])],
                Term::RetN(vec![r(0)]),
            );
        merge_blocks(&mut b.f);
        assert_eq!(b.f.blocks.len(), 1);
        assert_eq!(ops(&b.f), [[Op::NegF]]);
    }

    /// A xorshift generator: `next(n)` is a number below `n`.
    fn rng(mut seed: u64) -> impl FnMut(u64) -> u32 {
        move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as u32
        }
    }

    /// The first formulation of [`propagate_copies`]: the valid copies in
    /// a list, searched for every read and filtered after every write.
    /// Quadratic in the copies valid at once; the reference for the
    /// indexed one.
    fn propagate_copies_reference(f: &mut Function) -> bool {
        let mut changed = false;
        for block in &mut f.blocks {
            let mut copies: Vec<(ValueId, ValueId)> = Vec::new();
            let lookup = |copies: &[(ValueId, ValueId)], v: ValueId| {
                copies.iter().find(|(t, _)| *t == v).map(|(_, s)| *s)
            };
            for inst in &mut block.insts {
                for i in pure_reads(inst) {
                    if let Some(s) = lookup(&copies, inst.args[i]) {
                        inst.args[i] = s;
                        changed = true;
                    }
                }
                let ws = writes(inst);
                copies.retain(|(t, s)| !ws.contains(t) && !ws.contains(s));
                if inst.op == Op::Mov {
                    if let (Some(t), Some(&s)) = (inst.dst, inst.args.first()) {
                        if t != s {
                            copies.push((t, s));
                        }
                    }
                }
            }
            block.term.map_uses(|v| {
                if let Some(s) = lookup(&copies, *v) {
                    *v = s;
                    changed = true;
                }
            });
        }
        changed
    }

    #[test]
    fn propagating_copies_through_an_index_matches_searching_a_list() {
        // Random functions of 1 to 3 blocks over 6 registers, copies
        // frequent (chains of them too), with every kind of write: a
        // definition, an in-out operand (`acc`), both at once (`take`).
        let mut next = rng(0x9e37_79b9_7f4a_7c15);
        let mut changed_some = 0;
        for _ in 0..3000 {
            let mut b = Build::new(6, &[0, 1]);
            let nblocks = 1 + next(3);
            for k in 0..nblocks {
                let len = next(20) as usize;
                let insts: Vec<Inst> = (0..len)
                    .map(|_| {
                        let (a, x, y) = (next(6), next(6), next(6));
                        match next(10) {
                            0..=3 => i(Op::Mov, Some(a), &[x]),
                            4 => i(Op::MulF, Some(a), &[x, y]),
                            5 => i(Op::Acc, None, &[a, x]),
                            6 => i(Op::Take, Some(a), &[x]),
                            7 => i(Op::AccMul, None, &[a, x, y]),
                            8 => i(Op::Zero, Some(a), &[]),
                            _ => i(Op::CommsPop, Some(a), &[]),
                        }
                    })
                    .collect();
                let term = match next(4) {
                    _ if k + 1 < nblocks && next(2) == 0 => Term::Jmp(BlockId(k + 1)),
                    0 => Term::Br {
                        cond: r(next(6)),
                        then_: BlockId(0),
                        else_: BlockId(nblocks - 1),
                    },
                    1 => Term::Ret(r(next(6))),
                    2 => Term::RetN((0..next(4)).map(|_| r(next(6))).collect()),
                    _ => Term::Jmp(BlockId(next(nblocks as u64))),
                };
                b.block("b", insts, term);
            }
            let mut want = b.f.clone();
            let want_changed = propagate_copies_reference(&mut want);
            let from = b.f.clone();
            let changed = propagate_copies(&mut b.f);
            assert_eq!(b.f, want, "from {from:?}");
            assert_eq!(changed, want_changed, "from {from:?}");
            changed_some += usize::from(changed);
        }
        assert!(changed_some > 1000, "{changed_some}");
    }

    /// The first formulation of [`thread_empty_blocks`]: each block's
    /// chain of empty blocks followed step by step, at most `n` steps.
    /// Quadratic in the length of a chain; the reference for the linear
    /// one.
    fn thread_empty_blocks_reference(f: &mut Function) {
        let n = f.blocks.len();
        let forward = |f: &Function, mut b: usize| {
            for _ in 0..n {
                let block = &f.blocks[b];
                match block.term {
                    Term::Jmp(t) if b != 0 && block.insts.is_empty() && t.index() != b => {
                        b = t.index()
                    }
                    _ => break,
                }
            }
            b
        };
        let targets: Vec<usize> = (0..n).map(|b| forward(f, b)).collect();
        let remap = |t: &mut BlockId| *t = BlockId(targets[t.index()] as u32);
        for block in &mut f.blocks {
            block.term.map_targets(remap);
        }
    }

    #[test]
    fn threading_empty_blocks_in_one_walk_matches_following_each_chain() {
        // Random graphs of 1 to 12 blocks, most of them empty and ending
        // in a jump: chains, self-loops, cycles of empty blocks (entered
        // from a chain or not), jumps to the entry.
        let mut next = rng(0x2545_f491_4f6c_dd1d);
        let (mut cycles, mut moved) = (0, 0);
        for _ in 0..10_000 {
            let n = 1 + next(12);
            let mut b = Build::new(1, &[0]);
            for _ in 0..n {
                let insts = if next(4) == 0 {
                    vec![i(Op::NegF, Some(0), &[0])]
                } else {
                    vec![]
                };
                let term = match next(8) {
                    0 => Term::RetN(vec![r(0)]),
                    1 => Term::Br {
                        cond: r(0),
                        then_: BlockId(next(n as u64)),
                        else_: BlockId(next(n as u64)),
                    },
                    _ => Term::Jmp(BlockId(next(n as u64))),
                };
                b.block("b", insts, term);
            }
            let mut want = b.f.clone();
            thread_empty_blocks_reference(&mut want);
            let from = b.f.clone();
            thread_empty_blocks(&mut b.f);
            assert_eq!(b.f, want, "from {from:?}");
            moved += usize::from(want != from);
            // On a cycle of two or more empty blocks (or on the way into
            // one), a block's target still jumps on; elsewhere it ends
            // the chain.
            let step = |f: &Function, k: usize| match f.blocks[k].term {
                Term::Jmp(t) if k != 0 && f.blocks[k].insts.is_empty() && t.index() != k => {
                    Some(t.index())
                }
                _ => None,
            };
            let on_cycle =
                (0..n as usize).any(|k| step(&want, k).is_some_and(|t| step(&want, t).is_some()));
            cycles += usize::from(on_cycle);
        }
        assert!(moved > 5000 && cycles > 400, "{moved} {cycles}");
    }
}
