//! The plan of what the reverse code reads and how (see `Supply`): for
//! each counted loop its reverse counter and what its exits push, the
//! values each block pushes for its reverse block, the recomputations at
//! the top of each reverse block, and the values pushed once at `ret`.
//! Step 2 (`supply`) fills it; steps 3 and 4 emit the pops and the pushes
//! it lists, in the same order.

use vm::ir::{Inst, ValueId};

/// What the reverse code reads, and where the forward code saves it.
pub(super) struct Plan {
    /// Counted loops, by loop index (`None` for the others).
    pub(super) loops: Vec<Option<LoopState>>,
    /// Forward values each primal block pushes for its reverse block, in
    /// first-use order, deduplicated.
    pub(super) needs: Vec<Vec<ValueId>>,
    /// Recomputations at the top of each reverse block, in dependency order.
    pub(super) remat: Vec<Vec<Inst>>,
    /// The recomputed value of each (reverse block, forward value).
    pub(super) remat_memo: hashbrown::HashMap<(usize, ValueId), ValueId>,
    /// Needed values defined in the entry block: pushed once at `ret`.
    pub(super) entry_values: Vec<ValueId>,
    /// What `entry_values`, each loop's `invariants` and each block's
    /// `needs` already hold, keyed by list ([`Listed`]) and value: the lists
    /// keep their order, this answers "already there?" in constant time (a
    /// function of many entry values would otherwise search them all for
    /// each one, quadratically).
    pub(super) listed: hashbrown::HashSet<(Listed, ValueId)>,
    /// Per primal block joining more than [`super::JOIN_INDEXED`] edges,
    /// built on first use: for each of its phis, the first incoming value
    /// per predecessor (the phi moves of its N edges look them up instead
    /// of searching N incoming values each, which was quadratic in N).
    pub(super) join_phis:
        hashbrown::HashMap<usize, Vec<hashbrown::HashMap<vm::ir::BlockId, ValueId>>>,
}

/// One of the ordered lists of values the reverse code reads once each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Listed {
    /// `Plan::entry_values`.
    Entry,
    /// The `invariants` of counted loop `l`.
    Invariant(usize),
    /// The `needs` of block `b`.
    Need(usize),
}

/// A counted loop as the reverse code sees it.
pub(super) struct LoopState {
    /// Reverse register holding the loop's induction variable, counted down.
    pub(super) ctr: ValueId,
    /// Forward value pushed at every exit as the counter's start: the
    /// induction-variable phi, or the counter the forward code adds.
    pub(super) iv: ValueId,
    /// The induction variable's value in the first iteration (forward).
    pub(super) init: ValueId,
    pub(super) step: i64,
    /// Reverse register (or constant) holding `init - step`: the counter's
    /// value after leaving the first iteration backwards.
    pub(super) lim: ValueId,
    pub(super) lim_const: bool,
    /// Where the reverse code reads `init` (to compute `lim`).
    pub(super) init_reg: Option<ValueId>,
    /// Forward values pushed at every exit (before `iv`), popped when the
    /// reverse code enters the loop.
    pub(super) invariants: Vec<ValueId>,
    /// Added forward counter: `(latch block, increment instruction)`.
    pub(super) synthetic: Option<(usize, Inst)>,
}
