//! After a warm-up call, a gradient call allocates nothing on the heap
//! (adasm.md §4 property 7), for a loop, a recursive function and an array
//! program. Counted by a global allocator wrapper.

use ad::{Engine, Gradient};
use testkit::alloc::allocs;
use vm::Value;

#[global_allocator]
static GLOBAL: testkit::alloc::Counting = testkit::alloc::Counting;

fn allocations_of_second_call(src: &str, name: &str, args: &[Value]) -> (usize, Gradient) {
    let module = assembler::assemble(src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::new(module).expect("verifies");
    let f = e.find(name).expect("exists");
    let mut out = Gradient::default();
    e.grad_into(f, args, &mut out).expect("warm-up");
    let before = allocs();
    e.grad_into(f, args, &mut out).expect("second call");
    let after = allocs();
    (after - before, out)
}

#[test]
fn powloop_gradient_allocates_nothing_after_warm_up() {
    let (n, g) = allocations_of_second_call(
        &testkit::read_program("programs/bench/powloop.adasm"),
        "pow",
        &[Value::F64(1.0001), Value::I64(10_000)],
    );
    assert_eq!(n, 0, "allocations in the second gradient call");
    assert!(g.value > 2.7);
}

#[test]
fn recursive_gradient_allocates_nothing_after_warm_up() {
    let (n, g) = allocations_of_second_call(
        &testkit::read_program("programs/bench/recursion.adasm"),
        "rec",
        &[Value::F64(0.9), Value::I64(100)],
    );
    assert_eq!(n, 0, "allocations in the second gradient call");
    assert!(g.value > 0.0);
}

#[test]
fn array_gradient_allocates_nothing_after_warm_up() {
    let v = Value::Arr(testkit::suite::sines(1000));
    let (n, g) = allocations_of_second_call(
        &testkit::read_program("programs/bench/logsumexp.adasm"),
        "logsumexp",
        &[v],
    );
    assert_eq!(n, 0, "allocations in the second gradient call");
    assert!(matches!(&g.grad[0], Some(Value::Arr(a)) if a.len() == 1000));
}

#[test]
fn primal_runs_allocate_nothing_after_warm_up() {
    for (file, name, args) in [
        (
            "programs/bench/powloop.adasm",
            "pow",
            vec![Value::F64(1.0001), Value::I64(10_000)],
        ),
        (
            "programs/bench/recursion.adasm",
            "rec",
            vec![Value::F64(0.9), Value::I64(100)],
        ),
        (
            "programs/bench/branchy.adasm",
            "branchy",
            vec![Value::Arr(testkit::suite::sines(1000))],
        ),
    ] {
        let module = assembler::assemble(&testkit::read_program(file), file)
            .unwrap_or_else(|d| panic!("{d}"));
        let mut e = Engine::new(module).expect("verifies");
        let f = e.find(name).expect("exists");
        e.run(f, &args).expect("warm-up");
        let before = allocs();
        let v = e.run(f, &args).expect("second run");
        let n = allocs() - before;
        assert_eq!(n, 0, "{file}: allocations in the second run");
        assert!(matches!(v, Value::F64(_)));
    }
}

#[test]
fn prepared_gradient_allocates_nothing_after_warm_up() {
    let module = assembler::assemble(
        &testkit::read_program("programs/bench/recursion.adasm"),
        "t.adasm",
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::new(module).expect("verifies");
    let f = e.find("rec").expect("exists");
    let p = e.prepare(f, &[true, false]).expect("prepares");
    let args = [Value::F64(0.9), Value::I64(100)];
    let mut g = [0.0; 2];
    e.grad_prepared(&p, &args, &mut g).expect("warm-up");
    let before = allocs();
    let v = e.grad_prepared(&p, &args, &mut g).expect("second call");
    let after = allocs();
    assert_eq!(after - before, 0, "allocations in the second prepared call");
    assert!(v.is_finite() && g[0] != 0.0);
}

#[test]
fn prepared_jvp_allocates_nothing_after_warm_up() {
    for (file, name) in [
        ("programs/bench/recursion.adasm", "rec"),
        ("programs/bench/powloop.adasm", "pow"),
    ] {
        let module = assembler::assemble(&testkit::read_program(file), file)
            .unwrap_or_else(|d| panic!("{d}"));
        let mut e = Engine::new(module).expect("verifies");
        let f = e.find(name).expect("exists");
        let p = e.prepare_jvp(f, &[true, false]).expect("prepares");
        let args = [Value::F64(0.9), Value::I64(100)];
        e.jvp_prepared(&p, &args, &[1.0, 0.0]).expect("warm-up");
        let before = allocs();
        let (y, t) = e.jvp_prepared(&p, &args, &[1.0, 0.0]).expect("second call");
        let after = allocs();
        assert_eq!(
            after - before,
            0,
            "{file}: allocations in the second prepared jvp"
        );
        assert!(
            y.is_finite() && t.is_finite() && t != 0.0,
            "{file}: {y} {t}"
        );
    }
}

#[test]
fn array_jvp_allocates_nothing_after_warm_up() {
    // An array argument with a tangent array, and an array result.
    let src = "
fn @scale(%v: f64[], %s: f64) -> f64[] {
entry:
    %n = alen %v
    %out = anew %n
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %c = lt %i, %n
    br %c, body, done
body:
    %e = aget %v, %i
    %p = mul %e, %s
    aset %out, %i, %p
    %i2 = add %i, 1
    jmp head
done:
    ret %out
}";
    for (src, name) in [
        (
            testkit::read_program("programs/bench/logsumexp.adasm"),
            "logsumexp",
        ),
        (src.to_string(), "scale"),
    ] {
        let module = assembler::assemble(&src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
        let mut e = Engine::new(module).expect("verifies");
        let f = e.find(name).expect("exists");
        let xs = testkit::suite::sines(1000);
        let mut args = vec![Value::Arr(xs.clone())];
        let mut dir = vec![Some(Value::Arr(vec![1.0; 1000]))];
        let mut wrt = vec![true];
        if name == "scale" {
            args.push(Value::F64(2.0));
            dir.push(Some(Value::F64(1.0)));
            wrt.push(true);
        }
        let mut out = ad::Tangent::default();
        e.jvp_wrt_into(f, &args, &dir, &wrt, &mut out)
            .expect("warm-up");
        let before = allocs();
        e.jvp_wrt_into(f, &args, &dir, &wrt, &mut out)
            .expect("second call");
        let after = allocs();
        assert_eq!(after - before, 0, "@{name}: allocations in the second jvp");
        assert!(out.tangent.is_some(), "@{name}: {:?}", out.tangent);
    }
}

#[test]
fn prepared_hvp_allocates_nothing_after_warm_up() {
    for (file, name, n) in [
        ("programs/bench/powloop.adasm", "pow", 10_000),
        ("programs/bench/recursion.adasm", "rec", 100),
    ] {
        let module = assembler::assemble(&testkit::read_program(file), file)
            .unwrap_or_else(|d| panic!("{d}"));
        let mut e = Engine::new(module).expect("verifies");
        let f = e.find(name).expect("exists");
        let p = e.prepare_hvp(f, &[true, false]).expect("prepares");
        let args = [Value::F64(0.9999), Value::I64(n)];
        let (mut g, mut h) = ([0.0; 2], [0.0; 2]);
        e.hvp_prepared(&p, &args, &[1.0, 0.0], &mut g, &mut h)
            .expect("warm-up");
        let before = allocs();
        let y = e
            .hvp_prepared(&p, &args, &[1.0, 0.0], &mut g, &mut h)
            .expect("second call");
        let after = allocs();
        assert_eq!(
            after - before,
            0,
            "{file}: allocations in the second prepared hvp"
        );
        assert!(
            y.is_finite() && g[0] != 0.0 && h[0] != 0.0,
            "{y} {g:?} {h:?}"
        );
    }
}

#[test]
fn array_hvp_allocates_nothing_after_warm_up() {
    let module = assembler::assemble(
        &testkit::read_program("programs/bench/logsumexp.adasm"),
        "logsumexp.adasm",
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::new(module).expect("verifies");
    let f = e.module().funcs[0].name.clone();
    let f = e.find(&f).expect("exists");
    let types = e.module().func(f).param_types();
    let args: Vec<Value> = types
        .iter()
        .map(|t| match t {
            vm::Type::Arr => Value::Arr(vec![0.5; 64]),
            vm::Type::F64 => Value::F64(0.5),
            vm::Type::I64 => Value::I64(3),
            vm::Type::Bool => Value::Bool(true),
        })
        .collect();
    let dir: Vec<Option<Value>> = args
        .iter()
        .map(|a| match a {
            Value::Arr(xs) => Some(Value::Arr(vec![1.0; xs.len()])),
            Value::F64(_) => Some(Value::F64(1.0)),
            _ => None,
        })
        .collect();
    let mut out = ad::Hvp::default();
    e.hvp_into(f, &args, &dir, &mut out).expect("warm-up");
    let before = allocs();
    e.hvp_into(f, &args, &dir, &mut out).expect("second call");
    let after = allocs();
    assert_eq!(after - before, 0, "allocations in the second array hvp");
    assert!(out.hvp.iter().any(|h| h.is_some()));
}

/// Under an AD budget that storing everything fits, a gradient call
/// allocates nothing after warm-up either: snapshot 0 is taken only if the
/// stacks fill (powloop's arguments; logsumexp's array, which no function
/// writes), and where the call may write into the arrays live at entry
/// (`aset` into its argument) they are copied into buffers kept from the
/// warm-up call.
#[test]
fn gradients_under_a_budget_that_fits_allocate_nothing_after_warm_up() {
    const INPLACE: &str = "
fn @f(%v: f64[]) -> f64 {
entry:
    %n = alen %v
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %v, %i
    %y = sin %x
    aset %v, %i, %y
    %s2 = add %s, %y
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}";
    for (src, name, args) in [
        (
            testkit::read_program("programs/bench/powloop.adasm"),
            "pow",
            vec![Value::F64(1.0001), Value::I64(10_000)],
        ),
        (
            testkit::read_program("programs/bench/logsumexp.adasm"),
            "logsumexp",
            vec![Value::Arr(testkit::suite::sines(1000))],
        ),
        (
            INPLACE.to_string(),
            "f",
            vec![Value::Arr(testkit::suite::sines(1000))],
        ),
    ] {
        let module = assembler::assemble(&src, "t.adasm").unwrap_or_else(|d| panic!("{d}"));
        let mut e = Engine::new(module).expect("verifies");
        let f = e.find(name).expect("exists");
        let mut all = Gradient::default();
        e.grad_into(f, &args, &mut all).expect("without a budget");
        e.set_ad_budget(Some(1 << 24));
        let mut out = Gradient::default();
        e.grad_into(f, &args, &mut out).expect("warm-up");
        let before = allocs();
        e.grad_into(f, &args, &mut out).expect("second call");
        let after = allocs();
        assert_eq!(after - before, 0, "{name}: allocations in the second call");
        assert_eq!(e.recompute_factor(), 1.0, "{name}: stored everything");
        assert_eq!(format!("{out:?}"), format!("{all:?}"), "{name}");
    }
}
