//! File tests of the middle of the pipeline: for every program of the
//! corpus (`programs/**/*.adasm`), the expected listings of
//!
//! * `lowered`: the bytecode of the file's functions (inlining off, so each
//!   function is as written);
//! * `reverse, before clean-up`: the forward and reverse functions as the
//!   rules and the reverse CFG's assembly produce them (`transform` with the
//!   clean-up off), lowered;
//! * `forward and reverse`: the same after the clean-up (`ad/src/optimize`):
//!   what `advm disasm --ad --no-inline` prints;
//! * `tangent`: the forward-mode tangent functions (`advm disasm --jvp`),
//!
//! for each function that returns f64 (the derived sections) live in
//! `ad/tests/expect/<path>.txt`. A change to any stage shows up as a diff
//! of text. When a change is meant, bless the new listings with
//!
//! ```sh
//! UPDATE_EXPECT=1 cargo test -p advm-ad --test it filetests::
//! ```
//!
//! and review the diff of `ad/tests/expect/` before committing it. A second
//! test checks that the expectations, together, show every opcode that the
//! AD stage writes, so that every reverse-mode rule has a listing.

use ad::Engine;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use vm::ir::{FuncId, RetType};
use vm::Type;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every corpus program, relative to `programs/`, sorted.
fn programs() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "reference") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "adasm") {
                out.push(p);
            }
        }
    }
    let base = root().join("programs");
    let mut out = Vec::new();
    walk(&base, &mut out);
    let mut rel: Vec<PathBuf> = out
        .iter()
        .filter_map(|p| p.strip_prefix(&base).ok().map(Path::to_path_buf))
        .collect();
    rel.sort();
    rel
}

fn engine(src: &str, name: &str, cleanup: bool) -> Engine {
    let module = assembler::assemble(src, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut e = Engine::with_inlining(module, &ad::Policy::NONE)
        .unwrap_or_else(|err| panic!("{name}: {err}"));
    e.set_reverse_cleanup(cleanup);
    e
}

/// The listing of one program, all sections.
fn listing(rel: &Path) -> String {
    let name = rel.display().to_string();
    let src = std::fs::read_to_string(root().join("programs").join(rel)).expect("readable");
    let mut plain = engine(&src, &name, true);
    let mut raw = engine(&src, &name, false);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "; {name}: expected listings (see ad/tests/it/filetests.rs)\n"
    );
    out.push_str("==== lowered\n");
    out.push_str(&vm::disasm::program(plain.program()));
    let n = plain.module().funcs.len();
    for i in 0..n {
        let f = FuncId(i as u32);
        let func = plain.module().func(f);
        let differentiable = func.ret == RetType::One(Type::F64)
            && func.params.iter().any(|p| func.ty(*p).is_differentiable());
        if !differentiable {
            continue;
        }
        let fname = func.name.clone();
        // A function the AD stage refuses (too large, say) shows why.
        let show = |r: Result<String, ad::AdError>| match r {
            Ok(text) => text,
            Err(e) => format!("; {e}\n"),
        };
        let _ = writeln!(out, "==== reverse of @{fname}, before clean-up");
        out.push_str(&show(raw.disasm_ad(f)));
        let _ = writeln!(out, "==== forward and reverse of @{fname}");
        out.push_str(&show(plain.disasm_ad(f)));
        let _ = writeln!(out, "==== tangent of @{fname}");
        out.push_str(&show(plain.disasm_jvp(f)));
    }
    out
}

fn expect_path(rel: &Path) -> PathBuf {
    let flat = rel.display().to_string().replace(['/', '\\'], "_");
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expect")
        .join(format!("{flat}.txt"))
}

#[test]
fn listings_match_their_expectations() {
    let bless = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut failed = Vec::new();
    let progs = programs();
    assert!(progs.len() >= 25, "the corpus: {progs:?}");
    for rel in &progs {
        let got = listing(rel);
        let path = expect_path(rel);
        if bless {
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&path, &got).expect("write");
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if want != got {
            let first = want
                .lines()
                .zip(got.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(want.lines().count().min(got.lines().count()));
            let show = |t: &str| t.lines().nth(first).unwrap_or("<end>").to_string();
            failed.push(format!(
                "{}: line {}: expected `{}`, got `{}`",
                path.display(),
                first + 1,
                show(&want),
                show(&got)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "listings differ from their expectations (if the change is meant, run \
         UPDATE_EXPECT=1 cargo test -p advm-ad --test it filetests:: and review the diff):\n{}",
        failed.join("\n")
    );
}

/// Every opcode the AD stage writes (and the lowering's fused forms of
/// derived code) appears in some expectation: each reverse-mode rule and
/// each opcode of the derived code has a listing that shows it.
#[test]
fn the_expectations_show_every_opcode_of_derived_code() {
    let mut seen = BTreeSet::new();
    for rel in programs() {
        let text = std::fs::read_to_string(expect_path(&rel)).unwrap_or_default();
        for line in text.lines() {
            // `  0012  acc.mul     %d.x, ...`: the mnemonic is the second word.
            if let Some(m) = line.split_whitespace().nth(1) {
                seen.insert(m.to_string());
            }
        }
    }
    let missing: Vec<&str> = vm::op::Op::ALL
        .iter()
        .filter(|op| op.facts().origin == vm::op::Origin::Ad)
        .map(|op| op.mnemonic())
        .filter(|m| !seen.contains(*m))
        .collect();
    assert!(
        missing.is_empty(),
        "no expected listing shows {missing:?}: add a program that needs them"
    );
}
