//! The syntax tree the parser builds: names still text, types unchecked.

use assembler::Span;
use vm::Type;

/// A name with where it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The name as written.
    pub name: String,
    /// Where it is written.
    pub span: Span,
}

/// A whole file: functions and rules in text order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct File {
    /// The functions, in text order.
    pub funcs: Vec<FnDecl>,
    /// The rule declarations, in text order.
    pub rules: Vec<RuleDecl>,
}

/// `rule f jvp f_jvp`: `f_jvp` is the hand-written rule for function `f`.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleDecl {
    /// The function the rule is for (`f`).
    pub func: Ident,
    /// The function that implements the rule (`f_jvp`).
    pub rule: Ident,
    /// The `rule` keyword.
    pub span: Span,
}

/// A parameter of a function: `name: type`.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// The parameter's name.
    pub name: Ident,
    /// Its declared type.
    pub ty: Type,
}

/// A function: `fn name(params) -> ret { body }`.
#[derive(Clone, Debug, PartialEq)]
pub struct FnDecl {
    /// The function's name.
    pub name: Ident,
    /// The `fn` keyword.
    pub span: Span,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// The result type; `None` for a function without `->`.
    pub ret: Option<Type>,
    /// The function's body.
    pub body: Block,
}

/// `{ statements }`; `close` is the `}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The statements, in order.
    pub stmts: Vec<Stmt>,
    /// The closing `}`.
    pub close: Span,
}

/// A statement and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What the statement is.
    pub kind: StmtKind,
    /// The statement's first token (its keyword, or the start of its
    /// expression).
    pub span: Span,
}

/// The kinds of statement.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `let x = e`: a new variable (shadowing any of the same name).
    Let(Ident, Expr),
    /// `x = e`
    Assign(Ident, Expr),
    /// `a[i] = e`: array, index, value; the span of `=` is the statement's.
    SetIndex(Expr, Expr, Expr),
    /// `if c { then } else ...`: the condition, the then block and the
    /// else part, if any (an `If` for `else if`, else a `Block`).
    If(Expr, Block, Option<Box<Stmt>>),
    /// `{ statements }`: a nested block, or a plain `else { }` (as the
    /// else part of an `If`).
    Block(Block),
    /// `while c { body }`.
    While(Expr, Block),
    /// `for i in lo..hi { body }`: the variable, the bounds (`hi`
    /// excluded) and the body.
    For(Ident, Expr, Expr, Block),
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// `return e` or `return` without a value.
    Return(Option<Expr>),
    /// An expression statement (a call whose result, if any, is dropped).
    Expr(Expr),
    /// A statement with a syntax error, already reported (it counts as
    /// returning, so no "missing `return`" follows from it).
    Error,
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `&&` (short-circuit)
    And,
    /// `||` (short-circuit)
    Or,
}

impl BinOp {
    /// The operator as written, for messages.
    pub fn text(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    /// Whether it compares its operands (its result is a `bool`).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }
}

/// A unary (prefix) operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-`: negation.
    Neg,
    /// `!`: logical not.
    Not,
}

/// An expression, with a span to point messages at.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What the expression is.
    pub kind: ExprKind,
    /// The operator for unary and binary expressions, the name for calls
    /// and variables, the `[` for indexing, the literal for literals.
    pub span: Span,
    /// Height of the tree (1 for a leaf): the parser refuses deeper trees
    /// than the passes may recurse on.
    pub height: u32,
}

/// The kinds of expression.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// An integer literal (already negated if written `-3`); the text for
    /// the "write `3.0`" advice.
    Int(i64, String),
    /// An f64 literal (also `inf` and `nan`).
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A variable read, by name.
    Var(String),
    /// A unary operator and its operand.
    Unary(UnOp, Box<Expr>),
    /// A binary operator and its two operands.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// A call of a function or built-in: its name and its arguments.
    Call(Ident, Vec<Expr>),
    /// `a[i]`: the array and the index.
    Index(Box<Expr>, Box<Expr>),
    /// A syntax error already reported: its type is unknown and accepted
    /// everywhere.
    Error,
}
