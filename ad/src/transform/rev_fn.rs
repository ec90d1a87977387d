//! The reverse-function builder: the pullback under construction, its
//! registers (a cotangent per active f64 primal value, a reverse-frame copy
//! per popped forward value, constants, the seed, a sink for inactive
//! arguments' cotangents) and the reverse fragments the translation
//! (step 2) writes for each primal block, which step 3 (`reverse_cfg`)
//! assembles into its CFG.

use hashbrown::HashMap;
use vm::ir::{Function, Inst, ValueId};
use vm::Type;

/// The reverse function under construction.
pub(super) struct RevFn {
    /// The reverse (pullback) function.
    pub(super) func: Function,
    /// Reverse-frame copy of each forward value the reverse code pops.
    pub(super) mirror: Vec<Option<ValueId>>,
    /// Cotangent register of each active f64 primal value.
    pub(super) cot: Vec<Option<ValueId>>,
    /// The reverse function's constants, by type and bits.
    pub(super) consts: HashMap<(Type, u64), ValueId>,
    /// The parameter receiving the output's cotangent (functions returning
    /// f64).
    pub(super) seed: Option<ValueId>,
    /// The register absorbing cotangents of inactive call arguments, once
    /// one is needed.
    pub(super) sink: Option<ValueId>,
    /// Reverse fragments of each primal block, already in reverse order.
    pub(super) frags: Vec<Vec<Inst>>,
    /// Reverse registers (cotangents) that receive exactly one
    /// contribution per instance of their value.
    pub(super) set_once: Vec<bool>,
}
