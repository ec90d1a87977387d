//! The `jit_tiers` fuzz target's check (`jit::fuzz::tiers_agree`) on a few
//! thousand deterministic plausible inputs (bytecode that mostly
//! verifies), so that the workspace's tests exercise it without
//! cargo-fuzz. `ADVM_SMOKE_CASES` multiplies the number of inputs.

use testkit::checks::plausible_bytecode;
use testkit::gen::Rng;

#[test]
fn arbitrary_verified_bytecode_runs_the_same_in_both_tiers() {
    let cases = 3000 * testkit::env_u64("ADVM_SMOKE_CASES", 1);
    let mut rng = Rng::new(0x717);
    let (mut verified, mut native) = (0, 0);
    for _ in 0..cases {
        let data = plausible_bytecode(&mut rng);
        match jit::fuzz::tiers_agree(&data) {
            Some(vm::Tier::Native) => (verified, native) = (verified + 1, native + 1),
            Some(vm::Tier::Interp) => verified += 1,
            None => {}
        }
    }
    // Enough inputs verified (and so ran in both tiers) to mean something.
    assert!(verified * 10 >= cases, "{verified} of {cases} verified");
    eprintln!("{verified} of {cases} inputs verified and agreed, {native} ran natively");
    assert!(
        native * 2 >= verified,
        "only {native} of {verified} ran natively"
    );
}
