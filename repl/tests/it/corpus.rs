//! The program corpus: every `.adasm` and `.adl` file under `programs/`
//! (and its subfolders, except `programs/reference/`) carries its
//! expectations in comment directives (`; grad: ...` in `.adasm`,
//! `// grad: ...` in `.adl`), checked here against [`ad::Engine`]. Adding a
//! file adds a test.
//!
//! ```text
//! ; run: @f(ARGS) => EXPECTED           the value: exact for i64/bool,
//!                                       relative 1e-12 for f64 (nan == nan),
//!                                       element-wise for arrays
//! ; grad: @f(ARGS) => VALUE ; [G, ...]  value (relative 1e-12) and gradient
//!                                       (JSON: a number per f64, an array per
//!                                       f64[], null per i64/bool parameter,
//!                                       "inf"/"-inf"/"nan" strings, "_" to
//!                                       skip an entry; each number within
//!                                       1e-9 relative + 1e-12 absolute)
//! ; jvp: @f(ARGS) dir [D, ...] => VALUE ; T
//!                                       value and tangent of `Engine::jvp`
//!                                       along the direction (JSON shaped like
//!                                       ARGS: a number per f64, an array per
//!                                       f64[], null per i64/bool); T a number
//!                                       (f64 result) or an array (f64[])
//! ; hvp: @f(ARGS) dir [D, ...] => VALUE ; [H, ...]
//!                                       value and Hessian-vector product of
//!                                       `Engine::hvp`, shaped like a gradient;
//!                                       tolerances as for `grad`
//! ; check: @f(ARGS)                     AD agrees with central finite
//!                                       differences, exactly as `advm check`
//!                                       decides (`advm::fd`)
//! ; check-fails: @f(ARGS)               ... and here they must disagree
//!                                       (`nograd` on purpose)
//! ; trap: @f(ARGS) => TEXT              the call traps; the message contains TEXT
//! ```
//!
//! ARGS use the REPL's literal syntax (`assembler::parse_call`). Besides the
//! directives themselves the corpus must: have at least 25 programs in
//! `programs/` itself; give every file a directive; give every function that
//! a directive calls, returns f64 and has an f64 or f64[] parameter at least
//! one `grad`, one `check` (or `check-fails`), one `jvp` and one `hvp`
//! directive (`hvp` not in [`NO_HVP`]); and, together, use every
//! instruction of the language.
//!
//! Expected values come from an independent implementation,
//! `programs/reference/reference.py`, never from advm; the last test runs
//! its `--check` mode, which recomputes every run/grad/jvp/hvp/trap
//! directive (jvp from dual numbers seeded with the direction, hvp from
//! nested dual numbers).

use ad::Engine;
use assembler::{literals_to_values, parse_call, Literal};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use vm::ir::{FuncId, RetType};
use vm::{Type, Value};

const KINDS: [&str; 7] = ["run", "grad", "jvp", "hvp", "check", "check-fails", "trap"];

/// Programs exempt from the rule that every differentiable function has an
/// `hvp` directive: `nograd` keeps its input constant in the product (the
/// Hessian of `x·nograd(x) + x` is 0, docs/ad.md), which differences of
/// the gradient contradict on purpose, as `check-fails` shows at first
/// order.
const NO_HVP: [&str; 1] = ["programs/nograd.adasm"];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "reference") {
                files(&p, out);
            }
        } else if p.extension().is_some_and(|e| e == "adasm" || e == "adl") {
            out.push(p);
        }
    }
}

/// The workspace this test was compiled from (its own manifest's parent,
/// not `testkit::workspace_root`, which is fixed when `testkit` compiles
/// and names another checkout when several share one target directory).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn corpus() -> (PathBuf, Vec<PathBuf>) {
    let root = workspace_root();
    let mut paths = Vec::new();
    files(&root.join("programs"), &mut paths);
    (root, paths)
}

/// The IR of a corpus file: `.adl` files compiled, others assembled.
fn build(src: &str, rel: &str) -> Result<vm::ir::Module, assembler::Diagnostics> {
    if rel.ends_with(".adl") {
        adl::compile(src, rel)
    } else {
        assembler::assemble(src, rel)
    }
}

/// `; KIND: BODY` lines (`// KIND: BODY` in `.adl` files) with their
/// 1-based line numbers.
fn directives(src: &str) -> Vec<(usize, &str, &str)> {
    src.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let rest = line
                .strip_prefix("; ")
                .or_else(|| line.strip_prefix("// "))?;
            let (kind, body) = rest.split_once(": ")?;
            KINDS.contains(&kind).then_some((i + 1, kind, body))
        })
        .collect()
}

/// Relative 1e-12 (values) with nan equal to nan.
fn same_f64(got: f64, want: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    got == want || (got - want).abs() <= 1e-12 * got.abs().max(want.abs())
}

/// Relative 1e-9 plus absolute 1e-12 (gradient entries).
fn same_grad(got: f64, want: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    got == want || (got - want).abs() <= 1e-9 * got.abs().max(want.abs()) + 1e-12
}

/// Parse `EXPECTED` as one literal (`inf`, `nan`, numbers, bools, arrays).
fn literal(text: &str) -> Result<Literal, String> {
    let (_, mut lits) = parse_call(&format!("@x({text})"))?;
    if lits.len() != 1 {
        return Err(format!("expected one value, found `{text}`"));
    }
    Ok(lits.remove(0))
}

fn matches_literal(v: &Value, lit: &Literal) -> bool {
    match (v, lit) {
        (Value::F64(x), Literal::Num { value, .. }) => same_f64(*x, *value),
        (
            Value::I64(i),
            Literal::Num {
                text, is_int: true, ..
            },
        ) => text.parse::<i64>().ok() == Some(*i),
        (Value::Bool(b), Literal::Bool(e)) => b == e,
        (Value::Arr(xs), Literal::Array(es)) => {
            xs.len() == es.len() && xs.iter().zip(es).all(|(x, e)| same_f64(*x, *e))
        }
        _ => false,
    }
}

/// A JSON number, or the strings `"inf"`, `"-inf"`, `"nan"`.
fn json_f64(j: &Json) -> Option<f64> {
    match j {
        Json::Number(n) => n.as_f64(),
        Json::String(s) if s == "inf" => Some(f64::INFINITY),
        Json::String(s) if s == "-inf" => Some(f64::NEG_INFINITY),
        Json::String(s) if s == "nan" => Some(f64::NAN),
        _ => None,
    }
}

fn grad_entry_matches(got: &Option<Value>, want: &Json) -> bool {
    match (got, want) {
        (_, Json::String(s)) if s == "_" => true,
        (None, Json::Null) => true,
        (Some(Value::F64(x)), w) => json_f64(w).is_some_and(|w| same_grad(*x, w)),
        (Some(Value::Arr(xs)), Json::Array(ws)) => {
            xs.len() == ws.len()
                && xs
                    .iter()
                    .zip(ws)
                    .all(|(x, w)| json_f64(w).is_some_and(|w| same_grad(*x, w)))
        }
        _ => false,
    }
}

/// The call of a directive body: before `=>`, and for jvp/hvp before
/// ` dir [...]`.
fn call_text<'a>(kind: &str, body: &'a str) -> &'a str {
    let call = body.split_once("=>").map_or(body, |(c, _)| c);
    if kind == "jvp" || kind == "hvp" {
        split_dir(call).map_or(call, |(c, _)| c)
    } else {
        call
    }
}

/// `@f(ARGS) dir [D, ...]` -> (`@f(ARGS)`, the direction's JSON text).
fn split_dir(call: &str) -> Result<(&str, &str), String> {
    let close = call.rfind(')').ok_or("expected `@f(ARGS) dir [D, ...]`")?;
    let (head, tail) = call.split_at(close + 1);
    let dir = tail.trim().strip_prefix("dir ").ok_or(format!(
        "expected ` dir [D, ...]` after the call, found `{}`",
        tail.trim()
    ))?;
    Ok((head, dir.trim()))
}

/// A direction in JSON (one entry per parameter: a number for f64, an array
/// of numbers for f64[], null for i64/bool or a zero direction) as
/// `Engine::jvp`/`hvp` take it.
fn direction(text: &str, params: &[Type]) -> Result<Vec<Option<Value>>, String> {
    let j: Json = serde_json::from_str(text).map_err(|e| format!("bad direction JSON: {e}"))?;
    let Json::Array(entries) = j else {
        return Err("the direction must be a JSON array".into());
    };
    if entries.len() != params.len() {
        return Err(format!(
            "{} direction entries for {} parameters",
            entries.len(),
            params.len()
        ));
    }
    entries
        .iter()
        .zip(params)
        .enumerate()
        .map(|(i, (e, t))| match (e, t) {
            (Json::Null, _) => Ok(None),
            (Json::Number(n), Type::F64) => n
                .as_f64()
                .map(|x| Some(Value::F64(x)))
                .ok_or(format!("direction entry {i}: not an f64")),
            (Json::Array(xs), Type::Arr) => xs
                .iter()
                .map(|x| x.as_f64())
                .collect::<Option<Vec<f64>>>()
                .map(|v| Some(Value::Arr(v)))
                .ok_or(format!("direction entry {i}: not an array of numbers")),
            (other, t) => Err(format!(
                "direction entry {i}: {other} does not fit a {t} parameter"
            )),
        })
        .collect()
}

fn param_names(engine: &Engine, f: FuncId) -> Vec<String> {
    let func = engine.module().func(f);
    func.params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            func.values
                .get(p.index())
                .and_then(|v| v.name.clone())
                .unwrap_or_else(|| format!("arg{i}"))
        })
        .collect()
}

struct Ctx<'a> {
    engine: &'a mut Engine,
}

impl Ctx<'_> {
    fn call(&self, text: &str) -> Result<(FuncId, Vec<Value>), String> {
        let (name, lits) = parse_call(text.trim())?;
        let f = self
            .engine
            .find(&name)
            .ok_or(format!("no function @{name}"))?;
        let params: Vec<Type> = self.engine.module().func(f).param_types();
        Ok((f, literals_to_values(&params, &lits)?))
    }

    /// The function a directive calls (for the coverage rule).
    fn target(&self, kind: &str, body: &str) -> Option<FuncId> {
        let (name, _) = parse_call(call_text(kind, body).trim()).ok()?;
        self.engine.find(&name)
    }

    /// AD against finite differences as `advm check` does it; the entries
    /// that disagree.
    fn fd_disagreements(&mut self, body: &str) -> Result<(usize, Vec<String>), String> {
        let (f, args) = self.call(body)?;
        let names = param_names(self.engine, f);
        let g = self.engine.grad(f, &args).map_err(|e| e.to_string())?;
        let engine = &mut *self.engine;
        let rows = advm::fd::compare(&args, &g.grad, &names, |a, at| match engine.run(f, a) {
            Ok(Value::F64(y)) => Ok(y),
            Ok(other) => Err(format!("returned {other}, not an f64")),
            Err(e) => Err(format!("finite differences trapped with {at}: {e}")),
        })?;
        let bad = rows
            .iter()
            .filter(|r| !r.ok)
            .map(|r| format!("∂{}: ad {} fd {}", r.name, r.ad, r.fd))
            .collect();
        Ok((rows.len(), bad))
    }

    fn directive(&mut self, kind: &str, body: &str) -> Result<(), String> {
        match kind {
            "run" => {
                let (call, expect) = body.split_once("=>").ok_or("missing `=>`")?;
                let (f, args) = self.call(call)?;
                let unit = self.engine.module().func(f).ret == vm::ir::RetType::Unit;
                if expect.trim() == "none" || unit {
                    // A function with no result (`run` prints `none`).
                    self.engine.run(f, &args).map_err(|e| e.to_string())?;
                    return match (expect.trim() == "none", unit) {
                        (true, true) => Ok(()),
                        (true, false) => Err("expected no result, but it has one".into()),
                        _ => Err(format!("it has no result; expected {}", expect.trim())),
                    };
                }
                let want = literal(expect.trim())?;
                let got = self.engine.run(f, &args).map_err(|e| e.to_string())?;
                if matches_literal(&got, &want) {
                    Ok(())
                } else {
                    Err(format!("got {got}, expected {}", expect.trim()))
                }
            }
            "grad" => {
                let (call, rest) = body.split_once("=>").ok_or("missing `=>`")?;
                let (value, grads) = rest.split_once(';').ok_or("missing `; [gradient]`")?;
                let (f, args) = self.call(call)?;
                let want_value = literal(value.trim())?;
                let want: Json = serde_json::from_str(grads.trim())
                    .map_err(|e| format!("bad gradient JSON: {e}"))?;
                let Json::Array(want) = want else {
                    return Err("the gradient must be a JSON array".into());
                };
                let g = self.engine.grad(f, &args).map_err(|e| e.to_string())?;
                if !matches_literal(&Value::F64(g.value), &want_value) {
                    return Err(format!("value {} expected {}", g.value, value.trim()));
                }
                if want.len() != g.grad.len() {
                    return Err(format!(
                        "{} gradient entries expected, got {}",
                        want.len(),
                        g.grad.len()
                    ));
                }
                let bad: Vec<String> = g
                    .grad
                    .iter()
                    .zip(&want)
                    .enumerate()
                    .filter(|(_, (got, w))| !grad_entry_matches(got, w))
                    .map(|(i, (got, w))| format!("entry {i}: got {got:?}, expected {w}"))
                    .collect();
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(bad.join("; "))
                }
            }
            "jvp" | "hvp" => {
                let (call, rest) = body.split_once("=>").ok_or("missing `=>`")?;
                let (value, expect) = rest.split_once(';').ok_or(if kind == "jvp" {
                    "missing `; TANGENT`"
                } else {
                    "missing `; [product]`"
                })?;
                let (call, dir) = split_dir(call)?;
                let (f, args) = self.call(call)?;
                let dir = direction(dir, &self.engine.module().func(f).param_types())?;
                let want_value = literal(value.trim())?;
                let want: Json = serde_json::from_str(expect.trim())
                    .map_err(|e| format!("bad JSON after `;`: {e}"))?;
                if kind == "jvp" {
                    let t = self.engine.jvp(f, &args, &dir).map_err(|e| e.to_string())?;
                    if !matches_literal(&t.value, &want_value) {
                        return Err(format!("value {} expected {}", t.value, value.trim()));
                    }
                    return if grad_entry_matches(&t.tangent, &want) {
                        Ok(())
                    } else {
                        Err(format!("tangent {:?}, expected {want}", t.tangent))
                    };
                }
                let Json::Array(want) = want else {
                    return Err("the Hessian-vector product must be a JSON array".into());
                };
                let h = self.engine.hvp(f, &args, &dir).map_err(|e| e.to_string())?;
                if !matches_literal(&Value::F64(h.value), &want_value) {
                    return Err(format!("value {} expected {}", h.value, value.trim()));
                }
                if want.len() != h.hvp.len() {
                    return Err(format!(
                        "{} product entries expected, got {}",
                        want.len(),
                        h.hvp.len()
                    ));
                }
                let bad: Vec<String> = h
                    .hvp
                    .iter()
                    .zip(&want)
                    .enumerate()
                    .filter(|(_, (got, w))| !grad_entry_matches(got, w))
                    .map(|(i, (got, w))| format!("entry {i}: got {got:?}, expected {w}"))
                    .collect();
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(bad.join("; "))
                }
            }
            "check" => {
                let (_, bad) = self.fd_disagreements(body)?;
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "AD and finite differences disagree: {}",
                        bad.join("; ")
                    ))
                }
            }
            "check-fails" => {
                let (n, bad) = self.fd_disagreements(body)?;
                if bad.is_empty() {
                    Err(format!(
                        "all {n} entries agree, but this directive expects a disagreement"
                    ))
                } else {
                    Ok(())
                }
            }
            "trap" => {
                let (call, text) = body.split_once("=>").ok_or("missing `=>`")?;
                let (f, args) = self.call(call)?;
                match self.engine.run(f, &args) {
                    Ok(v) => Err(format!("returned {v}, expected a trap")),
                    Err(e) if e.to_string().contains(text.trim()) => Ok(()),
                    Err(e) => Err(format!("trapped with `{e}`, expected `{}`", text.trim())),
                }
            }
            other => Err(format!("unknown directive `{other}`")),
        }
    }
}

#[test]
fn corpus_directives_hold() {
    let (root, paths) = corpus();
    let mut failures = Vec::new();
    let mut checked = 0;
    let top_level = paths
        .iter()
        .filter(|p| p.parent() == Some(&root.join("programs")))
        .count();
    if top_level < 25 {
        failures.push(format!(
            "programs/ has {top_level} programs; the corpus needs at least 25"
        ));
    }
    for path in &paths {
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        let src = match std::fs::read_to_string(path) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{rel}: unreadable: {e}"));
                continue;
            }
        };
        let module = match build(&src, &rel) {
            Ok(m) => m,
            Err(d) => {
                failures.push(format!("{rel}: does not assemble:\n{d}"));
                continue;
            }
        };
        let mut engine = match Engine::new(module) {
            Ok(e) => e,
            Err(e) => {
                failures.push(format!("{rel}: {e}"));
                continue;
            }
        };
        let mut ctx = Ctx {
            engine: &mut engine,
        };
        let found = directives(&src);
        if found.is_empty() {
            failures.push(format!("{rel}: no directives"));
        }
        // Function -> which of grad, check (or check-fails), jvp, hvp it
        // has, and its first line.
        let mut coverage: BTreeMap<u32, ([bool; 4], usize)> = BTreeMap::new();
        for &(line, kind, body) in &found {
            checked += 1;
            if let Err(e) = ctx.directive(kind, body) {
                failures.push(format!("{rel}:{line}: {kind}: {e}"));
            }
            if kind == "trap" {
                continue;
            }
            if let Some(f) = ctx.target(kind, body) {
                let (has, _) = coverage.entry(f.0).or_insert(([false; 4], line));
                has[0] |= kind == "grad";
                has[1] |= kind == "check" || kind == "check-fails";
                has[2] |= kind == "jvp";
                has[3] |= kind == "hvp";
            }
        }
        let hvp_exempt = NO_HVP.contains(&rel.as_str());
        for (f, (mut has, line)) in coverage {
            let func = ctx.engine.module().func(FuncId(f));
            let differentiable = func.ret == RetType::One(Type::F64)
                && func.param_types().iter().any(|t| t.is_differentiable());
            has[3] |= hvp_exempt;
            let missing: Vec<&str> = ["`grad:`", "`check:`", "`jvp:`", "`hvp:`"]
                .into_iter()
                .zip(has)
                .filter(|&(_, h)| !h)
                .map(|(k, _)| k)
                .collect();
            if differentiable && !missing.is_empty() {
                failures.push(format!(
                    "{rel}:{line}: @{} returns f64 from differentiable parameters but has no {} directive",
                    func.name,
                    missing.join(", no ")
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} corpus failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{checked} directives in {} programs", paths.len());
}

/// Together the corpus uses every instruction of the language, in each
/// typed form (`add` on f64 and on i64 are distinct opcodes).
#[test]
fn corpus_uses_every_instruction() {
    let (_, paths) = corpus();
    let mut ops = std::collections::BTreeSet::new();
    for path in &paths {
        let Ok(src) = std::fs::read_to_string(path) else {
            continue;
        };
        // Files that do not assemble are reported by the test above.
        let name = path.display().to_string();
        let Ok(m) = build(&src, &name) else {
            continue;
        };
        for f in &m.funcs {
            for b in &f.blocks {
                if !b.phis.is_empty() {
                    ops.insert("phi".to_string());
                }
                for i in &b.insts {
                    ops.insert(format!("{:?}", i.op));
                }
                ops.insert(
                    match b.term {
                        vm::ir::Term::Jmp(_) => "jmp",
                        vm::ir::Term::Br { .. } => "br",
                        _ => "ret",
                    }
                    .to_string(),
                );
            }
        }
    }
    // Opcodes of the text (the others only lowering and the AD stage
    // produce).
    let user_ops = vm::op::Op::ALL
        .iter()
        .filter(|op| op.facts().origin == vm::op::Origin::User);
    let missing: Vec<String> = user_ops
        .map(|op| format!("{op:?}"))
        .filter(|op| !ops.contains(op))
        .collect();
    let missing_terms: Vec<&str> = ["phi", "jmp", "br", "ret"]
        .into_iter()
        .filter(|t| !ops.contains(*t))
        .collect();
    assert!(
        missing.is_empty() && missing_terms.is_empty(),
        "unused: {missing:?} {missing_terms:?}"
    );
}

/// The expected values are the reference implementation's: its `--check`
/// mode recomputes every run/grad/jvp/hvp/trap directive in Python. Skipped (with a
/// note) only where no `python3` can be started.
#[test]
fn directives_agree_with_the_reference_implementation() {
    let (root, _) = corpus();
    let script = root.join("programs/reference/reference.py");
    let out = match std::process::Command::new("python3")
        .arg(&script)
        .arg("--check")
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("python3 not found: reference values not re-derived");
            return;
        }
        Err(e) => panic!("cannot run {}: {e}", script.display()),
    };
    assert!(
        out.status.success(),
        "{} --check:\n{}{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same bits, nan payloads aside (a nan is a nan).
fn same_bits(a: &Value, b: &Value) -> bool {
    let f = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    match (a, b) {
        (Value::F64(x), Value::F64(y)) => f(*x, *y),
        (Value::Arr(xs), Value::Arr(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| f(*x, *y))
        }
        _ => a == b,
    }
}

/// Where a trap is, as the user reads it: what, in which function and
/// block of the source, at which line (not the running function's
/// registers, which inlining renames). A trap in a forward function names
/// it (`@f.fwd`), in code inlined into one the source function (`@f
/// (inlined into @g.fwd)`): the same place.
fn trap_place(e: &ad::AdError) -> String {
    match e {
        ad::AdError::Trap(t) => {
            let func = t.func.strip_suffix(".fwd").unwrap_or(&t.func);
            format!("{} @{func} {} {:?}", t.kind, t.block, t.loc.line)
        }
        other => other.to_string(),
    }
}

/// Inlining (the default, `vm::inline`) changes no observable result of
/// any corpus call: the primal value bit for bit, a trap's kind, function,
/// block and line, the gradient's value bit for bit and its entries up to
/// rounding (the reverse code may add the same contributions in another
/// order). And it does inline: several programs' functions change.
#[test]
fn inlining_changes_no_result_of_the_corpus() {
    let (_, paths) = corpus();
    let mut failures = Vec::new();
    let (mut compared, mut inlined) = (0, 0);
    for path in &paths {
        let Ok(src) = std::fs::read_to_string(path) else {
            continue;
        };
        // Files that do not assemble are reported by the test above.
        let Ok(module) = assembler::assemble(&src, "x") else {
            continue;
        };
        let (Ok(mut with), Ok(mut without)) = (
            Engine::new(module.clone()),
            Engine::with_inlining(module, &ad::Policy::NONE),
        ) else {
            failures.push(format!("{}: no engine", path.display()));
            continue;
        };
        if with.module() != without.module() {
            inlined += 1;
        }
        for (line, kind, body) in directives(&src) {
            let call = call_text(kind, body);
            let Ok((f, args)) = (Ctx { engine: &mut with }).call(call) else {
                continue;
            };
            let at = format!("{}:{line}", path.display());
            compared += 1;
            match (with.run(f, &args), without.run(f, &args)) {
                (Ok(a), Ok(b)) if same_bits(&a, &b) => {}
                (Err(a), Err(b)) if trap_place(&a) == trap_place(&b) => {}
                (a, b) => failures.push(format!("{at}: run {a:?} inlined, {b:?} not")),
            }
            if with.module().func(f).ret != RetType::One(Type::F64) {
                continue;
            }
            match (with.grad(f, &args), without.grad(f, &args)) {
                (Ok(a), Ok(b)) => {
                    let same = same_bits(&Value::F64(a.value), &Value::F64(b.value))
                        && a.grad.len() == b.grad.len()
                        && a.grad
                            .iter()
                            .zip(&b.grad)
                            .all(|(x, y)| testkit::same_gradient(x, y));
                    if !same {
                        failures.push(format!("{at}: grad {a:?} inlined, {b:?} not"));
                    }
                }
                (Err(a), Err(b)) if trap_place(&a) == trap_place(&b) => {}
                (a, b) => failures.push(format!("{at}: grad {a:?} inlined, {b:?} not")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared > 100, "only {compared} calls compared");
    assert!(inlined >= 5, "only {inlined} programs had a call inlined");
    eprintln!(
        "{compared} calls in {} programs, {inlined} with inlined calls",
        paths.len()
    );
}

/// If-conversion before deriving (`--if-convert`, `vm::ifconv`) changes no
/// gradient and no Hessian-vector product of any corpus call: the value
/// bit for bit, every entry bit for bit but for the sign of a zero (the
/// arm not taken adds an exact zero), a trap at the same place. And it
/// converts: several functions' derived code changes.
#[test]
fn if_conversion_changes_no_derivative_of_the_corpus() {
    let (_, paths) = corpus();
    let mut failures = Vec::new();
    let (mut compared, mut converted) = (0, 0);
    for path in &paths {
        let Ok(src) = std::fs::read_to_string(path) else {
            continue;
        };
        let Ok(module) = assembler::assemble(&src, "x") else {
            continue;
        };
        let (Ok(mut with), Ok(mut without)) = (Engine::new(module.clone()), Engine::new(module))
        else {
            failures.push(format!("{}: no engine", path.display()));
            continue;
        };
        with.set_if_conversion(true);
        let mut differs = std::collections::BTreeSet::new();
        for (line, kind, body) in directives(&src) {
            let at = format!("{}:{line}", path.display());
            let (call, dir) = match kind {
                "hvp" => match split_dir(call_text(kind, body)) {
                    Ok((call, dir)) => (call, Some(dir)),
                    Err(_) => continue,
                },
                _ => (call_text(kind, body), None),
            };
            let Ok((f, args)) = (Ctx { engine: &mut with }).call(call) else {
                continue;
            };
            if with.module().func(f).ret != RetType::One(Type::F64) {
                continue;
            }
            compared += 1;
            if let (Ok(a), Ok(b)) = (with.disasm_ad(f), without.disasm_ad(f))
                && a != b
            {
                differs.insert(f);
            }
            match (with.grad(f, &args), without.grad(f, &args)) {
                (Ok(a), Ok(b)) => {
                    let same = a.value.to_bits() == b.value.to_bits()
                        && a.grad.len() == b.grad.len()
                        && a.grad
                            .iter()
                            .zip(&b.grad)
                            .all(|(x, y)| testkit::same_but_zero_sign(x, y));
                    if !same {
                        failures.push(format!("{at}: grad {a:?} converted, {b:?} not"));
                    }
                }
                (Err(a), Err(b)) if trap_place(&a) == trap_place(&b) => {}
                (a, b) => failures.push(format!("{at}: grad {a:?} converted, {b:?} not")),
            }
            let Some(dir) = dir else { continue };
            let Ok(dir) = direction(dir, &with.module().func(f).param_types()) else {
                continue;
            };
            match (with.hvp(f, &args, &dir), without.hvp(f, &args, &dir)) {
                (Ok(a), Ok(b)) => {
                    let same = a.value.to_bits() == b.value.to_bits()
                        && a.hvp.len() == b.hvp.len()
                        && a.hvp
                            .iter()
                            .zip(&b.hvp)
                            .all(|(x, y)| testkit::same_but_zero_sign(x, y));
                    if !same {
                        failures.push(format!("{at}: hvp {a:?} converted, {b:?} not"));
                    }
                }
                (Err(a), Err(b)) if trap_place(&a) == trap_place(&b) => {}
                (a, b) => failures.push(format!("{at}: hvp {a:?} converted, {b:?} not")),
            }
        }
        converted += differs.len();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared > 100, "only {compared} calls compared");
    assert!(
        converted >= 7,
        "only {converted} functions had a conditional converted"
    );
    eprintln!(
        "{compared} calls in {} programs, {converted} functions with converted conditionals",
        paths.len()
    );
}

/// The jvp and hvp directives fail on a wrong tangent or product and say
/// why on malformed text (no panic): checked on f(x, v, n) = x²·Σv with
/// its derivatives written out by hand.
#[test]
fn jvp_and_hvp_directives_reject_wrong_values_and_bad_text() {
    let src = "fn @f(%x: f64, %v: f64[], %n: i64) -> f64 {
entry:
    %len = alen %v
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %len
    br %c, body, done
body:
    %e = aget %v, %i
    %s2 = add %s, %e
    %i2 = add %i, 1
    jmp head
done:
    %xx = mul %x, %x
    %r = mul %xx, %s
    ret %r
}
";
    let module = assembler::assemble(src, "t.adasm").expect("the test program assembles");
    let mut engine = Engine::new(module).expect("an engine");
    let mut ctx = Ctx {
        engine: &mut engine,
    };
    // x = 2, v = [1, 2] (Σv = 3), direction (dx, dv) = (0.5, [1, -0.25]):
    // value 12; tangent 2x·Σv·dx + x²·Σdv = 6 + 3 = 9;
    // H·dir: ∂x: 2Σv·dx + 2x·Σdv = 3 + 3 = 6, ∂v_k: 2x·dx = 2.
    let call = "@f(2.0, [1.0, 2.0], 7) dir [0.5, [1.0, -0.25], null]";
    let ok = [
        ("jvp", format!("{call} => 12.0 ; 9.0")),
        ("hvp", format!("{call} => 12.0 ; [6.0, [2.0, 2.0], null]")),
    ];
    for (kind, body) in &ok {
        assert_eq!(ctx.directive(kind, body), Ok(()), "{kind}: {body}");
    }
    let wrong = [
        ("jvp", format!("{call} => 12.0 ; 9.001"), "tangent"),
        ("jvp", format!("{call} => 12.5 ; 9.0"), "value"),
        (
            "hvp",
            format!("{call} => 12.0 ; [6.0, [2.0, 2.1], null]"),
            "entry 1",
        ),
        (
            "hvp",
            format!("{call} => 12.0 ; [6.0, [2.0, 2.0]]"),
            "entries expected",
        ),
        ("jvp", "@f(2.0, [1.0, 2.0], 7) => 12.0 ; 9.0".into(), "dir"),
        (
            "jvp",
            "@f(2.0, [1.0, 2.0], 7) dir [0.5] => 12.0 ; 9.0".into(),
            "3 parameters",
        ),
        (
            "hvp",
            "@f(2.0, [1.0, 2.0], 7) dir [0.5, 1.0, null] => 12.0 ; [0, 0, null]".into(),
            "entry 1",
        ),
        (
            "jvp",
            "@f(2.0, [1.0, 2.0], 7) dir [0.5, [1.0], null] => 12.0 ; 9.0".into(),
            "1 element",
        ),
        (
            "hvp",
            "@f(2.0, [1.0, 2.0], 7) dir [0.5, [1.0, 2.0], null] => 12.0".into(),
            "missing",
        ),
        (
            "jvp",
            "@f(2.0, [1.0, 2.0], 7) dir {} => 12.0 ; 9.0".into(),
            "JSON array",
        ),
    ];
    for (kind, body, why) in &wrong {
        match ctx.directive(kind, body) {
            Ok(()) => panic!("{kind}: {body} holds, but it should not"),
            Err(e) => assert!(
                e.contains(why),
                "{kind}: {body}: `{e}` does not say `{why}`"
            ),
        }
    }
}
