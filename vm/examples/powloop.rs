//! powloop (n = 1000) run 1000 times: a fixed workload for instruction
//! counts under `valgrind --tool=callgrind` (docs/benchmarks.md).

fn main() {
    let mut p = vm::lower::lower_module(&testkit::ir::powloop()).expect("lowers");
    vm::verify::verify_program(&mut p).expect("verifies");
    let mut vm = vm::Vm::default();
    let mut sum = 0.0;
    for _ in 0..1000 {
        vm.begin(false);
        vm.call_raw(&p, vm::ir::FuncId(0), &[1.0001f64.to_bits(), 1000])
            .expect("runs");
        sum += f64::from_bits(vm.results()[0]);
    }
    println!("{sum}");
}
