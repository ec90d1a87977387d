//! If-conversion on the IR: a conditional whose arms are a few pure, cheap
//! instructions becomes straight-line code, both arms computed and the
//! join's phis turned into `select`s of the branch's condition.
//!
//! The AD stage runs it, when asked (`ad::Engine::set_if_conversion`, the
//! CLI's `--if-convert`), on its copy of a function before deriving the
//! gradient's forward and reverse code (the function itself keeps its
//! branches). A join with two predecessors costs derived code a block id
//! pushed by the forward code and, in the reverse code, a pop and a jump
//! through a table that depends on the data; converted, the forward code
//! pushes nothing for it and the reverse code routes the join's cotangent
//! with `select`s of the condition, which it recomputes or pops like any
//! other value it reads. The arm not taken gets a zero cotangent, which
//! contributes exactly zero whatever its local derivative (adasm.md §7),
//! so the gradient is the branching code's (up to the sign of a zero).
//! Both arms run, though: the native tier gains where a branch on the data
//! is hard to predict, the interpreter, which pays per instruction, loses.
//!
//! Two shapes are converted, `H` ending in `br %c, A, B`:
//!
//! * a diamond: `A` and `B` each have `H` as their one predecessor and jump
//!   to the same block `J`, whose predecessors are `A` and `B` alone;
//! * a triangle: `A` (or `B`) has `H` as its one predecessor and jumps to
//!   the other target `J`, whose predecessors are `H` and the arm alone.
//!
//! An arm qualifies when it has no phis and at most [`ARM_MOST`]
//! instructions, each pure and cheap ([`crate::op::Facts`]: it cannot trap,
//! allocate or touch memory, and costs about an addition), and the join's
//! phis are scalars (no arrays, whose aliasing a `select` would blur). The
//! arms' instructions move to the end of `H`, each phi of `J` becomes a
//! `select` (a `copy` when both edges bring the same value), and `J`, now
//! reached from `H` alone, is merged into it. Moving an arm to `H` is sound:
//! its instructions cannot trap or write anything, their operands are
//! defined in `H` or before it (the arm's one predecessor), and their values
//! were read only in the arm and by `J`'s phis. Conversions repeat, so a
//! conditional nested in an arm goes first and its arm's conditional then
//! qualifies, up to [`PASSES_MOST`] levels.

use crate::ir::{BlockId, Function, Inst, Term, ValueId};
use crate::op::{Op, Origin, Remat};
use crate::types::Type;

/// The most instructions an arm may have to be converted.
pub const ARM_MOST: usize = 4;

/// The most rounds of conversion (each converts every conditional that
/// qualifies when it starts), so the most levels of nested conditionals
/// converted.
pub const PASSES_MOST: usize = 16;

/// A conditional to convert: `head` ends in `br cond, ...`; `then_arm` and
/// `else_arm` are the arms' blocks (a triangle has one), `join` where they
/// meet; the join's phis read their true-side value from `then_pred` and
/// their false-side value from `else_pred`.
struct Shape {
    head: usize,
    cond: ValueId,
    then_arm: Option<usize>,
    else_arm: Option<usize>,
    join: usize,
    then_pred: usize,
    else_pred: usize,
}

/// Convert the conditionals of `f` that qualify (see the module's
/// documentation) and drop the blocks left unreachable. Returns how many
/// were converted.
pub fn convert(f: &mut Function) -> usize {
    convert_if(f, |_| true).len()
}

/// [`convert`], only the conditionals whose condition `keep` accepts;
/// returns the conditions of those converted, in the order converted.
pub fn convert_if(f: &mut Function, keep: impl Fn(ValueId) -> bool) -> Vec<ValueId> {
    let mut converted = Vec::new();
    let mut dead = vec![false; f.blocks.len()];
    // Values the conversion makes come after these and are not counted:
    // `sink` asks only about the arms' own values.
    let uses = f.use_counts();
    for _ in 0..PASSES_MOST {
        let preds = predecessors(f);
        // Blocks a conversion of this round has changed: a shape that
        // includes one waits for the next round's predecessors.
        let mut touched = vec![false; f.blocks.len()];
        let mut round = 0;
        for h in 0..f.blocks.len() {
            if dead[h] {
                continue;
            }
            let Some(s) = shape(f, &preds, h).filter(|s| keep(s.cond)) else {
                continue;
            };
            let blocks = [Some(s.head), s.then_arm, s.else_arm, Some(s.join)];
            if blocks.iter().flatten().any(|b| touched[*b]) {
                continue;
            }
            for b in blocks.iter().flatten() {
                touched[*b] = true;
            }
            // The join's successors change predecessor (the join becomes
            // the head), so they wait too.
            for t in f.blocks[s.join].term.successors() {
                touched[t.index()] = true;
            }
            apply(f, &s, &uses, &mut dead);
            converted.push(s.cond);
            round += 1;
        }
        if round == 0 {
            break;
        }
    }
    if !converted.is_empty() {
        drop_dead(f, &dead);
    }
    converted
}

/// Each block's predecessors, each listed once. (A block a conversion
/// left dead only jumps to dead blocks, so the live blocks' lists hold
/// live blocks alone.)
fn predecessors(f: &Function) -> Vec<Vec<usize>> {
    f.predecessors()
        .into_iter()
        .map(|p| p.into_iter().map(|b| b.index()).collect())
        .collect()
}

/// The conditional ending in block `h`, if it is one to convert.
fn shape(f: &Function, preds: &[Vec<usize>], h: usize) -> Option<Shape> {
    let Term::Br { cond, then_, else_ } = f.blocks[h].term else {
        return None;
    };
    let (t, e) = (then_.index(), else_.index());
    if t == e || t == h || e == h {
        return None;
    }
    let arm = |a: usize| preds[a] == [h] && small(f, a);
    let jumps_to = |a: usize| match f.blocks[a].term {
        Term::Jmp(j) => Some(j.index()),
        _ => None,
    };
    let only = |j: usize, x: usize, y: usize| {
        let p = &preds[j];
        p.len() == 2 && p.contains(&x) && p.contains(&y)
    };
    let s = if arm(t) && arm(e) && jumps_to(t).is_some() && jumps_to(t) == jumps_to(e) {
        let j = jumps_to(t)?;
        (j != h && j != t && j != e && only(j, t, e)).then_some(Shape {
            head: h,
            cond,
            then_arm: Some(t),
            else_arm: Some(e),
            join: j,
            then_pred: t,
            else_pred: e,
        })?
    } else if arm(t) && jumps_to(t) == Some(e) && only(e, h, t) {
        Shape {
            head: h,
            cond,
            then_arm: Some(t),
            else_arm: None,
            join: e,
            then_pred: t,
            else_pred: h,
        }
    } else if arm(e) && jumps_to(e) == Some(t) && only(t, h, e) {
        Shape {
            head: h,
            cond,
            then_arm: None,
            else_arm: Some(e),
            join: t,
            then_pred: h,
            else_pred: e,
        }
    } else {
        return None;
    };
    let scalar_phis = f.blocks[s.join]
        .phis
        .iter()
        .all(|p| f.ty(p.dst) != Type::Arr);
    scalar_phis.then_some(s)
}

/// Whether block `a` may be an arm: no phis, at most [`ARM_MOST`]
/// instructions, each a pure, cheap user instruction.
fn small(f: &Function, a: usize) -> bool {
    let b = &f.blocks[a];
    b.phis.is_empty()
        && b.insts.len() <= ARM_MOST
        && b.insts.iter().all(|i| {
            let facts = i.op.facts();
            facts.pure
                && facts.remat == Remat::Cheap
                && facts.origin == Origin::User
                && i.callee.is_none()
                && i.accs.is_empty()
        })
}

/// Convert the conditional `s`: the arms' instructions, then a `select`
/// per phi of the join, then the join's instructions, in the head, which
/// takes the join's terminator; the arms and the join are marked dead.
/// `uses` counts each value's reads in `f`.
fn apply(f: &mut Function, s: &Shape, uses: &[u32], dead: &mut [bool]) {
    let (h, j) = (s.head, s.join);
    let phis = std::mem::take(&mut f.blocks[j].phis);
    let mut joined = Vec::with_capacity(phis.len());
    for phi in phis {
        let from = |p: usize| {
            phi.incoming
                .iter()
                .find(|(b, _)| b.index() == p)
                .map(|(_, v)| *v)
        };
        let (Some(a), Some(b)) = (from(s.then_pred), from(s.else_pred)) else {
            // A phi of a verified function has an entry per predecessor.
            continue;
        };
        if a == b {
            joined.push(Inst::new(Op::Mov, Some(phi.dst), vec![a], phi.loc));
            continue;
        }
        if let (Some(ta), Some(eb)) = (s.then_arm, s.else_arm) {
            if let Some(common) = sink(f, uses, (ta, a), (eb, b), s.cond, phi.dst) {
                joined.extend(common);
                continue;
            }
        }
        joined.push(Inst::new(
            Op::Select,
            Some(phi.dst),
            vec![s.cond, a, b],
            phi.loc,
        ));
    }
    for arm in [s.then_arm, s.else_arm].into_iter().flatten() {
        let insts = std::mem::take(&mut f.blocks[arm].insts);
        f.blocks[h].insts.extend(insts);
        dead[arm] = true;
    }
    f.blocks[h].insts.extend(joined);
    let insts = std::mem::take(&mut f.blocks[j].insts);
    f.blocks[h].insts.extend(insts);
    let term = std::mem::replace(&mut f.blocks[j].term, Term::Jmp(BlockId(j as u32)));
    for t in term.successors() {
        for phi in &mut f.blocks[t.index()].phis {
            for (p, _) in &mut phi.incoming {
                if p.index() == j {
                    *p = BlockId(h as u32);
                }
            }
        }
    }
    f.blocks[h].term = term;
    f.blocks[h].term_loc = f.blocks[j].term_loc;
    dead[j] = true;
}

/// A phi joining `a`, the last instruction of arm `ta`, and `b`, the last
/// of arm `eb`, both read by the phi alone and the same sum or difference
/// (or integer product) with one operand in common (`s + x` and `s + y`,
/// as `s = s + ...` in each arm of a front end's `if` gives): the two
/// instructions leave their arms, and the phi becomes `t = select c, x, y;
/// dst = s + t`, one operation instead of two (the same bits: the
/// operation the branch would have run, on the same operands).
fn sink(
    f: &mut Function,
    uses: &[u32],
    (ta, a): (usize, ValueId),
    (eb, b): (usize, ValueId),
    cond: ValueId,
    dst: ValueId,
) -> Option<[Inst; 2]> {
    let last = |blk: usize, v: ValueId| {
        let insts = &f.blocks[blk].insts;
        insts.last().filter(|i| i.dst == Some(v)).cloned()
    };
    let (ia, ib) = (last(ta, a)?, last(eb, b)?);
    let once = |v: ValueId| uses.get(v.index()) == Some(&1);
    // Not an f64 product: its pullback would read the `select`, which the
    // reverse code might have to receive, where a sum's reads nothing.
    let binary = matches!(ia.op, Op::AddF | Op::SubF | Op::AddI | Op::SubI | Op::MulI);
    if ia.op != ib.op || !binary || !once(a) || !once(b) {
        return None;
    }
    let commutes = matches!(ia.op, Op::AddF | Op::AddI | Op::MulI);
    let (x, y) = (&ia.args, &ib.args);
    // (the shared operand's position, the other operands)
    let (first, xo, yo) = if x[0] == y[0] {
        (true, x[1], y[1])
    } else if x[1] == y[1] {
        (false, x[0], y[0])
    } else if commutes && x[0] == y[1] {
        (true, x[1], y[0])
    } else if commutes && x[1] == y[0] {
        (false, x[0], y[1])
    } else {
        return None;
    };
    let shared = if first { x[0] } else { x[1] };
    let ty = f.ty(xo);
    let t = f.new_value(ty, None);
    f.blocks[ta].insts.pop();
    f.blocks[eb].insts.pop();
    let pick = Inst::new(Op::Select, Some(t), vec![cond, xo, yo], ia.loc);
    let args = if first {
        vec![shared, t]
    } else {
        vec![t, shared]
    };
    Some([pick, Inst::new(ia.op, Some(dst), args, ia.loc)])
}

/// Remove the blocks marked dead (unreachable: every edge into them was
/// removed) and renumber the rest, keeping their order.
fn drop_dead(f: &mut Function, dead: &[bool]) {
    let mut new_id = vec![0u32; f.blocks.len()];
    let mut next = 0;
    for (b, d) in dead.iter().enumerate() {
        new_id[b] = next;
        if !d {
            next += 1;
        }
    }
    let blocks = std::mem::take(&mut f.blocks);
    f.blocks = blocks
        .into_iter()
        .zip(dead)
        .filter(|(_, d)| !**d)
        .map(|(b, _)| b)
        .collect();
    for b in &mut f.blocks {
        for phi in &mut b.phis {
            for (p, _) in &mut phi.incoming {
                *p = BlockId(new_id[p.index()]);
            }
        }
        b.term.map_targets(|t| *t = BlockId(new_id[t.index()]));
    }
}
