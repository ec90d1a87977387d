//! The register bytecode run by the interpreter.
//!
//! ## Encoding
//! An instruction is an [`Instr`]: 12 bytes, fixed size (checked at compile
//! time below).
//!
//! | bytes | field | holds |
//! |-------|-------|-------|
//! | 0     | `op`  | the [`Op`] (one byte) |
//! | 1     | `flags` | reserved, zero |
//! | 2..4  | `r0`  | first register operand |
//! | 4..6  | `r1`  | second register operand |
//! | 6..8  | `r2`  | third register operand |
//! | 8..12 | `x`   | fourth register operand, or the non-register operand: jump target (instruction index), call-site index, jump-table index, register-list index or immediate |
//!
//! Register operands fill `r0`, `r1`, `r2`, `x` in the order of
//! [`Op::operands`]. Registers are `u16`: a frame has at most 65 535.
//!
//! ## Frames, constants and immediates
//! A function's frame is `nregs` 64-bit slots, typed by `reg_types` (f64 bits,
//! i64, bool as 0/1, array handle). Registers `0..nparams` receive the
//! arguments; registers `nparams..nparams + consts.len()` are the constant
//! registers, filled from `consts` when the frame is entered (so every operand,
//! literal or not, is a register); every other register starts at zero
//! (0.0 / 0 / false). Call arguments, jump tables and return lists are held in
//! side tables of the function and referenced by index from `x`.

use crate::ir::{FuncId, Loc, RetType};
use crate::op::Op;
use crate::types::Type;
use hashbrown::HashMap;
use std::fmt;

/// Register index within a frame.
pub type Reg = u16;

/// One instruction. See the module docs for the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Instr {
    /// The opcode.
    pub op: Op,
    /// Reserved, zero (but the subtraction bit of a step-and-branch).
    pub flags: u8,
    /// First register operand.
    pub r0: Reg,
    /// Second register operand.
    pub r1: Reg,
    /// Third register operand.
    pub r2: Reg,
    /// Fourth register operand, or the non-register operand (target, index, immediate).
    pub x: u32,
}

const _: () = assert!(std::mem::size_of::<Instr>() == 12);

impl Instr {
    /// An instruction with these operands and no flags.
    pub const fn new(op: Op, r0: Reg, r1: Reg, r2: Reg, x: u32) -> Instr {
        Instr {
            op,
            flags: 0,
            r0,
            r1,
            r2,
            x,
        }
    }

    /// The little-endian 12-byte encoding.
    pub fn encode(&self) -> [u8; 12] {
        let mut w = [0u8; 12];
        w[0] = self.op as u8;
        w[1] = self.flags;
        w[2..4].copy_from_slice(&self.r0.to_le_bytes());
        w[4..6].copy_from_slice(&self.r1.to_le_bytes());
        w[6..8].copy_from_slice(&self.r2.to_le_bytes());
        w[8..12].copy_from_slice(&self.x.to_le_bytes());
        w
    }

    /// Decode a word; `None` if byte 0 names no opcode.
    pub fn decode(w: &[u8; 12]) -> Option<Instr> {
        Some(Instr {
            op: Op::from_u8(w[0])?,
            flags: w[1],
            r0: u16::from_le_bytes([w[2], w[3]]),
            r1: u16::from_le_bytes([w[4], w[5]]),
            r2: u16::from_le_bytes([w[6], w[7]]),
            x: u32::from_le_bytes([w[8], w[9], w[10], w[11]]),
        })
    }

    /// The i-th register operand (`r0`, `r1`, `r2`, then `x`). An opcode
    /// with five register operands (`add.mul.aget`) keeps its fourth in
    /// the low 16 bits of `x` and its fifth in the high 16 ([`Instr::pack_x`]).
    pub fn reg(&self, i: usize) -> u32 {
        match i {
            0 => self.r0 as u32,
            1 => self.r1 as u32,
            2 => self.r2 as u32,
            3 if self.op.reg_operands().count() == 5 => self.x & 0xffff,
            3 => self.x,
            _ => self.x >> 16,
        }
    }

    /// The `x` field of an instruction whose register operands are
    /// `regs` (in storage order), where they reach past `r2`: the fourth,
    /// or the fourth and fifth as two 16-bit halves; 0 for fewer.
    pub fn pack_x(regs: &[u32]) -> u32 {
        match regs {
            [_, _, _, a] => *a,
            [_, _, _, a, b] => (a & 0xffff) | (b << 16),
            _ => 0,
        }
    }
}

/// A call site: callee, argument registers and, for `call.acc`, the
/// registers the returned values are added to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// The callee.
    pub func: FuncId,
    /// The argument registers, in the callee's parameter order.
    pub args: Vec<Reg>,
    /// The registers the returned values go to (`call.acc`, `call.n`).
    pub rets: Vec<Reg>,
}

/// A block boundary, kept for disassembly and trap messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockMark {
    /// The block's name.
    pub name: String,
    /// The index of its first instruction.
    pub start: u32,
}

/// One bytecode function.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// The function's name, without `@`.
    pub name: String,
    /// The parameters' types, in order.
    pub param_types: Vec<Type>,
    /// What it returns.
    pub ret: RetType,
    /// The type of every register; `reg_types.len()` is the frame size.
    pub reg_types: Vec<Type>,
    /// Constant registers: `consts[i]` is loaded into register
    /// `param_types.len() + i` on entry.
    pub consts: Vec<u64>,
    /// The instructions.
    pub code: Vec<Instr>,
    /// Call sites, indexed by the `x` of `call`, `call.acc` and `call.n`.
    pub sites: Vec<CallSite>,
    /// Jump tables of `blk.pop`: instruction indices.
    pub tables: Vec<Vec<u32>>,
    /// Register lists of `ret.n`.
    pub lists: Vec<Vec<Reg>>,
    /// Block starts, sorted by `start` (debug information).
    pub blocks: Vec<BlockMark>,
    /// Source location of each instruction (same length as `code`), or
    /// empty if unknown.
    pub locs: Vec<Loc>,
    /// Register names for the disassembler (same length as `reg_types`;
    /// empty strings where unnamed). The lowering makes them distinct.
    pub reg_names: Vec<String>,
}

impl Function {
    /// The frame size: how many registers the function uses.
    pub fn nregs(&self) -> usize {
        self.reg_types.len()
    }

    /// The name of the block holding instruction `pc`.
    pub fn block_of(&self, pc: usize) -> &str {
        let i = self.blocks.partition_point(|b| b.start as usize <= pc);
        if i == 0 {
            "?"
        } else {
            &self.blocks[i - 1].name
        }
    }
}

/// A frame's initial image ([`Program::frame_init`]) is a whole number of
/// chunks of this many registers, which the interpreter copies in fixed-size
/// pieces instead of calling `memcpy` and `memset` per call.
pub const FRAME_CHUNK: usize = 4;

/// A program: bytecode functions referring to each other by [`FuncId`].
/// The AD stage appends derived functions to it.
///
/// The functions are private so that the verified flag of each function
/// cannot go stale: replacing a function clears it, and only
/// [`crate::verify`] sets it. The interpreter refuses to enter a function
/// that is not verified, which is what makes its unchecked register accesses
/// sound.
#[derive(Clone, Debug, Default)]
pub struct Program {
    funcs: Vec<Function>,
    /// Per function: `None` while it is not verified; once it is, the
    /// initial contents of its registers past the parameters: the
    /// constants, then zeros, padded with zeros to a multiple of
    /// [`FRAME_CHUNK`] (so at least `nregs - nparams` long).
    init: Vec<Option<Box<[u64]>>>,
    /// Per function id, the functions that named it in a call site when
    /// they were pushed or set: a superset of its callers (entries go stale
    /// when a caller is replaced or dropped), so that replacing a function
    /// looks at its callers only, not at the whole program (the AD stage
    /// sets every derived function once: thousands in a long call chain).
    /// A map, not a vector indexed by callee: a call site may name any id
    /// (the verifier refuses one that names no function), and a vector as
    /// long as `FuncId(u32::MAX)` would not fit in memory.
    callers: HashMap<FuncId, Vec<FuncId>>,
    /// What each derived function (one the AD stage built) was derived
    /// from, for trap messages ([`Program::set_origin`]).
    origins: HashMap<FuncId, Origin>,
    /// Per function: the stamp it got when it was last verified (see
    /// [`Program::stamp`]); meaningful only while it is verified.
    stamps: Vec<u64>,
    /// How many functions have an `aset` ([`Program::writes_arrays`]).
    writers: usize,
}

/// Where a derived function comes from: the user function it was derived
/// from and what its code computes (`"gradient's forward sweep"`, ...).
/// Trap messages name the user function and this description instead of
/// the derived function's own name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The user function the code was derived from.
    pub of: FuncId,
    /// What the code computes, as trap messages say it.
    pub code: String,
}

/// [`Program::set`] of an id that names no function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoFunction(pub FuncId);

impl fmt::Display for NoFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no function {} to replace", self.0)
    }
}

impl std::error::Error for NoFunction {}

/// Programs are equal when their functions and verified states are (the
/// caller index is bookkeeping).
impl PartialEq for Program {
    fn eq(&self, other: &Program) -> bool {
        self.funcs == other.funcs && self.init == other.init
    }
}

impl Program {
    /// An empty program.
    pub fn new() -> Program {
        Program::default()
    }

    /// A function by name (with or without `@`): the first of that name.
    pub fn find(&self, name: &str) -> Option<FuncId> {
        let name = name.strip_prefix('@').unwrap_or(name);
        self.funcs
            .iter()
            .position(|f| f.name == name)
            .map(|i| FuncId(i as u32))
    }

    /// Function `id`; panics if there is none (ids come from this program).
    pub fn func(&self, id: FuncId) -> &Function {
        &self.funcs[id.index()]
    }

    /// Function `id`, if there is one.
    pub fn get(&self, id: FuncId) -> Option<&Function> {
        self.funcs.get(id.index())
    }

    /// Every function, by id.
    pub fn funcs(&self) -> &[Function] {
        &self.funcs
    }

    /// How many functions the program has.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether the program has no function.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    /// Append an (unverified) function. Nothing about it is checked here
    /// (its call sites may name functions pushed later); the verifier
    /// checks it before it can run.
    pub fn push(&mut self, f: Function) -> FuncId {
        let id = FuncId(self.funcs.len() as u32);
        self.note_calls(id, &f);
        self.writers += usize::from(writes_arrays(&f));
        self.funcs.push(f);
        self.init.push(None);
        self.stamps.push(0);
        id
    }

    /// Record `id` as a caller of every function `f`'s call sites name.
    fn note_calls(&mut self, id: FuncId, f: &Function) {
        for site in &f.sites {
            let list = self.callers.entry(site.func).or_default();
            if !list.contains(&id) {
                list.push(id);
            }
        }
    }

    /// Replace a function; it must be verified again before it runs, and so
    /// must every function that calls it: a caller was verified against
    /// the callee's signature, which may have changed. (So a verified
    /// caller's call sites always fit their callees, which the interpreter
    /// relies on.) An `id` that names no function is an error.
    pub fn set(&mut self, id: FuncId, f: Function) -> Result<(), NoFunction> {
        if id.index() >= self.funcs.len() {
            return Err(NoFunction(id));
        }
        self.note_calls(id, &f);
        self.writers -= usize::from(writes_arrays(&self.funcs[id.index()]));
        self.writers += usize::from(writes_arrays(&f));
        self.funcs[id.index()] = f;
        self.init[id.index()] = None;
        self.unverify_callers(id);
        Ok(())
    }

    /// Record that `id` is derived code ([`Origin`]); `origin.of` should
    /// be a user function (a function with no origin of its own).
    pub fn set_origin(&mut self, id: FuncId, origin: Origin) {
        self.origins.insert(id, origin);
    }

    /// What `id` was derived from, if it is derived code.
    pub fn origin(&self, id: FuncId) -> Option<&Origin> {
        self.origins.get(&id)
    }

    /// Drop every function from `len` on (and unverify the functions that
    /// call one of them: an id may be reused by a later `push`).
    pub fn truncate(&mut self, len: usize) {
        self.funcs.truncate(len);
        self.writers = self.funcs.iter().filter(|f| writes_arrays(f)).count();
        self.init.truncate(len);
        self.origins.retain(|id, _| id.index() < len);
        self.stamps.truncate(len);
        let mut dropped: Vec<FuncId> = self
            .callers
            .keys()
            .copied()
            .filter(|callee| callee.index() >= len)
            .collect();
        dropped.sort_unstable();
        for callee in dropped {
            self.unverify_callers(callee);
            self.callers.remove(&callee);
        }
    }

    /// Unverify every function that calls `callee`, and forget the stale
    /// entries of its caller list.
    fn unverify_callers(&mut self, callee: FuncId) {
        let Some(list) = self.callers.get_mut(&callee) else {
            return;
        };
        let (funcs, init) = (&self.funcs, &mut self.init);
        list.retain(|caller| {
            let calls = funcs
                .get(caller.index())
                .is_some_and(|f| f.sites.iter().any(|s| s.func == callee));
            if calls {
                init[caller.index()] = None;
            }
            calls
        });
    }

    /// Whether some function of the program writes array elements (has an
    /// `aset`): if none does, a call cannot change the arrays live when it
    /// starts (checkpointing then copies them only if it needs them).
    pub fn writes_arrays(&self) -> bool {
        self.writers > 0
    }

    /// Whether `id` exists and passed the verifier since it was last set.
    #[inline]
    pub fn is_verified(&self, id: FuncId) -> bool {
        self.frame_init(id).is_some()
    }

    /// For a verified function, a number that no other verification of any
    /// function of any program in this process was given: a function keeps
    /// its stamp while it stays verified, so a cache of something derived
    /// from a verified function (the native tier's machine code) is valid
    /// while the stamp is the same. A function is unverified whenever it or
    /// a callee changes ([`Program::set`], [`Program::truncate`]), and gets
    /// a new stamp when it is verified again. `None` if `id` does not exist
    /// or is not verified.
    #[inline]
    pub fn stamp(&self, id: FuncId) -> Option<u64> {
        self.frame_init(id)?;
        self.stamps.get(id.index()).copied()
    }

    /// For a verified function, the initial contents of its registers past
    /// the parameters (constants, then zeros; a multiple of [`FRAME_CHUNK`]
    /// long, at least `nregs - nparams`); `None` if `id` does not exist or
    /// is not verified.
    #[inline]
    pub fn frame_init(&self, id: FuncId) -> Option<&[u64]> {
        self.init.get(id.index())?.as_deref()
    }

    /// [`Program::frame_init`] of every function, by id (for the
    /// interpreter's calls, which index it with verified callees).
    #[inline]
    pub(crate) fn frame_inits(&self) -> &[Option<Box<[u64]>>] {
        &self.init
    }

    /// Mark `id` verified (only the verifier does, after its checks: in
    /// particular `nparams + consts.len() <= nregs`).
    pub(crate) fn mark_verified(&mut self, id: FuncId) {
        let f = &self.funcs[id.index()];
        let np = f.param_types.len();
        let len = f.nregs().saturating_sub(np).next_multiple_of(FRAME_CHUNK);
        let mut init = vec![0u64; len.max(f.consts.len())];
        init[..f.consts.len()].copy_from_slice(&f.consts);
        self.init[id.index()] = Some(init.into_boxed_slice());
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        self.stamps[id.index()] = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} r{} r{} r{} x{}",
            self.op.mnemonic(),
            self.r0,
            self.r1,
            self.r2,
            self.x
        )
    }
}

/// Whether `f`'s code has an `aset` (the only instruction that writes an
/// array's elements).
fn writes_arrays(f: &Function) -> bool {
    f.code.iter().any(|i| i.op == Op::ASet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::RetType;

    fn function(nparams: usize, nregs: usize, consts: Vec<u64>) -> Function {
        Function {
            name: "f".into(),
            param_types: vec![Type::I64; nparams],
            ret: RetType::One(Type::I64),
            reg_types: vec![Type::I64; nregs],
            consts,
            code: vec![Instr::new(Op::Ret, 0, 0, 0, 0)],
            sites: Vec::new(),
            tables: Vec::new(),
            lists: Vec::new(),
            blocks: Vec::new(),
            locs: Vec::new(),
            reg_names: Vec::new(),
        }
    }

    /// A function whose only call site names `callee`.
    fn calling(callee: FuncId) -> Function {
        let mut f = function(0, 1, Vec::new());
        f.sites.push(CallSite {
            func: callee,
            args: Vec::new(),
            rets: Vec::new(),
        });
        f
    }

    #[test]
    fn replacing_a_function_unverifies_exactly_its_current_callers() {
        let mut p = Program::new();
        let b = FuncId(1);
        let a = p.push(calling(b));
        p.push(function(0, 1, Vec::new()));
        let c = p.push(calling(b));
        let d = p.push(function(0, 1, Vec::new()));
        let verify_all = |p: &mut Program| {
            for id in (0..p.len()).map(|i| FuncId(i as u32)) {
                p.mark_verified(id);
            }
        };
        verify_all(&mut p);
        p.set(b, function(0, 1, Vec::new())).expect("exists");
        let verified = |p: &Program| [a, b, c, d].map(|id| p.is_verified(id));
        assert_eq!(verified(&p), [false, false, false, true]);
        // `a` no longer calls `b`: its entry in `b`'s list is stale.
        p.set(a, function(0, 1, Vec::new())).expect("exists");
        verify_all(&mut p);
        p.set(b, function(0, 1, Vec::new())).expect("exists");
        assert_eq!(verified(&p), [true, false, false, true]);
        // `d` starts calling `b` (a new entry), then `b` is dropped.
        p.set(d, calling(b)).expect("exists");
        verify_all(&mut p);
        p.truncate(2);
        assert_eq!(p.len(), 2);
        assert_eq!(verified(&p)[..2], [true, true]);
        // Ids reused after a truncate: `c` again calls `b`.
        let c2 = p.push(calling(b));
        verify_all(&mut p);
        p.set(b, function(0, 1, Vec::new())).expect("exists");
        assert!(p.is_verified(a) && !p.is_verified(c2));
    }

    #[test]
    fn stamps_are_fresh_per_verification_and_gone_when_unverified() {
        let mut p = Program::new();
        let a = p.push(function(0, 1, Vec::new()));
        let b = p.push(calling(a));
        assert_eq!(p.stamp(a), None);
        crate::verify::verify_function(&mut p, a).expect("verifies");
        crate::verify::verify_function(&mut p, b).expect("verifies");
        let (sa, sb) = (p.stamp(a).expect("verified"), p.stamp(b).expect("verified"));
        assert_ne!(sa, sb);
        // A clone shares the stamps (same functions); replacing the callee
        // unverifies the caller, and verifying again gives new stamps.
        let q = p.clone();
        assert_eq!(q.stamp(b), Some(sb));
        p.set(a, function(0, 1, Vec::new())).expect("exists");
        assert_eq!((p.stamp(a), p.stamp(b)), (None, None));
        crate::verify::verify_function(&mut p, a).expect("verifies");
        crate::verify::verify_function(&mut p, b).expect("verifies");
        assert!(p.stamp(a) != Some(sa) && p.stamp(b) != Some(sb));
        assert_eq!(p.stamp(FuncId(9)), None);
    }

    #[test]
    fn frame_images_exist_only_while_verified() {
        let mut p = Program::new();
        let id = p.push(function(2, 9, vec![7, 8]));
        assert_eq!(p.frame_init(id), None);
        assert!(!p.is_verified(id));
        crate::verify::verify_function(&mut p, id).expect("verifies");
        // 7 registers past the parameters: the constants, then zeros, to a
        // whole number of chunks.
        assert_eq!(p.frame_init(id), Some(&[7, 8, 0, 0, 0, 0, 0, 0][..]));
        assert!(p.is_verified(id));
        p.set(id, function(1, 1, Vec::new())).expect("exists");
        assert_eq!(p.frame_init(id), None);
        crate::verify::verify_function(&mut p, id).expect("verifies");
        assert_eq!(p.frame_init(id), Some(&[][..]));
        assert_eq!(p.frame_init(FuncId(5)), None);
        p.truncate(0);
        assert_eq!(p.frame_init(id), None);
    }
}
