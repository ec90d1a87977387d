//! Limits in the native tier: fuel (every limit from 0 up, with the exact
//! instruction count), call depth, array length, heap bytes and AD stack
//! bytes give the interpreter's traps, at the same instruction; an endless
//! loop is stopped by the interrupt flag.

use ad::Engine;
use std::sync::atomic::Ordering;
use std::time::Duration;
use vm::{Limits, Tier, Value};

const SRC: &str = r#"
fn @leaf(%x: f64) -> f64 {
entry:
    %y = mul %x, %x
    ret %y
}

fn @mid(%x: f64) -> f64 {
entry:
    %a = call @leaf(%x)
    %b = sin %a
    ret %b
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
    %m = call @mid(%r)
    %r2 = add %m, %x
    %k2 = sub %k, 1
    jmp head
done:
    ret %r
}

fn @fill(%n: i64, %x: f64) -> f64 {
entry:
    %v = anew %n
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    aset %v, %i, %x
    %e = aget %v, %i
    %t = mul %e, %x
    %s2 = add %s, %t
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}

fn @forever(%x: f64) -> f64 {
entry:
    jmp head
head:
    %r = phi [entry: %x], [head: %r2]
    %r2 = add %r, 1.0
    jmp head
}
"#;

/// Engines without and with the native tier, with the same limits.
fn pair(limits: &Limits) -> (Engine, Engine) {
    let module = assembler::assemble(SRC, "limits.adasm").unwrap_or_else(|d| panic!("{d}"));
    let mut interp = Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
    let mut native = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    jit::install_eager(native.vm_mut());
    *interp.vm_mut().limits_mut() = limits.clone();
    *native.vm_mut().limits_mut() = limits.clone();
    (interp, native)
}

/// Run and differentiate `name` in both tiers: the same results, traps and
/// instruction counts; `true` if the native tier ran.
fn same(limits: &Limits, name: &str, args: &[Value]) -> bool {
    let (mut a, mut b) = pair(limits);
    same_in(&mut a, &mut b, limits, name, args)
}

/// [`same`] in engines that may have run (and trapped) before, under
/// `limits` from now on: the native tier keeps the code it compiled.
fn same_in(a: &mut Engine, b: &mut Engine, limits: &Limits, name: &str, args: &[Value]) -> bool {
    *a.vm_mut().limits_mut() = limits.clone();
    *b.vm_mut().limits_mut() = limits.clone();
    crate::tiers::same(a, b, name, args).native
}

#[test]
fn fuel_traps_at_the_same_instruction() {
    // One pair of engines for every fuel: each call starts afresh after a
    // trap, and the native tier compiles the code once.
    let (mut a, mut b) = pair(&Limits::default());
    let args = [Value::F64(0.5), Value::I64(4)];
    let mut traps = 0;
    for fuel in 0..160 {
        let limits = Limits {
            fuel: Some(fuel),
            ..Limits::default()
        };
        assert!(
            same_in(&mut a, &mut b, &limits, "top", &args),
            "native tier ran"
        );
        let f = b.find("top").expect("exists");
        if let Err(ad::AdError::Trap(t)) = b.run(f, &args) {
            assert!(matches!(t.kind, vm::TrapKind::OutOfFuel { .. }), "{t}");
            traps += 1;
        }
    }
    // Fuel runs out below the count and suffices from it on.
    assert!(traps > 20 && traps < 160, "{traps}");
    // A fuel in the middle of the range, from fresh engines as well.
    assert!(same(
        &Limits {
            fuel: Some(40),
            ..Limits::default()
        },
        "top",
        &args
    ));
    let args = [Value::I64(5), Value::F64(1.5)];
    for fuel in 0..80 {
        let limits = Limits {
            fuel: Some(fuel),
            ..Limits::default()
        };
        same_in(&mut a, &mut b, &limits, "fill", &args);
    }
}

#[test]
fn traps_and_returns_alternate_in_one_tier() {
    // The tier keeps its context from call to call: what a trap left in
    // it (its kind, call stack and count) must not reach the next call.
    let (mut a, mut b) = pair(&Limits::default());
    let args = [Value::F64(0.5), Value::I64(3)];
    for _ in 0..3 {
        for (depth, traps) in [(2, true), (64, false), (1, true), (64, false)] {
            let limits = Limits {
                max_call_depth: depth,
                ..Limits::default()
            };
            *a.vm_mut().limits_mut() = limits.clone();
            *b.vm_mut().limits_mut() = limits;
            let both = crate::tiers::same(&mut a, &mut b, "top", &args);
            assert!(both.native);
            assert_eq!(both.trapped, traps, "depth {depth}: {}", both.text);
        }
    }
}

#[test]
fn depth_limit_traps_at_the_same_call() {
    let args = [Value::F64(0.5), Value::I64(3)];
    for depth in 1..5 {
        let limits = Limits {
            max_call_depth: depth,
            ..Limits::default()
        };
        assert!(same(&limits, "top", &args));
    }
}

#[test]
fn array_heap_and_stack_limits_trap_alike() {
    let args = [Value::I64(100), Value::F64(1.5)];
    for max_array_len in [0, 50, 99, 100, 1000] {
        let limits = Limits {
            max_array_len,
            ..Limits::default()
        };
        assert!(same(&limits, "fill", &args));
    }
    for max_heap_bytes in [0, 100, 800, 900, 4000, 100_000] {
        let limits = Limits {
            max_heap_bytes,
            ..Limits::default()
        };
        same(&limits, "fill", &args);
    }
    for max_stack_bytes in [0, 8, 64, 512, 2048, 1 << 20] {
        let limits = Limits {
            max_stack_bytes,
            ..Limits::default()
        };
        same(&limits, "fill", &args);
        same(&limits, "top", &[Value::F64(0.5), Value::I64(40)]);
    }
    // The AD budget: the same trap (bytes needed, where the stacks first
    // filled up) or the same gradient, in-place pushes included.
    for ad_budget in [0, 8, 64, 300, 2048, 1 << 20] {
        let limits = Limits {
            ad_budget: Some(ad_budget),
            ..Limits::default()
        };
        same(&limits, "fill", &args);
        same(&limits, "top", &[Value::F64(0.5), Value::I64(40)]);
    }
    let (mut a, mut b) = pair(&Limits::default());
    let f = a.find("top").expect("exists");
    let big = [Value::F64(0.5), Value::I64(400)];
    // A warm-up without a budget grows the stacks; the budget set after
    // it must still hold in place.
    let (ga, gb) = (a.grad(f, &big), b.grad(f, &big));
    assert_eq!(format!("{ga:?}"), format!("{gb:?}"));
    let all = format!("{gb:?}");
    // Checkpointed under the budget: the same gradient in both tiers.
    a.set_ad_budget(Some(256));
    b.set_ad_budget(Some(256));
    let (ga, gb) = (a.grad(f, &big), b.grad(f, &big));
    assert_eq!(format!("{ga:?}"), format!("{gb:?}"));
    assert_eq!(format!("{gb:?}"), all);
    assert!(b.recompute_factor() > 1.0);
    assert!(b.vm_mut().stack_high_water_bytes() <= 256);
    // Bad arguments are the interpreter's to report.
    let (mut a, mut b) = pair(&Limits::default());
    let f = a.find("fill").expect("exists");
    let (ra, rb) = (
        a.run(f, &[Value::I64(-1), Value::F64(1.0)]),
        b.run(f, &[Value::I64(-1), Value::F64(1.0)]),
    );
    assert_eq!(format!("{ra:?}"), format!("{rb:?}"));
    assert!(format!("{rb:?}").contains("NegativeLength"));
}

#[test]
fn an_endless_loop_is_interrupted() {
    let (_, mut b) = pair(&Limits::default());
    let f = b.find("forever").expect("exists");
    let flag = b.vm_mut().interrupt_handle();
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        flag.store(true, Ordering::Relaxed);
    });
    let r = b.run(f, &[Value::F64(0.0)]);
    setter.join().expect("joins");
    assert_eq!(b.vm_mut().last_tier(), Tier::Native);
    match r {
        Err(ad::AdError::Trap(t)) => {
            assert_eq!(t.kind, vm::TrapKind::Interrupted);
            assert_eq!(t.func, "forever");
            assert!(t.instr.starts_with("jmp"), "{t}");
        }
        other => panic!("{other:?}"),
    }
}
