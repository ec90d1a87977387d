//! Run and differentiate generated valid programs under fuel: never a panic,
//! and the forward value equals the primal value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use testkit::gen::{program, Config};

fuzz_target!(|data: &[u8]| {
    let mut seed = [0u8; 8];
    for (i, b) in data.iter().take(8).enumerate() {
        seed[i] = *b;
    }
    let cfg = Config {
        statements: 4 + data.get(8).copied().unwrap_or(0) as usize % 8,
        depth: 1 + data.get(9).copied().unwrap_or(0) as usize % 3,
        kinks: true,
    };
    let g = program(u64::from_le_bytes(seed), &cfg);
    let module = assembler::assemble(&g.source, "gen.adasm").expect("generated programs assemble");
    let mut engine = ad::Engine::new(module).expect("generated programs verify");
    engine.vm_mut().limits_mut().fuel = Some(1_000_000);
    let f = engine.find(&g.entry).expect("entry");
    let primal = engine.run(f, &g.args);
    let grad = engine.grad(f, &g.args);
    if let (Ok(vm::Value::F64(y)), Ok(gr)) = (primal, grad) {
        assert!(y.to_bits() == gr.value.to_bits() || (y.is_nan() && gr.value.is_nan()));
    }
});
