//! The checker of register code: the text of derived and hand-written IR
//! that is not SSA ([`crate::Code::Register`]).
//!
//! Register code is what the AD stage writes and what
//! [`crate::print_module`] prints of it: a register may be written many
//! times (accumulators, a loop's counter), read before any write (it starts
//! at zero), and every opcode of the IR may appear, those only the AD stage
//! writes included (`acc`, `comms.pop`, `call.acc`, `ret.n`, `blk.pop`, ...),
//! by its table mnemonic. So this checker, unlike [`crate::check`], checks
//! no single assignment and no dominance, and finds a register's type from
//! every place it appears (a `comms.pop` result is typed by its readers):
//! the operands an opcode requires to have one type are one class of a
//! union-find, typed by the table's fixed types, else by literals, else
//! (nothing reads or writes it as a type: a value popped and never read)
//! f64, which any 64 bits are to a pop, a push and a copy. What it
//! leaves to decide, the VM's verifier decides on the lowered code
//! ([`crate::assemble_with`]). Opcodes only the lowering makes are not IR:
//! they are rejected with a message that says so.

use crate::check::{
    def_ty, family, lit_type, literal_arg, literal_mismatch, plural, Arg, CBlock, CInst, CPhi,
    CTerm, CValue, CheckedFn, Family,
};
use crate::diag::{Diagnostic, Sink, Span};
use crate::parser::{Body, FuncAst, Line, Lit, Name, Operand};
use hashbrown::HashMap;
use vm::ir::{Loc, RetType};
use vm::op::{Op, Operand as Kind, Origin, Ty};
use vm::Type;

/// The family of a mnemonic of register code: the user's mnemonics, and
/// the opcodes only the AD stage writes by their table mnemonic (`call.acc`
/// and `call.n` have their own syntax, read by the parser).
fn reg_family(m: &str) -> Option<Family> {
    static AD: std::sync::OnceLock<HashMap<&'static str, Family>> = std::sync::OnceLock::new();
    family(m).or_else(|| {
        AD.get_or_init(|| {
            Op::ALL
                .iter()
                .filter(|op| op.facts().origin == Origin::Ad)
                .filter(|op| !matches!(op, Op::CallAcc | Op::CallN | Op::RetN | Op::BlkPop))
                .map(|&op| {
                    let any = op
                        .operands()
                        .iter()
                        .any(|k| matches!(k, Kind::Def(Ty::T) | Kind::Use(Ty::T)));
                    let fam = if any {
                        Family::Any(op)
                    } else {
                        Family::Fixed(op)
                    };
                    (op.mnemonic(), fam)
                })
                .collect()
        })
        .get(m)
        .copied()
    })
}

/// The message for a mnemonic register code does not know: bytecode
/// opcodes (fused and batched forms, fused branches) are not IR.
fn unknown_message(m: &str) -> String {
    let bytecode = Op::ALL.iter().any(|op| {
        op.mnemonic() == m && matches!(op.facts().origin, Origin::Lowering | Origin::Control)
    });
    if bytecode {
        format!("`{m}` is made only by the lowering: bytecode has it, IR does not")
    } else {
        format!("unknown instruction `{m}`")
    }
}

/// A function's signature as far as its header parsed.
struct RSig {
    params: Vec<Option<Type>>,
    /// `None` if the header is broken (reported).
    ret: Option<RetType>,
}

fn ret_type(f: &FuncAst) -> Option<RetType> {
    if let Some(ts) = &f.many {
        return Some(RetType::Many(ts.clone()));
    }
    if f.no_result {
        return Some(RetType::Unit);
    }
    f.ret.map(RetType::One)
}

/// Check every function of register code; `None` for those with errors
/// (all reported).
pub(crate) fn check_module(funcs: &[FuncAst], sink: &mut Sink) -> Vec<Option<CheckedFn>> {
    let mut by_name: HashMap<&str, u32> = HashMap::new();
    for (i, f) in funcs.iter().enumerate() {
        if f.name.text.is_empty() {
            continue;
        }
        if by_name.contains_key(f.name.text.as_str()) {
            let msg = format!("function `@{}` is already defined", f.name.text);
            sink.error(f.name.span, msg);
        } else {
            by_name.insert(f.name.text.as_str(), i as u32);
        }
    }
    let sigs: Vec<RSig> = funcs
        .iter()
        .map(|f| RSig {
            params: f.params.iter().map(|p| p.ty).collect(),
            ret: if f.header_ok { ret_type(f) } else { None },
        })
        .collect();
    let names: Vec<&str> = by_name.keys().copied().collect();
    funcs
        .iter()
        .map(|f| {
            let before = sink.len();
            let mut c = RegChecker {
                f,
                sigs: &sigs,
                by_name: &by_name,
                names: &names,
                sink,
                regs: HashMap::new(),
                vals: Vec::new(),
                parent: Vec::new(),
                class_ty: Vec::new(),
                class_lit: Vec::new(),
                tys: Vec::new(),
                labels: HashMap::new(),
            };
            let out = c.check();
            out.filter(|_| c.sink.len() == before)
        })
        .collect()
}

/// An operand's place in a type class: a register or a literal's type.
#[derive(Clone, Copy)]
enum Member {
    Reg(u32),
    Lit(Type),
}

struct RegChecker<'a, 's> {
    f: &'a FuncAst,
    sigs: &'a [RSig],
    by_name: &'a HashMap<&'a str, u32>,
    names: &'a [&'a str],
    sink: &'s mut Sink,
    regs: HashMap<&'a str, u32>,
    /// Every register: its name and where it first appears.
    vals: Vec<(&'a str, Span)>,
    /// The union-find of registers that must have one type.
    parent: Vec<u32>,
    /// Per class root: the type an opcode fixes.
    class_ty: Vec<Option<Type>>,
    /// Per class root: the type its literals suggest (f64 over i64).
    class_lit: Vec<Option<Type>>,
    /// Every register's type, once inferred.
    tys: Vec<Option<Type>>,
    labels: HashMap<&'a str, u32>,
}

impl<'a> RegChecker<'a, '_> {
    fn error(&mut self, span: Span, msg: impl Into<String>) {
        self.sink.error(span, msg);
    }

    fn check(&mut self) -> Option<CheckedFn> {
        let f = self.f;
        for p in &f.params {
            if self.regs.contains_key(p.name.text.as_str()) {
                let msg = format!("parameter `%{}` is already defined", p.name.text);
                self.error(p.name.span, msg);
            }
            self.intern(&p.name);
        }
        for (bi, b) in f.blocks.iter().enumerate() {
            if let Some(l) = &b.label {
                if self.labels.insert(l.text.as_str(), bi as u32).is_some() {
                    let msg = format!("block label `{}` is already defined", l.text);
                    self.error(l.span, msg);
                }
            }
        }
        if f.blocks.is_empty() && f.header_ok {
            let msg = format!("function `@{}` has no blocks", f.name.text);
            self.error(f.name.span, msg);
        }
        for line in f.blocks.iter().flat_map(|b| &b.lines) {
            if let Some(d) = &line.dst {
                self.intern(d);
            }
            for o in operands(line) {
                if let Operand::Reg(n) = o {
                    self.intern(n);
                }
            }
        }
        self.infer();
        let blocks: Vec<Option<CBlock>> = f.blocks.iter().map(|b| self.block(b)).collect();
        let values = self
            .vals
            .iter()
            .zip(&self.tys)
            .map(|((name, _), t)| {
                Some(CValue {
                    name: name.to_string(),
                    ty: (*t)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        if values.len() > crate::check::MAX_VALUES {
            let msg = format!(
                "function `@{}` has {} registers; at most {} are allowed",
                f.name.text,
                values.len(),
                crate::check::MAX_VALUES
            );
            self.error(f.name.span, msg);
            return None;
        }
        Some(CheckedFn {
            name: f.name.text.clone(),
            n_params: f.params.len(),
            ret: ret_type(f).filter(|_| f.header_ok)?,
            values,
            blocks: blocks.into_iter().collect::<Option<Vec<_>>>()?,
            loc: f.loc,
        })
    }

    fn intern(&mut self, n: &'a Name) -> u32 {
        if let Some(&v) = self.regs.get(n.text.as_str()) {
            return v;
        }
        let v = self.vals.len() as u32;
        self.regs.insert(n.text.as_str(), v);
        self.vals.push((n.text.as_str(), n.span));
        v
    }

    // ---- types ------------------------------------------------------------------

    fn find(&mut self, mut v: u32) -> u32 {
        while let Some(&p) = self.parent.get(v as usize) {
            if p == v {
                break;
            }
            let gp = self.parent[p as usize];
            self.parent[v as usize] = gp;
            v = gp;
        }
        v
    }

    fn member(&self, o: &Operand) -> Option<Member> {
        match o {
            Operand::Reg(n) => self.regs.get(n.text.as_str()).map(|&v| Member::Reg(v)),
            Operand::Lit { lit, .. } => Some(Member::Lit(lit_type(*lit))),
            Operand::Bad(_) => None,
        }
    }

    /// Put the members in one class, of type `fixed` if given.
    fn unify(&mut self, fixed: Option<Type>, members: &[Member]) {
        let mut root: Option<u32> = None;
        let mut lit: Option<Type> = None;
        for m in members {
            match *m {
                Member::Reg(v) => {
                    let r = self.find(v);
                    match root {
                        None => root = Some(r),
                        Some(r0) if r0 != r => {
                            self.parent[r as usize] = r0;
                            let (t, l) = (self.class_ty[r as usize], self.class_lit[r as usize]);
                            let slot = &mut self.class_ty[r0 as usize];
                            *slot = slot.or(t);
                            let slot = &mut self.class_lit[r0 as usize];
                            *slot = prefer(*slot, l);
                        }
                        Some(_) => {}
                    }
                }
                Member::Lit(t) => lit = prefer(lit, Some(t)),
            }
        }
        if let Some(r) = root {
            let slot = &mut self.class_ty[r as usize];
            *slot = slot.or(fixed);
            let slot = &mut self.class_lit[r as usize];
            *slot = prefer(*slot, lit);
        }
    }

    /// The type classes of one line's operands.
    fn constrain(&mut self, line: &'a Line) {
        let dst = line
            .dst
            .as_ref()
            .and_then(|d| self.regs.get(d.text.as_str()).copied());
        let dst = dst.map(Member::Reg);
        match &line.body {
            Body::Op(args) => {
                let Some(fam) = reg_family(&line.mnemonic.text) else {
                    return;
                };
                let ms: Vec<Option<Member>> = args.iter().map(|a| self.member(a)).collect();
                match fam {
                    Family::Num(f, i) => {
                        let all: Vec<Member> = ms.iter().flatten().copied().collect();
                        if def_ty(f) == def_ty(i) {
                            self.unify(None, &all);
                            self.unify(def_ty(f).and_then(Ty::fixed), dst.as_slice());
                        } else {
                            let mut all = all;
                            all.extend(dst);
                            self.unify(None, &all);
                        }
                    }
                    Family::Fixed(op) | Family::Any(op) => {
                        let mut t_group: Vec<Member> = Vec::new();
                        let mut k = 0;
                        for kind in op.operands() {
                            let (m, ty) = match kind {
                                Kind::Def(t) => (dst, *t),
                                Kind::Use(t) | Kind::InOut(t) => {
                                    k += 1;
                                    (ms.get(k - 1).copied().flatten(), *t)
                                }
                                _ => continue,
                            };
                            let Some(m) = m else { continue };
                            match ty.fixed() {
                                Some(t) => self.unify(Some(t), &[m]),
                                None => t_group.push(m),
                            }
                        }
                        self.unify(None, &t_group);
                    }
                }
            }
            Body::Phi(arms) => {
                let mut all: Vec<Member> =
                    arms.iter().filter_map(|a| self.member(&a.value)).collect();
                all.extend(dst);
                self.unify(None, &all);
            }
            Body::Call { callee, args } => {
                let Some(sig) = self.sig(callee) else { return };
                let params = sig.params.clone();
                let carrier = sig.ret.as_ref().and_then(RetType::carrier);
                for (a, t) in args.iter().zip(params) {
                    if let Some(m) = self.member(a) {
                        self.unify(t, &[m]);
                    }
                }
                self.unify(carrier, dst.as_slice());
            }
            Body::CallInto { callee, args, into } => {
                let Some(sig) = self.sig(callee) else { return };
                let params = sig.params.clone();
                let rets = match &sig.ret {
                    Some(RetType::Many(ts)) => ts.clone(),
                    _ => Vec::new(),
                };
                for (a, t) in args.iter().zip(params) {
                    if let Some(m) = self.member(a) {
                        self.unify(t, &[m]);
                    }
                }
                for (a, t) in into.iter().zip(rets) {
                    if let Some(m) = self.member(a) {
                        self.unify(Some(t), &[m]);
                    }
                }
            }
            Body::Br { cond, .. } => {
                if let Some(m) = self.member(cond) {
                    self.unify(Some(Type::Bool), &[m]);
                }
            }
            Body::Ret(Some(v)) => {
                let t = match ret_type(self.f) {
                    Some(RetType::One(t)) => Some(t),
                    _ => None,
                };
                if let Some(m) = self.member(v) {
                    self.unify(t, &[m]);
                }
            }
            Body::RetN(vs) => {
                let ts = match ret_type(self.f) {
                    Some(RetType::Many(ts)) => ts,
                    _ => Vec::new(),
                };
                for (v, t) in vs.iter().zip(ts) {
                    if let Some(m) = self.member(v) {
                        self.unify(Some(t), &[m]);
                    }
                }
            }
            Body::Ret(None) | Body::Jmp(_) | Body::BlkPop(_) | Body::Broken => {}
        }
    }

    fn sig(&self, callee: &Name) -> Option<&'a RSig> {
        let sigs = self.sigs;
        self.by_name
            .get(callee.text.as_str())
            .and_then(|&i| sigs.get(i as usize))
    }

    /// Every register's type: its class's fixed type, else the type its
    /// literals suggest, else an error.
    fn infer(&mut self) {
        let n = self.vals.len();
        self.parent = (0..n as u32).collect();
        self.class_ty = vec![None; n];
        self.class_lit = vec![None; n];
        for (i, p) in self.f.params.iter().enumerate() {
            if let Some(&v) = self.regs.get(p.name.text.as_str()) {
                if v as usize == i {
                    self.unify(p.ty, &[Member::Reg(v)]);
                }
            }
        }
        let f = self.f;
        for line in f.blocks.iter().flat_map(|b| &b.lines) {
            self.constrain(line);
        }
        // A class nothing types (a value popped and never read, a copy of
        // such) may hold any 64 bits: f64, like a cotangent.
        let mut tys = vec![None; n];
        for (v, slot) in tys.iter_mut().enumerate() {
            let r = self.find(v as u32) as usize;
            *slot = Some(self.class_ty[r].or(self.class_lit[r]).unwrap_or(Type::F64));
        }
        // A parameter has its declared type, whatever its class says (a
        // conflict is then reported where the two meet).
        for (v, p) in f.params.iter().enumerate() {
            if let Some(slot) = tys.get_mut(v) {
                *slot = p.ty;
            }
        }
        self.tys = tys;
    }

    // ---- lines ------------------------------------------------------------------

    fn block(&mut self, b: &'a crate::parser::BlockAst) -> Option<CBlock> {
        let name = b.label.as_ref().map_or("", |l| l.text.as_str());
        let mut phis = Vec::new();
        let mut insts = Vec::new();
        let mut term = None;
        let mut ok = true;
        for line in &b.lines {
            if term.is_some() {
                let msg = format!("instruction after the terminator of block `{name}`");
                self.error(line.span, msg);
                return None;
            }
            match &line.body {
                Body::Broken => ok = false,
                Body::Phi(_) if !insts.is_empty() => {
                    self.error(
                        line.mnemonic.span,
                        "`phi` must come before the other instructions of its block",
                    );
                    ok = false;
                }
                Body::Phi(arms) => match self.phi(line, arms) {
                    Some(p) => phis.push(p),
                    None => ok = false,
                },
                b if b.is_terminator() => match self.term(line) {
                    Some(t) => term = Some((t, line.loc)),
                    None => ok = false,
                },
                _ => match self.inst(line) {
                    Some(i) => insts.push(i),
                    None => ok = false,
                },
            }
        }
        let Some((term, term_loc)) = term else {
            if ok {
                let msg = format!("block `{name}` does not end with a terminator");
                self.error(b.span, msg);
            }
            return None;
        };
        ok.then(|| CBlock {
            name: name.to_string(),
            phis,
            insts,
            term,
            term_loc,
        })
    }

    fn reg_ty(&self, n: &Name) -> Option<Type> {
        let v = *self.regs.get(n.text.as_str())?;
        self.tys.get(v as usize).copied().flatten()
    }

    /// One operand as an argument of type `exp` (`None`: its type was not
    /// inferred, already reported).
    fn arg(&mut self, o: &Operand, exp: Option<Type>, what: &str) -> Option<Arg> {
        match o {
            Operand::Reg(n) => {
                let v = *self.regs.get(n.text.as_str())?;
                let t = self.reg_ty(n)?;
                match exp {
                    Some(e) if e != t => {
                        let msg = format!("expected {e}{what}, found `%{}` of type {t}", n.text);
                        self.error(n.span, msg);
                        None
                    }
                    _ => Some(Arg::Val(v)),
                }
            }
            Operand::Lit { lit, text, span } => {
                let exp = exp?;
                let arg = literal_arg(*lit, exp);
                if arg.is_none() {
                    let msg = literal_mismatch(*lit, text, exp, what);
                    self.error(*span, msg);
                }
                arg
            }
            Operand::Bad(_) => None,
        }
    }

    /// The destination register, checked against the type `exp`.
    fn dst(&mut self, line: &Line, exp: Option<Type>, produces: bool) -> Result<Option<u32>, ()> {
        let m = &line.mnemonic;
        match (&line.dst, produces) {
            (None, true) => {
                let msg = format!(
                    "the result of `{}` must be assigned to a register: `%name = {} ...`",
                    m.text, m.text
                );
                self.error(m.span, msg);
                Err(())
            }
            (Some(d), false) => {
                let msg = format!(
                    "`{}` does not produce a value; remove `%{} =`",
                    m.text, d.text
                );
                self.error(d.span, msg);
                Err(())
            }
            (None, false) => Ok(None),
            (Some(d), true) => {
                let v = self.regs.get(d.text.as_str()).copied().ok_or(())?;
                let t = self.reg_ty(d).ok_or(())?;
                match exp {
                    Some(e) if e != t => {
                        let msg = format!("expected {e}, found `%{}` of type {t}", d.text);
                        self.error(d.span, msg);
                        Err(())
                    }
                    _ => Ok(Some(v)),
                }
            }
        }
    }

    fn phi(&mut self, line: &'a Line, arms: &'a [crate::parser::PhiArm]) -> Option<CPhi> {
        let dst = self.dst(line, None, true).ok()??;
        let ty = self.tys.get(dst as usize).copied().flatten();
        let mut incoming = Vec::new();
        let mut ok = true;
        for arm in arms {
            let pred = self.label(&arm.label);
            match (pred, self.arg(&arm.value, ty, "")) {
                (Some(p), Some(a)) => incoming.push((p, a)),
                _ => ok = false,
            }
        }
        ok.then_some(CPhi {
            dst,
            incoming,
            loc: line.loc,
        })
    }

    fn label(&mut self, l: &Name) -> Option<u32> {
        let t = self.labels.get(l.text.as_str()).copied();
        if t.is_none() {
            self.error(l.span, format!("unknown block label `{}`", l.text));
        }
        t
    }

    fn callee(&mut self, callee: &Name) -> Option<(u32, &'a RSig)> {
        let Some(&fi) = self.by_name.get(callee.text.as_str()) else {
            let near = crate::diag::closest(&callee.text, self.names.iter().copied());
            self.error(
                callee.span,
                Diagnostic::unknown_function_message(&callee.text, near),
            );
            return None;
        };
        let sig = self.sigs.get(fi as usize)?;
        Some((fi, sig))
    }

    fn args_of(
        &mut self,
        callee: &Name,
        args: &[Operand],
        params: &[Option<Type>],
    ) -> Option<Vec<Arg>> {
        if args.len() != params.len() {
            let msg = format!(
                "`@{}` takes {}, found {}",
                callee.text,
                plural(params.len(), "argument"),
                args.len()
            );
            self.error(callee.span, msg);
            return None;
        }
        let checked: Vec<Option<Arg>> = args
            .iter()
            .zip(params)
            .enumerate()
            .map(|(i, (a, t))| {
                let what = format!(" (parameter {} of `@{}`)", i + 1, callee.text);
                self.arg(a, *t, &what)
            })
            .collect();
        checked.into_iter().collect()
    }

    fn inst(&mut self, line: &'a Line) -> Option<CInst> {
        match &line.body {
            Body::Op(args) => self.op(line, args),
            Body::Call { callee, args } => {
                let (fi, sig) = self.callee(callee)?;
                let (ret, params) = (sig.ret.clone()?, &sig.params);
                let dst = self.dst(line, ret.carrier(), ret != RetType::Unit).ok()?;
                let args = self.args_of(callee, args, params)?;
                if matches!(ret, RetType::Many(_)) {
                    let msg = format!(
                        "`@{}` returns several values: call it with `call.acc` or `call.n`",
                        callee.text
                    );
                    self.error(callee.span, msg);
                    return None;
                }
                Some(CInst {
                    op: Op::Call,
                    dst,
                    args,
                    callee: Some(fi),
                    imm: 0,
                    accs: Vec::new(),
                    loc: line.loc,
                })
            }
            Body::CallInto { callee, args, into } => {
                let op = if line.mnemonic.text == "call.acc" {
                    Op::CallAcc
                } else {
                    Op::CallN
                };
                self.dst(line, None, false).ok()?;
                let (fi, sig) = self.callee(callee)?;
                let (ret, params) = (sig.ret.clone()?, &sig.params);
                let args = self.args_of(callee, args, params)?;
                let RetType::Many(ts) = ret else {
                    let msg = format!(
                        "`{}` calls a function that returns several values; `@{}` does not",
                        line.mnemonic.text, callee.text
                    );
                    self.error(callee.span, msg);
                    return None;
                };
                if ts.len() != into.len() {
                    let msg = format!(
                        "`@{}` returns {}, found {}",
                        callee.text,
                        plural(ts.len(), "value"),
                        into.len()
                    );
                    self.error(callee.span, msg);
                    return None;
                }
                let mut accs = Vec::new();
                for (o, t) in into.iter().zip(ts) {
                    match (o, self.arg(o, Some(t), "")) {
                        (Operand::Reg(_), Some(Arg::Val(v))) => accs.push(v),
                        (Operand::Lit { span, .. }, Some(_)) => {
                            self.error(*span, "expected a register, found a literal");
                            return None;
                        }
                        _ => return None,
                    }
                }
                Some(CInst {
                    op,
                    dst: None,
                    args,
                    callee: Some(fi),
                    imm: 0,
                    accs,
                    loc: line.loc,
                })
            }
            _ => None,
        }
    }

    fn op(&mut self, line: &'a Line, args: &'a [Operand]) -> Option<CInst> {
        let m = &line.mnemonic;
        let Some(fam) = reg_family(&m.text) else {
            self.error(m.span, unknown_message(&m.text));
            return None;
        };
        let op = match fam {
            Family::Fixed(op) | Family::Any(op) => op,
            Family::Num(f, i) => {
                let t = args
                    .iter()
                    .find_map(|a| match a {
                        Operand::Reg(n) => self.reg_ty(n),
                        _ => None,
                    })
                    .or_else(|| {
                        args.iter().fold(None, |acc, a| match a {
                            Operand::Lit { lit, .. } => prefer(acc, Some(lit_type(*lit))),
                            _ => acc,
                        })
                    });
                match t {
                    Some(Type::F64) => f,
                    Some(Type::I64) => i,
                    Some(t) => {
                        let msg = format!("`{}` needs f64 or i64 operands, found {t}", m.text);
                        self.error(m.span, msg);
                        return None;
                    }
                    None => return None,
                }
            }
        };
        let kinds = op.operands();
        let n_args = kinds
            .iter()
            .filter(|k| matches!(k, Kind::Use(_) | Kind::InOut(_) | Kind::Imm))
            .count();
        if args.len() != n_args {
            let msg = format!(
                "`{}` takes {}, found {}",
                m.text,
                plural(n_args, "operand"),
                args.len()
            );
            self.error(m.span, msg);
            return None;
        }
        // The type of the `T` operands: the first register's, else a
        // literal's.
        let mut t_ty: Option<Type> = None;
        let mut k = 0;
        for kind in kinds {
            match kind {
                Kind::Def(Ty::T) => {
                    if let Some(d) = &line.dst {
                        t_ty = t_ty.or(self.reg_ty(d));
                    }
                }
                Kind::Use(Ty::T) | Kind::InOut(Ty::T) => {
                    if let Some(Operand::Reg(n)) = args.get(k) {
                        t_ty = t_ty.or(self.reg_ty(n));
                    }
                    k += 1;
                }
                Kind::Use(_) | Kind::InOut(_) | Kind::Imm => k += 1,
                _ => {}
            }
        }
        if t_ty.is_none() {
            let mut k = 0;
            for kind in kinds {
                match kind {
                    Kind::Use(Ty::T) | Kind::InOut(Ty::T) => {
                        if let Some(Operand::Lit { lit, .. }) = args.get(k) {
                            t_ty = prefer(t_ty, Some(lit_type(*lit)));
                        }
                        k += 1;
                    }
                    Kind::Use(_) | Kind::InOut(_) | Kind::Imm => k += 1,
                    _ => {}
                }
            }
        }
        let def = def_ty(op);
        let dst = self
            .dst(line, def.and_then(|t| t.fixed().or(t_ty)), def.is_some())
            .ok()?;
        let mut out = Vec::new();
        let mut imm = 0;
        let mut ok = true;
        let mut k = 0;
        for kind in kinds {
            let ty = match kind {
                Kind::Use(t) | Kind::InOut(t) => *t,
                Kind::Imm => {
                    match args.get(k) {
                        Some(Operand::Lit {
                            lit: Lit::Int(n), ..
                        }) if u32::try_from(*n).is_ok() => imm = *n as u32,
                        Some(a) => {
                            let span = match a {
                                Operand::Reg(n) => n.span,
                                Operand::Lit { span, .. } | Operand::Bad(span) => *span,
                            };
                            let msg = format!(
                                "`{}` takes an integer literal from 0 to {}",
                                m.text,
                                u32::MAX
                            );
                            self.error(span, msg);
                            ok = false;
                        }
                        None => ok = false,
                    }
                    k += 1;
                    continue;
                }
                _ => continue,
            };
            let a = args.get(k)?;
            k += 1;
            match self.arg(a, ty.fixed().or(t_ty), "") {
                Some(arg) => {
                    if matches!(kind, Kind::InOut(_)) && !matches!(a, Operand::Reg(_)) {
                        let msg =
                            format!("`{}` writes this operand: it must be a register", m.text);
                        self.error(line.span, msg);
                        ok = false;
                    }
                    out.push(arg);
                }
                None => ok = false,
            }
        }
        ok.then_some(CInst {
            op,
            dst,
            args: out,
            callee: None,
            imm,
            accs: Vec::new(),
            loc: line.loc,
        })
    }

    fn term(&mut self, line: &'a Line) -> Option<CTerm> {
        self.dst(line, None, false).ok()?;
        let ret = ret_type(self.f);
        let name = &self.f.name.text;
        match &line.body {
            Body::Jmp(l) => Some(CTerm::Jmp(self.label(l)?)),
            Body::Br { cond, then_, else_ } => {
                let cond = self.arg(cond, Some(Type::Bool), " (the branch condition)");
                let (t, e) = (self.label(then_), self.label(else_));
                Some(CTerm::Br {
                    cond: cond?,
                    then_: t?,
                    else_: e?,
                })
            }
            Body::Ret(v) => match (ret?, v) {
                (RetType::Unit, None) => Some(CTerm::Ret(None)),
                (RetType::One(t), Some(v)) => {
                    let what = format!(" (the return type of `@{name}`)");
                    Some(CTerm::Ret(Some(self.arg(v, Some(t), &what)?)))
                }
                _ => {
                    let msg = format!("this `ret` does not fit the results of `@{name}`");
                    self.error(line.mnemonic.span, msg);
                    None
                }
            },
            Body::RetN(vs) => {
                let Some(RetType::Many(ts)) = ret else {
                    let msg = format!("`ret.n` in `@{name}`, which does not return several values");
                    self.error(line.mnemonic.span, msg);
                    return None;
                };
                if ts.len() != vs.len() {
                    let msg = format!(
                        "`@{name}` returns {}, found {}",
                        plural(ts.len(), "value"),
                        vs.len()
                    );
                    self.error(line.mnemonic.span, msg);
                    return None;
                }
                let args: Vec<Option<Arg>> = vs
                    .iter()
                    .zip(ts)
                    .map(|(v, t)| self.arg(v, Some(t), ""))
                    .collect();
                Some(CTerm::RetN(args.into_iter().collect::<Option<_>>()?))
            }
            Body::BlkPop(ls) => {
                let ts: Vec<Option<u32>> = ls.iter().map(|l| self.label(l)).collect();
                Some(CTerm::BlkPop(ts.into_iter().collect::<Option<_>>()?))
            }
            _ => None,
        }
    }
}

/// The operands of a line, in text order.
fn operands(line: &Line) -> Vec<&Operand> {
    match &line.body {
        Body::Phi(arms) => arms.iter().map(|a| &a.value).collect(),
        Body::Call { args, .. } | Body::Op(args) | Body::RetN(args) => args.iter().collect(),
        Body::CallInto { args, into, .. } => args.iter().chain(into).collect(),
        Body::Br { cond, .. } => vec![cond],
        Body::Ret(Some(v)) => vec![v],
        Body::Ret(None) | Body::Jmp(_) | Body::BlkPop(_) | Body::Broken => Vec::new(),
    }
}

/// Of two literal types, f64 over i64 (so `add 1, 2.0` asks for `1.0`),
/// else the first.
fn prefer(a: Option<Type>, b: Option<Type>) -> Option<Type> {
    match (a, b) {
        (None, b) => b,
        (Some(Type::I64), Some(Type::F64)) => Some(Type::F64),
        (a, _) => a,
    }
}

/// A `Loc` of the source as a byte span (for errors the verifier reports
/// at an instruction).
pub(crate) fn span_at(src: &str, loc: Loc) -> Option<Span> {
    let line_start = if loc.line <= 1 {
        0
    } else {
        src.match_indices('\n')
            .nth(loc.line as usize - 2)
            .map(|(i, _)| i + 1)?
    };
    let rest = src.get(line_start..)?;
    let col = rest
        .char_indices()
        .nth(loc.col.saturating_sub(1) as usize)
        .map_or(rest.len(), |(i, _)| i);
    Some(Span::new(line_start + col, line_start + col))
}
