//! Central finite differences, for checking AD gradients.

use vm::Value;

/// The outcome of comparing an AD gradient with finite differences.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Every entry agrees.
    Agree,
    /// Some difference quotient was unreliable (the two step sizes disagree
    /// with each other: a kink, a branch flip or an overflow nearby), and no
    /// entry disagreed where the quotients were reliable.
    Unreliable(String),
    /// An entry disagrees where finite differences are reliable.
    Disagree(String),
}

/// Relative tolerance used to compare AD and finite differences.
pub const TOLERANCE: f64 = 1e-5;

/// Compare `grad` (one entry per argument, as `ad::Gradient::grad`) with
/// central differences of `f` at `args`, using steps `h` and `h / 8` per
/// entry. `f` returns `None` when evaluation fails (a trap).
pub fn check(
    mut f: impl FnMut(&[Value]) -> Option<f64>,
    args: &[Value],
    grad: &[Option<Value>],
) -> Verdict {
    let mut unreliable = None;
    let mut probe = args.to_vec();
    for (i, arg) in args.iter().enumerate() {
        let entries: Vec<(Option<usize>, f64, f64)> = match (arg, grad.get(i)) {
            (Value::F64(x), Some(Some(Value::F64(g)))) => vec![(None, *x, *g)],
            (Value::Arr(xs), Some(Some(Value::Arr(gs)))) => xs
                .iter()
                .zip(gs)
                .enumerate()
                .map(|(j, (x, g))| (Some(j), *x, *g))
                .collect(),
            _ => continue,
        };
        for (j, x, g) in entries {
            let mut at = |v: f64| {
                set(&mut probe[i], j, v);
                let y = f(&probe);
                set(&mut probe[i], j, x);
                y
            };
            let h = 1e-5 * x.abs().max(1.0);
            let name = match j {
                Some(j) => format!("argument {i}[{j}]"),
                None => format!("argument {i}"),
            };
            let points = [x + h, x - h, x + h / 8.0, x - h / 8.0, x];
            let ys: Option<Vec<f64>> = points.iter().map(|p| at(*p)).collect();
            let Some(ys) = ys else {
                unreliable = Some(format!("{name}: evaluation trapped near the point"));
                continue;
            };
            let d1 = (ys[0] - ys[1]) / (2.0 * h);
            let d2 = (ys[2] - ys[3]) / (h / 4.0);
            // One-sided quotients reveal a kink at the point (abs at 0, a
            // branch on `x > 0` at 0), where the central quotient is no
            // derivative at all. For a smooth function their difference
            // shrinks with the step (by 8 here); at a kink it does not.
            let gap = |step: f64, up: f64, down: f64| ((up - ys[4]) - (ys[4] - down)) / step;
            let (gap_h, gap_h8) = (gap(h, ys[0], ys[1]), gap(h / 8.0, ys[2], ys[3]));
            let kink = gap_h8.abs() > 1e-4 * d2.abs().max(1.0) && gap_h8.abs() > 0.5 * gap_h.abs();
            if !close(d1, d2, 1e-4) || kink {
                unreliable = Some(format!(
                    "{name}: quotients {d1} and {d2}, one-sided gaps {gap_h} and {gap_h8}"
                ));
                continue;
            }
            if !close(g, d2, TOLERANCE) && !close(g, d1, TOLERANCE) {
                return Verdict::Disagree(format!(
                    "{name}: AD {g}, finite differences {d2} (h/8), {d1} (h)"
                ));
            }
        }
    }
    match unreliable {
        Some(why) => Verdict::Unreliable(why),
        None => Verdict::Agree,
    }
}

/// `|a - b| <= tol * max(1, |a|, |b|)`, with nan equal to nan.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    (a - b).abs() <= tol * 1f64.max(a.abs()).max(b.abs())
}

fn set(v: &mut Value, j: Option<usize>, x: f64) {
    match (v, j) {
        (Value::F64(y), None) => *y = x,
        (Value::Arr(ys), Some(j)) => {
            if let Some(y) = ys.get_mut(j) {
                *y = x;
            }
        }
        _ => {}
    }
}

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

/// `args + t·dir`.
pub fn along(args: &[Value], dir: &[Option<Value>], t: f64) -> Vec<Value> {
    args.iter()
        .zip(dir)
        .map(|(a, d)| match (a, d) {
            (Value::F64(x), Some(Value::F64(dx))) => Value::F64(x + t * dx),
            (Value::Arr(xs), Some(Value::Arr(ds))) => {
                Value::Arr(xs.iter().zip(ds).map(|(x, dx)| x + t * dx).collect())
            }
            (a, _) => a.clone(),
        })
        .collect()
}
