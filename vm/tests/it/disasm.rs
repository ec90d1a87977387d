//! The disassembler: exact, deterministic listings.

use testkit::ir::*;
use vm::disasm;
use vm::ir::{FuncId, Term};
use vm::op::Op;
use vm::Type;

#[test]
fn powloop_listing() {
    let p = load(&powloop());
    let want = "\
fn @pow(%x: f64, %n: i64) -> f64   ; 9 regs, 4 consts
  ; consts: r2 = 1.0, r3 = 0, r4 = 1, r5 = -1
entry:
  0000  copy        %r, 1.0
  0001  copy        %k, %n
head:
  0002  jmp.if.le.i %k, 0, -> done (0005)
body:
  0003  mul.f       %r, %r, %x
  0004  jmp.step.if.gt.i %k -= 1, 0, -> body (0003)
done:
  0005  ret         %r
";
    assert_eq!(disasm::function(p.func(FuncId(0))), want);
    assert_eq!(disasm::program(&p), format!("{want}\n"));
    // Deterministic.
    assert_eq!(disasm::program(&load(&powloop())), disasm::program(&p));
}

#[test]
fn calls_tables_and_lists() {
    // f(x): r = g(x); call.acc h(x) += (acc, acc); blk.push 1;
    // blk.pop [a, b]; a: ret r; b: ret acc.   h(x) -> (x, x)
    let mut f = B::new("f", &[("x", Type::F64)], Type::F64);
    let e = f.block("entry");
    let a = f.block("a");
    let b = f.block("b");
    let x = f.p(0);
    let r = f.call(e, 1, Type::F64, &[x]);
    let acc = f.val("acc", Type::F64);
    f.call_acc(e, 2, &[x], &[acc, acc]);
    f.blk_push(e, 1);
    f.term(e, Term::BlkPop(vec![a, b]));
    f.ret(a, r);
    f.ret(b, acc);
    let mut g = B::new("g", &[("x", Type::F64)], Type::F64);
    let ge = g.block("entry");
    let gx = g.p(0);
    let t = g.val("t", Type::Bool);
    let c = g.bool(true);
    g.set(ge, Op::Not, t, &[c]);
    g.ret(ge, gx);
    let mut h = B::new_many("h", &[("x", Type::F64)], 2);
    let he = h.block("entry");
    let hx = h.p(0);
    h.term(he, Term::RetN(vec![hx, hx]));
    let p = load(&module(vec![f, g, h]));
    let want = "\
fn @f(%x: f64) -> f64   ; 3 regs, 0 consts
entry:
  0000  call        r1, @g(%x)
  0001  call.acc    @h(%x) += (%acc, %acc)
  0002  blk.push    1
  0003  blk.pop     [a: 0004, b: 0005]
a:
  0004  ret         r1
b:
  0005  ret         %acc

fn @g(%x: f64) -> f64   ; 3 regs, 1 consts
  ; consts: r1 = true
entry:
  0000  not         %t, true
  0001  ret         %x

fn @h(%x: f64) -> (f64, f64)   ; 1 regs, 0 consts
entry:
  0000  ret.n       (%x, %x)

";
    assert_eq!(disasm::program(&p), want);
    // Without the program, callees print as their ids.
    let alone = disasm::function(p.func(FuncId(0)));
    assert!(alone.contains("call        r1, fn1(%x)"), "{alone}");
    // One instruction, unpadded, for trap messages.
    assert_eq!(
        disasm::instr(p.func(FuncId(0)), 3),
        "blk.pop [a: 0004, b: 0005]"
    );
    assert_eq!(disasm::instr(p.func(FuncId(0)), 99), "?");
}
