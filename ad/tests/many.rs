//! `Engine::grad_many` and cloned engines: many points in parallel give,
//! point for point, the very value and gradient of one `grad_prepared` call
//! (bit for bit: the same derived code runs), whatever the number of
//! threads; a failing point is reported and the others still run; clones
//! share the derived code and keep their own state; and the allocations of
//! a call do not grow with the number of points.

use ad::{AdError, Engine};
use vm::Value;

#[global_allocator]
static GLOBAL: testkit::alloc::Counting = testkit::alloc::Counting;

/// `@pow`: x^n by a loop. `@trunc(x) = x * itof(ftoi x)`, which traps for
/// x = nan (`ftoi`). `@sq(x) = x * x`.
const SRC: &str = "
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

fn @trunc(%x: f64) -> f64 {
entry:
    %i = ftoi %x
    %f = itof %i
    %y = mul %x, %f
    ret %y
}

fn @sq(%x: f64) -> f64 {
entry:
    %y = mul %x, %x
    ret %y
}
";

fn engine() -> Engine {
    let module = assembler::assemble(SRC, "many.adasm").unwrap_or_else(|d| panic!("{d}"));
    Engine::new(module).expect("verifies")
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

fn pow_points(n: usize) -> Vec<[Value; 2]> {
    (0..n)
        .map(|i| {
            [
                Value::F64(0.5 + i as f64 / n as f64),
                Value::I64((i % 37) as i64),
            ]
        })
        .collect()
}

#[test]
fn many_points_equal_one_call_each_on_any_number_of_threads() {
    let mut e = engine();
    let f = e.find("pow").expect("defined");
    let p = e.prepare(f, &[true, false]).expect("prepares");
    let points = pow_points(1000);
    let mut expected = Vec::new();
    for pt in &points {
        let mut g = [0.0; 2];
        let v = e.grad_prepared(&p, pt, &mut g).expect("one call");
        expected.push((v, g));
    }
    for threads in [1, 2, 3] {
        let (mut values, mut grads) = (vec![0.0; 1000], vec![0.0; 2000]);
        let failed = pool(threads)
            .install(|| e.grad_many(&p, &points, &mut values, &mut grads))
            .expect("shapes fit");
        assert!(failed.is_empty(), "{threads} threads: {failed:?}");
        for (i, (v, g)) in expected.iter().enumerate() {
            assert_eq!(values[i].to_bits(), v.to_bits(), "value {i}");
            assert_eq!(grads[2 * i].to_bits(), g[0].to_bits(), "∂x {i}");
            assert_eq!(grads[2 * i + 1], 0.0, "∂n {i} (i64: no gradient)");
        }
    }
    // And against the identity d/dx x^n = n x^(n-1) (the loop multiplies
    // n times, so allow rounding).
    for (i, pt) in points.iter().enumerate() {
        let ([Value::F64(x), Value::I64(n)], (_, g)) = (pt, &expected[i]) else {
            unreachable!("points are built as (f64, i64)")
        };
        let exact = *n as f64 * x.powi(*n as i32 - 1);
        assert!(
            (g[0] - exact).abs() <= 1e-12 * exact.abs().max(1.0),
            "point {i}: {} vs {exact}",
            g[0]
        );
    }
}

#[test]
fn a_failing_point_is_reported_and_the_others_run() {
    let mut e = engine();
    let f = e.find("trunc").expect("defined");
    let p = e.prepare(f, &[true]).expect("prepares");
    let mut points: Vec<Vec<Value>> = (0..50).map(|i| vec![Value::F64(i as f64 + 0.5)]).collect();
    points[7] = vec![Value::F64(f64::NAN)];
    points[31] = vec![Value::I64(3)];
    let (mut values, mut grads) = (vec![0.0; 50], vec![0.0; 50]);
    let failed = pool(2)
        .install(|| e.grad_many(&p, &points, &mut values, &mut grads))
        .expect("shapes fit");
    let at: Vec<usize> = failed.iter().map(|(i, _)| *i).collect();
    assert_eq!(at, [7, 31]);
    assert!(
        matches!(&failed[0].1, AdError::Trap(t) if t.to_string().contains("ftoi")),
        "{}",
        failed[0].1
    );
    assert!(
        matches!(&failed[1].1, AdError::Args(m) if m.contains("must be f64")),
        "{}",
        failed[1].1
    );
    for i in [7, 31] {
        assert!(values[i].is_nan() && grads[i].is_nan(), "point {i}");
    }
    for (i, pt) in points.iter().enumerate() {
        if i == 7 || i == 31 {
            continue;
        }
        let Value::F64(x) = pt[0] else {
            unreachable!("f64 point")
        };
        // y = x * trunc(x): dy/dx = trunc(x) (ftoi has no derivative).
        let t = x.trunc();
        assert_eq!((values[i], grads[i]), (x * t, t), "point {i}");
    }
}

#[test]
fn wrong_buffers_and_foreign_gradients_are_refused() {
    let mut e = engine();
    let f = e.find("sq").expect("defined");
    let p = e.prepare(f, &[true]).expect("prepares");
    let points = [[Value::F64(1.0)], [Value::F64(2.0)]];
    let mut values = [0.0; 2];
    let err = e
        .grad_many(&p, &points, &mut values, &mut [0.0; 3])
        .expect_err("three gradient entries for two points");
    assert!(err.to_string().contains("buffers hold 2 and 3"), "{err}");
    let other = engine();
    let err = other
        .grad_many(&p, &points, &mut values, &mut [0.0; 2])
        .expect_err("prepared elsewhere");
    assert!(err.to_string().contains("another engine"), "{err}");
    let none: [[Value; 1]; 0] = [];
    assert!(e
        .grad_many(&p, &none, &mut [], &mut [])
        .expect("no points")
        .is_empty());
}

#[test]
fn clones_share_derived_code_and_keep_their_own_state() {
    let mut e = engine();
    let sq = e.find("sq").expect("defined");
    let pow = e.find("pow").expect("defined");
    let p_sq = e.prepare(sq, &[true]).expect("prepares");
    let len = e.program().len();
    let mut c = e.clone();
    // Prepared before the clone: valid for the clone, same result.
    let mut g = [0.0];
    assert_eq!(
        c.grad_prepared(&p_sq, &[Value::F64(3.0)], &mut g).ok(),
        Some(9.0)
    );
    assert_eq!(g, [6.0]);
    // The clone derives `@pow`; the original does not see it, and the
    // original's own `@pow` gradient, made later, is refused by the clone
    // (its functions may differ there), not run.
    let p_pow_clone = c.prepare(pow, &[true, false]).expect("prepares");
    assert_eq!(
        e.program().len(),
        len,
        "the original's program is unchanged"
    );
    assert!(c.program().len() > len);
    let p_pow = e.prepare(pow, &[true, false]).expect("prepares");
    let mut g2 = [0.0; 2];
    let args = [Value::F64(2.0), Value::I64(10)];
    let err = c
        .grad_prepared(&p_pow, &args, &mut g2)
        .expect_err("prepared by the original after the clone");
    assert!(err.to_string().contains("another engine"), "{err}");
    assert!(e.grad_prepared(&p_pow_clone, &args, &mut g2).is_err());
    assert_eq!(
        c.grad_prepared(&p_pow_clone, &args, &mut g2).ok(),
        Some(1024.0)
    );
    assert_eq!(g2, [5120.0, 0.0]);
    assert_eq!(e.grad_prepared(&p_pow, &args, &mut g2).ok(), Some(1024.0));
    assert_eq!(g2, [5120.0, 0.0]);
    // Limits are copied, and each engine keeps its own.
    e.vm_mut().limits_mut().fuel = Some(5);
    let mut d = e.clone();
    assert!(
        d.grad_prepared(&p_pow, &args, &mut g2).is_err(),
        "fuel 5 traps"
    );
    d.vm_mut().limits_mut().fuel = None;
    assert!(d.grad_prepared(&p_pow, &args, &mut g2).is_ok());
    assert!(
        e.grad_prepared(&p_pow, &args, &mut g2).is_err(),
        "still fuel 5"
    );
}

/// Allocations of every thread of `pool` and of this one.
fn allocs_everywhere(pool: &rayon::ThreadPool) -> usize {
    let workers: usize = pool
        .broadcast(|_| testkit::alloc::allocs())
        .iter()
        .sum::<usize>();
    workers + testkit::alloc::allocs()
}

#[test]
fn allocations_do_not_grow_with_the_number_of_points() {
    let mut e = engine();
    let f = e.find("pow").expect("defined");
    let p = e.prepare(f, &[true, false]).expect("prepares");
    let pool = pool(2);
    let count = |n: usize| {
        let points = pow_points(n);
        let (mut values, mut grads) = (vec![0.0; n], vec![0.0; 2 * n]);
        // Warm up the pool and the engine's buffers first.
        pool.install(|| e.grad_many(&p, &points, &mut values, &mut grads))
            .expect("warm-up");
        let before = allocs_everywhere(&pool);
        let failed = pool
            .install(|| e.grad_many(&p, &points, &mut values, &mut grads))
            .expect("runs");
        let after = allocs_everywhere(&pool);
        assert!(failed.is_empty());
        after - before
    };
    let small = count(16);
    let large = count(20_000);
    // Per call and per thread (two clones, their VMs' buffers, rayon's
    // jobs), never per point: 20 000 points allocate about as often as 16.
    assert!(large < 200, "{large} allocations for 20 000 points");
    assert!(
        large <= small + 40,
        "{large} allocations for 20 000 points, {small} for 16"
    );
}
