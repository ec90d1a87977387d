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
    let (mut verified, mut native, mut recursive) = (0, 0, 0);
    for _ in 0..cases {
        let data = plausible_bytecode(&mut rng);
        match jit::fuzz::tiers_agree(&data) {
            Some(vm::Tier::Native) => {
                (verified, native) = (verified + 1, native + 1);
                // The call site calls the function itself.
                recursive += u64::from(data[5] & 8 != 0);
            }
            Some(vm::Tier::Interp) => verified += 1,
            None => {}
        }
    }
    assert!(
        recursive * 10 >= native,
        "{recursive} of {native} recursive"
    );
    // Enough inputs verified (and so ran in both tiers) to mean something.
    assert!(verified * 10 >= cases, "{verified} of {cases} verified");
    eprintln!(
        "{verified} of {cases} inputs verified and agreed, {native} ran natively, {recursive} of them recursive"
    );
    assert!(
        native * 2 >= verified,
        "only {native} of {verified} ran natively"
    );
}

/// A fuzzing find (`jit_tiers`): a `tmax.f` whose two results are one
/// register, `tmax.f r0, r0, r4, r0` (a listing may say so; the lowering
/// never does). The interpreter writes the maximum, then the tangent, so
/// the tangent is what the register holds; compiled code wrote them the
/// other way round, so the two tiers took different paths through the
/// loop and ran out of fuel two instructions apart.
#[test]
fn tmax_with_one_register_for_both_results_agrees() {
    const INPUT: [u8; 140] = [
        253, 249, 168, 254, 145, 22, 171, 134, 7, 0, 0, 0, 0, 0, 60, 154, 202, 0, 0, 249, 106, 0,
        2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 125, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 98, 0, 0, 0, 0, 0, 0,
        0, 4, 0, 0, 0, 18, 0, 2, 0, 2, 0, 0, 0, 1, 0, 0, 0, 71, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    ];
    assert!(
        jit::fuzz::tiers_agree(&INPUT).is_some(),
        "the input verifies"
    );
}
