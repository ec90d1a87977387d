//! Deriving: building (lazily, callees included, so that recursion works) the
//! forward and reverse functions of a function with respect to a selection of
//! parameters, the placeholders that reserve their ids, and the rollback of
//! a failed derivation. The listings of derived code are `listings.rs`.

use crate::*;

impl Engine {
    /// The derived pair of `f` with respect to `wrt` if it is built and `f`
    /// is a gradient target: what [`Engine::derive_wrt`] returns then.
    #[inline]
    pub(crate) fn built(&self, f: FuncId, wrt: &[bool]) -> Option<Derived> {
        let func = self.module.funcs.get(f.index())?;
        if func.ret != RetType::One(Type::F64) {
            return None;
        }
        self.derived.pair(f, wrt)
    }

    /// The forward and reverse functions of `f` with respect to every `f64`
    /// and `f64[]` parameter, building them (and those of every function
    /// they call through) on first use.
    pub fn derive(&mut self, f: FuncId) -> Result<Derived, AdError> {
        let wrt = self.take_full_mask(f)?;
        let result = self.derive_wrt(f, &wrt);
        self.full_masks[f.index()] = wrt;
        result
    }

    /// The forward and reverse functions of `f` with respect to the
    /// parameters selected by `wrt` (one flag per parameter), building them
    /// on first use. Callees are derived with respect to the arguments that
    /// are active at each call.
    pub fn derive_wrt(&mut self, f: FuncId, wrt: &[bool]) -> Result<Derived, AdError> {
        // Only valid masks are ever cached, so a hit needs no check. (A
        // function that returns no f64 may have been derived as a callee,
        // but is no gradient target: `built` checks that before the cache.)
        if let Some(d) = self.built(f, wrt) {
            return Ok(d);
        }
        let func = self.user_func(f)?;
        if func.ret != RetType::One(Type::F64) {
            return Err(AdError::NotDifferentiable(format!(
                "@{} returns {}, not f64",
                func.name,
                ret_text(&func.ret)
            )));
        }
        self.derive_any(f, wrt)
    }

    /// [`Engine::derive_wrt`] for a function of any result (an `f64[]`
    /// result's cotangent is its shadow array, see [`Engine::vjp_wrt`]).
    pub(crate) fn derive_any(&mut self, f: FuncId, wrt: &[bool]) -> Result<Derived, AdError> {
        if let Some(d) = self.derived.pair(f, wrt) {
            return Ok(d);
        }
        let func = self.user_func(f)?;
        check_mask(func, wrt)?;
        let first_new = self.program.len();
        // A compile section: an allocation failure is an error, and rolls
        // back what was derived.
        let result = crate::error::section(|| self.derive_all(f, wrt));
        match &result {
            // The pullback is called right after the forward function: a
            // native tier may compile the two together.
            Ok(d) => self.vm.native_pair(d.fwd, d.rev),
            Err(_) => self.rollback(first_new),
        }
        result
    }

    /// Forget every derived function from bytecode id `first_new` on: what
    /// a failed derivation leaves behind.
    pub(crate) fn rollback(&mut self, first_new: usize) {
        Arc::make_mut(&mut self.program).truncate(first_new);
        self.derived.truncate(first_new);
    }

    pub(crate) fn derive_all(&mut self, f: FuncId, wrt: &[bool]) -> Result<Derived, AdError> {
        let first_new = self.program.len();
        let mut work = Vec::new();
        let root = self.reserve(f, wrt.into(), &mut work);
        self.drive(&Reverse { f }, work, first_new)?;
        Ok(root)
    }

    /// Lower `func`, derived from user function `of`, into the slot `id`
    /// reserved for it (taking the slot's name), and keep its IR for
    /// disassembly and later derivation.
    pub(crate) fn install_derived(
        &mut self,
        id: FuncId,
        mut func: vm::ir::Function,
        of: FuncId,
    ) -> Result<(), AdError> {
        func.name = self.program.func(id).name.clone();
        let bc = vm::lower::lower_function(&func).map_err(|e| match e {
            // A limit of the VM a large user function can reach:
            // tell the user, it is no bug.
            vm::lower::LowerError::TooManyRegisters { needed, .. } => AdError::TooLarge {
                func: self.module.func(of).name.clone(),
                derived: func.name.clone(),
                registers: needed,
            },
            e => AdError::Internal(format!("lowering {}: {e}", func.name)),
        })?;
        Arc::make_mut(&mut self.program)
            .set(id, bc)
            .map_err(|e| AdError::Internal(e.to_string()))?;
        if !self.derived.install(id, func) {
            return Err(AdError::Internal(format!(
                "no slot for derived function {id}"
            )));
        }
        Ok(())
    }

    /// Verify every function from `first_new` on (`what` names the kind
    /// of code in the message): derived code that fails is a bug of advm.
    pub(crate) fn verify_new(&mut self, first_new: usize, what: &str) -> Result<(), AdError> {
        for i in first_new..self.program.len() {
            vm::verify::verify_function(Arc::make_mut(&mut self.program), FuncId(i as u32))
                .map_err(|errs| {
                    let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                    AdError::Internal(format!(
                        "{what} code failed verification: {}",
                        text.join("; ")
                    ))
                })?;
        }
        Ok(())
    }

    /// Reserve ids for `f`'s derived pair with respect to `wrt` and queue it.
    pub(crate) fn reserve(
        &mut self,
        f: FuncId,
        wrt: Box<[bool]>,
        work: &mut Vec<(FuncId, Box<[bool]>)>,
    ) -> Derived {
        let n = self.program.len() as u32;
        let d = Derived {
            fwd: FuncId(n),
            rev: FuncId(n + 1),
        };
        self.derived.add_pair(f, wrt.clone(), d);
        self.push_placeholders(f, &wrt);
        work.push((f, wrt));
        d
    }

    /// Empty functions standing for `f`'s derived pair until it is built,
    /// named `f.fwd` / `f.rev`, or `f.fwd.wrt.a.b` / `f.rev.wrt.a.b` when
    /// only parameters `a` and `b` are selected; followed by `'` (which no
    /// user function's name contains) as often as needed to differ from a
    /// user function of that name, so that listings and trap messages
    /// name one function each.
    pub(crate) fn push_placeholders(&mut self, f: FuncId, wrt: &[bool]) {
        for part in ["fwd", "rev"] {
            self.push_placeholder(f, wrt, part);
        }
    }

    /// One empty function standing for a derived function of `f` (`part`
    /// is `fwd`, `rev` or `jvp`), named as [`Engine::push_placeholders`]
    /// says.
    pub(crate) fn push_placeholder(&mut self, f: FuncId, wrt: &[bool], part: &str) {
        let func = self.module.func(f);
        // (Not `full_masks`, which a caller may have taken out for the call.)
        let full = *analysis::all_params(func) == *wrt;
        let suffix = if full {
            String::new()
        } else {
            let names: Vec<String> = func
                .params
                .iter()
                .zip(wrt)
                .enumerate()
                .filter(|(_, (_, w))| **w)
                .map(|(i, (p, _))| {
                    func.values[p.index()]
                        .name
                        .clone()
                        .unwrap_or_else(|| i.to_string())
                })
                .collect();
            format!(".wrt.{}", names.join("."))
        };
        let (kind, code) = match part {
            "fwd" => (Kind::Fwd, "gradient's forward sweep"),
            "rev" => (Kind::Rev, "gradient's reverse sweep"),
            _ => (Kind::Tangent, "tangent code"),
        };
        self.push_named_placeholder(format!("{}.{part}{suffix}", func.name), kind, f);
        self.set_last_origin(f, code.to_string());
    }

    /// Record that the function pushed last was derived from user function
    /// `of` and computes `code` (for trap messages, see
    /// [`vm::bytecode::Origin`]).
    pub(crate) fn set_last_origin(&mut self, of: FuncId, code: String) {
        let id = FuncId(self.program.len().saturating_sub(1) as u32);
        Arc::make_mut(&mut self.program).set_origin(id, vm::bytecode::Origin { of, code });
    }

    /// Record that the function pushed last is the tangent function of
    /// derived function `g` (for trap messages).
    pub(crate) fn set_last_tangent_origin(&mut self, g: FuncId) {
        if let Some(o) = self.program.origin(g).cloned() {
            self.set_last_origin(o.of, format!("tangent of the {}", o.code));
        }
    }

    /// One empty function named `name` (followed by `'` as often as needed
    /// to differ from a user function's name) standing for a derived
    /// function of kind `kind`, derived from user function `of`, until it
    /// is built.
    pub(crate) fn push_named_placeholder(&mut self, mut name: String, kind: Kind, of: FuncId) {
        while self.derived_like.contains(&name) {
            name.push('\'');
        }
        let placeholder = vm::bytecode::Function {
            name: name.clone(),
            param_types: Vec::new(),
            ret: RetType::Many(Vec::new()),
            reg_types: Vec::new(),
            consts: Vec::new(),
            code: Vec::new(),
            sites: Vec::new(),
            tables: Vec::new(),
            lists: Vec::new(),
            blocks: Vec::new(),
            locs: Vec::new(),
            reg_names: Vec::new(),
        };
        Arc::make_mut(&mut self.program).push(placeholder);
        self.derived.push(name, kind, of);
    }
}

/// The error of a [`crate::transform::Refusal`] met deriving `g` for a
/// request on `root`.
fn refusal(
    module: &vm::ir::Module,
    root: FuncId,
    g: FuncId,
    r: crate::transform::Refusal,
) -> AdError {
    match r {
        crate::transform::Refusal::NoRule(NoRule(op)) => AdError::NotDifferentiable(format!(
            "@{} contains `{}`, which has no reverse-mode rule: only the AD stage or the \
             lowering writes it",
            module.func(g).name,
            op.mnemonic()
        )),
        crate::transform::Refusal::Work(e) => too_much_work(module, root, e),
    }
}

/// The compile budget ran out building derived code for a request on
/// `root`.
pub(crate) fn too_much_work(
    module: &vm::ir::Module,
    root: FuncId,
    e: crate::compile_work::Exceeded,
) -> AdError {
    AdError::TooMuchWork {
        func: module.func(root).name.clone(),
        used: e.used,
        limit: e.limit,
    }
}

impl Engine {
    /// The work units of inlining user function `g`'s callees into it
    /// (done when the engine was built), charged to each derivation that
    /// reads `g`: its size as written and as inlined (the inliner reads
    /// the one and writes the other). Nothing without inlining, or when
    /// nothing was inlined into `g`.
    pub(crate) fn inline_work(&self, g: FuncId) -> u64 {
        match self.original.funcs.get(g.index()) {
            Some(written) => {
                let inlined = self.module.func(g);
                if written.blocks.len() == inlined.blocks.len()
                    && written.values.len() == inlined.values.len()
                {
                    0
                } else {
                    crate::compile_work::size(written) + crate::compile_work::size(inlined)
                }
            }
            None => 0,
        }
    }
}

/// Reverse mode, as [`crate::driver`] runs it: a unit is a user function
/// and a parameter mask, its functions the forward and reverse pair.
pub(crate) struct Reverse {
    /// The user function of the request (budget errors name it).
    pub(crate) f: FuncId,
}

impl crate::driver::Mode for Reverse {
    type Key = (FuncId, Box<[bool]>);
    const WHAT: &'static str = "derived";

    fn build(
        &self,
        e: &mut Engine,
        key: &Self::Key,
        units: &mut crate::compile_work::Work,
        pending: &mut Vec<Self::Key>,
    ) -> Result<Vec<(FuncId, vm::ir::Function, FuncId)>, AdError> {
        let (g, gw) = (key.0, &key.1);
        let f = self.f;
        let inline_units = e.inline_work(g);
        let (fwd, rev) = {
            let program_len = &mut e.program.len();
            let derived = &mut e.derived;
            let mut ids = |h: FuncId, hw: Vec<bool>| {
                if let Some(d) = derived.pair(h, &hw) {
                    return d;
                }
                let d = Derived {
                    fwd: FuncId(*program_len as u32),
                    rev: FuncId(*program_len as u32 + 1),
                };
                *program_len += 2;
                let hw = hw.into_boxed_slice();
                derived.add_pair(h, hw.clone(), d);
                pending.push((h, hw));
                d
            };
            match e.module.rule_of(g).copied() {
                // A custom rule: its transpose, from `f_jvp`'s own pair.
                Some(rule) => {
                    let jd = ids(rule.jvp, custom::jvp_mask(e.module.func(g), gw));
                    custom::rule_pair(&e.module, rule, gw, jd)
                }
                None => {
                    units
                        .charge(inline_units)
                        .map_err(|er| too_much_work(&e.module, f, er))?;
                    let opts = crate::transform::Options {
                        cleanup: e.cleanup,
                        if_convert: e.if_convert,
                    };
                    crate::transform::transform_within(&e.module, g, gw, &mut ids, opts, units)
                        .map_err(|r| refusal(&e.module, f, g, r))?
                }
            }
        };
        let d = e
            .derived
            .pair(g, gw)
            .ok_or_else(|| AdError::Internal("lost derived ids".into()))?;
        Ok(vec![(d.fwd, fwd, g), (d.rev, rev, g)])
    }

    fn placeholders(&self, e: &mut Engine, key: &Self::Key) {
        e.push_placeholders(key.0, &key.1);
    }
}
