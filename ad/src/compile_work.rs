//! The compile budget: a bound on the work of building derived code, as
//! fuel bounds a run.
//!
//! Deriving a function (analysis, translation, assembly of the forward and
//! reverse CFGs, the reverse clean-up, lowering and verification) costs
//! time roughly proportional to the size of the functions each stage reads
//! and writes. [`Work`] counts that size in *work units* as the stages run:
//! one unit per block, phi, phi argument, instruction, instruction operand
//! and value of each function a stage reads (the primal before analysis
//! and translation, the reverse function before each round of clean-up, the
//! forward and reverse functions before lowering). The count is checked
//! between stages, so one stage runs at most once past the bound, and every
//! stage is linear (or n log n) in its input (`ad/tests/it/linear_time.rs`).
//!
//! One budget covers one request: a function and every callee derived with
//! it. Past the bound, derivation stops with [`AdError::TooMuchWork`]
//! (nothing derived is kept) instead of running for minutes.
//!
//! [`AdError::TooMuchWork`]: crate::AdError::TooMuchWork

use vm::ir::Function;

/// The default bound ([`crate::Engine::set_max_compile_work`]): a few
/// seconds of compile work in a release build (about 10^7 units a second),
/// orders of magnitude above every program of the corpus; 29 900 phis in
/// one loop header, near the most a frame holds, take under 10^7.
pub const DEFAULT_MAX_COMPILE_WORK: u64 = 50_000_000;

/// Work units charged so far against a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    used: u64,
    limit: u64,
}

/// The bound was passed: `used` units were needed so far, `limit` allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exceeded {
    /// The units counted when the bound was passed.
    pub used: u64,
    /// The units allowed.
    pub limit: u64,
}

impl Work {
    /// Nothing used yet, at most `limit` units.
    pub fn new(limit: u64) -> Work {
        Work { used: 0, limit }
    }

    /// No bound (the counting still happens).
    pub fn unlimited() -> Work {
        Work::new(u64::MAX)
    }

    /// Units charged so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The bound.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Charge `units`; an error once the total passes the bound, or once
    /// an allocation failed in the compile section the work runs in
    /// ([`vm::oom::failed`]: the section's result is `out of memory`, not
    /// this error, and the work stops early).
    #[inline]
    pub fn charge(&mut self, units: u64) -> Result<(), Exceeded> {
        self.used = self.used.saturating_add(units);
        if self.used > self.limit || vm::oom::failed() {
            Err(Exceeded {
                used: self.used,
                limit: self.limit,
            })
        } else {
            Ok(())
        }
    }

    /// Charge the size of `f` ([`size`]).
    #[inline]
    pub fn charge_function(&mut self, f: &Function) -> Result<(), Exceeded> {
        self.charge(size(f))
    }
}

/// The size of `f` in work units: its values, and per block one unit, one
/// per phi and phi argument, one per instruction and operand, one for
/// its terminator and one per operand of its terminator. Linear in the function.
pub fn size(f: &Function) -> u64 {
    let mut n = f.values.len() as u64;
    for b in &f.blocks {
        n += 2 + b.term.uses().len() as u64;
        for phi in &b.phis {
            n += 1 + phi.incoming.len() as u64;
        }
        for inst in &b.insts {
            n += 1 + inst.args.len() as u64;
        }
    }
    n
}
