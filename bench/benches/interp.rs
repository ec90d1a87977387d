//! Interpreter speed: ns per executed instruction on powloop (n = 1000,
//! adasm.md §1) and on a sum-of-sin loop (`s += sin(itof(i))`, i < 1000),
//! both built by hand as IR, lowered and verified. `cargo bench -p advm-bench --bench interp`.
//!
//! For each program the bench first counts the instructions one call
//! executes (`Vm::executed`, the count the fuel limit uses), then prints
//! its own figure, the median of 31 batches of calls (about 20 ms each,
//! after 0.5 s of warm-up) divided by that count:
//!
//! ```text
//! powloop_1000: 3004 instructions/call, median 3.41 us/call, 1.14 ns/instruction
//! ```
//!
//! and then runs the criterion group (its median divided by the same count
//! gives the same figure).

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};
use vm::bytecode::Program;
use vm::ir::FuncId;
use vm::{Value, Vm};

fn load(m: &vm::ir::Module) -> Program {
    let mut p = vm::lower::lower_module(m).expect("lowers");
    vm::verify::verify_program(&mut p).expect("verifies");
    p
}

fn call(vm: &mut Vm, p: &Program, args: &[u64]) -> u64 {
    vm.begin(false);
    vm.call_raw(p, FuncId(0), black_box(args)).expect("runs");
    black_box(vm.results()[0])
}

/// Median time per call over 31 batches of about 20 ms each, after half a
/// second of warm-up.
fn median_per_call(vm: &mut Vm, p: &Program, args: &[u64]) -> Duration {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        call(vm, p, args);
    }
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < Duration::from_millis(20) {
        call(vm, p, args);
        calls += 1;
    }
    let mut samples: Vec<Duration> = (0..31)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                call(vm, p, args);
            }
            t.elapsed() / calls
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn bench_program(c: &mut Criterion, name: &str, p: &Program, args: &[u64]) {
    let mut vm = Vm::default();
    call(&mut vm, p, args);
    let executed = vm.executed();
    let ns = median_per_call(&mut vm, p, args).as_secs_f64() * 1e9;
    println!(
        "{name}: {executed} instructions/call, median {:.2} us/call, {:.2} ns/instruction",
        ns / 1e3,
        ns / executed as f64
    );
    let mut g = c.benchmark_group(name);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("call", |b| b.iter(|| call(&mut vm, p, args)));
    g.finish();
}

fn interp(c: &mut Criterion) {
    // Check each program before timing it.
    let mut vm = Vm::default();
    let pow = load(&testkit::ir::powloop());
    assert_eq!(
        vm.run(&pow, FuncId(0), &[Value::F64(2.0), Value::I64(10)])
            .expect("runs"),
        Value::F64(1024.0)
    );
    bench_program(c, "powloop_1000", &pow, &[1.0001f64.to_bits(), 1000]);
    let sumsin = load(&testkit::ir::sumsin());
    let want: f64 = (0..1000).map(|i| (i as f64).sin()).sum();
    assert_eq!(
        vm.run(&sumsin, FuncId(0), &[Value::I64(1000)])
            .expect("runs"),
        Value::F64(want)
    );
    bench_program(c, "sumsin_1000", &sumsin, &[1000]);
}

criterion_group!(benches, interp);
criterion_main!(benches);
