//! The REPL driven through piped standard input, as a script would: what it
//! prints on stdout and stderr, and that nothing ends the session early.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

fn advm(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_advm"));
    c.current_dir(dir)
        .env("ADVM_NO_HISTORY", "1")
        .env("XDG_DATA_HOME", dir.join("data"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Run `advm repl` (plus `extra` arguments) on `input`; (stdout, stderr, status).
fn session_with(dir: &Path, extra: &[&str], input: &[u8]) -> (String, String, i32) {
    let mut child = advm(dir)
        .arg("repl")
        .args(extra)
        .spawn()
        .expect("advm starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    // Write from a thread so a full stdout pipe cannot deadlock the test.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("finishes");
    let _ = writer.join();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn session(dir: &Path, input: &str) -> (String, String, i32) {
    session_with(dir, &[], input.as_bytes())
}

const SQ: &str = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n";

#[test]
fn define_run_grad_inspect_redefine_and_survive_bad_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = format!(
        "; a comment line does nothing\n\
         {SQ}\
         @sq(3.0)\n\
         grad @sq(3.0)\n\
         this is not a command\n\
         @missing(1.0)\n\
         @sq(1.0,, 2.0)\n\
         grad @sq(true)\n\
         :frobnicate\n\
         fn @bad(%x: f64) -> f64 {{\nentry:\n    %y = add %x, 2\n    ret %y\n}}\n\
         :funcs\n\
         :disasm @sq\n\
         :ad @sq\n\
         fn @sq(%x: f64) -> f64 {{ ; now 3x\nentry:\n    %y = mul %x, 3.0\n    ret %y\n}}\n\
         grad @sq(3.0)\n\
         :quit\n\
         @sq(1.0)\n"
    );
    let (out, err, code) = session(dir.path(), &input);
    assert_eq!(code, 0, "{err}");
    // No prompt or banner noise when stdin is not a terminal.
    assert!(!out.contains("advm>") && !out.contains(":help"), "{out}");
    assert!(
        out.starts_with("defined @sq\n9\nvalue = 9\n∂x = 6\n@sq(%x: f64) -> f64\n"),
        "{out}"
    );
    // Every bad line is reported with a caret under it, and the session goes on.
    let expect_err = [
        "<input>:1:1: error: expected a command",
        "1 │ this is not a command\n  │ ^^^^",
        "<input>:1:1: error: no function @missing (:funcs lists them)\n1 │ @missing(1.0)\n  │ ^^^^^^^^",
        "<input>:1:9: error: expected a literal",
        "1 │ @sq(1.0,, 2.0)\n  │         ^",
        "<input>:1:10: error: argument 1: expected f64, found `true`",
        "1 │ grad @sq(true)\n  │          ^^^^",
        "<input>:1:1: error: unknown command :frobnicate",
        "<input>:3:18: error: expected f64",
        "write `2.0`",
    ];
    for e in expect_err {
        assert!(err.contains(e), "missing {e:?} in:\n{err}");
    }
    // A definition with errors was not added.
    assert!(!out.contains("@bad"), "{out}");
    // :disasm and :ad.
    assert!(out.contains("mul.f"), "{out}");
    assert!(out.contains("@sq.fwd") && out.contains("@sq.rev"), "{out}");
    // The redefinition replaced the function and its derived code.
    assert!(out.ends_with("defined @sq\nvalue = 9\n∂x = 3\n"), "{out}");
}

#[test]
fn gradient_output_formats() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "\
fn @scale(%a: f64[], %n: i64, %s: f64) -> f64 {
entry:
    %i = sub %n, 1
    %v = aget %a, %i
    %w = mul %v, %s
    ret %w
}
fn @fill(%n: i64) -> f64[] {
entry:
    %a = anew %n
    ret %a
}
fn @flag(%b: bool) -> bool {
entry:
    %c = not %b
    ret %c
}
grad @scale([1.0, 2.0, 3.0], 3, 0.5)
grad @scale([1.0, 2.0, 3.0], 3, 0.5) wrt s
grad @scale([1.0, 2.0, 3.0], 3, 0.5) wrt %a, n
grad @scale([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20], 20, 2)
@fill(3)
@fill(40)
@flag(true)
grad @flag(true)
@scale([1.0], 1, 0.1)
";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "defined @scale",
            "defined @fill",
            "defined @flag",
            "value = 1.5",
            "∂a = [0, 0, 0.5]",
            "∂n = -",
            "∂s = 3",
            "value = 1.5",
            "∂a = -",
            "∂n = -",
            "∂s = 3",
            "value = 40",
            "∂a = [0, 0, 0, 0, … 12 more …, 0, 0, 0, 2] (length 20)",
            "∂n = -",
            "∂s = 20",
            "[0, 0, 0]",
            "[0, 0, 0, 0, 0, 0, 0, 0, … 24 more …, 0, 0, 0, 0, 0, 0, 0, 0] (length 40)",
            "false",
            "0.1",
        ],
        "{out}"
    );
    assert!(
        err.contains("cannot differentiate: @flag returns bool"),
        "{err}"
    );
    assert!(
        err.contains("cannot differentiate @scale with respect to %n: it is i64"),
        "{err}"
    );
}

/// A child REPL fed line by line, its stdout read with a timeout.
struct Live {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Live {
    fn start(dir: &Path) -> Live {
        let mut child = advm(dir).arg("repl").spawn().expect("advm starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Live {
            child,
            stdin,
            lines: rx,
            stderr: Some(stderr),
        }
    }

    fn send(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("open");
        stdin.write_all(text.as_bytes()).expect("writes");
        stdin.flush().expect("flushes");
    }

    /// The next line of output, with runs of spaces made single.
    fn line(&self) -> String {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the REPL answers within 20 s");
        line.split(' ')
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn finish(mut self) -> (String, i32) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("finishes");
        let err = self
            .stderr
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        (err, status.code().unwrap_or(-1))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn load_then_reload_after_the_file_changed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("f.adasm");
    std::fs::write(
        &file,
        format!(
            "; version 1\nfn @f(%x: f64) -> f64 {{\nentry:\n    %y = add %x, 1.0\n    ret %y\n}}\n\n\
             fn @g(%x: f64) -> f64 {{\nentry:\n    %y = call @f(%x)\n    ret %y\n}}\n{SQ}"
        ),
    )
    .expect("writes");
    let mut live = Live::start(dir.path());
    live.send(":load f.adasm\n@g(1.0)\ngrad @g(1.0)\n:funcs\n");
    assert_eq!(live.line(), "loaded 3 functions from f.adasm");
    assert_eq!(live.line(), "2");
    assert_eq!(live.line(), "value = 2");
    assert_eq!(live.line(), "∂x = 1");
    assert_eq!(live.line(), "@f(%x: f64) -> f64 ; f.adasm");
    assert_eq!(live.line(), "@g(%x: f64) -> f64 ; f.adasm");
    assert_eq!(live.line(), "@sq(%x: f64) -> f64 ; f.adasm");
    // A typed definition replaces the file's @sq.
    live.send(&SQ.replace("%x, %x", "%x, 10.0"));
    assert_eq!(live.line(), "defined @sq");
    // The file changes: @f is different, @sq is gone.
    std::fs::write(
        &file,
        "; version 2\nfn @f(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n\
         fn @g(%x: f64) -> f64 {\nentry:\n    %y = call @f(%x)\n    ret %y\n}\n",
    )
    .expect("writes");
    live.send(":reload\ngrad @g(3.0)\n@sq(2.0)\n");
    assert_eq!(live.line(), "loaded 2 functions from f.adasm");
    assert_eq!(live.line(), "value = 9");
    assert_eq!(live.line(), "∂x = 6");
    // The typed @sq came from the input, not the file, so it stays.
    assert_eq!(live.line(), "20");
    // A broken file leaves the session as it was.
    std::fs::write(&file, "fn @f(%x: f64) -> f64 {\nentry:\n    ret %q\n}\n").expect("writes");
    live.send(":reload\n@g(3.0)\n");
    assert_eq!(live.line(), "9");
    // Reloading the file drops the functions it no longer has, so @g, which
    // called @f, is gone too once the file defines only @h.
    std::fs::write(&file, "fn @h() -> f64 {\nentry:\n    ret 7.0\n}\n").expect("writes");
    live.send(":reload\n@h()\n:funcs\n");
    assert_eq!(live.line(), "loaded 1 function from f.adasm");
    assert_eq!(live.line(), "7");
    assert_eq!(live.line(), "@sq(%x: f64) -> f64");
    assert_eq!(live.line(), "@h() -> f64 ; f.adasm");
    let (err, code) = live.finish();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("f.adasm:3:9: error: ") && err.contains("%q") && err.contains('^'),
        "{err}"
    );
}

#[test]
fn traps_and_a_startup_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let traps = dir.path().join("traps.adasm");
    std::fs::write(
        &traps,
        "; out of bounds for a bad %i\n\
         fn @pick(%v: f64[], %i: i64) -> f64 {\nentry:\n    %x = aget %v, %i\n    %y = mul %x, %x\n    ret %y\n}\n\
         fn @neg(%n: i64) -> f64 {\nentry:\n    %a = anew %n\n    ret 0.0\n}\n",
    )
    .expect("writes");
    let traps = traps.to_str().expect("utf-8 path");
    let input = "@pick([1.0, 3.0], 1)\n@pick([1.0, 3.0], 2)\n@neg(-1)\ngrad @pick([1.0, 3.0], 1)\n";
    let (out, err, code) = session_with(dir.path(), &[traps], input.as_bytes());
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "9\nvalue = 9\n∂v = [0, 6]\n∂i = -\n", "{err}");
    assert!(
        err.contains("out of bounds") && err.contains("@pick"),
        "{err}"
    );
    assert!(
        err.contains("negative length") && err.contains("@neg"),
        "{err}"
    );
    // A startup file that does not assemble is reported; the session goes on.
    std::fs::write(dir.path().join("bad.adasm"), "fn @f( {\n").expect("writes");
    let (out, err, code) = session_with(dir.path(), &["bad.adasm"], SQ.as_bytes());
    assert_eq!((out.as_str(), code), ("defined @sq\n", 0), "{err}");
    assert!(err.starts_with("bad.adasm:1:"), "{err}");
    // Bare `advm` is the REPL too.
    let mut child = advm(dir.path()).spawn().expect("advm starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{SQ}@sq(5.0)\n").as_bytes())
        .expect("writes");
    let o = child.wait_with_output().expect("finishes");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "defined @sq\n25\n");
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn traps_three_calls_deep_name_source_lines_and_callers() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("deep.adasm"),
        "fn @h(%v: f64[], %i: i64) -> f64 {\nentry:\n    %x = aget %v, %i\n    ret %x\n}\n\
         fn @g(%v: f64[], %i: i64) -> f64 {\nentry:\n    %j = add %i, 1\n    %y = call @h(%v, %j)\n    ret %y\n}\n",
    )
    .expect("writes");
    // @main is typed: its lines are lines of the input.
    let input = ":load deep.adasm\n\
                 fn @main(%v: f64[], %i: i64) -> f64 {\nentry:\n    %y = call @g(%v, %i)\n    ret %y\n}\n\
                 @main([1.0, 2.0], 1)\ngrad @main([1.0, 2.0], 1)\n";
    let (out, err, code) = session_with(dir.path(), &["--no-inline"], input.as_bytes());
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out, "loaded 2 functions from deep.adasm\ndefined @main\n",
        "{err}"
    );
    let head = "trap: array index 2 out of bounds for length 2 in @h";
    let at = ", block entry, at `%x = aget %v, %i` (line 3)";
    let stack = |code: &str| {
        format!("\n  called from @g{code}, line 9\n  called from @main{code}, line 3\n")
    };
    let code = " (gradient's forward sweep)";
    assert_eq!(
        err,
        format!("{head}{at}{}{head}{code}{at}{}", stack(""), stack(code))
    );
}

#[test]
fn unclosed_definitions_are_reported_without_swallowing_the_script() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = format!(
        "fn @f(%x: f64) -> f64 {{\nentry:\n    ret %x\n{SQ}@sq(2.0)\nfn @open(%x: f64) -> f64 {{\nentry:\n"
    );
    let (out, err, code) = session(dir.path(), &input);
    assert_eq!(code, 0);
    assert_eq!(out, "defined @sq\n4\n", "{err}");
    assert!(err.matches("<input>:").count() >= 2, "{err}");
    assert!(
        err.find("<input>")
            .is_some_and(|i| i < err.find("@open").unwrap_or(0)),
        "{err}"
    );
}

#[test]
fn time_and_cfg_commands() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = format!(
        "{SQ}:time @sq(3.0)\n:time grad @sq(3.0)\n:cfg @sq\n\
         fn @count(%n: i64) -> i64 {{\nentry:\n    ret %n\n}}\n:cfg @count\n"
    );
    let (out, err, code) = session(dir.path(), &input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.matches(" per call (median after warm-up), ").count(),
        2,
        "{out}"
    );
    let d = dir.path();
    for f in ["sq.dot", "sq.ad.dot", "count.dot"] {
        assert!(d.join(f).exists(), "{f} missing: {out}");
    }
    assert!(!d.join("count.ad.dot").exists());
    assert!(
        out.contains("no AD picture: cannot differentiate: @count returns i64"),
        "{out}"
    );
    let sq = std::fs::read_to_string(d.join("sq.dot")).expect("reads");
    assert!(
        sq.starts_with("digraph") && sq.contains("%y = mul.f %x, %x"),
        "{sq}"
    );
    if Command::new("dot").arg("-V").output().is_ok() {
        assert!(
            d.join("sq.svg").exists() && d.join("sq.ad.svg").exists(),
            "{out}"
        );
        assert!(out.contains("rendered ") && out.contains("sq.svg"), "{out}");
    } else {
        eprintln!("note: Graphviz `dot` is not installed; SVG rendering not checked");
        assert!(out.contains("not on PATH"), "{out}");
    }
}

#[test]
fn piped_sessions_keep_no_history() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .arg("repl")
        .current_dir(dir.path())
        .env_remove("ADVM_NO_HISTORY")
        .env("XDG_DATA_HOME", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{SQ}@sq(2.0)\n").as_bytes())
        .expect("writes");
    let o = child.wait_with_output().expect("finishes");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "defined @sq\n4\n");
    assert!(!dir.path().join("advm").exists());
}

/// Deterministic garbage, fragments of real syntax and invalid UTF-8: the
/// REPL reports errors, never panics, and answers the last line.
#[test]
fn no_input_crashes_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pieces: &[&[u8]] = &[
        b"@sq(",
        b")",
        b"(",
        b"grad ",
        b"jvp ",
        b":jvp ",
        b"hvp ",
        b"hessian ",
        b":hvp ",
        b" dir ",
        b" wrt ",
        b"null",
        b":cfg ",
        b":disasm ",
        b":ad ",
        b":load ",
        b"fn ",
        b"@",
        b"%x",
        b"[",
        b"]",
        b"1.0",
        b"-",
        b"1e999",
        b"nan",
        b",",
        b" ",
        b"{",
        b"}",
        b"entry:",
        b"ret",
        b";",
        b"\xff\xfe",
        b"\xc3",
        b"\x00",
        b"\t",
        b"true",
        b"\"",
        b"'",
        b":reload",
        b":funcs",
        b"@sq",
        b"99999999999999999999",
        b"-inf",
        b"\r",
        b"\\",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut input = SQ.as_bytes().to_vec();
    for _ in 0..1500 {
        let n = next() % 7;
        for _ in 0..n {
            input.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
        }
        input.push(b'\n');
    }
    // Close any definition the garbage left open, then one real command.
    input.extend_from_slice(b"}\n:funcs\n@sq(7.0)\n");
    let (out, err, code) = session_with(dir.path(), &[], &input);
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{err}"
    );
    assert!(out.ends_with("49\n"), "{out}");
}

/// Large inputs: 6 000 functions by `:load`, one definition of 12 000
/// lines pasted. (Both were quadratic, several seconds to minutes; the
/// figures are in docs/reliability.md. Tests do not time: this one only
/// makes sure such sessions work.)
#[test]
fn loading_many_functions_and_pasting_a_long_definition_work() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("chain.adasm"),
        testkit::r#gen::call_chain(6000),
    )
    .expect("writes");
    let (out, err, _) = session(dir.path(), ":load chain.adasm\n@f0(0.5)\n");
    assert_eq!(out, "loaded 6000 functions from chain.adasm\n0\n", "{err}");
    let mut big = String::from("fn @big(%x: f64) -> f64 {\nentry:\n    %r0 = mul %x, 1.0\n");
    for i in 1..12000 {
        big.push_str(&format!("    %r{i} = mul %r{}, 1.0\n", i - 1));
    }
    big.push_str("    ret %r11999\n}\n");
    std::fs::write(dir.path().join("big.adasm"), &big).expect("writes");
    let (out, err, _) = session(dir.path(), ":load big.adasm\n@big(2.0)\n");
    assert_eq!(out, "loaded 1 function from big.adasm\n2\n", "{err}");
    let (out, err, _) = session(dir.path(), &format!("{big}@big(2.0)\n"));
    assert_eq!(out, "defined @big\n2\n", "{err}");
}

#[test]
fn functions_pasted_together_may_call_later_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let def =
        |name: &str, body: &str| format!("fn @{name}(%x: f64) -> f64 {{\nentry:\n{body}\n}}\n");
    let call = |callee: &str| format!("    %r = call @{callee}(%x)\n    ret %r");
    let input = [
        // The brief's case: @a calls @b, defined next.
        def("a", &call("b")),
        def("b", "    %y = mul %x, 3.0\n    ret %y"),
        "@a(2.0)\n".into(),
        // A chain pasted from the top: each waits for the next.
        def("c", &call("d")),
        def("e", &call("c")),
        "@e(1.0)\n".into(),
        "grad @c(1.0)\n".into(),
        ":funcs\n".into(),
        def("d", "    %y = mul %x, %x\n    ret %y"),
        "grad @e(3.0)\n".into(),
        // A definition with a real error besides an unknown call is
        // rejected as before, not kept.
        def(
            "bad",
            "    %r = call @later(%x)\n    %y = add %x, 1\n    ret %y",
        ),
        "@bad(1.0)\n".into(),
        // A redefinition that waits keeps the old function until then.
        def("b", &call("g")),
        "@a(2.0)\n".into(),
        def("g", "    ret %x"),
        "@a(2.0)\n".into(),
        // Never completed: reported at the end of input.
        def("z", &call("never")),
    ]
    .concat();
    let (out, err, code) = session(dir.path(), &input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "@a is pending until @b is defined\n\
         defined @b\n\
         defined @a (it was pending)\n\
         6\n\
         @c is pending until @d is defined\n\
         @e is pending until @c is defined\n\
         @a(%x: f64) -> f64\n\
         @b(%x: f64) -> f64\n\
         ; @c is pending until @d is defined\n\
         ; @e is pending until @c is defined\n\
         defined @d\n\
         defined @c (it was pending)\n\
         defined @e (it was pending)\n\
         value = 9\n\
         ∂x = 6\n\
         @b is pending until @g is defined\n\
         6\n\
         defined @g\n\
         defined @b (it was pending)\n\
         2\n\
         @z is pending until @never is defined\n",
        "{err}"
    );
    let expect_err = [
        "<input>:1:1: error: @e is not defined yet: it is pending until @c is defined\n1 │ @e(1.0)\n  │ ^^",
        "<input>:1:6: error: @c is not defined yet: it is pending until @d is defined",
        "<input>:3:15: error: unknown function `@later`",
        "<input>:4:18: error: expected f64, found integer literal `1`",
        "<input>:1:1: error: no function @bad (:funcs lists them)",
        "advm: @z was never defined: it was pending until @never is defined",
    ];
    let mut from = 0;
    for e in expect_err {
        let at = err[from..]
            .find(e)
            .unwrap_or_else(|| panic!("missing (in order) {e:?} in\n{err}"));
        from += at + e.len();
    }
}

#[test]
fn a_pending_definition_is_completed_by_a_load() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("b.adasm"),
        "fn @b(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n",
    )
    .expect("writes");
    let input = "fn @a(%x: f64) -> f64 {\nentry:\n    %r = call @b(%x)\n    ret %r\n}\n\
                 :load b.adasm\n@a(5.0)\n";
    let (out, err, _) = session(dir.path(), input);
    assert_eq!(
        out,
        "@a is pending until @b is defined\nloaded 1 function from b.adasm\n\
         defined @a (it was pending)\n5\n",
        "{err}"
    );
    assert_eq!(err, "");
}

#[test]
fn an_unwritable_stdout_ends_the_session_with_74() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // not Linux
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = advm(dir.path())
        .arg("repl")
        .stdout(full)
        .spawn()
        .expect("advm starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{SQ}@sq(2.0)\n").as_bytes())
        .expect("writes");
    let o = child.wait_with_output().expect("finishes");
    assert_eq!(o.status.code(), Some(74));
    assert!(
        String::from_utf8_lossy(&o.stderr).starts_with("advm: cannot write to standard output: "),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn load_reports_bad_utf8_with_a_location_and_skips_a_bom() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("latin1.adasm"),
        b"; caf\xE9\nfn @sq(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n",
    )
    .expect("writes");
    std::fs::write(
        dir.path().join("bom.adasm"),
        "\u{FEFF}fn @one() -> f64 {\nentry:\n    ret 1.0\n}\n",
    )
    .expect("writes");
    std::fs::write(
        dir.path().join("bad.adasm"),
        "\u{FEFF}fn @two() -> f64 { $\nentry:\n    ret 1.0\n}\n",
    )
    .expect("writes");
    // A script saved with a byte-order mark works too.
    let input = format!(
        "\u{FEFF}{SQ}:load latin1.adasm\n@sq(3.0)\n:load bom.adasm\n@one()\n:load bad.adasm\n"
    );
    let (out, err, _) = session(dir.path(), &input);
    assert_eq!(
        out, "defined @sq\n9\nloaded 1 function from bom.adasm\n1\n",
        "{err}"
    );
    assert!(
        err.starts_with(
            "latin1.adasm:1:6: error: invalid UTF-8: byte 0xE9 (byte 5 of the file) is not part \
             of a UTF-8 character; source files must be UTF-8\n1 │ ; caf\u{FFFD}\n  │      ^\n"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "bad.adasm:1:20: error: unexpected character `$`\n1 │ fn @two() -> f64 { $\n  │                    ^"
        ),
        "{err}"
    );
}

#[test]
fn command_errors_speak_repl_syntax() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = format!(
        "{SQ}grad @sq(2.0) wrt\n:ad @sq extra\n:funcs x\n:disasm @sq @sq\n:quit now\n@sq(3.0)\n"
    );
    let (out, err, _) = session(dir.path(), &input);
    // `:quit now` is an error, not a quit: the session goes on.
    assert_eq!(out, "defined @sq\n9\n", "{err}");
    assert_eq!(
        err,
        "<input>:1:18: error: `wrt` names no parameter: write `grad @sq(...) wrt x, y` \
         (it can be differentiated with respect to %x)\n1 │ grad @sq(2.0) wrt\n  │                  ^\n\
         <input>:1:9: error: unexpected `extra` after the function name: `:ad` takes one function\n1 │ :ad @sq extra\n  │         ^^^^^\n\
         <input>:1:8: error: unexpected `x`: :funcs takes no argument\n1 │ :funcs x\n  │        ^\n\
         <input>:1:13: error: unexpected `@sq` after the function name: `:disasm` takes one function\n1 │ :disasm @sq @sq\n  │             ^^^\n\
         <input>:1:7: error: unexpected `now`: :quit takes no argument\n1 │ :quit now\n  │       ^^^\n"
    );
}

#[test]
fn a_pending_definition_with_errors_is_dropped_not_blocking() {
    let dir = tempfile::tempdir().expect("temp dir");
    // @a calls @b with an f64; @b then takes an i64: @b is defined, @a
    // dropped (never "defined before").
    let input = "fn @a(%x: f64) -> f64 {\nentry:\n    %r = call @b(%x)\n    ret %r\n}\n\
                 fn @c(%x: f64) -> f64 {\nentry:\n    %r = call @a(%x)\n    ret %r\n}\n\
                 fn @b(%x: i64) -> f64 {\nentry:\n    %y = itof %x\n    ret %y\n}\n\
                 @b(3)\n:funcs\n";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "@a is pending until @b is defined\n\
         @c is pending until @a is defined\n\
         dropped pending @a: expected i64 (parameter 1 of `@b`), found `%x` of type f64\n\
         dropped pending @c: it calls @a, dropped\n\
         defined @b\n\
         3\n\
         @b(%x: i64) -> f64\n",
        "{err}"
    );
    assert_eq!(err, "");

    // A load is not blocked either; the definition's own errors are still
    // its own, and then the pending one is kept.
    std::fs::write(
        dir.path().join("a2.adasm"),
        "fn @a(%x: f64, %y: f64) -> f64 {\nentry:\n    ret %y\n}\n",
    )
    .expect("writes");
    let input = "fn @c(%x: f64) -> f64 {\nentry:\n    %r = call @a(%x)\n    ret %r\n}\n\
                 fn @a(%x: f64, %y: f64) -> f64 {\nentry:\n    %z = add %x, 1\n    ret %y\n}\n\
                 :funcs\n\
                 :load a2.adasm\n@a(1.0, 2.0)\n";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "@c is pending until @a is defined\n\
         ; @c is pending until @a is defined\n\
         dropped pending @c: `@a` takes 2 arguments, found 1\n\
         loaded 1 function from a2.adasm\n\
         2\n",
        "{err}"
    );
    assert!(
        err.starts_with("<input>:3:18: error: expected f64, found integer literal `1`"),
        "{err}"
    );
    assert!(
        !err.contains("defined before") && !err.contains("@c"),
        "{err}"
    );
}

#[test]
fn ad_names_the_derived_callees() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "fn @b(%x: f64) -> f64 {\nentry:\n    %y = sin %x\n    ret %y\n}\n\
                 fn @a(%x: f64) -> f64 {\nentry:\n    %r = call @b(%x)\n    ret %r\n}\n\
                 :ad @a\n";
    // Without inlining, @a calls @b (with it, @b's code is in @a).
    let (out, err, code) = session_with(dir.path(), &["--no-inline"], input.as_bytes());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("@b.fwd(%x)") && out.contains("@b.rev(%seed)"),
        "{out}"
    );
    assert!(!out.contains(" fn4") && !out.contains(" fn5"), "{out}");
}

#[test]
fn a_load_says_which_pending_definitions_it_replaced() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("a.adasm"),
        "fn @a(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n",
    )
    .expect("writes");
    let input = "fn @a(%x: f64) -> f64 {\nentry:\n    %r = call @b(%x)\n    ret %r\n}\n\
                 :load a.adasm\n:funcs\n";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "@a is pending until @b is defined\n\
         dropped pending @a (replaced by a.adasm)\n\
         loaded 1 function from a.adasm\n\
         @a(%x: f64) -> f64  ; a.adasm\n",
        "{err}"
    );
}

#[test]
fn a_wait_for_several_functions_lists_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "fn @e(%x: f64) -> f64 {\nentry:\n    %r = call @e2(%x)\n    \
                 %s = call @e3(%r)\n    %t = call @e4(%s)\n    ret %t\n}\n\
                 fn @f(%x: f64) -> f64 {\nentry:\n    %r = call @f2(%x)\n    \
                 %s = call @f3(%r)\n    ret %s\n}\n";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "@e is pending until @e2, @e3 and @e4 are defined\n\
         @f is pending until @f2 and @f3 are defined\n",
        "{err}"
    );
}

#[test]
fn a_name_both_defined_and_pending_is_named_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "fn @a(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n\
                 fn @a(%x: f64, %y: f64) -> f64 {\nentry:\n    %r = call @b(%x)\n    ret %r\n}\n\
                 fn @g(%x: f64) -> f64 {\nentry:\n    %r = call @a(%x, 3.0)\n    ret %r\n}\n\
                 fn @h(%x: f64) -> f64 {\nentry:\n    %r = call @a(%x)\n    ret %r\n}\n\
                 @a(2.0)\n";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "defined @a\n\
         @a is pending until @b is defined\n\
         @g is pending until @a is defined (@a is pending; its defined version is still in use)\n\
         2\n",
        "{err}"
    );
    assert!(
        err.starts_with(
            "<input>:3:15: error: `@a` takes 2 arguments, found 1\n3 │     %r = call @a(%x)\n  │               ^^\n   \
             note: @a is pending; its defined version is still in use (new definitions are checked against the pending one)\n"
        ),
        "{err}"
    );
}

/// A definition held because it calls two pending ones waits for both,
/// named in the order it calls them (it named one, picked in a hash map's
/// order, so the message changed from run to run).
#[test]
fn a_definition_waiting_for_two_pending_ones_names_both() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "fn @a() -> f64 {\nentry:\n    %c = call @z()\n    ret %c\n}\n\
                 fn @b() -> f64 {\nentry:\n    %c = call @z()\n    ret %c\n}\n\
                 fn @c() -> f64 {\nentry:\n    %x = call @a()\n    %y = call @b()\n    %s = add %x, %y\n    ret %s\n}\n";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("@c is pending until @a and @b are defined"),
        "{out}"
    );
    assert!(
        err.contains("@c was never defined: it was pending until @a and @b are defined"),
        "{err}"
    );
}

/// A definition left open at the end of the input is reported at its own
/// end, not at the next function of the session (the parser met that one's
/// `fn` first and blamed it: "this is in @a, defined before").
#[test]
fn an_unclosed_definition_is_reported_at_its_own_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "fn @a(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n\
                 fn @open(%x: f64) -> f64 {\nentry:\n    %y = call @a(%x)\n";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "defined @a\n");
    assert!(
        err.contains(
            "<input>:3:21: error: expected `}` to close function `@open`, found end of file"
        ),
        "{err}"
    );
    assert!(!err.contains("in @a") && !err.contains("@a`"), "{err}");
}

/// A file with no `fn` keyword (a typo, stray text) is an error with the
/// assembler's message, and the session keeps the functions the file had;
/// a file of comments only still loads, as no functions.
#[test]
fn a_file_without_a_function_keyword_does_not_load() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("f.adasm"), SQ).expect("write");
    std::fs::write(
        dir.path().join("typo.adasm"),
        SQ.replace("fn @sq", "fnn @sq"),
    )
    .expect("write");
    std::fs::write(dir.path().join("notes.adasm"), "; only a comment\n\n").expect("write");
    let (out, err, code) = session(
        dir.path(),
        ":load f.adasm\n:load typo.adasm\n@sq(3.0)\n:load notes.adasm\n:funcs\n",
    );
    assert_eq!(
        out,
        "loaded 1 function from f.adasm\n9\nloaded 0 functions from notes.adasm\n@sq(%x: f64) -> f64  ; f.adasm\n",
        "{err}"
    );
    assert!(err.contains("typo.adasm:1:1"), "{err}");
    assert!(err.contains("fnn"), "{err}");
    assert_eq!(code, 0);
}

/// `advm repl` takes the limit flags of `run` (the depth trap's message
/// says to raise `--max-depth`), and they hold for every function the
/// session defines, before and after a redefinition.
#[test]
fn the_repl_takes_the_limit_flags() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = "fn @down(%n: i64) -> i64 {\nentry:\n    %z = le %n, 0\n    br %z, done, more\n\
               more:\n    %m = sub %n, 1\n    %r = call @down(%m)\n    ret %r\ndone:\n    ret 0\n}\n";
    let input = format!("{rec}@down(2)\n@down(3)\n{SQ}@down(3)\n@sq(2.0)\n");
    let (out, err, code) = session_with(
        dir.path(),
        &["--max-depth", "3", "--no-inline"],
        input.as_bytes(),
    );
    assert_eq!(out, "defined @down\n0\ndefined @sq\n4\n", "{err}");
    assert_eq!(
        err.matches("call depth exceeded (limit 3; raise it with --max-depth)")
            .count(),
        2,
        "{err}"
    );
    assert_eq!(code, 0);

    let (out, err, _) = session_with(
        dir.path(),
        &["--fuel", "5"],
        format!("{SQ}@sq(2.0)\n{rec}@down(50)\n").as_bytes(),
    );
    assert_eq!(out, "defined @sq\n4\ndefined @down\n", "{err}");
    assert!(err.contains("fuel"), "{err}");

    let (_, err, code) = session_with(dir.path(), &["--max-depth", "0"], b"");
    assert_eq!(code, 64, "{err}");
}

#[test]
fn jvp_prints_value_and_tangents_and_lists_tangent_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "\
fn @scale(%a: f64[], %n: i64, %s: f64) -> f64 {
entry:
    %i = sub %n, 1
    %v = aget %a, %i
    %w = mul %v, %s
    aset %a, 0, %w
    ret %w
}
jvp @sq(3.0) dir [1.0]
jvp @sq(3.0) dir [-inf]
jvp @scale([1.0, 2.0], 2, 0.5) dir [[1, 0], null, 2.0]
jvp @scale([1.0, 2.0], 2, 0.5) dir [null, null, 2.0] wrt s
jvp @scale([1.0, 2.0], 2, 0.5) dir [[1, 0], null, 2.0] wrt s
jvp @sq(3.0) dir [1.0, 2.0]
jvp @sq(3.0)
:jvp @sq
";
    let (out, err, code) = session(dir.path(), &format!("{SQ}{input}"));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    // w = a[n-1]·s, written to a[0]: tangent 2·2 + 0·0.5 (a's direction
    // at index 1 is 0); a's tangent after the call: [4, 0].
    assert_eq!(
        &lines[..12],
        [
            "defined @sq",
            "defined @scale",
            "value = 9",
            "tangent = 6",
            "value = 9",
            "tangent = -inf",
            "value = 1",
            "tangent = 4",
            "tangent of %a = [4, 0]",
            "value = 1",
            "tangent = 4",
            "fn @sq.jvp(%x: f64, %d.x: f64) -> (f64, f64)   ; 6 regs, 1 consts",
        ]
    );
    // A nonzero direction outside `wrt`, a direction of the wrong length
    // and a missing one are errors pointing into the line.
    assert!(err.contains("not in --wrt"), "{err}");
    assert!(err.contains("the direction has 2 entries"), "{err}");
    assert!(
        err.contains("expected `jvp @f(args) dir [d1, d2, ...]`"),
        "{err}"
    );
}

#[test]
fn hvp_and_hessian_print_products_and_list_their_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "\
fn @g(%x: f64, %y: f64) -> f64 {
entry:
    %p = mul %x, %y
    %q = mul %p, %x
    ret %q
}
hvp @g(2.0, 3.0) dir [1.0, 0.0]
hvp @g(2.0, 3.0) dir [null, 1.0] wrt y
hessian @g(2.0, 3.0)
hessian @g(2.0, 3.0) wrt x
hvp @g(2.0, 3.0) dir [1.0]
hvp @g(2.0, 3.0)
:hvp @g
";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    // g = x²y: ∇g = (2xy, x²), H = [[2y, 2x], [2x, 0]].
    assert_eq!(
        &lines[..18],
        [
            "defined @g",
            "value = 12",
            "∂x = 12    (H·dir)_x = 6",
            "∂y = 4    (H·dir)_y = 4",
            "value = 12",
            "∂x = -    (H·dir)_x = -",
            "∂y = 4    (H·dir)_y = 0",
            "value = 12",
            "∂x = 12",
            "∂y = 4",
            "hessian (2 × 2 over the flattened inputs) =",
            "[6, 4]",
            "[4, 0]",
            "value = 12",
            "∂x = 12",
            "∂y = -",
            "hessian (1 × 1 over the flattened inputs) =",
            "[6]",
        ]
    );
    assert!(
        out.contains("fn @g.fwd.jvp(") && out.contains("fn @g.rev.jvp("),
        "{out}"
    );
    assert!(err.contains("the direction has 1 entries"), "{err}");
    assert!(
        err.contains("expected `hvp @f(args) dir [d1, d2, ...]`"),
        "{err}"
    );
}

/// `rule @f jvp @f_jvp` typed at the REPL: later derivatives use the rule
/// (here a wrong one, 2x for x³, so that its use shows), a rule that does
/// not fit is an error located at its line that changes nothing, a new
/// rule for the same function replaces the old one, redefining the rule
/// function's body keeps the rule (with the new body), and redefining the
/// function with a signature the rule no longer fits drops the rule, saying
/// so.
#[test]
fn rules_typed_at_the_prompt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "\
fn @cube(%x: f64) -> f64 {
entry:
    %a = mul %x, %x
    %b = mul %a, %x
    ret %b
}
fn @cube_jvp(%x: f64, %dx: f64) -> f64 {
entry:
    %a = mul 2.0, %x
    %t = mul %a, %dx
    ret %t
}
fn @three(%x: f64, %y: f64, %z: f64) -> f64 {
entry:
    ret %x
}
grad @cube(1.5)
rule @cube jvp @cube_jvp
grad @cube(1.5)
jvp @cube(1.5) dir [1.0]
hvp @cube(1.5) dir [1.0]
rule @cube jvp @three
grad @cube(1.5)
fn @cube_jvp(%x: f64, %dx: f64) -> f64 {
entry:
    %a = mul 4.0, %x
    %t = mul %a, %dx
    ret %t
}
grad @cube(1.5)
:ad @cube
fn @cube(%x: f64, %n: i64) -> f64 {
entry:
    %a = mul %x, %x
    %b = mul %a, %x
    ret %b
}
grad @cube(1.5, 2)
:ad @cube
";
    let (out, err, code) = session(dir.path(), input);
    assert_eq!(code, 0, "{err}");
    let grads: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("∂x"))
        .map(|l| l.split("    ").next().unwrap_or(l))
        .collect();
    // The body's 3x², then the rule's 2x (and its tangent and, from the
    // rule's body, its second derivative 2), then the rule with its new
    // body (4x), then the body's again once the rule is dropped.
    assert_eq!(
        grads,
        [
            "∂x = 6.75",
            "∂x = 3",
            "∂x = 3",
            "∂x = 3",
            "∂x = 6",
            "∂x = 6.75"
        ],
        "{out}"
    );
    assert!(out.contains("defined rule @cube jvp @cube_jvp"), "{out}");
    assert!(out.contains("tangent = 3"), "{out}");
    assert!(out.contains("(H·dir)_x = 2"), "{out}");
    assert!(
        err.contains(
            "<input>:1:16: error: `@three` must take `@cube`'s 1 parameter(s) and then 1 tangent(s)"
        ),
        "{err}"
    );
    assert!(
        out.contains("dropped rule @cube jvp @cube_jvp: `@cube_jvp` must take `@cube`'s 2"),
        "{out}"
    );
    assert_eq!(
        out.matches("; from rule @cube jvp @cube_jvp").count(),
        2,
        "{out}"
    );
}
