//! The syntax tree the parser builds: names still text, types unchecked.

use assembler::Span;
use vm::Type;

/// A name with where it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A whole file: functions and rules in text order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct File {
    pub funcs: Vec<FnDecl>,
    pub rules: Vec<RuleDecl>,
}

/// `rule f jvp f_jvp`
#[derive(Clone, Debug, PartialEq)]
pub struct RuleDecl {
    pub func: Ident,
    pub rule: Ident,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FnDecl {
    pub name: Ident,
    /// The `fn` keyword.
    pub span: Span,
    pub params: Vec<Param>,
    pub ret: Option<Type>,
    pub body: Block,
}

/// `{ statements }`; `close` is the `}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub close: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    /// The statement's first token (its keyword, or the start of its
    /// expression).
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Let(Ident, Expr),
    /// `x = e`
    Assign(Ident, Expr),
    /// `a[i] = e`: array, index, value; the span of `=` is the statement's.
    SetIndex(Expr, Expr, Expr),
    If(Expr, Block, Option<Box<Stmt>>),
    /// A plain `else { }` (as the else part of an `If`).
    Block(Block),
    While(Expr, Block),
    For(Ident, Expr, Expr, Block),
    Break,
    Continue,
    Return(Option<Expr>),
    Expr(Expr),
    /// A statement with a syntax error, already reported (it counts as
    /// returning, so no "missing `return`" follows from it).
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
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

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    /// The operator for unary and binary expressions, the name for calls
    /// and variables, the `[` for indexing, the literal for literals.
    pub span: Span,
    /// Height of the tree (1 for a leaf): the parser refuses deeper trees
    /// than the passes may recurse on.
    pub height: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// An integer literal (already negated if written `-3`); the text for
    /// the "write `3.0`" advice.
    Int(i64, String),
    Float(f64),
    Bool(bool),
    Var(String),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Call(Ident, Vec<Expr>),
    Index(Box<Expr>, Box<Expr>),
    /// A syntax error already reported: its type is unknown and accepted
    /// everywhere.
    Error,
}
