//! The checker: names, types and SSA form of parsed functions.
//!
//! For each function it
//! 1. sorts each block's lines into phis, instructions and terminator
//!    (reporting misplaced phis, missing terminators and instructions after
//!    a terminator) and defines every register (reporting redefinitions);
//! 2. infers the type of every register with a worklist, because phis may
//!    name values defined later in the text (loop back-edges);
//! 3. builds the CFG from the terminators (reporting unknown labels);
//! 4. resolves every instruction to a typed opcode and checks operand
//!    types, call signatures, phi entries against predecessors and `ret`
//!    against the declared type;
//! 5. checks that every use is dominated by its definition.
//!
//! Errors never stop the checker: an operand or register whose type is
//! unknown because of an earlier error is "poison" and is silently accepted
//! wherever a type is expected, so each mistake is reported once. A function
//! without errors comes out as a [`CheckedFn`], ready for [`crate::lower`].

use crate::diag::{Diagnostic, Sink, Span};
use crate::parser::{Body, FuncAst, Line, Lit, Name, Operand, RuleAst};
use hashbrown::{HashMap, HashSet};
use vm::dom::DomTree;
use vm::ir::Loc;
use vm::op::{Op, Operand as Kind, Ty};
use vm::Type;

/// The most values (parameters, registers and distinct constants) one
/// function may have: the bytecode addresses registers with 16 bits.
pub(crate) const MAX_VALUES: usize = 60_000;

/// How a mnemonic of the text maps to typed opcodes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Family {
    /// One opcode with fixed operand types.
    Fixed(Op),
    /// The f64 and the i64 opcode, chosen by the operand types.
    Num(Op, Op),
    /// One opcode whose `T` operands may have any (equal) type.
    Any(Op),
}

/// Every ordinary mnemonic (not `phi`, `call` or a terminator), read from
/// the opcode table's [`vm::op::Facts::text`]: the opcodes of one spelling
/// are one fixed opcode, an f64 and an i64 form, or one opcode of any type.
pub(crate) fn mnemonics() -> impl Iterator<Item = (&'static str, Family)> {
    Op::ALL.iter().filter_map(|&op| {
        let text = op.facts().text?;
        if op == Op::Call || op.facts().origin != vm::op::Origin::User {
            return None;
        }
        let mut same = Op::ALL.iter().filter(|o| o.facts().text == Some(text));
        let first = *same.next()?;
        if first != op {
            return None; // reported with the first opcode of the spelling
        }
        let fam = match same.next() {
            Some(&other) => {
                let f64_first = op.operands().contains(&Kind::Use(Ty::F));
                if f64_first {
                    Family::Num(op, other)
                } else {
                    Family::Num(other, op)
                }
            }
            None if op.operands().contains(&Kind::Use(Ty::T)) => Family::Any(op),
            None => Family::Fixed(op),
        };
        Some((text, fam))
    })
}

/// The family of a mnemonic, looked up in the map built once from the
/// table (every instruction of a program asks).
pub(crate) fn family(mnemonic: &str) -> Option<Family> {
    static FAMILIES: std::sync::OnceLock<HashMap<&'static str, Family>> =
        std::sync::OnceLock::new();
    FAMILIES
        .get_or_init(|| mnemonics().collect())
        .get(mnemonic)
        .copied()
}

/// The `Def` operand's type of an opcode, if it has one.
pub(crate) fn def_ty(op: Op) -> Option<Ty> {
    op.operands().iter().find_map(|k| match k {
        Kind::Def(t) => Some(*t),
        _ => None,
    })
}

/// The `Use` operand types of an opcode, in text order.
fn use_tys(op: Op) -> Vec<Ty> {
    op.operands()
        .iter()
        .filter_map(|k| match k {
            Kind::Use(t) => Some(*t),
            _ => None,
        })
        .collect()
}

// ---- checked output -----------------------------------------------------------

/// An operand after checking: a register (value index) or a constant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Arg {
    Val(u32),
    Const(Type, u64),
}

pub(crate) struct CInst {
    pub op: Op,
    pub dst: Option<u32>,
    pub args: Vec<Arg>,
    pub callee: Option<u32>,
    /// Register code: the `Imm` operand (`blk.push`).
    pub imm: u32,
    /// Register code: the registers of `call.acc` and `call.n`.
    pub accs: Vec<u32>,
    pub loc: Loc,
}

pub(crate) struct CPhi {
    pub dst: u32,
    pub incoming: Vec<(u32, Arg)>,
    pub loc: Loc,
}

pub(crate) enum CTerm {
    Jmp(u32),
    Br {
        cond: Arg,
        then_: u32,
        else_: u32,
    },
    /// The value returned; `None` in a function with no result.
    Ret(Option<Arg>),
    /// Register code: several values returned.
    RetN(Vec<Arg>),
    /// Register code: the targets of a `blk.pop`.
    BlkPop(Vec<u32>),
}

pub(crate) struct CBlock {
    pub name: String,
    pub phis: Vec<CPhi>,
    pub insts: Vec<CInst>,
    pub term: CTerm,
    pub term_loc: Loc,
}

pub(crate) struct CValue {
    pub name: String,
    pub ty: Type,
}

/// A function without errors. Value indices `0..n_params` are the
/// parameters; the other registers follow in text order.
pub(crate) struct CheckedFn {
    pub name: String,
    pub n_params: usize,
    pub ret: vm::ir::RetType,
    pub values: Vec<CValue>,
    pub blocks: Vec<CBlock>,
    pub loc: Loc,
}

// ---- module level -------------------------------------------------------------

/// A function's signature as far as its header parsed.
struct Sig {
    params: Vec<Option<Type>>,
    ret: Option<Type>,
    /// The function has no result (`ret` is then `None` too).
    no_result: bool,
    /// Whether every part parsed; calls to incomplete signatures are not
    /// checked, since their errors are already reported.
    complete: bool,
}

/// How many (unknown callee, defined name) pairs the suggestions of one
/// module may compare.
const SUGGEST_BUDGET: usize = 1 << 20;

/// The functions of the module, by name.
struct Globals<'a> {
    by_name: HashMap<&'a str, u32>,
    /// The names defined, in order of definition (for suggestions).
    names: Vec<&'a str>,
    /// How many more names the suggestions for unknown callees may
    /// compare (a file of many unknown calls and many functions stays
    /// linear to check; the calls past the budget get no suggestion).
    suggest_budget: std::cell::Cell<usize>,
    sigs: Vec<Sig>,
}

impl<'a> Globals<'a> {
    fn new(funcs: &'a [FuncAst], sink: &mut Sink) -> Globals<'a> {
        let mut by_name: HashMap<&'a str, u32> = HashMap::new();
        let mut names = Vec::new();
        let mut sigs = Vec::new();
        for (i, f) in funcs.iter().enumerate() {
            let params: Vec<Option<Type>> = f.params.iter().map(|p| p.ty).collect();
            let complete = f.header_ok
                && (f.ret.is_some() || f.no_result)
                && params.iter().all(Option::is_some);
            sigs.push(Sig {
                params,
                ret: f.ret,
                no_result: f.no_result,
                complete,
            });
            if f.name.text.is_empty() {
                continue;
            }
            if let Some(&first) = by_name.get(f.name.text.as_str()) {
                let line = funcs.get(first as usize).map_or(0, |g| g.loc.line);
                let msg = format!(
                    "function `@{}` is already defined at line {line}",
                    f.name.text
                );
                sink.error(f.name.span, msg);
            } else {
                by_name.insert(f.name.text.as_str(), i as u32);
                names.push(f.name.text.as_str());
            }
        }
        Globals {
            by_name,
            names,
            sigs,
            suggest_budget: std::cell::Cell::new(SUGGEST_BUDGET),
        }
    }
}

/// Check every function; `None` for functions with errors (all reported).
/// Then the rules: those without errors, as IR (every error reported).
pub(crate) fn check_module(
    funcs: &[FuncAst],
    rules: &[RuleAst],
    sink: &mut Sink,
) -> (Vec<Option<CheckedFn>>, Vec<vm::ir::Rule>) {
    let globals = Globals::new(funcs, sink);
    let checked = funcs
        .iter()
        .map(|f| FnChecker::check(f, &globals, sink))
        .collect();
    (checked, check_rules(rules, &globals, sink))
}

/// The rules of a module whose functions another checker checks (register
/// code): [`check_rules`] alone, the functions' own errors left to that
/// checker.
pub(crate) fn check_rules_only(
    funcs: &[FuncAst],
    rules: &[RuleAst],
    sink: &mut Sink,
) -> Vec<vm::ir::Rule> {
    if rules.is_empty() {
        return Vec::new();
    }
    let globals = Globals::new(funcs, &mut Sink::default());
    check_rules(rules, &globals, sink)
}

/// The rules (`rule @f jvp @f_jvp`) whose functions exist and whose
/// signatures fit ([`vm::ir::rule_signature_error`]), at most one per
/// function; every other is reported at its `rule` line.
fn check_rules(rules: &[RuleAst], globals: &Globals<'_>, sink: &mut Sink) -> Vec<vm::ir::Rule> {
    let mut out: Vec<vm::ir::Rule> = Vec::new();
    let mut first_line: HashMap<u32, u32> = HashMap::new();
    for r in rules {
        let mut ids = [0u32; 2];
        let mut known = true;
        for (k, name) in [&r.f, &r.jvp].into_iter().enumerate() {
            match globals.by_name.get(name.text.as_str()) {
                Some(&i) => ids[k] = i,
                None => {
                    let near = crate::diag::closest(&name.text, globals.names.iter().copied());
                    sink.error(
                        name.span,
                        Diagnostic::unknown_function_message(&name.text, near),
                    );
                    known = false;
                }
            }
        }
        if !known {
            continue;
        }
        let [f, jvp] = ids;
        let earlier = first_line.get(&f).copied();
        first_line.entry(f).or_insert(r.loc.line);
        // Signatures whose header has an error (reported already) are not
        // compared.
        let sigs = match (globals.sigs.get(f as usize), globals.sigs.get(jvp as usize)) {
            (Some(fs), Some(js)) if fs.complete && js.complete => Some((fs, js)),
            _ => None,
        };
        let types = |s: &Sig| -> Vec<Type> { s.params.iter().flatten().copied().collect() };
        let typed = sigs.map(|(fs, js)| (types(fs), fs.ret, types(js), js.ret));
        let fault = vm::ir::rule_line_error(
            &r.f.text,
            &r.jvp.text,
            earlier,
            typed
                .as_ref()
                .map(|(fp, fr, jp, jr)| (&fp[..], *fr, &jp[..], *jr)),
        );
        if let Some((side, msg)) = fault {
            let at = match side {
                vm::ir::RuleSide::F => r.f.span,
                vm::ir::RuleSide::Jvp => r.jvp.span,
            };
            sink.error(at, msg);
            continue;
        }
        if sigs.is_none() {
            continue;
        }
        out.push(vm::ir::Rule {
            f: vm::ir::FuncId(f),
            jvp: vm::ir::FuncId(jvp),
            loc: r.loc,
        });
    }
    out
}

// ---- function level -------------------------------------------------------------

/// Where a value is defined.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Site {
    Param,
    Phi {
        block: u32,
    },
    /// `pos` is the index among the block's ordinary instructions (the
    /// terminator counts as position `insts.len()`).
    Inst {
        block: u32,
        pos: u32,
    },
}

impl Site {
    fn block(self) -> Option<u32> {
        match self {
            Site::Param => None,
            Site::Phi { block } | Site::Inst { block, .. } => Some(block),
        }
    }
}

/// What is known about a value's type during inference.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TyState {
    /// Not known yet (depends on values not inferred yet).
    Pending,
    Known(Type),
    /// Unknowable because of an error that is already reported.
    Poison,
}

/// A register: where and how it is defined.
struct Val<'a> {
    name: &'a str,
    line: u32,
    site: Site,
    /// The defining line; `None` for parameters.
    def: Option<&'a Line>,
}

/// A block with its lines sorted by role, each with the value it defines.
struct LBlock<'a> {
    name: &'a str,
    phis: Vec<(&'a Line, Option<u32>)>,
    insts: Vec<(&'a Line, Option<u32>)>,
    term: Option<(&'a Line, Option<u32>)>,
}

/// Where a register is read, for the dominance check.
#[derive(Clone, Copy, Debug, PartialEq)]
enum UseAt {
    /// By an instruction (or, at `pos == insts.len()`, the terminator).
    Inst { block: u32, pos: u32 },
    /// By a phi, on the edge from `pred`: the use happens at its end.
    Edge { pred: u32 },
    /// Nowhere that matters (a phi entry with an unknown label).
    Nowhere,
}

struct UseRec {
    val: u32,
    at: UseAt,
    span: Span,
}

struct FnChecker<'a, 'g, 's> {
    f: &'a FuncAst,
    globals: &'g Globals<'a>,
    sink: &'s mut Sink,
    blocks: Vec<LBlock<'a>>,
    labels: HashMap<&'a str, u32>,
    vals: Vec<Val<'a>>,
    names: HashMap<&'a str, u32>,
    tys: Vec<TyState>,
    succs: Vec<Vec<u32>>,
    preds: Vec<Vec<u32>>,
    /// False if some terminator is missing, broken or names an unknown
    /// label: predecessor and dominance checks would then only cascade.
    cfg_complete: bool,
    uses: Vec<UseRec>,
    /// Where the operands being checked are read.
    at: UseAt,
    consts: HashSet<(Type, u64)>,
}

/// An operand's type as seen by inference.
enum ArgTy {
    Reg(TyState),
    Lit(Type),
}

impl<'a, 'g, 's> FnChecker<'a, 'g, 's> {
    fn check(f: &'a FuncAst, globals: &'g Globals<'a>, sink: &'s mut Sink) -> Option<CheckedFn> {
        let before = sink.len();
        let mut c = FnChecker {
            f,
            globals,
            sink,
            blocks: Vec::new(),
            labels: HashMap::new(),
            vals: Vec::new(),
            names: HashMap::new(),
            tys: Vec::new(),
            succs: Vec::new(),
            preds: Vec::new(),
            cfg_complete: true,
            uses: Vec::new(),
            at: UseAt::Nowhere,
            consts: HashSet::new(),
        };
        c.define_params();
        c.layout();
        c.infer();
        c.build_cfg();
        let blocks = c.check_blocks();
        c.check_dominance();
        c.check_size();
        if c.sink.len() != before {
            return None;
        }
        c.finish(blocks)
    }

    fn error(&mut self, span: Span, msg: impl Into<String>) {
        self.sink.error(span, msg);
    }

    /// Define a register, reporting a redefinition (the first definition
    /// keeps the name).
    fn define(&mut self, name: &'a Name, line: u32, site: Site, def: Option<&'a Line>) -> u32 {
        let idx = self.vals.len() as u32;
        if let Some(&first) = self.names.get(name.text.as_str()) {
            let first_line = self.vals.get(first as usize).map_or(0, |v| v.line);
            let msg = format!(
                "register `%{}` is already defined at line {first_line}",
                name.text
            );
            self.error(name.span, msg);
        } else {
            self.names.insert(name.text.as_str(), idx);
        }
        self.vals.push(Val {
            name: name.text.as_str(),
            line,
            site,
            def,
        });
        idx
    }

    fn define_params(&mut self) {
        let f = self.f;
        for p in &f.params {
            self.define(&p.name, f.loc.line, Site::Param, None);
        }
    }

    // ---- 1. layout ------------------------------------------------------------

    fn layout(&mut self) {
        let f = self.f;
        if f.blocks.is_empty() && f.header_ok {
            let msg = format!("function `@{}` has no blocks", f.name.text);
            self.error(f.name.span, msg);
        }
        for (bi, b) in f.blocks.iter().enumerate() {
            let name = b.label.as_ref().map_or("", |l| l.text.as_str());
            if let Some(label) = &b.label {
                self.define_label(label, bi as u32);
            }
            let lb = self.layout_block(bi as u32, name, b.span, &b.lines);
            self.blocks.push(lb);
        }
    }

    fn define_label(&mut self, label: &'a Name, bi: u32) {
        if let Some(&first) = self.labels.get(label.text.as_str()) {
            let line = self.f.blocks.get(first as usize).map_or(0, |b| b.loc.line);
            let msg = format!(
                "block label `{}` is already defined at line {line}",
                label.text
            );
            self.error(label.span, msg);
        } else {
            self.labels.insert(label.text.as_str(), bi);
        }
    }

    fn layout_block(
        &mut self,
        bi: u32,
        name: &'a str,
        span: Span,
        lines: &'a [Line],
    ) -> LBlock<'a> {
        let mut lb = LBlock {
            name,
            phis: Vec::new(),
            insts: Vec::new(),
            term: None,
        };
        let mut after_term_reported = false;
        for line in lines {
            if lb.term.is_some() {
                if !after_term_reported {
                    let msg = format!("instruction after the terminator of block `{name}`");
                    self.error(line.span, msg);
                    after_term_reported = true;
                }
                // Its definitions still count, so its uses do not cascade.
                if !is_terminator_line(line) {
                    let pos = lb.insts.len() as u32;
                    let v = self.define_line(line, Site::Inst { block: bi, pos });
                    lb.insts.push((line, v));
                }
                continue;
            }
            if let Body::Phi(_) = line.body {
                if !lb.insts.is_empty() {
                    self.error(
                        line.mnemonic.span,
                        "`phi` must come before the other instructions of its block",
                    );
                }
                let v = self.define_line(line, Site::Phi { block: bi });
                lb.phis.push((line, v));
            } else if is_terminator_line(line) {
                let pos = lb.insts.len() as u32;
                let v = self.define_line(line, Site::Inst { block: bi, pos });
                lb.term = Some((line, v));
            } else {
                let pos = lb.insts.len() as u32;
                let v = self.define_line(line, Site::Inst { block: bi, pos });
                lb.insts.push((line, v));
            }
        }
        // A broken last line may have been the terminator: do not guess.
        let ends_broken = lines.last().is_some_and(|l| l.body == Body::Broken);
        if lb.term.is_none() && !ends_broken {
            let msg = if name.is_empty() {
                "block does not end with a terminator (`jmp`, `br` or `ret`)".to_string()
            } else {
                format!("block `{name}` does not end with a terminator (`jmp`, `br` or `ret`)")
            };
            self.error(span, msg);
        }
        lb
    }

    fn define_line(&mut self, line: &'a Line, site: Site) -> Option<u32> {
        let dst = line.dst.as_ref()?;
        Some(self.define(dst, line.loc.line, site, Some(line)))
    }

    // ---- 2. type inference --------------------------------------------------------

    /// Infer every register's type. A value is (re)considered whenever one of
    /// the registers it reads gets a type; when nothing is left to learn but
    /// some values are still pending (a cycle of phis, or of instructions in
    /// unreachable code), the first pending one is decided from its literals
    /// alone, or reported as impossible to infer.
    fn infer(&mut self) {
        let n = self.vals.len();
        self.tys = self
            .vals
            .iter()
            .enumerate()
            .map(|(i, v)| match v.def {
                Some(_) => TyState::Pending,
                None => match self.f.params.get(i).and_then(|p| p.ty) {
                    Some(t) => TyState::Known(t),
                    None => TyState::Poison,
                },
            })
            .collect();
        let users = self.users();
        let mut work: Vec<u32> = (0..n as u32).rev().collect();
        let mut cursor = 0usize;
        loop {
            while let Some(v) = work.pop() {
                let vi = v as usize;
                if self.tys.get(vi) != Some(&TyState::Pending) {
                    continue;
                }
                let t = self.infer_one(vi, false);
                if t != TyState::Pending {
                    self.tys[vi] = t;
                    work.extend(users[vi].iter().copied());
                }
            }
            while cursor < n && self.tys[cursor] != TyState::Pending {
                cursor += 1;
            }
            if cursor >= n {
                break;
            }
            let t = match self.infer_one(cursor, true) {
                TyState::Pending => {
                    self.report_uninferable(cursor);
                    TyState::Poison
                }
                t => t,
            };
            self.tys[cursor] = t;
            work.extend(users[cursor].iter().copied());
        }
    }

    fn report_uninferable(&mut self, v: usize) {
        let Some(val) = self.vals.get(v) else { return };
        let span = val
            .def
            .and_then(|l| l.dst.as_ref())
            .map_or(Span::default(), |d| d.span);
        let msg = format!(
            "cannot infer the type of `%{}`: it depends only on itself",
            val.name
        );
        self.error(span, msg);
    }

    /// For each value, the values whose definitions read it.
    fn users(&self) -> Vec<Vec<u32>> {
        let mut users = vec![Vec::new(); self.vals.len()];
        for (i, v) in self.vals.iter().enumerate() {
            let Some(line) = v.def else { continue };
            for name in read_registers(line) {
                if let Some(&u) = self.names.get(name) {
                    if let Some(list) = users.get_mut(u as usize) {
                        list.push(i as u32);
                    }
                }
            }
        }
        users
    }

    fn infer_one(&self, v: usize, force: bool) -> TyState {
        let Some(line) = self.vals.get(v).and_then(|v| v.def) else {
            return self.tys.get(v).copied().unwrap_or(TyState::Poison);
        };
        match &line.body {
            Body::Phi(arms) => self.choose(arms.iter().map(|a| &a.value), force),
            Body::Call { callee, .. } => self.call_result(callee),
            Body::Op(args) => self.infer_op(&line.mnemonic.text, args, force),
            _ => TyState::Poison,
        }
    }

    fn call_result(&self, callee: &Name) -> TyState {
        let sig = self
            .globals
            .by_name
            .get(callee.text.as_str())
            .and_then(|&i| self.globals.sigs.get(i as usize));
        match sig.and_then(|s| s.ret) {
            Some(t) => TyState::Known(t),
            None => TyState::Poison,
        }
    }

    fn infer_op(&self, mnemonic: &str, args: &[Operand], force: bool) -> TyState {
        match family(mnemonic) {
            None => TyState::Poison,
            Some(Family::Fixed(op) | Family::Any(op)) => self.result_of(op, args, force),
            Some(Family::Num(f, i)) => {
                // Comparisons give bool whatever the operands are.
                if def_ty(f) == def_ty(i) {
                    return self.result_of(f, args, force);
                }
                match self.choose(args.iter(), force) {
                    TyState::Known(Type::F64) => self.result_of(f, args, force),
                    TyState::Known(Type::I64) => self.result_of(i, args, force),
                    TyState::Known(_) | TyState::Poison => TyState::Poison,
                    TyState::Pending => TyState::Pending,
                }
            }
        }
    }

    /// The result type of `op`: fixed by the table, or the type of its `T`
    /// operands.
    fn result_of(&self, op: Op, args: &[Operand], force: bool) -> TyState {
        match def_ty(op) {
            None => TyState::Poison,
            Some(t) => match t.fixed() {
                Some(t) => TyState::Known(t),
                None => self.choose(t_args(op, args), force),
            },
        }
    }

    fn arg_ty(&self, o: &Operand) -> Option<ArgTy> {
        match o {
            Operand::Reg(n) => {
                let st = self
                    .names
                    .get(n.text.as_str())
                    .and_then(|&v| self.tys.get(v as usize).copied())
                    .unwrap_or(TyState::Poison);
                Some(ArgTy::Reg(st))
            }
            Operand::Lit { lit, .. } => Some(ArgTy::Lit(lit_type(*lit))),
            Operand::Bad(_) => None,
        }
    }

    /// The common type of operands that must agree: the first register with
    /// a known type decides; literals decide only when no register can
    /// (an f64 literal over an integer one, so that `add 1, 2.0` suggests
    /// `1.0`). Without `force`, pending registers make the answer pending;
    /// with it, literals decide and `Pending` means "cannot be inferred".
    fn choose<'o>(&self, ops: impl Iterator<Item = &'o Operand>, force: bool) -> TyState {
        let mut pending = false;
        let mut lit: Option<Type> = None;
        for o in ops {
            match self.arg_ty(o) {
                Some(ArgTy::Reg(TyState::Known(t))) => return TyState::Known(t),
                Some(ArgTy::Reg(TyState::Pending)) => pending = true,
                Some(ArgTy::Lit(t)) => {
                    lit = match lit {
                        None | Some(Type::I64) if t == Type::F64 => Some(t),
                        None => Some(t),
                        keep => keep,
                    }
                }
                Some(ArgTy::Reg(TyState::Poison)) | None => {}
            }
        }
        match (pending, force, lit) {
            (true, false, _) => TyState::Pending,
            (_, _, Some(t)) => TyState::Known(t),
            (true, true, None) => TyState::Pending,
            (false, _, None) => TyState::Poison,
        }
    }

    fn known(&self, v: Option<u32>) -> Option<Type> {
        match v.and_then(|v| self.tys.get(v as usize)) {
            Some(TyState::Known(t)) => Some(*t),
            _ => None,
        }
    }

    // ---- 3. control-flow graph ------------------------------------------------------

    fn build_cfg(&mut self) {
        let n = self.blocks.len();
        self.succs = vec![Vec::new(); n];
        for bi in 0..n {
            let targets: Vec<&'a Name> = match self.blocks[bi].term {
                Some((line, _)) => match &line.body {
                    Body::Jmp(l) => vec![l],
                    Body::Br { then_, else_, .. } => vec![then_, else_],
                    Body::Ret(_) => Vec::new(),
                    _ => {
                        self.cfg_complete = false;
                        Vec::new()
                    }
                },
                None => {
                    self.cfg_complete = false;
                    Vec::new()
                }
            };
            for label in targets {
                if let Some(t) = self.target(label) {
                    self.succs[bi].push(t);
                }
            }
        }
        self.preds = vec![Vec::new(); n];
        for (b, succs) in self.succs.iter().enumerate() {
            for &s in succs {
                // Edges of one block are added together, so a repeated
                // predecessor (`br %c, x, x`) is always the last one.
                if let Some(p) = self.preds.get_mut(s as usize) {
                    if p.last() != Some(&(b as u32)) {
                        p.push(b as u32);
                    }
                }
            }
        }
    }

    /// Resolve a branch target; the entry block cannot be one.
    fn target(&mut self, label: &Name) -> Option<u32> {
        match self.labels.get(label.text.as_str()).copied() {
            None => {
                self.error(label.span, format!("unknown block label `{}`", label.text));
                self.cfg_complete = false;
                None
            }
            Some(0) => {
                let msg = format!(
                    "cannot branch to the entry block `{}`: it has no predecessors",
                    label.text
                );
                self.error(label.span, msg);
                None
            }
            Some(t) => Some(t),
        }
    }

    // ---- 4. instructions ------------------------------------------------------------

    /// Check every line; a block is `Some` only if all its lines are valid.
    fn check_blocks(&mut self) -> Vec<Option<CBlock>> {
        (0..self.blocks.len() as u32)
            .map(|bi| self.check_block(bi))
            .collect()
    }

    fn check_block(&mut self, bi: u32) -> Option<CBlock> {
        let lb = &self.blocks[bi as usize];
        let (name, phis, insts, term) = (lb.name, lb.phis.clone(), lb.insts.clone(), lb.term);
        let phis: Vec<Option<CPhi>> = phis
            .iter()
            .map(|&(line, dst)| self.check_phi(bi, line, dst))
            .collect();
        let mut checked = Vec::new();
        for (pos, &(line, dst)) in insts.iter().enumerate() {
            self.at = UseAt::Inst {
                block: bi,
                pos: pos as u32,
            };
            checked.push(self.check_inst(line, dst));
        }
        self.at = UseAt::Inst {
            block: bi,
            pos: insts.len() as u32,
        };
        let term = term.and_then(|(line, _)| Some((self.check_term(line)?, line.loc)));
        let (term, term_loc) = term?;
        Some(CBlock {
            name: name.to_string(),
            phis: phis.into_iter().collect::<Option<_>>()?,
            insts: checked.into_iter().collect::<Option<_>>()?,
            term,
            term_loc,
        })
    }

    /// Report a destination where the instruction has no result, or a
    /// missing one where it has.
    fn check_dst(&mut self, line: &Line, produces: bool) -> bool {
        let m = &line.mnemonic;
        match (&line.dst, produces) {
            (None, true) => {
                let msg = format!(
                    "the result of `{}` must be assigned to a register: `%name = {} ...`",
                    m.text, m.text
                );
                self.error(m.span, msg);
                false
            }
            (Some(d), false) => {
                let msg = format!(
                    "`{}` does not produce a value; remove `%{} =`",
                    m.text, d.text
                );
                self.error(d.span, msg);
                false
            }
            _ => true,
        }
    }

    fn check_inst(&mut self, line: &'a Line, dst: Option<u32>) -> Option<CInst> {
        match &line.body {
            Body::Op(args) => self.check_op(line, dst, args),
            Body::Call { callee, args } => self.check_call(line, dst, callee, args),
            _ => None,
        }
    }

    fn check_op(&mut self, line: &Line, dst: Option<u32>, args: &[Operand]) -> Option<CInst> {
        let m = &line.mnemonic;
        let Some(fam) = family(&m.text) else {
            self.error(m.span, format!("unknown instruction `{}`", m.text));
            return self.resolve_only(args);
        };
        // Both opcodes of an overloaded mnemonic have the same operand
        // shape, so arity and destination are checked before resolving it.
        let (Family::Fixed(proto) | Family::Any(proto) | Family::Num(proto, _)) = fam;
        let dst_ok = self.check_dst(line, def_ty(proto).is_some());
        let uses = use_tys(proto);
        if args.len() != uses.len() {
            let msg = format!(
                "`{}` takes {}, found {}",
                m.text,
                plural(uses.len(), "operand"),
                args.len()
            );
            self.error(m.span, msg);
            return self.resolve_only(args);
        }
        let op = self.resolve_overload(fam, m, args)?;
        let t = match self.choose(t_args(op, args), true) {
            TyState::Known(t) => Some(t),
            _ => None,
        };
        let checked: Vec<Option<Arg>> = args
            .iter()
            .zip(use_tys(op))
            .map(|(a, ty)| self.check_arg(a, ty.fixed().or(t), ""))
            .collect();
        let args = checked.into_iter().collect::<Option<Vec<Arg>>>()?;
        dst_ok.then_some(CInst {
            op,
            dst,
            args,
            callee: None,
            imm: 0,
            accs: Vec::new(),
            loc: line.loc,
        })
    }

    /// The typed opcode of a mnemonic for these operands. `None` if the
    /// operand types rule out both (reported) or are unknown (poison).
    fn resolve_overload(&mut self, fam: Family, m: &Name, args: &[Operand]) -> Option<Op> {
        let (f, i) = match fam {
            Family::Fixed(op) | Family::Any(op) => return Some(op),
            Family::Num(f, i) => (f, i),
        };
        match self.choose(args.iter(), true) {
            TyState::Known(Type::F64) => Some(f),
            TyState::Known(Type::I64) => Some(i),
            TyState::Known(t) => {
                let msg = format!("`{}` needs f64 or i64 operands, found {t}", m.text);
                self.error(m.span, msg);
                self.resolve_only(args)
            }
            _ => self.resolve_only(args),
        }
    }

    fn check_call(
        &mut self,
        line: &Line,
        dst: Option<u32>,
        callee: &Name,
        args: &[Operand],
    ) -> Option<CInst> {
        let Some(&fi) = self.globals.by_name.get(callee.text.as_str()) else {
            self.check_dst(line, true);
            let names = &self.globals.names;
            let budget = &self.globals.suggest_budget;
            let near = match budget.get().checked_sub(names.len()) {
                Some(left) => {
                    budget.set(left);
                    crate::diag::closest(&callee.text, names.iter().copied())
                }
                None => None,
            };
            self.error(
                callee.span,
                Diagnostic::unknown_function_message(&callee.text, near),
            );
            return self.resolve_only(args);
        };
        let globals = self.globals;
        let sig = globals.sigs.get(fi as usize)?;
        let dst_ok = match (&line.dst, sig.no_result) {
            (Some(d), true) => {
                let msg = format!(
                    "`@{}` returns nothing; remove `%{} =` (write `call @{}(...)`)",
                    callee.text, d.text, callee.text
                );
                self.error(d.span, msg);
                false
            }
            _ => self.check_dst(line, !sig.no_result),
        };
        if !sig.complete {
            return self.resolve_only(args);
        }
        if args.len() != sig.params.len() {
            let msg = format!(
                "`@{}` takes {}, found {}",
                callee.text,
                plural(sig.params.len(), "argument"),
                args.len()
            );
            self.error(callee.span, msg);
            return self.resolve_only(args);
        }
        let checked: Vec<Option<Arg>> = args
            .iter()
            .zip(&sig.params)
            .enumerate()
            .map(|(i, (a, ty))| {
                let what = format!(" (parameter {} of `@{}`)", i + 1, callee.text);
                self.check_arg(a, *ty, &what)
            })
            .collect();
        let args = checked.into_iter().collect::<Option<Vec<Arg>>>()?;
        dst_ok.then_some(CInst {
            op: Op::Call,
            dst,
            args,
            callee: Some(fi),
            imm: 0,
            accs: Vec::new(),
            loc: line.loc,
        })
    }

    fn check_phi(&mut self, bi: u32, line: &'a Line, dst: Option<u32>) -> Option<CPhi> {
        let Body::Phi(arms) = &line.body else {
            return None;
        };
        let mut ok = self.check_dst(line, true);
        let m = &line.mnemonic;
        if bi == 0 {
            self.error(m.span, "the entry block cannot have phis");
            ok = false;
        }
        let check_preds = self.cfg_complete && bi != 0;
        let preds: HashSet<u32> = self
            .preds
            .get(bi as usize)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        let block_name = self.blocks.get(bi as usize).map_or("", |b| b.name);
        let ty = self.known(dst);
        let mut seen = HashSet::new();
        let mut incoming = Vec::new();
        for arm in arms {
            let pred = self.labels.get(arm.label.text.as_str()).copied();
            let label = &arm.label;
            match pred {
                None => {
                    self.error(label.span, format!("unknown block label `{}`", label.text));
                    ok = false;
                }
                Some(p) if !seen.insert(p) => {
                    let msg = format!("duplicate phi entry for block `{}`", label.text);
                    self.error(label.span, msg);
                    ok = false;
                }
                Some(p) if check_preds && !preds.contains(&p) => {
                    let msg = format!(
                        "`{}` is not a predecessor of block `{block_name}`",
                        label.text
                    );
                    self.error(label.span, msg);
                    ok = false;
                }
                Some(_) => {}
            }
            self.at = pred.map_or(UseAt::Nowhere, |p| UseAt::Edge { pred: p });
            match (self.check_arg(&arm.value, ty, ""), pred) {
                (Some(a), Some(p)) => incoming.push((p, a)),
                _ => ok = false,
            }
        }
        if check_preds {
            let mut missing: Vec<u32> = preds.difference(&seen).copied().collect();
            missing.sort_unstable();
            for q in missing {
                let name = self.blocks.get(q as usize).map_or("", |b| b.name);
                let msg = format!("phi is missing an entry for predecessor `{name}`");
                self.error(m.span, msg);
                ok = false;
            }
        }
        Some(CPhi {
            dst: dst?,
            incoming,
            loc: line.loc,
        })
        .filter(|_| ok)
    }

    fn check_term(&mut self, line: &'a Line) -> Option<CTerm> {
        let dst_ok = self.check_dst(line, false);
        let term = match &line.body {
            Body::Jmp(l) => CTerm::Jmp(self.label_index(l)?),
            Body::Br { cond, then_, else_ } => {
                let cond = self.check_arg(cond, Some(Type::Bool), " (the branch condition)");
                CTerm::Br {
                    cond: cond?,
                    then_: self.label_index(then_)?,
                    else_: self.label_index(else_)?,
                }
            }
            Body::Ret(Some(v)) if self.f.no_result => {
                let msg = format!(
                    "`@{}` returns nothing: write a bare `ret`, or give it a result type \
                     (`-> f64`)",
                    self.f.name.text
                );
                self.error(line.mnemonic.span, msg);
                self.resolve_only::<CTerm>(std::slice::from_ref(v));
                return None;
            }
            Body::Ret(Some(v)) => {
                let what = format!(" (the return type of `@{}`)", self.f.name.text);
                CTerm::Ret(Some(self.check_arg(v, self.f.ret, &what)?))
            }
            Body::Ret(None) if self.f.no_result => CTerm::Ret(None),
            // A header that failed to parse was reported already.
            Body::Ret(None) if self.f.ret.is_none() => return None,
            Body::Ret(None) => {
                let want = self
                    .f
                    .ret
                    .map_or("a value".to_string(), |t| format!("a value of type {t}"));
                let msg = format!(
                    "`ret` in `@{}` needs {want}: `ret %value`",
                    self.f.name.text
                );
                self.error(line.mnemonic.span, msg);
                return None;
            }
            _ => return None,
        };
        dst_ok.then_some(term)
    }

    /// A branch target that [`Self::target`] accepted (already reported
    /// otherwise).
    fn label_index(&self, l: &Name) -> Option<u32> {
        self.labels
            .get(l.text.as_str())
            .copied()
            .filter(|&t| t != 0)
    }

    /// Resolve the registers of operands that cannot be type-checked (their
    /// instruction is already in error), so unknown ones are still reported.
    fn resolve_only<T>(&mut self, args: &[Operand]) -> Option<T> {
        for a in args {
            self.check_arg(a, None, "");
        }
        None
    }

    /// Check one operand against the expected type (`None`: unknown, accept
    /// silently), recording register uses for the dominance check. `what`
    /// says what the expected type belongs to, for the message.
    fn check_arg(&mut self, o: &Operand, exp: Option<Type>, what: &str) -> Option<Arg> {
        match o {
            Operand::Reg(n) => {
                let Some(&v) = self.names.get(n.text.as_str()) else {
                    self.error(n.span, format!("unknown register `%{}`", n.text));
                    return None;
                };
                self.uses.push(UseRec {
                    val: v,
                    at: self.at,
                    span: n.span,
                });
                let exp = exp?;
                match self.tys.get(v as usize) {
                    Some(TyState::Known(t)) if *t == exp => Some(Arg::Val(v)),
                    Some(TyState::Known(t)) => {
                        let msg = format!("expected {exp}{what}, found `%{}` of type {t}", n.text);
                        self.error(n.span, msg);
                        None
                    }
                    _ => None,
                }
            }
            Operand::Lit { lit, text, span } => {
                let arg = literal_arg(*lit, exp?);
                if arg.is_none() {
                    let msg = literal_mismatch(*lit, text, exp?, what);
                    self.error(*span, msg);
                }
                if let Some(Arg::Const(t, bits)) = arg {
                    self.consts.insert((t, bits));
                }
                arg
            }
            Operand::Bad(_) => None,
        }
    }

    // ---- 5. dominance ---------------------------------------------------------------

    fn check_dominance(&mut self) {
        if !self.cfg_complete || self.blocks.is_empty() {
            return;
        }
        let dom = DomTree::new(&self.succs);
        let uses = std::mem::take(&mut self.uses);
        for u in &uses {
            let Some(val) = self.vals.get(u.val as usize) else {
                continue;
            };
            let (site, name, line) = (val.site, val.name, val.line);
            if let Some(msg) = self.dominance_error(&dom, u.at, site, name, line) {
                self.error(u.span, msg);
            }
        }
    }

    /// The complaint about a use at `at` of a value defined at `site`, if
    /// the definition does not dominate it. Uses in unreachable code are
    /// vacuously dominated.
    fn dominance_error(
        &self,
        dom: &DomTree,
        at: UseAt,
        site: Site,
        name: &str,
        line: u32,
    ) -> Option<String> {
        let def_block = site.block()?;
        match at {
            UseAt::Nowhere => None,
            UseAt::Inst { block, pos } => {
                if !dom.reachable(block) {
                    return None;
                }
                match site {
                    Site::Inst { block: d, pos: j } if d == block => {
                        (j >= pos).then(|| format!("`%{name}` is used before its definition"))
                    }
                    _ => (!dom.dominates(def_block, block)).then(|| {
                        format!(
                            "the definition of `%{name}` (line {line}) does not dominate this use"
                        )
                    }),
                }
            }
            UseAt::Edge { pred } => {
                if !dom.reachable(pred) || dom.dominates(def_block, pred) {
                    return None;
                }
                let pred_name = self.blocks.get(pred as usize).map_or("", |b| b.name);
                Some(format!(
                    "the definition of `%{name}` (line {line}) does not dominate the end of predecessor `{pred_name}`"
                ))
            }
        }
    }

    // ---- limits and output ----------------------------------------------------------

    fn check_size(&mut self) {
        let n = self.vals.len() + self.consts.len();
        if n > MAX_VALUES {
            let msg = format!(
                "function `@{}` has {n} values (registers and distinct constants); at most {MAX_VALUES} are allowed",
                self.f.name.text
            );
            self.error(self.f.name.span, msg);
        }
    }

    fn finish(&self, blocks: Vec<Option<CBlock>>) -> Option<CheckedFn> {
        let values = self
            .vals
            .iter()
            .zip(&self.tys)
            .map(|(v, t)| match t {
                TyState::Known(ty) => Some(CValue {
                    name: v.name.to_string(),
                    ty: *ty,
                }),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(CheckedFn {
            name: self.f.name.text.clone(),
            n_params: self.f.params.len(),
            ret: if self.f.no_result {
                vm::ir::RetType::Unit
            } else {
                vm::ir::RetType::One(self.f.ret?)
            },
            values,
            blocks: blocks.into_iter().collect::<Option<Vec<_>>>()?,
            loc: self.f.loc,
        })
    }
}

/// Whether a line ends its block (including a terminator that failed to
/// parse, so the block is not also reported as unterminated).
fn is_terminator_line(line: &Line) -> bool {
    line.body.is_terminator()
        || (line.body == Body::Broken
            && matches!(line.mnemonic.text.as_str(), "jmp" | "br" | "ret"))
}

/// The register names a line reads.
fn read_registers(line: &Line) -> Vec<&str> {
    let ops: Vec<&Operand> = match &line.body {
        Body::Phi(arms) => arms.iter().map(|a| &a.value).collect(),
        Body::Call { args, .. } | Body::Op(args) | Body::RetN(args) => args.iter().collect(),
        Body::CallInto { args, into, .. } => args.iter().chain(into).collect(),
        Body::Br { cond, .. } => vec![cond],
        Body::Ret(Some(v)) => vec![v],
        Body::Ret(None) | Body::Jmp(_) | Body::BlkPop(_) | Body::Broken => Vec::new(),
    };
    ops.into_iter()
        .filter_map(|o| match o {
            Operand::Reg(n) => Some(n.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The operands of `op` in `T` positions.
fn t_args(op: Op, args: &[Operand]) -> impl Iterator<Item = &Operand> {
    args.iter()
        .zip(use_tys(op))
        .filter(|(_, t)| *t == Ty::T)
        .map(|(a, _)| a)
}

pub(crate) fn lit_type(lit: Lit) -> Type {
    match lit {
        Lit::Int(_) => Type::I64,
        Lit::Float(_) => Type::F64,
        Lit::Bool(_) => Type::Bool,
    }
}

/// The constant for a literal of the expected type, if it has that type.
pub(crate) fn literal_arg(lit: Lit, exp: Type) -> Option<Arg> {
    match (lit, exp) {
        (Lit::Float(x), Type::F64) => Some(Arg::Const(Type::F64, x.to_bits())),
        (Lit::Int(n), Type::I64) => Some(Arg::Const(Type::I64, n as u64)),
        (Lit::Bool(b), Type::Bool) => Some(Arg::Const(Type::Bool, u64::from(b))),
        _ => None,
    }
}

pub(crate) fn literal_mismatch(lit: Lit, text: &str, exp: Type, what: &str) -> String {
    match (lit, exp) {
        (Lit::Int(_), Type::F64) => {
            format!("expected f64{what}, found integer literal `{text}`; write `{text}.0`")
        }
        (Lit::Int(_), _) => format!("expected {exp}{what}, found integer literal `{text}`"),
        (Lit::Float(_), _) => format!("expected {exp}{what}, found f64 literal `{text}`"),
        (Lit::Bool(_), _) => format!("expected {exp}{what}, found bool literal `{text}`"),
    }
}

pub(crate) fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mnemonic_resolves_to_user_opcodes() {
        for (m, fam) in mnemonics() {
            assert_eq!(family(m), Some(fam));
        }
        assert_eq!(family("acc"), None);
    }
}
