//! Interpreter speed: ns per executed instruction on powloop (n = 1000) and
//! on a sum-of-sin loop (n = 1000). `cargo bench -p vm`.
//!
//! Each group times one call; the instruction count of that call (printed
//! once, from `Vm::executed`) turns the median into ns per instruction.

#[path = "../tests/common_ir/mod.rs"]
mod common_ir;

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use vm::bytecode::Program;
use vm::ir::FuncId;
use vm::{Value, Vm};

fn load(m: &vm::ir::Module) -> Program {
    let mut p = vm::lower::lower_module(m).expect("lowers");
    vm::verify::verify_program(&mut p).expect("verifies");
    p
}

fn bench_program(c: &mut Criterion, name: &str, p: &Program, args: &[u64]) {
    let mut vm = Vm::default();
    vm.begin(false);
    vm.call_raw(p, FuncId(0), args).expect("runs");
    let executed = vm.executed();
    eprintln!("{name}: {executed} instructions per call");
    let mut g = c.benchmark_group(name);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("call", |b| {
        b.iter(|| {
            vm.begin(false);
            vm.call_raw(p, FuncId(0), black_box(args)).expect("runs");
            black_box(vm.results()[0])
        })
    });
    g.finish();
}

fn interp(c: &mut Criterion) {
    let pow = load(&common_ir::powloop());
    bench_program(c, "powloop_1000", &pow, &[1.0001f64.to_bits(), 1000]);
    let sumsin = load(&common_ir::sumsin());
    bench_program(c, "sumsin_1000", &sumsin, &[1000]);
    let mut vm = Vm::default();
    assert_eq!(
        vm.run(&pow, FuncId(0), &[Value::F64(2.0), Value::I64(10)])
            .expect("runs"),
        Value::F64(1024.0)
    );
}

criterion_group!(benches, interp);
criterion_main!(benches);
