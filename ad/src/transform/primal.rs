//! What the transform knows of the primal function: the function and its
//! module, its CFG and loops ([`Cfg`]), which values are active, where each
//! value is defined, and whether its arrays can change while it runs. Built
//! once by `Transform::new` and only read afterwards: steps 2 to 4 ask it,
//! none changes it.

use crate::analysis::{Aliases, ArraySet, Cfg};
use vm::ir::{BlockId, Function, Module, Term, ValueId};

/// The primal function and the facts of its analysis (step 1).
pub(super) struct Primal<'a> {
    /// The module, for callees' signatures and rules.
    pub(super) module: &'a Module,
    /// The function differentiated.
    pub(super) p: &'a Function,
    /// Its CFG: predecessors, loops (counted ones with their counters),
    /// blocks on cycles, the block defining each value.
    pub(super) cfg: Cfg,
    /// Activity of each value with respect to the selected parameters.
    pub(super) active: Vec<bool>,
    /// The primal instruction `(block, index)` defining each value.
    pub(super) def_inst: Vec<Option<(usize, usize)>>,
    /// No instruction of the function can change an array element while it
    /// runs (no `aset`, no call that may write an array it receives), so an
    /// element read can be repeated anywhere in the reverse code with the
    /// same result. (Callers' later writes are undone by their own reverse
    /// code before this function's reverse runs.)
    pub(super) arrays_immutable: bool,
    /// Per value: an `aget` result after which nothing in its block writes
    /// an array that may be the one read ([`crate::analysis::Aliases`]),
    /// in a function no call of which may write an array (false for every
    /// value otherwise). The reverse code may then read it again in its
    /// block, or further on ([`Primal::reread_in`]), although the function
    /// writes arrays: every write is then an `aset` of this function (or of
    /// a callee's derived code), which the reverse code undoes before it
    /// reaches that block, so there the arrays hold what they held at the
    /// block's end in the forward code.
    pub(super) reread_in_block: Vec<bool>,
    /// Per block: the arrays its instructions may write.
    pub(super) block_writes: Vec<ArraySet>,
    /// Which arrays may be the same array.
    pub(super) aliases: Aliases,
}

impl Primal<'_> {
    /// Whether the reverse block of `b` may read again the element that
    /// the `aget` defining `v`, in block `d`, read: nothing after it in `d`
    /// writes an array that may be the one read, nor (if `b` is not `d`)
    /// anything in the blocks from `d` to `b`, a straight line of blocks
    /// (each the one successor of the one before and its one predecessor),
    /// so that every run of `b` follows a run of `d` with nothing in
    /// between. At most [`LINE_MOST`] blocks are followed back.
    pub(super) fn reread_in(&self, b: BlockId, d: usize, v: ValueId, array: ValueId) -> bool {
        if !self.reread_in_block[v.index()] {
            return false;
        }
        let mut at = b.index();
        for _ in 0..LINE_MOST {
            if at == d {
                return true;
            }
            if self.block_writes[at].may_hold(&self.aliases, array) {
                return false;
            }
            let Some(pred) = self.line_before(at) else {
                return false;
            };
            at = pred;
        }
        false
    }

    /// The block before `b` on a straight line of blocks: `b`'s one
    /// predecessor, if `b` is its one successor (by `jmp`).
    pub(super) fn line_before(&self, b: usize) -> Option<usize> {
        match self.cfg.preds[b][..] {
            [p] if p.index() != b
                && self.p.blocks[p.index()].term == Term::Jmp(BlockId(b as u32)) =>
            {
                Some(p.index())
            }
            _ => None,
        }
    }

    /// The block after `b` on a straight line of blocks: the block `b`
    /// jumps to, if `b` is its one predecessor.
    pub(super) fn line_after(&self, b: usize) -> Option<usize> {
        match self.p.blocks[b].term {
            Term::Jmp(c) if self.line_before(c.index()) == Some(b) => Some(c.index()),
            _ => None,
        }
    }
}

/// The most blocks of a straight line followed from one block
/// ([`Primal::reread_in`], `Transform::share_needs_along_lines`).
pub(super) const LINE_MOST: usize = 16;
