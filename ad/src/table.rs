//! The engine's one table of derived code: every derived function, by
//! bytecode id, with its IR, its kind (forward function, pullback, tangent
//! function, or tangent of a derived function for Hessian-vector products)
//! and the user function it derives from; and the index by (user function,
//! parameter mask, mode) that gradients and tangents look their code up in.
//!
//! Derived functions follow the user functions in the program, so the
//! entry of bytecode id `g` is entry `g - n` of the table, `n` being the
//! number of user functions. An entry exists from the moment its id is
//! reserved (a placeholder with an empty IR) until a failed derivation
//! rolls it back ([`DerivedTable::truncate`]) or the module grows
//! ([`DerivedTable::reset`]).

use crate::transform::Derived;
use std::sync::Arc;
use vm::ir::{self, FuncId};

/// What a derived function computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The forward function of a reverse pair (the primal, saving what the
    /// pullback needs).
    Fwd,
    /// The reverse function (pullback) of a reverse pair.
    Rev,
    /// A tangent (forward-mode) function of a user function.
    Tangent,
    /// The tangent function of the derived function it names (a forward
    /// function or pullback): what Hessian-vector products run.
    Hvp(FuncId),
}

/// One derived function.
#[derive(Clone, Debug)]
struct Entry {
    /// Its IR (empty while it is a placeholder).
    ir: ir::Function,
    kind: Kind,
    /// The user function it derives from.
    of: FuncId,
    /// Its tangent function, once built (for Hessian-vector products).
    tangent: Option<FuncId>,
}

/// The derived code of one user function, by parameter mask and mode.
#[derive(Clone, Debug, Default)]
struct ByMask {
    pairs: Vec<(Box<[bool]>, Derived)>,
    tangents: Vec<(Box<[bool]>, FuncId)>,
}

/// Every derived function of an engine (see the module documentation).
///
/// Cloning is cheap: the entries (with their IR) are shared behind an
/// `Arc` and copied on write; the index is small (a few masks per user
/// function).
#[derive(Clone, Debug)]
pub(crate) struct DerivedTable {
    entries: Arc<Vec<Entry>>,
    /// Indexed by user function: a vector, not a hash map, as the lookup
    /// is on every gradient call, and hashing the id cost more than the
    /// rest of a small gradient's bookkeeping.
    by_func: Vec<ByMask>,
}

/// `a == b`, element by element: masks are a few flags long, shorter than
/// what a call to `memcmp` costs.
#[inline]
pub(crate) fn same_mask(a: &[bool], b: &[bool]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

impl DerivedTable {
    /// An empty table for a module of `nfuncs` user functions.
    pub(crate) fn new(nfuncs: usize) -> DerivedTable {
        DerivedTable {
            entries: Arc::new(Vec::new()),
            by_func: vec![ByMask::default(); nfuncs],
        }
    }

    /// Forget every derived function, for a module of `nfuncs` user
    /// functions (after functions were added: every id moves).
    pub(crate) fn reset(&mut self, nfuncs: usize) {
        *self = DerivedTable::new(nfuncs);
    }

    fn first(&self) -> usize {
        self.by_func.len()
    }

    fn entry(&self, id: FuncId) -> Option<&Entry> {
        id.index()
            .checked_sub(self.first())
            .and_then(|i| self.entries.get(i))
    }

    fn entry_mut(&mut self, id: FuncId) -> Option<&mut Entry> {
        let i = id.index().checked_sub(self.first())?;
        Arc::make_mut(&mut self.entries).get_mut(i)
    }

    /// The reverse pair of `f` with respect to `wrt`, if reserved (no
    /// allocation).
    #[inline]
    pub(crate) fn pair(&self, f: FuncId, wrt: &[bool]) -> Option<Derived> {
        self.by_func
            .get(f.index())?
            .pairs
            .iter()
            .find(|(m, _)| same_mask(m, wrt))
            .map(|(_, d)| *d)
    }

    /// The tangent function of `f` with respect to `wrt`, if reserved (no
    /// allocation).
    #[inline]
    pub(crate) fn tangent_fn(&self, f: FuncId, wrt: &[bool]) -> Option<FuncId> {
        self.by_func
            .get(f.index())?
            .tangents
            .iter()
            .find(|(m, _)| same_mask(m, wrt))
            .map(|(_, id)| *id)
    }

    /// Record `d` as `f`'s reverse pair with respect to `wrt` (its ids
    /// reserved, the placeholders pushed or to be pushed).
    pub(crate) fn add_pair(&mut self, f: FuncId, wrt: Box<[bool]>, d: Derived) {
        if let Some(by) = self.by_func.get_mut(f.index()) {
            by.pairs.push((wrt, d));
        }
    }

    /// Record `id` as `f`'s tangent function with respect to `wrt`.
    pub(crate) fn add_tangent_fn(&mut self, f: FuncId, wrt: Box<[bool]>, id: FuncId) {
        if let Some(by) = self.by_func.get_mut(f.index()) {
            by.tangents.push((wrt, id));
        }
    }

    /// The tangent function of derived function `g`, if reserved.
    pub(crate) fn tangent_of(&self, g: FuncId) -> Option<FuncId> {
        self.entry(g)?.tangent
    }

    /// Record `t` as the tangent function of derived function `g`.
    pub(crate) fn set_tangent_of(&mut self, g: FuncId, t: FuncId) {
        if let Some(e) = self.entry_mut(g) {
            e.tangent = Some(t);
        }
    }

    /// Add the entry of the next bytecode id: a placeholder named `name`
    /// until [`DerivedTable::install`] gives its IR.
    pub(crate) fn push(&mut self, name: String, kind: Kind, of: FuncId) {
        Arc::make_mut(&mut self.entries).push(Entry {
            ir: ir::Function {
                name,
                params: Vec::new(),
                ret: ir::RetType::Many(Vec::new()),
                values: Vec::new(),
                blocks: Vec::new(),
                loc: Default::default(),
            },
            kind,
            of,
            tangent: None,
        });
    }

    /// Give derived function `id` its IR; false if `id` has no entry.
    pub(crate) fn install(&mut self, id: FuncId, func: ir::Function) -> bool {
        match self.entry_mut(id) {
            Some(e) => {
                e.ir = func;
                true
            }
            None => false,
        }
    }

    /// The IR of derived function `id`.
    pub(crate) fn ir(&self, id: FuncId) -> Option<&ir::Function> {
        self.entry(id).map(|e| &e.ir)
    }

    /// What derived function `id` computes, and the user function it
    /// derives from.
    pub(crate) fn kind(&self, id: FuncId) -> Option<(Kind, FuncId)> {
        self.entry(id).map(|e| (e.kind, e.of))
    }

    /// Forget every derived function from bytecode id `first_new` on, and
    /// every reference to one: what a failed derivation leaves behind.
    pub(crate) fn truncate(&mut self, first_new: usize) {
        let keep = first_new.saturating_sub(self.first());
        let entries = Arc::make_mut(&mut self.entries);
        entries.truncate(keep);
        for e in entries.iter_mut() {
            if e.tangent.is_some_and(|t| t.index() >= first_new) {
                e.tangent = None;
            }
        }
        for by in &mut self.by_func {
            by.pairs.retain(|(_, d)| d.fwd.index() < first_new);
            by.tangents.retain(|(_, id)| id.index() < first_new);
        }
    }
}
