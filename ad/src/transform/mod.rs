//! The reverse-mode transform: one primal SSA function in, a forward
//! function and a reverse (pullback) function out, both in the IR that
//! [`vm::lower`] turns into bytecode.
//!
//! The design follows Mooncake's reverse mode (see
//! `../shared/seeds/mooncake-reverse-mode-design.txt`), with our IR in place
//! of Julia's IRCode:
//!
//! 1. **Analyse** the primal ([`crate::analysis`]): predecessors, loops,
//!    which blocks lie on cycles, the `ret` blocks, and activity with respect
//!    to the selected parameters.
//! 2. **Translate** each instruction into a reverse fragment and the primal
//!    values that fragment reads (`Transform::reverse_inst`). The forward
//!    fragment is the primal instruction itself, except that active calls
//!    call the callee's forward function, `aset` first reads the element
//!    it overwrites, and an active `sin` or `cos` is followed by the other
//!    function of its operand, the factor its pullback multiplies by
//!    (`Transform::factor`). For every value a fragment reads,
//!    `Transform::supply` decides how the reverse code gets it (see `Supply`): rebuilt as a
//!    constant, popped once per call (values of the entry block), read from
//!    a loop's counter, popped once per execution of a loop (values defined
//!    before the loop), recomputed in the reverse block, or, only when none
//!    of these applies, pushed by the forward block and popped by its
//!    reverse.
//! 3. **Assemble** the reverse CFG: a prologue that pops the entry values and
//!    dispatches on the returning block; one reverse block per primal block
//!    (pop its values, recompute what it recomputes, run its fragments
//!    backwards, then go to the predecessor it was entered from: statically
//!    when unique, by the loop counter at the header of a [`Counted`] loop,
//!    else by `blk.pop`); edge blocks that pop what a loop exit pushed and
//!    move phi cotangents to the incoming values of the edge actually taken;
//!    and an exit returning the parameters' cotangents (`ret.n`).
//! 4. **Assemble** the forward CFG: the primal blocks with the `comms.push`es
//!    of step 2; `blk.push` only on edges into blocks with several
//!    predecessors that are not the header of a counted loop; at every exit
//!    of a counted loop, its counter and the values defined before it that
//!    its reverse needs; at `ret`, the entry values and then the returning
//!    block's index (when there are several).
//!
//! The reverse function is then cleaned up by [`crate::optimize`] before it
//! is lowered.
//!
//! Cotangents live in one register per active f64 value of the reverse
//! frame (registers start at zero). A fragment reads the cotangent of the
//! value it defines, adds into its operands' cotangents and, when the
//! defining block lies on a cycle, zeroes it, so that the previous
//! iteration's instance starts from zero. Arrays carry their cotangents in
//! the VM's shadow arrays, addressed by handle.
//!
//! The transform's state is split by concern, one structure per file:
//! `primal.rs` (what step 1 found: CFG, activity, definitions; read only),
//! `fwd_fn.rs` (the forward function being built and what translation adds
//! to it), `rev_fn.rs` (the reverse function being built: cotangent
//! registers, constants, fragments), `plan.rs` (what the reverse code reads
//! and where the forward code saves it: loops, needs, recomputations, entry
//! values). The steps are methods of `Transform`, which holds the four.
//!
//! [`Counted`]: crate::analysis::Counted

mod emit;
mod forward_cfg;
mod fwd_fn;
mod plan;
mod primal;
mod rev_fn;
mod reverse_cfg;
mod single;
mod supply;
mod translate;
mod values;

use self::{
    fwd_fn::FwdFn,
    plan::*,
    primal::{Primal, LINE_MOST},
    rev_fn::RevFn,
};
#[allow(unused_imports)]
use self::{single::*, values::*};
use crate::analysis::{activity_in, call_is_active, call_wrt, Aliases, ArraySet, CallWrites, Cfg};
use crate::compile_work::{Exceeded, Work};
use crate::rules::{self, reverse::NoRule};
pub(crate) use emit::Emit;
use hashbrown::HashMap;
use vm::ir::{Block, BlockId, FuncId, Function, Inst, Loc, Module, Phi, RetType, Term, ValueId};
use vm::op::{Op, Remat};
use vm::Type;

/// The forward and reverse functions of one primal function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Derived {
    /// The forward function: the primal computation, pushing on the comms
    /// and block stacks what the reverse function needs.
    pub fwd: FuncId,
    /// The reverse (pullback) function: pops what the forward one saved
    /// and returns the cotangents of the selected parameters.
    pub rev: FuncId,
}

/// How deep a recomputation in the reverse code may go: a value may be
/// recomputed from values that are themselves recomputed, but no further.
const MAX_REMAT_DEPTH: u32 = 2;

/// How deep a recomputation may go through integer arithmetic alone (an
/// array index such as GMM's `c·t + d + j·(2d - j - 1)/2 + (r - j - 1)`):
/// a handful of one-cycle instructions in place of a value pushed and
/// popped per iteration.
const MAX_INT_REMAT_DEPTH: u32 = 8;

/// Build the forward and reverse IR of `module.funcs[f]`, differentiating
/// with respect to the parameters selected by `wrt` (one flag per
/// parameter). `derived(g, wrt)` gives the (possibly not yet built) derived
/// functions of a callee `g` with respect to the call's active arguments.
/// `cleanup`: run the reverse function's clean-up ([`crate::optimize`]);
/// off only to show what the rules and the assembly of step 3 produce.
pub fn transform(
    module: &Module,
    f: FuncId,
    wrt: &[bool],
    derived: &mut dyn FnMut(FuncId, Vec<bool>) -> Derived,
    cleanup: bool,
) -> Result<(Function, Function), NoRule> {
    let opts = Options {
        cleanup,
        ..Options::default()
    };
    match transform_within(module, f, wrt, derived, opts, &mut Work::unlimited()) {
        Ok(pair) => Ok(pair),
        Err(Refusal::NoRule(n)) => Err(n),
        // An unlimited budget is never exceeded (the count saturates).
        Err(Refusal::Work(_)) => unreachable!("an unlimited compile budget was exceeded"),
    }
}

/// Why [`transform_within`] built nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// An instruction has no reverse rule.
    NoRule(NoRule),
    /// The compile budget ran out ([`crate::compile_work`]).
    Work(Exceeded),
}

/// What [`transform_within`] does besides the transform itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Run the reverse function's clean-up ([`crate::optimize`]); off only
    /// to show what the rules and the assembly of step 3 produce.
    pub cleanup: bool,
    /// Derive from a copy of the function whose small conditionals are
    /// if-converted ([`vm::ifconv`]): the derived code pushes no block id
    /// for their joins and routes their cotangents with `select`s
    /// ([`crate::Engine::set_if_conversion`]).
    pub if_convert: bool,
}

impl Default for Options {
    /// The clean-up on, if-conversion off (as [`crate::Engine`] has them).
    fn default() -> Options {
        Options {
            cleanup: true,
            if_convert: false,
        }
    }
}

/// [`transform`], each stage charged to `work` before it runs (see
/// [`crate::compile_work`]): the primal's size for the analysis and the
/// translation, the reverse function's before each round of its clean-up,
/// and both results' at the end, for the lowering and verification that
/// follow.
pub fn transform_within(
    module: &Module,
    f: FuncId,
    wrt: &[bool],
    derived: &mut dyn FnMut(FuncId, Vec<bool>) -> Derived,
    opts: Options,
    work: &mut Work,
) -> Result<(Function, Function), Refusal> {
    let p = module.func(f);
    // Conditionals whose condition the reverse code would have to receive
    // (8 bytes a time, where the branches' block id takes 4): derived from
    // the branches instead. Excluding some may make another's condition
    // crossing (one of them read the other's); the third attempt converts
    // nothing.
    let mut keep_branches: hashbrown::HashSet<ValueId> = hashbrown::HashSet::new();
    let mut copy: Option<Function>;
    let mut attempt = 0;
    loop {
        let mut conds = Vec::new();
        copy = None;
        if opts.if_convert && attempt < 2 {
            let mut c = p.clone();
            conds = vm::ifconv::convert_if(&mut c, |v| !keep_branches.contains(&v));
            if !conds.is_empty() {
                copy = Some(c);
            }
        }
        let q = copy.as_ref().unwrap_or(p);
        work.charge_function(q).map_err(Refusal::Work)?;
        let mut t = Transform::new(module, q, wrt);
        t.translate(derived).map_err(Refusal::NoRule)?;
        t.share_needs_along_lines();
        let pushed = t.pushed_values();
        let crossing: Vec<ValueId> = conds.into_iter().filter(|c| pushed.contains(c)).collect();
        if crossing.is_empty() {
            return t.finish(opts, work);
        }
        keep_branches.extend(crossing);
        attempt += 1;
    }
}

impl Transform<'_> {
    /// The values some forward block pushes for its reverse block.
    fn pushed_values(&self) -> hashbrown::HashSet<ValueId> {
        self.plan.needs.iter().flatten().copied().collect()
    }

    /// Steps 3 and 4 of [`transform_within`] and the clean-up: the pair.
    fn finish(mut self, opts: Options, work: &mut Work) -> Result<(Function, Function), Refusal> {
        self.order_needs();
        self.assemble_reverse();
        self.assemble_forward();
        if opts.cleanup {
            crate::optimize::reverse_within(&mut self.rev.func, work).map_err(Refusal::Work)?;
        }
        work.charge_function(&self.fwd.func)
            .map_err(Refusal::Work)?;
        work.charge_function(&self.rev.func)
            .map_err(Refusal::Work)?;
        Ok((self.fwd.func, self.rev.func))
    }
}

/// How the reverse code obtains a forward value that a fragment reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Supply {
    /// A constant, rebuilt in the reverse function.
    Const,
    /// Defined in the entry block (parameters included): pushed once, at
    /// `ret`, and popped by the reverse prologue.
    Entry,
    /// The counter of counted loop `l` (its induction variable), which the
    /// reverse code counts down itself.
    Counter(usize),
    /// Defined before counted loop `l`, the outermost loop around the reader
    /// that does not contain the definition: pushed at each exit of the loop,
    /// popped when the reverse code enters the loop.
    Invariant(usize),
    /// Recomputed at the top of the reader's reverse block from operands that
    /// are themselves available there without a push (a pure, cheap
    /// instruction; array reads only when nothing in the function can write
    /// an array).
    Remat,
    /// Pushed by the reader's forward block, popped by its reverse block.
    Push,
}

/// The state of one reverse-mode transform, by concern: what is known of
/// the primal ([`Primal`]), the forward function being built ([`FwdFn`]),
/// the reverse function being built ([`RevFn`]) and the plan of what the
/// reverse code reads and how ([`Plan`]).
struct Transform<'a> {
    primal: Primal<'a>,
    fwd: FwdFn,
    rev: RevFn,
    plan: Plan,
}

/// See [`Transform::join_phis`]; smaller joins are searched.
const JOIN_INDEXED: usize = 16;

impl<'a> Transform<'a> {
    fn new(module: &'a Module, p: &'a Function, wrt: &[bool]) -> Transform<'a> {
        let cfg = Cfg::new(p);
        let active = activity_in(module, p, wrt);
        let mut fwd = p.clone();
        fwd.name = format!("{}.fwd", p.name);
        let n_f64 = p.params.iter().filter(|v| p.ty(**v) == Type::F64).count();
        let mut rev = Function {
            name: format!("{}.rev", p.name),
            params: Vec::new(),
            ret: RetType::Many(vec![Type::F64; n_f64]),
            values: Vec::new(),
            blocks: Vec::new(),
            loc: p.loc,
        };
        let seed = (p.ret == RetType::One(Type::F64)).then(|| {
            let s = rev.new_value(Type::F64, Some("seed".into()));
            rev.params.push(s);
            s
        });
        let mut cot = vec![None; p.values.len()];
        for (i, v) in p.values.iter().enumerate() {
            if active[i] && v.ty == Type::F64 {
                let name = v.name.as_ref().map(|n| format!("d.{n}"));
                cot[i] = Some(rev.new_value(Type::F64, name));
            }
        }
        let mut fwd_def = cfg.def_block.clone();
        let mut def_inst = vec![None; p.values.len()];
        // Which instructions may write an array element: an `aset`, or a
        // call passing an array to a callee that may write it.
        let mut calls = CallWrites::new(Some(module));
        let mut writes = |inst: &Inst| match inst.op {
            Op::ASet => true,
            Op::Call if inst.args.iter().any(|a| p.ty(*a) == Type::Arr) => {
                calls.may_write(inst.callee)
            }
            _ => false,
        };
        let (mut any_write, mut call_writes) = (false, false);
        let mut reread_in_block = vec![false; p.values.len()];
        let aliases = Aliases::of(p);
        let mut block_writes = Vec::with_capacity(p.blocks.len());
        for (bi, b) in p.blocks.iter().enumerate() {
            // Walked backwards, so that `later` holds the arrays written
            // after the current instruction in the block.
            let mut later = ArraySet::default();
            for (ii, inst) in b.insts.iter().enumerate().rev() {
                if let Some(d) = inst.dst {
                    def_inst[d.index()] = Some((bi, ii));
                    reread_in_block[d.index()] =
                        inst.op == Op::AGet && !later.may_hold(&aliases, inst.args[0]);
                }
                if writes(inst) {
                    any_write = true;
                    call_writes |= inst.op == Op::Call;
                    for a in inst.args.iter().filter(|a| p.ty(**a) == Type::Arr) {
                        later.insert(&aliases, *a);
                    }
                }
            }
            block_writes.push(later);
        }
        if call_writes {
            reread_in_block.fill(false);
        }
        let arrays_immutable = !any_write;
        let mut loops = Vec::with_capacity(cfg.loops.len());
        // The reverse function's i64 constants by bits (the first of equal
        // ones), so that each loop's limit finds its constant at once.
        let mut rev_i64: HashMap<u64, ValueId> = HashMap::new();
        for (i, v) in rev.values.iter().enumerate().rev() {
            if let (Type::I64, Some(k)) = (v.ty, v.konst) {
                rev_i64.insert(k, ValueId(i as u32));
            }
        }
        for l in &cfg.loops {
            let Some(c) = &l.counted else {
                loops.push(None);
                continue;
            };
            let hname = &p.blocks[l.header.index()].name;
            let ctr = rev.new_value(Type::I64, Some(format!("iv.{hname}")));
            let (iv, init, step, synthetic) = match c.iv {
                Some(iv) => (iv.phi, iv.init, iv.step, None),
                None => {
                    // No induction variable: count iterations in the forward
                    // code (an `add` per iteration instead of a `blk.push`).
                    let zero = fwd.new_const(Type::I64, 0);
                    let one = fwd.new_const(Type::I64, 1);
                    let cnt = fwd.new_value(Type::I64, Some(format!("trip.{hname}")));
                    let next = fwd.new_value(Type::I64, None);
                    fwd.blocks[l.header.index()].phis.push(Phi {
                        dst: cnt,
                        incoming: vec![(c.entry, zero), (c.latch, next)],
                        loc: Loc::default(),
                    });
                    fwd_def.extend([Some(l.header), Some(c.latch)]);
                    fwd_def.resize(fwd.values.len(), None);
                    let inc = Inst::new(Op::AddI, Some(next), vec![cnt, one], Loc::default());
                    (cnt, zero, 1, Some((c.latch.index(), inc)))
                }
            };
            let (lim, lim_const) = match fwd.values[init.index()].konst {
                Some(k) => {
                    let bits = (k as i64).wrapping_sub(step) as u64;
                    let k = *rev_i64
                        .entry(bits)
                        .or_insert_with(|| rev.new_const(Type::I64, bits));
                    (k, true)
                }
                None => (
                    rev.new_value(Type::I64, Some(format!("lim.{hname}"))),
                    false,
                ),
            };
            loops.push(Some(LoopState {
                ctr,
                iv,
                init,
                step,
                lim,
                lim_const,
                init_reg: None,
                invariants: Vec::new(),
                synthetic,
            }));
        }
        fwd_def.resize(fwd.values.len(), None);
        let mut set_once = vec![false; rev.values.len()];
        for (v, once) in single_contribution(p, &cfg, &active)
            .into_iter()
            .enumerate()
        {
            if let (true, Some(c)) = (once, cot[v]) {
                set_once[c.index()] = true;
            }
        }
        let nblocks = p.blocks.len();
        let mut t = Transform {
            primal: Primal {
                module,
                p,
                cfg,
                active,
                def_inst,
                arrays_immutable,
                reread_in_block,
                block_writes,
                aliases,
            },
            fwd: FwdFn {
                func: fwd,
                def: fwd_def,
                overwritten: HashMap::new(),
                calls: HashMap::new(),
                factors: HashMap::new(),
            },
            rev: RevFn {
                func: rev,
                mirror: Vec::new(),
                cot,
                consts: HashMap::new(),
                seed,
                sink: None,
                frags: vec![Vec::new(); nblocks],
                set_once,
            },
            plan: Plan {
                loops,
                needs: vec![Vec::new(); nblocks],
                remat: vec![Vec::new(); nblocks],
                remat_memo: HashMap::new(),
                entry_values: Vec::new(),
                listed: hashbrown::HashSet::new(),
                join_phis: HashMap::new(),
            },
        };
        // Constants made while setting up the loops are shared from now on.
        for (i, v) in t.rev.func.values.iter().enumerate() {
            if let Some(k) = v.konst {
                t.rev.consts.insert((v.ty, k), ValueId(i as u32));
            }
        }
        t
    }
}
