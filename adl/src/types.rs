//! Name resolution and type checking: the syntax tree to a typed tree.
//!
//! Every variable (a parameter, a `let`, a `for` variable) gets its own
//! [`VarId`]; a `let` that shadows a name makes a new variable, and its
//! right side is resolved before the new name is visible. Every operator
//! and built-in becomes its typed opcode of the table in `vm::op`: the
//! built-ins are the table's user opcodes that the text spells as
//! functions (see [`builtins`]), so a new math opcode is a new built-in
//! without a change here.
//!
//! Errors are reported once each: an expression whose type is unknown
//! because of an earlier error is accepted silently wherever it is used.

use crate::ast::{self, BinOp, Block, ExprKind, FnDecl, Stmt, StmtKind, UnOp};
use crate::diag::Errors;
use assembler::{closest, Span};
use hashbrown::HashMap;
use vm::op::{Op, Operand, Origin, Ty};
use vm::Type;

/// A variable of one function.
pub type VarId = u32;

/// A variable of a checked function: a parameter, a `let` or a `for`
/// variable; its [`VarId`] is its index in [`TFunc::vars`].
#[derive(Clone, Debug)]
pub struct Var {
    /// Its name in the source.
    pub name: String,
    /// Its type.
    pub ty: Type,
    /// False for a `let` whose right side had an error: its uses are
    /// accepted silently.
    pub known: bool,
}

/// A checked function, ready for SSA construction.
#[derive(Clone, Debug)]
pub struct TFunc {
    /// The function's name.
    pub name: String,
    /// Its `fn` keyword (for an expression checked alone, the
    /// expression).
    pub span: Span,
    /// The variables of its parameters, in order.
    pub params: Vec<VarId>,
    /// The result type; `None` for a function without a result.
    pub ret: Option<Type>,
    /// Every variable of the function, indexed by [`VarId`].
    pub vars: Vec<Var>,
    /// The checked body.
    pub body: Vec<TStmt>,
    /// The body's closing brace.
    pub close: Span,
}

/// A checked statement: variables resolved, types known.
#[derive(Clone, Debug)]
pub enum TStmt {
    /// `let x = e` and `x = e` alike: the variable's new value.
    Set(VarId, TExpr),
    /// `a[i] = e` (the span of `=`).
    SetIndex(TExpr, TExpr, TExpr, Span),
    /// `if`: the condition, the then branch and the else branch (empty
    /// without `else`; an `else if` is an `If` alone in it).
    If(TExpr, Vec<TStmt>, Vec<TStmt>),
    /// `{ ... }`: a nested scope.
    Block(Vec<TStmt>),
    /// `while c { body }`.
    While(TExpr, Vec<TStmt>),
    /// `for var in lo..hi { body }`: `counter` is the hidden induction
    /// variable, copied to `var` at the start of every iteration (so an
    /// assignment to `var` does not change the iterations).
    For {
        /// The loop variable the body reads.
        var: VarId,
        /// The hidden induction variable.
        counter: VarId,
        /// The first value (included).
        lo: TExpr,
        /// The bound (excluded).
        hi: TExpr,
        /// The loop body.
        body: Vec<TStmt>,
        /// The loop variable's name.
        span: Span,
    },
    /// `break` (its span).
    Break(Span),
    /// `continue` (its span).
    Continue(Span),
    /// `return`, with its value if any, and where it is.
    Return(Option<TExpr>, Span),
    /// A call whose result (if any) is dropped.
    Expr(TExpr),
}

/// A checked expression: its kind, its type and its span.
#[derive(Clone, Debug)]
pub struct TExpr {
    /// What the expression computes.
    pub kind: TKind,
    /// `None` only where an error was reported (never after a successful
    /// check) or for a call of a function without a result.
    pub ty: Option<Type>,
    /// Where it is written (as [`ast::Expr::span`]).
    pub span: Span,
}

/// The kinds of checked expression.
#[derive(Clone, Debug)]
pub enum TKind {
    /// A constant's 64 bits.
    Const(u64),
    /// A variable read.
    Var(VarId),
    /// A typed opcode applied to its `Use` operands in table order.
    Op(Op, Vec<TExpr>),
    /// A call of the file's function with this index.
    Call(u32, Vec<TExpr>),
    /// Short-circuit `&&`: the right side runs only if the left is true.
    And(Box<TExpr>, Box<TExpr>),
    /// Short-circuit `||`: the right side runs only if the left is false.
    Or(Box<TExpr>, Box<TExpr>),
    /// An expression with an error already reported.
    Error,
}

impl TExpr {
    fn error(span: Span) -> TExpr {
        TExpr {
            kind: TKind::Error,
            ty: None,
            span,
        }
    }

    /// Whether evaluating it has no effect and cannot trap (so `a && b`
    /// may evaluate `b` unconditionally).
    pub fn is_pure(&self) -> bool {
        match &self.kind {
            TKind::Const(_) | TKind::Var(_) => true,
            TKind::Op(op, args) => op.facts().pure && args.iter().all(TExpr::is_pure),
            TKind::And(a, b) | TKind::Or(a, b) => a.is_pure() && b.is_pure(),
            TKind::Call(..) | TKind::Error => false,
        }
    }
}

/// The signature of a function a file may call.
#[derive(Clone, Debug)]
pub struct Sig {
    /// The function's name (without `@`).
    pub name: String,
    /// The parameter types, in order.
    pub params: Vec<Type>,
    /// The result type; `None` for a function without a result.
    pub ret: Option<Type>,
}

/// Texts of the table's user opcodes that `.adl` writes with operators,
/// statements or a differently named built-in instead of a call.
const NOT_BUILTINS: [&str; 23] = [
    "add", "sub", "mul", "div", "rem", "neg", "lt", "le", "gt", "ge", "eq", "ne", "and", "or",
    "not", "copy", "itof", "ftoi", "anew", "alen", "aget", "aset", "call",
];

/// Every built-in function: the table's user opcodes spelt as functions
/// (each name with its typed opcodes), then `zeros`, `len`, `f64`, `i64`.
pub fn builtins() -> Vec<(&'static str, Vec<Op>)> {
    let mut out: Vec<(&'static str, Vec<Op>)> = Vec::new();
    for &op in Op::ALL {
        let facts = op.facts();
        let Some(text) = facts.text else { continue };
        if facts.origin != Origin::User || NOT_BUILTINS.contains(&text) {
            continue;
        }
        match out.iter_mut().find(|(t, _)| *t == text) {
            Some((_, ops)) => ops.push(op),
            None => out.push((text, vec![op])),
        }
    }
    out.push(("zeros", vec![Op::ANew]));
    out.push(("len", vec![Op::ALen]));
    out.push(("f64", vec![Op::ItoF]));
    out.push(("i64", vec![Op::FtoI]));
    out
}

/// The names of every built-in function.
pub fn builtin_names() -> Vec<&'static str> {
    builtins().into_iter().map(|(n, _)| n).collect()
}

fn type_name(t: Type) -> &'static str {
    match t {
        Type::F64 => "f64",
        Type::I64 => "i64",
        Type::Bool => "bool",
        Type::Arr => "f64[]",
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Check every function of a file. `externs` are functions defined
/// elsewhere (the REPL's session) that the file may call; they get the
/// indices after the file's own functions.
pub fn check(file: &ast::File, externs: &[Sig], errors: &mut Errors) -> Vec<TFunc> {
    let mut sigs: Vec<Sig> = Vec::new();
    let mut index: HashMap<String, u32> = HashMap::new();
    for f in &file.funcs {
        if index.contains_key(&f.name.name) {
            errors.error(
                f.name.span,
                format!("function `{}` is defined twice", f.name.name),
            );
            continue;
        }
        index.insert(f.name.name.clone(), sigs.len() as u32);
        sigs.push(Sig {
            name: f.name.name.clone(),
            params: f.params.iter().map(|p| p.ty).collect(),
            ret: f.ret,
        });
    }
    for s in externs {
        if !index.contains_key(&s.name) {
            index.insert(s.name.clone(), sigs.len() as u32);
            sigs.push(s.clone());
        }
    }
    let builtins = builtins();
    let cx = Module {
        sigs: &sigs,
        index: &index,
        builtins: &builtins,
    };
    file.funcs
        .iter()
        .map(|f| {
            let mut c = FnChecker {
                m: &cx,
                errors,
                vars: Vec::new(),
                scopes: Vec::new(),
                loops: 0,
                ret: f.ret,
                fname: &f.name.name,
            };
            c.function(f)
        })
        .collect()
}

/// Check an expression alone, for the REPL: `params` are the variables it
/// may read (as parameters of the function that evaluates it), `env` the
/// functions it may call (index `i` is `env[i]`). The function returns
/// the expression's value; `None` after reporting an error.
pub fn check_expr(
    e: &ast::Expr,
    params: &[(String, Type)],
    env: &[Sig],
    errors: &mut Errors,
) -> Option<TFunc> {
    let mut index: HashMap<String, u32> = HashMap::new();
    for (i, s) in env.iter().enumerate() {
        index.entry(s.name.clone()).or_insert(i as u32);
    }
    let builtins = builtins();
    let cx = Module {
        sigs: env,
        index: &index,
        builtins: &builtins,
    };
    let mut c = FnChecker {
        m: &cx,
        errors,
        vars: Vec::new(),
        scopes: vec![HashMap::new()],
        loops: 0,
        ret: None,
        fname: "<expression>",
    };
    let mut ps = Vec::new();
    for (name, ty) in params {
        let v = c.new_var(name, *ty);
        c.bind(name, v);
        ps.push(v);
    }
    let before = c.errors.len();
    let t = c.expr(e, true);
    if c.errors.len() != before {
        return None;
    }
    let ty = t.ty;
    let span = e.span;
    Some(TFunc {
        name: String::new(),
        span,
        params: ps,
        ret: ty,
        vars: std::mem::take(&mut c.vars),
        body: match ty {
            Some(_) => vec![TStmt::Return(Some(t), span)],
            None => vec![TStmt::Expr(t), TStmt::Return(None, span)],
        },
        close: span,
    })
}

struct Module<'a> {
    sigs: &'a [Sig],
    index: &'a HashMap<String, u32>,
    builtins: &'a [(&'static str, Vec<Op>)],
}

struct FnChecker<'a, 'e> {
    m: &'a Module<'a>,
    errors: &'e mut Errors,
    vars: Vec<Var>,
    scopes: Vec<HashMap<String, VarId>>,
    loops: u32,
    ret: Option<Type>,
    fname: &'a str,
}

impl FnChecker<'_, '_> {
    fn new_var(&mut self, name: &str, ty: Type) -> VarId {
        self.vars.push(Var {
            name: name.to_string(),
            ty,
            known: true,
        });
        self.vars.len() as u32 - 1
    }

    fn bind(&mut self, name: &str, v: VarId) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), v);
        }
    }

    fn lookup(&self, name: &str) -> Option<VarId> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn function(&mut self, f: &FnDecl) -> TFunc {
        self.scopes.push(HashMap::new());
        let mut params = Vec::new();
        for p in &f.params {
            if self.scopes[0].contains_key(&p.name.name) {
                self.errors.error(
                    p.name.span,
                    format!("parameter `{}` is declared twice", p.name.name),
                );
            }
            let v = self.new_var(&p.name.name, p.ty);
            self.bind(&p.name.name, v);
            params.push(v);
        }
        let body = self.block_inner(&f.body);
        self.scopes.pop();
        if let Some(t) = f.ret {
            if !returns(&f.body.stmts) {
                self.errors.error(
                    f.body.close,
                    format!(
                        "missing `return`: `{}` returns {} but can reach its end here",
                        f.name.name,
                        type_name(t)
                    ),
                );
            }
        }
        TFunc {
            name: f.name.name.clone(),
            span: f.span,
            params,
            ret: f.ret,
            vars: std::mem::take(&mut self.vars),
            body,
            close: f.body.close,
        }
    }

    fn block(&mut self, b: &Block) -> Vec<TStmt> {
        self.scopes.push(HashMap::new());
        let out = self.block_inner(b);
        self.scopes.pop();
        out
    }

    fn block_inner(&mut self, b: &Block) -> Vec<TStmt> {
        b.stmts.iter().filter_map(|s| self.stmt(s)).collect()
    }

    fn stmt(&mut self, s: &Stmt) -> Option<TStmt> {
        Some(match &s.kind {
            StmtKind::Let(name, e) => {
                let e = self.value(e);
                let v = self.new_var(&name.name, e.ty.unwrap_or(Type::F64));
                self.vars[v as usize].known = e.ty.is_some();
                self.bind(&name.name, v);
                TStmt::Set(v, e)
            }
            StmtKind::Assign(name, e) => {
                let Some(v) = self.lookup(&name.name) else {
                    self.undeclared(&name.name, name.span);
                    self.value(e);
                    return None;
                };
                let var = &self.vars[v as usize];
                let e = if var.known {
                    self.expect(e, var.ty)
                } else {
                    self.value(e)
                };
                TStmt::Set(v, e)
            }
            StmtKind::SetIndex(a, i, e) => {
                let a = self.expect(a, Type::Arr);
                let i = self.expect(i, Type::I64);
                let e = self.expect(e, Type::F64);
                TStmt::SetIndex(a, i, e, s.span)
            }
            StmtKind::If(c, then, els) => {
                let c = self.expect(c, Type::Bool);
                let then = self.block(then);
                let els = match els {
                    Some(e) => {
                        self.scopes.push(HashMap::new());
                        let out = self.stmt(e).into_iter().collect();
                        self.scopes.pop();
                        out
                    }
                    None => Vec::new(),
                };
                TStmt::If(c, then, els)
            }
            StmtKind::Block(b) => TStmt::Block(self.block(b)),
            StmtKind::Error => return None,
            StmtKind::While(c, body) => {
                let c = self.expect(c, Type::Bool);
                self.loops += 1;
                let body = self.block(body);
                self.loops -= 1;
                TStmt::While(c, body)
            }
            StmtKind::For(var, lo, hi, body) => {
                let lo = self.expect(lo, Type::I64);
                let hi = self.expect(hi, Type::I64);
                let counter = self.new_var(&var.name, Type::I64);
                self.scopes.push(HashMap::new());
                let v = self.new_var(&var.name, Type::I64);
                self.bind(&var.name, v);
                self.loops += 1;
                let body = self.block(body);
                self.loops -= 1;
                self.scopes.pop();
                TStmt::For {
                    var: v,
                    counter,
                    lo,
                    hi,
                    body,
                    span: var.span,
                }
            }
            StmtKind::Break | StmtKind::Continue => {
                let brk = matches!(s.kind, StmtKind::Break);
                if self.loops == 0 {
                    let what = if brk { "break" } else { "continue" };
                    self.errors
                        .error(s.span, format!("`{what}` outside a loop"));
                    return None;
                }
                if brk {
                    TStmt::Break(s.span)
                } else {
                    TStmt::Continue(s.span)
                }
            }
            StmtKind::Return(e) => match (e, self.ret) {
                (Some(e), Some(t)) => TStmt::Return(Some(self.expect(e, t)), s.span),
                (None, None) => TStmt::Return(None, s.span),
                (None, Some(t)) => {
                    self.errors.error(
                        s.span,
                        format!(
                            "`return` needs a value: `{}` returns {}",
                            self.fname,
                            type_name(t)
                        ),
                    );
                    return None;
                }
                (Some(e), None) => {
                    self.errors.error(
                        e.span,
                        format!(
                            "`{}` has no result, so `return` takes no value (declare one with `-> TYPE`)",
                            self.fname
                        ),
                    );
                    return None;
                }
            },
            StmtKind::Expr(e) => {
                if !matches!(e.kind, ExprKind::Call(..)) {
                    self.errors.error(
                        e.span,
                        "this expression does nothing: only a call can be a statement",
                    );
                    return None;
                }
                TStmt::Expr(self.expr(e, true))
            }
        })
    }

    fn undeclared(&mut self, name: &str, span: Span) {
        if self.m.index.contains_key(name) {
            self.errors.error(
                span,
                format!("`{name}` is a function, not a variable (call it as `{name}(...)`)"),
            );
            return;
        }
        let visible: Vec<&str> = self
            .scopes
            .iter()
            .flat_map(|s| s.keys().map(String::as_str))
            .collect();
        let msg = match closest(name, visible.iter().copied()) {
            Some(n) => format!("undeclared name `{name}`; did you mean `{n}`?"),
            None => format!("undeclared name `{name}`"),
        };
        self.errors.error(span, msg);
    }

    /// An expression that must have a value.
    fn value(&mut self, e: &ast::Expr) -> TExpr {
        self.expr(e, false)
    }

    /// An expression of type `want` (an error if it has another).
    fn expect(&mut self, e: &ast::Expr, want: Type) -> TExpr {
        if let (ExprKind::Int(_, text), Type::F64) = (&e.kind, want) {
            self.int_for_f64(text, e.span);
            return TExpr::error(e.span);
        }
        let t = self.value(e);
        if let Some(ty) = t.ty {
            if ty != want {
                self.errors.error(
                    e.span,
                    format!(
                        "type mismatch: expected {}, found {}",
                        type_name(want),
                        type_name(ty)
                    ),
                );
                return TExpr::error(e.span);
            }
        }
        t
    }

    fn int_for_f64(&mut self, text: &str, span: Span) {
        self.errors.error(
            span,
            format!("expected f64, found integer literal `{text}`; write `{text}.0`"),
        );
    }

    fn konst(ty: Type, bits: u64, span: Span) -> TExpr {
        TExpr {
            kind: TKind::Const(bits),
            ty: Some(ty),
            span,
        }
    }

    fn op(op: Op, args: Vec<TExpr>, ty: Option<Type>, span: Span) -> TExpr {
        TExpr {
            kind: TKind::Op(op, args),
            ty,
            span,
        }
    }

    /// Type an expression; `unit_ok` allows a call of a function without
    /// a result (a call statement).
    fn expr(&mut self, e: &ast::Expr, unit_ok: bool) -> TExpr {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(v, _) => Self::konst(Type::I64, *v as u64, span),
            ExprKind::Float(x) => Self::konst(Type::F64, x.to_bits(), span),
            ExprKind::Bool(b) => Self::konst(Type::Bool, u64::from(*b), span),
            ExprKind::Error => TExpr::error(span),
            ExprKind::Var(name) => match self.lookup(name) {
                Some(v) if !self.vars[v as usize].known => TExpr::error(span),
                Some(v) => TExpr {
                    kind: TKind::Var(v),
                    ty: Some(self.vars[v as usize].ty),
                    span,
                },
                None => {
                    self.undeclared(name, span);
                    TExpr::error(span)
                }
            },
            ExprKind::Unary(UnOp::Not, a) => {
                let a = self.expect(a, Type::Bool);
                Self::op(Op::Not, vec![a], Some(Type::Bool), span)
            }
            ExprKind::Unary(UnOp::Neg, a) => {
                let a = self.value(a);
                match a.ty {
                    Some(Type::F64) => Self::op(Op::NegF, vec![a], Some(Type::F64), span),
                    Some(Type::I64) => Self::op(Op::NegI, vec![a], Some(Type::I64), span),
                    None => TExpr::error(span),
                    Some(t) => {
                        self.errors.error(
                            span,
                            format!("`-` needs an f64 or i64 operand, found {}", type_name(t)),
                        );
                        TExpr::error(span)
                    }
                }
            }
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                let a = Box::new(self.expect(a, Type::Bool));
                let b = Box::new(self.expect(b, Type::Bool));
                let kind = if *op == BinOp::And {
                    TKind::And(a, b)
                } else {
                    TKind::Or(a, b)
                };
                TExpr {
                    kind,
                    ty: Some(Type::Bool),
                    span,
                }
            }
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, span),
            ExprKind::Index(a, i) => {
                let a = self.expect(a, Type::Arr);
                let i = self.expect(i, Type::I64);
                Self::op(Op::AGet, vec![a, i], Some(Type::F64), span)
            }
            ExprKind::Call(name, args) => self.call(name, args, span, unit_ok),
        }
    }

    fn binary(&mut self, op: BinOp, a: &ast::Expr, b: &ast::Expr, span: Span) -> TExpr {
        let (ta, tb) = (self.value(a), self.value(b));
        let (ty_a, ty_b) = match (ta.ty, tb.ty) {
            (Some(x), Some(y)) => (x, y),
            _ => return TExpr::error(span),
        };
        let cmp = op.is_comparison();
        if ty_a != ty_b {
            // An integer literal beside an f64: the usual slip.
            for (e, other) in [(a, ty_b), (b, ty_a)] {
                if let (ExprKind::Int(_, text), Type::F64) = (&e.kind, other) {
                    self.int_for_f64(text, e.span);
                    return TExpr::error(span);
                }
            }
        }
        let ops = match op {
            BinOp::Add => [Some(Op::AddF), Some(Op::AddI)],
            BinOp::Sub => [Some(Op::SubF), Some(Op::SubI)],
            BinOp::Mul => [Some(Op::MulF), Some(Op::MulI)],
            BinOp::Div => [Some(Op::DivF), Some(Op::DivI)],
            BinOp::Rem => [None, Some(Op::RemI)],
            BinOp::Lt => [Some(Op::LtF), Some(Op::LtI)],
            BinOp::Le => [Some(Op::LeF), Some(Op::LeI)],
            BinOp::Gt => [Some(Op::GtF), Some(Op::GtI)],
            BinOp::Ge => [Some(Op::GeF), Some(Op::GeI)],
            BinOp::Eq => [Some(Op::EqF), Some(Op::EqI)],
            BinOp::Ne => [Some(Op::NeF), Some(Op::NeI)],
            BinOp::And | BinOp::Or => [None, None],
        };
        let chosen = match (ty_a, ty_b) {
            (Type::F64, Type::F64) => ops[0],
            (Type::I64, Type::I64) => ops[1],
            _ => None,
        };
        match chosen {
            Some(o) => {
                let ty = if cmp { Type::Bool } else { ty_a };
                Self::op(o, vec![ta, tb], Some(ty), span)
            }
            None => {
                let need = if op == BinOp::Rem {
                    "two i64 operands"
                } else {
                    "two f64 or two i64 operands"
                };
                self.errors.error(
                    span,
                    format!(
                        "type mismatch: `{}` needs {need}, found {} and {}",
                        op.text(),
                        type_name(ty_a),
                        type_name(ty_b)
                    ),
                );
                TExpr::error(span)
            }
        }
    }

    fn call(&mut self, name: &ast::Ident, args: &[ast::Expr], span: Span, unit_ok: bool) -> TExpr {
        // The file's (or the session's) functions shadow built-ins of the
        // same name.
        if let Some(&id) = self.m.index.get(&name.name) {
            let sig = &self.m.sigs[id as usize];
            if sig.params.len() != args.len() {
                self.errors.error(
                    name.span,
                    format!(
                        "`{}` takes {} argument{}, found {}",
                        name.name,
                        sig.params.len(),
                        plural(sig.params.len()),
                        args.len()
                    ),
                );
                for a in args {
                    self.value(a);
                }
                return TExpr::error(span);
            }
            let params = sig.params.clone();
            let ret = sig.ret;
            let targs = args
                .iter()
                .zip(params)
                .map(|(a, t)| self.expect(a, t))
                .collect();
            if ret.is_none() && !unit_ok {
                self.errors.error(
                    name.span,
                    format!("`{}` has no result to use as a value", name.name),
                );
                return TExpr::error(span);
            }
            return TExpr {
                kind: TKind::Call(id, targs),
                ty: ret,
                span,
            };
        }
        if let Some((_, ops)) = self.m.builtins.iter().find(|(n, _)| *n == name.name) {
            let ops = ops.clone();
            return self.builtin(name, &ops, args, span);
        }
        {
            let names = self
                .m
                .sigs
                .iter()
                .map(|s| s.name.as_str())
                .chain(self.m.builtins.iter().map(|(n, _)| *n));
            let msg = match closest(&name.name, names) {
                Some(n) => format!("unknown function `{}`; did you mean `{n}`?", name.name),
                None => format!("unknown function `{}`", name.name),
            };
            self.errors.error(name.span, msg);
            for a in args {
                self.value(a);
            }
            TExpr::error(span)
        }
    }

    fn builtin(&mut self, name: &ast::Ident, ops: &[Op], args: &[ast::Expr], span: Span) -> TExpr {
        let uses = |op: Op| -> Vec<Ty> {
            op.operands()
                .iter()
                .filter_map(|o| match o {
                    Operand::Use(t) | Operand::InOut(t) => Some(*t),
                    _ => None,
                })
                .collect()
        };
        let def = |op: Op| -> Option<Ty> {
            op.operands().iter().find_map(|o| match o {
                Operand::Def(t) => Some(*t),
                _ => None,
            })
        };
        let arity = uses(ops[0]).len();
        let targs: Vec<TExpr> = args.iter().map(|a| self.value(a)).collect();
        if targs.len() != arity {
            self.errors.error(
                name.span,
                format!(
                    "`{}` takes {arity} argument{}, found {}",
                    name.name,
                    plural(arity),
                    targs.len()
                ),
            );
            return TExpr::error(span);
        }
        let Some(tys) = targs.iter().map(|t| t.ty).collect::<Option<Vec<Type>>>() else {
            return TExpr::error(span);
        };
        // `f64(x)` of an f64 and `i64(i)` of an i64 are the value itself.
        if matches!(name.name.as_str(), "f64" | "i64") {
            let same = if name.name == "f64" {
                Type::F64
            } else {
                Type::I64
            };
            if tys[0] == same {
                return targs.into_iter().next().unwrap_or(TExpr::error(span));
            }
        }
        let fits = |op: Op, tys: &[Type]| -> Option<Type> {
            let mut t_bound: Option<Type> = None;
            for (want, &have) in uses(op).iter().zip(tys) {
                match want.fixed() {
                    Some(w) if w != have => return None,
                    Some(_) => {}
                    None => match t_bound {
                        Some(b) if b != have => return None,
                        _ => t_bound = Some(have),
                    },
                }
            }
            match def(op) {
                Some(Ty::T) => t_bound,
                Some(t) => t.fixed(),
                None => None,
            }
        };
        for &op in ops {
            if let Some(ty) = fits(op, &tys) {
                return Self::op(op, targs, Some(ty), span);
            }
        }
        // An integer literal where an f64 would fit.
        for (i, a) in args.iter().enumerate() {
            if let ExprKind::Int(_, text) = &a.kind {
                let mut alt = tys.clone();
                alt[i] = Type::F64;
                if ops.iter().any(|&op| fits(op, &alt).is_some()) {
                    self.int_for_f64(text, a.span);
                    return TExpr::error(span);
                }
            }
        }
        let sig = |op: Op| -> String {
            let parts: Vec<&str> = uses(op)
                .iter()
                .map(|t| t.fixed().map_or("T", type_name))
                .collect();
            format!("({})", parts.join(", "))
        };
        let wanted: Vec<String> = ops.iter().map(|&op| sig(op)).collect();
        let found: Vec<&str> = tys.iter().map(|&t| type_name(t)).collect();
        self.errors.error(
            name.span,
            format!(
                "type mismatch: `{}` takes {}, found ({})",
                name.name,
                wanted.join(" or "),
                found.join(", ")
            ),
        );
        TExpr::error(span)
    }
}

/// Whether a statement list always ends in a `return` (or a loop that
/// never ends): the function cannot run off its end after it.
pub fn returns(stmts: &[Stmt]) -> bool {
    stmts.iter().any(always_returns)
}

fn always_returns(s: &Stmt) -> bool {
    match &s.kind {
        StmtKind::Return(_) | StmtKind::Error => true,
        StmtKind::If(_, then, Some(els)) => returns(&then.stmts) && always_returns(els),
        StmtKind::Block(b) => returns(&b.stmts),
        StmtKind::While(c, body) => matches!(c.kind, ExprKind::Bool(true)) && !breaks(&body.stmts),
        _ => false,
    }
}

/// Whether a loop body has a `break` of its own loop.
fn breaks(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Break => true,
        StmtKind::If(_, then, els) => {
            breaks(&then.stmts)
                || els
                    .as_deref()
                    .is_some_and(|e| breaks(std::slice::from_ref(e)))
        }
        StmtKind::Block(b) => breaks(&b.stmts),
        _ => false,
    })
}
