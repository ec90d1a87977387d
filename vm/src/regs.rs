//! The one module of the VM that uses `unsafe`: register reads and writes
//! without bounds checks.
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

/// The instruction at `pc`.
///
/// Sound without a bounds check because `pc` is only ever 0, a jump target,
/// a return address, or the successor of an instruction that is not an
/// unconditional terminator; the verifier proves jump targets and jump-table
/// entries `< code.len()` (check 3) and that the last instruction is an
/// unconditional terminator (check 6), so each of these is in range.
#[inline(always)]
pub(crate) fn fetch(code: &[crate::bytecode::Instr], pc: usize) -> &crate::bytecode::Instr {
    #[cfg(feature = "checked")]
    assert!(pc < code.len(), "pc {pc} out of range");
    debug_assert!(pc < code.len());
    // SAFETY: `pc < code.len()` as argued above.
    unsafe { code.get_unchecked(pc) }
}
