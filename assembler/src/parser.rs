//! The parser: tokens to an AST of functions, blocks and lines.
//!
//! The grammar is line-oriented, so error recovery is too: an error inside
//! an instruction abandons the rest of that line, which becomes a
//! [`Body::Broken`] line that still defines its destination register (so
//! later uses of it do not cascade into "unknown register" errors). An error
//! in a function header skips to the function's `{`, and an error outside a
//! function skips to the next `fn`. The parser is a loop over lines, never
//! recursive, so no input can exhaust the stack.

use crate::diag::{Sink, Span};
use crate::lexer::{Tok, Token};
use vm::ir::Loc;
use vm::Type;

/// The mnemonics the parser reads itself (their operands are not a plain
/// operand list): `phi`, `call` and the terminators, as matched in
/// `Parser::line_parts`. Every other mnemonic is in `check::MNEMONICS`.
pub(crate) const KEYWORD_MNEMONICS: &[&str] = &["phi", "call", "jmp", "br", "ret"];

/// A name (register without `%`, function without `@`, label, mnemonic)
/// with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    pub text: String,
    pub span: Span,
}

/// The value of a literal operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lit {
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// An instruction operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Reg(Name),
    /// A literal with its source text (used in messages such as "write `2.0`").
    Lit {
        lit: Lit,
        text: String,
        span: Span,
    },
    /// A literal that was already reported as invalid (out of range).
    Bad(Span),
}

/// One `[label: value]` entry of a phi.
#[derive(Clone, Debug, PartialEq)]
pub struct PhiArm {
    pub label: Name,
    pub value: Operand,
}

/// What a line does, by the shape of its syntax.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Phi(Vec<PhiArm>),
    Call {
        callee: Name,
        args: Vec<Operand>,
    },
    Jmp(Name),
    Br {
        cond: Operand,
        then_: Name,
        else_: Name,
    },
    /// `ret v`, or a bare `ret` in a function with no result.
    Ret(Option<Operand>),
    /// Register code only: `call.acc @g(args) -> [%a, ...]` and
    /// `call.n @g(args) -> [%a, ...]` (the mnemonic says which): the
    /// callee's several results are added to, or written to, the
    /// registers in brackets.
    CallInto {
        callee: Name,
        args: Vec<Operand>,
        into: Vec<Operand>,
    },
    /// Register code only: `ret.n %a, %b` returns several values.
    RetN(Vec<Operand>),
    /// Register code only: `blk.pop [l0, l1, ...]` pops a block id `k`
    /// and goes to the `k`-th label.
    BlkPop(Vec<Name>),
    /// Any other mnemonic with comma-separated operands (resolved by the
    /// checker, which also reports unknown mnemonics).
    Op(Vec<Operand>),
    /// A line that failed to parse (already reported).
    Broken,
}

impl Body {
    pub fn is_terminator(&self) -> bool {
        matches!(
            self,
            Body::Jmp(_) | Body::Br { .. } | Body::Ret(_) | Body::RetN(_) | Body::BlkPop(_)
        )
    }
}

/// One instruction line: `[%dst =] mnemonic operands`.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub dst: Option<Name>,
    /// The mnemonic (empty for a broken line that has none).
    pub mnemonic: Name,
    pub body: Body,
    /// The span of the line's first token, and its location.
    pub span: Span,
    pub loc: Loc,
}

/// A block: its label (absent when instructions precede the first label)
/// and its lines.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockAst {
    pub label: Option<Name>,
    pub lines: Vec<Line>,
    pub span: Span,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Name,
    /// `None` if the type was invalid (already reported).
    pub ty: Option<Type>,
}

/// A function. If its header did not parse, `header_ok` is false and the
/// signature is incomplete; the body is still parsed and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct FuncAst {
    /// Empty if the header failed before the name.
    pub name: Name,
    pub params: Vec<Param>,
    pub ret: Option<Type>,
    /// The header has no `-> type`: the function returns nothing.
    pub no_result: bool,
    /// Register code only: `-> (f64, f64)`, several results.
    pub many: Option<Vec<Type>>,
    pub header_ok: bool,
    pub blocks: Vec<BlockAst>,
    pub loc: Loc,
    /// The span of the closing `}` (or of the end of file if it is missing).
    pub end: Span,
}

/// A top-level `rule @f jvp @f_jvp` line (see [`vm::ir::Rule`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RuleAst {
    pub f: Name,
    pub jvp: Name,
    /// The span of the `rule` keyword, and its location.
    pub span: Span,
    pub loc: Loc,
}

/// A parse error that has already been reported (or that needs no report,
/// because the lexer reported the bad token).
struct Reported;

type PResult<T> = Result<T, Reported>;

/// Parse a token stream into functions and rules, reporting every syntax
/// error.
///
/// With `register`, the parser also reads what only register code has
/// (`-> (f64, f64)`, `call.acc`, `call.n`, `ret.n`, `blk.pop`); without it
/// those lines parse as ordinary instructions, which the checker rejects
/// as unknown.
pub(crate) fn parse(
    tokens: Vec<Token<'_>>,
    sink: &mut Sink,
    register: bool,
) -> (Vec<FuncAst>, Vec<RuleAst>) {
    let mut p = Parser::new(tokens, sink);
    p.register = register;
    let mut funcs = Vec::new();
    let mut rules = Vec::new();
    loop {
        p.skip_newlines();
        match p.peek() {
            Tok::Eof => break,
            Tok::Fn => {
                if let Some(f) = p.function() {
                    funcs.push(f);
                }
            }
            Tok::Ident("rule") => match p.rule() {
                Ok(r) => rules.push(r),
                Err(Reported) => p.skip_until(|t| matches!(t, Tok::Newline | Tok::Fn)),
            },
            _ => {
                let _ = p.fail::<()>("`fn`");
                p.skip_until(|t| matches!(t, Tok::Fn | Tok::Eof));
            }
        }
    }
    (funcs, rules)
}

struct Parser<'s, 'd> {
    toks: Vec<Token<'s>>,
    pos: usize,
    sink: &'d mut Sink,
    /// Register code: read its own forms too (see [`parse`]).
    register: bool,
}

impl<'s, 'd> Parser<'s, 'd> {
    fn new(mut toks: Vec<Token<'s>>, sink: &'d mut Sink) -> Parser<'s, 'd> {
        // The end-of-file token sits right after the last real token, so
        // "found end of file" errors point at the end of the program rather
        // than at a blank last line.
        let last = toks.iter().rev().find(|t| t.tok != Tok::Newline).copied();
        let (span, loc) = match last {
            Some(t) => {
                let width = u32::try_from(t.span.end - t.span.start).unwrap_or(0);
                let loc = Loc::new(t.loc.line, t.loc.col.saturating_add(width));
                (Span::new(t.span.end, t.span.end), loc)
            }
            None => (Span::default(), Loc::new(1, 1)),
        };
        toks.push(Token {
            tok: Tok::Eof,
            span,
            loc,
        });
        Parser {
            toks,
            pos: 0,
            sink,
            register: false,
        }
    }

    /// The current token (the final `Eof` token once past the end).
    fn cur(&self) -> Token<'s> {
        let last = self.toks.len().saturating_sub(1);
        self.toks.get(self.pos.min(last)).copied().unwrap_or(Token {
            tok: Tok::Eof,
            span: Span::default(),
            loc: Loc::default(),
        })
    }

    fn peek(&self) -> Tok<'s> {
        self.cur().tok
    }

    fn peek2(&self) -> Tok<'s> {
        self.toks.get(self.pos + 1).map_or(Tok::Eof, |t| t.tok)
    }

    fn bump(&mut self) -> Token<'s> {
        let t = self.cur();
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn skip_newlines(&mut self) {
        while self.peek() == Tok::Newline {
            self.bump();
        }
    }

    fn skip_until(&mut self, stop: impl Fn(Tok<'s>) -> bool) {
        while !stop(self.peek()) && self.peek() != Tok::Eof {
            self.bump();
        }
    }

    /// Report "expected `what`, found <current token>" (unless the current
    /// token is a bad character the lexer already reported) and fail.
    fn fail<T>(&mut self, what: &str) -> PResult<T> {
        let t = self.cur();
        if t.tok != Tok::Error {
            let msg = format!("expected {what}, found {}", t.tok.describe());
            self.sink.error(t.span, msg);
        }
        Err(Reported)
    }

    /// Consume a token equal to `want` or fail with "expected `what`".
    fn expect(&mut self, want: Tok<'static>, what: &str) -> PResult<Token<'s>> {
        if self.peek() == want {
            Ok(self.bump())
        } else {
            self.fail(what)
        }
    }

    fn name(&self, text: &str, t: Token<'s>) -> Name {
        Name {
            text: text.to_string(),
            span: t.span,
        }
    }

    fn global(&mut self) -> PResult<Name> {
        match self.peek() {
            Tok::Global(s) => {
                let t = self.bump();
                Ok(self.name(s, t))
            }
            _ => self.fail("a function name such as `@f`"),
        }
    }

    fn reg(&mut self) -> PResult<Name> {
        match self.peek() {
            Tok::Reg(s) => {
                let t = self.bump();
                Ok(self.name(s, t))
            }
            _ => self.fail("a register such as `%x`"),
        }
    }

    fn label(&mut self) -> PResult<Name> {
        match self.peek() {
            Tok::Ident(s) => {
                let t = self.bump();
                Ok(self.name(s, t))
            }
            _ => self.fail("a block label"),
        }
    }

    // ---- rules ------------------------------------------------------------

    /// `rule @f jvp @f_jvp`, ended by the end of its line.
    fn rule(&mut self) -> PResult<RuleAst> {
        let kw = self.bump();
        let f = self.global()?;
        match self.peek() {
            Tok::Ident("jvp") => {
                self.bump();
            }
            _ => return self.fail("`jvp`"),
        }
        let jvp = self.global()?;
        if !matches!(self.peek(), Tok::Newline | Tok::Eof) {
            return self.fail("end of line");
        }
        Ok(RuleAst {
            f,
            jvp,
            span: kw.span,
            loc: kw.loc,
        })
    }

    // ---- functions --------------------------------------------------------

    fn function(&mut self) -> Option<FuncAst> {
        let fn_tok = self.bump();
        let mut f = FuncAst {
            name: Name {
                text: String::new(),
                span: fn_tok.span,
            },
            params: Vec::new(),
            ret: None,
            no_result: false,
            many: None,
            header_ok: true,
            blocks: Vec::new(),
            loc: fn_tok.loc,
            end: fn_tok.span,
        };
        if self.header(&mut f).is_err() {
            f.header_ok = false;
            // Resynchronise at the body's `{`; without one the function is
            // lost, and the next `fn` starts over.
            self.skip_until(|t| matches!(t, Tok::LBrace | Tok::Fn));
            if self.peek() != Tok::LBrace {
                return None;
            }
            self.bump();
        }
        self.body(&mut f);
        Some(f)
    }

    /// `@name(%p: type, ...) -> type {`, or `@name(...) {` for a function
    /// with no result; newlines are allowed between tokens.
    fn header(&mut self, f: &mut FuncAst) -> PResult<()> {
        self.skip_newlines();
        f.name = self.global()?;
        self.skip_newlines();
        self.expect(Tok::LParen, "`(`")?;
        self.skip_newlines();
        if self.peek() != Tok::RParen {
            loop {
                self.skip_newlines();
                let name = self.reg()?;
                // The register is defined even if its type is broken, so
                // the body's uses of it do not cascade.
                let ty = self.param_type();
                f.params.push(Param {
                    name,
                    ty: ty.as_ref().map_or(None, |t| *t),
                });
                ty?;
                self.skip_newlines();
                if self.peek() == Tok::Comma {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        self.skip_newlines();
        if self.peek() == Tok::LBrace {
            // `fn @f(...) {`: no result.
            f.no_result = true;
        } else {
            self.expect(Tok::Arrow, "`->` or `{`")?;
            self.skip_newlines();
            if self.register && self.peek() == Tok::LParen {
                f.many = Some(self.type_list()?);
            } else {
                f.ret = self.ty()?;
            }
            self.skip_newlines();
        }
        self.expect(Tok::LBrace, "`{`")?;
        Ok(())
    }

    /// `(type, ...)`: the results of a function of register code that
    /// returns several values.
    fn type_list(&mut self) -> PResult<Vec<Type>> {
        self.bump();
        let mut out = Vec::new();
        if self.peek() != Tok::RParen {
            loop {
                self.skip_newlines();
                match self.ty()? {
                    Some(t) => out.push(t),
                    None => return Err(Reported),
                }
                self.skip_newlines();
                if self.peek() == Tok::Comma {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        Ok(out)
    }

    /// `: type` after a parameter name.
    fn param_type(&mut self) -> PResult<Option<Type>> {
        self.skip_newlines();
        self.expect(Tok::Colon, "`:`")?;
        self.skip_newlines();
        self.ty()
    }

    /// A type; an unknown type name is reported and gives `Ok(None)` so the
    /// rest of the header still parses.
    fn ty(&mut self) -> PResult<Option<Type>> {
        let Tok::Ident(s) = self.peek() else {
            return self.fail("a type (`f64`, `i64`, `bool` or `f64[]`)");
        };
        let t = self.bump();
        if self.peek() == Tok::LBracket {
            let open = self.bump();
            self.expect(Tok::RBracket, "`]`")?;
            if s == "f64" {
                return Ok(Some(Type::Arr));
            }
            let msg = format!("unknown type `{s}[]`; the only array type is `f64[]`");
            self.sink.error(t.span.to(open.span), msg);
            return Ok(None);
        }
        match s {
            "f64" => Ok(Some(Type::F64)),
            "i64" => Ok(Some(Type::I64)),
            "bool" => Ok(Some(Type::Bool)),
            _ => {
                let msg = format!("unknown type `{s}`; expected `f64`, `i64`, `bool` or `f64[]`");
                self.sink.error(t.span, msg);
                Ok(None)
            }
        }
    }

    /// Lines up to the closing `}`.
    fn body(&mut self, f: &mut FuncAst) {
        loop {
            self.skip_newlines();
            let t = self.cur();
            match t.tok {
                Tok::RBrace => {
                    f.end = self.bump().span;
                    return;
                }
                Tok::Eof | Tok::Fn => {
                    let msg = format!(
                        "expected `}}` to close function `@{}`, found {}",
                        f.name.text,
                        t.tok.describe()
                    );
                    self.sink.error(t.span, msg);
                    f.end = t.span;
                    return;
                }
                Tok::Ident(s) if self.peek2() == Tok::Colon => {
                    self.bump();
                    self.bump();
                    f.blocks.push(BlockAst {
                        label: Some(self.name(s, t)),
                        lines: Vec::new(),
                        span: t.span,
                        loc: t.loc,
                    });
                }
                _ => self.line_in_block(f),
            }
        }
    }

    /// Parse one instruction line into the current block, opening an
    /// unlabelled block (after reporting it) if there is none yet.
    fn line_in_block(&mut self, f: &mut FuncAst) {
        let t = self.cur();
        if f.blocks.is_empty() {
            self.sink.error(
                t.span,
                "expected a block label (such as `entry:`) before the first instruction",
            );
            f.blocks.push(BlockAst {
                label: None,
                lines: Vec::new(),
                span: t.span,
                loc: t.loc,
            });
        }
        let line = self.line();
        if let Some(b) = f.blocks.last_mut() {
            b.lines.push(line);
        }
    }

    // ---- instruction lines --------------------------------------------------

    fn line(&mut self) -> Line {
        let first = self.cur();
        let mut line = Line {
            dst: None,
            mnemonic: Name {
                text: String::new(),
                span: first.span,
            },
            body: Body::Broken,
            span: first.span,
            loc: first.loc,
        };
        match self.line_parts(&mut line) {
            Ok(body) => line.body = body,
            Err(Reported) => {
                self.skip_until(|t| matches!(t, Tok::Newline | Tok::RBrace | Tok::Fn));
            }
        }
        line
    }

    /// Fill in the destination and mnemonic and return the body.
    fn line_parts(&mut self, line: &mut Line) -> PResult<Body> {
        if let Tok::Reg(_) = self.peek() {
            line.dst = Some(self.reg()?);
            self.expect(Tok::Eq, "`=`")?;
        }
        let Tok::Ident(m) = self.peek() else {
            return self.fail("an instruction");
        };
        let t = self.bump();
        line.mnemonic = self.name(m, t);
        let body = match m {
            "phi" => Body::Phi(self.phi_arms()?),
            "call" => self.call()?,
            "jmp" => Body::Jmp(self.label()?),
            "br" => self.br()?,
            "ret" if self.at_line_end() => Body::Ret(None),
            "ret" => Body::Ret(Some(self.operand()?)),
            "call.acc" | "call.n" if self.register => self.call_into()?,
            "ret.n" if self.register => Body::RetN(self.operands()?),
            "blk.pop" if self.register => Body::BlkPop(self.label_list()?),
            _ => Body::Op(self.operands()?),
        };
        if !self.at_line_end() {
            return self.fail("end of line");
        }
        Ok(body)
    }

    fn at_line_end(&self) -> bool {
        matches!(self.peek(), Tok::Newline | Tok::RBrace | Tok::Eof)
    }

    /// Zero or more comma-separated operands up to the end of the line.
    fn operands(&mut self) -> PResult<Vec<Operand>> {
        let mut out = Vec::new();
        if self.at_line_end() {
            return Ok(out);
        }
        loop {
            out.push(self.operand()?);
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                _ if self.at_line_end() => return Ok(out),
                _ => return self.fail("`,` or end of line"),
            }
        }
    }

    fn phi_arms(&mut self) -> PResult<Vec<PhiArm>> {
        let mut arms = Vec::new();
        loop {
            self.expect(Tok::LBracket, "`[`")?;
            let label = self.label()?;
            self.expect(Tok::Colon, "`:`")?;
            let value = self.operand()?;
            self.expect(Tok::RBracket, "`]`")?;
            arms.push(PhiArm { label, value });
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                _ if self.at_line_end() => return Ok(arms),
                _ => return self.fail("`,` or end of line"),
            }
        }
    }

    fn call(&mut self) -> PResult<Body> {
        let callee = self.global()?;
        self.expect(Tok::LParen, "`(`")?;
        let mut args = Vec::new();
        if self.peek() != Tok::RParen {
            loop {
                args.push(self.operand()?);
                if self.peek() == Tok::Comma {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        Ok(Body::Call { callee, args })
    }

    /// `@g(args) -> [%a, ...]` after `call.acc` or `call.n`.
    fn call_into(&mut self) -> PResult<Body> {
        let Body::Call { callee, args } = self.call()? else {
            return Err(Reported);
        };
        self.expect(Tok::Arrow, "`->`")?;
        self.expect(Tok::LBracket, "`[`")?;
        let mut into = Vec::new();
        if self.peek() != Tok::RBracket {
            loop {
                into.push(self.operand()?);
                if self.peek() == Tok::Comma {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::RBracket, "`,` or `]`")?;
        Ok(Body::CallInto { callee, args, into })
    }

    /// `[label, ...]` after `blk.pop`.
    fn label_list(&mut self) -> PResult<Vec<Name>> {
        self.expect(Tok::LBracket, "`[`")?;
        let mut out = Vec::new();
        if self.peek() != Tok::RBracket {
            loop {
                out.push(self.label()?);
                if self.peek() == Tok::Comma {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::RBracket, "`,` or `]`")?;
        Ok(out)
    }

    fn br(&mut self) -> PResult<Body> {
        let cond = self.operand()?;
        self.expect(Tok::Comma, "`,`")?;
        let then_ = self.label()?;
        self.expect(Tok::Comma, "`,`")?;
        let else_ = self.label()?;
        Ok(Body::Br { cond, then_, else_ })
    }

    /// A register or a literal. An integer literal out of the i64 range is
    /// reported here and becomes [`Operand::Bad`], which is not a syntax
    /// error: the rest of the line still parses.
    fn operand(&mut self) -> PResult<Operand> {
        let t = self.cur();
        let lit = |lit: Lit, text: &str| Operand::Lit {
            lit,
            text: text.to_string(),
            span: t.span,
        };
        let op = match t.tok {
            Tok::Reg(s) => Operand::Reg(self.name(s, t)),
            Tok::True => lit(Lit::Bool(true), "true"),
            Tok::False => lit(Lit::Bool(false), "false"),
            Tok::Int(s) => match s.parse::<i64>() {
                Ok(n) => lit(Lit::Int(n), s),
                Err(_) => {
                    let msg = format!("integer literal `{s}` is out of range for i64");
                    self.sink.error(t.span, msg);
                    Operand::Bad(t.span)
                }
            },
            Tok::Float(s) => match crate::lexer::f64_value(s) {
                Ok(x) => lit(Lit::Float(x), s),
                Err(msg) => {
                    self.sink.error(t.span, msg);
                    Operand::Bad(t.span)
                }
            },
            _ => return self.fail("an operand (a register or a literal)"),
        };
        self.bump();
        Ok(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;

    fn parse_src(src: &str) -> (Vec<FuncAst>, Vec<String>) {
        let mut sink = Sink::default();
        let toks = lex(src, &mut sink);
        let (funcs, _) = parse(toks, &mut sink, false);
        let d = sink.finish("t", src);
        let msgs = d
            .items
            .iter()
            .map(|i| format!("{}:{}: {}", i.line, i.col, i.message))
            .collect();
        (funcs, msgs)
    }

    #[test]
    fn parses_rules_between_functions() {
        let mut sink = Sink::default();
        let src = "rule @f jvp @g\nfn @f() -> f64 {\nentry:\n  ret 1.0\n}\nrule @a jvp\n";
        let toks = lex(src, &mut sink);
        let (funcs, rules) = parse(toks, &mut sink, false);
        assert_eq!(funcs.len(), 1);
        assert_eq!(rules.len(), 1);
        assert_eq!(
            (rules[0].f.text.as_str(), rules[0].jvp.text.as_str()),
            ("f", "g")
        );
        assert_eq!(rules[0].loc, Loc::new(1, 1));
        let d = sink.finish("t", src);
        assert_eq!(d.items.len(), 1);
        assert!(
            d.items[0].message.contains("expected a function name"),
            "{:?}",
            d.items
        );
    }

    #[test]
    fn parses_a_function() {
        let (funcs, errs) = parse_src(
            "fn @f(%x: f64,\n %n: i64) -> f64 {\nentry:\n  %y = add %x, 1.0\n  ret %y\n}\n",
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(funcs.len(), 1);
        let f = &funcs[0];
        assert_eq!(f.name.text, "f");
        assert_eq!(f.params.len(), 2);
        assert_eq!(f.ret, Some(Type::F64));
        assert_eq!(f.blocks.len(), 1);
        assert_eq!(f.blocks[0].lines.len(), 2);
        assert_eq!(f.blocks[0].lines[0].loc, Loc::new(4, 3));
        assert!(matches!(f.blocks[0].lines[1].body, Body::Ret(_)));
    }

    #[test]
    fn recovers_at_the_next_line() {
        let (funcs, errs) =
            parse_src("fn @f() -> f64 {\nentry:\n  %y = add 1.0 2.0\n  %z = add (\n  ret %y\n}\n");
        assert_eq!(
            errs,
            vec![
                "3:16: expected `,` or end of line, found f64 literal `2.0`",
                "4:12: expected an operand (a register or a literal), found `(`"
            ]
        );
        let lines = &funcs[0].blocks[0].lines;
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].body, Body::Broken);
        assert_eq!(lines[0].dst.as_ref().map(|d| d.text.as_str()), Some("y"));
    }

    #[test]
    fn missing_brace_is_reported_at_the_next_function() {
        let (funcs, errs) = parse_src(
            "fn @f() -> f64 {\nentry:\n  ret 1.0\nfn @g() -> f64 {\nentry:\n  ret 2.0\n}",
        );
        assert_eq!(
            errs,
            vec!["4:1: expected `}` to close function `@f`, found `fn`"]
        );
        assert_eq!(funcs.len(), 2);
    }

    #[test]
    fn bad_header_still_parses_the_body() {
        let (funcs, errs) = parse_src("fn @f(%x f64) -> f64 {\nentry:\n  ret %x\n}\n");
        assert_eq!(errs, vec!["1:10: expected `:`, found `f64`"]);
        assert!(!funcs[0].header_ok);
        assert_eq!(funcs[0].blocks.len(), 1);
    }
}
