//! Calls and returns as a fixed workload for instruction counts under
//! `valgrind --tool=callgrind` (docs/benchmarks.md): `calls N` runs N times
//! a loop of 1000 iterations, each making 8 `call`s of an identity function
//! (`ret`) and 8 `call.acc`s of a function returning one value (`ret.n`).
//! Subtract the count of `calls 0` and divide by `N * 16 000` for the x86
//! instructions of one call and its return, loop included.

use testkit::ir::B;
use vm::ir::{FuncId, Term};
use vm::Type::{Bool, F64, I64};

fn main() {
    let runs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    // @f(%n: i64, %x: f64) -> f64: for i < n { 8 x call @id(x); 8 x call.acc @one(x) += (a) }.
    let mut f = B::new("f", &[("n", I64), ("x", F64)], F64);
    let (entry, head, body, done) = (
        f.block("entry"),
        f.block("head"),
        f.block("body"),
        f.block("done"),
    );
    f.jmp(entry, head);
    let i = f.val("i", I64);
    let i2 = f.val("i2", I64);
    let a = f.val("a", F64);
    let (zero, one) = (f.i64(0), f.i64(1));
    f.phi(head, i, &[(entry, zero), (body, i2)]);
    let (n, x) = (f.p(0), f.p(1));
    let c = f.op(head, vm::op::Op::LtI, Some(Bool), &[i, n]);
    f.br(head, c, body, done);
    for _ in 0..8 {
        f.call(body, 1, F64, &[x]);
    }
    for _ in 0..8 {
        f.call_acc(body, 2, &[x], &[a]);
    }
    f.set(body, vm::op::Op::AddI, i2, &[i, one]);
    f.jmp(body, head);
    f.ret(done, a);
    let id = B::identity("id");
    let mut many = B::new_many("one", &[("x", F64)], 1);
    let e = many.block("entry");
    let y = many.p(0);
    many.term(e, Term::RetN(vec![y]));
    let p = testkit::ir::load(&testkit::ir::module(vec![f, id, many]));
    let mut vm = vm::Vm::default();
    let mut sum = 0.0;
    for _ in 0..runs {
        vm.call_raw(&p, FuncId(0), &[1000, 1.5f64.to_bits()])
            .expect("runs");
        sum += f64::from_bits(vm.results()[0]);
    }
    println!("{sum}");
}
