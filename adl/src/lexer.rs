//! The lexer: `.adl` text to tokens (with logos).
//!
//! Whitespace and `//` comments are skipped. Characters that start no token
//! are reported once per run of them and become one [`Tok::Error`] token,
//! which the parser skips without a second message.

use crate::diag::Errors;
use assembler::Span;
use logos::Logos;

/// One kind of token; names and number literals borrow their text.
#[derive(Logos, Clone, Copy, Debug, PartialEq)]
#[logos(skip r"[ \t\r\n\x0B\x0C]+")]
#[logos(skip(r"//[^\n]*", allow_greedy = true))]
pub enum Tok<'s> {
    /// The keyword `fn`, which starts a function.
    #[token("fn")]
    Fn,
    /// The keyword `let`, which declares a variable.
    #[token("let")]
    Let,
    /// The keyword `if`.
    #[token("if")]
    If,
    /// The keyword `else`.
    #[token("else")]
    Else,
    /// The keyword `while`.
    #[token("while")]
    While,
    /// The keyword `for` (`for i in lo..hi`).
    #[token("for")]
    For,
    /// The keyword `in` of a `for` loop.
    #[token("in")]
    In,
    /// The keyword `break`.
    #[token("break")]
    Break,
    /// The keyword `continue`.
    #[token("continue")]
    Continue,
    /// The keyword `return`.
    #[token("return")]
    Return,
    /// The keyword `rule`, which starts a rule declaration (`rule f jvp f_jvp`).
    #[token("rule")]
    Rule,
    /// The literal `true`.
    #[token("true")]
    True,
    /// The literal `false`.
    #[token("false")]
    False,
    /// Names: variables, functions, built-ins and type names (`f64` is
    /// both a type and the conversion built-in).
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*", |lex| lex.slice())]
    Ident(&'s str),
    /// An integer literal (i64), without sign.
    #[regex(r"[0-9]+", |lex| lex.slice())]
    Int(&'s str),
    /// An f64 literal: digits with a fraction or an exponent (`inf` and
    /// `nan` are names the parser turns into literals).
    #[regex(r"[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?", |lex| lex.slice())]
    #[regex(r"[0-9]+[eE][+-]?[0-9]+", |lex| lex.slice())]
    Float(&'s str),
    /// `(`: opens a parameter list, an argument list or a parenthesised expression.
    #[token("(")]
    LParen,
    /// `)`: closes what `(` opened.
    #[token(")")]
    RParen,
    /// `{`: opens a block.
    #[token("{")]
    LBrace,
    /// `}`: closes a block.
    #[token("}")]
    RBrace,
    /// `[`: opens an index (`a[i]`) or an array type's brackets (`f64[]`).
    #[token("[")]
    LBracket,
    /// `]`: closes what `[` opened.
    #[token("]")]
    RBracket,
    /// `:` between a parameter and its type.
    #[token(":")]
    Colon,
    /// `;`: ends a statement.
    #[token(";")]
    Semi,
    /// `,` between parameters or arguments.
    #[token(",")]
    Comma,
    /// `->` before a function's result type.
    #[token("->")]
    Arrow,
    /// `..` between the bounds of a `for` range.
    #[token("..")]
    DotDot,
    /// `=` of a `let`, an assignment or an element store.
    #[token("=")]
    Assign,
    /// `+`: addition.
    #[token("+")]
    Plus,
    /// `-`: subtraction, or negation as a prefix.
    #[token("-")]
    Minus,
    /// `*`: multiplication.
    #[token("*")]
    Star,
    /// `/`: division.
    #[token("/")]
    Slash,
    /// `%`: remainder.
    #[token("%")]
    Percent,
    /// `<`: less than.
    #[token("<")]
    Lt,
    /// `<=`: less than or equal.
    #[token("<=")]
    Le,
    /// `>`: greater than.
    #[token(">")]
    Gt,
    /// `>=`: greater than or equal.
    #[token(">=")]
    Ge,
    /// `==`: equal.
    #[token("==")]
    EqEq,
    /// `!=`: not equal.
    #[token("!=")]
    Ne,
    /// `&&`: short-circuit and.
    #[token("&&")]
    AndAnd,
    /// `||`: short-circuit or.
    #[token("||")]
    OrOr,
    /// `!`: logical not.
    #[token("!")]
    Bang,
    /// Characters that start no token (already reported).
    Error,
    /// The end of the input.
    Eof,
}

impl Tok<'_> {
    /// How the token is named in "expected X, found Y" messages.
    pub fn describe(self) -> String {
        let fixed = match self {
            Tok::Ident(s) => return format!("`{s}`"),
            Tok::Int(s) => return format!("integer literal `{s}`"),
            Tok::Float(s) => return format!("f64 literal `{s}`"),
            Tok::Error => return "an invalid character".to_string(),
            Tok::Eof => return "end of file".to_string(),
            Tok::Fn => "fn",
            Tok::Let => "let",
            Tok::If => "if",
            Tok::Else => "else",
            Tok::While => "while",
            Tok::For => "for",
            Tok::In => "in",
            Tok::Break => "break",
            Tok::Continue => "continue",
            Tok::Return => "return",
            Tok::Rule => "rule",
            Tok::True => "true",
            Tok::False => "false",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Colon => ":",
            Tok::Semi => ";",
            Tok::Comma => ",",
            Tok::Arrow => "->",
            Tok::DotDot => "..",
            Tok::Assign => "=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Bang => "!",
        };
        format!("`{fixed}`")
    }
}

/// A token with its byte span.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Token<'s> {
    /// What the token is.
    pub tok: Tok<'s>,
    /// Where it is in the source text.
    pub span: Span,
}

/// Split `src` into tokens, reporting characters that start no token. The
/// last token is always [`Tok::Eof`].
pub fn lex<'s>(src: &'s str, errors: &mut Errors) -> Vec<Token<'s>> {
    let mut out: Vec<Token<'s>> = Vec::new();
    let mut lexer = Tok::lexer(src);
    let mut bad: Option<Span> = None;
    while let Some(result) = lexer.next() {
        let span = Span::new(lexer.span().start, lexer.span().end);
        match result {
            Ok(tok) => {
                if let Some(b) = bad.take() {
                    report_bad(src, b, errors);
                    out.push(Token {
                        tok: Tok::Error,
                        span: b,
                    });
                }
                out.push(Token { tok, span });
            }
            // Adjacent bad characters form one error.
            Err(()) => bad = Some(bad.map_or(span, |b| b.to(span))),
        }
    }
    if let Some(b) = bad.take() {
        report_bad(src, b, errors);
        out.push(Token {
            tok: Tok::Error,
            span: b,
        });
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(src.len(), src.len()),
    });
    out
}

fn report_bad(src: &str, span: Span, errors: &mut Errors) {
    let text = src.get(span.start..span.end).unwrap_or("?");
    let what = if text.chars().count() == 1 {
        "character"
    } else {
        "characters"
    };
    errors.error(span, format!("unexpected {what} `{}`", text.escape_debug()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok<'_>> {
        let mut e = Errors::default();
        lex(src, &mut e).into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn ranges_numbers_and_comments() {
        assert_eq!(
            kinds("0..n 1.5e3 // x\n<= 2e1"),
            vec![
                Tok::Int("0"),
                Tok::DotDot,
                Tok::Ident("n"),
                Tok::Float("1.5e3"),
                Tok::Le,
                Tok::Float("2e1"),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn bad_characters_are_one_error_per_run() {
        let mut e = Errors::default();
        let toks = lex("a $$ b #", &mut e);
        assert_eq!(toks.len(), 5);
        assert_eq!(e.len(), 2);
    }
}
