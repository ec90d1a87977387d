//! Hessian-vector products and Hessians by forward-over-reverse: the
//! forward-mode transform ([`crate::forward::derived_tangent`]) applied to
//! the forward function and the pullback that reverse mode built. See
//! `docs/ad.md`, "Hessian-vector products".
//!
//! One product runs two generated functions on the VM, in AD mode (every
//! array, tangent arrays included, has a shadow):
//!
//! 1. `f.fwd.jvp(args, tangents)`: the forward function and its tangent
//!    along the direction; each value it pushes for the pullback is
//!    followed on the comms stack by its tangent.
//! 2. `f.rev.jvp(1, 0)`: the pullback with seed 1 and its tangent with
//!    seed tangent 0; it pops each tangent before its value and returns
//!    the gradient's f64 entries and then their tangents, the
//!    Hessian-vector product. An array parameter's gradient is its shadow,
//!    its product the shadow of its tangent array.

use crate::{check_mask, scalar_bits, AdError, Engine, Kind};
use vm::ir::{FuncId, RetType};
use vm::{Type, Value};

/// Value, gradient and Hessian-vector product of one call ([`Engine::hvp`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hvp {
    /// The function's value.
    pub value: f64,
    /// As [`crate::Gradient::grad`].
    pub grad: Vec<Option<Value>>,
    /// Shaped like `grad`: `H·dir` restricted to the parameters
    /// differentiated with respect to (`None` for the others).
    pub hvp: Vec<Option<Value>>,
}

/// Value, gradient and dense Hessian of one call ([`Engine::hessian`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hessian {
    /// The function's value.
    pub value: f64,
    /// As [`crate::Gradient::grad`].
    pub grad: Vec<Option<Value>>,
    /// Rows and columns over the flattened inputs: every parameter
    /// differentiated with respect to, in order, an `f64` one entry, an
    /// `f64[]` one entry per element. Row `k` is the product with the
    /// `k`-th unit direction.
    pub hessian: Vec<Vec<f64>>,
}

/// A Hessian-vector product of a function of scalar parameters prepared by
/// [`Engine::prepare_hvp`]: [`Engine::hvp_prepared`] then only checks each
/// argument's kind and runs the two tangent functions, allocating nothing
/// after its first call. Valid for the engine that made it only.
#[derive(Clone, Debug)]
pub struct PreparedHvp {
    engine: u64,
    f: FuncId,
    fwd: FuncId,
    rev: FuncId,
    types: Box<[Type]>,
    wrt: Box<[bool]>,
}

impl PreparedHvp {
    /// How many arguments (and direction, gradient and product entries) a
    /// call takes.
    pub fn arity(&self) -> usize {
        self.types.len()
    }

    /// The two functions that run: the tangents of the forward function
    /// and of the pullback.
    pub fn functions(&self) -> (FuncId, FuncId) {
        (self.fwd, self.rev)
    }
}

/// Seed 1 and seed tangent 0: the pullback's arguments.
const SEEDS: [u64; 2] = [0x3ff0_0000_0000_0000, 0];

impl Engine {
    /// Value, gradient and Hessian-vector product `H·dir` of `f` at `args`,
    /// with respect to every `f64` and `f64[]` parameter. `dir` is shaped
    /// as for [`Engine::jvp`] (`None`: zero).
    pub fn hvp(
        &mut self,
        f: FuncId,
        args: &[Value],
        dir: &[Option<Value>],
    ) -> Result<Hvp, AdError> {
        let mut out = Hvp::default();
        self.hvp_into(f, args, dir, &mut out)?;
        Ok(out)
    }

    /// Like [`Engine::hvp`], reusing `out`'s buffers (no heap allocation
    /// after a warm-up call with the same shapes).
    pub fn hvp_into(
        &mut self,
        f: FuncId,
        args: &[Value],
        dir: &[Option<Value>],
        out: &mut Hvp,
    ) -> Result<(), AdError> {
        let wrt = self.take_full_mask(f)?;
        let result = self.hvp_wrt_into(f, args, dir, &wrt, out);
        self.full_masks[f.index()] = wrt;
        result
    }

    /// [`Engine::hvp`] with respect to the parameters selected by `wrt`:
    /// the others are constants (their directions ignored, their gradient
    /// and product entries `None`).
    pub fn hvp_wrt(
        &mut self,
        f: FuncId,
        args: &[Value],
        dir: &[Option<Value>],
        wrt: &[bool],
    ) -> Result<Hvp, AdError> {
        let mut out = Hvp::default();
        self.hvp_wrt_into(f, args, dir, wrt, &mut out)?;
        Ok(out)
    }

    /// Like [`Engine::hvp_wrt`], reusing `out`'s buffers: after a warm-up
    /// call with the same shapes and mask this performs no heap allocation.
    ///
    /// The call runs in a compile section, as [`Engine::grad_wrt_into`]'s.
    pub fn hvp_wrt_into(
        &mut self,
        f: FuncId,
        args: &[Value],
        dir: &[Option<Value>],
        wrt: &[bool],
        out: &mut Hvp,
    ) -> Result<(), AdError> {
        crate::error::section(|| {
            let arrays = self.raw_args(f, args)?;
            let (fwd, rev) = self.derive_hvp(f, wrt)?;
            self.check_dir(f, args, dir, wrt)?;
            self.vm.begin(true);
            self.place_arrays(args, arrays)?;
            // Every f64 and array parameter has a tangent.
            self.push_tangent_args(args, dir, wrt, true)?;
            out.value = self.forward_reverse_tangent(f, fwd, rev)?;
            self.read_gradient(args, wrt, &mut out.grad)?;
            self.read_hvp(args, wrt, &mut out.hvp)
        })
    }

    /// Run the tangents of the forward function (on `self.raw`) and of the
    /// pullback; both stacks must end empty. The value of `f`.
    fn forward_reverse_tangent(
        &mut self,
        f: FuncId,
        fwd: FuncId,
        rev: FuncId,
    ) -> Result<f64, AdError> {
        self.vm.call_raw(&self.program, fwd, &self.raw)?;
        let value = f64::from_bits(self.vm.results().first().copied().unwrap_or(0));
        self.vm.call_raw(&self.program, rev, &SEEDS)?;
        if self.vm.comms_len() != 0 || self.vm.blk_len() != 0 {
            return Err(AdError::Internal(format!(
                "stacks not empty after the tangent of the pullback of @{} ({} comms, {} block ids)",
                self.module.func(f).name,
                self.vm.comms_len(),
                self.vm.blk_len()
            )));
        }
        Ok(value)
    }

    /// After the tangent of a pullback: one product entry per argument,
    /// from its second half of results (f64 parameters) and the shadows of
    /// the tangent arrays (`self.tangent_handles`).
    fn read_hvp(
        &self,
        args: &[Value],
        wrt: &[bool],
        hvp: &mut Vec<Option<Value>>,
    ) -> Result<(), AdError> {
        let half = self.vm.results().len() / 2;
        self.read_entries(half, &self.tangent_handles, args, wrt, hvp)
    }

    /// The dense Hessian of `f` at `args` over every `f64` and `f64[]`
    /// parameter's entries: one Hessian-vector product per entry.
    pub fn hessian(&mut self, f: FuncId, args: &[Value]) -> Result<Hessian, AdError> {
        let wrt = self.take_full_mask(f)?;
        let result = self.hessian_wrt(f, args, &wrt);
        self.full_masks[f.index()] = wrt;
        result
    }

    /// [`Engine::hessian`] over the entries of the parameters selected by
    /// `wrt`.
    pub fn hessian_wrt(
        &mut self,
        f: FuncId,
        args: &[Value],
        wrt: &[bool],
    ) -> Result<Hessian, AdError> {
        // The flattened inputs: (parameter, element) per entry.
        let mut entries = Vec::new();
        for (i, (a, w)) in args.iter().zip(wrt).enumerate() {
            match (a, *w) {
                (Value::F64(_), true) => entries.push((i, None)),
                (Value::Arr(xs), true) => entries.extend((0..xs.len()).map(|k| (i, Some(k)))),
                _ => {}
            }
        }
        let mut dir: Vec<Option<Value>> = vec![None; args.len()];
        let mut out = Hvp::default();
        let mut h = Hessian::default();
        if entries.is_empty() {
            self.hvp_wrt_into(f, args, &dir, wrt, &mut out)?;
        }
        for &(i, k) in &entries {
            for d in dir.iter_mut() {
                *d = None;
            }
            dir[i] = Some(match (k, &args[i]) {
                (Some(k), Value::Arr(xs)) => {
                    let mut e = vec![0.0; xs.len()];
                    e[k] = 1.0;
                    Value::Arr(e)
                }
                _ => Value::F64(1.0),
            });
            self.hvp_wrt_into(f, args, &dir, wrt, &mut out)?;
            let mut row = Vec::with_capacity(entries.len());
            for v in out.hvp.iter().flatten() {
                match v {
                    Value::F64(x) => row.push(*x),
                    Value::Arr(xs) => row.extend_from_slice(xs),
                    Value::I64(_) | Value::Bool(_) => {}
                }
            }
            h.hessian.push(row);
        }
        h.value = out.value;
        h.grad = out.grad;
        Ok(h)
    }

    /// Prepare Hessian-vector products of `f`, whose parameters must be
    /// scalars and whose result must be `f64`, with respect to the
    /// parameters selected by `wrt`: builds the functions that run.
    pub fn prepare_hvp(&mut self, f: FuncId, wrt: &[bool]) -> Result<PreparedHvp, AdError> {
        let func = self.scalar_params_only(f, "hvp", "hvp_wrt")?;
        let types = func.params.iter().map(|p| func.ty(*p)).collect();
        let (fwd, rev) = self.derive_hvp(f, wrt)?;
        Ok(PreparedHvp {
            engine: self.id,
            f,
            fwd,
            rev,
            types,
            wrt: wrt.into(),
        })
    }

    /// Value, gradient (into `grad`) and Hessian-vector product along
    /// `dir` (into `hvp`) of a [`PreparedHvp`] function at `args`: one
    /// entry per parameter each, 0 for parameters not selected and for
    /// `i64` and `bool` ones. No allocation after the first call.
    pub fn hvp_prepared(
        &mut self,
        p: &PreparedHvp,
        args: &[Value],
        dir: &[f64],
        grad: &mut [f64],
        hvp: &mut [f64],
    ) -> Result<f64, AdError> {
        let n = p.types.len();
        if p.engine != self.id
            || args.len() != n
            || dir.len() != n
            || grad.len() != n
            || hvp.len() != n
        {
            return Err(self.prepared_hvp_refused(p, args, [dir.len(), grad.len(), hvp.len()]));
        }
        self.raw.clear();
        for (a, t) in args.iter().zip(&p.types) {
            match scalar_bits(a, *t) {
                Some(bits) => self.raw.push(bits),
                None => {
                    return Err(self.prepared_hvp_refused(p, args, [n; 3]));
                }
            }
        }
        for ((d, t), w) in dir.iter().zip(&p.types).zip(&p.wrt) {
            if *t == Type::F64 {
                self.raw.push(if *w { d.to_bits() } else { 0 });
            }
        }
        self.vm.begin(true);
        let value = self.forward_reverse_tangent(p.f, p.fwd, p.rev)?;
        let results = self.vm.results();
        let half = results.len() / 2;
        let mut fi = 0;
        for (((g, h), t), selected) in grad
            .iter_mut()
            .zip(hvp.iter_mut())
            .zip(&p.types)
            .zip(&p.wrt)
        {
            *g = 0.0;
            *h = 0.0;
            if *t == Type::F64 {
                if *selected {
                    *g = f64::from_bits(results.get(fi).copied().unwrap_or(0));
                    *h = f64::from_bits(results.get(half + fi).copied().unwrap_or(0));
                }
                fi += 1;
            }
        }
        Ok(value)
    }

    /// Why [`Engine::hvp_prepared`] refused a call.
    #[cold]
    fn prepared_hvp_refused(&self, p: &PreparedHvp, args: &[Value], lens: [usize; 3]) -> AdError {
        let n = p.types.len();
        if p.engine != self.id {
            return AdError::Args("the hvp was prepared by another engine".to_string());
        }
        if args.len() != n {
            return AdError::Args(format!(
                "{} argument(s) for a function of {n} parameter(s)",
                args.len()
            ));
        }
        for (len, what) in lens
            .iter()
            .zip(["direction", "gradient buffer", "hvp buffer"])
        {
            if *len != n {
                return AdError::Args(format!("a {what} of {len} for {n} parameter(s)"));
            }
        }
        match self.arg_error(p.f, args) {
            Err(e) => e,
            Ok(()) => AdError::Internal("a prepared hvp refused for no reason".to_string()),
        }
    }

    /// The tangents of `f`'s forward function and pullback with respect to
    /// `wrt` (building the pair, and then the tangents of every derived
    /// function they call, on first use): the functions a Hessian-vector
    /// product runs, by bytecode id.
    pub fn derive_hvp(&mut self, f: FuncId, wrt: &[bool]) -> Result<(FuncId, FuncId), AdError> {
        let d = match self.built(f, wrt) {
            Some(d) => d,
            None => self.derive_wrt(f, wrt)?,
        };
        if let (Some(a), Some(b)) = (
            self.derived.tangent_of(d.fwd),
            self.derived.tangent_of(d.rev),
        ) {
            return Ok((a, b));
        }
        let func = self.module.func(f);
        check_mask(func, wrt)?;
        if func.ret != RetType::One(Type::F64) {
            return Err(AdError::NotDifferentiable(format!(
                "@{} does not return f64",
                func.name
            )));
        }
        let first_new = self.program.len();
        let result = crate::error::section(|| self.derive_tangents(f, &[d.fwd, d.rev]));
        if result.is_err() {
            self.rollback(first_new);
        }
        result?;
        match (
            self.derived.tangent_of(d.fwd),
            self.derived.tangent_of(d.rev),
        ) {
            (Some(a), Some(b)) => {
                // Run one after the other, as the pair they are tangents of.
                self.vm.native_pair(a, b);
                Ok((a, b))
            }
            _ => Err(AdError::Internal("lost tangent ids".into())),
        }
    }

    /// Build the tangent function of each derived function of `roots` (of
    /// user function `f`) and of every derived function they call, lowered
    /// and verified.
    fn derive_tangents(&mut self, f: FuncId, roots: &[FuncId]) -> Result<(), AdError> {
        let first_new = self.program.len();
        let mode = Tangents {
            f,
            first_derived: self.module.funcs.len(),
        };
        let mut work = Vec::new();
        for g in roots {
            if self.derived.tangent_of(*g).is_some() {
                continue;
            }
            let id = FuncId(self.program.len() as u32);
            self.derived.set_tangent_of(*g, id);
            crate::driver::Mode::placeholders(&mode, self, &(*g, id));
            work.push((*g, id));
        }
        self.drive(&mode, work, first_new)
    }

    /// The bytecode of `f`'s Hessian-vector products with respect to `wrt`
    /// (the tangents of the forward function and of the pullback, and of
    /// every derived function they call), as text.
    pub fn disasm_hvp_wrt(&mut self, f: FuncId, wrt: &[bool]) -> Result<String, AdError> {
        let (fwd, rev) = self.derive_hvp(f, wrt)?;
        let mut out = String::new();
        let mut seen = Vec::new();
        for root in [fwd, rev] {
            for g in self.reachable_through_calls([root]) {
                if seen.contains(&g) {
                    continue;
                }
                seen.push(g);
                out.push_str(&self.rule_note(g));
                out.push_str(&vm::disasm::function_in(
                    self.program.func(g),
                    Some(&self.program),
                ));
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// [`Engine::disasm_hvp_wrt`] with respect to every `f64` and `f64[]`
    /// parameter.
    pub fn disasm_hvp(&mut self, f: FuncId) -> Result<String, AdError> {
        let wrt = self.take_full_mask(f)?;
        let result = self.disasm_hvp_wrt(f, &wrt);
        self.full_masks[f.index()] = wrt;
        result
    }
}

/// The tangents of derived functions (Hessian-vector products), as
/// [`crate::driver`] runs them: a unit is a derived function, with the id
/// of its tangent.
struct Tangents {
    /// The user function of the request (budget errors name it).
    f: FuncId,
    /// The first bytecode id of derived code (below it, user functions).
    first_derived: usize,
}

impl crate::driver::Mode for Tangents {
    type Key = (FuncId, FuncId);
    const WHAT: &'static str = "Hessian-vector";

    fn build(
        &self,
        e: &mut Engine,
        key: &Self::Key,
        units: &mut crate::compile_work::Work,
        pending: &mut Vec<Self::Key>,
    ) -> Result<Vec<(FuncId, vm::ir::Function, FuncId)>, AdError> {
        let (g, id) = *key;
        // The compile budget of the tangents (the pair they are of was
        // charged when it was built): the derived function each transform
        // reads, the tangent it writes, and a pullback's clean-up.
        let module = std::sync::Arc::clone(&e.module);
        let f = self.f;
        let over = |er| crate::derive::too_much_work(&module, f, er);
        let ir = e
            .derived_ir(g)
            .cloned()
            .ok_or_else(|| AdError::Internal(format!("no IR for derived function {g}")))?;
        units.charge_function(&ir).map_err(over)?;
        // A user call has a tangent (see `Engine::user_call_tangents`).
        let user_tangents = e.user_call_tangents(&ir)?;
        let first_derived = self.first_derived;
        let func = {
            let program_len = &mut e.program.len();
            let table = &mut e.derived;
            let mut ids = |h: FuncId| {
                if h.index() < first_derived {
                    return user_tangents.iter().find(|(g, _)| *g == h).map(|(_, t)| *t);
                }
                if let Some(t) = table.tangent_of(h) {
                    return Some(t);
                }
                let t = FuncId(*program_len as u32);
                *program_len += 1;
                table.set_tangent_of(h, t);
                pending.push((h, t));
                Some(t)
            };
            crate::forward::derived_tangent(&ir, &mut ids)
        };
        let mut func =
            func.map_err(|er| AdError::Internal(format!("forward mode of @{}: {er}", ir.name)))?;
        units.charge_function(&func).map_err(over)?;
        if matches!(ir.ret, RetType::Many(_)) {
            // A pullback: clean it up as reverse mode does.
            crate::optimize::reverse_within(&mut func, units).map_err(over)?;
        } else {
            // A forward function's tangent: it computes again what the
            // forward function computes for the reverse sweep.
            crate::optimize::tangent(&mut func, ir.values.len());
        }
        Ok(vec![(id, func, f)])
    }

    fn placeholders(&self, e: &mut Engine, key: &Self::Key) {
        let h = key.0;
        let name = format!("{}.jvp", e.program.func(h).name);
        let of = e.derived.kind(h).map_or(self.f, |(_, of)| of);
        e.push_named_placeholder(name, Kind::Hvp(h), of);
        e.set_last_tangent_origin(h);
    }
}
