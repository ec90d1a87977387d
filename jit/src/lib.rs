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
//! * A call the tier does not take runs interpreted (per entry function;
//!   [`vm::Vm::last_tier`] tells which tier ran): a call graph with
//!   recursion, or a call chain whose compiled frames could take more than
//!   [`STACK_BUDGET`] bytes of native stack (compiled frames live on the
//!   host's stack, so the tier keeps well within any thread's), and the
//!   calls the interpreter refuses on entry (it reports those).
//! * Compiled code is cached per function with the function's verification
//!   stamp ([`vm::bytecode::Program::stamp`]): a function changed or
//!   re-verified since is compiled again.
#![deny(unsafe_code)]

pub mod fuzz;
mod native;
mod translate;

use cranelift_codegen::ir::UserFuncName;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId as ModFuncId, Linkage, Module};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use vm::bytecode::Program;
use vm::ir::FuncId;
use vm::{NativeTier, Trap, TrapKind, Vm};

/// Most bytes of native stack the compiled frames of one call from the host
/// may take, by a conservative estimate per frame (`frame_bytes`).
pub const STACK_BUDGET: usize = 256 * 1024;

/// An estimate (an upper bound in practice) of the native stack a compiled
/// frame of `f` takes: its registers twice over (spills), the result slots
/// of its calls, and a fixed part.
fn frame_bytes(f: &vm::bytecode::Function) -> usize {
    let outs: usize = f.sites.len().saturating_mul(8 * 4).min(64 * 1024);
    256 + 16 * f.nregs() + outs
}

/// One function's compiled body.
#[derive(Clone, Copy)]
struct Body {
    stamp: u64,
    id: ModFuncId,
    /// Stack estimate of the deepest chain of compiled frames from here.
    chain: usize,
}

/// One function's entry from the host.
#[derive(Clone, Copy)]
struct Entry {
    stamp: u64,
    code: Option<native::EntryCode>,
}

/// Why a function runs interpreted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decline {
    /// It is not verified (the interpreter reports the trap).
    NotVerified,
    /// Its call graph has a cycle through `@name`.
    Recursion(String),
    /// Its deepest call chain could take more than [`STACK_BUDGET`].
    DeepChain,
    /// This machine or Cranelift cannot compile it.
    Unsupported(String),
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
        }
    }
}

/// The native tier: a Cranelift JIT module and the compiled code cached
/// per function.
pub struct Jit {
    module: Option<native::SendModule>,
    helpers: Vec<(&'static str, ModFuncId)>,
    bodies: Vec<Option<Body>>,
    entries: Vec<Option<Entry>>,
    out: Vec<u64>,
    views: Vec<native::ArrView>,
    fctx: FunctionBuilderContext,
    compile_times: Vec<Duration>,
    next_name: u64,
}

/// A fresh [`Jit`] installed in `vm`.
pub fn install(vm: &mut Vm) {
    vm.set_native(Some(Box::new(Jit::new())));
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
            views: Vec::new(),
            fctx: FunctionBuilderContext::new(),
            compile_times: Vec::new(),
            next_name: 0,
        };
        if let Some(module) = make_module() {
            let mut module = module;
            for (name, _, sig) in native::helpers() {
                let s = translate::helper_signature(sig, module.make_signature());
                if let Ok(id) = module.declare_function(name, Linkage::Import, &s) {
                    jit.helpers.push((name, id));
                }
            }
            jit.module = Some(native::SendModule(module));
        }
        jit
    }

    /// How long each function (body or trampoline) took to compile.
    pub fn compile_times(&self) -> &[Duration] {
        &self.compile_times
    }

    /// Compile `f` (and what it calls) now, if the tier takes it.
    pub fn prepare(&mut self, prog: &Program, f: FuncId) -> Result<(), Decline> {
        self.entry(prog, f).map(|_| ())
    }

    /// The compiled entry of `f`, compiling it if needed.
    fn entry(&mut self, prog: &Program, f: FuncId) -> Result<native::EntryCode, Decline> {
        let stamp = prog.stamp(f).ok_or(Decline::NotVerified)?;
        if let Some(Some(e)) = self.entries.get(f.index()) {
            if e.stamp == stamp {
                return e.code.ok_or(Decline::DeepChain);
            }
        }
        let r = self.compile_entry(prog, f);
        if self.entries.len() <= f.index() {
            self.entries.resize(f.index() + 1, None);
        }
        // A decline is remembered too (until the function changes), so
        // that a call the tier does not take costs a lookup, not a plan.
        self.entries[f.index()] = Some(Entry {
            stamp,
            code: r.as_ref().ok().copied(),
        });
        r
    }

    fn compile_entry(&mut self, prog: &Program, f: FuncId) -> Result<native::EntryCode, Decline> {
        let (order, chain) = plan(prog, f, &self.bodies)?;
        if chain > STACK_BUDGET {
            return Err(Decline::DeepChain);
        }
        let Some(native::SendModule(module)) = self.module.as_mut() else {
            return Err(Decline::Unsupported(
                "no native code generator for this host".into(),
            ));
        };
        let mut ctx = module.make_context();
        // Declare every new body first (they call each other).
        let mut new: Vec<(FuncId, ModFuncId, u64)> = Vec::new();
        for g in &order {
            let func = prog.func(*g);
            let sig = translate::signature(func, module.make_signature());
            self.next_name += 1;
            let name = format!("advm_f{}_{}", g.0, self.next_name);
            let id = module
                .declare_function(&name, Linkage::Local, &sig)
                .map_err(|e| Decline::Unsupported(e.to_string()))?;
            let stamp = prog.stamp(*g).ok_or(Decline::NotVerified)?;
            new.push((*g, id, stamp));
        }
        let body_of = |g: FuncId, bodies: &[Option<Body>], new: &[(FuncId, ModFuncId, u64)]| {
            new.iter()
                .find(|(h, ..)| *h == g)
                .map(|(_, id, _)| *id)
                .or_else(|| bodies.get(g.index()).copied().flatten().map(|b| b.id))
        };
        for (g, id, _) in &new {
            let t0 = Instant::now();
            let func = prog.func(*g);
            ctx.func.signature = translate::signature(func, module.make_signature());
            ctx.func.name = UserFuncName::user(0, id.as_u32());
            {
                let mut b = FunctionBuilder::new(&mut ctx.func, &mut self.fctx);
                let mut refs = translate::Refs {
                    helpers: HashMap::new(),
                    callees: HashMap::new(),
                };
                for (name, hid) in &self.helpers {
                    refs.helpers
                        .insert(*name, module.declare_func_in_func(*hid, b.func));
                }
                for site in &func.sites {
                    if refs.callees.contains_key(&site.func) {
                        continue;
                    }
                    let cid = body_of(site.func, &self.bodies, &new).ok_or_else(|| {
                        Decline::Unsupported(format!("no body for callee {}", site.func))
                    })?;
                    refs.callees
                        .insert(site.func, module.declare_func_in_func(cid, b.func));
                }
                translate::translate(&mut b, prog, *g, &refs);
                b.finalize(module.target_config());
            }
            let r = module.define_function(*id, &mut ctx);
            module.clear_context(&mut ctx);
            r.map_err(|e| Decline::Unsupported(format!("cranelift: {e:?}")))?;
            self.compile_times.push(t0.elapsed());
        }
        // The trampoline.
        let t0 = Instant::now();
        let func = prog.func(f);
        let mut sig = module.make_signature();
        for _ in 0..3 {
            sig.params.push(cranelift_codegen::ir::AbiParam::new(
                cranelift_codegen::ir::types::I64,
            ));
        }
        self.next_name += 1;
        let tname = format!("advm_entry{}_{}", f.0, self.next_name);
        let tid = module
            .declare_function(&tname, Linkage::Local, &sig)
            .map_err(|e| Decline::Unsupported(e.to_string()))?;
        ctx.func.signature = sig;
        ctx.func.name = UserFuncName::user(1, tid.as_u32());
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut self.fctx);
            let body = body_of(f, &self.bodies, &new)
                .ok_or_else(|| Decline::Unsupported("no body".into()))?;
            let body = module.declare_func_in_func(body, b.func);
            translate::trampoline(&mut b, func, body);
            b.finalize(module.target_config());
        }
        let r = module.define_function(tid, &mut ctx);
        module.clear_context(&mut ctx);
        r.map_err(|e| Decline::Unsupported(format!("cranelift: {e:?}")))?;
        module
            .finalize_definitions()
            .map_err(|e| Decline::Unsupported(format!("cranelift: {e}")))?;
        self.compile_times.push(t0.elapsed());
        // Record the new bodies with their chain estimates (callees first:
        // `order` is a post-order).
        for (g, id, stamp) in &new {
            let gf = prog.func(*g);
            let below = gf
                .sites
                .iter()
                .filter_map(|s| self.bodies.get(s.func.index()).copied().flatten())
                .map(|b| b.chain)
                .max()
                .unwrap_or(0);
            if self.bodies.len() <= g.index() {
                self.bodies.resize(g.index() + 1, None);
            }
            self.bodies[g.index()] = Some(Body {
                stamp: *stamp,
                id: *id,
                chain: frame_bytes(gf).saturating_add(below),
            });
        }
        let nouts = translate::many(func).unwrap_or(1);
        Ok(native::EntryCode {
            ptr: module.get_finalized_function(tid),
            nparams: func.param_types.len(),
            nouts,
        })
    }
}

/// The JIT module for this host, or `None` if Cranelift has no backend for
/// it.
fn make_module() -> Option<JITModule> {
    let mut flags = settings::builder();
    flags.set("use_colocated_libcalls", "false").ok()?;
    flags.set("is_pic", "false").ok()?;
    flags.set("opt_level", "speed").ok()?;
    // Cranelift's own IR verifier re-checks every function it compiles,
    // which costs compile time; the translation's output is checked by it
    // in debug builds (every test), not in release ones.
    if !cfg!(debug_assertions) {
        flags.set("enable_verifier", "false").ok()?;
    }
    let isa = cranelift_native::builder()
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()?;
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    for (name, ptr, _) in native::helpers() {
        jb.symbol(name, ptr);
    }
    Some(JITModule::new(jb))
}

/// The functions `f` reaches through calls that have no current compiled
/// body, callees first, and the stack estimate of `f`'s deepest chain; a
/// decline for recursion or an unverified function.
fn plan(
    prog: &Program,
    f: FuncId,
    bodies: &[Option<Body>],
) -> Result<(Vec<FuncId>, usize), Decline> {
    let current = |g: FuncId| -> Option<Body> {
        let b = bodies.get(g.index()).copied().flatten()?;
        (Some(b.stamp) == prog.stamp(g)).then_some(b)
    };
    if let Some(b) = current(f) {
        return Ok((Vec::new(), b.chain));
    }
    // Iterative depth-first search: 0 unseen, 1 on the path, 2 done.
    let mut state: HashMap<FuncId, (u8, usize)> = HashMap::new();
    let mut order = Vec::new();
    let mut stack: Vec<(FuncId, usize)> = vec![(f, 0)];
    state.insert(f, (1, 0));
    while let Some(&mut (g, ref mut next)) = stack.last_mut() {
        let gf = prog.get(g).ok_or(Decline::NotVerified)?;
        if prog.stamp(g).is_none() {
            return Err(Decline::NotVerified);
        }
        if let Some(site) = gf.sites.get(*next) {
            *next += 1;
            let h = site.func;
            if current(h).is_some() {
                continue;
            }
            match state.get(&h).map(|s| s.0) {
                Some(1) => return Err(Decline::Recursion(prog.func(h).name.clone())),
                Some(_) => continue,
                None => {
                    state.insert(h, (1, 0));
                    stack.push((h, 0));
                }
            }
        } else {
            stack.pop();
            let chain = frame_bytes(gf).saturating_add(
                gf.sites
                    .iter()
                    .map(|s| {
                        current(s.func)
                            .map(|b| b.chain)
                            .or_else(|| state.get(&s.func).map(|x| x.1))
                            .unwrap_or(0)
                    })
                    .max()
                    .unwrap_or(0),
            );
            state.insert(g, (2, chain));
            order.push(g);
        }
    }
    let chain = state.get(&f).map_or(0, |s| s.1);
    Ok((order, chain))
}

impl NativeTier for Jit {
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
        let code = self.entry(prog, f).ok()?;
        if self.out.len() < code.nouts {
            self.out.resize(code.nouts, 0);
        }
        vm.native_begin();
        let o = native::enter(code, vm, args, &mut self.out, &mut self.views);
        if let Some((site, kind)) = o.pending {
            let (func, pc) = native::unsite(site);
            let callers: Vec<(FuncId, usize)> =
                o.callers.iter().map(|&s| native::unsite(s)).collect();
            return Some(Err(vm.native_trap(prog, func, pc, o.steps, kind, &callers)));
        }
        if let Some(fuel) = vm.limits().fuel {
            if o.steps > fuel {
                let k = TrapKind::OutOfFuel { limit: fuel };
                return Some(Err(vm.native_trap(
                    prog,
                    f,
                    o.ret_pc as usize,
                    o.steps,
                    k,
                    &[],
                )));
            }
        }
        vm.native_finish(o.steps, &self.out[..code.nouts.min(self.out.len())]);
        Some(Ok(()))
    }

    fn fork(&self) -> Box<dyn NativeTier> {
        Box::new(Jit::new())
    }
}

impl Drop for Jit {
    fn drop(&mut self) {
        if let Some(native::SendModule(m)) = self.module.take() {
            native::free(m);
        }
    }
}

/// Whether the native tier would run `f` (without compiling anything):
/// `Ok` or why it runs interpreted.
pub fn tier_of(prog: &Program, f: FuncId) -> Result<(), Decline> {
    let (_, chain) = plan(prog, f, &[])?;
    if chain > STACK_BUDGET {
        return Err(Decline::DeepChain);
    }
    Ok(())
}
