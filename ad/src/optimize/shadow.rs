//! Pass 8, shadow products: a `shadow.acc` that starts a join moves into its
//! predecessors, and a `mul.z` whose product only a later `shadow.acc` reads
//! becomes part of it (`shadow.acc.mul`).

use super::*;

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
pub(super) fn sink_shadow_accs(f: &mut Function) -> bool {
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
