//! Counter steps: which `sub.i %c, %c, k` of a constant steps by `-k`, so that
//! a counted loop's decrement fuses into its compare-and-branch
//! (`jmp.step.if.<cc>.i`).

use super::*;

/// Where the negation of a step constant is: an i64 constant of the
/// function, or extra constant `j` of the frame.
#[derive(Clone, Copy)]
pub(super) enum Neg {
    Value(usize),
    Extra(usize),
}

/// The interpreter's step-and-branch only adds (one instruction less per
/// loop iteration than choosing between adding and subtracting), so a
/// counter counted down by a constant, `sub.i %c, %c, k`, fuses into a
/// step that adds `-k`. For every `sub.i` by an i64 constant `k` (other
/// than `i64::MIN`) that may be such a step, its result going to a phi or
/// an i64 comparison (a counter; `n - 1` passed to a call is not), this
/// finds the function's constant `-k`, or makes it an extra constant
/// register (the bits listed in the second result). First result: `(value
/// of k, where -k is)`.
pub(super) fn negated_steps(f: &ir::Function, consts: &[usize]) -> (Vec<(usize, Neg)>, Vec<u64>) {
    let mut negs: Vec<(usize, Neg)> = Vec::new();
    let mut extra: Vec<u64> = Vec::new();
    let int_const = |v: usize| match &f.values.get(v) {
        Some(d) if d.ty == Type::I64 => d.konst.map(|b| b as i64),
        _ => None,
    };
    let mut counts = vec![false; f.values.len()];
    for b in &f.blocks {
        for (_, v) in b.phis.iter().flat_map(|phi| &phi.incoming) {
            if let Some(c) = counts.get_mut(v.index()) {
                *c = true;
            }
        }
        for inst in &b.insts {
            if matches!(
                inst.op,
                Op::LtI | Op::LeI | Op::GtI | Op::GeI | Op::EqI | Op::NeI
            ) {
                for v in &inst.args {
                    if let Some(c) = counts.get_mut(v.index()) {
                        *c = true;
                    }
                }
            }
        }
    }
    for inst in f.blocks.iter().flat_map(|b| &b.insts) {
        let (Op::SubI, [_, k]) = (inst.op, inst.args.as_slice()) else {
            continue;
        };
        if inst
            .dst
            .is_none_or(|d| counts.get(d.index()) != Some(&true))
        {
            continue;
        }
        let k = k.index();
        let Some(kv) = int_const(k) else { continue };
        if kv == i64::MIN || negs.iter().any(|(seen, _)| *seen == k) || !consts.contains(&k) {
            continue;
        }
        let want = kv.wrapping_neg();
        let neg = match consts.iter().find(|&&c| int_const(c) == Some(want)) {
            Some(&c) => Neg::Value(c),
            None => match extra.iter().position(|&b| b as i64 == want) {
                Some(j) => Neg::Extra(j),
                None => {
                    extra.push(want as u64);
                    Neg::Extra(extra.len() - 1)
                }
            },
        };
        negs.push((k, neg));
    }
    (negs, extra)
}
