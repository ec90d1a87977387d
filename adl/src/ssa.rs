//! SSA construction: typed functions to the IR the assembler builds
//! ([`vm::ir::Module`]), with phis placed by the algorithm of Braun, Buchwald,
//! Hack, Leißa, Mallon and Zwinkau, "Simple and Efficient Construction of
//! Static Single Assignment Form" (CC 2013).
//!
//! * Each variable's current value is recorded per block (`write`); a read
//!   (`read`) looks in the block, then in its predecessors: through a
//!   single predecessor directly, at a join through a new phi.
//! * A block is *sealed* once all its predecessors are known (a loop
//!   header after its body); a read in an unsealed block makes an
//!   incomplete phi whose operands are filled in when it is sealed.
//! * A phi whose operands are all one value (or the phi itself) is
//!   trivial and replaced by that value, when it is completed and again in
//!   a final pass until none is left; phis nothing reads are removed too.
//!   The control flow of `.adl` is structured, hence reducible, so what
//!   remains is minimal SSA.
//!
//! Naming: a value assigned to a variable gets the variable's name (`r`),
//! later ones a suffix (`r.1`, `r.2`, ...; `.adl` names cannot contain a
//! dot, so these never collide with a user's name); temporaries are
//! unnamed. Every instruction carries the `.adl` line and column of its
//! operator, call or statement.

use crate::diag::Lines;
use crate::types::{TExpr, TFunc, TKind, TStmt, Var, VarId};
use assembler::Span;
use hashbrown::HashMap;
use vm::ir::{Block, BlockId, FuncId, Function, Inst, Loc, Phi, RetType, Term, ValueId};
use vm::op::{Op, Operand};
use vm::Type;

/// A problem found while building (only an internal error or a function
/// too large for the bytecode): where and what.
pub type Problem = (Span, String);

/// Build one function; its calls name functions by the checker's indices,
/// which are the module's (the file's functions, then those it calls from
/// elsewhere).
pub fn build(f: &TFunc, lines: &Lines<'_>) -> Result<Function, Problem> {
    let mut b = Builder {
        f: Function {
            name: f.name.clone(),
            params: Vec::new(),
            ret: f.ret.map_or(RetType::Unit, RetType::One),
            values: Vec::new(),
            blocks: Vec::new(),
            loc: lines.loc(f.span.start),
        },
        lines,
        vars: &f.vars,
        info: Vec::new(),
        defs: HashMap::new(),
        cur: None,
        consts: HashMap::new(),
        names: HashMap::new(),
        labels: HashMap::new(),
        replaced: HashMap::new(),
        phi_at: HashMap::new(),
        loops: Vec::new(),
        broken: None,
        order: Vec::new(),
    };
    let entry = b.new_block("entry", f.span);
    b.seal(entry);
    b.set_cur(entry);
    for &p in &f.params {
        let var = &f.vars[p as usize];
        let name = b.fresh(&var.name);
        let v = b.f.new_value(var.ty, Some(name));
        b.f.params.push(v);
        b.write(p, entry, v);
    }
    b.stmts(&f.body);
    if let Some(cur) = b.cur {
        if f.ret.is_some() {
            b.internal(f.close, "a function with a result reaches its end");
        }
        let zero = b.konst(Type::I64, 0);
        b.terminate(cur, Term::Ret(zero), f.close);
    }
    if b.info
        .iter()
        .enumerate()
        .any(|(i, info)| (i == 0 || !info.preds.is_empty()) && !info.terminated)
    {
        b.internal(f.close, "a block without a terminator");
    }
    if let Some(p) = b.broken.take() {
        return Err(p);
    }
    let func = b.finish();
    if func.values.len() > assembler::MAX_VALUES {
        return Err((
            f.span,
            format!(
                "function `{}` is too large: {} values, at most {} are supported",
                f.name,
                func.values.len(),
                assembler::MAX_VALUES
            ),
        ));
    }
    Ok(func)
}

struct BlockInfo {
    preds: Vec<BlockId>,
    sealed: bool,
    terminated: bool,
    incomplete: Vec<(VarId, ValueId)>,
    loc: Loc,
}

/// The targets of `continue` and `break` in the innermost loop. A `for`
/// loop's `continue` target (the block that steps the counter) is made on
/// the first `continue`.
struct LoopTargets {
    cont: Option<BlockId>,
    exit: BlockId,
}

struct Builder<'a> {
    f: Function,
    lines: &'a Lines<'a>,
    vars: &'a [Var],
    info: Vec<BlockInfo>,
    defs: HashMap<(VarId, BlockId), ValueId>,
    cur: Option<BlockId>,
    consts: HashMap<(Type, u64), ValueId>,
    /// The next suffix of each value name.
    names: HashMap<String, u32>,
    labels: HashMap<&'static str, u32>,
    /// Trivial phis and the values that replace them.
    replaced: HashMap<ValueId, ValueId>,
    /// Each phi's block and index in its phi list.
    phi_at: HashMap<ValueId, (BlockId, usize)>,
    loops: Vec<LoopTargets>,
    /// The first internal error, if any.
    broken: Option<Problem>,
    /// Blocks in the order code was first placed in them: the layout.
    order: Vec<BlockId>,
}

impl Builder<'_> {
    fn internal(&mut self, span: Span, what: &str) {
        if self.broken.is_none() {
            self.broken = Some((span, format!("internal error: {what}")));
        }
    }

    fn loc(&self, span: Span) -> Loc {
        self.lines.loc(span.start)
    }

    /// `base`, then `base.1`, `base.2`, ...
    fn fresh(&mut self, base: &str) -> String {
        let n = self.names.entry(base.to_string()).or_insert(0);
        let name = if *n == 0 {
            base.to_string()
        } else {
            format!("{base}.{n}")
        };
        *n += 1;
        name
    }

    /// A phi removed as soon as it was completed gives its name back if
    /// no later value took one of the same variable (so that names count
    /// only the values that remain).
    fn give_back_name(&mut self, v: ValueId) {
        let Some(name) = self.f.values.get(v.index()).and_then(|d| d.name.clone()) else {
            return;
        };
        let base = name.split('.').next().unwrap_or(&name).to_string();
        if let Some(n) = self.names.get_mut(&base) {
            let last = match *n {
                0 => return,
                1 => base.clone(),
                k => format!("{base}.{}", k - 1),
            };
            if last == name {
                *n -= 1;
                self.f.values[v.index()].name = None;
            }
        }
    }

    fn new_block(&mut self, label: &'static str, span: Span) -> BlockId {
        let n = self.labels.entry(label).or_insert(0);
        let name = if *n == 0 {
            label.to_string()
        } else {
            format!("{label}.{n}")
        };
        *n += 1;
        let loc = self.loc(span);
        self.f.blocks.push(Block {
            name,
            phis: Vec::new(),
            insts: Vec::new(),
            term: Term::Jmp(BlockId(0)),
            term_loc: loc,
        });
        self.info.push(BlockInfo {
            preds: Vec::new(),
            sealed: false,
            terminated: false,
            incomplete: Vec::new(),
            loc,
        });
        BlockId(self.f.blocks.len() as u32 - 1)
    }

    fn konst(&mut self, ty: Type, bits: u64) -> ValueId {
        if let Some(&v) = self.consts.get(&(ty, bits)) {
            return v;
        }
        let v = self.f.new_const(ty, bits);
        self.consts.insert((ty, bits), v);
        v
    }

    fn terminate(&mut self, b: BlockId, term: Term, span: Span) {
        for s in term.successors() {
            let preds = &mut self.info[s.index()].preds;
            if !preds.contains(&b) {
                preds.push(b);
            }
        }
        let loc = self.loc(span);
        let blk = &mut self.f.blocks[b.index()];
        blk.term = term;
        blk.term_loc = loc;
        self.info[b.index()].terminated = true;
        if self.cur == Some(b) {
            self.cur = None;
        }
    }

    /// End the current block (if code is reachable) with a jump.
    fn jump(&mut self, to: BlockId, span: Span) {
        if let Some(c) = self.cur {
            self.terminate(c, Term::Jmp(to), span);
        }
    }

    /// Continue in `b` if anything reaches it.
    fn enter(&mut self, b: BlockId) {
        if self.info[b.index()].preds.is_empty() {
            self.cur = None;
        } else {
            self.set_cur(b);
        }
    }

    /// Continue in `b`.
    fn set_cur(&mut self, b: BlockId) {
        if !self.order.contains(&b) {
            self.order.push(b);
        }
        self.cur = Some(b);
    }

    // ---- Braun et al.: variables --------------------------------------------

    fn resolve(&self, mut v: ValueId) -> ValueId {
        // Chains are short; a bound keeps a bug from looping.
        for _ in 0..self.f.values.len() + 1 {
            match self.replaced.get(&v) {
                Some(&w) => v = w,
                None => return v,
            }
        }
        v
    }

    fn write(&mut self, var: VarId, b: BlockId, v: ValueId) {
        self.defs.insert((var, b), v);
    }

    fn read(&mut self, var: VarId, b: BlockId) -> ValueId {
        if let Some(&v) = self.defs.get(&(var, b)) {
            return self.resolve(v);
        }
        self.read_recursive(var, b)
    }

    fn read_recursive(&mut self, var: VarId, b: BlockId) -> ValueId {
        let info = &self.info[b.index()];
        let val = if !info.sealed {
            let phi = self.new_phi(var, b, true);
            self.info[b.index()].incomplete.push((var, phi));
            phi
        } else if info.preds.len() == 1 {
            let p = info.preds[0];
            self.read(var, p)
        } else if info.preds.is_empty() {
            self.undefined(var)
        } else {
            // Named only if it stays, so that names count what remains.
            let phi = self.new_phi(var, b, false);
            self.write(var, b, phi);
            let v = self.add_phi_operands(var, phi, b);
            if v == phi {
                let base = self.vars.get(var as usize).map_or("v", |v| v.name.as_str());
                let name = self.fresh(base);
                self.f.values[phi.index()].name = Some(name);
            }
            v
        };
        self.write(var, b, val);
        val
    }

    fn undefined(&mut self, var: VarId) -> ValueId {
        let ty = self.vars.get(var as usize).map_or(Type::I64, |v| v.ty);
        let span = Span::default();
        self.internal(span, "a variable is read where it has no value");
        let ty = if ty == Type::Arr { Type::I64 } else { ty };
        self.konst(ty, 0)
    }

    fn new_phi(&mut self, var: VarId, b: BlockId, named: bool) -> ValueId {
        let vars = self.vars;
        let (ty, base) = vars
            .get(var as usize)
            .map_or((Type::I64, "v"), |v| (v.ty, v.name.as_str()));
        let name = named.then(|| self.fresh(base));
        let v = self.f.new_value(ty, name);
        let loc = self.info[b.index()].loc;
        let phis = &mut self.f.blocks[b.index()].phis;
        phis.push(Phi {
            dst: v,
            incoming: Vec::new(),
            loc,
        });
        self.phi_at.insert(v, (b, phis.len() - 1));
        v
    }

    fn add_phi_operands(&mut self, var: VarId, phi: ValueId, b: BlockId) -> ValueId {
        let preds = self.info[b.index()].preds.clone();
        for p in preds {
            let v = self.read(var, p);
            if let Some(&(blk, i)) = self.phi_at.get(&phi) {
                self.f.blocks[blk.index()].phis[i].incoming.push((p, v));
            }
        }
        self.try_remove_trivial(phi)
    }

    /// The value a trivial phi stands for, or `None` if it is not trivial.
    fn trivial(&self, phi: ValueId) -> Option<Option<ValueId>> {
        let &(b, i) = self.phi_at.get(&phi)?;
        let mut same: Option<ValueId> = None;
        for &(_, op) in &self.f.blocks[b.index()].phis[i].incoming {
            let op = self.resolve(op);
            if op == phi || Some(op) == same {
                continue;
            }
            if same.is_some() {
                return None;
            }
            same = Some(op);
        }
        Some(same)
    }

    fn try_remove_trivial(&mut self, phi: ValueId) -> ValueId {
        match self.trivial(phi) {
            None => phi,
            Some(Some(same)) => {
                self.replaced.insert(phi, same);
                self.give_back_name(phi);
                same
            }
            Some(None) => {
                let var_ty = self.f.ty(phi);
                self.internal(Span::default(), "a phi without operands");
                let ty = if var_ty == Type::Arr {
                    Type::I64
                } else {
                    var_ty
                };
                self.konst(ty, 0)
            }
        }
    }

    fn seal(&mut self, b: BlockId) {
        let incomplete = std::mem::take(&mut self.info[b.index()].incomplete);
        for (var, phi) in incomplete {
            self.add_phi_operands(var, phi, b);
        }
        self.info[b.index()].sealed = true;
    }

    // ---- statements ---------------------------------------------------------

    fn stmts(&mut self, stmts: &[TStmt]) {
        for s in stmts {
            if self.cur.is_none() {
                // Unreachable code (after `return`, `break`, `continue`).
                return;
            }
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &TStmt) {
        let Some(cur) = self.cur else { return };
        match s {
            TStmt::Set(var, e) => {
                let name = self.vars.get(*var as usize).map(|v| v.name.clone());
                let v = self.expr(e, name.as_deref());
                if let Some(c) = self.cur {
                    self.write(*var, c, v);
                }
            }
            TStmt::SetIndex(a, i, e, span) => {
                let a = self.expr(a, None);
                let i = self.expr(i, None);
                let e = self.expr(e, None);
                self.emit(Op::ASet, vec![a, i, e], None, *span, None);
            }
            TStmt::Expr(e) => {
                self.expr(e, None);
            }
            TStmt::Block(body) => self.stmts(body),
            TStmt::If(c, then, els) => self.if_stmt(c, then, els, None),
            TStmt::While(c, body) => {
                let head = self.new_block("head", c.span);
                self.terminate(cur, Term::Jmp(head), c.span);
                self.set_cur(head);
                let body_b = self.new_block("body", c.span);
                let exit = self.new_block("exit", c.span);
                if matches!(c.kind, TKind::Const(1)) {
                    self.terminate(head, Term::Jmp(body_b), c.span);
                } else {
                    self.branch(c, body_b, exit);
                }
                self.seal(body_b);
                self.set_cur(body_b);
                self.loops.push(LoopTargets {
                    cont: Some(head),
                    exit,
                });
                self.stmts(body);
                self.jump(head, c.span);
                self.loops.pop();
                self.seal(head);
                self.seal(exit);
                self.enter(exit);
            }
            TStmt::For {
                var,
                counter,
                lo,
                hi,
                body,
                span,
            } => {
                let lo_v = self.expr(lo, None);
                let hi_v = self.expr(hi, None);
                let Some(pre) = self.cur else { return };
                self.write(*counter, pre, lo_v);
                let head = self.new_block("for", *span);
                self.terminate(pre, Term::Jmp(head), *span);
                self.set_cur(head);
                let i = self.read(*counter, head);
                let c = self.emit(Op::LtI, vec![i, hi_v], Some(Type::Bool), *span, None);
                let body_b = self.new_block("body", *span);
                let exit = self.new_block("exit", *span);
                self.terminate(
                    head,
                    Term::Br {
                        cond: c,
                        then_: body_b,
                        else_: exit,
                    },
                    *span,
                );
                self.seal(body_b);
                self.write(*var, body_b, i);
                self.set_cur(body_b);
                self.loops.push(LoopTargets { cont: None, exit });
                self.stmts(body);
                let targets = self.loops.pop();
                if let Some(next) = targets.and_then(|t| t.cont) {
                    self.jump(next, *span);
                    self.seal(next);
                    self.enter(next);
                }
                if let Some(step_b) = self.cur {
                    let k = self.read(*counter, step_b);
                    let one = self.konst(Type::I64, 1);
                    let name = self.vars.get(*counter as usize).map(|v| v.name.clone());
                    let k2 = self.emit(
                        Op::AddI,
                        vec![k, one],
                        Some(Type::I64),
                        *span,
                        name.as_deref(),
                    );
                    self.write(*counter, step_b, k2);
                    self.jump(head, *span);
                }
                self.seal(head);
                self.seal(exit);
                self.enter(exit);
            }
            TStmt::Break(span) => {
                if let Some(exit) = self.loops.last().map(|l| l.exit) {
                    self.terminate(cur, Term::Jmp(exit), *span);
                }
            }
            TStmt::Continue(span) => {
                let Some(l) = self.loops.last() else { return };
                let target = match l.cont {
                    Some(t) => t,
                    None => {
                        let t = self.new_block("next", *span);
                        if let Some(l) = self.loops.last_mut() {
                            l.cont = Some(t);
                        }
                        t
                    }
                };
                self.terminate(cur, Term::Jmp(target), *span);
            }
            TStmt::Return(e, span) => {
                let v = match e {
                    Some(e) => self.expr(e, None),
                    None => self.konst(Type::I64, 0),
                };
                if let Some(c) = self.cur {
                    self.terminate(c, Term::Ret(v), *span);
                }
            }
        }
    }

    /// `if c { then } else { els }`; an `else if` chain shares the first
    /// `if`'s join block (`join`), so each branch jumps straight to it.
    fn if_stmt(&mut self, c: &TExpr, then: &[TStmt], els: &[TStmt], join: Option<BlockId>) {
        let then_b = self.new_block("then", c.span);
        let own_join = join.is_none();
        let join = match join {
            Some(j) => j,
            None => self.new_block("join", c.span),
        };
        let else_b = if els.is_empty() {
            join
        } else {
            self.new_block("else", c.span)
        };
        self.branch(c, then_b, else_b);
        self.seal(then_b);
        self.set_cur(then_b);
        self.stmts(then);
        self.jump(join, c.span);
        if !els.is_empty() {
            self.seal(else_b);
            self.set_cur(else_b);
            match els {
                [TStmt::If(c2, then2, els2)] => self.if_stmt(c2, then2, els2, Some(join)),
                _ => {
                    self.stmts(els);
                    self.jump(join, c.span);
                }
            }
        }
        if own_join {
            self.seal(join);
            self.enter(join);
        }
    }

    /// Branch on a condition: `&&`, `||` and `!` become control flow
    /// (short-circuit), anything else a value and a `br`.
    fn branch(&mut self, c: &TExpr, t: BlockId, f: BlockId) {
        match &c.kind {
            TKind::And(a, b) => {
                let mid = self.new_block("and", b.span);
                self.branch(a, mid, f);
                self.seal(mid);
                self.set_cur(mid);
                self.branch(b, t, f);
            }
            TKind::Or(a, b) => {
                let mid = self.new_block("or", b.span);
                self.branch(a, t, mid);
                self.seal(mid);
                self.set_cur(mid);
                self.branch(b, t, f);
            }
            TKind::Op(Op::Not, args) if args.len() == 1 => self.branch(&args[0], f, t),
            _ => {
                let v = self.expr(c, None);
                if let Some(cur) = self.cur {
                    self.terminate(
                        cur,
                        Term::Br {
                            cond: v,
                            then_: t,
                            else_: f,
                        },
                        c.span,
                    );
                }
            }
        }
    }

    // ---- expressions --------------------------------------------------------

    /// Emit an instruction; its result (if the opcode has one) is a new
    /// value of type `ty` named `name`.
    fn emit(
        &mut self,
        op: Op,
        args: Vec<ValueId>,
        ty: Option<Type>,
        span: Span,
        name: Option<&str>,
    ) -> ValueId {
        let has_def = op.operands().iter().any(|o| matches!(o, Operand::Def(_)));
        let dst = has_def.then(|| {
            let name = name.map(|n| self.fresh(n));
            self.f.new_value(ty.unwrap_or(Type::I64), name)
        });
        let loc = self.loc(span);
        if let Some(c) = self.cur {
            self.f.blocks[c.index()]
                .insts
                .push(Inst::new(op, dst, args, loc));
        }
        dst.unwrap_or(ValueId(0))
    }

    fn expr(&mut self, e: &TExpr, name: Option<&str>) -> ValueId {
        let ty = e.ty.unwrap_or(Type::I64);
        match &e.kind {
            TKind::Const(bits) => self.konst(ty, *bits),
            TKind::Var(v) => match self.cur {
                Some(c) => self.read(*v, c),
                None => self.konst(Type::I64, 0),
            },
            TKind::Op(op, args) => {
                let vals: Vec<ValueId> = args.iter().map(|a| self.expr(a, None)).collect();
                self.emit(*op, vals, e.ty, e.span, name)
            }
            TKind::Call(callee, args) => {
                let vals: Vec<ValueId> = args.iter().map(|a| self.expr(a, None)).collect();
                let named = e.ty.and(name).map(|n| self.fresh(n));
                let dst = self.f.new_value(ty, named);
                let mut inst = Inst::new(Op::Call, Some(dst), vals, self.loc(e.span));
                inst.callee = Some(FuncId(*callee));
                if let Some(c) = self.cur {
                    self.f.blocks[c.index()].insts.push(inst);
                }
                dst
            }
            TKind::And(a, b) | TKind::Or(a, b) => {
                let is_and = matches!(e.kind, TKind::And(..));
                if b.is_pure() {
                    let va = self.expr(a, None);
                    let vb = self.expr(b, None);
                    let op = if is_and { Op::And } else { Op::Or };
                    return self.emit(op, vec![va, vb], Some(Type::Bool), e.span, name);
                }
                let va = self.expr(a, None);
                let Some(from) = self.cur else {
                    return va;
                };
                let rhs = self.new_block(if is_and { "and" } else { "or" }, b.span);
                let join = self.new_block("join", e.span);
                let (t, f) = if is_and { (rhs, join) } else { (join, rhs) };
                self.terminate(
                    from,
                    Term::Br {
                        cond: va,
                        then_: t,
                        else_: f,
                    },
                    e.span,
                );
                self.seal(rhs);
                self.set_cur(rhs);
                let vb = self.expr(b, None);
                let end = self.cur;
                self.jump(join, e.span);
                self.seal(join);
                self.set_cur(join);
                let short = self.konst(Type::Bool, u64::from(!is_and));
                let name = name.map(|n| self.fresh(n));
                let v = self.f.new_value(Type::Bool, name);
                let mut incoming = vec![(from, short)];
                if let Some(end) = end {
                    incoming.push((end, vb));
                }
                let loc = self.loc(e.span);
                let phis = &mut self.f.blocks[join.index()].phis;
                phis.push(Phi {
                    dst: v,
                    incoming,
                    loc,
                });
                self.phi_at.insert(v, (join, phis.len() - 1));
                v
            }
            TKind::Error => {
                self.internal(
                    e.span,
                    "an expression with an error reached SSA construction",
                );
                self.konst(Type::I64, 0)
            }
        }
    }

    // ---- clean-up -----------------------------------------------------------

    /// A block with nothing in it but `jmp t` (an `if`'s join or a loop's
    /// exit followed by a loop header) is jumped over: its predecessors go
    /// to `t` directly, and `t`'s phis take its entry from each of them
    /// (a value that reaches the empty block's end reaches theirs, since
    /// it defines nothing). Not where a predecessor already goes to `t`
    /// (a phi would need two entries from one block).
    fn thread_empty_blocks(&mut self) {
        loop {
            let preds = self.f.predecessors();
            let found = (1..self.f.blocks.len()).find_map(|b| {
                let blk = &self.f.blocks[b];
                let Term::Jmp(t) = blk.term else { return None };
                let usable = self.info[b].terminated
                    && blk.phis.is_empty()
                    && blk.insts.is_empty()
                    && t.index() != b
                    && !preds[b].is_empty()
                    && !preds[b].iter().any(|p| preds[t.index()].contains(p));
                usable.then_some((b, t))
            });
            let Some((b, t)) = found else { return };
            let from = preds[b].clone();
            let bid = BlockId(b as u32);
            for p in &from {
                self.f.blocks[p.index()].term.map_targets(|x| {
                    if *x == bid {
                        *x = t;
                    }
                });
            }
            for phi in &mut self.f.blocks[t.index()].phis {
                let mut incoming = Vec::with_capacity(phi.incoming.len() + from.len());
                for &(pb, v) in &phi.incoming {
                    if pb == bid {
                        incoming.extend(from.iter().map(|&p| (p, v)));
                    } else {
                        incoming.push((pb, v));
                    }
                }
                phi.incoming = incoming;
            }
            // Now unreachable: never a candidate again.
            self.info[b].terminated = false;
        }
    }

    /// Remove trivial and unread phis (to a fixed point), rename every use
    /// of a removed phi, and drop blocks nothing reaches.
    fn finish(mut self) -> Function {
        // Trivial phis, until none is left.
        loop {
            let phis: Vec<ValueId> = self
                .phi_at
                .keys()
                .copied()
                .filter(|p| !self.replaced.contains_key(p))
                .collect();
            let mut changed = false;
            for p in phis {
                if let Some(Some(same)) = self.trivial(p) {
                    self.replaced.insert(p, same);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let map: Vec<ValueId> = (0..self.f.values.len() as u32)
            .map(|i| self.resolve(ValueId(i)))
            .collect();
        let re = |v: &mut ValueId| {
            if let Some(&w) = map.get(v.index()) {
                *v = w;
            }
        };
        let replaced = std::mem::take(&mut self.replaced);
        for b in &mut self.f.blocks {
            b.phis.retain(|p| !replaced.contains_key(&p.dst));
            for p in &mut b.phis {
                p.incoming.iter_mut().for_each(|(_, v)| re(v));
            }
            for i in &mut b.insts {
                i.args.iter_mut().for_each(re);
            }
            b.term.map_uses(re);
        }
        // Phis nothing reads but themselves and other unread phis.
        loop {
            let mut uses = vec![0u32; self.f.values.len()];
            for b in &self.f.blocks {
                for p in &b.phis {
                    for (_, v) in &p.incoming {
                        if *v != p.dst {
                            uses[v.index()] += 1;
                        }
                    }
                }
                for i in &b.insts {
                    i.args.iter().for_each(|v| uses[v.index()] += 1);
                }
                b.term.uses().iter().for_each(|v| uses[v.index()] += 1);
            }
            let mut changed = false;
            for b in &mut self.f.blocks {
                let before = b.phis.len();
                b.phis.retain(|p| uses[p.dst.index()] > 0);
                changed |= b.phis.len() != before;
            }
            if !changed {
                break;
            }
        }
        self.thread_empty_blocks();
        // Blocks nothing reaches (joins after branches that all return,
        // exits of loops that never end, empty blocks jumped over) are
        // dropped.
        let mut keep = vec![false; self.f.blocks.len()];
        let mut work = vec![0usize];
        while let Some(b) = work.pop() {
            if keep.get(b).copied().unwrap_or(true) {
                continue;
            }
            keep[b] = true;
            if self.info[b].terminated {
                work.extend(self.f.blocks[b].term.successors().iter().map(|s| s.index()));
            }
        }
        // Layout: blocks in the order code was placed in them.
        let mut layout: Vec<usize> = self.order.iter().map(|b| b.index()).collect();
        let rest: Vec<usize> = (0..keep.len()).filter(|i| !layout.contains(i)).collect();
        layout.extend(rest);
        layout.retain(|&i| keep[i]);
        let mut new_id = vec![BlockId(0); keep.len()];
        for (n, &i) in layout.iter().enumerate() {
            new_id[i] = BlockId(n as u32);
        }
        let mut blocks: Vec<Option<Block>> = std::mem::take(&mut self.f.blocks)
            .into_iter()
            .map(Some)
            .collect();
        self.f.blocks = layout
            .iter()
            .filter_map(|&i| blocks.get_mut(i).and_then(Option::take))
            .map(|mut b| {
                b.term.map_targets(|t| *t = new_id[t.index()]);
                for p in &mut b.phis {
                    p.incoming.retain(|(pb, _)| keep[pb.index()]);
                    p.incoming
                        .iter_mut()
                        .for_each(|(pb, _)| *pb = new_id[pb.index()]);
                }
                b
            })
            .collect();
        self.f
    }
}
