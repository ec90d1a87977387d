//! The REPL with `.adl` (adasm.md §11), driven through piped standard input:
//! multi-line `.adl` definitions beside `.adasm` ones, calls without `@`,
//! expressions typed alone, `let` variables in expressions and arguments,
//! `:ir`, `:load` of an `.adl` file, and traps naming `.adl` lines.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn session(dir: &Path, input: &str) -> (String, String) {
    session_with(dir, &[], input)
}

fn session_with(dir: &Path, args: &[&str], input: &str) -> (String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .arg("repl")
        .args(args)
        .current_dir(dir)
        .env("ADVM_NO_HISTORY", "1")
        .env("XDG_DATA_HOME", dir.join("data"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("finishes");
    let _ = writer.join();
    assert_eq!(out.status.code(), Some(0));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const POW: &str = "fn pow(x: f64, n: i64) -> f64 {
    let r = 1.0;      // a comment with a brace {
    let k = n;
    while k > 0 {
        r = r * x; k = k - 1;
    }
    return r;
}
";

#[test]
fn adl_definitions_calls_expressions_and_variables() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = format!(
        "{POW}grad pow(2.0, 10)\nsin(1.0) * pow(2.0, 3)\nlet x = 1.0 + 1.0\npow(x, 3)\n\
         grad pow(x, 3)\nfn @sq(%x: f64) -> f64 {{\nentry:\n    %y = mul %x, %x\n    ret %y\n}}\n\
         sq(x) + pow(x, 2)\n@pow(2.0, 2)\n:ir pow\n"
    );
    let (out, err) = session(dir.path(), &input);
    assert_eq!(err, "", "{out}");
    let want_sin = format!("{}", 1.0f64.sin() * 8.0);
    for line in [
        "defined @pow",
        "value = 1024",
        "∂x = 5120",
        want_sin.as_str(),
        "x = 2",
        "8",
        "∂x = 12",
        "defined @sq",
        "%r.1 = mul %r, %x",
    ] {
        assert!(
            out.lines().any(|l| l.trim() == line),
            "no line {line:?} in:\n{out}"
        );
    }
    // sq(2) + pow(2, 2) and @pow(2.0, 2).
    assert!(out.lines().filter(|l| *l == "4").count() == 1, "{out}");
    assert!(out.lines().any(|l| l == "8"), "{out}");
}

#[test]
fn adl_errors_are_located_and_change_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = format!(
        "{POW}fn pow(x: f64, n: i64) -> f64 {{\n    return x * 2;\n}}\npow(2.0, 3)\nx * 2.0\nlet = 3\n"
    );
    let (out, err) = session(dir.path(), &input);
    assert!(
        err.contains("<input>:2:16: error: expected f64, found integer literal `2`; write `2.0`"),
        "{err}"
    );
    assert!(err.contains("undeclared name `x`"), "{err}");
    assert!(err.contains("not a variable name"), "{err}");
    // The bad redefinition changed nothing: pow(2.0, 3) is still 8.
    assert!(out.lines().any(|l| l == "8"), "{out}");
}

#[test]
fn load_an_adl_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let file = root.join("programs/mutual.adl");
    let input = format!(
        ":load {}\neven(0.5, 3)\ngrad even(0.5, 3)\n",
        file.display()
    );
    let (out, err) = session(dir.path(), &input);
    assert_eq!(err, "", "{out}");
    assert!(out.contains("loaded 2 functions"), "{out}");
    assert!(out.contains("∂x = "), "{out}");
}

/// Three `.adl` functions, the trap two calls deep: in `inner` at line 3
/// (`let q = 10 / k`), called from `mid` at line 3 of its own text (line 8
/// of the file) and `outer` at line 2 (line 11 of the file).
const DEEP: [&str; 3] = [
    "fn inner(a: f64, i: i64) -> f64 {\n    let k = i - 3;\n    let q = 10 / k;\n    return a * f64(q);\n}\n",
    "fn mid(a: f64, i: i64) -> f64 {\n    let b = a * 2.0;\n    return inner(b, i);\n}\n",
    "fn outer(a: f64) -> f64 {\n    return mid(a, 3);\n}\n",
];

const TRAP: &str =
    "trap: integer division by zero in @inner, block entry, at `let q = 10 / k` (line 3)";

#[test]
fn typed_adl_traps_name_adl_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = format!("{}@outer(1.0)\nouter(1.0)\n", DEEP.concat());
    let (out, err) = session_with(dir.path(), &["--no-inline"], &input);
    assert!(out.contains("defined @outer"), "{out}");
    // The call and the expression: each names the .adl lines and echoes
    // the .adl line (the generated .adasm has `%q = div 10, %k` at line 4).
    let want = format!("{TRAP}\n  called from @mid, line 3\n  called from @outer, line 2\n");
    assert!(err.starts_with(&want), "{err}");
    assert!(
        err.contains(&format!("{want}  called from @expr, line 1")),
        "{err}"
    );
    // Inlined (the default), the line and its echo are the same.
    let (_, err) = session(dir.path(), &input);
    assert!(
        err.contains("in @inner (inlined into @outer), block entry, at `let q = 10 / k` (line 3)"),
        "{err}"
    );
    assert!(!err.contains('%'), "{err}");
}

#[test]
fn loaded_adl_traps_name_adl_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("deep.adl"), DEEP.concat()).expect("written");
    let (out, err) = session_with(
        dir.path(),
        &["--no-inline"],
        ":load deep.adl\n@outer(1.0)\ngrad outer(1.0)\n",
    );
    assert!(out.contains("loaded 3 functions"), "{out}");
    let want = format!("{TRAP}\n  called from @mid, line 8\n  called from @outer, line 11\n");
    assert!(err.starts_with(&want), "{err}");
    // The gradient's forward sweep traps at the same .adl line.
    assert!(
        err.contains(
            "at `let q = 10 / k` (line 3)\n  called from @mid (gradient's forward sweep), line 8"
        ),
        "{err}"
    );
}

/// `.adl` rule lines (`rule f jvp f_jvp`, no `@`) typed at the prompt and
/// in a `:load`ed `.adl` file: the derivatives use the rule.
#[test]
fn adl_rules_typed_and_loaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "\
fn sq(x: f64) -> f64 {
    return x * x;
}
fn sq_jvp(x: f64, dx: f64) -> f64 {
    return 4.0 * x * dx;
}
grad sq(3.0)
rule sq jvp sq_jvp
grad sq(3.0)
rule sq jvp sq
";
    let (out, err) = session(dir.path(), input);
    let grads: Vec<&str> = out.lines().filter(|l| l.starts_with("∂x")).collect();
    assert_eq!(grads, ["∂x = 6", "∂x = 12"], "{out}");
    assert!(out.contains("defined rule @sq jvp @sq_jvp"), "{out}");
    assert!(err.contains("cannot be its own rule"), "{err}");
    let root = testkit::workspace_root();
    let file = root.join("programs/rule_cbrt.adl");
    let (out, err) = session(
        dir.path(),
        &format!(":load {}\n:ad cbrt\ngrad cbrt(8.0)\n", file.display()),
    );
    assert!(
        out.contains("; from rule @cbrt jvp @cbrt_jvp"),
        "{out}\n{err}"
    );
    // d cbrt(x) = 1 / (3 cbrt(x)²) = 1/12 at 8, to rounding.
    let d: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("∂x = "))
        .and_then(|v| v.trim().parse().ok())
        .expect("a gradient");
    assert!((d - 1.0 / 12.0).abs() < 1e-15, "{out}");
}
