//! Derivative rules, one module per AD mode, each one exhaustive `match`
//! over the opcode table ([`vm::op::Op`]) with no wildcard arm: adding an
//! opcode without its rule in every mode is a compile error.
//!
//! * [`reverse`]: what each opcode's pullback does (reverse mode).
//! * [`tangent`]: what each opcode's tangent is (forward mode).

pub mod reverse;
pub mod tangent;
