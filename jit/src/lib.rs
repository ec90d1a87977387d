//! # advm-jit: the native tier
//!
//! Translates verified bytecode functions (primal, forward, reverse and
//! tangent functions alike) to x86-64 machine code with Cranelift, lazily
//! on the first call of each function from the host, and runs them in
//! place of the interpreter: [`Jit`] is a [`vm::NativeTier`], installed in
//! a VM with [`install`]. Both tiers give the same bits: the same values,
//! gradients, tangents, traps (kind, function, block, instruction) and
//! instruction counts (fuel).
//!
//! * Registers are Cranelift variables; the AD stacks and the array heap
//!   stay the VM's, reached through `extern "C"` helpers (`native.rs`, the
//!   one module with `unsafe`); math calls the very functions the
//!   interpreter calls.
//! * Calls between compiled functions are direct Cranelift calls; a call
//!   from the host enters through a small trampoline per entry function.
//! * Recursion runs compiled: a call of a function in a cycle of the call
//!   graph checks the stack pointer first and, when the stack runs low,
//!   runs the callee on the next of the tier's own stack segments
//!   (`native.rs`, `h_call_grown`), down to the interpreter's depth limit.
//! * A call the tier does not take runs interpreted (per entry function;
//!   [`vm::Vm::last_tier`] tells which tier ran): a call chain whose
//!   compiled frames could take more than [`STACK_BUDGET`] bytes of native
//!   stack between two checks, a recursion whose deepest stack the memory
//!   budget could not hold, and the calls the interpreter refuses on entry
//!   (it reports those).
//! * A call from the host to a small loop-free function runs interpreted
//!   ([`SMALL_CALL`]): entering compiled code costs more than its body
//!   saves there. [`Jit::eager`] compiles those calls too.
//! * Compiled code is cached per function with the function's verification
//!   stamp ([`vm::bytecode::Program::stamp`]): a function changed or
//!   re-verified since is compiled again.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod fuzz;
mod loops;
mod native;
mod translate;

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::UserFuncName;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId as ModFuncId, Linkage, Module, ModuleReloc};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use vm::bytecode::Program;
use vm::ir::FuncId;
use vm::{NativeTier, Trap, TrapKind, Vm};

/// Most bytes of native stack a chain of compiled frames may take between
/// two checks of the stack (the call from the host, and each call of a
/// function in a recursive call graph): checked with an estimate per frame
/// before compiling (`frame_bytes`) and with the frame sizes Cranelift
/// reports after.
pub const STACK_BUDGET: usize = 256 * 1024;

/// A call from the host runs interpreted when the called function and
/// every function it reaches through calls are loop-free and run at most
/// this many instructions in all (the sum of their lengths, each call site
/// counted once per call): entering compiled code (the trampoline, the
/// context, the array views, the VM's entry and exit) takes longer than
/// the interpreter takes for a few dozen instructions. The rule is per
/// entry function: a compiled caller still calls such a function's
/// compiled body.
pub const SMALL_CALL: usize = 64;

/// The most a function's bytecode length times its register count may be
/// for the tier to compile it. Cranelift's time and memory grow with the
/// product (the register allocator's liveness sets: a set of registers
/// per block, and a long function has many blocks): a loop-free gradient
/// of 8 000 instructions took 2 s and 544 MB to compile, against 0.03 s
/// interpreted. Under the bound a function compiles in a few
/// hundredths of a second and about 10 MB, which the reserve of a compile
/// section can hold when memory runs out ([`vm::oom`]); a larger one runs
/// interpreted (with everything that calls it), which for straight-line
/// code, each instruction run once per call, is what it would gain
/// anyway. The largest function of the corpus and the GMM and LSTM
/// programs, GMM's forward function, is 238 instructions of 308 registers
/// (73 304).
pub const MAX_AREA: usize = 1 << 20;

/// [`Decline::TooLarge`] if `f` is over [`MAX_AREA`].
fn too_large(f: &vm::bytecode::Function) -> Result<(), Decline> {
    let (len, regs) = (f.code.len(), f.nregs());
    if len.saturating_mul(regs) > MAX_AREA {
        return Err(Decline::TooLarge {
            name: f.name.clone(),
            len,
            regs,
        });
    }
    Ok(())
}

/// The most instructions one call of `f` can run if `f` and everything it
/// calls are loop-free, when that is at most `limit`; `None` otherwise (a
/// loop, a call cycle or more than `limit` instructions). Visits at most
/// `limit` functions: every function has at least one instruction.
fn loop_free_steps(prog: &Program, f: FuncId, limit: usize) -> Option<usize> {
    let func = prog.get(f)?;
    let mut n = func.code.len();
    if n > limit || translate::has_loop(func) {
        return None;
    }
    for site in &func.sites {
        n = n.checked_add(loop_free_steps(prog, site.func, limit - n)?)?;
        if n > limit {
            return None;
        }
    }
    Some(n)
}

/// An estimate of the native stack a compiled frame of `f` takes: its
/// registers twice over (spills), the result slots of its calls, and a
/// fixed part. Not a bound (the single-pass register allocator's frames
/// can be several times larger): the tier checks the compiled sizes too.
fn frame_bytes(f: &vm::bytecode::Function) -> usize {
    let outs: usize = f.sites.len().saturating_mul(8 * 4).min(64 * 1024);
    256 + 16 * f.nregs() + outs
}

/// One function's compiled body.
#[derive(Clone, Copy)]
struct Body {
    stamp: u64,
    id: ModFuncId,
    /// Stack estimate of the deepest chain of compiled frames from here
    /// up to a checked call (a call of a function in a recursive call
    /// graph, which looks at the stack pointer first).
    chain: usize,
    /// Its stack frame's size as compiled.
    frame: usize,
    /// For a function in a recursive call graph, its trampoline (calls of
    /// it are checked, and run through the trampoline on a new stack
    /// segment when the stack runs low).
    tramp: Option<ModFuncId>,
}

/// One function a compile adds: its id and whether it is in a recursive
/// call graph.
#[derive(Clone, Copy, Debug)]
struct Planned {
    func: FuncId,
    cyclic: bool,
}

/// Bodies compiled by one [`Jit::compile_new`]: function, module id,
/// verification stamp and trampoline (for a function in a recursive call
/// graph).
type NewBodies = Vec<(FuncId, ModFuncId, u64, Option<ModFuncId>)>;

/// One function's entry from the host.
#[derive(Clone)]
struct Entry {
    stamp: u64,
    /// The compiled entry, or why there is none.
    code: Result<native::EntryCode, Decline>,
}

/// Why a function runs interpreted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decline {
    /// It is not verified (the interpreter reports the trap).
    NotVerified,
    /// Its call graph has a cycle through `@name`, and this host has no
    /// stack segments to run recursion on (only Linux has).
    Recursion(String),
    /// Its deepest call chain could take more than [`STACK_BUDGET`].
    DeepChain,
    /// This machine or Cranelift cannot compile it.
    Unsupported(String),
    /// It is loop-free and small: the interpreter runs a call faster than
    /// compiled code is entered ([`SMALL_CALL`]).
    Small,
    /// `@name`, which it is or calls, has `len` instructions and `regs`
    /// registers, more than [`MAX_AREA`] together.
    TooLarge {
        /// The function too large to compile.
        name: String,
        /// Its bytecode instructions.
        len: usize,
        /// Its registers.
        regs: usize,
    },
}

impl std::fmt::Display for Decline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decline::NotVerified => write!(f, "not verified"),
            Decline::Recursion(n) => write!(f, "recursive call graph (through @{n})"),
            Decline::DeepChain => write!(
                f,
                "its deepest call chain's frames could exceed the native stack budget ({STACK_BUDGET} bytes)"
            ),
            Decline::Unsupported(m) => write!(f, "{m}"),
            Decline::Small => write!(
                f,
                "loop-free, at most {SMALL_CALL} instructions per call: faster interpreted"
            ),
            Decline::TooLarge { name, len, regs } => write!(
                f,
                "@{name} has {len} instructions and {regs} registers, more than the native tier compiles (their product at most {MAX_AREA})"
            ),
        }
    }
}

/// How long one function (a body or an entry trampoline) took to compile:
/// from the start of its translation to its machine code (a trampoline's
/// includes making the new code executable).
#[derive(Clone, Copy, Debug)]
pub struct CompileTime {
    /// Wall-clock time.
    pub wall: Duration,
    /// CPU time of the compiling thread, where the system reports it (on
    /// a loaded machine wall-clock time also counts other processes').
    pub cpu: Option<Duration>,
    /// Wall-clock time of the translation to Cranelift IR (the rest is
    /// Cranelift's).
    pub translate: Duration,
    /// Cranelift IR instructions of the translation.
    pub insts: usize,
    /// An entry trampoline rather than a bytecode function's body.
    pub trampoline: bool,
    /// Compiled with the cheaper code generator settings of loop-free code.
    pub cheap: bool,
    /// Compiled at the same time as another body, on two threads (a
    /// gradient's forward function and pullback, [`NativeTier::pair`]).
    pub parallel: bool,
}

/// The native tier: a Cranelift JIT module and the compiled code cached
/// per function.
pub struct Jit {
    module: Option<native::SendModule>,
    helpers: Vec<translate::HelperDecl>,
    bodies: Vec<Option<Body>>,
    entries: Vec<Option<Entry>>,
    out: Vec<u64>,
    /// The context compiled code shares with the host, kept between calls.
    cx: native::CtxCell,
    /// The stack segments compiled recursion runs on past the host's stack.
    stacks: native::Stacks,
    /// Reused for every function (cleared, not rebuilt).
    ctx: Option<Context>,
    fctx: FunctionBuilderContext,
    compile_times: Vec<CompileTime>,
    next_name: u64,
    /// Calls of at most this many loop-free instructions run interpreted
    /// ([`SMALL_CALL`], or 0 for [`Jit::eager`]).
    small: usize,
    /// Functions whose first compile also compiles their partner
    /// ([`NativeTier::pair`]: a forward function and its pullback), the
    /// two on two threads.
    partners: HashMap<FuncId, FuncId>,
    /// Where [`listing`] collects the code of every body compiled.
    listing: Option<String>,
}

/// The code generator's settings for this host, built once per process.
/// Both use `opt_level=none`: Cranelift's optimizer (e-graph rewrites, GVN,
/// loop-invariant code motion) took about 40 % of a large function's
/// compile time, and the code it produced was no faster on the suite
/// programs (branchy's gradient ran a third faster without it, mlp's and
/// logsumexp's 5-20 %, powloop's within 5 %: `docs/benchmarks.md`, *Native
/// tier*). The translation emits no redundancy an optimizer would have to
/// remove. `speed` (functions with a loop) keeps the backtracking register
/// allocator; `cheap` (loop-free functions and entry trampolines) uses the
/// single-pass one, which compiles in about half the time and runs each
/// instruction at most once per call. No setting changes what an
/// instruction computes: results are the same bits.
struct Isas {
    speed: OwnedTargetIsa,
    cheap: OwnedTargetIsa,
}

fn isas() -> Option<&'static Isas> {
    static ISAS: OnceLock<Option<Isas>> = OnceLock::new();
    ISAS.get_or_init(|| {
        Some(Isas {
            speed: make_isa(false)?,
            cheap: make_isa(true)?,
        })
    })
    .as_ref()
}

/// Both clocks now (see [`CompileTime`]).
fn clocks() -> (Instant, Option<Duration>) {
    (Instant::now(), native::thread_cpu_time())
}

fn since(
    t0: (Instant, Option<Duration>),
    translated: (Instant, usize),
    trampoline: bool,
    cheap: bool,
) -> CompileTime {
    CompileTime {
        wall: t0.0.elapsed(),
        translate: translated.0.duration_since(t0.0),
        insts: translated.1,
        cpu: t0
            .1
            .zip(native::thread_cpu_time())
            .map(|(a, b)| b.saturating_sub(a)),
        trampoline,
        cheap,
        parallel: false,
    }
}

/// Compile the function in `ctx` with `isa` and define it as `id` in
/// `module` (what `Module::define_function` does with the module's own
/// code generator); the size of its stack frame (return address and
/// saved frame pointer included), if Cranelift reports it.
fn define(
    module: &mut JITModule,
    isa: &OwnedTargetIsa,
    id: ModFuncId,
    ctx: &mut Context,
) -> Result<Option<usize>, Decline> {
    let align = compile_ctx(isa, ctx)?;
    define_compiled(module, id, ctx, align)
}

/// Compile the function in `ctx` with `isa`: the code's alignment.
fn compile_ctx(isa: &OwnedTargetIsa, ctx: &mut Context) -> Result<u32, Decline> {
    Ok(ctx
        .compile(&**isa, &mut ControlPlane::default())
        .map_err(|e| Decline::Unsupported(format!("cranelift: {:?}", e.inner)))?
        .buffer
        .alignment)
}

/// Define the code compiled in `ctx` (alignment `align`) as `id` in
/// `module`; the size of its stack frame, as [`define`] says.
fn define_compiled(
    module: &mut JITModule,
    id: ModFuncId,
    ctx: &Context,
    align: u32,
) -> Result<Option<usize>, Decline> {
    let Some(code) = ctx.compiled_code() else {
        return Err(Decline::Unsupported("cranelift: no code".into()));
    };
    let frame = code
        .buffer
        .frame_layout()
        .map(|l| l.frame_to_fp_offset as usize + 16);
    let relocs: Vec<ModuleReloc> = code
        .buffer
        .relocs()
        .iter()
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    module
        .define_function_bytes(id, u64::from(align), code.code_buffer(), &relocs)
        .map_err(|e| Decline::Unsupported(format!("cranelift: {e:?}")))?;
    Ok(frame)
}

/// A body translated and waiting for, then holding, its machine code
/// ([`Jit::compile_new`]).
struct Job {
    ctx: Context,
    /// Compiled with [`Isas::cheap`].
    cheap: bool,
    /// When the translation ended, and its IR instructions.
    translated: (Instant, usize),
    /// When the job began.
    wall: Instant,
    /// CPU time of the translation.
    translate_cpu: Option<Duration>,
    /// The compile's CPU time and the code's alignment, or why it failed
    /// (`None` until compiled).
    compiled: Option<Result<(Duration, u32), Decline>>,
    /// Compiled on two threads.
    parallel: bool,
}

/// The fewest IR instructions of the smaller of two jobs for them to be
/// compiled on two threads (starting a thread costs tens of
/// microseconds; a function of this size takes a millisecond or more).
const PARALLEL_INSTS: usize = 1000;

/// Compile every job: the largest on this thread and, when the second
/// largest is big enough ([`PARALLEL_INSTS`]), every other job on a second
/// thread (each job alone in its context, the code generator shared).
fn compile_jobs(jobs: &mut [Job], isas: &Isas) {
    let one = |job: &mut Job| {
        let t0 = native::thread_cpu_time();
        let isa = if job.cheap { &isas.cheap } else { &isas.speed };
        let r = compile_ctx(isa, &mut job.ctx);
        let cpu = native::thread_cpu_time()
            .zip(t0)
            .map(|(b, a)| b.saturating_sub(a))
            .unwrap_or_default();
        job.compiled = Some(r.map(|align| (cpu, align)));
    };
    let mut sizes: Vec<(usize, usize)> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.translated.1, i))
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let two = sizes.get(1).is_some_and(|(n, _)| *n >= PARALLEL_INSTS);
    if !two {
        jobs.iter_mut().for_each(one);
        return;
    }
    // The largest here, the rest there (a forward function and its
    // pullback are the two large ones of a gradient).
    for job in jobs.iter_mut() {
        job.parallel = true;
    }
    let largest = sizes[0].1;
    let (here, there): (Vec<_>, Vec<_>) = jobs
        .iter_mut()
        .enumerate()
        .partition(|(i, _)| *i == largest);
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            // Its own compile section: an allocation that fails there is
            // an error of the job, not an abort.
            let mut there = there;
            let r = vm::oom::section(|| {
                for (_, job) in there.iter_mut() {
                    one(job);
                }
            });
            if r.is_err() {
                for (_, job) in there.iter_mut() {
                    job.compiled = Some(Err(Decline::Unsupported(
                        "out of memory while compiling".into(),
                    )));
                }
            }
        });
        for (_, job) in here {
            one(job);
        }
        let _ = worker.join();
    });
}

/// The decline of a function the tier was asked to compile but made no
/// entry for (a bug: every function of a batch gets one).
fn no_entry() -> Decline {
    Decline::Unsupported("no entry compiled".into())
}

/// A fresh [`Jit`] installed in `vm`.
pub fn install(vm: &mut Vm) {
    vm.set_native(Some(Box::new(Jit::new())));
}

/// A fresh [`Jit::eager`] installed in `vm`: every call the tier supports
/// runs compiled, small loop-free ones included.
pub fn install_eager(vm: &mut Vm) {
    vm.set_native(Some(Box::new(Jit::eager())));
}

impl Default for Jit {
    fn default() -> Jit {
        Jit::new()
    }
}

impl Jit {
    /// A tier with an empty cache. On a host Cranelift cannot compile for,
    /// a tier that declines every call.
    pub fn new() -> Jit {
        let mut jit = Jit {
            module: None,
            helpers: Vec::new(),
            bodies: Vec::new(),
            entries: Vec::new(),
            out: Vec::new(),
            cx: native::CtxCell::default(),
            stacks: native::Stacks::default(),
            ctx: None,
            fctx: FunctionBuilderContext::new(),
            compile_times: Vec::new(),
            next_name: 0,
            small: SMALL_CALL,
            partners: HashMap::new(),
            listing: None,
        };
        if let Some(module) = make_module() {
            let mut module = module;
            for (name, _, sig) in native::helpers() {
                let s = translate::helper_signature(sig, module.make_signature());
                if let Ok(id) = module.declare_function(name, Linkage::Import, &s) {
                    jit.helpers.push(translate::HelperDecl {
                        name,
                        id: id.as_u32(),
                        sig: s,
                    });
                }
            }
            jit.module = Some(native::SendModule(module));
        }
        jit
    }

    /// A tier that compiles every call it supports, small loop-free ones
    /// included (see [`SMALL_CALL`]): for tests of compiled code and
    /// measurements of it.
    pub fn eager() -> Jit {
        let mut jit = Jit::new();
        jit.small = 0;
        jit
    }

    /// How long each function (body or trampoline) took to compile.
    pub fn compile_times(&self) -> &[CompileTime] {
        &self.compile_times
    }

    /// Compile `f` (and what it calls) now, if the tier takes it.
    pub fn prepare(&mut self, prog: &Program, f: FuncId) -> Result<(), Decline> {
        self.entry(prog, f).map(|_| ())
    }

    /// The compiled entry of `f`, compiling it if needed.
    #[inline(never)]
    fn entry(&mut self, prog: &Program, f: FuncId) -> Result<native::EntryCode, Decline> {
        let stamp = prog.stamp(f).ok_or(Decline::NotVerified)?;
        if let Some(e) = self.current_entry(prog, f) {
            return e.code.clone();
        }
        let r = if self.is_small(prog, f) {
            Err(Decline::Small)
        } else {
            // With its partner, if that has no current entry yet and is
            // not a call the interpreter takes.
            let partner = self.partners.get(&f).copied().filter(|p| {
                *p != f
                    && prog.stamp(*p).is_some()
                    && self.current_entry(prog, *p).is_none()
                    && !self.is_small(prog, *p)
            });
            match partner {
                Some(p) => {
                    let mut rs = self.compile_entries(prog, &[f, p]).into_iter();
                    let (r, rp) = (rs.next(), rs.next());
                    if let (Some(rp), Some(stamp_p)) = (rp, prog.stamp(p)) {
                        self.set_entry(p, stamp_p, rp);
                    }
                    r.unwrap_or_else(|| Err(no_entry()))
                }
                None => self.compile_entry(prog, f),
            }
        };
        // A decline is remembered too (until the function changes), so
        // that a call the tier does not take costs a lookup, not a plan.
        self.set_entry(f, stamp, r.clone());
        r
    }

    /// Whether calls of `f` run interpreted for being small and loop-free.
    fn is_small(&self, prog: &Program, f: FuncId) -> bool {
        self.small > 0 && loop_free_steps(prog, f, self.small).is_some()
    }

    /// The entry of `f` if it is current (compiled or declined since `f`
    /// last changed).
    #[inline]
    fn current_entry(&self, prog: &Program, f: FuncId) -> Option<&Entry> {
        let e = self.entries.get(f.index())?.as_ref()?;
        (Some(e.stamp) == prog.stamp(f)).then_some(e)
    }

    fn set_entry(&mut self, f: FuncId, stamp: u64, code: Result<native::EntryCode, Decline>) {
        if self.entries.len() <= f.index() {
            self.entries.resize(f.index() + 1, None);
        }
        self.entries[f.index()] = Some(Entry { stamp, code });
    }

    fn compile_entry(&mut self, prog: &Program, f: FuncId) -> Result<native::EntryCode, Decline> {
        self.compile_entries(prog, &[f])
            .pop()
            .unwrap_or_else(|| Err(no_entry()))
    }

    /// Compile the functions `fs` (and what they call) together, and their
    /// entries: one result per function of `fs`.
    fn compile_entries(
        &mut self,
        prog: &Program,
        fs: &[FuncId],
    ) -> Vec<Result<native::EntryCode, Decline>> {
        // One order for all, callees first; a function whose plan fails is
        // declined on its own (`None`: planned).
        let mut out: Vec<Option<Result<native::EntryCode, Decline>>> = Vec::new();
        let mut order: Vec<Planned> = Vec::new();
        let mut take: Vec<FuncId> = Vec::new();
        for &f in fs {
            match plan(prog, f, &self.bodies) {
                Ok(o) => {
                    for p in o {
                        if !order.iter().any(|q| q.func == p.func) {
                            order.push(p);
                        }
                    }
                    take.push(f);
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        if !take.is_empty() {
            let mut codes: Vec<Result<native::EntryCode, Decline>> =
                match self.compile_batch(prog, &take, &order) {
                    Ok(codes) => codes.into_iter().map(Ok).collect(),
                    // Some body's chain is too deep for the stack budget:
                    // which entries reach it, each entry's own plan tells
                    // (the bodies are recorded, so this compiles only
                    // trampolines).
                    Err(Decline::DeepChain) if take.len() > 1 => take
                        .iter()
                        .map(|f| {
                            let order = plan(prog, *f, &self.bodies)?;
                            let mut one = self.compile_batch(prog, &[*f], &order)?;
                            one.pop().ok_or_else(no_entry)
                        })
                        .collect(),
                    Err(e) => vec![Err(e); take.len()],
                };
            codes.reverse();
            for o in out.iter_mut().filter(|o| o.is_none()) {
                *o = codes.pop();
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(no_entry())))
            .collect()
    }

    /// Compile the bodies of `order` and the entries of `fs` (whose plans
    /// `order` holds), record the bodies, and check the chains.
    fn compile_batch(
        &mut self,
        prog: &Program,
        fs: &[FuncId],
        order: &[Planned],
    ) -> Result<Vec<native::EntryCode>, Decline> {
        let (Some(native::SendModule(module)), Some(isas)) = (self.module.as_mut(), isas()) else {
            return Err(Decline::Unsupported(
                "no native code generator for this host".into(),
            ));
        };
        let mut ctx = self.ctx.take().unwrap_or_else(|| module.make_context());
        let r = Self::compile_new(
            module,
            isas,
            &mut ctx,
            &mut self.fctx,
            &self.helpers,
            &self.bodies,
            &mut self.compile_times,
            &mut self.next_name,
            self.listing.as_mut(),
            prog,
            fs,
            order,
        );
        module.clear_context(&mut ctx);
        self.ctx = Some(ctx);
        let (new, frames, codes) = r?;
        // The chains again, with the frames' sizes as compiled (the
        // estimate is not a bound: the single-pass register allocator
        // gives every value a slot). The callees outside `new` are the
        // current bodies `plan` stopped at.
        let funcs: Vec<FuncId> = new.iter().map(|(g, ..)| *g).collect();
        let cyclic: Vec<bool> = new.iter().map(|(.., t)| t.is_some()).collect();
        let bodies = &self.bodies;
        let chains = chains(prog, &funcs, &cyclic, &frames, |g| {
            bodies.get(g.index()).copied().flatten()
        });
        for (((g, id, stamp, tramp), frame), chain) in new.iter().zip(&frames).zip(&chains) {
            if self.bodies.len() <= g.index() {
                self.bodies.resize(g.index() + 1, None);
            }
            self.bodies[g.index()] = Some(Body {
                stamp: *stamp,
                id: *id,
                chain: *chain,
                frame: *frame,
                tramp: *tramp,
            });
        }
        if chains.iter().any(|c| *c > STACK_BUDGET) {
            return Err(Decline::DeepChain);
        }
        Ok(codes
            .into_iter()
            .zip(fs)
            .map(|(mut code, f)| {
                code.recursive_frame = recursive_frame(prog, *f, &self.bodies);
                code
            })
            .collect())
    }

    /// Compile the functions of `order` (callees first) and the entry
    /// trampolines of `fs`; the new bodies and the entries.
    #[allow(clippy::too_many_arguments)]
    fn compile_new(
        module: &mut JITModule,
        isas: &Isas,
        ctx: &mut Context,
        fctx: &mut FunctionBuilderContext,
        helpers: &[translate::HelperDecl],
        bodies: &[Option<Body>],
        compile_times: &mut Vec<CompileTime>,
        next_name: &mut u64,
        mut listing: Option<&mut String>,
        prog: &Program,
        fs: &[FuncId],
        order: &[Planned],
    ) -> Result<(NewBodies, Vec<usize>, Vec<native::EntryCode>), Decline> {
        // Declare every new body (and trampoline) first: they call each
        // other.
        let mut new: NewBodies = Vec::new();
        for p in order {
            let g = p.func;
            let func = prog.func(g);
            let sig = translate::signature(func, module.make_signature());
            *next_name += 1;
            let name = format!("advm_f{}_{}", g.0, next_name);
            let id = module
                .declare_function(&name, Linkage::Local, &sig)
                .map_err(|e| Decline::Unsupported(e.to_string()))?;
            let tramp = if p.cyclic {
                let name = format!("advm_entry{}_{}", g.0, next_name);
                let id = module
                    .declare_function(&name, Linkage::Local, &trampoline_signature(module))
                    .map_err(|e| Decline::Unsupported(e.to_string()))?;
                Some(id)
            } else {
                None
            };
            let stamp = prog.stamp(g).ok_or(Decline::NotVerified)?;
            new.push((g, id, stamp, tramp));
        }
        let body_of = |g: FuncId| {
            new.iter()
                .find(|(h, ..)| *h == g)
                .map(|(_, id, ..)| *id)
                .or_else(|| bodies.get(g.index()).copied().flatten().map(|b| b.id))
        };
        let tramp_of = |g: FuncId| {
            new.iter()
                .find(|(h, ..)| *h == g)
                .map(|(.., t)| *t)
                .unwrap_or_else(|| {
                    bodies
                        .get(g.index())
                        .copied()
                        .flatten()
                        .and_then(|b| b.tramp)
                })
        };
        // Translate every body, then compile them (Cranelift's work, most
        // of the time: on two threads when there are two large ones), then
        // define them in order.
        let mut jobs: Vec<Job> = Vec::with_capacity(new.len());
        for (i, (g, id, _, tramp)) in new.iter().enumerate() {
            let t0 = clocks();
            let func = prog.func(*g);
            let mut c = if i == 0 {
                std::mem::replace(ctx, module.make_context())
            } else {
                module.make_context()
            };
            c.func.signature = translate::signature(func, module.make_signature());
            c.func.name = UserFuncName::user(0, id.as_u32());
            {
                let mut b = FunctionBuilder::new(&mut c.func, fctx);
                let mut refs = translate::Refs {
                    helpers,
                    callees: HashMap::new(),
                    trampolines: HashMap::new(),
                };
                for site in &func.sites {
                    if refs.callees.contains_key(&site.func) {
                        continue;
                    }
                    let cid = body_of(site.func).ok_or_else(|| {
                        Decline::Unsupported(format!("no body for callee {}", site.func))
                    })?;
                    refs.callees
                        .insert(site.func, module.declare_func_in_func(cid, b.func));
                    if let Some(t) = tramp_of(site.func) {
                        refs.trampolines
                            .insert(site.func, module.declare_func_in_func(t, b.func));
                    }
                }
                translate::translate(&mut b, prog, *g, &refs);
                b.finalize(module.target_config());
            }
            if listing.is_some() {
                c.set_disasm(true);
            }
            let translated = (Instant::now(), c.func.dfg.num_insts());
            // A function in a recursive call graph runs any number of
            // times per call, as a loop's body does.
            let cheap = !translate::has_loop(func) && tramp.is_none();
            let cpu = native::thread_cpu_time()
                .zip(t0.1)
                .map(|(b, a)| b.saturating_sub(a));
            jobs.push(Job {
                ctx: c,
                cheap,
                translated,
                wall: t0.0,
                translate_cpu: cpu,
                compiled: None,
                parallel: false,
            });
        }
        compile_jobs(&mut jobs, isas);
        let mut frames = Vec::with_capacity(new.len());
        let mut failed = None;
        for (job, (g, id, ..)) in jobs.iter_mut().zip(&new) {
            let r = match job.compiled.take() {
                Some(Ok((cpu, align))) => {
                    define_compiled(module, *id, &job.ctx, align).map(|f| (cpu, f))
                }
                Some(Err(e)) => Err(e),
                // Its thread ended without compiling it.
                None => Err(Decline::Unsupported("cranelift: no code".into())),
            };
            if let Some(text) = listing.as_deref_mut() {
                list_body(
                    text,
                    module,
                    &job.ctx,
                    &prog.func(*g).name,
                    job.translated.1,
                );
            }
            match r {
                Ok((cpu, frame)) => {
                    frames.push(frame.unwrap_or_else(|| frame_bytes(prog.func(*g))));
                    compile_times.push(CompileTime {
                        wall: job.wall.elapsed(),
                        translate: job.translated.0.duration_since(job.wall),
                        insts: job.translated.1,
                        cpu: job.translate_cpu.map(|t| t + cpu),
                        trampoline: false,
                        cheap: job.cheap,
                        parallel: job.parallel,
                    });
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        // The first job's context goes back to the tier, cleared.
        if let Some(first) = jobs.into_iter().next() {
            *ctx = first.ctx;
            module.clear_context(ctx);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        // An allocation failed while compiling (served from the reserve
        // of a compile section, `vm::oom`): compile no more; the call runs
        // interpreted and its section reports it.
        if vm::oom::failed() {
            return Err(Decline::Unsupported("out of memory while compiling".into()));
        }
        // The trampolines: of each new function in a recursive call graph,
        // and the entry's (that of `f`, if it has one).
        let mut entries = Vec::with_capacity(fs.len());
        let mut declared = Vec::new();
        for &f in fs {
            match tramp_of(f) {
                Some(t) => entries.push(t),
                None => {
                    *next_name += 1;
                    let tname = format!("advm_entry{}_{}", f.0, next_name);
                    let t = module
                        .declare_function(&tname, Linkage::Local, &trampoline_signature(module))
                        .map_err(|e| Decline::Unsupported(e.to_string()))?;
                    entries.push(t);
                    declared.push((f, t));
                }
            }
        }
        let tramps: Vec<(FuncId, ModFuncId)> = new
            .iter()
            .filter_map(|(g, .., t)| Some((*g, (*t)?)))
            .chain(declared)
            .collect();
        let mut last = None;
        for (g, tid) in tramps {
            let t0 = clocks();
            let func = prog.func(g);
            ctx.func.signature = trampoline_signature(module);
            ctx.func.name = UserFuncName::user(1, tid.as_u32());
            {
                let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
                let body = body_of(g).ok_or_else(|| Decline::Unsupported("no body".into()))?;
                let body = module.declare_func_in_func(body, b.func);
                translate::trampoline(&mut b, func, body);
                b.finalize(module.target_config());
            }
            let translated = (Instant::now(), ctx.func.dfg.num_insts());
            let r = define(module, &isas.cheap, tid, ctx);
            module.clear_context(ctx);
            r?;
            if let Some((t0, translated)) = last.replace((t0, translated)) {
                compile_times.push(since(t0, translated, true, true));
            }
        }
        module
            .finalize_definitions()
            .map_err(|e| Decline::Unsupported(format!("cranelift: {e}")))?;
        // The last trampoline's time includes making the code executable.
        if let Some((t0, translated)) = last {
            compile_times.push(since(t0, translated, true, true));
        }
        let codes = fs
            .iter()
            .zip(entries)
            .map(|(f, entry)| {
                let func = prog.func(*f);
                native::EntryCode {
                    ptr: module.get_finalized_function(entry),
                    nparams: func.param_types.len(),
                    nouts: translate::many(func).unwrap_or(1),
                    recursive_frame: 0,
                }
            })
            .collect();
        Ok((new, frames, codes))
    }
}

/// The signature of an entry trampoline: `(ctx, args, out)`.
fn trampoline_signature(module: &JITModule) -> cranelift_codegen::ir::Signature {
    let mut sig = module.make_signature();
    for _ in 0..3 {
        sig.params.push(cranelift_codegen::ir::AbiParam::new(
            cranelift_codegen::ir::types::I64,
        ));
    }
    sig
}

/// The code generator for this host, with the cheaper settings or not
/// ([`Isas`]), or `None` if Cranelift has no backend for it.
fn make_isa(cheap: bool) -> Option<OwnedTargetIsa> {
    let mut flags = settings::builder();
    flags.set("use_colocated_libcalls", "false").ok()?;
    flags.set("is_pic", "false").ok()?;
    flags.set("opt_level", "none").ok()?;
    if cheap {
        flags.set("regalloc_algorithm", "single_pass").ok()?;
    }
    // Cranelift's own IR verifier re-checks every function it compiles,
    // which costs compile time; the translation's output is checked by it
    // in debug builds (every test), not in release ones.
    if !cfg!(debug_assertions) {
        flags.set("enable_verifier", "false").ok()?;
    }
    cranelift_native::builder()
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()
}

/// The JIT module for this host, or `None` if Cranelift has no backend for
/// it.
fn make_module() -> Option<JITModule> {
    let isa = isas()?.speed.clone();
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    for (name, ptr, _) in native::helpers() {
        jb.symbol(name, ptr);
    }
    Some(JITModule::new(jb))
}

/// The functions `f` reaches through calls that have no current compiled
/// body, callees first (a post-order), each with whether it is in a
/// recursive call graph; a decline for an unverified or too large
/// function, for a chain ([`chains`], with [`frame_bytes`]' estimates)
/// over [`STACK_BUDGET`] (or, where the tier has no stack segments, for
/// recursion).
///
/// A call of a function in a recursive call graph is checked (it looks at
/// the stack pointer, and moves to a new stack segment when the stack
/// runs low), so a chain stops there: it is the deepest run of compiled
/// frames between two checks.
fn plan(prog: &Program, f: FuncId, bodies: &[Option<Body>]) -> Result<Vec<Planned>, Decline> {
    let current = |g: FuncId| -> Option<Body> {
        let b = bodies.get(g.index()).copied().flatten()?;
        (Some(b.stamp) == prog.stamp(g)).then_some(b)
    };
    if let Some(b) = current(f) {
        if b.chain > STACK_BUDGET {
            return Err(Decline::DeepChain);
        }
        return Ok(Vec::new());
    }
    // Iterative depth-first search: 1 on the path, 2 done.
    let mut state: HashMap<FuncId, u8> = HashMap::new();
    let mut order = Vec::new();
    let mut stack: Vec<(FuncId, usize)> = vec![(f, 0)];
    let mut back_edge = false;
    state.insert(f, 1);
    while let Some(&mut (g, ref mut next)) = stack.last_mut() {
        let gf = prog.get(g).ok_or(Decline::NotVerified)?;
        if prog.stamp(g).is_none() {
            return Err(Decline::NotVerified);
        }
        too_large(gf)?;
        if let Some(site) = gf.sites.get(*next) {
            *next += 1;
            let h = site.func;
            if current(h).is_some() {
                continue;
            }
            match state.get(&h) {
                Some(1) if !native::SEGMENTED => {
                    return Err(Decline::Recursion(prog.func(h).name.clone()))
                }
                Some(1) => back_edge = true,
                Some(_) => {}
                None => {
                    state.insert(h, 1);
                    stack.push((h, 0));
                }
            }
        } else {
            stack.pop();
            state.insert(g, 2);
            order.push(g);
        }
    }
    // A compiled body reaches compiled bodies only (a function replaced
    // since is unverified with its callers), so every cycle is among the
    // new functions.
    let pos: HashMap<FuncId, usize> = order.iter().enumerate().map(|(i, g)| (*g, i)).collect();
    let cyclic: Vec<bool> = if back_edge {
        (0..order.len())
            .map(|i| reaches(prog, &order, &pos, i))
            .collect()
    } else {
        vec![false; order.len()]
    };
    let frames: Vec<usize> = order.iter().map(|g| frame_bytes(prog.func(*g))).collect();
    let chains = chains(prog, &order, &cyclic, &frames, current);
    if chains.iter().any(|c| *c > STACK_BUDGET) {
        return Err(Decline::DeepChain);
    }
    let planned = order
        .iter()
        .zip(cyclic)
        .map(|(g, cyclic)| Planned { func: *g, cyclic })
        .collect();
    Ok(planned)
}

/// The chain of each function of `order` (a post-order of the new
/// functions, `cyclic` telling which are in a recursive call graph),
/// from its frame (`frames`) and its callees' chains: the deepest run of
/// compiled frames from it down to a checked call (a call of a function
/// in a recursive call graph) or a leaf. `current` gives the compiled
/// bodies of the callees outside `order`.
fn chains(
    prog: &Program,
    order: &[FuncId],
    cyclic: &[bool],
    frames: &[usize],
    current: impl Fn(FuncId) -> Option<Body>,
) -> Vec<usize> {
    let pos: HashMap<FuncId, usize> = order.iter().enumerate().map(|(i, g)| (*g, i)).collect();
    let mut chains: Vec<usize> = Vec::with_capacity(order.len());
    for (g, frame) in order.iter().zip(frames) {
        let below = prog
            .func(*g)
            .sites
            .iter()
            .map(|s| match (pos.get(&s.func), current(s.func)) {
                (Some(&j), _) if cyclic[j] => 0,
                // Callees come first in a post-order, but for cycles,
                // whose calls are checked.
                (Some(&j), _) => chains.get(j).copied().unwrap_or(0),
                (None, Some(b)) if b.tramp.is_some() => 0,
                (None, Some(b)) => b.chain,
                (None, None) => 0,
            })
            .max()
            .unwrap_or(0);
        chains.push(frame.saturating_add(below));
    }
    chains
}

/// For `f` (compiled, with everything it calls), the largest stack frame
/// of the functions it reaches if one of them is in a recursive call
/// graph, else 0.
fn recursive_frame(prog: &Program, f: FuncId, bodies: &[Option<Body>]) -> usize {
    let mut seen: HashSet<FuncId> = HashSet::from([f]);
    let mut work = vec![f];
    let (mut recursive, mut most) = (false, 0);
    while let Some(g) = work.pop() {
        let gf = prog.func(g);
        let body = bodies.get(g.index()).copied().flatten();
        most = most.max(body.map_or_else(|| frame_bytes(gf), |b| b.frame));
        recursive |= body.is_some_and(|b| b.tramp.is_some());
        for s in &gf.sites {
            if seen.insert(s.func) {
                work.push(s.func);
            }
        }
    }
    if recursive {
        most
    } else {
        0
    }
}

/// Whether `order[i]` reaches itself through calls among the functions of
/// `order` (`pos`: each one's index).
fn reaches(prog: &Program, order: &[FuncId], pos: &HashMap<FuncId, usize>, i: usize) -> bool {
    let mut seen = vec![false; order.len()];
    let mut work = vec![i];
    while let Some(k) = work.pop() {
        for s in &prog.func(order[k]).sites {
            if let Some(&j) = pos.get(&s.func) {
                if j == i {
                    return true;
                }
                if !seen[j] {
                    seen[j] = true;
                    work.push(j);
                }
            }
        }
    }
    false
}

impl NativeTier for Jit {
    fn pair(&mut self, first: FuncId, then: FuncId) {
        self.partners.insert(first, then);
    }

    fn call(
        &mut self,
        vm: &mut Vm,
        prog: &Program,
        f: FuncId,
        args: &[u64],
    ) -> Option<Result<(), Trap>> {
        // Calls the interpreter refuses on entry are its to report.
        if !vm.native_entry_ok(prog, f, args) {
            return None;
        }
        // The common case first: a compiled entry, current.
        let ready = match self.current_entry(prog, f) {
            Some(Entry { code: Ok(code), .. }) => Ok(*code),
            _ => self.entry(prog, f),
        };
        let code = match ready {
            // A recursion runs compiled only if its deepest native stack
            // (every level at the largest frame, down to the depth limit)
            // fits in what the memory budget leaves: then that budget bounds
            // the stack segments, and the interpreter's registers and frames
            // would not reach it either.
            Ok(code) if code.recursive_frame > 0 => {
                let limits = vm.limits();
                let most = (limits.max_call_depth as u128) * (code.recursive_frame as u128);
                let left = limits
                    .max_memory_bytes
                    .saturating_sub(vm.native_memory_bytes());
                if most > left as u128 {
                    return None;
                }
                code
            }
            Ok(code) => code,
            Err(_) => {
                // Declined whatever the arguments: the VM need not offer
                // this function's calls again while it stays the same.
                if let Some(stamp) = prog.stamp(f) {
                    vm.native_declined(f, stamp);
                }
                return None;
            }
        };
        if self.out.len() < code.nouts {
            self.out.resize(code.nouts, 0);
        }
        vm.native_begin();
        let trapped = native::enter(
            &mut self.cx,
            code,
            vm,
            args,
            &mut self.out,
            &mut self.stacks,
        );
        let steps = self.cx.steps();
        if trapped {
            return self.cx.take_trap().map(|((site, kind), callers)| {
                let (func, pc) = native::unsite(site);
                let callers: Vec<(FuncId, usize)> =
                    callers.iter().map(|&s| native::unsite(s)).collect();
                Err(vm.native_trap(prog, func, pc, steps, kind, &callers))
            });
        }
        if let Some(fuel) = vm.limits().fuel {
            if steps > fuel {
                let k = TrapKind::OutOfFuel { limit: fuel };
                let pc = self.cx.ret_pc() as usize;
                return Some(Err(vm.native_trap(prog, f, pc, steps, k, &[])));
            }
        }
        vm.native_finish(steps, &self.out[..code.nouts.min(self.out.len())]);
        Some(Ok(()))
    }

    fn fork(&self) -> Box<dyn NativeTier> {
        let mut jit = Jit::new();
        jit.small = self.small;
        Box::new(jit)
    }
}

impl Drop for Jit {
    fn drop(&mut self) {
        if let Some(native::SendModule(m)) = self.module.take() {
            native::free(m);
        }
    }
}

/// Append compiled body `name` (its context `ctx`, `insts` IR
/// instructions) to a [`listing`]: a header, the names of the functions it
/// calls (helpers, callees), its Cranelift IR, and its machine code
/// without the unwind annotations.
fn list_body(text: &mut String, module: &JITModule, ctx: &Context, name: &str, insts: usize) {
    use std::fmt::Write;
    let _ = writeln!(text, "; @{name}: {insts} Cranelift IR instructions");
    let decls = module.declarations();
    for (k, n) in ctx.func.params.user_named_funcs().iter() {
        let callee = decls
            .get_function_decl(ModFuncId::from_u32(n.index))
            .name
            .clone()
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "; userextname{} = u{}:{} = {callee}",
            k.as_u32(),
            n.namespace,
            n.index
        );
    }
    let _ = writeln!(text, "{}", ctx.func.display());
    let _ = writeln!(text, "; machine code");
    match ctx.compiled_code().and_then(|c| c.vcode.as_deref()) {
        Some(vcode) => {
            for line in vcode
                .lines()
                .filter(|l| !l.trim_start().starts_with("unwind "))
            {
                let _ = writeln!(text, "{line}");
            }
        }
        None => text.push_str("(none)\n"),
    }
    text.push('\n');
}

/// The code the native tier compiles for a call of `f` from the host:
/// for `f` and every function it calls, callees first, its Cranelift IR
/// and its machine code (Cranelift's listing of the instructions it
/// emits, before their final encoding: pseudo-instructions such as
/// `load_ext_name` stand for a short sequence), each headed by the
/// bytecode function's name. Compiled in a tier of its own (every call it
/// supports, small loop-free ones included), so nothing is cached; why it
/// declines, if it does.
pub fn listing(prog: &Program, f: FuncId) -> Result<String, Decline> {
    let mut jit = Jit::eager();
    jit.listing = Some(String::new());
    jit.prepare(prog, f)?;
    Ok(jit.listing.take().unwrap_or_default())
}

/// Whether the native tier ([`Jit::new`], as [`install`] installs it)
/// would run a call of `f` from the host (without compiling anything):
/// `Ok` or why it runs interpreted.
pub fn tier_of(prog: &Program, f: FuncId) -> Result<(), Decline> {
    plan(prog, f, &[])?;
    if loop_free_steps(prog, f, SMALL_CALL).is_some() {
        return Err(Decline::Small);
    }
    Ok(())
}
