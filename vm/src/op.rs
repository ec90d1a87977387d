//! The one opcode table.
//!
//! Every opcode of advm is declared once, in the `ops!` invocation below, with
//! its disassembly mnemonic and the list of its operands. From that table come
//! the [`Op`] enum, [`Op::mnemonic`], [`Op::operands`] and [`Op::ALL`]; the
//! assembler's type inference, the lowering, the verifier and the disassembler
//! all read the same list, so adding an opcode is adding one line here plus
//! one arm in the interpreter (and, if it is differentiable, one rule in `ad`).
//!
//! The same `Op` values are used in the SSA IR ([`crate::ir`]) and in the
//! register bytecode ([`crate::bytecode`]).
//!
//! ## Operand kinds
//! Operands are listed in the order they are written in the text and stored in
//! the instruction. Register operands fill the instruction's `r0`, `r1`, `r2`
//! fields and then `x`; a non-register operand (jump target, call site, table,
//! list or immediate) always lives in `x`. See [`crate::bytecode::Instr`].

use crate::types::Type;

/// What one operand of an opcode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// A register written by the instruction, of the given type.
    Def(Ty),
    /// A register read by the instruction, of the given type.
    Use(Ty),
    /// A register read and then written (accumulators), of the given type.
    InOut(Ty),
    /// A jump target (an instruction index) in `x`.
    Target,
    /// An index into the function's call-site table in `x`.
    Site,
    /// An index into the function's jump-table table in `x` (`blk.pop`).
    Table,
    /// An index into the function's register-list table in `x` (`ret.n`).
    List,
    /// A plain 32-bit immediate in `x` (`blk.push` block ids).
    Imm,
}

/// The type of a register operand: fixed, or the same as every other `T`
/// operand of the instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// f64.
    F,
    /// i64.
    I,
    /// bool.
    B,
    /// f64[] (an array handle).
    A,
    /// Any type, equal across all `T` operands of one instruction.
    T,
}

impl Ty {
    /// The concrete type, if fixed.
    pub fn fixed(self) -> Option<Type> {
        match self {
            Ty::F => Some(Type::F64),
            Ty::I => Some(Type::I64),
            Ty::B => Some(Type::Bool),
            Ty::A => Some(Type::Arr),
            Ty::T => None,
        }
    }
}

/// Where an opcode may appear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Written in `.adasm` text (its [`Facts::text`] spelling) and present in
    /// user IR.
    User,
    /// Made by the lowering from the IR's terminators (`jmp`, `br`, `ret`).
    Control,
    /// Written only by the AD stage (reverse-mode support: stacks,
    /// accumulations, shadow arrays, multiple results).
    Ad,
    /// Made only by the lowering (fused and batched forms): never in IR.
    Lowering,
}

/// Whether reverse code may compute an instruction again instead of
/// receiving its result from the forward code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remat {
    /// Never: too costly, or it may trap or allocate.
    Never,
    /// Always: about the cost of the `comms.pop` it saves.
    Cheap,
    /// Cheap, but it reads an array: only where no array can have changed
    /// between the forward and the reverse code.
    CheapUnlessArraysChange,
}

/// How an instruction's result becomes active (carries a derivative).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// When any operand is active.
    Operands,
    /// When an operand other than the first (a `select`'s condition) is.
    NotCondition,
    /// Never: its derivative is zero or it has none (`nograd`, `itof`,
    /// `anew`, rounding).
    Never,
}

/// Every fact about an opcode that passes and tools ask of it, kept on its
/// line of the table below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The spelling in `.adasm` text, shared by the f64 and i64 forms of an
    /// overloaded mnemonic (`add` for `add.f` and `add.i`); `None` for
    /// opcodes the text does not name (the disassembler's mnemonic is used).
    pub text: Option<&'static str>,
    /// Where it may appear.
    pub origin: Origin,
    /// It does nothing but write its registers: it cannot trap, allocate,
    /// touch memory or a stack, so it may be removed when its results are
    /// dead and moved past independent instructions.
    pub pure: bool,
    /// Whether reverse code may run it again.
    pub remat: Remat,
    /// How its result's activity follows its operands.
    pub active: Activity,
    /// Net values pushed (positive) or popped (negative) on the comms stack.
    pub comms: i8,
    /// Net ids pushed or popped on the block stack.
    pub blk: i8,
    /// It runs other code (a call), which may do anything to the stacks.
    pub runs_code: bool,
}

const fn facts(text: Option<&'static str>, origin: Origin) -> Facts {
    Facts {
        text,
        origin,
        pure: false,
        remat: Remat::Never,
        active: Activity::Operands,
        comms: 0,
        blk: 0,
        runs_code: false,
    }
}

/// An opcode written in text as `text`.
const fn user(text: &'static str) -> Facts {
    facts(Some(text), Origin::User)
}

/// An opcode made from the IR's terminators.
const fn control() -> Facts {
    facts(None, Origin::Control)
}

/// An opcode only the AD stage writes.
const fn ad() -> Facts {
    facts(None, Origin::Ad)
}

/// An opcode only the lowering makes.
const fn lowering() -> Facts {
    facts(None, Origin::Lowering)
}

impl Facts {
    const fn pure(mut self) -> Facts {
        self.pure = true;
        self
    }
    const fn cheap(mut self) -> Facts {
        self.remat = Remat::Cheap;
        self
    }
    const fn cheap_unless_arrays_change(mut self) -> Facts {
        self.remat = Remat::CheapUnlessArraysChange;
        self
    }
    const fn not_condition(mut self) -> Facts {
        self.active = Activity::NotCondition;
        self
    }
    const fn no_derivative(mut self) -> Facts {
        self.active = Activity::Never;
        self
    }
    const fn comms(mut self, n: i8) -> Facts {
        self.comms = n;
        self
    }
    const fn blk(mut self, n: i8) -> Facts {
        self.blk = n;
        self
    }
    const fn runs_code(mut self) -> Facts {
        self.runs_code = true;
        self
    }

    /// It moves values on the comms stack, or runs code that may.
    pub const fn touches_comms(&self) -> bool {
        self.comms != 0 || self.runs_code
    }
}

macro_rules! ops {
    ($( $(#[$doc:meta])* $name:ident = $mn:literal [$($operand:expr),*] $facts:expr ; )*) => {
        /// Every opcode of the SSA IR and of the bytecode. One byte.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Op {
            $( $(#[$doc])* $name, )*
        }

        impl Op {
            /// All opcodes, in table order.
            pub const ALL: &'static [Op] = &[ $( Op::$name, )* ];

            /// The mnemonic printed by the disassembler.
            pub fn mnemonic(self) -> &'static str {
                match self { $( Op::$name => $mn, )* }
            }

            /// The operands, in text and storage order.
            pub fn operands(self) -> &'static [Operand] {
                match self { $( Op::$name => &[$($operand),*], )* }
            }

            /// Everything else the table says of the opcode.
            pub const fn facts(self) -> &'static Facts {
                match self { $( Op::$name => { const F: Facts = $facts; &F } )* }
            }

            /// Decode a byte; `None` for bytes that name no opcode.
            pub fn from_u8(b: u8) -> Option<Op> {
                Op::ALL.get(b as usize).copied()
            }
        }
    };
}

use Operand::{Def, Imm, InOut, List, Site, Table, Target, Use};
use Ty::{A, B, F, I, T};

ops! {
    // ---- f64 arithmetic ------------------------------------------------------
    /// `r0 = r1 + r2` (f64)
    AddF = "add.f" [Def(F), Use(F), Use(F)] user("add").pure().cheap();
    /// `r0 = r1 - r2` (f64)
    SubF = "sub.f" [Def(F), Use(F), Use(F)] user("sub").pure().cheap();
    /// `r0 = r1 * r2` (f64)
    MulF = "mul.f" [Def(F), Use(F), Use(F)] user("mul").pure().cheap();
    /// `r0 = r1 / r2` (f64)
    DivF = "div.f" [Def(F), Use(F), Use(F)] user("div").pure();
    /// `r0 = r1 ^ r2` (f64, `powf`)
    PowF = "pow.f" [Def(F), Use(F), Use(F)] user("pow").pure();
    /// `r0 = if r2 < r1 { r2 } else { r1 }`: ties (and a nan `r2`) go to `r1`.
    MinF = "min.f" [Def(F), Use(F), Use(F)] user("min").pure().cheap();
    /// `r0 = if r2 > r1 { r2 } else { r1 }`: ties (and a nan `r2`) go to `r1`.
    MaxF = "max.f" [Def(F), Use(F), Use(F)] user("max").pure().cheap();
    /// `r0 = -r1`
    NegF = "neg.f" [Def(F), Use(F)] user("neg").pure().cheap();
    /// `r0 = sin(r1)`
    Sin = "sin" [Def(F), Use(F)] user("sin").pure();
    /// `r0 = cos(r1)`
    Cos = "cos" [Def(F), Use(F)] user("cos").pure();
    /// `r0 = tan(r1)`
    Tan = "tan" [Def(F), Use(F)] user("tan").pure();
    /// `r0 = e^r1`
    Exp = "exp" [Def(F), Use(F)] user("exp").pure();
    /// `r0 = ln(r1)` (natural logarithm)
    Log = "log" [Def(F), Use(F)] user("log").pure();
    /// `r0 = sqrt(r1)`
    Sqrt = "sqrt" [Def(F), Use(F)] user("sqrt").pure();
    /// `r0 = tanh(r1)`
    Tanh = "tanh" [Def(F), Use(F)] user("tanh").pure();
    /// `r0 = |r1|` (f64)
    AbsF = "abs.f" [Def(F), Use(F)] user("abs").pure().cheap();

    // ---- more math (adasm.md §7; values as Rust's f64 methods and libm) ------
    /// Error function (libm's `erf`).
    Erf = "erf" [Def(F), Use(F)] user("erf").pure();
    /// Complementary error function `1 - erf` (libm's `erfc`).
    Erfc = "erfc" [Def(F), Use(F)] user("erfc").pure();
    /// `r0 = atan(r1)`
    Atan = "atan" [Def(F), Use(F)] user("atan").pure();
    /// `r0 = asin(r1)`
    Asin = "asin" [Def(F), Use(F)] user("asin").pure();
    /// `r0 = acos(r1)`
    Acos = "acos" [Def(F), Use(F)] user("acos").pure();
    /// `r0 = atan2(r1, r2)`: the angle of the point `(x, y) = (r2, r1)`.
    Atan2 = "atan2" [Def(F), Use(F), Use(F)] user("atan2").pure();
    /// `r0 = sinh(r1)`
    Sinh = "sinh" [Def(F), Use(F)] user("sinh").pure();
    /// `r0 = cosh(r1)`
    Cosh = "cosh" [Def(F), Use(F)] user("cosh").pure();
    /// `ln(1 + r1)`, accurate near 0.
    Log1p = "log1p" [Def(F), Use(F)] user("log1p").pure();
    /// `e^r1 - 1`, accurate near 0.
    Expm1 = "expm1" [Def(F), Use(F)] user("expm1").pure();
    /// `r0 = log2(r1)`
    Log2 = "log2" [Def(F), Use(F)] user("log2").pure();
    /// `r0 = log10(r1)`
    Log10 = "log10" [Def(F), Use(F)] user("log10").pure();
    /// `r0 = cbrt(r1)` (cube root)
    Cbrt = "cbrt" [Def(F), Use(F)] user("cbrt").pure();
    /// `sqrt(r1² + r2²)` without overflow or underflow on the way.
    Hypot = "hypot" [Def(F), Use(F), Use(F)] user("hypot").pure();
    /// Rounding to an integral f64: derivative zero, so never active.
    Floor = "floor" [Def(F), Use(F)] user("floor").pure().cheap().no_derivative();
    /// Rounding up to an integral f64 (derivative zero).
    Ceil = "ceil" [Def(F), Use(F)] user("ceil").pure().cheap().no_derivative();
    /// Half-way cases away from zero (Rust's `f64::round`).
    Round = "round" [Def(F), Use(F)] user("round").pure().cheap().no_derivative();
    /// Rounding toward zero to an integral f64 (derivative zero).
    Trunc = "trunc" [Def(F), Use(F)] user("trunc").pure().cheap().no_derivative();

    // ---- i64 arithmetic (wrapping; division and remainder by zero trap) -----
    /// `r0 = r1 + r2` (i64, wrapping)
    AddI = "add.i" [Def(I), Use(I), Use(I)] user("add").pure().cheap();
    /// `r0 = r1 - r2` (i64, wrapping)
    SubI = "sub.i" [Def(I), Use(I), Use(I)] user("sub").pure().cheap();
    /// `r0 = r1 * r2` (i64, wrapping)
    MulI = "mul.i" [Def(I), Use(I), Use(I)] user("mul").pure().cheap();
    /// `r0 = r1 / r2` (i64, truncating; division by zero traps)
    DivI = "div.i" [Def(I), Use(I), Use(I)] user("div");
    /// `r0 = r1 % r2` (i64, sign of `r1`; by zero traps)
    RemI = "rem.i" [Def(I), Use(I), Use(I)] user("rem");
    /// Ties go to `r1`.
    MinI = "min.i" [Def(I), Use(I), Use(I)] user("min").pure().cheap();
    /// Ties go to `r1`.
    MaxI = "max.i" [Def(I), Use(I), Use(I)] user("max").pure().cheap();
    /// `r0 = -r1` (i64, wrapping)
    NegI = "neg.i" [Def(I), Use(I)] user("neg").pure().cheap();

    // ---- comparisons -> bool -------------------------------------------------
    /// `r0 = r1 < r2` (f64, IEEE: false if either is nan)
    LtF = "lt.f" [Def(B), Use(F), Use(F)] user("lt").pure().cheap();
    /// `r0 = r1 <= r2` (f64, IEEE: false if either is nan)
    LeF = "le.f" [Def(B), Use(F), Use(F)] user("le").pure().cheap();
    /// `r0 = r1 > r2` (f64, IEEE: false if either is nan)
    GtF = "gt.f" [Def(B), Use(F), Use(F)] user("gt").pure().cheap();
    /// `r0 = r1 >= r2` (f64, IEEE: false if either is nan)
    GeF = "ge.f" [Def(B), Use(F), Use(F)] user("ge").pure().cheap();
    /// `r0 = r1 == r2` (f64, IEEE: false if either is nan)
    EqF = "eq.f" [Def(B), Use(F), Use(F)] user("eq").pure().cheap();
    /// `r0 = r1 != r2` (f64, IEEE: true if either is nan)
    NeF = "ne.f" [Def(B), Use(F), Use(F)] user("ne").pure().cheap();
    /// `r0 = r1 < r2` (i64)
    LtI = "lt.i" [Def(B), Use(I), Use(I)] user("lt").pure().cheap();
    /// `r0 = r1 <= r2` (i64)
    LeI = "le.i" [Def(B), Use(I), Use(I)] user("le").pure().cheap();
    /// `r0 = r1 > r2` (i64)
    GtI = "gt.i" [Def(B), Use(I), Use(I)] user("gt").pure().cheap();
    /// `r0 = r1 >= r2` (i64)
    GeI = "ge.i" [Def(B), Use(I), Use(I)] user("ge").pure().cheap();
    /// `r0 = r1 == r2` (i64)
    EqI = "eq.i" [Def(B), Use(I), Use(I)] user("eq").pure().cheap();
    /// `r0 = r1 != r2` (i64)
    NeI = "ne.i" [Def(B), Use(I), Use(I)] user("ne").pure().cheap();

    // ---- bool ----------------------------------------------------------------
    /// `r0 = r1 && r2`
    And = "and" [Def(B), Use(B), Use(B)] user("and").pure().cheap();
    /// `r0 = r1 || r2`
    Or = "or" [Def(B), Use(B), Use(B)] user("or").pure().cheap();
    /// `r0 = !r1`
    Not = "not" [Def(B), Use(B)] user("not").pure().cheap();

    // ---- moves, selection, conversion -----------------------------------------
    /// `r0 = if r1 { r2 } else { x }` (any type; `x` holds the third register).
    Select = "select" [Def(T), Use(B), Use(T), Use(T)] user("select").pure().cheap().not_condition();
    /// `r0 = r1` (any type). The text `copy`.
    Mov = "copy" [Def(T), Use(T)] user("copy").pure().cheap();
    /// `r0 = r1` (f64) with zero derivative.
    NoGrad = "nograd" [Def(F), Use(F)] user("nograd").pure().cheap().no_derivative();
    /// i64 -> f64
    ItoF = "itof" [Def(F), Use(I)] user("itof").pure().cheap().no_derivative();
    /// f64 -> i64, truncating toward zero; traps on nan and out of range.
    FtoI = "ftoi" [Def(I), Use(F)] user("ftoi");

    // ---- arrays ----------------------------------------------------------------
    /// New array of `r1` zeros; `r1 < 0` traps. In AD mode the array also gets
    /// a zeroed shadow (cotangent) array of the same length.
    ANew = "anew" [Def(A), Use(I)] user("anew").no_derivative();
    /// `r0` = the length of array `r1`
    ALen = "alen" [Def(I), Use(A)] user("alen").cheap();
    /// `r0 = r1[r2]`; out of bounds traps.
    AGet = "aget" [Def(F), Use(A), Use(I)] user("aget").cheap_unless_arrays_change();
    /// `r0[r1] = r2`; out of bounds traps.
    ASet = "aset" [Use(A), Use(I), Use(F)] user("aset");

    // ---- control ----------------------------------------------------------------
    /// Call the call site `x` of the function's site table; `r0` receives the
    /// single return value (unused for functions returning several values).
    Call = "call" [Def(T), Site] user("call").runs_code();
    /// Call site `x` of a callee that returns several f64 values (`ret.n`):
    /// each returned value is *added* to the matching register of the site's
    /// `rets` list. Used by reverse code to call a callee's pullback.
    CallAcc = "call.acc" [Site] ad().runs_code();
    /// Call site `x` of a callee that returns several values of any types
    /// (`ret.n`): each returned value is *written* to the matching register
    /// of the site's `rets` list. Used by tangent (forward-mode) code to
    /// get a callee's value and tangent in one call.
    CallN = "call.n" [Site] ad().runs_code();
    /// Return `r0`.
    Ret = "ret" [Use(T)] control();
    /// Return every register of list `x` (reverse functions: one f64 per
    /// f64 parameter of the primal).
    RetN = "ret.n" [List] ad();
    /// Jump to `x`.
    Jmp = "jmp" [Target] control();
    /// Jump to `x` if `r0` is true, else fall through.
    JmpIf = "jmp.if" [Use(B), Target] control();
    /// Jump to `x` if `r0` is false, else fall through.
    JmpIfNot = "jmp.ifnot" [Use(B), Target] control();

    // ---- reverse-mode support ---------------------------------------------------
    /// Push block id `x` on the block stack.
    BlkPush = "blk.push" [Imm] ad().blk(1);
    /// Pop a block id `k` from the block stack and jump to entry `k` of jump
    /// table `x` (phi-edge dispatch). An id out of the table's range traps.
    BlkPop = "blk.pop" [Table] ad().blk(-1);
    /// Push the 64 bits of `r0` (any type) on the comms stack.
    CommsPush = "comms.push" [Use(T)] ad().comms(1);
    /// Pop 64 bits from the comms stack into `r0` (any type).
    CommsPop = "comms.pop" [Def(T)] ad().comms(-1);
    /// `r0 += r1` (f64 adjoint accumulation)
    Acc = "acc" [InOut(F), Use(F)] ad().pure();
    /// `r0 -= r1`
    AccNeg = "acc.neg" [InOut(F), Use(F)] ad().pure();
    /// `r0 += r1 ⊙ r2`, where `⊙` is the strong-zero product of derived
    /// code ([`crate::math::mul_z`]: zero when either factor is zero, even
    /// against an infinite or nan other factor).
    AccMul = "acc.mul" [InOut(F), Use(F), Use(F)] ad().pure();
    /// `r0 += r1 ⊙ pop()`: `comms.pop` fused into the `acc.mul` that is
    /// the popped value's only reader (made by the AD stage's clean-up).
    AccMulPop = "acc.mul.pop" [InOut(F), Use(F)] ad().comms(-1);
    /// `r0 = r1 ⊙ pop()`: `comms.pop` fused into a `mul.z`, likewise.
    MulPop = "mul.pop" [Def(F), Use(F)] ad().comms(-1);
    /// `r0 = r1 ⊙ r2`: the strong-zero product of a cotangent and a local
    /// derivative ([`crate::math::mul_z`]).
    MulZ = "mul.z" [Def(F), Use(F), Use(F)] ad().pure();
    /// `r0 = r1 / r2`, but zero when `r1` (a cotangent) is zero, even where
    /// `r2` is zero or nan ([`crate::math::div_z`]).
    DivZ = "div.z" [Def(F), Use(F), Use(F)] ad().pure();
    /// `r0 = r1 + r2 ⊙ x` (`x` holds the second factor's register): a
    /// strong-zero product added to a sum, in tangent code (the tangent of
    /// a product `ȧ⊙b + a⊙ḃ` is a `mul.z` and one of these; a tangent sum's
    /// terms are folded in). The product is rounded before it is added, as
    /// by `mul.z` and `add.f`.
    AddMulZ = "add.mul.z" [Def(F), Use(F), Use(F), Use(F)] ad().pure();
    /// `r0 = 0.0`
    Zero = "zero" [Def(F)] ad().pure();
    /// `shadow(r0)[r1] += r2`: adjoint of `aget`.
    ShadowAcc = "shadow.acc" [Use(A), Use(I), Use(F)] ad();
    /// `shadow(r0)[r1] += r2 ⊙ x` (`x` holds the second factor's register):
    /// a `mul.z` fused into the `shadow.acc` that is its product's only
    /// reader (made by the AD stage's clean-up). The product is rounded
    /// before it is added, as by the two instructions.
    ShadowAccMul = "shadow.acc.mul" [Use(A), Use(I), Use(F), Use(F)] ad();
    /// `r0 = shadow(r1)[r2]; shadow(r1)[r2] = 0`: adjoint of `aset`.
    ShadowTake = "shadow.take" [Def(F), Use(A), Use(I)] ad();

    /// `r0 = r1; r1 = 0.0`: moves a phi's cotangent to its incoming value
    /// on a reverse edge.
    Take = "take" [Def(F), InOut(F)] ad().pure();
    /// Trap ([`TrapKind::RuleTangentLength`](crate::TrapKind)) unless
    /// arrays `r0` and `r1` have the same length: a custom rule's tangent
    /// array `r1` against its function's result `r0` (`ad/src/custom.rs`).
    LenCheck = "len.check" [Use(A), Use(A)] ad();

    // ---- fused compare-and-branch (made by the lowering) ---------------------
    // One opcode per condition, so that the interpreter dispatches once.
    // Integer conditions are closed under negation (`not lt` is `ge`), so a
    // negated integer branch is the opposite condition; f64 ones are not
    // (every comparison with nan is false except `ne`), so f64 has both.
    /// Jump to `x` if `r0 < r1` (i64), else fall through.
    JmpLtI = "jmp.if.lt.i" [Use(I), Use(I), Target] lowering();
    /// Jump to `x` if `r0 <= r1` (i64), else fall through.
    JmpLeI = "jmp.if.le.i" [Use(I), Use(I), Target] lowering();
    /// Jump to `x` if `r0 > r1` (i64), else fall through.
    JmpGtI = "jmp.if.gt.i" [Use(I), Use(I), Target] lowering();
    /// Jump to `x` if `r0 >= r1` (i64), else fall through.
    JmpGeI = "jmp.if.ge.i" [Use(I), Use(I), Target] lowering();
    /// Jump to `x` if `r0 == r1` (i64), else fall through.
    JmpEqI = "jmp.if.eq.i" [Use(I), Use(I), Target] lowering();
    /// Jump to `x` if `r0 != r1` (i64), else fall through.
    JmpNeI = "jmp.if.ne.i" [Use(I), Use(I), Target] lowering();
    /// Jump to `x` if `r0 < r1` (f64, IEEE), else fall through.
    JmpLtF = "jmp.if.lt.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` if `r0 <= r1` (f64, IEEE), else fall through.
    JmpLeF = "jmp.if.le.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` if `r0 > r1` (f64, IEEE), else fall through.
    JmpGtF = "jmp.if.gt.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` if `r0 >= r1` (f64, IEEE), else fall through.
    JmpGeF = "jmp.if.ge.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` if `r0 == r1` (f64, IEEE), else fall through.
    JmpEqF = "jmp.if.eq.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` if `r0 != r1` (f64, IEEE), else fall through.
    JmpNeF = "jmp.if.ne.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` unless `r0 < r1` (f64, IEEE: so also if either is nan).
    JmpNotLtF = "jmp.ifnot.lt.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` unless `r0 <= r1` (f64, IEEE: so also if either is nan).
    JmpNotLeF = "jmp.ifnot.le.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` unless `r0 > r1` (f64, IEEE: so also if either is nan).
    JmpNotGtF = "jmp.ifnot.gt.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` unless `r0 >= r1` (f64, IEEE: so also if either is nan).
    JmpNotGeF = "jmp.ifnot.ge.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` unless `r0 == r1` (f64, IEEE: so also if either is nan).
    JmpNotEqF = "jmp.ifnot.eq.f" [Use(F), Use(F), Target] lowering();
    /// Jump to `x` unless `r0 != r1` (f64, IEEE: so also if either is nan).
    JmpNotNeF = "jmp.ifnot.ne.f" [Use(F), Use(F), Target] lowering();
    /// Step and branch (the end of a counted loop): `r0 = r0 + r1` (i64,
    /// wrapping), then jump to `x` if the new `r0 < r2`. `r2` is read after
    /// `r0` is written. (A counter counted down by a constant `k` steps by
    /// the constant `-k`, which the lowering provides.)
    JmpStepLtI = "jmp.step.if.lt.i" [InOut(I), Use(I), Use(I), Target] lowering();
    /// Step and branch: `r0 = r0 + r1`, then jump to `x` if the new `r0 <= r2`.
    JmpStepLeI = "jmp.step.if.le.i" [InOut(I), Use(I), Use(I), Target] lowering();
    /// Step and branch: `r0 = r0 + r1`, then jump to `x` if the new `r0 > r2`.
    JmpStepGtI = "jmp.step.if.gt.i" [InOut(I), Use(I), Use(I), Target] lowering();
    /// Step and branch: `r0 = r0 + r1`, then jump to `x` if the new `r0 >= r2`.
    JmpStepGeI = "jmp.step.if.ge.i" [InOut(I), Use(I), Use(I), Target] lowering();
    /// Step and branch: `r0 = r0 + r1`, then jump to `x` if the new `r0 == r2`.
    JmpStepEqI = "jmp.step.if.eq.i" [InOut(I), Use(I), Use(I), Target] lowering();
    /// Step and branch: `r0 = r0 + r1`, then jump to `x` if the new `r0 != r2`.
    JmpStepNeI = "jmp.step.if.ne.i" [InOut(I), Use(I), Use(I), Target] lowering();

    // ---- batched comms reservation (made by the lowering) ---------------------
    // Not IR instructions (the lowering rejects them in its input) and not
    // in the assembler's text: the lowering turns the `comms.push`es of a
    // stretch of a block with no call and no `blk.push` into one
    // `comms.reserve` (the first push) and unchecked pushes, and the
    // verifier proves every unchecked push covered by a reservation
    // (`verify.rs`, check 9).
    /// Make room for `x` (at least 1) more values on the comms stack
    /// (growing it on a cold path; traps like a `comms.push` that would
    /// pass `max_stack_bytes`), then push the 64 bits of `r0`: the first
    /// of the `x` pushes, so that a batch costs no dispatch of its own.
    CommsReserve = "comms.reserve" [Use(T), Imm] lowering().comms(1);
    /// Push the 64 bits of `r0` (any type) on the comms stack without a
    /// capacity check: room was made by a `comms.reserve`.
    CommsPushR = "comms.push.r" [Use(T)] lowering().comms(1);

    // ---- fused math (made by the lowering) ------------------------------------
    // Not an IR instruction either: the lowering fuses a `sin` and a `cos`
    // of the same register, written one right after the other, into one
    // instruction, which the interpreter computes with one call to the C
    // library's `sincos` (LLVM merges `sin` and `cos` of one value), for
    // about the cost of one of them. The AD stage writes such pairs: the
    // pullback of `sin a` needs `cos a` and that of `cos a` needs `sin a`,
    // which the forward code computes beside it (see `ad/src/transform/translate.rs`).
    /// `r0 = sin(r2); r1 = cos(r2)`: `r2` is read before either is written.
    SinCos = "sincos" [Def(F), Def(F), Use(F)] lowering().pure();

    // ---- fused products of derived code (made by the lowering) ---------------
    // A product of two active values in a loop (powloop's `r = r * x`, a
    // running product, Horner's rule) pushes one factor in the forward code
    // and, in the reverse, multiplies the cotangent by the popped factor and
    // by the other: two instructions each, one dispatch each here.
    /// `push(r1); r0 = r1 * r2`: a `comms.push` of a factor fused into the
    /// `mul.f` right after it (checked like `comms.push`).
    MulPush = "mul.push" [Def(F), Use(F), Use(F)] lowering().comms(1);
    /// `r0 += r1 ⊙ pop(); r2 = r1 ⊙ x`: an `acc.mul.pop` fused into the
    /// `mul.z` right after it that reads the same cotangent `r1`. The
    /// lowering fuses only when `r0` is none of `r1`, `r2`, `x`, where
    /// reading all operands before writing either result means the same
    /// as the two instructions in sequence (the verifier does not require
    /// it: bytecode that breaks it gets reads-then-writes, still
    /// memory-safe).
    AccMulPopMul = "acc.mul.pop.mul" [InOut(F), Use(F), Def(F), Use(F)] lowering().comms(-1);

    // ---- fused tangent product (made by the lowering) --------------------------
    // The tangent of a running product `r = r * x` (powloop's loop, Horner's
    // rule), `ṙ = ṙ⊙x + ẋ⊙r`, is a `mul.z` of the tangent and an `add.mul.z`
    // back into the tangent's register: one dispatch here.
    /// `r0 = r0 ⊙ r1 + r2 ⊙ x` (`x` holds the fourth register): a `mul.z`
    /// whose only reader is the `add.mul.z` right after it, which writes
    /// the `mul.z`'s first factor. Both products are strong-zero ones, each
    /// rounded, then summed, as by the two; every operand is read before
    /// `r0` is written.
    TMulZ = "tmul.z" [InOut(F), Use(F), Use(F), Use(F)] lowering();
    // A product of three (a square's tangent `(ẋ⊙x)⊙2`, a tangent scaled
    // by a constant after its local derivative): a `mul.z` whose only
    // reader is the `mul.z` right after it, one dispatch here; summed in
    // place, one more instruction saved.
    /// `r0 = (r1 ⊙ r2) ⊙ x` (`x` holds the fourth register): a `mul.z`
    /// read only by the `mul.z` after it, as its first factor. Each
    /// strong-zero product rounded, as by the two; every operand is read
    /// before `r0` is written.
    MulMulZ = "mul.mul.z" [Def(F), Use(F), Use(F), Use(F)] lowering();
    // The tangent of a product of two active values, `ȧ⊙b + ḃ⊙a`: a
    // `mul.z` whose only reader is the `add.mul.z` right after it, as its
    // sum, one dispatch here (`tmul.z` when the sum goes back into the
    // first factor's register).
    /// `r0 = r1 ⊙ r2 + x0 ⊙ x1` (`x` holds the fourth register in its low
    /// 16 bits and the fifth in its high 16): each strong-zero product
    /// rounded, then the sum, as by the two; every operand is read before
    /// `r0` is written.
    TProdZ = "tprod.z" [Def(F), Use(F), Use(F), Use(F), Use(F)] lowering();
    /// `r0 += (r1 ⊙ r2) ⊙ x`: a `mul.mul.z` whose only reader is a tangent
    /// sum in place (as `acc.mul` is a `mul.z`'s), each product rounded,
    /// then the sum, as by the three.
    AccMulMul = "acc.mul.mul" [InOut(F), Use(F), Use(F), Use(F)] lowering();
    // The tangent of `m = max(m, e)` (`min`) is the tangent of the operand
    // chosen, `ṁ = e > m ? ė : ṁ`: a comparison read only by a `select`
    // into `ṁ` in place, then the `max.f` in place, one dispatch here.
    /// `if r2 > r1 { r1 = r2; r0 = x }` (`x` holds the fourth register): a
    /// `max.f r1, r1, r2` and its tangent `r0` chosen likewise (ties and
    /// nan keep `r1`, as `max.f` does). Every operand is read first.
    TMaxF = "tmax.f" [InOut(F), InOut(F), Use(F), Use(F)] lowering();
    /// `if r2 < r1 { r1 = r2; r0 = x }`: `min.f` and its tangent, likewise.
    TMinF = "tmin.f" [InOut(F), InOut(F), Use(F), Use(F)] lowering();
    // ---- indexed load (made by the lowering) ----------------------------------
    // A row-major element `a[base + j]` (a matrix row, a window) is an
    // `add.i` whose only reader is the `aget` right after it: one
    // instruction instead of two, in the primal loop and in its forward
    // and reverse code alike.
    /// `r0 = r1[r2 + x]` (`x` holds the second index register; the sum
    /// wraps like `add.i`); out of bounds traps with the sum as the index.
    AGetAdd = "aget.add" [Def(F), Use(A), Use(I), Use(I)] lowering();

    // ---- fused multiply-add (made by the lowering) -----------------------------
    // A product whose only reader adds it in place (`s = s + x * y` in a
    // loop): one dispatch for the two, each rounded as by the two.
    /// `r0 += r1 * r2` (IEEE: `0 * inf` is nan, as by `mul.f` and `add.f`).
    MulAddF = "add.mul.f" [InOut(F), Use(F), Use(F)] lowering();
    // A product summed in place and its tangent summed in place right
    // before it (`ṡ += ẋ⊙c; s += x·c`, a weighted sum in tangent code; for
    // a square `ṡ += (ẋ⊙x)⊙k; s += x·x`): one dispatch for the two.
    /// `r1 += x0 ⊙ x1; r0 += r2 * x1` (`x` holds the tangent's register in
    /// its low 16 bits and the factor's in its high 16): an `acc.mul` and
    /// the `add.mul.f` right after it with the same factor, each rounded
    /// as by the two; every operand is read before either sum is written.
    AddMulT = "add.mul.t" [InOut(F), InOut(F), Use(F), Use(F), Use(F)] lowering();
    /// `r1 += (x0 ⊙ r2) ⊙ x1; r0 += r2 * r2`: an `acc.mul.mul` (a square's
    /// tangent summed) and the `add.mul.f` of the square right after it,
    /// likewise.
    AddSqT = "add.sq.t" [InOut(F), InOut(F), Use(F), Use(F), Use(F)] lowering();

    // ---- tangent load and product (made by the lowering) ----------------------
    // A tangent array's element read only by the tangent sum right after
    // it (a dot product's tangent `ṡ + ẋ[j] ⊙ w`, its load placed there by
    // the AD stage): one dispatch for the two. Five registers: `x` holds
    // two, the index in its low 16 bits and the factor in its high 16
    // ([`Instr::reg`](crate::bytecode::Instr::reg)).
    /// `r0 = r1 + r2[x0] ⊙ x1`: an `aget` whose only reader is the
    /// `add.mul.z` right after it. The load comes first (out of bounds
    /// traps with the index, as `aget`), the product is rounded before it
    /// is added, as by the two; every operand is read before `r0` is
    /// written.
    AddMulAGet = "add.mul.aget" [Def(F), Use(F), Use(A), Use(I), Use(F)] lowering();
    /// `r0 += r1[r2 + x0] ⊙ x1`: an `aget.add` whose only reader is the
    /// `add.mul.z` right after it, summing in place (a tangent sum in a
    /// phi's register). The load as by `aget.add` (the index sum wraps,
    /// out of bounds traps with the sum), then as `add.mul.aget`.
    AccMulAGetAdd = "acc.mul.aget.add" [InOut(F), Use(A), Use(I), Use(I), Use(F)] lowering();

    // ---- paired load (made by the lowering) -----------------------------------
    // A value's element and its tangent's, loaded at one index by two
    // `aget`s in a row that stand for one instruction of the program (the
    // tangent code of an `aget`: the same source location): one dispatch
    // for the two. Loads written apart keep their own locations for a
    // trap, so they are not paired.
    /// `r0 = r2[x1]; r1 = x0[x1]` (`x` holds the second array's register
    /// in its low 16 bits and the index's in its high 16): the first load,
    /// then the second, each trapping as `aget` does; every operand is
    /// read before either result is written.
    AGetPair = "aget.pair" [Def(F), Def(F), Use(A), Use(A), Use(I)] lowering();
}

/// The condition of a comparison or fused branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

/// The families of fused branches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fused {
    /// Compare two i64 registers and branch (`jmp.if.<cc>.i`).
    CmpI,
    /// Compare two f64 registers and branch (`jmp.if.<cc>.f`,
    /// `jmp.ifnot.<cc>.f`).
    CmpF,
    /// Step an i64 counter, compare it and branch (`jmp.step.if.<cc>.i`).
    StepI,
}

impl Cond {
    /// Every condition.
    pub const ALL: [Cond; 6] = [Cond::Lt, Cond::Le, Cond::Gt, Cond::Ge, Cond::Eq, Cond::Ne];

    /// The condition as mnemonics spell it (`lt`).
    pub fn name(self) -> &'static str {
        match self {
            Cond::Lt => "lt",
            Cond::Le => "le",
            Cond::Gt => "gt",
            Cond::Ge => "ge",
            Cond::Eq => "eq",
            Cond::Ne => "ne",
        }
    }

    /// The condition that holds for `(b, a)` exactly when `self` holds for
    /// `(a, b)`.
    pub fn swapped(self) -> Cond {
        match self {
            Cond::Lt => Cond::Gt,
            Cond::Le => Cond::Ge,
            Cond::Gt => Cond::Lt,
            Cond::Ge => Cond::Le,
            Cond::Eq => Cond::Eq,
            Cond::Ne => Cond::Ne,
        }
    }

    /// The condition that holds exactly when `self` does not, on integers
    /// (not on f64: nan makes both `lt` and `ge` false).
    pub fn inverse(self) -> Cond {
        match self {
            Cond::Lt => Cond::Ge,
            Cond::Le => Cond::Gt,
            Cond::Gt => Cond::Le,
            Cond::Ge => Cond::Lt,
            Cond::Eq => Cond::Ne,
            Cond::Ne => Cond::Eq,
        }
    }

    /// Whether the condition holds for `a`, `b`.
    #[inline(always)]
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cond::Lt => a < b,
            Cond::Le => a <= b,
            Cond::Gt => a > b,
            Cond::Ge => a >= b,
            Cond::Eq => a == b,
            Cond::Ne => a != b,
        }
    }

    /// The condition and fused-branch family of a comparison opcode.
    pub fn of(op: Op) -> Option<(Cond, Fused)> {
        Some(match op {
            Op::LtI => (Cond::Lt, Fused::CmpI),
            Op::LeI => (Cond::Le, Fused::CmpI),
            Op::GtI => (Cond::Gt, Fused::CmpI),
            Op::GeI => (Cond::Ge, Fused::CmpI),
            Op::EqI => (Cond::Eq, Fused::CmpI),
            Op::NeI => (Cond::Ne, Fused::CmpI),
            Op::LtF => (Cond::Lt, Fused::CmpF),
            Op::LeF => (Cond::Le, Fused::CmpF),
            Op::GtF => (Cond::Gt, Fused::CmpF),
            Op::GeF => (Cond::Ge, Fused::CmpF),
            Op::EqF => (Cond::Eq, Fused::CmpF),
            Op::NeF => (Cond::Ne, Fused::CmpF),
            _ => return None,
        })
    }
}

/// What a fused branch opcode does: family, condition, and whether it jumps
/// when the condition fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Branch {
    /// The family.
    pub fused: Fused,
    /// The condition compared.
    pub cond: Cond,
    /// Whether it jumps when the condition fails.
    pub negated: bool,
}

impl Op {
    /// The fused branch opcode of `fused` that jumps when `cond` holds
    /// (`negated`: fails). Integer families express a negated condition as
    /// its inverse.
    pub fn fused_branch(fused: Fused, cond: Cond, negated: bool) -> Op {
        use Cond::{Eq, Ge, Gt, Le, Lt, Ne};
        let int = if negated { cond.inverse() } else { cond };
        match (fused, int, cond, negated) {
            (Fused::CmpI, Lt, ..) => Op::JmpLtI,
            (Fused::CmpI, Le, ..) => Op::JmpLeI,
            (Fused::CmpI, Gt, ..) => Op::JmpGtI,
            (Fused::CmpI, Ge, ..) => Op::JmpGeI,
            (Fused::CmpI, Eq, ..) => Op::JmpEqI,
            (Fused::CmpI, Ne, ..) => Op::JmpNeI,
            (Fused::StepI, Lt, ..) => Op::JmpStepLtI,
            (Fused::StepI, Le, ..) => Op::JmpStepLeI,
            (Fused::StepI, Gt, ..) => Op::JmpStepGtI,
            (Fused::StepI, Ge, ..) => Op::JmpStepGeI,
            (Fused::StepI, Eq, ..) => Op::JmpStepEqI,
            (Fused::StepI, Ne, ..) => Op::JmpStepNeI,
            (Fused::CmpF, _, Lt, false) => Op::JmpLtF,
            (Fused::CmpF, _, Le, false) => Op::JmpLeF,
            (Fused::CmpF, _, Gt, false) => Op::JmpGtF,
            (Fused::CmpF, _, Ge, false) => Op::JmpGeF,
            (Fused::CmpF, _, Eq, false) => Op::JmpEqF,
            (Fused::CmpF, _, Ne, false) => Op::JmpNeF,
            (Fused::CmpF, _, Lt, true) => Op::JmpNotLtF,
            (Fused::CmpF, _, Le, true) => Op::JmpNotLeF,
            (Fused::CmpF, _, Gt, true) => Op::JmpNotGtF,
            (Fused::CmpF, _, Ge, true) => Op::JmpNotGeF,
            (Fused::CmpF, _, Eq, true) => Op::JmpNotEqF,
            (Fused::CmpF, _, Ne, true) => Op::JmpNotNeF,
        }
    }

    /// What a fused branch opcode does; `None` for every other opcode.
    pub fn branch(self) -> Option<Branch> {
        use Cond::{Eq, Ge, Gt, Le, Lt, Ne};
        use Fused::{CmpF, CmpI, StepI};
        let (fused, cond, negated) = match self {
            Op::JmpLtI => (CmpI, Lt, false),
            Op::JmpLeI => (CmpI, Le, false),
            Op::JmpGtI => (CmpI, Gt, false),
            Op::JmpGeI => (CmpI, Ge, false),
            Op::JmpEqI => (CmpI, Eq, false),
            Op::JmpNeI => (CmpI, Ne, false),
            Op::JmpLtF => (CmpF, Lt, false),
            Op::JmpLeF => (CmpF, Le, false),
            Op::JmpGtF => (CmpF, Gt, false),
            Op::JmpGeF => (CmpF, Ge, false),
            Op::JmpEqF => (CmpF, Eq, false),
            Op::JmpNeF => (CmpF, Ne, false),
            Op::JmpNotLtF => (CmpF, Lt, true),
            Op::JmpNotLeF => (CmpF, Le, true),
            Op::JmpNotGtF => (CmpF, Gt, true),
            Op::JmpNotGeF => (CmpF, Ge, true),
            Op::JmpNotEqF => (CmpF, Eq, true),
            Op::JmpNotNeF => (CmpF, Ne, true),
            Op::JmpStepLtI => (StepI, Lt, false),
            Op::JmpStepLeI => (StepI, Le, false),
            Op::JmpStepGtI => (StepI, Gt, false),
            Op::JmpStepGeI => (StepI, Ge, false),
            Op::JmpStepEqI => (StepI, Eq, false),
            Op::JmpStepNeI => (StepI, Ne, false),
            _ => return None,
        };
        Some(Branch {
            fused,
            cond,
            negated,
        })
    }

    /// True for instructions that end a basic block.
    pub fn is_terminator(self) -> bool {
        matches!(self, Op::Ret | Op::RetN | Op::Jmp | Op::BlkPop)
    }

    /// True for the opcodes only the lowering makes (batched reservation,
    /// fused math, fused products): never in IR, never in `.adasm` text.
    pub fn is_lowering_only(self) -> bool {
        self.facts().origin == Origin::Lowering
    }

    /// True for the conditional jumps that fall through.
    pub fn is_cond_jump(self) -> bool {
        matches!(self, Op::JmpIf | Op::JmpIfNot) || self.branch().is_some()
    }

    /// The bits of `Instr::flags` this opcode may set: none so far (the
    /// byte is reserved and must be zero, `verify.rs` check 7).
    pub fn flag_bits(self) -> u8 {
        0
    }

    /// The register operands, in storage order (`r0`, `r1`, `r2`, `x`).
    pub fn reg_operands(self) -> impl Iterator<Item = Operand> {
        self.operands()
            .iter()
            .copied()
            .filter(|o| matches!(o, Operand::Def(_) | Operand::Use(_) | Operand::InOut(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_dense_and_round_trips() {
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            assert_eq!(Op::from_u8(i as u8), Some(*op));
        }
        assert_eq!(Op::from_u8(Op::ALL.len() as u8), None);
    }

    #[test]
    fn at_most_five_registers_and_one_x_field() {
        for op in Op::ALL {
            let regs = op.reg_operands().count();
            let others = op.operands().len() - regs;
            // Five registers: `x` holds two 16-bit ones.
            assert!(regs <= 5, "{op:?}");
            assert!(others <= 1, "{op:?}");
            assert!(regs + others <= 5, "{op:?}");
            assert!(regs < 5 || others == 0, "{op:?}");
            // A non-register operand lives in `x`, so it cannot share the
            // instruction with a fourth register.
            assert!(!(regs == 4 && others == 1), "{op:?}");
        }
    }

    #[test]
    fn fused_branches_round_trip() {
        for fused in [Fused::CmpI, Fused::CmpF, Fused::StepI] {
            for cond in Cond::ALL {
                for negated in [false, true] {
                    let op = Op::fused_branch(fused, cond, negated);
                    let b = op.branch().expect("a fused branch");
                    assert_eq!(b.fused, fused);
                    // Same jump: integer negations become the inverse.
                    let same = (b.cond, b.negated) == (cond, negated)
                        || (fused != Fused::CmpF && b.cond == cond.inverse() && negated);
                    assert!(same, "{fused:?} {cond:?} {negated} -> {op:?}");
                    let name = format!(
                        "jmp.{}{}.{}.{}",
                        if fused == Fused::StepI { "step." } else { "" },
                        if b.negated { "ifnot" } else { "if" },
                        b.cond.name(),
                        if fused == Fused::CmpF { "f" } else { "i" },
                    );
                    assert_eq!(op.mnemonic(), name);
                }
            }
        }
        let n = Op::ALL.iter().filter(|op| op.branch().is_some()).count();
        assert_eq!(n, 24);
        for a in [i64::MIN, -1, 0, 1, i64::MAX] {
            for b in [i64::MIN, 0, 1] {
                for c in Cond::ALL {
                    assert_eq!(c.swapped().holds(b, a), c.holds(a, b));
                    assert_eq!(c.inverse().holds(a, b), !c.holds(a, b));
                }
            }
        }
    }

    #[test]
    fn mnemonics_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for op in Op::ALL {
            assert!(seen.insert(op.mnemonic()), "{}", op.mnemonic());
        }
    }
}
