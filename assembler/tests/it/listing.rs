//! Bytecode listings (`vm::disasm::program`) read back
//! (`assembler::assemble_listing`): what they say is kept, what they
//! leave out is found again, and what is wrong is a located error.

use vm::ir::FuncId;
use vm::Value;

const POW: &str = "\
fn @pow(%x: f64, %n: i64) -> f64   ; 9 regs, 4 consts
  ; consts: r2 = 1.0, r3 = 0, r4 = 1, r5 = -1
entry:
  0000  copy        %r, 1.0
  0001  copy        %k, %n
head:
  0002  jmp.if.le.i %k, 0, -> done (0005)
body:
  0003  mul.f       %r, %r, %x
  0004  jmp.step.if.gt.i %k -= 1, 0, -> body (0003)
done:
  0005  ret         %r
";

#[test]
fn a_listing_reads_back_as_itself_and_runs() {
    let p = assembler::assemble_listing(POW, "pow.txt").unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(vm::disasm::program(&p), format!("{POW}\n"));
    let f = p.func(FuncId(0));
    // Register types found from the opcodes: %r is f64, %k i64.
    assert_eq!(f.reg_types.len(), 9);
    let mut machine = vm::interp::Vm::default();
    let got = machine.run(&p, FuncId(0), &[Value::F64(1.5), Value::I64(3)]);
    assert_eq!(got, Ok(Value::F64(1.5f64.powi(3))));
}

fn errors(src: &str) -> Vec<String> {
    match assembler::assemble_listing(src, "t.txt") {
        Ok(_) => Vec::new(),
        Err(d) => d
            .items
            .iter()
            .map(|i| format!("{}:{}: {}", i.line, i.col, i.message))
            .collect(),
    }
}

#[test]
fn what_is_wrong_is_a_located_error() {
    let bad = POW.replace("mul.f       %r, %r, %x", "mul.q       %r, %r, %x");
    assert_eq!(errors(&bad), ["9:1: unknown opcode `mul.q`"]);
    let bad = POW.replace("  0003", "  0007");
    assert_eq!(
        errors(&bad),
        ["9:1: expected instruction 0003, found `0007`"]
    );
    let bad = POW.replace("; 9 regs", "; 4 regs");
    assert_eq!(
        errors(&bad),
        ["1:1: the code uses 8 registers; the header says 4"]
    );
    // The verifier: `%n` is an i64 the header fixes, read as an f64.
    let bad = POW.replace("mul.f       %r, %r, %x", "mul.f       %r, %r, %n");
    let e = errors(&bad);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("9:1: the verifier rejects it: @pow at 0003"),
        "{e:?}"
    );
    assert!(errors("nonsense\n")
        .iter()
        .any(|e| e.contains("expected `fn @name(...)`")));
}

/// A long function reads in time linear in its length: a chain of 60,000
/// copies, each register named.
#[test]
fn a_long_listing_reads_quickly() {
    let n = 60_000;
    let mut src = format!(
        "fn @f(%a0: f64) -> f64   ; {} regs, 0 consts\nentry:\n",
        n + 1
    );
    for i in 1..=n {
        src.push_str(&format!("  {:04}  copy        %a{i}, %a{}\n", i - 1, i - 1));
    }
    src.push_str(&format!("  {n:04}  ret         %a{n}\n"));
    let start = std::time::Instant::now();
    let p = assembler::assemble_listing(&src, "long.txt").unwrap_or_else(|d| panic!("{d}"));
    assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
    let mut machine = vm::interp::Vm::default();
    let got = machine.run(&p, FuncId(0), &[Value::F64(2.5)]);
    assert_eq!(got, Ok(Value::F64(2.5)));
}

/// Registers of one function that the IR names alike (derived code has
/// such) are listed under distinct names: the first keeps the name, the
/// later ones get the smallest free `.<k>` suffix. So the listing reads
/// back to code that computes the same.
#[test]
fn registers_named_alike_are_listed_apart() {
    let src = "fn @f(%x: f64) -> f64 {\nentry:\n    %a = mul %x, %x\n    %b = add %a, %x\n    %c = sub %b, %a\n    ret %c\n}\n";
    let mut m = assembler::assemble(src, "f.adasm").unwrap_or_else(|e| panic!("{e}"));
    for v in &mut m.funcs[0].values {
        v.name = match v.name.as_deref() {
            Some("a") | Some("b") => Some("t".to_string()),
            Some("c") => Some("t.1".to_string()),
            _ => v.name.clone(),
        };
    }
    let p = vm::lower::lower_module(&m).unwrap_or_else(|e| panic!("{e}"));
    let text = vm::disasm::program(&p);
    for line in [
        "mul.f       %t, %x, %x",
        "add.f       %t.2, %t, %x",
        "sub.f       %t.1, %t.2, %t",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    let back = assembler::assemble_listing(&text, "f.txt").unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(vm::disasm::program(&back), text);
    let mut machine = vm::interp::Vm::default();
    let got = machine.run(&back, FuncId(0), &[Value::F64(3.0)]);
    assert_eq!(got, Ok(Value::F64(3.0)));
}
