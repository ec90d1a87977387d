//! advm's four calls on a suite program, as `bench/benches/hvp.rs` times them:
//! the primal (`Engine::run`), the gradient (`grad_wrt_into`), the tangent
//! (`jvp_wrt_into`) and the Hessian-vector product (`hvp_wrt_into`), each
//! with respect to every f64 and f64[] parameter ([`Input::params`]) and
//! allocating nothing per call after warm-up. The direction is all ones
//! unless [`AdvmModes::set_dir`] sets another one. The engine is reachable
//! ([`AdvmModes::engine_mut`]) so that a bench can install the native tier.

use crate::Input;
use ad::{AdError, Engine, Gradient, Hvp, Tangent};
use vm::ir::FuncId;
use vm::Value;

/// One suite program in an [`Engine`], with its arguments, the mask of
/// every differentiable parameter, a direction and reusable outputs.
pub struct AdvmModes {
    engine: Engine,
    f: FuncId,
    args: Vec<Value>,
    wrt: Vec<bool>,
    dir: Vec<Option<Value>>,
    grad: Gradient,
    tangent: Tangent,
    hvp: Hvp,
}

impl AdvmModes {
    /// Load a suite case's program; the direction is all ones.
    pub fn from_case(case: &testkit::suite::Case) -> Result<AdvmModes, String> {
        let path = testkit::suite::path(case);
        let src = std::fs::read_to_string(testkit::workspace_root().join(&path))
            .map_err(|e| format!("{path}: {e}"))?;
        let module = assembler::assemble(&src, &path).map_err(|d| format!("{d}"))?;
        let engine = Engine::new(module).map_err(|e| e.to_string())?;
        let f = engine
            .find(case.func)
            .ok_or_else(|| format!("{path}: no function @{}", case.func))?;
        let wrt = ad::analysis::all_params(engine.module().func(f));
        let input = Input::from_case(case);
        let mut m = AdvmModes {
            engine,
            f,
            args: case.args.clone(),
            wrt,
            dir: Vec::new(),
            grad: Gradient::default(),
            tangent: Tangent::default(),
            hvp: Hvp::default(),
        };
        m.set_dir(&vec![1.0; input.params_len()]);
        Ok(m)
    }

    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Set the direction from one flattened over every f64 and f64[]
    /// argument in order (as [`crate::native::Native::jvp`] takes it).
    pub fn set_dir(&mut self, flat: &[f64]) {
        let mut at = 0;
        self.dir = self
            .args
            .iter()
            .map(|a| match a {
                Value::F64(_) => {
                    at += 1;
                    Some(Value::F64(flat[at - 1]))
                }
                Value::Arr(xs) => {
                    at += xs.len();
                    Some(Value::Arr(flat[at - xs.len()..at].to_vec()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(at, flat.len(), "direction length");
    }

    /// The value, by `Engine::run`.
    pub fn primal(&mut self) -> Result<f64, AdError> {
        match self.engine.run(self.f, &self.args)? {
            Value::F64(y) => Ok(y),
            other => Err(AdError::NotDifferentiable(format!(
                "returned {other:?}, not f64"
            ))),
        }
    }

    /// The value, by `grad_wrt_into`; the gradient in [`AdvmModes::flat_grad`].
    pub fn grad(&mut self) -> Result<f64, AdError> {
        self.engine
            .grad_wrt_into(self.f, &self.args, &self.wrt, &mut self.grad)?;
        Ok(self.grad.value)
    }

    /// The value and its derivative along the direction, by `jvp_wrt_into`.
    pub fn jvp(&mut self) -> Result<(f64, f64), AdError> {
        self.engine
            .jvp_wrt_into(self.f, &self.args, &self.dir, &self.wrt, &mut self.tangent)?;
        match (&self.tangent.value, &self.tangent.tangent) {
            (Value::F64(y), Some(Value::F64(dy))) => Ok((*y, *dy)),
            other => Err(AdError::NotDifferentiable(format!(
                "tangent call returned {other:?}"
            ))),
        }
    }

    /// The value, by `hvp_wrt_into`; the gradient and the product in
    /// [`AdvmModes::flat_hvp`].
    pub fn hvp(&mut self) -> Result<f64, AdError> {
        self.engine
            .hvp_wrt_into(self.f, &self.args, &self.dir, &self.wrt, &mut self.hvp)?;
        Ok(self.hvp.value)
    }

    /// The last [`AdvmModes::grad`]'s gradient, flattened in argument order.
    pub fn flat_grad(&self, g: &mut [f64]) {
        flatten(&self.grad.grad, g);
    }

    /// The last [`AdvmModes::hvp`]'s gradient and product, flattened.
    pub fn flat_hvp(&self, g: &mut [f64], hv: &mut [f64]) {
        flatten(&self.hvp.grad, g);
        flatten(&self.hvp.hvp, hv);
    }
}

/// `vals` (one entry per argument) flattened over its f64 and f64[]
/// entries into `out`.
fn flatten(vals: &[Option<Value>], out: &mut [f64]) {
    let mut at = 0;
    for v in vals.iter().flatten() {
        match v {
            Value::F64(x) => {
                out[at] = *x;
                at += 1;
            }
            Value::Arr(xs) => {
                out[at..at + xs.len()].copy_from_slice(xs);
                at += xs.len();
            }
            _ => {}
        }
    }
    assert_eq!(at, out.len(), "flattened length");
}

/// A direction over [`Input::params`] that is not all ones (so that a
/// product mixing up two parameters shows): `1 + 0.5 sin(0.7 i)`.
pub fn direction(input: &Input) -> Vec<f64> {
    (0..input.params_len())
        .map(|i| 1.0 + 0.5 * (0.7 * i as f64).sin())
        .collect()
}

/// Relative closeness of two vectors, element by element, with the
/// elements that cancel to rounding (logsumexp's winning element) judged
/// against the vector's largest: `|a - b| <= tol * max(|a|, |b|,
/// 1e-6 max|want|)`. The index and values of the first pair that is not.
pub fn vec_mismatch(got: &[f64], want: &[f64], tol: f64) -> Option<(usize, f64, f64)> {
    if got.len() != want.len() {
        return Some((got.len().min(want.len()), f64::NAN, f64::NAN));
    }
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs())) * 1e-6;
    got.iter()
        .zip(want)
        .enumerate()
        .find(|(_, (a, b))| {
            let diff = (*a - *b).abs();
            diff.is_nan() || diff > tol * a.abs().max(b.abs()).max(scale)
        })
        .map(|(i, (a, b))| (i, *a, *b))
}

/// Run advm's tangent and HVP, the native tangent and HVP (and with the
/// `peers` feature echidna's dual numbers and HVP) of `case` along
/// `dir`, twice each where buffers are reused, and check that they agree:
/// values to 1e-12 (1e-9 for echidna, whose `tanh` and `ln` may round
/// otherwise), tangents, gradients and products to 1e-8; and advm's
/// gradient over every parameter against the native HVP's. The benches
/// call this before timing anything.
pub fn check_modes(case: &testkit::suite::Case, dir: &[f64]) -> Result<(), String> {
    const VALUE: f64 = 1e-12;
    const DERIV: f64 = 1e-8;
    let name = case.file;
    let input = Input::from_case(case);
    let len = input.params_len();
    let mut native = crate::native::Native::new();
    let primal = native.primal(&input);
    let (y, dy) = native.jvp(&input, dir);
    let (mut g, mut hv) = (vec![f64::NAN; len], vec![f64::NAN; len]);
    let yh = native.hvp(&input, dir, &mut g, &mut hv);
    let close = |what: &str, a: f64, b: f64, tol: f64| {
        if crate::close(a, b, tol) {
            Ok(())
        } else {
            Err(format!("{name}: {what}: {a:e} vs native {b:e}"))
        }
    };
    let vec_close = |what: &str, a: &[f64], b: &[f64]| match vec_mismatch(a, b, DERIV) {
        None => Ok(()),
        Some((i, x, y)) => Err(format!("{name}: {what}[{i}] = {x:e} vs native {y:e}")),
    };
    close("native tangent's value", y, primal, VALUE)?;
    close("native hvp's value", yh, primal, VALUE)?;
    let gdir: f64 = g.iter().zip(dir).map(|(a, b)| a * b).sum();
    close("native hvp's gradient . dir", gdir, dy, DERIV)?;
    let (mut g2, mut hv2) = (vec![f64::NAN; len], vec![f64::NAN; len]);
    native.hvp(&input, dir, &mut g2, &mut hv2);
    if (&g2, &hv2) != (&g, &hv) {
        return Err(format!("{name}: native hvp not repeatable"));
    }
    let mut a = AdvmModes::from_case(case)?;
    a.set_dir(dir);
    let err = |what: &str, e: AdError| format!("{name}: advm {what}: {e}");
    for _ in 0..2 {
        let (ay, ady) = a.jvp().map_err(|e| err("jvp", e))?;
        close("advm jvp value", ay, primal, VALUE)?;
        close("advm jvp tangent", ady, dy, DERIV)?;
        let ay = a.grad().map_err(|e| err("grad", e))?;
        close("advm grad value", ay, primal, VALUE)?;
        let mut ag = vec![f64::NAN; len];
        a.flat_grad(&mut ag);
        vec_close("advm gradient", &ag, &g)?;
        let ay = a.hvp().map_err(|e| err("hvp", e))?;
        close("advm hvp value", ay, primal, VALUE)?;
        let mut ahv = vec![f64::NAN; len];
        a.flat_hvp(&mut ag, &mut ahv);
        vec_close("advm hvp gradient", &ag, &g)?;
        vec_close("advm hvp", &ahv, &hv)?;
    }
    #[cfg(feature = "peers")]
    {
        const VALUE_LOOSE: f64 = 1e-9;
        let mut d = crate::peers::EchidnaDual::new(&input);
        let mut h = crate::peers::EchidnaHvp::new(&input);
        for _ in 0..2 {
            let (ey, edy) = d.jvp(dir);
            close("echidna dual value", ey, primal, VALUE_LOOSE)?;
            close("echidna dual tangent", edy, dy, DERIV)?;
            let (mut eg, mut ehv) = (vec![f64::NAN; len], vec![f64::NAN; len]);
            let ey = h.hvp(dir, &mut eg, &mut ehv);
            close("echidna hvp value", ey, primal, VALUE_LOOSE)?;
            vec_close("echidna hvp gradient", &eg, &g)?;
            vec_close("echidna hvp", &ehv, &hv)?;
        }
    }
    Ok(())
}
