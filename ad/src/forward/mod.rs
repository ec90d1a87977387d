//! Forward mode: the tangent (jvp) transform.
//!
//! One primal SSA function in, one tangent function out, in the IR that
//! [`vm::lower`] turns into bytecode (see `docs/ad.md`, "Forward mode"). For
//! `f(p1, ..., pn) -> T` differentiated with respect to the parameters
//! selected by `wrt`, the tangent function is
//!
//! ```text
//! f.jvp(p1, ..., pn, ṗi, ṗj, ...) -> (y, ẏ)
//! ```
//!
//! with one tangent parameter per selected `f64` or `f64[]` parameter, in
//! parameter order (an `f64[]` parameter's tangent is an array of its
//! length), and `ret.n` of the result and its tangent (only the result for
//! an `i64` or `bool` result). It computes the primal and the tangent in
//! one pass, in the primal's own control flow:
//!
//! * every active `f64` value gets a tangent value beside it, computed by
//!   the rule of its instruction ([`crate::rules::tangent`]) right after it;
//!   inactive values (activity as in reverse mode, [`crate::analysis`]) get
//!   no tangent code; where an inactive value meets an active one (a phi, a
//!   `select`, a call argument, the result) its tangent is the constant 0;
//! * every active array gets a tangent array beside it: a parameter's comes
//!   in as an argument, an `anew`'s is a new array of zeros, a phi's or a
//!   `select`'s is chosen like the array; `aget` reads both, `aset` writes
//!   both;
//! * a phi of an active value gets a tangent phi with the incoming values'
//!   tangents on the same edges: no block stack, no comms stack;
//! * a call differentiated through (as in reverse mode, [`call_is_active`])
//!   calls the callee's tangent function, derived with respect to the active
//!   arguments, passing their tangents (tangent arrays for arrays) after the
//!   arguments, and receives value and tangent by `call.n`.
//!
//! Tangent functions of callees are named by the `derived` callback of
//! [`jvp_function`] before they are built, so recursion works as in reverse
//! mode.

mod engine;

pub use engine::{PreparedJvp, Tangent};

use crate::analysis::{activity_in, call_is_active, call_wrt};
use crate::rules::{self, tangent::Rule};
use hashbrown::HashMap;
use vm::ir::{FuncId, Function, Inst, Loc, Module, Phi, RetType, Term, ValueId};
use vm::op::{Op, Operand};
use vm::Type;

/// The return types of the tangent function of a function returning `ret`:
/// the result and its tangent for `f64` and `f64[]`, the result alone for
/// `i64` and `bool`.
pub fn jvp_ret(ret: &RetType) -> Result<RetType, String> {
    match ret {
        RetType::One(t) if t.is_differentiable() => Ok(RetType::Many(vec![*t, *t])),
        RetType::One(t) => Ok(RetType::Many(vec![*t])),
        // No result: its unused i64 zero (the array arguments' tangents
        // carry the derivative).
        RetType::Unit => Ok(RetType::Many(vec![Type::I64])),
        RetType::Many(_) => Err("a function returning several values has no tangent".into()),
    }
}

/// Build the tangent function of `module.funcs[f]` with respect to the
/// parameters selected by `wrt` (one flag per parameter; only `f64` and
/// `f64[]` ones count). `derived(g, wrt)` gives the id of a callee `g`'s
/// tangent function with respect to the call's active arguments (possibly
/// not built yet). `Err` for a function that is no primal (reverse-mode or
/// lowering-only opcodes, several results): a bug of the caller.
pub fn jvp_function(
    module: &Module,
    f: FuncId,
    wrt: &[bool],
    derived: &mut dyn FnMut(FuncId, Vec<bool>) -> FuncId,
) -> Result<Function, String> {
    let p = module.func(f);
    let active = activity_in(module, p, wrt);
    let mut t = Jvp {
        module: Some(module),
        p,
        active,
        mode: Mode::Primal,
        out: p.clone(),
        tan: vec![None; p.values.len()],
        consts: HashMap::new(),
    };
    t.out.name = format!("{}.jvp", p.name);
    t.out.ret = jvp_ret(&p.ret)?;
    let mut callees = |g: FuncId, w: Vec<bool>| Some(derived(g, w));
    t.build(wrt, &mut callees)?;
    Ok(t.out)
}

/// What the transform differentiates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A user function (SSA), with respect to selected parameters.
    Primal,
    /// A forward function of reverse mode (`f.fwd`, SSA): every value
    /// carries a tangent.
    Forward,
    /// A reverse function of reverse mode (`f.rev`, not SSA: accumulators
    /// written many times): every non-constant f64 value and array has one
    /// tangent register, written wherever the value is.
    Reverse,
}

/// The tangent of a function derived by reverse mode: its forward function
/// (`f.fwd`) or its pullback (`f.rev`, recognised by its several results),
/// for Hessian-vector products by forward-over-reverse (see `docs/ad.md`,
/// "Hessian-vector products"). Every `f64` and `f64[]` value is active (the
/// direction decides what is zero) and every such parameter gets a tangent
/// parameter, after the parameters, in order:
///
/// ```text
/// f.fwd.jvp(p1, ..., pn, t.p1, ...) -> (y, t.y)   pushes v, t.v for each push of v
/// f.rev.jvp(seed, t.seed)           -> (x̄1, ..., x̄k, t.x̄1, ..., t.x̄k)   pops t.v, v
/// ```
///
/// The comms stack carries each pushed f64 value's tangent right after it
/// (an array's tangent array after the array); i64 and bool values carry
/// none. Shadow arrays need no stack: the tangent of `shadow(a)` is
/// `shadow(t.a)`. `derived(g)` names the tangent function of a derived
/// callee `g`, or of a user function (`None`: called as it is, its
/// result's tangent zero; such a call is inactive and pushes nothing). The pops that the reverse clean-up fused
/// into products (`acc.mul.pop`, `mul.pop`) are split again first
/// ([`unfuse`]).
pub fn derived_tangent(
    f: &Function,
    derived: &mut dyn FnMut(FuncId) -> Option<FuncId>,
) -> Result<Function, String> {
    let reverse = matches!(f.ret, RetType::Many(_));
    let p = if reverse { unfuse(f) } else { f.clone() };
    let active: Vec<bool> = p
        .values
        .iter()
        .map(|v| v.konst.is_none() && v.ty.is_differentiable())
        .collect();
    let wrt: Vec<bool> = p.params.iter().map(|v| active[v.index()]).collect();
    let mut out = p.clone();
    out.name = format!("{}.jvp", p.name);
    out.ret = match &p.ret {
        RetType::Many(ts) => {
            if ts.iter().any(|t| *t != Type::F64) {
                return Err("a pullback returns only f64 values".into());
            }
            RetType::Many(ts.iter().chain(ts).copied().collect())
        }
        r => jvp_ret(r)?,
    };
    let mut t = Jvp {
        module: None,
        p: &p,
        active,
        mode: if reverse {
            Mode::Reverse
        } else {
            Mode::Forward
        },
        out,
        tan: vec![None; p.values.len()],
        consts: HashMap::new(),
    };
    let mut callees = |g: FuncId, _: Vec<bool>| derived(g);
    t.build(&wrt, &mut callees)?;
    Ok(t.out)
}

/// `acc.mul.pop r, a` and `d = mul.pop a` as the pop and the product they
/// were fused from (`t = comms.pop; acc.mul r, a, t`), so that the popped
/// factor is a register with a tangent.
pub fn unfuse(f: &Function) -> Function {
    let mut g = f.clone();
    for bi in 0..g.blocks.len() {
        let insts = std::mem::take(&mut g.blocks[bi].insts);
        let mut out = Vec::with_capacity(insts.len());
        for inst in insts {
            match (inst.op, inst.args.as_slice()) {
                (Op::AccMulPop, [r, a]) => {
                    let t = g.new_value(Type::F64, None);
                    out.push(Inst::new(Op::CommsPop, Some(t), Vec::new(), inst.loc));
                    out.push(Inst::new(Op::AccMul, None, vec![*r, *a, t], inst.loc));
                }
                (Op::MulPop, [a]) => {
                    let t = g.new_value(Type::F64, None);
                    out.push(Inst::new(Op::CommsPop, Some(t), Vec::new(), inst.loc));
                    out.push(Inst::new(Op::MulZ, inst.dst, vec![*a, t], inst.loc));
                }
                _ => out.push(inst),
            }
        }
        g.blocks[bi].insts = out;
    }
    g
}

/// The callback naming a callee's tangent function (`None`: call the
/// callee as it is).
type Callees<'c> = dyn FnMut(FuncId, Vec<bool>) -> Option<FuncId> + 'c;

struct Jvp<'a> {
    /// The module of a user function (`None` for derived functions).
    module: Option<&'a Module>,
    p: &'a Function,
    active: Vec<bool>,
    mode: Mode,
    /// The tangent function: the primal's values (same ids) and blocks,
    /// extended.
    out: Function,
    /// The tangent of each primal value (`None`: zero, no code).
    tan: Vec<Option<ValueId>>,
    consts: HashMap<(Type, u64), ValueId>,
}

impl Jvp<'_> {
    fn build(&mut self, wrt: &[bool], derived: &mut Callees<'_>) -> Result<(), String> {
        let p = self.p;
        // Tangent parameters, after the primal ones.
        for (i, param) in p.params.iter().enumerate() {
            let ty = p.ty(*param);
            if ty.is_differentiable() && wrt.get(i).copied().unwrap_or(false) {
                let prefix = if self.mode == Mode::Primal { "d" } else { "t" };
                let name = p.values[param.index()]
                    .name
                    .as_ref()
                    .map(|n| format!("{prefix}.{n}"));
                let t = self.out.new_value(ty, name);
                self.out.params.push(t);
                self.tan[param.index()] = Some(t);
            }
        }
        // In a pullback, every non-constant f64 value and array has one
        // tangent register from the start (registers start at zero, like
        // the cotangents they are tangents of).
        if self.mode == Mode::Reverse {
            for v in 0..p.values.len() {
                if self.active[v] && self.tan[v].is_none() {
                    let t = self.tangent_value(ValueId(v as u32));
                    self.tan[v] = Some(t);
                }
            }
        }
        // Tangent phis are named before any block is translated: a loop's
        // back edge brings a value defined later in block order.
        for b in &p.blocks {
            for phi in &b.phis {
                if self.active[phi.dst.index()] {
                    let t = self.tangent_value(phi.dst);
                    self.tan[phi.dst.index()] = Some(t);
                }
            }
        }
        let mut blocks_insts = Vec::with_capacity(p.blocks.len());
        for (bi, b) in p.blocks.iter().enumerate() {
            let mut insts = Vec::with_capacity(b.insts.len() * 2);
            if bi == 0 {
                // An active array parameter outside `wrt` (its alias class
                // is active): a tangent array of zeros.
                for (i, param) in p.params.iter().enumerate() {
                    if self.active[param.index()] && self.tan[param.index()].is_none() {
                        let selected = wrt.get(i).copied().unwrap_or(false);
                        if p.ty(*param) == Type::Arr && !selected {
                            let t = self.zero_array(*param, Loc::default(), &mut insts);
                            self.tan[param.index()] = Some(t);
                        }
                    }
                }
            }
            for inst in &b.insts {
                self.inst(inst, &mut insts, derived)?;
            }
            blocks_insts.push(insts);
            // An allocation failed in this compile section (served from
            // the reserve, `vm::oom`): stop, the section reports it.
            if vm::oom::failed() {
                return Err("out of memory".into());
            }
        }
        // Tangent phis, now that every tangent is known; a zero array for
        // an inactive array operand is made at the end of its edge's
        // predecessor.
        let mut tphis: Vec<Vec<Phi>> = vec![Vec::new(); p.blocks.len()];
        for (bi, b) in p.blocks.iter().enumerate() {
            for phi in &b.phis {
                let Some(tdst) = self.tan[phi.dst.index()] else {
                    continue;
                };
                let mut incoming = Vec::with_capacity(phi.incoming.len());
                for (pred, v) in &phi.incoming {
                    let insts = blocks_insts
                        .get_mut(pred.index())
                        .ok_or_else(|| format!("phi edge from missing block {pred}"))?;
                    let tv = self.tan_or_zero(*v, phi.loc, insts);
                    incoming.push((*pred, tv));
                }
                tphis[bi].push(Phi {
                    dst: tdst,
                    incoming,
                    loc: phi.loc,
                });
            }
        }
        // Returns: the result and its tangent.
        for (bi, b) in p.blocks.iter().enumerate() {
            if let Term::Ret(v) = b.term {
                let list = if p.ty(v).is_differentiable() {
                    let tv = self.tan_or_zero(v, b.term_loc, &mut blocks_insts[bi]);
                    vec![v, tv]
                } else {
                    vec![v]
                };
                self.out.blocks[bi].term = Term::RetN(list);
            }
            // A pullback's results (cotangents), then their tangents.
            if let (Term::RetN(vs), Mode::Reverse) = (&b.term, self.mode) {
                let mut list = vs.clone();
                for v in vs {
                    let tv = self.tan_or_zero(*v, b.term_loc, &mut blocks_insts[bi]);
                    list.push(tv);
                }
                self.out.blocks[bi].term = Term::RetN(list);
            }
        }
        for (bi, (insts, phis)) in blocks_insts.into_iter().zip(tphis).enumerate() {
            let block = &mut self.out.blocks[bi];
            block.insts = insts;
            block.phis.extend(phis);
        }
        Ok(())
    }

    /// Translate one primal instruction: itself, then its tangent code (a
    /// call differentiated through becomes a call of the callee's tangent
    /// function).
    fn inst(
        &mut self,
        inst: &Inst,
        out: &mut Vec<Inst>,
        derived: &mut Callees<'_>,
    ) -> Result<(), String> {
        let p = self.p;
        let involved = match (self.mode, inst.op) {
            // Derived code: every instruction has its rule (most say
            // there is nothing to do).
            (Mode::Forward | Mode::Reverse, _) => true,
            (Mode::Primal, Op::ASet) => inst.args.first().is_some_and(|a| self.active[a.index()]),
            (Mode::Primal, Op::Call) => call_is_active(p, inst, &self.active),
            (Mode::Primal, _) => inst.dst.is_some_and(|d| self.active[d.index()]),
        };
        if !involved {
            if inst.op.is_lowering_only() {
                return Err(format!(
                    "{} is not a primal instruction",
                    inst.op.mnemonic()
                ));
            }
            out.push(inst.clone());
            return Ok(());
        }
        check_shape(inst)?;
        let mut tail = Vec::new();
        let (rule, reads_y) = {
            let mut e = Emit {
                t: self,
                inst,
                out: &mut tail,
                reads_y: false,
            };
            let rule = rules::tangent::tangent(&mut e, inst.op);
            (rule, e.reads_y)
        };
        // In a pullback the result's tangent register is fixed: the rule's
        // tangent is copied into it (or it is zeroed).
        let fixed = match (self.mode, inst.dst) {
            (Mode::Reverse, Some(d)) => self.tan[d.index()],
            _ => None,
        };
        if let Some(ft) = fixed {
            match rule {
                Rule::Tangent(t) if t != ft => {
                    tail.push(Inst::new(Op::Mov, Some(ft), vec![t], inst.loc));
                }
                Rule::Zero if self.out.ty(ft) == Type::F64 => {
                    tail.push(Inst::new(Op::Zero, Some(ft), Vec::new(), inst.loc));
                }
                _ => {}
            }
        }
        // Tangent code that does not read the result goes before the
        // instruction: it reads the operands, and a loop-carried operand
        // (`r = r * x` of a phi `r`) is then dead once the result is
        // defined, so the lowering can give both one register.
        let emit = |out: &mut Vec<Inst>| {
            if reads_y {
                out.push(inst.clone());
                out.extend(tail);
            } else {
                out.extend(tail);
                out.push(inst.clone());
            }
        };
        match rule {
            Rule::Tangent(t) => {
                emit(out);
                if let (Some(d), None) = (inst.dst, fixed) {
                    self.tan[d.index()] = Some(t);
                }
            }
            Rule::Zero | Rule::NoDerivative | Rule::Effect => emit(out),
            Rule::Call if self.mode == Mode::Primal => self.call(inst, out, derived)?,
            Rule::Call => self.derived_call(inst, out, derived)?,
            Rule::NotPrimal(why) => {
                return Err(format!("{} is {why}", inst.op.mnemonic()));
            }
        }
        Ok(())
    }

    /// A call differentiated through: `call.n` of the callee's tangent
    /// function with the active arguments' tangents appended, into the
    /// result and its tangent.
    fn call(
        &mut self,
        inst: &Inst,
        out: &mut Vec<Inst>,
        derived: &mut Callees<'_>,
    ) -> Result<(), String> {
        let g = inst.callee.ok_or("call without a callee")?;
        let callee = self
            .module
            .ok_or("a user call outside a user function")?
            .funcs
            .get(g.index())
            .ok_or_else(|| format!("call of missing function {g}"))?;
        let dst = inst.dst.ok_or("call without a result")?;
        let cw = call_wrt(&inst.args, &self.active);
        let mut args = inst.args.clone();
        for (a, w) in inst.args.iter().zip(&cw) {
            if *w {
                let t = self.tan_or_zero(*a, inst.loc, out);
                args.push(t);
            }
        }
        let mut accs = vec![dst];
        if let RetType::One(t) = callee.ret {
            if t.is_differentiable() {
                let td = self.tangent_value(dst);
                accs.push(td);
                self.tan[dst.index()] = Some(td);
            }
        }
        let mut call = Inst::new(Op::CallN, None, args, inst.loc);
        call.callee = Some(derived(g, cw).ok_or("a callee without a tangent function")?);
        call.accs = accs;
        out.push(call);
        Ok(())
    }

    /// A call in derived code. Of a derived callee (its forward function or
    /// pullback): a call of that callee's tangent function with the
    /// tangents of every f64 and array argument appended; a forward call
    /// (`call`) becomes `call.n` into the result and its tangent, a
    /// pullback's (`call.acc`) adds the returned cotangents and their
    /// tangents to the accumulators and theirs. Of a user function (a call
    /// reverse mode left inactive): its tangent function's if `derived`
    /// names one (as a forward call), else the call as it is, its result's
    /// tangent zero.
    fn derived_call(
        &mut self,
        inst: &Inst,
        out: &mut Vec<Inst>,
        derived: &mut Callees<'_>,
    ) -> Result<(), String> {
        let g = inst.callee.ok_or("call without a callee")?;
        let Some(tg) = derived(g, Vec::new()) else {
            out.push(inst.clone());
            if let Some(d) = inst.dst {
                match (self.mode, self.tan[d.index()]) {
                    (Mode::Reverse, Some(td)) if self.out.ty(td) == Type::F64 => {
                        out.push(Inst::new(Op::Zero, Some(td), Vec::new(), inst.loc));
                    }
                    (Mode::Reverse, Some(_)) => {
                        return Err("a user call into an array in a pullback".into())
                    }
                    _ => self.tan[d.index()] = None,
                }
            }
            return Ok(());
        };
        let mut args = inst.args.clone();
        for a in &inst.args {
            if self.out.ty(*a).is_differentiable() {
                let t = self.tan_or_zero(*a, inst.loc, out);
                args.push(t);
            }
        }
        let mut call = match inst.op {
            Op::CallAcc => {
                let mut accs = inst.accs.clone();
                for a in &inst.accs {
                    let t = match self.tan[a.index()] {
                        Some(t) => t,
                        // A register to absorb what nothing reads.
                        None => self.out.new_value(Type::F64, None),
                    };
                    accs.push(t);
                }
                let mut c = Inst::new(Op::CallAcc, None, args, inst.loc);
                c.accs = accs;
                c
            }
            _ => {
                let dst = inst.dst.ok_or("call without a result")?;
                let mut accs = vec![dst];
                if self.out.ty(dst).is_differentiable() {
                    let td = match (self.mode, self.tan[dst.index()]) {
                        (Mode::Reverse, Some(td)) => td,
                        _ => {
                            let td = self.tangent_value(dst);
                            self.tan[dst.index()] = Some(td);
                            td
                        }
                    };
                    accs.push(td);
                }
                let mut c = Inst::new(Op::CallN, None, args, inst.loc);
                c.accs = accs;
                c
            }
        };
        call.callee = Some(tg);
        out.push(call);
        Ok(())
    }

    /// A new value for the tangent of `v`, named after it.
    fn tangent_value(&mut self, v: ValueId) -> ValueId {
        let data = &self.p.values[v.index()];
        // Derived code has cotangents named `d.x` already: its tangents
        // are `t.x`, `t.d.x`.
        let prefix = if self.mode == Mode::Primal { "d" } else { "t" };
        let name = data.name.as_ref().map(|n| format!("{prefix}.{n}"));
        self.out.new_value(data.ty, name)
    }

    /// The tangent of `v`: its tangent value, the constant 0 for an
    /// inactive `f64`, a new array of zeros of its length (emitted into
    /// `out`) for an inactive array.
    fn tan_or_zero(&mut self, v: ValueId, loc: Loc, out: &mut Vec<Inst>) -> ValueId {
        if let Some(t) = self.tan.get(v.index()).copied().flatten() {
            return t;
        }
        match self.out.ty(v) {
            Type::Arr => self.zero_array(v, loc, out),
            ty => self.konst(ty, 0),
        }
    }

    /// `anew (alen a)`: a tangent array of zeros for the array `a`.
    fn zero_array(&mut self, a: ValueId, loc: Loc, out: &mut Vec<Inst>) -> ValueId {
        let n = self.out.new_value(Type::I64, None);
        out.push(Inst::new(Op::ALen, Some(n), vec![a], loc));
        let t = self.tangent_value(a);
        out.push(Inst::new(Op::ANew, Some(t), vec![n], loc));
        t
    }

    fn konst(&mut self, ty: Type, bits: u64) -> ValueId {
        if let Some(v) = self.consts.get(&(ty, bits)) {
            return *v;
        }
        let v = self.out.new_const(ty, bits);
        self.consts.insert((ty, bits), v);
        v
    }
}

/// An instruction's operands must be as its opcode's table line says
/// before a rule reads them (user IR always is; a hand-built module may
/// not be).
fn check_shape(inst: &Inst) -> Result<(), String> {
    let ops = inst.op.operands();
    let has_def = ops.iter().any(|o| matches!(o, Operand::Def(_)));
    let uses = ops
        .iter()
        .filter(|o| matches!(o, Operand::Use(_) | Operand::InOut(_)))
        .count();
    let call = ops.contains(&Operand::Site);
    if has_def != inst.dst.is_some() || (!call && uses != inst.args.len()) {
        return Err(format!(
            "{} has {} operand(s) and {} result, not as its opcode says",
            inst.op.mnemonic(),
            inst.args.len(),
            if inst.dst.is_some() { "a" } else { "no" }
        ));
    }
    Ok(())
}

/// What a tangent rule emits through: the instruction's operands, their
/// tangents and new instructions after it (see [`crate::rules::tangent`]).
pub struct Emit<'e, 'a> {
    t: &'e mut Jvp<'a>,
    inst: &'e Inst,
    out: &'e mut Vec<Inst>,
    /// Whether the rule read the result (its code then follows the
    /// instruction; otherwise it precedes it).
    reads_y: bool,
}

impl Emit<'_, '_> {
    /// Operand `k` (primal).
    pub fn a(&self, k: usize) -> ValueId {
        self.inst.args[k]
    }

    /// The tangent of operand `k`; `None` when it is inactive (zero).
    pub fn t(&self, k: usize) -> Option<ValueId> {
        self.t.tan.get(self.a(k).index()).copied().flatten()
    }

    /// The tangent of operand `k`, the constant 0 (or an array of zeros)
    /// when it is inactive.
    pub fn t_or_zero(&mut self, k: usize) -> ValueId {
        let (a, loc) = (self.a(k), self.inst.loc);
        self.t.tan_or_zero(a, loc, self.out)
    }

    /// The result (primal).
    pub fn y(&mut self) -> ValueId {
        self.reads_y = true;
        self.inst.dst.unwrap_or(ValueId(0))
    }

    /// Place the rule's code after the instruction (as reading the result
    /// does): a `comms.push`'s tangent follows the value.
    pub fn after(&mut self) {
        self.reads_y = true;
    }

    /// The type of value `v`.
    pub fn ty(&self, v: ValueId) -> Type {
        self.t.out.ty(v)
    }

    /// The result's type.
    pub fn y_ty(&self) -> Type {
        self.inst
            .dst
            .map_or(Type::F64, |d| self.t.out.values[d.index()].ty)
    }

    /// The f64 constant `x`.
    pub fn kf(&mut self, x: f64) -> ValueId {
        self.t.konst(Type::F64, x.to_bits())
    }

    /// Emit `op args` into a new value of type `ty`.
    pub fn op(&mut self, op: Op, ty: Type, args: &[ValueId]) -> ValueId {
        let d = self.t.out.new_value(ty, None);
        self.out
            .push(Inst::new(op, Some(d), args.to_vec(), self.inst.loc));
        d
    }

    /// Emit `op args` with no result.
    pub fn effect(&mut self, op: Op, args: &[ValueId]) {
        self.out
            .push(Inst::new(op, None, args.to_vec(), self.inst.loc));
    }

    /// `a + b` of two tangents, either of which may be zero.
    pub fn add(&mut self, a: Option<ValueId>, b: Option<ValueId>) -> Option<ValueId> {
        match (a, b) {
            (Some(a), Some(b)) => Some(self.op(Op::AddF, Type::F64, &[a, b])),
            (a, None) => a,
            (None, b) => b,
        }
    }

    /// `a - b` of two tangents, either of which may be zero.
    pub fn sub(&mut self, a: Option<ValueId>, b: Option<ValueId>) -> Option<ValueId> {
        match (a, b) {
            (Some(a), Some(b)) => Some(self.op(Op::SubF, Type::F64, &[a, b])),
            (a, None) => a,
            (None, Some(b)) => Some(self.op(Op::NegF, Type::F64, &[b])),
        }
    }

    /// `t * f` for a tangent `t` that may be zero (then no code): a
    /// strong-zero product, so that a zero tangent contributes exactly zero
    /// even where the local derivative `f` is infinite or nan.
    pub fn scale(&mut self, t: Option<ValueId>, f: ValueId) -> Option<ValueId> {
        t.map(|t| self.op(Op::MulZ, Type::F64, &[t, f]))
    }

    /// `s + t ⊙ f` for a sum `s` and a tangent `t`, either of which may be
    /// zero: one `add.mul.z` when both are there (the product rounded
    /// before it is added, as by `mul.z` and `add.f`).
    pub fn add_scaled(
        &mut self,
        s: Option<ValueId>,
        t: Option<ValueId>,
        f: ValueId,
    ) -> Option<ValueId> {
        match (s, t) {
            (Some(s), Some(t)) => Some(self.op(Op::AddMulZ, Type::F64, &[s, t, f])),
            (None, t) => self.scale(t, f),
            (s, None) => s,
        }
    }

    /// `t / f` for a tangent `t` that may be zero (then no code): zero when
    /// `t` is, even where `f` is zero or nan.
    pub fn divide(&mut self, t: Option<ValueId>, f: ValueId) -> Option<ValueId> {
        t.map(|t| self.op(Op::DivZ, Type::F64, &[t, f]))
    }

    /// `t * factor()`, the factor computed only when `t` is not zero.
    pub fn scale_by(
        &mut self,
        t: Option<ValueId>,
        factor: impl FnOnce(&mut Self) -> ValueId,
    ) -> Option<ValueId> {
        let t = t?;
        let f = factor(self);
        Some(self.op(Op::MulZ, Type::F64, &[t, f]))
    }
}
