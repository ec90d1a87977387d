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
    /// An integer `div` by zero.
    DivByZero,
    /// An integer `rem` by zero.
    RemByZero,
    /// An array access at an index outside `0..len`.
    OutOfBounds {
        /// The index used.
        index: i64,
        /// The length of the array.
        len: usize,
    },
    /// An `anew` with a negative length (the length given).
    NegativeLength(i64),
    /// An `anew` longer than `Limits::max_array_len`.
    ArrayTooLarge {
        /// The length asked for.
        len: i64,
        /// The limit in force.
        limit: usize,
    },
    /// An argument array from the host longer than `Limits::max_array_len`.
    ArgArrayTooLarge {
        /// The length of the argument array.
        len: usize,
        /// The limit in force.
        limit: usize,
    },
    /// A new array that would take the live arrays past
    /// `Limits::max_heap_bytes`.
    HeapLimit {
        /// The bytes the live arrays would hold with the new one.
        needed: usize,
        /// The limit in force, in bytes.
        limit: usize,
    },
    /// An `ftoi` of a value (the one given) that is NaN, infinite or out
    /// of the range of `i64`.
    FtoiInvalid(f64),
    /// A call nested deeper than `Limits::max_call_depth`.
    CallDepth {
        /// The limit in force.
        limit: usize,
    },
    /// More instructions executed than `Limits::fuel` allows.
    OutOfFuel {
        /// The limit in force, in instructions.
        limit: u64,
    },
    /// The interrupt flag ([`Vm::interrupt_handle`]) was set.
    Interrupted,
    /// The AD stacks (comms and block) past `Limits::max_stack_bytes`.
    StackLimit {
        /// The limit in force, in bytes.
        limit: usize,
    },
    /// The forward code stored more than `Limits::ad_budget` bytes.
    AdBudget {
        /// The budget in force, in bytes.
        budget: usize,
        /// What storing everything needs (`exact`), or at least this when
        /// one batch of pushes alone was larger than the budget and the
        /// call stopped there.
        needed: usize,
        /// Whether `needed` is exact.
        exact: bool,
    },
    /// Registers, frames, AD stacks and arrays together past
    /// `Limits::max_memory_bytes`.
    MemoryLimit {
        /// The limit in force, in bytes.
        limit: usize,
    },
    /// The allocator refused memory within the limits.
    OutOfMemory,
    /// A pop from an empty comms or block stack (a reverse sweep run
    /// without its forward sweep).
    StackUnderflow,
    /// An array handle that names no live array.
    BadHandle,
    /// A shadow access outside AD mode (not inside a gradient call).
    NoShadow,
    /// A block id popped from the block stack (the one given) outside
    /// the function's dispatch table.
    BadBlockId(u32),
    /// A call to a function that has not passed the verifier.
    NotVerified,
    /// A host call that does not fit the function: unknown function,
    /// wrong number or types of arguments (the message says which).
    ArgMismatch(String),
    /// A custom rule (`rule @f jvp @f_jvp`) returned a tangent array whose
    /// length is not that of `@f`'s result (`len.check`): the trap's
    /// location is the `rule` line.
    RuleTangentLength {
        /// The length of the function's result.
        result: usize,
        /// The length of the tangent the rule returned.
        tangent: usize,
    },
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
            TrapKind::RuleTangentLength { result, tangent } => write!(
                f,
                "custom rule returned a tangent of {tangent} elements for a result of {result} \
                 (a rule's tangent must have the result's length)"
            ),
        }
    }
}

/// A runtime trap: what happened and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Trap {
    /// What went wrong.
    pub kind: TrapKind,
    /// The function whose code trapped (for inlined code, the function it
    /// was inlined from: `loc` is a line of its text; for derived code,
    /// the user function it was derived from, see `code`).
    pub func: String,
    /// For inlined code, the function it was inlined into (the one that
    /// was running; `block`, `pc` and `instr` are in its bytecode). A
    /// boxed `str`, so that a `Trap` stays small.
    pub inlined_into: Option<Box<str>>,
    /// For derived code, what the running function computes
    /// ([`Origin::code`](crate::bytecode::Origin): `"gradient's forward
    /// sweep"`, ...); `None` in a user function.
    pub code: Option<Box<str>>,
    /// The name of the block holding the trapping instruction (empty for
    /// a trap outside any function, such as a bad host argument).
    pub block: String,
    /// The index of the trapping instruction in the running function's
    /// bytecode.
    pub pc: u32,
    /// The disassembled instruction.
    pub instr: String,
    /// The source location of the trapping instruction.
    pub loc: Loc,
    /// The calls that led to the trapping function, if any.
    pub stack: Option<Box<CallStack>>,
}

/// The suspended callers of a trapping function, innermost first.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CallStack {
    /// At most [`CALLERS_SHOWN`] callers, the immediate caller first.
    pub callers: Vec<Caller>,
    /// How many more (outer) callers there were.
    pub more: usize,
}

/// Callers a trap records at most (the innermost ones); the others are
/// only counted ([`CallStack::more`]).
pub const CALLERS_SHOWN: usize = 5;

/// One suspended call: which function made it and from which line.
/// `func`, `inlined_into` and `code` are as in [`Trap`].
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    /// The calling function.
    pub func: String,
    /// For inlined code, the function it was inlined into.
    pub inlined_into: Option<Box<str>>,
    /// For derived code, what the calling function computes.
    pub code: Option<Box<str>>,
    /// The location of the call.
    pub loc: Loc,
}

impl Trap {
    /// The callers recorded (innermost first); empty for a trap in the
    /// entry function.
    pub fn callers(&self) -> &[Caller] {
        self.stack.as_deref().map_or(&[], |s| &s.callers)
    }

    /// Show the instruction as the user wrote it: replace `instr` (the
    /// disassembled bytecode) by the trap's source line, if it has one and
    /// `text` holds it (`text` is the program's source, or lines `first..`
    /// of it). The line is shown without its comment, trimmed, with tabs
    /// as spaces and other control characters escaped (`\u{1b}`), cut
    /// after [`SOURCE_LINE_CHARS`] characters; a blank line leaves `instr`
    /// as it is.
    pub fn show_source_line(&mut self, text: &str, first: u32) {
        let Some(k) = self.loc.line.checked_sub(first) else {
            return;
        };
        let Some(line) = text.lines().nth(k as usize) else {
            return;
        };
        let code = line.split(';').next().unwrap_or("").trim();
        if code.is_empty() {
            return;
        }
        let mut shown = String::new();
        for (n, c) in code.chars().enumerate() {
            if n == SOURCE_LINE_CHARS {
                shown.push_str("...");
                break;
            }
            if c == '\t' {
                shown.push(' ');
            } else if c.is_control() {
                shown.extend(c.escape_default());
            } else {
                shown.push(c);
            }
        }
        self.instr = shown;
    }
}

/// Characters of a source line [`Trap::show_source_line`] shows at most.
pub const SOURCE_LINE_CHARS: usize = 160;

/// `@f`, `@f (inlined into @g)`, `@f (reverse code)` or `@f (inlined into
/// @g, reverse code)`.
fn write_site(
    f: &mut fmt::Formatter<'_>,
    func: &str,
    into: Option<&str>,
    code: Option<&str>,
) -> fmt::Result {
    write!(f, "@{func}")?;
    match (into, code) {
        (Some(into), Some(code)) => write!(f, " (inlined into @{into}, {code})"),
        (Some(into), None) => write!(f, " (inlined into @{into})"),
        (None, Some(code)) => write!(f, " ({code})"),
        (None, None) => Ok(()),
    }
}

impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trap: {}", self.kind)?;
        if !self.func.is_empty() {
            f.write_str(" in ")?;
            write_site(
                f,
                &self.func,
                self.inlined_into.as_deref(),
                self.code.as_deref(),
            )?;
            write!(f, ", block {}, at `{}`", self.block, self.instr)?;
            if self.loc.line > 0 {
                write!(f, " (line {})", self.loc.line)?;
            }
        }
        if let Some(stack) = &self.stack {
            for c in &stack.callers {
                f.write_str("\n  called from ")?;
                write_site(f, &c.func, c.inlined_into.as_deref(), c.code.as_deref())?;
                if c.loc.line > 0 {
                    write!(f, ", line {}", c.loc.line)?;
                }
            }
            if stack.more > 0 {
                let s = if stack.more == 1 { "" } else { "s" };
                write!(f, "\n  ... and {} more call{s}", stack.more)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Trap {}

/// A trap raised outside any function (bad host arguments, allocation).
impl Trap {
    /// A trap of the host, outside any function (a bad argument, memory
    /// the host could not get for a result): only `kind` is set.
    pub fn host(kind: TrapKind) -> Trap {
        host_trap(kind)
    }
}

pub(super) fn host_trap(kind: TrapKind) -> Trap {
    Trap {
        kind,
        func: String::new(),
        inlined_into: None,
        code: None,
        block: String::new(),
        pc: 0,
        instr: String::new(),
        loc: Loc::default(),
        stack: None,
    }
}

/// The names of the code at `pc` of function `id`: the function whose
/// text it is (the user function it was inlined from or derived from),
/// the function it was inlined into, what derived code computes, and its
/// location.
struct Site {
    func: String,
    inlined_into: Option<Box<str>>,
    code: Option<Box<str>>,
    loc: Loc,
}

fn site(prog: &Program, id: FuncId, pc: usize) -> Site {
    let Some(f) = prog.get(id) else {
        return Site {
            func: format!("{id}"),
            inlined_into: None,
            code: None,
            loc: Loc::default(),
        };
    };
    let origin = prog.origin(id);
    let running = origin
        .and_then(|o| prog.get(o.of))
        .map_or(f.name.as_str(), |g| g.name.as_str());
    let code = origin.map(|o| o.code.as_str().into());
    let loc = f.locs.get(pc).copied().unwrap_or_default();
    match loc.inlined_from().and_then(|g| prog.get(g)) {
        Some(g) => Site {
            func: g.name.clone(),
            inlined_into: Some(running.into()),
            code,
            loc,
        },
        None => Site {
            func: running.to_string(),
            inlined_into: None,
            code,
            loc,
        },
    }
}

/// A trap at `pc` of `f`, a function of `prog` (which names the callee of
/// a `call`). Cold: only ever built when a call ends in a trap.
#[cold]
pub(super) fn trap_at(prog: &Program, f: &Function, pc: usize, kind: TrapKind) -> Trap {
    let id = prog
        .funcs()
        .iter()
        .position(|g| std::ptr::eq(g, f))
        .map_or(FuncId(u32::MAX), |i| FuncId(i as u32));
    trap_in(prog, id, pc, kind)
}

/// A trap at `pc` of function `id` of `prog`.
#[cold]
pub(super) fn trap_in(prog: &Program, id: FuncId, pc: usize, kind: TrapKind) -> Trap {
    let Some(f) = prog.get(id) else {
        return host_trap(kind);
    };
    let s = site(prog, id, pc);
    Trap {
        kind,
        func: s.func,
        inlined_into: s.inlined_into,
        code: s.code,
        block: f.block_of(pc).to_string(),
        pc: pc as u32,
        instr: if pc < f.code.len() {
            crate::disasm::instr_in_program(f, pc, prog)
        } else {
            String::new()
        },
        loc: s.loc,
        stack: None,
    }
}

/// The calls suspended in `frames` (outermost first, as the VM keeps
/// them), innermost first, at most [`CALLERS_SHOWN`] of them.
#[cold]
pub(super) fn call_stack(prog: &Program, frames: &[Frame]) -> Option<Box<CallStack>> {
    let sites = frames
        .iter()
        .rev()
        .map(|fr| (fr.func, fr.call / W as usize));
    stack_of_sites(prog, frames.len(), sites)
}

/// The call stack of `count` callers whose call sites (function, `pc` of
/// the call) `sites` gives, innermost first: the interpreter's suspended
/// frames, or the calls a native tier unwound through.
pub(super) fn stack_of_sites(
    prog: &Program,
    count: usize,
    sites: impl Iterator<Item = (FuncId, usize)>,
) -> Option<Box<CallStack>> {
    if count == 0 {
        return None;
    }
    let callers = sites
        .take(CALLERS_SHOWN)
        .map(|(func, pc)| {
            let s = site(prog, func, pc);
            Caller {
                func: s.func,
                inlined_into: s.inlined_into,
                code: s.code,
                loc: s.loc,
            }
        })
        .collect();
    Some(Box::new(CallStack {
        callers,
        more: count.saturating_sub(CALLERS_SHOWN),
    }))
}
