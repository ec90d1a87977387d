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
//! [`Counted`]: crate::analysis::Counted

use crate::analysis::{activity, call_is_active, call_wrt, Cfg};
use crate::rules::{self, reverse::NoRule};
use hashbrown::HashMap;
use vm::ir::{Block, BlockId, FuncId, Function, Inst, Loc, Module, Phi, RetType, Term, ValueId};
use vm::op::{Op, Remat};
use vm::Type;

/// The forward and reverse functions of one primal function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Derived {
    pub fwd: FuncId,
    pub rev: FuncId,
}

/// How deep a recomputation in the reverse code may go: a value may be
/// recomputed from values that are themselves recomputed, but no further.
const MAX_REMAT_DEPTH: u32 = 2;

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
    let p = module.func(f);
    let mut t = Transform::new(module, p, wrt);
    t.translate(derived)?;
    t.order_needs();
    t.assemble_reverse();
    t.assemble_forward();
    if cleanup {
        crate::optimize::reverse(&mut t.rev);
    }
    Ok((t.fwd, t.rev))
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

/// A counted loop as the reverse code sees it.
struct LoopState {
    /// Reverse register holding the loop's induction variable, counted down.
    ctr: ValueId,
    /// Forward value pushed at every exit as the counter's start: the
    /// induction-variable phi, or the counter the forward code adds.
    iv: ValueId,
    /// The induction variable's value in the first iteration (forward).
    init: ValueId,
    step: i64,
    /// Reverse register (or constant) holding `init - step`: the counter's
    /// value after leaving the first iteration backwards.
    lim: ValueId,
    lim_const: bool,
    /// Where the reverse code reads `init` (to compute `lim`).
    init_reg: Option<ValueId>,
    /// Forward values pushed at every exit (before `iv`), popped when the
    /// reverse code enters the loop.
    invariants: Vec<ValueId>,
    /// Added forward counter: `(latch block, increment instruction)`.
    synthetic: Option<(usize, Inst)>,
}

struct Transform<'a> {
    module: &'a Module,
    p: &'a Function,
    cfg: Cfg,
    active: Vec<bool>,
    /// The forward function: a copy of the primal, extended.
    fwd: Function,
    /// The block defining each forward value (extends `cfg.def_block`).
    fwd_def: Vec<Option<BlockId>>,
    /// The primal instruction `(block, index)` defining each value.
    def_inst: Vec<Option<(usize, usize)>>,
    /// Counted loops, by loop index (`None` for the others).
    loops: Vec<Option<LoopState>>,
    /// No instruction of the function can change an array element while it
    /// runs (no `aset`, no call that receives an array), so an element read
    /// can be repeated in the reverse code with the same result. (Callers'
    /// later writes are undone by their own reverse code before this
    /// function's reverse runs.)
    arrays_immutable: bool,
    /// For each `aset` (block, index), the forward value holding the element
    /// it overwrites.
    overwritten: HashMap<(usize, usize), ValueId>,
    /// For each call (block, index) differentiated through, the callee's
    /// derived functions.
    calls: HashMap<(usize, usize), Derived>,
    /// For each active `sin` and `cos` (block, index), the forward value
    /// holding the other function of its operand (`cos a` for `sin a`,
    /// `sin a` for `cos a`): the factor its pullback needs, computed by the
    /// forward code right after it (see [`Transform::factor`]).
    factors: HashMap<(usize, usize), ValueId>,
    rev: Function,
    /// Reverse-frame copy of each forward value the reverse code pops.
    mirror: Vec<Option<ValueId>>,
    /// Cotangent register of each active f64 primal value.
    cot: Vec<Option<ValueId>>,
    consts: HashMap<(Type, u64), ValueId>,
    seed: Option<ValueId>,
    sink: Option<ValueId>,
    /// Forward values each primal block pushes for its reverse block, in
    /// first-use order, deduplicated.
    needs: Vec<Vec<ValueId>>,
    /// Recomputations at the top of each reverse block, in dependency order.
    remat: Vec<Vec<Inst>>,
    remat_memo: HashMap<(usize, ValueId), ValueId>,
    /// Reverse fragments of each primal block, already in reverse order.
    frags: Vec<Vec<Inst>>,
    /// Needed values defined in the entry block: pushed once at `ret`.
    entry_values: Vec<ValueId>,
    /// Reverse registers (cotangents) that receive exactly one
    /// contribution per instance of their value.
    set_once: Vec<bool>,
}

impl<'a> Transform<'a> {
    fn new(module: &'a Module, p: &'a Function, wrt: &[bool]) -> Transform<'a> {
        let cfg = Cfg::new(p);
        let active = activity(p, wrt);
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
        let mut arrays_immutable = true;
        for (bi, b) in p.blocks.iter().enumerate() {
            for (ii, inst) in b.insts.iter().enumerate() {
                if let Some(d) = inst.dst {
                    def_inst[d.index()] = Some((bi, ii));
                }
                let writes = inst.op == Op::ASet
                    || (inst.op == Op::Call && inst.args.iter().any(|a| p.ty(*a) == Type::Arr));
                arrays_immutable &= !writes;
            }
        }
        let mut loops = Vec::with_capacity(cfg.loops.len());
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
                    (konst_in(&mut rev, Type::I64, bits), true)
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
            module,
            p,
            cfg,
            active,
            fwd,
            fwd_def,
            def_inst,
            loops,
            arrays_immutable,
            overwritten: HashMap::new(),
            calls: HashMap::new(),
            factors: HashMap::new(),
            rev,
            mirror: Vec::new(),
            cot,
            consts: HashMap::new(),
            seed,
            sink: None,
            needs: vec![Vec::new(); nblocks],
            remat: vec![Vec::new(); nblocks],
            remat_memo: HashMap::new(),
            frags: vec![Vec::new(); nblocks],
            entry_values: Vec::new(),
            set_once,
        };
        // Constants made while setting up the loops are shared from now on.
        for (i, v) in t.rev.values.iter().enumerate() {
            if let Some(k) = v.konst {
                t.consts.insert((v.ty, k), ValueId(i as u32));
            }
        }
        t
    }

    // ---- step 2: translation ------------------------------------------------

    fn translate(
        &mut self,
        derived: &mut dyn FnMut(FuncId, Vec<bool>) -> Derived,
    ) -> Result<(), NoRule> {
        let p = self.p;
        for (b, block) in p.blocks.iter().enumerate() {
            for (i, inst) in block.insts.iter().enumerate() {
                match inst.op {
                    Op::ASet => {
                        let old = self.fwd.new_value(Type::F64, None);
                        self.fwd_def.push(Some(BlockId(b as u32)));
                        self.overwritten.insert((b, i), old);
                    }
                    Op::Call if call_is_active(p, inst, &self.active) => {
                        let callee = inst.callee.expect("calls name a callee");
                        let wrt = call_wrt(&inst.args, &self.active);
                        self.calls.insert((b, i), derived(callee, wrt));
                    }
                    _ => {}
                }
                if let Some((other, a)) = self.factor(inst) {
                    // Named after what it holds: `cos.x` for `sin %x`.
                    let name = p.values[a.index()]
                        .name
                        .as_ref()
                        .map(|n| format!("{}.{n}", other.mnemonic()));
                    let f = self.fwd.new_value(Type::F64, name);
                    self.fwd_def.push(Some(BlockId(b as u32)));
                    self.factors.insert((b, i), f);
                }
            }
            let mut frag = Vec::new();
            for (i, inst) in block.insts.iter().enumerate().rev() {
                self.reverse_inst(b, i, inst, &mut frag)?;
            }
            self.frags[b] = frag;
        }
        // Where each counted loop's reverse reads the first value of its
        // induction variable. It is defined before the loop (its definition
        // dominates the entry edge, which is not a back edge), so this is a
        // constant, an entry value, an outer loop's counter, or a value
        // pushed at the loop's exits: never a per-iteration push.
        for l in 0..self.loops.len() {
            let Some(s) = &self.loops[l] else { continue };
            if s.lim_const {
                continue;
            }
            let (init, header) = (s.init, self.cfg.loops[l].header);
            let r = self.supply_reg(header, init);
            if let Some(s) = &mut self.loops[l] {
                s.init_reg = Some(r);
            }
        }
        Ok(())
    }

    /// For an active `sin a` or `cos a`: the opcode of the factor its
    /// pullback needs (`cos` for `sin`, `sin` for `cos`) and `a`.
    ///
    /// The forward code computes the factor right after the instruction,
    /// where the lowering fuses the pair into one `sincos` (about the cost
    /// of one `sin`), and the reverse code reads it like any forward value
    /// (usually popped). That trades a push and a pop (8 bytes) for a
    /// transcendental function in the reverse code, which costs several
    /// times as much; recomputing `a` and then `cos a` in the reverse code
    /// would need no memory but a whole `cos`.
    fn factor(&self, inst: &Inst) -> Option<(Op, ValueId)> {
        let other = match inst.op {
            Op::Sin => Op::Cos,
            Op::Cos => Op::Sin,
            _ => return None,
        };
        let (&[a], Some(d)) = (&inst.args[..], inst.dst) else {
            return None;
        };
        (self.active[a.index()] && self.active[d.index()]).then_some((other, a))
    }

    /// How the reverse block of `b` gets forward value `v` (see [`Supply`]).
    /// `depth` counts nested recomputations.
    fn supply(&self, b: BlockId, v: ValueId, depth: u32) -> Supply {
        if self.fwd.values[v.index()].konst.is_some() {
            return Supply::Const;
        }
        let def = self.fwd_def.get(v.index()).copied().flatten();
        if def == Some(BlockId(0)) {
            return Supply::Entry;
        }
        let mut invariant = None;
        for l in self.cfg.loops_around(b) {
            let Some(s) = &self.loops[l] else { continue };
            if s.iv == v {
                return Supply::Counter(l);
            }
            if def.is_some_and(|d| !self.cfg.loops[l].contains(d)) {
                invariant = Some(l);
            }
        }
        if let Some(l) = invariant {
            return Supply::Invariant(l);
        }
        if depth < MAX_REMAT_DEPTH {
            if let Some(inst) = self.remat_inst(v) {
                let available = inst
                    .args
                    .iter()
                    .all(|a| self.supply(b, *a, depth + 1) != Supply::Push);
                if available {
                    return Supply::Remat;
                }
            }
        }
        Supply::Push
    }

    /// The primal instruction defining `v`, if the reverse code may simply
    /// run it again: pure, cheap, and reading nothing that can have changed
    /// (see [`Transform::arrays_immutable`]). A repeated instruction sees
    /// the operands it saw in the forward code, so it cannot trap.
    fn remat_inst(&self, v: ValueId) -> Option<&'a Inst> {
        let (b, i) = self.def_inst.get(v.index()).copied().flatten()?;
        let inst = &self.p.blocks[b].insts[i];
        let cheap = match inst.op.facts().remat {
            Remat::Cheap => true,
            Remat::CheapUnlessArraysChange => self.arrays_immutable,
            Remat::Never => false,
        };
        cheap.then_some(inst)
    }

    /// The reverse register from which the reverse block of `b` reads
    /// forward value `v`, arranging for it to be there.
    fn supply_reg(&mut self, b: BlockId, v: ValueId) -> ValueId {
        match self.supply(b, v, 0) {
            Supply::Const => {
                let data = &self.fwd.values[v.index()];
                let (ty, bits) = (data.ty, data.konst.unwrap_or(0));
                self.konst(ty, bits)
            }
            Supply::Entry => {
                if !self.entry_values.contains(&v) {
                    self.entry_values.push(v);
                }
                self.mirror_of(v)
            }
            Supply::Counter(l) => self.loops[l].as_ref().map_or(v, |s| s.ctr),
            Supply::Invariant(l) => {
                if let Some(s) = &mut self.loops[l] {
                    if !s.invariants.contains(&v) {
                        s.invariants.push(v);
                    }
                }
                self.mirror_of(v)
            }
            Supply::Remat => self.rematerialize(b, v),
            Supply::Push => {
                let needs = &mut self.needs[b.index()];
                if !needs.contains(&v) {
                    needs.push(v);
                }
                self.mirror_of(v)
            }
        }
    }

    /// Recompute `v` at the top of `b`'s reverse block (once per block).
    fn rematerialize(&mut self, b: BlockId, v: ValueId) -> ValueId {
        if let Some(r) = self.remat_memo.get(&(b.index(), v)) {
            return *r;
        }
        let Some(inst) = self.remat_inst(v) else {
            return self.mirror_of(v);
        };
        let args: Vec<ValueId> = inst.args.iter().map(|a| self.supply_reg(b, *a)).collect();
        let data = &self.fwd.values[v.index()];
        let dst = self.rev.new_value(data.ty, data.name.clone());
        self.remat[b.index()].push(Inst::new(inst.op, Some(dst), args, inst.loc));
        self.remat_memo.insert((b.index(), v), dst);
        dst
    }

    /// Put each block's pushes in the order the forward code makes them:
    /// values defined before the block first (pushed on entry), then values
    /// the block defines, each pushed right after its definition. Pushing
    /// early ends the value's use in the forward code as soon as possible,
    /// which lets the lowering coalesce loop-carried values into their phis'
    /// registers. The reverse block pops in the opposite order.
    fn order_needs(&mut self) {
        for b in 0..self.p.blocks.len() {
            let mut late = Vec::new();
            for (i, inst) in self.p.blocks[b].insts.iter().enumerate() {
                if let Some(old) = self.overwritten.get(&(b, i)) {
                    late.push(*old);
                }
                // A factor before its instruction's result: the reverse
                // code reads the result first (in the fragments of later
                // readers) and the factor last (in the instruction's own
                // fragment), so popping in that order lets both pops fuse.
                if let Some(f) = self.factors.get(&(b, i)) {
                    late.push(*f);
                }
                if let Some(d) = inst.dst {
                    late.push(d);
                }
            }
            let needs = &self.needs[b];
            let mut ordered: Vec<ValueId> = needs
                .iter()
                .copied()
                .filter(|v| !late.contains(v))
                .collect();
            ordered.extend(late.into_iter().filter(|v| needs.contains(v)));
            self.needs[b] = ordered;
        }
    }

    /// Append the reverse fragment of `inst` (block `b`, index `i`) to
    /// `out`: its rule ([`crate::rules::reverse`]), then, in a block on a
    /// cycle, the zeroing of its result's cotangent.
    fn reverse_inst(
        &mut self,
        b: usize,
        i: usize,
        inst: &Inst,
        out: &mut Vec<Inst>,
    ) -> Result<(), NoRule> {
        let loc = inst.loc;
        let mut e = Emit {
            t: self,
            out,
            b,
            loc,
        };
        rules::reverse::rule(&mut e, i, inst)?;
        if let Some(d) = inst.dst.and_then(|d| e.t.cot[d.index()]) {
            // A single-contribution cotangent is overwritten, not added to,
            // by its next instance, so it needs no zeroing.
            if e.t.cfg.in_cycle[b] && !e.t.set_once[d.index()] {
                e.op(Op::Zero, None, vec![d]);
            }
        }
        Ok(())
    }

    /// A contribution `to op= args`: accumulated in general, but written
    /// outright into a cotangent that receives exactly one contribution per
    /// instance (see [`single_contribution`]).
    fn contribution(&self, op: Op, to: ValueId, args: Vec<ValueId>, loc: Loc) -> Inst {
        if !self.set_once.get(to.index()).copied().unwrap_or(false) {
            let mut all = vec![to];
            all.extend(args);
            return Inst::new(op, None, all, loc);
        }
        let set = match op {
            Op::Acc => Op::Mov,
            Op::AccNeg => Op::NegF,
            _ => Op::MulZ,
        };
        Inst::new(set, Some(to), args, loc)
    }

    // ---- reverse-function helpers -------------------------------------------

    fn kf(&mut self, x: f64) -> ValueId {
        self.konst(Type::F64, x.to_bits())
    }

    fn konst(&mut self, ty: Type, bits: u64) -> ValueId {
        if let Some(v) = self.consts.get(&(ty, bits)) {
            return *v;
        }
        let v = self.rev.new_const(ty, bits);
        self.consts.insert((ty, bits), v);
        v
    }

    fn mirror_of(&mut self, v: ValueId) -> ValueId {
        if self.mirror.len() < self.fwd.values.len() {
            self.mirror.resize(self.fwd.values.len(), None);
        }
        if let Some(m) = self.mirror[v.index()] {
            return m;
        }
        let data = &self.fwd.values[v.index()];
        let m = self.rev.new_value(data.ty, data.name.clone());
        self.mirror[v.index()] = Some(m);
        m
    }

    fn new_block(&mut self, name: String) -> BlockId {
        self.rev.blocks.push(Block {
            name,
            phis: Vec::new(),
            insts: Vec::new(),
            term: Term::RetN(Vec::new()),
            term_loc: Loc::default(),
        });
        BlockId(self.rev.blocks.len() as u32 - 1)
    }

    /// Whether block `b` has an active f64 phi (its incoming edges then need
    /// reverse edge blocks).
    fn has_active_phis(&self, b: usize) -> bool {
        self.p.blocks[b]
            .phis
            .iter()
            .any(|phi| self.cot[phi.dst.index()].is_some())
    }

    // ---- step 3: the reverse CFG ---------------------------------------------

    fn assemble_reverse(&mut self) {
        let p = self.p;
        let n = p.blocks.len();
        let start = self.new_block("start".into());
        let rets: Vec<BlockId> = self.cfg.rets.clone();
        let ret_blocks: Vec<BlockId> = rets
            .iter()
            .map(|r| self.new_block(format!("ret.{}", p.blocks[r.index()].name)))
            .collect();
        // Reverse blocks in reverse block order, so loops read top-down.
        let mut rblk = vec![BlockId(0); n];
        for b in (0..n).rev() {
            rblk[b] = self.new_block(format!("rev.{}", p.blocks[b].name));
        }
        let exit = self.new_block("exit".into());

        // Prologue: pop the entry values, then find the block that returned.
        // They are in the order the reverse code first reads them (it was
        // built from the last instruction up), and the forward code pushed
        // them in the opposite order, so each pop can sink to its first
        // reader and fuse with it (`mul.pop`, `acc.mul.pop`).
        let mut insts = Vec::new();
        for v in self.entry_values.clone().iter() {
            let m = self.mirror_of(*v);
            insts.push(Inst::new(Op::CommsPop, Some(m), Vec::new(), Loc::default()));
        }
        self.rev.blocks[start.index()].insts = insts;
        self.rev.blocks[start.index()].term = match ret_blocks.len() {
            0 => Term::Jmp(exit),
            1 => Term::Jmp(ret_blocks[0]),
            _ => Term::BlkPop(ret_blocks.clone()),
        };
        for (k, r) in rets.iter().enumerate() {
            let mut insts = Vec::new();
            if let (Term::Ret(v), Some(seed)) = (&p.blocks[r.index()].term, self.seed) {
                if let Some(c) = self.cot[v.index()] {
                    let loc = p.blocks[r.index()].term_loc;
                    insts.push(self.contribution(Op::Acc, c, vec![seed], loc));
                }
            }
            let rb = ret_blocks[k];
            self.rev.blocks[rb.index()].insts = insts;
            self.rev.blocks[rb.index()].term = Term::Jmp(rblk[r.index()]);
        }

        // One reverse block per primal block.
        let header_of: HashMap<usize, usize> = (0..self.loops.len())
            .filter(|l| self.loops[*l].is_some())
            .map(|l| (self.cfg.loops[l].header.index(), l))
            .collect();
        for b in 0..n {
            let mut insts = Vec::new();
            for v in self.needs[b].clone().iter().rev() {
                let m = self.mirror_of(*v);
                insts.push(Inst::new(Op::CommsPop, Some(m), Vec::new(), Loc::default()));
            }
            insts.append(&mut self.remat[b]);
            insts.append(&mut self.frags[b]);
            let term = match header_of.get(&b) {
                Some(&l) => self.counted_dispatch(l, b, &rblk, &mut insts),
                None => {
                    let preds = self.cfg.preds[b].clone();
                    let targets: Vec<BlockId> = preds
                        .iter()
                        .map(|pred| self.edge_target(*pred, b, &rblk))
                        .collect();
                    match targets.len() {
                        0 => Term::Jmp(exit),
                        1 => Term::Jmp(targets[0]),
                        _ => Term::BlkPop(targets),
                    }
                }
            };
            let rb = rblk[b];
            self.rev.blocks[rb.index()].insts = insts;
            self.rev.blocks[rb.index()].term = term;
        }

        // Exit: the parameters' cotangents (zero for unselected ones).
        let params: Vec<ValueId> = p
            .params
            .iter()
            .filter(|v| p.ty(**v) == Type::F64)
            .copied()
            .collect();
        let grads: Vec<ValueId> = params
            .iter()
            .map(|v| match self.cot[v.index()] {
                Some(c) => c,
                None => self.kf(0.0),
            })
            .collect();
        self.rev.blocks[exit.index()].term = Term::RetN(grads);
        debug_assert_eq!(start, BlockId(0));
    }

    /// The end of the reverse block of counted loop `l`'s header: step the
    /// counter back one iteration; if it has passed the first iteration, leave
    /// by the entry edge, else go back through the latch edge.
    fn counted_dispatch(
        &mut self,
        l: usize,
        header: usize,
        rblk: &[BlockId],
        insts: &mut Vec<Inst>,
    ) -> Term {
        let Some(s) = &self.loops[l] else {
            return Term::Jmp(rblk[header]);
        };
        let (ctr, lim, step) = (s.ctr, s.lim, s.step);
        let Some(c) = &self.cfg.loops[l].counted else {
            return Term::Jmp(rblk[header]);
        };
        let (entry, latch) = (c.entry, c.latch);
        let step_reg = self.konst(Type::I64, step as u64);
        let first = self.rev.new_value(Type::Bool, None);
        insts.push(Inst::new(
            Op::SubI,
            Some(ctr),
            vec![ctr, step_reg],
            Loc::default(),
        ));
        insts.push(Inst::new(
            Op::EqI,
            Some(first),
            vec![ctr, lim],
            Loc::default(),
        ));
        let out = self.edge_target(entry, header, rblk);
        let back = self.edge_target(latch, header, rblk);
        Term::Br {
            cond: first,
            then_: out,
            else_: back,
        }
    }

    /// The reverse block to go to after the reverse of `b` when `b` was
    /// entered from `pred`: an edge block that pops what the forward edge
    /// pushed for the counted loops it leaves and moves phi cotangents, or
    /// directly the predecessor's reverse block.
    fn edge_target(&mut self, pred: BlockId, b: usize, rblk: &[BlockId]) -> BlockId {
        let exited = self.counted_exited(pred, BlockId(b as u32));
        if exited.is_empty() && !self.has_active_phis(b) {
            return rblk[pred.index()];
        }
        let p = self.p;
        let name = format!("edge.{}.{}", p.blocks[pred.index()].name, p.blocks[b].name);
        let edge = self.new_block(name);
        let mut insts = Vec::new();
        // The forward edge pushed loop by loop, innermost first: pop the
        // outermost first.
        for &l in exited.iter().rev() {
            let Some(s) = &self.loops[l] else { continue };
            let (ctr, invariants) = (s.ctr, s.invariants.clone());
            let (lim, lim_const, init_reg, step) = (s.lim, s.lim_const, s.init_reg, s.step);
            insts.push(Inst::new(
                Op::CommsPop,
                Some(ctr),
                Vec::new(),
                Loc::default(),
            ));
            for v in invariants.iter().rev() {
                let m = self.mirror_of(*v);
                insts.push(Inst::new(Op::CommsPop, Some(m), Vec::new(), Loc::default()));
            }
            if let (false, Some(init)) = (lim_const, init_reg) {
                let step_reg = self.konst(Type::I64, step as u64);
                insts.push(Inst::new(
                    Op::SubI,
                    Some(lim),
                    vec![init, step_reg],
                    Loc::default(),
                ));
            }
        }
        self.phi_moves(pred, b, &mut insts);
        self.rev.blocks[edge.index()].insts = insts;
        self.rev.blocks[edge.index()].term = Term::Jmp(rblk[pred.index()]);
        edge
    }

    /// The counted loops the edge `from -> to` leaves, innermost first.
    fn counted_exited(&self, from: BlockId, to: BlockId) -> Vec<usize> {
        self.cfg
            .loops_exited(from, to)
            .into_iter()
            .filter(|l| self.loops[*l].is_some())
            .collect()
    }

    /// Move the cotangents of `b`'s phis to their incoming values on the
    /// edge from `pred`.
    fn phi_moves(&mut self, pred: BlockId, b: usize, insts: &mut Vec<Inst>) {
        let p = self.p;
        let phis = &p.blocks[b].phis;
        let is_phi_here = |v: ValueId| phis.iter().any(|ph| ph.dst == v);
        let moves: Vec<(ValueId, Option<ValueId>, Loc)> = phis
            .iter()
            .filter_map(|ph| {
                let c = self.cot[ph.dst.index()]?;
                let w = ph
                    .incoming
                    .iter()
                    .find(|(l, _)| *l == pred)
                    .map(|(_, v)| *v);
                Some((c, w, ph.loc))
            })
            .collect();
        let cyclic = self.cfg.in_cycle[b];
        // Phis are a parallel copy: when an incoming value is itself a phi of
        // this block (the swap), read every phi cotangent before writing any.
        let parallel = moves.iter().any(|(_, w, _)| w.is_some_and(is_phi_here));
        if parallel {
            let mut temps = Vec::new();
            for (c, w, loc) in &moves {
                let t = self.rev.new_value(Type::F64, None);
                insts.push(Inst::new(Op::Mov, Some(t), vec![*c], *loc));
                insts.push(Inst::new(Op::Zero, Some(*c), Vec::new(), *loc));
                temps.push((t, *w, *loc));
            }
            for (t, w, loc) in temps {
                if let Some(cw) = w.and_then(|w| self.cot[w.index()]) {
                    insts.push(self.contribution(Op::Acc, cw, vec![t], loc));
                }
            }
        } else {
            for (c, w, loc) in moves {
                let cw = w.and_then(|w| self.cot[w.index()]);
                if let (Some(cw), true) = (cw, cyclic) {
                    if self.set_once[cw.index()] {
                        // Move and clear in one instruction.
                        insts.push(Inst::new(Op::Take, Some(cw), vec![c], loc));
                        continue;
                    }
                }
                if let Some(cw) = cw {
                    insts.push(self.contribution(Op::Acc, cw, vec![c], loc));
                }
                if cyclic {
                    insts.push(Inst::new(Op::Zero, Some(c), Vec::new(), loc));
                }
            }
        }
    }

    // ---- step 4: the forward CFG ---------------------------------------------

    fn assemble_forward(&mut self) {
        let p = self.p;
        let n = p.blocks.len();
        let nrets = self.cfg.rets.len();
        for b in 0..n {
            let mut insts = Vec::with_capacity(p.blocks[b].insts.len() + self.needs[b].len());
            let needs = &self.needs[b];
            let push = |v: ValueId| Inst::new(Op::CommsPush, None, vec![v], Loc::default());
            // A callee's forward code pushes onto the same stack, and the
            // reverse block pops all of its own values before it replays the
            // callee's pullback. So nothing of this block may be pushed
            // before its last differentiated call: up to that call, pushes
            // wait and happen right after it (in `needs` order).
            let cut = (0..p.blocks[b].insts.len())
                .rev()
                .find(|i| self.calls.contains_key(&(b, *i)));
            let defined_at = |v: ValueId| -> Option<usize> {
                p.blocks[b].insts.iter().enumerate().find_map(|(i, inst)| {
                    (inst.dst == Some(v)
                        || self.overwritten.get(&(b, i)) == Some(&v)
                        || self.factors.get(&(b, i)) == Some(&v))
                    .then_some(i)
                })
            };
            let waits = |v: ValueId| match (defined_at(v), cut) {
                (None, _) => true,
                (Some(i), Some(c)) => i <= c,
                (Some(_), None) => false,
            };
            if cut.is_none() {
                // Values defined before this block: pushed on entry.
                for v in needs.iter().filter(|v| defined_at(**v).is_none()) {
                    insts.push(push(*v));
                }
            }
            for (i, inst) in p.blocks[b].insts.iter().enumerate() {
                let mut inst = inst.clone();
                if let Some(old) = self.overwritten.get(&(b, i)) {
                    let read = Inst::new(Op::AGet, Some(*old), inst.args[..2].to_vec(), inst.loc);
                    insts.push(read);
                    if needs.contains(old) && !(cut.is_some() && waits(*old)) {
                        insts.push(push(*old));
                    }
                }
                if let Some(d) = self.calls.get(&(b, i)) {
                    inst.callee = Some(d.fwd);
                }
                let dst = inst.dst;
                // The factor right after the instruction, so that the
                // lowering fuses the two into one `sincos`.
                let factor = self.factors.get(&(b, i)).copied();
                let factor_inst = factor.and_then(|f| {
                    let (other, a) = self.factor(&inst)?;
                    Some(Inst::new(other, Some(f), vec![a], inst.loc))
                });
                insts.push(inst);
                insts.extend(factor_inst);
                // In `order_needs` order: the factor first.
                for d in factor.into_iter().chain(dst) {
                    if needs.contains(&d) && !(cut.is_some() && waits(d)) {
                        insts.push(push(d));
                    }
                }
                if cut == Some(i) {
                    for v in needs.iter().filter(|v| waits(**v)) {
                        insts.push(push(*v));
                    }
                }
            }
            // The counter the forward code adds to a loop without an
            // induction variable steps at the end of the latch.
            for s in self.loops.iter().flatten() {
                if let Some((latch, inc)) = &s.synthetic {
                    if *latch == b {
                        insts.push(inc.clone());
                    }
                }
            }
            let here = BlockId(b as u32);
            let term = p.blocks[b].term.clone();
            match &term {
                Term::Jmp(s) => {
                    let edge = self.edge_insts(here, *s);
                    insts.extend(edge);
                }
                Term::Br { cond, then_, else_ } => {
                    let t = self.fwd_edge(here, *then_);
                    let e = if else_ == then_ {
                        t
                    } else {
                        self.fwd_edge(here, *else_)
                    };
                    self.fwd.blocks[b].term = Term::Br {
                        cond: *cond,
                        then_: t,
                        else_: e,
                    };
                }
                Term::Ret(_) => {
                    // The last pushed is the first the reverse code reads.
                    // Before the block id (the two stacks are independent),
                    // so that these pushes share one reservation with the
                    // block's own (a `blk.push` ends a batch).
                    for v in self.entry_values.iter().rev() {
                        insts.push(Inst::new(Op::CommsPush, None, vec![*v], Loc::default()));
                    }
                    if nrets > 1 {
                        let k = self
                            .cfg
                            .rets
                            .iter()
                            .position(|r| r.index() == b)
                            .unwrap_or(0);
                        insts.push(blk_push(k as u32));
                    }
                }
                Term::RetN(_) | Term::BlkPop(_) => {}
            }
            self.fwd.blocks[b].insts = insts;
        }
    }

    /// What the forward code does on the edge `from -> to`: for each counted
    /// loop it leaves (innermost first), push the values defined before the
    /// loop that its reverse needs and then its counter; then, if `to` is a
    /// join whose predecessor the reverse code cannot know otherwise, push
    /// `from`'s index among `to`'s predecessors.
    fn edge_insts(&self, from: BlockId, to: BlockId) -> Vec<Inst> {
        let mut insts = Vec::new();
        for l in self.counted_exited(from, to) {
            let Some(s) = &self.loops[l] else { continue };
            for v in s.invariants.iter().chain([&s.iv]) {
                insts.push(Inst::new(Op::CommsPush, None, vec![*v], Loc::default()));
            }
        }
        if let Some(k) = self.pred_index(from, to) {
            insts.push(blk_push(k));
        }
        insts
    }

    /// The id pushed on the edge `from -> to`, if `to` has several
    /// predecessors and is not the header of a counted loop (otherwise the
    /// reverse code knows the edge statically or by the loop counter).
    fn pred_index(&self, from: BlockId, to: BlockId) -> Option<u32> {
        let preds = &self.cfg.preds[to.index()];
        if preds.len() < 2 {
            return None;
        }
        let counted_header = self
            .cfg
            .loops
            .iter()
            .zip(&self.loops)
            .any(|(l, s)| s.is_some() && l.header == to);
        if counted_header {
            return None;
        }
        preds.iter().position(|p| *p == from).map(|k| k as u32)
    }

    /// The block a forward `br` in `b` should jump to for target `to`: `to`
    /// itself, or a new edge block running [`Transform::edge_insts`] first
    /// (and then taking `b`'s place in `to`'s phis).
    fn fwd_edge(&mut self, from: BlockId, to: BlockId) -> BlockId {
        let insts = self.edge_insts(from, to);
        if insts.is_empty() {
            return to;
        }
        let name = format!(
            "push.{}.{}",
            self.p.blocks[from.index()].name,
            self.p.blocks[to.index()].name
        );
        self.fwd.blocks.push(Block {
            name,
            phis: Vec::new(),
            insts,
            term: Term::Jmp(to),
            term_loc: self.p.blocks[from.index()].term_loc,
        });
        let edge = BlockId(self.fwd.blocks.len() as u32 - 1);
        for phi in &mut self.fwd.blocks[to.index()].phis {
            for (label, _) in &mut phi.incoming {
                if *label == from {
                    *label = edge;
                }
            }
        }
        edge
    }
}

/// A constant of `f` (used while the transform's constant table does not
/// exist yet).
fn konst_in(f: &mut Function, ty: Type, bits: u64) -> ValueId {
    match f
        .values
        .iter()
        .position(|v| v.ty == ty && v.konst == Some(bits))
    {
        Some(i) => ValueId(i as u32),
        None => f.new_const(ty, bits),
    }
}

/// Values whose cotangent receives exactly one contribution each time the
/// value is defined, so the reverse code can write it instead of adding to
/// it and never needs to zero it: active f64 values with a single use that
/// runs whenever the definition does and whose reverse adds into the value
/// with a plain `acc` / `acc.neg` / `acc.mul` (not a callee's `call.acc`):
///
/// * an instruction later in the defining block, or its `ret`;
/// * a phi of the successor, when the defining block ends in `jmp` to it.
fn single_contribution(p: &Function, cfg: &Cfg, active: &[bool]) -> Vec<bool> {
    let n = p.values.len();
    let uses = p.use_counts();
    // A flag per value, not `p.params.contains`: that search per operand
    // made functions of thousands of parameters quadratic.
    let mut is_param = vec![false; n];
    for v in &p.params {
        is_param[v.index()] = true;
    }
    let mut once = vec![false; n];
    for (bi, b) in p.blocks.iter().enumerate() {
        let defined_here = |v: ValueId| cfg.def_block[v.index()] == Some(BlockId(bi as u32));
        let candidate = |v: ValueId| {
            active[v.index()]
                && p.ty(v) == Type::F64
                && uses[v.index()] == 1
                && p.values[v.index()].konst.is_none()
                && !is_param[v.index()]
                && !b.phis.iter().any(|ph| ph.dst == v)
        };
        for inst in &b.insts {
            if inst.op == Op::Call {
                continue;
            }
            for v in &inst.args {
                if candidate(*v) && defined_here(*v) {
                    once[v.index()] = true;
                }
            }
        }
        if let Term::Ret(v) = &b.term {
            if candidate(*v) && defined_here(*v) {
                once[v.index()] = true;
            }
        }
        if let Term::Jmp(succ) = &b.term {
            for phi in &p.blocks[succ.index()].phis {
                for (label, v) in &phi.incoming {
                    if label.index() == bi && candidate(*v) && defined_here(*v) {
                        once[v.index()] = true;
                    }
                }
            }
        }
    }
    once
}

fn blk_push(k: u32) -> Inst {
    let mut i = Inst::new(Op::BlkPush, None, Vec::new(), Loc::default());
    i.imm = k;
    i
}

/// Emits reverse instructions for one fragment, recording which primal
/// values it reads: the interface the reverse rules
/// ([`crate::rules::reverse`]) write through.
pub(crate) struct Emit<'t, 'a> {
    t: &'t mut Transform<'a>,
    out: &'t mut Vec<Inst>,
    b: usize,
    loc: Loc,
}

impl Emit<'_, '_> {
    /// The cotangent register of primal value `v`, if it is active f64.
    pub(crate) fn cot(&self, v: ValueId) -> Option<ValueId> {
        self.t.cot[v.index()]
    }

    /// Whether primal value `v` is active (an array: carries cotangents).
    pub(crate) fn is_active(&self, v: ValueId) -> bool {
        self.t.active[v.index()]
    }

    /// The f64 constant `x` in the reverse function.
    pub(crate) fn kf(&mut self, x: f64) -> ValueId {
        self.t.kf(x)
    }

    /// The forward value holding the element that `aset` number `i` of
    /// this block overwrites.
    pub(crate) fn overwritten(&self, i: usize) -> ValueId {
        self.t.overwritten[&(self.b, i)]
    }

    /// The callee's derived functions of call number `i` of this block, if
    /// it is differentiated through.
    pub(crate) fn call_derived(&self, i: usize) -> Option<Derived> {
        self.t.calls.get(&(self.b, i)).copied()
    }

    /// The reverse-frame register holding forward value `v` (see
    /// [`Transform::supply`]).
    pub(crate) fn need(&mut self, v: ValueId) -> ValueId {
        self.t.supply_reg(BlockId(self.b as u32), v)
    }

    /// The factor of instruction `i` (an active `sin a` or `cos a`): `op a`,
    /// computed by the forward code (see [`Transform::factor`]); recomputed
    /// here only if the forward code has none, which translation rules out.
    pub(crate) fn factor(&mut self, i: usize, a: ValueId, op: Op) -> ValueId {
        match self.t.factors.get(&(self.b, i)).copied() {
            Some(f) => self.need(f),
            None => {
                let va = self.need(a);
                self.op(op, Some(Type::F64), vec![va])
            }
        }
    }

    /// Emit `op`; returns the new destination (or a dummy id if none).
    pub(crate) fn op(&mut self, op: Op, dst_ty: Option<Type>, args: Vec<ValueId>) -> ValueId {
        let dst = dst_ty.map(|ty| self.t.rev.new_value(ty, None));
        // Instructions whose Def operand is an existing register (`zero`).
        let (dst, args) = if op == Op::Zero {
            (Some(args[0]), Vec::new())
        } else {
            (dst, args)
        };
        self.out.push(Inst::new(op, dst, args, self.loc));
        dst.unwrap_or(ValueId(0))
    }

    pub(crate) fn acc(&mut self, to: Option<ValueId>, v: ValueId) {
        if let Some(to) = to {
            let inst = self.t.contribution(Op::Acc, to, vec![v], self.loc);
            self.out.push(inst);
        }
    }

    /// `to += a * b` (or `to = a * b` for a single-contribution cotangent).
    pub(crate) fn acc_mul(&mut self, to: ValueId, a: ValueId, b: ValueId) {
        let inst = self.t.contribution(Op::AccMul, to, vec![a, b], self.loc);
        self.out.push(inst);
    }

    pub(crate) fn acc_neg(&mut self, to: Option<ValueId>, v: ValueId) {
        if let Some(to) = to {
            let inst = self.t.contribution(Op::AccNeg, to, vec![v], self.loc);
            self.out.push(inst);
        }
    }

    /// `to += d * factor`, building the factor only if `to` is active.
    pub(crate) fn scaled(
        &mut self,
        to: Option<ValueId>,
        d: ValueId,
        factor: impl FnOnce(&mut Self) -> ValueId,
    ) {
        if let Some(to) = to {
            let f = factor(self);
            self.acc_mul(to, d, f);
        }
    }

    /// Send cotangent `d` to `if_true` when `cond` holds, else to `if_false`.
    pub(crate) fn route(
        &mut self,
        cond: ValueId,
        if_true: Option<ValueId>,
        if_false: Option<ValueId>,
        d: ValueId,
    ) {
        let zero = self.t.kf(0.0);
        if if_true.is_some() {
            let t = self.op(Op::Select, Some(Type::F64), vec![cond, d, zero]);
            self.acc(if_true, t);
        }
        if if_false.is_some() {
            let t = self.op(Op::Select, Some(Type::F64), vec![cond, zero, d]);
            self.acc(if_false, t);
        }
    }

    /// The reverse of a call differentiated through: call the callee's
    /// pullback with the result's cotangent, adding what it returns to the
    /// arguments' cotangents.
    pub(crate) fn reverse_call(&mut self, inst: &Inst, d: Derived, dbar: Option<ValueId>) {
        let callee = self.t.module.func(inst.callee.unwrap_or(FuncId(0)));
        let mut args = Vec::new();
        if callee.ret == RetType::One(Type::F64) {
            let seed = match dbar {
                Some(c) => c,
                None => self.t.kf(0.0),
            };
            args.push(seed);
        }
        let mut accs = Vec::new();
        for (param, arg) in callee.params.iter().zip(&inst.args) {
            if callee.ty(*param) == Type::F64 {
                let c = match self.t.cot[arg.index()] {
                    Some(c) => c,
                    None => self.sink(),
                };
                accs.push(c);
            }
        }
        let mut call = Inst::new(Op::CallAcc, None, args, self.loc);
        call.callee = Some(d.rev);
        call.accs = accs;
        self.out.push(call);
    }

    /// A register that absorbs cotangents of inactive arguments.
    fn sink(&mut self) -> ValueId {
        if let Some(s) = self.t.sink {
            return s;
        }
        let s = self.t.rev.new_value(Type::F64, Some("sink".into()));
        self.t.sink = Some(s);
        s
    }
}
