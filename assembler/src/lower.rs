//! Lowering: checked functions to the SSA IR of [`vm::ir`].
//!
//! The checker has already resolved every name, type and opcode, so this is
//! a direct translation. Value numbering: parameters first, then registers
//! in text order, then constants, each distinct (type, bits) pair once per
//! function.

use crate::check::{Arg, CBlock, CTerm, CheckedFn};
use hashbrown::HashMap;
use vm::ir::{Block, BlockId, FuncId, Function, Inst, Module, Phi, Term, ValueId};
use vm::Type;

/// Lower every function; the module's function `i` is the file's `i`-th.
pub(crate) fn lower_module(funcs: Vec<CheckedFn>) -> Module {
    Module {
        funcs: funcs.into_iter().map(lower_function).collect(),
        rules: Vec::new(),
    }
}

fn lower_function(c: CheckedFn) -> Function {
    let mut f = Function {
        name: c.name,
        params: (0..c.n_params as u32).map(ValueId).collect(),
        ret: c.ret,
        values: Vec::with_capacity(c.values.len()),
        blocks: Vec::with_capacity(c.blocks.len()),
        loc: c.loc,
    };
    for v in c.values {
        f.new_value(v.ty, Some(v.name));
    }
    let mut lowerer = Lowerer {
        f,
        consts: HashMap::new(),
    };
    for b in c.blocks {
        let block = lowerer.block(b);
        lowerer.f.blocks.push(block);
    }
    lowerer.f
}

struct Lowerer {
    f: Function,
    consts: HashMap<(Type, u64), ValueId>,
}

impl Lowerer {
    /// The value of an operand, adding a constant to the table on its
    /// first use.
    fn arg(&mut self, a: Arg) -> ValueId {
        match a {
            Arg::Val(v) => ValueId(v),
            Arg::Const(ty, bits) => *self
                .consts
                .entry((ty, bits))
                .or_insert_with(|| self.f.new_const(ty, bits)),
        }
    }

    fn block(&mut self, b: CBlock) -> Block {
        let phis = b
            .phis
            .into_iter()
            .map(|p| Phi {
                dst: ValueId(p.dst),
                incoming: p
                    .incoming
                    .into_iter()
                    .map(|(pred, a)| (BlockId(pred), self.arg(a)))
                    .collect(),
                loc: p.loc,
            })
            .collect();
        let insts = b
            .insts
            .into_iter()
            .map(|i| {
                let args = i.args.into_iter().map(|a| self.arg(a)).collect();
                // A call of a function with no result receives its unused
                // i64 zero in a register of its own.
                let dst = match (i.dst, i.op) {
                    (Some(d), _) => Some(ValueId(d)),
                    (None, vm::op::Op::Call) => Some(self.f.new_value(Type::I64, None)),
                    (None, _) => None,
                };
                let mut inst = Inst::new(i.op, dst, args, i.loc);
                inst.callee = i.callee.map(FuncId);
                inst.imm = i.imm;
                inst.accs = i.accs.into_iter().map(ValueId).collect();
                inst
            })
            .collect();
        let term = match b.term {
            CTerm::Jmp(t) => Term::Jmp(BlockId(t)),
            CTerm::Br { cond, then_, else_ } => Term::Br {
                cond: self.arg(cond),
                then_: BlockId(then_),
                else_: BlockId(else_),
            },
            CTerm::Ret(Some(v)) => Term::Ret(self.arg(v)),
            // No result: the function returns an unused i64 zero.
            CTerm::Ret(None) => Term::Ret(self.arg(Arg::Const(Type::I64, 0))),
            CTerm::RetN(vs) => Term::RetN(vs.into_iter().map(|a| self.arg(a)).collect()),
            CTerm::BlkPop(ts) => Term::BlkPop(ts.into_iter().map(BlockId).collect()),
        };
        Block {
            name: b.name,
            phis,
            insts,
            term,
            term_loc: b.term_loc,
        }
    }
}
