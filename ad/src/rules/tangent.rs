//! Tangent rules: what forward mode computes for each opcode.
//!
//! [`tangent`] is one `match` over every [`Op`], with no wildcard arm, so
//! that a new opcode does not compile until it says what its tangent is.
//! Each arm either emits the tangent of the instruction's result through
//! [`Emit`] (`ẏ` from the operands' tangents `ȧ`, `ḃ` and the primal
//! values), or says why there is none.
//!
//! The reverse-mode opcodes have rules too: Hessian-vector products apply
//! this transform to reverse mode's forward function and pullback
//! ([`crate::forward::derived_tangent`], `docs/ad.md`, "Hessian-vector
//! products"), where every non-constant value is active.
//!
//! In a user function, a rule runs only for an instruction that activity analysis marks as
//! carrying a derivative (an active result, an `aset` into an active array,
//! a call differentiated through); operands that are inactive have no
//! tangent (`e.t(k)` is `None`) and contribute no code, so a zero tangent
//! contributes exactly zero, whatever the local derivative.

use crate::forward::Emit;
use vm::ir::ValueId;
use vm::op::Op;
use vm::Type;

/// What the tangent rule of an instruction produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The result's tangent is this value (emitted, or an operand's tangent
    /// passed through).
    Tangent(vm::ir::ValueId),
    /// The result is f64 but its derivative is zero by definition
    /// (`nograd`, `itof`): it gets no tangent code, like an inactive value.
    Zero,
    /// The result is not differentiable (`i64`, `bool`): comparisons,
    /// integer and logic operations, `alen`, `ftoi`.
    NoDerivative,
    /// The instruction has no result; its tangent code was emitted (an
    /// `aset` into an active array writes the tangent array too).
    Effect,
    /// A call: the transform calls the callee's tangent function instead.
    Call,
    /// The opcode cannot appear in the code the transform reads (a user
    /// function, or a derived one): an opcode only the lowering makes, a
    /// terminator (terminators are not instructions of the IR), `call.n`
    /// (tangent code), or a fused pop the derived mode splits first. The
    /// text says which.
    NotPrimal(&'static str),
}

impl From<Option<vm::ir::ValueId>> for Rule {
    fn from(t: Option<vm::ir::ValueId>) -> Rule {
        match t {
            Some(t) => Rule::Tangent(t),
            None => Rule::Zero,
        }
    }
}

const TANGENT: &str = "tangent code, not a primal or derived instruction";
const FUSED: &str = "a fused form the derived mode splits before it runs";
const LOWERING: &str = "made by the lowering, not an IR instruction";
const TERMINATOR: &str = "a terminator, not an IR instruction";

/// The tangent rule of `op`, emitted through `e` (whose instruction has
/// opcode `op`). Operand `k` is `e.a(k)`, its tangent `e.t(k)`, the result
/// `e.y()`.
///
/// Clippy rejects a wildcard arm in any `match` here
/// (`wildcard_enum_match_arm`, `match_wildcard_for_single_variants`:
/// denied, so `cargo clippy` fails).
#[deny(
    clippy::wildcard_enum_match_arm,
    clippy::match_wildcard_for_single_variants
)]
pub fn tangent(e: &mut Emit<'_, '_>, op: Op) -> Rule {
    use Type::F64;
    match op {
        // ---- f64 arithmetic --------------------------------------------------
        // ẏ = ȧ + ḃ, after the instruction: it reads no primal operand, and
        // a product summed in place (`s = s + x * y`) then stays next to
        // its sum, which the lowering fuses (`add.mul.f`).
        Op::AddF => {
            let (ta, tb) = (e.t(0), e.t(1));
            e.after();
            e.add(ta, tb).into()
        }
        // ẏ = ȧ - ḃ (after the instruction, likewise)
        Op::SubF => {
            let (ta, tb) = (e.t(0), e.t(1));
            e.after();
            e.sub(ta, tb).into()
        }
        // ẏ = ȧ⊙b + ḃ⊙a: a `mul.z` and an `add.mul.z`; for a square,
        // ẏ = (ȧ⊙a)⊙2, one product doubled after the product (which
        // overflows only where the tangent does): the same bits as the
        // sum of the two products, and a product, so that a tangent sum
        // takes it in (`add.mul.z`, `acc.mul`) as it takes any other.
        Op::MulF => {
            let (a, b) = (e.a(0), e.a(1));
            let (ta, tb) = (e.t(0), e.t(1));
            if a == b {
                let p = e.scale(ta, a);
                let two = e.kf(2.0);
                return e.scale(p, two).into();
            }
            let p = e.scale(ta, b);
            e.add_scaled(p, tb, a).into()
        }
        // ẏ = (ȧ - y·ḃ) / b
        Op::DivF => {
            let (b, y) = (e.a(1), e.y());
            let (ta, tb) = (e.t(0), e.t(1));
            let q = e.scale(tb, y);
            let num = e.sub(ta, q);
            e.divide(num, b).into()
        }
        // ẏ = ȧ·b·a^(b-1) + ḃ·y·ln a (the second term only where a > 0,
        // else 0, as in reverse mode: adasm.md §3)
        Op::PowF => {
            let (a, b, y) = (e.a(0), e.a(1), e.y());
            let (ta, tb) = (e.t(0), e.t(1));
            let p = ta.map(|ta| {
                let one = e.kf(1.0);
                let bm1 = e.op(Op::SubF, F64, &[b, one]);
                let pw = e.op(Op::PowF, F64, &[a, bm1]);
                let d = e.op(Op::MulF, F64, &[pw, b]);
                e.op(Op::MulZ, F64, &[ta, d])
            });
            let q = tb.map(|tb| {
                let zero = e.kf(0.0);
                let l = e.op(Op::Log, F64, &[a]);
                let d = e.op(Op::MulF, F64, &[l, y]);
                let c = e.op(Op::MulZ, F64, &[tb, d]);
                let pos = e.op(Op::GtF, Type::Bool, &[a, zero]);
                e.op(Op::Select, F64, &[pos, c, zero])
            });
            e.add(p, q).into()
        }
        // The tangent of the operand chosen (ties and nan go to `a`).
        Op::MinF | Op::MaxF => {
            let cmp = if op == Op::MinF { Op::LtF } else { Op::GtF };
            let (a, b) = (e.a(0), e.a(1));
            let took_b = e.op(cmp, Type::Bool, &[b, a]);
            let (ta, tb) = (e.t_or_zero(0), e.t_or_zero(1));
            Rule::Tangent(e.op(Op::Select, F64, &[took_b, tb, ta]))
        }
        // ẏ = -ȧ (after the instruction, like a sum's)
        Op::NegF => {
            e.after();
            e.t(0).map(|ta| e.op(Op::NegF, F64, &[ta])).into()
        }
        // ẏ = ȧ·cos a, after the instruction: `sin` and `cos` of one
        // register next to each other, which the lowering fuses (`sincos`,
        // one call for the two).
        Op::Sin => {
            let ta = e.t(0);
            e.after();
            e.scale_by(ta, |e| {
                let a = e.a(0);
                e.op(Op::Cos, F64, &[a])
            })
            .into()
        }
        // ẏ = -(ȧ·sin a), after the instruction likewise.
        Op::Cos => {
            let ta = e.t(0);
            e.after();
            let p = e.scale_by(ta, |e| {
                let a = e.a(0);
                e.op(Op::Sin, F64, &[a])
            });
            p.map(|p| e.op(Op::NegF, F64, &[p])).into()
        }
        // ẏ = ȧ·(1 + y²)
        Op::Tan => {
            let ta = e.t(0);
            e.scale_by(ta, |e| {
                let (y, one) = (e.y(), e.kf(1.0));
                let y2 = e.op(Op::MulF, F64, &[y, y]);
                e.op(Op::AddF, F64, &[y2, one])
            })
            .into()
        }
        // ẏ = ȧ·y
        Op::Exp => {
            let (ta, y) = (e.t(0), e.y());
            e.scale(ta, y).into()
        }
        // ẏ = ȧ / a
        Op::Log => {
            let (ta, a) = (e.t(0), e.a(0));
            e.divide(ta, a).into()
        }
        // ẏ = ȧ / (y + y)
        Op::Sqrt => {
            let ta = e.t(0);
            if ta.is_none() {
                return Rule::Zero;
            }
            let y = e.y();
            let two_y = e.op(Op::AddF, F64, &[y, y]);
            e.divide(ta, two_y).into()
        }
        // ẏ = ȧ·(1 - y²)
        Op::Tanh => {
            let ta = e.t(0);
            e.scale_by(ta, |e| {
                let (y, one) = (e.y(), e.kf(1.0));
                let y2 = e.op(Op::MulF, F64, &[y, y]);
                e.op(Op::SubF, F64, &[one, y2])
            })
            .into()
        }
        // ẏ = ȧ·sign(a), with abs'(0) = 0
        Op::AbsF => {
            let ta = e.t(0);
            e.scale_by(ta, |e| {
                let a = e.a(0);
                let (zero, one, mone) = (e.kf(0.0), e.kf(1.0), e.kf(-1.0));
                let pos = e.op(Op::GtF, Type::Bool, &[a, zero]);
                let neg = e.op(Op::LtF, Type::Bool, &[a, zero]);
                let s = e.op(Op::Select, F64, &[neg, mone, zero]);
                e.op(Op::Select, F64, &[pos, one, s])
            })
            .into()
        }

        // ---- more math (adasm.md §7) ---------------------------------------------
        // ẏ = ±ȧ·(2/√π)·e^(−a²)
        Op::Erf | Op::Erfc => {
            let k = if op == Op::Erf {
                std::f64::consts::FRAC_2_SQRT_PI
            } else {
                -std::f64::consts::FRAC_2_SQRT_PI
            };
            let ta = e.t(0);
            e.scale_by(ta, |e| {
                let a = e.a(0);
                let sq = e.op(Op::MulF, F64, &[a, a]);
                let nsq = e.op(Op::NegF, F64, &[sq]);
                let g = e.op(Op::Exp, F64, &[nsq]);
                let k = e.kf(k);
                e.op(Op::MulF, F64, &[g, k])
            })
            .into()
        }
        // ẏ = ȧ / (1 + a²)
        Op::Atan => {
            let ta = e.t(0);
            if ta.is_none() {
                return Rule::Zero;
            }
            let (a, one) = (e.a(0), e.kf(1.0));
            let sq = e.op(Op::MulF, F64, &[a, a]);
            let den = e.op(Op::AddF, F64, &[sq, one]);
            e.divide(ta, den).into()
        }
        // ẏ = ±ȧ / √((1 − a)(1 + a))
        Op::Asin | Op::Acos => {
            let ta = e.t(0);
            if ta.is_none() {
                return Rule::Zero;
            }
            let (a, one) = (e.a(0), e.kf(1.0));
            let lo = e.op(Op::SubF, F64, &[one, a]);
            let hi = e.op(Op::AddF, F64, &[one, a]);
            let p = e.op(Op::MulF, F64, &[lo, hi]);
            let den = e.op(Op::Sqrt, F64, &[p]);
            let q = e.divide(ta, den);
            if op == Op::Asin {
                q.into()
            } else {
                q.map(|q| e.op(Op::NegF, F64, &[q])).into()
            }
        }
        // With h = hypot(a, b): atan2(a, b)' = ȧ·(b/h)/h − ḃ·(a/h)/h, and
        // hypot(a, b)' = ȧ·a/h + ḃ·b/h; both 0 at the origin.
        Op::Atan2 | Op::Hypot => {
            let (ta, tb) = (e.t(0), e.t(1));
            if ta.is_none() && tb.is_none() {
                return Rule::Zero;
            }
            let (a, b) = (e.a(0), e.a(1));
            let h = if op == Op::Hypot {
                e.y()
            } else {
                e.op(Op::Hypot, F64, &[a, b])
            };
            let zero = e.kf(0.0);
            let origin = e.op(Op::EqF, Type::Bool, &[h, zero]);
            let partial = |e: &mut Emit<'_, '_>, num: ValueId| {
                let mut q = e.op(Op::DivF, F64, &[num, h]);
                if op == Op::Atan2 {
                    q = e.op(Op::DivF, F64, &[q, h]);
                }
                e.op(Op::Select, F64, &[origin, zero, q])
            };
            if op == Op::Hypot {
                let pa = ta.map(|_| partial(e, a));
                let pb = tb.map(|_| partial(e, b));
                let x = pa.and_then(|p| e.scale(ta, p));
                let z = pb.and_then(|p| e.scale(tb, p));
                e.add(x, z).into()
            } else {
                let pa = ta.map(|_| partial(e, b));
                let pb = tb.map(|_| partial(e, a));
                let x = pa.and_then(|p| e.scale(ta, p));
                let z = pb.and_then(|p| e.scale(tb, p));
                e.sub(x, z).into()
            }
        }
        // ẏ = ȧ·cosh a, ȧ·sinh a
        Op::Sinh | Op::Cosh => {
            let other = if op == Op::Sinh { Op::Cosh } else { Op::Sinh };
            let ta = e.t(0);
            e.scale_by(ta, |e| {
                let a = e.a(0);
                e.op(other, F64, &[a])
            })
            .into()
        }
        // ẏ = ȧ / (1 + a)
        Op::Log1p => {
            let ta = e.t(0);
            if ta.is_none() {
                return Rule::Zero;
            }
            let (a, one) = (e.a(0), e.kf(1.0));
            let den = e.op(Op::AddF, F64, &[a, one]);
            e.divide(ta, den).into()
        }
        // ẏ = ȧ·(y + 1)
        Op::Expm1 => {
            let ta = e.t(0);
            e.scale_by(ta, |e| {
                let (y, one) = (e.y(), e.kf(1.0));
                e.op(Op::AddF, F64, &[y, one])
            })
            .into()
        }
        // ẏ = ȧ / (a·ln 2), ȧ / (a·ln 10)
        Op::Log2 | Op::Log10 => {
            let ta = e.t(0);
            if ta.is_none() {
                return Rule::Zero;
            }
            let ln = if op == Op::Log2 {
                std::f64::consts::LN_2
            } else {
                std::f64::consts::LN_10
            };
            let (a, ln) = (e.a(0), e.kf(ln));
            let den = e.op(Op::MulF, F64, &[a, ln]);
            e.divide(ta, den).into()
        }
        // ẏ = ȧ / (3y²)
        Op::Cbrt => {
            let ta = e.t(0);
            if ta.is_none() {
                return Rule::Zero;
            }
            let (y, three) = (e.y(), e.kf(3.0));
            let sq = e.op(Op::MulF, F64, &[y, y]);
            let den = e.op(Op::MulF, F64, &[sq, three]);
            e.divide(ta, den).into()
        }
        // Rounding: derivative zero (never active).
        Op::Floor | Op::Ceil | Op::Round | Op::Trunc => Rule::Zero,

        // ---- i64 arithmetic, comparisons, logic: no derivative ----------------
        Op::AddI | Op::SubI | Op::MulI | Op::DivI | Op::RemI | Op::MinI | Op::MaxI | Op::NegI => {
            Rule::NoDerivative
        }
        Op::LtF | Op::LeF | Op::GtF | Op::GeF | Op::EqF | Op::NeF => Rule::NoDerivative,
        Op::LtI | Op::LeI | Op::GtI | Op::GeI | Op::EqI | Op::NeI => Rule::NoDerivative,
        Op::And | Op::Or | Op::Not => Rule::NoDerivative,

        // ---- moves, selection, conversion ---------------------------------------
        // The tangent of the operand chosen (f64), or the chosen array's
        // tangent array (f64[]); the condition carries none.
        Op::Select => {
            let c = e.a(0);
            let ty = e.y_ty();
            let (tx, tz) = (e.t_or_zero(1), e.t_or_zero(2));
            Rule::Tangent(e.op(Op::Select, ty, &[c, tx, tz]))
        }
        // The operand's tangent, passed through (no code).
        Op::Mov => Rule::Tangent(e.t_or_zero(0)),
        // A stop-gradient: zero by definition.
        Op::NoGrad => Rule::Zero,
        // An integer carries no derivative, so neither does its f64 copy.
        Op::ItoF => Rule::Zero,
        Op::FtoI => Rule::NoDerivative,

        // ---- arrays ----------------------------------------------------------------
        // An active array's tangent array: zeros of the same length.
        Op::ANew => {
            let n = e.a(0);
            Rule::Tangent(e.op(Op::ANew, Type::Arr, &[n]))
        }
        Op::ALen => Rule::NoDerivative,
        // ẏ = ȧ[i], after the instruction: a row-major index `base + j`
        // then stays next to the `aget` it is computed for (the lowering
        // fuses them, `aget.add`), and the tangent's load gets its own
        // copy of the sum ([`crate::optimize::fuse_tangent`]).
        Op::AGet => {
            let (ta, i) = (e.t_or_zero(0), e.a(1));
            e.after();
            Rule::Tangent(e.op(Op::AGet, F64, &[ta, i]))
        }
        // ȧ[i] = v̇ (0 for an inactive value: the element is overwritten)
        Op::ASet => {
            let (ta, i, tv) = (e.t_or_zero(0), e.a(1), e.t_or_zero(2));
            e.effect(Op::ASet, &[ta, i, tv]);
            Rule::Effect
        }

        // ---- control -------------------------------------------------------------
        Op::Call => Rule::Call,
        // A pullback's call of a callee's pullback: the transform calls the
        // tangent of that pullback instead, which returns the cotangents
        // and their tangents, added to the accumulators and their tangents.
        Op::CallAcc => Rule::Call,
        Op::Ret | Op::RetN | Op::Jmp | Op::JmpIf | Op::JmpIfNot | Op::BlkPop => {
            Rule::NotPrimal(TERMINATOR)
        }
        Op::CallN | Op::AddMulZ => Rule::NotPrimal(TANGENT),

        // ---- reverse-mode support (derived code: Hessian-vector products) -----------
        // These occur in the forward and reverse functions of reverse mode,
        // which the transform differentiates again in its derived mode
        // (`crate::forward::derived_tangent`): every non-constant f64 value
        // and array there has a tangent register, written in place like the
        // value.
        // Block ids are control: no tangent.
        Op::BlkPush => Rule::Effect,
        // A check of a rule's tangent array against the result: the
        // check again, no tangent code.
        Op::LenCheck => Rule::Effect,
        // Push the value, then its tangent (the tangent array of an array);
        // the tangent of the reverse function pops them in the opposite
        // order. i64 and bool values carry none.
        Op::CommsPush => {
            let a = e.a(0);
            if e.ty(a).is_differentiable() {
                e.after();
                let ta = e.t_or_zero(0);
                e.effect(Op::CommsPush, &[ta]);
            }
            Rule::Effect
        }
        // The tangent was pushed last: pop it first (before the value).
        Op::CommsPop => {
            let ty = e.y_ty();
            if ty.is_differentiable() {
                Rule::Tangent(e.op(Op::CommsPop, ty, &[]))
            } else {
                Rule::NoDerivative
            }
        }
        // ṙ += v̇
        Op::Acc | Op::AccNeg => {
            if let (Some(tr), Some(tv)) = (e.t(0), e.t(1)) {
                e.effect(op, &[tr, tv]);
            }
            Rule::Effect
        }
        // ṙ += a⊙ḃ, then ṙ += ȧ⊙b (strong-zero products, like the
        // value's). In a pullback `b` is the popped factor (`acc.mul r, ḡ,
        // pop`): its tangent, popped first, is read first, right after its
        // pop, which the clean-up then fuses into it (`acc.mul.pop`). Where
        // `ṙ` is also a factor's tangent (a pullback's registers are
        // written in place: `acc.mul r, r, b`), `ȧ⊙b` is computed first,
        // from `ṙ` before either addition.
        Op::AccMul => {
            if let Some(tr) = e.t(0) {
                let (a, b) = (e.a(1), e.a(2));
                let (ta, tb) = (e.t(1), e.t(2));
                if ta == Some(tr) || tb == Some(tr) {
                    let p = e.scale(ta, b);
                    if let Some(tb) = tb {
                        e.effect(Op::AccMul, &[tr, a, tb]);
                    }
                    if let Some(p) = p {
                        e.effect(Op::Acc, &[tr, p]);
                    }
                    return Rule::Effect;
                }
                if let Some(tb) = tb {
                    e.effect(Op::AccMul, &[tr, a, tb]);
                }
                if let Some(ta) = ta {
                    e.effect(Op::AccMul, &[tr, ta, b]);
                }
            }
            Rule::Effect
        }
        // Made from a pop and a product by the reverse clean-up; the
        // derived mode unfuses them first (`crate::forward::unfuse`), so
        // that the popped factor has a register and its tangent a pop.
        Op::AccMulPop | Op::MulPop => Rule::NotPrimal(FUSED),
        // ẏ = ȧ⊙b + ḃ⊙a (a `mul.z` and an `add.mul.z`)
        Op::MulZ => {
            let (a, b) = (e.a(0), e.a(1));
            let (ta, tb) = (e.t(0), e.t(1));
            let p = e.scale(ta, b);
            e.add_scaled(p, tb, a).into()
        }
        // y = a ⊘ b (zero when a is): ẏ = (ȧ − (a ⊘ b)⊙ḃ) ⊘ b, computed
        // before the instruction (the result's register may be an operand's).
        Op::DivZ => {
            let (a, b) = (e.a(0), e.a(1));
            let (ta, tb) = (e.t(0), e.t(1));
            let q = tb.map(|tb| {
                let y = e.op(Op::DivZ, F64, &[a, b]);
                e.op(Op::MulZ, F64, &[y, tb])
            });
            let num = e.sub(ta, q);
            e.divide(num, b).into()
        }
        // ṙ = 0
        Op::Zero => Rule::Zero,
        // shadow(ȧ)[i] += v̇: the tangent of shadow(a) is the shadow of a's
        // tangent array.
        Op::ShadowAcc => {
            if let (Some(ta), Some(tv)) = (e.t(0), e.t(2)) {
                let i = e.a(1);
                e.effect(Op::ShadowAcc, &[ta, i, tv]);
            }
            Rule::Effect
        }
        // shadow(ȧ)[i] += v̇⊙w + v⊙ẇ
        Op::ShadowAccMul => {
            if let Some(ta) = e.t(0) {
                let (i, v, w) = (e.a(1), e.a(2), e.a(3));
                if let Some(tv) = e.t(2) {
                    e.effect(Op::ShadowAccMul, &[ta, i, tv, w]);
                }
                if let Some(tw) = e.t(3) {
                    e.effect(Op::ShadowAccMul, &[ta, i, v, tw]);
                }
            }
            Rule::Effect
        }
        // ẏ = shadow(ȧ)[i], which it zeroes.
        Op::ShadowTake => match e.t(0) {
            Some(ta) => {
                let i = e.a(1);
                Rule::Tangent(e.op(Op::ShadowTake, F64, &[ta, i]))
            }
            None => Rule::Zero,
        },
        // ẏ = ṙ, ṙ = 0
        Op::Take => match e.t(0) {
            Some(tr) => Rule::Tangent(e.op(Op::Take, F64, &[tr])),
            None => Rule::Zero,
        },

        // ---- made by the lowering ------------------------------------------------------
        Op::JmpLtI
        | Op::JmpLeI
        | Op::JmpGtI
        | Op::JmpGeI
        | Op::JmpEqI
        | Op::JmpNeI
        | Op::JmpLtF
        | Op::JmpLeF
        | Op::JmpGtF
        | Op::JmpGeF
        | Op::JmpEqF
        | Op::JmpNeF
        | Op::JmpNotLtF
        | Op::JmpNotLeF
        | Op::JmpNotGtF
        | Op::JmpNotGeF
        | Op::JmpNotEqF
        | Op::JmpNotNeF
        | Op::JmpStepLtI
        | Op::JmpStepLeI
        | Op::JmpStepGtI
        | Op::JmpStepGeI
        | Op::JmpStepEqI
        | Op::JmpStepNeI
        | Op::CommsReserve
        | Op::CommsPushR
        | Op::SinCos
        | Op::MulPush
        | Op::AccMulPopMul
        | Op::AGetAdd
        | Op::MulAddF
        | Op::TMulZ
        | Op::TMaxF
        | Op::TMinF
        | Op::AddMulAGet
        | Op::AccMulAGetAdd
        | Op::AGetPair
        | Op::MulMulZ
        | Op::AccMulMul
        | Op::TProdZ
        | Op::AddMulT
        | Op::AddSqT => Rule::NotPrimal(LOWERING),
    }
}
