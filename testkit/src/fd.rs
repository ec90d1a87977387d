//! Random directions for checking derivatives along them.
//!
//! The finite-difference checker itself is `ad::fd` (one for the CLI's
//! `advm check`, the corpus directives and the tests); with the `engine`
//! feature its [`check`], [`close`], [`along`], [`Verdict`] and
//! [`TOLERANCE`] are re-exported here, beside the random directions the
//! property tests add.

#[cfg(feature = "engine")]
pub use ad::fd::{along, check, close, Verdict, TOLERANCE};
use vm::Value;

/// A direction shaped like `args`: pseudo-random entries in [-1, 1) for
/// `f64` and `f64[]` arguments, `None` for the others.
pub fn random_dir(args: &[Value], rng: &mut crate::gen::Rng) -> Vec<Option<Value>> {
    args.iter()
        .map(|a| match a {
            Value::F64(_) => Some(Value::F64(rng.float(-1.0, 1.0))),
            Value::Arr(xs) => Some(Value::Arr(
                xs.iter().map(|_| rng.float(-1.0, 1.0)).collect(),
            )),
            Value::I64(_) | Value::Bool(_) => None,
        })
        .collect()
}

/// `g · d` over the flattened inputs (`None` counts as zero), and the sum
/// of the magnitudes of its terms (the scale its rounding error is
/// relative to).
pub fn dot(grad: &[Option<Value>], dir: &[Option<Value>]) -> (f64, f64) {
    let (mut s, mut m) = (0.0, 0.0);
    for (g, d) in grad.iter().zip(dir) {
        match (g, d) {
            (Some(Value::F64(g)), Some(Value::F64(d))) => {
                s += g * d;
                m += (g * d).abs();
            }
            (Some(Value::Arr(gs)), Some(Value::Arr(ds))) => {
                for (g, d) in gs.iter().zip(ds) {
                    s += g * d;
                    m += (g * d).abs();
                }
            }
            _ => {}
        }
    }
    (s, m)
}
