//! The REPL: scripted sessions through piped stdin, a real terminal under
//! tmux (Ctrl-C out of an endless loop), and the CFG pictures.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn session(input: &str, dir: &std::path::Path) -> (String, String, i32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .arg("repl")
        .current_dir(dir)
        .env("ADVM_NO_HISTORY", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("writes");
    let out = child.wait_with_output().expect("finishes");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

const SQ: &str = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n";

#[test]
fn scripted_session_defines_runs_differentiates_and_survives_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = format!(
        "{SQ}@sq(3.0)\ngrad @sq(3.0)\nthis is not a command\n@missing(1.0)\n\
         fn @bad(%x: f64) -> f64 {{\nentry:\n    %y = add %x, 2\n    ret %y\n}}\n\
         :funcs\n:disasm @sq\n:ad @sq\n\
         fn @sq(%x: f64) -> f64 {{\nentry:\n    %y = mul %x, 3.0\n    ret %y\n}}\n\
         grad @sq(3.0)\n:quit\n@sq(1.0)\n"
    );
    let (out, err, code) = session(&input, dir.path());
    assert_eq!(code, 0, "{err}");
    // No prompt or banner noise when stdin is not a terminal.
    assert!(!out.contains("advm>"), "{out}");
    assert!(
        out.starts_with("defined @sq\n9\nvalue = 9\n∂x = 6\n"),
        "{out}"
    );
    assert!(err.contains("cannot read `this is not a command`"), "{err}");
    assert!(err.contains("no function @missing"), "{err}");
    assert!(
        err.contains("<input>:3:18: error:") && err.contains("write `2.0`") && err.contains('^'),
        "{err}"
    );
    assert!(out.contains("@sq(%x: f64) -> f64"), "{out}");
    assert!(
        !out.contains("@bad"),
        "a definition with errors must not be added: {out}"
    );
    assert!(out.contains("mul.f"), "{out}");
    assert!(out.contains("@sq.fwd") && out.contains("@sq.rev"), "{out}");
    // The redefinition replaced the function and its derived code.
    assert!(out.contains("value = 9\n∂x = 3\n"), "{out}");
    // :quit ends the session: the last line never runs.
    assert!(!out.ends_with("1\n"), "{out}");
}

#[test]
fn load_reload_and_traps() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("f.adasm");
    std::fs::write(
        &file,
        "fn @f(%x: f64) -> f64 {\nentry:\n    %y = add %x, 1.0\n    ret %y\n}\n",
    )
    .expect("writes");
    let script = dir.path().join("edit.sh");
    std::fs::write(
        &script,
        "fn @f(%x: f64) -> f64 {\nentry:\n    %y = add %x, 10.0\n    ret %y\n}\nfn @g(%i: i64) -> f64 {\nentry:\n    %a = anew 2\n    %v = aget %a, %i\n    ret %v\n}\n",
    )
    .expect("writes");
    let input = format!(
        ":load {}\n@f(1.0)\n:load {}\n@f(1.0)\n@g(7)\n@g(1)\n:reload\n@f(2.0)\n",
        file.display(),
        script.display()
    );
    let (out, err, code) = session(&input, dir.path());
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "loaded 1 function(s) from ".to_string() + &file.display().to_string(),
            "2".into(),
            format!("loaded 2 function(s) from {}", script.display()),
            "11".into(),
            "0".into(),
            format!("loaded 2 function(s) from {}", script.display()),
            "12".into()
        ],
        "{out}"
    );
    assert!(err.contains("out of bounds") && err.contains("@g"), "{err}");
}

#[test]
fn cfg_dot_matches_the_blocks_and_edges() {
    let root = testkit::workspace_root();
    let out = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(["cfg", "programs/bench/powloop.adasm", "--fn", "pow"])
        .current_dir(&root)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let dot = String::from_utf8_lossy(&out.stdout).into_owned();
    // powloop: 4 blocks; edges entry->head, head->body, head->done, body->head.
    assert_eq!(dot.matches("[shape=box").count(), 4, "{dot}");
    assert_eq!(dot.matches(" -> ").count(), 4, "{dot}");
    let out = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(["cfg", "programs/bench/powloop.adasm", "--fn", "pow", "--ad"])
        .current_dir(&root)
        .output()
        .expect("runs");
    let ad = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        ad.contains("cluster_fwd") && ad.contains("cluster_rev"),
        "{ad}"
    );
    assert!(
        ad.contains("blk.pop 0") && ad.contains("blk.pop 1"),
        "dispatch edges: {ad}"
    );
    assert!(ad.contains("edge.body.head"), "phi-edge block: {ad}");
    assert!(
        ad.contains("comms.push") && ad.contains("comms.pop"),
        "{ad}"
    );
    // Graphviz must accept both.
    if Command::new("dot").arg("-V").output().is_err() {
        eprintln!("note: Graphviz `dot` is not installed; DOT syntax not checked");
        return;
    }
    for text in [dot, ad] {
        let mut child = Command::new("dot")
            .arg("-Tsvg")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dot runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("writes");
        let o = child.wait_with_output().expect("dot finishes");
        assert!(
            o.status.success(),
            "dot rejected:\n{}\n{text}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains("<svg"));
    }
}

/// A real terminal: tmux runs the REPL; a function is typed over several
/// lines, differentiated, an endless loop is interrupted with Ctrl-C, and
/// the session goes on.
#[test]
fn real_terminal_multiline_grad_and_ctrl_c() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("note: tmux is not installed; real-terminal test skipped");
        return;
    }
    let name = format!("advm-test-{}", std::process::id());
    let dir = tempfile::tempdir().expect("temp dir");
    let start = Command::new("tmux")
        .args(["new-session", "-d", "-s", &name, "-x", "120", "-y", "40"])
        .arg(format!(
            "cd {} && ADVM_NO_HISTORY=1 {} repl",
            dir.path().display(),
            env!("CARGO_BIN_EXE_advm")
        ))
        .status()
        .expect("tmux runs");
    assert!(start.success());
    struct Kill(String);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", &self.0])
                .status();
        }
    }
    let _guard = Kill(name.clone());
    let send = |keys: &[&str]| {
        let ok = Command::new("tmux")
            .args(["send-keys", "-t", &name])
            .args(keys)
            .status()
            .expect("send-keys");
        assert!(ok.success());
    };
    let screen = || {
        let o = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &name])
            .output()
            .expect("capture");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let wait_for = |needle: &str, count: usize| {
        let t = Instant::now();
        loop {
            let s = screen();
            if s.matches(needle).count() >= count {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "timed out waiting for {needle:?}:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for("advm>", 1);
    for line in [
        "fn @f(%x: f64) -> f64 {",
        "entry:",
        "    %y = mul %x, %x",
        "    ret %y",
        "}",
    ] {
        send(&[line, "Enter"]);
    }
    wait_for("defined @f", 1);
    send(&["grad @f(4.0)", "Enter"]);
    wait_for("∂x = 8", 1);
    for line in [
        "fn @spin(%x: f64) -> f64 {",
        "entry:",
        "    jmp loop",
        "loop:",
        "    jmp loop",
        "}",
    ] {
        send(&[line, "Enter"]);
    }
    wait_for("defined @spin", 1);
    send(&["@spin(1.0)", "Enter"]);
    std::thread::sleep(Duration::from_millis(500));
    send(&["C-c"]);
    wait_for("interrupted", 1);
    send(&["grad @f(5.0)", "Enter"]);
    let s = wait_for("∂x = 10", 1);
    assert!(s.contains("value = 25"), "{s}");
}
