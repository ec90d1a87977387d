//! Which calls the tier takes (`jit::SMALL_CALL`): a call of a small
//! loop-free function runs interpreted under the default tier, a call of a
//! function with a loop (or one reaching a loop through calls) runs
//! compiled, and every result is the interpreter's, bit for bit, and the
//! eager tier's (which compiles the small calls too).

use crate::three_calls::{self, Kind};
use ad::Engine;
use jit::Decline;
use vm::{Tier, Value};

const SRC: &str = "
fn @sincos(%x: f64) -> f64 {
entry:
    %c = cos %x
    %s = sin %c
    ret %s
}

fn @pow(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %r = phi [entry: 1.0], [body: %r2]
    %k = phi [entry: %n],  [body: %k2]
    %c = gt %k, 0
    br %c, body, done
body:
    %r2 = mul %r, %x
    %k2 = sub %k, 1
    jmp head
done:
    ret %r
}

fn @outer(%x: f64) -> f64 {
entry:
    %y = sin %x
    %z = call @pow(%y, 3)
    ret %z
}
";

fn engine(kind: Kind) -> Engine {
    three_calls::engine(SRC, kind, None)
}

/// Value, gradient and hvp of `f` at `args` (as bits, via `Debug`), each
/// of which succeeds, and the tier of the primal call, of the gradient's
/// last call and of the hvp's last call.
fn outcome(kind: Kind, f: &str, args: &[Value]) -> (String, [Tier; 3]) {
    let (out, tiers) = three_calls::outcome(&mut engine(kind), f, args);
    assert!(!out.contains("Err("), "@{f}: {out}");
    (out, tiers)
}

#[test]
fn a_small_loop_free_function_runs_interpreted_with_the_same_bits() {
    let args = [Value::F64(0.9)];
    let (interp, _) = outcome(Kind::Interp, "sincos", &args);
    let (default, tiers) = outcome(Kind::Default, "sincos", &args);
    let (eager, eager_tiers) = outcome(Kind::Eager, "sincos", &args);
    assert_eq!(tiers, [Tier::Interp; 3], "primal, gradient, hvp");
    assert_eq!(eager_tiers, [Tier::Native; 3], "primal, gradient, hvp");
    assert_eq!(default, interp);
    assert_eq!(eager, interp);
    // `advm disasm --tier` says so, with the reason, for the derived
    // functions too.
    let mut e = engine(Kind::Interp);
    let f = e.find("sincos").expect("exists");
    let d = e.derive(f).expect("derives");
    for g in [f, d.fwd, d.rev] {
        assert_eq!(jit::tier_of(e.program(), g), Err(Decline::Small));
    }
    // So does the tier itself, when asked to compile it.
    let prog = e.program().clone();
    assert_eq!(jit::Jit::new().prepare(&prog, f), Err(Decline::Small));
    assert_eq!(jit::Jit::eager().prepare(&prog, f), Ok(()));
}

#[test]
fn functions_with_a_loop_run_compiled_with_the_same_bits() {
    for (f, args) in [
        ("pow", vec![Value::F64(1.0001), Value::I64(1000)]),
        ("pow", vec![Value::F64(-0.75), Value::I64(3)]),
        // Loop-free itself, but its callee has a loop.
        ("outer", vec![Value::F64(0.4)]),
    ] {
        let (interp, _) = outcome(Kind::Interp, f, &args);
        let (default, tiers) = outcome(Kind::Default, f, &args);
        assert_eq!(tiers, [Tier::Native; 3], "@{f}: primal, gradient, hvp");
        assert_eq!(default, interp, "@{f}");
        let e = engine(Kind::Interp);
        let id = e.find(f).expect("exists");
        assert_eq!(jit::tier_of(e.program(), id), Ok(()), "@{f}");
    }
}

#[test]
fn a_long_loop_free_function_runs_compiled() {
    // More than `SMALL_CALL` instructions and no loop.
    let mut src = String::from("fn @long(%x: f64) -> f64 {\nentry:\n    %v0 = sin %x\n");
    for i in 1..=jit::SMALL_CALL {
        src.push_str(&format!("    %v{i} = sin %v{}\n", i - 1));
    }
    src.push_str(&format!("    ret %v{}\n}}\n", jit::SMALL_CALL));
    let module = assembler::assemble(&src, "long").unwrap_or_else(|d| panic!("{d}"));
    let mut native = Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
    let mut interp = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    jit::install(native.vm_mut());
    let f = native.find("long").expect("exists");
    assert_eq!(jit::tier_of(native.program(), f), Ok(()));
    let args = [Value::F64(0.3)];
    let a = native.run(f, &args).expect("runs");
    assert_eq!(native.vm_mut().last_tier(), Tier::Native);
    let b = interp.run(f, &args).expect("runs");
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

#[test]
fn a_recorded_decline_goes_with_the_tier() {
    // The VM records the default tier's decline of @sincos; a tier
    // installed since is offered the call again.
    let mut e = engine(Kind::Default);
    let f = e.find("sincos").expect("exists");
    let args = [Value::F64(0.9)];
    for _ in 0..2 {
        e.run(f, &args).expect("runs");
        assert_eq!(e.vm_mut().last_tier(), Tier::Interp);
    }
    jit::install_eager(e.vm_mut());
    e.run(f, &args).expect("runs");
    assert_eq!(e.vm_mut().last_tier(), Tier::Native);
    // An engine's clone gets a tier of the same kind.
    let mut c = e.clone();
    c.run(f, &args).expect("runs");
    assert_eq!(c.vm_mut().last_tier(), Tier::Native);
}

/// A straight line of `n` `sin`s, `@long`, called in a loop by `@outer`.
fn long_line(n: usize) -> String {
    let mut src = String::from("fn @long(%x: f64) -> f64 {\nentry:\n    %v0 = sin %x\n");
    for i in 1..=n {
        src.push_str(&format!("    %v{i} = sin %v{}\n", i - 1));
    }
    src.push_str(&format!("    ret %v{n}\n}}\n"));
    src.push_str(
        "fn @outer(%x: f64) -> f64 {
entry:
    jmp head
head:
    %s = phi [entry: 0.0], [body: %s2]
    %k = phi [entry: 0], [body: %k2]
    %c = lt %k, 2
    br %c, body, done
body:
    %y = call @long(%x)
    %s2 = add %s, %y
    %k2 = add %k, 1
    jmp head
done:
    ret %s
}
",
    );
    src
}

/// A function over `jit::MAX_AREA` (bytecode length times registers) runs
/// interpreted, and so does what calls it, with the interpreter's bits and
/// its gradient: compiling it would take time and memory quadratic in its
/// length (a straight-line gradient of 8 000 instructions took 2 s and
/// 544 MB). Under the bound the same shape compiles.
#[test]
fn a_function_too_large_to_compile_runs_interpreted() {
    let big = (jit::MAX_AREA as f64).sqrt() as usize + 10;
    for (n, compiled) in [(100, true), (big, false)] {
        let src = long_line(n);
        let module = assembler::assemble(&src, "long").unwrap_or_else(|d| panic!("{d}"));
        let mut native =
            Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
        let mut interp = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
        jit::install(native.vm_mut());
        let (long, outer) = (
            native.find("long").expect("@long"),
            native.find("outer").expect("@outer"),
        );
        for f in [long, outer] {
            match jit::tier_of(native.program(), f) {
                Ok(()) => assert!(compiled, "n = {n}: compiled"),
                Err(Decline::TooLarge { name, len, regs }) => {
                    assert!(!compiled, "n = {n}: declined");
                    assert_eq!(name, "long");
                    assert!(len * regs > jit::MAX_AREA, "{len} × {regs}");
                }
                Err(d) => panic!("n = {n}: {d}"),
            }
        }
        let args = [Value::F64(0.3)];
        let a = native.run(outer, &args).expect("runs");
        let want = if compiled { Tier::Native } else { Tier::Interp };
        assert_eq!(native.vm_mut().last_tier(), want, "n = {n}");
        let b = interp.run(outer, &args).expect("runs");
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let ga = native.grad(outer, &args).expect("gradient");
        let gb = interp.grad(outer, &args).expect("gradient");
        assert_eq!(format!("{ga:?}"), format!("{gb:?}"), "n = {n}");
    }
}

/// `depth` functions, each holding `width` values at once (so as many
/// registers) and calling the next, the last one with a loop: a chain of
/// frames of about `16 * width` bytes each.
fn wide_chain(depth: usize, width: usize) -> String {
    let mut src = String::new();
    for d in 0..depth {
        src.push_str(&format!("fn @w{d}(%x: f64) -> f64 {{\nentry:\n"));
        for i in 0..width {
            src.push_str(&format!("    %v{i} = mul %x, {}.5\n", i + 1));
        }
        src.push_str("    %s0 = add %v0, %v1\n");
        for i in 2..width {
            src.push_str(&format!("    %s{} = add %s{}, %v{i}\n", i - 1, i - 2));
        }
        let s = format!("%s{}", width - 2);
        if d + 1 < depth {
            src.push_str(&format!(
                "    %y = call @w{}({s})\n    %r = add %y, %x\n    ret %r\n}}\n",
                d + 1
            ));
        } else {
            src.push_str(&format!(
                "    jmp head\nhead:\n    %k = phi [entry: 0], [head: %k2]\n    %k2 = add %k, 1\n    %c = lt %k2, 3\n    br %c, head, done\ndone:\n    ret {s}\n}}\n"
            ));
        }
    }
    src
}

/// A chain of calls whose compiled frames could take more than
/// `jit::STACK_BUDGET` of native stack runs interpreted, with the
/// interpreter's bits and gradient; a shorter chain of the same frames
/// compiles.
#[test]
fn a_call_chain_over_the_stack_budget_runs_interpreted() {
    let width = 400;
    for (depth, compiled) in [(3, true), (60, false)] {
        let src = wide_chain(depth, width);
        let module = assembler::assemble(&src, "chain").unwrap_or_else(|d| panic!("{d}"));
        let mut native =
            Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
        let mut interp = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
        jit::install(native.vm_mut());
        let f = native.find("w0").expect("@w0");
        let want = if compiled {
            Ok(())
        } else {
            Err(Decline::DeepChain)
        };
        assert_eq!(jit::tier_of(native.program(), f), want, "depth {depth}");
        let args = [Value::F64(0.3)];
        let a = native.run(f, &args).expect("runs");
        let tier = if compiled { Tier::Native } else { Tier::Interp };
        assert_eq!(native.vm_mut().last_tier(), tier, "depth {depth}");
        let b = interp.run(f, &args).expect("runs");
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let ga = native.grad(f, &args).expect("gradient");
        let gb = interp.grad(f, &args).expect("gradient");
        assert_eq!(format!("{ga:?}"), format!("{gb:?}"), "depth {depth}");
    }
}

/// A gradient's forward function and pullback (`NativeTier::pair`, which
/// the engine tells the tier of) compile together when the forward
/// function is first called, on two threads when both are large: GMM's
/// (`bench/benches/gmm.adasm`, about 4 000 IR instructions each). The
/// gradient is the interpreter's, bit for bit, and so is the second one,
/// which compiles nothing.
#[test]
fn a_large_forward_function_and_its_pullback_compile_together_on_two_threads() {
    let src = include_str!("../../../bench/benches/gmm.adasm");
    let module = assembler::assemble(src, "gmm.adasm").unwrap_or_else(|d| panic!("{d}"));
    let mut interp = Engine::new(module.clone()).expect("verifies");
    let mut native = Engine::new(module).expect("verifies");
    jit::install(native.vm_mut());
    // d = 2, k = 2, n = 3.
    let (d, k, n) = (2usize, 2usize, 3usize);
    let seq = |len: usize, scale: f64| -> Value {
        Value::Arr((0..len).map(|i| ((i as f64 + 1.0) * scale).sin()).collect())
    };
    let args = [
        seq(k, 0.3),
        seq(k * d, 0.7),
        seq(k * d * (d + 1) / 2, 0.2),
        seq(n * d, 1.1),
        Value::F64(1.0),
        Value::F64(0.5),
    ];
    let f = interp.find("gmm").expect("exists");
    let want = format!("{:?}", interp.grad(f, &args));
    for _ in 0..2 {
        assert_eq!(format!("{:?}", native.grad(f, &args)), want);
        assert_eq!(native.vm_mut().last_tier(), Tier::Native);
    }
    // The same compile, by hand, to see how it went.
    let prog = native.program().clone();
    let pair = (0..prog.len() as u32)
        .map(vm::ir::FuncId)
        .filter(|g| prog.func(*g).name.starts_with("gmm."))
        .collect::<Vec<_>>();
    assert_eq!(pair.len(), 2, "gmm.fwd and gmm.rev");
    let mut jit = jit::Jit::new();
    vm::NativeTier::pair(&mut jit, pair[0], pair[1]);
    jit.prepare(&prog, pair[0]).expect("compiles");
    let bodies: Vec<_> = jit
        .compile_times()
        .iter()
        .filter(|t| !t.trampoline)
        .collect();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert!(
        bodies.iter().all(|t| t.parallel && t.insts > 1000),
        "{bodies:?}"
    );
    // The pullback's entry is ready: preparing it compiles nothing more.
    let before = jit.compile_times().len();
    jit.prepare(&prog, pair[1]).expect("compiled");
    assert_eq!(jit.compile_times().len(), before);
}

/// `jit::listing` gives the code compiled for a call: every body it needs,
/// callees first, each with its Cranelift IR and machine code; an
/// unverified function is declined.
#[test]
fn a_listing_shows_every_body_a_call_compiles_callees_first() {
    let src = "
fn @leaf(%x: f64) -> f64 {
entry:
    %y = exp %x
    ret %y
}

fn @top(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %r = phi [entry: %x], [body: %r2]
    %k = phi [entry: %n], [body: %k2]
    %c = gt %k, 0
    br %c, body, done
body:
    %r2 = call @leaf(%r)
    %k2 = sub %k, 1
    jmp head
done:
    ret %r
}
";
    let module = assembler::assemble(src, "listing.adasm").unwrap_or_else(|d| panic!("{d}"));
    let e = Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
    let top = e.find("top").expect("@top");
    let text = jit::listing(e.program(), top).expect("compiles");
    let leaf = text.find("; @leaf: ").expect("the callee's body");
    let at = text.find("; @top: ").expect("the caller's body");
    assert!(leaf < at, "{text}");
    assert_eq!(text.matches("; machine code").count(), 2, "{text}");
    assert!(text.contains("= advm_exp"), "{text}");
    // Not verified: declined, as a call would be.
    let raw = vm::lower::lower_module(&module).expect("lowers");
    let f = raw.find("top").expect("@top");
    assert_eq!(jit::listing(&raw, f), Err(Decline::NotVerified));
}
