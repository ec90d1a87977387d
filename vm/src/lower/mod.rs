//! SSA IR to register bytecode.
//!
//! * Every IR value gets its own register: parameters first (parameter `i`
//!   in register `i`), then constants (loaded from `consts` on frame entry),
//!   then everything else in value order, then scratch registers for
//!   breaking copy cycles. This needs no SSA: reverse functions from the AD
//!   stage write their accumulators many times and lower the same way.
//! * Phi coalescing: a value a phi receives shares the phi's register, so
//!   that edge's copy disappears, where that is safe: by syntactic rules
//!   for the common case (`coalesce`: read only by the phi, its block
//!   ending in `jmp`), then by liveness (`coalesce_live`: no two values of
//!   the merged classes live at once; a phi feeding a phi, a value also
//!   read by the branch after it). Only single-definition values take
//!   part, so reverse code's accumulators keep their own registers.
//! * Register names (`Function::reg_names`, for listings) are the values'
//!   names, made distinct within the function (`distinct_names`: derived
//!   code names some values alike), so a listing names each register once
//!   and reads back as the same code.
//! * Phis become parallel copies on the edge actually taken: `jmp B` emits
//!   `B`'s copies for this edge before the jump; `br c, T, E` jumps to an
//!   edge-local copy sequence for whichever side has copies. Copies are
//!   sequentialised so that cycles (the swap `a <- b, b <- a`) go through a
//!   scratch register.
//! * Blocks are laid out in IR order; a jump to the next block is omitted,
//!   and a `jmp` to a small join that does not follow becomes a copy of it
//!   (see `Lowerer::block`). A copy, and a block that no jump reaches
//!   (found by a first pass; see `lower_function`), continue the
//!   straight-line run before them, so the peepholes below see across
//!   their start.
//! * Fusion: a `br` on a comparison computed by the block's last
//!   instruction becomes one compare-and-branch (`jmp.if.<cc>.i`,
//!   `jmp.if.<cc>.f`, `jmp.ifnot.<cc>.f`: one opcode per condition); a `jmp`
//!   to a block that only compares and branches (a loop header) is threaded
//!   into the same; and a counter step `add.i %c, %c, s` or
//!   `sub.i %c, %c, k` (`k` a constant: it steps by the constant `-k`, see
//!   `negated_steps`) emitted just before an integer compare-and-branch on
//!   `%c` joins it as `jmp.step.if.<cc>.i` (see `Lowerer::take_step`), so a
//!   counted loop ends in one instruction.
//! * Fused math: a `sin` and a `cos` of the same register, one right after
//!   the other, become one `sincos` (one call to the C library's `sincos`
//!   in the interpreter), unless the first writes the register the second
//!   reads (see `Lowerer::fuse`). The AD stage's forward code writes
//!   such pairs (the pullback of one needs the other).
//! * Multiply-add: `mul.f %p, %a, %b; add.f %acc, %acc, %p`, with the
//!   `add.f` the product's only reader, becomes `add.mul.f %acc, %a, %b` (a
//!   dot product's step in one dispatch), also with block-id and comms
//!   pushes between the two (see `Lowerer::mul_add`).
//! * Fused products (derived code): a checked `comms.push %a` right before
//!   `mul.f %d, %a, %b` becomes `mul.push %d, %a, %b`, and `acc.mul.pop %s,
//!   %g` right before `mul.f %d, %g, %c` becomes `acc.mul.pop.mul` (see
//!   `Lowerer::fuse`): a product in a differentiated loop costs one
//!   dispatch in each direction, as in the primal.
//! * Batched reservation: a block's instructions are cut at every `call`,
//!   `call.acc` and `blk.push` (a callee pushes too, and growing the block
//!   stack may give back the comms stack's spare capacity); a stretch with
//!   `n >= 2` `comms.push`es has its first become `comms.reserve %v, n`
//!   (room for all `n`, then that push) and the others unchecked
//!   `comms.push.r`s, so the capacity is checked once, not per push (see
//!   `reservations`; the verifier's check 9 proves the result).

mod blocks;
mod check;
mod coalesce;
mod entry;
mod insts;
mod reserve;
mod steps;
#[cfg(test)]
mod tests;

pub use check::{check_function, check_module};
pub use entry::lower_function;

#[allow(unused_imports)]
use self::{blocks::*, check::*, coalesce::*, entry::*, reserve::*, steps::*};
use crate::bits;
use crate::bytecode::{BlockMark, CallSite, Function, Instr, Program, Reg};
use crate::ir::{self, BlockId, Loc, Term, ValueId};
use crate::op::{Cond, Fused, Op, Operand};
use crate::types::Type;
use std::fmt;

/// Why a function could not be lowered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LowerError {
    /// The frame would need more registers than a `u16` can name.
    TooManyRegisters {
        /// The function, by name.
        func: String,
        /// The registers the frame would need.
        needed: usize,
    },
    /// A phi has no incoming value for an edge that reaches its block.
    MissingPhiEdge {
        /// The function, by name.
        func: String,
        /// The block, by name.
        block: String,
    },
    /// A `blk.pop` targets a block with phis (edge copies need a unique edge).
    PhiOnDispatchEdge {
        /// The function, by name.
        func: String,
        /// The block, by name.
        block: String,
    },
    /// An instruction's operands do not fit its opcode.
    BadInstruction {
        /// The function, by name.
        func: String,
        /// The block, by name.
        block: String,
        /// What is wrong.
        detail: String,
    },
    /// More instructions than a `u32` jump target can name.
    TooMuchCode {
        /// The function, by name.
        func: String,
    },
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::TooManyRegisters { func, needed } => {
                write!(
                    f,
                    "@{func} needs {needed} registers; a frame holds at most 65535"
                )
            }
            LowerError::MissingPhiEdge { func, block } => {
                write!(
                    f,
                    "@{func}: a phi of block {block} has no value for one of its incoming edges"
                )
            }
            LowerError::PhiOnDispatchEdge { func, block } => {
                write!(f, "@{func}: blk.pop targets block {block}, which has phis")
            }
            LowerError::BadInstruction {
                func,
                block,
                detail,
            } => {
                write!(f, "@{func}, block {block}: {detail}")
            }
            LowerError::TooMuchCode { func } => write!(f, "@{func} is too large"),
        }
    }
}

impl std::error::Error for LowerError {}

/// Lower every function of a module (same ids). The module is checked
/// first with [`check_module`].
pub fn lower_module(m: &ir::Module) -> Result<Program, LowerError> {
    check_module(m)?;
    let mut p = Program::new();
    for f in &m.funcs {
        p.push(lower_function(f)?);
    }
    Ok(p)
}

/// How a conditional branch tests its condition.
#[derive(Clone, Copy)]
enum Test {
    Reg(Reg),
    Fused(Fused, Cond, Reg, Reg),
}

/// Where a jump must be patched to.
enum Fixup {
    Block(BlockId),
    Pc(usize),
}

struct Lowerer<'f> {
    f: &'f ir::Function,
    reg: Vec<Reg>,
    reg_types: Vec<Type>,
    reg_names: Vec<String>,
    scratch: Vec<(Type, Reg)>,
    code: Vec<Instr>,
    locs: Vec<Loc>,
    fixups: Vec<(usize, Fixup)>,
    sites: Vec<CallSite>,
    tables: Vec<Vec<u32>>,
    table_blocks: Vec<Vec<BlockId>>,
    lists: Vec<Vec<Reg>>,
    /// How often each value is read.
    uses: &'f [u32],
    /// Where the code of the block being lowered starts.
    block_start: usize,
    /// Per block: whether a jump or jump table may reach it (all blocks
    /// in the first pass; see `lower_function`). One that none reaches
    /// continues the straight-line run before it.
    reached: &'f [bool],
    /// A mark per stretch of code of one block, in code order.
    marks: Vec<BlockMark>,
    /// What is left of [`COPY_BUDGET`] while blocks are being copied.
    budget: usize,
    /// How many blocks go to each block (the entry block one more, for
    /// the function's entry).
    preds: Vec<usize>,
    /// `(register of constant k, register of constant -k)` for the
    /// constant steps of `sub.i` (see `negated_steps`).
    neg_steps: Vec<(Reg, Reg)>,
    /// Per block with more than [`JOIN_INDEXED`] predecessors: for each
    /// of its phis, the first incoming value per predecessor, so that the
    /// copies of its N edges take N lookups each instead of N searches
    /// (a join of N predecessors was quadratic in N).
    join_phis: std::collections::HashMap<BlockId, Vec<std::collections::HashMap<BlockId, ValueId>>>,
    /// Where in `code` the last `select` whose condition has no other
    /// reader was emitted (for `tmax.f` / `tmin.f`).
    select_once: Option<(usize, Instr)>,
}

/// Joins with more incoming edges than this have their phis indexed
/// ([`Lowerer::join_phis`]); smaller ones are searched.
const JOIN_INDEXED: usize = 16;

/// The index of [`Lowerer::join_phis`] for `f`.
fn join_phis(
    f: &ir::Function,
) -> std::collections::HashMap<BlockId, Vec<std::collections::HashMap<BlockId, ValueId>>> {
    let mut out = std::collections::HashMap::new();
    for (bi, b) in f.blocks.iter().enumerate() {
        if b.phis
            .first()
            .is_some_and(|p| p.incoming.len() > JOIN_INDEXED)
        {
            let maps = b
                .phis
                .iter()
                .map(|phi| {
                    let mut m = std::collections::HashMap::with_capacity(phi.incoming.len());
                    for (l, v) in &phi.incoming {
                        // The first, as a search finds it.
                        m.entry(*l).or_insert(*v);
                    }
                    m
                })
                .collect();
            out.insert(BlockId(bi as u32), maps);
        }
    }
    out
}
