//! Generated valid programs (`testkit::gen`, and the integer-heavy
//! `advm_fuzz::intgen`): the VM agrees with the reference evaluator, and a
//! gradient's forward value equals the primal value. See
//! `advm_fuzz::checks::run_grad_input`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| advm_fuzz::checks::run_grad_input(data));
