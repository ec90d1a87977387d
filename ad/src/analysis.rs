//! CFG facts and activity analysis of a primal function.
//!
//! Everything here is computed once per primal function, before any forward
//! or reverse code is built, so the transform itself is a single pass.

use vm::ir::{BlockId, Function, ValueId};
use vm::op::Op;
use vm::Type;

/// Control-flow facts the transform needs.
pub struct Cfg {
    /// Predecessors of each block, in [`Function::predecessors`] order. The
    /// block id pushed on an edge `P -> B` is `P`'s index in `preds[B]`.
    pub preds: Vec<Vec<BlockId>>,
    /// Whether the block lies on a cycle (may run more than once per call).
    /// Cotangents of values defined in such blocks are zeroed after use.
    pub in_cycle: Vec<bool>,
    /// Blocks ending in `ret`, in block order. The reverse code dispatches on
    /// the index in this list when there is more than one.
    pub rets: Vec<BlockId>,
    /// The block defining each value (`None` for constants; parameters are
    /// defined in the entry block).
    pub def_block: Vec<Option<BlockId>>,
}

impl Cfg {
    pub fn new(f: &Function) -> Cfg {
        let preds = f.predecessors();
        let n = f.blocks.len();
        let succs: Vec<Vec<BlockId>> = f.blocks.iter().map(|b| b.term.successors()).collect();
        let in_cycle = (0..n).map(|b| reaches_itself(&succs, b)).collect();
        let rets = (0..n)
            .filter(|&b| matches!(f.blocks[b].term, vm::ir::Term::Ret(_)))
            .map(|b| BlockId(b as u32))
            .collect();
        let mut def_block = vec![None; f.values.len()];
        for p in &f.params {
            def_block[p.index()] = Some(BlockId(0));
        }
        for (bi, b) in f.blocks.iter().enumerate() {
            for phi in &b.phis {
                def_block[phi.dst.index()] = Some(BlockId(bi as u32));
            }
            for inst in &b.insts {
                if let Some(d) = inst.dst {
                    def_block[d.index()] = Some(BlockId(bi as u32));
                }
            }
        }
        Cfg {
            preds,
            in_cycle,
            rets,
            def_block,
        }
    }
}

/// Whether `start` can reach itself through at least one edge.
fn reaches_itself(succs: &[Vec<BlockId>], start: usize) -> bool {
    let mut seen = vec![false; succs.len()];
    let mut stack: Vec<usize> = succs[start].iter().map(|b| b.index()).collect();
    while let Some(b) = stack.pop() {
        if b == start {
            return true;
        }
        if !std::mem::replace(&mut seen[b], true) {
            stack.extend(succs[b].iter().map(|s| s.index()));
        }
    }
    false
}

/// Activity: which values may carry a derivative.
///
/// A value is active when its type is `f64` or `f64[]` and it depends on an
/// active parameter. Constants, `i64`/`bool` values, `nograd` and `itof`
/// results are inactive, and so is everything computed only from inactive
/// values. Arrays are treated as always active: they are mutable and shared
/// by reference, and proving an array inactive would need alias analysis.
pub fn activity(f: &Function) -> Vec<bool> {
    let mut active = vec![false; f.values.len()];
    for p in &f.params {
        active[p.index()] = f.ty(*p).is_differentiable();
    }
    for (i, v) in f.values.iter().enumerate() {
        if v.ty == Type::Arr && v.konst.is_none() {
            active[i] = true;
        }
    }
    // Loops make this a fixed point: a phi can depend on a value defined
    // later in block order.
    let mut changed = true;
    while changed {
        changed = false;
        for b in &f.blocks {
            for phi in &b.phis {
                let a = f.ty(phi.dst).is_differentiable()
                    && phi.incoming.iter().any(|(_, v)| active[v.index()]);
                changed |= set(&mut active, phi.dst, a);
            }
            for inst in &b.insts {
                if let Some(d) = inst.dst {
                    let a =
                        f.ty(d).is_differentiable() && inst_is_active(inst.op, &inst.args, &active);
                    changed |= set(&mut active, d, a);
                }
            }
        }
    }
    active
}

fn set(active: &mut [bool], v: ValueId, a: bool) -> bool {
    if a && !active[v.index()] {
        active[v.index()] = true;
        true
    } else {
        false
    }
}

fn inst_is_active(op: Op, args: &[ValueId], active: &[bool]) -> bool {
    match op {
        Op::NoGrad | Op::ItoF | Op::ANew => false,
        // The condition of a select carries no derivative.
        Op::Select => args[1..].iter().any(|a| active[a.index()]),
        _ => args.iter().any(|a| active[a.index()]),
    }
}

/// Whether a call must be differentiated through: some argument is active
/// (an active f64, or any array, which the callee may read or write).
pub fn call_is_active(args: &[ValueId], active: &[bool]) -> bool {
    args.iter().any(|a| active[a.index()])
}
