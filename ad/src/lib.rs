//! # ad: automatic differentiation of advm bytecode (reverse and forward mode)
//!
//! Given a function of an [`ir::Module`], the AD stage builds a *forward*
//! function (the primal plus `comms.push` of what the pullback needs and
//! `blk.push` where a join's predecessor is ambiguous) and a *reverse*
//! function (pops those values, replays the path that was taken backwards,
//! and routes cotangents along the phi edges it came through). Both are
//! lowered to bytecode, checked by the same verifier as user code, and run by
//! the same VM. See [`mod@transform`] for the construction and `docs/ad.md` for
//! the design.
//!
//! Forward mode ([`mod@forward`]) builds one *tangent* function instead,
//! which computes the primal and its directional derivative in one pass,
//! with tangent values beside active values and tangent arrays beside
//! active arrays ([`Engine::jvp`], [`Engine::jacobian`]); [`Engine::vjp`]
//! runs the reverse pair with a given output cotangent. Applied to the
//! forward function and the pullback themselves
//! ([`forward::derived_tangent`]), the same transform gives Hessian-vector
//! products and Hessians by forward-over-reverse ([`Engine::hvp`],
//! [`Engine::hessian`]).
//!
//! [`Engine`] is the library entry point: it owns a module, its bytecode, a
//! VM and the cache of derived functions (built lazily, on the first gradient
//! that needs them, so recursion and mutual recursion work). Before
//! anything is lowered, [`Engine::new`] inlines small callees into their
//! callers ([`vm::inline`]; a small self-recursive function runs eight
//! levels per frame); [`Engine::with_inlining`] with [`Policy::NONE`] keeps
//! every call as written.
//!
//! ```
//! let src = "
//! fn @f(%x: f64, %y: f64) -> f64 {
//! entry:
//!     %p = mul %x, %y
//!     %s = sin %p
//!     ret %s
//! }";
//! let module = assembler::assemble(src, "f.adasm").expect("assembles");
//! let mut engine = ad::Engine::new(module).expect("verifies");
//! let f = engine.find("f").expect("defined");
//! let g = engine.grad(f, &[vm::Value::F64(1.0), vm::Value::F64(2.0)]).expect("runs");
//! assert_eq!(g.value, (2.0f64).sin());
//! assert_eq!(g.grad[0], Some(vm::Value::F64(2.0 * (2.0f64).cos())));
//! ```

pub mod analysis;
pub mod forward;
mod hvp;
mod modes;
pub mod optimize;
pub mod rules;
pub mod transform;

pub use forward::{PreparedJvp, Tangent};
pub use hvp::{Hessian, Hvp, PreparedHvp};
pub use modes::{Jacobian, Vjp};
use rules::reverse::NoRule;
use std::fmt;
use std::sync::{Arc, Mutex};
use transform::{transform, Derived};
use vm::bytecode::Program;
pub use vm::inline::Policy;
use vm::interp::{Trap, TrapKind, Vm};
use vm::ir::{self, FuncId, RetType};
use vm::{Type, Value};

/// Why a gradient (or a run) could not be computed.
#[derive(Debug)]
pub enum AdError {
    /// The program trapped (forward or reverse).
    Trap(Trap),
    /// The function cannot be differentiated (e.g. it does not return f64).
    NotDifferentiable(String),
    /// The arguments do not match the parameters.
    Args(String),
    /// A derived function of `func` (`derived`, its forward or reverse
    /// function) needs more registers than a bytecode frame holds. A limit
    /// of advm, not a bug: the reverse function keeps about two registers
    /// per active value, so a function with more than about 32 000 active
    /// values must be split into smaller ones.
    TooLarge {
        func: String,
        derived: String,
        registers: usize,
    },
    /// The module given to [`Engine::new`] is not valid: malformed IR
    /// (ids out of range, a call to no function, ...) or bytecode the
    /// verifier refuses. A library user's error; the assembler's modules
    /// are always valid.
    InvalidModule(String),
    /// A derived function failed lowering or verification: a bug in advm.
    Internal(String),
}

impl fmt::Display for AdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdError::Trap(t) => write!(f, "{t}"),
            AdError::NotDifferentiable(m) => write!(f, "cannot differentiate: {m}"),
            AdError::Args(m) => write!(f, "bad arguments: {m}"),
            AdError::TooLarge {
                func,
                derived,
                registers,
            } => write!(
                f,
                "cannot differentiate @{func}: its derived function @{derived} needs {registers} \
                 registers, more than a frame holds (at most {FRAME_REGISTERS}); split @{func} \
                 into smaller functions (the reverse function needs about two registers per \
                 active value)"
            ),
            AdError::InvalidModule(m) => write!(f, "invalid module: {m}"),
            AdError::Internal(m) => write!(f, "internal error (please report): {m}"),
        }
    }
}

impl std::error::Error for AdError {}

/// Registers one bytecode frame can hold (register operands are `u16`), as
/// `vm::lower::LowerError::TooManyRegisters` says.
pub const FRAME_REGISTERS: usize = u16::MAX as usize;

impl From<Trap> for AdError {
    fn from(t: Trap) -> AdError {
        AdError::Trap(t)
    }
}

/// Value and gradient of one call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gradient {
    pub value: f64,
    /// One entry per parameter: `Some(F64)` for f64, `Some(Arr)` for f64[],
    /// `None` for i64 and bool and for parameters not differentiated with
    /// respect to (see [`Engine::grad_wrt`]).
    pub grad: Vec<Option<Value>>,
}

/// Derived function pairs of each user function (indexed by its id), each
/// with the mask of parameters it differentiates with respect to. A vector,
/// not a hash map: the lookup is on every gradient call, and hashing the id
/// cost more than the rest of a small gradient's bookkeeping.
type DerivedCache = Vec<Vec<(Box<[bool]>, Derived)>>;

/// Tangent functions of each user function (indexed by its id), each with
/// its mask, like [`DerivedCache`].
type JvpCache = Vec<Vec<(Box<[bool]>, FuncId)>>;

/// A module, its bytecode, a VM and the derived functions built so far.
///
/// Cloning is cheap: a clone shares the module, the bytecode and the IR of
/// the derived functions (behind `Arc`s, copied on write: a clone that
/// derives a function the original had not built copies them then) and
/// gets a VM of its own, with the same limits and the same interrupt flag,
/// and buffers of its own. One clone per thread runs gradients in parallel
/// ([`Engine::grad_many`] does so); a [`Prepared`] gradient made before the
/// clone is valid for the clone too.
pub struct Engine {
    module: Arc<ir::Module>,
    program: Arc<Program>,
    /// Derived functions of each user function, once built, by the
    /// parameters they differentiate with respect to (one flag per
    /// parameter; usually one or two masks per function, so a list).
    derived: DerivedCache,
    /// Every `f64` and `f64[]` parameter of each user function selected.
    full_masks: Vec<Box<[bool]>>,
    /// IR of every derived function, indexed like `program.funcs` past the
    /// user functions (kept for printing and for pictures of the CFG).
    derived_ir: Arc<Vec<ir::Function>>,
    vm: Vm,
    /// Raw argument buffer, reused across calls.
    raw: Vec<u64>,
    handles: Vec<u64>,
    /// Tells this engine's [`Prepared`] gradients from another's.
    id: u64,
    /// The engines this one was cloned from (its parent, the parent's
    /// parent, ...), each with the length of the program it shared then:
    /// their [`Prepared`] gradients whose functions lie below that length
    /// are valid here too.
    lineage: Vec<(u64, usize)>,
    /// Names of the user functions that look like derived ones (`f.fwd`,
    /// `f.rev...`, `f.jvp...`), which a derived function's name must not
    /// repeat.
    derived_like: Arc<hashbrown::HashSet<String>>,
    /// Tangent (forward-mode) functions of each user function, once built,
    /// by the parameters they differentiate with respect to.
    jvps: JvpCache,
    /// Handles of the tangent arrays of the current forward-mode call.
    tangent_handles: Vec<u64>,
    /// Zeros, for the tangent array of an array parameter given no
    /// direction (kept to avoid an allocation per call).
    zeros: Vec<f64>,
    /// Whether reverse functions are cleaned up ([`optimize`]); see
    /// [`Engine::set_reverse_cleanup`].
    cleanup: bool,
    /// For [`Engine::add_functions`]: the module as given (before
    /// inlining; empty when `policy` is [`Policy::NONE`], `module` is it
    /// then), the inlining policy, what is left of the module's growth
    /// budget, and the total size of the given functions.
    original: ir::Module,
    policy: Policy,
    budget: usize,
    total_size: usize,
    /// User functions by name (the first of a name, as `Module::find`).
    by_name: hashbrown::HashMap<String, FuncId>,
    /// The tangent function of each derived function (forward function or
    /// pullback) built so far, by bytecode id: what Hessian-vector
    /// products run (see [`Engine::hvp`]).
    derived_tangents: hashbrown::HashMap<FuncId, FuncId>,
}

impl Clone for Engine {
    /// An engine sharing this one's module, bytecode and derived functions,
    /// with a VM of its own (same limits, same interrupt flag).
    fn clone(&self) -> Engine {
        let mut vm = Vm::new(self.vm.limits().clone());
        vm.set_interrupt_handle(self.vm.interrupt_handle());
        let mut lineage = self.lineage.clone();
        lineage.push((self.id, self.program.len()));
        Engine {
            module: Arc::clone(&self.module),
            program: Arc::clone(&self.program),
            derived: self.derived.clone(),
            full_masks: self.full_masks.clone(),
            derived_ir: Arc::clone(&self.derived_ir),
            vm,
            raw: Vec::new(),
            handles: Vec::new(),
            id: engine_id(),
            lineage,
            derived_like: Arc::clone(&self.derived_like),
            jvps: self.jvps.clone(),
            tangent_handles: Vec::new(),
            zeros: Vec::new(),
            cleanup: self.cleanup,
            original: self.original.clone(),
            policy: self.policy,
            budget: self.budget,
            total_size: self.total_size,
            by_name: self.by_name.clone(),
            derived_tangents: self.derived_tangents.clone(),
        }
    }
}

/// A gradient of a function of scalar parameters (`f64`, `i64`, `bool`)
/// prepared once by [`Engine::prepare`]: its derived pair built and its
/// parameters' types kept, so that [`Engine::grad_prepared`] only checks
/// each argument's kind, runs the forward and the reverse function and
/// writes plain numbers (the loop of an optimiser, say). Valid for the
/// engine that made it only.
#[derive(Clone, Debug)]
pub struct Prepared {
    engine: u64,
    f: FuncId,
    d: Derived,
    /// The parameters' types (no arrays).
    types: Box<[Type]>,
    /// One flag per parameter: selected for the gradient.
    wrt: Box<[bool]>,
}

impl Prepared {
    /// How many arguments (and gradient entries) a call takes.
    pub fn arity(&self) -> usize {
        self.types.len()
    }
}

/// The raw bits of a scalar argument of type `t` (as the VM passes it);
/// `None` if `a` is not a scalar of that type.
#[inline]
fn scalar_bits(a: &Value, t: Type) -> Option<u64> {
    match (a, t) {
        (Value::F64(x), Type::F64) => Some(x.to_bits()),
        (Value::I64(i), Type::I64) => Some(*i as u64),
        (Value::Bool(b), Type::Bool) => Some(u64::from(*b)),
        _ => None,
    }
}

/// A fresh id per engine (see [`Prepared`]).
fn engine_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Engine {
    /// Lower and verify every function of `module`, its small callees
    /// inlined first ([`vm::inline`], default [`Policy`]).
    pub fn new(module: ir::Module) -> Result<Engine, AdError> {
        Engine::with_inlining(module, &Policy::default())
    }

    /// [`Engine::new`] with another inlining policy ([`Policy::NONE`]: the
    /// functions as written, every call a call).
    ///
    /// The module is checked first ([`vm::lower::check_module`], then the
    /// verifier): a malformed one is [`AdError::InvalidModule`].
    pub fn with_inlining(module: ir::Module, policy: &Policy) -> Result<Engine, AdError> {
        vm::lower::check_module(&module).map_err(|e| AdError::InvalidModule(e.to_string()))?;
        let total_size = module.funcs.iter().map(vm::inline::size).sum();
        let (module, original, budget) = if *policy == Policy::NONE {
            (module, ir::Module::default(), 0)
        } else {
            let (inlined, budget) = vm::inline::inline_module_budget(&module, policy);
            (inlined, module, budget)
        };
        let program = lower_module(&module)?;
        let nfuncs = module.funcs.len();
        let derived_like = module
            .funcs
            .iter()
            .filter(|f| {
                f.name.contains(".fwd") || f.name.contains(".rev") || f.name.contains(".jvp")
            })
            .map(|f| f.name.clone())
            .collect();
        let full_masks = module
            .funcs
            .iter()
            .map(|f| analysis::all_params(f).into_boxed_slice())
            .collect();
        Ok(Engine {
            module: Arc::new(module),
            program: Arc::new(program),
            derived: vec![Vec::new(); nfuncs],
            full_masks,
            derived_ir: Arc::new(Vec::new()),
            vm: Vm::new(Default::default()),
            raw: Vec::new(),
            handles: Vec::new(),
            id: engine_id(),
            lineage: Vec::new(),
            derived_like: Arc::new(derived_like),
            jvps: vec![Vec::new(); nfuncs],
            tangent_handles: Vec::new(),
            zeros: Vec::new(),
            cleanup: true,
            original,
            policy: *policy,
            budget,
            total_size,
            by_name: hashbrown::HashMap::new(),
            derived_tangents: hashbrown::HashMap::new(),
        })
        .map(|mut e| {
            e.index_names(0);
            e
        })
    }

    /// Append user functions, with ids from the number of functions on:
    /// their calls name functions by those ids (the new ones included).
    /// Every derived function is dropped (as in a fresh engine), and
    /// [`Prepared`] gradients of this engine are no longer valid. The new
    /// functions are checked, inlined, lowered and verified as
    /// [`Engine::with_inlining`] would (the same code, unless the module's
    /// growth budget for inlining ran out); the others are left as they
    /// are, so adding `k` functions costs time in `k`, not in the size of
    /// the module. On an error the engine is as it was, but for its
    /// derived functions, which may have been dropped.
    pub fn add_functions(&mut self, funcs: Vec<ir::Function>) -> Result<(), AdError> {
        let n = self.module.funcs.len();
        let inlining = self.policy != Policy::NONE;
        let added = funcs.len();
        let given = if inlining {
            &mut self.original
        } else {
            Arc::make_mut(&mut self.module)
        };
        given.funcs.extend(funcs);
        let undo = |e: &mut Engine, err: AdError| {
            let given = if inlining {
                &mut e.original
            } else {
                Arc::make_mut(&mut e.module)
            };
            given.funcs.truncate(n);
            Arc::make_mut(&mut e.module).funcs.truncate(n);
            Arc::make_mut(&mut e.program).truncate(n);
            e.derived.iter_mut().for_each(Vec::clear);
            Arc::make_mut(&mut e.derived_ir).clear();
            Err(err)
        };
        let given = if inlining {
            &self.original
        } else {
            &self.module
        };
        let checked = (n..n + added).try_for_each(|i| {
            vm::lower::check_function(given, &given.funcs[i])
                .map_err(|e| AdError::InvalidModule(e.to_string()))
        });
        if let Err(e) = checked {
            return undo(self, e);
        }
        let grown: usize = given.funcs[n..].iter().map(vm::inline::size).sum();
        let (mut budget, total) = (self.budget, self.total_size + grown);
        if inlining {
            // The module's budget is the larger of the policy's and its
            // size: what a larger module adds to it.
            let growth = self.policy.max_unit_growth;
            budget += total.max(growth) - self.total_size.max(growth);
            for i in n..n + added {
                let f = vm::inline::inline_appended(
                    &self.original,
                    FuncId(i as u32),
                    &self.policy,
                    &mut budget,
                );
                Arc::make_mut(&mut self.module).funcs.push(f);
            }
        }
        // Derived functions follow the user functions in the program.
        Arc::make_mut(&mut self.program).truncate(n);
        for i in n..n + added {
            match vm::lower::lower_function(&self.module.funcs[i]) {
                Ok(bc) => {
                    Arc::make_mut(&mut self.program).push(bc);
                }
                Err(e) => return undo(self, AdError::InvalidModule(format!("lowering: {e}"))),
            }
        }
        for i in n..n + added {
            if let Err(errs) =
                vm::verify::verify_function(Arc::make_mut(&mut self.program), FuncId(i as u32))
            {
                let text: Vec<String> = errs.iter().take(8).map(|e| e.to_string()).collect();
                return undo(
                    self,
                    AdError::InvalidModule(format!(
                        "bytecode failed verification: {}",
                        text.join("; ")
                    )),
                );
            }
        }
        self.budget = budget;
        self.total_size = total;
        self.derived.iter_mut().for_each(Vec::clear);
        self.derived.resize(n + added, Vec::new());
        Arc::make_mut(&mut self.derived_ir).clear();
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

    /// Whether reverse functions derived from now on are cleaned up (on by
    /// default). Off, the reverse code is what the rules and the reverse
    /// CFG's assembly produce, before [`optimize`]: for reading and for the
    /// file tests, which show both (it computes the same gradient, slower).
    pub fn set_reverse_cleanup(&mut self, on: bool) {
        self.cleanup = on;
    }

    /// The module that runs: the one given, small callees inlined (see
    /// [`Engine::with_inlining`]).
    pub fn module(&self) -> &ir::Module {
        &self.module
    }

    /// The bytecode: user functions first (same ids as the module), then
    /// derived functions in the order they were built.
    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn vm_mut(&mut self) -> &mut Vm {
        &mut self.vm
    }

    /// A user function by name, with or without `@`.
    pub fn find(&self, name: &str) -> Option<FuncId> {
        let name = name.strip_prefix('@').unwrap_or(name);
        self.by_name.get(name).copied()
    }

    /// Index the names of the user functions from `from` on.
    fn index_names(&mut self, from: usize) {
        for (i, f) in self.module.funcs.iter().enumerate().skip(from) {
            self.by_name
                .entry(f.name.clone())
                .or_insert(FuncId(i as u32));
        }
    }

    /// Run a function. Arguments that do not fit it are
    /// [`AdError::Args`] (the VM checks them, once).
    pub fn run(&mut self, f: FuncId, args: &[Value]) -> Result<Value, AdError> {
        // Only user functions: derived ones follow them in the program.
        if f.index() >= self.module.funcs.len() {
            return Err(AdError::Args(format!("no function {f}")));
        }
        self.vm
            .run(&self.program, f, args)
            .map_err(|t| match t.kind {
                TrapKind::ArgMismatch(m) => AdError::Args(m),
                _ => AdError::Trap(t),
            })
    }

    /// Value and gradient of `f` at `args`, with respect to every `f64` and
    /// `f64[]` parameter.
    pub fn grad(&mut self, f: FuncId, args: &[Value]) -> Result<Gradient, AdError> {
        let mut out = Gradient::default();
        self.grad_into(f, args, &mut out)?;
        Ok(out)
    }

    /// Like [`Engine::grad`], reusing `out`'s buffers: after a warm-up call
    /// with the same shapes this performs no heap allocation.
    pub fn grad_into(
        &mut self,
        f: FuncId,
        args: &[Value],
        out: &mut Gradient,
    ) -> Result<(), AdError> {
        let wrt = self.take_full_mask(f)?;
        let result = self.grad_wrt_into(f, args, &wrt, out);
        self.full_masks[f.index()] = wrt;
        result
    }

    /// Value and gradient of `f` at `args` with respect to the parameters
    /// selected by `wrt` (one flag per parameter; only `f64` and `f64[]`
    /// parameters may be selected). Unselected parameters get `None`, and
    /// the derived code does none of their work: values that depend only on
    /// unselected parameters are inactive (see [`analysis::activity`]).
    pub fn grad_wrt(
        &mut self,
        f: FuncId,
        args: &[Value],
        wrt: &[bool],
    ) -> Result<Gradient, AdError> {
        let mut out = Gradient::default();
        self.grad_wrt_into(f, args, wrt, &mut out)?;
        Ok(out)
    }

    /// Like [`Engine::grad_wrt`], reusing `out`'s buffers: after a warm-up
    /// call with the same shapes and mask this performs no heap allocation.
    pub fn grad_wrt_into(
        &mut self,
        f: FuncId,
        args: &[Value],
        wrt: &[bool],
        out: &mut Gradient,
    ) -> Result<(), AdError> {
        let arrays = self.raw_args(f, args)?;
        // Built already (the common case), without a call: `derive_wrt`
        // checks and builds the rest.
        let d = match self.built(f, wrt) {
            Some(d) => d,
            None => self.derive_wrt(f, wrt)?,
        };
        self.vm.begin(true);
        self.handles.clear();
        if arrays {
            // Array arguments go into the heap `begin` just reset.
            for (bits, a) in self.raw.iter_mut().zip(args) {
                if let Value::Arr(xs) = a {
                    let h = self.vm.alloc_array(xs)?;
                    self.handles.push(h);
                    *bits = h;
                }
            }
        }
        out.value = self.forward_reverse(f, d)?;
        self.read_gradient(args, wrt, &mut out.grad);
        Ok(())
    }

    /// After a pullback: one gradient entry per argument into `grad` (its
    /// buffers reused), from the pullback's results (f64 parameters) and
    /// the shadows of the argument arrays (`self.handles`).
    #[inline]
    fn read_gradient(&self, args: &[Value], wrt: &[bool], grad: &mut Vec<Option<Value>>) {
        if grad.len() != args.len() {
            grad.resize(args.len(), None);
        }
        let (mut fi, mut ai) = (0, 0);
        for ((slot, a), selected) in grad.iter_mut().zip(args).zip(wrt) {
            match a {
                Value::F64(_) => {
                    let g = f64::from_bits(self.vm.results()[fi]);
                    fi += 1;
                    *slot = selected.then_some(Value::F64(g));
                }
                Value::Arr(_) => {
                    let h = self.handles[ai];
                    ai += 1;
                    if !selected {
                        *slot = None;
                        continue;
                    }
                    let shadow = self.vm.shadow(h).unwrap_or(&[]);
                    match slot {
                        Some(Value::Arr(v)) => {
                            v.clear();
                            v.extend_from_slice(shadow);
                        }
                        _ => *slot = Some(Value::Arr(shadow.to_vec())),
                    }
                }
                Value::I64(_) | Value::Bool(_) => *slot = None,
            }
        }
    }

    /// Prepare the gradient of `f`, whose parameters must be scalars
    /// (`f64`, `i64`, `bool`; no arrays), with respect to those selected by
    /// `wrt` (one flag per parameter, `f64` ones only): builds the derived
    /// pair as [`Engine::derive_wrt`] does. [`Engine::grad_prepared`] then
    /// computes value and gradient with none of [`Engine::grad_wrt_into`]'s
    /// per-call lookups and conversions.
    pub fn prepare(&mut self, f: FuncId, wrt: &[bool]) -> Result<Prepared, AdError> {
        let func = self
            .module
            .funcs
            .get(f.index())
            .ok_or_else(|| AdError::Args(format!("no function {f}")))?;
        if let Some(p) = func.params.iter().find(|p| func.ty(**p) == Type::Arr) {
            let name = func.values[p.index()].name.clone().unwrap_or_default();
            return Err(AdError::Args(format!(
                "@{}: parameter %{name} is an array; a prepared gradient takes scalar parameters only (use grad_wrt)",
                func.name
            )));
        }
        let types = func.params.iter().map(|p| func.ty(*p)).collect();
        let d = self.derive_wrt(f, wrt)?;
        Ok(Prepared {
            engine: self.id,
            f,
            d,
            types,
            wrt: wrt.into(),
        })
    }

    /// Value and gradient of a [`Prepared`] function at `args` (one per
    /// parameter, of its type); `grad` receives one entry per parameter,
    /// 0 for those not selected (and for `i64` and `bool` ones). No
    /// allocation after the first call.
    pub fn grad_prepared(
        &mut self,
        p: &Prepared,
        args: &[Value],
        grad: &mut [f64],
    ) -> Result<f64, AdError> {
        let n = p.types.len();
        if !self.owns(p) || args.len() != n || grad.len() != n {
            return Err(self.prepared_refused(p, args, grad.len()));
        }
        self.raw.clear();
        for (a, t) in args.iter().zip(&p.types) {
            match scalar_bits(a, *t) {
                Some(bits) => self.raw.push(bits),
                None => return Err(self.prepared_refused(p, args, grad.len())),
            }
        }
        self.vm.begin(true);
        let value = self.forward_reverse(p.f, p.d)?;
        // One result per f64 parameter, in order.
        let mut results = self.vm.results().iter();
        for ((g, t), selected) in grad.iter_mut().zip(&p.types).zip(&p.wrt) {
            *g = 0.0;
            if *t == Type::F64 {
                let Some(r) = results.next() else {
                    return Err(AdError::Internal(
                        "a prepared pullback returned too few values".to_string(),
                    ));
                };
                if *selected {
                    *g = f64::from_bits(*r);
                }
            }
        }
        Ok(value)
    }

    /// Value and gradient of a [`Prepared`] function at many points, in
    /// parallel on the current rayon thread pool (the global one, or the
    /// one whose [`rayon::ThreadPool::install`] this runs in).
    ///
    /// `points` holds the arguments of each point (each as
    /// [`Engine::grad_prepared`] takes them); `values` receives one value
    /// per point and `grads` [`Prepared::arity`] entries per point, point
    /// after point (row-major). Each worker thread runs its own clone of
    /// this engine, made once per call: the derived code is built already
    /// (by [`Engine::prepare`]) and shared, and after each worker's first
    /// point no point allocates (allocations are per call and per thread,
    /// not per point). A point that fails (a trap, an argument of the wrong
    /// kind) gets NaN as value and gradient; the failures are returned with
    /// their point's index, in index order (an empty vector, which does not
    /// allocate, when none fails). Buffers of the wrong size, or a
    /// gradient prepared by an unrelated engine, are an [`AdError::Args`]
    /// before anything runs.
    ///
    /// ```
    /// let src = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}";
    /// let module = assembler::assemble(src, "sq.adasm").expect("assembles");
    /// let mut engine = ad::Engine::new(module).expect("verifies");
    /// let f = engine.find("sq").expect("defined");
    /// let p = engine.prepare(f, &[true]).expect("derives");
    /// let points: Vec<[vm::Value; 1]> = (0..100).map(|i| [vm::Value::F64(i as f64)]).collect();
    /// let (mut values, mut grads) = (vec![0.0; 100], vec![0.0; 100]);
    /// let failed = engine.grad_many(&p, &points, &mut values, &mut grads).expect("shapes fit");
    /// assert!(failed.is_empty());
    /// assert_eq!((values[7], grads[7]), (49.0, 14.0));
    /// ```
    pub fn grad_many<P: AsRef<[Value]> + Sync>(
        &self,
        p: &Prepared,
        points: &[P],
        values: &mut [f64],
        grads: &mut [f64],
    ) -> Result<Vec<(usize, AdError)>, AdError> {
        use rayon::prelude::*;
        let arity = p.arity();
        if !self.owns(p) {
            return Err(AdError::Args(
                "the gradient was prepared by another engine".to_string(),
            ));
        }
        if values.len() != points.len() || Some(grads.len()) != points.len().checked_mul(arity) {
            return Err(AdError::Args(format!(
                "{} point(s) of {arity} argument(s) need {} value(s) and {} gradient entries; \
                 the buffers hold {} and {}",
                points.len(),
                points.len(),
                points.len().saturating_mul(arity),
                values.len(),
                grads.len()
            )));
        }
        if points.is_empty() {
            return Ok(Vec::new());
        }
        let threads = rayon::current_num_threads().max(1);
        let workers: Vec<Mutex<Engine>> = (0..threads).map(|_| Mutex::new(self.clone())).collect();
        // A few chunks per thread, so that threads that finish early take
        // over work; each chunk locks its thread's engine once.
        let size = points.len().div_ceil(threads * 4).max(1);
        let mut chunks = Vec::with_capacity(points.len().div_ceil(size));
        let mut grad_rows = grads;
        for (k, (pts, vals)) in points.chunks(size).zip(values.chunks_mut(size)).enumerate() {
            let (g, rest) = std::mem::take(&mut grad_rows).split_at_mut(pts.len() * arity);
            grad_rows = rest;
            chunks.push((k * size, pts, vals, g));
        }
        let mut failed: Vec<(usize, AdError)> = chunks
            .into_par_iter()
            .map(|(first, pts, vals, g)| {
                let mut failed = Vec::new();
                let me = rayon::current_thread_index().unwrap_or(0) % workers.len();
                // A worker that panicked cannot have left the engine
                // half-changed in a way that matters here (no derivation
                // runs): use it all the same.
                let mut engine = workers[me].lock().unwrap_or_else(|e| e.into_inner());
                for (j, (pt, v)) in pts.iter().zip(vals.iter_mut()).enumerate() {
                    let row = &mut g[j * arity..(j + 1) * arity];
                    match engine.grad_prepared(p, pt.as_ref(), row) {
                        Ok(value) => *v = value,
                        Err(e) => {
                            *v = f64::NAN;
                            row.fill(f64::NAN);
                            failed.push((first + j, e));
                        }
                    }
                }
                failed
            })
            .reduce(Vec::new, |mut a, mut b| {
                a.append(&mut b);
                a
            });
        failed.sort_by_key(|(i, _)| *i);
        Ok(failed)
    }

    /// Whether `p` was prepared by this engine, or by one it was cloned
    /// from before the clone (so that its derived functions are the same
    /// here).
    #[inline]
    fn owns(&self, p: &Prepared) -> bool {
        p.engine == self.id
            || self.lineage.iter().any(|&(id, shared)| {
                id == p.engine && p.d.fwd.index() < shared && p.d.rev.index() < shared
            })
    }

    /// Why [`Engine::grad_prepared`] refused a call.
    #[cold]
    fn prepared_refused(&self, p: &Prepared, args: &[Value], grad: usize) -> AdError {
        let n = p.types.len();
        if !self.owns(p) {
            return AdError::Args("the gradient was prepared by another engine".to_string());
        }
        if args.len() != n {
            return AdError::Args(format!(
                "{} argument(s) for a function of {n} parameter(s)",
                args.len()
            ));
        }
        if grad != n {
            return AdError::Args(format!("a gradient buffer of {grad} for {n} parameter(s)"));
        }
        match self.arg_error(p.f, args) {
            Err(e) => e,
            Ok(()) => AdError::Internal("a prepared call refused for no reason".to_string()),
        }
    }

    /// Run the derived pair `d` of `f` on the raw arguments in `self.raw`
    /// (after `Vm::begin`, array arguments in the heap): the forward
    /// function, whose value this returns, then the pullback with seed 1,
    /// which must leave both stacks empty; its results stay in the VM.
    // Always inlined: called once per gradient, it is the hot path of a
    // small function's gradient (a call here costs about 30 instructions).
    #[inline(always)]
    fn forward_reverse(&mut self, f: FuncId, d: Derived) -> Result<f64, AdError> {
        self.vm.call_raw(&self.program, d.fwd, &self.raw)?;
        let value = f64::from_bits(self.vm.results()[0]);
        self.vm
            .call_raw(&self.program, d.rev, &[1.0f64.to_bits()])?;
        if self.vm.comms_len() != 0 || self.vm.blk_len() != 0 {
            return Err(AdError::Internal(format!(
                "stacks not empty after the pullback of @{} ({} comms, {} block ids)",
                self.module.func(f).name,
                self.vm.comms_len(),
                self.vm.blk_len()
            )));
        }
        Ok(value)
    }

    /// The mask selecting every `f64` and `f64[]` parameter of `f`, taken
    /// out of the engine (without allocating) for the length of a call;
    /// the caller puts it back.
    fn take_full_mask(&mut self, f: FuncId) -> Result<Box<[bool]>, AdError> {
        match self.full_masks.get_mut(f.index()) {
            Some(m) => Ok(std::mem::take(m)),
            None => Err(AdError::Args(format!("no function {f}"))),
        }
    }

    /// The derived pair of `f` with respect to `wrt` if it is built and `f`
    /// is a gradient target: what [`Engine::derive_wrt`] returns then.
    #[inline]
    fn built(&self, f: FuncId, wrt: &[bool]) -> Option<Derived> {
        let func = self.module.funcs.get(f.index())?;
        if func.ret != RetType::One(Type::F64) {
            return None;
        }
        lookup(&self.derived, f, wrt)
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
        let func = self
            .module
            .funcs
            .get(f.index())
            .ok_or_else(|| AdError::Args(format!("no function {f}")))?;
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
    fn derive_any(&mut self, f: FuncId, wrt: &[bool]) -> Result<Derived, AdError> {
        if let Some(d) = lookup(&self.derived, f, wrt) {
            return Ok(d);
        }
        let func = self
            .module
            .funcs
            .get(f.index())
            .ok_or_else(|| AdError::Args(format!("no function {f}")))?;
        check_mask(func, wrt)?;
        let first_new = self.program.len();
        let result = self.derive_all(f, wrt);
        if result.is_err() {
            self.rollback(first_new);
        }
        result
    }

    /// Forget every derived function from bytecode id `first_new` on: what
    /// a failed derivation leaves behind.
    fn rollback(&mut self, first_new: usize) {
        Arc::make_mut(&mut self.program).truncate(first_new);
        Arc::make_mut(&mut self.derived_ir).truncate(first_new - self.module.funcs.len());
        for list in self.derived.iter_mut() {
            list.retain(|(_, d)| d.fwd.index() < first_new);
        }
        for list in self.jvps.iter_mut() {
            list.retain(|(_, id)| id.index() < first_new);
        }
        self.derived_tangents
            .retain(|g, t| g.index() < first_new && t.index() < first_new);
    }

    fn derive_all(&mut self, f: FuncId, wrt: &[bool]) -> Result<Derived, AdError> {
        let first_new = self.program.len();
        let mut work = Vec::new();
        let root = self.reserve(f, wrt.into(), &mut work);
        while let Some((g, gw)) = work.pop() {
            let mut pending = Vec::new();
            let (fwd, rev) = {
                let program_len = &mut self.program.len();
                let derived = &mut self.derived;
                let mut ids = |h: FuncId, hw: Vec<bool>| {
                    if let Some(d) = lookup(derived, h, &hw) {
                        return d;
                    }
                    let d = Derived {
                        fwd: FuncId(*program_len as u32),
                        rev: FuncId(*program_len as u32 + 1),
                    };
                    *program_len += 2;
                    let hw = hw.into_boxed_slice();
                    derived[h.index()].push((hw.clone(), d));
                    pending.push((h, hw));
                    d
                };
                transform(&self.module, g, &gw, &mut ids, self.cleanup).map_err(|NoRule(op)| {
                    AdError::NotDifferentiable(format!(
                        "@{} contains `{}`, which has no reverse-mode rule: only the AD stage \
                         or the lowering writes it",
                        self.module.func(g).name,
                        op.mnemonic()
                    ))
                })?
            };
            // Placeholders for functions reserved while transforming `g`.
            for (h, hw) in pending {
                self.push_placeholders(h, &hw);
                work.push((h, hw));
            }
            let d = lookup(&self.derived, g, &gw)
                .ok_or_else(|| AdError::Internal("lost derived ids".into()))?;
            for (id, mut func) in [(d.fwd, fwd), (d.rev, rev)] {
                func.name = self.program.func(id).name.clone();
                let bc = vm::lower::lower_function(&func).map_err(|e| match e {
                    // A limit of the VM a large user function can reach:
                    // tell the user, it is no bug.
                    vm::lower::LowerError::TooManyRegisters { needed, .. } => AdError::TooLarge {
                        func: self.module.func(g).name.clone(),
                        derived: func.name.clone(),
                        registers: needed,
                    },
                    e => AdError::Internal(format!("lowering {}: {e}", func.name)),
                })?;
                Arc::make_mut(&mut self.program)
                    .set(id, bc)
                    .map_err(|e| AdError::Internal(e.to_string()))?;
                let first_derived = self.module.funcs.len();
                Arc::make_mut(&mut self.derived_ir)[id.index() - first_derived] = func;
            }
        }
        for i in first_new..self.program.len() {
            vm::verify::verify_function(Arc::make_mut(&mut self.program), FuncId(i as u32))
                .map_err(|errs| {
                    let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                    AdError::Internal(format!(
                        "derived code failed verification: {}",
                        text.join("; ")
                    ))
                })?;
        }
        Ok(root)
    }

    /// Reserve ids for `f`'s derived pair with respect to `wrt` and queue it.
    fn reserve(
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
        self.derived[f.index()].push((wrt.clone(), d));
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
    fn push_placeholders(&mut self, f: FuncId, wrt: &[bool]) {
        for part in ["fwd", "rev"] {
            self.push_placeholder(f, wrt, part);
        }
    }

    /// One empty function standing for a derived function of `f` (`part`
    /// is `fwd`, `rev` or `jvp`), named as [`Engine::push_placeholders`]
    /// says.
    fn push_placeholder(&mut self, f: FuncId, wrt: &[bool], part: &str) {
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
        self.push_named_placeholder(format!("{}.{part}{suffix}", func.name));
    }

    /// One empty function named `name` (followed by `'` as often as needed
    /// to differ from a user function's name) standing for a derived
    /// function until it is built.
    fn push_named_placeholder(&mut self, mut name: String) {
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
        Arc::make_mut(&mut self.derived_ir).push(ir::Function {
            name,
            params: Vec::new(),
            ret: RetType::Many(Vec::new()),
            values: Vec::new(),
            blocks: Vec::new(),
            loc: Default::default(),
        });
    }

    /// The IR of a derived function (forward or reverse), by bytecode id.
    pub fn derived_ir(&self, id: FuncId) -> Option<&ir::Function> {
        id.index()
            .checked_sub(self.module.funcs.len())
            .and_then(|i| self.derived_ir.get(i))
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
    fn disasm_derived(&self, d: Derived) -> String {
        let mut out = String::new();
        for g in self.reachable_from(d) {
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
        match lookup(&self.derived, f, full) {
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
        let first_derived = self.module.funcs.len();
        let mut seen = vec![false; self.program.len()];
        let mut out = Vec::new();
        for d in roots {
            let mut stack = vec![d.rev, d.fwd];
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

    /// Check `args` against `f`'s parameters ([`Engine::check_args`]) and
    /// convert them to raw bits in `self.raw` in the same pass, every array
    /// as 0 for now (its heap handle is known after [`Vm::begin`]);
    /// `Ok(true)` if there is an array.
    #[inline]
    fn raw_args(&mut self, f: FuncId, args: &[Value]) -> Result<bool, AdError> {
        self.raw.clear();
        let mut arrays = false;
        if f.index() < self.module.funcs.len() {
            if let Some(func) = self.program.get(f) {
                let types = &func.param_types;
                if types.len() == args.len() {
                    for (t, a) in types.iter().zip(args) {
                        let bits = match (a, t) {
                            (Value::Arr(_), Type::Arr) => {
                                arrays = true;
                                0
                            }
                            _ => match scalar_bits(a, *t) {
                                Some(bits) => bits,
                                None => return Err(self.args_refused(f, args)),
                            },
                        };
                        self.raw.push(bits);
                    }
                    return Ok(arrays);
                }
            }
        }
        Err(self.args_refused(f, args))
    }

    /// Why [`Engine::raw_args`] refused `args`.
    #[cold]
    fn args_refused(&self, f: FuncId, args: &[Value]) -> AdError {
        match self.arg_error(f, args) {
            Err(e) => e,
            Ok(()) => {
                AdError::Internal(format!("the bytecode of {f} disagrees with its parameters"))
            }
        }
    }

    /// What is wrong with the arguments (`Ok` if nothing is).
    #[cold]
    fn arg_error(&self, f: FuncId, args: &[Value]) -> Result<(), AdError> {
        let func = self
            .module
            .funcs
            .get(f.index())
            .ok_or_else(|| AdError::Args(format!("no function {f}")))?;
        let params = func.params.iter().map(|p| func.ty(*p));
        if params.len() != args.len() {
            return Err(AdError::Args(format!(
                "@{} takes {} argument(s), got {}",
                func.name,
                params.len(),
                args.len()
            )));
        }
        for (i, (p, a)) in params.zip(args).enumerate() {
            if p != a.ty() {
                return Err(AdError::Args(format!(
                    "argument {} of @{} must be {p}, got {}",
                    i + 1,
                    func.name,
                    a.ty()
                )));
            }
        }
        Ok(())
    }
}

/// The derived pair of `f` with respect to `wrt`, if built (no allocation).
#[inline]
fn lookup(derived: &DerivedCache, f: FuncId, wrt: &[bool]) -> Option<Derived> {
    derived
        .get(f.index())?
        .iter()
        .find(|(m, _)| same_mask(m, wrt))
        .map(|(_, d)| *d)
}

/// `a == b`, element by element: masks are a few flags long, shorter than
/// what a call to `memcmp` costs.
#[inline]
fn same_mask(a: &[bool], b: &[bool]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// A mask must have one flag per parameter and select only `f64` and
/// `f64[]` parameters.
fn check_mask(func: &ir::Function, wrt: &[bool]) -> Result<(), AdError> {
    if wrt.len() != func.params.len() {
        return Err(AdError::Args(format!(
            "@{} takes {} argument(s), but the selection of parameters to differentiate has {} entries",
            func.name,
            func.params.len(),
            wrt.len()
        )));
    }
    for (i, (p, w)) in func.params.iter().zip(wrt).enumerate() {
        if *w && !func.ty(*p).is_differentiable() {
            let name = func.values[p.index()]
                .name
                .as_ref()
                .map_or_else(|| format!("parameter {}", i + 1), |n| format!("%{n}"));
            return Err(AdError::Args(format!(
                "cannot differentiate with respect to {name} of @{}: it is {}, not f64 or f64[]",
                func.name,
                func.ty(*p)
            )));
        }
    }
    Ok(())
}

/// Lower and verify a module given to [`Engine::new`] (after inlining).
fn lower_module(module: &ir::Module) -> Result<Program, AdError> {
    let mut program = vm::lower::lower_module(module)
        .map_err(|e| AdError::InvalidModule(format!("lowering: {e}")))?;
    vm::verify::verify_program(&mut program).map_err(|errs| {
        let text: Vec<String> = errs.iter().take(8).map(|e| e.to_string()).collect();
        AdError::InvalidModule(format!("bytecode failed verification: {}", text.join("; ")))
    })?;
    Ok(program)
}

fn ret_text(r: &RetType) -> String {
    match r {
        RetType::One(t) => t.to_string(),
        RetType::Unit => "nothing".to_string(),
        RetType::Many(ts) => format!("{} values", ts.len()),
    }
}
