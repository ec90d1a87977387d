//! What a host calls: creating a VM, its limits and interrupt flag, starting a
//! run, passing array arguments, running a function (`run` with values,
//! `call_raw` with raw bits) and reading its results and statistics.

use super::*;

impl Default for Vm {
    fn default() -> Vm {
        Vm::new(Limits::default())
    }
}

impl Vm {
    /// A VM with the given limits, its stores empty and its interrupt
    /// flag clear.
    pub fn new(limits: Limits) -> Vm {
        Vm {
            limits,
            regs: Vec::new(),
            frames: Vec::new(),
            comms: Vec::new(),
            blk: Vec::new(),
            heap: Heap::default(),
            results: Vec::new(),
            args: Vec::new(),
            interrupt: Arc::new(AtomicBool::new(false)),
            peak_stack: 0,
            grown_stack: 0,
            stack_limit: Limits::default().max_stack_bytes,
            spilled: 0,
            spill_at: None,
            native_spill_at: None,
            limits_changed: true,
            executed_bytes: 0,
            native: None,
            native_declined: Vec::new(),
            last_tier: Tier::Interp,
            segment: None,
            suspend_need: 0,
            suspended: None,
            resume: None,
            ckpt: None,
            min_budget: None,
            snap_bytes: 0,
            snap0_heap: Vec::new(),
            sweep_instrs: 0,
            recomputed_instrs: 0,
        }
    }

    /// The limits calls run under.
    #[inline]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The limits, to change; the next call runs under the new ones (and
    /// stores grown past a lowered limit first give back what no call holds).
    pub fn limits_mut(&mut self) -> &mut Limits {
        self.limits_changed = true;
        &mut self.limits
    }

    /// Setting this flag makes the running call trap with
    /// [`TrapKind::Interrupted`] at its next taken jump or call. The VM
    /// does not clear it.
    pub fn interrupt_handle(&self) -> Arc<AtomicBool> {
        self.interrupt.clone()
    }

    /// Use `flag` as the interrupt flag (so that one Ctrl-C handler can
    /// serve VMs created later).
    pub fn set_interrupt_handle(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = flag;
    }

    /// Forget arrays and stacks; in AD mode arrays get shadows.
    #[inline]
    pub fn begin(&mut self, ad_mode: bool) {
        self.heap.begin(ad_mode);
        self.comms.clear();
        self.blk.clear();
        self.peak_stack = 0;
        self.grown_stack = 0;
        self.spilled = 0;
        self.spill_at = None;
        self.native_spill_at = None;
        self.end_checkpoints();
        if self.limits_changed {
            self.apply_limits();
        }
    }

    /// Bring the stores within limits that may have changed: a heap or
    /// memory limit lowered since they grew gives back what no call holds
    /// now, and the heap learns the memory budget. (Every store that grows
    /// tells the heap itself, so this runs only after the limits change.)
    #[cold]
    #[inline(never)]
    pub(super) fn apply_limits(&mut self) {
        if self.heap.held_bytes() > self.limits.max_heap_bytes {
            self.heap.release_spare();
        }
        if self.memory_bytes() > self.limits.max_memory_bytes {
            self.heap.release_spare();
            self.regs = Vec::new();
            self.frames = Vec::new();
            self.comms = Vec::new();
            self.blk = Vec::new();
        }
        self.sync_memory();
        self.stack_limit = self.stack_limit();
        self.limits_changed = false;
    }

    /// Copy `data` (an argument array) into a new heap array; returns its
    /// handle. Bounded by `max_array_len` and `max_heap_bytes` like `anew`.
    pub fn alloc_array(&mut self, data: &[f64]) -> Result<u64, Trap> {
        if self.limits_changed {
            self.apply_limits();
        }
        if data.len() > self.limits.max_array_len {
            return Err(host_trap(TrapKind::ArgArrayTooLarge {
                len: data.len(),
                limit: self.limits.max_array_len,
            }));
        }
        self.heap
            .alloc_copy(data, self.limits.max_heap_bytes)
            .map_err(host_trap)
    }

    /// The elements of array `h`, or `None` for an invalid handle.
    pub fn array(&self, h: u64) -> Option<&[f64]> {
        self.heap.get(h)
    }

    /// The shadow (cotangent) array of array `h`, or `None` outside AD
    /// mode or for an invalid handle: where a host reads the gradient of
    /// an `f64[]` argument after a pullback.
    pub fn shadow(&self, h: u64) -> Option<&[f64]> {
        self.heap.shadow(h)
    }

    /// The shadow (cotangent) array of array `h`, to write (AD mode only):
    /// how a host seeds the cotangent of an `f64[]` result before running
    /// a pullback.
    pub fn shadow_mut(&mut self, h: u64) -> Option<&mut [f64]> {
        self.heap.shadow_mut(h)
    }

    /// Values returned by the last [`Vm::call_raw`]: the `ret` value or the
    /// `ret.n` list.
    pub fn results(&self) -> &[u64] {
        &self.results
    }

    /// Entries on the comms stack (the values a forward sweep saves for
    /// its reverse sweep); 0 after a balanced forward and reverse pair.
    pub fn comms_len(&self) -> usize {
        self.comms.len()
    }

    /// Entries on the block stack (the blocks a forward sweep took, for
    /// its reverse sweep to retrace); 0 after a balanced pair.
    pub fn blk_len(&self) -> usize {
        self.blk.len()
    }

    /// The most bytes the comms (8 per entry) and block (4 per entry)
    /// stacks held together since [`Vm::begin`], sampled when each
    /// [`Vm::call_raw`] ends. That is the true peak for the AD stage, whose
    /// forward calls only push and whose reverse calls only pop.
    pub fn peak_stack_bytes(&self) -> usize {
        self.peak_stack
    }

    /// The most bytes the comms and block stacks held together since
    /// [`Vm::begin`] ([`Vm::peak_stack_bytes`], exact for the AD stage's
    /// calls, which only push or only pop) or reserved when they grew:
    /// never more than the least of `max_stack_bytes` and the AD budget
    /// (the stacks grow only within it, and a call starts by giving back
    /// what a lowered limit no longer allows).
    pub fn stack_high_water_bytes(&self) -> usize {
        self.peak_stack.max(self.grown_stack)
    }

    /// Instructions executed by the last call.
    pub fn executed(&self) -> u64 {
        self.executed_bytes / W
    }

    /// Run `f` on host values: a fresh heap, the result converted back.
    pub fn run(&mut self, prog: &Program, f: FuncId, args: &[Value]) -> Result<Value, Trap> {
        let func = prog
            .get(f)
            .ok_or_else(|| host_trap(TrapKind::ArgMismatch(format!("no function {f}"))))?;
        if func.param_types.len() != args.len() {
            return Err(host_trap(TrapKind::ArgMismatch(format!(
                "@{} takes {} argument(s), got {}",
                func.name,
                func.param_types.len(),
                args.len()
            ))));
        }
        self.begin(false);
        let mut raw = std::mem::take(&mut self.args);
        raw.clear();
        for (i, (a, t)) in args.iter().zip(&func.param_types).enumerate() {
            if a.ty() != *t {
                self.args = raw;
                return Err(host_trap(TrapKind::ArgMismatch(format!(
                    "argument {} of @{} must be {t}, got {}",
                    i + 1,
                    func.name,
                    a.ty()
                ))));
            }
            let bits = match a {
                Value::F64(x) => x.to_bits(),
                Value::I64(i) => *i as u64,
                Value::Bool(b) => *b as u64,
                Value::Arr(xs) => match self.alloc_array(xs) {
                    Ok(h) => h,
                    Err(t) => {
                        self.args = raw;
                        return Err(t);
                    }
                },
            };
            raw.push(bits);
        }
        let result = self.call_raw(prog, f, &raw);
        self.args = raw;
        if let Err(t) = result {
            self.heap.begin(false);
            return Err(t);
        }
        let bits = self.results.first().copied().unwrap_or(0);
        let value = match &func.ret {
            RetType::One(Type::F64) => Value::F64(f64::from_bits(bits)),
            // A function with no result returns an unused i64 zero.
            RetType::One(Type::I64) | RetType::Unit => Value::I64(bits as i64),
            RetType::One(Type::Bool) => Value::Bool(bits != 0),
            RetType::One(Type::Arr) => {
                Value::Arr(self.heap.get(bits).map(|a| a.to_vec()).unwrap_or_default())
            }
            RetType::Many(_) => {
                Value::Arr(self.results.iter().map(|b| f64::from_bits(*b)).collect())
            }
        };
        // The arrays of this run are dead (their buffers are kept).
        self.heap.begin(false);
        Ok(value)
    }

    /// Call `f` with raw 64-bit arguments, keeping the heap and stacks as
    /// they are (the AD driver runs a forward and a reverse call in one
    /// [`Vm::begin`]). Results are in [`Vm::results`].
    ///
    /// Inlined into the host's code: everything, the checks of `f` and
    /// `args` included, happens in one call of the interpreter.
    #[inline]
    pub fn call_raw(&mut self, prog: &Program, f: FuncId, args: &[u64]) -> Result<(), Trap> {
        if self.limits_changed {
            self.apply_limits();
        }
        if self.limits.ad_budget.is_some() {
            if let Some(r) = self.call_checkpointed(prog, f, args) {
                return r;
            }
        }
        if !self.native_declines(prog, f) {
            if let Some(mut tier) = self.native.take() {
                let r = tier.call(self, prog, f, args);
                self.native = Some(tier);
                if let Some(r) = r {
                    self.last_tier = Tier::Native;
                    return match r {
                        Ok(()) if self.spilled == 0 => Ok(()),
                        r => self.budget_trap(prog, r),
                    };
                }
            }
        }
        self.last_tier = Tier::Interp;
        // The common case returns `Ok` as built here, without moving a
        // `Result` (a `Trap` is over 100 bytes) through a local.
        match self.exec(prog, f, args) {
            Ok(()) if self.spilled == 0 => Ok(()),
            r => self
                .budget_trap(prog, r)
                .map_err(|t| self.with_call_stack(prog, t)),
        }
    }

    /// The end of a call that trapped (returned as it is unless it spilled)
    /// or filled the AD budget and spilled: the
    /// budget trap, with what storing everything needs (what was spilled
    /// and what the stacks hold now), unless the call trapped for a reason
    /// of its own (a stack underflow or a bad block id is the spill's
    /// doing). The stacks are emptied: what they hold is not all the call
    /// stored.
    #[cold]
    #[inline(never)]
    fn budget_trap(&mut self, prog: &Program, r: Result<(), Trap>) -> Result<(), Trap> {
        // A budget too small for checkpointing's snapshot 0: the trap names
        // a budget checkpointing works in where that is less.
        let least = self.min_budget.take();
        let r = r.map_err(|mut t| {
            if let TrapKind::AdBudget { needed, exact, .. } = &mut t.kind {
                if let Some(m) = least.filter(|m| *m < *needed) {
                    (*needed, *exact) = (m, false);
                }
            }
            t
        });
        if self.spilled == 0 {
            return r;
        }
        let mut needed = self
            .spilled
            .saturating_add(self.comms.len() * 8 + self.blk.len() * 4);
        let mut exact = true;
        if let Some(m) = least.filter(|m| *m < needed) {
            needed = m;
            exact = false;
        }
        self.spilled = 0;
        let at = self.spill_at.take();
        let native_at = self.native_spill_at.take();
        self.comms.clear();
        self.blk.clear();
        match r {
            Err(t) if !matches!(t.kind, TrapKind::StackUnderflow | TrapKind::BadBlockId(_)) => {
                Err(t)
            }
            _ => {
                let kind = TrapKind::AdBudget {
                    budget: self.stack_limit(),
                    needed,
                    exact,
                };
                // Named where the stacks first filled up: the function
                // whose code holds that address.
                let w = std::mem::size_of::<Instr>();
                let place = match (at, native_at) {
                    (Some(0), Some(site)) => Some(site),
                    _ => at.and_then(|a| {
                        (0..prog.len()).find_map(|i| {
                            let id = FuncId(i as u32);
                            let func = prog.get(id)?;
                            let off = (a as usize).checked_sub(func.code.as_ptr() as usize)?;
                            (off < func.code.len() * w).then_some((id, off / w))
                        })
                    }),
                };
                Err(match place {
                    Some((id, pc)) => trap_in(prog, id, pc, kind),
                    None => host_trap(kind),
                })
            }
        }
    }

    /// `t` with the calls that led to it (the frames `exec` left suspended
    /// when it trapped), which are dropped: the call stack is only walked
    /// on this cold path, never by the interpreter loop.
    #[cold]
    #[inline(never)]
    pub(super) fn with_call_stack(&mut self, prog: &Program, mut t: Trap) -> Trap {
        if !self.frames.is_empty() {
            t.stack = call_stack(prog, &self.frames);
            self.frames.clear();
        }
        t
    }

    /// The checks of a call from the host, in order, before anything runs:
    /// `f` exists and takes `args`, it is verified, and the depth limit
    /// allows its frame. `Some` of its function and frame image if they
    /// pass.
    #[inline(always)]
    pub(super) fn entry<'p>(
        &self,
        prog: &'p Program,
        f: FuncId,
        args: &[u64],
    ) -> Option<(&'p Function, &'p [u64])> {
        let func = prog.get(f)?;
        if func.param_types.len() != args.len() || self.limits.max_call_depth == 0 {
            return None;
        }
        Some((func, prog.frame_init(f)?))
    }

    /// Why [`Vm::entry`] refused a call from the host.
    #[cold]
    #[inline(never)]
    pub(super) fn entry_trap(&self, prog: &Program, f: FuncId, args: &[u64]) -> Trap {
        let Some(func) = prog.get(f) else {
            return host_trap(TrapKind::ArgMismatch(format!("no function {f}")));
        };
        if func.param_types.len() != args.len() {
            return host_trap(TrapKind::ArgMismatch(format!(
                "@{} takes {} argument(s), got {}",
                func.name,
                func.param_types.len(),
                args.len()
            )));
        }
        if !prog.is_verified(f) {
            return trap_in(prog, f, 0, TrapKind::NotVerified);
        }
        // Not even the entry function's frame is allowed.
        trap_in(prog, f, 0, TrapKind::CallDepth { limit: 0 })
    }
}
