//! `Engine::prepare` / `Engine::grad_prepared`: the same value and gradient
//! as `grad_wrt` (bit for bit: the same derived code runs), for functions of
//! f64, i64 and bool parameters and partial masks; arrays and mismatched
//! calls are refused with a message, never a panic.

use ad::{AdError, Engine};
use vm::Value;

const SRC: &str = "
fn @mix(%x: f64, %n: i64, %y: f64, %flip: bool) -> f64 {
entry:
    jmp head
head:
    %k = phi [entry: 0], [body: %k2]
    %r = phi [entry: %y], [body: %r2]
    %more = lt %k, %n
    br %more, body, done
body:
    %s = sin %r
    %r2 = mul %x, %s
    %k2 = add %k, 1
    jmp head
done:
    br %flip, neg, pos
neg:
    %m = neg %r
    ret %m
pos:
    ret %r
}

fn @sum(%v: f64[]) -> f64 {
entry:
    %a = aget %v, 0
    ret %a
}
";

fn engine() -> Engine {
    let module = assembler::assemble(SRC, "prepared.adasm").unwrap_or_else(|d| panic!("{d}"));
    Engine::new(module).expect("verifies")
}

fn reference(e: &mut Engine, args: &[Value], wrt: &[bool]) -> (f64, Vec<f64>) {
    let f = e.find("mix").expect("defined");
    let g = e.grad_wrt(f, args, wrt).expect("gradient");
    let grad = g
        .grad
        .iter()
        .map(|slot| match slot {
            Some(Value::F64(d)) => *d,
            _ => 0.0,
        })
        .collect();
    (g.value, grad)
}

#[test]
fn prepared_gradients_equal_grad_wrt_bit_for_bit() {
    let masks: [[bool; 4]; 3] = [
        [true, false, true, false],
        [true, false, false, false],
        [false, false, true, false],
    ];
    for wrt in masks {
        let mut e = engine();
        let f = e.find("mix").expect("defined");
        let p = e.prepare(f, &wrt).expect("prepares");
        assert_eq!(p.arity(), 4);
        let mut grad = [f64::NAN; 4];
        for (x, n, y, flip) in [
            (0.9, 0, 0.3, false),
            (0.9, 7, 0.3, true),
            (-1.7, 25, 2.0, false),
        ] {
            let args = [
                Value::F64(x),
                Value::I64(n),
                Value::F64(y),
                Value::Bool(flip),
            ];
            let v = e.grad_prepared(&p, &args, &mut grad).expect("runs");
            let (rv, rg) = reference(&mut e, &args, &wrt);
            assert_eq!(v.to_bits(), rv.to_bits(), "{wrt:?} {args:?}");
            for i in 0..4 {
                assert_eq!(
                    grad[i].to_bits(),
                    rg[i].to_bits(),
                    "entry {i}, {wrt:?} {args:?}"
                );
            }
            // Unselected and non-f64 parameters get 0.
            assert_eq!(grad[1], 0.0);
            assert_eq!(grad[3], 0.0);
            if !wrt[0] {
                assert_eq!(grad[0], 0.0);
            }
        }
    }
}

#[test]
fn a_prepared_gradient_matches_finite_differences() {
    let mut e = engine();
    let f = e.find("mix").expect("defined");
    let p = e.prepare(f, &[true, false, true, false]).expect("prepares");
    let at = |x: f64, y: f64| {
        [
            Value::F64(x),
            Value::I64(5),
            Value::F64(y),
            Value::Bool(true),
        ]
    };
    let mut g = [0.0; 4];
    e.grad_prepared(&p, &at(0.8, 0.4), &mut g).expect("runs");
    // Central differences by the one checker, `ad::fd`, each input along
    // its own axis.
    let mut val = |at: &[Value]| {
        let mut scratch = [0.0; 4];
        e.grad_prepared(&p, at, &mut scratch)
    };
    let axis = |k: usize| -> Vec<Option<Value>> {
        (0..4)
            .map(|i| (i == k).then_some(Value::F64(1.0)))
            .collect()
    };
    let base = at(0.8, 0.4);
    let dx = ad::fd::directional(&base, &axis(0), |a, _| val(a)).expect("runs");
    let dy = ad::fd::directional(&base, &axis(2), |a, _| val(a)).expect("runs");
    assert!(
        (g[0] - dx).abs() < 1e-7 * (1.0 + dx.abs()),
        "{} vs {dx}",
        g[0]
    );
    assert!(
        (g[2] - dy).abs() < 1e-7 * (1.0 + dy.abs()),
        "{} vs {dy}",
        g[2]
    );
}

fn args_error(r: Result<f64, AdError>) -> String {
    match r {
        Err(AdError::Args(m)) => m,
        other => panic!("expected an argument error, got {other:?}"),
    }
}

#[test]
fn mismatched_prepared_calls_are_refused_with_a_message() {
    let mut e = engine();
    let f = e.find("mix").expect("defined");
    let p = e.prepare(f, &[true, false, true, false]).expect("prepares");
    let good = [
        Value::F64(1.0),
        Value::I64(3),
        Value::F64(0.5),
        Value::Bool(false),
    ];
    let mut g4 = [0.0; 4];
    let m = args_error(e.grad_prepared(&p, &good[..3], &mut g4));
    assert!(m.contains("3 argument(s)"), "{m}");
    let m = args_error(e.grad_prepared(&p, &good, &mut [0.0; 2]));
    assert!(m.contains("gradient buffer of 2"), "{m}");
    let mut wrong = good.clone();
    wrong[1] = Value::F64(3.0);
    let m = args_error(e.grad_prepared(&p, &wrong, &mut g4));
    assert!(m.contains("argument 2 of @mix must be i64, got f64"), "{m}");
    // Another engine's preparation.
    let mut other = engine();
    let m = args_error(other.grad_prepared(&p, &good, &mut g4));
    assert!(m.contains("another engine"), "{m}");
    // Still usable after the refusals.
    assert!(e.grad_prepared(&p, &good, &mut g4).is_ok());
}

#[test]
fn arrays_and_bad_masks_cannot_be_prepared() {
    let mut e = engine();
    let sum = e.find("sum").expect("defined");
    match e.prepare(sum, &[true]) {
        Err(AdError::Args(m)) => assert!(m.contains("%v is an array"), "{m}"),
        other => panic!("expected an argument error, got {other:?}"),
    }
    let mix = e.find("mix").expect("defined");
    // An i64 parameter selected, and a mask of the wrong length.
    assert!(matches!(
        e.prepare(mix, &[false, true, false, false]),
        Err(AdError::Args(_))
    ));
    assert!(matches!(e.prepare(mix, &[true]), Err(AdError::Args(_))));
}
