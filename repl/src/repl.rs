//! The interactive REPL (adasm.md §6), on rustyline.
//!
//! The session keeps the source text of every function defined so far (from
//! `:load` or typed), by name; a new definition replaces the old one and the
//! module is re-assembled and a fresh [`Engine`] built, which drops every
//! derived forward/reverse function, so nothing stale survives a change.
//! Piped standard input works line by line, without prompt or banner.

use crate::commands::{self, gradient_lines, Fail};
use ad::{Engine, Gradient};
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use std::borrow::Cow;
use std::cell::RefCell;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use vm::Value;

const COMMANDS: &[&str] = &[
    ":help", ":quit", ":load", ":reload", ":funcs", ":disasm", ":ad", ":cfg", ":time", "grad",
];

const HELP: &str = "\
commands:
  fn @f(...) -> T { ... }   define or replace a function (may span lines)
  @f(args)                  run a function: @pow(2.0, 10), arrays as [1.0, 2.0]
  grad @f(args)             value and gradient
  :time @f(args)            median time per call (also :time grad @f(args))
  :disasm @f                bytecode
  :ad @f                    forward and reverse bytecode
  :cfg @f                   write f.dot and f.ad.dot (and SVGs if Graphviz is installed)
  :load FILE                load the functions of a file
  :reload                   load the last file again
  :funcs                    list the functions
  :help                     this text
  :quit                     leave (also Ctrl-D)
keys: Tab completes commands, @names and file paths; Ctrl-C interrupts a
running computation or clears the line.";

/// The session's functions: name, origin and source text, in definition order.
#[derive(Default)]
struct Defs {
    funcs: Vec<(String, String)>,
}

/// Split source text into function chunks (each starts at a line beginning
/// with `fn`), with their names.
fn chunks(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut current = String::new();
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("fn ")
            && !current.trim().is_empty()
            && current.contains("fn ")
        {
            out.push((fn_name(&current), std::mem::take(&mut current)));
        }
        current.push_str(line);
    }
    if !current.trim().is_empty() {
        out.push((fn_name(&current), current));
    }
    out
}

fn fn_name(chunk: &str) -> String {
    chunk
        .split("fn")
        .nth(1)
        .and_then(|rest| rest.trim_start().strip_prefix('@'))
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
                .collect()
        })
        .unwrap_or_default()
}

/// Shared with the rustyline helper for completion and hints.
#[derive(Default)]
struct Known {
    /// Function names with their signatures.
    funcs: Vec<(String, String)>,
}

struct Session {
    defs: Defs,
    engine: Option<Engine>,
    last_file: Option<PathBuf>,
    interrupt: Arc<AtomicBool>,
    known: Rc<RefCell<Known>>,
}

impl Session {
    /// Replace or add the functions of `text` and rebuild; on error the
    /// session is unchanged and the diagnostics are returned.
    fn define(&mut self, text: &str, origin: &str) -> Result<Vec<String>, String> {
        let new = chunks(text);
        let mut funcs: Vec<(String, String)> = self.defs.funcs.clone();
        let mut names = Vec::new();
        for (name, _) in &new {
            names.push(name.clone());
            funcs.retain(|(n, _)| n != name);
        }
        // The new text first, so diagnostics point at its own lines.
        let mut combined = String::from(text);
        if !combined.ends_with('\n') {
            combined.push('\n');
        }
        for (_, chunk) in &funcs {
            combined.push_str(chunk);
            if !chunk.ends_with('\n') {
                combined.push('\n');
            }
        }
        let module = assembler::assemble(&combined, origin).map_err(|d| d.render())?;
        let mut engine = Engine::new(module).map_err(|e| e.to_string())?;
        engine.vm_mut().set_interrupt_handle(self.interrupt.clone());
        funcs.extend(new);
        self.defs.funcs = funcs;
        self.set_engine(engine);
        Ok(names)
    }

    fn set_engine(&mut self, engine: Engine) {
        let mut known = self.known.borrow_mut();
        known.funcs = engine
            .module()
            .funcs
            .iter()
            .map(|f| {
                let params: Vec<String> = f
                    .params
                    .iter()
                    .map(|p| {
                        format!(
                            "%{}: {}",
                            f.values[p.index()].name.clone().unwrap_or_default(),
                            f.ty(*p)
                        )
                    })
                    .collect();
                let ret = match &f.ret {
                    vm::ir::RetType::One(t) => t.to_string(),
                    vm::ir::RetType::Many(_) => "...".into(),
                };
                (f.name.clone(), format!("({}) -> {ret}", params.join(", ")))
            })
            .collect();
        drop(known);
        self.engine = Some(engine);
    }

    fn load(&mut self, path: &Path) -> Result<String, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let names = self.define(&text, &path.display().to_string())?;
        self.last_file = Some(path.to_path_buf());
        Ok(format!(
            "loaded {} function(s) from {}",
            names.len(),
            path.display()
        ))
    }

    fn engine(&mut self) -> Result<&mut Engine, String> {
        self.engine
            .as_mut()
            .ok_or_else(|| "no functions defined yet (type `fn ...` or `:load FILE`)".into())
    }

    /// A call `@f(args)` resolved against the session.
    fn call(&mut self, text: &str) -> Result<(vm::ir::FuncId, Vec<Value>), String> {
        let (name, lits) = assembler::parse_call(text.trim())?;
        let engine = self.engine()?;
        let f = engine
            .find(&name)
            .ok_or_else(|| format!("no function @{name} (see :funcs)"))?;
        let params = engine.module().func(f).param_types();
        let args = assembler::literals_to_values(&params, &lits)?;
        Ok((f, args))
    }

    fn func_arg(&mut self, rest: &str) -> Result<vm::ir::FuncId, String> {
        let name = rest.trim();
        if name.is_empty() {
            return Err("which function? e.g. `:disasm @f`".into());
        }
        let engine = self.engine()?;
        engine
            .find(name)
            .ok_or_else(|| format!("no function {name} (see :funcs)"))
    }

    /// Execute one complete input; returns false to leave.
    fn execute(&mut self, input: &str) -> bool {
        self.interrupt.store(false, Ordering::Relaxed);
        let line = input.trim();
        let result = match line.split_once(char::is_whitespace).unwrap_or((line, "")) {
            ("", _) => Ok(String::new()),
            (":quit" | ":q" | ":exit", _) => return false,
            (":help" | ":h", _) => Ok(HELP.to_string()),
            (":funcs", _) => Ok(self.funcs()),
            (":load", path) => self.load(Path::new(path.trim())),
            (":reload", _) => match self.last_file.clone() {
                Some(p) => self.load(&p),
                None => Err("nothing loaded yet".into()),
            },
            (":disasm", rest) => self.func_arg(rest).and_then(|f| {
                let engine = self.engine()?;
                Ok(vm::disasm::function_in(engine.program().func(f), Some(engine.program())))
            }),
            (":ad", rest) => self
                .func_arg(rest)
                .and_then(|f| self.engine()?.disasm_ad(f).map_err(|e| e.to_string())),
            (":cfg", rest) => self.func_arg(rest).and_then(|f| self.cfg(f)),
            (":time", rest) => self.time(rest),
            ("grad", rest) => self.grad(rest),
            (cmd, _) if cmd.starts_with("fn") => self
                .define(input, "<input>")
                .map(|names| names.iter().map(|n| format!("defined @{n}")).collect::<Vec<_>>().join("\n")),
            (cmd, _) if cmd.starts_with('@') => self.run(line),
            (cmd, _) if cmd.starts_with(':') => Err(format!("unknown command {cmd} (try :help)")),
            _ => Err(format!("cannot read `{line}`: expected a command, `@f(args)`, `grad @f(args)` or `fn ...` (try :help)")),
        };
        match result {
            Ok(text) if text.is_empty() => {}
            Ok(text) => println!("{}", text.trim_end()),
            Err(e) => eprintln!("{}", e.trim_end()),
        }
        true
    }

    fn funcs(&mut self) -> String {
        let known = self.known.borrow();
        if known.funcs.is_empty() {
            return "no functions defined".into();
        }
        known
            .funcs
            .iter()
            .map(|(n, sig)| format!("@{n}{sig}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn run(&mut self, call: &str) -> Result<String, String> {
        let (f, args) = self.call(call)?;
        let v = self.engine()?.run(f, &args).map_err(|e| e.to_string())?;
        Ok(crate::args::value_text(&v, Some(16)))
    }

    fn grad(&mut self, call: &str) -> Result<String, String> {
        let (f, args) = self.call(call)?;
        let engine = self.engine()?;
        let g = engine.grad(f, &args).map_err(|e| e.to_string())?;
        let names = param_names(engine, f);
        let mut out = vec![format!("value = {}", g.value)];
        out.extend(gradient_lines(&names, &g, Some(8)));
        Ok(out.join("\n"))
    }

    fn time(&mut self, rest: &str) -> Result<String, String> {
        let rest = rest.trim();
        let (is_grad, call) = match rest.strip_prefix("grad") {
            Some(c) => (true, c),
            None => (false, rest),
        };
        let (f, args) = self.call(call)?;
        let engine = self.engine()?;
        let fail = |e: Fail| match e {
            Fail::Usage(m) | Fail::Assembly(m) | Fail::Trap(m) | Fail::Internal(m) => m,
        };
        let (ns, allocs) = if is_grad {
            let mut out = Gradient::default();
            commands::time_calls(|| engine.grad_into(f, &args, &mut out).map_err(Fail::from))
                .map_err(fail)?
        } else {
            commands::time_calls(|| engine.run(f, &args).map(|_| ()).map_err(Fail::from))
                .map_err(fail)?
        };
        Ok(format!(
            "{ns:.1} ns per call (median), {allocs} allocations per call"
        ))
    }

    fn cfg(&mut self, f: vm::ir::FuncId) -> Result<String, String> {
        let engine = self.engine()?;
        let func = engine.module().func(f).clone();
        let mut written = Vec::new();
        let primal = crate::cfg::primal_dot(engine.module(), &func);
        let path = format!("{}.dot", func.name);
        std::fs::write(&path, primal).map_err(|e| format!("cannot write {path}: {e}"))?;
        written.push(path);
        if func.ret == vm::ir::RetType::One(vm::Type::F64) {
            let d = engine.derive(f).map_err(|e| e.to_string())?;
            let (fwd, rev) = (
                engine.derived_ir(d.fwd).cloned(),
                engine.derived_ir(d.rev).cloned(),
            );
            if let (Some(fwd), Some(rev)) = (fwd, rev) {
                let program = engine.program();
                let names =
                    |c: vm::ir::FuncId| program.get(c).map_or("?".into(), |g| g.name.clone());
                let path = format!("{}.ad.dot", func.name);
                std::fs::write(&path, crate::cfg::ad_dot(&names, &fwd, &rev))
                    .map_err(|e| format!("cannot write {path}: {e}"))?;
                written.push(path);
            }
        }
        let mut msg = format!("wrote {}", written.join(", "));
        for dot in &written {
            let svg = dot.trim_end_matches(".dot").to_string() + ".svg";
            let ok = std::process::Command::new("dot")
                .args(["-Tsvg", dot, "-o", &svg])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                msg.push_str(&format!(", rendered {svg}"));
            }
        }
        Ok(msg)
    }
}

fn param_names(engine: &Engine, f: vm::ir::FuncId) -> Vec<String> {
    let func = engine.module().func(f);
    func.params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            func.values[p.index()]
                .name
                .clone()
                .unwrap_or_else(|| format!("arg{i}"))
        })
        .collect()
}

// ---- rustyline helper --------------------------------------------------------

struct AdvmHelper {
    known: Rc<RefCell<Known>>,
    files: FilenameCompleter,
    color: bool,
}

impl Completer for AdvmHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        if before.starts_with(":load ") {
            return self.files.complete(line, pos, ctx);
        }
        let start = before
            .rfind(|c: char| c.is_whitespace() || c == '(' || c == ',')
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        let mut out = Vec::new();
        if let Some(prefix) = word.strip_prefix('@') {
            for (name, sig) in &self.known.borrow().funcs {
                if name.starts_with(prefix) {
                    out.push(Pair {
                        display: format!("@{name}{sig}"),
                        replacement: format!("@{name}"),
                    });
                }
            }
        } else if start == 0 {
            for c in COMMANDS {
                if c.starts_with(word) {
                    out.push(Pair {
                        display: c.to_string(),
                        replacement: c.to_string(),
                    });
                }
            }
        }
        Ok((start, out))
    }
}

impl Hinter for AdvmHelper {
    type Hint = String;

    /// After `@name(`, the function's signature.
    fn hint(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> Option<String> {
        if pos != line.len() || !line.ends_with('(') {
            return None;
        }
        let at = line.rfind('@')?;
        let name = &line[at + 1..line.len() - 1];
        let known = self.known.borrow();
        let (_, sig) = known.funcs.iter().find(|(n, _)| n == name)?;
        Some(format!("  {sig}"))
    }
}

impl Highlighter for AdvmHelper {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        if !self.color {
            return Cow::Borrowed(line);
        }
        Cow::Owned(highlight(line))
    }

    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        if self.color {
            Cow::Owned(format!("\x1b[2m{hint}\x1b[0m"))
        } else {
            Cow::Borrowed(hint)
        }
    }

    fn highlight_char(
        &self,
        _line: &str,
        _pos: usize,
        _kind: rustyline::highlight::CmdKind,
    ) -> bool {
        self.color
    }
}

/// ANSI colours: keywords, `%registers`, `@functions`, `labels:`, literals.
fn highlight(line: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "fn", "phi", "ret", "br", "jmp", "grad", "f64", "i64", "bool", "true", "false",
    ];
    let mut out = String::with_capacity(line.len() * 2);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String, next: Option<char>| {
        if word.is_empty() {
            return;
        }
        let color = if word.starts_with('%') {
            "33"
        } else if word.starts_with('@') {
            "36"
        } else if word.starts_with(':') || KEYWORDS.contains(&word.as_str()) {
            "35;1"
        } else if word
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '-')
            || word == "inf"
            || word == "nan"
        {
            "32"
        } else if next == Some(':') {
            "34"
        } else {
            ""
        };
        if color.is_empty() {
            out.push_str(word);
        } else {
            out.push_str(&format!("\x1b[{color}m{word}\x1b[0m"));
        }
        word.clear();
    };
    let chars: Vec<char> = line.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        let part_of_word = c.is_alphanumeric()
            || matches!(c, '_' | '.' | '%' | '@' | '-')
            || (*c == ':' && word.is_empty() && i == 0);
        if part_of_word {
            word.push(*c);
        } else {
            flush(&mut word, &mut out, Some(*c));
            out.push(*c);
        }
    }
    flush(&mut word, &mut out, None);
    out
}

impl Validator for AdvmHelper {
    /// A `fn` definition continues until its braces balance.
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        let input = ctx.input();
        if input.trim_start().starts_with("fn") {
            let code: String = input
                .lines()
                .map(|l| l.split(';').next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            let open = code.matches('{').count();
            let close = code.matches('}').count();
            if open == 0 || open > close {
                return Ok(ValidationResult::Incomplete);
            }
        }
        Ok(ValidationResult::Valid(None))
    }
}

impl Helper for AdvmHelper {}

fn history_path() -> Option<PathBuf> {
    if std::env::var_os("ADVM_NO_HISTORY").is_some_and(|v| v != "0") {
        return None;
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(base.join("advm").join("history"))
}

/// Run the REPL; returns the exit status (0 at end of input).
pub fn run(file: Option<&Path>) -> u8 {
    let interactive = std::io::stdin().is_terminal();
    let interrupt = Arc::new(AtomicBool::new(false));
    {
        // Ctrl-C while a computation runs: ask the VM to stop at its next
        // backward jump or call. At the prompt, rustyline sees Ctrl-C itself.
        let flag = interrupt.clone();
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    }
    let known = Rc::new(RefCell::new(Known::default()));
    let mut session = Session {
        defs: Defs::default(),
        engine: None,
        last_file: None,
        interrupt,
        known: known.clone(),
    };
    let mut editor: Editor<AdvmHelper, rustyline::history::DefaultHistory> = match Editor::new() {
        Ok(e) => e,
        Err(e) => return Fail::Usage(format!("cannot start the line editor: {e}")).report_code(),
    };
    editor.set_helper(Some(AdvmHelper {
        known,
        files: FilenameCompleter::new(),
        color: interactive && std::io::stdout().is_terminal(),
    }));
    let history = if interactive { history_path() } else { None };
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    if interactive {
        println!(
            "advm {} — :help for commands, Ctrl-D to leave",
            env!("CARGO_PKG_VERSION")
        );
    }
    if let Some(f) = file {
        match session.load(f) {
            Ok(msg) if interactive => println!("{msg}"),
            Ok(_) => {}
            Err(e) => eprintln!("{}", e.trim_end()),
        }
    }
    loop {
        match editor.readline("advm> ") {
            Ok(line) => {
                if !line.trim().is_empty() && interactive {
                    let _ = editor.add_history_entry(line.as_str());
                }
                if !session.execute(&line) {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("advm: {e}");
                break;
            }
        }
    }
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(h);
    }
    0
}
