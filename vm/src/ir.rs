//! The SSA IR: what the assembler produces, what the AD stage reads and
//! writes, and what [`crate::lower`] turns into register bytecode.
//!
//! A [`Function`] is a CFG of [`Block`]s; each block has phis, ordinary
//! instructions and one terminator. Operands are [`ValueId`]s, dense indices
//! into the function's value table. Constants are values too (with
//! [`ValueData::konst`] set); they belong to no block and may be used anywhere.
//!
//! **Invariant:** user functions (from the assembler) are in SSA form: every
//! value is defined once and every use is dominated by its definition. The
//! reverse functions built by `ad` are *not* SSA: their cotangent values are
//! accumulators written many times (`acc`, `zero`, `comms.pop`) and they have
//! no phis. Lowering does not need SSA: it maps each value to its own
//! register and each phi to a parallel copy on its incoming edge, which is
//! correct for both.

use crate::op::Op;
use crate::types::Type;
use std::fmt;

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            /// The id as an index into its table.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

index_type!(
    /// An SSA value (or, in reverse code, a virtual register) of one function.
    ValueId,
    "v"
);
index_type!(
    /// A block of one function.
    BlockId,
    "bb"
);
index_type!(
    /// A function of a [`Module`] (and of the matching bytecode `Program`).
    FuncId,
    "fn"
);

/// A source location: 1-based line and column (in characters), and for
/// code that [`crate::inline`] copied into another function, the function
/// the line belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Loc {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// 0 for the function's own code; `k + 1` for code inlined from the
    /// function with id `k` (whose text `line` and `col` are in).
    pub inlined: u32,
}

impl Loc {
    /// Line `line`, column `col` of the function's own text.
    pub fn new(line: u32, col: u32) -> Loc {
        Loc {
            line,
            col,
            inlined: 0,
        }
    }

    /// The function this code was inlined from, if it was.
    pub fn inlined_from(&self) -> Option<FuncId> {
        self.inlined.checked_sub(1).map(FuncId)
    }
}

/// What a function returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetType {
    /// One value (every user function with a result).
    One(Type),
    /// No result (`fn @f(...) {`, ended by a bare `ret`). In IR and bytecode
    /// such a function returns an unused i64 zero, so that calls and
    /// returns need no special case; only its signature says it has no
    /// result (`run` prints `none`).
    Unit,
    /// Several f64 values via `ret.n` (reverse functions).
    Many(Vec<Type>),
}

impl RetType {
    /// The type of the register a `ret` or a `call` carries: the result's,
    /// or i64 for a function with no result (its unused zero); `None` for
    /// several results (`ret.n`).
    pub fn carrier(&self) -> Option<Type> {
        match self {
            RetType::One(t) => Some(*t),
            RetType::Unit => Some(Type::I64),
            RetType::Many(_) => None,
        }
    }
}

/// One entry of a function's value table.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueData {
    /// The value's type.
    pub ty: Type,
    /// The source name without `%` (for printing); `None` for generated values.
    pub name: Option<String>,
    /// For constants: the 64 bits of the value (f64 bits, i64, 0/1, never an
    /// array).
    pub konst: Option<u64>,
}

/// A phi: `dst = phi [pred: value], ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct Phi {
    /// The value the phi defines.
    pub dst: ValueId,
    /// One entry per predecessor: the block and the value coming from it.
    pub incoming: Vec<(BlockId, ValueId)>,
    /// Where the phi is written.
    pub loc: Loc,
}

/// One non-phi, non-terminator instruction.
///
/// `dst` is the `Def` operand of [`Op::operands`] (if the opcode has one);
/// `args` are its `Use` and `InOut` operands in table order. For `Call` and
/// `CallAcc`, `callee` and `args` (the call arguments) describe the call and
/// `accs` (only `CallAcc`) lists the registers the callee's returned values
/// are added to. `imm` is the `Imm` operand (`blk.push`).
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    /// The opcode.
    pub op: Op,
    /// The value defined, if the opcode defines one.
    pub dst: Option<ValueId>,
    /// The operands (for a call, the call's arguments).
    pub args: Vec<ValueId>,
    /// The immediate operand (`blk.push`), else 0.
    pub imm: u32,
    /// The function called, for `call`, `call.acc` and `call.n`.
    pub callee: Option<FuncId>,
    /// The values the callee's results are added to (`call.acc`) or written to (`call.n`).
    pub accs: Vec<ValueId>,
    /// Where the instruction is written.
    pub loc: Loc,
}

impl Inst {
    /// A plain instruction (no call, no immediate).
    pub fn new(op: Op, dst: Option<ValueId>, args: Vec<ValueId>, loc: Loc) -> Inst {
        Inst {
            op,
            dst,
            args,
            imm: 0,
            callee: None,
            accs: Vec::new(),
            loc,
        }
    }
}

/// How a block ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// Jump to the block.
    Jmp(BlockId),
    /// Go to `then_` if `cond` is true, else to `else_`.
    Br {
        /// The condition (a bool).
        cond: ValueId,
        /// The block when it is true.
        then_: BlockId,
        /// The block when it is false.
        else_: BlockId,
    },
    /// Return the value (a function with no result returns a unit value).
    Ret(ValueId),
    /// Return several values (reverse functions).
    RetN(Vec<ValueId>),
    /// Pop a block id `k` and go to `targets[k]` (reverse code only).
    BlkPop(Vec<BlockId>),
}

impl Term {
    /// The values this terminator reads.
    pub fn uses(&self) -> &[ValueId] {
        match self {
            Term::Br { cond, .. } => std::slice::from_ref(cond),
            Term::Ret(v) => std::slice::from_ref(v),
            Term::RetN(vs) => vs,
            Term::Jmp(_) | Term::BlkPop(_) => &[],
        }
    }

    /// Apply `f` to every value this terminator reads (to rename values).
    pub fn map_uses(&mut self, f: impl FnMut(&mut ValueId)) {
        match self {
            Term::Br { cond, .. } => std::iter::once(cond).for_each(f),
            Term::Ret(v) => std::iter::once(v).for_each(f),
            Term::RetN(vs) => vs.iter_mut().for_each(f),
            Term::Jmp(_) | Term::BlkPop(_) => {}
        }
    }

    /// Apply `f` to every block this terminator can go to (to renumber
    /// blocks).
    pub fn map_targets(&mut self, mut f: impl FnMut(&mut BlockId)) {
        match self {
            Term::Jmp(t) => f(t),
            Term::Br { then_, else_, .. } => {
                f(then_);
                f(else_);
            }
            Term::BlkPop(ts) => ts.iter_mut().for_each(f),
            Term::Ret(_) | Term::RetN(_) => {}
        }
    }

    /// The blocks the terminator may go to, in order.
    pub fn successors(&self) -> Vec<BlockId> {
        match self {
            Term::Jmp(b) => vec![*b],
            Term::Br { then_, else_, .. } => vec![*then_, *else_],
            Term::Ret(_) | Term::RetN(_) => Vec::new(),
            Term::BlkPop(ts) => ts.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
/// A basic block: phis, then instructions, then one terminator.
pub struct Block {
    /// The block's label.
    pub name: String,
    /// Its phis, at its start.
    pub phis: Vec<Phi>,
    /// Its instructions, in order.
    pub insts: Vec<Inst>,
    /// How it ends.
    pub term: Term,
    /// Location of the terminator.
    pub term_loc: Loc,
}

#[derive(Clone, Debug, PartialEq)]
/// A function: parameters, return type, value table and blocks.
pub struct Function {
    /// Name without `@`.
    pub name: String,
    /// Parameter values, in order (their types are in `values`).
    pub params: Vec<ValueId>,
    /// What it returns.
    pub ret: RetType,
    /// Every value (parameters, instruction results, constants), by [`ValueId`].
    pub values: Vec<ValueData>,
    /// `blocks[0]` is the entry block.
    pub blocks: Vec<Block>,
    /// Where the function is written.
    pub loc: Loc,
}

impl Function {
    /// The type of value `v`.
    pub fn ty(&self, v: ValueId) -> Type {
        self.values[v.index()].ty
    }

    /// The parameters' types, in order.
    pub fn param_types(&self) -> Vec<Type> {
        self.params.iter().map(|p| self.ty(*p)).collect()
    }

    /// Add a value to the table.
    pub fn new_value(&mut self, ty: Type, name: Option<String>) -> ValueId {
        self.values.push(ValueData {
            ty,
            name,
            konst: None,
        });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Add a constant to the table.
    pub fn new_const(&mut self, ty: Type, bits: u64) -> ValueId {
        self.values.push(ValueData {
            ty,
            name: None,
            konst: Some(bits),
        });
        ValueId(self.values.len() as u32 - 1)
    }

    /// How often each value is read: by instructions (operands and
    /// `call.acc` accumulators), phis and terminators.
    pub fn use_counts(&self) -> Vec<u32> {
        let mut uses = vec![0u32; self.values.len()];
        let mut count = |v: &ValueId| {
            if let Some(u) = uses.get_mut(v.index()) {
                *u += 1;
            }
        };
        for b in &self.blocks {
            b.phis
                .iter()
                .flat_map(|phi| &phi.incoming)
                .for_each(|(_, v)| count(v));
            b.insts
                .iter()
                .flat_map(|i| i.args.iter().chain(&i.accs))
                .for_each(&mut count);
            b.term.uses().iter().for_each(&mut count);
        }
        uses
    }

    /// Predecessors of every block, in a deterministic order (by block index,
    /// each predecessor listed once).
    pub fn predecessors(&self) -> Vec<Vec<BlockId>> {
        let mut preds = vec![Vec::new(); self.blocks.len()];
        for (i, b) in self.blocks.iter().enumerate() {
            for s in b.term.successors() {
                let list: &mut Vec<BlockId> = &mut preds[s.index()];
                // Block `i`'s edges come one after the other: a repeat is
                // the last entry (no search of a join's many predecessors).
                if list.last() != Some(&BlockId(i as u32)) {
                    list.push(BlockId(i as u32));
                }
            }
        }
        preds
    }
}

/// A whole program: functions referring to each other by [`FuncId`], and
/// the custom derivative rules among them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    /// The functions, indexed by [`FuncId`].
    pub funcs: Vec<Function>,
    /// Custom derivative rules (`rule @f jvp @f_jvp`), at most one per
    /// function `f`, in the order written.
    pub rules: Vec<Rule>,
}

/// A custom derivative rule, the text `rule @f jvp @f_jvp`: the derivative
/// of function `f` is given by function `jvp` instead of being derived from
/// `f`'s body (which still computes the value).
///
/// `jvp` takes `f`'s parameters followed by one tangent parameter per
/// differentiable (`f64` or `f64[]`) parameter of `f`, of the same type and
/// in order, and returns the tangent of `f`'s result (same type, `f64` or
/// `f64[]`; a function with no result, or of an `i64` or `bool` result,
/// has no tangent for a rule to give). It must be linear in the tangent
/// parameters. [`rule_signature_error`] says
/// whether a pair of signatures fits. Any front end (the `.adasm`
/// assembler, the `.adl` compiler, a library user building IR) records a
/// rule by pushing one of these onto [`Module::rules`]; the AD stage reads
/// nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The function whose derivative the rule gives.
    pub f: FuncId,
    /// The function computing its tangent (jvp).
    pub jvp: FuncId,
    /// Where the rule is written (line and column of `rule`; 0:0 if none).
    pub loc: Loc,
}

/// The name of a `rule f jvp f_jvp` line that an error of the rule is
/// located at ([`rule_line_error`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleSide {
    /// `f`, the function the rule is for.
    F,
    /// `f_jvp`, the rule function.
    Jvp,
}

/// The signatures of a rule's two functions, as [`rule_line_error`]
/// compares them: `f`'s parameter types and result, then `f_jvp`'s.
pub type RuleSigs<'a> = (&'a [Type], Option<Type>, &'a [Type], Option<Type>);

/// What is wrong with the line `rule f jvp f_jvp` of a source (either
/// language), and at which of its two names: `f` already has a rule (at
/// line `earlier`), `f` is its own rule, or the signatures (when both are
/// known: `sigs` gives `f`'s parameters and result, then `f_jvp`'s) do not
/// fit ([`rule_signature_error`]; a fault of `f`'s own result or
/// parameters is located at `f`, any other at `f_jvp`).
pub fn rule_line_error(
    f: &str,
    jvp: &str,
    earlier: Option<u32>,
    sigs: Option<RuleSigs<'_>>,
) -> Option<(RuleSide, String)> {
    if let Some(line) = earlier {
        let msg = format!("`@{f}` already has a rule, at line {line}; a function has at most one");
        return Some((RuleSide::F, msg));
    }
    if f == jvp {
        return Some((RuleSide::Jvp, format!("`@{f}` cannot be its own rule")));
    }
    let (fp, fr, jp, jr) = sigs?;
    let msg = rule_signature_error(f, fp, fr, jvp, jp, jr)?;
    let own_fault =
        !fr.is_some_and(|t| t.is_differentiable()) || !fp.iter().any(|t| t.is_differentiable());
    Some((
        if own_fault {
            RuleSide::F
        } else {
            RuleSide::Jvp
        },
        msg,
    ))
}

/// Why a function with parameter types `f_params` and result `f_ret`
/// (`None`: no result) cannot have a rule function of parameter types
/// `j_params` and result `j_ret`; `None` if it can (see [`Rule`]). `f` and
/// `jvp` name the two in the message (without `@`).
pub fn rule_signature_error(
    f: &str,
    f_params: &[Type],
    f_ret: Option<Type>,
    jvp: &str,
    j_params: &[Type],
    j_ret: Option<Type>,
) -> Option<String> {
    let Some(ret) = f_ret.filter(|t| t.is_differentiable()) else {
        let found = f_ret.map_or("nothing".to_string(), |t| t.to_string());
        return Some(format!(
            "a rule gives the tangent of a result of type f64 or f64[], but `@{f}` returns {found}"
        ));
    };
    let tangents: Vec<Type> = f_params
        .iter()
        .copied()
        .filter(|t| t.is_differentiable())
        .collect();
    if tangents.is_empty() {
        return Some(format!(
            "`@{f}` has no f64 or f64[] parameter: a rule for it has nothing to differentiate"
        ));
    }
    let want: Vec<Type> = f_params.iter().chain(&tangents).copied().collect();
    let list = |ts: &[Type]| {
        ts.iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if j_params.len() != want.len() {
        return Some(format!(
            "`@{jvp}` must take `@{f}`'s {} parameter(s) and then {} tangent(s), ({}), but takes {} parameter(s), ({})",
            f_params.len(),
            tangents.len(),
            list(&want),
            j_params.len(),
            list(j_params)
        ));
    }
    if let Some(i) = (0..want.len()).find(|i| want[*i] != j_params[*i]) {
        let what = if i < f_params.len() {
            format!("`@{f}`'s parameter {}", i + 1)
        } else {
            format!(
                "the tangent of `@{f}`'s differentiable parameter {}",
                i - f_params.len() + 1
            )
        };
        return Some(format!(
            "parameter {} of `@{jvp}` must be {} ({what}), found {}",
            i + 1,
            want[i],
            j_params[i]
        ));
    }
    if j_ret != Some(ret) {
        let found = j_ret.map_or("nothing".to_string(), |t| t.to_string());
        return Some(format!(
            "`@{jvp}` must return {ret} (the tangent of `@{f}`'s result), but returns {found}"
        ));
    }
    None
}

impl Module {
    /// The rule giving `f`'s derivative, if any.
    pub fn rule_of(&self, f: FuncId) -> Option<&Rule> {
        self.rules.iter().find(|r| r.f == f)
    }

    /// Look a function up by name (with or without `@`).
    pub fn find(&self, name: &str) -> Option<FuncId> {
        let name = name.strip_prefix('@').unwrap_or(name);
        self.funcs
            .iter()
            .position(|f| f.name == name)
            .map(|i| FuncId(i as u32))
    }

    /// Function `id`; panics if there is none (ids come from this module).
    pub fn func(&self, id: FuncId) -> &Function {
        &self.funcs[id.index()]
    }
}
