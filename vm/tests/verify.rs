//! The verifier: it rejects each class of bad bytecode, and arbitrary
//! instruction words never make it (or the interpreter, on what passes)
//! panic.

mod common_ir;

use proptest::prelude::*;
use vm::bytecode::{CallSite, Function, Instr, Program};
use vm::ir::{FuncId, RetType};
use vm::op::Op;
use vm::verify::{verify_program, VerifyError};
use vm::{Type, Vm};

fn func(code: Vec<Instr>, regs: Vec<Type>, params: usize, ret: RetType) -> Function {
    Function {
        name: "t".into(),
        param_types: regs[..params].to_vec(),
        ret,
        reg_types: regs,
        consts: Vec::new(),
        code,
        sites: vec![CallSite {
            func: FuncId(0),
            args: vec![0],
            rets: Vec::new(),
        }],
        tables: vec![vec![0]],
        lists: vec![vec![0]],
        blocks: Vec::new(),
        locs: Vec::new(),
        reg_names: Vec::new(),
    }
}

fn verify_one(f: Function) -> Result<(), Vec<VerifyError>> {
    let mut p = Program::new();
    p.push(f);
    verify_program(&mut p)
}

fn i(op: Op, r0: u16, r1: u16, r2: u16, x: u32) -> Instr {
    Instr::new(op, r0, r1, r2, x)
}

#[test]
fn accepts_a_good_function() {
    let regs = vec![Type::F64, Type::F64];
    let f = func(
        vec![i(Op::AddF, 1, 0, 0, 0), i(Op::Ret, 1, 0, 0, 0)],
        regs,
        1,
        RetType::One(Type::F64),
    );
    assert_eq!(verify_one(f), Ok(()));
}

#[test]
fn rejects_each_class_of_bad_bytecode() {
    let one = RetType::One(Type::F64);
    let ff = vec![Type::F64, Type::F64];
    let cases: Vec<(&str, Function)> = vec![
        (
            "register out of range",
            func(
                vec![i(Op::AddF, 9, 0, 0, 0), i(Op::Ret, 0, 0, 0, 0)],
                ff.clone(),
                1,
                one.clone(),
            ),
        ),
        (
            "wrong operand type",
            func(
                vec![i(Op::AddI, 1, 0, 0, 0), i(Op::Ret, 0, 0, 0, 0)],
                ff.clone(),
                1,
                one.clone(),
            ),
        ),
        (
            "mixed T operands",
            func(
                vec![i(Op::Mov, 1, 0, 0, 0), i(Op::Ret, 0, 0, 0, 0)],
                vec![Type::F64, Type::I64],
                1,
                one.clone(),
            ),
        ),
        (
            "jump out of range",
            func(vec![i(Op::Jmp, 0, 0, 0, 99)], ff.clone(), 1, one.clone()),
        ),
        (
            "falls off the end",
            func(vec![i(Op::AddF, 1, 0, 0, 0)], ff.clone(), 1, one.clone()),
        ),
        ("empty code", func(vec![], ff.clone(), 1, one.clone())),
        (
            "bad return type",
            func(
                vec![i(Op::Ret, 1, 0, 0, 0)],
                vec![Type::F64, Type::I64],
                1,
                one.clone(),
            ),
        ),
        (
            "table out of range",
            func(vec![i(Op::BlkPop, 0, 0, 0, 5)], ff.clone(), 1, one.clone()),
        ),
        (
            "list in a one-value function",
            func(vec![i(Op::RetN, 0, 0, 0, 0)], ff.clone(), 1, one.clone()),
        ),
        (
            "call site out of range",
            func(
                vec![i(Op::Call, 1, 0, 0, 7), i(Op::Ret, 1, 0, 0, 0)],
                ff.clone(),
                1,
                one.clone(),
            ),
        ),
        (
            "call result type",
            func(
                vec![i(Op::Call, 1, 0, 0, 0), i(Op::Ret, 0, 0, 0, 0)],
                vec![Type::F64, Type::I64],
                1,
                one.clone(),
            ),
        ),
        (
            "call.acc of a one-value function",
            func(
                vec![i(Op::CallAcc, 0, 0, 0, 0), i(Op::Ret, 0, 0, 0, 0)],
                ff.clone(),
                1,
                one.clone(),
            ),
        ),
        ("params do not match registers", {
            let mut f = func(vec![i(Op::Ret, 0, 0, 0, 0)], ff.clone(), 1, one.clone());
            f.param_types = vec![Type::I64];
            f
        }),
        ("array constant", {
            let mut f = func(
                vec![i(Op::Ret, 0, 0, 0, 0)],
                vec![Type::F64, Type::Arr],
                1,
                one.clone(),
            );
            f.consts = vec![0];
            f
        }),
        ("bad fused condition", {
            let mut j = i(Op::JmpCmpF, 0, 0, 0, 1);
            j.flags = 7;
            func(vec![j, i(Op::Ret, 0, 0, 0, 0)], ff.clone(), 1, one.clone())
        }),
        ("debug info length", {
            let mut f = func(vec![i(Op::Ret, 0, 0, 0, 0)], ff.clone(), 1, one.clone());
            f.locs = vec![Default::default(); 3];
            f
        }),
    ];
    for (what, f) in cases {
        assert!(verify_one(f).is_err(), "accepted: {what}");
    }
}

#[test]
fn unverified_functions_do_not_run() {
    let mut p = Program::new();
    p.push(func(
        vec![i(Op::Ret, 0, 0, 0, 0)],
        vec![Type::F64],
        1,
        RetType::One(Type::F64),
    ));
    let mut vm = Vm::default();
    let err = vm.call_raw(&p, FuncId(0), &[0]).expect_err("refused");
    assert_eq!(err.kind, vm::TrapKind::NotVerified);
}

fn ty(b: u8) -> Type {
    [Type::F64, Type::I64, Type::Bool, Type::Arr][b as usize % 4]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary words: decoding and verifying never panic, and whatever
    /// verifies runs under fuel without panicking.
    #[test]
    fn arbitrary_words_never_panic(
        words in prop::collection::vec(prop::array::uniform12(any::<u8>()), 1..24),
        regs in prop::collection::vec(any::<u8>(), 1..12),
        nparams in 0usize..4,
        ret in any::<u8>(),
        table in prop::collection::vec(0u32..30, 0..4),
        ad in any::<bool>(),
    ) {
        let Ok(code) = vm::verify::decode(&words) else { return Ok(()) };
        let reg_types: Vec<Type> = regs.iter().map(|b| ty(*b)).collect();
        let nparams = nparams.min(reg_types.len());
        let ret = if ret % 5 == 4 { RetType::Many(vec![Type::F64]) } else { RetType::One(ty(ret)) };
        let mut f = func(code, reg_types, nparams, ret);
        f.tables = vec![table];
        f.sites = vec![CallSite { func: FuncId(0), args: (0..nparams as u16).collect(), rets: vec![0] }];
        let mut p = Program::new();
        p.push(f);
        if verify_program(&mut p).is_ok() {
            let mut vm = Vm::default();
            vm.limits_mut().fuel = Some(5_000);
            vm.limits_mut().max_call_depth = 32;
            vm.begin(ad);
            let _ = vm.call_raw(&p, FuncId(0), &vec![0; nparams]);
        }
    }

    /// Instructions built from valid opcodes with small operands reach the
    /// verifier's deeper checks much more often than random bytes.
    #[test]
    fn structured_instructions_never_panic(
        ops in prop::collection::vec((0u8..Op::ALL.len() as u8, 0u16..6, 0u16..6, 0u16..6, 0u32..8, 0u8..10), 1..16),
        regs in prop::collection::vec(any::<u8>(), 1..6),
    ) {
        let code: Vec<Instr> = ops
            .iter()
            .filter_map(|(o, a, b, c, x, fl)| {
                Op::from_u8(*o).map(|op| {
                    let mut ins = Instr::new(op, *a, *b, *c, *x);
                    ins.flags = *fl;
                    ins
                })
            })
            .collect();
        let reg_types: Vec<Type> = regs.iter().map(|b| ty(*b)).collect();
        let f = func(code, reg_types, 0, RetType::One(Type::F64));
        let mut p = Program::new();
        p.push(f);
        if verify_program(&mut p).is_ok() {
            let mut vm = Vm::default();
            vm.limits_mut().fuel = Some(5_000);
            vm.limits_mut().max_call_depth = 32;
            vm.begin(true);
            let _ = vm.call_raw(&p, FuncId(0), &[]);
        }
    }
}
