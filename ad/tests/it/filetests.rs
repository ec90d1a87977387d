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
//!
//! **Stage files** (`ad/tests/stages/*.adasm`) test one stage or one
//! clean-up pass on a small program, the expectation in the same file
//! (see "stage file tests" below and docs/ARCHITECTURE.md); the same
//! `UPDATE_EXPECT=1` blesses them.

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

// ---- stage file tests -------------------------------------------------------
//
// `ad/tests/stages/*.adasm`: a program, one `; stage:` directive naming one
// stage or pass, `; fn: NAME` (default `f`), and after the line
// `; ==== expected` the listing that stage gives, each line behind `; ` so
// that the file still assembles. Stages:
//
// * `lower`: the function's bytecode (inlining off);
// * `reverse`: the IR of the forward and reverse functions as the rules and
//   the reverse CFG's assembly build them (clean-up off);
// * `optimize`: the reverse function's IR after the whole clean-up;
// * `pass NAME...`: the reverse function's IR as `reverse` builds it after
//   the clean-up passes named, in order (`merge_blocks`, `known_zero`,
//   `propagate_copies`, `remove_dead`, `sink_writes`, `coalesce`,
//   `fuse_pops`, `fuse_shadow_products`, `layout`): the pass a file tests
//   is the last, the others make its input (a pass such as `coalesce`
//   finds work only in what earlier ones leave), and the listing's first
//   line says whether that last pass changed the function;
// * `tangent`: the IR of the tangent (forward-mode) function;
// * `optimize PASS...`: the file is register code (`assembler::Code::
//   Register`: derived IR, not SSA, every IR opcode); each function (or the
//   one `; fn:` names) after the passes named, behind a line that says
//   whether the last changed it;
// * `lower CONCERN`: the file is register code; the bytecode of each
//   function, `CONCERN` one of `LOWER_CONCERNS` (without `; fn:`, the
//   listing must also read back, `assembler::assemble_listing`, as itself
//   and run the same).
//
// IR prints as `assembler::print_module` prints it. `UPDATE_EXPECT=1`
// rewrites the expectations, as for the corpus listings.

/// The marker line after which a stage file's expectation starts.
const EXPECTED: &str = "; ==== expected";

/// The IR of the derived functions `ids` of `e`, printed with every
/// function of the engine in the module so that callees have their names.
/// `instead` replaces one derived function's IR (a pass's result).
fn derived_text(e: &Engine, ids: &[FuncId], instead: Option<(FuncId, vm::ir::Function)>) -> String {
    let n = e.module().funcs.len();
    let mut m = vm::ir::Module {
        funcs: e.module().funcs.clone(),
        ..Default::default()
    };
    for i in n..e.program().len() {
        let f = FuncId(i as u32);
        let ir = match &instead {
            Some((g, ir)) if *g == f => Some(ir.clone()),
            _ => e.derived_ir(f).cloned(),
        };
        m.funcs.push(ir.unwrap_or_else(|| {
            let mut empty = e.module().funcs[0].clone();
            empty.blocks.clear();
            empty
        }));
    }
    let text = assembler::print_module(&m);
    let mut chunks: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("fn @") {
            chunks.push(String::new());
        }
        if let Some(c) = chunks.last_mut() {
            c.push_str(line);
            c.push('\n');
        }
    }
    let mut out = String::new();
    for id in ids {
        if let Some(c) = chunks.get(id.index()) {
            out.push_str(c.trim_end());
            out.push('\n');
        }
    }
    out
}

/// Run one clean-up pass by name. (What a pass returns means "another
/// round may help"; the caller compares the function instead.)
fn run_pass(name: &str, f: &mut vm::ir::Function) -> Result<(), String> {
    use ad::optimize as o;
    let _another_round = match name {
        "merge_blocks" => {
            o::merge_blocks(f);
            false
        }
        "known_zero" => o::known_zero(f),
        "propagate_copies" => o::propagate_copies(f),
        "remove_dead" => o::remove_dead(f),
        "sink_writes" => o::sink_writes(f),
        "coalesce" => o::coalesce(f),
        "fuse_pops" => o::fuse_pops(f),
        "fuse_shadow_products" => o::fuse_shadow_products(f),
        "layout" => {
            o::layout(f);
            false
        }
        "common_subexpressions" => {
            o::common_subexpressions(f);
            false
        }
        _ => return Err(format!("no clean-up pass `{name}`")),
    };
    Ok(())
}

/// The listing a stage file's directives ask for.
fn stage_listing(src: &str, name: &str) -> Result<String, String> {
    let directive = |key: &str| {
        src.lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
    };
    let stage = directive("; stage:").ok_or("no `; stage:` directive")?;
    let words: Vec<&str> = stage.split_whitespace().collect();
    match words.as_slice() {
        ["optimize", passes @ ..] if !passes.is_empty() => {
            return optimize_listing(src, name, passes, directive("; fn:").as_deref())
        }
        ["lower", concern] => {
            return lower_listing(src, name, concern, directive("; fn:").as_deref())
        }
        _ => {}
    }
    let fname = directive("; fn:").unwrap_or_else(|| "f".to_string());
    let module = assembler::assemble(src, name).map_err(|e| e.render())?;
    let mut e = Engine::with_inlining(module, &ad::Policy::NONE).map_err(|e| e.to_string())?;
    let f = e.find(&fname).ok_or(format!("no function @{fname}"))?;
    match words.as_slice() {
        ["lower"] => Ok(vm::disasm::function_in(
            e.program().func(f),
            Some(e.program()),
        )),
        ["reverse"] => {
            e.set_reverse_cleanup(false);
            let d = e.derive(f).map_err(|e| e.to_string())?;
            Ok(derived_text(&e, &[d.fwd, d.rev], None))
        }
        ["optimize"] => {
            let d = e.derive(f).map_err(|e| e.to_string())?;
            Ok(derived_text(&e, &[d.rev], None))
        }
        ["pass", passes @ ..] if !passes.is_empty() => {
            e.set_reverse_cleanup(false);
            let d = e.derive(f).map_err(|e| e.to_string())?;
            let mut rev = e.derived_ir(d.rev).cloned().ok_or("no reverse IR")?;
            // Whether the last pass changed the function, by comparison
            // (the passes' own answers mean "another round may help").
            let mut changed = false;
            for pass in passes {
                let before = rev.clone();
                run_pass(pass, &mut rev)?;
                changed = rev != before;
            }
            let last = passes[passes.len() - 1];
            let what = if changed { "changed" } else { "unchanged" };
            let text = derived_text(&e, &[d.rev], Some((d.rev, rev)));
            Ok(format!("; {last}: {what}\n{text}"))
        }
        ["tangent"] => {
            let mask: Vec<bool> = {
                let func = e.module().func(f);
                func.params
                    .iter()
                    .map(|p| func.ty(*p).is_differentiable())
                    .collect()
            };
            let t = e.derive_jvp(f, &mask).map_err(|e| e.to_string())?;
            Ok(derived_text(&e, &[t], None))
        }
        _ => Err(format!("unknown stage `{stage}`")),
    }
}

/// The concerns of the lowering a `; stage: lower CONCERN` file may name:
/// the files of `vm/src/lower/` that shape code.
const LOWER_CONCERNS: &[&str] = &["coalesce", "blocks", "insts", "steps", "reserve"];

/// The clean-up passes a `; stage: optimize PASS...` file may name.
const PASSES: &[&str] = &[
    "merge_blocks",
    "known_zero",
    "propagate_copies",
    "remove_dead",
    "sink_writes",
    "coalesce",
    "fuse_pops",
    "fuse_shadow_products",
    "layout",
    "common_subexpressions",
];

/// A stage file's program read as register code.
fn register_module(src: &str, name: &str) -> Result<vm::ir::Module, String> {
    assembler::assemble_with(src, name, &register_code()).map_err(|e| e.render())
}

/// The functions a register-code stage file lists: the one `; fn:` names,
/// else all.
fn listed(m: &vm::ir::Module, fname: Option<&str>) -> Result<Vec<usize>, String> {
    match fname {
        None => Ok((0..m.funcs.len()).collect()),
        Some(n) => m
            .find(n)
            .map(|f| vec![f.index()])
            .ok_or(format!("no function @{n}")),
    }
}

/// `; stage: optimize PASS...`: the file is register code (a reverse or
/// tangent function as a listing prints it); each listed function after
/// the passes, in order, behind a line that says whether the last pass
/// changed it.
fn optimize_listing(
    src: &str,
    name: &str,
    passes: &[&str],
    fname: Option<&str>,
) -> Result<String, String> {
    let mut m = register_module(src, name)?;
    check_runs(src, &verified(&m)?, "before the passes")?;
    let ids = listed(&m, fname)?;
    let last = passes[passes.len() - 1];
    let mut changed = vec![false; m.funcs.len()];
    for &i in &ids {
        let f = &mut m.funcs[i];
        for pass in passes {
            let before = f.clone();
            run_pass(pass, f)?;
            changed[i] = *f != before;
        }
    }
    // What the passes make lowers, verifies and computes the same.
    check_runs(src, &verified(&m)?, "after the passes")?;
    let text = assembler::print_module(&m);
    let chunks = function_chunks(&text);
    let mut out = String::new();
    for &i in &ids {
        let what = if changed[i] { "changed" } else { "unchanged" };
        let _ = writeln!(out, "; {last}: {what}");
        out.push_str(chunks.get(i).map_or("", |c| c.trim_end()));
        out.push('\n');
    }
    Ok(out)
}

/// `; stage: lower CONCERN`: the file is register code (IR with or without
/// phis, derived opcodes and all); the bytecode of each listed function.
/// CONCERN names the part of the lowering the file is about.
fn lower_listing(
    src: &str,
    name: &str,
    concern: &str,
    fname: Option<&str>,
) -> Result<String, String> {
    if !LOWER_CONCERNS.contains(&concern) {
        return Err(format!(
            "no lowering concern `{concern}` (one of {LOWER_CONCERNS:?})"
        ));
    }
    let m = register_module(src, name)?;
    // `; inline`: small callees inlined first (`vm::inline`'s default
    // policy), as an engine does, so that code copied from one callee
    // instruction (the same location) can be shown lowered.
    let inline = src.lines().any(|l| l.trim() == "; inline");
    let m = if inline {
        vm::inline::inline_module(&m, &vm::inline::Policy::default())
    } else {
        m
    };
    let p = verified(&m)?;
    check_runs(src, &p, "lowered")?;
    let mut out = String::new();
    for i in listed(&m, fname)? {
        out.push_str(&vm::disasm::function_in(p.func(FuncId(i as u32)), Some(&p)));
    }
    if fname.is_none() {
        // The listing of every function reads back as itself, and runs
        // as the code it lists.
        let back = assembler::assemble_listing(&vm::disasm::program(&p), "listing")
            .map_err(|d| d.render())?;
        if vm::disasm::program(&back) != vm::disasm::program(&p) {
            return Err("the listing does not read back as itself".into());
        }
        check_runs(src, &back, "read back from the listing")?;
    }
    Ok(out)
}

/// `m` lowered and verified.
fn verified(m: &vm::ir::Module) -> Result<vm::bytecode::Program, String> {
    let mut p = vm::lower::lower_module(m).map_err(|e| e.to_string())?;
    vm::verify::verify_program(&mut p).map_err(|e| format!("{e:?}"))?;
    Ok(p)
}

/// The `; run: @g(args) => result` directives of a register-code stage
/// file, each run on `p` (`Vm::run`: several results print as a list,
/// each as its type, a trap as `trap: KIND in BLOCK: INSTRUCTION`). `when` says which code
/// ran, for the message.
fn check_runs(src: &str, p: &vm::bytecode::Program, when: &str) -> Result<(), String> {
    let head = src.find(EXPECTED).map_or(src, |i| &src[..i]);
    for line in head.lines() {
        let Some(run) = line.strip_prefix("; run:") else {
            continue;
        };
        let (call, want) = run.split_once("=>").ok_or("`; run: @g(args) => result`")?;
        let (g, lits) = assembler::parse_call(call.trim())?;
        let id = p.find(&g).ok_or(format!("no function @{g}"))?;
        let args = assembler::literals_to_values(&p.func(id).param_types, &lits)?;
        let mut vm = vm::interp::Vm::default();
        let got = match (vm.run(p, id, &args), &p.func(id).ret) {
            // Several results, each printed as its type says (`Vm::run`
            // gives them as f64 bits).
            (Ok(_), vm::ir::RetType::Many(ts)) => {
                let each: Vec<String> = ts
                    .iter()
                    .zip(vm.results())
                    .map(|(t, &b)| match t {
                        Type::I64 => (b as i64).to_string(),
                        Type::Bool => (b != 0).to_string(),
                        _ => f64::from_bits(b).to_string(),
                    })
                    .collect();
                format!("[{}]", each.join(", "))
            }
            (Ok(v), _) => v.to_string(),
            (Err(t), _) => format!("trap: {:?} in {}: {}", t.kind, t.block, t.instr),
        };
        if got != want.trim() {
            return Err(format!("`{}`, {when}, gives `{got}`", line.trim()));
        }
    }
    Ok(())
}

/// The text of each function of a printed module.
fn function_chunks(text: &str) -> Vec<String> {
    let mut chunks: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("fn @") {
            chunks.push(String::new());
        }
        if let Some(c) = chunks.last_mut() {
            c.push_str(line);
            c.push('\n');
        }
    }
    chunks
}

/// A stage file's text with `listing` as its expectation: the part before
/// the marker (or the whole file), the marker, then each line behind `; `.
fn with_expectation(src: &str, listing: &str) -> String {
    let head = match src.find(EXPECTED) {
        Some(i) => &src[..i],
        None => src,
    };
    let mut out = head.trim_end().to_string();
    out.push_str("\n\n");
    out.push_str(EXPECTED);
    out.push('\n');
    for line in listing.lines() {
        out.push_str(if line.is_empty() { ";" } else { "; " });
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// What is wrong with a stage file, if anything: its listing differs from
/// its expectation (the first differing line), or its directives fail.
fn stage_mismatch(src: &str, name: &str) -> Option<String> {
    let got = match stage_listing(src, name) {
        Ok(text) => text,
        Err(e) => return Some(format!("{name}: {e}")),
    };
    let want = with_expectation(src, &got);
    if want == src {
        return None;
    }
    let line = want
        .lines()
        .zip(src.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(want.lines().count().min(src.lines().count()));
    Some(format!(
        "{name}: line {}: expected `{}`, the stage gives `{}`",
        line + 1,
        src.lines().nth(line).unwrap_or("<end>"),
        want.lines().nth(line).unwrap_or("<end>"),
    ))
}

fn stage_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stages");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "adasm"));
    files.sort();
    files
}

#[test]
fn stage_files_match_their_expectations() {
    let bless = std::env::var_os("UPDATE_EXPECT").is_some();
    let files = stage_files();
    assert!(files.len() >= 12, "the stage files: {files:?}");
    let mut failed = Vec::new();
    for path in &files {
        let name = path.display().to_string();
        let src = std::fs::read_to_string(path).expect("readable");
        if bless {
            let listing = stage_listing(&src, &name).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(path, with_expectation(&src, &listing)).expect("write");
            continue;
        }
        failed.extend(stage_mismatch(&src, &name));
    }
    assert!(
        failed.is_empty(),
        "stage listings differ from their expectations (if the change is meant, run \
         UPDATE_EXPECT=1 cargo test -p advm-ad --test it filetests:: and review the diff):\n{}",
        failed.join("\n")
    );
}

/// Every clean-up pass has a stage file that ends with it, and it changes
/// its input there (a file whose pass does nothing shows nothing): one
/// from user text (`; stage: pass ...`) for the passes of the reverse
/// clean-up, and one from register code (`; stage: optimize PASS`) for
/// every pass.
#[test]
fn every_pass_has_a_stage_file_that_it_changes() {
    let mut seen = BTreeSet::new();
    let mut from_register = BTreeSet::new();
    for path in stage_files() {
        let src = std::fs::read_to_string(&path).expect("readable");
        if let Some(passes) = src
            .lines()
            .find_map(|l| l.strip_prefix("; stage: optimize "))
        {
            let pass = passes.split_whitespace().last().unwrap_or("").to_string();
            if src.contains(&format!("; ; {pass}: changed")) {
                from_register.insert(pass);
            }
        }
        if let Some(passes) = src.lines().find_map(|l| l.strip_prefix("; stage: pass ")) {
            let pass = passes.split_whitespace().last().unwrap_or("").to_string();
            assert!(
                src.contains(&format!("; ; {pass}: changed")),
                "{}: the pass changes nothing",
                path.display()
            );
            seen.insert(pass);
        }
    }
    for pass in [
        "merge_blocks",
        "known_zero",
        "propagate_copies",
        "remove_dead",
        "sink_writes",
        "coalesce",
        "fuse_pops",
        "fuse_shadow_products",
        "layout",
    ] {
        assert!(seen.contains(pass), "no stage file for `{pass}`");
    }
    for pass in PASSES {
        assert!(
            from_register.contains(*pass),
            "no `; stage: optimize {pass}` file in which it changes a function"
        );
    }
}

/// Every concern of the lowering a `; stage: lower CONCERN` file may name
/// has one.
#[test]
fn every_lowering_concern_has_a_stage_file() {
    let mut seen = BTreeSet::new();
    for path in stage_files() {
        let src = std::fs::read_to_string(&path).expect("readable");
        if let Some(c) = src.lines().find_map(|l| l.strip_prefix("; stage: lower ")) {
            seen.insert(c.trim().to_string());
        }
    }
    for c in LOWER_CONCERNS {
        assert!(seen.contains(*c), "no `; stage: lower {c}` file");
    }
}

/// The opcodes each stage file shows, by where: written by the AD stage
/// (in the expectation of a `reverse`, `tangent`, `optimize` or `pass`
/// file), or read from register code and lowered (in the program of a
/// `lower CONCERN` file). `files` are (name, text) pairs.
fn stage_coverage(files: &[(String, String)]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (derived, lowered, _) = stage_coverage_all(files);
    (derived, lowered)
}

/// [`stage_coverage`], and third the opcodes in the expected bytecode of
/// the `lower` files.
fn stage_coverage_all(
    files: &[(String, String)],
) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let mnemonics: BTreeSet<&str> = vm::op::Op::ALL.iter().map(|op| op.mnemonic()).collect();
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == '[')
            .filter(|w| mnemonics.contains(w))
            .map(str::to_string)
            .collect()
    };
    let (mut derived, mut lowered, mut bytecode) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (_, src) in files {
        let stage = src
            .lines()
            .find_map(|l| l.strip_prefix("; stage:"))
            .unwrap_or("")
            .trim();
        let (program, expected) = src.split_at(src.find(EXPECTED).unwrap_or(src.len()));
        let first = stage.split_whitespace().next().unwrap_or("");
        if matches!(first, "reverse" | "tangent" | "optimize" | "pass") {
            derived.extend(words(expected));
        }
        if first == "lower" {
            bytecode.extend(words(expected));
        }
        if first == "lower" && stage.split_whitespace().count() == 2 {
            for line in program.lines().filter(|l| !l.trim_start().starts_with(';')) {
                lowered.extend(words(line));
            }
        }
    }
    (derived, lowered, bytecode)
}

/// The reverse-mode opcodes (those only the AD stage writes, `Origin::Ad`
/// in the opcode table) that `files` leave without a file test of a
/// stage: for each, `(mnemonic, what is missing)`.
fn reverse_mode_gaps(files: &[(String, String)]) -> Vec<(&'static str, &'static str)> {
    let (derived, lowered) = stage_coverage(files);
    let mut gaps = Vec::new();
    for op in vm::op::Op::ALL {
        if op.facts().origin != vm::op::Origin::Ad {
            continue;
        }
        let m = op.mnemonic();
        if !derived.contains(m) {
            gaps.push((
                m,
                "no reverse, tangent, optimize or pass stage file writes it",
            ));
        }
        if !lowered.contains(m) {
            gaps.push((
                m,
                "no `; stage: lower CONCERN` file reads it from register code",
            ));
        }
    }
    gaps
}

fn stage_texts() -> Vec<(String, String)> {
    stage_files()
        .iter()
        .map(|p| {
            let src = std::fs::read_to_string(p).expect("readable");
            (p.display().to_string(), src)
        })
        .collect()
}

/// Every reverse-mode opcode, enumerated from the opcode table, has stage
/// files at both ends of the middle of the pipeline: one in whose expected
/// derived code (reverse, tangent or cleaned-up) the AD stage writes it,
/// and one that reads it from register code and lists its lowering. (The
/// corpus listings show them too:
/// `the_expectations_show_every_opcode_of_derived_code`.)
#[test]
fn every_reverse_mode_opcode_has_stage_files() {
    let gaps = reverse_mode_gaps(&stage_texts());
    assert!(
        gaps.is_empty(),
        "reverse-mode opcodes without stage files (add a stage file in ad/tests/stages/ \
         that shows them):\n{gaps:#?}"
    );
}

/// Every opcode only the lowering makes (`Origin::Lowering`: fused
/// branches, steps, products and loads, batched pushes) and every one it
/// makes from terminators (`Origin::Control`) shows in the expected
/// bytecode of a `lower` stage file, enumerated from the opcode table.
#[test]
fn every_lowering_opcode_has_a_lower_stage_file() {
    let (_, _, bytecode) = stage_coverage_all(&stage_texts());
    let missing: Vec<&str> = vm::op::Op::ALL
        .iter()
        .filter(|op| {
            matches!(
                op.facts().origin,
                vm::op::Origin::Lowering | vm::op::Origin::Control
            )
        })
        .map(|op| op.mnemonic())
        .filter(|m| !bytecode.contains(*m))
        .collect();
    assert!(
        missing.is_empty(),
        "no `lower` stage file shows {missing:?} in its expected bytecode"
    );
}

/// The coverage check fails when a stage file goes: without each file
/// that alone shows some reverse-mode opcode at a stage, that opcode is
/// reported.
#[test]
fn a_missing_stage_file_leaves_a_reverse_mode_gap() {
    let files = stage_texts();
    let mut sole = 0;
    for i in 0..files.len() {
        let mut rest = files.clone();
        let (name, _) = rest.remove(i);
        let (d_all, l_all) = stage_coverage(&files);
        let (d_rest, l_rest) = stage_coverage(&rest);
        let lost: Vec<&String> = d_all
            .difference(&d_rest)
            .chain(l_all.difference(&l_rest))
            .filter(|m| {
                vm::op::Op::ALL.iter().any(|op| {
                    op.mnemonic() == m.as_str() && op.facts().origin == vm::op::Origin::Ad
                })
            })
            .collect();
        if lost.is_empty() {
            continue;
        }
        sole += 1;
        let gaps = reverse_mode_gaps(&rest);
        for m in lost {
            assert!(
                gaps.iter().any(|(g, _)| g == m),
                "without {name}, `{m}` is reported"
            );
        }
    }
    assert!(
        sole >= 2,
        "{sole} files alone show some reverse-mode opcode"
    );
}

/// The comparison fails when an expectation is wrong: each stage file with
/// one expected line changed, or one dropped, is reported at that line.
#[test]
fn a_wrong_expectation_fails() {
    for path in stage_files() {
        let name = path.display().to_string();
        let src = std::fs::read_to_string(&path).expect("readable");
        let Some(at) = src.find(EXPECTED) else {
            panic!("{name}: no expectation");
        };
        let first = src[at..].lines().count() > 1;
        assert!(first, "{name}: an empty expectation");
        let marker_line = src[..at].lines().count();
        let mut lines: Vec<&str> = src.lines().collect();
        let changed_line = format!("{} (changed)", lines[marker_line + 1]);
        lines[marker_line + 1] = &changed_line;
        let changed = lines.join("\n") + "\n";
        let report = stage_mismatch(&changed, &name).expect("a changed line is reported");
        assert!(
            report.contains(&format!("line {}:", marker_line + 2)),
            "{report}"
        );
        let mut lines: Vec<&str> = src.lines().collect();
        lines.pop();
        let dropped = lines.join("\n") + "\n";
        assert!(
            stage_mismatch(&dropped, &name).is_some(),
            "{name}: a dropped line"
        );
        // A `; run:` whose result is wrong is reported.
        if let Some(run) = src.lines().find(|l| l.starts_with("; run:")) {
            let wrong = src.replacen(run, &format!("{run}0"), 1);
            let report = stage_mismatch(&wrong, &name).expect("a wrong run is reported");
            assert!(report.contains("gives"), "{report}");
        }
    }
}

// ---- printed IR reads back ----------------------------------------------------

/// Register code, as `assembler::assemble_with` reads derived IR.
fn register_code() -> assembler::Options {
    assembler::Options {
        code: assembler::Code::Register,
    }
}

/// The engine's whole module: the user functions, then every derived
/// function by bytecode id (an id without IR: none in these tests).
fn whole_module(e: &Engine) -> vm::ir::Module {
    let mut m = vm::ir::Module {
        funcs: e.module().funcs.clone(),
        rules: e.module().rules.clone(),
    };
    for i in m.funcs.len()..e.program().len() {
        let f = FuncId(i as u32);
        let ir = e
            .derived_ir(f)
            .unwrap_or_else(|| panic!("derived function {f} has no IR"));
        m.funcs.push(ir.clone());
    }
    m
}

/// Derive every differentiable function of `e` in every mode: gradient
/// (forward and reverse functions), tangent and Hessian-vector product. A
/// mode the AD stage refuses for a function is left out.
fn derive_everything(e: &mut Engine) {
    for i in 0..e.module().funcs.len() {
        let f = FuncId(i as u32);
        let func = e.module().func(f);
        let mask: Vec<bool> = func
            .params
            .iter()
            .map(|p| func.ty(*p).is_differentiable())
            .collect();
        let differentiable = func.ret == RetType::One(Type::F64) && mask.iter().any(|m| *m);
        if !differentiable {
            continue;
        }
        let _ = e.derive(f);
        let _ = e.derive_jvp(f, &mask);
        let _ = e.derive_hvp(f, &mask);
    }
}

/// Print, assemble as register code, print again: the same text, for every
/// corpus program's functions and every function derived from them
/// (forward, reverse before and after clean-up, tangent, Hessian-vector
/// product), inlined and not. The assembler lowers and verifies what it
/// reads, so each of them also passes the VM's verifier from text.
#[test]
fn printed_ir_reads_back_as_register_code() {
    let mut derived = 0;
    for rel in programs() {
        let name = rel.display().to_string();
        let src = std::fs::read_to_string(root().join("programs").join(&rel)).expect("readable");
        for (inline, cleanup) in [(false, true), (false, false), (true, true)] {
            let module = assembler::assemble(&src, &name).unwrap_or_else(|e| panic!("{e}"));
            let policy = if inline {
                ad::Policy::default()
            } else {
                ad::Policy::NONE
            };
            let mut e = Engine::with_inlining(module, &policy).unwrap_or_else(|e| panic!("{e}"));
            e.set_reverse_cleanup(cleanup);
            derive_everything(&mut e);
            derived += e.program().len() - e.module().funcs.len();
            let text = assembler::print_module(&whole_module(&e));
            let back = assembler::assemble_with(&text, &name, &register_code())
                .unwrap_or_else(|d| panic!("{name} (inline {inline}):\n{}\n{text}", d.render()));
            let again = assembler::print_module(&back);
            if again != text {
                let line = text
                    .lines()
                    .zip(again.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                panic!(
                    "{name} (inline {inline}): line {}: printed `{}`, read back `{}`",
                    line + 1,
                    text.lines().nth(line).unwrap_or("<end>"),
                    again.lines().nth(line).unwrap_or("<end>")
                );
            }
        }
    }
    assert!(derived > 500, "{derived} derived functions");
}

/// Run `f` (all parameters f64) at `args` on `p`, then, if given, the
/// pullback `rev` with seed 1: the bits of the value and the results, or
/// the trap's message.
fn run_bits(p: &vm::bytecode::Program, f: FuncId, rev: Option<FuncId>, args: &[f64]) -> String {
    let mut vm = vm::interp::Vm::default();
    vm.begin(rev.is_some());
    let raw: Vec<u64> = args.iter().map(|x| x.to_bits()).collect();
    if let Err(t) = vm.call_raw(p, f, &raw) {
        return format!("trap: {t}");
    }
    let mut out = format!("{:?}", vm.results());
    if let Some(rev) = rev {
        if let Err(t) = vm.call_raw(p, rev, &[1.0f64.to_bits()]) {
            return format!("trap: {t}");
        }
        out.push_str(&format!(" {:?}", vm.results()));
    }
    out
}

/// Read back, the code runs as before: for every corpus function of f64
/// parameters, the primal and the gradient's forward and reverse
/// functions, lowered from the re-assembled text, give the same bits (or
/// the same trap) as those the engine made, at a few points.
#[test]
fn read_back_code_runs_bit_identically() {
    let mut compared = 0;
    for rel in programs() {
        let name = rel.display().to_string();
        let src = std::fs::read_to_string(root().join("programs").join(&rel)).expect("readable");
        let mut e = engine(&src, &name, true);
        let mut pairs = Vec::new();
        for i in 0..e.module().funcs.len() {
            let f = FuncId(i as u32);
            let func = e.module().func(f);
            let scalar = func.params.iter().all(|p| func.ty(*p) == Type::F64);
            if func.ret != RetType::One(Type::F64) || !scalar || func.params.is_empty() {
                continue;
            }
            let n = func.params.len();
            if let Ok(d) = e.derive(f) {
                pairs.push((f, d, n));
            }
        }
        let text = assembler::print_module(&whole_module(&e));
        let back = assembler::assemble_with(&text, &name, &register_code())
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let mut p = vm::lower::lower_module(&back).unwrap_or_else(|err| panic!("{name}: {err}"));
        vm::verify::verify_program(&mut p).unwrap_or_else(|err| panic!("{name}: {err:?}"));
        for (f, d, n) in pairs {
            for point in [0.7, -1.3, 2.5, 0.0] {
                let args: Vec<f64> = (0..n).map(|k| point + 0.25 * k as f64).collect();
                let want = run_bits(e.program(), f, None, &args);
                assert_eq!(run_bits(&p, f, None, &args), want, "{name} primal {args:?}");
                let want = run_bits(e.program(), d.fwd, Some(d.rev), &args);
                let got = run_bits(&p, d.fwd, Some(d.rev), &args);
                assert_eq!(got, want, "{name} gradient {args:?}");
                compared += usize::from(!want.starts_with("trap"));
            }
        }
    }
    assert!(compared > 100, "{compared} points compared without a trap");
}

// ---- bytecode listings read back -----------------------------------------------

/// Whether two registers of `f` share a name (its listing would then be
/// ambiguous: see `assembler::assemble_listing`).
fn names_repeat(f: &vm::bytecode::Function) -> bool {
    let mut seen = BTreeSet::new();
    f.reg_names
        .iter()
        .any(|n| !n.is_empty() && !seen.insert(n.as_str()))
}

/// Run `calls` in order on one machine (`ad`: with the AD stacks, as a
/// gradient or a Hessian-vector product runs), each function with its
/// arguments: every call's results, or the trap.
fn run_calls(p: &vm::bytecode::Program, ad: bool, calls: &[(FuncId, &[f64])]) -> String {
    let mut vm = vm::interp::Vm::default();
    vm.begin(ad);
    let mut out = String::new();
    for (f, args) in calls {
        let raw: Vec<u64> = args.iter().map(|x| x.to_bits()).collect();
        if let Err(t) = vm.call_raw(p, *f, &raw) {
            return format!("trap: {t}");
        }
        out.push_str(&format!("{:?} ", vm.results()));
    }
    out
}

/// A bytecode listing (`vm::disasm::program`, what `advm disasm` and
/// `advm disasm --ad` print) reads back to a verified program that lists as
/// the same text: for every corpus program, inlined and not, with every
/// function derived from it (forward, reverse before and after clean-up,
/// tangent, Hessian-vector product). The lowering gives the registers of
/// a function distinct names, so the listing is unambiguous; the re-read
/// primal, gradient (forward then reverse function), tangent and
/// Hessian-vector product (tangents of the forward then of the reverse
/// function) run to the same bits (or the same trap) as the engine's.
#[test]
fn bytecode_listings_read_back_and_run_bit_identically() {
    let (mut listed, mut compared, mut derived) = (0, 0, 0);
    for rel in programs() {
        let name = rel.display().to_string();
        let src = std::fs::read_to_string(root().join("programs").join(&rel)).expect("readable");
        for (inline, cleanup) in [(false, true), (false, false), (true, true)] {
            let module = assembler::assemble(&src, &name).unwrap_or_else(|e| panic!("{e}"));
            let policy = if inline {
                ad::Policy::default()
            } else {
                ad::Policy::NONE
            };
            let mut e = Engine::with_inlining(module, &policy).unwrap_or_else(|e| panic!("{e}"));
            e.set_reverse_cleanup(cleanup);
            derive_everything(&mut e);
            // Each f64 function of f64 parameters, with its derived
            // functions (`derive_everything` built them: these only look
            // them up).
            let mut runs = Vec::new();
            for i in 0..e.module().funcs.len() {
                let f = FuncId(i as u32);
                let func = e.module().func(f);
                let scalar = func.params.iter().all(|p| func.ty(*p) == Type::F64);
                let n = func.params.len();
                if func.ret != RetType::One(Type::F64) || !scalar || n == 0 {
                    continue;
                }
                let all = vec![true; n];
                runs.push((
                    f,
                    n,
                    e.derive(f).ok(),
                    e.derive_jvp(f, &all).ok(),
                    e.derive_hvp(f, &all).ok(),
                ));
            }
            for g in 0..e.program().len() {
                let g = e.program().func(FuncId(g as u32));
                assert!(!names_repeat(g), "{name}: @{} repeats a name", g.name);
            }
            let text = vm::disasm::program(e.program());
            let p = assembler::assemble_listing(&text, &name)
                .unwrap_or_else(|d| panic!("{name} (inline {inline}):\n{}", d.render()));
            let again = vm::disasm::program(&p);
            if again != text {
                let line = text
                    .lines()
                    .zip(again.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                panic!(
                    "{name} (inline {inline}): line {}: listed `{}`, read back `{}`",
                    line + 1,
                    text.lines().nth(line).unwrap_or("<end>"),
                    again.lines().nth(line).unwrap_or("<end>")
                );
            }
            listed += p.len();
            for (f, n, grad, jvp, hvp) in runs {
                derived += usize::from(grad.is_some())
                    + usize::from(jvp.is_some())
                    + usize::from(hvp.is_some());
                for point in [0.7, -1.3, 2.5, 0.0] {
                    let args: Vec<f64> = (0..n).map(|k| point + 0.25 * k as f64).collect();
                    // The arguments, then a direction for each.
                    let dirs: Vec<f64> = (0..2 * n)
                        .map(|k| {
                            if k < n {
                                args[k]
                            } else {
                                1.0 - 0.5 * (k - n) as f64
                            }
                        })
                        .collect();
                    let mut cases = vec![("primal", false, vec![(f, &args[..])])];
                    if let Some(d) = &grad {
                        cases.push(("gradient", true, vec![(d.fwd, &args[..]), (d.rev, &[1.0])]));
                    }
                    if let Some(t) = jvp {
                        cases.push(("tangent", false, vec![(t, &dirs[..])]));
                    }
                    if let Some((a, b)) = hvp {
                        cases.push(("hvp", true, vec![(a, &dirs[..]), (b, &[1.0, 0.0])]));
                    }
                    for (what, ad, calls) in cases {
                        let want = run_calls(e.program(), ad, &calls);
                        let got = run_calls(&p, ad, &calls);
                        assert_eq!(got, want, "{name} (inline {inline}) {what} {args:?}");
                        compared += usize::from(!want.starts_with("trap"));
                    }
                }
            }
        }
    }
    assert!(listed > 1000, "{listed} functions listed");
    println!(
        "{listed} functions listed, {derived} derived functions run, {compared} runs compared"
    );
    assert!(derived > 300, "{derived} derived functions run");
    assert!(compared > 1500, "{compared} runs compared without a trap");
}

/// The listing reader reads every opcode of the table: the opcodes of
/// the programs `assembler::assemble_listing` reads back from the
/// listings of the corpus (every function and the functions derived from
/// it, cleaned up and not) and of the `lower` stage files together are
/// all of `Op::ALL`.
#[test]
fn every_opcode_reads_back_from_a_listing() {
    let mut read = BTreeSet::new();
    let mut note = |p: &vm::bytecode::Program| {
        for g in 0..p.len() {
            for ins in &p.func(FuncId(g as u32)).code {
                read.insert(ins.op);
            }
        }
    };
    for rel in programs() {
        let name = rel.display().to_string();
        let src = std::fs::read_to_string(root().join("programs").join(&rel)).expect("readable");
        for cleanup in [true, false] {
            let mut e = engine(&src, &name, cleanup);
            derive_everything(&mut e);
            let text = vm::disasm::program(e.program());
            let p = assembler::assemble_listing(&text, &name)
                .unwrap_or_else(|d| panic!("{name}:\n{}", d.render()));
            note(&p);
        }
    }
    for (name, src) in stage_texts() {
        if !src.lines().any(|l| l.starts_with("; stage: lower ")) {
            continue;
        }
        let m = register_module(&src, &name).unwrap_or_else(|e| panic!("{e}"));
        let p = verified(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = assembler::assemble_listing(&vm::disasm::program(&p), &name)
            .unwrap_or_else(|d| panic!("{name}:\n{}", d.render()));
        note(&back);
    }
    let missing: Vec<&str> = vm::op::Op::ALL
        .iter()
        .filter(|op| !read.contains(*op))
        .map(|op| op.mnemonic())
        .collect();
    assert!(missing.is_empty(), "no listing read back holds {missing:?}");
}

/// A stage file's expectation, without the `; ` in front of each line.
fn expectation(src: &str) -> String {
    let at = src.find(EXPECTED).map_or(src.len(), |i| i + EXPECTED.len());
    src[at..]
        .lines()
        .skip(1)
        .map(|l| l.strip_prefix("; ").unwrap_or(l.trim_start_matches(';')))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A listing is a faithful input: the reverse function that
/// `reverse.adasm`'s expectation lists, read as register code, and cleaned
/// up (the whole clean-up, or the passes of a `pass` file of the same
/// program), lists as `optimize.adasm` and each such `pass` file expect.
#[test]
fn a_listed_reverse_function_is_what_the_passes_took() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stages");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("readable");
    let reverse = read("reverse.adasm");
    let program = |src: &str| src[..src.find(EXPECTED).unwrap_or(src.len())].to_string();
    let body = |src: &str| {
        let p = program(src);
        p[p.find("fn @").unwrap_or(0)..].to_string()
    };
    let listed = expectation(&reverse);
    let rev = &listed[listed.find("fn @f.rev").expect("a reverse function")..];
    let m = assembler::assemble_with(rev, "f.rev", &register_code())
        .unwrap_or_else(|d| panic!("{}", d.render()));
    let mut compared = 0;
    for path in stage_files() {
        let src = std::fs::read_to_string(&path).expect("readable");
        if body(&src) != body(&reverse) {
            continue;
        }
        let stage = src
            .lines()
            .find_map(|l| l.strip_prefix("; stage: "))
            .unwrap_or("");
        let mut f = m.funcs[0].clone();
        let want = match stage.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["optimize"] => {
                ad::optimize::reverse(&mut f);
                expectation(&src)
            }
            ["pass", passes @ ..] => {
                for pass in passes {
                    run_pass(pass, &mut f).expect("a pass");
                }
                // Without the line saying whether the last pass changed it.
                let e = expectation(&src);
                e[e.find('\n').map_or(0, |i| i + 1)..].to_string()
            }
            _ => continue,
        };
        let got = assembler::print_module(&vm::ir::Module {
            funcs: vec![f],
            ..Default::default()
        });
        assert_eq!(got, want, "{}", path.display());
        compared += 1;
    }
    assert!(compared >= 8, "{compared} files compared");
}
