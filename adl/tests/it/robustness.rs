//! Property tests of the `.adl` front end:
//!
//! * random structured programs (lets, assignments, shadowing, `if`/`else
//!   if`/`else` with `&&`/`||`/`!`, `for` and `while` loops with `break`
//!   and `continue`, array reads and writes, calls of a helper, math
//!   built-ins) written as `.adl` text compile, build an engine (lowering
//!   and verification), print as `.adasm` that re-assembles to the same
//!   results, and their gradients agree with central finite differences
//!   (`testkit::fd`);
//! * random bytes and random token sequences never panic the front end and
//!   never produce an internal error.

use ad::Engine;
use proptest::prelude::*;
use testkit::fd::{check, Verdict};
use testkit::gen::Rng;
use vm::{ir::FuncId, Value};

/// A random `.adl` program: `fn f(x: f64, y: f64, xs: f64[]) -> f64`
/// (with `xs` of length 3) and a smooth helper `g`.
struct Gen {
    rng: Rng,
    fresh: usize,
    text: String,
}

impl Gen {
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.rng.below(items.len())]
    }

    fn float(&mut self) -> String {
        format!("{:.2}", self.rng.float(-1.5, 1.5))
    }

    /// A smooth f64 expression over `vars`.
    fn expr(&mut self, vars: &[String], depth: u32) -> String {
        if depth == 0 || self.rng.chance(0.3) {
            return match self.rng.below(4) {
                0 => self.float(),
                1 => format!("xs[{}]", self.rng.below(3)),
                _ => vars[self.rng.below(vars.len())].clone(),
            };
        }
        let a = self.expr(vars, depth - 1);
        match self.rng.below(9) {
            0 => format!("({a} + {})", self.expr(vars, depth - 1)),
            1 => format!("({a} - {})", self.expr(vars, depth - 1)),
            2 => format!("({a} * {})", self.expr(vars, depth - 1)),
            3 => format!("{a} / (2.0 + sin({}))", self.expr(vars, depth - 1)),
            4 => format!("{}({a})", self.pick(&["sin", "cos", "tanh", "atan"])),
            5 => format!("exp(tanh({a}))"),
            6 => format!("g({a}, {})", self.expr(vars, depth - 1)),
            7 => format!("-{a}"),
            _ => format!("sqrt(1.0 + {a} * {a})"),
        }
    }

    fn cond(&mut self, vars: &[String]) -> String {
        let c = |g: &mut Gen| {
            let op = g.pick(&["<", "<=", ">", ">="]);
            format!("{} {op} {}", g.expr(vars, 1), g.float())
        };
        match self.rng.below(4) {
            0 => format!("{} && {}", c(self), c(self)),
            1 => format!("{} || !({})", c(self), c(self)),
            _ => c(self),
        }
    }

    fn indent(&mut self, level: usize) {
        self.text.push_str(&"    ".repeat(level));
    }

    /// Statements at `level`; `vars` are the f64 variables in scope;
    /// `in_loop` allows `break` and `continue`.
    fn block(&mut self, vars: &mut Vec<String>, level: usize, depth: u32, in_loop: bool) {
        let n = 1 + self.rng.below(4);
        for _ in 0..n {
            self.stmt(vars, level, depth, in_loop);
        }
    }

    fn stmt(&mut self, vars: &mut Vec<String>, level: usize, depth: u32, in_loop: bool) {
        self.indent(level);
        let choice = if depth == 0 {
            self.rng.below(4)
        } else {
            self.rng.below(9)
        };
        match choice {
            0 => {
                // A new name, or a shadowing `let` that reads the old one.
                let e = self.expr(vars, 2);
                let name = if self.rng.chance(0.3) {
                    vars[self.rng.below(vars.len())].clone()
                } else {
                    self.fresh += 1;
                    format!("v{}", self.fresh)
                };
                self.text.push_str(&format!("let {name} = {e};\n"));
                if !vars.contains(&name) {
                    vars.push(name);
                }
            }
            1 | 2 => {
                let v = vars[self.rng.below(vars.len())].clone();
                let e = self.expr(vars, 2);
                self.text.push_str(&format!("{v} = {e};\n"));
            }
            3 => {
                let e = self.expr(vars, 2);
                self.text
                    .push_str(&format!("xs[{}] = {e};\n", self.rng.below(3)));
            }
            4 | 5 => {
                let c = self.cond(vars);
                self.text.push_str(&format!("if {c} {{\n"));
                self.block(&mut vars.clone(), level + 1, depth - 1, in_loop);
                if self.rng.chance(0.3) {
                    self.indent(level);
                    let c2 = self.cond(vars);
                    self.text.push_str(&format!("}} else if {c2} {{\n"));
                    self.block(&mut vars.clone(), level + 1, depth - 1, in_loop);
                }
                if self.rng.chance(0.5) {
                    self.indent(level);
                    self.text.push_str("} else {\n");
                    self.block(&mut vars.clone(), level + 1, depth - 1, in_loop);
                }
                self.indent(level);
                self.text.push_str("}\n");
            }
            6 => {
                self.fresh += 1;
                let i = format!("i{}", self.fresh);
                let n = 1 + self.rng.below(3);
                self.text.push_str(&format!("for {i} in 0..{n} {{\n"));
                let mut inner = vars.clone();
                self.indent(level + 1);
                self.text.push_str(&format!("let f{i} = f64({i});\n"));
                inner.push(format!("f{i}"));
                self.block(&mut inner, level + 1, depth - 1, true);
                self.indent(level);
                self.text.push_str("}\n");
            }
            7 => {
                self.fresh += 1;
                let k = format!("k{}", self.fresh);
                let n = 1 + self.rng.below(3);
                self.text.push_str(&format!("let {k} = 0;\n"));
                self.indent(level);
                self.text.push_str(&format!("while {k} < {n} {{\n"));
                self.indent(level + 1);
                self.text.push_str(&format!("{k} = {k} + 1;\n"));
                self.block(&mut vars.clone(), level + 1, depth - 1, true);
                self.indent(level);
                self.text.push_str("}\n");
            }
            _ if in_loop => {
                let c = self.cond(vars);
                let what = self.pick(&["break", "continue"]);
                self.text.push_str(&format!("if {c} {{ {what}; }}\n"));
            }
            _ => {
                let c = self.cond(vars);
                let e = self.expr(vars, 2);
                self.text.push_str(&format!("if {c} {{ return {e}; }}\n"));
            }
        }
    }
}

fn program(seed: u64) -> String {
    let mut g = Gen {
        rng: Rng::new(seed),
        fresh: 0,
        text: String::new(),
    };
    g.text
        .push_str("fn f(x: f64, y: f64, xs: f64[]) -> f64 {\n    let s = 0.0;\n");
    let mut vars = vec!["x".to_string(), "y".to_string(), "s".to_string()];
    g.block(&mut vars, 1, 3, false);
    let e = g.expr(&vars, 2);
    g.text
        .push_str(&format!("    return s + {e} + xs[0] * xs[2];\n}}\n\n"));
    g.text
        .push_str("fn g(a: f64, b: f64) -> f64 {\n    return a * tanh(b) + sin(a);\n}\n");
    g.text
}

fn close_grad(a: &[Option<Value>], b: &[Option<Value>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| testkit::same_gradient(x, y))
}

fn random_program_holds(seed: u64) {
    let src = program(seed);
    let module = adl::compile(&src, "random.adl")
        .unwrap_or_else(|d| panic!("does not compile:\n{}\n{src}", d.render()));
    let text = assembler::print_module(&module);
    let again = assembler::assemble(&text, "ir.adasm")
        .unwrap_or_else(|d| panic!("--ir text does not assemble:\n{}\n{text}", d.render()));
    let mut engine = Engine::new(module).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let mut twin = Engine::new(again).expect("the --ir text builds");
    let mut rng = Rng::new(seed ^ 0x5eed);
    let args = vec![
        Value::F64(rng.float(-1.0, 1.0)),
        Value::F64(rng.float(-1.0, 1.0)),
        Value::Arr((0..3).map(|_| rng.float(-1.0, 1.0)).collect()),
    ];
    let f = FuncId(0);
    let g = engine
        .grad(f, &args)
        .unwrap_or_else(|e| panic!("{e}\n{src}"));
    let g2 = twin.grad(f, &args).expect("the --ir text differentiates");
    assert_eq!(g.value.to_bits(), g2.value.to_bits(), "{src}");
    assert!(close_grad(&g.grad, &g2.grad), "{src}");
    let verdict = check(
        |a| match engine.run(f, a) {
            Ok(Value::F64(y)) => Some(y),
            _ => None,
        },
        &args,
        &g.grad,
    );
    if let Verdict::Disagree(why) = verdict {
        panic!(
            "AD disagrees with finite differences: {why}\n{src}\nat {args:?}\n{:?}",
            g.grad
        );
    }
}

#[test]
fn a_sample_of_random_programs() {
    for seed in 0..testkit::env_u64("ADL_RANDOM_CASES", 200) {
        random_program_holds(seed);
    }
}

const TOKENS: &[&str] = &[
    "fn", "f", "g", "x", "(", ")", "{", "}", "[", "]", ":", ";", ",", "->", "..", "=", "+", "-",
    "*", "/", "%", "<", "<=", "==", "!=", "&&", "||", "!", "let", "if", "else", "while", "for",
    "in", "break", "continue", "return", "rule", "jvp", "f64", "i64", "bool", "1", "2.5", "true",
    "inf", "nan", "sin", "zeros", "len", "select", "min", "pow", "\n", "//", "$",
];

fn no_internal_error(src: &str) {
    if let Err(d) = adl::compile(src, "p.adl") {
        let r = d.render();
        assert!(!r.contains("internal error"), "{r}\n{src:?}");
        assert!(!d.items.is_empty());
    }
    let _ = adl::compile_expr(src, "<input>", "e", &[], &vm::ir::Module::default());
    let _ = adl::is_expression(src);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(testkit::env_u64("ADL_PROPTEST_CASES", 64) as u32))]

    #[test]
    fn random_structured_programs_compile_and_differentiate(seed in any::<u64>()) {
        random_program_holds(seed);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        no_internal_error(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_token_sequences_never_panic(toks in proptest::collection::vec(0..TOKENS.len(), 0..120)) {
        let src: Vec<&str> = toks.iter().map(|&i| TOKENS[i]).collect();
        no_internal_error(&src.join(" "));
    }

    #[test]
    fn mutated_programs_never_panic(seed in any::<u64>(), cut in 0usize..2000, del in 0usize..20) {
        let src = program(seed);
        let at = src.char_indices().map(|(i, _)| i).nth(cut % src.chars().count().max(1)).unwrap_or(0);
        let end = src[at..].char_indices().map(|(i, _)| at + i).nth(del).unwrap_or(src.len());
        let mutated = format!("{}{}", &src[..at], &src[end..]);
        no_internal_error(&mutated);
    }
}

/// The generator makes what the module doc says: every construct occurs in
/// a small sample, and the finite-difference check rejects a wrong
/// gradient (so the property above can fail).
#[test]
fn the_generator_covers_the_constructs_and_the_check_can_fail() {
    let sample: String = (0..50).map(program).collect();
    for construct in [
        "while ",
        "for ",
        "else if",
        "} else {",
        "break;",
        "continue;",
        "&&",
        "||",
        "!(",
        "xs[",
        "g(",
        "return",
    ] {
        assert!(
            sample.contains(construct),
            "no {construct:?} in 50 programs"
        );
    }
    let src = program(7);
    let module = adl::compile(&src, "p.adl").expect("compiles");
    let mut engine = Engine::new(module).expect("builds");
    let args = vec![
        Value::F64(0.3),
        Value::F64(-0.4),
        Value::Arr(vec![0.1, 0.2, 0.3]),
    ];
    let g = engine.grad(FuncId(0), &args).expect("grad");
    let mut wrong = g.grad.clone();
    if let Some(Some(Value::Arr(xs))) = wrong.get_mut(2) {
        xs[0] += 1.0;
    }
    let verdict = check(
        |a| match engine.run(FuncId(0), a) {
            Ok(Value::F64(y)) => Some(y),
            _ => None,
        },
        &args,
        &wrong,
    );
    assert!(matches!(verdict, Verdict::Disagree(_)), "{verdict:?}");
}
