//! The program corpus: every `.adasm` file under `programs/` (except
//! `programs/reference/`) carries its expectations in comment directives,
//! checked here. Adding a file adds a test.
//!
//! ```text
//! ; run: @f(ARGS) => EXPECTED          value (number, bool, array, inf, nan)
//! ; grad: @f(ARGS) => VALUE ; [G, ...] value and gradient (JSON; null for
//!                                      i64/bool parameters, "_" to skip)
//! ; check: @f(ARGS)                    AD agrees with finite differences
//! ; trap: @f(ARGS) => TEXT             the call traps, message contains TEXT
//! ```
//!
//! Expected values come from an independent implementation
//! (`programs/reference/reference.py`), never from advm.

use ad::Engine;
use assembler::{literals_to_values, parse_call, Literal};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use vm::{Type, Value};

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
        } else if p.extension().is_some_and(|e| e == "adasm") {
            out.push(p);
        }
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    a == b || (a - b).abs() <= tol * 1f64.max(a.abs()).max(b.abs())
}

/// Parse `EXPECTED` as one literal.
fn literal(text: &str) -> Result<Literal, String> {
    let (_, mut lits) = parse_call(&format!("@x({text})"))?;
    if lits.len() != 1 {
        return Err(format!("expected one value, found `{text}`"));
    }
    Ok(lits.remove(0))
}

fn matches_literal(v: &Value, lit: &Literal) -> bool {
    match (v, lit) {
        (Value::F64(x), Literal::Num { value, .. }) => close(*x, *value, 1e-12),
        (
            Value::I64(i),
            Literal::Num {
                text, is_int: true, ..
            },
        ) => text.parse::<i64>().ok() == Some(*i),
        (Value::Bool(b), Literal::Bool(e)) => b == e,
        (Value::Arr(xs), Literal::Array(es)) => {
            xs.len() == es.len() && xs.iter().zip(es).all(|(x, e)| close(*x, *e, 1e-12))
        }
        _ => false,
    }
}

fn json_close(got: &Option<Value>, want: &Json) -> bool {
    match (got, want) {
        (_, Json::String(s)) if s == "_" => true,
        (None, Json::Null) => true,
        (Some(Value::F64(x)), Json::Number(n)) => n.as_f64().is_some_and(|n| close(*x, n, 1e-9)),
        (Some(Value::Arr(xs)), Json::Array(ns)) => {
            xs.len() == ns.len()
                && xs
                    .iter()
                    .zip(ns)
                    .all(|(x, n)| n.as_f64().is_some_and(|n| close(*x, n, 1e-9)))
        }
        _ => false,
    }
}

struct Ctx<'a> {
    engine: &'a mut Engine,
}

impl Ctx<'_> {
    fn call(&self, text: &str) -> Result<(vm::ir::FuncId, Vec<Value>), String> {
        let (name, lits) = parse_call(text.trim())?;
        let f = self
            .engine
            .find(&name)
            .ok_or(format!("no function @{name}"))?;
        let params: Vec<Type> = self.engine.module().func(f).param_types();
        Ok((f, literals_to_values(&params, &lits)?))
    }

    fn directive(&mut self, kind: &str, body: &str) -> Result<(), String> {
        match kind {
            "run" => {
                let (call, expect) = body.split_once("=>").ok_or("missing `=>`")?;
                let (f, args) = self.call(call)?;
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
                for (i, (got, w)) in g.grad.iter().zip(&want).enumerate() {
                    if !json_close(got, w) {
                        return Err(format!("gradient entry {i}: got {got:?}, expected {w}"));
                    }
                }
                Ok(())
            }
            "check" => {
                let (f, args) = self.call(body)?;
                let g = self.engine.grad(f, &args).map_err(|e| e.to_string())?;
                let engine = &mut *self.engine;
                let verdict = testkit::fd::check(
                    |a| match engine.run(f, a) {
                        Ok(Value::F64(y)) => Some(y),
                        _ => None,
                    },
                    &args,
                    &g.grad,
                );
                match verdict {
                    testkit::fd::Verdict::Agree => Ok(()),
                    other => Err(format!("{other:?}")),
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
fn corpus() {
    let root = testkit::workspace_root();
    let mut paths = Vec::new();
    files(&root.join("programs"), &mut paths);
    assert!(
        paths.len() >= 12,
        "the corpus has only {} programs",
        paths.len()
    );
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in &paths {
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        let src = std::fs::read_to_string(path).expect("readable");
        let module = match assembler::assemble(&src, &rel) {
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
        let mut found = 0;
        for (i, line) in src.lines().enumerate() {
            let Some(rest) = line.strip_prefix("; ") else {
                continue;
            };
            let Some((kind, body)) = rest.split_once(": ") else {
                continue;
            };
            if !matches!(kind, "run" | "grad" | "check" | "trap") {
                continue;
            }
            found += 1;
            if let Err(e) = ctx.directive(kind, body) {
                failures.push(format!("{rel}:{}: {kind}: {e}", i + 1));
            }
        }
        if found == 0 {
            failures.push(format!("{rel}: no directives"));
        }
        checked += found;
    }
    assert!(
        failures.is_empty(),
        "{} corpus failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{checked} directives in {} programs", paths.len());
}

/// Together the corpus uses every instruction of the language.
#[test]
fn corpus_uses_every_instruction() {
    let root = testkit::workspace_root();
    let mut paths = Vec::new();
    files(&root.join("programs"), &mut paths);
    let mut ops = std::collections::BTreeSet::new();
    for path in &paths {
        let src = std::fs::read_to_string(path).expect("readable");
        let Ok(m) = assembler::assemble(&src, "x") else {
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
    let user_ops = vm::op::Op::ALL.iter().filter(|op| {
        !matches!(
            op,
            vm::op::Op::CallAcc
                | vm::op::Op::Ret
                | vm::op::Op::RetN
                | vm::op::Op::Jmp
                | vm::op::Op::JmpIf
                | vm::op::Op::JmpIfNot
                | vm::op::Op::JmpCmpI
                | vm::op::Op::JmpCmpF
                | vm::op::Op::BlkPush
                | vm::op::Op::BlkPop
                | vm::op::Op::CommsPush
                | vm::op::Op::CommsPop
                | vm::op::Op::Acc
                | vm::op::Op::AccNeg
                | vm::op::Op::AccMul
                | vm::op::Op::Zero
                | vm::op::Op::Take
                | vm::op::Op::ShadowAcc
                | vm::op::Op::ShadowTake
        )
    });
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
