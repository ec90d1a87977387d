//! The interactive REPL (adasm.md §6), on rustyline. See `docs/repl.md`.
//!
//! * [`session`]: the functions defined so far, the engine built from them,
//!   and the commands; every input gives a [`session::Reply`].
//! * [`source`]: where an input ends (brace balance), splitting text into
//!   functions, and tracing diagnostics back to their file or input.
//! * [`helper`]: the rustyline helper (completion, hints, highlighting, the
//!   multi-line validator).
//!
//! With a terminal on standard input the loop runs rustyline with history
//! and a Ctrl-C handler that sets the VM's interrupt flag. With anything
//! else (a pipe, a file) it reads lines itself: no prompt, no banner, no
//! history, no handler (Ctrl-C ends the process as for any filter), and the
//! exit status is 0 at the end of input whatever errors were reported.

mod helper;
mod session;
mod source;

use crate::out;
use rustyline::config::{CompletionType, Config};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::Editor;
use session::{Known, Reply, Session};
use std::cell::RefCell;
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const PROMPT: &str = "advm> ";

/// Where history is kept, unless `ADVM_NO_HISTORY` turns it off:
/// `$XDG_DATA_HOME/advm/history`, else `~/.local/share/advm/history`.
fn history_path() -> Option<PathBuf> {
    history_path_from(|k| std::env::var_os(k))
}

fn history_path_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    if var("ADVM_NO_HISTORY").is_some_and(|v| !v.is_empty() && v != "0") {
        return None;
    }
    let base = var("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            var("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("share"))
        })?;
    Some(base.join("advm").join("history"))
}

/// What the loop does after one input.
#[derive(Debug, PartialEq)]
enum Flow {
    Go,
    /// `:quit`, or nobody reads the results any more.
    Stop,
    /// Standard output cannot be written (other than a closed pipe): the
    /// error is reported and the REPL ends with status 74.
    OutputFailed,
}

/// Write a reply line on stdout; a write error other than a closed pipe is
/// reported (as the subcommands do) and ends the REPL.
fn emit(text: impl std::fmt::Display) -> Flow {
    match out::line(text) {
        Ok(()) if out::closed() => Flow::Stop,
        Ok(()) => Flow::Go,
        Err(e) => {
            out::stdout_failed(&e);
            Flow::OutputFailed
        }
    }
}

/// Execute one input and print its reply. A panic (a bug) is reported and
/// the session goes on with a rebuilt engine, so no input ends the REPL.
fn step(session: &mut Session, input: &str) -> Flow {
    match std::panic::catch_unwind(AssertUnwindSafe(|| session.execute(input))) {
        Ok(reply) => show(reply),
        Err(_) => survive(session),
    }
}

/// Execute the definitions read from a pipe since the last command, as
/// [`step`] would one by one (see [`Session::execute_many`]).
fn flush(session: &mut Session, batch: &mut Vec<String>) -> Flow {
    if batch.is_empty() {
        return Flow::Go;
    }
    let inputs = std::mem::take(batch);
    match std::panic::catch_unwind(AssertUnwindSafe(|| session.execute_many(&inputs))) {
        Ok(replies) => {
            for reply in replies {
                let flow = show(reply);
                if flow != Flow::Go {
                    return flow;
                }
            }
            Flow::Go
        }
        Err(_) => survive(session),
    }
}

fn show(reply: Reply) -> Flow {
    match reply {
        Reply::Quiet => Flow::Go,
        Reply::Out(text) => emit(text),
        Reply::Err(text) => {
            out::err(text);
            Flow::Go
        }
        Reply::Quit => Flow::Stop,
    }
}

/// After a panic (a bug): say so and go on with a rebuilt engine.
fn survive(session: &mut Session) -> Flow {
    out::err("advm: internal error (a bug in advm; please report it); the session goes on");
    session.rebuild();
    Flow::Go
}

/// The exit status once the loop has ended this way.
fn status(flow: Flow) -> u8 {
    match flow {
        Flow::OutputFailed => crate::commands::EXIT_OUTPUT,
        Flow::Go | Flow::Stop => 0,
    }
}

/// Run the REPL; returns the exit status (0 at the end of input, 74 if
/// standard output cannot be written).
pub fn run(file: Option<&Path>, limits: vm::Limits, opts: advm::Options) -> u8 {
    let interactive = std::io::stdin().is_terminal();
    let interrupt = Arc::new(AtomicBool::new(false));
    let known = Rc::new(RefCell::new(Known::default()));
    let mut session = Session::new(interrupt.clone(), known.clone());
    session.set_options(opts);
    session.set_limits(limits);
    if interactive {
        let banner = format!(
            "advm {} — :help for commands, Ctrl-D to leave",
            env!("CARGO_PKG_VERSION")
        );
        if emit(banner) == Flow::OutputFailed {
            return status(Flow::OutputFailed);
        }
    }
    if let Some(f) = file {
        match session.load(f) {
            Ok(msg) if interactive => {
                if emit(msg) == Flow::OutputFailed {
                    return status(Flow::OutputFailed);
                }
            }
            Ok(_) => {}
            Err(e) => out::err(e.trim_end()),
        }
    }
    if interactive {
        interactive_loop(&mut session, known, interrupt)
    } else {
        // A large buffer: definitions already read are executed together
        // (see `piped_loop`).
        let input = BufReader::with_capacity(1 << 20, std::io::stdin().lock());
        status(piped_loop(&mut session, input))
    }
}

/// Standard input that is not a terminal: one command per line, a `fn`
/// definition up to the line where its braces balance. Braces are counted
/// as lines arrive, so a long definition costs time linear in its length.
/// Definitions are held until the next command, the end, or reading a line
/// that has not fully arrived (so a program that sends a definition and
/// waits for its reply gets it), then executed together ([`flush`]):
/// replies as one by one, in one rebuild where they can be.
fn piped_loop(session: &mut Session, mut input: BufReader<impl Read>) -> Flow {
    let mut pending = String::new();
    let mut braces = source::Braces::default();
    let mut batch: Vec<String> = Vec::new();
    let mut buf = Vec::new();
    let mut first = true;
    macro_rules! go {
        ($flow:expr) => {
            let flow = $flow;
            if flow != Flow::Go {
                return flow;
            }
        };
    }
    loop {
        if !input.buffer().contains(&b'\n') {
            // Reading the next line may wait for the writer (who may be
            // waiting for these replies).
            go!(flush(session, &mut batch));
        }
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                out::err(format_args!("advm: cannot read standard input: {e}"));
                break;
            }
        }
        // A script saved with a byte-order mark.
        if std::mem::take(&mut first) && buf.starts_with("\u{FEFF}".as_bytes()) {
            buf.drain(..3);
        }
        let text = String::from_utf8_lossy(&buf);
        let line = text.trim_end_matches(['\n', '\r']);
        if !pending.is_empty() {
            if !source::starts_command(line) {
                pending.push_str(line);
                pending.push('\n');
                braces.add_line(line);
                if !braces.open() {
                    batch.push(std::mem::take(&mut pending));
                }
                continue;
            }
            // The open definition never closed: let the assembler say so.
            batch.push(std::mem::take(&mut pending));
        }
        if source::needs_more(line) {
            pending.push_str(line);
            pending.push('\n');
            braces = source::Braces::for_definition(line);
            braces.add_line(line);
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with("//") {
            // Nothing to execute (`Session::execute` is quiet on these).
            continue;
        }
        if source::starts_definition(line) {
            batch.push(line.to_string());
            continue;
        }
        go!(flush(session, &mut batch));
        go!(step(session, line));
    }
    if !pending.is_empty() {
        batch.push(pending);
    }
    go!(flush(session, &mut batch));
    if let Some(note) = session.pending_note() {
        out::err(note);
    }
    Flow::Go
}

fn interactive_loop(
    session: &mut Session,
    known: Rc<RefCell<Known>>,
    interrupt: Arc<AtomicBool>,
) -> u8 {
    // Ctrl-C while a computation runs sets the VM's interrupt flag; the VM
    // traps at its next taken jump or call and the prompt comes back.
    // At the prompt the terminal is in raw mode, so rustyline reads Ctrl-C
    // as a key (clear the line) and this handler does not run.
    {
        let flag = interrupt.clone();
        if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed)) {
            out::err(format_args!(
                "advm: Ctrl-C will not interrupt computations: {e}"
            ));
        }
    }
    let config = Config::builder();
    let config = config
        .max_history_size(10_000)
        .unwrap_or_else(|_| Config::builder());
    let config = config
        .auto_add_history(false)
        .history_ignore_space(true)
        .completion_type(CompletionType::List)
        .build();
    let mut editor: Editor<helper::AdvmHelper, FileHistory> = match Editor::with_config(config) {
        Ok(e) => e,
        Err(e) => {
            return crate::commands::Fail::Internal(format!("cannot start the line editor: {e}"))
                .report_code()
        }
    };
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    editor.set_helper(Some(helper::AdvmHelper::new(known, color)));
    let history = history_path();
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.load_history(h);
    }
    loop {
        match editor.readline(PROMPT) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                    if let Some(h) = &history {
                        // Appended at once, so a killed session keeps it and
                        // concurrent sessions merge.
                        let _ = editor.append_history(h);
                    }
                }
                match step(session, &line) {
                    Flow::Go => {}
                    flow => return status(flow),
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                out::err(format_args!("advm: {e}"));
                break;
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_location_and_switch() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            history_path_from(env(&[("XDG_DATA_HOME", "/x/data"), ("HOME", "/home/u")])),
            Some(PathBuf::from("/x/data/advm/history"))
        );
        assert_eq!(
            history_path_from(env(&[("XDG_DATA_HOME", ""), ("HOME", "/home/u")])),
            Some(PathBuf::from("/home/u/.local/share/advm/history"))
        );
        assert_eq!(
            history_path_from(env(&[("HOME", "/home/u"), ("ADVM_NO_HISTORY", "1")])),
            None
        );
        assert!(history_path_from(env(&[("HOME", "/h"), ("ADVM_NO_HISTORY", "0")])).is_some());
        assert_eq!(history_path_from(env(&[])), None);
    }

    /// A script of definitions with every kind of reply: plain ones,
    /// calls of earlier ones, a call of a later one (pending), errors (and
    /// callers of the broken ones), redefinitions, an unclosed one at the
    /// end, with commands in between.
    fn script(n: usize) -> Vec<String> {
        let mut out = Vec::new();
        let def =
            |name: &str, body: &str| format!("fn @{name}(%x: f64) -> f64 {{\nentry:\n{body}\n}}\n");
        for i in 0..n {
            let body = match i % 50 {
                13 | 21 => format!("    %y = call @f{}(%x)\n    ret %y", i - 1),
                25 => format!("    %y = call @f{}(%x)\n    ret %y", i + 1),
                37 => "    %y = mul %x, %nope\n    ret %y".to_string(),
                38 => format!("    %y = call @f{}(%x)\n    ret %y", i - 1),
                44 => "    %y = add %x, 1.0\n    ret %y".to_string(),
                _ => "    %y = mul %x, %x\n    ret %y".to_string(),
            };
            let name = if i % 50 == 44 {
                format!("f{}", i - 9)
            } else {
                format!("f{i}")
            };
            out.push(def(&name, &body));
            if i % 37 == 36 {
                out.push(format!("grad @f{}(1.5)", i - 36));
                out.push(":funcs".to_string());
            }
        }
        out.push("fn @open(%x: f64) -> f64 {\nentry:\n".to_string());
        out
    }

    #[test]
    fn definitions_executed_together_reply_as_one_by_one() {
        // Three periods of the script's pattern (50 definitions) and four
        // of its commands (37): every kind of reply, several times over.
        let inputs = script(150);
        let mut one = Session::new(Arc::default(), Rc::default());
        let want: Vec<Reply> = inputs.iter().map(|i| one.execute(i)).collect();
        let mut many = Session::new(Arc::default(), Rc::default());
        let got = many.execute_many(&inputs);
        assert_eq!(got, want);
        assert_eq!(many.execute(":funcs"), one.execute(":funcs"));
        assert_eq!(
            many.execute("grad @f100(0.5)"),
            one.execute("grad @f100(0.5)")
        );
        eprintln!("{} builds together, {} one by one", many.builds, one.builds);
        // 150 builds one by one (and more for the errors).
        assert!(
            many.builds < one.builds / 4,
            "{} builds, one by one {}",
            many.builds,
            one.builds
        );
    }

    /// 500 definitions, each calling the one before, then a command: one
    /// build, where one by one made 500 (each rebuilding the whole session,
    /// so the time grew with the square of the count).
    #[test]
    fn piped_definitions_build_the_session_once() {
        let mut text = String::new();
        for i in 0..500 {
            let body = if i == 0 {
                "    ret %x".to_string()
            } else {
                format!(
                    "    %y = call @f{}(%x)\n    %z = add %y, 1.0\n    ret %z",
                    i - 1
                )
            };
            text.push_str(&format!(
                "fn @f{i}(%x: f64) -> f64 {{\nentry:\n{body}\n}}\n\n; next\n"
            ));
        }
        let mut s = Session::new(Arc::default(), Rc::default());
        let input = BufReader::with_capacity(1 << 20, std::io::Cursor::new(text));
        piped_loop(&mut s, input);
        assert_eq!(s.builds, 1);
        assert_eq!(s.execute("@f499(0.5)"), Reply::Out("499.5".into()));
    }

    /// Input that arrives one piece per read, as from a program that
    /// sends a definition and waits for its reply.
    struct Pieces(Vec<String>);

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some(piece) = self.0.first_mut() else {
                return Ok(0);
            };
            let n = piece.len().min(buf.len());
            buf[..n].copy_from_slice(&piece.as_bytes()[..n]);
            piece.drain(..n);
            if piece.is_empty() {
                self.0.remove(0);
            }
            Ok(n)
        }
    }

    /// A definition is executed (and answered) before a read that may wait
    /// for the next: each of these builds the session on its own.
    #[test]
    fn a_piped_definition_is_answered_before_the_next_read() {
        // Each piece ends with the start of the next definition's first
        // line: its reply must not wait for the rest of that line.
        let pieces = (0..5)
            .map(|i| format!("@f{i}(%x: f64) -> f64 {{\nentry:\n    ret %x\n}}\nfn "))
            .collect::<Vec<String>>();
        let mut pieces: Vec<String> = pieces;
        pieces[0].insert_str(0, "fn ");
        if let Some(last) = pieces.last_mut() {
            last.truncate(last.len() - 3);
        }
        let mut s = Session::new(Arc::default(), Rc::default());
        piped_loop(&mut s, BufReader::with_capacity(1 << 20, Pieces(pieces)));
        // The first builds the session, the others are added to it.
        assert_eq!((s.builds, s.singles), (1, 4));
        assert_eq!(s.execute("@f4(2.0)"), Reply::Out("2".into()));
    }

    /// Piped definitions interleaved with calls (3 000 pairs took 26 s:
    /// each definition rebuilt the session) and definitions in reverse
    /// call order (5 000 took 42 s: each new pending one was assembled
    /// with all the others, and then looked at every pending one): each
    /// definition is assembled alone, the session is built once (the
    /// first definition; the last of the reverse chain completes the
    /// others in one build), and the pending ones are found by name.
    #[test]
    fn interleaved_and_reverse_order_definitions_do_not_rebuild_the_session() {
        // The counts of builds and single additions say whether the
        // session was rebuilt; a thousand definitions make a rebuild per
        // definition (quadratic) visible in the time as well.
        let n = 1000;
        let mut text = String::new();
        for i in 0..n {
            let body = if i == 0 {
                "    %y = mul %x, 2.0\n    ret %y".to_string()
            } else {
                format!(
                    "    %y = call @f{}(%x)\n    %z = add %y, 1.0\n    ret %z",
                    i / 2
                )
            };
            text.push_str(&format!(
                "fn @f{i}(%x: f64) -> f64 {{\nentry:\n{body}\n}}\n"
            ));
            text.push_str(&format!("@f{i}(1.0)\n"));
        }
        let mut s = Session::new(Arc::default(), Rc::default());
        piped_loop(&mut s, BufReader::new(std::io::Cursor::new(text)));
        assert_eq!((s.builds, s.singles), (1, n - 1));
        assert_eq!(s.execute("@f999(1.0)"), Reply::Out("12".into()));
        assert_eq!(
            s.execute("grad @f999(1.0)"),
            Reply::Out("value = 12\n∂x = 2".into())
        );

        // Reverse call order: each definition is held until the next one
        // comes. 4 000 of them: holding one more used to cost time in the
        // number already held (4 000 took 32 s in the debug build, now
        // half a second).
        let n = 4000;
        let mut text = String::new();
        for i in 0..n {
            let body = if i + 1 == n {
                "    ret %x".to_string()
            } else {
                format!(
                    "    %y = call @g{}(%x)\n    %z = add %y, 1.0\n    ret %z",
                    i + 1
                )
            };
            text.push_str(&format!(
                "fn @g{i}(%x: f64) -> f64 {{\nentry:\n{body}\n}}\n"
            ));
        }
        let mut s = Session::new(Arc::default(), Rc::default());
        let replies = s.execute_many(&split_definitions(&text));
        assert_eq!(
            replies[1],
            Reply::Out("@g1 is pending until @g2 is defined".into())
        );
        assert_eq!((s.builds, s.singles), (1, n - 1));
        assert_eq!(s.execute("@g0(0.5)"), Reply::Out("3999.5".into()));
    }

    /// The definitions of `text` (one per `fn`), as the piped loop hands
    /// them over.
    fn split_definitions(text: &str) -> Vec<String> {
        text.split("fn @")
            .filter(|d| !d.is_empty())
            .map(|d| format!("fn @{d}"))
            .collect()
    }

    /// Reverse call order, several waits, a definition both defined and
    /// pending, errors and calls in between: the same replies whether
    /// executed one by one (each assembling the session) or together
    /// (definitions assembled alone where they can be).
    #[test]
    fn held_and_appended_definitions_reply_as_one_by_one() {
        let def =
            |name: &str, body: &str| format!("fn @{name}(%x: f64) -> f64 {{\nentry:\n{body}\n}}");
        let call = |g: &str| format!("    %y = call @{g}(%x)\n    ret %y");
        let two = |a: &str, b: &str| {
            format!("    %y = call @{a}(%x)\n    %z = call @{b}(%y)\n    ret %z")
        };
        let inputs: Vec<String> = vec![
            def("a", &two("b", "c")),
            def("b", &call("d")),
            "@a(1.0)".into(),
            def("c", &call("b")),
            def("e", "    ret %x"),
            def("f", &call("e")),
            "@f(2.0)".into(),
            def("g", &two("e", "h")),
            def("h", "    %y = mul %x, %nope\n    ret %y"),
            def("i", "    %y = call @e(%x, %x)\n    ret %y"),
            def("j", &call("a")),
            def("e", "    %y = add %x, 1.0\n    ret %y"),
            def("k", &call("e")),
            def("d", "    %y = mul %x, 3.0\n    ret %y"),
            "@a(1.0)".into(),
            "@j(2.0)".into(),
            def("h", "    ret %x"),
            "@g(1.0)".into(),
            ":funcs".into(),
            "grad @j(1.0)".into(),
        ];
        let mut one = Session::new(Arc::default(), Rc::default());
        let want: Vec<Reply> = inputs.iter().map(|i| one.execute(i)).collect();
        let mut many = Session::new(Arc::default(), Rc::default());
        let got = many.execute_many(&inputs);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "input {k}: {}", inputs[k]);
        }
        assert_eq!(got.len(), want.len());
        assert!(many.singles > 0);
    }

    #[test]
    fn piped_definitions_span_lines_and_unclosed_ones_do_not_swallow_the_script() {
        let mut s = Session::new(Arc::default(), Rc::default());
        let script = "fn @f(%x: f64) -> f64 {\nentry:\n    %y = mul %x, 2.0\n";
        piped_loop(
            &mut s,
            BufReader::new(std::io::Cursor::new(format!("{script}@f(1.0)\n"))),
        );
        // The unclosed definition was reported, not kept.
        assert_eq!(s.execute(":funcs"), Reply::Out("no functions yet".into()));
        piped_loop(
            &mut s,
            BufReader::new(std::io::Cursor::new(format!("{script}    ret %y\n}}\n"))),
        );
        assert_eq!(s.execute("@f(1.5)"), Reply::Out("3".into()));
    }
}
