//! Differential testing: the VM (`Engine::run`: lowering, verifier,
//! register interpreter) against the reference evaluator
//! (`testkit::refeval`, a direct walk of the SSA IR written from the
//! contract), bit for bit on values and by trap class on traps.
//!
//! Two families of programs:
//! * `testkit::gen` (default `Config`): smooth f64 programs with branches,
//!   loops, early returns, calls, recursion and arrays;
//! * `intgen` (`testkit::intgen`, shared with the fuzz targets):
//!   integer-heavy programs with wrapping arithmetic, `div`/`rem` (by zero
//!   too), `min`/`max`, `select` on i64, `ftoi` of nan/inf/huge values,
//!   arrays of data-dependent length and index, recursion past the depth
//!   limit and data-dependent loops under fuel; many of them trap.
//!
//! `ADVM_DIFF_CASES` sets the number of programs of each family (default
//! 300) and `ADVM_DIFF_SEED` the first seed; a failure prints its family and
//! seed, so `ADVM_DIFF_SEED=<seed> ADVM_DIFF_CASES=1 cargo test -p advm-ad --test
//! differential` reproduces it.

use testkit::checks;
use testkit::intgen;

use ad::Engine;
use checks::Outcome;
use std::collections::BTreeMap;
use testkit::refeval::{self, RefLimits, RefTrapKind};
use vm::Value;

#[derive(Default)]
struct Tally {
    same_value: u64,
    inconclusive: u64,
    traps: BTreeMap<&'static str, u64>,
}

impl Tally {
    fn add(&mut self, o: Outcome) {
        match o {
            Outcome::SameValue => self.same_value += 1,
            Outcome::SameTrap(c) => *self.traps.entry(c).or_default() += 1,
            Outcome::Inconclusive => self.inconclusive += 1,
            Outcome::Mismatch(m) => panic!("unreported mismatch: {m}"),
        }
    }
}

/// Run `check` on every seed of the configured range, collecting panics
/// (with the seed) rather than stopping at the first.
fn each_seed(family: &str, mut check: impl FnMut(u64) -> Outcome) -> Tally {
    let cases = testkit::env_u64("ADVM_DIFF_CASES", 300);
    let first = testkit::env_u64("ADVM_DIFF_SEED", 1);
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    for seed in first..first + cases {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(seed))) {
            Ok(o) => tally.add(o),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{family} seed {seed}: {msg}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} {family} programs failed (reproduce with ADVM_DIFF_SEED=<seed> ADVM_DIFF_CASES=1):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!(
        "{family}: {cases} programs: {} same value, traps {:?}, {} inconclusive (fuel)",
        tally.same_value, tally.traps, tally.inconclusive
    );
    tally
}

#[test]
fn vm_matches_reference_on_generated_programs() {
    let cfg = testkit::gen::Config::default();
    let tally = each_seed("gen", |seed| {
        let g = testkit::gen::program(seed, &cfg);
        checks::differential(
            &g.source,
            &g.entry,
            &g.args,
            seed,
            &format!("gen seed {seed}"),
        )
    });
    // These programs are total on their arguments: nearly all must compare.
    let cases = testkit::env_u64("ADVM_DIFF_CASES", 300);
    assert!(
        tally.same_value * 10 >= cases * 9,
        "too few values compared"
    );
}

#[test]
fn vm_matches_reference_on_integer_programs() {
    let tally = each_seed("intgen", |seed| {
        let g = intgen::program(seed);
        checks::differential(
            &g.source,
            &g.entry,
            &g.args,
            seed,
            &format!("intgen seed {seed}"),
        )
    });
    // Both outcomes must be well represented, or the family tests little.
    let cases = testkit::env_u64("ADVM_DIFF_CASES", 300);
    let trapped: u64 = tally.traps.values().sum();
    if cases >= 100 {
        assert!(
            tally.same_value * 4 >= cases,
            "too few values: {}",
            tally.same_value
        );
        assert!(trapped * 10 >= cases, "too few traps: {trapped}");
    }
}

/// Hand-written edge cases, each against the reference and the contract.
#[test]
fn edge_cases_match_reference_and_contract() {
    let src = "
fn @divmin(%a: i64, %b: i64) -> i64 {
entry:
    %q = div %a, %b
    ret %q
}
fn @remmin(%a: i64, %b: i64) -> i64 {
entry:
    %q = rem %a, %b
    ret %q
}
fn @mulwrap(%a: i64) -> i64 {
entry:
    %q = mul %a, %a
    ret %q
}
fn @negmin(%a: i64) -> i64 {
entry:
    %q = neg %a
    ret %q
}
fn @conv(%x: f64) -> i64 {
entry:
    %q = ftoi %x
    ret %q
}
fn @minf(%a: f64, %b: f64) -> f64 {
entry:
    %q = min %a, %b
    ret %q
}
fn @maxf(%a: f64, %b: f64) -> f64 {
entry:
    %q = max %a, %b
    ret %q
}
fn @fdiv(%a: f64, %b: f64) -> f64 {
entry:
    %q = div %a, %b
    ret %q
}
fn @mk(%n: i64) -> f64[] {
entry:
    %a = anew %n
    ret %a
}
fn @get(%v: f64[], %i: i64) -> f64 {
entry:
    %x = aget %v, %i
    ret %x
}
fn @deep(%n: i64) -> i64 {
entry:
    %z = le %n, 0
    br %z, base, step
base:
    ret 0
step:
    %m = sub %n, 1
    %r = call @deep(%m)
    %s = add %r, 1
    ret %s
}
";
    let module = assembler::assemble(src, "edge.adasm").expect("assembles");
    // Without inlining: the depth limit counts calls as the reference
    // does (inlined levels take no frame).
    let mut engine = Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
    engine.vm_mut().limits_mut().max_call_depth = 50;
    engine.vm_mut().limits_mut().max_array_len = 1000;
    let rl = RefLimits {
        max_depth: 50,
        max_array: 1000,
        ..RefLimits::default()
    };
    let (i, f) = (Value::I64, Value::F64);
    let cases: Vec<(&str, Vec<Value>, Result<Value, &str>)> = vec![
        ("divmin", vec![i(i64::MIN), i(-1)], Ok(i(i64::MIN))),
        ("divmin", vec![i(-7), i(2)], Ok(i(-3))),
        ("divmin", vec![i(5), i(0)], Err("div-by-zero")),
        ("remmin", vec![i(i64::MIN), i(-1)], Ok(i(0))),
        ("remmin", vec![i(-7), i(3)], Ok(i(-1))),
        ("remmin", vec![i(5), i(0)], Err("rem-by-zero")),
        ("mulwrap", vec![i(1 << 32)], Ok(i(0))),
        ("mulwrap", vec![i(i64::MAX)], Ok(i(1))),
        ("negmin", vec![i(i64::MIN)], Ok(i(i64::MIN))),
        ("conv", vec![f(-2.9)], Ok(i(-2))),
        (
            "conv",
            vec![f(-9_223_372_036_854_775_808.0)],
            Ok(i(i64::MIN)),
        ),
        (
            "conv",
            vec![f(9_223_372_036_854_775_808.0)],
            Err("ftoi-invalid"),
        ),
        ("conv", vec![f(f64::NAN)], Err("ftoi-invalid")),
        ("conv", vec![f(f64::NEG_INFINITY)], Err("ftoi-invalid")),
        // Ties go to the first operand: visible on signed zeros.
        ("minf", vec![f(0.0), f(-0.0)], Ok(f(0.0))),
        ("minf", vec![f(-0.0), f(0.0)], Ok(f(-0.0))),
        ("maxf", vec![f(-0.0), f(0.0)], Ok(f(-0.0))),
        ("minf", vec![f(1.0), f(f64::NAN)], Ok(f(1.0))),
        ("maxf", vec![f(f64::NAN), f(1.0)], Ok(f(f64::NAN))),
        ("fdiv", vec![f(1.0), f(0.0)], Ok(f(f64::INFINITY))),
        ("fdiv", vec![f(-1.0), f(0.0)], Ok(f(f64::NEG_INFINITY))),
        ("fdiv", vec![f(0.0), f(0.0)], Ok(f(f64::NAN))),
        ("mk", vec![i(2)], Ok(Value::Arr(vec![0.0, 0.0]))),
        ("mk", vec![i(-1)], Err("negative-length")),
        ("mk", vec![i(1001)], Err("array-too-large")),
        (
            "get",
            vec![Value::Arr(vec![1.0]), i(1)],
            Err("out-of-bounds"),
        ),
        (
            "get",
            vec![Value::Arr(vec![1.0]), i(-1)],
            Err("out-of-bounds"),
        ),
        (
            "get",
            vec![Value::Arr(vec![1.0]), i(i64::MIN)],
            Err("out-of-bounds"),
        ),
        ("deep", vec![i(48)], Ok(i(48))),
        ("deep", vec![i(49)], Ok(i(49))),
        ("deep", vec![i(50)], Err("call-depth")),
    ];
    for (name, args, want) in cases {
        let fid = engine.find(name).expect("defined");
        let got = engine.run(fid, &args);
        let reference = refeval::eval(&module, fid, &args, &rl);
        match (&want, &got, &reference) {
            (Ok(w), Ok(g), Ok(r)) => {
                assert!(
                    refeval::same_value(w, g),
                    "@{name}{args:?}: VM {g:?}, want {w:?}"
                );
                assert!(
                    refeval::same_value(w, r),
                    "@{name}{args:?}: reference {r:?}, want {w:?}"
                );
            }
            (Err(class), Err(ad::AdError::Trap(t)), Err(r)) => {
                assert_eq!(refeval::vm_class(&t.kind), *class, "@{name}{args:?}: {t}");
                assert_eq!(r.kind.class(), *class, "@{name}{args:?}: {r}");
            }
            _ => panic!("@{name}{args:?}: want {want:?}, VM {got:?}, reference {reference:?}"),
        }
    }
}

/// The reference evaluator refuses what it does not model instead of
/// guessing.
#[test]
fn reference_rejects_bad_arguments() {
    let module = assembler::assemble(
        "fn @f(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n",
        "f.adasm",
    )
    .expect("assembles");
    let f = module.find("f").expect("defined");
    let r = refeval::eval(&module, f, &[Value::I64(1)], &RefLimits::default());
    assert!(matches!(r, Err(t) if matches!(t.kind, RefTrapKind::BadArgs(_))));
    let r = refeval::eval(&module, f, &[], &RefLimits::default());
    assert!(matches!(r, Err(t) if matches!(t.kind, RefTrapKind::BadArgs(_))));
}
