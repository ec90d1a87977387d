//! The forward-function builder: the copy of the primal that becomes the
//! forward function, and what the translation (step 2) adds to it for
//! single instructions (the element an `aset` overwrites, the derived
//! functions a call goes through, the factor after a `sin` or `cos`).
//! Step 4 (`forward_cfg`) adds the pushes and finishes it.

use super::Derived;
use hashbrown::HashMap;
use vm::ir::{BlockId, Function, ValueId};

/// The forward function under construction.
pub(super) struct FwdFn {
    /// The forward function: a copy of the primal, extended.
    pub(super) func: Function,
    /// The block defining each forward value (extends the primal CFG's
    /// `def_block` with the values the forward code adds).
    pub(super) def: Vec<Option<BlockId>>,
    /// For each `aset` (block, index), the forward value holding the element
    /// it overwrites.
    pub(super) overwritten: HashMap<(usize, usize), ValueId>,
    /// For each call (block, index) differentiated through, the callee's
    /// derived functions.
    pub(super) calls: HashMap<(usize, usize), Derived>,
    /// For each active `sin` and `cos` (block, index), the forward value
    /// holding the other function of its operand (`cos a` for `sin a`,
    /// `sin a` for `cos a`): the factor its pullback needs, computed by the
    /// forward code right after it (see `Transform::factor`).
    pub(super) factors: HashMap<(usize, usize), ValueId>,
}
