//! Pass 7, pop fusion: pops sink to their first reader, and a pop read once,
//! right after, as a factor of an `acc.mul` or `mul.z` becomes part of it
//! (`acc.mul.pop`, `mul.pop`).

use super::*;

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
pub(super) fn sink_pops(f: &mut Function) -> bool {
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
