//! `advm` on `.adl` files (adasm.md §11): every command that reads a
//! source file compiles `.adl` by its extension, `disasm --ir` prints the
//! generated `.adasm`, compile errors exit 2 located in the `.adl` text
//! and traps name the `.adl` function and line.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn advm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(args)
        .current_dir(testkit::workspace_root())
        .stdin(Stdio::null())
        .output()
        .expect("advm runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(args: &[&str]) -> String {
    let o = advm(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

fn temp_adl(src: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("p.adl");
    std::fs::write(&path, src).expect("writes");
    (dir, path)
}

const POW: &str = "programs/bench/powloop.adl";

#[test]
fn run_grad_check_and_jvp_read_adl() {
    assert_eq!(
        ok(&["run", POW, "--fn", "pow", "--args", "[2.0, 10]"]),
        "1024\n"
    );
    let j: serde_json::Value = serde_json::from_str(&ok(&[
        "grad",
        POW,
        "--fn",
        "pow",
        "--args",
        "[2.0, 10]",
        "--json",
    ]))
    .expect("JSON");
    assert_eq!(
        j,
        serde_json::json!({"value": 1024.0, "grad": [5120.0, null]})
    );
    ok(&["check", POW, "--fn", "pow", "--args", "[1.5, 7]"]);
    let jvp = ok(&[
        "jvp",
        POW,
        "--fn",
        "@pow",
        "--args",
        "[2.0, 10]",
        "--dir",
        "[1.0, null]",
    ]);
    assert!(jvp.contains("tangent = 5120"), "{jvp}");
    let bytecode = ok(&["disasm", POW]);
    assert!(bytecode.contains("fn @pow"), "{bytecode}");
}

#[test]
fn disasm_ir_prints_adasm_that_assembles_to_the_same_results() {
    let all = ok(&["disasm", "programs/no_result.adl", "--ir"]);
    for f in ["fn @scale(", "fn @fill(", "fn @total("] {
        assert!(all.contains(f), "{all}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ir.adasm");
    std::fs::write(&path, &all).expect("writes");
    let p = path.to_string_lossy().to_string();
    let args = "[[1.0, 2.0, 3.0], 1.5]";
    assert_eq!(
        ok(&["grad", &p, "--fn", "total", "--args", args]),
        ok(&[
            "grad",
            "programs/no_result.adl",
            "--fn",
            "total",
            "--args",
            args
        ])
    );
    // One function: only its text.
    let one = ok(&["disasm", POW, "--ir", "--fn", "pow"]);
    assert!(
        one.starts_with("fn @pow(%x: f64, %n: i64) -> f64 {"),
        "{one}"
    );
    assert!(one.contains("%r.1 = mul %r, %x"), "{one}");
    assert_eq!(one.matches("fn @").count(), 1);
    // `--ir` of an .adasm file prints its IR too.
    assert!(ok(&["disasm", "programs/bench/powloop.adasm", "--ir"]).contains("%r2 = mul %r, %x"));
}

#[test]
fn a_function_ir_does_not_name_is_a_usage_error() {
    let o = advm(&["disasm", POW, "--ir", "--fn", "pwo"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(
        text(&o.stderr).contains("did you mean `@pow`?"),
        "{}",
        text(&o.stderr)
    );
    let o = advm(&["disasm", POW, "--ir", "--ad"]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o.stderr));
}

#[test]
fn compile_errors_exit_2_with_every_location() {
    let (_d, path) = temp_adl("fn f(x: f64) -> f64 {\n    let y = x * 2;\n    return yy;\n}\n");
    let p = path.to_string_lossy().to_string();
    let o = advm(&["run", &p, "--fn", "f", "--args", "[1.0]"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "{p}:2:17: error: expected f64, found integer literal `2`; write `2.0`"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{p}:3:12: error: undeclared name `yy`; did you mean `y`?"
        )),
        "{err}"
    );
    assert!(err.contains("               ^"), "{err}");
}

#[test]
fn traps_name_the_adl_function_and_line() {
    let (_d, path) =
        temp_adl("fn f(a: f64[], i: i64) -> f64 {\n    let y = a[0];\n    return a[i] + y;\n}\n");
    let p = path.to_string_lossy().to_string();
    let o = advm(&["run", &p, "--fn", "f", "--args", "[[1.0], 3]"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("in @f") && err.contains("(line 3)"), "{err}");
    let o = advm(&["grad", &p, "--fn", "f", "--args", "[[1.0], 3]"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("(line 3)"), "{}", text(&o.stderr));
}
