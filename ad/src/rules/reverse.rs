//! Reverse-mode rules: what the pullback of each opcode does.
//!
//! `rule` is one `match` over every opcode with no wildcard arm, so an
//! opcode added to the table without a reverse rule does not compile. An
//! opcode without a derivative says so in its arm; an opcode that cannot
//! appear in a primal function (one only the AD stage or the lowering
//! writes) is an error, never a silent zero gradient.
//!
//! A rule reads the cotangent of the instruction's result (`d`), adds its
//! contributions to the operands' cotangents through `Emit`, and names
//! every forward value it reads with `Emit::need`, which decides how the
//! reverse code gets it (pushed, recomputed, a loop counter, ...). The
//! rules run backwards over each block (see [`mod@crate::transform`]).

use crate::transform::Emit;
use vm::ir::{Inst, ValueId};
use vm::op::Op;
use vm::Type;

/// An opcode with no reverse-mode rule: one that the AD stage or the
/// lowering writes, found in a function being differentiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoRule(pub Op);

/// Append the reverse fragment of `inst` (index `i` of its block) through
/// `e`.
///
/// Clippy rejects a wildcard arm in any `match` here
/// (`wildcard_enum_match_arm`, `match_wildcard_for_single_variants`:
/// denied, so `cargo clippy` fails).
#[deny(
    clippy::wildcard_enum_match_arm,
    clippy::match_wildcard_for_single_variants
)]
pub(crate) fn rule(e: &mut Emit, i: usize, inst: &Inst) -> Result<(), NoRule> {
    let a0 = inst.args.first().copied();
    let a1 = inst.args.get(1).copied();
    let ca = a0.and_then(|a| e.cot(a));
    let cb = a1.and_then(|a| e.cot(a));
    let (a, bb) = (a0.unwrap_or(ValueId(0)), a1.unwrap_or(ValueId(0)));
    let y = inst.dst.unwrap_or(ValueId(0));
    // The cotangent of the result; `None` when the result carries no
    // derivative (inactive, or not f64), when the f64 rules add nothing.
    let dbar = inst.dst.and_then(|d| e.cot(d));
    let f64 = Some(Type::F64);
    match inst.op {
        Op::AddF => {
            if let Some(d) = dbar {
                e.acc(ca, d);
                e.acc(cb, d);
            }
        }
        Op::SubF => {
            if let Some(d) = dbar {
                e.acc(ca, d);
                e.acc_neg(cb, d);
            }
        }
        Op::MulF => {
            let Some(d) = dbar else { return Ok(()) };
            if a == bb {
                // A square, `x * x`: one contribution `2 * (d * x)` instead
                // of two `d * x`; the same bits when `x`'s cotangent had
                // none before (doubling is exact), one rounding fewer
                // otherwise.
                if let Some(ca) = ca {
                    let va = e.need(a);
                    let t = e.op(Op::MulZ, f64, vec![d, va]);
                    let two = e.kf(2.0);
                    e.acc_mul(ca, t, two);
                }
                return Ok(());
            }
            if let Some(ca) = ca {
                let vb = e.need(bb);
                e.acc_mul(ca, d, vb);
            }
            if let Some(cb) = cb {
                let va = e.need(a);
                e.acc_mul(cb, d, va);
            }
        }
        Op::DivF => {
            let Some(d) = dbar else { return Ok(()) };
            if ca.is_none() && cb.is_none() {
                return Ok(());
            }
            let vb = e.need(bb);
            let t = e.op(Op::DivZ, f64, vec![d, vb]);
            e.acc(ca, t);
            if cb.is_some() {
                let vy = e.need(y);
                let t2 = e.op(Op::MulZ, f64, vec![t, vy]);
                e.acc_neg(cb, t2);
            }
        }
        Op::PowF => {
            let Some(d) = dbar else { return Ok(()) };
            if let Some(ca) = ca {
                let (va, vb) = (e.need(a), e.need(bb));
                let one = e.kf(1.0);
                let t = e.op(Op::SubF, f64, vec![vb, one]);
                let t = e.op(Op::PowF, f64, vec![va, t]);
                let t = e.op(Op::MulF, f64, vec![t, vb]);
                e.acc_mul(ca, d, t);
            }
            if let Some(cb) = cb {
                // ȳ·y·ln a where a > 0, else 0 (adasm.md §3): the whole
                // contribution is selected, so that an infinite or nan `y`
                // or ȳ where a <= 0 still adds 0, not 0·inf = nan.
                let (va, vy) = (e.need(a), e.need(y));
                let zero = e.kf(0.0);
                let l = e.op(Op::Log, f64, vec![va]);
                let t = e.op(Op::MulF, f64, vec![l, vy]);
                let c = e.op(Op::MulZ, f64, vec![d, t]);
                let pos = e.op(Op::GtF, Some(Type::Bool), vec![va, zero]);
                let c = e.op(Op::Select, f64, vec![pos, c, zero]);
                e.acc(Some(cb), c);
            }
        }
        Op::MinF | Op::MaxF => {
            let Some(d) = dbar else { return Ok(()) };
            // The primal picks `b` exactly when this comparison holds.
            let cmp = if inst.op == Op::MinF {
                Op::LtF
            } else {
                Op::GtF
            };
            let (va, vb) = (e.need(a), e.need(bb));
            let took_b = e.op(cmp, Some(Type::Bool), vec![vb, va]);
            e.route(took_b, cb, ca, d);
        }
        Op::Select => {
            let Some(d) = dbar else { return Ok(()) };
            let (c, x, z) = (a0, a1, inst.args.get(2).copied());
            let cx = x.and_then(|x| e.cot(x));
            let cz = z.and_then(|z| e.cot(z));
            let vc = e.need(c.unwrap_or(ValueId(0)));
            e.route(vc, cx, cz, d);
        }
        Op::NegF => {
            if let Some(d) = dbar {
                e.acc_neg(ca, d);
            }
        }
        Op::Mov => {
            if let Some(d) = dbar {
                e.acc(ca, d);
            }
        }
        Op::Sin => {
            if let Some(d) = dbar {
                e.scaled(ca, d, |e| e.factor(i, a, Op::Cos));
            }
        }
        Op::Cos => {
            if let (Some(d), true) = (dbar, ca.is_some()) {
                let s = e.factor(i, a, Op::Sin);
                let t = e.op(Op::MulZ, f64, vec![d, s]);
                e.acc_neg(ca, t);
            }
        }
        Op::Tan => {
            if let Some(d) = dbar {
                e.scaled(ca, d, |e| {
                    let vy = e.need(y);
                    let one = e.kf(1.0);
                    let t = e.op(Op::MulF, f64, vec![vy, vy]);
                    e.op(Op::AddF, f64, vec![t, one])
                });
            }
        }
        Op::Exp => {
            if let Some(d) = dbar {
                e.scaled(ca, d, |e| e.need(y));
            }
        }
        Op::Log => {
            if let (Some(d), true) = (dbar, ca.is_some()) {
                let va = e.need(a);
                let t = e.op(Op::DivZ, f64, vec![d, va]);
                e.acc(ca, t);
            }
        }
        Op::Sqrt => {
            if let (Some(d), true) = (dbar, ca.is_some()) {
                let vy = e.need(y);
                let t = e.op(Op::AddF, f64, vec![vy, vy]);
                let t = e.op(Op::DivZ, f64, vec![d, t]);
                e.acc(ca, t);
            }
        }
        Op::Tanh => {
            if let Some(d) = dbar {
                e.scaled(ca, d, |e| {
                    let vy = e.need(y);
                    let one = e.kf(1.0);
                    let t = e.op(Op::MulF, f64, vec![vy, vy]);
                    e.op(Op::SubF, f64, vec![one, t])
                });
            }
        }
        Op::AbsF => {
            if let Some(d) = dbar {
                e.scaled(ca, d, |e| {
                    // sign(a), with abs'(0) = 0.
                    let va = e.need(a);
                    let (zero, one, mone) = (e.kf(0.0), e.kf(1.0), e.kf(-1.0));
                    let pos = e.op(Op::GtF, Some(Type::Bool), vec![va, zero]);
                    let neg = e.op(Op::LtF, Some(Type::Bool), vec![va, zero]);
                    let s = e.op(Op::Select, f64, vec![neg, mone, zero]);
                    e.op(Op::Select, f64, vec![pos, one, s])
                });
            }
        }
        Op::Erf | Op::Erfc => {
            // ±2/√π · e^(−a²)
            if let Some(d) = dbar {
                let k = if inst.op == Op::Erf {
                    std::f64::consts::FRAC_2_SQRT_PI
                } else {
                    -std::f64::consts::FRAC_2_SQRT_PI
                };
                e.scaled(ca, d, |e| {
                    let va = e.need(a);
                    let sq = e.op(Op::MulF, f64, vec![va, va]);
                    let nsq = e.op(Op::NegF, f64, vec![sq]);
                    let g = e.op(Op::Exp, f64, vec![nsq]);
                    let k = e.kf(k);
                    e.op(Op::MulF, f64, vec![g, k])
                });
            }
        }
        Op::Atan => {
            // d / (1 + a²)
            if let (Some(d), true) = (dbar, ca.is_some()) {
                let va = e.need(a);
                let one = e.kf(1.0);
                let sq = e.op(Op::MulF, f64, vec![va, va]);
                let den = e.op(Op::AddF, f64, vec![sq, one]);
                let t = e.op(Op::DivZ, f64, vec![d, den]);
                e.acc(ca, t);
            }
        }
        Op::Asin | Op::Acos => {
            // ±d / √((1 − a)(1 + a)): ±inf at a = ±1 (the formula's value).
            if let (Some(d), true) = (dbar, ca.is_some()) {
                let va = e.need(a);
                let one = e.kf(1.0);
                let lo = e.op(Op::SubF, f64, vec![one, va]);
                let hi = e.op(Op::AddF, f64, vec![one, va]);
                let p = e.op(Op::MulF, f64, vec![lo, hi]);
                let den = e.op(Op::Sqrt, f64, vec![p]);
                let t = e.op(Op::DivZ, f64, vec![d, den]);
                if inst.op == Op::Asin {
                    e.acc(ca, t);
                } else {
                    e.acc_neg(ca, t);
                }
            }
        }
        Op::Atan2 | Op::Hypot => {
            // With h = hypot(a, b): atan2(a, b) has partials b/h², −a/h²;
            // hypot(a, b) = h has partials a/h, b/h. Dividing by h twice
            // rather than by a² + b² keeps arguments near 1e±200 from
            // overflowing. At the origin (h = 0) both are 0 (documented).
            let Some(d) = dbar else { return Ok(()) };
            if ca.is_none() && cb.is_none() {
                return Ok(());
            }
            let (va, vb) = (e.need(a), e.need(bb));
            let h = if inst.op == Op::Hypot {
                e.need(y)
            } else {
                e.op(Op::Hypot, f64, vec![va, vb])
            };
            let zero = e.kf(0.0);
            let origin = e.op(Op::EqF, Some(Type::Bool), vec![h, zero]);
            // The partial `num / h` (hypot) or `num / h / h` (atan2), 0 at
            // the origin.
            let partial = |e: &mut Emit, num: ValueId| {
                let mut q = e.op(Op::DivF, f64, vec![num, h]);
                if inst.op == Op::Atan2 {
                    q = e.op(Op::DivF, f64, vec![q, h]);
                }
                e.op(Op::Select, f64, vec![origin, zero, q])
            };
            if inst.op == Op::Hypot {
                if let Some(ca) = ca {
                    let p = partial(e, va);
                    e.acc_mul(ca, d, p);
                }
                if let Some(cb) = cb {
                    let p = partial(e, vb);
                    e.acc_mul(cb, d, p);
                }
            } else {
                // y = atan2(a, b): ā += d·b/h², b̄ −= d·a/h².
                if let Some(ca) = ca {
                    let p = partial(e, vb);
                    e.acc_mul(ca, d, p);
                }
                if cb.is_some() {
                    let p = partial(e, va);
                    let t = e.op(Op::MulZ, f64, vec![d, p]);
                    e.acc_neg(cb, t);
                }
            }
        }
        Op::Sinh | Op::Cosh => {
            // sinh' = cosh, cosh' = sinh
            if let Some(d) = dbar {
                let other = if inst.op == Op::Sinh { Op::Cosh } else { Op::Sinh };
                e.scaled(ca, d, |e| {
                    let va = e.need(a);
                    e.op(other, f64, vec![va])
                });
            }
        }
        Op::Log1p => {
            // d / (1 + a)
            if let (Some(d), true) = (dbar, ca.is_some()) {
                let va = e.need(a);
                let one = e.kf(1.0);
                let den = e.op(Op::AddF, f64, vec![va, one]);
                let t = e.op(Op::DivZ, f64, vec![d, den]);
                e.acc(ca, t);
            }
        }
        Op::Expm1 => {
            // d · e^a = d · (y + 1)
            if let Some(d) = dbar {
                e.scaled(ca, d, |e| {
                    let vy = e.need(y);
                    let one = e.kf(1.0);
                    e.op(Op::AddF, f64, vec![vy, one])
                });
            }
        }
        Op::Log2 | Op::Log10 => {
            // d / (a · ln 2), d / (a · ln 10)
            if let (Some(d), true) = (dbar, ca.is_some()) {
                let ln = if inst.op == Op::Log2 {
                    std::f64::consts::LN_2
                } else {
                    std::f64::consts::LN_10
                };
                let va = e.need(a);
                let ln = e.kf(ln);
                let den = e.op(Op::MulF, f64, vec![va, ln]);
                let t = e.op(Op::DivZ, f64, vec![d, den]);
                e.acc(ca, t);
            }
        }
        Op::Cbrt => {
            // d / (3 y²): inf at 0.
            if let (Some(d), true) = (dbar, ca.is_some()) {
                let vy = e.need(y);
                let three = e.kf(3.0);
                let sq = e.op(Op::MulF, f64, vec![vy, vy]);
                let den = e.op(Op::MulF, f64, vec![sq, three]);
                let t = e.op(Op::DivZ, f64, vec![d, den]);
                e.acc(ca, t);
            }
        }
        Op::AGet => {
            if let Some(d) = dbar {
                let (arr, idx) = (e.need(a), e.need(bb));
                e.op(Op::ShadowAcc, None, vec![arr, idx, d]);
            }
        }
        Op::ASet => {
            // v̄ += ā[i]; ā[i] = 0 (only an active array has cotangents to
            // move), then restore the overwritten element.
            let old = e.overwritten(i);
            let (arr, idx) = (e.need(inst.args[0]), e.need(inst.args[1]));
            let vold = e.need(old);
            if e.is_active(inst.args[0]) {
                let t = e.op(Op::ShadowTake, f64, vec![arr, idx]);
                let cv = e.cot(inst.args[2]);
                e.acc(cv, t);
            }
            e.op(Op::ASet, None, vec![arr, idx, vold]);
        }
        Op::Call => {
            // Differentiated through when some argument is active and a
            // derivative can leave the callee (see
            // `analysis::call_is_active`): its pullback, called with the
            // result's cotangent.
            if let Some(d) = e.call_derived(i) {
                e.reverse_call(inst, d, dbar);
            }
        }
        // No derivative: integer arithmetic, comparisons and logic (no f64
        // result), conversions from i64 and to i64, `nograd`, array
        // creation and length. Their results are never active.
        Op::AddI
        | Op::SubI
        | Op::MulI
        | Op::DivI
        | Op::RemI
        | Op::MinI
        | Op::MaxI
        | Op::NegI
        | Op::LtF
        | Op::LeF
        | Op::GtF
        | Op::GeF
        | Op::EqF
        | Op::NeF
        | Op::LtI
        | Op::LeI
        | Op::GtI
        | Op::GeI
        | Op::EqI
        | Op::NeI
        | Op::And
        | Op::Or
        | Op::Not
        | Op::NoGrad
        | Op::ItoF
        | Op::FtoI
        | Op::ANew
        | Op::ALen
        // Rounding: derivative zero (never active, like `nograd`).
        | Op::Floor
        | Op::Ceil
        | Op::Round
        | Op::Trunc => {}
        // Terminators are IR terminators, not instructions, in a primal
        // function; the reverse CFG handles control flow.
        Op::Ret | Op::Jmp | Op::JmpIf | Op::JmpIfNot => return Err(NoRule(inst.op)),
        // Written only by the AD stage: no reverse rule (forward mode
        // differentiates them; reverse over reverse is not built).
        Op::CallAcc
        | Op::CallN
        | Op::RetN
        | Op::BlkPush
        | Op::BlkPop
        | Op::CommsPush
        | Op::CommsPop
        | Op::Acc
        | Op::AccNeg
        | Op::AccMul
        | Op::AccMulPop
        | Op::MulPop
        | Op::MulZ
        | Op::AddMulZ
        | Op::DivZ
        | Op::Zero
        | Op::ShadowAcc
        | Op::ShadowAccMul
        | Op::ShadowTake
        | Op::Take
        | Op::LenCheck => return Err(NoRule(inst.op)),
        // Made only by the lowering, never in IR.
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
        | Op::AddSqT => return Err(NoRule(inst.op)),
    }
    Ok(())
}
