//! Both tiers give the same bits: every call of the corpus's directives
//! (`programs/**/*.adasm`: run, grad, jvp, hvp, trap) and of generated
//! random programs (`testkit::gen`: run, grad, jvp; every other one's
//! gradient derived from if-converted code) runs on an engine with
//! the native tier and on one without, and the results (values,
//! gradients, tangents, Hessian-vector products, traps with their
//! messages and locations) must be identical, floats compared by their
//! bits. The native tier must also have run a good share of the calls (a
//! tier that declined everything would pass the comparison trivially).

use ad::Engine;
use assembler::{literals_to_values, parse_call};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use vm::{Tier, Type, Value};

/// A result with every f64 spelled by its bits.
fn key<T: std::fmt::Debug>(r: &T) -> String {
    let s = format!("{r:?}");
    // Floats are printed by Debug with the shortest round-trip spelling,
    // which tells every two values apart except nans' payloads: compare
    // those by bits through `bits_of` where values are at hand.
    s
}

fn value_bits(v: &Value) -> Vec<u64> {
    match v {
        Value::F64(x) => vec![x.to_bits()],
        Value::I64(i) => vec![*i as u64],
        Value::Bool(b) => vec![u64::from(*b)],
        Value::Arr(xs) => xs.iter().map(|x| x.to_bits()).collect(),
    }
}

fn opt_bits(v: &[Option<Value>]) -> Vec<Vec<u64>> {
    v.iter()
        .map(|o| o.as_ref().map(value_bits).unwrap_or_default())
        .collect()
}

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

fn direction(text: &str, params: &[Type]) -> Option<Vec<Option<Value>>> {
    let Json::Array(entries) = serde_json::from_str::<Json>(text).ok()? else {
        return None;
    };
    entries
        .iter()
        .zip(params)
        .map(|(e, t)| match (e, t) {
            (Json::Null, _) => Some(None),
            (Json::Number(n), Type::F64) => n.as_f64().map(|x| Some(Value::F64(x))),
            (Json::Array(xs), Type::Arr) => xs
                .iter()
                .map(|x| x.as_f64())
                .collect::<Option<Vec<f64>>>()
                .map(|v| Some(Value::Arr(v))),
            _ => None,
        })
        .collect()
}

/// Two engines for one source: interpreted and native.
struct Pair {
    interp: Engine,
    jit: Engine,
    native_calls: usize,
    calls: usize,
}

impl Pair {
    fn new(src: &str, name: &str) -> Option<Pair> {
        let module = assembler::assemble(src, name).ok()?;
        let interp = Engine::new(module.clone()).ok()?;
        let mut jit = Engine::new(module).ok()?;
        jit::install_eager(jit.vm_mut());
        Some(Pair {
            interp,
            jit,
            native_calls: 0,
            calls: 0,
        })
    }

    fn set_fuel(&mut self, fuel: u64) {
        self.interp.vm_mut().limits_mut().fuel = Some(fuel);
        self.jit.vm_mut().limits_mut().fuel = Some(fuel);
    }

    /// Run `op` on both engines and compare what it returns.
    fn same<R: std::fmt::Debug>(
        &mut self,
        what: &str,
        mut op: impl FnMut(&mut Engine) -> R,
        bits: impl Fn(&R) -> Vec<Vec<u64>>,
    ) -> Result<(), String> {
        let a = op(&mut self.interp);
        let b = op(&mut self.jit);
        self.calls += 1;
        if self.jit.vm_mut().last_tier() == Tier::Native {
            self.native_calls += 1;
        }
        if key(&a) != key(&b) || bits(&a) != bits(&b) {
            return Err(format!("{what}:\n  interp {a:?}\n  jit    {b:?}"));
        }
        Ok(())
    }
}

fn corpus_directive(p: &mut Pair, kind: &str, body: &str) -> Result<(), String> {
    let call = body.split_once("=>").map_or(body, |(c, _)| c);
    let (call, dir) = if kind == "jvp" || kind == "hvp" {
        let close = call.rfind(')').ok_or("no call")?;
        let (head, tail) = call.split_at(close + 1);
        (head, tail.trim().strip_prefix("dir ").map(str::trim))
    } else {
        (call, None)
    };
    let (name, lits) = parse_call(call.trim())?;
    let Some(f) = p.interp.find(&name) else {
        return Err(format!("no function {name}"));
    };
    let params: Vec<Type> = p.interp.module().func(f).param_types();
    let args = literals_to_values(&params, &lits)?;
    let what = format!("{kind}: {body}");
    match kind {
        "run" | "trap" => p.same(
            &what,
            |e| e.run(f, &args),
            |r| match r {
                Ok(v) => vec![value_bits(v)],
                Err(_) => Vec::new(),
            },
        ),
        "grad" | "check" | "check-fails" => p.same(
            &what,
            |e| e.grad(f, &args),
            |r| match r {
                Ok(g) => {
                    let mut v = opt_bits(&g.grad);
                    v.push(vec![g.value.to_bits()]);
                    v
                }
                Err(_) => Vec::new(),
            },
        ),
        "jvp" | "hvp" => {
            let Some(d) = dir.and_then(|d| direction(d, &params)) else {
                return Ok(());
            };
            if kind == "jvp" {
                p.same(
                    &what,
                    |e| e.jvp(f, &args, &d),
                    |r| match r {
                        Ok(t) => {
                            let mut v = opt_bits(&t.arg_tangents);
                            v.push(value_bits(&t.value));
                            v.push(t.tangent.as_ref().map(value_bits).unwrap_or_default());
                            v
                        }
                        Err(_) => Vec::new(),
                    },
                )
            } else {
                p.same(
                    &what,
                    |e| e.hvp(f, &args, &d),
                    |r| match r {
                        Ok(h) => {
                            let mut v = opt_bits(&h.grad);
                            v.extend(opt_bits(&h.hvp));
                            v.push(vec![h.value.to_bits()]);
                            v
                        }
                        Err(_) => Vec::new(),
                    },
                )
            }
        }
        _ => Ok(()),
    }
}

#[test]
fn corpus_runs_the_same_in_both_tiers() {
    let root = testkit::workspace_root();
    let mut paths = Vec::new();
    files(&root.join("programs"), &mut paths);
    assert!(paths.len() >= 25, "corpus not found");
    let (mut native, mut calls, mut failures) = (0, 0, Vec::new());
    for path in &paths {
        let src = std::fs::read_to_string(path).expect("readable");
        let Some(mut pair) = Pair::new(&src, &path.display().to_string()) else {
            continue;
        };
        pair.set_fuel(50_000_000);
        for line in src.lines() {
            let Some(rest) = line.trim().strip_prefix(';') else {
                continue;
            };
            let Some((kind, body)) = rest.trim().split_once(':') else {
                continue;
            };
            if !["run", "grad", "jvp", "hvp", "check", "check-fails", "trap"].contains(&kind.trim())
            {
                continue;
            }
            // Twice: the second call runs cached code.
            for _ in 0..2 {
                if let Err(e) = corpus_directive(&mut pair, kind.trim(), body.trim()) {
                    failures.push(format!("{}: {e}", path.display()));
                }
            }
        }
        native += pair.native_calls;
        calls += pair.calls;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("corpus: {native} of {calls} calls ran natively");
    assert!(calls > 100, "{calls} calls");
    // Recursive programs run interpreted; everything else natively.
    assert!(
        native * 10 >= calls * 7,
        "only {native} of {calls} calls ran natively"
    );
}

#[test]
fn random_programs_run_the_same_in_both_tiers() {
    let cases = testkit::env_u64("ADVM_PROP_CASES", 150);
    let first = testkit::env_u64("ADVM_PROP_SEED", 1);
    let cfg = testkit::gen::Config::default();
    let (mut native, mut calls, mut failures) = (0, 0, Vec::new());
    for seed in first..first + cases {
        let g = testkit::gen::program(seed, &cfg);
        let Some(mut pair) = Pair::new(&g.source, "gen.adasm") else {
            panic!("seed {seed}: bad program\n{}", g.source);
        };
        pair.set_fuel(10_000_000);
        // Every other program's gradient derived from if-converted code
        // (`Engine::set_if_conversion`), the same in both engines.
        let convert = seed % 2 == 1;
        pair.interp.set_if_conversion(convert);
        pair.jit.set_if_conversion(convert);
        let f = pair.interp.find(&g.entry).expect("entry");
        let args = g.args.clone();
        let dir: Vec<Option<Value>> = args
            .iter()
            .map(|a| match a {
                Value::F64(_) => Some(Value::F64(0.75)),
                Value::Arr(xs) => Some(Value::Arr(vec![0.5; xs.len()])),
                _ => None,
            })
            .collect();
        let r = [
            pair.same("run", |e| e.run(f, &args), |_| Vec::new()),
            pair.same(
                "grad",
                |e| e.grad(f, &args),
                |r| match r {
                    Ok(g) => opt_bits(&g.grad),
                    Err(_) => Vec::new(),
                },
            ),
            pair.same(
                "jvp",
                |e| e.jvp(f, &args, &dir),
                |r| match r {
                    Ok(t) => vec![t.tangent.as_ref().map(value_bits).unwrap_or_default()],
                    Err(_) => Vec::new(),
                },
            ),
        ];
        for e in r.into_iter().filter_map(Result::err) {
            failures.push(format!("seed {seed}: {e}\n{}", g.source));
        }
        native += pair.native_calls;
        calls += pair.calls;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("random programs: {native} of {calls} calls ran natively");
    assert!(
        native * 4 >= calls,
        "only {native} of {calls} calls ran natively"
    );
}

/// The fused tangent opcodes (`tmul.z` in powloop's tangent loop and HVP
/// loops, `add.mul.z` and `acc.mul` in a dot product's and a branch's
/// tangent) give the same bits in both tiers, also on the strong-zero
/// inputs: a zero direction against an infinite or nan factor, and
/// overflowing products. (One nan source per input: where two nans meet
/// in a sum, which one's payload survives depends on the operand order
/// the machine code gives the addition, in both tiers' primal code alike.)
#[test]
fn fused_tangent_opcodes_run_the_same_in_both_tiers() {
    let src = "fn @pow(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %r = phi [entry: 1.0], [body: %r2]
    %k = phi [entry: %n], [body: %k2]
    %c = gt %k, 0
    br %c, body, done
body:
    %r2 = mul %r, %x
    %k2 = sub %k, 1
    jmp head
done:
    ret %r
}
fn @dot(%a: f64[], %b: f64[]) -> f64 {
entry:
    %n = alen %a
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %a, %i
    %y = aget %b, %i
    %p = mul %x, %y
    %s2 = add %s, %p
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}";
    let src = format!(
        "{src}
fn @runmax(%v: f64[]) -> f64 {{
entry:
    %n = alen %v
    %m0 = aget %v, 0
    jmp head
head:
    %i = phi [entry: 1], [body: %i2]
    %m = phi [entry: %m0], [body: %m2]
    %c = lt %i, %n
    br %c, body, done
body:
    %e = aget %v, %i
    %m2 = max %m, %e
    %i2 = add %i, 1
    jmp head
done:
    ret %m
}}"
    );
    let mut p = Pair::new(&src, "fused.adasm").expect("assembles");
    let runmax = p.interp.find("runmax").expect("runmax");
    let pow = p.interp.find("pow").expect("pow");
    let dot = p.interp.find("dot").expect("dot");
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let tangent_bits = |r: &Result<ad::Tangent, ad::AdError>| match r {
        Ok(t) => vec![
            value_bits(&t.value),
            t.tangent.as_ref().map(value_bits).unwrap_or_default(),
        ],
        Err(_) => Vec::new(),
    };
    let hvp_bits = |r: &Result<ad::Hvp, ad::AdError>| match r {
        Ok(h) => {
            let mut v = opt_bits(&h.grad);
            v.extend(opt_bits(&h.hvp));
            v.push(vec![h.value.to_bits()]);
            v
        }
        Err(_) => Vec::new(),
    };
    for (x, dx) in [
        (1.5, 1.0),
        (inf, 0.0),
        (nan, 0.0),
        (0.0, inf),
        (1e200, 1e200),
        (-2.0, 0.5),
    ] {
        let args = [Value::F64(x), Value::I64(5)];
        let dir = [Some(Value::F64(dx)), None];
        let what = format!("pow({x}, 5) along {dx}");
        p.same(&what, |e| e.jvp(pow, &args, &dir), tangent_bits)
            .unwrap_or_else(|e| panic!("{e}"));
        p.same(&what, |e| e.hvp(pow, &args, &dir), hvp_bits)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let arrays = [
        (
            vec![1.0, 2.0, -3.0],
            vec![0.5, 0.25, 4.0],
            vec![1.0, 1.0, 1.0],
        ),
        (
            vec![inf, 2.0, 1.0],
            vec![0.0, 1e308, 0.0],
            vec![0.0, 10.0, 0.0],
        ),
        (vec![nan, 1.0], vec![0.0, 2.0], vec![0.0, 1.0]),
        (
            vec![0.1, 0.2, 0.3],
            vec![inf, -inf, 1.0],
            vec![0.0, 0.0, 1.0],
        ),
    ];
    for (a, b, d) in arrays {
        let args = [Value::Arr(a.clone()), Value::Arr(b.clone())];
        let dir = [Some(Value::Arr(d.clone())), Some(Value::Arr(d.clone()))];
        let what = format!("dot({a:?}, {b:?}) along {d:?}");
        p.same(&what, |e| e.jvp(dot, &args, &dir), tangent_bits)
            .unwrap_or_else(|e| panic!("{e}"));
        p.same(&what, |e| e.hvp(dot, &args, &dir), hvp_bits)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let vectors = [
        (vec![1.0, 3.0, 2.0, 3.0], vec![0.5, 1.5, 2.5, 3.5]),
        (vec![-0.0, 0.0, f64::NAN, 1.0], vec![1.0, 2.0, 3.0, 4.0]),
        (vec![f64::NAN, 1.0, 2.0], vec![1.0, 2.0, 3.0]),
    ];
    for (v, d) in vectors {
        let args = [Value::Arr(v.clone())];
        let dir = [Some(Value::Arr(d.clone()))];
        let what = format!("runmax({v:?}) along {d:?}");
        p.same(&what, |e| e.jvp(runmax, &args, &dir), tangent_bits)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(p.native_calls > 0, "the native tier ran none of them");
}

/// `div` and `rem` by a constant power of two (or its negation) compile
/// to shifts (no machine division); the results are the interpreter's
/// (`wrapping_div`, `wrapping_rem`) at every power from 2 to 2^62, around
/// each one's multiples, at both ends of `i64` and at zero; other
/// constants (3, 1, -1, 0 and `i64::MIN`) keep the division, and its
/// traps.
#[test]
fn division_by_constant_powers_of_two_matches_the_interpreter() {
    let mut divisors: Vec<i64> = Vec::new();
    for k in 1..=62 {
        divisors.push(1i64 << k);
        divisors.push(-(1i64 << k));
    }
    divisors.extend([3, -3, 1, -1, 0, i64::MIN, i64::MAX]);
    let mut src = String::new();
    for (n, c) in divisors.iter().enumerate() {
        src.push_str(&format!(
            "fn @d{n}(%a: i64) -> i64 {{\nentry:\n    %q = div %a, {c}\n    ret %q\n}}\n\
             fn @m{n}(%a: i64) -> i64 {{\nentry:\n    %r = rem %a, {c}\n    ret %r\n}}\n"
        ));
    }
    let module = assembler::assemble(&src, "divisors").unwrap_or_else(|d| panic!("{d}"));
    let mut interp = Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
    let mut native = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    jit::install_eager(native.vm_mut());
    let mut rng = testkit::gen::Rng::new(0xd17);
    for (n, c) in divisors.iter().enumerate() {
        let mut xs: Vec<i64> = vec![i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
        for m in [1i64, 2, 3, 1000] {
            let base = c.wrapping_mul(m);
            for d in -2..=2 {
                xs.push(base.wrapping_add(d));
                xs.push(base.wrapping_neg().wrapping_add(d));
            }
        }
        for _ in 0..50 {
            xs.push(rng.next_u64() as i64);
        }
        for f in [format!("d{n}"), format!("m{n}")] {
            let fi = interp.find(&f).expect("exists");
            let fn_ = native.find(&f).expect("exists");
            for &x in &xs {
                let a = interp.run(fi, &[Value::I64(x)]);
                let b = native.run(fn_, &[Value::I64(x)]);
                assert_eq!(native.vm_mut().last_tier(), Tier::Native);
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "@{f} ({c}) at {x}");
            }
        }
    }
}

/// A strong-zero product or quotient by a constant is the plain operation
/// only where the constant is finite and nonzero (`T::finite_nonzero`):
/// by a constant zero, an infinite or nan cotangent still gives zero, as
/// in the interpreter. `sqrt(x·0)` has an infinite cotangent at the
/// product, times the constant 0; `(x/0)·0` a zero cotangent at the
/// quotient, divided by the constant 0; `(x·inf)·0` a zero one times the
/// constant infinity; `sqrt(x·2)` at 0 an infinite one times 2, which
/// stays infinite.
#[test]
fn strong_zero_products_by_constants_match_the_interpreter() {
    let src = "
fn @mul0(%x: f64) -> f64 {
entry:
    %y = mul %x, 0.0
    %z = sqrt %y
    ret %z
}

fn @div0(%x: f64) -> f64 {
entry:
    %y = div %x, 0.0
    %z = mul %y, 0.0
    ret %z
}

fn @mulinf(%x: f64) -> f64 {
entry:
    %y = mul %x, inf
    %z = mul %y, 0.0
    ret %z
}

fn @mul2(%x: f64) -> f64 {
entry:
    %y = mul %x, 2.0
    %z = sqrt %y
    ret %z
}
";
    let module = assembler::assemble(src, "zeros").unwrap_or_else(|d| panic!("{d}"));
    let mut interp = Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
    let mut native = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    jit::install_eager(native.vm_mut());
    for (name, x, want) in [
        ("mul0", 1.0, 0.0),
        ("div0", 1.0, 0.0),
        ("mulinf", 1.0, 0.0),
        ("mul2", 0.0, f64::INFINITY),
    ] {
        let f = interp.find(name).expect("exists");
        let args = [Value::F64(x)];
        let a = interp.grad(f, &args).expect("differentiates");
        let b = native.grad(f, &args).expect("differentiates");
        assert_eq!(native.vm_mut().last_tier(), Tier::Native, "{name}");
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}");
        let g = match &b.grad[0] {
            Some(Value::F64(g)) => *g,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(g.to_bits(), want.to_bits(), "{name}: {g}");
    }
}
