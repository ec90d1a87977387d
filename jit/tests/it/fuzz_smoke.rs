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

/// The check of `jit_tiers` on counted loops (`jit/src/loops.rs`, which
/// its random words rarely form): a function `(a: f64[], x: f64) -> f64`
/// whose registers after the parameters begin with the constant step
/// (`jit::fuzz::constants`: 1 or -1), then a prefix that sets the counter
/// and the bound (from the array's length, the constants, sums), a loop
/// body of random reads, writes, arithmetic and forward branches on
/// `f64`s, closed by a `jmp.step` of the counter by the step against the
/// bound, and a `ret`. Whatever verifies runs in both tiers, plain and AD
/// mode (where the loop pushes and pops too), with the same result or
/// trap, instruction count and stacks, under the target's fuel (20 000:
/// the guard's exact count of the fuel lets the unchecked copy run).
/// Leaving out the guard's bounds compare makes this test crash.
#[test]
fn counted_loop_shapes_run_the_same_in_both_tiers() {
    use vm::bytecode::Instr;
    use vm::op::Op;
    let cases = 2000 * testkit::env_u64("ADVM_SMOKE_CASES", 1);
    let mut rng = Rng::new(0xc0c0);
    // Registers (head[2] = 3, head[3] = 1): r0 f64[] and r1 f64 the
    // parameters, then r2 i64 (the constant step), r3 bool, r4 f64[],
    // r5 f64, r6 i64, r7 bool, r8 f64[], r9 f64, r10 i64, r11 bool.
    let (a, x, step, f1, i1, f2, i2) = (0u16, 1u16, 2u16, 5u16, 6u16, 9u16, 10u16);
    let (mut verified, mut native) = (0u64, 0u64);
    for _ in 0..cases {
        let up = rng.chance(0.5);
        let w = |op: Op, r0: u16, r1: u16, r2: u16, x: u32| Instr::new(op, r0, r1, r2, x).encode();
        let mut code: Vec<[u8; 12]> = Vec::new();
        // The counter (r6) and the bound (r10).
        let (counter, bound) = if rng.chance(0.5) { (i1, i2) } else { (i2, i1) };
        code.push(w(Op::ALen, bound, a, 0, 0));
        if !up {
            code.push(w(Op::Mov, counter, bound, 0, 0));
            code.push(w(Op::Mov, bound, step, 0, 0));
            code.push(w(Op::AddI, bound, bound, step, 0));
        }
        for _ in 0..rng.below(3) {
            let op = [Op::AddI, Op::SubI][rng.below(2)];
            let t = [counter, bound][rng.below(2)];
            code.push(w(op, t, t, step, 0));
        }
        let head = code.len() as u32;
        let body = 2 + rng.below(6);
        let end = head + body as u32;
        for k in 0..body {
            let pc = head + k as u32;
            let idx = [counter, counter, bound, step][rng.below(4)];
            let f = [f1, f2, x][rng.below(3)];
            let g = [f1, f2, x][rng.below(3)];
            code.push(match rng.below(8) {
                0 | 1 => w(Op::AGet, f, a, idx, 0),
                2 => w(Op::ASet, a, idx, g, 0),
                3 => w(Op::AddF, f, f, g, 0),
                4 => w(Op::MulF, f, g, g, 0),
                5 => w(Op::Exp, f, g, 0, 0),
                6 => w(Op::AddI, [i1, i2][rng.below(2)], counter, bound, 0),
                _ => w(
                    Op::JmpLtF,
                    f,
                    g,
                    0,
                    (pc + 1 + rng.below(end as usize - pc as usize) as u32).min(end),
                ),
            });
        }
        let op = if up {
            [Op::JmpStepLtI, Op::JmpStepNeI][rng.below(2)]
        } else {
            [Op::JmpStepGtI, Op::JmpStepNeI][rng.below(2)]
        };
        code.push(w(op, counter, step, bound, head));
        code.push(w(Op::Ret, f2, 0, 0, 0));
        // Header: 12 registers, 2 parameters, types from 3 + i, f64
        // result, no recursion, list, mode and one constant (1 or -1).
        let consts = if up { 0b0_0010 } else { 0b0_1010 };
        let mode = rng.below(2) as u8;
        let mut data = vec![11, 2, 3, 1, 0, 0, 0, consts | mode];
        for c in &code {
            data.extend_from_slice(c);
        }
        // `ADVM_SEEDS_DIR=DIR` writes the first 32 inputs there, as seeds
        // for the fuzz target (`fuzz/seeds/jit_tiers/`).
        if let (Some(dir), true) = (std::env::var_os("ADVM_SEEDS_DIR"), verified + native < 64) {
            let path = std::path::Path::new(&dir).join(format!("counted-{verified}-{native}"));
            std::fs::write(path, &data).expect("writes the seed");
        }
        match jit::fuzz::tiers_agree(&data) {
            Some(vm::Tier::Native) => (verified, native) = (verified + 1, native + 1),
            Some(vm::Tier::Interp) => verified += 1,
            None => {}
        }
    }
    eprintln!(
        "{verified} of {cases} counted-loop inputs verified and agreed, {native} ran natively"
    );
    assert!(verified * 2 >= cases, "{verified} of {cases} verified");
    assert!(
        native * 10 >= verified * 9,
        "only {native} of {verified} ran natively"
    );
}
