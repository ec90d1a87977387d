//! Which cotangents receive exactly one contribution per instance of their
//! value: those are written, not accumulated, and never zeroed.

use super::*;

/// Values whose cotangent receives exactly one contribution each time the
/// value is defined, so the reverse code can write it instead of adding to
/// it and never needs to zero it: active f64 values with a single use that
/// runs whenever the definition does and whose reverse adds into the value
/// with a plain `acc` / `acc.neg` / `acc.mul` (not a callee's `call.acc`):
///
/// * an instruction later in the defining block, or its `ret`;
/// * a phi of the successor, when the defining block ends in `jmp` to it.
pub(super) fn single_contribution(p: &Function, cfg: &Cfg, active: &[bool]) -> Vec<bool> {
    let n = p.values.len();
    let uses = p.use_counts();
    // A flag per value, not `p.params.contains`: that search per operand
    // made functions of thousands of parameters quadratic.
    let mut is_param = vec![false; n];
    for v in &p.params {
        is_param[v.index()] = true;
    }
    let mut once = vec![false; n];
    for (bi, b) in p.blocks.iter().enumerate() {
        let defined_here = |v: ValueId| cfg.def_block[v.index()] == Some(BlockId(bi as u32));
        let candidate = |v: ValueId| {
            active[v.index()]
                && p.ty(v) == Type::F64
                && uses[v.index()] == 1
                && p.values[v.index()].konst.is_none()
                && !is_param[v.index()]
                && !b.phis.iter().any(|ph| ph.dst == v)
        };
        for inst in &b.insts {
            if inst.op == Op::Call {
                continue;
            }
            for v in &inst.args {
                if candidate(*v) && defined_here(*v) {
                    once[v.index()] = true;
                }
            }
        }
        if let Term::Ret(v) = &b.term {
            if candidate(*v) && defined_here(*v) {
                once[v.index()] = true;
            }
        }
        if let Term::Jmp(succ) = &b.term {
            for phi in &p.blocks[succ.index()].phis {
                for (label, v) in &phi.incoming {
                    if label.index() == bi && candidate(*v) && defined_here(*v) {
                        once[v.index()] = true;
                    }
                }
            }
        }
    }
    once
}
