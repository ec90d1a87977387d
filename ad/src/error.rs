//! Why a run or a derivative could not be computed: `AdError`.

use crate::*;

/// Why a gradient (or a run) could not be computed.
#[derive(Debug)]
pub enum AdError {
    /// The program trapped (forward or reverse).
    Trap(Trap),
    /// The function cannot be differentiated (e.g. it does not return f64).
    NotDifferentiable(String),
    /// The arguments do not match the parameters.
    Args(String),
    /// A derived function of `func` (`derived`, its forward or reverse
    /// function) needs more registers than a bytecode frame holds. A limit
    /// of advm, not a bug: the reverse function keeps about two registers
    /// per active value, so a function with more than about 32 000 active
    /// values must be split into smaller ones.
    TooLarge {
        /// The function differentiated.
        func: String,
        /// The derived function that does not fit.
        derived: String,
        /// The registers it needs.
        registers: usize,
    },
    /// Building the derived code of `func` would take more than `limit`
    /// work units ([`Engine::set_max_compile_work`], the CLI's
    /// `--max-compile-work`); `used` were counted when it stopped. Nothing
    /// derived is kept.
    TooMuchWork {
        /// The function being differentiated.
        func: String,
        /// The work units counted when the derivation stopped.
        used: u64,
        /// The units allowed.
        limit: u64,
    },
    /// The module given to [`Engine::new`] is not valid: malformed IR
    /// (ids out of range, a call to no function, ...) or bytecode the
    /// verifier refuses. A library user's error; the assembler's modules
    /// are always valid.
    InvalidModule(String),
    /// A derived function failed lowering or verification: a bug in advm.
    Internal(String),
}

impl fmt::Display for AdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdError::Trap(t) => write!(f, "{t}"),
            AdError::NotDifferentiable(m) => write!(f, "cannot differentiate: {m}"),
            AdError::Args(m) => write!(f, "bad arguments: {m}"),
            AdError::TooLarge {
                func,
                derived,
                registers,
            } => write!(
                f,
                "cannot differentiate @{func}: its derived function @{derived} needs {registers} \
                 registers, more than a frame holds (at most {FRAME_REGISTERS}); split @{func} \
                 into smaller functions (the reverse function needs about two registers per \
                 active value)"
            ),
            AdError::TooMuchWork { func, used, limit } => write!(
                f,
                "cannot differentiate @{func}: building its derived code takes more than the \
                 compile budget of {limit} work units ({used} counted when it stopped); raise it \
                 with --max-compile-work N (Engine::set_max_compile_work in the library) or \
                 split @{func} into smaller functions"
            ),
            AdError::InvalidModule(m) => write!(f, "invalid module: {m}"),
            AdError::Internal(m) => write!(f, "internal error (please report): {m}"),
        }
    }
}

impl std::error::Error for AdError {}

/// Registers one bytecode frame can hold (register operands are `u16`), as
/// `vm::lower::LowerError::TooManyRegisters` says.
pub const FRAME_REGISTERS: usize = u16::MAX as usize;

impl From<Trap> for AdError {
    fn from(t: Trap) -> AdError {
        AdError::Trap(t)
    }
}

impl AdError {
    /// An allocation failed: the trap `out of memory` outside any function
    /// (what a run's failed allocation of an array or a stack is too).
    /// Allocates nothing.
    pub fn out_of_memory() -> AdError {
        AdError::Trap(Trap::host(TrapKind::OutOfMemory))
    }
}

/// Run `f`, compile work or a call's glue, inside a compile section
/// ([`vm::oom::section`]): an allocation that fails in it (served from the
/// reserve of [`vm::alloc_count::Reserve`] when that is the global
/// allocator) makes the result [`AdError::out_of_memory`], whatever `f`
/// returned.
#[inline(always)]
pub(crate) fn section<T>(f: impl FnOnce() -> Result<T, AdError>) -> Result<T, AdError> {
    // (Not `vm::oom::section`, which would move the whole result, an
    // `AdError`'s size, on every call: here only an error is moved.)
    let s = vm::oom::Section::enter();
    let r = f();
    match r {
        Ok(v) if !s.failed() => Ok(v),
        Err(e) if !s.failed() => Err(e),
        // `r` is dropped before `s` (declared after it): inside the
        // section.
        _ => Err(AdError::out_of_memory()),
    }
}
