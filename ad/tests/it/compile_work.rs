//! The compile budget (`ad::budget`) and the shapes whose derivation was
//! superlinear: tens of thousands of phis in one loop header, a million
//! overwrites of an array element in one block, thousands of nested loops.
//! Each is derived at a size that took seconds (or minutes) before, and
//! must end: a gradient checked against its closed form, or a clean
//! refusal. Nothing is timed; linearity is asserted on work units (the
//! budget's count), which grow with the size of what each stage builds.

use ad::compile_work::{Work, DEFAULT_MAX_COMPILE_WORK};
use ad::{AdError, Engine};
use vm::ir::FuncId;
use vm::Value;

/// `@f(%x, %k)`: `n` phis in one loop header rotating `x` among them (the
/// loop runs `k` times); returns `p0 * p(n-1)`, that is `x²`.
fn phis(n: usize) -> String {
    let mut s = String::from("fn @f(%x: f64, %k: i64) -> f64 {\nentry:\n    jmp head\nhead:\n");
    s.push_str("    %i = phi [entry: 0], [body: %i2]\n");
    for j in 0..n {
        s.push_str(&format!(
            "    %p{j} = phi [entry: %x], [body: %p{}]\n",
            (j + 1) % n
        ));
    }
    s.push_str("    %c = lt %i, %k\n    br %c, body, done\nbody:\n    %i2 = add %i, 1\n");
    s.push_str(&format!(
        "    jmp head\ndone:\n    %r = mul %p0, %p{}\n    ret %r\n}}\n",
        n - 1
    ));
    s
}

/// `@f(%x, %k)`: `n` `aset`s of `x` into a 4-element array in one block.
fn asets(n: usize) -> String {
    let mut s = String::from("fn @f(%x: f64, %k: i64) -> f64 {\nentry:\n    %a = anew 4\n");
    for i in 0..n {
        s.push_str(&format!("    aset %a, {}, %x\n", i % 4));
    }
    s.push_str("    %r = aget %a, 0\n    ret %r\n}\n");
    s
}

/// `@f(%x, %k)`: `n` nested loops, each running `k` times; the innermost
/// body multiplies the running value by 1.5, so with `k = 1` the result is
/// `1.5 x`.
fn nested(n: usize) -> String {
    let mut s = String::from("fn @f(%x: f64, %k: i64) -> f64 {\nentry:\n    jmp h0\n");
    let mut prev = String::from("entry");
    for d in 0..n {
        let init = if d == 0 {
            "%x".to_string()
        } else {
            format!("%s{}", d - 1)
        };
        let back = if d + 1 < n {
            format!("%t{}", d + 1)
        } else {
            "%u".to_string()
        };
        s.push_str(&format!(
            "h{d}:\n    %i{d} = phi [{prev}: 0], [l{d}: %j{d}]\n    %s{d} = phi [{prev}: {init}], [l{d}: {back}]\n    %c{d} = lt %i{d}, %k\n    br %c{d}, b{d}, e{d}\nb{d}:\n"
        ));
        prev = format!("b{d}");
        if d + 1 < n {
            s.push_str(&format!("    jmp h{}\n", d + 1));
        }
    }
    s.push_str(&format!(
        "    %u = mul %s{}, 1.5\n    jmp l{}\n",
        n - 1,
        n - 1
    ));
    for d in (0..n).rev() {
        s.push_str(&format!(
            "l{d}:\n    %j{d} = add %i{d}, 1\n    jmp h{d}\ne{d}:\n"
        ));
        if d > 0 {
            s.push_str(&format!("    %t{d} = copy %s{d}\n    jmp l{}\n", d - 1));
        }
    }
    s.push_str("    ret %s0\n}\n");
    s
}

/// `@f(%x, %k)`: a chain of `n` blocks, block `i` computing `(i + 1) x`
/// and branching to one join when `k < i`; the join's phi has `n`
/// incoming values, listed in reverse block order. With `k = 1` the
/// result is `3 x`.
fn joins(n: usize) -> String {
    let mut s = String::from("fn @f(%x: f64, %k: i64) -> f64 {\nentry:\n    jmp b0\n");
    for i in 0..n {
        s.push_str(&format!("b{i}:\n    %v{i} = mul %x, {}.0\n", i + 1));
        if i + 1 < n {
            s.push_str(&format!(
                "    %c{i} = lt %k, {i}\n    br %c{i}, join, b{}\n",
                i + 1
            ));
        } else {
            s.push_str("    jmp join\n");
        }
    }
    s.push_str("join:\n    %r = phi ");
    let incoming: Vec<String> = (0..n).rev().map(|i| format!("[b{i}: %v{i}]")).collect();
    s.push_str(&incoming.join(", "));
    s.push_str("\n    ret %r\n}\n");
    s
}

fn engine(src: &str) -> (Engine, FuncId) {
    engine_of(assembler::assemble(src, "gen.adasm").expect("assembles"))
}

fn engine_of(module: vm::ir::Module) -> (Engine, FuncId) {
    let engine = Engine::new(module).expect("verifies");
    let f = engine.find("f").expect("defined");
    (engine, f)
}

/// The module of `asets(n)`, built from that of `asets(4)` by repeating
/// its four `aset`s in the IR: the same function without assembling `n`
/// lines of text (the derivation, not the assembler, is under test).
fn asets_module(n: usize) -> vm::ir::Module {
    let mut module = assembler::assemble(&asets(4), "gen.adasm").expect("assembles");
    let insts = &mut module.funcs[0].blocks[0].insts;
    // `anew`, the four `aset`s, `aget`.
    assert_eq!(insts.len(), 6, "{insts:?}");
    let last = insts.pop().expect("the aget");
    let four: Vec<_> = insts.drain(1..).collect();
    insts.extend(four.iter().cycle().take(n).cloned());
    insts.push(last);
    module
}

/// Work units of deriving `@f` of `src` (the transform with its clean-up,
/// as a derivation charges them), without a bound.
fn work_of(src: &str) -> u64 {
    let module = assembler::assemble(src, "gen.adasm").expect("assembles");
    let mut work = Work::unlimited();
    let mut no_callee =
        |_: FuncId, _: Vec<bool>| -> ad::transform::Derived { unreachable!("no calls") };
    ad::transform::transform_within(
        &module,
        FuncId(0),
        &[true, false],
        &mut no_callee,
        ad::transform::Options::default(),
        &mut work,
    )
    .expect("derives");
    work.used()
}

fn grad_x(engine: &mut Engine, f: FuncId, x: f64) -> (f64, f64) {
    let g = engine
        .grad(f, &[Value::F64(x), Value::I64(1)])
        .expect("gradient");
    let Some(Value::F64(d)) = g.grad[0] else {
        panic!("no f64 gradient: {g:?}");
    };
    (g.value, d)
}

/// 29 900 phis in one loop header: 31.9 s once (phi moves searched the
/// header's phis for each phi, known zeros went round the loop once per
/// phi, the lowering's parallel copies searched their list for each copy).
#[test]
fn deriving_29_900_phis_in_one_loop_header() {
    let (mut engine, f) = engine(&phis(29_900));
    let (value, d) = grad_x(&mut engine, f, 1.5);
    assert_eq!(value, 2.25);
    assert_eq!(d, 3.0, "d(x²)/dx at 1.5");
}

/// 9 000 nested loops: 22.5 s once (each loop's body a flag per block of
/// the function, loops searched per block and per edge).
#[test]
fn deriving_9_000_nested_loops() {
    let (mut engine, f) = engine(&nested(9_000));
    let (value, d) = grad_x(&mut engine, f, 2.0);
    assert_eq!(value, 3.0);
    assert_eq!(d, 1.5);
}

/// A join of 14 000 predecessors (a phi of 14 000 incoming values; 4
/// values per block, under the 60 000 a function holds): the
/// lowering's edge copies and the reverse code's phi moves searched the
/// phi's incoming values once per edge (N²/2 steps); now they look them
/// up in an index of the join's phis.
#[test]
fn deriving_a_join_of_14_000_predecessors() {
    let (mut engine, f) = engine(&joins(14_000));
    let (value, d) = grad_x(&mut engine, f, 1.5);
    assert_eq!((value, d), (4.5, 3.0));
}

/// 10⁶ overwrites of one array element in one block: 137 s once before
/// the gradient was refused. Now refused by the compile budget (or as too
/// large for a frame), quickly and cleanly.
#[test]
fn deriving_a_million_overwrites_in_one_block_is_refused() {
    let (mut engine, f) = engine_of(asets_module(1_000_000));
    match engine.derive(f) {
        Err(AdError::TooMuchWork { func, used, limit }) => {
            assert_eq!(func, "f");
            assert_eq!(limit, DEFAULT_MAX_COMPILE_WORK);
            assert!(used > limit);
        }
        Err(AdError::TooLarge { .. }) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Work units grow linearly with each shape (as the work of each stage
/// does): doubling the size at most doubles the count, plus a little.
#[test]
fn compile_work_is_linear_in_each_shape() {
    type Gen = fn(usize) -> String;
    for (name, gen, n) in [
        ("phis", phis as Gen, 2_000),
        ("asets", asets as Gen, 5_000),
        ("nested", nested as Gen, 500),
        ("joins", joins as Gen, 2_000),
    ] {
        let (w1, w2) = (work_of(&gen(n)), work_of(&gen(2 * n)));
        assert!(w1 > n as u64, "{name}: {w1} units for size {n}");
        assert!(
            w2 * 10 <= w1 * 22,
            "{name}: {w1} units at size {n}, {w2} at {}",
            2 * n
        );
    }
}

/// A budget too small for a function is refused, naming the function, the
/// bound and the flag that raises it; nothing of the failed derivation is
/// kept, and with the default budget the same engine derives it.
#[test]
fn a_tiny_compile_budget_is_refused_with_the_flag_named() {
    let (mut engine, f) = engine(&phis(10));
    assert_eq!(engine.max_compile_work(), DEFAULT_MAX_COMPILE_WORK);
    engine.set_max_compile_work(10);
    let len = engine.program().len();
    let err = engine.derive(f).expect_err("refused");
    let AdError::TooMuchWork {
        ref func,
        used,
        limit,
    } = err
    else {
        panic!("expected TooMuchWork, got {err:?}");
    };
    assert_eq!((func.as_str(), limit), ("f", 10));
    assert!(used > 10);
    let text = err.to_string();
    for part in [
        "@f",
        "compile budget of 10 work units",
        "--max-compile-work",
    ] {
        assert!(text.contains(part), "{text}");
    }
    assert_eq!(
        engine.program().len(),
        len,
        "the failed derivation is undone"
    );
    engine.set_max_compile_work(DEFAULT_MAX_COMPILE_WORK);
    let (value, d) = grad_x(&mut engine, f, 1.5);
    assert_eq!((value, d), (2.25, 3.0));
}

/// Every stage is charged: the budget that just suffices for a function
/// is its whole count, one unit less is refused.
#[test]
fn the_budget_is_exact_at_the_boundary() {
    let src = nested(3);
    let units = {
        let (mut engine, f) = engine(&src);
        engine.set_max_compile_work(u64::MAX);
        engine.derive(f).expect("derives");
        work_of(&src)
    };
    let (mut engine, f) = engine(&src);
    engine.set_max_compile_work(units - 1);
    assert!(matches!(engine.derive(f), Err(AdError::TooMuchWork { .. })));
    engine.set_max_compile_work(units);
    engine.derive(f).expect("derives within its count");
}

/// The refusal of a request on `@f` by a budget of `limit` units.
fn assert_refused(r: Result<impl std::fmt::Debug, AdError>, limit: u64) {
    match r {
        Err(AdError::TooMuchWork {
            func,
            used,
            limit: l,
        }) => {
            assert_eq!((func.as_str(), l), ("f", limit));
            assert!(used > limit, "{used} units counted");
        }
        other => panic!("expected TooMuchWork, got {other:?}"),
    }
}

/// The tangent (forward-mode) derivation is charged: 2 000 phis in one
/// loop header need more than 5 000 units for their tangent function, so
/// that budget refuses it, keeping nothing; the default derives it, and
/// the tangent of `x²` along 1 at 1.5 is 3.
#[test]
fn the_tangent_derivation_is_charged() {
    let (mut engine, f) = engine(&phis(2_000));
    engine.set_max_compile_work(5_000);
    let len = engine.program().len();
    assert_refused(engine.derive_jvp(f, &[true, false]), 5_000);
    assert_eq!(engine.program().len(), len, "nothing of it is kept");
    engine.set_max_compile_work(DEFAULT_MAX_COMPILE_WORK);
    let t = engine
        .jvp(
            f,
            &[Value::F64(1.5), Value::I64(1)],
            &[Some(Value::F64(1.0)), None],
        )
        .expect("tangent");
    assert_eq!(t.value, Value::F64(2.25));
    assert_eq!(t.tangent, Some(Value::F64(3.0)));
}

/// The Hessian-vector product's tangents are charged: with the gradient's
/// pair already built under the default budget, a budget its tangents
/// exceed refuses the product (the pair stays); the default gives
/// `H·1 = 2` for `x²`.
#[test]
fn the_hessian_vector_derivation_is_charged() {
    let (mut engine, f) = engine(&phis(2_000));
    engine.derive(f).expect("the pair derives");
    let len = engine.program().len();
    engine.set_max_compile_work(5_000);
    assert_refused(engine.derive_hvp(f, &[true, false]), 5_000);
    assert_eq!(engine.program().len(), len, "nothing of it is kept");
    engine.set_max_compile_work(DEFAULT_MAX_COMPILE_WORK);
    let h = engine
        .hvp(
            f,
            &[Value::F64(1.5), Value::I64(1)],
            &[Some(Value::F64(1.0)), None],
        )
        .expect("hvp");
    assert_eq!(h.value, 2.25);
    assert_eq!(h.hvp[0], Some(Value::F64(2.0)));
}

/// `@f(%x, %k)`: `n` calls of the small `@sq` (inlined by the default
/// policy), summed: `n x²`.
fn calls(n: usize) -> String {
    let mut s = String::from(
        "fn @sq(%y: f64) -> f64 {\nentry:\n    %r = mul %y, %y\n    ret %r\n}\n\
         fn @f(%x: f64, %k: i64) -> f64 {\nentry:\n    %s0 = copy 0.0\n",
    );
    for i in 0..n {
        s.push_str(&format!(
            "    %c{i} = call @sq(%x)\n    %s{} = add %s{i}, %c{i}\n",
            i + 1
        ));
    }
    s.push_str(&format!("    ret %s{n}\n}}\n"));
    s
}

/// Inlining is charged to the derivations that read an inlined function:
/// its size as written and as inlined, on top of the derivation's own
/// count (computed on the inlined function). One unit less is refused.
#[test]
fn inlining_is_charged() {
    let src = calls(50);
    let written = assembler::assemble(&src, "gen.adasm").expect("assembles");
    let (mut engine, f) = engine(&src);
    let inlined = engine.module().clone();
    assert!(
        inlined.func(f).values.len() > written.func(f).values.len(),
        "the calls were inlined"
    );
    let own = {
        let mut work = Work::unlimited();
        let mut no_callee =
            |_: FuncId, _: Vec<bool>| -> ad::transform::Derived { unreachable!("all inlined") };
        ad::transform::transform_within(
            &inlined,
            f,
            &[true, false],
            &mut no_callee,
            ad::transform::Options::default(),
            &mut work,
        )
        .expect("derives");
        work.used()
    };
    let inlining =
        ad::compile_work::size(written.func(f)) + ad::compile_work::size(inlined.func(f));
    let units = own + inlining;
    engine.set_max_compile_work(units - 1);
    assert_refused(engine.derive(f), units - 1);
    engine.set_max_compile_work(units);
    engine.derive(f).expect("derives within its count");
    let (value, d) = grad_x(&mut engine, f, 1.5);
    assert_eq!((value, d), (50.0 * 2.25, 50.0 * 3.0));
}
