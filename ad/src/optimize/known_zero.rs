//! Pass 2, known zeros: a forward must-analysis of the registers holding zero;
//! accumulations into them become writes, zeroings of them disappear, and
//! adding a known zero disappears.

use super::*;

/// The effect of `inst` on the set of registers known to hold zero.
pub(super) fn zero_step(z: &mut Bits, inst: &Inst) {
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

/// How many times [`known_zero`]'s iteration may step through the
/// function's instructions before it gives up ([`give_up`]). Loops converge
/// in two or three trips; each nesting level may add one.
const MAX_TRIPS: usize = 8;

/// The safe answer of an analysis that did not converge: nothing is known
/// to be zero at the start of any block but the entry (whose start state is
/// exact); blocks not reached yet are left alone (they are rewritten
/// only when reached).
fn give_up(ins: &mut [Option<Bits>]) {
    for z in ins.iter_mut().skip(1).flatten() {
        z.clear();
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
    // Instructions the iteration may step through: a few times the function.
    // A cycle that passes knowledge on one register per trip (a loop
    // rotating N cotangents through `take`s) would otherwise take N trips
    // of N instructions each; past the bound, the analysis gives up.
    let size: usize = f.blocks.iter().map(|b| b.insts.len() + 1).sum();
    let mut steps_left = size.saturating_mul(MAX_TRIPS);
    while let Some(b) = work.pop() {
        queued[b] = false;
        let Some(mut z) = ins[b].clone() else {
            continue;
        };
        let steps = f.blocks[b].insts.len() + 1;
        if steps > steps_left {
            give_up(&mut ins);
            break;
        }
        steps_left -= steps;
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
