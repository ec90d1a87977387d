//! The REPL with `.adl` (adasm.md §11), driven through piped standard input:
//! multi-line `.adl` definitions beside `.adasm` ones, calls without `@`,
//! expressions typed alone, `let` variables in expressions and arguments,
//! `:ir`, and `:load` of an `.adl` file.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn session(dir: &Path, input: &str) -> (String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .arg("repl")
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
