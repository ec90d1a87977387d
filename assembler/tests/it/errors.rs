//! Data-driven negative tests: every `tests/errors/*.adasm` file must fail
//! to assemble with exactly the diagnostics its directives (`; error:
//! LINE:COL: TEXT`) announce, as `testkit::errfiles` checks it.

use std::path::Path;
use testkit::errfiles::{self, Expected, Rejection};

/// The directive marker of adasm files.
const MARKER: &str = "; error:";

/// The assembler on an error file.
fn compile(src: &str, name: &str) -> Option<Rejection> {
    let diags = assembler::assemble(src, name).err()?;
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
    let files = errfiles::error_files(&dir, "adasm");
    assert!(files.len() >= 20, "only {} error files", files.len());
    let problems: Vec<String> = files
        .iter()
        .flat_map(|f| errfiles::file_problems(f, MARKER, compile))
        .collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The assembler on an error file of register code.
fn compile_register(src: &str, name: &str) -> Option<Rejection> {
    let options = assembler::Options {
        code: assembler::Code::Register,
    };
    let diags = assembler::assemble_with(src, name, &options).err()?;
    Some(Rejection {
        rendered: diags.render(),
        items: diags
            .items
            .iter()
            .map(|d| (d.line, d.col, d.message.clone()))
            .collect(),
    })
}

/// `tests/errors_register/*.adasm`: register code
/// (`assembler::Code::Register`) rejected with exactly the diagnostics
/// announced, the lowering's and the verifier's included.
#[test]
fn register_error_files_report_exactly_their_directives() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/errors_register");
    let files = errfiles::error_files(&dir, "adasm");
    assert!(files.len() >= 2, "only {} error files", files.len());
    let problems: Vec<String> = files
        .iter()
        .flat_map(|f| errfiles::file_problems(f, MARKER, compile_register))
        .collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn directives_parse() {
    let d = errfiles::directives(
        "  %x = add %a, 2 ; error: 4:18: write `2.0`\n; error: 1:1: x: y",
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
