//! The interpreter loop (`Vm::exec`) and what it calls on its paths: entering a
//! frame, growing the frame, register and AD stacks within the limits and the
//! memory budget, looking at fuel and the interrupt flag, and building a trap.
//! Kept in one file so that these stay in the interpreter loop's codegen unit
//! (see `scripts/callgrind.sh`).

use super::*;

impl Vm {
    /// Prepare a frame whose registers past the parameters start at
    /// `start`: they exist and hold `init`, the callee's
    /// [`Program::frame_init`] (constants, then zeros; the parameters are
    /// written by the caller afterwards). `init` is a whole number of
    /// `FRAME_CHUNK`s (so up to `FRAME_CHUNK - 1` registers past the frame,
    /// which belong to no live frame, are overwritten too), so that the
    /// copy has one of a few fixed lengths for most frames.
    /// The register stack grows within the memory budget.
    #[inline(always)]
    pub(super) fn enter(&mut self, start: usize, init: &[u64]) -> Result<(), TrapKind> {
        let max = self.limits.max_memory_bytes;
        let (frames, comms, blk, heap) = (&self.frames, &self.comms, &self.blk, &mut self.heap);
        load_frame(&mut self.regs, start, init, |regs, end| {
            let others = stores_bytes(0, frames, comms, blk);
            let r = grow_regs_within(regs, end, max, others.saturating_add(heap.held_bytes()));
            heap.set_memory(max, others.saturating_add(regs.capacity() * 8));
            r
        })
    }

    /// Room for more suspended frames (a full frame stack at a call),
    /// within the memory budget.
    #[cold]
    #[inline(never)]
    pub(super) fn grow_frames(&mut self) -> Result<(), TrapKind> {
        let max = self.limits.max_memory_bytes;
        let size = std::mem::size_of::<Frame>();
        let others = self
            .memory_bytes()
            .saturating_sub(self.frames.capacity() * size);
        let most = max.saturating_sub(others) / size;
        let len = self.frames.len();
        if len >= most {
            return Err(TrapKind::MemoryLimit { limit: max });
        }
        let cap = (self.frames.capacity() * 2).max(len + 64).min(most);
        crate::oom::bypass(|| self.frames.try_reserve_exact(cap - len))
            .map_err(|_| TrapKind::OutOfMemory)?;
        self.sync_memory();
        Ok(())
    }

    /// Bytes the VM holds: what `Limits::max_memory_bytes` bounds.
    pub(super) fn memory_bytes(&self) -> usize {
        stores_bytes(self.regs.capacity(), &self.frames, &self.comms, &self.blk)
            .saturating_add(self.heap.held_bytes())
    }

    /// Tell the heap what the other stores hold of the memory budget.
    pub(super) fn sync_memory(&mut self) {
        let others = stores_bytes(self.regs.capacity(), &self.frames, &self.comms, &self.blk);
        self.heap.set_memory(self.limits.max_memory_bytes, others);
    }

    /// The byte limit for the AD stacks and what sets it: `max_stack_bytes`,
    /// the AD budget if that is less, or what the memory budget leaves them
    /// if that is less still.
    pub(super) fn stack_budget(&self) -> (usize, StackBound) {
        let max = self.limits.max_memory_bytes;
        let stacks = self.stack_capacity_bytes();
        let left = max.saturating_sub(self.memory_bytes().saturating_sub(stacks));
        let mut bound = (self.limits.max_stack_bytes, StackBound::Stack);
        if let Some(b) = self.limits.ad_budget.filter(|b| *b < bound.0) {
            bound = (b, StackBound::Budget);
        }
        // A checkpointed call's segment (`ckpt.rs`).
        if let Some((cap, suspend)) = self.segment.filter(|s| s.0 <= bound.0) {
            let kind = if suspend {
                StackBound::Segment
            } else {
                StackBound::Budget
            };
            bound = (cap, kind);
        }
        if left < bound.0 {
            bound = (left, StackBound::Memory);
        }
        bound
    }

    /// The least of `max_stack_bytes` and the AD budget.
    pub(super) fn stack_limit(&self) -> usize {
        self.limits
            .ad_budget
            .map_or(self.limits.max_stack_bytes, |b| {
                b.min(self.limits.max_stack_bytes)
            })
    }

    /// A stack limit trap from a limit the memory budget set is a memory
    /// limit trap.
    pub(super) fn stack_trap(&self, bound: StackBound, k: TrapKind) -> TrapKind {
        match k {
            TrapKind::StackLimit { .. } if bound == StackBound::Memory => TrapKind::MemoryLimit {
                limit: self.limits.max_memory_bytes,
            },
            k => k,
        }
    }

    /// The AD stacks are full at the AD budget (at the instruction whose
    /// address is `at`, [`Cursor::addr`], which the trap names if it is
    /// the first time): count what they
    /// hold as spilled and empty them, so that the call runs on and learns what
    /// storing everything needs (it ends in [`TrapKind::AdBudget`], see
    /// [`Vm::call_raw`]).
    #[cold]
    #[inline(never)]
    pub(super) fn spill(&mut self, at: u64) {
        if self.spill_at.is_none() {
            self.spill_at = Some(at);
        }
        let held = self.comms.len() * 8 + self.blk.len() * 4;
        self.spilled = self.spilled.saturating_add(held);
        self.comms.clear();
        self.blk.clear();
    }

    /// Note the bytes the AD stacks reserve now, after growing, in the
    /// high-water mark.
    #[inline(always)]
    pub(super) fn note_high_water(&mut self) {
        let held = self.stack_capacity_bytes().saturating_add(self.snap_bytes);
        self.grown_stack = self.grown_stack.max(held);
    }

    #[cold]
    #[inline(never)]
    pub(super) fn trap(&mut self, prog: &Program, f: FuncId, pc: usize, kind: TrapKind) -> Trap {
        self.sample_peak();
        trap_at(prog, prog.func(f), pc, kind)
    }

    /// Note the bytes the AD stacks hold now, at the end of a call from
    /// the host (see [`Vm::peak_stack_bytes`]).
    #[inline(always)]
    pub(super) fn sample_peak(&mut self) {
        let bytes = self.comms.len() * 8 + self.blk.len() * 4;
        self.peak_stack = self.peak_stack.max(bytes);
    }

    /// Room for `n` more values on the comms stack, which has less than `n`
    /// spare: 1 for a `comms.push` on a full stack, `n` for
    /// `comms.reserve %v, n`.
    #[cold]
    #[inline(never)]
    pub(super) fn reserve_comms(&mut self, n: usize, at: u64) -> Result<(), TrapKind> {
        let (limit, bound) = self.stack_budget();
        let mut r = grow_stack(&mut self.comms, &mut self.blk, n, limit);
        if r.is_err() && bound == StackBound::Segment {
            self.suspend_need = n.saturating_mul(8);
            return r;
        }
        if r.is_err() && bound == StackBound::Budget {
            self.spill(at);
            r = grow_stack(&mut self.comms, &mut self.blk, n, limit).map_err(|_| {
                TrapKind::AdBudget {
                    budget: limit,
                    needed: self.spilled.saturating_add(n.saturating_mul(8)),
                    exact: false,
                }
            });
        }
        self.note_high_water();
        self.sync_memory();
        r.map_err(|k| self.stack_trap(bound, k))
    }

    #[cold]
    pub(super) fn grow_blk(&mut self, at: u64) -> Result<(), TrapKind> {
        let (limit, bound) = self.stack_budget();
        let mut r = grow_stack(&mut self.blk, &mut self.comms, 1, limit);
        if r.is_err() && bound == StackBound::Segment {
            self.suspend_need = 4;
            return r;
        }
        if r.is_err() && bound == StackBound::Budget {
            self.spill(at);
            r = grow_stack(&mut self.blk, &mut self.comms, 1, limit).map_err(|_| {
                TrapKind::AdBudget {
                    budget: limit,
                    needed: self.spilled.saturating_add(4),
                    exact: false,
                }
            });
        }
        self.note_high_water();
        self.sync_memory();
        r.map_err(|k| self.stack_trap(bound, k))
    }

    /// Bytes reserved by the two AD stacks (what `max_stack_bytes` bounds).
    pub(super) fn stack_capacity_bytes(&self) -> usize {
        self.comms.capacity() * 8 + self.blk.capacity() * 4
    }

    /// Check a call from the host, then run until the entry function
    /// returns (its results in `self.results`) or a trap. Either way the
    /// peak of the AD stacks is sampled at the end.
    #[inline(never)]
    pub(super) fn exec(&mut self, prog: &Program, entry: FuncId, args: &[u64]) -> Result<(), Trap> {
        let fuel = self.limits.fuel.unwrap_or(u64::MAX);
        let max_depth = self.limits.max_call_depth;
        let max_array = self.limits.max_array_len;
        let max_heap = self.limits.max_heap_bytes;
        // A checkpointed forward call resumes where it suspended
        // (`ckpt.rs`): its frames and registers are as it left them, or
        // as a snapshot restored them.
        let (mut f, mut fid, mut base, pc, before) = match self.resume.take() {
            Some(r) => (prog.func(r.fid), r.fid, r.base, r.pc, r.executed),
            None => {
                let Some((f, init)) = self.entry(prog, entry, args) else {
                    return Err(self.entry_trap(prog, entry, args));
                };
                self.frames.clear();
                if self.stack_capacity_bytes() > self.stack_limit {
                    // The limit was lowered since the stacks grew: give back what
                    // is not in use, so that pushes stay within it.
                    self.comms.shrink_to_fit();
                    self.blk.shrink_to_fit();
                }
                // `args` has one value per parameter (the entry checks).
                if let Err(k) = load_entry_frame(&mut self.regs, args, init, grow_regs) {
                    return Err(self.trap(prog, entry, 0, k));
                }
                (f, entry, 0usize, 0usize, 0u64)
            }
        };
        // `load_entry_frame` made `regs` at least `nparams + init.len() >=
        // nregs` long (the verifier made `init` at least `nregs - nparams`
        // long); a resumed call's registers are at least `base + nregs`
        // long (`Vm::suspend` kept them, `ckpt::restore` copied them).
        let mut w = Window::resume(&mut self.regs, base, f.nregs());
        let mut cur = Cursor::new(&f.code, pc);

        // Executed instructions are counted in bytes of code, `W` per
        // instruction, so that the hot path needs no instruction index:
        // `done!()`, that is `meter + address of the current instruction +
        // W`, is `W` times the instructions executed so far, the current one
        // included. A straight-line run is charged when it ends (taken
        // jump, call, return): the cursor moves to `ip` and `meter` becomes
        // `done - ip`, so the count goes on from there. Wrapping arithmetic:
        // only differences of addresses matter. (A u64 of bytes holds
        // 1.5e18 instructions.)
        let mut meter: u64 = before.wrapping_sub(cur.addr());
        // Fuel and the interrupt flag are looked at (at a taken jump or a
        // call) once `done` passes `next_poll` (also in bytes): one compare
        // in the hot path.
        let mut next_poll: u64 = 0;
        // Calls take the slow path (depth limit or a full frame stack) once
        // `frames.len()` reaches this. The entry checks made
        // `max_depth >= 1`.
        let mut room = self.frames.capacity().min(max_depth - 1);

        macro_rules! done {
            () => {
                meter.wrapping_add(cur.addr()).wrapping_add(W)
            };
        }
        macro_rules! trap {
            ($kind:expr) => {{
                self.executed_bytes = done!();
                return Err(self.trap(prog, fid, cur.pc(), $kind));
            }};
        }
        // The entry function returns, with `$done` = `done!()` at its
        // `ret` or `ret.n`. Fuel is otherwise looked at only at taken jumps
        // and calls: a straight-line run past the limit is caught here, at
        // the return.
        macro_rules! exit {
            ($done:expr) => {{
                self.executed_bytes = $done;
                if let Some(fuel) = self.limits.fuel {
                    if $done / W > fuel {
                        trap!(TrapKind::OutOfFuel { limit: fuel });
                    }
                }
                self.sample_peak();
                return Ok(());
            }};
        }
        // At a taken jump or a call, with `$done` = `done!()` there and
        // the cursor still on the jump or call.
        macro_rules! poll {
            ($done:expr) => {{
                if $done > next_poll {
                    // The flag is borrowed here, not cloned at entry: an
                    // `Arc` clone is an atomic increment and decrement per
                    // call.
                    match poll($done / W, fuel, &self.interrupt) {
                        Ok(n) => next_poll = n.saturating_mul(W),
                        Err(k) => trap!(k),
                    }
                }
            }};
        }
        macro_rules! fr {
            ($r:expr) => {
                f64::from_bits(w.get($r as u32))
            };
        }
        macro_rules! ir {
            ($r:expr) => {
                w.get($r as u32) as i64
            };
        }
        macro_rules! setf {
            ($r:expr, $v:expr) => {
                w.set($r as u32, ($v).to_bits())
            };
        }
        macro_rules! seti {
            ($r:expr, $v:expr) => {
                w.set($r as u32, ($v) as u64)
            };
        }
        macro_rules! setb {
            ($r:expr, $v:expr) => {
                w.set($r as u32, ($v) as u64)
            };
        }
        macro_rules! ff {
            ($ins:expr, |$a:ident, $b:ident| $e:expr) => {{
                let $a = fr!($ins.r1);
                let $b = fr!($ins.r2);
                setf!($ins.r0, $e);
            }};
        }
        macro_rules! uf {
            ($ins:expr, |$a:ident| $e:expr) => {{
                let $a = fr!($ins.r1);
                setf!($ins.r0, $e);
            }};
        }
        macro_rules! cmpf {
            ($ins:expr, $op:tt) => {{
                let a = fr!($ins.r1);
                let b = fr!($ins.r2);
                setb!($ins.r0, a $op b);
            }};
        }
        macro_rules! cmpi {
            ($ins:expr, $op:tt) => {{
                let a = ir!($ins.r1);
                let b = ir!($ins.r2);
                setb!($ins.r0, a $op b);
            }};
        }
        // A taken jump to `target`: charge the finished run of
        // instructions and, once the step count has passed `next_poll`,
        // check fuel and the interrupt flag (only loops can run long, but
        // telling backward jumps from forward ones would cost more than
        // the compare).
        macro_rules! goto {
            ($target:expr) => {{
                let done = done!();
                poll!(done);
                cur.jump($target);
                meter = done.wrapping_sub(cur.addr());
                continue;
            }};
        }

        // Fused compare-and-branch: jump if `r0 op r1` holds (or, with
        // `not`, fails).
        macro_rules! jcmp {
            ($ins:expr, $get:ident, $op:tt) => {{
                if $get!($ins.r0) $op $get!($ins.r1) {
                    goto!($ins.x);
                }
            }};
            ($ins:expr, $get:ident, not $op:tt) => {{
                // f64: not the opposite comparison, which nan also fails.
                let holds = $get!($ins.r0) $op $get!($ins.r1);
                if !holds {
                    goto!($ins.x);
                }
            }};
        }
        // `r0 = r1[$index]` (`aget`, `aget.add`): out of bounds traps with
        // the index.
        macro_rules! load {
            ($ins:expr, $index:expr) => {{
                let i = $index;
                match self.heap.get(w.get($ins.r1 as u32)) {
                    Some(a) => match a.get(i as usize) {
                        Some(v) if i >= 0 => setf!($ins.r0, *v),
                        _ => trap!(TrapKind::OutOfBounds {
                            index: i,
                            len: a.len()
                        }),
                    },
                    None => trap!(TrapKind::BadHandle),
                }
            }};
        }
        // `shadow(r0)[r1] += $v` (`shadow.acc`, `shadow.acc.mul`, with `$v`
        // computed before the shadow is looked up): out of bounds traps
        // with the index, a missing shadow as `NoShadow` outside AD mode.
        macro_rules! shadow_add {
            ($ins:expr, $v:expr) => {{
                let h = w.get($ins.r0 as u32);
                let i = ir!($ins.r1);
                let v = $v;
                let ad = self.heap.is_ad();
                match self.heap.shadow_mut(h) {
                    Some(s) => {
                        let len = s.len();
                        match s.get_mut(i as usize) {
                            Some(slot) if i >= 0 => *slot += v,
                            _ => trap!(TrapKind::OutOfBounds { index: i, len }),
                        }
                    }
                    None if !ad => trap!(TrapKind::NoShadow),
                    None => trap!(TrapKind::BadHandle),
                }
            }};
        }
        // A push found the stacks full (the error of `reserve_comms` or
        // `grow_blk`): in a checkpointed forward call (`ckpt.rs`) the call
        // suspends at the push, else the trap.
        macro_rules! full {
            ($k:expr) => {{
                if self.suspend_need != 0 {
                    let at = done!().wrapping_sub(W);
                    return Err(self.suspend(fid, cur.pc(), base, at));
                }
                trap!($k);
            }};
        }
        // A pop found its stack empty: the stacks are refilled with the
        // segment before (recomputed from a checkpoint, `ckpt.rs`) and the
        // pop runs again, or it is a stack underflow.
        macro_rules! underflow {
            () => {{
                match self.refill() {
                    Ok(true) => {
                        meter = meter.wrapping_sub(W);
                        continue;
                    }
                    Ok(false) => trap!(TrapKind::StackUnderflow),
                    Err(k) => trap!(k),
                }
            }};
        }
        // Room for one more value on the comms stack (a checked push:
        // `comms.push`, `mul.push`), growing it on the cold path or
        // trapping; the push after it needs no second check.
        macro_rules! room_for_push {
            () => {
                if self.comms.len() == self.comms.capacity() {
                    if let Err(k) = self.reserve_comms(1, cur.addr()) {
                        full!(k);
                    }
                }
            };
        }
        // Step-and-branch: `r0 += r1`, then jump if `r0 op r2`, `r2` read
        // after the write (it may be `r0` itself).
        macro_rules! jstep {
            ($ins:expr, $op:tt) => {{
                let v = ir!($ins.r0).wrapping_add(ir!($ins.r1));
                seti!($ins.r0, v);
                if v $op ir!($ins.r2) {
                    goto!($ins.x);
                }
            }};
        }

        loop {
            let ins = cur.ins();
            match ins.op {
                Op::AddF => ff!(ins, |a, b| a + b),
                Op::SubF => ff!(ins, |a, b| a - b),
                Op::MulF => ff!(ins, |a, b| a * b),
                Op::DivF => ff!(ins, |a, b| a / b),
                Op::PowF => ff!(ins, |a, b| a.powf(b)),
                Op::MinF => ff!(ins, |a, b| if b < a { b } else { a }),
                Op::MaxF => ff!(ins, |a, b| if b > a { b } else { a }),
                Op::NegF => uf!(ins, |a| -a),
                Op::Sin => uf!(ins, |a| a.sin()),
                Op::Cos => uf!(ins, |a| a.cos()),
                Op::SinCos => {
                    // LLVM turns the two into one call to `sincos`, which
                    // returns the same bits as `sin` and `cos` (glibc;
                    // checked by vm/tests/it/semantics.rs).
                    let a = fr!(ins.r2);
                    let (s, c) = (a.sin(), a.cos());
                    setf!(ins.r0, s);
                    setf!(ins.r1, c);
                }
                Op::Tan => uf!(ins, |a| a.tan()),
                Op::Exp => uf!(ins, |a| a.exp()),
                Op::Log => uf!(ins, |a| a.ln()),
                Op::Sqrt => uf!(ins, |a| a.sqrt()),
                Op::Tanh => uf!(ins, |a| a.tanh()),
                Op::AbsF => uf!(ins, |a| a.abs()),
                Op::Erf => uf!(ins, |a| libm::erf(a)),
                Op::Erfc => uf!(ins, |a| libm::erfc(a)),
                Op::Atan => uf!(ins, |a| a.atan()),
                Op::Asin => uf!(ins, |a| a.asin()),
                Op::Acos => uf!(ins, |a| a.acos()),
                Op::Atan2 => ff!(ins, |a, b| a.atan2(b)),
                Op::Sinh => uf!(ins, |a| a.sinh()),
                Op::Cosh => uf!(ins, |a| a.cosh()),
                Op::Log1p => uf!(ins, |a| a.ln_1p()),
                Op::Expm1 => uf!(ins, |a| a.exp_m1()),
                Op::Log2 => uf!(ins, |a| a.log2()),
                Op::Log10 => uf!(ins, |a| a.log10()),
                Op::Cbrt => uf!(ins, |a| a.cbrt()),
                Op::Hypot => ff!(ins, |a, b| a.hypot(b)),
                Op::Floor => uf!(ins, |a| a.floor()),
                Op::Ceil => uf!(ins, |a| a.ceil()),
                Op::Round => uf!(ins, |a| a.round()),
                Op::Trunc => uf!(ins, |a| a.trunc()),
                Op::AddI => seti!(ins.r0, ir!(ins.r1).wrapping_add(ir!(ins.r2))),
                Op::SubI => seti!(ins.r0, ir!(ins.r1).wrapping_sub(ir!(ins.r2))),
                Op::MulI => seti!(ins.r0, ir!(ins.r1).wrapping_mul(ir!(ins.r2))),
                Op::DivI => {
                    let b = ir!(ins.r2);
                    if b == 0 {
                        trap!(TrapKind::DivByZero);
                    }
                    seti!(ins.r0, ir!(ins.r1).wrapping_div(b));
                }
                Op::RemI => {
                    let b = ir!(ins.r2);
                    if b == 0 {
                        trap!(TrapKind::RemByZero);
                    }
                    seti!(ins.r0, ir!(ins.r1).wrapping_rem(b));
                }
                Op::MinI => {
                    let (a, b) = (ir!(ins.r1), ir!(ins.r2));
                    seti!(ins.r0, if b < a { b } else { a });
                }
                Op::MaxI => {
                    let (a, b) = (ir!(ins.r1), ir!(ins.r2));
                    seti!(ins.r0, if b > a { b } else { a });
                }
                Op::NegI => seti!(ins.r0, ir!(ins.r1).wrapping_neg()),
                Op::LtF => cmpf!(ins, <),
                Op::LeF => cmpf!(ins, <=),
                Op::GtF => cmpf!(ins, >),
                Op::GeF => cmpf!(ins, >=),
                Op::EqF => cmpf!(ins, ==),
                Op::NeF => cmpf!(ins, !=),
                Op::LtI => cmpi!(ins, <),
                Op::LeI => cmpi!(ins, <=),
                Op::GtI => cmpi!(ins, >),
                Op::GeI => cmpi!(ins, >=),
                Op::EqI => cmpi!(ins, ==),
                Op::NeI => cmpi!(ins, !=),
                Op::And => setb!(
                    ins.r0,
                    (w.get(ins.r1 as u32) != 0) & (w.get(ins.r2 as u32) != 0)
                ),
                Op::Or => setb!(
                    ins.r0,
                    (w.get(ins.r1 as u32) != 0) | (w.get(ins.r2 as u32) != 0)
                ),
                Op::Not => setb!(ins.r0, w.get(ins.r1 as u32) == 0),
                Op::Select => {
                    let v = if w.get(ins.r1 as u32) != 0 {
                        w.get(ins.r2 as u32)
                    } else {
                        w.get(ins.x)
                    };
                    w.set(ins.r0 as u32, v);
                }
                Op::Mov | Op::NoGrad => w.set(ins.r0 as u32, w.get(ins.r1 as u32)),
                Op::ItoF => setf!(ins.r0, ir!(ins.r1) as f64),
                Op::FtoI => {
                    let x = fr!(ins.r1).trunc();
                    // i64 covers [-2^63, 2^63).
                    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x) {
                        trap!(TrapKind::FtoiInvalid(fr!(ins.r1)));
                    }
                    seti!(ins.r0, x as i64);
                }
                Op::ANew => {
                    let n = ir!(ins.r1);
                    if n < 0 {
                        trap!(TrapKind::NegativeLength(n));
                    }
                    if n as u64 > max_array as u64 {
                        trap!(TrapKind::ArrayTooLarge {
                            len: n,
                            limit: max_array
                        });
                    }
                    match self.heap.alloc(n as usize, max_heap) {
                        Ok(h) => w.set(ins.r0 as u32, h),
                        Err(k) => trap!(k),
                    }
                }
                Op::ALen => match self.heap.get(w.get(ins.r1 as u32)) {
                    Some(a) => seti!(ins.r0, a.len()),
                    None => trap!(TrapKind::BadHandle),
                },
                Op::AGet => load!(ins, ir!(ins.r2)),
                Op::AGetAdd => load!(ins, ir!(ins.r2).wrapping_add(ir!(ins.x))),
                Op::ASet => {
                    let i = ir!(ins.r1);
                    let v = fr!(ins.r2);
                    match self.heap.get_mut(w.get(ins.r0 as u32)) {
                        Some(a) => {
                            let len = a.len();
                            match a.get_mut(i as usize) {
                                Some(slot) if i >= 0 => *slot = v,
                                _ => trap!(TrapKind::OutOfBounds { index: i, len }),
                            }
                        }
                        None => trap!(TrapKind::BadHandle),
                    }
                }
                Op::Call | Op::CallAcc | Op::CallN => {
                    let site = verified(&f.sites, ins.x);
                    let callee_id = site.func;
                    let Some(init) = verified(prog.frame_inits(), callee_id.0) else {
                        trap!(TrapKind::NotVerified);
                    };
                    let done = done!();
                    // One compare for the depth limit and the frame
                    // stack's capacity: `room` is the smaller of the two.
                    if self.frames.len() >= room {
                        if self.frames.len() + 1 >= max_depth {
                            trap!(TrapKind::CallDepth { limit: max_depth });
                        }
                        match self.grow_frames() {
                            Ok(()) => room = self.frames.capacity().min(max_depth - 1),
                            Err(k) => {
                                // Where a look at fuel and the interrupt
                                // flag is due, its trap comes first, as for
                                // any call.
                                if done > next_poll {
                                    if let Err(k) = poll(done / W, fuel, &self.interrupt) {
                                        trap!(k);
                                    }
                                }
                                trap!(k);
                            }
                        }
                    }
                    // The site fits the callee's signature (argument count,
                    // kind of return): the verifier checked it when it
                    // verified this function, and replacing the callee
                    // since would have unverified this function
                    // (`Program::set`), which could then not be running.
                    let callee = verified(prog.funcs(), callee_id.0);
                    poll!(done);
                    let new_base = base + f.nregs();
                    // The callee's parameters are as many as the site's
                    // arguments (verifier check 4).
                    if let Err(k) = self.enter(new_base + site.args.len(), init) {
                        trap!(k);
                    }
                    copy_args(&mut self.regs, base, new_base, &site.args);
                    // `frames.len() < room <= capacity`, checked above.
                    push_reserved(
                        &mut self.frames,
                        Frame {
                            func: fid,
                            base,
                            call: cur.offset(),
                        },
                    );
                    fid = callee_id;
                    f = callee;
                    base = new_base;
                    // `enter` made `regs` at least `base + nparams +
                    // init.len() >= base + nregs` long: the verifier made
                    // `init` at least `nregs - nparams` long.
                    w = Window::resume(&mut self.regs, base, f.nregs());
                    cur = Cursor::new(&f.code, 0);
                    meter = done.wrapping_sub(cur.addr());
                    continue;
                }
                Op::Ret => {
                    let v = w.get(ins.r0 as u32);
                    let done = done!();
                    let Some(frame) = self.frames.pop() else {
                        self.results.clear();
                        self.results.push(v);
                        exit!(done);
                    };
                    fid = frame.func;
                    f = verified(prog.funcs(), fid.0);
                    base = frame.base;
                    w = Window::resume(&mut self.regs, base, f.nregs());
                    // Back at the `call`, whose `r0` receives the value;
                    // the loop's `advance` moves past it.
                    cur = Cursor::at_offset(&f.code, frame.call);
                    w.set(cur.ins().r0 as u32, v);
                    meter = done.wrapping_sub(cur.addr()).wrapping_sub(W);
                }
                Op::RetN => {
                    let list = verified(&f.lists, ins.x);
                    let done = done!();
                    let Some(frame) = self.frames.pop() else {
                        self.results.clear();
                        for r in list {
                            self.results.push(w.get(*r as u32));
                        }
                        exit!(done);
                    };
                    // The callee's window stays valid (nothing moves the
                    // register stack here): its returned registers are
                    // read through it, the caller's accumulators written
                    // through the caller's (both verified register
                    // operands of their functions).
                    let callee = w;
                    fid = frame.func;
                    f = verified(prog.funcs(), fid.0);
                    base = frame.base;
                    w = Window::resume(&mut self.regs, base, f.nregs());
                    // Back at the `call.acc`, whose site lists the
                    // accumulators; the loop's `advance` moves past it.
                    cur = Cursor::at_offset(&f.code, frame.call);
                    let site = verified(&f.sites, cur.ins().x);
                    // `call.n` writes the results as they are (any types:
                    // the verifier matched the site's registers to the
                    // callee's return types), `call.acc` adds them to its
                    // accumulators. Two loops, one of them empty, rather
                    // than a branch between them: a branch here undoes
                    // LLVM's replication of the dispatch into most
                    // handlers (see `scripts/callgrind.sh`).
                    let written = if cur.ins().op == Op::CallN {
                        list.len()
                    } else {
                        0
                    };
                    for (r, dst) in list[..written].iter().zip(&site.rets) {
                        w.set(u32::from(*dst), callee.get(u32::from(*r)));
                    }
                    for (r, acc) in list[written..].iter().zip(&site.rets) {
                        let v = f64::from_bits(callee.get(*r as u32));
                        setf!(*acc, fr!(*acc) + v);
                    }
                    meter = done.wrapping_sub(cur.addr()).wrapping_sub(W);
                }
                Op::Jmp => goto!(ins.x),
                Op::JmpIf => {
                    if w.get(ins.r0 as u32) != 0 {
                        goto!(ins.x);
                    }
                }
                Op::JmpIfNot => {
                    if w.get(ins.r0 as u32) == 0 {
                        goto!(ins.x);
                    }
                }
                Op::JmpLtI => jcmp!(ins, ir, <),
                Op::JmpLeI => jcmp!(ins, ir, <=),
                Op::JmpGtI => jcmp!(ins, ir, >),
                Op::JmpGeI => jcmp!(ins, ir, >=),
                Op::JmpEqI => jcmp!(ins, ir, ==),
                Op::JmpNeI => jcmp!(ins, ir, !=),
                Op::JmpLtF => jcmp!(ins, fr, <),
                Op::JmpLeF => jcmp!(ins, fr, <=),
                Op::JmpGtF => jcmp!(ins, fr, >),
                Op::JmpGeF => jcmp!(ins, fr, >=),
                Op::JmpEqF => jcmp!(ins, fr, ==),
                Op::JmpNeF => jcmp!(ins, fr, !=),
                Op::JmpNotLtF => jcmp!(ins, fr, not <),
                Op::JmpNotLeF => jcmp!(ins, fr, not <=),
                Op::JmpNotGtF => jcmp!(ins, fr, not >),
                Op::JmpNotGeF => jcmp!(ins, fr, not >=),
                Op::JmpNotEqF => jcmp!(ins, fr, not ==),
                Op::JmpNotNeF => jcmp!(ins, fr, not !=),
                Op::JmpStepLtI => jstep!(ins, <),
                Op::JmpStepLeI => jstep!(ins, <=),
                Op::JmpStepGtI => jstep!(ins, >),
                Op::JmpStepGeI => jstep!(ins, >=),
                Op::JmpStepEqI => jstep!(ins, ==),
                Op::JmpStepNeI => jstep!(ins, !=),
                Op::BlkPush => {
                    if self.blk.len() == self.blk.capacity() {
                        if let Err(k) = self.grow_blk(cur.addr()) {
                            full!(k);
                        }
                    }
                    self.blk.push(ins.x);
                }
                Op::BlkPop => {
                    let Some(id) = self.blk.pop() else {
                        underflow!();
                    };
                    let table = verified(&f.tables, ins.x);
                    // Id 0 by a conditional branch of its own, the rest
                    // through the table. Most pops choose between two
                    // blocks (an if/else join, a loop exit): the branch
                    // direction enters the predictor's history, so the
                    // dispatch after it is predicted as the primal's
                    // branch is. A table load alone leaves the dispatch
                    // to the indirect predictor, which on AMD Zen 1 loses
                    // about 10 ns per element of branchy's gradient on
                    // its data-dependent signs (docs/benchmarks.md).
                    if id == 0 {
                        if let Some(&t) = table.first() {
                            goto!(t);
                        }
                    }
                    match table.get(id as usize) {
                        Some(t) => goto!(*t),
                        None => trap!(TrapKind::BadBlockId(id)),
                    }
                }
                Op::CommsPush => {
                    room_for_push!();
                    push_reserved(&mut self.comms, w.get(ins.r0 as u32));
                }
                Op::CommsReserve => {
                    if self.comms.capacity() - self.comms.len() < ins.x as usize {
                        if let Err(k) = self.reserve_comms(ins.x as usize, cur.addr()) {
                            full!(k);
                        }
                    }
                    push_reserved(&mut self.comms, w.get(ins.r0 as u32));
                }
                // No capacity check: the verifier proved a `comms.reserve`
                // made room (check 9; see `regs::push_reserved`).
                Op::CommsPushR => push_reserved(&mut self.comms, w.get(ins.r0 as u32)),
                Op::CommsPop => {
                    let Some(&v) = self.comms.last() else {
                        underflow!();
                    };
                    let len = self.comms.len();
                    w.set(ins.r0 as u32, v);
                    // The length read before the write (which only a
                    // register takes): no second emptiness check.
                    self.comms.truncate(len - 1);
                }
                Op::Acc => setf!(ins.r0, fr!(ins.r0) + fr!(ins.r1)),
                Op::AccNeg => setf!(ins.r0, fr!(ins.r0) - fr!(ins.r1)),
                Op::AccMul => setf!(ins.r0, fr!(ins.r0) + mul_z(fr!(ins.r1), fr!(ins.r2))),
                Op::MulAddF => setf!(ins.r0, fr!(ins.r0) + fr!(ins.r1) * fr!(ins.r2)),
                // `x` holds the tangent's register (low 16 bits) and the
                // factor's (high 16), proved in range by the verifier.
                Op::AddMulT => {
                    let (x, t, c) = (fr!(ins.r2), fr!(ins.x & 0xffff), fr!(ins.x >> 16));
                    let (s, ds) = (fr!(ins.r0) + x * c, fr!(ins.r1) + mul_z(t, c));
                    setf!(ins.r1, ds);
                    setf!(ins.r0, s);
                }
                Op::AddSqT => {
                    let (x, t, k) = (fr!(ins.r2), fr!(ins.x & 0xffff), fr!(ins.x >> 16));
                    let (s, ds) = (fr!(ins.r0) + x * x, fr!(ins.r1) + mul_z(mul_z(t, x), k));
                    setf!(ins.r1, ds);
                    setf!(ins.r0, s);
                }
                Op::MulZ => ff!(ins, |a, b| mul_z(a, b)),
                Op::AddMulZ => setf!(ins.r0, fr!(ins.r1) + mul_z(fr!(ins.r2), fr!(ins.x))),
                Op::TMaxF => {
                    let (m, e) = (fr!(ins.r1), fr!(ins.r2));
                    if e > m {
                        let d = w.get(ins.x);
                        setf!(ins.r1, e);
                        w.set(ins.r0 as u32, d);
                    }
                }
                Op::TMinF => {
                    let (m, e) = (fr!(ins.r1), fr!(ins.r2));
                    if e < m {
                        let d = w.get(ins.x);
                        setf!(ins.r1, e);
                        w.set(ins.r0 as u32, d);
                    }
                }
                Op::TMulZ => setf!(
                    ins.r0,
                    mul_z(fr!(ins.r0), fr!(ins.r1)) + mul_z(fr!(ins.r2), fr!(ins.x))
                ),
                Op::TProdZ => setf!(
                    ins.r0,
                    mul_z(fr!(ins.r1), fr!(ins.r2)) + mul_z(fr!(ins.x & 0xffff), fr!(ins.x >> 16))
                ),
                Op::MulMulZ => setf!(ins.r0, mul_z(mul_z(fr!(ins.r1), fr!(ins.r2)), fr!(ins.x))),
                Op::AccMulMul => setf!(
                    ins.r0,
                    fr!(ins.r0) + mul_z(mul_z(fr!(ins.r1), fr!(ins.r2)), fr!(ins.x))
                ),
                Op::DivZ => ff!(ins, |a, b| div_z(a, b)),
                Op::AccMulPop => match self.comms.pop() {
                    Some(v) => setf!(ins.r0, fr!(ins.r0) + mul_z(fr!(ins.r1), f64::from_bits(v))),
                    None => underflow!(),
                },
                Op::MulPush => {
                    room_for_push!();
                    // The factor is read before the product is written (it
                    // may be the destination) and pushed after: this
                    // handler ends like `comms.push`, not like the handlers
                    // that end with a register write (see `acc.mul.pop.mul`).
                    let a = w.get(ins.r1 as u32);
                    setf!(ins.r0, f64::from_bits(a) * fr!(ins.r2));
                    push_reserved(&mut self.comms, a);
                }
                Op::AccMulPopMul => {
                    // The value is read, both results written, and only
                    // then the value popped: a tail of its own. (Ending
                    // with a register write would join the handlers that
                    // share that tail, and past 16 of them LLVM stops
                    // giving each its own dispatch.)
                    let Some(&v) = self.comms.last() else {
                        underflow!();
                    };
                    let len = self.comms.len();
                    // Every read before either write: `r2` is usually `r1`
                    // itself (the cotangent renamed in place).
                    let g = fr!(ins.r1);
                    let (product, term) = mul_z2(g, fr!(ins.x), f64::from_bits(v));
                    let acc = fr!(ins.r0) + term;
                    setf!(ins.r2, product);
                    setf!(ins.r0, acc);
                    // The length read before the writes, as in `comms.pop`:
                    // no second emptiness check.
                    self.comms.truncate(len - 1);
                }
                Op::MulPop => match self.comms.pop() {
                    Some(v) => setf!(ins.r0, mul_z(fr!(ins.r1), f64::from_bits(v))),
                    None => underflow!(),
                },
                Op::Zero => w.set(ins.r0 as u32, 0),
                Op::Take => {
                    let v = w.get(ins.r1 as u32);
                    w.set(ins.r1 as u32, 0);
                    w.set(ins.r0 as u32, v);
                }
                Op::LenCheck => {
                    if let Err(k) =
                        self.native_len_check(w.get(ins.r0 as u32), w.get(ins.r1 as u32))
                    {
                        trap!(k);
                    }
                }
                Op::ShadowAcc => shadow_add!(ins, fr!(ins.r2)),
                Op::ShadowAccMul => shadow_add!(ins, mul_z(fr!(ins.r2), fr!(ins.x))),
                Op::ShadowTake => {
                    let h = w.get(ins.r1 as u32);
                    let i = ir!(ins.r2);
                    let ad = self.heap.is_ad();
                    match self.heap.shadow_mut(h) {
                        Some(s) => {
                            let len = s.len();
                            match s.get_mut(i as usize) {
                                Some(slot) if i >= 0 => {
                                    let v = std::mem::replace(slot, 0.0);
                                    setf!(ins.r0, v);
                                }
                                _ => trap!(TrapKind::OutOfBounds { index: i, len }),
                            }
                        }
                        None if !ad => trap!(TrapKind::NoShadow),
                        None => trap!(TrapKind::BadHandle),
                    }
                }
                // `r0 = r1 + r2[x0] ⊙ x1`: `x` holds the index register in
                // its low 16 bits and the factor's in its high 16, both
                // proved in range by the verifier (`Instr::reg`).
                Op::AddMulAGet => {
                    let i = ir!(ins.x & 0xffff);
                    match self.heap.get(w.get(ins.r2 as u32)) {
                        Some(a) => match a.get(i as usize) {
                            Some(v) if i >= 0 => {
                                setf!(ins.r0, fr!(ins.r1) + mul_z(*v, fr!(ins.x >> 16)));
                                // A tail of its own (see `acc.mul.pop.mul`)
                                // rather than the one of the handlers that
                                // end with an f64 register write: 1% fewer
                                // instructions in mlp's jvp, measured.
                                std::sync::atomic::compiler_fence(Ordering::SeqCst);
                            }
                            _ => trap!(TrapKind::OutOfBounds {
                                index: i,
                                len: a.len()
                            }),
                        },
                        None => trap!(TrapKind::BadHandle),
                    }
                }
                // `r0 += r1[r2 + x0] ⊙ x1`, likewise.
                Op::AccMulAGetAdd => {
                    let i = ir!(ins.r2).wrapping_add(ir!(ins.x & 0xffff));
                    match self.heap.get(w.get(ins.r1 as u32)) {
                        Some(a) => match a.get(i as usize) {
                            Some(v) if i >= 0 => {
                                setf!(ins.r0, fr!(ins.r0) + mul_z(*v, fr!(ins.x >> 16)));
                                std::sync::atomic::compiler_fence(Ordering::SeqCst);
                            }
                            _ => trap!(TrapKind::OutOfBounds {
                                index: i,
                                len: a.len()
                            }),
                        },
                        None => trap!(TrapKind::BadHandle),
                    }
                }
                // `r0 = r2[x1]; r1 = x0[x1]`: `x` holds the second array's
                // register in its low 16 bits and the index's in its high
                // 16 (`Instr::reg`). Both loads before either write.
                Op::AGetPair => {
                    let i = ir!(ins.x >> 16);
                    let first = match self.heap.get(w.get(ins.r2 as u32)) {
                        Some(a) => match a.get(i as usize) {
                            Some(v) if i >= 0 => *v,
                            _ => trap!(TrapKind::OutOfBounds {
                                index: i,
                                len: a.len()
                            }),
                        },
                        None => trap!(TrapKind::BadHandle),
                    };
                    let second = match self.heap.get(w.get(ins.x & 0xffff)) {
                        Some(a) => match a.get(i as usize) {
                            Some(v) if i >= 0 => *v,
                            _ => trap!(TrapKind::OutOfBounds {
                                index: i,
                                len: a.len()
                            }),
                        },
                        None => trap!(TrapKind::BadHandle),
                    };
                    setf!(ins.r0, first);
                    setf!(ins.r1, second);
                }
            }
            cur.advance();
        }
    }
}

/// Bytes the register stack, the frame stack and the AD stacks reserve.
pub(super) fn stores_bytes(
    regs: usize,
    frames: &Vec<Frame>,
    comms: &Vec<u64>,
    blk: &Vec<u32>,
) -> usize {
    regs.saturating_mul(8)
        .saturating_add(frames.capacity() * std::mem::size_of::<Frame>())
        .saturating_add(comms.capacity() * 8)
        .saturating_add(blk.capacity() * 4)
}

/// Make the register stack `end` long (zeros past its old end), keeping
/// its capacity within what the memory budget `max` leaves with `others`
/// bytes held elsewhere (doubling while that fits), without aborting on
/// allocation failure.
#[cold]
#[inline(never)]
pub(super) fn grow_regs_within(
    regs: &mut Vec<u64>,
    end: usize,
    max: usize,
    others: usize,
) -> Result<(), TrapKind> {
    let most = max.saturating_sub(others) / 8;
    if end > most {
        return Err(TrapKind::MemoryLimit { limit: max });
    }
    if end > regs.capacity() {
        let cap = regs.capacity().saturating_mul(2).max(end).min(most);
        crate::oom::bypass(|| regs.try_reserve_exact(cap - regs.len()))
            .map_err(|_| TrapKind::OutOfMemory)?;
    }
    regs.resize(end, 0);
    Ok(())
}

/// Make the register stack `end` long (zeros past its old end), without
/// aborting on allocation failure.
#[cold]
#[inline(never)]
pub(super) fn grow_regs(regs: &mut Vec<u64>, end: usize) -> Result<(), TrapKind> {
    crate::oom::bypass(|| regs.try_reserve(end - regs.len())).map_err(|_| TrapKind::OutOfMemory)?;
    regs.resize(end, 0);
    Ok(())
}

/// The look at fuel and the interrupt flag: a trap, or the step count at
/// which to look again (never past the fuel limit, so that running out of
/// fuel is noticed at the first taken jump or call beyond it).
#[cold]
#[inline(never)]
#[cfg_attr(feature = "no-interrupt-check", allow(unused_variables))]
pub(super) fn poll(steps: u64, fuel: u64, interrupt: &AtomicBool) -> Result<u64, TrapKind> {
    if steps > fuel {
        return Err(TrapKind::OutOfFuel { limit: fuel });
    }
    #[cfg(not(feature = "no-interrupt-check"))]
    if interrupt.load(Ordering::Relaxed) {
        return Err(TrapKind::Interrupted);
    }
    Ok(steps.saturating_add(POLL_INSTRS).min(fuel))
}

/// Make room for `n` more elements in an AD stack with less than `n`
/// spare (one for a push on a full stack, `n` for `comms.reserve n`),
/// keeping the bytes *reserved* by both stacks within `limit` (so no push
/// can ever take them past it), without aborting on allocation failure.
/// Traps only when the elements in use and the `n` to come would exceed
/// the limit (so `comms.reserve n` traps exactly when the `n` pushes it
/// stands for would take the stacks past it); spare capacity of `other` is
/// given back first if that is what stands in the way.
#[cold]
pub(super) fn grow_stack<T, U>(
    stack: &mut Vec<T>,
    other: &mut Vec<U>,
    n: usize,
    limit: usize,
) -> Result<(), TrapKind> {
    let size = std::mem::size_of::<T>();
    let osize = std::mem::size_of::<U>();
    let used = stack.len() * size + other.len() * osize;
    if used.saturating_add(n.saturating_mul(size)) > limit {
        return Err(TrapKind::StackLimit { limit });
    }
    // The bytes reserved once `stack` holds `len + n`, which fits `limit`
    // by the check above (so nothing below overflows).
    let need = (stack.len() + n) * size;
    let mut reserved = need + other.capacity() * osize;
    if reserved > limit {
        other.shrink_to_fit();
        reserved = need + other.capacity() * osize;
        if reserved > limit {
            return Err(TrapKind::StackLimit { limit });
        }
    }
    // At most this many elements past `len` keep the reservation within
    // `limit`; at least `n` do.
    // Geometric growth: the capacity at least doubles (and holds `len +
    // n`), so a loop whose `comms.reserve n` stands for fewer than `n`
    // pushes per iteration reallocates O(log) times, not once per
    // iteration while `n` exceeds the length.
    let room = (limit - other.capacity() * osize) / size - stack.len();
    let target = (stack.len() + n)
        .max(stack.capacity().saturating_mul(2))
        .max(256);
    let want = (target - stack.len()).min(room);
    crate::oom::bypass(|| stack.try_reserve_exact(want)).map_err(|_| TrapKind::OutOfMemory)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `comms.reserve n` with fewer than `n` pushes per iteration (the
    /// verifier allows it): the capacity grows geometrically instead of by
    /// one push's worth per iteration while `n` exceeds the length.
    #[test]
    fn reserving_more_than_the_length_grows_geometrically() {
        let (mut comms, mut blk) = (Vec::<u64>::new(), Vec::<u32>::new());
        let n = 10_000;
        let mut reallocs = 0;
        for i in 0..20_000u64 {
            if comms.capacity() - comms.len() < n {
                let before = comms.capacity();
                grow_stack(&mut comms, &mut blk, n, usize::MAX / 2).expect("within the limit");
                assert!(comms.capacity() - comms.len() >= n);
                reallocs += usize::from(comms.capacity() != before);
            }
            comms.push(i);
        }
        assert!(reallocs <= 8, "{reallocs} reallocations");
    }

    /// Near the limit the growth is capped by it, and a reservation past it
    /// traps.
    #[test]
    fn growth_stays_within_the_limit() {
        let (mut comms, mut blk) = (Vec::<u64>::new(), Vec::<u32>::new());
        grow_stack(&mut comms, &mut blk, 10, 800).expect("fits");
        assert!(comms.capacity() * 8 <= 800);
        comms.extend(0..10);
        grow_stack(&mut comms, &mut blk, 90, 800).expect("fits exactly");
        assert!(comms.capacity() * 8 <= 800 && comms.capacity() >= 100);
        comms.extend(0..90);
        assert!(matches!(
            grow_stack(&mut comms, &mut blk, 1, 800),
            Err(TrapKind::StackLimit { limit: 800 })
        ));
    }
}
