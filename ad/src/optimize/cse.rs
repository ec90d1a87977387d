//! Common subexpressions within a block, for the tangent code of derived
//! forward functions: such a tangent computes values the forward function
//! computes too (the tangent rule of `cos x` needs `sin x`, which the
//! forward function already computes and pushes for the reverse sweep), so
//! the Hessian-vector product's forward code would evaluate each such
//! transcendental twice.

use super::*;

/// In a function in SSA form (every value written at most once; others
/// are left alone), a pure instruction that computes what an earlier one of
/// its block computed (same opcode, operands and immediate) is removed and
/// its value's readers (instructions, phis, terminators) read the earlier
/// result, which dominates them. Calls, accumulations and instructions
/// writing more than one register are left alone. Whether anything
/// changed.
pub fn common_subexpressions(f: &mut Function) -> bool {
    let n = f.values.len();
    let mut defs = vec![0u32; n];
    for p in &f.params {
        defs[p.index()] += 1;
    }
    for b in &f.blocks {
        for p in &b.phis {
            defs[p.dst.index()] += 1;
        }
        for i in &b.insts {
            for w in writes(i) {
                defs[w.index()] += 1;
            }
        }
    }
    if defs.iter().any(|&d| d > 1) {
        return false;
    }
    // rename[d] = the earlier value computing what `d` computed.
    let mut rename: Vec<Option<ValueId>> = vec![None; n];
    let mut any = false;
    let mut avail: HashMap<(Op, Vec<ValueId>, u32), ValueId> = HashMap::new();
    for block in &mut f.blocks {
        avail.clear();
        let mut gone = vec![false; block.insts.len()];
        for (k, inst) in block.insts.iter_mut().enumerate() {
            for a in &mut inst.args {
                if let Some(e) = rename[a.index()] {
                    *a = e;
                }
            }
            let Some(d) = inst.dst else { continue };
            let candidate = inst.op.facts().pure
                && inst.op != Op::Mov
                && inst.callee.is_none()
                && inst.accs.is_empty()
                && !inst.args.is_empty()
                && writes(inst).len() == 1;
            if !candidate {
                continue;
            }
            let key = (inst.op, inst.args.clone(), inst.imm);
            match avail.get(&key) {
                Some(&e) => {
                    rename[d.index()] = Some(e);
                    gone[k] = true;
                    any = true;
                }
                None => {
                    avail.insert(key, d);
                }
            }
        }
        remove_marked(&mut block.insts, &gone);
    }
    if !any {
        return false;
    }
    let map = |v: &mut ValueId| {
        if let Some(e) = rename[v.index()] {
            *v = e;
        }
    };
    for block in &mut f.blocks {
        for p in &mut block.phis {
            for (_, v) in &mut p.incoming {
                map(v);
            }
        }
        for inst in &mut block.insts {
            inst.args.iter_mut().for_each(map);
            inst.accs.iter_mut().for_each(map);
        }
        block.term.map_uses(map);
    }
    true
}
