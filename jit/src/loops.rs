//! The innermost loops of a bytecode function whose array views can be
//! read once, before the loop, instead of at every access: what
//! `translate.rs` reads on the edges into such a loop ([`T::loop_views`]).
//!
//! A view (an array's buffer address and length, and its shadow's) stays
//! valid while no array is allocated: only `anew` moves the views
//! (`Vm::native_array_moves`), and a call may run one. So a loop without
//! `anew` and without a call may read the view of an array register it
//! does not write once, on entry. Only innermost loops do: they are where
//! the time goes, and each view read keeps two machine registers busy
//! through the loop, which in an outer loop would crowd the inner one.
//!
//! [`T::loop_views`]: crate::translate

use crate::translate::{
    access_index, accessed_arrays, accessed_views, calls_out, operands_written,
};
use std::collections::HashMap;
use vm::bytecode::{Function, Instr};
use vm::dom::{Loop, Loops};
use vm::op::{Fused, Op, Operand};

/// The most blocks the loops of one function may come to, all loops
/// together, for the tier to look at them (`vm::dom::Loops::new`).
const LOOP_BLOCKS_MOST: usize = 1 << 22;

/// The most 64-bit words the liveness sets of one function may take (a
/// set per block, a bit per register): 8 MiB.
const LIVE_WORDS_MOST: usize = 1 << 20;

/// The most passes over a function's blocks the liveness may take; a
/// loop nest needs about one pass per level.
const LIVE_PASSES_MOST: usize = 64;

/// An innermost loop whose views are read on entry.
#[derive(Debug)]
pub(crate) struct LoopViews {
    /// The `pc` of its header (a leader).
    pub header: usize,
    /// The leaders (by index) of its blocks, in increasing order.
    pub blocks: Vec<usize>,
    /// The array registers whose views it reads on entry.
    pub regs: Vec<u32>,
}

impl LoopViews {
    /// Whether the block of leader index `k` is in the loop.
    pub(crate) fn contains(&self, k: usize) -> bool {
        self.blocks.binary_search(&k).is_ok()
    }
}

/// The leader index of the block holding `pc` (`starts` sorted, from 0).
pub(crate) fn block_of(starts: &[usize], pc: usize) -> usize {
    starts.partition_point(|s| *s <= pc).saturating_sub(1)
}

/// The end (exclusive) of the block of leader index `k` (of `starts`) in
/// code of `len` instructions.
pub(crate) fn block_end(starts: &[usize], k: usize, len: usize) -> usize {
    starts.get(k + 1).copied().unwrap_or(len)
}

/// The control flow of a bytecode function by block (leader index) and
/// its innermost natural loops: what [`loop_views`] and [`counted_loops`]
/// look at.
pub(crate) struct Graph {
    /// Successors of each block, by the jump that ends it.
    succs: Vec<Vec<u32>>,
    /// Blocks a block-table jump (`blk.pop`) reaches, `(to, from)`, sorted.
    tabled: Vec<(usize, usize)>,
    /// The natural loops, innermost first.
    loops: Vec<Loop>,
    /// Whether each loop of `loops` is innermost (the smallest loop of
    /// each of its blocks).
    inner: Vec<bool>,
}

impl Graph {
    /// The graph of `f`, whose blocks start at `starts` (its leaders).
    pub(crate) fn new(f: &Function, starts: &[usize]) -> Graph {
        let n = starts.len();
        let end_of = |k: usize| block_end(starts, k, f.code.len());
        let mut succs: Vec<Vec<u32>> = Vec::with_capacity(n);
        let mut tabled: Vec<(usize, usize)> = Vec::new();
        for k in 0..n {
            let end = end_of(k);
            let mut s = Vec::new();
            if let Some(ins) = end.checked_sub(1).and_then(|pc| f.code.get(pc)) {
                let target = |pc: u32| block_of(starts, pc as usize) as u32;
                if ins.op == Op::Jmp {
                    s.push(target(ins.x));
                } else if ins.op.is_cond_jump() {
                    s.push(target(ins.x));
                    s.push(block_of(starts, end) as u32);
                } else if ins.op == Op::BlkPop {
                    for t in f.tables.get(ins.x as usize).into_iter().flatten() {
                        s.push(target(*t));
                        tabled.push((target(*t) as usize, k));
                    }
                } else if !ins.op.is_terminator() && end < f.code.len() {
                    s.push(block_of(starts, end) as u32);
                }
            }
            succs.push(s);
        }
        tabled.sort_unstable();
        let Loops { loops, .. } = Loops::new(&succs, LOOP_BLOCKS_MOST);
        // The smallest loop holding each block: loops come innermost
        // first, so a loop is innermost when it is the smallest loop of
        // all its blocks.
        let mut smallest = vec![usize::MAX; n];
        for (i, l) in loops.iter().enumerate() {
            for &b in &l.blocks {
                if smallest[b] == usize::MAX {
                    smallest[b] = i;
                }
            }
        }
        let inner = loops
            .iter()
            .enumerate()
            .map(|(i, l)| l.blocks.iter().all(|b| smallest[*b] == i))
            .collect();
        Graph {
            succs,
            tabled,
            loops,
            inner,
        }
    }

    /// The innermost loops.
    fn innermost(&self) -> impl Iterator<Item = &Loop> {
        self.loops
            .iter()
            .zip(&self.inner)
            .filter(|(_, inner)| **inner)
            .map(|(l, _)| l)
    }
}

/// The registers live on entry to each block of a function: what an edge
/// out of a counted loop's unchecked copy asks of the values the loop
/// wrote (`translate.rs`, `T::leave`).
pub(crate) struct Live {
    /// The function's leaders.
    starts: Vec<usize>,
    /// 64-bit words per block.
    words: usize,
    /// Block `k`'s registers, words `k·words..(k+1)·words`.
    bits: Vec<u64>,
    /// The registers live across a call (of a function or a math helper)
    /// somewhere in the function.
    across: Vec<u64>,
}

impl Live {
    /// Whether register `r` is live across a call somewhere.
    pub(crate) fn across_call(&self, r: u32) -> bool {
        in_set(&self.across, r)
    }

    /// Whether register `r` is live on entry to the block at `pc`.
    pub(crate) fn has(&self, pc: usize, r: u32) -> bool {
        let k = block_of(&self.starts, pc);
        in_set(&self.bits[k * self.words..(k + 1) * self.words], r)
    }

    /// Those of `regs` live on entry to the block at `pc` and across a
    /// call somewhere: what an edge into or out of a counted loop's
    /// unchecked copy defines again (`T::leave`).
    pub(crate) fn carried(&self, regs: &[u32], pc: usize) -> Vec<u32> {
        regs.iter()
            .copied()
            .filter(|r| self.has(pc, *r) && self.across_call(*r))
            .collect()
    }
}

/// The word of a register set (a bit per register) holding register `r`,
/// and `r`'s bit in it.
fn bit(r: u32) -> (usize, u64) {
    (r as usize / 64, 1 << (r % 64))
}

/// Whether register `r` is in `set`.
fn in_set(set: &[u64], r: u32) -> bool {
    let (w, b) = bit(r);
    set.get(w).is_some_and(|x| x & b != 0)
}

/// The registers instruction `ins` of `f` reads (`read`), and those it
/// writes without reading them (`write`).
fn reads_writes(f: &Function, ins: &Instr, mut read: impl FnMut(u32), mut write: impl FnMut(u32)) {
    for (k, o) in ins.op.reg_operands().enumerate() {
        match o {
            Operand::Def(_) => write(ins.reg(k)),
            _ => read(ins.reg(k)),
        }
    }
    match ins.op {
        Op::Call | Op::CallAcc | Op::CallN => {
            if let Some(site) = f.sites.get(ins.x as usize) {
                site.args.iter().for_each(|r| read(u32::from(*r)));
                // `call.acc` adds the results to its registers: it reads
                // them too.
                if ins.op == Op::CallAcc {
                    site.rets.iter().for_each(|r| read(u32::from(*r)));
                } else {
                    site.rets.iter().for_each(|r| write(u32::from(*r)));
                }
            }
        }
        Op::RetN => {
            for r in f.lists.get(ins.x as usize).into_iter().flatten() {
                read(u32::from(*r));
            }
        }
        _ => {}
    }
}

/// Instruction `ins` of `f` backward over `live` (a bit per register,
/// the registers live after it): what it writes leaves the set, then
/// `between` sees the set, then what it reads joins.
fn step_back(f: &Function, ins: &Instr, live: &mut [u64], mut between: impl FnMut(&[u64])) {
    let words = live.len();
    reads_writes(
        f,
        ins,
        |_| {},
        |r| {
            let (w, b) = bit(r);
            if w < words {
                live[w] &= !b;
            }
        },
    );
    between(live);
    reads_writes(
        f,
        ins,
        |r| {
            let (w, b) = bit(r);
            if w < words {
                live[w] |= b;
            }
        },
        |_| {},
    );
}

impl Graph {
    /// The registers live on entry to each block of `f` (blocks starting
    /// at `starts`), and those live across a call: backward, every block
    /// looked at again while any changes. `None` past [`LIVE_WORDS_MOST`]
    /// words of sets or [`LIVE_PASSES_MOST`] passes: what the sets serve
    /// (`T::leave`) changes which values the register allocator sees, not
    /// what the code computes, so a function without them compiles as
    /// before.
    pub(crate) fn live_in(&self, f: &Function, starts: &[usize]) -> Option<Live> {
        let n = starts.len();
        let words = f.reg_types.len().div_ceil(64);
        if n.checked_mul(words)? > LIVE_WORDS_MOST {
            return None;
        }
        let end_of = |k: usize| block_end(starts, k, f.code.len());
        let mut bits = vec![0u64; n * words];
        let mut live = vec![0u64; words];
        let mut passes = 0;
        let mut changed = true;
        while changed {
            passes += 1;
            if passes > LIVE_PASSES_MOST {
                return None;
            }
            changed = false;
            for k in (0..n).rev() {
                self.live_out(k, words, &bits, &mut live);
                for ins in f.code[starts[k]..end_of(k)].iter().rev() {
                    step_back(f, ins, &mut live, |_| {});
                }
                let here = &mut bits[k * words..(k + 1) * words];
                if *here != *live {
                    here.copy_from_slice(&live);
                    changed = true;
                }
            }
        }
        // The registers live across a call: live after it, and not what
        // it writes.
        let mut across = vec![0u64; words];
        for (k, &start) in starts.iter().enumerate() {
            self.live_out(k, words, &bits, &mut live);
            for ins in f.code[start..end_of(k)].iter().rev() {
                step_back(f, ins, &mut live, |after| {
                    if calls_out(ins.op) {
                        for (a, x) in across.iter_mut().zip(after) {
                            *a |= x;
                        }
                    }
                });
            }
        }
        Some(Live {
            starts: starts.to_vec(),
            words,
            bits,
            across,
        })
    }

    /// The registers live on exit from block `k` (the union over its
    /// successors of `bits`, `words` words a block) into `out`.
    fn live_out(&self, k: usize, words: usize, bits: &[u64], out: &mut [u64]) {
        out.iter_mut().for_each(|x| *x = 0);
        for &s in &self.succs[k] {
            let s = s as usize;
            for (o, x) in out.iter_mut().zip(&bits[s * words..(s + 1) * words]) {
                *o |= x;
            }
        }
    }
}

/// The loops of `f` (blocks starting at `starts`, its leaders, and their
/// `graph`; `writes` per register, `translate::writes`) whose views
/// [`LoopViews`] reads on entry, each reading at most `most` views (an
/// array's elements or its shadow, as `T::hoist_views` counts them).
pub(crate) fn loop_views(
    f: &Function,
    starts: &[usize],
    graph: &Graph,
    writes: &[(u32, usize)],
    most: usize,
) -> Vec<LoopViews> {
    let end_of = |k: usize| block_end(starts, k, f.code.len());
    let tabled = &graph.tabled;
    let mut out = Vec::new();
    for l in graph.innermost() {
        let h = l.header;
        // Entered only at the header (its header dominates every block of
        // a natural loop), and not from a block table (whose edges have no
        // place for the reads), nor at the function's entry.
        let from = tabled.partition_point(|(to, _)| *to < h);
        let by_table = tabled[from..]
            .iter()
            .take_while(|(to, _)| *to == h)
            .any(|(_, from)| !l.contains(*from));
        if by_table || h == 0 {
            continue;
        }
        let pcs = || l.blocks.iter().flat_map(|b| starts[*b]..end_of(*b));
        let changes =
            pcs().any(|pc| matches!(f.code[pc].op, Op::ANew | Op::Call | Op::CallAcc | Op::CallN));
        if changes {
            continue;
        }
        let Some(mut regs) = accessed_views(pcs().map(|pc| &f.code[pc]), most) else {
            continue;
        };
        // A register the loop writes changes its view: not read once.
        let written: Vec<u32> = regs
            .iter()
            .copied()
            .filter(|r| writes.get(*r as usize).is_some_and(|w| w.0 > 0))
            .filter(|r| pcs().any(|pc| operands_written(&f.code[pc]).any(|w| w == *r)))
            .collect();
        regs.retain(|r| !written.contains(r));
        if regs.is_empty() {
            continue;
        }
        out.push(LoopViews {
            header: starts[h],
            blocks: l.blocks.clone(),
            regs,
        });
    }
    out
}

/// The most instructions a loop run by its checked-once copy
/// ([`Counted`]) may execute, all its iterations together: that copy
/// does not look at the interrupt flag, so this bounds how long Ctrl-C
/// waits (a few milliseconds even at tens of nanoseconds per
/// instruction).
pub(crate) const COUNTED_STEPS_MOST: u64 = 1 << 20;

/// The most instructions a counted loop's blocks may hold for the tier to
/// compile it twice ([`Counted`]): past a few hundred, the checks the
/// second copy saves are a small part of an iteration, and a second copy
/// of a large loop costs compile time and code for little.
pub(crate) const COUNTED_BODY_MOST: u64 = 1024;

/// An innermost loop counted by a register that the tier runs in two
/// copies: the one as translated, and one without the looks at fuel and
/// at the interrupt flag on its inner jumps and without the bounds checks
/// of [`Counted::accesses`]. A guard on entry to the header picks the
/// second when it can tell that none of them would fire: the counter
/// ranges over an interval the guard computes from its value on entry and
/// the bound, so the guard bounds the iterations, the instructions they
/// run (against the fuel left) and each such access's index (against its
/// array's length).
///
/// The loop's every edge back to its header is a `jmp.step.if.<cc>.i` of
/// one counter, step and bound: `+1` while below the bound (`lt`, or `ne`
/// starting below it), or `-1` while above it (`gt`, or `ne` starting
/// above it). Nothing else in the loop writes the counter or the bound,
/// nothing in it calls a function (whose instructions would count too),
/// and every other edge between its blocks goes forward, so one iteration
/// runs each block at most once.
#[derive(Debug)]
pub(crate) struct Counted {
    /// The `pc` of its header, the first of its blocks.
    pub header: usize,
    /// The leaders (by index) of its blocks, in increasing order.
    pub blocks: Vec<usize>,
    /// The instructions of its blocks: the most one iteration runs.
    pub steps: u64,
    /// The counter's register.
    pub counter: u32,
    /// The bound's register.
    pub bound: u32,
    /// Whether the counter goes up (by 1) or down (by 1).
    pub up: bool,
    /// The element and shadow accesses whose index is the counter plus
    /// registers the loop does not write, or such registers alone.
    pub accesses: Vec<Access>,
    /// For each of `blocks`, its successors in the loop other than the
    /// header (by leader index): every one after it.
    pub succs: Vec<Vec<usize>>,
    /// The registers its instructions write, in the order of their first
    /// write.
    pub written: Vec<u32>,
}

/// An access of a [`Counted`] loop whose index the guard can bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    /// Where it is.
    pub pc: usize,
    /// The array register it accesses.
    pub array: u32,
    /// Whether it accesses the shadow.
    pub shadow: bool,
    /// Whether the index is the counter plus `offsets` (else `offsets`
    /// alone), summed wrapping as `add.i` sums.
    pub counted: bool,
    /// Registers the loop does not write.
    pub offsets: Vec<u32>,
}

/// The innermost loops of `f` (blocks starting at `starts`, their
/// `graph`, `writes` per register) that [`Counted`] describes.
pub(crate) fn counted_loops(
    f: &Function,
    starts: &[usize],
    graph: &Graph,
    writes: &[(u32, usize)],
) -> Vec<Counted> {
    let end_of = |k: usize| block_end(starts, k, f.code.len());
    let np = f.param_types.len();
    let mut out = Vec::new();
    'loops: for l in graph.innermost() {
        let h = l.header;
        let hpc = starts[h];
        if hpc == 0 || l.blocks.first() != Some(&h) {
            continue;
        }
        // The back edges: the taken edges of one step-and-branch.
        let mut step: Option<vm::bytecode::Instr> = None;
        for &b in &l.blocks {
            for &s in &graph.succs[b] {
                let s = s as usize;
                if s == h {
                    let ins = f.code[end_of(b) - 1];
                    let same = |p: &vm::bytecode::Instr| {
                        (p.op, p.r0, p.r1, p.r2) == (ins.op, ins.r0, ins.r1, ins.r2)
                    };
                    if ins.x as usize != hpc || !is_step(ins.op) || !step.as_ref().is_none_or(same)
                    {
                        continue 'loops;
                    }
                    step = Some(ins);
                } else if l.contains(s) && s <= b {
                    continue 'loops;
                }
            }
        }
        let Some(step) = step else {
            continue;
        };
        let (counter, by, bound) = (u32::from(step.r0), u32::from(step.r1), u32::from(step.r2));
        // The step: a constant register no instruction writes.
        let by_value = match (by as usize).checked_sub(np) {
            Some(c) if writes.get(by as usize).is_some_and(|w| w.0 == 0) => {
                f.consts.get(c).copied().unwrap_or(0) as i64
            }
            _ => continue,
        };
        let up = match (step.op, by_value) {
            (Op::JmpStepLtI | Op::JmpStepNeI, 1) => true,
            (Op::JmpStepGtI | Op::JmpStepNeI, -1) => false,
            _ => continue,
        };
        if bound == counter {
            continue;
        }
        let pcs = || l.blocks.iter().flat_map(|b| starts[*b]..end_of(*b));
        let steps = pcs().count() as u64;
        if steps > COUNTED_BODY_MOST {
            continue;
        }
        // Writes in the loop, per register: how many, and the last `pc`.
        let mut written: HashMap<u32, (u32, usize)> = HashMap::new();
        let mut order = Vec::new();
        for pc in pcs() {
            let ins = &f.code[pc];
            if matches!(ins.op, Op::Call | Op::CallAcc | Op::CallN) {
                continue 'loops;
            }
            let stepping = is_step(ins.op) && ins.x as usize == hpc;
            for w in operands_written(ins) {
                if w == bound || (w == counter && !stepping) {
                    continue 'loops;
                }
                let e = written.entry(w).or_insert_with(|| {
                    order.push(w);
                    (0, pc)
                });
                *e = (e.0 + 1, pc);
            }
        }
        let mut accesses = Vec::new();
        for &b in &l.blocks {
            for pc in starts[b]..end_of(b) {
                let ins = &f.code[pc];
                let (Some((arrays, k, shadow)), Some((index, m))) =
                    (accessed_arrays(ins), access_index(ins))
                else {
                    continue;
                };
                // The index as the counter (at most once) plus offsets.
                let mut counted = 0;
                let mut offsets = Vec::new();
                let mut known = true;
                let term = |q: u32, counted: &mut u32, offsets: &mut Vec<u32>| {
                    if q == counter {
                        *counted += 1;
                        true
                    } else if !written.contains_key(&q) {
                        offsets.push(q);
                        true
                    } else {
                        false
                    }
                };
                for &q in &index[..m] {
                    if term(q, &mut counted, &mut offsets) {
                        continue;
                    }
                    // A sum written once in the loop, earlier in this
                    // block, of terms the loop does not change.
                    let def = match written.get(&q) {
                        Some(&(1, d)) if d >= starts[b] && d < pc => f.code[d],
                        _ => {
                            known = false;
                            break;
                        }
                    };
                    let parts = [u32::from(def.r1), u32::from(def.r2)];
                    if def.op != Op::AddI
                        || !parts.iter().all(|p| term(*p, &mut counted, &mut offsets))
                    {
                        known = false;
                        break;
                    }
                }
                if !known || counted > 1 {
                    continue;
                }
                for &array in &arrays[..k] {
                    accesses.push(Access {
                        pc,
                        array,
                        shadow,
                        counted: counted == 1,
                        offsets: offsets.clone(),
                    });
                }
            }
        }
        let succs = l
            .blocks
            .iter()
            .map(|b| {
                let mut ss: Vec<usize> = graph.succs[*b]
                    .iter()
                    .map(|s| *s as usize)
                    .filter(|s| *s != h && l.contains(*s))
                    .collect();
                ss.sort_unstable();
                ss.dedup();
                ss
            })
            .collect();
        out.push(Counted {
            header: hpc,
            blocks: l.blocks.clone(),
            steps,
            counter,
            bound,
            up,
            accesses,
            succs,
            written: order,
        });
    }
    out
}

/// Whether `op` steps a counter and branches (`jmp.step.if.<cc>.i`).
fn is_step(op: Op) -> bool {
    op.branch().is_some_and(|b| b.fused == Fused::StepI)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::{leaders, writes};
    use vm::Value;

    /// The counted loops of `f`: header, direction, and each access as
    /// `pc array shadow counted offsets`.
    fn counted(f: &Function) -> Vec<(usize, bool, Vec<String>)> {
        let starts = leaders(f);
        let graph = Graph::new(f, &starts);
        counted_loops(f, &starts, &graph, &writes(f))
            .into_iter()
            .map(|c| {
                let a = c.accesses.iter().map(|a| {
                    let name = |r: u32| f.reg_names.get(r as usize).cloned().unwrap_or_default();
                    let offs: Vec<String> = a.offsets.iter().map(|o| name(*o)).collect();
                    format!(
                        "{} {}{} {} [{}]",
                        a.pc,
                        name(a.array),
                        if a.shadow { "'" } else { "" },
                        if a.counted { "i+" } else { "" },
                        offs.join(",")
                    )
                });
                (c.header, c.up, a.collect())
            })
            .collect()
    }

    /// Every function of `src` (a file of `programs/`) and what was
    /// derived for `@name`'s gradient at `args`, by name.
    fn functions(src: &str, name: &str, args: &[Value]) -> Vec<Function> {
        let module = assembler::assemble(src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
        let mut e = ad::Engine::new(module).expect("verifies");
        let f = e.find(name).expect("exists");
        e.grad(f, args).expect("differentiates");
        e.program().funcs().to_vec()
    }

    fn of<'f>(fs: &'f [Function], name: &str) -> &'f Function {
        fs.iter().find(|f| f.name == name).expect("exists")
    }

    #[test]
    fn the_inner_loops_of_logreg_and_branchy_are_counted_in_all_their_code() {
        let src = include_str!("../../programs/bench/logreg.adasm");
        let args = [
            Value::Arr(vec![0.5; 6]),
            Value::Arr(vec![1.0; 3]),
            Value::Arr(vec![0.1; 2]),
            Value::I64(3),
            Value::I64(2),
        ];
        let fs = functions(src, "logreg", &args);
        // The row loop holds the column loop: only the column loop is
        // innermost. Its two reads, `X[base + j]` and `w[j]`, and in the
        // reverse code (counting down) the same reads and the sums into
        // their shadows.
        let inner = vec!["7 X i+ [base]".to_string(), "8 w i+ []".to_string()];
        assert_eq!(counted(of(&fs, "logreg")), [(7, true, inner.clone())]);
        assert_eq!(counted(of(&fs, "logreg.fwd")), [(7, true, inner)]);
        let rev = [
            "19 w i+ []",
            "21 X i+ [base]",
            "22 w' i+ []",
            "23 X' i+ [base]",
        ];
        assert_eq!(
            counted(of(&fs, "logreg.rev")),
            [(19, false, rev.map(String::from).to_vec())]
        );
        // A loop with a branch in it, two edges back to its header in the
        // forward code, and a block-table jump at the reverse code's.
        let src = include_str!("../../programs/bench/branchy.adasm");
        let fs = functions(src, "branchy", &[Value::Arr(vec![0.5, -0.5, 2.0])]);
        for (f, header, up, n) in [
            ("branchy", 4, true, 1),
            ("branchy.fwd", 4, true, 1),
            ("branchy.rev", 3, false, 3),
        ] {
            let c = counted(of(&fs, f));
            assert_eq!(c.len(), 1, "{f}");
            assert_eq!((c[0].0, c[0].1, c[0].2.len()), (header, up, n), "{f} {c:?}");
        }
    }

    #[test]
    fn liveness_of_logsumexp_at_its_loops_and_across_its_calls() {
        let src = include_str!("../../programs/bench/logsumexp.adasm");
        let fs = functions(src, "logsumexp", &[Value::Arr(vec![0.5, 2.0])]);
        let f = of(&fs, "logsumexp");
        let starts = leaders(f);
        let live = Graph::new(f, &starts)
            .live_in(f, &starts)
            .expect("within the bounds");
        let reg = |name: &str| {
            f.reg_names
                .iter()
                .position(|n| n == name)
                .unwrap_or_else(|| panic!("{name}")) as u32
        };
        // After the max loop (pc 10: the copies before the sum loop), and
        // at the sum loop's body (pc 13).
        let names = |pc: usize| {
            let mut v: Vec<&str> = ["v", "n", "m", "i", "e", "j", "s", "x", "y", "z"]
                .into_iter()
                .filter(|r| live.has(pc, reg(r)))
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(names(10), ["m", "n", "v"]);
        assert_eq!(names(13), ["j", "m", "n", "s", "v"]);
        // Live across `exp` and `log`: what the sum loop carries and reads
        // again, and the maximum; not the exponential's argument, not the
        // max loop's values.
        let across: Vec<&str> = ["v", "n", "m", "i", "e", "j", "s", "x", "y", "z"]
            .into_iter()
            .filter(|r| live.across_call(reg(r)))
            .collect();
        assert_eq!(across, ["v", "n", "m", "j", "s"]);
    }

    #[test]
    fn call_acc_reads_the_registers_it_adds_to() {
        let listing = "\
fn @pair(%a: f64, %b: f64) -> (f64, f64)   ; 4 regs, 0 consts
entry:
  0000  add.f       %s, %a, %b
  0001  mul.f       %p, %a, %b
  0002  ret.n       (%s, %p)
fn @calls(%x: f64, %y: f64) -> (f64, f64)   ; 6 regs, 0 consts
entry:
  0000  copy        %u, %x
  0001  copy        %w, %y
  0002  call.acc    @pair(%x, %y) += (%u, %w)
  0003  call.n      @pair(%u, %w) -> (%s, %p)
  0004  ret.n       (%s, %p)
";
        let p = assembler::assemble_listing(listing, "calls")
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let f = of(p.funcs(), "calls");
        let starts = leaders(f);
        let live = Graph::new(f, &starts)
            .live_in(f, &starts)
            .expect("within the bounds");
        let reg = |name: &str| f.reg_names.iter().position(|n| n == name).expect(name) as u32;
        // `u` and `w` are added to by the first call and read by the
        // second: live across the first. `x`, `y`: read by the first only.
        let across: Vec<&str> = ["x", "y", "u", "w", "s", "p"]
            .into_iter()
            .filter(|r| live.across_call(reg(r)))
            .collect();
        assert_eq!(across, ["u", "w"]);
        assert!(live.has(0, reg("x")) && !live.has(0, reg("u")));
    }

    #[test]
    fn liveness_gives_up_past_its_bound() {
        let src = include_str!("../../programs/bench/logsumexp.adasm");
        let fs = functions(src, "logsumexp", &[Value::Arr(vec![0.5, 2.0])]);
        let mut f = of(&fs, "logsumexp").clone();
        let starts = leaders(&f);
        let graph = Graph::new(&f, &starts);
        // Registers enough for the sets of its blocks to pass the bound
        // (the registers past the function's own are never read).
        let words = LIVE_WORDS_MOST / starts.len() + 1;
        f.reg_types.resize(words * 64, vm::Type::F64);
        assert!(graph.live_in(&f, &starts).is_none());
        f.reg_types.truncate((words - 1) * 64);
        assert!(graph.live_in(&f, &starts).is_some());
    }

    #[test]
    fn loops_the_guard_cannot_bound_are_not_counted() {
        let listing = "\
fn @call(%a: f64[], %n: i64) -> f64   ; 6 regs, 2 consts
  ; consts: r2 = 0, r3 = 1
entry:
  0000  copy        %i, 0
body:
  0001  call        %x, @leaf(%i)
  0002  jmp.step.if.lt.i %i += 1, %n, -> body (0001)
  0003  ret         %x

fn @leaf(%i: i64) -> f64   ; 2 regs, 0 consts
entry:
  0000  itof        %x, %i
  0001  ret         %x

fn @two(%a: f64[], %n: i64) -> f64   ; 6 regs, 2 consts
  ; consts: r2 = 0, r3 = 2
entry:
  0000  copy        %i, 0
body:
  0001  aget        %x, %a, %i
  0002  jmp.step.if.lt.i %i += 2, %n, -> body (0001)
  0003  ret         %x

fn @bump(%a: f64[], %n: i64) -> f64   ; 6 regs, 2 consts
  ; consts: r2 = 0, r3 = 1
entry:
  0000  copy        %i, 0
body:
  0001  aget        %x, %a, %i
  0002  add.i       %n, %n, %i
  0003  jmp.step.if.lt.i %i += 1, %n, -> body (0001)
  0004  ret         %x

fn @skip(%a: f64[], %n: i64) -> f64   ; 6 regs, 2 consts
  ; consts: r2 = 0, r3 = 1
entry:
  0000  copy        %i, 0
body:
  0001  aget        %x, %a, %i
  0002  add.i       %i, %i, %i
  0003  jmp.step.if.lt.i %i += 1, %n, -> body (0001)
  0004  ret         %x

fn @index(%a: f64[], %n: i64) -> f64   ; 9 regs, 2 consts
  ; consts: r2 = 0, r3 = 1
entry:
  0000  copy        %i, 0
body:
  0001  mul.i       %k, %i, %i
  0002  aget        %x, %a, %k
  0003  add.i       %m, %i, %n
  0004  aget        %y, %a, %m
  0005  jmp.step.if.lt.i %i += 1, %n, -> body (0001)
  0006  ret         %x
";
        let mut p = assembler::assemble_listing(listing, "counted")
            .unwrap_or_else(|d| panic!("{}", d.render()));
        for g in 0..p.len() {
            vm::verify::verify_function(&mut p, vm::ir::FuncId(g as u32)).expect("verifies");
        }
        let fs = p.funcs();
        // A call, a step of 2, a bound or a counter the loop writes.
        for name in ["call", "two", "bump", "skip"] {
            assert_eq!(counted(of(fs, name)), [], "{name}");
        }
        // A loop of more than `COUNTED_BODY_MOST` instructions.
        for (k, counted_too) in [(8, true), (COUNTED_BODY_MOST as usize, false)] {
            let mut listing = String::from(
                "fn @big(%a: f64[], %n: i64) -> f64   ; 6 regs, 2 consts\n  ; consts: r2 = 0, r3 = 1\nentry:\n  0000  copy        %i, 0\nbody:\n  0001  aget        %x, %a, %i\n",
            );
            for pc in 2..2 + k {
                listing.push_str(&format!("  {pc:04}  add.f       %x, %x, %x\n"));
            }
            listing.push_str(&format!(
                "  {:04}  jmp.step.if.lt.i %i += 1, %n, -> body (0001)\n  {:04}  ret         %x\n",
                2 + k,
                3 + k
            ));
            let mut p = assembler::assemble_listing(&listing, "big")
                .unwrap_or_else(|d| panic!("{}", d.render()));
            vm::verify::verify_function(&mut p, vm::ir::FuncId(0)).expect("verifies");
            assert_eq!(
                counted(of(p.funcs(), "big")).len(),
                usize::from(counted_too),
                "{k}"
            );
        }
        // An index the guard cannot bound keeps its check; `i + n` does not.
        assert_eq!(
            counted(of(fs, "index")),
            [(1, true, vec!["4 a i+ [n]".to_string()])]
        );
    }
}
