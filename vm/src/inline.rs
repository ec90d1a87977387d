//! Inlining: the bodies of small callees copied into their callers' IR, so
//! that a call of a helper, or of a function by itself, costs no `call`
//! and `ret` (about 130 x86 instructions for the pair in the interpreter,
//! more than ten arithmetic instructions).
//!
//! [`inline_module`] rewrites every function of a module. A call site is
//! inlined when its callee is small ([`Policy::max_callee`] IR
//! instructions: phis, instructions and terminators) and the caller stays
//! within [`Policy::max_caller`]. Call sites that inlining brought in are
//! inlined in turn, breadth first, down to [`Policy::max_depth`] levels,
//! always from the callees' original bodies: a function that calls itself
//! is unrolled (`max_depth + 1` levels of the recursion per frame), mutual
//! recursion likewise, and nothing grows without bound. The whole module
//! grows by at most its own size or [`Policy::max_unit_growth`],
//! whichever is more (functions in order take from that budget until it
//! is spent): without it, every function of a large module of small ones
//! calling each other would grow to `max_caller` (a 1 MB file of 10 000
//! functions, each calling the next twice, took 8.6 s and 1.6 GB to load,
//! against 0.13 s and 58 MB without inlining).
//!
//! The result computes the same values with the same operations in the
//! same order, so primal results are bit for bit those of the calls. A
//! gradient is the same derivative, but the reverse code may add the same
//! contributions in another order (one frame's accumulator now gathers
//! several levels'), so it can differ in the last bits.
//!
//! Every copied phi, instruction and terminator keeps its source location
//! and records the function it came from ([`Loc::inlined`]), so a trap in
//! inlined code names that function and its line (see `interp::Trap`).
//! Copied blocks keep their names, and so does the second half of a split
//! block, so that a trap names the block of the source it is in; values
//! get `name.k` (`k` numbers the inlined calls of one caller). The
//! disassembler marks inlined blocks (`; inlined from @g`).
//!
//! How the splice works, for `%r = call @g(%a, %b)` in block `B`: `B` ends
//! at the call with a jump to the copy of `g`'s entry block; the rest of
//! `B` (and its terminator) moves to a new block `C`, whose successors'
//! phis now name `C` as their predecessor; `g`'s parameters become `%a`
//! and `%b`, each `ret %v` of the copy a jump to `C`; `%r` becomes a phi of
//! `C` over the returned values, or, with one `ret`, is replaced by its
//! value. The copies are laid out right after `B`, then `C`, so the
//! lowering places them as the straight line they now are.

use crate::ir::{Block, BlockId, FuncId, Function, Loc, Module, Phi, Term, ValueId};
use crate::op::Op;
use std::collections::HashMap;

/// How much to inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Largest callee inlined, in IR instructions ([`size`]).
    pub max_callee: usize,
    /// Largest a caller may grow to by inlining, in IR instructions.
    pub max_caller: usize,
    /// How many levels of inlined calls: 1 inlines the calls a function
    /// makes, 2 also the calls in those copies, and so on.
    pub max_depth: u32,
    /// Most IR instructions inlining may add to a module, if that is more
    /// than the module's own size (else that size).
    pub max_unit_growth: usize,
}

impl Policy {
    /// No inlining at all.
    pub const NONE: Policy = Policy {
        max_callee: 0,
        max_caller: 0,
        max_depth: 0,
        max_unit_growth: 0,
    };
}

impl Default for Policy {
    /// Callees of up to 40 instructions, callers up to 400, seven levels
    /// (a small self-recursive function runs eight levels per frame: for
    /// recursion's gradient about 10% faster than four, 35% than one), a
    /// module growing by up to 20 000 instructions or its size.
    fn default() -> Policy {
        Policy {
            max_callee: 40,
            max_caller: 400,
            max_depth: 7,
            max_unit_growth: 20_000,
        }
    }
}

/// A function's size for the policy: phis, instructions and terminators.
pub fn size(f: &Function) -> usize {
    f.blocks
        .iter()
        .map(|b| b.phis.len() + b.insts.len() + 1)
        .sum()
}

/// Every function of `m` with its small callees inlined (see the module
/// documentation). Function ids, names and signatures do not change; a
/// function with a custom derivative rule ([`crate::ir::Rule`]) is never
/// inlined, and the rules are kept.
/// A module that [`crate::lower::check_module`] refuses is returned as it
/// is (lowering it reports why).
pub fn inline_module(m: &Module, policy: &Policy) -> Module {
    inline_module_budget(m, policy).0
}

/// [`inline_module`], and what is left of the module's growth budget
/// (for [`inline_appended`]).
pub fn inline_module_budget(m: &Module, policy: &Policy) -> (Module, usize) {
    if crate::lower::check_module(m).is_err() {
        return (m.clone(), 0);
    }
    let sizes: Vec<usize> = m.funcs.iter().map(size).collect();
    let mut budget = policy.max_unit_growth.max(sizes.iter().sum());
    let funcs = (0..m.funcs.len())
        .map(|i| {
            inline_function(
                m,
                &|g| sizes[g.index()],
                FuncId(i as u32),
                policy,
                &mut budget,
            )
        })
        .collect();
    (
        Module {
            funcs,
            rules: m.rules.clone(),
        },
        budget,
    )
}

/// Function `id` of `m` (a function appended to a module that
/// [`inline_module_budget`] inlined, or to one this appended to) with its
/// small callees inlined, as `inline_module` of the whole of `m` would,
/// taking from `budget` (what is left of the module's growth budget; the
/// caller adds to it when the module grows, as the budget of the whole
/// module would). The same result as inlining the whole module unless the
/// budget ran out. `m` must pass [`crate::lower::check_module`].
pub fn inline_appended(m: &Module, id: FuncId, policy: &Policy, budget: &mut usize) -> Function {
    let sizes = std::cell::RefCell::new(HashMap::new());
    let size_of = |g: FuncId| {
        *sizes
            .borrow_mut()
            .entry(g)
            .or_insert_with(|| size(m.func(g)))
    };
    inline_function(m, &size_of, id, policy, budget)
}

/// Whether `g` can be spliced in: it returns somewhere (else the block
/// after the call would have no predecessor) and its entry block has no
/// phis (the caller's jump would need incoming values).
fn splicable(g: &Function) -> bool {
    g.blocks.first().is_some_and(|b| b.phis.is_empty())
        && g.blocks.iter().any(|b| matches!(b.term, Term::Ret(_)))
}

/// `m`'s function `id` with its small callees inlined, while `budget`
/// (instructions the module may still grow by) lasts.
fn inline_function(
    m: &Module,
    sizes: &dyn Fn(FuncId) -> usize,
    id: FuncId,
    policy: &Policy,
    budget: &mut usize,
) -> Function {
    let mut f = m.func(id).clone();
    if policy.max_depth == 0 || policy.max_callee == 0 {
        return f;
    }
    let mut s = Splicer {
        depth: vec![0; f.blocks.len()],
        layout: (0..f.blocks.len()).collect(),
        consts: HashMap::new(),
        grown: sizes(id),
        next: 1,
    };
    for (i, v) in f.values.iter().enumerate() {
        if let Some(bits) = v.konst {
            s.consts.entry((v.ty, bits)).or_insert(ValueId(i as u32));
        }
    }
    let inlinable = |g: FuncId, grown: usize, budget: usize| {
        let n = sizes(g);
        n <= policy.max_callee
            && grown + n <= policy.max_caller
            && n <= budget
            && splicable(m.func(g))
            // A function with a custom derivative rule stays a call, so
            // that the AD stage sees it and uses the rule.
            && m.rule_of(g).is_none()
    };
    let mut changed = false;
    for d in 0..policy.max_depth {
        // Blocks are appended as calls are spliced, the rest of a split
        // block (same depth) included, so one pass sees them all.
        let mut b = 0;
        while b < f.blocks.len() {
            if s.depth[b] == d {
                let site = f.blocks[b].insts.iter().position(|i| {
                    i.op == Op::Call && i.callee.is_some_and(|g| inlinable(g, s.grown, *budget))
                });
                if let Some(i) = site {
                    let before = s.grown;
                    s.splice(&mut f, m, BlockId(b as u32), i);
                    *budget = budget.saturating_sub(s.grown - before);
                    changed = true;
                }
            }
            b += 1;
        }
    }
    if changed {
        s.lay_out(&mut f);
    }
    f
}

struct Splicer {
    /// Per block: how many inlined calls deep its code is.
    depth: Vec<u32>,
    /// Block order: each splice puts its blocks right after the call's.
    layout: Vec<usize>,
    /// The caller's constants, so that copies share them.
    consts: HashMap<(crate::Type, u64), ValueId>,
    grown: usize,
    /// Number of the next inlined call (`k` in the names).
    next: u32,
}

impl Splicer {
    /// Inline the call `f.blocks[b].insts[i]` (a `call` of a function of
    /// `m`).
    fn splice(&mut self, f: &mut Function, m: &Module, b: BlockId, i: usize) {
        let k = self.next;
        self.next += 1;
        let bi = b.index();
        let call = f.blocks[bi].insts[i].clone();
        let Some(gid) = call.callee else { return };
        let g = m.func(gid);
        self.grown += size(g);

        // Values: parameters are the arguments, constants shared, the rest
        // fresh.
        let vmap: Vec<ValueId> = g
            .values
            .iter()
            .enumerate()
            .map(|(j, v)| {
                if let Some(p) = g.params.iter().position(|p| p.index() == j) {
                    call.args[p]
                } else if let Some(bits) = v.konst {
                    *self
                        .consts
                        .entry((v.ty, bits))
                        .or_insert_with(|| f.new_const(v.ty, bits))
                } else {
                    f.new_value(v.ty, v.name.as_ref().map(|n| format!("{n}.{k}")))
                }
            })
            .collect();
        let first = f.blocks.len();
        let cont = BlockId((first + g.blocks.len()) as u32);
        let bmap = |x: BlockId| BlockId((first + x.index()) as u32);
        let origin = |loc: Loc| Loc {
            inlined: if loc.inlined == 0 {
                gid.0 + 1
            } else {
                loc.inlined
            },
            ..loc
        };

        // The caller's block: up to the call, then into the copy.
        let rest = f.blocks[bi].insts.split_off(i + 1);
        f.blocks[bi].insts.pop();
        let term = std::mem::replace(&mut f.blocks[bi].term, Term::Jmp(bmap(BlockId(0))));
        let term_loc = std::mem::replace(&mut f.blocks[bi].term_loc, call.loc);
        for t in term.successors() {
            for phi in &mut f.blocks[t.index()].phis {
                for (p, _) in &mut phi.incoming {
                    if *p == b {
                        *p = cont;
                    }
                }
            }
        }

        // The copy.
        let mut rets: Vec<(BlockId, ValueId)> = Vec::new();
        for (j, gb) in g.blocks.iter().enumerate() {
            let phis = gb
                .phis
                .iter()
                .map(|p| Phi {
                    dst: vmap[p.dst.index()],
                    incoming: p
                        .incoming
                        .iter()
                        .map(|(q, v)| (bmap(*q), vmap[v.index()]))
                        .collect(),
                    loc: origin(p.loc),
                })
                .collect();
            let insts = gb
                .insts
                .iter()
                .map(|x| {
                    let mut x = x.clone();
                    x.dst = x.dst.map(|d| vmap[d.index()]);
                    x.args.iter_mut().for_each(|a| *a = vmap[a.index()]);
                    x.accs.iter_mut().for_each(|a| *a = vmap[a.index()]);
                    x.loc = origin(x.loc);
                    x
                })
                .collect();
            let term = match &gb.term {
                Term::Ret(v) => {
                    rets.push((bmap(BlockId(j as u32)), vmap[v.index()]));
                    Term::Jmp(cont)
                }
                Term::Jmp(t) => Term::Jmp(bmap(*t)),
                Term::Br { cond, then_, else_ } => Term::Br {
                    cond: vmap[cond.index()],
                    then_: bmap(*then_),
                    else_: bmap(*else_),
                },
                Term::RetN(vs) => Term::RetN(vs.iter().map(|v| vmap[v.index()]).collect()),
                Term::BlkPop(ts) => Term::BlkPop(ts.iter().map(|t| bmap(*t)).collect()),
            };
            f.blocks.push(Block {
                name: gb.name.clone(),
                phis,
                insts,
                term,
                term_loc: origin(gb.term_loc),
            });
            self.depth.push(self.depth[bi] + 1);
        }

        // The block after the call: the result, then the rest of the
        // caller's block.
        let phis = match (call.dst, &rets[..]) {
            (Some(r), [_, _, ..]) => vec![Phi {
                dst: r,
                incoming: rets.clone(),
                loc: call.loc,
            }],
            _ => Vec::new(),
        };
        f.blocks.push(Block {
            name: f.blocks[bi].name.clone(),
            phis,
            insts: rest,
            term,
            term_loc,
        });
        self.depth.push(self.depth[bi]);
        if let (Some(r), [(_, v)]) = (call.dst, &rets[..]) {
            // One return: its value dominates every read of the result.
            replace_uses(f, r, *v);
        }
        let at = self
            .layout
            .iter()
            .position(|x| *x == bi)
            .map_or(0, |p| p + 1);
        self.layout.splice(at..at, first..=cont.index());
    }

    /// Put the blocks in layout order and renumber the references.
    fn lay_out(&self, f: &mut Function) {
        let mut new_id = vec![0u32; f.blocks.len()];
        for (pos, old) in self.layout.iter().enumerate() {
            new_id[*old] = pos as u32;
        }
        let mut old: Vec<Option<Block>> = std::mem::take(&mut f.blocks)
            .into_iter()
            .map(Some)
            .collect();
        f.blocks = self.layout.iter().filter_map(|i| old[*i].take()).collect();
        for b in &mut f.blocks {
            for phi in &mut b.phis {
                for (p, _) in &mut phi.incoming {
                    *p = BlockId(new_id[p.index()]);
                }
            }
            b.term.map_targets(|t| *t = BlockId(new_id[t.index()]));
        }
    }
}

/// Replace every read of `r` in `f` by `v`.
fn replace_uses(f: &mut Function, r: ValueId, v: ValueId) {
    for b in &mut f.blocks {
        rename_block(b, r, v);
    }
}

fn rename_block(b: &mut Block, r: ValueId, v: ValueId) {
    let fix = |x: &mut ValueId| {
        if *x == r {
            *x = v;
        }
    };
    for phi in &mut b.phis {
        phi.incoming.iter_mut().for_each(|(_, x)| fix(x));
    }
    for i in &mut b.insts {
        i.args.iter_mut().for_each(fix);
        i.accs.iter_mut().for_each(fix);
    }
    b.term.map_uses(fix);
}
