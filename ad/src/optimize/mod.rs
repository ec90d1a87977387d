//! Clean-up of reverse functions before lowering.
//!
//! The transform builds a reverse function fragment by fragment, each
//! correct on its own: cotangents are accumulated (`acc`), zeroed after use
//! when their value lives in a loop, and moved along phi edges (`take`)
//! through small edge blocks. Put together, that leaves work a compiler
//! would not do: a `take` into a register whose only reader adds it back, an
//! accumulation into a register that is known to hold zero, a `zero` of a
//! register that is overwritten before it is read. This module removes it,
//! with classical passes over the (non-SSA) reverse IR:
//!
//! 1. [`merge_blocks`]: a block that jumps to a block with no other
//!    predecessor absorbs it.
//! 2. [`known_zero`]: a forward must-analysis of the registers that hold
//!    zero (every register but the parameters starts at zero). An `acc`,
//!    `acc.neg` or `acc.mul` into such a register becomes a plain write
//!    (`copy`, `neg`, `mul`), and a `zero` of it disappears.
//! 3. [`propagate_copies`]: within a block, reads of a copy read its source
//!    while neither is written.
//! 4. [`remove_dead`]: liveness; pure instructions whose results nobody
//!    reads disappear (half of a `take` too).
//! 5. [`sink_writes`]: a write to the source of a copy moves below the
//!    copy's last reader in the block when nothing in between depends on it,
//!    so that the two registers can share one.
//! 6. [`coalesce`]: a copy between registers whose live ranges do not
//!    overlap merges them into one register.
//! 7. [`fuse_pops`]: a `comms.pop` whose value is read once, right after,
//!    as a factor of an `acc.mul` or `mul.f`, becomes part of it
//!    (`acc.mul.pop`, `mul.pop`): one dispatch less per popped factor.
//! 8. [`fuse_shadow_products`]: a `mul.f` whose product only a later
//!    `shadow.acc` of the block reads becomes part of it
//!    (`shadow.acc.mul`).
//! 9. [`layout`]: blocks are ordered so that the lowering falls through
//!    where it matters, above all so that a reverse loop ends in one
//!    backward conditional jump.
//!
//! Passes 2 to 6 repeat until nothing changes (at most a few rounds). Only
//! the value of each register at each read matters: the stack and array
//! effects of the code (pops, shadow updates, calls) are never moved or
//! removed. One deviation from bit-for-bit equality with the code as built:
//! `0.0 + x` becomes `x`, which differs for `x = -0.0` in the sign of a
//! zero cotangent only.
//!
//! Functions larger than [`MAX_WORDS`] words of analysis state per set get
//! only passes 1 and 9 (their code is correct, just slower).

mod coalesce;
mod copies;
mod cse;
mod dead;
mod fuse_tangent;
mod known_zero;
mod layout;
mod liveness;
mod merge;
mod operands;
mod pops;
mod shadow;
mod sink;
#[cfg(test)]
mod tests;

pub use coalesce::coalesce;
pub use copies::propagate_copies;
pub use cse::common_subexpressions;
pub use dead::remove_dead;
pub use fuse_tangent::fuse_tangent;
pub use known_zero::known_zero;
pub use layout::layout;
pub use merge::merge_blocks;
pub use pops::fuse_pops;
pub use shadow::fuse_shadow_products;
pub use sink::sink_writes;

#[allow(unused_imports)]
use self::{liveness::*, merge::*, operands::*, pops::*, shadow::*};
use crate::compile_work::{size, Exceeded, Work};
use hashbrown::HashMap;
use vm::bits::Bits;
use vm::ir::{BlockId, Function, Inst, Term, ValueId};
use vm::op::{Op, Operand};
use vm::Type;

/// Bound on `blocks * ceil(values / 64)`, the size of one family of
/// per-block bit sets, for running the global passes (2 to 6). Each pass
/// costs about this many word operations per round, so the bound keeps the
/// clean-up of any function to a fraction of a second; larger functions get
/// block merging and layout only.
pub const MAX_WORDS: usize = 1 << 18;

/// Rounds of the global passes, and of dead-code removal within a round.
const ROUNDS: usize = 6;

/// Clean up reverse function `f` (see the module docs).
pub fn reverse(f: &mut Function) {
    // An unlimited budget is never exceeded (the count saturates).
    let _ = reverse_within(f, &mut Work::unlimited());
}

/// Clean up the tangent of a derived forward function (built by the
/// Hessian-vector product), whose values from `first` on are the tangent
/// transform's: repeated pure computations within a block are computed
/// once ([`common_subexpressions`]), then tangent sums take their products
/// in ([`fuse_tangent`]). Only which register holds a value and how tangent
/// sums are grouped change; stack effects stay where they are.
pub fn tangent(f: &mut Function, first: usize) {
    common_subexpressions(f);
    fuse_tangent(f, first);
}

/// [`reverse`], the function's size charged to `work` before each group
/// of passes ([`crate::compile_work`]); past the bound, the function is left
/// partly cleaned up (still correct) and the error returned.
pub fn reverse_within(f: &mut Function, work: &mut Work) -> Result<(), Exceeded> {
    work.charge_function(f)?;
    merge_blocks(f);
    let words = f.values.len().div_ceil(64);
    if f.blocks.len().saturating_mul(words) <= MAX_WORDS {
        for _ in 0..ROUNDS {
            // Five passes, each linear in the function (or in its blocks
            // times the words of a bit set, bounded by `MAX_WORDS`).
            work.charge(5 * size(f))?;
            let mut changed = known_zero(f);
            changed |= propagate_copies(f);
            changed |= remove_dead(f);
            changed |= sink_writes(f);
            changed |= coalesce(f);
            if !changed {
                break;
            }
        }
        work.charge(3 * size(f))?;
        // Blocks emptied by the rounds above (phi-edge blocks whose moves
        // became renames) are jumped over.
        merge_blocks(f);
        fuse_pops(f);
        if fuse_shadow_products(f) {
            // Blocks emptied by moving their `shadow.acc`s are jumped over.
            merge_blocks(f);
        }
    }
    work.charge_function(f)?;
    layout(f);
    Ok(())
}
