//! The one derivation driver: derive a function, then the functions its
//! derived code calls, each once (the table of derived code caches them
//! and gives recursion its ids before the code exists), install, lower
//! and verify. Each AD mode says only what is particular to it
//! ([`Mode`]): what a unit of derived code is of, how one is built (the
//! transform, the callee ids it asks for, the clean-up), and the
//! placeholders that hold a unit's ids until it is built. Reverse mode
//! (`derive.rs`), forward mode (`forward/engine.rs`) and Hessian-vector
//! products (`hvp.rs`) are the three modes.

use crate::compile_work::Work;
use crate::{AdError, Engine};
use vm::ir::{self, FuncId};

/// One AD mode, as [`Engine::drive`] runs it.
pub(crate) trait Mode {
    /// What a unit of derived code is of (a user function and a parameter
    /// mask, a derived function, ...): the work list's item. A unit's ids
    /// are in the table of derived code, and its placeholders pushed,
    /// before it is on the list.
    type Key;

    /// The kind of code, for the message of a verification failure.
    const WHAT: &'static str;

    /// Build unit `key`: the IR of each of its functions with the id
    /// reserved for it and the user function it is derived from. A callee
    /// unit its code needs and the table does not have yet gets its ids
    /// reserved and goes to `pending`, in the order the ids were given.
    /// `units` is the request's compile budget.
    fn build(
        &self,
        e: &mut Engine,
        key: &Self::Key,
        units: &mut Work,
        pending: &mut Vec<Self::Key>,
    ) -> Result<Vec<(FuncId, ir::Function, FuncId)>, AdError>;

    /// Push the placeholders of unit `key`, reserved while another was
    /// built.
    fn placeholders(&self, e: &mut Engine, key: &Self::Key);
}

impl Engine {
    /// Build every unit of `work` and every unit their code calls (the
    /// units of `work` already reserved, with their placeholders), install
    /// and lower each function, then verify everything from bytecode id
    /// `first_new` on. The caller rolls back from `first_new` on error.
    pub(crate) fn drive<M: Mode>(
        &mut self,
        mode: &M,
        mut work: Vec<M::Key>,
        first_new: usize,
    ) -> Result<(), AdError> {
        let mut units = Work::new(self.max_compile_work);
        while let Some(key) = work.pop() {
            // An allocation failed (served from the reserve): the result
            // is out of memory anyway, stop.
            if vm::oom::failed() {
                return Err(AdError::out_of_memory());
            }
            let mut pending = Vec::new();
            let funcs = mode.build(self, &key, &mut units, &mut pending)?;
            // Placeholders for the units reserved while building this one,
            // in the order their ids were given.
            for k in pending {
                mode.placeholders(self, &k);
                work.push(k);
            }
            for (id, func, of) in funcs {
                self.install_derived(id, func, of)?;
            }
        }
        self.verify_new(first_new, M::WHAT)
    }
}
