//! Inlining (`vm::inline`, on by default in `Engine::new`): what it does
//! to the IR, and that it changes no result and no trap's place. (The
//! corpus test `inlining_changes_no_result_of_the_corpus` compares every
//! corpus call with and without it; the differential and random-program
//! tests run inlined programs against the reference evaluator and finite
//! differences.)

use ad::{AdError, Engine, Policy};
use vm::inline::{inline_module, size};
use vm::ir::{Module, Term};
use vm::op::Op;
use vm::Value;

fn module(src: &str) -> Module {
    assembler::assemble(src, "t.adasm").expect("assembles")
}

fn calls(m: &Module, f: &str) -> usize {
    let f = m.func(m.find(f).expect("defined"));
    f.blocks
        .iter()
        .flat_map(|b| &b.insts)
        .filter(|i| i.op == Op::Call)
        .count()
}

const REC: &str = "
fn @rec(%x: f64, %n: i64) -> f64 {
entry:
    %z = eq %n, 0
    br %z, base, step
base:
    ret %x
step:
    %m = sub %n, 1
    %r = call @rec(%x, %m)
    %s = sin %r
    %y = mul %x, %s
    ret %y
}
";

/// A function that calls itself is unrolled `max_depth` levels: one call
/// is left (in the innermost copy), the body is `max_depth + 1` copies.
#[test]
fn self_recursion_unrolls_to_the_depth_and_stops() {
    let m = module(REC);
    let one = size(&m.funcs[0]);
    for depth in [1, 2, 3, 5] {
        let policy = Policy {
            max_depth: depth,
            ..Policy::default()
        };
        let out = inline_module(&m, &policy);
        assert_eq!(calls(&out, "rec"), 1, "depth {depth}");
        // Each level: a copy of the three blocks and the second half of
        // the block it was called from; the call itself goes.
        let f = &out.funcs[0];
        assert_eq!(f.blocks.len(), 3 + depth as usize * 4, "depth {depth}");
        assert!(
            size(f) >= one * (depth as usize + 1) - depth as usize,
            "depth {depth}"
        );
    }
    // The caller's budget stops it early.
    let policy = Policy {
        max_caller: 2 * one,
        ..Policy::default()
    };
    let out = inline_module(&m, &policy);
    assert_eq!(
        out.funcs[0].blocks.len(),
        7,
        "one level fits in twice the size"
    );
    // No inlining at all.
    assert_eq!(inline_module(&m, &Policy::NONE), m);
    let small = Policy {
        max_callee: one - 1,
        ..Policy::default()
    };
    assert_eq!(
        inline_module(&m, &small),
        m,
        "a callee over the limit stays a call"
    );
}

/// The unrolled recursion computes the same value bit for bit and the same
/// gradient up to rounding, in a quarter of the frames.
#[test]
fn unrolled_recursion_computes_the_same_in_fewer_frames() {
    let m = module(REC);
    let mut with = Engine::new(m.clone()).expect("engine");
    let mut without = Engine::with_inlining(m, &Policy::NONE).expect("engine");
    let f = with.find("rec").expect("defined");
    let args = [Value::F64(0.9), Value::I64(100)];
    let (a, b) = (with.run(f, &args), without.run(f, &args));
    match (a, b) {
        (Ok(Value::F64(a)), Ok(Value::F64(b))) => assert_eq!(a.to_bits(), b.to_bits()),
        other => panic!("{other:?}"),
    }
    let (ga, gb) = (
        with.grad(f, &args).expect("grad"),
        without.grad(f, &args).expect("grad"),
    );
    assert_eq!(ga.value.to_bits(), gb.value.to_bits());
    assert!(
        testkit::same_gradient(&ga.grad[0], &gb.grad[0]),
        "{ga:?} {gb:?}"
    );
    // The reference value (programs/bench/recursion.adasm).
    let Some(Value::F64(d)) = ga.grad[0] else {
        panic!("{ga:?}")
    };
    assert!((d - 0.0016352415527060296).abs() < 1e-15, "{d}");
    // 101 levels: 13 frames inlined (eight levels each), 101 without.
    for (inlined, limit, ok) in [
        (true, 13, true),
        (true, 12, false),
        (false, 101, true),
        (false, 100, false),
    ] {
        let engine = if inlined { &mut with } else { &mut without };
        engine.vm_mut().limits_mut().max_call_depth = limit;
        assert_eq!(engine.run(f, &args).is_ok(), ok, "limit {limit}");
        assert_eq!(engine.grad(f, &args).is_ok(), ok, "grad, limit {limit}");
    }
}

/// The block after a call keeps the caller's successors' phis right (they
/// name it as their predecessor now), and a callee with several `ret`s
/// gives its result by a phi.
#[test]
fn a_call_in_a_loop_to_a_callee_with_two_returns() {
    let src = "
fn @clamp(%x: f64) -> f64 {
entry:
    %big = gt %x, 1.0
    br %big, one, same
one:
    ret 1.0
same:
    ret %x
}
fn @sum(%n: i64, %x: f64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %fi = itof %i
    %t = mul %x, %fi
    %u = call @clamp(%t)
    %s2 = add %s, %u
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}
";
    let m = module(src);
    let out = inline_module(&m, &Policy::default());
    let sum = out.func(out.find("sum").expect("defined"));
    assert_eq!(calls(&out, "sum"), 0);
    // The header's phis name the block after the call, which ends the loop
    // body with the jump back.
    let head = sum.blocks.iter().find(|b| b.name == "head").expect("head");
    let back: Vec<usize> = sum
        .blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| {
            b.name == "body"
                && matches!(b.term, Term::Jmp(t) if sum.blocks[t.index()].name == "head")
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(back.len(), 1, "one latch");
    for phi in &head.phis {
        assert!(
            phi.incoming.iter().any(|(p, _)| p.index() == back[0]),
            "{phi:?}"
        );
    }
    // The two returns meet in a phi at the start of that block.
    assert_eq!(sum.blocks[back[0]].phis.len(), 1);
    assert_eq!(sum.blocks[back[0]].phis[0].incoming.len(), 2);

    let mut with = Engine::new(m.clone()).expect("engine");
    let mut without = Engine::with_inlining(m, &Policy::NONE).expect("engine");
    let f = with.find("sum").expect("defined");
    for x in [0.05, 0.3, 2.0] {
        let args = [Value::I64(7), Value::F64(x)];
        let (a, b) = (
            with.grad(f, &args).expect("grad"),
            without.grad(f, &args).expect("grad"),
        );
        assert_eq!(a.value.to_bits(), b.value.to_bits(), "x = {x}");
        assert!(
            testkit::same_gradient(&a.grad[1], &b.grad[1]),
            "{a:?} {b:?}"
        );
    }
}

/// A trap in inlined code names the function whose line it is, and the
/// one it ran in.
#[test]
fn a_trap_in_inlined_code_names_the_callee_and_its_line() {
    let src = "fn @get(%a: f64[], %i: i64) -> f64 {
entry:
    %v = aget %a, %i
    ret %v
}
fn @main(%a: f64[]) -> f64 {
entry:
    %v = call @get(%a, 5)
    %w = mul %v, 2.0
    ret %w
}
";
    let m = module(src);
    for (policy, into) in [(Policy::default(), Some("main")), (Policy::NONE, None)] {
        let mut engine = Engine::with_inlining(m.clone(), &policy).expect("engine");
        let f = engine.find("main").expect("defined");
        let args = [Value::Arr(vec![1.0, 2.0])];
        for e in [engine.run(f, &args).err(), engine.grad(f, &args).err()] {
            let Some(AdError::Trap(t)) = e else {
                panic!("{e:?}")
            };
            assert_eq!(t.func.strip_suffix(".fwd").unwrap_or(&t.func), "get");
            assert_eq!(t.block, "entry");
            assert_eq!(t.loc.line, 3, "the line of the `aget`");
            assert_eq!(
                t.inlined_into
                    .as_deref()
                    .map(|s| s.trim_end_matches(".fwd")),
                into
            );
        }
        let text = engine.run(f, &args).expect_err("traps").to_string();
        match into {
            Some(_) => assert!(
                text.contains("in @get (inlined into @main), block entry"),
                "{text}"
            ),
            None => assert!(text.contains("in @get, block entry"), "{text}"),
        }
    }
}

/// The module grows by at most its own size (or `max_unit_growth`): a
/// chain of small functions each calling the next twice would otherwise
/// have every function grow to `max_caller` (a 1 MB file took 8.6 s and
/// 1.6 GB to load).
#[test]
fn the_module_grows_by_at_most_its_size_or_the_unit_budget() {
    let n = 300;
    let src: String = (0..n)
        .map(|i| {
            let body = if i + 1 < n {
                format!(
                    "    %a = call @f{}(%x)\n    %b = call @f{}(%a)\n    %c = add %a, %b\n    ret %c",
                    i + 1,
                    i + 1
                )
            } else {
                "    ret %x".to_string()
            };
            format!("fn @f{i}(%x: f64) -> f64 {{\nentry:\n{body}\n}}\n")
        })
        .collect();
    let m = module(&src);
    let total = |m: &Module| m.funcs.iter().map(size).sum::<usize>();
    let before = total(&m);
    for growth in [0, before / 2, 3 * before] {
        let policy = Policy {
            max_unit_growth: growth,
            ..Policy::default()
        };
        let out = inline_module(&m, &policy);
        let limit = before + growth.max(before);
        assert!(total(&out) <= limit, "{} > {limit}", total(&out));
        // The budget is spent, not left over: the first functions inline.
        assert!(
            total(&out) + Policy::default().max_callee > limit,
            "growth {growth}"
        );
        assert!(
            size(&out.funcs[0]) > 300,
            "the first function inlines up to its limit"
        );
    }
    // Same values as the calls.
    let mut with = Engine::new(m.clone()).expect("engine");
    let mut without = Engine::with_inlining(m, &Policy::NONE).expect("engine");
    let f = with.find("f290").expect("defined");
    let (a, b) = (
        with.run(f, &[Value::F64(0.5)]),
        without.run(f, &[Value::F64(0.5)]),
    );
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

/// Derived code keeps the source lines of the user's instructions (traps
/// in it report them) and records what it was derived from: every derived
/// function's instructions that came from a user instruction carry its
/// line, and the program names the user function and the kind of code.
#[test]
fn derived_code_keeps_source_lines_and_origins() {
    let src = "\
fn @sq(%x: f64) -> f64 {
entry:
    %y = mul %x, %x
    ret %y
}

fn @main(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: 0], [body: %j]
    %a = phi [entry: %x], [body: %b]
    %c = lt %i, %n
    br %c, body, done
body:
    %s = call @sq(%a)
    %b = sin %s
    %j = add %i, 1
    jmp head
done:
    ret %a
}
";
    let mut engine = Engine::with_inlining(module(src), &Policy::NONE).expect("engine");
    let f = engine.find("main").expect("defined");
    let args = [Value::F64(0.5), Value::I64(3)];
    engine.grad(f, &args).expect("gradient");
    engine
        .hvp(f, &args, &[Some(Value::F64(1.0)), None])
        .expect("hvp");
    engine
        .jvp(f, &args, &[Some(Value::F64(1.0)), None])
        .expect("jvp");
    let p = engine.program();
    let mut kinds = Vec::new();
    let mut calls = 0;
    for (i, func) in p.funcs().iter().enumerate().skip(2) {
        let origin = p
            .origin(vm::ir::FuncId(i as u32))
            .unwrap_or_else(|| panic!("@{} has no origin", func.name));
        let of = &p.funcs()[origin.of.index()].name;
        assert!(
            func.name.starts_with(&format!("{of}.")),
            "@{} from @{of}",
            func.name
        );
        kinds.push(origin.code.clone());
        // The lines of user code: 3 (in @sq), 11 to 18 (in @main).
        let lines: Vec<u32> = func
            .locs
            .iter()
            .map(|l| l.line)
            .filter(|&l| l > 0)
            .collect();
        assert!(!lines.is_empty(), "@{} has no source line", func.name);
        let user = |l: &u32| {
            if of == "sq" {
                *l == 3 || *l == 4
            } else {
                (9..=21).contains(l)
            }
        };
        assert!(lines.iter().all(user), "@{}: {lines:?}", func.name);
        // Every call carries the line of the user's call (a trap's call
        // stack names it).
        for (pc, ins) in func.code.iter().enumerate() {
            if matches!(ins.op, Op::Call | Op::CallAcc | Op::CallN) {
                assert_eq!(func.locs[pc].line, 16, "@{} at {pc}", func.name);
                calls += 1;
            }
        }
    }
    // @main's four derived functions call @sq's: the forward and reverse
    // sweeps, the tangent code and the two tangents of the sweeps.
    assert!(calls >= 5, "{calls} calls");
    for kind in [
        "gradient's forward sweep",
        "gradient's reverse sweep",
        "tangent code",
        "tangent of the gradient's forward sweep",
        "tangent of the gradient's reverse sweep",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind}: {kinds:?}");
    }
}
