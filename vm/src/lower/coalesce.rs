//! Phi coalescing: which values share their phi's register, by syntactic rules
//! (`coalesce`) and then by liveness (`coalesce_live`), single-definition
//! values only.

use super::*;

/// Phi coalescing: the value `v` a phi `p` receives on edge `P -> B` may
/// live in `p`'s register, which turns that edge's copy into nothing, when
/// writing `v` there cannot clobber a `p` that is still needed:
///
/// * `v` is defined by an instruction in `P` and used only by this phi;
/// * `P` ends in `jmp B`, so after `v`'s definition control reaches `B`,
///   where `p` is redefined anyway;
/// * no instruction of `P` after `v`'s definition reads `p`, and no other
///   phi of `B` reads `p` on this edge (the swap `a <- b, b <- a + b`).
///
/// Values coalesced into the same phi come from different predecessors and
/// are each read only by the phi, so their live ranges do not overlap. Only
/// values (and phis) with exactly one definition qualify, so this never
/// touches the accumulators of non-SSA (reverse) code.
pub(super) fn coalesce(
    f: &ir::Function,
    is_param: &[bool],
    uses: &[u32],
    (def, ndefs): &Defs,
) -> Vec<usize> {
    let n = f.values.len();
    let mut alias: Vec<usize> = (0..n).collect();
    for (bi, b) in f.blocks.iter().enumerate() {
        for phi in &b.phis {
            let p = phi.dst;
            for (pred, v) in &phi.incoming {
                let vi = v.index();
                if is_param[vi]
                    || f.values[vi].konst.is_some()
                    || uses[vi] != 1
                    || ndefs[vi] != 1
                    || ndefs[p.index()] != 1
                    || alias[vi] != vi
                {
                    continue;
                }
                let Some((db, Some(di))) = def[vi] else {
                    continue;
                };
                let pb = &f.blocks[pred.index()];
                if db != pred.index() || pb.term != Term::Jmp(BlockId(bi as u32)) {
                    continue;
                }
                let read_later = pb.insts[di + 1..]
                    .iter()
                    .any(|i| i.args.contains(&p) || i.accs.contains(&p));
                let read_by_phi = b
                    .phis
                    .iter()
                    .any(|q| q.dst != p && q.incoming.iter().any(|(l, w)| l == pred && *w == p));
                if !read_later && !read_by_phi && f.values[vi].ty == f.values[p.index()].ty {
                    alias[vi] = p.index();
                }
            }
        }
    }
    alias
}

/// The registers of a call site that the call reads: `call.acc` adds to
/// its accumulators (reads and writes them); `call.n` only writes its
/// result registers.
pub(super) fn reads_accs(inst: &ir::Inst) -> &[ValueId] {
    if inst.op == Op::CallN {
        &[]
    } else {
        &inst.accs
    }
}

/// The result registers a `call.n` writes (none for other instructions:
/// `call.acc`'s accumulators are read too, see [`reads_accs`]).
pub(super) fn writes_accs(inst: &ir::Inst) -> &[ValueId] {
    if inst.op == Op::CallN {
        &inst.accs
    } else {
        &[]
    }
}

/// Where a value is defined: its block and instruction, `None` for a phi
/// (defined at its block's start).
pub(super) type Def = (usize, Option<usize>);

/// [`definitions`]: each value's definition and its number of definitions.
pub(super) type Defs = (Vec<Option<Def>>, Vec<u32>);

/// Where each value is defined (its last definition; single-definition
/// values are the ones that matter) and how many definitions each value
/// has (phis, instruction results, in-out operands and `call.acc`
/// accumulators).
pub(super) fn definitions(f: &ir::Function) -> Defs {
    let n = f.values.len();
    let mut def = vec![None; n];
    let mut ndefs = vec![0u32; n];
    for (bi, b) in f.blocks.iter().enumerate() {
        for phi in &b.phis {
            def[phi.dst.index()] = Some((bi, None));
            ndefs[phi.dst.index()] += 1;
        }
        for (ii, inst) in b.insts.iter().enumerate() {
            if let Some(d) = inst.dst {
                def[d.index()] = Some((bi, Some(ii)));
                ndefs[d.index()] += 1;
            }
            for a in &inst.accs {
                ndefs[a.index()] += 1;
                if inst.op == Op::CallN {
                    // `call.n` writes its result registers outright.
                    def[a.index()] = Some((bi, Some(ii)));
                }
            }
            if !inst.op.operands().contains(&Operand::Site) {
                let reads = inst
                    .op
                    .operands()
                    .iter()
                    .filter(|o| matches!(o, Operand::Use(_) | Operand::InOut(_)));
                for (o, a) in reads.zip(&inst.args) {
                    if matches!(o, Operand::InOut(_)) {
                        ndefs[a.index()] += 1;
                    }
                }
            }
        }
    }
    (def, ndefs)
}

/// Liveness bit sets are skipped above this many words (blocks times
/// values / 64; four sets of 2 MiB at the limit, e.g. 1 000 blocks of a
/// function of 16 000 values): a function that large keeps the coalescing
/// of [`coalesce`] only.
pub(super) const LIVENESS_WORDS: usize = 1 << 18;

/// Phi coalescing by liveness, after [`coalesce`]: an incoming value `v`
/// of a phi `p` (and everything already sharing `v`'s register) shares
/// `p`'s register when no two of the values involved are ever live at
/// once. This catches what the syntactic rules of [`coalesce`] miss: a
/// value also read after its definition (the `%i2` a bottom-tested loop
/// compares), a predecessor ending in a branch, and a phi feeding a phi
/// (the join of an if/else inside a loop, carried to the loop header),
/// whose copy would otherwise run on every iteration.
///
/// Values interfere when one is live right after the other's definition
/// (for SSA values, live ranges that overlap always overlap there). A
/// phi's definition is at its block's start, after the edge's copies; its
/// operands are read at the end of the predecessor. Those edge copies are
/// parallel (see [`Lowerer::copies`]), so an operand may share a register
/// with a phi of the same edge. Two phis of one block never share.
///
/// Only single-definition values that are neither parameters nor
/// constants take part, with equal types, so reverse code's accumulators
/// are untouched. The liveness is only sound for strict SSA (every use
/// after its definition on every path): if any such value is live on
/// entry to the function, nothing is coalesced here.
pub(super) fn coalesce_live(
    f: &ir::Function,
    is_param: &[bool],
    (def, ndefs): &Defs,
    alias: &mut [usize],
) {
    let n = f.values.len();
    let nb = f.blocks.len();
    let words = bits::words(n);
    // Reverse code has no phis: nothing to do.
    if n == 0
        || nb.saturating_mul(words) > LIVENESS_WORDS
        || f.blocks.iter().all(|b| b.phis.is_empty())
    {
        return;
    }
    let candidate = |v: usize| !is_param[v] && f.values[v].konst.is_none() && ndefs[v] == 1;
    let (bit, set_bit) = (bits::has, bits::insert);

    // gen: read before any definition in the block; kill: defined in it
    // (phis included); phi_out: read by a successor's phi on this edge.
    let mut gen = vec![0u64; nb * words];
    let mut kill = vec![0u64; nb * words];
    let mut phi_out = vec![0u64; nb * words];
    for (bi, b) in f.blocks.iter().enumerate() {
        let (g, k) = (bi * words, bi * words + words);
        for phi in &b.phis {
            set_bit(&mut kill[g..k], phi.dst.index());
            for (pred, v) in &phi.incoming {
                let pi = pred.index();
                if pi < nb {
                    set_bit(&mut phi_out[pi * words..pi * words + words], v.index());
                }
            }
        }
        for inst in &b.insts {
            for u in inst.args.iter().chain(reads_accs(inst)) {
                if !bit(&kill[g..k], u.index()) {
                    set_bit(&mut gen[g..k], u.index());
                }
            }
            for d in inst.dst.iter().chain(writes_accs(inst)) {
                set_bit(&mut kill[g..k], d.index());
            }
        }
        for u in b.term.uses() {
            if !bit(&kill[g..k], u.index()) {
                set_bit(&mut gen[g..k], u.index());
            }
        }
    }
    // live_in excludes the block's own phis; live_out includes the phi
    // operands read on the way out.
    let mut live_in = gen.clone();
    let mut live_out = vec![0u64; nb * words];
    let succs: Vec<Vec<BlockId>> = f.blocks.iter().map(|b| b.term.successors()).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for bi in (0..nb).rev() {
            let g = bi * words;
            for w in 0..words {
                let mut out = phi_out[g + w];
                for s in &succs[bi] {
                    if s.index() < nb {
                        out |= live_in[s.index() * words + w];
                    }
                }
                let inn = gen[g + w] | (out & !kill[g + w]);
                if out != live_out[g + w] || inn != live_in[g + w] {
                    live_out[g + w] = out;
                    live_in[g + w] = inn;
                    changed = true;
                }
            }
        }
    }
    // Strict SSA: no candidate is live on entry.
    if (0..n).any(|v| candidate(v) && bit(&live_in[..words], v)) {
        return;
    }
    // The last reader of each value in each block that reads it: its
    // instruction's index, the terminator counting as `insts.len()`.
    let mut last_use: hashbrown::HashMap<(usize, usize), usize> = hashbrown::HashMap::new();
    for (bi, b) in f.blocks.iter().enumerate() {
        for (ii, inst) in b.insts.iter().enumerate() {
            for u in inst.args.iter().chain(reads_accs(inst)) {
                last_use.insert((u.index(), bi), ii);
            }
        }
        for u in b.term.uses() {
            last_use.insert((u.index(), bi), b.insts.len());
        }
    }
    // Is `x` live right after `y`'s definition?
    let live_at_def = |x: usize, y: usize| -> bool {
        let Some((b, at)) = def[y] else { return true };
        let (g, k) = (b * words, b * words + words);
        let Some(ii) = at else {
            // y is a phi of block b.
            return matches!(def[x], Some((bx, None)) if bx == b) || bit(&live_in[g..k], x);
        };
        // Defined later in the same block: not yet live.
        if let Some((bx, Some(jx))) = def[x] {
            if bx == b && jx > ii {
                return false;
            }
        }
        bit(&live_out[g..k], x) || last_use.get(&(x, b)).is_some_and(|&j| j > ii)
    };
    let interfere = |x: usize, y: usize| live_at_def(x, y) || live_at_def(y, x);

    // Classes: root -> members, starting from `coalesce`'s.
    let mut members: Vec<Vec<usize>> = (0..n).map(|v| vec![v]).collect();
    for v in 0..n {
        if alias[v] != v {
            members[v].clear();
            members[alias[v]].push(v);
        }
    }
    for b in &f.blocks {
        for phi in &b.phis {
            let p = phi.dst.index();
            if !candidate(p) {
                continue;
            }
            for (_, v) in &phi.incoming {
                let v = v.index();
                if !candidate(v) || f.values[v].ty != f.values[p].ty {
                    continue;
                }
                let (rp, rv) = (alias[p], alias[v]);
                if rp == rv || members[rp].len() * members[rv].len() > 4096 {
                    continue;
                }
                let clash = members[rv]
                    .iter()
                    .any(|&x| members[rp].iter().any(|&y| interfere(x, y)));
                if clash {
                    continue;
                }
                let moved = std::mem::take(&mut members[rv]);
                for &x in &moved {
                    alias[x] = rp;
                }
                members[rp].extend(moved);
            }
        }
    }
    // A tangent sum that adds to a phi, `t = add.mul.z p, c, d` (a dot
    // product's tangent step), shares the phi's register where they never
    // interfere: the sum then runs in place (`add.mul.z %p, %p, ...`),
    // which the lowering fuses further (`acc.mul.aget.add`). Only with a
    // phi as the sum, so that a product and its sum keep apart (`tmul.z`
    // needs the product's register to be its own).
    for b in &f.blocks {
        for inst in &b.insts {
            let (Op::AddMulZ, Some(t), Some(p)) = (inst.op, inst.dst, inst.args.first()) else {
                continue;
            };
            let (t, p) = (t.index(), p.index());
            let phi = matches!(def[p], Some((_, None)));
            if !phi || !candidate(t) || !candidate(p) || f.values[t].ty != f.values[p].ty {
                continue;
            }
            let (rp, rt) = (alias[p], alias[t]);
            if rp == rt || members[rp].len() * members[rt].len() > 4096 {
                continue;
            }
            let clash = members[rt]
                .iter()
                .any(|&x| members[rp].iter().any(|&y| interfere(x, y)));
            if clash {
                continue;
            }
            let moved = std::mem::take(&mut members[rt]);
            for &x in &moved {
                alias[x] = rp;
            }
            members[rp].extend(moved);
        }
    }
}
