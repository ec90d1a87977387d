//! The tier's two kinds of compile settings (`jit::CompileTime::cheap`):
//! loop-free functions and entry trampolines get the single-pass register
//! allocator, functions with a loop the backtracking one; both give the
//! interpreter's bits (checked here on a program with one of each kind,
//! calling each other, on top of the corpus in `differential.rs`), and
//! every compile is timed.

use ad::Engine;
use vm::{Tier, Value};

const SRC: &str = "
fn @sq(%x: f64) -> f64 {
entry:
    %y = mul %x, %x
    %z = sin %y
    %w = add %z, %x
    ret %w
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
    %s = call @sq(%x)
    %t = mul %r, %s
    %r2 = mul %t, 0.5
    %k2 = sub %k, 1
    jmp head
done:
    ret %r
}
";

fn engine(jit: bool) -> Engine {
    let module = assembler::assemble(SRC, "settings").unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    if jit {
        jit::install_eager(e.vm_mut());
    }
    e
}

#[test]
fn loop_free_functions_get_the_cheap_settings_and_loops_the_other() {
    let e = engine(false);
    let prog = e.program().clone();
    let sq = e.find("sq").expect("sq");
    let pow = e.find("pow").expect("pow");
    let mut j = jit::Jit::eager();
    j.prepare(&prog, pow).expect("compiles");
    let t = j.compile_times();
    // @sq's body (a callee, compiled first), @pow's body, @pow's entry.
    assert_eq!(t.len(), 3, "{t:?}");
    assert!(!t[0].trampoline && t[0].cheap, "{:?}", t[0]);
    assert!(!t[1].trampoline && !t[1].cheap, "{:?}", t[1]);
    assert!(t[2].trampoline && t[2].cheap, "{:?}", t[2]);
    assert!(t.iter().all(|t| t.insts > 0 && t.translate <= t.wall));
    if cfg!(target_os = "linux") {
        assert!(t.iter().all(|t| t.cpu.is_some()), "{t:?}");
    }
    // An entry of its own for @sq: its body is cached, only a trampoline
    // is new.
    j.prepare(&prog, sq).expect("compiles");
    assert_eq!(j.compile_times().len(), 4);
    assert!(j.compile_times()[3].trampoline);
}

#[test]
fn both_kinds_give_the_interpreters_bits() {
    let mut native = engine(true);
    let mut interp = engine(false);
    for (f, args) in [
        ("pow", vec![Value::F64(1.0001), Value::I64(7)]),
        ("pow", vec![Value::F64(-0.75), Value::I64(30)]),
        ("sq", vec![Value::F64(2.5)]),
    ] {
        let fa = native.find(f).expect("exists");
        let fb = interp.find(f).expect("exists");
        let a = native.grad(fa, &args).expect("gradient");
        assert_eq!(native.vm_mut().last_tier(), Tier::Native, "@{f}");
        let b = interp.grad(fb, &args).expect("gradient");
        assert_eq!(a.value.to_bits(), b.value.to_bits(), "@{f}");
        assert_eq!(format!("{:?}", a.grad), format!("{:?}", b.grad), "@{f}");
        let ra = native.run(fa, &args).expect("runs");
        let rb = interp.run(fb, &args).expect("runs");
        assert_eq!(format!("{ra:?}"), format!("{rb:?}"), "@{f}");
    }
}
