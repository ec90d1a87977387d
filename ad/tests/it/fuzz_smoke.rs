//! The fuzz targets' checks (`testkit::checks`) on a few thousand
//! deterministic pseudo-random inputs, so that CI exercises them without
//! cargo-fuzz or a nightly toolchain. Real fuzzing: `scripts/fuzz.sh`.
//!
//! Also the regression tests for what fuzzing found (see
//! docs/reliability.md): each crash input is replayed here.
//!
//! `ADVM_SMOKE_CASES` multiplies the number of inputs (default 1).

use testkit::checks;
use testkit::intgen;

use testkit::gen::Rng;

fn scale() -> usize {
    std::env::var("ADVM_SMOKE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// Mutate valid text the way a fuzzer does: flip, insert, delete, splice.
fn mutate(rng: &mut Rng, text: &[u8], pool: &[&[u8]]) -> Vec<u8> {
    let mut out = text.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = if out.is_empty() {
            0
        } else {
            rng.below(out.len() + 1)
        };
        match rng.below(6) {
            0 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] = rng.next_u64() as u8;
            }
            1 => {
                let alphabet = b"%@:,[]{}-.0123456789\n eaiptjrn";
                out.insert(at, alphabet[rng.below(alphabet.len())]);
            }
            2 if !out.is_empty() => {
                let end = (at + rng.below(16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 => {
                // Splice a slice of another program.
                let other = pool[rng.below(pool.len())];
                if !other.is_empty() {
                    let s = rng.below(other.len());
                    let e = (s + rng.below(64)).min(other.len());
                    out.splice(at..at, other[s..e].iter().copied());
                }
            }
            4 => {
                let tok: &[u8] = [
                    &b"nan"[..],
                    b"-inf",
                    b"-9223372036854775808",
                    b"9223372036854775807",
                    b"0",
                    b"ftoi",
                    b"rem",
                    b"div",
                    b"anew",
                    b"aget",
                    b"phi",
                    b"call",
                ][rng.below(12)];
                out.splice(at..at, tok.iter().copied());
            }
            _ => {
                // Duplicate a line.
                let line: Vec<u8> = out[at..]
                    .split(|b| *b == b'\n')
                    .next()
                    .unwrap_or(&[])
                    .to_vec();
                out.splice(at..at, line);
            }
        }
    }
    out
}

#[test]
fn assemble_target_on_random_and_mutated_text() {
    let root = testkit::workspace_root().join("programs");
    let mut corpus: Vec<Vec<u8>> = std::fs::read_dir(&root)
        .expect("programs/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "adasm"))
        .filter_map(|p| std::fs::read(p).ok())
        .collect();
    corpus.sort();
    // Generated programs are part of the corpus too.
    for seed in 0..20 {
        corpus.push(intgen::program(seed).source.into_bytes());
        corpus.push(
            testkit::gen::program(seed, &testkit::gen::Config::default())
                .source
                .into_bytes(),
        );
    }
    assert!(corpus.len() > 40);
    let pool: Vec<&[u8]> = corpus.iter().map(|v| v.as_slice()).collect();
    let mut rng = Rng::new(0xA55E_4B1E);
    let (mut accepted, n) = (0, 1500 * scale());
    for _ in 0..n {
        let input = if rng.chance(0.1) {
            (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect()
        } else {
            let base = pool[rng.below(pool.len())];
            mutate(&mut rng, base, &pool)
        };
        if assembler::assemble(&String::from_utf8_lossy(&input), "x").is_ok() {
            accepted += 1;
        }
        checks::assemble_input(&input);
    }
    // Plain programs too (every function, both argument sets).
    for p in &pool {
        checks::assemble_input(p);
    }
    eprintln!("assemble: {n} inputs, {accepted} accepted");
    assert!(
        accepted * 20 >= n,
        "mutations too destructive: {accepted} of {n} accepted"
    );
}

#[test]
fn verify_target_on_random_bytecode() {
    let mut rng = Rng::new(0x0B17_C0DE);
    let n = 20_000 * scale();
    let mut verified = 0;
    let mut seen = std::collections::BTreeMap::<vm::op::Op, usize>::new();
    let seeds = std::env::var_os("ADVM_WRITE_VERIFY_SEEDS").map(std::path::PathBuf::from);
    for i in 0..n {
        let input = if i % 4 == 0 {
            (0..8 + rng.below(120))
                .map(|_| rng.next_u64() as u8)
                .collect()
        } else {
            checks::plausible_bytecode(&mut rng)
        };
        if checks::verify_input(&input) {
            verified += 1;
            for w in input[8..].chunks_exact(12) {
                if let Some(op) = vm::op::Op::from_u8(w[0]) {
                    *seen.entry(op).or_default() += 1;
                }
            }
            // scripts/fuzz.sh seeds the `verify` target's corpus with these.
            if let Some(dir) = &seeds {
                let _ = std::fs::write(dir.join(format!("plausible-{i}")), &input);
            }
        }
    }
    eprintln!("verify: {n} inputs, {verified} verified and ran");
    // Every opcode, the fused branches (`jmp.step.if.<cc>.i` ...) and
    // `call` / `call.acc` included, occurs in bytecode that verified and ran.
    let missing: Vec<_> = vm::op::Op::ALL
        .iter()
        .filter(|o| !seen.contains_key(o))
        .collect();
    assert!(
        missing.is_empty(),
        "opcodes in no verified input: {missing:?}"
    );
    assert!(
        verified * 20 >= n,
        "too few inputs verified: {verified} of {n}"
    );
}

/// The modes target: forward against reverse and HVP symmetry on
/// generated programs (identities, no finite differences); half of them
/// also if-converted, against the code derived from the branches.
#[test]
fn modes_target_on_seeds() {
    let mut rng = Rng::new(0x0D0E5);
    for _ in 0..40 * scale() {
        let data: Vec<u8> = (0..11).map(|_| rng.next_u64() as u8).collect();
        checks::modes_input(&data);
    }
}

#[test]
fn run_grad_target_on_seeds() {
    let mut rng = Rng::new(0x5EED);
    for _ in 0..150 * scale() {
        let data: Vec<u8> = (0..10).map(|_| rng.next_u64() as u8).collect();
        checks::run_grad_input(&data);
    }
}
