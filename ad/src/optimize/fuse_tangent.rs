//! Fewer instructions in tangent code (forward mode, and the tangent of a
//! derived forward function in a Hessian-vector product): a tangent sum
//! takes its products in (`add.mul.z`), and a tangent's array load gets its
//! own copy of a row-major index so that both loads fuse with their sums
//! (`aget.add`). See `docs/ad.md`, "Forward mode".

use super::*;

/// In a function in SSA form (others are left alone), where `first` is the
/// first value the tangent transform made (the tangent values; values
/// before it are the primal's, whose code is never changed), within each
/// block:
///
/// * `y = add.f s, m` with `m = mul.z c, d` read only there becomes
///   `y = add.mul.z s, c, d` (the same sum, rounded the same way);
/// * `y = add.f s, m` with `m = add.mul.z t, a, b` and `t = mul.z c, d`,
///   each read only there (a product's tangent summed: a dot product's
///   step), becomes `t' = add.mul.z s, c, d; y = add.mul.z t', a, b`: two
///   instructions instead of three, the sum `(s + c⊙d) + a⊙b` instead of
///   `s + (c⊙d + a⊙b)` (the same terms, one rounding moved);
/// * `k = add.i p, q; v = aget A, k; w = aget T, k` in a row, `w` a
///   tangent's load and `k` read by the two loads only, gets `k' = add.i p,
///   q` before `w`'s load, which reads it: each index then has one reader
///   right after it, which the lowering fuses into `aget.add`;
/// * a tangent's load read only by a tangent sum moves down to right
///   before it (`sink_tangent_loads`), which the lowering fuses with it
///   into `add.mul.aget`.
///
/// `add.f`'s operands are taken in either order (the sum is the same). A
/// product defined in another block is left alone (it may be computed
/// once outside a loop that sums it). Whether anything changed.
pub fn fuse_tangent(f: &mut Function, first: usize) -> bool {
    let n = f.values.len();
    let mut defs = vec![0u32; n];
    let mut uses = vec![0u32; n];
    for p in &f.params {
        defs[p.index()] += 1;
    }
    for b in &f.blocks {
        for p in &b.phis {
            defs[p.dst.index()] += 1;
            for (_, v) in &p.incoming {
                uses[v.index()] += 1;
            }
        }
        for i in &b.insts {
            for w in writes(i) {
                defs[w.index()] += 1;
            }
            for r in reads(i) {
                uses[r.index()] += 1;
            }
        }
        for v in b.term.uses() {
            uses[v.index()] += 1;
        }
    }
    if defs.iter().any(|&d| d > 1) {
        return false;
    }
    // The phis each value flows into.
    let mut feeds: HashMap<ValueId, Vec<ValueId>> = HashMap::new();
    for b in &f.blocks {
        for p in &b.phis {
            for (_, v) in &p.incoming {
                feeds.entry(*v).or_default().push(p.dst);
            }
        }
    }
    let tangent = |v: ValueId| v.index() >= first;
    let once = |v: ValueId| tangent(v) && uses.get(v.index()) == Some(&1);
    let mut any = false;
    for bi in 0..f.blocks.len() {
        let insts = std::mem::take(&mut f.blocks[bi].insts);
        let mut out: Vec<Inst> = Vec::with_capacity(insts.len() + 2);
        let mut gone: Vec<bool> = Vec::with_capacity(insts.len() + 2);
        // Where in `out` each value of this block is defined.
        let mut at: HashMap<ValueId, usize> = HashMap::new();
        for inst in insts {
            let mut inst = inst;
            if let (Op::AddF, Some(y), &[x0, x1]) = (inst.op, inst.dst, inst.args.as_slice()) {
                if tangent(y) {
                    for (s, m) in [(x0, x1), (x1, x0)] {
                        if s == m || !once(m) {
                            continue;
                        }
                        let Some(&km) = at.get(&m) else { continue };
                        let def = &out[km];
                        match (def.op, def.args.as_slice()) {
                            (Op::MulZ, &[c, d]) => {
                                gone[km] = true;
                                inst = Inst::new(Op::AddMulZ, Some(y), vec![s, c, d], inst.loc);
                                any = true;
                                break;
                            }
                            (Op::AddMulZ, &[t, a, b]) if once(t) && t != s => {
                                let Some(&kt) = at.get(&t) else { continue };
                                let (Op::MulZ, &[c, d]) = (out[kt].op, out[kt].args.as_slice())
                                else {
                                    continue;
                                };
                                gone[km] = true;
                                gone[kt] = true;
                                let t2 = f.new_value(Type::F64, None);
                                out.push(Inst::new(Op::AddMulZ, Some(t2), vec![s, c, d], inst.loc));
                                gone.push(false);
                                inst = Inst::new(Op::AddMulZ, Some(y), vec![t2, a, b], inst.loc);
                                any = true;
                                break;
                            }
                            _ => {}
                        }
                    }
                }
            }
            if let (Op::AGet, Some(w), &[arr, k]) = (inst.op, inst.dst, inst.args.as_slice()) {
                let len = out.len();
                let pattern = tangent(w)
                    && !tangent(k)
                    && uses[k.index()] == 2
                    && len >= 2
                    && !gone[len - 1]
                    && !gone[len - 2]
                    && out[len - 1].op == Op::AGet
                    && out[len - 1].args.get(1) == Some(&k)
                    && out[len - 1].args.first() != Some(&arr)
                    && out[len - 2].op == Op::AddI
                    && out[len - 2].dst == Some(k);
                if pattern {
                    let sum = out[len - 2].args.clone();
                    let k2 = f.new_value(Type::I64, None);
                    out.push(Inst::new(Op::AddI, Some(k2), sum, inst.loc));
                    gone.push(false);
                    inst.args[1] = k2;
                    any = true;
                }
            }
            if let Some(d) = inst.dst {
                at.insert(d, out.len());
            }
            out.push(inst);
            gone.push(false);
        }
        remove_marked(&mut out, &gone);
        any |= sink_tangent_loads(&mut out, &tangent, &uses, &feeds);
        f.blocks[bi].insts = out;
    }
    any
}

/// Within one block's instructions: a tangent's load `w = aget T, k` right
/// after its value's load `v = aget A, k` (the same index; or `w = aget T,
/// k2` with its own copy `k2 = add.i p, q` of the value's index `k = add.i
/// p, q`, the two moving together), read only by a
/// tangent sum `add.mul.z s, w, d` (or `s, d, w`) further down, moves to
/// right before that sum, which the lowering then fuses with it
/// (`add.mul.aget`). Only past instructions that write no array and call
/// nothing (pure ones and other loads): the element read is the same. A
/// tangent array is as long as its value's array, so the load traps only
/// where the value's load before it already has. Not past the next value
/// of a phi the load reads (a loop's counter stepped): the step would then
/// need a register of its own and a copy. Whether anything moved.
fn sink_tangent_loads(
    out: &mut Vec<Inst>,
    tangent: &dyn Fn(ValueId) -> bool,
    uses: &[u32],
    feeds: &HashMap<ValueId, Vec<ValueId>>,
) -> bool {
    let mut any = false;
    let mut k = 1;
    while k < out.len() {
        let (w, arr, idx) = match (out[k].op, out[k].dst, out[k].args.as_slice()) {
            (Op::AGet, Some(w), &[arr, idx]) => (w, arr, idx),
            _ => {
                k += 1;
                continue;
            }
        };
        // The load alone, or with its own copy of a row-major index
        // (`k2 = add.i p, q` right before it, made above and read only
        // there): `start` is where what moves begins.
        let own_sum = k >= 3
            && out[k - 1].op == Op::AddI
            && out[k - 1].dst == Some(idx)
            && uses.get(idx.index()).is_none_or(|&u| u == 1);
        let start = if own_sum { k - 1 } else { k };
        let twin = &out[start - 1];
        let same_index = if own_sum {
            let sum = &out[k - 1].args;
            start >= 2
                && twin.args.get(1).is_some_and(|i| {
                    out[start - 2].dst == Some(*i)
                        && out[start - 2].op == Op::AddI
                        && out[start - 2].args == *sum
                })
        } else {
            twin.args.get(1) == Some(&idx)
        };
        let after_twin = twin.op == Op::AGet
            && same_index
            && twin.args.first() != Some(&arr)
            && twin.dst.is_some_and(|v| !tangent(v));
        if !tangent(w) || uses.get(w.index()) != Some(&1) || !after_twin {
            k += 1;
            continue;
        }
        // What the moved instructions read, for the phi-step check below.
        let mut reads = vec![arr, idx];
        if own_sum {
            reads.extend(out[k - 1].args.iter().copied());
        }
        let reader = (k + 1..out.len()).find(|&q| out[q].args.contains(&w));
        let Some(q) = reader else {
            k += 1;
            continue;
        };
        let sum = out[q].op == Op::AddMulZ && out[q].args.first() != Some(&w);
        let steps = |i: &Inst| {
            i.dst
                .and_then(|d| feeds.get(&d))
                .is_some_and(|ps| ps.iter().any(|p| reads.contains(p)))
        };
        let between = out[k + 1..q]
            .iter()
            .all(|i| i.accs.is_empty() && (i.op.facts().pure || i.op == Op::AGet) && !steps(i));
        if sum && between && q > k + 1 {
            let moved: Vec<Inst> = out.drain(start..=k).collect();
            let at = q - moved.len();
            for (n, inst) in moved.into_iter().enumerate() {
                out.insert(at + n, inst);
            }
            any = true;
            // The instruction now at `start` is looked at next.
            k = start.max(1);
            continue;
        }
        k += 1;
    }
    any
}
