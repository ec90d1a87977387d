//! # fd: AD derivatives against central finite differences
//!
//! The one finite-difference checker of the project: `advm check` (the
//! CLI re-exports this module as `advm::fd`), the corpus's `; check:`
//! directives (`repl/tests/it/corpus.rs` calls the same [`compare`], so a
//! directive means exactly what `advm check` reports) and the property
//! tests (through `testkit::fd`, which adds only random directions) all
//! compare with the code below.
//!
//! **Per entry** ([`compare`]): for every f64 parameter and every element of
//! every f64[] parameter at the point `x`, the quotient `(f(x + h) - f(x -
//! h)) / 2h` with `h = `[`step`]`(x)` (relative step [`STEP`] `= 1e-6`) is
//! compared with the AD entry `ad`;
//! they agree when `|ad - fd| <= TOLERANCE * max(1, |ad|, |fd|) + noise`
//! (or both are nan, or both are the same infinity), where `noise =
//! ROUNDING * eps * max(|f(x + h)|, |f(x - h)|) / h` bounds what rounding
//! in `f` does to the quotient. The central quotient's error is about `h²
//! f'''/6` from truncation plus `eps |f| / h` from rounding: near 1e-10
//! relative for well-scaled functions, far below the tolerance. A point on
//! a kink (a branch flip or `abs` at 0 within `h`) is not differentiable
//! there and can disagree; choose points away from them. Two runs per
//! entry: quadratic in the input's size.
//!
//! **Along directions** ([`compare_directions`], what `advm check` does
//! when more than [`FULL_MAX`] entries are differentiated, unless `--full`;
//! as JAX's `check_grads`): for each of a few pseudo-random directions `v`
//! (seeded, so the same every run; `v_i = ±max(1, |x_i|)`, at most
//! `|x_i| / (1000 eta)`, signs random), the AD directional derivative `Σ
//! ad_i v_i` is compared with `(f(x + eta v) - f(x - eta v)) / 2 eta`, `eta
//! = DIRECTION_STEP`, by the same rule. Two runs per direction whatever
//! the size. A wrong entry `i` shows in every direction (its error times
//! `|v_i| >= 1`) unless that is within the tolerance, `1e-5` times the
//! directional derivative (which grows like the square root of the number
//! of entries): an entry off by 1 among 10^5 entries of order 1 is caught,
//! one off by 0.01 is not (`--full` finds it, in two runs per entry).
//!
//! **At points nobody chose** ([`check`], for property tests at random
//! points, which may sit on a kink or a branch flip): two central
//! quotients per entry, with steps `h = 1e-5 * max(1, |x|)` and `h / 8`,
//! and the one-sided gaps of each. Where the two quotients disagree with
//! each other, or the gap does not shrink with the step (a kink), the entry
//! is [`Verdict::Unreliable`] rather than a failure; elsewhere the AD entry
//! must be [`close`] to either quotient within [`TOLERANCE`], or the
//! verdict is [`Verdict::Disagree`].

use vm::Value;

/// Relative tolerance: `|ad - fd| <= TOLERANCE * max(1, |ad|, |fd|) + noise`.
pub const TOLERANCE: f64 = 1e-5;

/// Relative step: `h = STEP * max(1, |x|)`, at most `|x| / 1000` (see
/// [`step`]).
pub const STEP: f64 = 1e-6;

/// Ulps of rounding error allowed in each value of `f` (the `noise` term).
pub const ROUNDING: f64 = 8.0;

/// Above this many differentiated entries `advm check` compares along
/// [`DIRECTIONS`] random directions instead of entry by entry.
pub const FULL_MAX: usize = 64;

/// How many directions [`compare_directions`] checks by default.
pub const DIRECTIONS: usize = 4;

/// The step along a direction: larger than [`STEP`], as `f` sums many
/// entries' changes and its rounding error grows with its size.
pub const DIRECTION_STEP: f64 = 1e-4;

/// The seed of the directions.
pub const SEED: u64 = 0x5eed_adc4_ec50_0001;

/// The rule, as printed by `advm check`.
pub const RULE: &str = "|ad - fd| <= 1e-5 * max(1, |ad|, |fd|) + 8 eps max|f(x ± h)| / h; \
                        central differences with h = 1e-6 * max(1, |x|), at most |x| / 1000";

/// One compared gradient entry, or one direction.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Index of the parameter (0 for a direction).
    pub param: usize,
    /// Element index, for an f64[] parameter.
    pub element: Option<usize>,
    /// `x` or `v[2]`, or `direction 1`.
    pub name: String,
    /// The AD gradient entry (the directional derivative, for a direction).
    pub ad: f64,
    /// The central difference quotient.
    pub fd: f64,
    /// Whether they agree within the tolerance.
    pub ok: bool,
}

/// The finite-difference step at `x`: `STEP * max(1, |x|)`, but at most
/// `|x| / 1000` when `x` is not 0, so that `x ± h` stay close to `x` and
/// on its side of 0 (at `x = 1e-6`, `log` and `sqrt` are still defined at
/// `x - h`, and the quotient is accurate).
pub fn step(x: f64) -> f64 {
    step_of(x, STEP)
}

/// `eta * max(1, |x|)`, at most `|x| / 1000` when `x` is not 0.
fn step_of(x: f64, eta: f64) -> f64 {
    let h = eta * x.abs().max(1.0);
    if x != 0.0 && x.is_finite() {
        h.min(x.abs() * 1e-3)
    } else {
        h
    }
}

/// Whether an AD entry and a difference quotient agree (no rounding term).
pub fn agree(ad: f64, fd: f64) -> bool {
    agree_within(ad, fd, 0.0)
}

/// Whether an AD entry and a difference quotient agree, allowing `noise`
/// more (the quotient's rounding error bound).
pub fn agree_within(ad: f64, fd: f64, noise: f64) -> bool {
    if ad.is_nan() || fd.is_nan() {
        return ad.is_nan() && fd.is_nan();
    }
    if ad.is_infinite() || fd.is_infinite() {
        return ad == fd;
    }
    let noise = if noise.is_finite() { noise } else { 0.0 };
    ad == fd || (ad - fd).abs() <= TOLERANCE * 1f64.max(ad.abs()).max(fd.abs()) + noise
}

/// The rounding bound of a central quotient of `up` and `down` over a
/// step of `width` (`2h`).
fn noise(up: f64, down: f64, width: f64) -> f64 {
    ROUNDING * f64::EPSILON * up.abs().max(down.abs()) / (width / 2.0).abs()
}

/// How many gradient entries [`compare`] would compare: f64 parameters
/// with a gradient, and elements of f64[] ones.
pub fn entries(args: &[Value], grad: &[Option<Value>]) -> usize {
    args.iter()
        .zip(grad)
        .map(|(a, g)| match (a, g) {
            (Value::F64(_), Some(Value::F64(_))) => 1,
            (Value::Arr(xs), Some(Value::Arr(ds))) if xs.len() == ds.len() => xs.len(),
            _ => 0,
        })
        .sum()
}

/// A small deterministic generator (splitmix64) for the directions.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Compare `grad` with central differences of `eval` at `args` along
/// `directions` pseudo-random directions chosen by `seed` (see the module
/// documentation): one [`Entry`] per direction, named `direction K`.
/// `eval` and its errors as for [`compare`].
pub fn compare_directions<E>(
    args: &[Value],
    grad: &[Option<Value>],
    directions: usize,
    seed: u64,
    mut eval: impl FnMut(&[Value], &str) -> Result<f64, E>,
) -> Result<Vec<Entry>, E> {
    let mut out = Vec::new();
    let mut up = args.to_vec();
    let mut down = args.to_vec();
    for k in 0..directions {
        let mut rng = SplitMix(seed ^ (k as u64).wrapping_mul(0xa076_1d64_78bd_642f));
        let mut ad = 0.0;
        for (i, arg) in args.iter().enumerate() {
            let mut one = |x: f64, d: f64, j: Option<usize>| {
                let h = step_of(x, DIRECTION_STEP);
                let h = if rng.next() >> 63 == 0 { h } else { -h };
                // The direction's entry is h / DIRECTION_STEP; its product
                // with the gradient entry is what the quotient
                // approximates.
                ad += d * (h / DIRECTION_STEP);
                set(&mut up[i], j, x + h);
                set(&mut down[i], j, x - h);
            };
            match (arg, grad.get(i)) {
                (Value::F64(x), Some(Some(Value::F64(d)))) => one(*x, *d, None),
                (Value::Arr(xs), Some(Some(Value::Arr(ds)))) if xs.len() == ds.len() => {
                    for (j, (x, d)) in xs.iter().zip(ds).enumerate() {
                        one(*x, *d, Some(j));
                    }
                }
                _ => {}
            }
        }
        let name = format!("direction {}", k + 1);
        let fu = eval(&up, &format!("x + h·v along {name}"))?;
        let fdn = eval(&down, &format!("x - h·v along {name}"))?;
        let fd = (fu - fdn) / (2.0 * DIRECTION_STEP);
        out.push(Entry {
            param: 0,
            element: None,
            name,
            ad,
            fd,
            ok: agree_within(ad, fd, noise(fu, fdn, 2.0 * DIRECTION_STEP)),
        });
        up.clone_from_slice(args);
        down.clone_from_slice(args);
    }
    Ok(out)
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
            let width = (x + h) - (x - h);
            let fd = (up - down) / width;
            out.push(Entry {
                param: i,
                element: j,
                name,
                ad,
                fd,
                ok: agree_within(ad, fd, noise(up, down, width)),
            });
        }
    }
    Ok(out)
}

/// The direction `advm check` compares the forward-mode tangent along:
/// `step(x) / STEP` for every input `wrt` selects, so that a move by
/// `STEP` along it moves each input by its own step ([`step`], relative to
/// its size, small for a small input), none for the others. The tangent
/// along it is then compared with [`directional`].
pub fn check_direction(args: &[Value], wrt: &[bool]) -> Vec<Option<Value>> {
    args.iter()
        .zip(wrt.iter().chain(std::iter::repeat(&false)))
        .map(|(a, w)| match a {
            Value::F64(x) if *w => Some(Value::F64(step(*x) / STEP)),
            Value::Arr(xs) if *w => Some(Value::Arr(xs.iter().map(|x| step(*x) / STEP).collect())),
            _ => None,
        })
        .collect()
}

/// `args + t·dir`, entry by entry (arguments past `dir`'s end, and those
/// it leaves `None`, unmoved).
pub fn along(args: &[Value], dir: &[Option<Value>], t: f64) -> Vec<Value> {
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
    let up = eval(
        &along(args, dir, STEP),
        "every input moved by +h along the direction",
    )?;
    let down = eval(
        &along(args, dir, -STEP),
        "every input moved by -h along the direction",
    )?;
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
    let up = grad_at(
        &along(args, dir, STEP),
        "every input moved by +h along the direction",
    )?;
    let down = grad_at(
        &along(args, dir, -STEP),
        "every input moved by -h along the direction",
    )?;
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

// ---- the check at random points ---------------------------------------------

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

/// Compare `grad` (one entry per argument, as [`crate::Gradient::grad`])
/// with central differences of `f` at `args`, using steps `h` and `h / 8`
/// per entry (see the module documentation). `f` returns `None` when
/// evaluation fails (a trap).
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
    fn the_step_stays_on_the_side_of_a_small_input() {
        assert_eq!(step(0.0), STEP);
        assert_eq!(step(0.5), STEP);
        assert_eq!(step(-3.0), 3.0 * STEP);
        let h = step(1e-6);
        assert!(h > 0.0 && h <= 1e-9, "{h}");
        // log and sqrt at 1e-6, and a large constant added: no false
        // failure.
        type Case = (fn(f64) -> f64, f64);
        let cases: [Case; 3] = [
            (f64::ln, 1e6),
            (f64::sqrt, 0.5 / 1e-3),
            (|x| x + 1000.0, 1.0),
        ];
        for (f, d) in cases {
            let rows = compare(
                &[Value::F64(1e-6)],
                &[Some(Value::F64(d))],
                &[],
                |a, _| match a {
                    [Value::F64(x)] => Ok::<_, ()>(f(*x)),
                    _ => Err(()),
                },
            )
            .expect("evaluates");
            assert!(rows[0].ok, "{rows:?}");
        }
    }

    /// Sum of squares and its gradient, one entry made wrong.
    fn squares(n: usize, wrong: Option<usize>) -> (Vec<Value>, Vec<Option<Value>>) {
        let xs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() * 3.0).collect();
        let mut g: Vec<f64> = xs.iter().map(|x| 2.0 * x).collect();
        if let Some(j) = wrong {
            g[j] += 1.0;
        }
        (vec![Value::Arr(xs)], vec![Some(Value::Arr(g))])
    }

    fn sum_sq(a: &[Value]) -> Result<f64, ()> {
        match a {
            [Value::Arr(xs)] => Ok(xs.iter().map(|x| x * x).sum()),
            _ => Err(()),
        }
    }

    #[test]
    fn directions_agree_on_a_right_gradient_and_catch_a_wrong_entry() {
        let (args, good) = squares(100_000, None);
        assert_eq!(entries(&args, &good), 100_000);
        let mut runs = 0;
        let rows = compare_directions(&args, &good, DIRECTIONS, SEED, |a, _| {
            runs += 1;
            sum_sq(a)
        })
        .expect("evaluates");
        assert_eq!(runs, 2 * DIRECTIONS);
        assert_eq!(rows.len(), DIRECTIONS);
        assert!(rows.iter().all(|r| r.ok), "{rows:?}");
        assert_eq!(rows[0].name, "direction 1");
        for j in [0, 77_777, 99_999] {
            let (args, bad) = squares(100_000, Some(j));
            let rows = compare_directions(&args, &bad, DIRECTIONS, SEED, |a, _| sum_sq(a))
                .expect("evaluates");
            assert!(rows.iter().all(|r| !r.ok), "entry {j}: {rows:?}");
        }
    }

    #[test]
    fn directions_are_deterministic_and_differ_from_each_other() {
        let (args, good) = squares(10, None);
        let a = compare_directions(&args, &good, 3, SEED, |a, _| sum_sq(a)).expect("runs");
        let b = compare_directions(&args, &good, 3, SEED, |a, _| sum_sq(a)).expect("runs");
        assert_eq!(a, b);
        assert!(a[0].ad != a[1].ad && a[1].ad != a[2].ad, "{a:?}");
    }

    #[test]
    fn directional_differences_are_tangents() {
        let args = [Value::F64(1.5), Value::I64(3), Value::Arr(vec![2.0, -4.0])];
        let dir = check_direction(&args, &[true, false, true]);
        // Each input moves by its own step: h = 1e-6 · max(1, |x|) here.
        let close = |a: &Value, b: &[f64]| match a {
            Value::F64(x) => b.len() == 1 && (x - b[0]).abs() < 1e-9,
            Value::Arr(xs) => {
                xs.len() == b.len() && xs.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
            }
            _ => false,
        };
        assert!(dir.len() == 3 && dir[1].is_none(), "{dir:?}");
        assert!(dir[0].as_ref().is_some_and(|d| close(d, &[1.5])), "{dir:?}");
        assert!(
            dir[2].as_ref().is_some_and(|d| close(d, &[2.0, 4.0])),
            "{dir:?}"
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
    #[test]
    fn check_agrees_disagrees_and_sees_a_kink() {
        let sq = |a: &[Value]| match a {
            [Value::F64(x)] => Some(x * x),
            _ => None,
        };
        let at = [Value::F64(1.5)];
        assert_eq!(check(sq, &at, &[Some(Value::F64(3.0))]), Verdict::Agree);
        assert!(matches!(
            check(sq, &at, &[Some(Value::F64(3.01))]),
            Verdict::Disagree(_)
        ));
        let abs = |a: &[Value]| match a {
            [Value::F64(x)] => Some(x.abs()),
            _ => None,
        };
        // At the kink any gradient in [-1, 1] is defensible: not a failure.
        assert!(matches!(
            check(abs, &[Value::F64(0.0)], &[Some(Value::F64(0.5))]),
            Verdict::Unreliable(_)
        ));
        let trap = |_: &[Value]| None;
        assert!(matches!(
            check(trap, &at, &[Some(Value::F64(3.0))]),
            Verdict::Unreliable(_)
        ));
    }
}
