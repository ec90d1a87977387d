//! The interface the reverse rules (`crate::rules::reverse`) write through: a
//! fragment's emitter, which reads cotangents and forward values (arranging
//! their supply) and emits reverse instructions and contributions.

use super::*;

/// Emits reverse instructions for one fragment, recording which primal
/// values it reads: the interface the reverse rules
/// ([`crate::rules::reverse`]) write through.
pub(crate) struct Emit<'t, 'a> {
    pub(super) t: &'t mut Transform<'a>,
    pub(super) out: &'t mut Vec<Inst>,
    pub(super) b: usize,
    pub(super) loc: Loc,
}

impl Emit<'_, '_> {
    /// The cotangent register of primal value `v`, if it is active f64.
    pub(crate) fn cot(&self, v: ValueId) -> Option<ValueId> {
        self.t.rev.cot[v.index()]
    }

    /// Whether primal value `v` is active (an array: carries cotangents).
    pub(crate) fn is_active(&self, v: ValueId) -> bool {
        self.t.primal.active[v.index()]
    }

    /// The f64 constant `x` in the reverse function.
    pub(crate) fn kf(&mut self, x: f64) -> ValueId {
        self.t.kf(x)
    }

    /// The forward value holding the element that `aset` number `i` of
    /// this block overwrites.
    pub(crate) fn overwritten(&self, i: usize) -> ValueId {
        self.t.fwd.overwritten[&(self.b, i)]
    }

    /// The callee's derived functions of call number `i` of this block, if
    /// it is differentiated through.
    pub(crate) fn call_derived(&self, i: usize) -> Option<Derived> {
        self.t.fwd.calls.get(&(self.b, i)).copied()
    }

    /// The reverse-frame register holding forward value `v` (see
    /// [`Transform::supply`]).
    pub(crate) fn need(&mut self, v: ValueId) -> ValueId {
        self.t.supply_reg(BlockId(self.b as u32), v)
    }

    /// The factor of instruction `i` (an active `sin a` or `cos a`): `op a`,
    /// computed by the forward code (see [`Transform::factor`]); recomputed
    /// here only if the forward code has none, which translation rules out.
    pub(crate) fn factor(&mut self, i: usize, a: ValueId, op: Op) -> ValueId {
        match self.t.fwd.factors.get(&(self.b, i)).copied() {
            Some(f) => self.need(f),
            None => {
                let va = self.need(a);
                self.op(op, Some(Type::F64), vec![va])
            }
        }
    }

    /// Emit `op`; returns the new destination (or a dummy id if none).
    pub(crate) fn op(&mut self, op: Op, dst_ty: Option<Type>, args: Vec<ValueId>) -> ValueId {
        let dst = dst_ty.map(|ty| self.t.rev.func.new_value(ty, None));
        // Instructions whose Def operand is an existing register (`zero`).
        let (dst, args) = if op == Op::Zero {
            (Some(args[0]), Vec::new())
        } else {
            (dst, args)
        };
        self.out.push(Inst::new(op, dst, args, self.loc));
        dst.unwrap_or(ValueId(0))
    }

    pub(crate) fn acc(&mut self, to: Option<ValueId>, v: ValueId) {
        if let Some(to) = to {
            let inst = self.t.contribution(Op::Acc, to, vec![v], self.loc);
            self.out.push(inst);
        }
    }

    /// `to += a * b` (or `to = a * b` for a single-contribution cotangent).
    pub(crate) fn acc_mul(&mut self, to: ValueId, a: ValueId, b: ValueId) {
        let inst = self.t.contribution(Op::AccMul, to, vec![a, b], self.loc);
        self.out.push(inst);
    }

    pub(crate) fn acc_neg(&mut self, to: Option<ValueId>, v: ValueId) {
        if let Some(to) = to {
            let inst = self.t.contribution(Op::AccNeg, to, vec![v], self.loc);
            self.out.push(inst);
        }
    }

    /// `to += d * factor`, building the factor only if `to` is active.
    pub(crate) fn scaled(
        &mut self,
        to: Option<ValueId>,
        d: ValueId,
        factor: impl FnOnce(&mut Self) -> ValueId,
    ) {
        if let Some(to) = to {
            let f = factor(self);
            self.acc_mul(to, d, f);
        }
    }

    /// Send cotangent `d` to `if_true` when `cond` holds, else to `if_false`.
    pub(crate) fn route(
        &mut self,
        cond: ValueId,
        if_true: Option<ValueId>,
        if_false: Option<ValueId>,
        d: ValueId,
    ) {
        let zero = self.t.kf(0.0);
        if if_true.is_some() {
            let t = self.op(Op::Select, Some(Type::F64), vec![cond, d, zero]);
            self.acc(if_true, t);
        }
        if if_false.is_some() {
            let t = self.op(Op::Select, Some(Type::F64), vec![cond, zero, d]);
            self.acc(if_false, t);
        }
    }

    /// The reverse of a call differentiated through: call the callee's
    /// pullback with the result's cotangent, adding what it returns to the
    /// arguments' cotangents.
    pub(crate) fn reverse_call(&mut self, inst: &Inst, d: Derived, dbar: Option<ValueId>) {
        let callee = self.t.primal.module.func(inst.callee.unwrap_or(FuncId(0)));
        let mut args = Vec::new();
        if callee.ret == RetType::One(Type::F64) {
            let seed = match dbar {
                Some(c) => c,
                None => self.t.kf(0.0),
            };
            args.push(seed);
        }
        let mut accs = Vec::new();
        for (param, arg) in callee.params.iter().zip(&inst.args) {
            if callee.ty(*param) == Type::F64 {
                let c = match self.t.rev.cot[arg.index()] {
                    Some(c) => c,
                    None => self.sink(),
                };
                accs.push(c);
            }
        }
        let mut call = Inst::new(Op::CallAcc, None, args, self.loc);
        call.callee = Some(d.rev);
        call.accs = accs;
        self.out.push(call);
    }

    /// A register that absorbs cotangents of inactive arguments.
    fn sink(&mut self) -> ValueId {
        if let Some(s) = self.t.rev.sink {
            return s;
        }
        let s = self.t.rev.func.new_value(Type::F64, Some("sink".into()));
        self.t.rev.sink = Some(s);
        s
    }
}
