//! Custom derivative rules: `rule @f jvp @f_jvp` ([`vm::ir::Rule`]).
//!
//! One rule in tangent form serves every mode. Each mode has one place
//! where a function's derived code is built, and there a function with a
//! rule gets the code below instead of the transform of its body (which
//! still computes the value):
//!
//! * forward mode (`rule_tangent`, from `Engine::derive_jvp`):
//!   `f.jvp(p..., ṗ...) = (f(p...), f_jvp(p..., ṗ...))`, the tangents of
//!   parameters outside the selection zero;
//! * reverse mode (`rule_pair`, from `Engine::derive_all`): the
//!   transpose of the rule, i.e. the reverse-mode derivative of `f_jvp`
//!   with respect to its tangent parameters (linear in them, so taken at
//!   zero tangents). `f.fwd` calls `f` for the value and the forward
//!   function of `f_jvp` (tangents zero) for what its pullback needs;
//!   `f.rev` calls that pullback with the result's cotangent and returns
//!   what it gives the tangent parameters as `f`'s parameters'
//!   cotangents (an array's: its tangent array's shadow, added into the
//!   array's shadow);
//! * Hessian-vector products (`Engine::derive_tangents`): the forward-mode
//!   transform of `f.fwd` and `f.rev` as for any derived pair, which
//!   differentiates `f_jvp`'s own body; the call of `f` in `f.fwd` calls
//!   `f`'s (rule) tangent function, so the value's tangent is the rule's
//!   (in derived code every call of a user function returning f64 or f64[] has a
//!   tangent, `Engine::user_call_tangents`).
//!
//! The code is ordinary IR, lowered and verified like every derived
//! function; no mode runs anything else.

use crate::{AdError, Engine};
use vm::ir::{
    rule_signature_error, Block, BlockId, FuncId, Function, Inst, Loc, Module, RetType, Rule, Term,
    ValueId,
};
use vm::op::Op;
use vm::Type;

/// Check the rules of a module from outside (ids, one per function,
/// signatures): what the assembler checks for text, for modules built by
/// other front ends or by hand.
pub(crate) fn check_rules(m: &Module) -> Result<(), AdError> {
    let bad = |msg: String| Err(AdError::InvalidModule(format!("rule: {msg}")));
    for (k, r) in m.rules.iter().enumerate() {
        let (Some(f), Some(j)) = (m.funcs.get(r.f.index()), m.funcs.get(r.jvp.index())) else {
            return bad(format!("rule {} names a missing function", k + 1));
        };
        if m.rules[..k].iter().any(|q| q.f == r.f) {
            return bad(format!("`@{}` has two rules", f.name));
        }
        if r.f == r.jvp {
            return bad(format!("`@{}` cannot be its own rule", f.name));
        }
        let ret = |g: &Function| match g.ret {
            RetType::One(t) => Some(t),
            _ => None,
        };
        if let Some(msg) = rule_signature_error(
            &f.name,
            &f.param_types(),
            ret(f),
            &j.name,
            &j.param_types(),
            ret(j),
        ) {
            return bad(msg);
        }
    }
    Ok(())
}

/// The text of a rule, `rule @f jvp @f_jvp`.
pub fn rule_text(m: &Module, r: &Rule) -> String {
    format!("rule @{} jvp @{}", m.func(r.f).name, m.func(r.jvp).name)
}

/// The rules the derivative of `f` uses: those of the functions its
/// differentiated code reaches through calls (a function with a rule
/// contributes its rule and what its rule function reaches, not its own
/// body), in order of discovery.
pub fn rules_used(m: &Module, f: FuncId) -> Vec<Rule> {
    let mut seen = vec![false; m.funcs.len()];
    let mut stack = vec![f];
    let mut out = Vec::new();
    while let Some(g) = stack.pop() {
        match seen.get_mut(g.index()) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        if let Some(r) = m.rule_of(g) {
            out.push(*r);
            stack.push(r.jvp);
            continue;
        }
        let mut callees: Vec<FuncId> = m
            .func(g)
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .filter_map(|i| i.callee)
            .collect();
        callees.reverse();
        stack.extend(callees);
    }
    out
}

/// A function under construction, one block at a time.
struct Build {
    f: Function,
    loc: Loc,
}

impl Build {
    fn new(name: String, ret: RetType, loc: Loc) -> Build {
        Build {
            f: Function {
                name,
                params: Vec::new(),
                ret,
                values: Vec::new(),
                blocks: Vec::new(),
                loc,
            },
            loc,
        }
    }

    fn param(&mut self, ty: Type, name: Option<String>) -> ValueId {
        let v = self.f.new_value(ty, name);
        self.f.params.push(v);
        v
    }

    fn block(&mut self, name: &str) -> BlockId {
        self.f.blocks.push(Block {
            name: name.to_string(),
            phis: Vec::new(),
            insts: Vec::new(),
            term: Term::Jmp(BlockId(0)),
            term_loc: self.loc,
        });
        BlockId(self.f.blocks.len() as u32 - 1)
    }

    fn push(&mut self, b: BlockId, inst: Inst) {
        self.f.blocks[b.index()].insts.push(inst);
    }

    /// `dst = op args` in block `b` (a new value of type `ty` if `dst` is
    /// `None`).
    fn op(
        &mut self,
        b: BlockId,
        op: Op,
        ty: Type,
        dst: Option<ValueId>,
        args: Vec<ValueId>,
    ) -> ValueId {
        let d = dst.unwrap_or_else(|| self.f.new_value(ty, None));
        self.push(b, Inst::new(op, Some(d), args, self.loc));
        d
    }

    fn call(
        &mut self,
        b: BlockId,
        callee: FuncId,
        ty: Type,
        args: Vec<ValueId>,
        name: Option<String>,
    ) -> ValueId {
        let d = self.f.new_value(ty, name);
        let mut inst = Inst::new(Op::Call, Some(d), args, self.loc);
        inst.callee = Some(callee);
        self.push(b, inst);
        d
    }

    fn term(&mut self, b: BlockId, t: Term) {
        self.f.blocks[b.index()].term = t;
    }
}

/// A copy of `f`'s parameters as `b`'s parameters, with their names.
fn copy_params(b: &mut Build, f: &Function) -> Vec<ValueId> {
    f.params
        .iter()
        .map(|p| b.param(f.ty(*p), f.values[p.index()].name.clone()))
        .collect()
}

/// A zero tangent for `p` (of type `ty`): the constant 0.0, or a new
/// array of zeros of `p`'s length, emitted into block `at`.
fn zero_tangent(b: &mut Build, at: BlockId, p: ValueId, ty: Type) -> ValueId {
    if ty == Type::Arr {
        let n = b.op(at, Op::ALen, Type::I64, None, vec![p]);
        b.op(at, Op::ANew, Type::Arr, None, vec![n])
    } else {
        b.f.new_const(Type::F64, 0f64.to_bits())
    }
}

/// The type of `f`'s result: `f64` or `f64[]` for a function with a rule
/// (checked when the rule was made).
fn result_type(f: &Function) -> Type {
    match f.ret {
        RetType::One(t) => t,
        _ => Type::F64,
    }
}

/// The tangent function of `f = rule.f` with respect to `wrt` (as
/// `forward::jvp_function` would build it from `f`'s body):
///
/// ```text
/// f.jvp(p..., ṗ selected...) -> (y, ẏ):  y = f(p...);  ẏ = f_jvp(p..., ṗ...);  ret.n y, ẏ
/// ```
///
/// with zero tangents (0.0, or new arrays of zeros) for the differentiable
/// parameters outside `wrt`. For an array result, `len.check y, ẏ` before
/// the return: a tangent of another length traps, naming the rule's line.
pub(crate) fn rule_tangent(m: &Module, rule: Rule, wrt: &[bool]) -> Function {
    let f = m.func(rule.f);
    let ret = result_type(f);
    let mut b = Build::new(
        format!("{}.jvp", f.name),
        RetType::Many(vec![ret, ret]),
        rule.loc,
    );
    let ps = copy_params(&mut b, f);
    let mut dirs = Vec::new();
    for (i, p) in ps.iter().enumerate() {
        let ty = b.f.ty(*p);
        if ty.is_differentiable() && wrt.get(i).copied().unwrap_or(false) {
            let name = b.f.values[p.index()]
                .name
                .as_ref()
                .map(|n| format!("d.{n}"));
            dirs.push(Some(b.param(ty, name)));
        } else if ty.is_differentiable() {
            dirs.push(None);
        }
    }
    let entry = b.block("entry");
    let y = b.call(entry, rule.f, ret, ps.clone(), Some("y".into()));
    let mut args = ps.clone();
    let diff: Vec<ValueId> = ps
        .iter()
        .copied()
        .filter(|p| b.f.ty(*p).is_differentiable())
        .collect();
    for (p, d) in diff.iter().zip(dirs) {
        let t = match d {
            Some(t) => t,
            None => {
                let ty = b.f.ty(*p);
                zero_tangent(&mut b, entry, *p, ty)
            }
        };
        args.push(t);
    }
    let dy = b.call(entry, rule.jvp, ret, args, Some("d.y".into()));
    if ret == Type::Arr {
        b.push(entry, Inst::new(Op::LenCheck, None, vec![y, dy], rule.loc));
    }
    b.term(entry, Term::RetN(vec![y, dy]));
    b.f
}

/// The mask `f_jvp`'s pair is derived with for `f`'s pair with respect to
/// `wrt`: none of `f`'s parameters, the tangents of the selected ones.
pub(crate) fn jvp_mask(f: &Function, wrt: &[bool]) -> Vec<bool> {
    let mut mask = vec![false; f.params.len()];
    for (i, p) in f.params.iter().enumerate() {
        if f.ty(*p).is_differentiable() {
            mask.push(wrt.get(i).copied().unwrap_or(false));
        }
    }
    mask
}

/// The forward and reverse functions of `f = rule.f` with respect to
/// `wrt`, from the pair `jd` of `rule.jvp` with respect to
/// [`jvp_mask`]`(f, wrt)` (see the module documentation):
///
/// ```text
/// f.fwd(p...) -> y:   y = f(p...);  f_jvp.fwd(p..., 0...);  push (p, ṗ) of each selected array;  ret y
/// f.rev(ȳ) -> (p̄...): pop them;  (.., ṗ̄...) += f_jvp.rev(ȳ);  shadow(p) += shadow(ṗ);  ret.n
/// ```
///
/// For an array result, `f.fwd` checks the rule's tangent (taken at zero
/// tangents, but of the length the rule gives) against `y` (`len.check`),
/// so that a tangent of another length traps at the `rule` line before
/// the reverse function could misread it.
pub(crate) fn rule_pair(
    m: &Module,
    rule: Rule,
    wrt: &[bool],
    jd: crate::Derived,
) -> (Function, Function) {
    let f = m.func(rule.f);
    let loc = rule.loc;
    // ---- forward
    let mut fb = Build::new(format!("{}.fwd", f.name), f.ret.clone(), loc);
    let ps = copy_params(&mut fb, f);
    let entry = fb.block("entry");
    let ret = result_type(f);
    let y = fb.call(entry, rule.f, ret, ps.clone(), Some("y".into()));
    let mut args = ps.clone();
    // (parameter index, array, its zero tangent array) of selected arrays.
    let mut arrays = Vec::new();
    for (i, p) in ps.iter().enumerate() {
        let ty = fb.f.ty(*p);
        if ty.is_differentiable() {
            let z = zero_tangent(&mut fb, entry, *p, ty);
            args.push(z);
            if ty == Type::Arr && wrt.get(i).copied().unwrap_or(false) {
                arrays.push((i, *p, z));
            }
        }
    }
    let t = fb.f.new_value(ret, None);
    let mut call = Inst::new(Op::Call, Some(t), args, loc);
    call.callee = Some(jd.fwd);
    fb.push(entry, call);
    if ret == Type::Arr {
        // A tangent array of another length than the result would leave
        // cotangents out or trap out of bounds in the reverse function.
        fb.push(entry, Inst::new(Op::LenCheck, None, vec![y, t], loc));
    }
    for (_, p, z) in &arrays {
        fb.push(entry, Inst::new(Op::CommsPush, None, vec![*p], loc));
        fb.push(entry, Inst::new(Op::CommsPush, None, vec![*z], loc));
    }
    if ret == Type::Arr {
        // The result's cotangent arrives in its shadow; the rule's
        // pullback reads it from the shadow of its own result.
        fb.push(entry, Inst::new(Op::CommsPush, None, vec![y], loc));
        fb.push(entry, Inst::new(Op::CommsPush, None, vec![t], loc));
    }
    fb.term(entry, Term::Ret(y));

    // ---- reverse
    let n_f64 = f.params.iter().filter(|p| f.ty(**p) == Type::F64).count();
    let mut rb = Build::new(
        format!("{}.rev", f.name),
        RetType::Many(vec![Type::F64; n_f64]),
        loc,
    );
    let entry = rb.block("start");
    // The result's cotangent: the seed of an f64 result. An array result's
    // arrives in its shadow: moved into the shadow of the rule's result,
    // where the rule's pullback (which then takes no seed) reads it.
    let mut seeds = Vec::new();
    let mut at = entry;
    if ret == Type::Arr {
        let t = rb.f.new_value(Type::Arr, None);
        rb.push(entry, Inst::new(Op::CommsPop, Some(t), Vec::new(), loc));
        let y = rb.f.new_value(Type::Arr, Some("y".into()));
        rb.push(entry, Inst::new(Op::CommsPop, Some(y), Vec::new(), loc));
        at = move_shadow(&mut rb, at, y, t);
    } else {
        seeds.push(rb.param(Type::F64, Some("seed".into())));
    }
    let mut popped = Vec::new();
    for (i, _, _) in arrays.iter().rev() {
        let z = rb.f.new_value(Type::Arr, None);
        rb.push(at, Inst::new(Op::CommsPop, Some(z), Vec::new(), loc));
        let p = rb.f.new_value(Type::Arr, None);
        rb.push(at, Inst::new(Op::CommsPop, Some(p), Vec::new(), loc));
        popped.push((*i, p, z));
    }
    popped.reverse();
    // One accumulator per f64 parameter of `f_jvp`: `f`'s own (their
    // cotangents are not asked for), then the tangents of `f`'s f64
    // parameters, which become `f`'s cotangents.
    let sink = rb.f.new_value(Type::F64, Some("sink".into()));
    rb.push(at, Inst::new(Op::Zero, Some(sink), Vec::new(), loc));
    let mut accs = vec![sink; n_f64];
    let mut grads = Vec::new();
    for (i, p) in f.params.iter().enumerate() {
        if f.ty(*p) == Type::F64 {
            let name = f.values[p.index()].name.as_ref().map(|n| format!("d.{n}"));
            let c = rb.f.new_value(Type::F64, name);
            rb.push(at, Inst::new(Op::Zero, Some(c), Vec::new(), loc));
            accs.push(c);
            grads.push(if wrt.get(i).copied().unwrap_or(false) {
                c
            } else {
                rb.f.new_const(Type::F64, 0f64.to_bits())
            });
        }
    }
    let mut call = Inst::new(Op::CallAcc, None, seeds, loc);
    call.callee = Some(jd.rev);
    call.accs = accs;
    rb.push(at, call);
    // shadow(p) += shadow(ṗ) for each selected array.
    for (_, p, z) in popped {
        at = move_shadow(&mut rb, at, z, p);
    }
    rb.term(at, Term::RetN(grads));
    (fb.f, rb.f)
}

/// `shadow(to)[k] += shadow(from)[k]` (taken: `from`'s shadow left zero)
/// for each index k of `from`, counted up, in a loop emitted from block
/// `at` on; the block after it. The two have the same length: a rule's
/// tangent array is checked against the result in the forward function
/// (`len.check`), an array parameter's zero tangent is made with its
/// length.
fn move_shadow(rb: &mut Build, at: BlockId, from: ValueId, to: ValueId) -> BlockId {
    let loc = rb.loc;
    let k = rb.f.new_value(Type::I64, Some("k".into()));
    let n = rb.op(at, Op::ALen, Type::I64, None, vec![from]);
    let zero = rb.f.new_const(Type::I64, 0);
    rb.op(at, Op::Mov, Type::I64, Some(k), vec![zero]);
    let head = rb.block("add.head");
    let body = rb.block("add.body");
    let next = rb.block("add.done");
    rb.term(at, Term::Jmp(head));
    let c = rb.op(head, Op::LtI, Type::Bool, None, vec![k, n]);
    rb.term(
        head,
        Term::Br {
            cond: c,
            then_: body,
            else_: next,
        },
    );
    let t = rb.op(body, Op::ShadowTake, Type::F64, None, vec![from, k]);
    rb.push(body, Inst::new(Op::ShadowAcc, None, vec![to, k, t], loc));
    let one = rb.f.new_const(Type::I64, 1);
    rb.op(body, Op::AddI, Type::I64, Some(k), vec![k, one]);
    rb.term(body, Term::Jmp(head));
    next
}

impl Engine {
    /// The rule of `f`, if it has one.
    pub fn rule_of(&self, f: FuncId) -> Option<Rule> {
        self.module.rule_of(f).copied()
    }

    /// The rules the derivative of `f` uses ([`rules_used`]), as text
    /// (`rule @f jvp @f_jvp` each).
    pub fn rules_used(&self, f: FuncId) -> Vec<String> {
        if f.index() >= self.module.funcs.len() {
            return Vec::new();
        }
        rules_used(&self.module, f)
            .iter()
            .map(|r| rule_text(&self.module, r))
            .collect()
    }

    /// The rule a derived function (forward, reverse or tangent function,
    /// by bytecode id) was made from, if it was.
    pub(crate) fn rule_made(&self, g: FuncId) -> Option<Rule> {
        // Forward, reverse and tangent functions of the rule's function
        // (not the tangents of derived functions, which no rule makes).
        let of = match self.derived.kind(g)? {
            (crate::Kind::Hvp(_), _) => return None,
            (_, of) => of,
        };
        self.module.rules.iter().copied().find(|r| r.f == of)
    }

    /// The comment line (with its newline) a listing shows above derived
    /// function `g` (by bytecode id) if it was made from a rule: `; from
    /// rule @f jvp @f_jvp: ...`; empty for any other function.
    pub fn rule_note(&self, g: FuncId) -> String {
        match self.rule_made(g) {
            Some(r) => format!(
                "; from {}: the value from @{}, the derivative from @{}\n",
                rule_text(&self.module, &r),
                self.module.func(r.f).name,
                self.module.func(r.jvp).name
            ),
            None => String::new(),
        }
    }

    /// For a derived function `ir`: the tangent functions (full
    /// selection, built here) of the user functions returning f64 or f64[] of some
    /// f64 or f64[] parameter that it calls. Reverse mode leaves such a
    /// call as it is when it is inactive (`f` for the value in a rule's
    /// `f.fwd`; a function of `f`'s parameters in the rule function's pair,
    /// which is taken with respect to the tangents only), but second-order
    /// modes need its tangent: there, the derivative of the rule along
    /// `f`'s parameters. (Elsewhere an inactive call's arguments have zero
    /// tangents, and so has its result.)
    pub(crate) fn user_call_tangents(
        &mut self,
        ir: &Function,
    ) -> Result<Vec<(FuncId, FuncId)>, AdError> {
        let mut out: Vec<(FuncId, FuncId)> = Vec::new();
        let nfuncs = self.module.funcs.len();
        for inst in ir.blocks.iter().flat_map(|b| &b.insts) {
            let Some(g) = inst.callee else { continue };
            if inst.op != Op::Call || g.index() >= nfuncs || out.iter().any(|(h, _)| *h == g) {
                continue;
            }
            let func = self.module.func(g);
            let wrt = crate::analysis::all_params(func);
            if !matches!(func.ret, RetType::One(Type::F64 | Type::Arr)) || !wrt.iter().any(|w| *w) {
                continue;
            }
            let id = self.derive_jvp(g, &wrt)?;
            out.push((g, id));
        }
        Ok(out)
    }
}
