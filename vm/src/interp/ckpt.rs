//! Checkpointing of a forward call under the AD budget (`docs/ad.md`,
//! "Checkpointing").
//!
//! A derivative runs as two calls from the host: a forward call that only
//! pushes onto the AD stacks, then a reverse call that only pops. Under a
//! budget ([`Limits::ad_budget`]) a forward call in AD mode that starts
//! with empty stacks is run here, in the interpreter, in *segments*:
//!
//! * Snapshot 0 (the arguments and the live arrays) is taken at entry; the
//!   call first runs with the stacks given what the budget leaves beside
//!   it. If it ends without filling them, that is all (storing everything).
//! * Otherwise it starts again from snapshot 0 with the stacks given a
//!   segment capacity `S` (half of what is left). When a push finds them
//!   full, the interpreter *suspends* at the push ([`Vm::suspend`]); the
//!   state there (the registers in use, the frames, the live arrays, the
//!   place) may be kept as a snapshot, the stacks are emptied, and the
//!   call *resumes* at the push. Segment boundaries are where the stacks
//!   became full, which depends only on what was pushed since the segment
//!   began: a run from a snapshot fills them at the same instructions.
//!   At the end the last segment stays on the stacks.
//! * Snapshots share the budget with the stacks: at most `budget - S`
//!   bytes. During the forward sweep, where the number of segments is not
//!   known, the schedule is online: a snapshot every `d`-th boundary, and
//!   when the next one does not fit, every other one is dropped and `d`
//!   doubles. Snapshot 0 is always kept.
//! * When a pop of the reverse call finds the stacks empty and segments are
//!   left ([`Vm::refill`]), a second VM (the recompute VM, interpreter
//!   only) is restored from the nearest snapshot at or before the segment
//!   needed and run until it suspends at that segment's end; the segments
//!   before it are discarded, and snapshots are taken on the way, evenly
//!   spaced over the gap with the room the dropped snapshots left. Its
//!   stacks are then swapped into the reverse call's, which pops on.
//!
//! Calls, recursion, loops of any kind and arrays need nothing special: a
//! snapshot holds every frame and every live array, and the reverse call's
//! own heap is rolled back by the reverse code exactly as without a budget.

use super::*;

/// Where a suspended forward call resumes: the push that found the stacks
/// full.
#[derive(Clone, Copy, Debug)]
pub(super) struct Resume {
    pub(super) fid: FuncId,
    pub(super) pc: usize,
    pub(super) base: usize,
    /// `W` times the instructions the call executed before the push.
    pub(super) executed: u64,
}

/// The state of a forward call at a segment boundary.
struct Snapshot {
    /// The segment that starts here.
    seg: usize,
    /// `None` at entry (then `regs` are the arguments).
    at: Option<Resume>,
    regs: Vec<u64>,
    frames: Vec<Frame>,
    heap: Vec<Vec<f64>>,
    bytes: usize,
}

/// The checkpoints of a forward call that outgrew its segment, kept for
/// the reverse call.
pub(super) struct Ckpt {
    /// The program, for the recompute VM (the refill hooks of the
    /// interpreter and of the native tier have none at hand).
    prog: Program,
    entry: FuncId,
    budget: usize,
    /// The segment capacity `S`, in bytes.
    cap: usize,
    /// By segment, snapshot 0 first.
    snaps: Vec<Snapshot>,
    /// The segment on the stacks (the last one after the forward call).
    on_stack: usize,
    recompute_vm: Option<Box<Vm>>,
}

/// The most bytes one batch of pushes takes (`comms.reserve n`, or one
/// push): what a segment must hold at least.
fn max_batch_bytes(prog: &Program) -> usize {
    prog.funcs()
        .iter()
        .flat_map(|f| f.code.iter())
        .filter(|i| i.op == Op::CommsReserve)
        .map(|i| (i.x as usize).saturating_mul(8))
        .fold(8, usize::max)
}

impl Vm {
    /// A push found the stacks full of a segment (at `pc` of `fid`, whose
    /// frame starts at `base`, after `executed` bytes' worth of
    /// instructions): note where to resume. The frames and registers stay
    /// as they are. The trap returned is a placeholder: the caller looks at
    /// `suspended` first.
    #[cold]
    #[inline(never)]
    pub(super) fn suspend(&mut self, fid: FuncId, pc: usize, base: usize, executed: u64) -> Trap {
        self.suspended = Some(Resume {
            fid,
            pc,
            base,
            executed,
        });
        self.executed_bytes = executed;
        host_trap(TrapKind::StackUnderflow)
    }

    /// Forget the checkpoints and the recomputation counts ([`Vm::begin`]).
    #[inline]
    pub(super) fn end_checkpoints(&mut self) {
        if self.ckpt.is_some() || self.snap_bytes != 0 || self.sweep_instrs != 0 {
            self.ckpt = None;
            self.snap_bytes = 0;
            self.sweep_instrs = 0;
            self.recomputed_instrs = 0;
        }
    }

    /// Forward instructions executed (first sweeps and recomputation)
    /// divided by those of the first sweeps, since [`Vm::begin`]: 1.0 when
    /// nothing was recomputed (or no budget is set).
    pub fn recompute_factor(&self) -> f64 {
        if self.sweep_instrs == 0 {
            return 1.0;
        }
        (self.sweep_instrs as f64 + self.recomputed_instrs as f64) / self.sweep_instrs as f64
    }

    /// Forward instructions recomputed since [`Vm::begin`].
    pub fn recomputed_instructions(&self) -> u64 {
        self.recomputed_instrs
    }

    /// Empty stacks reserving at most `cap` bytes.
    fn fit_stacks(&mut self, cap: usize) {
        self.comms.clear();
        self.blk.clear();
        if self.stack_capacity_bytes() > cap {
            self.comms = Vec::new();
            self.blk = Vec::new();
            self.sync_memory();
        }
    }

    /// A call from the host under the AD budget: `Some` if it ran here (a
    /// forward call in AD mode that starts with empty stacks and no
    /// segments of an earlier call left to pop), `None` to run it as usual.
    #[cold]
    #[inline(never)]
    pub(super) fn call_checkpointed(
        &mut self,
        prog: &Program,
        f: FuncId,
        args: &[u64],
    ) -> Option<Result<(), Trap>> {
        self.min_budget = None;
        let budget = self.limits.ad_budget?;
        if budget >= self.limits.max_stack_bytes
            || !self.heap.is_ad()
            || !self.comms.is_empty()
            || !self.blk.is_empty()
            || self.ckpt.as_ref().is_some_and(|c| c.on_stack > 0)
            || self.entry(prog, f, args).is_none()
        {
            return None;
        }
        let heap = self.heap.snapshot();
        let z0 = (args.len() * 8).saturating_add(self.heap.snapshot_bytes());
        if z0 >= budget {
            // Not even snapshot 0 fits: storing everything or the trap,
            // which names the least of what storing everything needs and
            // a budget that checkpointing works in.
            self.min_budget = Some(z0.saturating_add(max_batch_bytes(prog)));
            return None;
        }
        self.ckpt = None;
        let snap0 = Snapshot {
            seg: 0,
            at: None,
            regs: args.to_vec(),
            frames: Vec::new(),
            heap,
            bytes: z0,
        };
        // Snapshot 0 is a copy of the arguments: it counts once the call
        // is checkpointed, not while it may store everything.
        self.fit_stacks(budget);
        let r = self.run_checkpointed(prog, f, snap0, budget);
        self.segment = None;
        self.suspend_need = 0;
        self.suspended = None;
        self.resume = None;
        if self.ckpt.is_none() {
            self.snap_bytes = 0;
        }
        Some(r.map_err(|t| self.with_call_stack(prog, t)))
    }

    /// The forward call `f` from snapshot 0: storing everything in what the
    /// budget leaves (compiled code first, if a native tier is installed),
    /// else in segments.
    fn run_checkpointed(
        &mut self,
        prog: &Program,
        f: FuncId,
        snap0: Snapshot,
        budget: usize,
    ) -> Result<(), Trap> {
        let mut tried = false;
        if let Some(mut tier) = self.native.take() {
            // Compiled code cannot suspend: it spills (as at the budget)
            // and the call is run again here.
            self.segment = Some((budget, false));
            let r = tier.call(self, prog, f, &snap0.regs);
            self.native = Some(tier);
            self.segment = None;
            match r {
                None => {}
                // A trap of its own (not the budget's: one push past
                // it, where there was nothing to spill).
                Some(r)
                    if self.spilled == 0
                        && !matches!(&r, Err(t) if matches!(t.kind, TrapKind::AdBudget { .. })) =>
                {
                    self.last_tier = Tier::Native;
                    self.sweep_instrs += self.executed();
                    return r;
                }
                Some(_) => {
                    self.spilled = 0;
                    self.spill_at = None;
                    self.native_spill_at = None;
                    tried = true;
                }
            }
        }
        self.last_tier = Tier::Interp;
        if !tried {
            self.segment = Some((budget, true));
            let r = self.exec(prog, f, &snap0.regs);
            if self.suspended.take().is_none() {
                if r.is_ok() {
                    self.sweep_instrs += self.executed();
                }
                return r;
            }
            self.suspend_need = 0;
        }
        // Storing everything does not fit: start again, in segments.
        self.recomputed_instrs += self.executed();
        self.heap
            .restore(&snap0.heap, self.limits.max_heap_bytes)
            .map_err(host_trap)?;
        self.frames.clear();
        let room = budget - snap0.bytes;
        let cap = (room / 2).max(max_batch_bytes(prog).min(room));
        self.snap_bytes = snap0.bytes;
        self.fit_stacks(cap);
        self.segment = Some((cap, true));
        let mut c = Box::new(Ckpt {
            prog: prog.clone(),
            entry: f,
            budget,
            cap,
            snaps: Vec::new(),
            on_stack: 0,
            recompute_vm: None,
        });
        let z0 = snap0.bytes;
        let args = snap0.regs.clone();
        c.snaps.push(snap0);
        let mut seg = 0usize;
        let mut spacing = 1usize;
        let mut r = self.exec(prog, f, &args);
        while let Some(at) = self.suspended.take() {
            let need = std::mem::take(&mut self.suspend_need);
            if self.comms.is_empty() && self.blk.is_empty() {
                // One batch of pushes is more than a segment holds.
                return Err(trap_in(
                    prog,
                    at.fid,
                    at.pc,
                    TrapKind::AdBudget {
                        budget,
                        needed: z0.saturating_add(need),
                        exact: false,
                    },
                ));
            }
            seg += 1;
            if seg.is_multiple_of(spacing) {
                let bytes = state_bytes(self, prog, &at);
                while self.snap_bytes.saturating_add(bytes).saturating_add(cap) > budget
                    && c.snaps.len() > 1
                {
                    spacing *= 2;
                    let before = c.snaps.len();
                    let mut dropped = 0;
                    c.snaps.retain(|s| {
                        let keep = s.seg.is_multiple_of(spacing);
                        if !keep {
                            dropped += s.bytes;
                        }
                        keep
                    });
                    self.snap_bytes -= dropped;
                    if c.snaps.len() == before {
                        break;
                    }
                }
                if seg.is_multiple_of(spacing)
                    && self.snap_bytes.saturating_add(bytes).saturating_add(cap) <= budget
                {
                    c.snaps.push(take_snapshot(self, prog, seg, at, bytes));
                    self.snap_bytes += bytes;
                    self.note_high_water();
                }
            }
            self.comms.clear();
            self.blk.clear();
            self.resume = Some(at);
            r = self.exec(prog, f, &args);
        }
        r?;
        self.sweep_instrs += self.executed();
        c.on_stack = seg;
        if seg > 0 {
            self.ckpt = Some(c);
        }
        Ok(())
    }

    /// A pop found its stack empty: if segments of the last checkpointed
    /// forward call are left, put the one before under what the stacks
    /// hold (`true`; the reverse code pops the two stacks in its own
    /// order, so the other stack may still hold the first entries of the
    /// segment after). `false` is a stack underflow.
    #[cold]
    #[inline(never)]
    pub(super) fn refill(&mut self) -> Result<bool, TrapKind> {
        let Some(mut c) = self.ckpt.take() else {
            return Ok(false);
        };
        if c.on_stack == 0 {
            self.ckpt = Some(c);
            return Ok(false);
        }
        // What is left of the segment after (a few entries), kept aside
        // while the buffers are refilled.
        let left = (self.comms.clone(), self.blk.clone());
        self.comms.clear();
        self.blk.clear();
        let r = self.refill_from(&mut c);
        self.ckpt = Some(c);
        if r.is_ok() {
            self.comms.extend_from_slice(&left.0);
            self.blk.extend_from_slice(&left.1);
            self.note_high_water();
        }
        r.map(|()| true)
    }

    fn refill_from(&mut self, c: &mut Ckpt) -> Result<(), TrapKind> {
        let j = c.on_stack - 1;
        // Snapshots past segment `j` are not needed any more.
        while let Some(s) = c.snaps.pop_if(|s| s.seg > j) {
            self.snap_bytes -= s.bytes;
        }
        let Some(ki) = c.snaps.len().checked_sub(1) else {
            return Ok(());
        };
        let mut rvm = match c.recompute_vm.take() {
            Some(v) => v,
            None => {
                let mut v = Box::new(Vm::new(self.limits.clone()));
                v.heap.begin(self.heap.is_ad());
                v
            }
        };
        rvm.limits = self.limits.clone();
        rvm.limits.ad_budget = None;
        let start = c.snaps[ki].at.map_or(0, |a| a.executed / W);
        // The recomputation of a reverse call has the fuel limit to itself.
        rvm.limits.fuel = self
            .limits
            .fuel
            .map(|f| start.saturating_add(f.saturating_sub(self.recomputed_instrs)));
        rvm.interrupt = self.interrupt.clone();
        rvm.apply_limits();
        // The reverse call's (empty) stacks are the ones refilled.
        std::mem::swap(&mut self.comms, &mut rvm.comms);
        std::mem::swap(&mut self.blk, &mut rvm.blk);
        rvm.fit_stacks(c.cap);
        rvm.segment = Some((c.cap, true));
        let r = self.recompute(c, &mut rvm, ki, j);
        std::mem::swap(&mut self.comms, &mut rvm.comms);
        std::mem::swap(&mut self.blk, &mut rvm.blk);
        rvm.comms.clear();
        rvm.blk.clear();
        self.grown_stack = self
            .grown_stack
            .max(self.snap_bytes.saturating_add(self.stack_capacity_bytes()));
        c.recompute_vm = Some(rvm);
        match r {
            Ok(()) => {
                c.on_stack = j;
                Ok(())
            }
            Err(k) => {
                self.comms.clear();
                self.blk.clear();
                Err(match k {
                    TrapKind::OutOfFuel { .. } => TrapKind::OutOfFuel {
                        limit: self.limits.fuel.unwrap_or(u64::MAX),
                    },
                    k => k,
                })
            }
        }
    }

    /// Run `rvm` from snapshot `ki` to the end of segment `j`, taking
    /// snapshots on the way where they fit.
    fn recompute(
        &mut self,
        c: &mut Ckpt,
        rvm: &mut Vm,
        ki: usize,
        j: usize,
    ) -> Result<(), TrapKind> {
        let (k, args, first) = {
            let s = &c.snaps[ki];
            rvm.heap.restore(&s.heap, rvm.limits.max_heap_bytes)?;
            rvm.frames.clear();
            rvm.resume = s.at;
            if s.at.is_some() {
                rvm.regs.clear();
                rvm.regs.extend_from_slice(&s.regs);
                rvm.frames.extend_from_slice(&s.frames);
            }
            (s.seg, s.regs.clone(), s.at.map_or(0, |a| a.executed))
        };
        // Snapshots evenly spaced over the gap, as many as fit.
        let est = c.snaps[ki].bytes.max(1);
        let free = c
            .budget
            .saturating_sub(c.cap.saturating_add(self.snap_bytes));
        let slots = free / est;
        let step = if slots == 0 {
            usize::MAX
        } else {
            (j - k).div_ceil(slots + 1).max(1)
        };
        let mut last = first;
        for m in k..=j {
            let r = rvm.exec(&c.prog, c.entry, &args);
            let Some(at) = rvm.suspended.take() else {
                self.recomputed_instrs += rvm.executed().saturating_sub(last / W);
                return Err(match r {
                    Err(t) => t.kind,
                    // The recomputation ended where the first sweep
                    // suspended: it cannot, as it runs the same code on
                    // the same state.
                    Ok(()) => TrapKind::StackUnderflow,
                });
            };
            rvm.suspend_need = 0;
            self.recomputed_instrs += (at.executed - last) / W;
            last = at.executed;
            if m < j {
                let b = m + 1;
                if (b - k).is_multiple_of(step) {
                    let bytes = state_bytes(rvm, &c.prog, &at);
                    if self.snap_bytes.saturating_add(bytes).saturating_add(c.cap) <= c.budget {
                        c.snaps.push(take_snapshot(rvm, &c.prog, b, at, bytes));
                        self.snap_bytes += bytes;
                    }
                }
                rvm.comms.clear();
                rvm.blk.clear();
                rvm.resume = Some(at);
            }
        }
        Ok(())
    }
}

/// Registers in use by a call suspended at `at`.
fn regs_in_use(prog: &Program, at: &Resume) -> usize {
    at.base + prog.func(at.fid).nregs()
}

/// Bytes a snapshot of `vm` suspended at `at` holds.
fn state_bytes(vm: &Vm, prog: &Program, at: &Resume) -> usize {
    (regs_in_use(prog, at) * 8)
        .saturating_add(vm.frames.len() * std::mem::size_of::<Frame>())
        .saturating_add(vm.heap.snapshot_bytes())
}

fn take_snapshot(vm: &Vm, prog: &Program, seg: usize, at: Resume, bytes: usize) -> Snapshot {
    let n = regs_in_use(prog, &at).min(vm.regs.len());
    Snapshot {
        seg,
        at: Some(at),
        regs: vm.regs[..n].to_vec(),
        frames: vm.frames.clone(),
        heap: vm.heap.snapshot(),
        bytes,
    }
}
