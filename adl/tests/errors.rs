//! Data-driven negative tests: every `tests/errors/*.adl` file (one per
//! class of error) must fail to compile with exactly the diagnostics its
//! directives announce, rendered as the assembler renders `.adasm` ones.
//!
//! A directive is a comment `// error: LINE:COL: TEXT` anywhere in the file:
//! some diagnostic must be at LINE:COL with TEXT in its message. Every
//! diagnostic must be announced by a directive, and every directive must
//! match a diagnostic (one each).

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
struct Expected {
    line: u32,
    col: u32,
    text: String,
}

fn directives(src: &str) -> Vec<Expected> {
    let mut out = Vec::new();
    for (i, l) in src.lines().enumerate() {
        let Some((_, rest)) = l.split_once("// error:") else {
            continue;
        };
        let mut parts = rest.trim().splitn(3, ':');
        let (Some(line), Some(col), Some(text)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("line {}: malformed directive {l:?}", i + 1);
        };
        out.push(Expected {
            line: line.trim().parse().expect("directive line number"),
            col: col.trim().parse().expect("directive column"),
            text: text.trim().to_string(),
        });
    }
    out
}

fn error_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/errors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("tests/errors exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "adl"))
        .collect();
    files.sort();
    files
}

/// The mismatches between a file's directives and its diagnostics.
fn check_file(path: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(path).expect("readable");
    let name = path
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let mut expected = directives(&src);
    let mut problems = Vec::new();
    if expected.is_empty() {
        problems.push(format!("{name}: no `// error:` directives"));
    }
    let diags = match adl::compile(&src, &name) {
        Ok(_) => {
            problems.push(format!("{name}: compiled without errors"));
            return problems;
        }
        Err(d) => d,
    };
    check_render(&diags, &name, &mut problems);
    for d in &diags.items {
        let found = expected
            .iter()
            .position(|e| e.line == d.line && e.col == d.col && d.message.contains(&e.text));
        match found {
            Some(i) => {
                expected.remove(i);
            }
            None => problems.push(format!(
                "{name}: unexpected {}:{}: {}",
                d.line, d.col, d.message
            )),
        }
    }
    for e in expected {
        problems.push(format!("{name}: missing {}:{}: {}", e.line, e.col, e.text));
    }
    problems
}

/// Each rendered diagnostic as `testkit::rendering_problems` checks it.
fn check_render(diags: &assembler::Diagnostics, name: &str, problems: &mut Vec<String>) {
    let items: Vec<(u32, u32, &str)> = diags
        .items
        .iter()
        .map(|d| (d.line, d.col, d.message.as_str()))
        .collect();
    problems.extend(testkit::rendering_problems(&diags.render(), name, &items));
}

#[test]
fn error_files_report_exactly_their_directives() {
    let files = error_files();
    assert!(files.len() >= 12, "only {} error files", files.len());
    let problems: Vec<String> = files.iter().flat_map(|f| check_file(f)).collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn directives_parse() {
    let d = directives("  let y = x * 2; // error: 4:18: write `2.0`\n// error: 1:1: x: y");
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
