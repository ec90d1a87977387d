//! The limits a run is held to (`Limits`, each a flag of `advm`) and the traps
//! that end a run (`TrapKind`, `Trap`), with their messages.

use super::*;

/// Resource limits. Each has a command-line flag in `advm`.
///
/// The defaults fit a machine with a few GiB of memory: at most 4 GiB of
/// arrays, 2 GiB of AD stacks; one array of the largest length
/// (2^27 elements, 1 GiB) fits the heap limit with its shadow in a
/// gradient, and twice over in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most active frames, the entry function's included (`--max-depth`):
    /// 1 allows no call; 0 allows no frame at all, so every call traps with
    /// [`TrapKind::CallDepth`] at the entry function.
    pub max_call_depth: usize,
    /// Instructions one top-level call may execute (`--fuel`); `None` is
    /// unlimited.
    pub fuel: Option<u64>,
    /// Largest array `anew` may create, and largest argument array, in
    /// elements (`--max-array`).
    pub max_array_len: usize,
    /// Bytes the comms and block stacks may hold together during one
    /// gradient call (`--max-stack-bytes`).
    pub max_stack_bytes: usize,
    /// Bytes all arrays live at once may hold during one top-level call
    /// (a run, or a gradient's forward and reverse calls together),
    /// argument arrays included: 8 per element, 16 in a gradient (data and
    /// shadow), plus 48 per array (`--max-heap-bytes`). The buffers the VM
    /// keeps for reuse stay within it too (see `heap.rs`).
    pub max_heap_bytes: usize,
    /// Bytes the VM may hold in all (`--max-memory`): registers, suspended
    /// frames, AD stacks and arrays (buffers kept for reuse included),
    /// counted by capacity. Checked wherever one of them grows; the other
    /// limits still hold within it.
    pub max_memory_bytes: usize,
    /// Bytes the values the forward code stores for the reverse code (the
    /// comms and block stacks together) may hold at any moment
    /// (`--ad-budget`); `None` is no budget. Unlike `max_stack_bytes`,
    /// a forward call past the budget runs on to its end (storing only what
    /// fits, so that it can count what storing everything needs) and then
    /// traps with [`TrapKind::AdBudget`]. With both, the smaller applies.
    pub ad_budget: Option<usize>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_call_depth: 100_000,
            fuel: None,
            max_array_len: 1 << 27,
            max_stack_bytes: 1 << 31,
            max_heap_bytes: 1 << 32,
            max_memory_bytes: 1 << 32,
            ad_budget: None,
        }
    }
}

/// What went wrong at run time.
///
/// `ArrayTooLarge` is an `anew` longer than `Limits::max_array_len`,
/// `ArgArrayTooLarge` an argument array (from the host) longer than it;
/// `HeapLimit` a new array that would take the bytes of the live arrays
/// (elements, shadows, slots) to `needed`, past `Limits::max_heap_bytes`;
/// `MemoryLimit` registers, frames, AD stacks and arrays together past
/// `Limits::max_memory_bytes`.
#[derive(Clone, Debug, PartialEq)]
pub enum TrapKind {
    DivByZero,
    RemByZero,
    OutOfBounds {
        index: i64,
        len: usize,
    },
    NegativeLength(i64),
    ArrayTooLarge {
        len: i64,
        limit: usize,
    },
    ArgArrayTooLarge {
        len: usize,
        limit: usize,
    },
    HeapLimit {
        needed: usize,
        limit: usize,
    },
    FtoiInvalid(f64),
    CallDepth {
        limit: usize,
    },
    OutOfFuel {
        limit: u64,
    },
    Interrupted,
    StackLimit {
        limit: usize,
    },
    /// The forward code stored more than `Limits::ad_budget` (`budget`)
    /// bytes: storing everything needs `needed` (`exact`), or at least
    /// `needed` when one batch of pushes alone was larger than the budget
    /// and the call stopped there.
    AdBudget {
        budget: usize,
        needed: usize,
        exact: bool,
    },
    MemoryLimit {
        limit: usize,
    },
    OutOfMemory,
    StackUnderflow,
    BadHandle,
    NoShadow,
    BadBlockId(u32),
    NotVerified,
    ArgMismatch(String),
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrapKind::DivByZero => write!(f, "integer division by zero"),
            TrapKind::RemByZero => write!(f, "integer remainder by zero"),
            TrapKind::OutOfBounds { index, len } => {
                write!(f, "array index {index} out of bounds for length {len}")
            }
            TrapKind::NegativeLength(n) => write!(f, "anew with negative length {n}"),
            TrapKind::ArrayTooLarge { len, limit } => write!(
                f,
                "anew of {len} elements exceeds the array limit of {limit} (raise it with --max-array)"
            ),
            TrapKind::ArgArrayTooLarge { len, limit } => write!(
                f,
                "argument array of {len} elements exceeds the array limit of {limit} (raise it with --max-array)"
            ),
            TrapKind::HeapLimit { needed, limit } => write!(
                f,
                "arrays exceed the heap limit of {limit} bytes: the live arrays would hold {needed} (raise it with --max-heap-bytes)"
            ),
            TrapKind::FtoiInvalid(x) => write!(f, "ftoi of {x}: not representable as i64"),
            TrapKind::CallDepth { limit } => {
                write!(f, "call depth exceeded (limit {limit}; raise it with --max-depth)")
            }
            TrapKind::OutOfFuel { limit } => {
                write!(f, "out of fuel: more than {limit} instructions (raise the limit with --fuel)")
            }
            TrapKind::Interrupted => write!(f, "interrupted"),
            TrapKind::StackLimit { limit } => write!(
                f,
                "AD stacks exceed the limit of {limit} bytes (raise it with --max-stack-bytes)"
            ),
            TrapKind::AdBudget {
                budget,
                needed,
                exact,
            } => write!(
                f,
                "AD storage exceeds the budget of {budget} bytes: the values stored for the \
                 reverse sweep need {}{needed} bytes (raise it with --ad-budget)",
                if *exact { "" } else { "at least " }
            ),
            TrapKind::MemoryLimit { limit } => write!(
                f,
                "memory exceeds the limit of {limit} bytes (registers, frames, AD stacks and \
                 arrays together; raise it with --max-memory)"
            ),
            TrapKind::OutOfMemory => write!(f, "out of memory"),
            TrapKind::StackUnderflow => write!(f, "comms or block stack underflow"),
            TrapKind::BadHandle => write!(f, "invalid array handle"),
            TrapKind::NoShadow => write!(f, "array has no shadow (not inside a gradient call)"),
            TrapKind::BadBlockId(id) => write!(f, "block id {id} outside the dispatch table"),
            TrapKind::NotVerified => write!(f, "function has not passed the verifier"),
            TrapKind::ArgMismatch(m) => write!(f, "{m}"),
        }
    }
}

/// A runtime trap: what happened and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Trap {
    pub kind: TrapKind,
    /// The function whose code trapped (for inlined code, the function it
    /// was inlined from: `loc` is a line of its text).
    pub func: String,
    /// For inlined code, the function it was inlined into (the one that
    /// was running; `block`, `pc` and `instr` are in its bytecode). A
    /// boxed `str`, so that a `Trap` stays within 128 bytes.
    pub inlined_into: Option<Box<str>>,
    pub block: String,
    pub pc: u32,
    /// The disassembled instruction.
    pub instr: String,
    pub loc: Loc,
}

impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trap: {}", self.kind)?;
        if !self.func.is_empty() {
            write!(f, " in @{}", self.func)?;
            if let Some(into) = &self.inlined_into {
                write!(f, " (inlined into @{into})")?;
            }
            write!(f, ", block {}, at `{}`", self.block, self.instr)?;
            if self.loc.line > 0 {
                write!(f, " (line {})", self.loc.line)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Trap {}

/// A trap raised outside any function (bad host arguments, allocation).
pub(super) fn host_trap(kind: TrapKind) -> Trap {
    Trap {
        kind,
        func: String::new(),
        inlined_into: None,
        block: String::new(),
        pc: 0,
        instr: String::new(),
        loc: Loc::default(),
    }
}

/// A trap at `pc` of `f`, a function of `prog` (which names the callee of
/// a `call`). Cold: only ever built when a call ends in a trap.
#[cold]
pub(super) fn trap_at(prog: &Program, f: &Function, pc: usize, kind: TrapKind) -> Trap {
    let loc = f.locs.get(pc).copied().unwrap_or_default();
    let origin = loc.inlined_from().and_then(|g| prog.get(g));
    Trap {
        kind,
        func: origin.map_or(&f.name, |g| &g.name).clone(),
        inlined_into: origin.map(|_| f.name.as_str().into()),
        block: f.block_of(pc).to_string(),
        pc: pc as u32,
        instr: if pc < f.code.len() {
            crate::disasm::instr_in_program(f, pc, prog)
        } else {
            String::new()
        },
        loc,
    }
}
