//! CFG facts of a primal function: predecessors and successors, reverse
//! postorder, dominators, natural loops with their bodies, exits and
//! nesting, and counted loops with their induction variables.
//!
//! Computed once per primal function, before any forward or reverse code
//! is built (see the module [`crate::analysis`]).

use vm::dom::DomTree;
use vm::ir::{BlockId, Function, Term, ValueId};
use vm::op::Op;
use vm::Type;

/// Largest induction-variable step (in absolute value) the reverse code
/// counts down with. A loop would have to run `2^64 / 2^8 = 2^56` iterations
/// (over two years at one iteration per nanosecond) before an IV with such a
/// step could come back to its first value, which is what the reverse code
/// tests to find the loop's first iteration.
pub const MAX_IV_STEP: i64 = 256;

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
    /// The natural loops, outer loops before the loops they contain.
    pub loops: Vec<Loop>,
    /// The innermost loop containing each block.
    pub loop_of: Vec<Option<usize>>,
}

/// A natural loop: a header that dominates every block of the loop, and the
/// blocks that reach one of its back edges without passing the header.
pub struct Loop {
    /// The header: the loop's only block entered from outside it.
    pub header: BlockId,
    /// Membership (see [`Loop::contains`]).
    members: Members,
    /// The innermost loop strictly containing this one.
    pub parent: Option<usize>,
    /// How the reverse code leaves the loop, when it can do so without the
    /// block stack (see [`Counted`]).
    pub counted: Option<Counted>,
}

/// The blocks of a loop.
enum Members {
    /// The loops of a function whose blocks are all reachable nest, so a
    /// loop is an interval of a preorder of the loop tree: block `b` is in
    /// the loop when the preorder number of the innermost loop around `b`
    /// (`keys[b]`, shared by all the function's loops; `u32::MAX` outside
    /// every loop) lies in `first..=last`. Space and time linear in the
    /// function however deep the loops nest.
    Span {
        keys: std::sync::Arc<[u32]>,
        first: u32,
        last: u32,
    },
    /// One flag per block (when some block is unreachable: such a block
    /// may lie in two loops that do not nest).
    Flags(Vec<bool>),
}

impl Loop {
    /// Whether block `b` belongs to the loop.
    pub fn contains(&self, b: BlockId) -> bool {
        match &self.members {
            Members::Span { keys, first, last } => keys
                .get(b.index())
                .is_some_and(|k| (*first..=*last).contains(k)),
            Members::Flags(body) => body.get(b.index()).copied().unwrap_or(false),
        }
    }
}

/// A loop entered by exactly one edge from outside (`entry -> header`),
/// with exactly one back edge (`latch -> header`) and no `ret` inside. Its
/// reverse code needs no block ids for the header: it counts iterations down
/// with an induction variable and leaves the loop when the variable is back
/// at its first value. Exits push the variable once per execution of the
/// loop instead of a block id per iteration.
pub struct Counted {
    /// The block outside the loop whose edge enters the header.
    pub entry: BlockId,
    /// The block whose edge goes back to the header.
    pub latch: BlockId,
    /// The header phi used to count, or `None` when the loop has no integer
    /// phi stepped by a small constant and the forward code adds a counter.
    pub iv: Option<Iv>,
}

/// An induction variable: a header phi `i = phi [entry: init], [latch: i + step]`
/// (`add` or `sub` of a constant, `0 < |step| <= MAX_IV_STEP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Iv {
    /// The header phi.
    pub phi: ValueId,
    /// Its value on entry to the loop.
    pub init: ValueId,
    /// What each iteration adds to it (negative for `sub`).
    pub step: i64,
}

impl Cfg {
    /// The analysis of `f`: predecessors, dominators, loops.
    pub fn new(f: &Function) -> Cfg {
        let preds = f.predecessors();
        let n = f.blocks.len();
        let succs: Vec<Vec<BlockId>> = f.blocks.iter().map(|b| b.term.successors()).collect();
        let in_cycle = on_cycles(&succs);
        let rets = (0..n)
            .filter(|&b| matches!(f.blocks[b].term, Term::Ret(_)))
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
        let mut cfg = Cfg {
            preds,
            in_cycle,
            rets,
            def_block,
            loops: Vec::new(),
            loop_of: vec![None; n],
        };
        cfg.find_loops(f, &succs, true);
        cfg
    }

    /// Natural loops by their back edges (edges to a dominator), one loop
    /// per header; their nesting; and which of them are [`Counted`].
    /// `nesting`: use [`Cfg::nested_loops`] when it applies (off only to
    /// test it against [`Cfg::any_loops`]).
    fn find_loops(&mut self, f: &Function, succs: &[Vec<BlockId>], nesting: bool) {
        let n = f.blocks.len();
        let succ_u32: Vec<Vec<u32>> = succs
            .iter()
            .map(|s| s.iter().map(|b| b.0).collect())
            .collect();
        let dom = DomTree::new(&succ_u32);
        // Back edges grouped by header, headers in block order.
        let mut latches: Vec<Vec<BlockId>> = vec![Vec::new(); n];
        for (b, ss) in succs.iter().enumerate() {
            for s in ss {
                if dom.reachable(b as u32) && dom.dominates(s.0, b as u32) {
                    let l = &mut latches[s.index()];
                    // `b`'s edges are seen one after the other.
                    if l.last() != Some(&BlockId(b as u32)) {
                        l.push(BlockId(b as u32));
                    }
                }
            }
        }
        if nesting && (0..n).all(|b| dom.reachable(b as u32)) {
            self.nested_loops(f, succs, &latches);
        } else {
            self.any_loops(f, &latches);
        }
    }

    /// [`Cfg::find_loops`] when every block is reachable: natural loops then
    /// nest, and are found innermost first, each walk from a loop's latches
    /// stepping over the inner loops already found (their blocks merged
    /// into their headers by a union-find), in time about linear in the
    /// function.
    fn nested_loops(&mut self, f: &Function, succs: &[Vec<BlockId>], latches: &[Vec<BlockId>]) {
        let n = f.blocks.len();
        // A header dominates its loop's blocks, so it comes before them in
        // a reverse postorder: headers taken in the reverse of that order
        // come inner loops first.
        let rpo = reverse_postorder(succs);
        let mut rep: Vec<u32> = (0..n as u32).collect();
        let find = |rep: &mut Vec<u32>, mut b: u32| {
            while rep[b as usize] != b {
                let up = rep[rep[b as usize] as usize];
                rep[b as usize] = up;
                b = up;
            }
            b
        };
        // Loops by discovery order: header, size, parent.
        let mut found: Vec<(BlockId, usize, Option<usize>)> = Vec::new();
        let mut owner: Vec<Option<usize>> = vec![None; n];
        let mut stamp = vec![usize::MAX; n];
        let mut stack = Vec::new();
        for &h in rpo.iter().rev() {
            if latches[h].is_empty() {
                continue;
            }
            let id = found.len();
            let mut size = 1;
            owner[h] = Some(id);
            stamp[h] = id;
            for l in &latches[h] {
                let y = find(&mut rep, l.0) as usize;
                if stamp[y] != id {
                    stamp[y] = id;
                    stack.push(y);
                }
            }
            while let Some(y) = stack.pop() {
                if y == h {
                    continue;
                }
                match owner[y] {
                    // The header of an inner loop, standing for its blocks.
                    Some(inner) => {
                        found[inner].2 = Some(id);
                        size += found[inner].1;
                    }
                    None => {
                        owner[y] = Some(id);
                        size += 1;
                    }
                }
                rep[y] = h as u32;
                for p in &self.preds[y] {
                    let z = find(&mut rep, p.0) as usize;
                    if stamp[z] != id {
                        stamp[z] = id;
                        stack.push(z);
                    }
                }
            }
            found.push((BlockId(h as u32), size, None));
        }
        // Outer loops first, larger first, then by header.
        let mut order: Vec<usize> = (0..found.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(found[i].1), found[i].0 .0));
        let mut index = vec![0; found.len()];
        for (k, &i) in order.iter().enumerate() {
            index[i] = k;
        }
        // Preorder numbers of the loop tree: a loop's blocks are those whose
        // innermost loop is numbered from its own number to the last of its
        // descendants'.
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); found.len()];
        let mut roots = Vec::new();
        for &i in &order {
            match found[i].2 {
                Some(p) => children[p].push(i),
                None => roots.push(i),
            }
        }
        let mut first = vec![0u32; found.len()];
        let mut last = vec![0u32; found.len()];
        let mut next = 0u32;
        let mut walk: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
        // (loop, children visited); a loop is numbered when first seen.
        let mut seen = vec![false; found.len()];
        while let Some(top) = walk.last_mut() {
            let (l, c) = *top;
            if !seen[l] {
                seen[l] = true;
                first[l] = next;
                next += 1;
            }
            if let Some(&ch) = children[l].get(c) {
                top.1 += 1;
                walk.push((ch, 0));
            } else {
                last[l] = next - 1;
                walk.pop();
            }
        }
        let keys: std::sync::Arc<[u32]> = owner
            .iter()
            .map(|o| o.map_or(u32::MAX, |l| first[l]))
            .collect();
        for &i in &order {
            let (header, _, parent) = found[i];
            let members = Members::Span {
                keys: keys.clone(),
                first: first[i],
                last: last[i],
            };
            let counted = {
                let inside = |b: BlockId| {
                    keys.get(b.index())
                        .is_some_and(|k| (first[i]..=last[i]).contains(k))
                };
                self.counted(f, header, &inside, &latches[header.index()])
            };
            self.loops.push(Loop {
                header,
                members,
                parent: parent.map(|p| index[p]),
                counted,
            });
        }
        for (slot, o) in self.loop_of.iter_mut().zip(&owner) {
            *slot = o.map(|l| index[l]);
        }
    }

    /// [`Cfg::find_loops`] for any function: each loop's blocks walked
    /// from its latches, in time the sum of the loops' sizes.
    fn any_loops(&mut self, f: &Function, latches: &[Vec<BlockId>]) {
        let n = f.blocks.len();
        let mut loops = Vec::new();
        for (h, ls) in latches.iter().enumerate() {
            if ls.is_empty() {
                continue;
            }
            let mut body = vec![false; n];
            body[h] = true;
            let mut stack: Vec<BlockId> = ls.clone();
            while let Some(b) = stack.pop() {
                if !std::mem::replace(&mut body[b.index()], true) {
                    stack.extend(self.preds[b.index()].iter().copied());
                }
            }
            loops.push((BlockId(h as u32), body, ls.clone()));
        }
        // Outer loops first: a loop's body contains its inner loops' bodies.
        loops.sort_by_key(|(h, body, _)| (std::cmp::Reverse(count(body)), h.0));
        let sizes: Vec<usize> = loops.iter().map(|(_, body, _)| count(body)).collect();
        for (i, (header, body, ls)) in loops.iter().enumerate() {
            // Natural loops with different headers are nested or disjoint,
            // so the innermost container is the smallest one holding the
            // header.
            let parent = (0..i)
                .filter(|&j| loops[j].1[header.index()] && sizes[j] > sizes[i])
                .min_by_key(|&j| sizes[j]);
            let counted = self.counted(f, *header, &|b: BlockId| body[b.index()], ls);
            self.loops.push(Loop {
                header: *header,
                members: Members::Flags(body.clone()),
                parent,
                counted,
            });
        }
        for b in 0..n {
            self.loop_of[b] = (0..self.loops.len())
                .filter(|&l| self.loops[l].contains(BlockId(b as u32)))
                .min_by_key(|&l| sizes[l]);
        }
    }

    fn counted(
        &self,
        f: &Function,
        header: BlockId,
        body: &dyn Fn(BlockId) -> bool,
        latches: &[BlockId],
    ) -> Option<Counted> {
        let [latch] = latches else { return None };
        let preds = &self.preds[header.index()];
        let [a, b] = preds.as_slice() else {
            return None;
        };
        let entry = if a == latch { *b } else { *a };
        if body(entry) || (a != latch && b != latch) {
            return None;
        }
        if self.rets.iter().any(|r| body(*r)) {
            return None;
        }
        let iv = f.blocks[header.index()].phis.iter().find_map(|phi| {
            if f.ty(phi.dst) != Type::I64 {
                return None;
            }
            let from = |l: BlockId| phi.incoming.iter().find(|(p, _)| *p == l).map(|e| e.1);
            let (init, next) = (from(entry)?, from(*latch)?);
            let step = step_of(f, &self.def_block, phi.dst, next)?;
            Some(Iv {
                phi: phi.dst,
                init,
                step,
            })
        });
        Some(Counted {
            entry,
            latch: *latch,
            iv,
        })
    }

    /// The loops containing `b`, innermost first.
    pub fn loops_around(&self, b: BlockId) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.loop_of[b.index()], |l| self.loops[*l].parent)
    }

    /// The loops left by the edge `from -> to`, innermost first.
    pub fn loops_exited(&self, from: BlockId, to: BlockId) -> Vec<usize> {
        let nested = self
            .loop_of
            .get(from.index())
            .copied()
            .flatten()
            .is_some_and(|l| matches!(self.loops[l].members, Members::Span { .. }));
        if nested {
            // Loops nest: once one around `from` holds `to`, all outer
            // ones do (so deep nests cost the loops left, not the depth).
            self.loops_around(from)
                .take_while(|l| !self.loops[*l].contains(to))
                .collect()
        } else {
            self.loops_around(from)
                .filter(|l| !self.loops[*l].contains(to))
                .collect()
        }
    }
}

/// The blocks reachable from block 0 in reverse postorder (iteratively).
fn reverse_postorder(succs: &[Vec<BlockId>]) -> Vec<usize> {
    let n = succs.len();
    let mut order = Vec::with_capacity(n);
    if n == 0 {
        return order;
    }
    let mut visited = vec![false; n];
    visited[0] = true;
    let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
    while let Some(top) = stack.last_mut() {
        let (b, i) = *top;
        match succs[b].get(i) {
            Some(s) => {
                top.1 += 1;
                if !std::mem::replace(&mut visited[s.index()], true) {
                    stack.push((s.index(), 0));
                }
            }
            None => {
                order.push(b);
                stack.pop();
            }
        }
    }
    order.reverse();
    order
}

fn count(body: &[bool]) -> usize {
    body.iter().filter(|b| **b).count()
}

/// The step of `next = phi + c` / `c + phi` / `phi - c` for a constant `c`
/// with `0 < |step| <= MAX_IV_STEP`.
fn step_of(
    f: &Function,
    def_block: &[Option<BlockId>],
    phi: ValueId,
    next: ValueId,
) -> Option<i64> {
    // Only the defining block is searched (not the whole function once per
    // loop).
    let b = def_block.get(next.index()).copied().flatten()?;
    let inst = f.blocks[b.index()]
        .insts
        .iter()
        .find(|i| i.dst == Some(next))?;
    let konst = |v: ValueId| f.values[v.index()].konst.map(|k| k as i64);
    let step = match (inst.op, inst.args.as_slice()) {
        (Op::AddI, [a, c]) if *a == phi => konst(*c)?,
        (Op::AddI, [c, a]) if *a == phi => konst(*c)?,
        (Op::SubI, [a, c]) if *a == phi => konst(*c)?.checked_neg()?,
        _ => return None,
    };
    (step != 0 && step.checked_abs()? <= MAX_IV_STEP).then_some(step)
}

/// Which blocks can reach themselves through at least one edge: those in
/// a strongly connected component of more than one block, and those with
/// an edge to themselves. Components by Kosaraju's algorithm, iteratively
/// (no recursion depth depends on the input).
fn on_cycles(succs: &[Vec<BlockId>]) -> Vec<bool> {
    let n = succs.len();
    let mut post = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    for root in 0..n {
        if std::mem::replace(&mut seen[root], true) {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        while let Some(top) = stack.last_mut() {
            let (b, i) = *top;
            match succs[b].get(i) {
                Some(s) => {
                    top.1 += 1;
                    if !std::mem::replace(&mut seen[s.index()], true) {
                        stack.push((s.index(), 0));
                    }
                }
                None => {
                    post.push(b);
                    stack.pop();
                }
            }
        }
    }
    let mut preds = vec![Vec::new(); n];
    for (b, ss) in succs.iter().enumerate() {
        for s in ss {
            preds[s.index()].push(b);
        }
    }
    let mut comp = vec![usize::MAX; n];
    let mut size = Vec::new();
    for &root in post.iter().rev() {
        if comp[root] != usize::MAX {
            continue;
        }
        let c = size.len();
        size.push(0usize);
        comp[root] = c;
        let mut stack = vec![root];
        while let Some(b) = stack.pop() {
            size[c] += 1;
            for &p in &preds[b] {
                if comp[p] == usize::MAX {
                    comp[p] = c;
                    stack.push(p);
                }
            }
        }
    }
    (0..n)
        .map(|b| size[comp[b]] > 1 || succs[b].iter().any(|s| s.index() == b))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm::ir::{Block, Loc, RetType};

    /// A function of `succs.len()` blocks, each ending in `br` (two
    /// successors), `jmp` (one) or `ret` (none) on one bool parameter.
    fn function(succs: &[Vec<u32>]) -> Function {
        let mut f = Function {
            name: "g".into(),
            params: Vec::new(),
            ret: RetType::One(Type::Bool),
            values: Vec::new(),
            blocks: Vec::new(),
            loc: Loc::default(),
        };
        let c = f.new_value(Type::Bool, None);
        f.params.push(c);
        for (b, ss) in succs.iter().enumerate() {
            let term = match ss.as_slice() {
                [] => Term::Ret(c),
                [t] => Term::Jmp(BlockId(*t)),
                [t, e, ..] => Term::Br {
                    cond: c,
                    then_: BlockId(*t),
                    else_: BlockId(*e),
                },
            };
            f.blocks.push(Block {
                name: format!("b{b}"),
                phis: Vec::new(),
                insts: Vec::new(),
                term,
                term_loc: Loc::default(),
            });
        }
        f
    }

    /// The loops found innermost first with a union-find (every block
    /// reachable) are those of the walk of each loop's body on its own:
    /// same order, headers, blocks, parents, counted exits, innermost loop
    /// of each block and loops left by each edge. Random graphs, each block
    /// mostly followed by the next, with random edges forward and back.
    #[test]
    fn nested_loops_equal_the_walk_of_each_body() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut compared = 0;
        let (mut loops_seen, mut max_depth) = (0, 0);
        for _ in 0..2_000 {
            let n = 2 + next(30) as usize;
            let succs: Vec<Vec<u32>> = (0..n)
                .map(|b| {
                    let k = if b + 1 == n { 0 } else { 1 + next(2) as usize };
                    // The first edge goes to the next block (most graphs have
                    // every block reachable), the second anywhere.
                    (0..k)
                        .map(|e| {
                            if e == 0 && next(8) != 0 {
                                b as u32 + 1
                            } else if next(2) == 0 {
                                next(b as u64 + 1) as u32
                            } else {
                                (b + 1 + next((n - b - 1) as u64) as usize) as u32
                            }
                        })
                        .collect()
                })
                .collect();
            let f = function(&succs);
            let fast = Cfg::new(&f);
            let block_succs: Vec<Vec<BlockId>> =
                f.blocks.iter().map(|b| b.term.successors()).collect();
            let mut slow = Cfg {
                preds: fast.preds.clone(),
                in_cycle: fast.in_cycle.clone(),
                rets: fast.rets.clone(),
                def_block: fast.def_block.clone(),
                loops: Vec::new(),
                loop_of: vec![None; n],
            };
            slow.find_loops(&f, &block_succs, false);
            let all_reachable = {
                let s32: Vec<Vec<u32>> = block_succs
                    .iter()
                    .map(|s| s.iter().map(|b| b.0).collect())
                    .collect();
                let dom = DomTree::new(&s32);
                (0..n).all(|b| dom.reachable(b as u32))
            };
            if !all_reachable {
                continue;
            }
            compared += 1;
            loops_seen += fast.loops.len();
            for b in 0..n {
                max_depth = max_depth.max(fast.loops_around(BlockId(b as u32)).count());
            }
            assert_eq!(fast.loops.len(), slow.loops.len(), "{succs:?}");
            assert_eq!(fast.loop_of, slow.loop_of, "{succs:?}");
            for (a, b) in fast.loops.iter().zip(&slow.loops) {
                assert_eq!(a.header, b.header, "{succs:?}");
                assert_eq!(a.parent, b.parent, "{succs:?}");
                let exits = |l: &Loop| l.counted.as_ref().map(|c| (c.entry, c.latch, c.iv));
                assert_eq!(exits(a), exits(b), "{succs:?}");
                for x in 0..n {
                    let x = BlockId(x as u32);
                    assert_eq!(a.contains(x), b.contains(x), "{succs:?} block {x:?}");
                }
            }
            for (from, ss) in block_succs.iter().enumerate() {
                for to in ss {
                    let from = BlockId(from as u32);
                    assert_eq!(
                        fast.loops_exited(from, *to),
                        slow.loops_exited(from, *to),
                        "{succs:?}"
                    );
                }
            }
        }
        // Enough loops, nested deeply enough, to compare.
        assert!(
            loops_seen > 500 && max_depth >= 4,
            "{loops_seen} loops, depth {max_depth}"
        );
        assert!(
            compared > 400,
            "only {compared} graphs with every block reachable"
        );
    }
}
