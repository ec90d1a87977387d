//! Valid programs assemble, and printing them gives text that assembles to
//! the same module (up to source locations and value numbering).

use std::fmt::Write;
use std::path::{Path, PathBuf};
use vm::ir::{Function, Module, Term, ValueId};
use vm::op::Op;
use vm::Type;

/// `.adasm` files under `dir`, recursively, sorted.
fn adasm_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "adasm") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn assemble_file(path: &Path) -> Module {
    let src = std::fs::read_to_string(path).expect("readable");
    match assembler::assemble(&src, &path.display().to_string()) {
        Ok(m) => m,
        Err(d) => panic!("{} does not assemble:\n{d}", path.display()),
    }
}

/// A description of a module that ignores locations and value numbering:
/// every value is shown by its type and name, or its constant bits.
fn normal_form(m: &Module) -> String {
    let mut out = String::new();
    for f in &m.funcs {
        let v = |id: ValueId| value_desc(f, id);
        let params: Vec<String> = f.params.iter().map(|p| v(*p)).collect();
        let _ = writeln!(out, "fn {} ({}) -> {:?}", f.name, params.join(", "), f.ret);
        for b in &f.blocks {
            let _ = writeln!(out, " {}:", b.name);
            for p in &b.phis {
                let inc: Vec<String> = p
                    .incoming
                    .iter()
                    .map(|(b, x)| format!("{b}={}", v(*x)))
                    .collect();
                let _ = writeln!(out, "  {} = phi {}", v(p.dst), inc.join(" "));
            }
            for i in &b.insts {
                let args: Vec<String> = i.args.iter().map(|a| v(*a)).collect();
                let dst = i.dst.map(v).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {dst} = {:?} {:?} {}",
                    i.op,
                    i.callee,
                    args.join(" ")
                );
            }
            let term = match &b.term {
                Term::Jmp(t) => format!("jmp {t}"),
                Term::Br { cond, then_, else_ } => format!("br {} {then_} {else_}", v(*cond)),
                Term::Ret(x) => format!("ret {}", v(*x)),
                other => format!("{other:?}"),
            };
            let _ = writeln!(out, "  {term}");
        }
    }
    out
}

fn value_desc(f: &Function, id: ValueId) -> String {
    let d = &f.values[id.index()];
    match (d.konst, &d.name) {
        (Some(bits), _) => format!("const {}:{bits:#x}", d.ty),
        (None, Some(n)) => format!("%{n}:{}", d.ty),
        (None, None) => format!("%?:{}", d.ty),
    }
}

/// Assemble, print, re-assemble and compare; printing is also idempotent.
fn round_trip(path: &Path) {
    let m1 = assemble_file(path);
    let text1 = assembler::print_module(&m1);
    let m2 = match assembler::assemble(&text1, "printed.adasm") {
        Ok(m) => m,
        Err(d) => panic!(
            "printed {} does not assemble:\n{d}\n{text1}",
            path.display()
        ),
    };
    assert_eq!(
        normal_form(&m1),
        normal_form(&m2),
        "{}:\n{text1}",
        path.display()
    );
    assert_eq!(text1, assembler::print_module(&m2), "{}", path.display());
    check_invariants(&m1);
}

/// What every accepted module guarantees.
fn check_invariants(m: &Module) {
    for f in &m.funcs {
        assert!(f.values.len() <= assembler::MAX_VALUES);
        let preds = f.predecessors();
        assert!(preds[0].is_empty(), "{}: entry has predecessors", f.name);
        for (bi, b) in f.blocks.iter().enumerate() {
            for p in &b.phis {
                let mut got: Vec<_> = p.incoming.iter().map(|(b, _)| *b).collect();
                got.sort();
                let mut want = preds[bi].clone();
                want.sort();
                assert_eq!(got, want, "{}: phi entries are the predecessors", f.name);
                assert!(p.loc.line > 0);
            }
            for i in &b.insts {
                assert!(i.loc.line > 0 && i.loc.col > 0);
                let regs: Vec<_> = i.op.reg_operands().collect();
                let n_def = usize::from(i.dst.is_some());
                if i.op != Op::Call {
                    assert_eq!(regs.len(), n_def + i.args.len(), "{:?}", i.op);
                }
            }
            assert!(b.term_loc.line > 0);
        }
        // Constants are deduplicated per function.
        let mut consts: Vec<(String, u64)> = f
            .values
            .iter()
            .filter_map(|v| v.konst.map(|k| (v.ty.to_string(), k)))
            .collect();
        let n = consts.len();
        consts.sort();
        consts.dedup();
        assert_eq!(consts.len(), n, "{}: duplicate constants", f.name);
    }
}

fn own_programs() -> Vec<PathBuf> {
    adasm_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs"))
}

#[test]
fn own_programs_round_trip() {
    let files = own_programs();
    assert!(files.len() >= 5);
    for f in files {
        round_trip(&f);
    }
}

/// The repository's example corpus (`programs/`), except files that are
/// meant to be rejected.
#[test]
fn corpus_programs_round_trip() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../programs");
    for f in adasm_files(&root) {
        let src = std::fs::read_to_string(&f).unwrap_or_default();
        if !src.contains("; error:") {
            round_trip(&f);
        }
    }
}

#[test]
fn lowering_resolves_opcodes_constants_names_and_locations() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/powloop.adasm");
    let m = assemble_file(&path);
    let f = &m.funcs[0];
    assert_eq!(f.name, "pow");
    assert_eq!(f.loc, vm::ir::Loc::new(2, 1));
    assert_eq!(f.param_types(), vec![Type::F64, Type::I64]);
    assert_eq!(f.ret, vm::ir::RetType::One(Type::F64));
    let names: Vec<_> = f.blocks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["entry", "head", "body", "done"]);
    let head = &f.blocks[1];
    assert_eq!(head.phis.len(), 2);
    assert_eq!(
        f.values[head.phis[0].dst.index()].name.as_deref(),
        Some("r")
    );
    assert_eq!(f.ty(head.phis[1].dst), Type::I64);
    assert_eq!(head.phis[0].loc, vm::ir::Loc::new(6, 5));
    assert_eq!(head.insts[0].op, Op::GtI);
    assert_eq!(head.term_loc, vm::ir::Loc::new(9, 5));
    let body = &f.blocks[2];
    assert_eq!(body.insts[0].op, Op::MulF);
    assert_eq!(body.insts[1].op, Op::SubI);
    // `1` is used twice as an i64 (gt 0 is another constant), once per table.
    let ones = f
        .values
        .iter()
        .filter(|v| v.konst == Some(1) && v.ty == Type::I64)
        .count();
    assert_eq!(ones, 1);
    let c = head.phis[0].incoming[0].1;
    assert_eq!(f.values[c.index()].konst, Some(1.0f64.to_bits()));
}

#[test]
fn calls_refer_to_functions_by_index() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/calls.adasm");
    let m = assemble_file(&path);
    let main = &m.funcs[0];
    let call = &main.blocks[0].insts[0];
    assert_eq!(call.op, Op::Call);
    assert_eq!(call.callee, m.find("fact"));
    assert_eq!(call.args.len(), 1);
    assert!(call.dst.is_some());
    let even = m.find("@is_even").expect("defined");
    let odd = m.find("is_odd").expect("defined");
    let calls_of = |f: &Function| -> Vec<_> {
        f.blocks
            .iter()
            .flat_map(|b| &b.insts)
            .filter_map(|i| i.callee)
            .collect()
    };
    assert_eq!(calls_of(m.func(even)), vec![odd]);
    assert_eq!(calls_of(m.func(odd)), vec![even]);
}

#[test]
fn literal_only_operations_take_the_literal_types() {
    let src = "fn @f() -> f64 {\nentry:\n  %a = add 1, 2\n  %b = add 1.0, 2.0\n  %c = select true, 1, 2\n  %d = phi_free_copy\n  ret %b\n}\n";
    // (`phi_free_copy` is an unknown mnemonic: check the error, then the
    // valid part.)
    let err = assembler::assemble(src, "f.adasm").expect_err("unknown mnemonic");
    assert_eq!(err.items.len(), 1, "{err}");
    assert!(err.items[0]
        .message
        .contains("unknown instruction `phi_free_copy`"));
    let src = src.replace("  %d = phi_free_copy\n", "");
    let m = assembler::assemble(&src, "f.adasm").unwrap_or_else(|d| panic!("{d}"));
    let insts = &m.funcs[0].blocks[0].insts;
    assert_eq!(insts[0].op, Op::AddI);
    assert_eq!(insts[1].op, Op::AddF);
    assert_eq!(insts[2].op, Op::Select);
    assert_eq!(m.funcs[0].ty(insts[2].dst.expect("has dst")), Type::I64);
}

#[test]
fn print_handles_any_module_without_panicking() {
    // A module the assembler would never produce: unnamed and clashing
    // values, bad labels, reverse-mode opcodes, dangling indices.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/powloop.adasm");
    let mut m = assemble_file(&path);
    let f = &mut m.funcs[0];
    f.values[0].name = None;
    f.values[1].name = Some("r".to_string());
    f.blocks[1].name = "fn".to_string();
    f.blocks[2].name = f.blocks[3].name.clone();
    f.blocks[2].insts.push(vm::ir::Inst::new(
        Op::Acc,
        Some(ValueId(999)),
        vec![ValueId(0)],
        Default::default(),
    ));
    f.blocks[3].term = Term::BlkPop(vec![vm::ir::BlockId(77)]);
    f.ret = vm::ir::RetType::Many(vec![Type::F64, Type::F64]);
    let text = assembler::print_module(&m);
    assert!(text.contains("fn @pow(%v0: f64, %r: i64)"), "{text}");
    assert!(text.contains("bb1:"), "{text}");
    assert!(text.contains("bb3:"), "{text}");
    assert!(text.contains("acc"), "{text}");
    assert!(text.contains("blk.pop [?bb77]"), "{text}");
}

/// The random programs of `testkit` (used by the AD property tests)
/// assemble and round-trip.
#[test]
fn generated_programs_assemble_and_round_trip() {
    let cfg = testkit::gen::Config::default();
    for seed in 0..200 {
        let g = testkit::gen::program(seed, &cfg);
        let m = match assembler::assemble(&g.source, "gen.adasm") {
            Ok(m) => m,
            Err(d) => panic!("seed {seed}:\n{d}\n{}", g.source),
        };
        check_invariants(&m);
        let text = assembler::print_module(&m);
        let m2 = assembler::assemble(&text, "printed.adasm").unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(normal_form(&m), normal_form(&m2), "seed {seed}");
        assert!(m.find(&g.entry).is_some());
    }
}

/// Newlines are free between the tokens of a header, a label may share its
/// line with an instruction, `}` may follow the last instruction, and CRLF
/// line ends and a byte-order mark at the start of a file are accepted.
#[test]
fn layout_freedoms() {
    let file = "\u{feff}fn @f(\r\n  %x: f64,\r\n  %y: f64\r\n) -> f64\r\n{\r\nentry: %s = add %x, %y\r\n  jmp out\r\nout: ret %s }\r\n";
    let src = assembler::decode(file.as_bytes(), "f.adasm").unwrap_or_else(|d| panic!("{d}"));
    let m = assembler::assemble(&src, "f.adasm").unwrap_or_else(|d| panic!("{d}"));
    let f = &m.funcs[0];
    assert_eq!(f.blocks.len(), 2);
    assert_eq!(f.blocks[0].insts[0].loc, vm::ir::Loc::new(6, 8));
    assert_eq!(f.blocks[1].term_loc, vm::ir::Loc::new(8, 6));
    let err = assembler::assemble("fn @f() -> f64 {\r\nentry:\r\n  ret 1\r\n}\r\n", "f.adasm")
        .expect_err("integer literal");
    assert!(err.render().contains("\n3 │   ret 1\n  │       ^"), "{err}");
}

/// A file's bytes become text through `decode`: one leading byte-order mark
/// is not part of line 1 (columns and the echoed line do not see it), a
/// second one is an ordinary error, and bytes that are not UTF-8 are a
/// diagnostic at the first of them.
#[test]
fn decoding_files_skips_one_bom_and_locates_bad_bytes() {
    let file = b"\xEF\xBB\xBFfn @f() -> f64 { ; \xC3\xA9\nentry:\n  ret 1\n}\n";
    let src = assembler::decode(file, "f.adasm").unwrap_or_else(|d| panic!("{d}"));
    assert!(src.starts_with("fn @f()"));
    let bad = b"\xEF\xBB\xBFfn @f() -> i64 $ {\nentry:\n  ret 1\n}\n";
    let src = assembler::decode(bad, "f.adasm").unwrap_or_else(|d| panic!("{d}"));
    let err = assembler::assemble(&src, "f.adasm").expect_err("`$`");
    assert!(
        err.render()
            .starts_with("f.adasm:1:16: error: unexpected character `$`\n1 │ fn @f() -> i64 $ {\n  │                ^"),
        "{err}"
    );
    let twice = b"\xEF\xBB\xBF\xEF\xBB\xBFfn @f() -> i64 {\nentry:\n  ret 1\n}\n";
    let src = assembler::decode(twice, "f.adasm").unwrap_or_else(|d| panic!("{d}"));
    let err = assembler::assemble(&src, "f.adasm").expect_err("second BOM");
    assert!(
        err.render()
            .starts_with("f.adasm:1:1: error: unexpected byte-order mark (U+FEFF)"),
        "{err}"
    );
    let latin1 = b"; caf\xE9\nfn @main() -> f64 {\nentry:\n    ret 1.0\n}\n";
    let err = assembler::decode(latin1, "latin1.adasm").expect_err("not UTF-8");
    assert_eq!(
        err.render(),
        "latin1.adasm:1:6: error: invalid UTF-8: byte 0xE9 (byte 5 of the file) is not part \
         of a UTF-8 character; source files must be UTF-8\n1 │ ; caf\u{FFFD}\n  │      ^"
    );
}

/// Every call of an unknown function is reported; the suggestions share a
/// budget of comparisons, so many functions with many unknown calls stay
/// linear to check: the first calls get one, the last ones none.
#[test]
fn suggestions_for_unknown_calls_are_bounded() {
    let n = 3000;
    let src: String = (0..n)
        .map(|i| {
            format!(
                "fn @f{i}(%x: f64) -> f64 {{\nentry:\n    %y = call @g{i}(%x)\n    ret %y\n}}\n"
            )
        })
        .collect();
    let start = std::time::Instant::now();
    let err = assembler::assemble(&src, "many.adasm").expect_err("unknown calls");
    let took = start.elapsed();
    assert_eq!(err.items.len(), n);
    let first = &err.items[0].message;
    assert_eq!(first, "unknown function `@g0`; did you mean `@f0`?");
    let last = &err.items[n - 1].message;
    assert_eq!(last, &format!("unknown function `@g{}`", n - 1));
    assert!(err.items.iter().all(|d| d.unknown_function().is_some()));
    // Generous: the whole check is a few milliseconds in a release build.
    assert!(took.as_secs() < 20, "{took:?}");
}
