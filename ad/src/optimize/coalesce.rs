//! Pass 6, coalescing: a copy between registers whose live ranges do not
//! overlap merges them.

use super::*;

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
