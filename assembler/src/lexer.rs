//! The lexer: `.adasm` text to tokens (with logos).
//!
//! Newlines are tokens because an instruction ends at the end of its line;
//! other whitespace and `;` comments are skipped. Characters that start no
//! token are reported once per run and become a single [`Tok::Error`] token,
//! so the parser can abandon that line without reporting it a second time.
//! A byte-order mark is not whitespace: [`crate::decode`] drops one at the
//! start of a file, and any other is reported.

use crate::diag::{Cursor, Sink, Span};
use logos::Logos;
use vm::ir::Loc;

/// One kind of token; names and literals borrow their text from the source.
#[derive(Logos, Clone, Copy, Debug, PartialEq)]
#[logos(skip r"[ \t\r\x0B\x0C]+")]
#[logos(skip(r";[^\n]*", allow_greedy = true))]
pub enum Tok<'s> {
    #[token("\n")]
    Newline,
    #[token("fn")]
    Fn,
    #[token("true")]
    True,
    #[token("false")]
    False,
    /// `@name`, without the `@`.
    #[regex(r"@[A-Za-z0-9_.]+", |lex| lex.slice().get(1..).unwrap_or(""))]
    Global(&'s str),
    /// `%name`, without the `%`.
    #[regex(r"%[A-Za-z0-9_.]+", |lex| lex.slice().get(1..).unwrap_or(""))]
    Reg(&'s str),
    /// Labels, mnemonics and type names.
    #[regex(r"[A-Za-z_.][A-Za-z0-9_.]*", |lex| lex.slice())]
    Ident(&'s str),
    /// An integer literal (i64), sign included.
    #[regex(r"-?[0-9]+", |lex| lex.slice())]
    Int(&'s str),
    /// An f64 literal: digits with a fraction or an exponent, `inf`, `-inf`
    /// or `nan`.
    #[regex(r"-?[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?", |lex| lex.slice())]
    #[regex(r"-?[0-9]+[eE][+-]?[0-9]+", |lex| lex.slice())]
    #[token("inf", |lex| lex.slice())]
    #[token("-inf", |lex| lex.slice())]
    #[token("nan", |lex| lex.slice())]
    Float(&'s str),
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(":")]
    Colon,
    #[token(",")]
    Comma,
    #[token("=")]
    Eq,
    #[token("->")]
    Arrow,
    /// Characters that start no token (already reported by the lexer).
    Error,
    /// The end of the input (never produced by logos; see [`Token::eof`]).
    Eof,
}

impl Tok<'_> {
    /// How the token is named in "expected X, found Y" messages.
    pub fn describe(self) -> String {
        match self {
            Tok::Newline => "end of line".to_string(),
            Tok::Fn => "`fn`".to_string(),
            Tok::True => "`true`".to_string(),
            Tok::False => "`false`".to_string(),
            Tok::Global(s) => format!("`@{s}`"),
            Tok::Reg(s) => format!("register `%{s}`"),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(s) => format!("integer literal `{s}`"),
            Tok::Float(s) => format!("f64 literal `{s}`"),
            Tok::LParen => "`(`".to_string(),
            Tok::RParen => "`)`".to_string(),
            Tok::LBrace => "`{`".to_string(),
            Tok::RBrace => "`}`".to_string(),
            Tok::LBracket => "`[`".to_string(),
            Tok::RBracket => "`]`".to_string(),
            Tok::Colon => "`:`".to_string(),
            Tok::Comma => "`,`".to_string(),
            Tok::Eq => "`=`".to_string(),
            Tok::Arrow => "`->`".to_string(),
            Tok::Error => "an invalid character".to_string(),
            Tok::Eof => "end of file".to_string(),
        }
    }
}

/// A token with its byte span and the line and column where it starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Token<'s> {
    pub tok: Tok<'s>,
    pub span: Span,
    pub loc: Loc,
}

/// Split `src` into tokens, reporting characters that start no token.
pub(crate) fn lex<'s>(src: &'s str, sink: &mut Sink) -> Vec<Token<'s>> {
    let mut out: Vec<Token<'s>> = Vec::new();
    let mut cursor = Cursor::default();
    let mut lexer = Tok::lexer(src);
    while let Some(result) = lexer.next() {
        let span = Span::new(lexer.span().start, lexer.span().end);
        let tok = result.unwrap_or(Tok::Error);
        // Adjacent bad characters form one error, not one per character.
        if tok == Tok::Error {
            if let Some(last) = out.last_mut() {
                if last.tok == Tok::Error && last.span.end == span.start {
                    last.span.end = span.end;
                    continue;
                }
            }
        }
        let (line, col) = cursor.advance_to(src, span.start);
        out.push(Token {
            tok,
            span,
            loc: Loc::new(line, col),
        });
    }
    for t in out.iter().filter(|t| t.tok == Tok::Error) {
        let text = src.get(t.span.start..t.span.end).unwrap_or("?");
        if text == "\u{FEFF}" {
            // Invisible when quoted; a file may start with one (see `decode`).
            sink.error(t.span, "unexpected byte-order mark (U+FEFF)");
            continue;
        }
        let what = if text.chars().count() == 1 {
            "character"
        } else {
            "characters"
        };
        sink.error(t.span, format!("unexpected {what} `{text}`"));
    }
    out
}

/// The value of a number literal as an f64, or why it has none: a
/// literal too large for an f64 (`1e999`) is an error, not infinity (write
/// `inf`), as an integer literal too large for an i64 is.
pub fn f64_value(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_infinite() && !text.trim_start_matches(['-', '+']).starts_with("inf") => Err(
            format!("`{text}` is out of range for f64 (write `inf` for infinity)"),
        ),
        Ok(x) => Ok(x),
        Err(_) => Err(format!("invalid number `{text}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok<'_>> {
        let mut sink = Sink::default();
        lex(src, &mut sink).into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn tokens_of_an_instruction() {
        assert_eq!(
            kinds("  %x.1 = add %a, -2 ; comment\n"),
            vec![
                Tok::Reg("x.1"),
                Tok::Eq,
                Tok::Ident("add"),
                Tok::Reg("a"),
                Tok::Comma,
                Tok::Int("-2"),
                Tok::Newline
            ]
        );
    }

    #[test]
    fn literals_and_keywords() {
        assert_eq!(
            kinds("2.0 -1.5e-3 1e7 inf -inf nan 3 true false fn info fnx"),
            vec![
                Tok::Float("2.0"),
                Tok::Float("-1.5e-3"),
                Tok::Float("1e7"),
                Tok::Float("inf"),
                Tok::Float("-inf"),
                Tok::Float("nan"),
                Tok::Int("3"),
                Tok::True,
                Tok::False,
                Tok::Fn,
                Tok::Ident("info"),
                Tok::Ident("fnx"),
            ]
        );
        assert_eq!(
            kinds("fn @f(%a: f64[]) -> f64 {}"),
            vec![
                Tok::Fn,
                Tok::Global("f"),
                Tok::LParen,
                Tok::Reg("a"),
                Tok::Colon,
                Tok::Ident("f64"),
                Tok::LBracket,
                Tok::RBracket,
                Tok::RParen,
                Tok::Arrow,
                Tok::Ident("f64"),
                Tok::LBrace,
                Tok::RBrace
            ]
        );
    }

    #[test]
    fn bad_characters_are_merged_and_reported() {
        let mut sink = Sink::default();
        let toks = lex("ret $$é %x", &mut sink);
        let kinds: Vec<_> = toks.iter().map(|t| t.tok).collect();
        assert_eq!(kinds, vec![Tok::Ident("ret"), Tok::Error, Tok::Reg("x")]);
        let d = sink.finish("f", "ret $$é %x");
        assert_eq!(d.items.len(), 1);
        assert_eq!(d.items[0].message, "unexpected characters `$$é`");
        assert_eq!(toks[2].loc, Loc::new(1, 9));
    }
}
