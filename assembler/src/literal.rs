//! Argument literals for the REPL and for test directives:
//! `@f(1.0, 2, true, [1.0, 2.5], -inf, nan)`.
//!
//! These use the assembler's own token syntax, but conversion to values is
//! more lenient than operands in a program: an integer literal is accepted
//! for an `f64` parameter and inside an array.

use crate::diag::Sink;
use crate::lexer::{lex, Tok, Token};
use std::fmt;
use vm::{Type, Value};

/// One argument literal.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// A number as written (`text`), whether it is an integer literal, and
    /// its value as an f64 (exact for integers up to 2^53).
    Num {
        /// The literal as written.
        text: String,
        /// Whether it is an integer literal (no `.`, no exponent).
        is_int: bool,
        /// Its value as an f64.
        value: f64,
    },
    /// `true` or `false`.
    Bool(bool),
    /// `[1.0, 2.5]`: an f64[] argument.
    Array(Vec<f64>),
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Num { text, .. } => f.write_str(text),
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::Array(xs) => write!(f, "{}", Value::Arr(xs.clone())),
        }
    }
}

/// Parse `@name(lit, ...)` (the `@` is optional) into the function name
/// without `@` and the argument literals.
pub fn parse_call(text: &str) -> Result<(String, Vec<Literal>), String> {
    let mut sink = Sink::default();
    let toks: Vec<Token<'_>> = lex(text, &mut sink)
        .into_iter()
        .filter(|t| t.tok != Tok::Newline)
        .collect();
    if !sink.is_empty() {
        let d = sink.finish("", text);
        let first = d.items.first().map_or(String::new(), |i| i.message.clone());
        return Err(first);
    }
    CallParser { toks, pos: 0 }.call()
}

struct CallParser<'s> {
    toks: Vec<Token<'s>>,
    pos: usize,
}

impl<'s> CallParser<'s> {
    fn peek(&self) -> Tok<'s> {
        self.toks.get(self.pos).map_or(Tok::Eof, |t| t.tok)
    }

    fn bump(&mut self) -> Tok<'s> {
        let t = self.peek();
        self.pos += 1;
        t
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        let col = self
            .toks
            .get(self.pos)
            .map_or(String::new(), |t| format!(" at column {}", t.loc.col));
        Err(format!(
            "expected {what}, found {}{col}",
            self.peek().describe()
        ))
    }

    fn expect(&mut self, want: Tok<'static>, what: &str) -> Result<(), String> {
        if self.peek() == want {
            self.bump();
            Ok(())
        } else {
            self.err(what)
        }
    }

    fn call(&mut self) -> Result<(String, Vec<Literal>), String> {
        let name = match self.peek() {
            Tok::Global(s) | Tok::Ident(s) => s.to_string(),
            _ => return self.err("a function name such as `@f`"),
        };
        self.bump();
        self.expect(Tok::LParen, "`(`")?;
        let mut args = Vec::new();
        if self.peek() != Tok::RParen {
            loop {
                args.push(self.literal()?);
                if self.peek() != Tok::Comma {
                    break;
                }
                self.bump();
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        self.expect(Tok::Eof, "end of input")?;
        Ok((name, args))
    }

    fn literal(&mut self) -> Result<Literal, String> {
        match self.peek() {
            Tok::True => {
                self.bump();
                Ok(Literal::Bool(true))
            }
            Tok::False => {
                self.bump();
                Ok(Literal::Bool(false))
            }
            Tok::LBracket => self.array(),
            _ => self.number(),
        }
    }

    fn number(&mut self) -> Result<Literal, String> {
        let (text, is_int) = match self.peek() {
            Tok::Int(s) => (s, true),
            Tok::Float(s) => (s, false),
            _ => return self.err("a literal (number, `true`, `false` or `[...]`)"),
        };
        let value = crate::lexer::f64_value(text).map_err(|e| {
            let col = self.toks.get(self.pos).map_or(0, |t| t.loc.col);
            format!("{e} at column {col}")
        })?;
        self.bump();
        Ok(Literal::Num {
            text: text.to_string(),
            is_int,
            value,
        })
    }

    fn array(&mut self) -> Result<Literal, String> {
        self.bump();
        let mut xs = Vec::new();
        if self.peek() != Tok::RBracket {
            loop {
                if !matches!(self.peek(), Tok::Int(_) | Tok::Float(_)) {
                    return self.err("a number");
                }
                if let Literal::Num { value, .. } = self.number()? {
                    xs.push(value);
                }
                if self.peek() != Tok::Comma {
                    break;
                }
                self.bump();
            }
        }
        self.expect(Tok::RBracket, "`,` or `]`")?;
        Ok(Literal::Array(xs))
    }
}

/// Convert argument literals to values for parameters of the given types.
/// The count must match; an `i64` parameter needs an integer literal in
/// range; an `f64` parameter takes any number; `f64[]` takes an array;
/// `bool` takes `true` or `false`.
pub fn literals_to_values(params: &[Type], lits: &[Literal]) -> Result<Vec<Value>, String> {
    if params.len() != lits.len() {
        return Err(format!(
            "expected {} argument{}, found {}",
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            lits.len()
        ));
    }
    params
        .iter()
        .zip(lits)
        .enumerate()
        .map(|(i, (ty, lit))| to_value(*ty, lit).map_err(|e| format!("argument {}: {e}", i + 1)))
        .collect()
}

fn to_value(ty: Type, lit: &Literal) -> Result<Value, String> {
    match (ty, lit) {
        (Type::F64, Literal::Num { value, .. }) => Ok(Value::F64(*value)),
        (
            Type::I64,
            Literal::Num {
                text, is_int: true, ..
            },
        ) => text
            .parse::<i64>()
            .map(Value::I64)
            .map_err(|_| format!("integer `{text}` is out of range for i64")),
        (Type::I64, Literal::Num { text, .. }) => {
            Err(format!("expected an integer for i64, found `{text}`"))
        }
        (Type::Bool, Literal::Bool(b)) => Ok(Value::Bool(*b)),
        (Type::Arr, Literal::Array(xs)) => Ok(Value::Arr(xs.clone())),
        (ty, lit) => Err(format!("expected {ty}, found `{lit}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(text: &str, is_int: bool, value: f64) -> Literal {
        Literal::Num {
            text: text.to_string(),
            is_int,
            value,
        }
    }

    #[test]
    fn parses_every_kind_of_literal() {
        let (name, lits) =
            parse_call("@f(1.0, 2, true, [1.0, 2.5, 3], -inf, nan, false, [])").expect("parses");
        assert_eq!(name, "f");
        assert_eq!(lits.len(), 8);
        assert_eq!(lits[0], num("1.0", false, 1.0));
        assert_eq!(lits[1], num("2", true, 2.0));
        assert_eq!(lits[2], Literal::Bool(true));
        assert_eq!(lits[3], Literal::Array(vec![1.0, 2.5, 3.0]));
        assert_eq!(lits[4], num("-inf", false, f64::NEG_INFINITY));
        assert!(matches!(lits[5], Literal::Num { value, .. } if value.is_nan()));
        assert_eq!(lits[7], Literal::Array(vec![]));
    }

    #[test]
    fn name_without_at_and_no_arguments() {
        assert_eq!(parse_call("  main()  "), Ok(("main".to_string(), vec![])));
        assert_eq!(
            parse_call("@pow.v2(1e3)").map(|c| c.0),
            Ok("pow.v2".to_string())
        );
    }

    #[test]
    fn syntax_errors_are_messages() {
        for (text, want) in [
            ("", "expected a function name"),
            ("@f", "expected `(`"),
            ("@f(1.0", "expected `,` or `)`, found end of file"),
            ("@f(1.0,)", "expected a literal"),
            ("@f(1.0) x", "expected end of input, found `x` at column 9"),
            ("@f([1.0, true])", "expected a number"),
            ("@f([1.0", "expected `,` or `]`"),
            ("@f(1 2)", "expected `,` or `)`, found integer literal `2`"),
            ("@f($)", "unexpected character `$`"),
            ("@f(%x)", "expected a literal"),
            (
                "@f(1e999)",
                "`1e999` is out of range for f64 (write `inf` for infinity) at column 4",
            ),
            ("@f([1.0, -1e400])", "`-1e400` is out of range for f64"),
        ] {
            match parse_call(text) {
                Ok(r) => panic!("{text:?} parsed as {r:?}"),
                Err(e) => assert!(e.contains(want), "{text:?}: {e}"),
            }
        }
    }

    #[test]
    fn converts_to_values_leniently() {
        let (_, lits) = parse_call("@f(1, 2, true, [1, 2.5])").expect("parses");
        let vals = literals_to_values(&[Type::F64, Type::I64, Type::Bool, Type::Arr], &lits);
        assert_eq!(
            vals,
            Ok(vec![
                Value::F64(1.0),
                Value::I64(2),
                Value::Bool(true),
                Value::Arr(vec![1.0, 2.5])
            ])
        );
        let (_, lits) = parse_call("@f(-9223372036854775808)").expect("parses");
        assert_eq!(
            literals_to_values(&[Type::I64], &lits),
            Ok(vec![Value::I64(i64::MIN)])
        );
    }

    #[test]
    fn conversion_errors() {
        let cases: &[(&str, &[Type], &str)] = &[
            ("@f(1.0)", &[], "expected 0 arguments, found 1"),
            ("@f()", &[Type::F64], "expected 1 argument, found 0"),
            (
                "@f(2.5)",
                &[Type::I64],
                "argument 1: expected an integer for i64, found `2.5`",
            ),
            (
                "@f(9223372036854775808)",
                &[Type::I64],
                "out of range for i64",
            ),
            (
                "@f(1.0, 1)",
                &[Type::F64, Type::Bool],
                "argument 2: expected bool, found `1`",
            ),
            ("@f(true)", &[Type::F64], "expected f64, found `true`"),
            ("@f(1.0)", &[Type::Arr], "expected f64[], found `1.0`"),
            ("@f([1.0])", &[Type::F64], "expected f64, found `[1]`"),
        ];
        for (text, params, want) in cases {
            let (_, lits) = parse_call(text).expect("parses");
            match literals_to_values(params, &lits) {
                Ok(v) => panic!("{text}: converted to {v:?}"),
                Err(e) => assert!(e.contains(want), "{text}: {e}"),
            }
        }
    }
}
