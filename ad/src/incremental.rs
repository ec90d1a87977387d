//! Adding functions to an engine that has run (the REPL's definitions): only
//! the new functions are inlined, lowered and verified.

use crate::*;

impl Engine {
    /// Append user functions, with ids from the number of functions on:
    /// their calls name functions by those ids (the new ones included).
    /// Every derived function is dropped (as in a fresh engine), and
    /// [`Prepared`] gradients of this engine are no longer valid. The new
    /// functions are checked, inlined, lowered and verified as
    /// [`Engine::with_inlining`] would (the same code, unless the module's
    /// growth budget for inlining ran out); the others are left as they
    /// are, so adding `k` functions costs time in `k`, not in the size of
    /// the module. On an error the engine is as it was, but for its
    /// derived functions, which may have been dropped. Custom rules
    /// ([`ir::Rule`]) are not added: a module's rules come with
    /// [`Engine::new`].
    ///
    /// Checking, inlining, lowering and verifying run in a compile section
    /// ([`vm::oom`]): with [`vm::alloc_count::Reserve`] as the global
    /// allocator, an allocation that fails there is
    /// [`AdError::out_of_memory`] (the engine as it was), not an abort.
    pub fn add_functions(&mut self, funcs: Vec<ir::Function>) -> Result<(), AdError> {
        let n = self.module.funcs.len();
        let added = funcs.len();
        let staged = crate::error::section(|| self.stage_functions(funcs, n));
        let (budget, total) = match staged {
            Ok(b) => b,
            Err(e) => {
                self.unstage_functions(n);
                return Err(e);
            }
        };
        self.budget = budget;
        self.total_size = total;
        self.derived.reset(n + added);
        for f in &self.module.funcs[n..] {
            self.full_masks
                .push(analysis::all_params(f).into_boxed_slice());
            if f.name.contains(".fwd") || f.name.contains(".rev") {
                Arc::make_mut(&mut self.derived_like).insert(f.name.clone());
            }
        }
        self.id = engine_id();
        self.index_names(n);
        Ok(())
    }

    /// Append `funcs` to the module (the `n` there are kept), inlined,
    /// lowered and verified: the inlining budget and the module's size
    /// after them. The caller unstages them on an error.
    fn stage_functions(
        &mut self,
        funcs: Vec<ir::Function>,
        n: usize,
    ) -> Result<(usize, usize), AdError> {
        let inlining = self.policy != Policy::NONE;
        let added = funcs.len();
        let given = if inlining {
            &mut self.original
        } else {
            Arc::make_mut(&mut self.module)
        };
        given.funcs.extend(funcs);
        let given = if inlining {
            &self.original
        } else {
            &self.module
        };
        (n..n + added).try_for_each(|i| {
            vm::lower::check_function(given, &given.funcs[i])
                .map_err(|e| AdError::InvalidModule(e.to_string()))
        })?;
        let grown: usize = given.funcs[n..].iter().map(vm::inline::size).sum();
        let (mut budget, total) = (self.budget, self.total_size + grown);
        if inlining {
            // The module's budget is the larger of the policy's and its
            // size: what a larger module adds to it.
            let growth = self.policy.max_unit_growth;
            budget += total.max(growth) - self.total_size.max(growth);
            for i in n..n + added {
                let mut f = vm::inline::inline_appended(
                    &self.original,
                    FuncId(i as u32),
                    &self.policy,
                    &mut budget,
                );
                vm::licm::hoist(&mut f);
                Arc::make_mut(&mut self.module).funcs.push(f);
            }
        }
        // Derived functions follow the user functions in the program.
        Arc::make_mut(&mut self.program).truncate(n);
        for i in n..n + added {
            let bc = vm::lower::lower_function(&self.module.funcs[i])
                .map_err(|e| AdError::InvalidModule(format!("lowering: {e}")))?;
            Arc::make_mut(&mut self.program).push(bc);
        }
        for i in n..n + added {
            vm::verify::verify_function(Arc::make_mut(&mut self.program), FuncId(i as u32))
                .map_err(|errs| {
                    let text: Vec<String> = errs.iter().take(8).map(|e| e.to_string()).collect();
                    AdError::InvalidModule(format!(
                        "bytecode failed verification: {}",
                        text.join("; ")
                    ))
                })?;
        }
        Ok((budget, total))
    }

    /// Drop what [`Engine::stage_functions`] added past the first `n`
    /// functions.
    fn unstage_functions(&mut self, n: usize) {
        if self.policy != Policy::NONE {
            self.original.funcs.truncate(n);
        }
        Arc::make_mut(&mut self.module).funcs.truncate(n);
        Arc::make_mut(&mut self.program).truncate(n);
        self.derived.reset(n);
    }
}
