//! The `.adl` programs of the corpus (`programs/**/*.adl`, whose directives
//! `repl/tests/it/corpus.rs` checks) and of `tests/programs/`, compiled:
//!
//! * the `.adasm` text `advm disasm --ir` prints for each re-assembles, and
//!   the re-assembled module gives bit-identical values and gradients at
//!   every directive's arguments;
//! * the compiled IR has no trivial phi (Braun et al.'s construction
//!   removes them all) and every value keeps an `.adl` name or none;
//! * each benchmark program's `.adl` twin costs no more bytecode
//!   instructions per call (primal, forward and reverse functions counted
//!   by the VM) than the hand-written `.adasm`.

use ad::Engine;
use assembler::{literals_to_values, parse_call};
use std::path::{Path, PathBuf};
use vm::ir::{FuncId, Module, RetType};
use vm::{Type, Value, Vm};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            walk(&p, ext, out);
        } else if p.extension().is_some_and(|e| e == ext) {
            out.push(p);
        }
    }
}

fn adl_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(&root().join("programs"), "adl", &mut out);
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs"),
        "adl",
        &mut out,
    );
    out
}

/// The calls of a file's `// KIND: @f(ARGS) ...` directives.
fn directive_calls(src: &str) -> Vec<String> {
    src.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("// ")?;
            let (kind, body) = rest.split_once(": ")?;
            let kinds = ["run", "grad", "jvp", "hvp", "check", "check-fails", "trap"];
            if !kinds.contains(&kind) {
                return None;
            }
            let call = body.split_once("=>").map_or(body, |(c, _)| c);
            let call = call.split_once(" dir ").map_or(call, |(c, _)| c);
            Some(call.trim().to_string())
        })
        .collect()
}

fn compile(path: &Path) -> (String, Module) {
    let src = std::fs::read_to_string(path).expect("readable");
    let name = path.display().to_string();
    let m = adl::compile(&src, &name).unwrap_or_else(|d| panic!("{}", d.render()));
    (src, m)
}

fn args_for(m: &Module, call: &str) -> (FuncId, Vec<Value>) {
    let (name, lits) = parse_call(call).expect("directive call parses");
    let f = m.find(&name).unwrap_or_else(|| panic!("no @{name}"));
    let args = literals_to_values(&m.func(f).param_types(), &lits).expect("arguments fit");
    (f, args)
}

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

/// A trap as what went wrong (the texts differ in line numbers and
/// register names by design).
fn problem(e: ad::AdError) -> String {
    match e {
        ad::AdError::Trap(t) => format!("trap {}", t.kind),
        other => format!("error {other}"),
    }
}

fn outcome(e: &mut Engine, f: FuncId, args: &[Value]) -> String {
    let run = match e.run(f, args) {
        Ok(v) => format!("{v:?}"),
        Err(err) => problem(err),
    };
    if e.module().func(f).ret != RetType::One(Type::F64) {
        return run;
    }
    let grad = match e.grad(f, args) {
        Ok(g) => format!("{:x} {:?}", g.value.to_bits(), g.grad),
        Err(err) => problem(err),
    };
    format!("{run} | {grad}")
}

#[test]
fn ir_text_reassembles_with_bit_identical_results() {
    let files = adl_files();
    assert!(files.len() >= 20, "only {} .adl programs", files.len());
    let mut calls_checked = 0;
    for path in files {
        let (src, m) = compile(&path);
        let text = assembler::print_module(&m);
        let again = assembler::assemble(&text, "ir.adasm").unwrap_or_else(|d| {
            panic!(
                "{}: --ir text does not assemble:\n{}\n{text}",
                path.display(),
                d.render()
            )
        });
        let mut a = Engine::new(m.clone()).expect("engine");
        let mut b = Engine::new(again).expect("engine");
        for call in directive_calls(&src) {
            let (f, args) = args_for(&m, &call);
            let (oa, ob) = (outcome(&mut a, f, &args), outcome(&mut b, f, &args));
            // Debug output of f64 is round-trip exact, so equal text is
            // equal bits (a nan prints as NaN whatever its payload).
            assert_eq!(oa, ob, "{}: {call}", path.display());
            if let (Ok(x), Ok(y)) = (a.run(f, &args), b.run(f, &args)) {
                assert!(same_bits(&x, &y), "{}: {call}", path.display());
            }
            calls_checked += 1;
        }
    }
    assert!(calls_checked >= 50, "only {calls_checked} calls compared");
}

#[test]
fn no_trivial_phi_remains_and_names_are_kept() {
    for path in adl_files() {
        let (_, m) = compile(&path);
        for f in &m.funcs {
            for b in &f.blocks {
                for p in &b.phis {
                    let others: std::collections::BTreeSet<_> = p
                        .incoming
                        .iter()
                        .map(|(_, v)| *v)
                        .filter(|v| *v != p.dst)
                        .collect();
                    assert!(
                        others.len() > 1,
                        "{}: trivial phi in @{}",
                        path.display(),
                        f.name
                    );
                    let preds = f.predecessors();
                    let bi = f
                        .blocks
                        .iter()
                        .position(|x| std::ptr::eq(x, b))
                        .unwrap_or(0);
                    assert_eq!(p.incoming.len(), preds[bi].len(), "{}", path.display());
                }
            }
            // A parameter keeps its name.
            for p in &f.params {
                assert!(f.values[p.index()].name.is_some(), "{}", path.display());
            }
        }
    }
}

/// Instructions executed by the primal, the forward and the reverse
/// function of one gradient call.
fn cost(m: Module, call: &str) -> [u64; 3] {
    let (f, args) = args_for(&m, call);
    let mut engine = Engine::new(m).expect("engine");
    engine.run(f, &args).expect("runs");
    let primal = engine.vm_mut().executed();
    let d = engine.derive(f).expect("derives");
    let program = engine.program().clone();
    let mut vm = Vm::default();
    vm.begin(true);
    let raw: Vec<u64> = args
        .iter()
        .map(|a| match a {
            Value::F64(x) => x.to_bits(),
            Value::I64(i) => *i as u64,
            Value::Bool(b) => u64::from(*b),
            Value::Arr(xs) => vm.alloc_array(xs).expect("allocates"),
        })
        .collect();
    vm.call_raw(&program, d.fwd, &raw).expect("forward runs");
    let forward = vm.executed();
    vm.call_raw(&program, d.rev, &[1.0f64.to_bits()])
        .expect("reverse runs");
    [primal, forward, vm.executed()]
}

#[test]
fn benchmark_programs_cost_no_more_than_the_hand_written_ones() {
    let mut files = Vec::new();
    walk(&root().join("programs/bench"), "adl", &mut files);
    assert_eq!(files.len(), 7, "one .adl twin per benchmark program");
    for path in files {
        let (src, m) = compile(&path);
        let twin = path.with_extension("adasm");
        let text = std::fs::read_to_string(&twin).expect("the .adasm twin");
        let hand = assembler::assemble(&text, "twin").expect("assembles");
        let call = directive_calls(&src)
            .into_iter()
            .next()
            .expect("a directive");
        let (ours, theirs) = (cost(m, &call), cost(hand, &call));
        eprintln!("{}: .adl {ours:?}, .adasm {theirs:?}", path.display());
        for (k, what) in ["primal", "forward", "reverse"].iter().enumerate() {
            assert!(
                ours[k] <= theirs[k],
                "{}: the {what} code of the .adl program runs {} instructions, the .adasm {}",
                path.display(),
                ours[k],
                theirs[k]
            );
        }
    }
}

/// `// run: @f(ARGS) => V`, `// grad: @f(ARGS) => V ; [G, ...]` and
/// `// check: @f(ARGS)` directives of `tests/programs/*.adl` (the language
/// features the corpus twins do not show), values worked out by hand.
#[test]
fn feature_programs_hold_their_directives() {
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs"),
        "adl",
        &mut files,
    );
    assert!(files.len() >= 4);
    let mut checked = 0;
    for path in files {
        let (src, m) = compile(&path);
        let mut engine = Engine::new(m.clone()).expect("engine");
        for line in src.lines() {
            let Some((kind, body)) = line.strip_prefix("// ").and_then(|l| l.split_once(": "))
            else {
                continue;
            };
            let what = format!("{}: {line}", path.display());
            match kind {
                "run" => {
                    let (call, want) = body.split_once("=>").expect("=>");
                    let (f, args) = args_for(&m, call.trim());
                    let got = engine
                        .run(f, &args)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let want: f64 = want.trim().parse().expect("a number");
                    assert_eq!(got, Value::F64(want), "{what}");
                }
                "grad" => {
                    let (call, rest) = body.split_once("=>").expect("=>");
                    let (value, grad) = rest.split_once(';').expect(";");
                    let (f, args) = args_for(&m, call.trim());
                    let g = engine
                        .grad(f, &args)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(
                        g.value,
                        value.trim().parse::<f64>().expect("value"),
                        "{what}"
                    );
                    let want: serde_json::Value = serde_json::from_str(grad.trim()).expect("JSON");
                    let got: Vec<serde_json::Value> = g
                        .grad
                        .iter()
                        .map(|e| match e {
                            None => serde_json::Value::Null,
                            Some(Value::F64(x)) => serde_json::json!(x),
                            Some(Value::Arr(xs)) => serde_json::json!(xs),
                            Some(other) => serde_json::json!(other.to_string()),
                        })
                        .collect();
                    assert_eq!(serde_json::Value::Array(got), want, "{what}");
                }
                "check" => {
                    let (f, args) = args_for(&m, body.trim());
                    let g = engine
                        .grad(f, &args)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let verdict = testkit::fd::check(
                        |a| match engine.run(f, a) {
                            Ok(Value::F64(y)) => Some(y),
                            _ => None,
                        },
                        &args,
                        &g.grad,
                    );
                    assert_eq!(verdict, testkit::fd::Verdict::Agree, "{what}");
                }
                _ => continue,
            }
            checked += 1;
        }
    }
    assert!(checked >= 12, "only {checked} directives");
}
