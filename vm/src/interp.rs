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

use crate::bytecode::{Function, Instr, Program};
use crate::heap::Heap;
use crate::ir::{FuncId, Loc, RetType};
use crate::math::{div_z, mul_z, mul_z2};
use crate::op::Op;
use crate::regs::{
    copy_args, load_entry_frame, load_frame, push_reserved, verified, Cursor, Window,
};
use crate::types::{Type, Value};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bytes of code per instruction: the unit of the interpreter's step count.
const W: u64 = std::mem::size_of::<Instr>() as u64;

/// Instructions between two looks at the interrupt flag (at the first
/// taken jump or call after that many). Fuel is checked exactly: the
/// next look is never later than the fuel limit.
const POLL_INSTRS: u64 = 4096;

/// Resource limits. Each has a command-line flag in `advm`.
///
/// The defaults fit a machine with a few GiB of memory: at most 4 GiB of
/// arrays, 2 GiB of AD stacks; one array of the largest length
/// (2^27 elements, 1 GiB) fits the heap limit with its shadow in a
/// gradient, and twice over in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most active frames, the entry function's included (`--max-depth`):
    /// 1 allows no call; 0 allows no frame at all, so every call traps with
    /// [`TrapKind::CallDepth`] at the entry function.
    pub max_call_depth: usize,
    /// Instructions one top-level call may execute (`--fuel`); `None` is
    /// unlimited.
    pub fuel: Option<u64>,
    /// Largest array `anew` may create, and largest argument array, in
    /// elements (`--max-array`).
    pub max_array_len: usize,
    /// Bytes the comms and block stacks may hold together during one
    /// gradient call (`--max-stack-bytes`).
    pub max_stack_bytes: usize,
    /// Bytes all arrays live at once may hold during one top-level call
    /// (a run, or a gradient's forward and reverse calls together),
    /// argument arrays included: 8 per element, 16 in a gradient (data and
    /// shadow), plus 48 per array (`--max-heap-bytes`). The buffers the VM
    /// keeps for reuse stay within it too (see `heap.rs`).
    pub max_heap_bytes: usize,
    /// Bytes the VM may hold in all (`--max-memory`): registers, suspended
    /// frames, AD stacks and arrays (buffers kept for reuse included),
    /// counted by capacity. Checked wherever one of them grows; the other
    /// limits still hold within it.
    pub max_memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_call_depth: 100_000,
            fuel: None,
            max_array_len: 1 << 27,
            max_stack_bytes: 1 << 31,
            max_heap_bytes: 1 << 32,
            max_memory_bytes: 1 << 32,
        }
    }
}

/// What went wrong at run time.
///
/// `ArrayTooLarge` is an `anew` longer than `Limits::max_array_len`,
/// `ArgArrayTooLarge` an argument array (from the host) longer than it;
/// `HeapLimit` a new array that would take the bytes of the live arrays
/// (elements, shadows, slots) to `needed`, past `Limits::max_heap_bytes`;
/// `MemoryLimit` registers, frames, AD stacks and arrays together past
/// `Limits::max_memory_bytes`.
#[derive(Clone, Debug, PartialEq)]
pub enum TrapKind {
    DivByZero,
    RemByZero,
    OutOfBounds { index: i64, len: usize },
    NegativeLength(i64),
    ArrayTooLarge { len: i64, limit: usize },
    ArgArrayTooLarge { len: usize, limit: usize },
    HeapLimit { needed: usize, limit: usize },
    FtoiInvalid(f64),
    CallDepth { limit: usize },
    OutOfFuel { limit: u64 },
    Interrupted,
    StackLimit { limit: usize },
    MemoryLimit { limit: usize },
    OutOfMemory,
    StackUnderflow,
    BadHandle,
    NoShadow,
    BadBlockId(u32),
    NotVerified,
    ArgMismatch(String),
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrapKind::DivByZero => write!(f, "integer division by zero"),
            TrapKind::RemByZero => write!(f, "integer remainder by zero"),
            TrapKind::OutOfBounds { index, len } => {
                write!(f, "array index {index} out of bounds for length {len}")
            }
            TrapKind::NegativeLength(n) => write!(f, "anew with negative length {n}"),
            TrapKind::ArrayTooLarge { len, limit } => write!(
                f,
                "anew of {len} elements exceeds the array limit of {limit} (raise it with --max-array)"
            ),
            TrapKind::ArgArrayTooLarge { len, limit } => write!(
                f,
                "argument array of {len} elements exceeds the array limit of {limit} (raise it with --max-array)"
            ),
            TrapKind::HeapLimit { needed, limit } => write!(
                f,
                "arrays exceed the heap limit of {limit} bytes: the live arrays would hold {needed} (raise it with --max-heap-bytes)"
            ),
            TrapKind::FtoiInvalid(x) => write!(f, "ftoi of {x}: not representable as i64"),
            TrapKind::CallDepth { limit } => {
                write!(f, "call depth exceeded (limit {limit}; raise it with --max-depth)")
            }
            TrapKind::OutOfFuel { limit } => {
                write!(f, "out of fuel: more than {limit} instructions (raise the limit with --fuel)")
            }
            TrapKind::Interrupted => write!(f, "interrupted"),
            TrapKind::StackLimit { limit } => write!(
                f,
                "AD stacks exceed the limit of {limit} bytes (raise it with --max-stack-bytes)"
            ),
            TrapKind::MemoryLimit { limit } => write!(
                f,
                "memory exceeds the limit of {limit} bytes (registers, frames, AD stacks and \
                 arrays together; raise it with --max-memory)"
            ),
            TrapKind::OutOfMemory => write!(f, "out of memory"),
            TrapKind::StackUnderflow => write!(f, "comms or block stack underflow"),
            TrapKind::BadHandle => write!(f, "invalid array handle"),
            TrapKind::NoShadow => write!(f, "array has no shadow (not inside a gradient call)"),
            TrapKind::BadBlockId(id) => write!(f, "block id {id} outside the dispatch table"),
            TrapKind::NotVerified => write!(f, "function has not passed the verifier"),
            TrapKind::ArgMismatch(m) => write!(f, "{m}"),
        }
    }
}

/// A runtime trap: what happened and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Trap {
    pub kind: TrapKind,
    /// The function whose code trapped (for inlined code, the function it
    /// was inlined from: `loc` is a line of its text).
    pub func: String,
    /// For inlined code, the function it was inlined into (the one that
    /// was running; `block`, `pc` and `instr` are in its bytecode). A
    /// boxed `str`, so that a `Trap` stays within 128 bytes.
    pub inlined_into: Option<Box<str>>,
    pub block: String,
    pub pc: u32,
    /// The disassembled instruction.
    pub instr: String,
    pub loc: Loc,
}

impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trap: {}", self.kind)?;
        if !self.func.is_empty() {
            write!(f, " in @{}", self.func)?;
            if let Some(into) = &self.inlined_into {
                write!(f, " (inlined into @{into})")?;
            }
            write!(f, ", block {}, at `{}`", self.block, self.instr)?;
            if self.loc.line > 0 {
                write!(f, " (line {})", self.loc.line)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Trap {}

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
    /// The limits were set or may have been changed ([`Vm::limits_mut`])
    /// since the stores were last brought within them: the next call does
    /// so first ([`Vm::apply_limits`]), the others skip that work.
    limits_changed: bool,
    /// `W` times the instructions executed by the last call: the
    /// interpreter's step count in bytes of code, kept as it is so that
    /// leaving the interpreter costs no division ([`Vm::executed`] divides).
    executed_bytes: u64,
}

impl Default for Vm {
    fn default() -> Vm {
        Vm::new(Limits::default())
    }
}

impl Vm {
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
            limits_changed: true,
            executed_bytes: 0,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

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
    fn apply_limits(&mut self) {
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
        let h = self
            .heap
            .alloc(data.len(), self.limits.max_heap_bytes)
            .map_err(host_trap)?;
        if let Some(a) = self.heap.get_mut(h) {
            a.copy_from_slice(data);
        }
        Ok(h)
    }

    pub fn array(&self, h: u64) -> Option<&[f64]> {
        self.heap.get(h)
    }

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

    pub fn comms_len(&self) -> usize {
        self.comms.len()
    }

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
        self.exec(prog, f, args)
    }

    /// The checks of a call from the host, in order, before anything runs:
    /// `f` exists and takes `args`, it is verified, and the depth limit
    /// allows its frame. `Some` of its function and frame image if they
    /// pass.
    #[inline(always)]
    fn entry<'p>(
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
    fn entry_trap(&self, prog: &Program, f: FuncId, args: &[u64]) -> Trap {
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
            return trap_at(prog, func, 0, TrapKind::NotVerified);
        }
        // Not even the entry function's frame is allowed.
        trap_at(prog, func, 0, TrapKind::CallDepth { limit: 0 })
    }

    /// Prepare a frame whose registers past the parameters start at
    /// `start`: they exist and hold `init`, the callee's
    /// [`Program::frame_init`] (constants, then zeros; the parameters are
    /// written by the caller afterwards). `init` is a whole number of
    /// `FRAME_CHUNK`s (so up to `FRAME_CHUNK - 1` registers past the frame,
    /// which belong to no live frame, are overwritten too), so that the
    /// copy has one of a few fixed lengths for most frames.
    /// The register stack grows within the memory budget.
    #[inline(always)]
    fn enter(&mut self, start: usize, init: &[u64]) -> Result<(), TrapKind> {
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
    fn grow_frames(&mut self) -> Result<(), TrapKind> {
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
        self.frames
            .try_reserve_exact(cap - len)
            .map_err(|_| TrapKind::OutOfMemory)?;
        self.sync_memory();
        Ok(())
    }

    /// Bytes the VM holds: what `Limits::max_memory_bytes` bounds.
    fn memory_bytes(&self) -> usize {
        stores_bytes(self.regs.capacity(), &self.frames, &self.comms, &self.blk)
            .saturating_add(self.heap.held_bytes())
    }

    /// Tell the heap what the other stores hold of the memory budget.
    fn sync_memory(&mut self) {
        let others = stores_bytes(self.regs.capacity(), &self.frames, &self.comms, &self.blk);
        self.heap.set_memory(self.limits.max_memory_bytes, others);
    }

    /// The byte limit for the AD stacks: `max_stack_bytes`, or what the
    /// memory budget leaves them if that is less (`true`).
    fn stack_budget(&self) -> (usize, bool) {
        let max = self.limits.max_memory_bytes;
        let stacks = self.stack_capacity_bytes();
        let left = max.saturating_sub(self.memory_bytes().saturating_sub(stacks));
        if left < self.limits.max_stack_bytes {
            (left, true)
        } else {
            (self.limits.max_stack_bytes, false)
        }
    }

    /// A stack limit trap from a limit the memory budget set is a memory
    /// limit trap.
    fn stack_trap(&self, by_memory: bool, k: TrapKind) -> TrapKind {
        match k {
            TrapKind::StackLimit { .. } if by_memory => TrapKind::MemoryLimit {
                limit: self.limits.max_memory_bytes,
            },
            k => k,
        }
    }

    #[cold]
    #[inline(never)]
    fn trap(&mut self, prog: &Program, f: FuncId, pc: usize, kind: TrapKind) -> Trap {
        self.sample_peak();
        trap_at(prog, prog.func(f), pc, kind)
    }

    /// Note the bytes the AD stacks hold now, at the end of a call from
    /// the host (see [`Vm::peak_stack_bytes`]).
    #[inline(always)]
    fn sample_peak(&mut self) {
        let bytes = self.comms.len() * 8 + self.blk.len() * 4;
        self.peak_stack = self.peak_stack.max(bytes);
    }

    /// Room for `n` more values on the comms stack, which has less than `n`
    /// spare: 1 for a `comms.push` on a full stack, `n` for
    /// `comms.reserve %v, n`.
    #[cold]
    #[inline(never)]
    fn reserve_comms(&mut self, n: usize) -> Result<(), TrapKind> {
        let (limit, by_memory) = self.stack_budget();
        let r = grow_stack(&mut self.comms, &mut self.blk, n, limit);
        self.sync_memory();
        r.map_err(|k| self.stack_trap(by_memory, k))
    }

    #[cold]
    fn grow_blk(&mut self) -> Result<(), TrapKind> {
        let (limit, by_memory) = self.stack_budget();
        let r = grow_stack(&mut self.blk, &mut self.comms, 1, limit);
        self.sync_memory();
        r.map_err(|k| self.stack_trap(by_memory, k))
    }

    /// Bytes reserved by the two AD stacks (what `max_stack_bytes` bounds).
    fn stack_capacity_bytes(&self) -> usize {
        self.comms.capacity() * 8 + self.blk.capacity() * 4
    }

    /// Check a call from the host, then run until the entry function
    /// returns (its results in `self.results`) or a trap. Either way the
    /// peak of the AD stacks is sampled at the end.
    #[inline(never)]
    fn exec(&mut self, prog: &Program, entry: FuncId, args: &[u64]) -> Result<(), Trap> {
        let Some((mut f, init)) = self.entry(prog, entry, args) else {
            return Err(self.entry_trap(prog, entry, args));
        };
        self.frames.clear();
        if self.stack_capacity_bytes() > self.limits.max_stack_bytes {
            // The limit was lowered since the stacks grew: give back what
            // is not in use, so that pushes stay within it.
            self.comms.shrink_to_fit();
            self.blk.shrink_to_fit();
        }
        let fuel = self.limits.fuel.unwrap_or(u64::MAX);
        let max_depth = self.limits.max_call_depth;
        let max_array = self.limits.max_array_len;
        let max_heap = self.limits.max_heap_bytes;
        let mut fid = entry;
        let mut base = 0usize;
        // `args` has one value per parameter (the entry checks).
        if let Err(k) = load_entry_frame(&mut self.regs, args, init, grow_regs) {
            return Err(self.trap(prog, fid, 0, k));
        }
        // `load_entry_frame` made `regs` at least `nparams + init.len() >=
        // nregs` long (the verifier made `init` at least `nregs - nparams`
        // long).
        let mut w = Window::resume(&mut self.regs, base, f.nregs());
        let mut cur = Cursor::new(&f.code, 0);

        // Executed instructions are counted in bytes of code, `W` per
        // instruction, so that the hot path needs no instruction index:
        // `done!()`, that is `meter + address of the current instruction +
        // W`, is `W` times the instructions executed so far, the current one
        // included. A straight-line run is charged when it ends (taken
        // jump, call, return): the cursor moves to `ip` and `meter` becomes
        // `done - ip`, so the count goes on from there. Wrapping arithmetic:
        // only differences of addresses matter. (A u64 of bytes holds
        // 1.5e18 instructions.)
        let mut meter: u64 = 0u64.wrapping_sub(cur.addr());
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
        // Room for one more value on the comms stack (a checked push:
        // `comms.push`, `mul.push`), growing it on the cold path or
        // trapping; the push after it needs no second check.
        macro_rules! room_for_push {
            () => {
                if self.comms.len() == self.comms.capacity() {
                    if let Err(k) = self.reserve_comms(1) {
                        trap!(k);
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
                    // checked by vm/tests/semantics.rs).
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
                        if let Err(k) = self.grow_blk() {
                            trap!(k);
                        }
                    }
                    self.blk.push(ins.x);
                }
                Op::BlkPop => {
                    let Some(id) = self.blk.pop() else {
                        trap!(TrapKind::StackUnderflow);
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
                        if let Err(k) = self.reserve_comms(ins.x as usize) {
                            trap!(k);
                        }
                    }
                    push_reserved(&mut self.comms, w.get(ins.r0 as u32));
                }
                // No capacity check: the verifier proved a `comms.reserve`
                // made room (check 9; see `regs::push_reserved`).
                Op::CommsPushR => push_reserved(&mut self.comms, w.get(ins.r0 as u32)),
                Op::CommsPop => {
                    let Some(&v) = self.comms.last() else {
                        trap!(TrapKind::StackUnderflow);
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
                Op::MulZ => ff!(ins, |a, b| mul_z(a, b)),
                Op::DivZ => ff!(ins, |a, b| div_z(a, b)),
                Op::AccMulPop => match self.comms.pop() {
                    Some(v) => setf!(ins.r0, fr!(ins.r0) + mul_z(fr!(ins.r1), f64::from_bits(v))),
                    None => trap!(TrapKind::StackUnderflow),
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
                        trap!(TrapKind::StackUnderflow);
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
                    None => trap!(TrapKind::StackUnderflow),
                },
                Op::Zero => w.set(ins.r0 as u32, 0),
                Op::Take => {
                    let v = w.get(ins.r1 as u32);
                    w.set(ins.r1 as u32, 0);
                    w.set(ins.r0 as u32, v);
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
            }
            cur.advance();
        }
    }
}

/// Bytes the register stack, the frame stack and the AD stacks reserve.
fn stores_bytes(regs: usize, frames: &Vec<Frame>, comms: &Vec<u64>, blk: &Vec<u32>) -> usize {
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
fn grow_regs_within(
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
        regs.try_reserve_exact(cap - regs.len())
            .map_err(|_| TrapKind::OutOfMemory)?;
    }
    regs.resize(end, 0);
    Ok(())
}

/// Make the register stack `end` long (zeros past its old end), without
/// aborting on allocation failure.
#[cold]
#[inline(never)]
fn grow_regs(regs: &mut Vec<u64>, end: usize) -> Result<(), TrapKind> {
    regs.try_reserve(end - regs.len())
        .map_err(|_| TrapKind::OutOfMemory)?;
    regs.resize(end, 0);
    Ok(())
}

/// The look at fuel and the interrupt flag: a trap, or the step count at
/// which to look again (never past the fuel limit, so that running out of
/// fuel is noticed at the first taken jump or call beyond it).
#[cold]
#[inline(never)]
#[cfg_attr(feature = "no-interrupt-check", allow(unused_variables))]
fn poll(steps: u64, fuel: u64, interrupt: &AtomicBool) -> Result<u64, TrapKind> {
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
fn grow_stack<T, U>(
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
    stack
        .try_reserve_exact(want)
        .map_err(|_| TrapKind::OutOfMemory)
}

/// A trap raised outside any function (bad host arguments, allocation).
fn host_trap(kind: TrapKind) -> Trap {
    Trap {
        kind,
        func: String::new(),
        inlined_into: None,
        block: String::new(),
        pc: 0,
        instr: String::new(),
        loc: Loc::default(),
    }
}

/// A trap at `pc` of `f`, a function of `prog` (which names the callee of
/// a `call`). Cold: only ever built when a call ends in a trap.
#[cold]
fn trap_at(prog: &Program, f: &Function, pc: usize, kind: TrapKind) -> Trap {
    let loc = f.locs.get(pc).copied().unwrap_or_default();
    let origin = loc.inlined_from().and_then(|g| prog.get(g));
    Trap {
        kind,
        func: origin.map_or(&f.name, |g| &g.name).clone(),
        inlined_into: origin.map(|_| f.name.as_str().into()),
        block: f.block_of(pc).to_string(),
        pc: pc as u32,
        instr: if pc < f.code.len() {
            crate::disasm::instr_in_program(f, pc, prog)
        } else {
            String::new()
        },
        loc,
    }
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
