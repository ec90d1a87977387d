//! The derived code an engine holds, for readers: a derived function's IR
//! and kind by bytecode id, the derived functions reachable from a pair
//! through call sites, and the listings of reverse-mode code (`advm disasm
//! --ad`). The tangent and Hessian-vector product listings are beside their
//! modes (`forward/engine.rs`, `hvp.rs`).

use crate::*;

impl Engine {
    /// The IR of a derived function (forward or reverse), by bytecode id.
    pub fn derived_ir(&self, id: FuncId) -> Option<&ir::Function> {
        self.derived.ir(id)
    }

    /// What a derived function (by bytecode id) computes, and the user
    /// function it derives from; `None` for a user function or an unknown
    /// id.
    pub fn derived_kind(&self, id: FuncId) -> Option<(Kind, FuncId)> {
        self.derived.kind(id)
    }

    /// Forward and reverse bytecode of `f` and of every function derived
    /// with it, as text.
    pub fn disasm_ad(&mut self, f: FuncId) -> Result<String, AdError> {
        let d = self.derive(f)?;
        Ok(self.disasm_derived(d))
    }

    /// Like [`Engine::disasm_ad`], with respect to the parameters selected
    /// by `wrt`.
    pub fn disasm_ad_wrt(&mut self, f: FuncId, wrt: &[bool]) -> Result<String, AdError> {
        let d = self.derive_wrt(f, wrt)?;
        Ok(self.disasm_derived(d))
    }

    /// The derived functions reachable from `d`, as text, callees named.
    pub(crate) fn disasm_derived(&self, d: Derived) -> String {
        let mut out = String::new();
        for g in self.reachable_from(d) {
            out.push_str(&self.rule_note(g));
            out.push_str(&vm::disasm::function_in(
                self.program.func(g),
                Some(&self.program),
            ));
            out.push('\n');
        }
        out
    }

    /// Derived functions reachable from `f`'s pair (with respect to every
    /// parameter) through call sites, in order of discovery (forward then
    /// reverse of each). Empty if that pair is not built yet.
    pub fn reachable_derived(&self, f: FuncId) -> Vec<FuncId> {
        let full = self.full_masks.get(f.index()).map(|m| &**m).unwrap_or(&[]);
        match self.derived.pair(f, full) {
            Some(d) => self.reachable_from(d),
            None => Vec::new(),
        }
    }

    /// Derived functions reachable from the pair `d` through call sites, in
    /// order of discovery (forward then reverse of each).
    pub fn reachable_from(&self, d: Derived) -> Vec<FuncId> {
        self.reachable_from_all(&[d])
    }

    /// Derived functions reachable from the pairs `roots` through call
    /// sites, each once: depth first from each root in turn (its forward,
    /// then its reverse function), callees in id order, skipping functions
    /// listed already. Linear in the derived functions and call sites.
    pub fn reachable_from_all(&self, roots: &[Derived]) -> Vec<FuncId> {
        self.reachable_through_calls(roots.iter().flat_map(|d| [d.fwd, d.rev]))
    }

    /// Derived functions reachable from `starts` through call sites, each
    /// once: depth first from each start in turn (the start first), callees
    /// in id order, skipping functions listed already.
    pub(crate) fn reachable_through_calls(
        &self,
        starts: impl IntoIterator<Item = FuncId>,
    ) -> Vec<FuncId> {
        let first_derived = self.module.funcs.len();
        let mut seen = vec![false; self.program.len()];
        let mut out = Vec::new();
        for start in starts {
            let mut stack = vec![start];
            while let Some(g) = stack.pop() {
                match seen.get_mut(g.index()) {
                    Some(s) if !*s => *s = true,
                    _ => continue,
                }
                out.push(g);
                let mut callees: Vec<FuncId> = self
                    .program
                    .func(g)
                    .sites
                    .iter()
                    .map(|s| s.func)
                    .filter(|c| {
                        c.index() >= first_derived && !seen.get(c.index()).copied().unwrap_or(true)
                    })
                    .collect();
                callees.sort();
                callees.dedup();
                stack.extend(callees.into_iter().rev());
            }
        }
        out
    }
}
