//! The register interpreter.
//!
//! One `match` on the opcode in a loop over the current function's code.
//! Calls push a `Frame` record on an explicit frame stack (never Rust
//! recursion), and every frame's registers are a window of one shared
//! register stack, as in Lua. Everything the VM holds (register stack, frame
//! stack, AD stacks, array heap, result buffer) keeps its capacity between
//! calls, so after a warm-up call a run allocates nothing.
//!
//! ## Safety precondition, enforced
//! Only verified functions are entered: [`Vm::call_raw`] and every `call`
//! check [`Program::is_verified`] (a flag only [`crate::verify`] sets and
//! that replacing a function clears) and trap with
//! [`TrapKind::NotVerified`] otherwise, so running an unverified program is
//! a trap, never undefined behaviour. A call site fits its callee's
//! signature (argument count, kind of return) because the verifier checked
//! it against the callee and replacing or removing the callee since
//! unverifies the caller too ([`Program::set`], [`Program::truncate`]); the
//! program cannot change while it runs (`exec` borrows it). See `verify.rs`
//! for what verification proves and `regs.rs` for the unchecked register
//! access it allows.
//!
//! ## Two APIs
//! * [`Vm::run`]: host [`Value`]s in and out; checks the arguments, copies
//!   arrays into the heap and the result out, resets the heap afterwards.
//! * For the AD driver: [`Vm::begin`] (reset heap and stacks; AD mode gives
//!   every array a zeroed shadow), [`Vm::alloc_array`], [`Vm::call_raw`]
//!   (raw 64-bit arguments; results in [`Vm::results`]; the heap and the AD
//!   stacks survive between calls, so a forward and a reverse call share
//!   them), [`Vm::array`], [`Vm::shadow`], [`Vm::comms_len`],
//!   [`Vm::blk_len`], [`Vm::peak_stack_bytes`].
//!
//! ## Calls
//! A call pushes the caller's `Frame` (function, register base, and where
//! its `call` instruction is, whose operands say where the results go)
//! and loads the callee's frame image ([`Program::frame_init`]) after the
//! caller's registers; a return pops it and resumes after that `call`. One
//! compare covers both the depth limit and the frame stack's capacity (the
//! smaller of the two, `room` in `exec`); past it a cold path tells them
//! apart. Side-table indices and callees are verified, so a call and a
//! return look them up without bounds checks (`regs::verified`). A call
//! from the host ([`Vm::call_raw`], inlined into the host's code) is one
//! call of `exec`, which makes the entry checks, loads the entry frame,
//! and at the end (return or trap) samples the AD stacks' peak.
//!
//! ## Limits
//! [`Limits`]: call depth (a trap, never a Rust stack overflow: calls do
//! not recurse on the Rust stack), fuel, array length, AD stack bytes,
//! heap bytes (checked by `heap.rs` before each allocation).
//! Fuel counts executed instructions: each straight-line run is charged
//! when it ends (taken jump, call, return, trap), which costs a subtract
//! per taken jump (see `exec`). Fuel and the interrupt flag are looked at
//! only at taken jumps and calls, and only once the step count passes a
//! threshold (one compare in the hot path): the interrupt flag about every
//! 4096 instructions, fuel exactly at the first taken jump or call past
//! the limit, and once more when the entry function returns (so a run that
//! executed more than the limit never succeeds).

mod api;
mod ckpt;
mod exec;
mod native;
mod traps;

#[allow(unused_imports)]
use self::{exec::*, traps::*};
use crate::bytecode::{Function, Instr, Program};
use crate::heap::Heap;
use crate::ir::{FuncId, Loc, RetType};
use crate::math::{div_z, mul_z, mul_z2};
use crate::op::Op;
use crate::regs::{
    copy_args, load_entry_frame, load_frame, push_reserved, verified, Cursor, Window,
};
use crate::types::{Type, Value};
pub use ckpt::{binomial_runs, CheckpointStats};
pub use native::{NativeTier, Tier};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
pub use traps::{CallStack, Caller, Limits, Trap, TrapKind, CALLERS_SHOWN, SOURCE_LINE_CHARS};

/// Bytes of code per instruction: the unit of the interpreter's step count.
const W: u64 = std::mem::size_of::<Instr>() as u64;

/// Instructions between two looks at the interrupt flag (at the first
/// taken jump or call after that many). Fuel is checked exactly: the
/// next look is never later than the fuel limit.
const POLL_INSTRS: u64 = 4096;

/// A suspended caller.
#[derive(Clone, Copy, Debug)]
struct Frame {
    func: FuncId,
    base: usize,
    /// Where the caller's `call` or `call.acc` is, as a byte offset into
    /// its code ([`Cursor::offset`]): the return reads the result register
    /// (`r0`) or the call site (`x`) there, then resumes after it.
    call: usize,
}

/// Which limit bounds the AD stacks ([`Vm::stack_budget`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StackBound {
    /// `Limits::max_stack_bytes`.
    Stack,
    /// `Limits::ad_budget`.
    Budget,
    /// What `Limits::max_memory_bytes` leaves the stacks.
    Memory,
    /// The segment of a checkpointed forward call (`ckpt.rs`): a full
    /// stack suspends the call.
    Segment,
}

/// The virtual machine: reusable state for running programs.
pub struct Vm {
    limits: Limits,
    regs: Vec<u64>,
    frames: Vec<Frame>,
    comms: Vec<u64>,
    blk: Vec<u32>,
    heap: Heap,
    results: Vec<u64>,
    args: Vec<u64>,
    interrupt: Arc<AtomicBool>,
    peak_stack: usize,
    /// The most bytes the AD stacks reserved together when they grew since
    /// [`Vm::begin`] ([`Vm::stack_high_water_bytes`]).
    grown_stack: usize,
    /// The least of `max_stack_bytes` and the AD budget, as of the last
    /// [`Vm::apply_limits`] ([`Vm::stack_limit`]).
    stack_limit: usize,
    /// Bytes of AD stack entries dropped by the current call because the
    /// AD budget was full ([`Vm::spill`]): nonzero makes the call trap.
    spilled: usize,
    /// Where the current call first spilled: the instruction's address
    /// ([`Cursor::addr`]).
    spill_at: Option<u64>,
    /// Where the current call first spilled when compiled code ran it (the
    /// native tier's helpers pass `0` as the address above): the function
    /// and `pc` of the push.
    native_spill_at: Option<(FuncId, usize)>,
    /// The limits were set or may have been changed ([`Vm::limits_mut`])
    /// since the stores were last brought within them: the next call does
    /// so first ([`Vm::apply_limits`]), the others skip that work.
    limits_changed: bool,
    /// `W` times the instructions executed by the last call: the
    /// interpreter's step count in bytes of code, kept as it is so that
    /// leaving the interpreter costs no division ([`Vm::executed`] divides).
    executed_bytes: u64,
    /// The native tier, offered every call from the host first
    /// (`native.rs`).
    native: Option<Box<dyn NativeTier>>,
    /// Per function, the verification stamp with which the native tier
    /// declined it for good (0: none): such a call goes to the
    /// interpreter without offering it to the tier
    /// ([`Vm::native_declined`]).
    native_declined: Vec<u64>,
    /// Which tier ran the last call.
    last_tier: Tier,
    /// The stacks' capacity in a checkpointed call (`ckpt.rs`), and whether
    /// a full stack suspends the call (else it spills, as at the budget).
    segment: Option<(usize, bool)>,
    /// Bytes of the push that found the stacks full of a segment: nonzero
    /// while the call suspends ([`Vm::suspend`]).
    suspend_need: usize,
    /// Where the interpreter suspended ([`Vm::suspend`]).
    suspended: Option<ckpt::Resume>,
    /// Where the next `exec` resumes instead of entering its function.
    resume: Option<ckpt::Resume>,
    /// The checkpoints of the last forward call that outgrew its segment,
    /// for the reverse call's refills.
    ckpt: Option<Box<ckpt::Ckpt>>,
    /// A budget checkpointing works in, for the trap of a call whose
    /// budget was too small for its snapshot 0 ([`Vm::budget_trap`]).
    min_budget: Option<usize>,
    /// Bytes the snapshots of `ckpt` hold (counted against the budget).
    snap_bytes: usize,
    /// The arrays of snapshot 0, copied at the entry of a forward call
    /// under the budget that may write into them (`ckpt.rs`): kept across
    /// calls, so that a call that stores everything allocates nothing.
    snap0_heap: Vec<Vec<f64>>,
    /// Forward instructions of the first sweep and recomputed since
    /// [`Vm::begin`] ([`Vm::recompute_factor`]).
    sweep_instrs: u64,
    recomputed_instrs: u64,
}
