//! The bytecode verifier.
//!
//! **Invariant:** no [`Program`] that passes [`verify_program`] (or whose
//! functions each passed [`verify_function`]) can make the interpreter
//! panic, index out of bounds, or hit undefined behaviour. The interpreter
//! only enters functions marked verified ([`Program::is_verified`]; only
//! this module sets the mark, and [`Program::set`] clears it) and, in
//! `regs.rs`, reads and writes registers, fetches instructions and looks
//! up call sites, register lists, jump tables and callees without bounds
//! checks on the strength of these checks:
//!
//! 1. Frame: `reg_types.len() <= 65535` (a register is a `u16`); every
//!    parameter type is the matching prefix of `reg_types`;
//!    `param_types.len() + consts.len() <= nregs`, and no constant register
//!    is an array (constants are raw bits, never heap handles).
//! 2. Registers: every register operand (`r0`, `r1`, `r2`, and `x` where the
//!    opcode has a fourth register, as listed by [`Op::operands`]) is
//!    `< nregs` and has the type the opcode table requires; all `T`
//!    operands of one instruction have the same type.
//! 3. Indices: jump targets are `< code.len()`; jump-table, register-list
//!    and call-site indices are in range and every jump-table entry is
//!    `< code.len()`.
//! 4. Calls: the callee exists; argument count and register types match
//!    its parameters; `call` targets a callee returning one value
//!    ([`RetType::One`]) whose type is `r0`'s, and its site lists no
//!    accumulators; `call.acc` targets a callee returning several f64
//!    values ([`RetType::Many`]), one per `rets` register, each an f64
//!    register; `call.n` targets a callee returning several values
//!    ([`RetType::Many`]), one per `rets` register, of the same types.
//! 5. Returns: `ret` returns a register of the function's single return
//!    type (so never in a [`RetType::Many`] function); `ret.n` returns a
//!    list whose register types are the function's return types (so never
//!    in a [`RetType::One`] function).
//! 6. Termination: the code is non-empty and its last instruction is an
//!    unconditional terminator (`ret`, `ret.n`, `jmp`, `blk.pop`), so
//!    execution never runs off the end: every `pc` the interpreter reaches
//!    is 0, a checked target, or the successor of an instruction that is
//!    not the last.
//! 7. Flags: the `flags` byte is zero (reserved; see [`Op::flag_bits`]).
//! 8. Debug tables: `locs` and `reg_names` are empty or exactly as long as
//!    `code` / `reg_types`.
//! 9. Reserved pushes: every `comms.push.r` (a push without a capacity
//!    check, `regs.rs`) is covered by a `comms.reserve`. Walking the code
//!    in order with a budget of 0: the budget drops to 0 at every jump
//!    target and `blk.pop` table entry (another path may arrive there), at
//!    the instruction after an unconditional terminator, and after every
//!    `call` and `call.acc` (the callee pushes too) and `blk.push` (growing
//!    the block stack may give back the comms stack's spare capacity);
//!    `comms.reserve n`, which makes room for `n` and is the first of the
//!    `n` pushes, sets it to `n - 1` (`n = 0` is rejected); a `comms.push`
//!    or `mul.push` takes one from it if it is not 0; a `comms.push.r`
//!    needs it `>= 1` and takes one. Every way into an instruction
//!    (fall-through, jump, return from a call, entry at 0) thus arrives
//!    with at least the budget's spare capacity.
//!
//! Checks 4 and 5 make calls and returns agree on the shape of the result:
//! a `call` frame is only ever returned to by `ret`, a `call.acc` or
//! `call.n` frame only by `ret.n`. A caller is verified against its callees' signatures at that
//! time; replacing a callee later ([`Program::set`], [`Program::truncate`])
//! unverifies every function that calls it, so a caller that runs was
//! checked against the callees it calls now (the interpreter relies on this
//! and does not compare signatures per call).
//!
//! What the verifier cannot decide statically stays a trap at run time:
//! array bounds, array handles (an array register starts at 0, the null
//! handle, and may never be assigned), comms and block stack underflow,
//! block ids outside a jump table, call depth, fuel, memory limits.
//!
//! [`decode`] turns raw little-endian words into instructions (rejecting
//! bytes that name no opcode); [`crate::bytecode::Instr::encode`] is its
//! inverse.

use crate::bytecode::{Function, Instr, Program};
use crate::ir::{FuncId, RetType};
use crate::op::{Op, Operand, Ty};
use crate::types::Type;
use std::fmt;

/// One verification failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// The frame has more registers than a `u16` can name.
    TooManyRegisters {
        /// The function, by name.
        func: String,
        /// The registers the frame has.
        n: usize,
    },
    /// Parameter or constant registers do not fit the frame or their types.
    BadFrame {
        /// The function, by name.
        func: String,
        /// What is wrong.
        detail: String,
    },
    /// A register operand is out of range.
    RegisterOutOfRange {
        /// The function, by name.
        func: String,
        /// The instruction's index in the function's code.
        pc: usize,
        /// The register operand.
        reg: u32,
    },
    /// A register operand has the wrong type.
    TypeMismatch {
        /// The function, by name.
        func: String,
        /// The instruction's index in the function's code.
        pc: usize,
        /// What is wrong.
        detail: String,
    },
    /// A jump target, table, list or call-site index is out of range.
    BadIndex {
        /// The function, by name.
        func: String,
        /// The instruction's index in the function's code.
        pc: usize,
        /// What is wrong.
        detail: String,
    },
    /// A call does not match its callee's signature.
    BadCall {
        /// The function, by name.
        func: String,
        /// The instruction's index in the function's code.
        pc: usize,
        /// What is wrong.
        detail: String,
    },
    /// A return does not match the function's return type.
    BadReturn {
        /// The function, by name.
        func: String,
        /// The instruction's index in the function's code.
        pc: usize,
        /// What is wrong.
        detail: String,
    },
    /// The code is empty or can run off its end.
    FallsOffEnd {
        /// The function, by name.
        func: String,
    },
    /// Debug tables have the wrong length.
    BadDebugInfo {
        /// The function, by name.
        func: String,
    },
    /// The `flags` byte sets a bit the opcode does not use (the byte is
    /// reserved but for the subtraction bit of a step-and-branch).
    BadFlags {
        /// The function, by name.
        func: String,
        /// The instruction's index in the function's code.
        pc: usize,
        /// The flags byte.
        flags: u8,
    },
    /// A `comms.push.r` that no `comms.reserve` covers (check 9).
    UnreservedPush {
        /// The function, by name.
        func: String,
        /// The instruction's index in the function's code.
        pc: usize,
        /// What is wrong.
        detail: String,
    },
    /// No such function.
    NoFunction {
        /// The function id.
        id: u32,
    },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::TooManyRegisters { func, n } => {
                write!(f, "@{func}: {n} registers (at most 65535)")
            }
            VerifyError::BadFrame { func, detail } => write!(f, "@{func}: {detail}"),
            VerifyError::RegisterOutOfRange { func, pc, reg } => {
                write!(f, "@{func} at {pc:04}: register r{reg} out of range")
            }
            VerifyError::TypeMismatch { func, pc, detail }
            | VerifyError::BadIndex { func, pc, detail }
            | VerifyError::BadCall { func, pc, detail }
            | VerifyError::BadReturn { func, pc, detail }
            | VerifyError::UnreservedPush { func, pc, detail } => {
                write!(f, "@{func} at {pc:04}: {detail}")
            }
            VerifyError::FallsOffEnd { func } => {
                write!(
                    f,
                    "@{func}: code is empty or does not end in an unconditional terminator"
                )
            }
            VerifyError::BadDebugInfo { func } => {
                write!(f, "@{func}: debug tables have the wrong length")
            }
            VerifyError::BadFlags { func, pc, flags } => {
                write!(f, "@{func} at {pc:04}: bad flags byte {flags:#04x}")
            }
            VerifyError::NoFunction { id } => write!(f, "no function fn{id}"),
        }
    }
}

impl std::error::Error for VerifyError {}

/// Verify every function; every function that passes is marked verified,
/// and the result lists the errors of all that do not.
///
/// Takes `&mut` because verification is recorded in the program (the mark
/// that lets the interpreter run a function).
pub fn verify_program(p: &mut Program) -> Result<(), Vec<VerifyError>> {
    let mut errors = Vec::new();
    for i in 0..p.len() {
        if let Err(mut e) = verify_function(p, FuncId(i as u32)) {
            errors.append(&mut e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Verify one function and mark it verified if it passes.
pub fn verify_function(p: &mut Program, id: FuncId) -> Result<(), Vec<VerifyError>> {
    let Some(f) = p.get(id) else {
        return Err(vec![VerifyError::NoFunction { id: id.0 }]);
    };
    let errors = check_function(p, f);
    if errors.is_empty() {
        p.mark_verified(id);
        Ok(())
    } else {
        Err(errors)
    }
}

fn check_function(p: &Program, f: &Function) -> Vec<VerifyError> {
    let mut errs = Vec::new();
    let name = || f.name.clone();
    let nregs = f.reg_types.len();
    if nregs > u16::MAX as usize {
        errs.push(VerifyError::TooManyRegisters {
            func: name(),
            n: nregs,
        });
        return errs;
    }
    let np = f.param_types.len();
    if np + f.consts.len() > nregs {
        errs.push(VerifyError::BadFrame {
            func: name(),
            detail: format!(
                "{np} parameters and {} constants exceed {nregs} registers",
                f.consts.len()
            ),
        });
        return errs;
    }
    if f.param_types.iter().zip(&f.reg_types).any(|(a, b)| a != b) {
        errs.push(VerifyError::BadFrame {
            func: name(),
            detail: "parameter types differ from their registers' types".into(),
        });
    }
    if f.reg_types[np..np + f.consts.len()].contains(&Type::Arr) {
        errs.push(VerifyError::BadFrame {
            func: name(),
            detail: "an array constant".into(),
        });
    }
    if (!f.locs.is_empty() && f.locs.len() != f.code.len())
        || (!f.reg_names.is_empty() && f.reg_names.len() != nregs)
    {
        errs.push(VerifyError::BadDebugInfo { func: name() });
    }
    match f.code.last() {
        Some(last) if matches!(last.op, Op::Ret | Op::RetN | Op::Jmp | Op::BlkPop) => {}
        _ => errs.push(VerifyError::FallsOffEnd { func: name() }),
    }
    for (pc, ins) in f.code.iter().enumerate() {
        check_instr(p, f, pc, ins, &mut errs);
    }
    check_reserved_pushes(f, &mut errs);
    errs
}

/// Check 9: every `comms.push.r` is covered by a `comms.reserve` (see the
/// module docs for the rule).
fn check_reserved_pushes(f: &Function, errs: &mut Vec<VerifyError>) {
    if !f
        .code
        .iter()
        .any(|i| matches!(i.op, Op::CommsPushR | Op::CommsReserve))
    {
        return;
    }
    // Where control may arrive other than by falling through.
    let mut entered = vec![false; f.code.len()];
    let mut mark = |pc: u32| {
        if let Some(e) = entered.get_mut(pc as usize) {
            *e = true;
        }
    };
    for ins in &f.code {
        if ins.op.operands().contains(&Operand::Target) {
            mark(ins.x);
        }
    }
    for &pc in f.tables.iter().flatten() {
        mark(pc);
    }
    // The pushes still covered, and the `comms.reserve` that made them.
    let mut budget: u32 = 0;
    let mut reserve: Option<(usize, u32)> = None;
    for (pc, ins) in f.code.iter().enumerate() {
        if entered[pc] {
            (budget, reserve) = (0, None);
        }
        match ins.op {
            Op::CommsReserve if ins.x == 0 => errs.push(VerifyError::UnreservedPush {
                func: f.name.clone(),
                pc,
                detail: "comms.reserve 0".into(),
            }),
            Op::CommsReserve => (budget, reserve) = (ins.x - 1, Some((pc, ins.x))),
            // A checked push (`comms.push`, `mul.push`) uses up a reserved
            // slot too.
            op if op.facts().comms > 0 && op != Op::CommsPushR => budget = budget.saturating_sub(1),
            Op::CommsPushR if budget == 0 => {
                let detail = match reserve {
                    Some((at, n)) => format!(
                        "comms.push.r beyond the {n} push(es) reserved by comms.reserve at {at:04}"
                    ),
                    None => "comms.push.r without a comms.reserve since the last jump target, \
                             call or blk.push"
                        .into(),
                };
                errs.push(VerifyError::UnreservedPush {
                    func: f.name.clone(),
                    pc,
                    detail,
                });
            }
            Op::CommsPushR => budget -= 1,
            op if op.facts().runs_code || op.facts().blk > 0 => (budget, reserve) = (0, None),
            op if op.is_terminator() => (budget, reserve) = (0, None),
            _ => {}
        }
    }
}

fn check_instr(p: &Program, f: &Function, pc: usize, ins: &Instr, errs: &mut Vec<VerifyError>) {
    let func = || f.name.clone();
    let ncode = f.code.len();
    let mut poly: Option<Type> = None;
    let mut slot = 0usize;
    let regs: Vec<Operand> = ins.op.reg_operands().collect();
    for operand in ins.op.operands() {
        match operand {
            Operand::Def(ty) | Operand::Use(ty) | Operand::InOut(ty) => {
                let r = ins.reg(slot);
                slot += 1;
                let Some(actual) = f.reg_types.get(r as usize).copied() else {
                    errs.push(VerifyError::RegisterOutOfRange {
                        func: func(),
                        pc,
                        reg: r,
                    });
                    continue;
                };
                match ty.fixed() {
                    Some(want) if want != actual => errs.push(VerifyError::TypeMismatch {
                        func: func(),
                        pc,
                        detail: format!(
                            "{} operand r{r} is {actual}, expected {want}",
                            ins.op.mnemonic()
                        ),
                    }),
                    None if *ty == Ty::T => match poly {
                        None => poly = Some(actual),
                        Some(t) if t != actual => errs.push(VerifyError::TypeMismatch {
                            func: func(),
                            pc,
                            detail: format!("{} operands mix {t} and {actual}", ins.op.mnemonic()),
                        }),
                        _ => {}
                    },
                    _ => {}
                }
            }
            Operand::Target => {
                if ins.x as usize >= ncode {
                    errs.push(bad_index(
                        f,
                        pc,
                        format!("jump target {} out of range", ins.x),
                    ));
                }
            }
            Operand::Table => match f.tables.get(ins.x as usize) {
                None => errs.push(bad_index(
                    f,
                    pc,
                    format!("jump table {} out of range", ins.x),
                )),
                Some(t) => {
                    if t.iter().any(|&target| target as usize >= ncode) {
                        errs.push(bad_index(
                            f,
                            pc,
                            format!("jump table {} has a target out of range", ins.x),
                        ));
                    }
                }
            },
            Operand::List => match f.lists.get(ins.x as usize) {
                None => errs.push(bad_index(
                    f,
                    pc,
                    format!("return list {} out of range", ins.x),
                )),
                Some(list) => check_ret_list(f, pc, list, errs),
            },
            Operand::Site => check_call(p, f, pc, ins, errs),
            Operand::Imm => {}
        }
    }
    debug_assert_eq!(slot, regs.len());
    if ins.flags & !ins.op.flag_bits() != 0 {
        errs.push(VerifyError::BadFlags {
            func: func(),
            pc,
            flags: ins.flags,
        });
    }
    if ins.op == Op::Ret {
        if let Some(actual) = f.reg_types.get(ins.r0 as usize) {
            if f.ret.carrier() != Some(*actual) {
                errs.push(VerifyError::BadReturn {
                    func: func(),
                    pc,
                    detail: format!("ret of {actual} in a function returning {:?}", f.ret),
                });
            }
        }
    }
}

fn bad_index(f: &Function, pc: usize, detail: String) -> VerifyError {
    VerifyError::BadIndex {
        func: f.name.clone(),
        pc,
        detail,
    }
}

fn check_ret_list(f: &Function, pc: usize, list: &[u16], errs: &mut Vec<VerifyError>) {
    let RetType::Many(want) = &f.ret else {
        errs.push(VerifyError::BadReturn {
            func: f.name.clone(),
            pc,
            detail: "ret.n in a function returning one value".into(),
        });
        return;
    };
    let got: Option<Vec<Type>> = list
        .iter()
        .map(|r| f.reg_types.get(*r as usize).copied())
        .collect();
    if got.as_deref() != Some(want.as_slice()) {
        errs.push(VerifyError::BadReturn {
            func: f.name.clone(),
            pc,
            detail: "ret.n registers do not match the return types".into(),
        });
    }
}

fn check_call(p: &Program, f: &Function, pc: usize, ins: &Instr, errs: &mut Vec<VerifyError>) {
    let bad = |detail: String| VerifyError::BadCall {
        func: f.name.clone(),
        pc,
        detail,
    };
    let Some(site) = f.sites.get(ins.x as usize) else {
        errs.push(bad_index(
            f,
            pc,
            format!("call site {} out of range", ins.x),
        ));
        return;
    };
    let Some(callee) = p.get(site.func) else {
        errs.push(bad(format!("call to missing function {}", site.func)));
        return;
    };
    let arg_types: Option<Vec<Type>> = site
        .args
        .iter()
        .map(|r| f.reg_types.get(*r as usize).copied())
        .collect();
    if arg_types.as_deref() != Some(callee.param_types.as_slice()) {
        errs.push(bad(format!(
            "arguments do not match the parameters of @{}",
            callee.name
        )));
    }
    match (ins.op, &callee.ret) {
        (Op::Call, ret @ (RetType::One(_) | RetType::Unit)) => {
            let t = &ret.carrier().unwrap_or(Type::I64);
            if !site.rets.is_empty() {
                errs.push(bad("call site of `call` lists accumulators".into()));
            }
            if f.reg_types.get(ins.r0 as usize) != Some(t) {
                errs.push(bad(format!(
                    "result register does not have @{}'s return type {t}",
                    callee.name
                )));
            }
        }
        (Op::CallAcc, RetType::Many(ts)) => {
            let ok = site.rets.len() == ts.len()
                && ts.iter().all(|t| *t == Type::F64)
                && site
                    .rets
                    .iter()
                    .all(|r| f.reg_types.get(*r as usize) == Some(&Type::F64));
            if !ok {
                errs.push(bad(format!(
                    "accumulators do not match the results of @{}",
                    callee.name
                )));
            }
        }
        (Op::CallN, RetType::Many(ts)) => {
            let ok = site.rets.len() == ts.len()
                && site
                    .rets
                    .iter()
                    .zip(ts)
                    .all(|(r, t)| f.reg_types.get(*r as usize) == Some(t));
            if !ok {
                errs.push(bad(format!(
                    "result registers do not match the results of @{}",
                    callee.name
                )));
            }
        }
        _ => errs.push(bad(format!(
            "{} cannot call @{}",
            ins.op.mnemonic(),
            callee.name
        ))),
    }
}

/// Decode little-endian 12-byte instruction words (layout in
/// `bytecode.rs`). `Err(i)`: word `i` is the first whose byte 0 names no
/// opcode. Decoding checks nothing else; run the result through the
/// verifier before it runs.
pub fn decode(words: &[[u8; 12]]) -> Result<Vec<Instr>, usize> {
    words
        .iter()
        .enumerate()
        .map(|(i, w)| Instr::decode(w).ok_or(i))
        .collect()
}
