//! The check of the `jit_tiers` fuzz target (`fuzz/`), also run on
//! plausible inputs by `jit/tests/it/fuzz_smoke.rs`: arbitrary bytecode that
//! passes the verifier runs the same in both tiers.

use vm::bytecode::{BlockMark, CallSite, Function, Instr, Program};
use vm::ir::{FuncId, RetType};
use vm::op::Op;
use vm::{Limits, Type, Vm};

fn ty(b: u8) -> Type {
    match b % 4 {
        0 => Type::F64,
        1 => Type::I64,
        2 => Type::Bool,
        _ => Type::Arr,
    }
}

/// The bounds the check runs under: a self-recursive function may go
/// 2 000 frames deep (past the host's stack onto the native tier's stack
/// segments), a function calling the leaf 8.
fn limits(recursive: bool) -> Limits {
    Limits {
        max_call_depth: if recursive { 2_000 } else { 8 },
        fuel: Some(if recursive { 200_000 } else { 20_000 }),
        max_array_len: 4096,
        max_stack_bytes: 1 << 20,
        max_heap_bytes: 1 << 24,
        max_memory_bytes: 1 << 28,
        ad_budget: None,
    }
}

/// The constants of the registers after the parameters (`regs`, their
/// types), from the header's last byte: bits 1-2 say how many (up to
/// three, as long as they are `i64` or `f64` registers), bits 3-4 where
/// in `1, -1, 3, 0` (or `1.0, -1.0, 0.5, 0.0`) their values start. So
/// counted loops (a `jmp.step` by a constant 1 or -1, `jit/src/loops.rs`)
/// and products by constants can occur.
pub fn constants(byte: u8, regs: &[Type]) -> Vec<u64> {
    let n = usize::from(byte >> 1) % 4;
    let from = usize::from(byte >> 3) % 4;
    let mut out = Vec::new();
    for (k, t) in regs.iter().take(n).enumerate() {
        let at = (from + k) % 4;
        out.push(match t {
            Type::I64 => [1i64, -1, 3, 0][at] as u64,
            Type::F64 => [1.0f64, -1.0, 0.5, 0.0][at].to_bits(),
            _ => break,
        });
    }
    out
}

/// `data`: an 8-byte header (frame size, parameter count, register types,
/// return type, jump table and callee, return list, mode and constants:
/// [`constants`]) and then 12-byte
/// instruction words, as the `verify` target reads them; the one call
/// site calls the function itself (if bit 3 of the jump table's byte is
/// set) or a leaf function of the same signature. If the function
/// verifies, it runs in the interpreter and in the native tier (plain and
/// AD mode) and everything must agree: result or trap, results, the
/// instruction count, the AD stacks' lengths. Returns `None` if it did
/// not verify, else the tier that ran its last call in the VM with the
/// native tier; panics on a disagreement.
pub fn tiers_agree(data: &[u8]) -> Option<vm::Tier> {
    if data.len() < 8 {
        return None;
    }
    let (head, rest) = data.split_at(8);
    let nregs = 1 + head[0] as usize % 16;
    let nparams = head[1] as usize % (nregs + 1);
    let reg_types: Vec<Type> = (0..nregs)
        .map(|i| ty(head[2].wrapping_add((i as u8).wrapping_mul(head[3]))))
        .collect();
    let code: Option<Vec<Instr>> = rest
        .chunks_exact(12)
        .map(|c| {
            let mut w = [0u8; 12];
            w.copy_from_slice(c);
            Instr::decode(&w)
        })
        .collect();
    let code = code?;
    let ret = match head[4] % 6 {
        4 => RetType::Many(vec![Type::F64]),
        5 => RetType::Unit,
        _ => RetType::One(ty(head[4])),
    };
    let rets = match ret {
        RetType::Many(_) => vec![0],
        RetType::One(_) | RetType::Unit => Vec::new(),
    };
    let params = reg_types[..nparams].to_vec();
    let consts = constants(head[7], &reg_types[nparams..]);
    let recursive = head[5] & 8 != 0;
    let f = Function {
        name: "fuzz".into(),
        param_types: params.clone(),
        ret: ret.clone(),
        reg_types: reg_types.clone(),
        consts,
        code,
        sites: vec![CallSite {
            func: if recursive { FuncId(0) } else { FuncId(1) },
            args: (0..nparams as u16).collect(),
            rets,
        }],
        tables: vec![vec![0, head[5] as u32 % 8]],
        lists: vec![vec![head[6] as u16 % nregs as u16]],
        blocks: vec![BlockMark {
            name: "entry".into(),
            start: 0,
        }],
        locs: Vec::new(),
        reg_names: Vec::new(),
    };
    // The leaf: returns a fresh register of the return type (zero).
    let mut leaf_regs = params.clone();
    leaf_regs.push(match &ret {
        RetType::One(t) => *t,
        RetType::Unit => Type::I64,
        RetType::Many(_) => Type::F64,
    });
    let r = nparams as u16;
    let leaf = Function {
        name: "leaf".into(),
        param_types: params.clone(),
        ret: ret.clone(),
        reg_types: leaf_regs,
        consts: Vec::new(),
        code: vec![match ret {
            RetType::Many(_) => Instr::new(Op::RetN, 0, 0, 0, 0),
            _ => Instr::new(Op::Ret, r, 0, 0, 0),
        }],
        sites: Vec::new(),
        tables: Vec::new(),
        lists: vec![vec![r]],
        blocks: Vec::new(),
        locs: Vec::new(),
        reg_names: Vec::new(),
    };
    let mut p = Program::new();
    p.push(f);
    p.push(leaf);
    if vm::verify::verify_function(&mut p, FuncId(1)).is_err()
        || vm::verify::verify_function(&mut p, FuncId(0)).is_err()
    {
        return None;
    }
    let mut a = Vm::new(limits(recursive));
    let mut b = Vm::new(limits(recursive));
    crate::install_eager(&mut b);
    for ad_mode in [head[7] % 2 == 0, head[7] % 2 != 0] {
        let mut outcomes = Vec::new();
        for m in [&mut a, &mut b] {
            m.begin(ad_mode);
            let mut args = Vec::new();
            for t in &params {
                args.push(match t {
                    Type::F64 => 1.5f64.to_bits(),
                    Type::I64 => 2,
                    Type::Bool => 1,
                    Type::Arr => m.alloc_array(&[0.5, -1.0, 2.0]).unwrap_or(0),
                });
            }
            let r = m.call_raw(&p, FuncId(0), &args);
            outcomes.push(format!(
                "{r:?} {:?} executed {} comms {} blk {}",
                m.results(),
                m.executed(),
                m.comms_len(),
                m.blk_len()
            ));
        }
        assert_eq!(
            outcomes[0],
            outcomes[1],
            "tiers disagree (ad mode {ad_mode}):\n{}",
            vm::disasm::function(p.func(FuncId(0)))
        );
    }
    Some(b.last_tier())
}
