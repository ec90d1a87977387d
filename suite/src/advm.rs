//! The suite programs run by advm: the `.adasm` files of `programs/bench/`.
//!
//! * [`Advm::primal`] runs the user function on a VM of its own through
//!   `Vm::call_raw`, as a Rust caller holding raw arguments would: scalar
//!   arguments are converted to raw words once, array arguments copied
//!   into the VM heap on every call (whose buffers are reused). No
//!   allocation per call after the first, unlike `Engine::run`, which
//!   converts `Value`s in and out.
//! * [`Advm::grad`] differentiates with respect to the suite's
//!   differentiated inputs ([`crate::Input::wrt`]; forward function, then
//!   reverse function, on the engine's VM), allocation-free after warm-up:
//!   by `ad::Engine::grad_prepared` for the programs of scalar parameters
//!   (sincos, powloop, recursion), the API for repeated gradients of such
//!   functions, and by `ad::Engine::grad_wrt_into` for those with arrays.
//!   Like the other implementations, it does no work for the other inputs
//!   (logreg's data `X` and `y`, mlp's input `x`). [`Advm::grad_general`]
//!   is always `grad_wrt_into` (checked against the prepared one).

use crate::Input;
use ad::{AdError, Engine, Gradient, Prepared};
use vm::bytecode::Program;
use vm::ir::FuncId;
use vm::{Trap, Value, Vm};

/// One suite program loaded into advm, with its arguments.
pub struct Advm {
    engine: Engine,
    f: FuncId,
    args: Vec<Value>,
    wrt: &'static [usize],
    /// `wrt` as one flag per argument.
    mask: Vec<bool>,
    out: Gradient,
    /// The user program, lowered and verified separately for
    /// [`Advm::primal`] (the engine's VM and program cannot be borrowed at
    /// once from outside).
    program: Program,
    vm: Vm,
    /// The raw arguments of [`Advm::primal`]: converted once when every
    /// argument is a scalar (`raw_ready`), else on every call (an array's
    /// handle is only valid until the next `Vm::begin`).
    raw: Vec<u64>,
    raw_ready: bool,
    /// The prepared gradient, for functions of scalar parameters.
    prepared: Option<Prepared>,
    /// Its gradient, one entry per argument.
    pgrad: Vec<f64>,
    /// Whether the last gradient is in `pgrad` (else in `out`).
    last_prepared: bool,
}

impl Advm {
    /// Load `programs/bench/<file>.adasm` and find `func` in it.
    pub fn load(file: &str, func: &str, args: Vec<Value>) -> Result<Advm, String> {
        let path = format!("programs/bench/{file}.adasm");
        let src = std::fs::read_to_string(testkit::workspace_root().join(&path))
            .map_err(|e| format!("{path}: {e}"))?;
        let wrt = Input::from_args(file, &args).wrt();
        Advm::from_source(&src, &path, func, args, wrt)
    }

    /// Like [`Advm::load`], for a suite case.
    pub fn from_case(case: &testkit::suite::Case) -> Result<Advm, String> {
        let path = testkit::suite::path(case);
        let src = std::fs::read_to_string(testkit::workspace_root().join(&path))
            .map_err(|e| format!("{path}: {e}"))?;
        let wrt = Input::from_case(case).wrt();
        Advm::from_source(&src, &path, case.func, case.args.clone(), wrt)
    }

    /// Assemble `src`; the gradient is flattened over the arguments `wrt`.
    pub fn from_source(
        src: &str,
        path: &str,
        func: &str,
        args: Vec<Value>,
        wrt: &'static [usize],
    ) -> Result<Advm, String> {
        let module = assembler::assemble(src, path).map_err(|d| format!("{d}"))?;
        let engine = Engine::new(module).map_err(|e| e.to_string())?;
        // The program as the engine runs it (small callees inlined).
        let program = lower_verified(engine.module())?;
        let f = engine
            .find(func)
            .ok_or_else(|| format!("{path}: no function @{func}"))?;
        let mask = (0..args.len()).map(|i| wrt.contains(&i)).collect();
        Advm {
            engine,
            f,
            args,
            wrt,
            mask,
            out: Gradient::default(),
            program,
            vm: Vm::default(),
            raw: Vec::new(),
            raw_ready: false,
            prepared: None,
            pgrad: Vec::new(),
            last_prepared: false,
        }
        .with_prepared()
    }

    /// Prepare the gradient if every argument is a scalar.
    fn with_prepared(mut self) -> Result<Advm, String> {
        if self.args.iter().all(|a| !matches!(a, Value::Arr(_))) {
            let p = self
                .engine
                .prepare(self.f, &self.mask)
                .map_err(|e| e.to_string())?;
            self.pgrad = vec![0.0; p.arity()];
            self.prepared = Some(p);
        }
        Ok(self)
    }

    pub fn args(&self) -> &[Value] {
        &self.args
    }

    /// Replace the arguments (same types).
    pub fn set_args(&mut self, args: Vec<Value>) {
        self.args = args;
        self.raw_ready = false;
    }

    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// The VM [`Advm::primal`] runs on (to install a native tier in it).
    pub fn primal_vm_mut(&mut self) -> &mut Vm {
        &mut self.vm
    }

    /// The primal value, by `Vm::call_raw` on the user function.
    pub fn primal(&mut self) -> Result<f64, Trap> {
        self.vm.begin(false);
        if !self.raw_ready {
            self.convert_args()?;
        }
        self.vm.call_raw(&self.program, self.f, &self.raw)?;
        Ok(f64::from_bits(self.vm.results()[0]))
    }

    /// The arguments as raw words in `raw`, arrays copied into the VM heap
    /// (valid until the next `Vm::begin`); `raw_ready` if there are none,
    /// so that the words are reused.
    fn convert_args(&mut self) -> Result<(), Trap> {
        self.raw.clear();
        let mut scalars = true;
        for a in &self.args {
            scalars &= !matches!(a, Value::Arr(_));
            let bits = raw_word(&mut self.vm, a)?;
            self.raw.push(bits);
        }
        self.raw_ready = scalars;
        Ok(())
    }

    /// The primal value through `Engine::run` (converts `Value`s; allocates).
    pub fn run(&mut self) -> Result<f64, AdError> {
        match self.engine.run(self.f, &self.args)? {
            Value::F64(y) => Ok(y),
            other => Err(AdError::NotDifferentiable(format!(
                "returned {other:?}, not f64"
            ))),
        }
    }

    /// Value and gradient with respect to the suite's differentiated
    /// inputs: by `Engine::grad_prepared` if the function has scalar
    /// parameters only, else as [`Advm::grad_general`]. The gradient is in
    /// [`Advm::flat_grad`].
    pub fn grad(&mut self) -> Result<f64, AdError> {
        match &self.prepared {
            Some(p) => {
                self.last_prepared = true;
                self.engine.grad_prepared(p, &self.args, &mut self.pgrad)
            }
            None => self.grad_general(),
        }
    }

    /// Value and gradient by `Engine::grad_wrt_into`, whatever the
    /// parameters; the gradient is in [`Advm::gradient`].
    pub fn grad_general(&mut self) -> Result<f64, AdError> {
        self.last_prepared = false;
        self.engine
            .grad_wrt_into(self.f, &self.args, &self.mask, &mut self.out)?;
        Ok(self.out.value)
    }

    /// The last gradient of [`Advm::grad_general`], one entry per argument.
    pub fn gradient(&self) -> &Gradient {
        &self.out
    }

    /// The last gradient with respect to the suite's differentiated inputs,
    /// flattened in argument order into `g`.
    pub fn flat_grad(&self, g: &mut [f64]) {
        if self.last_prepared {
            assert_eq!(self.wrt.len(), g.len(), "flattened gradient length");
            for (slot, &i) in g.iter_mut().zip(self.wrt) {
                *slot = self.pgrad[i];
            }
            return;
        }
        let mut at = 0;
        for &i in self.wrt {
            match self.out.grad.get(i) {
                Some(Some(Value::F64(x))) => {
                    g[at] = *x;
                    at += 1;
                }
                Some(Some(Value::Arr(xs))) => {
                    g[at..at + xs.len()].copy_from_slice(xs);
                    at += xs.len();
                }
                other => panic!("argument {i}: no f64 gradient ({other:?})"),
            }
        }
        assert_eq!(at, g.len(), "flattened gradient length");
    }

    /// Peak bytes on the AD stacks (comms + block ids) during the last
    /// gradient.
    pub fn peak_stack_bytes(&mut self) -> usize {
        self.engine.vm_mut().peak_stack_bytes()
    }

    /// Instructions executed per call by the primal, the forward function
    /// and the reverse function, on a copy of the engine's program (for ns
    /// per instruction; not for timing).
    pub fn instruction_counts(&mut self) -> Result<InstrCounts, String> {
        self.primal().map_err(|e| e.to_string())?;
        let primal = self.vm.executed();
        let d = self
            .engine
            .derive_wrt(self.f, &self.mask)
            .map_err(|e| e.to_string())?;
        let program = self.engine.program().clone();
        let mut vm = Vm::default();
        vm.begin(true);
        let mut raw = Vec::new();
        for a in &self.args {
            raw.push(raw_word(&mut vm, a).map_err(|e| e.to_string())?);
        }
        vm.call_raw(&program, d.fwd, &raw)
            .map_err(|e| e.to_string())?;
        let forward = vm.executed();
        vm.call_raw(&program, d.rev, &[1.0f64.to_bits()])
            .map_err(|e| e.to_string())?;
        let reverse = vm.executed();
        Ok(InstrCounts {
            primal,
            forward,
            reverse,
        })
    }
}

/// Bytecode instructions executed by one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstrCounts {
    pub primal: u64,
    pub forward: u64,
    pub reverse: u64,
}

/// A suite program's function called `reps` times from a loop in the VM,
/// the way the Lua scripts (`suite/lua/`) time a function: a call from
/// interpreted code, not from the host. The driver is appended to the
/// program's source:
///
/// ```text
/// fn @suite.repeat(%a0: T0, ..., %reps: i64) -> f64 {
///     %y = call @f(%a0, ...), reps times (at least once), in a loop whose
///     iteration is `call`, `jmp.step.if.lt.i`
///     ret %y
/// }
/// ```
///
/// so one host call of it costs one entry into the interpreter plus `reps`
/// calls and returns inside it. [`InVmLoop::run`] returns the last call's
/// value.
pub struct InVmLoop {
    program: Program,
    driver: FuncId,
    vm: Vm,
    args: Vec<Value>,
    raw: Vec<u64>,
}

impl InVmLoop {
    /// The driver of a suite case's function.
    pub fn from_case(case: &testkit::suite::Case) -> Result<InVmLoop, String> {
        let path = testkit::suite::path(case);
        let src = std::fs::read_to_string(testkit::workspace_root().join(&path))
            .map_err(|e| format!("{path}: {e}"))?;
        InVmLoop::from_source(&src, &path, case.func, case.args.clone())
    }

    /// The driver of `func` in `src` (which must return `f64`).
    pub fn from_source(
        src: &str,
        path: &str,
        func: &str,
        args: Vec<Value>,
    ) -> Result<InVmLoop, String> {
        // The driver's parameters take their types from the arguments; the
        // assembler checks them against `func`'s when it checks the calls.
        let mut params: Vec<String> = args
            .iter()
            .enumerate()
            .map(|(i, a)| format!("%a{i}: {}", a.ty()))
            .collect();
        params.push("%reps: i64".to_string());
        let params = params.join(", ");
        let pass: Vec<String> = (0..args.len()).map(|i| format!("%a{i}")).collect();
        let call = format!("call @{func}({})", pass.join(", "));
        // The first call before the loop, so that `%y` is always defined;
        // the loop is top-tested, which the lowering turns into `call`,
        // `jmp.step.if.lt.i` per iteration.
        let driver = format!(
            "\nfn @suite.repeat({params}) -> f64 {{\n\
             entry:\n    %y0 = {call}\n    %n = sub %reps, 1\n    jmp head\n\
             head:\n    %i = phi [entry: 0], [body: %i2]\n    \
             %y = phi [entry: %y0], [body: %y2]\n    \
             %c = lt %i, %n\n    br %c, body, done\n\
             body:\n    %y2 = {call}\n    %i2 = add %i, 1\n    jmp head\n\
             done:\n    ret %y\n}}\n"
        );
        let full = format!("{src}{driver}");
        let module = assembler::assemble(&full, path).map_err(|d| format!("{d}"))?;
        let driver = module
            .funcs
            .iter()
            .position(|g| g.name == "suite.repeat")
            .map(|i| FuncId(i as u32))
            .ok_or_else(|| "the driver is missing".to_string())?;
        // The program's functions as an engine runs them (small callees
        // inlined), the driver as written, its call left a call: the loop
        // times a call from interpreted code, as the Lua scripts do.
        let mut inlined = vm::inline::inline_module(&module, &vm::inline::Policy::default());
        inlined.funcs[driver.index()] = module.funcs[driver.index()].clone();
        let program = lower_verified(&inlined)?;
        Ok(InVmLoop {
            program,
            driver,
            vm: Vm::default(),
            args,
            raw: Vec::new(),
        })
    }

    /// Bytecode instructions the last [`InVmLoop::run`] executed.
    pub fn executed(&self) -> u64 {
        self.vm.executed()
    }

    /// Call the function `reps` (at least 1) times from the driver's loop;
    /// the last call's value. Array arguments are copied into the heap
    /// once per run, scalar ones converted once per run.
    pub fn run(&mut self, reps: u64) -> Result<f64, Trap> {
        self.vm.begin(false);
        self.raw.clear();
        for a in &self.args {
            let bits = raw_word(&mut self.vm, a)?;
            self.raw.push(bits);
        }
        self.raw.push(reps.max(1));
        self.vm.call_raw(&self.program, self.driver, &self.raw)?;
        Ok(f64::from_bits(self.vm.results()[0]))
    }
}

/// `module` lowered to bytecode and verified.
fn lower_verified(module: &vm::ir::Module) -> Result<Program, String> {
    let mut program = vm::lower::lower_module(module).map_err(|e| format!("{e}"))?;
    vm::verify::verify_program(&mut program).map_err(|errs| {
        errs.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    Ok(program)
}

/// An argument as the raw word `Vm::call_raw` takes; an array is copied
/// into the VM heap (its handle is valid until the next `Vm::begin`).
fn raw_word(vm: &mut Vm, a: &Value) -> Result<u64, Trap> {
    Ok(match a {
        Value::F64(x) => x.to_bits(),
        Value::I64(i) => *i as u64,
        Value::Bool(b) => u64::from(*b),
        Value::Arr(xs) => vm.alloc_array(xs)?,
    })
}
