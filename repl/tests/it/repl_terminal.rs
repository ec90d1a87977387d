//! The REPL in a real terminal: tmux runs `advm repl` on a private server;
//! keys are sent and the screen is read back. Skipped (with a note) when
//! tmux is not installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmux server of our own (its socket in a temporary directory), killed
/// when dropped, so that a failing assertion never leaves a REPL running.
struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "advm"];
        args.extend_from_slice(keys);
        let o = self.cmd(&args);
        assert!(
            o.status.success(),
            "send-keys: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// Type a line (literally) and press Enter.
    fn line(&self, text: &str) {
        self.send(&["-l", text]);
        self.send(&["Enter"]);
    }

    /// The visible screen and the scrollback, as plain text (or with the
    /// colour escapes when `escapes`).
    fn screen_with(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-J", "-S", "-200", "-t", "advm"];
        if escapes {
            args.push("-e");
        }
        String::from_utf8_lossy(&self.cmd(&args).stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.screen_with(false)
    }

    /// Poll (every 50 ms, at most 20 s) until `needle` appears `count` times.
    fn wait_for(&self, needle: &str, count: usize) -> String {
        self.wait_until(&format!("{count} × {needle:?}"), |s| {
            s.matches(needle).count() >= count
        })
    }

    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let t = Instant::now();
        loop {
            let s = self.screen();
            if done(&s) {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "timed out waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until the REPL shows an empty prompt on its last line: it is
    /// then reading keys in raw mode. (Keys sent while it is between two
    /// prompts meet the terminal in cooked mode, where Ctrl-C and Ctrl-D mean
    /// something else; a person cannot type that fast, a test can.)
    fn wait_prompt(&self) {
        self.wait_until("an empty prompt", |s| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::trim_end)
                == Some("advm>")
        });
    }

    /// At an empty prompt, type a line and press Enter.
    fn command(&self, text: &str) {
        self.wait_prompt();
        self.line(text);
    }

    /// Has advm exited? (The pane stays, dead, for its last screen.)
    fn exited(&self) -> bool {
        let o = self.cmd(&["display-message", "-p", "-t", "advm", "#{pane_dead}"]);
        !o.status.success() || String::from_utf8_lossy(&o.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// Start `advm repl` in `dir` under a new tmux server, with history in
/// `data` (and `env`, e.g. `ADVM_NO_HISTORY=1`); `None` without tmux.
fn start(dir: &Path, data: &Path, env: &str) -> Option<Tmux> {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("note: tmux is not installed; real-terminal test skipped");
        return None;
    }
    let sock_dir = tempfile::Builder::new()
        .prefix("advm-tmux")
        .tempdir_in("/tmp")
        .expect("socket dir");
    let tmux = Tmux {
        socket: sock_dir.path().join("s"),
        _dir: sock_dir,
    };
    let command = format!(
        "cd '{}' && env -u ADVM_NO_HISTORY -u NO_COLOR XDG_DATA_HOME='{}' {env} '{}' repl",
        dir.display(),
        data.display(),
        env!("CARGO_BIN_EXE_advm")
    );
    let o = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "advm",
        "-x",
        "150",
        "-y",
        "50",
        &command,
    ]);
    assert!(
        o.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Keep the pane (and its last screen) if advm exits, for diagnosis.
    let _ = tmux.cmd(&["set-option", "-t", "advm", "remain-on-exit", "on"]);
    Some(tmux)
}

fn history(data: &Path) -> String {
    std::fs::read_to_string(data.join("advm").join("history")).unwrap_or_default()
}

#[test]
fn multiline_definition_grad_completion_ctrl_c_and_history() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data: PathBuf = dir.path().join("data");
    let Some(tmux) = start(dir.path(), &data, "") else {
        return;
    };
    tmux.wait_prompt();
    assert!(
        tmux.screen().contains(":help for commands"),
        "{}",
        tmux.screen()
    );

    // A definition typed over several lines: the validator keeps reading
    // until the braces balance.
    for line in [
        "fn @f(%x: f64) -> f64 {",
        "entry:",
        "    %y = mul %x, %x",
        "    ret %y",
        "}",
    ] {
        tmux.line(line);
    }
    tmux.wait_for("defined @f", 1);
    tmux.command("grad @f(4.0)");
    let s = tmux.wait_for("∂x = 8", 1);
    assert!(s.contains("value = 16"), "{s}");
    // Highlighting: the typed code was drawn in colour.
    let coloured = tmux.screen_with(true);
    let typed = coloured
        .lines()
        .find(|l| l.contains("mul"))
        .unwrap_or_default();
    assert!(typed.contains('\x1b'), "no colour in {typed:?}");

    // Tab completes a command and a function name.
    tmux.wait_prompt();
    tmux.send(&["-l", ":fu"]);
    tmux.send(&["Tab"]);
    tmux.wait_for("advm> :funcs", 1);
    tmux.send(&["Enter"]);
    tmux.wait_for("@f(%x: f64) -> f64", 2);
    tmux.wait_prompt();
    tmux.send(&["-l", "grad @"]);
    tmux.send(&["Tab"]);
    tmux.wait_for("advm> grad @f", 1);
    tmux.send(&["-l", "(5.0)"]);
    tmux.send(&["Enter"]);
    tmux.wait_for("∂x = 10", 1);

    // Ctrl-C interrupts an endless loop and the prompt comes back.
    tmux.wait_prompt();
    for line in [
        "fn @spin(%x: f64) -> f64 {",
        "entry:",
        "    jmp loop",
        "loop:",
        "    jmp loop",
        "}",
    ] {
        tmux.line(line);
    }
    tmux.wait_for("defined @spin", 1);
    tmux.command("@spin(1.0)");
    tmux.wait_until("@spin to run", |s| {
        s.lines().rev().find(|l| !l.trim().is_empty()) == Some("advm> @spin(1.0)")
    });
    // Send Ctrl-C until the interruption is reported (the first one may
    // arrive before the computation starts).
    let t = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        tmux.send(&["C-c"]);
        if tmux.screen().contains("interrupted") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "Ctrl-C did not interrupt:\n{}",
            tmux.screen()
        );
    }
    tmux.command("grad @f(6.0)");
    let s = tmux.wait_for("∂x = 12", 1);
    assert!(s.contains("value = 36"), "{s}");

    // Ctrl-C at the prompt clears the line; an error does not end the session.
    tmux.wait_prompt();
    tmux.send(&["-l", "@f(1000.0)"]);
    tmux.wait_for("advm> @f(1000.0)", 1);
    tmux.send(&["C-c"]);
    tmux.command("@f(3.0)");
    tmux.command("@nope(1.0)");
    tmux.wait_for("no function @nope", 1);
    tmux.command("@f(7.0)");
    let s = tmux.wait_for("49", 1);
    assert!(!s.contains("1000000"), "the cleared line ran: {s}");
    assert!(s.lines().any(|l| l.trim() == "9"), "{s}");

    // History was written as we went; Ctrl-D leaves.
    let h = history(&data);
    assert!(h.contains("grad @f(4.0)") && h.contains("@f(7.0)"), "{h}");
    assert!(!h.contains("@f(1000.0)"), "{h}");
    tmux.wait_prompt();
    tmux.send(&["C-d"]);
    tmux.wait_until("advm to exit", |_| tmux.exited());
}

#[test]
fn history_is_read_back_and_can_be_turned_off() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("advm")).expect("mkdir");
    std::fs::write(
        data.join("advm").join("history"),
        "#V2\n:help\n@earlier(1.0)\n",
    )
    .expect("writes");
    let Some(tmux) = start(dir.path(), &data, "") else {
        return;
    };
    tmux.wait_prompt();
    // Up recalls the last line of the previous session.
    tmux.send(&["Up"]);
    tmux.wait_for("advm> @earlier(1.0)", 1);
    tmux.send(&["C-c"]);
    tmux.wait_prompt();
    tmux.send(&["C-d"]);
    tmux.wait_until("advm to exit", |_| tmux.exited());
    drop(tmux);

    // ADVM_NO_HISTORY=1: nothing read, nothing written.
    let Some(tmux) = start(dir.path(), &data, "ADVM_NO_HISTORY=1") else {
        return;
    };
    tmux.command(":funcs");
    tmux.wait_for("no functions yet", 1);
    tmux.wait_prompt();
    tmux.send(&["Up", "Up"]);
    tmux.wait_for("advm> :funcs", 2);
    assert!(!tmux.screen().contains("@earlier"), "{}", tmux.screen());
    tmux.send(&["C-c"]);
    tmux.wait_prompt();
    tmux.send(&["C-d"]);
    tmux.wait_until("advm to exit", |_| tmux.exited());
    assert!(!history(&data).contains(":funcs"), "{}", history(&data));
}

/// Ctrl-C interrupts a long `:load` (assembling and building a large file,
/// which no VM interrupt check reaches): the prompt comes back at once and
/// the session is as it was.
#[test]
fn ctrl_c_interrupts_a_long_load() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data: PathBuf = dir.path().join("data");
    // About 20 MB: tens of seconds to load.
    let mut big = String::new();
    for i in 0..200_000 {
        big.push_str(&format!(
            "fn @f{i}(%x: f64) -> f64 {{\nentry:\n    %a = mul %x, %x\n    %b = add %a, 1.0\n    %c = sin %b\n    ret %c\n}}\n"
        ));
    }
    std::fs::write(dir.path().join("big.adasm"), big).expect("writes");
    let Some(tmux) = start(dir.path(), &data, "ADVM_NO_HISTORY=1") else {
        return;
    };
    tmux.wait_prompt();
    tmux.line("fn @g(%x: f64) -> f64 {");
    tmux.line("entry:");
    tmux.line("    ret %x");
    tmux.line("}");
    tmux.wait_for("defined @g", 1);
    tmux.command(":load big.adasm");
    tmux.wait_until(":load to start", |s| {
        s.lines().rev().find(|l| !l.trim().is_empty()) == Some("advm> :load big.adasm")
    });
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    loop {
        tmux.send(&["C-c"]);
        std::thread::sleep(Duration::from_millis(200));
        if tmux.screen().contains("interrupted") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "Ctrl-C did not interrupt the load:\n{}",
            tmux.screen()
        );
    }
    assert!(
        !tmux.screen().contains("loaded 200000"),
        "{}",
        tmux.screen()
    );
    tmux.wait_prompt();
    tmux.command(":funcs");
    let s = tmux.wait_for("@g(%x: f64) -> f64", 1);
    assert!(!s.contains("@f0"), "{s}");
    tmux.command("@g(2.5)");
    tmux.wait_for("2.5", 2);
    tmux.wait_prompt();
    tmux.send(&["C-d"]);
    tmux.wait_until("advm to exit", |_| tmux.exited());
}
