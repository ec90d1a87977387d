//! The hook for a native tier (machine code compiled from verified
//! bytecode, the `advm-jit` crate) and the small API it runs through.
//!
//! The VM does not depend on any code generator: a tier is a
//! [`NativeTier`] trait object installed with [`Vm::set_native`].
//! [`Vm::call_raw`] (and so [`Vm::run`]) offers every call to it first;
//! the tier runs the call, or declines it (a function it does not support)
//! and the interpreter runs it. [`Vm::last_tier`] tells which one did.
//!
//! Compiled code keeps its registers to itself but uses the VM's own AD
//! stacks and array heap, through the `native_*` methods below: each does
//! exactly what the interpreter's handler of the same instruction does,
//! with the same traps, so that both tiers agree bit for bit. Traps are
//! built by [`Vm::native_trap`], the interpreter's own builder.

use super::*;

/// Which tier ran a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tier {
    /// The register interpreter.
    #[default]
    Interp,
    /// Machine code of a native tier.
    Native,
}

impl Tier {
    /// `"interp"` or `"jit"`.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Interp => "interp",
            Tier::Native => "jit",
        }
    }
}

/// A native tier: offered every call from the host. `Send` and `Sync` so
/// that a VM (and an engine) can be moved and shared between threads as
/// before; every method that changes the tier takes `&mut self`.
pub trait NativeTier: Send + Sync {
    /// Run `f` on `args` as [`Vm::call_raw`] would (results in
    /// [`Vm::results`], the same traps), or `None` to leave the call to
    /// the interpreter (before anything ran).
    fn call(
        &mut self,
        vm: &mut Vm,
        prog: &Program,
        f: FuncId,
        args: &[u64],
    ) -> Option<Result<(), Trap>>;

    /// A tier of the same kind for another VM (an engine's clone): a fresh
    /// cache is fine.
    fn fork(&self) -> Box<dyn NativeTier>;

    /// Calls of `first` from the host are followed by calls of `then` (a
    /// forward function and its pullback): a tier may prepare both when
    /// `first` is first called. Nothing by default.
    fn pair(&mut self, first: FuncId, then: FuncId) {
        let _ = (first, then);
    }
}

impl Vm {
    /// Install (or, with `None`, remove) a native tier.
    pub fn set_native(&mut self, tier: Option<Box<dyn NativeTier>>) {
        self.native = tier;
        self.native_declined.clear();
    }

    /// For the tier: every call of `f` while it keeps verification stamp
    /// `stamp` ([`Program::stamp`]) is the interpreter's (the tier would
    /// decline it whatever the arguments), so [`Vm::call_raw`] need not
    /// offer it to the tier. Cleared when a tier is installed.
    pub fn native_declined(&mut self, f: FuncId, stamp: u64) {
        if self.native_declined.len() <= f.index() {
            self.native_declined.resize(f.index() + 1, 0);
        }
        self.native_declined[f.index()] = stamp;
    }

    /// Whether the tier declined `f` as it is now for good
    /// ([`Vm::native_declined`]).
    #[inline]
    pub(crate) fn native_declines(&self, prog: &Program, f: FuncId) -> bool {
        match self.native_declined.get(f.index()) {
            Some(&s) if s != 0 => prog.stamp(f) == Some(s),
            _ => false,
        }
    }

    /// Tell the native tier, if any, that calls of `first` are followed by
    /// calls of `then` ([`NativeTier::pair`]).
    pub fn native_pair(&mut self, first: FuncId, then: FuncId) {
        if let Some(t) = self.native.as_mut() {
            t.pair(first, then);
        }
    }

    /// The installed native tier.
    pub fn native(&self) -> Option<&dyn NativeTier> {
        self.native.as_deref()
    }

    /// Which tier ran the last [`Vm::call_raw`] or [`Vm::run`].
    pub fn last_tier(&self) -> Tier {
        self.last_tier
    }

    /// Before compiled code runs a call from the host: what the
    /// interpreter does on entry past the entry checks (which the tier
    /// leaves to the interpreter: it declines a call that fails them).
    #[inline]
    pub fn native_begin(&mut self) {
        self.frames.clear();
        if self.stack_capacity_bytes() > self.stack_limit {
            // As in `exec`: a lowered limit or AD budget gives back what
            // is not in use, so that pushes in place stay within it.
            self.comms.shrink_to_fit();
            self.blk.shrink_to_fit();
        }
    }

    /// Bytes the VM holds now, as `Limits::max_memory_bytes` counts them
    /// (registers, frames, AD stacks and arrays).
    pub fn native_memory_bytes(&self) -> usize {
        self.memory_bytes()
    }

    /// Whether the interpreter's entry checks pass for this call
    /// (`Vm::entry`).
    #[inline]
    pub fn native_entry_ok(&self, prog: &Program, f: FuncId, args: &[u64]) -> bool {
        self.entry(prog, f, args).is_some()
    }

    /// After compiled code returned to the host: `steps` instructions
    /// executed, `results` returned.
    #[inline]
    pub fn native_finish(&mut self, steps: u64, results: &[u64]) {
        self.executed_bytes = steps.wrapping_mul(W);
        self.results.clear();
        // Element by element: a call returns one or a few values, fewer
        // than a `memmove` is worth calling for.
        for r in results {
            self.results.push(*r);
        }
        self.sample_peak();
    }

    /// The trap of compiled code at `pc` of `f` after `steps` instructions,
    /// reached through the calls at `callers` (function and `pc` of each
    /// call, innermost first): the interpreter's, built by the same code.
    #[cold]
    pub fn native_trap(
        &mut self,
        prog: &Program,
        f: FuncId,
        pc: usize,
        steps: u64,
        kind: TrapKind,
        callers: &[(FuncId, usize)],
    ) -> Trap {
        self.executed_bytes = steps.wrapping_mul(W);
        let mut t = self.trap(prog, f, pc, kind);
        t.stack = super::traps::stack_of_sites(prog, callers.len(), callers.iter().copied());
        t
    }

    /// After a stack grew for compiled code at `at` (function, `pc`): if
    /// that was the call's first spill (the helpers pass address 0), note
    /// where, for the budget trap.
    #[cold]
    fn note_native_spill(&mut self, at: (FuncId, usize)) {
        if self.spill_at == Some(0) && self.native_spill_at.is_none() {
            self.native_spill_at = Some(at);
        }
    }

    /// The interrupt flag, to poll.
    #[inline]
    pub fn interrupt_flag(&self) -> &AtomicBool {
        &self.interrupt
    }

    /// The comms stack itself, for a native tier that pushes and pops in
    /// place while the stack has room (growing it only through
    /// [`Vm::native_comms_push`] and [`Vm::native_comms_reserve`], which
    /// keep it within the limits).
    #[inline]
    pub fn native_comms(&mut self) -> &mut Vec<u64> {
        &mut self.comms
    }

    /// The block stack itself, likewise (grown only through
    /// [`Vm::native_blk_push`]).
    #[inline]
    pub fn native_blk(&mut self) -> &mut Vec<u32> {
        &mut self.blk
    }

    /// `comms.push v` (and the push of `mul.push`).
    #[inline]
    pub fn native_comms_push(&mut self, v: u64, at: (FuncId, usize)) -> Result<(), TrapKind> {
        if self.comms.len() == self.comms.capacity() {
            let r = self.reserve_comms(1, 0);
            self.note_native_spill(at);
            r?;
        }
        self.comms.push(v);
        Ok(())
    }

    /// `comms.reserve v, n`.
    #[inline]
    pub fn native_comms_reserve(
        &mut self,
        v: u64,
        n: u32,
        at: (FuncId, usize),
    ) -> Result<(), TrapKind> {
        if self.comms.capacity() - self.comms.len() < n as usize {
            let r = self.reserve_comms(n as usize, 0);
            self.note_native_spill(at);
            r?;
        }
        self.comms.push(v);
        Ok(())
    }

    /// `comms.push.r v`: room was made by a `comms.reserve` (verifier
    /// check 9), so this never grows the stack.
    #[inline]
    pub fn native_comms_push_r(&mut self, v: u64) {
        self.comms.push(v);
    }

    /// `comms.pop`.
    #[inline]
    pub fn native_comms_pop(&mut self) -> Result<u64, TrapKind> {
        loop {
            match self.comms.pop() {
                Some(v) => return Ok(v),
                None => self.native_refill()?,
            }
        }
    }

    /// A pop of compiled code found its stack empty: the stacks refilled
    /// from the checkpoints of the forward call (`ckpt.rs`), as the
    /// interpreter's pops do, or the stack underflow.
    #[cold]
    #[inline(never)]
    fn native_refill(&mut self) -> Result<(), TrapKind> {
        match self.refill()? {
            true => Ok(()),
            false => Err(TrapKind::StackUnderflow),
        }
    }

    /// `blk.push id`.
    #[inline]
    pub fn native_blk_push(&mut self, id: u32, at: (FuncId, usize)) -> Result<(), TrapKind> {
        if self.blk.len() == self.blk.capacity() {
            let r = self.grow_blk(0);
            self.note_native_spill(at);
            r?;
        }
        self.blk.push(id);
        Ok(())
    }

    /// The pop of `blk.pop`.
    #[inline]
    pub fn native_blk_pop(&mut self) -> Result<u32, TrapKind> {
        loop {
            match self.blk.pop() {
                Some(v) => return Ok(v),
                None => self.native_refill()?,
            }
        }
    }

    /// `anew n`: a new array's handle.
    pub fn native_anew(&mut self, n: i64) -> Result<u64, TrapKind> {
        if n < 0 {
            return Err(TrapKind::NegativeLength(n));
        }
        let max_array = self.limits.max_array_len;
        if n as u64 > max_array as u64 {
            return Err(TrapKind::ArrayTooLarge {
                len: n,
                limit: max_array,
            });
        }
        self.heap.alloc(n as usize, self.limits.max_heap_bytes)
    }

    /// `alen h`.
    #[inline]
    pub fn native_alen(&self, h: u64) -> Result<i64, TrapKind> {
        match self.heap.get(h) {
            Some(a) => Ok(a.len() as i64),
            None => Err(TrapKind::BadHandle),
        }
    }

    /// `len.check a, b`: `a` (a function's result) and `b` (the tangent
    /// its custom rule returned) have the same length.
    #[inline(never)]
    pub fn native_len_check(&self, a: u64, b: u64) -> Result<(), TrapKind> {
        match (self.heap.get(a), self.heap.get(b)) {
            (Some(x), Some(y)) if x.len() == y.len() => Ok(()),
            (Some(x), Some(y)) => Err(TrapKind::RuleTangentLength {
                result: x.len(),
                tangent: y.len(),
            }),
            _ => Err(TrapKind::BadHandle),
        }
    }

    /// `aget h, i` (and `aget.add` with the sum as `i`).
    #[inline]
    pub fn native_aget(&self, h: u64, i: i64) -> Result<f64, TrapKind> {
        match self.heap.get(h) {
            Some(a) => match a.get(i as usize) {
                Some(v) if i >= 0 => Ok(*v),
                _ => Err(TrapKind::OutOfBounds {
                    index: i,
                    len: a.len(),
                }),
            },
            None => Err(TrapKind::BadHandle),
        }
    }

    /// `aset h, i, v`.
    #[inline]
    pub fn native_aset(&mut self, h: u64, i: i64, v: f64) -> Result<(), TrapKind> {
        match self.heap.get_mut(h) {
            Some(a) => {
                let len = a.len();
                match a.get_mut(i as usize) {
                    Some(slot) if i >= 0 => {
                        *slot = v;
                        Ok(())
                    }
                    _ => Err(TrapKind::OutOfBounds { index: i, len }),
                }
            }
            None => Err(TrapKind::BadHandle),
        }
    }

    /// `shadow(h)[i] += v` (`shadow.acc`, `shadow.acc.mul`).
    #[inline]
    pub fn native_shadow_add(&mut self, h: u64, i: i64, v: f64) -> Result<(), TrapKind> {
        let ad = self.heap.is_ad();
        match self.heap.shadow_mut(h) {
            Some(s) => {
                let len = s.len();
                match s.get_mut(i as usize) {
                    Some(slot) if i >= 0 => {
                        *slot += v;
                        Ok(())
                    }
                    _ => Err(TrapKind::OutOfBounds { index: i, len }),
                }
            }
            None if !ad => Err(TrapKind::NoShadow),
            None => Err(TrapKind::BadHandle),
        }
    }

    /// `shadow.take h, i`.
    #[inline]
    pub fn native_shadow_take(&mut self, h: u64, i: i64) -> Result<f64, TrapKind> {
        let ad = self.heap.is_ad();
        match self.heap.shadow_mut(h) {
            Some(s) => {
                let len = s.len();
                match s.get_mut(i as usize) {
                    Some(slot) if i >= 0 => Ok(std::mem::replace(slot, 0.0)),
                    _ => Err(TrapKind::OutOfBounds { index: i, len }),
                }
            }
            None if !ad => Err(TrapKind::NoShadow),
            None => Err(TrapKind::BadHandle),
        }
    }

    /// The number of live arrays: handles `1..=n` are valid.
    #[inline]
    pub fn native_array_count(&self) -> usize {
        self.heap.live()
    }

    /// A counter that changes whenever live arrays' buffers may have moved
    /// (their raw views from [`Vm::native_array_raw`] are then stale).
    /// Only an array allocation (`anew`, [`Vm::native_anew`]) changes it
    /// while compiled code runs.
    #[inline]
    pub fn native_array_moves(&self) -> u64 {
        self.heap.moves()
    }

    /// Live array `h`'s elements (address, length) and its shadow's
    /// (address, length; null and 0 outside AD mode), for a native tier
    /// that accesses them in place within these bounds. Valid until an
    /// allocation changes [`Vm::native_array_moves`] or the next call from
    /// the host.
    #[inline]
    pub fn native_array_raw(&mut self, h: u64) -> Option<(*mut f64, usize, *mut f64, usize)> {
        self.heap.raw(h)
    }
}
