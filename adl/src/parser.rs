//! The parser: tokens to a syntax tree, by recursive descent.
//!
//! Error recovery: a statement with a syntax error is reported and skipped
//! up to its `;` (or the `}` or keyword that starts what follows), so every
//! independent error of a file is reported at once; at the top level the
//! parser skips to the next `fn` or `rule`. Nesting (blocks, parentheses,
//! unary operators) is limited to [`MAX_DEPTH`] and expression trees to
//! [`MAX_HEIGHT`], so no later pass can exhaust the stack whatever the
//! input.

use crate::ast::*;
use crate::diag::Errors;
use crate::lexer::{Tok, Token};
use assembler::Span;
use vm::Type;

/// The deepest nesting of blocks, parentheses and unary operators.
pub const MAX_DEPTH: u32 = 256;
/// The longest `if ... else if ...` chain.
pub const MAX_ELSE_IF: u32 = 4096;
/// The highest expression tree (`a + b + ... ` counts one per operator).
pub const MAX_HEIGHT: u32 = 1000;

/// A syntax error, already reported.
struct Fail;

type PResult<T> = Result<T, Fail>;

struct Parser<'t, 's, 'e> {
    toks: &'t [Token<'s>],
    pos: usize,
    depth: u32,
    /// `else if` links of the chain being parsed.
    chain: u32,
    errors: &'e mut Errors,
}

/// Parse a whole file.
pub fn parse(toks: &[Token<'_>], errors: &mut Errors) -> File {
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
        chain: 0,
        errors,
    };
    let mut file = File::default();
    loop {
        match p.peek() {
            Tok::Eof => break,
            Tok::Fn => match p.fn_decl() {
                Ok(f) => file.funcs.push(f),
                Err(Fail) => p.skip_to_item(),
            },
            Tok::Rule => match p.rule_decl() {
                Ok(r) => file.rules.push(r),
                Err(Fail) => p.skip_to_item(),
            },
            Tok::Error => {
                p.bump();
            }
            other => {
                let span = p.span();
                p.errors.error(
                    span,
                    format!("expected `fn` or `rule`, found {}", other.describe()),
                );
                p.bump();
                p.skip_to_item();
            }
        }
    }
    file
}

/// Parse one expression that must make up all of `toks` (the REPL's
/// expressions); `None` after reporting an error.
pub fn parse_expr(toks: &[Token<'_>], errors: &mut Errors) -> Option<Expr> {
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
        chain: 0,
        errors,
    };
    let e = p.expr().ok()?;
    if p.peek() != Tok::Eof {
        let _ = p.expected::<()>("the end of the expression");
        return None;
    }
    Some(e)
}

fn type_name(name: &str) -> Option<Type> {
    match name {
        "f64" => Some(Type::F64),
        "i64" => Some(Type::I64),
        "bool" => Some(Type::Bool),
        _ => None,
    }
}

impl<'s> Parser<'_, 's, '_> {
    fn peek(&self) -> Tok<'s> {
        self.toks.get(self.pos).map_or(Tok::Eof, |t| t.tok)
    }

    fn peek_at(&self, k: usize) -> Tok<'s> {
        self.toks.get(self.pos + k).map_or(Tok::Eof, |t| t.tok)
    }

    fn span(&self) -> Span {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(Span::default(), |t| t.span)
    }

    /// The point just after the previous token (where a missing `;` goes).
    fn after_prev(&self) -> Span {
        match self.pos.checked_sub(1).and_then(|i| self.toks.get(i)) {
            Some(t) => Span::new(t.span.end, t.span.end),
            None => self.span(),
        }
    }

    fn bump(&mut self) -> Token<'s> {
        let t = self.toks.get(self.pos).copied().unwrap_or(Token {
            tok: Tok::Eof,
            span: self.span(),
        });
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, tok: Tok<'_>) -> bool {
        if self.peek() == tok {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Report "expected WHAT, found X" at the current token.
    fn expected<T>(&mut self, what: &str) -> PResult<T> {
        let found = self.peek();
        if found != Tok::Error {
            let span = self.span();
            self.errors
                .error(span, format!("expected {what}, found {}", found.describe()));
        }
        Err(Fail)
    }

    fn expect(&mut self, tok: Tok<'_>) -> PResult<Span> {
        if self.peek() == tok {
            Ok(self.bump().span)
        } else {
            self.expected(&tok.describe())
        }
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek() {
            Tok::Ident(name) => {
                let span = self.bump().span;
                Ok(Ident {
                    name: name.to_string(),
                    span,
                })
            }
            _ => self.expected(what),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let span = self.span();
            self.errors.error(
                span,
                format!("nesting deeper than {MAX_DEPTH} levels is not supported"),
            );
            self.depth -= 1;
            return Err(Fail);
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Skip to the next `fn` or `rule`, or past the `}` that closes a body
    /// the skipped text opened (so what follows a bad function is parsed).
    fn skip_to_item(&mut self) {
        let mut depth = 0u32;
        loop {
            match self.peek() {
                Tok::Fn | Tok::Rule | Tok::Eof => return,
                Tok::LBrace => depth += 1,
                Tok::RBrace if depth > 0 => {
                    depth -= 1;
                    if depth == 0 {
                        self.bump();
                        return;
                    }
                }
                _ => {}
            }
            self.bump();
        }
    }

    /// Skip the rest of a bad statement: up to and including its `;`, or
    /// up to the `}` that closes the enclosing block or a keyword that
    /// starts a statement (braces in between are skipped whole).
    fn skip_statement(&mut self) {
        let mut depth = 0u32;
        loop {
            match self.peek() {
                Tok::Eof | Tok::Fn | Tok::Rule => return,
                Tok::Semi if depth == 0 => {
                    self.bump();
                    return;
                }
                Tok::RBrace if depth == 0 => return,
                Tok::Let
                | Tok::If
                | Tok::While
                | Tok::For
                | Tok::Return
                | Tok::Break
                | Tok::Continue
                    if depth == 0 =>
                {
                    return
                }
                Tok::LBrace => depth += 1,
                Tok::RBrace => depth -= 1,
                _ => {}
            }
            self.bump();
        }
    }

    fn rule_decl(&mut self) -> PResult<RuleDecl> {
        let start = self.expect(Tok::Rule)?;
        let func = self.ident("a function name")?;
        match self.peek() {
            Tok::Ident("jvp") => {
                self.bump();
            }
            _ => return self.expected("`jvp`"),
        }
        let rule = self.ident("a function name")?;
        Ok(RuleDecl {
            func,
            span: start.to(rule.span),
            rule,
        })
    }

    fn ty(&mut self) -> PResult<Type> {
        match self.peek() {
            Tok::Ident(name) => match type_name(name) {
                Some(t) => {
                    self.bump();
                    if t == Type::F64 && self.peek() == Tok::LBracket {
                        self.bump();
                        self.expect(Tok::RBracket)?;
                        return Ok(Type::Arr);
                    }
                    Ok(t)
                }
                None => {
                    let span = self.span();
                    self.errors.error(
                        span,
                        format!("unknown type `{name}` (types: f64, i64, bool, f64[])"),
                    );
                    Err(Fail)
                }
            },
            _ => self.expected("a type"),
        }
    }

    fn fn_decl(&mut self) -> PResult<FnDecl> {
        let span = self.expect(Tok::Fn)?;
        let name = self.ident("a function name")?;
        self.expect(Tok::LParen)?;
        let mut params = Vec::new();
        while self.peek() != Tok::RParen {
            let pname = self.ident("a parameter name")?;
            self.expect(Tok::Colon)?;
            let ty = self.ty()?;
            params.push(Param { name: pname, ty });
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RParen)?;
        let ret = if self.eat(Tok::Arrow) {
            Some(self.ty()?)
        } else {
            None
        };
        if self.peek() != Tok::LBrace {
            return self.expected("`{`");
        }
        let body = self.block()?;
        Ok(FnDecl {
            name,
            span,
            params,
            ret,
            body,
        })
    }

    /// `{ statements }`, recovering from bad statements inside.
    fn block(&mut self) -> PResult<Block> {
        self.expect(Tok::LBrace)?;
        self.enter()?;
        let mut stmts = Vec::new();
        let close = loop {
            match self.peek() {
                Tok::RBrace => break self.bump().span,
                Tok::Eof | Tok::Fn | Tok::Rule => {
                    let r = self.expected::<Span>("`}`");
                    self.leave();
                    r?;
                }
                _ => {
                    let span = self.span();
                    match self.stmt() {
                        Ok(s) => stmts.push(s),
                        Err(Fail) => {
                            self.skip_statement();
                            stmts.push(Stmt {
                                kind: StmtKind::Error,
                                span,
                            });
                        }
                    }
                }
            }
        };
        self.leave();
        Ok(Block { stmts, close })
    }

    fn semi(&mut self) -> PResult<()> {
        if self.eat(Tok::Semi) {
            return Ok(());
        }
        let found = self.peek();
        if found != Tok::Error {
            let span = self.after_prev();
            self.errors.error(
                span,
                format!(
                    "expected `;` after the statement, found {}",
                    found.describe()
                ),
            );
        }
        Err(Fail)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        let span = self.span();
        let kind = match self.peek() {
            Tok::Let => {
                self.bump();
                let name = self.ident("a variable name")?;
                if matches!(name.name.as_str(), "inf" | "nan") {
                    self.errors.error(
                        name.span,
                        format!("`{}` is a literal, not a variable name", name.name),
                    );
                }
                self.expect(Tok::Assign)?;
                let e = self.expr()?;
                self.semi()?;
                StmtKind::Let(name, e)
            }
            Tok::If => return self.if_stmt(),
            Tok::While => {
                self.bump();
                let c = self.expr()?;
                let body = self.block()?;
                StmtKind::While(c, body)
            }
            Tok::For => {
                self.bump();
                let var = self.ident("a loop variable")?;
                match self.peek() {
                    Tok::In => {
                        self.bump();
                    }
                    _ => return self.expected("`in`"),
                }
                let lo = self.expr()?;
                self.expect(Tok::DotDot)?;
                let hi = self.expr()?;
                let body = self.block()?;
                StmtKind::For(var, lo, hi, body)
            }
            Tok::Break => {
                self.bump();
                self.semi()?;
                StmtKind::Break
            }
            Tok::Continue => {
                self.bump();
                self.semi()?;
                StmtKind::Continue
            }
            Tok::Return => {
                self.bump();
                let e = if matches!(self.peek(), Tok::Semi | Tok::RBrace) {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.semi()?;
                StmtKind::Return(e)
            }
            Tok::LBrace => {
                let b = self.block()?;
                StmtKind::Block(b)
            }
            _ => {
                let e = self.expr()?;
                if self.peek() == Tok::Assign {
                    let eq = self.bump().span;
                    let value = self.expr()?;
                    self.semi()?;
                    let kind = match e.kind {
                        ExprKind::Var(name) => {
                            StmtKind::Assign(Ident { name, span: e.span }, value)
                        }
                        ExprKind::Index(a, i) => StmtKind::SetIndex(*a, *i, value),
                        ExprKind::Error => StmtKind::Error,
                        _ => {
                            self.errors.error(
                                e.span,
                                "cannot assign to this expression (only to a variable or an element `a[i]`)",
                            );
                            StmtKind::Error
                        }
                    };
                    return Ok(Stmt { kind, span: eq });
                }
                self.semi()?;
                StmtKind::Expr(e)
            }
        };
        Ok(Stmt { kind, span })
    }

    fn if_stmt(&mut self) -> PResult<Stmt> {
        let span = self.expect(Tok::If)?;
        self.if_rest(span)
    }

    fn if_rest(&mut self, span: Span) -> PResult<Stmt> {
        let c = self.expr()?;
        let then = self.block()?;
        let els = if self.eat(Tok::Else) {
            match self.peek() {
                Tok::If => {
                    // Each `else if` is one level deeper in the tree.
                    self.chain += 1;
                    if self.chain > MAX_ELSE_IF {
                        let span = self.span();
                        self.errors.error(
                            span,
                            format!("more than {MAX_ELSE_IF} `else if` in a row are not supported"),
                        );
                        self.chain -= 1;
                        return Err(Fail);
                    }
                    let r = self.if_stmt();
                    self.chain -= 1;
                    Some(Box::new(r?))
                }
                Tok::LBrace => {
                    let sp = self.span();
                    let b = self.block()?;
                    Some(Box::new(Stmt {
                        kind: StmtKind::Block(b),
                        span: sp,
                    }))
                }
                _ => return self.expected("`if` or `{`"),
            }
        } else {
            None
        };
        Ok(Stmt {
            kind: StmtKind::If(c, then, els),
            span,
        })
    }

    /// An expression node whose tallest child is `child_height` high.
    fn node(&mut self, kind: ExprKind, span: Span, child_height: u32) -> PResult<Expr> {
        let height = 1 + child_height;
        if height > MAX_HEIGHT {
            self.errors.error(
                span,
                format!("expression deeper than {MAX_HEIGHT} operations is not supported"),
            );
            return Err(Fail);
        }
        Ok(Expr { kind, span, height })
    }

    pub fn expr(&mut self) -> PResult<Expr> {
        self.or_expr()
    }

    fn or_expr(&mut self) -> PResult<Expr> {
        let mut lhs = self.and_expr()?;
        while self.peek() == Tok::OrOr {
            let op = self.bump().span;
            let rhs = self.and_expr()?;
            lhs = self.binary(BinOp::Or, op, lhs, rhs)?;
        }
        Ok(lhs)
    }

    fn and_expr(&mut self) -> PResult<Expr> {
        let mut lhs = self.cmp_expr()?;
        while self.peek() == Tok::AndAnd {
            let op = self.bump().span;
            let rhs = self.cmp_expr()?;
            lhs = self.binary(BinOp::And, op, lhs, rhs)?;
        }
        Ok(lhs)
    }

    fn binary(&mut self, op: BinOp, span: Span, lhs: Expr, rhs: Expr) -> PResult<Expr> {
        let h = lhs.height.max(rhs.height);
        self.node(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span, h)
    }

    fn cmp_op(tok: Tok<'_>) -> Option<BinOp> {
        Some(match tok {
            Tok::Lt => BinOp::Lt,
            Tok::Le => BinOp::Le,
            Tok::Gt => BinOp::Gt,
            Tok::Ge => BinOp::Ge,
            Tok::EqEq => BinOp::Eq,
            Tok::Ne => BinOp::Ne,
            _ => return None,
        })
    }

    fn cmp_expr(&mut self) -> PResult<Expr> {
        let lhs = self.add_expr()?;
        let Some(op) = Self::cmp_op(self.peek()) else {
            return Ok(lhs);
        };
        let span = self.bump().span;
        let rhs = self.add_expr()?;
        if Self::cmp_op(self.peek()).is_some() {
            let s = self.span();
            self.errors
                .error(s, "comparisons cannot be chained (write `a < b && b < c`)");
            return Err(Fail);
        }
        self.binary(op, span, lhs, rhs)
    }

    fn add_expr(&mut self) -> PResult<Expr> {
        let mut lhs = self.mul_expr()?;
        loop {
            let op = match self.peek() {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                _ => return Ok(lhs),
            };
            let span = self.bump().span;
            let rhs = self.mul_expr()?;
            lhs = self.binary(op, span, lhs, rhs)?;
        }
    }

    fn mul_expr(&mut self) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Star => BinOp::Mul,
                Tok::Slash => BinOp::Div,
                Tok::Percent => BinOp::Rem,
                _ => return Ok(lhs),
            };
            let span = self.bump().span;
            let rhs = self.unary()?;
            lhs = self.binary(op, span, lhs, rhs)?;
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        let op = match self.peek() {
            Tok::Minus => UnOp::Neg,
            Tok::Bang => UnOp::Not,
            _ => return self.postfix(),
        };
        let span = self.bump().span;
        // `-3`, `-2.5`, `-inf`: a negative literal, not a negation.
        if op == UnOp::Neg && !matches!(self.peek_at(1), Tok::LBracket | Tok::LParen) {
            match self.peek() {
                Tok::Int(text) => {
                    let t = self.bump();
                    let full = format!("-{text}");
                    return match full.parse::<i64>() {
                        Ok(v) => self.node(ExprKind::Int(v, full), span.to(t.span), 0),
                        Err(_) => {
                            self.errors.error(
                                span.to(t.span),
                                format!("`{full}` is out of range for i64"),
                            );
                            Err(Fail)
                        }
                    };
                }
                Tok::Float(text) => {
                    let t = self.bump();
                    let x = self.float(text, t.span)?;
                    return self.node(ExprKind::Float(-x), span.to(t.span), 0);
                }
                Tok::Ident("inf") => {
                    let t = self.bump();
                    return self.node(ExprKind::Float(f64::NEG_INFINITY), span.to(t.span), 0);
                }
                _ => {}
            }
        }
        self.enter()?;
        let operand = self.unary();
        self.leave();
        let operand = operand?;
        let h = operand.height;
        self.node(ExprKind::Unary(op, Box::new(operand)), span, h)
    }

    /// The value of a float literal, as `.adasm` reads one
    /// ([`assembler::f64_value`]: too large for an f64 is an error).
    fn float(&mut self, text: &str, span: Span) -> PResult<f64> {
        assembler::f64_value(text).map_err(|msg| {
            self.errors.error(span, msg);
            Fail
        })
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.primary()?;
        while self.peek() == Tok::LBracket {
            let span = self.bump().span;
            self.enter()?;
            let index = self.expr();
            self.leave();
            let index = index?;
            self.expect(Tok::RBracket)?;
            let h = e.height.max(index.height);
            e = self.node(ExprKind::Index(Box::new(e), Box::new(index)), span, h)?;
        }
        Ok(e)
    }

    fn primary(&mut self) -> PResult<Expr> {
        let t = self.bump();
        match t.tok {
            Tok::Int(text) => match text.parse::<i64>() {
                Ok(v) => self.node(ExprKind::Int(v, text.to_string()), t.span, 0),
                Err(_) => {
                    self.errors
                        .error(t.span, format!("`{text}` is out of range for i64"));
                    Err(Fail)
                }
            },
            Tok::Float(text) => {
                let x = self.float(text, t.span)?;
                self.node(ExprKind::Float(x), t.span, 0)
            }
            Tok::True => self.node(ExprKind::Bool(true), t.span, 0),
            Tok::False => self.node(ExprKind::Bool(false), t.span, 0),
            Tok::Ident("inf") => self.node(ExprKind::Float(f64::INFINITY), t.span, 0),
            Tok::Ident("nan") => self.node(ExprKind::Float(f64::NAN), t.span, 0),
            Tok::Ident(name) => {
                if self.peek() != Tok::LParen {
                    return self.node(ExprKind::Var(name.to_string()), t.span, 0);
                }
                self.bump();
                self.enter()?;
                let args = self.args();
                self.leave();
                let args = args?;
                let h = args.iter().map(|a| a.height).max().unwrap_or(0);
                let callee = Ident {
                    name: name.to_string(),
                    span: t.span,
                };
                self.node(ExprKind::Call(callee, args), t.span, h)
            }
            Tok::LParen => {
                self.enter()?;
                let e = self.expr();
                self.leave();
                let e = e?;
                self.expect(Tok::RParen)?;
                Ok(e)
            }
            Tok::Error => Err(Fail),
            _ => {
                // Not consumed: the caller's recovery sees it.
                self.pos -= 1;
                self.expected("an expression")
            }
        }
    }

    /// Call arguments after `(`, up to and including `)`.
    fn args(&mut self) -> PResult<Vec<Expr>> {
        let mut args = Vec::new();
        while self.peek() != Tok::RParen {
            args.push(self.expr()?);
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RParen)?;
        Ok(args)
    }
}
