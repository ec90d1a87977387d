//! # vm: advm's bytecode, SSA IR, lowering, verifier and interpreter
//!
//! Pipeline owned by this crate:
//!
//! ```text
//! ir::Module (SSA, from the assembler or the AD stage)
//!   --lower-->  bytecode::Program (registers, flat code, side tables)
//!   --verify--> proven-safe bytecode (each function marked verified)
//!   --interp--> values or a Trap
//! ```
//!
//! * [`op`]: the single opcode table everything else reads.
//! * [`math`]: the arithmetic of derived code (strong-zero products).
//! * [`ir`]: the SSA IR.
//! * [`bytecode`]: the fixed-size instruction encoding and functions.
//! * [`lower`]: SSA IR to bytecode (phis become parallel copies on edges).
//! * [`verify`]: the bytecode verifier; **Architecture invariant:** no
//!   bytecode that passes it can make the interpreter panic or index out of
//!   bounds.
//! * [`interp`]: the register interpreter with an explicit frame stack.
//! * [`inline`]: small callees copied into their callers (an IR pass).
//! * [`disasm`]: bytecode to text.
//! * [`bits`]: bit sets for the dataflow analyses.
//! * [`dom`]: dominator trees (used by the assembler's SSA checks and the
//!   AD stage's loop analysis).
//! * [`oom`]: compile sections, in which an allocation failure is an
//!   error (served from [`alloc_count::Reserve`]'s reserve) instead of an
//!   abort.
//!
//! `unsafe` lives only in the private `regs` module (unchecked register
//! access, instruction fetch and reserved comms push, justified by the
//! verifier) and in [`alloc_count`] (the global allocators: counting,
//! failing an armed allocation, and [`alloc_count::Reserve`], which forward
//! to another allocator or serve a block of a static region).

#![warn(missing_docs)]

pub mod alloc_count;
pub mod bits;
pub mod bytecode;
pub mod disasm;
pub mod dom;
mod heap;
pub mod ifconv;
pub mod inline;
pub mod interp;
pub mod ir;
pub mod licm;
pub mod lower;
pub mod math;
pub mod oom;
pub mod op;
mod regs;
pub mod types;
pub mod verify;

pub use interp::{
    CallStack, Caller, Limits, NativeTier, Tier, Trap, TrapKind, Vm, CALLERS_SHOWN,
    SOURCE_LINE_CHARS,
};
pub use types::{Type, Value};
