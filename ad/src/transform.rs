//! The reverse-mode transform: one primal SSA function in, a forward
//! function and a reverse (pullback) function out, both in the IR that
//! [`vm::lower`] turns into bytecode.
//!
//! The design follows Mooncake's reverse mode (see
//! `../shared/seeds/mooncake-reverse-mode-design.txt`), with our IR in place
//! of Julia's IRCode:
//!
//! 1. **Analyse** the primal ([`crate::analysis`]): predecessors, which
//!    blocks lie on cycles, the `ret` blocks, and activity.
//! 2. **Translate** each instruction into a reverse fragment and the set of
//!    primal values that fragment needs ([`Transform::reverse_inst`]). The
//!    forward fragment is the primal instruction itself, except that active
//!    calls call the callee's forward function and `aset` first reads the
//!    element it overwrites.
//! 3. **Assemble** the forward CFG: the primal blocks, each ending with
//!    `comms.push` of what its reverse block needs; `blk.push` only on edges
//!    into blocks with several predecessors; `ret` blocks also push their
//!    index (when there are several) and the *entry values*: values defined
//!    in the entry block that some reverse fragment needs, pushed once per
//!    call instead of once per use.
//! 4. **Assemble** the reverse CFG: a prologue that pops the entry values and
//!    dispatches on the returning block; one reverse block per primal block
//!    (pop its comms values, run its fragments backwards, then go to the
//!    predecessor it was entered from: statically when unique, else by
//!    `blk.pop`); edge blocks that move phi cotangents to the incoming values
//!    of the edge actually taken; and an exit returning the parameters'
//!    cotangents (`ret.n`).
//!
//! Cotangents live in one register per active f64 value of the reverse
//! frame (registers start at zero). A fragment reads the cotangent of the
//! value it defines, adds into its operands' cotangents, and, when the
//! defining block lies on a cycle, zeroes it, so that the previous iteration's
//! instance starts from zero. Arrays carry their cotangents in the VM's
//! shadow arrays, addressed by handle.

use crate::analysis::{activity, call_is_active, Cfg};
use hashbrown::HashMap;
use vm::ir::{Block, BlockId, FuncId, Function, Inst, Loc, Module, RetType, Term, ValueId};
use vm::op::Op;
use vm::Type;

/// The forward and reverse functions of one primal function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Derived {
    pub fwd: FuncId,
    pub rev: FuncId,
}

/// Build the forward and reverse IR of `module.funcs[f]`. `derived(g)` gives
/// the (possibly not yet built) derived functions of a callee `g`.
pub fn transform(
    module: &Module,
    f: FuncId,
    derived: &mut dyn FnMut(FuncId) -> Derived,
) -> (Function, Function) {
    let p = module.func(f);
    let mut t = Transform::new(module, p);
    t.translate(derived);
    t.order_needs();
    t.assemble_reverse();
    t.layout_reverse();
    t.assemble_forward();
    (t.fwd, t.rev)
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
    /// For each `aset` (block, index), the forward value holding the element
    /// it overwrites.
    overwritten: HashMap<(usize, usize), ValueId>,
    /// For each call (block, index) differentiated through, the callee's
    /// derived functions.
    calls: HashMap<(usize, usize), Derived>,
    rev: Function,
    /// Reverse-frame copy of each forward value the reverse code needs.
    mirror: Vec<Option<ValueId>>,
    /// Cotangent register of each active f64 primal value.
    cot: Vec<Option<ValueId>>,
    consts: HashMap<(Type, u64), ValueId>,
    seed: Option<ValueId>,
    sink: Option<ValueId>,
    /// Forward values each primal block's reverse fragments need, in first-use
    /// order, deduplicated.
    needs: Vec<Vec<ValueId>>,
    /// Reverse fragments of each primal block, already in reverse order.
    frags: Vec<Vec<Inst>>,
    /// Needed values defined in the entry block: pushed once at `ret`.
    entry_values: Vec<ValueId>,
    /// Reverse registers (cotangents) that receive exactly one
    /// contribution per instance of their value.
    set_once: Vec<bool>,
}

impl<'a> Transform<'a> {
    fn new(module: &'a Module, p: &'a Function) -> Transform<'a> {
        let cfg = Cfg::new(p);
        let active = activity(p);
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
        let fwd_def = cfg.def_block.clone();
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
        Transform {
            module,
            p,
            cfg,
            active,
            fwd,
            fwd_def,
            overwritten: HashMap::new(),
            calls: HashMap::new(),
            rev,
            mirror: Vec::new(),
            cot,
            consts: HashMap::new(),
            seed,
            sink: None,
            needs: vec![Vec::new(); nblocks],
            frags: vec![Vec::new(); nblocks],
            entry_values: Vec::new(),
            set_once,
        }
    }

    // ---- step 2: translation ------------------------------------------------

    fn translate(&mut self, derived: &mut dyn FnMut(FuncId) -> Derived) {
        let p = self.p;
        for (b, block) in p.blocks.iter().enumerate() {
            for (i, inst) in block.insts.iter().enumerate() {
                match inst.op {
                    Op::ASet => {
                        let old = self.fwd.new_value(Type::F64, None);
                        self.fwd_def.push(Some(BlockId(b as u32)));
                        self.overwritten.insert((b, i), old);
                    }
                    Op::Call if call_is_active(&inst.args, &self.active) => {
                        let callee = inst.callee.expect("calls name a callee");
                        self.calls.insert((b, i), derived(callee));
                    }
                    _ => {}
                }
            }
            let mut frag = Vec::new();
            for (i, inst) in block.insts.iter().enumerate().rev() {
                self.reverse_inst(b, i, inst, &mut frag);
            }
            self.frags[b] = frag;
        }
        let entry_values: Vec<ValueId> = {
            let mut seen = vec![false; self.fwd.values.len()];
            let mut out = Vec::new();
            for v in self.needs.iter().flatten() {
                if self.fwd_def[v.index()] == Some(BlockId(0))
                    && !std::mem::replace(&mut seen[v.index()], true)
                {
                    out.push(*v);
                }
            }
            out
        };
        for needs in &mut self.needs {
            needs.retain(|v| !entry_values.contains(v));
        }
        self.entry_values = entry_values;
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

    /// Append the reverse fragment of `inst` (block `b`, index `i`) to `out`.
    fn reverse_inst(&mut self, b: usize, i: usize, inst: &Inst, out: &mut Vec<Inst>) {
        let loc = inst.loc;
        let mut e = Emit {
            t: self,
            out,
            b,
            loc,
        };
        let a0 = inst.args.first().copied();
        let a1 = inst.args.get(1).copied();
        let ca = a0.and_then(|a| e.t.cot[a.index()]);
        let cb = a1.and_then(|a| e.t.cot[a.index()]);
        let dst = inst.dst;
        let dbar = dst.and_then(|d| e.t.cot[d.index()]);
        if let Some(d) = dbar {
            let (a, bb) = (a0.unwrap_or(ValueId(0)), a1.unwrap_or(ValueId(0)));
            let y = dst.unwrap_or(ValueId(0));
            match inst.op {
                Op::AddF => {
                    e.acc(ca, d);
                    e.acc(cb, d);
                }
                Op::SubF => {
                    e.acc(ca, d);
                    e.acc_neg(cb, d);
                }
                Op::MulF => {
                    if let Some(ca) = ca {
                        let vb = e.need(bb);
                        e.acc_mul(ca, d, vb);
                    }
                    if let Some(cb) = cb {
                        let va = e.need(a);
                        e.acc_mul(cb, d, va);
                    }
                }
                Op::DivF if ca.is_some() || cb.is_some() => {
                    let vb = e.need(bb);
                    let t = e.op(Op::DivF, Some(Type::F64), vec![d, vb]);
                    e.acc(ca, t);
                    if cb.is_some() {
                        let vy = e.need(y);
                        let t2 = e.op(Op::MulF, Some(Type::F64), vec![t, vy]);
                        e.acc_neg(cb, t2);
                    }
                }
                Op::PowF => {
                    if let Some(ca) = ca {
                        let (va, vb) = (e.need(a), e.need(bb));
                        let one = e.t.kf(1.0);
                        let t = e.op(Op::SubF, Some(Type::F64), vec![vb, one]);
                        let t = e.op(Op::PowF, Some(Type::F64), vec![va, t]);
                        let t = e.op(Op::MulF, Some(Type::F64), vec![t, vb]);
                        e.acc_mul(ca, d, t);
                    }
                    if let Some(cb) = cb {
                        // ln a where a > 0, else 0 (adasm.md §3).
                        let (va, vy) = (e.need(a), e.need(y));
                        let zero = e.t.kf(0.0);
                        let l = e.op(Op::Log, Some(Type::F64), vec![va]);
                        let pos = e.op(Op::GtF, Some(Type::Bool), vec![va, zero]);
                        let l = e.op(Op::Select, Some(Type::F64), vec![pos, l, zero]);
                        let t = e.op(Op::MulF, Some(Type::F64), vec![l, vy]);
                        e.acc_mul(cb, d, t);
                    }
                }
                Op::MinF | Op::MaxF => {
                    // The primal picks `b` exactly when this comparison holds.
                    let cmp = if inst.op == Op::MinF {
                        Op::LtF
                    } else {
                        Op::GtF
                    };
                    let (va, vb) = (e.need(a), e.need(bb));
                    let took_b = e.op(cmp, Some(Type::Bool), vec![vb, va]);
                    e.route(took_b, cb, ca, d);
                }
                Op::Select => {
                    let (c, x, z) = (a0, a1, inst.args.get(2).copied());
                    let cx = x.and_then(|x| e.t.cot[x.index()]);
                    let cz = z.and_then(|z| e.t.cot[z.index()]);
                    let vc = e.need(c.unwrap_or(ValueId(0)));
                    e.route(vc, cx, cz, d);
                }
                Op::NegF => e.acc_neg(ca, d),
                Op::Mov => e.acc(ca, d),
                Op::Sin => e.scaled(ca, d, |e| {
                    let va = e.need(a);
                    e.op(Op::Cos, Some(Type::F64), vec![va])
                }),
                Op::Cos if ca.is_some() => {
                    let va = e.need(a);
                    let s = e.op(Op::Sin, Some(Type::F64), vec![va]);
                    let t = e.op(Op::MulF, Some(Type::F64), vec![d, s]);
                    e.acc_neg(ca, t);
                }
                Op::Tan => e.scaled(ca, d, |e| {
                    let vy = e.need(y);
                    let one = e.t.kf(1.0);
                    let t = e.op(Op::MulF, Some(Type::F64), vec![vy, vy]);
                    e.op(Op::AddF, Some(Type::F64), vec![t, one])
                }),
                Op::Exp => e.scaled(ca, d, |e| e.need(y)),
                Op::Log if ca.is_some() => {
                    let va = e.need(a);
                    let t = e.op(Op::DivF, Some(Type::F64), vec![d, va]);
                    e.acc(ca, t);
                }
                Op::Sqrt if ca.is_some() => {
                    let vy = e.need(y);
                    let t = e.op(Op::AddF, Some(Type::F64), vec![vy, vy]);
                    let t = e.op(Op::DivF, Some(Type::F64), vec![d, t]);
                    e.acc(ca, t);
                }
                Op::Tanh => e.scaled(ca, d, |e| {
                    let vy = e.need(y);
                    let one = e.t.kf(1.0);
                    let t = e.op(Op::MulF, Some(Type::F64), vec![vy, vy]);
                    e.op(Op::SubF, Some(Type::F64), vec![one, t])
                }),
                Op::AbsF => e.scaled(ca, d, |e| {
                    // sign(a), with abs'(0) = 0.
                    let va = e.need(a);
                    let (zero, one, mone) = (e.t.kf(0.0), e.t.kf(1.0), e.t.kf(-1.0));
                    let pos = e.op(Op::GtF, Some(Type::Bool), vec![va, zero]);
                    let neg = e.op(Op::LtF, Some(Type::Bool), vec![va, zero]);
                    let s = e.op(Op::Select, Some(Type::F64), vec![neg, mone, zero]);
                    e.op(Op::Select, Some(Type::F64), vec![pos, one, s])
                }),
                Op::AGet => {
                    let (arr, idx) = (e.need(a), e.need(bb));
                    e.op(Op::ShadowAcc, None, vec![arr, idx, d]);
                }
                Op::Call => {}
                // Everything else either has no f64 result or is inactive.
                _ => {}
            }
        }
        match inst.op {
            Op::ASet => {
                let old = e.t.overwritten[&(b, i)];
                let (arr, idx) = (e.need(inst.args[0]), e.need(inst.args[1]));
                let vold = e.need(old);
                let t = e.op(Op::ShadowTake, Some(Type::F64), vec![arr, idx]);
                let cv = e.t.cot[inst.args[2].index()];
                e.acc(cv, t);
                e.op(Op::ASet, None, vec![arr, idx, vold]);
            }
            Op::Call => {
                if let Some(d) = e.t.calls.get(&(b, i)).copied() {
                    e.reverse_call(inst, d, dbar);
                }
            }
            _ => {}
        }
        if let Some(d) = dbar {
            // A single-contribution cotangent is overwritten, not added to,
            // by its next instance, so it needs no zeroing.
            if e.t.cfg.in_cycle[b] && !e.t.set_once[d.index()] {
                e.op(Op::Zero, None, vec![d]);
            }
        }
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
            _ => Op::MulF,
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

    // ---- step 4: the reverse CFG ---------------------------------------------

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
        let mut insts = Vec::new();
        for v in self.entry_values.clone().iter().rev() {
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
        for b in 0..n {
            let mut insts = Vec::new();
            for v in self.needs[b].clone().iter().rev() {
                let m = self.mirror_of(*v);
                insts.push(Inst::new(Op::CommsPop, Some(m), Vec::new(), Loc::default()));
            }
            insts.append(&mut self.frags[b]);
            let preds = self.cfg.preds[b].clone();
            let targets: Vec<BlockId> = preds
                .iter()
                .map(|pred| self.edge_target(*pred, b, &rblk))
                .collect();
            let term = match targets.len() {
                0 => Term::Jmp(exit),
                1 => Term::Jmp(targets[0]),
                _ => Term::BlkPop(targets),
            };
            let rb = rblk[b];
            self.rev.blocks[rb.index()].insts = insts;
            self.rev.blocks[rb.index()].term = term;
        }

        // Exit: the parameters' cotangents.
        let grads: Vec<ValueId> = p
            .params
            .iter()
            .filter(|v| p.ty(**v) == Type::F64)
            .map(|v| self.cot[v.index()].unwrap_or(ValueId(0)))
            .collect();
        self.rev.blocks[exit.index()].term = Term::RetN(grads);
        // Move the prologue to the front is not needed: `start` is block 0.
        debug_assert_eq!(start, BlockId(0));
    }

    /// Put each phi-edge block right before the reverse block it jumps to,
    /// so that the lowering can fall through instead of jumping: in a
    /// reverse loop that saves one dispatch per iteration.
    fn layout_reverse(&mut self) {
        let blocks = &self.rev.blocks;
        let n = blocks.len();
        let is_edge = |b: &Block| b.name.starts_with("edge.");
        let mut order: Vec<usize> = Vec::with_capacity(n);
        let mut placed = vec![false; n];
        for t in 0..n {
            if is_edge(&blocks[t]) {
                continue;
            }
            let feeder = (0..n).find(|&e| {
                !placed[e] && is_edge(&blocks[e]) && blocks[e].term == Term::Jmp(BlockId(t as u32))
            });
            if let Some(e) = feeder {
                placed[e] = true;
                order.push(e);
            }
            placed[t] = true;
            order.push(t);
        }
        order.extend((0..n).filter(|&e| !placed[e]));
        let mut new_index = vec![0u32; n];
        for (pos, old) in order.iter().enumerate() {
            new_index[*old] = pos as u32;
        }
        let remap = |b: &mut BlockId| *b = BlockId(new_index[b.index()]);
        let mut old_blocks: Vec<Option<Block>> = std::mem::take(&mut self.rev.blocks)
            .into_iter()
            .map(Some)
            .collect();
        for old in order {
            let Some(mut b) = old_blocks[old].take() else {
                continue;
            };
            match &mut b.term {
                Term::Jmp(t) => remap(t),
                Term::Br { then_, else_, .. } => {
                    remap(then_);
                    remap(else_);
                }
                Term::BlkPop(ts) => ts.iter_mut().for_each(remap),
                Term::Ret(_) | Term::RetN(_) => {}
            }
            self.rev.blocks.push(b);
        }
    }

    /// The reverse block to go to after the reverse of `b` when `b` was
    /// entered from `pred`: an edge block moving phi cotangents, or directly
    /// the predecessor's reverse block.
    fn edge_target(&mut self, pred: BlockId, b: usize, rblk: &[BlockId]) -> BlockId {
        if !self.has_active_phis(b) {
            return rblk[pred.index()];
        }
        let p = self.p;
        let name = format!("edge.{}.{}", p.blocks[pred.index()].name, p.blocks[b].name);
        let edge = self.new_block(name);
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
        let mut insts = Vec::new();
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
        self.rev.blocks[edge.index()].insts = insts;
        self.rev.blocks[edge.index()].term = Term::Jmp(rblk[pred.index()]);
        edge
    }

    // ---- step 3: the forward CFG ---------------------------------------------

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
                    (inst.dst == Some(v) || self.overwritten.get(&(b, i)) == Some(&v)).then_some(i)
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
                insts.push(inst);
                if let Some(d) = dst.filter(|d| needs.contains(d)) {
                    if !(cut.is_some() && waits(d)) {
                        insts.push(push(d));
                    }
                }
                if cut == Some(i) {
                    for v in needs.iter().filter(|v| waits(**v)) {
                        insts.push(push(*v));
                    }
                }
            }
            let term = p.blocks[b].term.clone();
            match &term {
                Term::Jmp(s) => {
                    if let Some(k) = self.pred_index(BlockId(b as u32), *s) {
                        insts.push(blk_push(k));
                    }
                }
                Term::Br { cond, then_, else_ } => {
                    let t = self.edge_push_block(b, *then_);
                    let e = if else_ == then_ {
                        t
                    } else {
                        self.edge_push_block(b, *else_)
                    };
                    self.fwd.blocks[b].term = Term::Br {
                        cond: *cond,
                        then_: t,
                        else_: e,
                    };
                }
                Term::Ret(_) => {
                    if nrets > 1 {
                        let k = self
                            .cfg
                            .rets
                            .iter()
                            .position(|r| r.index() == b)
                            .unwrap_or(0);
                        insts.push(blk_push(k as u32));
                    }
                    for v in &self.entry_values {
                        insts.push(Inst::new(Op::CommsPush, None, vec![*v], Loc::default()));
                    }
                }
                Term::RetN(_) | Term::BlkPop(_) => {}
            }
            self.fwd.blocks[b].insts = insts;
        }
    }

    /// The id pushed on the edge `from -> to`, if `to` has several
    /// predecessors (otherwise the reverse code knows the edge statically).
    fn pred_index(&self, from: BlockId, to: BlockId) -> Option<u32> {
        let preds = &self.cfg.preds[to.index()];
        if preds.len() < 2 {
            return None;
        }
        preds.iter().position(|p| *p == from).map(|k| k as u32)
    }

    /// The block a forward `br` in `b` should jump to for target `to`: `to`
    /// itself, or a new edge block that pushes the edge's id first (and then
    /// takes `b`'s place in `to`'s phis).
    fn edge_push_block(&mut self, b: usize, to: BlockId) -> BlockId {
        let from = BlockId(b as u32);
        let Some(k) = self.pred_index(from, to) else {
            return to;
        };
        let name = format!(
            "push.{}.{}",
            self.p.blocks[b].name,
            self.p.blocks[to.index()].name
        );
        self.fwd.blocks.push(Block {
            name,
            phis: Vec::new(),
            insts: vec![blk_push(k)],
            term: Term::Jmp(to),
            term_loc: self.p.blocks[b].term_loc,
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
    let mut once = vec![false; n];
    for (bi, b) in p.blocks.iter().enumerate() {
        let defined_here = |v: ValueId| cfg.def_block[v.index()] == Some(BlockId(bi as u32));
        let candidate = |v: ValueId| {
            active[v.index()]
                && p.ty(v) == Type::F64
                && uses[v.index()] == 1
                && p.values[v.index()].konst.is_none()
                && !p.params.contains(&v)
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
/// values it reads.
struct Emit<'t, 'a> {
    t: &'t mut Transform<'a>,
    out: &'t mut Vec<Inst>,
    b: usize,
    loc: Loc,
}

impl Emit<'_, '_> {
    /// The reverse-frame register holding forward value `v`: a constant of
    /// the reverse function, or a mirror filled by `comms.pop`.
    fn need(&mut self, v: ValueId) -> ValueId {
        let data = &self.t.fwd.values[v.index()];
        if let Some(bits) = data.konst {
            let ty = data.ty;
            return self.t.konst(ty, bits);
        }
        let needs = &mut self.t.needs[self.b];
        if !needs.contains(&v) {
            needs.push(v);
        }
        self.t.mirror_of(v)
    }

    /// Emit `op`; returns the new destination (or a dummy id if none).
    fn op(&mut self, op: Op, dst_ty: Option<Type>, args: Vec<ValueId>) -> ValueId {
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

    fn acc(&mut self, to: Option<ValueId>, v: ValueId) {
        if let Some(to) = to {
            let inst = self.t.contribution(Op::Acc, to, vec![v], self.loc);
            self.out.push(inst);
        }
    }

    /// `to += a * b` (or `to = a * b` for a single-contribution cotangent).
    fn acc_mul(&mut self, to: ValueId, a: ValueId, b: ValueId) {
        let inst = self.t.contribution(Op::AccMul, to, vec![a, b], self.loc);
        self.out.push(inst);
    }

    fn acc_neg(&mut self, to: Option<ValueId>, v: ValueId) {
        if let Some(to) = to {
            let inst = self.t.contribution(Op::AccNeg, to, vec![v], self.loc);
            self.out.push(inst);
        }
    }

    /// `to += d * factor`, building the factor only if `to` is active.
    fn scaled(
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
    fn route(
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
    fn reverse_call(&mut self, inst: &Inst, d: Derived, dbar: Option<ValueId>) {
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
