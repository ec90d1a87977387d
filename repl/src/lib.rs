//! # advm: a bytecode VM that differentiates programs
//!
//! Compile a program, then run its functions and take their derivatives in
//! every mode: gradients and vector-Jacobian products (reverse mode),
//! directional derivatives and Jacobians (forward mode), Hessian-vector
//! products and Hessians (forward over reverse). Derivatives are exact: the
//! AD stage rewrites each function into derived bytecode that the same VM
//! runs (`docs/ad.md`).
//!
//! ```
//! let src = "
//! fn @f(%x: f64, %y: f64) -> f64 {
//! entry:
//!     %p = mul %x, %y
//!     %s = sin %p
//!     ret %s
//! }";
//! let mut program = advm::Program::parse(src)?;
//! let g = program.grad("f", [1.0, 2.0])?;
//! assert_eq!(g.value, 2f64.sin());
//! assert_eq!(g.f64("x"), Some(2.0 * 2f64.cos()));
//! assert_eq!(g.f64("y"), Some(2f64.cos()));
//!
//! // With respect to y only, and the other modes:
//! let mut f = program.function("f")?.wrt(["y"])?;
//! assert_eq!(f.grad([1.0, 2.0])?.get("x"), None);
//! let t = f.jvp([1.0, 2.0], [0.0, 1.0])?; // d/dy along (0, 1)
//! assert_eq!(t.tangent, Some(advm::Value::F64(2f64.cos())));
//! let h = f.hessian([1.0, 2.0])?; // d²/dy²
//! assert_eq!(h.matrix, [[-(2f64.sin())]]);
//!
//! // Mistakes are errors with a readable message, never panics:
//! let err = program.grad("f", [1.0]).expect_err("one argument short");
//! assert_eq!(err.to_string(), "bad arguments: @f takes 2 argument(s), got 1");
//! # Ok::<(), advm::Error>(())
//! ```
//!
//! The main items:
//!
//! * [`Program`]: a compiled source ([`Program::parse`],
//!   [`Program::from_file`] for `.adasm` and `.adl` files, [`Lang`]).
//!   `Clone + Send + Sync`: one clone per thread shares
//!   the derived code.
//! * [`Function`]: one function with its parameter selection
//!   ([`Function::wrt`]): [`run`](Function::run), [`grad`](Function::grad),
//!   [`vjp`](Function::vjp), [`jvp`](Function::jvp),
//!   [`hvp`](Function::hvp), [`hessian`](Function::hessian),
//!   [`jacobian`](Function::jacobian).
//! * Arguments are [`Args`]: `[f64; N]`, `&[f64]`, `Vec<Value>`, or mixed
//!   kinds with [`args!`] (`args![2.0, 10, vec![1.0, 2.0]]`).
//! * Results are plain numbers by parameter name: [`Gradient`],
//!   [`Partials`], [`Derivative`], [`Vjp`], [`Jvp`], [`Hvp`], [`Hessian`],
//!   [`Jacobian`].
//! * One error type, [`Error`], whose `Display` is the message the command
//!   line prints.
//!
//! For hot loops that must not allocate (prepared gradients, many points on
//! all cores) the engine underneath is at hand: [`Program::engine_mut`],
//! [`ad::Engine`]. The command line's helpers are in [`cli`] (feature
//! `cli`, on by default; `default-features = false` leaves out the command
//! line and its dependencies). The chapter `docs/library.md` walks through
//! the facade.

#![warn(missing_docs)]

mod error;
mod program;
mod results;

pub use error::{Error, Result};
pub use program::{Args, Function, Lang, Program};
pub use results::{Derivative, Gradient, Hessian, Hvp, Jacobian, Jvp, Partials, Vjp};
pub use vm::{Limits, Trap, Type, Value};

/// The global allocator that turns an allocation failure in compile work
/// (parsing, lowering, verifying, deriving) into an `out of memory` error
/// instead of an abort: `Reserve::new(std::alloc::System)` (see
/// `docs/library.md`, *Out of memory*, and [`vm::oom`]).
pub use vm::alloc_count::Reserve;

/// The crates underneath, for what the facade does not wrap: the AD engine
/// (`advm-ad`), the assembler (`advm-assembler`) and the VM (`advm-vm`).
pub use {ad, assembler, vm};

#[cfg(feature = "cli")]
pub mod cli;

// The paths the binary and the tests used before the command line's helpers
// moved into `cli`.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub use cli::{args, engine, fd, points, read_file, Options, DEFAULT_MAX_SOURCE_BYTES};

/// The examples of `docs/library.md`, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/library.md")]
pub struct LibraryChapter;
