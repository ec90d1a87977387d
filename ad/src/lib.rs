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
//! VM and one table of derived functions (built lazily, on the first gradient
//! that needs them, so recursion and mutual recursion work; each with its
//! IR, its [`Kind`] and the user function it derives from). Before
//! anything is lowered, [`Engine::new`] inlines small callees into their
//! callers ([`vm::inline`]; a small self-recursive function runs eight
//! levels per frame), then moves loop-invariant pure instructions out of
//! their loops ([`vm::licm`]); [`Engine::with_inlining`] with
//! [`Policy::NONE`] keeps every function as written, each call a call.
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

#![warn(missing_docs)]

pub mod analysis;
pub mod compile_work;
pub mod custom;
mod derive;
mod driver;
mod error;
pub mod fd;
pub mod forward;
mod grad;
mod hvp;
mod incremental;
mod listings;
mod modes;
pub mod optimize;
pub mod rules;
mod table;
pub mod transform;

pub use error::{AdError, FRAME_REGISTERS};
pub use forward::{PreparedJvp, Tangent};
pub use hvp::{Hessian, Hvp, PreparedHvp};
pub use modes::{Jacobian, Vjp};
use rules::reverse::NoRule;
use std::fmt;
use std::sync::{Arc, Mutex};
pub use table::Kind;
use transform::Derived;
use vm::bytecode::Program;
pub use vm::inline::Policy;
use vm::interp::{Trap, TrapKind, Vm};
use vm::ir::{self, FuncId, RetType};
use vm::{Type, Value};

/// Value and gradient of one call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gradient {
    /// The function's value.
    pub value: f64,
    /// One entry per parameter: `Some(F64)` for f64, `Some(Arr)` for f64[],
    /// `None` for i64 and bool and for parameters not differentiated with
    /// respect to (see [`Engine::grad_wrt`]).
    pub grad: Vec<Option<Value>>,
}

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
    /// Every derived function (its IR, kind and origin, by bytecode id)
    /// and the index by (user function, mask, mode) ([`table`]).
    derived: table::DerivedTable,
    /// Every `f64` and `f64[]` parameter of each user function selected.
    full_masks: Vec<Box<[bool]>>,
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
    /// Handles of the tangent arrays of the current forward-mode call.
    tangent_handles: Vec<u64>,
    /// Zeros, for the tangent array of an array parameter given no
    /// direction (kept to avoid an allocation per call).
    zeros: Vec<f64>,
    /// Whether reverse functions are cleaned up ([`optimize`]); see
    /// [`Engine::set_reverse_cleanup`].
    cleanup: bool,
    /// Whether small conditionals are if-converted before deriving; see
    /// [`Engine::set_if_conversion`].
    if_convert: bool,
    /// Work units one derivation may use ([`Engine::set_max_compile_work`]).
    max_compile_work: u64,
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
}

impl Clone for Engine {
    /// An engine sharing this one's module, bytecode and derived functions,
    /// with a VM of its own (same limits, same interrupt flag, a native tier
    /// of the same kind if one is installed).
    fn clone(&self) -> Engine {
        let mut vm = Vm::new(self.vm.limits().clone());
        vm.set_interrupt_handle(self.vm.interrupt_handle());
        vm.set_native(self.vm.native().map(|t| t.fork()));
        let mut lineage = self.lineage.clone();
        lineage.push((self.id, self.program.len()));
        Engine {
            module: Arc::clone(&self.module),
            program: Arc::clone(&self.program),
            derived: self.derived.clone(),
            full_masks: self.full_masks.clone(),
            vm,
            raw: Vec::new(),
            handles: Vec::new(),
            id: engine_id(),
            lineage,
            derived_like: Arc::clone(&self.derived_like),
            tangent_handles: Vec::new(),
            zeros: Vec::new(),
            cleanup: self.cleanup,
            if_convert: self.if_convert,
            max_compile_work: self.max_compile_work,
            original: self.original.clone(),
            policy: self.policy,
            budget: self.budget,
            total_size: self.total_size,
            by_name: self.by_name.clone(),
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
    /// functions as written, every call a call, no instruction moved out of
    /// its loop).
    ///
    /// The module is checked first ([`vm::lower::check_module`], then the
    /// verifier): a malformed one is [`AdError::InvalidModule`].
    ///
    /// The work runs in a compile section ([`vm::oom`]): with
    /// [`vm::alloc_count::Reserve`] as the global allocator, an allocation
    /// that fails is [`AdError::out_of_memory`], not an abort.
    pub fn with_inlining(module: ir::Module, policy: &Policy) -> Result<Engine, AdError> {
        error::section(|| Engine::build(module, policy))
    }

    /// [`Engine::with_inlining`]'s work.
    fn build(module: ir::Module, policy: &Policy) -> Result<Engine, AdError> {
        vm::lower::check_module(&module).map_err(|e| AdError::InvalidModule(e.to_string()))?;
        custom::check_rules(&module)?;
        let total_size = module.funcs.iter().map(vm::inline::size).sum();
        let (module, original, budget) = if *policy == Policy::NONE {
            (module, ir::Module::default(), 0)
        } else {
            let (mut inlined, budget) = vm::inline::inline_module_budget(&module, policy);
            vm::licm::hoist_module(&mut inlined);
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
            derived: table::DerivedTable::new(nfuncs),
            full_masks,
            vm: Vm::new(Default::default()),
            raw: Vec::new(),
            handles: Vec::new(),
            id: engine_id(),
            lineage: Vec::new(),
            derived_like: Arc::new(derived_like),
            tangent_handles: Vec::new(),
            zeros: Vec::new(),
            cleanup: true,
            if_convert: false,
            max_compile_work: compile_work::DEFAULT_MAX_COMPILE_WORK,
            original,
            policy: *policy,
            budget,
            total_size,
            by_name: hashbrown::HashMap::new(),
        })
        .map(|mut e| {
            e.index_names(0);
            e
        })
    }

    /// Whether reverse functions derived from now on are cleaned up (on by
    /// default). Off, the reverse code is what the rules and the reverse
    /// CFG's assembly produce, before [`optimize`]: for reading and for the
    /// file tests, which show both (it computes the same gradient, slower).
    pub fn set_reverse_cleanup(&mut self, on: bool) {
        self.cleanup = on;
    }

    /// Whether reverse-mode derivations from now on derive from a copy of
    /// the function whose small conditionals (arms of a few pure, cheap
    /// instructions) are if-converted ([`vm::ifconv`]; off by default, the
    /// CLI's `--if-convert`): the forward code pushes no block id for their
    /// joins and the reverse code routes their cotangents with `select`s
    /// instead of jumping through a table on data. That trades a branch
    /// for instructions: the native tier gains where the branch is hard to
    /// predict, the interpreter, which pays per instruction, loses (see
    /// docs/ad.md, *If-conversion*).
    pub fn set_if_conversion(&mut self, on: bool) {
        self.if_convert = on;
    }

    /// The most work units one derivation (a function and the callees
    /// derived with it) may use: [`compile_work::DEFAULT_MAX_COMPILE_WORK`] by
    /// default. Past it, derivation stops with [`AdError::TooMuchWork`]
    /// and nothing of it is kept. See [`compile_work`] for what a unit is.
    pub fn set_max_compile_work(&mut self, units: u64) {
        self.max_compile_work = units;
    }

    /// The bound [`Engine::set_max_compile_work`] set.
    pub fn max_compile_work(&self) -> u64 {
        self.max_compile_work
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

    /// The VM, to set its limits or read its counters.
    pub fn vm_mut(&mut self) -> &mut Vm {
        &mut self.vm
    }

    /// Bound what the forward code stores for the reverse code (the comms
    /// and block stacks and the checkpoints' snapshots together) to
    /// `bytes` at every moment, or lift the bound with `None`
    /// (`vm::Limits::ad_budget`, `--ad-budget`). A derivative whose
    /// storage does not fit is checkpointed: its forward sweep is
    /// recomputed in segments during the reverse sweep, with the same
    /// result bit for bit ([`Engine::recompute_factor`]). A budget below
    /// the minimum (the arguments and arrays at entry, and the largest
    /// batch of pushes) traps with [`TrapKind::AdBudget`], which names the
    /// bytes needed.
    pub fn set_ad_budget(&mut self, bytes: Option<usize>) {
        self.vm.limits_mut().ad_budget = bytes;
    }

    /// Of the last derivative: forward instructions executed (the first
    /// sweep and what checkpointing recomputed) divided by those of the
    /// first sweep; 1.0 when nothing was recomputed
    /// ([`vm::interp::Vm::recompute_factor`]).
    pub fn recompute_factor(&self) -> f64 {
        self.vm.recompute_factor()
    }

    /// The AD budget set by [`Engine::set_ad_budget`] (or the VM's limits).
    pub fn ad_budget(&self) -> Option<usize> {
        self.vm.limits().ad_budget
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

    /// User function `f`, or [`AdError::Args`] if there is none.
    pub(crate) fn user_func(&self, f: FuncId) -> Result<&vm::ir::Function, AdError> {
        self.module
            .funcs
            .get(f.index())
            .ok_or_else(|| AdError::Args(format!("no function {f}")))
    }

    /// User function `f`, which a prepared `what` (gradient, jvp, hvp)
    /// takes only with scalar parameters: [`AdError::Args`] naming its
    /// first array parameter and the entry point to use `instead`.
    pub(crate) fn scalar_params_only(
        &self,
        f: FuncId,
        what: &str,
        instead: &str,
    ) -> Result<&vm::ir::Function, AdError> {
        let func = self.user_func(f)?;
        if let Some(p) = func.params.iter().find(|p| func.ty(**p) == Type::Arr) {
            let name = func.values[p.index()].name.clone().unwrap_or_default();
            return Err(AdError::Args(format!(
                "@{}: parameter %{name} is an array; a prepared {what} takes scalar parameters only (use {instead})",
                func.name
            )));
        }
        Ok(func)
    }

    /// What is wrong with the arguments (`Ok` if nothing is).
    #[cold]
    fn arg_error(&self, f: FuncId, args: &[Value]) -> Result<(), AdError> {
        let func = self.user_func(f)?;
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
