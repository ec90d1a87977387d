//! Checkpointing of a forward call under the AD budget (`docs/ad.md`,
//! "Checkpointing").
//!
//! A derivative runs as two calls from the host: a forward call that only
//! pushes onto the AD stacks, then a reverse call that only pops. Under a
//! budget ([`Limits::ad_budget`]) a forward call in AD mode that starts
//! with empty stacks is run here, in the interpreter, in *segments*:
//!
//! * The call first runs with the stacks given the whole budget
//!   (compiled code first, if a native tier is installed: its push
//!   helpers fail where the stacks fill, which stops it there). If it ends
//!   without filling them, that is all (storing everything), and no
//!   snapshot was taken, unless the call may write into those arrays
//!   (an `aset` anywhere in the program): then they are copied at entry,
//!   into buffers kept across calls (not counted against the budget until
//!   the call is checkpointed: where storing everything fits, the call
//!   runs as without a budget).
//! * Otherwise snapshot 0 is taken (the arrays copied now if they were
//!   not: nothing wrote into them), and the call starts again from it
//!   with the stacks given a segment capacity `S` (half of what is left).
//!   When a push finds them full, the interpreter *suspends* at the push
//!   ([`Vm::suspend`]); the state there (the registers in use, the
//!   frames, the live arrays, the place) may be kept as a snapshot, the
//!   stacks are emptied, and the call *resumes* at the push. Segment
//!   boundaries are where the stacks became full, which depends only on
//!   what was pushed since the segment began: a run from a snapshot fills
//!   them at the same instructions.
//!   At the end the last segment stays on the stacks.
//! * Snapshots share the budget with the stacks: at most `budget - S`
//!   bytes. During the forward sweep, where the number of segments is not
//!   known, the schedule is online: a snapshot every `d`-th boundary, and
//!   when the next one does not fit, every other one is dropped and `d`
//!   doubles. Snapshot 0 is always kept.
//! * When the forward sweep ends, the number of segments is known: of the
//!   online snapshots, those a binomial reversal of the gaps between them
//!   is best off with are kept ([`keep_snapshots`]).
//! * When a pop of the reverse call finds the stacks empty and segments are
//!   left ([`Vm::refill`]), a second VM (the recompute VM, interpreter
//!   only) is restored from the nearest snapshot at or before the segment
//!   needed and run until it suspends at that segment's end; the segments
//!   before it are discarded, and snapshots are taken on the way where
//!   the binomial rule (Revolve) puts them for the gap's length and the
//!   free room ([`binomial_step`]), so that the reverse sweep takes the
//!   fewest segment runs ([`binomial_runs`]). Its stacks are then swapped
//!   into the reverse call's, which pops on.
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

/// A forward call under the budget as it starts: what snapshot 0 is made
/// of if it is needed.
struct Entry<'a> {
    /// The arguments.
    args: &'a [u64],
    /// How many arrays are live at entry (the first `live` of the heap).
    live: usize,
    /// The bytes of snapshot 0.
    bytes: usize,
    /// Whether those arrays were copied at entry (into `Vm::snap0_heap`):
    /// the call may write into them. Else they are copied when the stacks
    /// first fill, unchanged since entry.
    copied: bool,
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
    /// The most bytes a snapshot at a segment boundary took: the size of
    /// a slot when the room for snapshots is counted in slots.
    est: usize,
    /// Segments of the forward call, slots for snapshots besides snapshot
    /// 0, segment runs the reverse sweep's schedule will take, and those
    /// it took ([`CheckpointStats`]).
    segments: u64,
    slots: u64,
    planned: u64,
    recomputed: u64,
}

/// What checkpointing did in the last checkpointed forward call and in
/// the refills of its reverse call ([`Vm::checkpoint_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Segments of the forward call (the last one stayed on the stacks).
    pub segments: u64,
    /// Snapshots besides snapshot 0 that the budget has room for, each
    /// counted at the largest size a snapshot took.
    pub slots: u64,
    /// Segment runs the reverse sweep takes by the schedule chosen when
    /// the forward call ended (exact when every snapshot has the same
    /// size): at most [`binomial_runs`]`(segments - 1, slots)`.
    pub planned: u64,
    /// Segment runs the refills took so far.
    pub recomputed: u64,
}

/// The least `r` with `C(s + r, s) >= l`, and that binomial coefficient:
/// with `s` snapshots (the one at the start included), `l` segments are
/// reversed with each run at most `r + 1` times.
fn binomial_reps(l: u64, s: u64) -> (u64, u128) {
    let (mut r, mut range) = (0u64, 1u128);
    while range < u128::from(l) {
        r += 1;
        // C(s + r, s) = C(s + r - 1, s) (s + r) / r, exactly.
        range = range * u128::from(s + r) / u128::from(r);
    }
    (r, range)
}

/// The fewest segment runs that reverse `l` segments (put each on the
/// stacks, the last first) from a snapshot at the first of them with room
/// for `f` more snapshots: `r l - C(f + 1 + r, f + 2) + l` for the least
/// `r` with `C(f + 1 + r, f + 1) >= l` (Griewank and Walther's binomial
/// bound, counting the run that fills the stacks too); `l (l + 1) / 2`
/// with no room.
pub fn binomial_runs(l: u64, f: u64) -> u64 {
    if l == 0 {
        return 0;
    }
    if f == 0 {
        return l.saturating_mul(l.saturating_add(1)) / 2;
    }
    let s = f.min(l) + 1;
    let (r, range) = binomial_reps(l, s);
    // C(s + r, s + 1) = C(s + r, s) r / (s + 1).
    let c = range * u128::from(r) / u128::from(s + 1);
    let runs = u128::from(r) * u128::from(l) + u128::from(l) - c;
    u64::try_from(runs).unwrap_or(u64::MAX)
}

/// Where the next snapshot goes when `l >= 2` segments are reversed from a
/// snapshot at the first with room for `f >= 1` more: that many segments
/// after it (Revolve's advance, which attains [`binomial_runs`]).
fn binomial_step(l: u64, f: u64) -> u64 {
    let s = u128::from(f.min(l) + 1);
    let (reps, range) = binomial_reps(l, f.min(l) + 1);
    let reps = u128::from(reps);
    let l128 = u128::from(l);
    let bino1 = range * reps / (s + reps);
    let bino2 = if s > 1 { bino1 * s / (s + reps - 1) } else { 1 };
    let bino3 = match s {
        1 => 0,
        2 => 1,
        _ => bino2 * (s - 1) / (s + reps - 2),
    };
    let bino4 = bino2 * (reps - 1) / s;
    let bino5 = match s {
        0..=2 => 0,
        3 => 1,
        _ => bino3 * (s - 2) / reps,
    };
    let m = if l128 <= bino1 + bino3 {
        bino4
    } else if l128 >= range.saturating_sub(bino5) {
        bino1
    } else {
        l128.saturating_sub(bino2 + bino3)
    };
    u64::try_from(m).unwrap_or(1).clamp(1, l - 1)
}

/// The snapshots of the forward sweep to keep for the reverse sweep: those
/// at `pos` (segments, increasing, all below `last`, snapshot 0 not among
/// them) whose keeping costs the fewest segment runs, the gaps between the
/// kept ones reversed one after the other, the last first, by the binomial
/// rule with room for `slots` snapshots in all. Returns whether each is
/// kept and the runs. (A gap starting at the `i`-th kept snapshot has
/// `slots - i` free: the ones after it were dropped when its turn came.)
fn keep_snapshots(pos: &[u64], last: u64, slots: u64) -> (Vec<bool>, u64) {
    let r = pos.len();
    let at = |a: usize| if a == 0 { 0 } else { pos[a - 1] };
    if r > 128 {
        // Too many to choose among: keep them all.
        let mut runs = 0u64;
        for a in 0..=r {
            let end = if a == r { last } else { at(a + 1) };
            let free = slots.saturating_sub(a as u64);
            runs = runs.saturating_add(binomial_runs(end - at(a), free));
        }
        return (vec![true; r], runs);
    }
    // cost[a][i]: the fewest runs from snapshot `a` (kept, the `i`-th
    // kept) to the end; next[a][i]: the next kept one, or `r + 1`.
    let mut cost = vec![vec![u64::MAX; r + 1]; r + 1];
    let mut next = vec![vec![r + 1; r + 1]; r + 1];
    for a in (0..=r).rev() {
        for i in 0..=a {
            if (a == 0) != (i == 0) {
                continue;
            }
            let free = slots.saturating_sub(i as u64);
            let mut best = binomial_runs(last - at(a), free);
            let mut choice = r + 1;
            for (b, from_b) in cost.iter().enumerate().skip(a + 1) {
                let c = binomial_runs(at(b) - at(a), free).saturating_add(from_b[i + 1]);
                if c < best {
                    best = c;
                    choice = b;
                }
            }
            cost[a][i] = best;
            next[a][i] = choice;
        }
    }
    let mut keep = vec![false; r];
    let (mut a, mut i) = (0, 0);
    while next[a][i] <= r {
        a = next[a][i];
        i += 1;
        keep[a - 1] = true;
    }
    (keep, cost[0][0])
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
        let z0 = (args.len() * 8).saturating_add(self.heap.snapshot_bytes());
        if z0 >= budget {
            // Not even snapshot 0 fits: storing everything or the trap,
            // which names the least of what storing everything needs and
            // a budget that checkpointing works in.
            self.min_budget = Some(z0.saturating_add(max_batch_bytes(prog)));
            return None;
        }
        self.ckpt = None;
        // Snapshot 0 is taken only if storing everything does not fit
        // (when the stacks first fill), from `args` and the arrays live
        // now, which the call cannot have changed if no function of the
        // program writes array elements. Otherwise the arrays are copied
        // now, into buffers kept from the last call.
        let entry = Entry {
            args,
            live: self.heap.live(),
            bytes: z0,
            copied: self.heap.live() > 0 && prog.writes_arrays(),
        };
        if entry.copied {
            self.heap.snapshot_into(&mut self.snap0_heap);
        }
        // The stacks get the whole budget: where storing everything fits,
        // the call runs as without one. A copy of the arrays taken at entry
        // counts from when the call is checkpointed (it is snapshot 0
        // then), not while it may store everything.
        self.fit_stacks(budget);
        let r = self.run_checkpointed(prog, f, entry, budget);
        self.segment = None;
        self.suspend_need = 0;
        self.suspended = None;
        self.resume = None;
        if self.ckpt.is_none() {
            self.snap_bytes = 0;
        }
        Some(r.map_err(|t| self.with_call_stack(prog, t)))
    }

    /// The forward call `f`: storing everything within the budget
    /// (compiled code first, if a native tier is installed), else in
    /// segments from snapshot 0.
    fn run_checkpointed(
        &mut self,
        prog: &Program,
        f: FuncId,
        entry: Entry<'_>,
        budget: usize,
    ) -> Result<(), Trap> {
        let mut tried = false;
        if let Some(mut tier) = self.native.take() {
            // Compiled code cannot suspend: where a push finds the stacks
            // full, the push helper fails (`suspend_need` set, as where the
            // interpreter suspends), the compiled call stops there with a
            // trap, and the call is run again here.
            self.segment = Some((budget, true));
            let r = tier.call(self, prog, f, entry.args);
            self.native = Some(tier);
            self.segment = None;
            match r {
                None => {}
                Some(r) if self.suspend_need == 0 => {
                    self.last_tier = Tier::Native;
                    if r.is_ok() {
                        self.sweep_instrs += self.executed();
                    }
                    return r;
                }
                Some(_) => {
                    self.suspend_need = 0;
                    tried = true;
                }
            }
        }
        self.last_tier = Tier::Interp;
        if !tried {
            self.segment = Some((budget, true));
            let r = self.exec(prog, f, entry.args);
            if self.suspended.take().is_none() {
                if r.is_ok() {
                    self.sweep_instrs += self.executed();
                }
                return r;
            }
            self.suspend_need = 0;
        }
        // Storing everything does not fit: start again, in segments, from
        // snapshot 0 (taken now if it was not at entry, once the stacks
        // are emptied and within a segment's capacity).
        self.recomputed_instrs += self.executed();
        let room = budget - entry.bytes;
        let cap = (room / 2).max(max_batch_bytes(prog).min(room));
        self.fit_stacks(cap);
        let heap = if entry.copied {
            std::mem::take(&mut self.snap0_heap)
        } else {
            self.heap.snapshot_of(entry.live)
        };
        let snap0 = Snapshot {
            seg: 0,
            at: None,
            regs: entry.args.to_vec(),
            frames: Vec::new(),
            heap,
            bytes: entry.bytes,
        };
        self.heap
            .restore(&snap0.heap, self.limits.max_heap_bytes)
            .map_err(host_trap)?;
        self.frames.clear();
        self.snap_bytes = snap0.bytes;
        self.segment = Some((cap, true));
        let mut c = Box::new(Ckpt {
            prog: prog.clone(),
            entry: f,
            budget,
            cap,
            snaps: Vec::new(),
            on_stack: 0,
            recompute_vm: None,
            est: 0,
            segments: 0,
            slots: 0,
            planned: 0,
            recomputed: 0,
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
            let bytes = state_bytes(self, prog, &at);
            c.est = c.est.max(bytes);
            if seg.is_multiple_of(spacing) {
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
            self.plan_reverse(&mut c, z0);
            self.ckpt = Some(c);
        }
        Ok(())
    }

    /// The forward sweep of `c` has ended (`c.on_stack` is its last
    /// segment): the number of segments is known, so drop the snapshots
    /// of the online schedule that a binomial reversal of the gaps is
    /// better off without ([`keep_snapshots`]).
    fn plan_reverse(&mut self, c: &mut Ckpt, z0: usize) {
        let last = c.on_stack as u64;
        // A snapshot where the last segment starts is not needed.
        while let Some(s) = c.snaps.pop_if(|s| s.seg > 0 && s.seg as u64 >= last) {
            self.snap_bytes -= s.bytes;
        }
        let est = c.est.max(1);
        let pos: Vec<u64> = c.snaps[1..].iter().map(|s| s.seg as u64).collect();
        let room = c.budget.saturating_sub(c.cap.saturating_add(z0)) / est;
        let slots = (room as u64).max(pos.len() as u64);
        let (keep, runs) = keep_snapshots(&pos, last, slots);
        let mut i = 0;
        let mut dropped = 0;
        c.snaps.retain(|s| {
            if s.seg == 0 {
                return true;
            }
            i += 1;
            if !keep[i - 1] {
                dropped += s.bytes;
            }
            keep[i - 1]
        });
        self.snap_bytes -= dropped;
        c.segments = last + 1;
        c.slots = slots;
        c.planned = runs;
        c.recomputed = 0;
    }

    /// What checkpointing did in the last checkpointed forward call of
    /// this [`Vm::begin`] and in the refills of its reverse call: `None`
    /// if no call was checkpointed (storing everything fitted).
    pub fn checkpoint_stats(&self) -> Option<CheckpointStats> {
        self.ckpt.as_ref().map(|c| CheckpointStats {
            segments: c.segments,
            slots: c.slots,
            planned: c.planned,
            recomputed: c.recomputed,
        })
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
        if r.is_ok() {
            // The segment refilled holds at most `S` bytes, and so do the
            // entries left, but the two together may need more than the
            // snapshots leave: drop the latest snapshots until they fit
            // (only the recomputation after that costs more). `2 S` fit
            // beside snapshot 0 unless one batch of pushes takes more than
            // half of what snapshot 0 leaves (then `S` is that batch):
            // where they do not, the budget is too small, a trap.
            let comms = (self.comms.len() + left.0.len()).max(self.comms.capacity());
            let blk = (self.blk.len() + left.1.len()).max(self.blk.capacity());
            let stacks = comms
                .saturating_mul(8)
                .saturating_add(blk.saturating_mul(4));
            while self.snap_bytes.saturating_add(stacks) > c.budget {
                let Some(s) = c.snaps.pop_if(|s| s.seg > 0) else {
                    break;
                };
                self.snap_bytes -= s.bytes;
            }
            let needed = self.snap_bytes.saturating_add(stacks);
            if needed > c.budget {
                self.comms.clear();
                self.blk.clear();
                let budget = c.budget;
                self.ckpt = Some(c);
                return Err(TrapKind::AdBudget {
                    budget,
                    needed,
                    exact: false,
                });
            }
            self.comms.reserve_exact(left.0.len());
            self.comms.extend_from_slice(&left.0);
            self.blk.reserve_exact(left.1.len());
            self.blk.extend_from_slice(&left.1);
            self.note_high_water();
        }
        self.ckpt = Some(c);
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
        // Snapshots where the binomial rule puts them for this gap and
        // the free slots: each the advance of Revolve for the part of the
        // gap after the one before, with one slot less.
        let est = c.est.max(1);
        let mut free = (c
            .budget
            .saturating_sub(c.cap.saturating_add(self.snap_bytes))
            / est) as u64;
        let mut plan = Vec::new();
        let (mut p, mut l) = (k as u64, (j - k + 1) as u64);
        while free > 0 && l > 1 {
            let m = binomial_step(l, free);
            p += m;
            l -= m;
            free -= 1;
            plan.push(p as usize);
        }
        let mut plan = plan.into_iter().peekable();
        c.recomputed += (j - k + 1) as u64;
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
                if plan.next_if_eq(&b).is_some() {
                    let bytes = state_bytes(rvm, &c.prog, &at);
                    c.est = c.est.max(bytes);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The fewest segment runs by trying every first advance: `runs[l][f]`
    /// for `l <= 60`, `f <= 6`.
    fn brute_force() -> Vec<Vec<u64>> {
        let (lmax, fmax) = (60usize, 6usize);
        let mut runs = vec![vec![0u64; fmax + 1]; lmax + 1];
        for l in 1..=lmax {
            for f in 0..=fmax {
                runs[l][f] = if l == 1 {
                    1
                } else if f == 0 {
                    (l * (l + 1) / 2) as u64
                } else {
                    (1..l)
                        .map(|m| m as u64 + runs[l - m][f - 1] + runs[m][f])
                        .min()
                        .unwrap_or(u64::MAX)
                };
            }
        }
        runs
    }

    #[test]
    fn binomial_runs_is_the_least_by_trying_every_schedule() {
        let runs = brute_force();
        for (l, row) in runs.iter().enumerate().skip(1) {
            for (f, &want) in row.iter().enumerate() {
                assert_eq!(binomial_runs(l as u64, f as u64), want, "l = {l}, f = {f}");
            }
        }
        assert_eq!(binomial_runs(0, 3), 0);
        // Room for a snapshot at every boundary: each segment run twice
        // but the first... and the last, once.
        assert_eq!(binomial_runs(1000, 999), 1999);
        assert_eq!(binomial_runs(1000, 5000), 1999);
    }

    #[test]
    fn binomial_step_attains_the_least() {
        let runs = brute_force();
        for l in 2..runs.len() {
            for f in 1..runs[l].len() {
                let m = binomial_step(l as u64, f as u64) as usize;
                assert!((1..l).contains(&m), "l = {l}, f = {f}: step {m}");
                assert_eq!(
                    m as u64 + runs[l - m][f - 1] + runs[m][f],
                    runs[l][f],
                    "l = {l}, f = {f}: step {m}"
                );
            }
        }
        // Large gaps: the step is inside the gap and the two parts add up
        // to the bound.
        for (l, f) in [(15_872u64, 7u64), (1_000_000, 3), (123_457, 20), (10, 100)] {
            let m = binomial_step(l, f);
            assert!(m >= 1 && m < l);
            assert_eq!(
                m + binomial_runs(l - m, f - 1) + binomial_runs(m, f),
                binomial_runs(l, f),
                "l = {l}, f = {f}: step {m}"
            );
        }
    }

    /// Reverse `last` segments (the one at `last` on the stacks) as the
    /// refills do, with snapshots kept at `snaps` (segment 0 first) and
    /// room for `slots` besides snapshot 0: the segment runs.
    fn simulate(mut snaps: Vec<u64>, last: u64, slots: u64) -> u64 {
        let mut runs = 0;
        for j in (0..last).rev() {
            snaps.retain(|&s| s <= j);
            let k = *snaps.last().expect("snapshot 0");
            let mut free = slots + 1 - snaps.len() as u64;
            let (mut p, mut l) = (k, j - k + 1);
            while free > 0 && l > 1 {
                let m = binomial_step(l, free);
                p += m;
                l -= m;
                free -= 1;
                snaps.push(p);
            }
            runs += j - k + 1;
        }
        runs
    }

    #[test]
    fn refills_follow_the_plan() {
        for (last, online, slots) in [
            (100u64, vec![], 3u64),
            (100, vec![32, 64, 96], 3),
            (1000, vec![256, 512, 768], 4),
            (15_872, vec![2048, 4096, 6144, 8192, 10240, 12288, 14336], 7),
            (50, (1..50).collect(), 49),
            (7, vec![2, 4, 6], 3),
        ] {
            let (keep, planned) = keep_snapshots(&online, last, slots);
            let kept: Vec<u64> = std::iter::once(0)
                .chain(
                    online
                        .iter()
                        .zip(&keep)
                        .filter(|(_, k)| **k)
                        .map(|(s, _)| *s),
                )
                .collect();
            assert_eq!(
                simulate(kept, last, slots),
                planned,
                "{last} {online:?} {slots}"
            );
            // Never worse than dropping them all, nor than keeping all.
            assert!(planned <= binomial_runs(last, slots));
            let all = std::iter::once(0).chain(online.iter().copied()).collect();
            assert!(planned <= simulate(all, last, slots));
        }
        // Every boundary a snapshot: each segment run once.
        assert_eq!(keep_snapshots(&(1..50).collect::<Vec<_>>(), 50, 49).1, 50);
        // docs/ad.md's example: 11 segments, 2 slots, online snapshots at
        // 4 and 8; and powloop at n = 10^6 under 1 KB.
        assert_eq!(keep_snapshots(&[4, 8], 10, 2), (vec![true, true], 18));
        assert_eq!(simulate(vec![0, 4, 8], 10, 2), 18);
        assert_eq!(binomial_runs(10, 2), 25);
        let online: Vec<u64> = (1..8).map(|i| i * 2048).collect();
        let (keep, runs) = keep_snapshots(&online, 15_872, 7);
        let kept: Vec<u64> = online
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(s, _)| *s)
            .collect();
        assert_eq!((kept, runs), (vec![8192, 12288, 14336], 120_074));
        assert_eq!(binomial_runs(15_872, 7), 134_410);
    }
}
