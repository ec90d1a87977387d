//! Which registers an instruction reads and writes, the CFG's successors, and
//! removing marked instructions: what every pass asks of the code.

use super::*;

/// Registers `inst` reads.
pub(super) fn reads(inst: &Inst) -> Vec<ValueId> {
    let mut out = inst.args.clone();
    out.extend(&inst.accs);
    out
}

/// Registers `inst` writes.
pub(super) fn writes(inst: &Inst) -> Vec<ValueId> {
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

pub(super) fn is_call(op: Op) -> bool {
    matches!(op, Op::Call | Op::CallAcc)
}

/// The `Use` and `InOut` operands of `op`, in `args` order.
pub(super) fn value_operands(op: Op) -> impl Iterator<Item = Operand> {
    op.operands()
        .iter()
        .copied()
        .filter(|o| matches!(o, Operand::Use(_) | Operand::InOut(_)))
}

/// Positions in `args` that are only read (so a copy's source may replace
/// them).
pub(super) fn pure_reads(inst: &Inst) -> Vec<usize> {
    if is_call(inst.op) {
        return (0..inst.args.len()).collect();
    }
    value_operands(inst.op)
        .zip(0..inst.args.len())
        .filter(|(o, _)| matches!(o, Operand::Use(_)))
        .map(|(_, i)| i)
        .collect()
}

pub(super) fn successors(f: &Function) -> Vec<Vec<usize>> {
    f.blocks
        .iter()
        .map(|b| b.term.successors().iter().map(|s| s.index()).collect())
        .collect()
}

/// Remove the instructions marked in `gone` (one flag per instruction), in
/// one pass: removing them one by one would shift the block each time.
pub(super) fn remove_marked(insts: &mut Vec<Inst>, gone: &[bool]) {
    let mut at = 0;
    insts.retain(|_| {
        at += 1;
        !gone[at - 1]
    });
}
