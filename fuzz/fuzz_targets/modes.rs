//! The AD modes against each other on generated programs: the tangent
//! equals the gradient's dot product with the direction, and Hessian-vector
//! products are symmetric (`vᵀHu = uᵀHv`). See `advm_fuzz::checks::modes_input`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| advm_fuzz::checks::modes_input(data));
