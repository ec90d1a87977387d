//! More AD modes built on the two transforms: `vjp` (reverse mode with a
//! given output cotangent, for `f64` and `f64[]` results) and `jacobian`
//! (forward mode, one tangent run per flattened input).

use crate::{AdError, Engine, Tangent};
use vm::ir::{FuncId, RetType};
use vm::{Type, Value};

/// Value and vector-Jacobian product of one call ([`Engine::vjp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Vjp {
    /// The result: `F64` or `Arr`.
    pub value: Value,
    /// `seedᵀ J`, one entry per parameter as in [`crate::Gradient`]:
    /// `Some(F64)` for f64, `Some(Arr)` for f64[], `None` for i64, bool and
    /// parameters not differentiated.
    pub grad: Vec<Option<Value>>,
}

impl Default for Vjp {
    fn default() -> Vjp {
        Vjp {
            value: Value::F64(0.0),
            grad: Vec::new(),
        }
    }
}

/// Value and Jacobian of one call ([`Engine::jacobian`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Jacobian {
    /// The result: `F64` or `Arr`.
    pub value: Value,
    /// One row per result element (one row for an `f64` result), one
    /// column per flattened input: every differentiated input in parameter
    /// order, an `f64` one entry, an `f64[]` one entry per element.
    pub jacobian: Vec<Vec<f64>>,
}

impl Engine {
    /// Reverse mode with output cotangent `seed` (`F64` for an `f64`
    /// result, `Arr` of the result's length for an `f64[]` one), with
    /// respect to every `f64` and `f64[]` parameter. `grad` is `vjp` with
    /// seed 1.
    pub fn vjp(&mut self, f: FuncId, args: &[Value], seed: &Value) -> Result<Vjp, AdError> {
        let mut out = Vjp::default();
        let wrt = self.take_full_mask(f)?;
        let result = self.vjp_wrt_into(f, args, seed, &wrt, &mut out);
        self.full_masks[f.index()] = wrt;
        result.map(|()| out)
    }

    /// [`Engine::vjp`] with respect to the parameters selected by `wrt`.
    pub fn vjp_wrt(
        &mut self,
        f: FuncId,
        args: &[Value],
        seed: &Value,
        wrt: &[bool],
    ) -> Result<Vjp, AdError> {
        let mut out = Vjp::default();
        self.vjp_wrt_into(f, args, seed, wrt, &mut out)?;
        Ok(out)
    }

    /// Like [`Engine::vjp_wrt`], reusing `out`'s buffers. The cotangent of
    /// an `f64[]` result is its shadow array: seeded after the forward
    /// function returned it, before the pullback runs.
    ///
    /// The call runs in a compile section, as [`Engine::grad_wrt_into`]'s.
    pub fn vjp_wrt_into(
        &mut self,
        f: FuncId,
        args: &[Value],
        seed: &Value,
        wrt: &[bool],
        out: &mut Vjp,
    ) -> Result<(), AdError> {
        crate::error::section(|| {
            let arrays = self.raw_args(f, args)?;
            let func = self.module.func(f);
            let ret = match (&func.ret, seed) {
                (RetType::One(Type::F64), Value::F64(_)) => Type::F64,
                (RetType::One(Type::Arr), Value::Arr(_)) => Type::Arr,
                (RetType::One(t), _) if t.is_differentiable() => {
                    return Err(AdError::Args(format!(
                        "@{} returns {t}: its seed must be {}",
                        func.name,
                        if *t == Type::F64 {
                            "a number"
                        } else {
                            "an array"
                        }
                    )))
                }
                (r, _) => {
                    return Err(AdError::NotDifferentiable(format!(
                        "@{} returns {}, not f64 or f64[]",
                        func.name,
                        crate::ret_text(r)
                    )))
                }
            };
            let d = self.derive_any(f, wrt)?;
            self.vm.begin(true);
            self.place_arrays(args, arrays)?;
            self.vm.call_raw(&self.program, d.fwd, &self.raw)?;
            let bits = self.vm.results().first().copied().unwrap_or(0);
            match (ret, seed) {
                (Type::F64, Value::F64(s)) => {
                    out.value = Value::F64(f64::from_bits(bits));
                    self.vm.call_raw(&self.program, d.rev, &[s.to_bits()])?;
                }
                (_, Value::Arr(s)) => {
                    let value = self.vm.array(bits).unwrap_or(&[]);
                    match &mut out.value {
                        Value::Arr(v) => {
                            v.clear();
                            v.extend_from_slice(value);
                        }
                        slot => *slot = Value::Arr(value.to_vec()),
                    }
                    let name = &self.module.func(f).name;
                    let Some(shadow) = self.vm.shadow_mut(bits) else {
                        return Err(AdError::Internal(format!(
                            "the result of @{name} has no shadow array"
                        )));
                    };
                    if shadow.len() != s.len() {
                        return Err(AdError::Args(format!(
                            "the seed has {} element(s), but @{name} returned {}",
                            s.len(),
                            shadow.len()
                        )));
                    }
                    for (c, x) in shadow.iter_mut().zip(s) {
                        *c += x;
                    }
                    self.vm.call_raw(&self.program, d.rev, &[])?;
                }
                _ => return Err(AdError::Internal("a seed of the wrong kind".into())),
            }
            if self.vm.comms_len() != 0 || self.vm.blk_len() != 0 {
                return Err(AdError::Internal(format!(
                    "stacks not empty after the pullback of @{}",
                    self.module.func(f).name
                )));
            }
            self.read_gradient(args, wrt, &mut out.grad)
        })
    }

    /// The value and the dense Jacobian of `f` at `args` with respect to
    /// every `f64` and `f64[]` parameter (see [`Jacobian`]).
    pub fn jacobian(&mut self, f: FuncId, args: &[Value]) -> Result<Jacobian, AdError> {
        let wrt = self.take_full_mask(f)?;
        let result = self.jacobian_wrt(f, args, &wrt);
        self.full_masks[f.index()] = wrt;
        result
    }

    /// [`Engine::jacobian`] with respect to the parameters selected by
    /// `wrt`: one forward-mode run per flattened input, along its unit
    /// direction.
    pub fn jacobian_wrt(
        &mut self,
        f: FuncId,
        args: &[Value],
        wrt: &[bool],
    ) -> Result<Jacobian, AdError> {
        let func = self.user_func(f)?;
        if !matches!(func.ret, RetType::One(Type::F64 | Type::Arr)) {
            return Err(AdError::NotDifferentiable(format!(
                "@{} returns {}, not f64 or f64[]",
                func.name,
                crate::ret_text(&func.ret)
            )));
        }
        // Zero directions of the arguments' shapes, for the selected ones.
        let mut dir: Vec<Option<Value>> = args
            .iter()
            .zip(wrt.iter().chain(std::iter::repeat(&false)))
            .map(|(a, w)| match a {
                Value::F64(_) if *w => Some(Value::F64(0.0)),
                Value::Arr(xs) if *w => Some(Value::Arr(vec![0.0; xs.len()])),
                _ => None,
            })
            .collect();
        let mut t = Tangent::default();
        // The value, and a check of everything, before the columns.
        self.jvp_wrt_into(f, args, &dir, wrt, &mut t)?;
        let value = t.value.clone();
        let mut columns: Vec<Vec<f64>> = Vec::new();
        for i in 0..dir.len() {
            let n = match &dir[i] {
                Some(Value::F64(_)) => 1,
                Some(Value::Arr(xs)) => xs.len(),
                _ => 0,
            };
            for j in 0..n {
                set_unit(&mut dir[i], j, 1.0);
                let r = self.jvp_wrt_into(f, args, &dir, wrt, &mut t);
                set_unit(&mut dir[i], j, 0.0);
                r?;
                columns.push(match &t.tangent {
                    Some(Value::F64(x)) => vec![*x],
                    Some(Value::Arr(xs)) => xs.clone(),
                    _ => Vec::new(),
                });
            }
        }
        let rows = match &value {
            Value::Arr(xs) => xs.len(),
            _ => 1,
        };
        let jacobian = (0..rows)
            .map(|r| {
                columns
                    .iter()
                    .map(|c| c.get(r).copied().unwrap_or(0.0))
                    .collect()
            })
            .collect();
        Ok(Jacobian { value, jacobian })
    }
}

/// Set entry `j` of a direction (element `j` of an array, or the number).
fn set_unit(d: &mut Option<Value>, j: usize, x: f64) {
    match d {
        Some(Value::F64(v)) => *v = x,
        Some(Value::Arr(xs)) => {
            if let Some(v) = xs.get_mut(j) {
                *v = x;
            }
        }
        _ => {}
    }
}
