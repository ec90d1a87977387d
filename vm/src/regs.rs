//! The one module of the VM that uses `unsafe`: register reads and writes
//! and instruction fetches without bounds checks.
//!
//! A [`Window`] is a raw view of one frame's registers inside the VM's
//! register stack. Its soundness rests on two facts:
//!
//! * the interpreter creates a window only over `regs[base..base + nregs]`
//!   after making sure `regs.len() >= base + nregs`, and re-creates it after
//!   anything that may move the register stack (a call growing it);
//! * it only indexes a window with register operands of a function that
//!   passed the verifier, which proves every register operand `< nregs`
//!   (verify.rs, check 2; `x` as a register operand included).
//!
//! With the `checked` feature every access is bounds-checked instead (used
//! by the fuzz targets and the valgrind run).
#![allow(unsafe_code)]

use crate::bytecode::Instr;
use std::marker::PhantomData;

/// A frame's registers.
pub(crate) struct Window {
    ptr: *mut u64,
    len: usize,
}

impl Window {
    /// A window over `regs[base..base + len]`.
    ///
    /// Panics (a bug in the interpreter, not reachable from bytecode) if the
    /// range is not inside `regs`.
    #[inline]
    pub(crate) fn new(regs: &mut [u64], base: usize, len: usize) -> Window {
        let slice = &mut regs[base..base + len];
        Window {
            ptr: slice.as_mut_ptr(),
            len,
        }
    }

    #[inline(always)]
    pub(crate) fn get(&self, r: u32) -> u64 {
        #[cfg(feature = "checked")]
        assert!((r as usize) < self.len, "register r{r} out of range");
        debug_assert!((r as usize) < self.len);
        // SAFETY: `r < nregs == self.len` by verifier check 2, and the window
        // covers `regs[base..base + len]`, which `Window::new` checked lies
        // inside the register stack; the stack is not resized while the
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
