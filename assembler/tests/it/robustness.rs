//! Assembling never panics: arbitrary bytes, arbitrary sequences of valid
//! tokens and mutated valid programs all give a module or diagnostics. An
//! accepted module always prints to text that assembles again; rejected
//! input always has at least one diagnostic, and rendering it works.

use proptest::prelude::*;
use std::path::Path;

/// Assemble, as user text and as register code, and check the outcomes'
/// invariants.
fn assemble_checked(src: &str) {
    let register = assembler::Options {
        code: assembler::Code::Register,
    };
    match assembler::assemble_with(src, "fuzz.adasm", &register) {
        Ok(m) => {
            // Register code reads back as itself.
            let text = assembler::print_module(&m);
            match assembler::assemble_with(&text, "printed.adasm", &register) {
                Ok(back) => assert_eq!(assembler::print_module(&back), text, "{src}"),
                Err(d) => panic!(
                    "printed register code does not assemble:\n{d}\n--- source:\n{src}\n--- printed:\n{text}"
                ),
            }
        }
        Err(d) => check_rejection(src, &d),
    }
    match assembler::assemble(src, "fuzz.adasm") {
        Ok(m) => {
            let text = assembler::print_module(&m);
            if let Err(d) = assembler::assemble(&text, "printed.adasm") {
                panic!("printed module does not assemble:\n{d}\n--- source:\n{src}\n--- printed:\n{text}");
            }
            // User code is register code too.
            if let Err(d) = assembler::assemble_with(src, "fuzz.adasm", &register) {
                panic!("user code is not register code:\n{d}\n--- source:\n{src}");
            }
        }
        Err(d) => check_rejection(src, &d),
    }
}

/// A rejection has a real reason for each diagnostic, and renders.
fn check_rejection(src: &str, d: &assembler::Diagnostics) {
    {
        {
            assert!(!d.items.is_empty());
            // Every rejection comes with a real reason.
            for i in &d.items {
                assert!(
                    !i.message.starts_with("internal error"),
                    "{}\n{src}",
                    i.message
                );
            }
            let text = d.render();
            assert_eq!(text.lines().count(), 3 * d.items.len(), "{text}");
            // The coloured form is the same text with escape sequences.
            let color = d.render_color();
            let mut plain = String::new();
            let mut in_escape = false;
            for c in color.chars() {
                match (in_escape, c) {
                    (false, '\x1b') => in_escape = true,
                    (false, c) => plain.push(c),
                    (true, 'm') => in_escape = false,
                    (true, _) => {}
                }
            }
            assert_eq!(plain, text);
            for w in d.items.windows(2) {
                assert!(w[0].span.start <= w[1].span.start, "sorted by position");
            }
        }
    }
}

const VOCAB: &[&str] = &[
    "fn",
    "@f",
    "@g",
    "@main",
    "%x",
    "%y",
    "%z",
    "%a",
    "%c",
    "entry",
    "body",
    "done",
    "head",
    ":",
    ",",
    "=",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "->",
    "\n",
    "\n",
    "\n",
    "f64",
    "i64",
    "bool",
    "add",
    "sub",
    "mul",
    "lt",
    "gt",
    "phi",
    "br",
    "jmp",
    "ret",
    "call",
    "call.acc",
    "ret.n",
    "blk.pop",
    "acc",
    "comms.pop",
    "aset",
    "aget",
    "anew",
    "select",
    "copy",
    "itof",
    "sin",
    "1",
    "-7",
    "0",
    "2.0",
    "-1.5e-3",
    "inf",
    "-inf",
    "nan",
    "true",
    "false",
    "; comment",
    "$",
    "é",
    "99999999999999999999",
];

fn token_program() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(VOCAB), 0..120).prop_map(|toks| toks.join(" "))
}

fn valid_programs() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A valid program with a few lines deleted, duplicated or swapped.
fn mutated_program() -> impl Strategy<Value = String> {
    let programs = valid_programs();
    let n = programs.len().max(1);
    (
        0..n,
        prop::collection::vec(
            (
                0u8..3,
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
            ),
            1..5,
        ),
    )
        .prop_map(move |(p, edits)| {
            let src = programs.get(p).cloned().unwrap_or_default();
            let mut lines: Vec<&str> = src.lines().collect();
            for (kind, i, j) in edits {
                if lines.is_empty() {
                    break;
                }
                let (i, j) = (i.index(lines.len()), j.index(lines.len()));
                match kind {
                    0 => {
                        lines.remove(i);
                    }
                    1 => lines.insert(j, lines[i]),
                    _ => lines.swap(i, j),
                }
            }
            lines.join("\n")
        })
}

/// The bytecode listings of the valid programs (inlining off).
fn valid_listings() -> Vec<String> {
    valid_programs()
        .iter()
        .filter_map(|src| {
            let m = assembler::assemble(src, "p.adasm").ok()?;
            let p = vm::lower::lower_module(&m).ok()?;
            Some(vm::disasm::program(&p))
        })
        .collect()
}

/// A valid listing with a few lines deleted, duplicated or swapped, or a
/// few characters changed.
fn mutated_listing() -> impl Strategy<Value = String> {
    let listings = valid_listings();
    let n = listings.len().max(1);
    (
        0..n,
        prop::collection::vec(
            (
                0u8..4,
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
                prop::sample::select(
                    &[
                        " ", "%", "r9", "0", "-1", "(", "]", ",", "->", "@", ";", "\n",
                    ][..],
                ),
            ),
            1..5,
        ),
    )
        .prop_map(move |(p, edits)| {
            let src = listings.get(p).cloned().unwrap_or_default();
            let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
            for (kind, i, j, text) in edits {
                if lines.is_empty() {
                    break;
                }
                let (i, j) = (i.index(lines.len()), j.index(lines.len()));
                match kind {
                    0 => {
                        lines.remove(i);
                    }
                    1 => lines.insert(j, lines[i].clone()),
                    2 => lines.swap(i, j),
                    _ => {
                        let l = &mut lines[i];
                        let at = j % (l.len() + 1);
                        if l.is_char_boundary(at) {
                            l.insert_str(at, text);
                        }
                    }
                }
            }
            lines.join("\n")
        })
}

/// Read a listing: a program that lists as the same text again, or
/// diagnostics.
fn listing_checked(src: &str) {
    match assembler::assemble_listing(src, "fuzz.txt") {
        Ok(p) => {
            let text = vm::disasm::program(&p);
            match assembler::assemble_listing(&text, "again.txt") {
                Ok(q) => assert_eq!(vm::disasm::program(&q), text, "{src}"),
                Err(d) => panic!("a listing of a read listing does not read:\n{d}\n{text}"),
            }
        }
        Err(d) => check_rejection(src, &d),
    }
}

const TEMPLATES: &[&str] = &[
    "L1:",
    "L1:",
    "%R1 = add %R2, %R3",
    "%R1 = add %R2, 1.0",
    "%R1 = sub %R2, 1",
    "%R1 = phi [L1: %R2], [L2: %R3]",
    "%R1 = phi [L1: 1.0]",
    "%R1 = phi [L1: 0], [L2: %R2]",
    "br %R1, L1, L2",
    "br true, L1, L2",
    "jmp L1",
    "ret %R1",
    "ret 1.0",
    "%R1 = lt %R2, %R3",
    "%R1 = call @f(%R2)",
    "%R1 = call @g(%R2, %R3)",
    "aset %R1, %R2, %R3",
    "%R1 = anew 3",
    "%R1 = itof %R2",
    "%R1 = ftoi %R2",
    "%R1 = select %R1, %R2, %R3",
    "%R1 = copy %R2",
    "%R1 = aget %R2, %R3",
    "%R1 = neg %R2",
    "%R1 = alen %R2",
    "acc %R1, %R2",
    "%R1 = comms.pop",
    "comms.push %R1",
    "%R1 = take %R2",
    "blk.push 1",
    "blk.pop [L1, L2]",
    "ret.n %R1",
    "call.acc @h(%R2) -> [%R3]",
    "call.n @h(%R2) -> [%R3]",
    "%R1 = mul.z %R2, %R3",
    "%R1 = sincos %R2",
];
const REGS: &[&str] = &["x", "n", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"];
const LABELS: &[&str] = &["entry", "b1", "b2", "b3", "b4"];

/// Functions made of whole instruction lines, with registers and labels
/// from small sets and a fresh destination `%t<i>` on line `i`: many reach
/// type inference, phi and dominance checks, and some are valid (and then
/// must round-trip).
fn line_program() -> impl Strategy<Value = String> {
    let line = (
        prop::sample::select(TEMPLATES),
        prop::sample::select(REGS),
        prop::sample::select(REGS),
        prop::sample::select(REGS),
        prop::sample::select(LABELS),
        prop::sample::select(LABELS),
    );
    prop::collection::vec(line, 1..25).prop_map(|lines| {
        let body: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, (t, r1, r2, r3, l1, l2))| {
                t.replace("%R1 = ", &format!("%t{i} = "))
                    .replace("R1", r1)
                    .replace("R2", r2)
                    .replace("R3", r3)
                    .replace("L1", l1)
                    .replace("L2", l2)
            })
            .collect();
        format!(
            "fn @f(%x: f64, %n: i64) -> f64 {{\nentry:\n{}\n}}\n\
             fn @g(%a: f64, %n: i64) -> f64 {{\nentry:\n    ret %a\n}}\n\
             fn @h(%a: f64) -> (f64) {{\nentry:\n    ret.n %a\n}}\n",
            body.join("\n")
        )
    })
}

/// Cases per property: 500 unless `PROPTEST_CASES` says otherwise.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_instruction_lines_never_panic(src in line_program()) {
        assemble_checked(&src);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        assemble_checked(&String::from_utf8_lossy(&bytes));
        listing_checked(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_token_sequences_never_panic(src in token_program()) {
        assemble_checked(&src);
    }

    #[test]
    fn mutated_listings_never_panic(src in mutated_listing()) {
        listing_checked(&src);
    }

    #[test]
    fn mutated_programs_never_panic(src in mutated_program()) {
        assemble_checked(&src);
    }

    #[test]
    fn argument_literals_never_panic(s in "@?[a-z]{0,3}\\(([-0-9.e,\\[\\] ]|true|inf|nan){0,30}\\)?") {
        if let Ok((_, lits)) = assembler::parse_call(&s) {
            let tys = [vm::Type::F64, vm::Type::I64, vm::Type::Bool, vm::Type::Arr];
            let params: Vec<vm::Type> = (0..lits.len()).map(|i| tys[i % 4]).collect();
            let _ = assembler::literals_to_values(&params, &lits);
        }
    }
}

/// A function just over the value limit is rejected with a clear message;
/// one at the limit is accepted.
#[test]
fn value_limit() {
    fn program(n_values: usize) -> String {
        // One parameter plus `n_values - 1` registers.
        let mut s = String::from("fn @big(%v0: f64) -> f64 {\nentry:\n");
        for i in 1..n_values {
            s.push_str(&format!("    %v{i} = copy %v{}\n", i - 1));
        }
        s.push_str(&format!("    ret %v{}\n}}\n", n_values - 1));
        s
    }
    let limit = assembler::MAX_VALUES;
    assert!(assembler::assemble(&program(limit), "big.adasm").is_ok());
    let err = assembler::assemble(&program(limit + 1), "big.adasm").expect_err("too big");
    assert_eq!(err.items.len(), 1, "{err}");
    assert_eq!((err.items[0].line, err.items[0].col), (1, 4));
    assert!(err.items[0].message.contains("at most 60000"), "{err}");
}

/// Constants count towards the limit too.
#[test]
fn constants_count_towards_the_limit() {
    let mut s = String::from("fn @k(%x: f64) -> f64 {\nentry:\n");
    let n = assembler::MAX_VALUES / 2 + 10;
    for i in 0..n {
        s.push_str(&format!("    %v{i} = add %x, {i}.5\n"));
    }
    s.push_str("    ret %x\n}\n");
    let err = assembler::assemble(&s, "k.adasm").expect_err("too many values");
    assert!(err.items[0].message.contains("distinct constants"), "{err}");
}

/// Long chains of blocks, deep loop nests and many errors on one line stay
/// fast and use no deep recursion.
#[test]
fn large_inputs_are_handled() {
    // 20,000 blocks in a chain, each using a value from the first block.
    let mut s =
        String::from("fn @chain(%x: f64) -> f64 {\nentry:\n    %a = add %x, 1.0\n    jmp b0\n");
    for i in 0..20_000 {
        s.push_str(&format!(
            "b{i}:\n    %t{i} = add %a, 1.0\n    jmp b{}\n",
            i + 1
        ));
    }
    s.push_str("b20000:\n    ret %a\n}\n");
    assert!(assembler::assemble(&s, "chain.adasm").is_ok());
    // A phi chain where each phi names a value defined later in the text.
    let mut s = String::from("fn @late(%x: f64) -> f64 {\nentry:\n    jmp l\nl:\n");
    for i in 0..5_000 {
        s.push_str(&format!("    %p{i} = phi [entry: %x], [l: %p{}]\n", i + 1));
    }
    s.push_str(
        "    %p5000 = phi [entry: %x], [l: %p0]\n    br true, l, out\nout:\n    ret %p0\n}\n",
    );
    assert!(assembler::assemble(&s, "late.adasm").is_ok());
    // Many bad characters and many errors on one line.
    let line = "$ ".repeat(20_000);
    let err = assembler::assemble(&line, "bad.adasm").expect_err("bad");
    assert_eq!(err.items.len(), 20_000);
    let nested = "[".repeat(100_000) + &"(".repeat(100_000);
    assert!(assembler::assemble(&nested, "nested.adasm").is_err());
}

/// Register code reads in time linear in its length: 30,000 registers
/// accumulated into one another, each written twice.
#[test]
fn long_register_code_reads_quickly() {
    let n = 30_000;
    let mut s = String::from("fn @f(%x: f64) -> (f64) {\nentry:\n");
    for i in 1..=n {
        s.push_str(&format!(
            "    acc %a{i}, %a{}\n    %a{i} = mul %a{i}, %x\n",
            i - 1
        ));
    }
    s.push_str(&format!("    ret.n %a{n}\n}}\n"));
    let options = assembler::Options {
        code: assembler::Code::Register,
    };
    let start = std::time::Instant::now();
    let m = assembler::assemble_with(&s, "long.adasm", &options).unwrap_or_else(|d| panic!("{d}"));
    assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
    assert_eq!(m.funcs[0].values.len(), n + 2);
}
