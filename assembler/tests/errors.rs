//! Data-driven negative tests: every `tests/errors/*.adasm` file must fail
//! to assemble with exactly the diagnostics its directives announce.
//!
//! A directive is a comment `; error: LINE:COL: TEXT` anywhere in the file:
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
        let Some((_, rest)) = l.split_once("; error:") else {
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
        .filter(|p| p.extension().is_some_and(|x| x == "adasm"))
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
        problems.push(format!("{name}: no `; error:` directives"));
    }
    let diags = match assembler::assemble(&src, &name) {
        Ok(_) => {
            problems.push(format!("{name}: assembled without errors"));
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
    assert!(files.len() >= 20, "only {} error files", files.len());
    let problems: Vec<String> = files.iter().flat_map(|f| check_file(f)).collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn directives_parse() {
    let d = directives("  %x = add %a, 2 ; error: 4:18: write `2.0`\n; error: 1:1: x: y");
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
