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

/// [`engine`] without inlining: every function as written, each call a
/// call.
fn engine_as_written(src: &str) -> Engine {
    let module = assembler::assemble(src, "test.adasm").unwrap_or_else(|d| panic!("{d}"));
    Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies")
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
    // Pushed by `comms.push`, or as a batch: `comms.reserve` (the first
    // push) and `comms.push.r`.
    let pushes = count_mnemonics(&text, &["comms.push", "comms.push.r", "comms.reserve"]);
    assert_eq!(pushes, 2, "{text}");
    // Popped by `comms.pop`, or by a multiplication that pops its factor.
    let pops = count_mnemonics(&text, &["comms.pop", "acc.mul.pop", "mul.pop"]);
    assert_eq!(pops, 2, "{text}");
}

/// How many instructions of a disassembly listing have one of `mnemonics`
/// (the word after the instruction's address).
fn count_mnemonics(text: &str, mnemonics: &[&str]) -> usize {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|m| mnemonics.contains(m))
        .count()
}

/// The source of `programs/bench/<name>.adasm`.
fn bench_program(name: &str) -> String {
    let path = testkit::workspace_root().join(format!("programs/bench/{name}.adasm"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The f64 gradient entries of `g`.
fn f64s(g: &ad::Gradient) -> Vec<Option<f64>> {
    g.grad
        .iter()
        .map(|v| match v {
            Some(Value::F64(x)) => Some(*x),
            _ => None,
        })
        .collect()
}

/// Peak AD stack bytes of a gradient of `f` at `args`.
fn peak(e: &mut Engine, f: &str, args: &[Value]) -> usize {
    let f = e.find(f).expect("defined");
    e.grad(f, args).expect("grad");
    e.vm_mut().peak_stack_bytes()
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
    let got = f64s(&g)[0].expect("f64");
    assert!((got - expect).abs() < 1e-9 * expect, "{got} vs {expect}");
    // Per iteration: the running product (for `mul`), 8 bytes, and nothing
    // else: the loop is counted (no block id per iteration) and its i64
    // counter is pushed once, at the exit.
    let peak = e.vm_mut().peak_stack_bytes();
    assert!(peak <= 8 * n as usize + 64, "peak {peak} bytes for n = {n}");
    assert!(
        peak >= 8 * n as usize,
        "peak {peak} bytes for n = {n}: the loop pushed nothing?"
    );
}

#[test]
fn counted_loops_have_no_block_stack_traffic() {
    let mut e = engine(POWLOOP);
    let f = e.find("pow").expect("pow");
    let text = e.disasm_ad(f).expect("derives");
    assert!(!text.contains("blk."), "{text}");
    // The reverse loop steps the induction variable and compares it with
    // its first value instead.
    assert!(text.contains("%iv.head"), "{text}");
    // The clean-up turned accumulations into writes: no zeroing and no
    // phi-cotangent moves are left.
    let rev = &text[text.find("@pow.rev").expect("reverse")..];
    assert!(!rev.contains("zero") && !rev.contains("take"), "{rev}");
}

#[test]
fn a_join_in_a_loop_costs_one_block_id_per_iteration_and_nothing_else() {
    // With its branches (if-converted, the join costs nothing:
    // `ifconv::converted_joins_cost_derived_code_no_block_ids`).
    let mut e = engine(&bench_program("branchy"));
    let n = 1000;
    let v: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
    let bytes = peak(&mut e, "branchy", &[Value::Arr(v)]);
    // The block id of the join (4 bytes per iteration). The index `i` is
    // the loop's induction variable (recomputed by the reverse loop) and
    // `x` is read again from the array (nothing in the function writes
    // arrays), so neither is pushed.
    assert!(bytes <= 4 * n + 64, "peak {bytes} bytes for n = {n}");
    assert!(bytes >= 4 * n, "peak {bytes} bytes for n = {n}");
    let f = e.find("branchy").expect("branchy");
    let text = e.disasm_ad(f).expect("derives");
    let rev = &text[text.find("@branchy.rev").expect("reverse")..];
    assert!(rev.contains("aget"), "x is read again:\n{rev}");
}

#[test]
fn values_defined_before_a_loop_cross_once_per_execution_of_the_loop() {
    // `w` is defined before the inner loop and needed by its reverse (for
    // `mul`); the inner loop runs `m` times per outer iteration.
    let src = "
fn @f(%x: f64, %n: i64, %m: i64) -> f64 {
entry:
    jmp oh
oh:
    %i = phi [entry: 0], [ol: %i2]
    %s = phi [entry: 0.0], [ol: %s3]
    %co = lt %i, %n
    br %co, opre, done
opre:
    %w = sin %s
    %w2 = add %w, %x
    jmp ih
ih:
    %j = phi [opre: 0], [ib: %j2]
    %t = phi [opre: %s], [ib: %t2]
    %ci = lt %j, %m
    br %ci, ib, ol
ib:
    %u = mul %t, %w2
    %t2 = add %u, 0.001
    %j2 = add %j, 1
    jmp ih
ol:
    %s3 = add %t, 0.5
    %i2 = add %i, 1
    jmp oh
done:
    ret %s
}";
    let mut e = engine(src);
    let args = |n: i64, m: i64| [Value::F64(0.3), Value::I64(n), Value::I64(m)];
    let small = peak(&mut e, "f", &args(10, 10));
    let wide = peak(&mut e, "f", &args(10, 1000));
    let tall = peak(&mut e, "f", &args(1000, 10));
    // Per inner iteration only `t` (8 bytes): growing the inner loop by
    // 990 iterations per outer iteration adds 10 * 990 * 8 bytes.
    assert_eq!(wide - small, 10 * 990 * 8, "{small} {wide}");
    // Per outer iteration: the inner loop's 10 `t`s, its counter and `w2`
    // at its exit, and `s` and `w` for the outer body: nothing grows with
    // the product of both.
    let per_outer = (tall - small) / 990;
    assert!(
        per_outer <= 10 * 8 + 4 * 8,
        "{per_outer} bytes per outer iteration"
    );
    // And the gradient is right (checked against finite differences).
    let f = e.find("f").expect("f");
    let a = args(7, 5);
    let g = e.grad(f, &a).expect("grad");
    let verdict = testkit::fd::check(
        |args| match e.run(f, args) {
            Ok(Value::F64(y)) => Some(y),
            _ => None,
        },
        &a,
        &g.grad,
    );
    assert!(
        matches!(verdict, testkit::fd::Verdict::Agree),
        "{verdict:?}"
    );
}

#[test]
fn a_loop_without_an_integer_counter_is_counted_by_the_forward_code() {
    // The loop runs on an f64: the forward code adds a counter (one `add`
    // per iteration) and the reverse counts it down; no block ids.
    let src = "
fn @f(%x: f64) -> f64 {
entry:
    jmp h
h:
    %y = phi [entry: %x], [b: %y2]
    %c = gt %y, 0.001
    br %c, b, done
b:
    %y2 = mul %y, 0.5
    jmp h
done:
    ret %y
}";
    let mut e = engine(src);
    let f = e.find("f").expect("f");
    let text = e.disasm_ad(f).expect("derives");
    assert!(!text.contains("blk."), "{text}");
    assert!(text.contains("%trip.h"), "{text}");
    let g = e.grad(f, &[Value::F64(100.0)]).expect("grad");
    // y = x / 2^17 after 17 halvings.
    assert_eq!(f64s(&g)[0], Some(0.5f64.powi(17)));
}

#[test]
fn differentiating_with_respect_to_some_parameters_does_only_their_work() {
    let mut e = engine(&bench_program("logreg"));
    let f = e.find("logreg").expect("logreg");
    let (n, d) = (6, 3);
    let x: Vec<f64> = (0..n * d).map(|i| ((i + 1) as f64).sin()).collect();
    let y: Vec<f64> = (0..n)
        .map(|k| if k % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    let w: Vec<f64> = (0..d).map(|j| 0.1 * (j as f64).cos()).collect();
    let args = [
        Value::Arr(x),
        Value::Arr(y),
        Value::Arr(w),
        Value::I64(n as i64),
        Value::I64(d as i64),
    ];
    let full = e.grad(f, &args).expect("full gradient");
    let only_w = e
        .grad_wrt(f, &args, &[false, false, true, false, false])
        .expect("gradient wrt w");
    assert_eq!(only_w.value, full.value);
    assert_eq!(only_w.grad[2], full.grad[2], "same numbers for w");
    assert_eq!(only_w.grad[0], None);
    assert_eq!(only_w.grad[1], None);
    // X and y are data: no cotangent is accumulated into their shadows, so
    // the reverse code has one `shadow.acc` (into w) instead of three.
    let text = e
        .disasm_ad_wrt(f, &[false, false, true, false, false])
        .expect("derives");
    assert!(text.contains("@logreg.rev.wrt.w"), "{text}");
    assert_eq!(text.matches("shadow.acc").count(), 1, "{text}");
    let text = e.disasm_ad(f).expect("derives");
    assert_eq!(text.matches("shadow.acc").count(), 3, "{text}");
    // Only f64 and f64[] parameters can be selected, one flag each.
    let err = e
        .grad_wrt(f, &args, &[false, false, true, true, false])
        .expect_err("N is i64");
    assert!(err.to_string().contains("%N"), "{err}");
    let err = e.grad_wrt(f, &args, &[true]).expect_err("one flag");
    assert!(err.to_string().contains("5 argument"), "{err}");
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

/// The lines of function `@name` in a disassembly listing.
fn function_text<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!("fn @{name}(");
    text.lines()
        .skip_while(|l| !l.starts_with(&header))
        .take_while(|l| !l.is_empty())
        .collect()
}

/// The pullback of `sin a` needs `cos a`, that of `cos a` needs `sin a`:
/// the forward code computes each beside the primal value, with one
/// `sincos`, and the reverse code has no transcendental function left
/// (adasm.md §4 property 4: "`sin` needs `cos` of its input or the input").
#[test]
fn sin_and_cos_pullbacks_read_factors_the_forward_code_computed() {
    let src = bench_program("sincos");
    let mut e = engine(&src);
    let f = e.find("sincos").expect("sincos");
    let text = e.disasm_ad(f).expect("derives");
    let fwd = function_text(&text, "sincos.fwd").join("\n");
    let rev = function_text(&text, "sincos.rev").join("\n");
    assert_eq!(count_mnemonics(&fwd, &["sincos"]), 2, "{fwd}");
    assert_eq!(count_mnemonics(&fwd, &["sin", "cos"]), 0, "{fwd}");
    assert_eq!(count_mnemonics(&rev, &["sin", "cos", "sincos"]), 0, "{rev}");
    // Two factors cross (cos c and sin x) in place of the inputs c and x.
    let g = e.grad(f, &[Value::F64(0.9)]).expect("gradient");
    assert_eq!(g.value, 0.9f64.cos().sin());
    let want = -0.9f64.cos().cos() * 0.9f64.sin();
    assert_eq!(f64s(&g), [Some(want)]);
    assert_eq!(peak(&mut e, "sincos", &[Value::F64(0.9)]), 16);

    // In a recursive function the factor crosses per call, like the value
    // it replaces: recursion's pullback computes no `cos` per level.
    let src = bench_program("recursion");
    let mut e = engine(&src);
    let f = e.find("rec").expect("rec");
    let text = e.disasm_ad(f).expect("derives");
    let rev = function_text(&text, "rec.rev").join("\n");
    assert_eq!(count_mnemonics(&rev, &["sin", "cos", "sincos"]), 0, "{rev}");
    let args = [Value::F64(0.9), Value::I64(100)];
    let g = e.grad(f, &args).expect("gradient");
    let want = 0.0016352415527060296;
    let got = f64s(&g)[0].expect("f64");
    assert!((got - want).abs() <= 1e-15 * want, "{got} vs {want}");
}

/// A `sin` whose operand is inactive needs nothing: no factor is computed.
#[test]
fn an_inactive_sin_computes_no_factor() {
    let mut e = engine(
        "fn @f(%x: f64, %y: f64) -> f64 {
         entry:
             %s = sin %y
             %p = mul %s, %x
             ret %p
         }",
    );
    let f = e.find("f").expect("f");
    let text = e.disasm_ad_wrt(f, &[true, false]).expect("derives");
    assert_eq!(count_mnemonics(&text, &["sincos", "cos"]), 0, "{text}");
    assert_eq!(count_mnemonics(&text, &["sin"]), 1, "{text}");
}

/// A user function may be called `f.fwd`: the functions derived from `@f`
/// then take other names, so that every function of the program (and of a
/// listing or a trap message) has a name of its own.
#[test]
fn derived_functions_never_take_a_user_functions_name() {
    let src = "
fn @f(%x: f64) -> f64 {
entry:
    %y = call @f.fwd(%x)
    ret %y
}
fn @f.fwd(%x: f64) -> f64 {
entry:
    %y = mul %x, %x
    ret %y
}
fn @f.rev(%x: f64) -> f64 {
entry:
    ret %x
}
";
    let mut e = engine(src);
    let f = e.find("f").expect("defined");
    let g = e.grad(f, &[Value::F64(3.0)]).expect("grad");
    assert_eq!(g.grad, vec![Some(Value::F64(6.0))]);
    let g = e.find("f.rev").expect("defined");
    e.grad(g, &[Value::F64(3.0)]).expect("grad");
    let names: Vec<&str> = e
        .program()
        .funcs()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    for (i, n) in names.iter().enumerate() {
        assert!(!names[..i].contains(n), "{n} twice in {names:?}");
    }
    assert!(
        names.contains(&"f.fwd'") && names.contains(&"f.rev'"),
        "{names:?}"
    );
}

/// A call whose result cannot carry a derivative (`i64`, `bool`) and which
/// receives no array generates no derived code and no reverse code, even
/// with active arguments (adasm.md §4 property 3): the forward code calls
/// the primal callee and the pullback has no `call.acc`. A call that
/// receives an array still does, since the callee may write an active
/// value into it.
#[test]
fn calls_whose_results_carry_no_derivative_generate_no_reverse_code() {
    let src = "
fn @f(%x: f64) -> f64 {
entry:
    %k = call @count(%x)
    %p = call @positive(%x)
    %kf = itof %k
    %y = mul %kf, %x
    %z = select %p, %y, %x
    ret %z
}
fn @count(%x: f64) -> i64 {
entry:
    %t = mul %x, 3.0
    %n = ftoi %t
    ret %n
}
fn @positive(%x: f64) -> bool {
entry:
    %p = gt %x, 0.0
    ret %p
}
fn @g(%v: f64[], %x: f64) -> f64 {
entry:
    %k = call @store(%v, %x)
    %e = aget %v, 0
    %y = mul %e, %x
    ret %y
}
fn @store(%v: f64[], %x: f64) -> i64 {
entry:
    %s = sin %x
    aset %v, 0, %s
    ret 0
}
";
    // Without inlining, so that the calls stay calls.
    let mut e = engine_as_written(src);
    let f = e.find("f").expect("f");
    let text = e.disasm_ad(f).expect("derives");
    let rev = function_text(&text, "f.rev").join("\n");
    let fwd = function_text(&text, "f.fwd").join("\n");
    assert!(!rev.contains("call"), "{text}");
    assert!(
        fwd.contains("%k, @count(%x)") && fwd.contains("%p, @positive(%x)"),
        "{text}"
    );
    assert!(
        !text.contains("@count.") && !text.contains("@positive."),
        "{text}"
    );
    // y = itof(ftoi(3x)) * x for x > 0: dy/dx = itof(ftoi(3x)).
    let grad = e.grad(f, &[Value::F64(1.5)]).expect("grad");
    assert_eq!(
        (grad.value, grad.grad[0].clone()),
        (6.0, Some(Value::F64(4.0)))
    );

    // The array's callee is differentiated: y = sin x * x.
    let g = e.find("g").expect("g");
    let text = e.disasm_ad(g).expect("derives");
    assert!(
        function_text(&text, "g.rev")
            .join("\n")
            .contains("@store.rev()"),
        "{text}"
    );
    let x = 0.7f64;
    let grad = e
        .grad(g, &[Value::Arr(vec![2.0]), Value::F64(x)])
        .expect("grad");
    assert_eq!(grad.grad[0], Some(Value::Arr(vec![0.0])));
    match grad.grad[1] {
        Some(Value::F64(d)) => assert!((d - (x.cos() * x + x.sin())).abs() < 1e-15, "{d}"),
        ref other => panic!("{other:?}"),
    }
}

/// The tangent of a derived forward function computes each transcendental
/// once: the tangent rules of `sin` and `cos` need the `cos` and `sin` the
/// forward function computes for the reverse sweep, and common
/// subexpressions within a block are computed once
/// (`ad::optimize::common_subexpressions`). sincos's HVP forward code has
/// `sin x`, `cos x`, `sin c`, `cos c`, four, not eight; and the product is
/// unchanged.
#[test]
fn hvp_forward_code_computes_each_transcendental_once() {
    let src = bench_program("sincos");
    let mut e = engine(&src);
    let f = e.find("sincos").expect("sincos");
    let text = e.disasm_hvp(f).expect("derives");
    let fwd = function_text(&text, "sincos.fwd.jvp").join("\n");
    assert!(!fwd.is_empty(), "{text}");
    let trans = count_mnemonics(&fwd, &["sin", "cos"]) + 2 * count_mnemonics(&fwd, &["sincos"]);
    assert_eq!(trans, 4, "{fwd}");
    let x = 0.9f64;
    let h = e
        .hvp(f, &[Value::F64(x)], &[Some(Value::F64(1.0))])
        .expect("hvp");
    // d²/dx² sin(cos x) = -sin(cos x) sin² x - cos(cos x) cos x.
    let want = -(x.cos().sin()) * x.sin() * x.sin() - x.cos().cos() * x.cos();
    let Some(Some(Value::F64(got))) = h.hvp.first() else {
        panic!("no f64 product: {h:?}")
    };
    assert!((got - want).abs() <= 1e-14, "{got} vs {want}");
}

/// An element read is read again by the reverse code of its own block
/// (instead of crossing on the comms stack) when nothing can have changed
/// it there: nothing after it in the block writes an array that may be the
/// one read, and no call of the function may write one. Every other write is an `aset` the reverse
/// code undoes before it reaches the block. So it holds in functions that
/// write arrays elsewhere; an element overwritten later in its block, or
/// read in a function whose call may write arrays, still crosses
/// (`programs/array_reread.adasm`, whose gradients the corpus checks).
#[test]
fn element_reads_cross_only_where_a_write_may_have_changed_them() {
    let n = 1000usize;
    let v = || Value::Arr((0..n).map(|i| 1.0 + (i as f64).sin()).collect());
    // array_param: the scale loop reads and overwrites each element (the
    // element read and the overwritten one cross, 16 bytes); the sum loop
    // reads the scaled elements and writes nothing (0 bytes).
    let mut e = engine(
        &std::fs::read_to_string(testkit::workspace_root().join("programs/array_param.adasm"))
            .expect("reads"),
    );
    let bytes = peak(&mut e, "f", &[v(), Value::F64(1.5)]);
    assert!(
        (16 * n..16 * n + 64).contains(&bytes),
        "peak {bytes} bytes for n = {n}"
    );
    let f = e.find("f").expect("f");
    let text = e.disasm_ad(f).expect("derives");
    let rev = function_text(&text, "f.rev").join("\n");
    assert!(
        rev.contains("aget        %x, %v"),
        "x is read again:\n{rev}"
    );

    let src =
        std::fs::read_to_string(testkit::workspace_root().join("programs/array_reread.adasm"))
            .expect("reads");
    // Calls kept, so that @weighted's call of @clear stays a call.
    let mut e = engine_as_written(&src);
    // @overwrite: the element read, overwritten after it in its block,
    // crosses beside the overwritten value.
    let bytes = peak(&mut e, "overwrite", &[v(), Value::F64(3.0)]);
    assert!(
        (16 * n..16 * n + 64).contains(&bytes),
        "peak {bytes} bytes for n = {n}"
    );
    // @pair: the element read crosses, since w, written after it, may be
    // v (a caller may pass one array twice, as @same does).
    let bytes = peak(&mut e, "pair", &[v(), v()]);
    assert!(
        (16 * n..16 * n + 64).contains(&bytes),
        "peak {bytes} bytes for n = {n}"
    );
    // @scaled: the same loop writing an array of its own, which cannot be
    // v: the element is read again, and only the overwritten one crosses.
    let bytes = peak(&mut e, "scaled", &[v()]);
    assert!(
        (8 * n..8 * n + 64).contains(&bytes),
        "peak {bytes} bytes for n = {n}"
    );
    // @weighted: the weights' overwritten values (8 bytes each) cross
    // while they are filled; in the sum loop no element is read again,
    // since @clear may write arrays (and its call is not differentiated, so
    // nothing undoes that): the element, the weight and their product
    // cross (24 bytes).
    let bytes = peak(&mut e, "weighted", &[v()]);
    assert!(
        (32 * n..32 * n + 64).contains(&bytes),
        "peak {bytes} bytes for n = {n}"
    );
}

/// The same across a straight line of blocks (each the one successor of
/// the block before and its one predecessor, as inlining leaves them): an
/// element read in one block and used in a later one is read again there
/// unless a block in between, or the later block, writes an array that
/// may be the one read.
#[test]
fn element_reads_are_read_again_along_a_straight_line_of_blocks() {
    let src = |target: &str, fresh: &str| {
        format!(
            "
fn @f(%v: f64[], %s: f64) -> f64 {{
entry:
    %n = alen %v
    {fresh}
    jmp head
head:
    %i = phi [entry: 0], [next: %i2]
    %acc = phi [entry: 0.0], [next: %acc2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %v, %i
    %y = mul %x, %s
    jmp next
next:
    aset {target}, %i, %y
    %sq = mul %x, %x
    %acc2 = add %acc, %sq
    %i2 = add %i, 1
    jmp head
done:
    ret %acc
}}"
        )
    };
    let n = 1000usize;
    let v: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64).sin()).collect();
    let args = [Value::Arr(v.clone()), Value::F64(3.0)];
    // Writing v itself: x crosses beside the overwritten element.
    // Writing an array of its own: only the overwritten element crosses.
    for (target, fresh, per) in [("%v", "", 16), ("%w", "%w = anew %n", 8)] {
        let mut e = engine_as_written(&src(target, fresh));
        let bytes = peak(&mut e, "f", &args);
        assert!(
            (per * n..per * n + 64).contains(&bytes),
            "{target}: peak {bytes} bytes for n = {n}"
        );
        let f = e.find("f").expect("f");
        let g = e.grad(f, &args).expect("grad");
        let want: Vec<f64> = v.iter().map(|x| 2.0 * x).collect();
        assert_eq!(
            format!("{:?}", g.grad[0]),
            format!("{:?}", Some(Value::Arr(want))),
            "{target}"
        );
    }
}

/// A value that several blocks of a straight line of blocks read crosses
/// once: `%e` is read by `exp`'s own pullback and by the product in the
/// next block, and only the later block pushes it (the reverse code walks
/// the line backwards, so the earlier block reads the register the later
/// one popped it into).
#[test]
fn a_value_read_along_a_straight_line_of_blocks_crosses_once() {
    let src = "
fn @f(%v: f64[]) -> f64 {
entry:
    %n = alen %v
    jmp head
head:
    %i = phi [entry: 0], [next: %i2]
    %acc = phi [entry: 0.0], [next: %acc2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %v, %i
    %e = exp %x
    jmp next
next:
    %p = mul %e, %x
    %acc2 = add %acc, %p
    %i2 = add %i, 1
    jmp head
done:
    ret %acc
}";
    let n = 1000usize;
    let v: Vec<f64> = (0..n).map(|i| (i as f64 * 0.01).sin()).collect();
    let mut e = engine_as_written(src);
    let bytes = peak(&mut e, "f", &[Value::Arr(v.clone())]);
    // `%e` once (8 bytes; `%x` is read again from the array).
    assert!(
        (8 * n..8 * n + 64).contains(&bytes),
        "peak {bytes} bytes for n = {n}"
    );
    let f = e.find("f").expect("f");
    let g = e.grad(f, &[Value::Arr(v.clone())]).expect("grad");
    let Some(Value::Arr(got)) = &g.grad[0] else {
        panic!("{:?}", g.grad)
    };
    for (x, d) in v.iter().zip(got) {
        let want = x.exp() * (x + 1.0);
        assert!(
            (d - want).abs() <= 1e-15 * want.abs().max(1.0),
            "{d} vs {want}"
        );
    }
}

/// `sum_j a[j(j+1)/2 / m]^2` over `j < n`: an index of integer
/// arithmetic three levels deep. Divided by a constant (`m` = 1 written
/// as the constant 1, or 2), which cannot trap, the reverse code computes
/// the index again from the counter: nothing crosses per element. Divided
/// by a parameter (which might be 0), it cannot, and the index crosses.
#[test]
fn integer_index_chains_are_computed_again_unless_they_may_trap() {
    let src = |divisor: &str| {
        format!(
            "
fn @tri(%a: f64[], %n: i64, %m: i64) -> f64 {{
entry:
    jmp head
head:
    %j = phi [entry: 0], [body: %j2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %j, %n
    br %c, body, done
body:
    %j1 = add %j, 1
    %p = mul %j, %j1
    %k = div %p, {divisor}
    %e = aget %a, %k
    %e2 = mul %e, %e
    %s2 = add %s, %e2
    %j2 = add %j, 1
    jmp head
done:
    ret %s
}}
"
        )
    };
    let n = 200usize;
    let len = n * (n + 1) / 2;
    let a: Vec<f64> = (0..len).map(|i| (i as f64 * 0.3).cos()).collect();
    let args = [Value::Arr(a.clone()), Value::I64(n as i64), Value::I64(2)];
    let mut want = vec![0.0; len];
    for j in 0..n {
        let k = j * (j + 1) / 2;
        want[k] += 2.0 * a[k];
    }
    let mut grads = Vec::new();
    for (divisor, crosses) in [("2", false), ("%m", true)] {
        let mut e = engine(&src(divisor));
        let f = e.find("tri").expect("defined");
        let g = e.grad(f, &args).expect("grad");
        let bytes = e.vm_mut().peak_stack_bytes();
        if crosses {
            assert!(bytes >= 8 * n, "{bytes} bytes, dividing by {divisor}");
        } else {
            assert!(bytes <= 64, "{bytes} bytes, dividing by {divisor}");
        }
        match &g.grad[0] {
            Some(Value::Arr(got)) => assert_eq!(got, &want, "dividing by {divisor}"),
            other => panic!("{other:?}"),
        }
        grads.push(g.value.to_bits());
    }
    assert_eq!(grads[0], grads[1]);
}
