//! The verifier: it rejects each class of bad bytecode (one test per check
//! listed in `verify.rs`), and arbitrary instruction words never make it,
//! or the interpreter on what passes, panic.

use proptest::prelude::*;
use vm::bytecode::{BlockMark, CallSite, Function, Instr, Program};
use vm::ir::{FuncId, Loc, RetType};
use vm::op::{Fused, Op};
use vm::verify::{decode, verify_function, verify_program, VerifyError};
use vm::{Type, Vm};

use Type::{Arr, Bool, F64, I64};

fn i(op: Op, r0: u16, r1: u16, r2: u16, x: u32) -> Instr {
    Instr::new(op, r0, r1, r2, x)
}

fn function(
    name: &str,
    params: usize,
    regs: Vec<Type>,
    ret: RetType,
    code: Vec<Instr>,
) -> Function {
    Function {
        name: name.into(),
        param_types: regs[..params].to_vec(),
        ret,
        reg_types: regs,
        consts: Vec::new(),
        code,
        sites: Vec::new(),
        tables: Vec::new(),
        lists: Vec::new(),
        blocks: vec![BlockMark {
            name: "entry".into(),
            start: 0,
        }],
        locs: Vec::new(),
        reg_names: Vec::new(),
    }
}

/// `@name(r0: f64) -> f64 { ret r0 }`.
fn identity(name: &str) -> Function {
    function(
        name,
        1,
        vec![F64],
        RetType::One(F64),
        vec![i(Op::Ret, 0, 0, 0, 0)],
    )
}

/// A valid program exercising every kind of operand:
///
/// ```text
/// fn @t(r0: f64) -> f64        ; r1 f64, r2 i64 = const 3, r3 bool, r4 f64[]
///   0000  add.f     r1, r0, r0
///   0001  call      r1, @h(r0)
///   0002  call.acc  @g(r0) += (r1, r1)
///   0003  blk.push  0
///   0004  blk.pop   [0005, 0005]
///   0005  jmp.if.lt.i r1, r1, -> 0006
///   0006  select    r1, r3, r1, r0
///   0007  ret       r1
/// fn @g(r0: f64) -> (f64, f64)   ret.n (r0, r0)
/// fn @h(r0: f64) -> f64          ret r0
/// ```
fn base() -> Program {
    let mut t = function(
        "t",
        1,
        vec![F64, I64, F64, Bool, Arr],
        RetType::One(F64),
        vec![
            i(Op::AddF, 2, 0, 0, 0),
            i(Op::Call, 2, 0, 0, 0),
            i(Op::CallAcc, 0, 0, 0, 1),
            i(Op::BlkPush, 0, 0, 0, 0),
            i(Op::BlkPop, 0, 0, 0, 0),
            i(Op::JmpLtI, 1, 1, 0, 6),
            i(Op::Select, 2, 3, 2, 0),
            i(Op::Ret, 2, 0, 0, 0),
        ],
    );
    // Register 1 is the constant 3.
    t.consts = vec![3];
    t.sites = vec![
        CallSite {
            func: FuncId(2),
            args: vec![0],
            rets: vec![],
        },
        CallSite {
            func: FuncId(1),
            args: vec![0],
            rets: vec![2, 2],
        },
    ];
    t.tables = vec![vec![5, 5]];
    let mut g = function(
        "g",
        1,
        vec![F64],
        RetType::Many(vec![F64, F64]),
        vec![i(Op::RetN, 0, 0, 0, 0)],
    );
    g.lists = vec![vec![0, 0]];
    let h = identity("h");
    let mut p = Program::new();
    p.push(t);
    p.push(g);
    p.push(h);
    p
}

/// Verify `@t` after `change`; its errors.
fn errors(change: impl FnOnce(&mut Function)) -> Vec<VerifyError> {
    let p0 = base();
    let mut t = p0.func(FuncId(0)).clone();
    change(&mut t);
    let mut p = Program::new();
    p.push(t);
    for f in &p0.funcs()[1..] {
        p.push(f.clone());
    }
    match verify_function(&mut p, FuncId(0)) {
        Ok(()) => Vec::new(),
        Err(e) => e,
    }
}

/// Assert that `change` makes `@t` fail with an error matching `pat`.
macro_rules! rejects {
    ($change:expr, $pat:pat) => {{
        let errs = errors($change);
        assert!(
            errs.iter().any(|e| matches!(e, $pat)),
            "expected {}, got {errs:?}",
            stringify!($pat)
        );
        for e in &errs {
            assert!(e.to_string().contains("@t"), "{e}");
        }
    }};
}

#[test]
fn the_base_program_verifies_and_runs() {
    let mut p = base();
    assert_eq!(verify_program(&mut p), Ok(()));
    let mut vm = Vm::default();
    vm.begin(false);
    vm.call_raw(&p, FuncId(0), &[1.5f64.to_bits()])
        .expect("runs");
    // r2 = 3.0, = h(1.5) = 1.5, += 1.5 + 1.5 = 4.5; select on false -> r0.
    assert_eq!(f64::from_bits(vm.results()[0]), 1.5);
}

#[test]
fn error_messages_name_function_and_pc() {
    let errs = errors(|t| t.code[0].r0 = 40);
    let text = errs[0].to_string();
    assert!(text.contains("@t") && text.contains("0000"), "{text}");
}

// ---- 1. frame ------------------------------------------------------------

#[test]
fn rejects_too_many_registers() {
    rejects!(
        |t| t.reg_types.resize(70_000, F64),
        VerifyError::TooManyRegisters { .. }
    );
}

#[test]
fn rejects_parameters_and_constants_beyond_the_frame() {
    rejects!(|t| t.consts = vec![0; 5], VerifyError::BadFrame { .. });
}

#[test]
fn rejects_parameter_types_unlike_their_registers() {
    rejects!(|t| t.param_types = vec![I64], VerifyError::BadFrame { .. });
}

#[test]
fn rejects_array_constants() {
    rejects!(
        |t| {
            t.reg_types[1] = Arr;
            t.code[5] = i(Op::Jmp, 0, 0, 0, 6);
        },
        VerifyError::BadFrame { .. }
    );
}

// ---- 2. registers --------------------------------------------------------

#[test]
fn rejects_registers_out_of_range_in_each_slot() {
    rejects!(
        |t| t.code[0].r0 = 5,
        VerifyError::RegisterOutOfRange { reg: 5, .. }
    );
    rejects!(
        |t| t.code[0].r1 = 9,
        VerifyError::RegisterOutOfRange { reg: 9, .. }
    );
    rejects!(
        |t| t.code[0].r2 = u16::MAX,
        VerifyError::RegisterOutOfRange { .. }
    );
    // `select` keeps its fourth register in `x`.
    rejects!(
        |t| t.code[6].x = 5,
        VerifyError::RegisterOutOfRange { reg: 5, .. }
    );
}

#[test]
fn rejects_operands_of_the_wrong_type() {
    rejects!(
        |t| t.code[0] = i(Op::AddI, 2, 0, 0, 0),
        VerifyError::TypeMismatch { .. }
    );
    rejects!(|t| t.code[6].r1 = 0, VerifyError::TypeMismatch { .. });
    rejects!(
        |t| t.code[3] = i(Op::ALen, 1, 2, 0, 0),
        VerifyError::TypeMismatch { .. }
    );
}

#[test]
fn rejects_mixed_t_operands() {
    rejects!(
        |t| t.code[0] = i(Op::Mov, 2, 1, 0, 0),
        VerifyError::TypeMismatch { .. }
    );
    rejects!(|t| t.code[6].x = 1, VerifyError::TypeMismatch { .. });
}

// ---- 3. indices ------------------------------------------------------------

#[test]
fn rejects_jump_targets_out_of_range() {
    rejects!(|t| t.code[5].x = 8, VerifyError::BadIndex { .. });
    rejects!(
        |t| t.code[3] = i(Op::JmpIf, 3, 0, 0, 100),
        VerifyError::BadIndex { .. }
    );
    rejects!(
        |t| t.code[3] = i(Op::Jmp, 0, 0, 0, u32::MAX),
        VerifyError::BadIndex { .. }
    );
}

#[test]
fn rejects_table_indices_and_entries_out_of_range() {
    rejects!(|t| t.code[4].x = 1, VerifyError::BadIndex { .. });
    rejects!(|t| t.tables[0][1] = 8, VerifyError::BadIndex { .. });
}

#[test]
fn rejects_list_indices_out_of_range() {
    let mut p = base();
    let mut g = p.func(FuncId(1)).clone();
    g.code[0].x = 3;
    p.set(FuncId(1), g).expect("exists");
    let errs = verify_function(&mut p, FuncId(1)).expect_err("rejected");
    assert!(matches!(errs[0], VerifyError::BadIndex { .. }), "{errs:?}");
}

#[test]
fn rejects_site_indices_out_of_range() {
    rejects!(|t| t.code[1].x = 2, VerifyError::BadIndex { .. });
    rejects!(|t| t.code[2].x = 7, VerifyError::BadIndex { .. });
}

// ---- 4. calls ----------------------------------------------------------------

#[test]
fn rejects_calls_to_missing_functions() {
    rejects!(|t| t.sites[0].func = FuncId(3), VerifyError::BadCall { .. });
}

#[test]
fn rejects_argument_count_mismatch() {
    rejects!(
        |t| t.sites[0].args = vec![0, 0],
        VerifyError::BadCall { .. }
    );
    rejects!(|t| t.sites[1].args = vec![], VerifyError::BadCall { .. });
}

#[test]
fn rejects_argument_type_mismatch() {
    rejects!(|t| t.sites[0].args = vec![1], VerifyError::BadCall { .. });
    rejects!(|t| t.sites[0].args = vec![99], VerifyError::BadCall { .. });
}

#[test]
fn rejects_call_result_type_mismatch() {
    rejects!(|t| t.code[1].r0 = 1, VerifyError::BadCall { .. });
}

#[test]
fn rejects_call_of_a_many_returning_function() {
    rejects!(
        |t| t.sites[0] = CallSite {
            func: FuncId(1),
            args: vec![0],
            rets: vec![],
        },
        VerifyError::BadCall { .. }
    );
}

#[test]
fn rejects_call_sites_of_call_with_accumulators() {
    rejects!(|t| t.sites[0].rets = vec![2], VerifyError::BadCall { .. });
}

#[test]
fn rejects_call_acc_of_a_one_returning_function() {
    rejects!(|t| t.sites[1].func = FuncId(2), VerifyError::BadCall { .. });
}

#[test]
fn rejects_call_acc_with_the_wrong_number_of_accumulators() {
    rejects!(|t| t.sites[1].rets = vec![2], VerifyError::BadCall { .. });
    rejects!(
        |t| t.sites[1].rets = vec![2, 2, 2],
        VerifyError::BadCall { .. }
    );
}

#[test]
fn rejects_call_acc_into_non_f64_registers() {
    rejects!(
        |t| t.sites[1].rets = vec![2, 1],
        VerifyError::BadCall { .. }
    );
    rejects!(
        |t| t.sites[1].rets = vec![2, 60],
        VerifyError::BadCall { .. }
    );
}

#[test]
fn call_n_is_checked_like_call_acc_but_takes_any_result_types() {
    // The same site as `call.acc`'s: two f64 results into f64 registers.
    assert!(errors(|t| t.code[2] = i(Op::CallN, 0, 0, 0, 1)).is_empty());
    rejects!(
        |t| {
            t.code[2] = i(Op::CallN, 0, 0, 0, 1);
            t.sites[1].rets = vec![2, 1];
        },
        VerifyError::BadCall { .. }
    );
    rejects!(
        |t| {
            t.code[2] = i(Op::CallN, 0, 0, 0, 1);
            t.sites[1].rets = vec![2];
        },
        VerifyError::BadCall { .. }
    );
    rejects!(
        |t| {
            t.code[2] = i(Op::CallN, 0, 0, 0, 1);
            t.sites[1].func = FuncId(2);
        },
        VerifyError::BadCall { .. }
    );
}

#[test]
fn call_n_writes_its_results_where_call_acc_adds() {
    // t(x): r1 = x + x; call r1, r2 <- g(x) = (x, x); ret r1.
    let run = |op: Op| {
        let mut t = function(
            "t",
            1,
            vec![F64, F64, F64],
            RetType::One(F64),
            vec![
                i(Op::AddF, 1, 0, 0, 0),
                i(op, 0, 0, 0, 0),
                i(Op::Ret, 1, 0, 0, 0),
            ],
        );
        t.sites = vec![CallSite {
            func: FuncId(1),
            args: vec![0],
            rets: vec![1, 2],
        }];
        let mut g = function(
            "g",
            1,
            vec![F64],
            RetType::Many(vec![F64, F64]),
            vec![i(Op::RetN, 0, 0, 0, 0)],
        );
        g.lists = vec![vec![0, 0]];
        let mut p = Program::new();
        p.push(t);
        p.push(g);
        verify_program(&mut p).expect("verifies");
        Vm::new(Default::default())
            .run(&p, FuncId(0), &[vm::Value::F64(2.0)])
            .expect("runs")
    };
    assert_eq!(run(Op::CallN), vm::Value::F64(2.0));
    assert_eq!(run(Op::CallAcc), vm::Value::F64(6.0));
}

// ---- 5. returns ----------------------------------------------------------------

#[test]
fn rejects_ret_of_the_wrong_type() {
    rejects!(|t| t.code[7].r0 = 3, VerifyError::BadReturn { .. });
}

#[test]
fn rejects_ret_in_a_many_returning_function() {
    rejects!(
        |t| t.ret = RetType::Many(vec![F64]),
        VerifyError::BadReturn { .. }
    );
}

#[test]
fn rejects_ret_n_in_a_one_returning_function() {
    rejects!(
        |t| {
            t.lists = vec![vec![0]];
            t.code[7] = i(Op::RetN, 0, 0, 0, 0);
        },
        VerifyError::BadReturn { .. }
    );
}

#[test]
fn rejects_ret_n_lists_unlike_the_return_types() {
    for list in [vec![0], vec![0, 1], vec![0, 0, 0], vec![0, 77]] {
        let mut p = base();
        let mut g = p.func(FuncId(1)).clone();
        g.lists = vec![list.clone()];
        p.set(FuncId(1), g).expect("exists");
        let errs = verify_function(&mut p, FuncId(1)).expect_err("rejected");
        assert!(
            matches!(errs[0], VerifyError::BadReturn { .. }),
            "{list:?}: {errs:?}"
        );
    }
}

// ---- 6. termination ------------------------------------------------------------

#[test]
fn rejects_code_that_can_fall_off_its_end() {
    rejects!(
        |t| t.code[7] = i(Op::AddF, 2, 0, 0, 0),
        VerifyError::FallsOffEnd { .. }
    );
    // A conditional jump falls through when not taken.
    rejects!(
        |t| t.code[7] = i(Op::JmpIf, 3, 0, 0, 0),
        VerifyError::FallsOffEnd { .. }
    );
    rejects!(
        |t| t.code[7] = i(Op::CallAcc, 0, 0, 0, 1),
        VerifyError::FallsOffEnd { .. }
    );
}

#[test]
fn rejects_empty_code() {
    rejects!(
        |t| {
            t.code.clear();
            t.tables.clear();
        },
        VerifyError::FallsOffEnd { .. }
    );
}

// ---- 7. flags -------------------------------------------------------------------

#[test]
fn rejects_flags_on_fused_branches() {
    // The condition is the opcode; no flag bit means anything.
    for bad in [1, 8, 16, 128] {
        rejects!(|t| t.code[5].flags = bad, VerifyError::BadFlags { .. });
    }
    // Every fused compare-and-branch passes on operands of its type.
    for op in Op::ALL.iter().copied() {
        match op.branch() {
            Some(b) if b.fused == Fused::CmpI => {
                assert_eq!(errors(|t| t.code[5] = i(op, 1, 1, 0, 6)), vec![]);
            }
            Some(b) if b.fused == Fused::CmpF => {
                assert_eq!(errors(|t| t.code[5] = i(op, 0, 2, 0, 6)), vec![]);
                rejects!(
                    |t| t.code[5] = i(op, 1, 1, 0, 6),
                    VerifyError::TypeMismatch { .. }
                );
            }
            _ => {}
        }
    }
}

/// `jmp.step.if.<cc>.i r1 += r1, r1 -> 0006` in place of `@t`'s
/// compare-and-branch.
fn step(op: Op, flags: u8) -> Instr {
    let mut j = i(op, 1, 1, 1, 6);
    j.flags = flags;
    j
}

#[test]
fn checks_step_and_branch_operands_and_flags() {
    let steps: Vec<Op> = Op::ALL
        .iter()
        .copied()
        .filter(|op| matches!(op.branch(), Some(b) if b.fused == Fused::StepI))
        .collect();
    assert_eq!(steps.len(), 6);
    // Every condition passes (and runs).
    for &op in &steps {
        assert_eq!(errors(|t| t.code[5] = step(op, 0)), vec![]);
    }
    let mut p = base();
    let mut t = p.func(FuncId(0)).clone();
    t.code[5] = step(Op::JmpStepNeI, 0);
    p.set(FuncId(0), t).expect("exists");
    assert_eq!(verify_program(&mut p), Ok(()));
    let mut vm = Vm::default();
    vm.begin(false);
    vm.call_raw(&p, FuncId(0), &[1.5f64.to_bits()])
        .expect("runs");
    // Every bit is reserved (16 once meant "subtract the step").
    for bad in [1, 7, 8, 16, 22, 32, 80, 128] {
        rejects!(
            |t| t.code[5] = step(Op::JmpStepLtI, bad),
            VerifyError::BadFlags { .. }
        );
    }
    // Each register operand is an i64 in range; the target is in range.
    for slot in 0..3 {
        rejects!(
            |t| {
                t.code[5] = step(Op::JmpStepGeI, 0);
                match slot {
                    0 => t.code[5].r0 = 0,
                    1 => t.code[5].r1 = 3,
                    _ => t.code[5].r2 = 2,
                }
            },
            VerifyError::TypeMismatch { .. }
        );
        rejects!(
            |t| {
                t.code[5] = step(Op::JmpStepGeI, 0);
                match slot {
                    0 => t.code[5].r0 = 5,
                    1 => t.code[5].r1 = 5,
                    _ => t.code[5].r2 = 5,
                }
            },
            VerifyError::RegisterOutOfRange { reg: 5, .. }
        );
    }
    rejects!(
        |t| {
            t.code[5] = step(Op::JmpStepGeI, 0);
            t.code[5].x = 8;
        },
        VerifyError::BadIndex { .. }
    );
}

#[test]
fn rejects_flags_on_other_instructions() {
    rejects!(|t| t.code[0].flags = 1, VerifyError::BadFlags { .. });
}

// ---- 8. debug tables --------------------------------------------------------------

#[test]
fn rejects_locs_of_the_wrong_length() {
    rejects!(
        |t| t.locs = vec![Loc::default(); 3],
        VerifyError::BadDebugInfo { .. }
    );
    assert_eq!(errors(|t| t.locs = vec![Loc::default(); 8]), vec![]);
}

#[test]
fn rejects_register_names_of_the_wrong_length() {
    rejects!(
        |t| t.reg_names = vec!["x".into()],
        VerifyError::BadDebugInfo { .. }
    );
    assert_eq!(errors(|t| t.reg_names = vec![String::new(); 5]), vec![]);
}

// ---- 9. reserved pushes ------------------------------------------------------------

/// `@r(r0: f64) -> f64` (r1: f64) with `code`, which calls `@h` through
/// site 0 and dispatches through `tables`; verified (with `@h`), or the
/// errors of `@r`.
fn reserved(code: Vec<Instr>, tables: Vec<Vec<u32>>) -> Result<Program, Vec<VerifyError>> {
    let mut r = function("r", 1, vec![F64, F64], RetType::One(F64), code);
    r.sites = vec![CallSite {
        func: FuncId(1),
        args: vec![0],
        rets: vec![],
    }];
    r.tables = tables;
    let h = identity("h");
    let mut p = Program::new();
    p.push(r);
    p.push(h);
    verify_program(&mut p).map(|()| p)
}

/// The one error of `code`: an unreserved push at `pc`; its message.
fn unreserved_at(code: Vec<Instr>, tables: Vec<Vec<u32>>, pc: usize) -> String {
    match reserved(code, tables) {
        Ok(_) => panic!("verified"),
        Err(errs) => match errs.as_slice() {
            [e @ VerifyError::UnreservedPush { pc: at, .. }] if *at == pc => {
                let text = e.to_string();
                assert!(
                    text.contains("@r") && text.contains(&format!("{pc:04}")),
                    "{text}"
                );
                text
            }
            _ => panic!("expected one UnreservedPush at {pc}, got {errs:?}"),
        },
    }
}

#[test]
fn reserved_pushes_verify_and_run() {
    // reserve r0, 3 (room for 3, pushes r0); r1 = r0 + r0; push r1
    // (checked, uses one); push.r r1; pop r1; ret r1: leaves r0 and 2 r0
    // on the stack.
    let p = reserved(
        vec![
            i(Op::CommsReserve, 0, 0, 0, 3),
            i(Op::AddF, 1, 0, 0, 0),
            i(Op::CommsPush, 1, 0, 0, 0),
            i(Op::CommsPushR, 1, 0, 0, 0),
            i(Op::CommsPop, 1, 0, 0, 0),
            i(Op::Ret, 1, 0, 0, 0),
        ],
        vec![],
    )
    .expect("verifies");
    let mut vm = Vm::default();
    vm.begin(true);
    for k in 1..=300 {
        // Again and again on the same stacks: the reservation grows them.
        vm.call_raw(&p, FuncId(0), &[1.5f64.to_bits()])
            .expect("runs");
        assert_eq!(f64::from_bits(vm.results()[0]), 3.0);
        assert_eq!(vm.comms_len(), 2 * k);
    }
}

#[test]
fn rejects_a_reserved_push_without_a_reserve() {
    let text = unreserved_at(
        vec![i(Op::CommsPushR, 0, 0, 0, 0), i(Op::Ret, 0, 0, 0, 0)],
        vec![],
        0,
    );
    assert!(text.contains("without a comms.reserve"), "{text}");
    // `comms.reserve %r, 0` would push without room: rejected.
    let text = unreserved_at(
        vec![i(Op::CommsReserve, 0, 0, 0, 0), i(Op::Ret, 0, 0, 0, 0)],
        vec![],
        0,
    );
    assert!(text.contains("comms.reserve 0"), "{text}");
}

#[test]
fn rejects_a_reserved_push_beyond_the_reserved_count() {
    // Room for 3: the reserve's own push and two more.
    let push3 = |first: Op| {
        vec![
            i(Op::CommsReserve, 0, 0, 0, 3),
            i(first, 0, 0, 0, 0),
            i(Op::CommsPushR, 0, 0, 0, 0),
            i(Op::CommsPushR, 0, 0, 0, 0),
            i(Op::Ret, 0, 0, 0, 0),
        ]
    };
    let text = unreserved_at(push3(Op::CommsPushR), vec![], 3);
    assert!(text.contains("reserved by comms.reserve at 0000"), "{text}");
    // A checked push uses up a reserved slot too, and so does the push of
    // a `mul.push` (a checked push fused with a product: r1 = r0 * r0).
    unreserved_at(push3(Op::CommsPush), vec![], 3);
    let mut fused = push3(Op::CommsPushR);
    fused[1] = i(Op::MulPush, 1, 0, 0, 0);
    unreserved_at(fused, vec![], 3);
    // Two of two pass.
    let mut two = push3(Op::CommsPushR);
    two.remove(3);
    assert!(reserved(two, vec![]).is_ok());
}

#[test]
fn rejects_a_reserved_push_after_a_call() {
    let code = |call: bool| {
        vec![
            i(Op::CommsReserve, 0, 0, 0, 2),
            // The callee may push and use the room up.
            if call {
                i(Op::Call, 1, 0, 0, 0)
            } else {
                i(Op::Mov, 1, 0, 0, 0)
            },
            i(Op::CommsPushR, 1, 0, 0, 0),
            i(Op::Ret, 1, 0, 0, 0),
        ]
    };
    assert!(reserved(code(false), vec![]).is_ok());
    unreserved_at(code(true), vec![], 2);
}

#[test]
fn rejects_a_reserved_push_after_a_block_push() {
    // Growing the block stack may give the comms stack's spare back.
    let code = vec![
        i(Op::CommsReserve, 0, 0, 0, 2),
        i(Op::BlkPush, 0, 0, 0, 0),
        i(Op::CommsPushR, 0, 0, 0, 0),
        i(Op::Ret, 0, 0, 0, 0),
    ];
    unreserved_at(code, vec![], 2);
}

#[test]
fn rejects_a_reserved_push_at_a_jump_target() {
    // 0003 jumps back to the second push, which the loop reaches with the
    // room already used.
    let code = |target: u32| {
        vec![
            i(Op::CommsReserve, 0, 0, 0, 3),
            i(Op::CommsPushR, 0, 0, 0, 0),
            i(Op::CommsPushR, 0, 0, 0, 0),
            i(Op::JmpLtF, 0, 0, 0, target),
            i(Op::Ret, 0, 0, 0, 0),
        ]
    };
    assert!(reserved(code(0), vec![]).is_ok());
    unreserved_at(code(2), vec![], 2);
    // The same through a `blk.pop` table entry.
    let code = |entry: u32| {
        (
            vec![
                i(Op::CommsReserve, 0, 0, 0, 3),
                i(Op::CommsPushR, 0, 0, 0, 0),
                i(Op::CommsPushR, 0, 0, 0, 0),
                i(Op::BlkPop, 0, 0, 0, 0),
            ],
            vec![vec![0, entry]],
        )
    };
    let (c, t) = code(0);
    assert!(reserved(c, t).is_ok());
    let (c, t) = code(2);
    unreserved_at(c, t, 2);
    // And after an unconditional terminator, where only a jump could
    // arrive.
    unreserved_at(
        vec![
            i(Op::CommsReserve, 0, 0, 0, 2),
            i(Op::Jmp, 0, 0, 0, 3),
            i(Op::CommsPushR, 0, 0, 0, 0),
            i(Op::Ret, 0, 0, 0, 0),
        ],
        vec![],
        2,
    );
}

// ---- the verified flag ----------------------------------------------------------

#[test]
fn missing_functions_are_an_error() {
    let mut p = base();
    assert_eq!(
        verify_function(&mut p, FuncId(9)),
        Err(vec![VerifyError::NoFunction { id: 9 }])
    );
}

#[test]
fn unverified_functions_do_not_run() {
    let mut p = base();
    let mut vm = Vm::default();
    vm.begin(false);
    let err = vm.call_raw(&p, FuncId(0), &[0]).expect_err("refused");
    assert_eq!(err.kind, vm::TrapKind::NotVerified);
    // Verifying @t alone is not enough: its callees are unverified.
    verify_function(&mut p, FuncId(0)).expect("verifies");
    let err = vm.call_raw(&p, FuncId(0), &[0]).expect_err("refused");
    assert_eq!(err.kind, vm::TrapKind::NotVerified);
    verify_program(&mut p).expect("verifies");
    vm.call_raw(&p, FuncId(0), &[0]).expect("runs");
    // Replacing a function clears its mark.
    let h = p.func(FuncId(2)).clone();
    p.set(FuncId(2), h).expect("exists");
    assert!(!p.is_verified(FuncId(2)));
    let err = vm.call_raw(&p, FuncId(0), &[0]).expect_err("refused");
    assert_eq!(err.kind, vm::TrapKind::NotVerified);
}

// ---- decoding ---------------------------------------------------------------------

#[test]
fn encode_and_decode_round_trip() {
    let p = base();
    let words: Vec<[u8; 12]> = p
        .funcs()
        .iter()
        .flat_map(|f| f.code.iter().map(Instr::encode))
        .collect();
    let code: Vec<Instr> = p.funcs().iter().flat_map(|f| f.code.clone()).collect();
    assert_eq!(decode(&words), Ok(code));
    // Little-endian fields at the documented offsets.
    let mut j = Instr::new(Op::Select, 0x0102, 0x0304, 0x0506, 0x0708_090a);
    j.flags = 0;
    assert_eq!(
        j.encode(),
        [Op::Select as u8, 0, 2, 1, 4, 3, 6, 5, 0x0a, 9, 8, 7]
    );
}

#[test]
fn decode_rejects_bytes_naming_no_opcode() {
    let good = i(Op::Ret, 0, 0, 0, 0).encode();
    let mut bad = good;
    bad[0] = Op::ALL.len() as u8;
    assert_eq!(decode(&[good, bad, good]), Err(1));
    bad[0] = 0xff;
    assert_eq!(decode(&[bad]), Err(0));
}

// ---- never a panic -----------------------------------------------------------------

fn ty(b: u8) -> Type {
    [F64, I64, Bool, Arr][b as usize % 4]
}

fn run_verified(p: &Program, nparams: usize, ad: bool) {
    let mut vm = Vm::default();
    vm.limits_mut().fuel = Some(5_000);
    vm.limits_mut().max_call_depth = 32;
    vm.limits_mut().max_array_len = 1 << 16;
    vm.limits_mut().max_stack_bytes = 1 << 16;
    vm.begin(ad);
    let args: Vec<u64> = (0..nparams as u64).collect();
    let _ = vm.call_raw(p, FuncId(0), &args);
    // Once more on the warm VM.
    vm.begin(!ad);
    let _ = vm.call_raw(p, FuncId(0), &args);
}

/// A random function from raw words and random side tables.
#[allow(clippy::too_many_arguments)]
fn random_function(
    name: &str,
    code: Vec<Instr>,
    regs: &[u8],
    nparams: usize,
    ret: u8,
    consts: &[u64],
    tables: Vec<Vec<u32>>,
    sites: &[(u32, Vec<u16>, Vec<u16>)],
    lists: Vec<Vec<u16>>,
) -> Function {
    let reg_types: Vec<Type> = regs.iter().map(|b| ty(*b)).collect();
    let nparams = nparams.min(reg_types.len());
    let ret = if ret % 5 == 4 {
        RetType::Many(vec![F64; (ret as usize / 5) % 3])
    } else {
        RetType::One(ty(ret))
    };
    let mut f = function(name, nparams, reg_types, ret, code);
    f.consts = consts.to_vec();
    f.tables = tables;
    f.lists = lists;
    f.sites = sites
        .iter()
        .map(|(func, args, rets)| CallSite {
            func: FuncId(*func),
            args: args.clone(),
            rets: rets.clone(),
        })
        .collect();
    f
}

fn site() -> impl Strategy<Value = (u32, Vec<u16>, Vec<u16>)> {
    (
        0u32..3,
        prop::collection::vec(0u16..8, 0..3),
        prop::collection::vec(0u16..8, 0..3),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary words and side tables: decoding and verifying never panic,
    /// and whatever verifies runs under fuel without panicking.
    #[test]
    fn arbitrary_words_never_panic(
        words in prop::collection::vec(prop::array::uniform12(any::<u8>()), 1..24),
        regs in prop::collection::vec(any::<u8>(), 1..12),
        nparams in 0usize..4,
        ret in any::<u8>(),
        consts in prop::collection::vec(any::<u64>(), 0..3),
        tables in prop::collection::vec(prop::collection::vec(0u32..30, 0..4), 0..3),
        sites in prop::collection::vec(site(), 0..3),
        lists in prop::collection::vec(prop::collection::vec(0u16..12, 0..3), 0..2),
        ad in any::<bool>(),
    ) {
        let Ok(code) = decode(&words) else { return Ok(()) };
        let f = random_function("f", code, &regs, nparams, ret, &consts, tables, &sites, lists);
        let np = f.param_types.len();
        let mut p = Program::new();
        p.push(f);
        if verify_program(&mut p).is_ok() {
            run_verified(&p, np, ad);
        }
    }

    /// Instructions built from valid opcodes with small operands, in two
    /// functions calling each other, reach the verifier's deeper checks
    /// (and the interpreter) much more often than random bytes.
    #[test]
    fn structured_instructions_never_panic(
        funcs in prop::collection::vec((
            prop::collection::vec(
                (0u8..Op::ALL.len() as u8, 0u16..6, 0u16..6, 0u16..6, 0u32..8, 0u8..26),
                1..16,
            ),
            prop::collection::vec(any::<u8>(), 1..6),
            0usize..3,
            any::<u8>(),
            prop::collection::vec(prop::collection::vec(0u32..16, 0..4), 0..2),
            prop::collection::vec(site(), 0..3),
            prop::collection::vec(prop::collection::vec(0u16..6, 0..3), 0..2),
        ), 1..3),
        consts in prop::collection::vec(prop_oneof![Just(0u64), Just(1), any::<u64>()], 0..2),
        ad in any::<bool>(),
    ) {
        let mut p = Program::new();
        for (k, (ops, regs, nparams, ret, tables, sites, lists)) in funcs.into_iter().enumerate() {
            let code: Vec<Instr> = ops
                .iter()
                .filter_map(|(o, a, b, c, x, fl)| {
                    Op::from_u8(*o).map(|op| {
                        let mut ins = Instr::new(op, *a, *b, *c, *x);
                        // A reserved bit now and then (the verifier
                        // must reject it).
                        ins.flags = if *fl >= 24 { *fl & 17 } else { 0 };
                        ins
                    })
                })
                .collect();
            let consts = if k == 0 { &consts[..] } else { &[] };
            p.push(random_function(
                &format!("f{k}"), code, &regs, nparams, ret, consts, tables, &sites, lists,
            ));
        }
        let _ = verify_program(&mut p);
        if p.is_verified(FuncId(0)) {
            let np = p.func(FuncId(0)).param_types.len();
            run_verified(&p, np, ad);
        }
    }
}
