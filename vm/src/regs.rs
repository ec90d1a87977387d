//! The one module of the VM that uses `unsafe`: register reads and writes,
//! instruction fetches, call-argument copies, frame-image loads and
//! side-table lookups without bounds checks, and pushes on the comms and
//! frame stacks without a capacity check ([`push_reserved`]).
//!
//! A [`Window`] is a raw view of one frame's registers inside the VM's
//! register stack. Its soundness rests on two facts:
//!
//! * the interpreter creates a window only over `regs[base..base + nregs]`
//!   after making sure `regs.len() >= base + nregs` ([`load_frame`] makes
//!   it so when a frame is entered), and re-creates it after anything that
//!   may move the register stack (a call growing it);
//! * it only indexes a window with register operands of a function that
//!   passed the verifier, which proves every register operand `< nregs`
//!   (verify.rs, check 2; `x` as a register operand included).
//!
//! [`push_reserved`] rests on verifier check 9 (every `comms.push.r` is
//! covered by a `comms.reserve` on every path to it) and on the
//! interpreter's `comms.reserve`, which leaves at least that much spare
//! capacity, or on a capacity check the caller just made (see the
//! function). [`verified`] indexes a function's call sites, register lists
//! and jump tables with indices that verifier check 3 proved in range, and
//! the program's functions with callees that check 4 proved to exist.
//! [`load_frame`] checks the register stack's length itself.
//!
//! With the `checked` feature every access is bounds-checked instead (used
//! by the fuzz targets and the valgrind run).
#![allow(unsafe_code)]

use crate::bytecode::{Instr, Reg};
use std::marker::PhantomData;

/// A frame's registers.
pub(crate) struct Window {
    ptr: *mut u64,
    len: usize,
}

impl Window {
    /// The window over `regs[base..base + len]` of a frame whose range is
    /// known to lie inside `regs` (not checked): a frame [`load_frame`]
    /// just loaded (the entry function's or a callee's), which made `regs`
    /// at least `base + nparams + init.len() >= base + nregs` long (the
    /// verifier made the image `init` at least `nregs - nparams` long), or
    /// a suspended caller's frame on return, which this function covered
    /// when the caller was entered (the register stack only ever grows
    /// while the interpreter runs).
    #[inline(always)]
    pub(crate) fn resume(regs: &mut [u64], base: usize, len: usize) -> Window {
        #[cfg(feature = "checked")]
        assert!(base + len <= regs.len(), "frame out of range");
        debug_assert!(base + len <= regs.len());
        Window {
            ptr: regs.as_mut_ptr().wrapping_add(base),
            len,
        }
    }

    #[inline(always)]
    pub(crate) fn get(&self, r: u32) -> u64 {
        #[cfg(feature = "checked")]
        assert!((r as usize) < self.len, "register r{r} out of range");
        debug_assert!((r as usize) < self.len);
        // SAFETY: `r < nregs == self.len` by verifier check 2, and the window
        // covers `regs[base..base + len]`, which lies inside the register
        // stack (see `Window::resume`); the stack is not resized while the
        // window is in use.
        unsafe { *self.ptr.add(r as usize) }
    }

    #[inline(always)]
    pub(crate) fn set(&mut self, r: u32, v: u64) {
        #[cfg(feature = "checked")]
        assert!((r as usize) < self.len, "register r{r} out of range");
        debug_assert!((r as usize) < self.len);
        // SAFETY: as in `get`.
        unsafe { *self.ptr.add(r as usize) = v }
    }
}

/// Copy a call's arguments from the caller's frame at `caller` to the
/// callee's parameters at `callee`: `regs[callee + i] = regs[caller + args[i]]`,
/// without bounds checks. Sound because the call site belongs to a verified
/// function, so each `args[i]` is `<` the caller's `nregs` (verifier check 2)
/// and `caller + nregs == callee`, and the interpreter made `regs` at least
/// `callee + args.len()` long (it is the callee's frame, grown before this
/// call).
#[inline(always)]
pub(crate) fn copy_args(regs: &mut [u64], caller: usize, callee: usize, args: &[Reg]) {
    #[cfg(feature = "checked")]
    assert!(
        callee + args.len() <= regs.len() && args.iter().all(|a| caller + (*a as usize) < callee),
        "call arguments out of range"
    );
    debug_assert!(callee + args.len() <= regs.len());
    let p = regs.as_mut_ptr();
    let copy = |i: usize, a: Reg| {
        debug_assert!(caller + (a as usize) < callee);
        // SAFETY: both indices are inside `regs` as argued above, and they
        // differ (the source is below `callee`, the destination not).
        unsafe { *p.add(callee + i) = *p.add(caller + a as usize) }
    };
    // Most calls pass one to three arguments: straight-line copies for
    // those (a loop is unrolled by four, with more set-up than copying).
    match *args {
        [] => {}
        [a] => copy(0, a),
        [a, b] => {
            copy(0, a);
            copy(1, b);
        }
        [a, b, c] => {
            copy(0, a);
            copy(1, b);
            copy(2, c);
        }
        _ => {
            for (i, a) in args.iter().enumerate() {
                copy(i, *a);
            }
        }
    }
}

/// `table[i]` without a bounds check, for an index that a verified
/// function holds: a call-site, register-list or jump-table index in an
/// instruction of a verified function (verifier check 3), or the callee of
/// a call site of one, indexing the program's functions or their frame
/// images (check 4: the callee exists; `Program::truncate` unverifies
/// every caller of a function it removes, `Program::set` keeps the number
/// of functions, and the program cannot change during a run, which borrows
/// it). A suspended frame's function was entered as such a callee or as
/// the entry function, whose id `Vm::call_raw` checked.
#[inline(always)]
pub(crate) fn verified<T>(table: &[T], i: u32) -> &T {
    #[cfg(feature = "checked")]
    assert!((i as usize) < table.len(), "index {i} out of range");
    debug_assert!((i as usize) < table.len());
    // SAFETY: `i < table.len()` by verifier check 3 or 4, as listed above
    // (for a suspended frame's function, by the check of the callee or
    // entry function it was entered as).
    unsafe { table.get_unchecked(i as usize) }
}

/// Load a frame image: `regs[start..start + init.len()] = init`, growing
/// the register stack first (zeros past its end; `grow` reports failure)
/// if it is shorter.
#[inline(always)]
pub(crate) fn load_frame<E>(
    regs: &mut Vec<u64>,
    start: usize,
    init: &[u64],
    grow: impl FnOnce(&mut Vec<u64>, usize) -> Result<(), E>,
) -> Result<(), E> {
    // No overflow: `start` is at most the register stack's length plus a
    // frame's 65 535 registers, far below `usize::MAX`.
    let end = start + init.len();
    if regs.len() < end {
        grow(regs, end)?;
    }
    #[cfg(feature = "checked")]
    assert!(end <= regs.len(), "frame out of range");
    debug_assert!(end <= regs.len());
    // SAFETY: `start <= end <= regs.len()`: `end` is `start` plus a length,
    // and `grow` made the stack at least `end` long or returned an error.
    let dst = unsafe { regs.get_unchecked_mut(start..end) };
    copy_regs(dst, init);
    Ok(())
}

/// Load the entry function's frame at the bottom of the register stack:
/// `regs[..args.len()] = args`, then the frame image `init` after them,
/// growing the register stack first if it is shorter (see [`load_frame`]).
#[inline(always)]
pub(crate) fn load_entry_frame<E>(
    regs: &mut Vec<u64>,
    args: &[u64],
    init: &[u64],
    grow: impl FnOnce(&mut Vec<u64>, usize) -> Result<(), E>,
) -> Result<(), E> {
    load_frame(regs, args.len(), init, grow)?;
    #[cfg(feature = "checked")]
    assert!(args.len() <= regs.len(), "arguments out of range");
    debug_assert!(args.len() <= regs.len());
    // SAFETY: `args.len() <= args.len() + init.len() <= regs.len()`, which
    // `load_frame` made so or failed.
    let dst = unsafe { regs.get_unchecked_mut(..args.len()) };
    copy_regs(dst, args);
    Ok(())
}

/// `dst.copy_from_slice(src)` (same lengths), without a call to `memcpy`
/// for the few registers most frames have: a call costs more than the copy.
#[inline(always)]
fn copy_regs(dst: &mut [u64], src: &[u64]) {
    #[inline(always)]
    fn fixed<const N: usize>(dst: &mut [u64], src: &[u64]) {
        dst[..N].copy_from_slice(&src[..N]);
    }
    match src.len() {
        0 => {}
        1 => fixed::<1>(dst, src),
        2 => fixed::<2>(dst, src),
        3 => fixed::<3>(dst, src),
        4 => fixed::<4>(dst, src),
        8 => fixed::<8>(dst, src),
        12 => fixed::<12>(dst, src),
        16 => fixed::<16>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

/// The instruction pointer: a position in the code of one verified
/// function, kept as a pointer so that fetching the next instruction is one
/// add and one load (no multiply-and-add of an index by the 12-byte size).
///
/// Moving it is safe pointer arithmetic (`wrapping_add`); only reading the
/// instruction under it is `unsafe`, and sound because the cursor is only
/// ever at 0, a jump target, a return address, or the successor of an
/// instruction that is not an unconditional terminator: the verifier proves
/// jump targets and jump-table entries `< code.len()` (check 3) and that the
/// last instruction is an unconditional terminator (check 6), so each of
/// these is in range (a return address is the successor of a `call`, which
/// is not the last instruction), and the interpreter moves the cursor in no
/// other way. The code outlives the cursor (`'c`).
#[derive(Clone, Copy)]
pub(crate) struct Cursor<'c> {
    base: *const Instr,
    ip: *const Instr,
    #[cfg(feature = "checked")]
    len: usize,
    _code: PhantomData<&'c [Instr]>,
}

impl<'c> Cursor<'c> {
    /// At instruction `pc` of `code`.
    #[inline(always)]
    pub(crate) fn new(code: &'c [Instr], pc: usize) -> Cursor<'c> {
        let base = code.as_ptr();
        Cursor {
            base,
            ip: base.wrapping_add(pc),
            #[cfg(feature = "checked")]
            len: code.len(),
            _code: PhantomData,
        }
    }

    /// The instruction under the cursor.
    #[inline(always)]
    pub(crate) fn ins(&self) -> &'c Instr {
        #[cfg(feature = "checked")]
        assert!(self.pc() < self.len, "pc {} out of range", self.pc());
        // SAFETY: the cursor is in range as argued on the type (verifier
        // checks 3 and 6); the code is borrowed for `'c`.
        unsafe { &*self.ip }
    }

    /// To the next instruction (after one that is not an unconditional
    /// terminator).
    #[inline(always)]
    pub(crate) fn advance(&mut self) {
        self.ip = self.ip.wrapping_add(1);
    }

    /// To instruction `target` (a verified jump target or table entry).
    #[inline(always)]
    pub(crate) fn jump(&mut self, target: u32) {
        self.ip = self.base.wrapping_add(target as usize);
    }

    /// Where the instruction under the cursor is, as a byte offset into
    /// the code: a call's return address, for [`Cursor::at_offset`] (no
    /// division by the 12-byte instruction size, unlike [`Cursor::pc`]).
    #[inline(always)]
    pub(crate) fn offset(&self) -> usize {
        (self.ip as usize).wrapping_sub(self.base as usize)
    }

    /// At byte offset `offset` of `code`: the place of a `call` of this
    /// same code, taken by [`Cursor::offset`].
    #[inline(always)]
    pub(crate) fn at_offset(code: &'c [Instr], offset: usize) -> Cursor<'c> {
        let base = code.as_ptr();
        Cursor {
            base,
            ip: base.wrapping_byte_add(offset),
            #[cfg(feature = "checked")]
            len: code.len(),
            _code: PhantomData,
        }
    }

    /// The index of the instruction under the cursor.
    #[inline(always)]
    pub(crate) fn pc(&self) -> usize {
        (self.ip as usize).wrapping_sub(self.base as usize) / std::mem::size_of::<Instr>()
    }

    /// The address of the instruction under the cursor: a number, for the
    /// interpreter's step count (never turned back into a pointer).
    #[inline(always)]
    pub(crate) fn addr(&self) -> u64 {
        self.ip as usize as u64
    }
}

/// Push `v` on a stack without a capacity check: the comms stack or the
/// frame stack.
///
/// The caller passes a stack with `len < capacity`, for one of four
/// reasons: it is `comms.push` or `comms.reserve`, which made that room
/// just before (growing the stack or trapping), or a call pushing its
/// frame, which checked `frames.len() < room <= capacity` just before, or
/// it is a `comms.push.r` of a verified function (see the SAFETY comment).
#[inline(always)]
pub(crate) fn push_reserved<T>(stack: &mut Vec<T>, v: T) {
    #[cfg(feature = "checked")]
    assert!(
        stack.len() < stack.capacity(),
        "push without reserved capacity"
    );
    debug_assert!(stack.len() < stack.capacity());
    let len = stack.len();
    // SAFETY: `len < capacity`, so slot `len` is allocated and writing it
    // initialises it before `set_len` makes it part of the vector. Why:
    // for `comms.push`, `comms.reserve` and a call's frame, their handler
    // made or checked the room right before this call. For
    // `comms.push.r`, verifier check 9
    // (`verify.rs`) proves that on every path to it its frame ran a
    // `comms.reserve n` and then fewer than `n` pushes (checked or not, the
    // reserve's own included), with no jump target, terminator, call or
    // `blk.push` in between. The interpreter's `comms.reserve n` leaves
    // `capacity - len >= n` or traps. Since then each push took one slot,
    // pops gave slots back, and nothing lowered the capacity: the comms
    // stack is only shrunk by `Vm::call_raw` before a run and by the block
    // stack's growth (a `blk.push`, which the check excludes), and a
    // callee's pushes cannot intervene (a call is excluded too).
    unsafe {
        stack.as_mut_ptr().add(len).write(v);
        stack.set_len(len + 1);
    }
}
