//! The subcommands. Each returns the process exit status.

use crate::out;
use crate::{CallArgs, LimitArgs};
use ad::{AdError, Engine, Gradient};
use advm::args::{
    float_json, parse_json_args_from, parse_json_dir, parse_json_seed, value_json, value_text,
    wrt_mask,
};
use advm::fd;
use advm::Options;
use serde_json::json;
use std::fmt::Display;
use std::path::Path;
use std::time::Instant;
use vm::ir::FuncId;
use vm::{Type, Value};

/// Exit statuses (see the crate docs).
pub const EXIT_TRAP: u8 = 1;
pub const EXIT_ASSEMBLY: u8 = 2;
pub const EXIT_CHECK_FAILED: u8 = 3;
pub const EXIT_USAGE: u8 = 64;
pub const EXIT_INTERNAL: u8 = 70;
pub const EXIT_OUTPUT: u8 = 74;

/// Why a command failed, which decides the exit status.
pub enum Fail {
    Usage(String),
    Assembly(String),
    Trap(String),
    Internal(String),
    /// A trap not printed yet, and a note to print after it: [`Fail::in_file`]
    /// shows the trapping instruction as its line of the program file.
    Trapped(Box<vm::Trap>, String),
}

impl Fail {
    /// Print the message and give the exit status.
    pub fn report_code(self) -> u8 {
        self.report()
    }

    fn report(self) -> u8 {
        let (code, text) = match self {
            Fail::Usage(m) => (EXIT_USAGE, format!("advm: {m}")),
            Fail::Assembly(m) => (EXIT_ASSEMBLY, m),
            Fail::Trap(m) => (EXIT_TRAP, m),
            Fail::Trapped(t, note) => (EXIT_TRAP, format!("{t}{note}")),
            Fail::Internal(m) => (EXIT_INTERNAL, format!("advm: {m}")),
        };
        out::err(text.trim_end());
        code
    }
}

impl From<AdError> for Fail {
    fn from(e: AdError) -> Fail {
        match e {
            AdError::Trap(t) => Fail::Trapped(Box::new(t), String::new()),
            // Refusals of the request, decided before anything runs.
            AdError::NotDifferentiable(_)
            | AdError::Args(_)
            | AdError::TooLarge { .. }
            | AdError::TooMuchWork { .. } => Fail::Usage(e.to_string()),
            AdError::Internal(_) | AdError::InvalidModule(_) => Fail::Internal(e.to_string()),
        }
    }
}

impl Fail {
    /// Name the program file in a trap's message (assembly diagnostics and
    /// usage messages name it already).
    ///
    /// The instruction of a trap is shown as the user wrote it: the text
    /// of its source line, read again from `file` (the bytecode
    /// instruction stays if the file cannot be read again).
    pub fn in_file(self, file: &Path) -> Fail {
        match self {
            Fail::Trap(m) => Fail::Trap(format!("{}: {m}", file.display())),
            Fail::Trapped(mut t, note) => {
                if let Some(src) = reread(file) {
                    t.show_source_line(&src, 1);
                }
                Fail::Trap(format!("{}: {t}{note}", file.display()))
            }
            other => other,
        }
    }

    /// A trap's message with `note` on a line of its own after it.
    fn with_note(self, note: &str) -> Fail {
        match self {
            Fail::Trap(t) => Fail::Trap(format!("{t}\n{note}")),
            Fail::Trapped(t, mut n) => {
                n.push('\n');
                n.push_str(note);
                Fail::Trapped(t, n)
            }
            other => other,
        }
    }
}

/// The text of the program file `file` read again, to show a trap's source
/// line: only a regular file (a pipe's text is gone, and opening a named
/// pipe would wait for a writer) of at most [`REREAD_LIMIT`] bytes.
pub fn reread(file: &Path) -> Option<String> {
    if !std::fs::metadata(file).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let bytes = advm::read_file(file, REREAD_LIMIT).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The largest program file read again for a trap's message, in bytes.
pub const REREAD_LIMIT: u64 = 1 << 28;

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Usage(m) | Fail::Assembly(m) | Fail::Trap(m) | Fail::Internal(m) => {
                f.write_str(m)
            }
            Fail::Trapped(t, note) => write!(f, "{t}{note}"),
        }
    }
}

/// One line on standard output. A closed pipe drops it (see [`out`]); any
/// other write error ends the process with status 74, as nothing more can
/// be reported on standard output.
pub fn emit(text: impl Display) -> Result<(), Fail> {
    out::line(text).unwrap_or_else(|e| output_failed(e));
    Ok(())
}

/// Text on standard output, no newline added (see [`emit`]).
fn emit_raw(text: impl Display) -> Result<(), Fail> {
    out::print(text).unwrap_or_else(|e| output_failed(e));
    Ok(())
}

fn output_failed(e: std::io::Error) -> ! {
    out::stdout_failed(&e);
    std::process::exit(EXIT_OUTPUT.into())
}

fn finish(r: Result<(), Fail>) -> u8 {
    match r {
        Ok(()) => 0,
        Err(f) => f.report(),
    }
}

/// Read and assemble a file into an engine (bytes that are not UTF-8 are an
/// assembly error; one leading byte-order mark is skipped).
pub fn load(file: &Path, opts: &Options) -> Result<Engine, Fail> {
    advm::engine(load_module(file, opts)?, *opts).map_err(Fail::from)
}

/// Read a source file and build its IR: `.adl` files (by extension) are
/// compiled by the `adl` front end, anything else is assembled as `.adasm`.
pub fn load_module(file: &Path, opts: &Options) -> Result<vm::ir::Module, Fail> {
    let bytes = advm::read_file(file, opts.max_source_bytes).map_err(Fail::Usage)?;
    let name = file.display().to_string();
    let src = assembler::decode(&bytes, &name).map_err(Fail::from)?;
    if adl::is_adl(file) {
        adl::compile(&src, &name).map_err(Fail::from)
    } else {
        assembler::assemble(&src, &name).map_err(Fail::from)
    }
}

impl From<assembler::Diagnostics> for Fail {
    /// An assembly error (exit status 2); the assembler's out of memory
    /// is the trap `out of memory` (exit status 1), as a run's.
    fn from(d: assembler::Diagnostics) -> Fail {
        if d.is_out_of_memory() {
            return Fail::Trapped(
                Box::new(vm::Trap::host(vm::TrapKind::OutOfMemory)),
                String::new(),
            );
        }
        Fail::Assembly(d.render_with(out::color()))
    }
}

/// `advm disasm FILE --ir`: the file's IR as `.adasm` text (for an `.adl`
/// file, the code its compiler generated), one function or all.
pub fn disasm_ir(file: &Path, opts: &Options, func: Option<&str>) -> u8 {
    finish((|| {
        let module = load_module(file, opts)?;
        if let Some(name) = func {
            let Some(id) = module.find(name) else {
                let bare = name.strip_prefix('@').unwrap_or(name);
                let near = assembler::closest(bare, module.funcs.iter().map(|f| f.name.as_str()));
                let hint = near.map_or(String::new(), |n| format!("; did you mean `@{n}`?"));
                return Err(Fail::Usage(format!(
                    "{} defines no function `@{bare}`{hint}",
                    file.display()
                )));
            };
            let text = assembler::print_module(&module);
            let chunks = adl::split_functions(&text);
            return emit_raw(chunks.get(id.index()).cloned().unwrap_or_default());
        }
        emit_raw(assembler::print_module(&module))
    })())
}

/// `limits` with the flags `l` gives (the others as they were).
pub fn apply_limits(limits: &mut vm::Limits, l: &LimitArgs) {
    if let Some(f) = l.fuel {
        limits.fuel = Some(f);
    }
    if let Some(d) = l.max_depth {
        limits.max_call_depth = d;
    }
    if let Some(a) = l.max_array {
        limits.max_array_len = a;
    }
    if let Some(b) = l.max_stack_bytes {
        limits.max_stack_bytes = b;
    }
    if let Some(b) = l.ad_budget {
        limits.ad_budget = Some(b);
    }
    if let Some(b) = l.max_heap_bytes {
        limits.max_heap_bytes = b;
    }
    if let Some(b) = l.max_memory {
        limits.max_memory_bytes = b;
    }
}

/// The function `--fn` names. Without `--fn`: the file's only function if
/// it has one, else `@main` (the file's functions listed if it has none).
pub fn pick(engine: &Engine, name: Option<&str>, file: &Path) -> Result<FuncId, Fail> {
    if let Some(f) = name.is_none().then(|| only_function(engine)).flatten() {
        return Ok(f);
    }
    let written = name.unwrap_or("main");
    // One `@` is optional; what is left must be a name as the language
    // spells it (so `@@z` is refused as written, not looked up as `@z`).
    let bare = written.strip_prefix('@').unwrap_or(written);
    let is_name = !bare.is_empty()
        && bare
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    if !is_name {
        return Err(Fail::Usage(format!(
            "--fn `{written}` is not a function name: write NAME or @NAME (letters, digits, `_`, `.`)"
        )));
    }
    engine.find(bare).ok_or_else(|| {
        let near = assembler::closest(bare, engine.module().funcs.iter().map(|f| f.name.as_str()))
            .map(|n| format!("; did you mean @{n}?"))
            .unwrap_or_default();
        let hint = if name.is_none() {
            ": pass --fn NAME"
        } else {
            ""
        };
        Fail::Usage(format!(
            "{} has no function @{bare}{near} (it defines {}){hint}",
            file.display(),
            defined(engine)
        ))
    })
}

/// The function of a command that has no default: the one `--fn` names,
/// or the file's only function; `what` (`cfg`, `--jvp`, ...) needs `--fn`
/// when the file has several.
pub fn pick_required(
    engine: &Engine,
    name: Option<&str>,
    file: &Path,
    what: &str,
) -> Result<FuncId, Fail> {
    match (name, only_function(engine)) {
        (Some(_), _) => pick(engine, name, file),
        (None, Some(f)) => Ok(f),
        (None, None) => Err(Fail::Usage(format!(
            "{what} needs --fn NAME: {} defines {}",
            file.display(),
            defined(engine)
        ))),
    }
}

/// The function of a file that defines exactly one.
fn only_function(engine: &Engine) -> Option<FuncId> {
    match engine.module().funcs.as_slice() {
        [f] => engine.find(&f.name),
        _ => None,
    }
}

/// The file's functions, for messages: `@a, @b` or `no function`.
fn defined(engine: &Engine) -> String {
    let names: Vec<String> = engine
        .module()
        .funcs
        .iter()
        .map(|f| format!("@{}", f.name))
        .collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

fn param_types(engine: &Engine, f: FuncId) -> Vec<Type> {
    engine.module().func(f).param_types()
}

/// The names of `f`'s parameters (`arg0`, `arg1`, ... for unnamed ones),
/// as gradient and check lines show them.
pub(crate) fn param_names(f: &vm::ir::Function) -> Vec<String> {
    f.params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            f.values
                .get(p.index())
                .and_then(|v| v.name.clone())
                .unwrap_or_else(|| format!("arg{i}"))
        })
        .collect()
}

fn call_values(
    a: &CallArgs,
    opts: &Options,
    engine: &Engine,
    f: FuncId,
) -> Result<Vec<Value>, Fail> {
    let params = param_types(engine, f);
    let (text, what) = match (&a.args, &a.args_file) {
        (Some(t), _) => (t.clone(), "--args".to_string()),
        (None, Some(p)) => (
            advm::read_file(p, opts.max_source_bytes)
                .and_then(|b| {
                    String::from_utf8(b).map_err(|e| format!("cannot read {}: {e}", p.display()))
                })
                .map(|t| t.strip_prefix('\u{FEFF}').map(str::to_string).unwrap_or(t))
                .map_err(Fail::Usage)?,
            format!("the arguments file {}", p.display()),
        ),
        (None, None) if params.is_empty() => ("[]".into(), "--args".to_string()),
        (None, None) => {
            return Err(Fail::Usage(format!(
                "@{} takes {} argument(s): pass them with --args '[...]'",
                engine.module().func(f).name,
                params.len()
            )))
        }
    };
    parse_json_args_from(&text, &params, &what).map_err(Fail::Usage)
}

/// Engine, function and arguments of a call command.
fn prepare(a: &CallArgs, opts: &Options) -> Result<(Engine, FuncId, Vec<Value>), Fail> {
    let mut engine = load(&a.file, opts)?;
    apply_limits(engine.vm_mut().limits_mut(), &a.limits);
    let f = pick(&engine, a.func.as_deref(), &a.file)?;
    let args = call_values(a, opts, &engine, f)?;
    Ok((engine, f, args))
}

/// The parameters `--wrt` selects (`None`: every f64 and f64[] one).
pub fn selection(engine: &Engine, f: FuncId, wrt: Option<&str>) -> Result<Option<Vec<bool>>, Fail> {
    wrt.map(|names| wrt_mask(engine.module().func(f), names).map_err(Fail::Usage))
        .transpose()
}

/// The parameters `wrt` selects, or every f64 and f64[] parameter of `f`
/// without `--wrt`.
pub fn selection_or_all(engine: &Engine, f: FuncId, wrt: Option<&str>) -> Result<Vec<bool>, Fail> {
    Ok(selection(engine, f, wrt)?
        .unwrap_or_else(|| ad::analysis::all_params(engine.module().func(f))))
}

/// Value and gradient of `f`, with respect to the parameters `wrt` selects.
fn gradient(
    engine: &mut Engine,
    f: FuncId,
    args: &[Value],
    wrt: Option<&[bool]>,
    out: &mut Gradient,
) -> Result<(), Fail> {
    match wrt {
        Some(mask) => engine.grad_wrt_into(f, args, mask, out)?,
        None => engine.grad_into(f, args, out)?,
    }
    Ok(())
}

pub fn run(a: &CallArgs, opts: &Options) -> u8 {
    finish(
        (|| {
            if a.wrt.is_some() {
                return Err(Fail::Usage(
                    "--wrt applies to grad, jvp, vjp, hvp, hessian, jacobian, check and bench, not to run".into(),
                ));
            }
            let (mut engine, f, args) = prepare(a, opts)?;
            let v = engine.run(f, &args)?;
            // A function with no result prints `none` (`null`).
            let unit = engine.module().func(f).ret == vm::ir::RetType::Unit;
            if a.json {
                let value = if unit {
                    serde_json::Value::Null
                } else {
                    value_json(&v)
                };
                emit(json!({ "value": value }))?;
            } else if unit {
                emit("none".to_string())?;
            } else {
                emit(value_text(&v, None))?;
            }
            Ok(())
        })()
        .map_err(|f: Fail| f.in_file(&a.file)),
    )
}

/// `∂x = 12` lines for a gradient.
pub fn gradient_lines(names: &[String], grad: &[Option<Value>], max: Option<usize>) -> Vec<String> {
    names
        .iter()
        .zip(grad)
        .map(|(n, v)| match v {
            Some(v) => format!("∂{n} = {}", value_text(v, max)),
            None => format!("∂{n} = -"),
        })
        .collect()
}

pub fn grad(a: &CallArgs, opts: &Options) -> u8 {
    finish(
        (|| {
            let (mut engine, f, args) = prepare(a, opts)?;
            let wrt = selection(&engine, f, a.wrt.as_deref())?;
            let mut g = Gradient::default();
            gradient(&mut engine, f, &args, wrt.as_deref(), &mut g)?;
            if a.json {
                emit(json!({ "value": float_json(g.value), "grad": gradient_json(&g.grad) }))?;
            } else {
                emit(format_args!("value = {}", g.value))?;
                for line in gradient_lines(&param_names(engine.module().func(f)), &g.grad, None) {
                    emit(line)?;
                }
            }
            Ok(())
        })()
        .map_err(|f: Fail| f.in_file(&a.file)),
    )
}

/// Text lines of a forward-mode result: the value, the tangent, and the
/// tangent of each differentiated array parameter's contents after the
/// call (`max`: shorten arrays as [`value_text`] does).
/// A function with no result (`unit`) shows `value = none` and no tangent.
pub fn tangent_lines(
    names: &[String],
    t: &ad::Tangent,
    max: Option<usize>,
    unit: bool,
) -> Vec<String> {
    let mut out = if unit {
        vec!["value = none".to_string()]
    } else {
        vec![
            format!("value = {}", value_text(&t.value, max)),
            match &t.tangent {
                Some(v) => format!("tangent = {}", value_text(v, max)),
                None => format!("tangent = - (the result is {})", t.value.ty()),
            },
        ]
    };
    for (n, v) in names.iter().zip(&t.arg_tangents) {
        if let Some(v) = v {
            out.push(format!("tangent of %{n} = {}", value_text(v, max)));
        }
    }
    out
}

/// `advm jvp`: value and directional derivative (adasm.md §8).
pub fn jvp(a: &CallArgs, opts: &Options, dir: &str) -> u8 {
    finish(
        (|| {
            let (mut engine, f, args) = prepare(a, opts)?;
            let mask = selection_or_all(&engine, f, a.wrt.as_deref())?;
            let names = param_names(engine.module().func(f));
            let dir = parse_json_dir(dir, &args, &mask, &names, "--dir").map_err(Fail::Usage)?;
            let t = engine.jvp_wrt(f, &args, &dir, &mask)?;
            let unit = engine.module().func(f).ret == vm::ir::RetType::Unit;
            if a.json {
                emit(serde_json::Value::Object(advm::args::tangent_json(
                    &t, unit,
                )))?;
            } else {
                for line in tangent_lines(&names, &t, None, unit) {
                    emit(line)?;
                }
            }
            Ok(())
        })()
        .map_err(|f: Fail| f.in_file(&a.file)),
    )
}

/// `advm vjp`: reverse mode with a given output cotangent (adasm.md §8).
pub fn vjp(a: &CallArgs, opts: &Options, seed: &str) -> u8 {
    finish(
        (|| {
            let (mut engine, f, args) = prepare(a, opts)?;
            let mask = selection_or_all(&engine, f, a.wrt.as_deref())?;
            let ret = match engine.module().func(f).ret {
                vm::ir::RetType::One(t) => t,
                vm::ir::RetType::Unit => {
                    return Err(Fail::Usage(
                        "the function returns nothing: vjp needs an f64 or f64[] result".into(),
                    ))
                }
                vm::ir::RetType::Many(_) => Type::F64,
            };
            let seed = parse_json_seed(seed, ret).map_err(Fail::Usage)?;
            let v = engine.vjp_wrt(f, &args, &seed, &mask)?;
            if a.json {
                emit(json!({ "value": value_json(&v.value), "grad": gradient_json(&v.grad) }))?;
            } else {
                emit(format_args!("value = {}", value_text(&v.value, None)))?;
                for line in gradient_lines(&param_names(engine.module().func(f)), &v.grad, None) {
                    emit(line)?;
                }
            }
            Ok(())
        })()
        .map_err(|f: Fail| f.in_file(&a.file)),
    )
}

/// `advm hvp`: value, gradient and Hessian-vector product along `--dir`
/// by forward-over-reverse (adasm.md §8).
pub fn hvp(a: &CallArgs, opts: &Options, dir: &str) -> u8 {
    finish(
        (|| {
            let (mut engine, f, args) = prepare(a, opts)?;
            let mask = selection_or_all(&engine, f, a.wrt.as_deref())?;
            let names = param_names(engine.module().func(f));
            let dir = parse_json_dir(dir, &args, &mask, &names, "--dir").map_err(Fail::Usage)?;
            let h = engine.hvp_wrt(f, &args, &dir, &mask)?;
            if a.json {
                emit(json!({
                    "value": float_json(h.value),
                    "grad": gradient_json(&h.grad),
                    "hvp": gradient_json(&h.hvp),
                }))?;
            } else {
                emit(format_args!(
                    "value = {}",
                    value_text(&Value::F64(h.value), None)
                ))?;
                for ((n, g), hv) in names.iter().zip(&h.grad).zip(&h.hvp) {
                    match (g, hv) {
                        (Some(g), Some(hv)) => emit(format_args!(
                            "∂{n} = {}    (H·dir)_{n} = {}",
                            value_text(g, None),
                            value_text(hv, None)
                        ))?,
                        _ => emit(format_args!("∂{n} = -    (H·dir)_{n} = -"))?,
                    }
                }
            }
            Ok(())
        })()
        .map_err(|f: Fail| f.in_file(&a.file)),
    )
}

/// A matrix (Hessian, Jacobian) as JSON: an array of rows.
fn matrix_json(rows: &[Vec<f64>]) -> serde_json::Value {
    rows.iter()
        .map(|r| serde_json::Value::Array(r.iter().map(|x| float_json(*x)).collect()))
        .collect()
}

/// A gradient-shaped list as JSON (`null` for parameters without one).
fn gradient_json(g: &[Option<Value>]) -> Vec<serde_json::Value> {
    g.iter()
        .map(|g| g.as_ref().map_or(serde_json::Value::Null, value_json))
        .collect()
}

/// `advm hessian`: value, gradient and the dense Hessian over the
/// flattened inputs, one Hessian-vector product per input (adasm.md §8).
pub fn hessian(a: &CallArgs, opts: &Options) -> u8 {
    finish(
        (|| {
            let (mut engine, f, args) = prepare(a, opts)?;
            let h = match selection(&engine, f, a.wrt.as_deref())? {
                Some(mask) => engine.hessian_wrt(f, &args, &mask)?,
                None => engine.hessian(f, &args)?,
            };
            if a.json {
                emit(json!({
                    "value": float_json(h.value),
                    "grad": gradient_json(&h.grad),
                    "hessian": matrix_json(&h.hessian),
                }))?;
            } else {
                emit(format_args!(
                    "value = {}",
                    value_text(&Value::F64(h.value), None)
                ))?;
                for line in gradient_lines(&param_names(engine.module().func(f)), &h.grad, None) {
                    emit(line)?;
                }
                let n = h.hessian.len();
                emit(format_args!(
                    "hessian ({n} × {n} over the flattened inputs) ="
                ))?;
                for row in &h.hessian {
                    emit(value_text(&Value::Arr(row.clone()), None))?;
                }
            }
            Ok(())
        })()
        .map_err(|f: Fail| f.in_file(&a.file)),
    )
}

/// `advm jacobian`: the dense Jacobian by forward mode (adasm.md §8).
pub fn jacobian(a: &CallArgs, opts: &Options) -> u8 {
    finish(
        (|| {
            let (mut engine, f, args) = prepare(a, opts)?;
            let j = match selection(&engine, f, a.wrt.as_deref())? {
                Some(mask) => engine.jacobian_wrt(f, &args, &mask)?,
                None => engine.jacobian(f, &args)?,
            };
            if a.json {
                emit(
                    json!({ "value": value_json(&j.value), "jacobian": matrix_json(&j.jacobian) }),
                )?;
            } else {
                emit(format_args!("value = {}", value_text(&j.value, None)))?;
                let cols = j.jacobian.first().map_or(0, Vec::len);
                emit(format_args!(
                    "jacobian ({} × {cols}: rows are result elements, columns flattened inputs) =",
                    j.jacobian.len()
                ))?;
                for row in &j.jacobian {
                    emit(value_text(&Value::Arr(row.clone()), None))?;
                }
            }
            Ok(())
        })()
        .map_err(|f: Fail| f.in_file(&a.file)),
    )
}

/// The gradient of `f` at a finite-difference probe `at` (see
/// [`probe_value`]).
fn probe_gradient(
    engine: &mut Engine,
    f: FuncId,
    probe: &[Value],
    mask: &[bool],
    at: &str,
) -> Result<Vec<Option<Value>>, Fail> {
    match engine.grad_wrt(f, probe, mask) {
        Ok(g) => Ok(g.grad),
        Err(e) => Err(Fail::from(e).with_note(&format!(
            "note: in a finite-difference gradient, with {at}; at the point itself \
             the function and its Hessian-vector product ran (`advm hvp`)"
        ))),
    }
}

/// The value of `f` at a finite-difference probe `at` (a neighbour of the
/// point, which itself ran: a trap here says so).
fn probe_value(engine: &mut Engine, f: FuncId, probe: &[Value], at: &str) -> Result<f64, Fail> {
    let run = engine.run(f, probe).map_err(|e| {
        Fail::from(e).with_note(&format!(
            "note: in a finite-difference run, with {at}; at the point itself \
             the function and its gradient ran (`advm grad`)"
        ))
    });
    match run? {
        Value::F64(y) => Ok(y),
        other => Err(Fail::Internal(format!(
            "the function returned {other} in a finite-difference run, not an f64"
        ))),
    }
}

pub fn check(a: &CallArgs, opts: &Options, full: bool, order: u8) -> u8 {
    let r = (|| -> Result<bool, Fail> {
        let (mut engine, f, args) = prepare(a, opts)?;
        let names = param_names(engine.module().func(f));
        let wrt = selection(&engine, f, a.wrt.as_deref())?;
        let mut g = Gradient::default();
        gradient(&mut engine, f, &args, wrt.as_deref(), &mut g)?;
        let entries = fd::entries(&args, &g.grad);
        let directions = !full && entries > fd::FULL_MAX;
        let mut rows = if directions {
            fd::compare_directions(&args, &g.grad, fd::DIRECTIONS, fd::SEED, |probe, at| {
                probe_value(&mut engine, f, probe, at)
            })?
        } else {
            fd::compare(&args, &g.grad, &names, |probe, at| {
                probe_value(&mut engine, f, probe, at)
            })?
        };
        let gradient_rows = rows.len();
        // Forward mode too: the tangent along the direction that moves each
        // differentiated input by its own step, against the central
        // difference along it.
        let mut tangent = None;
        // The differentiated parameters, for the tangent and second order.
        let mask = match &wrt {
            Some(mask) => mask.clone(),
            None => ad::analysis::all_params(engine.module().func(f)),
        };
        if gradient_rows > 0 {
            let dir = fd::check_direction(&args, &mask);
            let t = engine.jvp_wrt(f, &args, &dir, &mask)?;
            let Some(Value::F64(ad)) = t.tangent else {
                return Err(Fail::Internal("the tangent of an f64 result is no f64".into()));
            };
            let fd = fd::directional(&args, &dir, |probe, at| {
                probe_value(&mut engine, f, probe, at)
            })?;
            let ok = fd::agree(ad, fd);
            tangent = Some((ad, fd, ok));
            rows.push(fd::Entry {
                param: args.len(),
                element: None,
                name: "jvp".into(),
                ad,
                fd,
                ok,
            });
        }
        // Second order: the Hessian-vector product along the same
        // direction against central differences of the gradient.
        let mut hvp_rows = Vec::new();
        if order >= 2 && gradient_rows > 0 {
            let dir = fd::check_direction(&args, &mask);
            let h = engine.hvp_wrt(f, &args, &dir, &mask)?;
            hvp_rows = fd::hvp_rows(&args, &dir, &h.hvp, &names, |probe, at| {
                probe_gradient(&mut engine, f, probe, &mask, at)
            })?;
        }
        let all_ok = rows.iter().chain(&hvp_rows).all(|r| r.ok);
        // Custom rules the derivative goes through: a disagreement may be
        // theirs (the differences are of the functions' own bodies).
        let rules = engine.rules_used(f);
        if a.json {
            let rows_json: Vec<serde_json::Value> = rows[..gradient_rows]
                .iter()
                .map(|r| {
                    json!({"param": r.name, "ad": float_json(r.ad), "fd": float_json(r.fd), "ok": r.ok})
                })
                .collect();
            let mut obj = json!({
                "value": float_json(g.value),
                "tolerance": fd::TOLERANCE,
                "mode": if directions { "directions" } else { "entries" },
                "ok": all_ok,
                "entries": rows_json,
            });
            if let (Some((ad, fd, ok)), Some(o)) = (tangent, obj.as_object_mut()) {
                o.insert(
                    "tangent".into(),
                    json!({"ad": float_json(ad), "fd": float_json(fd), "ok": ok}),
                );
            }
            if let (true, Some(o)) = (order >= 2, obj.as_object_mut()) {
                let hvp: Vec<serde_json::Value> = hvp_rows
                    .iter()
                    .map(|r| {
                        json!({"param": r.name.trim_start_matches("H·d "), "ad": float_json(r.ad),
                               "fd": float_json(r.fd), "ok": r.ok})
                    })
                    .collect();
                o.insert("hvp".into(), hvp.into());
            }
            if let (false, Some(o)) = (rules.is_empty(), obj.as_object_mut()) {
                o.insert("rules".into(), rules.clone().into());
            }
            emit(obj)?;
        } else {
            emit(format_args!("value = {}", g.value))?;
            emit(format_args!("tolerance: {}", fd::RULE))?;
            if directions {
                emit(format_args!(
                    "{entries} gradient entries: compared along {} pseudo-random directions \
                     (--full compares each entry)",
                    fd::DIRECTIONS
                ))?;
            }
            if order >= 2 {
                rows.extend(hvp_rows);
            }
            let width = rows
                .iter()
                .map(|r| r.name.chars().count())
                .max()
                .unwrap_or(0)
                + 1;
            for (i, r) in rows.iter().enumerate() {
                let name = if i < gradient_rows {
                    format!("∂{}", r.name)
                } else {
                    r.name.clone()
                };
                emit(format_args!(
                    "{} {:<width$} ad = {:<24} fd = {:<24} |ad - fd| = {:.3e}",
                    if r.ok { "ok  " } else { "FAIL" },
                    name,
                    r.ad,
                    r.fd,
                    (r.ad - r.fd).abs()
                ))?;
            }
            let bad = rows.iter().filter(|r| !r.ok).count();
            // Along directions, the rows are the directions and then the
            // tangent (forward mode) if there is one.
            let what = match (directions, rows.len() > gradient_rows) {
                (false, _) => "entries",
                (true, false) => "directions",
                (true, true) => "comparisons (directions and the tangent)",
            };
            if order >= 2 {
                emit("H·d: the Hessian-vector product along d (each input moved by its own \
                      step), against central differences of the gradient along d")?;
            }
            emit(if bad == 0 {
                format!("all {} {what} agree", rows.len())
            } else {
                format!("{bad} of {} {what} disagree", rows.len())
            })?;
            if bad > 0 {
                for r in &rules {
                    emit(format_args!(
                        "the derivative uses {r}: the rule may be wrong"
                    ))?;
                }
            }
        }
        Ok(all_ok)
    })()
    .map_err(|f: Fail| f.in_file(&a.file));
    match r {
        Ok(true) => 0,
        Ok(false) => EXIT_CHECK_FAILED,
        Err(f) => f.report(),
    }
}

/// `advm disasm --fn NAME --hvp`: the function, then the bytecode its
/// Hessian-vector products run (the tangents of its forward function and
/// pullback, and of every derived function they call).
pub fn disasm_hvp(file: &Path, opts: &Options, func: Option<&str>, wrt: Option<&str>) -> u8 {
    finish((|| {
        let mut engine = load(file, opts)?;
        let f = pick_required(&engine, func, file, "--hvp")?;
        emit(vm::disasm::function_in(
            engine.program().func(f),
            Some(engine.program()),
        ))?;
        let mask = selection_or_all(&engine, f, wrt)?;
        emit_raw(engine.disasm_hvp_wrt(f, &mask)?)
    })())
}

/// `advm disasm FILE --tier [--fn NAME]`: which tier runs each function.
pub fn disasm_tiers(file: &Path, opts: &Options, func: Option<&str>) -> u8 {
    finish((|| {
        let engine = load(file, opts)?;
        let targets: Vec<FuncId> = match func {
            Some(name) => vec![pick(&engine, Some(name), file)?],
            None => (0..engine.module().funcs.len())
                .map(|i| FuncId(i as u32))
                .collect(),
        };
        for f in targets {
            let name = &engine.program().func(f).name;
            let tier = if !opts.jit {
                "interp (--no-jit)".to_string()
            } else {
                match jit::tier_of(engine.program(), f) {
                    Ok(()) => "jit".to_string(),
                    Err(why) => format!("interp ({why})"),
                }
            };
            emit(format_args!("@{name}: {tier}"))?;
        }
        Ok(())
    })())
}

/// `advm disasm FILE --native [--fn NAME] [--ad [--wrt NAMES]]`: the code
/// the native tier compiles for each function (with --ad, for the forward
/// and reverse functions of the function --fn names): its Cranelift IR and
/// machine code, or why it runs interpreted.
pub fn disasm_native(
    file: &Path,
    opts: &Options,
    func: Option<&str>,
    ad: bool,
    wrt: Option<&str>,
) -> u8 {
    finish((|| {
        let mut engine = load(file, opts)?;
        let targets: Vec<FuncId> = if ad {
            let f = pick_required(&engine, func, file, "--ad --native")?;
            let mask = selection_or_all(&engine, f, wrt)?;
            let d = engine.derive_wrt(f, &mask)?;
            vec![d.fwd, d.rev]
        } else {
            match func {
                Some(name) => vec![pick(&engine, Some(name), file)?],
                None => (0..engine.module().funcs.len())
                    .map(|i| FuncId(i as u32))
                    .collect(),
            }
        };
        for f in targets {
            let name = &engine.program().func(f).name;
            emit(format_args!(";; a call of @{name} from the host"))?;
            match jit::listing(engine.program(), f) {
                Ok(text) => emit_raw(text)?,
                Err(why) => emit(format_args!("; interp ({why})"))?,
            }
        }
        Ok(())
    })())
}

pub fn disasm(
    file: &Path,
    opts: &Options,
    func: Option<&str>,
    ad: bool,
    jvp: bool,
    wrt: Option<&str>,
) -> u8 {
    finish((|| {
        let mut engine = load(file, opts)?;
        if jvp {
            let f = pick_required(&engine, func, file, "--jvp")?;
            emit(vm::disasm::function_in(
                engine.program().func(f),
                Some(engine.program()),
            ))?;
            let mask = selection_or_all(&engine, f, wrt)?;
            if ad {
                let d = engine.derive_wrt(f, &mask)?;
                for g in engine.reachable_from(d) {
                    emit_raw(engine.rule_note(g))?;
                    emit(vm::disasm::function_in(
                        engine.program().func(g),
                        Some(engine.program()),
                    ))?;
                }
            }
            return emit_raw(engine.disasm_jvp_wrt(f, &mask)?);
        }
        if let Some(names) = wrt {
            let f = pick_required(&engine, func, file, "--wrt")?;
            emit(vm::disasm::function_in(
                engine.program().func(f),
                Some(engine.program()),
            ))?;
            let mask = selection(&engine, f, Some(names))?.unwrap_or_default();
            let d = engine.derive_wrt(f, &mask)?;
            for g in engine.reachable_from(d) {
                emit_raw(engine.rule_note(g))?;
                emit(vm::disasm::function_in(
                    engine.program().func(g),
                    Some(engine.program()),
                ))?;
            }
            return Ok(());
        }
        let targets: Vec<FuncId> = match func {
            Some(name) => vec![pick(&engine, Some(name), file)?],
            None => (0..engine.module().funcs.len())
                .map(|i| FuncId(i as u32))
                .collect(),
        };
        for f in &targets {
            emit(vm::disasm::function_in(
                engine.program().func(*f),
                Some(engine.program()),
            ))?;
        }
        if ad {
            let mut roots = Vec::new();
            for f in targets {
                if engine.module().func(f).ret != vm::ir::RetType::One(Type::F64) {
                    if func.is_some() {
                        engine.derive(f)?;
                    }
                    continue;
                }
                roots.push(engine.derive(f)?);
            }
            for g in engine.reachable_from_all(&roots) {
                emit_raw(engine.rule_note(g))?;
                emit(vm::disasm::function_in(
                    engine.program().func(g),
                    Some(engine.program()),
                ))?;
            }
        }
        Ok(())
    })())
}

/// Median nanoseconds per call of `call`, after warm-up, and allocations
/// per call.
pub fn time_calls(mut call: impl FnMut() -> Result<(), Fail>) -> Result<(f64, f64), Fail> {
    for _ in 0..20 {
        call()?;
    }
    // Batches of calls sized to take about a millisecond each.
    let start = Instant::now();
    let mut probe = 0u64;
    while start.elapsed().as_micros() < 1000 && probe < 1_000_000 {
        call()?;
        probe += 1;
    }
    let batch = probe.max(1);
    let mut samples = Vec::with_capacity(256);
    let allocs_before = vm::alloc_count::total();
    let mut calls = 0u64;
    let total = Instant::now();
    while samples.len() < 15 || (total.elapsed().as_millis() < 500 && samples.len() < 200) {
        let t = Instant::now();
        for _ in 0..batch {
            call()?;
        }
        samples.push(t.elapsed().as_nanos() as f64 / batch as f64);
        calls += batch;
    }
    let allocs = (vm::alloc_count::total() - allocs_before) as f64 / calls as f64;
    samples.sort_by(|a, b| a.total_cmp(b));
    Ok((samples[samples.len() / 2], allocs))
}

pub fn bench(a: &CallArgs, opts: &Options) -> u8 {
    finish(
        (|| {
            let (mut engine, f, args) = prepare(a, opts)?;
            let wrt = selection(&engine, f, a.wrt.as_deref())?;
            // Fail early with the real error rather than inside the loops.
            engine.run(f, &args)?;
            let tier = engine.vm_mut().last_tier().name();
            let mut out = Gradient::default();
            gradient(&mut engine, f, &args, wrt.as_deref(), &mut out)?;
            // The tier of the gradient's last call (the reverse function).
            let grad_tier = engine.vm_mut().last_tier().name();
            let (primal_ns, allocs_primal) =
                time_calls(|| engine.run(f, &args).map(|_| ()).map_err(Fail::from))?;
            let (grad_ns, allocs_grad) =
                time_calls(|| gradient(&mut engine, f, &args, wrt.as_deref(), &mut out))?;
            // Of the last gradient: forward instructions run (first sweep
            // and recomputation under `--ad-budget`) per instruction of
            // the first sweep.
            let recompute_factor = engine.recompute_factor();
            let ratio = grad_ns / primal_ns;
            // Forward mode along all ones over the differentiated inputs.
            let mask = match &wrt {
                Some(mask) => mask.clone(),
                None => ad::analysis::all_params(engine.module().func(f)),
            };
            let dir: Vec<Option<Value>> = args
                .iter()
                .zip(&mask)
                .map(|(a, w)| match a {
                    Value::F64(_) if *w => Some(Value::F64(1.0)),
                    Value::Arr(xs) if *w => Some(Value::Arr(vec![1.0; xs.len()])),
                    _ => None,
                })
                .collect();
            let mut t = ad::Tangent::default();
            engine.jvp_wrt_into(f, &args, &dir, &mask, &mut t)?;
            let (jvp_ns, allocs_jvp) = time_calls(|| {
                engine
                    .jvp_wrt_into(f, &args, &dir, &mask, &mut t)
                    .map_err(Fail::from)
            })?;
            // Hessian-vector products along the same direction, where the
            // function can be differentiated twice that way.
            // A derivation refused for its size (past the compile budget, or
            // too large for a frame) leaves the other figures standing: the
            // refusal is reported instead of the HVP's time.
            let mut h = ad::Hvp::default();
            let mut hvp_error = None;
            let hvp = match engine.hvp_wrt_into(f, &args, &dir, &mask, &mut h) {
                Ok(()) => Some(time_calls(|| {
                    engine
                        .hvp_wrt_into(f, &args, &dir, &mask, &mut h)
                        .map_err(Fail::from)
                })?),
                Err(AdError::NotDifferentiable(_)) => None,
                Err(e @ (AdError::TooMuchWork { .. } | AdError::TooLarge { .. })) => {
                    hvp_error = Some(e.to_string());
                    None
                }
                Err(e) => return Err(e.into()),
            };
            if a.json {
                let mut obj = json!({
                    "primal_ns": primal_ns,
                    "grad_ns": grad_ns,
                    "ratio": ratio,
                    "allocs_per_primal": allocs_primal,
                    "allocs_per_grad": allocs_grad,
                    "jvp_ns": jvp_ns,
                    "allocs_per_jvp": allocs_jvp,
                    "recompute_factor": recompute_factor,
                    "tier": tier,
                    "grad_tier": grad_tier,
                });
                if let (Some((hvp_ns, allocs_hvp)), Some(o)) = (hvp, obj.as_object_mut()) {
                    o.insert("hvp_ns".into(), json!(hvp_ns));
                    o.insert("allocs_per_hvp".into(), json!(allocs_hvp));
                }
                if let (Some(msg), Some(o)) = (&hvp_error, obj.as_object_mut()) {
                    o.insert("hvp_error".into(), json!(msg));
                }
                emit(obj)?;
            } else {
                emit(format_args!(
                "primal: {primal_ns:.1} ns per call (median), {allocs_primal} allocations per call"
            ))?;
                emit(format_args!(
                    "grad:   {grad_ns:.1} ns per call (median), {allocs_grad} allocations per call"
                ))?;
                emit(format_args!("ratio:  {ratio:.2}"))?;
                emit(format_args!("tier:   {tier} (gradient: {grad_tier})"))?;
                emit(format_args!(
                    "jvp:    {jvp_ns:.1} ns per call (median), {allocs_jvp} allocations per call \
                     (direction: all ones)"
                ))?;
                if let Some((hvp_ns, allocs_hvp)) = hvp {
                    emit(format_args!(
                        "hvp:    {hvp_ns:.1} ns per call (median), {allocs_hvp} allocations per \
                         call (direction: all ones)"
                    ))?;
                }
                if let Some(msg) = &hvp_error {
                    emit(format_args!("hvp:    refused: {msg}"))?;
                }
            }
            Ok(())
        })()
        .map_err(|f: Fail| f.in_file(&a.file)),
    )
}

pub fn repl(file: Option<&Path>, opts: &Options, l: &LimitArgs) -> u8 {
    let mut limits = vm::Limits::default();
    apply_limits(&mut limits, l);
    crate::repl::run(file, limits, *opts)
}

/// `advm cfg FILE [--fn NAME] [--ad]`: Graphviz DOT on stdout.
pub fn cfg(file: &Path, opts: &Options, func: Option<&str>, ad: bool, wrt: Option<&str>) -> u8 {
    finish((|| {
        let mut engine = load(file, opts)?;
        let f = pick_required(&engine, func, file, "cfg")?;
        if !ad {
            return emit_raw(crate::cfg::primal_dot(
                engine.module(),
                engine.module().func(f),
            ));
        }
        let d = match selection(&engine, f, wrt)? {
            Some(mask) => engine.derive_wrt(f, &mask)?,
            None => engine.derive(f)?,
        };
        let (Some(fwd), Some(rev)) = (engine.derived_ir(d.fwd), engine.derived_ir(d.rev)) else {
            return Err(Fail::Internal("derived IR missing".into()));
        };
        let program = engine.program();
        let names = |c: FuncId| program.get(c).map_or("?".into(), |g| g.name.clone());
        emit_raw(crate::cfg::ad_dot(&names, fwd, rev))
    })())
}
