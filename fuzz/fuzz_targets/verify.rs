//! The verifier on arbitrary bytecode: decoding and verifying never panic,
//! and whatever verifies runs (under fuel, with bounds-checked registers:
//! the `vm/checked` feature) without panicking. See
//! `advm_fuzz::checks::verify_input`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = advm_fuzz::checks::verify_input(data);
});
