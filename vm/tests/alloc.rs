//! No heap allocation in steady state: after a warm-up call, running the
//! same function again (with arguments of the same shapes) allocates
//! nothing. Counted by a global allocator wrapper, per thread.

use testkit::alloc::allocs;
use testkit::ir::*;
use vm::ir::{FuncId, Term};
use vm::op::Op;
use vm::{Type, Value, Vm};

#[global_allocator]
static GLOBAL: testkit::alloc::Counting = testkit::alloc::Counting;

/// Allocations made by `f()`, and its result.
fn allocations<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = allocs();
    let r = f();
    (allocs() - before, r)
}

/// Run `m`'s first function by `Vm::run` once to warm up, then twice more:
/// those must allocate nothing.
fn warm_runs(m: &vm::ir::Module, args: &[Value], want: Value) {
    let p = load(m);
    let mut vm = Vm::default();
    assert_eq!(vm.run(&p, FuncId(0), args).as_ref(), Ok(&want));
    for round in 2..=3 {
        let (n, r) = allocations(|| vm.run(&p, FuncId(0), args));
        assert_eq!(r.as_ref(), Ok(&want));
        assert_eq!(
            n,
            0,
            "{} run {round}: {n} allocations",
            p.func(FuncId(0)).name
        );
    }
}

#[test]
fn the_counter_counts() {
    let (n, v) = allocations(|| vec![1u8; 10]);
    assert_eq!((n, v.len()), (1, 10));
}

#[test]
fn warm_loop_allocates_nothing() {
    warm_runs(
        &powloop(),
        &[Value::F64(2.0), Value::I64(10)],
        Value::F64(1024.0),
    );
    let want = (0..1000).map(|i| (i as f64).sin()).sum();
    warm_runs(&sumsin(), &[Value::I64(1000)], Value::F64(want));
    warm_runs(&fib(), &[Value::I64(30)], Value::F64(832_040.0));
}

#[test]
fn warm_recursion_allocates_nothing() {
    warm_runs(&deep(), &[Value::I64(5000)], Value::F64(5000.0));
    // A shallower call on the warm VM needs nothing new either.
    let p = load(&deep());
    let mut vm = Vm::default();
    vm.run(&p, FuncId(0), &[Value::I64(5000)]).expect("runs");
    let (n, _) = allocations(|| vm.run(&p, FuncId(0), &[Value::I64(100)]));
    assert_eq!(n, 0);
}

/// `a = anew n; for i < n: a[i] = itof(i); s += a[i]`.
fn array_loop() -> vm::ir::Module {
    let mut b = B::new("arrsum", &[("n", Type::I64)], Type::F64);
    let n = b.p(0);
    let entry = b.block("entry");
    let head = b.block("head");
    let body = b.block("body");
    let done = b.block("done");
    let a = b.op(entry, Op::ANew, Some(Type::Arr), &[n]);
    b.jmp(entry, head);
    let i = b.val("i", Type::I64);
    let s = b.val("s", Type::F64);
    let i2 = b.val("i2", Type::I64);
    let s2 = b.val("s2", Type::F64);
    let (i0, i1, f0) = (b.i64(0), b.i64(1), b.f64(0.0));
    b.phi(head, i, &[(entry, i0), (body, i2)]);
    b.phi(head, s, &[(entry, f0), (body, s2)]);
    let c = b.op(head, Op::LtI, Some(Type::Bool), &[i, n]);
    b.br(head, c, body, done);
    let x = b.op(body, Op::ItoF, Some(Type::F64), &[i]);
    b.eff(body, Op::ASet, &[a, i, x]);
    let y = b.op(body, Op::AGet, Some(Type::F64), &[a, i]);
    b.set(body, Op::AddF, s2, &[s, y]);
    b.set(body, Op::AddI, i2, &[i, i1]);
    b.jmp(body, head);
    b.ret(done, s);
    b.module()
}

#[test]
fn warm_array_program_allocates_nothing() {
    warm_runs(&array_loop(), &[Value::I64(100)], Value::F64(4950.0));
    // Array arguments are copied into kept heap buffers.
    let mut b = B::new("first", &[("v", Type::Arr)], Type::F64);
    let e = b.block("entry");
    let v = b.p(0);
    let z = b.i64(0);
    let x = b.op(e, Op::AGet, Some(Type::F64), &[v, z]);
    b.ret(e, x);
    warm_runs(&b.module(), &[Value::Arr(vec![3.0; 64])], Value::F64(3.0));
}

/// The AD driver's pattern: `begin(true)`, arrays with shadows, a forward
/// call that pushes on both AD stacks, a reverse call that pops them and
/// calls a pullback through `call.acc`.
#[test]
fn warm_ad_style_calls_allocate_nothing() {
    // fwd(v: f64[], n): blk.push 1; for i < n { comms.push v[0] * i;
    // blk.push 0 }
    let mut fw = B::new("fwd", &[("v", Type::Arr), ("n", Type::I64)], Type::F64);
    let (v, n) = (fw.p(0), fw.p(1));
    let entry = fw.block("entry");
    let head = fw.block("head");
    let body = fw.block("body");
    let done = fw.block("done");
    fw.blk_push(entry, 1);
    fw.jmp(entry, head);
    let i = fw.val("i", Type::I64);
    let i2 = fw.val("i2", Type::I64);
    let (i0, i1) = (fw.i64(0), fw.i64(1));
    fw.phi(head, i, &[(entry, i0), (body, i2)]);
    let c = fw.op(head, Op::LtI, Some(Type::Bool), &[i, n]);
    fw.br(head, c, body, done);
    let x = fw.op(body, Op::AGet, Some(Type::F64), &[v, i0]);
    let fi = fw.op(body, Op::ItoF, Some(Type::F64), &[i]);
    let y = fw.op(body, Op::MulF, Some(Type::F64), &[x, fi]);
    fw.eff(body, Op::CommsPush, &[y]);
    fw.blk_push(body, 0);
    fw.set(body, Op::AddI, i2, &[i, i1]);
    fw.jmp(body, head);
    let f0 = fw.f64(0.0);
    fw.ret(done, f0);

    // rev(v: f64[]) -> (acc): pop ids until 1; for each 0:
    // g = comms.pop; shadow(v)[0] += g; pull(g) += (acc).
    let mut rv = B::new_many("rev", &[("v", Type::Arr)], 1);
    let v = rv.p(0);
    let entry = rv.block("entry");
    let step = rv.block("step");
    let out = rv.block("out");
    let acc = rv.val("acc", Type::F64);
    let g = rv.val("g", Type::F64);
    let z = rv.i64(0);
    rv.term(entry, Term::BlkPop(vec![step, out]));
    rv.set(step, Op::CommsPop, g, &[]);
    rv.eff(step, Op::ShadowAcc, &[v, z, g]);
    rv.call_acc(step, 2, &[g], &[acc]);
    rv.term(step, Term::BlkPop(vec![step, out]));
    rv.term(out, Term::RetN(vec![acc]));

    // pull(g) = (2 g)
    let mut pl = B::new_many("pull", &[("g", Type::F64)], 1);
    let e = pl.block("entry");
    let gg = pl.p(0);
    let two = pl.f64(2.0);
    let d = pl.op(e, Op::MulF, Some(Type::F64), &[gg, two]);
    pl.term(e, Term::RetN(vec![d]));

    let p = load(&module(vec![fw, rv, pl]));
    let mut vm = Vm::default();
    let round = |vm: &mut Vm, n: u64| -> (f64, f64) {
        vm.begin(true);
        let h = vm.alloc_array(&[0.5, 1.0]).expect("alloc");
        vm.call_raw(&p, FuncId(0), &[h, n]).expect("forward");
        assert_eq!(vm.comms_len() as u64, n);
        assert_eq!(vm.blk_len() as u64, n + 1);
        vm.call_raw(&p, FuncId(1), &[h]).expect("reverse");
        assert_eq!((vm.comms_len(), vm.blk_len()), (0, 0));
        let acc = f64::from_bits(vm.results()[0]);
        let shadow = vm.shadow(h).expect("shadow")[0];
        (acc, shadow)
    };
    assert_eq!(round(&mut vm, 100), (4950.0, 2475.0));
    for n in [100, 50] {
        let (allocated, r) = allocations(|| round(&mut vm, n));
        let sum = (n * (n - 1) / 2) as f64;
        assert_eq!(r, (sum, sum / 2.0));
        assert_eq!(allocated, 0, "n = {n}");
    }
}
