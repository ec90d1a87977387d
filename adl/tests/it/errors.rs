//! Data-driven negative tests: every `tests/errors/*.adl` file (one per
//! class of error) must fail to compile with exactly the diagnostics its
//! directives (`// error: LINE:COL: TEXT`) announce, rendered as the
//! assembler renders `.adasm` ones (`testkit::errfiles`).

use std::path::Path;
use testkit::errfiles::{self, Expected, Rejection};

/// The directive marker of adl files.
const MARKER: &str = "// error:";

/// The `.adl` front end on an error file.
fn compile(src: &str, name: &str) -> Option<Rejection> {
    let diags = adl::compile(src, name).err()?;
    Some(Rejection {
        rendered: diags.render(),
        items: diags
            .items
            .iter()
            .map(|d| (d.line, d.col, d.message.clone()))
            .collect(),
    })
}

#[test]
fn error_files_report_exactly_their_directives() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/errors");
    let files = errfiles::error_files(&dir, "adl");
    assert!(files.len() >= 12, "only {} error files", files.len());
    let problems: Vec<String> = files
        .iter()
        .flat_map(|f| errfiles::file_problems(f, MARKER, compile))
        .collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn directives_parse() {
    let d = errfiles::directives(
        "  let y = x * 2; // error: 4:18: write `2.0`\n// error: 1:1: x: y",
        MARKER,
    );
    assert_eq!(
        d,
        vec![
            Expected {
                line: 4,
                col: 18,
                text: "write `2.0`".to_string()
            },
            Expected {
                line: 1,
                col: 1,
                text: "x: y".to_string()
            },
        ]
    );
}

/// Nesting beyond the parser's limits is an error, not a stack overflow.
#[test]
fn deep_nesting_is_an_error() {
    let deep_parens = format!(
        "fn f() -> f64 {{ return {}1.0{}; }}",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    let long_sum = format!(
        "fn f(x: f64) -> f64 {{ return x{}; }}",
        " + x".repeat(10_000)
    );
    let deep_blocks = format!(
        "fn f() {{ {}{} }}",
        "if true { ".repeat(5_000),
        "}".repeat(5_000)
    );
    let negations = format!("fn f(x: f64) -> f64 {{ return {}x; }}", "-".repeat(10_000));
    let chain: String = (0..5000)
        .map(|i| format!("if x < {i}.0 {{ return 1.0; }} else "))
        .collect();
    let long_chain = format!("fn f(x: f64) -> f64 {{ {chain} {{ return -1.0; }} }}");
    for src in [deep_parens, long_sum, deep_blocks, negations, long_chain] {
        let e = adl::compile(&src, "deep.adl").expect_err("too deep");
        assert!(
            e.render().contains("are not supported") || e.render().contains("is not supported"),
            "{}",
            e.render()
        );
    }
}

/// Nesting just within the limits compiles (and runs).
#[test]
fn nesting_within_the_limits_compiles() {
    let ifs = format!(
        "fn f(x: f64) -> f64 {{ let s = 0.0; {} s = s + x; {} return s; }}",
        "if x > 0.0 { ".repeat(250),
        "}".repeat(250)
    );
    let chain: String = (0..2000)
        .map(|i| format!("if x < {i}.0 {{ return {i}.0; }} else "))
        .collect();
    let else_ifs = format!("fn f(x: f64) -> f64 {{ {chain} {{ return -1.0; }} }}");
    let parens = format!(
        "fn f(x: f64) -> f64 {{ return {}x{}; }}",
        "(".repeat(200),
        ")".repeat(200)
    );
    let sum = format!("fn f(x: f64) -> f64 {{ return x{}; }}", " + x".repeat(900));
    for src in [ifs, else_ifs, parens, sum] {
        let m = adl::compile(&src, "deep.adl").unwrap_or_else(|d| panic!("{}", d.render()));
        let mut e = ad::Engine::new(m).expect("builds");
        let v = e
            .run(vm::ir::FuncId(0), &[vm::Value::F64(0.5)])
            .expect("runs");
        assert!(matches!(v, vm::Value::F64(_)));
    }
}
