//! Properties of the generated code itself (adasm.md §4): which opcodes the
//! forward and reverse functions contain and how much crosses between them.

use ad::Engine;
use vm::Value;

fn engine(src: &str) -> Engine {
    let module = match assembler::assemble(src, "test.adasm") {
        Ok(m) => m,
        Err(d) => panic!("{d}"),
    };
    Engine::new(module).expect("verifies")
}

const POWLOOP: &str = "
fn @pow(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %r = phi [entry: 1.0], [body: %r2]
    %k = phi [entry: %n],  [body: %k2]
    %c = gt %k, 0
    br %c, body, done
body:
    %r2 = mul %r, %x
    %k2 = sub %k, 1
    jmp head
done:
    ret %r
}
";

const STRAIGHT: &str = "
fn @f(%x: f64, %y: f64) -> f64 {
entry:
    %a = mul %x, %y
    %b = sin %a
    %c = add %b, %x
    %d = call @g(%c, %y)
    ret %d
}
fn @g(%u: f64, %v: f64) -> f64 {
entry:
    %w = div %u, %v
    %e = exp %w
    ret %e
}
";

#[test]
fn straight_line_code_has_no_block_stack_traffic() {
    let mut e = engine(STRAIGHT);
    let f = e.find("f").expect("f");
    let text = e.disasm_ad(f).expect("derives");
    assert!(text.contains("comms.push"), "{text}");
    assert!(
        !text.contains("blk."),
        "straight-line AD code touched the block stack:\n{text}"
    );
}

#[test]
fn add_needs_nothing_and_mul_needs_its_operands() {
    let mut e = engine(
        "fn @f(%x: f64, %y: f64) -> f64 {
         entry:
             %a = add %x, %y
             %b = add %a, %x
             ret %b
         }",
    );
    let f = e.find("f").expect("f");
    let text = e.disasm_ad(f).expect("derives");
    assert!(
        !text.contains("comms."),
        "add communicated a value:\n{text}"
    );

    let mut e = engine(
        "fn @f(%x: f64, %y: f64) -> f64 {
         entry:
             %a = mul %x, %y
             ret %a
         }",
    );
    let f = e.find("f").expect("f");
    let text = e.disasm_ad(f).expect("derives");
    assert_eq!(text.matches("comms.push").count(), 2, "{text}");
    assert_eq!(text.matches("comms.pop").count(), 2, "{text}");
}

#[test]
fn integer_loop_counter_causes_no_comms_traffic() {
    let mut e = engine(POWLOOP);
    let f = e.find("pow").expect("pow");
    let n = 10_000;
    let g = e
        .grad(f, &[Value::F64(1.0001), Value::I64(n)])
        .expect("grad");
    let expect = n as f64 * 1.0001f64.powi(n as i32 - 1);
    assert!(
        (g.grad[0]
            .clone()
            .and_then(|v| if let Value::F64(x) = v { Some(x) } else { None })
            .expect("f64")
            - expect)
            .abs()
            < 1e-9 * expect
    );
    // Per iteration: one f64 (the running product, for `mul`) and one block
    // id (the loop header is a join). Pushing the i64 counter too would add
    // 8 bytes per iteration.
    let peak = e.vm_mut().peak_stack_bytes();
    assert!(
        peak <= 12 * n as usize + 64,
        "peak {peak} bytes for n = {n}"
    );
    assert!(
        peak >= 8 * n as usize,
        "peak {peak} bytes for n = {n}: the loop pushed nothing?"
    );
}

#[test]
fn inactive_parameters_and_nograd_generate_no_reverse_code() {
    let mut e = engine(
        "fn @f(%x: f64, %n: i64) -> f64 {
         entry:
             %m = itof %n
             %s = sin %m
             %c = nograd %x
             %t = mul %s, %c
             %u = add %t, %x
             ret %u
         }",
    );
    let f = e.find("f").expect("f");
    let text = e.disasm_ad(f).expect("derives");
    // Only `add` is active: nothing needs to cross, and no sin/cos appears
    // in the reverse code.
    assert!(!text.contains("comms."), "{text}");
    let g = e.grad(f, &[Value::F64(0.3), Value::I64(2)]).expect("grad");
    assert_eq!(g.grad, vec![Some(Value::F64(1.0)), None]);
}

#[test]
fn ad_stack_limit_traps_with_its_flag_named() {
    let mut e = engine(POWLOOP);
    let f = e.find("pow").expect("pow");
    e.vm_mut().limits_mut().max_stack_bytes = 4096;
    let err = e
        .grad(f, &[Value::F64(1.0001), Value::I64(100_000)])
        .expect_err("hits the limit");
    let text = err.to_string();
    assert!(
        text.contains("AD stacks exceed") && text.contains("--max-stack-bytes"),
        "{text}"
    );
    // Within the limit it works, and the limit is reset by raising it.
    e.vm_mut().limits_mut().max_stack_bytes = 1 << 24;
    let g = e
        .grad(f, &[Value::F64(1.0001), Value::I64(100_000)])
        .expect("fits");
    assert!(g.value > 1.0);
}
