//! The assembler on arbitrary text: it must return a module or diagnostics,
//! never panic; a module it accepts must lower and verify, run like the
//! reference evaluator and differentiate without an internal error. See
//! `advm_fuzz::checks::assemble_input`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| advm_fuzz::checks::assemble_input(data));
