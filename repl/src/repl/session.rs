//! A REPL session: the functions defined so far, the engine built from
//! them, and the commands.
//!
//! The session keeps the source text of every function by name (typed or
//! loaded, see [`Chunk`]). A definition or `:load` replaces the functions of
//! the same names, re-assembles the whole text and builds a fresh
//! [`Engine`]; only when that succeeds does it become the session's state,
//! so a definition with errors changes nothing. The fresh engine has no
//! derived code, so replacing a function also drops the forward and reverse
//! code of every function that called it. Piped definitions of new
//! functions are the exception: each is assembled alone, with stubs of the
//! functions it calls, and appended to the engine or held as pending
//! (`define_appended`, `define_held`), so that a long script costs time
//! linear in its length.

use super::source::{self, call_shape, locate_call_error, Adl, Chunk, Combined, Problem, Source};
use crate::commands::{self, gradient_lines, param_names, Fail};
use ad::{Engine, Gradient};
use assembler::Diagnostics;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use vm::ir::FuncId;
use vm::Value;

/// Commands, for `:help` and completion: (name, argument hint, what it does).
pub const COMMANDS: &[(&str, &str, &str)] = &[
    (":help", "", "this text"),
    (":quit", "", "leave (also Ctrl-D)"),
    (":load", " FILE", "load the functions of FILE"),
    (":reload", "", "load the last file again"),
    (":funcs", "", "list the functions"),
    (":disasm", " @f", "bytecode (all functions without @f)"),
    (
        ":ir",
        " @f",
        "the .adasm text (for .adl, the generated code)",
    ),
    (":ad", " @f", "forward and reverse bytecode"),
    (
        ":cfg",
        " @f",
        "write f.dot and f.ad.dot (and SVGs with Graphviz)",
    ),
    (":time", " [grad] @f(args)", "median time per call"),
    ("grad", " @f(args) [wrt x, y]", "value and gradient"),
    (
        "jvp",
        " @f(args) dir [d1, ...] [wrt x, y]",
        "value and derivative along a direction",
    ),
    (":jvp", " @f", "tangent (forward-mode) bytecode"),
    (
        "hvp",
        " @f(args) dir [d1, ...] [wrt x, y]",
        "value, gradient and Hessian-vector product",
    ),
    (
        "hessian",
        " @f(args) [wrt x, y]",
        "value, gradient and Hessian",
    ),
    (":hvp", " @f", "Hessian-vector product bytecode"),
    (
        ":budget",
        " [BYTES|off]",
        "bound the AD storage of derivatives (show it without argument)",
    ),
];

/// `; did you mean `:load`?` when a command of [`COMMANDS`] is close to
/// the unknown `cmd` (see [`assembler::closest`]), else nothing.
fn command_like(cmd: &str) -> String {
    assembler::closest(cmd, COMMANDS.iter().map(|(c, _, _)| *c))
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

pub const HELP: &str = "\
  fn @f(%x: f64) -> f64 {     define or replace a function; the input goes on
    ...                       until the braces balance (Ctrl-C abandons it)
  }
  @f(args)                    run: @pow(2.0, 10), arrays as [1.0, 2.0]
  grad @f(args) [wrt x, y]    value and gradient (wrt: only these parameters)
  jvp @f(args) dir [d1, ...] [wrt x, y]
                              value and derivative along the direction (one
                              entry per parameter, null for i64 and bool)
  hvp @f(args) dir [d1, ...] [wrt x, y]
                              value, gradient and Hessian-vector product
                              along the direction (forward-over-reverse)
  hessian @f(args) [wrt x, y] value, gradient and the dense Hessian
  :time @f(args)              median time per call after warm-up
  :time grad @f(args)         the same for the gradient
  fn f(x: f64) -> f64 { ... } an .adl definition (docs/adl.md), likewise
  sin(1.0) * f(2.0)           an .adl expression: its value
  let x = <expression>        a variable for later expressions and arguments
  grad f(x, 2)                calls without @; arguments may be expressions
  :disasm [@f]                bytecode
  :ir @f                      the .adasm text (for .adl: the generated code)
  :ad @f                      forward and reverse bytecode
  :jvp @f                     tangent (forward-mode) bytecode
  :hvp @f                     Hessian-vector product bytecode
  :cfg @f                     write f.dot and f.ad.dot (CFG pictures) here,
                              and f.svg, f.ad.svg if Graphviz is installed
  :load FILE                  load (or replace) the functions of FILE
  :reload                     load the last file again
  :funcs                      list the functions
  :help                       this text
  :quit                       leave (also Ctrl-D)
keys: Tab completes commands, @names and file paths; Ctrl-C interrupts a
running computation, or clears the line; Up/Down and Ctrl-R search history.";

/// Function names and signatures, shared with the line editor's helper.
#[derive(Default)]
pub struct Known {
    /// (name without `@`, `(%x: f64, ...) -> T`)
    pub funcs: Vec<(String, String)>,
}

/// What one input asks of the loop.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// Nothing to print.
    Quiet,
    /// Print on stdout.
    Out(String),
    /// Print on stderr (already rendered, with a caret where it applies).
    Err(String),
    /// Leave the REPL.
    Quit,
}

/// What a definition or a load did.
struct Defined {
    /// How many functions the text had.
    count: usize,
    /// Per function of the text: `defined @f`, or why it is pending.
    news: Vec<String>,
    /// `defined @g (it was pending)` for each pending definition it completed.
    completed: Vec<String>,
    /// `dropped pending @g: ...` for each pending definition it discarded.
    dropped: Vec<String>,
}

/// Lookups over [`Session::pending`], kept with it so that holding one
/// more piped definition costs time in its own size, not in the number
/// already held (5 000 definitions in reverse call order were quadratic:
/// each one hashed every pending name and scanned every pending text).
#[derive(Default)]
struct PendingIndex {
    /// The position of each pending definition, by name.
    by_name: HashMap<String, usize>,
    /// The names of the pending definitions and of the functions they call.
    touched: HashSet<String>,
    /// For each name a pending definition waits for, the positions of those
    /// that wait for it (a position may be stale: its `waits` say).
    waiters: HashMap<String, Vec<usize>>,
}

impl PendingIndex {
    fn of(pending: &[Pending]) -> PendingIndex {
        let mut ix = PendingIndex::default();
        ix.add(pending, 0);
        ix
    }

    /// `added` now sits at positions `start..` of the pending list.
    fn add(&mut self, added: &[Pending], start: usize) {
        for (k, p) in added.iter().enumerate() {
            self.by_name.insert(p.chunk.name.clone(), start + k);
            self.touched.insert(p.chunk.name.clone());
            for r in source::references(p.chunk.text()) {
                if !self.touched.contains(r) {
                    self.touched.insert(r.to_string());
                }
            }
            self.wait(start + k, &p.waits);
        }
    }

    /// The definition at position `i` now waits for `waits`.
    fn wait(&mut self, i: usize, waits: &[String]) {
        for w in waits {
            self.waiters.entry(w.clone()).or_default().push(i);
        }
    }
}

/// The pending list with its index: lookups by name.
#[derive(Clone, Copy)]
struct Held<'a> {
    list: &'a [Pending],
    ix: &'a PendingIndex,
}

impl<'a> Held<'a> {
    fn get(&self, name: &str) -> Option<&'a Pending> {
        self.ix.by_name.get(name).map(|&i| &self.list[i])
    }

    fn contains_key(&self, name: &str) -> bool {
        self.ix.by_name.contains_key(name)
    }
}

/// A typed definition held back until the functions it calls are defined.
struct Pending {
    chunk: Chunk,
    /// What it waits for: functions not defined yet, or pending ones.
    waits: Vec<String>,
}

impl Pending {
    /// `@a is pending until @b is defined`, and `; did you mean @c?` when
    /// a function it waits for is close to a defined one (a misspelt call).
    /// Waiting is no error (definitions may come in any order), so only
    /// names of at least [`HINT_MIN_CHARS`] characters get a hint: one
    /// edit turns any short name into another.
    fn note(&self, engine: Option<&Engine>) -> String {
        let mut out = format!(
            "{} is pending until {}",
            label(&self.chunk),
            self.until(engine)
        );
        let hints: Vec<String> = engine
            .map(|e| {
                let names: Vec<&str> = e
                    .module()
                    .funcs
                    .iter()
                    .map(|f| f.name.as_str())
                    .filter(|n| *n != self.chunk.name)
                    .collect();
                self.waits
                    .iter()
                    .filter(|w| w.chars().count() >= HINT_MIN_CHARS && e.find(w).is_none())
                    .filter_map(|w| {
                        let near = assembler::closest(w, names.iter().copied())?;
                        Some(if self.waits.len() == 1 {
                            format!("@{near}")
                        } else {
                            format!("@{near} for @{w}")
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !hints.is_empty() {
            out.push_str(&format!("; did you mean {}?", list(&hints)));
        }
        out
    }

    /// `@b is defined`, `@b and @c are defined`, `@b, @c and @d are
    /// defined`; for a wait on a name that `engine` defines too (whose new
    /// version is pending), `@b is defined (@b is pending; its defined
    /// version is still in use)`.
    fn until(&self, engine: Option<&Engine>) -> String {
        let waits: Vec<String> = self.waits.iter().map(|w| format!("@{w}")).collect();
        let mut out = format!(
            "{} {} defined",
            list(&waits),
            if waits.len() == 1 { "is" } else { "are" }
        );
        let both: Vec<String> = self
            .waits
            .iter()
            .filter(|w| engine.is_some_and(|e| e.find(w).is_some()))
            .map(|w| format!("@{w}"))
            .collect();
        if !both.is_empty() {
            out.push_str(&format!(" ({})", both_note(&both)));
        }
        out
    }
}

/// The shortest name of a pending definition's callee that gets a hint.
const HINT_MIN_CHARS: usize = 4;

/// `@a`, `@a and @b`, `@a, @b and @c`
fn list(names: &[String]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

/// `@a is pending; its defined version is still in use`, for names both
/// defined and pending.
fn both_note(names: &[String]) -> String {
    if names.len() == 1 {
        format!(
            "{} is pending; its defined version is still in use",
            names[0]
        )
    } else {
        format!(
            "{} are pending; their defined versions are still in use",
            list(names)
        )
    }
}

/// Why one attempt at a definition or load failed.
enum Attempt {
    /// Errors inside these pending definitions (index in the pending list
    /// tried, first error): drop them and try again.
    BadPending(Vec<(usize, String)>),
    /// Errors inside these rules defined before (the key of each chunk in
    /// the base, its label, first error): the definition made them no
    /// longer fit (a function of theirs redefined with another
    /// signature); drop them and try again.
    BadRules(Vec<((*const Source, usize), String, String)>),
    /// The definition's own errors (rendered).
    Failed(String),
}

/// Why a set of functions could not become the session's state.
enum Failure {
    /// The assembler's diagnostics, with the text they are about.
    Assembly(Box<Rejected>),
    /// Building the engine failed (rendered).
    Engine(String),
}

/// Diagnostics for `combined`, the text of the chunks `order`.
struct Rejected {
    combined: Combined,
    order: Vec<Chunk>,
    diags: Diagnostics,
}

/// Texts at least this long are assembled and built on a thread of their
/// own, so that Ctrl-C can interrupt the wait (see
/// `Session::interruptible`).
const BACKGROUND_BYTES: usize = 1 << 20;

/// How replies name a chunk: `@f`, or for a rule chunk its line, `rule
/// @f jvp @g`.
fn label(c: &Chunk) -> String {
    match source::rule_of_chunk(&c.name) {
        Some(_) => c
            .text()
            .lines()
            .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with(';'))
            .map(|l| l.split(';').next().unwrap_or(l).trim().to_string())
            .unwrap_or_else(|| c.name.clone()),
        None => format!("@{}", c.name),
    }
}

/// Identifies a chunk: its source and where it starts there.
fn key(c: &Chunk) -> (*const Source, usize) {
    (Rc::as_ptr(&c.source), c.range.start)
}

/// `base` with each of `add` replacing the function of its name (in its
/// place) or appended.
fn merged<'a>(base: &[Chunk], add: impl Iterator<Item = &'a Chunk>) -> Vec<Chunk> {
    let mut out = base.to_vec();
    let mut at: HashMap<String, usize> = HashMap::with_capacity(out.len());
    for (i, c) in out.iter().enumerate() {
        at.entry(c.name.clone()).or_insert(i);
    }
    for c in add {
        match at.remove(&c.name) {
            Some(i) => out[i] = c.clone(),
            None => out.push(c.clone()),
        }
    }
    out
}

/// If the only errors in `diags` are calls to functions nothing defines,
/// each inside one of `candidates`: the candidates to hold back, by name,
/// with what each waits for. Those are the ones with such a call and,
/// transitively, the candidates that call them (found in their text).
fn blocked(
    combined: &Combined,
    order: &[Chunk],
    diags: &Diagnostics,
    candidates: &[Chunk],
) -> Option<HashMap<String, Vec<String>>> {
    let ours: HashSet<(*const Source, usize)> = candidates.iter().map(key).collect();
    let mut waits: HashMap<String, Vec<String>> = HashMap::new();
    for d in &diags.items {
        let missing = d.unknown_function()?;
        let chunk = order.get(combined.chunk_at(d.span.start))?;
        if !ours.contains(&key(chunk)) {
            return None;
        }
        let w = waits.entry(chunk.name.clone()).or_default();
        if !w.iter().any(|m| m == missing) {
            w.push(missing.to_string());
        }
    }
    if waits.is_empty() {
        return None;
    }
    let mut callers: HashMap<&str, Vec<&str>> = HashMap::new();
    for c in candidates {
        for r in source::references(c.text()) {
            if r != c.name {
                callers.entry(r).or_default().push(&c.name);
            }
        }
    }
    // Which candidates are held (those with a missing callee and,
    // transitively, their callers), then what each of the second kind
    // waits for: every held function it calls, in the order its text calls
    // them (not in the hash map's order, which varies from run to run).
    let mut held: HashSet<String> = waits.keys().cloned().collect();
    let mut queue: Vec<String> = held.iter().cloned().collect();
    while let Some(name) = queue.pop() {
        for caller in callers.get(name.as_str()).into_iter().flatten() {
            if held.insert(caller.to_string()) {
                queue.push(caller.to_string());
            }
        }
    }
    for c in candidates {
        if !held.contains(&c.name) || waits.contains_key(&c.name) {
            continue;
        }
        let mut on: Vec<String> = Vec::new();
        for r in source::references(c.text()) {
            if r != c.name && held.contains(r) && !on.iter().any(|o| o == r) {
                on.push(r.to_string());
            }
        }
        waits.insert(c.name.clone(), on);
    }
    Some(waits)
}

/// A function with the signature of `f` and an empty body (a stand-in for
/// a callee when a definition is assembled alone); `None` for a function
/// returning several values (none of the session's).
fn stub(f: &vm::ir::Function) -> Option<String> {
    let vm::ir::RetType::One(ret) = f.ret else {
        return None;
    };
    let params: Vec<String> = f
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| format!("%p{i}: {}", f.ty(*p)))
        .collect();
    let body = match ret {
        vm::Type::F64 => "    ret 0.0",
        vm::Type::I64 => "    ret 0",
        vm::Type::Bool => "    ret false",
        vm::Type::Arr => "    %a = anew 0\n    ret %a",
    };
    Some(format!(
        "fn @{}({}) -> {ret} {{\nentry:\n{body}\n}}\n",
        f.name,
        params.join(", ")
    ))
}

/// A stub (see [`stub`]) with the header of the function whose text is
/// `text`: up to its `{`, its return type after `->`. `None` if the header
/// is not of that shape.
fn header_stub(text: &str) -> Option<String> {
    let header = &text[..text.find('{')?];
    if header.contains(';') {
        return None;
    }
    let ret = header.rsplit_once("->")?.1.trim();
    let body = match ret {
        "f64" => "    ret 0.0",
        "i64" => "    ret 0",
        "bool" => "    ret false",
        "f64[]" => "    %a = anew 0\n    ret %a",
        _ => return None,
    };
    Some(format!("{} {{\nentry:\n{body}\n}}\n", header.trim_end()))
}

/// Whether a text's braces do not balance (a definition left open).
fn unclosed(text: &str) -> bool {
    let mut braces = source::Braces::default();
    text.lines().for_each(|l| braces.add_line(l));
    braces.open()
}

pub struct Session {
    chunks: Vec<Chunk>,
    /// Typed definitions waiting for functions they call (see `define`), in
    /// the order they came.
    pending: Vec<Pending>,
    /// Lookups over `pending`, changed with it.
    pending_ix: PendingIndex,
    engine: Option<Engine>,
    last_file: Option<PathBuf>,
    interrupt: Arc<AtomicBool>,
    /// The command line's `--no-inline` and `--max-source-bytes`.
    opts: advm::Options,
    known: Rc<RefCell<Known>>,
    /// Where `:cfg` writes (the current directory unless a test says).
    out_dir: PathBuf,
    /// How many times the session's functions were assembled and built
    /// (each definition, load or batch of definitions tries at least once,
    /// unless it is assembled alone): what piped definitions cost, for the
    /// tests.
    pub(crate) builds: usize,
    /// How many times a piped definition was assembled alone, with stubs
    /// of its callees (`define_appended`, `define_held`).
    pub(crate) singles: usize,
    /// The limits of every engine the session builds (`advm repl --fuel`
    /// and the other limit flags).
    limits: vm::Limits,
    /// The names of `chunks`, kept with them (so that planning a run of
    /// piped definitions does not hash every name per input).
    names: HashSet<String>,
    /// The `.adl` variables bound by `let x = <expression>`, in order.
    vars: Vec<(String, Value)>,
}

impl Session {
    pub fn new(interrupt: Arc<AtomicBool>, known: Rc<RefCell<Known>>) -> Session {
        Session {
            chunks: Vec::new(),
            pending: Vec::new(),
            pending_ix: PendingIndex::default(),
            engine: None,
            last_file: None,
            interrupt,
            opts: advm::Options::default(),
            known,
            out_dir: PathBuf::from("."),
            builds: 0,
            singles: 0,
            limits: vm::Limits::default(),
            names: HashSet::new(),
            vars: Vec::new(),
        }
    }

    /// The limits of every call from now on.
    /// Inlining and the source size limit for what is loaded from now on.
    pub fn set_options(&mut self, opts: advm::Options) {
        self.opts = opts;
    }

    pub fn set_limits(&mut self, limits: vm::Limits) {
        if let Some(e) = &mut self.engine {
            *e.vm_mut().limits_mut() = limits.clone();
        }
        self.limits = limits;
    }

    /// Execute one complete input (a command line or a whole definition).
    pub fn execute(&mut self, input: &str) -> Reply {
        self.interrupt.store(false, Ordering::Relaxed);
        let converted;
        let mut adl = None;
        let input = if source::is_adl_definition(input) {
            match self.adl_to_adasm(input, "<input>") {
                Ok((text, lines)) => {
                    converted = text;
                    adl = Some(lines);
                    converted.as_str()
                }
                Err(e) => return Reply::Err(e),
            }
        } else {
            input
        };
        let rule_text;
        let input = if source::is_rule_line(input) {
            // A rule line (either language) is a definition of its own.
            rule_text = source::adl_rule_line(input).unwrap_or_else(|| input.to_string());
            rule_text.as_str()
        } else {
            input
        };
        if source::starts_definition(input) || source::is_rule_line(input) {
            return match self.define_text(input, adl) {
                Ok(d) if d.news.is_empty() => Reply::Err(
                    "<input>: error: no function here: a definition is `fn @f(%x: f64) -> f64 { ... }`"
                        .into(),
                ),
                Ok(d) => Reply::Out([d.dropped, d.news, d.completed].concat().join("\n")),
                Err(e) => Reply::Err(e),
            };
        }
        let line = input.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with("//") {
            return Reply::Quiet;
        }
        let rewritten;
        let line = match self.adl_call_line(line) {
            Ok(Some(l)) => {
                rewritten = l;
                rewritten.as_str()
            }
            Ok(None) => line,
            Err(p) => return Reply::Err(p.render(line).trim_end().to_string()),
        };
        let (cmd, rest_at) = match line.find(char::is_whitespace) {
            Some(i) => (&line[..i], i),
            None => (line, line.len()),
        };
        let result = match cmd {
            ":quit" | ":q" | ":exit" => match no_argument(line, rest_at, cmd) {
                Ok(()) => return Reply::Quit,
                Err(p) => Err(p),
            },
            ":help" | ":h" | ":?" => no_argument(line, rest_at, cmd).map(|()| HELP.to_string()),
            ":funcs" | ":f" => no_argument(line, rest_at, cmd).map(|()| self.funcs()),
            ":load" | ":l" => self.load_cmd(line, rest_at),
            ":reload" | ":r" => {
                no_argument(line, rest_at, cmd).and_then(|()| match self.last_file.clone() {
                    Some(p) => self.load(&p).map_err(Problem::plain),
                    None => Err(Problem::plain("nothing loaded yet: use :load FILE")),
                })
            }
            ":disasm" => self.disasm(line, rest_at),
            ":ir" => self.ir(line, rest_at),
            ":ad" => self
                .func_arg(line, rest_at, ":ad")
                .and_then(|f| self.engine_mut()?.disasm_ad(f).map_err(ad_problem)),
            ":cfg" => self
                .func_arg(line, rest_at, ":cfg")
                .and_then(|f| self.cfg(f)),
            ":time" => self.time(line, rest_at),
            ":budget" => self.budget(line, rest_at),
            "grad" | ":grad" => self.grad(line, rest_at),
            "jvp" => self.jvp(line, rest_at),
            "hvp" => self.hvp(line, rest_at),
            "hessian" => self.hessian(line, rest_at),
            ":hvp" => self
                .func_arg(line, rest_at, ":hvp")
                .and_then(|f| self.engine_mut()?.disasm_hvp(f).map_err(ad_problem)),
            ":jvp" => self
                .func_arg(line, rest_at, ":jvp")
                .and_then(|f| self.engine_mut()?.disasm_jvp(f).map_err(ad_problem)),
            _ if cmd.starts_with('@') => self.run(line),
            "let" => self.let_var(line, rest_at),
            _ if !cmd.starts_with(':') && adl::is_expression(line) => self.eval(line, 0),
            _ if cmd.starts_with(':') => Err(Problem::at(
                format!(
                    "unknown command {cmd}{} (:help lists them)",
                    command_like(cmd)
                ),
                0..cmd.len(),
            )),
            _ => Err(Problem::at(
                format!(
                    "expected a command: `@f(args)`, `grad @f(args)`, `fn ...`, an expression or `:help`{}",
                    command_like(cmd)
                ),
                0..cmd.len(),
            )),
        };
        match result {
            Ok(text) if text.trim().is_empty() => Reply::Quiet,
            Ok(text) => Reply::Out(text.trim_end().to_string()),
            Err(mut p) => {
                if let Some(t) = &mut p.trap {
                    self.show_source_line(t);
                }
                Reply::Err(p.render(line).trim_end().to_string())
            }
        }
    }

    /// Show the instruction of trap `t` as the line the user wrote: a line
    /// of the file or input that defined the function it names (for a
    /// function defined in `.adl`, a line of the `.adl` input).
    fn show_source_line(&self, t: &mut vm::Trap) {
        if let Some(c) = self.chunks.iter().find(|c| c.name == t.func) {
            match &c.source.adl {
                Some(adl) => t.show_source_line(&adl.text, 1),
                None => t.show_source_line(&c.source.text, 1),
            }
        }
    }

    /// Execute inputs read together from a pipe, with the replies
    /// [`Session::execute`] would give one by one, in order. Definitions
    /// that add new functions calling only functions defined before them
    /// (in the session or earlier in `inputs`), and that have nothing to do
    /// with a pending definition, are assembled and built together: one rebuild of the session for a
    /// run of them instead of one each (2 000 piped definitions took 20 s,
    /// the session being rebuilt per definition). For such a run the
    /// replies are the same: each would have been `defined @f`. Anything
    /// else is executed one input at a time, and so is an input at which a
    /// run stops building (then the rest is planned again).
    pub fn execute_many(&mut self, inputs: &[String]) -> Vec<Reply> {
        // `.adl` definitions are compiled against the session as it is
        // when they come: one at a time.
        if inputs.iter().any(|i| source::is_adl_definition(i)) {
            return inputs.iter().map(|i| self.execute(i)).collect();
        }
        let mut replies = Vec::with_capacity(inputs.len());
        let mut at = 0;
        while at < inputs.len() {
            let run = self.plain_definitions(&inputs[at..]);
            if let Some(mut r) = self.define_appended(&run) {
                at += r.len();
                replies.append(&mut r);
                continue;
            }
            let done = self.define_prefix(&run, &mut replies);
            if done > 0 {
                at += done;
                continue;
            }
            if let Some(r) = self.define_held(&inputs[at]) {
                replies.push(r);
                at += 1;
                continue;
            }
            replies.push(self.execute(&inputs[at]));
            at += 1;
        }
        replies
    }

    /// Define as long a prefix of `run` together as builds: the whole run,
    /// else (recursively) its first half; how many inputs it defined (0:
    /// none, for runs shorter than 2). A bad definition costs a few
    /// rebuilds of halves, not one per definition.
    fn define_prefix(&mut self, run: &[Vec<Chunk>], replies: &mut Vec<Reply>) -> usize {
        if run.len() < 2 {
            return 0;
        }
        if let Some(mut r) = self.define_together(run) {
            replies.append(&mut r);
            return run.len();
        }
        if run.len() < 4 {
            return 0;
        }
        self.define_prefix(&run[..run.len() / 2], replies)
    }

    /// The leading inputs that are definitions of new functions (each
    /// text's functions; no name twice, none defined in the session) that
    /// call only functions defined in the session, earlier in the run or
    /// themselves, and that no pending definition names or calls (nor they
    /// one): split into their functions.
    fn plain_definitions(&self, inputs: &[String]) -> Vec<Vec<Chunk>> {
        let mut run = Vec::new();
        // Pending definitions are left alone if the run neither defines
        // nor calls anything they name or call: one by one, each reply
        // would be `defined @f` and they would stay pending as they are.
        let untouchable = &self.pending_ix.touched;
        let defined = &self.names;
        let mut seen: HashSet<String> = HashSet::new();
        for input in inputs {
            if !source::starts_definition(input) {
                break;
            }
            let source = Rc::new(Source {
                origin: "<input>".into(),
                file: None,
                text: input.clone(),
                adl: None,
            });
            let chunks = source::split(&source);
            let fresh = |c: &Chunk, seen: &HashSet<String>| {
                !c.name.is_empty() && !defined.contains(c.name.as_str()) && !seen.contains(&c.name)
            };
            let mut ok = !chunks.is_empty();
            let mut names: Vec<String> = Vec::new();
            for c in &chunks {
                ok &= fresh(c, &seen) && !names.contains(&c.name);
                ok &= !untouchable.contains(c.name.as_str());
                // A rule is no function to append: the full path adds it.
                ok &= source::rule_of_chunk(&c.name).is_none();
                ok &= source::references(c.text()).iter().all(|r| {
                    !untouchable.contains(*r)
                        && (*r == c.name
                            || defined.contains(*r)
                            || seen.contains(*r)
                            || names.iter().any(|n| n == r))
                });
                names.push(c.name.clone());
            }
            if !ok {
                break;
            }
            seen.extend(names);
            run.push(chunks);
        }
        run
    }

    /// Add `run` (see [`Session::plain_definitions`]) to the session's
    /// engine without rebuilding it: its text is assembled alone, with a
    /// stub of each function it calls from the session (same signature,
    /// an empty body), and its functions are appended to the engine
    /// ([`Engine::add_functions`]), so a definition costs time in its own
    /// size, not the session's (piped definitions interleaved with calls
    /// were quadratic: 3 000 pairs took 26 s). The replies of the inputs,
    /// or `None` (nothing changed) where this does not apply: no engine
    /// yet, a function called that is not in the engine, or any error
    /// (the full path then reports it as usual).
    fn define_appended(&mut self, run: &[Vec<Chunk>]) -> Option<Vec<Reply>> {
        self.interrupt.store(false, Ordering::Relaxed);
        let engine = self.engine.as_ref()?;
        let new: Vec<Chunk> = run.iter().flatten().cloned().collect();
        if new.is_empty() {
            return None;
        }
        let names: HashSet<&str> = new.iter().map(|c| c.name.as_str()).collect();
        let mut stubs = String::new();
        let mut stubbed: Vec<FuncId> = Vec::new();
        for c in &new {
            for r in source::references(c.text()) {
                if names.contains(r) {
                    continue;
                }
                let id = engine.find(r)?;
                if !stubbed.contains(&id) {
                    stubs.push_str(&stub(engine.module().func(id))?);
                    stubbed.push(id);
                }
            }
        }
        let combined = Combined::new(&new);
        let text = format!("{}{stubs}", combined.text);
        self.singles += 1;
        let mut module = assembler::assemble(&text, "<input>").ok()?;
        if module.funcs.len() != new.len() + stubbed.len() {
            return None;
        }
        combined.relocate(&mut module, &new);
        let n = engine.module().funcs.len();
        let ids: Vec<FuncId> = (0..new.len())
            .map(|i| FuncId((n + i) as u32))
            .chain(stubbed)
            .collect();
        module.funcs.truncate(new.len());
        for inst in module
            .funcs
            .iter_mut()
            .flat_map(|f| f.blocks.iter_mut())
            .flat_map(|b| b.insts.iter_mut())
        {
            if let Some(c) = &mut inst.callee {
                *c = *ids.get(c.index())?;
            }
        }
        let added: Vec<(String, String)> = module
            .funcs
            .iter()
            .map(|f| (f.name.clone(), signature(f)))
            .collect();
        self.engine.as_mut()?.add_functions(module.funcs).ok()?;
        // The names are new (see `plain_definitions`): appended, in order.
        self.names.extend(new.iter().map(|c| c.name.clone()));
        self.chunks.extend(new);
        self.known.borrow_mut().funcs.extend(added);
        Some(
            run.iter()
                .map(|chunks| {
                    let lines: Vec<String> = chunks
                        .iter()
                        .map(|c| format!("defined @{}", c.name))
                        .collect();
                    Reply::Out(lines.join("\n"))
                })
                .collect(),
        )
    }

    /// A typed definition of new functions that calls functions not
    /// defined yet (or pending), held back as pending without assembling
    /// the session or the other pending definitions: its text is
    /// assembled alone, with stubs of the defined and pending functions it
    /// calls, and must have no error but calls to functions nothing
    /// defines. The reply, and the pending list, are those of
    /// [`Session::define`] (which assembles everything, twice: definitions
    /// in reverse call order were quadratic, 5 000 took 42 s). `None`
    /// (nothing changed) where this does not apply.
    fn define_held(&mut self, input: &str) -> Option<Reply> {
        if !source::starts_definition(input) {
            return None;
        }
        if self.engine.is_none() && !self.chunks.is_empty() {
            return None;
        }
        let source = Rc::new(Source {
            origin: "<input>".into(),
            file: None,
            text: input.to_string(),
            adl: None,
        });
        let new = source::split(&source);
        let (held_list, ix) = (&self.pending, &self.pending_ix);
        let pending = Held {
            list: held_list,
            ix,
        };
        let mut names: HashSet<&str> = HashSet::new();
        for c in &new {
            let fresh = !c.name.is_empty()
                && !self.names.contains(&c.name)
                && !pending.contains_key(c.name.as_str());
            if !fresh || !names.insert(c.name.as_str()) {
                return None;
            }
        }
        if new.is_empty() {
            return None;
        }
        let engine = self.engine.as_ref();
        let defined = |r: &str| engine.is_some_and(|e| e.find(r).is_some());
        // Stubs of the functions called that are defined or pending (a
        // pending one from its own header: the definition is checked
        // against it, as when assembled with it).
        let mut stubs = String::new();
        let mut stubbed: HashSet<&str> = HashSet::new();
        let mut missing: Vec<&str> = Vec::new();
        for c in &new {
            for r in source::references(c.text()) {
                if names.contains(r) || stubbed.contains(r) || missing.contains(&r) {
                    continue;
                }
                if let Some(p) = pending.get(r) {
                    stubs.push_str(&header_stub(p.chunk.text())?);
                    stubbed.insert(r);
                } else if let Some(id) = engine.and_then(|e| e.find(r)) {
                    stubs.push_str(&stub(engine?.module().func(id))?);
                    stubbed.insert(r);
                } else {
                    missing.push(r);
                }
            }
        }
        let calls_held = new.iter().any(|c| {
            source::references(c.text())
                .iter()
                .any(|r| pending.contains_key(r))
        });
        if missing.is_empty() && !calls_held {
            return None;
        }
        let combined = Combined::new(&new);
        let text = format!("{}{stubs}", combined.text);
        self.singles += 1;
        if let Err(diags) = assembler::assemble(&text, "<input>") {
            // Only calls of functions nothing defines, inside the new text.
            let ok = diags.items.iter().all(|d| {
                d.span.start < combined.text.len()
                    && d.unknown_function().is_some_and(|m| missing.contains(&m))
            });
            if !ok {
                return None;
            }
        }
        // What each new function waits for (as `blocked` finds it): the
        // functions it calls that nothing defines, in the order it calls
        // them; without those, the pending (held) ones it calls.
        let held_name = |r: &str| pending.contains_key(r) || names.contains(r);
        let waits_of = |c: &Chunk| -> Vec<String> {
            let refs: Vec<&str> = source::references(c.text())
                .into_iter()
                .filter(|r| *r != c.name)
                .collect();
            let mut unknown: Vec<String> = Vec::new();
            for r in &refs {
                if !held_name(r) && !defined(r) && !unknown.iter().any(|u| u == r) {
                    unknown.push(r.to_string());
                }
            }
            if !unknown.is_empty() {
                return unknown;
            }
            let mut on: Vec<String> = Vec::new();
            for r in &refs {
                if held_name(r) && !on.iter().any(|o| o == r) {
                    on.push(r.to_string());
                }
            }
            on
        };
        let held: Vec<Pending> = new
            .iter()
            .map(|c| Pending {
                chunk: c.clone(),
                waits: waits_of(c),
            })
            .collect();
        // Pending definitions that waited for one of the new names (as a
        // function nothing defined): what they wait for now.
        let mut waiting: Vec<usize> = names
            .iter()
            .filter_map(|n| ix.waiters.get(*n))
            .flatten()
            .copied()
            .collect();
        waiting.sort_unstable();
        waiting.dedup();
        let updates: Vec<(usize, Vec<String>)> = waiting
            .into_iter()
            .filter(|&i| {
                held_list[i]
                    .waits
                    .iter()
                    .any(|w| names.contains(w.as_str()))
            })
            .map(|i| (i, waits_of(&held_list[i].chunk)))
            .collect();
        let news: Vec<String> = held.iter().map(|p| p.note(engine)).collect();
        for (i, waits) in updates {
            self.pending_ix.wait(i, &waits);
            self.pending[i].waits = waits;
        }
        self.pending_ix.add(&held, self.pending.len());
        self.pending.extend(held);
        Some(Reply::Out(news.join("\n")))
    }

    /// Add `run` (see [`Session::plain_definitions`]) in one rebuild; the
    /// reply of each input, or `None` (nothing changed) if they do not
    /// build together.
    fn define_together(&mut self, run: &[Vec<Chunk>]) -> Option<Vec<Reply>> {
        self.interrupt.store(false, Ordering::Relaxed);
        let new: Vec<Chunk> = run.iter().flatten().cloned().collect();
        let first = new.first()?.source.clone();
        let set = merged(&self.chunks, new.iter());
        let (chunks, engine) = self.assemble(&set, &first).ok()?;
        // The pending definitions stay as they are (see
        // `plain_definitions`).
        let held = std::mem::take(&mut self.pending);
        let d = self.commit(chunks, engine, held, &new, &[]);
        let mut news = d.news.into_iter();
        Some(
            run.iter()
                .map(|chunks| {
                    let lines: Vec<String> = news.by_ref().take(chunks.len()).collect();
                    Reply::Out(lines.join("\n"))
                })
                .collect(),
        )
    }

    /// Build a fresh engine from the current functions (after a panic left
    /// the old one in doubt).
    pub fn rebuild(&mut self) {
        let chunks = self.chunks.clone();
        let opts = self.opts;
        let combined = Combined::new(&chunks);
        let engine = assembler::assemble(&combined.text, "<session>")
            .ok()
            .and_then(|mut m| {
                combined.relocate(&mut m, &chunks);
                advm::engine(m, opts).ok()
            });
        match engine {
            Some(e) => self.set_engine(e),
            None => {
                self.engine = None;
                self.known.borrow_mut().funcs.clear();
            }
        }
    }

    #[cfg(test)]
    pub fn set_out_dir(&mut self, dir: &Path) {
        self.out_dir = dir.to_path_buf();
    }

    // ---- definitions --------------------------------------------------------

    /// Define the functions of typed text.
    /// `adl`: the `.adl` input `text` was generated from.
    fn define_text(&mut self, text: &str, adl: Option<Adl>) -> Result<Defined, String> {
        let source = Rc::new(Source {
            origin: "<input>".into(),
            file: None,
            text: text.to_string(),
            adl,
        });
        self.define(source)
    }

    /// Add the functions of `source`, replacing those of the same names (and,
    /// for a file, every function loaded from that file before); rebuild.
    ///
    /// Typed definitions whose only errors are calls to functions not
    /// defined yet are held back as pending (with those that call them),
    /// and every later definition or load is assembled together with them,
    /// so that functions pasted in any order all end up defined. A file
    /// must assemble on its own (with the session), as before.
    fn define(&mut self, source: Rc<Source>) -> Result<Defined, String> {
        let new = source::split(&source);
        self.define_split(source, new)
    }

    /// [`Session::define`] of `source` split into `new`.
    fn define_split(&mut self, source: Rc<Source>, new: Vec<Chunk>) -> Result<Defined, String> {
        if new.is_empty() {
            // A text without the `fn` keyword (only a file can be one) has
            // no chunks, so nothing of it would reach the assembler:
            // assemble it on its own, so that a typo (`fnn @f ...`) or stray
            // text is an error, not a file of no functions replacing the
            // file's functions. (Comments and blank lines alone assemble:
            // an empty file still loads.)
            assembler::assemble(&source.text, &source.origin)
                .map_err(|d| d.render_with(crate::out::color()))?;
        }
        let new_names: HashSet<&str> = new.iter().map(|c| c.name.as_str()).collect();
        let mut base: Vec<Chunk> = self.chunks.clone();
        if let Some(file) = &source.file {
            base.retain(|c| c.source.file.as_ref() != Some(file));
        }
        // A new definition replaces a pending one of the same name; a file
        // says so.
        let mut dropped: Vec<String> = Vec::new();
        let mut pending: Vec<Chunk> = Vec::with_capacity(self.pending.len());
        for p in &self.pending {
            if !new_names.contains(p.chunk.name.as_str()) {
                pending.push(p.chunk.clone());
            } else if source.file.is_some() {
                dropped.push(format!(
                    "dropped pending @{} (replaced by {})",
                    p.chunk.name, source.origin
                ));
            }
        }
        // A pending definition never blocks anything: those with errors
        // (other than the calls they wait for) are dropped, with the pending
        // ones that call them, and the definition is tried again without
        // them. Each round drops at least one, so this ends.
        loop {
            match self.attempt(&source, &new, &base, &pending) {
                Ok(mut d) => {
                    dropped.append(&mut d.dropped);
                    d.dropped = dropped;
                    return Ok(d);
                }
                Err(Attempt::Failed(e)) => return Err(e),
                Err(Attempt::BadRules(bad)) => {
                    for (k, what, why) in bad {
                        base.retain(|c| key(c) != k);
                        dropped.push(format!("dropped {what}: {why}"));
                    }
                }
                Err(Attempt::BadPending(bad)) => {
                    let mut gone: HashMap<String, String> = HashMap::new();
                    for (i, first) in bad {
                        let first = first.lines().next().unwrap_or("").to_string();
                        gone.insert(pending[i].name.clone(), first);
                    }
                    // And, transitively, the pending ones that call them.
                    loop {
                        let more: Vec<(String, String)> = pending
                            .iter()
                            .filter(|c| !gone.contains_key(&c.name))
                            .filter_map(|c| {
                                source::references(c.text())
                                    .into_iter()
                                    .find(|r| *r != c.name && gone.contains_key(*r))
                                    .map(|r| (c.name.clone(), format!("it calls @{r}, dropped")))
                            })
                            .collect();
                        if more.is_empty() {
                            break;
                        }
                        gone.extend(more);
                    }
                    for c in &pending {
                        if let Some(why) = gone.get(&c.name) {
                            dropped.push(format!("dropped pending @{}: {why}", c.name));
                        }
                    }
                    pending.retain(|c| !gone.contains_key(&c.name));
                }
            }
        }
    }

    /// One try at adding `new` (from `source`) to `base` with the pending
    /// definitions `pending` (see `define`).
    fn attempt(
        &mut self,
        source: &Rc<Source>,
        new: &[Chunk],
        base: &[Chunk],
        pending: &[Chunk],
    ) -> Result<Defined, Attempt> {
        let is_file = source.file.is_some();
        // What must assemble now, and what may wait (pending first: it came
        // first).
        let (fixed, candidates): (Vec<Chunk>, Vec<Chunk>) = if is_file {
            (new.to_vec(), pending.to_vec())
        } else {
            (Vec::new(), [pending, new].concat())
        };
        let pending_at: HashMap<(*const Source, usize), usize> = pending
            .iter()
            .enumerate()
            .map(|(i, c)| (key(c), i))
            .collect();
        // The first error inside each pending definition that is not a call
        // it waits for.
        let bad_pending = |combined: &Combined, order: &[Chunk], diags: &Diagnostics| {
            let mut bad: Vec<(usize, String)> = Vec::new();
            for d in &diags.items {
                if d.unknown_function().is_some() {
                    continue;
                }
                let Some(c) = order.get(combined.chunk_at(d.span.start)) else {
                    continue;
                };
                if let Some(&i) = pending_at.get(&key(c))
                    && !bad.iter().any(|(j, _)| *j == i)
                {
                    bad.push((i, d.message.clone()));
                }
            }
            bad
        };
        let everything = merged(base, fixed.iter().chain(&candidates));
        let blocked = match self.assemble(&everything, source) {
            Ok((chunks, engine)) => {
                return Ok(self.commit(chunks, engine, Vec::new(), new, &candidates))
            }
            Err(Failure::Engine(e)) => return Err(Attempt::Failed(e)),
            Err(Failure::Assembly(r)) => {
                let Rejected {
                    combined,
                    order,
                    mut diags,
                } = *r;
                // A rule defined before that no longer fits: dropped.
                let mut bad_rules: Vec<((*const Source, usize), String, String)> = Vec::new();
                for d in &diags.items {
                    let Some(c) = order.get(combined.chunk_at(d.span.start)) else {
                        continue;
                    };
                    let old = !Rc::ptr_eq(&c.source, source) && !pending_at.contains_key(&key(c));
                    if old
                        && source::rule_of_chunk(&c.name).is_some()
                        && !bad_rules.iter().any(|(k, _, _)| *k == key(c))
                    {
                        bad_rules.push((key(c), label(c), d.message.clone()));
                    }
                }
                if !bad_rules.is_empty() {
                    return Err(Attempt::BadRules(bad_rules));
                }
                let Some(blocked) = blocked(&combined, &order, &diags, &candidates) else {
                    let bad = bad_pending(&combined, &order, &diags);
                    if !bad.is_empty() {
                        return Err(Attempt::BadPending(bad));
                    }
                    // Real errors: report them, but not the calls the
                    // pending definitions are still waiting for.
                    let is_waiting = |d: &assembler::Diagnostic| {
                        d.unknown_function().is_some()
                            && order
                                .get(combined.chunk_at(d.span.start))
                                .is_some_and(|c| pending_at.contains_key(&key(c)))
                    };
                    if !diags.items.iter().all(is_waiting) {
                        diags.items.retain(|d| !is_waiting(d));
                    }
                    let text = combined.render(&diags, &order, source);
                    return Err(Attempt::Failed(self.with_both_note(text, &diags, pending)));
                };
                blocked
            }
        };
        let ready: Vec<Chunk> = candidates
            .iter()
            .filter(|c| !blocked.contains_key(c.name.as_str()))
            .cloned()
            .collect();
        let held: Vec<Pending> = candidates
            .iter()
            .filter_map(|c| {
                blocked.get(c.name.as_str()).map(|waits| Pending {
                    chunk: c.clone(),
                    waits: waits.clone(),
                })
            })
            .collect();
        let set = merged(base, fixed.iter().chain(&ready));
        match self.assemble(&set, source) {
            Ok((chunks, engine)) => Ok(self.commit(chunks, engine, held, new, &ready)),
            Err(Failure::Engine(e)) => Err(Attempt::Failed(e)),
            Err(Failure::Assembly(r)) => {
                let bad = bad_pending(&r.combined, &r.order, &r.diags);
                if bad.is_empty() {
                    let text = r.combined.render(&r.diags, &r.order, source);
                    Err(Attempt::Failed(
                        self.with_both_note(text, &r.diags, pending),
                    ))
                } else {
                    Err(Attempt::BadPending(bad))
                }
            }
        }
    }

    /// `text` (rendered `diags`) with a note if an error names a function
    /// that is both defined and pending: definitions are checked against
    /// the pending version.
    fn with_both_note(&self, mut text: String, diags: &Diagnostics, pending: &[Chunk]) -> String {
        let both: Vec<String> = pending
            .iter()
            .filter(|c| {
                self.engine
                    .as_ref()
                    .is_some_and(|e| e.find(&c.name).is_some())
            })
            .map(|c| format!("@{}", c.name))
            .filter(|n| {
                diags
                    .items
                    .iter()
                    .any(|d| d.message.contains(&format!("`{n}`")))
            })
            .collect();
        if !both.is_empty() {
            text.push_str(&format!(
                "\n   note: {} (new definitions are checked against the pending one)",
                both_note(&both)
            ));
        }
        text
    }

    /// Assemble `set` (the text of `source` first, so that line numbers in
    /// the assembler's messages, "already defined at line 3", are those of
    /// its file; last if it leaves a definition open) and build an engine.
    fn assemble(
        &mut self,
        set: &[Chunk],
        source: &Rc<Source>,
    ) -> Result<(Vec<Chunk>, Engine), Failure> {
        self.builds += 1;
        let (mut order, mut rest): (Vec<Chunk>, Vec<Chunk>) = set
            .iter()
            .cloned()
            .partition(|c| Rc::ptr_eq(&c.source, source));
        if unclosed(&source.text) {
            // A definition left open goes last: first, the parser would
            // meet the next function's `fn` before the missing `}` and
            // report it there, in another function; last, at its own end.
            rest.append(&mut order);
            order = rest;
        } else {
            order.extend(rest);
        }
        // Ctrl-C during the work before (a large `:load`): stop here.
        if self.interrupt.swap(false, Ordering::Relaxed) {
            return Err(Failure::Engine(
                "interrupted: nothing was defined or loaded".into(),
            ));
        }
        let combined = Combined::new(&order);
        let assembled = if combined.text.len() < BACKGROUND_BYTES {
            assembler::assemble(&combined.text, &source.origin)
        } else {
            let (text, origin) = (combined.text.clone(), source.origin.clone());
            self.interruptible(move || assembler::assemble(&text, &origin))?
        };
        match assembled {
            Ok(mut module) => {
                combined.relocate(&mut module, &order);
                let opts = self.opts;
                let engine = if combined.text.len() < BACKGROUND_BYTES {
                    advm::engine(module, opts)
                } else {
                    self.interruptible(move || advm::engine(module, opts))?
                }
                .map_err(|e| Failure::Engine(e.to_string()))?;
                Ok((set.to_vec(), engine))
            }
            Err(diags) => Err(Failure::Assembly(Box::new(Rejected {
                combined,
                order,
                diags,
            }))),
        }
    }

    /// Run `work` on a thread of its own and wait for it, unless Ctrl-C
    /// (the interrupt flag) comes first: then the work is left to finish
    /// on its own, its result dropped, and the session stays as it was.
    /// For the assembling and building of large texts (a `:load` of a
    /// large file), which no VM interrupt check reaches.
    fn interruptible<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Failure> {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("advm-build".into())
            .spawn(move || {
                let _ = tx.send(work());
            });
        if let Err(e) = spawned {
            return Err(Failure::Engine(format!("cannot start a thread: {e}")));
        }
        loop {
            match rx.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(v) => return Ok(v),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if self.interrupt.swap(false, Ordering::Relaxed) {
                        return Err(Failure::Engine(
                            "interrupted: nothing was defined or loaded".into(),
                        ));
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Failure::Engine(
                        "internal error (please report): the build thread ended without a result"
                            .into(),
                    ))
                }
            }
        }
    }

    /// Make `chunks` the session's functions and `held` its pending ones;
    /// say what happened to the `new` ones and to the pending ones that are
    /// defined now (`ready`).
    fn commit(
        &mut self,
        chunks: Vec<Chunk>,
        engine: Engine,
        held: Vec<Pending>,
        new: &[Chunk],
        ready: &[Chunk],
    ) -> Defined {
        let was_pending: HashSet<(*const Source, usize)> =
            self.pending.iter().map(|p| key(&p.chunk)).collect();
        let held_names: HashMap<&str, &Pending> =
            held.iter().map(|p| (p.chunk.name.as_str(), p)).collect();
        let news = new
            .iter()
            .map(|c| match held_names.get(c.name.as_str()) {
                Some(p) => p.note(Some(&engine)),
                None => format!("defined {}", label(c)),
            })
            .collect();
        let completed = ready
            .iter()
            .filter(|c| was_pending.contains(&key(c)))
            .map(|c| format!("defined {} (it was pending)", label(c)))
            .collect();
        self.names = chunks.iter().map(|c| c.name.clone()).collect();
        self.chunks = chunks;
        self.pending_ix = PendingIndex::of(&held);
        self.pending = held;
        self.set_engine(engine);
        Defined {
            count: new
                .iter()
                .filter(|c| source::rule_of_chunk(&c.name).is_none())
                .count(),
            news,
            completed,
            dropped: Vec::new(),
        }
    }

    fn set_engine(&mut self, mut engine: Engine) {
        engine.vm_mut().set_interrupt_handle(self.interrupt.clone());
        *engine.vm_mut().limits_mut() = self.limits.clone();
        engine.set_max_compile_work(self.opts.max_compile_work);
        engine.set_if_conversion(self.opts.if_convert);
        // In the session's order (definition order, a replaced function
        // keeping its place), not the module's.
        let module = engine.module();
        let ids: HashMap<&str, usize> = module
            .funcs
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name.as_str(), i))
            .collect();
        let mut listed = vec![false; module.funcs.len()];
        let mut funcs: Vec<(String, String)> = Vec::with_capacity(module.funcs.len());
        for c in &self.chunks {
            if let Some(&i) = ids.get(c.name.as_str())
                && !std::mem::replace(&mut listed[i], true)
            {
                let f = &module.funcs[i];
                funcs.push((f.name.clone(), signature(f)));
            }
        }
        for (f, _) in module.funcs.iter().zip(&listed).filter(|(_, l)| !**l) {
            funcs.push((f.name.clone(), signature(f)));
        }
        self.known.borrow_mut().funcs = funcs;
        self.engine = Some(engine);
    }

    /// `:budget BYTES` sets the AD budget of every derivative from now on
    /// (`--ad-budget`), `:budget off` lifts it, `:budget` shows it.
    fn budget(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let arg = line[rest_at..].trim();
        let at = line.len() - arg.len()..line.len();
        let budget = match arg {
            "" => {
                return Ok(match self.limits.ad_budget {
                    Some(b) => format!("AD budget: {b} bytes"),
                    None => "AD budget: off".to_string(),
                })
            }
            "off" => None,
            _ => match arg.replace('_', "").parse::<usize>() {
                Ok(b) => Some(b),
                Err(_) => {
                    return Err(Problem::at(
                        format!("expected a number of bytes or `off`, got `{arg}`"),
                        at,
                    ))
                }
            },
        };
        let mut limits = self.limits.clone();
        limits.ad_budget = budget;
        self.set_limits(limits);
        Ok(match budget {
            Some(b) => format!("AD budget: {b} bytes"),
            None => "AD budget: off".to_string(),
        })
    }

    fn load_cmd(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let arg = line[rest_at..].trim();
        if arg.is_empty() {
            return Err(Problem::at(
                "which file? e.g. `:load prog.adasm`",
                line.len()..line.len(),
            ));
        }
        let unquoted = arg
            .strip_prefix('"')
            .and_then(|a| a.strip_suffix('"'))
            .or_else(|| arg.strip_prefix('\'').and_then(|a| a.strip_suffix('\'')))
            .unwrap_or(arg);
        let path = match unquoted.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME")
                .map_or_else(|| PathBuf::from(unquoted), |h| PathBuf::from(h).join(rest)),
            None => PathBuf::from(unquoted),
        };
        let at = line.len() - arg.len()..line.len();
        self.load(&path).map_err(|e| {
            if e.contains(": error: ") {
                Problem::plain(e)
            } else {
                Problem::at(e, at)
            }
        })
    }

    /// `:load` and `:reload`; the startup file too.
    pub fn load(&mut self, path: &Path) -> Result<String, String> {
        let bytes = advm::read_file(path, self.opts.max_source_bytes)?;
        let origin = path.display().to_string();
        if bytes.len() >= BACKGROUND_BYTES && !adl::is_adl(path) {
            // A large file: decoded and split on a thread of its own, so
            // that Ctrl-C interrupts this part of the load too.
            let o = origin.clone();
            let (text, raw) = self
                .interruptible(move || {
                    let text = assembler::decode(&bytes, &o)?;
                    let raw = source::split_raw(&text);
                    Ok((text, raw))
                })
                .map_err(|f| match f {
                    Failure::Engine(e) => e,
                    Failure::Assembly(_) => "internal error (please report): a load".into(),
                })?
                .map_err(|d: assembler::Diagnostics| d.render_with(crate::out::color()))?;
            let source = Rc::new(Source {
                origin,
                file: Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())),
                text,
                adl: None,
            });
            let new = source::chunks_of(&source, raw);
            let defined = self.define_split(source, new)?;
            return Ok(self.loaded(path, defined));
        }
        let text =
            assembler::decode(&bytes, &origin).map_err(|d| d.render_with(crate::out::color()))?;
        let (text, adl) = if adl::is_adl(path) {
            let (generated, adl) = self.adl_to_adasm(&text, &origin)?;
            (generated, Some(adl))
        } else {
            (text, None)
        };
        let source = Rc::new(Source {
            origin,
            file: Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())),
            text,
            adl,
        });
        let defined = self.define(source)?;
        Ok(self.loaded(path, defined))
    }

    /// The reply of a `:load` of `path` that defined `defined`.
    fn loaded(&mut self, path: &Path, defined: Defined) -> String {
        self.last_file = Some(path.to_path_buf());
        let mut lines = defined.dropped;
        lines.push(format!(
            "loaded {} function{} from {}",
            defined.count,
            if defined.count == 1 { "" } else { "s" },
            path.display()
        ));
        // Pending definitions this file completed.
        lines.extend(defined.completed);
        lines.join("\n")
    }

    // ---- .adl --------------------------------------------------------------------

    /// The `.adasm` text of `.adl` definitions, compiled against the
    /// session's functions (which they may call); the session keeps and
    /// re-assembles that text like typed `.adasm`, with the `.adl` input
    /// and the `.adl` line of each generated line, so that traps and their
    /// callers name `.adl` lines.
    fn adl_to_adasm(&self, text: &str, origin: &str) -> Result<(String, Adl), String> {
        let empty = vm::ir::Module::default();
        let env = self.engine.as_ref().map_or(&empty, |e| e.module());
        let (module, own) =
            adl::compile_with(text, origin, env).map_err(|d| d.render_with(crate::out::color()))?;
        let (generated, lines) = adl::print_own_lines(&module, own);
        Ok((
            generated,
            Adl {
                text: text.to_string(),
                lines,
            },
        ))
    }

    /// A command whose call is written the `.adl` way (`grad pow(x, 10)`:
    /// no `@`, or arguments that are expressions or REPL variables) as the
    /// `@f(literals)` form the commands read; `None` if there is nothing
    /// to rewrite.
    fn adl_call_line(&mut self, line: &str) -> Result<Option<String>, Problem> {
        let (cmd, rest_at) = match line.find(char::is_whitespace) {
            Some(i) => (&line[..i], i),
            None => (line, line.len()),
        };
        let call_at = match cmd {
            "grad" | ":grad" | "jvp" | "hvp" | "hessian" => rest_at,
            ":time" => {
                let rest = &line[rest_at..];
                let t = rest.trim_start();
                let at = rest_at + rest.len() - t.len();
                match t.strip_prefix("grad") {
                    Some(r) if r.starts_with(char::is_whitespace) => at + 4,
                    _ => rest_at,
                }
            }
            _ => return Ok(None),
        };
        let rest = &line[call_at..];
        let start = call_at + rest.len() - rest.trim_start().len();
        let text = &line[start..];
        let name_len = text
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.' || *b == b'@')
            .count();
        let name = &text[..name_len];
        if name.is_empty() || !text[name_len..].starts_with('(') {
            return Ok(None);
        }
        let Some(close) = matching_paren(text, name_len) else {
            return Ok(None);
        };
        let args_text = &text[name_len + 1..close];
        let mut args = Vec::new();
        let mut changed = !name.starts_with('@');
        for (a, at) in split_args(args_text) {
            let a_trim = a.trim();
            if a_trim.is_empty() {
                args.push(a_trim.to_string());
                continue;
            }
            if assembler::parse_call(&format!("@x({a_trim})")).is_ok_and(|(_, l)| l.len() == 1) {
                args.push(a_trim.to_string());
                continue;
            }
            let offset = start + name_len + 1 + at;
            let v = self
                .eval_value(a_trim)
                .map_err(|e| Problem::at(e, offset..offset + a.len()))?;
            args.push(literal_text(&v));
            changed = true;
        }
        if !changed {
            return Ok(None);
        }
        let bare = name.strip_prefix('@').unwrap_or(name);
        Ok(Some(format!(
            "{}@{bare}({}){}",
            &line[..start],
            args.join(", "),
            &text[close + 1..]
        )))
    }

    /// Evaluate an `.adl` expression with the session's functions and
    /// variables: compiled as one more function whose parameters are the
    /// variables, on an engine of its own.
    fn eval_value(&mut self, src: &str) -> Result<Value, String> {
        let empty = vm::ir::Module::default();
        let env = self.engine.as_ref().map_or(&empty, |e| e.module());
        let vars: Vec<(String, vm::Type)> =
            self.vars.iter().map(|(n, v)| (n.clone(), v.ty())).collect();
        let name = unique_name("expr", env);
        let compiled = adl::compile_expr(src, "<input>", &name, &vars, env)
            .map_err(|d| d.render_with(crate::out::color()))?;
        let mut engine = advm::engine(compiled.module, self.opts).map_err(|e| e.to_string())?;
        engine.vm_mut().set_interrupt_handle(self.interrupt.clone());
        *engine.vm_mut().limits_mut() = self.limits.clone();
        let args: Vec<Value> = self.vars.iter().map(|(_, v)| v.clone()).collect();
        let v = engine.run(compiled.func, &args).map_err(|e| match e {
            // A trap in a session function shows its source line.
            ad::AdError::Trap(mut t) => {
                self.show_source_line(&mut t);
                t.to_string()
            }
            e => e.to_string(),
        })?;
        if compiled.ty.is_none() {
            return Err("the call has no result (none)".into());
        }
        Ok(v)
    }

    /// An `.adl` expression typed alone: its value.
    fn eval(&mut self, line: &str, at: usize) -> Result<String, Problem> {
        let src = &line[at..];
        // A call of a function without a result prints `none`.
        match self.eval_value(src) {
            Ok(v) => Ok(crate::args::value_text(&v, Some(16))),
            Err(e) if e == "the call has no result (none)" => Ok("none".into()),
            Err(e) => Err(Problem::plain(e)),
        }
    }

    /// `let x = <expression>`: a REPL variable for later expressions and
    /// arguments.
    fn let_var(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let rest = &line[rest_at..];
        let Some((name, expr)) = rest.split_once('=') else {
            return Err(Problem::at(
                "expected `let NAME = EXPRESSION`",
                0..line.len(),
            ));
        };
        let name = name.trim();
        let ok = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(Problem::at(
                format!("`{name}` is not a variable name"),
                rest_at..rest_at + rest.find('=').unwrap_or(0),
            ));
        }
        let v = self.eval_value(expr.trim()).map_err(Problem::plain)?;
        let text = crate::args::value_text(&v, Some(16));
        match self.vars.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = v,
            None => self.vars.push((name.to_string(), v)),
        }
        Ok(format!("{name} = {text}"))
    }

    /// `:ir f`: the `.adasm` text of a function (for an `.adl` definition,
    /// the code its compiler generated).
    fn ir(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let f = self.func_arg(line, rest_at, ":ir")?;
        let engine = self.engine_mut()?;
        let name = engine.module().func(f).name.clone();
        if let Some(c) = self.chunks.iter().rev().find(|c| c.name == name) {
            return Ok(c.source.text[c.range.clone()].trim_end().to_string());
        }
        let text = assembler::print_module(self.engine_mut()?.module());
        Ok(adl::split_functions(&text)
            .get(f.index())
            .cloned()
            .unwrap_or_default())
    }

    // ---- helpers --------------------------------------------------------------

    fn engine_mut(&mut self) -> Result<&mut Engine, Problem> {
        self.engine.as_mut().ok_or_else(|| {
            Problem::plain("no functions yet: define one with `fn ...` or use :load FILE")
        })
    }

    /// The call `line[start..]`, resolved: the function and its arguments.
    fn call(&mut self, line: &str, start: usize) -> Result<(FuncId, Vec<Value>), Problem> {
        let text = &line[start..];
        let base = start + (text.len() - text.trim_start().len());
        let text = text.trim();
        if text.is_empty() {
            return Err(Problem::at(
                "expected a call such as `@f(1.0, 2)`",
                line.len()..line.len(),
            ));
        }
        let shift = |r: std::ops::Range<usize>| base + r.start..base + r.end;
        let (name, lits) = assembler::parse_call(text).map_err(|e| {
            let (msg, r) = locate_call_error(text, &e);
            Problem::at(msg, shift(r))
        })?;
        let shape = call_shape(text);
        let f = self.find(&name, shift(shape.name.clone()))?;
        let engine = self.engine_mut()?;
        let params = engine.module().func(f).param_types();
        let args = assembler::literals_to_values(&params, &lits).map_err(|e| {
            let (msg, r) = locate_call_error(text, &e);
            let sig = signature(engine.module().func(f));
            Problem::at(format!("{msg} (@{name}{sig})"), shift(r))
        })?;
        Ok((f, args))
    }

    /// The function named by `line[rest_at..]` (`@f` or `f`).
    fn func_arg(&mut self, line: &str, rest_at: usize, cmd: &str) -> Result<FuncId, Problem> {
        let arg = line[rest_at..].trim();
        if arg.is_empty() {
            return Err(Problem::at(
                format!("which function? e.g. `{cmd} @f`"),
                line.len()..line.len(),
            ));
        }
        let start = line.len() - arg.len();
        let (name, extra) = match arg.find(char::is_whitespace) {
            Some(i) => (&arg[..i], Some(arg[i..].trim_start())),
            None => (arg, None),
        };
        if let Some(extra) = extra {
            return Err(Problem::at(
                format!("unexpected `{extra}` after the function name: `{cmd}` takes one function"),
                line.len() - extra.len()..line.len(),
            ));
        }
        self.find(name, start..start + name.len())
    }

    /// The function `name` (`@f` or `f`), or an error pointing at `at`; a
    /// pending definition (see `define`) says what it waits for.
    fn find(&mut self, name: &str, at: std::ops::Range<usize>) -> Result<FuncId, Problem> {
        let bare = name.strip_prefix('@').unwrap_or(name);
        if let Some(f) = self.engine.as_ref().and_then(|e| e.find(bare)) {
            return Ok(f);
        }
        if let Some(p) = self.pending.iter().find(|p| p.chunk.name == bare) {
            return Err(Problem::at(
                format!(
                    "@{bare} is not defined yet: it is pending until {}",
                    p.until(self.engine.as_ref())
                ),
                at,
            ));
        }
        self.engine_mut()?;
        let defined: Vec<&str> = self
            .engine
            .as_ref()
            .map(|e| e.module().funcs.iter().map(|f| f.name.as_str()).collect())
            .unwrap_or_default();
        let pending = self.pending.iter().map(|p| p.chunk.name.as_str());
        let near = assembler::closest(bare, defined.into_iter().chain(pending))
            .map(|n| format!("; did you mean @{n}?"))
            .unwrap_or_default();
        Err(Problem::at(
            format!("no function @{bare}{near} (:funcs lists them)"),
            at,
        ))
    }

    /// At the end of piped input: the definitions still pending, if any.
    pub fn pending_note(&self) -> Option<String> {
        let notes: Vec<String> = self
            .pending
            .iter()
            .map(|p| {
                format!(
                    "advm: @{} was never defined: it was pending until {}",
                    p.chunk.name,
                    p.until(self.engine.as_ref())
                )
            })
            .collect();
        (!notes.is_empty()).then(|| notes.join("\n"))
    }

    // ---- commands -------------------------------------------------------------

    fn funcs(&self) -> String {
        let known = self.known.borrow();
        if known.funcs.is_empty() && self.pending.is_empty() {
            return "no functions yet".into();
        }
        let mut origin: HashMap<&str, &str> = HashMap::with_capacity(self.chunks.len());
        for c in &self.chunks {
            origin
                .entry(c.name.as_str())
                .or_insert(c.source.origin.as_str());
        }
        let width = known
            .funcs
            .iter()
            .map(|(n, s)| n.len() + s.len() + 1)
            .max()
            .unwrap_or(0);
        known
            .funcs
            .iter()
            .map(|(n, sig)| {
                let from = origin.get(n.as_str()).copied().unwrap_or("");
                let head = format!("@{n}{sig}");
                if from.is_empty() || from == "<input>" {
                    head
                } else {
                    format!("{head:width$}  ; {from}")
                }
            })
            .chain(
                self.pending
                    .iter()
                    .map(|p| format!("; {}", p.note(self.engine.as_ref()))),
            )
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn disasm(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        if line[rest_at..].trim().is_empty() {
            let names: Vec<String> = self
                .known
                .borrow()
                .funcs
                .iter()
                .map(|(n, _)| n.clone())
                .collect();
            let engine = self.engine_mut()?;
            let program = engine.program();
            return Ok(names
                .iter()
                .filter_map(|n| engine.find(n))
                .map(|f| vm::disasm::function_in(program.func(f), Some(program)))
                .collect::<Vec<_>>()
                .join("\n"));
        }
        let f = self.func_arg(line, rest_at, ":disasm")?;
        let engine = self.engine_mut()?;
        Ok(vm::disasm::function_in(
            engine.program().func(f),
            Some(engine.program()),
        ))
    }

    fn run(&mut self, line: &str) -> Result<String, Problem> {
        let (f, args) = self.call(line, 0)?;
        let engine = self.engine_mut()?;
        let v = engine.run(f, &args).map_err(ad_problem)?;
        if engine.module().func(f).ret == vm::ir::RetType::Unit {
            return Ok("none".to_string());
        }
        Ok(crate::args::value_text(&v, Some(16)))
    }

    /// A call `@f(args)` starting at `start`, optionally followed by
    /// `wrt NAMES` (the parameters to differentiate with respect to).
    fn call_wrt(
        &mut self,
        line: &str,
        start: usize,
    ) -> Result<(FuncId, Vec<Value>, Option<Mask>), Problem> {
        let Some((call_end, names_at)) = split_wrt(line, start) else {
            let (f, args) = self.call(line, start)?;
            return Ok((f, args, None));
        };
        let (f, args) = self.call(&line[..call_end], start)?;
        let names = &line[names_at..];
        let engine = self.engine_mut()?;
        let func = engine.module().func(f);
        if names.split([',', ' ']).all(|n| n.trim().is_empty()) {
            return Err(Problem::at(
                format!(
                    "`wrt` names no parameter: write `grad @{}(...) wrt x, y` (it can be \
                     differentiated with respect to {})",
                    func.name,
                    crate::args::differentiable_params(func)
                ),
                line.len()..line.len(),
            ));
        }
        let mask =
            crate::args::wrt_mask(func, names).map_err(|m| Problem::at(m, names_at..line.len()))?;
        Ok((f, args, Some(mask)))
    }

    fn grad(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let (f, args, wrt) = self.call_wrt(line, rest_at)?;
        let engine = self.engine_mut()?;
        let g = match &wrt {
            Some(mask) => engine.grad_wrt(f, &args, mask),
            None => engine.grad(f, &args),
        }
        .map_err(ad_problem)?;
        let names = param_names(engine.module().func(f));
        let mut out = vec![format!("value = {}", g.value)];
        out.extend(gradient_lines(&names, &g.grad, Some(8)));
        Ok(out.join("\n"))
    }

    /// `hvp @f(args) dir [d1, ...] [wrt x, y]`.
    fn hvp(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let (f, args, dir, mask) = self.call_dir(line, rest_at, "hvp")?;
        let engine = self.engine_mut()?;
        let h = engine.hvp_wrt(f, &args, &dir, &mask).map_err(ad_problem)?;
        let names = param_names(engine.module().func(f));
        let mut out = vec![format!("value = {}", h.value)];
        for ((n, g), hv) in names.iter().zip(&h.grad).zip(&h.hvp) {
            match (g, hv) {
                (Some(g), Some(hv)) => out.push(format!(
                    "∂{n} = {}    (H·dir)_{n} = {}",
                    crate::args::value_text(g, Some(8)),
                    crate::args::value_text(hv, Some(8))
                )),
                _ => out.push(format!("∂{n} = -    (H·dir)_{n} = -")),
            }
        }
        Ok(out.join("\n"))
    }

    /// `hessian @f(args) [wrt x, y]`.
    fn hessian(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let (f, args, wrt) = self.call_wrt(line, rest_at)?;
        let engine = self.engine_mut()?;
        let h = match &wrt {
            Some(mask) => engine.hessian_wrt(f, &args, mask),
            None => engine.hessian(f, &args),
        }
        .map_err(ad_problem)?;
        let names = param_names(engine.module().func(f));
        let g = Gradient {
            value: h.value,
            grad: h.grad.clone(),
        };
        let mut out = vec![format!("value = {}", h.value)];
        out.extend(gradient_lines(&names, &g.grad, Some(8)));
        let n = h.hessian.len();
        out.push(format!("hessian ({n} × {n} over the flattened inputs) ="));
        for row in &h.hessian {
            out.push(crate::args::value_text(&Value::Arr(row.clone()), Some(8)));
        }
        Ok(out.join("\n"))
    }

    /// `jvp @f(args) dir [d1, ...] [wrt x, y]`.
    fn jvp(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let (f, args, dir, mask) = self.call_dir(line, rest_at, "jvp")?;
        let engine = self.engine_mut()?;
        let func = engine.module().func(f);
        let names = param_names(func);
        let unit = func.ret == vm::ir::RetType::Unit;
        let t = engine.jvp_wrt(f, &args, &dir, &mask).map_err(ad_problem)?;
        Ok(commands::tangent_lines(&names, &t, Some(8), unit).join("\n"))
    }

    /// The call, direction and selection of `cmd @f(args) dir [d1, ...]
    /// [wrt x, y]` (`jvp`, `hvp`).
    fn call_dir(
        &mut self,
        line: &str,
        rest_at: usize,
        cmd: &str,
    ) -> Result<(FuncId, Vec<Value>, Direction, Mask), Problem> {
        let Some((call_end, dir_at, dir_end)) = split_dir(line, rest_at) else {
            let end = line.len();
            return Err(Problem::at(
                format!(
                    "expected `{cmd} @f(args) dir [d1, d2, ...]`: the direction has one entry \
                     per parameter (null for i64 and bool ones)"
                ),
                end..end,
            ));
        };
        let (f, args) = self.call(&line[..call_end], rest_at)?;
        let rest = &line[dir_end..];
        let engine = self.engine_mut()?;
        let func = engine.module().func(f);
        let mask = match rest.trim_start().strip_prefix("wrt") {
            Some(names) if names.is_empty() || names.starts_with(char::is_whitespace) => {
                let names_at = line.len() - names.trim_start().len();
                crate::args::wrt_mask(func, names)
                    .map_err(|m| Problem::at(m, names_at..line.len()))?
            }
            _ if rest.trim().is_empty() => ad::analysis::all_params(func),
            _ => {
                let at = line.len() - rest.trim_start().len();
                return Err(Problem::at(
                    "expected `wrt x, y` or nothing after the direction",
                    at..line.len(),
                ));
            }
        };
        let names = param_names(func);
        let json = crate::args::literal_list_to_json(&line[dir_at..dir_end]);
        let dir = crate::args::parse_json_dir(&json, &args, &mask, &names, "the direction")
            .map_err(|m| Problem::at(m, dir_at..dir_end))?;
        Ok((f, args, dir, mask))
    }

    fn time(&mut self, line: &str, rest_at: usize) -> Result<String, Problem> {
        let rest = &line[rest_at..];
        let lead = rest.len() - rest.trim_start().len();
        let (is_grad, start) = match rest.trim_start().strip_prefix("grad") {
            Some(after) if after.starts_with(char::is_whitespace) || after.is_empty() => {
                (true, rest_at + lead + 4)
            }
            _ => (false, rest_at),
        };
        let (f, args, wrt) = if is_grad {
            self.call_wrt(line, start)?
        } else {
            let (f, args) = self.call(line, start)?;
            (f, args, None)
        };
        let engine = self.engine_mut()?;
        let fail = |e: Fail| Problem::plain(e.to_string());
        let (ns, allocs) = if is_grad {
            let mut out = Gradient::default();
            let mask = wrt.unwrap_or_else(|| ad::analysis::all_params(engine.module().func(f)));
            // The first call builds the derived code; keep it out of the timing.
            engine
                .grad_wrt_into(f, &args, &mask, &mut out)
                .map_err(ad_problem)?;
            commands::time_calls(|| {
                engine
                    .grad_wrt_into(f, &args, &mask, &mut out)
                    .map_err(Fail::from)
            })
            .map_err(fail)?
        } else {
            engine.run(f, &args).map_err(ad_problem)?;
            commands::time_calls(|| engine.run(f, &args).map(|_| ()).map_err(Fail::from))
                .map_err(fail)?
        };
        Ok(format!(
            "{} per call (median after warm-up), {allocs} heap allocations per call",
            duration_text(ns)
        ))
    }

    fn cfg(&mut self, f: FuncId) -> Result<String, Problem> {
        let out_dir = self.out_dir.clone();
        let engine = self.engine_mut()?;
        let func = engine.module().func(f).clone();
        let write = |name: String, text: String| -> Result<PathBuf, Problem> {
            let path = out_dir.join(name);
            std::fs::write(&path, text)
                .map_err(|e| Problem::plain(format!("cannot write {}: {e}", path.display())))?;
            Ok(std::fs::canonicalize(&path).unwrap_or(path))
        };
        let mut written = vec![write(
            format!("{}.dot", func.name),
            crate::cfg::primal_dot(engine.module(), &func),
        )?];
        let mut notes = Vec::new();
        match engine.derive(f) {
            Ok(d) => {
                let program = engine.program();
                let names = |c: FuncId| {
                    program
                        .get(c)
                        .map_or_else(|| "?".into(), |g| g.name.clone())
                };
                match (engine.derived_ir(d.fwd), engine.derived_ir(d.rev)) {
                    (Some(fwd), Some(rev)) => written.push(write(
                        format!("{}.ad.dot", func.name),
                        crate::cfg::ad_dot(&names, fwd, rev),
                    )?),
                    _ => notes.push("no AD picture: the derived IR is missing".to_string()),
                }
            }
            Err(e) => notes.push(format!("no AD picture: {e}")),
        }
        let mut lines: Vec<String> = written
            .iter()
            .map(|p| format!("wrote {}", p.display()))
            .collect();
        let mut rendered = 0;
        for dot in &written {
            let svg = dot.with_extension("svg");
            let ok = std::process::Command::new("dot")
                .arg("-Tsvg")
                .arg(dot)
                .arg("-o")
                .arg(&svg)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                lines.push(format!("rendered {}", svg.display()));
                rendered += 1;
            }
        }
        if rendered == 0 {
            lines.push(format!(
                "(Graphviz `dot` is not on PATH; render with `dot -Tsvg {0}.dot -o {0}.svg`)",
                func.name
            ));
        }
        lines.extend(notes);
        Ok(lines.join("\n"))
    }
}

/// An error if a command that takes no argument has text after it.
/// The index of the `)` that closes the `(` at `open`.
fn matching_paren(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices().skip_while(|(i, _)| *i < open) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (c == ')').then_some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Call arguments split at the commas outside brackets, with offsets.
fn split_args(text: &str) -> Vec<(&str, usize)> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut from = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push((&text[from..i], from));
                from = i + 1;
            }
            _ => {}
        }
    }
    if !text.trim().is_empty() {
        out.push((&text[from..], from));
    }
    out
}

/// A value as a literal the call syntax reads back to the same bits.
fn literal_text(v: &Value) -> String {
    let f = |x: f64| {
        if x.is_nan() {
            "nan".to_string()
        } else if x.is_infinite() {
            if x > 0.0 { "inf" } else { "-inf" }.to_string()
        } else {
            format!("{x:?}")
        }
    };
    match v {
        Value::F64(x) => f(*x),
        Value::I64(i) => i.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Arr(xs) => format!(
            "[{}]",
            xs.iter().map(|x| f(*x)).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `base`, or `base.1`, ... : a function name `module` does not use.
fn unique_name(base: &str, module: &vm::ir::Module) -> String {
    let mut name = base.to_string();
    let mut k = 0;
    while module.find(&name).is_some() {
        k += 1;
        name = format!("{base}.{k}");
    }
    name
}

fn no_argument(line: &str, rest_at: usize, cmd: &str) -> Result<(), Problem> {
    let extra = line[rest_at..].trim();
    if extra.is_empty() {
        return Ok(());
    }
    Err(Problem::at(
        format!("unexpected `{extra}`: {cmd} takes no argument"),
        line.len() - extra.len()..line.len(),
    ))
}

fn ad_problem(e: ad::AdError) -> Problem {
    match e {
        ad::AdError::Trap(t) => Problem {
            trap: Some(Box::new(t)),
            ..Problem::plain("")
        },
        e => Problem::plain(e.to_string()),
    }
}

/// `(%x: f64, %n: i64) -> f64`
pub fn signature(f: &vm::ir::Function) -> String {
    let params: Vec<String> = f
        .params
        .iter()
        .zip(param_names(f))
        .map(|(p, name)| format!("%{name}: {}", f.ty(*p)))
        .collect();
    let ret = match &f.ret {
        vm::ir::RetType::One(t) => t.to_string(),
        vm::ir::RetType::Unit => "none".to_string(),
        vm::ir::RetType::Many(ts) => ts
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    };
    format!("({}) -> {ret}", params.join(", "))
}

/// Which parameters to differentiate with respect to (one flag each).
type Mask = Vec<bool>;

/// A direction: one entry per parameter (`None`: zero).
type Direction = Vec<Option<Value>>;

/// Where a call `@f(args)` starting at `start` ends and where the names of
/// a following `wrt NAMES` start, if there is such a clause: the call ends
/// at its last `)`, which must be followed by the word `wrt`.
fn split_wrt(line: &str, start: usize) -> Option<(usize, usize)> {
    let close = start + line.get(start..)?.rfind(')')?;
    let rest = &line[close + 1..];
    let lead = rest.len() - rest.trim_start().len();
    let after = rest.trim_start().strip_prefix("wrt")?;
    if !(after.is_empty() || after.starts_with(char::is_whitespace)) {
        return None;
    }
    let names = after.trim_start();
    Some((
        close + 1,
        close + 1 + lead + 3 + (after.len() - names.len()),
    ))
}

/// Where the call of `jvp @f(args) dir [...]` starting at `start` ends,
/// and where its direction list starts and ends (the `[` and just past the
/// matching `]`).
fn split_dir(line: &str, start: usize) -> Option<(usize, usize, usize)> {
    let rest = line.get(start..)?;
    let open = start + rest.find('(')?;
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in line[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let call_end = close? + 1;
    let after = &line[call_end..];
    let word = after.trim_start().strip_prefix("dir")?;
    let list = word.trim_start();
    if !list.starts_with('[') {
        return None;
    }
    let dir_at = line.len() - list.len();
    let mut depth = 0usize;
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some((call_end, dir_at, dir_at + i + 1));
                }
            }
            _ => {}
        }
    }
    None
}

fn duration_text(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e4 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::new(Arc::new(AtomicBool::new(false)), Rc::default())
    }

    fn out(r: Reply) -> String {
        match r {
            Reply::Out(s) => s,
            other => panic!("expected output, got {other:?}"),
        }
    }

    fn err(r: Reply) -> String {
        match r {
            Reply::Err(s) => s,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn a_misspelt_call_waits_with_a_suggestion() {
        let mut s = session();
        out(s.execute(&SQ.replace("@sq", "@square")));
        let call = |callee: &str| {
            format!("fn @f(%x: f64) -> f64 {{\nentry:\n    %y = call @{callee}(%x)\n    ret %y\n}}")
        };
        assert_eq!(
            out(s.execute(&call("sqaure"))),
            "@f is pending until @sqaure is defined; did you mean @square?"
        );
        assert_eq!(
            out(s.execute(":funcs")).lines().last(),
            Some("; @f is pending until @sqaure is defined; did you mean @square?")
        );
        // A short name gets none: it is more likely a later definition.
        assert_eq!(
            out(s.execute(&call("sq"))),
            "@f is pending until @sq is defined"
        );
        // Nothing close: the plain note.
        assert_eq!(
            out(s.execute(&call("later"))),
            "@f is pending until @later is defined"
        );
        // Two waits: each hint names its call.
        let two = "fn @g(%x: f64) -> f64 {\nentry:\n    %y = call @squar(%x)\n    \
                   %z = call @later(%y)\n    ret %z\n}";
        assert_eq!(
            out(s.execute(two)),
            "@g is pending until @squar and @later are defined; did you mean @square for @squar?"
        );
    }

    const SQ: &str = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}";
    const USE: &str = "fn @use(%x: f64) -> f64 {\nentry:\n    %y = call @sq(%x)\n    ret %y\n}";

    #[test]
    fn define_run_grad_and_replace() {
        let mut s = session();
        assert_eq!(out(s.execute(SQ)), "defined @sq");
        assert_eq!(out(s.execute(USE)), "defined @use");
        assert_eq!(out(s.execute("grad @use(3.0)")), "value = 9\n∂x = 6");
        assert_eq!(
            out(s.execute(&SQ.replace("%x, %x", "%x, 5.0"))),
            "defined @sq"
        );
        // The caller's derived code was rebuilt against the new @sq.
        assert_eq!(out(s.execute("grad @use(3.0)")), "value = 15\n∂x = 5");
        assert_eq!(
            out(s.execute(":funcs")),
            "@sq(%x: f64) -> f64\n@use(%x: f64) -> f64"
        );
    }

    #[test]
    fn a_bad_definition_changes_nothing() {
        let mut s = session();
        out(s.execute(SQ));
        out(s.execute(USE));
        // A new signature breaks the caller: the error points into @use.
        let e = err(s.execute(
            "fn @sq(%x: f64, %k: f64) -> f64 {\nentry:\n    %y = mul %x, %k\n    ret %y\n}",
        ));
        assert!(e.starts_with("<input>:3:15: error: `@sq` takes 2"), "{e}");
        assert!(e.contains("note: this is in @use"), "{e}");
        assert_eq!(out(s.execute("@use(2.0)")), "4");
        let e = err(s.execute("fn @sq(%x: f64) -> f64 {\nentry:\n    ret 2\n}"));
        assert!(
            e.starts_with("<input>:3:9: error:") && e.ends_with('^'),
            "{e}"
        );
        assert_eq!(out(s.execute("@sq(2.0)")), "4");
        let e = err(s.execute("fn {}"));
        assert!(e.contains("error"), "{e}");
    }

    #[test]
    fn trap_lines_are_those_the_user_wrote() {
        let mut s = session();
        out(s.execute(SQ));
        let g =
            "fn @g(%i: i64) -> f64 {\nentry:\n    %a = anew 2\n    %v = aget %a, %i\n    ret %v\n}";
        out(s.execute(g));
        let e = err(s.execute("@g(7)"));
        assert!(e.contains("@g") && e.ends_with("(line 4)"), "{e}");
        // Also after redefining a function that comes before it.
        out(s.execute("fn @sq(%x: f64) -> f64 {\n\n\nentry:\n    ret %x\n}"));
        let e = err(s.execute("@g(7)"));
        assert!(e.ends_with("(line 4)"), "{e}");
    }

    #[test]
    fn errors_point_into_the_line() {
        let mut s = session();
        let e = err(s.execute("@f(1.0)"));
        assert!(e.starts_with("no functions yet"), "{e}");
        out(s.execute(SQ));
        let e = err(s.execute("grad @nope(1.0)"));
        assert_eq!(
            e,
            "<input>:1:6: error: no function @nope (:funcs lists them)\n1 │ grad @nope(1.0)\n  │      ^^^^^"
        );
        let e = err(s.execute("@sq(1.0,, 2)"));
        assert!(e.starts_with("<input>:1:9: error: expected"), "{e}");
        let e = err(s.execute("@sq(true)"));
        assert!(
            e.contains("1:5: error: argument 1") && e.ends_with("    ^^^^"),
            "{e}"
        );
        let e = err(s.execute(":frobnicate"));
        assert!(e.starts_with("<input>:1:1: error: unknown command"), "{e}");
        assert!(!e.contains("did you mean"), "{e}");
        let e = err(s.execute(":laod f.adasm"));
        assert!(
            e.starts_with(
                "<input>:1:1: error: unknown command :laod; did you mean `:load`? (:help lists them)"
            ),
            "{e}"
        );
        let e = err(s.execute("gard @sq(1.0)"));
        assert!(e.contains("`:help`; did you mean `grad`?"), "{e}");
        let e = err(s.execute("load f.adasm"));
        assert!(e.contains("did you mean `:load`?"), "{e}");
        let e = err(s.execute("grad @qs(1.0)"));
        assert!(
            e.starts_with(
                "<input>:1:6: error: no function @qs; did you mean @sq? (:funcs lists them)"
            ),
            "{e}"
        );
        let e = err(s.execute(":ad @Sq"));
        assert!(e.contains("no function @Sq; did you mean @sq?"), "{e}");
        let e = err(s.execute(":disasm @nope"));
        assert!(e.contains("1:9: error: no function @nope"), "{e}");
        let e = err(s.execute(":ad"));
        assert!(e.contains("which function?"), "{e}");
        let e = err(s.execute("grad"));
        assert!(e.contains("expected a call"), "{e}");
    }

    #[test]
    fn never_panics_on_odd_input() {
        let mut s = session();
        out(s.execute(SQ));
        for line in [
            "",
            " ",
            ";",
            "@",
            "@(",
            "@sq(",
            "@sq)",
            "grad",
            "grad @",
            ":time",
            ":time grad",
            ":time grad @sq(",
            ":load",
            ":load \"\"",
            ":reload",
            ":disasm @",
            ":cfg",
            "é",
            "@sq(é)",
            "[",
            "fn",
            "fn @",
            "}",
            "{",
            ":",
            "::",
            "@sq(1e999)",
            "@sq(-)",
            "grad @sq(nan)",
            "@sq([1.0])",
            "@sq(1.0, [)",
            "\u{0}",
            "@sq(\u{7f})",
        ] {
            let _ = s.execute(line);
        }
        assert_eq!(out(s.execute("@sq(3.0)")), "9");
    }

    #[test]
    fn cfg_writes_dot_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut s = session();
        s.set_out_dir(dir.path());
        out(s.execute(SQ));
        let text = out(s.execute(":cfg @sq"));
        assert!(
            text.contains("sq.dot") && text.contains("sq.ad.dot"),
            "{text}"
        );
        assert!(dir.path().join("sq.dot").exists());
        assert!(dir.path().join("sq.ad.dot").exists());
    }
    #[test]
    fn budget_sets_the_ad_budget_of_derivatives() {
        let mut s = session();
        out(s.execute(
            "fn @pw(%x: f64, %n: i64) -> f64 {\nentry:\n    jmp head\nhead:\n    \
             %r = phi [entry: 1.0], [body: %r2]\n    %k = phi [entry: %n], [body: %k2]\n    \
             %c = gt %k, 0\n    br %c, body, done\nbody:\n    %r2 = mul %r, %x\n    \
             %k2 = sub %k, 1\n    jmp head\ndone:\n    ret %r\n}",
        ));
        assert_eq!(out(s.execute(":budget")), "AD budget: off");
        let all = out(s.execute("grad @pw(1.001, 100)"));
        assert_eq!(out(s.execute(":budget 100")), "AD budget: 100 bytes");
        assert_eq!(out(s.execute(":budget")), "AD budget: 100 bytes");
        // 808 bytes stored: checkpointed, the same gradient.
        assert_eq!(out(s.execute("grad @pw(1.001, 100)")), all);
        // Below the minimum (the arguments and one push).
        assert_eq!(out(s.execute(":budget 10")), "AD budget: 10 bytes");
        let e = err(s.execute("grad @pw(1.001, 100)"));
        assert!(
            e.contains("budget of 10 bytes") && e.contains("need at least"),
            "{e}"
        );
        // Running stores nothing.
        out(s.execute("@pw(1.001, 100)"));
        assert_eq!(out(s.execute(":budget 100000")), "AD budget: 100000 bytes");
        assert_eq!(out(s.execute("grad @pw(1.001, 100)")), all);
        assert_eq!(out(s.execute(":budget off")), "AD budget: off");
        let e = err(s.execute(":budget lots"));
        assert!(e.contains("expected a number of bytes or `off`"), "{e}");
    }
}
