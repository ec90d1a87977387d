//! What the transform knows of the primal function: the function and its
//! module, its CFG and loops ([`Cfg`]), which values are active, where each
//! value is defined, and whether its arrays can change while it runs. Built
//! once by `Transform::new` and only read afterwards: steps 2 to 4 ask it,
//! none changes it.

use crate::analysis::Cfg;
use vm::ir::{Function, Module};

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
    /// Per value: an `aget` result that the reverse block of its own block
    /// may read again although the function writes arrays. Nothing after
    /// the `aget` in its block writes an array, and no call in the function
    /// may write one: every write is then an `aset` of this function (or of
    /// a callee's derived code), which the reverse code undoes before it
    /// reaches that block, so there the arrays hold what they held at the
    /// block's end in the forward code.
    pub(super) reread_in_block: Vec<bool>,
}
