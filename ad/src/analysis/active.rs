//! Activity analysis: which values of a primal function may carry a
//! derivative, per value for scalars and per alias class for arrays, and
//! which calls must be differentiated through.
//!
//! Computed once per primal function, before any forward or reverse code
//! is built (see the module [`crate::analysis`]).

use vm::ir::{FuncId, Function, Module, ValueId};
use vm::op::{Activity, Op};
use vm::Type;

/// Activity: which values may carry a derivative, when differentiating with
/// respect to the parameters selected by `wrt` (one flag per parameter;
/// flags of `i64`/`bool` parameters are ignored).
///
/// An `f64` value is active when it depends on an active value. Constants,
/// `i64`/`bool` values, `nograd` and `itof` results are inactive, and so is
/// everything computed only from them.
///
/// Arrays are mutable and shared by reference, so their activity is decided
/// per *alias class*: arrays that may be the same array (joined by a phi, a
/// `select` or a `copy`, or returned by a call that received them) form one
/// class, and a class is active when it holds a selected parameter, when an
/// active value is stored into it, or when it is passed to a call with an
/// active argument (the callee may store that argument into it); a call's
/// array result is active when the call is.
pub fn activity(f: &Function, wrt: &[bool]) -> Vec<bool> {
    activity_with(f, wrt, None)
}

/// [`activity`] for function `f` of module `m`: a call taints the arrays
/// it receives only if its callee may write into an array argument
/// ([`may_write_arrays`]), so an array only read beside an active one
/// (`dot(v, dv)`) stays inactive.
pub fn activity_in(m: &Module, f: &Function, wrt: &[bool]) -> Vec<bool> {
    activity_with(f, wrt, Some(m))
}

/// Whether a call of `g` may write into an array it receives: `g`, or a
/// function it passes arrays to, contains an `aset` (or names a missing
/// function). Iterative, each function visited once.
pub fn may_write_arrays(m: &Module, g: FuncId) -> bool {
    let mut seen = hashbrown::HashSet::new();
    let mut stack = vec![g];
    while let Some(h) = stack.pop() {
        if !seen.insert(h) {
            continue;
        }
        let Some(func) = m.funcs.get(h.index()) else {
            return true;
        };
        for inst in func.blocks.iter().flat_map(|b| &b.insts) {
            match inst.op {
                Op::ASet => return true,
                Op::Call if inst.args.iter().any(|a| func.ty(*a) == Type::Arr) => {
                    match inst.callee {
                        Some(c) => stack.push(c),
                        None => return true,
                    }
                }
                _ => {}
            }
        }
    }
    false
}

/// Whether a call may write into the arrays it receives
/// ([`may_write_arrays`] of its callee), each callee looked at once.
/// Without a module, or without a callee, any call may.
pub struct CallWrites<'m> {
    module: Option<&'m Module>,
    known: hashbrown::HashMap<FuncId, bool>,
}

impl<'m> CallWrites<'m> {
    /// For the calls of a function of `module`.
    pub fn new(module: Option<&'m Module>) -> CallWrites<'m> {
        CallWrites {
            module,
            known: hashbrown::HashMap::new(),
        }
    }

    /// Whether a call of `callee` may write into an array it receives.
    pub fn may_write(&mut self, callee: Option<FuncId>) -> bool {
        match (self.module, callee) {
            (Some(m), Some(g)) => *self
                .known
                .entry(g)
                .or_insert_with(|| may_write_arrays(m, g)),
            _ => true,
        }
    }
}

fn activity_with(f: &Function, wrt: &[bool], m: Option<&Module>) -> Vec<bool> {
    let n = f.values.len();
    let mut calls = CallWrites::new(m);
    let mut active = vec![false; n];
    for (i, p) in f.params.iter().enumerate() {
        active[p.index()] = f.ty(*p).is_differentiable() && wrt.get(i).copied().unwrap_or(false);
    }
    let mut class = alias_union(f);
    let mut class_active = vec![false; n];
    for (v, a) in active.iter().enumerate() {
        if *a && f.values[v].ty == Type::Arr {
            class_active[class.find(v)] = true;
        }
    }
    // A fixed point over values and array classes: loops make phis depend on
    // values defined later in block order, and stores and calls make array
    // classes depend on f64 values.
    let mut changed = true;
    while changed {
        changed = false;
        for (v, data) in f.values.iter().enumerate() {
            if data.ty == Type::Arr && data.konst.is_none() && class_active[class.find(v)] {
                changed |= set(&mut active, ValueId(v as u32), true);
            }
        }
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
                let tainted: Vec<ValueId> = match inst.op {
                    Op::ASet if active[inst.args[2].index()] => vec![inst.args[0]],
                    // (An array result shares its class with the arguments,
                    // so a call returning one taints them as before.)
                    Op::Call
                        if call_is_active(f, inst, &active)
                            && (inst.dst.is_some_and(|d| f.ty(d) == Type::Arr)
                                || calls.may_write(inst.callee)) =>
                    {
                        array_args(f, inst)
                    }
                    _ => Vec::new(),
                };
                for a in tainted {
                    let c = class.find(a.index());
                    if !class_active[c] {
                        class_active[c] = true;
                        changed = true;
                    }
                }
            }
        }
    }
    active
}

/// Arrays that may be the same array, joined by a phi, a `select` or a
/// `copy`, or returned by a call that received them: one class each.
fn alias_union(f: &Function) -> UnionFind {
    let mut class = UnionFind::new(f.values.len());
    for b in &f.blocks {
        for phi in &b.phis {
            if f.ty(phi.dst) == Type::Arr {
                for (_, v) in &phi.incoming {
                    class.union(phi.dst.index(), v.index());
                }
            }
        }
        for inst in &b.insts {
            let Some(d) = inst.dst.filter(|d| f.ty(*d) == Type::Arr) else {
                continue;
            };
            let joined = match inst.op {
                Op::Select | Op::Mov | Op::Call => array_args(f, inst),
                _ => Vec::new(),
            };
            for a in joined {
                class.union(d.index(), a.index());
            }
        }
    }
    class
}

/// Which arrays of `f` may be the same array while it runs (see
/// [`ArraySet`]).
pub struct Aliases {
    /// The alias class of each value (of an array; meaningless for others).
    class: Vec<usize>,
    /// Per class: it holds an array made outside the function (a
    /// parameter, a call's result, a constant), which may be any other
    /// such array, since a caller may pass one array for two parameters.
    outside: Vec<bool>,
}

impl Aliases {
    /// The alias classes of `f`'s arrays.
    pub fn of(f: &Function) -> Aliases {
        let n = f.values.len();
        let mut union = alias_union(f);
        let class: Vec<usize> = (0..n).map(|v| union.find(v)).collect();
        let mut outside = vec![false; n];
        for (v, data) in f.values.iter().enumerate() {
            if data.ty == Type::Arr && data.konst.is_some() {
                outside[class[v]] = true;
            }
        }
        for p in &f.params {
            outside[class[p.index()]] = true;
        }
        for inst in f.blocks.iter().flat_map(|b| &b.insts) {
            if let Some(d) = inst.dst.filter(|d| f.ty(*d) == Type::Arr) {
                if inst.op != Op::ANew {
                    outside[class[d.index()]] = true;
                }
            }
        }
        Aliases { class, outside }
    }
}

/// A set of arrays, as far as [`Aliases`] can tell them apart: their
/// classes, and whether one of them was made outside the function. Two
/// arrays may be the same array when they are of the same class, or both
/// classes hold arrays made outside the function (arrays of two `anew`s,
/// or of an `anew` and a parameter, never are). Adding an array and asking
/// whether an array may be one of the set's take a binary search, however
/// many were added.
#[derive(Clone, Debug, Default)]
pub struct ArraySet {
    classes: Vec<usize>,
    outside: bool,
}

impl ArraySet {
    /// Add array `a`.
    pub fn insert(&mut self, aliases: &Aliases, a: ValueId) {
        let c = aliases.class[a.index()];
        if let Err(at) = self.classes.binary_search(&c) {
            self.classes.insert(at, c);
        }
        self.outside |= aliases.outside[c];
    }

    /// Whether array `a` may be one of the set's.
    pub fn may_hold(&self, aliases: &Aliases, a: ValueId) -> bool {
        let c = aliases.class[a.index()];
        self.classes.binary_search(&c).is_ok() || (self.outside && aliases.outside[c])
    }
}

/// The operands of `inst` that are arrays.
fn array_args(f: &Function, inst: &vm::ir::Inst) -> Vec<ValueId> {
    inst.args
        .iter()
        .filter(|a| f.ty(**a) == Type::Arr)
        .copied()
        .collect()
}

/// Every `f64` and `f64[]` parameter selected.
pub fn all_params(f: &Function) -> Vec<bool> {
    f.params
        .iter()
        .map(|p| f.ty(*p).is_differentiable())
        .collect()
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
    match op.facts().active {
        Activity::Never => false,
        // The condition of a select carries no derivative.
        Activity::NotCondition => args[1..].iter().any(|a| active[a.index()]),
        Activity::Operands => args.iter().any(|a| active[a.index()]),
    }
}

/// Whether a call must be differentiated through: some argument is active
/// (an active f64, or an active array, which the callee may read or write),
/// and a derivative can leave the callee: by its result (`f64` or `f64[]`)
/// or through an array argument it may write. A call whose result cannot
/// carry a derivative (`i64`, `bool`, none) and which receives no array
/// gets no derived code and no reverse code (adasm.md §4, property 3): its
/// pullback would route a zero cotangent to nothing.
pub fn call_is_active(f: &Function, inst: &vm::ir::Inst, active: &[bool]) -> bool {
    let out = inst.dst.is_some_and(|d| f.ty(d).is_differentiable())
        || inst.args.iter().any(|a| f.ty(*a) == Type::Arr);
    out && inst.args.iter().any(|a| active[a.index()])
}

/// Which arguments of a call are active: the parameters the callee's
/// derived functions are built with respect to.
pub fn call_wrt(args: &[ValueId], active: &[bool]) -> Vec<bool> {
    args.iter().map(|a| active[a.index()]).collect()
}

struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind {
            parent: (0..n).collect(),
        }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.parent[ra] = rb;
        }
    }
}
