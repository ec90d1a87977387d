//! The native tier on arbitrary bytecode: whatever verifies runs the same
//! in the interpreter and in compiled code (results, traps, instruction
//! counts, AD stacks). See `jit::fuzz::tiers_agree`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = jit::fuzz::tiers_agree(data);
});
