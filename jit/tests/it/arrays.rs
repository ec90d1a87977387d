//! Arrays in place: compiled code reads and writes array elements and
//! shadows without a helper call while the handle is live and the index in
//! bounds, and leaves everything else to the helpers. These tests check that
//! both tiers agree (values, gradients, traps, instruction counts) on every
//! index around the bounds and across an
//! allocation that gives back spare buffers (which may move live arrays'
//! buffers, after which compiled code must use their new place).

use ad::Engine;
use vm::{Limits, Tier, Value};

const SRC: &str = r#"
fn @at(%i: i64, %x: f64) -> f64 {
entry:
    %a = anew 4
    aset %a, %i, %x
    %e = aget %a, %i
    %n = alen %a
    %f = itof %n
    %y = mul %e, %e
    %z = add %y, %f
    ret %z
}

fn @grow(%n: i64, %x: f64) -> f64 {
entry:
    %v = anew %n
    aset %v, 0, %x
    %e = aget %v, 0
    ret %e
}

fn @moved(%m: i64, %x: f64) -> f64 {
entry:
    %a = anew 4
    jmp fill
fill:
    %i = phi [entry: 0], [fill: %i2]
    %fi = itof %i
    %v = mul %fi, %x
    aset %a, %i, %v
    %i2 = add %i, 1
    %c = lt %i2, 4
    br %c, fill, more
more:
    %b = anew %m
    %last = sub %m, 1
    aset %b, %last, %x
    jmp sum
sum:
    %j = phi [more: 0], [sum: %j2]
    %s = phi [more: 0.0], [sum: %s2]
    %e = aget %a, %j
    %t = mul %e, %e
    %s2 = add %s, %t
    %j2 = add %j, 1
    %d = lt %j2, 4
    br %d, sum, done
done:
    %l = aget %b, %last
    %r = mul %s2, %l
    ret %r
}
"#;

/// Engines without and with the native tier, with the same limits.
fn pair(limits: &Limits) -> (Engine, Engine) {
    pair_of(SRC, limits)
}

/// [`pair`] for the program `src`.
fn pair_of(src: &str, limits: &Limits) -> (Engine, Engine) {
    let module = assembler::assemble(src, "arrays.adasm").unwrap_or_else(|d| panic!("{d}"));
    let mut interp = Engine::with_inlining(module.clone(), &ad::Policy::NONE).expect("verifies");
    let mut native = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    jit::install_eager(native.vm_mut());
    *interp.vm_mut().limits_mut() = limits.clone();
    *native.vm_mut().limits_mut() = limits.clone();
    (interp, native)
}

/// Run and differentiate `name` on `args` in both engines: the same
/// results, traps and counts ([`crate::tiers::same`]). Returns the
/// primal's `Debug` text and whether the native tier ran it.
fn same(a: &mut Engine, b: &mut Engine, name: &str, args: &[Value]) -> (String, bool) {
    let both = crate::tiers::same(a, b, name, args);
    (both.text, both.native)
}

#[test]
fn every_index_around_the_bounds_agrees() {
    let (mut a, mut b) = pair(&Limits::default());
    let mut traps = 0;
    for i in [i64::MIN, -5, -1, 0, 1, 3, 4, 5, 1 << 40, i64::MAX] {
        let (text, ran) = same(&mut a, &mut b, "at", &[Value::I64(i), Value::F64(1.5)]);
        assert!(ran, "the native tier ran @at({i})");
        if text.contains("OutOfBounds") {
            traps += 1;
        } else {
            assert!(text.contains("6.25"), "{i}: {text}");
        }
    }
    // In bounds: 0, 1, 3; every other index traps.
    assert_eq!(traps, 7);
}

/// A first call leaves a large spare buffer; the second call's small array
/// gets it, and its next allocation would take the heap past its limit, so
/// the heap gives back spare capacity first (shrinking the live small
/// array's buffer, which may move it) before compiled code reads the small
/// array again.
#[test]
fn arrays_are_read_where_they_are_after_spare_buffers_go_back() {
    let limits = Limits {
        max_heap_bytes: 8000,
        ..Limits::default()
    };
    let (mut a, mut b) = pair(&limits);
    let x = Value::F64(1.25);
    for m in [1, 300, 440, 600, 900] {
        let (text, ran) = same(&mut a, &mut b, "grow", &[Value::I64(400), x.clone()]);
        assert!(ran && text.contains("Ok"), "{text}");
        let (text, ran) = same(&mut a, &mut b, "moved", &[Value::I64(m), x.clone()]);
        assert!(ran, "the native tier ran @moved({m})");
        // 1.25^2 (0 + 1 + 4 + 9) * 1.25 = 27.34375, where the heap fits.
        assert!(
            text.contains("27.34375") || text.contains("HeapLimit"),
            "{m}: {text}"
        );
    }
}

/// `@twice` (2v) with a rule whose tangent array is one element longer
/// than the result, and `@first`, its first element.
const ODD_RULE: &str = r#"
rule @twice jvp @twice_long

fn @twice(%v: f64[]) -> f64[] {
entry:
    %n = alen %v
    %w = anew %n
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %v, %i
    %y = mul %x, 2.0
    aset %w, %i, %y
    %i2 = add %i, 1
    jmp head
done:
    ret %w
}

fn @twice_long(%v: f64[], %dv: f64[]) -> f64[] {
entry:
    %n = alen %dv
    %m = add %n, 1
    %w = anew %m
    ret %w
}

fn @first(%v: f64[]) -> f64 {
entry:
    %w = call @twice(%v)
    %a = aget %w, 0
    ret %a
}
"#;

/// Compiled code checks a rule's tangent array against the result
/// (`len.check`, the `advm_len_check` helper) as the interpreter does:
/// the same trap, at the `rule` line.
#[test]
fn a_rule_tangent_of_the_wrong_length_traps_in_compiled_code() {
    let module = assembler::assemble(ODD_RULE, "odd.adasm").unwrap_or_else(|d| panic!("{d}"));
    let mut interp = Engine::new(module.clone()).expect("verifies");
    let mut native = Engine::new(module).expect("verifies");
    jit::install_eager(native.vm_mut());
    let f = native.find("first").expect("exists");
    let args = [Value::Arr(vec![1.0, 2.0, 3.0])];
    let want = vm::TrapKind::RuleTangentLength {
        result: 3,
        tangent: 4,
    };
    for e in [&mut interp, &mut native] {
        match e.grad(f, &args) {
            Err(ad::AdError::Trap(t)) => {
                assert_eq!(t.kind, want, "{t}");
                assert_eq!(t.loc.line, 2, "{t}");
            }
            other => panic!("not the length trap: {other:?}"),
        }
    }
    assert_eq!(native.vm_mut().last_tier(), Tier::Native);
}

/// Array views read once (`translate.rs`, `hoisted`): a parameter written
/// once in the entry block is read through the view of what it held at
/// each access (before the write, the parameter's array; after it, the
/// other one), and a register accessed before its only write holds no
/// array there (a bad handle, as in the interpreter).
#[test]
fn views_read_once_follow_the_register_they_belong_to() {
    let listing = "\
fn @swap(%a: f64[], %b: f64[], %i: i64) -> f64   ; 6 regs, 0 consts
entry:
  0000  aget        %x, %a, %i
  0001  copy        %a, %b
  0002  aget        %y, %a, %i
  0003  add.f       %z, %x, %y
  0004  ret         %z

fn @early(%a: f64[], %i: i64) -> f64   ; 6 regs, 0 consts
entry:
  0000  aget        %x, %c, %i
  0001  copy        %c, %a
  0002  aget        %y, %c, %i
  0003  add.f       %z, %x, %y
  0004  ret         %z
";
    let mut p =
        assembler::assemble_listing(listing, "views").unwrap_or_else(|d| panic!("{}", d.render()));
    for g in 0..p.len() {
        vm::verify::verify_function(&mut p, vm::ir::FuncId(g as u32)).expect("verifies");
    }
    let limits = vm::Limits::default();
    let mut a = vm::Vm::new(limits.clone());
    let mut b = vm::Vm::new(limits);
    jit::install_eager(&mut b);
    let cases: [(u32, &[f64], i64); 5] = [
        (0, &[1.0, 2.0], 1),
        (0, &[1.0, 2.0], 2),
        (0, &[1.0, 2.0], -1),
        (1, &[1.0, 2.0], 0),
        (1, &[], 0),
    ];
    for (f, xs, i) in cases {
        let mut outs = Vec::new();
        for m in [&mut a, &mut b] {
            m.begin(false);
            let h1 = m.alloc_array(xs).expect("fits");
            let h2 = m.alloc_array(&[10.0, 20.0, 30.0]).expect("fits");
            let args: Vec<u64> = if f == 0 {
                vec![h1, h2, i as u64]
            } else {
                vec![h1, i as u64]
            };
            let r = m.call_raw(&p, vm::ir::FuncId(f), &args);
            outs.push(format!("{r:?} {:?}", m.results()));
        }
        assert_eq!(outs[0], outs[1], "@{f} {xs:?} {i}");
        assert_eq!(b.last_tier(), vm::Tier::Native);
    }
}

/// Loops whose views are read on the edges into them (`loops.rs`: in a
/// function with an `anew`, which reads no view once for the whole
/// function). `@rows` reads its parameter in a loop entered by a jump, and
/// in one entered by falling through a conditional jump; `@alternate`
/// reads through a register the loop writes (two phis swapping two arrays
/// every iteration), whose view is read at every access. Both tiers agree
/// on values, gradients, traps (an index past the end inside the loop)
/// and counts.
#[test]
fn views_read_on_entry_to_a_loop_agree() {
    let src = r#"
fn @rows(%a: f64[], %n: i64) -> f64 {
entry:
    %t = anew 2
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, mid
body:
    %e = aget %a, %i
    %sq = mul %e, %e
    %s2 = add %s, %sq
    aset %t, 0, %s2
    %i2 = add %i, 1
    jmp head
mid:
    jmp head2
head2:
    %j = phi [mid: 0], [body2: %j2]
    %u = phi [mid: %s], [body2: %u2]
    %d = lt %j, %n
    br %d, body2, done
body2:
    %f = aget %a, %j
    %u2 = add %u, %f
    aset %t, 1, %u2
    %j2 = add %j, 1
    jmp head2
done:
    %l = aget %t, 0
    %r = add %u, %l
    ret %r
}

fn @alternate(%a: f64[], %b: f64[], %n: i64) -> f64 {
entry:
    %t = anew 1
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %p = phi [entry: %a], [body: %q]
    %q = phi [entry: %b], [body: %p]
    %c = lt %i, %n
    br %c, body, done
body:
    %e = aget %p, %i
    %s2 = add %s, %e
    aset %t, 0, %s2
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}
"#;
    let (mut a, mut b) = pair_of(src, &Limits::default());
    let xs = Value::Arr(vec![1.5, -2.0, 0.25, 3.0]);
    let ys = Value::Arr(vec![10.0, 20.0, 30.0, 40.0, 50.0]);
    for n in [0, 1, 3, 4, 5, 6] {
        let (text, ran) = same(&mut a, &mut b, "rows", &[xs.clone(), Value::I64(n)]);
        assert!(ran, "the native tier ran @rows({n})");
        assert_eq!(n > 4, text.contains("OutOfBounds"), "{n}: {text}");
        let args = [xs.clone(), ys.clone(), Value::I64(n)];
        let (text, ran) = same(&mut a, &mut b, "alternate", &args);
        assert!(ran, "the native tier ran @alternate({n})");
        // a[0] + b[1] + a[2] + b[3] + ...: 1.5 + 20 + 0.25 + 40 at n = 4.
        if n == 4 {
            assert!(text.contains("61.75"), "{text}");
        }
        assert_eq!(n > 4, text.contains("OutOfBounds"), "{n}: {text}");
    }
}
