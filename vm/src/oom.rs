//! Compile sections: out-of-memory as an error, not an abort, for the work
//! of building code (assembling, lowering, verifying, inlining, deriving).
//!
//! Rust's standard collections cannot report a failed allocation: they
//! call the allocation-error handler, which aborts the process. The
//! allocations whose size a program's *run* controls are fallible
//! (`try_reserve`, the trap `out of memory`); those of compile work are
//! the ordinary infallible ones. For them the global allocator
//! [`Reserve`](crate::alloc_count::Reserve) keeps a rainy-day fund: a
//! fixed region of [`RESERVE_BYTES`](crate::alloc_count::RESERVE_BYTES)
//! from which, while the thread is inside a [`section`], it serves a
//! request the allocator underneath refused, and records that an
//! allocation failed. The section then reports [`OutOfMemory`] (dropping
//! what its work produced, which gives the memory back), and the caller
//! turns that into its own error (`AdError::Trap` with
//! `TrapKind::OutOfMemory` for the AD engine, an `out of memory` diagnostic
//! for the assembler).
//!
//! Outside a section, inside a [`bypass`], with a request larger than what
//! is left of the region, or without `Reserve` installed as the global
//! allocator, a failed allocation is what it was: null for `try_reserve`,
//! std's abort for the rest.
//!
//! ```
//! // Nothing fails here: the section returns the value.
//! let v = vm::oom::section(|| vec![1u8; 16]);
//! assert_eq!(v.map(|v| v.len()), Ok(16));
//! assert!(!vm::oom::failed());
//! ```

use std::cell::Cell;
use std::fmt;

/// An allocation failed inside a [`section`] (and was served from the
/// reserve, so the work could go on to its end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory;

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("out of memory")
    }
}

impl std::error::Error for OutOfMemory {}

/// This thread's sections: how deep, how many bypasses, and whether an
/// allocation failed since the outermost section began. `const`
/// initialised and without a destructor, so that the allocator may read
/// it at any time (it never allocates).
struct State {
    depth: Cell<u32>,
    bypass: Cell<u32>,
    failed: Cell<bool>,
}

thread_local! {
    static STATE: State = const {
        State {
            depth: Cell::new(0),
            bypass: Cell::new(0),
            failed: Cell::new(false),
        }
    };
}

/// Run `f` inside a section: an allocation the global allocator cannot
/// make during it is served from the reserve (when
/// [`Reserve`](crate::alloc_count::Reserve) is the global allocator and the
/// request fits), and the section returns `Err(OutOfMemory)`, the value
/// `f` produced dropped (inside the section). Without a failure it
/// returns `f`'s value.
///
/// Sections nest: a failure fails the section it happens in and every
/// section around it (the flag stays set until the outermost one ends),
/// so an inner section's caller may roll back its own work and the outer
/// one still reports the failure. [`failed`] tells long work to stop
/// early.
#[inline]
pub fn section<T>(f: impl FnOnce() -> T) -> Result<T, OutOfMemory> {
    let section = Section::enter();
    let value = f();
    if section.failed() {
        drop(value);
        drop(section);
        Err(OutOfMemory)
    } else {
        drop(section);
        Ok(value)
    }
}

/// A section as a scope: entered by [`Section::enter`], left when dropped
/// (also on unwinding). [`section`] in two steps, for a caller that maps
/// the failure to an error of its own without moving its result into
/// another (`Err` values can be large):
///
/// ```
/// fn build() -> Result<Vec<u8>, String> {
///     let s = vm::oom::Section::enter();
///     let r = Ok(vec![0u8; 16]);
///     if s.failed() {
///         drop(r); // inside the section
///         return Err("out of memory".to_string());
///     }
///     r
/// }
/// assert_eq!(build().map(|v| v.len()), Ok(16));
/// ```
pub struct Section {
    _scope: Enter,
}

impl Section {
    /// Enter a section on this thread.
    #[inline]
    pub fn enter() -> Section {
        Section {
            _scope: Enter::section(),
        }
    }

    /// Whether an allocation failed since the section (or one around it)
    /// began: [`failed`].
    #[inline]
    pub fn failed(&self) -> bool {
        failed()
    }
}

/// Run `f` inside a section and keep its value even if an allocation
/// failed: for the small error value reported *after* an out-of-memory
/// (its few bytes come from the reserve if need be). A failure still fails
/// the sections around this one.
pub fn with_reserve<T>(f: impl FnOnce() -> T) -> T {
    let _section = Section::enter();
    f()
}

/// Whether an allocation failed in the current section (or one around
/// it): the work of the section may stop early, its result is an error
/// anyway. `false` outside sections.
#[inline]
pub fn failed() -> bool {
    STATE.try_with(|s| s.failed.get()).unwrap_or(false)
}

/// Run `f` without the reserve, inside a section or not: an allocation
/// that fails in it is null for its caller, as outside sections. For the
/// fallible allocations of a run (`try_reserve` of arrays and stacks),
/// which report a failure as the trap `out of memory` at their
/// instruction themselves.
#[inline]
pub fn bypass<T>(f: impl FnOnce() -> T) -> T {
    let _guard = Enter::bypass();
    f()
}

/// Whether a failed allocation may be served from the reserve now: inside
/// a section, outside bypasses. Read by the allocator.
pub(crate) fn reserve_allowed() -> bool {
    STATE
        .try_with(|s| s.depth.get() > 0 && s.bypass.get() == 0)
        .unwrap_or(false)
}

/// Record that an allocation failed (and was served from the reserve).
/// Called by the allocator.
pub(crate) fn note_failure() {
    let _ = STATE.try_with(|s| s.failed.set(true));
}

/// The scope of a section or a bypass: entered by its constructor, left
/// when dropped (also on unwinding). Not `Send`: it is this thread's.
struct Enter {
    bypass: bool,
    _thread: std::marker::PhantomData<*const ()>,
}

impl Enter {
    #[inline]
    fn section() -> Enter {
        let _ = STATE.try_with(|s| {
            let depth = s.depth.get();
            if depth == 0 {
                s.failed.set(false);
            }
            s.depth.set(depth.saturating_add(1));
        });
        Enter {
            bypass: false,
            _thread: std::marker::PhantomData,
        }
    }

    #[inline]
    fn bypass() -> Enter {
        let _ = STATE.try_with(|s| s.bypass.set(s.bypass.get().saturating_add(1)));
        Enter {
            bypass: true,
            _thread: std::marker::PhantomData,
        }
    }
}

impl Drop for Enter {
    #[inline]
    fn drop(&mut self) {
        let _ = STATE.try_with(|s| {
            if self.bypass {
                s.bypass.set(s.bypass.get().saturating_sub(1));
            } else {
                let depth = s.depth.get().saturating_sub(1);
                s.depth.set(depth);
                if depth == 0 {
                    s.failed.set(false);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_nest_and_the_flag_lasts_until_the_outermost_ends() {
        assert!(!reserve_allowed());
        let r = section(|| {
            assert!(reserve_allowed());
            bypass(|| assert!(!reserve_allowed()));
            assert!(reserve_allowed());
            let inner = section(|| {
                note_failure();
                1
            });
            assert_eq!(inner, Err(OutOfMemory));
            // Still failed: the outer section reports it too.
            assert!(failed());
            assert_eq!(section(|| 2), Err(OutOfMemory));
            3
        });
        assert_eq!(r, Err(OutOfMemory));
        assert!(!failed(), "cleared when the outermost section ends");
        assert_eq!(section(|| 4), Ok(4));
        assert_eq!(with_reserve(|| 5), 5);
        // Failure outside a section is not recorded by sections later.
        assert!(!reserve_allowed());
    }

    #[test]
    fn a_panicking_section_leaves_no_state() {
        let r = std::panic::catch_unwind(|| {
            section(|| {
                note_failure();
                panic!("inside")
            })
        });
        assert!(r.is_err());
        assert!(!reserve_allowed());
        assert!(!failed());
    }
}
