//! The library boundary: IR modules built by a library user, structurally
//! random and mostly invalid, go through every public entry point that takes
//! IR (`Program::push` / `set`, `lower_module`, `lower_function`,
//! `inline_module`, `Engine::new`, `Engine::with_inlining`) and, where they
//! are accepted, through `run` and `grad`. Each must answer `Ok` or `Err`:
//! a panic fails the test, an abort (a huge allocation) ends the process.

use ad::{Engine, Policy};
use proptest::prelude::*;
use vm::bytecode::Program;
use vm::ir::{
    Block, BlockId, FuncId, Function, Inst, Loc, Module, Phi, RetType, Term, ValueData, ValueId,
};
use vm::op::Op;
use vm::{Type, Value};

/// Ids are mostly in range (small), sometimes far out of it.
fn id() -> impl Strategy<Value = u32> {
    prop_oneof![
        8 => 0u32..8,
        1 => prop_oneof![Just(u32::MAX), Just(u32::MAX - 1), Just(1 << 20), 8u32..64],
    ]
}

fn ty() -> impl Strategy<Value = Type> {
    prop_oneof![
        Just(Type::F64),
        Just(Type::I64),
        Just(Type::Bool),
        Just(Type::Arr)
    ]
}

fn value_data() -> impl Strategy<Value = ValueData> {
    (ty(), prop::option::weighted(0.3, any::<u64>())).prop_map(|(ty, konst)| ValueData {
        ty,
        name: None,
        konst,
    })
}

fn loc() -> impl Strategy<Value = Loc> {
    (0u32..4, 0u32..4, prop_oneof![4 => Just(0u32), 1 => id()])
        .prop_map(|(line, col, inlined)| Loc { line, col, inlined })
}

fn inst() -> impl Strategy<Value = Inst> {
    (
        0..Op::ALL.len(),
        prop::option::weighted(0.8, id()),
        prop::collection::vec(id(), 0..4),
        0u32..4,
        prop::option::weighted(0.5, id()),
        prop::collection::vec(id(), 0..2),
        loc(),
    )
        .prop_map(|(op, dst, args, imm, callee, accs, loc)| {
            let op = Op::ALL[op];
            // Calls are common: they are what reaches other functions.
            let callee = if matches!(op, Op::Call | Op::CallAcc) {
                callee.or(Some(0))
            } else {
                callee
            };
            Inst {
                op,
                dst: dst.map(ValueId),
                args: args.into_iter().map(ValueId).collect(),
                imm,
                callee: callee.map(FuncId),
                accs: accs.into_iter().map(ValueId).collect(),
                loc,
            }
        })
}

fn term() -> impl Strategy<Value = Term> {
    prop_oneof![
        1 => id().prop_map(|b| Term::Jmp(BlockId(b))),
        1 => (id(), id(), id()).prop_map(|(c, t, e)| Term::Br {
            cond: ValueId(c),
            then_: BlockId(t),
            else_: BlockId(e)
        }),
        2 => id().prop_map(|v| Term::Ret(ValueId(v))),
        1 => prop::collection::vec(id(), 0..3).prop_map(|vs| Term::RetN(vs.into_iter().map(ValueId).collect())),
        1 => prop::collection::vec(id(), 0..3).prop_map(|bs| Term::BlkPop(bs.into_iter().map(BlockId).collect())),
    ]
}

fn block() -> impl Strategy<Value = Block> {
    (
        prop::collection::vec(
            (id(), prop::collection::vec((id(), id()), 0..3), loc()).prop_map(|(d, inc, loc)| {
                Phi {
                    dst: ValueId(d),
                    incoming: inc
                        .into_iter()
                        .map(|(b, v)| (BlockId(b), ValueId(v)))
                        .collect(),
                    loc,
                }
            }),
            0..2,
        ),
        prop::collection::vec(inst(), 0..5),
        term(),
        loc(),
    )
        .prop_map(|(phis, insts, term, term_loc)| Block {
            name: "b".into(),
            phis,
            insts,
            term,
            term_loc,
        })
}

fn function() -> impl Strategy<Value = Function> {
    (
        prop::collection::vec(value_data(), 0..10),
        prop::collection::vec(id(), 0..3),
        prop_oneof![4 => ty().prop_map(RetType::One), 1 => prop::collection::vec(ty(), 0..3).prop_map(RetType::Many)],
        prop::collection::vec(block(), 0..4),
        loc(),
    )
        .prop_map(|(values, params, ret, blocks, loc)| Function {
            name: "f".into(),
            params: params.into_iter().map(ValueId).collect(),
            ret,
            values,
            blocks,
            loc,
        })
}

/// Valid modules to mutate: the corpus, assembled.
fn corpus() -> Vec<Module> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../programs");
    let mut mods = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("programs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "adasm"))
        .collect();
    paths.sort();
    for p in paths {
        let src = std::fs::read_to_string(&p).expect("readable");
        if let Ok(m) = assembler::assemble(&src, "p.adasm") {
            mods.push(m);
        }
    }
    assert!(mods.len() > 20, "the corpus assembles");
    mods
}

/// One mutation of a valid module: a field replaced by a random one.
#[derive(Clone, Debug)]
enum Mutation {
    Callee(usize, u32),
    Arg(usize, u32),
    Dst(usize, u32),
    Op(usize, usize),
    Term(usize, Term),
    Param(usize, u32),
    ValueType(usize, Type),
    DropBlocks(usize),
    PhiPred(usize, u32),
    Ret(Type),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), id()).prop_map(|(i, x)| Mutation::Callee(i, x)),
        (any::<usize>(), id()).prop_map(|(i, x)| Mutation::Arg(i, x)),
        (any::<usize>(), id()).prop_map(|(i, x)| Mutation::Dst(i, x)),
        (any::<usize>(), 0..Op::ALL.len()).prop_map(|(i, x)| Mutation::Op(i, x)),
        (any::<usize>(), term()).prop_map(|(i, t)| Mutation::Term(i, t)),
        (any::<usize>(), id()).prop_map(|(i, x)| Mutation::Param(i, x)),
        (any::<usize>(), ty()).prop_map(|(i, t)| Mutation::ValueType(i, t)),
        any::<usize>().prop_map(Mutation::DropBlocks),
        (any::<usize>(), id()).prop_map(|(i, x)| Mutation::PhiPred(i, x)),
        ty().prop_map(Mutation::Ret),
    ]
}

fn mutate(m: &mut Module, fi: usize, mutation: &Mutation) {
    let n = m.funcs.len();
    let f = &mut m.funcs[fi % n];
    let mut insts: Vec<&mut Inst> = f
        .blocks
        .iter_mut()
        .flat_map(|b| b.insts.iter_mut())
        .collect();
    let ni = insts.len();
    match mutation {
        Mutation::Callee(i, x) => {
            if let Some(inst) = insts
                .iter_mut()
                .filter(|i| i.callee.is_some())
                .nth(*i % ni.max(1))
            {
                inst.callee = Some(FuncId(*x));
            } else if ni > 0 {
                insts[i % ni].callee = Some(FuncId(*x));
            }
        }
        Mutation::Arg(i, x) if ni > 0 => {
            let inst = &mut insts[i % ni];
            if inst.args.is_empty() {
                inst.args.push(ValueId(*x));
            } else {
                let k = i % inst.args.len();
                inst.args[k] = ValueId(*x);
            }
        }
        Mutation::Dst(i, x) if ni > 0 => insts[i % ni].dst = Some(ValueId(*x)),
        Mutation::Op(i, x) if ni > 0 => insts[i % ni].op = Op::ALL[*x],
        Mutation::Term(i, t) => {
            let nb = f.blocks.len().max(1);
            if let Some(b) = f.blocks.get_mut(i % nb) {
                b.term = t.clone();
            }
        }
        Mutation::Param(i, x) => {
            if f.params.is_empty() {
                f.params.push(ValueId(*x));
            } else {
                let k = i % f.params.len();
                f.params[k] = ValueId(*x);
            }
        }
        Mutation::ValueType(i, t) if !f.values.is_empty() => {
            let k = i % f.values.len();
            f.values[k].ty = *t;
        }
        Mutation::DropBlocks(i) => {
            let keep = i % (f.blocks.len() + 1);
            f.blocks.truncate(keep);
        }
        Mutation::PhiPred(i, x) => {
            if let Some(phi) = f
                .blocks
                .iter_mut()
                .flat_map(|b| b.phis.iter_mut())
                .nth(i % 8)
            {
                if let Some(inc) = phi.incoming.first_mut() {
                    inc.0 = BlockId(*x);
                }
            }
        }
        Mutation::Ret(t) => f.ret = RetType::One(*t),
        _ => {}
    }
}

fn arg(t: Type) -> Value {
    match t {
        Type::F64 => Value::F64(1.5),
        Type::I64 => Value::I64(3),
        Type::Bool => Value::Bool(true),
        Type::Arr => Value::Arr(vec![0.5, 2.0, -1.0]),
    }
}

/// Every entry point on `m`; whatever they accept is run and
/// differentiated under small limits.
fn exercise(m: Module) {
    let _ = vm::lower::lower_module(&m);
    let mut p = Program::new();
    for f in &m.funcs {
        if let Ok(bc) = vm::lower::lower_function(f) {
            let id = p.push(bc.clone());
            let _ = p.set(id, bc.clone());
            let _ = p.set(FuncId(u32::MAX), bc);
        }
    }
    let _ = vm::verify::verify_program(&mut p);
    let _ = vm::inline::inline_module(&m, &Policy::default());
    let _ = Engine::with_inlining(m.clone(), &Policy::NONE);
    let Ok(mut engine) = Engine::new(m) else {
        return;
    };
    ACCEPTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let limits = engine.vm_mut().limits_mut();
    limits.fuel = Some(10_000);
    limits.max_call_depth = 50;
    limits.max_array_len = 1 << 12;
    limits.max_stack_bytes = 1 << 20;
    limits.max_heap_bytes = 1 << 24;
    for i in 0..engine.module().funcs.len() {
        let f = FuncId(i as u32);
        let args: Vec<Value> = engine.module().funcs[i]
            .param_types()
            .into_iter()
            .map(arg)
            .collect();
        let _ = engine.run(f, &args);
        if engine.grad(f, &args).is_ok() {
            GRADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let _ = engine.disasm_ad(f);
    }
}

static ACCEPTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static GRADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn cases() -> u32 {
    u32::try_from(testkit::env_u64("ADVM_PROP_CASES", 2_000)).unwrap_or(2_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_ir_modules_are_refused_or_run_never_panic(funcs in prop::collection::vec(function(), 0..4)) {
        exercise(Module { funcs, rules: Vec::new() });
    }

    #[test]
    fn mutated_valid_modules_are_refused_or_run_never_panic(
        pick in any::<usize>(),
        muts in prop::collection::vec((any::<usize>(), mutation()), 1..3),
    ) {
        thread_local!(static CORPUS: Vec<Module> = corpus());
        let mut m = CORPUS.with(|c| c[pick % c.len()].clone());
        for (fi, mu) in &muts {
            mutate(&mut m, *fi, mu);
        }
        exercise(m);
    }
}

/// The unmutated corpus gets through every entry point to `run` and
/// `grad` (so the mutations start from modules that reach the AD stage).
#[test]
fn the_corpus_reaches_the_gradient() {
    use std::sync::atomic::Ordering::Relaxed;
    let mods = corpus();
    let n = mods.len();
    let (accepted, grads) = (ACCEPTED.load(Relaxed), GRADS.load(Relaxed));
    for m in mods {
        exercise(m);
    }
    // (Other tests of this binary may run at the same time: at least.)
    assert!(ACCEPTED.load(Relaxed) - accepted >= n);
    assert!(GRADS.load(Relaxed) - grads >= n);
}

/// The cases of the issue: a call site naming `FuncId(u32::MAX)`.
#[test]
fn a_call_to_a_function_that_cannot_exist_is_an_error() {
    let src = "fn @f(%x: f64) -> f64 {\nentry:\n    %y = call @g(%x)\n    ret %y\n}\n\
               fn @g(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n";
    let mut m = assembler::assemble(src, "t.adasm").expect("assembles");
    for inst in m
        .funcs
        .iter_mut()
        .flat_map(|f| f.blocks.iter_mut())
        .flat_map(|b| b.insts.iter_mut())
    {
        if inst.callee.is_some() {
            inst.callee = Some(FuncId(u32::MAX));
        }
    }
    let e = Engine::new(m.clone()).err().expect("refused");
    assert!(e.to_string().contains("no function"), "{e}");
    let e = Engine::with_inlining(m.clone(), &Policy::NONE)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("no function"), "{e}");
    // Inlining leaves a module it cannot work on as it is.
    assert_eq!(vm::inline::inline_module(&m, &Policy::default()), m);
    assert!(vm::lower::lower_module(&m).is_err());
    let bc = vm::lower::lower_function(&m.funcs[0]).expect("one function lowers on its own");
    let mut p = Program::new();
    let f = p.push(bc.clone());
    p.set(f, bc.clone()).expect("exists");
    assert!(p.set(FuncId(7), bc).is_err());
    assert!(vm::verify::verify_program(&mut p).is_err());
}

/// `Engine::add_functions` makes the engine a fresh one would be: every
/// corpus module added to an empty engine, at once and (where each
/// function calls only earlier ones) one function at a time, gives the
/// same bytecode and the same values and gradients; a function that names
/// no function is refused and the engine goes on as before.
#[test]
fn added_functions_compile_as_in_a_fresh_engine() {
    let listing = |e: &Engine| -> Vec<String> {
        (0..e.module().funcs.len())
            .map(|i| vm::disasm::function_in(e.program().func(FuncId(i as u32)), Some(e.program())))
            .collect()
    };
    let mut one_at_a_time = 0;
    for m in corpus() {
        // `add_functions` appends functions only: custom rules come with a
        // whole module (`Engine::new`), and change what is inlined.
        if !m.rules.is_empty() {
            continue;
        }
        let mut fresh = Engine::new(m.clone()).expect("the corpus builds");
        let mut added = Engine::new(Module::default()).expect("empty");
        added.add_functions(m.funcs.clone()).expect("adds");
        assert_eq!(listing(&added), listing(&fresh));
        let mut single = Engine::new(Module::default()).expect("empty");
        let ok = m
            .funcs
            .iter()
            .all(|f| single.add_functions(vec![f.clone()]).is_ok());
        if ok {
            one_at_a_time += 1;
            assert_eq!(listing(&single), listing(&fresh));
        }
        for i in 0..m.funcs.len() {
            let f = FuncId(i as u32);
            let args: Vec<Value> = m.funcs[i].param_types().into_iter().map(arg).collect();
            assert_eq!(
                format!("{:?}", added.run(f, &args)),
                format!("{:?}", fresh.run(f, &args))
            );
            assert_eq!(
                format!("{:?}", added.grad(f, &args).ok()),
                format!("{:?}", fresh.grad(f, &args).ok())
            );
        }
        // A call to no function: refused, the engine as it was.
        let mut bad = m.funcs[0].clone();
        bad.name = "bad".into();
        if let Some(inst) = bad
            .blocks
            .iter_mut()
            .flat_map(|b| b.insts.iter_mut())
            .find(|i| i.callee.is_some())
        {
            inst.callee = Some(FuncId(u32::MAX));
            let n = added.module().funcs.len();
            let e = added.add_functions(vec![bad]).expect_err("refused");
            assert!(e.to_string().contains("no function"), "{e}");
            assert_eq!(added.module().funcs.len(), n);
            assert_eq!(listing(&added), listing(&fresh));
            assert!(added.find("bad").is_none());
        }
    }
    assert!(one_at_a_time > 10, "{one_at_a_time}");
}

/// Derived code lives in one table, reset as a whole when the module
/// grows: after `Engine::add_functions`, an added function gets its
/// tangent and Hessian-vector product (exact for `sin(x²)`), and every
/// derived function's kind and origin are known, including those of code
/// derived before the module grew.
#[test]
fn added_functions_get_tangents_and_hvps_from_one_table() {
    let func = |name: &str| {
        let src = format!(
            "fn @{name}(%x: f64) -> f64 {{\nentry:\n    %y = mul %x, %x\n    %z = sin %y\n    ret %z\n}}\n"
        );
        assembler::assemble(&src, "f.adasm")
            .expect("assembles")
            .funcs
            .remove(0)
    };
    let (x, d) = (0.7f64, [Some(Value::F64(1.0))]);
    let mut e = Engine::new(Module::default()).expect("empty");
    e.add_functions(vec![func("g")]).expect("adds");
    let g = FuncId(0);
    e.jvp(g, &[Value::F64(x)], &d).expect("tangent of @g");
    e.hvp(g, &[Value::F64(x)], &d).expect("hvp of @g");
    e.add_functions(vec![func("f")]).expect("adds");
    let f = FuncId(1);
    let t = e.jvp(f, &[Value::F64(x)], &d).expect("tangent of @f");
    let dz = 2.0 * x * (x * x).cos();
    match t.tangent {
        Some(Value::F64(v)) => assert!((v - dz).abs() <= 1e-12 * dz.abs(), "{v} vs {dz}"),
        other => panic!("{other:?}"),
    }
    let h = e.hvp(f, &[Value::F64(x)], &d).expect("hvp of @f");
    let d2z = 2.0 * (x * x).cos() - 4.0 * x * x * (x * x).sin();
    match &h.hvp[0] {
        Some(Value::F64(v)) => assert!((v - d2z).abs() <= 1e-12 * d2z.abs(), "{v} vs {d2z}"),
        other => panic!("{other:?}"),
    }
    let (fwd, rev) = e.derive_hvp(f, &[true]).expect("built");
    let pair = e.derive(f).expect("built");
    assert_eq!(e.derived_kind(pair.fwd), Some((ad::Kind::Fwd, f)));
    assert_eq!(e.derived_kind(pair.rev), Some((ad::Kind::Rev, f)));
    assert_eq!(e.derived_kind(fwd), Some((ad::Kind::Hvp(pair.fwd), f)));
    assert_eq!(e.derived_kind(rev), Some((ad::Kind::Hvp(pair.rev), f)));
    assert_eq!(e.derived_kind(f), None, "a user function");
    let jvp = e.derive_jvp(f, &[true]).expect("built");
    assert_eq!(e.derived_kind(jvp), Some((ad::Kind::Tangent, f)));
    assert_eq!(e.derived_ir(jvp).map(|i| i.name.as_str()), Some("f.jvp"));
}
