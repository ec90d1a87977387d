//! Counted loops (`jit/src/loops.rs`, `Counted`): the native tier runs an
//! innermost loop stepped by a counter in a copy without fuel, interrupt
//! and bounds checks when a guard on entry finds that none would fire. The
//! guard must never pick that copy when one would: around every bound
//! (the array's length, the loop's bound, a start on the wrong side of it,
//! offsets that wrap), at every fuel, the results, traps, instruction
//! counts and gradients are the interpreter's, and a counted loop too long
//! for the copy is still interrupted.

use ad::Engine;
use std::sync::atomic::Ordering;
use std::time::Duration;
use vm::{Limits, Tier, Value};

const SRC: &str = r#"
fn @up(%a: f64[], %lo: i64, %hi: i64, %off: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: %lo], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %hi
    br %c, body, done
body:
    %k = add %i, %off
    %x = aget %a, %k
    %y = aget %a, %i
    %t = mul %x, %y
    %s2 = add %s, %t
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}

fn @down(%a: f64[], %lo: i64, %hi: i64, %off: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: %hi], [body: %i2]
    %s = phi [entry: 1.0], [body: %s2]
    %c = gt %i, %lo
    br %c, body, done
body:
    %k = add %off, %i
    %x = aget %a, %k
    %t = mul %x, %s
    %s2 = add %t, 0.5
    %i2 = sub %i, 1
    jmp head
done:
    ret %s
}

fn @scale(%a: f64[], %lo: i64, %hi: i64, %off: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: %lo], [join: %i2]
    %c = lt %i, %hi
    br %c, body, done
body:
    %x = aget %a, %i
    %p = gt %x, 0.0
    br %p, pos, join
pos:
    %y = aget %a, %off
    %z = mul %x, %y
    aset %a, %i, %z
    jmp join
join:
    %i2 = add %i, 1
    jmp head
done:
    %r = aget %a, 0
    ret %r
}

fn @nest(%a: f64[], %n: i64, %m: i64) -> f64 {
entry:
    jmp outer
outer:
    %j = phi [entry: 0], [inner_done: %j2]
    %s = phi [entry: 0.0], [inner_done: %s3]
    %co = lt %j, %m
    br %co, inner_start, done
inner_start:
    jmp inner
inner:
    %i = phi [inner_start: 0], [ibody: %i2]
    %t = phi [inner_start: %s], [ibody: %t2]
    %ci = lt %i, %n
    br %ci, ibody, inner_done
ibody:
    %x = aget %a, %i
    %t2 = add %t, %x
    %i2 = add %i, 1
    jmp inner
inner_done:
    %s3 = mul %t, 0.5
    %j2 = add %j, 1
    jmp outer
done:
    ret %s
}

fn @expsum(%a: f64[], %n: i64, %z: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %a, %i
    %e = exp %x
    %d = sub %z, %i
    %q = div 7, %d
    %qf = itof %q
    %t = add %e, %qf
    %s2 = add %s, %t
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}

fn @expdown(%a: f64[], %n: i64, %z: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: %n], [body: %i2]
    %s = phi [entry: 1.0], [body: %s2]
    %c = gt %i, 0
    br %c, body, done
body:
    %k = sub %i, 1
    %x = aget %a, %k
    %e = sin %x
    %d = sub %z, %i
    %q = div 7, %d
    %qf = itof %q
    %t = mul %e, %qf
    %s2 = add %s, %t
    %i2 = sub %i, 1
    jmp head
done:
    ret %s
}

fn @maxexp(%a: f64[], %n: i64) -> f64 {
entry:
    %m0 = aget %a, 0
    jmp mhead
mhead:
    %i = phi [entry: 1], [mbody: %i2]
    %m = phi [entry: %m0], [mbody: %m2]
    %c = lt %i, %n
    br %c, mbody, shead
mbody:
    %e = aget %a, %i
    %m2 = max %m, %e
    %i2 = add %i, 1
    jmp mhead
shead:
    %j = phi [mhead: 0], [sbody: %j2]
    %s = phi [mhead: %m], [sbody: %s2]
    %d = lt %j, %n
    br %d, sbody, done
sbody:
    %x = aget %a, %j
    %y = sub %x, %m
    %z = exp %y
    %s2 = add %s, %z
    %j2 = add %j, 1
    jmp shead
done:
    %r = add %m, %s
    ret %r
}

fn @pick(%a: f64[], %n: i64, %t: f64) -> f64 {
entry:
    %s0 = aget %a, 0
    jmp head
head:
    %i = phi [entry: 1], [body: %i2]
    %s = phi [entry: %s0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %a, %i
    %p = lt %x, %t
    %s2 = select %p, %s, %x
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}

fn @spin(%n: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %s2 = add %s, 1.0
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}
"#;

/// Engines without and with the native tier.
fn pair() -> (Engine, Engine) {
    let module = assembler::assemble(SRC, "counted.adasm").unwrap_or_else(|d| panic!("{d}"));
    let interp = Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
    let mut native = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    jit::install_eager(native.vm_mut());
    (interp, native)
}

/// Run and differentiate `name` on `args` in both engines under `limits`:
/// the same results, traps and counts. Whether the primal trapped.
fn same(a: &mut Engine, b: &mut Engine, limits: &Limits, name: &str, args: &[Value]) -> bool {
    *a.vm_mut().limits_mut() = limits.clone();
    *b.vm_mut().limits_mut() = limits.clone();
    let both = crate::tiers::same(a, b, name, args);
    assert!(both.native, "{name}");
    both.trapped
}

fn array(n: usize) -> Value {
    Value::Arr((0..n).map(|i| (i as f64 * 0.7).sin() + 0.25).collect())
}

#[test]
fn every_start_bound_and_offset_around_the_lengths_agrees() {
    let (mut a, mut b) = pair();
    let n = 6i64;
    let limits = Limits::default();
    let starts = [-2, -1, 0, 1, 3, n - 1, n];
    let bounds = [-3, -1, 0, 1, 3, n - 1, n, n + 1, 9];
    let offsets = [-3, -1, 0, 1, 2, n - 1, n, i64::MAX, i64::MIN, i64::MIN + 1];
    let (mut ok, mut trapped) = (0, 0);
    for name in ["up", "down", "scale"] {
        for lo in starts {
            for hi in bounds {
                for off in offsets {
                    let args = [
                        array(n as usize),
                        Value::I64(lo),
                        Value::I64(hi),
                        Value::I64(off),
                    ];
                    if same(&mut a, &mut b, &limits, name, &args) {
                        trapped += 1;
                    } else {
                        ok += 1;
                    }
                }
            }
        }
    }
    // Both kinds of outcome, many of each.
    assert!(ok > 300 && trapped > 300, "{ok} {trapped}");
}

/// A one-block counted loop that calls a math function counts its
/// instructions from its counter in the unchecked copy (jit.md, *Counted
/// loops*): a trap in any iteration, going up or down, has the
/// interpreter's count, as has a run to the end.
#[test]
fn a_trap_in_any_iteration_of_a_loop_with_a_math_call_agrees() {
    let (mut a, mut b) = pair();
    let limits = Limits::default();
    let mut trapped = 0;
    for name in ["expsum", "expdown"] {
        for z in -1..9 {
            let args = [array(7), Value::I64(7), Value::I64(z)];
            if same(&mut a, &mut b, &limits, name, &args) {
                trapped += 1;
            }
        }
    }
    // `z` inside the counter's range traps (7 values each way).
    assert_eq!(trapped, 14);
}

/// The `f64` values a counted loop writes that are live across a call
/// (`maxexp`'s maximum, carried out of its first loop and across the
/// second's `exp` calls; the second's sum, which starts as the maximum)
/// are defined again on the edges into and out of the unchecked copy
/// (jit.md, *Counted loops*): by a move through an integer register,
/// which keeps every bit, a nan's payload and a zero's sign included;
/// and an `f64` `select` (`pick`) picks one of its operands' bits.
#[test]
fn values_carried_through_counted_loops_and_selects_keep_their_bits() {
    let (mut a, mut b) = pair();
    let nan = f64::from_bits(0x7ff8_0000_dead_beef);
    let inputs = [
        vec![nan, 1.0, 2.0],
        vec![-nan, 1.0, 2.0],
        vec![1.0, nan],
        vec![2.0, 1.0, -nan],
        vec![-0.0, -0.0, -0.0],
        vec![0.5, -1.25, 2.0, 0.75],
        vec![f64::NEG_INFINITY, f64::NEG_INFINITY],
    ];
    for (name, v) in inputs
        .iter()
        .flat_map(|v| [("maxexp", v.clone()), ("pick", v.clone())])
    {
        let n = v.len() as i64;
        let mut args = vec![Value::Arr(v.clone()), Value::I64(n)];
        if name == "pick" {
            args.push(Value::F64(1.5));
        }
        let f = a.find(name).expect("exists");
        let bits = |r: Result<Value, ad::AdError>| match r {
            Ok(Value::F64(x)) => x.to_bits(),
            other => panic!("{other:?}"),
        };
        let x = bits(a.run(f, &args));
        let y = bits(b.run(f, &args));
        assert_eq!(b.vm_mut().last_tier(), Tier::Native);
        assert_eq!(
            x,
            y,
            "{name} {v:?}: {} against {}",
            f64::from_bits(x),
            f64::from_bits(y)
        );
        same(&mut a, &mut b, &Limits::default(), name, &args);
    }
}

#[test]
fn every_fuel_through_counted_loops_agrees() {
    let (mut a, mut b) = pair();
    let cases: [(&str, Vec<Value>); 6] = [
        (
            "up",
            vec![array(8), Value::I64(0), Value::I64(8), Value::I64(0)],
        ),
        (
            "down",
            vec![array(8), Value::I64(-1), Value::I64(6), Value::I64(1)],
        ),
        (
            "scale",
            vec![array(8), Value::I64(1), Value::I64(8), Value::I64(2)],
        ),
        ("nest", vec![array(5), Value::I64(5), Value::I64(4)]),
        ("expsum", vec![array(6), Value::I64(6), Value::I64(-1)]),
        ("expdown", vec![array(6), Value::I64(6), Value::I64(9)]),
    ];
    for (name, args) in &cases {
        // The instructions of a whole run, then every fuel up to them.
        let f = a.find(name).expect("exists");
        *a.vm_mut().limits_mut() = Limits::default();
        a.run(f, args).expect("runs");
        let total = a.vm_mut().executed();
        let mut traps = 0;
        for fuel in 0..=total + 2 {
            let limits = Limits {
                fuel: Some(fuel),
                ..Limits::default()
            };
            if same(&mut a, &mut b, &limits, name, args) {
                traps += 1;
            }
        }
        assert!(traps > 0 && traps <= total, "{name}: {traps} of {total}");
    }
}

#[test]
fn a_counted_loop_too_long_for_the_unchecked_copy_is_interrupted() {
    let (_, mut b) = pair();
    // A loop of 2^40 iterations (the unchecked copy takes at most 2^20
    // instructions), and an inner loop of 1 000 run over and over: both
    // stop.
    let runs = [
        ("spin", vec![Value::I64(1 << 40)]),
        (
            "nest",
            vec![
                Value::Arr(vec![1.0; 1000]),
                Value::I64(1000),
                Value::I64(i64::MAX),
            ],
        ),
    ];
    for (name, args) in &runs {
        let f = b.find(name).expect("exists");
        let flag = b.vm_mut().interrupt_handle();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::Relaxed);
        });
        let r = b.run(f, args);
        setter.join().expect("joins");
        b.vm_mut()
            .interrupt_handle()
            .store(false, Ordering::Relaxed);
        assert_eq!(b.vm_mut().last_tier(), Tier::Native);
        match r {
            Err(ad::AdError::Trap(t)) => assert_eq!(t.kind, vm::TrapKind::Interrupted, "{t}"),
            other => panic!("{other:?}"),
        }
    }
}

/// A loop that only pushes on the comms stack while it pushes two block
/// ids and pops one per iteration: growing the block stack under
/// `--max-stack-bytes` may give back the comms stack's spare room
/// (`grow_stack`), so the comms pushes keep their room check. `@fill`
/// first grows the comms stack to the limit (and traps there); its room
/// stays for `@mix`, whose guard would then find room for every comms
/// push, but whose block stack, growing, gives that room back. Both tiers
/// give the same results, traps, counts and stacks at every limit.
#[test]
fn pushes_beside_a_stack_pushed_and_popped_keep_their_checks() {
    let listing = "\
fn @mix(%n: i64) -> f64   ; 6 regs, 3 consts
  ; consts: r1 = 0, r2 = 1, r3 = 1.5
entry:
  0000  copy        %i, 0
  0001  copy        %x, 1.5
body:
  0002  comms.push  %x
  0003  blk.push    0
  0004  blk.push    1
  0005  blk.pop     [step: 0006, step: 0006]
step:
  0006  jmp.step.if.lt.i %i += 1, %n, -> body (0002)
  0007  ret         %x

fn @fill(%n: i64) -> f64   ; 6 regs, 3 consts
  ; consts: r1 = 0, r2 = 1, r3 = 1.5
entry:
  0000  copy        %i, 0
  0001  copy        %x, 1.5
body:
  0002  comms.push  %x
  0003  jmp.step.if.lt.i %i += 1, %n, -> body (0002)
  0004  ret         %x
";
    let mut p =
        assembler::assemble_listing(listing, "mix").unwrap_or_else(|d| panic!("{}", d.render()));
    for g in 0..p.len() {
        vm::verify::verify_function(&mut p, vm::ir::FuncId(g as u32)).expect("verifies");
    }
    let (mix, fill) = (vm::ir::FuncId(0), vm::ir::FuncId(1));
    let mut traps = 0;
    for limit in (256..8192).step_by(248) {
        let limits = Limits {
            max_stack_bytes: limit,
            ..Limits::default()
        };
        let mut outs = Vec::new();
        for native in [false, true] {
            let mut m = vm::Vm::new(limits.clone());
            if native {
                jit::install_eager(&mut m);
            }
            let mut out = String::new();
            for (f, n) in [(fill, 100_000u64), (mix, 200), (mix, 200)] {
                m.begin(true);
                let r = m.call_raw(&p, f, &[n]);
                traps += usize::from(native && r.is_err());
                out += &format!(
                    "{r:?} {:?} {} {} {}; ",
                    m.results(),
                    m.executed(),
                    m.comms_len(),
                    m.blk_len()
                );
            }
            if native {
                assert_eq!(m.last_tier(), Tier::Native);
            }
            outs.push(out);
        }
        assert_eq!(outs[0], outs[1], "limit {limit}");
    }
    assert!(traps > 0, "the limit stops the loops");
}
