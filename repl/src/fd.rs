//! The gradient check of `advm check`: the AD gradient against central
//! finite differences.
//!
//! The corpus test (`repl/tests/corpus.rs`) calls the same [`compare`], so a
//! `; check:` directive means exactly what `advm check` reports.
//!
//! For every f64 parameter and every element of every f64[] parameter at
//! the point `x`, the quotient `(f(x + h) - f(x - h)) / 2h` with
//! `h = STEP * max(1, |x|)` is compared with the AD entry `ad`; they agree
//! when `|ad - fd| <= TOLERANCE * max(1, |ad|, |fd|)` (or both are nan, or
//! both are the same infinity). The central quotient's error is about
//! `h² f'''/6` from truncation plus `ε |f| / h` from rounding: near 1e-10
//! relative for well-scaled functions, far below the tolerance. A point on
//! a kink (a branch flip or `abs` at 0 within `h`) is not differentiable
//! there and can disagree; choose points away from them.

use vm::Value;

/// Relative tolerance: `|ad - fd| <= TOLERANCE * max(1, |ad|, |fd|)`.
pub const TOLERANCE: f64 = 1e-5;

/// Relative step: `h = STEP * max(1, |x|)`.
pub const STEP: f64 = 1e-6;

/// The rule, as printed by `advm check`.
pub const RULE: &str = "|ad - fd| <= 1e-5 * max(1, |ad|, |fd|); \
                        central differences with h = 1e-6 * max(1, |x|)";

/// One compared gradient entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Index of the parameter.
    pub param: usize,
    /// Element index, for an f64[] parameter.
    pub element: Option<usize>,
    /// `x` or `v[2]`.
    pub name: String,
    /// The AD gradient entry.
    pub ad: f64,
    /// The central difference quotient.
    pub fd: f64,
    /// Whether they agree within the tolerance.
    pub ok: bool,
}

/// The finite-difference step at `x`.
pub fn step(x: f64) -> f64 {
    STEP * x.abs().max(1.0)
}

/// Whether an AD entry and a difference quotient agree.
pub fn agree(ad: f64, fd: f64) -> bool {
    if ad.is_nan() || fd.is_nan() {
        return ad.is_nan() && fd.is_nan();
    }
    if ad.is_infinite() || fd.is_infinite() {
        return ad == fd;
    }
    ad == fd || (ad - fd).abs() <= TOLERANCE * 1f64.max(ad.abs()).max(fd.abs())
}

/// Compare `grad` (one entry per argument, as `ad::Gradient::grad`: `None`
/// for i64/bool parameters) with central differences of `eval` at `args`.
///
/// `eval` runs the function on a modified copy of the arguments; its error
/// (a trap) ends the comparison. `names` are the parameter names (missing
/// ones print as `argN`). Entries come in parameter order, then element
/// order. A gradient entry whose shape does not match its argument is
/// skipped (the engine never produces one).
pub fn compare<E>(
    args: &[Value],
    grad: &[Option<Value>],
    names: &[String],
    mut eval: impl FnMut(&[Value], &str) -> Result<f64, E>,
) -> Result<Vec<Entry>, E> {
    let mut out = Vec::new();
    let mut probe = args.to_vec();
    for (i, arg) in args.iter().enumerate() {
        let points: Vec<(Option<usize>, f64, f64)> = match (arg, grad.get(i)) {
            (Value::F64(x), Some(Some(Value::F64(d)))) => vec![(None, *x, *d)],
            (Value::Arr(xs), Some(Some(Value::Arr(ds)))) if xs.len() == ds.len() => xs
                .iter()
                .zip(ds)
                .enumerate()
                .map(|(j, (x, d))| (Some(j), *x, *d))
                .collect(),
            _ => continue,
        };
        let base = names.get(i).cloned().unwrap_or_else(|| format!("arg{i}"));
        for (j, x, ad) in points {
            let h = step(x);
            let name = match j {
                Some(j) => format!("{base}[{j}]"),
                None => base.clone(),
            };
            set(&mut probe[i], j, x + h);
            let up = eval(&probe, &format!("{name} = {} (x + h)", x + h))?;
            set(&mut probe[i], j, x - h);
            let down = eval(&probe, &format!("{name} = {} (x - h)", x - h))?;
            set(&mut probe[i], j, x);
            // The step as represented: (x + h) - (x - h) may differ from 2h
            // in the last bits; dividing by it removes that error.
            let fd = (up - down) / ((x + h) - (x - h));
            out.push(Entry {
                param: i,
                element: j,
                name,
                ad,
                fd,
                ok: agree(ad, fd),
            });
        }
    }
    Ok(out)
}

/// The direction `advm check` compares the forward-mode tangent along:
/// `max(1, |x|)` for every input `wrt` selects (the same scale as each
/// entry's step), none for the others. The tangent along it is then
/// compared with [`directional`].
pub fn check_direction(args: &[Value], wrt: &[bool]) -> Vec<Option<Value>> {
    args.iter()
        .zip(wrt.iter().chain(std::iter::repeat(&false)))
        .map(|(a, w)| match a {
            Value::F64(x) if *w => Some(Value::F64(x.abs().max(1.0))),
            Value::Arr(xs) if *w => Some(Value::Arr(xs.iter().map(|x| x.abs().max(1.0)).collect())),
            _ => None,
        })
        .collect()
}

/// The central difference of `eval` at `args` along `dir`: `(f(x + h d)
/// - f(x - h d)) / 2h` with `h = STEP`, so that each input moves by its
/// own step when `dir` is [`check_direction`]'s. `eval` as for
/// [`compare`].
pub fn directional<E>(
    args: &[Value],
    dir: &[Option<Value>],
    mut eval: impl FnMut(&[Value], &str) -> Result<f64, E>,
) -> Result<f64, E> {
    let along = |t: f64| -> Vec<Value> {
        args.iter()
            .zip(dir.iter().chain(std::iter::repeat(&None)))
            .map(|(a, d)| match (a, d) {
                (Value::F64(x), Some(Value::F64(dx))) => Value::F64(x + t * dx),
                (Value::Arr(xs), Some(Value::Arr(ds))) => {
                    Value::Arr(xs.iter().zip(ds).map(|(x, dx)| x + t * dx).collect())
                }
                (a, _) => a.clone(),
            })
            .collect()
    };
    let up = eval(&along(STEP), "every input moved by +h along the direction")?;
    let down = eval(&along(-STEP), "every input moved by -h along the direction")?;
    Ok((up - down) / (2.0 * STEP))
}

/// Second order (`advm check --order 2`): the Hessian-vector product
/// `hvp` (shaped like a gradient) along `dir` against central differences
/// of the gradient along `dir`, `(∇f(x + h d) - ∇f(x - h d)) / 2h` with
/// `h = STEP`, entry by entry (named `H·d x`, `H·d v[2]`). `grad_at` gives
/// the gradient at a probe (its error ends the comparison).
pub fn hvp_rows<E>(
    args: &[Value],
    dir: &[Option<Value>],
    hvp: &[Option<Value>],
    names: &[String],
    mut grad_at: impl FnMut(&[Value], &str) -> Result<Vec<Option<Value>>, E>,
) -> Result<Vec<Entry>, E> {
    let along = |t: f64| -> Vec<Value> {
        args.iter()
            .zip(dir.iter().chain(std::iter::repeat(&None)))
            .map(|(a, d)| match (a, d) {
                (Value::F64(x), Some(Value::F64(dx))) => Value::F64(x + t * dx),
                (Value::Arr(xs), Some(Value::Arr(ds))) => {
                    Value::Arr(xs.iter().zip(ds).map(|(x, dx)| x + t * dx).collect())
                }
                (a, _) => a.clone(),
            })
            .collect()
    };
    let up = grad_at(&along(STEP), "every input moved by +h along the direction")?;
    let down = grad_at(&along(-STEP), "every input moved by -h along the direction")?;
    let mut out = Vec::new();
    for (i, h) in hvp.iter().enumerate() {
        let base = names.get(i).cloned().unwrap_or_else(|| format!("arg{i}"));
        let (u, d) = (up.get(i).cloned().flatten(), down.get(i).cloned().flatten());
        let entries: Vec<(Option<usize>, f64, f64, f64)> = match (h, u, d) {
            (Some(Value::F64(h)), Some(Value::F64(u)), Some(Value::F64(d))) => {
                vec![(None, *h, u, d)]
            }
            (Some(Value::Arr(hs)), Some(Value::Arr(us)), Some(Value::Arr(ds))) => hs
                .iter()
                .zip(us.iter().zip(&ds))
                .enumerate()
                .map(|(j, (h, (u, d)))| (Some(j), *h, *u, *d))
                .collect(),
            _ => continue,
        };
        for (j, ad, u, d) in entries {
            let fd = (u - d) / (2.0 * STEP);
            out.push(Entry {
                param: i,
                element: j,
                name: match j {
                    Some(j) => format!("H·d {base}[{j}]"),
                    None => format!("H·d {base}"),
                },
                ad,
                fd,
                ok: agree(ad, fd),
            });
        }
    }
    Ok(out)
}

fn set(v: &mut Value, element: Option<usize>, x: f64) {
    match (v, element) {
        (Value::F64(y), None) => *y = x,
        (Value::Arr(ys), Some(j)) => {
            if let Some(y) = ys.get_mut(j) {
                *y = x;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(a: &[Value]) -> Result<f64, ()> {
        match a {
            [Value::F64(x), Value::I64(n), Value::Arr(v)] => Ok(x.powi(*n as i32) + v[0] * v[1]),
            _ => Err(()),
        }
    }

    #[test]
    fn exact_gradient_agrees_and_wrong_one_does_not() {
        let args = [Value::F64(1.5), Value::I64(3), Value::Arr(vec![2.0, -4.0])];
        let good = [
            Some(Value::F64(3.0 * 1.5 * 1.5)),
            None,
            Some(Value::Arr(vec![-4.0, 2.0])),
        ];
        let names = ["x".to_string(), "n".to_string(), "v".to_string()];
        let rows = compare(&args, &good, &names, |a, _| f(a)).expect("evaluates");
        let shown: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(shown, ["x", "v[0]", "v[1]"]);
        assert!(rows.iter().all(|r| r.ok), "{rows:?}");
        let bad = [
            Some(Value::F64(6.75 * 1.001)),
            None,
            Some(Value::Arr(vec![-4.0, 2.0])),
        ];
        let rows = compare(&args, &bad, &names[..1], |a, _| f(a)).expect("evaluates");
        assert!(!rows[0].ok && rows[1].ok && rows[1].name == "arg2[0]");
    }

    #[test]
    fn traps_end_the_comparison() {
        let r = compare(
            &[Value::F64(1.0)],
            &[Some(Value::F64(1.0))],
            &[],
            |_, at| Err::<f64, _>(format!("trap with {at}")),
        );
        assert_eq!(
            r,
            Err(format!("trap with arg0 = {} (x + h)", 1.0 + step(1.0)))
        );
    }

    #[test]
    fn directional_differences_are_tangents() {
        let args = [Value::F64(1.5), Value::I64(3), Value::Arr(vec![2.0, -4.0])];
        let dir = check_direction(&args, &[true, false, true]);
        assert_eq!(
            dir,
            vec![
                Some(Value::F64(1.5)),
                None,
                Some(Value::Arr(vec![2.0, 4.0]))
            ]
        );
        // ∇f·d = 3·1.5²·1.5 + (-4)·2 + 2·4
        let want = 3.0 * 1.5 * 1.5 * 1.5 - 8.0 + 8.0;
        let fd = directional(&args, &dir, |a, _| f(a)).expect("evaluates");
        assert!(
            agree(want, fd) && !agree(want * 1.001, fd),
            "{fd} vs {want}"
        );
        // Only x selected: only x moves.
        let dir = check_direction(&args, &[true]);
        let fd = directional(&args, &dir, |a, _| f(a)).expect("evaluates");
        assert!(agree(3.0 * 1.5 * 1.5 * 1.5, fd), "{fd}");
    }

    #[test]
    fn hvp_rows_are_differences_of_gradients() {
        // f = x³ + v0·v1: ∇f = (3x², v1, v0), H·d = (6x·dx, dv1, dv0).
        let grad = |a: &[Value]| match a {
            [Value::F64(x), Value::Arr(v)] => vec![
                Some(Value::F64(3.0 * x * x)),
                Some(Value::Arr(vec![v[1], v[0]])),
            ],
            _ => Vec::new(),
        };
        let args = [Value::F64(1.5), Value::Arr(vec![2.0, -4.0])];
        let dir = check_direction(&args, &[true, true]);
        let good = [
            Some(Value::F64(6.0 * 1.5 * 1.5)),
            Some(Value::Arr(vec![4.0, 2.0])),
        ];
        let names = ["x".to_string(), "v".to_string()];
        let rows = hvp_rows(&args, &dir, &good, &names, |a, _| Ok::<_, ()>(grad(a))).expect("runs");
        let shown: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(shown, ["H·d x", "H·d v[0]", "H·d v[1]"]);
        assert!(rows.iter().all(|r| r.ok), "{rows:?}");
        let bad = [Some(Value::F64(13.5 * 1.001)), None];
        let rows = hvp_rows(&args, &dir, &bad, &names, |a, _| Ok::<_, ()>(grad(a))).expect("runs");
        assert_eq!(rows.len(), 1);
        assert!(!rows[0].ok, "{rows:?}");
    }

    #[test]
    fn agreement_rule() {
        assert!(agree(1.0, 1.0 + 5e-6));
        assert!(!agree(1.0, 1.0 + 2e-5));
        assert!(agree(1e6, 1e6 * (1.0 + 5e-6)));
        assert!(agree(1e-9, 2e-9));
        assert!(agree(f64::NAN, f64::NAN));
        assert!(!agree(f64::NAN, 0.0));
        assert!(agree(f64::INFINITY, f64::INFINITY));
        assert!(!agree(f64::INFINITY, 1e300));
    }
}
