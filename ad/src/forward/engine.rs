//! The forward-mode entry points of [`Engine`]: tangent functions built
//! lazily like derived pairs, and run on the same VM.

use super::jvp_function;
use crate::{check_mask, scalar_bits, AdError, Engine};
use vm::ir::{FuncId, RetType};
use vm::{Type, Value};

/// Value and tangent of one forward-mode call ([`Engine::jvp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Tangent {
    /// The result: `F64`, `Arr`, `I64` or `Bool` as the function returns.
    pub value: Value,
    /// The result's directional derivative: `F64` for an `f64` result,
    /// `Arr` (same length) for an `f64[]` result, `None` for `i64` and
    /// `bool` results.
    pub tangent: Option<Value>,
    /// One entry per parameter: for an `f64[]` parameter differentiated
    /// with respect to, the tangent of its contents after the call (its
    /// direction, if the function only reads it); `None` for every other
    /// parameter.
    pub arg_tangents: Vec<Option<Value>>,
}

impl Default for Tangent {
    fn default() -> Tangent {
        Tangent {
            value: Value::F64(0.0),
            tangent: None,
            arg_tangents: Vec::new(),
        }
    }
}

/// A forward-mode call of a function of scalar parameters returning `f64`,
/// prepared once by [`Engine::prepare_jvp`]: [`Engine::jvp_prepared`] then
/// only checks each argument's kind and runs the tangent function. Valid
/// for the engine that made it only.
#[derive(Clone, Debug)]
pub struct PreparedJvp {
    engine: u64,
    f: FuncId,
    jvp: FuncId,
    types: Box<[Type]>,
    wrt: Box<[bool]>,
}

impl PreparedJvp {
    /// How many arguments (and direction entries) a call takes.
    pub fn arity(&self) -> usize {
        self.types.len()
    }

    /// The tangent function that runs.
    pub fn function(&self) -> FuncId {
        self.jvp
    }
}

impl Engine {
    /// Value and directional derivative of `f` at `args` along `dir`, with
    /// respect to every `f64` and `f64[]` parameter. `dir` has one entry
    /// per parameter: `Some(F64)` for an `f64` parameter, `Some(Arr)` of
    /// the argument's length for an `f64[]` one, `None` for a zero
    /// direction (and for `i64` and `bool` parameters).
    pub fn jvp(
        &mut self,
        f: FuncId,
        args: &[Value],
        dir: &[Option<Value>],
    ) -> Result<Tangent, AdError> {
        let mut out = Tangent::default();
        let wrt = self.take_full_mask(f)?;
        let result = self.jvp_wrt_into(f, args, dir, &wrt, &mut out);
        self.full_masks[f.index()] = wrt;
        result.map(|()| out)
    }

    /// [`Engine::jvp`] with respect to the parameters selected by `wrt`
    /// (one flag per parameter, `f64` and `f64[]` ones only): the others
    /// are constants, their directions ignored.
    pub fn jvp_wrt(
        &mut self,
        f: FuncId,
        args: &[Value],
        dir: &[Option<Value>],
        wrt: &[bool],
    ) -> Result<Tangent, AdError> {
        let mut out = Tangent::default();
        self.jvp_wrt_into(f, args, dir, wrt, &mut out)?;
        Ok(out)
    }

    /// Like [`Engine::jvp_wrt`], reusing `out`'s buffers: after a warm-up
    /// call with the same shapes and mask this performs no heap allocation.
    ///
    /// The call runs in a compile section, as [`Engine::grad_wrt_into`]'s.
    pub fn jvp_wrt_into(
        &mut self,
        f: FuncId,
        args: &[Value],
        dir: &[Option<Value>],
        wrt: &[bool],
        out: &mut Tangent,
    ) -> Result<(), AdError> {
        crate::error::section(|| {
            let arrays = self.raw_args(f, args)?;
            let id = match self.derived.tangent_fn(f, wrt) {
                Some(id) => id,
                None => self.derive_jvp(f, wrt)?,
            };
            self.check_dir(f, args, dir, wrt)?;
            self.vm.begin(false);
            self.place_arrays(args, arrays)?;
            self.push_tangent_args(args, dir, wrt, false)?;
            self.vm.call_raw(&self.program, id, &self.raw)?;
            let ret = match &self.module.func(f).ret {
                RetType::One(t) => *t,
                RetType::Unit => Type::I64,
                RetType::Many(_) => {
                    return Err(AdError::Internal(
                        "a user function with several results".into(),
                    ))
                }
            };
            let results = self.vm.results();
            let (vbits, tbits) = (
                results.first().copied().unwrap_or(0),
                results.get(1).copied(),
            );
            set_value(&self.vm, &mut out.value, ret, vbits);
            match (ret.is_differentiable(), tbits) {
                (true, Some(bits)) => {
                    let slot = out.tangent.get_or_insert(Value::F64(0.0));
                    set_value(&self.vm, slot, ret, bits);
                }
                _ => out.tangent = None,
            }
            if out.arg_tangents.len() != args.len() {
                out.arg_tangents.resize(args.len(), None);
            }
            let mut th = self.tangent_handles.iter();
            for ((slot, a), w) in out.arg_tangents.iter_mut().zip(args).zip(wrt) {
                match (a, *w) {
                    (Value::Arr(_), true) => {
                        let h = th.next().copied().unwrap_or(0);
                        let v = slot.get_or_insert(Value::F64(0.0));
                        set_value(&self.vm, v, Type::Arr, h);
                    }
                    _ => *slot = None,
                }
            }
            Ok(())
        })
    }

    /// Check a direction against the arguments: one entry per parameter;
    /// for a selected parameter, `None` or a value of its type (an array
    /// of the argument's length).
    pub(crate) fn check_dir(
        &self,
        f: FuncId,
        args: &[Value],
        dir: &[Option<Value>],
        wrt: &[bool],
    ) -> Result<(), AdError> {
        let name = &self.module.func(f).name;
        if dir.len() != args.len() {
            return Err(AdError::Args(format!(
                "@{name} takes {} argument(s), but the direction has {} entries",
                args.len(),
                dir.len()
            )));
        }
        for (i, ((a, d), w)) in args.iter().zip(dir).zip(wrt).enumerate() {
            let ok = match (a, d) {
                (_, None) => true,
                _ if !*w => true,
                (Value::F64(_), Some(Value::F64(_))) => true,
                (Value::Arr(xs), Some(Value::Arr(ds))) => {
                    if xs.len() != ds.len() {
                        return Err(AdError::Args(format!(
                            "direction {} of @{name} has {} element(s), its argument {}",
                            i + 1,
                            ds.len(),
                            xs.len()
                        )));
                    }
                    true
                }
                _ => false,
            };
            if !ok {
                let want = match a {
                    Value::F64(_) => "a number",
                    Value::Arr(_) => "an array",
                    Value::I64(_) | Value::Bool(_) => "none",
                };
                return Err(AdError::Args(format!(
                    "direction {} of @{name} must be {want}",
                    i + 1
                )));
            }
        }
        Ok(())
    }

    /// Prepare forward mode for `f`, whose parameters must be scalars and
    /// whose result must be `f64`, with respect to the parameters selected
    /// by `wrt` (`f64` ones only): builds the tangent function.
    pub fn prepare_jvp(&mut self, f: FuncId, wrt: &[bool]) -> Result<PreparedJvp, AdError> {
        let func = self.scalar_params_only(f, "jvp", "jvp_wrt")?;
        if func.ret != RetType::One(Type::F64) {
            return Err(AdError::NotDifferentiable(format!(
                "@{} does not return f64; a prepared jvp needs an f64 result (use jvp_wrt)",
                func.name
            )));
        }
        let types = func.params.iter().map(|p| func.ty(*p)).collect();
        let jvp = self.derive_jvp(f, wrt)?;
        Ok(PreparedJvp {
            engine: self.id,
            f,
            jvp,
            types,
            wrt: wrt.into(),
        })
    }

    /// Value and directional derivative of a [`PreparedJvp`] function at
    /// `args` (one per parameter, of its type) along `dir` (one number per
    /// parameter; ignored for parameters not selected and for `i64` and
    /// `bool` ones). No allocation after the first call.
    pub fn jvp_prepared(
        &mut self,
        p: &PreparedJvp,
        args: &[Value],
        dir: &[f64],
    ) -> Result<(f64, f64), AdError> {
        let n = p.types.len();
        if p.engine != self.id || args.len() != n || dir.len() != n {
            return Err(self.prepared_jvp_refused(p, args, dir.len()));
        }
        self.raw.clear();
        for (a, t) in args.iter().zip(&p.types) {
            match scalar_bits(a, *t) {
                Some(bits) => self.raw.push(bits),
                None => return Err(self.prepared_jvp_refused(p, args, dir.len())),
            }
        }
        for ((d, t), w) in dir.iter().zip(&p.types).zip(&p.wrt) {
            if *w && *t == Type::F64 {
                self.raw.push(d.to_bits());
            }
        }
        self.vm.begin(false);
        self.vm.call_raw(&self.program, p.jvp, &self.raw)?;
        match self.vm.results() {
            [y, t] => Ok((f64::from_bits(*y), f64::from_bits(*t))),
            _ => Err(AdError::Internal(
                "a prepared tangent function returned other than two values".into(),
            )),
        }
    }

    /// Why [`Engine::jvp_prepared`] refused a call.
    #[cold]
    fn prepared_jvp_refused(&self, p: &PreparedJvp, args: &[Value], dir: usize) -> AdError {
        let n = p.types.len();
        if p.engine != self.id {
            return AdError::Args("the jvp was prepared by another engine".to_string());
        }
        if args.len() != n {
            return AdError::Args(format!(
                "{} argument(s) for a function of {n} parameter(s)",
                args.len()
            ));
        }
        if dir != n {
            return AdError::Args(format!("a direction of {dir} for {n} parameter(s)"));
        }
        match self.arg_error(p.f, args) {
            Err(e) => e,
            Ok(()) => AdError::Internal("a prepared jvp refused for no reason".to_string()),
        }
    }

    /// The tangent function of `f` with respect to the parameters selected
    /// by `wrt` (one flag per parameter, `f64` and `f64[]` ones only),
    /// building it, and those of the functions it calls through, on first
    /// use. Its bytecode id; its IR is [`Engine::derived_ir`].
    pub fn derive_jvp(&mut self, f: FuncId, wrt: &[bool]) -> Result<FuncId, AdError> {
        if let Some(id) = self.derived.tangent_fn(f, wrt) {
            return Ok(id);
        }
        let func = self.user_func(f)?;
        check_mask(func, wrt)?;
        let first_new = self.program.len();
        let result = crate::error::section(|| self.derive_jvp_all(f, wrt));
        if result.is_err() {
            self.rollback(first_new);
        }
        result
    }

    fn derive_jvp_all(&mut self, f: FuncId, wrt: &[bool]) -> Result<FuncId, AdError> {
        let first_new = self.program.len();
        let root = FuncId(first_new as u32);
        self.derived.add_tangent_fn(f, wrt.into(), root);
        self.push_placeholder(f, wrt, "jvp");
        self.drive(&Jvp { f }, vec![(f, wrt.into(), root)], first_new)?;
        Ok(root)
    }

    /// The tangent bytecode of `f` with respect to `wrt` and of every
    /// tangent function it calls, as text.
    pub fn disasm_jvp_wrt(&mut self, f: FuncId, wrt: &[bool]) -> Result<String, AdError> {
        let id = self.derive_jvp(f, wrt)?;
        let mut out = String::new();
        for g in self.reachable_through_calls([id]) {
            out.push_str(&self.rule_note(g));
            out.push_str(&vm::disasm::function_in(
                self.program.func(g),
                Some(&self.program),
            ));
            out.push('\n');
        }
        Ok(out)
    }

    /// [`Engine::disasm_jvp_wrt`] with respect to every `f64` and `f64[]`
    /// parameter.
    pub fn disasm_jvp(&mut self, f: FuncId) -> Result<String, AdError> {
        let wrt = self.take_full_mask(f)?;
        let result = self.disasm_jvp_wrt(f, &wrt);
        self.full_masks[f.index()] = wrt;
        result
    }
}

/// Write the result `bits` of type `ty` into `slot`, reusing its array's
/// buffer.
fn set_value(vm: &vm::interp::Vm, slot: &mut Value, ty: Type, bits: u64) {
    match ty {
        Type::F64 => *slot = Value::F64(f64::from_bits(bits)),
        Type::I64 => *slot = Value::I64(bits as i64),
        Type::Bool => *slot = Value::Bool(bits != 0),
        Type::Arr => {
            let data = vm.array(bits).unwrap_or(&[]);
            match slot {
                Value::Arr(v) => {
                    v.clear();
                    v.extend_from_slice(data);
                }
                _ => *slot = Value::Arr(data.to_vec()),
            }
        }
    }
}

/// Forward mode, as [`crate::driver`] runs it: a unit is a user function
/// and a parameter mask, with the id of its tangent function.
struct Jvp {
    /// The user function of the request (budget errors name it).
    f: FuncId,
}

impl crate::driver::Mode for Jvp {
    type Key = (FuncId, Box<[bool]>, FuncId);
    const WHAT: &'static str = "tangent";

    fn build(
        &self,
        e: &mut Engine,
        key: &Self::Key,
        units: &mut crate::compile_work::Work,
        pending: &mut Vec<Self::Key>,
    ) -> Result<Vec<(FuncId, vm::ir::Function, FuncId)>, AdError> {
        let (g, gw, id) = (key.0, &key.1, key.2);
        // The compile budget of this request: each function's inlining, the
        // primal the transform reads and the tangent function it writes
        // (which lowering and verification read).
        let module = std::sync::Arc::clone(&e.module);
        let f = self.f;
        let over = |er| crate::derive::too_much_work(&module, f, er);
        units
            .charge(e.inline_work(g))
            .and_then(|()| units.charge_function(e.module.func(g)))
            .map_err(over)?;
        let func = {
            let program_len = &mut e.program.len();
            let table = &mut e.derived;
            let mut ids = |h: FuncId, hw: Vec<bool>| {
                if let Some(id) = table.tangent_fn(h, &hw) {
                    return id;
                }
                let id = FuncId(*program_len as u32);
                *program_len += 1;
                let hw = hw.into_boxed_slice();
                table.add_tangent_fn(h, hw.clone(), id);
                pending.push((h, hw, id));
                id
            };
            match e.module.rule_of(g) {
                // A custom rule: the value from `g`, the tangent from its
                // rule function.
                Some(rule) => Ok(crate::custom::rule_tangent(&e.module, *rule, gw)),
                None => jvp_function(&e.module, g, gw, &mut ids).map(|mut func| {
                    // Tangent sums take their products in.
                    let first = e.module.func(g).values.len();
                    crate::optimize::fuse_tangent(&mut func, first);
                    func
                }),
            }
        };
        let func = func.map_err(|er| {
            AdError::Internal(format!("forward mode of @{}: {er}", e.module.func(g).name))
        })?;
        units.charge_function(&func).map_err(over)?;
        Ok(vec![(id, func, g)])
    }

    fn placeholders(&self, e: &mut Engine, key: &Self::Key) {
        e.push_placeholder(key.0, &key.1, "jvp");
    }
}
