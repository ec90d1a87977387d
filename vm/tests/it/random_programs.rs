//! Random *mostly well-typed* bytecode programs: unlike random words, most
//! of these pass the verifier, so the interpreter runs every opcode on
//! them. Whatever verifies must run (under fuel) without a panic; run this
//! with `--features checked` too, where a register index the verifier let
//! through out of range panics instead of being undefined behaviour.
//! `VM_RANDOM_SEEDS=1000000` runs more programs.

use proptest::prelude::*;
use vm::bytecode::{BlockMark, CallSite, Function, Instr, Program, Reg};
use vm::ir::{FuncId, RetType};
use vm::op::{Op, Operand, Ty};
use vm::verify::verify_program;
use vm::{Type, Vm};

use Type::{Arr, Bool, F64, I64};

/// xorshift64*: a tiny deterministic generator (the seed comes from
/// proptest or a loop, so failures are reproducible).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    /// True one time in `n`.
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
    fn ty(&mut self) -> Type {
        [F64, I64, Bool, Arr][self.below(4)]
    }
}

struct Sig {
    params: Vec<Type>,
    ret: RetType,
}

/// A register of type `t` (or, rarely, any register at all, or one past
/// the frame).
fn reg_of(rng: &mut Rng, regs: &[Type], t: Type) -> Reg {
    let of: Vec<usize> = (0..regs.len()).filter(|&r| regs[r] == t).collect();
    if of.is_empty() || rng.one_in(200) {
        rng.below(regs.len() + 1) as Reg
    } else {
        of[rng.below(of.len())] as Reg
    }
}

fn random_program(seed: u64) -> Program {
    let mut rng = Rng(seed | 1);
    let nfuncs = 1 + rng.below(3);
    let sigs: Vec<Sig> = (0..nfuncs)
        .map(|_| {
            let params = (0..rng.below(3)).map(|_| rng.ty()).collect();
            let ret = if rng.one_in(3) {
                RetType::Many(vec![F64; rng.below(3)])
            } else {
                RetType::One(rng.ty())
            };
            Sig { params, ret }
        })
        .collect();
    let mut p = Program::new();
    for (k, sig) in sigs.iter().enumerate() {
        // Parameters, the constants, one register of each type, extras.
        let mut regs = sig.params.clone();
        let consts: Vec<u64> = (0..rng.below(3))
            .map(|_| match rng.below(4) {
                0 => 0,
                1 => 1,
                2 => 2f64.to_bits(),
                _ => rng.next(),
            })
            .collect();
        for _ in &consts {
            regs.push([F64, I64, Bool][rng.below(3)]);
        }
        regs.extend([F64, I64, Bool, Arr]);
        for _ in 0..rng.below(4) {
            regs.push(rng.ty());
        }
        let len = 2 + rng.below(14);
        let mut f = Function {
            name: format!("f{k}"),
            param_types: sig.params.clone(),
            ret: sig.ret.clone(),
            reg_types: regs.clone(),
            consts,
            code: Vec::new(),
            sites: Vec::new(),
            tables: Vec::new(),
            lists: Vec::new(),
            blocks: vec![BlockMark {
                name: "entry".into(),
                start: 0,
            }],
            locs: Vec::new(),
            reg_names: Vec::new(),
        };
        for pc in 0..len {
            let last = pc == len - 1;
            let op = if last {
                match (&sig.ret, rng.below(4)) {
                    (_, 0) => Op::Jmp,
                    (_, 1) => Op::BlkPop,
                    (RetType::One(_) | RetType::Unit, _) => Op::Ret,
                    (RetType::Many(_), _) => Op::RetN,
                }
            } else {
                Op::ALL[rng.below(Op::ALL.len())]
            };
            let mut slots: Vec<u32> = Vec::new();
            let mut x = None;
            let poly = match (op, &sig.ret) {
                (Op::Ret, RetType::One(t)) => *t,
                (Op::Ret, RetType::Unit) => I64,
                _ => rng.ty(),
            };
            let mut call_ret = None;
            for operand in op.operands() {
                match operand {
                    Operand::Def(ty) | Operand::Use(ty) | Operand::InOut(ty) => {
                        let t = match ty {
                            Ty::T => poly,
                            t => t.fixed().unwrap_or(F64),
                        };
                        slots.push(reg_of(&mut rng, &regs, t) as u32);
                    }
                    Operand::Target => {
                        let over = usize::from(rng.one_in(50));
                        x = Some(rng.below(len + over) as u32);
                    }
                    Operand::Imm => x = Some(rng.below(4) as u32),
                    Operand::Table => {
                        let n = 1 + rng.below(3);
                        let t = (0..n).map(|_| rng.below(len) as u32).collect();
                        f.tables.push(t);
                        x = Some(f.tables.len() as u32 - 1);
                    }
                    Operand::List => {
                        let want = match &sig.ret {
                            RetType::Many(ts) => ts.clone(),
                            RetType::One(_) | RetType::Unit => vec![F64],
                        };
                        let l = want.iter().map(|t| reg_of(&mut rng, &regs, *t)).collect();
                        f.lists.push(l);
                        x = Some(f.lists.len() as u32 - 1);
                    }
                    Operand::Site => {
                        let over = usize::from(rng.one_in(50));
                        let callee = rng.below(nfuncs + over);
                        let (args, rets) = match sigs.get(callee) {
                            Some(s) => {
                                let args = s
                                    .params
                                    .iter()
                                    .map(|t| reg_of(&mut rng, &regs, *t))
                                    .collect();
                                let rets = match (&s.ret, op) {
                                    (RetType::Many(ts), Op::CallAcc) => {
                                        ts.iter().map(|_| reg_of(&mut rng, &regs, F64)).collect()
                                    }
                                    _ => Vec::new(),
                                };
                                if let RetType::One(t) = s.ret {
                                    call_ret = Some(t);
                                }
                                (args, rets)
                            }
                            None => (Vec::new(), Vec::new()),
                        };
                        f.sites.push(CallSite {
                            func: FuncId(callee as u32),
                            args,
                            rets,
                        });
                        x = Some(f.sites.len() as u32 - 1);
                    }
                }
            }
            // `call`'s r0 comes before its site in the table: fix it up.
            if op == Op::Call {
                if let Some(t) = call_ret {
                    slots[0] = reg_of(&mut rng, &regs, t) as u32;
                }
            }
            let slot = |i: usize| slots.get(i).copied().unwrap_or(0);
            let ins = Instr::new(
                op,
                slot(0) as Reg,
                slot(1) as Reg,
                slot(2) as Reg,
                x.unwrap_or(Instr::pack_x(&slots)),
            );
            f.code.push(ins);
        }
        p.push(f);
    }
    p
}

/// Verify; if `@f0` passed, run it (fuel, small limits, both modes, on one
/// warm VM). Returns whether it verified.
fn check(seed: u64) -> bool {
    let mut p = random_program(seed);
    let _ = verify_program(&mut p);
    if !p.is_verified(FuncId(0)) {
        return false;
    }
    let mut vm = Vm::default();
    vm.limits_mut().fuel = Some(3_000);
    vm.limits_mut().max_call_depth = 16;
    vm.limits_mut().max_array_len = 1 << 12;
    vm.limits_mut().max_stack_bytes = 1 << 12;
    for ad in [false, true, false] {
        vm.begin(ad);
        let mut args = Vec::new();
        for t in &p.func(FuncId(0)).param_types {
            args.push(match t {
                Arr => vm.alloc_array(&[1.0, 2.0, 3.0]).expect("alloc"),
                F64 => 1.5f64.to_bits(),
                I64 => 1,
                Bool => 1,
            });
        }
        let _ = vm.call_raw(&p, FuncId(0), &args);
        let _ = vm.results();
    }
    true
}

#[test]
fn most_random_programs_verify_and_none_panics() {
    let n: u64 = std::env::var("VM_RANDOM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000);
    let verified = (0..n).filter(|&s| check(0x9e37_79b9_7f4a_7c15 ^ s)).count() as u64;
    // The generator is meant to reach the interpreter: a fair share of its
    // programs must pass the verifier (about 3 in 4 do).
    assert!(verified * 2 >= n, "only {verified} of {n} verified");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_programs_never_panic(seed in any::<u64>()) {
        check(seed);
    }
}
